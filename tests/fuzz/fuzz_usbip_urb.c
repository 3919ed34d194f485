/*
 * libFuzzer harness for the USB/IP URB-phase decoder.
 *
 * Input:
 *   byte 0   bit 0: direction of travel (0 from the client, 1 from the
 *            server); bits 1-2: ep_iso (0: -1, 1: 0, 2: 1, 3: -1);
 *            bit 3: the lookup knows no seqnum.
 *   from the server only, 7 more bytes: the request every RET_SUBMIT
 *            answers, as a relay would have remembered it from an
 *            accepted CMD_SUBMIT: flags (bit 0 direction IN, bit 1 ISO),
 *            be32 transfer_buffer_length (mod USBIP_MAX_TRANSFER + 1),
 *            be16 packet count (mod USBIP_MAX_ISO_PACKETS + 1; 0 if not
 *            ISO).
 *   then a stream of PDUs, decoded one after another.
 *
 * Besides "no crash, no read past the input" (ASan), every accepted PDU
 * is checked against the rules the codec promises, recomputed here
 * independently (ISO bounds in 64 bits, packed sums, lengths), its
 * prefixes must wait, and decode(encode(decoded values)) must give the
 * same values back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "proto/usbip.h"

#define MAX_PDUS	64

struct fz_ctx {
	bool			unknown;
	struct usbip_req_info	req;
};

static int
fz_lookup(void *arg, uint32_t seqnum, struct usbip_req_info *req)
{
	struct fz_ctx	*c = arg;

	(void)seqnum;
	if (c->unknown)
		return -1;
	*req = c->req;
	return 0;
}

/* The codec's promises about an accepted PDU, recomputed here. */
static void
check_accepted(const struct usbip_urb *u, size_t n, enum usbip_flow flow,
    const struct fz_ctx *c)
{
	const struct usbip_urb_hdr *h = &u->hdr;
	struct usbip_iso_desc	d;
	uint64_t		sum = 0, buflen = 0;
	uint32_t		i;

	CHECK(u->lay.total == n);
	CHECK((uint64_t)USBIP_URB_HDR_LEN + u->lay.data_len + u->lay.iso_len ==
	    n);
	CHECK(u->lay.iso_len == (uint64_t)u->lay.niso * USBIP_ISO_DESC_LEN);
	CHECK(u->lay.niso <= USBIP_MAX_ISO_PACKETS);
	CHECK(n <= USBIP_MAX_URB_PDU);

	switch (h->command) {
	case USBIP_CMD_SUBMIT:
		CHECK(flow == USBIP_FROM_CLIENT);
		CHECK(h->direction <= USBIP_DIR_IN && h->ep <= USBIP_MAX_EP);
		CHECK(h->u.submit.transfer_buffer_length >= 0 &&
		    (uint32_t)h->u.submit.transfer_buffer_length <=
		    USBIP_MAX_TRANSFER);
		CHECK(u->lay.data_len == (h->direction == USBIP_DIR_OUT ?
		    (uint32_t)h->u.submit.transfer_buffer_length : 0));
		CHECK(u->lay.niso == 0 ||
		    u->lay.niso == (uint32_t)h->u.submit.number_of_packets);
		buflen = (uint32_t)h->u.submit.transfer_buffer_length;
		break;
	case USBIP_RET_SUBMIT:
		CHECK(flow == USBIP_FROM_SERVER && !c->unknown);
		CHECK(h->u.ret_submit.actual_length >= 0 &&
		    (uint32_t)h->u.ret_submit.actual_length <= c->req.length);
		CHECK(u->lay.data_len == (c->req.direction == USBIP_DIR_IN ?
		    (uint32_t)h->u.ret_submit.actual_length : 0));
		CHECK(u->lay.niso == (c->req.iso ? c->req.npackets : 0));
		CHECK(h->u.ret_submit.error_count >= 0);
		CHECK(u->lay.niso == 0 ||
		    (uint32_t)h->u.ret_submit.error_count <= u->lay.niso);
		buflen = c->req.length;
		break;
	case USBIP_CMD_UNLINK:
		CHECK(flow == USBIP_FROM_CLIENT && n == USBIP_URB_HDR_LEN);
		break;
	case USBIP_RET_UNLINK:
		CHECK(flow == USBIP_FROM_SERVER && n == USBIP_URB_HDR_LEN);
		break;
	default:
		CHECK(!"accepted an unknown command");
	}

	for (i = 0; i < u->lay.niso; i++) {
		usbip_iso_desc_decode(u->iso + (size_t)i * USBIP_ISO_DESC_LEN,
		    &d);
		CHECK((uint64_t)d.offset + d.length <= buflen);
		CHECK(d.actual_length <= d.length);
		sum += d.actual_length;
	}
	if (h->command == USBIP_RET_SUBMIT && u->lay.niso > 0)
		CHECK(sum == (uint64_t)h->u.ret_submit.actual_length);
}

