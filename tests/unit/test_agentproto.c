/*
 * agentproto: the gateway <-> agent extension codec (protocol.md 1.9.4).
 * Round trips of every hello and every message type, every proper
 * prefix of each is NEED_MORE (each in a heap block of exactly its size,
 * so ASan catches a read past it), and every field's bound MALFORMED
 * with its reason, as soon as the field has arrived.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/agentproto.h"
#include "tap.h"

typedef int (*dec_fn)(const uint8_t *, size_t, int, const char **);

static int
dec_hello_req(const uint8_t *b, size_t n, int x, const char **why)
{
	return agp_hello_decode(b, n, USBIP_FROM_CLIENT, NULL, why);
}

static int
dec_hello_rep(const uint8_t *b, size_t n, int x, const char **why)
{
	return agp_hello_decode(b, n, USBIP_FROM_SERVER, NULL, why);
}

static int
dec_msg(const uint8_t *b, size_t n, int from, const char **why)
{
	return agp_msg_decode(b, n, (enum agp_from)from, NULL, why);
}

/* Every proper prefix needs more; the whole is its length. */
static void
prefixes(dec_fn f, int arg, const uint8_t *pdu, size_t len, const char *what)
{
	const char *why = NULL;
	size_t i, bad = (size_t)-1;
	uint8_t *p;
	int r;

	for (i = 0; i < len; i++) {
		p = malloc(i ? i : 1);
		memcpy(p, pdu, i);
		r = f(p, i, arg, &why);
		free(p);
		if (r != AGP_NEED_MORE && bad == (size_t)-1)
			bad = i;
	}
	ok(bad == (size_t)-1, "%s: every proper prefix (%zu) needs more%s",
	    what, len, bad == (size_t)-1 ? "" : " (not at some length)");
	if (bad != (size_t)-1)
		diag("prefix of %zu bytes: %s", bad, why ? why : "-");
	p = malloc(len);
	memcpy(p, pdu, len);
	is_int(f(p, len, arg, &why), (int)len, "%s: complete", what);
	free(p);
}

/* The pdu, cut at n bytes, is refused with reason want. */
static void
refused(dec_fn f, int arg, const uint8_t *pdu, size_t n, const char *want,
    const char *what)
{
	const char *why = NULL;
	uint8_t *p = malloc(n);
	int r;

	memcpy(p, pdu, n);
	r = f(p, n, arg, &why);
	free(p);
	is_int(r, AGP_MALFORMED, "%s: malformed at %zu bytes", what, n);
	is_str(why, want, "%s: reason", what);
}

