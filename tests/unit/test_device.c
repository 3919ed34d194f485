/*
 * device.c, the decision core, driven without a daemon: a fake store
 * (approvals rows, state rows, identities, revocations kept in memory),
 * fake rule tiers (the two tiers built here with rule_parse), a fake
 * clock, and no loop ever run.  The real device.c (with its events'
 * data, device_json), decision.c, policy.c, rule.c, exporter.c and
 * loop.c run; store.c, events.c (gw_emit), tiers.c and upstream.c are
 * replaced by the block of fakes below, and server.c is not linked (its
 * device observer is faked), so nothing here touches SQLite or a socket.
 * The test reads the device's decision inputs only as the modules above
 * device.c may (device_decision, device_decisions_json), never
 * dev->core.
 *
 * decide() itself is pinned by test_decision.c; this file pins what
 * device.c does around it: which inputs it feeds, what it records, who
 * it credits, when it decides again, and the identity checks.
 */
#include <sys/socket.h>

#include <stdbool.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "base/desc.h"
#include "base/identity.h"
#include "base/log.h"
#include "base/util.h"
#include "core/device.h"
#include "core/events.h"
#include "core/exporter.h"
#include "core/loop.h"
#include "core/relay.h"
#include "core/session.h"
#include "core/store.h"
#include "core/tiers.h"
#include "core/upstream.h"
#include "policy/decision.h"
#include "policy/policy.h"
#include "policy/rule.h"
#include "tap.h"

#define DAY	((int64_t)1699920000)	/* Tue 2023-11-14 00:00:00 UTC */
#define T(h, m)	(DAY + (h) * 3600 + (m) * 60)
#define NOW	T(12, 0)

/* ---- the fake clock ------------------------------------------------------ */

static int64_t	fake_now = NOW;

static int64_t
fake_clock(void)
{
	return fake_now;
}

/* ====================================================================== *
 * FAKES.  What the objects linked here (device.o, exporter.o, loop.o and
 * layer 0) expect from the layers this test replaces:
 *
 *   store.c     (layer 2)  persistence and audit: in memory below
 *   events.c    (layer 3)  gw_emit: events recorded below
 *   tiers.c     (layer 4)  the two rule tiers, built by the test
 *   upstream.c  (layer 5)  a claim is an object, never a connection
 *   server.c    (layer 9)  not linked: its device observer's cut() (what
 *                          dsession_close does to the device) is
 *                          fake_server below, registered by main() as
 *                          server_init() registers server.c's
 *
 * Every exported symbol of store.o, events.o, tiers.o and upstream.o
 * that anything linked here references is defined below, and nothing
 * linked here references server.o, so the linker never takes those
 * objects from libusbgw.a ("multiple definition" means one was missed).
 * When a function moves between modules, adapt this block only.
 * ====================================================================== */

#define FK_MAX_APPR	128
#define FK_MAX_STATE	512
#define FK_MAX_EMIT	512	/* a run emits ~120 */
#define FK_MAX_REVOKED	32

struct fk_appr {
	int64_t			 id, device_id, presence_id;
	bool			 deny, override;
	enum approve_scope	 scope;		/* the row's: permanent too */
	int64_t			 expires_at, rule_id;
	char			 to[HOST_NAME_MAX_LEN + 1];
	char			 by[64];
	char			 message[512];
	bool			 ended;
	char			 ended_by[64];
	char			 end_reason[600];
};

struct fk_state {
	int64_t			 device_id;
	enum dev_state		 old, new;
	enum actor_kind		 kind;
	char			 actor[64];
	char			 reason[600];
	int64_t			 rule_id;
};

struct fk_emit {
	char			 type[32];
	char			 busid[USBIP_BUSID_SIZE];
	char			 anomaly[160];
	char			 old_hash[65];
};

struct fk_rule_call {
	int64_t			 device_id;
	int64_t			 rule_id;
	bool			 deny, admin;
	char			 to[256];
	char			 by[64];
};

static struct {
	/* store.c */
	struct fk_appr		 appr[FK_MAX_APPR];
	int			 nappr;
	bool			 appr_fail;	/* store_approval_add fails */
	int			 end_calls, end_bad;	/* bad: unknown/ended row */
	struct fk_state		 state[FK_MAX_STATE];
	int			 nstate;
	struct store_identity	 ident;		/* next store_device_identity */
	int			 ident_rc;
	int			 ident_calls;
	char			 ident_hash[65];	/* the identity it was given */
	struct { int64_t id, presence; } revoked[FK_MAX_REVOKED];
	int			 nrevoked;
	int			 set_revoked_calls;
	bool			 set_revoked_last;
	int			 anomaly_audits;	/* "identity-anomaly" rows */
	int			 attachment_ends;
	/* tiers.c */
	struct policy		*admin, *op;
	int64_t			 next_rule_id;
	bool			 rule_fail;
	struct fk_rule_call	 rule_calls[16];
	int			 nrule_calls;
	/* events.c */
	struct fk_emit		 emit[FK_MAX_EMIT];
	int			 nemit;
	/* upstream.c, server.c */
	int			 up_new, up_closed, up_urgent;
	int			 ds_closed;
	char			 ds_why[200];
} fk;

/* -- store.c -- */

void
store_device_state(struct device *dev, enum dev_state old,
    const struct actor *who, const char *reason, int64_t rule_id)
{
	struct fk_state *s;

	if (fk.nstate == FK_MAX_STATE)
		fatalx("fake store: too many state rows");
	s = &fk.state[fk.nstate++];
	memset(s, 0, sizeof(*s));
	s->device_id = dev->id;
	s->old = old;
	s->new = dev->state;
	s->kind = who != NULL ? who->kind : ACTOR_SYSTEM;
	usbgw_strlcpy(s->actor, who != NULL ? who->name : "system",
	    sizeof(s->actor));
	usbgw_strlcpy(s->reason, reason != NULL ? reason : "",
	    sizeof(s->reason));
	s->rule_id = rule_id;
}

static bool
fk_is_revoked(int64_t id, int64_t presence)
{
	int i;

	for (i = 0; i < fk.nrevoked; i++)
		if (fk.revoked[i].id == id)
			return presence != 0 && fk.revoked[i].presence == presence;
	return false;
}

int
store_device_identity(const struct device *dev,
    const struct usbgw_identity *id, struct store_identity *si)
{
	fk.ident_calls++;
	usbgw_strlcpy(fk.ident_hash, id->hash, sizeof(fk.ident_hash));
	*si = fk.ident;
	if (fk.ident_rc == -1) {
		memset(si, 0, sizeof(*si));
		return -1;
	}
	si->revoked = fk_is_revoked(si->id, si->presence_id);
	return 0;
}

/* As db_approvals_list: active, unexpired, once only for this presence. */
size_t
store_approvals_load(int64_t device_id, int64_t presence_id,
    struct approval *out, size_t max)
{
	char err[160];
	size_t n = 0;
	int i;

	for (i = 0; i < fk.nappr && n < max; i++) {
		const struct fk_appr *r = &fk.appr[i];
		struct approval *p = &out[n];

		if (r->device_id != device_id || r->ended ||
		    (r->expires_at != 0 && r->expires_at <= device_now()) ||
		    (r->scope == SCOPE_ONCE && r->presence_id != presence_id) ||
		    r->scope == SCOPE_PERMANENT)
			continue;
		memset(p, 0, sizeof(*p));
		if (host_match_parse(r->to, true, &p->to, err, sizeof(err)) == -1)
			fatalx("fake store: row %lld: %s", (long long)r->id, err);
		p->id = r->id;
		p->deny = r->deny;
		p->override = r->override;
		p->scope = r->scope;
		p->expires_at = r->expires_at;
		p->by.kind = ACTOR_OPERATOR;
		usbgw_strlcpy(p->by.name, r->by, sizeof(p->by.name));
		n++;
	}
	return n;
}

int64_t
store_approval_add(const struct device *dev, const struct approval *p,
    enum approve_scope row_scope, int64_t rule_id, const char *message)
{
	struct fk_appr *r;

	if (fk.appr_fail)
		return -1;
	if (fk.nappr == FK_MAX_APPR)
		fatalx("fake store: too many approvals");
	r = &fk.appr[fk.nappr++];
	memset(r, 0, sizeof(*r));
	r->id = 1000 + fk.nappr;
	r->device_id = dev->id;
	r->presence_id = dev->presence_id;
	r->deny = p->deny;
	r->override = p->override;
	r->scope = row_scope;
	r->expires_at = p->expires_at;
	r->rule_id = rule_id;
	host_match_format(&p->to, r->to, sizeof(r->to));
	usbgw_strlcpy(r->by, p->by.name, sizeof(r->by));
	usbgw_strlcpy(r->message, message, sizeof(r->message));
	return r->id;
}

static struct fk_appr *
fk_appr_find(int64_t id)
{
	int i;

	for (i = 0; i < fk.nappr; i++)
		if (fk.appr[i].id == id)
			return &fk.appr[i];
	return NULL;
}

void
store_approval_end(const struct device *dev, int64_t id, const char *why,
    const struct actor *by)
{
	struct fk_appr *r = fk_appr_find(id);

	fk.end_calls++;
	if (r == NULL || r->ended) {
		fk.end_bad++;
		return;
	}
	r->ended = true;
	usbgw_strlcpy(r->ended_by, by != NULL ? by->name : "system",
	    sizeof(r->ended_by));
	usbgw_strlcpy(r->end_reason, why, sizeof(r->end_reason));
}

/* The store's health (protocol.md 4.6): a test may make it degraded. */
static bool fake_store_down;

bool
store_degraded(void)
{
	return fake_store_down;
}

void
store_set_revoked(const struct device *dev, bool on)
{
	int i;

	fk.set_revoked_calls++;
	fk.set_revoked_last = on;
	for (i = 0; i < fk.nrevoked; i++)
		if (fk.revoked[i].id == dev->id)
			break;
	if (i == fk.nrevoked) {
		if (fk.nrevoked == FK_MAX_REVOKED)
			fatalx("fake store: too many revocations");
		fk.nrevoked++;
	}
	fk.revoked[i].id = dev->id;
	fk.revoked[i].presence = on ? dev->presence_id : 0;
}

bool
store_revoked(const struct device *dev)
{
	int i;

	for (i = 0; i < fk.nrevoked; i++)
		if (fk.revoked[i].id == dev->id)
			return dev->presence_id != 0 &&
			    fk.revoked[i].presence == dev->presence_id;
	return false;
}

void
store_attachment_end(struct device *dev, const char *why)
{
	fk.attachment_ends++;
}

void
store_audit_device(struct device *dev, const char *action,
    const struct actor *who, const char *detail)
{
	if (strcmp(action, "identity-anomaly") == 0)
		fk.anomaly_audits++;
}

/* exporter.c's (its status and audit rows) */
void
store_exporter_status(struct exporter *x)
{
}

