/*
 * export: usbgw-agent's USB/IP side (protocol.md 1.9.5).  The listeners
 * (IPv4 and IPv6, '*' meaning both), allow-from checked at accept before
 * any byte is read (a refused peer's socket is closed: no op reply, no
 * device list), max-connections, the expsrv engine on a back end's ops
 * (usbdev_expsrv_ops, or none: an empty device list), and the audit
 * lines: "audit: KEY=VALUE ..." in the log and, with audit-log, a file;
 * the refused and malformed ones budgeted per address by hostlimit.c.
 */
#ifndef USBGW_AGENT_EXPORT_H
#define USBGW_AGENT_EXPORT_H

#include <stdbool.h>

#include <event2/event.h>
#include <openssl/ssl.h>

#include "aconf.h"
#include "proto/expsrv.h"

/* Audit lines a minute per address (IPv6: per /64), and in all. */
#define EXPORT_AUDIT_PER_HOST	60
#define EXPORT_AUDIT_TOTAL	600

/*
 * Start the engine on backend (NULL: no devices: every list is empty
 * and every import ST_NODEV) with the settings of c (kept by pointer
 * until export_set_conf() or export_shutdown()).  -1 with err filled if
 * the audit log cannot be opened.
 */
int		 export_init(struct event_base *, const struct aconf *c,
		    const struct expsrv_ops *backend, char *err, size_t errlen);
/* A new configuration (SIGHUP): allow-from, max-connections and the
 * audit log (reopened) apply at once; listeners stay as they are. */
int		 export_set_conf(const struct aconf *c, char *err,
		    size_t errlen);
/* Listen on a (host "" = every IPv4 and IPv6 address).  0 or -1. */
int		 export_listen(const struct net_addr *a);
unsigned	 export_nlisteners(void);
/*
 * A connection the agent opened itself to its gateway (ctlconn.c's
 * dial-back, already admitted by its token): served as if accepted.
 */
/* Is the numeric address addr in allow-from now? */
bool		 export_addr_allowed(const char *addr);
void		 export_adopt(int fd, const struct sockaddr *, socklen_t,
		    const char *busid);
/*
 * A connection whose op code the engine does not serve (code: usbgw's
 * OP_REQ_USBGW, a gateway's control connection in listen mode), allowed
 * by allow-from at accept: fn may take it over (its socket, and the
 * bytes read, in; peer: "addr:port") and returns true, or returns false
 * and the op is malformed.  NULL (the default): every such op is.
 */
typedef bool	(*export_extension_fn)(uint16_t code, int fd,
		    const char *peer, struct evbuffer *in);
void		 export_set_extension(export_extension_fn);
/* Close the listeners (shutdown begins). */
void		 export_stop_listening(void);
/*
 * The agent's TLS identity (a tlsid_ctx_client context; a reference is
 * taken; NULL: none): with `tls required` every accepted connection is
 * TLS, the agent its client (protocol.md 1.10.8), allow-from checked
 * before the handshake; a failed handshake is a `refused` audit line.
 */
void		 export_set_tls(SSL_CTX *);
/* Ends the import of busid, if any (audit line release ... reason=WHY).
 * Returns the number of imports ended. */
int		 export_end_import(const char *busid, const char *why);
/* End every connection (imports released through the back end). */
void		 export_closeall(void);
/* Free the engine, write the held-back summaries, close the audit log. */
void		 export_shutdown(void);

/* One audit line (key=value text, no "audit: " prefix). */
void		 export_audit(const char *fmt, ...)
		    __attribute__((format(printf, 1, 2)));
/* The same for a line a peer caused (refused, malformed): budgeted per
 * address, a "suppressed" summary for the rest. */
void		 export_audit_peer(const char *addr, int kind,
		    const char *fmt, ...) __attribute__((format(printf, 3, 4)));

enum export_audit_kind {
	EXPORT_AK_REFUSED = 0,
	EXPORT_AK_MALFORMED,
	EXPORT_AK_N
};

#endif
