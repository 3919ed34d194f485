/*
 * decide() pinned by a table: every row of decision.h's precedence, each
 * pair of adjacent rows (which wins), overrides, denials, approvals of
 * every scope and host limit, rules with to-host, time windows and when
 * to decide again, allowed-matches, a changed identity.  Then the host
 * limits themselves: host_match_parse/format/test, good and bad input,
 * and agreement with the rule language's to-host on addresses.
 */
#include <sys/socket.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "policy/decision.h"
#include "policy/policy.h"
#include "policy/rule.h"
#include "tap.h"
#include "base/util.h"

#define NRULES	4
#define NAPPR	4

#define DAY	((int64_t)1699920000)	/* Tue 2023-11-14 00:00:00 UTC */
#define T(h, m)	(DAY + (h) * 3600 + (m) * 60)
#define NOW	T(12, 0)
#define NEVER	RULE_NEVER

#define X8(s)	s s s s s s s s
#define HASH0	X8("00000000")
#define HASH1	X8("11111111")

/* One approval or denial; id 0 gets 201 + its index. */
struct tappr {
	int64_t			 id;
	bool			 deny;
	bool			 override;
	enum approve_scope	 scope;
	int64_t			 expires_at;
	const char		*to;
	const char		*by;		/* NULL ends the list */
};

struct dcase {
	const char	*name;
	const char	*admin[NRULES];		/* ids 1.. */
	const char	*oper[NRULES];		/* ids 101.. */
	struct tappr	 appr[NAPPR];
	bool		 revoked;
	bool		 anomaly;
	const char	*host;		/* address ("": none); see run_case */
	const char	*hname;		/* verified name */
	bool		 changed;	/* the device's identity changed */
	int64_t		 now;		/* 0: NOW */
	int		 allowed;	/* allowed-matches() answers this */

	enum verdict	 v;
	enum decided_by	 by;
	int64_t		 id;		/* rule or approval id */
	int64_t		 recheck;	/* 0: NEVER */
	const char	*why;		/* NULL: not checked */
};