void
store_exporter_seen(struct exporter *x)
{
}

void
store_exporter_error(struct exporter *x)
{
}

int
store_exporter_settle(int64_t exporter_id,
    int (*present)(void *, const char *), void *arg, const char *why)
{
	return 0;
}

void
store_audit(const char *action, const struct actor *who, const char *object,
    const char *detail)
{
}

/* -- tiers.c -- */

void
tiers_get(struct policy **admin, struct policy **op)
{
	*admin = fk.admin;
	*op = fk.op;
}

/* Like the real one: the rule from the identity, first among the admin
 * rules for an override, else last among the operator rules. */
int64_t
tiers_device_rule(const struct usbgw_identity *id, int64_t device_id,
    bool deny, bool admin, const char *to_host, const char *ipol,
    const struct actor *who, const char *comment, char *err, size_t errlen)
{
	struct fk_rule_call *c = &fk.rule_calls[fk.nrule_calls++ % 16];
	struct rule *r;
	int64_t rid;

	memset(c, 0, sizeof(*c));
	c->device_id = device_id;
	c->deny = deny;
	c->admin = admin;
	usbgw_strlcpy(c->to, to_host, sizeof(c->to));
	usbgw_strlcpy(c->by, who->name, sizeof(c->by));
	if (fk.rule_fail) {
		snprintf(err, errlen, "database: fake failure");
		return -1;
	}
	r = rule_from_identity(id, deny ? RULE_BLOCK : RULE_ALLOW,
	    RULE_FROM_ID_EXPORTER, to_host[0] ? to_host : NULL);
	if (r == NULL) {
		snprintf(err, errlen, "cannot make a rule");
		return -1;
	}
	rid = fk.next_rule_id++;
	c->rule_id = rid;
	if (admin)
		policy_insert(fk.admin, 0, rid, r);
	else
		policy_append(fk.op, rid, r);
	return rid;
}

/* The device's rule if an admin wrote it: the last rule call for the
 * device, when it was an admin's. */
int64_t
tiers_device_rule_admin(int64_t device_id)
{
	int i;

	for (i = (int)fk.nrule_calls - 1; i >= 0 && i >= (int)fk.nrule_calls - 16;
	    i--) {
		struct fk_rule_call *c = &fk.rule_calls[i % 16];

		if (c->device_id == device_id)
			return c->admin ? c->rule_id : 0;
	}
	return 0;
}

/* -- events.c: device.c and exporter.c build the data, gw_emit takes it -- */

void
gw_emit(const char *type, json_t *data)
{
	struct fk_emit *e;
	const char *a;

	if (fk.nemit == FK_MAX_EMIT)
		fatalx("fake events: too many");
	e = &fk.emit[fk.nemit++];
	memset(e, 0, sizeof(*e));
	usbgw_strlcpy(e->type, type, sizeof(e->type));
	if ((a = json_string_value(json_object_get(data, "busid"))) != NULL)
		usbgw_strlcpy(e->busid, a, sizeof(e->busid));
	if ((a = json_string_value(json_object_get(data, "anomaly"))) != NULL)
		usbgw_strlcpy(e->anomaly, a, sizeof(e->anomaly));
	if ((a = json_string_value(json_object_get(data, "old_hash"))) != NULL)
		usbgw_strlcpy(e->old_hash, a, sizeof(e->old_hash));
	json_decref(data);
}

/* -- upstream.c: a claim is an object, never a connection -- */

struct upstream *
upstream_new(struct device *dev, const struct upstream_ops *ops, bool urgent)
{
	struct upstream *up = xcalloc(1, sizeof(*up));

	fk.up_new++;
	fk.up_urgent += urgent;
	up->dev = dev;
	up->ops = ops;
	up->state = UP_CONNECTING;
	return up;
}

void
upstream_close(struct upstream *up)
{
	if (up == NULL)
		return;
	fk.up_closed++;
	free(up);
}

/* -- server.c: its device observer's cut(), what dsession_close does -- */

static void
fake_server_cut(struct device *dev, const char *why)
{
	struct dsession *ds = dev->ds;

	if (ds == NULL || ds->dead)
		return;
	ds->dead = true;
	fk.ds_closed++;
	usbgw_strlcpy(fk.ds_why, why, sizeof(fk.ds_why));
	if (ds->state == DS_RELAY) {
		dev->ds = NULL;
		device_detached(dev, why);
	} else
		dev->ds = NULL;
	ds->dev = NULL;
	ds->state = DS_CLOSING;
}

static const struct device_observer fake_server = {
	.cut = fake_server_cut,
};

/* ====================================================================== *
 * END OF FAKES
 * ====================================================================== */

/* ---- fake-store queries ---------------------------------------------------- */

static int
fk_emitted(const char *type)
{
	int i, n = 0;

	for (i = 0; i < fk.nemit; i++)
		if (strcmp(fk.emit[i].type, type) == 0)
			n++;
	return n;
}

static const struct fk_emit *
fk_last_emit(const char *type)
{
	int i;

	for (i = fk.nemit - 1; i >= 0; i--)
		if (strcmp(fk.emit[i].type, type) == 0)
			return &fk.emit[i];
	return NULL;
}

static const struct fk_state *
fk_last_state(void)
{
	return fk.nstate > 0 ? &fk.state[fk.nstate - 1] : NULL;
}

static struct fk_appr *
fk_last_appr(void)
{
	return fk.nappr > 0 ? &fk.appr[fk.nappr - 1] : NULL;
}

/* Active (not ended) rows of a device. */
static int
fk_active(int64_t device_id)
{
	int i, n = 0;

	for (i = 0; i < fk.nappr; i++)
		if (fk.appr[i].device_id == device_id && !fk.appr[i].ended)
			n++;
	return n;
}

/* ---- what device.c shows of a device's decision inputs ------------------- *
 *
 * The inputs (approvals, revocation, anomaly, the recheck timer) are
 * device.c's alone (struct device_core).  The test reads them as the
 * daemon's other modules and its operators do: device_decision(),
 * device_decisions_json(), device_decide() (a decision computed, not
 * applied) and the event base the timers are on.
 */

/* The active approvals and denials in memory (show's "approvals"). */
static unsigned
shown_nappr(const struct device *dev)
{
	json_t *j = device_decisions_json(dev);
	unsigned n = (unsigned)json_array_size(json_object_get(j, "approvals"));

	json_decref(j);
	return n;
}

/* Is the i-th of them a denial? */
static bool
shown_deny(const struct device *dev, size_t i)
{
	json_t *j = device_decisions_json(dev);
	const char *d = json_string_value(json_object_get(json_array_get(
	    json_object_get(j, "approvals"), i), "decision"));
	bool deny = d != NULL && strcmp(d, "deny") == 0;

	json_decref(j);
	return deny;
}

/* The open (unacknowledged) identity anomaly, or "". */
static const char *
shown_anomaly(const struct device *dev)
{
	static char buf[160];
	json_t *j = device_decisions_json(dev);
	const char *a = json_string_value(json_object_get(j, "anomaly"));

	usbgw_strlcpy(buf, a != NULL ? a : "", sizeof(buf));
	json_decref(j);
	return buf;
}

/*
 * Is the device revoked for this presence?  Asked of decide() with the
 * device's inputs now (nothing applied): revocation decides unless an
 * anomaly, an admin block or a denial outranks it, which no case that
 * asks this has.
 */
static bool
revoked(struct device *dev)
{
	struct decision d;

	device_decide(dev, NULL, &d);
	return d.by == BY_REVOCATION;
}

struct dev_timers {
	const struct device	*dev;
	int			 n;
};

static int
count_dev_timer(const struct event_base *b, const struct event *ev,
    void *arg)
{
	struct dev_timers *t = arg;

	if (event_get_callback_arg(ev) == t->dev)
		t->n++;
	return 0;
}

/*
 * Is the recheck timer armed?  A device has two timers, the reclaim
 * (device_reclaim_pending) and the recheck: the device's pending events
 * in the loop, less the reclaim.
 */
static bool
recheck_armed(const struct device *dev)
{
	struct dev_timers t = { dev, 0 };

	event_base_foreach_event(gw->base, count_dev_timer, &t);
	return t.n - (device_reclaim_pending(dev) ? 1 : 0) > 0;
}

/* ---- the rule tiers ------------------------------------------------------ */

/* A tier from rule texts (ids first, first + 1, ...), NULL-terminated. */
static struct policy *
tier(int64_t first, const char *const *texts)
{
	struct policy *p = policy_new();
	struct rule_error e;
	struct rule *r;
	int i;

	for (i = 0; texts != NULL && texts[i] != NULL; i++) {
		if ((r = rule_parse(texts[i], &e)) == NULL)
			fatalx("rule \"%s\": %s", texts[i], e.msg);
		if (policy_append(p, first + i, r) == -1)
			fatalx("policy_append");
	}
	return p;
}

static void
set_tiers(const char *const *admin, const char *const *op)
{
	policy_free(fk.admin);
	policy_free(fk.op);
	fk.admin = tier(1, admin);
	fk.op = tier(101, op);
	fk.next_rule_id = 201;
}

#define RULES(...)	((const char *const []){ __VA_ARGS__, NULL })

/* ---- devices -------------------------------------------------------------- */

/* What a device is: its descriptors (one configuration, one interface). */
struct tmpl {
	uint16_t	 vid, pid, bcd;
	uint8_t		 icls, isub, iproto;
	uint8_t		 cfgval;
	uint8_t		 ep[2];		/* endpoint addresses, 0: none */
	uint8_t		 eptype;
	const char	*manufacturer, *product, *serial, *hash;
};
/* config_desc: a vendor interface 1 lists the same endpoints (issue 17 F1) */
static bool twin_desc;

#define X7(s)	s s s s s s s
static const struct tmpl kbd = {
	0x046d, 0xc31c, 0x6400, 0x03, 0x01, 0x01, 1, { 0x81, 0 },
	USB_XFER_INT, "Logitech", "USB Keyboard", "",
	"c0ffee00" X7("11111111"),
};
static const struct tmpl stick = {
	0x0781, 0x5567, 0x0100, 0x08, 0x06, 0x50, 1, { 0x81, 0x02 },
	USB_XFER_BULK, "SanDisk", "Cruzer Blade", "4C530001230117114543",
	"5eed5eed" X7("22222222"),
};

static const struct tmpl twin_stick = {
	0x0781, 0x5568, 0x0100, 0x08, 0x06, 0x50, 1, { 0x81, 0x02 },
	USB_XFER_BULK, "SanDisk", "Cruzer Twin", "4C530001230117114544",
	"5eed5eed" X7("33333333"),
};

static struct event_base	*base;
static struct exporter		*tc17;

