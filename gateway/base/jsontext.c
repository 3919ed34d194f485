/*
 * JSON as text without a tree (jsontext.h).  The writer's and the
 * scanner's output are pinned against jansson's by tests/unit/
 * test_jsontext.c: same values, same bytes.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/jsontext.h"
#include "base/util.h"

void
jtext_init(struct jtext *b, size_t limit)
{
	memset(b, 0, sizeof(*b));
	b->limit = limit;
}

void
jtext_free(struct jtext *b)
{
	free(b->buf);
	memset(b, 0, sizeof(*b));
}

/* Room for n more bytes; false (and over set) past the limit. */
static bool
room(struct jtext *b, size_t n)
{
	size_t want;

	if (b->over)
		return false;
	if (n > b->limit || b->len > b->limit - n) {
		b->over = true;
		return false;
	}
	if (b->cap - b->len >= n)
		return true;
	/* cap never passes the limit: put() relies on it */
	want = b->cap < 4096 ? 4096 : b->cap;
	while (want < b->limit && want - b->len < n)
		want = want > b->limit / 2 ? b->limit : want * 2;
	if (want > b->limit)
		want = b->limit;
	b->buf = xreallocarray(b->buf, 1, want);
	b->cap = want;
	return true;
}

#define JT_HUGE	(2 * 1024 * 1024)

void
jtext_reserve(struct jtext *b, size_t n)
{
	if (b->limit - b->len < n)
		n = b->limit - b->len;
	/*
	 * A big empty buffer in 2 MiB pages where the kernel allows it (THP
	 * "madvise"): one page fault per 2 MiB written instead of per 4 KiB.
	 */
	if (b->buf == NULL && n >= 2 * JT_HUGE) {
		size_t sz = (n + JT_HUGE - 1) / JT_HUGE * JT_HUGE;
		void *p;

		if (posix_memalign(&p, JT_HUGE, sz) == 0) {
			(void)madvise(p, sz, MADV_HUGEPAGE);
			b->buf = p;
			b->cap = sz < b->limit ? sz : b->limit;
			return;
		}
	}
	if (b->cap - b->len < n) {
		b->cap = b->len + n;
		b->buf = xreallocarray(b->buf, 1, b->cap);
	}
}

void
jt_raw(struct jtext *b, const char *s, size_t n)
{
	if (n == 0 || !room(b, n))
		return;
	memcpy(b->buf + b->len, s, n);
	b->len += n;
}

static void
put(struct jtext *b, char c)
{
	if (b->len < b->cap && !b->over) {
		b->buf[b->len++] = c;
		return;
	}
	jt_raw(b, &c, 1);
}

static void
comma(struct jtext *b)
{
	char c;

	if (b->len == 0)
		return;
	c = b->buf[b->len - 1];
	if (c != '{' && c != '[' && c != ':')
		put(b, ',');
}

/*
 * The length of the UTF-8 sequence at p (at most end - p bytes) and its
 * code point; 0 if it is not valid UTF-8 (overlong, a surrogate, over
 * U+10FFFF, truncated), as jansson's utf8_check_string judges.
 */
