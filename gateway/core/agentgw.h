/*
 * The gateway's side of usbgw-agent (agentgw.c, protocol.md 1.9.4): the
 * control connections (listen mode: the gateway connects and sends
 * CONTROL; dial-out: the agent connects to the USB/IP listener and is
 * admitted by name and address), what an agent pushes (a prompt to
 * claim now, or to mark an unheld device gone now; never a decision),
 * and the dial-back of a dial-out agent's claims (OPEN_IMPORT with a
 * single-use token, DIALBACK on the listener).  Layer 8, with exporter.c.
 */
#ifndef USBGW_AGENTGW_H
#define USBGW_AGENTGW_H

#include <event2/bufferevent.h>

#include "base/identity.h"
#include "tls/tlsid.h"

struct exporter;

#define AGENTGW_MAX_RATE	256	/* messages a second read from one agent */
#define AGENTGW_TOKEN_MS	10000	/* an OPEN_IMPORT token's life */
#define AGENTGW_PING_S		15	/* idle this long: PING */
#define AGENTGW_SILENT_S	45	/* nothing this long: closed */
#define AGENTGW_SNAPSHOT_MS	10000	/* a snapshot must end within */
#define AGENTGW_MAX_OUTPUT	(64 * 1024)	/* queued to an agent */
#define AGENTGW_MAX_DIALIN	256	/* dial-in connections in their hello */
#define AGENTGW_MAX_DIALIN_PER_HOST 32	/* of them from one address (v6: /64) */

/* Registers the claim dialer (upstream.h) and the timers. */
void	agentgw_init(void);
/* Listen mode: keep a control connection to exp (reconnects). */
void	agentgw_start(struct exporter *);
/* exp goes: its control connection and tokens too. */
void	agentgw_stop(struct exporter *);
/*
 * A connection on the USB/IP listener whose first bytes are an
 * OP_REQ_USBGW (server.c): bev is taken over (what it already read is
 * the hello); host is the peer's address, parsed in addr; cert the
 * agent's verified certificate if it came over TLS (NULL: plaintext).
 */
void	agentgw_accept(struct bufferevent *, const char *host,
	    const struct usbgw_addr *addr, const struct tlsid_peer *cert);
void	agentgw_shutdown(void);

#endif
