/*
 * The daemon's control commands (protocol.md part 2, 2.6): the table
 * control.c dispatches to.  Handlers check their arguments, act through
 * the device and exporter modules, and return JSON.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "config.h"
#include "control.h"
#include "ctlproto.h"
#include "enroll.h"
#include "gw.h"
#include "hooks.h"
#include "jsontext.h"
#include "log.h"
#include "util.h"

#define ERR(code, ...) do { snprintf(err, errlen, __VA_ARGS__); return code; } while (0)

static enum ctl_err
find_device(json_t *args, struct device **devp, char *err, size_t errlen)
{
	const char *busid;
	enum ctl_err e;
	int n;

	if ((e = ctl_arg_str(args, "busid", 1, &busid, err, errlen)) != CTL_OK)
		return e;
	*devp = gw_device_find(busid, &n);
	if (*devp == NULL && n > 1) {
		char cand[512];

		gw_device_candidates(busid, cand, sizeof(cand));
		ERR(CTL_E_AMBIGUOUS, "busid %s matches %d devices: %s "
		    "(give more of the busid)", busid, n, cand);
	}
	if (*devp == NULL)
		ERR(CTL_E_NOTFOUND, "no device matches busid %s", busid);
	return CTL_OK;
}

/*
 * list: the devices' JSON texts (device_json_text) one after the other
 * in one array, written straight into the reply frame (control.c).
 */
static enum ctl_err
h_list_text(json_t *args, const struct actor *who, struct jtext *out,
    char *err, size_t errlen)
{
	const char *state = NULL, *exporter = NULL;
	/* the last full reply's size: the next one is written without regrowing */
	static size_t hint;
	struct exporter *exp;
	struct device *dev;
	enum ctl_err e;
	size_t mark = out->len;
	int st = -1;

	if ((e = ctl_arg_str(args, "state", 0, &state, err, errlen)) != CTL_OK ||
	    (e = ctl_arg_str(args, "exporter", 0, &exporter, err, errlen)) !=
	    CTL_OK)
		return e;
	if (state != NULL && (st = dev_state_parse(state)) == -1)
		ERR(CTL_E_USAGE, "argument state: expected one of probing, "
		    "pending, authorized, attached, blocked, gone, got \"%.32s\"",
		    state);
	if (exporter != NULL && exporter_find(exporter) == NULL)
		ERR(CTL_E_NOTFOUND, "no exporter named %.64s", exporter);
	jtext_reserve(out, hint + hint / 8);
	jt_open(out, '[');
	TAILQ_FOREACH(exp, &gw->exporters, entry) {
		if (exporter != NULL && strcmp(exp->name, exporter) != 0)
			continue;
		TAILQ_FOREACH(dev, &exp->devices, entry) {
			if (dev->dead)
				continue;
			if (st != -1 && dev->state != (enum dev_state)st)
				continue;
			device_json_text(dev, out);
			if (out->over)
				return CTL_OK;	/* control.c reports the limit */
		}
	}
	jt_close(out, ']');
	if (state == NULL && exporter == NULL)
		hint = out->len - mark;
	return CTL_OK;
}

/* list as a json_t, for callers other than the control socket. */
static enum ctl_err
h_list(json_t *args, const struct actor *who, json_t **res, char *err,
    size_t errlen)
{
	struct jtext b;
	enum ctl_err e;

	jtext_init(&b, CTL_MAX_RESPONSE);
	if ((e = h_list_text(args, who, &b, err, errlen)) == CTL_OK) {
		if (b.over) {
			jtext_free(&b);
			ERR(CTL_E_LIMIT, "the list is over %s",
			    CTL_MAX_RESPONSE_TEXT);
		}
		*res = json_loadb(b.buf, b.len, 0, NULL);
		if (*res == NULL)
			e = CTL_E_INTERNAL;
	}
	jtext_free(&b);
	return e;
}

static enum ctl_err
h_show(json_t *args, const struct actor *who, json_t **res, char *err,
    size_t errlen)
{
	struct device *dev;
	enum ctl_err e;
	json_t *o;

	if ((e = find_device(args, &dev, err, errlen)) != CTL_OK)
		return e;
	o = device_json(dev);
	json_object_set_new(o, "history", store_device_history(dev, 20));
	*res = o;
	return CTL_OK;
}

/*
 * The device an operator's decision names: its busid, and if given the
 * identity the operator saw (show's "id", or 8+ hex digits of "hash").
 */
static enum ctl_err
find_decided(json_t *args, struct device **devp, char *err, size_t errlen)
{
	const char *identity = NULL;
	enum ctl_err e;

	if ((e = find_device(args, devp, err, errlen)) != CTL_OK ||
	    (e = ctl_arg_str(args, "identity", 0, &identity, err, errlen)) !=
	    CTL_OK)
		return e;
	if (identity != NULL)
		return device_check_identity(*devp, identity, err, errlen);
	return CTL_OK;
}

