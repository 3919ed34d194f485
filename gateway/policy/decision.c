/*
 * decide(): the precedence table of decision.h, top to bottom.  Both
 * rule tiers and the approvals are looked at first (every input counts
 * towards recheck_at, whatever row decides); then the rows are tried in
 * order, one statement each.
 *
 * An admin's override is part of row 2, as the table writes it: it
 * turns an admin block into allow there, so it also wins over a denial,
 * an operator block and a revocation (rows 3-5), which come later.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "policy/decision.h"
#include "policy/policy.h"
#include "policy/rule.h"
#include "base/util.h"

/* What the inputs say, before the table orders them. */
struct facts {
	struct policy_decision	 admin;		/* rule_id 0: no match */
	struct policy_decision	 oper;
	const struct approval	*denial;	/* lowest id */
	const struct approval	*allow;		/* best allow for this host */
	const struct approval	*override;	/* best override */
	int64_t			 recheck_at;
};

static void
tier(struct policy *p, const struct decision_in *in,
    const struct usbgw_context *ctx, struct policy_decision *pd)
{
	if (p == NULL) {
		pd->target = RULE_ASK;
		pd->rule_id = 0;
		pd->rule = NULL;
		pd->next_change = RULE_NEVER;
		return;
	}
	policy_evaluate(p, in->id, ctx, in->now, pd);
}

static bool
expired(const struct approval *a, int64_t now)
{
	return a->expires_at != 0 && a->expires_at <= now;
}

/* Of two allow approvals: no expiry first, then the latest, then lowest id. */
static bool
better(const struct approval *a, const struct approval *b)
{
	if (b == NULL)
		return true;
	if ((a->expires_at == 0) != (b->expires_at == 0))
		return a->expires_at == 0;
	if (a->expires_at != b->expires_at)
		return a->expires_at > b->expires_at;
	return a->id < b->id;
}

static void
pick_approvals(const struct decision_in *in, struct facts *f)
{
	const struct approval	*a;
	size_t			 i;

	for (i = 0; i < in->napprovals; i++) {
		a = &in->approvals[i];
		if (expired(a, in->now))
			continue;
		if (a->expires_at != 0 && a->expires_at < f->recheck_at)
			f->recheck_at = a->expires_at;
		if (a->deny) {
			if (f->denial == NULL || a->id < f->denial->id)
				f->denial = a;
			continue;
		}
		/* Standing state (no host): every approval counts. */
		if (in->host != NULL && !host_match_test(&a->to, in->host))
			continue;
		if (better(a, f->allow))
			f->allow = a;
		if (a->override && better(a, f->override))
			f->override = a;
	}
}

static void
gather(const struct decision_in *in, struct facts *f)
{
	struct usbgw_context	ctx;

	memset(f, 0, sizeof(*f));
	memset(&ctx, 0, sizeof(ctx));
	if (in->host != NULL) {
		ctx.host_name = in->host->name;
		ctx.host_addr = in->host->addr;
	}
	ctx.allowed_matches = in->allowed_matches;
	ctx.arg = in->arg;
	tier(in->admin, in, &ctx, &f->admin);
	tier(in->operator, in, &ctx, &f->oper);
	f->recheck_at = f->admin.next_change;
	if (f->oper.next_change < f->recheck_at)
		f->recheck_at = f->oper.next_change;
	pick_approvals(in, f);
}

static void
by_system(struct decision *d, enum verdict v, enum decided_by by)
{
	d->verdict = v;
	d->by = by;
	d->actor.kind = ACTOR_SYSTEM;
	usbgw_strlcpy(d->actor.name, "system", sizeof(d->actor.name));
}

static void
by_rule(struct decision *d, enum verdict v, enum decided_by by,
    const struct policy_decision *pd)
{
	d->verdict = v;
	d->by = by;
	d->rule_id = pd->rule_id;
	d->actor.kind = ACTOR_RULE;
	d->actor.rule_id = pd->rule_id;
	snprintf(d->actor.name, sizeof(d->actor.name), "rule %" PRId64,
	    pd->rule_id);
	snprintf(d->why, sizeof(d->why), "%s rule %" PRId64 ": %s%s",
	    by == BY_ADMIN_RULE ? "admin" : "operator", pd->rule_id,
	    rule_target_name(pd->target),
	    v == VERDICT_BLOCK && pd->target == RULE_REJECT ? " (as block)" :
	    "");
}