static const struct dcase cases[] = {
	/* Empty tiers and each tier alone. */
	{ "empty tiers, no host",
	  .v = VERDICT_PENDING, .by = BY_DEFAULT, .why = "no rule matched" },
	{ "empty tiers, a host", .host = "10.1.2.3",
	  .v = VERDICT_PENDING, .by = BY_DEFAULT },
	{ "admin allow", .admin = { "allow id 046d:c52b" },
	  .v = VERDICT_ALLOW, .by = BY_ADMIN_RULE, .id = 1,
	  .why = "admin rule 1: allow" },
	{ "admin block", .admin = { "block id 046d:c52b" },
	  .v = VERDICT_BLOCK, .by = BY_ADMIN_RULE, .id = 1,
	  .why = "admin rule 1: block" },
	{ "admin reject", .admin = { "reject" },
	  .v = VERDICT_REJECT, .by = BY_ADMIN_RULE, .id = 1,
	  .why = "admin rule 1: reject" },
	{ "admin ask", .admin = { "ask" },
	  .v = VERDICT_PENDING, .by = BY_ADMIN_RULE, .id = 1,
	  .why = "admin rule 1: ask" },
	{ "admin: first match wins",
	  .admin = { "allow id 1234:5678", "block id 046d:*", "allow" },
	  .v = VERDICT_BLOCK, .by = BY_ADMIN_RULE, .id = 2 },
	{ "admin: no rule matches", .admin = { "allow id 1234:5678" },
	  .v = VERDICT_PENDING, .by = BY_DEFAULT },
	{ "admin: an ask stops the search",
	  .admin = { "ask id 046d:*", "allow" },
	  .v = VERDICT_PENDING, .by = BY_ADMIN_RULE, .id = 1 },
	{ "operator allow", .oper = { "allow id 046d:c52b" },
	  .v = VERDICT_ALLOW, .by = BY_OPERATOR_RULE, .id = 101,
	  .why = "operator rule 101: allow" },
	{ "operator block", .oper = { "block" },
	  .v = VERDICT_BLOCK, .by = BY_OPERATOR_RULE, .id = 101 },
	{ "operator reject counts as block", .oper = { "reject" },
	  .v = VERDICT_BLOCK, .by = BY_OPERATOR_RULE, .id = 101,
	  .why = "operator rule 101: reject (as block)" },
	{ "operator ask is skipped", .oper = { "ask" },
	  .v = VERDICT_PENDING, .by = BY_DEFAULT },
	{ "operator: first match ask, the allow below does not count",
	  .oper = { "ask id 046d:*", "allow" },
	  .v = VERDICT_PENDING, .by = BY_DEFAULT },
	{ "operator: first match wins",
	  .oper = { "block id 1234:*", "allow id 046d:c52b", "block" },
	  .v = VERDICT_ALLOW, .by = BY_OPERATOR_RULE, .id = 102 },

	/* 1. anomaly */
	{ "1 alone: anomaly", .anomaly = true,
	  .v = VERDICT_BLOCK, .by = BY_ANOMALY,
	  .why = "identity anomaly: serial changed" },
	{ "1 over 2: anomaly beats an override", .anomaly = true,
	  .admin = { "block" },
	  .appr = { { .override = true, .by = "root" } },
	  .v = VERDICT_BLOCK, .by = BY_ANOMALY },
	{ "1 over 2: anomaly beats admin reject (blocks)", .anomaly = true,
	  .admin = { "reject" },
	  .v = VERDICT_BLOCK, .by = BY_ANOMALY },
	{ "1 over 6: anomaly beats admin allow", .anomaly = true,
	  .admin = { "allow" },
	  .v = VERDICT_BLOCK, .by = BY_ANOMALY },
	{ "1 over 7: anomaly beats an approval", .anomaly = true,
	  .appr = { { .by = "bob" } },
	  .v = VERDICT_BLOCK, .by = BY_ANOMALY },

	/* 2. admin block/reject, and the override */
	{ "2 over 3: admin block beats a denial", .admin = { "block" },
	  .appr = { { .deny = true, .by = "alice" } },
	  .v = VERDICT_BLOCK, .by = BY_ADMIN_RULE, .id = 1 },
	{ "2 over 4: admin block beats operator block",
	  .admin = { "block" }, .oper = { "block" },
	  .v = VERDICT_BLOCK, .by = BY_ADMIN_RULE, .id = 1 },
	{ "2 over 5: admin block beats revocation", .admin = { "block" },
	  .revoked = true,
	  .v = VERDICT_BLOCK, .by = BY_ADMIN_RULE, .id = 1 },
	{ "2 over 7: admin block beats a plain approval",
	  .admin = { "block" }, .appr = { { .by = "bob" } },
	  .v = VERDICT_BLOCK, .by = BY_ADMIN_RULE, .id = 1 },
	{ "2 over 8: admin reject beats operator allow",
	  .admin = { "reject" }, .oper = { "allow" },
	  .v = VERDICT_REJECT, .by = BY_ADMIN_RULE, .id = 1 },
	{ "2: override beats admin block", .admin = { "block" },
	  .appr = { { .override = true, .by = "root" } },
	  .v = VERDICT_ALLOW, .by = BY_APPROVAL, .id = 201,
	  .why = "admin rule 1 (block) overridden by root" },
	{ "2: override beats admin reject", .admin = { "reject" },
	  .appr = { { .override = true, .by = "root" } },
	  .v = VERDICT_ALLOW, .by = BY_APPROVAL, .id = 201 },
	{ "2: override for another host does not apply",
	  .admin = { "block" }, .host = "10.1.2.3",
	  .appr = { { .override = true, .to = "10.9.0.0/16", .by = "root" } },
	  .v = VERDICT_BLOCK, .by = BY_ADMIN_RULE, .id = 1 },
	{ "2: override for this host's network",
	  .admin = { "block" }, .host = "10.1.2.3",
	  .appr = { { .override = true, .to = "10.1.0.0/16", .by = "root" } },
	  .v = VERDICT_ALLOW, .by = BY_APPROVAL, .id = 201,
	  .why = "admin rule 1 (block) overridden by root for 10.1.0.0/16" },
	{ "2: override, standing state, whatever its host",
	  .admin = { "block" },
	  .appr = { { .override = true, .to = "10.9.0.0/16", .by = "root" } },
	  .v = VERDICT_ALLOW, .by = BY_APPROVAL, .id = 201 },
	{ "2: an expired override (expires now)", .admin = { "block" },
	  .appr = { { .override = true, .scope = SCOPE_FOR,
	    .expires_at = NOW, .by = "root" } },
	  .v = VERDICT_BLOCK, .by = BY_ADMIN_RULE, .id = 1 },
	{ "2: only an override lifts an admin block", .admin = { "block" },
	  .appr = { { .by = "bob" }, { .override = true, .by = "root" } },
	  .v = VERDICT_ALLOW, .by = BY_APPROVAL, .id = 202 },
	{ "2 over 3: an override is decided in row 2, before a denial",
	  .admin = { "block" },
	  .appr = { { .deny = true, .by = "alice" },
	    { .override = true, .by = "root" } },
	  .v = VERDICT_ALLOW, .by = BY_APPROVAL, .id = 202 },
	{ "6 over 7: with admin allow, an override is just an approval",
	  .admin = { "allow" }, .appr = { { .override = true, .by = "root" } },
	  .v = VERDICT_ALLOW, .by = BY_ADMIN_RULE, .id = 1 },
	{ "3 over 7: no admin block, a denial beats an override",
	  .appr = { { .override = true, .by = "root" },
	    { .deny = true, .by = "alice" } },
	  .v = VERDICT_BLOCK, .by = BY_DENIAL, .id = 202 },

	/* 3. denial */
	{ "3 over 4: denial beats operator block", .oper = { "block" },
	  .appr = { { .deny = true, .by = "alice" } },
	  .v = VERDICT_BLOCK, .by = BY_DENIAL, .id = 201,
	  .why = "denied by alice" },
	{ "3 over 5: denial beats revocation", .revoked = true,
	  .appr = { { .deny = true, .by = "alice" } },
	  .v = VERDICT_BLOCK, .by = BY_DENIAL, .id = 201 },
	{ "3 over 6: denial beats admin allow", .admin = { "allow" },
	  .appr = { { .deny = true, .by = "alice" } },
	  .v = VERDICT_BLOCK, .by = BY_DENIAL, .id = 201 },
	{ "3 over 7: denial beats an approval",
	  .appr = { { .by = "bob" }, { .deny = true, .by = "alice" } },
	  .v = VERDICT_BLOCK, .by = BY_DENIAL, .id = 202 },
	{ "3: a denial applies whatever its host", .host = "10.1.2.3",
	  .admin = { "allow" },
	  .appr = { { .deny = true, .to = "10.9.9.9", .by = "alice" } },
	  .v = VERDICT_BLOCK, .by = BY_DENIAL, .id = 201,
	  .why = "denied by alice for 10.9.9.9" },
	{ "3: several denials, the lowest id",
	  .appr = { { .id = 305, .deny = true, .by = "carol" },
	    { .id = 302, .deny = true, .by = "alice" },
	    { .id = 309, .deny = true, .by = "dave" } },
	  .v = VERDICT_BLOCK, .by = BY_DENIAL, .id = 302 },
	{ "3: a denial expiring now is gone", .admin = { "allow" },
	  .appr = { { .deny = true, .scope = SCOPE_FOR, .expires_at = NOW,
	    .by = "alice" } },
	  .v = VERDICT_ALLOW, .by = BY_ADMIN_RULE, .id = 1 },
	{ "3: a denial expiring in a second", .admin = { "allow" },
	  .appr = { { .deny = true, .scope = SCOPE_FOR,
	    .expires_at = NOW + 1, .by = "alice" } },
	  .v = VERDICT_BLOCK, .by = BY_DENIAL, .id = 201,
	  .recheck = NOW + 1, .why = "denied by alice until 2023-11-14T12:00:01Z" },

	/* 4. operator block */
	{ "4 over 5: operator block beats revocation", .revoked = true,
	  .oper = { "block" },
	  .v = VERDICT_BLOCK, .by = BY_OPERATOR_RULE, .id = 101 },
	{ "4 over 6: operator block beats admin allow",
	  .admin = { "allow" }, .oper = { "block id 046d:c52b" },
	  .v = VERDICT_BLOCK, .by = BY_OPERATOR_RULE, .id = 101,
	  .why = "operator rule 101: block" },
	{ "4 over 7: operator block beats an approval", .oper = { "block" },
	  .appr = { { .by = "bob" } },
	  .v = VERDICT_BLOCK, .by = BY_OPERATOR_RULE, .id = 101 },
	{ "4 over 6: operator reject beats admin allow, as block",
	  .admin = { "allow" }, .oper = { "reject" },
	  .v = VERDICT_BLOCK, .by = BY_OPERATOR_RULE, .id = 101 },

	/* 5. revocation */
	{ "5 alone: revoked", .revoked = true,
	  .v = VERDICT_PENDING, .by = BY_REVOCATION,
	  .why = "revoked for this presence" },
	{ "5 over 6: revocation beats admin allow", .revoked = true,
	  .admin = { "allow" },
	  .v = VERDICT_PENDING, .by = BY_REVOCATION },
	{ "5 over 7: revocation beats an approval", .revoked = true,
	  .appr = { { .by = "bob" } },
	  .v = VERDICT_PENDING, .by = BY_REVOCATION },
	{ "5 over 8: revocation beats operator allow", .revoked = true,
	  .oper = { "allow" },
	  .v = VERDICT_PENDING, .by = BY_REVOCATION },

	/* 6. admin allow */
	{ "6 over 7: admin allow beats an approval", .admin = { "allow" },
	  .appr = { { .by = "bob" } },
	  .v = VERDICT_ALLOW, .by = BY_ADMIN_RULE, .id = 1 },
	{ "6 over 8: admin allow beats operator allow",
	  .admin = { "allow" }, .oper = { "allow" },
	  .v = VERDICT_ALLOW, .by = BY_ADMIN_RULE, .id = 1 },

	/* 7. approvals */
	{ "7 over 8: an approval beats operator allow", .oper = { "allow" },
	  .appr = { { .by = "bob" } },
	  .v = VERDICT_ALLOW, .by = BY_APPROVAL, .id = 201 },
	{ "7 over 9: an approval beats admin ask", .admin = { "ask" },
	  .appr = { { .by = "bob" } },
	  .v = VERDICT_ALLOW, .by = BY_APPROVAL, .id = 201 },
	{ "7: approval once", .appr = { { .scope = SCOPE_ONCE, .by = "bob" } },
	  .v = VERDICT_ALLOW, .by = BY_APPROVAL, .id = 201,
	  .why = "approved by bob" },
	{ "7: approval for an hour",
	  .appr = { { .scope = SCOPE_FOR, .expires_at = NOW + 3600,
	    .by = "bob" } },
	  .v = VERDICT_ALLOW, .by = BY_APPROVAL, .id = 201,
	  .recheck = NOW + 3600, .why = "approved by bob until 2023-11-14T13:00:00Z" },
	{ "7: approval until 17:00",
	  .appr = { { .scope = SCOPE_UNTIL, .expires_at = T(17, 0),
	    .by = "bob" } },
	  .v = VERDICT_ALLOW, .by = BY_APPROVAL, .id = 201,
	  .recheck = T(17, 0) },
	{ "7: approval expiring exactly now is expired",
	  .appr = { { .scope = SCOPE_FOR, .expires_at = NOW, .by = "bob" } },
	  .v = VERDICT_PENDING, .by = BY_DEFAULT },
	{ "7: approval expired a second ago",
	  .appr = { { .scope = SCOPE_UNTIL, .expires_at = NOW - 1,
	    .by = "bob" } },
	  .v = VERDICT_PENDING, .by = BY_DEFAULT },
	{ "7: approval for this address", .host = "10.1.2.3",
	  .appr = { { .to = "10.1.2.3", .by = "bob" } },
	  .v = VERDICT_ALLOW, .by = BY_APPROVAL, .id = 201 },
	{ "7: approval for another address", .host = "10.1.2.3",
	  .appr = { { .to = "10.1.2.4", .by = "bob" } },
	  .v = VERDICT_PENDING, .by = BY_DEFAULT },
	{ "7: approval for a v4 network, host in it", .host = "10.1.2.3",
	  .appr = { { .to = "10.1.0.0/16", .scope = SCOPE_UNTIL,
	    .expires_at = NOW + 60, .by = "bob" } },
	  .v = VERDICT_ALLOW, .by = BY_APPROVAL, .id = 201,
	  .recheck = NOW + 60,
	  .why = "approved by bob for 10.1.0.0/16 until 2023-11-14T12:01:00Z" },
	{ "7: approval for a v4 network, host outside", .host = "10.2.0.1",
	  .appr = { { .to = "10.1.0.0/16", .by = "bob" } },
	  .v = VERDICT_PENDING, .by = BY_DEFAULT },
	{ "7: approval for a v6 network, host in it", .host = "fd00:1:2::5",
	  .appr = { { .to = "fd00:1::/32", .by = "bob" } },
	  .v = VERDICT_ALLOW, .by = BY_APPROVAL, .id = 201 },
	{ "7: approval for a v6 network, host outside", .host = "fd01::5",
	  .appr = { { .to = "fd00:1::/32", .by = "bob" } },
	  .v = VERDICT_PENDING, .by = BY_DEFAULT },
	{ "7: v4 network, v4-mapped host in it", .host = "::ffff:10.1.2.3",
	  .appr = { { .to = "10.1.0.0/16", .by = "bob" } },
	  .v = VERDICT_ALLOW, .by = BY_APPROVAL, .id = 201 },
	{ "7: v4 network, v4-mapped host outside", .host = "::ffff:10.2.2.3",
	  .appr = { { .to = "10.1.0.0/16", .by = "bob" } },
	  .v = VERDICT_PENDING, .by = BY_DEFAULT },
	{ "7: v4 address, v6 host that is not v4-mapped",
	  .host = "2001:db8::a01:203",
	  .appr = { { .to = "10.1.2.3", .by = "bob" } },
	  .v = VERDICT_PENDING, .by = BY_DEFAULT },
	{ "7: approval by name, the verified name", .host = "10.1.2.3",
	  .hname = "vdi01.example.org",
	  .appr = { { .to = "vdi01.example.org", .by = "bob" } },
	  .v = VERDICT_ALLOW, .by = BY_APPROVAL, .id = 201,
	  .why = "approved by bob for vdi01.example.org" },
	{ "7: approval by name, case and trailing dot ignored",
	  .host = "10.1.2.3", .hname = "VDI01.Example.ORG.",
	  .appr = { { .to = "vdi01.EXAMPLE.org", .by = "bob" } },
	  .v = VERDICT_ALLOW, .by = BY_APPROVAL, .id = 201 },
	{ "7: approval by name, host name not verified", .host = "10.1.2.3",
	  .appr = { { .to = "vdi01.example.org", .by = "bob" } },
	  .v = VERDICT_PENDING, .by = BY_DEFAULT },
	{ "7: approval by name, another name", .host = "10.1.2.3",
	  .hname = "vdi02.example.org",
	  .appr = { { .to = "vdi01.example.org", .by = "bob" } },
	  .v = VERDICT_PENDING, .by = BY_DEFAULT },
	{ "7: approval by name, a longer name", .host = "10.1.2.3",
	  .hname = "vdi01.example.org.uk",
	  .appr = { { .to = "vdi01.example.org", .by = "bob" } },
	  .v = VERDICT_PENDING, .by = BY_DEFAULT },
	{ "7: standing state counts an approval for some host",
	  .appr = { { .to = "10.9.0.0/16", .by = "bob" } },
	  .v = VERDICT_ALLOW, .by = BY_APPROVAL, .id = 201 },
	{ "7: standing state counts an approval by name",
	  .appr = { { .to = "vdi01", .by = "bob" } },
	  .v = VERDICT_ALLOW, .by = BY_APPROVAL, .id = 201 },
	{ "7: address limit, host address unknown", .host = "",
	  .hname = "vdi01",
	  .appr = { { .to = "10.1.2.3", .by = "bob" } },
	  .v = VERDICT_PENDING, .by = BY_DEFAULT },
	{ "7: name limit, host known by name only", .host = "",
	  .hname = "vdi01",
	  .appr = { { .to = "vdi01", .by = "bob" } },
	  .v = VERDICT_ALLOW, .by = BY_APPROVAL, .id = 201 },
	{ "7: several approvals, one without expiry first",
	  .appr = { { .expires_at = NOW + 100, .scope = SCOPE_FOR,
	    .by = "bob" }, { .id = 203, .by = "carol" },
	    { .id = 202, .by = "dave" } },
	  .v = VERDICT_ALLOW, .by = BY_APPROVAL, .id = 202,
	  .recheck = NOW + 100 },
	{ "7: several approvals, the latest expiry, then the lowest id",
	  .appr = { { .id = 201, .expires_at = NOW + 100, .by = "bob" },
	    { .id = 203, .expires_at = NOW + 500, .by = "carol" },
	    { .id = 202, .expires_at = NOW + 500, .by = "dave" } },
	  .v = VERDICT_ALLOW, .by = BY_APPROVAL, .id = 202,
	  .recheck = NOW + 100 },
	{ "7: only the approval for this host counts", .host = "10.1.2.3",
	  .appr = { { .to = "10.9.0.0/16", .by = "bob" },
	    { .to = "10.1.2.3", .expires_at = NOW + 60, .by = "carol" } },
	  .v = VERDICT_ALLOW, .by = BY_APPROVAL, .id = 202,
	  .recheck = NOW + 60 },
	{ "7: expired approvals skipped, and not in recheck_at",
	  .appr = { { .expires_at = NOW - 10, .by = "bob" },
	    { .expires_at = NOW + 10, .by = "carol" } },
	  .v = VERDICT_ALLOW, .by = BY_APPROVAL, .id = 202,
	  .recheck = NOW + 10 },

	/* 8. operator allow; 9. admin ask; 10. nothing */
	{ "8 over 9: operator allow beats admin ask", .admin = { "ask" },
	  .oper = { "allow" },
	  .v = VERDICT_ALLOW, .by = BY_OPERATOR_RULE, .id = 101 },
	{ "8 over 10: operator allow when no admin rule matches",
	  .admin = { "block id 1234:5678" }, .oper = { "allow" },
	  .v = VERDICT_ALLOW, .by = BY_OPERATOR_RULE, .id = 101 },
	{ "9 over 10: admin ask, operator ask", .admin = { "ask" },
	  .oper = { "ask" },
	  .v = VERDICT_PENDING, .by = BY_ADMIN_RULE, .id = 1 },
	{ "9: admin ask, an approval for another host", .admin = { "ask" },
	  .host = "10.1.2.3", .appr = { { .to = "10.9.9.9", .by = "bob" } },
	  .v = VERDICT_PENDING, .by = BY_ADMIN_RULE, .id = 1 },

	/* Rules with to-host. */
	{ "to-host address, that host", .host = "10.1.2.3",
	  .admin = { "allow to-host 10.1.2.3" },
	  .v = VERDICT_ALLOW, .by = BY_ADMIN_RULE, .id = 1 },
	{ "to-host address, no host", .admin = { "allow to-host 10.1.2.3" },
	  .v = VERDICT_PENDING, .by = BY_DEFAULT },
	{ "to-host network block, host in it", .host = "10.1.2.3",
	  .admin = { "block to-host 10.0.0.0/8", "allow" },
	  .v = VERDICT_BLOCK, .by = BY_ADMIN_RULE, .id = 1 },
	{ "to-host network block, host outside", .host = "192.168.1.1",
	  .admin = { "block to-host 10.0.0.0/8", "allow" },
	  .v = VERDICT_ALLOW, .by = BY_ADMIN_RULE, .id = 2 },
	{ "to-host network block, no host",
	  .admin = { "block to-host 10.0.0.0/8", "allow" },
	  .v = VERDICT_ALLOW, .by = BY_ADMIN_RULE, .id = 2 },
	{ "to-host v4 network, v4-mapped host", .host = "::ffff:10.1.2.3",
	  .admin = { "allow to-host 10.0.0.0/8" },
	  .v = VERDICT_ALLOW, .by = BY_ADMIN_RULE, .id = 1 },
	{ "to-host name, the verified name", .host = "10.1.2.3",
	  .hname = "vdi01", .admin = { "allow to-host vdi01" },
	  .v = VERDICT_ALLOW, .by = BY_ADMIN_RULE, .id = 1 },
	{ "to-host name, no verified name", .host = "10.1.2.3",
	  .admin = { "allow to-host vdi01" },
	  .v = VERDICT_PENDING, .by = BY_DEFAULT },
	{ "operator to-host v6 network, host in it", .host = "fd00::5",
	  .oper = { "allow to-host fd00::/8" },
	  .v = VERDICT_ALLOW, .by = BY_OPERATOR_RULE, .id = 101 },
	{ "operator to-host block, no host: allowed by approval",
	  .oper = { "block to-host fd00::/8" }, .appr = { { .by = "bob" } },
	  .v = VERDICT_ALLOW, .by = BY_APPROVAL, .id = 201 },

	/* Time windows (TZ=UTC; DAY is a Tuesday). */
	{ "window: inside", .admin = { "allow if localtime(08:00-18:00)" },
	  .v = VERDICT_ALLOW, .by = BY_ADMIN_RULE, .id = 1,
	  .recheck = T(18, 0) + 1 },
	{ "window: before it opens", .now = T(7, 0),
	  .admin = { "allow if localtime(08:00-18:00)" },
	  .v = VERDICT_PENDING, .by = BY_DEFAULT, .recheck = T(8, 0) },
	{ "window: opens at 08:00:00", .now = T(8, 0),
	  .admin = { "allow if localtime(08:00-18:00)" },
	  .v = VERDICT_ALLOW, .by = BY_ADMIN_RULE, .id = 1,
	  .recheck = T(18, 0) + 1 },
	{ "window: 18:00:00 still in", .now = T(18, 0),
	  .admin = { "allow if localtime(08:00-18:00)" },
	  .v = VERDICT_ALLOW, .by = BY_ADMIN_RULE, .id = 1,
	  .recheck = T(18, 0) + 1 },
	{ "window: closed at 18:00:01", .now = T(18, 0) + 1,
	  .admin = { "allow if localtime(08:00-18:00)" },
	  .v = VERDICT_PENDING, .by = BY_DEFAULT, .recheck = T(32, 0) },
	{ "window: operator block overnight", .now = T(23, 0),
	  .oper = { "block if localtime(22:00-06:00)" },
	  .v = VERDICT_BLOCK, .by = BY_OPERATOR_RULE, .id = 101,
	  .recheck = T(30, 0) + 1 },
	{ "window: admin block closed, approval decides",
	  .admin = { "block if localtime(20:00-21:00)" },
	  .appr = { { .by = "bob" } },
	  .v = VERDICT_ALLOW, .by = BY_APPROVAL, .id = 201,
	  .recheck = T(20, 0) },
	{ "window: recheck is the earlier of window and expiry",
	  .admin = { "allow if localtime(08:00-18:00)" },
	  .appr = { { .expires_at = T(13, 0), .scope = SCOPE_UNTIL,
	    .by = "bob" } },
	  .v = VERDICT_ALLOW, .by = BY_ADMIN_RULE, .id = 1,
	  .recheck = T(13, 0) },
	{ "window: recheck is the earlier of both tiers",
	  .admin = { "block if localtime(20:00-21:00)" },
	  .oper = { "allow if localtime(08:00-18:00)" },
	  .v = VERDICT_ALLOW, .by = BY_OPERATOR_RULE, .id = 101,
	  .recheck = T(18, 0) + 1 },
	{ "window: anomaly decides, the window still counts", .anomaly = true,
	  .admin = { "allow if localtime(08:00-18:00)" },
	  .v = VERDICT_BLOCK, .by = BY_ANOMALY, .recheck = T(18, 0) + 1 },
	{ "window: weekday on a Tuesday",
	  .admin = { "allow if weekday(mon-fri)" },
	  .v = VERDICT_ALLOW, .by = BY_ADMIN_RULE, .id = 1,
	  .recheck = T(24, 0) },
	{ "window: weekend only, on a Tuesday",
	  .admin = { "allow if weekday(sat-sun)" },
	  .v = VERDICT_PENDING, .by = BY_DEFAULT, .recheck = T(24, 0) },

	/* allowed-matches: one keyboard at a time. */
	{ "allowed-matches true",
	  .admin = { "block if allowed-matches(with-interface 03:*:*)",
	    "allow" }, .allowed = 1,
	  .v = VERDICT_BLOCK, .by = BY_ADMIN_RULE, .id = 1 },
	{ "allowed-matches false",
	  .admin = { "block if allowed-matches(with-interface 03:*:*)",
	    "allow" }, .allowed = 0,
	  .v = VERDICT_ALLOW, .by = BY_ADMIN_RULE, .id = 2 },

	/* An operator rule made from the identity, then it changes. */
	{ "identity: operator rule for this identity",
	  .oper = { "allow id 046d:c52b serial \"S123\" hash \"" HASH0 "\"" },
	  .v = VERDICT_ALLOW, .by = BY_OPERATOR_RULE, .id = 101 },
	{ "identity: changed, the operator rule no longer matches",
	  .changed = true,
	  .oper = { "allow id 046d:c52b serial \"S123\" hash \"" HASH0 "\"" },
	  .v = VERDICT_PENDING, .by = BY_DEFAULT },
	{ "identity: changed, an operator block by hash no longer matches",
	  .changed = true, .admin = { "allow" },
	  .oper = { "block hash \"" HASH0 "\"" },
	  .v = VERDICT_ALLOW, .by = BY_ADMIN_RULE, .id = 1 },
	{ "identity: changed, a rule for the new one matches",
	  .changed = true,
	  .oper = { "allow serial \"S124\" hash \"" HASH1 "\"",
	    "block id 046d:c52b" },
	  .v = VERDICT_ALLOW, .by = BY_OPERATOR_RULE, .id = 101 },
};

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
ident(struct usbgw_identity *id, bool changed)
{
	memset(id, 0, sizeof(*id));
	usbgw_strlcpy(id->exporter, "tc17", sizeof(id->exporter));
	usbgw_strlcpy(id->exporter_busid, "1-2", sizeof(id->exporter_busid));
	usbgw_strlcpy(id->busid, "tc17-1-2", sizeof(id->busid));
	id->vid = 0x046d;
	id->pid = 0xc52b;
	id->n_ifaces = 1;
	id->ifaces[0].cls = 0x03;
	id->ifaces[0].subcls = 0x01;
	id->ifaces[0].proto = 0x01;
	usbgw_strlcpy(id->manufacturer, "ACME", sizeof(id->manufacturer));
	usbgw_strlcpy(id->product, "Widget", sizeof(id->product));
	usbgw_strlcpy(id->serial, changed ? "S124" : "S123",
	    sizeof(id->serial));
	usbgw_strlcpy(id->hash, changed ? HASH1 : HASH0, sizeof(id->hash));
}

