/* usbgw list: the devices the gateway knows, one line each. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/ctlproto.h"
#include "base/jsontext.h"
#include "usbgw.h"

static const struct cmd_opt opts[] = {
	{ "state", 0, "STATE", "only devices in STATE: probing, pending, "
	    "authorized, attached, blocked or gone" },
	{ "exporter", 'e', "NAME", "only devices of exporter NAME" },
	{ NULL, 0, NULL, NULL }
};

/* The members of a device the table shows (strings; since). */
enum { F_BUSID, F_STATE, F_VID, F_PID, F_EXPORTER, F_UPBUSID, F_MANUF,
	F_PRODUCT, F_SERIAL, F_NFIELDS };
static const char *const fields[F_NFIELDS] = { "busid", "state", "vid",
	"pid", "exporter", "exporter_busid", "manufacturer", "product",
	"serial" };

struct row {
	char		 f[F_NFIELDS][256];
	long long	 since;
};

/*
 * One device object of the (checked, compact) result text at p into r:
 * the members the table shows, the others skipped.  A member of another
 * type than expected reads as absent, as jstr() has it.
 */
static const char *
read_row(const char *start, const char *p, const char *end, struct row *r,
    struct jt_error *e)
{
	char key[32];
	const char *v;
	bool trunc;
	int i;

	memset(r, 0, sizeof(*r));
	if (p >= end || *p != '{')
		return NULL;
	for (p++; p < end && *p != '}';) {
		if (*p == ',')
			p++;
		if ((p = jt_string(start, p, end, key, sizeof(key), &trunc,
		    e)) == NULL || p >= end)
			return NULL;
		v = p + 1;			/* after ':' (compact text) */
		for (i = 0; i < F_NFIELDS; i++)
			if (!trunc && strcmp(key, fields[i]) == 0)
				break;
		if (i < F_NFIELDS && v < end && *v == '"')
			p = jt_string(start, v, end, r->f[i], sizeof(r->f[i]),
			    &trunc, e);
		else {
			p = jt_scan(start, v, end, NULL, 0, 0, e);
			if (p != NULL && !trunc && strcmp(key, "since") == 0 &&
			    (*v == '-' || (*v >= '0' && *v <= '9')))
				r->since = strtoll(v, NULL, 10);
		}
		if (p == NULL)
			return NULL;
	}
	return p < end ? p + 1 : NULL;
}

/* The table from the result's compact text. */
static int
print_table(const char *text, size_t len)
{
	const char *p = text, *end = text + len;
	struct table *t;
	struct jt_error e;
	struct row r;

	if (len < 2 || *p != '[') {
		fprintf(stderr, "usbgw: unexpected answer to list\n");
		return EXIT_INTERNAL;
	}
	if (p[1] == ']') {
		printf("no devices\n");
		return EXIT_OK;
	}
	t = table_new(7, "BUSID", "STATE", "ID", "EXPORTER", "UPSTREAM",
	    "SINCE", "DEVICE");
	for (p++; p < end && *p != ']'; ) {
		char id[600], name[800], since[32];
		const char *m, *pr, *sn;

		if (*p == ',')
			p++;
		if ((p = read_row(text, p, end, &r, &e)) == NULL) {
			table_free(t);
			fprintf(stderr, "usbgw: unexpected answer to list\n");
			return EXIT_INTERNAL;
		}
		m = r.f[F_MANUF];
		pr = r.f[F_PRODUCT];
		sn = r.f[F_SERIAL];
		snprintf(id, sizeof(id), "%s:%s", r.f[F_VID], r.f[F_PID]);
		snprintf(name, sizeof(name), "%s%s%s%s%s%s", m,
		    *m != '\0' && *pr != '\0' ? " " : "", pr,
		    *sn != '\0' ? " [" : "", sn, *sn != '\0' ? "]" : "");
		fmt_age(since, sizeof(since), r.since);
		table_add(t, r.f[F_BUSID], r.f[F_STATE], id, r.f[F_EXPORTER],
		    r.f[F_UPBUSID], since, name);
	}
	table_print(t, stdout);
	table_free(t);
	return EXIT_OK;
}

static int
cmd_list_exec(struct cmd_ctx *ctx)
{
	const char *state = arg_get(ctx, "state");
	const char *exporter = arg_get(ctx, "exporter");
	struct jtext text;
	json_t *args;
	int st;

	if (state != NULL && dev_state_parse(state) < 0)
		return usage_error(ctx, "unknown state \"%s\" (probing, pending, "
		    "authorized, attached, blocked, gone)", state);
	args = json_object();
	if (state != NULL)
		json_object_set_new(args, "state", json_string(state));
	if (exporter != NULL)
		json_object_set_new(args, "exporter", json_string(exporter));
	if ((st = cmd_connect(ctx)) != EXIT_OK) {
		json_decref(args);
		return st;
	}
	/*
	 * The daemon's array is checked and rewritten as it streams through
	 * (client_call_text): indented for --json, as print_json writes it;
	 * compact for the table, read member by member.  Never a tree of
	 * 10,000 devices parsed and written again.
	 */
	jtext_init(&text, (size_t)CTL_MAX_RESPONSE * 4);
	st = client_call_text(ctx->cl, "list", args, ctx->json ? 2 : 0, &text);
	if (st == EXIT_OK && text.over) {
		fprintf(stderr, "usbgw: list: the answer is too large to "
		    "print\n");
		st = EXIT_INTERNAL;
	} else if (st == EXIT_OK && ctx->json) {
		jt_raw(&text, "\n", 1);
		if (fwrite(text.buf, 1, text.len, stdout) != text.len)
			st = EXIT_INTERNAL;
	} else if (st == EXIT_OK)
		st = print_table(text.buf, text.len);
	jtext_free(&text);
	return st;
}

const struct cmd_entry cmd_list_entry = {
	"list", "[--state STATE] [--exporter NAME] [--json]",
	"list the gateway's devices and their states",
	PRIV_READ, 0, 0, opts, cmd_list_exec
};