static size_t
utf8_next(const unsigned char *p, const unsigned char *end, uint32_t *cp)
{
	uint32_t c = p[0], min;
	size_t n, i;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		c &= 0x1f;
		min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		c &= 0x0f;
		min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		c &= 0x07;
		min = 0x10000;
	} else
		return 0;
	if ((size_t)(end - p) < n)
		return 0;
	for (i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (p[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return n;
}

/* The escape jansson writes for c (< 0x20, '"' or '\\'). */
static void
escape(struct jtext *b, unsigned char c)
{
	static const char hex[] = "0123456789ABCDEF";
	char seq[6] = { '\\', 'u', '0', '0', 0, 0 };

	switch (c) {
	case '\\': jt_raw(b, "\\\\", 2); return;
	case '"': jt_raw(b, "\\\"", 2); return;
	case '\b': jt_raw(b, "\\b", 2); return;
	case '\f': jt_raw(b, "\\f", 2); return;
	case '\n': jt_raw(b, "\\n", 2); return;
	case '\r': jt_raw(b, "\\r", 2); return;
	case '\t': jt_raw(b, "\\t", 2); return;
	}
	seq[4] = hex[c >> 4];
	seq[5] = hex[c & 15];
	jt_raw(b, seq, 6);
}

/* s[0..n) as a JSON string, quotes included. */
static void
str_n(struct jtext *b, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + n, *run;
	uint32_t cp;
	size_t k;

	put(b, '"');
	run = p;
	while (p < end) {
		if (*p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\') {
			p++;
			continue;
		}
		if (*p >= 0x80 && (k = utf8_next(p, end, &cp)) != 0) {
			p += k;
			continue;
		}
		jt_raw(b, (const char *)run, (size_t)(p - run));
		if (*p < 0x80)
			escape(b, *p);
		else
			jt_raw(b, "\xef\xbf\xbd", 3);	/* U+FFFD */
		run = ++p;
	}
	jt_raw(b, (const char *)run, (size_t)(p - run));
	put(b, '"');
}

void
jt_open(struct jtext *b, char c)
{
	comma(b);
	put(b, c);
}

void
jt_close(struct jtext *b, char c)
{
	put(b, c);
}

/* A key made of characters JSON writes as they are: copied. */
static bool
plain_ascii(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x80 ||
		    s[i] == '"' || s[i] == '\\')
			return false;
	return true;
}

void
jt_key(struct jtext *b, const char *key)
{
	size_t n = strlen(key);

	comma(b);
	if (n < 64 && plain_ascii(key, n) && room(b, n + 3)) {
		char *o = b->buf + b->len;

		o[0] = '"';
		memcpy(o + 1, key, n);
		o[n + 1] = '"';
		o[n + 2] = ':';
		b->len += n + 3;
		return;
	}
	str_n(b, key, n);
	put(b, ':');
}

void
jt_str(struct jtext *b, const char *s)
{
	comma(b);
	str_n(b, s, strlen(s));
}

void
jt_int(struct jtext *b, int64_t v)
{
	char num[24];
	int n;

	comma(b);
	n = snprintf(num, sizeof(num), "%" PRId64, v);
	jt_raw(b, num, (size_t)n);
}

void
jt_null(struct jtext *b)
{
	comma(b);
	jt_raw(b, "null", 4);
}

void
jt_bool(struct jtext *b, bool v)
{
	comma(b);
	if (v)
		jt_raw(b, "true", 4);
	else
		jt_raw(b, "false", 5);
}

void
jt_kstr(struct jtext *b, const char *key, const char *s)
{
	jt_key(b, key);
	str_n(b, s, strlen(s));
}

void
jt_kint(struct jtext *b, const char *key, int64_t v)
{
	jt_key(b, key);
	jt_int(b, v);
}

void
jt_knull(struct jtext *b, const char *key)
{
	jt_key(b, key);
	jt_raw(b, "null", 4);
}

void
jt_kbool(struct jtext *b, const char *key, bool v)
{
	jt_key(b, key);
	jt_bool(b, v);
}

void
jt_kint_or_null(struct jtext *b, const char *key, int64_t v)
{
	if (v != 0)
		jt_kint(b, key, v);
	else
		jt_knull(b, key);
}

/* ---- the scanner -------------------------------------------------------- */

static const char *fail(struct jt_error *, const char *, const char *,
    const char *, ...) __attribute__((format(printf, 4, 5)));

static const char *
fail(struct jt_error *e, const char *start, const char *at, const char *fmt,
    ...)
{
	va_list ap;

	e->position = (size_t)(at - start);
	va_start(ap, fmt);
	vsnprintf(e->text, sizeof(e->text), fmt, ap);
	va_end(ap);
	return NULL;
}

const char *
jt_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' ||
	    *p == '\r'))
		p++;
	return p;
}

