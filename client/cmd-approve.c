/*
 * usbgw approve BUSID [--once | --for DURATION | --until TIME |
 * --permanent] [--to HOST] [--identity ID] [--override] [-m MESSAGE]
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "usbgw.h"

static const struct cmd_opt opts[] = {
	{ "once", 0, NULL, "for this presence of the device only (default)" },
	{ "for", 0, "DURATION", "for a while: 30s, 10m, 2h, 1d" },
	{ "until", 0, "TIME", "until a time: 18:00, 2025-01-31T18:00, "
	    "...Z, +01:00, @UNIX" },
	{ "permanent", 'p', NULL, "for good: writes an allow rule from the "
	    "device's identity" },
	{ "to", 't', "HOST", "only for this vhci host: an address, a CIDR "
	    "prefix or a name" },
	{ "identity", 'i', "ID", "refuse unless BUSID is still this device "
	    "(show's id, or 8+ hex digits of its identity)" },
	{ "override", 0, NULL, "admin: allow although an admin rule blocks "
	    "the device (audited)" },
	{ "message", 'm', "MESSAGE", "why, for the audit log" },
	{ NULL, 0, NULL, NULL }
};

static int
cmd_approve_exec(struct cmd_ctx *ctx)
{
	const char *dur = arg_get(ctx, "for"), *until = arg_get(ctx, "until");
	const char *to = arg_get(ctx, "to"), *msg = arg_get(ctx, "message");
	const char *scope = "once";
	json_t *args, *res;
	char err[256], when[32], d[32];
	int64_t secs = 0;
	time_t t = 0;
	int n, st;

	n = arg_has(ctx, "once") + (dur != NULL) + (until != NULL) +
	    arg_has(ctx, "permanent");
	if (n > 1)
		return usage_error(ctx, "--once, --for, --until and --permanent "
		    "exclude each other");
	args = json_pack("{s:s}", "busid", ctx->argv[0]);
	if (dur != NULL) {
		if (parse_duration_s(dur, &secs, err, sizeof(err)) != 0) {
			json_decref(args);
			return usage_error(ctx, "--for %s", err);
		}
		scope = "for";
		json_object_set_new(args, "duration", json_integer(secs));
	} else if (until != NULL) {
		if (parse_time(until, time(NULL), &t, err, sizeof(err)) != 0) {
			json_decref(args);
			return usage_error(ctx, "--until %s", err);
		}
		if (t <= time(NULL)) {
			json_decref(args);
			return usage_error(ctx, "--until %s: that time is past",
			    until);
		}
		scope = "until";
		json_object_set_new(args, "until", json_integer(t));
	} else if (arg_has(ctx, "permanent"))
		scope = "permanent";
	json_object_set_new(args, "scope", json_string(scope));
	if (to != NULL)
		json_object_set_new(args, "to", json_string(to));
	if (msg != NULL)
		json_object_set_new(args, "message", json_string(msg));
	if (arg_get(ctx, "identity") != NULL)
		json_object_set_new(args, "identity",
		    json_string(arg_get(ctx, "identity")));
	if (arg_has(ctx, "override"))
		json_object_set_new(args, "override", json_true());

	if ((st = cmd_call(ctx, "approve", args, &res)) != EXIT_OK || ctx->json)
		goto out;
	printf("approved ");
	print_safe(stdout, *jstr(res, "busid") != '\0' ? jstr(res, "busid") :
	    ctx->argv[0]);
	printf(" (");
	print_safe(stdout, device_name(res));
	if (*device_identity_str(res) != '\0')
		printf("; %s", device_identity_str(res));
	printf(")");
	if (strcmp(scope, "for") == 0) {
		fmt_duration(d, sizeof(d), secs);
		fmt_time(when, sizeof(when), (json_int_t)(time(NULL) + secs));
		printf(" for %s, until %s", d, when);
	} else if (strcmp(scope, "until") == 0) {
		fmt_time(when, sizeof(when), (json_int_t)t);
		printf(" until %s", when);
	} else if (strcmp(scope, "permanent") == 0)
		printf(" permanently");
	else
		printf(" once");
	if (to != NULL) {
		printf(", for host ");
		print_safe(stdout, to);
	}
	printf("; now %s\n", jstr(res, "state"));
out:
	json_decref(res);
	return st;
}

const struct cmd_entry cmd_approve_entry = {
	"approve", "BUSID [--once | --for DURATION | --until TIME | --permanent] "
	    "[--to HOST] [--identity ID] [--override] [-m MESSAGE]",
	"authorize a pending device (BUSID may be shortened if unambiguous)",
	PRIV_APPROVE, 1, 1, opts, cmd_approve_exec
};
