/*
 * Logging, in the manner of OpenBSD daemons: to stderr in the foreground,
 * to syslog otherwise.  log_warn() appends strerror(errno).  Untrusted
 * strings must go through log_escape() before they reach a log line.
 */
#ifndef USBGW_LOG_H
#define USBGW_LOG_H

#include <stdarg.h>
#include <stddef.h>

enum log_level {
	LOG_LVL_ERR = 0,
	LOG_LVL_WARN,
	LOG_LVL_INFO,
	LOG_LVL_DEBUG,
};

void	log_init(const char *progname, int to_stderr, int level);
/*
 * log-format = json: every line one JSON object, {"time", "level",
 * "event", "busid", "exporter", "host", "message"} (null when not known;
 * "event" is "log" for a plain line), for journald and log shippers.
 */
void	log_set_json(int);
int	log_json(void);

/* What a structured line is about (any member NULL). */
struct log_ctx {
	const char	*event;
	const char	*busid;
	const char	*exporter;
	const char	*host;
};
void	log_ctx(int level, const struct log_ctx *, const char *, ...)
	    __attribute__((format(printf, 3, 4)));
void	log_setlevel(int level);
int	log_getlevel(void);
int	log_level_parse(const char *s);	/* -1 if unknown */

void	log_warn(const char *, ...) __attribute__((format(printf, 1, 2)));
void	log_warnx(const char *, ...) __attribute__((format(printf, 1, 2)));
void	log_info(const char *, ...) __attribute__((format(printf, 1, 2)));
void	log_debug(const char *, ...) __attribute__((format(printf, 1, 2)));
void	fatal(const char *, ...) __attribute__((format(printf, 1, 2), noreturn));
void	fatalx(const char *, ...) __attribute__((format(printf, 1, 2), noreturn));

/*
 * Copy at most len bytes of s into out (size outsz) with every byte that
 * is not printable ASCII shown as \xHH; stops at a NUL.  Returns out.
 */
char	*log_escape(char *out, size_t outsz, const char *s, size_t len);

#endif
