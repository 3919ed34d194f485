/*
 * USB/IP codec, URB phase: CMD_SUBMIT, RET_SUBMIT, CMD_UNLINK and
 * RET_UNLINK.  Round trips through the encoders and the decoder (the
 * encoded bytes are also compared with PDUs written field by field),
 * every truncation point, and every refused field with its reason, in
 * both directions of travel.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "usbip_test.h"

#define DEVID		0x00010002u	/* busnum 1, devnum 2 */
#define URB_DIR_IN	0x200u		/* Linux transfer_flags bits */
#define URB_ISO_ASAP	0x2u

static const uint8_t setup_get_dev_desc[8] = {
	0x80, 0x06, 0x00, 0x01, 0x00, 0x00, 0x12, 0x00
};
static const uint8_t setup_set_config[8] = {
	0x00, 0x09, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00
};
static const uint8_t setup_set_report[8] = {
	0x21, 0x09, 0x00, 0x02, 0x00, 0x00, 0x01, 0x00
};

/* The requests the RET_SUBMITs below answer, by seqnum. */
enum {
	SEQ_CTRL_IN = 1,	/* IN 18, control */
	SEQ_BULK_OUT,		/* OUT 4096 */
	SEQ_ISO_IN,		/* ISO IN, 8 packets of 192 */
	SEQ_ISO_OUT,		/* ISO OUT, 3 packets of 192 */
	SEQ_INTR_IN,		/* IN 64, interrupt */
	SEQ_BULK_IN,		/* IN 65536 */
	SEQ_ISO_IN0,		/* ISO IN, 0 packets */
};

static struct req_table reqs;

static void
reqs_init(void)
{
	memset(&reqs, 0, sizeof(reqs));
	req_add(&reqs, SEQ_CTRL_IN, USBIP_DIR_IN, 18, 0, false);
	req_add(&reqs, SEQ_BULK_OUT, USBIP_DIR_OUT, 4096, 0, false);
	req_add(&reqs, SEQ_ISO_IN, USBIP_DIR_IN, 8 * 192, 8, true);
	req_add(&reqs, SEQ_ISO_OUT, USBIP_DIR_OUT, 3 * 192, 3, true);
	req_add(&reqs, SEQ_INTR_IN, USBIP_DIR_IN, 64, 0, false);
	req_add(&reqs, SEQ_BULK_IN, USBIP_DIR_IN, 65536, 0, false);
	req_add(&reqs, SEQ_ISO_IN0, USBIP_DIR_IN, 0, 0, true);
}


static struct usbip_urb_hdr
hdr_submit(uint32_t seqnum, uint32_t dir, uint32_t ep, uint32_t flags,
    int32_t tbl, int32_t start_frame, int32_t np, int32_t interval,
    const uint8_t *setup)
{
	struct usbip_urb_hdr h;

	memset(&h, 0, sizeof(h));
	h.command = USBIP_CMD_SUBMIT;
	h.seqnum = seqnum;
	h.devid = DEVID;
	h.direction = dir;
	h.ep = ep;
	h.u.submit.transfer_flags = flags;
	h.u.submit.transfer_buffer_length = tbl;
	h.u.submit.start_frame = start_frame;
	h.u.submit.number_of_packets = np;
	h.u.submit.interval = interval;
	if (setup != NULL)
		memcpy(h.u.submit.setup, setup, 8);
	return h;
}

static struct usbip_urb_hdr
hdr_ret(uint32_t seqnum, int32_t status, int32_t actual, int32_t start_frame,
    int32_t np, int32_t errors)
{
	struct usbip_urb_hdr h;

	memset(&h, 0, sizeof(h));
	h.command = USBIP_RET_SUBMIT;
	h.seqnum = seqnum;
	h.u.ret_submit.status = status;
	h.u.ret_submit.actual_length = actual;
	h.u.ret_submit.start_frame = start_frame;
	h.u.ret_submit.number_of_packets = np;
	h.u.ret_submit.error_count = errors;
	return h;
}

/*
 * Encode h + data + iso with the codec, compare the bytes with the PDU
 * written by hand, decode, compare every value, then check every
 * truncation point.
 */
static void
roundtrip(const char *name, enum usbip_flow flow, const struct usbip_urb_hdr *h,
    const uint8_t *data, size_t data_len, const struct usbip_iso_desc *iso,
    size_t niso, int ep_iso, const struct pdu *hand)
{
	struct pdu		 p;
	struct usbip_urb	 u;
	struct usbip_iso_desc	 d;
	struct req_table	*t = flow == USBIP_FROM_SERVER ? &reqs : NULL;
	const char		*why;
	size_t			 i, bad = 0;
	int			 rv;

	pdu_init(&p);
	is_int(usbip_urb_hdr_encode(pdu_grow(&p, USBIP_URB_HDR_LEN), h),
	    USBIP_URB_HDR_LEN, "%s: header encoded, 48 bytes", name);
	pdu_bytes(&p, data, data_len);
	for (i = 0; i < niso; i++)
		usbip_iso_desc_encode(pdu_grow(&p, USBIP_ISO_DESC_LEN), &iso[i]);

	ok(hand->len == p.len && memcmp(hand->b, p.b, p.len) == 0,
	    "%s: encoded bytes match the PDU written by hand", name);

	rv = urb_decode_exact(p.b, p.len, flow, t, ep_iso, &u, &why);
	if (!ok(rv >= 0 && (size_t)rv == p.len, "%s: decoded, %zu bytes",
	    name, p.len))
		diag("got %d, reason: %s", rv,
		    rv == USBIP_MALFORMED && why != NULL ? why : "-");
	ok(usbip_urb_hdr_equal(&u.hdr, h), "%s: header fields round-trip", name);
	is_int(u.lay.data_len, data_len, "%s: data length", name);
	is_int(u.lay.niso, niso, "%s: ISO descriptor count", name);
	is_int(u.lay.iso_len, niso * USBIP_ISO_DESC_LEN, "%s: ISO length",
	    name);
	is_int(u.lay.total, p.len, "%s: layout total", name);
	ok(data_len == 0 || (u.data == p.b + USBIP_URB_HDR_LEN &&
	    memcmp(u.data, data, data_len) == 0), "%s: data", name);
	for (i = 0; i < niso; i++) {
		usbip_iso_desc_decode(u.iso + i * USBIP_ISO_DESC_LEN, &d);
		if (d.offset != iso[i].offset || d.length != iso[i].length ||
		    d.actual_length != iso[i].actual_length ||
		    d.status != iso[i].status)
			bad++;
	}
	ok(bad == 0 && (niso == 0 ||
	    u.iso == p.b + USBIP_URB_HDR_LEN + data_len),
	    "%s: ISO descriptors round-trip", name);

	urb_truncations_ok(p.b, p.len, flow, t, ep_iso, name);
	pdu_free(&p);
}

