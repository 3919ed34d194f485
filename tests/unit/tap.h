/*
 * A tiny TAP producer for unit tests: ok(), is_int(), is_str(), is_mem(),
 * skip(), done_testing().  Header-only; each test file includes it once.
 */
#ifndef USBGW_TAP_H
#define USBGW_TAP_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_n, tap_failed;

static int tap_ok(int cond, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5), unused));
static int
tap_ok(int cond, const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	tap_n++;
	printf("%sok %d - ", cond ? "" : "not ", tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (!cond) {
		tap_failed++;
		printf("#   Failed at %s line %d\n", file, line);
	}
	fflush(stdout);
	return cond;
}

#define ok(cond, ...)	tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

#define is_int(got, want, ...) do {					\
	long long g_ = (long long)(got), w_ = (long long)(want);	\
	if (!ok(g_ == w_, __VA_ARGS__))					\
		printf("#   got %lld, expected %lld\n", g_, w_);		\
} while (0)

#define is_str(got, want, ...) do {					\
	const char *g_ = (got), *w_ = (want);				\
	int c_ = (g_ == NULL && w_ == NULL) ||				\
	    (g_ != NULL && w_ != NULL && strcmp(g_, w_) == 0);		\
	if (!ok(c_, __VA_ARGS__))					\
		printf("#   got \"%s\", expected \"%s\"\n",		\
		    g_ ? g_ : "(null)", w_ ? w_ : "(null)");		\
} while (0)

#define is_mem(got, want, len, ...)					\
	ok(memcmp((got), (want), (len)) == 0, __VA_ARGS__)

static void diag(const char *fmt, ...) __attribute__((format(printf, 1, 2), unused));
static void
diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

/* A test not run here, counted as passed ("ok N # skip why"). */
static void skip(const char *fmt, ...) __attribute__((format(printf, 1, 2), unused));
static void
skip(const char *fmt, ...)
{
	va_list ap;

	tap_n++;
	printf("ok %d # skip ", tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static int
done_testing(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

#endif