/* The configuration descriptor: config, interface, endpoints. */
static uint16_t
config_desc(const struct tmpl *t, uint8_t *p)
{
	uint16_t n = 0;
	int i;

	p[n++] = 9; p[n++] = USB_DT_CONFIG; p[n++] = 0; p[n++] = 0;
	p[n++] = 1; p[n++] = t->cfgval; p[n++] = 0; p[n++] = 0x80;
	p[n++] = 50;
	p[n++] = 9; p[n++] = USB_DT_INTERFACE; p[n++] = 0; p[n++] = 0;
	p[n++] = t->ep[1] ? 2 : 1; p[n++] = t->icls; p[n++] = t->isub;
	p[n++] = t->iproto; p[n++] = 0;
	for (i = 0; i < 2 && t->ep[i] != 0; i++) {
		p[n++] = 7; p[n++] = USB_DT_ENDPOINT; p[n++] = t->ep[i];
		p[n++] = t->eptype; p[n++] = t->eptype == USB_XFER_BULK ?
		    0x00 : 8; p[n++] = t->eptype == USB_XFER_BULK ? 2 : 0;
		p[n++] = 10;
	}
	if (twin_desc) {
		p[4] = 2;
		p[n++] = 9; p[n++] = USB_DT_INTERFACE; p[n++] = 1; p[n++] = 0;
		p[n++] = t->ep[1] ? 2 : 1; p[n++] = 0xff; p[n++] = 0;
		p[n++] = 0; p[n++] = 0;
		for (i = 0; i < 2 && t->ep[i] != 0; i++) {
			p[n++] = 7; p[n++] = USB_DT_ENDPOINT;
			p[n++] = t->ep[i]; p[n++] = t->eptype;
			p[n++] = 0x00; p[n++] = 2; p[n++] = 10;
		}
	}
	p[2] = (uint8_t)n;
	return n;
}

/* What the probe would have read (upstream.c fills this). */
static void
ident_fill(struct device *dev, const struct tmpl *t)
{
	struct gw_ident *id = &dev->ident;
	uint8_t cfg[64];
	int i;

	for (i = 0; i < GW_MAX_CONFIGS; i++) {
		free(id->config[i]);
		id->config[i] = NULL;
		id->config_len[i] = 0;
	}
	id->vid = t->vid;
	id->pid = t->pid;
	id->bcd = t->bcd;
	id->dclass = id->dsubclass = id->dprotocol = 0;
	id->nconfigs = id->nconfigs_dev = 1;
	id->speed = USBIP_SPEED_FULL;
	memset(id->dev_desc, 0, sizeof(id->dev_desc));
	id->dev_desc[0] = 18;
	id->dev_desc[1] = USB_DT_DEVICE;
	id->dev_desc[8] = t->vid & 0xff;
	id->dev_desc[9] = t->vid >> 8;
	id->dev_desc[10] = t->pid & 0xff;
	id->dev_desc[11] = t->pid >> 8;
	id->dev_desc[17] = 1;
	id->config_len[0] = config_desc(t, cfg);
	id->config[0] = xmalloc(id->config_len[0]);
	memcpy(id->config[0], cfg, id->config_len[0]);
	usbgw_strlcpy(id->manufacturer, t->manufacturer,
	    sizeof(id->manufacturer));
	usbgw_strlcpy(id->product, t->product, sizeof(id->product));
	usbgw_strlcpy(id->serial, t->serial, sizeof(id->serial));
	usbgw_strlcpy(id->hash, t->hash, sizeof(id->hash));
}

/* The exporter's honest record of the device (list and import reply). */
static void
record(const struct tmpl *t, const char *busid, struct usbip_dev *rec,
    struct usbip_intf *intf)
{
	memset(rec, 0, sizeof(*rec));
	snprintf(rec->path, sizeof(rec->path), "/sys/devices/usb1/%s", busid);
	usbgw_strlcpy(rec->busid, busid, sizeof(rec->busid));
	rec->busnum = 1;
	rec->devnum = 2;
	rec->speed = USBIP_SPEED_FULL;
	rec->idVendor = t->vid;
	rec->idProduct = t->pid;
	rec->bcdDevice = t->bcd;
	rec->bConfigurationValue = t->cfgval;
	rec->bNumConfigurations = 1;
	rec->bNumInterfaces = 1;
	if (intf != NULL) {
		memset(intf, 0, sizeof(intf[0]) * USBIP_MAX_INTERFACES);
		intf[0].bInterfaceClass = t->icls;
		intf[0].bInterfaceSubClass = t->isub;
		intf[0].bInterfaceProtocol = t->iproto;
	}
}

/* A device the exporter lists (as exp_devlist does on its first list). */
static struct device *
mkdev(const char *up_busid, const struct tmpl *t)
{
	struct usbip_intf intf[USBIP_MAX_INTERFACES];
	struct usbip_dev rec;
	struct device *dev;

	record(t, up_busid, &rec, intf);
	dev = device_new(tc17, &rec);
	device_listed(dev, &rec, intf);
	return dev;
}

/*
 * The claim and its probe, as upstream.c ends them: the identity read,
 * the claim idle, then device_claimed().  The fake store reports the
 * identity's row id, presence and a previous identity's row (old_id).
 * reply_cfg: the import reply's bConfigurationValue (-1: the device's).
 */
static void
claim_probe(struct device *dev, const struct tmpl *t, int64_t id,
    int64_t presence, int64_t old_id, int reply_cfg)
{
	if (dev->up == NULL)
		device_claim(dev);
	if (dev->up == NULL)
		fatalx("%s: no claim", dev->busid);
	ident_fill(dev, t);
	record(t, dev->up_busid, &dev->up->rec, NULL);
	if (reply_cfg >= 0)
		dev->up->rec.bConfigurationValue = (uint8_t)reply_cfg;
	dev->up->state = UP_IDLE;
	memset(&fk.ident, 0, sizeof(fk.ident));
	fk.ident.id = id;
	fk.ident.presence_id = presence;
	fk.ident.old_id = old_id;
	if (old_id != 0)
		snprintf(fk.ident.old_hash, sizeof(fk.ident.old_hash),
		    "old-%lld", (long long)old_id);	/* names the old row */
	dev->probed = true;
	device_claimed(dev);
}

static void
devfree(struct device *dev)
{
	TAILQ_REMOVE(&tc17->devices, dev, entry);
	upstream_close(dev->up);
	dev->up = NULL;
	device_free(dev);
}

/*
 * Is an exporter's list record still waiting for a probe to compare it
 * with (device_listed)?  Asked as device_claimed() asks, with the claim
 * held: a record that lies about vid:pid would be compared now (an
 * anomaly) if one were waiting; once the claim's probe has seen the
 * record, nothing is compared until the list says something new.
 */
static bool
list_record_waiting(struct device *dev)
{
	struct usbip_dev lie;
	int n0 = fk_emitted("identity-anomaly");

	if (dev->up == NULL || dev->up->state != UP_IDLE)
		fatalx("%s: list_record_waiting without a claim", dev->busid);
	record(&kbd, dev->up_busid, &lie, NULL);
	lie.idVendor = 0xdead;
	lie.idProduct = 0xbeef;
	device_listed(dev, &lie, NULL);
	return fk_emitted("identity-anomaly") != n0;
}

/* ---- operators ------------------------------------------------------------ */

static struct actor
operator(const char *name, enum ctl_priv priv)
{
	struct actor a;

	memset(&a, 0, sizeof(a));
	a.kind = ACTOR_OPERATOR;
	a.uid = 1000;
	a.pid = 4242;
	usbgw_strlcpy(a.name, name, sizeof(a.name));
	a.priv = priv;
	return a;
}

static struct actor bob, carol, root;

static struct approve_opts
opts(enum approve_scope scope, int64_t expires_at, const char *to,
    bool override)
{
	struct approve_opts o;

	memset(&o, 0, sizeof(o));
	o.scope = scope;
	o.expires_at = expires_at;
	usbgw_strlcpy(o.to_host, to != NULL ? to : "", sizeof(o.to_host));
	o.override = override;
	return o;
}

static enum ctl_err
approve(struct device *dev, const struct actor *who, enum approve_scope scope,
    int64_t expires_at, const char *to, bool override)
{
	struct approve_opts o = opts(scope, expires_at, to, override);
	char err[256];

	return device_approve(dev, false, &o, who, err, sizeof(err));
}

static enum ctl_err
deny(struct device *dev, const struct actor *who, enum approve_scope scope)
{
	struct approve_opts o = opts(scope, 0, NULL, false);
	char err[256];

	return device_approve(dev, true, &o, who, err, sizeof(err));
}

/* A vhci host, as server.c knows it. */
static void
host(struct dsession *ds, const char *addr, const char *name)
{
	memset(ds, 0, sizeof(*ds));
	ds->state = DS_OP;
	usbgw_strlcpy(ds->host, addr, sizeof(ds->host));
	if (usbgw_addr_parse(addr, &ds->addr) == -1)
		fatalx("address %s", addr);
	usbgw_strlcpy(ds->host_name, name != NULL ? name : "",
	    sizeof(ds->host_name));
	ds->named = true;
}

static bool
allowed_for(struct device *dev, const char *addr, const char *name)
{
	struct dsession ds;

	host(&ds, addr, name);
	return device_allowed_for(dev, &ds);
}

/* ---- observers ------------------------------------------------------------ */

static int		 obs_decided, obs_freed;
static struct device	*obs_last, *obs_freed_dev;
static enum dev_state	 obs_state;

static void
obs_decided_cb(struct device *dev)
{
	obs_decided++;
	obs_last = dev;
	obs_state = dev->state;
}

static void
obs_freed_cb(struct device *dev)
{
	obs_freed++;
	obs_freed_dev = dev;
}

static const struct device_observer observer = {
	.decided = obs_decided_cb,
	.freed = obs_freed_cb,
};

/* ---- 1. approve once/for/until/permanent, with and without --to ---------- */

struct acase {
	const char		*name;
	enum approve_scope	 scope;
	int64_t			 expires_at;
	const char		*to;		/* NULL: any host */
	const char		*row_to;	/* the row's host limit */
	/* a host that passes and one that does not (NULL: any passes) */
	const char		*in_addr, *in_name;
	const char		*out_addr, *out_name;
	enum dev_state		 standing;
};