/* ---- CMD_SUBMIT and CMD_UNLINK, from the client ----------------------- */

static void
test_cmd_roundtrips(void)
{
	struct usbip_urb_hdr	h;
	struct usbip_iso_desc	iso[1024];
	struct pdu		hand, data;
	size_t			i;

	pdu_init(&hand);
	pdu_init(&data);

	/* Control IN with a setup packet: GET_DESCRIPTOR(device). */
	h = hdr_submit(SEQ_CTRL_IN, USBIP_DIR_IN, 0, URB_DIR_IN, 18, 0, 0, 0,
	    setup_get_dev_desc);
	pdu_cmd_submit(&hand, SEQ_CTRL_IN, DEVID, 1, 0, URB_DIR_IN, 18, 0, 0, 0,
	    setup_get_dev_desc);
	roundtrip("control IN GET_DESCRIPTOR", USBIP_FROM_CLIENT, &h, NULL, 0,
	    NULL, 0, -1, &hand);
	roundtrip("control IN, ep_iso 0", USBIP_FROM_CLIENT, &h, NULL, 0,
	    NULL, 0, 0, &hand);
	pdu_free(&hand);

	/* Control OUT without data: SET_CONFIGURATION. */
	h = hdr_submit(10, USBIP_DIR_OUT, 0, 0, 0, 0, 0, 0, setup_set_config);
	pdu_cmd_submit(&hand, 10, DEVID, 0, 0, 0, 0, 0, 0, 0, setup_set_config);
	roundtrip("control OUT SET_CONFIGURATION", USBIP_FROM_CLIENT, &h, NULL,
	    0, NULL, 0, -1, &hand);
	pdu_free(&hand);

	/* Control OUT with one data byte: SET_REPORT. */
	h = hdr_submit(11, USBIP_DIR_OUT, 0, 0, 1, 0, 0, 0, setup_set_report);
	pdu_cmd_submit(&hand, 11, DEVID, 0, 0, 0, 1, 0, 0, 0, setup_set_report);
	pdu_u8(&hand, 0x02);
	roundtrip("control OUT SET_REPORT with data", USBIP_FROM_CLIENT, &h,
	    (const uint8_t *)"\x02", 1, NULL, 0, -1, &hand);
	pdu_free(&hand);

	/* Bulk OUT, 4096 bytes, number_of_packets as usbip-win2 sends it. */
	pdu_pattern(&data, 4096, 7);
	h = hdr_submit(SEQ_BULK_OUT, USBIP_DIR_OUT, 2, 0, 4096, 0, -1, 0, NULL);
	pdu_cmd_submit(&hand, SEQ_BULK_OUT, DEVID, 0, 2, 0, 4096, 0,
	    0xffffffffu, 0, NULL);
	pdu_bytes(&hand, data.b, data.len);
	roundtrip("bulk OUT 4096, np 0xffffffff", USBIP_FROM_CLIENT, &h,
	    data.b, data.len, NULL, 0, -1, &hand);
	roundtrip("bulk OUT 4096, np 0xffffffff, ep_iso 0", USBIP_FROM_CLIENT,
	    &h, data.b, data.len, NULL, 0, 0, &hand);
	pdu_free(&hand);
	pdu_free(&data);

	/* Bulk IN: no data travels with the request. */
	h = hdr_submit(SEQ_BULK_IN, USBIP_DIR_IN, 1, URB_DIR_IN, 65536, 0, 0, 0,
	    NULL);
	pdu_cmd_submit(&hand, SEQ_BULK_IN, DEVID, 1, 1, URB_DIR_IN, 65536, 0, 0,
	    0, NULL);
	roundtrip("bulk IN 65536", USBIP_FROM_CLIENT, &h, NULL, 0, NULL, 0, 0,
	    &hand);
	pdu_free(&hand);

	/* Interrupt IN and OUT. */
	h = hdr_submit(SEQ_INTR_IN, USBIP_DIR_IN, 3, URB_DIR_IN, 64, 0, 0, 10,
	    NULL);
	pdu_cmd_submit(&hand, SEQ_INTR_IN, DEVID, 1, 3, URB_DIR_IN, 64, 0, 0,
	    10, NULL);
	roundtrip("interrupt IN", USBIP_FROM_CLIENT, &h, NULL, 0, NULL, 0, 0,
	    &hand);
	pdu_free(&hand);
	pdu_pattern(&data, 8, 99);
	h = hdr_submit(21, USBIP_DIR_OUT, 4, 0, 8, 0, 0, 4, NULL);
	pdu_cmd_submit(&hand, 21, DEVID, 0, 4, 0, 8, 0, 0, 4, NULL);
	pdu_bytes(&hand, data.b, data.len);
	roundtrip("interrupt OUT with data", USBIP_FROM_CLIENT, &h, data.b,
	    data.len, NULL, 0, 0, &hand);
	pdu_free(&hand);
	pdu_free(&data);

	/* ISO OUT: the whole buffer, then the descriptors. */
	for (i = 0; i < 3; i++) {
		iso[i].offset = (uint32_t)i * 192;
		iso[i].length = 192;
		iso[i].actual_length = 0;
		iso[i].status = 0;
	}
	pdu_pattern(&data, 576, 3);
	h = hdr_submit(SEQ_ISO_OUT, USBIP_DIR_OUT, 5, URB_ISO_ASAP, 576, 100, 3,
	    1, NULL);
	pdu_cmd_submit(&hand, SEQ_ISO_OUT, DEVID, 0, 5, URB_ISO_ASAP, 576, 100,
	    3, 1, NULL);
	pdu_bytes(&hand, data.b, data.len);
	for (i = 0; i < 3; i++)
		pdu_iso(&hand, (uint32_t)i * 192, 192, 0, 0);
	roundtrip("ISO OUT 3 packets", USBIP_FROM_CLIENT, &h, data.b, data.len,
	    iso, 3, -1, &hand);
	roundtrip("ISO OUT 3 packets, ep_iso 1", USBIP_FROM_CLIENT, &h, data.b,
	    data.len, iso, 3, 1, &hand);
	pdu_free(&hand);
	pdu_free(&data);

	/* ISO IN: descriptors only, with uneven packet sizes. */
	for (i = 0; i < 8; i++) {
		iso[i].offset = (uint32_t)i * 192;
		iso[i].length = i == 7 ? 100 : 192;
		iso[i].actual_length = 0;
		iso[i].status = 0;
	}
	h = hdr_submit(SEQ_ISO_IN, USBIP_DIR_IN, 6, URB_DIR_IN | URB_ISO_ASAP,
	    8 * 192, -1, 8, 8, NULL);
	pdu_cmd_submit(&hand, SEQ_ISO_IN, DEVID, 1, 6, URB_DIR_IN | URB_ISO_ASAP,
	    8 * 192, 0xffffffffu, 8, 8, NULL);
	for (i = 0; i < 8; i++)
		pdu_iso(&hand, iso[i].offset, iso[i].length, 0, 0);
	roundtrip("ISO IN 8 packets", USBIP_FROM_CLIENT, &h, NULL, 0, iso, 8, 1,
	    &hand);
	pdu_free(&hand);

	/* ISO IN with the most packets the codec allows. */
	for (i = 0; i < USBIP_MAX_ISO_PACKETS; i++) {
		iso[i].offset = (uint32_t)i * 8;
		iso[i].length = 8;
		iso[i].actual_length = 0;
		iso[i].status = 0;
	}
	h = hdr_submit(40, USBIP_DIR_IN, 15, URB_DIR_IN, 8 * 1024, 0,
	    USBIP_MAX_ISO_PACKETS, 1, NULL);
	pdu_cmd_submit(&hand, 40, DEVID, 1, 15, URB_DIR_IN, 8 * 1024, 0,
	    USBIP_MAX_ISO_PACKETS, 1, NULL);
	for (i = 0; i < USBIP_MAX_ISO_PACKETS; i++)
		pdu_iso(&hand, (uint32_t)i * 8, 8, 0, 0);
	roundtrip("ISO IN 1024 packets on ep 15", USBIP_FROM_CLIENT, &h, NULL, 0,
	    iso, USBIP_MAX_ISO_PACKETS, -1, &hand);
	pdu_free(&hand);

	/* CMD_UNLINK. */
	memset(&h, 0, sizeof(h));
	h.command = USBIP_CMD_UNLINK;
	h.seqnum = 0x12345678;
	h.devid = DEVID;
	h.u.unlink.unlink_seqnum = 0x12345670;
	pdu_cmd_unlink(&hand, 0x12345678, DEVID, 0x12345670);
	roundtrip("CMD_UNLINK", USBIP_FROM_CLIENT, &h, NULL, 0, NULL, 0, -1,
	    &hand);
	pdu_free(&hand);
}

