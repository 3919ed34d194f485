/*
 * A vhci host's connection to the gateway's USB/IP server (server.c):
 * the op phase, held imports, and the URB phase through the relay.
 */
#ifndef USBGW_SESSION_H
#define USBGW_SESSION_H

#include <sys/socket.h>
#include <netinet/in.h>

#include "decision.h"
#include "device.h"
#include "hostlimit.h"
#include "loop.h"

enum ds_state {
	DS_OP,			/* waiting for an op request */
	DS_WAIT_APPROVAL,	/* attach-pending: import held */
	DS_RELAY,		/* URB phase */
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
	uint8_t		kind;		/* IF_SUBMIT / IF_UNLINK */
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

/* A downstream (vhci host side) connection to the gateway's server. */
struct dsession {
	TAILQ_ENTRY(dsession)	 entry;
	struct gw		*gw;
	struct bufferevent	*bev;
	enum ds_state		 state;
	bool			 dead;
	bool			 quiet;		/* over its address's budget */
	char			 peer[INET6_ADDRSTRLEN + 8];
	char			 host[INET6_ADDRSTRLEN];
	char			 hkey[HOSTLIMIT_KEY_MAX]; /* host or /64 */
	struct usbgw_addr	 addr;		/* host, parsed */
	char			 host_name[HOST_NAME_MAX_LEN + 1]; /* verified, or "" */
	struct hostname_req	*name_req;	/* its look-up, until answered */
	bool			 named;		/* host_name is known (maybe "") */
	struct sockaddr_storage	 ss;
	struct device		*dev;
	struct event		*wait_ev;	/* attach-pending timeout */
	struct event		*op_ev;		/* op-phase deadline */
	int64_t			 request_id;
	struct inflight_tab	 inflight;
	struct relay		*relay;		/* DS_RELAY */
	uint64_t		 started;
};


/* server.c */
void		 server_init(void);
int		 server_listen(const char *host, const char *port);
int		 server_port(void);
void		 server_shutdown(void);
void		 dsession_close(struct dsession *, const char *why);
void		 dsession_set_state(struct dsession *, enum ds_state,
		    const char *why);

bool		 device_visible_to(const struct device *, const struct dsession *);

#endif
