/* usbgw exporter list|add|remove: the hosts the gateway polls. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "usbgw.h"

static int
exporter_list_exec(struct cmd_ctx *ctx)
{
	struct table *t;
	json_t *res, *e;
	char addr[300], seen[32];
	const char *tls_w;
	size_t i;
	int st;

	if ((st = cmd_call(ctx, "exporter.list", NULL, &res)) != EXIT_OK ||
	    ctx->json)
		goto out;
	if (json_array_size(res) == 0) {
		printf("no exporters\n");
		goto out;
	}
	t = table_new(6, "NAME", "ADDRESS", "STATUS", "DEVICES", "LAST SEEN",
	    "ERROR");
	table_align_right(t, 3);
	json_array_foreach(res, i, e) {
		const char *h = jstr(e, "host");
		bool agent = strcmp(jstr(e, "kind"), "agent") == 0;
		bool tls;

		/* TLS shown only where it is on: stock exporters read as before */
		tls_w = jstr(e, "tls");
		tls = *tls_w != '\0' && strcmp(tls_w, "off") != 0;
		if (strcmp(jstr(e, "kind"), "agent-dialout") == 0)
			snprintf(addr, sizeof(addr), "agent from %s%s%s%s", h,
			    tls ? " (tls " : "", tls ? tls_w : "", tls ? ")" :
			    "");
		else
			snprintf(addr, sizeof(addr), strchr(h, ':') != NULL ?
			    "[%s]:%s%s%s%s%s" : "%s:%s%s%s%s%s", h,
			    jfmt(e, "port"), agent || tls ? " (" : "",
			    agent ? "agent" : "", agent && tls ? ", " : "",
			    tls ? "tls required)" : agent ? ")" : "");
		fmt_time(seen, sizeof(seen),
		    json_integer_value(json_object_get(e, "last_seen")));
		table_add(t, jstr(e, "name"), addr, *jstr(e, "status") != '\0' ?
		    jstr(e, "status") : jstr(e, "state"), jfmt(e, "devices"),
		    seen, *jstr(e, "last_error") != '\0' ?
		    jstr(e, "last_error") : jstr(e, "reason"));
	}
	table_print(t, stdout);
	table_free(t);
out:
	json_decref(res);
	return st;
}

static int
exporter_add_exec(struct cmd_ctx *ctx)
{
	struct config_addr a;
	const char *es;
	json_t *res;
	int st;

	if (config_parse_addr(ctx->argv[1], CONFIG_DEFAULT_PORT, &a, &es) != 0 ||
	    a.host[0] == '\0')
		return usage_error(ctx, "\"%s\": %s", ctx->argv[1],
		    a.host[0] == '\0' && es == NULL ? "expected a host" : es);
	st = cmd_call(ctx, "exporter.add", json_pack("{s:s, s:s, s:i, s:b, "
	    "s:s}", "name", ctx->argv[0], "host", a.host, "port", atoi(a.port),
	    "agent", arg_has(ctx, "agent"), "tls", arg_get(ctx, "tls") != NULL ?
	    arg_get(ctx, "tls") : "off"), &res);
	if (st == EXIT_OK && !ctx->json) {
		printf("added %s ", arg_has(ctx, "agent") ? "agent" : "exporter");
		print_safe(stdout, ctx->argv[0]);
		printf(" at %s%s%s:%s%s\n", strchr(a.host, ':') ? "[" : "",
		    a.host, strchr(a.host, ':') ? "]" : "", a.port,
		    arg_get(ctx, "tls") != NULL && strcmp(arg_get(ctx, "tls"),
		    "required") == 0 ? " (TLS required)" : "");
	}
	json_decref(res);
	return st;
}

static int
exporter_remove_exec(struct cmd_ctx *ctx)
{
	json_t *res;
	int st;

	st = cmd_call(ctx, "exporter.remove", json_pack("{s:s}", "name",
	    ctx->argv[0]), &res);
	if (st == EXIT_OK && !ctx->json) {
		printf("removed exporter ");
		print_safe(stdout, ctx->argv[0]);
		printf("\n");
	}
	json_decref(res);
	return st;
}

const struct cmd_entry cmd_exporter_list_entry = {
	"exporter list", "[--json]", "list exporters and whether they answer",
	PRIV_READ, 0, 0, NULL, exporter_list_exec
};
static const struct cmd_opt add_opts[] = {
	{ "agent", 0, NULL, "a usbgw-agent: keep a control connection to it "
	    "(pushed hot-plug; polled every 60 s as a backstop)" },
	{ "tls", 0, "required|off", "TLS on every connection to it, the "
	    "peer an agent whose certificate names it (default off: plain "
	    "USB/IP, stock usbipd)" },
	{ NULL, 0, NULL, NULL }
};

const struct cmd_entry cmd_exporter_add_entry = {
	"exporter add", "NAME HOST[:PORT] [--agent] [--tls required|off]",
	"add an exporter (usbipd, or with --agent a usbgw-agent) for the "
	"gateway to poll",
	PRIV_ADMIN, 2, 2, add_opts, exporter_add_exec
};
const struct cmd_entry cmd_exporter_remove_entry = {
	"exporter remove", "NAME",
	"remove an exporter; its devices go away",
	PRIV_ADMIN, 1, 1, NULL, exporter_remove_exec
};