static bool
hex4(const char *p, const char *end, uint32_t *v)
{
	int i, h;

	if (end - p < 4)
		return false;
	*v = 0;
	for (i = 0; i < 4; i++) {
		if ((h = usbgw_hexval((unsigned char)p[i])) < 0)
			return false;
		*v = *v << 4 | (uint32_t)h;
	}
	return true;
}

/* Append code point cp as UTF-8 to out[*n], if it fits whole. */
static bool
utf8_put(char *out, size_t outsz, size_t *n, uint32_t cp)
{
	char u[4];
	size_t k;

	if (cp < 0x80) {
		u[0] = (char)cp;
		k = 1;
	} else if (cp < 0x800) {
		u[0] = (char)(0xc0 | cp >> 6);
		u[1] = (char)(0x80 | (cp & 0x3f));
		k = 2;
	} else if (cp < 0x10000) {
		u[0] = (char)(0xe0 | cp >> 12);
		u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		u[2] = (char)(0x80 | (cp & 0x3f));
		k = 3;
	} else {
		u[0] = (char)(0xf0 | cp >> 18);
		u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		u[3] = (char)(0x80 | (cp & 0x3f));
		k = 4;
	}
	if (outsz == 0 || *n + k > outsz - 1)
		return false;
	memcpy(out + *n, u, k);
	*n += k;
	return true;
}

/*
 * The string at p (its quote).  Decoded into out when out is not NULL;
 * *plain set when it has no escape (then its bytes are its value).
 */
static const char *
string_scan(const char *start, const char *p, const char *end, char *out,
    size_t outsz, size_t *outlen, bool *truncated, bool *plain,
    struct jt_error *e)
{
	const char *q = p + 1;
	uint32_t cp, lo;
	size_t k;
	bool full = false;

	*plain = true;
	*outlen = 0;
	if (truncated != NULL)
		*truncated = false;
	for (;;) {
		unsigned char c;

		if (q >= end)
			return fail(e, start, p, "premature end of input in a "
			    "string");
		c = (unsigned char)*q;
		if (c == '"')
			break;
		if (c < 0x20)
			return fail(e, start, q, "control character 0x%x in a "
			    "string", c);
		if (c == '\\') {
			*plain = false;
			if (q + 1 >= end)
				return fail(e, start, q, "premature end of "
				    "input in an escape");
			switch (q[1]) {
			case '"': cp = '"'; break;
			case '\\': cp = '\\'; break;
			case '/': cp = '/'; break;
			case 'b': cp = '\b'; break;
			case 'f': cp = '\f'; break;
			case 'n': cp = '\n'; break;
			case 'r': cp = '\r'; break;
			case 't': cp = '\t'; break;
			case 'u':
				if (!hex4(q + 2, end, &cp))
					return fail(e, start, q, "invalid "
					    "\\u escape");
				if (cp >= 0xdc00 && cp <= 0xdfff)
					return fail(e, start, q, "invalid "
					    "Unicode '\\u%04X'", cp);
				if (cp >= 0xd800 && cp <= 0xdbff) {
					if (end - q < 12 || q[6] != '\\' ||
					    q[7] != 'u' ||
					    !hex4(q + 8, end, &lo) ||
					    lo < 0xdc00 || lo > 0xdfff)
						return fail(e, start, q,
						    "invalid Unicode '\\u%04X'",
						    cp);
					cp = 0x10000 + ((cp - 0xd800) << 10) +
					    (lo - 0xdc00);
					q += 6;
				}
				if (cp == 0)
					return fail(e, start, q, "\\u0000 is "
					    "not allowed without JSON_ALLOW_NUL");
				q += 4;
				break;
			default:
				return fail(e, start, q, "invalid escape");
			}
			q += 2;
		} else if (c < 0x80) {
			cp = c;
			q++;
		} else {
			k = utf8_next((const unsigned char *)q,
			    (const unsigned char *)end, &cp);
			if (k == 0)
				return fail(e, start, q, "invalid UTF-8 in a "
				    "string");
			q += k;
		}
		/* truncated: a prefix, nothing shorter appended after it */
		if (out != NULL && !full && !utf8_put(out, outsz, outlen, cp)) {
			full = true;
			if (truncated != NULL)
				*truncated = true;
		}
	}
	if (out != NULL && outsz > 0)
		out[*outlen] = '\0';
	return q + 1;
}

