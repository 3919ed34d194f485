/*
 * Events: every transition the operator may care about goes to the
 * control socket's event stream (usbgw watch) and to the configured
 * hooks, with the same data.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "control.h"
#include "gw.h"
#include "hooks.h"
#include "log.h"
#include "util.h"

/*
 * What allows the device now, as "approval": the operator's approval
 * that decided, or the rule; null when nothing allows it.
 */
static json_t *
approval_json(const struct device *dev)
{
	static const char *const scopes[] = { "once", "for", "until",
	    "permanent" };
	const struct decision *d = &dev->decision;
	char to[HOST_NAME_MAX_LEN + 1];
	unsigned i;

	if (d->verdict != VERDICT_ALLOW)
		return json_null();
	if (d->by == BY_APPROVAL)
		for (i = 0; i < dev->nappr; i++) {
			const struct approval *p = &dev->appr[i];

			if (p->id != d->approval_id)
				continue;
			host_match_format(&p->to, to, sizeof(to));
			return json_pack("{s:s, s:o, s:o, s:n, s:s, s:b}",
			    "scope", scopes[p->scope],
			    "expires_at", p->expires_at ?
			    json_integer(p->expires_at) : json_null(),
			    "to", to[0] ? json_string(to) : json_null(),
			    "rule_id", "by", p->by.name,
			    "override", p->override);
		}
	if (d->rule_id != 0)
		return json_pack("{s:s, s:n, s:n, s:I}", "scope",
		    d->by == BY_OPERATOR_RULE ? "permanent" : "rule",
		    "expires_at", "to", "rule_id", (json_int_t)d->rule_id);
	return json_null();
}

json_t *
device_json(const struct device *dev)
{
	char vid[5], pid[5], ifs[USBIP_MAX_INTERFACES * 9 + 1] = "";
	json_t *o, *a;
	int i;

	snprintf(vid, sizeof(vid), "%04x", dev->ident.vid);
	snprintf(pid, sizeof(pid), "%04x", dev->ident.pid);
	a = json_array();
	for (i = 0; i < dev->nintf; i++) {
		char one[16];

		snprintf(one, sizeof(one), "%02x:%02x:%02x",
		    dev->intf[i].bInterfaceClass,
		    dev->intf[i].bInterfaceSubClass,
		    dev->intf[i].bInterfaceProtocol);
		json_array_append_new(a, json_string(one));
		if (i > 0)
			usbgw_strlcat(ifs, " ", sizeof(ifs));
		usbgw_strlcat(ifs, one, sizeof(ifs));
	}
	o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s,"
	    " s:o, s:I, s:I}",
	    "busid", dev->busid,
	    "exporter", dev->exp->name,
	    "exporter_busid", dev->up_busid,
	    "state", dev_state_name(dev->state),
	    "vid", vid,
	    "pid", pid,
	    "manufacturer", dev->ident.manufacturer,
	    "product", dev->ident.product,
	    "serial", dev->ident.serial,
	    "hash", dev->ident.hash,
	    "speed", usbip_speed_name(dev->up ? dev->up->rec.speed :
		dev->listed.speed),
	    "interfaces", a,
	    "rule_id", (json_int_t)dev->rule_id,
	    "id", (json_int_t)dev->id);
	if (o == NULL)
		return json_object();
	if (dev->ds != NULL) {
		json_object_set_new(o, "attached_to", json_string(dev->ds->peer));
		json_object_set_new(o, "bytes_to_host",
		    json_integer((json_int_t)dev->bytes_down));
		json_object_set_new(o, "bytes_to_device",
		    json_integer((json_int_t)dev->bytes_up));
		json_object_set_new(o, "urbs", json_integer((json_int_t)dev->urbs));
	}
	local_device_json(dev, o);
	json_object_set_new(o, "approval", approval_json(dev));
	{
		json_t *dj = device_decisions_json(dev);

		json_object_update_missing(o, dj);
		json_decref(dj);
	}
	json_object_set_new(o, "since", json_integer(dev->state_since));
	return o;
}

/* Announce to watchers and hooks; data is stolen. */
void
gw_emit(const char *type, json_t *data)
{
	hooks_run_json(type, data);
	control_event(type, data);
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
gw_exporter_event(struct exporter *exp, const char *why)
{
	json_t *d = json_pack("{s:s, s:s, s:i, s:s, s:s}", "exporter", exp->name,
	    "host", exp->host, "port", (int)exp->port,
	    "state", exp_state_name(exp->state), "reason", why ? why : "");

	store_audit(exp->state == EXP_UP ? "exporter-up" : "exporter-down",
	    NULL, exp->name, why);
	gw_emit(exp->state == EXP_UP ? "exporter-up" : "exporter-down", d);
}

void
gw_audit_exporter(struct exporter *exp, const char *action, const char *detail)
{
	store_audit(action, NULL, exp->name, detail);
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
gw_identity_event(struct device *dev)
{
	json_t *d = device_json(dev);

	json_object_set_new(d, "old_hash", json_string(dev->old_hash));
	gw_emit("identity-change", d);
}

void
gw_policy_event(const struct actor *who, const char *change)
{
	json_t *d = json_pack("{s:s, s:s}", "actor", who ? who->name : "system",
	    "change", change);

	gw_emit("policy", d);
}
