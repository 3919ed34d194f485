/*
 * The USB/IP codec.  See usbip.h for the contract and protocol.md part 1
 * for the wire format.  Every decoder checks the length it was given
 * before it reads a field, and reports the first rule a PDU breaks.
 */
#include <string.h>

#include "proto/usbip.h"

/* Offsets in the 312-byte device record. */
#define DEV_PATH	0x000
#define DEV_BUSID	0x100
#define DEV_BUSNUM	0x120
#define DEV_DEVNUM	0x124
#define DEV_SPEED	0x128
#define DEV_VENDOR	0x12c
#define DEV_PRODUCT	0x12e
#define DEV_BCD		0x130
#define DEV_CLASS	0x132
#define DEV_SUBCLASS	0x133
#define DEV_PROTOCOL	0x134
#define DEV_CONFVAL	0x135
#define DEV_NCONF	0x136
#define DEV_NINTF	0x137

/* Offsets in the 48-byte URB header. */
#define URB_COMMAND	0
#define URB_SEQNUM	4
#define URB_DEVID	8
#define URB_DIR		12
#define URB_EP		16
#define URB_U		20	/* command-specific part, 28 bytes */

#define FAIL(msg) do { if (why != NULL) *why = (msg); return USBIP_MALFORMED; } while (0)

const char *
usbip_op_name(uint16_t code)
{
	switch (code) {
	case OP_REQ_DEVLIST:	return "OP_REQ_DEVLIST";
	case OP_REP_DEVLIST:	return "OP_REP_DEVLIST";
	case OP_REQ_IMPORT:	return "OP_REQ_IMPORT";
	case OP_REP_IMPORT:	return "OP_REP_IMPORT";
	default:		return "OP_UNKNOWN";
	}
}

const char *
usbip_st_name(uint32_t status)
{
	static const char *const names[] = {
		"ST_OK", "ST_NA", "ST_DEV_BUSY", "ST_DEV_ERR", "ST_NODEV",
		"ST_ERROR"
	};

	return status <= ST_MAX ? names[status] : "ST_UNKNOWN";
}

const char *
usbip_cmd_name(uint32_t command)
{
	switch (command) {
	case USBIP_CMD_SUBMIT:	return "CMD_SUBMIT";
	case USBIP_CMD_UNLINK:	return "CMD_UNLINK";
	case USBIP_RET_SUBMIT:	return "RET_SUBMIT";
	case USBIP_RET_UNLINK:	return "RET_UNLINK";
	default:		return "CMD_UNKNOWN";
	}
}

const char *
usbip_speed_name(uint32_t speed)
{
	static const char *const names[] = {
		"unknown", "low", "full", "high", "wireless", "super",
		"super-plus"
	};

	return speed <= USBIP_SPEED_SUPER_PLUS ? names[speed] : "invalid";
}

bool
usbip_busid_valid(const char *busid)
{
	size_t i;

	for (i = 0; busid[i] != '\0'; i++) {
		char c = busid[i];

		if (i >= USBIP_BUSID_SIZE - 1)
			return false;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '.' || c == '-' ||
		    c == ':' || c == '_'))
			return false;
	}
	return i > 0;
}

/* Copy a fixed-size wire string; fails unless a NUL is inside it. */
static int
get_str(const uint8_t *p, size_t size, char *out)
{
	const uint8_t *nul = memchr(p, '\0', size);

	if (nul == NULL)
		return -1;
	memcpy(out, p, (size_t)(nul - p));
	out[nul - p] = '\0';
	return 0;
}

static void
put_str(uint8_t *p, size_t size, const char *s)
{
	size_t n = strnlen(s, size - 1);

	memset(p, 0, size);
	memcpy(p, s, n);
}

/* ---- op phase -------------------------------------------------------- */