const char *
jt_string(const char *start, const char *p, const char *end, char *out,
    size_t outsz, bool *truncated, struct jt_error *e)
{
	size_t n;
	bool plain;

	if (p >= end || *p != '"')
		return fail(e, start, p, "expected a string");
	return string_scan(start, p, end, out, outsz, &n, truncated, &plain, e);
}

/* A string value, written again as jansson writes it. */
static const char *
string_copy(const char *start, const char *p, const char *end,
    struct jtext *out, struct jt_error *e)
{
	const char *q;
	size_t n;
	bool plain;
	char *tmp;

	q = string_scan(start, p, end, NULL, 0, &n, NULL, &plain, e);
	if (q == NULL || out == NULL)
		return q;
	if (plain) {		/* no escape: jansson writes the bytes as they are */
		jt_raw(out, p, (size_t)(q - p));
		return q;
	}
	/* the decoded value is never longer than its escaped form */
	tmp = xmalloc((size_t)(q - p) + 1);
	string_scan(start, p, end, tmp, (size_t)(q - p) + 1, &n, NULL, &plain,
	    e);
	str_n(out, tmp, n);
	free(tmp);
	return q;
}

/* A number: as jansson reads it (integer or real) and writes it again. */
static const char *
number_copy(const char *start, const char *p, const char *end,
    struct jtext *out, struct jt_error *e)
{
	const char *q = p;
	bool real = false;
	char num[64], *ep, *c;
	size_t n;
	int len;

	if (q < end && *q == '-')
		q++;
	if (q < end && *q == '0')
		q++;
	else if (q < end && *q >= '1' && *q <= '9')
		while (q < end && *q >= '0' && *q <= '9')
			q++;
	else
		return fail(e, start, p, "invalid number");
	if (q < end && *q == '.') {
		real = true;
		if (++q >= end || *q < '0' || *q > '9')
			return fail(e, start, p, "invalid number");
		while (q < end && *q >= '0' && *q <= '9')
			q++;
	}
	if (q < end && (*q == 'e' || *q == 'E')) {
		real = true;
		q++;
		if (q < end && (*q == '+' || *q == '-'))
			q++;
		if (q >= end || *q < '0' || *q > '9')
			return fail(e, start, p, "invalid number");
		while (q < end && *q >= '0' && *q <= '9')
			q++;
	}
	n = (size_t)(q - p);
	if (n >= sizeof(num) && !real)
		return fail(e, start, p, "too big integer");
	if (n < sizeof(num)) {
		memcpy(num, p, n);
		num[n] = '\0';
	}
	errno = 0;
	if (!real) {
		long long v = strtoll(num, &ep, 10);

		if (errno == ERANGE)
			return fail(e, start, p, v < 0 ? "too big negative "
			    "integer" : "too big integer");
		if (out != NULL)
			len = snprintf(num, sizeof(num), "%lld", v);
		else
			return q;
	} else {
		double d;

		if (n < sizeof(num))
			d = strtod(num, &ep);
		else {
			char *big = xmalloc(n + 1);

			memcpy(big, p, n);
			big[n] = '\0';
			d = strtod(big, &ep);
			free(big);
		}
		if (errno == ERANGE && (d == HUGE_VAL || d == -HUGE_VAL))
			return fail(e, start, p, "real number overflow");
		if (out == NULL)
			return q;
		/* jansson's jsonp_dtostr with precision 15 */
		len = snprintf(num, sizeof(num), "%.15g", d);
		if (len < 0 || (size_t)len >= sizeof(num) - 3)
			return fail(e, start, p, "real number not writable");
		if (strchr(num, '.') == NULL && strchr(num, 'e') == NULL) {
			memcpy(num + len, ".0", 3);
			len += 2;
		}
		if ((c = strchr(num, 'e')) != NULL) {
			char *s = c + 1, *z;

			if (*s == '-')
				s++;
			else if (*s == '+') {
				memmove(s, s + 1, strlen(s + 1) + 1);
				len--;
			}
			for (z = s; *z == '0' && z[1] != '\0'; z++)
				;
			if (z != s) {
				memmove(s, z, strlen(z) + 1);
				len -= (int)(z - s);
			}
		}
	}
	jt_raw(out, num, (size_t)len);
	return q;
}

