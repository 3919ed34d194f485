/*
 * The rule language: parser, printer and evaluator (protocol.md, part 3).
 *
 * The parser is a hand-written recursive descent over the text with a
 * small lexer (words, "strings", '{', '}'); a word that contains '(' runs
 * to the matching ')' so that conditions such as localtime(08:00-18:00)
 * or allowed-matches(with-interface one-of { 03:*:* }) are one token.
 * Every error names the column and what was expected; the first error
 * wins.
 *
 * Set semantics follow USBGuard's Rule::Attribute (the rule's values are
 * patterns, the device's values are concrete), except that "equals"
 * requires a one-to-one pairing of patterns and device values where
 * USBGuard only checks sizes and one direction.
 */
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "policy/rule.h"
#include "base/util.h"

enum attr_kind {
	A_ID = 0,
	A_NAME,
	A_MANUFACTURER,
	A_SERIAL,
	A_HASH,
	A_VIA_PORT,
	A_VIA_EXPORTER,
	A_WITH_INTERFACE,
	A_TO_HOST,
	A_LABEL,
	A_NKINDS
};

enum value_type {
	V_ID,		/* vid:pid */
	V_IFACE,	/* cc:ss:pp */
	V_STRING,	/* "quoted" */
	V_HASH,		/* "64 hex" */
	V_EXPNAME,	/* bare or quoted exporter name, '*' globs */
	V_HOST,		/* host name (glob) or address[/prefix] */
};

static const struct attr_def {
	const char	*name;
	const char	*what;		/* for "expected ..." */
	enum value_type	 type;
	int		 multi;		/* the device may have several values */
} attr_defs[A_NKINDS] = {
	[A_ID] =		{ "id", "vid:pid", V_ID, 0 },
	[A_NAME] =		{ "name", "quoted string", V_STRING, 0 },
	[A_MANUFACTURER] =	{ "manufacturer", "quoted string", V_STRING, 0 },
	[A_SERIAL] =		{ "serial", "quoted string", V_STRING, 0 },
	[A_HASH] =		{ "hash", "quoted SHA-256 (64 hex digits)",
				    V_HASH, 0 },
	[A_VIA_PORT] =		{ "via-port", "quoted string", V_STRING, 0 },
	[A_VIA_EXPORTER] =	{ "via-exporter", "exporter name", V_EXPNAME, 0 },
	[A_WITH_INTERFACE] =	{ "with-interface", "cc:ss:pp", V_IFACE, 1 },
	[A_TO_HOST] =		{ "to-host", "host name or address", V_HOST, 0 },
	[A_LABEL] =		{ "label", "quoted string", V_STRING, 0 },
};

enum setop {
	OP_EQUALS = 0,		/* the default */
	OP_ALL_OF,
	OP_ONE_OF,
	OP_NONE_OF,
	OP_EQUALS_ORDERED,
	OP_MATCH_ALL,
	OP_NOPS
};

static const char *const setop_names[OP_NOPS] = {
	"equals", "all-of", "one-of", "none-of", "equals-ordered", "match-all"
};

enum cond_kind {
	C_TRUE = 0,
	C_FALSE,
	C_LOCALTIME,
	C_WEEKDAY,
	C_ALLOWED_MATCHES,
};

struct rvalue {
	uint16_t		 vid, pid;
	uint8_t			 any_vid, any_pid;
	uint8_t			 cls, sub, proto;
	uint8_t			 any_sub, any_proto;
	uint8_t			 is_addr;
	uint8_t			 prefix;
	struct usbgw_addr	 addr;
	char			*str;
};

struct rattr {
	uint8_t			 present;
	uint8_t			 op;
	uint16_t		 n;
	struct rvalue		*v;
};

struct rcond {
	uint8_t			 kind;
	uint8_t			 negated;
	uint8_t			 days;		/* bit tm_wday */
	uint32_t		 begin, end;	/* seconds of the day */
	struct rule		*query;
};

/* One inner rule of an interface-policy (protocol.md part 3). */
struct riface {
	uint8_t			 allow;
	uint8_t			 any_cls;	/* "*:*:*" */
	struct rvalue		 pat;		/* cls/sub/proto, any_sub/any_proto */
	uint8_t			 has_index, index;	/* bInterfaceNumber */
	uint8_t			 has_config, config;	/* bConfigurationValue */
};

struct rule {
	enum rule_target	 target;
	struct rattr		 a[A_NKINDS];
	uint8_t			 has_cond;
	uint8_t			 cop;
	uint16_t		 nc;
	struct rcond		*c;
	uint8_t			 has_ipol;	/* interface-policy */
	uint8_t			 ipol_allow;	/* its implicit target */
	uint16_t		 ni;
	struct riface		*ri;
};

static const char *const target_names[] = {
	[RULE_ALLOW] = "allow",
	[RULE_BLOCK] = "block",
	[RULE_REJECT] = "reject",
	[RULE_ASK] = "ask",
};

static const char *const day_names[7] = {
	"sun", "mon", "tue", "wed", "thu", "fri", "sat"
};

/* What RULE_PARSE_DEVICE allows, for its messages. */
#define DEVICE_ATTRS	"id, name, manufacturer, serial, hash, " \
			"with-interface, via-port"

#define SECONDS_PER_DAY	86400
#define GOT_MAX		40	/* bytes of a token quoted in an error */

/* ------------------------------------------------------------------ */
/* Freeing, small helpers                                               */

static void
attr_clear(struct rattr *a)
{
	uint16_t i;

	for (i = 0; i < a->n; i++)
		free(a->v[i].str);
	free(a->v);
	memset(a, 0, sizeof(*a));
}

void
rule_free(struct rule *r)
{
	size_t	i;

	if (r == NULL)
		return;
	for (i = 0; i < A_NKINDS; i++)
		attr_clear(&r->a[i]);
	for (i = 0; i < r->nc; i++)
		rule_free(r->c[i].query);
	free(r->c);
	free(r->ri);
	free(r);
}

enum rule_target
rule_target(const struct rule *r)
{
	return r->target;
}

const char *
rule_target_name(enum rule_target t)
{
	if ((unsigned)t >= nitems(target_names))
		return "?";
	return target_names[t];
}

int
rule_target_parse(const char *s)
{
	size_t i;

	for (i = 0; i < nitems(target_names); i++)
		if (strcmp(s, target_names[i]) == 0)
			return (int)i;
	return -1;
}

const char *
rule_label(const struct rule *r)
{
	if (!r->a[A_LABEL].present || r->a[A_LABEL].n == 0)
		return NULL;
	return r->a[A_LABEL].v[0].str;
}

int
rule_has_condition(const struct rule *r)
{
	return r->has_cond;
}

int
rule_has_to_host(const struct rule *r)
{
	return r->a[A_TO_HOST].present;
}

int
rule_has_via_port(const struct rule *r)
{
	return r->a[A_VIA_PORT].present;
}

int
rule_has_via_exporter(const struct rule *r)
{
	return r->a[A_VIA_EXPORTER].present;
}

int
rule_attr_count(const struct rule *r)
{
	int k, n = 0;

	for (k = 0; k < A_NKINDS; k++)
		if (k != A_LABEL && r->a[k].present)
			n++;
	return n;
}

static int
is_hex(int c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
	    (c >= 'A' && c <= 'F');
}

/* Characters of a bare (unquoted) exporter or host name. */
static int
is_name_char(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' ||
	    c == '*';
}

static int
setop_lookup(const char *s, size_t len)
{
	int i;

	for (i = 0; i < OP_NOPS; i++)
		if (strlen(setop_names[i]) == len &&
		    memcmp(setop_names[i], s, len) == 0)
			return i;
	return -1;
}

