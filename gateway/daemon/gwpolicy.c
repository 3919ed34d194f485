/*
 * The daemon's rule set: loaded from the database, asked for every
 * decision, changed through the control socket (policy.*), and watched
 * by a timer so that time conditions are evaluated continuously: when a
 * window closes, the devices it allowed are re-decided (and torn down).
 * Also the audit commands (audit.*).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "base/log.h"
#include "base/util.h"
#include "control/config.h"
#include "control/control.h"
#include "core/device.h"
#include "core/events.h"
#include "core/exporter.h"
#include "core/loop.h"
#include "core/relay.h"
#include "core/store.h"
#include "core/tiers.h"
#include "core/upstream.h"
#include "daemon/commands.h"
#include "db/audit.h"
#include "db/auditkey.h"
#include "db/db.h"
#include "db/sqldb.h"
#include "policy/policy.h"
#include "policy/rule.h"

#define ERR(code, ...) do { snprintf(err, errlen, __VA_ARGS__); return code; } while (0)
#define POLICY_MAX_RULES	100000
#define POLICY_TEST_ID		INT64_MAX	/* policy test's rule */

static int64_t
now_s(void)
{
	return (int64_t)time(NULL);
}

static struct policy *
admin_tier(void)
{
	struct policy *a, *o;

	tiers_get(&a, &o);
	return a;
}

static struct policy *
op_tier(void)
{
	struct policy *a, *o;

	tiers_get(&a, &o);
	return o;
}


/* ---- control commands ------------------------------------------------ */

static enum ctl_err
h_policy_list(json_t *args, const struct actor *who, json_t **res, char *err,
    size_t errlen)
{
	struct sqldb_stmt *st;
	json_t *a;

	if ((st = sqldb_prepare(db_conn(store_db()),
	    "SELECT id, position, text, COALESCE(comment, ''), created_at, "
	    "created_by, origin FROM rules WHERE position IS NOT NULL "
	    "ORDER BY position")) == NULL)
		ERR(CTL_E_INTERNAL, "database: %s", db_errmsg(store_db()));
	a = json_array();
	while (sqldb_step(st) == SQLDB_ROW)
		json_array_append_new(a, json_pack(
		    "{s:I, s:I, s:s, s:s, s:I, s:s, s:s}",
		    "id", (json_int_t)sqldb_column_int64(st, 0),
		    "position", (json_int_t)sqldb_column_int64(st, 1),
		    "rule", sqldb_column_text(st, 2),
		    "comment", sqldb_column_text(st, 3),
		    "created_at", (json_int_t)sqldb_column_int64(st, 4),
		    "created_by", sqldb_column_text(st, 5),
		    "origin", sqldb_column_text(st, 6)));
	sqldb_finalize(st);
	*res = a;
	return CTL_OK;
}

static enum ctl_err
parse_rule_arg(json_t *args, struct rule **r, char *err, size_t errlen)
{
	struct rule_error re;
	const char *text;
	enum ctl_err e;

	if ((e = ctl_arg_str(args, "rule", 1, &text, err, errlen)) != CTL_OK)
		return e;
	if ((*r = rule_parse(text, &re)) == NULL)
		ERR(CTL_E_USAGE, "rule: %s", re.msg);
	return CTL_OK;
}

/*
 * Positions read in evaluation order: the admin rules first, then the
 * operator tier.  An admin rule goes at pos (0: after the last admin
 * rule), never among the operator rules.
 */
static long
admin_position(long pos)
{
	long n = (long)policy_count(admin_tier());

	if (pos <= 0 || pos > n + 1)
		return n + 1;
	return pos;
}

/*
 * Every policy change re-decides every present device (attached too).
 * A device whose state changes is credited to the admin who changed
 * the policy, with the rule that caused it (added, removed or moved).
 */
