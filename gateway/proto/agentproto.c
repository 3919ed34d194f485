/*
 * The extension codec (protocol.md 1.9.4); the contract is in
 * agentproto.h.  Like usbip.c, every decoder checks the length it was
 * given before it reads a field and reports the first rule a PDU breaks;
 * a header field that dooms a PDU is judged before its body arrives, so
 * a peer cannot make the receiver buffer a PDU it will refuse.
 */
#include <string.h>

#include "proto/agentproto.h"

#define FAIL(msg) do { if (why != NULL) *why = (msg); return AGP_MALFORMED; } while (0)

/* Offsets in the hello, after the op header. */
#define H_EXTVER	8
#define H_KIND		10
#define H_LEN		12
#define H_BODY		16

const char *
agp_kind_name(uint16_t kind)
{
	switch (kind) {
	case AGP_KIND_CONTROL:	return "CONTROL";
	case AGP_KIND_DIALBACK:	return "DIALBACK";
	default:		return "UNKNOWN";
	}
}

const char *
agp_type_name(uint16_t type)
{
	static const char *const names[] = { "?", "SNAPSHOT_BEGIN",
	    "SNAPSHOT_END", "DEV_ADDED", "DEV_REMOVED", "OPEN_IMPORT",
	    "OPEN_FAILED", "PING", "PONG", "BYE" };

	return type >= 1 && type <= AGP_TYPE_MAX ? names[type] : "UNKNOWN";
}

bool
agp_name_valid(const char *s)
{
	size_t i;

	for (i = 0; s[i] != '\0'; i++) {
		char c = s[i];

		if (i >= AGP_NAME_SIZE - 1)
			return false;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_'))
			return false;
	}
	return i > 0;
}

bool
agp_is_hello(const uint8_t *buf, size_t len, bool req)
{
	return len >= 4 && get_be16(buf) == USBIP_VERSION &&
	    get_be16(buf + 2) == (req ? OP_REQ_USBGW : OP_REP_USBGW);
}

/* ---- hello ----------------------------------------------------------- */

/* The body length a version-1 hello of this kind must have. */
static int
hello_body_len(uint16_t kind, bool req, uint32_t status, uint32_t *want,
    const char **why)
{
	if (!req && status != ST_OK) {
		*want = 0;
		return 0;
	}
	switch (kind) {
	case AGP_KIND_CONTROL:
		*want = req ? AGP_CONTROL_REQ_BODY : AGP_CONTROL_REP_BODY;
		return 0;
	case AGP_KIND_DIALBACK:
		*want = req ? AGP_DIALBACK_REQ_BODY : 0;
		return 0;
	default:
		FAIL("unknown extension kind");
	}
}

int
agp_hello_decode(const uint8_t *buf, size_t len, enum usbip_flow flow,
    struct agp_hello *h, const char **why)
{
	struct agp_hello local;
	bool req = flow == USBIP_FROM_CLIENT;
	uint32_t want, total;
	const uint8_t *b;