static int
dev_decode(const uint8_t *p, struct usbip_dev *d, const char **why)
{
	if (get_str(p + DEV_PATH, USBIP_PATH_SIZE, d->path) == -1)
		FAIL("device path not NUL-terminated");
	if (get_str(p + DEV_BUSID, USBIP_BUSID_SIZE, d->busid) == -1)
		FAIL("device busid not NUL-terminated");
	d->busnum = get_be32(p + DEV_BUSNUM);
	d->devnum = get_be32(p + DEV_DEVNUM);
	d->speed = get_be32(p + DEV_SPEED);
	d->idVendor = get_be16(p + DEV_VENDOR);
	d->idProduct = get_be16(p + DEV_PRODUCT);
	d->bcdDevice = get_be16(p + DEV_BCD);
	d->bDeviceClass = p[DEV_CLASS];
	d->bDeviceSubClass = p[DEV_SUBCLASS];
	d->bDeviceProtocol = p[DEV_PROTOCOL];
	d->bConfigurationValue = p[DEV_CONFVAL];
	d->bNumConfigurations = p[DEV_NCONF];
	d->bNumInterfaces = p[DEV_NINTF];
	if (d->speed > USBIP_SPEED_SUPER_PLUS)
		FAIL("device speed out of range");
	if (d->bNumInterfaces > USBIP_MAX_INTERFACES)
		FAIL("bNumInterfaces exceeds USBIP_MAX_INTERFACES");
	return 0;
}

int
usbip_op_decode(const uint8_t *buf, size_t len, enum usbip_flow flow,
    struct usbip_op *op, const char **why)
{
	struct usbip_op local;
	size_t off, need;
	uint32_t i, ndev;

	if (op == NULL)
		op = &local;
	if (len < USBIP_OP_HDR_LEN)
		return USBIP_NEED_MORE;
	op->hdr.version = get_be16(buf);
	op->hdr.code = get_be16(buf + 2);
	op->hdr.status = get_be32(buf + 4);
	if (op->hdr.version != USBIP_VERSION)
		FAIL("unsupported USB/IP version");

	switch (op->hdr.code) {
	case OP_REQ_DEVLIST:
		if (flow != USBIP_FROM_CLIENT)
			FAIL("OP_REQ_DEVLIST from the server side");
		if (op->hdr.status != ST_OK)
			FAIL("request with non-zero status");
		return USBIP_OP_HDR_LEN;

	case OP_REQ_IMPORT:
		if (flow != USBIP_FROM_CLIENT)
			FAIL("OP_REQ_IMPORT from the server side");
		if (op->hdr.status != ST_OK)
			FAIL("request with non-zero status");
		if (len < USBIP_IMPORT_REQ_LEN)
			return USBIP_NEED_MORE;
		if (get_str(buf + USBIP_OP_HDR_LEN, USBIP_BUSID_SIZE,
		    op->busid) == -1)
			FAIL("import busid not NUL-terminated");
		return USBIP_IMPORT_REQ_LEN;

	case OP_REP_IMPORT:
		if (flow != USBIP_FROM_SERVER)
			FAIL("OP_REP_IMPORT from the client side");
		if (op->hdr.status > ST_MAX)
			FAIL("status code out of range");
		if (op->hdr.status != ST_OK)
			return USBIP_OP_HDR_LEN;
		if (len < USBIP_IMPORT_REP_LEN)
			return USBIP_NEED_MORE;
		if (dev_decode(buf + USBIP_OP_HDR_LEN, &op->dev, why) == -1)
			return USBIP_MALFORMED;
		return USBIP_IMPORT_REP_LEN;

	case OP_REP_DEVLIST:
		if (flow != USBIP_FROM_SERVER)
			FAIL("OP_REP_DEVLIST from the client side");
		if (op->hdr.status > ST_MAX)
			FAIL("status code out of range");
		if (op->hdr.status != ST_OK)
			return USBIP_OP_HDR_LEN;
		if (len < USBIP_OP_HDR_LEN + 4)
			return USBIP_NEED_MORE;
		ndev = get_be32(buf + USBIP_OP_HDR_LEN);
		if (ndev > USBIP_MAX_NDEV)
			FAIL("device count exceeds USBIP_MAX_NDEV");
		op->ndev = ndev;
		off = USBIP_OP_HDR_LEN + 4;
		for (i = 0; i < ndev; i++) {
			struct usbip_dev d;

			if (len - off < USBIP_DEV_LEN)
				return USBIP_NEED_MORE;
			if (dev_decode(buf + off, &d, why) == -1)
				return USBIP_MALFORMED;
			need = USBIP_DEV_LEN +
			    (size_t)d.bNumInterfaces * USBIP_INTF_LEN;
			if (len - off < need)
				return USBIP_NEED_MORE;
			off += need;
		}
		return (int)off;

	default:
		FAIL("unknown op code");
	}
}

