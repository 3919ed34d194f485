/* usbgw attach BUSID: local mode, attach a device to this host's vhci. */
#include <stdio.h>

#include "usbgw.h"

static int
cmd_attach_exec(struct cmd_ctx *ctx)
{
	json_t *res;
	int st;

	st = cmd_call(ctx, "attach", json_pack("{s:s}", "busid", ctx->argv[0]),
	    &res);
	if (st == EXIT_OK && !ctx->json) {
		printf("attached ");
		print_safe(stdout, *jstr(res, "busid") != '\0' ?
		    jstr(res, "busid") : ctx->argv[0]);
		printf(" (");
		print_safe(stdout, device_name(res));
		printf(")\n");
	}
	json_decref(res);
	return st;
}

const struct cmd_entry cmd_attach_entry = {
	"attach", "BUSID",
	"local mode: attach an authorized device to this host (vhci_hcd)",
	PRIV_ADMIN, 1, 1, NULL, cmd_attach_exec
};
