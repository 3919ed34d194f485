/*
 * The loop's shared context (loop.c): limits, settings, the lists the
 * modules hang their objects on, connections and deferred frees.
 */
#ifndef USBGW_LOOP_H
#define USBGW_LOOP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include <event2/event.h>
#include <event2/bufferevent.h>

#include "policy/ident.h"

struct tlsid_peer;

#define GW_NAME_MAX		32	/* exporter names */
#define GW_MAX_CONFIG_LEN	4096	/* one configuration descriptor */
#define GW_MAX_INFLIGHT		1024	/* URBs in flight per attachment */
#define GW_RELAY_HIWAT		(4u << 20) /* output bytes before backpressure */
#define GW_MAX_DOWNSTREAM	1024	/* downstream connections */
#define GW_OP_TIMEOUT_MS	10000	/* op phase of a downstream peer */
#define GW_RECLAIM_WAIT_MS	5000	/* an import waits this long for a reclaim */
#define GW_MAX_APPROVALS	16	/* active operator decisions per device */
#define GW_BEAT_MS		100	/* the loop's heartbeat */
#define GW_STALL_MIN_MS		250	/* a later beat counts as a stall */
#define GW_PROBE_DEADLINE	4	/* a whole probe: x probe-timeout */

struct gw;
struct exporter;
struct device;
struct upstream;
struct dsession;
struct relay;
struct hostname_req;

struct config;
struct evdns_base;
struct policy;
struct rule;

struct gw {
	struct event_base	*base;
	struct config		*cfg;
	struct evdns_base	*dns;
	unsigned		 max_sessions;
	unsigned		 max_sessions_per_host;	/* not relaying */
	unsigned		 max_devices_per_exporter;
	unsigned		 max_new_devices_per_minute;
	unsigned		 max_probes;		/* claims probing at once */
	unsigned		 max_probes_per_exporter;
	TAILQ_HEAD(, exporter)	 exporters;
	TAILQ_HEAD(, dsession)	 sessions;
	unsigned		 nsessions;
	struct evconnlistener	*listeners[16];
	int			 nlisteners;
	struct event		*sigev[4];
	struct event		*gc_ev;
	uint64_t		 started;
	/* settings (from config, flags) */
	unsigned		 poll_ms;
	unsigned		 probe_timeout_ms;
	unsigned		 attach_wait_ms;
	unsigned		 relay_stall_ms;	/* relay-stall-timeout */
	bool			 show_pending;
	bool			 host_names;	/* names verified (FCrDNS) */
	uint64_t		 rate_at, rate_urbs;
	bool			 shutting_down;
	struct event		*beat_ev;	/* the loop's heartbeat */
	uint64_t		 beat_at;	/* its last run, usec */
	uint64_t		 stalled_ms;	/* the loop ran this late in all */
	/* the TLS server context (tls-listen, exporters with tls required;
	 * NULL without a tls-dir); a reference, set by usbgwd.c */
	struct ssl_ctx_st	*tls_ctx;
};

extern struct gw *gw;

/* loop.c */
void		 gw_init(struct event_base *);
void		 gw_free(void);
void		 gw_defer(void (*)(void *), void *);
void		 gw_socket_tune(evutil_socket_t);
void		 gw_socket_keepalive(evutil_socket_t);
bool		 gw_fd_progress(evutil_socket_t, short what);
bool		 gw_timeout_spurious(struct bufferevent *, short what);
int		 gw_connect(const char *host, uint16_t port, struct bufferevent **,
		    bufferevent_data_cb, bufferevent_event_cb, void *arg);
/*
 * gw_connect, then TLS with the gateway as TLS's server on the connection
 * it opened (protocol.md 1.10.8), within timeout_ms: the peer must show an
 * agent's certificate named name.  The caller's bev and callbacks are as
 * with gw_connect; ecb sees BEV_EVENT_CONNECTED once the handshake and
 * the name check passed (the bev then reads and writes the plaintext end
 * of tlsshim's pump), BEV_EVENT_ERROR otherwise, with gw_tls_error()
 * saying why during that call (NULL for a plain connection error).
 * Freeing the bev during the handshake abandons it (ended by its
 * deadline, or closed at once when it completes).
 */
int		 gw_connect_tls(const char *host, uint16_t port,
		    const char *name, unsigned timeout_ms,
		    struct bufferevent **, bufferevent_data_cb,
		    bufferevent_event_cb, void *arg);
const char	*gw_tls_error(void);
/*
 * During the ecb's BEV_EVENT_CONNECTED call of a gw_connect_tls
 * connection: the peer's verified certificate (NULL otherwise, and for
 * a plain gw_connect), for the caller to record whose it was.
 */
const struct tlsid_peer *gw_tls_peer(void);

#endif