/* A policy of the texts, ids base, base + 1, ...; NULL if none. */
static struct policy *
tier(const char *const *texts, int64_t base)
{
	struct policy	*p;
	size_t		 i;

	if (texts[0] == NULL)
		return NULL;
	p = policy_new();
	for (i = 0; i < NRULES && texts[i] != NULL; i++)
		if (policy_append(p, base + (int64_t)i, P(texts[i])) == -1)
			abort();
	return p;
}

static size_t
approvals(const struct tappr *t, struct approval *out)
{
	char	err[256];
	size_t	i;

	for (i = 0; i < NAPPR && t[i].by != NULL; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		out[i].id = t[i].id != 0 ? t[i].id : 201 + (int64_t)i;
		out[i].deny = t[i].deny;
		out[i].override = t[i].override;
		out[i].scope = t[i].scope;
		out[i].expires_at = t[i].expires_at;
		if (host_match_parse(t[i].to, true, &out[i].to, err,
		    sizeof(err)) == -1) {
			diag("approval to %s: %s", t[i].to, err);
			abort();
		}
		out[i].by.kind = ACTOR_OPERATOR;
		out[i].by.uid = 1000 + (uid_t)i;
		usbgw_strlcpy(out[i].by.name, t[i].by, sizeof(out[i].by.name));
	}
	return i;
}

