/*
 * usbgw-agent's URB engine, the parts that need no device (urbmap.c):
 * the libusb -> errno status map (protocol.md 1.9.3), the control
 * requests the agent performs itself instead of submitting them, the
 * endpoint 0 checks, and ISO gather (OUT, gaps allowed, overlaps and
 * out-of-buffer packets refused) and pack (IN, 1.3.4).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <libusb.h>

#include "../../client/agent/urbmap.h"
#include "tap.h"

static void
setup(uint8_t s[8], uint8_t type, uint8_t req, uint16_t value, uint16_t index,
    uint16_t len)
{
	s[0] = type;
	s[1] = req;
	s[2] = value & 0xff;
	s[3] = value >> 8;
	s[4] = index & 0xff;
	s[5] = index >> 8;
	s[6] = len & 0xff;
	s[7] = len >> 8;
}

static void
test_classify(void)
{
	static const struct {
		uint8_t type, req;
		uint16_t value;
		enum urbmap_req want;
		const char *what;
	} t[] = {
		{ 0x00, 0x09, 1, URBREQ_SET_CONFIG, "SET_CONFIGURATION 1" },
		{ 0x00, 0x09, 0, URBREQ_SET_CONFIG, "SET_CONFIGURATION 0" },
		{ 0x01, 0x0b, 1, URBREQ_SET_INTERFACE, "SET_INTERFACE" },
		{ 0x02, 0x01, 0, URBREQ_CLEAR_HALT, "CLEAR_FEATURE(HALT)" },
		{ 0x23, 0x03, 4, URBREQ_PORT_RESET, "SET_FEATURE(PORT_RESET)" },
		/* Look-alikes that go to the device. */
		{ 0x80, 0x06, 0x0100, URBREQ_PLAIN, "GET_DESCRIPTOR" },
		{ 0x80, 0x08, 0, URBREQ_PLAIN, "GET_CONFIGURATION" },
		{ 0x81, 0x0a, 0, URBREQ_PLAIN, "GET_INTERFACE" },
		{ 0x02, 0x01, 1, URBREQ_PLAIN, "CLEAR_FEATURE(endpoint, 1)" },
		{ 0x00, 0x01, 1, URBREQ_PLAIN, "CLEAR_FEATURE(REMOTE_WAKEUP)" },
		{ 0x02, 0x03, 0, URBREQ_PLAIN, "SET_FEATURE(ENDPOINT_HALT)" },
		{ 0x23, 0x03, 8, URBREQ_PLAIN, "SET_FEATURE(PORT_POWER)" },
		{ 0x23, 0x01, 4, URBREQ_PLAIN, "CLEAR_FEATURE(port 4)" },
		{ 0x21, 0x09, 0x0200, URBREQ_PLAIN, "HID SET_REPORT (09)" },
		{ 0x21, 0x0b, 0, URBREQ_PLAIN, "HID SET_PROTOCOL (0b)" },
		{ 0x41, 0x0b, 1, URBREQ_PLAIN, "vendor 0b to an interface" },
		{ 0x40, 0x09, 1, URBREQ_PLAIN, "vendor 09 to the device" },
	};
	uint8_t s[8];
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		setup(s, t[i].type, t[i].req, t[i].value, 0x81, 0);
		is_int(urbmap_classify(s), t[i].want, "classify %s: %s",
		    t[i].what, urbmap_req_name(t[i].want));
	}
}

static void
test_control(void)
{
	const char *why = NULL;
	uint8_t s[8];

	setup(s, 0x80, 0x06, 0x0100, 0, 18);
	ok(urbmap_check_control(s, USBIP_DIR_IN, 18, &why) == 0,
	    "GET_DESCRIPTOR IN 18/18");
	ok(urbmap_check_control(s, USBIP_DIR_IN, 64, &why) == -1 &&
	    strstr(why, "wLength") != NULL, "wLength 18, buffer 64: %s", why);
	ok(urbmap_check_control(s, USBIP_DIR_OUT, 18, &why) == -1 &&
	    strstr(why, "direction") != NULL, "IN request sent OUT: %s", why);
	setup(s, 0x21, 0x09, 0x0200, 0, 1);
	ok(urbmap_check_control(s, USBIP_DIR_OUT, 1, &why) == 0,
	    "SET_REPORT OUT 1/1");
	ok(urbmap_check_control(s, USBIP_DIR_IN, 1, &why) == -1,
	    "OUT request sent IN: refused");
	setup(s, 0x00, 0x09, 1, 0, 0);
	ok(urbmap_check_control(s, USBIP_DIR_OUT, 0, &why) == 0,
	    "SET_CONFIGURATION, no data");
	ok(urbmap_check_control(s, USBIP_DIR_OUT, 0xffff + 1u, &why) == -1,
	    "wLength 0, buffer 65536: refused");
}