static void
test_hellos(void)
{
	uint8_t b[AGP_HELLO_MAX], nonce[AGP_NONCE_LEN], tok[AGP_TOKEN_LEN];
	struct agp_hello h;
	const char *why;
	size_t n;
	int i;

	for (i = 0; i < AGP_NONCE_LEN; i++) {
		nonce[i] = (uint8_t)(0xa0 + i);
		tok[i] = (uint8_t)(0xff - i);
	}

	/* CONTROL request */
	n = agp_control_req_encode(b, "tc-017_a.b", 0x12345678, nonce);
	is_int(n, AGP_HELLO_HDR_LEN + AGP_CONTROL_REQ_BODY, "CONTROL req length");
	ok(agp_is_hello(b, n, true) && !agp_is_hello(b, n, false),
	    "agp_is_hello tells a request");
	ok(!agp_is_hello(b, 3, true), "agp_is_hello needs 4 bytes");
	is_int(agp_hello_decode(b, n, USBIP_FROM_CLIENT, &h, &why), (int)n,
	    "CONTROL req decodes");
	is_int(h.kind, AGP_KIND_CONTROL, "kind");
	is_int(h.ext_version, AGP_EXT_VERSION, "ext_version");
	is_str(h.name, "tc-017_a.b", "name");
	is_int(h.caps, 0x12345678, "caps");
	is_mem(h.nonce, nonce, AGP_NONCE_LEN, "nonce");
	prefixes(dec_hello_req, 0, b, n, "CONTROL req");
	refused(dec_hello_rep, 0, b, 4, "OP_REQ_USBGW from the accepting side",
	    "CONTROL req from the server");

	/* name bounds: no NUL, bad character, empty, junk after the NUL */
	n = agp_control_req_encode(b, "x", 0, nonce);
	memset(b + AGP_HELLO_HDR_LEN, 'a', AGP_NAME_SIZE);
	refused(dec_hello_req, 0, b, n,
	    "CONTROL name not [A-Za-z0-9._-]{1,31} NUL-padded", "name no NUL");
	n = agp_control_req_encode(b, "a b", 0, nonce);
	refused(dec_hello_req, 0, b, n,
	    "CONTROL name not [A-Za-z0-9._-]{1,31} NUL-padded", "name space");
	n = agp_control_req_encode(b, "", 0, nonce);
	refused(dec_hello_req, 0, b, n,
	    "CONTROL name not [A-Za-z0-9._-]{1,31} NUL-padded", "name empty");
	n = agp_control_req_encode(b, "ab", 0, nonce);
	b[AGP_HELLO_HDR_LEN + 5] = 'x';
	refused(dec_hello_req, 0, b, n,
	    "CONTROL name not [A-Za-z0-9._-]{1,31} NUL-padded",
	    "name: bytes after the NUL");
	n = agp_control_req_encode(b, "abcdefghijabcdefghijabcdefghija", 0,
	    nonce);
	ok(agp_hello_decode(b, n, USBIP_FROM_CLIENT, &h, &why) == (int)n &&
	    strlen(h.name) == 31, "a 31-byte name is accepted");

	/* header bounds, each from its own bytes */
	n = agp_control_req_encode(b, "a", 0, nonce);
	b[1] = 0x10;
	refused(dec_hello_req, 0, b, 4, "unsupported USB/IP version", "version");
	n = agp_control_req_encode(b, "a", 0, nonce);
	b[3] = 0x05;
	refused(dec_hello_req, 0, b, 4, "not an extension op code", "op code");
	n = agp_control_req_encode(b, "a", 0, nonce);
	b[7] = 1;
	refused(dec_hello_req, 0, b, 8, "request with non-zero status",
	    "request status");
	n = agp_control_req_encode(b, "a", 0, nonce);
	b[9] = 0;
	refused(dec_hello_req, 0, b, 10, "extension version 0", "ext_version 0");
	n = agp_control_req_encode(b, "a", 0, nonce);
	b[11] = 7;
	refused(dec_hello_req, 0, b, 16, "unknown extension kind", "kind");
	n = agp_control_req_encode(b, "a", 0, nonce);
	put_be32(b + 12, AGP_HELLO_MAX_BODY + 1);
	refused(dec_hello_req, 0, b, 16,
	    "extension body longer than 1024 bytes", "len > 1024");
	n = agp_control_req_encode(b, "a", 0, nonce);
	put_be32(b + 12, AGP_CONTROL_REQ_BODY + 1);
	refused(dec_hello_req, 0, b, 16,
	    "extension body length wrong for its kind", "len wrong");

	/* another extension version: returned whole for an ST_NA */
	n = agp_control_req_encode(b, "a", 0, nonce);
	b[9] = 2;
	put_be32(b + 12, 1024);
	memset(b + 16, 0xee, 1024);
	prefixes(dec_hello_req, 0, b, 16 + 1024, "version 2 hello");
	agp_hello_decode(b, 16 + 1024, USBIP_FROM_CLIENT, &h, &why);
	is_int(h.ext_version, 2, "version 2 reported");

	/* CONTROL reply */
	n = agp_control_rep_encode(b, ST_OK, "gw1", 3, 15);
	is_int(n, AGP_HELLO_HDR_LEN + AGP_CONTROL_REP_BODY, "CONTROL rep length");
	is_int(agp_hello_decode(b, n, USBIP_FROM_SERVER, &h, &why), (int)n,
	    "CONTROL rep decodes");
	ok(strcmp(h.name, "gw1") == 0 && h.caps == 3 && h.heartbeat_s == 15 &&
	    h.status == ST_OK, "CONTROL rep fields");
	prefixes(dec_hello_rep, 0, b, n, "CONTROL rep");
	refused(dec_hello_req, 0, b, 4, "OP_REP_USBGW from the connecting side",
	    "CONTROL rep from the client");
	n = agp_control_rep_encode(b, ST_OK, "gw1", 3, 0);
	refused(dec_hello_rep, 0, b, n, "CONTROL heartbeat out of range 1..3600",
	    "heartbeat 0");
	n = agp_control_rep_encode(b, ST_OK, "gw1", 3, 3601);
	refused(dec_hello_rep, 0, b, n, "CONTROL heartbeat out of range 1..3600",
	    "heartbeat 3601");
	n = agp_control_rep_encode(b, ST_NA, "gw1", 3, 15);
	is_int(n, AGP_HELLO_HDR_LEN, "refusal: header only");
	prefixes(dec_hello_rep, 0, b, n, "CONTROL refusal");
	agp_hello_decode(b, n, USBIP_FROM_SERVER, &h, &why);
	is_int(h.status, ST_NA, "refusal status");
	n = agp_empty_rep_encode(b, ST_DEV_BUSY, AGP_KIND_CONTROL);
	refused(dec_hello_rep, 0, b, 8, "extension status not ST_OK or ST_NA",
	    "reply status 2");
	n = agp_empty_rep_encode(b, ST_NA, AGP_KIND_CONTROL);
	put_be32(b + 12, 4);
	refused(dec_hello_rep, 0, b, 16,
	    "extension body length wrong for its kind", "refusal with a body");

	/* DIALBACK */
	n = agp_dialback_req_encode(b, tok, "1-2.3");
	is_int(n, AGP_HELLO_HDR_LEN + AGP_DIALBACK_REQ_BODY, "DIALBACK length");
	is_int(agp_hello_decode(b, n, USBIP_FROM_CLIENT, &h, &why), (int)n,
	    "DIALBACK decodes");
	ok(h.kind == AGP_KIND_DIALBACK && strcmp(h.busid, "1-2.3") == 0 &&
	    memcmp(h.token, tok, AGP_TOKEN_LEN) == 0, "DIALBACK fields");
	prefixes(dec_hello_req, 0, b, n, "DIALBACK req");
	n = agp_dialback_req_encode(b, tok, "1-2;rm");
	refused(dec_hello_req, 0, b, n, "DIALBACK busid invalid",
	    "DIALBACK busid character");
	n = agp_dialback_req_encode(b, tok, "1-2");
	memset(b + 16 + AGP_TOKEN_LEN, '1', USBIP_BUSID_SIZE);
	refused(dec_hello_req, 0, b, n, "DIALBACK busid invalid",
	    "DIALBACK busid no NUL");
	n = agp_empty_rep_encode(b, ST_OK, AGP_KIND_DIALBACK);
	prefixes(dec_hello_rep, 0, b, n, "DIALBACK rep");
}

