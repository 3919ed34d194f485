/*
 * The URB relay (relay.c) and the in-flight table of a session.
 */
#ifndef USBGW_RELAY_H
#define USBGW_RELAY_H

#include "core/session.h"

/*
 * The URB phase of a session: relay_start() takes over its socket and
 * the device's claim; it ends the session, on an error or a close,
 * through end (the session's owner: server.c's dsession_close).
 */
typedef void	(*relay_end_fn)(struct dsession *, const char *why);
void		 relay_start(struct dsession *, struct device *,
		    const void *first, size_t firstlen, relay_end_fn end);
void		 relay_stop(struct dsession *);
void		 inflight_init(struct inflight_tab *, uint32_t cap);
void		 inflight_free(struct inflight_tab *);
struct inflight	*inflight_get(struct inflight_tab *, uint32_t seqnum);
struct inflight	*inflight_add(struct inflight_tab *, uint32_t seqnum);
void		 inflight_del(struct inflight_tab *, struct inflight *);

#endif
