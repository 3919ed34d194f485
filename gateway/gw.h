/*
 * usbgwd's core objects: the gateway, exporters, devices, upstream
 * claims and downstream sessions.  One libevent loop, one thread.
 *
 * Ownership: the gateway owns exporters; an exporter owns its devices; a
 * device owns at most one upstream session (its claim at the exporter)
 * and is bound to at most one downstream session (the vhci host that
 * imported it).  Every object has one teardown function that tolerates
 * half-built objects; objects that a callback may still reference are
 * marked dead and freed from the loop (see gw_defer_free).
 */
#ifndef USBGW_GW_H
#define USBGW_GW_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include <jansson.h>

#include <event2/event.h>
#include <event2/bufferevent.h>

#include "ctl.h"
#include "decision.h"
#include "hostlimit.h"
#include "usbip.h"

#define GW_NAME_MAX		32	/* exporter names */
#define GW_STR_MAX		128	/* descriptor strings, sanitized */
#define GW_MAX_CONFIG_LEN	4096	/* one configuration descriptor */
#define GW_MAX_CONFIGS		8
#define GW_MAX_INFLIGHT		1024	/* URBs in flight per attachment */
#define GW_RELAY_HIWAT		(4u << 20) /* output bytes before backpressure */
#define GW_MAX_DOWNSTREAM	1024	/* downstream connections */
#define GW_OP_TIMEOUT_MS	10000	/* op phase of a downstream peer */
#define GW_RECLAIM_WAIT_MS	5000	/* an import waits this long for a reclaim */
#define GW_MAX_APPROVALS	16	/* active operator decisions per device */

struct gw;
struct exporter;
struct device;
struct upstream;
struct dsession;
struct relay;
struct hostname_req;

/* One endpoint of the device's active configuration. */
struct gw_ep {
	uint8_t		present;
	uint8_t		type;		/* USB_ENDPOINT_XFER_* (0..3) */
	uint16_t	maxp;
};

/* What the probe read from the device. */
struct gw_ident {
	uint16_t	vid, pid, bcd;
	uint8_t		dclass, dsubclass, dprotocol;
	uint8_t		nconfigs;
	uint32_t	speed;
	uint8_t		dev_desc[18];
	uint8_t		*config[GW_MAX_CONFIGS];	/* full descriptors */
	uint16_t	config_len[GW_MAX_CONFIGS];
	char		manufacturer[GW_STR_MAX];
	char		product[GW_STR_MAX];
	char		serial[GW_STR_MAX];
	char		hash[65];	/* hex SHA-256 over dev_desc + configs */
};

