/*
 * The follow subscription's codec (protocol.md 1.10.8); the contract is
 * in followproto.h.  As in agentproto.c, a header field that dooms a PDU
 * is judged before its body arrives.
 */
#include <string.h>

#include "proto/followproto.h"

#define FAIL(msg) do { if (why != NULL) *why = (msg); return FLP_MALFORMED; } while (0)

/* Offsets in the hello, after the op header. */
#define H_EXTVER	8
#define H_KIND		10
#define H_LEN		12
#define H_BODY		16

const char *
flp_type_name(uint16_t type)
{
	static const char *const names[] = { "?", "LIST_BEGIN", "LIST_END",
	    "AUTHORIZED", "WITHDRAWN", "PING", "PONG" };

	return type >= 1 && type <= FLP_TYPE_MAX ? names[type] : "UNKNOWN";
}

const char *
flp_reason_name(uint32_t reason)
{
	switch (reason) {
	case FLP_WHY_NOT_AUTHORIZED:	return "not authorized for this host";
	case FLP_WHY_GONE:		return "gone";
	default:			return "?";
	}
}

bool
flp_host_valid(const char *s)
{
	size_t i;

	for (i = 0; s[i] != '\0'; i++) {
		char c = s[i];

		if (i >= FLP_HOST_SIZE - 1)
			return false;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '.' || c == '-' ||
		    c == '_' || c == ':'))
			return false;
	}
	return i > 0;
}

bool
flp_is_hello(const uint8_t *buf, size_t len)
{
	return len >= 4 && get_be16(buf) == USBIP_VERSION &&
	    get_be16(buf + 2) == OP_REQ_FOLLOW;
}

int
flp_hello_decode(const uint8_t *buf, size_t len, enum usbip_flow flow,
    struct flp_hello *h, const char **why)
{
	struct flp_hello local;
	bool req = flow == USBIP_FROM_CLIENT;
	uint32_t want, total;
	const uint8_t *b;

	if (h == NULL)
		h = &local;
	memset(h, 0, sizeof(*h));
	if (len < 4)
		return FLP_NEED_MORE;
	if (get_be16(buf) != USBIP_VERSION)
		FAIL("unsupported USB/IP version");
	h->code = get_be16(buf + 2);
	if (h->code != (req ? OP_REQ_FOLLOW : OP_REP_FOLLOW))
		FAIL(req ? "not OP_REQ_FOLLOW" : "not OP_REP_FOLLOW");
	if (len < USBIP_OP_HDR_LEN)
		return FLP_NEED_MORE;
	h->status = get_be32(buf + 4);
	if (req && h->status != ST_OK)
		FAIL("request with non-zero status");
	if (!req && h->status != ST_OK && h->status != ST_NA)
		FAIL("follow status not ST_OK or ST_NA");
	if (len < H_KIND)
		return FLP_NEED_MORE;
	h->ext_version = get_be16(buf + H_EXTVER);
	if (h->ext_version == 0)
		FAIL("follow version 0");
	if (len < H_LEN)
		return FLP_NEED_MORE;
	h->kind = get_be16(buf + H_KIND);
	if (h->ext_version == FLP_EXT_VERSION && h->kind != FLP_KIND_SUBSCRIBE)
		FAIL("unknown follow kind");
	if (len < H_BODY)
		return FLP_NEED_MORE;
	h->len = get_be32(buf + H_LEN);
	if (h->len > FLP_HELLO_MAX_BODY)
		FAIL("follow body longer than 1024 bytes");
	total = H_BODY + h->len;
	if (h->ext_version != FLP_EXT_VERSION)
		return len < total ? FLP_NEED_MORE : (int)total;
	want = req ? FLP_REQ_BODY : h->status == ST_OK ? FLP_REP_BODY : 0;
	if (h->len != want)
		FAIL("follow body length wrong");
	if (len < total)
		return FLP_NEED_MORE;
	b = buf + H_BODY;
	if (req)
		h->caps = get_be32(b);
	else if (want > 0) {
		h->heartbeat_s = get_be16(b);
		if (h->heartbeat_s < FLP_HEARTBEAT_MIN_S ||
		    h->heartbeat_s > FLP_HEARTBEAT_MAX_S)
			FAIL("follow heartbeat out of range 1..3600");
		if (get_padded(b + 2, FLP_HOST_SIZE, h->host) == -1 ||
		    !flp_host_valid(h->host))
			FAIL("follow host not [A-Za-z0-9._:-]{1,63} NUL-padded");
	}
	return (int)total;
}

static size_t
hello_hdr(uint8_t *out, uint16_t code, uint32_t status, uint32_t len)
{
	usbip_op_hdr_encode(out, code, status);
	put_be16(out + H_EXTVER, FLP_EXT_VERSION);
	put_be16(out + H_KIND, FLP_KIND_SUBSCRIBE);
	put_be32(out + H_LEN, len);
	return H_BODY;
}

