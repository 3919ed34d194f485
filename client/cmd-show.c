/* usbgw show BUSID: everything the gateway knows about one device. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "usbgw.h"
#include "base/util.h"

static void
field(const char *name, const char *value)
{
	if (value == NULL || *value == '\0')
		return;
	printf("%-14s", name);
	print_safe(stdout, value);
	putchar('\n');
}

/* "once", "permanent", "until 2025-01-31 18:00:00", ", to vdi01" */
static void
print_approval(const json_t *a)
{
	char when[32], buf[512];
	const char *scope;
	json_int_t exp;

	if (!json_is_object(a))
		return;
	scope = *jstr(a, "scope") != '\0' ? jstr(a, "scope") : jstr(a, "kind");
	exp = json_integer_value(json_object_get(a, "expires_at"));
	fmt_time(when, sizeof(when), exp);
	if (exp > 0)
		snprintf(buf, sizeof(buf), "until %s", when);
	else
		snprintf(buf, sizeof(buf), "%s", scope);
	if (*jstr(a, "to") != '\0' || *jstr(a, "to_host") != '\0') {
		usbgw_strlcat(buf, ", to ", sizeof(buf));
		usbgw_strlcat(buf, *jstr(a, "to") != '\0' ? jstr(a, "to") :
		    jstr(a, "to_host"), sizeof(buf));
	}
	field("approval", buf);
}

/*
 * Each interface descriptor with its verdict; under an interface-policy
 * that denies them all, say that nothing on the device is usable.
 */
static void
print_ifaces(const json_t *d)
{
	const json_t *a = json_object_get(d, "interfaces");
	char buf[16384], *line, *next;
	bool first = true;
	size_t denied;

	if (!json_is_array(a) || json_array_size(a) == 0) {
		if (json_is_true(json_object_get(d, "per_interface")))
			field("per interface", "no interface known: nothing "
			    "is usable");
		return;
	}
	denied = format_iface_decisions(d, false, buf, sizeof(buf));
	for (line = buf; line != NULL; line = next) {
		if ((next = strchr(line, '\n')) != NULL)
			*next++ = '\0';
		field(first ? "per interface" : "", line);
		first = false;
	}
	if (json_is_true(json_object_get(d, "per_interface")) &&
	    strcmp(jstr(d, "verdict"), "allow") == 0 &&
	    denied == json_array_size(a))
		field("", "every interface is denied: the device is allowed "
		    "but nothing on it is usable");
}

/* Why the device is in its state, and every active operator decision. */
static void
print_decision(const json_t *res)
{
	const json_t *d = json_object_get(res, "decision"), *a, *p;
	char buf[512], when[32];
	size_t i;

	if (*jstr(res, "anomaly") != '\0')
		field("ANOMALY", jstr(res, "anomaly"));
	if (json_is_object(d)) {
		snprintf(buf, sizeof(buf), "%s, by %s: %s", jstr(d, "verdict"),
		    jstr(d, "by"), jstr(d, "why"));
		field("decision", buf);
		print_ifaces(d);
	}
	if (!json_is_array(a = json_object_get(res, "approvals")))
		return;
	json_array_foreach(a, i, p) {
		json_int_t exp = json_integer_value(json_object_get(p,
		    "expires_at"));

		fmt_time(when, sizeof(when), exp);
		snprintf(buf, sizeof(buf), "#%lld %s %s%s%s%s%s by %s%s",
		    (long long)json_integer_value(json_object_get(p, "id")),
		    jstr(p, "decision"), jstr(p, "scope"),
		    exp > 0 ? " until " : "", exp > 0 ? when : "",
		    *jstr(p, "to") != '\0' ? ", to " : "", jstr(p, "to"),
		    jstr(p, "by"), json_is_true(json_object_get(p, "override")) ?
		    " (override)" : "");
		field(i == 0 ? "operator" : "", buf);
	}
}