static void
policy_changed(const struct actor *who, const char *change, int64_t rule_id)
{
	char why[128];

	tiers_load();
	gw_policy_event(who, change);
	if (rule_id != 0)
		snprintf(why, sizeof(why), "policy %s of rule %lld", change,
		    (long long)rule_id);
	else
		snprintf(why, sizeof(why), "policy %s", change);
	device_reeval_all(who, why, rule_id, NULL);
}

static enum ctl_err
policy_add_at(json_t *args, const struct actor *who, long pos, json_t **res,
    char *err, size_t errlen)
{
	const char *comment = NULL;
	struct rule *r;
	enum ctl_err e;
	int64_t id;
	char detail[512];

	if ((e = parse_rule_arg(args, &r, err, errlen)) != CTL_OK)
		return e;
	if ((e = ctl_arg_str(args, "comment", 0, &comment, err, errlen)) !=
	    CTL_OK) {
		rule_free(r);
		return e;
	}
	if (policy_count(admin_tier()) + policy_count(op_tier()) >= POLICY_MAX_RULES) {
		rule_free(r);
		ERR(CTL_E_REFUSED, "the policy has %d rules already",
		    POLICY_MAX_RULES);
	}
	id = db_rule_add(store_db(), admin_position(pos), r, "admin", 0,
	    comment, who->name, now_s());
	{
		char *text = rule_format(r);

		snprintf(detail, sizeof(detail), "%s", text ? text : "");
		free(text);
	}
	rule_free(r);
	if (id <= 0)
		ERR(CTL_E_INTERNAL, "database: %s", db_errmsg(store_db()));
	store_audit("policy-add", who, "rules", detail);
	policy_changed(who, pos > 0 ? "insert" : "add", id);
	*res = json_pack("{s:I, s:I}", "id", (json_int_t)id, "position",
	    (json_int_t)(policy_find(admin_tier(), id) + 1));
	return CTL_OK;
}

static enum ctl_err
h_policy_add(json_t *args, const struct actor *who, json_t **res, char *err,
    size_t errlen)
{
	return policy_add_at(args, who, 0, res, err, errlen);
}

static enum ctl_err
h_policy_insert(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	json_int_t pos;
	enum ctl_err e;

	if ((e = ctl_arg_int(args, "position", 1, 1, POLICY_MAX_RULES, &pos,
	    err, errlen)) != CTL_OK)
		return e;
	return policy_add_at(args, who, (long)pos, res, err, errlen);
}

static enum ctl_err
h_policy_remove(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	json_int_t id;
	enum ctl_err e;
	char detail[64];
	int r;

	if ((e = ctl_arg_int(args, "id", 1, 1, INT64_MAX, &id, err, errlen)) !=
	    CTL_OK)
		return e;
	r = db_rule_remove(store_db(), id, who->name, now_s());
	if (r == -1)
		ERR(CTL_E_INTERNAL, "database: %s", db_errmsg(store_db()));
	if (r == 0)
		ERR(CTL_E_NOTFOUND, "no rule with id %lld", (long long)id);
	snprintf(detail, sizeof(detail), "rule %lld", (long long)id);
	store_audit("policy-remove", who, "rules", detail);
	policy_changed(who, "remove", id);
	*res = json_object();
	return CTL_OK;
}