static int
allowed_cb(void *arg, const struct rule *query)
{
	return *(const int *)arg;
}

/* The actor each kind of decision must name. */
static void
check_actor(const struct dcase *c, const struct decision *d,
    const struct approval *ap, size_t nap)
{
	char	name[64];
	size_t	i;

	switch (c->by) {
	case BY_ADMIN_RULE:
	case BY_OPERATOR_RULE:
		snprintf(name, sizeof(name), "rule %lld", (long long)c->id);
		ok(d->actor.kind == ACTOR_RULE && d->actor.rule_id == c->id &&
		    strcmp(d->actor.name, name) == 0 && d->rule_id == c->id &&
		    d->approval_id == 0, "%s: actor %s", c->name, name);
		break;
	case BY_APPROVAL:
	case BY_DENIAL:
		for (i = 0; i < nap && ap[i].id != c->id; i++)
			continue;
		ok(i < nap && d->actor.kind == ACTOR_OPERATOR &&
		    strcmp(d->actor.name, ap[i].by.name) == 0 &&
		    d->actor.uid == ap[i].by.uid && d->approval_id == c->id &&
		    d->rule_id == 0, "%s: actor is the approval's", c->name);
		break;
	default:
		ok(d->actor.kind == ACTOR_SYSTEM &&
		    strcmp(d->actor.name, "system") == 0 && d->rule_id == 0 &&
		    d->approval_id == 0, "%s: actor system", c->name);
		break;
	}
}