/* prefix "approved": "approved by bob for 10.0.0.0/8 until
 * 2023-11-14T22:13:20Z" (UTC, said so: never a raw epoch). */
static void
by_approval(struct decision *d, enum verdict v, enum decided_by by,
    const struct approval *a, const char *prefix)
{
	char	host[HOST_NAME_MAX_LEN + 1], until[32] = "";

	d->verdict = v;
	d->by = by;
	d->approval_id = a->id;
	d->actor = a->by;
	d->actor.name[sizeof(d->actor.name) - 1] = '\0';	/* bounded */
	usbgw_strlcpy(d->why, prefix, sizeof(d->why));
	usbgw_strlcat(d->why, " by ", sizeof(d->why));
	usbgw_strlcat(d->why, d->actor.name, sizeof(d->why));
	if (host_match_format(&a->to, host, sizeof(host))[0] != '\0') {
		usbgw_strlcat(d->why, " for ", sizeof(d->why));
		usbgw_strlcat(d->why, host, sizeof(d->why));
	}
	if (a->expires_at != 0) {
		usbgw_strlcat(d->why, " until ", sizeof(d->why));
		usbgw_strlcat(d->why, usbgw_fmt_utc(until, sizeof(until),
		    a->expires_at), sizeof(d->why));
	}
}

static bool
blocks(enum rule_target t)
{
	return t == RULE_BLOCK || t == RULE_REJECT;
}

/* The table of decision.h, one row per statement, first that applies. */
static void
apply_rows(const struct decision_in *in, const struct facts *f,
    struct decision *d)
{
	const struct policy_decision	*ad = &f->admin, *op = &f->oper;
	bool				 adm = ad->rule_id != 0;
	bool				 opr = op->rule_id != 0;
	char				 pfx[64];

	if (in->anomaly) {				/* 1 */
		by_system(d, VERDICT_BLOCK, BY_ANOMALY);
		snprintf(d->why, sizeof(d->why), "identity anomaly%s%s",
		    in->anomaly_why != NULL ? ": " : "",
		    in->anomaly_why != NULL ? in->anomaly_why : "");
	} else if (adm && blocks(ad->target) && f->override != NULL) {	/* 2 */
		snprintf(pfx, sizeof(pfx), "admin rule %" PRId64 " (%s) "
		    "overridden", ad->rule_id, rule_target_name(ad->target));
		by_approval(d, VERDICT_ALLOW, BY_APPROVAL, f->override, pfx);
	} else if (adm && blocks(ad->target)) {		/* 2 */
		by_rule(d, ad->target == RULE_REJECT ? VERDICT_REJECT :
		    VERDICT_BLOCK, BY_ADMIN_RULE, ad);
	} else if (f->denial != NULL) {			/* 3 */
		by_approval(d, VERDICT_BLOCK, BY_DENIAL, f->denial, "denied");
	} else if (opr && blocks(op->target)) {		/* 4 */
		by_rule(d, VERDICT_BLOCK, BY_OPERATOR_RULE, op);
	} else if (in->revoked) {			/* 5 */
		by_system(d, VERDICT_PENDING, BY_REVOCATION);
		usbgw_strlcpy(d->why, "revoked for this presence",
		    sizeof(d->why));
	} else if (adm && ad->target == RULE_ALLOW) {	/* 6 */
		by_rule(d, VERDICT_ALLOW, BY_ADMIN_RULE, ad);
	} else if (f->allow != NULL) {			/* 7 */
		by_approval(d, VERDICT_ALLOW, BY_APPROVAL, f->allow,
		    "approved");
	} else if (opr && op->target == RULE_ALLOW) {	/* 8 */
		by_rule(d, VERDICT_ALLOW, BY_OPERATOR_RULE, op);
	} else if (adm && ad->target == RULE_ASK) {	/* 9 */
		by_rule(d, VERDICT_PENDING, BY_ADMIN_RULE, ad);
	} else {					/* 10 */
		by_system(d, VERDICT_PENDING, BY_DEFAULT);
		usbgw_strlcpy(d->why, "no rule matched", sizeof(d->why));
	}
}

