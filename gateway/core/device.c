/*
 * A device's life at the gateway (DESIGN.md, "The device's life"):
 *
 *   probing -> pending | authorized | blocked -> attached -> (detach)
 *   any -> gone;  revoke: authorized/attached -> pending/blocked
 *
 * This file is the one owner of a device's state and of the inputs of
 * its decision: the identity the probe verified, the operator's
 * approvals, denials and revocation, and an identity anomaly.  Every
 * transition goes through device_set_state(), which logs it, writes the
 * audit row, persists the state and announces the event.  The decision
 * itself is decide() (decision.c), a pure function; device_eval()
 * feeds it and applies its answer.  Proxy and local mode hear of an
 * applied decision as observers (device_observe); storage (store.c)
 * persists and loads, and decides nothing.
 *
 * Nothing reaches a device from a vhci host unless its state is
 * authorized at the moment of the import; the relay is torn down the
 * moment that stops being true.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "base/desc.h"
#include "base/identity.h"
#include "base/jsontext.h"
#include "base/log.h"
#include "base/util.h"
#include "control/control.h"
#include "core/device.h"
#include "core/events.h"
#include "core/loop.h"
#include "core/store.h"
#include "core/tiers.h"
#include "core/upstream.h"
#include "policy/decision.h"
#include "policy/policy.h"
#include "policy/rule.h"

#define RECLAIM_FIRST_MS	100	/* after a release: the stub resets */
#define RETRY_MAX_MS		30000	/* a failed claim's back-off, at most */
#define RETRY_JITTER_PCT	20
#define MAX_OBSERVERS		4

static void	device_reclaim_cb(evutil_socket_t, short, void *);
static void	device_retry_later(struct device *);
static void	device_recheck_cb(evutil_socket_t, short, void *);
static void	device_set_state_rule(struct device *, enum dev_state,
		    const struct actor *, const char *, int64_t);

/* What device.c alone reads and writes of a device (gw.h: dev->core). */
struct device_core {
	struct approval		 appr[GW_MAX_APPROVALS];	/* active ones */
	unsigned		 nappr;
	bool			 revoked;	/* operator revoked: pending */
	bool			 rejected;	/* under a reject rule (audited) */
	char			 anomaly[160];	/* identity in question, or "" */
	char			 anomaly_ack[160]; /* decided on by an operator */
	bool			 identity_changed;
	int64_t			 old_id;	/* row of the previous identity */
	char			 old_hash[65];
	struct decision		 decision;	/* the standing one, applied */
	struct event		*recheck_ev;	/* at decision.recheck_at */
	struct usbip_dev	 listed;	/* the exporter's list's claim */
	struct usbip_intf	 listed_intf[USBIP_MAX_INTERFACES];
	bool			 listed_fresh;	/* no probe compared it yet */
	struct event		*reclaim_ev;
	int			 reclaim_tries;	/* failed claims in a row */
	bool			 retrying;	/* reclaim_ev: after a failure */
};

static const struct device_observer *observers[MAX_OBSERVERS];
static const struct upstream_ops claim_ops = {
	.claimed = device_claimed,
	.failed = device_claim_failed,
	.closed = device_up_closed,
};
static int64_t	(*clock_fn)(void);	/* tests: a clock of their own */

/* The standing decision, as last applied. */
const struct decision *
device_decision(const struct device *dev)
{
	return &dev->core->decision;
}

/*
 * Released and about to be claimed again (the exporter resets it).  Not
 * a claim that failed and waits for its retry: lists judge that device.
 */
bool
device_reclaim_pending(const struct device *dev)
{
	return !dev->core->retrying &&
	    evtimer_pending(dev->core->reclaim_ev, NULL) != 0;
}

/* The exporter forgets a gone device: no timer of its may fire again. */
void
device_forget(struct device *dev)
{
	dev->dead = true;
	evtimer_del(dev->core->reclaim_ev);
	evtimer_del(dev->core->recheck_ev);
}

/* The core's clock: unix seconds (tests set their own). */
int64_t
device_now(void)
{
	return clock_fn != NULL ? clock_fn() : (int64_t)time(NULL);
}

void
device_set_clock(int64_t (*fn)(void))
{
	clock_fn = fn;
}
static size_t	nobservers;
static const struct actor sys_actor = { .kind = ACTOR_SYSTEM, .name = "system" };

/* Proxy and local mode: tell me when a decision was applied. */
void
device_observe(const struct device_observer *o)
{
	size_t i;

	for (i = 0; i < nobservers; i++)
		if (observers[i] == o)
			return;
	if (nobservers == MAX_OBSERVERS)
		fatalx("too many device observers");
	observers[nobservers++] = o;
}

/* The vhci host attached to dev (dev->ds) must be cut off now. */
static void
device_cut(struct device *dev, const char *why)
{
	size_t i;

	for (i = 0; i < nobservers && dev->ds != NULL; i++)
		if (observers[i]->cut != NULL)
			observers[i]->cut(dev, why);
}

static void
notify_decided(struct device *dev)
{
	size_t i;

	for (i = 0; i < nobservers && !dev->dead; i++)
		if (observers[i]->decided != NULL)
			observers[i]->decided(dev);
}

/*
 * The busid vhci hosts see: "EXPORTER:BUSID" when that fits in 31 bytes
 * (exporter names cannot contain ':', so it is unique), otherwise "g"
 * and 16 hex digits of SHA-256(exporter NUL busid).  A function of the
 * pair, so stable across restarts.
 */
void
device_make_busid(const char *exporter, const char *up_busid, char *out)
{
	struct iovec parts[2];
	char hex[USBGW_HASH_HEX + 1];
	int n;

	n = snprintf(out, USBIP_BUSID_SIZE, "%s:%s", exporter, up_busid);
	if (n > 0 && n < USBIP_BUSID_SIZE)
		return;
	parts[0].iov_base = (void *)(uintptr_t)exporter;
	parts[0].iov_len = strlen(exporter) + 1;	/* with its NUL */
	parts[1].iov_base = (void *)(uintptr_t)up_busid;
	parts[1].iov_len = strlen(up_busid);
	if (identity_hash(parts, 2, hex) == -1)
		fatalx("SHA-256 failed");
	snprintf(out, USBIP_BUSID_SIZE, "g%.16s", hex);
}

struct device *
device_new(struct exporter *exp, const struct usbip_dev *rec)
{
	struct device *dev;

	dev = xcalloc(1, sizeof(*dev));
	dev->core = xcalloc(1, sizeof(*dev->core));
	dev->exp = exp;
	usbgw_strlcpy(dev->up_busid, rec->busid, sizeof(dev->up_busid));
	device_make_busid(exp->name, rec->busid, dev->busid);
	/* what the list claims is compared with the probe, never used */
	dev->core->listed = *rec;
	dev->nintf = 0;
	dev->state = DEV_PROBING;
	dev->state_since = device_now();
	dev->core->reclaim_ev = evtimer_new(gw->base, device_reclaim_cb, dev);
	dev->core->recheck_ev = evtimer_new(gw->base, device_recheck_cb, dev);
	dev->core->decision.recheck_at = RULE_NEVER;
	TAILQ_INSERT_TAIL(&exp->devices, dev, entry);
	log_info("%s: new device %s at exporter %s", dev->busid, dev->up_busid,
	    exp->name);
	return dev;
}

void
device_free(struct device *dev)
{

	size_t k;

	if (dev == NULL)
		return;
	for (k = 0; k < nobservers; k++)
		if (observers[k]->freed != NULL)
			observers[k]->freed(dev);
	if (dev->core->reclaim_ev != NULL)
		event_free(dev->core->reclaim_ev);
	if (dev->core->recheck_ev != NULL)
		event_free(dev->core->recheck_ev);
	gw_ident_clear(&dev->ident);
	free(dev->core);
	free(dev);
}

void
device_set_state(struct device *dev, enum dev_state st,
    const struct actor *who, const char *reason)
{
	device_set_state_rule(dev, st, who, reason, 0);
}

/*
 * A proxy session attaches: the decision applied from now on is its
 * host's (what device_reeval keeps while attached), so the relay
 * enforces the interface verdicts of what allowed this host, not the
 * standing state's (decided for no host).  Not allowed: the host's
 * decision all the same, so the relay refuses everything (issue 17, F7:
 * the standing one was decided for no host).
 */
static void
attach_decision(struct device *dev)
{
	struct decision d;

	device_decide(dev, dev->ds, &d);
	/* not allowed for this host: its decision anyway (nothing passes) */
	dev->core->decision = d;
	dev->rule_id = d.rule_id;
}

/* The same, naming the rule that caused it (0: the actor's, if a rule). */
static void
device_set_state_rule(struct device *dev, enum dev_state st,
    const struct actor *who, const char *reason, int64_t rule_id)
{
	enum dev_state old = dev->state;

	if (who == NULL)
		who = &sys_actor;
	if (st == DEV_ATTACHED && dev->ds != NULL)
		attach_decision(dev);
	if (old == st)
		return;
	dev->state = st;
	dev->state_since = device_now();
	log_info("%s: %s -> %s by %s%s%s", dev->busid, dev_state_name(old),
	    dev_state_name(st), who->name, reason ? ": " : "",
	    reason ? reason : "");
	store_device_state(dev, old, who, reason, rule_id);
	gw_device_event(dev, old, who, reason);
}