static void
dev_fill(struct usbip_dev *d, struct usbip_intf *intf, int nintf)
{
	int i;

	memset(d, 0, sizeof(*d));
	snprintf(d->path, sizeof(d->path), "/sys/devices/usb1/1-%d", nintf);
	snprintf(d->busid, sizeof(d->busid), "1-%d", nintf);
	d->busnum = 1;
	d->devnum = (uint32_t)nintf + 2;
	d->speed = USBIP_SPEED_HIGH;
	d->idVendor = 0x0781;
	d->idProduct = 0x5567;
	d->bcdDevice = 0x0100;
	d->bConfigurationValue = 1;
	d->bNumConfigurations = 1;
	d->bNumInterfaces = (uint8_t)nintf;
	for (i = 0; i < nintf; i++) {
		intf[i].bInterfaceClass = (uint8_t)(8 + i);
		intf[i].bInterfaceSubClass = (uint8_t)(6 + i);
		intf[i].bInterfaceProtocol = (uint8_t)(0x50 + i);
	}
}

static void
test_msgs(void)
{
	static const int ni[] = { 0, 1, 3, USBIP_MAX_INTERFACES };
	uint8_t b[AGP_MSG_MAX];
	struct usbip_intf intf[USBIP_MAX_INTERFACES];
	struct usbip_dev d;
	struct agp_msg m, o;
	const char *why;
	char what[64];
	size_t n;
	int t, i, k;

	/* every fixed type, round trip and prefixes */
	for (t = 1; t <= AGP_TYPE_MAX; t++) {
		enum agp_from from;

		if (t == AGP_DEV_ADDED)
			continue;
		memset(&m, 0, sizeof(m));
		m.type = (uint16_t)t;
		m.seq = 0x01020304u + (uint32_t)t;
		m.count = 1024;
		snprintf(m.busid, sizeof(m.busid), "3-1.%d", t);
		for (i = 0; i < AGP_TOKEN_LEN; i++)
			m.token[i] = (uint8_t)(i * 17 + t);
		m.status = ST_NODEV;
		m.echo = 0x0102030405060708ull * (uint64_t)t;
		m.reason = 0xdeadbeef;
		from = t == AGP_OPEN_IMPORT ? AGP_FROM_GATEWAY : AGP_FROM_AGENT;
		n = agp_msg_encode(b, &m);
		snprintf(what, sizeof(what), "%s", agp_type_name((uint16_t)t));
		is_int(agp_msg_decode(b, n, from, &o, &why), (int)n,
		    "%s decodes", what);
		ok(o.type == m.type && o.seq == m.seq, "%s type, seq", what);
		switch (t) {
		case AGP_SNAPSHOT_BEGIN:
			is_int(o.count, 1024, "count");
			break;
		case AGP_DEV_REMOVED:
			is_str(o.busid, m.busid, "busid");
			break;
		case AGP_OPEN_IMPORT:
			ok(strcmp(o.busid, m.busid) == 0 &&
			    memcmp(o.token, m.token, AGP_TOKEN_LEN) == 0,
			    "busid, token");
			break;
		case AGP_OPEN_FAILED:
			ok(o.status == ST_NODEV &&
			    memcmp(o.token, m.token, AGP_TOKEN_LEN) == 0,
			    "token, status");
			break;
		case AGP_PING:
		case AGP_PONG:
			ok(o.echo == m.echo, "echo 64 bits");
			break;
		case AGP_BYE:
			is_int(o.reason, 0xdeadbeef, "reason");
			break;
		}
		prefixes(dec_msg, from, b, n, what);
		/* a byte more belongs to the next message */
		b[n] = 0;
		is_int(agp_msg_decode(b, n + 1, from, NULL, &why), (int)n,
		    "%s: next message's bytes left alone", what);
		/* flags, from its 8th byte */
		n = agp_msg_encode(b, &m);
		b[7] = 1;
		refused(dec_msg, from, b, 8, "message flags not 0", what);
		/* body length one more, one less, from the header */
		n = agp_msg_encode(b, &m);
		put_be32(b, get_be32(b) + 4);
		refused(dec_msg, from, b, 6, "message length wrong for its type",
		    what);
		if (get_be32(b) - 4 > AGP_MSG_LEN_MIN) {
			put_be32(b, get_be32(b) - 8);
			refused(dec_msg, from, b, 6,
			    "message length wrong for its type", what);
		}
	}

	/* who may send what */
	memset(&m, 0, sizeof(m));
	m.type = AGP_OPEN_IMPORT;
	strcpy(m.busid, "1-1");
	n = agp_msg_encode(b, &m);
	refused(dec_msg, AGP_FROM_AGENT, b, 6,
	    "message type not sent by an agent", "OPEN_IMPORT from an agent");
	m.type = AGP_DEV_REMOVED;
	n = agp_msg_encode(b, &m);
	refused(dec_msg, AGP_FROM_GATEWAY, b, 6,
	    "message type not sent by a gateway", "DEV_REMOVED from a gateway");
	m.type = AGP_SNAPSHOT_BEGIN;
	n = agp_msg_encode(b, &m);
	refused(dec_msg, AGP_FROM_GATEWAY, b, 6,
	    "message type not sent by a gateway", "SNAPSHOT from a gateway");

	/* length and type bounds */
	put_be32(b, 7);
	refused(dec_msg, AGP_FROM_AGENT, b, 4,
	    "message length out of range 8..4096", "length 7");
	put_be32(b, 4097);
	refused(dec_msg, AGP_FROM_AGENT, b, 4,
	    "message length out of range 8..4096", "length 4097");
	put_be32(b, 0xffffffffu);
	refused(dec_msg, AGP_FROM_AGENT, b, 4,
	    "message length out of range 8..4096", "length 2^32-1");
	for (k = 0; k < 3; k++) {
		static const uint16_t bad[] = { 0, AGP_TYPE_MAX + 1, 0xffff };

		put_be32(b, 8);
		put_be16(b + 4, bad[k]);
		refused(dec_msg, AGP_FROM_AGENT, b, 6, "unknown message type",
		    "unknown type");
	}

	/* body fields */
	memset(&m, 0, sizeof(m));
	m.type = AGP_SNAPSHOT_BEGIN;
	m.count = USBIP_MAX_NDEV + 1;
	n = agp_msg_encode(b, &m);
	refused(dec_msg, AGP_FROM_AGENT, b, n,
	    "snapshot count exceeds USBIP_MAX_NDEV", "snapshot count");
	m.type = AGP_DEV_REMOVED;
	strcpy(m.busid, "1-1/..");
	n = agp_msg_encode(b, &m);
	refused(dec_msg, AGP_FROM_AGENT, b, n, "DEV_REMOVED busid invalid",
	    "DEV_REMOVED busid");
	memset(b + AGP_MSG_HDR_LEN, 'a', USBIP_BUSID_SIZE);
	refused(dec_msg, AGP_FROM_AGENT, b, n, "DEV_REMOVED busid invalid",
	    "DEV_REMOVED busid without NUL");
	m.type = AGP_OPEN_IMPORT;
	m.busid[0] = '\0';
	n = agp_msg_encode(b, &m);
	refused(dec_msg, AGP_FROM_GATEWAY, b, n, "OPEN_IMPORT busid invalid",
	    "OPEN_IMPORT empty busid");
	m.type = AGP_OPEN_FAILED;
	m.status = ST_OK;
	n = agp_msg_encode(b, &m);
	refused(dec_msg, AGP_FROM_AGENT, b, n,
	    "OPEN_FAILED status out of range 1..5", "OPEN_FAILED ST_OK");
	m.status = ST_MAX + 1;
	n = agp_msg_encode(b, &m);
	refused(dec_msg, AGP_FROM_AGENT, b, n,
	    "OPEN_FAILED status out of range 1..5", "OPEN_FAILED 6");

	/* DEV_ADDED */
	for (k = 0; k < (int)(sizeof(ni) / sizeof(ni[0])); k++) {
		dev_fill(&d, intf, ni[k]);
		n = agp_dev_added_encode(b, 77, &d, intf);
		is_int(n, AGP_MSG_HDR_LEN + USBIP_DEV_LEN + ni[k] * USBIP_INTF_LEN,
		    "DEV_ADDED %d interfaces: length", ni[k]);
		is_int(agp_msg_decode(b, n, AGP_FROM_AGENT, &o, &why), (int)n,
		    "DEV_ADDED %d interfaces decodes", ni[k]);
		ok(strcmp(o.dev.busid, d.busid) == 0 &&
		    strcmp(o.dev.path, d.path) == 0 &&
		    o.dev.idVendor == 0x0781 && o.dev.idProduct == 0x5567 &&
		    o.dev.speed == USBIP_SPEED_HIGH && o.dev.devnum == d.devnum &&
		    o.dev.bNumInterfaces == ni[k] && o.seq == 77,
		    "DEV_ADDED record round trip");
		for (i = 0; i < ni[k]; i++)
			if (memcmp(&o.intf[i], &intf[i], sizeof(intf[i])) != 0)
				break;
		is_int(i, ni[k], "DEV_ADDED interfaces round trip");
		snprintf(what, sizeof(what), "DEV_ADDED/%d", ni[k]);
		prefixes(dec_msg, AGP_FROM_AGENT, b, n, what);
	}
	dev_fill(&d, intf, 2);
	n = agp_dev_added_encode(b, 1, &d, intf);
	put_be32(b, get_be32(b) + 2);
	refused(dec_msg, AGP_FROM_AGENT, b, 6, "message length wrong for its type",
	    "DEV_ADDED length not 312 + 4n");
	put_be32(b, 8 + 300);
	refused(dec_msg, AGP_FROM_AGENT, b, 6, "message length wrong for its type",
	    "DEV_ADDED shorter than a record");
	put_be32(b, 8 + 312 + 33 * 4);
	refused(dec_msg, AGP_FROM_AGENT, b, 6, "message length wrong for its type",
	    "DEV_ADDED 33 interfaces");
	n = agp_dev_added_encode(b, 1, &d, intf);
	b[AGP_MSG_HDR_LEN + 0x137] = 3;	/* bNumInterfaces 3, 2 records */
	refused(dec_msg, AGP_FROM_AGENT, b, n,
	    "DEV_ADDED interface records differ from bNumInterfaces",
	    "DEV_ADDED bNumInterfaces lies");
	n = agp_dev_added_encode(b, 1, &d, intf);
	b[AGP_MSG_HDR_LEN + 0x12b] = 7;	/* speed */
	refused(dec_msg, AGP_FROM_AGENT, b, n, "device speed out of range",
	    "DEV_ADDED speed");
	n = agp_dev_added_encode(b, 1, &d, intf);
	memset(b + AGP_MSG_HDR_LEN, 'p', USBIP_PATH_SIZE);
	refused(dec_msg, AGP_FROM_AGENT, b, n, "device path not NUL-terminated",
	    "DEV_ADDED path");
	n = agp_dev_added_encode(b, 1, &d, intf);
	memset(b + AGP_MSG_HDR_LEN + 0x100, 'b', USBIP_BUSID_SIZE);
	refused(dec_msg, AGP_FROM_AGENT, b, n, "device busid not NUL-terminated",
	    "DEV_ADDED busid no NUL");
	n = agp_dev_added_encode(b, 1, &d, intf);
	b[AGP_MSG_HDR_LEN + 0x100] = '%';
	refused(dec_msg, AGP_FROM_AGENT, b, n, "DEV_ADDED busid invalid",
	    "DEV_ADDED busid character");
	n = agp_dev_added_encode(b, 1, &d, intf);
	b[AGP_MSG_HDR_LEN + 200] = 'x';
	refused(dec_msg, AGP_FROM_AGENT, b, n, "DEV_ADDED path not NUL-padded",
	    "DEV_ADDED path junk after NUL");
	n = agp_dev_added_encode(b, 1, &d, intf);
	b[AGP_MSG_HDR_LEN + 0x100 + 30] = 'x';
	refused(dec_msg, AGP_FROM_AGENT, b, n, "DEV_ADDED busid not NUL-padded",
	    "DEV_ADDED busid junk after NUL");
	n = agp_dev_added_encode(b, 1, &d, intf);
	b[n - 1] = 1;
	refused(dec_msg, AGP_FROM_AGENT, b, n,
	    "DEV_ADDED interface pad byte not 0", "DEV_ADDED pad");
}

int
main(void)
{
	ok(agp_name_valid("a") && agp_name_valid("A-z_0.9") &&
	    !agp_name_valid("") && !agp_name_valid("a:b") &&
	    !agp_name_valid("abcdefghijabcdefghijabcdefghijab"),
	    "agp_name_valid");
	is_str(agp_type_name(AGP_OPEN_IMPORT), "OPEN_IMPORT", "type name");
	is_str(agp_type_name(99), "UNKNOWN", "unknown type name");
	is_str(agp_kind_name(AGP_KIND_DIALBACK), "DIALBACK", "kind name");
	test_hellos();
	test_msgs();
	return done_testing();
}
