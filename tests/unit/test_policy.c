/*
 * Rule evaluation and policies: every attribute and set operator, the
 * conditions, the examples of usbguard-rules.conf(5), first-match order
 * with the vid:pid index (checked against a linear scan on random rule
 * sets), next-change propagation, and the USBGuard rules.conf importer.
 */
#include <sys/socket.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "policy/policy.h"
#include "policy/rule.h"
#include "tap.h"
#include "base/util.h"

static struct rule *
P(const char *s)
{
	struct rule_error	 err;
	struct rule		*r;

	if ((r = rule_parse(s, &err)) == NULL) {
		diag("parse %s: %s", s, err.msg);
		abort();
	}
	return r;
}

static void
ident(struct usbgw_identity *id, uint16_t vid, uint16_t pid,
    const char *ifaces)
{
	unsigned a, b, c;
	int	 n;

	memset(id, 0, sizeof(*id));
	usbgw_strlcpy(id->exporter, "tc17", sizeof(id->exporter));
	usbgw_strlcpy(id->exporter_busid, "1-2", sizeof(id->exporter_busid));
	usbgw_strlcpy(id->busid, "tc17-1-2", sizeof(id->busid));
	id->vid = vid;
	id->pid = pid;
	while (ifaces != NULL && sscanf(ifaces, "%x:%x:%x%n", &a, &b, &c,
	    &n) == 3) {
		id->ifaces[id->n_ifaces].cls = (uint8_t)a;
		id->ifaces[id->n_ifaces].subcls = (uint8_t)b;
		id->ifaces[id->n_ifaces].proto = (uint8_t)c;
		id->n_ifaces++;
		ifaces += n;
	}
	usbgw_strlcpy(id->manufacturer, "ACME", sizeof(id->manufacturer));
	usbgw_strlcpy(id->product, "Widget", sizeof(id->product));
	usbgw_strlcpy(id->serial, "S123", sizeof(id->serial));
	memset(id->hash, '0', USBGW_HASH_HEX);
	id->hash[USBGW_HASH_HEX] = '\0';
}

/* Does rule text match id (attributes, then condition at `now`)? */
static int
M(const char *text, const struct usbgw_identity *id,
    const struct usbgw_context *ctx)
{
	struct rule	*r = P(text);
	int		 v = rule_match(r, id, ctx, time(NULL));

	rule_free(r);
	return v;
}

#define YES(t, id, ctx, what)	ok(M(t, id, ctx) == 1, "%s: %s", what, t)
#define NO(t, id, ctx, what)	ok(M(t, id, ctx) == 0, "%s: not %s", what, t)

static void
test_scalar_attrs(void)
{
	struct usbgw_identity	id;

	ident(&id, 0x046d, 0xc52b, "03:01:01");
	YES("allow", &id, NULL, "empty rule");
	YES("allow id 046d:c52b", &id, NULL, "id");
	YES("allow id 046D:C52B", &id, NULL, "id, upper case");
	YES("allow id 046d:*", &id, NULL, "id vendor");
	YES("allow id *:*", &id, NULL, "id any");
	NO("allow id 046d:c52c", &id, NULL, "id");
	NO("allow id 046e:*", &id, NULL, "id vendor");
	YES("allow name \"Widget\"", &id, NULL, "name");
	NO("allow name \"widget\"", &id, NULL, "name is case-sensitive");
	NO("allow name \"Widge\"", &id, NULL, "name is exact");
	YES("allow manufacturer \"ACME\"", &id, NULL, "manufacturer");
	NO("allow manufacturer \"Widget\"", &id, NULL, "manufacturer");
	YES("allow serial \"S123\"", &id, NULL, "serial");
	NO("allow serial \"\"", &id, NULL, "serial");
	YES("allow hash \"0000000000000000000000000000000000000000000000000000"
	    "000000000000\"", &id, NULL, "hash");
	NO("allow hash \"0000000000000000000000000000000000000000000000000000"
	    "000000000001\"", &id, NULL, "hash");
	YES("allow via-port \"1-2\"", &id, NULL, "via-port");
	NO("allow via-port \"1-2.1\"", &id, NULL, "via-port");
	YES("allow via-exporter tc17", &id, NULL, "via-exporter");
	YES("allow via-exporter tc*", &id, NULL, "via-exporter glob");
	YES("allow via-exporter *7", &id, NULL, "via-exporter glob");
	YES("allow via-exporter t*1*", &id, NULL, "via-exporter glob");
	NO("allow via-exporter tc1", &id, NULL, "via-exporter");
	NO("allow via-exporter TC17", &id, NULL, "via-exporter is case-sensitive");
	NO("allow via-exporter *8", &id, NULL, "via-exporter glob");
	YES("allow label \"anything\"", &id, NULL, "label is not matched");
	YES("allow id 046d:c52b name \"Widget\" serial \"S123\" via-port \"1-2\" "
	    "via-exporter tc17 with-interface 03:01:01", &id, NULL, "all");
	NO("allow id 046d:c52b name \"Widget\" serial \"S124\"", &id, NULL,
	    "one attribute differs");

	id.serial[0] = '\0';
	YES("allow serial \"\"", &id, NULL, "empty serial matches no serial");

	/* Single-valued attributes with the set operators. */
	ident(&id, 0x046d, 0xc52b, "03:01:01");
	YES("allow id one-of { 1234:5678 046d:* }", &id, NULL, "id one-of");
	NO("allow id one-of { 1234:5678 046e:* }", &id, NULL, "id one-of");
	YES("allow id none-of { 1234:5678 046e:* }", &id, NULL, "id none-of");
	NO("allow id none-of { 1234:5678 046d:c52b }", &id, NULL, "id none-of");
	YES("allow id all-of { 046d:* 046d:c52b }", &id, NULL, "id all-of");
	NO("allow id all-of { 046d:* 046d:c52c }", &id, NULL, "id all-of");
	YES("allow id match-all { 1234:5678 046d:* }", &id, NULL, "id match-all");
	NO("allow id match-all { 1234:5678 }", &id, NULL, "id match-all");
	YES("allow id equals { 046d:c52b }", &id, NULL, "id equals");
	YES("allow id equals-ordered { 046d:* }", &id, NULL, "id equals-ordered");
	YES("allow serial one-of { \"x\" \"S123\" }", &id, NULL, "serial one-of");
	YES("allow name none-of { \"x\" \"y\" }", &id, NULL, "name none-of");
	YES("allow via-port one-of { \"1-1\" \"1-2\" }", &id, NULL,
	    "via-port one-of");
	YES("allow via-exporter one-of { tc1 tc17 }", &id, NULL,
	    "via-exporter one-of");
	NO("allow via-exporter none-of { tc* }", &id, NULL,
	    "via-exporter none-of");
}