/*
 * Start (or restart) the claim at the exporter: it waits in the probe
 * queue for a slot; a device somebody was allowed to use (a re-claim
 * after a detach) goes ahead of new devices.
 */
void
device_claim(struct device *dev)
{
	if (dev->up != NULL || dev->dead || dev->exp->dead)
		return;
	dev->up = upstream_new(dev, &claim_ops, dev->state == DEV_AUTHORIZED ||
	    dev->state == DEV_ATTACHED);
	if (dev->state == DEV_GONE || !dev->probed)
		device_set_state(dev, DEV_PROBING, NULL, "claiming");
}

/*
 * The whole identity as one digest: what makes a device row (exporter,
 * its busid there, the descriptor hash and the three strings), so that
 * --identity names exactly one identity.  The descriptor hash alone
 * does not: two sticks of one model differ only in their serials.
 */
static void
identity_digest(struct device *dev)
{
	const char *f[6] = { dev->exp->name, dev->up_busid, dev->ident.hash,
	    dev->ident.serial, dev->ident.manufacturer, dev->ident.product };
	struct iovec parts[6];
	int i;

	for (i = 0; i < 6; i++) {
		parts[i].iov_base = (void *)(uintptr_t)f[i];
		parts[i].iov_len = strlen(f[i]) + 1;	/* with its NUL */
	}
	if (identity_hash(parts, 6, dev->ident.identity) == -1)
		fatalx("SHA-256 failed");
}

/*
 * The probe is done: record the identity, find the operator's standing
 * decisions for it, and announce a changed identity.  A different
 * identity at the same port is a different device: what was decided
 * for the old one does not carry over.
 */
static void
device_identified(struct device *dev)
{
	struct store_identity si;
	struct usbgw_identity id;

	dev->core->identity_changed = false;
	identity_digest(dev);
	device_identity(dev, &id);
	if (store_device_identity(dev, &id, &si) == -1) {
		/*
		 * No row: nothing decided for any identity applies, and
		 * nothing may be recorded against the previous one's row.
		 */
		dev->id = 0;
		dev->presence_id = 0;
		dev->core->nappr = 0;
		dev->core->revoked = false;
		return;
	}
	if (si.id != dev->id) {
		/* another identity: nothing decided or claimed of the old one */
		dev->core->nappr = 0;
		dev->core->revoked = false;
		dev->core->anomaly[0] = dev->core->anomaly_ack[0] = '\0';
	}
	dev->id = si.id;
	dev->presence_id = si.presence_id;
	dev->core->revoked = si.revoked;
	dev->core->nappr = store_approvals_load(dev->id, dev->presence_id, dev->core->appr,
	    GW_MAX_APPROVALS);
	if (si.old_id != 0) {
		dev->core->identity_changed = true;
		dev->core->old_id = si.old_id;
		usbgw_strlcpy(dev->core->old_hash, si.old_hash, sizeof(dev->core->old_hash));
		gw_identity_event(dev);
	}
}

/*
 * A device the gateway attached (local mode) before a restart, still
 * attached in the kernel: its identity is the one an earlier probe
 * verified, as the database kept it (id), with no descriptors to read
 * again.  up is its claim, already relaying.
 */
struct device *
device_restore(struct exporter *exp, const struct usbip_dev *rec,
    const struct usbgw_identity *id, struct upstream *up)
{
	struct device *dev;
	int i;

	dev = device_new(exp, rec);
	dev->ident.vid = id->vid;
	dev->ident.pid = id->pid;
	dev->ident.bcd = id->bcd_device;
	dev->ident.dclass = id->dev_class;
	dev->ident.dsubclass = id->dev_subclass;
	dev->ident.dprotocol = id->dev_protocol;
	dev->ident.speed = rec->speed;
	usbgw_strlcpy(dev->ident.manufacturer, id->manufacturer,
	    sizeof(dev->ident.manufacturer));
	usbgw_strlcpy(dev->ident.product, id->product,
	    sizeof(dev->ident.product));
	usbgw_strlcpy(dev->ident.serial, id->serial, sizeof(dev->ident.serial));
	usbgw_strlcpy(dev->ident.hash, id->hash, sizeof(dev->ident.hash));
	dev->nintf = id->n_ifaces < USBIP_MAX_INTERFACES ? id->n_ifaces :
	    USBIP_MAX_INTERFACES;
	for (i = 0; i < dev->nintf; i++) {
		dev->intf[i].bInterfaceClass = id->ifaces[i].cls;
		dev->intf[i].bInterfaceSubClass = id->ifaces[i].subcls;
		dev->intf[i].bInterfaceProtocol = id->ifaces[i].proto;
	}
	up->dev = dev;
	dev->up = up;
	dev->probed = true;
	device_identified(dev);
	return dev;
}

/*
 * The claim is in place and the probe read the descriptors: identity
 * first (a changed hash is a different device), then what the exporter
 * claimed is compared with it, then the decision.
 */
static void	device_anomaly(struct device *, const char *);

void
device_claimed(struct device *dev)
{
	struct upstream *up = dev->up;

	dev->core->reclaim_tries = 0;
	dev->core->retrying = false;
	device_load_endpoints(dev, up->rec.bConfigurationValue);
	/* a reply naming no probed configuration: the identity is the
	 * first one's, and the reply an anomaly (below) */
	if (device_load_interfaces(dev, up->rec.bConfigurationValue) == -1)
		device_load_interfaces(dev, 0);
	device_identified(dev);
	/* the devid vhci hosts see: from the database ids, after the row */
	dev->gw_devid = (uint32_t)(((dev->exp->id & 0x7fff) + 1) << 16 |
	    ((dev->id & 0xffff) ? (dev->id & 0xffff) : 1));
	if (dev->state == DEV_PROBING)
		gw_probed_event(dev);
	device_listed(dev, &dev->core->listed, NULL);
	device_import_reply_ok(dev, &up->rec);
	if (dev->ident.nconfigs_dev > GW_MAX_CONFIGS) {
		char what[160];

		snprintf(what, sizeof(what), "the device has %u "
		    "configurations, more than the %d the gateway reads: "
		    "refused", dev->ident.nconfigs_dev, GW_MAX_CONFIGS);
		device_anomaly(dev, what);
	}
	{
		char what[160];

		/* descriptors the endpoint map cannot describe (issue 17) */
		if (ifmap_anomaly(&dev->ident, what, sizeof(what)) != NULL)
			device_anomaly(dev, what);
	}
	device_eval(dev, NULL, NULL);
}

void
device_claim_failed(struct device *dev, int status, const char *why)
{
	struct upstream *up = dev->up;

	log_info("%s: claim failed: %s", dev->busid, why);
	dev->up = NULL;
	upstream_close(up);
	device_cut(dev, why);
	if (status == ST_DEV_BUSY) {
		store_audit_device(dev, "claim-busy", NULL,
		    "the exporter reports the device in use by another importer");
	}
	if (status == ST_NODEV && !dev->seen) {
		device_gone(dev, "exporter no longer has the device");
		return;
	}
	/*
	 * Nobody listens at the exporter's port: nobody can import the
	 * device there either.  It is gone (its presence ends) until a
	 * device list shows it again.
	 */
	if (status == UP_ST_UNREACHABLE && dev->state != DEV_GONE) {
		device_gone(dev, "exporter unreachable");
		return;
	}
	/*
	 * Anything else -- a timeout (a busy exporter, or a gateway too
	 * busy to read the reply in time), a closed connection, ST_DEV_BUSY,
	 * a bad reply -- says nothing about whether the device is there: it
	 * is claimed again with back-off, for as long as the exporter's
	 * lists show it (two good lists without it make it gone, as for any
	 * device the gateway does not hold).  Until then it has no claim,
	 * and a device without a claim is nobody's (device_cut above).
	 */
	device_retry_later(dev);
}

/*
 * The next try of a failed claim: 100 ms, doubled with every failure in
 * a row up to RETRY_MAX_MS, +-RETRY_JITTER_PCT at random so that the
 * claims of one busy exporter do not all come back at once.
 */
static void
device_retry_later(struct device *dev)
{
	unsigned ms = RECLAIM_FIRST_MS;
	struct timeval tv;
	int i;

	for (i = 0; i < dev->core->reclaim_tries && ms < RETRY_MAX_MS; i++)
		ms *= 2;
	if (ms > RETRY_MAX_MS)
		ms = RETRY_MAX_MS;
	if (dev->core->reclaim_tries < INT_MAX)
		dev->core->reclaim_tries++;
	ms = usbgw_jitter(ms, RETRY_JITTER_PCT);
	log_debug("%s: claimed again in %u ms (try %d)", dev->busid, ms,
	    dev->core->reclaim_tries + 1);
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	dev->core->retrying = true;
	evtimer_add(dev->core->reclaim_ev, &tv);
}

