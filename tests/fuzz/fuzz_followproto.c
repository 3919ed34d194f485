/*
 * libFuzzer harness for the follow subscription's codec (followproto.c,
 * protocol.md 1.10.8), both directions.
 *
 * Input: one byte choosing the decoder (bits 0-1: 0 the host's hello as
 * the gateway reads it, 1 the gateway's reply as usbgw-attach reads it,
 * 2 a message from the gateway as usbgw-attach reads it, 3 a message
 * from the host as the gateway reads it), then the bytes as they
 * arrived.
 *
 * Besides "no crash, no read past the input" (ASan), it checks:
 *  - no decoder reads past its PDU's maximum (FLP_HELLO_MAX,
 *    FLP_MSG_MAX) whatever length it is given: the gateway pulls up only
 *    that much of its input buffer and passes the whole length;
 *  - a result other than "need more" is the same, with the same reason,
 *    for any longer prefix that covers it, and a complete PDU's proper
 *    prefix needs more (the incremental contract);
 *  - a refusal always carries a reason;
 *  - flp_is_hello() agrees with the request decoder on the first 4 bytes;
 *  - what is accepted keeps the documented bounds (status, heartbeat,
 *    host name, type for the direction, busid, count, reason);
 *  - decode(encode(decoded values)) gives the same values and the same
 *    bytes back (every version-1 hello and every message).
 */
#include <stdlib.h>
#include <string.h>

#include "proto/followproto.h"
#include "fuzz.h"

static int
decode(int mode, const uint8_t *b, size_t n, struct flp_hello *h,
    struct flp_msg *m, const char **why)
{
	*why = NULL;
	switch (mode) {
	case 0:
		return flp_hello_decode(b, n, USBIP_FROM_CLIENT, h, why);
	case 1:
		return flp_hello_decode(b, n, USBIP_FROM_SERVER, h, why);
	case 2:
		return flp_msg_decode(b, n, FLP_FROM_GATEWAY, m, why);
	default:
		return flp_msg_decode(b, n, FLP_FROM_HOST, m, why);
	}
}

static FUZZ_NOCOV void
check_hello(int mode, const uint8_t *buf, size_t len,
    const struct flp_hello *h)
{
	uint8_t out[FLP_HELLO_MAX];
	struct flp_hello h2;
	const char *why;
	size_t n;

	CHECK(h->len <= FLP_HELLO_MAX_BODY && len == FLP_HELLO_HDR_LEN + h->len);
	CHECK(h->code == (mode == 0 ? OP_REQ_FOLLOW : OP_REP_FOLLOW));
	CHECK(h->ext_version != 0);
	if (h->ext_version != FLP_EXT_VERSION) {
		/* another version: the header only, for the receiver to refuse */
		CHECK(h->caps == 0 && h->heartbeat_s == 0 && h->host[0] == '\0');
		return;
	}
	CHECK(h->kind == FLP_KIND_SUBSCRIBE);
	if (mode == 0) {
		CHECK(h->status == ST_OK && h->len == FLP_REQ_BODY);
		n = flp_req_encode(out, h->caps);
	} else if (h->status == ST_OK) {
		CHECK(h->len == FLP_REP_BODY);
		CHECK(h->heartbeat_s >= FLP_HEARTBEAT_MIN_S &&
		    h->heartbeat_s <= FLP_HEARTBEAT_MAX_S);
		CHECK(flp_host_valid(h->host));
		n = flp_rep_encode(out, ST_OK, h->heartbeat_s, h->host);
	} else {
		CHECK(h->status == ST_NA && h->len == 0);
		CHECK(h->heartbeat_s == 0 && h->host[0] == '\0');
		n = flp_rep_encode(out, h->status, 0, NULL);
	}
	CHECK(n == len && memcmp(out, buf, len) == 0);
	CHECK(flp_hello_decode(out, n, mode == 0 ? USBIP_FROM_CLIENT :
	    USBIP_FROM_SERVER, &h2, &why) == (int)n);
	CHECK(memcmp(&h2, h, sizeof(h2)) == 0);
}

