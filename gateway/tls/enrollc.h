/*
 * The client's side of enrollment (protocol.md 1.10.10), shared by
 * `usbgw-agent enroll|renew` and `usbgw-attach enroll|renew`.  Blocking,
 * in the caller's thread; not for the daemon's loop.
 *
 * enroll: make (or load) DIR/ROLE.key (0600, never sent), open a pairing
 * session (TLSID_PAIRING: the self-signed placeholder for that key) to
 * the gateway's TLS listener, send ENROLL (name, role, CSR), show the
 * session's 6-digit code once the gateway took the request, and wait
 * (bounded; *stop cancels) for ISSUED or REFUSED.  The CA that comes
 * with the certificate must be the one of the session's chain; both are
 * stored by tlsid_client_install (ROLE.pem, gateway-ca.pem).
 *
 * renew: over a session authenticated by the current certificate, send
 * RENEW with a new CSR for the same key; store what comes back.
 */
#ifndef USBGW_ENROLLC_H
#define USBGW_ENROLLC_H

#include <signal.h>
#include <stdio.h>

#include "tls/tlsid.h"

/* Exit statuses of the enroll and renew subcommands. */
#define ENROLLC_OK		0	/* paired / renewed / not due */
#define ENROLLC_REFUSED		1	/* refused, rejected, expired, cancelled */
#define ENROLLC_USAGE		2	/* bad arguments or files */
#define ENROLLC_NET		4	/* cannot reach the gateway, TLS failed */

#define ENROLLC_WAIT_S		330	/* the gateway's 5 min, and a margin */
#define ENROLLC_CONNECT_S	10
#define ENROLLC_RENEW_DAYS	30

struct enrollc_opts {
	const char		*gateway;	/* HOST[:PORT] (default 3240) */
	const char		*dir;		/* the key and certificate */
	const char		*name;		/* the name asked for */
	enum tlsid_role		 role;		/* agent or host */
	int			 wait_s;	/* for the operator (enroll) */
	int			 connect_s;	/* connect and handshake */
	int			 renew_days;	/* renew: due within; -1 force */
	volatile sig_atomic_t	*stop;		/* set: cancel (NULL: none) */
	FILE			*out;		/* the code and the outcome */
};

int		 enrollc_enroll(const struct enrollc_opts *);
int		 enrollc_renew(const struct enrollc_opts *);
/*
 * The name a host or agent asks for by default: this machine's short
 * host name when it is a valid name, else fallback.
 */
void		 enrollc_default_name(char *out, size_t len,
		    const char *fallback);

#endif
