/*
 * The daemon's rules, in two tiers (protocol.md part 3, 3.1): the admin
 * rules, and the operator rules that permanent approvals and denials
 * write.  Loaded from the database; decide() ranks them.  Below the
 * device core (gateway/LAYERS): it knows identities, not devices.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/util.h"
#include "core/events.h"
#include "core/loop.h"
#include "core/store.h"
#include "core/tiers.h"
#include "db/db.h"
#include "policy/policy.h"
#include "policy/rule.h"

static struct policy	*admin_pol, *op_pol;

static int64_t
now_s(void)
{
	return (int64_t)time(NULL);
}

static void
bad_rule(void *arg, int64_t id, const char *text, const char *error)
{
	log_warnx("rule %lld no longer parses (%s); it acts as \"ask\"",
	    (long long)id, error);
}

static struct policy *
tier_load(int operator_tier)
{
	struct policy *np;

	if ((np = policy_new()) == NULL)
		return NULL;
	if (db_rules_load(store_db(), np, operator_tier, bad_rule, NULL) == -1) {
		policy_free(np);
		return NULL;
	}
	policy_prepare(np);
	return np;
}

int
tiers_load(void)
{
	struct policy *na, *no;

	if (store_db() == NULL)
		return -1;
	if ((na = tier_load(0)) == NULL)
		return -1;
	if ((no = tier_load(1)) == NULL) {
		policy_free(na);
		return -1;
	}
	policy_free(admin_pol);
	policy_free(op_pol);
	admin_pol = na;
	op_pol = no;
	log_info("policy: %zu admin rules, %zu operator rules",
	    policy_count(admin_pol), policy_count(op_pol));
	return 0;
}

void
tiers_get(struct policy **admin, struct policy **op)
{
	*admin = admin_pol;
	*op = op_pol;
}

/*
 * The rule a permanent approval or denial writes from the device's
 * identity: in the operator tier (after every admin rule), or, for an
 * admin's override, first in the admin tier.  Returns its id or -1.
 */
/* The rule a permanent decision wrote for the device, if an admin's. */
int64_t
tiers_device_rule_admin(int64_t device_id)
{
	int64_t id = 0;
	char tier[16];

	if (store_db() == NULL || device_id == 0 ||
	    db_rule_of_device(store_db(), device_id, &id, tier,
	    sizeof(tier)) != 1)
		return 0;
	return strcmp(tier, "admin") == 0 ? id : 0;
}

/* r with "interface-policy ..." text added (r freed), or NULL. */
static struct rule *
with_ipol(struct rule *r, const char *ipol)
{
	struct rule_error re;
	struct rule *nr;
	char *text, *full;

	text = rule_format(r);
	rule_free(r);
	xasprintf(&full, "%s %s", text, ipol);
	free(text);
	nr = rule_parse(full, &re);
	if (nr == NULL)
		log_warnx("permanent rule with interface-policy: %s", re.msg);
	free(full);
	return nr;
}

int64_t
tiers_device_rule(const struct usbgw_identity *id, int64_t device_id,
    bool deny, bool admin, const char *to_host, const char *ipol,
    const struct actor *who, const char *comment, char *err, size_t errlen)
{
	struct rule *r;
	int64_t rid;

	r = rule_from_identity(id, deny ? RULE_BLOCK : RULE_ALLOW,
	    RULE_FROM_ID_EXPORTER, to_host[0] ? to_host : NULL);
	if (r == NULL) {
		snprintf(err, errlen, "cannot make a rule for host \"%.64s\"",
		    to_host);
		return -1;
	}
	if (ipol != NULL && (r = with_ipol(r, ipol)) == NULL) {
		snprintf(err, errlen, "cannot write the interface-policy into "
		    "the rule");
		return -1;
	}
	rid = db_rule_set_device(store_db(), device_id, admin ? 1 : 0, r,
	    admin ? "admin" : deny ? "denial" : "approval",
	    comment[0] ? comment : NULL, who->name, now_s());
	rule_free(r);
	if (rid <= 0) {
		snprintf(err, errlen, "database: %s", db_errmsg(store_db()));
		return -1;
	}
	tiers_load();
	gw_policy_event(who, deny ? "denial" : "approval");
	return rid;
}