/* ---- RET_SUBMIT and RET_UNLINK, from the server ----------------------- */

static void
test_ret_roundtrips(void)
{
	static const uint32_t actual[8] = { 192, 0, 100, 192, 1, 0, 100, 50 };
	struct usbip_urb_hdr	h;
	struct usbip_iso_desc	iso[8];
	struct pdu		hand, data;
	uint32_t		sum = 0;
	size_t			i;

	reqs_init();
	pdu_init(&hand);
	pdu_init(&data);

	/* IN with data. */
	pdu_pattern(&data, 18, 1);
	h = hdr_ret(SEQ_CTRL_IN, 0, 18, 0, 0, 0);
	pdu_ret_submit(&hand, SEQ_CTRL_IN, 0, 18, 0, 0, 0);
	pdu_bytes(&hand, data.b, data.len);
	roundtrip("RET_SUBMIT IN 18 bytes", USBIP_FROM_SERVER, &h, data.b,
	    data.len, NULL, 0, -1, &hand);
	pdu_free(&hand);
	pdu_free(&data);

	/* Short IN, number_of_packets 0xffffffff. */
	pdu_pattern(&data, 10, 2);
	h = hdr_ret(SEQ_INTR_IN, 0, 10, -1, -1, 0);
	pdu_ret_submit(&hand, SEQ_INTR_IN, 0, 10, 0xffffffffu, 0xffffffffu, 0);
	pdu_bytes(&hand, data.b, data.len);
	roundtrip("RET_SUBMIT short IN, np 0xffffffff", USBIP_FROM_SERVER, &h,
	    data.b, data.len, NULL, 0, -1, &hand);
	pdu_free(&hand);
	pdu_free(&data);

	/* OUT: actual_length counts what was sent; no data comes back. */
	h = hdr_ret(SEQ_BULK_OUT, 0, 4096, 0, 0, 0);
	pdu_ret_submit(&hand, SEQ_BULK_OUT, 0, 4096, 0, 0, 0);
	roundtrip("RET_SUBMIT OUT 4096, no data", USBIP_FROM_SERVER, &h, NULL,
	    0, NULL, 0, -1, &hand);
	pdu_free(&hand);

	/* An error status. */
	h = hdr_ret(SEQ_BULK_IN, -EPIPE, 0, 0, 0, 0);
	pdu_ret_submit(&hand, SEQ_BULK_IN, (uint32_t)-EPIPE, 0, 0, 0, 0);
	roundtrip("RET_SUBMIT -EPIPE", USBIP_FROM_SERVER, &h, NULL, 0, NULL, 0,
	    -1, &hand);
	pdu_free(&hand);

	/* ISO IN: data packed by actual_length, descriptors after it. */
	for (i = 0; i < 8; i++) {
		iso[i].offset = (uint32_t)i * 192;
		iso[i].length = 192;
		iso[i].actual_length = actual[i];
		iso[i].status = actual[i] == 0 ? -EXDEV : 0;
		sum += actual[i];
	}
	pdu_pattern(&data, sum, 5);
	h = hdr_ret(SEQ_ISO_IN, 0, (int32_t)sum, 1234, 8, 2);
	pdu_ret_submit(&hand, SEQ_ISO_IN, 0, sum, 1234, 8, 2);
	pdu_bytes(&hand, data.b, data.len);
	for (i = 0; i < 8; i++)
		pdu_iso(&hand, iso[i].offset, 192, actual[i],
		    (uint32_t)iso[i].status);
	roundtrip("RET_SUBMIT ISO IN packed", USBIP_FROM_SERVER, &h, data.b,
	    data.len, iso, 8, -1, &hand);
	pdu_free(&hand);
	pdu_free(&data);

	/* ISO OUT: descriptors only. */
	for (i = 0; i < 3; i++) {
		iso[i].offset = (uint32_t)i * 192;
		iso[i].length = 192;
		iso[i].actual_length = 192;
		iso[i].status = 0;
	}
	h = hdr_ret(SEQ_ISO_OUT, 0, 576, 77, 3, 0);
	pdu_ret_submit(&hand, SEQ_ISO_OUT, 0, 576, 77, 3, 0);
	for (i = 0; i < 3; i++)
		pdu_iso(&hand, (uint32_t)i * 192, 192, 192, 0);
	roundtrip("RET_SUBMIT ISO OUT", USBIP_FROM_SERVER, &h, NULL, 0, iso, 3,
	    -1, &hand);
	pdu_free(&hand);

	/* RET_UNLINK, both outcomes of the race. */
	memset(&h, 0, sizeof(h));
	h.command = USBIP_RET_UNLINK;
	h.seqnum = 9;
	h.u.ret_unlink.status = -ECONNRESET;
	pdu_ret_unlink(&hand, 9, (uint32_t)-ECONNRESET);
	roundtrip("RET_UNLINK -ECONNRESET", USBIP_FROM_SERVER, &h, NULL, 0,
	    NULL, 0, -1, &hand);
	pdu_free(&hand);
	h.seqnum = 10;
	h.u.ret_unlink.status = 0;
	pdu_ret_unlink(&hand, 10, 0);
	roundtrip("RET_UNLINK 0 (already completed)", USBIP_FROM_SERVER, &h,
	    NULL, 0, NULL, 0, -1, &hand);
	pdu_free(&hand);
}