static void
test_interfaces(void)
{
	struct usbgw_identity	stick, combo, kbd, bare, dup;

	ident(&stick, 0x0781, 0x5567, "08:06:50");
	ident(&combo, 0x0781, 0x5567, "08:06:50 03:01:01");
	ident(&kbd, 0x046d, 0xc31c, "03:01:01 03:00:00");
	ident(&bare, 0x1234, 0x0001, NULL);
	ident(&dup, 0x1234, 0x0002, "03:01:01 03:01:01");

	/* single value = equals { value } */
	YES("allow with-interface 08:06:50", &stick, NULL, "single exact");
	YES("allow with-interface 08:*:*", &stick, NULL, "single class");
	YES("allow with-interface 08:06:*", &stick, NULL, "single subclass");
	NO("allow with-interface 08:05:*", &stick, NULL, "single subclass");
	NO("allow with-interface 08:*:*", &combo, NULL,
	    "single value needs exactly one interface");

	/* all-of */
	YES("allow with-interface all-of { 08:*:* 03:01:* }", &combo, NULL,
	    "all-of");
	YES("allow with-interface all-of { 08:*:* }", &combo, NULL,
	    "all-of subset");
	NO("allow with-interface all-of { 08:*:* 03:01:* }", &stick, NULL,
	    "all-of missing one");
	NO("allow with-interface all-of { 08:*:* }", &bare, NULL,
	    "all-of on no interfaces");

	/* one-of */
	YES("allow with-interface one-of { e0:*:* 03:*:* }", &kbd, NULL, "one-of");
	NO("allow with-interface one-of { e0:*:* 08:*:* }", &kbd, NULL, "one-of");
	NO("allow with-interface one-of { 03:*:* }", &bare, NULL,
	    "one-of on no interfaces");

	/* none-of */
	YES("allow with-interface none-of { 03:*:* 02:*:* }", &stick, NULL,
	    "none-of");
	NO("allow with-interface none-of { 03:*:* 02:*:* }", &combo, NULL,
	    "none-of");
	YES("allow with-interface none-of { 03:*:* }", &bare, NULL,
	    "none-of on no interfaces");

	/* equals: same size and a one-to-one pairing */
	YES("allow with-interface equals { 03:01:01 08:*:* }", &combo, NULL,
	    "equals in any order");
	YES("allow with-interface { 08:*:* 03:*:* }", &combo, NULL,
	    "equals is the default operator");
	NO("allow with-interface { 08:*:* 08:*:* }", &combo, NULL,
	    "equals needs a pairing (USBGuard would match this)");
	NO("allow with-interface { 08:*:* 03:*:* e0:*:* }", &combo, NULL,
	    "equals: sizes differ");
	YES("allow with-interface { 03:01:01 03:*:* }", &dup, NULL,
	    "equals with duplicate interfaces");
	NO("allow with-interface { 03:01:01 03:01:02 }", &dup, NULL,
	    "equals with duplicate interfaces");
	YES("allow with-interface { 03:*:* 03:01:01 }", &kbd, NULL,
	    "equals: the pairing needs backtracking");

	/* equals-ordered */
	YES("allow with-interface equals-ordered { 08:*:* 03:01:01 }", &combo,
	    NULL, "equals-ordered");
	NO("allow with-interface equals-ordered { 03:01:01 08:*:* }", &combo,
	    NULL, "equals-ordered: order matters");

	/* match-all: every interface of the device is one of these */
	YES("allow with-interface match-all { 03:*:* 08:*:* e0:*:* }", &combo,
	    NULL, "match-all");
	YES("allow with-interface match-all { 03:*:* }", &kbd, NULL, "match-all");
	NO("allow with-interface match-all { 08:*:* }", &combo, NULL,
	    "match-all: one interface outside");
	YES("allow with-interface match-all { 08:*:* }", &bare, NULL,
	    "match-all on no interfaces (empty set is a subset)");
}

