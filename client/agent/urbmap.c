/*
 * urbmap: the URB engine's pure logic (see urbmap.h, protocol.md 1.9.3).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <libusb.h>

#include "urbmap.h"

enum urbmap_req
urbmap_classify(const uint8_t setup[8])
{
	uint8_t		 type = setup[0], req = setup[1];
	uint16_t	 value = (uint16_t)(setup[2] | setup[3] << 8);

	/* As tweak_special_requests() in the kernel's stub_rx.c. */
	if (type == 0x00 && req == LIBUSB_REQUEST_SET_CONFIGURATION)
		return URBREQ_SET_CONFIG;
	if (type == 0x01 && req == LIBUSB_REQUEST_SET_INTERFACE)
		return URBREQ_SET_INTERFACE;
	if (type == 0x02 && req == LIBUSB_REQUEST_CLEAR_FEATURE && value == 0)
		return URBREQ_CLEAR_HALT;	/* ENDPOINT_HALT is feature 0 */
	if (type == 0x23 && req == LIBUSB_REQUEST_SET_FEATURE && value == 4)
		return URBREQ_PORT_RESET;	/* USB_PORT_FEAT_RESET */
	return URBREQ_PLAIN;
}

const char *
urbmap_req_name(enum urbmap_req r)
{
	switch (r) {
	case URBREQ_PLAIN:		return "plain";
	case URBREQ_SET_CONFIG:		return "SET_CONFIGURATION";
	case URBREQ_SET_INTERFACE:	return "SET_INTERFACE";
	case URBREQ_CLEAR_HALT:		return "CLEAR_FEATURE(ENDPOINT_HALT)";
	case URBREQ_PORT_RESET:		return "SET_FEATURE(PORT_RESET)";
	}
	return "?";
}

int
urbmap_check_control(const uint8_t setup[8], uint32_t dir, uint32_t length,
    const char **why)
{
	uint16_t	 wlength = (uint16_t)(setup[6] | setup[7] << 8);
	uint32_t	 sdir = (setup[0] & 0x80) ? USBIP_DIR_IN : USBIP_DIR_OUT;

	if (wlength != length) {
		*why = "control wLength differs from transfer_buffer_length";
		return -1;
	}
	/* A zero-length control transfer has its status stage IN: vhci may
	 * say either direction then (usb_submit_urb() ignores it). */
	if (length != 0 && sdir != dir) {
		*why = "control direction differs from bmRequestType bit 7";
		return -1;
	}
	return 0;
}

int32_t
urbmap_status(enum urbmap_end end, enum urbmap_cancel why, uint32_t flags,
    uint32_t actual, uint32_t requested)
{
	switch (end) {
	case URBEND_COMPLETED:
		/* The agent never passes LIBUSB_TRANSFER_SHORT_NOT_OK (it
		 * would end as a bare ERROR): short is judged here. */
		if ((flags & URBF_SHORT_NOT_OK) && actual < requested)
			return -EREMOTEIO;
		return 0;
	case URBEND_STALL:
		return -EPIPE;
	case URBEND_OVERFLOW:
		return -EOVERFLOW;
	case URBEND_CANCELLED:
		return why == URBCANCEL_UNLINK ? -ECONNRESET : -ESHUTDOWN;
	case URBEND_NO_DEVICE:
		return -ESHUTDOWN;
	case URBEND_TIMED_OUT:
		return -ETIMEDOUT;
	case URBEND_ERROR:
		return -EPROTO;
	}
	return -EPROTO;
}