/*
 * number_of_packets on a non-ISO URB: Linux sends 0, usbip-win2 sends
 * 0xffffffff; both mean "not ISO" and neither sizes anything.
 */
static void
test_np_none(void)
{
	static const uint32_t none[] = { 0, 0xffffffffu };
	struct usbip_urb	u;
	struct pdu		p;
	const char		*why;
	size_t			i;
	int			ep_iso;

	reqs_init();
	for (i = 0; i < nitems(none); i++) {
		for (ep_iso = -1; ep_iso <= 0; ep_iso++) {
			pdu_init(&p);
			pdu_cmd_submit(&p, 1, DEVID, 0, 1, 0, 16, 0, none[i], 0,
			    NULL);
			pdu_zero(&p, 16);
			is_int(urb_decode_exact(p.b, p.len, USBIP_FROM_CLIENT,
			    NULL, ep_iso, &u, &why), 64,
			    "CMD_SUBMIT np 0x%x, ep_iso %d accepted", none[i],
			    ep_iso);
			ok(u.lay.niso == 0 && !usbip_submit_is_iso(&u.hdr),
			    "CMD_SUBMIT np 0x%x is not ISO", none[i]);
			pdu_free(&p);
		}
		pdu_init(&p);
		pdu_ret_submit(&p, SEQ_INTR_IN, 0, 3, 0, none[i], 0);
		pdu_zero(&p, 3);
		is_int(urb_decode_exact(p.b, p.len, USBIP_FROM_SERVER, &reqs,
		    -1, &u, &why), 51, "RET_SUBMIT np 0x%x accepted", none[i]);
		is_int(u.lay.niso, 0, "RET_SUBMIT np 0x%x: no descriptors",
		    none[i]);
		pdu_free(&p);
	}
}

static void
test_submit_is_iso(void)
{
	struct usbip_urb_hdr	h;

	h = hdr_submit(1, 0, 1, 0, 0, 0, 0, 0, NULL);
	ok(!usbip_submit_is_iso(&h), "is_iso: np 0 no");
	h.u.submit.number_of_packets = -1;
	ok(!usbip_submit_is_iso(&h), "is_iso: np -1 no");
	h.u.submit.number_of_packets = 1;
	ok(usbip_submit_is_iso(&h), "is_iso: np 1 yes");
	h.u.submit.number_of_packets = USBIP_MAX_ISO_PACKETS;
	ok(usbip_submit_is_iso(&h), "is_iso: np max yes");
	h.u.submit.number_of_packets = USBIP_MAX_ISO_PACKETS + 1;
	ok(!usbip_submit_is_iso(&h), "is_iso: np max+1 no");
	h = hdr_ret(1, 0, 0, 0, 8, 0);
	ok(!usbip_submit_is_iso(&h), "is_iso: RET_SUBMIT no");
}

/* Two PDUs back to back: each decode takes exactly one. */
static void
test_pipelined(void)
{
	struct usbip_urb	u;
	struct pdu		p;
	const char		*why;
	size_t			first;

	pdu_init(&p);
	pdu_cmd_submit(&p, 1, DEVID, 0, 2, 0, 5, 0, 0, 0, NULL);
	pdu_bytes(&p, "hello", 5);
	first = p.len;
	pdu_cmd_unlink(&p, 2, DEVID, 1);
	is_int(urb_decode_exact(p.b, p.len, USBIP_FROM_CLIENT, NULL, -1, &u,
	    &why), first, "pipelined: first PDU only");
	is_int(urb_decode_exact(p.b + first, p.len - first, USBIP_FROM_CLIENT,
	    NULL, -1, &u, &why), USBIP_URB_HDR_LEN, "pipelined: second PDU");
	is_int(u.hdr.u.unlink.unlink_seqnum, 1, "pipelined: unlink target");
	pdu_free(&p);
}

/* ---- refusals, client to server --------------------------------------- */

static void
submit_refused(uint32_t dir, uint32_t ep, uint32_t tbl, uint32_t np,
    int ep_iso, const char *reason, const char *name)
{
	struct pdu	p;

	pdu_init(&p);
	pdu_cmd_submit(&p, 1, DEVID, dir, ep, 0, tbl, 0, np, 0, NULL);
	urb_refused(p.b, p.len, USBIP_FROM_CLIENT, NULL, ep_iso, reason, name);
	pdu_free(&p);
}

