/*
 * Rule language: parser errors (exact messages), canonical printing,
 * parse/print round trip, rules from identities, index keys, and the
 * time conditions with their next change (including DST).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "policy/rule.h"
#include "tap.h"
#include "base/util.h"

static const struct {
	const char	*text;
	const char	*error;
} bad[] = {
	/* interface-policy (issue 17) */
	{ "allow interface-policy",
	    "column 23: expected implicit target 'allow' or 'block' after 'interface-policy', got end of rule" },
	{ "allow interface-policy reject { block 08:*:* }",
	    "column 24: expected implicit target 'allow' or 'block' after 'interface-policy', got 'reject'" },
	{ "allow interface-policy allow block 08:*:*",
	    "column 30: expected '{' after 'interface-policy allow', got 'block'" },
	{ "allow interface-policy allow { }",
	    "column 32: empty interface-policy set (expected 'allow' or 'block' rules)" },
	{ "allow interface-policy allow { block 08:*:*",
	    "column 44: expected 'allow', 'block' or '}' in interface-policy, got end of rule" },
	{ "allow interface-policy allow { reject 08:*:* }",
	    "column 32: expected 'allow', 'block' or '}' in interface-policy, got 'reject'" },
	{ "allow interface-policy allow { block 08 }",
	    "column 38: expected cc:ss:pp after 'block', got '08'" },
	{ "allow interface-policy allow { block *:01:* }",
	    "column 38: '*:01:*': the interface class cannot be '*'" },
	{ "allow interface-policy allow { block 08:*:50 }",
	    "column 38: '08:*:50': the protocol must be '*' when the subclass is '*'" },
	{ "allow interface-policy allow { block 08:*:* index }",
	    "column 51: expected an interface number 0..255 after 'index', got '}'" },
	{ "allow interface-policy allow { block 08:*:* index 256 }",
	    "column 51: expected an interface number 0..255 after 'index', got '256'" },
	{ "allow interface-policy allow { block 08:*:* index -1 }",
	    "column 51: expected an interface number 0..255 after 'index', got '-1'" },
	{ "allow interface-policy allow { block 08:*:* configuration 0 }",
	    "column 59: expected a configuration value 1..255 after 'configuration', got '0'" },
	{ "allow interface-policy allow { block 08:*:* index 1 index 2 }",
	    "column 53: duplicate 'index' in this interface rule" },
	{ "allow interface-policy allow { block 08:*:* configuration 1 configuration 1 }",
	    "column 61: duplicate 'configuration' in this interface rule" },
	{ "block id 1234:5678 interface-policy allow { block 08:*:* }",
	    "column 20: 'interface-policy' only in an allow or ask rule (a block rule refuses the whole device)" },
	{ "reject interface-policy allow { block 08:*:* }",
	    "column 8: 'interface-policy' only in an allow or ask rule (a reject rule refuses the whole device)" },
	{ "allow interface-policy allow { block 08:*:* } interface-policy block { allow 03:*:* }",
	    "column 47: duplicate attribute 'interface-policy'" },
	{ "allow if allowed-matches(interface-policy allow { block 08:*:* })",
	    "column 26: 'interface-policy' is not allowed in an allowed-matches query" },
	{ "",
	    "column 1: expected target (allow, block, reject or ask), got end of rule" },
	{ "   ",
	    "column 4: expected target (allow, block, reject or ask), got end of rule" },
	{ "# comment only",
	    "column 1: expected target (allow, block, reject or ask), got end of rule" },
	{ "permit id 1234:5678",
	    "column 1: expected target (allow, block, reject or ask), got 'permit'" },
	{ "match id 1234:5678",
	    "column 1: target 'match' is not supported (allow, block, reject or ask)" },
	{ "device id 1234:5678",
	    "column 1: target 'device' is not supported (allow, block, reject or ask)" },
	{ "\"allow\"",
	    "column 1: expected target (allow, block, reject or ask), got '\"allow\"'" },
	{ "{ allow }",
	    "column 1: expected target (allow, block, reject or ask), got '{'" },
	{ "allow foo \"x\"",
	    "column 7: expected attribute name, got 'foo'" },
	{ "allow parent-hash \"abc\"",
	    "column 7: attribute 'parent-hash' is not supported by usbgw" },
	{ "allow with-connect-type \"hotplug\"",
	    "column 7: attribute 'with-connect-type' is not supported by usbgw" },
	{ "allow id 1234:5678 id 1234:5678",
	    "column 20: duplicate attribute 'id'" },
	{ "allow id",
	    "column 9: expected vid:pid after 'id', got end of rule" },
	{ "allow id xyz",
	    "column 10: expected vid:pid after 'id', got 'xyz'" },
	{ "allow id 12345:1",
	    "column 10: expected vid:pid after 'id', got '12345:1'" },
	{ "allow id 1234:56789",
	    "column 10: expected vid:pid after 'id', got '1234:56789'" },
	{ "allow id 1234",
	    "column 10: expected vid:pid after 'id', got '1234'" },
	{ "allow id 1234:5678:9",
	    "column 10: expected vid:pid after 'id', got '1234:5678:9'" },
	{ "allow id g234:5678",
	    "column 10: expected vid:pid after 'id', got 'g234:5678'" },
	{ "allow id *:1234",
	    "column 10: '*:1234': a wildcard vendor needs a wildcard product ('*:*')" },
	{ "allow id \"1234:5678\"",
	    "column 10: expected vid:pid after 'id', got '\"1234:5678\"'" },
	{ "allow 1050:zz11",
	    "column 7: expected vid:pid after 'allow', got '1050:zz11'" },
	{ "allow id one-of 1234:5678",
	    "column 17: expected '{' after 'one-of', got '1234:5678'" },
	{ "allow id one-of { 1234:5678",
	    "column 28: expected vid:pid or '}' in 'id' set, got end of rule" },
	{ "allow id one-of { 1234:5678 zz }",
	    "column 29: expected vid:pid in 'id' set, got 'zz'" },
	{ "allow id { }",
	    "column 12: empty set for 'id'" },
	{ "allow id { 1234:5678 abcd:ef01 }",
	    "column 10: 'id' has one value per device: a set of 2 values with 'equals' can never match (use one-of)" },
	{ "allow id equals-ordered { 1234:5678 abcd:ef01 }",
	    "column 10: 'id' has one value per device: a set of 2 values with 'equals-ordered' can never match (use one-of)" },
	{ "allow id all-off { 1234:5678 }",
	    "column 10: expected vid:pid after 'id', got 'all-off'" },
	{ "allow serial abc",
	    "column 14: expected quoted string after 'serial', got 'abc'" },
	{ "allow serial \"abc",
	    "column 14: unterminated string" },
	{ "allow serial \"a\\qb\"",
	    "column 16: invalid escape '\\q' in string" },
	{ "allow serial \"a\\x00b\"",
	    "column 16: NUL byte (\\x00) not allowed in string" },
	{ "allow serial \"a\\x4\"",
	    "column 16: expected two hex digits after '\\x' in string" },
	{ "allow serial \"tab\there\"",
	    "column 18: control character 0x09 in string (write \\x09)" },
	{ "allow serial \"0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789\"",
	    "column 14: string longer than 127 bytes" },
	{ "allow name \"ok\" serial \"x\" name \"y\"",
	    "column 28: duplicate attribute 'name'" },
	{ "allow hash \"abc\"",
	    "column 12: expected quoted SHA-256 (64 hex digits) after 'hash', got '\"abc\"'" },
	{ "allow hash 044b5e168d40ee0245478416caf3d998",
	    "column 12: expected quoted SHA-256 (64 hex digits) after 'hash', got '044b5e168d40ee0245478416caf3d998'" },
	{ "allow via-port 1-2",
	    "column 16: expected quoted string after 'via-port', got '1-2'" },
	{ "allow via-exporter",
	    "column 19: expected exporter name after 'via-exporter', got end of rule" },
	{ "allow via-exporter a/b",
	    "column 20: expected exporter name after 'via-exporter', got 'a/b'" },
	{ "allow via-exporter \"\"",
	    "column 20: expected exporter name after 'via-exporter', got '\"\"'" },
	{ "allow via-exporter abcdefghijabcdefghijabcdefghijabc",
	    "column 20: exporter name longer than 31 bytes" },
	{ "allow with-interface 03:01",
	    "column 22: expected cc:ss:pp after 'with-interface', got '03:01'" },
	{ "allow with-interface *:*:*",
	    "column 22: '*:*:*': the interface class cannot be '*'" },
	{ "allow with-interface 03:*:01",
	    "column 22: '03:*:01': the protocol must be '*' when the subclass is '*'" },
	{ "allow with-interface 3:01:01",
	    "column 22: expected cc:ss:pp after 'with-interface', got '3:01:01'" },
	{ "allow with-interface one-of { 03:01:01 08:*:* xx }",
	    "column 47: expected cc:ss:pp in 'with-interface' set, got 'xx'" },
	{ "allow to-host",
	    "column 14: expected host name or address after 'to-host', got end of rule" },
	{ "allow to-host 10.1.0.0/8",
	    "column 15: host bits set in '10.1.0.0/8' (the network is 10.0.0.0/8)" },
	{ "allow to-host 10.0.0.256",
	    "column 15: invalid IPv4 address '10.0.0.256'" },
	{ "allow to-host 10.0.0.0/33",
	    "column 15: prefix length must be 0-32 in '10.0.0.0/33'" },
	{ "allow to-host fe80::zz",
	    "column 15: invalid IPv6 address 'fe80::zz'" },
	{ "allow to-host fd00::1/64",
	    "column 15: host bits set in 'fd00::1/64' (the network is fd00::/64)" },
	{ "allow to-host a+b",
	    "column 15: expected host name or address after 'to-host', got 'a+b'" },
	{ "allow to-host { vdi01 vdi02 }",
	    "column 15: 'to-host' has one value per device: a set of 2 values with 'equals' can never match (use one-of)" },
	{ "allow label",
	    "column 12: expected quoted string after 'label', got end of rule" },
	{ "allow if",
	    "column 9: expected condition after 'if', got end of rule" },
	{ "allow if foo",
	    "column 10: expected condition (localtime, weekday, allowed-matches, true or false), got 'foo'" },
	{ "allow if \"true\"",
	    "column 10: expected condition (localtime, weekday, allowed-matches, true or false), got '\"true\"'" },
	{ "allow if random(0.1666)",
	    "column 10: condition 'random' is not supported by usbgw" },
	{ "allow if rule-applied",
	    "column 10: condition 'rule-applied' is not supported by usbgw" },
	{ "allow if localtime(25:00)",
	    "column 20: expected time range HH:MM[:SS][-HH:MM[:SS]] in 'localtime()', got '25:00'" },
	{ "allow if localtime(08:00-18:60)",
	    "column 20: expected time range HH:MM[:SS][-HH:MM[:SS]] in 'localtime()', got '08:00-18:60'" },
	{ "allow if localtime(8-18)",
	    "column 20: expected time range HH:MM[:SS][-HH:MM[:SS]] in 'localtime()', got '8-18'" },
	{ "allow if localtime",
	    "column 19: expected '(' after 'localtime'" },
	{ "allow if true(1)",
	    "column 14: condition 'true' takes no argument" },
	{ "allow if weekday(xyz)",
	    "column 18: expected days like mon-fri,sun in 'weekday()', got 'xyz'" },
	{ "allow if weekday(mon-)",
	    "column 18: expected days like mon-fri,sun in 'weekday()', got 'mon-'" },
	{ "allow if weekday()",
	    "column 18: expected days like mon-fri,sun in 'weekday()', got ''" },
	{ "allow if match-all { true }",
	    "column 10: 'match-all' cannot combine conditions (use all-of, one-of or none-of)" },
	{ "allow if one-of true",
	    "column 17: expected '{' after 'one-of', got 'true'" },
	{ "allow if { }",
	    "column 12: empty set for 'if'" },
	{ "allow if { true",
	    "column 16: expected condition or '}' in 'if' set, got end of rule" },
	{ "allow if allowed-matches(if true)",
	    "column 26: 'if' is not allowed in an allowed-matches query" },
	{ "allow if allowed-matches(id zz)",
	    "column 29: expected vid:pid after 'id', got 'zz'" },
	{ "allow if allowed-matches(allow id 1234:5678)",
	    "column 26: expected attribute name, got 'allow'" },
	{ "allow if localtime(08:00-18:00)x",
	    "column 32: unexpected 'x' after ')'" },
	{ "allow if localtime(08:00-18:00",
	    "column 19: missing ')' for this '('" },
	{ "allow if true if false",
	    "column 15: duplicate attribute 'if'" },
	{ "allow if !",
	    "column 10: expected condition (localtime, weekday, allowed-matches, true or false), got '!'" },
	{ "allow if TRUE",
	    "column 10: expected condition (localtime, weekday, allowed-matches, true or false), got 'TRUE'" },
	{ "allow } ",
	    "column 7: expected attribute name, got '}'" },
	{ "allow id 1234:5678 }",
	    "column 20: expected attribute name, got '}'" },
	{ "allow id 1234:5678 { ",
	    "column 20: expected attribute name, got '{'" },
	{ "allow serial \"\xc3\xa9" "\" foo",
	    "column 18: expected attribute name, got 'foo'" },
	{ "allow id 1234:5678 \t bogus",
	    "column 22: expected attribute name, got 'bogus'" },
	{ "allow \"\xc3\xa9" "\" id 1:1",
	    "column 7: expected attribute name, got '\"\xc3\xa9" "\"'" },
};

