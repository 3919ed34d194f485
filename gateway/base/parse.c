/*
 * The value parsers that usbgwd's configuration, usbgw-agent's and
 * usbgw-attach's share: durations and host:port addresses.  Pure
 * functions of their text; errors as a short reason in *errstr.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "base/util.h"

#define MS_S		1000ULL
#define MS_DAY		(86400ULL * MS_S)
#define DURATION_MAX	(3650ULL * MS_DAY)	/* anything longer is a typo */

int
parse_duration(const char *s, uint64_t max_ms, uint64_t *ms,
    const char **errstr)
{
	unsigned long long v = 0, mult;
	const char *p = s;

	if (*p < '0' || *p > '9') {
		*errstr = "expected a number followed by ms, s, m, h or d";
		return -1;
	}
	while (*p >= '0' && *p <= '9') {
		if (v > (ULLONG_MAX - 9) / 10) {
			*errstr = "too large";
			return -1;
		}
		v = v * 10 + (unsigned)(*p++ - '0');
	}
	if (strcmp(p, "ms") == 0)
		mult = 1;
	else if (*p == '\0' || strcmp(p, "s") == 0)
		mult = MS_S;
	else if (strcmp(p, "m") == 0)
		mult = 60 * MS_S;
	else if (strcmp(p, "h") == 0)
		mult = 3600 * MS_S;
	else if (strcmp(p, "d") == 0)
		mult = MS_DAY;
	else {
		*errstr = "unit must be ms, s, m, h or d";
		return -1;
	}
	if (v > DURATION_MAX / mult || v * mult > max_ms) {
		*errstr = "too large";
		return -1;
	}
	*ms = v * mult;
	*errstr = NULL;
	return 0;
}

int
parse_host_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
}



int
parse_hostport(const char *s, const char *dflt_port, struct net_addr *out,
    const char **errstr, int min_port)
{
	const char *host, *port = NULL, *e;
	size_t hlen, i;
	long long pn;
	const char *perrstr;
	int v6 = 0;

	memset(out, 0, sizeof(*out));
	if (*s == '[') {
		host = s + 1;
		if ((e = strchr(host, ']')) == NULL) {
			*errstr = "expected ']' after an IPv6 address";
			return -1;
		}
		hlen = (size_t)(e - host);
		if (e[1] == ':')
			port = e + 2;
		else if (e[1] != '\0') {
			*errstr = "expected ':PORT' after ']'";
			return -1;
		}
		v6 = 1;
	} else {
		host = s;
		e = strchr(s, ':');
		if (e != NULL && strchr(e + 1, ':') != NULL) {
			*errstr = "expected [ADDRESS]:PORT for an IPv6 address";
			return -1;
		}
		hlen = e != NULL ? (size_t)(e - s) : strlen(s);
		if (e != NULL)
			port = e + 1;
	}
	if (hlen == 1 && host[0] == '*')
		hlen = 0;
	else {
		if (hlen == 0 && v6) {
			*errstr = "expected an address between [ and ]";
			return -1;
		}
		if (hlen >= sizeof(out->host)) {
			*errstr = "host name too long";
			return -1;
		}
		for (i = 0; i < hlen; i++)
			if (!parse_host_char(host[i]) &&
			    !(v6 && (host[i] == ':' || host[i] == '%'))) {
				*errstr = "expected a host name or address";
				return -1;
			}
		memcpy(out->host, host, hlen);
		out->host[hlen] = '\0';
	}
	if (port == NULL)
		port = dflt_port;
	if (port == NULL || *port == '\0') {
		*errstr = "expected a port number";
		return -1;
	}
	if (parse_num(port, min_port, 65535, &pn, &perrstr) != 0) {
		*errstr = min_port == 0 ?
		    "expected a port number from 0 to 65535" :
		    "expected a port number from 1 to 65535";
		return -1;
	}
	snprintf(out->port, sizeof(out->port), "%lld", pn);
	*errstr = NULL;
	return 0;
}

int
parse_addr(const char *s, const char *dflt_port, struct net_addr *out,
    const char **errstr)
{
	return parse_hostport(s, dflt_port, out, errstr, 1);
}

int
parse_listen(const char *s, struct net_addr *out, const char **errstr)
{
	return parse_hostport(s, USBIP_DEFAULT_PORT, out, errstr, 0);
}