static void
test_refuse_from_client(void)
{
	static const uint32_t bad_cmd[] = { 0, 5, 0x100, 0x01000000u,
	    0xffffffffu };
	static const uint32_t bad_dir[] = { 2, 0x80, 0x01000000u, 0xffffffffu };
	static const uint32_t bad_ep[] = { 16, 0x80, 0x81, 0xffffffffu };
	static const uint32_t neg_tbl[] = { 0xffffffffu, 0x80000000u };
	static const uint32_t big_tbl[] = { USBIP_MAX_TRANSFER + 1, 0x7fffffffu };
	static const uint32_t bad_np[] = { USBIP_MAX_ISO_PACKETS + 1, 0x10000,
	    0x7fffffffu, 0x80000000u, 0xfffffffeu };
	struct pdu	p;
	size_t		i;
	char		name[96];

	/* Replies travelling the wrong way, and unknown commands. */
	pdu_init(&p);
	pdu_ret_submit(&p, SEQ_CTRL_IN, 0, 0, 0, 0, 0);
	urb_refused(p.b, p.len, USBIP_FROM_CLIENT, &reqs, -1,
	    "RET_SUBMIT from the client side", "RET_SUBMIT from client");
	pdu_free(&p);
	pdu_ret_unlink(&p, 3, 0);
	urb_refused(p.b, p.len, USBIP_FROM_CLIENT, NULL, -1,
	    "RET_UNLINK from the client side", "RET_UNLINK from client");
	pdu_free(&p);
	for (i = 0; i < nitems(bad_cmd); i++) {
		pdu_basic(&p, bad_cmd[i], 1, DEVID, 0, 0);
		pdu_zero(&p, 28);
		snprintf(name, sizeof(name), "client command 0x%x", bad_cmd[i]);
		urb_refused(p.b, p.len, USBIP_FROM_CLIENT, NULL, -1,
		    "unknown URB command", name);
		urb_refused(p.b, p.len, USBIP_FROM_SERVER, &reqs, -1,
		    "unknown URB command", name);
		pdu_free(&p);
	}

	for (i = 0; i < nitems(bad_dir); i++) {
		snprintf(name, sizeof(name), "direction 0x%x", bad_dir[i]);
		submit_refused(bad_dir[i], 1, 0, 0, -1, "direction not 0 or 1",
		    name);
	}
	for (i = 0; i < nitems(bad_ep); i++) {
		snprintf(name, sizeof(name), "ep 0x%x", bad_ep[i]);
		submit_refused(1, bad_ep[i], 0, 0, -1,
		    "endpoint out of range 0..15", name);
	}
	for (i = 0; i < nitems(neg_tbl); i++) {
		snprintf(name, sizeof(name), "transfer_buffer_length 0x%x",
		    neg_tbl[i]);
		submit_refused(0, 1, neg_tbl[i], 0, -1,
		    "negative transfer_buffer_length", name);
		submit_refused(1, 1, neg_tbl[i], 0, -1,
		    "negative transfer_buffer_length", name);
	}
	for (i = 0; i < nitems(big_tbl); i++) {
		snprintf(name, sizeof(name), "transfer_buffer_length 0x%x",
		    big_tbl[i]);
		submit_refused(0, 1, big_tbl[i], 0, -1,
		    "transfer_buffer_length exceeds USBIP_MAX_TRANSFER", name);
		submit_refused(1, 1, big_tbl[i], 0, -1,
		    "transfer_buffer_length exceeds USBIP_MAX_TRANSFER", name);
	}
	for (i = 0; i < nitems(bad_np); i++) {
		snprintf(name, sizeof(name), "number_of_packets 0x%x",
		    bad_np[i]);
		submit_refused(1, 1, 64, bad_np[i], -1,
		    "number_of_packets out of range", name);
		submit_refused(1, 1, 64, bad_np[i], 1,
		    "number_of_packets out of range", name);
	}
	/* ISO packets on an endpoint the caller knows is not ISO. */
	submit_refused(1, 1, 64, 5, 0, "number_of_packets on a non-ISO URB",
	    "np 5 on a non-ISO endpoint");
	submit_refused(0, 1, 64, 1, 0, "number_of_packets on a non-ISO URB",
	    "np 1 on a non-ISO endpoint, OUT");
	/* An ISO endpoint with the "not ISO" marker. */
	submit_refused(1, 1, 64, 0xffffffffu, 1, "ISO URB without packets",
	    "np 0xffffffff on an ISO endpoint");

	/* Limits that pass: the header alone is fine, the data is awaited. */
	{
		struct usbip_urb	u;
		const char		*why;

		pdu_cmd_submit(&p, 1, DEVID, 0, 15, 0, USBIP_MAX_TRANSFER, 0,
		    0, 0, NULL);
		is_int(urb_decode_exact(p.b, p.len, USBIP_FROM_CLIENT, NULL, -1,
		    &u, &why), USBIP_NEED_MORE,
		    "OUT of USBIP_MAX_TRANSFER on ep 15: waits for the data");
		pdu_free(&p);
		pdu_cmd_submit(&p, 1, DEVID, 1, 15, 0, USBIP_MAX_TRANSFER, 0,
		    0, 0, NULL);
		is_int(urb_decode_exact(p.b, p.len, USBIP_FROM_CLIENT, NULL, -1,
		    &u, &why), USBIP_URB_HDR_LEN,
		    "IN of USBIP_MAX_TRANSFER accepted");
		pdu_free(&p);
	}
}

/* An ISO CMD_SUBMIT IN of tbl bytes with one descriptor. */
static void
iso_cmd_refused(uint32_t tbl, uint32_t offset, uint32_t length,
    uint32_t actual, const char *reason, const char *name)
{
	struct pdu	p;

	pdu_init(&p);
	pdu_cmd_submit(&p, 1, DEVID, 1, 1, 0, tbl, 0, 1, 1, NULL);
	pdu_iso(&p, offset, length, actual, 0);
	urb_refused(p.b, p.len, USBIP_FROM_CLIENT, NULL, -1, reason, name);
	pdu_free(&p);
}

