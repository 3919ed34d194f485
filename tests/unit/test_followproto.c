/*
 * followproto: the follow subscription's codec (protocol.md 1.10.8).
 * Round trips of the hellos and every message type; every proper prefix
 * of each is NEED_MORE (each in a heap block of exactly its size, so ASan
 * catches a read past it); each field's bound MALFORMED with its reason.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/followproto.h"
#include "tap.h"

static int
dec(const uint8_t *b, size_t n, int kind, const char **why)
{
	switch (kind) {
	case 0:	return flp_hello_decode(b, n, USBIP_FROM_CLIENT, NULL, why);
	case 1:	return flp_hello_decode(b, n, USBIP_FROM_SERVER, NULL, why);
	case 2:	return flp_msg_decode(b, n, FLP_FROM_GATEWAY, NULL, why);
	default: return flp_msg_decode(b, n, FLP_FROM_HOST, NULL, why);
	}
}

/* Every proper prefix needs more; the whole is its length. */
static void
prefixes(int kind, const uint8_t *pdu, size_t len, const char *what)
{
	const char *why = NULL;
	size_t i, bad = (size_t)-1;

	for (i = 0; i < len && bad == (size_t)-1; i++) {
		uint8_t *copy = malloc(i ? i : 1);

		memcpy(copy, pdu, i);
		if (dec(copy, i, kind, &why) != FLP_NEED_MORE)
			bad = i;
		free(copy);
	}
	ok(bad == (size_t)-1, "%s: every proper prefix needs more", what);
	is_int(dec(pdu, len, kind, &why), (int)len, "%s: whole", what);
}

static void
malformed(int kind, const uint8_t *pdu, size_t len, const char *reason,
    const char *what)
{
	const char *why = NULL;

	is_int(dec(pdu, len, kind, &why), FLP_MALFORMED, "%s: malformed", what);
	is_str(why ? why : "", reason, "%s: the reason", what);
}

int
main(void)
{
	uint8_t b[FLP_HELLO_MAX], m[FLP_MSG_MAX];
	struct flp_hello h;
	struct flp_msg msg, got;
	const char *why = NULL;
	size_t n;
	int t;

	n = flp_req_encode(b, 0);
	is_int((int)n, 20, "request hello: 20 bytes");
	ok(flp_is_hello(b, n), "flp_is_hello");
	prefixes(0, b, n, "request hello");
	b[19] = 1;
	is_int(flp_hello_decode(b, n, USBIP_FROM_CLIENT, &h, &why), 20,
	    "caps are read");
	is_int((int)h.caps, 1, "... caps 1");
	b[5] = 1;
	malformed(0, b, n, "request with non-zero status", "status");
	n = flp_req_encode(b, 0);
	b[11] = 2;
	malformed(0, b, 12, "unknown follow kind", "kind, from its 12 bytes");
	n = flp_req_encode(b, 0);
	b[14] = 0x10;
	malformed(0, b, 16, "follow body longer than 1024 bytes", "length");
	n = flp_req_encode(b, 0);
	b[15] = 5;
	malformed(0, b, 16, "follow body length wrong", "body length");
	n = flp_req_encode(b, 0);
	b[9] = 2;	/* version 2: read whole, for the receiver to refuse */
	is_int(flp_hello_decode(b, n, USBIP_FROM_CLIENT, &h, &why), 20,
	    "another version: returned whole");
	is_int(h.ext_version, 2, "... with its version");

	n = flp_rep_encode(b, ST_OK, 15, "vdi01");
	prefixes(1, b, n, "reply hello");
	is_int(flp_hello_decode(b, n, USBIP_FROM_SERVER, &h, &why), (int)n,
	    "reply decodes");
	is_str(h.host, "vdi01", "... its host");
	is_int(h.heartbeat_s, 15, "... its heartbeat");
	b[16 + 2 + 2] = '/';
	malformed(1, b, n, "follow host not [A-Za-z0-9._:-]{1,63} NUL-padded",
	    "host with '/'");
	n = flp_rep_encode(b, ST_OK, 0, "vdi01");
	malformed(1, b, n, "follow heartbeat out of range 1..3600", "heartbeat 0");
	n = flp_rep_encode(b, ST_NA, 0, NULL);
	is_int((int)n, 16, "a refusal: 16 bytes");
	prefixes(1, b, n, "refusal");

	for (t = FLP_LIST_BEGIN; t <= FLP_TYPE_MAX; t++) {
		char what[64];

		memset(&msg, 0, sizeof(msg));
		msg.type = (uint16_t)t;
		msg.seq = 7;
		msg.count = 3;
		msg.reason = FLP_WHY_GONE;
		msg.echo = 0x0102030405060708ULL;
		strcpy(msg.busid, "sim1:1-1");
		n = flp_msg_encode(m, &msg);
		snprintf(what, sizeof(what), "%s", flp_type_name((uint16_t)t));
		prefixes(t == FLP_PONG ? 3 : 2, m, n, what);
		is_int(flp_msg_decode(m, n, t == FLP_PONG ? FLP_FROM_HOST :
		    FLP_FROM_GATEWAY, &got, &why), (int)n, "%s decodes", what);
		is_int((int)got.seq, 7, "%s: seq", what);
		malformed(t == FLP_PONG ? 2 : 3, m, n,
		    "follow message type from the wrong side", what);
	}
	memset(&msg, 0, sizeof(msg));
	msg.type = FLP_AUTHORIZED;
	strcpy(msg.busid, "a/b");
	n = flp_msg_encode(m, &msg);
	malformed(2, m, n, "follow busid invalid", "busid with '/'");
	strcpy(msg.busid, "ok");
	n = flp_msg_encode(m, &msg);
	m[12 + 20] = 'x';	/* a byte after the NUL */
	malformed(2, m, n, "follow busid invalid", "busid not NUL-padded");
	msg.type = FLP_LIST_BEGIN;
	msg.count = FLP_MAX_DEVICES + 1;
	n = flp_msg_encode(m, &msg);
	malformed(2, m, n, "follow list count over 1024", "count 1025");
	msg.type = FLP_WITHDRAWN;
	msg.reason = 3;
	n = flp_msg_encode(m, &msg);
	malformed(2, m, n, "follow withdrawal reason unknown", "reason 3");
	put_be32(m, 5000);
	malformed(2, m, 4, "follow message length out of range",
	    "length 5000, from its 4 bytes");
	msg.type = FLP_PING;
	n = flp_msg_encode(m, &msg);
	m[7] = 1;
	malformed(2, m, 8, "follow message flags not 0", "flags");
	n = flp_msg_encode(m, &msg);
	put_be16(m + 4, 9);
	malformed(2, m, 6, "unknown follow message type", "type 9");
	n = flp_msg_encode(m, &msg);
	put_be32(m, 9);
	malformed(2, m, 6, "follow message length wrong for its type",
	    "PING of the wrong length");
	return done_testing();
}