int
usbip_devlist_next(const uint8_t *buf, size_t len, size_t *off,
    struct usbip_dev *dev, struct usbip_intf *intf)
{
	const char *why;
	size_t o = *off;
	int i;

	if (o == 0)
		o = USBIP_OP_HDR_LEN + 4;
	if (o > len || len - o < USBIP_DEV_LEN)
		return 0;
	if (dev_decode(buf + o, dev, &why) == -1)
		return 0;
	o += USBIP_DEV_LEN;
	if (len - o < (size_t)dev->bNumInterfaces * USBIP_INTF_LEN)
		return 0;
	for (i = 0; i < dev->bNumInterfaces; i++, o += USBIP_INTF_LEN) {
		if (intf != NULL) {
			intf[i].bInterfaceClass = buf[o];
			intf[i].bInterfaceSubClass = buf[o + 1];
			intf[i].bInterfaceProtocol = buf[o + 2];
		}
	}
	*off = o;
	return 1;
}

size_t
usbip_op_hdr_encode(uint8_t out[USBIP_OP_HDR_LEN], uint16_t code,
    uint32_t status)
{
	put_be16(out, USBIP_VERSION);
	put_be16(out + 2, code);
	put_be32(out + 4, status);
	return USBIP_OP_HDR_LEN;
}

size_t
usbip_import_req_encode(uint8_t out[USBIP_IMPORT_REQ_LEN], const char *busid)
{
	usbip_op_hdr_encode(out, OP_REQ_IMPORT, ST_OK);
	put_str(out + USBIP_OP_HDR_LEN, USBIP_BUSID_SIZE, busid);
	return USBIP_IMPORT_REQ_LEN;
}

size_t
usbip_dev_encode(uint8_t out[USBIP_DEV_LEN], const struct usbip_dev *d)
{
	put_str(out + DEV_PATH, USBIP_PATH_SIZE, d->path);
	put_str(out + DEV_BUSID, USBIP_BUSID_SIZE, d->busid);
	put_be32(out + DEV_BUSNUM, d->busnum);
	put_be32(out + DEV_DEVNUM, d->devnum);
	put_be32(out + DEV_SPEED, d->speed);
	put_be16(out + DEV_VENDOR, d->idVendor);
	put_be16(out + DEV_PRODUCT, d->idProduct);
	put_be16(out + DEV_BCD, d->bcdDevice);
	out[DEV_CLASS] = d->bDeviceClass;
	out[DEV_SUBCLASS] = d->bDeviceSubClass;
	out[DEV_PROTOCOL] = d->bDeviceProtocol;
	out[DEV_CONFVAL] = d->bConfigurationValue;
	out[DEV_NCONF] = d->bNumConfigurations;
	out[DEV_NINTF] = d->bNumInterfaces;
	return USBIP_DEV_LEN;
}

size_t
usbip_intf_encode(uint8_t out[USBIP_INTF_LEN], const struct usbip_intf *i)
{
	out[0] = i->bInterfaceClass;
	out[1] = i->bInterfaceSubClass;
	out[2] = i->bInterfaceProtocol;
	out[3] = 0;
	return USBIP_INTF_LEN;
}