static const struct {
	const char	*text;
	const char	*canonical;
} good[] = {
	{ "allow",
	    "allow" },
	{ "block",
	    "block" },
	{ "reject",
	    "reject" },
	{ "ask",
	    "ask" },
	{ "allow id 046d:c52b serial \"ABC\" with-interface 03:*:* via-exporter tc17 to-host vdi01",
	    "allow id 046d:c52b serial \"ABC\" via-exporter tc17 with-interface 03:*:* to-host vdi01" },
	{ "block with-interface one-of { 08:*:* 06:*:* }",
	    "block with-interface one-of { 08:*:* 06:*:* }" },
	{ "allow 1050:0011 name \"Yubico Yubikey II\" serial \"0001234567\" via-port \"1-2\"",
	    "allow id 1050:0011 name \"Yubico Yubikey II\" serial \"0001234567\" via-port \"1-2\"" },
	{ "reject via-port \"1-2\"",
	    "reject via-port \"1-2\"" },
	{ "allow with-interface equals { 08:*:* }",
	    "allow with-interface 08:*:*" },
	{ "reject with-interface all-of { 08:*:* 03:00:* }",
	    "reject with-interface all-of { 08:*:* 03:00:* }" },
	{ "reject with-interface all-of { 08:*:* e0:*:* }",
	    "reject with-interface all-of { 08:*:* e0:*:* }" },
	{ "allow with-interface one-of { 03:00:01 03:01:01 } if !allowed-matches(with-interface one-of { 03:00:01 03:01:01 })",
	    "allow with-interface one-of { 03:00:01 03:01:01 } if !allowed-matches(with-interface one-of { 03:00:01 03:01:01 })" },
	{ "allow id 1234:5678 if localtime(08:00-18:00)",
	    "allow id 1234:5678 if localtime(08:00-18:00)" },
	{ "allow id 1234:* if { localtime(08:00-12:00) weekday(mon-fri) }",
	    "allow id 1234:* if { localtime(08:00-12:00) weekday(mon-fri) }" },
	{ "allow id 1234:* if one-of { localtime(8:00-12:00:30) weekday(sat,sun,mon,fri) !true }",
	    "allow id 1234:* if one-of { localtime(08:00-12:00:30) weekday(mon,fri-sun) !true }" },
	{ "allow if none-of { false weekday(sun) }",
	    "allow if none-of { false weekday(sun) }" },
	{ "allow if equals-ordered { true true }",
	    "allow if equals-ordered { true true }" },
	{ "allow if all-of { localtime(22:00-06:00) }",
	    "allow if all-of { localtime(22:00-06:00) }" },
	{ "allow if localtime(07:30)",
	    "allow if localtime(07:30)" },
	{ "allow if localtime(07:30-07:30)",
	    "allow if localtime(07:30)" },
	{ "allow if weekday(fri-mon)",
	    "allow if weekday(mon,fri-sun)" },
	{ "allow if weekday(mon,tue,wed,thu,fri,sat,sun)",
	    "allow if weekday(mon-sun)" },
	{ "allow if allowed-matches()",
	    "allow if allowed-matches()" },
	{ "allow to-host one-of { 10.0.0.0/8 fd00::/8 vdi* \"equals\" ::ffff:1.2.3.4 }",
	    "allow to-host one-of { 10.0.0.0/8 fd00::/8 vdi* \"equals\" ::ffff:1.2.3.4 }" },
	{ "allow to-host 192.168.1.7",
	    "allow to-host 192.168.1.7" },
	{ "allow to-host 192.168.1.7/32",
	    "allow to-host 192.168.1.7" },
	{ "allow to-host \"vdi01.example.org\"",
	    "allow to-host vdi01.example.org" },
	{ "allow to-host 2001:DB8:0:0::1",
	    "allow to-host 2001:db8::1" },
	{ "allow to-host none-of { 0.0.0.0/0 }",
	    "allow to-host none-of { 0.0.0.0/0 }" },
	{ "allow id {1234:5678}",
	    "allow id 1234:5678" },
	{ "allow id { 1234:5678 }",
	    "allow id 1234:5678" },
	{ "allow id one-of { 1234:5678 ABCD:EF01 }",
	    "allow id one-of { 1234:5678 abcd:ef01 }" },
	{ "allow id all-of { 1234:* 1234:5678 }",
	    "allow id all-of { 1234:* 1234:5678 }" },
	{ "allow id none-of { 1234:5678 }",
	    "allow id none-of { 1234:5678 }" },
	{ "allow id match-all { 1234:* }",
	    "allow id match-all { 1234:* }" },
	{ "allow id *:*",
	    "allow id *:*" },
	{ "allow id 1234:*",
	    "allow id 1234:*" },
	{ "allow name \"\\xff\"",
	    "allow name \"\\xff\"" },
	{ "allow serial \"\" name \"quote \\\" backslash \\\\ tab \\t nl \\n\"",
	    "allow name \"quote \\\" backslash \\\\ tab \\x09 nl \\x0a\" serial \"\"" },
	{ "allow serial \"\xc3\xa9" "\" name \"\\xc3\\xa9\\x01\"",
	    "allow name \"\xc3\xa9" "\\x01\" serial \"\xc3\xa9" "\"" },
	{ "allow hash \"044B5E168D40EE0245478416CAF3D998044b5e168d40ee0245478416caf3d998\"",
	    "allow hash \"044b5e168d40ee0245478416caf3d998044b5e168d40ee0245478416caf3d998\"" },
	{ "allow label \"my label\" via-exporter \"my exporter\"",
	    "allow via-exporter \"my exporter\" label \"my label\"" },
	{ "allow via-exporter one-of { tc* \"one-of\" tc_17.lab }",
	    "allow via-exporter one-of { tc* \"one-of\" tc_17.lab }" },
	{ "allow # comment",
	    "allow" },
	{ "\tallow\tid\t1234:5678\t",
	    "allow id 1234:5678" },
	{ "allow manufacturer \"Logitech\" name \"USB Receiver\"",
	    "allow name \"USB Receiver\" manufacturer \"Logitech\"" },
	{ "allow with-interface equals-ordered { 03:01:01 03:01:02 }",
	    "allow with-interface equals-ordered { 03:01:01 03:01:02 }" },
	{ "allow with-interface match-all { 03:*:* 08:06:50 }",
	    "allow with-interface match-all { 03:*:* 08:06:50 }" },
	{ "allow with-interface none-of { e0:*:* 02:*:* 0a:*:* }",
	    "allow with-interface none-of { e0:*:* 02:*:* 0a:*:* }" },
	{ "block id 1234:5678 serial \"x\" with-interface 08:06:50 via-port \"1-1.2\" via-exporter tc17 to-host vdi01 label \"l\" if !localtime(00:00-06:00)",
	    "block id 1234:5678 serial \"x\" via-port \"1-1.2\" via-exporter tc17 with-interface 08:06:50 to-host vdi01 label \"l\" if !localtime(00:00-06:00)" },
	{ "ask id 1234:5678",
	    "ask id 1234:5678" },
	{ "allow if !allowed-matches(id 1234:5678 serial \"a b\" with-interface one-of { 03:*:* })",
	    "allow if !allowed-matches(id 1234:5678 serial \"a b\" with-interface one-of { 03:*:* })" },
	/* interface-policy (issue 17) */
	{ "allow id 1d6b:0104 interface-policy allow { block 08:*:* block 03:01:01 }",
	    "allow id 1d6b:0104 interface-policy allow { block 08:*:* block 03:01:01 }" },
	{ "allow id 1d6b:0104 interface-policy block { allow 02:*:* allow 0a:*:* }",
	    "allow id 1d6b:0104 interface-policy block { allow 02:*:* allow 0a:*:* }" },
	{ "allow interface-policy block {allow 03:01:01 configuration 2 index 1} id 1d6b:0104 if weekday(mon)",
	    "allow id 1d6b:0104 interface-policy block { allow 03:01:01 index 1 configuration 2 } if weekday(mon)" },
	{ "ask id 1d6b:0104 interface-policy block { allow *:*:* index 0 block 0A:*:* }",
	    "ask id 1d6b:0104 interface-policy block { allow *:*:* index 0 block 0a:*:* }" },
	{ "allow interface-policy allow { block 08:06:* index 255 configuration 255 } label \"x\"",
	    "allow label \"x\" interface-policy allow { block 08:06:* index 255 configuration 255 }" },
	{ "allow serial \"'single' \\' \\a\\b\\f\\r\\v\"",
	    "allow serial \"'single' ' \\x07\\x08\\x0c\\x0d\\x0b\"" },
};