/* The rule of a tier's decision if it carries an interface-policy. */
static const struct rule *
ipol_rule(const struct policy_decision *pd)
{
	if (pd->rule_id == 0 || pd->rule == NULL ||
	    (pd->target != RULE_ALLOW && pd->target != RULE_ASK))
		return NULL;
	return rule_has_iface_policy(pd->rule) ? pd->rule : NULL;
}

/*
 * An allowed (or pending) decision under interface-policies
 * (decision.h): a verdict for every interface descriptor, the policies'
 * intersection.
 */
static void
apply_ifaces(const struct decision_in *in, const struct facts *f,
    struct decision *d)
{
	const struct rule	*pol[2];
	const struct iface_verdict *x;
	size_t			 i, j, n = 0, denied = 0;
	char			 note[64];

	/* pending: what an approval would give (operators see it first) */
	if (d->verdict != VERDICT_ALLOW && d->verdict != VERDICT_PENDING)
		return;
	if ((pol[n] = ipol_rule(&f->admin)) != NULL)
		n++;
	if ((pol[n] = ipol_rule(&f->oper)) != NULL)
		n++;
	if (n == 0)
		return;
	d->per_iface = true;
	for (i = 0; i < in->nifaces && i < DECISION_IFACE_MAX; i++) {
		x = &in->ifaces[i];
		d->iface[i] = *x;
		d->iface[i].allow = true;
		for (j = 0; j < n; j++)
			if (!rule_iface_allowed(pol[j], x->config, x->number,
			    x->cls, x->subcls, x->proto))
				d->iface[i].allow = false;
		if (!d->iface[i].allow)
			denied++;
	}
	d->niface = i;
	if (d->verdict != VERDICT_ALLOW)
		return;
	if (denied == d->niface)
		snprintf(note, sizeof(note), "; interface-policy: every "
		    "interface denied, nothing usable");
	else
		snprintf(note, sizeof(note), "; interface-policy: %zu of %zu "
		    "interface descriptors denied", denied, d->niface);
	usbgw_strlcat(d->why, note, sizeof(d->why));
}

void
decide(const struct decision_in *in, struct decision *d)
{
	struct facts	f;

	memset(d, 0, sizeof(*d));
	gather(in, &f);
	apply_rows(in, &f, d);
	apply_ifaces(in, &f, d);
	d->recheck_at = f.recheck_at;
}

const char *
verdict_name(enum verdict v)
{
	switch (v) {
	case VERDICT_PENDING:
		return "pending";
	case VERDICT_ALLOW:
		return "allow";
	case VERDICT_BLOCK:
		return "block";
	case VERDICT_REJECT:
		return "reject";
	}
	return "unknown";
}

const char *
decided_by_name(enum decided_by by)
{
	switch (by) {
	case BY_DEFAULT:
		return "default";
	case BY_ANOMALY:
		return "anomaly";
	case BY_ADMIN_RULE:
		return "admin-rule";
	case BY_OPERATOR_RULE:
		return "operator-rule";
	case BY_DENIAL:
		return "denial";
	case BY_REVOCATION:
		return "revocation";
	case BY_APPROVAL:
		return "approval";
	}
	return "unknown";
}

bool
decision_iface_allowed(const struct decision *d, uint8_t config,
    uint8_t number, uint8_t alt)
{
	size_t	i;

	if (d->verdict != VERDICT_ALLOW)
		return false;
	if (!d->per_iface && d->niface == 0)
		return true;
	for (i = 0; i < d->niface; i++) {
		if (d->iface[i].config == config &&
		    d->iface[i].number == number && d->iface[i].alt == alt)
			return d->iface[i].allow;
	}
	return false;
}
