/*
 * The decision: may this device reach that host?  One pure function of
 *
 *   (the identity the gateway verified, the admin rules, the operator
 *    rules, the device's approvals and revocation, whether its identity
 *    is in question, the asking host's identity, the clock)
 *
 * to (allow | block | reject | pending, what decided it, why, when the
 * answer may change by itself).  No SQL, no globals, no I/O, no clock:
 * everything comes in through struct decision_in.  The daemon feeds it
 * (device.c) and applies its answer; tests/unit/test_decision.c pins it
 * with a table.
 *
 * Precedence (protocol.md part 3, "Precedence"), first row that applies:
 *
 *   1. identity anomaly not acknowledged         -> block    (BY_ANOMALY)
 *   2. first matching admin rule is block/reject -> that     (BY_ADMIN_RULE)
 *        unless an admin's override approval for this host -> allow
 *   3. an operator's denial                      -> block    (BY_DENIAL)
 *   4. first matching operator rule is block     -> block    (BY_OPERATOR_RULE)
 *   5. revoked for this presence                 -> pending  (BY_REVOCATION)
 *   6. first matching admin rule is allow        -> allow    (BY_ADMIN_RULE)
 *   7. an operator's approval for this host      -> allow    (BY_APPROVAL)
 *   8. first matching operator rule is allow     -> allow    (BY_OPERATOR_RULE)
 *   9. first matching admin rule is ask          -> pending  (BY_ADMIN_RULE)
 *  10. nothing                                   -> pending  (BY_DEFAULT)
 *
 * In words: admin rules are authoritative; anyone with the approve
 * privilege may make a device stricter (deny, revoke, a permanent
 * denial) but may only allow what the admin rules leave open.  Only an
 * admin's explicit override (approve --override) allows what an admin
 * rule blocks.
 *
 * Hosts: with host == NULL the question is the device's standing state
 * ("is it allowed for some host?"): approvals count whatever their host
 * limit, rules with to-host do not match.  With a host, approvals and
 * rules must name it (address, CIDR or a verified name).
 */
#ifndef USBGW_DECISION_H
#define USBGW_DECISION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/ctl.h"
#include "base/identity.h"

struct policy;
struct rule;

#define HOST_NAME_MAX_LEN	253	/* a DNS name */

/* Who is asking: the vhci host as the gateway knows it. */
struct host_id {
	struct usbgw_addr	 addr;		/* family 0: unknown */
	const char		*name;		/* verified name, or NULL */
};

/* An approval's host limit: any host, an address or prefix, or a name. */
enum host_match_kind {
	HOST_ANY = 0,
	HOST_ADDR,		/* addr/prefix (a plain address: full prefix) */
	HOST_NAME,		/* a verified name, case-insensitive */
};
struct host_match {
	enum host_match_kind	 kind;
	struct usbgw_addr	 addr;
	unsigned		 prefix;	/* bits */
	char			 name[HOST_NAME_MAX_LEN + 1];
};

/*
 * Parse an approval's or rule's host limit: "" or NULL (any host), an
 * IPv4/IPv6 address, a CIDR prefix ("10.1.0.0/16", "fd00::/8"), or a
 * DNS name ("vdi01", "vdi01.example.org").  Refuses what could never
 * match (a prefix longer than the address, host bits set under a
 * prefix, a name with characters DNS does not allow, a name when
 * names_checked is false: nothing verifies names then) with a message
 * in err.  Returns 0 or -1.
 */
int	host_match_parse(const char *text, bool names_checked,
	    struct host_match *out, char *err, size_t errlen);
/* Canonical text ("" for any host). */
char	*host_match_format(const struct host_match *, char *buf, size_t len);
/* Does the limit admit this host?  HOST_ANY admits NULL. */
bool	host_match_test(const struct host_match *, const struct host_id *);

/* One active operator decision of this device, short of a rule. */
struct approval {
	int64_t			 id;		/* approvals row */
	bool			 deny;
	bool			 override;	/* admin: beats an admin block */
	enum approve_scope	 scope;		/* ONCE, FOR, UNTIL */
	int64_t			 expires_at;	/* 0: no expiry */
	struct host_match	 to;
	struct actor		 by;
};