static void
test_bad(void)
{
	struct rule_error	 err;
	struct rule		*r;
	size_t			 i;
	char			 prefix[32];

	for (i = 0; i < nitems(bad); i++) {
		r = rule_parse(bad[i].text, &err);
		ok(r == NULL, "malformed %zu refused: %s", i, bad[i].text);
		is_str(err.msg, bad[i].error, "malformed %zu: exact error", i);
		snprintf(prefix, sizeof(prefix), "column %d: ", err.column);
		ok(strncmp(err.msg, prefix, strlen(prefix)) == 0,
		    "malformed %zu: column field agrees with message", i);
		rule_free(r);
	}
	ok(nitems(bad) >= 50, "%zu malformed rules in the suite", nitems(bad));
}

/* parse(text) prints as canonical; parse(print) is the same rule. */
static void
roundtrip(const char *text, const char *canonical, const char *what)
{
	struct rule_error	 err;
	struct rule		*r, *r2;
	char			*s, *s2;

	r = rule_parse(text, &err);
	if (!ok(r != NULL, "%s parses: %s", what, text)) {
		diag("error: %s", err.msg);
		return;
	}
	s = rule_format(r);
	if (canonical != NULL)
		is_str(s, canonical, "%s canonical form", what);
	r2 = rule_parse(s, &err);
	ok(r2 != NULL && rule_equal(r, r2), "%s: parse(print(r)) == r", what);
	if (r2 != NULL) {
		s2 = rule_format(r2);
		is_str(s2, s, "%s: print is stable", what);
		free(s2);
	}
	free(s);
	rule_free(r);
	rule_free(r2);
}