static void
device_reclaim_cb(evutil_socket_t fd, short what, void *arg)
{
	struct device *dev = arg;

	if (dev->state == DEV_GONE && !dev->seen)
		return;
	device_claim(dev);
}

/* Release the claim and any attachment, without reclaiming. */
void
device_release(struct device *dev, const char *why)
{
	struct upstream *up;

	device_cut(dev, why);		/* may close the claim too */
	evtimer_del(dev->core->reclaim_ev);
	up = dev->up;
	dev->up = NULL;
	upstream_close(up);
}

/* Schedule a fresh claim after the exporter has reset the device. */
static void
device_reclaim_later(struct device *dev)
{
	struct timeval tv = { 0, RECLAIM_FIRST_MS * 1000 };

	dev->core->reclaim_tries = 0;
	dev->core->retrying = false;
	evtimer_add(dev->core->reclaim_ev, &tv);
}

/* The claim's connection ended by itself (unplug, exporter restart). */
void
device_up_closed(struct device *dev, const char *why)
{
	log_info("%s: claim closed: %s", dev->busid, why);
	device_release(dev, why);
	device_reclaim_later(dev);
}

/* The vhci host let go: release, reclaim fresh, back to authorized. */
void
device_detached(struct device *dev, const char *why)
{
	struct upstream *up = dev->up;

	store_attachment_end(dev, why);
	dev->up = NULL;
	upstream_close(up);
	if (dev->state == DEV_ATTACHED)
		device_set_state(dev, DEV_AUTHORIZED, NULL, why);
	device_reclaim_later(dev);
}


/* allowed-matches(...): some other device is allowed now. */
int
device_allowed_matches(void *arg, const struct rule *query)
{
	struct device *self = arg;
	struct usbgw_identity id;
	struct exporter *exp;
	struct device *dev;

	TAILQ_FOREACH(exp, &gw->exporters, entry)
		TAILQ_FOREACH(dev, &exp->devices, entry) {
			if (dev == self || (dev->state != DEV_AUTHORIZED &&
			    dev->state != DEV_ATTACHED))
				continue;
			device_identity(dev, &id);
			if (rule_match_attrs(query, &id, NULL))
				return 1;
		}
	return 0;
}

/* ---- what operators see ------------------------------------------------- */

/*
 * A device as operators see it (protocol.md 2.5) is written once, as
 * JSON text, by device_json_text(): `list` concatenates these texts into
 * its reply (10,000 devices without a jansson tree and a double dump),
 * and device_json() (show, events) parses the same text, so every view
 * of a device has the same members in the same order.  Nothing is
 * cached: the text is written from the device's fields at each request,
 * so no state change can leave an old view behind.
 */

/* enum approve_scope's names, as the database and protocol.md 2.5 spell them */
static const char *const approval_scope[] = { "once", "for", "until",
    "permanent" };

/*
 * What allows the device now, as "approval": the operator's approval
 * that decided, or the rule; null when nothing allows it.
 */
static void
approval_text(const struct device *dev, struct jtext *b)
{
	const struct decision *d = &dev->core->decision;
	char to[HOST_NAME_MAX_LEN + 1];
	unsigned i;

	jt_key(b, "approval");
	if (d->verdict != VERDICT_ALLOW) {
		jt_null(b);
		return;
	}
	if (d->by == BY_APPROVAL)
		for (i = 0; i < dev->core->nappr; i++) {
			const struct approval *p = &dev->core->appr[i];

			if (p->id != d->approval_id)
				continue;
			host_match_format(&p->to, to, sizeof(to));
			jt_open(b, '{');
			jt_kstr(b, "scope", approval_scope[p->scope]);
			jt_kint_or_null(b, "expires_at", p->expires_at);
			if (to[0] != '\0')
				jt_kstr(b, "to", to);
			else
				jt_knull(b, "to");
			jt_knull(b, "rule_id");
			jt_kstr(b, "by", p->by.name);
			jt_kbool(b, "override", p->override);
			jt_close(b, '}');
			return;
		}
	if (d->rule_id != 0) {
		jt_open(b, '{');
		jt_kstr(b, "scope", d->by == BY_OPERATOR_RULE ? "permanent" :
		    "rule");
		jt_knull(b, "expires_at");
		jt_knull(b, "to");
		jt_kint(b, "rule_id", d->rule_id);
		jt_close(b, '}');
		return;
	}
	jt_null(b);
}

static bool	anomaly_open(const struct device *);

/*
 * The members "per_interface" and "interfaces" of a decision (protocol.md
 * 2.5): every interface descriptor the probe read with its verdict
 * ("decision": may a host use it now) and, under an interface-policy,
 * what the policy says of it ("policy": for a pending device, what an
 * approval would give).
 */
void
iface_decisions_text(const struct device *dev, const struct decision *d,
    struct jtext *b)
{
	struct iface_verdict own[DECISION_IFACE_MAX];
	const struct iface_verdict *v = d->iface;
	size_t i, n = d->niface;
	char cls[16];

	if (!d->per_iface) {
		n = gw_ident_ifaces(&dev->ident, own, nitems(own));
		v = own;
	}
	jt_kbool(b, "per_interface", d->per_iface);
	jt_key(b, "interfaces");
	jt_open(b, '[');
	for (i = 0; i < n; i++) {
		snprintf(cls, sizeof(cls), "%02x:%02x:%02x", v[i].cls,
		    v[i].subcls, v[i].proto);
		jt_open(b, '{');
		jt_kint(b, "config", v[i].config);
		jt_kint(b, "number", v[i].number);
		jt_kint(b, "alt", v[i].alt);
		jt_kstr(b, "class", cls);
		jt_kstr(b, "decision", decision_iface_allowed(d, v[i].config,
		    v[i].number, v[i].alt) ? "allow" : "deny");
		/* the interface-policy's word (pending: once approved) */
		if (d->per_iface)
			jt_kstr(b, "policy", v[i].allow ? "allow" : "deny");
		jt_close(b, '}');
	}
	jt_close(b, ']');
}

/* The members "approvals", "anomaly", "decision", in an open object. */
static void
decisions_text(const struct device *dev, struct jtext *b)
{
	const struct decision *d = &dev->core->decision;
	char to[HOST_NAME_MAX_LEN + 1];
	unsigned i;

	jt_key(b, "approvals");
	jt_open(b, '[');
	for (i = 0; i < dev->core->nappr; i++) {
		const struct approval *p = &dev->core->appr[i];

		host_match_format(&p->to, to, sizeof(to));
		jt_open(b, '{');
		jt_kint(b, "id", p->id);
		jt_kstr(b, "decision", p->deny ? "deny" : "allow");
		jt_kstr(b, "scope", approval_scope[p->scope]);
		jt_kint_or_null(b, "expires_at", p->expires_at);
		if (to[0] != '\0')
			jt_kstr(b, "to", to);
		else
			jt_knull(b, "to");
		jt_kstr(b, "by", p->by.name);
		jt_kbool(b, "override", p->override);
		jt_close(b, '}');
	}
	jt_close(b, ']');
	if (anomaly_open(dev))
		jt_kstr(b, "anomaly", dev->core->anomaly);
	else
		jt_knull(b, "anomaly");
	jt_key(b, "decision");
	jt_open(b, '{');
	jt_kstr(b, "verdict", verdict_name(d->verdict));
	jt_kstr(b, "by", decided_by_name(d->by));
	jt_kint_or_null(b, "rule_id", d->rule_id);
	jt_kint_or_null(b, "approval_id", d->approval_id);
	jt_kstr(b, "why", d->why);
	iface_decisions_text(dev, d, b);
	jt_close(b, '}');
}

/*
 * What the observers (local mode) add, as members in an open object.
 * They add their own members with jansson, never one of the device's.
 */
static void
observers_text(const struct device *dev, struct jtext *b)
{
	json_t *o = NULL;
	size_t k, n;
	char *t;

	for (k = 0; k < nobservers; k++)
		if (observers[k]->json != NULL) {
			if (o == NULL)
				o = json_object();
			observers[k]->json(dev, o);
		}
	if (o == NULL || json_object_size(o) == 0 ||
	    (t = json_dumps(o, JSON_COMPACT)) == NULL) {
		json_decref(o);
		return;
	}
	n = strlen(t);			/* {"local":...}: the members inside */
	if (n > 2) {
		jt_raw(b, ",", 1);
		jt_raw(b, t + 1, n - 2);
	}
	free(t);
	json_decref(o);
}

/*
 * The claim is on its way: being made now (queued, connecting, importing,
 * probing), or released by an attachment's end and about to be made
 * again.  Not a claim that failed and waits out its back-off.
 */
