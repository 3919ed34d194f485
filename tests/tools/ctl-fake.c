/*
 * ctl-fake: a control socket (the real control.c) over a fake daemon core
 * with four canned devices, so the usbgw CLI's human and JSON output can
 * be tested on every command without exporters.
 *
 *	ctl-fake -s SOCKET [-c CONFIG] [-p PIDFILE] [-r]
 *
 * Every command of protocol.md part 2 is implemented over in-memory
 * state, with busid prefix resolution, state checks and an audit list
 * (refusals reported by control.c included).  Signals drive events:
 * SIGUSR1 makes a new pending device appear (event "pending"); SIGUSR2
 * raises an access request for the first pending device.  SIGTERM exits.
 * With -r, `list` announces each pending device it lists (event
 * "pending") just before it answers: the race of a device turning pending
 * between a watcher's subscription and its list (usbgw watch --prompt).
 */
#include <sys/types.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "control/config.h"
#include "control/control.h"
#include "base/log.h"
#include "base/util.h"

#define FAKE_MAX_DEVS	64
#define FAKE_MAX_RULES	64
#define FAKE_MAX_EXP	16

struct fdev {
	char		busid[32], exporter[32], ebusid[32];
	char		vid[5], pid[5], manufacturer[64], product[64], serial[64];
	const char	*ifs[3];
	enum dev_state	state;
	int64_t		since;
	char		scope[16];
	int64_t		expires;
	char		to[64];
	char		attached_to[64];
	int		present;
};

static struct fdev devs[FAKE_MAX_DEVS] = {
	{ "fk:1-1", "tc17", "1-1", "046d", "c52b", "Logitech", "USB Receiver",
	    "ABC123", { "03:01:01", "03:01:02", NULL }, DEV_PENDING, 0, "", 0,
	    "", "", 1 },
	{ "fk:1-2", "tc17", "1-2", "0781", "5581", "SanDisk", "Ultra", "4C53",
	    { "08:06:50", NULL, NULL }, DEV_AUTHORIZED, 0, "permanent", 0, "",
	    "", 1 },
	{ "fk:2-1", "desk-2", "2-1", "1234", "5678", "Evil\x1b[31mCorp",
	    "Key\x07" "board", "", { "03:01:01", NULL, NULL }, DEV_BLOCKED, 0, "",
	    0, "", "", 1 },
	{ "fk:2-2", "desk-2", "2-2", "0a5c", "5834", "Broadcom", "Smartcard",
	    "0123", { "0b:00:00", NULL, NULL }, DEV_ATTACHED, 0, "once", 0,
	    "vdi01", "10.0.0.5:40000", 1 },
};
static int ndevs = 4, nextdev = 1;
static int list_race;		/* -r */

struct frule {
	int64_t		id;
	char		rule[256];
	char		comment[128];
};
static struct frule rules[FAKE_MAX_RULES];
static int nrules;
static int64_t next_rule = 1;

struct fexp {
	char		name[32], host[256];
	int		port;
};
static struct fexp exps[FAKE_MAX_EXP] = {
	{ "tc17", "192.0.2.17", 3240 },
	{ "desk-2", "2001:db8::2", 3240 },
};
static int nexps = 2;

static json_t *audit;		/* array of rows */
static int64_t next_audit = 1;
static time_t started;

static void
audit_add(const char *busid, const char *action, const char *from,
    const char *to, const struct actor *who, const char *reason)
{
	json_array_append_new(audit, json_pack("{s:I, s:I, s:s?, s:s, s:s?, "
	    "s:s?, s:o, s:s}", "id", (json_int_t)next_audit++,
	    "time", (json_int_t)time(NULL), "busid", busid, "action", action,
	    "from", from, "to", to, "actor", ctl_actor_json(who),
	    "reason", reason != NULL ? reason : ""));
}

