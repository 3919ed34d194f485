/*
 * USB/IP codec: byte layouts against hex vectors written by hand.
 *
 * The URB vectors marked "doc" are the HID captures printed in the
 * example section of the Linux kernel's
 * Documentation/usb/usbip_protocol.rst; the others were written from the
 * field tables of that document (offset, length, value).  Each vector is
 * decoded and checked field by field, then rebuilt with the encoders and
 * compared byte for byte.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "usbip_test.h"

/* "/sys/devices/pci0000:00/0000:00:1d.1/usb3/3-2", the doc's example. */
#define DOC_PATH_HEX							\
	"2f7379732f646576696365732f706369303030303a30302f303030303a3030" \
	"3a31642e312f757362332f332d32"
#define DOC_PATH	"/sys/devices/pci0000:00/0000:00:1d.1/usb3/3-2"
#define DOC_PATH_LEN	45

/* The device record used by the op vectors, after path and busid. */
#define DEV_TAIL_HEX							\
	"00000003"	/* busnum 3 */					\
	"00000002"	/* devnum 2 */					\
	"00000002"	/* speed: full */				\
	"046d c52b"	/* idVendor, idProduct */			\
	"1201"		/* bcdDevice */					\
	"00 00 00"	/* class, subclass, protocol */			\
	"01 01"		/* bConfigurationValue, bNumConfigurations */	\
	"02"		/* bNumInterfaces */

static void
pdu_doc_dev(struct pdu *p)
{
	pdu_hex(p, DOC_PATH_HEX);
	pdu_zero(p, USBIP_PATH_SIZE - DOC_PATH_LEN);
	pdu_hex(p, "332d32");			/* "3-2" */
	pdu_zero(p, USBIP_BUSID_SIZE - 3);
	pdu_hex(p, DEV_TAIL_HEX);
}

static void
doc_dev(struct usbip_dev *d)
{
	memset(d, 0, sizeof(*d));
	strcpy(d->path, DOC_PATH);
	strcpy(d->busid, "3-2");
	d->busnum = 3;
	d->devnum = 2;
	d->speed = USBIP_SPEED_FULL;
	d->idVendor = 0x046d;
	d->idProduct = 0xc52b;
	d->bcdDevice = 0x1201;
	d->bConfigurationValue = 1;
	d->bNumConfigurations = 1;
	d->bNumInterfaces = 2;
}

static int
doc_dev_ok(const struct usbip_dev *d)
{
	return strcmp(d->path, DOC_PATH) == 0 && strcmp(d->busid, "3-2") == 0 &&
	    d->busnum == 3 && d->devnum == 2 && d->speed == USBIP_SPEED_FULL &&
	    d->idVendor == 0x046d && d->idProduct == 0xc52b &&
	    d->bcdDevice == 0x1201 && d->bDeviceClass == 0 &&
	    d->bDeviceSubClass == 0 && d->bDeviceProtocol == 0 &&
	    d->bConfigurationValue == 1 && d->bNumConfigurations == 1 &&
	    d->bNumInterfaces == 2;
}