bool
device_claim_coming(const struct device *dev)
{
	if (dev->dead)
		return false;
	if (dev->up == NULL)
		return device_reclaim_pending(dev);
	switch (dev->up->state) {
	case UP_QUEUED:
	case UP_CONNECTING:
	case UP_IMPORTING:
	case UP_PROBING:
		return true;
	default:
		return false;
	}
}

static const char *
device_claim_name(const struct device *dev)
{
	if (device_claim_coming(dev))
		return "being taken";
	if (dev->up == NULL || dev->dead)
		return "none";
	switch (dev->up->state) {
	case UP_IDLE:
		return dev->ds == NULL ? "held" : "in use";
	case UP_RELAYING:
		return "in use";
	default:
		return "none";
	}
}

void
device_json_text(const struct device *dev, struct jtext *b)
{
	char hex[8];
	int i;

	jt_open(b, '{');
	jt_kstr(b, "busid", dev->busid);
	jt_kstr(b, "exporter", dev->exp->name);
	jt_kstr(b, "exporter_busid", dev->up_busid);
	jt_kstr(b, "state", dev_state_name(dev->state));
	snprintf(hex, sizeof(hex), "%04x", dev->ident.vid);
	jt_kstr(b, "vid", hex);
	snprintf(hex, sizeof(hex), "%04x", dev->ident.pid);
	jt_kstr(b, "pid", hex);
	jt_kstr(b, "manufacturer", dev->ident.manufacturer);
	jt_kstr(b, "product", dev->ident.product);
	jt_kstr(b, "serial", dev->ident.serial);
	jt_kstr(b, "hash", dev->ident.hash);
	jt_kstr(b, "speed", usbip_speed_name(dev->up ? dev->up->rec.speed :
	    dev->core->listed.speed));
	jt_key(b, "interfaces");
	jt_open(b, '[');
	for (i = 0; i < dev->nintf; i++) {
		char one[16];

		snprintf(one, sizeof(one), "%02x:%02x:%02x",
		    dev->intf[i].bInterfaceClass,
		    dev->intf[i].bInterfaceSubClass,
		    dev->intf[i].bInterfaceProtocol);
		jt_str(b, one);
	}
	jt_close(b, ']');
	jt_kint(b, "rule_id", dev->rule_id);
	jt_kint(b, "id", dev->id);
	jt_kstr(b, "identity", dev->ident.identity);
	if (dev->ds != NULL) {
		jt_kstr(b, "attached_to", dev->ds->peer);
		jt_kstr(b, "transport", dsession_transport(dev->ds));
		if (dev->ds->tls)
			jt_kstr(b, "host_cert", dev->ds->cert.name);
		jt_kint(b, "bytes_to_host", (int64_t)dev->bytes_down);
		jt_kint(b, "bytes_to_device", (int64_t)dev->bytes_up);
		jt_kint(b, "urbs", (int64_t)dev->urbs);
		jt_kint(b, "refused", (int64_t)dev->refused);
	}
	/*
	 * The claim at the exporter: "held" (idle: an import or an attach
	 * can have it now), "in use" (a vhci host's), "being taken" (the
	 * claim is being made or made again, as after an attachment ended:
	 * imports and `attach` wait for it), "none".
	 */
	jt_kstr(b, "claim", device_claim_name(dev));
	/* the exporter leg: the claim's connection, while it has one */
	if (upstream_transport(dev->up) != NULL) {
		jt_kstr(b, "up_transport", upstream_transport(dev->up));
		if (upstream_cert(dev->up) != NULL)
			jt_kstr(b, "up_cert", upstream_cert(dev->up));
	}
	observers_text(dev, b);
	approval_text(dev, b);
	decisions_text(dev, b);
	jt_kint(b, "since", dev->state_since);
	jt_close(b, '}');
}

/* Parse what the writer wrote: {} if it cannot (never expected). */
static json_t *
text_to_json(struct jtext *b)
{
	json_error_t je;
	json_t *o = NULL;

	if (!b->over)
		o = json_loadb(b->buf, b->len, JSON_REJECT_DUPLICATES, &je);
	if (o == NULL) {
		log_warnx("device JSON not readable back: %s", b->over ?
		    "over the limit" : je.text);
		o = json_object();
	}
	jtext_free(b);
	return o;
}

json_t *
device_json(const struct device *dev)
{
	struct jtext b;

	jtext_init(&b, DEVICE_JSON_MAX);
	device_json_text(dev, &b);
	return text_to_json(&b);
}

void
gw_device_event(struct device *dev, enum dev_state old,
    const struct actor *who, const char *reason)
{
	const char *type = NULL;
	json_t *d;

	switch (dev->state) {
	case DEV_PENDING:
		type = "pending";
		break;
	case DEV_AUTHORIZED:
		type = old == DEV_ATTACHED ? "detach" : "approve";
		break;
	case DEV_ATTACHED:
		type = "attach";
		break;
	case DEV_BLOCKED:
		type = (old == DEV_AUTHORIZED || old == DEV_ATTACHED) ?
		    "revoke" : "deny";
		break;
	case DEV_GONE:
		type = "gone";
		break;
	case DEV_PROBING:
	default:
		type = NULL;
		break;
	}
	if (dev->state == DEV_PENDING &&
	    (old == DEV_AUTHORIZED || old == DEV_ATTACHED))
		type = "revoke";
	if (type == NULL)
		return;
	d = device_json(dev);
	json_object_set_new(d, "from", json_string(dev_state_name(old)));
	json_object_set_new(d, "to", json_string(dev_state_name(dev->state)));
	json_object_set_new(d, "actor", ctl_actor_json(who));
	json_object_set_new(d, "reason", json_string(reason ? reason : ""));
	if (dev->ds != NULL)
		json_object_set_new(d, "host", json_string(dev->ds->host));
	gw_emit(type, d);
}

/* A device was claimed and identified (first probe of its presence). */
void
gw_probed_event(struct device *dev)
{
	gw_emit("probed", device_json(dev));
}

void
gw_access_event(struct device *dev, struct dsession *ds)
{
	json_t *d = device_json(dev);

	json_object_set_new(d, "host", json_string(ds->host));
	gw_emit("access-request", d);
}

void
device_audit_malformed(struct device *dev, struct dsession *ds, const char *msg)
{
	store_audit_device(dev, "malformed", NULL, msg);
}

void
device_audit_iface_refused(struct device *dev, struct dsession *ds,
    const char *msg)
{
	store_audit_device(dev, "iface-refused", NULL, msg);
}

void
gw_identity_event(struct device *dev)
{
	json_t *d = device_json(dev);

	json_object_set_new(d, "old_hash", json_string(dev->core->old_hash));
	gw_emit("identity-change", d);
}

/* ---- identity ---------------------------------------------------------- */

/* The gateway holds the device's claim, probed, at the exporter. */
static bool
device_claim_held(const struct device *dev)
{
	return dev->up != NULL && (dev->up->state == UP_IDLE ||
	    dev->up->state == UP_RELAYING);
}

/* The identity as the policy and the database see it: the probe's. */
void
device_identity(const struct device *dev, struct usbgw_identity *id)
{
	int i;

	memset(id, 0, sizeof(*id));
	usbgw_strlcpy(id->exporter, dev->exp->name, sizeof(id->exporter));
	usbgw_strlcpy(id->exporter_busid, dev->up_busid,
	    sizeof(id->exporter_busid));
	usbgw_strlcpy(id->busid, dev->busid, sizeof(id->busid));
	id->vid = dev->ident.vid;
	id->pid = dev->ident.pid;
	id->bcd_device = dev->ident.bcd;
	id->dev_class = dev->ident.dclass;
	id->dev_subclass = dev->ident.dsubclass;
	id->dev_protocol = dev->ident.dprotocol;
	id->speed = dev->up != NULL ? dev->up->rec.speed : dev->core->listed.speed;
	id->n_ifaces = dev->nintf;
	for (i = 0; i < dev->nintf && i < USBGW_IFACE_MAX; i++) {
		id->ifaces[i].cls = dev->intf[i].bInterfaceClass;
		id->ifaces[i].subcls = dev->intf[i].bInterfaceSubClass;
		id->ifaces[i].proto = dev->intf[i].bInterfaceProtocol;
	}
	usbgw_strlcpy(id->manufacturer, dev->ident.manufacturer,
	    sizeof(id->manufacturer));
	usbgw_strlcpy(id->product, dev->ident.product, sizeof(id->product));
	usbgw_strlcpy(id->serial, dev->ident.serial, sizeof(id->serial));
	usbgw_strlcpy(id->hash, dev->ident.hash, sizeof(id->hash));
}

/*
 * The interfaces (alternate setting 0) of configuration `value` (0: the
 * first) in the probed descriptors.  -1 if the probe read no such
 * configuration.
 */
static int
ident_interfaces(const struct gw_ident *id, uint8_t value,
    struct usbip_intf *out, uint8_t *n)
{
	struct desc_config c;
	const char *why;
	int i, k;