static void
audit_refusal(const struct actor *who, const char *cmd, const char *why)
{
	audit_add(NULL, "refused", NULL, NULL, who, why);
	json_object_set_new(json_array_get(audit, json_array_size(audit) - 1),
	    "command", json_string(cmd));
}

static json_t *
dev_json(const struct fdev *d)
{
	json_t *o, *ifs = json_array();
	int i;

	for (i = 0; i < 3 && d->ifs[i] != NULL; i++)
		json_array_append_new(ifs, json_string(d->ifs[i]));
	o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, "
	    "s:s, s:o, s:s, s:I}",
	    "busid", d->busid, "exporter", d->exporter, "exporter_busid",
	    d->ebusid, "state", dev_state_name(d->state), "vid", d->vid,
	    "pid", d->pid, "bcd_device", "0100", "class", "00",
	    "manufacturer", d->manufacturer, "product", d->product,
	    "serial", d->serial, "interfaces", ifs, "speed", "full",
	    "since", (json_int_t)d->since);
	if (d->scope[0] != '\0')
		json_object_set_new(o, "approval", json_pack("{s:s, s:o, s:o}",
		    "scope", d->scope, "expires_at", d->expires > 0 ?
		    json_integer(d->expires) : json_null(), "to",
		    d->to[0] != '\0' ? json_string(d->to) : json_null()));
	else
		json_object_set_new(o, "approval", json_null());
	json_object_set_new(o, "attached_to", d->attached_to[0] != '\0' ?
	    json_string(d->attached_to) : json_null());
	return o;
}

static enum ctl_err
resolve(json_t *args, struct fdev **out, char *err, size_t errlen)
{
	const char *b = NULL;
	enum ctl_err e;
	int i, n = 0;
	size_t len;

	if ((e = ctl_arg_str(args, "busid", 1, &b, err, errlen)) != CTL_OK)
		return e;
	len = strlen(b);
	for (i = 0; i < ndevs; i++) {
		if (!devs[i].present)
			continue;
		if (strcmp(devs[i].busid, b) == 0) {
			*out = &devs[i];
			return CTL_OK;
		}
		if (strncmp(devs[i].busid, b, len) == 0) {
			*out = &devs[i];
			n++;
		}
	}
	if (n == 1)
		return CTL_OK;
	if (n == 0) {
		snprintf(err, errlen, "no device matches busid %s", b);
		return CTL_E_NOTFOUND;
	}
	snprintf(err, errlen, "busid %s matches %d devices", b, n);
	return CTL_E_AMBIGUOUS;
}

/* Change state, audit, announce. */
static void
transition(struct fdev *d, enum dev_state to, const char *event,
    const struct actor *who, const char *reason)
{
	const char *from = dev_state_name(d->state);
	json_t *ev;

	audit_add(d->busid, event, from, dev_state_name(to), who, reason);
	d->state = to;
	d->since = time(NULL);
	ev = dev_json(d);
	json_object_set_new(ev, "from", json_string(from));
	json_object_set_new(ev, "to", json_string(dev_state_name(to)));
	json_object_set_new(ev, "actor", ctl_actor_json(who));
	json_object_set_new(ev, "reason", json_string(reason));
	control_event(event, ev);
}

static enum ctl_err
h_status(json_t *args, const struct actor *who, json_t **res, char *err,
    size_t errlen)
{
	int counts[DEV_NSTATES] = { 0 }, i;
	json_t *d = json_object();

	for (i = 0; i < ndevs; i++)
		if (devs[i].present)
			counts[devs[i].state]++;
	for (i = 0; i < DEV_NSTATES; i++)
		json_object_set_new(d, dev_state_name(i), json_integer(counts[i]));
	*res = json_pack("{s:s, s:I, s:I, s:s, s:{s:i, s:i, s:i}, s:o, s:i, "
	    "s:f, s:i, s:i, s:i}", "version", "0.1-fake",
	    "pid", (json_int_t)getpid(), "uptime",
	    (json_int_t)(time(NULL) - started), "mode", "proxy",
	    "exporters", "total", nexps, "up", nexps - 1, "down", 1,
	    "devices", d, "attachments", counts[DEV_ATTACHED],
	    "urb_rate", 1234.5, "connections", (int)control_nconns(),
	    "watchers", (int)control_nwatchers(), "hooks_running", 0);
	return CTL_OK;
}

