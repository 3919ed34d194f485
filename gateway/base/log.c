#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <sys/time.h>

#include "base/log.h"

static const char *log_prog = "usbgw";
static int log_stderr = 1;
static int log_lvl = LOG_LVL_INFO;
static int log_as_json;

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
log_set_json(int on)
{
	log_as_json = on;
}

int
log_json(void)
{
	return log_as_json;
}

/* Valid UTF-8 (no overlongs, no surrogates)? */
static int
utf8_ok(const unsigned char *p, size_t n, size_t *len)
{
	unsigned c = p[0], need, cp, i;

	if (c < 0x80) {
		*len = 1;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf)
		need = 1, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		need = 2, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		need = 3, cp = c & 0x07;
	else
		return 0;
	if (n < need + 1)
		return 0;
	for (i = 1; i <= need; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((need == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (need == 3 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	*len = need + 1;
	return 1;
}

/*
 * s as a JSON string (quotes included) into out at *o, bounded by sz; a
 * byte that is not valid UTF-8 is written as \u00XX, so the line always
 * parses.  NULL as null.
 */
static void
json_str(char *out, size_t sz, size_t *o, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	size_t n, len, k;

#define PUT(c) do { if (*o + 1 < sz) out[(*o)++] = (c); } while (0)
	if (s == NULL) {
		for (k = 0; k < 4; k++)
			PUT("null"[k]);
		return;
	}
	n = strlen(s);
	PUT('"');
	while (n > 0 && *o + 8 < sz) {	/* room for the closing quote */
		if (*p == '"' || *p == '\\') {
			PUT('\\');
			PUT((char)*p);
			len = 1;
		} else if (*p >= 0x20 && *p < 0x7f) {
			PUT((char)*p);
			len = 1;
		} else if (*p >= 0x80 && utf8_ok(p, n, &len)) {
			for (k = 0; k < len; k++)
				PUT((char)p[k]);
		} else {
			PUT('\\');
			PUT('u');
			PUT('0');
			PUT('0');
			PUT(hex[*p >> 4]);
			PUT(hex[*p & 15]);
			len = 1;
		}
		p += len;
		n -= len;
	}
	PUT('"');
#undef PUT
	out[*o < sz ? *o : sz - 1] = '\0';
}

static void
emit(int lvl, const char *msg, const struct log_ctx *ctx)
{
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	struct timeval tv;
	struct tm tm;
	char ts[48], line[4096];
	size_t o = 0;

	gettimeofday(&tv, NULL);
	if (log_as_json) {
		gmtime_r(&tv.tv_sec, &tm);
		strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
		snprintf(ts + strlen(ts), sizeof(ts) - strlen(ts), ".%03ldZ",
		    (long)tv.tv_usec / 1000);
		o = (size_t)snprintf(line, sizeof(line), "{\"time\":\"%s\","
		    "\"level\":\"%s\",\"event\":", ts, level_names[lvl]);
		json_str(line, sizeof(line), &o, ctx && ctx->event ?
		    ctx->event : "log");
		o += (size_t)snprintf(line + o, o < sizeof(line) ?
		    sizeof(line) - o : 0, ",\"busid\":");
		json_str(line, sizeof(line), &o, ctx ? ctx->busid : NULL);
		o += (size_t)snprintf(line + o, o < sizeof(line) ?
		    sizeof(line) - o : 0, ",\"exporter\":");
		json_str(line, sizeof(line), &o, ctx ? ctx->exporter : NULL);
		o += (size_t)snprintf(line + o, o < sizeof(line) ?
		    sizeof(line) - o : 0, ",\"host\":");
		json_str(line, sizeof(line), &o, ctx ? ctx->host : NULL);
		o += (size_t)snprintf(line + o, o < sizeof(line) ?
		    sizeof(line) - o : 0, ",\"message\":");
		/* room for the closing brace whatever the message's size */
		json_str(line, sizeof(line) - 2, &o, msg);
		if (o > sizeof(line) - 2)
			o = sizeof(line) - 2;
		line[o++] = '}';
		line[o] = '\0';
		if (log_stderr)
			fprintf(stderr, "%s\n", line);
		else
			syslog(prio[lvl], "%s", line);
		return;
	}
	if (log_stderr) {
		localtime_r(&tv.tv_sec, &tm);
		strftime(ts, sizeof(ts), "%H:%M:%S", &tm);
		fprintf(stderr, "%s.%03ld %s[%s]: %s\n", ts,
		    (long)tv.tv_usec / 1000, log_prog, level_names[lvl], msg);
	} else
		syslog(prio[lvl], "%s", msg);
}

void
log_ctx(int lvl, const struct log_ctx *ctx, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	int e = errno;

	if (lvl > log_lvl)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	emit(lvl, msg, ctx);
	errno = e;
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
	char msg[2048];
	int n;

	if (lvl > log_lvl)
		return;
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	if (n < 0)
		return;
	if (err && (size_t)n < sizeof(msg))
		snprintf(msg + n, sizeof(msg) - (size_t)n, ": %s", strerror(err));
	emit(lvl, msg, NULL);
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
