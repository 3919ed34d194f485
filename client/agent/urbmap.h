/*
 * urbmap: the URB engine's pure logic (protocol.md 1.9.3), with no
 * device and no connection, so that tests/unit/test_agent_urb.c can pin
 * every case: the libusb -> errno status map, the classification of
 * control requests the agent performs itself, the endpoint 0 checks,
 * and ISO gather (OUT) / pack (IN).
 */
#ifndef USBGW_AGENT_URBMAP_H
#define USBGW_AGENT_URBMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/buffer.h>

#include "proto/usbip.h"

/* Linux transfer_flags the agent reads (include/linux/usb.h). */
#define URBF_SHORT_NOT_OK	0x0001
#define URBF_ZERO_PACKET	0x0040

/* Control requests the stub performs through the USB core itself. */
enum urbmap_req {
	URBREQ_PLAIN,		/* passed to the device */
	URBREQ_SET_CONFIG,	/* 00 09: libusb_set_configuration */
	URBREQ_SET_INTERFACE,	/* 01 0b: libusb_set_interface_alt_setting */
	URBREQ_CLEAR_HALT,	/* 02 01 wValue 0: libusb_clear_halt */
	URBREQ_PORT_RESET,	/* 23 03 wValue 4: libusb_reset_device */
};

/* What a transfer's end looked like, for urbmap_status(). */
enum urbmap_end {
	URBEND_COMPLETED,
	URBEND_ERROR,
	URBEND_TIMED_OUT,
	URBEND_CANCELLED,
	URBEND_STALL,
	URBEND_NO_DEVICE,
	URBEND_OVERFLOW,
};

/* Why a transfer was cancelled: its CMD_UNLINK, or the agent itself
 * (SET_CONFIGURATION, SET_INTERFACE, reset, device gone). */
enum urbmap_cancel {
	URBCANCEL_NONE,
	URBCANCEL_UNLINK,
	URBCANCEL_AGENT,
};

enum urbmap_req	urbmap_classify(const uint8_t setup[8]);
const char	*urbmap_req_name(enum urbmap_req);

/*
 * Endpoint 0 checks (protocol.md 1.9.3, as the host's usb_submit_urb()
 * and the stub): wLength equals transfer_buffer_length and the direction
 * is bit 7 of bmRequestType.  0, or -1 with *why.
 */
int		 urbmap_check_control(const uint8_t setup[8], uint32_t dir,
		    uint32_t length, const char **why);

/* RET_SUBMIT status for a transfer that ended (table in 1.9.3). */
int32_t		 urbmap_status(enum urbmap_end, enum urbmap_cancel,
		    uint32_t flags, uint32_t actual, uint32_t requested);
/* RET_SUBMIT status for a libusb error code (LIBUSB_ERROR_*, < 0): a
 * submit that failed, or an intercepted request's libusb call. */
int32_t		 urbmap_errno(int libusb_error);
/* An ISO packet's status (libusb's per-packet transfer status). */
int32_t		 urbmap_iso_status(enum urbmap_end);

/*
 * ISO OUT: gather the n packets of src (the URB buffer as sent, len
 * bytes, packets at their offsets, gaps allowed) back to back into dst
 * (dstsz bytes), in packet order.  Packets must lie inside src (64-bit
 * sums) and must not overlap.  Returns the bytes gathered, or -1 with
 * *why.
 */
long long	 urbmap_iso_gather(const uint8_t *src, size_t len,
		    const struct usbip_iso_desc *iso, uint32_t n,
		    uint8_t *dst, size_t dstsz, const char **why);
/* The sum of the n packets' lengths, or -1 (over USBIP_MAX_TRANSFER, or
 * a packet outside a buffer of len bytes). */
long long	 urbmap_iso_total(const struct usbip_iso_desc *iso, uint32_t n,
		    uint32_t len);
/*
 * ISO IN: libusb filled buf back to back (packet i at the sum of the
 * lengths before it) and iso[i].actual_length.  Append each packet's
 * actual bytes to out, packed as protocol.md 1.3.4 (NULL: count only).
 * Returns the sum of the actual lengths, or -1 if a packet's actual
 * length exceeds its length or buf (buflen bytes) is too short.
 */
long long	 urbmap_iso_pack(const uint8_t *buf, size_t buflen,
		    const struct usbip_iso_desc *iso, uint32_t n,
		    struct evbuffer *out);
/* Packets whose status is not 0 (RET_SUBMIT's error_count). */
uint32_t	 urbmap_iso_errors(const struct usbip_iso_desc *iso,
		    uint32_t n);

#endif