static void
run_case(const struct dcase *c)
{
	struct usbgw_identity	 id;
	struct approval		 ap[NAPPR];
	struct host_id		 host;
	struct decision_in	 in;
	struct decision		 d;
	int			 allowed = c->allowed;

	ident(&id, c->changed);
	memset(&in, 0, sizeof(in));
	in.id = &id;
	in.admin = tier(c->admin, 1);
	in.operator = tier(c->oper, 101);
	in.napprovals = approvals(c->appr, ap);
	in.approvals = ap;
	in.revoked = c->revoked;
	in.anomaly = c->anomaly;
	in.anomaly_why = "serial changed";
	if (c->host != NULL || c->hname != NULL) {
		memset(&host, 0, sizeof(host));
		if (c->host != NULL && c->host[0] != '\0' &&
		    usbgw_addr_parse(c->host, &host.addr) == -1)
			abort();
		host.name = c->hname;
		in.host = &host;
	}
	in.now = c->now != 0 ? c->now : NOW;
	in.allowed_matches = allowed_cb;
	in.arg = &allowed;

	memset(&d, 0xa5, sizeof(d));
	decide(&in, &d);
	ok(d.verdict == c->v && d.by == c->by, "%s: %s by %s", c->name,
	    verdict_name(c->v), decided_by_name(c->by));
	if (d.verdict != c->v || d.by != c->by)
		diag("got %s by %s (%s)", verdict_name(d.verdict),
		    decided_by_name(d.by), d.why);
	check_actor(c, &d, ap, in.napprovals);
	is_int(d.recheck_at, c->recheck != 0 ? c->recheck : NEVER,
	    "%s: recheck_at", c->name);
	ok(memchr(d.why, '\0', sizeof(d.why)) != NULL && d.why[0] != '\0',
	    "%s: why \"%s\"", c->name, d.why);
	if (c->why != NULL)
		is_str(d.why, c->why, "%s: why", c->name);
	policy_free(in.admin);
	policy_free(in.operator);
}

/* Names are bounded whatever the input; a NULL anomaly_why is fine. */
static void
test_bounds(void)
{
	struct usbgw_identity	 id;
	struct approval		 a;
	struct decision_in	 in;
	struct decision		 d;
	char			 err[256], name[HOST_NAME_MAX_LEN + 1];
	size_t			 i;

	ident(&id, false);
	memset(&in, 0, sizeof(in));
	in.id = &id;
	in.now = NOW;
	in.anomaly = true;
	decide(&in, &d);
	is_str(d.why, "identity anomaly", "anomaly without a reason");

	/* 4 labels of 62 characters and dots: 251 characters. */
	for (i = 0; i < 251; i++)
		name[i] = i % 63 == 62 ? '.' : 'a';
	name[251] = '\0';
	memset(&a, 0, sizeof(a));
	a.id = 7;
	a.expires_at = NOW + 5;
	if (host_match_parse(name, true, &a.to, err, sizeof(err)) == -1)
		abort();
	memset(a.by.name, 'x', sizeof(a.by.name));	/* no NUL */
	in.anomaly = false;
	in.approvals = &a;
	in.napprovals = 1;
	decide(&in, &d);
	ok(d.by == BY_APPROVAL && strlen(d.why) == sizeof(d.why) - 1 &&
	    strncmp(d.why, "approved by xxx", 15) == 0,
	    "a long actor and host: why truncated, bounded");
	ok(strlen(d.actor.name) == sizeof(d.actor.name) - 1,
	    "an unterminated actor name is terminated");
}

/* What the table's fixed plumbing cannot show. */
static void
test_inputs(void)
{
	struct usbgw_identity	 id;
	struct decision_in	 in;
	struct decision		 d;

	ident(&id, false);
	memset(&in, 0, sizeof(in));
	in.id = &id;
	in.now = NOW;
	in.admin = policy_new();
	policy_append(in.admin, 1,
	    P("block if allowed-matches(with-interface 03:*:*)"));
	policy_append(in.admin, 2, P("allow"));
	decide(&in, &d);
	ok(d.by == BY_ADMIN_RULE && d.rule_id == 2,
	    "no allowed_matches callback: the condition is false");
	policy_clear(in.admin);

	/* A tier's default target is no rule: rule_id 0 counts as none. */
	policy_set_default(in.admin, RULE_BLOCK);
	decide(&in, &d);
	ok(d.verdict == VERDICT_PENDING && d.by == BY_DEFAULT,
	    "admin default block without a rule: no rule matched");
	in.operator = policy_new();
	policy_set_default(in.operator, RULE_ALLOW);
	decide(&in, &d);
	ok(d.verdict == VERDICT_PENDING && d.by == BY_DEFAULT,
	    "operator default allow without a rule: no rule matched");
	policy_free(in.admin);
	policy_free(in.operator);
}

static void
test_names(void)
{
	is_str(verdict_name(VERDICT_PENDING), "pending", "verdict pending");
	is_str(verdict_name(VERDICT_ALLOW), "allow", "verdict allow");
	is_str(verdict_name(VERDICT_BLOCK), "block", "verdict block");
	is_str(verdict_name(VERDICT_REJECT), "reject", "verdict reject");
	is_str(decided_by_name(BY_DEFAULT), "default", "by default");
	is_str(decided_by_name(BY_ANOMALY), "anomaly", "by anomaly");
	is_str(decided_by_name(BY_ADMIN_RULE), "admin-rule", "by admin-rule");
	is_str(decided_by_name(BY_OPERATOR_RULE), "operator-rule",
	    "by operator-rule");
	is_str(decided_by_name(BY_DENIAL), "denial", "by denial");
	is_str(decided_by_name(BY_REVOCATION), "revocation", "by revocation");
	is_str(decided_by_name(BY_APPROVAL), "approval", "by approval");
}

/* ------------------------------------------------------------------ */
/* Host limits                                                          */

struct pcase {
	const char	*text;
	bool		 names;		/* names_checked */
	int		 rc;
	const char	*want;		/* format, or the error */
	bool		 exact;		/* error equal, not contained */
};

/* Accepted and formatted so; refused with a message containing / equal to. */
#define GOOD(t, n, f)		{ (t), (n), 0, (f), false }
#define REFUSE(t, n, m)		{ (t), (n), -1, (m), false }
#define REFUSEX(t, n, m)	{ (t), (n), -1, (m), true }

#define L63 "abcdefghij" "abcdefghij" "abcdefghij" "abcdefghij" \
	    "abcdefghij" "abcdefghij" "abc"