static const struct acase acases[] = {
	{ "once", SCOPE_ONCE, 0, NULL, "", "192.0.2.7", NULL, NULL, NULL,
	  DEV_AUTHORIZED },
	{ "for 1 h", SCOPE_FOR, NOW + 3600, NULL, "", "192.0.2.7", NULL,
	  NULL, NULL, DEV_AUTHORIZED },
	{ "until 20:00", SCOPE_UNTIL, T(20, 0), NULL, "", "192.0.2.7", NULL,
	  NULL, NULL, DEV_AUTHORIZED },
	{ "once --to address", SCOPE_ONCE, 0, "10.1.2.3", "10.1.2.3",
	  "10.1.2.3", NULL, "10.1.2.4", NULL, DEV_AUTHORIZED },
	{ "for --to CIDR", SCOPE_FOR, NOW + 600, "10.1.0.0/16",
	  "10.1.0.0/16", "10.1.200.7", NULL, "10.2.0.1", NULL,
	  DEV_AUTHORIZED },
	{ "until --to IPv6 CIDR", SCOPE_UNTIL, T(13, 0), "fd00:1::/32",
	  "fd00:1::/32", "fd00:1:2::9", NULL, "fd00:2::9", NULL,
	  DEV_AUTHORIZED },
	{ "once --to name", SCOPE_ONCE, 0, "vdi01.example.org",
	  "vdi01.example.org", "192.0.2.10", "vdi01.example.org",
	  "192.0.2.10", "vdi02.example.org", DEV_AUTHORIZED },
	{ "permanent", SCOPE_PERMANENT, 0, NULL, "", "192.0.2.7", NULL, NULL,
	  NULL, DEV_AUTHORIZED },
	/* a rule with to-host does not match the standing state
	 * (decision.h): the host alone is allowed */
	{ "permanent --to address", SCOPE_PERMANENT, 0, "10.9.9.9",
	  "10.9.9.9", "10.9.9.9", NULL, "10.9.9.8", NULL, DEV_PENDING },
};

static void
test_approve_scopes(void)
{
	char up_busid[16];
	size_t i;

	set_tiers(NULL, NULL);
	for (i = 0; i < nitems(acases); i++) {
		const struct acase *c = &acases[i];
		struct device *dev;
		const struct fk_state *s;
		struct fk_appr *r;
		int nrows = fk.nappr, nrules = fk.nrule_calls;
		unsigned nmem;

		set_tiers(NULL, NULL);	/* no rule of an earlier case */
		snprintf(up_busid, sizeof(up_busid), "1-%zu", i + 1);
		dev = mkdev(up_busid, &kbd);
		claim_probe(dev, &kbd, 100 + (int64_t)i, 500 + (int64_t)i, 0, -1);
		is_int(dev->state, DEV_PENDING, "%s: pending before", c->name);
		nmem = shown_nappr(dev);
		is_int(approve(dev, &bob, c->scope, c->expires_at, c->to, false),
		    CTL_OK, "%s: accepted", c->name);
		is_int(dev->state, c->standing, "%s: state %s", c->name,
		    dev_state_name(c->standing));
		r = fk_last_appr();
		ok(fk.nappr == nrows + 1 && r != NULL && r->device_id == dev->id,
		    "%s: one approvals row", c->name);
		if (r == NULL)
			continue;
		is_int(r->scope, c->scope, "%s: row scope", c->name);
		is_str(r->to, c->row_to, "%s: row host limit", c->name);
		is_int(r->expires_at, c->expires_at, "%s: row expiry", c->name);
		ok(!r->deny && !r->override && !r->ended && r->presence_id ==
		    500 + (int64_t)i && strcmp(r->by, "bob") == 0,
		    "%s: row allow, by bob, this presence", c->name);
		if (c->scope == SCOPE_PERMANENT) {
			const struct fk_rule_call *rc =
			    &fk.rule_calls[(fk.nrule_calls - 1) % 16];

			ok(fk.nrule_calls == nrules + 1 && !rc->deny &&
			    !rc->admin && rc->device_id == dev->id &&
			    strcmp(rc->to, c->to ? c->to : "") == 0,
			    "%s: an operator rule written", c->name);
			ok(r->rule_id >= 201 && r->rule_id == fk.next_rule_id - 1,
			    "%s: the row names its rule (%lld)", c->name,
			    (long long)r->rule_id);
			is_int(shown_nappr(dev), nmem, "%s: a rule, not an approval "
			    "in memory", c->name);
			if (c->standing == DEV_AUTHORIZED)
				ok(device_decision(dev)->by == BY_OPERATOR_RULE &&
				    device_decision(dev)->rule_id == r->rule_id,
				    "%s: decided by its rule", c->name);
		} else {
			ok(fk.nrule_calls == nrules && r->rule_id == 0,
			    "%s: no rule", c->name);
			ok(device_decision(dev)->by == BY_APPROVAL &&
			    device_decision(dev)->approval_id == r->id,
			    "%s: decided by the approval", c->name);
			is_int(device_decision(dev)->recheck_at, c->expires_at ?
			    c->expires_at : RULE_NEVER, "%s: decide again at "
			    "its expiry", c->name);
		}
		s = fk_last_state();
		if (c->standing == DEV_AUTHORIZED)
			ok(s != NULL && s->device_id == dev->id &&
			    s->old == DEV_PENDING && s->new == DEV_AUTHORIZED &&
			    s->kind == ACTOR_OPERATOR &&
			    strcmp(s->actor, "bob") == 0 &&
			    strncmp(s->reason, "approved", 8) == 0,
			    "%s: the state row credits bob (%s: %s)", c->name,
			    s ? s->actor : "-", s ? s->reason : "-");
		if (c->in_addr != NULL)
			ok(allowed_for(dev, c->in_addr, c->in_name),
			    "%s: %s%s%s may import", c->name, c->in_addr,
			    c->in_name ? " " : "", c->in_name ? c->in_name : "");
		if (c->out_addr != NULL)
			ok(!allowed_for(dev, c->out_addr, c->out_name),
			    "%s: %s%s%s may not", c->name, c->out_addr,
			    c->out_name ? " " : "",
			    c->out_name ? c->out_name : "");
		devfree(dev);
	}
	set_tiers(NULL, NULL);
}

/* Host limits that can never match are refused; names need FCrDNS. */
static void
test_approve_bad_hosts(void)
{
	struct device *dev;
	int nrows;

	set_tiers(NULL, NULL);
	dev = mkdev("2-1", &kbd);
	claim_probe(dev, &kbd, 120, 520, 0, -1);
	nrows = fk.nappr;
	is_int(approve(dev, &bob, SCOPE_ONCE, 0, "10.1.2.3/16", false),
	    CTL_E_USAGE, "--to with host bits under the prefix: usage");
	is_int(approve(dev, &bob, SCOPE_ONCE, 0, "bad_name!", false),
	    CTL_E_USAGE, "--to with a bad name: usage");
	gw->host_names = false;
	is_int(approve(dev, &bob, SCOPE_ONCE, 0, "vdi01", false), CTL_E_USAGE,
	    "--to NAME without host-names: usage");
	gw->host_names = true;
	{
		struct approve_opts o = opts(SCOPE_ONCE, 0, "10.0.0.1", false);
		char err[256];

		is_int(device_approve(dev, true, &o, &bob, err, sizeof(err)),
		    CTL_E_USAGE, "deny --to: usage (a denial is for every host)");
	}
	ok(fk.nappr == nrows && dev->state == DEV_PENDING,
	    "refused commands recorded nothing and changed nothing");
	devfree(dev);
}

/* ---- 2. deny ends every active approval ----------------------------------- */

static void
test_deny(void)
{
	struct device *dev;
	json_t *j, *a, *e;
	const struct fk_state *s;
	int first, i;
	int64_t deny_id;

	set_tiers(NULL, NULL);
	dev = mkdev("3-1", &kbd);
	claim_probe(dev, &kbd, 130, 530, 0, -1);
	first = fk.nappr;
	is_int(approve(dev, &bob, SCOPE_ONCE, 0, "10.0.0.1", false), CTL_OK,
	    "deny: approval for 10.0.0.1");
	is_int(approve(dev, &bob, SCOPE_FOR, NOW + 3600, "10.0.0.2", false),
	    CTL_OK, "deny: approval for 10.0.0.2");
	is_int(approve(dev, &root, SCOPE_UNTIL, T(23, 0), NULL, false), CTL_OK,
	    "deny: approval for any host");
	is_int(shown_nappr(dev), 3, "three approvals stand side by side");
	is_int(fk_active(dev->id), 3, "three active rows");
	is_int(dev->state, DEV_AUTHORIZED, "authorized before the denial");

	is_int(deny(dev, &carol, SCOPE_ONCE), CTL_OK, "carol denies");
	for (i = first; i < first + 3; i++) {
		const struct fk_appr *r = &fk.appr[i];

		ok(r->ended && strcmp(r->ended_by, "carol") == 0 &&
		    strcmp(r->end_reason, "denied") == 0,
		    "approval %lld (%s) ended by carol: denied", (long long)r->id,
		    r->to[0] ? r->to : "any host");
	}
	is_int(fk.end_bad, 0, "no row ended twice or unknown");
	deny_id = fk_last_appr()->id;
	ok(fk_last_appr()->deny && !fk_last_appr()->ended &&
	    fk_last_appr()->scope == SCOPE_ONCE, "the denial is a row");
	is_int(fk_active(dev->id), 1, "the denial is the only active row");
	is_int(dev->state, DEV_BLOCKED, "blocked");
	ok(device_decision(dev)->by == BY_DENIAL && device_decision(dev)->approval_id == deny_id,
	    "decided by the denial");
	s = fk_last_state();
	ok(s != NULL && s->new == DEV_BLOCKED && strcmp(s->actor, "carol") == 0 &&
	    strcmp(s->reason, "denied") == 0, "the state row credits carol");
	ok(!allowed_for(dev, "10.0.0.1", NULL) && !allowed_for(dev, "10.0.0.2",
	    NULL), "no host passes");

	/* show */
	j = device_decisions_json(dev);
	a = json_object_get(j, "approvals");
	is_int(json_array_size(a), 1, "show lists one decision");
	e = json_array_get(a, 0);
	ok(e != NULL && json_integer_value(json_object_get(e, "id")) == deny_id &&
	    strcmp(json_string_value(json_object_get(e, "decision")), "deny") == 0 &&
	    strcmp(json_string_value(json_object_get(e, "by")), "carol") == 0 &&
	    json_is_null(json_object_get(e, "to")),
	    "show lists exactly the denial");
	is_str(json_string_value(json_object_get(json_object_get(j, "decision"),
	    "by")), "denial", "show: decision by denial");
	ok(json_is_null(json_object_get(j, "anomaly")), "show: no anomaly");
	json_decref(j);

	/* an approval (any host) lifts the denial: it supersedes it */
	is_int(approve(dev, &bob, SCOPE_ONCE, 0, NULL, false), CTL_OK,
	    "approve after the denial");
	is_int(dev->state, DEV_AUTHORIZED, "authorized again");
	devfree(dev);
}

/* ---- 3. admin rules outrank approvals; --override ------------------------- */

struct rcase {
	const char		*name;
	enum approve_scope	 scope;
	int64_t			 expires_at;
	const char		*to;
};

static const struct rcase rcases[] = {
	{ "once", SCOPE_ONCE, 0, NULL },
	{ "for", SCOPE_FOR, NOW + 60, NULL },
	{ "until", SCOPE_UNTIL, T(18, 0), NULL },
	{ "permanent", SCOPE_PERMANENT, 0, NULL },
	{ "once --to", SCOPE_ONCE, 0, "10.0.0.1" },
};

