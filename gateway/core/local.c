/*
 * Local mode: the gateway runs on the vhci host and attaches approved
 * devices to this host's vhci_hcd itself (the local back end of
 * attach.h, over vhci.c), instead of waiting for a remote vhci host to
 * import them through the downstream server.
 *
 *  direct     the kernel gets the claim's TCP socket to the exporter; the
 *             gateway sees no URB and polls the port (check) to learn that
 *             the vhci side let go.  The attachment outlives the daemon: a
 *             restart adopts it (reconciliation), a clean stop leaves it.
 *  inspected  the kernel gets one end of a socketpair; the other end is a
 *             downstream session (peer "local:vhci PORT") that the relay
 *             serves like any other, so counters, endpoint checks and
 *             malformed-PDU handling apply.  It dies with the daemon.
 *
 * When: a device that becomes authorized is attached at once when
 * local-auto-attach is on, or on `usbgw attach`.  An attachment that ends
 * while the device stays authorized (the vhci side let go, the relay or
 * the claim failed, `usbgw detach`) is not made again automatically for
 * that presence: the device is "held" until an operator attaches it, a
 * decision takes it out of authorized, or it comes back as a new presence.
 * That is what keeps a device the host keeps rejecting from flapping.
 *
 * Teardown: a decision that takes the device out of authorized/attached
 * (revoke, deny, expiry, policy change) arrives through
 * local_device_decided(); the core has already closed the inspected
 * session, we detach the vhci port.  Everything else (gone, the relay
 * ended, the port let go, the host no longer allowed) is noticed by the
 * attachment's tick, every LOCAL_CHECK_MS.
 *
 * The database remembers every open local attachment (port, devid, fd
 * number, mode) in the settings row LOCAL_RECORDS_KEY, next to its
 * attachments row, so a restart can tell its own ports from foreign ones.
 */
#include <sys/socket.h>
#include <sys/types.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "base/log.h"
#include "base/util.h"
#include "control/config.h"
#include "control/control.h"
#include "core/device.h"
#include "core/exporter.h"
#include "core/local.h"
#include "core/loop.h"
#include "core/relay.h"
#include "core/session.h"
#include "core/store.h"
#include "core/upstream.h"
#include "db/db.h"
#include "host/attach.h"
#include "host/vhci.h"

#define LOCAL_CHECK_MS		2000	/* poll of an attachment's port */
#define LOCAL_AUTHZ_MS		50	/* authorize() again while enumerating */
#define LOCAL_AUTHZ_TRIES	100	/* ... for at most 5 s */
#define LOCAL_UNSURE_MS		500	/* reconcile a starting port again */
#define LOCAL_UNSURE_TRIES	10
#define LOCAL_RECORDS_KEY	"local.attachments"
#define LOCAL_RECORD_LINE	96
#define LOCAL_MAX_RECORDS	4096	/* > the kernel's 3840 ports */
#define LOCAL_NOTE_MAX		256

struct local_att {
	TAILQ_ENTRY(local_att)	 entry;
	struct device		*dev;		/* NULL once the object is gone */
	char			 busid[USBIP_BUSID_SIZE];
	int64_t			 device_id;
	int64_t			 attach_id;	/* attachments row */
	struct attach_ctx	 ctx;
	struct dsession		*ds;		/* inspected: the relay's session */
	struct upstream		*up;		/* direct: the handed-over claim */
	struct event		*tick;
	int			 authz_left;	/* authorize() tries left */
	uint64_t		 ifsig;		/* verdicts last authorized */
	bool			 kept;		/* shutdown: left attached */
	char			 note[LOCAL_NOTE_MAX];	/* interfaces denied */
};

/* A device whose attachment ended while it stayed authorized. */
struct local_hold {
	TAILQ_ENTRY(local_hold)	 entry;
	char			 busid[USBIP_BUSID_SIZE];
	int64_t			 presence_id;
};

/* What the database remembers of one local attachment. */
struct local_record {
	int64_t			 attach_id;
	int64_t			 device_id;
	struct attach_record	 r;
	int			 tries;		/* UNSURE rounds so far */
};

static struct {
	bool			 on;
	bool			 stopping;
	struct attach_backend	*be;
	bool			 authorize;	/* lock-down or per-interface */
	bool			 per_interface;
	char			 hostname[INET6_ADDRSTRLEN];
	TAILQ_HEAD(, local_att)	 atts;
	TAILQ_HEAD(, local_hold) holds;
	struct local_record	*unsure;	/* reconcile again shortly */
	size_t			 nunsure;
	struct event		*unsure_ev;
} L = {
	.atts = TAILQ_HEAD_INITIALIZER(L.atts),
	.holds = TAILQ_HEAD_INITIALIZER(L.holds),
};

static void	local_tick(evutil_socket_t, short, void *);
static void	local_teardown(struct local_att *, const struct actor *,
		    const char *);
static void	records_save(void);

static int64_t
now_s(void)
{
	return (int64_t)time(NULL);
}

/* ---- bookkeeping ---------------------------------------------------- */

static struct local_att *
att_find(const struct device *dev)
{
	struct local_att *la;

	TAILQ_FOREACH(la, &L.atts, entry)
		if (la->dev == dev && !la->kept)
			return la;
	return NULL;
}

static void
att_arm(struct local_att *la, unsigned ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(la->tick, &tv);
}

static struct local_att *
att_new(struct device *dev)
{
	struct local_att *la;

	la = xcalloc(1, sizeof(*la));
	la->dev = dev;
	usbgw_strlcpy(la->busid, dev->busid, sizeof(la->busid));
	la->device_id = dev->id;
	attach_ctx_init(&la->ctx);
	usbgw_strlcpy(la->ctx.busid, dev->busid, sizeof(la->ctx.busid));
	la->tick = evtimer_new(gw->base, local_tick, la);
	TAILQ_INSERT_TAIL(&L.atts, la, entry);
	return la;
}

static void
att_free(struct local_att *la)
{
	if (la->tick != NULL)
		event_free(la->tick);
	free(la);
}