static void
test_refuse_iso_cmd(void)
{
	struct usbip_urb	u;
	struct pdu		p;
	const char		*why;

	/*
	 * 0xffffff00 + 0x200 is 0x100 in 32 bits, inside a 1024-byte
	 * buffer: only a 64-bit sum sees the packet is outside.
	 */
	iso_cmd_refused(1024, 0xffffff00u, 0x200, 0,
	    "ISO packet outside the transfer buffer", "ISO offset wraps 2^32");
	iso_cmd_refused(1024, 0x200, 0xffffff00u, 0,
	    "ISO packet outside the transfer buffer", "ISO length wraps 2^32");
	iso_cmd_refused(1024, 0xffffffffu, 0xffffffffu, 0,
	    "ISO packet outside the transfer buffer", "ISO both 0xffffffff");
	iso_cmd_refused(1024, 1000, 100, 0,
	    "ISO packet outside the transfer buffer", "ISO past the end");
	iso_cmd_refused(1024, 1024, 1, 0,
	    "ISO packet outside the transfer buffer", "ISO one byte past");
	iso_cmd_refused(0, 0, 1, 0,
	    "ISO packet outside the transfer buffer", "ISO with no buffer");
	iso_cmd_refused(1024, 0, 100, 101,
	    "ISO actual_length exceeds packet length", "ISO actual > length");

	/* Edges that pass: a packet ending at the buffer's end, empty ones. */
	pdu_init(&p);
	pdu_cmd_submit(&p, 1, DEVID, 1, 1, 0, 1024, 0, 3, 1, NULL);
	pdu_iso(&p, 0, 1024, 0, 0);
	pdu_iso(&p, 1024, 0, 0, 0);
	pdu_iso(&p, 1000, 24, 24, 0);
	is_int(urb_decode_exact(p.b, p.len, USBIP_FROM_CLIENT, NULL, -1, &u,
	    &why), p.len, "ISO packets touching the buffer's end accepted");
	pdu_free(&p);

	/* The second of three descriptors is the bad one. */
	pdu_cmd_submit(&p, 1, DEVID, 1, 1, 0, 300, 0, 3, 1, NULL);
	pdu_iso(&p, 0, 100, 0, 0);
	pdu_iso(&p, 0xffffff9cu, 0x100, 0, 0);
	pdu_iso(&p, 200, 100, 0, 0);
	urb_refused(p.b, p.len, USBIP_FROM_CLIENT, NULL, -1,
	    "ISO packet outside the transfer buffer", "ISO 2nd descriptor");
	pdu_free(&p);

	/* ISO OUT: descriptors follow the data and are checked the same. */
	pdu_cmd_submit(&p, 1, DEVID, 0, 1, 0, 16, 0, 1, 1, NULL);
	pdu_zero(&p, 16);
	pdu_iso(&p, 0xfffffff8u, 0x10, 0, 0);
	urb_refused(p.b, p.len, USBIP_FROM_CLIENT, NULL, 1,
	    "ISO packet outside the transfer buffer", "ISO OUT wraps 2^32");
	pdu_free(&p);
}

static void
test_refuse_from_server(void)
{
	static const uint32_t bad_np[] = { USBIP_MAX_ISO_PACKETS + 1,
	    0x7fffffffu, 0x80000000u, 0xfffffffeu };
	struct pdu	p;
	size_t		i;
	char		name[96];

	reqs_init();

	/* Requests travelling the wrong way. */
	pdu_init(&p);
	pdu_cmd_submit(&p, 1, DEVID, 1, 1, 0, 0, 0, 0, 0, NULL);
	urb_refused(p.b, p.len, USBIP_FROM_SERVER, &reqs, -1,
	    "CMD_SUBMIT from the server side", "CMD_SUBMIT from server");
	pdu_free(&p);
	pdu_cmd_unlink(&p, 2, DEVID, 1);
	urb_refused(p.b, p.len, USBIP_FROM_SERVER, &reqs, -1,
	    "CMD_UNLINK from the server side", "CMD_UNLINK from server");
	pdu_free(&p);

	/* A reply to nothing. */
	pdu_ret_submit(&p, 999, 0, 0, 0, 0, 0);
	urb_refused(p.b, p.len, USBIP_FROM_SERVER, &reqs, -1,
	    "RET_SUBMIT for an unknown seqnum", "RET_SUBMIT unknown seqnum");
	urb_refused(p.b, p.len, USBIP_FROM_SERVER, NULL, -1,
	    "RET_SUBMIT for an unknown seqnum", "RET_SUBMIT without lookup");
	pdu_free(&p);

	/* actual_length. */
	pdu_ret_submit(&p, SEQ_CTRL_IN, 0, 19, 0, 0, 0);
	pdu_zero(&p, 19);
	urb_refused(p.b, p.len, USBIP_FROM_SERVER, &reqs, -1,
	    "actual_length exceeds the requested length",
	    "IN actual_length > requested");
	pdu_free(&p);
	pdu_ret_submit(&p, SEQ_BULK_OUT, 0, 4097, 0, 0, 0);
	urb_refused(p.b, p.len, USBIP_FROM_SERVER, &reqs, -1,
	    "actual_length exceeds the requested length",
	    "OUT actual_length > requested");
	pdu_free(&p);
	pdu_ret_submit(&p, SEQ_BULK_IN, 0, 0xffffffffu, 0, 0, 0);
	urb_refused(p.b, p.len, USBIP_FROM_SERVER, &reqs, -1,
	    "negative actual_length", "actual_length -1");
	pdu_free(&p);
	pdu_ret_submit(&p, SEQ_BULK_IN, 0, USBIP_MAX_TRANSFER + 1, 0, 0, 0);
	urb_refused(p.b, p.len, USBIP_FROM_SERVER, &reqs, -1,
	    "actual_length exceeds USBIP_MAX_TRANSFER", "actual_length huge");
	pdu_free(&p);

	/* number_of_packets and error_count. */
	for (i = 0; i < nitems(bad_np); i++) {
		pdu_ret_submit(&p, SEQ_ISO_IN, 0, 0, 0, bad_np[i], 0);
		snprintf(name, sizeof(name), "RET_SUBMIT np 0x%x", bad_np[i]);
		urb_refused(p.b, p.len, USBIP_FROM_SERVER, &reqs, -1,
		    "number_of_packets out of range", name);
		pdu_free(&p);
	}
	pdu_ret_submit(&p, SEQ_INTR_IN, 0, 0, 0, 3, 0);
	pdu_zero(&p, 48);
	urb_refused(p.b, p.len, USBIP_FROM_SERVER, &reqs, -1,
	    "number_of_packets on a non-ISO URB", "ISO reply to a non-ISO URB");
	pdu_free(&p);
	{
		static const uint32_t np[] = { 7, 9, 0, 0xffffffffu, 1 };

		for (i = 0; i < nitems(np); i++) {
			pdu_ret_submit(&p, SEQ_ISO_IN, 0, 0, 0, np[i], 0);
			pdu_zero(&p, 16 * 9);
			snprintf(name, sizeof(name),
			    "ISO reply with %d packets for 8", (int)np[i]);
			urb_refused(p.b, p.len, USBIP_FROM_SERVER, &reqs, -1,
			    "ISO packet count differs from the request", name);
			pdu_free(&p);
		}
	}
	pdu_ret_submit(&p, SEQ_ISO_IN, 0, 0, 0, 8, 9);
	urb_refused(p.b, p.len, USBIP_FROM_SERVER, &reqs, -1,
	    "error_count out of range", "error_count 9 > np 8");
	pdu_free(&p);
	pdu_ret_submit(&p, SEQ_ISO_IN, 0, 0, 0, 8, 0xffffffffu);
	urb_refused(p.b, p.len, USBIP_FROM_SERVER, &reqs, -1,
	    "error_count out of range", "error_count -1");
	pdu_free(&p);
}

