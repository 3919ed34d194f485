/*
 * An exporter (exporter.c): polled for its device list, owner of its
 * devices.
 */
#ifndef USBGW_EXPORTER_H
#define USBGW_EXPORTER_H

#include <string.h>

#include "core/device.h"
#include "core/loop.h"

enum exp_state {
	EXP_UNKNOWN,
	EXP_UP,
	EXP_DOWN,
};

/*
 * What the exporter is (protocol.md 1.9.4): a stock usbipd, polled; an
 * agent the gateway connects to (listen mode: a control connection
 * besides the polls); an agent that connects to the gateway (dial-out:
 * admitted by name and address, every claim dialled back).
 */
enum exp_kind {
	EXP_KIND_USBIP,
	EXP_KIND_AGENT,
	EXP_KIND_DIALOUT,
};

struct agentconn;

/* The kind's name in the database and the control protocol (inline:
 * storage, below the exporters, names them too). */
static inline const char *
exp_kind_name(enum exp_kind k)
{
	switch (k) {
	case EXP_KIND_USBIP:	return "usbip";
	case EXP_KIND_AGENT:	return "agent";
	case EXP_KIND_DIALOUT:	return "agent-dialout";
	}
	return "invalid";
}

static inline int
exp_kind_parse(const char *s)
{
	if (strcmp(s, "usbip") == 0)
		return EXP_KIND_USBIP;
	if (strcmp(s, "agent") == 0)
		return EXP_KIND_AGENT;
	if (strcmp(s, "agent-dialout") == 0)
		return EXP_KIND_DIALOUT;
	return -1;
}

/*
 * TLS towards an exporter (protocol.md 1.10.8): off (plain USB/IP, the
 * default: stock usbipd), required (every connection TLS, the gateway
 * TLS's server, the peer an agent whose certificate CN is the exporter's
 * name).  optional is only for a dial-out agent, which chooses its own
 * transport: either is admitted (the gateway opens no connection that
 * could be downgraded).
 */
enum exp_tls {
	EXP_TLS_OFF,
	EXP_TLS_OPTIONAL,
	EXP_TLS_REQUIRED,
};

static inline const char *
exp_tls_name(enum exp_tls t)
{
	switch (t) {
	case EXP_TLS_OFF:	return "off";
	case EXP_TLS_OPTIONAL:	return "optional";
	case EXP_TLS_REQUIRED:	return "required";
	}
	return "invalid";
}

static inline int
exp_tls_parse(const char *s)
{
	if (strcmp(s, "off") == 0)
		return EXP_TLS_OFF;
	if (strcmp(s, "optional") == 0)
		return EXP_TLS_OPTIONAL;
	if (strcmp(s, "required") == 0)
		return EXP_TLS_REQUIRED;
	return -1;
}

/*
 * Who owns an exporter (protocol.md 1.11): the database (usbgw exporter
 * add or import) or a file (the config file or exporters.d, which a
 * reload makes the exporters match: a line deleted, its exporter goes).
 */
enum exp_source {
	EXP_SRC_CLI,
	EXP_SRC_FILE,
};

#define EXP_ERROR_MAX	160	/* last_error's text */
#define EXP_HOLDER_MAX	96	/* a lease holder's (gateway's) name */

