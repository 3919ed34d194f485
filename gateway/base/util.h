/*
 * Small helpers shared by every program: allocation that aborts on
 * failure (and checks multiplication overflow), bounded string copies,
 * bounded number parsing.
 */
#ifndef USBGW_UTIL_H
#define USBGW_UTIL_H

#include <stddef.h>
#include <stdint.h>

#define nitems(a)	(sizeof(a) / sizeof((a)[0]))

void	*xmalloc(size_t);
void	*xcalloc(size_t, size_t);
void	*xreallocarray(void *, size_t, size_t);
char	*xstrdup(const char *);
char	*xstrndup(const char *, size_t);
int	 xasprintf(char **, const char *, ...) __attribute__((format(printf, 2, 3)));

/* strlcpy/strlcat semantics (glibc 2.36 has neither). */
size_t	 usbgw_strlcpy(char *, const char *, size_t);
char	*usbgw_fmt_utc(char *, size_t, int64_t);
size_t	 usbgw_strlcat(char *, const char *, size_t);

/*
 * Parse a decimal integer in [min, max].  Returns 0, or -1 with *errstr
 * set to "invalid", "too small" or "too large" (strtonum semantics).
 */
int	 parse_num(const char *s, long long min, long long max, long long *out,
	    const char **errstr);

/* Monotonic clock in microseconds. */
uint64_t now_usec(void);
/* The value of one hex digit (either case), -1 for anything else. */
int	 usbgw_hexval(int c);

/* Uniform random in [0, n), for jitter (not for secrets). */
uint32_t usbgw_random_uniform(uint32_t n);

/* ms spread by up to +-pct percent at random (pct < 100). */
unsigned usbgw_jitter(unsigned ms, unsigned pct);

/* Set O_NONBLOCK and FD_CLOEXEC. */
int	 fd_nonblock_cloexec(int fd);
void	 fd_keepalive(int fd);
/*
 * Read a whole regular file of at most max bytes into *buf (NUL-terminated,
 * length *len; the caller frees).  0 on success; 1 if it does not exist and
 * !must_exist; -1 with *errs ("PATH: why\n", the caller frees).
 */
int	 usbgw_read_config_file(const char *path, size_t max, int must_exist,
	    char **buf, size_t *len, char **errs);
/* The address part of "addr:port" or "[v6addr]:port", into out. */
void	 usbgw_hostport_addr(const char *hostport, char *out, size_t len);

#endif
