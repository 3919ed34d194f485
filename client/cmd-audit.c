/* usbgw audit [--since] [--device] | audit verify | audit prune --before */
#include <stdio.h>
#include <time.h>

#include "usbgw.h"
#include "util.h"

static const struct cmd_opt list_opts[] = {
	{ "since", 0, "TIME", "rows from TIME on (a time, or a duration ago: "
	    "2h)" },
	{ "device", 'd', "BUSID", "rows about one device" },
	{ "limit", 'n', "N", "at most N rows (default 100)" },
	{ NULL, 0, NULL, NULL }
};

static const struct cmd_opt prune_opts[] = {
	{ "before", 0, "TIME", "delete rows older than TIME (or a duration "
	    "ago: 90d)" },
	{ NULL, 0, NULL, NULL }
};

static int
audit_exec(struct cmd_ctx *ctx)
{
	const char *since = arg_get(ctx, "since"), *dev = arg_get(ctx, "device");
	const char *limit = arg_get(ctx, "limit"), *es;
	struct table *t;
	json_t *args, *res, *r;
	char err[256], when[32], actor[128];
	long long n;
	time_t ts;
	size_t i;
	int st;

	args = json_object();
	if (since != NULL) {
		if (parse_since(since, time(NULL), &ts, err, sizeof(err)) != 0) {
			json_decref(args);
			return usage_error(ctx, "--since %s", err);
		}
		json_object_set_new(args, "since", json_integer(ts));
	}
	if (limit != NULL) {
		if (parse_num(limit, 1, 10000, &n, &es) != 0) {
			json_decref(args);
			return usage_error(ctx, "--limit %s: expected 1 to 10000",
			    limit);
		}
		json_object_set_new(args, "limit", json_integer(n));
	}
	if (dev != NULL)
		json_object_set_new(args, "device", json_string(dev));
	if ((st = cmd_call(ctx, "audit.list", args, &res)) != EXIT_OK ||
	    ctx->json)
		goto out;
	if (json_array_size(res) == 0) {
		printf("no audit rows\n");
		goto out;
	}
	t = table_new(7, "TIME", "BUSID", "ACTION", "FROM", "TO", "ACTOR",
	    "REASON");
	json_array_foreach(res, i, r) {
		fmt_time(when, sizeof(when),
		    json_integer_value(json_object_get(r, "time")));
		table_add(t, when, jfmt(r, "busid"), jstr2(r, "action", "event"),
		    jfmt(r, "from"), jfmt(r, "to"),
		    row_actor(r, actor, sizeof(actor)),
		    jstr2(r, "reason", "detail"));
	}
	table_print(t, stdout);
	table_free(t);
out:
	json_decref(res);
	return st;
}

static int
audit_verify_exec(struct cmd_ctx *ctx)
{
	json_t *res;
	int st;

	if ((st = cmd_call(ctx, "audit.verify", NULL, &res)) != EXIT_OK)
		goto out;
	if (!json_is_true(json_object_get(res, "ok")))
		st = EXIT_REFUSED;
	if (ctx->json)
		goto out;
	if (st == EXIT_OK)
		printf("audit trail intact: %s rows", jfmt(res, "rows"));
	else
		printf("audit trail does NOT verify: ");
	if (*jstr(res, "message") != '\0') {
		printf("%s", st == EXIT_OK ? " (" : "");
		print_safe(stdout, jstr(res, "message"));
		printf("%s", st == EXIT_OK ? ")" : "");
	}
	printf("\n");
out:
	json_decref(res);
	return st;
}

static int
audit_prune_exec(struct cmd_ctx *ctx)
{
	const char *before = arg_get(ctx, "before");
	json_t *res;
	char err[256], when[32];
	time_t ts;
	int st;

	if (before == NULL)
		return usage_error(ctx, "--before is required");
	if (parse_since(before, time(NULL), &ts, err, sizeof(err)) != 0)
		return usage_error(ctx, "--before %s", err);
	st = cmd_call(ctx, "audit.prune", json_pack("{s:I}", "before",
	    (json_int_t)ts), &res);
	if (st == EXIT_OK && !ctx->json) {
		fmt_time(when, sizeof(when), (json_int_t)ts);
		printf("deleted %s audit rows older than %s\n",
		    jfmt(res, "deleted"), when);
	}
	json_decref(res);
	return st;
}

const struct cmd_entry cmd_audit_entry = {
	"audit", "[--since TIME] [--device BUSID] [--limit N] [--json]",
	"show the audit log: every transition, who did it and why",
	PRIV_READ, 0, 0, list_opts, audit_exec
};
const struct cmd_entry cmd_audit_verify_entry = {
	"audit verify", "[--json]",
	"check the audit trail is intact (exit 1 if it is not)",
	PRIV_READ, 0, 0, NULL, audit_verify_exec
};
const struct cmd_entry cmd_audit_prune_entry = {
	"audit prune", "--before TIME",
	"delete audit rows older than TIME",
	PRIV_ADMIN, 0, 0, prune_opts, audit_prune_exec
};