static enum ctl_err
h_policy_move(json_t *args, const struct actor *who, json_t **res, char *err,
    size_t errlen)
{
	json_int_t id, pos, want, nadmin, nall;
	enum ctl_err e;
	const char *why = NULL;
	char detail[64];
	int r;

	if ((e = ctl_arg_int(args, "id", 1, 1, INT64_MAX, &id, err, errlen)) !=
	    CTL_OK ||
	    (e = ctl_arg_int(args, "position", 1, 1, POLICY_MAX_RULES, &pos,
	    err, errlen)) != CTL_OK)
		return e;
	/*
	 * A rule moves within its tier, and not past the end: where it
	 * really went, and why not where asked, is in the reply (the CLI
	 * says so) and the audit row.
	 */
	want = pos;
	nadmin = (json_int_t)policy_count(admin_tier());
	nall = nadmin + (json_int_t)policy_count(op_tier());
	if (policy_find(admin_tier(), id) >= 0) {
		if (pos > nadmin) {
			pos = nadmin;
			why = nadmin == nall ? "past the end: moved last" :
			    "an admin rule stays among the admin rules: "
			    "moved to their end";
		}
	} else if (policy_find(op_tier(), id) >= 0) {
		if (pos <= nadmin) {
			pos = nadmin + 1;
			why = "an operator rule stays after the admin rules: "
			    "moved to the first place after them";
		} else if (pos > nall) {
			pos = nall;
			why = "past the end: moved last";
		}
	}
	r = db_rule_move(store_db(), id, (long)pos);
	if (r == -1)
		ERR(CTL_E_INTERNAL, "database: %s", db_errmsg(store_db()));
	if (r == 0)
		ERR(CTL_E_NOTFOUND, "no rule with id %lld", (long long)id);
	if (why != NULL)
		snprintf(detail, sizeof(detail), "rule %lld to %lld (asked "
		    "%lld)", (long long)id, (long long)pos, (long long)want);
	else
		snprintf(detail, sizeof(detail), "rule %lld to %lld",
		    (long long)id, (long long)pos);
	store_audit("policy-move", who, "rules", detail);
	policy_changed(who, "move", id);
	*res = json_pack("{s:I, s:I}", "position", pos, "rules", nall);
	if (why != NULL)
		json_object_set_new(*res, "note", json_string(why));
	return CTL_OK;
}

/* A copy of the admin tier with r (owned by the copy) at 0-based pos. */
static struct policy *
admin_with(struct rule *r, size_t pos)
{
	struct policy *np = policy_new();
	const struct rule *q;
	struct rule_error re;
	struct rule *c;
	int64_t id;
	size_t i;
	char *text;

	for (i = 0; (q = policy_rule_at(admin_tier(), i, &id)) != NULL; i++) {
		text = rule_format(q);
		c = text != NULL ? rule_parse(text, &re) : NULL;
		free(text);
		if (c == NULL || policy_append(np, id, c) == -1)
			rule_free(c);
	}
	if (policy_insert(np, pos, POLICY_TEST_ID, r) == -1)
		rule_free(r);
	policy_prepare(np);
	return np;
}

/* The state a verdict puts a device in (an attached device stays so). */
static enum dev_state
verdict_state(const struct device *dev, enum verdict v)
{
	enum dev_state st = device_verdict_state(v);

	return st == DEV_AUTHORIZED && dev->state == DEV_ATTACHED ?
	    DEV_ATTACHED : st;
}

/*
 * What would adding this rule (at position, default after the admin
 * rules) do to every present device?  The whole decision is run, operator
 * approvals and denials included: "would" is what add or insert does.
 * Changes nothing.
 */