static void
test_status(void)
{
	/* The table of protocol.md 1.9.3. */
	is_int(urbmap_status(URBEND_COMPLETED, URBCANCEL_NONE, 0, 512, 512), 0,
	    "COMPLETED full: 0");
	is_int(urbmap_status(URBEND_COMPLETED, URBCANCEL_NONE, 0, 13, 512), 0,
	    "COMPLETED short without URB_SHORT_NOT_OK: 0");
	is_int(urbmap_status(URBEND_COMPLETED, URBCANCEL_NONE,
	    URBF_SHORT_NOT_OK, 13, 512), -EREMOTEIO,
	    "COMPLETED short with URB_SHORT_NOT_OK: -EREMOTEIO");
	is_int(urbmap_status(URBEND_COMPLETED, URBCANCEL_NONE,
	    URBF_SHORT_NOT_OK, 512, 512), 0,
	    "COMPLETED full with URB_SHORT_NOT_OK: 0");
	is_int(urbmap_status(URBEND_COMPLETED, URBCANCEL_NONE,
	    URBF_SHORT_NOT_OK, 0, 0), 0, "zero-length, asked zero: 0");
	is_int(urbmap_status(URBEND_STALL, URBCANCEL_NONE, 0, 0, 8), -EPIPE,
	    "STALL: -EPIPE");
	is_int(urbmap_status(URBEND_OVERFLOW, URBCANCEL_NONE, 0, 0, 8),
	    -EOVERFLOW, "OVERFLOW: -EOVERFLOW");
	is_int(urbmap_status(URBEND_CANCELLED, URBCANCEL_UNLINK, 0, 0, 8),
	    -ECONNRESET, "CANCELLED by an unlink: -ECONNRESET (expsrv's "
	    "\"cancelled\")");
	is_int(urbmap_status(URBEND_CANCELLED, URBCANCEL_AGENT, 0, 0, 8),
	    -ESHUTDOWN, "CANCELLED by the agent: -ESHUTDOWN");
	is_int(urbmap_status(URBEND_NO_DEVICE, URBCANCEL_UNLINK, 0, 0, 8),
	    -ESHUTDOWN, "NO_DEVICE, even while unlinking: -ESHUTDOWN");
	is_int(urbmap_status(URBEND_ERROR, URBCANCEL_NONE, 0, 0, 8), -EPROTO,
	    "ERROR: -EPROTO");
	is_int(urbmap_status(URBEND_TIMED_OUT, URBCANCEL_NONE, 0, 0, 8),
	    -ETIMEDOUT, "TIMED_OUT: -ETIMEDOUT");
	is_int(urbmap_errno(LIBUSB_ERROR_NO_MEM), -ENOMEM, "submit NO_MEM");
	is_int(urbmap_errno(LIBUSB_ERROR_INVALID_PARAM), -EINVAL,
	    "submit INVALID_PARAM");
	is_int(urbmap_errno(LIBUSB_ERROR_PIPE), -EPIPE, "call PIPE");
	is_int(urbmap_errno(LIBUSB_ERROR_NO_DEVICE), -ESHUTDOWN,
	    "call NO_DEVICE");
	is_int(urbmap_errno(LIBUSB_ERROR_OTHER), -EPROTO, "call OTHER");
	is_int(urbmap_errno(-1000), -EPROTO, "unknown libusb error: -EPROTO");
	is_int(urbmap_errno(0), 0, "success: 0");
	is_int(urbmap_iso_status(URBEND_COMPLETED), 0, "ISO packet ok: 0");
	is_int(urbmap_iso_status(URBEND_ERROR), -EPROTO,
	    "ISO packet error: -EPROTO");
}

