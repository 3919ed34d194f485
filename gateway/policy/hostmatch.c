/*
 * Host limits of approvals: any host, an address or CIDR prefix, or a
 * verified DNS name (decision.h).  A limit that could never match is
 * refused when it is written, not discovered when nothing matches.
 */
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "policy/decision.h"
#include "base/util.h"

#define SHOWN_MAX	64	/* input characters a message quotes */

static void	seterr(char *, size_t, const char *, ...)
		    __attribute__((format(printf, 3, 4)));

static void
seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* The input as a message may show it: printable ASCII, bounded. */
static const char *
shown(const char *s, char *buf, size_t len)
{
	size_t i;

	for (i = 0; s[i] != '\0' && i < SHOWN_MAX && i + 4 < len; i++)
		buf[i] = isprint((unsigned char)s[i]) ? s[i] : '?';
	buf[i] = '\0';
	if (s[i] != '\0')
		usbgw_strlcat(buf, "...", len);
	return buf;
}

static unsigned
addr_bits(int family)
{
	return family == AF_INET ? 32 : 128;
}

/* Clear the bits of a past prefix; 1 if some were set. */
static int
mask_host_bits(struct usbgw_addr *a, unsigned prefix)
{
	uint8_t	mask, old;
	int	set = 0;
	size_t	i;

	for (i = 0; i < sizeof(a->addr); i++) {
		if (prefix >= (i + 1) * 8)
			continue;
		if (prefix <= i * 8)
			mask = 0;
		else
			mask = (uint8_t)(0xff << (8 - (prefix - i * 8)));
		old = a->addr[i];
		a->addr[i] &= mask;
		set |= old != a->addr[i];
	}
	return set;
}

/* Digits only, 1 to 3 of them. */
static int
parse_prefix(const char *s, unsigned *out)
{
	unsigned	n = 0;
	size_t		i;

	for (i = 0; s[i] != '\0'; i++) {
		if (i == 3 || s[i] < '0' || s[i] > '9')
			return -1;
		n = n * 10 + (unsigned)(s[i] - '0');
	}
	if (i == 0)
		return -1;
	*out = n;
	return 0;
}

static int
parse_addr(const char *text, struct host_match *out, char *err,
    size_t errlen)
{
	char		 a[INET6_ADDRSTRLEN], sb[SHOWN_MAX + 8];
	char		 net[INET6_ADDRSTRLEN];
	const char	*slash, *fam;
	struct usbgw_addr masked;
	size_t		 alen;
	unsigned	 prefix, bits;

	slash = strchr(text, '/');
	alen = slash != NULL ? (size_t)(slash - text) : strlen(text);
	fam = memchr(text, ':', alen) != NULL ? "IPv6" : "IPv4";
	if (alen >= sizeof(a))
		goto bad;
	memcpy(a, text, alen);
	a[alen] = '\0';
	if (usbgw_addr_parse(a, &out->addr) == -1)
		goto bad;
	bits = addr_bits(out->addr.family);
	prefix = bits;
	if (slash != NULL && parse_prefix(slash + 1, &prefix) == -1) {
		seterr(err, errlen, "invalid prefix length in '%s': expected "
		    "a number 0-%u after '/'", shown(text, sb, sizeof(sb)),
		    bits);
		return -1;
	}
	if (prefix > bits) {
		seterr(err, errlen, "prefix /%u in '%s' is longer than an %s "
		    "address (0-%u)", prefix, shown(text, sb, sizeof(sb)), fam,
		    bits);
		return -1;
	}
	masked = out->addr;
	if (mask_host_bits(&masked, prefix)) {
		seterr(err, errlen, "%s has host bits set; did you mean %s/%u?",
		    shown(text, sb, sizeof(sb)),
		    usbgw_addr_format(&masked, net, sizeof(net)), prefix);
		return -1;
	}
	out->kind = HOST_ADDR;
	out->prefix = prefix;
	return 0;

bad:
	seterr(err, errlen, "'%s' is not a valid %s address",
	    shown(text, sb, sizeof(sb)), fam);
	return -1;
}