static enum ctl_err
h_list(json_t *args, const struct actor *who, json_t **res, char *err,
    size_t errlen)
{
	const char *state = NULL, *exp = NULL;
	enum ctl_err e;
	int i;

	if ((e = ctl_arg_str(args, "state", 0, &state, err, errlen)) != CTL_OK ||
	    (e = ctl_arg_str(args, "exporter", 0, &exp, err, errlen)) != CTL_OK)
		return e;
	if (state != NULL && dev_state_parse(state) < 0) {
		snprintf(err, errlen, "unknown state %s", state);
		return CTL_E_USAGE;
	}
	*res = json_array();
	for (i = 0; i < ndevs; i++) {
		if (!devs[i].present ||
		    (state != NULL && strcmp(state,
		    dev_state_name(devs[i].state)) != 0) ||
		    (exp != NULL && strcmp(exp, devs[i].exporter) != 0))
			continue;
		json_array_append_new(*res, dev_json(&devs[i]));
		if (list_race && devs[i].state == DEV_PENDING) {
			json_t *ev = dev_json(&devs[i]);

			json_object_set_new(ev, "from", json_string("probing"));
			json_object_set_new(ev, "to", json_string("pending"));
			json_object_set_new(ev, "reason",
			    json_string("no rule matched"));
			control_event("pending", ev);
		}
	}
	return CTL_OK;
}

static enum ctl_err
h_show(json_t *args, const struct actor *who, json_t **res, char *err,
    size_t errlen)
{
	struct fdev *d;
	enum ctl_err e;
	json_t *h, *r;
	size_t i;

	if ((e = resolve(args, &d, err, errlen)) != CTL_OK)
		return e;
	*res = dev_json(d);
	h = json_array();
	json_array_foreach(audit, i, r)
		if (strcmp(json_string_value(json_object_get(r, "busid")) != NULL ?
		    json_string_value(json_object_get(r, "busid")) : "",
		    d->busid) == 0)
			json_array_append(h, r);
	json_object_set_new(*res, "history", h);
	return CTL_OK;
}

static enum ctl_err
h_approve(json_t *args, const struct actor *who, json_t **res, char *err,
    size_t errlen)
{
	struct approve_opts o;
	const char *b;
	struct fdev *d;
	enum ctl_err e;
	static const char *const scopes[] = { "once", "for", "until",
	    "permanent" };

	if ((e = ctl_args_approve(args, &b, &o, err, errlen)) != CTL_OK ||
	    (e = resolve(args, &d, err, errlen)) != CTL_OK)
		return e;
	if (d->state != DEV_PENDING && d->state != DEV_BLOCKED) {
		snprintf(err, errlen, "device %s is %s, not pending or blocked",
		    d->busid, dev_state_name(d->state));
		return CTL_E_REFUSED;
	}
	usbgw_strlcpy(d->scope, scopes[o.scope], sizeof(d->scope));
	d->expires = o.expires_at;
	usbgw_strlcpy(d->to, o.to_host, sizeof(d->to));
	transition(d, DEV_AUTHORIZED, "approve", who, o.message[0] != '\0' ?
	    o.message : "approved");
	*res = dev_json(d);
	return CTL_OK;
}

