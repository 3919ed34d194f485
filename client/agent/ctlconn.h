/*
 * ctlconn: usbgw-agent's side of the gateway extension (protocol.md
 * 1.9.4), dial-out: one control connection to the first gateway of the
 * `gateway` lines that answers (in order; failover; reconnect 1 s
 * doubling to 60 s +-20 %, reset after 60 s up), a snapshot at every
 * connect and every change pushed at once, and for each OPEN_IMPORT a
 * new connection to the control connection's own address (never one
 * from a message), DIALBACK, then the socket handed to the USB/IP
 * engine as if accepted.
 *
 * Entry API (agent.c wires it):
 *	ctlconn_init(base, name, gateways, n, foreach, adopt)  at start
 *	ctlconn_changed(...)                                   from usbdev's
 *	                                                       changed hook
 *	ctlconn_shutdown()                                     at exit
 * Listen mode (answering a gateway's CONTROL on the agent's own
 * listener) is not built here yet: a gateway that declared the agent
 * with --agent then falls back to polling it.
 */
#ifndef USBGW_AGENT_CTLCONN_H
#define USBGW_AGENT_CTLCONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <event2/event.h>

#include "config.h"
#include "usbip.h"

/* Each exportable, unheld device (usbdev_foreach_exportable). */
typedef void (*ctlconn_foreach_fn)(void (*)(void *, const struct usbip_dev *,
    const struct usbip_intf *, uint8_t), void *);
/* Take a connected socket (the dial-back) as if accepted. */
typedef void (*ctlconn_adopt_fn)(int fd, const struct sockaddr *, socklen_t);

#define CTLCONN_CONNECT_S	5
#define CTLCONN_BACKOFF_MAX_MS	60000
#define CTLCONN_UP_RESET_S	60

/* Start dialling out (n >= 1 gateways, tried in order).  0 or -1. */
int	ctlconn_init(struct event_base *, const char *name,
	    const struct config_addr *gateways, size_t n, ctlconn_foreach_fn,
	    ctlconn_adopt_fn);
/* A device became exportable (added) or stopped being so: pushed. */
void	ctlconn_changed(const char *busid, bool added,
	    const struct usbip_dev *, const struct usbip_intf *, uint8_t nintf);
/* BYE to the gateway, everything closed. */
void	ctlconn_shutdown(void);

#endif