	*n = 0;
	for (i = 0; i < GW_MAX_CONFIGS; i++) {
		if (id->config[i] == NULL ||
		    desc_parse_config(id->config[i], id->config_len[i], &c,
		    &why) == -1 || (c.value != value && !(value == 0 && i == 0)))
			continue;
		for (k = 0; k < c.nalt && *n < USBIP_MAX_INTERFACES; k++) {
			if (c.alt[k].alt != 0)
				continue;
			out[*n].bInterfaceClass = c.alt[k].cls;
			out[*n].bInterfaceSubClass = c.alt[k].subcls;
			out[*n].bInterfaceProtocol = c.alt[k].proto;
			(*n)++;
		}
		return 0;
	}
	return -1;
}

/*
 * The device's interfaces are those of configuration `value` in the
 * probed descriptors, and nothing else.  -1, and no interfaces, if the
 * probe read no such configuration.
 */
int
device_load_interfaces(struct device *dev, uint8_t value)
{
	return ident_interfaces(&dev->ident, value, dev->intf, &dev->nintf);
}

/*
 * The identity is in question: what the exporter claims differs from
 * what the probe read.  Audited and announced once per claim; the
 * device is blocked until an operator decides on it (approve or deny
 * with its identity acknowledges this claim).
 */
static void
device_anomaly(struct device *dev, const char *what)
{
	json_t *d;

	if (strcmp(dev->core->anomaly, what) == 0)
		return;
	usbgw_strlcpy(dev->core->anomaly, what, sizeof(dev->core->anomaly));
	dev->core->anomaly_ack[0] = '\0';
	log_warnx("%s: identity anomaly: %s", dev->busid, what);
	store_audit_device(dev, "identity-anomaly", NULL, what);
	d = device_json(dev);
	json_object_set_new(d, "anomaly", json_string(what));
	gw_emit("identity-anomaly", d);
	if (dev->probed && dev->state != DEV_GONE)
		device_eval(dev, NULL, NULL);
}

/*
 * A vhci host was shown a descriptor that is not the one the probe read
 * (relay.c): the device shows different things to different readers.
 * Raised again at every occurrence, even one acknowledged before: each
 * is audited, and the device is blocked until an operator looks again.
 */
void
device_descriptor_anomaly(struct device *dev, const char *what)
{
	dev->core->anomaly[0] = '\0';
	device_anomaly(dev, what);
}

/*
 * The exporter's device list says what the device is (vid:pid, class,
 * configurations, the interfaces of its current configuration).  Only
 * the probe decides; a list that differs from the probe is an anomaly.
 *
 * A list record is compared with one probe: the claim held when it
 * arrives, or else the next claim's (device_claimed() passes NULL: the
 * record kept, if no claim has seen it yet).  A record older than the
 * last claim may describe a device swapped out since; the new claim's
 * probe identifies what is there now.
 */
void
device_listed(struct device *dev, const struct usbip_dev *rec,
    const struct usbip_intf *intf)
{
	const struct gw_ident *id = &dev->ident;
	struct usbip_intf probed[USBIP_MAX_INTERFACES];
	uint8_t nprobed;
	char what[160];
	int i;

	if (intf != NULL) {
		dev->core->listed = *rec;
		memcpy(dev->core->listed_intf, intf, sizeof(intf[0]) *
		    (rec->bNumInterfaces < USBIP_MAX_INTERFACES ?
		    rec->bNumInterfaces : USBIP_MAX_INTERFACES));
		dev->core->listed_fresh = true;
	} else if (!dev->core->listed_fresh)
		return;		/* seen by an earlier claim already */
	if (!dev->probed || !device_claim_held(dev))
		return;		/* kept for the next claim */
	dev->core->listed_fresh = false;
	what[0] = '\0';
	if (rec->idVendor != id->vid || rec->idProduct != id->pid)
		snprintf(what, sizeof(what), "the exporter lists %04x:%04x, "
		    "the device says %04x:%04x", rec->idVendor, rec->idProduct,
		    id->vid, id->pid);
	else if (rec->bDeviceClass != id->dclass ||
	    rec->bDeviceSubClass != id->dsubclass ||
	    rec->bDeviceProtocol != id->dprotocol)
		snprintf(what, sizeof(what), "the exporter lists class "
		    "%02x:%02x:%02x, the device says %02x:%02x:%02x",
		    rec->bDeviceClass, rec->bDeviceSubClass,
		    rec->bDeviceProtocol, id->dclass, id->dsubclass,
		    id->dprotocol);
	else if (rec->bNumConfigurations != id->nconfigs_dev)
		snprintf(what, sizeof(what), "the exporter lists %u "
		    "configurations, the device has %u",
		    rec->bNumConfigurations, id->nconfigs_dev);
	if (what[0] == '\0' && rec->bNumInterfaces != 0) {
		/* the listed interfaces are those of its current configuration */
		if (ident_interfaces(id, rec->bConfigurationValue, probed,
		    &nprobed) == -1)
			snprintf(what, sizeof(what), "the exporter lists "
			    "configuration %u, which the device does not have",
			    rec->bConfigurationValue);
		else if (nprobed != rec->bNumInterfaces)
			snprintf(what, sizeof(what), "the exporter lists %u "
			    "interfaces, the device has %u",
			    rec->bNumInterfaces, nprobed);
		for (i = 0; what[0] == '\0' && i < nprobed; i++) {
			const struct usbip_intf *l = &dev->core->listed_intf[i];
			const struct usbip_intf *p = &probed[i];

			if (l->bInterfaceClass != p->bInterfaceClass ||
			    l->bInterfaceSubClass != p->bInterfaceSubClass ||
			    l->bInterfaceProtocol != p->bInterfaceProtocol)
				snprintf(what, sizeof(what), "the exporter lists "
				    "interface %d as %02x:%02x:%02x, the device "
				    "says %02x:%02x:%02x", i,
				    l->bInterfaceClass, l->bInterfaceSubClass,
				    l->bInterfaceProtocol, p->bInterfaceClass,
				    p->bInterfaceSubClass, p->bInterfaceProtocol);
		}
	}
	if (what[0] != '\0')
		device_anomaly(dev, what);
}

/*
 * The exporter's import reply (the claim, or a reclaim) describes the
 * device too; its configuration must be one the probe read.
 */
bool
device_import_reply_ok(struct device *dev, const struct usbip_dev *rec)
{
	struct usbip_intf probed[USBIP_MAX_INTERFACES];
	uint8_t nprobed;
	char what[160];

	if (!dev->probed)
		return true;
	what[0] = '\0';
	if (rec->idVendor != dev->ident.vid || rec->idProduct != dev->ident.pid)
		snprintf(what, sizeof(what), "the import reply says %04x:%04x, "
		    "the device says %04x:%04x", rec->idVendor, rec->idProduct,
		    dev->ident.vid, dev->ident.pid);
	else if (rec->bConfigurationValue != 0 &&
	    ident_interfaces(&dev->ident, rec->bConfigurationValue, probed,
	    &nprobed) == -1)
		snprintf(what, sizeof(what), "the import reply names "
		    "configuration %u, which the device does not have",
		    rec->bConfigurationValue);
	if (what[0] == '\0')
		return true;
	device_anomaly(dev, what);
	return false;
}

/*
 * The vhci host selected another configuration: the interface set the
 * policy decided on may have changed, so decide again (this may tear
 * the attachment down).
 */
void
device_config_changed(struct device *dev)
{
	char msg[64];

	if (device_load_interfaces(dev, dev->cur_config) == -1)
		snprintf(msg, sizeof(msg), "configuration %u selected, which "
		    "the probe did not read", dev->cur_config);
	else
		snprintf(msg, sizeof(msg), "configuration %u selected",
		    dev->cur_config);
	store_audit_device(dev, "set-configuration", NULL, msg);
	device_eval(dev, NULL, msg);
}

/* ---- endpoint table -------------------------------------------------- */

/*
 * Load the endpoints of configuration `value`, interface alternate
 * settings as given (alt[i] for interface number i; all 0 after
 * SET_CONFIGURATION), each with its interface number (the relay's
 * per-interface check).  Unknown value: no endpoint but ep0.
 */
static void
load_eps(struct device *dev, uint8_t value, const uint8_t *alts)
{
	dev->cur_config = value;
	(void)ifmap_load(dev->ep_in, dev->ep_out, &dev->ident, value, alts);
}

void
device_load_endpoints(struct device *dev, uint8_t value)
{
	memset(dev->alt, 0, sizeof(dev->alt));
	load_eps(dev, value, dev->alt);
}

/* SET_INTERFACE succeeded: interface intf now uses alternate setting alt. */
void
device_set_interface(struct device *dev, uint8_t intf, uint8_t alt)
{
	if (intf >= IFMAP_NINTF)
		return;
	dev->alt[intf] = alt;
	load_eps(dev, dev->cur_config, dev->alt);
}

