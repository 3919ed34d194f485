#include <sys/socket.h>
#include <sys/stat.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"

void *
xmalloc(size_t n)
{
	void *p;

	if (n == 0)
		fatalx("xmalloc: zero size");
	if ((p = malloc(n)) == NULL)
		fatal("xmalloc: allocating %zu bytes", n);
	return p;
}

void *
xcalloc(size_t nmemb, size_t size)
{
	void *p;

	if (nmemb == 0 || size == 0)
		fatalx("xcalloc: zero size");
	if ((p = calloc(nmemb, size)) == NULL)
		fatal("xcalloc: allocating %zu * %zu bytes", nmemb, size);
	return p;
}

void *
xreallocarray(void *ptr, size_t nmemb, size_t size)
{
	void *p;

	if (nmemb == 0 || size == 0)
		fatalx("xreallocarray: zero size");
	if (size && nmemb > SIZE_MAX / size)
		fatalx("xreallocarray: %zu * %zu overflows", nmemb, size);
	if ((p = realloc(ptr, nmemb * size)) == NULL)
		fatal("xreallocarray: allocating %zu * %zu bytes", nmemb, size);
	return p;
}

char *
xstrdup(const char *s)
{
	char *p;

	if ((p = strdup(s)) == NULL)
		fatal("xstrdup");
	return p;
}

char *
xstrndup(const char *s, size_t n)
{
	char *p;

	if ((p = strndup(s, n)) == NULL)
		fatal("xstrndup");
	return p;
}

int
xasprintf(char **ret, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(ret, fmt, ap);
	va_end(ap);
	if (n < 0)
		fatal("xasprintf");
	return n;
}

size_t
usbgw_strlcpy(char *dst, const char *src, size_t dsize)
{
	size_t len = strlen(src);

	if (dsize != 0) {
		size_t n = len < dsize - 1 ? len : dsize - 1;
		memcpy(dst, src, n);
		dst[n] = '\0';
	}
	return len;
}

size_t
usbgw_strlcat(char *dst, const char *src, size_t dsize)
{
	size_t dlen = strnlen(dst, dsize);

	if (dlen == dsize)
		return dlen + strlen(src);
	return dlen + usbgw_strlcpy(dst + dlen, src, dsize - dlen);
}

int
parse_num(const char *s, long long min, long long max, long long *out,
    const char **errstr)
{
	char *end;
	long long v;

	*errstr = NULL;
	if (s == NULL || *s == '\0') {
		*errstr = "invalid";
		return -1;
	}
	errno = 0;
	v = strtoll(s, &end, 10);
	if (*end != '\0' || end == s) {
		*errstr = "invalid";
		return -1;
	}
	if ((v == LLONG_MIN && errno == ERANGE) || v < min) {
		*errstr = "too small";
		return -1;
	}
	if ((v == LLONG_MAX && errno == ERANGE) || v > max) {
		*errstr = "too large";
		return -1;
	}
	*out = v;
	return 0;
}

uint64_t
now_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int
fd_nonblock_cloexec(int fd)
{
	int fl;

	if ((fl = fcntl(fd, F_GETFL)) == -1 ||
	    fcntl(fd, F_SETFL, fl | O_NONBLOCK) == -1)
		return -1;
	if ((fl = fcntl(fd, F_GETFD)) == -1 ||
	    fcntl(fd, F_SETFD, fl | FD_CLOEXEC) == -1)
		return -1;
	return 0;
}

/*
 * TCP keep-alive for a connection that may carry nothing for long (an
 * idle claim or import): the only way to find a peer host that vanished
 * (power, cable).  After 10 s idle, 3 probes 5 s apart: gone in ~25 s.
 */
void
fd_keepalive(int fd)
{
	int one = 1, idle = 10, intvl = 5, cnt = 3;

	if (fd < 0)
		return;
	(void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl,
	    sizeof(intvl));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

/*
 * A uniform random number in [0, n) (0 when n is 0), for jitter: not
 * for secrets.  glibc 2.36 has arc4random_uniform; elsewhere a
 * xorshift64* generator seeded once from getrandom().
 */
#if defined(__GLIBC__) && (__GLIBC__ > 2 || \
    (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 36))
uint32_t
usbgw_random_uniform(uint32_t n)
{
	return n == 0 ? 0 : arc4random_uniform(n);
}
#else
#include <sys/random.h>

uint32_t
usbgw_random_uniform(uint32_t n)
{
	static uint64_t s;

	if (n == 0)
		return 0;
	while (s == 0)
		if (getrandom(&s, sizeof(s), 0) != sizeof(s))
			s = now_usec() | 1;
	s ^= s >> 12;
	s ^= s << 25;
	s ^= s >> 27;
	/* (the modulo bias is below 2^-32 for a jitter's n) */
	return (uint32_t)((s * 2685821657736338717ull >> 32) % n);
}
#endif

/* ms spread by up to +-pct percent at random (pct < 100). */
unsigned
usbgw_jitter(unsigned ms, unsigned pct)
{
	uint32_t span = (uint32_t)((uint64_t)ms * pct / 100);

	return ms - span + usbgw_random_uniform(2 * span + 1);
}

int
usbgw_hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int
usbgw_read_config_file(const char *path, size_t max, int must_exist,
    char **bufp, size_t *lenp, char **errs)
{
	struct stat st;
	char *buf;
	ssize_t r;
	size_t off = 0;
	int fd;

	*errs = NULL;
	*bufp = NULL;
	*lenp = 0;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) == -1) {
		if (errno == ENOENT && !must_exist)
			return 1;
		xasprintf(errs, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		xasprintf(errs, "%s: not a regular file\n", path);
		close(fd);
		return -1;
	}
	if ((size_t)st.st_size > max) {
		xasprintf(errs, "%s: larger than %zu bytes\n", path, max);
		close(fd);
		return -1;
	}
	buf = xmalloc((size_t)st.st_size + 1);
	while (off < (size_t)st.st_size) {
		r = read(fd, buf + off, (size_t)st.st_size - off);
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		off += (size_t)r;
	}
	close(fd);
	buf[off] = '\0';
	*bufp = buf;
	*lenp = off;
	return 0;
}

void
usbgw_hostport_addr(const char *hostport, char *out, size_t len)
{
	const char *e;
	size_t n;

	if (hostport[0] == '[' && (e = strchr(hostport, ']')) != NULL) {
		n = (size_t)(e - hostport - 1);
		hostport++;
	} else if ((e = strrchr(hostport, ':')) != NULL)
		n = (size_t)(e - hostport);
	else
		n = strlen(hostport);
	if (n >= len)
		n = len - 1;
	memcpy(out, hostport, n);
	out[n] = '\0';
}

/*
 * Unix seconds as 2025-01-31T17:00:00Z: ISO 8601 in UTC, the zone said
 * (what usbgw's time parser reads back).  Never a raw epoch where a
 * person reads it.
 */
char *
usbgw_fmt_utc(char *buf, size_t len, int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (gmtime_r(&tt, &tm) == NULL ||
	    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(buf, len, "@%lld", (long long)t);
	return buf;
}
