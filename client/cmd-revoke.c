/* usbgw revoke BUSID [--identity ID] [-m MESSAGE] */
#include <stdio.h>

#include "usbgw.h"

static const struct cmd_opt opts[] = {
	{ "identity", 'i', "ID", "refuse unless BUSID is still this device "
	    "(show's id, or 8+ hex digits of its identity)" },
	{ "message", 'm', "MESSAGE", "why, for the audit log" },
	{ NULL, 0, NULL, NULL }
};

static int
cmd_revoke_exec(struct cmd_ctx *ctx)
{
	const char *msg = arg_get(ctx, "message");
	json_t *args, *res;
	int st;

	args = json_pack("{s:s}", "busid", ctx->argv[0]);
	if (msg != NULL)
		json_object_set_new(args, "message", json_string(msg));
	if (arg_get(ctx, "identity") != NULL)
		json_object_set_new(args, "identity",
		    json_string(arg_get(ctx, "identity")));
	if ((st = cmd_call(ctx, "revoke", args, &res)) != EXIT_OK || ctx->json)
		goto out;
	printf("revoked ");
	print_safe(stdout, *jstr(res, "busid") != '\0' ? jstr(res, "busid") :
	    ctx->argv[0]);
	printf(" (");
	print_safe(stdout, device_name(res));
	if (*device_identity_str(res) != '\0')
		printf("; %s", device_identity_str(res));
	printf("); now %s\n", jstr(res, "state"));
out:
	json_decref(res);
	return st;
}

const struct cmd_entry cmd_revoke_entry = {
	"revoke", "BUSID [--identity ID] [-m MESSAGE]",
	"withdraw an authorization; an attached vhci host is cut off at once",
	PRIV_APPROVE, 1, 1, opts, cmd_revoke_exec
};