/* An ISO IN reply to SEQ_ISO_IN (8 packets of 192) with the given descs. */
static void
iso_ret(struct pdu *p, const uint32_t off[8], const uint32_t len[8],
    const uint32_t act[8], uint32_t actual_length, size_t data_len)
{
	size_t	i;

	pdu_init(p);
	pdu_ret_submit(p, SEQ_ISO_IN, 0, actual_length, 0, 8, 0);
	pdu_zero(p, data_len);
	for (i = 0; i < 8; i++)
		pdu_iso(p, off[i], len[i], act[i], 0);
}

static void
test_refuse_iso_ret(void)
{
	uint32_t		off[8], len[8], act[8];
	struct pdu		p;
	struct usbip_urb	u;
	const char		*why;
	size_t			i;

	reqs_init();
	for (i = 0; i < 8; i++) {
		off[i] = (uint32_t)i * 192;
		len[i] = 192;
		act[i] = 10;
	}
	iso_ret(&p, off, len, act, 80, 80);
	is_int(urb_decode_exact(p.b, p.len, USBIP_FROM_SERVER, &reqs, -1, &u,
	    &why), p.len, "ISO reply baseline accepted");
	pdu_free(&p);

	/* Sum of actual lengths below, then above, actual_length. */
	iso_ret(&p, off, len, act, 81, 81);
	urb_refused(p.b, p.len, USBIP_FROM_SERVER, &reqs, -1,
	    "ISO actual lengths do not sum to actual_length", "ISO sum < actual");
	pdu_free(&p);
	iso_ret(&p, off, len, act, 79, 79);
	urb_refused(p.b, p.len, USBIP_FROM_SERVER, &reqs, -1,
	    "ISO actual lengths do not sum to actual_length", "ISO sum > actual");
	pdu_free(&p);

	/* Actual lengths that would sum to 80 only modulo 2^32. */
	act[0] = 0x80000000u;
	act[1] = 0x80000000u;
	len[0] = len[1] = 0xffffffffu;
	iso_ret(&p, off, len, act, 60, 60);
	urb_refused(p.b, p.len, USBIP_FROM_SERVER, &reqs, -1,
	    "ISO packet outside the transfer buffer", "ISO huge actual lengths");
	pdu_free(&p);
	len[0] = len[1] = 192;
	act[0] = act[1] = 10;

	/* Offset wraps in 32 bits; inside the 1536-byte buffer if it did. */
	off[3] = 0xffffff00u;
	len[3] = 0x200;
	iso_ret(&p, off, len, act, 80, 80);
	urb_refused(p.b, p.len, USBIP_FROM_SERVER, &reqs, -1,
	    "ISO packet outside the transfer buffer", "ISO reply offset wraps");
	pdu_free(&p);
	off[3] = 3 * 192;
	len[3] = 192;

	/* Last packet past the request's buffer. */
	off[7] = 8 * 192 - 100;
	iso_ret(&p, off, len, act, 80, 80);
	urb_refused(p.b, p.len, USBIP_FROM_SERVER, &reqs, -1,
	    "ISO packet outside the transfer buffer", "ISO reply past the end");
	pdu_free(&p);
	off[7] = 7 * 192;

	act[5] = 193;
	iso_ret(&p, off, len, act, 80 - 10 + 193, 80 - 10 + 193);
	urb_refused(p.b, p.len, USBIP_FROM_SERVER, &reqs, -1,
	    "ISO actual_length exceeds packet length", "ISO reply actual > len");
	pdu_free(&p);
	act[5] = 10;

	/* ISO IN with packets but no data is fine (all empty). */
	for (i = 0; i < 8; i++)
		act[i] = 0;
	iso_ret(&p, off, len, act, 0, 0);
	is_int(urb_decode_exact(p.b, p.len, USBIP_FROM_SERVER, &reqs, -1, &u,
	    &why), USBIP_URB_HDR_LEN + 8 * 16, "ISO reply, all packets empty");
	pdu_free(&p);
}

/*
 * A PDU in the wrong direction: every prefix waits or is refused, and
 * once refused stays refused; the complete header is always refused.
 */
