/*
 * The event bus: every event an operator may care about goes to the
 * control socket's event stream (usbgw watch) and to the configured
 * hooks, with the same data.  Below the objects that publish events
 * (gateway/LAYERS): device.c and exporter.c build their events' data
 * and hand it here.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/util.h"
#include "control/control.h"
#include "control/hooks.h"
#include "core/events.h"
#include "core/loop.h"
#include "core/store.h"

/* Announce to watchers and hooks; data is stolen. */
void
gw_emit(const char *type, json_t *data)
{
	hooks_run_json(type, data);
	control_event(type, data);
}

void
gw_policy_event(const struct actor *who, const char *change)
{
	json_t *d = json_pack("{s:s, s:s}", "actor", who ? who->name : "system",
	    "change", change);

	gw_emit("policy", d);
}