static enum ctl_err
h_deny(json_t *args, const struct actor *who, json_t **res, char *err,
    size_t errlen)
{
	const char *m = "denied";
	struct fdev *d;
	enum ctl_err e;
	int perm = 0;

	if ((e = resolve(args, &d, err, errlen)) != CTL_OK ||
	    (e = ctl_arg_bool(args, "permanent", &perm, err, errlen)) != CTL_OK ||
	    (e = ctl_arg_str(args, "message", 0, &m, err, errlen)) != CTL_OK)
		return e;
	if (d->state == DEV_ATTACHED) {
		snprintf(err, errlen, "device %s is attached; revoke it first",
		    d->busid);
		return CTL_E_REFUSED;
	}
	d->scope[0] = '\0';
	if (perm && nrules < FAKE_MAX_RULES) {
		rules[nrules].id = next_rule++;
		snprintf(rules[nrules].rule, sizeof(rules[0].rule),
		    "block id %s:%s serial \"%s\"", d->vid, d->pid, d->serial);
		nrules++;
	}
	transition(d, DEV_BLOCKED, "deny", who, m);
	*res = dev_json(d);
	return CTL_OK;
}

static enum ctl_err
h_revoke(json_t *args, const struct actor *who, json_t **res, char *err,
    size_t errlen)
{
	const char *m = "revoked";
	struct fdev *d;
	enum ctl_err e;

	if ((e = resolve(args, &d, err, errlen)) != CTL_OK ||
	    (e = ctl_arg_str(args, "message", 0, &m, err, errlen)) != CTL_OK)
		return e;
	if (d->state != DEV_AUTHORIZED && d->state != DEV_ATTACHED) {
		snprintf(err, errlen, "device %s is %s: nothing to revoke",
		    d->busid, dev_state_name(d->state));
		return CTL_E_REFUSED;
	}
	d->scope[0] = '\0';
	d->attached_to[0] = '\0';
	transition(d, DEV_PENDING, "revoke", who, m);
	*res = dev_json(d);
	return CTL_OK;
}

static json_t *
rules_json(void)
{
	json_t *a = json_array();
	int i;

	for (i = 0; i < nrules; i++)
		json_array_append_new(a, json_pack("{s:I, s:i, s:s, s:s}", "id",
		    (json_int_t)rules[i].id, "position", i + 1, "rule",
		    rules[i].rule, "comment", rules[i].comment));
	return a;
}

static enum ctl_err
check_rule(const char *r, char *err, size_t errlen)
{
	if (strncmp(r, "allow", 5) != 0 && strncmp(r, "block", 5) != 0 &&
	    strncmp(r, "ask", 3) != 0) {
		snprintf(err, errlen, "rule: expected allow, block or ask at "
		    "column 1");
		return CTL_E_USAGE;
	}
	if (strlen(r) >= sizeof(rules[0].rule)) {
		snprintf(err, errlen, "rule too long");
		return CTL_E_USAGE;
	}
	return CTL_OK;
}

static enum ctl_err
h_policy_list(json_t *args, const struct actor *who, json_t **res, char *err,
    size_t errlen)
{
	*res = rules_json();
	return CTL_OK;
}

static enum ctl_err
h_policy_insert(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	const char *r, *c = "";
	json_int_t pos = nrules + 1;
	enum ctl_err e;

	if ((e = ctl_arg_str(args, "rule", 1, &r, err, errlen)) != CTL_OK ||
	    (e = ctl_arg_str(args, "comment", 0, &c, err, errlen)) != CTL_OK ||
	    (e = ctl_arg_int(args, "position", 0, 1, nrules + 1, &pos, err,
	    errlen)) != CTL_OK || (e = check_rule(r, err, errlen)) != CTL_OK)
		return e;
	if (nrules >= FAKE_MAX_RULES) {
		snprintf(err, errlen, "too many rules");
		return CTL_E_INTERNAL;
	}
	memmove(&rules[pos], &rules[pos - 1], sizeof(rules[0]) *
	    (size_t)(nrules - (pos - 1)));
	rules[pos - 1].id = next_rule++;
	usbgw_strlcpy(rules[pos - 1].rule, r, sizeof(rules[0].rule));
	usbgw_strlcpy(rules[pos - 1].comment, c, sizeof(rules[0].comment));
	nrules++;
	audit_add(NULL, "policy-add", NULL, NULL, who, r);
	control_event("policy", json_pack("{s:o, s:s}", "actor",
	    ctl_actor_json(who), "change", "add"));
	*res = json_pack("{s:I, s:I}", "id", (json_int_t)rules[pos - 1].id,
	    "position", pos);
	return CTL_OK;
}

