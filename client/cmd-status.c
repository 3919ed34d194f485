/* usbgw status: the daemon's health at a glance. */
#include <stdio.h>
#include <string.h>

#include "usbgw.h"

static int
cmd_status_exec(struct cmd_ctx *ctx)
{
	json_t *res, *me = NULL, *ex, *dv, *v;
	const char *k;
	char up[32], buf[512];
	size_t n = 0;
	json_int_t total = 0;
	int st;

	if ((st = cmd_call(ctx, "status", NULL, &res)) != EXIT_OK || ctx->json)
		goto out;
	fmt_duration(up, sizeof(up),
	    json_integer_value(json_object_get(res, "uptime")));
	printf("daemon       usbgwd %s, pid %s, up %s\n", jstr(res, "version"),
	    jfmt(res, "pid"), up);
	printf("mode         %s\n", jstr(res, "mode"));
	if ((v = json_object_get(res, "store")) != NULL) {
		if (strcmp(jstr(res, "store"), "degraded") == 0) {
			fmt_duration(buf, sizeof(buf), json_integer_value(
			    json_object_get(res, "store_degraded_ms")) / 1000);
			printf("store        degraded for %s: the database is "
			    "unreachable, nothing new is authorized "
			    "(store-loss %s)\n", buf, jstr(res, "store_loss"));
		} else
			printf("store        ok\n");
	}
	ex = json_object_get(res, "exporters");
	printf("exporters    %s (%s up, %s down)\n", jfmt(ex, "total"),
	    jfmt(ex, "up"), jfmt(ex, "down"));
	dv = json_object_get(res, "devices");
	buf[0] = '\0';
	json_object_foreach(dv, k, v) {
		if (json_integer_value(v) == 0)
			continue;
		total += json_integer_value(v);
		n += (size_t)snprintf(buf + n, n < sizeof(buf) ? sizeof(buf) - n :
		    0, "%s%" JSON_INTEGER_FORMAT " %s", n > 0 ? ", " : "",
		    json_integer_value(v), k);
		if (n >= sizeof(buf))
			break;
	}
	printf("devices      %" JSON_INTEGER_FORMAT "%s%s\n", total,
	    total > 0 ? ": " : "", buf);
	v = json_object_get(res, "claims");
	if (v != NULL)
		printf("claims       %s probing, %s queued\n",
		    jfmt(v, "probing"), jfmt(v, "queued"));
	printf("attachments  %s\n", jfmt(res, "attachments"));
	printf("URB rate     %s/s\n", jfmt(res, "urb_rate"));
	printf("control      %s connections, %s watching\n",
	    jfmt(res, "connections"), jfmt(res, "watchers"));
	printf("hooks        %s running\n", jfmt(res, "hooks_running"));
	if (client_call_quiet(ctx->cl, "hello", NULL, &me, buf,
	    sizeof(buf)) == EXIT_OK) {
		printf("you          ");
		print_safe(stdout, jstr(me, "name"));
		printf(" (uid %s), privilege %s\n", jfmt(me, "uid"),
		    jstr(me, "privilege"));
	}
	json_decref(me);
out:
	json_decref(res);
	return st;
}

const struct cmd_entry cmd_status_entry = {
	"status", "[--json]",
	"daemon health: uptime, exporters, devices per state, attachments, "
	"URB rate",
	PRIV_READ, 0, 0, NULL, cmd_status_exec
};
