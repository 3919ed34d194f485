/*
 * Attach back ends: what both share (names, reconciliation matching).
 * The local vhci back end is in attach_local.c.
 */
#include <string.h>

#include "host/attach.h"

void
attach_ctx_init(struct attach_ctx *ctx)
{
	memset(ctx, 0, sizeof(*ctx));
	ctx->mode = ATTACH_DIRECT;
	ctx->upstream_fd = -1;
	ctx->downstream_fd = -1;
	ctx->state = ATTACH_IDLE;
	ctx->port = -1;
	ctx->kernel_fd = -1;
	ctx->relay_fd = -1;
}

const char *
attach_mode_name(enum attach_mode mode)
{
	return mode == ATTACH_INSPECTED ? "inspected" : "direct";
}

int
attach_mode_parse(const char *s, enum attach_mode *out)
{
	if (strcmp(s, "direct") == 0)
		*out = ATTACH_DIRECT;
	else if (strcmp(s, "inspected") == 0)
		*out = ATTACH_INSPECTED;
	else
		return -1;
	return 0;
}

const char *
attach_state_name(enum attach_state st)
{
	switch (st) {
	case ATTACH_ATTACHED:
		return "attached";
	case ATTACH_DETACHED:
		return "detached";
	default:
		return "idle";
	}
}

const char *
attach_verdict_name(enum attach_verdict v)
{
	switch (v) {
	case ATTACH_V_ADOPT:
		return "adopt";
	case ATTACH_V_STALE:
		return "stale";
	case ATTACH_V_UNSURE:
		return "unsure";
	default:
		return "foreign";
	}
}

/*
 * The kernel shows devid and the attacher's fd number only once the
 * device is addressed.  A port it shows them for is ours if both match
 * what we wrote; a port that is still starting (or failing) cannot be
 * told apart from someone else's new attachment on the same port, so it
 * is UNSURE rather than adopted or detached.  An inspected attachment is
 * never adopted: its relay died with the previous process.
 */
void
attach_classify(struct attach_found *found, size_t nfound,
    struct attach_record *records, size_t nrecords)
{
	struct attach_found *f;
	struct attach_record *r;
	size_t i, j;

	for (i = 0; i < nfound; i++) {
		found[i].verdict = ATTACH_V_FOREIGN;
		found[i].record = -1;
	}
	for (j = 0; j < nrecords; j++) {
		r = &records[j];
		r->found = -1;
		for (i = 0; i < nfound; i++) {
			f = &found[i];
			if (f->record != -1 || f->port != r->port)
				continue;
			if (!f->live)
				f->verdict = ATTACH_V_UNSURE;
			else if (f->devid == r->devid &&
			    f->kernel_fd == r->kernel_fd)
				f->verdict = r->mode == ATTACH_INSPECTED ?
				    ATTACH_V_STALE : ATTACH_V_ADOPT;
			else
				break;	/* the port holds another device */
			f->record = (ssize_t)j;
			r->found = (ssize_t)i;
			break;
		}
	}
}
