/*
 * Follow subscriptions (follow.c; protocol.md 1.10.8): a vhci host's
 * connection on which the gateway pushes which busids are authorized for
 * that host, from the core's decisions as they are applied.  A
 * subscription is a downstream session (struct dsession, state
 * DS_FOLLOW): it counts against max-sessions and ends like any session.
 */
#ifndef USBGW_FOLLOW_H
#define USBGW_FOLLOW_H

#include <stdbool.h>

struct device;
struct dsession;

#define FOLLOW_PER_HOST		4	/* subscriptions of one host at once */
#define FOLLOW_HEARTBEAT_S	15	/* PING every; 3 unanswered: closed */
#define FOLLOW_OUT_MAX		(128 * 1024)	/* queued to a slow host */
#define FOLLOW_WRITE_TIMEOUT_S	45

/* Hear of the core's decisions (from server_init). */
void		 follow_init(void);
/*
 * ds (DS_OP, named) has an OP_REQ_FOLLOW at the head of its input:
 * decode it and, once whole, answer and subscribe, or refuse.  The
 * session may be closed on return.
 */
void		 follow_hello(struct dsession *);
/* dsession_close: the subscription ends (its memory, its timer). */
void		 follow_end(struct dsession *);
/* Would an import of dev by ds's host be granted (the decision core)? */
bool		 follow_authorized(struct device *, const struct dsession *);

#endif
