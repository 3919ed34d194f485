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

#include "base/jsontext.h"
#include "base/log.h"
#include "base/util.h"
#include "control/config.h"
#include "control/control.h"
#include "control/hooks.h"
#include "core/device.h"
#include "core/enroll.h"
#include "core/exporter.h"
#include "core/lease.h"
#include "core/local.h"
#include "core/loop.h"
#include "core/relay.h"
#include "core/store.h"
#include "core/upstream.h"
#include "daemon/commands.h"
#include "daemon/feed.h"
#include "daemon/gw.h"
#include "db/db.h"
#include "db/sqldb.h"
#include "proto/ctlproto.h"

#define ERR(code, ...) do { snprintf(err, errlen, __VA_ARGS__); return code; } while (0)

static enum ctl_err
find_device(json_t *args, struct device **devp, char *err, size_t errlen)
{
	const char *busid;
	enum ctl_err e;
	int n;

	if ((e = ctl_arg_busid(args, &busid, err, errlen)) != CTL_OK)
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

/*
 * A decision about a device another gateway holds (protocol.md 4.2): on
 * a shared store, a busid this gateway does not have is looked up in the
 * store and the decision written there; its holder applies it through
 * the change feed.  A permanent one needs the device's verified identity
 * and interfaces in memory: it is made at the holder.  CTL_E_NOTFOUND
 * passes through when there is no such device anywhere.
 */
static enum ctl_err
decide_elsewhere(json_t *args, int kind, const struct approve_opts *o,
    const struct actor *who, json_t **res, char *err, size_t errlen)
{
	const char *busid = NULL;
	int64_t id = 0;
	char why[256];
	int rc;

	if (sqldb_kind(db_conn(store_db())) != SQLDB_PG ||
	    ctl_arg_str(args, "busid", 1, &busid, why, sizeof(why)) != CTL_OK)
		return CTL_E_NOTFOUND;
	if (json_object_get(args, "identity") != NULL)
		return CTL_E_NOTFOUND;	/* checked against a held device only */
	if (kind != STORE_REMOTE_REVOKE && o->scope == SCOPE_PERMANENT)
		ERR(CTL_E_REFUSED, "%s is held by another gateway: a permanent "
		    "decision is made there (it reads the device's identity)",
		    busid);
	rc = store_remote_decision(busid, kind, o, who, &id, err, errlen);
	if (rc == -1)
		return CTL_E_INTERNAL;
	if (rc == 0)
		return CTL_E_NOTFOUND;
	*res = json_pack("{s:s, s:I, s:s, s:b}", "busid", busid, "id",
	    (json_int_t)id, "state", kind == STORE_REMOTE_REVOKE ?
	    "revoked at its gateway" : "recorded for its gateway",
	    "held_here", 0);
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
	enum ctl_err e, e2;
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
	if ((e = find_decided(args, &dev, err, errlen)) == CTL_E_NOTFOUND &&
	    (e2 = decide_elsewhere(args, deny ? STORE_REMOTE_DENY :
	    STORE_REMOTE_APPROVE, &opts, who, res, err, errlen)) !=
	    CTL_E_NOTFOUND)
		return e2;
	if (e != CTL_OK)
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
	struct approve_opts opts;
	struct device *dev;
	const char *m = NULL;
	enum ctl_err e, e2;

	if ((e = ctl_arg_str(args, "message", 0, &m, err, errlen)) != CTL_OK)
		return e;
	memset(&opts, 0, sizeof(opts));
	if (m != NULL)
		usbgw_strlcpy(opts.message, m, sizeof(opts.message));
	if ((e = find_decided(args, &dev, err, errlen)) == CTL_E_NOTFOUND &&
	    (e2 = decide_elsewhere(args, STORE_REMOTE_REVOKE, &opts, who, res,
	    err, errlen)) != CTL_E_NOTFOUND)
		return e2;
	if (e != CTL_OK)
		return e;
	if ((e = device_revoke(dev, who, m, err, errlen)) != CTL_OK)
		return e;
	*res = device_json(dev);
	return CTL_OK;
}

static int
gateway_row(void *arg, const struct db_gateway *g)
{
	json_t *a = arg;
	int64_t now = (int64_t)time(NULL);

	json_array_append_new(a, json_pack("{s:s, s:I, s:I, s:I, s:s, s:s, "
	    "s:b}", "name", g->name, "started_at", (json_int_t)g->started_at,
	    "heartbeat", (json_int_t)g->heartbeat, "heartbeat_age",
	    (json_int_t)(now - g->heartbeat), "address", g->address,
	    "version", g->version, "self",
	    strcmp(g->name, feed_gateway_name()) == 0));
	return json_array_size(a) >= 1000;	/* bounded */
}

/* gateways: every gateway that has run on this store (protocol.md 4.3). */
static enum ctl_err
h_gateways(json_t *args, const struct actor *who, json_t **res, char *err,
    size_t errlen)
{
	json_t *a = json_array();

	if (db_gateways_list(store_db(), gateway_row, a) == -1) {
		json_decref(a);
		ERR(CTL_E_INTERNAL, "database: %s", db_errmsg(store_db()));
	}
	*res = a;
	return CTL_OK;
}

static json_t *
exporter_json(const struct exporter *exp)
{
	const struct device *dev;
	json_t *o;
	int n = 0;

	TAILQ_FOREACH(dev, &exp->devices, entry)
		if (dev->state != DEV_GONE)
			n++;
	o = json_pack("{s:s, s:s, s:i, s:s, s:i, s:s, s:b, s:s}", "name",
	    exp->name, "host", exp->host, "port", (int)exp->port,
	    "status", !exp->leased ? "elsewhere" : exp->state == EXP_UP ?
	    "up" : exp->state == EXP_DOWN ? "down" : "connecting", "devices", n, "kind",
	    exp_kind_name(exp->kind), "control", exp->ctl != NULL, "tls",
	    exp_tls_name(exp->tls));
	/* what exporter list shows (protocol.md 1.11.4): null for none */
	json_object_set_new(o, "last_seen", exp->last_seen > 0 ?
	    json_integer(exp->last_seen) : json_null());
	json_object_set_new(o, "last_error", exp->last_error[0] != '\0' ?
	    json_string(exp->last_error) : json_null());
	json_object_set_new(o, "last_error_at", exp->last_error[0] != '\0' ?
	    json_integer(exp->last_error_at) : json_null());
	json_object_set_new(o, "source", json_string(exp->source ==
	    EXP_SRC_FILE ? "file" : "cli"));
	json_object_set_new(o, "file", exp->source == EXP_SRC_FILE &&
	    exp->origin[0] != '\0' ? json_string(exp->origin) : json_null());
	/* several gateways (protocol.md 4.4): who holds its lease */
	if (lease_active()) {
		json_object_set_new(o, "holder", exp->lease_holder[0] != '\0' ?
		    json_string(exp->lease_holder) : json_null());
		json_object_set_new(o, "holder_is_me", json_boolean(exp->leased));
		json_object_set_new(o, "epoch", json_integer(exp->lease_epoch));
	}
	return o;
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

/* "HOST:PORT" or "[V6]:PORT". */
static const char *
fmt_hostport(const char *host, unsigned port, char *buf, size_t len)
{
	snprintf(buf, len, strchr(host, ':') != NULL ? "[%s]:%u" : "%s:%u",
	    host, port);
	return buf;
}

static enum ctl_err
h_exporter_add(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	const char *name, *host, *tls = "off";
	json_int_t port = USBIP_PORT;
	struct exporter *exp, *other;
	char canon[sizeof(exp->host)], ap[300], orig[128];
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
	usbgw_strlcpy(canon, host, sizeof(canon));
	config_host_canon(canon, sizeof(canon));
	if ((other = exporter_find_addr(canon, (uint16_t)port, NULL)) != NULL)
		ERR(CTL_E_REFUSED, "exporter %s: address %s is exporter %s's "
		    "(%s): one exporter, one name", name, fmt_hostport(canon,
		    (unsigned)port, ap, sizeof(ap)), other->name,
		    exporter_origin(other, orig, sizeof(orig)));
	exp = agent ? exporter_new_agent(name, EXP_KIND_AGENT, canon,
	    (uint16_t)port) : exporter_new(name, canon, (uint16_t)port);
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
	store_exporter_delete(exp, who, NULL);
	exporter_free(exp);
	*res = json_object();
	return CTL_OK;
}

/* ---- exporter.import (protocol.md 1.11.1) ---------------------------- */

#define IMPORT_FILE_MAX	200	/* the file's name, for messages */

/* One entry of an import, what it does to the exporter of its name. */
enum imp_op { IMP_ADD, IMP_CHANGE, IMP_SAME };

/* Is name one of the file's entries? */
static bool
import_declares(const struct config *cfg, const char *name)
{
	size_t i;

	for (i = 0; i < cfg->nexporters; i++)
		if (strcmp(cfg->exporters[i].name, name) == 0)
			return true;
	return false;
}

/* "FILE:LINE: message" lines into an array of strings. */
static void
details_from_text(json_t *a, char *text)
{
	char *line, *save;

	for (line = strtok_r(text, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save))
		json_array_append_new(a, json_string(line));
}

#define IMPORT_DETAILS_MAX	200	/* lines of details; then "N more" */

static size_t detail_skip;	/* details_sort's FILE length (one thread) */

static unsigned long
detail_line(const json_t *v)
{
	const char *s = json_string_value(v);

	return s != NULL && strlen(s) > detail_skip ?
	    strtoul(s + detail_skip + 1, NULL, 10) : 0;
}

static int
detail_cmp(const void *a, const void *b)
{
	unsigned long x = detail_line(*(json_t *const *)a),
	    y = detail_line(*(json_t *const *)b);

	return x < y ? -1 : x > y;
}

/*
 * "FILE:LINE: ..." strings in line order (stable enough: one message a
 * line but for a rare second), at most IMPORT_DETAILS_MAX of them.
 */
static void
details_sort(json_t *a, size_t skip)
{
	size_t i, n = json_array_size(a);
	json_t **v;
	char more[64];

	if (n < 2)
		return;
	v = xcalloc(n, sizeof(*v));
	for (i = 0; i < n; i++)
		v[i] = json_incref(json_array_get(a, i));
	detail_skip = skip;
	qsort(v, n, sizeof(*v), detail_cmp);
	json_array_clear(a);
	for (i = 0; i < n; i++) {
		if (i < IMPORT_DETAILS_MAX)
			json_array_append(a, v[i]);
		json_decref(v[i]);
	}
	if (n > IMPORT_DETAILS_MAX) {
		snprintf(more, sizeof(more), "... and %zu more lines refused",
		    n - IMPORT_DETAILS_MAX);
		json_array_append_new(a, json_string(more));
	}
	free(v);
}

/*
 * Every entry against the exporters there are: a name the files own, a
 * name the database has (unless --replace), an address another exporter
 * has (unless --replace removes that one).  Adds to details; ops[i]
 * what entry i does.
 */
static void
import_check(const struct config *cfg, const char *file, int replace,
    enum imp_op *ops, json_t *details)
{
	const struct config_exporter *ce;
	struct exporter *exp, *other;
	char msg[600], ap[300], orig[128];
	size_t i;

	for (i = 0; i < cfg->nexporters; i++) {
		ce = &cfg->exporters[i];
		exp = exporter_find(ce->name);
		ops[i] = IMP_ADD;
		if (exp != NULL && exp->source == EXP_SRC_FILE) {
			snprintf(msg, sizeof(msg), "%s:%d: exporter %s is "
			    "declared at %s: the configuration's, not the "
			    "database's (change it there)", file, ce->line,
			    ce->name, exp->origin[0] != '\0' ? exp->origin :
			    "the config file");
			json_array_append_new(details, json_string(msg));
			continue;
		}
		if (exp != NULL && !replace) {
			snprintf(msg, sizeof(msg), "%s:%d: exporter %s exists "
			    "(--replace makes the file the set of exporters "
			    "added with usbgw)", file, ce->line, ce->name);
			json_array_append_new(details, json_string(msg));
			continue;
		}
		if (exp != NULL)
			ops[i] = strcmp(exp->host, ce->addr.host) == 0 &&
			    exp->port == atoi(ce->addr.port) &&
			    (int)exp->kind == ce->kind &&
			    (int)exp->tls == ce->tls ? IMP_SAME : IMP_CHANGE;
		other = exporter_find_addr(ce->addr.host,
		    (uint16_t)atoi(ce->addr.port), exp);
		if (other == NULL || (replace && other->source == EXP_SRC_CLI &&
		    !import_declares(cfg, other->name)))
			continue;	/* none, or one --replace removes */
		if (replace && other->source == EXP_SRC_CLI)
			continue;	/* the file moves it: checked there */
		snprintf(msg, sizeof(msg), "%s:%d: exporter %s: address %s is "
		    "exporter %s's (%s): one exporter, one name", file,
		    ce->line, ce->name, fmt_hostport(ce->addr.host,
		    (unsigned)atoi(ce->addr.port), ap, sizeof(ap)), other->name,
		    exporter_origin(other, orig, sizeof(orig)));
		json_array_append_new(details, json_string(msg));
	}
}

/*
 * exporter.import {"text", "file", "replace"}: every line checked, then
 * all of it in one transaction, or nothing; one audit row.
 */
static enum ctl_err
h_exporter_import(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	const char *text, *file = "import";
	struct config *cfg;
	struct exporter *exp, *next;
	const struct config_exporter *ce;
	struct db *db = store_db();
	enum imp_op *ops = NULL;
	int64_t *ids = NULL;
	json_t *details, *removed;
	char *errs = NULL, detail[400];
	size_t i, nadd = 0, nchange = 0, nsame = 0, nfile = 0, n;
	int replace = 0, fail = 0;
	enum ctl_err e;

	if ((e = ctl_arg_str(args, "text", 1, &text, err, errlen)) != CTL_OK ||
	    (e = ctl_arg_str(args, "file", 0, &file, err, errlen)) != CTL_OK ||
	    (e = ctl_arg_bool(args, "replace", &replace, err, errlen)) !=
	    CTL_OK)
		return e;
	if (file == NULL || *file == '\0' || strlen(file) > IMPORT_FILE_MAX ||
	    strpbrk(file, "\n\r\t") != NULL)
		file = "import";
	cfg = config_new();
	details = json_array();
	/* the lines that parse are checked against the exporters too */
	if (config_parse_exporter_list(cfg, file, text, strlen(text), &errs) !=
	    0)
		details_from_text(details, errs);
	ops = xcalloc(cfg->nexporters + 1, sizeof(*ops));
	import_check(cfg, file, replace, ops, details);
	n = json_array_size(details);
	details_sort(details, strlen(file));
	free(errs);
	if (n > 0) {
		free(ops);
		config_free(cfg);
		*res = details;
		ERR(CTL_E_USAGE, "%s: %zu line%s refused; nothing imported", file,
		    n, n == 1 ? "" : "s");
	}
	json_decref(details);

	/* the database first, in one transaction: nothing half done */
	ids = xcalloc(cfg->nexporters + 1, sizeof(*ids));
	removed = json_array();
	if (db != NULL && db_begin(db) == -1)
		fail = 1;
	TAILQ_FOREACH(exp, &gw->exporters, entry) {
		if (exp->dead)
			continue;
		if (exp->source == EXP_SRC_FILE)
			nfile++;
		else if (replace && !import_declares(cfg, exp->name)) {
			json_array_append_new(removed, json_string(exp->name));
			if (!fail && db != NULL &&
			    db_exporter_remove(db, exp->name, (int64_t)time(NULL)) ==
			    -1)
				fail = 1;
		}
	}
	for (i = 0; i < cfg->nexporters && !fail; i++) {
		ce = &cfg->exporters[i];
		if (ops[i] == IMP_SAME || db == NULL)
			continue;
		if ((ids[i] = db_exporter_upsert(db, ce->name, ce->addr.host,
		    atoi(ce->addr.port), (int64_t)time(NULL))) <= 0 ||
		    db_exporter_set_kind(db, ids[i], exp_kind_name(ce->kind),
		    exp_tls_name(ce->tls)) == -1 ||
		    db_exporter_set_source(db, ids[i], "cli", NULL) == -1)
			fail = 1;
	}
	if (db != NULL && (fail || db_commit(db) == -1)) {
		db_rollback(db);
		free(ops);
		free(ids);
		json_decref(removed);
		config_free(cfg);
		ERR(CTL_E_INTERNAL, "database: %s (nothing imported)",
		    db_errmsg(db));
	}

	/* then the exporters themselves */
	for (exp = TAILQ_FIRST(&gw->exporters); exp != NULL; exp = next) {
		next = TAILQ_NEXT(exp, entry);
		if (!exp->dead && exp->source == EXP_SRC_CLI && replace &&
		    !import_declares(cfg, exp->name))
			exporter_free(exp);	/* claims end, devices gone */
	}
	for (i = 0; i < cfg->nexporters; i++) {
		ce = &cfg->exporters[i];
		if (ops[i] == IMP_SAME) {
			nsame++;
			continue;
		}
		if (ops[i] == IMP_CHANGE) {
			nchange++;
			if ((exp = exporter_find(ce->name)) != NULL)
				exporter_free(exp);
		} else
			nadd++;
		exp = ce->kind == EXP_KIND_AGENT ? exporter_new_agent(ce->name,
		    EXP_KIND_AGENT, ce->addr.host, (uint16_t)atoi(ce->addr.port)) :
		    exporter_new(ce->name, ce->addr.host,
		    (uint16_t)atoi(ce->addr.port));
		/* before its first connection (a timer); never optional here */
		exp->tls = ce->tls == EXP_TLS_REQUIRED ? EXP_TLS_REQUIRED :
		    EXP_TLS_OFF;
		exp->id = ids[i];
		exp->source = EXP_SRC_CLI;
	}
	snprintf(detail, sizeof(detail), "%.200s: %zu exporters (%zu added, "
	    "%zu changed, %zu unchanged), %zu removed%s", file,
	    cfg->nexporters, nadd, nchange, nsame, json_array_size(removed),
	    replace ? " (--replace)" : "");
	store_audit("exporter-import", who, "exporters", detail);
	log_info("exporter import by %s: %s", who->name, detail);
	*res = json_pack("{s:I, s:I, s:I, s:I, s:I, s:o, s:I}",
	    "imported", (json_int_t)cfg->nexporters,
	    "added", (json_int_t)nadd, "changed", (json_int_t)nchange,
	    "unchanged", (json_int_t)nsame,
	    "removed", (json_int_t)json_array_size(removed),
	    "removed_names", removed,
	    "file_exporters", (json_int_t)nfile);
	free(ops);
	free(ids);
	config_free(cfg);
	return CTL_OK;
}

/* hello, status: the store's state. */
void
gw_store_status(json_t *o)
{
	const struct config *cfg = gw->cfg;

	json_object_set_new(o, "store", json_string(store_degraded() ?
	    "degraded" : "ok"));
	if (store_degraded()) {
		json_object_set_new(o, "store_degraded_ms",
		    json_integer((json_int_t)store_degraded_ms()));
		json_object_set_new(o, "store_loss", json_string(cfg != NULL &&
		    cfg->store_loss == CONFIG_STORE_LOSS_KEEP ? "keep" :
		    "stop"));
	}
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
	gw_store_status(o);
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
	{ "gateways",		PRIV_READ,	h_gateways },
	{ "exporter.add",	PRIV_ADMIN,	h_exporter_add },
	{ "exporter.remove",	PRIV_ADMIN,	h_exporter_remove },
	{ "exporter.import",	PRIV_ADMIN,	h_exporter_import },
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
