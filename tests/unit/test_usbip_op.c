/*
 * USB/IP codec, op phase: OP_REQ/REP_DEVLIST and OP_REQ/REP_IMPORT.
 * Round trips through the encoders and the decoder, every truncation
 * point, and every refused field with its reason, in both directions of
 * travel.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "usbip_test.h"

static void
dev_fill(struct usbip_dev *d, int n)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->path, sizeof(d->path),
	    "/sys/devices/pci0000:00/0000:00:14.0/usb%d/%d-%d", n + 1, n + 1,
	    n + 2);
	snprintf(d->busid, sizeof(d->busid), "%d-%d", n + 1, n + 2);
	d->busnum = (uint32_t)n + 1;
	d->devnum = (uint32_t)n + 2;
	d->speed = (uint32_t)(n % (USBIP_SPEED_SUPER_PLUS + 1));
	d->idVendor = (uint16_t)(0x046d + n);
	d->idProduct = (uint16_t)(0xc52b - n);
	d->bcdDevice = (uint16_t)(0x1201 + n);
	d->bDeviceClass = (uint8_t)(n * 3);
	d->bDeviceSubClass = (uint8_t)(n * 5 + 1);
	d->bDeviceProtocol = (uint8_t)(n * 7 + 2);
	d->bConfigurationValue = (uint8_t)(n & 1);
	d->bNumConfigurations = (uint8_t)(n + 1);
	d->bNumInterfaces = 0;
}

/* Extreme values: every byte of every field used. */
static void
dev_fill_extreme(struct usbip_dev *d)
{
	memset(d, 0, sizeof(*d));
	memset(d->path, 'p', USBIP_PATH_SIZE - 1);
	memcpy(d->path, "/sys", 4);
	memset(d->busid, '9', USBIP_BUSID_SIZE - 1);
	d->busnum = 0xffffffffu;
	d->devnum = 0x80000001u;
	d->speed = USBIP_SPEED_SUPER_PLUS;
	d->idVendor = 0xffff;
	d->idProduct = 0x8001;
	d->bcdDevice = 0xfffe;
	d->bDeviceClass = 0xff;
	d->bDeviceSubClass = 0xfe;
	d->bDeviceProtocol = 0xfd;
	d->bConfigurationValue = 0xfc;
	d->bNumConfigurations = 0xfb;
	d->bNumInterfaces = USBIP_MAX_INTERFACES;
}

static int
dev_equal(const struct usbip_dev *a, const struct usbip_dev *b)
{
	return strcmp(a->path, b->path) == 0 &&
	    strcmp(a->busid, b->busid) == 0 &&
	    a->busnum == b->busnum && a->devnum == b->devnum &&
	    a->speed == b->speed && a->idVendor == b->idVendor &&
	    a->idProduct == b->idProduct && a->bcdDevice == b->bcdDevice &&
	    a->bDeviceClass == b->bDeviceClass &&
	    a->bDeviceSubClass == b->bDeviceSubClass &&
	    a->bDeviceProtocol == b->bDeviceProtocol &&
	    a->bConfigurationValue == b->bConfigurationValue &&
	    a->bNumConfigurations == b->bNumConfigurations &&
	    a->bNumInterfaces == b->bNumInterfaces;
}

/* ---- a DEVLIST reply built with the codec's encoders ----------------- */
#define DL_MAXDEV	8

struct devlist {
	size_t			ndev;
	struct usbip_dev	dev[DL_MAXDEV];
	struct usbip_intf	intf[DL_MAXDEV][USBIP_MAX_INTERFACES];
};

static void
devlist_encode(const struct devlist *dl, struct pdu *p)
{
	size_t	i, j;

	usbip_devlist_rep_hdr_encode(pdu_grow(p, USBIP_OP_HDR_LEN + 4),
	    (uint32_t)dl->ndev);
	for (i = 0; i < dl->ndev; i++) {
		usbip_dev_encode(pdu_grow(p, USBIP_DEV_LEN), &dl->dev[i]);
		for (j = 0; j < dl->dev[i].bNumInterfaces; j++)
			usbip_intf_encode(pdu_grow(p, USBIP_INTF_LEN),
			    &dl->intf[i][j]);
	}
}