size_t
usbip_import_rep_encode(uint8_t out[USBIP_IMPORT_REP_LEN], uint32_t status,
    const struct usbip_dev *dev)
{
	usbip_op_hdr_encode(out, OP_REP_IMPORT, status);
	if (status != ST_OK || dev == NULL)
		return USBIP_OP_HDR_LEN;
	return USBIP_OP_HDR_LEN + usbip_dev_encode(out + USBIP_OP_HDR_LEN, dev);
}

size_t
usbip_devlist_rep_hdr_encode(uint8_t out[USBIP_OP_HDR_LEN + 4], uint32_t ndev)
{
	usbip_op_hdr_encode(out, OP_REP_DEVLIST, ST_OK);
	put_be32(out + USBIP_OP_HDR_LEN, ndev);
	return USBIP_OP_HDR_LEN + 4;
}

/* ---- URB phase ------------------------------------------------------- */

/* number_of_packets as a non-ISO URB carries it: 0 (Linux) or -1 (Windows). */
static bool
np_is_none(int32_t np)
{
	return np == 0 || (uint32_t)np == USBIP_NP_NONE_WIN;
}

static bool
np_is_iso(int32_t np)
{
	return np >= 1 && np <= USBIP_MAX_ISO_PACKETS;
}

int
usbip_urb_hdr_decode(const uint8_t *buf, size_t len, enum usbip_flow flow,
    struct usbip_urb_hdr *h, const char **why)
{
	const uint8_t *u = buf + URB_U;

	if (len < USBIP_URB_HDR_LEN)
		return USBIP_NEED_MORE;
	memset(h, 0, sizeof(*h));
	h->command = get_be32(buf + URB_COMMAND);
	h->seqnum = get_be32(buf + URB_SEQNUM);
	h->devid = get_be32(buf + URB_DEVID);
	h->direction = get_be32(buf + URB_DIR);
	h->ep = get_be32(buf + URB_EP);

	switch (h->command) {
	case USBIP_CMD_SUBMIT:
		if (flow != USBIP_FROM_CLIENT)
			FAIL("CMD_SUBMIT from the server side");
		h->u.submit.transfer_flags = get_be32(u);
		h->u.submit.transfer_buffer_length = (int32_t)get_be32(u + 4);
		h->u.submit.start_frame = (int32_t)get_be32(u + 8);
		h->u.submit.number_of_packets = (int32_t)get_be32(u + 12);
		h->u.submit.interval = (int32_t)get_be32(u + 16);
		memcpy(h->u.submit.setup, u + 20, 8);	/* opaque bytes */
		if (h->direction > USBIP_DIR_IN)
			FAIL("direction not 0 or 1");
		if (h->ep > USBIP_MAX_EP)
			FAIL("endpoint out of range 0..15");
		if (h->u.submit.transfer_buffer_length < 0)
			FAIL("negative transfer_buffer_length");
		if ((uint32_t)h->u.submit.transfer_buffer_length >
		    USBIP_MAX_TRANSFER)
			FAIL("transfer_buffer_length exceeds USBIP_MAX_TRANSFER");
		if (!np_is_none(h->u.submit.number_of_packets) &&
		    !np_is_iso(h->u.submit.number_of_packets))
			FAIL("number_of_packets out of range");
		break;

	case USBIP_CMD_UNLINK:
		if (flow != USBIP_FROM_CLIENT)
			FAIL("CMD_UNLINK from the server side");
		h->u.unlink.unlink_seqnum = get_be32(u);
		break;

	case USBIP_RET_SUBMIT:
		if (flow != USBIP_FROM_SERVER)
			FAIL("RET_SUBMIT from the client side");
		h->u.ret_submit.status = (int32_t)get_be32(u);
		h->u.ret_submit.actual_length = (int32_t)get_be32(u + 4);
		h->u.ret_submit.start_frame = (int32_t)get_be32(u + 8);
		h->u.ret_submit.number_of_packets = (int32_t)get_be32(u + 12);
		h->u.ret_submit.error_count = (int32_t)get_be32(u + 16);
		if (h->u.ret_submit.actual_length < 0)
			FAIL("negative actual_length");
		if ((uint32_t)h->u.ret_submit.actual_length >
		    USBIP_MAX_TRANSFER)
			FAIL("actual_length exceeds USBIP_MAX_TRANSFER");
		if (!np_is_none(h->u.ret_submit.number_of_packets) &&
		    !np_is_iso(h->u.ret_submit.number_of_packets))
			FAIL("number_of_packets out of range");
		if (h->u.ret_submit.error_count < 0 ||
		    (np_is_iso(h->u.ret_submit.number_of_packets) &&
		    h->u.ret_submit.error_count >
		    h->u.ret_submit.number_of_packets))
			FAIL("error_count out of range");
		break;

	case USBIP_RET_UNLINK:
		if (flow != USBIP_FROM_SERVER)
			FAIL("RET_UNLINK from the client side");
		h->u.ret_unlink.status = (int32_t)get_be32(u);
		break;

	default:
		FAIL("unknown URB command");
	}
	return USBIP_URB_HDR_LEN;
}

