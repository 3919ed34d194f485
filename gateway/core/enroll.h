/*
 * Enrollment at the gateway (issue 15 items 2 and 6; protocol.md
 * 1.10.10): pairing sessions on the TLS listeners, the operator's
 * approve/reject/list/revoke over the control socket, the agents table
 * behind the TLS check, and renewals over an authenticated session.
 *
 * A pairing session (a client showing a self-signed placeholder) sends
 * ENROLL (name, role, CSR for the placeholder's key); it waits, bounded
 * (max-pairings in all, one per address, pairing-timeout, new sessions
 * max-pairings-per-minute), for `usbgw agent approve CODE`, which issues
 * its certificate from the gateway's CA and sends it with the CA.  Every
 * step is an audit row.  The agents table has one row per certificate;
 * the TLS check admits a certificate only while its row is active and
 * unexpired; a revoke ends the row and cuts every pump that certificate
 * authenticated (tlsshim_cut).
 */
#ifndef USBGW_ENROLL_H
#define USBGW_ENROLL_H

#include <stddef.h>

#include "proto/ctl.h"
#include "tls/tlsid.h"
#include "tls/tlsshim.h"

struct event_base;
struct bufferevent;

struct enroll_conf {
	int		 cert_days;		/* issued certificates */
	int		 renew_days;		/* renewals accepted within */
	unsigned	 pairing_timeout_ms;	/* a pending pairing lapses */
	unsigned	 max_pairings;		/* at once, in all */
	unsigned	 max_per_minute;	/* new pairing sessions */
};

/*
 * At start, after the database: pending rows of an earlier run lapse.
 * st (borrowed, may be NULL: nothing can be issued) is the gateway's
 * TLS store.
 */
void		 enroll_init(struct event_base *, struct tlsid_store *st,
		    const struct enroll_conf *);
void		 enroll_shutdown(void);
/* A pairing session's plain end (tlsshim's ready), from address host. */
void		 enroll_pairing_accept(int fd, const struct tlsid_peer *,
		    const struct tlsshim_pairing *, const char *host);
/*
 * An authenticated TLS session whose first bytes are an enrollment
 * message (a RENEW): bev (taken over, its input kept) is the session's
 * end.
 */
void		 enroll_renew_accept(struct bufferevent *bev,
		    const struct tlsid_peer *, const char *host);
/*
 * The TLS check's database part: 0 if peer's certificate is an active,
 * unexpired row of the agents table with the same name and role; -1 with
 * why (unknown, revoked, replaced, expired, database error) otherwise.
 */
int		 enroll_check(const struct tlsid_peer *, char *why,
		    size_t whylen);
/* Pairings waiting (for status). */
unsigned	 enroll_npending(void);

/* agent.list, agent.approve, agent.reject, agent.revoke */
extern const struct ctl_cmd enroll_cmds[];
extern const size_t enroll_ncmds;

#endif
