/*
 * An ordered rule set and its evaluation: rules in order, the first rule
 * whose attributes and condition match decides; no match gives the
 * default target (ask: pending).  Rules are indexed by the vid:pid keys
 * of their id attribute, so a decision only looks at the rules that can
 * apply to the device's vid:pid (plus those without a usable id), in
 * rule order: first-match semantics are unchanged by the index.
 *
 * Also the importer of USBGuard rules.conf files.
 */
#ifndef USBGW_POLICY_H
#define USBGW_POLICY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/identity.h"
#include "policy/rule.h"

struct policy;

struct policy_decision {
	enum rule_target target;
	int64_t		 rule_id;	/* deciding rule, 0: the default */
	const struct rule *rule;	/* ... the rule itself (the policy's), or NULL */
	/*
	 * The earliest instant at which the decision may change with the
	 * clock (time conditions of the rules looked at), or RULE_NEVER.
	 * The daemon re-evaluates then (timer) and gets a new next_change.
	 */
	int64_t		 next_change;
};

struct policy	*policy_new(void);
void		 policy_free(struct policy *);

/* Target when no rule matches; RULE_ASK unless changed. */
void		 policy_set_default(struct policy *, enum rule_target);

/*
 * Rules are identified by the caller's id (the database's rules.id, > 0,
 * unique in the policy).  The policy takes ownership of the rule on
 * success.  Positions are 0-based; a position >= policy_count() appends.
 * Each returns 0, or -1 (duplicate or unknown id, id <= 0).
 */
int		 policy_append(struct policy *, int64_t id, struct rule *);
int		 policy_insert(struct policy *, size_t pos, int64_t id,
		    struct rule *);
int		 policy_remove(struct policy *, int64_t id);
int		 policy_move(struct policy *, int64_t id, size_t pos);
void		 policy_clear(struct policy *);

size_t		 policy_count(const struct policy *);
/* The rule at position pos (NULL if out of range); *id gets its id. */
const struct rule *policy_rule_at(const struct policy *, size_t pos,
		    int64_t *id);
/* Position of rule id, or -1. */
long		 policy_find(const struct policy *, int64_t id);

/*
 * Decide for one device.  ctx may be NULL (no vhci host, no
 * allowed-matches).  now is seconds since the Epoch.  Not const: the
 * index is rebuilt lazily after changes (policy_prepare() does it
 * eagerly).
 */
void		 policy_evaluate(struct policy *, const struct usbgw_identity *,
		    const struct usbgw_context *, int64_t now,
		    struct policy_decision *);
void		 policy_prepare(struct policy *);

/*
 * USBGuard rules.conf import.  Every line is reported: a rule that maps
 * (ours to keep), or a problem (line number and reason; the line is not
 * imported).  Blank and comment lines are skipped.  USBGuard-only
 * attributes (parent-hash, with-connect-type, USBGuard-format hash) make
 * a line unmappable unless IMPORT_DROP_UNMAPPED is given; then they are
 * dropped, the rule is imported, and a warning names them.  Returns 0,
 * or -1 on a read error.
 */
#define IMPORT_DROP_UNMAPPED	0x1
/*
 * Importing never widens a rule silently: an allow rule that lost a
 * USBGuard-only attribute would allow devices USBGuard's rule did not,
 * so it is refused unless IMPORT_ALLOW_WIDER (the operator asked for the
 * wider form); a block or reject rule that lost one blocks more, which
 * IMPORT_DROP_UNMAPPED alone allows.  via-port names a port on every
 * exporter here: with an exporter name it is bound to that exporter
 * (via-exporter NAME added), without one the line is refused.
 */
#define IMPORT_ALLOW_WIDER	0x2

struct import_rule {
	unsigned	 line;
	struct rule	*rule;
	char		 warning[256];	/* "" or what was dropped */
};
struct import_problem {
	unsigned	 line;
	char		 reason[256];
};
struct import_result {
	struct import_rule	*rules;
	size_t			 nrules;
	struct import_problem	*problems;
	size_t			 nproblems;
	unsigned		 lines;
};
int		 policy_import_usbguard(FILE *, unsigned flags,
		    struct import_result *);
int		 policy_import_usbguard_ex(FILE *, unsigned flags,
		    const char *exporter, struct import_result *);
/* Frees the rules that were not taken (set .rule to NULL to take one). */
void		 import_result_free(struct import_result *);

#endif