static void
print_history(const json_t *h)
{
	struct table *t;
	json_t *r;
	size_t i;
	char when[32], actor[128];

	if (!json_is_array(h) || json_array_size(h) == 0)
		return;
	printf("\nhistory:\n");
	t = table_new(6, "TIME", "ACTION", "FROM", "TO", "ACTOR", "REASON");
	json_array_foreach(h, i, r) {
		fmt_time(when, sizeof(when),
		    json_integer_value(json_object_get(r, "time")));
		table_add(t, when, jstr2(r, "action", "event"), jfmt(r, "from"),
		    jfmt(r, "to"), row_actor(r, actor, sizeof(actor)),
		    jstr2(r, "reason", "detail"));
	}
	table_print(t, stdout);
	table_free(t);
}

static int
cmd_show_exec(struct cmd_ctx *ctx)
{
	json_t *res, *v;
	char buf[1024], when[32], age[32];
	size_t i;
	int st;

	st = cmd_call(ctx, "show", json_pack("{s:s}", "busid", ctx->argv[0]),
	    &res);
	if (st != EXIT_OK || ctx->json)
		goto out;
	field("busid", jstr(res, "busid"));
	fmt_time(when, sizeof(when),
	    json_integer_value(json_object_get(res, "since")));
	fmt_age(age, sizeof(age),
	    json_integer_value(json_object_get(res, "since")));
	snprintf(buf, sizeof(buf), "%s%s%s%s%s", jstr(res, "state"),
	    *when != '-' ? " since " : "", *when != '-' ? when : "",
	    *when != '-' ? ", " : "", *when != '-' ? age : "");
	field("state", buf);
	snprintf(buf, sizeof(buf), "%s:%s%s%s%s%s", jstr(res, "vid"),
	    jstr(res, "pid"), *jstr(res, "bcd_device") != '\0' ?
	    "  bcdDevice " : "", jstr(res, "bcd_device"),
	    *jstr(res, "class") != '\0' ? "  class " : "", jstr(res, "class"));
	field("device", buf);
	field("manufacturer", jstr(res, "manufacturer"));
	field("product", jstr(res, "product"));
	field("serial", jstr(res, "serial"));
	snprintf(buf, sizeof(buf), "%s (busid %s)", jstr(res, "exporter"),
	    jstr(res, "exporter_busid"));
	field("exporter", buf);
	field("speed", jfmt(res, "speed"));
	if (json_is_array(v = json_object_get(res, "interfaces"))) {
		json_t *x;

		buf[0] = '\0';
		json_array_foreach(v, i, x) {
			if (!json_is_string(x))
				continue;
			if (buf[0] != '\0')
				strncat(buf, " ", sizeof(buf) - strlen(buf) - 1);
			strncat(buf, json_string_value(x),
			    sizeof(buf) - strlen(buf) - 1);
		}
		field("interfaces", buf);
	}
	field("hash", jstr(res, "hash"));
	field("identity", jstr(res, "identity"));
	snprintf(buf, sizeof(buf), "%lld",
	    (long long)json_integer_value(json_object_get(res, "id")));
	if (json_is_integer(json_object_get(res, "id")))
		field("device id", buf);
	print_decision(res);
	print_approval(json_object_get(res, "approval") != NULL ?
	    json_object_get(res, "approval") : json_object_get(res, "grant"));
	field("attached to", jstr(res, "attached_to"));
	field("transport", jstr(res, "transport"));
	field("certificate", jstr(res, "host_cert"));
	if (json_is_integer(json_object_get(res, "refused"))) {
		snprintf(buf, sizeof(buf), "%lld (URBs and requests to denied "
		    "interfaces, this attachment)", (long long)
		    json_integer_value(json_object_get(res, "refused")));
		field("refused", buf);
	}
	field("claim", jstr(res, "claim"));
	if (*jstr(res, "up_transport") != '\0') {
		snprintf(buf, sizeof(buf), "%s%s%s%s", jstr(res, "up_transport"),
		    *jstr(res, "up_cert") != '\0' ? " (certificate " : "",
		    jstr(res, "up_cert"),
		    *jstr(res, "up_cert") != '\0' ? ")" : "");
		field("exporter leg", buf);
	}
	print_history(json_object_get(res, "history"));
out:
	json_decref(res);
	return st;
}

const struct cmd_entry cmd_show_entry = {
	"show", "BUSID [--json]",
	"show one device: identity, state, approval and recent history",
	PRIV_READ, 1, 1, NULL, cmd_show_exec
};
