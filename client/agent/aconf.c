/*
 * usbgw-agent's configuration file (aconf.h).  Line-oriented, "KEY
 * VALUE", every error reported as FILE:LINE:COLUMN with what was
 * expected, all of them at once (bounded), in the manner of
 * gateway/control/config.c, whose address parsers it reuses; networks go
 * through host_match_parse() (protocol.md 3.6: host bits are an error)
 * and rules through rule.c (keep.c).
 */
#include <sys/stat.h>
#include <netinet/in.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aconf.h"
#include "base/log.h"
#include "base/util.h"

#define PERR_LINE_MAX	768
#define SHOWN_MAX	48

struct parse {
	const char	*name;
	char		 errs[(ACONF_MAX_ERRORS + 1) * PERR_LINE_MAX];
	size_t		 errlen;
	int		 nerrs;
	const char	*line;		/* the line being parsed */
	int		 lineno;
	/* where single keys were set */
	int		 name_line, audit_line, state_line, maxconn_line;
	int		 tls_line, tlsdir_line, rdays_line, rcheck_line, zc_line;
	int		 listen_line, none_line;
};

static void perr(struct parse *, const char *, const char *, ...)
    __attribute__((format(printf, 3, 4)));

/* Column (1-based, in characters) of position at in the current line. */
static int
column_of(const struct parse *p, const char *at)
{
	const char *s;
	int col = 1;

	/* (past NULs: next_word() cuts the line into words in place) */
	for (s = p->line; s < at; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			col++;
	return col;
}

static void
perr_col(struct parse *p, int col, const char *msg)
{
	char out[PERR_LINE_MAX];
	size_t n;

	if (++p->nerrs > ACONF_MAX_ERRORS) {
		if (p->nerrs == ACONF_MAX_ERRORS + 1)
			snprintf(out, sizeof(out), "%s: too many errors, giving "
			    "up\n", p->name);
		else
			return;
	} else if (p->lineno > 0)
		snprintf(out, sizeof(out), "%s:%d:%d: %s\n", p->name, p->lineno,
		    col, msg);
	else
		snprintf(out, sizeof(out), "%s: %s\n", p->name, msg);
	n = strlen(out);
	out[n - 1] = '\n';			/* even when cut short */
	if (n >= sizeof(p->errs) - p->errlen)	/* bounded: cannot happen */
		n = sizeof(p->errs) - p->errlen - 1;
	memcpy(p->errs + p->errlen, out, n);
	p->errlen += n;
	p->errs[p->errlen] = '\0';
}

/* An error at position at of the current line. */
static void
perr(struct parse *p, const char *at, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	perr_col(p, at != NULL ? column_of(p, at) : 1, msg);
}

/* A value as an error message quotes it: printable ASCII, bounded. */
static const char *
shown(const char *s, char *buf, size_t len)
{
	size_t i, o = 0;

	for (i = 0; s[i] != '\0' && i < SHOWN_MAX && o + 5 < len; i++)
		buf[o++] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
	buf[o] = '\0';
	if (s[i] != '\0')
		usbgw_strlcat(buf, "...", len);
	return buf;
}

struct aconf *
aconf_new(void)
{
	struct aconf *c = xcalloc(1, sizeof(*c));

	c->keep = keep_list_new();
	c->noreset = keep_list_new();
	usbgw_strlcpy(c->state_file, ACONF_DEFAULT_STATE, sizeof(c->state_file));
	usbgw_strlcpy(c->tls_dir, ACONF_DEFAULT_TLS_DIR, sizeof(c->tls_dir));
	c->max_connections = 64;
	c->zero_copy = true;
	c->renew_days = 30;
	c->renew_check_ms = 12 * 3600 * 1000ULL;
	return c;
}

void
aconf_free(struct aconf *c)
{
	if (c == NULL)
		return;
	keep_list_free(c->keep);
	keep_list_free(c->noreset);
	free(c);
}

void
aconf_finish(struct aconf *c)
{
	keep_list_add_defaults(c->keep);
	keep_noreset_add_defaults(c->noreset);
}

size_t
aconf_listen_addrs(const struct aconf *c, const struct net_addr **addrs)
{
	static const struct net_addr any = { "", ACONF_DEFAULT_PORT };

	if (c->listen_none && c->nlisten == 0)
		return 0;
	if (c->nlisten > 0) {
		*addrs = c->listen;
		return c->nlisten;
	}
	*addrs = &any;
	return 1;
}

bool
aconf_allowed(const struct aconf *c, const struct sockaddr *sa)
{
	struct host_id h;
	size_t i;

	memset(&h, 0, sizeof(h));
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		h.addr.family = AF_INET;
		memcpy(h.addr.addr, &in->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 =
		    (const struct sockaddr_in6 *)sa;

		h.addr.family = AF_INET6;
		memcpy(h.addr.addr, &in6->sin6_addr, 16);
	} else
		return false;
	for (i = 0; i < c->nallow; i++)
		if (c->allow[i].kind == HOST_ADDR &&
		    host_match_test(&c->allow[i], &h))
			return true;
	return false;
}

/* ---- values -------------------------------------------------------- */

/* A listen address: numeric, or '*'.  Returns 0 or -1 with why. */
static int
listen_parse(const char *v, struct net_addr *a, char *why, size_t whylen)
{
	struct usbgw_addr ua;
	const char *errstr;

	if (parse_listen(v, a, &errstr) == -1) {
		snprintf(why, whylen, "%s", errstr);
		return -1;
	}
	if (a->host[0] != '\0' && usbgw_addr_parse(a->host, &ua) == -1) {
		snprintf(why, whylen, "expected a numeric IPv4 or [IPv6] "
		    "address or '*' before the port");
		return -1;
	}
	return 0;
}

static int
allow_parse(const char *v, struct host_match *m, char *why, size_t whylen)
{
	char sb[SHOWN_MAX + 8];

	/* An IPv4 address starts with a digit, an IPv6 one has a ':';
	 * anything else would get host_match_parse()'s message on names. */
	if (*v == '\0' || (strchr(v, ':') == NULL && !(*v >= '0' &&
	    *v <= '9'))) {
		snprintf(why, whylen, "expected an address or CIDR network, "
		    "got '%s'", shown(v, sb, sizeof(sb)));
		return -1;
	}
	if (host_match_parse(v, false, m, why, whylen) == -1)
		return -1;
	if (m->kind != HOST_ADDR) {
		snprintf(why, whylen, "expected an address or CIDR network");
		return -1;
	}
	return 0;
}

int
aconf_flag_listen(struct aconf *c, const char *v, char *err, size_t errlen)
{
	struct net_addr a;
	char why[256], sb[SHOWN_MAX + 8];

	if (listen_parse(v, &a, why, sizeof(why)) == -1) {
		snprintf(err, errlen, "-l %s: %s", shown(v, sb, sizeof(sb)), why);
		return -1;
	}
	if (!c->listen_flagged) {
		c->nlisten = 0;
		c->listen_none = false;
		c->listen_flagged = true;
	}
	if (c->nlisten >= ACONF_MAX_LISTEN) {
		snprintf(err, errlen, "-l %s: expected at most %d listen "
		    "addresses", shown(v, sb, sizeof(sb)), ACONF_MAX_LISTEN);
		return -1;
	}
	c->listen[c->nlisten++] = a;
	return 0;
}

int
aconf_flag_allow(struct aconf *c, const char *v, char *err, size_t errlen)
{
	char why[256], sb[SHOWN_MAX + 8];

	if (c->nallow >= ACONF_MAX_ALLOW) {
		snprintf(err, errlen, "-a %s: expected at most %d allow-from "
		    "entries", shown(v, sb, sizeof(sb)), ACONF_MAX_ALLOW);
		return -1;
	}
	if (allow_parse(v, &c->allow[c->nallow], why, sizeof(why)) == -1) {
		snprintf(err, errlen, "-a %s: %s", shown(v, sb, sizeof(sb)), why);
		return -1;
	}
	c->nallow++;
	return 0;
}

/* ---- lines ----------------------------------------------------------- */

static int
is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static char *
skip_ws(char *s)
{
	while (is_blank(*s))
		s++;
	return s;
}

/* Split the next word off *sp (NUL-terminated in place); NULL at the
 * end of the line or at a '#' comment. */
static char *
next_word(char **sp)
{
	char *s = skip_ws(*sp), *w;

	if (*s == '\0' || *s == '#') {
		*sp = s;
		return NULL;
	}
	w = s;
	while (*s != '\0' && !is_blank(*s))
		s++;
	if (*s != '\0')
		*s++ = '\0';
	*sp = s;
	return w;
}

/* Exactly one value after key: the value, or NULL after an error. */
static char *
one_value(struct parse *p, const char *key, char **rest, const char *what)
{
	char *v, *extra, sb[SHOWN_MAX + 8];

	if ((v = next_word(rest)) == NULL) {
		perr(p, *rest, "%s: expected %s", key, what);
		return NULL;
	}
	if ((extra = next_word(rest)) != NULL) {
		perr(p, extra, "%s: expected the end of the line after %s, got "
		    "'%s'", key, what, shown(extra, sb, sizeof(sb)));
		return NULL;
	}
	return v;
}

/* A key that may appear once: 0, or -1 after an error. */
static int
once(struct parse *p, const char *key, const char *at, int *seen)
{
	if (*seen != 0) {
		perr(p, at, "%s: already set at line %d", key, *seen);
		return -1;
	}
	*seen = p->lineno;
	return 0;
}

static int
name_ok(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n >= ACONF_NAME_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' &&
		    s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
		    s[i] == '.' || s[i] == '_' || s[i] == '-'))
			return 0;
	return 1;
}