/* The device left: tear down its sessions and mark it gone. */
void
device_gone(struct device *dev, const char *why)
{
	if (dev->state == DEV_GONE) {
		device_release(dev, why);
		return;
	}
	/*
	 * What held for this presence ends with it: an operator's --once
	 * grant (the database ends it with the presence), a revoke, and a
	 * reject rule's release.  A device that comes back is decided afresh.
	 */
	device_presence_ended(dev);
	/* the state first: an attachment then ends as attached -> gone */
	device_set_state(dev, DEV_GONE, NULL, why);
	device_release(dev, why);
	notify_decided(dev);	/* held imports are answered */
}

/* ---- the decision ------------------------------------------------------- */

/* The asking host as decide() sees it. */
void
device_host(const struct dsession *ds, struct host_id *h)
{
	memset(h, 0, sizeof(*h));
	h->addr = ds->addr;
	h->name = ds->host_name[0] != '\0' ? ds->host_name : NULL;
}

static bool
anomaly_open(const struct device *dev)
{
	/* a device with configurations nobody read stays refused */
	if (dev->ident.nconfigs_dev > GW_MAX_CONFIGS)
		return true;
	return dev->core->anomaly[0] != '\0' &&
	    strcmp(dev->core->anomaly, dev->core->anomaly_ack) != 0;
}

/* The one place that feeds decide(). */
void
device_decide_tiers(struct device *dev, struct policy *admin,
    struct policy *op, const struct usbgw_identity *id,
    const struct dsession *ds, struct decision *d)
{
	struct usbgw_identity own;
	struct iface_verdict ifs[DECISION_IFACE_MAX];
	struct decision_in in;
	struct host_id h;

	if (id == NULL) {
		device_identity(dev, &own);
		id = &own;
	}
	memset(&in, 0, sizeof(in));
	in.id = id;
	in.admin = admin;
	in.operator = op;
	in.approvals = dev->core->appr;
	in.napprovals = dev->core->nappr;
	in.revoked = dev->core->revoked;
	in.anomaly = anomaly_open(dev);
	in.anomaly_why = dev->core->anomaly;
	if (ds != NULL) {
		device_host(ds, &h);
		in.host = &h;
	}
	in.now = device_now();
	in.ifaces = ifs;
	in.nifaces = gw_ident_ifaces(&dev->ident, ifs, nitems(ifs));
	in.allowed_matches = device_allowed_matches;
	in.arg = dev;
	decide(&in, d);
}

void
device_decide_identity(struct device *dev, const struct usbgw_identity *id,
    const struct dsession *ds, struct decision *d)
{
	struct policy *admin, *op;

	tiers_get(&admin, &op);
	device_decide_tiers(dev, admin, op, id, ds, d);
}

void
device_decide(struct device *dev, const struct dsession *ds,
    struct decision *d)
{
	device_decide_identity(dev, NULL, ds, d);
}

/* May this session's host use the device? */
bool
device_allowed_for(struct device *dev, const struct dsession *ds)
{
	struct decision d;

	device_decide(dev, ds, &d);
	return d.verdict == VERDICT_ALLOW;
}

/* Approvals that expired leave memory and end in the database. */
static void
approvals_prune(struct device *dev)
{
	int64_t now = device_now();
	unsigned i, n = 0;

	for (i = 0; i < dev->core->nappr; i++) {
		if (dev->core->appr[i].expires_at != 0 &&
		    dev->core->appr[i].expires_at <= now) {
			store_approval_end(dev, dev->core->appr[i].id, "expired", NULL);
			continue;
		}
		dev->core->appr[n++] = dev->core->appr[i];
	}
	dev->core->nappr = n;
}

static void
recheck_arm(struct device *dev, int64_t when)
{
	struct timeval tv;
	int64_t now = device_now();

	evtimer_del(dev->core->recheck_ev);
	if (when == RULE_NEVER)
		return;
	tv.tv_sec = when > now ? (time_t)(when - now) : 0;
	tv.tv_usec = 0;
	evtimer_add(dev->core->recheck_ev, &tv);
}

/* A time condition or an approval's expiry: decide again. */
static void
device_recheck_cb(evutil_socket_t fd, short what, void *arg)
{
	struct device *dev = arg;

	device_eval(dev, NULL, NULL);
}

/* The state a verdict puts a device in (standing, for no host). */
enum dev_state
device_verdict_state(enum verdict v)
{
	switch (v) {
	case VERDICT_ALLOW:
		return DEV_AUTHORIZED;
	case VERDICT_BLOCK:
	case VERDICT_REJECT:
		return DEV_BLOCKED;
	case VERDICT_PENDING:
	default:
		return DEV_PENDING;
	}
}

/*
 * A reject rule keeps the claim: with stock usbipd a released device is
 * importable by anybody who reaches the exporter, so the gateway holds
 * it, blocked, and hides it from vhci hosts (server.c answers ST_NODEV).
 * What changes is audited: "reject" when a reject rule starts to decide
 * the device, "unreject" when none does any more.
 */
static void
device_reject_note(struct device *dev, const struct decision *d)
{
	bool now = d->verdict == VERDICT_REJECT;

	if (now == dev->core->rejected)
		return;
	dev->core->rejected = now;
	if (now)
		store_audit_device(dev, "reject", &d->actor, dev->up != NULL ?
		    "reject rule: claim kept, the device is hidden from vhci "
		    "hosts" : "reject rule: the device is hidden from vhci "
		    "hosts (no claim open now; it is claimed again as usual)");
	else
		store_audit_device(dev, "unreject", &d->actor,
		    "no reject rule decides the device any more");
}

/* The standing decision rejects the device: vhci hosts do not see it. */
bool
device_rejected(const struct device *dev)
{
	return dev->core->rejected;
}

/*
 * Decide the device's standing state (decide(), host NULL) and apply
 * it; an attached host must pass with its own identity too, or it is
 * torn down.  who/reason: the actor and words to credit (an operator's
 * command, an admin's policy change); NULL credits what decided (a rule,
 * an approval, system).  cause_rule: the rule whose change caused this
 * (a rule added, removed or moved), for the audit row when no rule
 * decided.
 */
void
device_eval(struct device *dev, const struct actor *who, const char *reason)
{
	device_reeval(dev, who, reason, 0);
}

void
device_reeval(struct device *dev, const struct actor *who, const char *reason,
    int64_t cause_rule)
{
	struct decision d, dh;
	enum dev_state st;
	int64_t recheck;

	/* between release and reclaim (up == NULL) the state still counts */
	if (dev->dead || dev->state == DEV_GONE || !dev->probed)
		return;
	approvals_prune(dev);
	device_decide(dev, NULL, &d);
	dev->core->decision = d;
	dev->rule_id = d.rule_id;
	recheck = d.recheck_at;
	st = device_verdict_state(d.verdict);
	if (who == NULL)
		who = &d.actor;
	if (reason == NULL)
		reason = d.why;
	/*
	 * Attached: what keeps the attachment is its host's own decision (a
	 * rule with to-host may allow that host while the standing state,
	 * decided for no host, is pending).
	 */
	if (dev->state == DEV_ATTACHED && dev->ds != NULL) {
		device_decide(dev, dev->ds, &dh);
		if (dh.verdict == VERDICT_ALLOW) {
			dev->core->decision = dh;
			dev->rule_id = dh.rule_id;
			recheck_arm(dev, dh.recheck_at < recheck ?
			    dh.recheck_at : recheck);
			notify_decided(dev);
			return;
		}
		if (st == DEV_AUTHORIZED) {
			/* allowed for others, not this host: the row first */
			device_set_state_rule(dev, DEV_AUTHORIZED, who ==
			    &d.actor ? &dh.actor : who, dh.why,
			    dh.rule_id != 0 ? dh.rule_id : cause_rule);
			device_cut(dev, dh.why);
			recheck_arm(dev, recheck);
			notify_decided(dev);
			return;
		}
		if (who == &d.actor) {
			/* the host's decision says why it is cut off */
			who = &dh.actor;
			reason = dh.why;
			d.rule_id = dh.rule_id != 0 ? dh.rule_id : d.rule_id;
		}
	} else if (st == DEV_AUTHORIZED && dev->state == DEV_ATTACHED) {
		recheck_arm(dev, recheck);	/* no session (local mode) */
		notify_decided(dev);
		return;
	}
	/*
	 * The store is unavailable (protocol.md 4.6): nothing new is
	 * authorized, a device that was not authorized stays pending (what
	 * is authorized stays so; store-loss decides about attachments).
	 */
	if (st == DEV_AUTHORIZED && dev->state != DEV_AUTHORIZED &&
	    dev->state != DEV_ATTACHED && store_degraded()) {
		st = DEV_PENDING;
		who = &sys_actor;
		reason = STORE_UNAVAILABLE ": decided again when it returns";
		d.rule_id = 0;
		cause_rule = 0;
	}
	recheck_arm(dev, recheck);
	device_set_state_rule(dev, st, who, reason, d.rule_id != 0 ?
	    d.rule_id : cause_rule);
	/* The vhci host sees the disconnect now, after the state says why. */
	device_cut(dev, reason);
	device_reject_note(dev, &d);
	notify_decided(dev);
}