static void
test_good(void)
{
	size_t	i;
	char	what[32];

	for (i = 0; i < nitems(good); i++) {
		snprintf(what, sizeof(what), "rule %zu", i);
		roundtrip(good[i].text, good[i].canonical, what);
	}
	/* Every malformed rule's valid prefix is not a concern; but every
	 * canonical form is itself in canonical form. */
	for (i = 0; i < nitems(good); i++) {
		snprintf(what, sizeof(what), "canonical %zu", i);
		roundtrip(good[i].canonical, good[i].canonical, what);
	}
}

static void
test_limits(void)
{
	struct rule_error	 err;
	struct rule		*r;
	char			*buf;
	size_t			 i, off;

	buf = xmalloc(RULE_TEXT_MAX + 64);
	memset(buf, ' ', RULE_TEXT_MAX + 10);
	memcpy(buf, "allow", 5);
	buf[RULE_TEXT_MAX + 10] = '\0';
	r = rule_parse(buf, &err);
	ok(r == NULL, "rule longer than RULE_TEXT_MAX refused");
	is_str(err.msg, "column 1: rule longer than 16384 bytes", "its error");
	rule_free(r);

	off = (size_t)sprintf(buf, "allow id one-of {");
	for (i = 0; i < RULE_SET_MAX + 1; i++)
		off += (size_t)sprintf(buf + off, " %04zx:1234", i);
	sprintf(buf + off, " }");
	r = rule_parse(buf, &err);
	ok(r == NULL, "set of %d values refused", RULE_SET_MAX + 1);
	is_str(err.msg, "column 659: too many values in set for 'id' "
	    "(at most 64)", "its error");
	rule_free(r);
	/* Exactly the maximum is fine. */
	off = (size_t)sprintf(buf, "allow id one-of {");
	for (i = 0; i < RULE_SET_MAX; i++)
		off += (size_t)sprintf(buf + off, " %04zx:1234", i);
	sprintf(buf + off, " }");
	roundtrip(buf, buf, "64 values");

	off = (size_t)sprintf(buf, "allow if one-of {");
	for (i = 0; i < RULE_COND_MAX + 1; i++)
		off += (size_t)sprintf(buf + off, " true");
	sprintf(buf + off, " }");
	r = rule_parse(buf, &err);
	ok(r == NULL, "%d conditions refused", RULE_COND_MAX + 1);
	is_str(err.msg, "column 99: too many conditions in set (at most 16)",
	    "its error");
	rule_free(r);

	/* A 127-byte string is the maximum. */
	off = (size_t)sprintf(buf, "allow serial \"");
	memset(buf + off, 'x', 127);
	sprintf(buf + off + 127, "\"");
	roundtrip(buf, buf, "127-byte string");
	free(buf);
}

