/*
 * libFuzzer harness for the rule language parser.
 *
 * Input: the text of one rule (a NUL ends it early).  Checks:
 *  - a refusal has a message "column N: ..." with N >= 1;
 *  - an accepted rule prints to a text that parses back to an equal
 *    rule, and printing that gives the same text (canonical form);
 *  - the same holds with the USBGuard import flag;
 *  - evaluating the rule (attributes, condition, next change, index
 *    keys) against a fixed device and host neither crashes nor claims a
 *    change in the past, and a rule with to-host never matches without
 *    a host.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "policy/rule.h"

static int
allowed_cb(void *arg, const struct rule *query)
{
	return rule_match_attrs(query, arg, NULL);
}

static void
exercise(const struct rule *r)
{
	static struct usbgw_identity	 id;
	struct usbgw_context		 ctx;
	struct rule_idkey		 keys[8];
	int64_t				 now = 1700000000, t;
	int				 n, i;

	if (id.vid == 0) {
		snprintf(id.exporter, sizeof(id.exporter), "tc17");
		snprintf(id.exporter_busid, sizeof(id.exporter_busid), "1-2");
		snprintf(id.busid, sizeof(id.busid), "tc17-1-2");
		id.vid = 0x046d;
		id.pid = 0xc52b;
		id.n_ifaces = 3;
		id.ifaces[0].cls = 0x03;
		id.ifaces[0].subcls = 0x01;
		id.ifaces[0].proto = 0x01;
		id.ifaces[1].cls = 0x03;
		id.ifaces[1].subcls = 0x00;
		id.ifaces[2].cls = 0x08;
		id.ifaces[2].subcls = 0x06;
		id.ifaces[2].proto = 0x50;
		snprintf(id.manufacturer, sizeof(id.manufacturer), "Logitech");
		snprintf(id.product, sizeof(id.product), "USB Receiver");
		snprintf(id.serial, sizeof(id.serial), "ABC");
		memset(id.hash, 'a', USBGW_HASH_HEX);
	}
	memset(&ctx, 0, sizeof(ctx));
	if (rule_has_to_host(r))
		CHECK(!rule_match_attrs(r, &id, &ctx));
	ctx.host_name = "vdi01.example.org";
	usbgw_addr_parse("10.1.2.3", &ctx.host_addr);
	ctx.allowed_matches = allowed_cb;
	ctx.arg = &id;
	(void)rule_match(r, &id, &ctx, now);
	usbgw_addr_parse("fd00::1", &ctx.host_addr);
	(void)rule_match(r, &id, &ctx, now + 43200);
	/* no interface-policy: every interface passes the rule */
	if (!rule_has_iface_policy(r))
		CHECK(rule_iface_allowed(r, 1, 0, 8, 6, 0x50));
	(void)rule_iface_allowed(r, 2, 3, 3, 1, 1);
	t = rule_next_change(r, now);
	CHECK(t > now);
	CHECK(t == RULE_NEVER || t <= now + 86400 + 3600);
	n = rule_id_keys(r, keys, 8);
	CHECK(n >= -1 && n <= 8);
	/* A device matching the rule matches one of its keys. */
	if (n > 0 && rule_match_attrs(r, &id, &ctx)) {
		int hit = 0;

		for (i = 0; i < n; i++)
			if (keys[i].vid == id.vid &&
			    (keys[i].any_pid || keys[i].pid == id.pid))
				hit = 1;
		CHECK(hit);
	}
}

static void
roundtrip(const char *text, unsigned flags)
{
	struct rule_error	 err;
	struct rule		*r, *r2;
	char			*p, *p2;
	int			 col;

	r = rule_parse_ex(text, flags, &err);
	if (r == NULL) {
		CHECK(sscanf(err.msg, "column %d: ", &col) == 1);
		CHECK(col >= 1 && col == err.column);
		return;
	}
	p = rule_format(r);
	r2 = rule_parse(p, &err);
	if (r2 == NULL)
		fprintf(stderr, "printed rule does not parse: %s\n%s\n", p,
		    err.msg);
	CHECK(r2 != NULL);
	CHECK(rule_equal(r, r2));
	CHECK(rule_equal(r2, r));
	p2 = rule_format(r2);
	CHECK(strcmp(p, p2) == 0);
	exercise(r);
	free(p);
	free(p2);
	rule_free(r);
	rule_free(r2);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text;

	if (size > RULE_TEXT_MAX + 16)
		return 0;
	text = malloc(size + 1);
	if (text == NULL)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	roundtrip(text, 0);
	roundtrip(text, RULE_PARSE_USBGUARD);
	free(text);
	return 0;
}