static void
test_admin_block(void)
{
	struct device *dev;
	struct approve_opts o;
	const struct fk_appr *r;
	char err[256];
	int nrows, nrules;
	size_t i;

	set_tiers(RULES("block id 046d:c31c"), NULL);
	dev = mkdev("4-1", &kbd);
	claim_probe(dev, &kbd, 140, 540, 0, -1);
	ok(dev->state == DEV_BLOCKED && device_decision(dev)->by == BY_ADMIN_RULE &&
	    device_decision(dev)->rule_id == 1, "admin rule 1 blocks");
	nrows = fk.nappr;
	nrules = fk.nrule_calls;
	for (i = 0; i < nitems(rcases); i++) {
		const struct rcase *c = &rcases[i];

		o = opts(c->scope, c->expires_at, c->to, false);
		err[0] = '\0';
		is_int(device_approve(dev, false, &o, &bob, err, sizeof(err)),
		    CTL_E_REFUSED, "approve %s by an approver: refused", c->name);
		ok(strstr(err, "admin rule 1") != NULL, "... naming the rule (%s)",
		    err);
		is_int(device_approve(dev, false, &o, &root, err, sizeof(err)),
		    CTL_E_REFUSED, "approve %s by an admin without --override: "
		    "refused", c->name);
	}
	ok(fk.nappr == nrows && fk.nrule_calls == nrules && shown_nappr(dev) == 0,
	    "refused: no row, no rule, nothing in memory");
	is_int(dev->state, DEV_BLOCKED, "still blocked");

	o = opts(SCOPE_ONCE, 0, NULL, true);
	err[0] = '\0';
	is_int(device_approve(dev, false, &o, &bob, err, sizeof(err)),
	    CTL_E_REFUSED, "--override by an approver: refused");
	ok(strstr(err, "admin privilege") != NULL, "... for want of admin (%s)",
	    err);
	is_int(device_approve(dev, true, &o, &root, err, sizeof(err)),
	    CTL_E_USAGE, "deny --override: usage");
	ok(fk.nappr == nrows, "still no row");

	is_int(device_approve(dev, false, &o, &root, err, sizeof(err)), CTL_OK,
	    "--override by an admin: accepted");
	r = fk_last_appr();
	ok(fk.nappr == nrows + 1 && r->override && !r->deny &&
	    strcmp(r->by, "root") == 0, "recorded with override=1 by root");
	is_int(dev->state, DEV_AUTHORIZED, "authorized by the override");
	ok(device_decision(dev)->by == BY_APPROVAL && device_decision(dev)->approval_id == r->id &&
	    strstr(device_decision(dev)->why, "overridden") != NULL,
	    "decided by the override (%s)", device_decision(dev)->why);
	ok(strcmp(fk_last_state()->actor, "root") == 0,
	    "the state row credits root");

	/* a permanent override writes its rule first among the admin rules */
	o = opts(SCOPE_PERMANENT, 0, NULL, true);
	is_int(device_approve(dev, false, &o, &root, err, sizeof(err)), CTL_OK,
	    "--permanent --override by an admin: accepted");
	r = fk_last_appr();
	ok(fk.nrule_calls == nrules + 1 &&
	    fk.rule_calls[(fk.nrule_calls - 1) % 16].admin &&
	    r->scope == SCOPE_PERMANENT && r->override &&
	    r->rule_id == fk.next_rule_id - 1,
	    "its rule goes to the admin tier, the row names it");
	devfree(dev);

	/* reject: blocked and hidden, the claim kept (issue 12, item 11) */
	set_tiers(RULES("reject id 046d:c31c"), NULL);
	dev = mkdev("4-2", &kbd);
	claim_probe(dev, &kbd, 141, 541, 0, -1);
	{
		struct upstream *held = dev->up;

		ok(dev->state == DEV_BLOCKED &&
		    device_decision(dev)->verdict == VERDICT_REJECT &&
		    device_rejected(dev) && held != NULL,
		    "reject: blocked, hidden from vhci hosts, claim kept");
		is_int(approve(dev, &bob, SCOPE_ONCE, 0, NULL, false),
		    CTL_E_REFUSED, "approve of a rejected device: refused");
		ok(dev->up == held, "... the same claim held");
		o = opts(SCOPE_ONCE, 0, NULL, true);
		is_int(device_approve(dev, false, &o, &root, err, sizeof(err)),
		    CTL_OK, "override of a reject");
		ok(dev->up == held && !device_rejected(dev),
		    "... on the same claim, no longer hidden");
	}
	ok(dev->up != NULL && dev->state == DEV_AUTHORIZED, "authorized");
	devfree(dev);
	set_tiers(NULL, NULL);
}

/* ---- 4. revoke ------------------------------------------------------------- */

static void
test_revoke(void)
{
	const struct fk_appr *den, *ovr;
	struct device *dev;
	char err[256];
	int first, i;

	set_tiers(RULES("allow id 046d:c31c"), NULL);
	dev = mkdev("5-1", &kbd);
	claim_probe(dev, &kbd, 150, 550, 0, -1);
	ok(dev->state == DEV_AUTHORIZED && device_decision(dev)->by == BY_ADMIN_RULE,
	    "revoke: authorized by the admin allow");
	first = fk.nappr;
	approve(dev, &bob, SCOPE_ONCE, 0, "10.0.0.1", false);
	approve(dev, &bob, SCOPE_FOR, NOW + 3600, NULL, false);
	is_int(shown_nappr(dev), 2, "two approvals");

	is_int(device_revoke(dev, &carol, "lost laptop", err, sizeof(err)),
	    CTL_OK, "carol revokes");
	for (i = first; i < first + 2; i++) {
		const struct fk_appr *r = &fk.appr[i];

		ok(r->ended && strcmp(r->ended_by, "carol") == 0 &&
		    strncmp(r->end_reason, "revoked", 7) == 0,
		    "approval %lld ended by carol (%s)", (long long)r->id,
		    r->end_reason);
	}
	is_int(shown_nappr(dev), 0, "no approval in memory");
	ok(fk.set_revoked_calls > 0 && fk.set_revoked_last &&
	    fk_is_revoked(dev->id, 550), "the revocation is persisted");
	ok(dev->state == DEV_PENDING && device_decision(dev)->by == BY_REVOCATION,
	    "pending by revocation, though an admin rule allows it");
	ok(strcmp(fk_last_state()->actor, "carol") == 0 &&
	    strncmp(fk_last_state()->reason, "revoked", 7) == 0,
	    "the state row credits carol");
	device_eval(dev, NULL, NULL);
	is_int(dev->state, DEV_PENDING, "decided again: still pending");
	is_int(device_revoke(dev, &carol, NULL, err, sizeof(err)),
	    CTL_E_REFUSED, "revoke of a pending device: refused");

	/* the claim again in the same presence (a restart): still revoked */
	device_up_closed(dev, "exporter restarted");
	claim_probe(dev, &kbd, 150, 550, 0, -1);
	ok(revoked(dev) && dev->state == DEV_PENDING,
	    "reclaimed in the same presence: still revoked");

	/* the presence ends: so does the revocation */
	device_presence_ended(dev);
	ok(!revoked(dev), "presence ended: revocation cleared");
	device_eval(dev, NULL, NULL);
	ok(dev->state == DEV_AUTHORIZED && device_decision(dev)->by == BY_ADMIN_RULE,
	    "authorized by the admin rule again");
	device_up_closed(dev, "unplugged");
	claim_probe(dev, &kbd, 150, 551, 0, -1);
	ok(!revoked(dev) && dev->state == DEV_AUTHORIZED,
	    "a new presence is not revoked");

	/* revoke ends approvals, not denials (it makes stricter only) */
	set_tiers(RULES("block id 046d:c31c"), NULL);
	deny(dev, &carol, SCOPE_ONCE);
	den = fk_last_appr();
	{
		struct approve_opts o = opts(SCOPE_ONCE, 0, "10.0.0.1", true);

		is_int(device_approve(dev, false, &o, &root, err, sizeof(err)),
		    CTL_OK, "an admin's override for 10.0.0.1 despite the denial");
	}
	ovr = fk_last_appr();
	is_int(dev->state, DEV_AUTHORIZED, "authorized by the override");
	is_int(device_revoke(dev, &carol, NULL, err, sizeof(err)), CTL_OK,
	    "carol revokes");
	ok(ovr->ended && strcmp(ovr->end_reason, "revoked") == 0 && !den->ended,
	    "the override ended, the denial stands");
	ok(shown_nappr(dev) == 1 && shown_deny(dev, 0) && dev->state == DEV_BLOCKED,
	    "blocked (the admin rule, the denial)");
	set_tiers(RULES("allow id 046d:c31c"), NULL);
	device_presence_ended(dev);
	device_up_closed(dev, "unplugged");
	claim_probe(dev, &kbd, 150, 552, 0, -1);
	is_int(dev->state, DEV_AUTHORIZED, "a new presence: authorized");

	/* an approval lifts a revocation */
	device_revoke(dev, &carol, NULL, err, sizeof(err));
	is_int(dev->state, DEV_PENDING, "revoked again");
	is_int(approve(dev, &bob, SCOPE_ONCE, 0, NULL, false), CTL_OK,
	    "approved after the revocation");
	ok(!revoked(dev) && !fk.set_revoked_last && !fk_is_revoked(dev->id, 552)
	    && dev->state == DEV_AUTHORIZED, "revocation lifted and persisted");
	devfree(dev);
	set_tiers(NULL, NULL);
}

/* ---- 5. expiry on the fake clock ------------------------------------------ */

static void
test_expiry(void)
{
	struct device *dev;
	struct fk_appr *r;

	set_tiers(NULL, NULL);
	fake_now = NOW;
	dev = mkdev("6-1", &kbd);
	claim_probe(dev, &kbd, 160, 560, 0, -1);
	is_int(approve(dev, &bob, SCOPE_FOR, NOW + 60, NULL, false), CTL_OK,
	    "approve --for 60");
	r = fk_last_appr();
	is_int(dev->state, DEV_AUTHORIZED, "authorized");
	is_int(device_decision(dev)->recheck_at, NOW + 60, "decide again at its expiry");
	ok(recheck_armed(dev), "the recheck timer is armed");

	fake_now = NOW + 59;
	device_eval(dev, NULL, NULL);
	is_int(dev->state, DEV_AUTHORIZED, "59 s: still authorized");
	ok(!r->ended && shown_nappr(dev) == 1, "59 s: the approval stands");

	fake_now = NOW + 60;
	device_eval(dev, NULL, NULL);
	is_int(dev->state, DEV_PENDING, "60 s: pending");
	ok(r->ended && strcmp(r->end_reason, "expired") == 0 &&
	    strcmp(r->ended_by, "system") == 0,
	    "the approval ended: expired, by the system");
	is_int(shown_nappr(dev), 0, "no approval in memory");
	is_int(device_decision(dev)->recheck_at, RULE_NEVER, "nothing to decide again");
	ok(!recheck_armed(dev), "no recheck timer");
	ok(fk_last_state()->kind == ACTOR_SYSTEM &&
	    fk_last_state()->old == DEV_AUTHORIZED, "the state row: system");
	device_eval(dev, NULL, NULL);
	is_int(fk.end_bad, 0, "an expired approval is ended once");

	/* an expired row is not loaded again */
	device_up_closed(dev, "exporter restarted");
	claim_probe(dev, &kbd, 160, 560, 0, -1);
	ok(shown_nappr(dev) == 0 && dev->state == DEV_PENDING,
	    "reclaimed: the expired approval is not back");
	devfree(dev);
	fake_now = NOW;
}