static void
test_equal(void)
{
	static const char *const pairs[][2] = {
		{ "allow id 1234:5678", "block id 1234:5678" },
		{ "allow id 1234:5678", "allow id 1234:5679" },
		{ "allow id 1234:5678", "allow id 1234:*" },
		{ "allow id one-of { 1234:5678 }", "allow id 1234:5678" },
		{ "allow id one-of { 0001:0001 0002:0002 }",
		    "allow id one-of { 0002:0002 0001:0001 }" },
		{ "allow serial \"a\"", "allow serial \"A\"" },
		{ "allow serial \"a\"", "allow name \"a\"" },
		{ "allow to-host 10.0.0.0/8", "allow to-host 10.0.0.0/16" },
		{ "allow to-host vdi", "allow to-host VDI" },
		{ "allow if true", "allow if !true" },
		{ "allow if true", "allow" },
		{ "allow if localtime(08:00-09:00)", "allow if localtime(08:00-09:01)" },
		{ "allow if weekday(mon)", "allow if weekday(tue)" },
		{ "allow if allowed-matches(id 0001:0001)",
		    "allow if allowed-matches(id 0001:0002)" },
		{ "allow if one-of { true false }", "allow if { true false }" },
		{ "allow with-interface 03:01:*", "allow with-interface 03:01:00" },
		{ "allow label \"a\"", "allow" },
	};
	struct rule_error	 err;
	struct rule		*a, *b;
	size_t			 i;

	for (i = 0; i < nitems(pairs); i++) {
		a = rule_parse(pairs[i][0], &err);
		b = rule_parse(pairs[i][1], &err);
		ok(a != NULL && b != NULL && !rule_equal(a, b) &&
		    !rule_equal(b, a), "different: %s / %s", pairs[i][0],
		    pairs[i][1]);
		ok(a != NULL && rule_equal(a, a), "equal to itself: %s",
		    pairs[i][0]);
		rule_free(a);
		rule_free(b);
	}
}

static void
make_identity(struct usbgw_identity *id)
{
	memset(id, 0, sizeof(*id));
	usbgw_strlcpy(id->exporter, "tc17", sizeof(id->exporter));
	usbgw_strlcpy(id->exporter_busid, "1-1.2", sizeof(id->exporter_busid));
	usbgw_strlcpy(id->busid, "tc17-1-1.2", sizeof(id->busid));
	id->vid = 0x0781;
	id->pid = 0x5567;
	id->n_ifaces = 2;
	id->ifaces[0].cls = 0x08;
	id->ifaces[0].subcls = 0x06;
	id->ifaces[0].proto = 0x50;
	id->ifaces[1].cls = 0x03;
	id->ifaces[1].subcls = 0x01;
	id->ifaces[1].proto = 0x01;
	usbgw_strlcpy(id->manufacturer, "SanDisk", sizeof(id->manufacturer));
	/* Quotes, backslash, control and invalid UTF-8 bytes survive. */
	usbgw_strlcpy(id->product, "Cruzer \"Blade\" \\ \x01\xff\xc3\xa9",
	    sizeof(id->product));
	usbgw_strlcpy(id->serial, "4C530001", sizeof(id->serial));
	memset(id->hash, 'a', USBGW_HASH_HEX);
	id->hash[USBGW_HASH_HEX] = '\0';
}