static enum ctl_err
h_policy_test(json_t *args, const struct actor *who, json_t **res, char *err,
    size_t errlen)
{
	struct usbgw_identity id;
	struct exporter *exp;
	struct device *dev;
	struct policy *trial;
	struct decision d;
	struct rule *r;
	json_int_t pos = 0;
	enum ctl_err e;
	json_t *a;
	int m;

	if ((e = ctl_arg_int(args, "position", 0, 1, POLICY_MAX_RULES, &pos,
	    err, errlen)) != CTL_OK)
		return e;
	if ((e = parse_rule_arg(args, &r, err, errlen)) != CTL_OK)
		return e;
	a = json_array();
	TAILQ_FOREACH(exp, &gw->exporters, entry)
		TAILQ_FOREACH(dev, &exp->devices, entry) {
			char vid[5], pid[5];

			if (dev->dead || dev->state == DEV_GONE || !dev->probed)
				continue;
			device_identity(dev, &id);
			m = rule_match(r, &id, NULL, now_s());
			snprintf(vid, sizeof(vid), "%04x", dev->ident.vid);
			snprintf(pid, sizeof(pid), "%04x", dev->ident.pid);
			json_array_append_new(a, json_pack(
			    "{s:s, s:s, s:s, s:s, s:s, s:b, s:o}",
			    "busid", dev->busid, "state",
			    dev_state_name(dev->state), "vid", vid, "pid", pid,
			    "product", dev->ident.product, "match", m,
			    "target", m ? json_string(rule_target_name(
			    rule_target(r))) : json_null()));
		}
	/* now the whole decision, with the rule in the admin tier */
	trial = admin_with(r, pos > 0 ? (size_t)pos - 1 : policy_count(admin_tier()));
	{
		size_t i = 0;

		TAILQ_FOREACH(exp, &gw->exporters, entry)
			TAILQ_FOREACH(dev, &exp->devices, entry) {
				json_t *o, *ifs;

				if (dev->dead || dev->state == DEV_GONE ||
				    !dev->probed)
					continue;
				o = json_array_get(a, i++);
				device_decide_tiers(dev, trial, op_tier(), NULL,
				    NULL, &d);
				json_object_set_new(o, "would", json_string(
				    dev_state_name(verdict_state(dev,
				    d.verdict))));
				json_object_set_new(o, "by", json_string(
				    decided_by_name(d.by)));
				json_object_set_new(o, "why", json_string(
				    d.rule_id == POLICY_TEST_ID ?
				    "the tested rule" : d.why));
				ifs = device_iface_json(dev, &d);
				json_object_update(o, ifs);
				json_decref(ifs);
			}
	}
	policy_free(trial);
	*res = a;
	return CTL_OK;
}

/*
 * Read the rules again (a database writer may have changed them) and
 * re-decide every present device.  Operator decisions (approvals,
 * denials, revocations) stand: they are inputs of the same decision.
 */
static enum ctl_err
h_policy_apply(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	json_t *changes = json_array();
	char why[96];

	tiers_load();
	snprintf(why, sizeof(why), "policy apply");
	device_reeval_all(who, why, 0, changes);
	store_audit("policy-apply", who, "rules", NULL);
	*res = changes;
	return CTL_OK;
}

static enum ctl_err
h_policy_import(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	json_t *rules = json_object_get(args, "rules"), *v;
	struct rule **parsed;
	struct rule_error re;
	size_t i, n;
	int replace = 0, removed = 0;
	enum ctl_err e;

	if (!json_is_array(rules))
		ERR(CTL_E_USAGE, "argument rules: expected an array of rule text");
	if ((e = ctl_arg_bool(args, "replace", &replace, err, errlen)) != CTL_OK)
		return e;
	n = json_array_size(rules);
	if (n > POLICY_MAX_RULES)
		ERR(CTL_E_USAGE, "argument rules: at most %d rules",
		    POLICY_MAX_RULES);
	parsed = n ? xcalloc(n, sizeof(*parsed)) : NULL;
	json_array_foreach(rules, i, v) {
		if (!json_is_string(v) ||
		    (parsed[i] = rule_parse(json_string_value(v), &re)) == NULL) {
			size_t k;

			for (k = 0; k < i; k++)
				rule_free(parsed[k]);
			free(parsed);
			ERR(CTL_E_USAGE, "rule %zu: %s", i + 1,
			    json_is_string(v) ? re.msg : "expected a string");
		}
	}
	db_begin(store_db());
	if (replace) {
		size_t k;
		int64_t id;

		for (k = policy_count(admin_tier()); k > 0; k--) {
			if (policy_rule_at(admin_tier(), k - 1, &id) != NULL &&
			    db_rule_remove(store_db(), id, who->name, now_s()) == 1)
				removed++;
		}
	}
	for (i = 0; i < n; i++)
		if (db_rule_add(store_db(), admin_position(0) + (long)i,
		    parsed[i], "import", 0, NULL, who->name, now_s()) <= 0)
			break;
	for (size_t k = 0; k < n; k++)
		rule_free(parsed[k]);
	free(parsed);
	if (i < n) {
		db_rollback(store_db());
		ERR(CTL_E_INTERNAL, "database: %s", db_errmsg(store_db()));
	}
	db_commit(store_db());
	{
		char detail[64];

		snprintf(detail, sizeof(detail), "%zu added, %d removed", n,
		    removed);
		store_audit("policy-import", who, "rules", detail);
	}
	policy_changed(who, "import", 0);
	*res = json_pack("{s:I, s:i}", "added", (json_int_t)n, "removed",
	    removed);
	return CTL_OK;
}