static void
test_to_host(void)
{
	struct usbgw_identity	id;
	struct usbgw_context	c;

	ident(&id, 0x046d, 0xc52b, "03:01:01");
	memset(&c, 0, sizeof(c));
	NO("allow to-host vdi01", &id, NULL, "no context");
	NO("allow to-host vdi01", &id, &c, "no host");
	NO("allow to-host none-of { vdi01 }", &id, &c,
	    "no host: to-host never matches");
	YES("allow id 046d:c52b", &id, &c, "rule without to-host, no host");

	c.host_name = "vdi01.example.org";
	usbgw_addr_parse("10.1.2.3", &c.host_addr);
	YES("allow to-host vdi01.example.org", &id, &c, "name");
	YES("allow to-host VDI01.Example.ORG", &id, &c, "names ignore case");
	YES("allow to-host vdi*", &id, &c, "name glob");
	YES("allow to-host *.example.org", &id, &c, "name glob");
	NO("allow to-host vdi01", &id, &c, "name is not a prefix");
	YES("allow to-host 10.1.2.3", &id, &c, "address");
	NO("allow to-host 10.1.2.4", &id, &c, "address");
	YES("allow to-host 10.1.0.0/16", &id, &c, "IPv4 network");
	YES("allow to-host 10.1.2.0/23", &id, &c, "IPv4 /23");
	NO("allow to-host 10.2.0.0/16", &id, &c, "IPv4 network");
	YES("allow to-host 0.0.0.0/0", &id, &c, "IPv4 /0");
	NO("allow to-host ::/0", &id, &c, "IPv6 rule, IPv4 host");
	YES("allow to-host one-of { vdi02 10.1.2.3 }", &id, &c, "one-of");
	YES("allow to-host none-of { vdi02 192.168.0.0/16 }", &id, &c, "none-of");
	NO("allow to-host none-of { vdi02 10.0.0.0/8 }", &id, &c, "none-of");

	c.host_name = NULL;
	usbgw_addr_parse("fd00:1::5", &c.host_addr);
	YES("allow to-host fd00::/8", &id, &c, "IPv6 network");
	YES("allow to-host fd00:1::5", &id, &c, "IPv6 address");
	NO("allow to-host fd00:2::/32", &id, &c, "IPv6 network");
	NO("allow to-host vdi*", &id, &c, "address only: names never match");
	NO("allow to-host 10.0.0.0/8", &id, &c, "IPv4 rule, IPv6 host");

	usbgw_addr_parse("::ffff:10.1.2.3", &c.host_addr);
	YES("allow to-host 10.1.0.0/16", &id, &c,
	    "IPv4-mapped IPv6 host matches IPv4 rules");
	YES("allow to-host ::ffff:0:0/96", &id, &c, "and IPv6 rules");
}

/* allowed-matches: the test's list of allowed devices. */
struct allowed {
	const struct usbgw_identity	*dev;
	size_t				 n;
	unsigned			 calls;
};

static int
allowed_cb(void *arg, const struct rule *query)
{
	struct allowed	*a = arg;
	size_t		 i;

	a->calls++;
	for (i = 0; i < a->n; i++)
		if (rule_match_attrs(query, &a->dev[i], NULL))
			return 1;
	return 0;
}

static void
test_conditions(void)
{
	struct usbgw_identity	id, others[2];
	struct usbgw_context	c;
	struct allowed		a;
	time_t			now = time(NULL);

	ident(&id, 0x046d, 0xc52b, "03:01:01");
	YES("allow if true", &id, NULL, "true");
	NO("allow if false", &id, NULL, "false");
	YES("allow if !false", &id, NULL, "negation");
	YES("allow if { true !false }", &id, NULL, "set, all");
	NO("allow if { true false }", &id, NULL, "set, all");
	YES("allow if all-of { true true }", &id, NULL, "all-of");
	YES("allow if one-of { false true }", &id, NULL, "one-of");
	NO("allow if one-of { false false }", &id, NULL, "one-of");
	YES("allow if none-of { false false }", &id, NULL, "none-of");
	NO("allow if none-of { false true }", &id, NULL, "none-of");
	YES("allow if equals { true true }", &id, NULL, "equals = all-of");
	NO("allow if equals-ordered { true false }", &id, NULL,
	    "equals-ordered = all-of");
	NO("allow id 1234:5678 if true", &id, NULL,
	    "condition needs the attributes too");

	/* allowed-matches without a callback is false. */
	NO("allow if allowed-matches()", &id, NULL, "allowed-matches, no ctx");
	YES("allow if !allowed-matches()", &id, NULL, "!allowed-matches, no ctx");

	memset(&c, 0, sizeof(c));
	memset(&a, 0, sizeof(a));
	c.allowed_matches = allowed_cb;
	c.arg = &a;
	ident(&others[0], 0x0781, 0x5567, "08:06:50");
	ident(&others[1], 0x413c, 0x2113, "03:01:01 03:00:00");
	a.dev = others;
	a.n = 1;
	YES("allow if allowed-matches(id 0781:*)", &id, &c, "allowed-matches");
	NO("allow if allowed-matches(with-interface one-of { 03:*:* })", &id,
	    &c, "allowed-matches: no allowed keyboard");
	a.n = 2;
	YES("allow if allowed-matches(with-interface one-of { 03:*:* })", &id,
	    &c, "allowed-matches: a keyboard is allowed");
	a.calls = 0;
	{
		struct rule *r = P("allow id 1234:5678 if allowed-matches()");

		ok(!rule_match(r, &id, &c, now) && a.calls == 0,
		    "conditions are not evaluated when attributes fail");
		rule_free(r);
	}
}