/* RFC 1123 labels; NULL if the name is good, else what is wrong. */
static const char *
name_problem(const char *s, size_t len)
{
	size_t	i, label = 0;
	char	c;

	if (len == 0)
		return "empty name";
	if (len > HOST_NAME_MAX_LEN)
		return "longer than 253 characters";
	for (i = 0; i <= len; i++) {
		c = i < len ? s[i] : '.';
		if (c == '.') {
			if (label == 0)
				return "empty label";
			if (s[i - 1] == '-')
				return "a label ends with '-'";
			label = 0;
			continue;
		}
		if (!isalnum((unsigned char)c) && c != '-')
			return "only letters, digits, '-' and '.' are allowed";
		if (c == '-' && label == 0)
			return "a label starts with '-'";
		if (++label > 63)
			return "a label is longer than 63 characters";
	}
	return NULL;
}

static int
parse_name(const char *text, bool names_checked, struct host_match *out,
    char *err, size_t errlen)
{
	char		 sb[SHOWN_MAX + 8];
	const char	*why;
	size_t		 len, i;

	len = strlen(text);
	if (len > 0 && text[len - 1] == '.')
		len--;
	if ((why = name_problem(text, len)) != NULL) {
		seterr(err, errlen, "'%s' is not a host name (%s): expected an "
		    "IPv4 or IPv6 address, a CIDR prefix or a DNS host name",
		    shown(text, sb, sizeof(sb)), why);
		return -1;
	}
	if (!names_checked) {
		seterr(err, errlen, "host names are not verified by this "
		    "gateway, so a limit to '%s' could never match: use an "
		    "address or a CIDR prefix", shown(text, sb, sizeof(sb)));
		return -1;
	}
	for (i = 0; i < len; i++)
		out->name[i] = (char)tolower((unsigned char)text[i]);
	out->name[len] = '\0';
	out->kind = HOST_NAME;
	return 0;
}

/* An address, a prefix, or digits and dots that were meant as one. */
static int
looks_like_addr(const char *s)
{
	if (strchr(s, ':') != NULL || strchr(s, '/') != NULL)
		return 1;
	return strspn(s, "0123456789.") == strlen(s) &&
	    strpbrk(s, "0123456789") != NULL;
}

int
host_match_parse(const char *text, bool names_checked, struct host_match *out,
    char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	seterr(err, errlen, "%s", "");
	if (text == NULL || *text == '\0')
		return 0;
	if (looks_like_addr(text)) {
		if (parse_addr(text, out, err, errlen) == 0)
			return 0;
	} else if (parse_name(text, names_checked, out, err, errlen) == 0)
		return 0;
	/* Fail closed: a caller that ignores -1 gets a limit no host passes. */
	memset(out, 0, sizeof(*out));
	out->kind = HOST_NAME;
	return -1;
}

char *
host_match_format(const struct host_match *m, char *buf, size_t len)
{
	char	a[INET6_ADDRSTRLEN];

	if (len == 0)
		return buf;
	buf[0] = '\0';
	switch (m->kind) {
	case HOST_ANY:
		break;
	case HOST_ADDR:
		usbgw_addr_format(&m->addr, a, sizeof(a));
		if (m->prefix == addr_bits(m->addr.family))
			usbgw_strlcpy(buf, a, len);
		else
			snprintf(buf, len, "%s/%u", a, m->prefix);
		break;
	case HOST_NAME:
		usbgw_strlcpy(buf, m->name, len);
		break;
	}
	return buf;
}

/* As rule.c's to-host: an IPv4 network also takes IPv4-mapped IPv6. */
static bool
addr_test(const struct host_match *m, const struct usbgw_addr *h)
{
	if (m->addr.family != AF_INET && m->addr.family != AF_INET6)
		return false;
	if (m->prefix > addr_bits(m->addr.family))
		return false;
	return usbgw_addr_in(&m->addr, m->prefix, h);
}

/* Equal ignoring case; a trailing dot on the host's name is ignored. */
static bool
name_test(const char *limit, const char *name)
{
	size_t	len = strlen(name);

	if (len > 0 && name[len - 1] == '.')
		len--;
	return limit[0] != '\0' && strlen(limit) == len &&
	    strncasecmp(limit, name, len) == 0;
}

bool
host_match_test(const struct host_match *m, const struct host_id *h)
{
	switch (m->kind) {
	case HOST_ANY:
		return true;
	case HOST_ADDR:
		return h != NULL && h->addr.family != 0 &&
		    addr_test(m, &h->addr);
	case HOST_NAME:
		return h != NULL && h->name != NULL && name_test(m->name,
		    h->name);
	}
	return false;
}