static void
devlist_sample(struct devlist *dl)
{
	size_t	i, j;
	uint8_t	nintf[] = { 3, 0, USBIP_MAX_INTERFACES, 1, 2 };

	memset(dl, 0, sizeof(*dl));
	dl->ndev = nitems(nintf);
	for (i = 0; i < dl->ndev; i++) {
		dev_fill(&dl->dev[i], (int)i);
		dl->dev[i].bNumInterfaces = nintf[i];
		for (j = 0; j < nintf[i]; j++) {
			dl->intf[i][j].bInterfaceClass = (uint8_t)(i * 16 + j);
			dl->intf[i][j].bInterfaceSubClass =
			    (uint8_t)(0xff - j);
			dl->intf[i][j].bInterfaceProtocol = (uint8_t)(j * 3);
		}
	}
	dev_fill_extreme(&dl->dev[2]);
}

/* Decode p as a DEVLIST reply and compare every record with dl. */
static void
devlist_check(const struct pdu *p, const struct devlist *dl, const char *name)
{
	struct usbip_op		op;
	struct usbip_dev	dev;
	struct usbip_intf	intf[USBIP_MAX_INTERFACES];
	const char		*why;
	size_t			off = 0, i, j, bad = 0;
	int			rv;

	memset(&op, 0, sizeof(op));
	rv = op_decode_exact(p->b, p->len, USBIP_FROM_SERVER, &op, &why);
	is_int(rv, p->len, "%s: complete, %zu bytes", name, p->len);
	is_int(op.hdr.version, USBIP_VERSION, "%s: version", name);
	is_int(op.hdr.code, OP_REP_DEVLIST, "%s: code", name);
	is_int(op.hdr.status, ST_OK, "%s: status", name);
	is_int(op.ndev, dl->ndev, "%s: ndev", name);
	for (i = 0; i < dl->ndev; i++) {
		memset(&dev, 0xa5, sizeof(dev));
		memset(intf, 0xa5, sizeof(intf));
		if (usbip_devlist_next(p->b, p->len, &off, &dev, intf) != 1) {
			bad++;
			diag("%s: device %zu missing", name, i);
			break;
		}
		if (!dev_equal(&dev, &dl->dev[i])) {
			bad++;
			diag("%s: device %zu differs", name, i);
		}
		for (j = 0; j < dl->dev[i].bNumInterfaces; j++) {
			if (intf[j].bInterfaceClass !=
			    dl->intf[i][j].bInterfaceClass ||
			    intf[j].bInterfaceSubClass !=
			    dl->intf[i][j].bInterfaceSubClass ||
			    intf[j].bInterfaceProtocol !=
			    dl->intf[i][j].bInterfaceProtocol) {
				bad++;
				diag("%s: device %zu interface %zu differs",
				    name, i, j);
			}
		}
	}
	is_int(bad, 0, "%s: every device and interface round-trips", name);
	is_int(usbip_devlist_next(p->b, p->len, &off, &dev, intf), 0,
	    "%s: iterator ends after %zu devices", name, dl->ndev);
	if (dl->ndev > 0)
		is_int(off, p->len, "%s: iterator consumed the whole reply",
		    name);
}