static int
rule_index(json_t *args, char *err, size_t errlen, enum ctl_err *e)
{
	json_int_t id = 0;
	int i;

	if ((*e = ctl_arg_int(args, "id", 1, 1, INT32_MAX, &id, err, errlen)) !=
	    CTL_OK)
		return -1;
	for (i = 0; i < nrules; i++)
		if (rules[i].id == id)
			return i;
	snprintf(err, errlen, "no rule with id %lld", (long long)id);
	*e = CTL_E_NOTFOUND;
	return -1;
}

static enum ctl_err
h_policy_remove(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	enum ctl_err e;
	int i;

	if ((i = rule_index(args, err, errlen, &e)) < 0)
		return e;
	memmove(&rules[i], &rules[i + 1], sizeof(rules[0]) *
	    (size_t)(nrules - i - 1));
	nrules--;
	return CTL_OK;
}

static enum ctl_err
h_policy_move(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	struct frule r;
	json_int_t pos;
	enum ctl_err e;
	int i;

	if ((i = rule_index(args, err, errlen, &e)) < 0)
		return e;
	if ((e = ctl_arg_int(args, "position", 1, 1, nrules, &pos, err,
	    errlen)) != CTL_OK)
		return e;
	r = rules[i];
	memmove(&rules[i], &rules[i + 1], sizeof(r) * (size_t)(nrules - i - 1));
	memmove(&rules[pos], &rules[pos - 1], sizeof(r) *
	    (size_t)(nrules - 1 - (pos - 1)));
	rules[pos - 1] = r;
	return CTL_OK;
}

static enum ctl_err
h_policy_test(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	const char *r;
	char id[16];
	enum ctl_err e;
	int i, m;

	if ((e = ctl_arg_str(args, "rule", 1, &r, err, errlen)) != CTL_OK ||
	    (e = check_rule(r, err, errlen)) != CTL_OK)
		return e;
	*res = json_array();
	for (i = 0; i < ndevs; i++) {
		if (!devs[i].present)
			continue;
		/* The fake matches "TARGET id VID:PID" only. */
		snprintf(id, sizeof(id), "%s:%s", devs[i].vid, devs[i].pid);
		m = strstr(r, id) != NULL;
		json_array_append_new(*res, json_pack("{s:s, s:s, s:s, s:s, "
		    "s:s, s:s, s:b, s:o}", "busid", devs[i].busid, "state",
		    dev_state_name(devs[i].state), "vid", devs[i].vid, "pid",
		    devs[i].pid, "manufacturer", devs[i].manufacturer,
		    "product", devs[i].product, "match", m, "target",
		    m ? json_stringn(r, strcspn(r, " ")) : json_null()));
	}
	return CTL_OK;
}

static enum ctl_err
h_policy_apply(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	*res = json_array();
	return CTL_OK;
}