/* ---- 6. time windows ------------------------------------------------------- */

static void
test_windows(void)
{
	struct device *dev;

	fake_now = NOW;
	set_tiers(RULES("allow id 046d:c31c if localtime(08:00-18:00)"), NULL);
	dev = mkdev("7-1", &kbd);
	claim_probe(dev, &kbd, 170, 570, 0, -1);
	ok(dev->state == DEV_AUTHORIZED && device_decision(dev)->by == BY_ADMIN_RULE &&
	    device_decision(dev)->rule_id == 1, "12:00: authorized by the window");
	is_int(device_decision(dev)->recheck_at, T(18, 0) + 1,
	    "decide again when it closes (after 18:00)");
	ok(recheck_armed(dev), "the recheck timer is armed");
	fake_now = T(18, 0);
	device_eval(dev, NULL, NULL);
	is_int(dev->state, DEV_AUTHORIZED, "18:00:00: still authorized");
	fake_now = T(18, 0) + 1;
	device_eval(dev, NULL, NULL);
	is_int(dev->state, DEV_PENDING, "18:00:01: pending");
	is_int(device_decision(dev)->recheck_at, T(32, 0),
	    "decide again when it opens (08:00 tomorrow)");
	ok(fk_last_state()->kind == ACTOR_SYSTEM, "the clock is the system");
	fake_now = T(32, 0);
	device_eval(dev, NULL, NULL);
	is_int(dev->state, DEV_AUTHORIZED, "08:00 tomorrow: authorized");

	/* an approval inside a closing window: the earlier of the two */
	fake_now = T(17, 0) + 24 * 3600;
	approve(dev, &bob, SCOPE_FOR, T(17, 30) + 24 * 3600, NULL, false);
	is_int(device_decision(dev)->recheck_at, T(17, 30) + 24 * 3600,
	    "decide again at the earlier of expiry and window edge");
	devfree(dev);
	set_tiers(NULL, NULL);
	fake_now = NOW;
}

/* ---- 7. identity first: anomalies ----------------------------------------- */

static void
test_anomaly(void)
{
	struct usbip_intf intf[USBIP_MAX_INTERFACES];
	struct usbgw_identity id;
	struct usbip_dev rec;
	struct device *dev;
	const struct fk_emit *e;
	json_t *j;
	int n0, audits0;

	set_tiers(RULES("block with-interface 08:*:*"), NULL);
	dev = mkdev("8-1", &kbd);
	n0 = fk_emitted("identity-anomaly");
	audits0 = fk.anomaly_audits;
	claim_probe(dev, &kbd, 180, 580, 0, -1);
	ok(dev->state == DEV_PENDING && shown_anomaly(dev)[0] == '\0' &&
	    fk_emitted("identity-anomaly") == n0,
	    "an honest list: no anomaly, pending");

	/* vid:pid differ, while the claim is held */
	record(&kbd, dev->up_busid, &rec, intf);
	rec.idVendor = 0x1234;
	rec.idProduct = 0x5678;
	device_listed(dev, &rec, intf);
	is_int(dev->state, DEV_BLOCKED, "the list lies about vid:pid: blocked");
	is_int(device_decision(dev)->by, BY_ANOMALY, "decided by the anomaly");
	is_int(fk_emitted("identity-anomaly"), n0 + 1, "one identity-anomaly event");
	e = fk_last_emit("identity-anomaly");
	ok(e != NULL && strstr(e->anomaly, "1234:5678") != NULL &&
	    strstr(e->anomaly, "046d:c31c") != NULL &&
	    strcmp(e->busid, dev->busid) == 0, "... saying what differs (%s)",
	    e ? e->anomaly : "-");
	is_int(fk.anomaly_audits, audits0 + 1, "one identity-anomaly audit row");
	device_listed(dev, &rec, intf);
	device_listed(dev, &rec, intf);
	is_int(fk_emitted("identity-anomaly"), n0 + 1,
	    "the same claim listed again: no second event");
	is_int(fk.anomaly_audits, audits0 + 1, "... nor audit row");
	j = device_decisions_json(dev);
	ok(json_is_string(json_object_get(j, "anomaly")), "show: the anomaly");
	json_decref(j);

	/* approve acknowledges it */
	is_int(approve(dev, &bob, SCOPE_ONCE, 0, NULL, false), CTL_OK,
	    "approve of the device in question");
	ok(dev->state == DEV_AUTHORIZED && device_decision(dev)->by == BY_APPROVAL,
	    "acknowledged: authorized");
	j = device_decisions_json(dev);
	ok(json_is_null(json_object_get(j, "anomaly")), "show: no open anomaly");
	json_decref(j);
	device_listed(dev, &rec, intf);
	ok(dev->state == DEV_AUTHORIZED && fk_emitted("identity-anomaly") == n0 + 1,
	    "the same claim, the same lie: still acknowledged");

	/* a new claim whose list differs otherwise: blocked again; the
	 * identity (and the admin rule) see the probe's interfaces */
	device_up_closed(dev, "exporter restarted");
	record(&kbd, dev->up_busid, &rec, intf);
	intf[0].bInterfaceClass = 0x08;
	intf[0].bInterfaceSubClass = 0x06;
	intf[0].bInterfaceProtocol = 0x50;
	device_listed(dev, &rec, intf);
	is_int(dev->state, DEV_AUTHORIZED, "a list without a claim: not compared yet");
	claim_probe(dev, &kbd, 180, 580, 0, -1);
	is_int(dev->state, DEV_BLOCKED, "the new claim's list lies about the "
	    "interfaces: blocked");
	is_int(device_decision(dev)->by, BY_ANOMALY, "... by the anomaly, not the rule");
	is_int(fk_emitted("identity-anomaly"), n0 + 2, "a second event");
	ok(strstr(fk_last_emit("identity-anomaly")->anomaly,
	    "08:06:50") != NULL, "... naming the listed interface (%s)",
	    fk_last_emit("identity-anomaly")->anomaly);
	device_identity(dev, &id);
	ok(id.n_ifaces == 1 && id.ifaces[0].cls == 0x03 &&
	    id.ifaces[0].subcls == 0x01 && id.ifaces[0].proto == 0x01,
	    "the identity has the probe's interface 03:01:01");
	is_int(approve(dev, &bob, SCOPE_ONCE, 0, NULL, false), CTL_OK,
	    "approve: the admin rule for 08:*:* does not apply to the probe");
	is_int(dev->state, DEV_AUTHORIZED, "acknowledged again: authorized");

	/* a configuration the probe did not read */
	device_up_closed(dev, "exporter restarted");
	record(&kbd, dev->up_busid, &rec, intf);
	rec.bConfigurationValue = 2;
	device_listed(dev, &rec, intf);
	claim_probe(dev, &kbd, 180, 580, 0, -1);
	ok(dev->state == DEV_BLOCKED && strstr(shown_anomaly(dev), "configuration 2")
	    != NULL, "listed configuration 2, which the probe did not read: "
	    "blocked (%s)", shown_anomaly(dev));
	is_int(fk_emitted("identity-anomaly"), n0 + 3, "a third event");

	/* import replies */
	approve(dev, &bob, SCOPE_ONCE, 0, NULL, false);
	record(&kbd, dev->up_busid, &rec, NULL);
	ok(device_import_reply_ok(dev, &rec), "an honest import reply");
	rec.bConfigurationValue = 0;
	ok(device_import_reply_ok(dev, &rec), "an unconfigured device's reply");
	rec.bConfigurationValue = 7;
	ok(!device_import_reply_ok(dev, &rec),
	    "a reply naming configuration 7: refused");
	ok(dev->state == DEV_BLOCKED && device_decision(dev)->by == BY_ANOMALY &&
	    strstr(shown_anomaly(dev), "configuration 7") != NULL,
	    "... an anomaly (%s)", shown_anomaly(dev));
	approve(dev, &bob, SCOPE_ONCE, 0, NULL, false);
	record(&kbd, dev->up_busid, &rec, NULL);
	rec.idProduct = 0xc52b;
	ok(!device_import_reply_ok(dev, &rec) && dev->state == DEV_BLOCKED,
	    "a reply with another vid:pid: an anomaly");

	/* the anomaly ends with the presence */
	device_presence_ended(dev);
	ok(shown_anomaly(dev)[0] == '\0', "presence ended: no anomaly");
	devfree(dev);

	/* a claim whose import reply names an unknown configuration: the
	 * identity keeps the first configuration's interfaces */
	dev = mkdev("8-2", &stick);
	n0 = fk_emitted("identity-anomaly");
	claim_probe(dev, &stick, 181, 581, 0, 5);
	ok(dev->state == DEV_BLOCKED && device_decision(dev)->by == BY_ANOMALY &&
	    fk_emitted("identity-anomaly") == n0 + 1,
	    "claimed with a reply naming configuration 5: an anomaly");
	ok(dev->nintf == 1 && dev->intf[0].bInterfaceClass == 0x08,
	    "the identity keeps the probed interfaces (08:06:50)");
	devfree(dev);
	set_tiers(NULL, NULL);
}