static void
test_devlist_roundtrip(void)
{
	struct devlist	dl;
	struct pdu	p;
	size_t		off = 0;
	struct usbip_dev dev;

	devlist_sample(&dl);
	pdu_init(&p);
	devlist_encode(&dl, &p);
	is_int(p.len, 12 + 5 * USBIP_DEV_LEN +
	    (3 + 0 + USBIP_MAX_INTERFACES + 1 + 2) * USBIP_INTF_LEN,
	    "devlist: encoded size");
	devlist_check(&p, &dl, "devlist 5 devices");
	op_truncations_ok(p.b, p.len, USBIP_FROM_SERVER, "devlist 5 devices");

	/* The iterator tolerates a NULL interface array. */
	ok(usbip_devlist_next(p.b, p.len, &off, &dev, NULL) == 1 &&
	    dev_equal(&dev, &dl.dev[0]), "devlist: iterator with intf NULL");
	pdu_free(&p);

	/* No device: the reply ends with ndev. */
	memset(&dl, 0, sizeof(dl));
	devlist_encode(&dl, &p);
	is_int(p.len, 12, "devlist 0 devices: 12 bytes");
	devlist_check(&p, &dl, "devlist 0 devices");
	op_truncations_ok(p.b, p.len, USBIP_FROM_SERVER, "devlist 0 devices");
	pdu_free(&p);

	/* One device with one interface, the common case. */
	memset(&dl, 0, sizeof(dl));
	dl.ndev = 1;
	dev_fill(&dl.dev[0], 7);
	dl.dev[0].bNumInterfaces = 1;
	dl.intf[0][0].bInterfaceClass = 8;
	dl.intf[0][0].bInterfaceSubClass = 6;
	dl.intf[0][0].bInterfaceProtocol = 0x50;
	devlist_encode(&dl, &p);
	devlist_check(&p, &dl, "devlist 1 device");
	op_truncations_ok(p.b, p.len, USBIP_FROM_SERVER, "devlist 1 device");
	pdu_free(&p);
}

/* USBIP_MAX_NDEV devices is the most a reply may carry. */
static void
test_devlist_max(void)
{
	struct pdu		p;
	struct usbip_op		op;
	struct usbip_dev	d, got;
	const char		*why;
	size_t			i, off = 0, n = 0;
	int			rv;

	pdu_init(&p);
	usbip_devlist_rep_hdr_encode(pdu_grow(&p, 12), USBIP_MAX_NDEV);
	for (i = 0; i < USBIP_MAX_NDEV; i++) {
		dev_fill(&d, (int)(i % 200));
		usbip_dev_encode(pdu_grow(&p, USBIP_DEV_LEN), &d);
	}
	rv = op_decode_exact(p.b, p.len, USBIP_FROM_SERVER, &op, &why);
	is_int(rv, 12 + USBIP_MAX_NDEV * USBIP_DEV_LEN,
	    "devlist with USBIP_MAX_NDEV devices accepted");
	is_int(op.ndev, USBIP_MAX_NDEV, "devlist max: ndev");
	while (usbip_devlist_next(p.b, p.len, &off, &got, NULL) == 1)
		n++;
	is_int(n, USBIP_MAX_NDEV, "devlist max: iterator sees every device");
	/* Short by one byte: still waiting, not refused. */
	is_int(op_decode_exact(p.b, p.len - 1, USBIP_FROM_SERVER, &op, &why),
	    USBIP_NEED_MORE, "devlist max minus one byte: need more");
	pdu_free(&p);
}

static void
test_devlist_error_status(void)
{
	uint8_t		b[USBIP_OP_HDR_LEN];
	struct usbip_op	op;
	const char	*why;
	uint32_t	st;

	for (st = ST_NA; st <= ST_MAX; st++) {
		usbip_op_hdr_encode(b, OP_REP_DEVLIST, st);
		is_int(op_decode_exact(b, sizeof(b), USBIP_FROM_SERVER, &op,
		    &why), USBIP_OP_HDR_LEN,
		    "devlist reply with %s is the header alone",
		    usbip_st_name(st));
		is_int(op.hdr.status, st, "devlist reply status %u", st);
	}
}