static enum ctl_err
h_audit_list(json_t *args, const struct actor *who, json_t **res, char *err,
    size_t errlen)
{
	const char *device = NULL;
	json_int_t since = 0, limit = 100;
	struct device *dev;
	struct sqldb_stmt *st;
	enum ctl_err e;
	json_t *a;
	char cand[512];
	int n, known;

	if ((e = ctl_arg_int(args, "since", 0, 0, INT64_MAX, &since, err,
	    errlen)) != CTL_OK ||
	    (e = ctl_arg_int(args, "limit", 0, 1, 10000, &limit, err,
	    errlen)) != CTL_OK ||
	    (e = ctl_arg_str(args, "device", 0, &device, err, errlen)) != CTL_OK)
		return e;
	store_flush();
	/*
	 * The device: exactly the busid given if the log has rows for it (a
	 * device gone long ago included), else a live device's busid as
	 * show resolves it (a unique prefix; an ambiguous one lists the
	 * candidates).  Never a prefix match on the log: tc17:1-1 is not
	 * tc17:1-10.
	 */
	if (device != NULL) {
		if (device[0] == '\0')
			ERR(CTL_E_USAGE, "device: an empty busid: expected a "
			    "busid such as tc17:1-1");
		if ((st = sqldb_prepare(db_conn(store_db()),
		    "SELECT 1 FROM audit_log WHERE busid = ?1 LIMIT 1")) ==
		    NULL)
			ERR(CTL_E_INTERNAL, "database: %s",
			    db_errmsg(store_db()));
		sqldb_bind_text(st, 1, device);
		known = sqldb_step(st) == SQLDB_ROW;
		sqldb_finalize(st);
		if (!known) {
			dev = gw_device_find(device, &n);
			if (dev == NULL && n > 1) {
				gw_device_candidates(device, cand,
				    sizeof(cand));
				ERR(CTL_E_AMBIGUOUS, "busid %s matches %d "
				    "devices: %s (give more of the busid)",
				    device, n, cand);
			}
			if (dev == NULL)
				ERR(CTL_E_NOTFOUND, "no device and no audit "
				    "row has busid %s", device);
			device = dev->busid;
		}
	}
	if ((st = sqldb_prepare(db_conn(store_db()),
	    "SELECT " STORE_AUDIT_COLUMNS " FROM (SELECT * FROM audit_log "
	    "WHERE ts >= ?1 AND "
	    "(?2 = 0 OR busid = ?3) ORDER BY seq DESC LIMIT ?4) recent "
	    "ORDER BY seq")) == NULL)
		ERR(CTL_E_INTERNAL, "database: %s", db_errmsg(store_db()));
	sqldb_bind_int64(st, 1, since);
	sqldb_bind_int64(st, 2, device != NULL);
	sqldb_bind_text(st, 3, device != NULL ? device : "");
	sqldb_bind_int64(st, 4, limit);
	a = json_array();
	while (sqldb_step(st) == SQLDB_ROW)
		json_array_append_new(a, store_audit_row_json(st));
	sqldb_finalize(st);
	*res = a;
	return CTL_OK;
}

/*
 * args.anchors (optional): [{"seq": N, "hash": H, "time"?: T, "key"?: F,
 * "sig"?: S}, ...] as the CLI parsed them from an anchor file; each one
 * is checked like a line of such a file (auditkey.c).
 */