/* A list record is compared with one probe only (the swap case). */
static void
test_swap(void)
{
	struct usbip_intf intf[USBIP_MAX_INTERFACES];
	struct usbip_dev rec;
	struct device *dev;
	int n0;

	set_tiers(NULL, NULL);
	dev = mkdev("9-1", &kbd);
	n0 = fk_emitted("identity-anomaly");
	claim_probe(dev, &kbd, 190, 590, 0, -1);
	ok(!list_record_waiting(dev),
	    "the list was compared with the claim's probe");

	/* the keyboard is swapped for a stick; the old record stays */
	device_up_closed(dev, "unplugged");
	claim_probe(dev, &stick, 191, 591, 190, -1);
	ok(shown_anomaly(dev)[0] == '\0' && fk_emitted("identity-anomaly") == n0,
	    "a record compared once is not compared with the next identity");
	is_int(dev->id, 191, "the new identity's row");

	/* the stick is swapped back for the keyboard; the keyboard's
	 * record arrives while no claim is held: not compared with the
	 * stick's stale probe, but with the next claim's */
	device_up_closed(dev, "unplugged");
	record(&kbd, dev->up_busid, &rec, intf);
	device_listed(dev, &rec, intf);
	ok(shown_anomaly(dev)[0] == '\0' &&
	    fk_emitted("identity-anomaly") == n0,
	    "a record without a claim is kept, not compared with the old probe");
	claim_probe(dev, &kbd, 190, 592, 191, -1);
	ok(shown_anomaly(dev)[0] == '\0' && fk_emitted("identity-anomaly") == n0 &&
	    !list_record_waiting(dev), "the next claim's probe agrees with it");

	/* the same, but the next claim probes something else: compared */
	device_up_closed(dev, "unplugged");
	record(&kbd, dev->up_busid, &rec, intf);
	device_listed(dev, &rec, intf);
	claim_probe(dev, &stick, 191, 593, 190, -1);
	ok(dev->state == DEV_BLOCKED && fk_emitted("identity-anomaly") == n0 + 1,
	    "a record kept for the next claim is compared with its probe");
	devfree(dev);
}

/* ---- 8. device_check_identity ----------------------------------------------- */

struct icase {
	const char	*identity;
	enum ctl_err	 want;
};

static const struct icase icases[] = {
	{ "200", CTL_OK },
	{ "0200", CTL_OK },
	{ "c0ffee00", CTL_OK },
	{ "C0FFEE00", CTL_OK },
	{ "c0ffee0011111111", CTL_OK },
	{ "c0ffee00" X7("11111111"), CTL_OK },
	{ "201", CTL_E_REFUSED },
	{ "c0ffee01", CTL_E_REFUSED },
	{ "5eed5eed", CTL_E_REFUSED },
	{ "12345678", CTL_E_REFUSED },
	{ "", CTL_E_USAGE },
	{ "c0ffee0", CTL_E_USAGE },
	{ "-200", CTL_E_USAGE },
	{ "c0ffee00 ", CTL_E_USAGE },
	{ "zzzzzzzz", CTL_E_USAGE },
	{ "c0ffee00" X7("11111111") "1", CTL_E_USAGE },
};

/*
 * The cases write the identity as "c0ffee00..."; the device's identity
 * digest (exporter, port, hash, strings) is not known before it is
 * probed, so its digits replace them (same length, same case).  The
 * descriptor hash (c0ffee00...) itself no longer names an identity.
 */
static void
test_check_identity(void)
{
	struct device *dev;
	json_t *j;
	char err[512], want[72], idg[72];
	size_t i, k;

	set_tiers(NULL, NULL);
	dev = mkdev("10-1", &kbd);
	claim_probe(dev, &kbd, 200, 600, 0, -1);
	j = device_json(dev);
	usbgw_strlcpy(idg, json_string_value(json_object_get(j, "identity")) ?
	    json_string_value(json_object_get(j, "identity")) : "", sizeof(idg));
	json_decref(j);
	is_int((int)strlen(idg), 64, "the device has an identity digest (%.16s)",
	    idg);
	for (i = 0; i < nitems(icases); i++) {
		const char *c = icases[i].identity;
		enum ctl_err e;

		usbgw_strlcpy(want, c, sizeof(want));
		if (strncasecmp(c, "c0ffee0", 7) == 0)
			for (k = 0; want[k] != '\0' && k < 64; k++) {
				char d = idg[k];

				if (isupper((unsigned char)c[k]))
					d = (char)toupper((unsigned char)d);
				/* c0ffee01: one digit off the identity */
				if (k == 7 && c[7] == '1')
					d = d == '0' ? '1' : '0';
				if (c[k] != ' ')
					want[k] = d;
			}
		err[0] = '\0';
		e = device_check_identity(dev, want, err, sizeof(err));
		is_int(e, icases[i].want, "identity \"%s\": %s", want,
		    ctl_err_name(icases[i].want));
		if (icases[i].want == CTL_E_REFUSED)
			ok(strstr(err, dev->busid) != NULL &&
			    strstr(err, "device 200") != NULL &&
			    strncmp(strstr(err, "identity ") ?
			    strstr(err, "identity ") + 9 : "", idg, 16) == 0,
			    "... naming the device there (%s)", err);
	}
	/* the descriptor hash alone names the descriptors, not the identity */
	{
		enum ctl_err e = device_check_identity(dev, "c0ffee00", err,
		    sizeof(err));

		is_int(e, strncmp(idg, "c0ffee00", 8) == 0 ? CTL_OK :
		    CTL_E_REFUSED, "the descriptor hash's prefix is refused "
		    "(two sticks of one model share it)");
	}
	devfree(dev);
}

/* ---- 9. a changed identity -------------------------------------------------- */

static void
test_identity_change(void)
{
	struct usbip_intf intf[USBIP_MAX_INTERFACES];
	struct usbip_dev rec;
	struct device *dev;
	char err[256];
	int ev0;

	set_tiers(RULES("allow id 0781:5567"), NULL);
	dev = mkdev("11-1", &kbd);
	claim_probe(dev, &kbd, 210, 610, 0, -1);
	approve(dev, &bob, SCOPE_FOR, NOW + 3600, NULL, false);
	approve(dev, &bob, SCOPE_ONCE, 0, "10.0.0.1", false);
	record(&kbd, dev->up_busid, &rec, intf);
	rec.bNumConfigurations = 2;
	device_listed(dev, &rec, intf);
	ok(shown_nappr(dev) == 2 && shown_anomaly(dev)[0] != '\0' &&
	    dev->state == DEV_BLOCKED,
	    "the keyboard: two approvals and an open anomaly");

	/* the keyboard is swapped for a stick */
	ev0 = fk_emitted("identity-change");
	device_up_closed(dev, "unplugged");
	claim_probe(dev, &stick, 211, 611, 210, -1);
	is_str(fk.ident_hash, stick.hash, "the store is given the probed identity");
	is_int(dev->id, 211, "another identity: its own row");
	ok(fk_emitted("identity-change") == ev0 + 1 &&
	    strcmp(fk_last_emit("identity-change")->busid, dev->busid) == 0 &&
	    strcmp(fk_last_emit("identity-change")->old_hash, "old-210") == 0,
	    "an identity-change event, naming the old identity");
	is_int(shown_nappr(dev), 0, "the keyboard's approvals do not carry over");
	ok(shown_anomaly(dev)[0] == '\0', "nor the keyboard's anomaly");
	ok(dev->state == DEV_AUTHORIZED && device_decision(dev)->by == BY_ADMIN_RULE,
	    "the stick is decided by the rules alone");
	is_int(fk_active(210), 2, "the keyboard's approvals stay with its row");

	/* the keyboard again: its approvals are found again; revoked */
	device_up_closed(dev, "unplugged");
	claim_probe(dev, &kbd, 210, 610, 211, -1);
	ok(dev->id == 210 && shown_nappr(dev) == 2 && dev->state == DEV_AUTHORIZED,
	    "the keyboard again: its two approvals");
	is_int(device_revoke(dev, &carol, NULL, err, sizeof(err)), CTL_OK,
	    "the keyboard revoked");
	ok(revoked(dev) && dev->state == DEV_PENDING, "pending by revocation");

	/* swapped again: the stick is not revoked */
	device_up_closed(dev, "unplugged");
	claim_probe(dev, &stick, 211, 611, 210, -1);
	ok(!revoked(dev) && dev->state == DEV_AUTHORIZED &&
	    device_decision(dev)->by == BY_ADMIN_RULE,
	    "the stick: the keyboard's revocation does not carry over");
	device_up_closed(dev, "unplugged");
	claim_probe(dev, &kbd, 210, 610, 211, -1);
	ok(revoked(dev) && dev->state == DEV_PENDING,
	    "the keyboard in the same presence: still revoked");
	devfree(dev);
	set_tiers(NULL, NULL);
}

/* ---- the attached host must pass too ------------------------------------- */

static void
test_attached(void)
{
	struct dsession ds;
	struct device *dev;
	int closed0;

	set_tiers(NULL, NULL);
	fake_now = NOW;
	dev = mkdev("12-1", &kbd);
	claim_probe(dev, &kbd, 220, 620, 0, -1);
	approve(dev, &bob, SCOPE_FOR, NOW + 60, "10.0.0.1", false);
	approve(dev, &bob, SCOPE_ONCE, 0, "10.0.0.2", false);
	is_int(dev->state, DEV_AUTHORIZED, "attached: authorized for two hosts");
	host(&ds, "10.0.0.1", NULL);
	ds.state = DS_RELAY;
	ds.dev = dev;
	dev->ds = &ds;
	device_set_state(dev, DEV_ATTACHED, NULL, "attached");
	closed0 = fk.ds_closed;
	device_eval(dev, NULL, NULL);
	ok(dev->state == DEV_ATTACHED && fk.ds_closed == closed0,
	    "10.0.0.1 still passes: attached");
	fake_now = NOW + 60;
	device_eval(dev, NULL, NULL);
	ok(fk.ds_closed == closed0 + 1 && dev->ds == NULL,
	    "its approval expired: the session is torn down (%s)", fk.ds_why);
	is_int(dev->state, DEV_AUTHORIZED, "the device stays authorized (10.0.0.2)");
	claim_probe(dev, &kbd, 220, 620, 0, -1);

	/* a denial tears an attachment down */
	host(&ds, "10.0.0.2", NULL);
	ds.state = DS_RELAY;
	ds.dev = dev;
	dev->ds = &ds;
	device_set_state(dev, DEV_ATTACHED, NULL, "attached");
	deny(dev, &carol, SCOPE_ONCE);
	ok(fk.ds_closed == closed0 + 2 && dev->ds == NULL &&
	    dev->state == DEV_BLOCKED, "denied while attached: torn down, blocked");
	devfree(dev);
	fake_now = NOW;

	/* F7: a host the decision does not allow is attached all the same
	 * (a race): its decision applies, not the standing one */
	dev = mkdev("12-2", &kbd);
	claim_probe(dev, &kbd, 221, 621, 0, -1);
	approve(dev, &bob, SCOPE_FOR, NOW + 60, "10.0.0.1", false);
	is_int(dev->state, DEV_AUTHORIZED, "authorized for 10.0.0.1");
	host(&ds, "10.0.0.9", NULL);
	ds.state = DS_RELAY;
	ds.dev = dev;
	dev->ds = &ds;
	device_set_state(dev, DEV_ATTACHED, NULL, "attached");
	ok(dev->ds == NULL || device_decision(dev)->verdict != VERDICT_ALLOW,
	    "attached by 10.0.0.9, which the decision does not allow: the "
	    "relay enforces its decision (%s), not the standing allow",
	    verdict_name(device_decision(dev)->verdict));
	if (dev->ds != NULL)
		dev->ds = NULL;
	devfree(dev);

	/* F1: storage and a vendor interface list the same bulk endpoints */
	dev = mkdev("12-3", &twin_stick);
	twin_desc = true;
	claim_probe(dev, &twin_stick, 222, 622, 0, -1);
	twin_desc = false;
	ok(strstr(shown_anomaly(dev), "listed by interfaces 0 and 1") != NULL,
	    "endpoints two interfaces list: a descriptor anomaly at the "
	    "probe (%s)", shown_anomaly(dev));
	devfree(dev);
}

