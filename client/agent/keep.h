/*
 * The keep-list (protocol.md 1.9.2): which devices stay with the thin
 * client and which the agent offers to its gateway.  An ordered list of
 * rules in the project's rule language (rule.h), each "keep-local RULE"
 * or "export RULE" without its target; the first match wins; no match
 * means export.  Only what a device says of itself may appear in a rule
 * (id, name, manufacturer, serial, hash, with-interface, via-port: the
 * local busid, in identity.exporter_busid).  The same list type holds
 * the no-reset rules (every entry "local": a match means "do not reset").
 *
 * A pure function of the identity and the rules: no loop, no clock, no
 * I/O, so unit tests pin every case (tests/unit/test_agent_keep.c).
 */
#ifndef USBGW_AGENT_KEEP_H
#define USBGW_AGENT_KEEP_H

#include <stdbool.h>
#include <stddef.h>

#include "base/identity.h"
#include "policy/rule.h"

#define KEEP_MAX_RULES	256	/* per list */

struct keep_list;

struct keep_list *keep_list_new(void);
void		 keep_list_free(struct keep_list *);	/* NULL is fine */

/*
 * Append "keep-local TEXT" (local true) or "export TEXT" (local false);
 * line: the config line (0: built in).  Returns 0, or -1 with err filled
 * (err->column counts characters of TEXT, 1-based; err->msg has no
 * "column N:" prefix).
 */
int		 keep_list_add(struct keep_list *, bool local, const char *text,
		    int line, struct rule_error *err);
size_t		 keep_list_len(const struct keep_list *);

/* The built-in keep-list of protocol.md 1.9.2, appended with line 0:
 *	export     with-interface match-all { 03:00:* }
 *	keep-local with-interface match-all { 03:01:01 03:01:02 03:00:* }
 *	keep-local with-interface match-all { 09:*:* }             */
void		 keep_list_add_defaults(struct keep_list *);
/* The built-in no-reset list (usbredirhost's reset blacklist). */
void		 keep_noreset_add_defaults(struct keep_list *);

/*
 * Does the device stay local?  Hubs (device class 9, or a hub
 * interface) always do, whatever the list says (*ruleno 0).  Otherwise
 * the first matching rule decides (*ruleno: its line, 0 for a built-in
 * one), and no match exports (*ruleno -1).  ruleno may be NULL.
 */
bool		 keep_local(const struct keep_list *,
		    const struct usbgw_identity *, int *ruleno);

/* Does any rule of a no-reset list match? */
bool		 keep_no_reset(const struct keep_list *,
		    const struct usbgw_identity *);

#endif