static void
test_req_devlist(void)
{
	uint8_t		b[USBIP_OP_HDR_LEN + 4];
	struct usbip_op	op;
	const char	*why;

	is_int(usbip_op_hdr_encode(b, OP_REQ_DEVLIST, ST_OK), 8,
	    "OP_REQ_DEVLIST: 8 bytes");
	memset(&op, 0, sizeof(op));
	is_int(op_decode_exact(b, 8, USBIP_FROM_CLIENT, &op, &why), 8,
	    "OP_REQ_DEVLIST: decoded, 8 bytes");
	ok(op.hdr.version == USBIP_VERSION && op.hdr.code == OP_REQ_DEVLIST &&
	    op.hdr.status == 0, "OP_REQ_DEVLIST: header fields");
	op_truncations_ok(b, 8, USBIP_FROM_CLIENT, "OP_REQ_DEVLIST");

	/* Bytes after the PDU belong to the next one. */
	memset(b + 8, 0xee, 4);
	is_int(op_decode_exact(b, sizeof(b), USBIP_FROM_CLIENT, &op, &why), 8,
	    "OP_REQ_DEVLIST followed by other bytes: 8");
	/* A NULL op is allowed. */
	is_int(usbip_op_decode(b, 8, USBIP_FROM_CLIENT, NULL, &why), 8,
	    "OP_REQ_DEVLIST: op may be NULL");
}

static void
test_import_req(void)
{
	static const char *busids[] = {
		"1-1", "3-2", "1-1.4.2", "usb9-1.2.3.4.5",
		"1234567890123456789012345678901",	/* 31: the most */
	};
	uint8_t		b[USBIP_IMPORT_REQ_LEN];
	struct usbip_op	op;
	const char	*why;
	char		name[96];
	size_t		i;

	for (i = 0; i < nitems(busids); i++) {
		snprintf(name, sizeof(name), "OP_REQ_IMPORT %s", busids[i]);
		is_int(usbip_import_req_encode(b, busids[i]),
		    USBIP_IMPORT_REQ_LEN, "%s: encoded 40 bytes", name);
		memset(&op, 0, sizeof(op));
		is_int(op_decode_exact(b, sizeof(b), USBIP_FROM_CLIENT, &op,
		    &why), USBIP_IMPORT_REQ_LEN, "%s: decoded", name);
		ok(op.hdr.code == OP_REQ_IMPORT && op.hdr.status == 0,
		    "%s: header", name);
		is_str(op.busid, busids[i], "%s: busid", name);
		op_truncations_ok(b, sizeof(b), USBIP_FROM_CLIENT, name);
	}

	/* Garbage after the NUL is not part of the busid. */
	usbip_import_req_encode(b, "1-1");
	memset(b + 8 + 4, 'x', USBIP_BUSID_SIZE - 4);
	is_int(op_decode_exact(b, sizeof(b), USBIP_FROM_CLIENT, &op, &why),
	    USBIP_IMPORT_REQ_LEN, "OP_REQ_IMPORT with bytes after the NUL");
	is_str(op.busid, "1-1", "OP_REQ_IMPORT: busid stops at the NUL");
}

static void
test_import_rep(void)
{
	uint8_t		b[USBIP_IMPORT_REP_LEN];
	struct usbip_dev d;
	struct usbip_op	op;
	const char	*why;
	uint32_t	st;
	int		i;

	for (i = 0; i < 3; i++) {
		if (i == 2)
			dev_fill_extreme(&d);
		else
			dev_fill(&d, i * 4);
		is_int(usbip_import_rep_encode(b, ST_OK, &d),
		    USBIP_IMPORT_REP_LEN, "OP_REP_IMPORT ok #%d: 320 bytes", i);
		memset(&op, 0, sizeof(op));
		is_int(op_decode_exact(b, sizeof(b), USBIP_FROM_SERVER, &op,
		    &why), USBIP_IMPORT_REP_LEN,
		    "OP_REP_IMPORT ok #%d: decoded", i);
		ok(op.hdr.code == OP_REP_IMPORT && op.hdr.status == ST_OK,
		    "OP_REP_IMPORT ok #%d: header", i);
		ok(dev_equal(&op.dev, &d), "OP_REP_IMPORT ok #%d: device", i);
		op_truncations_ok(b, sizeof(b), USBIP_FROM_SERVER,
		    "OP_REP_IMPORT ok");
	}

	/* A failed import is the 8-byte header, whatever follows. */
	for (st = ST_NA; st <= ST_MAX; st++) {
		memset(b, 0x55, sizeof(b));
		is_int(usbip_import_rep_encode(b, st, &d), USBIP_OP_HDR_LEN,
		    "OP_REP_IMPORT %s: encoded 8 bytes", usbip_st_name(st));
		is_int(op_decode_exact(b, sizeof(b), USBIP_FROM_SERVER, &op,
		    &why), USBIP_OP_HDR_LEN, "OP_REP_IMPORT %s: decoded 8",
		    usbip_st_name(st));
		is_int(op.hdr.status, st, "OP_REP_IMPORT %s: status",
		    usbip_st_name(st));
		op_truncations_ok(b, USBIP_OP_HDR_LEN, USBIP_FROM_SERVER,
		    "OP_REP_IMPORT error");
	}
	/* The encoder writes only the header when dev is NULL. */
	is_int(usbip_import_rep_encode(b, ST_NODEV, NULL), USBIP_OP_HDR_LEN,
	    "OP_REP_IMPORT error with dev NULL");
}

