/* usbgw gateways: the gateways that run on this gateway's database. */
#include <stdio.h>

#include "usbgw.h"

static const struct cmd_opt opts[] = {
	{ NULL, 0, NULL, NULL }
};

static int
cmd_gateways_exec(struct cmd_ctx *ctx)
{
	struct table *t;
	json_t *res, *g;
	size_t i;
	char started[32], beat[32];
	int st;

	if ((st = cmd_call(ctx, "gateways", NULL, &res)) != EXIT_OK ||
	    ctx->json)
		goto out;
	t = table_new(6, "NAME", "ADDRESS", "VERSION", "STARTED", "HEARTBEAT",
	    "");
	json_array_foreach(res, i, g) {
		fmt_time(started, sizeof(started), json_integer_value(
		    json_object_get(g, "started_at")));
		fmt_age(beat, sizeof(beat), json_integer_value(
		    json_object_get(g, "heartbeat")));
		table_add(t, jstr(g, "name"), jstr(g, "address"),
		    jstr(g, "version"), started, beat,
		    json_is_true(json_object_get(g, "self")) ? "(this one)" : "");
	}
	table_print(t, stdout);
	table_free(t);
out:
	json_decref(res);
	return st;
}

const struct cmd_entry cmd_gateways_entry = {
	"gateways", "",
	"list the gateways that run on this database, with their heartbeat",
	PRIV_READ, 0, 0, opts, cmd_gateways_exec
};