/* The examples of usbguard-rules.conf(5), with our hash format. */
static void
test_usbguard_examples(void)
{
	struct policy		*p;
	struct policy_decision	 d;
	struct usbgw_identity	 id, others[1];
	struct usbgw_context	 c;
	struct allowed		 a;
	struct rule_error	 err;
	int64_t			 now = (int64_t)time(NULL);

	/* 1. Allow mass storage only; everything else is implicit. */
	p = policy_new();
	policy_append(p, 1, P("allow with-interface equals { 08:*:* }"));
	ident(&id, 0x0781, 0x5567, "08:06:50");
	policy_evaluate(p, &id, NULL, now, &d);
	ok(d.target == RULE_ALLOW && d.rule_id == 1, "ex1: flash disk allowed");
	ident(&id, 0x0781, 0x5567, "08:06:50 03:01:01");
	policy_evaluate(p, &id, NULL, now, &d);
	ok(d.target == RULE_ASK && d.rule_id == 0,
	    "ex1: flash disk with a keyboard: implicit (pending)");
	policy_free(p);

	/* 2. A Yubikey on one port; reject everything else on that port. */
	p = policy_new();
	policy_append(p, 1, P("allow 1050:0011 name \"Yubico Yubikey II\" "
	    "serial \"0001234567\" via-port \"1-2\" hash \"044b5e168d40ee024547"
	    "8416caf3d998044b5e168d40ee0245478416caf3d998\""));
	policy_append(p, 2, P("reject via-port \"1-2\""));
	ident(&id, 0x1050, 0x0011, "03:01:01");
	usbgw_strlcpy(id.product, "Yubico Yubikey II", sizeof(id.product));
	usbgw_strlcpy(id.serial, "0001234567", sizeof(id.serial));
	usbgw_strlcpy(id.hash, "044b5e168d40ee0245478416caf3d998044b5e168d40ee"
	    "0245478416caf3d998", sizeof(id.hash));
	policy_evaluate(p, &id, NULL, now, &d);
	ok(d.target == RULE_ALLOW && d.rule_id == 1, "ex2: the Yubikey");
	usbgw_strlcpy(id.serial, "0001234568", sizeof(id.serial));
	policy_evaluate(p, &id, NULL, now, &d);
	ok(d.target == RULE_REJECT && d.rule_id == 2, "ex2: another one on 1-2");
	usbgw_strlcpy(id.exporter_busid, "1-3", sizeof(id.exporter_busid));
	policy_evaluate(p, &id, NULL, now, &d);
	ok(d.target == RULE_ASK && d.rule_id == 0, "ex2: elsewhere: implicit");
	policy_free(p);

	/* 3. Flash disks, but not with suspicious interfaces. */
	p = policy_new();
	policy_append(p, 1, P("allow with-interface equals { 08:*:* }"));
	policy_append(p, 2, P("reject with-interface all-of { 08:*:* 03:00:* }"));
	policy_append(p, 3, P("reject with-interface all-of { 08:*:* 03:01:* }"));
	policy_append(p, 4, P("reject with-interface all-of { 08:*:* e0:*:* }"));
	policy_append(p, 5, P("reject with-interface all-of { 08:*:* 02:*:* }"));
	{
		static const struct {
			const char	*ifaces;
			int		 target;
			int		 rule;
		} cases[] = {
			{ "08:06:50", RULE_ALLOW, 1 },
			{ "08:06:50 03:00:00", RULE_REJECT, 2 },
			{ "08:06:50 03:01:01", RULE_REJECT, 3 },
			{ "08:06:50 e0:01:01", RULE_REJECT, 4 },
			{ "02:02:01 08:06:50", RULE_REJECT, 5 },
			{ "08:06:50 0a:00:00", RULE_ASK, 0 },
			{ "03:01:01", RULE_ASK, 0 },
		};
		size_t i;

		for (i = 0; i < nitems(cases); i++) {
			ident(&id, 0x1234, 0x0001, cases[i].ifaces);
			policy_evaluate(p, &id, NULL, now, &d);
			ok((int)d.target == cases[i].target &&
			    d.rule_id == cases[i].rule, "ex3: %s -> %s (rule %d)",
			    cases[i].ifaces, rule_target_name(cases[i].target),
			    cases[i].rule);
		}
	}
	policy_free(p);

	/* 4. One keyboard only (allowed-matches through the context). */
	p = policy_new();
	policy_append(p, 1, P("allow with-interface one-of { 03:00:01 03:01:01 }"
	    " if !allowed-matches(with-interface one-of { 03:00:01 03:01:01 })"));
	memset(&c, 0, sizeof(c));
	memset(&a, 0, sizeof(a));
	c.allowed_matches = allowed_cb;
	c.arg = &a;
	a.dev = others;
	a.n = 0;
	ident(&id, 0x046d, 0xc31c, "03:01:01");
	policy_evaluate(p, &id, &c, now, &d);
	ok(d.target == RULE_ALLOW, "ex4: the first keyboard is allowed");
	ident(&others[0], 0x413c, 0x2113, "03:01:01");
	a.n = 1;
	policy_evaluate(p, &id, &c, now, &d);
	ok(d.target == RULE_ASK, "ex4: a second keyboard is not");
	policy_free(p);

	/* 5. random is USBGuard's only: refused with a clear error. */
	ok(rule_parse("allow if random(0.1666)", &err) == NULL &&
	    strcmp(err.msg, "column 10: condition 'random' is not supported by "
	    "usbgw") == 0, "ex5: random() is not supported");
}