/* Length of the valid UTF-8 sequence at p (at most n bytes), or 0. */
static size_t
utf8_seq(const unsigned char *p, size_t n)
{
	size_t		len, i;
	uint32_t	cp;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf) {
		len = 2;
		cp = p[0] & 0x1f;
	} else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		len = 3;
		cp = p[0] & 0x0f;
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		len = 4;
		cp = p[0] & 0x07;
	} else
		return 0;
	if (n < len)
		return 0;
	for (i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* ------------------------------------------------------------------ */
/* String builder                                                       */

struct sbuf {
	char	*p;
	size_t	 len, cap;
};

static void
sb_addn(struct sbuf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t ncap = b->cap ? b->cap : 128;

		while (ncap < b->len + n + 1)
			ncap *= 2;
		b->p = xreallocarray(b->p, ncap, 1);
		b->cap = ncap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void
sb_add(struct sbuf *b, const char *s)
{
	sb_addn(b, s, strlen(s));
}

static void sb_printf(struct sbuf *, const char *, ...)
    __attribute__((format(printf, 2, 3)));
static void
sb_printf(struct sbuf *b, const char *fmt, ...)
{
	char	buf[128];
	va_list	ap;
	int	n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > 0)
		sb_addn(b, buf, (size_t)n < sizeof(buf) ? (size_t)n :
		    sizeof(buf) - 1);
}

/* ------------------------------------------------------------------ */
/* Lexer                                                                */

enum tok_type {
	T_EOF,
	T_WORD,
	T_STR,
	T_LBRACE,
	T_RBRACE,
};

struct tok {
	enum tok_type	type;
	size_t		start, end;	/* [start, end) in the text */
};

struct parser {
	const char		*s;
	size_t			 pos;
	size_t			 end;
	unsigned		 flags;
	int			 top;		/* '#' starts a comment */
	int			 failed;
	struct rule_error	*err;
	struct sbuf		 dropped;
	const char		*aname;		/* attribute being parsed */
};

static int perr(struct parser *, size_t, const char *, ...)
    __attribute__((format(printf, 3, 4)));
static int
perr(struct parser *p, size_t off, const char *fmt, ...)
{
	va_list	ap;
	size_t	i;
	int	col = 1, n;

	if (p->failed)
		return -1;
	p->failed = 1;
	for (i = 0; i < off && p->s[i] != '\0'; i++)
		if (((unsigned char)p->s[i] & 0xc0) != 0x80)
			col++;
	p->err->column = col;
	n = snprintf(p->err->msg, sizeof(p->err->msg), "column %d: ", col);
	if (n < 0 || (size_t)n >= sizeof(p->err->msg))
		return -1;
	va_start(ap, fmt);
	vsnprintf(p->err->msg + n, sizeof(p->err->msg) - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

/* Quote a piece of the text for an error message: 'abc' or 'abc...'. */
static const char *
quote_span(const char *s, size_t len, char *buf, size_t bufsz)
{
	size_t	i, o = 0;

	buf[o++] = '\'';
	for (i = 0; i < len && i < GOT_MAX && o + 6 < bufsz; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c == 0x7f) {
			snprintf(buf + o, bufsz - o, "\\x%02x", c);
			o += 4;
		} else
			buf[o++] = (char)c;
	}
	if (i < len && o + 5 < bufsz) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o++] = '\'';
	buf[o] = '\0';
	return buf;
}

static const char *
tok_desc(const struct parser *p, const struct tok *t, char *buf, size_t bufsz)
{
	if (t->type == T_EOF) {
		usbgw_strlcpy(buf, "end of rule", bufsz);
		return buf;
	}
	return quote_span(p->s + t->start, t->end - t->start, buf, bufsz);
}

static int
is_blank(int c)
{
	return c == ' ' || c == '\t';
}

/* Skip a "string" starting at i (s[i] == '"'); returns the index after it. */
static int
skip_string(struct parser *p, size_t i, size_t *after)
{
	size_t start = i;

	for (i++; i < p->end; i++) {
		if (p->s[i] == '\\' && i + 1 < p->end) {
			i++;
			continue;
		}
		if (p->s[i] == '"') {
			*after = i + 1;
			return 0;
		}
	}
	return perr(p, start, "unterminated string");
}

static int
lex(struct parser *p, struct tok *t)
{
	size_t		i;
	unsigned char	c;

	while (p->pos < p->end && is_blank(p->s[p->pos]))
		p->pos++;
	t->start = t->end = p->pos;
	if (p->pos >= p->end || (p->top && p->s[p->pos] == '#')) {
		t->type = T_EOF;
		return 0;
	}
	c = (unsigned char)p->s[p->pos];
	if (c < 0x20 || c == 0x7f)
		return perr(p, p->pos, "unexpected control character 0x%02x",
		    c);
	if (c == '"') {
		if (skip_string(p, p->pos, &t->end) == -1)
			return -1;
		t->type = T_STR;
		p->pos = t->end;
		return 0;
	}
	if (c == '{' || c == '}') {
		t->type = c == '{' ? T_LBRACE : T_RBRACE;
		t->end = ++p->pos;
		return 0;
	}
	for (i = p->pos; i < p->end; ) {
		c = (unsigned char)p->s[i];
		if (is_blank(c) || c == '"' || c == '{' || c == '}' ||
		    c < 0x20 || c == 0x7f)
			break;
		if (c == '(') {
			size_t	open = i, after;
			int	depth = 1;

			for (i++; i < p->end && depth > 0; ) {
				if (p->s[i] == '"') {
					if (skip_string(p, i, &after) == -1)
						return -1;
					i = after;
					continue;
				}
				if (p->s[i] == '(')
					depth++;
				else if (p->s[i] == ')')
					depth--;
				i++;
			}
			if (depth > 0)
				return perr(p, open, "missing ')' for this '('");
			continue;
		}
		i++;
	}
	t->type = T_WORD;
	t->end = i;
	p->pos = i;
	return 0;
}

static int
tok_is(const struct parser *p, const struct tok *t, const char *word)
{
	size_t len = strlen(word);

	return t->type == T_WORD && t->end - t->start == len &&
	    memcmp(p->s + t->start, word, len) == 0;
}

/* ------------------------------------------------------------------ */
/* Values                                                               */

/* digits hex digits, or "*": returns 0, 1 for '*', -1 if invalid. */
static int
parse_hex_field(const char *s, size_t len, size_t digits, unsigned *out)
{
	size_t i;

	if (len == 1 && s[0] == '*')
		return 1;
	if (len != digits)
		return -1;
	*out = 0;
	for (i = 0; i < len; i++) {
		if (!is_hex((unsigned char)s[i]))
			return -1;
		*out = (*out << 4) | (unsigned)usbgw_hexval((unsigned char)s[i]);
	}
	return 0;
}

/* Split s into up to 3 fields at ':'; returns the number of fields. */
static size_t
split_colons(const char *s, size_t len, const char **f, size_t *fl, size_t max)
{
	size_t n = 0, i, start = 0;

	for (i = 0; i <= len; i++) {
		if (i == len || s[i] == ':') {
			if (n == max)
				return max + 1;
			f[n] = s + start;
			fl[n] = i - start;
			n++;
			start = i + 1;
		}
	}
	return n;
}

/*
 * Decode the body of a "string" token into a new allocation.  Escapes:
 * \" \\ \' \a \b \f \n \r \t \v \xHH.  Raw bytes must be printable or
 * valid UTF-8; the result has no NUL and at most maxlen bytes.
 */
static int
decode_string(struct parser *p, const struct tok *t, size_t maxlen,
    char **out)
{
	const unsigned char	*s = (const unsigned char *)p->s;
	size_t			 i, o = 0, n;
	char			 buf[RULE_TEXT_MAX];
	unsigned		 v;

	for (i = t->start + 1; i < t->end - 1; ) {
		unsigned char c = s[i];

		if (o >= maxlen)
			return perr(p, t->start, "string longer than %zu bytes",
			    maxlen);
		if (c == '\\') {
			size_t esc = i;

			c = s[i + 1];
			i += 2;
			switch (c) {
			case '"': case '\\': case '\'':
				buf[o++] = (char)c;
				continue;
			case 'a': buf[o++] = '\a'; continue;
			case 'b': buf[o++] = '\b'; continue;
			case 'f': buf[o++] = '\f'; continue;
			case 'n': buf[o++] = '\n'; continue;
			case 'r': buf[o++] = '\r'; continue;
			case 't': buf[o++] = '\t'; continue;
			case 'v': buf[o++] = '\v'; continue;
			case 'x':
				if (i + 2 > t->end - 1 || !is_hex(s[i]) ||
				    !is_hex(s[i + 1]))
					return perr(p, esc, "expected two hex "
					    "digits after '\\x' in string");
				v = (unsigned)(usbgw_hexval(s[i]) << 4 |
				    usbgw_hexval(s[i + 1]));
				if (v == 0)
					return perr(p, esc, "NUL byte (\\x00) "
					    "not allowed in string");
				buf[o++] = (char)v;
				i += 2;
				continue;
			default:
				if (c < 0x20 || c >= 0x7f)
					return perr(p, esc, "invalid escape "
					    "in string");
				return perr(p, esc, "invalid escape '\\%c' in "
				    "string", c);
			}
		}
		if (c < 0x20 || c == 0x7f)
			return perr(p, i, "control character 0x%02x in string "
			    "(write \\x%02x)", c, c);
		if (c >= 0x80) {
			n = utf8_seq(s + i, t->end - 1 - i);
			if (n == 0)
				return perr(p, i, "invalid UTF-8 in string");
			if (o + n > maxlen)
				return perr(p, t->start, "string longer than "
				    "%zu bytes", maxlen);
			memcpy(buf + o, s + i, n);
			o += n;
			i += n;
			continue;
		}
		buf[o++] = (char)c;
		i++;
	}
	*out = xstrndup(buf, o);
	return 0;
}

/* A name or address for to-host, from bytes s (already unquoted). */
static int
host_value(const char *s, size_t len, struct rvalue *v, char *why,
    size_t whylen)
{
	char		 tmp[USBGW_HOST_MAX], net[INET6_ADDRSTRLEN];
	const char	*slash;
	size_t		 i, alen, full;
	int		 v4like = 1, hasdot = 0, prefix;
	long long	 n;
	const char	*errstr;
	struct usbgw_addr masked;

	why[0] = '\0';
	if (len == 0 || len >= sizeof(tmp))
		return -1;
	memcpy(tmp, s, len);
	tmp[len] = '\0';
	for (i = 0; i < len; i++) {
		if (!((tmp[i] >= '0' && tmp[i] <= '9') || tmp[i] == '.' ||
		    tmp[i] == '/'))
			v4like = 0;
		if (tmp[i] == '.')
			hasdot = 1;
	}
	if (strchr(tmp, ':') == NULL && !(v4like && hasdot)) {
		/* A host name. */
		for (i = 0; i < len; i++)
			if (!is_name_char((unsigned char)tmp[i]))
				return -1;
		v->is_addr = 0;
		v->str = xstrdup(tmp);
		return 0;
	}
	slash = strchr(tmp, '/');
	alen = slash ? (size_t)(slash - tmp) : len;
	tmp[alen] = '\0';
	if (usbgw_addr_parse(tmp, &v->addr) == -1) {
		snprintf(why, whylen, "invalid %s address '%.64s'",
		    strchr(tmp, ':') ? "IPv6" : "IPv4", tmp);
		return -1;
	}
	full = v->addr.family == AF_INET ? 32 : 128;
	prefix = (int)full;
	if (slash != NULL) {
		if (parse_num(slash + 1, 0, (long long)full, &n, &errstr) == -1) {
			snprintf(why, whylen, "prefix length must be 0-%zu in "
			    "'%.*s'", full, (int)len, s);
			return -1;
		}
		prefix = (int)n;
	}
	masked = v->addr;
	for (i = 0; i < 16; i++) {
		int bits = prefix - (int)i * 8;

		if (bits >= 8)
			continue;
		masked.addr[i] &= bits <= 0 ? 0 : (uint8_t)(0xff << (8 - bits));
	}
	if (memcmp(masked.addr, v->addr.addr, sizeof(masked.addr)) != 0) {
		snprintf(why, whylen, "host bits set in '%.*s' (the network is "
		    "%s/%d)", (int)len, s, usbgw_addr_format(&masked, net,
		    sizeof(net)), prefix);
		return -1;
	}
	v->is_addr = 1;
	v->prefix = (uint8_t)prefix;
	return 0;
}

enum vctx {
	VC_AFTER,	/* right after the attribute name */
	VC_SET,		/* inside { } */
};

static int
bad_value(struct parser *p, enum attr_kind k, enum vctx vc, const struct tok *t)
{
	char got[GOT_MAX * 4 + 16];

	tok_desc(p, t, got, sizeof(got));
	if (vc == VC_AFTER)
		return perr(p, t->start, "expected %s after '%s', got %s",
		    attr_defs[k].what, p->aname, got);
	return perr(p, t->start, "expected %s in '%s' set, got %s",
	    attr_defs[k].what, p->aname, got);
}

static int
parse_value(struct parser *p, enum attr_kind k, enum vctx vc,
    const struct tok *t, struct rvalue *v)
{
	const char	*s = p->s + t->start, *f[4];
	size_t		 len = t->end - t->start, fl[4], i;
	unsigned	 a, b, c;
	int		 ra, rb, rc;
	char		 why[160], *str;

	memset(v, 0, sizeof(*v));
	switch (attr_defs[k].type) {
	case V_ID:
		if (t->type != T_WORD ||
		    split_colons(s, len, f, fl, 2) != 2 ||
		    (ra = parse_hex_field(f[0], fl[0], 4, &a)) == -1 ||
		    (rb = parse_hex_field(f[1], fl[1], 4, &b)) == -1)
			return bad_value(p, k, vc, t);
		if (ra == 1 && rb == 0)
			return perr(p, t->start, "'%.*s': a wildcard vendor "
			    "needs a wildcard product ('*:*')", (int)len, s);
		v->any_vid = ra == 1;
		v->any_pid = rb == 1;
		v->vid = v->any_vid ? 0 : (uint16_t)a;
		v->pid = v->any_pid ? 0 : (uint16_t)b;
		return 0;
	case V_IFACE:
		if (t->type != T_WORD ||
		    split_colons(s, len, f, fl, 3) != 3 ||
		    (ra = parse_hex_field(f[0], fl[0], 2, &a)) == -1 ||
		    (rb = parse_hex_field(f[1], fl[1], 2, &b)) == -1 ||
		    (rc = parse_hex_field(f[2], fl[2], 2, &c)) == -1)
			return bad_value(p, k, vc, t);
		if (ra == 1)
			return perr(p, t->start, "'%.*s': the interface class "
			    "cannot be '*'", (int)len, s);
		if (rb == 1 && rc == 0)
			return perr(p, t->start, "'%.*s': the protocol must be "
			    "'*' when the subclass is '*'", (int)len, s);
		v->cls = (uint8_t)a;
		v->any_sub = rb == 1;
		v->any_proto = rc == 1;
		v->sub = v->any_sub ? 0 : (uint8_t)b;
		v->proto = v->any_proto ? 0 : (uint8_t)c;
		return 0;
	case V_STRING:
		if (t->type != T_STR)
			return bad_value(p, k, vc, t);
		return decode_string(p, t, USBGW_STR_MAX - 1, &v->str);
	case V_HASH:
		if (t->type == T_STR) {
			s++;
			len -= 2;
		} else if (t->type != T_WORD)
			return bad_value(p, k, vc, t);
		if (len != USBGW_HASH_HEX)
			return bad_value(p, k, vc, t);
		for (i = 0; i < len; i++)
			if (!is_hex((unsigned char)s[i]))
				return bad_value(p, k, vc, t);
		v->str = xstrndup(s, len);
		for (i = 0; i < len; i++)
			v->str[i] = (char)tolower((unsigned char)v->str[i]);
		return 0;
	case V_EXPNAME:
		if (t->type == T_STR) {
			if (decode_string(p, t, USBGW_EXPORTER_MAX - 1,
			    &str) == -1)
				return -1;
			if (str[0] == '\0') {
				free(str);
				return bad_value(p, k, vc, t);
			}
			v->str = str;
			return 0;
		}
		if (t->type != T_WORD)
			return bad_value(p, k, vc, t);
		for (i = 0; i < len; i++)
			if (!is_name_char((unsigned char)s[i]))
				return bad_value(p, k, vc, t);
		if (len >= USBGW_EXPORTER_MAX)
			return perr(p, t->start, "exporter name longer than %d "
			    "bytes", USBGW_EXPORTER_MAX - 1);
		v->str = xstrndup(s, len);
		return 0;
	case V_HOST:
		if (t->type == T_STR) {
			s++;
			len -= 2;
		} else if (t->type != T_WORD)
			return bad_value(p, k, vc, t);
		if (len >= USBGW_HOST_MAX)
			return perr(p, t->start, "host name longer than %d "
			    "bytes", USBGW_HOST_MAX - 1);
		if (host_value(s, len, v, why, sizeof(why)) == -1) {
			if (why[0] != '\0')
				return perr(p, t->start, "%s", why);
			return bad_value(p, k, vc, t);
		}
		return 0;
	}
	return bad_value(p, k, vc, t);
}

static void
attr_push(struct rattr *a, const struct rvalue *v)
{
	a->v = xreallocarray(a->v, (size_t)a->n + 1, sizeof(*a->v));
	a->v[a->n++] = *v;
}

/*
 * name value | name [op] { value ... }; the name token has been read.
 * On error the attribute may hold some values: the caller frees it.
 */
static int
parse_attr_values(struct parser *p, enum attr_kind k, struct rattr *a)
{
	struct tok	t, opt;
	struct rvalue	v;
	int		op;
	char		got[GOT_MAX * 4 + 16];

	a->present = 1;
	a->op = OP_EQUALS;
	if (lex(p, &t) == -1)
		return -1;
	op = t.type == T_WORD ? setop_lookup(p->s + t.start, t.end - t.start) :
	    -1;
	if (op == -1 && t.type != T_LBRACE) {
		if (parse_value(p, k, VC_AFTER, &t, &v) == -1)
			return -1;
		attr_push(a, &v);
		return 0;
	}
	opt = t;
	if (op != -1) {
		a->op = (uint8_t)op;
		if (lex(p, &t) == -1)
			return -1;
		if (t.type != T_LBRACE)
			return perr(p, t.start, "expected '{' after '%s', got %s",
			    setop_names[op], tok_desc(p, &t, got, sizeof(got)));
	}
	for (;;) {
		if (lex(p, &t) == -1)
			return -1;
		if (t.type == T_RBRACE) {
			if (a->n == 0)
				return perr(p, t.start, "empty set for '%s'",
				    p->aname);
			break;
		}
		if (t.type == T_EOF && a->n > 0)
			return perr(p, t.start, "expected %s or '}' in '%s' set, "
			    "got end of rule", attr_defs[k].what, p->aname);
		if (a->n == RULE_SET_MAX)
			return perr(p, t.start, "too many values in set for "
			    "'%s' (at most %d)", p->aname, RULE_SET_MAX);
		if (parse_value(p, k, VC_SET, &t, &v) == -1)
			return -1;
		attr_push(a, &v);
	}
	if (!attr_defs[k].multi && k != A_LABEL && a->n > 1 &&
	    (a->op == OP_EQUALS || a->op == OP_EQUALS_ORDERED))
		return perr(p, opt.start, "'%s' has one value per device: a "
		    "set of %u values with '%s' can never match (use one-of)",
		    p->aname, a->n, setop_names[a->op]);
	return 0;
}

/* USBGuard-only attributes: parse their values and forget them. */
static int
drop_attr(struct parser *p, const struct tok *name)
{
	struct tok	t;
	int		depth = 0;

	for (;;) {
		if (lex(p, &t) == -1)
			return -1;
		if (t.type == T_EOF)
			break;
		if (t.type == T_LBRACE)
			depth++;
		else if (t.type == T_RBRACE)
			depth--;
		else if (t.type == T_WORD && depth == 0 &&
		    setop_lookup(p->s + t.start, t.end - t.start) != -1)
			continue;
		if (depth <= 0)
			break;
	}
	if (depth != 0 || t.type == T_EOF)
		return perr(p, t.start, "expected value after '%.*s'",
		    (int)(name->end - name->start), p->s + name->start);
	if (p->dropped.len > 0)
		sb_add(&p->dropped, ", ");
	sb_printf(&p->dropped, "%.*s (column ", (int)(name->end - name->start),
	    p->s + name->start);
	{
		size_t	i;
		int	col = 1;

		for (i = 0; i < name->start; i++)
			if (((unsigned char)p->s[i] & 0xc0) != 0x80)
				col++;
		sb_printf(&p->dropped, "%d)", col);
	}
	p->err->ndropped++;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Conditions                                                           */

/* "H:MM" or "HH:MM[:SS]" at s (len bytes) into seconds of the day. */
static int
parse_daytime(const char *s, size_t len, uint32_t *out)
{
	const char	*f[4];
	size_t		 fl[4], n, i, j;
	unsigned	 v[3] = { 0, 0, 0 };
	static const unsigned lim[3] = { 23, 59, 59 };

	n = split_colons(s, len, f, fl, 3);
	if (n < 2 || n > 3)
		return -1;
	for (i = 0; i < n; i++) {
		if (fl[i] < 1 || fl[i] > 2 || (i > 0 && fl[i] != 2))
			return -1;
		for (j = 0; j < fl[i]; j++) {
			if (f[i][j] < '0' || f[i][j] > '9')
				return -1;
			v[i] = v[i] * 10 + (unsigned)(f[i][j] - '0');
		}
		if (v[i] > lim[i])
			return -1;
	}
	*out = v[0] * 3600 + v[1] * 60 + v[2];
	return 0;
}

static int
parse_localtime(const char *s, size_t len, struct rcond *c)
{
	const char *dash = memchr(s, '-', len);

	if (dash == NULL) {
		if (parse_daytime(s, len, &c->begin) == -1)
			return -1;
		c->end = c->begin;
		return 0;
	}
	if (parse_daytime(s, (size_t)(dash - s), &c->begin) == -1 ||
	    parse_daytime(dash + 1, len - (size_t)(dash - s) - 1,
	    &c->end) == -1)
		return -1;
	return 0;
}

static int
day_lookup(const char *s, size_t len)
{
	int i;

	if (len != 3)
		return -1;
	for (i = 0; i < 7; i++)
		if (memcmp(s, day_names[i], 3) == 0)
			return i;
	return -1;
}

/* "mon-fri,sun": days and ranges (a range may wrap: fri-mon). */
static int
parse_weekdays(const char *s, size_t len, uint8_t *mask)
{
	size_t	i = 0, j;
	int	a, b;

	*mask = 0;
	while (i <= len) {
		j = i;
		while (j < len && s[j] != ',')
			j++;
		if (j - i == 7 && s[i + 3] == '-') {
			if ((a = day_lookup(s + i, 3)) == -1 ||
			    (b = day_lookup(s + i + 4, 3)) == -1)
				return -1;
			for (;;) {
				*mask |= (uint8_t)(1u << a);
				if (a == b)
					break;
				a = (a + 1) % 7;
			}
		} else if ((a = day_lookup(s + i, j - i)) != -1)
			*mask |= (uint8_t)(1u << a);
		else
			return -1;
		if (j == len)
			break;
		i = j + 1;
	}
	return 0;
}

static struct rule *parse_rule(struct parser *, int query);

static int
parse_cond(struct parser *p, const struct tok *t, struct rcond *c)
{
	static const char *const unsupported[] = {
		"rule-applied", "rule-evaluated", "random"
	};
	const char	*s = p->s + t->start, *id;
	size_t		 len = t->end - t->start, i = 0, idlen, astart = 0, alen;
	int		 hasarg = 0;
	char		 got[GOT_MAX * 4 + 16];

	memset(c, 0, sizeof(*c));
	if (t->type != T_WORD)
		goto expected;
	if (s[0] == '!') {
		c->negated = 1;
		i = 1;
	}
	id = s + i;
	if (i >= len || !(s[i] >= 'a' && s[i] <= 'z'))
		goto expected;
	while (i < len && ((s[i] >= 'a' && s[i] <= 'z') ||
	    (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
		i++;
	idlen = (size_t)(s + i - id);
	if (i < len) {
		if (s[i] != '(')
			return perr(p, t->start + i, "unexpected '%c' in "
			    "condition '%.*s'", s[i], (int)len, s);
		/* The lexer guarantees the matching ')'; find it again. */
		astart = i + 1;
		{
			int	depth = 1;
			size_t	j = astart;

			while (j < len && depth > 0) {
				if (s[j] == '"') {
					j++;
					while (j < len && s[j] != '"') {
						if (s[j] == '\\')
							j++;
						j++;
					}
				} else if (s[j] == '(')
					depth++;
				else if (s[j] == ')')
					depth--;
				j++;
			}
			if (j != len)
				return perr(p, t->start + j, "unexpected '%c' "
				    "after ')'", s[j]);
			alen = j - 1 - astart;
		}
		hasarg = 1;
	} else
		alen = 0;

#define IS(w)	(idlen == strlen(w) && memcmp(id, (w), idlen) == 0)
	if (IS("true") || IS("false")) {
		c->kind = IS("true") ? C_TRUE : C_FALSE;
		if (hasarg)
			return perr(p, t->start + (size_t)(id - s) + idlen,
			    "condition '%.*s' takes no argument", (int)idlen,
			    id);
		return 0;
	}
	if (IS("localtime") || IS("weekday") || IS("allowed-matches")) {
		c->kind = IS("localtime") ? C_LOCALTIME : IS("weekday") ?
		    C_WEEKDAY : C_ALLOWED_MATCHES;
		if (!hasarg)
			return perr(p, t->end, "expected '(' after '%.*s'",
			    (int)idlen, id);
		if (c->kind == C_LOCALTIME) {
			if (parse_localtime(s + astart, alen, c) == -1)
				return perr(p, t->start + astart, "expected "
				    "time range HH:MM[:SS][-HH:MM[:SS]] in "
				    "'localtime()', got %s", quote_span(s +
				    astart, alen, got, sizeof(got)));
			return 0;
		}
		if (c->kind == C_WEEKDAY) {
			if (parse_weekdays(s + astart, alen, &c->days) == -1)
				return perr(p, t->start + astart, "expected "
				    "days like mon-fri,sun in 'weekday()', got "
				    "%s", quote_span(s + astart, alen, got,
				    sizeof(got)));
			return 0;
		}
		{
			struct parser sub = *p;

			sub.pos = t->start + astart;
			sub.end = sub.pos + alen;
			sub.top = 0;
			memset(&sub.dropped, 0, sizeof(sub.dropped));
			c->query = parse_rule(&sub, 1);
			if (sub.dropped.len > 0) {
				if (p->dropped.len > 0)
					sb_add(&p->dropped, ", ");
				sb_add(&p->dropped, sub.dropped.p);
			}
			free(sub.dropped.p);
			if (c->query == NULL) {
				p->failed = 1;
				return -1;
			}
		}
		return 0;
	}
	for (i = 0; i < nitems(unsupported); i++)
		if (IS(unsupported[i]))
			return perr(p, t->start, "condition '%s' is not "
			    "supported by usbgw", unsupported[i]);
#undef IS
expected:
	return perr(p, t->start, "expected condition (localtime, weekday, "
	    "allowed-matches, true or false), got %s",
	    tok_desc(p, t, got, sizeof(got)));
}

static int
parse_if(struct parser *p, struct rule *r)
{
	struct tok	t;
	struct rcond	c;
	int		op;
	char		got[GOT_MAX * 4 + 16];

	r->has_cond = 1;
	r->cop = OP_EQUALS;
	if (lex(p, &t) == -1)
		return -1;
	op = t.type == T_WORD ? setop_lookup(p->s + t.start, t.end - t.start) :
	    -1;
	if (op == -1 && t.type != T_LBRACE) {
		if (t.type == T_EOF)
			return perr(p, t.start, "expected condition after 'if', "
			    "got end of rule");
		if (parse_cond(p, &t, &c) == -1) {
			rule_free(c.query);
			return -1;
		}
		r->c = xcalloc(1, sizeof(*r->c));
		r->c[0] = c;
		r->nc = 1;
		return 0;
	}
	if (op != -1) {
		if (op == OP_MATCH_ALL)
			return perr(p, t.start, "'match-all' cannot combine "
			    "conditions (use all-of, one-of or none-of)");
		r->cop = (uint8_t)op;
		if (lex(p, &t) == -1)
			return -1;
		if (t.type != T_LBRACE)
			return perr(p, t.start, "expected '{' after '%s', got %s",
			    setop_names[op], tok_desc(p, &t, got, sizeof(got)));
	}
	for (;;) {
		if (lex(p, &t) == -1)
			return -1;
		if (t.type == T_RBRACE) {
			if (r->nc == 0)
				return perr(p, t.start, "empty set for 'if'");
			return 0;
		}
		if (t.type == T_EOF)
			return perr(p, t.start, "expected condition%s in 'if' "
			    "set, got end of rule", r->nc ? " or '}'" : "");
		if (r->nc == RULE_COND_MAX)
			return perr(p, t.start, "too many conditions in set "
			    "(at most %d)", RULE_COND_MAX);
		if (parse_cond(p, &t, &c) == -1) {
			rule_free(c.query);
			return -1;
		}
		r->c = xreallocarray(r->c, (size_t)r->nc + 1, sizeof(*r->c));
		r->c[r->nc++] = c;
	}
}

/* ------------------------------------------------------------------ */
/* Rules                                                                */

static int
attr_lookup(const struct parser *p, const struct tok *t)
{
	int i;

	for (i = 0; i < A_NKINDS; i++)
		if (tok_is(p, t, attr_defs[i].name))
			return i;
	return -1;
}

static int
is_hash64(const struct rattr *a)
{
	uint16_t	i;
	size_t		j;

	for (i = 0; i < a->n; i++) {
		if (strlen(a->v[i].str) != USBGW_HASH_HEX)
			return 0;
		for (j = 0; j < USBGW_HASH_HEX; j++)
			if (!is_hex((unsigned char)a->v[i].str[j]))
				return 0;
	}
	return 1;
}

/*
 * In USBGuard mode a hash is parsed as a string; a USBGuard hash (not 64
 * hex digits) is dropped, ours is kept and normalized.
 */
static int
parse_usbguard_hash(struct parser *p, const struct tok *name, struct rattr *a)
{
	struct rattr	tmp;
	uint16_t	i;
	size_t		j;
	int		rv;

	memset(&tmp, 0, sizeof(tmp));
	/* Parse with the grammar of a string attribute (name). */
	p->aname = "hash";
	rv = parse_attr_values(p, A_NAME, &tmp);
	if (rv == -1) {
		attr_clear(&tmp);
		return -1;
	}
	if (!is_hash64(&tmp)) {
		struct sbuf *d = &p->dropped;
		size_t	k;
		int	col = 1;

		attr_clear(&tmp);
		for (k = 0; k < name->start; k++)
			if (((unsigned char)p->s[k] & 0xc0) != 0x80)
				col++;
		if (d->len > 0)
			sb_add(d, ", ");
		sb_printf(d, "hash (column %d)", col);
		p->err->ndropped++;
		return 0;
	}
	for (i = 0; i < tmp.n; i++)
		for (j = 0; j < USBGW_HASH_HEX; j++)
			tmp.v[i].str[j] = (char)tolower(
			    (unsigned char)tmp.v[i].str[j]);
	*a = tmp;
	return 0;
}

/* ------------------------------------------------------------------ */
/* interface-policy                                                     */

/* A decimal 0..max for 'index'/'configuration'; -1 if not one. */
static int
parse_small(const char *s, size_t len, unsigned max)
{
	unsigned	v = 0;
	size_t		i;

	if (len == 0 || len > 3)
		return -1;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	return v > max ? -1 : (int)v;
}

/* allow|block CLASS:SUB:PROTO [index N] [configuration N]; t is the target. */
static int
parse_inner(struct parser *p, const struct tok *t, struct riface *ri)
{
	struct tok	 q, n;
	char		 got[GOT_MAX * 4 + 16];
	int		 v;

	memset(ri, 0, sizeof(*ri));
	if (tok_is(p, t, "allow"))
		ri->allow = 1;
	else if (!tok_is(p, t, "block"))
		return perr(p, t->start, "expected 'allow', 'block' or '}' in "
		    "interface-policy, got %s", tok_desc(p, t, got, sizeof(got)));
	if (lex(p, &q) == -1)
		return -1;
	if (tok_is(p, &q, "*:*:*"))
		ri->any_cls = ri->pat.any_sub = ri->pat.any_proto = 1;
	else {
		p->aname = ri->allow ? "allow" : "block";
		if (parse_value(p, A_WITH_INTERFACE, VC_AFTER, &q,
		    &ri->pat) == -1)
			return -1;
	}
	for (;;) {
		size_t save = p->pos;
		int is_index;

		if (lex(p, &q) == -1)
			return -1;
		is_index = tok_is(p, &q, "index");
		if (!is_index && !tok_is(p, &q, "configuration")) {
			p->pos = save;
			return 0;
		}
		if (is_index ? ri->has_index : ri->has_config)
			return perr(p, q.start, "duplicate '%s' in this "
			    "interface rule", is_index ? "index" :
			    "configuration");
		if (lex(p, &n) == -1)
			return -1;
		v = n.type == T_WORD ? parse_small(p->s + n.start,
		    n.end - n.start, 255) : -1;
		if (v == -1 || (!is_index && v == 0))
			return perr(p, n.start, "expected %s after '%s', got %s",
			    is_index ? "an interface number 0..255" :
			    "a configuration value 1..255",
			    is_index ? "index" : "configuration",
			    tok_desc(p, &n, got, sizeof(got)));
		if (is_index) {
			ri->has_index = 1;
			ri->index = (uint8_t)v;
		} else {
			ri->has_config = 1;
			ri->config = (uint8_t)v;
		}
	}
}

/* interface-policy allow|block { inner ... }; the name token has been read. */
static int
parse_ipol(struct parser *p, struct rule *r, const struct tok *name)
{
	struct tok	 t;
	struct riface	 ri;
	char		 got[GOT_MAX * 4 + 16];

	if (r->target != RULE_ALLOW && r->target != RULE_ASK)
		return perr(p, name->start, "'interface-policy' only in an "
		    "allow or ask rule (a %s rule refuses the whole device)",
		    rule_target_name(r->target));
	if (lex(p, &t) == -1)
		return -1;
	if (tok_is(p, &t, "allow"))
		r->ipol_allow = 1;
	else if (!tok_is(p, &t, "block"))
		return perr(p, t.start, "expected implicit target 'allow' or "
		    "'block' after 'interface-policy', got %s",
		    tok_desc(p, &t, got, sizeof(got)));
	if (lex(p, &t) == -1)
		return -1;
	if (t.type != T_LBRACE)
		return perr(p, t.start, "expected '{' after 'interface-policy "
		    "%s', got %s", r->ipol_allow ? "allow" : "block",
		    tok_desc(p, &t, got, sizeof(got)));
	r->has_ipol = 1;
	for (;;) {
		if (lex(p, &t) == -1)
			return -1;
		if (t.type == T_RBRACE) {
			if (r->ni == 0)
				return perr(p, t.start, "empty interface-policy "
				    "set (expected 'allow' or 'block' rules)");
			return 0;
		}
		if (t.type == T_EOF)
			return perr(p, t.start, "expected 'allow', 'block' or "
			    "'}' in interface-policy, got end of rule");
		if (r->ni == RULE_IFACE_RULES_MAX)
			return perr(p, t.start, "too many rules in "
			    "interface-policy (at most %d)",
			    RULE_IFACE_RULES_MAX);
		if (parse_inner(p, &t, &ri) == -1)
			return -1;
		r->ri = xreallocarray(r->ri, (size_t)r->ni + 1,
		    sizeof(*r->ri));
		r->ri[r->ni++] = ri;
	}
}

static struct rule *
parse_rule(struct parser *p, int query)
{
	struct rule	*r;
	struct tok	 t;
	struct rvalue	 v;
	int		 k, tg;
	char		 got[GOT_MAX * 4 + 16];

	r = xcalloc(1, sizeof(*r));
	r->target = RULE_ASK;
	if (!query) {
		if (lex(p, &t) == -1)
			goto fail;
		tg = -1;
		if (t.type == T_WORD) {
			char w[16];
			size_t n = t.end - t.start;

			if (n < sizeof(w)) {
				memcpy(w, p->s + t.start, n);
				w[n] = '\0';
				tg = rule_target_parse(w);
				if (tg == -1 && (strcmp(w, "match") == 0 ||
				    strcmp(w, "device") == 0)) {
					perr(p, t.start, "target '%s' is not "
					    "supported (allow, block, reject or "
					    "ask)", w);
					goto fail;
				}
			}
		}
		if (tg == -1) {
			perr(p, t.start, "expected target (allow, block, reject "
			    "or ask), got %s", tok_desc(p, &t, got, sizeof(got)));
			goto fail;
		}
		r->target = (enum rule_target)tg;
		/* USBGuard's short form: "allow 1050:0011 ...". */
		{
			size_t save = p->pos;

			if (lex(p, &t) == -1)
				goto fail;
			if (t.type == T_WORD &&
			    memchr(p->s + t.start, ':', t.end - t.start) &&
			    memchr(p->s + t.start, '(', t.end - t.start) ==
			    NULL) {
				p->aname = rule_target_name(r->target);
				if (parse_value(p, A_ID, VC_AFTER, &t, &v) == -1)
					goto fail;
				r->a[A_ID].present = 1;
				r->a[A_ID].op = OP_EQUALS;
				attr_push(&r->a[A_ID], &v);
			} else
				p->pos = save;
		}
	}
	for (;;) {
		if (lex(p, &t) == -1)
			goto fail;
		if (t.type == T_EOF)
			break;
		if (tok_is(p, &t, "if")) {
			if (p->flags & RULE_PARSE_DEVICE) {
				perr(p, t.start, "'if' is not allowed here "
				    "(only %s)", DEVICE_ATTRS);
				goto fail;
			}
			if (query) {
				perr(p, t.start, "'if' is not allowed in an "
				    "allowed-matches query");
				goto fail;
			}
			if (r->has_cond) {
				perr(p, t.start, "duplicate attribute 'if'");
				goto fail;
			}
			if (parse_if(p, r) == -1)
				goto fail;
			continue;
		}
		if (tok_is(p, &t, "interface-policy")) {
			if (query || (p->flags & (RULE_PARSE_DEVICE |
			    RULE_PARSE_USBGUARD))) {
				perr(p, t.start, "'interface-policy' is not "
				    "allowed %s", query ? "in an allowed-matches "
				    "query" : (p->flags & RULE_PARSE_DEVICE) ?
				    "here (only " DEVICE_ATTRS ")" :
				    "in USBGuard rules (USBGuard does not "
				    "implement it: its proposal, issue #67, is "
				    "open)");
				goto fail;
			}
			if (r->has_ipol) {
				perr(p, t.start, "duplicate attribute "
				    "'interface-policy'");
				goto fail;
			}
			if (parse_ipol(p, r, &t) == -1)
				goto fail;
			continue;
		}
		if ((k = attr_lookup(p, &t)) == -1) {
			if (tok_is(p, &t, "parent-hash") ||
			    tok_is(p, &t, "with-connect-type")) {
				if (p->flags & RULE_PARSE_USBGUARD) {
					if (drop_attr(p, &t) == -1)
						goto fail;
					continue;
				}
				perr(p, t.start, "attribute '%.*s' is not "
				    "supported by usbgw",
				    (int)(t.end - t.start), p->s + t.start);
				goto fail;
			}
			perr(p, t.start, "expected attribute name, got %s",
			    tok_desc(p, &t, got, sizeof(got)));
			goto fail;
		}
		if ((p->flags & RULE_PARSE_DEVICE) && (k == A_VIA_EXPORTER ||
		    k == A_TO_HOST || k == A_LABEL)) {
			perr(p, t.start, "attribute '%s' is not allowed here "
			    "(only %s)", attr_defs[k].name, DEVICE_ATTRS);
			goto fail;
		}
		if (r->a[k].present) {
			perr(p, t.start, "duplicate attribute '%s'",
			    attr_defs[k].name);
			goto fail;
		}
		if (k == A_HASH && (p->flags & RULE_PARSE_USBGUARD)) {
			if (parse_usbguard_hash(p, &t, &r->a[k]) == -1)
				goto fail;
			continue;
		}
		p->aname = attr_defs[k].name;
		if (parse_attr_values(p, (enum attr_kind)k, &r->a[k]) == -1)
			goto fail;
	}
	return r;
fail:
	rule_free(r);
	return NULL;
}

struct rule *
rule_parse_ex(const char *text, unsigned flags, struct rule_error *err)
{
	struct parser	 p;
	struct rule	*r;
	size_t		 len;

	memset(err, 0, sizeof(*err));
	memset(&p, 0, sizeof(p));
	p.s = text;
	p.flags = flags;
	p.top = 1;
	p.err = err;
	len = strnlen(text, RULE_TEXT_MAX + 1);
	if (len > RULE_TEXT_MAX) {
		err->column = 1;
		snprintf(err->msg, sizeof(err->msg), "column 1: rule longer than "
		    "%d bytes", RULE_TEXT_MAX);
		return NULL;
	}
	p.end = len;
	r = parse_rule(&p, 0);
	if (r != NULL && p.dropped.len > 0)
		snprintf(err->msg, sizeof(err->msg), "dropped: %s",
		    p.dropped.p);
	free(p.dropped.p);
	return r;
}

struct rule *
rule_parse(const char *text, struct rule_error *err)
{
	return rule_parse_ex(text, 0, err);
}

/* ------------------------------------------------------------------ */
/* Printer                                                              */

static void
fmt_string(struct sbuf *b, const char *s)
{
	const unsigned char	*u = (const unsigned char *)s;
	size_t			 i, n, len = strlen(s);

	sb_add(b, "\"");
	for (i = 0; i < len; ) {
		if (u[i] == '"' || u[i] == '\\') {
			sb_addn(b, "\\", 1);
			sb_addn(b, s + i, 1);
			i++;
		} else if (u[i] < 0x20 || u[i] == 0x7f) {
			sb_printf(b, "\\x%02x", u[i]);
			i++;
		} else if (u[i] >= 0x80) {
			if ((n = utf8_seq(u + i, len - i)) == 0) {
				sb_printf(b, "\\x%02x", u[i]);
				i++;
			} else {
				sb_addn(b, s + i, n);
				i += n;
			}
		} else {
			sb_addn(b, s + i, 1);
			i++;
		}
	}
	sb_add(b, "\"");
}

static int
bare_ok(const char *s)
{
	size_t i, len = strlen(s);

	if (len == 0 || setop_lookup(s, len) != -1)
		return 0;
	for (i = 0; i < len; i++)
		if (!is_name_char((unsigned char)s[i]))
			return 0;
	return 1;
}

static void
fmt_value(struct sbuf *b, enum attr_kind k, const struct rvalue *v)
{
	char net[INET6_ADDRSTRLEN];

	switch (attr_defs[k].type) {
	case V_ID:
		if (v->any_vid)
			sb_add(b, "*:*");
		else if (v->any_pid)
			sb_printf(b, "%04x:*", v->vid);
		else
			sb_printf(b, "%04x:%04x", v->vid, v->pid);
		break;
	case V_IFACE:
		sb_printf(b, "%02x:", v->cls);
		if (v->any_sub)
			sb_add(b, "*:");
		else
			sb_printf(b, "%02x:", v->sub);
		if (v->any_proto)
			sb_add(b, "*");
		else
			sb_printf(b, "%02x", v->proto);
		break;
	case V_STRING:
	case V_HASH:
		fmt_string(b, v->str);
		break;
	case V_EXPNAME:
		if (bare_ok(v->str))
			sb_add(b, v->str);
		else
			fmt_string(b, v->str);
		break;
	case V_HOST:
		if (v->is_addr) {
			sb_add(b, usbgw_addr_format(&v->addr, net, sizeof(net)));
			if (v->prefix != (v->addr.family == AF_INET ? 32 : 128))
				sb_printf(b, "/%u", v->prefix);
		} else if (bare_ok(v->str))
			sb_add(b, v->str);
		else
			fmt_string(b, v->str);
		break;
	}
}

static void
fmt_attr(struct sbuf *b, enum attr_kind k, const struct rattr *a)
{
	uint16_t i;

	sb_add(b, attr_defs[k].name);
	sb_add(b, " ");
	if (a->op == OP_EQUALS && a->n == 1) {
		fmt_value(b, k, &a->v[0]);
		return;
	}
	if (a->op != OP_EQUALS) {
		sb_add(b, setop_names[a->op]);
		sb_add(b, " ");
	}
	sb_add(b, "{");
	for (i = 0; i < a->n; i++) {
		sb_add(b, " ");
		fmt_value(b, k, &a->v[i]);
	}
	sb_add(b, " }");
}

static void
fmt_daytime(struct sbuf *b, uint32_t t)
{
	if (t % 60 == 0)
		sb_printf(b, "%02u:%02u", t / 3600, t / 60 % 60);
	else
		sb_printf(b, "%02u:%02u:%02u", t / 3600, t / 60 % 60, t % 60);
}

static void fmt_attrs(struct sbuf *, const struct rule *, int);

static void
fmt_cond(struct sbuf *b, const struct rcond *c)
{
	static const int order[7] = { 1, 2, 3, 4, 5, 6, 0 };	/* mon..sun */
	int	i, j, first = 1;

	if (c->negated)
		sb_add(b, "!");
	switch (c->kind) {
	case C_TRUE:
		sb_add(b, "true");
		break;
	case C_FALSE:
		sb_add(b, "false");
		break;
	case C_LOCALTIME:
		sb_add(b, "localtime(");
		fmt_daytime(b, c->begin);
		if (c->end != c->begin) {
			sb_add(b, "-");
			fmt_daytime(b, c->end);
		}
		sb_add(b, ")");
		break;
	case C_WEEKDAY:
		sb_add(b, "weekday(");
		for (i = 0; i < 7; i++) {
			if (!(c->days & (1u << order[i])))
				continue;
			j = i;
			while (j + 1 < 7 && (c->days & (1u << order[j + 1])))
				j++;
			if (!first)
				sb_add(b, ",");
			first = 0;
			sb_add(b, day_names[order[i]]);
			if (j > i) {
				sb_add(b, "-");
				sb_add(b, day_names[order[j]]);
			}
			i = j;
		}
		sb_add(b, ")");
		break;
	case C_ALLOWED_MATCHES:
		sb_add(b, "allowed-matches(");
		fmt_attrs(b, c->query, 0);
		sb_add(b, ")");
		break;
	}
}

/* interface-policy allow { block 08:*:* allow 03:01:01 index 1 } */
static void
fmt_ipol(struct sbuf *b, const struct rule *r)
{
	const struct riface	*ri;
	uint16_t		 i;

	sb_printf(b, "interface-policy %s {", r->ipol_allow ? "allow" :
	    "block");
	for (i = 0; i < r->ni; i++) {
		ri = &r->ri[i];
		sb_add(b, ri->allow ? " allow " : " block ");
		if (ri->any_cls)
			sb_add(b, "*:*:*");
		else
			fmt_value(b, A_WITH_INTERFACE, &ri->pat);
		if (ri->has_index)
			sb_printf(b, " index %u", ri->index);
		if (ri->has_config)
			sb_printf(b, " configuration %u", ri->config);
	}
	sb_add(b, " }");
}

static void
fmt_attrs(struct sbuf *b, const struct rule *r, int lead)
{
	int		k;
	uint16_t	i;

	for (k = 0; k < A_NKINDS; k++) {
		if (!r->a[k].present)
			continue;
		if (lead)
			sb_add(b, " ");
		lead = 1;
		fmt_attr(b, (enum attr_kind)k, &r->a[k]);
	}
	if (r->has_ipol) {
		if (lead)
			sb_add(b, " ");
		lead = 1;
		fmt_ipol(b, r);
	}
	if (!r->has_cond)
		return;
	if (lead)
		sb_add(b, " ");
	sb_add(b, "if ");
	if (r->cop == OP_EQUALS && r->nc == 1) {
		fmt_cond(b, &r->c[0]);
		return;
	}
	if (r->cop != OP_EQUALS) {
		sb_add(b, setop_names[r->cop]);
		sb_add(b, " ");
	}
	sb_add(b, "{");
	for (i = 0; i < r->nc; i++) {
		sb_add(b, " ");
		fmt_cond(b, &r->c[i]);
	}
	sb_add(b, " }");
}

char *
rule_format(const struct rule *r)
{
	struct sbuf b;

	memset(&b, 0, sizeof(b));
	sb_add(&b, rule_target_name(r->target));
	fmt_attrs(&b, r, 1);
	return b.p;
}

/* ------------------------------------------------------------------ */
/* Equality                                                             */

static int
value_equal(enum attr_kind k, const struct rvalue *a, const struct rvalue *b)
{
	switch (attr_defs[k].type) {
	case V_ID:
		return a->any_vid == b->any_vid && a->any_pid == b->any_pid &&
		    a->vid == b->vid && a->pid == b->pid;
	case V_IFACE:
		return a->cls == b->cls && a->sub == b->sub &&
		    a->proto == b->proto && a->any_sub == b->any_sub &&
		    a->any_proto == b->any_proto;
	case V_STRING:
	case V_HASH:
	case V_EXPNAME:
		return strcmp(a->str, b->str) == 0;
	case V_HOST:
		if (a->is_addr != b->is_addr)
			return 0;
		if (a->is_addr)
			return a->prefix == b->prefix &&
			    a->addr.family == b->addr.family &&
			    memcmp(a->addr.addr, b->addr.addr, 16) == 0;
		return strcmp(a->str, b->str) == 0;
	}
	return 0;
}

int
rule_equal(const struct rule *a, const struct rule *b)
{
	int		k;
	uint16_t	i;

	if (a->target != b->target || a->has_cond != b->has_cond)
		return 0;
	for (k = 0; k < A_NKINDS; k++) {
		const struct rattr *x = &a->a[k], *y = &b->a[k];

		if (x->present != y->present)
			return 0;
		if (!x->present)
			continue;
		if (x->op != y->op || x->n != y->n)
			return 0;
		for (i = 0; i < x->n; i++)
			if (!value_equal((enum attr_kind)k, &x->v[i], &y->v[i]))
				return 0;
	}
	if (a->has_ipol != b->has_ipol || a->ipol_allow != b->ipol_allow ||
	    a->ni != b->ni)
		return 0;
	for (i = 0; i < a->ni; i++) {
		const struct riface *x = &a->ri[i], *y = &b->ri[i];

		if (x->allow != y->allow || x->any_cls != y->any_cls ||
		    !value_equal(A_WITH_INTERFACE, &x->pat, &y->pat) ||
		    x->has_index != y->has_index ||
		    x->has_config != y->has_config ||
		    (x->has_index && x->index != y->index) ||
		    (x->has_config && x->config != y->config))
			return 0;
	}
	if (!a->has_cond)
		return 1;
	if (a->cop != b->cop || a->nc != b->nc)
		return 0;
	for (i = 0; i < a->nc; i++) {
		const struct rcond *x = &a->c[i], *y = &b->c[i];

		if (x->kind != y->kind || x->negated != y->negated)
			return 0;
		switch (x->kind) {
		case C_LOCALTIME:
			if (x->begin != y->begin || x->end != y->end)
				return 0;
			break;
		case C_WEEKDAY:
			if (x->days != y->days)
				return 0;
			break;
		case C_ALLOWED_MATCHES:
			if (!rule_equal(x->query, y->query))
				return 0;
			break;
		}
	}
	return 1;
}

/* ------------------------------------------------------------------ */
/* Matching                                                             */

/* '*' matches any run of characters; nothing else is special. */
static int
glob_match(const char *pat, const char *s, int fold)
{
	const char *star = NULL, *resume = NULL;

	while (*s != '\0') {
		if (*pat == '*') {
			star = pat++;
			resume = s;
		} else if (*pat != '\0' && (fold ?
		    tolower((unsigned char)*pat) == tolower((unsigned char)*s) :
		    *pat == *s)) {
			pat++;
			s++;
		} else if (star != NULL) {
			pat = star + 1;
			s = ++resume;
		} else
			return 0;
	}
	while (*pat == '*')
		pat++;
	return *pat == '\0';
}

static int
host_match(const struct rvalue *v, const struct usbgw_context *ctx)
{
	if (!v->is_addr)
		return ctx->host_name != NULL &&
		    glob_match(v->str, ctx->host_name, 1);
	return usbgw_addr_in(&v->addr, v->prefix, &ctx->host_addr);
}

struct mctx {
	const struct usbgw_identity	*id;
	const struct usbgw_context	*ctx;
};

/* Does pattern v match the device's idx-th value of attribute k? */
static int
value_match(enum attr_kind k, const struct rvalue *v, const struct mctx *m,
    unsigned idx)
{
	const struct usbgw_identity	*id = m->id;
	const struct usbgw_iface	*f;

	switch (k) {
	case A_ID:
		return (v->any_vid || v->vid == id->vid) &&
		    (v->any_pid || v->pid == id->pid);
	case A_NAME:
		return strcmp(v->str, id->product) == 0;
	case A_MANUFACTURER:
		return strcmp(v->str, id->manufacturer) == 0;
	case A_SERIAL:
		return strcmp(v->str, id->serial) == 0;
	case A_HASH:
		return strcasecmp(v->str, id->hash) == 0;
	case A_VIA_PORT:
		return strcmp(v->str, id->exporter_busid) == 0;
	case A_VIA_EXPORTER:
		return glob_match(v->str, id->exporter, 0);
	case A_WITH_INTERFACE:
		f = &id->ifaces[idx];
		return v->cls == f->cls && (v->any_sub || v->sub == f->subcls) &&
		    (v->any_proto || v->proto == f->proto);
	case A_TO_HOST:
		return host_match(v, m->ctx);
	default:
		return 1;
	}
}

/* Kuhn's augmenting path for the one-to-one pairing of "equals". */
static int
augment(unsigned i, const uint64_t *adj, unsigned nt, int *owner,
    uint64_t *seen)
{
	unsigned t;

	for (t = 0; t < nt; t++) {
		if (!(adj[i] & (1ull << t)) || (*seen & (1ull << t)))
			continue;
		*seen |= 1ull << t;
		if (owner[t] < 0 ||
		    augment((unsigned)owner[t], adj, nt, owner, seen)) {
			owner[t] = (int)i;
			return 1;
		}
	}
	return 0;
}

static int
attr_match(enum attr_kind k, const struct rattr *a, const struct mctx *m)
{
	unsigned	nt, i, t;
	uint64_t	adj[USBGW_IFACE_MAX], seen;
	int		owner[USBGW_IFACE_MAX], any;

	nt = k == A_WITH_INTERFACE ? (m->id->n_ifaces > USBGW_IFACE_MAX ?
	    USBGW_IFACE_MAX : m->id->n_ifaces) : 1;
	switch (a->op) {
	case OP_ALL_OF:
		for (i = 0; i < a->n; i++) {
			for (t = 0, any = 0; t < nt && !any; t++)
				any = value_match(k, &a->v[i], m, t);
			if (!any)
				return 0;
		}
		return 1;
	case OP_ONE_OF:
	case OP_NONE_OF:
		for (i = 0; i < a->n; i++)
			for (t = 0; t < nt; t++)
				if (value_match(k, &a->v[i], m, t))
					return a->op == OP_ONE_OF;
		return a->op == OP_NONE_OF;
	case OP_MATCH_ALL:
		for (t = 0; t < nt; t++) {
			for (i = 0, any = 0; i < a->n && !any; i++)
				any = value_match(k, &a->v[i], m, t);
			if (!any)
				return 0;
		}
		return 1;
	case OP_EQUALS_ORDERED:
		if (a->n != nt)
			return 0;
		for (i = 0; i < nt; i++)
			if (!value_match(k, &a->v[i], m, i))
				return 0;
		return 1;
	case OP_EQUALS:
		if (a->n != nt)
			return 0;
		for (i = 0; i < nt; i++) {
			adj[i] = 0;
			owner[i] = -1;
			for (t = 0; t < nt; t++)
				if (value_match(k, &a->v[i], m, t))
					adj[i] |= 1ull << t;
			if (adj[i] == 0)
				return 0;
		}
		for (i = 0; i < nt; i++) {
			seen = 0;
			if (!augment(i, adj, nt, owner, &seen))
				return 0;
		}
		return 1;
	}
	return 0;
}

int
rule_match_attrs(const struct rule *r, const struct usbgw_identity *id,
    const struct usbgw_context *ctx)
{
	struct mctx	m = { id, ctx };
	int		k;

	if (r->a[A_TO_HOST].present && (ctx == NULL ||
	    (ctx->host_name == NULL && ctx->host_addr.family == 0)))
		return 0;
	for (k = 0; k < A_NKINDS; k++) {
		if (!r->a[k].present || k == A_LABEL)
			continue;
		if (!attr_match((enum attr_kind)k, &r->a[k], &m))
			return 0;
	}
	return 1;
}

static int
local_tm(int64_t now, struct tm *tm)
{
	time_t t = (time_t)now;

	return localtime_r(&t, tm) == NULL ? -1 : 0;
}

static int
cond_leaf(const struct rcond *c, const struct usbgw_context *ctx,
    const struct tm *tm)
{
	uint32_t	sod;
	int		v = 0;

	switch (c->kind) {
	case C_TRUE:
		v = 1;
		break;
	case C_FALSE:
		v = 0;
		break;
	case C_LOCALTIME:
		sod = (uint32_t)(tm->tm_hour * 3600 + tm->tm_min * 60 +
		    (tm->tm_sec > 59 ? 59 : tm->tm_sec));
		if (c->begin <= c->end)
			v = sod >= c->begin && sod <= c->end;
		else
			v = sod >= c->begin || sod <= c->end;
		break;
	case C_WEEKDAY:
		v = (c->days >> tm->tm_wday) & 1;
		break;
	case C_ALLOWED_MATCHES:
		v = ctx != NULL && ctx->allowed_matches != NULL &&
		    ctx->allowed_matches(ctx->arg, c->query) ? 1 : 0;
		break;
	}
	return c->negated ? !v : v;
}

int
rule_match_cond(const struct rule *r, const struct usbgw_context *ctx,
    int64_t now)
{
	struct tm	tm;
	uint16_t	i;
	int		v;

	if (!r->has_cond)
		return 1;
	if (local_tm(now, &tm) == -1)
		return 0;
	for (i = 0; i < r->nc; i++) {
		v = cond_leaf(&r->c[i], ctx, &tm);
		if (r->cop == OP_ONE_OF && v)
			return 1;
		if (r->cop == OP_NONE_OF && v)
			return 0;
		if (r->cop != OP_ONE_OF && r->cop != OP_NONE_OF && !v)
			return 0;
	}
	if (r->cop == OP_ONE_OF)
		return 0;
	return 1;
}

int
rule_match(const struct rule *r, const struct usbgw_identity *id,
    const struct usbgw_context *ctx, int64_t now)
{
	return rule_match_attrs(r, id, ctx) && rule_match_cond(r, ctx, now);
}

/* ------------------------------------------------------------------ */
/* When may the condition change?                                       */

static long
utc_offset(int64_t t)
{
	struct tm tm;

	if (local_tm(t, &tm) == -1)
		return 0;
	return tm.tm_gmtoff;
}

/*
 * The next instant > now at which the local wall clock reads sod, or the
 * first instant the UTC offset changes before that (the wall clock jumps
 * there, possibly over sod).
 */
static int64_t
next_wallclock(int64_t now, uint32_t sod)
{
	struct tm	tm;
	int64_t		cur, delta, t, lo, hi, mid;
	long		off0;

	if (local_tm(now, &tm) == -1)
		return now + 60;
	cur = tm.tm_hour * 3600 + tm.tm_min * 60 +
	    (tm.tm_sec > 59 ? 59 : tm.tm_sec);
	delta = ((int64_t)sod - cur + SECONDS_PER_DAY) % SECONDS_PER_DAY;
	if (delta == 0)
		delta = SECONDS_PER_DAY;
	t = now + delta;
	off0 = tm.tm_gmtoff;
	if (utc_offset(t) == off0)
		return t;
	lo = now;
	hi = t;
	while (hi - lo > 1) {
		mid = lo + (hi - lo) / 2;
		if (utc_offset(mid) == off0)
			lo = mid;
		else
			hi = mid;
	}
	return hi;
}

int64_t
rule_next_change(const struct rule *r, int64_t now)
{
	int64_t		best = RULE_NEVER, t;
	uint16_t	i;
	const struct rcond *c;

	if (!r->has_cond)
		return RULE_NEVER;
	for (i = 0; i < r->nc; i++) {
		c = &r->c[i];
		if (c->kind == C_LOCALTIME) {
			uint32_t after = (c->end + 1) % SECONDS_PER_DAY;

			if (after == c->begin)
				continue;	/* the whole day */
			t = next_wallclock(now, c->begin);
			if (t < best)
				best = t;
			t = next_wallclock(now, after);
			if (t < best)
				best = t;
		} else if (c->kind == C_WEEKDAY && c->days != 0x7f) {
			t = next_wallclock(now, 0);
			if (t < best)
				best = t;
		}
	}
	return best;
}

/* ------------------------------------------------------------------ */
/* Index keys, rules from an identity                                   */

int
rule_id_keys(const struct rule *r, struct rule_idkey *keys, size_t max)
{
	const struct rattr	*a = &r->a[A_ID];
	uint16_t		 i;
	size_t			 n = 0;
	int			 pick = -1;

	if (!a->present || a->op == OP_NONE_OF)
		return -1;
	if (a->op == OP_ALL_OF) {
		/* All must match: one key (the most specific) suffices. */
		for (i = 0; i < a->n; i++) {
			if (a->v[i].any_vid)
				continue;
			if (pick == -1 || (a->v[pick].any_pid &&
			    !a->v[i].any_pid))
				pick = i;
		}
		if (pick == -1 || max < 1)
			return -1;
		keys[0].vid = a->v[pick].vid;
		keys[0].pid = a->v[pick].pid;
		keys[0].any_pid = a->v[pick].any_pid;
		return 1;
	}
	for (i = 0; i < a->n; i++) {
		if (a->v[i].any_vid || n == max)
			return -1;
		keys[n].vid = a->v[i].vid;
		keys[n].pid = a->v[i].pid;
		keys[n].any_pid = a->v[i].any_pid;
		n++;
	}
	return (int)n;
}

static void
set_single(struct rule *r, enum attr_kind k, const struct rvalue *v)
{
	r->a[k].present = 1;
	r->a[k].op = OP_EQUALS;
	attr_push(&r->a[k], v);
}

static void
set_string(struct rule *r, enum attr_kind k, const char *s, size_t max)
{
	struct rvalue v;

	memset(&v, 0, sizeof(v));
	v.str = xstrndup(s, strnlen(s, max - 1));
	set_single(r, k, &v);
}

struct rule *
rule_from_identity(const struct usbgw_identity *id, enum rule_target target,
    unsigned flags, const char *host)
{
	struct rule	*r;
	struct rvalue	 v;
	unsigned	 i;
	char		 why[160];

	for (i = 0; i < USBGW_HASH_HEX; i++)
		if (!is_hex((unsigned char)id->hash[i]))
			return NULL;
	if (id->hash[USBGW_HASH_HEX] != '\0')
		return NULL;
	if ((flags & RULE_FROM_ID_EXPORTER) && id->exporter[0] == '\0')
		return NULL;
	r = xcalloc(1, sizeof(*r));
	r->target = target;
	memset(&v, 0, sizeof(v));
	v.vid = id->vid;
	v.pid = id->pid;
	set_single(r, A_ID, &v);
	set_string(r, A_NAME, id->product, USBGW_STR_MAX);
	set_string(r, A_SERIAL, id->serial, USBGW_STR_MAX);
	set_string(r, A_HASH, id->hash, USBGW_HASH_HEX + 1);
	for (i = 0; i < USBGW_HASH_HEX; i++)
		r->a[A_HASH].v[0].str[i] = (char)tolower(
		    (unsigned char)r->a[A_HASH].v[0].str[i]);
	if (flags & RULE_FROM_ID_PORT)
		set_string(r, A_VIA_PORT, id->exporter_busid, USBGW_BUSID_MAX);
	if (flags & RULE_FROM_ID_EXPORTER)
		set_string(r, A_VIA_EXPORTER, id->exporter, USBGW_EXPORTER_MAX);
	if (id->n_ifaces > 0) {
		r->a[A_WITH_INTERFACE].present = 1;
		r->a[A_WITH_INTERFACE].op = OP_EQUALS;
		for (i = 0; i < id->n_ifaces && i < USBGW_IFACE_MAX; i++) {
			memset(&v, 0, sizeof(v));
			v.cls = id->ifaces[i].cls;
			v.sub = id->ifaces[i].subcls;
			v.proto = id->ifaces[i].proto;
			attr_push(&r->a[A_WITH_INTERFACE], &v);
		}
	}
	if (host != NULL) {
		memset(&v, 0, sizeof(v));
		if (strlen(host) >= USBGW_HOST_MAX ||
		    host_value(host, strlen(host), &v, why, sizeof(why)) == -1) {
			rule_free(r);
			return NULL;
		}
		set_single(r, A_TO_HOST, &v);
	}
	return r;
}

int
rule_has_iface_policy(const struct rule *r)
{
	return r->has_ipol;
}

/* First inner rule that matches the interface descriptor, else the implicit target. */
int
rule_iface_allowed(const struct rule *r, uint8_t config, uint8_t number,
    uint8_t cls, uint8_t subcls, uint8_t proto)
{
	const struct riface	*ri;
	uint16_t		 i;

	if (!r->has_ipol)
		return 1;
	for (i = 0; i < r->ni; i++) {
		ri = &r->ri[i];
		if (!ri->any_cls && ri->pat.cls != cls)
			continue;
		if (!ri->pat.any_sub && ri->pat.sub != subcls)
			continue;
		if (!ri->pat.any_proto && ri->pat.proto != proto)
			continue;
		if (ri->has_index && ri->index != number)
			continue;
		if (ri->has_config && ri->config != config)
			continue;
		return ri->allow;
	}
	return r->ipol_allow;
}