static enum ctl_err
h_policy_import(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	json_t *a = json_object_get(args, "rules"), *v;
	int replace = 0, removed = 0;
	size_t i;
	enum ctl_err e;

	if ((e = ctl_arg_bool(args, "replace", &replace, err, errlen)) != CTL_OK)
		return e;
	if (!json_is_array(a)) {
		snprintf(err, errlen, "missing argument rules");
		return CTL_E_USAGE;
	}
	json_array_foreach(a, i, v)
		if (!json_is_string(v) ||
		    check_rule(json_string_value(v), err, errlen) != CTL_OK) {
			snprintf(err, errlen, "rule %zu: expected allow, block "
			    "or ask", i + 1);
			return CTL_E_USAGE;
		}
	if (nrules + (replace ? 0 : nrules) + (int)json_array_size(a) >
	    FAKE_MAX_RULES) {
		snprintf(err, errlen, "too many rules");
		return CTL_E_USAGE;
	}
	if (replace) {
		removed = nrules;
		nrules = 0;
	}
	json_array_foreach(a, i, v) {
		rules[nrules].id = next_rule++;
		usbgw_strlcpy(rules[nrules].rule, json_string_value(v),
		    sizeof(rules[0].rule));
		rules[nrules].comment[0] = '\0';
		nrules++;
	}
	*res = json_pack("{s:i, s:i}", "added", (int)json_array_size(a),
	    "removed", removed);
	return CTL_OK;
}

static enum ctl_err
h_exporter_list(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	int i, j, n;

	*res = json_array();
	for (i = 0; i < nexps; i++) {
		for (j = 0, n = 0; j < ndevs; j++)
			n += devs[j].present &&
			    strcmp(devs[j].exporter, exps[i].name) == 0;
		json_array_append_new(*res, json_pack("{s:s, s:s, s:i, s:s, "
		    "s:i, s:o, s:o}", "name", exps[i].name, "host",
		    exps[i].host, "port", exps[i].port, "status",
		    i == 1 ? "down" : "up", "devices", n, "last_seen",
		    i == 1 ? json_null() : json_integer(time(NULL)),
		    "last_error", i == 1 ? json_string("connection refused") :
		    json_null()));
	}
	return CTL_OK;
}

static enum ctl_err
h_exporter_add(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	const char *name, *host;
	json_int_t port = 3240;
	enum ctl_err e;
	int i;

	if ((e = ctl_arg_str(args, "name", 1, &name, err, errlen)) != CTL_OK ||
	    (e = ctl_arg_str(args, "host", 1, &host, err, errlen)) != CTL_OK ||
	    (e = ctl_arg_int(args, "port", 0, 1, 65535, &port, err, errlen)) !=
	    CTL_OK)
		return e;
	for (i = 0; i < nexps; i++)
		if (strcmp(exps[i].name, name) == 0) {
			snprintf(err, errlen, "exporter %s exists", name);
			return CTL_E_USAGE;
		}
	if (nexps >= FAKE_MAX_EXP || strlen(name) >= sizeof(exps[0].name)) {
		snprintf(err, errlen, "too many exporters");
		return CTL_E_USAGE;
	}
	usbgw_strlcpy(exps[nexps].name, name, sizeof(exps[0].name));
	usbgw_strlcpy(exps[nexps].host, host, sizeof(exps[0].host));
	exps[nexps].port = (int)port;
	nexps++;
	*res = json_pack("{s:s, s:s, s:I}", "name", name, "host", host,
	    "port", port);
	return CTL_OK;
}

static enum ctl_err
h_exporter_remove(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	const char *name;
	enum ctl_err e;
	int i;

	if ((e = ctl_arg_str(args, "name", 1, &name, err, errlen)) != CTL_OK)
		return e;
	for (i = 0; i < nexps; i++)
		if (strcmp(exps[i].name, name) == 0) {
			memmove(&exps[i], &exps[i + 1], sizeof(exps[0]) *
			    (size_t)(nexps - i - 1));
			nexps--;
			return CTL_OK;
		}
	snprintf(err, errlen, "no exporter named %s", name);
	return CTL_E_NOTFOUND;
}