	if (h == NULL)
		h = &local;
	memset(h, 0, sizeof(*h));
	if (len < 4)
		return AGP_NEED_MORE;
	if (get_be16(buf) != USBIP_VERSION)
		FAIL("unsupported USB/IP version");
	h->code = get_be16(buf + 2);
	if (h->code != OP_REQ_USBGW && h->code != OP_REP_USBGW)
		FAIL("not an extension op code");
	if (h->code == OP_REQ_USBGW && !req)
		FAIL("OP_REQ_USBGW from the accepting side");
	if (h->code == OP_REP_USBGW && req)
		FAIL("OP_REP_USBGW from the connecting side");
	if (len < USBIP_OP_HDR_LEN)
		return AGP_NEED_MORE;
	h->status = get_be32(buf + 4);
	if (req && h->status != ST_OK)
		FAIL("request with non-zero status");
	if (!req && h->status != ST_OK && h->status != ST_NA)
		FAIL("extension status not ST_OK or ST_NA");
	if (len < H_KIND)
		return AGP_NEED_MORE;
	h->ext_version = get_be16(buf + H_EXTVER);
	if (h->ext_version == 0)
		FAIL("extension version 0");
	if (len < H_LEN)
		return AGP_NEED_MORE;
	h->kind = get_be16(buf + H_KIND);
	if (len < H_BODY)
		return AGP_NEED_MORE;
	h->len = get_be32(buf + H_LEN);
	if (h->len > AGP_HELLO_MAX_BODY)
		FAIL("extension body longer than 1024 bytes");
	total = H_BODY + h->len;
	if (h->ext_version != AGP_EXT_VERSION) {
		/* another version: whole, unread, for the receiver to refuse */
		if (len < total)
			return AGP_NEED_MORE;
		return (int)total;
	}
	if (hello_body_len(h->kind, req, h->status, &want, why) == -1)
		return AGP_MALFORMED;
	if (h->len != want)
		FAIL("extension body length wrong for its kind");
	if (len < total)
		return AGP_NEED_MORE;
	b = buf + H_BODY;
	if (want == 0)
		return (int)total;
	switch (h->kind) {
	case AGP_KIND_CONTROL:
		if (get_padded(b, AGP_NAME_SIZE, h->name) == -1 ||
		    !agp_name_valid(h->name))
			FAIL("CONTROL name not [A-Za-z0-9._-]{1,31} NUL-padded");
		h->caps = get_be32(b + AGP_NAME_SIZE);
		if (req)
			memcpy(h->nonce, b + AGP_NAME_SIZE + 4, AGP_NONCE_LEN);
		else {
			h->heartbeat_s = get_be16(b + AGP_NAME_SIZE + 4);
			if (h->heartbeat_s < AGP_HEARTBEAT_MIN_S ||
			    h->heartbeat_s > AGP_HEARTBEAT_MAX_S)
				FAIL("CONTROL heartbeat out of range 1..3600");
		}
		break;
	case AGP_KIND_DIALBACK:
		memcpy(h->token, b, AGP_TOKEN_LEN);
		if (get_padded(b + AGP_TOKEN_LEN, USBIP_BUSID_SIZE,
		    h->busid) == -1 || !usbip_busid_valid(h->busid))
			FAIL("DIALBACK busid invalid");
		break;
	}
	return (int)total;
}

static size_t
hello_hdr(uint8_t *out, uint16_t code, uint32_t status, uint16_t kind,
    uint32_t len)
{
	usbip_op_hdr_encode(out, code, status);
	put_be16(out + H_EXTVER, AGP_EXT_VERSION);
	put_be16(out + H_KIND, kind);
	put_be32(out + H_LEN, len);
	return H_BODY;
}

size_t
agp_control_req_encode(uint8_t *out, const char *name, uint32_t caps,
    const uint8_t nonce[AGP_NONCE_LEN])
{
	size_t n = hello_hdr(out, OP_REQ_USBGW, ST_OK, AGP_KIND_CONTROL,
	    AGP_CONTROL_REQ_BODY);

	put_padded(out + n, AGP_NAME_SIZE, name);
	put_be32(out + n + AGP_NAME_SIZE, caps);
	memcpy(out + n + AGP_NAME_SIZE + 4, nonce, AGP_NONCE_LEN);
	return n + AGP_CONTROL_REQ_BODY;
}

size_t
agp_control_rep_encode(uint8_t *out, uint32_t status, const char *name,
    uint32_t caps, uint16_t heartbeat_s)
{
	size_t n;

	if (status != ST_OK)
		return agp_empty_rep_encode(out, status, AGP_KIND_CONTROL);
	n = hello_hdr(out, OP_REP_USBGW, ST_OK, AGP_KIND_CONTROL,
	    AGP_CONTROL_REP_BODY);
	put_padded(out + n, AGP_NAME_SIZE, name);
	put_be32(out + n + AGP_NAME_SIZE, caps);
	put_be16(out + n + AGP_NAME_SIZE + 4, heartbeat_s);
	return n + AGP_CONTROL_REP_BODY;
}

size_t
agp_dialback_req_encode(uint8_t *out, const uint8_t token[AGP_TOKEN_LEN],
    const char *busid)
{
	size_t n = hello_hdr(out, OP_REQ_USBGW, ST_OK, AGP_KIND_DIALBACK,
	    AGP_DIALBACK_REQ_BODY);

	memcpy(out + n, token, AGP_TOKEN_LEN);
	put_padded(out + n + AGP_TOKEN_LEN, USBIP_BUSID_SIZE, busid);
	return n + AGP_DIALBACK_REQ_BODY;
}

size_t
agp_empty_rep_encode(uint8_t *out, uint32_t status, uint16_t kind)
{
	return hello_hdr(out, OP_REP_USBGW, status, kind, 0);
}

/* ---- messages -------------------------------------------------------- */

/* The sender each type may come from: 1 agent, 2 gateway, 3 both. */
static const uint8_t type_from[AGP_TYPE_MAX + 1] = {
	[AGP_SNAPSHOT_BEGIN] = 1, [AGP_SNAPSHOT_END] = 1,
	[AGP_DEV_ADDED] = 1, [AGP_DEV_REMOVED] = 1, [AGP_OPEN_IMPORT] = 2,
	[AGP_OPEN_FAILED] = 1, [AGP_PING] = 3, [AGP_PONG] = 3, [AGP_BYE] = 3,
};