static void
parse_path(struct parse *p, const char *key, char **rest, char *field,
    int *seen, bool none_ok)
{
	char *v, sb[SHOWN_MAX + 8];

	if ((v = one_value(p, key, rest, none_ok ? "an absolute path or "
	    "none" : "an absolute path")) == NULL)
		return;
	if (once(p, key, v, seen) == -1)
		return;
	if (none_ok && strcmp(v, "none") == 0) {
		field[0] = '\0';
		return;
	}
	if (v[0] != '/' || strlen(v) >= ACONF_PATH_MAX) {
		perr(p, v, "%s: expected an absolute path of at most %d bytes%s, "
		    "got '%s'", key, ACONF_PATH_MAX - 1, none_ok ? " or none" :
		    "", shown(v, sb, sizeof(sb)));
		return;
	}
	usbgw_strlcpy(field, v, ACONF_PATH_MAX);
}

static void
parse_rule_line(struct aconf *c, struct parse *p, const char *key, char *rest)
{
	struct keep_list *list;
	struct rule_error err;
	char *text = skip_ws(rest);
	size_t n;
	bool local;

	n = strlen(text);
	while (n > 0 && is_blank(text[n - 1]))
		text[--n] = '\0';
	if (*text == '\0' || *text == '#') {
		perr(p, text, "%s: expected a rule (id, name, manufacturer, "
		    "serial, hash, with-interface, via-port)", key);
		return;
	}
	list = strcmp(key, "no-reset") == 0 ? c->noreset : c->keep;
	local = strcmp(key, "export") != 0;
	if (keep_list_add(list, local, text, p->lineno, &err) == -1) {
		char msg[sizeof(err.msg) * 4 + 32], esc[sizeof(err.msg) * 4];

		/* rule.c quotes the text as it is; an error line is ASCII */
		snprintf(msg, sizeof(msg), "%s: %s", key, log_escape(esc,
		    sizeof(esc), err.msg, strlen(err.msg)));
		perr_col(p, column_of(p, text) + err.column - 1, msg);
	}
}