static void
test_op_vectors(void)
{
	struct pdu		v, e;
	struct usbip_op		op;
	struct usbip_dev	d;
	struct usbip_intf	intf[USBIP_MAX_INTERFACES];
	struct usbip_intf	hid = { 3, 1, 1 }, vendor = { 0xff, 0, 0 };
	const char		*why;
	size_t			off = 0;

	/* OP_REQ_DEVLIST. */
	pdu_init(&v);
	pdu_init(&e);
	pdu_hex(&v, "0111 8005 00000000");
	is_int(op_decode_exact(v.b, v.len, USBIP_FROM_CLIENT, &op, &why), 8,
	    "vector OP_REQ_DEVLIST decoded");
	usbip_op_hdr_encode(pdu_grow(&e, 8), OP_REQ_DEVLIST, ST_OK);
	ok(e.len == v.len && memcmp(e.b, v.b, v.len) == 0,
	    "vector OP_REQ_DEVLIST encoded");
	pdu_free(&v);
	pdu_free(&e);

	/* OP_REP_DEVLIST, one device, two interfaces. */
	pdu_hex(&v, "0111 0005 00000000 00000001");
	pdu_doc_dev(&v);
	pdu_hex(&v, "03010100 ff000000");
	is_int(v.len, 0x144 + 8, "vector OP_REP_DEVLIST is 0x14c bytes");
	ok(memcmp(v.b + 0x10c, "3-2", 4) == 0 && v.b[0x143] == 2 &&
	    get_be32(v.b + 0x12c) == 3 && get_be16(v.b + 0x138) == 0x046d,
	    "vector OP_REP_DEVLIST: busid at 0x10c, busnum at 0x12c, "
	    "idVendor at 0x138, bNumInterfaces at 0x143");
	memset(&op, 0, sizeof(op));
	is_int(op_decode_exact(v.b, v.len, USBIP_FROM_SERVER, &op, &why),
	    v.len, "vector OP_REP_DEVLIST decoded");
	is_int(op.ndev, 1, "vector OP_REP_DEVLIST ndev");
	is_int(usbip_devlist_next(v.b, v.len, &off, &d, intf), 1,
	    "vector OP_REP_DEVLIST record");
	ok(doc_dev_ok(&d), "vector OP_REP_DEVLIST device fields");
	ok(intf[0].bInterfaceClass == 3 && intf[0].bInterfaceSubClass == 1 &&
	    intf[0].bInterfaceProtocol == 1 && intf[1].bInterfaceClass == 0xff &&
	    intf[1].bInterfaceSubClass == 0 && intf[1].bInterfaceProtocol == 0,
	    "vector OP_REP_DEVLIST interfaces");
	doc_dev(&d);
	usbip_devlist_rep_hdr_encode(pdu_grow(&e, 12), 1);
	usbip_dev_encode(pdu_grow(&e, USBIP_DEV_LEN), &d);
	usbip_intf_encode(pdu_grow(&e, 4), &hid);
	usbip_intf_encode(pdu_grow(&e, 4), &vendor);
	ok(e.len == v.len && memcmp(e.b, v.b, v.len) == 0,
	    "vector OP_REP_DEVLIST encoded");
	pdu_free(&v);
	pdu_free(&e);

	/* OP_REQ_IMPORT "3-2". */
	pdu_hex(&v, "0111 8003 00000000 332d32");
	pdu_zero(&v, 29);
	is_int(op_decode_exact(v.b, v.len, USBIP_FROM_CLIENT, &op, &why), 40,
	    "vector OP_REQ_IMPORT decoded");
	is_str(op.busid, "3-2", "vector OP_REQ_IMPORT busid");
	usbip_import_req_encode(pdu_grow(&e, 40), "3-2");
	ok(memcmp(e.b, v.b, 40) == 0, "vector OP_REQ_IMPORT encoded");
	pdu_free(&v);
	pdu_free(&e);

	/* OP_REP_IMPORT, success: 320 bytes, no interface records. */
	pdu_hex(&v, "0111 0003 00000000");
	pdu_doc_dev(&v);
	is_int(v.len, 320, "vector OP_REP_IMPORT is 320 bytes");
	ok(memcmp(v.b + 0x108, "3-2", 4) == 0 && get_be32(v.b + 0x128) == 3 &&
	    get_be32(v.b + 0x130) == 2 && v.b[0x13f] == 2,
	    "vector OP_REP_IMPORT: busid at 0x108, busnum at 0x128, speed at "
	    "0x130, bNumInterfaces at 0x13f");
	memset(&op, 0, sizeof(op));
	is_int(op_decode_exact(v.b, v.len, USBIP_FROM_SERVER, &op, &why), 320,
	    "vector OP_REP_IMPORT decoded");
	ok(doc_dev_ok(&op.dev), "vector OP_REP_IMPORT device fields");
	usbip_import_rep_encode(pdu_grow(&e, 320), ST_OK, &d);
	ok(memcmp(e.b, v.b, 320) == 0, "vector OP_REP_IMPORT encoded");
	pdu_free(&v);
	pdu_free(&e);

	/* OP_REP_IMPORT, failure (the doc's "1 for error"): 8 bytes. */
	pdu_hex(&v, "0111 0003 00000001");
	is_int(op_decode_exact(v.b, v.len, USBIP_FROM_SERVER, &op, &why), 8,
	    "vector OP_REP_IMPORT error decoded");
	is_int(op.hdr.status, ST_NA, "vector OP_REP_IMPORT error status");
	is_int(usbip_import_rep_encode(pdu_grow(&e, 320), ST_NA, NULL), 8,
	    "vector OP_REP_IMPORT error: 8 bytes encoded");
	ok(memcmp(e.b, v.b, 8) == 0, "vector OP_REP_IMPORT error encoded");
	pdu_free(&v);
	pdu_free(&e);
}

/* ---- URB vectors ------------------------------------------------------ */

/* Decode v in flow and rebuild it from the decoded values. */
static void
urb_vector(const char *name, const struct pdu *v, enum usbip_flow flow,
    struct req_table *t, size_t want_len, struct usbip_urb *u)
{
	struct pdu	e;
	const char	*why;
	size_t		i;
	int		rv;