struct exporter {
	TAILQ_ENTRY(exporter)	 entry;
	struct gw		*gw;
	int64_t			 id;
	char			 name[GW_NAME_MAX];
	char			 host[256];	/* dial-out: the network, text */
	uint16_t		 port;
	enum exp_kind		 kind;
	enum exp_tls		 tls;
	unsigned		 store_gen;	/* gw_exporters_from_store() */
	struct usbgw_addr	 net;		/* dial-out: agents from here */
	unsigned		 net_prefix;
	struct agentconn	*ctl;		/* its control connection, up */
	enum exp_state		 state;
	bool			 dead;
	TAILQ_HEAD(, device)	 devices;
	struct event		*poll_ev;
	struct bufferevent	*poll_bev;
	unsigned		 backoff_ms;
	uint64_t		 last_ok;
	int			 fails;		/* failed polls in a row */
	int			 timeouts;	/* of them timed out */
	/* max-devices-per-exporter: new devices this minute; over it now */
	uint64_t		 new_window;
	unsigned		 new_count;
	bool			 over_limit;
	bool			 listed_once;	/* its first list: no rate */
	unsigned		 good_lists;	/* since start, up to 2 */
	unsigned		 lists_ok;	/* good lists in a row */
	unsigned		 probing;	/* claims in a probe slot (upstream.c) */
	enum exp_source		 source;
	char			 origin[96];	/* a file's: "FILE:LINE" */
	/* what exporter list shows: Unix seconds, 0 never; "" no error */
	int64_t			 last_seen;	/* its last good list */
	int64_t			 seen_saved;	/* last_seen as the db has it */
	char			 last_error[EXP_ERROR_MAX];
	int64_t			 last_error_at;
	/*
	 * Its lease (protocol.md 4.4, lease.c): polled, claimed and its
	 * agent's control connection kept only while leased.  Always
	 * leased on SQLite (one gateway).  The deadline is this gateway's
	 * monotonic clock (now_usec): lease - margin after the start of
	 * the last renewal.  holder: the last known holder's name.
	 */
	bool			 leased;
	int64_t			 lease_epoch;
	uint64_t		 lease_deadline_us;
	bool			 lease_lapsed;	/* unrenewed, claims kept */
	char			 lease_holder[EXP_HOLDER_MAX];
};


/* exporter.c */
struct exporter	*exporter_new(const char *name, const char *host, uint16_t port);
/* An agent: listen mode (host:port) or dial-out (from net/prefix, text
 * in host).  Sets the kind and starts what it needs. */
struct exporter	*exporter_new_agent(const char *name, enum exp_kind,
		    const char *host, uint16_t port);
/*
 * The agent module (agentgw.c) keeps listen-mode control connections;
 * it registers how to start and stop one (agentgw_init).
 */
struct exporter_agent_ops {
	void	(*start)(struct exporter *);
	void	(*stop)(struct exporter *);
};
void		 exporter_set_agent_ops(const struct exporter_agent_ops *);
/* The agent's control connection came up (ctl set) or went down. */
void		 exporter_ctl_changed(struct exporter *, const char *why);
/* A device record the agent pushed (DEV_ADDED): as a list entry. */
void		 exporter_record(struct exporter *, const struct usbip_dev *,
		    const struct usbip_intf *);
/* The agent says busid left (DEV_REMOVED): gone unless held. */
void		 exporter_removed(struct exporter *, const char *busid,
		    const char *why);
/* A snapshot begins / ended: devices not in it and not held are gone. */
void		 exporter_snapshot_begin(struct exporter *);
void		 exporter_snapshot_end(struct exporter *);
void		 exporter_free(struct exporter *);
struct exporter	*exporter_find(const char *name);
const char	*exp_state_name(enum exp_state);
struct device	*gw_device_find(const char *busid, int *nmatch);
void		 gw_device_candidates(const char *, char *, size_t);
bool		 gw_exporter_name_valid(const char *);
double		 gw_urb_rate(void);
void		 gw_exporter_event(struct exporter *, const char *why);
void		 gw_audit_exporter(struct exporter *, const char *action,
		    const char *detail);
/* Live exporter (not dial-out) at canonical host:port, but for skip. */
struct exporter	*exporter_find_addr(const char *host, uint16_t port,
		    const struct exporter *skip);
/* Where it was declared, for messages: "(FILE:LINE)" or "(usbgw ...)". */
const char	*exporter_origin(const struct exporter *, char *, size_t);
/* Its last good list / last failure (kept, and saved where cheap). */
void		 exporter_seen(struct exporter *);
void		 exporter_failed(struct exporter *, const char *why);
/*
 * Leases (lease.c decides, these apply): with leasing on, a new
 * exporter is not polled until its lease is gained; a lost lease ends
 * its attachments, releases its claims and forgets its devices (the
 * holder writes their state now).
 */
void		 exporter_set_leasing(bool on);
void		 exporter_lease_gained(struct exporter *);
void		 exporter_lease_lost(struct exporter *, const char *why);
void		 exporter_lease_lapsed(struct exporter *, const char *why);
/* A TLS connection to it refused: log line, tls-refused row (budgeted). */
void		 exporter_tls_refused(struct exporter *, const char *why);

#endif
