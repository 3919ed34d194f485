/*
 * The rule language: USBGuard's syntax, extended to the network
 * (protocol.md, part 3, is the reference).  A rule is parsed from one
 * line of text into an opaque struct rule, printed back in canonical
 * form (parse(print(r)) equals r), and evaluated against a device's
 * identity, the network context and the current time.
 *
 *   allow id 046d:c52b serial "ABC" with-interface 03:*:* via-exporter tc17
 *       to-host vdi01 if localtime(08:00-18:00)
 *
 * Nothing here touches the event loop, the database or the clock: time
 * is always passed in (seconds since the Epoch, interpreted in the
 * process's local time zone, TZ).
 */
#ifndef USBGW_RULE_H
#define USBGW_RULE_H

#include <stddef.h>
#include <stdint.h>

#include "base/identity.h"

#define RULE_TEXT_MAX	16384	/* bytes in one rule's text */
#define RULE_SET_MAX	64	/* values in one { } set */
#define RULE_COND_MAX	16	/* conditions in one if { } set */
#define RULE_IFACE_RULES_MAX 32	/* inner rules of one interface-policy */
#define RULE_NEVER	INT64_MAX	/* "no time-driven change" */

enum rule_target {
	RULE_ALLOW = 0,		/* authorize */
	RULE_BLOCK,		/* keep claimed, refuse */
	RULE_REJECT,		/* block, and release the claim at the exporter */
	RULE_ASK,		/* pending: an operator decides (the default) */
};

struct rule;

/*
 * Parse errors: column is 1-based and counts characters (UTF-8 code
 * points, a tab is one) of the text passed to rule_parse(); msg is the
 * complete message, "column 12: expected vid:pid after 'id', got 'xyz'".
 * On success with RULE_PARSE_USBGUARD, ndropped counts the USBGuard-only
 * attributes that were dropped and msg lists them ("dropped: ...").
 */
struct rule_error {
	int		column;
	unsigned	ndropped;
	char		msg[256];
};

/*
 * RULE_PARSE_USBGUARD: also accept USBGuard attributes that have no
 * meaning here (parent-hash, with-connect-type, and hash values that are
 * not 64 hex digits, i.e. USBGuard's own hash format) and drop them.
 * Used by the rules.conf importer only.
 */
#define RULE_PARSE_USBGUARD	0x1
/*
 * RULE_PARSE_DEVICE: only what a device says of itself -- id, name,
 * manufacturer, serial, hash, with-interface and via-port (the local
 * busid).  via-exporter, to-host, label and an "if" condition are errors
 * at their column.  Used by usbgw-agent's keep-list (protocol.md 1.9.2).
 */
#define RULE_PARSE_DEVICE	0x2

/* Parse one rule (a trailing "# comment" is ignored).  NULL on error. */
struct rule	*rule_parse(const char *text, struct rule_error *err);
struct rule	*rule_parse_ex(const char *text, unsigned flags,
		    struct rule_error *err);
void		 rule_free(struct rule *);

/* Canonical text of the rule, allocated (free() it). */
char		*rule_format(const struct rule *);

/* 1 if both rules are the same rule (structurally), else 0. */
int		 rule_equal(const struct rule *, const struct rule *);

enum rule_target rule_target(const struct rule *);
const char	*rule_target_name(enum rule_target);
/* "allow" -> RULE_ALLOW ...; -1 if unknown. */
int		 rule_target_parse(const char *);

/* The rule's label "..." attribute, or NULL. */
const char	*rule_label(const struct rule *);
/* 1 if the rule has an "if" condition / a to-host attribute. */
int		 rule_has_condition(const struct rule *);
int		 rule_has_to_host(const struct rule *);
int		 rule_has_via_port(const struct rule *);
int		 rule_has_via_exporter(const struct rule *);
/* Number of device/network attributes (label excluded; 0: any device). */
int		 rule_attr_count(const struct rule *);

/*
 * Device attributes only (no condition): 1 if every attribute the rule
 * has matches.  A rule with to-host never matches when ctx is NULL or
 * names no host.  label is not matched.
 */
int		 rule_match_attrs(const struct rule *,
		    const struct usbgw_identity *, const struct usbgw_context *);

/* The rule's condition at time now (1 if it has none). */
int		 rule_match_cond(const struct rule *,
		    const struct usbgw_context *, int64_t now);

/* rule_match_attrs() && rule_match_cond(). */
int		 rule_match(const struct rule *, const struct usbgw_identity *,
		    const struct usbgw_context *, int64_t now);

/*
 * The earliest instant > now at which the rule's condition may change
 * value because of the clock (a localtime/weekday edge, or a change of
 * the UTC offset before one), or RULE_NEVER.  It may be early (the
 * value need not actually change then: evaluate again and ask again),
 * never late.  allowed-matches changes with other devices' state, not
 * with time: the caller re-evaluates when authorizations change.
 */
int64_t		 rule_next_change(const struct rule *, int64_t now);

/*
 * interface-policy IMPLICIT { allow|block CC:SS:PP [index N]
 * [configuration N] ... } (protocol.md part 3): only in allow and ask
 * rules.  rule_iface_allowed() says whether the policy lets one
 * interface descriptor through (the first inner rule matching its class
 * triple, bInterfaceNumber and bConfigurationValue, else the implicit
 * target); 1 for a rule without interface-policy.  The caller combines
 * it with the device's verdict (decision.c).
 */
int		 rule_has_iface_policy(const struct rule *);
int		 rule_iface_allowed(const struct rule *, uint8_t config,
		    uint8_t number, uint8_t cls, uint8_t subcls, uint8_t proto);

/*
 * The vid:pid keys a device must match one of for the rule to apply,
 * for indexing (policy.c).  Returns the number of keys stored (at most
 * max), or -1 if the rule may apply to any vid:pid (no id attribute,
 * none-of, a *:* value, or more than max keys).
 */
struct rule_idkey {
	uint16_t	vid;
	uint16_t	pid;
	uint8_t		any_pid;	/* "vid:*" */
};
int		 rule_id_keys(const struct rule *, struct rule_idkey *,
		    size_t max);

/*
 * A rule matching exactly this device, like USBGuard's allow-device -p:
 * id, serial, name, hash and with-interface equals { the interfaces },
 * plus via-exporter and via-port with these flags, and to-host host if
 * host is not NULL (a name or an address).  NULL if host is invalid.
 */
#define RULE_FROM_ID_EXPORTER	0x1
#define RULE_FROM_ID_PORT	0x2
struct rule	*rule_from_identity(const struct usbgw_identity *,
		    enum rule_target, unsigned flags, const char *host);

#endif