/* ---- refusals -------------------------------------------------------- */

/* An op header followed by n zero bytes. */
static void
pdu_op(struct pdu *p, uint16_t version, uint16_t code, uint32_t status,
    size_t n)
{
	pdu_init(p);
	pdu_be16(p, version);
	pdu_be16(p, code);
	pdu_be32(p, status);
	pdu_zero(p, n);
}

static void
test_refuse_header(void)
{
	static const uint16_t versions[] = { 0x0000, 0x0100, 0x0110, 0x0112,
	    0x1101, 0x0211, 0xffff };
	static const uint16_t unknown[] = { 0x0000, 0x0002, 0x8002, 0x0004,
	    0x8004, 0x0006, 0x8006, 0x0007, 0x8007, 0x8000, 0xffff };
	struct pdu	p;
	size_t		i;

	for (i = 0; i < nitems(versions); i++) {
		pdu_op(&p, versions[i], OP_REQ_DEVLIST, 0, 0);
		op_refused(p.b, p.len, USBIP_FROM_CLIENT,
		    "unsupported USB/IP version", "client version");
		pdu_free(&p);
		pdu_op(&p, versions[i], OP_REP_IMPORT, 0, USBIP_DEV_LEN);
		op_refused(p.b, p.len, USBIP_FROM_SERVER,
		    "unsupported USB/IP version", "server version");
		pdu_free(&p);
	}
	/* Refused from the header alone: a peer need not send more. */
	pdu_op(&p, 0x0110, OP_REQ_IMPORT, 0, 0);
	op_refused(p.b, p.len, USBIP_FROM_CLIENT, "unsupported USB/IP version",
	    "bad version refused before the busid arrives");
	pdu_free(&p);

	for (i = 0; i < nitems(unknown); i++) {
		pdu_op(&p, USBIP_VERSION, unknown[i], 0, 64);
		op_refused(p.b, p.len, USBIP_FROM_CLIENT, "unknown op code",
		    "client unknown code");
		op_refused(p.b, p.len, USBIP_FROM_SERVER, "unknown op code",
		    "server unknown code");
		pdu_free(&p);
	}
}

static void
test_refuse_direction(void)
{
	struct pdu	p;

	/* Replies from the importer. */
	pdu_op(&p, USBIP_VERSION, OP_REP_DEVLIST, 0, 4);
	op_refused(p.b, p.len, USBIP_FROM_CLIENT,
	    "OP_REP_DEVLIST from the client side", "OP_REP_DEVLIST from client");
	pdu_free(&p);
	pdu_op(&p, USBIP_VERSION, OP_REP_IMPORT, 0, USBIP_DEV_LEN);
	op_refused(p.b, p.len, USBIP_FROM_CLIENT,
	    "OP_REP_IMPORT from the client side", "OP_REP_IMPORT from client");
	pdu_free(&p);
	pdu_op(&p, USBIP_VERSION, OP_REP_IMPORT, ST_NA, 0);
	op_refused(p.b, p.len, USBIP_FROM_CLIENT,
	    "OP_REP_IMPORT from the client side",
	    "OP_REP_IMPORT error from client");
	pdu_free(&p);

	/* Requests from the exporter. */
	pdu_op(&p, USBIP_VERSION, OP_REQ_DEVLIST, 0, 0);
	op_refused(p.b, p.len, USBIP_FROM_SERVER,
	    "OP_REQ_DEVLIST from the server side", "OP_REQ_DEVLIST from server");
	pdu_free(&p);
	pdu_op(&p, USBIP_VERSION, OP_REQ_IMPORT, 0, 0);
	pdu_str(&p, "1-1", USBIP_BUSID_SIZE);
	op_refused(p.b, p.len, USBIP_FROM_SERVER,
	    "OP_REQ_IMPORT from the server side", "OP_REQ_IMPORT from server");
	pdu_free(&p);
}

