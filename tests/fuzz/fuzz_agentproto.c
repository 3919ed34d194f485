/*
 * libFuzzer harness for the gateway <-> agent extension codec
 * (agentproto.c, protocol.md 1.9.4).
 *
 * Input: one byte choosing the decoder (bits 0-1: 0 a hello request, 1 a
 * hello reply, 2 a message from an agent, 3 a message from a gateway),
 * then the bytes as they arrived.
 *
 * Besides "no crash, no read past the input" (ASan), it checks:
 *  - a result other than "need more" is the same for a longer prefix
 *    that covers it, and a complete PDU's proper prefix needs more;
 *  - a refusal always carries a reason;
 *  - decode(encode(decoded values)) gives the same values and bytes
 *    back (for a version-1 hello and every message).
 */
#include <string.h>

#include "proto/agentproto.h"
#include "fuzz.h"

static int
decode(int mode, const uint8_t *b, size_t n, struct agp_hello *h,
    struct agp_msg *m, const char **why)
{
	*why = NULL;
	switch (mode) {
	case 0:
		return agp_hello_decode(b, n, USBIP_FROM_CLIENT, h, why);
	case 1:
		return agp_hello_decode(b, n, USBIP_FROM_SERVER, h, why);
	case 2:
		return agp_msg_decode(b, n, AGP_FROM_AGENT, m, why);
	default:
		return agp_msg_decode(b, n, AGP_FROM_GATEWAY, m, why);
	}
}

static FUZZ_NOCOV void
check_hello(int mode, const uint8_t *buf, size_t len,
    const struct agp_hello *h)
{
	uint8_t out[AGP_HELLO_MAX];
	struct agp_hello h2;
	const char *why;
	size_t n = 0;

	CHECK(h->len <= AGP_HELLO_MAX_BODY && len == AGP_HELLO_HDR_LEN + h->len);
	if (h->ext_version != AGP_EXT_VERSION)
		return;
	if (mode == 0) {
		CHECK(h->status == ST_OK);
		if (h->kind == AGP_KIND_CONTROL) {
			CHECK(agp_name_valid(h->name));
			n = agp_control_req_encode(out, h->name, h->caps,
			    h->nonce);
		} else {
			CHECK(h->kind == AGP_KIND_DIALBACK);
			CHECK(usbip_busid_valid(h->busid));
			n = agp_dialback_req_encode(out, h->token, h->busid);
		}
	} else {
		CHECK(h->status == ST_OK || h->status == ST_NA);
		if (h->status != ST_OK || h->kind == AGP_KIND_DIALBACK)
			n = agp_empty_rep_encode(out, h->status, h->kind);
		else
			n = agp_control_rep_encode(out, ST_OK, h->name,
			    h->caps, h->heartbeat_s);
	}
	CHECK(n == len && memcmp(out, buf, len) == 0);
	CHECK(agp_hello_decode(out, n, mode == 0 ? USBIP_FROM_CLIENT :
	    USBIP_FROM_SERVER, &h2, &why) == (int)n);
	CHECK(memcmp(&h2, h, sizeof(h2)) == 0);
}

static FUZZ_NOCOV void
check_msg(int mode, const uint8_t *buf, size_t len, const struct agp_msg *m)
{
	static uint8_t out[AGP_MSG_MAX];
	static struct agp_msg m2;
	const char *why;
	size_t n;

	CHECK(len >= AGP_MSG_HDR_LEN && len <= AGP_MSG_MAX);
	CHECK(m->type >= 1 && m->type <= AGP_TYPE_MAX);
	n = agp_msg_encode(out, m);
	CHECK(n == len && memcmp(out, buf, len) == 0);
	CHECK(agp_msg_decode(out, n, mode == 2 ? AGP_FROM_AGENT :
	    AGP_FROM_GATEWAY, &m2, &why) == (int)n);
	CHECK(memcmp(&m2, m, sizeof(m2)) == 0);
	if (m->type == AGP_DEV_ADDED || m->type == AGP_DEV_REMOVED ||
	    m->type == AGP_OPEN_IMPORT)
		CHECK(usbip_busid_valid(m->type == AGP_DEV_ADDED ?
		    m->dev.busid : m->busid));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct agp_hello h, h2;
	static struct agp_msg m, m2;
	const uint8_t *buf;
	const char *why, *why2;
	size_t len, k;
	int mode, rv, rv2;

	if (size < 1)
		return 0;
	mode = data[0] & 3;
	buf = data + 1;
	len = size - 1;

	rv = decode(mode, buf, len, &h, &m, &why);
	CHECK(rv == AGP_NEED_MORE || rv == AGP_MALFORMED ||
	    (rv > 0 && (size_t)rv <= len));
	if (rv == AGP_MALFORMED)
		CHECK(why != NULL && why[0] != '\0');

	/* A prefix either waits or says the same thing. */
	k = len == 0 ? 0 : (size_t)data[0] * 2654435761u % len;
	rv2 = decode(mode, buf, k, &h2, &m2, &why2);
	if (rv2 != AGP_NEED_MORE) {
		CHECK(rv2 == rv);
		if (rv == AGP_MALFORMED)
			CHECK(strcmp(why, why2) == 0);
	}
	if (rv > 0) {
		CHECK(decode(mode, buf, (size_t)rv - 1, &h2, &m2, &why2) ==
		    AGP_NEED_MORE);
		if (mode < 2)
			check_hello(mode, buf, (size_t)rv, &h);
		else
			check_msg(mode, buf, (size_t)rv, &m);
	}
	return 0;
}