/* Body length of each type; DEV_ADDED varies (checked apart). */
static const uint16_t type_body[AGP_TYPE_MAX + 1] = {
	[AGP_SNAPSHOT_BEGIN] = 4, [AGP_SNAPSHOT_END] = 0,
	[AGP_DEV_REMOVED] = USBIP_BUSID_SIZE,
	[AGP_OPEN_IMPORT] = USBIP_BUSID_SIZE + AGP_TOKEN_LEN,
	[AGP_OPEN_FAILED] = AGP_TOKEN_LEN + 4, [AGP_PING] = 8,
	[AGP_PONG] = 8, [AGP_BYE] = 4,
};

static int
get_busid(const uint8_t *p, char *out)
{
	return get_padded(p, USBIP_BUSID_SIZE, out) == -1 ||
	    !usbip_busid_valid(out) ? -1 : 0;
}

/* DEV_ADDED's body: a device record through the usbip codec, then its
 * interfaces. */
static int
dev_added_decode(const uint8_t *b, uint32_t blen, struct agp_msg *m,
    const char **why)
{
	uint8_t rep[USBIP_IMPORT_REP_LEN];
	struct usbip_op op;
	uint32_t i, nintf = (blen - USBIP_DEV_LEN) / USBIP_INTF_LEN;
	const uint8_t *ip;

	memset(&op, 0, sizeof(op));	/* the strings' tails stay zero */
	/* the record as an import reply carries it: the codec's checks */
	usbip_op_hdr_encode(rep, OP_REP_IMPORT, ST_OK);
	memcpy(rep + USBIP_OP_HDR_LEN, b, USBIP_DEV_LEN);
	if (usbip_op_decode(rep, sizeof(rep), USBIP_FROM_SERVER, &op,
	    why) != USBIP_IMPORT_REP_LEN)
		return AGP_MALFORMED;
	m->dev = op.dev;
	/* ours, not stock: nothing but NULs after the strings */
	if (get_padded(b, USBIP_PATH_SIZE, m->dev.path) == -1)
		FAIL("DEV_ADDED path not NUL-padded");
	if (get_padded(b + USBIP_PATH_SIZE, USBIP_BUSID_SIZE,
	    m->dev.busid) == -1)
		FAIL("DEV_ADDED busid not NUL-padded");
	if (!usbip_busid_valid(m->dev.busid))
		FAIL("DEV_ADDED busid invalid");
	if (m->dev.bNumInterfaces != nintf)
		FAIL("DEV_ADDED interface records differ from bNumInterfaces");
	for (i = 0; i < nintf; i++) {
		ip = b + USBIP_DEV_LEN + i * USBIP_INTF_LEN;
		if (ip[3] != 0)
			FAIL("DEV_ADDED interface pad byte not 0");
		m->intf[i].bInterfaceClass = ip[0];
		m->intf[i].bInterfaceSubClass = ip[1];
		m->intf[i].bInterfaceProtocol = ip[2];
	}
	return 0;
}

int
agp_msg_decode(const uint8_t *buf, size_t len, enum agp_from from,
    struct agp_msg *m, const char **why)
{
	struct agp_msg local;
	uint32_t mlen, blen;
	uint16_t type;
	const uint8_t *b;

