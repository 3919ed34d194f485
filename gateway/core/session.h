/*
 * A vhci host's connection to the gateway's USB/IP server (server.c):
 * the op phase, held imports, and the URB phase through the relay.
 */
#ifndef USBGW_SESSION_H
#define USBGW_SESSION_H

#include <sys/socket.h>
#include <netinet/in.h>

#include "policy/decision.h"
#include "core/device.h"
#include "base/hostlimit.h"
#include "core/loop.h"
#include "tls/tlsid.h"

enum ds_state {
	DS_OP,			/* waiting for an op request */
	DS_WAIT_APPROVAL,	/* attach-pending: import held */
	DS_RELAY,		/* URB phase */
	DS_FOLLOW,		/* a follow subscription (follow.c) */
	DS_CLOSING,
};

/* One in-flight URB, remembered by seqnum. */
struct inflight {
	uint32_t	seqnum;
	uint32_t	length;
	uint32_t	npackets;
	uint8_t		used;		/* 0 free, 1 used, 2 tombstone */
	uint8_t		direction;
	uint8_t		iso;
	uint8_t		kind;		/* IF_SUBMIT / IF_UNLINK / IF_HELD */
	uint8_t		unlinking;	/* IF_SUBMIT: a CMD_UNLINK names it */
	uint32_t	target;		/* IF_UNLINK: the seqnum unlinked */
	uint8_t		setup[8];	/* control requests, for SET_CONFIG */
	uint8_t		ep;
};

struct inflight_tab {
	struct inflight	*slot;
	uint32_t	 cap;		/* power of two */
	uint32_t	 count;
	uint32_t	 tombs;
};

/*
 * Where a session's host name comes from: nowhere, forward-confirmed
 * reverse DNS (hostname.c), or the verified certificate of its TLS
 * connection (tlsshim.c), which is stronger: it is never looked up,
 * only taken from the chain the handshake verified.
 */
enum ds_name_src {
	DS_NAME_NONE = 0,
	DS_NAME_DNS,
	DS_NAME_CERT,
};

/* A downstream (vhci host side) connection to the gateway's server. */
struct dsession {
	TAILQ_ENTRY(dsession)	 entry;
	struct gw		*gw;
	struct bufferevent	*bev;
	enum ds_state		 state;
	bool			 dead;
	bool			 quiet;		/* over its address's budget */
	char			 peer[INET6_ADDRSTRLEN + TLSID_NAME_MAX + 24];
	char			 host[INET6_ADDRSTRLEN];
	char			 hkey[HOSTLIMIT_KEY_MAX]; /* host or /64 */
	struct usbgw_addr	 addr;		/* host, parsed */
	char			 host_name[HOST_NAME_MAX_LEN + 1]; /* verified, or "" */
	struct hostname_req	*name_req;	/* its look-up, until answered */
	bool			 named;		/* host_name is known (maybe "") */
	enum ds_name_src	 name_src;	/* where host_name comes from */
	bool			 tls;		/* arrived on a tls-listen */
	struct tlsid_peer	 cert;		/* tls: the verified certificate */
	struct sockaddr_storage	 ss;
	struct device		*dev;
	struct event		*wait_ev;	/* attach-pending timeout */
	struct event		*op_ev;		/* op-phase deadline */
	int64_t			 request_id;
	struct inflight_tab	 inflight;
	struct relay		*relay;		/* DS_RELAY */
	struct follower		*follow;	/* DS_FOLLOW */
	uint64_t		 started;
};


/* server.c */
void		 server_init(void);
int		 server_listen(const char *host, const char *port, bool optional);
int		 server_listen_tls(const char *host, const char *port);
void		 server_set_tls(SSL_CTX *);	/* a reference is taken */
tlsid_check_fn	 server_tls_checker(void);	/* vhci hosts only */
bool		 server_tls_enabled(void);	/* a TLS context is set */
int		 server_port(void);
void		 server_shutdown(void);
void		 dsession_close(struct dsession *, const char *why);
/* Write buf, then close the session (a refusal). */
void		 dsession_reply_and_close(struct dsession *, const void *buf,
		    size_t len);
void		 dsession_set_state(struct dsession *, enum ds_state,
		    const char *why);

bool		 device_visible_to(const struct device *, const struct dsession *);

/*
 * "tls" for a TLS session, "tcp" for plain USB/IP, "local" for the
 * gateway's own vhci (local mode's inspected relay, local.c).
 */
static inline const char *
dsession_transport(const struct dsession *ds)
{
	if (ds->tls)
		return "tls";
	return ds->ss.ss_family == AF_UNIX ? "local" : "tcp";
}

#endif
