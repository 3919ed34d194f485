/*
 * libFuzzer harness for the USB/IP op-phase decoder.
 *
 * Input: one byte choosing the direction of travel (bit 0: 0 from the
 * client, 1 from the server), then the bytes as they arrived.
 *
 * Besides "no crash, no read past the input" (ASan), it checks:
 *  - a result other than "need more" is the same for every longer prefix
 *    that covers it, and a complete PDU's proper prefixes all need more;
 *  - a refusal always carries a reason;
 *  - an accepted OP_REP_DEVLIST iterates to exactly ndev records ending
 *    at the PDU's end;
 *  - decode(encode(decoded values)) gives the same values back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "proto/usbip.h"

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

static int
decode(const uint8_t *buf, size_t len, enum usbip_flow flow,
    struct usbip_op *op, const char **why)
{
	memset(op, 0, sizeof(*op));
	*why = NULL;
	return usbip_op_decode(buf, len, flow, op, why);
}

/* usbip_busid_valid() against its documented rule. */
static void
check_busid(const char *busid)
{
	size_t	i, n = strlen(busid);
	bool	want = n >= 1 && n < USBIP_BUSID_SIZE;

	for (i = 0; i < n && want; i++)
		want = strchr("abcdefghijklmnopqrstuvwxyz"
		    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-", busid[i]) != NULL;
	CHECK(usbip_busid_valid(busid) == want);
}

/* Walk an accepted DEVLIST reply and rebuild it with the encoders. */
static void
check_devlist(const uint8_t *buf, size_t len, const struct usbip_op *op)
{
	static struct usbip_intf intf[USBIP_MAX_INTERFACES];
	static struct usbip_intf intf2[USBIP_MAX_INTERFACES];
	struct usbip_dev	dev, dev2;
	struct usbip_op		op2;
	const char		*why;
	uint8_t			*out;
	size_t			off = 0, off2 = 0, olen = 0;
	uint32_t		n = 0, i;
	int			rv;

	out = malloc(len);
	CHECK(out != NULL);
	olen += usbip_devlist_rep_hdr_encode(out, op->ndev);
	while (usbip_devlist_next(buf, len, &off, &dev, intf) == 1) {
		CHECK(dev.bNumInterfaces <= USBIP_MAX_INTERFACES);
		CHECK(olen + USBIP_DEV_LEN +
		    (size_t)dev.bNumInterfaces * USBIP_INTF_LEN <= len);
		olen += usbip_dev_encode(out + olen, &dev);
		for (i = 0; i < dev.bNumInterfaces; i++)
			olen += usbip_intf_encode(out + olen, &intf[i]);
		n++;
		CHECK(n <= USBIP_MAX_NDEV);
	}
	CHECK(n == op->ndev);
	CHECK(olen == len);
	CHECK(n == 0 || off == len);

	rv = decode(out, olen, USBIP_FROM_SERVER, &op2, &why);
	CHECK(rv > 0 && (size_t)rv == olen);
	CHECK(op2.ndev == op->ndev);
	off = 0;
	while (usbip_devlist_next(buf, len, &off, &dev, intf) == 1) {
		CHECK(usbip_devlist_next(out, olen, &off2, &dev2, intf2) == 1);
		CHECK(dev_equal(&dev, &dev2));
		check_busid(dev.busid);
		for (i = 0; i < dev.bNumInterfaces; i++) {
			CHECK(intf[i].bInterfaceClass ==
			    intf2[i].bInterfaceClass);
			CHECK(intf[i].bInterfaceSubClass ==
			    intf2[i].bInterfaceSubClass);
			CHECK(intf[i].bInterfaceProtocol ==
			    intf2[i].bInterfaceProtocol);
		}
	}
	free(out);
}

static void
check_reencode(const uint8_t *buf, size_t len, enum usbip_flow flow,
    const struct usbip_op *op)
{
	uint8_t		out[USBIP_IMPORT_REP_LEN];
	struct usbip_op	op2;
	const char	*why;
	size_t		n;
	int		rv;

	CHECK(op->hdr.version == USBIP_VERSION);
	switch (op->hdr.code) {
	case OP_REQ_DEVLIST:
		CHECK(flow == USBIP_FROM_CLIENT && len == USBIP_OP_HDR_LEN);
		n = usbip_op_hdr_encode(out, OP_REQ_DEVLIST, op->hdr.status);
		rv = decode(out, n, flow, &op2, &why);
		CHECK(rv == USBIP_OP_HDR_LEN && op2.hdr.code == OP_REQ_DEVLIST);
		break;
	case OP_REQ_IMPORT:
		CHECK(flow == USBIP_FROM_CLIENT && len == USBIP_IMPORT_REQ_LEN);
		CHECK(strlen(op->busid) < USBIP_BUSID_SIZE);
		n = usbip_import_req_encode(out, op->busid);
		rv = decode(out, n, flow, &op2, &why);
		CHECK(rv == USBIP_IMPORT_REQ_LEN);
		CHECK(strcmp(op2.busid, op->busid) == 0);
		check_busid(op->busid);
		break;
	case OP_REP_IMPORT:
		CHECK(flow == USBIP_FROM_SERVER && op->hdr.status <= ST_MAX);
		n = usbip_import_rep_encode(out, op->hdr.status, &op->dev);
		CHECK(n == len);
		rv = decode(out, n, flow, &op2, &why);
		CHECK(rv > 0 && (size_t)rv == n);
		CHECK(op2.hdr.status == op->hdr.status);
		CHECK(op->hdr.status != ST_OK || dev_equal(&op2.dev, &op->dev));
		if (op->hdr.status == ST_OK)
			check_busid(op->dev.busid);
		break;
	case OP_REP_DEVLIST:
		CHECK(flow == USBIP_FROM_SERVER && op->hdr.status <= ST_MAX);
		if (op->hdr.status != ST_OK) {
			CHECK(len == USBIP_OP_HDR_LEN);
			break;
		}
		CHECK(op->ndev <= USBIP_MAX_NDEV);
		check_devlist(buf, len, op);
		break;
	default:
		CHECK(!"accepted an unknown op code");
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct usbip_op		op, op2;
	enum usbip_flow		flow;
	const uint8_t		*buf;
	const char		*why, *why2;
	size_t			len, k;
	int			rv, rv2;

	if (size < 1)
		return 0;
	flow = (data[0] & 1) ? USBIP_FROM_SERVER : USBIP_FROM_CLIENT;
	buf = data + 1;
	len = size - 1;

	rv = decode(buf, len, flow, &op, &why);
	CHECK(rv == USBIP_NEED_MORE || rv == USBIP_MALFORMED ||
	    (rv > 0 && (size_t)rv <= len));
	if (rv == USBIP_MALFORMED)
		CHECK(why != NULL && why[0] != '\0');

	/* A prefix either waits or says the same thing. */
	k = len == 0 ? 0 : (size_t)data[0] * 2654435761u % len;
	rv2 = decode(buf, k, flow, &op2, &why2);
	if (rv2 != USBIP_NEED_MORE) {
		CHECK(rv2 == rv);
		if (rv == USBIP_MALFORMED)
			CHECK(strcmp(why, why2) == 0);
	}

	if (rv > 0) {
		CHECK(decode(buf, (size_t)rv, flow, &op2, &why2) == rv);
		CHECK(decode(buf, (size_t)rv - 1, flow, &op2, &why2) ==
		    USBIP_NEED_MORE);
		check_reencode(buf, (size_t)rv, flow, &op);
	}
	return 0;
}