static enum ctl_err
h_audit_list(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	json_int_t since = 0, limit = 100;
	const char *dev = NULL, *b;
	enum ctl_err e;
	json_t *r;
	size_t i;

	if ((e = ctl_arg_int(args, "since", 0, 0, INT64_MAX, &since, err,
	    errlen)) != CTL_OK ||
	    (e = ctl_arg_int(args, "limit", 0, 1, 10000, &limit, err,
	    errlen)) != CTL_OK ||
	    (e = ctl_arg_str(args, "device", 0, &dev, err, errlen)) != CTL_OK)
		return e;
	*res = json_array();
	json_array_foreach(audit, i, r) {
		b = json_string_value(json_object_get(r, "busid"));
		if (json_integer_value(json_object_get(r, "time")) < since ||
		    (dev != NULL && (b == NULL ||
		    strncmp(b, dev, strlen(dev)) != 0)))
			continue;
		json_array_append(*res, r);
	}
	while ((json_int_t)json_array_size(*res) > limit)
		json_array_remove(*res, 0);
	return CTL_OK;
}

static enum ctl_err
h_audit_verify(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	*res = json_pack("{s:b, s:i, s:s}", "ok", 1, "rows",
	    (int)json_array_size(audit), "message", "hash chain verified");
	return CTL_OK;
}

static enum ctl_err
h_audit_prune(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	json_int_t before;
	enum ctl_err e;
	int n = 0;

	if ((e = ctl_arg_int(args, "before", 1, 0, INT64_MAX, &before, err,
	    errlen)) != CTL_OK)
		return e;
	while (json_array_size(audit) > 0 && json_integer_value(
	    json_object_get(json_array_get(audit, 0), "time")) < before) {
		json_array_remove(audit, 0);
		n++;
	}
	*res = json_pack("{s:i}", "deleted", n);
	return CTL_OK;
}

static enum ctl_err
h_attach(json_t *args, const struct actor *who, json_t **res, char *err,
    size_t errlen)
{
	snprintf(err, errlen, "the gateway runs in proxy mode; attach needs "
	    "mode = local");
	return CTL_E_REFUSED;
}

static const struct ctl_cmd cmds[] = {
	{ "status",		PRIV_READ,	h_status },
	{ "list",		PRIV_READ,	h_list },
	{ "show",		PRIV_READ,	h_show },
	{ "approve",		PRIV_APPROVE,	h_approve },
	{ "deny",		PRIV_APPROVE,	h_deny },
	{ "revoke",		PRIV_APPROVE,	h_revoke },
	{ "policy.list",	PRIV_READ,	h_policy_list },
	{ "policy.add",		PRIV_ADMIN,	h_policy_insert },
	{ "policy.insert",	PRIV_ADMIN,	h_policy_insert },
	{ "policy.remove",	PRIV_ADMIN,	h_policy_remove },
	{ "policy.move",	PRIV_ADMIN,	h_policy_move },
	{ "policy.test",	PRIV_READ,	h_policy_test },
	{ "policy.apply",	PRIV_ADMIN,	h_policy_apply },
	{ "policy.import",	PRIV_ADMIN,	h_policy_import },
	{ "exporter.list",	PRIV_READ,	h_exporter_list },
	{ "exporter.add",	PRIV_ADMIN,	h_exporter_add },
	{ "exporter.remove",	PRIV_ADMIN,	h_exporter_remove },
	{ "audit.list",		PRIV_READ,	h_audit_list },
	{ "audit.verify",	PRIV_READ,	h_audit_verify },
	{ "audit.prune",	PRIV_ADMIN,	h_audit_prune },
	{ "attach",		PRIV_ADMIN,	h_attach },
	{ "detach",		PRIV_ADMIN,	h_attach },
};