/* Rebuild the PDU from the decoded values and decode it again. */
static void
check_reencode(const struct usbip_urb *u, enum usbip_flow flow,
    struct fz_ctx *c, int ep_iso)
{
	struct usbip_urb	u2;
	struct usbip_iso_desc	d;
	const char		*why;
	uint8_t			*out;
	size_t			off;
	uint32_t		i;
	int			rv;

	out = malloc(u->lay.total);
	CHECK(out != NULL);
	off = usbip_urb_hdr_encode(out, &u->hdr);
	if (u->lay.data_len > 0)
		memcpy(out + off, u->data, u->lay.data_len);
	off += u->lay.data_len;
	for (i = 0; i < u->lay.niso; i++) {
		usbip_iso_desc_decode(u->iso + (size_t)i * USBIP_ISO_DESC_LEN,
		    &d);
		usbip_iso_desc_encode(out + off, &d);
		off += USBIP_ISO_DESC_LEN;
	}
	CHECK(off == u->lay.total);

	rv = usbip_urb_decode(out, off, flow, fz_lookup, c, ep_iso, &u2, &why);
	CHECK(rv > 0 && (size_t)rv == off);
	CHECK(usbip_urb_hdr_equal(&u->hdr, &u2.hdr));
	CHECK(memcmp(&u->lay, &u2.lay, sizeof(u->lay)) == 0);
	CHECK(u->lay.data_len == 0 ||
	    memcmp(u->data, u2.data, u->lay.data_len) == 0);
	CHECK(u->lay.iso_len == 0 ||
	    memcmp(u->iso, u2.iso, u->lay.iso_len) == 0);
	free(out);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int	ep_isos[4] = { -1, 0, 1, -1 };
	struct fz_ctx		c;
	struct usbip_urb	u, u2;
	enum usbip_flow		flow;
	const uint8_t		*buf;
	const char		*why, *why2;
	size_t			len, off = 0, k;
	int			ep_iso, rv, rv2, npdu;

	if (size < 1)
		return 0;
	memset(&c, 0, sizeof(c));
	flow = (data[0] & 1) ? USBIP_FROM_SERVER : USBIP_FROM_CLIENT;
	ep_iso = ep_isos[(data[0] >> 1) & 3];
	c.unknown = (data[0] & 8) != 0;
	buf = data + 1;
	len = size - 1;
	if (flow == USBIP_FROM_SERVER) {
		if (len < 7)
			return 0;
		c.req.direction = buf[0] & 1;
		c.req.iso = (buf[0] & 2) != 0;
		c.req.length = get_be32(buf + 1) % (USBIP_MAX_TRANSFER + 1);
		c.req.npackets = c.req.iso ?
		    get_be16(buf + 5) % (USBIP_MAX_ISO_PACKETS + 1) : 0;
		buf += 7;
		len -= 7;
	}

	for (npdu = 0; npdu < MAX_PDUS && off <= len; npdu++) {
		why = NULL;
		rv = usbip_urb_decode(buf + off, len - off, flow, fz_lookup, &c,
		    ep_iso, &u, &why);
		CHECK(rv == USBIP_NEED_MORE || rv == USBIP_MALFORMED ||
		    (rv > 0 && (size_t)rv <= len - off));
		if (rv == USBIP_MALFORMED)
			CHECK(why != NULL && why[0] != '\0');

		/* A prefix either waits or says the same thing. */
		k = len - off == 0 ? 0 :
		    (size_t)(data[0] + npdu) * 2654435761u % (len - off);
		why2 = NULL;
		rv2 = usbip_urb_decode(buf + off, k, flow, fz_lookup, &c,
		    ep_iso, &u2, &why2);
		if (rv2 != USBIP_NEED_MORE) {
			CHECK(rv2 == rv);
			if (rv == USBIP_MALFORMED)
				CHECK(strcmp(why, why2) == 0);
		}
		if (rv <= 0)
			break;

		CHECK(usbip_urb_decode(buf + off, (size_t)rv - 1, flow,
		    fz_lookup, &c, ep_iso, &u2, &why2) == USBIP_NEED_MORE);
		check_accepted(&u, (size_t)rv, flow, &c);
		check_reencode(&u, flow, &c, ep_iso);
		off += (size_t)rv;
	}
	return 0;
}