static void
test_policy_order(void)
{
	struct policy		*p;
	struct policy_decision	 d;
	struct usbgw_identity	 id;
	const struct rule	*r;
	int64_t			 rid, now = (int64_t)time(NULL);

	p = policy_new();
	ident(&id, 0x046d, 0xc52b, "03:01:01");
	policy_evaluate(p, &id, NULL, now, &d);
	ok(d.target == RULE_ASK && d.rule_id == 0 && d.next_change == RULE_NEVER,
	    "empty policy: ask, no rule, never changes");
	policy_set_default(p, RULE_BLOCK);
	policy_evaluate(p, &id, NULL, now, &d);
	ok(d.target == RULE_BLOCK, "configured default");
	policy_set_default(p, RULE_ASK);

	ok(policy_append(p, 10, P("block with-interface 03:*:*")) == 0, "append");
	ok(policy_append(p, 20, P("allow id 046d:c52b")) == 0, "append");
	ok(policy_append(p, 30, P("ask")) == 0, "append");
	{
		struct rule *dupr = P("allow");

		ok(policy_append(p, 20, dupr) == -1, "duplicate id refused");
		rule_free(dupr);
		dupr = P("allow");
		ok(policy_append(p, 0, dupr) == -1, "id 0 refused");
		rule_free(dupr);
	}
	is_int(policy_count(p), 3, "three rules");
	policy_evaluate(p, &id, NULL, now, &d);
	ok(d.target == RULE_BLOCK && d.rule_id == 10, "first match wins (block)");
	ok(policy_move(p, 20, 0) == 0, "move rule 20 to the top");
	policy_evaluate(p, &id, NULL, now, &d);
	ok(d.target == RULE_ALLOW && d.rule_id == 20, "now the allow wins");
	r = policy_rule_at(p, 0, &rid);
	ok(r != NULL && rid == 20, "rule 20 is first");
	ok(policy_remove(p, 20) == 0, "remove rule 20");
	ok(policy_remove(p, 20) == -1, "remove again fails");
	policy_evaluate(p, &id, NULL, now, &d);
	ok(d.rule_id == 10, "block again");
	ok(policy_insert(p, 1, 40, P("reject id 046d:*")) == 0, "insert at 1");
	ok(policy_move(p, 10, 99) == 0, "move rule 10 to the end");
	policy_evaluate(p, &id, NULL, now, &d);
	ok(d.target == RULE_REJECT && d.rule_id == 40, "reject by vendor");
	is_int(policy_find(p, 10), 2, "rule 10 is last");
	ident(&id, 0x1234, 0x0001, "08:06:50");
	policy_evaluate(p, &id, NULL, now, &d);
	ok(d.target == RULE_ASK && d.rule_id == 30, "explicit ask rule");
	ok(policy_move(p, 99, 0) == -1, "move unknown fails");
	policy_clear(p);
	is_int(policy_count(p), 0, "cleared");
	policy_free(p);
	policy_free(NULL);
}

static int64_t
utc(int y, int mo, int d, int h, int mi, int s)
{
	struct tm tm;

	memset(&tm, 0, sizeof(tm));
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = s;
	return (int64_t)timegm(&tm);
}

