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
	if (dev->approval.active && !dev->approval.deny) {
		static const char *const scopes[] = { "once", "for", "until",
		    "permanent" };
		json_t *g = json_pack("{s:s, s:o, s:o, s:o, s:s}",
		    "scope", scopes[dev->approval.rule_id ? SCOPE_PERMANENT :
			dev->approval.scope],
		    "expires_at", dev->approval.expires_at ?
			json_integer(dev->approval.expires_at) : json_null(),
		    "to", dev->approval.to_host[0] ?
			json_string(dev->approval.to_host) : json_null(),
		    "rule_id", dev->approval.rule_id ?
			json_integer(dev->approval.rule_id) : json_null(),
		    "by", dev->approval.by.name);
		if (g != NULL)
			json_object_set_new(o, "approval", g);
	} else if (dev->state == DEV_AUTHORIZED || dev->state == DEV_ATTACHED) {
		json_object_set_new(o, "approval", dev->rule_id ?
		    json_pack("{s:s, s:n, s:n, s:I}", "scope", "rule",
		    "expires_at", "to", "rule_id", (json_int_t)dev->rule_id) :
		    json_null());
	} else
		json_object_set_new(o, "approval", json_null());
	json_object_set_new(o, "since", json_integer(dev->state_since));
	return o;
}

/* Announce to watchers and hooks; data is stolen. */
static void
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

/*
 * The vhci host selected another configuration: the interface set the
 * policy decided on may have changed, so decide again (this may tear
 * the attachment down).
 */
void
device_config_changed(struct device *dev)
{
	char msg[64];
	json_t *d;

	device_load_interfaces(dev, dev->cur_config);
	d = device_json(dev);
	json_object_set_new(d, "configuration", json_integer(dev->cur_config));
	snprintf(msg, sizeof(msg), "configuration %u selected", dev->cur_config);
	store_audit_device(dev, "set-configuration", NULL, msg);
	json_decref(d);
	device_eval(dev, NULL, msg);
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