/* approve and deny: a decision for this presence, a while, or a rule. */
static enum ctl_err
grant(json_t *args, const struct actor *who, bool deny, json_t **res,
    char *err, size_t errlen)
{
	struct approve_opts opts;
	struct device *dev;
	const char *busid;
	enum ctl_err e;
	int perm = 0;

	memset(&opts, 0, sizeof(opts));
	if (!deny) {
		if ((e = ctl_args_approve(args, &busid, &opts, err, errlen)) !=
		    CTL_OK)
			return e;
	} else {
		const char *m = NULL;

		if ((e = ctl_arg_bool(args, "permanent", &perm, err, errlen)) !=
		    CTL_OK ||
		    (e = ctl_arg_str(args, "message", 0, &m, err, errlen)) !=
		    CTL_OK)
			return e;
		if (m != NULL)
			usbgw_strlcpy(opts.message, m, sizeof(opts.message));
		opts.scope = perm ? SCOPE_PERMANENT : SCOPE_ONCE;
	}
	if ((e = find_decided(args, &dev, err, errlen)) != CTL_OK)
		return e;
	if ((e = device_approve(dev, deny, &opts, who, err, errlen)) != CTL_OK)
		return e;
	*res = device_json(dev);
	return CTL_OK;
}

static enum ctl_err
h_approve(json_t *args, const struct actor *who, json_t **res, char *err,
    size_t errlen)
{
	return grant(args, who, false, res, err, errlen);
}

static enum ctl_err
h_deny(json_t *args, const struct actor *who, json_t **res, char *err,
    size_t errlen)
{
	return grant(args, who, true, res, err, errlen);
}

static enum ctl_err
h_revoke(json_t *args, const struct actor *who, json_t **res, char *err,
    size_t errlen)
{
	struct device *dev;
	const char *m = NULL;
	enum ctl_err e;

	if ((e = find_decided(args, &dev, err, errlen)) != CTL_OK ||
	    (e = ctl_arg_str(args, "message", 0, &m, err, errlen)) != CTL_OK)
		return e;
	if ((e = device_revoke(dev, who, m, err, errlen)) != CTL_OK)
		return e;
	*res = device_json(dev);
	return CTL_OK;
}

static json_t *
exporter_json(const struct exporter *exp)
{
	const struct device *dev;
	int n = 0;

	TAILQ_FOREACH(dev, &exp->devices, entry)
		if (dev->state != DEV_GONE)
			n++;
	return json_pack("{s:s, s:s, s:i, s:s, s:i, s:s, s:b, s:s}", "name",
	    exp->name, "host", exp->host, "port", (int)exp->port,
	    "status", exp->state == EXP_UP ? "up" : exp->state == EXP_DOWN ?
	    "down" : "connecting", "devices", n, "kind",
	    exp_kind_name(exp->kind), "control", exp->ctl != NULL, "tls",
	    exp_tls_name(exp->tls));
}

static enum ctl_err
h_exporter_list(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	struct exporter *exp;
	json_t *a = json_array();

	TAILQ_FOREACH(exp, &gw->exporters, entry)
		json_array_append_new(a, exporter_json(exp));
	*res = a;
	return CTL_OK;
}

static enum ctl_err
h_exporter_add(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	const char *name, *host, *tls = "off";
	json_int_t port = USBIP_PORT;
	struct exporter *exp;
	enum ctl_err e;
	int agent = 0, t;

	if ((e = ctl_arg_str(args, "name", 1, &name, err, errlen)) != CTL_OK ||
	    (e = ctl_arg_str(args, "host", 1, &host, err, errlen)) != CTL_OK ||
	    (e = ctl_arg_int(args, "port", 0, 1, 65535, &port, err, errlen)) !=
	    CTL_OK ||
	    (e = ctl_arg_bool(args, "agent", &agent, err, errlen)) != CTL_OK ||
	    (e = ctl_arg_str(args, "tls", 0, &tls, err, errlen)) != CTL_OK)
		return e;
	if ((t = exp_tls_parse(tls)) == EXP_TLS_OPTIONAL)
		ERR(CTL_E_USAGE, "argument tls: optional is offered for dial-out "
		    "agents only (the gateway would fall back to plaintext on "
		    "a connection an attacker can make fail): expected "
		    "required or off");
	if (t < 0)
		ERR(CTL_E_USAGE, "argument tls: expected required or off, got "
		    "\"%.20s\"", tls);
	if (!gw_exporter_name_valid(name))
		ERR(CTL_E_USAGE, "argument name: expected 1-%d letters, digits, "
		    "'.', '-' or '_', got \"%.40s\"", GW_NAME_MAX - 1, name);
	if (strlen(host) == 0 || strlen(host) >= sizeof(exp->host) ||
	    strpbrk(host, " \t\r\n/") != NULL)
		ERR(CTL_E_USAGE, "argument host: expected a host name or "
		    "address, got \"%.64s\"", host);
	if (exporter_find(name) != NULL)
		ERR(CTL_E_REFUSED, "exporter %s exists", name);
	exp = agent ? exporter_new_agent(name, EXP_KIND_AGENT, host,
	    (uint16_t)port) : exporter_new(name, host, (uint16_t)port);
	exp->tls = (enum exp_tls)t;	/* before its first connection (a timer) */
	store_exporter_save(exp, who);
	*res = exporter_json(exp);
	return CTL_OK;
}