enum up_state {
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
struct upstream_ops {
	void	(*claimed)(struct device *);	/* probed; idle */
	void	(*failed)(struct device *, int status, const char *why);
	void	(*closed)(struct device *, const char *why); /* after idle */
};

/* The gateway's own import of a device at its exporter: the claim. */
struct upstream {
	struct device		*dev;
	const struct upstream_ops *ops;
	struct bufferevent	*bev;
	enum up_state		 state;
	uint32_t		 devid;		/* exporter's busnum<<16|devnum */
	struct usbip_dev	 rec;		/* exporter's import reply */
	/* probe */
	int			 probe_step;
	int			 probe_cfg;
	uint16_t		 langid;
	uint32_t		 seqnum;
	uint32_t		 req_len;
	uint16_t		 cfg_total;
};

struct device {
	TAILQ_ENTRY(device)	 entry;		/* in exporter->devices */
	struct exporter		*exp;
	int64_t			 id;		/* database id */
	char			 busid[USBIP_BUSID_SIZE];	/* gateway's */
	char			 up_busid[USBIP_BUSID_SIZE];	/* exporter's */
	enum dev_state		 state;
	int64_t			 state_since;	/* unix seconds */
	bool			 seen;		/* in the last devlist */
	bool			 dead;
	struct usbip_intf	 intf[USBIP_MAX_INTERFACES];
	uint8_t			 nintf;
	struct gw_ident		 ident;
	bool			 probed;
	struct upstream		*up;
	struct dsession		*ds;		/* attached session */
	uint32_t		 gw_devid;	/* what vhci hosts see */
	struct gw_ep		 ep_in[16], ep_out[16];
	uint8_t			 cur_config;
	uint8_t			 alt[32];	/* alt setting per interface */
	/*
	 * The inputs of its decision (approvals, revocation, anomaly, the
	 * exporter's claims), the decision as applied and the device's
	 * timers: device.c's alone (struct device_core is defined there).
	 */
	struct device_core	*core;
	int64_t			 rule_id;	/* rule that decided, 0 none */
	int64_t			 presence_id;
	/* counters of the current attachment */
	int64_t			 attach_id;
	uint64_t		 bytes_down, bytes_up, urbs;
};

enum exp_state {
	EXP_UNKNOWN,
	EXP_UP,
	EXP_DOWN,
};

struct exporter {
	TAILQ_ENTRY(exporter)	 entry;
	struct gw		*gw;
	int64_t			 id;
	char			 name[GW_NAME_MAX];
	char			 host[256];
	uint16_t		 port;
	enum exp_state		 state;
	bool			 dead;
	TAILQ_HEAD(, device)	 devices;
	struct event		*poll_ev;
	struct bufferevent	*poll_bev;
	unsigned		 backoff_ms;
	uint64_t		 last_ok;
	int			 fails;
	/* max-devices-per-exporter: new devices this minute; over it now */
	uint64_t		 new_window;
	unsigned		 new_count;
	bool			 over_limit;
	bool			 listed_once;	/* its first list: no rate */
};

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
	int64_t			 request_id;
	struct inflight_tab	 inflight;
	struct relay		*relay;		/* DS_RELAY */
	uint64_t		 started;
};

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
	TAILQ_HEAD(, exporter)	 exporters;
	TAILQ_HEAD(, dsession)	 sessions;
	unsigned		 nsessions;
	struct evconnlistener	*listeners[8];
	int			 nlisteners;
	struct event		*sigev[4];
	struct event		*gc_ev;
	uint64_t		 started;
	/* settings (from config, flags) */
	unsigned		 poll_ms;
	unsigned		 probe_timeout_ms;
	unsigned		 attach_wait_ms;
	bool			 show_pending;
	bool			 host_names;	/* names verified (FCrDNS) */
	uint64_t		 rate_at, rate_urbs;
	bool			 shutting_down;
};

extern struct gw *gw;

/* gw.c */
void		 gw_init(struct event_base *);
void		 gw_shutdown(void);
struct device	*gw_device_find(const char *busid, int *nmatch);
void		 gw_defer(void (*)(void *), void *);
void		 gw_socket_tune(evutil_socket_t);
const char	*exp_state_name(enum exp_state);

void		 gw_free(void);
void		 gw_restore(void);
void		 gw_sync_exporters(const struct config *);
bool		 gw_exporter_name_valid(const char *);
double		 gw_urb_rate(void);

/* handlers.c */
const struct ctl_cmd *gw_ctl_table(size_t *n);
extern const struct ctl_cmd gwpolicy_cmds[];
extern const size_t gwpolicy_ncmds;
void		 gw_audit_refusal(const struct actor *, const char *cmd,
		    const char *why);

/* exporter.c */
struct exporter	*exporter_new(const char *name, const char *host, uint16_t port);
void		 exporter_free(struct exporter *);
struct exporter	*exporter_find(const char *name);
void		 exporter_poll_now(struct exporter *);
int		 gw_connect(const char *host, uint16_t port, struct bufferevent **,
		    bufferevent_data_cb, bufferevent_event_cb, void *arg);

/*
 * device.c: the one owner of a device's state and of the inputs of its
 * decision (approvals, revocation, identity, anomaly).  Nothing else
 * writes them; proxy and local mode hear of decisions as observers.
 */