	rv = urb_decode_exact(v->b, v->len, flow, t, -1, u, &why);
	if (!ok(rv >= 0 && (size_t)rv == want_len && want_len == v->len,
	    "vector %s decoded, %zu bytes", name, want_len))
		diag("got %d (%s)", rv, rv < 0 ? why : "-");
	if (rv <= 0)
		return;
	pdu_init(&e);
	usbip_urb_hdr_encode(pdu_grow(&e, USBIP_URB_HDR_LEN), &u->hdr);
	pdu_bytes(&e, u->data, u->lay.data_len);
	for (i = 0; i < u->lay.niso; i++) {
		struct usbip_iso_desc d;

		usbip_iso_desc_decode(u->iso + i * USBIP_ISO_DESC_LEN, &d);
		usbip_iso_desc_encode(pdu_grow(&e, USBIP_ISO_DESC_LEN), &d);
	}
	ok(e.len == v->len && memcmp(e.b, v->b, e.len) == 0,
	    "vector %s re-encoded", name);
	pdu_free(&e);
}

static void
test_doc_hid(void)
{
	struct req_table	t;
	struct usbip_urb	u;
	struct pdu		v;
	const struct usbip_urb_hdr *h = &u.hdr;

	memset(&t, 0, sizeof(t));
	req_add(&t, 0xd05, USBIP_DIR_IN, 0x40, 0, false);
	req_add(&t, 0xd06, USBIP_DIR_OUT, 0x40, 0, false);

	/* doc: CmdIntrIN. */
	pdu_init(&v);
	pdu_hex(&v, "00000001 00000d05 0001000f 00000001 00000001 00000200 "
	    "00000040 ffffffff 00000000 00000004 00000000 00000000");
	urb_vector("doc CmdIntrIN", &v, USBIP_FROM_CLIENT, NULL, 48, &u);
	ok(h->command == USBIP_CMD_SUBMIT && h->seqnum == 0xd05 &&
	    h->devid == 0x0001000f && h->direction == USBIP_DIR_IN &&
	    h->ep == 1, "doc CmdIntrIN: basic header (busnum 1, devnum 15)");
	ok(h->u.submit.transfer_flags == 0x200 &&
	    h->u.submit.transfer_buffer_length == 64 &&
	    h->u.submit.start_frame == -1 &&
	    h->u.submit.number_of_packets == 0 &&
	    h->u.submit.interval == 4, "doc CmdIntrIN: submit fields");
	pdu_free(&v);

	/* doc: CmdIntrOUT, with its 64 bytes of data. */
	pdu_hex(&v, "00000001 00000d06 0001000f 00000000 00000001 00000000 "
	    "00000040 ffffffff 00000000 00000004 00000000 00000000");
	pdu_hex(&v, "ffffffff860008a784ce5ae212376300"
	    "00000000000000000000000000000000"
	    "00000000000000000000000000000000"
	    "00000000000000000000000000000000");
	urb_vector("doc CmdIntrOUT", &v, USBIP_FROM_CLIENT, NULL, 48 + 64, &u);
	ok(h->direction == USBIP_DIR_OUT && u.lay.data_len == 64 &&
	    u.data[0] == 0xff && u.data[4] == 0x86 && u.data[14] == 0x63,
	    "doc CmdIntrOUT: 64 bytes of OUT data at 0x30");
	pdu_free(&v);

	/* doc: RetIntrOut: actual_length 64, no data comes back. */
	pdu_hex(&v, "00000003 00000d06 00000000 00000000 00000000 00000000 "
	    "00000040 ffffffff 00000000 00000000 00000000 00000000");
	urb_vector("doc RetIntrOut", &v, USBIP_FROM_SERVER, &t, 48, &u);
	ok(h->command == USBIP_RET_SUBMIT && h->seqnum == 0xd06 &&
	    h->u.ret_submit.status == 0 &&
	    h->u.ret_submit.actual_length == 64 &&
	    h->u.ret_submit.start_frame == -1 &&
	    h->u.ret_submit.number_of_packets == 0 &&
	    h->u.ret_submit.error_count == 0 && u.lay.data_len == 0,
	    "doc RetIntrOut: fields, no data");
	pdu_free(&v);

	/* doc: RetIntrIn with its 64 bytes of data. */
	pdu_hex(&v, "00000003 00000d05 00000000 00000000 00000000 00000000 "
	    "00000040 ffffffff 00000000 00000000 00000000 00000000");
	pdu_hex(&v, "ffffffff860011a784ce5ae212376361"
	    "2891b102010000040000000000000000"
	    "00000000000000000000000000000000"
	    "00000000000000000000000000000000");
	urb_vector("doc RetIntrIn", &v, USBIP_FROM_SERVER, &t, 48 + 64, &u);
	ok(h->seqnum == 0xd05 && h->u.ret_submit.actual_length == 64 &&
	    u.lay.data_len == 64 && u.data[7] == 0xa7 && u.data[18] == 0xb1,
	    "doc RetIntrIn: 64 bytes of IN data at 0x30");
	pdu_free(&v);
}

