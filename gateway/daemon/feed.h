/*
 * feed: this gateway's name and row among several on one store, and the
 * change feed that applies what other gateways decided (feed.c,
 * protocol.md 4.3).
 */
#ifndef USBGW_FEED_H
#define USBGW_FEED_H

struct config;
struct event_base;

/*
 * After store_open(), before the state is loaded: name the store's
 * connection, record the gateway, and on PostgreSQL start the feed from
 * the store's newest change.  0 or -1.
 */
int		 feed_start(struct event_base *, const struct config *);
void		 feed_stop(void);
/* This gateway's name (gateway-name or the host name). */
const char	*feed_gateway_name(void);
/*
 * Read and apply the changes past the last one applied (the 1 s timer
 * and a notification call it; so may whoever learns that the store is
 * back).  0, or -1 if the read failed (retried at the next tick).
 */
int		 feed_catch_up(void);
/*
 * Who applies exporters added, changed or removed at another gateway
 * (gw.c registers gw_exporters_from_store: feed is below gw).
 */
void		 feed_on_exporters(void (*)(void));

#endif