	if (m == NULL)
		m = &local;
	memset(m, 0, sizeof(*m));
	if (len < 4)
		return AGP_NEED_MORE;
	mlen = get_be32(buf);
	if (mlen < AGP_MSG_LEN_MIN || mlen > AGP_MSG_LEN_MAX)
		FAIL("message length out of range 8..4096");
	blen = mlen - AGP_MSG_LEN_MIN;
	if (len < 6)
		return AGP_NEED_MORE;
	type = get_be16(buf + 4);
	m->type = type;
	if (type < 1 || type > AGP_TYPE_MAX)
		FAIL("unknown message type");
	if (!(type_from[type] & (from == AGP_FROM_AGENT ? 1 : 2)))
		FAIL(from == AGP_FROM_AGENT ? "message type not sent by an "
		    "agent" : "message type not sent by a gateway");
	if (type == AGP_DEV_ADDED) {
		if (blen < USBIP_DEV_LEN || (blen - USBIP_DEV_LEN) %
		    USBIP_INTF_LEN != 0 || (blen - USBIP_DEV_LEN) /
		    USBIP_INTF_LEN > USBIP_MAX_INTERFACES)
			FAIL("message length wrong for its type");
	} else if (blen != type_body[type])
		FAIL("message length wrong for its type");
	if (len < 8)
		return AGP_NEED_MORE;
	if (get_be16(buf + 6) != 0)
		FAIL("message flags not 0");
	if (len < 4 + (size_t)mlen)
		return AGP_NEED_MORE;
	m->seq = get_be32(buf + 8);
	b = buf + AGP_MSG_HDR_LEN;
	switch (type) {
	case AGP_SNAPSHOT_BEGIN:
		m->count = get_be32(b);
		if (m->count > USBIP_MAX_NDEV)
			FAIL("snapshot count exceeds USBIP_MAX_NDEV");
		break;
	case AGP_SNAPSHOT_END:
		break;
	case AGP_DEV_ADDED:
		if (dev_added_decode(b, blen, m, why) == -1)
			return AGP_MALFORMED;
		break;
	case AGP_DEV_REMOVED:
		if (get_busid(b, m->busid) == -1)
			FAIL("DEV_REMOVED busid invalid");
		break;
	case AGP_OPEN_IMPORT:
		if (get_busid(b, m->busid) == -1)
			FAIL("OPEN_IMPORT busid invalid");
		memcpy(m->token, b + USBIP_BUSID_SIZE, AGP_TOKEN_LEN);
		break;
	case AGP_OPEN_FAILED:
		memcpy(m->token, b, AGP_TOKEN_LEN);
		m->status = get_be32(b + AGP_TOKEN_LEN);
		if (m->status == ST_OK || m->status > ST_MAX)
			FAIL("OPEN_FAILED status out of range 1..5");
		break;
	case AGP_PING:
	case AGP_PONG:
		m->echo = get_be64(b);
		break;
	case AGP_BYE:
		m->reason = get_be32(b);
		break;
	}
	return (int)(4 + mlen);
}

size_t
agp_msg_encode(uint8_t *out, const struct agp_msg *m)
{
	uint8_t *b = out + AGP_MSG_HDR_LEN;
	uint32_t blen = 0, i;

	switch (m->type) {
	case AGP_SNAPSHOT_BEGIN:
		put_be32(b, m->count);
		blen = 4;
		break;
	case AGP_DEV_ADDED:
		usbip_dev_encode(b, &m->dev);
		blen = USBIP_DEV_LEN;
		for (i = 0; i < m->dev.bNumInterfaces &&
		    i < USBIP_MAX_INTERFACES; i++, blen += USBIP_INTF_LEN)
			usbip_intf_encode(b + blen, &m->intf[i]);
		break;
	case AGP_DEV_REMOVED:
		put_padded(b, USBIP_BUSID_SIZE, m->busid);
		blen = USBIP_BUSID_SIZE;
		break;
	case AGP_OPEN_IMPORT:
		put_padded(b, USBIP_BUSID_SIZE, m->busid);
		memcpy(b + USBIP_BUSID_SIZE, m->token, AGP_TOKEN_LEN);
		blen = USBIP_BUSID_SIZE + AGP_TOKEN_LEN;
		break;
	case AGP_OPEN_FAILED:
		memcpy(b, m->token, AGP_TOKEN_LEN);
		put_be32(b + AGP_TOKEN_LEN, m->status);
		blen = AGP_TOKEN_LEN + 4;
		break;
	case AGP_PING:
	case AGP_PONG:
		put_be64(b, m->echo);
		blen = 8;
		break;
	case AGP_BYE:
		put_be32(b, m->reason);
		blen = 4;
		break;
	default:
		break;
	}
	put_be32(out, AGP_MSG_LEN_MIN + blen);
	put_be16(out + 4, m->type);
	put_be16(out + 6, 0);
	put_be32(out + 8, m->seq);
	return AGP_MSG_HDR_LEN + blen;
}

size_t
agp_dev_added_encode(uint8_t *out, uint32_t seq, const struct usbip_dev *dev,
    const struct usbip_intf *intf)
{
	struct agp_msg m;
	uint32_t i;

	memset(&m, 0, sizeof(m));
	m.type = AGP_DEV_ADDED;
	m.seq = seq;
	m.dev = *dev;
	if (m.dev.bNumInterfaces > USBIP_MAX_INTERFACES)
		m.dev.bNumInterfaces = USBIP_MAX_INTERFACES;
	for (i = 0; i < m.dev.bNumInterfaces; i++)
		m.intf[i] = intf[i];
	return agp_msg_encode(out, &m);
}