static void
test_refuse_requests(void)
{
	static const uint32_t st[] = { 1, 5, 6, 0x80000000u, 0xffffffffu };
	struct pdu	p;
	size_t		i;

	for (i = 0; i < nitems(st); i++) {
		pdu_op(&p, USBIP_VERSION, OP_REQ_DEVLIST, st[i], 0);
		op_refused(p.b, p.len, USBIP_FROM_CLIENT,
		    "request with non-zero status", "OP_REQ_DEVLIST status");
		pdu_free(&p);
		pdu_op(&p, USBIP_VERSION, OP_REQ_IMPORT, st[i], 0);
		pdu_str(&p, "1-1", USBIP_BUSID_SIZE);
		op_refused(p.b, p.len, USBIP_FROM_CLIENT,
		    "request with non-zero status", "OP_REQ_IMPORT status");
		pdu_free(&p);
	}

	/* 32 busid bytes and no NUL among them. */
	pdu_op(&p, USBIP_VERSION, OP_REQ_IMPORT, 0, 0);
	memset(pdu_grow(&p, USBIP_BUSID_SIZE), '1', USBIP_BUSID_SIZE);
	op_refused(p.b, p.len, USBIP_FROM_CLIENT,
	    "import busid not NUL-terminated", "OP_REQ_IMPORT busid no NUL");
	/* The only NUL-less byte is the last one. */
	p.b[p.len - 2] = '\0';
	is_int(op_decode_exact(p.b, p.len, USBIP_FROM_CLIENT, &(struct usbip_op){0},
	    &(const char *){NULL}), USBIP_IMPORT_REQ_LEN,
	    "OP_REQ_IMPORT busid with NUL at byte 30 accepted");
	pdu_free(&p);
}

/* A device record written by hand; fields past it set by the caller. */
static void
pdu_dev(struct pdu *p, const char *path, const char *busid, uint32_t speed,
    uint8_t nintf)
{
	pdu_str(p, path, USBIP_PATH_SIZE);
	pdu_str(p, busid, USBIP_BUSID_SIZE);
	pdu_be32(p, 1);			/* busnum */
	pdu_be32(p, 2);			/* devnum */
	pdu_be32(p, speed);
	pdu_be16(p, 0x1d6b);
	pdu_be16(p, 0x0104);
	pdu_be16(p, 0x0100);
	pdu_u8(p, 0);
	pdu_u8(p, 0);
	pdu_u8(p, 0);
	pdu_u8(p, 1);
	pdu_u8(p, 1);
	pdu_u8(p, nintf);
}

enum dev_fault { DF_NONE, DF_PATH, DF_BUSID, DF_SPEED, DF_NINTF, DF_NINTF255 };

static const char *const dev_fault_reason[] = {
	NULL,
	"device path not NUL-terminated",
	"device busid not NUL-terminated",
	"device speed out of range",
	"bNumInterfaces exceeds USBIP_MAX_INTERFACES",
	"bNumInterfaces exceeds USBIP_MAX_INTERFACES",
};

