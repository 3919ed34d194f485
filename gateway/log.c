#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <sys/time.h>

#include "log.h"

static const char *log_prog = "usbgw";
static int log_stderr = 1;
static int log_lvl = LOG_LVL_INFO;

static const char *const level_names[] = { "error", "warning", "info", "debug" };

void
log_init(const char *progname, int to_stderr, int level)
{
	log_prog = progname;
	log_stderr = to_stderr;
	log_lvl = level;
	if (!to_stderr)
		openlog(progname, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

void
log_setlevel(int level)
{
	log_lvl = level;
}

int
log_getlevel(void)
{
	return log_lvl;
}

int
log_level_parse(const char *s)
{
	size_t i;

	for (i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
		if (strcmp(s, level_names[i]) == 0)
			return (int)i;
	if (strcmp(s, "warn") == 0)
		return LOG_LVL_WARN;
	return -1;
}

static void vlog(int, const char *, va_list, int)
    __attribute__((format(printf, 2, 0)));

static void
vlog(int lvl, const char *fmt, va_list ap, int err)
{
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	char msg[2048];
	int n;

	if (lvl > log_lvl)
		return;
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	if (n < 0)
		return;
	if (err && (size_t)n < sizeof(msg))
		snprintf(msg + n, sizeof(msg) - (size_t)n, ": %s", strerror(err));
	if (log_stderr) {
		struct timeval tv;
		struct tm tm;
		char ts[32];

		gettimeofday(&tv, NULL);
		localtime_r(&tv.tv_sec, &tm);
		strftime(ts, sizeof(ts), "%H:%M:%S", &tm);
		fprintf(stderr, "%s.%03ld %s[%s]: %s\n", ts, (long)tv.tv_usec / 1000,
		    log_prog, level_names[lvl], msg);
	} else
		syslog(prio[lvl], "%s", msg);
}

#define LOGFN(name, lvl, err)				\
void							\
name(const char *fmt, ...)				\
{							\
	va_list ap;					\
	int e = errno;					\
	va_start(ap, fmt);				\
	vlog(lvl, fmt, ap, err ? e : 0);		\
	va_end(ap);					\
	errno = e;					\
}

LOGFN(log_warn, LOG_LVL_WARN, 1)
LOGFN(log_warnx, LOG_LVL_WARN, 0)
LOGFN(log_info, LOG_LVL_INFO, 0)
LOGFN(log_debug, LOG_LVL_DEBUG, 0)

void
fatal(const char *fmt, ...)
{
	va_list ap;
	int e = errno;

	va_start(ap, fmt);
	vlog(LOG_LVL_ERR, fmt, ap, e);
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_LVL_ERR, fmt, ap, 0);
	va_end(ap);
	exit(1);
}

char *
log_escape(char *out, size_t outsz, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t i, o = 0;

	if (outsz == 0)
		return out;
	for (i = 0; i < len && s[i] != '\0'; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c >= 0x20 && c < 0x7f && c != '\\') {
			if (o + 1 >= outsz)
				break;
			out[o++] = (char)c;
		} else {
			if (o + 4 >= outsz)
				break;
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 0xf];
		}
	}
	out[o] = '\0';
	return out;
}