static void
parse_line(struct aconf *c, struct parse *p, char *s)
{
	char *rest, *key, *v, why[256], sb[SHOWN_MAX + 8];
	struct net_addr a;
	const char *errstr;
	long long n;
	size_t i;

	for (i = 0; s[i] != '\0'; i++)
		if ((unsigned char)s[i] < 0x20 && s[i] != '\t' &&
		    !(s[i] == '\r' && s[i + 1] == '\0')) {
			perr(p, s + i, "expected text, got control character "
			    "0x%02x", (unsigned char)s[i]);
			return;
		}
	if (i > 0 && s[i - 1] == '\r')
		s[i - 1] = '\0';
	rest = s;
	if ((key = next_word(&rest)) == NULL)
		return;			/* blank or comment */

	if (strcmp(key, "name") == 0) {
		if ((v = one_value(p, key, &rest, "a name")) == NULL ||
		    once(p, key, v, &p->name_line) == -1)
			return;
		if (!name_ok(v)) {
			perr(p, v, "name: expected 1 to %d letters, digits, '.', "
			    "'-' or '_', got '%s'", ACONF_NAME_MAX - 1,
			    shown(v, sb, sizeof(sb)));
			return;
		}
		usbgw_strlcpy(c->name, v, sizeof(c->name));
	} else if (strcmp(key, "listen") == 0) {
		if ((v = one_value(p, key, &rest, "ADDRESS:PORT, [IPV6]:PORT, "
		    "*:PORT or none")) == NULL)
			return;
		if (strcmp(v, "none") == 0) {
			if (p->listen_line != 0) {
				perr(p, v, "listen: none, but line %d listens",
				    p->listen_line);
				return;
			}
			p->none_line = p->lineno;
			c->listen_none = true;
			return;
		}
		if (p->none_line != 0) {
			perr(p, v, "listen: line %d said none", p->none_line);
			return;
		}
		if (listen_parse(v, &a, why, sizeof(why)) == -1) {
			perr(p, v, "listen: %s, got '%s'", why,
			    shown(v, sb, sizeof(sb)));
			return;
		}
		if (c->nlisten >= ACONF_MAX_LISTEN) {
			perr(p, v, "listen: expected at most %d addresses",
			    ACONF_MAX_LISTEN);
			return;
		}
		if (p->listen_line == 0)
			p->listen_line = p->lineno;
		c->listen[c->nlisten++] = a;
	} else if (strcmp(key, "allow-from") == 0) {
		if ((v = next_word(&rest)) == NULL) {
			perr(p, rest, "allow-from: expected an address or CIDR "
			    "network");
			return;
		}
		for (; v != NULL; v = next_word(&rest)) {
			if (c->nallow >= ACONF_MAX_ALLOW) {
				perr(p, v, "allow-from: expected at most %d "
				    "entries", ACONF_MAX_ALLOW);
				return;
			}
			if (allow_parse(v, &c->allow[c->nallow], why,
			    sizeof(why)) == -1)
				perr(p, v, "allow-from: %s", why);
			else
				c->nallow++;
		}
	} else if (strcmp(key, "keep-local") == 0 ||
	    strcmp(key, "export") == 0 || strcmp(key, "no-reset") == 0)
		parse_rule_line(c, p, key, rest);
	else if (strcmp(key, "audit-log") == 0)
		parse_path(p, key, &rest, c->audit_log, &p->audit_line, false);
	else if (strcmp(key, "state-file") == 0)
		parse_path(p, key, &rest, c->state_file, &p->state_line, true);
	else if (strcmp(key, "tls-dir") == 0)
		parse_path(p, key, &rest, c->tls_dir, &p->tlsdir_line, false);
	else if (strcmp(key, "tls") == 0) {
		if ((v = one_value(p, key, &rest, "required or off")) == NULL ||
		    once(p, key, v, &p->tls_line) == -1)
			return;
		if (strcmp(v, "required") == 0)
			c->tls_required = true;
		else if (strcmp(v, "off") == 0)
			c->tls_required = false;
		else
			perr(p, v, "tls: expected required or off, got '%s' "
			    "(optional would let whoever answers first choose "
			    "plaintext)", shown(v, sb, sizeof(sb)));
	} else if (strcmp(key, "gateway") == 0) {
		bool gtls = false;
		char *t;

		if ((v = next_word(&rest)) == NULL) {
			perr(p, rest, "gateway: expected HOST[:PORT] [tls]");
			return;
		}
		if ((t = next_word(&rest)) != NULL) {
			if (strcmp(t, "tls") != 0 || next_word(&rest) != NULL) {
				perr(p, t, "gateway: expected HOST[:PORT] [tls], "
				    "got '%s' after the address", shown(t, sb,
				    sizeof(sb)));
				return;
			}
			gtls = true;
		}
		if (parse_addr(v, ACONF_DEFAULT_PORT, &a, &errstr) == -1) {
			perr(p, v, "gateway: %s, got '%s'", errstr,
			    shown(v, sb, sizeof(sb)));
			return;
		}
		if (a.host[0] == '\0') {
			perr(p, v, "gateway: expected a host, got '%s'",
			    shown(v, sb, sizeof(sb)));
			return;
		}
		if (c->ngateways >= ACONF_MAX_GATEWAYS) {
			perr(p, v, "gateway: expected at most %d gateways",
			    ACONF_MAX_GATEWAYS);
			return;
		}
		c->gateways_tls[c->ngateways] = gtls;
		c->gateways[c->ngateways++] = a;
	} else if (strcmp(key, "tls-renew-days") == 0) {
		if ((v = one_value(p, key, &rest, "a number of days")) == NULL ||
		    once(p, key, v, &p->rdays_line) == -1)
			return;
		if (parse_num(v, 1, 3650, &n, &errstr) == -1) {
			perr(p, v, "tls-renew-days: expected a number of days "
			    "from 1 to 3650, got '%s'", shown(v, sb,
			    sizeof(sb)));
			return;
		}
		c->renew_days = (unsigned)n;
	} else if (strcmp(key, "tls-renew-check") == 0) {
		uint64_t ms;

		if ((v = one_value(p, key, &rest, "a duration")) == NULL ||
		    once(p, key, v, &p->rcheck_line) == -1)
			return;
		if (parse_duration(v, 7 * 86400 * 1000ULL, &ms,
		    &errstr) == -1 || ms < 1000) {
			perr(p, v, "tls-renew-check: expected a duration from "
			    "1s to 7d (12h, 30m, 10s), got '%s'", shown(v, sb,
			    sizeof(sb)));
			return;
		}
		c->renew_check_ms = ms;
	} else if (strcmp(key, "max-connections") == 0) {
		if ((v = one_value(p, key, &rest, "a number")) == NULL ||
		    once(p, key, v, &p->maxconn_line) == -1)
			return;
		if (parse_num(v, 1, ACONF_MAX_CONNS, &n, &errstr) == -1) {
			perr(p, v, "max-connections: expected a number from 1 "
			    "to %d, got '%s'", ACONF_MAX_CONNS,
			    shown(v, sb, sizeof(sb)));
			return;
		}
		c->max_connections = (unsigned)n;
	} else if (strcmp(key, "zero-copy") == 0) {
		if ((v = one_value(p, key, &rest, "on or off")) == NULL ||
		    once(p, key, v, &p->zc_line) == -1)
			return;
		if (strcmp(v, "on") == 0)
			c->zero_copy = true;
		else if (strcmp(v, "off") == 0)
			c->zero_copy = false;
		else
			perr(p, v, "zero-copy: expected on or off, got '%s'",
			    shown(v, sb, sizeof(sb)));
	} else
		perr(p, key, "unknown key '%s': expected name, listen, "
		    "allow-from, keep-local, export, no-reset, audit-log, "
		    "state-file, gateway, max-connections, tls, tls-dir, "
		    "tls-renew-days, tls-renew-check or zero-copy",
		    shown(key, sb, sizeof(sb)));
}