static void
test_from_identity(void)
{
	struct usbgw_identity	 id, other;
	struct usbgw_context	 ctx;
	struct rule_error	 err;
	struct rule		*r, *r2;
	char			*s;

	make_identity(&id);
	r = rule_from_identity(&id, RULE_ALLOW, RULE_FROM_ID_EXPORTER |
	    RULE_FROM_ID_PORT, NULL);
	ok(r != NULL, "rule from identity");
	s = rule_format(r);
	is_str(s, "allow id 0781:5567 name \"Cruzer \\\"Blade\\\" \\\\ "
	    "\\x01\\xff\xc3\xa9\" serial \"4C530001\" hash \"" 
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\" "
	    "via-port \"1-1.2\" via-exporter tc17 with-interface "
	    "{ 08:06:50 03:01:01 }", "its text");
	r2 = rule_parse(s, &err);
	ok(r2 != NULL && rule_equal(r, r2), "its text parses to the same rule");
	ok(rule_match_attrs(r, &id, NULL), "it matches the device");
	other = id;
	other.ifaces[1].proto = 0x02;
	ok(!rule_match_attrs(r, &other, NULL), "not a device with another "
	    "interface");
	other = id;
	other.hash[3] = 'b';
	ok(!rule_match_attrs(r, &other, NULL), "not a device with another hash");
	other = id;
	usbgw_strlcpy(other.exporter, "tc18", sizeof(other.exporter));
	ok(!rule_match_attrs(r, &other, NULL), "not on another exporter");
	free(s);
	rule_free(r);
	rule_free(r2);

	r = rule_from_identity(&id, RULE_BLOCK, 0, "10.1.2.0/24");
	s = r ? rule_format(r) : NULL;
	ok(s != NULL && strstr(s, "block id 0781:5567 ") == s &&
	    strstr(s, " to-host 10.1.2.0/24") != NULL &&
	    strstr(s, "via-") == NULL, "block rule to a network: %s",
	    s ? s : "(null)");
	memset(&ctx, 0, sizeof(ctx));
	ok(r != NULL && !rule_match_attrs(r, &id, &ctx), "no host: no match");
	usbgw_addr_parse("10.1.2.77", &ctx.host_addr);
	ok(r != NULL && rule_match_attrs(r, &id, &ctx), "host in network");
	usbgw_addr_parse("10.1.3.77", &ctx.host_addr);
	ok(r != NULL && !rule_match_attrs(r, &id, &ctx), "host outside");
	free(s);
	rule_free(r);

	ok(rule_from_identity(&id, RULE_ALLOW, 0, "bad host!") == NULL,
	    "invalid host refused");
	other = id;
	other.hash[0] = 'z';
	ok(rule_from_identity(&other, RULE_ALLOW, 0, NULL) == NULL,
	    "invalid hash refused");
	other = id;
	other.exporter[0] = '\0';
	ok(rule_from_identity(&other, RULE_ALLOW, RULE_FROM_ID_EXPORTER,
	    NULL) == NULL, "via-exporter without an exporter name refused");
}