/*
 * The store unavailable (protocol.md 4.6): a rule that allows a device
 * does not authorize it while degraded (it stays pending, saying why);
 * what was authorized stays so; once the store is back the same rule
 * authorizes it.
 */
static void
test_store_down(void)
{
	/* identities no earlier test decided anything about */
	static const struct tmpl kbd2 = {
		0x046d, 0xc31d, 0x6400, 0x03, 0x01, 0x01, 1, { 0x81, 0 },
		USB_XFER_INT, "Logitech", "USB Keyboard K2", "K2-0001",
		"d00dfeed" X7("33333333"),
	};
	static const struct tmpl kbd3 = {
		0x046d, 0xc31d, 0x6400, 0x03, 0x01, 0x01, 1, { 0x81, 0 },
		USB_XFER_INT, "Logitech", "USB Keyboard K2", "K2-0002",
		"d00dfeed" X7("44444444"),
	};
	struct device *dev, *dev2;

	set_tiers(RULES("allow id 046d:c31d"), NULL);
	fake_now = NOW;
	dev2 = mkdev("12-3", &kbd2);
	claim_probe(dev2, &kbd2, 230, 630, 0, -1);
	is_int(dev2->state, DEV_AUTHORIZED, "store up: the rule authorizes");
	fake_store_down = true;
	dev = mkdev("12-2", &kbd3);
	claim_probe(dev, &kbd3, 231, 631, 0, -1);
	is_int(dev->state, DEV_PENDING, "store down: a device the rule allows "
	    "stays pending");
	device_eval(dev, NULL, NULL);
	is_int(dev->state, DEV_PENDING, "and stays pending when decided again");
	device_eval(dev2, NULL, NULL);
	is_int(dev2->state, DEV_AUTHORIZED, "what was authorized stays so");
	fake_store_down = false;
	device_eval(dev, NULL, NULL);
	is_int(dev->state, DEV_AUTHORIZED, "store back: decided again, "
	    "authorized");
	devfree(dev);
	devfree(dev2);
	set_tiers(NULL, NULL);
}

/* ---- 10. observers --------------------------------------------------------- */

static void
test_observers(void)
{
	struct device *dev;
	int n0;

	set_tiers(NULL, NULL);
	dev = mkdev("13-1", &kbd);
	n0 = obs_decided;
	claim_probe(dev, &kbd, 230, 630, 0, -1);
	ok(obs_decided > n0 && obs_last == dev && obs_state == DEV_PENDING,
	    "decided() after the first decision");
	n0 = obs_decided;
	approve(dev, &bob, SCOPE_ONCE, 0, NULL, false);
	ok(obs_decided == n0 + 1 && obs_state == DEV_AUTHORIZED,
	    "decided() after an approval, with the new state");
	n0 = obs_decided;
	device_eval(dev, NULL, NULL);
	is_int(obs_decided, n0 + 1, "decided() after a decision that changes nothing");
	n0 = obs_decided;
	{
		char err[64];

		device_approve(dev, false, &(struct approve_opts){ .override =
		    true }, &bob, err, sizeof(err));
	}
	is_int(obs_decided, n0, "no decided() for a refused command");
	n0 = obs_freed;
	devfree(dev);
	ok(obs_freed == n0 + 1 && obs_freed_dev == dev, "freed() on device_free");
}

/* ---- bugs this test found (A, B, C), fixed in device.c -------------------- */

static enum dev_state
want_state(enum verdict v)
{
	return v == VERDICT_ALLOW ? DEV_AUTHORIZED : v == VERDICT_PENDING ?
	    DEV_PENDING : DEV_BLOCKED;
}

/* The bug's check, now an ordinary assertion (why: the bug it pins). */
static void
bug_ok(int cond, const char *why, const char *what)
{
	ok(cond, "%s (was: %s)", what, why);
}

static void
test_known_bugs(void)
{
	struct device *dev;
	const struct fk_appr *den;
	struct decision d;

	set_tiers(NULL, NULL);

	/* A: a superseded decision is dropped from memory but stays active
	 * in the store; the next claim loads it again.  The fix ends the
	 * superseded row: store_approval_end(dev, id, "superseded", who). */
	dev = mkdev("14-1", &kbd);
	claim_probe(dev, &kbd, 240, 640, 0, -1);
	deny(dev, &carol, SCOPE_ONCE);
	den = fk_last_appr();
	approve(dev, &bob, SCOPE_ONCE, 0, NULL, false);
	is_int(dev->state, DEV_AUTHORIZED, "an approval supersedes a denial");
	bug_ok(den->ended && strcmp(den->end_reason, "superseded") == 0 &&
	    strcmp(den->ended_by, "bob") == 0,
	    "approval_keep() does not end the superseded row",
	    "the superseded denial's row is ended: superseded, by bob");
	device_up_closed(dev, "exporter restarted");
	claim_probe(dev, &kbd, 240, 640, 0, -1);
	bug_ok(dev->state == DEV_AUTHORIZED, "the store still holds the denial",
	    "reclaimed in the same presence: still authorized");
	devfree(dev);

	/* B: deny whose record or rule fails has ended the approvals
	 * already, and returns without deciding again.  The fix decides
	 * again on the error (fail closed). */
	dev = mkdev("14-2", &kbd);
	claim_probe(dev, &kbd, 241, 641, 0, -1);
	approve(dev, &bob, SCOPE_ONCE, 0, NULL, false);
	fk.rule_fail = true;
	is_int(deny(dev, &carol, SCOPE_PERMANENT), CTL_E_INTERNAL,
	    "deny --permanent, the rule cannot be written: internal error");
	fk.rule_fail = false;
	device_decide(dev, NULL, &d);
	bug_ok(want_state(d.verdict) == dev->state &&
	    dev->state != DEV_AUTHORIZED, "device_approve returns "
	    "after approvals_end_all without device_eval",
	    "a failed deny decides again: the state agrees with the decision, "
	    "not authorized (fail closed)");
	devfree(dev);

	/* C: the store cannot record a new identity: device_identified()
	 * keeps the previous identity's row id, so what an operator
	 * decides now is recorded against (and later allows) that one.
	 * The fix: no row (dev->id 0), no presence, no approvals. */
	dev = mkdev("14-3", &kbd);
	claim_probe(dev, &kbd, 242, 642, 0, -1);
	device_up_closed(dev, "unplugged");
	fk.ident_rc = -1;
	claim_probe(dev, &stick, 243, 643, 242, -1);
	fk.ident_rc = 0;
	bug_ok(dev->id == 0 && dev->presence_id == 0 && shown_nappr(dev) == 0,
	    "device_identified() returns early on a store failure, dev->id "
	    "unchanged", "a stick the store could not record has no row, no "
	    "presence, no approvals (not the keyboard's row)");
	approve(dev, &bob, SCOPE_FOR, NOW + 3600, NULL, false);
	device_up_closed(dev, "unplugged");
	claim_probe(dev, &kbd, 242, 642, 0, -1);
	bug_ok(dev->state == DEV_PENDING, "the stick's approval was stored "
	    "with the keyboard's row", "the keyboard is not authorized by an "
	    "approval of the stick");
	devfree(dev);
}

/*
 * Issue 13, item 4: a claim that keeps failing for a reason that says
 * "busy" (a timeout, a closed connection, ST_DEV_BUSY) is retried for as
 * long as the exporter lists the device; it never goes gone for it (it
 * went after 50 tries).  A refused connection and ST_NODEV for a device
 * no longer listed still make it gone at once, and a device without a
 * claim is never authorized meanwhile.
 */
static void
test_claim_retries(void)
{
	struct device *dev;
	int i, gone = 0, held = 0;

	dev = mkdev("15-1", &kbd);
	claim_probe(dev, &kbd, 250, 650, 0, -1);
	approve(dev, &bob, SCOPE_FOR, NOW + 3600, NULL, false);
	is_int(dev->state, DEV_AUTHORIZED, "retries: approved");
	dev->seen = true;
	for (i = 0; i < 200; i++) {
		if (dev->up == NULL)
			device_claim(dev);
		device_claim_failed(dev, i % 3 == 0 ? ST_DEV_BUSY : -1,
		    i % 3 == 1 ? "exporter timed out" :
		    "exporter closed the connection");
		gone += dev->state == DEV_GONE;
		held += dev->up != NULL;
	}
	is_int(gone, 0, "200 busy claim failures in a row: never gone");
	is_int(held, 0, "and never a claim held after a failure (fail closed)");
	ok(dev->up == NULL, "no claim held after the last failure");
	device_claim(dev);
	ok(dev->up != NULL && fk.up_urgent > 0,
	    "an authorized device's re-claim is queued ahead of new ones");
	device_claim_failed(dev, UP_ST_UNREACHABLE, "cannot reach exporter");
	is_int(dev->state, DEV_GONE, "a refused connection: gone at once");
	devfree(dev);

	dev = mkdev("15-2", &kbd);
	claim_probe(dev, &kbd, 251, 651, 0, -1);
	dev->seen = false;
	device_claim_failed(dev, ST_NODEV, "ST_NODEV");
	is_int(dev->state, DEV_GONE, "ST_NODEV for a device no longer listed: "
	    "gone");
	devfree(dev);
}

int
main(void)
{
	setenv("TZ", "UTC0", 1);
	tzset();
	log_init("test_device", 1, getenv("TEST_VERBOSE") ? LOG_LVL_DEBUG :
	    LOG_LVL_ERR);
	device_set_clock(fake_clock);
	base = event_base_new();
	gw_init(base);
	gw->host_names = true;
	tc17 = exporter_new("tc17", "127.0.0.1", 3240);
	tc17->id = 1;
	device_observe(&fake_server);	/* as server_init() does */
	device_observe(&observer);
	bob = operator("bob", PRIV_APPROVE);
	carol = operator("carol", PRIV_APPROVE);
	root = operator("root", PRIV_ADMIN);

	test_approve_scopes();
	test_approve_bad_hosts();
	test_deny();
	test_admin_block();
	test_revoke();
	test_expiry();
	test_windows();
	test_anomaly();
	test_swap();
	test_check_identity();
	test_identity_change();
	test_attached();
	test_store_down();
	test_observers();
	test_known_bugs();
	test_claim_retries();

	exporter_free(tc17);
	event_base_loop(base, EVLOOP_NONBLOCK);	/* its deferred free */
	policy_free(fk.admin);
	policy_free(fk.op);
	gw_free();
	event_base_free(base);
	return done_testing();
}