/*
 * The device left its exporter: what held for this presence ends with
 * it (an operator's --once decision, a revoke, a reject rule's release,
 * an anomaly): a device that comes back is probed and decided afresh.
 */
void
device_presence_ended(struct device *dev)
{
	unsigned i, n = 0;

	for (i = 0; i < dev->core->nappr; i++)
		if (dev->core->appr[i].scope != SCOPE_ONCE)
			dev->core->appr[n++] = dev->core->appr[i];
	dev->core->nappr = n;
	dev->core->rejected = false;
	dev->core->revoked = false;
	dev->core->anomaly[0] = dev->core->anomaly_ack[0] = '\0';
	evtimer_del(dev->core->recheck_ev);
}

/*
 * Re-decide every present device (tears down what no longer passes):
 * after any change of the rules.  changes (may be NULL) gets one
 * {busid, from, to, rule_id} per device whose state changed.
 */
void
device_reeval_all(const struct actor *who, const char *why,
    int64_t cause_rule, json_t *changes)
{
	struct exporter *exp;
	struct device *dev;

	TAILQ_FOREACH(exp, &gw->exporters, entry)
		TAILQ_FOREACH(dev, &exp->devices, entry) {
			enum dev_state before = dev->state;

			if (dev->dead || dev->state == DEV_GONE ||
			    dev->state == DEV_PROBING)
				continue;
			device_reeval(dev, who, why, cause_rule);
			if (dev->state != before && changes != NULL)
				json_array_append_new(changes, json_pack(
				    "{s:s, s:s, s:s, s:I}", "busid",
				    dev->busid, "from",
				    dev_state_name(before), "to",
				    dev_state_name(dev->state),
				    "rule_id", (json_int_t)dev->rule_id));
		}
}

/* The present device with database id id, NULL if none here. */
struct device *
device_by_id(int64_t id)
{
	struct exporter *exp;
	struct device *dev;

	if (id <= 0)
		return NULL;
	TAILQ_FOREACH(exp, &gw->exporters, entry)
		TAILQ_FOREACH(dev, &exp->devices, entry)
			if (dev->id == id && !dev->dead &&
			    dev->state != DEV_GONE)
				return dev;
	return NULL;
}

/*
 * Another gateway wrote an operator decision about dev (the change feed,
 * protocol.md 4.3): its approvals and revocation are read again from the
 * store and it is decided again, as after a decision at our own socket.
 * A read that fails leaves no approval (fail closed).
 */
void
device_reload_decisions(struct device *dev, const struct actor *who,
    const char *why)
{
	if (dev->state == DEV_PROBING)
		return;		/* the probe's end loads them */
	dev->core->revoked = store_revoked(dev);
	dev->core->nappr = store_approvals_load(dev->id, dev->presence_id,
	    dev->core->appr, GW_MAX_APPROVALS);
	device_eval(dev, who, why);
}

/* device_reload_decisions() for every present device. */
void
device_reload_all_decisions(const struct actor *who, const char *why)
{
	struct exporter *exp;
	struct device *dev, *next;

	TAILQ_FOREACH(exp, &gw->exporters, entry)
		for (dev = TAILQ_FIRST(&exp->devices); dev != NULL; dev = next) {
			next = TAILQ_NEXT(dev, entry);
			if (!dev->dead && dev->state != DEV_GONE)
				device_reload_decisions(dev, who, why);
		}
}

/*
 * Cut every vhci host attached through this gateway (store-loss = stop,
 * after store-grace): the devices stay claimed (a claim released at a
 * stock usbipd would make the device free for anyone) and their state
 * goes back to what a new decision says, which while the store is
 * unavailable cannot newly authorize anything.  The number cut.
 */
unsigned
device_cut_all(const char *why)
{
	struct exporter *exp;
	struct device *dev;
	unsigned n = 0;

	TAILQ_FOREACH(exp, &gw->exporters, entry)
		TAILQ_FOREACH(dev, &exp->devices, entry) {
			if (dev->dead || dev->state != DEV_ATTACHED ||
			    dev->ds == NULL)
				continue;
			device_set_state(dev, DEV_AUTHORIZED, &sys_actor, why);
			device_cut(dev, why);
			notify_decided(dev);
			n++;
		}
	return n;
}

/*
 * The store is back (protocol.md 4.6): what memory holds is made to agree
 * with it, then every device is decided again.  A device probed while
 * the store was away has no row (id 0): it is recorded now; every other
 * one takes its approvals and revocation as the store has them (a
 * decision that committed before the loss applies again, one that did
 * not never applied; a failover that lost commits loses them here too,
 * failing closed).  Attached devices keep their attachment if the new
 * decision allows it for their host.
 */
void
device_reconcile_all(const struct actor *who, const char *why)
{
	struct exporter *exp;
	struct device *dev;

	TAILQ_FOREACH(exp, &gw->exporters, entry)
		TAILQ_FOREACH(dev, &exp->devices, entry) {
			if (dev->dead || dev->state == DEV_GONE ||
			    !dev->probed)
				continue;
			if (dev->id == 0)
				device_identified(dev);
			else
				dev->core->nappr = store_approvals_load(dev->id,
				    dev->presence_id, dev->core->appr,
				    GW_MAX_APPROVALS);
		}
	device_reeval_all(who, why, 0, NULL);
}

/* ---- operator decisions -------------------------------------------------- */

/*
 * The identity an operator's command names: the device id, or a prefix
 * (8 or more hex digits) of its identity digest (show: "identity").
 * Refused if the device now at that busid is another identity.
 */
enum ctl_err
device_check_identity(struct device *dev, const char *identity, char *err,
    size_t errlen)
{
	size_t n = strlen(identity), i;
	bool digits = n > 0 && n <= 18, hex = n >= 8 && n <= 64, match;

	for (i = 0; i < n; i++) {
		if (identity[i] < '0' || identity[i] > '9')
			digits = false;
		if (!((identity[i] >= '0' && identity[i] <= '9') ||
		    (identity[i] >= 'a' && identity[i] <= 'f') ||
		    (identity[i] >= 'A' && identity[i] <= 'F')))
			hex = false;
	}
	if (!digits && !hex) {
		snprintf(err, errlen, "argument identity: expected a device id "
		    "or at least 8 hex digits of its identity digest");
		return CTL_E_USAGE;
	}
	/* a long run of digits is a digest prefix if it is not the id */
	match = (digits && strtoll(identity, NULL, 10) == dev->id) ||
	    (hex && strncasecmp(identity, dev->ident.identity, n) == 0);
	if (match)
		return CTL_OK;
	snprintf(err, errlen, "%s is now device %lld (%04x:%04x \"%.40s\" "
	    "serial \"%.40s\", identity %.16s), not %.64s: look again before "
	    "deciding", dev->busid, (long long)dev->id, dev->ident.vid,
	    dev->ident.pid, dev->ident.product, dev->ident.serial,
	    dev->ident.identity, identity);
	return CTL_E_REFUSED;
}

/* The first admin rule that blocks or rejects the device (standing). */
static int64_t
admin_blocking_rule(struct device *dev)
{
	struct policy *admin, *op;
	struct policy_decision pd;
	struct usbgw_identity id;
	struct usbgw_context ctx;

	tiers_get(&admin, &op);
	if (admin == NULL)
		return 0;
	device_identity(dev, &id);
	memset(&ctx, 0, sizeof(ctx));
	ctx.allowed_matches = device_allowed_matches;
	ctx.arg = dev;
	policy_evaluate(admin, &id, &ctx, device_now(), &pd);
	if (pd.rule_id != 0 && (pd.target == RULE_BLOCK ||
	    pd.target == RULE_REJECT))
		return pd.rule_id;
	return 0;
}

/* End every active decision of the device (a deny, a revoke). */
static void
approvals_end_all(struct device *dev, bool allows_only, const char *why,
    const struct actor *who)
{
	unsigned i, n = 0;

	for (i = 0; i < dev->core->nappr; i++) {
		if (allows_only && dev->core->appr[i].deny) {
			dev->core->appr[n++] = dev->core->appr[i];
			continue;
		}
		store_approval_end(dev, dev->core->appr[i].id, why, who);
	}
	dev->core->nappr = n;
}

static void
approval_keep(struct device *dev, const struct approval *a)
{
	unsigned i, n = 0;

	/* a new decision for the same host supersedes the older one */
	for (i = 0; i < dev->core->nappr; i++) {
		const struct approval *p = &dev->core->appr[i];

		if (p->to.kind == a->to.kind && strcmp(p->to.name,
		    a->to.name) == 0 && memcmp(&p->to.addr, &a->to.addr,
		    sizeof(a->to.addr)) == 0 && p->to.prefix == a->to.prefix) {
			store_approval_end(dev, p->id, "superseded", &a->by);
			continue;
		}
		dev->core->appr[n++] = *p;
	}
	dev->core->nappr = n;
	if (dev->core->nappr == GW_MAX_APPROVALS) {
		/* the oldest gives way */
		store_approval_end(dev, dev->core->appr[0].id, "superseded", &a->by);
		memmove(&dev->core->appr[0], &dev->core->appr[1],
		    sizeof(dev->core->appr[0]) * --dev->core->nappr);
	}
	dev->core->appr[dev->core->nappr++] = *a;
}