#define L61 "abcdefghij" "abcdefghij" "abcdefghij" "abcdefghij" \
	    "abcdefghij" "abcdefghij" "a"

static const struct pcase pcases[] = {
	GOOD(NULL, false, ""),
	GOOD("", false, ""),
	GOOD("10.1.2.3", false, "10.1.2.3"),
	GOOD("10.1.2.3/32", false, "10.1.2.3"),
	GOOD("10.0.0.0/8", false, "10.0.0.0/8"),
	GOOD("10.1.2.0/23", false, "10.1.2.0/23"),
	GOOD("0.0.0.0/0", false, "0.0.0.0/0"),
	GOOD("10.0.0.0/08", false, "10.0.0.0/8"),
	GOOD("fd00::/8", false, "fd00::/8"),
	GOOD("FD00:0::1", false, "fd00::1"),
	GOOD("2001:db8::/32", false, "2001:db8::/32"),
	GOOD("::/0", false, "::/0"),
	GOOD("::ffff:10.1.2.3", false, "::ffff:10.1.2.3"),
	GOOD("fd00::1/128", false, "fd00::1"),
	GOOD("vdi01", true, "vdi01"),
	GOOD("VDI01.Example.ORG.", true, "vdi01.example.org"),
	GOOD("a-b.c1.9x", true, "a-b.c1.9x"),
	GOOD(L63 ".example", true, L63 ".example"),
	GOOD(L63 "." L63 "." L63 "." L61, true, L63 "." L63 "." L63 "." L61),
	GOOD(L63 "." L63 "." L63 "." L61 ".", true,
	    L63 "." L63 "." L63 "." L61),
	REFUSE(L63 "." L63 "." L63 "." L61 "x", true, "longer than 253"),
	REFUSEX("10.0.0.1/8", false,
	    "10.0.0.1/8 has host bits set; did you mean 10.0.0.0/8?"),
	REFUSEX("10.1.0.0/8", true,
	    "10.1.0.0/8 has host bits set; did you mean 10.0.0.0/8?"),
	REFUSEX("fd00::1/8", false,
	    "fd00::1/8 has host bits set; did you mean fd00::/8?"),
	REFUSE("10.1.3.0/23", false, "did you mean 10.1.2.0/23?"),
	REFUSEX("10.0.0.0/33", false,
	    "prefix /33 in '10.0.0.0/33' is longer than an IPv4 address "
	    "(0-32)"),
	REFUSEX("fd00::/129", false,
	    "prefix /129 in 'fd00::/129' is longer than an IPv6 address "
	    "(0-128)"),
	REFUSE("10.0.0.0/", false, "invalid prefix length in '10.0.0.0/'"),
	REFUSE("10.0.0.0/x", false, "expected a number 0-32 after '/'"),
	REFUSE("10.0.0.0/-1", false, "invalid prefix length"),
	REFUSE("10.0.0.0/ 8", false, "invalid prefix length"),
	REFUSE("10.0.0.0/+8", false, "invalid prefix length"),
	REFUSE("10.0.0.0/1000", false, "invalid prefix length"),
	REFUSE("10.0.0.0/8/8", false, "invalid prefix length"),
	REFUSEX("10.0.0.256", true,
	    "'10.0.0.256' is not a valid IPv4 address"),
	REFUSE("10.0.0", true, "not a valid IPv4 address"),
	REFUSE("1234", true, "not a valid IPv4 address"),
	REFUSE("/8", false, "not a valid IPv4 address"),
	REFUSEX("fd00:::1", false, "'fd00:::1' is not a valid IPv6 address"),
	REFUSE("fe80::1%eth0", false, "not a valid IPv6 address"),
	REFUSE("vdi01/24", true, "not a valid IPv4 address"),
	REFUSEX("foo_bar", true,
	    "'foo_bar' is not a host name (only letters, digits, '-' and '.' "
	    "are allowed): expected an IPv4 or IPv6 address, a CIDR prefix or "
	    "a DNS host name"),
	REFUSE("-vdi", true, "a label starts with '-'"),
	REFUSE("vdi-.example", true, "a label ends with '-'"),
	REFUSE("a..b", true, "empty label"),
	REFUSE(".vdi", true, "empty label"),
	REFUSE("a..", true, "empty label"),
	REFUSE(".", true, "empty name"),
	REFUSE(L63 "x.example", true, "a label is longer than 63 characters"),
	REFUSE("vdi 01", true, "is not a host name"),
	REFUSE("vdi*", true, "is not a host name"),
	REFUSE("h\xc3\xa9llo", true, "'h??llo' is not a host name"),
	REFUSE("a\nb", true, "'a?b' is not a host name"),
	REFUSE(" 10.1.2.3", true, "is not a host name"),
	REFUSEX("vdi01", false,
	    "host names are not verified by this gateway, so a limit to "
	    "'vdi01' could never match: use an address or a CIDR prefix"),
	REFUSE("vdi01.example.org", false, "are not verified by this gateway"),
	REFUSE("foo_bar", false, "is not a host name"),
};

/* s for a TAP line: NULL shown so, control characters as '?'. */
static void
printable(const char *s, char *buf, size_t len)
{
	size_t i;

	if (s == NULL)
		s = "(null)";
	for (i = 0; s[i] != '\0' && i + 1 < len; i++)
		buf[i] = s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
	buf[i] = '\0';
}

static void
test_parse(void)
{
	struct host_match	 m, m2;
	struct host_id		 h;
	char			 err[256], buf[300], buf2[300], desc[300];
	const struct pcase	*c;
	size_t			 i;
	int			 rc;

	for (i = 0; i < nitems(pcases); i++) {
		c = &pcases[i];
		printable(c->text, desc, sizeof(desc));
		strcpy(err, "junk");
		rc = host_match_parse(c->text, c->names, &m, err, sizeof(err));
		if (c->rc == 0) {
			ok(rc == 0 && err[0] == '\0', "parse '%s'", desc);
			if (rc != 0)
				diag("%s", err);
			is_str(host_match_format(&m, buf, sizeof(buf)),
			    c->want, "format '%s'", desc);
			/* Canonical: the format parses to the same limit. */
			ok(host_match_parse(buf, true, &m2, err,
			    sizeof(err)) == 0 && m2.kind == m.kind &&
			    m2.prefix == m.prefix &&
			    memcmp(&m2.addr, &m.addr, sizeof(m.addr)) == 0 &&
			    strcmp(m2.name, m.name) == 0 &&
			    strcmp(host_match_format(&m2, buf2, sizeof(buf2)),
			    buf) == 0, "'%s' round trip", buf);
			continue;
		}
		ok(rc == -1, "refuse '%s'", desc);
		if (c->exact)
			is_str(err, c->want, "message for '%s'", desc);
		else if (!ok(strstr(err, c->want) != NULL, "message for '%s'",
		    desc))
			diag("got \"%s\", expected it to contain \"%s\"", err,
			    c->want);
		/* A refused limit admits nobody (fails closed). */
		memset(&h, 0, sizeof(h));
		usbgw_addr_parse("10.0.0.1", &h.addr);
		h.name = "";
		ok(!host_match_test(&m, &h), "refused '%s' admits nobody",
		    desc);
	}
	ok(host_match_parse("10.0.0.1/8", false, &m, NULL, 0) == -1,
	    "no error buffer");
	ok(host_match_parse("10.0.0.1/8", false, &m, err, 8) == -1 &&
	    strcmp(err, "10.0.0.") == 0, "small error buffer: truncated");
	host_match_parse("10.0.0.0/8", false, &m, err, sizeof(err));
	is_str(host_match_format(&m, buf, 3), "10", "format, small buffer");
	host_match_parse("2001:db8:1:2:3:4:5:6", false, &m, err, sizeof(err));
	is_str(host_match_format(&m, buf, 8), "2001:db", "format, truncated");
}

struct tcase {
	const char	*limit;
	const char	*addr;		/* NULL: no host; "": family 0 */
	const char	*name;
	bool		 want;
};