static void
test_keys(void)
{
	static const struct {
		const char	*text;
		int		 n;
		const char	*keys;
	} cases[] = {
		{ "allow", -1, "" },
		{ "allow id *:*", -1, "" },
		{ "allow id 1234:5678", 1, "1234:5678" },
		{ "allow id 1234:*", 1, "1234:*" },
		{ "allow id one-of { 1234:5678 abcd:* }", 2, "1234:5678 abcd:*" },
		{ "allow id one-of { 1234:5678 *:* }", -1, "" },
		{ "allow id none-of { 1234:5678 }", -1, "" },
		{ "allow id all-of { 1234:* 1234:5678 }", 1, "1234:5678" },
		{ "allow id all-of { *:* 1234:* }", 1, "1234:*" },
		{ "allow id match-all { 1234:5678 }", 1, "1234:5678" },
		{ "allow id equals-ordered { 1234:5678 }", 1, "1234:5678" },
	};
	struct rule_idkey	 k[8];
	struct rule_error	 err;
	struct rule		*r;
	size_t			 i;
	int			 n, j, off;
	char			 buf[128];

	for (i = 0; i < nitems(cases); i++) {
		r = rule_parse(cases[i].text, &err);
		n = r ? rule_id_keys(r, k, nitems(k)) : -2;
		buf[0] = '\0';
		for (j = 0, off = 0; j < n; j++) {
			if (k[j].any_pid)
				off += snprintf(buf + off, sizeof(buf) -
				    (size_t)off, "%s%04x:*", j ? " " : "",
				    k[j].vid);
			else
				off += snprintf(buf + off, sizeof(buf) -
				    (size_t)off, "%s%04x:%04x", j ? " " : "",
				    k[j].vid, k[j].pid);
		}
		is_int(n, cases[i].n, "keys of %s", cases[i].text);
		if (n > 0)
			is_str(buf, cases[i].keys, "key values of %s",
			    cases[i].text);
		rule_free(r);
	}
	r = rule_parse("allow id one-of { 0001:0001 0002:0002 0003:0003 }",
	    &err);
	is_int(rule_id_keys(r, k, 2), -1, "more keys than room: not indexed");
	rule_free(r);
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

static struct rule *
P(const char *s)
{
	struct rule_error	 err;
	struct rule		*r;

	if ((r = rule_parse(s, &err)) == NULL)
		diag("parse %s: %s", s, err.msg);
	return r;
}

static void
test_time(void)
{
	struct rule	*r;
	int64_t		 mon7 = utc(2024, 1, 15, 7, 0, 0);	/* a Monday */

	setenv("TZ", "UTC0", 1);
	tzset();

	r = P("allow if localtime(08:00-18:00)");
	ok(!rule_match_cond(r, NULL, mon7), "07:00 outside 08:00-18:00");
	is_int(rule_next_change(r, mon7), utc(2024, 1, 15, 8, 0, 0),
	    "next change at 08:00");
	ok(rule_match_cond(r, NULL, utc(2024, 1, 15, 8, 0, 0)), "08:00 inside");
	ok(rule_match_cond(r, NULL, utc(2024, 1, 15, 18, 0, 0)),
	    "18:00:00 inside (end is inclusive, as USBGuard)");
	ok(!rule_match_cond(r, NULL, utc(2024, 1, 15, 18, 0, 1)),
	    "18:00:01 outside");
	is_int(rule_next_change(r, utc(2024, 1, 15, 12, 0, 0)),
	    utc(2024, 1, 15, 18, 0, 1), "from noon: next change 18:00:01");
	is_int(rule_next_change(r, utc(2024, 1, 15, 18, 0, 1)),
	    utc(2024, 1, 16, 8, 0, 0), "from 18:00:01: next day 08:00");
	rule_free(r);

	r = P("allow if !localtime(08:00-18:00)");
	ok(rule_match_cond(r, NULL, mon7), "negated: 07:00 matches");
	ok(!rule_match_cond(r, NULL, utc(2024, 1, 15, 9, 0, 0)),
	    "negated: 09:00 does not");
	rule_free(r);

	r = P("allow if localtime(22:00-06:00)");
	ok(rule_match_cond(r, NULL, utc(2024, 1, 15, 23, 0, 0)), "overnight 23:00");
	ok(rule_match_cond(r, NULL, utc(2024, 1, 15, 5, 59, 59)), "overnight 05:59");
	ok(!rule_match_cond(r, NULL, mon7), "overnight: not 07:00");
	is_int(rule_next_change(r, utc(2024, 1, 15, 23, 0, 0)),
	    utc(2024, 1, 16, 6, 0, 1), "overnight: next change 06:00:01");
	rule_free(r);

	r = P("allow if localtime(07:30)");
	ok(rule_match_cond(r, NULL, utc(2024, 1, 15, 7, 30, 0)),
	    "single time: that second");
	ok(!rule_match_cond(r, NULL, utc(2024, 1, 15, 7, 30, 1)),
	    "single time: not the next");
	rule_free(r);

	r = P("allow if localtime(00:00-23:59:59)");
	is_int(rule_next_change(r, mon7), RULE_NEVER, "whole day: never changes");
	ok(rule_match_cond(r, NULL, mon7), "whole day: matches");
	rule_free(r);

	r = P("allow if weekday(mon-fri)");
	ok(rule_match_cond(r, NULL, mon7), "Monday is mon-fri");
	ok(!rule_match_cond(r, NULL, utc(2024, 1, 20, 12, 0, 0)),
	    "Saturday is not");
	is_int(rule_next_change(r, mon7), utc(2024, 1, 16, 0, 0, 0),
	    "weekday: next change at midnight");
	rule_free(r);

	r = P("allow if weekday(fri-mon)");
	ok(rule_match_cond(r, NULL, utc(2024, 1, 21, 12, 0, 0)), "Sunday in fri-mon");
	ok(!rule_match_cond(r, NULL, utc(2024, 1, 17, 12, 0, 0)),
	    "Wednesday not in fri-mon");
	rule_free(r);

	r = P("allow if { weekday(mon-fri) localtime(08:00-18:00) }");
	ok(!rule_match_cond(r, NULL, mon7), "all: weekday yes, time no");
	ok(rule_match_cond(r, NULL, utc(2024, 1, 15, 9, 0, 0)), "all: both");
	is_int(rule_next_change(r, mon7), utc(2024, 1, 15, 8, 0, 0),
	    "all: earliest edge");
	rule_free(r);

	r = P("allow if one-of { localtime(08:00-09:00) localtime(17:00-18:00) }");
	ok(rule_match_cond(r, NULL, utc(2024, 1, 15, 17, 30, 0)), "one-of: second");
	ok(!rule_match_cond(r, NULL, utc(2024, 1, 15, 12, 0, 0)), "one-of: none");
	rule_free(r);

	r = P("allow if none-of { localtime(08:00-09:00) false }");
	ok(rule_match_cond(r, NULL, mon7), "none-of: none true");
	ok(!rule_match_cond(r, NULL, utc(2024, 1, 15, 8, 30, 0)), "none-of: one");
	rule_free(r);

	r = P("allow if true");
	is_int(rule_next_change(r, mon7), RULE_NEVER, "true: never changes");
	rule_free(r);
	r = P("allow");
	is_int(rule_next_change(r, mon7), RULE_NEVER, "no condition: never");
	ok(rule_match_cond(r, NULL, mon7), "no condition: matches");
	rule_free(r);

	/* Central European time: DST starts 2024-03-31 01:00 UTC. */
	setenv("TZ", "CET-1CEST,M3.5.0,M10.5.0/3", 1);
	tzset();
	r = P("allow if localtime(02:30-04:00)");
	ok(!rule_match_cond(r, NULL, utc(2024, 3, 31, 0, 0, 0)),
	    "spring: 01:00 CET outside");
	is_int(rule_next_change(r, utc(2024, 3, 31, 0, 0, 0)),
	    utc(2024, 3, 31, 1, 0, 0), "spring: change when clocks jump "
	    "over 02:30");
	ok(rule_match_cond(r, NULL, utc(2024, 3, 31, 1, 0, 0)),
	    "spring: 03:00 CEST inside");
	is_int(rule_next_change(r, utc(2024, 3, 31, 1, 0, 0)),
	    utc(2024, 3, 31, 2, 0, 1), "spring: closes at 04:00:01 CEST");
	rule_free(r);
	/* DST ends 2024-10-27 01:00 UTC: 02:30 happens twice. */
	r = P("allow if localtime(02:30-02:45)");
	is_int(rule_next_change(r, utc(2024, 10, 27, 0, 0, 0)),
	    utc(2024, 10, 27, 0, 30, 0), "autumn: first 02:30 (CEST)");
	ok(rule_next_change(r, utc(2024, 10, 27, 0, 50, 0)) <=
	    utc(2024, 10, 27, 1, 30, 0), "autumn: not later than the second "
	    "02:30 (CET)");
	is_int(rule_next_change(r, utc(2024, 10, 27, 1, 0, 0)),
	    utc(2024, 10, 27, 1, 30, 0), "autumn: from 02:00 CET, 02:30 CET");
	ok(rule_match_cond(r, NULL, utc(2024, 10, 27, 1, 30, 0)),
	    "autumn: second 02:30 inside");
	rule_free(r);
	setenv("TZ", "UTC0", 1);
	tzset();
}

/* interface-policy: bounds, equality and the per-interface answer. */
static void
test_iface_policy(void)
{
	struct rule_error	 err;
	struct rule		*r, *r2;
	char			 buf[2048];
	size_t			 o, i;

	o = (size_t)snprintf(buf, sizeof(buf), "allow interface-policy allow {");
	for (i = 0; i < RULE_IFACE_RULES_MAX; i++)
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, " block "
		    "%02zx:*:*", i);
	snprintf(buf + o, sizeof(buf) - o, " }");
	roundtrip(buf, buf, "32 interface rules");
	snprintf(buf + o, sizeof(buf) - o, " block ff:*:* }");
	r = rule_parse(buf, &err);
	ok(r == NULL, "33 interface rules refused");
	is_str(err.msg, "column 448: too many rules in interface-policy (at "
	    "most 32)", "its error");
	rule_free(r);

	r = rule_parse("allow interface-policy allow { block 08:*:* }", &err);
	r2 = rule_parse("allow interface-policy block { block 08:*:* }", &err);
	ok(r && r2 && !rule_equal(r, r2), "implicit target counts in equality");
	rule_free(r2);
	r2 = rule_parse("allow interface-policy allow { block 08:*:* index 1 }",
	    &err);
	ok(r2 && !rule_equal(r, r2), "index counts in equality");
	rule_free(r2);
	r2 = rule_parse("allow", &err);
	ok(r2 && !rule_equal(r, r2) && !rule_equal(r2, r),
	    "with and without interface-policy differ");
	ok(!rule_has_iface_policy(r2) && rule_has_iface_policy(r),
	    "rule_has_iface_policy");
	ok(rule_iface_allowed(r2, 1, 0, 8, 6, 0x50),
	    "no interface-policy: every interface passes the rule");
	rule_free(r2);
	rule_free(r);

	r = rule_parse("allow interface-policy allow { allow 08:06:50 index 2 "
	    "block 08:*:* block 03:01:01 configuration 1 allow *:*:* index 5 "
	    "block *:*:* }", &err);
	if (!ok(r != NULL, "policy parses"))
		diag("%s", err.msg);
	else {
		ok(rule_iface_allowed(r, 1, 2, 8, 6, 0x50), "first match: "
		    "allow 08:06:50 index 2");
		ok(!rule_iface_allowed(r, 1, 3, 8, 6, 0x50), "index 3: the "
		    "second rule blocks 08:*:*");
		ok(!rule_iface_allowed(r, 1, 2, 8, 6, 0x62), "other protocol: "
		    "blocked by 08:*:*");
		ok(!rule_iface_allowed(r, 1, 0, 3, 1, 1), "keyboard in "
		    "configuration 1 blocked");
		ok(!rule_iface_allowed(r, 2, 0, 3, 1, 1), "keyboard in "
		    "configuration 2: falls to block *:*:*");
		ok(rule_iface_allowed(r, 2, 5, 3, 1, 1), "interface 5: allow "
		    "*:*:* index 5");
		ok(!rule_iface_allowed(r, 1, 0, 2, 2, 1), "anything else: "
		    "block *:*:*");
		rule_free(r);
	}
	r = rule_parse("allow interface-policy block { allow 02:*:* allow "
	    "0a:*:* }", &err);
	ok(r && rule_iface_allowed(r, 1, 0, 2, 2, 1) &&
	    rule_iface_allowed(r, 1, 1, 0x0a, 0, 0) &&
	    !rule_iface_allowed(r, 1, 2, 8, 6, 0x50),
	    "implicit block: only the listed classes pass");
	rule_free(r);
	r = rule_parse_ex("allow id 1234:5678 interface-policy allow { block "
	    "08:*:* }", RULE_PARSE_USBGUARD, &err);
	ok(r == NULL, "USBGuard mode refuses interface-policy");
	is_str(err.msg, "column 20: 'interface-policy' is not allowed in "
	    "USBGuard rules (USBGuard does not implement it: its proposal, "
	    "issue #67, is open)", "its error");
	rule_free(r);
	r = rule_parse_ex("allow id 1234:5678 interface-policy allow { block "
	    "08:*:* }", RULE_PARSE_DEVICE, &err);
	ok(r == NULL, "device mode (keep-list) refuses interface-policy");
	rule_free(r);
}