static bool
held(const struct device *dev)
{
	struct local_hold *h;

	TAILQ_FOREACH(h, &L.holds, entry)
		if (strcmp(h->busid, dev->busid) == 0)
			return h->presence_id == dev->presence_id;
	return false;
}

static void
hold_clear(const struct device *dev)
{
	struct local_hold *h, *next;

	for (h = TAILQ_FIRST(&L.holds); h != NULL; h = next) {
		next = TAILQ_NEXT(h, entry);
		if (strcmp(h->busid, dev->busid) == 0) {
			TAILQ_REMOVE(&L.holds, h, entry);
			free(h);
		}
	}
}

static void
hold_set(const struct device *dev)
{
	struct local_hold *h;

	hold_clear(dev);
	h = xcalloc(1, sizeof(*h));
	usbgw_strlcpy(h->busid, dev->busid, sizeof(h->busid));
	h->presence_id = dev->presence_id;
	TAILQ_INSERT_TAIL(&L.holds, h, entry);
}

/* This host as a downstream session, for host-limited rules and grants. */
static void
local_host_session(struct dsession *ds)
{
	memset(ds, 0, sizeof(*ds));
	usbgw_strlcpy(ds->host, L.hostname, sizeof(ds->host));
	/* this host: its own name needs no lookup */
	usbgw_strlcpy(ds->host_name, L.hostname, sizeof(ds->host_name));
}

/* Does an interface-policy decide dev for this host? */
static bool
local_has_ipol(struct device *dev)
{
	struct dsession self;
	struct decision d;

	local_host_session(&self);
	device_decide(dev, &self, &d);
	return d.per_iface;
}

static bool
local_host_allowed(struct device *dev)
{
	struct dsession self;

	local_host_session(&self);
	return device_allowed_for(dev, &self);
}

/* Claimed, probed, idle, and nobody attached. */
static bool
local_ready(const struct device *dev)
{
	return !dev->dead && dev->probed && dev->up != NULL &&
	    dev->up->state == UP_IDLE && dev->up->bev != NULL &&
	    dev->ds == NULL;
}

/* ---- the database's record of open local attachments ------------------ */

static void
record_add(char **buf, size_t *len, int64_t attach_id, int64_t device_id,
    const struct attach_record *r)
{
	char line[LOCAL_RECORD_LINE];
	size_t n;
	int w;

	w = snprintf(line, sizeof(line), "%lld %lld %d %08x %d %s\n",
	    (long long)attach_id, (long long)device_id, r->port, r->devid,
	    r->kernel_fd, attach_mode_name(r->mode));
	if (w < 0 || (size_t)w >= sizeof(line))
		return;
	n = (size_t)w;
	*buf = xreallocarray(*buf, 1, *len + n + 1);
	memcpy(*buf + *len, line, n + 1);
	*len += n;
}

/* Every attachment that is open, and those reconciliation still waits for. */
static void
records_save(void)
{
	struct local_att *la;
	struct attach_record r;
	char *buf = NULL;
	size_t len = 0, i;

	if (store_db() == NULL)
		return;
	TAILQ_FOREACH(la, &L.atts, entry) {
		if (la->ctx.state != ATTACH_ATTACHED || la->device_id <= 0)
			continue;
		memset(&r, 0, sizeof(r));
		r.port = la->ctx.port;
		r.devid = la->ctx.devid;
		r.kernel_fd = la->ctx.kernel_fd;
		r.mode = la->ctx.mode;
		record_add(&buf, &len, la->attach_id, la->device_id, &r);
	}
	for (i = 0; i < L.nunsure; i++)
		record_add(&buf, &len, L.unsure[i].attach_id,
		    L.unsure[i].device_id, &L.unsure[i].r);
	if (db_setting_set(store_db(), LOCAL_RECORDS_KEY, buf != NULL ? buf :
	    "", now_s()) == -1)
		log_warnx("local: cannot record the open attachments: %s",
		    db_errmsg(store_db()));
	free(buf);
}

/* Parse "ATTACH DEVICE PORT DEVID FD MODE"; -1 if malformed. */
static int
record_parse(char *line, struct local_record *out)
{
	char *tok[6], *save = NULL, *p, *end;
	long long v[5];
	unsigned long devid;
	int i, n = 0;

	for (p = strtok_r(line, " ", &save); p != NULL;
	    p = strtok_r(NULL, " ", &save)) {
		if (n == 6)
			return -1;
		tok[n++] = p;
	}
	if (n != 6)
		return -1;
	for (i = 0; i < 5; i++) {
		if (i == 3)
			continue;
		errno = 0;
		v[i] = strtoll(tok[i], &end, 10);
		if (errno != 0 || *end != '\0' || end == tok[i] || v[i] < 0 ||
		    v[i] > INT_MAX)
			return -1;
	}
	errno = 0;
	devid = strtoul(tok[3], &end, 16);
	if (errno != 0 || *end != '\0' || strlen(tok[3]) != 8 ||
	    devid > UINT32_MAX)
		return -1;
	memset(out, 0, sizeof(*out));
	out->attach_id = v[0];
	out->device_id = v[1];
	out->r.port = (int)v[2];
	out->r.devid = (uint32_t)devid;
	out->r.kernel_fd = (int)v[4];
	out->r.found = -1;
	if (out->device_id <= 0 || attach_mode_parse(tok[5], &out->r.mode) == -1)
		return -1;
	return 0;
}