struct device_observer {
	void	(*decided)(struct device *);	/* a decision was applied */
	void	(*freed)(struct device *);	/* about to be freed */
	/* the session attached to the device must end now (dev->ds) */
	void	(*cut)(struct device *, const char *why);
	/* add what this observer knows of the device to its JSON */
	void	(*json)(const struct device *, json_t *);
};
void		 device_observe(const struct device_observer *);
const struct decision *device_decision(const struct device *);
bool		 device_reclaim_pending(const struct device *);
void		 device_forget(struct device *);
int		 device_allowed_matches(void *dev, const struct rule *);
int64_t		 device_now(void);
void		 device_set_clock(int64_t (*)(void));	/* tests */
struct device	*device_new(struct exporter *, const struct usbip_dev *,
		    const struct usbip_intf *);
struct device	*device_restore(struct exporter *, const struct usbip_dev *,
		    const struct usbgw_identity *, struct upstream *);
void		 device_free(struct device *);
void		 device_set_state(struct device *, enum dev_state,
		    const struct actor *, const char *reason);
void		 device_claim(struct device *);
void		 device_claimed(struct device *);
void		 device_claim_failed(struct device *, int status, const char *why);
void		 device_up_closed(struct device *, const char *why);
void		 device_release(struct device *, const char *why);
void		 device_eval(struct device *, const struct actor *,
		    const char *reason);
void		 device_reeval(struct device *, const struct actor *,
		    const char *reason, int64_t cause_rule);
void		 device_reeval_all(const struct actor *, const char *why,
		    int64_t cause_rule, json_t *changes);
void		 device_detached(struct device *, const char *why);
void		 device_presence_ended(struct device *);
void		 device_gone(struct device *, const char *why);
void		 device_set_interface(struct device *, uint8_t intf, uint8_t alt);
void		 device_make_busid(const char *exporter, const char *up_busid,
		    char *out);
void		 device_identity(const struct device *, struct usbgw_identity *);
void		 device_listed(struct device *, const struct usbip_dev *,
		    const struct usbip_intf *);
bool		 device_import_reply_ok(struct device *, const struct usbip_dev *);
void		 device_host(const struct dsession *, struct host_id *);
/* The decision for dev and the session's host (NULL: standing state). */
void		 device_decide(struct device *, const struct dsession *,
		    struct decision *);
/* The same over another identity of dev's (local mode: one interface). */
void		 device_decide_identity(struct device *,
		    const struct usbgw_identity *, const struct dsession *,
		    struct decision *);
bool		 device_allowed_for(struct device *, const struct dsession *);
void		 device_decide_tiers(struct device *, struct policy *admin,
		    struct policy *op, const struct usbgw_identity *,
		    const struct dsession *, struct decision *);
/* Operator decisions (the control commands approve, deny, revoke). */
enum ctl_err	 device_check_identity(struct device *, const char *identity,
		    char *err, size_t errlen);
enum ctl_err	 device_approve(struct device *, bool deny,
		    const struct approve_opts *, const struct actor *,
		    char *err, size_t errlen);
enum ctl_err	 device_revoke(struct device *, const struct actor *,
		    const char *message, char *err, size_t errlen);
json_t		*device_decisions_json(const struct device *);

/* tiers.c: the rules as the daemon holds them, in two tiers */
int		 tiers_load(void);
void		 tiers_get(struct policy **admin, struct policy **op);
int64_t		 tiers_device_rule(const struct usbgw_identity *,
		    int64_t device_id, bool deny, bool admin, const char *to_host,
		    const struct actor *, const char *comment, char *err,
		    size_t errlen);


/* store.c: persistence and audit (SQLite) */
struct db;
struct usbgw_identity;
int		 store_open(const char *path);
struct db	*store_db(void);
void		 store_flush(void);
void		 store_exporter_status(struct exporter *);
int		 store_audit_prune(int64_t before, const struct actor *,
		    int64_t *pruned);