static enum ctl_err
anchors_arg(json_t *args, struct audit_anchor **out, size_t *n, char *err,
    size_t errlen)
{
	json_t *arr, *o;
	size_t i;
	char line[512], why[192];
	int r, m;

	*out = NULL;
	*n = 0;
	if (args == NULL || (arr = json_object_get(args, "anchors")) == NULL)
		return CTL_OK;
	if (!json_is_array(arr) || json_array_size(arr) > AUDIT_ANCHORS_MAX)
		ERR(CTL_E_USAGE, "anchors: expected an array of at most %d "
		    "anchors", AUDIT_ANCHORS_MAX);
	*out = xcalloc(json_array_size(arr) + 1, sizeof(**out));
	json_array_foreach(arr, i, o) {
		const char *h = json_string_value(json_object_get(o, "hash"));
		const char *k = json_string_value(json_object_get(o, "key"));
		const char *sg = json_string_value(json_object_get(o, "sig"));
		json_t *seq = json_object_get(o, "seq");
		json_t *t = json_object_get(o, "time");

		if (!json_is_integer(seq) || h == NULL ||
		    (t != NULL && !json_is_integer(t)) ||
		    (json_object_get(o, "key") != NULL && k == NULL) ||
		    (json_object_get(o, "sig") != NULL && sg == NULL)) {
			free(*out);
			*out = NULL;
			ERR(CTL_E_USAGE, "anchors[%zu]: expected {\"seq\": N, "
			    "\"hash\": H} and optional time, key, sig", i);
		}
		/* one syntax for anchors: the line parser checks the fields */
		m = snprintf(line, sizeof(line), "%s seq=%" JSON_INTEGER_FORMAT
		    " hash=%.64s", AUDIT_ANCHOR_TAG, json_integer_value(seq), h);
		if (t != NULL)
			m += snprintf(line + m, sizeof(line) - (size_t)m,
			    " time=%" JSON_INTEGER_FORMAT, json_integer_value(t));
		if (k != NULL)
			m += snprintf(line + m, sizeof(line) - (size_t)m,
			    " key=%.16s", k);
		if (sg != NULL)
			snprintf(line + m, sizeof(line) - (size_t)m, " sig=%.128s",
			    sg);
		r = audit_anchor_parse_line(line, strlen(line), &(*out)[i], why,
		    sizeof(why));
		if (r != 1 || strlen(h) != 64 || (k && strlen(k) != 16) ||
		    (sg && strlen(sg) != AUDIT_SIG_HEX)) {
			free(*out);
			*out = NULL;
			ERR(CTL_E_USAGE, "anchors[%zu]: %s", i, r == -1 ? why :
			    "expected seq, hash (64 hex digits), key, sig");
		}
		(*out)[i].line = 0;
		(*n)++;
	}
	return CTL_OK;
}

static enum ctl_err
h_audit_verify(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	struct audit_verify_opts o;
	struct audit_verify v;
	struct audit_anchor *an, own;
	size_t n;
	enum ctl_err e;
	char msg[512];
	int r;

	if ((e = anchors_arg(args, &an, &n, err, errlen)) != CTL_OK)
		return e;
	store_flush();
	memset(&o, 0, sizeof(o));
	memset(&own, 0, sizeof(own));
	o.key = store_audit_key();
	o.anchors = an;
	o.nanchors = n;
	o.anchor_what = "the anchor";
	/* a tail cut while the daemon runs: the last row it wrote */
	if (store_audit_written(&own.seq, own.hash) == 1)
		o.own = &own;
	r = audit_verify_ex(store_db(), &o, &v);
	free(an);
	if (r == -1)
		ERR(CTL_E_INTERNAL, "database: %s", db_errmsg(store_db()));
	if (r == 0)
		snprintf(msg, sizeof(msg), "chain intact%s, %lld anchors and "
		    "checkpoints matched", v.keyed ? ", every keyed row's MAC "
		    "checked" : "", (long long)v.anchors_checked);
	*res = json_pack("{s:b, s:I, s:I, s:s, s:s, s:b, s:b, s:I, s:I, s:I}",
	    "ok", r == 0, "rows", (json_int_t)v.rows, "bad_seq",
	    (json_int_t)v.bad_seq, "message", r == 0 ? msg : v.reason, "head",
	    v.head, "keyed", v.keyed != 0, "cut", r == 2, "macs",
	    (json_int_t)v.macs, "anchors_checked",
	    (json_int_t)v.anchors_checked, "anchors_pruned",
	    (json_int_t)v.anchors_pruned);
	return CTL_OK;
}

