/*
 * A device's life at the gateway (DESIGN.md, "The device's life"):
 *
 *   probing -> pending | authorized | blocked -> attached -> (detach)
 *   any -> gone;  revoke: authorized/attached -> pending/blocked
 *
 * Every transition goes through device_set_state(), which logs it,
 * writes the audit row, persists the state and announces the event.
 * Nothing reaches a device from a vhci host unless its state is
 * authorized at the moment of the import; the relay is torn down the
 * moment that stops being true.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "desc.h"
#include "identity.h"
#include "gw.h"
#include "log.h"
#include "util.h"

#define RECLAIM_FIRST_MS	100
#define RECLAIM_MAX_TRIES	50

static void	device_reclaim_cb(evutil_socket_t, short, void *);
static void	device_expire_cb(evutil_socket_t, short, void *);

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
device_new(struct exporter *exp, const struct usbip_dev *rec,
    const struct usbip_intf *intf)
{
	struct device *dev;

	dev = xcalloc(1, sizeof(*dev));
	dev->exp = exp;
	usbgw_strlcpy(dev->up_busid, rec->busid, sizeof(dev->up_busid));
	device_make_busid(exp->name, rec->busid, dev->busid);
	dev->listed = *rec;
	dev->nintf = rec->bNumInterfaces;
	memcpy(dev->intf, intf, sizeof(intf[0]) * dev->nintf);
	dev->state = DEV_PROBING;
	dev->state_since = (int64_t)time(NULL);
	dev->reclaim_ev = evtimer_new(gw->base, device_reclaim_cb, dev);
	dev->expire_ev = evtimer_new(gw->base, device_expire_cb, dev);
	TAILQ_INSERT_TAIL(&exp->devices, dev, entry);
	store_device_load(dev);		/* id, busid, state, approvals */
	log_info("%s: new device %s at exporter %s", dev->busid, dev->up_busid,
	    exp->name);
	return dev;
}

void
device_free(struct device *dev)
{
	int i;

	if (dev == NULL)
		return;
	local_device_freed(dev);
	if (dev->reclaim_ev != NULL)
		event_free(dev->reclaim_ev);
	if (dev->expire_ev != NULL)
		event_free(dev->expire_ev);
	for (i = 0; i < GW_MAX_CONFIGS; i++)
		free(dev->ident.config[i]);
	free(dev);
}

void
device_set_state(struct device *dev, enum dev_state st,
    const struct actor *who, const char *reason)
{
	static const struct actor sys = { .kind = ACTOR_SYSTEM, .name = "system" };
	enum dev_state old = dev->state;

	if (who == NULL)
		who = &sys;
	if (old == st)
		return;
	dev->state = st;
	dev->state_since = (int64_t)time(NULL);
	log_info("%s: %s -> %s by %s%s%s", dev->busid, dev_state_name(old),
	    dev_state_name(st), who->name, reason ? ": " : "",
	    reason ? reason : "");
	store_device_state(dev, old, who, reason);
	gw_device_event(dev, old, who, reason);
}

/* Start (or restart) the claim at the exporter. */
void
device_claim(struct device *dev)
{
	if (dev->up != NULL || dev->dead || dev->exp->dead)
		return;
	if (dev->rejected)
		return;		/* a reject rule released it for this presence */
	dev->up = upstream_new(dev);
	if (dev->up == NULL) {
		log_warnx("%s: cannot start claim", dev->busid);
		return;
	}
	if (dev->state == DEV_GONE || !dev->probed)
		device_set_state(dev, DEV_PROBING, NULL, "claiming");
}

/*
 * The claim is in place and the probe read the descriptors: identity
 * first (a changed hash is a different device), then the decision.
 */
void
device_claimed(struct device *dev)
{
	struct upstream *up = dev->up;

	dev->reclaim_tries = 0;
	device_load_endpoints(dev, up->rec.bConfigurationValue);
	device_load_interfaces(dev, up->rec.bConfigurationValue);
	store_device_identity(dev);	/* may flag an identity change */
	/* the devid vhci hosts see: from the database ids, after the row */
	dev->gw_devid = (uint32_t)(((dev->exp->id & 0x7fff) + 1) << 16 |
	    ((dev->id & 0xffff) ? (dev->id & 0xffff) : 1));
	if (dev->state == DEV_PROBING)
		gw_probed_event(dev);
	device_eval(dev, NULL, NULL);
}