static struct local_record *
records_load(size_t *np)
{
	struct local_record *recs = NULL, one;
	size_t size = (size_t)LOCAL_MAX_RECORDS * LOCAL_RECORD_LINE, n = 0;
	char *buf, *line, *save = NULL;
	int rc;

	*np = 0;
	if (store_db() == NULL)
		return NULL;
	buf = xmalloc(size);
	if ((rc = db_setting_get(store_db(), LOCAL_RECORDS_KEY, buf,
	    size)) != 1) {
		if (rc == -1)
			log_warnx("local: cannot read the open attachments: %s",
			    db_errmsg(store_db()));
		free(buf);
		return NULL;
	}
	for (line = strtok_r(buf, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		if (n == LOCAL_MAX_RECORDS)
			break;
		if (record_parse(line, &one) == -1) {
			log_warnx("local: ignoring a malformed attachment "
			    "record");
			continue;
		}
		recs = xreallocarray(recs, n + 1, sizeof(*recs));
		recs[n++] = one;
	}
	free(buf);
	*np = n;
	return recs;
}

/* End an attachments row we have no device object for. */
static void
row_end(int64_t attach_id, const char *why)
{
	struct db_counters c;

	if (store_db() == NULL || attach_id <= 0)
		return;
	memset(&c, 0, sizeof(c));
	db_attachment_end(store_db(), attach_id, &c, why, now_s());
}

static int64_t
row_begin(struct device *dev, int port)
{
	struct db_legs legs;
	char addr[32];
	int64_t id;

	if (store_db() == NULL || dev->id == 0)
		return 0;
	snprintf(addr, sizeof(addr), "vhci port %d", port);
	store_attachment_legs(dev, dev->ds, &legs);	/* host leg: local */
	id = db_attachment_begin(store_db(), dev->id, dev->presence_id,
	    device_decision(dev)->approval_id, dev->rule_id, "local",
	    L.hostname, addr, &legs, now_s());
	return id > 0 ? id : 0;
}

/* ---- attach ---------------------------------------------------------- */

/* The relay's end of an inspected attachment, as a downstream session. */
static struct dsession *
local_session_new(struct device *dev, int fd, int port)
{
	struct dsession *ds;

	ds = xcalloc(1, sizeof(*ds));	/* state DS_OP */
	ds->gw = gw;
	ds->started = now_usec();
	ds->ss.ss_family = AF_UNIX;
	usbgw_strlcpy(ds->host, L.hostname, sizeof(ds->host));
	snprintf(ds->peer, sizeof(ds->peer), "local:vhci %d", port);
	if ((ds->bev = bufferevent_socket_new(gw->base, fd,
	    BEV_OPT_CLOSE_ON_FREE)) == NULL) {
		free(ds);
		return NULL;
	}
	TAILQ_INSERT_TAIL(&gw->sessions, ds, entry);
	gw->nsessions++;
	ds->dev = dev;
	dev->ds = ds;
	return ds;
}

/*
 * Hand dev (authorized, claimed, idle) to this host's vhci.  0, or -1
 * with a reason in err; on failure the claim is as it was.
 */
static int
local_attach(struct device *dev, const struct actor *who, char *err,
    size_t errlen)
{
	static const uint8_t nothing[1];
	struct upstream *up = dev->up;
	struct bufferevent *bev = up->bev;
	struct attach_ctx ctx;
	struct local_att *la;
	struct dsession *ds = NULL;
	char reason[128];
	int fd;

	/* protocol.md 4.6: no new attachment without the store */
	if (store_degraded()) {
		snprintf(err, errlen, "%s", STORE_UNAVAILABLE);
		return -1;
	}
	/*
	 * An interface-policy is kept by the kernel's interface
	 * `authorized` only: without vhci-per-interface every interface
	 * would get its driver, so such a device is not attached at all.
	 */
	if (!L.per_interface && local_has_ipol(dev)) {
		snprintf(err, errlen, "its rule has an interface-policy: local "
		    "mode keeps denied interfaces from their drivers only with "
		    "vhci-per-interface = yes");
		return -1;
	}
	fd = bufferevent_getfd(bev);
	if (fd < 0 || evbuffer_get_length(bufferevent_get_input(bev)) != 0 ||
	    evbuffer_get_length(bufferevent_get_output(bev)) != 0) {
		snprintf(err, errlen, "the claim is not idle");
		return -1;
	}
	attach_ctx_init(&ctx);
	usbgw_strlcpy(ctx.busid, dev->busid, sizeof(ctx.busid));
	ctx.mode = gw->cfg->local_attach ? ATTACH_INSPECTED : ATTACH_DIRECT;
	/* Nobody rewrites devid on a direct attachment: the exporter's. */
	ctx.devid = ctx.mode == ATTACH_DIRECT ? up->devid : dev->gw_devid;
	ctx.speed = up->rec.speed;
	ctx.upstream_fd = fd;

	bufferevent_disable(bev, EV_READ | EV_WRITE);
	if (L.be->ops->attach(L.be, &ctx) == -1) {
		snprintf(err, errlen, "vhci attach failed: %s",
		    errno == ENOSPC ? "no free port on the hub for its speed" :
		    strerror(errno));
		bufferevent_enable(bev, EV_READ | EV_WRITE);
		return -1;
	}
	if (ctx.mode == ATTACH_DIRECT) {
		/* The kernel holds its own reference now. */
		bufferevent_setcb(bev, NULL, NULL, NULL, NULL);
		bufferevent_setfd(bev, -1);
		close(fd);
		upstream_set_state(up, UP_RELAYING, "attached by the kernel");
		/*
		 * No relay counts this one: its row must not end with the
		 * counters of an earlier relayed attachment of the device.
		 */
		dev->bytes_down = dev->bytes_up = dev->urbs = 0;
		dev->refused = 0;
	} else if ((ds = local_session_new(dev, ctx.relay_fd,
	    ctx.port)) == NULL) {
		snprintf(err, errlen, "cannot start the relay");
		L.be->ops->detach(L.be, &ctx);
		close(ctx.relay_fd);
		bufferevent_enable(bev, EV_READ | EV_WRITE);
		return -1;
	}

	la = att_new(dev);
	la->ctx = ctx;
	la->ds = ds;
	la->up = ctx.mode == ATTACH_DIRECT ? up : NULL;
	la->authz_left = L.authorize ? LOCAL_AUTHZ_TRIES : 0;
	snprintf(reason, sizeof(reason), "local vhci port %d (%s)", ctx.port,
	    attach_mode_name(ctx.mode));
	device_set_state(dev, DEV_ATTACHED, who, reason);
	la->attach_id = dev->attach_id = row_begin(dev, ctx.port);
	records_save();
	if (ds != NULL) {
		dsession_set_state(ds, DS_RELAY, dev->busid);
		relay_start(ds, dev, nothing, 0, dsession_close);
	}
	att_arm(la, L.authorize ? LOCAL_AUTHZ_MS : LOCAL_CHECK_MS);
	return 0;
}

/*
 * End la.  The vhci port is detached first (if it still holds our
 * device), then the gateway's side: the inspected session is closed
 * (relay stopped, claim released and taken again fresh), the direct
 * claim released.  A device still attached goes back to authorized, by
 * who (NULL: the system) for why.
 */
static void
local_teardown(struct local_att *la, const struct actor *who, const char *why)
{
	struct device *dev = la->dev;

	if (la->ctx.state == ATTACH_ATTACHED &&
	    L.be->ops->detach(L.be, &la->ctx) == -1)
		log_warnx("%s: vhci port %d not detached", la->busid,
		    la->ctx.port);
	TAILQ_REMOVE(&L.atts, la, entry);
	if (dev != NULL) {
		store_audit_device(dev, "local-detach", who, why);
		if (dev->state == DEV_ATTACHED)
			device_set_state(dev, DEV_AUTHORIZED, who, why);
		if (la->ds != NULL && dev->ds == la->ds)
			dsession_close(la->ds, why);
		else if (la->up != NULL && dev->up == la->up &&
		    dev->up->state == UP_RELAYING && dev->ds == NULL)
			device_detached(dev, why);
		else if (dev->attach_id == la->attach_id)
			store_attachment_end(dev, why);
	} else
		row_end(la->attach_id, why);
	records_save();
	att_free(la);
}

/* ---- authorization on the vhci host ------------------------------- */

/*
 * May this interface, as the vhci host's kernel read it, bind a driver?
 * The same per-interface verdicts as in proxy mode (decision.h,
 * protocol.md part 3 "Interface policy"): the device's decision for
 * this host; without an interface-policy every interface follows the
 * device (authorized already).  With one, the kernel authorizes an
 * interface for all its alternate settings at once, so it gets a
 * driver only if every alternate setting of it (in this configuration)
 * is allowed, and only if the class triple the kernel read is one the
 * probe read for it: a device that shows the host something else than
 * it showed the gateway is judged on what was decided, and fails closed.
 */
static int
local_intf_allow(void *arg, const struct attach_intf *ai)
{
	struct local_att *la = arg;
	struct dsession self;
	struct decision d;
	const struct iface_verdict *v;
	const char *why = NULL;
	bool seen = false, same = false;
	char one[96];
	size_t i;

	if (la->dev == NULL)
		return 0;
	local_host_session(&self);
	device_decide(la->dev, &self, &d);
	if (d.verdict != VERDICT_ALLOW)
		why = "the device is not allowed";
	else if (!d.per_iface)
		return 1;
	for (i = 0; why == NULL && i < d.niface; i++) {
		v = &d.iface[i];
		if (v->config != ai->config || v->number != ai->number)
			continue;
		seen = true;
		if (v->cls == ai->iclass && v->subcls == ai->isubclass &&
		    v->proto == ai->iprotocol)
			same = true;
		if (!v->allow)
			why = v->alt == 0 ? "interface-policy" :
			    "interface-policy denies an alternate setting";
	}
	if (why == NULL && !seen)
		why = "not among the probe's interfaces";
	else if (why == NULL && !same)
		why = "class differs from the probe's";
	if (why == NULL)
		return 1;
	snprintf(one, sizeof(one), "%s%s %02x:%02x:%02x (%s, %s %lld)",
	    la->note[0] != '\0' ? ", " : "", ai->name, ai->iclass,
	    ai->isubclass, ai->iprotocol, why, d.rule_id != 0 ? "rule" :
	    "approval", (long long)(d.rule_id != 0 ? d.rule_id :
	    d.approval_id));
	usbgw_strlcat(la->note, one, sizeof(la->note));
	return 0;
}

/* A digest of the device's per-interface verdicts for this host. */
static uint64_t
iface_sig(struct device *dev)
{
	struct dsession self;
	struct decision d;
	uint64_t h = 1469598103934665603ULL;
	size_t i;

	local_host_session(&self);
	device_decide(dev, &self, &d);
#define MIX(x)	(h = (h ^ (uint64_t)(x)) * 1099511628211ULL)
	MIX(d.verdict);
	MIX(d.per_iface);
	MIX(d.niface);
	for (i = 0; i < d.niface; i++) {
		MIX(d.iface[i].config);
		MIX(d.iface[i].number);
		MIX(d.iface[i].alt);
		MIX(d.iface[i].allow);
	}
#undef MIX
	return h;
}

/* One authorize() round; false when there is nothing left to do. */
static bool
local_authorize(struct local_att *la)
{
	struct attach_authz az;
	char detail[LOCAL_NOTE_MAX + 128];
	int rv;

	memset(&az, 0, sizeof(az));
	if (L.per_interface) {
		az.allow = local_intf_allow;
		az.arg = la;
	}
	la->note[0] = '\0';
	if (la->dev != NULL)
		la->ifsig = iface_sig(la->dev);
	rv = L.be->ops->authorize(L.be, &la->ctx, &az);
	if (rv == 1 && --la->authz_left > 0)
		return true;
	la->authz_left = 0;
	if (rv == 0) {
		snprintf(detail, sizeof(detail), "%s on vhci port %d authorized"
		    "; %u interface%s allowed, %u kept without a driver%s%s",
		    la->ctx.local_busid, la->ctx.port, az.nallowed,
		    az.nallowed == 1 ? "" : "s", az.ndenied,
		    la->note[0] != '\0' ? ": " : "", la->note);
		store_audit_device(la->dev, "local-authorize", NULL, detail);
	} else {
		snprintf(detail, sizeof(detail), "vhci port %d: %s",
		    la->ctx.port, rv == 1 ? "the host did not enumerate the "
		    "device in time; it stays without a driver" :
		    strerror(errno));
		log_warnx("%s: not authorized on this host: %s", la->busid,
		    detail);
		store_audit_device(la->dev, "local-authorize-failed", NULL,
		    detail);
	}
	return false;
}

/* ---- the tick -------------------------------------------------------- */

static const char *
decided_why(const struct device *dev, char *buf, size_t len)
{
	snprintf(buf, len, "no longer authorized (now %s)",
	    dev_state_name(dev->state));
	return buf;
}

static void
local_tick(evutil_socket_t fd, short what, void *arg)
{
	struct local_att *la = arg;
	struct device *dev = la->dev;
	const struct vhci_port *vp;
	char why[64];
	int rv;

	if (dev == NULL || dev->state == DEV_GONE || dev->dead)
		return local_teardown(la, NULL, "device gone");
	if (la->ds != NULL && dev->ds != la->ds) {
		/* dsession_close() ran: relay error, claim lost, vhci EOF */
		hold_set(dev);
		return local_teardown(la, NULL, "the relay ended");
	}
	if (dev->state != DEV_ATTACHED)
		return local_teardown(la, NULL, decided_why(dev, why,
		    sizeof(why)));
	if (!local_host_allowed(dev))
		return local_teardown(la, NULL,
		    "no longer allowed for this host");
	if ((rv = L.be->ops->check(L.be, &la->ctx)) == 0) {
		hold_set(dev);
		return local_teardown(la, NULL, "vhci host let go");
	}
	if (rv == 1 && la->ctx.local_busid[0] == '\0' &&
	    (vp = vhci_port(attach_local_vhci(L.be),
	    (unsigned int)la->ctx.port)) != NULL && vp->status == VHCI_ST_USED)
		usbgw_strlcpy(la->ctx.local_busid, vp->local_busid,
		    sizeof(la->ctx.local_busid));
	if (rv == 1 && la->authz_left > 0 && local_authorize(la))
		return att_arm(la, LOCAL_AUTHZ_MS);
	att_arm(la, LOCAL_CHECK_MS);
}

/* ---- hooks from the core --------------------------------------------- */

/*
 * A decision was applied to dev (device_eval): attach what became
 * authorized, detach what no longer is.
 */
static void
local_device_decided(struct device *dev)
{
	struct local_att *la;
	char err[160], detail[200], why[64];

	if (!L.on || L.stopping)
		return;
	la = att_find(dev);
	if (dev->state != DEV_AUTHORIZED && dev->state != DEV_ATTACHED) {
		hold_clear(dev);	/* the next approval attaches again */
		if (la != NULL)
			local_teardown(la, NULL, decided_why(dev, why,
			    sizeof(why)));
		return;
	}
	if (la != NULL) {
		if (la->ds != NULL && dev->ds != la->ds) {
			hold_set(dev);
			local_teardown(la, NULL, "the relay ended");
			return;
		}
		/*
		 * Still allowed, the interface verdicts changed (a policy
		 * change): the kernel's interface `authorized` again (0
		 * unbinds a driver that is bound).
		 */
		if (!L.per_interface && local_has_ipol(dev)) {
			hold_set(dev);
			local_teardown(la, NULL, "an interface-policy applies "
			    "now: local mode keeps it only with "
			    "vhci-per-interface = yes");
			return;
		}
		if (L.per_interface && la->authz_left == 0 &&
		    la->ctx.local_busid[0] != '\0' &&
		    iface_sig(dev) != la->ifsig) {
			la->authz_left = 1;
			local_authorize(la);
		}
		return;
	}
	/* the store unavailable: nothing new; decided again when it returns */
	if (dev->state != DEV_AUTHORIZED || !gw->cfg->local_auto_attach ||
	    held(dev) || !local_ready(dev) || !local_host_allowed(dev) ||
	    store_degraded())
		return;
	if (local_attach(dev, NULL, err, sizeof(err)) == -1) {
		/* no retry loop: `usbgw attach` tries again */
		hold_set(dev);
		snprintf(detail, sizeof(detail), "automatic attach: %s", err);
		log_warnx("%s: %s", dev->busid, detail);
		store_audit_device(dev, "local-attach-failed", NULL, detail);
	}
}

/* dev is being freed: what is attached of it loses its device. */
static void
local_device_freed(struct device *dev)
{
	struct local_att *la, *next;

	for (la = TAILQ_FIRST(&L.atts); la != NULL; la = next) {
		next = TAILQ_NEXT(la, entry);
		if (la->dev != dev)
			continue;
		la->dev = NULL;
		if (!L.stopping && !la->kept)
			local_teardown(la, NULL, "device gone");
	}
}

/* Local facts for `list` and `show`. */
static void
local_device_json(const struct device *dev, json_t *o)
{
	struct local_att *la;
	char peer[48];
	json_t *l;

	if (!L.on)
		return;
	if ((la = att_find(dev)) == NULL) {
		if (held(dev))
			json_object_set_new(o, "local", json_pack("{s:b}",
			    "held", 1));
		return;
	}
	l = json_pack("{s:i, s:s, s:s, s:b}", "port", la->ctx.port, "mode",
	    attach_mode_name(la->ctx.mode), "local_busid", la->ctx.local_busid,
	    "authorization_pending", la->authz_left > 0);
	if (l != NULL)
		json_object_set_new(o, "local", l);
	if (dev->ds == NULL) {
		snprintf(peer, sizeof(peer), "local:vhci %d", la->ctx.port);
		json_object_set_new(o, "attached_to", json_string(peer));
	}
}

/* ---- start: open vhci, reconcile ---------------------------------- */

static void
report_foreign(const struct attach_found *f)
{
	char detail[160];
	json_t *d;

	snprintf(detail, sizeof(detail), "vhci port %d holds %s (devid %08x, "
	    "fd %d) that the gateway did not attach; left alone", f->port,
	    f->live ? f->local_busid : "a starting device", f->devid,
	    f->kernel_fd);
	log_warnx("local: %s", detail);
	store_audit("vhci-foreign", NULL, "vhci", detail);
	d = json_pack("{s:i, s:b, s:s, s:s}", "port", f->port, "live",
	    f->live, "local_busid", f->local_busid, "speed",
	    usbip_speed_name(f->speed));
	if (d != NULL)
		json_object_set_new(d, "devid", json_integer(f->devid));
	control_event("vhci-foreign", d);
}

static struct exporter *
exporter_by_id(int64_t id)
{
	struct exporter *exp;

	TAILQ_FOREACH(exp, &gw->exporters, entry)
		if (!exp->dead && exp->id == id)
			return exp;
	return NULL;
}

/*
 * Take back a direct attachment of the previous process: the device
 * object is rebuilt from the database (its exporter no longer lists it:
 * the kernel holds its session), attached, with a claim that has no
 * socket, then decided again like any other.  -1 if it cannot be.
 */
static int
local_adopt(const struct local_record *rec, const struct attach_found *f)
{
	struct usbip_intf intf[USBIP_MAX_INTERFACES];
	struct usbgw_identity *id;
	struct db_device d;
	struct usbip_dev ur;
	struct exporter *exp;
	struct device *dev;
	struct upstream *up;
	struct local_att *la;
	char reason[96];
	int i;

	if (db_device_get(store_db(), rec->device_id, &d) != 1)
		return -1;
	if ((exp = exporter_by_id(d.exporter_id)) == NULL) {
		log_warnx("local: %s: its exporter is no longer configured",
		    d.ident.busid);
		return -1;
	}
	id = &d.ident;
	TAILQ_FOREACH(dev, &exp->devices, entry)
		if (!dev->dead && strcmp(dev->up_busid, id->exporter_busid) == 0)
			return -1;
	memset(&ur, 0, sizeof(ur));
	memset(intf, 0, sizeof(intf));
	usbgw_strlcpy(ur.busid, id->exporter_busid, sizeof(ur.busid));
	ur.busnum = rec->r.devid >> 16;
	ur.devnum = rec->r.devid & 0xffff;
	ur.speed = f->speed != 0 ? f->speed : id->speed;
	ur.idVendor = id->vid;
	ur.idProduct = id->pid;
	ur.bcdDevice = id->bcd_device;
	ur.bDeviceClass = id->dev_class;
	ur.bDeviceSubClass = id->dev_subclass;
	ur.bDeviceProtocol = id->dev_protocol;
	ur.bNumInterfaces = id->n_ifaces < USBIP_MAX_INTERFACES ?
	    id->n_ifaces : USBIP_MAX_INTERFACES;
	for (i = 0; i < ur.bNumInterfaces; i++) {
		intf[i].bInterfaceClass = id->ifaces[i].cls;
		intf[i].bInterfaceSubClass = id->ifaces[i].subcls;
		intf[i].bInterfaceProtocol = id->ifaces[i].proto;
	}
	up = xcalloc(1, sizeof(*up));
	upstream_set_state(up, UP_RELAYING, "restored");
	up->devid = rec->r.devid;
	up->rec = ur;
	/* the identity an earlier probe verified, as the database kept it */
	dev = device_restore(exp, &ur, id, up);
	dev->gw_devid = (uint32_t)(((dev->exp->id & 0x7fff) + 1) << 16 |
	    ((dev->id & 0xffff) ? (dev->id & 0xffff) : 1));

	la = att_new(dev);
	la->ctx.mode = ATTACH_DIRECT;
	la->ctx.devid = rec->r.devid;
	la->ctx.speed = ur.speed;
	la->ctx.state = ATTACH_ATTACHED;
	la->ctx.port = rec->r.port;
	la->ctx.kernel_fd = rec->r.kernel_fd;
	usbgw_strlcpy(la->ctx.local_busid, f->local_busid,
	    sizeof(la->ctx.local_busid));
	la->up = up;
	la->attach_id = dev->attach_id = rec->attach_id;
	snprintf(reason, sizeof(reason), "adopted from vhci port %d after a "
	    "restart (direct)", rec->r.port);
	device_set_state(dev, DEV_ATTACHED, NULL, reason);
	store_audit_device(dev, "local-adopt", NULL, reason);
	att_arm(la, LOCAL_CHECK_MS);
	/* decided again now: what lost its approval meanwhile goes */
	device_eval(dev, NULL, NULL);
	return 0;
}

/* A port that is ours but dead (or unusable): detach it. */
static void
local_drop(const struct local_record *rec, const char *why)
{
	struct attach_ctx ctx;
	char detail[160];

	attach_ctx_init(&ctx);
	snprintf(ctx.busid, sizeof(ctx.busid), "device %lld",
	    (long long)rec->device_id);
	ctx.state = ATTACH_ATTACHED;
	ctx.port = rec->r.port;
	ctx.devid = rec->r.devid;
	ctx.kernel_fd = rec->r.kernel_fd;
	ctx.mode = rec->r.mode;
	if (L.be->ops->detach(L.be, &ctx) == -1)
		log_warnx("local: vhci port %d not detached", rec->r.port);
	snprintf(detail, sizeof(detail), "vhci port %d (%s): %s", rec->r.port,
	    attach_mode_name(rec->r.mode), why);
	store_audit("local-stale", NULL, "vhci", detail);
	row_end(rec->attach_id, why);
}

static void	local_unsure_cb(evutil_socket_t, short, void *);

/*
 * Match the vhci ports in use against the attachments the database
 * remembers (attach_classify): adopt live direct ones, detach ours that
 * are dead, end the records of devices that left, and report the ports
 * nobody here attached (only on the first pass: `report`).
 */
static void
local_reconcile(struct local_record *recs, size_t nrec, bool report)
{
	struct attach_found *found = NULL;
	struct attach_record *r;
	struct local_record *again = NULL;
	size_t nfound = 0, i, nagain = 0;
	char why[128];

	if (L.be->ops->reconcile(L.be, &found, &nfound) == -1) {
		log_warnx("local: cannot list the vhci ports");
		return;
	}
	r = xcalloc(nrec ? nrec : 1, sizeof(*r));
	for (i = 0; i < nrec; i++)
		r[i] = recs[i].r;
	attach_classify(found, nfound, r, nrec);
	if (report)
		for (i = 0; i < nfound; i++)
			if (found[i].verdict == ATTACH_V_FOREIGN)
				report_foreign(&found[i]);
	for (i = 0; i < nrec; i++) {
		struct local_record *rec = &recs[i];
		const struct attach_found *f;

		if (r[i].found == -1) {
			snprintf(why, sizeof(why), "the device left vhci port "
			    "%d while the gateway was down", rec->r.port);
			log_info("local: %s", why);
			store_audit("local-lost", NULL, "vhci", why);
			row_end(rec->attach_id, why);
			continue;
		}
		f = &found[r[i].found];
		switch (f->verdict) {
		case ATTACH_V_ADOPT:
			if (local_adopt(rec, f) == 0)
				break;
			local_drop(rec, "cannot be adopted");
			break;
		case ATTACH_V_STALE:
			local_drop(rec, "its relay ended with the previous "
			    "process");
			break;
		case ATTACH_V_UNSURE:
			if (++rec->tries < LOCAL_UNSURE_TRIES) {
				again = xreallocarray(again, nagain + 1,
				    sizeof(*again));
				again[nagain++] = *rec;
				break;
			}
			/* never came up: not provably ours, leave the port */
			snprintf(why, sizeof(why), "vhci port %d never showed "
			    "the device; left alone", rec->r.port);
			log_warnx("local: %s", why);
			store_audit("local-lost", NULL, "vhci", why);
			row_end(rec->attach_id, why);
			report_foreign(f);
			break;
		default:
			break;
		}
	}
	free(r);
	free(found);
	free(L.unsure);
	L.unsure = again;
	L.nunsure = nagain;
	if (nagain > 0) {
		struct timeval tv = { 0, LOCAL_UNSURE_MS * 1000 };

		if (L.unsure_ev == NULL)
			L.unsure_ev = evtimer_new(gw->base, local_unsure_cb,
			    NULL);
		evtimer_add(L.unsure_ev, &tv);
	}
	records_save();
}

static void
local_unsure_cb(evutil_socket_t fd, short what, void *arg)
{
	struct local_record *recs = L.unsure;
	size_t n = L.nunsure;

	L.unsure = NULL;
	L.nunsure = 0;
	local_reconcile(recs, n, false);
	free(recs);
}

/*
 * The usb bus directory of the sysfs tree vhci-root lives in:
 * ROOT/devices/platform -> ROOT/bus/usb (drivers_probe), so a test's
 * fake tree is used whole.
 */
static void
usb_bus_dir(const char *root, char *out, size_t len)
{
	char tmp[CONFIG_PATH_MAX], *slash;
	int i;

	usbgw_strlcpy(tmp, root, sizeof(tmp));
	for (i = 0; i < 2; i++) {
		while ((slash = strrchr(tmp, '/')) != NULL && slash[1] == '\0')
			*slash = '\0';
		if ((slash = strrchr(tmp, '/')) == NULL)
			break;
		*slash = '\0';
	}
	if (snprintf(out, len, "%s/bus/usb", tmp) >= (int)len)
		fatalx("vhci-root %s: path too long", root);
}

/*
 * Start local mode if the configuration asks for it: open vhci, apply
 * the lock-down (the start fails if it cannot be put in force), then
 * reconcile with what the database remembers.
 */
void
local_start(void)
{
	struct config *cfg = gw->cfg;
	struct attach_local_params ap;
	struct vhci_params vp;
	struct local_record *recs;
	struct vhci *v;
	char busdir[CONFIG_PATH_MAX], detail[256];
	size_t nrec;

	static const struct device_observer obs = {
		.decided = local_device_decided,
		.freed = local_device_freed,
		.json = local_device_json,
	};

	if (cfg->mode != CONFIG_MODE_LOCAL)
		return;
	device_observe(&obs);
	if (gethostname(L.hostname, sizeof(L.hostname)) == -1)
		usbgw_strlcpy(L.hostname, "localhost", sizeof(L.hostname));
	L.hostname[sizeof(L.hostname) - 1] = '\0';
	usb_bus_dir(cfg->vhci_root, busdir, sizeof(busdir));
	memset(&vp, 0, sizeof(vp));
	vp.platform_dir = cfg->vhci_root;
	vp.usb_bus_dir = busdir;
	vp.eagain_tries = -1;
	if ((v = vhci_open(&vp)) == NULL)
		fatalx("local mode: no usable vhci_hcd under %s",
		    cfg->vhci_root);
	if (cfg->vhci_controller >= 0 &&
	    vhci_restrict_controller(v, cfg->vhci_controller) == -1)
		fatalx("local mode: vhci-controller %d does not exist",
		    cfg->vhci_controller);
	memset(&ap, 0, sizeof(ap));
	ap.lockdown = cfg->vhci_lockdown;
	ap.per_interface = cfg->vhci_per_interface;
	if ((L.be = attach_local_new(v, &ap)) == NULL) {
		vhci_free(v);
		fatalx("local mode: vhci lock-down requested but not in force");
	}
	L.authorize = cfg->vhci_lockdown || cfg->vhci_per_interface;
	L.per_interface = cfg->vhci_per_interface != 0;
	L.on = true;
	snprintf(detail, sizeof(detail), "%u ports on %u controller%s, "
	    "attach %s, auto-attach %s, lock-down %s, per-interface %s",
	    vhci_nports(v), vhci_ncontrollers(v),
	    vhci_ncontrollers(v) == 1 ? "" : "s",
	    cfg->local_attach ? "inspected" : "direct",
	    cfg->local_auto_attach ? "yes" : "no",
	    cfg->vhci_lockdown ? "yes" : "no",
	    cfg->vhci_per_interface ? "yes" : "no");
	log_info("local mode: %s", detail);
	store_audit("local-start", NULL, "vhci", detail);

	recs = records_load(&nrec);
	local_reconcile(recs, nrec, true);
	free(recs);
}

/*
 * Clean stop.  Direct attachments stay: the kernel holds the exporter's
 * socket, so the device stays in use across the restart, and the
 * database keeps its attachment open (not a transition: the device
 * object just leaves the gateway's memory).  Inspected ones end, their
 * relay with them.
 */
void
local_shutdown(void)
{
	struct local_att *la, *next;
	struct local_hold *h;
	struct device *dev;
	char detail[128];

	if (!L.on)
		return;
	L.stopping = true;
	if (L.unsure_ev != NULL)
		event_free(L.unsure_ev);
	L.unsure_ev = NULL;
	for (la = TAILQ_FIRST(&L.atts); la != NULL; la = next) {
		next = TAILQ_NEXT(la, entry);
		dev = la->dev;
		if (la->ctx.mode != ATTACH_DIRECT || dev == NULL ||
		    dev->state != DEV_ATTACHED || la->ctx.state !=
		    ATTACH_ATTACHED || dev->up != la->up) {
			local_teardown(la, NULL, "gateway shutting down");
			continue;
		}
		snprintf(detail, sizeof(detail), "left attached to vhci port "
		    "%d across the restart (direct)", la->ctx.port);
		log_info("%s: %s", dev->busid, detail);
		store_audit_device(dev, "local-keep", NULL, detail);
		la->kept = true;
		la->dev = NULL;
		evtimer_del(la->tick);
		TAILQ_REMOVE(&dev->exp->devices, dev, entry);
		dev->up = NULL;
		upstream_close(la->up);
		la->up = NULL;
		device_free(dev);
	}
	records_save();
	while ((la = TAILQ_FIRST(&L.atts)) != NULL) {
		TAILQ_REMOVE(&L.atts, la, entry);
		att_free(la);
	}
	while ((h = TAILQ_FIRST(&L.holds)) != NULL) {
		TAILQ_REMOVE(&L.holds, h, entry);
		free(h);
	}
	free(L.unsure);
	L.unsure = NULL;
	L.be->ops->free(L.be);
	L.be = NULL;
	L.on = false;
}

/* ---- control commands ------------------------------------------------ */

#define ERR(code, ...) do { snprintf(err, errlen, __VA_ARGS__); return code; } while (0)

static enum ctl_err
local_find(json_t *args, struct device **devp, char *err, size_t errlen)
{
	const char *busid;
	enum ctl_err e;
	int n;

	if (!L.on)
		ERR(CTL_E_REFUSED, "local mode is off");
	if ((e = ctl_arg_busid(args, &busid, err, errlen)) != CTL_OK)
		return e;
	*devp = gw_device_find(busid, &n);
	if (*devp == NULL && n > 1) {
		char cand[512];

		gw_device_candidates(busid, cand, sizeof(cand));
		ERR(CTL_E_AMBIGUOUS, "busid %s matches %d devices: %s "
		    "(give more of the busid)", busid, n, cand);
	}
	if (*devp == NULL)
		ERR(CTL_E_NOTFOUND, "no device matches busid %s", busid);
	return CTL_OK;
}

/*
 * A wait (CTL_E_AGAIN) pins the device it found: control.c runs this
 * again with the same args, which then name that device exactly (its
 * full busid and its identity digest, "waited_for"), so that a device that
 * took the busid meanwhile is not attached in its place.
 */
enum ctl_err
local_ctl_attach(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	struct local_att *la;
	struct device *dev;
	enum ctl_err e;
	json_t *pin;
	char why[160];

	if ((e = local_find(args, &dev, err, errlen)) != CTL_OK)
		return e;
	pin = json_object_get(args, "waited_for");
	if (pin != NULL && (!json_is_string(pin) ||
	    strcmp(json_string_value(pin), dev->ident.identity) != 0))
		ERR(CTL_E_REFUSED, "%s is another device now (it changed while "
		    "the attach waited for its claim)", dev->busid);
	if ((la = att_find(dev)) != NULL) {
		/* attached meanwhile (local-auto-attach): what was asked */
		if (pin != NULL) {
			*res = device_json(dev);
			return CTL_OK;
		}
		ERR(CTL_E_REFUSED, "%s is attached to vhci port %d already",
		    dev->busid, la->ctx.port);
	}
	if (dev->state != DEV_AUTHORIZED)
		ERR(CTL_E_REFUSED, "%s is %s, not authorized", dev->busid,
		    dev_state_name(dev->state));
	if (!local_host_allowed(dev))
		ERR(CTL_E_REFUSED, "%s is not authorized for this host (%s)",
		    dev->busid, L.hostname);
	if (dev->ds != NULL)
		ERR(CTL_E_REFUSED, "%s is in use by %s", dev->busid,
		    dev->ds->peer);
	if (!L.per_interface && local_has_ipol(dev))
		ERR(CTL_E_REFUSED, "%s: its rule has an interface-policy: local "
		    "mode keeps denied interfaces from their drivers only with "
		    "vhci-per-interface = yes", dev->busid);
	if (!local_ready(dev)) {
		if (!device_claim_coming(dev))
			ERR(CTL_E_REFUSED, "%s is not ready: the gateway holds "
			    "no claim on it at its exporter (claim %s)",
			    dev->busid, dev->up == NULL ? "none" :
			    "not idle");
		/* its claim is being taken (again): control.c asks again */
		json_object_set_new(args, "busid", json_string(dev->busid));
		json_object_set_new(args, "waited_for",
		    json_string(dev->ident.identity));
		ERR(CTL_E_AGAIN, "%s is not ready: its claim was not taken "
		    "in time", dev->busid);
	}
	hold_clear(dev);
	if (local_attach(dev, who, why, sizeof(why)) == -1) {
		store_audit_device(dev, "local-attach-failed", who, why);
		ERR(CTL_E_INTERNAL, "%s: %s", dev->busid, why);
	}
	*res = device_json(dev);
	return CTL_OK;
}

enum ctl_err
local_ctl_detach(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	struct local_att *la;
	struct device *dev;
	enum ctl_err e;

	if ((e = local_find(args, &dev, err, errlen)) != CTL_OK)
		return e;
	if ((la = att_find(dev)) == NULL)
		ERR(CTL_E_REFUSED, "%s is not attached to this host",
		    dev->busid);
	hold_set(dev);
	local_teardown(la, who, "detached by operator");
	*res = device_json(dev);
	return CTL_OK;
}