void		 store_close(void);
void		 store_device_state(struct device *, enum dev_state old,
		    const struct actor *, const char *reason, int64_t rule_id);
/* What the database knows of a probed identity (store_device_identity). */
struct store_identity {
	int64_t		 id;		/* the identity's row */
	int64_t		 presence_id;
	bool		 created;	/* first time seen */
	int64_t		 old_id;	/* another identity held this busid */
	char		 old_hash[65];
	bool		 revoked;	/* revoked for this presence */
};
int		 store_device_identity(const struct device *,
		    const struct usbgw_identity *, struct store_identity *);
size_t		 store_approvals_load(int64_t device_id, int64_t presence_id,
		    struct approval *, size_t max);
int64_t		 store_approval_add(const struct device *,
		    const struct approval *, enum approve_scope row_scope,
		    int64_t rule_id, const char *message);
void		 store_approval_end(const struct device *, int64_t id,
		    const char *why, const struct actor *by);
void		 store_set_revoked(const struct device *, bool on);
void		 store_attachment_begin(struct device *, struct dsession *,
		    const struct decision *);
void		 store_attachment_end(struct device *, const char *why);
void		 store_audit_device(struct device *, const char *action,
		    const struct actor *, const char *detail);
void		 store_audit(const char *action, const struct actor *,
		    const char *object, const char *detail);
json_t		*store_device_history(struct device *, int limit);
/* The audit columns, in the order store_audit_row_json() reads them. */
#define STORE_AUDIT_COLUMNS "seq, ts, event, busid, old_state, new_state, " \
	"actor, actor_uid, actor_name, rule_id, host, reason, detail, " \
	"exporter, object"
struct sqlite3_stmt;
json_t		*store_audit_row_json(struct sqlite3_stmt *);
void		 store_exporter_save(struct exporter *, const struct actor *);
void		 store_exporter_delete(struct exporter *, const struct actor *);
void		 store_exporters_foreach(int (*)(void *, const char *name,
		    const char *host, int port, int64_t id), void *);
int64_t		 store_access_request(struct device *, struct dsession *);
void		 store_access_outcome(int64_t request_id, const char *outcome,
		    const struct decision *);

/* events.c: the event stream and hooks */
void		 gw_device_event(struct device *, enum dev_state old,
		    const struct actor *, const char *reason);
void		 gw_exporter_event(struct exporter *, const char *why);
void		 gw_audit_exporter(struct exporter *, const char *action,
		    const char *detail);
void		 gw_access_event(struct device *, struct dsession *);
void		 gw_identity_event(struct device *);
void		 gw_probed_event(struct device *);
void		 gw_policy_event(const struct actor *, const char *change);
json_t		*device_json(const struct device *);
void		 gw_emit(const char *type, json_t *data);
void		 device_load_endpoints(struct device *, uint8_t config_value);
int		 device_load_interfaces(struct device *, uint8_t config_value);
void		 device_config_changed(struct device *);
void		 device_audit_malformed(struct device *, struct dsession *,
		    const char *msg);
bool		 device_visible_to(const struct device *, const struct dsession *);

/* upstream.c */
struct upstream	*upstream_new(struct device *, const struct upstream_ops *);
void		 upstream_close(struct upstream *);

/* server.c */
void		 server_init(void);
int		 server_listen(const char *host, const char *port);
int		 server_port(void);
void		 server_shutdown(void);
void		 dsession_close(struct dsession *, const char *why);

/* local.c: local mode (vhci on this host) */
void		 local_start(void);
void		 local_shutdown(void);
enum ctl_err	 local_ctl_attach(json_t *, const struct actor *, json_t **,
		    char *, size_t);
enum ctl_err	 local_ctl_detach(json_t *, const struct actor *, json_t **,
		    char *, size_t);

/* relay.c */
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