enum verdict {
	VERDICT_PENDING = 0,
	VERDICT_ALLOW,
	VERDICT_BLOCK,
	VERDICT_REJECT,
};

enum decided_by {
	BY_DEFAULT = 0,
	BY_ANOMALY,
	BY_ADMIN_RULE,
	BY_OPERATOR_RULE,
	BY_DENIAL,
	BY_REVOCATION,
	BY_APPROVAL,
};

/*
 * Per-interface verdicts (issue 17, protocol.md part 3): one for every
 * interface descriptor (configuration value, bInterfaceNumber,
 * bAlternateSetting) of every configuration the probe read.  niface 0:
 * the decision is for the whole device (no interface-policy applies),
 * every interface shares its verdict.
 *
 * Which interface-policies apply to an allowed decision: the one of the
 * first matching admin rule and the one of the first matching operator
 * rule, whatever row decided (an approval included: approving a device
 * whose rule says "interface-policy" grants what the policy lets
 * through, never more).  An interface is allowed only if every policy
 * that applies allows it (admin rules are authoritative; an operator
 * rule may only narrow).  A pending decision lists the verdicts an
 * approval would give (for operators to see before they approve);
 * decision_iface_allowed() still allows nothing of it.  Block and
 * reject decisions have none.
 */
#define DECISION_IFACE_MAX	128
struct iface_verdict {
	uint8_t			 config;	/* bConfigurationValue */
	uint8_t			 number;	/* bInterfaceNumber */
	uint8_t			 alt;		/* bAlternateSetting */
	uint8_t			 cls, subcls, proto;
	bool			 allow;
};

struct decision_in {
	const struct usbgw_identity	*id;
	struct policy			*admin;		/* may be NULL: empty */
	struct policy			*operator;	/* may be NULL: empty */
	const struct approval		*approvals;	/* active, any order */
	size_t				 napprovals;
	bool				 revoked;
	bool				 anomaly;
	const char			*anomaly_why;	/* for the reason */
	const struct host_id		*host;		/* NULL: standing state */
	int64_t				 now;
	/*
	 * Every interface descriptor of the device as the probe read it
	 * (every configuration, every alternate setting; .allow ignored),
	 * for a deciding rule's interface-policy.  At most
	 * DECISION_IFACE_MAX count; NULL/0: none known (an interface-policy
	 * then allows no interface).
	 */
	const struct iface_verdict	*ifaces;
	size_t				 nifaces;
	/* allowed-matches(...) in rule conditions; NULL: false */
	int				(*allowed_matches)(void *,
					    const struct rule *);
	void				*arg;
};

struct decision {
	enum verdict		 verdict;
	enum decided_by		 by;
	int64_t			 rule_id;	/* BY_*_RULE */
	int64_t			 approval_id;	/* BY_APPROVAL, BY_DENIAL */
	struct actor		 actor;		/* rule, operator or system */
	char			 why[192];
	/* The earliest time the answer may change with the clock, or
	 * RULE_NEVER: decide again then (early is harmless, never late). */
	int64_t			 recheck_at;
	/*
	 * per_iface: an interface-policy applies (the allowed decision's
	 * rules, protocol.md part 3 "Interface policy"); then iface[] lists
	 * the verdicts and an empty list allows no interface.
	 */
	bool			 per_iface;
	size_t			 niface;
	struct iface_verdict	 iface[DECISION_IFACE_MAX];
};

void		 decide(const struct decision_in *, struct decision *);
const char	*verdict_name(enum verdict);
/*
 * May the host use this interface (configuration value, interface
 * number, alternate setting)?  Only an allowed decision allows anything;
 * with niface 0 every interface follows the device; with verdicts, an
 * interface descriptor the decision does not list is denied (fail
 * closed: nobody decided on it).
 */
bool		 decision_iface_allowed(const struct decision *, uint8_t config,
		    uint8_t number, uint8_t alt);
const char	*decided_by_name(enum decided_by);

#endif