static void
usr1_cb(evutil_socket_t fd, short what, void *arg)
{
	struct fdev *d;
	struct actor sys = { .kind = ACTOR_SYSTEM, .name = "system" };

	if (ndevs >= FAKE_MAX_DEVS)
		return;
	d = &devs[ndevs++];
	memset(d, 0, sizeof(*d));
	snprintf(d->busid, sizeof(d->busid), "fk:9-%d", nextdev);
	snprintf(d->ebusid, sizeof(d->ebusid), "9-%d", nextdev);
	snprintf(d->serial, sizeof(d->serial), "NEW%d", nextdev);
	nextdev++;
	usbgw_strlcpy(d->exporter, "tc17", sizeof(d->exporter));
	usbgw_strlcpy(d->vid, "1209", sizeof(d->vid));
	usbgw_strlcpy(d->pid, "beef", sizeof(d->pid));
	usbgw_strlcpy(d->manufacturer, "Acme", sizeof(d->manufacturer));
	usbgw_strlcpy(d->product, "Gadget", sizeof(d->product));
	d->ifs[0] = "03:01:01";
	d->ifs[1] = "08:06:50";
	d->present = 1;
	d->state = DEV_PROBING;
	transition(d, DEV_PENDING, "pending", &sys, "no rule matched");
}

static void
usr2_cb(evutil_socket_t fd, short what, void *arg)
{
	json_t *ev;
	int i;

	for (i = 0; i < ndevs; i++)
		if (devs[i].present && devs[i].state == DEV_PENDING) {
			ev = dev_json(&devs[i]);
			json_object_set_new(ev, "host",
			    json_string("10.0.0.5:51234"));
			control_event("access-request", ev);
			return;
		}
}

static void
term_cb(evutil_socket_t fd, short what, void *arg)
{
	event_base_loopexit(arg, NULL);
}

int
main(int argc, char **argv)
{
	struct event_base *base;
	struct event *ev1, *ev2, *ev3, *ev4;
	struct config *cfg;
	const char *conf = NULL, *sock = NULL, *pidfile = NULL;
	char *errs = NULL;
	FILE *f;
	int c, i;

	while ((c = getopt(argc, argv, "c:p:rs:")) != -1) {
		switch (c) {
		case 'c':
			conf = optarg;
			break;
		case 'p':
			pidfile = optarg;
			break;
		case 'r':
			list_race = 1;
			break;
		case 's':
			sock = optarg;
			break;
		default:
			fprintf(stderr, "usage: ctl-fake -s SOCKET [-c CONFIG] "
			    "[-p PIDFILE] [-r]\n");
			return 2;
		}
	}
	if (sock == NULL) {
		fprintf(stderr, "ctl-fake: -s SOCKET is required\n");
		return 2;
	}
	log_init("ctl-fake", 1, LOG_LVL_INFO);
	signal(SIGPIPE, SIG_IGN);
	cfg = config_new();
	if (conf != NULL && config_load(cfg, conf, 1, &errs) != 0) {
		fprintf(stderr, "%s", errs);
		return 1;
	}
	usbgw_strlcpy(cfg->control_socket, sock, sizeof(cfg->control_socket));
	started = time(NULL);
	for (i = 0; i < ndevs; i++)
		devs[i].since = started - 60 * (i + 1);
	audit = json_array();

	base = event_base_new();
	if (control_init(base, cfg, cmds, nitems(cmds), audit_refusal) != 0)
		return 1;
	ev1 = evsignal_new(base, SIGUSR1, usr1_cb, NULL);
	ev2 = evsignal_new(base, SIGUSR2, usr2_cb, NULL);
	ev3 = evsignal_new(base, SIGTERM, term_cb, base);
	ev4 = evsignal_new(base, SIGINT, term_cb, base);
	event_add(ev1, NULL);
	event_add(ev2, NULL);
	event_add(ev3, NULL);
	event_add(ev4, NULL);
	if (pidfile != NULL && (f = fopen(pidfile, "w")) != NULL) {
		fprintf(f, "%ld\n", (long)getpid());
		fclose(f);
	}
	event_base_dispatch(base);
	control_shutdown();
	event_free(ev1);
	event_free(ev2);
	event_free(ev3);
	event_free(ev4);
	event_base_free(base);
	config_free(cfg);
	json_decref(audit);
	return 0;
}