void
device_claim_failed(struct device *dev, int status, const char *why)
{
	struct upstream *up = dev->up;
	struct timeval tv;

	log_info("%s: claim failed: %s", dev->busid, why);
	dev->up = NULL;
	upstream_close(up);
	if (dev->ds != NULL)
		dsession_close(dev->ds, why);
	if (status == ST_DEV_BUSY) {
		store_audit_device(dev, "claim-busy", NULL,
		    "the exporter reports the device in use by another importer");
	}
	if (status == ST_NODEV && !dev->seen) {
		exporter_device_gone(dev, "exporter no longer has the device");
		return;
	}
	/* Retry soon (the stub may still be resetting), then on the poll. */
	if (++dev->reclaim_tries <= RECLAIM_MAX_TRIES) {
		unsigned ms = RECLAIM_FIRST_MS * (dev->reclaim_tries < 10 ?
		    1 : 10);

		tv.tv_sec = ms / 1000;
		tv.tv_usec = (ms % 1000) * 1000;
		evtimer_add(dev->reclaim_ev, &tv);
	} else if (dev->state != DEV_GONE)
		exporter_device_gone(dev, why);
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

	if (dev->ds != NULL)
		dsession_close(dev->ds, why);	/* may close the claim too */
	evtimer_del(dev->reclaim_ev);
	up = dev->up;
	dev->up = NULL;
	upstream_close(up);
}

/* Schedule a fresh claim after the exporter has reset the device. */
static void
device_reclaim_later(struct device *dev)
{
	struct timeval tv = { 0, RECLAIM_FIRST_MS * 1000 };

	dev->reclaim_tries = 0;
	evtimer_add(dev->reclaim_ev, &tv);
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

static void
device_expire_cb(evutil_socket_t fd, short what, void *arg)
{
	struct device *dev = arg;

	if (dev->approval.active && dev->approval.expires_at != 0 &&
	    dev->approval.expires_at <= (int64_t)time(NULL)) {
		dev->approval.active = false;
		store_approval_end(dev, "expired");
		device_eval(dev, NULL, "approval expired");
	}
}

void
device_arm_expiry(struct device *dev)
{
	struct timeval tv;
	int64_t now = (int64_t)time(NULL), left;

	evtimer_del(dev->expire_ev);
	if (!dev->approval.active || dev->approval.expires_at == 0)
		return;
	left = dev->approval.expires_at - now;
	if (left < 0)
		left = 0;
	tv.tv_sec = (time_t)left;
	tv.tv_usec = 0;
	evtimer_add(dev->expire_ev, &tv);
}

/*
 * Decide the device's state from, in order: an operator's denial, an
 * operator's approval (or revocation) for this presence, the rules.
 * `host` is NULL at claim time: a rule limited to some vhci host then
 * authorizes the device, and the host is checked again at import.
 * Applies the result; tears down an attachment that no longer passes.
 */
void
device_eval(struct device *dev, const struct actor *who, const char *reason)
{
	struct decision d;
	enum dev_state st;

	/* between release and reclaim (up == NULL) the state still counts */
	if (dev->state == DEV_GONE || !dev->probed)
		return;
	device_decide(dev, NULL, &d);
	switch (d.target) {
	case DECIDE_ALLOW:
		st = DEV_AUTHORIZED;
		break;
	case DECIDE_BLOCK:
	case DECIDE_REJECT:
		st = DEV_BLOCKED;
		break;
	case DECIDE_ASK:
	default:
		st = DEV_PENDING;
		break;
	}
	dev->rule_id = d.rule_id;
	if (who == NULL)
		who = &d.actor;
	if (reason == NULL)
		reason = d.why;
	if (st == DEV_AUTHORIZED && dev->state == DEV_ATTACHED) {
		/* still allowed; the attached host must still pass too */
		if (dev->ds != NULL && !device_allowed_for(dev, dev->ds))
			dsession_close(dev->ds, "no longer allowed for this host");
		return;
	}
	device_set_state(dev, st, who, reason);
	/* The vhci host sees the disconnect now, after the state says why. */
	if (dev->ds != NULL)
		dsession_close(dev->ds, reason);
	if (d.target == DECIDE_REJECT) {
		dev->rejected = true;
		device_release(dev, "reject rule: claim released");
	}
	server_device_decided(dev);
	local_device_decided(dev);
}