static const struct tcase tcases[] = {
	{ "", NULL, NULL, true },
	{ "", "10.1.2.3", NULL, true },
	{ "10.0.0.0/8", NULL, NULL, false },
	{ "10.0.0.0/8", "", "vdi01", false },
	{ "10.0.0.0/8", "10.255.1.1", NULL, true },
	{ "10.0.0.0/8", "11.0.0.1", NULL, false },
	{ "10.1.2.0/23", "10.1.3.255", NULL, true },
	{ "10.1.2.0/23", "10.1.4.0", NULL, false },
	{ "10.1.2.0/23", "10.1.1.255", NULL, false },
	{ "10.1.2.3", "10.1.2.3", NULL, true },
	{ "10.1.2.3", "10.1.2.4", NULL, false },
	{ "10.1.2.3", "::ffff:10.1.2.3", NULL, true },
	{ "10.1.2.3", "::ffff:10.1.2.4", NULL, false },
	{ "10.1.2.3", "::10.1.2.3", NULL, false },
	{ "10.1.2.3", "::fffe:10.1.2.3", NULL, false },
	{ "0.0.0.0/0", "::ffff:1.2.3.4", NULL, true },
	{ "0.0.0.0/0", "2001:db8::1", NULL, false },
	{ "0.0.0.0/0", "1.2.3.4", NULL, true },
	{ "::ffff:10.1.2.3", "10.1.2.3", NULL, false },
	{ "::ffff:10.1.2.3", "::ffff:10.1.2.3", NULL, true },
	{ "fd00::/8", "fdff::1", NULL, true },
	{ "fd00::/8", "fe00::1", NULL, false },
	{ "fd00::/8", "10.1.2.3", NULL, false },
	{ "fc00::/7", "fd12::1", NULL, true },
	{ "fc00::/7", "fe00::1", NULL, false },
	{ "fd00::1", "fd00::1", NULL, true },
	{ "fd00::1", "fd00::2", NULL, false },
	{ "::/0", "2001:db8::1", NULL, true },
	{ "::/0", "10.1.2.3", NULL, false },
	{ "vdi01", NULL, NULL, false },
	{ "vdi01", "10.1.2.3", NULL, false },
	{ "vdi01", "10.1.2.3", "vdi01", true },
	{ "vdi01", "", "VDI01", true },
	{ "vdi01", "", "vdi01.", true },
	{ "vdi01", "", "vdi01..", false },
	{ "vdi01", "", "vdi010", false },
	{ "vdi01", "", "vdi0", false },
	{ "vdi01", "", "", false },
	{ "vdi01", "", ".", false },
	{ "vdi01.example.org", "", "Vdi01.Example.Org", true },
	{ "vdi01.example.org", "", "vdi01", false },
};

static void
test_test(void)
{
	const struct tcase	*c;
	struct host_match	 m;
	struct host_id		 h;
	char			 err[256];
	size_t			 i;

	for (i = 0; i < nitems(tcases); i++) {
		c = &tcases[i];
		if (host_match_parse(c->limit, true, &m, err,
		    sizeof(err)) == -1)
			abort();
		memset(&h, 0, sizeof(h));
		if (c->addr != NULL && c->addr[0] != '\0' &&
		    usbgw_addr_parse(c->addr, &h.addr) == -1)
			abort();
		h.name = c->name;
		ok(host_match_test(&m, c->addr == NULL ? NULL : &h) == c->want,
		    "'%s' %s %s%s%s", c->limit, c->want ? "admits" : "refuses",
		    c->addr == NULL ? "no host" : c->addr,
		    c->name ? " name " : "", c->name ? c->name : "");
	}
	/* A hand-made limit with an impossible prefix admits nobody. */
	host_match_parse("10.0.0.0/8", true, &m, err, sizeof(err));
	m.prefix = 200;
	usbgw_addr_parse("10.0.0.1", &h.addr);
	ok(!host_match_test(&m, &h), "prefix past the address: no match");
}

/* On addresses, an approval's limit and a rule's to-host agree. */
static void
test_vs_rule(void)
{
	static const char *limits[] = {
		"10.0.0.0/8", "10.1.2.3", "10.1.2.0/23", "0.0.0.0/0",
		"fd00::/8", "::/0", "::ffff:10.1.2.3", "2001:db8::/32",
	};
	static const char *hosts[] = {
		"10.1.2.3", "10.1.3.1", "11.0.0.1", "::ffff:10.1.2.3",
		"::ffff:11.0.0.1", "fd00::1", "2001:db8::5", "::10.1.2.3",
	};
	struct usbgw_identity	 id;
	struct usbgw_context	 ctx;
	struct host_match	 m;
	struct host_id		 h;
	struct rule		*r;
	char			 text[128], err[256];
	size_t			 i, j;
	int			 bad = 0;

	ident(&id, false);
	for (i = 0; i < nitems(limits); i++) {
		snprintf(text, sizeof(text), "allow to-host %s", limits[i]);
		r = P(text);
		if (host_match_parse(limits[i], true, &m, err,
		    sizeof(err)) == -1)
			abort();
		for (j = 0; j < nitems(hosts); j++) {
			memset(&h, 0, sizeof(h));
			memset(&ctx, 0, sizeof(ctx));
			usbgw_addr_parse(hosts[j], &h.addr);
			ctx.host_addr = h.addr;
			if (host_match_test(&m, &h) !=
			    (rule_match_attrs(r, &id, &ctx) == 1)) {
				diag("%s vs %s differ", limits[i], hosts[j]);
				bad++;
			}
		}
		rule_free(r);
	}
	ok(bad == 0, "host_match_test agrees with to-host on %zu pairs",
	    nitems(limits) * nitems(hosts));
}

/*
 * Per-interface verdicts (issue 17): a composite device over two
 * configurations with alternate settings, as the probe lists it.
 */
static const struct iface_verdict composite[] = {
	{ 1, 0, 0, 0x08, 0x06, 0x50, false },	/* storage */
	{ 1, 1, 0, 0x03, 0x01, 0x01, false },	/* keyboard */
	{ 1, 2, 0, 0x02, 0x02, 0x01, false },	/* CDC ACM control */
	{ 1, 3, 0, 0x0a, 0x00, 0x00, false },	/* CDC data, alt 0 */
	{ 1, 3, 1, 0x0a, 0x00, 0x00, false },	/* CDC data, alt 1 */
	{ 2, 0, 0, 0x03, 0x01, 0x01, false },	/* keyboard */
	{ 2, 1, 0, 0x08, 0x06, 0x50, false },	/* storage, BBB */
	{ 2, 1, 1, 0x08, 0x06, 0x62, false },	/* storage, UAS */
};

struct icase {
	const char	*name;
	const char	*admin[NRULES];
	const char	*oper[NRULES];
	struct tappr	 appr[NAPPR];
	bool		 revoked;
	enum verdict	 v;
	const char	*allow;		/* '+'/'-' per composite[]; NULL: niface 0 */
	bool		 none_known;	/* decide with no interface list */
};