/*
 * A denial whose record failed: the approvals it ended stay ended, and
 * it holds in memory for this presence, so that nothing fails open.
 */
static enum ctl_err
deny_unrecorded(struct device *dev, struct approval *a,
    const struct actor *who)
{
	a->id = 0;
	a->scope = SCOPE_ONCE;
	approval_keep(dev, a);
	device_eval(dev, who, "denied (not recorded: database error)");
	return CTL_E_INTERNAL;
}

/*
 * A permanent approval writes a rule that ranks ahead of the rule that
 * matched: it must keep the interface verdicts the device has (protocol.md
 * part 3, "Approvals"), so they are written into it as an explicit
 * interface-policy, one allow per allowed (configuration, interface,
 * class), "" when no interface-policy applies.  -1 (err) when they do not
 * fit a rule: the operator approves for a time instead.
 */
#define IPOL_TEXT_MAX	(64 + RULE_IFACE_RULES_MAX * 48)
static int
ipol_text(struct device *dev, char *buf, size_t len, char *err, size_t errlen)
{
	struct decision d;
	const struct iface_verdict *v, *w;
	size_t i, j, n = 0;
	char one[64];

	buf[0] = '\0';
	device_decide(dev, NULL, &d);
	if (!d.per_iface)
		return 0;
	usbgw_strlcpy(buf, "interface-policy block {", len);
	for (i = 0; i < d.niface; i++) {
		v = &d.iface[i];
		if (!v->allow)
			continue;
		for (j = 0; j < i; j++) {	/* another alternate setting */
			w = &d.iface[j];
			if (w->allow && w->config == v->config &&
			    w->number == v->number && w->cls == v->cls &&
			    w->subcls == v->subcls && w->proto == v->proto)
				break;
		}
		if (j < i)
			continue;
		if (++n > RULE_IFACE_RULES_MAX) {
			snprintf(err, errlen, "%s: its interface-policy allows "
			    "more than %d interfaces, too many to write into a "
			    "permanent rule; approve for a time instead",
			    dev->busid, RULE_IFACE_RULES_MAX);
			return -1;
		}
		snprintf(one, sizeof(one), " allow %02x:%02x:%02x index %u "
		    "configuration %u", v->cls, v->subcls, v->proto, v->number,
		    v->config);
		usbgw_strlcat(buf, one, len);
	}
	/* nothing allowed: a rule that allows no interface */
	usbgw_strlcat(buf, n == 0 ? " block *:*:* }" : " }", len);
	return 0;
}

/*
 * approve and deny.  Precedence (decision.h): a deny ends every active
 * approval, every scope and every host, and outranks the operator's
 * own approvals; an approval cannot outrank an admin rule that blocks
 * the device unless an admin overrides it explicitly.
 */
enum ctl_err
device_approve(struct device *dev, bool deny, const struct approve_opts *o,
    const struct actor *who, char *err, size_t errlen)
{
	struct approval a;
	int64_t blocking, rule_id = 0;
	char msg[600];

	if (dev->state == DEV_GONE) {
		snprintf(err, errlen, "%s is gone", dev->busid);
		return CTL_E_REFUSED;
	}
	if (!dev->probed) {
		snprintf(err, errlen, "%s is still being probed", dev->busid);
		return CTL_E_REFUSED;
	}
	if (o->override && (deny || who->priv < PRIV_ADMIN)) {
		snprintf(err, errlen, deny ? "--override applies to approve" :
		    "--override requires the admin privilege; %s holds %s",
		    who->name, ctl_priv_name(who->priv));
		return deny ? CTL_E_USAGE : CTL_E_REFUSED;
	}
	memset(&a, 0, sizeof(a));
	if (host_match_parse(o->to_host, gw->host_names, &a.to, err,
	    errlen) == -1)
		return CTL_E_USAGE;
	if (deny && a.to.kind != HOST_ANY) {
		snprintf(err, errlen, "a denial is for every host: --to "
		    "applies to approve");
		return CTL_E_USAGE;
	}
	/*
	 * A permanent decision replaces the device's rule: an admin's (an
	 * override, an admin's permanent denial) only by an admin.
	 */
	if (o->scope == SCOPE_PERMANENT && who->priv < PRIV_ADMIN &&
	    (blocking = tiers_device_rule_admin(dev->id)) != 0) {
		snprintf(err, errlen, "rule %lld, an admin's permanent decision, "
		    "decides %s; only an admin may replace it",
		    (long long)blocking, dev->busid);
		return CTL_E_REFUSED;
	}
	if (!deny && !o->override && (blocking = admin_blocking_rule(dev))) {
		snprintf(err, errlen, "admin rule %lld blocks %s; an approval "
		    "cannot outrank it (an admin may approve with --override)",
		    (long long)blocking, dev->busid);
		return CTL_E_REFUSED;
	}
	a.deny = deny;
	a.override = o->override;
	a.scope = o->scope == SCOPE_PERMANENT ? SCOPE_ONCE : o->scope;
	a.expires_at = o->expires_at;
	a.by = *who;

	if (deny)
		approvals_end_all(dev, false, "denied", who);
	if (o->scope == SCOPE_PERMANENT) {
		struct usbgw_identity id;
		char ipol[IPOL_TEXT_MAX];

		if (!deny && ipol_text(dev, ipol, sizeof(ipol), err,
		    errlen) == -1)
			return CTL_E_REFUSED;
		device_identity(dev, &id);
		/* an admin's override or denial ranks with the admin rules */
		rule_id = tiers_device_rule(&id, dev->id, deny, o->override ||
		    (deny && who->priv >= PRIV_ADMIN), o->to_host,
		    !deny && ipol[0] != '\0' ? ipol : NULL, who, o->message,
		    err, errlen);
		if (rule_id == -1)
			return deny ? deny_unrecorded(dev, &a, who) :
			    CTL_E_INTERNAL;
	}
	/* a permanent one is recorded too: its rule outlives the presence */
	a.id = store_approval_add(dev, &a, o->scope, rule_id, o->message);
	if (a.id <= 0 && o->scope != SCOPE_PERMANENT) {
		snprintf(err, errlen, "database: cannot record the decision%s",
		    deny ? "; the denial holds until the device leaves" : "");
		return deny ? deny_unrecorded(dev, &a, who) : CTL_E_INTERNAL;
	}
	if (o->scope != SCOPE_PERMANENT)
		approval_keep(dev, &a);
	store_set_revoked(dev, false);
	dev->core->revoked = false;
	/* the operator looked at this identity: the anomaly is acknowledged */
	usbgw_strlcpy(dev->core->anomaly_ack, dev->core->anomaly, sizeof(dev->core->anomaly_ack));
	snprintf(msg, sizeof(msg), "%s%s%s", deny ? "denied" : "approved",
	    o->message[0] ? ": " : "", o->message);
	if (dev->up == NULL && !device_reclaim_pending(dev))
		device_claim(dev);	/* between a failed claim and its retry */
	device_eval(dev, who, msg);
	/* a rule was written: it may match other devices too */
	if (rule_id != 0)
		device_reeval_all(who, msg, rule_id, NULL);
	return CTL_OK;
}

/*
 * revoke: the approvals end, and the device stays pending for the rest
 * of this presence whatever the rules allow (a restart keeps that).
 */
enum ctl_err
device_revoke(struct device *dev, const struct actor *who,
    const char *message, char *err, size_t errlen)
{
	char msg[600];

	if (dev->state != DEV_AUTHORIZED && dev->state != DEV_ATTACHED) {
		snprintf(err, errlen, "%s is %s, not authorized", dev->busid,
		    dev_state_name(dev->state));
		return CTL_E_REFUSED;
	}
	snprintf(msg, sizeof(msg), "revoked%s%s", message ? ": " : "",
	    message ? message : "");
	approvals_end_all(dev, true, msg, who);
	dev->core->revoked = true;
	store_set_revoked(dev, true);
	device_eval(dev, who, msg);
	return CTL_OK;
}

/* {"per_interface", "interfaces"} of decision d of dev (policy test). */
json_t *
device_iface_json(const struct device *dev, const struct decision *d)
{
	struct jtext b;

	jtext_init(&b, DEVICE_JSON_MAX);
	jt_open(&b, '{');
	iface_decisions_text(dev, d, &b);
	jt_close(&b, '}');
	return text_to_json(&b);
}

/* The device's active decisions and the standing decision, for show. */
json_t *
device_decisions_json(const struct device *dev)
{
	struct jtext b;

	jtext_init(&b, DEVICE_JSON_MAX);
	jt_open(&b, '{');
	decisions_text(dev, &b);
	jt_close(&b, '}');
	return text_to_json(&b);
}
