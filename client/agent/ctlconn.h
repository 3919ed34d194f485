/*
 * ctlconn: usbgw-agent's side of the gateway extension (protocol.md
 * 1.9.4), both ways a control connection comes about:
 *
 *  - dial-out: one control connection to the first gateway of the
 *    `gateway` lines that answers (in order; failover; reconnect 1 s
 *    doubling to 60 s +-20 %, reset after 60 s up), names resolved
 *    asynchronously (evdns; a numeric address without a lookup; each
 *    address of a name tried before the next line), and for each
 *    OPEN_IMPORT a new connection to the control connection's own
 *    address (never one from a message), DIALBACK, then the socket
 *    handed to the USB/IP engine as if accepted;
 *  - listen mode: a gateway that declared the agent (`exporter add ...
 *    --agent`) connects to the agent's USB/IP listener (allow-from
 *    already checked there) and sends OP_REQ_USBGW CONTROL; the engine
 *    hands such a connection over (expsrv's extension hook, through
 *    export.c) to ctlconn_accept().  At most CTLCONN_MAX_LISTEN are up
 *    at once (more: ST_NA), at most as many more in their hello; one
 *    per gateway address (a new CONTROL from the same address replaces
 *    the old connection: a restarted gateway).
 *
 * On every control connection that is up: a snapshot at its start, every
 * change pushed at once, PING after 15 s without sending, closed after
 * 45 s without receiving.
 *
 * Entry API (agent.c wires it):
 *	ctlconn_init(base, name, gateways, n, foreach, adopt)  at start
 *	ctlconn_accept(...)                                    export.c's
 *	                                                       extension hook
 *	ctlconn_changed(...)                                   from usbdev's
 *	                                                       changed hook
 *	ctlconn_shutdown()                                     at exit
 */
#ifndef USBGW_AGENT_CTLCONN_H
#define USBGW_AGENT_CTLCONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <openssl/ssl.h>

#include "base/parse.h"
#include "proto/usbip.h"

/* Each exportable, unheld device (usbdev_foreach_exportable). */
typedef void (*ctlconn_foreach_fn)(void (*)(void *, const struct usbip_dev *,
    const struct usbip_intf *, uint8_t), void *);
/*
 * Take a connected socket (the dial-back) as if accepted: it may import
 * busid and nothing else (no other busid, no device list).
 */
typedef void (*ctlconn_adopt_fn)(int fd, const struct sockaddr *, socklen_t,
    const char *busid);

#define CTLCONN_CONNECT_S	5	/* dial-out: resolve + connect + hello */
#define CTLCONN_HELLO_S		10	/* listen mode: the gateway's CONTROL */
#define CTLCONN_BACKOFF_MIN_MS	1000
#define CTLCONN_BACKOFF_MAX_MS	60000
#define CTLCONN_BACKOFF_JITTER	20	/* +- percent */
#define CTLCONN_UP_RESET_S	60
#define CTLCONN_MAX_LISTEN	8	/* listen-mode connections up */
#define CTLCONN_HEARTBEAT_S	15	/* PING after this long not sending */
#define CTLCONN_SILENT_S	45	/* closed after this long not receiving */
#define CTLCONN_MAX_OUTPUT	(64 * 1024)	/* queued to a gateway, then closed */
#define CTLCONN_MAX_RATE	256	/* messages a second read from a gateway */
#define CTLCONN_MAX_DIALBACKS	16	/* in flight; one per busid */

/*
 * Start: dial out to gateways[0..n) in order (n == 0: listen mode
 * only).  foreach may be NULL (no devices: empty snapshots), adopt too
 * (OPEN_IMPORT then fails).  0 or -1 (an invalid name).
 */
int	ctlconn_init(struct event_base *, const char *name,
	    const struct net_addr *gateways, size_t n, ctlconn_foreach_fn,
	    ctlconn_adopt_fn);
/*
 * Listen mode: the USB/IP engine offers a connection whose op code
 * (code) it does not serve, with its socket and the bytes read (peer:
 * "addr:port").  True: taken (OP_REQ_USBGW), false: not ours.
 */
bool	ctlconn_accept(uint16_t code, int fd, const char *peer,
	    struct evbuffer *in);
/*
 * TLS for dial-out (protocol.md 1.10.8): gateway line i is dialled over
 * TLS when gw_tls[i], with ctx (the agent's tlsid_ctx_client; a
 * reference is taken; NULL: none), and its dial-backs then too.  After
 * ctlconn_init, before the loop runs.
 */
void	ctlconn_set_tls(SSL_CTX *ctx, const bool *gw_tls, size_t n);
/* A device became exportable (added) or stopped being so: pushed. */
void	ctlconn_changed(const char *busid, bool added,
	    const struct usbip_dev *, const struct usbip_intf *, uint8_t nintf);
/* BYE to every gateway, everything closed. */
void	ctlconn_shutdown(void);
/* After a reload: end listen-mode connections of peers not allowed now. */
void	ctlconn_recheck_allowed(void);

/* Listen-mode control connections up / in their hello (for tests). */
unsigned ctlconn_nlisten(bool up);

/*
 * The dial-out back-off, pure (unit-tested): the base delay after a
 * whole round of gateway lines failed (prev_ms: the last one, 0 at
 * first): 1 s, doubling, at most 60 s; what is left of it when a
 * connection that was up for up_ms closes (0: start again at 1 s, after
 * CTLCONN_UP_RESET_S up); and the delay actually waited, +-20 %.
 */
unsigned ctlconn_backoff_next(unsigned prev_ms);
unsigned ctlconn_backoff_after_up(unsigned cur_ms, uint64_t up_ms);
unsigned ctlconn_backoff_delay(unsigned base_ms);

#endif