#define ID	"id 046d:c52b "
static const struct icase icases[] = {
	{ "no interface-policy: the whole device",
	  .admin = { "allow " ID }, .v = VERDICT_ALLOW, .allow = NULL },
	{ "implicit allow, block storage and keyboards",
	  .admin = { "allow " ID "interface-policy allow { block 08:*:* block 03:01:01 }" },
	  .v = VERDICT_ALLOW, .allow = "--+++---" },
	{ "implicit block, allow CDC",
	  .admin = { "allow " ID "interface-policy block { allow 02:*:* allow 0a:*:* }" },
	  .v = VERDICT_ALLOW, .allow = "--+++---" },
	{ "first match wins",
	  .admin = { "allow " ID "interface-policy block { allow 08:06:62 block 08:*:* allow 08:06:50 }" },
	  .v = VERDICT_ALLOW, .allow = "-------+" },
	{ "index qualifier",
	  .admin = { "allow " ID "interface-policy block { allow 03:01:01 index 0 }" },
	  .v = VERDICT_ALLOW, .allow = "-----+--" },
	{ "configuration qualifier",
	  .admin = { "allow " ID "interface-policy allow { block *:*:* configuration 2 }" },
	  .v = VERDICT_ALLOW, .allow = "+++++---" },
	{ "index and configuration together",
	  .admin = { "allow " ID "interface-policy allow { block 08:*:* index 1 configuration 2 }" },
	  .v = VERDICT_ALLOW, .allow = "++++++--" },
	{ "every interface denied: allow, nothing usable",
	  .admin = { "allow " ID "interface-policy block { allow ff:*:* }" },
	  .v = VERDICT_ALLOW, .allow = "--------" },
	{ "a policy, no interfaces known: nothing usable",
	  .admin = { "allow " ID "interface-policy allow { block ff:*:* }" },
	  .v = VERDICT_ALLOW, .allow = "", .none_known = true },
	{ "operator rule allows under an admin ask's policy",
	  .admin = { "ask " ID "interface-policy allow { block 08:*:* }" },
	  .oper = { "allow " ID },
	  .v = VERDICT_ALLOW, .allow = "-+++++--" },
	{ "operator policy narrows an admin allow",
	  .admin = { "allow " ID "interface-policy allow { block 08:*:* }" },
	  .oper = { "ask " ID "interface-policy allow { block 03:*:* }" },
	  .v = VERDICT_ALLOW, .allow = "--+++---" },
	{ "approval keeps the admin ask rule's policy",
	  .admin = { "ask " ID "interface-policy block { allow 02:*:* allow 0a:*:* }" },
	  .appr = { { .scope = SCOPE_ONCE, .by = "bob" } },
	  .v = VERDICT_ALLOW, .allow = "--+++---" },
	{ "approval keeps the operator ask rule's policy",
	  .oper = { "ask " ID "interface-policy allow { block 08:*:* }" },
	  .appr = { { .scope = SCOPE_ONCE, .by = "bob" } },
	  .v = VERDICT_ALLOW, .allow = "-+++++--" },
	{ "approval without a rule: the whole device",
	  .appr = { { .scope = SCOPE_ONCE, .by = "bob" } },
	  .v = VERDICT_ALLOW, .allow = NULL },
	{ "pending under a policy: the approval's verdicts, nothing allowed",
	  .admin = { "ask " ID "interface-policy allow { block 08:*:* }" },
	  .v = VERDICT_PENDING, .allow = "-+++++--" },
	{ "denied under a policy: nothing allowed",
	  .admin = { "allow " ID "interface-policy allow { block 08:*:* }" },
	  .appr = { { .deny = true, .by = "eve" } },
	  .v = VERDICT_BLOCK, .allow = "" },
	{ "revoked under a policy: nothing allowed",
	  .oper = { "allow " ID "interface-policy allow { block 08:*:* }" },
	  .revoked = true,
	  .v = VERDICT_PENDING, .allow = "-+++++--" },
	{ "admin override of a block: the operator allow rule's policy still narrows",
	  .admin = { "block " ID },
	  .oper = { "allow " ID "interface-policy allow { block 08:*:* }" },
	  .appr = { { .override = true, .scope = SCOPE_ONCE, .by = "root" } },
	  .v = VERDICT_ALLOW, .allow = "-+++++--" },
	{ "a policy of a rule that does not match does nothing",
	  .admin = { "allow id 1234:5678 interface-policy block { allow ff:*:* }", "allow " ID },
	  .v = VERDICT_ALLOW, .allow = NULL },
};

static void
run_icase(const struct icase *c)
{
	struct usbgw_identity	 id;
	struct decision_in	 in;
	struct decision		 d;
	struct approval		 ap[NAPPR];
	size_t			 i, n;
	bool			 all = true, listed = true;
	char			 got[64];

	ident(&id, false);
	memset(&in, 0, sizeof(in));
	in.id = &id;
	in.admin = tier(c->admin, 1);
	in.operator = tier(c->oper, 101);
	in.napprovals = approvals(c->appr, ap);
	in.approvals = ap;
	in.revoked = c->revoked;
	in.now = NOW;
	if (!c->none_known) {
		in.ifaces = composite;
		in.nifaces = nitems(composite);
	}
	decide(&in, &d);
	is_str(verdict_name(d.verdict), verdict_name(c->v), "%s: verdict",
	    c->name);
	if (c->allow == NULL) {
		ok(!d.per_iface && d.niface == 0, "%s: no verdicts", c->name);
		for (i = 0; i < nitems(composite); i++)
			all &= decision_iface_allowed(&d, composite[i].config,
			    composite[i].number, composite[i].alt);
		ok(all, "%s: every interface follows the device", c->name);
	} else if (c->v != VERDICT_ALLOW) {
		n = d.niface < sizeof(got) - 1 ? d.niface : sizeof(got) - 1;
		for (i = 0; i < n; i++)
			got[i] = d.iface[i].allow ? '+' : '-';
		got[n] = '\0';
		is_str(got, c->allow, "%s: verdicts (pending: what an approval "
		    "gives)", c->name);
		for (i = 0; i < nitems(composite); i++)
			all &= !decision_iface_allowed(&d, composite[i].config,
			    composite[i].number, composite[i].alt);
		ok(all, "%s: no interface allowed", c->name);
	} else {
		ok(d.per_iface, "%s: per-interface verdicts", c->name);
		n = d.niface < sizeof(got) - 1 ? d.niface : sizeof(got) - 1;
		for (i = 0; i < n; i++) {
			got[i] = d.iface[i].allow ? '+' : '-';
			listed &= d.iface[i].config == composite[i].config &&
			    d.iface[i].number == composite[i].number &&
			    d.iface[i].alt == composite[i].alt &&
			    d.iface[i].cls == composite[i].cls &&
			    d.iface[i].subcls == composite[i].subcls &&
			    d.iface[i].proto == composite[i].proto;
			all &= decision_iface_allowed(&d, d.iface[i].config,
			    d.iface[i].number, d.iface[i].alt) ==
			    d.iface[i].allow;
		}
		got[n] = '\0';
		is_str(got, c->allow, "%s: verdicts", c->name);
		ok(listed, "%s: every descriptor listed as given", c->name);
		ok(all, "%s: decision_iface_allowed agrees", c->name);
		ok(!decision_iface_allowed(&d, 1, 9, 0) &&
		    !decision_iface_allowed(&d, 3, 0, 0) &&
		    !decision_iface_allowed(&d, 1, 3, 2),
		    "%s: unlisted interfaces denied", c->name);
		if (strchr(c->allow, '+') == NULL)
			ok(strstr(d.why, "every interface denied, nothing "
			    "usable") != NULL, "%s: why says so: %s", c->name,
			    d.why);
	}
	policy_free(in.admin);
	policy_free(in.operator);
}

/* More interface descriptors than a decision holds: the rest denied. */
static void
test_iface_bounds(void)
{
	struct usbgw_identity	 id;
	struct iface_verdict	 many[DECISION_IFACE_MAX + 4];
	struct decision_in	 in;
	struct decision		 d;
	const char		*adm[NRULES] = { "allow interface-policy allow "
				    "{ block 08:*:* }" };
	size_t			 i;

	ident(&id, false);
	memset(many, 0, sizeof(many));
	for (i = 0; i < nitems(many); i++) {
		many[i].config = (uint8_t)(1 + i / 32);
		many[i].number = (uint8_t)(i % 32);
		many[i].cls = 0x03;
	}
	memset(&in, 0, sizeof(in));
	in.id = &id;
	in.admin = tier(adm, 1);
	in.ifaces = many;
	in.nifaces = nitems(many);
	in.now = NOW;
	decide(&in, &d);
	is_int((long long)d.niface, DECISION_IFACE_MAX, "verdicts bounded");
	ok(decision_iface_allowed(&d, 4, 31, 0), "the last listed allowed");
	ok(!decision_iface_allowed(&d, 5, 0, 0), "one past the bound: denied");
	policy_free(in.admin);
}

int
main(void)
{
	size_t	i;

	setenv("TZ", "UTC0", 1);
	tzset();
	for (i = 0; i < nitems(cases); i++)
		run_case(&cases[i]);
	diag("%zu decision cases", nitems(cases));
	test_bounds();
	test_inputs();
	test_names();
	test_parse();
	test_test();
	test_vs_rule();
	for (i = 0; i < nitems(icases); i++)
		run_icase(&icases[i]);
	test_iface_bounds();
	return done_testing();
}
