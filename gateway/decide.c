/*
 * The decision for one device, and for one device and one vhci host:
 * an operator's denial or approval for this presence first, then a
 * revocation, then the rules (first match wins), then "ask".
 */
#include <string.h>
#include <time.h>

#include "gw.h"
#include "log.h"
#include "util.h"

/* Does the grant's to-host admit this session's host? */
static bool
grant_host_ok(const struct dev_grant *g, const struct dsession *ds)
{
	if (g->to_host[0] == '\0' || ds == NULL)
		return true;
	return strcmp(g->to_host, ds->host) == 0;
}

void
device_decide(struct device *dev, const struct dsession *ds,
    struct decision *d)
{
	memset(d, 0, sizeof(*d));
	d->actor.kind = ACTOR_SYSTEM;
	usbgw_strlcpy(d->actor.name, "system", sizeof(d->actor.name));

	if (dev->approval.active) {
		if (dev->approval.deny) {
			d->target = DECIDE_BLOCK;
			d->actor = dev->approval.by;
			usbgw_strlcpy(d->why, "denied by operator", sizeof(d->why));
			return;
		}
		if (grant_host_ok(&dev->approval, ds)) {
			d->target = DECIDE_ALLOW;
			d->actor = dev->approval.by;
			usbgw_strlcpy(d->why, "approved by operator",
			    sizeof(d->why));
			return;
		}
	}
	if (ds != NULL) {
		struct dev_grant g;

		/* a decision limited to this vhci host */
		if (store_grant_for_host(dev, ds->host, &g) == 1 &&
		    grant_host_ok(&g, ds)) {
			d->target = g.deny ? DECIDE_BLOCK : DECIDE_ALLOW;
			d->actor = g.by;
			usbgw_strlcpy(d->why, g.deny ? "denied for this host" :
			    "approved for this host", sizeof(d->why));
			return;
		}
	}
	if (dev->revoked) {
		d->target = DECIDE_ASK;
		usbgw_strlcpy(d->why, "revoked; waiting for an operator",
		    sizeof(d->why));
		return;
	}
	if (policy_decide_device(dev, ds, d) == 0)
		return;
	d->target = DECIDE_ASK;
	usbgw_strlcpy(d->why, "no rule matched", sizeof(d->why));
}

/* May this session's host use the (authorized) device? */
bool
device_allowed_for(struct device *dev, const struct dsession *ds)
{
	struct decision d;

	device_decide(dev, ds, &d);
	return d.target == DECIDE_ALLOW;
}