bool
usbip_submit_is_iso(const struct usbip_urb_hdr *h)
{
	return h->command == USBIP_CMD_SUBMIT &&
	    np_is_iso(h->u.submit.number_of_packets);
}

int
usbip_urb_layout(const struct usbip_urb_hdr *h,
    const struct usbip_req_info *req, int ep_iso,
    struct usbip_urb_layout *lay, const char **why)
{
	int32_t np;
	bool iso;

	memset(lay, 0, sizeof(*lay));
	switch (h->command) {
	case USBIP_CMD_SUBMIT:
		np = h->u.submit.number_of_packets;
		iso = ep_iso < 0 ? np_is_iso(np) : ep_iso != 0;
		/* 0 packets on an ISO endpoint is legal (usbip_recv_iso()) */
		if (iso && !np_is_iso(np) && np != 0)
			FAIL("ISO URB without packets");
		if (!iso && !np_is_none(np))
			FAIL("number_of_packets on a non-ISO URB");
		if (h->direction == USBIP_DIR_OUT)
			lay->data_len =
			    (uint32_t)h->u.submit.transfer_buffer_length;
		lay->niso = iso ? (uint32_t)np : 0;
		break;

	case USBIP_RET_SUBMIT:
		if (req == NULL)
			FAIL("RET_SUBMIT for an unknown request");
		if (req->length > USBIP_MAX_TRANSFER ||
		    req->npackets > USBIP_MAX_ISO_PACKETS)
			FAIL("request info out of range");
		np = h->u.ret_submit.number_of_packets;
		if ((uint32_t)h->u.ret_submit.actual_length > req->length)
			FAIL("actual_length exceeds the requested length");
		if (req->iso) {
			if ((uint32_t)np != req->npackets)
				FAIL("ISO packet count differs from the request");
		} else if (!np_is_none(np))
			FAIL("number_of_packets on a non-ISO URB");
		if (req->direction == USBIP_DIR_IN)
			lay->data_len =
			    (uint32_t)h->u.ret_submit.actual_length;
		lay->niso = req->iso ? (uint32_t)np : 0;
		break;

	case USBIP_CMD_UNLINK:
	case USBIP_RET_UNLINK:
		break;

	default:
		FAIL("unknown URB command");
	}
	/* Bounded by USBIP_MAX_URB_PDU, far below 2^32. */
	lay->iso_len = lay->niso * USBIP_ISO_DESC_LEN;
	lay->total = USBIP_URB_HDR_LEN + lay->data_len + lay->iso_len;
	return 0;
}

void
usbip_iso_desc_decode(const uint8_t *p, struct usbip_iso_desc *d)
{
	d->offset = get_be32(p);
	d->length = get_be32(p + 4);
	d->actual_length = get_be32(p + 8);
	d->status = (int32_t)get_be32(p + 12);
}

void
usbip_iso_desc_encode(uint8_t out[USBIP_ISO_DESC_LEN],
    const struct usbip_iso_desc *d)
{
	put_be32(out, d->offset);
	put_be32(out + 4, d->length);
	put_be32(out + 8, d->actual_length);
	put_be32(out + 12, (uint32_t)d->status);
}

