/*
 * A claim (upstream.c): the gateway's own import of a device at its
 * exporter, and the probe that reads its descriptors.  Below the device
 * core: it reports through the struct upstream_ops its owner gave.
 */
#ifndef USBGW_UPSTREAM_H
#define USBGW_UPSTREAM_H

#include "core/loop.h"
#include "tls/tlsid.h"
#include "proto/usbip.h"

enum up_state {
	UP_QUEUED,		/* waiting for a probe slot: no connection yet */
	UP_CONNECTING,
	UP_IMPORTING,
	UP_PROBING,
	UP_IDLE,		/* claimed, probed, nobody attached */
	UP_RELAYING,		/* bound to a downstream session */
	UP_CLOSED,
};

/*
 * What a claim reports to its owner (device.c), which gives these to
 * upstream_new(): upstream.c is below the device core and calls it only
 * through them.
 */
/* failed()'s status when no connection to the exporter could be made */
#define UP_ST_UNREACHABLE	(-2)

struct upstream_ops {
	void	(*claimed)(struct device *);	/* probed; idle */
	/* status: the import reply's ST_*, UP_ST_UNREACHABLE, or -1 */
	void	(*failed)(struct device *, int status, const char *why);
	void	(*closed)(struct device *, const char *why); /* after idle */
};

/*
 * A dial-out agent's claims (protocol.md 1.9.4): the connection is not
 * made by the gateway but asked of the agent (OPEN_IMPORT), which
 * connects back; the claim then goes on as if it had connected.  The
 * agent module (agentgw.c, above) registers these.
 */
struct upstream_dialer {
	/* ask for a connection; -1 (why set): the agent cannot be asked */
	int	(*open)(struct upstream *, const char **why);
	/* the claim ended before its dial-back came */
	void	(*cancel)(struct upstream *);
};

/* The gateway's own import of a device at its exporter: the claim. */
struct upstream {
	TAILQ_ENTRY(upstream)	 qentry;	/* the probe queue, while queued */
	struct device		*dev;
	struct exporter		*exp;		/* dev's, for its probe slots */
	bool			 urgent;	/* queued ahead of new devices */
	bool			 queued;
	bool			 slot;		/* holds a probe slot */
	struct event		*deadline_ev;	/* the whole probe's */
	uint64_t		 stalled0;	/* gw->stalled_ms at its start */
	uint64_t		 probe_t0;	/* usec: its probe slot taken */
	const struct upstream_ops *ops;
	struct bufferevent	*bev;
	enum up_state		 state;
	bool			 dialing;	/* waits for its dial-back */
	/* the connection to the exporter, once made: TLS, and the CN of
	 * the agent certificate its handshake verified */
	bool			 tls;
	char			 cert[TLSID_NAME_MAX + 1];
	uint32_t		 devid;		/* exporter's busnum<<16|devnum */
	struct usbip_dev	 rec;		/* exporter's import reply */
	/* probe */
	int			 probe_step;
	int			 probe_cfg;
	uint16_t		 langid;
	uint32_t		 seqnum;
	uint32_t		 req_len;
	uint16_t		 cfg_total;
	uint16_t		 bcd_usb;
};


/* upstream.c */
struct upstream	*upstream_new(struct device *, const struct upstream_ops *,
		    bool urgent);
void		 upstream_set_state(struct upstream *, enum up_state,
		    const char *why);
void		 upstream_close(struct upstream *);
void		 upstream_queue_kick(void);
unsigned	 upstream_probing(void);
unsigned	 upstream_queued(void);
void		 upstream_set_dialer(const struct upstream_dialer *);
/*
 * The dial-back connection arrived (bev taken over; cert: its verified
 * certificate, NULL if plaintext), or cannot come.
 */
void		 upstream_dialed(struct upstream *, struct bufferevent *,
		    const struct tlsid_peer *cert);
void		 upstream_dial_failed(struct upstream *, int status,
		    const char *why);

/*
 * The exporter leg's transport (protocol.md 1.10.9): "tls" or "tcp";
 * NULL while the claim has no connection to the exporter.
 */
static inline const char *
upstream_transport(const struct upstream *up)
{
	if (up == NULL || up->state < UP_IMPORTING || up->state == UP_CLOSED)
		return NULL;
	return up->tls ? "tls" : "tcp";
}

/* The exporter leg's certificate name, NULL without TLS. */
static inline const char *
upstream_cert(const struct upstream *up)
{
	return upstream_transport(up) != NULL && up->tls ? up->cert : NULL;
}

#endif