static void
test_next_change(void)
{
	struct policy		*p;
	struct policy_decision	 d;
	struct usbgw_identity	 id;
	int64_t			 t7 = utc(2024, 1, 15, 7, 0, 0);

	setenv("TZ", "UTC0", 1);
	tzset();
	p = policy_new();
	policy_append(p, 1, P("block id 046d:c52b if localtime(12:00-13:00)"));
	policy_append(p, 2, P("allow id 046d:* if localtime(08:00-18:00)"));
	policy_append(p, 3, P("allow id 1234:* if localtime(06:00-20:00)"));
	ident(&id, 0x046d, 0xc52b, "03:01:01");

	policy_evaluate(p, &id, NULL, t7, &d);
	ok(d.target == RULE_ASK && d.next_change == utc(2024, 1, 15, 8, 0, 0),
	    "07:00: pending, re-evaluate at 08:00 (rule 3 is not a candidate)");
	policy_evaluate(p, &id, NULL, utc(2024, 1, 15, 8, 0, 0), &d);
	ok(d.target == RULE_ALLOW && d.rule_id == 2 &&
	    d.next_change == utc(2024, 1, 15, 12, 0, 0),
	    "08:00: allowed by 2, re-evaluate at 12:00 (rule 1 opens)");
	policy_evaluate(p, &id, NULL, utc(2024, 1, 15, 12, 30, 0), &d);
	ok(d.target == RULE_BLOCK && d.rule_id == 1 &&
	    d.next_change == utc(2024, 1, 15, 13, 0, 1),
	    "12:30: blocked by 1 until 13:00:01");
	policy_evaluate(p, &id, NULL, utc(2024, 1, 15, 14, 0, 0), &d);
	ok(d.target == RULE_ALLOW && d.next_change == utc(2024, 1, 15, 18, 0, 1),
	    "14:00: allowed until 18:00:01");
	policy_evaluate(p, &id, NULL, utc(2024, 1, 15, 19, 0, 0), &d);
	ok(d.target == RULE_ASK && d.next_change == utc(2024, 1, 16, 8, 0, 0),
	    "19:00: pending until tomorrow 08:00");
	policy_free(p);

	p = policy_new();
	policy_append(p, 1, P("allow id 046d:c52b"));
	policy_append(p, 2, P("block if localtime(12:00-13:00)"));
	policy_evaluate(p, &id, NULL, t7, &d);
	ok(d.rule_id == 1 && d.next_change == RULE_NEVER,
	    "rules after the deciding one do not count");
	policy_free(p);
}

/* The index must give the answer of a linear scan, on random policies. */
static uint32_t rng = 12345;

static uint32_t
rnd(uint32_t n)
{
	rng = rng * 1103515245u + 12345u;
	return (rng >> 8) % n;
}

static char *
random_rule(void)
{
	static const char *const targets[] = { "allow", "block", "reject", "ask" };
	static const char *const ops[] = { "one-of", "all-of", "none-of",
	    "match-all", "equals" };
	char	buf[512];
	int	n = 0, vid = (int)rnd(4), pid = (int)rnd(4);

	n += snprintf(buf + n, sizeof(buf) - (size_t)n, "%s", targets[rnd(4)]);
	switch (rnd(8)) {
	case 0:
		break;
	case 1:
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, " id %04x:*", vid);
		break;
	case 2:
		n += snprintf(buf + n, sizeof(buf) - (size_t)n,
		    " id one-of { %04x:%04x %04x:* }", vid, pid, (vid + 1) % 4);
		break;
	case 3:
		n += snprintf(buf + n, sizeof(buf) - (size_t)n,
		    " id %s { %04x:%04x }", ops[rnd(5)], vid, pid);
		break;
	case 4:
		n += snprintf(buf + n, sizeof(buf) - (size_t)n,
		    " id all-of { %04x:* %04x:%04x }", vid, vid, pid);
		break;
	default:
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, " id %04x:%04x",
		    vid, pid);
		break;
	}
	if (rnd(3) == 0)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n,
		    " with-interface %s { %02x:*:* }", ops[rnd(5)], rnd(3) + 1);
	if (rnd(4) == 0)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n,
		    " serial \"S%u\"", rnd(3));
	if (rnd(5) == 0)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n,
		    " if localtime(%02u:00-%02u:00)", rnd(24), rnd(24));
	return xstrdup(buf);
}

static void
test_index_equivalence(void)
{
	struct policy		*p;
	struct policy_decision	 d;
	struct usbgw_identity	 id;
	struct rule		**rules;
	size_t			 nrules = 300, i, round, mismatches = 0, checks = 0;
	int64_t			 now = utc(2024, 1, 15, 9, 30, 0), nc;
	char			*s;
	char			 ifs[32];

	setenv("TZ", "UTC0", 1);
	tzset();
	rules = xcalloc(nrules, sizeof(*rules));
	for (round = 0; round < 20; round++) {
		p = policy_new();
		for (i = 0; i < nrules; i++) {
			s = random_rule();
			rules[i] = P(s);
			free(s);
			/* A second copy for the linear scan. */
			s = rule_format(rules[i]);
			policy_append(p, (int64_t)i + 1, P(s));
			free(s);
		}
		for (i = 0; i < 200; i++) {
			size_t	j;
			int	lin_target = RULE_ASK;
			int64_t	lin_id = 0, lin_nc = RULE_NEVER;

			snprintf(ifs, sizeof(ifs), "%02x:01:01 %02x:02:02",
			    rnd(3) + 1, rnd(3) + 1);
			ident(&id, (uint16_t)rnd(5), (uint16_t)rnd(5), ifs);
			snprintf(id.serial, sizeof(id.serial), "S%u", rnd(3));
			policy_evaluate(p, &id, NULL, now, &d);
			for (j = 0; j < nrules; j++) {
				if (!rule_match_attrs(rules[j], &id, NULL))
					continue;
				nc = rule_next_change(rules[j], now);
				if (nc < lin_nc)
					lin_nc = nc;
				if (!rule_match_cond(rules[j], NULL, now))
					continue;
				lin_target = rule_target(rules[j]);
				lin_id = (int64_t)j + 1;
				break;
			}
			checks++;
			if ((int)d.target != lin_target || d.rule_id != lin_id ||
			    d.next_change != lin_nc)
				mismatches++;
		}
		/* Shuffle by moves and check again next round. */
		for (i = 0; i < nrules; i++)
			rule_free(rules[i]);
		policy_free(p);
	}
	free(rules);
	is_int(mismatches, 0, "indexed evaluation equals a linear scan "
	    "(%zu decisions over 20 random policies)", checks);
}