static void
test_table_vectors(void)
{
	struct req_table	t;
	struct usbip_urb	u;
	struct usbip_iso_desc	d;
	struct pdu		v;
	const struct usbip_urb_hdr *h = &u.hdr;
	static const uint8_t	get_desc[8] = { 0x80, 0x06, 0x00, 0x01, 0x00,
	    0x00, 0x12, 0x00 };

	memset(&t, 0, sizeof(t));
	req_add(&t, 0x20, USBIP_DIR_IN, 0x180, 2, true);

	/* Control IN, GET_DESCRIPTOR(device, 18): setup at 0x28. */
	pdu_init(&v);
	pdu_hex(&v, "00000001 00000001 00010002 00000001 00000000"
	    "00000200 00000012 00000000 00000000 00000000"
	    "80 06 00 01 00 00 12 00");
	urb_vector("CMD_SUBMIT GET_DESCRIPTOR", &v, USBIP_FROM_CLIENT, NULL,
	    48, &u);
	ok(h->ep == 0 && h->u.submit.transfer_buffer_length == 18 &&
	    memcmp(h->u.submit.setup, get_desc, 8) == 0,
	    "CMD_SUBMIT GET_DESCRIPTOR: ep 0, setup bytes as sent");
	pdu_free(&v);

	/* CMD_UNLINK of 0xd05: unlink_seqnum at 0x14, 24 pad bytes. */
	pdu_hex(&v, "00000002 00000d07 0001000f 00000000 00000000 00000d05");
	pdu_zero(&v, 24);
	urb_vector("CMD_UNLINK", &v, USBIP_FROM_CLIENT, NULL, 48, &u);
	ok(h->command == USBIP_CMD_UNLINK && h->seqnum == 0xd07 &&
	    h->u.unlink.unlink_seqnum == 0xd05, "CMD_UNLINK fields");
	pdu_free(&v);

	/* RET_UNLINK -ECONNRESET (-104 = 0xffffff98). */
	pdu_hex(&v, "00000004 00000d07 00000000 00000000 00000000 ffffff98");
	pdu_zero(&v, 24);
	urb_vector("RET_UNLINK", &v, USBIP_FROM_SERVER, &t, 48, &u);
	ok(h->command == USBIP_RET_UNLINK && h->seqnum == 0xd07 &&
	    h->u.ret_unlink.status == -ECONNRESET, "RET_UNLINK -ECONNRESET");
	pdu_free(&v);

	/* ISO IN request: two packets of 192 bytes, descriptors at 0x30. */
	pdu_hex(&v, "00000001 00000020 0001000f 00000001 00000002"
	    "00000202 00000180 00000000 00000002 00000001"
	    "0000000000000000"
	    "00000000 000000c0 00000000 00000000"
	    "000000c0 000000c0 00000000 00000000");
	urb_vector("CMD_SUBMIT ISO IN", &v, USBIP_FROM_CLIENT, NULL, 48 + 32,
	    &u);
	ok(u.lay.niso == 2 && u.lay.data_len == 0 && u.iso == v.b + 0x30,
	    "CMD_SUBMIT ISO IN: 2 descriptors right after the header");
	pdu_free(&v);

	/*
	 * Its reply: 16 and 32 bytes arrived, packed back to back (48 data
	 * bytes), then the descriptors with their offsets in the buffer.
	 */
	pdu_hex(&v, "00000003 00000020 00000000 00000000 00000000"
	    "00000000 00000030 00000123 00000002 00000000"
	    "0000000000000000");
	memset(pdu_grow(&v, 16), 0xaa, 16);
	memset(pdu_grow(&v, 32), 0xbb, 32);
	pdu_hex(&v, "00000000 000000c0 00000010 00000000"
	    "000000c0 000000c0 00000020 00000000");
	urb_vector("RET_SUBMIT ISO IN packed", &v, USBIP_FROM_SERVER, &t,
	    48 + 48 + 32, &u);
	ok(u.lay.data_len == 48 && u.data[15] == 0xaa && u.data[16] == 0xbb &&
	    u.iso == v.b + 0x60, "RET_SUBMIT ISO IN: 48 packed bytes, then "
	    "descriptors at 0x60");
	usbip_iso_desc_decode(u.iso + 16, &d);
	ok(d.offset == 0xc0 && d.length == 0xc0 && d.actual_length == 0x20 &&
	    d.status == 0, "RET_SUBMIT ISO IN: 2nd descriptor fields");
	is_int(h->u.ret_submit.start_frame, 0x123, "RET_SUBMIT ISO start_frame");
	pdu_free(&v);
}

int
main(void)
{
	test_op_vectors();
	test_doc_hid();
	test_table_vectors();
	return done_testing();
}
