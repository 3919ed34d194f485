/* usbgw list: the devices the gateway knows, one line each. */
#include <stdio.h>
#include <string.h>

#include "usbgw.h"

static const struct cmd_opt opts[] = {
	{ "state", 0, "STATE", "only devices in STATE: probing, pending, "
	    "authorized, attached, blocked or gone" },
	{ "exporter", 'e', "NAME", "only devices of exporter NAME" },
	{ NULL, 0, NULL, NULL }
};

static int
cmd_list_exec(struct cmd_ctx *ctx)
{
	const char *state = arg_get(ctx, "state");
	const char *exporter = arg_get(ctx, "exporter");
	struct table *t;
	json_t *args, *res, *d;
	char since[32];
	size_t i;
	int st;

	if (state != NULL && dev_state_parse(state) < 0)
		return usage_error(ctx, "unknown state \"%s\" (probing, pending, "
		    "authorized, attached, blocked, gone)", state);
	args = json_object();
	if (state != NULL)
		json_object_set_new(args, "state", json_string(state));
	if (exporter != NULL)
		json_object_set_new(args, "exporter", json_string(exporter));
	if ((st = cmd_call(ctx, "list", args, &res)) != EXIT_OK || ctx->json)
		goto out;
	if (!json_is_array(res)) {
		fprintf(stderr, "usbgw: unexpected answer to list\n");
		st = EXIT_INTERNAL;
		goto out;
	}
	if (json_array_size(res) == 0) {
		printf("no devices\n");
		goto out;
	}
	t = table_new(7, "BUSID", "STATE", "ID", "EXPORTER", "UPSTREAM",
	    "SINCE", "DEVICE");
	json_array_foreach(res, i, d) {
		char id[16];
		const char *m = jstr(d, "manufacturer"), *p = jstr(d, "product");
		char name[512];

		snprintf(id, sizeof(id), "%s:%s", jstr(d, "vid"), jstr(d, "pid"));
		snprintf(name, sizeof(name), "%s%s%s%s%s%s", m,
		    *m != '\0' && *p != '\0' ? " " : "", p,
		    *jstr(d, "serial") != '\0' ? " [" : "", jstr(d, "serial"),
		    *jstr(d, "serial") != '\0' ? "]" : "");
		fmt_age(since, sizeof(since),
		    json_integer_value(json_object_get(d, "since")));
		table_add(t, jstr(d, "busid"), jstr(d, "state"), id,
		    jstr(d, "exporter"), jstr(d, "exporter_busid"), since, name);
	}
	table_print(t, stdout);
	table_free(t);
out:
	json_decref(res);
	return st;
}

const struct cmd_entry cmd_list_entry = {
	"list", "[--state STATE] [--exporter NAME] [--json]",
	"list the gateway's devices and their states",
	PRIV_READ, 0, 0, opts, cmd_list_exec
};