int
usbip_iso_check(const struct usbip_urb_hdr *h, const uint8_t *iso,
    uint32_t niso, uint32_t buflen, const char **why)
{
	struct usbip_iso_desc d;
	uint64_t sum = 0;
	uint32_t i;

	for (i = 0; i < niso; i++) {
		usbip_iso_desc_decode(iso + (size_t)i * USBIP_ISO_DESC_LEN, &d);
		if ((uint64_t)d.offset + d.length > buflen)
			FAIL("ISO packet outside the transfer buffer");
		if (d.actual_length > d.length)
			FAIL("ISO actual_length exceeds packet length");
		sum += d.actual_length;
	}
	if (h->command == USBIP_RET_SUBMIT &&
	    sum != (uint64_t)(uint32_t)h->u.ret_submit.actual_length)
		FAIL("ISO actual lengths do not sum to actual_length");
	return 0;
}

int
usbip_urb_decode(const uint8_t *buf, size_t len, enum usbip_flow flow,
    usbip_req_lookup_fn lookup, void *arg, int ep_iso,
    struct usbip_urb *u, const char **why)
{
	struct usbip_req_info req, *reqp = NULL;
	uint32_t buflen;
	int r;

	memset(u, 0, sizeof(*u));
	r = usbip_urb_hdr_decode(buf, len, flow, &u->hdr, why);
	if (r <= 0)
		return r;
	if (u->hdr.command == USBIP_RET_SUBMIT) {
		if (lookup == NULL || lookup(arg, u->hdr.seqnum, &req) == -1)
			FAIL("RET_SUBMIT for an unknown seqnum");
		reqp = &req;
	}
	if (usbip_urb_layout(&u->hdr, reqp, ep_iso, &u->lay, why) == -1)
		return USBIP_MALFORMED;
	if (len < u->lay.total)
		return USBIP_NEED_MORE;
	u->data = buf + USBIP_URB_HDR_LEN;
	u->iso = u->data + u->lay.data_len;
	if (u->lay.niso > 0) {
		buflen = reqp != NULL ? reqp->length :
		    (uint32_t)u->hdr.u.submit.transfer_buffer_length;
		if (usbip_iso_check(&u->hdr, u->iso, u->lay.niso, buflen,
		    why) == -1)
			return USBIP_MALFORMED;
	}
	return (int)u->lay.total;
}

size_t
usbip_urb_hdr_encode(uint8_t out[USBIP_URB_HDR_LEN],
    const struct usbip_urb_hdr *h)
{
	uint8_t *u = out + URB_U;

	memset(out, 0, USBIP_URB_HDR_LEN);
	put_be32(out + URB_COMMAND, h->command);
	put_be32(out + URB_SEQNUM, h->seqnum);
	put_be32(out + URB_DEVID, h->devid);
	put_be32(out + URB_DIR, h->direction);
	put_be32(out + URB_EP, h->ep);
	switch (h->command) {
	case USBIP_CMD_SUBMIT:
		put_be32(u, h->u.submit.transfer_flags);
		put_be32(u + 4, (uint32_t)h->u.submit.transfer_buffer_length);
		put_be32(u + 8, (uint32_t)h->u.submit.start_frame);
		put_be32(u + 12, (uint32_t)h->u.submit.number_of_packets);
		put_be32(u + 16, (uint32_t)h->u.submit.interval);
		memcpy(u + 20, h->u.submit.setup, 8);
		break;
	case USBIP_RET_SUBMIT:
		put_be32(u, (uint32_t)h->u.ret_submit.status);
		put_be32(u + 4, (uint32_t)h->u.ret_submit.actual_length);
		put_be32(u + 8, (uint32_t)h->u.ret_submit.start_frame);
		put_be32(u + 12, (uint32_t)h->u.ret_submit.number_of_packets);
		put_be32(u + 16, (uint32_t)h->u.ret_submit.error_count);
		break;
	case USBIP_CMD_UNLINK:
		put_be32(u, h->u.unlink.unlink_seqnum);
		break;
	case USBIP_RET_UNLINK:
		put_be32(u, (uint32_t)h->u.ret_unlink.status);
		break;
	}
	return USBIP_URB_HDR_LEN;
}