static void
test_wrong_direction_prefixes(void)
{
	struct pdu		p;
	struct usbip_urb	u;
	const char		*why;
	size_t			i, bad = 0;
	int			rv, refused, pass;

	reqs_init();
	for (pass = 0; pass < 2; pass++) {
		pdu_init(&p);
		if (pass == 0)
			pdu_cmd_submit(&p, 1, DEVID, 0, 1, 0, 8, 0, 0, 0, NULL);
		else
			pdu_ret_submit(&p, SEQ_CTRL_IN, 0, 8, 0, 0, 0);
		pdu_zero(&p, 8);
		refused = 0;
		for (i = 0; i <= p.len; i++) {
			rv = urb_decode_exact(p.b, i, pass == 0 ?
			    USBIP_FROM_SERVER : USBIP_FROM_CLIENT, &reqs, -1,
			    &u, &why);
			if (rv == USBIP_MALFORMED)
				refused = 1;
			else if (rv != USBIP_NEED_MORE || refused)
				bad++;
			if (i >= USBIP_URB_HDR_LEN && rv != USBIP_MALFORMED)
				bad++;
		}
		is_int(bad, 0, "%s in the wrong direction: refused from the "
		    "header on", pass == 0 ? "CMD_SUBMIT" : "RET_SUBMIT");
		pdu_free(&p);
	}
}

/* The lower-level entry points on their own. */
static void
test_parts(void)
{
	struct usbip_urb_hdr	h;
	struct usbip_urb_layout	lay;
	struct usbip_req_info	ri;
	struct pdu		p;
	const char		*why = NULL;

	pdu_init(&p);
	pdu_cmd_submit(&p, 5, DEVID, 0, 2, 0, 100, 0, 0, 0, NULL);
	is_int(usbip_urb_hdr_decode(p.b, 47, USBIP_FROM_CLIENT, &h, &why),
	    USBIP_NEED_MORE, "hdr_decode: 47 bytes need more");
	is_int(usbip_urb_hdr_decode(p.b, 48, USBIP_FROM_CLIENT, &h, &why), 48,
	    "hdr_decode: 48");
	is_int(usbip_urb_layout(&h, NULL, -1, &lay, &why), 0, "layout OUT");
	ok(lay.data_len == 100 && lay.niso == 0 && lay.total == 148,
	    "layout OUT: 100 bytes of data");
	pdu_free(&p);

	h = hdr_ret(5, 0, 10, 0, 0, 0);
	why = NULL;
	is_int(usbip_urb_layout(&h, NULL, -1, &lay, &why), -1,
	    "layout RET_SUBMIT without its request");
	is_str(why, "RET_SUBMIT for an unknown request",
	    "layout RET_SUBMIT without its request: reason");
	ri.direction = USBIP_DIR_IN;
	ri.length = 10;
	ri.npackets = 0;
	ri.iso = false;
	is_int(usbip_urb_layout(&h, &ri, -1, &lay, &why), 0,
	    "layout RET_SUBMIT IN");
	is_int(lay.total, 58, "layout RET_SUBMIT IN: 48 + 10");
	ri.direction = USBIP_DIR_OUT;
	is_int(usbip_urb_layout(&h, &ri, -1, &lay, &why), 0,
	    "layout RET_SUBMIT OUT");
	is_int(lay.total, 48, "layout RET_SUBMIT OUT: header only");

	/* iso_check directly, on a RET_SUBMIT of 10 bytes. */
	pdu_iso(&p, 0, 8, 8, 0);
	pdu_iso(&p, 8, 8, 2, 0);
	is_int(usbip_iso_check(&h, p.b, 2, 16, &why), 0, "iso_check ok");
	is_int(usbip_iso_check(&h, p.b, 2, 15, &why), -1,
	    "iso_check with a buffer one byte short");
	is_str(why, "ISO packet outside the transfer buffer",
	    "iso_check short buffer: reason");
	is_int(usbip_iso_check(&h, p.b, 1, 16, &why), -1,
	    "iso_check, sum 8 for actual_length 10");
	pdu_free(&p);
}

/* Control requests as vhci builds them: GET_DESCRIPTOR in, SET_CONFIGURATION out. */
static void
test_control_submit(void)
{
	static const uint8_t get_dev[8] = { 0x80, 0x06, 0x00, 0x01, 0x00, 0x00,
	    0x12, 0x00 };
	static const uint8_t set_cfg[8] = { 0x00, 0x09, 0x01, 0x00, 0x00, 0x00,
	    0x00, 0x00 };
	static const uint8_t lang[8] = { 0x80, 0x06, 0x03, 0x03, 0x09, 0x04,
	    0xff, 0x00 };
	uint8_t s[8], buf[USBIP_URB_HDR_LEN];
	struct usbip_urb_hdr h, d;
	const char *why;

	usbip_setup_encode(s, 0x80, 6, 0x0303, 0x0409, 255);
	is_mem(s, lang, 8, "setup: wValue, wIndex, wLength little-endian");

	usbip_control_submit(&h, 7, 0x10002, 0x80, 6, 0x0100, 0, 18);
	ok(h.command == USBIP_CMD_SUBMIT && h.seqnum == 7 && h.devid == 0x10002 &&
	    h.ep == 0 && h.direction == USBIP_DIR_IN, "GET_DESCRIPTOR: ep0 IN");
	is_int(h.u.submit.transfer_flags, 0x200, "URB_DIR_IN set");
	is_int(h.u.submit.transfer_buffer_length, 18, "length from wLength");
	is_mem(h.u.submit.setup, get_dev, 8, "setup 80 06 00 01 00 00 12 00");
	usbip_urb_hdr_encode(buf, &h);
	ok(usbip_urb_hdr_decode(buf, sizeof(buf), USBIP_FROM_CLIENT, &d,
	    &why) == USBIP_URB_HDR_LEN && usbip_urb_hdr_equal(&h, &d),
	    "encodes to a header the codec accepts and decodes back");

	usbip_control_submit(&h, 8, 0x10002, 0x00, 9, 1, 0, 0);
	ok(h.direction == USBIP_DIR_OUT && h.u.submit.transfer_flags == 0 &&
	    h.u.submit.transfer_buffer_length == 0,
	    "SET_CONFIGURATION: OUT, no flags, no data");
	is_mem(h.u.submit.setup, set_cfg, 8, "setup 00 09 01 00 00 00 00 00");
}

int
main(void)
{
	reqs_init();
	test_control_submit();
	test_cmd_roundtrips();
	test_ret_roundtrips();
	test_np_none();
	test_submit_is_iso();
	test_pipelined();
	test_refuse_from_client();
	test_refuse_iso_cmd();
	test_refuse_from_server();
	test_refuse_iso_ret();
	test_wrong_direction_prefixes();
	test_parts();
	return done_testing();
}
