/* usbgw detach BUSID: local mode, detach a device from this host's vhci. */
#include <stdio.h>

#include "usbgw.h"

static int
cmd_detach_exec(struct cmd_ctx *ctx)
{
	json_t *res;
	int st;

	st = cmd_call(ctx, "detach", json_pack("{s:s}", "busid", ctx->argv[0]),
	    &res);
	if (st == EXIT_OK && !ctx->json) {
		printf("detached ");
		print_safe(stdout, *jstr(res, "busid") != '\0' ?
		    jstr(res, "busid") : ctx->argv[0]);
		printf("; now %s\n", jstr(res, "state"));
	}
	json_decref(res);
	return st;
}

const struct cmd_entry cmd_detach_entry = {
	"detach", "BUSID",
	"local mode: detach a device from this host (vhci_hcd)",
	PRIV_ADMIN, 1, 1, NULL, cmd_detach_exec
};
