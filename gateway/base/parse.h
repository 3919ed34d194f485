/*
 * The value parsers other programs share with usbgwd's configuration
 * (parse.c).
 */
#ifndef USBGW_PARSE_H
#define USBGW_PARSE_H

#include <stdint.h>

#define USBIP_DEFAULT_PORT	"3240"
#define NET_HOST_MAX		256

/* A host (name or address, "" for any) and a port, as text. */
struct net_addr {
	char		host[NET_HOST_MAX];
	char		port[8];
};

/*
 * Durations: an integer followed by ms, s, m, h or d ("1500ms", "30s",
 * "10m", "2h", "1d"); a bare integer is seconds.  Result in milliseconds,
 * at most max_ms.  Returns 0, or -1 with *errstr set to a short reason.
 */
int		 parse_duration(const char *s, uint64_t max_ms,
		    uint64_t *ms, const char **errstr);

/* "HOST:PORT", "[V6]:PORT", "*:PORT", ":PORT" or "HOST" (port dflt_port). */
int		 parse_addr(const char *s, const char *dflt_port,
		    struct net_addr *out, const char **errstr);

/* The same for a listen address: port 0 (any free port) is allowed. */
int		 parse_listen(const char *s, struct net_addr *out,
		    const char **errstr);

/* parse_addr() with the lowest port allowed: 0 or 1. */
int		 parse_hostport(const char *s, const char *dflt_port,
		    struct net_addr *out, const char **errstr, int min_port);

/* A character of a host name: letters, digits, '.', '-', '_'. */
int		 parse_host_char(char c);

#endif