void
usbip_setup_encode(uint8_t out[8], uint8_t bmRequestType, uint8_t bRequest,
    uint16_t wValue, uint16_t wIndex, uint16_t wLength)
{
	out[0] = bmRequestType;
	out[1] = bRequest;
	out[2] = (uint8_t)wValue;
	out[3] = (uint8_t)(wValue >> 8);
	out[4] = (uint8_t)wIndex;
	out[5] = (uint8_t)(wIndex >> 8);
	out[6] = (uint8_t)wLength;
	out[7] = (uint8_t)(wLength >> 8);
}

void
usbip_control_submit(struct usbip_urb_hdr *h, uint32_t seqnum, uint32_t devid,
    uint8_t bmRequestType, uint8_t bRequest, uint16_t wValue, uint16_t wIndex,
    uint16_t wLength)
{
	bool in = (bmRequestType & 0x80) != 0;

	memset(h, 0, sizeof(*h));
	h->command = USBIP_CMD_SUBMIT;
	h->seqnum = seqnum;
	h->devid = devid;
	h->direction = in ? USBIP_DIR_IN : USBIP_DIR_OUT;
	h->ep = 0;
	h->u.submit.transfer_flags = in ? 0x0200 : 0;	/* URB_DIR_IN */
	h->u.submit.transfer_buffer_length = wLength;
	usbip_setup_encode(h->u.submit.setup, bmRequestType, bRequest, wValue,
	    wIndex, wLength);
}

/* Same values in every field the command carries (tests, fuzzers). */
bool
usbip_urb_hdr_equal(const struct usbip_urb_hdr *a,
    const struct usbip_urb_hdr *b)
{
	if (a->command != b->command || a->seqnum != b->seqnum ||
	    a->devid != b->devid || a->direction != b->direction ||
	    a->ep != b->ep)
		return false;
	switch (a->command) {
	case USBIP_CMD_SUBMIT:
		return a->u.submit.transfer_flags == b->u.submit.transfer_flags &&
		    a->u.submit.transfer_buffer_length ==
		    b->u.submit.transfer_buffer_length &&
		    a->u.submit.start_frame == b->u.submit.start_frame &&
		    a->u.submit.number_of_packets ==
		    b->u.submit.number_of_packets &&
		    a->u.submit.interval == b->u.submit.interval &&
		    memcmp(a->u.submit.setup, b->u.submit.setup, 8) == 0;
	case USBIP_RET_SUBMIT:
		return a->u.ret_submit.status == b->u.ret_submit.status &&
		    a->u.ret_submit.actual_length ==
		    b->u.ret_submit.actual_length &&
		    a->u.ret_submit.start_frame == b->u.ret_submit.start_frame &&
		    a->u.ret_submit.number_of_packets ==
		    b->u.ret_submit.number_of_packets &&
		    a->u.ret_submit.error_count == b->u.ret_submit.error_count;
	case USBIP_CMD_UNLINK:
		return a->u.unlink.unlink_seqnum == b->u.unlink.unlink_seqnum;
	case USBIP_RET_UNLINK:
		return a->u.ret_unlink.status == b->u.ret_unlink.status;
	}
	return false;
}

int
get_padded(const uint8_t *p, size_t size, char *out)
{
	const uint8_t *nul = memchr(p, '\0', size);
	size_t n, i;

	if (nul == NULL)
		return -1;
	n = (size_t)(nul - p);
	for (i = n; i < size; i++)
		if (p[i] != 0)
			return -1;
	memcpy(out, p, n);
	out[n] = '\0';
	return 0;
}

void
put_padded(uint8_t *p, size_t size, const char *s)
{
	size_t n = strnlen(s, size - 1);

	memset(p, 0, size);
	memcpy(p, s, n);
}
