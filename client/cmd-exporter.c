/* usbgw exporter list|add|remove|import: the hosts the gateway polls. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/config.h"
#include "usbgw.h"
#include "base/util.h"

static int
exporter_list_exec(struct cmd_ctx *ctx)
{
	struct table *t;
	json_t *res, *e;
	char addr[300], seen[32];
	const char *tls_w, *err, *st_w;
	size_t i;
	int st;
	bool leases = false;

	if ((st = cmd_call(ctx, "exporter.list", NULL, &res)) != EXIT_OK ||
	    ctx->json)
		goto out;
	if (json_array_size(res) == 0) {
		printf("no exporters\n");
		goto out;
	}
	/* several gateways on PostgreSQL: a HOLDER column (the lease's) */
	json_array_foreach(res, i, e)
		if (json_object_get(e, "holder") != NULL)
			leases = true;
	if (leases)
		t = table_new(7, "NAME", "ADDRESS", "STATUS", "HOLDER",
		    "DEVICES", "LAST SEEN", "ERROR");
	else
		t = table_new(6, "NAME", "ADDRESS", "STATUS", "DEVICES",
		    "LAST SEEN", "ERROR");
	table_align_right(t, leases ? 4 : 3);
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
		/* Unix seconds or null: "never" (local time, zone said) */
		if (json_integer_value(json_object_get(e, "last_seen")) > 0)
			fmt_time(seen, sizeof(seen), json_integer_value(
			    json_object_get(e, "last_seen")));
		else
			snprintf(seen, sizeof(seen), "never");
		err = *jstr(e, "last_error") != '\0' ? jstr(e, "last_error") :
		    *jstr(e, "reason") != '\0' ? jstr(e, "reason") : "-";
		st_w = *jstr(e, "status") != '\0' ? jstr(e, "status") :
		    jstr(e, "state");
		if (leases)
			table_add(t, jstr(e, "name"), addr, st_w,
			    *jstr(e, "holder") != '\0' ? jstr(e, "holder") :
			    "-", jfmt(e, "devices"), seen, err);
		else
			table_add(t, jstr(e, "name"), addr, st_w,
			    jfmt(e, "devices"), seen, err);
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
	struct net_addr a;
	const char *es;
	json_t *res;
	int st;

	if (parse_addr(ctx->argv[1], CONFIG_DEFAULT_PORT, &a, &es) != 0 ||
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

/*
 * The file's text, at most CONFIG_MAX_FILE bytes ("-": stdin).  NULL
 * with a message printed.
 */
static char *
import_read(const char *path, const char *shown)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
	char *buf, *nul;
	size_t len;

	if (f == NULL) {
		fprintf(stderr, "usbgw exporter import: %s: %s\n", shown,
		    strerror(errno));
		return NULL;
	}
	buf = xmalloc(CONFIG_MAX_FILE + 2);
	len = fread(buf, 1, CONFIG_MAX_FILE + 1, f);
	if (ferror(f)) {
		fprintf(stderr, "usbgw exporter import: %s: read error\n", shown);
		goto bad;
	}
	if (len > CONFIG_MAX_FILE) {
		fprintf(stderr, "usbgw exporter import: %s: larger than %d "
		    "bytes\n", shown, CONFIG_MAX_FILE);
		goto bad;
	}
	buf[len] = '\0';
	if ((nul = memchr(buf, '\0', len)) != NULL) {
		size_t line = 1;

		for (char *p = buf; p < nul; p++)
			line += *p == '\n';
		fprintf(stderr, "%s:%zu: expected text, got a NUL byte\n",
		    shown, line);
		goto bad;
	}
	if (f != stdin)
		fclose(f);
	return buf;
bad:
	if (f != stdin)
		fclose(f);
	free(buf);
	return NULL;
}

/*
 * Exporters from a file, one "NAME HOST[:PORT] [agent] [tls=...]" a
 * line: the daemon checks every line and takes all of them or none
 * (protocol.md 1.11.1); every refused line is printed with its number.
 */
static int
exporter_import_exec(struct cmd_ctx *ctx)
{
	const char *path = ctx->argc > 0 ? ctx->argv[0] : "-";
	const char *shown = strcmp(path, "-") == 0 ? "stdin" : path;
	json_t *res = NULL, *text, *details, *v;
	char *buf;
	size_t i;
	int st;

	if ((buf = import_read(path, shown)) == NULL)
		return EXIT_USAGE;
	text = json_string(buf);
	free(buf);
	if (text == NULL) {
		fprintf(stderr, "usbgw exporter import: %s: expected UTF-8 "
		    "text\n", shown);
		return EXIT_USAGE;
	}
	st = cmd_call(ctx, "exporter.import", json_pack("{s:o, s:s, s:b}",
	    "text", text, "file", shown, "replace", arg_has(ctx, "replace")),
	    &res);
	if (st != EXIT_OK) {
		details = client_error_details(ctx->cl);
		json_array_foreach(details, i, v) {
			print_safe(stderr, json_string_value(v) != NULL ?
			    json_string_value(v) : "?");
			fputc('\n', stderr);
		}
	} else if (!ctx->json) {
		printf("imported %s exporters (%s removed)\n",
		    jfmt(res, "imported"), jfmt(res, "removed"));
		if (arg_has(ctx, "replace") &&
		    json_integer_value(json_object_get(res, "file_exporters")) > 0)
			printf("left %s exporters of the configuration files "
			    "as they are: they are the files' (change them "
			    "there and reload)\n", jfmt(res, "file_exporters"));
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
static const struct cmd_opt import_opts[] = {
	{ "replace", 0, NULL, "the file is the whole set of exporters added "
	    "with usbgw: the others are removed (their devices go); those "
	    "of the config file and exporters.d are left as they are" },
	{ NULL, 0, NULL, NULL }
};

const struct cmd_entry cmd_exporter_import_entry = {
	"exporter import", "[FILE | -] [--replace]",
	"add exporters from a file, one \"NAME HOST[:PORT] [agent] "
	"[tls=required|off]\" a line: all of them, or none if a line is bad",
	PRIV_ADMIN, 0, 1, import_opts, exporter_import_exec
};
