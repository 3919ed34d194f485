/*
 * usbgw agent list|approve|reject|revoke: enrolled agents and vhci hosts
 * (protocol.md 1.10.10).  approve and reject name a pending pairing by the
 * 6-digit code both sides show (and --name when two share it); revoke
 * ends a name's certificate and cuts its connections.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "usbgw.h"

static int
agent_list_exec(struct cmd_ctx *ctx)
{
	struct table *t;
	json_t *res, *e;
	char until[32], fpr[24];
	size_t i;
	int st;

	if ((st = cmd_call(ctx, "agent.list", NULL, &res)) != EXIT_OK ||
	    ctx->json)
		goto out;
	if (json_array_size(res) == 0) {
		printf("no agents or hosts enrolled\n");
		goto out;
	}
	t = table_new(7, "NAME", "ROLE", "STATE", "FINGERPRINT", "NOT AFTER",
	    "ADDRESS", "CODE");
	json_array_foreach(res, i, e) {
		if (json_is_integer(json_object_get(e, "not_after")))
			fmt_time(until, sizeof(until), json_integer_value(
			    json_object_get(e, "not_after")));
		else
			until[0] = '\0';
		snprintf(fpr, sizeof(fpr), "%.16s%s", jstr(e, "fingerprint"),
		    *jstr(e, "fingerprint") ? "..." : "");
		table_add(t, jstr(e, "name"), jstr(e, "role"), jstr(e, "state"),
		    fpr, until, jstr(e, "address"), jstr(e, "code"));
	}
	table_print(t, stdout);
	table_free(t);
out:
	json_decref(res);
	return st;
}

static json_t *
pairing_args(struct cmd_ctx *ctx)
{
	json_t *a = json_pack("{s:s}", "code", ctx->argv[0]);

	if (arg_get(ctx, "name") != NULL)
		json_object_set_new(a, "name", json_string(arg_get(ctx, "name")));
	if (arg_get(ctx, "message") != NULL)
		json_object_set_new(a, "message",
		    json_string(arg_get(ctx, "message")));
	return a;
}

static int
agent_approve_exec(struct cmd_ctx *ctx)
{
	json_t *res;
	char until[32];
	int st;

	st = cmd_call(ctx, "agent.approve", pairing_args(ctx), &res);
	if (st == EXIT_OK && !ctx->json) {
		fmt_time(until, sizeof(until), json_integer_value(
		    json_object_get(res, "not_after")));
		printf("approved ");
		print_safe(stdout, jstr(res, "name"));
		printf(" (%s): certificate %s, until %s\n", jstr(res, "role"),
		    jstr(res, "fingerprint"), until);
		if (json_integer_value(json_object_get(res, "replaced")) > 0)
			printf("it replaces the earlier certificate of that "
			    "name (%s connection(s) cut)\n",
			    jfmt(res, "connections_cut"));
	}
	json_decref(res);
	return st;
}

static int
agent_reject_exec(struct cmd_ctx *ctx)
{
	json_t *res;
	int st;

	st = cmd_call(ctx, "agent.reject", pairing_args(ctx), &res);
	if (st == EXIT_OK && !ctx->json) {
		printf("rejected the pairing of ");
		print_safe(stdout, jstr(res, "name"));
		printf("\n");
	}
	json_decref(res);
	return st;
}

static int
agent_revoke_exec(struct cmd_ctx *ctx)
{
	json_t *res, *a;
	int st;

	a = json_pack("{s:s}", "name", ctx->argv[0]);
	if (arg_get(ctx, "message") != NULL)
		json_object_set_new(a, "message",
		    json_string(arg_get(ctx, "message")));
	st = cmd_call(ctx, "agent.revoke", a, &res);
	if (st == EXIT_OK && !ctx->json) {
		printf("revoked ");
		print_safe(stdout, jstr(res, "name"));
		printf(": %s certificate(s), %s connection(s) cut\n",
		    jfmt(res, "revoked"), jfmt(res, "connections_cut"));
	}
	json_decref(res);
	return st;
}

static const struct cmd_opt pair_opts[] = {
	{ "name", 'n', "NAME", "the pairing's name (when two share a code)" },
	{ "message", 'm', "TEXT", "why (kept in the audit log)" },
	{ NULL, 0, NULL, NULL }
};
static const struct cmd_opt revoke_opts[] = {
	{ "message", 'm', "TEXT", "why (kept in the audit log)" },
	{ NULL, 0, NULL, NULL }
};

const struct cmd_entry cmd_agent_list_entry = {
	"agent list", "[--json]",
	"list enrolled agents and vhci hosts, and pending pairings",
	PRIV_READ, 0, 0, NULL, agent_list_exec
};
const struct cmd_entry cmd_agent_approve_entry = {
	"agent approve", "CODE [--name NAME] [-m TEXT]",
	"approve the pending pairing showing CODE: issue its certificate",
	PRIV_ADMIN, 1, 1, pair_opts, agent_approve_exec
};
const struct cmd_entry cmd_agent_reject_entry = {
	"agent reject", "CODE [--name NAME] [-m TEXT]",
	"reject the pending pairing showing CODE",
	PRIV_ADMIN, 1, 1, pair_opts, agent_reject_exec
};
const struct cmd_entry cmd_agent_revoke_entry = {
	"agent revoke", "NAME [-m TEXT]",
	"revoke NAME's certificate: its connections are cut, later ones "
	"refused",
	PRIV_ADMIN, 1, 1, revoke_opts, agent_revoke_exec
};
