/*
 * Durations and times on the command line, parsed strictly:
 *
 *	duration	30s, 10m, 2h, 1d (parse_duration; whole seconds)
 *	time		HH:MM[:SS]			(local; the next such time,
 *							 or the last for --since)
 *			YYYY-MM-DD[T| ]HH:MM[:SS]	(local)
 *			... followed by Z or +HH:MM / -HH:MM / +HHMM
 *			@UNIXSECONDS
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "control/config.h"
#include "usbgw.h"

#define TIME_EXAMPLES	"18:00, 2025-01-31T18:00, 2025-01-31 18:00:00, " \
			"2025-01-31T18:00Z or @1738346400"
#define MAX_SECONDS	(3650LL * 86400)

int
parse_duration_s(const char *s, int64_t *secs, char *err, size_t errlen)
{
	uint64_t ms;
	const char *es;

	if (parse_duration(s, (uint64_t)MAX_SECONDS * 1000, &ms,
	    &es) != 0) {
		snprintf(err, errlen, "\"%s\": expected a duration like 30s, "
		    "10m, 2h or 1d (%s)", s, es);
		return -1;
	}
	if (ms < 1000 || ms % 1000 != 0) {
		snprintf(err, errlen, "\"%s\": expected a whole number of "
		    "seconds, at least 1s", s);
		return -1;
	}
	*secs = (int64_t)(ms / 1000);
	return 0;
}

/* Exactly n digits at *p, advanced past them. */
static int
digits(const char **p, int n, int *out)
{
	int v = 0, i;

	for (i = 0; i < n; i++) {
		if (!isdigit((unsigned char)(*p)[i]))
			return -1;
		v = v * 10 + ((*p)[i] - '0');
	}
	*p += n;
	*out = v;
	return 0;
}

static int
days_in(int year, int month)
{
	static const int d[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };

	if (month == 2 && ((year % 4 == 0 && year % 100 != 0) ||
	    year % 400 == 0))
		return 29;
	return d[month - 1];
}

/* HH:MM[:SS] at *p. */
static int
clock_part(const char **p, struct tm *tm)
{
	int h, m, sec = 0;

	if (digits(p, 2, &h) != 0 || **p != ':')
		return -1;
	(*p)++;
	if (digits(p, 2, &m) != 0)
		return -1;
	if (**p == ':') {
		(*p)++;
		if (digits(p, 2, &sec) != 0)
			return -1;
	}
	if (h > 23 || m > 59 || sec > 59)
		return -1;
	tm->tm_hour = h;
	tm->tm_min = m;
	tm->tm_sec = sec;
	return 0;
}

/* mktime that refuses times the local zone skips (DST). */
static int
local_time(struct tm *tm, time_t *out)
{
	struct tm want = *tm;

	tm->tm_isdst = -1;
	*out = mktime(tm);
	if (*out == (time_t)-1)
		return -1;
	if (tm->tm_hour != want.tm_hour || tm->tm_min != want.tm_min ||
	    tm->tm_mday != want.tm_mday)
		return -1;
	return 0;
}

/* roll: +1 a bare clock time means the next one, -1 the last one. */
static int
parse_time_roll(const char *s, time_t now, int roll, time_t *out, char *err,
    size_t errlen)
{
	struct tm tm;
	const char *p = s;
	int y, mo, d, oh, om, sign;
	long long v;
	char *end;

	memset(&tm, 0, sizeof(tm));
	if (*p == '@') {
		v = strtoll(p + 1, &end, 10);
		if (p[1] == '\0' || *end != '\0' || !isdigit((unsigned char)p[1]))
			goto bad;
		*out = (time_t)v;
		return 0;
	}
	if (strlen(s) <= 8 && strchr(s, '-') == NULL) {
		localtime_r(&now, &tm);
		if (clock_part(&p, &tm) != 0 || *p != '\0')
			goto bad;
		if (local_time(&tm, out) != 0)
			goto nonexistent;
		if (roll > 0 && *out <= now) {
			tm.tm_mday++;
			if (local_time(&tm, out) != 0)
				goto nonexistent;
		} else if (roll < 0 && *out > now) {
			tm.tm_mday--;
			if (local_time(&tm, out) != 0)
				goto nonexistent;
		}
		return 0;
	}
	if (digits(&p, 4, &y) != 0 || *p++ != '-' || digits(&p, 2, &mo) != 0 ||
	    *p++ != '-' || digits(&p, 2, &d) != 0)
		goto bad;
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > days_in(y, mo)) {
		snprintf(err, errlen, "\"%s\": no such date", s);
		return -1;
	}
	if (*p != 'T' && *p != ' ')
		goto bad;
	p++;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	if (clock_part(&p, &tm) != 0)
		goto bad;
	if (*p == '\0') {
		if (local_time(&tm, out) != 0)
			goto nonexistent;
		return 0;
	}
	if (*p == 'Z' && p[1] == '\0') {
		*out = timegm(&tm);
		return 0;
	}
	if (*p != '+' && *p != '-')
		goto bad;
	sign = *p++ == '-' ? -1 : 1;
	if (digits(&p, 2, &oh) != 0)
		goto bad;
	if (*p == ':')
		p++;
	if (digits(&p, 2, &om) != 0 || *p != '\0' || oh > 23 || om > 59)
		goto bad;
	*out = timegm(&tm) - sign * (oh * 3600 + om * 60);
	return 0;
bad:
	snprintf(err, errlen, "\"%s\": expected a time like %s", s,
	    TIME_EXAMPLES);
	return -1;
nonexistent:
	snprintf(err, errlen, "\"%s\": no such local time (daylight saving "
	    "change?)", s);
	return -1;
}

int
parse_time(const char *s, time_t now, time_t *out, char *err, size_t errlen)
{
	return parse_time_roll(s, now, 1, out, err, errlen);
}

int
parse_since(const char *s, time_t now, time_t *out, char *err, size_t errlen)
{
	int64_t secs;
	size_t n = strspn(s, "0123456789");

	/* "2h" means two hours ago; anything with ':' '-' '@' is a time. */
	if (n > 0 && strpbrk(s, ":-@T ") == NULL) {
		if (parse_duration_s(s, &secs, err, errlen) != 0)
			return -1;
		*out = now - (time_t)secs;
		return 0;
	}
	return parse_time_roll(s, now, -1, out, err, errlen);
}