static void
test_gather(void)
{
	uint8_t src[64], dst[64];
	struct usbip_iso_desc iso[4];
	const char *why = NULL;
	long long n;
	int i;

	for (i = 0; i < 64; i++)
		src[i] = (uint8_t)i;
	memset(iso, 0, sizeof(iso));
	/* Packets at 0, 16, 40 (gaps), and one of length 0. */
	iso[0].offset = 0;	iso[0].length = 10;
	iso[1].offset = 16;	iso[1].length = 8;
	iso[2].offset = 40;	iso[2].length = 0;
	iso[3].offset = 40;	iso[3].length = 24;
	memset(dst, 0xee, sizeof(dst));
	n = urbmap_iso_gather(src, 64, iso, 4, dst, sizeof(dst), &why);
	is_int(n, 42, "gather with gaps: 10 + 8 + 0 + 24 bytes");
	ok(dst[0] == 0 && dst[9] == 9 && dst[10] == 16 && dst[17] == 23 &&
	    dst[18] == 40 && dst[41] == 63 && dst[42] == 0xee,
	    "gathered back to back in packet order");
	is_int(urbmap_iso_total(iso, 4, 64), 42, "total 42");

	/* Out of order offsets are fine if they do not overlap. */
	iso[0].offset = 48;	iso[0].length = 16;
	iso[3].offset = 0;	iso[3].length = 16;
	n = urbmap_iso_gather(src, 64, iso, 4, dst, sizeof(dst), &why);
	ok(n == 40 && dst[0] == 48 && dst[16] == 16 && dst[24] == 0,
	    "offsets out of order, no overlap: gathered in packet order");

	iso[1].offset = 10;	iso[1].length = 8;	/* 10..18 in 0..16 */
	n = urbmap_iso_gather(src, 64, iso, 4, dst, sizeof(dst), &why);
	ok(n == -1 && strstr(why, "overlapping") != NULL, "overlap: %s",
	    n == -1 ? why : "accepted");
	iso[1].offset = 16;	iso[1].length = 8;
	iso[0].offset = 0xfffffff0u;	iso[0].length = 0x20;
	n = urbmap_iso_gather(src, 64, iso, 4, dst, sizeof(dst), &why);
	ok(n == -1 && strstr(why, "outside") != NULL,
	    "offset + length wraps in 32 bits: %s", n == -1 ? why : "accepted");
	is_int(urbmap_iso_total(iso, 4, 64), -1, "total: outside -> -1");
	iso[0].offset = 60;	iso[0].length = 5;
	n = urbmap_iso_gather(src, 64, iso, 4, dst, sizeof(dst), &why);
	ok(n == -1, "packet one byte past the buffer: refused");
	iso[0].offset = 48;	iso[0].length = 16;
	n = urbmap_iso_gather(src, 64, iso, 4, dst, 20, &why);
	ok(n == -1, "destination too small: refused");
	n = urbmap_iso_gather(src, 0, iso, 0, dst, 0, &why);
	is_int(n, 0, "no packets: 0 bytes");
	/* A CMD_SUBMIT with no data stage: urb.c passes no source at all. */
	memset(iso, 0, sizeof(iso));
	n = urbmap_iso_gather(NULL, 0, iso, 2, dst, sizeof(dst), &why);
	is_int(n, 0, "two empty packets, no data stage (NULL source): 0 bytes");
	iso[1].length = 1;
	n = urbmap_iso_gather(NULL, 0, iso, 2, dst, sizeof(dst), &why);
	ok(n == -1 && strstr(why, "outside") != NULL,
	    "a packet of 1 byte with no data stage: %s",
	    n == -1 ? why : "accepted");
}

static void
test_pack(void)
{
	/* libusb's layout: packet i at the sum of the lengths before it. */
	uint8_t buf[48], out[64];
	struct usbip_iso_desc iso[3];
	struct evbuffer *eb = evbuffer_new();
	long long n;
	int i;

	for (i = 0; i < 48; i++)
		buf[i] = (uint8_t)i;
	memset(iso, 0, sizeof(iso));
	iso[0].offset = 0;	iso[0].length = 16;	iso[0].actual_length = 3;
	iso[1].offset = 32;	iso[1].length = 16;	iso[1].actual_length = 0;
	iso[2].offset = 64;	iso[2].length = 16;	iso[2].actual_length = 16;
	iso[2].status = -EPROTO;
	n = urbmap_iso_pack(buf, 48, iso, 3, eb);
	is_int(n, 19, "packed 3 + 0 + 16 bytes");
	is_int(evbuffer_get_length(eb), 19, "the output holds 19 bytes");
	evbuffer_remove(eb, out, sizeof(out));
	ok(out[0] == 0 && out[2] == 2 && out[3] == 32 && out[18] == 47,
	    "each packet's actual bytes, from libusb's slot, back to back");
	is_int(urbmap_iso_errors(iso, 3), 1, "error_count 1");
	is_int(urbmap_iso_pack(buf, 48, iso, 3, NULL), 19, "count only");
	iso[1].actual_length = 17;
	is_int(urbmap_iso_pack(buf, 48, iso, 3, NULL), -1,
	    "actual_length > length: -1");
	iso[1].actual_length = 0;
	is_int(urbmap_iso_pack(buf, 40, iso, 3, NULL), -1,
	    "libusb buffer shorter than the packets: -1");
	evbuffer_free(eb);
}

int
main(void)
{
	test_classify();
	test_control();
	test_status();
	test_gather();
	test_pack();
	return done_testing();
}