static void
test_index_after_moves(void)
{
	struct policy		*p;
	struct policy_decision	 d;
	struct usbgw_identity	 id;
	int64_t			 now = (int64_t)time(NULL);

	p = policy_new();
	policy_append(p, 1, P("allow id 046d:c52b"));
	policy_append(p, 2, P("block id 046d:*"));
	policy_append(p, 3, P("reject"));
	policy_append(p, 4, P("ask id one-of { 046d:c52b 046d:* }"));
	ident(&id, 0x046d, 0xc52b, NULL);
	policy_evaluate(p, &id, NULL, now, &d);
	is_int(d.rule_id, 1, "exact first");
	policy_move(p, 2, 0);
	policy_evaluate(p, &id, NULL, now, &d);
	is_int(d.rule_id, 2, "vendor rule moved first");
	policy_move(p, 3, 0);
	policy_evaluate(p, &id, NULL, now, &d);
	is_int(d.rule_id, 3, "generic rule moved first");
	policy_move(p, 4, 0);
	policy_evaluate(p, &id, NULL, now, &d);
	ok(d.rule_id == 4 && d.target == RULE_ASK,
	    "rule in two index lists moved first");
	policy_remove(p, 4);
	policy_remove(p, 3);
	policy_remove(p, 2);
	ident(&id, 0x046d, 0x0001, NULL);
	policy_evaluate(p, &id, NULL, now, &d);
	ok(d.rule_id == 0 && d.target == RULE_ASK, "only the exact rule left: "
	    "another product is pending");
	policy_free(p);
}