int
aconf_parse_buf(struct aconf *c, const char *name, const char *buf,
    size_t len, char **errs)
{
	struct parse *p;
	char line[ACONF_MAX_LINE + 1];
	const char *nl;
	size_t i = 0, n;
	int rv = 0;

	*errs = NULL;
	p = xcalloc(1, sizeof(*p));
	p->name = name;
	if (len > ACONF_MAX_FILE) {
		xasprintf(errs, "%s: expected at most %d bytes\n", name,
		    ACONF_MAX_FILE);
		free(p);
		return -1;
	}
	while (i < len && p->nerrs <= ACONF_MAX_ERRORS) {
		p->lineno++;
		nl = memchr(buf + i, '\n', len - i);
		n = nl != NULL ? (size_t)(nl - (buf + i)) : len - i;
		line[0] = '\0';
		p->line = line;
		if (n > ACONF_MAX_LINE)
			perr_col(p, ACONF_MAX_LINE + 1, "expected a line of at "
			    "most " "4096" " bytes");
		else if (memchr(buf + i, '\0', n) != NULL)
			perr_col(p, (int)((const char *)memchr(buf + i, '\0', n) -
			    (buf + i)) + 1, "expected text, got a NUL byte");
		else {
			memcpy(line, buf + i, n);
			line[n] = '\0';
			parse_line(c, p, line);
		}
		i += n + (nl != NULL);
	}
	if (p->nerrs > 0) {
		*errs = xstrdup(p->errs);
		rv = -1;
	}
	free(p);
	return rv;
}

int
aconf_load(struct aconf *c, const char *path, bool must_exist, char **errs)
{
	char *buf;
	size_t len;
	int rv;

	if ((rv = usbgw_read_config_file(path, ACONF_MAX_FILE, must_exist, &buf, &len,
	    errs)) != 0)
		return rv == 1 ? 0 : -1;
	rv = aconf_parse_buf(c, path, buf, len, errs);
	if (rv == 0)
		usbgw_strlcpy(c->path, path, sizeof(c->path));
	free(buf);
	return rv;
}