size_t
flp_req_encode(uint8_t *out, uint32_t caps)
{
	size_t n = hello_hdr(out, OP_REQ_FOLLOW, ST_OK, FLP_REQ_BODY);

	put_be32(out + n, caps);
	return n + FLP_REQ_BODY;
}

size_t
flp_rep_encode(uint8_t *out, uint32_t status, uint16_t heartbeat_s,
    const char *host)
{
	size_t n;

	if (status != ST_OK)
		return hello_hdr(out, OP_REP_FOLLOW, status, 0);
	n = hello_hdr(out, OP_REP_FOLLOW, ST_OK, FLP_REP_BODY);
	put_be16(out + n, heartbeat_s);
	put_padded(out + n + 2, FLP_HOST_SIZE, host);
	return n + FLP_REP_BODY;
}

/* The body length of each type; who may send it. */
static const struct {
	uint32_t	body;
	enum flp_from	from;
} msg_kind[] = {
	[FLP_LIST_BEGIN] = { 4, FLP_FROM_GATEWAY },
	[FLP_LIST_END] = { 0, FLP_FROM_GATEWAY },
	[FLP_AUTHORIZED] = { USBIP_BUSID_SIZE, FLP_FROM_GATEWAY },
	[FLP_WITHDRAWN] = { USBIP_BUSID_SIZE + 4, FLP_FROM_GATEWAY },
	[FLP_PING] = { 8, FLP_FROM_GATEWAY },
	[FLP_PONG] = { 8, FLP_FROM_HOST },
};

int
flp_msg_decode(const uint8_t *buf, size_t len, enum flp_from from,
    struct flp_msg *m, const char **why)
{
	struct flp_msg local;
	uint32_t mlen;
	const uint8_t *b;

	if (m == NULL)
		m = &local;
	memset(m, 0, sizeof(*m));
	if (len < 4)
		return FLP_NEED_MORE;
	mlen = get_be32(buf);
	if (mlen < FLP_MSG_LEN_MIN || mlen > FLP_MSG_LEN_MAX)
		FAIL("follow message length out of range");
	if (len < 6)
		return FLP_NEED_MORE;
	m->type = get_be16(buf + 4);
	if (m->type < 1 || m->type > FLP_TYPE_MAX)
		FAIL("unknown follow message type");
	if (msg_kind[m->type].from != from)
		FAIL("follow message type from the wrong side");
	if (mlen != FLP_MSG_LEN_MIN + msg_kind[m->type].body)
		FAIL("follow message length wrong for its type");
	if (len < 8)
		return FLP_NEED_MORE;
	if (get_be16(buf + 6) != 0)
		FAIL("follow message flags not 0");
	if (len < 4 + mlen)
		return FLP_NEED_MORE;
	m->seq = get_be32(buf + 8);
	b = buf + 12;
	switch (m->type) {
	case FLP_LIST_BEGIN:
		m->count = get_be32(b);
		if (m->count > FLP_MAX_DEVICES)
			FAIL("follow list count over 1024");
		break;
	case FLP_AUTHORIZED:
	case FLP_WITHDRAWN:
		if (get_padded(b, USBIP_BUSID_SIZE, m->busid) == -1 ||
		    !usbip_busid_valid(m->busid))
			FAIL("follow busid invalid");
		if (m->type == FLP_WITHDRAWN) {
			m->reason = get_be32(b + USBIP_BUSID_SIZE);
			if (m->reason < 1 || m->reason > FLP_WHY_MAX)
				FAIL("follow withdrawal reason unknown");
		}
		break;
	case FLP_PING:
	case FLP_PONG:
		m->echo = (uint64_t)get_be32(b) << 32 | get_be32(b + 4);
		break;
	}
	return (int)(4 + mlen);
}

size_t
flp_msg_encode(uint8_t *out, const struct flp_msg *m)
{
	uint32_t body = m->type >= 1 && m->type <= FLP_TYPE_MAX ?
	    msg_kind[m->type].body : 0;
	uint8_t *b = out + 12;

	put_be32(out, FLP_MSG_LEN_MIN + body);
	put_be16(out + 4, m->type);
	put_be16(out + 6, 0);
	put_be32(out + 8, m->seq);
	switch (m->type) {
	case FLP_LIST_BEGIN:
		put_be32(b, m->count);
		break;
	case FLP_AUTHORIZED:
	case FLP_WITHDRAWN:
		put_padded(b, USBIP_BUSID_SIZE, m->busid);
		if (m->type == FLP_WITHDRAWN)
			put_be32(b + USBIP_BUSID_SIZE, m->reason);
		break;
	case FLP_PING:
	case FLP_PONG:
		put_be32(b, (uint32_t)(m->echo >> 32));
		put_be32(b + 4, (uint32_t)m->echo);
		break;
	}
	return 12 + body;
}