static void
test_import(void)
{
	static const char conf[] =
	    "# generated by usbguard generate-policy\n"
	    "\n"
	    "allow id 1d6b:0002 serial \"0000:00:06.7\" name \"EHCI Host Controller\" "
	    "hash \"JDOb0BiktYs2ct3mSQKopnOOV2h9MGYADwhT+oUtF2s=\" parent-hash "
	    "\"4PHGcaDKWtPjKDwYpIRG722cB9SlGz9l9Iea93+Gt9c=\" with-interface 09:00:00 "
	    "with-connect-type \"\"\n"
	    "allow with-interface equals { 08:*:* }\n"
	    "   reject with-interface all-of { 08:*:* 03:00:* }  # suspicious\n"
	    "allow 1050:0011 via-port \"1-2\"\n"
	    "allow if random(0.1666)\n"
	    "match id 1234:5678\n"
	    "allow with-connect-type \"hotplug\"\n"
	    "block id 1234:5678 if rule-applied\n"
	    "allow id 12345:1\n"
	    "allow with-interface one-of { 03:00:01 03:01:01 } if "
	    "!allowed-matches(with-interface one-of { 03:00:01 03:01:01 })\n"
	    "block id 046d:c52b if localtime(18:00-08:00)\r\n";
	struct import_result	 res;
	FILE			*fp;
	char			*s;
	size_t			 i;

	fp = fmemopen((void *)(uintptr_t)conf, sizeof(conf) - 1, "r");
	ok(policy_import_usbguard(fp, 0, &res) == 0, "import");
	fclose(fp);
	is_int(res.lines, 13, "13 lines read");
	is_int(res.nrules, 4, "4 rules map");
	is_int(res.nproblems, 7, "7 lines reported");
	{
		static const unsigned lines[] = { 4, 5, 12, 13 };
		static const char *const texts[] = {
			"allow with-interface 08:*:*",
			"reject with-interface all-of { 08:*:* 03:00:* }",
			"allow with-interface one-of { 03:00:01 03:01:01 } if "
			    "!allowed-matches(with-interface one-of { 03:00:01 "
			    "03:01:01 })",
			"block id 046d:c52b if localtime(18:00-08:00)",
		};

		for (i = 0; i < res.nrules && i < nitems(lines); i++) {
			s = rule_format(res.rules[i].rule);
			ok(res.rules[i].line == lines[i] &&
			    strcmp(s, texts[i]) == 0, "line %u: %s", lines[i], s);
			free(s);
		}
	}
	{
		static const struct {
			unsigned	 line;
			const char	*reason;
		} probs[] = {
			{ 3, "USBGuard-only attributes do not map: hash (column "
			    "70), parent-hash (column 122), with-connect-type "
			    "(column 205)" },
			{ 6, "via-port names that port on every exporter here: "
			    "--exporter NAME binds it to one" },
			{ 7, "column 10: condition 'random' is not supported by "
			    "usbgw" },
			{ 8, "column 1: target 'match' is not supported (allow, "
			    "block, reject or ask)" },
			{ 9, "USBGuard-only attributes do not map: "
			    "with-connect-type (column 7)" },
			{ 10, "column 23: condition 'rule-applied' is not "
			    "supported by usbgw" },
			{ 11, "column 10: expected vid:pid after 'id', got "
			    "'12345:1'" },
		};

		for (i = 0; i < res.nproblems && i < nitems(probs); i++) {
			is_int(res.problems[i].line, probs[i].line,
			    "problem %zu line", i);
			is_str(res.problems[i].reason, probs[i].reason,
			    "problem %zu reason", i);
		}
	}
	import_result_free(&res);

	/* Dropping attributes: an allow rule would get wider: refused. */
	fp = fmemopen((void *)(uintptr_t)conf, sizeof(conf) - 1, "r");
	ok(policy_import_usbguard_ex(fp, IMPORT_DROP_UNMAPPED, "tc17", &res) ==
	    0, "import, dropping USBGuard-only attributes, via-port on tc17");
	fclose(fp);
	is_int(res.nrules, 5, "5 rules map");
	ok(res.nproblems == 6 && res.problems[0].line == 3 &&
	    strcmp(res.problems[0].reason, "dropping hash (column 70), "
	    "parent-hash (column 122), with-connect-type (column 205) would "
	    "make this allow rule wider than USBGuard's (it would allow "
	    "devices that rule does not): --allow-wider imports the wider "
	    "form") == 0, "an allow rule that would get wider is refused: %s",
	    res.nproblems ? res.problems[0].reason : "");
	s = res.nrules > 2 ? rule_format(res.rules[2].rule) : NULL;
	ok(s != NULL && res.rules[2].line == 6 && strcmp(s,
	    "allow id 1050:0011 via-port \"1-2\" via-exporter tc17") == 0,
	    "via-port bound to the exporter named: %s", s ? s : "");
	free(s);
	import_result_free(&res);

	/* The wider form, asked for explicitly. */
	fp = fmemopen((void *)(uintptr_t)conf, sizeof(conf) - 1, "r");
	ok(policy_import_usbguard_ex(fp, IMPORT_DROP_UNMAPPED |
	    IMPORT_ALLOW_WIDER, "tc17", &res) == 0,
	    "import with --drop-unmapped --allow-wider");
	fclose(fp);
	is_int(res.nrules, 6, "6 rules map");
	s = res.nrules ? rule_format(res.rules[0].rule) : NULL;
	ok(res.nrules > 0 && res.rules[0].line == 3 && s != NULL &&
	    strcmp(s, "allow id 1d6b:0002 name \"EHCI Host Controller\" serial "
	    "\"0000:00:06.7\" with-interface 09:00:00") == 0,
	    "line 3 without its hashes: %s", s ? s : "");
	is_str(res.nrules ? res.rules[0].warning : "", "dropped: hash (column "
	    "70), parent-hash (column 122), with-connect-type (column 205)",
	    "with a warning");
	free(s);
	ok(res.nproblems == 5 && res.problems[2].line == 9 &&
	    strcmp(res.problems[2].reason, "dropping the USBGuard-only "
	    "attributes (with-connect-type (column 7)) would allow every "
	    "device") == 0, "an allow left without attributes is refused, "
	    "--allow-wider or not");
	import_result_free(&res);

	/* A block rule that lost an attribute blocks more: no --allow-wider. */
	{
		static const char blk[] = "block id 1234:5678 parent-hash "
		    "\"4PHGcaDKWtPjKDwYpIRG722cB9SlGz9l9Iea93+Gt9c=\"\n";

		fp = fmemopen((void *)(uintptr_t)blk, sizeof(blk) - 1, "r");
		ok(policy_import_usbguard_ex(fp, IMPORT_DROP_UNMAPPED, NULL,
		    &res) == 0 && res.nrules == 1 && res.nproblems == 0,
		    "a block rule that lost parent-hash: imported (it blocks "
		    "more)");
		fclose(fp);
		import_result_free(&res);
	}

	/* USBGuard has no interface-policy (its proposal is not implemented). */
	{
		static const char ipol[] = "allow id 1d6b:0104 interface-policy "
		    "allow { block 08:*:* }\n";

		fp = fmemopen((void *)(uintptr_t)ipol, sizeof(ipol) - 1, "r");
		ok(policy_import_usbguard_ex(fp, IMPORT_DROP_UNMAPPED |
		    IMPORT_ALLOW_WIDER, NULL, &res) == 0 && res.nrules == 0 &&
		    res.nproblems == 1, "interface-policy: not imported, even "
		    "with --drop-unmapped --allow-wider");
		is_str(res.nproblems == 1 ? res.problems[0].reason : "",
		    "column 20: 'interface-policy' is not allowed in USBGuard "
		    "rules (USBGuard does not implement it: its proposal, issue "
		    "#67, is open)", "... saying why, with the column");
		fclose(fp);
		import_result_free(&res);
	}
}

int
main(void)
{
	test_scalar_attrs();
	test_interfaces();
	test_to_host();
	test_conditions();
	test_usbguard_examples();
	test_policy_order();
	test_next_change();
	test_index_equivalence();
	test_index_after_moves();
	test_import();
	return done_testing();
}
