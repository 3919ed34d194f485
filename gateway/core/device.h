/*
 * A device at the gateway (device.c): the one owner of its state and
 * of the inputs of its decision.  Fields are read by the modules above;
 * what only device.c may touch is in struct device_core (device.c).
 */
#ifndef USBGW_DEVICE_H
#define USBGW_DEVICE_H

#include <jansson.h>

#include "proto/ctl.h"
#include "policy/ident.h"
#include "policy/ifmap.h"
#include "policy/decision.h"
#include "core/loop.h"
#include "core/upstream.h"
#include "proto/usbip.h"

struct device {
	TAILQ_ENTRY(device)	 entry;		/* in exporter->devices */
	struct exporter		*exp;
	int64_t			 id;		/* database id */
	char			 busid[USBIP_BUSID_SIZE];	/* gateway's */
	char			 up_busid[USBIP_BUSID_SIZE];	/* exporter's */
	enum dev_state		 state;
	int64_t			 state_since;	/* unix seconds */
	bool			 seen;		/* in the last devlist */
	uint8_t			 missed;	/* good lists in a row without it */
	uint8_t			 listed_held;	/* ... listing it while claimed */
	bool			 dead;
	struct usbip_intf	 intf[USBIP_MAX_INTERFACES];
	uint8_t			 nintf;
	struct gw_ident		 ident;
	bool			 probed;
	struct upstream		*up;
	struct dsession		*ds;		/* attached session */
	uint32_t		 gw_devid;	/* what vhci hosts see */
	/* the endpoint map (ifmap.h): what the current configuration and
	 * alternate settings have, each endpoint with its interface */
	struct gw_ep		 ep_in[IFMAP_NEP], ep_out[IFMAP_NEP];
	uint8_t			 cur_config;
	uint8_t			 alt[IFMAP_NINTF];	/* per interface */
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
	uint64_t		 refused;	/* denied-interface URBs */
};


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
bool		 device_claim_coming(const struct device *);
void		 device_forget(struct device *);
int		 device_allowed_matches(void *dev, const struct rule *);
int64_t		 device_now(void);
void		 device_set_clock(int64_t (*)(void));	/* tests */
struct device	*device_new(struct exporter *, const struct usbip_dev *);
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
/* The store is back: rows for what was probed meanwhile, approvals as
 * the store has them, every device decided again. */
void		 device_reconcile_all(const struct actor *, const char *why);
/* The store is unavailable: every attached vhci host cut, claims kept. */
unsigned	 device_cut_all(const char *why);
void		 device_reeval_all(const struct actor *, const char *why,
		    int64_t cause_rule, json_t *changes);
struct device	*device_by_id(int64_t id);
void		 device_reload_decisions(struct device *, const struct actor *,
		    const char *why);
void		 device_reload_all_decisions(const struct actor *,
		    const char *why);
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
bool		 device_rejected(const struct device *);
enum dev_state	 device_verdict_state(enum verdict);
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
json_t		*device_iface_json(const struct device *, const struct decision *);


/*
 * device.c: what operators see, and the device's events.  One device's
 * JSON object (protocol.md 2.5) as text, appended to b (a comma first if
 * b holds an array's earlier elements); device_json() is the same, parsed.
 * DEVICE_JSON_MAX bounds one device's text: 3 strings of GW_STR_MAX
 * bytes at 6 bytes each when escaped, 32 interfaces, GW_MAX_APPROVALS
 * approvals with their host limits and names, the decision's why.
 */
#define DEVICE_JSON_MAX	(64 * 1024)
struct jtext;
void		 device_json_text(const struct device *, struct jtext *b);
/* A decision's "per_interface" and "interfaces" members (policy test too). */
void		 iface_decisions_text(const struct device *,
		    const struct decision *, struct jtext *b);
json_t		*device_json(const struct device *);
void		 gw_device_event(struct device *, enum dev_state old,
		    const struct actor *, const char *reason);
void		 gw_access_event(struct device *, struct dsession *);
void		 gw_identity_event(struct device *);
void		 gw_probed_event(struct device *);
void		 device_descriptor_anomaly(struct device *, const char *what);
void		 device_audit_malformed(struct device *, struct dsession *,
		    const char *msg);
/* The relay refused a URB or request to a denied interface (bounded). */
void		 device_audit_iface_refused(struct device *, struct dsession *,
		    const char *msg);
/* device.c: the descriptors the probe read */
void		 device_load_endpoints(struct device *, uint8_t config_value);
int		 device_load_interfaces(struct device *, uint8_t config_value);
void		 device_config_changed(struct device *);

#endif