static json_t *
anchor_json(const struct audit_anchor *a)
{
	char line[512];

	audit_anchor_format(a, line, sizeof(line));
	return json_pack("{s:I, s:s, s:I, s:s, s:s, s:s}", "seq",
	    (json_int_t)a->seq, "hash", a->hash, "time", (json_int_t)a->time,
	    "key", a->key, "sig", a->sig, "line", line);
}

static enum ctl_err
h_audit_anchor(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	struct audit_anchor a;
	int r;

	memset(&a, 0, sizeof(a));
	store_flush();
	if ((r = store_audit_anchor(&a)) == -1)
		ERR(CTL_E_INTERNAL, "cannot sign a checkpoint: %s",
		    db_errmsg(store_db()));
	if (a.seq == 0)
		ERR(CTL_E_NOTFOUND, "the audit log is empty: nothing to anchor");
	*res = anchor_json(&a);
	return CTL_OK;
}

static enum ctl_err
h_audit_pubkey(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	const struct audit_key *k = store_audit_key();
	char pem[512];

	if (k == NULL || audit_key_public_pem(k, pem, sizeof(pem)) == -1)
		ERR(CTL_E_INTERNAL, "no audit key");
	*res = json_pack("{s:s, s:s, s:I}", "pem", pem, "key",
	    audit_key_fpr(k), "since", (json_int_t)audit_key_since(k));
	return CTL_OK;
}

static enum ctl_err
h_audit_prune(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	json_int_t before;
	int64_t pruned = 0;
	enum ctl_err e;

	if ((e = ctl_arg_int(args, "before", 1, 1, INT64_MAX, &before, err,
	    errlen)) != CTL_OK)
		return e;
	switch (audit_prune_check(before, now_s(), gw->cfg->audit_retention_s,
	    err, errlen)) {
	case AUDIT_PRUNE_OK:
		break;
	case AUDIT_PRUNE_FUTURE:
		return CTL_E_USAGE;
	case AUDIT_PRUNE_RETAINED:
		return CTL_E_REFUSED;
	}
	store_flush();
	if (store_audit_prune(before, who, &pruned) == -1)
		ERR(CTL_E_INTERNAL, "database: %s", db_errmsg(store_db()));
	*res = json_pack("{s:I}", "deleted", (json_int_t)pruned);
	return CTL_OK;
}

const struct ctl_cmd gwpolicy_cmds[] = {
	{ "policy.list",	PRIV_READ,	h_policy_list },
	{ "policy.test",	PRIV_READ,	h_policy_test },
	{ "audit.list",		PRIV_READ,	h_audit_list },
	{ "audit.verify",	PRIV_READ,	h_audit_verify },
	{ "audit.anchor",	PRIV_READ,	h_audit_anchor },
	{ "audit.pubkey",	PRIV_READ,	h_audit_pubkey },
	{ "policy.add",		PRIV_ADMIN,	h_policy_add },
	{ "policy.insert",	PRIV_ADMIN,	h_policy_insert },
	{ "policy.remove",	PRIV_ADMIN,	h_policy_remove },
	{ "policy.move",	PRIV_ADMIN,	h_policy_move },
	{ "policy.apply",	PRIV_ADMIN,	h_policy_apply },
	{ "policy.import",	PRIV_ADMIN,	h_policy_import },
	{ "audit.prune",	PRIV_ADMIN,	h_audit_prune },
};
const size_t gwpolicy_ncmds = nitems(gwpolicy_cmds);