static void
pdu_dev_fault(struct pdu *p, enum dev_fault f)
{
	size_t	at = p->len;

	pdu_dev(p, "/sys/devices/platform/dummy_hcd.0/usb1/1-1", "1-1",
	    USBIP_SPEED_HIGH, 1);
	switch (f) {
	case DF_NONE:
		break;
	case DF_PATH:
		memset(p->b + at, 'a', USBIP_PATH_SIZE);
		break;
	case DF_BUSID:
		memset(p->b + at + USBIP_PATH_SIZE, 'b', USBIP_BUSID_SIZE);
		break;
	case DF_SPEED:
		put_be32(p->b + at + 0x128, USBIP_SPEED_SUPER_PLUS + 1);
		break;
	case DF_NINTF:
		p->b[at + 0x137] = USBIP_MAX_INTERFACES + 1;
		break;
	case DF_NINTF255:
		p->b[at + 0x137] = 255;
		break;
	}
}

static void
test_refuse_replies(void)
{
	static const uint32_t bad_st[] = { ST_MAX + 1, 0x100, 0xffffffffu };
	static const uint32_t bad_ndev[] = { USBIP_MAX_NDEV + 1, 0x10000,
	    0x7fffffffu, 0xffffffffu };
	struct pdu	p;
	size_t		i;
	int		f;
	char		name[96];

	for (i = 0; i < nitems(bad_st); i++) {
		pdu_op(&p, USBIP_VERSION, OP_REP_IMPORT, bad_st[i],
		    USBIP_DEV_LEN);
		op_refused(p.b, p.len, USBIP_FROM_SERVER,
		    "status code out of range", "OP_REP_IMPORT status");
		pdu_free(&p);
		pdu_op(&p, USBIP_VERSION, OP_REP_DEVLIST, bad_st[i], 4);
		op_refused(p.b, p.len, USBIP_FROM_SERVER,
		    "status code out of range", "OP_REP_DEVLIST status");
		pdu_free(&p);
	}

	/*
	 * A device count over the limit is refused from the count alone:
	 * waiting for 4 billion records would be a memory exhaustion.
	 */
	for (i = 0; i < nitems(bad_ndev); i++) {
		pdu_op(&p, USBIP_VERSION, OP_REP_DEVLIST, 0, 0);
		pdu_be32(&p, bad_ndev[i]);
		snprintf(name, sizeof(name), "ndev %u", bad_ndev[i]);
		op_refused(p.b, p.len, USBIP_FROM_SERVER,
		    "device count exceeds USBIP_MAX_NDEV", name);
		pdu_free(&p);
	}

	for (f = DF_PATH; f <= DF_NINTF255; f++) {
		/* In an import reply. */
		pdu_op(&p, USBIP_VERSION, OP_REP_IMPORT, ST_OK, 0);
		pdu_dev_fault(&p, (enum dev_fault)f);
		snprintf(name, sizeof(name), "import reply: %s",
		    dev_fault_reason[f]);
		op_refused(p.b, p.len, USBIP_FROM_SERVER, dev_fault_reason[f],
		    name);
		pdu_free(&p);

		/* As the second device of a list. */
		pdu_op(&p, USBIP_VERSION, OP_REP_DEVLIST, ST_OK, 0);
		pdu_be32(&p, 3);
		pdu_dev_fault(&p, DF_NONE);
		pdu_zero(&p, USBIP_INTF_LEN);
		pdu_dev_fault(&p, (enum dev_fault)f);
		pdu_zero(&p, USBIP_INTF_LEN);
		pdu_dev_fault(&p, DF_NONE);
		pdu_zero(&p, USBIP_INTF_LEN);
		snprintf(name, sizeof(name), "devlist device 2: %s",
		    dev_fault_reason[f]);
		op_refused(p.b, p.len, USBIP_FROM_SERVER, dev_fault_reason[f],
		    name);
		pdu_free(&p);
	}

	/* Boundaries that must pass: 255-byte path, 31-byte busid. */
	pdu_op(&p, USBIP_VERSION, OP_REP_IMPORT, ST_OK, 0);
	pdu_dev_fault(&p, DF_PATH);
	p.b[8 + USBIP_PATH_SIZE - 1] = '\0';
	memset(p.b + 8 + USBIP_PATH_SIZE, 'b', USBIP_BUSID_SIZE - 1);
	p.b[8 + USBIP_PATH_SIZE + USBIP_BUSID_SIZE - 1] = '\0';
	p.b[8 + 0x137] = USBIP_MAX_INTERFACES;
	put_be32(p.b + 8 + 0x128, USBIP_SPEED_SUPER_PLUS);
	{
		struct usbip_op	op;
		const char	*why;

		is_int(op_decode_exact(p.b, p.len, USBIP_FROM_SERVER, &op,
		    &why), USBIP_IMPORT_REP_LEN,
		    "import reply at every field's limit accepted");
		is_int(strlen(op.dev.path), USBIP_PATH_SIZE - 1,
		    "255-byte path");
		is_int(strlen(op.dev.busid), USBIP_BUSID_SIZE - 1,
		    "31-byte busid");
	}
	pdu_free(&p);
}