static enum ctl_err
h_exporter_remove(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	const char *name;
	struct exporter *exp;
	enum ctl_err e;

	if ((e = ctl_arg_str(args, "name", 1, &name, err, errlen)) != CTL_OK)
		return e;
	if ((exp = exporter_find(name)) == NULL)
		ERR(CTL_E_NOTFOUND, "no exporter named %.64s", name);
	store_exporter_delete(exp, who);
	exporter_free(exp);
	*res = json_object();
	return CTL_OK;
}

static enum ctl_err
h_status(json_t *args, const struct actor *who, json_t **res, char *err,
    size_t errlen)
{
	struct exporter *exp;
	struct device *dev;
	int counts[DEV_NSTATES] = { 0 }, up = 0, down = 0, total = 0, i;
	json_t *o, *d;

	TAILQ_FOREACH(exp, &gw->exporters, entry) {
		total++;
		if (exp->state == EXP_UP)
			up++;
		else if (exp->state == EXP_DOWN)
			down++;
		TAILQ_FOREACH(dev, &exp->devices, entry)
			counts[dev->state]++;
	}
	d = json_object();
	for (i = 0; i < DEV_NSTATES; i++)
		json_object_set_new(d, dev_state_name(i), json_integer(counts[i]));
	o = json_pack("{s:s, s:I, s:I, s:s, s:{s:i, s:i, s:i}, s:o, s:i, "
	    "s:f, s:i, s:i, s:i, s:{s:i, s:i}}",
	    "version", "0.1",
	    "pid", (json_int_t)getpid(),
	    "uptime", (json_int_t)((now_usec() - gw->started) / 1000000),
	    "mode", gw->cfg->mode == CONFIG_MODE_LOCAL ? "local" : "proxy",
	    "exporters", "total", total, "up", up, "down", down,
	    "devices", d,
	    "attachments", counts[DEV_ATTACHED],
	    "urb_rate", gw_urb_rate(),
	    "connections", (int)control_nconns(),
	    "watchers", (int)control_nwatchers(),
	    "hooks_running", (int)hooks_running(),
	    "claims", "probing", (int)upstream_probing(),
	    "queued", (int)upstream_queued());
	*res = o;
	return CTL_OK;
}

static const struct ctl_cmd gw_ctl_cmds[] = {
	{ "status",		PRIV_READ,	h_status },
	{ "list",		PRIV_READ,	h_list },
	{ "show",		PRIV_READ,	h_show },
	{ "exporter.list",	PRIV_READ,	h_exporter_list },
	{ "approve",		PRIV_APPROVE,	h_approve },
	{ "deny",		PRIV_APPROVE,	h_deny },
	{ "revoke",		PRIV_APPROVE,	h_revoke },
	{ "exporter.add",	PRIV_ADMIN,	h_exporter_add },
	{ "exporter.remove",	PRIV_ADMIN,	h_exporter_remove },
	{ "attach",		PRIV_ADMIN,	local_ctl_attach },
	{ "detach",		PRIV_ADMIN,	local_ctl_detach },
};

static const struct ctl_text_cmd gw_ctl_text_cmds[] = {
	{ "list",		h_list_text },
};

/* The commands whose reply control.c writes as text (control.h). */
const struct ctl_text_cmd *
gw_ctl_text_table(size_t *n)
{
	*n = nitems(gw_ctl_text_cmds);
	return gw_ctl_text_cmds;
}

/* Every command the daemon offers: the core's and the policy's. */
const struct ctl_cmd *
gw_ctl_table(size_t *n)
{
	static struct ctl_cmd *table;
	static size_t ntable;

	if (table == NULL) {
		ntable = nitems(gw_ctl_cmds) + gwpolicy_ncmds + enroll_ncmds;
		table = xcalloc(ntable, sizeof(*table));
		memcpy(table, gw_ctl_cmds, sizeof(gw_ctl_cmds));
		memcpy(table + nitems(gw_ctl_cmds), gwpolicy_cmds,
		    gwpolicy_ncmds * sizeof(*table));
		memcpy(table + nitems(gw_ctl_cmds) + gwpolicy_ncmds,
		    enroll_cmds, enroll_ncmds * sizeof(*table));
	}
	*n = ntable;
	return table;
}

void
gw_audit_refusal(const struct actor *who, const char *cmd, const char *why)
{
	char detail[256];

	snprintf(detail, sizeof(detail), "%s: %s", cmd, why);
	store_audit("refused", who, "control", detail);
}