static FUZZ_NOCOV void
check_msg(int mode, const uint8_t *buf, size_t len, const struct flp_msg *m)
{
	uint8_t out[FLP_MSG_MAX];
	struct flp_msg m2;
	const char *why;
	size_t n;

	CHECK(len >= 4 + FLP_MSG_LEN_MIN && len <= FLP_MSG_MAX);
	CHECK(m->type >= 1 && m->type <= FLP_TYPE_MAX);
	/* the host sends PONG and nothing else; the gateway never PONG */
	CHECK((m->type == FLP_PONG) == (mode == 3));
	CHECK(m->count <= FLP_MAX_DEVICES);
	if (m->type == FLP_AUTHORIZED || m->type == FLP_WITHDRAWN)
		CHECK(usbip_busid_valid(m->busid));
	else
		CHECK(m->busid[0] == '\0');
	if (m->type == FLP_WITHDRAWN)
		CHECK(m->reason >= 1 && m->reason <= FLP_WHY_MAX &&
		    strcmp(flp_reason_name(m->reason), "?") != 0);
	else
		CHECK(m->reason == 0);
	CHECK(strcmp(flp_type_name(m->type), "UNKNOWN") != 0);
	n = flp_msg_encode(out, m);
	CHECK(n == len && memcmp(out, buf, len) == 0);
	CHECK(flp_msg_decode(out, n, mode == 2 ? FLP_FROM_GATEWAY :
	    FLP_FROM_HOST, &m2, &why) == (int)n);
	CHECK(memcmp(&m2, m, sizeof(m2)) == 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct flp_hello h, h2;
	static struct flp_msg m, m2;
	const uint8_t *buf;
	const char *why, *why2;
	uint8_t *cut;
	size_t len, k, max;
	int mode, rv, rv2;

	if (size < 1)
		return 0;
	mode = data[0] & 3;
	buf = data + 1;
	len = size - 1;

	rv = decode(mode, buf, len, &h, &m, &why);
	CHECK(rv == FLP_NEED_MORE || rv == FLP_MALFORMED ||
	    (rv > 0 && (size_t)rv <= len));
	if (rv == FLP_MALFORMED)
		CHECK(why != NULL && why[0] != '\0');

	/*
	 * Only the PDU's maximum is readable, the length says more: what
	 * the gateway's readers do (evbuffer_pullup of FLP_HELLO_MAX or
	 * FLP_MSG_MAX, the whole input length).  The same answer, and ASan
	 * catches a read past the maximum.
	 */
	max = mode < 2 ? FLP_HELLO_MAX : FLP_MSG_MAX;
	if (len > max) {
		cut = malloc(max);
		CHECK(cut != NULL);
		memcpy(cut, buf, max);
		rv2 = decode(mode, cut, len, &h2, &m2, &why2);
		CHECK(rv2 == rv);
		if (rv == FLP_MALFORMED)
			CHECK(strcmp(why, why2) == 0);
		free(cut);
	}

	/* the gateway's test for a follow hello, on its first 4 bytes */
	if (mode == 0 && len >= 4)
		CHECK(flp_is_hello(buf, len) == (rv != FLP_MALFORMED ||
		    (strcmp(why, "unsupported USB/IP version") != 0 &&
		    strcmp(why, "not OP_REQ_FOLLOW") != 0)));

	/* A prefix either waits or says the same thing. */
	k = len == 0 ? 0 : (size_t)data[0] * 2654435761u % len;
	rv2 = decode(mode, buf, k, &h2, &m2, &why2);
	if (rv2 != FLP_NEED_MORE) {
		CHECK(rv2 == rv);
		if (rv == FLP_MALFORMED)
			CHECK(strcmp(why, why2) == 0);
	}
	if (rv > 0) {
		CHECK(decode(mode, buf, (size_t)rv - 1, &h2, &m2, &why2) ==
		    FLP_NEED_MORE);
		if (mode < 2)
			check_hello(mode, buf, (size_t)rv, &h);
		else
			check_msg(mode, buf, (size_t)rv, &m);
	}
	return 0;
}