/*
 * A PDU in the wrong direction is refused once its code has arrived;
 * shorter prefixes may only wait.  Results never flip back to waiting.
 */
static void
test_wrong_direction_prefixes(void)
{
	uint8_t		b[USBIP_IMPORT_REP_LEN];
	struct usbip_dev d;
	struct usbip_op	op;
	const char	*why;
	size_t		i, bad = 0;
	int		rv, seen_malformed = 0;

	dev_fill(&d, 1);
	usbip_import_rep_encode(b, ST_OK, &d);
	for (i = 0; i <= sizeof(b); i++) {
		rv = op_decode_exact(b, i, USBIP_FROM_CLIENT, &op, &why);
		if (rv == USBIP_MALFORMED)
			seen_malformed = 1;
		else if (rv != USBIP_NEED_MORE || seen_malformed)
			bad++;
		if (i >= USBIP_OP_HDR_LEN && rv != USBIP_MALFORMED)
			bad++;
	}
	is_int(bad, 0, "OP_REP_IMPORT from client: every prefix waits or is "
	    "refused, refused from the header on");
}

static void
test_names(void)
{
	is_str(usbip_op_name(OP_REQ_DEVLIST), "OP_REQ_DEVLIST", "op name");
	is_str(usbip_op_name(OP_REP_IMPORT), "OP_REP_IMPORT", "op name 2");
	is_str(usbip_op_name(0x1234), "OP_UNKNOWN", "op name unknown");
	is_str(usbip_st_name(ST_OK), "ST_OK", "status name");
	is_str(usbip_st_name(ST_NODEV), "ST_NODEV", "status name 4");
	is_str(usbip_st_name(ST_MAX + 1), "ST_UNKNOWN", "status name unknown");
	is_str(usbip_st_name(0xffffffffu), "ST_UNKNOWN",
	    "status name 0xffffffff");
	is_str(usbip_cmd_name(USBIP_RET_UNLINK), "RET_UNLINK", "cmd name");
	is_str(usbip_cmd_name(0), "CMD_UNKNOWN", "cmd name unknown");
	is_str(usbip_speed_name(USBIP_SPEED_HIGH), "high", "speed name");
	is_str(usbip_speed_name(99), "invalid", "speed name invalid");
}

static void
test_busid_valid(void)
{
	static const char *good[] = { "1-1", "3-2.4", "usb1", "0-0",
	    "1-1:1.0", "a_b", "1234567890123456789012345678901" };
	static const char *bad[] = { "", "1-1 ", "../1-1", "1/1", "1-1\n",
	    "1-1;rm", "1-1%s", "\xc3\xa9", "12345678901234567890123456789012" };
	size_t	i;

	for (i = 0; i < nitems(good); i++)
		ok(usbip_busid_valid(good[i]), "busid \"%s\" valid", good[i]);
	for (i = 0; i < nitems(bad); i++)
		ok(!usbip_busid_valid(bad[i]), "busid #%zu invalid", i);
}

int
main(void)
{
	test_req_devlist();
	test_devlist_roundtrip();
	test_devlist_max();
	test_devlist_error_status();
	test_import_req();
	test_import_rep();
	test_refuse_header();
	test_refuse_direction();
	test_refuse_requests();
	test_refuse_replies();
	test_wrong_direction_prefixes();
	test_names();
	test_busid_valid();
	return done_testing();
}