static void
newline(struct jtext *out, int indent, int depth)
{
	size_t n;

	if (indent <= 0)
		return;
	n = (size_t)indent * (size_t)depth;
	put(out, '\n');
	while (n > 0) {
		static const char sp[] = "                                ";
		size_t k = n < sizeof(sp) - 1 ? n : sizeof(sp) - 1;

		jt_raw(out, sp, k);
		n -= k;
	}
}

static const char *
literal(const char *start, const char *p, const char *end, const char *word,
    struct jtext *out, struct jt_error *e)
{
	size_t n = strlen(word);

	if ((size_t)(end - p) < n || memcmp(p, word, n) != 0)
		return fail(e, start, p, "invalid token");
	if (out != NULL)
		jt_raw(out, word, n);
	return p + n;
}

const char *
jt_scan(const char *start, const char *p, const char *end, struct jtext *out,
    int indent, int depth, struct jt_error *e)
{
	char open, close;
	bool obj, first;
	const char *body;

	p = jt_ws(p, end);
	if (p >= end)
		return fail(e, start, p, "premature end of input");
	switch (*p) {
	case '"':
		return string_copy(start, p, end, out, e);
	case 't':
		return literal(start, p, end, "true", out, e);
	case 'f':
		return literal(start, p, end, "false", out, e);
	case 'n':
		return literal(start, p, end, "null", out, e);
	case '{':
	case '[':
		break;
	default:
		if (*p == '-' || (*p >= '0' && *p <= '9'))
			return number_copy(start, p, end, out, e);
		return fail(e, start, p, "invalid token");
	}
	if (depth >= JT_MAX_DEPTH)
		return fail(e, start, p, "maximum parsing depth reached");
	open = *p;
	obj = open == '{';
	close = obj ? '}' : ']';
	body = jt_ws(p + 1, end);
	if (body < end && *body == close) {	/* jansson: "{}" and "[]" */
		if (out != NULL) {
			put(out, open);
			put(out, close);
		}
		return body + 1;
	}
	if (out != NULL)
		put(out, open);
	p = body;
	for (first = true;; first = false) {
		if (!first) {
			p = jt_ws(p, end);
			if (p < end && *p == close)
				break;
			if (p >= end || *p != ',')
				return fail(e, start, p, obj ? "'}' or ',' "
				    "expected" : "']' or ',' expected");
			if (out != NULL)
				put(out, ',');
			p++;
		}
		if (out != NULL)
			newline(out, indent, depth + 1);
		if (obj) {
			p = jt_ws(p, end);
			if (p >= end || *p != '"')
				return fail(e, start, p, "string or '}' "
				    "expected");
			if ((p = string_copy(start, p, end, out, e)) == NULL)
				return NULL;
			p = jt_ws(p, end);
			if (p >= end || *p != ':')
				return fail(e, start, p, "':' expected");
			p++;
			if (out != NULL) {
				put(out, ':');
				if (indent > 0)
					put(out, ' ');
			}
		}
		if ((p = jt_scan(start, p, end, out, indent, depth + 1, e)) ==
		    NULL)
			return NULL;
	}
	if (out != NULL) {
		newline(out, indent, depth);
		put(out, close);
	}
	return p + 1;
}