static void
test_usbguard_mode(void)
{
	struct rule_error	 err;
	struct rule		*r;
	char			*s;

	r = rule_parse_ex("allow id 1234:5678 parent-hash \"x\" "
	    "with-connect-type \"hotplug\" hash \"JDOb0BiktYs2ct3mSQKopnOOV2h9"
	    "MGYADwhT+oUtF2s=\"", RULE_PARSE_USBGUARD, &err);
	ok(r != NULL, "USBGuard mode accepts USBGuard-only attributes");
	is_int(err.ndropped, 3, "three dropped");
	is_str(err.msg, "dropped: parent-hash (column 20), with-connect-type "
	    "(column 36), hash (column 64)", "what was dropped, where");
	s = r ? rule_format(r) : NULL;
	is_str(s, "allow id 1234:5678", "what remains");
	free(s);
	rule_free(r);
	r = rule_parse_ex("allow hash \"044B5E168D40EE0245478416CAF3D998044b5e1"
	    "68d40ee0245478416caf3d998\"", RULE_PARSE_USBGUARD, &err);
	is_int(err.ndropped, 0, "our own hash format is kept");
	rule_free(r);
	r = rule_parse_ex("allow parent-hash one-of { \"a\" \"b\" } id 1:1",
	    RULE_PARSE_USBGUARD, &err);
	ok(r == NULL, "errors after a dropped attribute are still errors");
	is_str(err.msg, "column 41: expected vid:pid after 'id', got '1:1'",
	    "its error");
}

int
main(void)
{
	test_bad();
	test_good();
	test_limits();
	test_equal();
	test_from_identity();
	test_keys();
	test_time();
	test_usbguard_mode();
	test_iface_policy();
	return done_testing();
}