int32_t
urbmap_errno(int e)
{
	switch (e) {
	case LIBUSB_SUCCESS:		return 0;
	case LIBUSB_ERROR_IO:		return -EPROTO;
	case LIBUSB_ERROR_INVALID_PARAM: return -EINVAL;
	case LIBUSB_ERROR_ACCESS:	return -EACCES;
	case LIBUSB_ERROR_NO_DEVICE:	return -ESHUTDOWN;
	case LIBUSB_ERROR_NOT_FOUND:	return -ENOENT;
	case LIBUSB_ERROR_BUSY:		return -EBUSY;
	case LIBUSB_ERROR_TIMEOUT:	return -ETIMEDOUT;
	case LIBUSB_ERROR_OVERFLOW:	return -EOVERFLOW;
	case LIBUSB_ERROR_PIPE:		return -EPIPE;
	case LIBUSB_ERROR_INTERRUPTED:	return -EINTR;
	case LIBUSB_ERROR_NO_MEM:	return -ENOMEM;
	case LIBUSB_ERROR_NOT_SUPPORTED: return -EINVAL;
	default:			return -EPROTO;
	}
}

int32_t
urbmap_iso_status(enum urbmap_end end)
{
	return urbmap_status(end, URBCANCEL_NONE, 0, 0, 0);
}

long long
urbmap_iso_total(const struct usbip_iso_desc *iso, uint32_t n, uint32_t len)
{
	uint64_t	 total = 0;
	uint32_t	 i;

	for (i = 0; i < n; i++) {
		if ((uint64_t)iso[i].offset + iso[i].length > len)
			return -1;
		total += iso[i].length;
	}
	if (total > USBIP_MAX_TRANSFER)
		return -1;
	return (long long)total;
}

struct span {
	uint32_t	 off, len;
};

static int
span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

long long
urbmap_iso_gather(const uint8_t *src, size_t len,
    const struct usbip_iso_desc *iso, uint32_t n, uint8_t *dst, size_t dstsz,
    const char **why)
{
	struct span	*s;
	uint32_t	 i, ns = 0;
	size_t		 pos = 0;

	if (n > USBIP_MAX_ISO_PACKETS) {
		*why = "too many ISO packets";
		return -1;
	}
	for (i = 0; i < n; i++) {
		if ((uint64_t)iso[i].offset + iso[i].length > len) {
			*why = "ISO packet outside the buffer";
			return -1;
		}
		pos += iso[i].length;
	}
	if (pos > dstsz) {
		*why = "ISO packets larger than the buffer";
		return -1;
	}
	/* Overlapping packets: sort the non-empty spans by offset. */
	if (n > 0) {
		if ((s = calloc(n, sizeof(*s))) == NULL) {
			*why = "out of memory";
			return -1;
		}
		for (i = 0; i < n; i++)
			if (iso[i].length != 0) {
				s[ns].off = iso[i].offset;
				s[ns++].len = iso[i].length;
			}
		qsort(s, ns, sizeof(*s), span_cmp);
		for (i = 1; i < ns; i++)
			if ((uint64_t)s[i - 1].off + s[i - 1].len > s[i].off)
				break;
		free(s);
		if (ns > 0 && i < ns) {
			*why = "overlapping ISO packets";
			return -1;
		}
	}
	pos = 0;
	for (i = 0; i < n; i++) {
		if (iso[i].length != 0)
			memcpy(dst + pos, src + iso[i].offset, iso[i].length);
		pos += iso[i].length;
	}
	return (long long)pos;
}

long long
urbmap_iso_pack(const uint8_t *buf, size_t buflen,
    const struct usbip_iso_desc *iso, uint32_t n, struct evbuffer *out)
{
	uint64_t	 pos = 0, total = 0;
	uint32_t	 i;

	for (i = 0; i < n; i++) {
		if (iso[i].actual_length > iso[i].length ||
		    pos + iso[i].length > buflen)
			return -1;
		if (out != NULL && iso[i].actual_length != 0 &&
		    evbuffer_add(out, buf + pos, iso[i].actual_length) == -1)
			return -1;
		total += iso[i].actual_length;
		pos += iso[i].length;
	}
	return (long long)total;
}

uint32_t
urbmap_iso_errors(const struct usbip_iso_desc *iso, uint32_t n)
{
	uint32_t	 i, errs = 0;

	for (i = 0; i < n; i++)
		if (iso[i].status != 0)
			errs++;
	return errs;
}
