/*
 * ident.c: what a vhci host reads on ep0 is held to what the probe read.
 * The bytes must be a prefix of the probe's; a descriptor the probe did
 * not get may not appear; the identity's strings are checked in the
 * probe's language only; other requests and descriptors pass; and
 * SET_CONFIGURATION / SET_INTERFACE name probed settings only.
 */
#include <stdlib.h>
#include <string.h>

#include "base/desc.h"
#include "policy/ident.h"
#include "tap.h"
#include "base/util.h"

static uint8_t *
dup(const void *p, size_t n)
{
	uint8_t *q = xmalloc(n);

	memcpy(q, p, n);
	return q;
}

static void
setup(uint8_t s[8], uint8_t rt, uint8_t type, uint8_t idx, uint16_t windex,
    uint16_t wlen)
{
	s[0] = rt;
	s[1] = USB_REQ_GET_DESCRIPTOR;
	s[2] = idx;
	s[3] = type;
	s[4] = (uint8_t)windex;
	s[5] = (uint8_t)(windex >> 8);
	s[6] = (uint8_t)wlen;
	s[7] = (uint8_t)(wlen >> 8);
}

int
main(void)
{
	/* a storage device: one configuration, interface 0 alt 0 and 1 */
	static const uint8_t dd[18] = { 18, 1, 0x00, 0x02, 0, 0, 0, 64,
	    0x09, 0x12, 0x02, 0x00, 0x00, 0x01, 1, 2, 3, 1 };
	static const uint8_t cfg[] = {
		9, 2, 9 + 9 + 7 + 9, 0, 1, 1, 0, 0x80, 50,
		9, 4, 0, 0, 1, 8, 6, 0x50, 0,
		7, 5, 0x81, 2, 0x00, 0x02, 0,
		9, 4, 0, 1, 0, 8, 6, 0x50, 0,
	};
	static const uint8_t langs[4] = { 4, 3, 0x09, 0x04 };
	static const uint8_t serial[6] = { 6, 3, 'A', 0, 'B', 0 };
	static const uint8_t evil[6] = { 6, 3, 'E', 0, 'V', 0 };
	struct gw_ident id;
	uint8_t s[8];
	char buf[192];
	const char *w;

	memset(&id, 0, sizeof(id));
	memcpy(id.dev_desc, dd, sizeof(dd));
	id.nconfigs = id.nconfigs_dev = 1;
	id.config[0] = dup(cfg, sizeof(cfg));
	id.config_len[0] = sizeof(cfg);
	id.str_raw[0] = dup(langs, sizeof(langs));
	id.str_len[0] = sizeof(langs);
	id.str_raw[3] = dup(serial, sizeof(serial));
	id.str_len[3] = sizeof(serial);
	id.langid = 0x0409;

	setup(s, 0x80, USB_DT_DEVICE, 0, 0, 64);
	ok(gw_ident_check_read(&id, s, dd, 18, buf, sizeof(buf)) == NULL,
	    "the device descriptor as probed passes");
	ok(gw_ident_check_read(&id, s, dd, 8, buf, sizeof(buf)) == NULL,
	    "... its first 8 bytes pass");
	{
		uint8_t d2[19];

		memcpy(d2, dd, 18);
		d2[18] = 0;
		ok(gw_ident_check_read(&id, s, d2, 19, buf, sizeof(buf)) != NULL,
		    "... one byte more does not");
		d2[12] ^= 1;
		w = gw_ident_check_read(&id, s, d2, 18, buf, sizeof(buf));
		ok(w != NULL && strstr(w, "at byte 12") != NULL,
		    "... a changed bcdDevice is named by its offset (%s)", w);
	}
	setup(s, 0x80, USB_DT_CONFIG, 0, 0, 9);
	ok(gw_ident_check_read(&id, s, cfg, 9, buf, sizeof(buf)) == NULL,
	    "the configuration's header passes");
	setup(s, 0x80, USB_DT_CONFIG, 1, 0, 9);
	w = gw_ident_check_read(&id, s, cfg, 9, buf, sizeof(buf));
	ok(w != NULL && strstr(w, "did not show the probe") != NULL,
	    "a configuration index the probe did not read may not appear");
	ok(gw_ident_check_read(&id, s, cfg, 0, buf, sizeof(buf)) == NULL,
	    "... a stall (no data) passes");
	setup(s, 0x80, USB_DT_BOS, 0, 0, 5);
	ok(gw_ident_check_read(&id, s, cfg, 5, buf, sizeof(buf)) != NULL,
	    "a BOS the probe did not get may not appear");
	setup(s, 0x80, USB_DT_OTHER_SPEED_CONFIG, 0, 0, 9);
	ok(gw_ident_check_read(&id, s, cfg, 9, buf, sizeof(buf)) != NULL,
	    "nor an other-speed configuration");
	setup(s, 0x80, USB_DT_DEVICE_QUALIFIER, 0, 0, 10);
	ok(gw_ident_check_read(&id, s, cfg, 10, buf, sizeof(buf)) != NULL,
	    "nor a device qualifier");
	setup(s, 0x80, USB_DT_STRING, 0, 0, 255);
	ok(gw_ident_check_read(&id, s, langs, 4, buf, sizeof(buf)) == NULL,
	    "the language table passes");
	setup(s, 0x80, USB_DT_STRING, 3, 0x0409, 255);
	ok(gw_ident_check_read(&id, s, serial, 6, buf, sizeof(buf)) == NULL,
	    "the serial number string passes");
	w = gw_ident_check_read(&id, s, evil, 6, buf, sizeof(buf));
	ok(w != NULL && strstr(w, "serial number string") != NULL,
	    "another serial number does not (%s)", w);
	setup(s, 0x80, USB_DT_STRING, 1, 0x0409, 255);
	ok(gw_ident_check_read(&id, s, evil, 6, buf, sizeof(buf)) != NULL,
	    "a manufacturer string the probe did not get may not appear");
	setup(s, 0x80, USB_DT_STRING, 3, 0x0407, 255);
	ok(gw_ident_check_read(&id, s, evil, 6, buf, sizeof(buf)) == NULL,
	    "another language is not the identity's: passes");
	setup(s, 0x80, USB_DT_STRING, 4, 0x0409, 255);
	ok(gw_ident_check_read(&id, s, evil, 6, buf, sizeof(buf)) == NULL,
	    "a string outside the identity passes");
	setup(s, 0x81, 0x22, 0, 0, 64);
	ok(gw_ident_check_read(&id, s, evil, 6, buf, sizeof(buf)) == NULL,
	    "a class descriptor (HID report) passes");
	setup(s, 0xc0, USB_DT_DEVICE, 0, 0, 18);
	ok(gw_ident_check_read(&id, s, evil, 6, buf, sizeof(buf)) == NULL,
	    "a vendor request passes");
	setup(s, 0x82, USB_DT_CONFIG, 0, 0, 9);
	ok(gw_ident_check_read(&id, s, evil, 6, buf, sizeof(buf)) != NULL,
	    "a standard descriptor read with another recipient is checked too");

	ok(gw_ident_has_config(&id, 1) && gw_ident_has_config(&id, 0),
	    "configuration 1 and 0 (unconfigured) exist");
	ok(!gw_ident_has_config(&id, 2), "configuration 2 does not");
	ok(gw_ident_has_alt(&id, 1, 0, 0) && gw_ident_has_alt(&id, 1, 0, 1),
	    "interface 0 has alternate settings 0 and 1");
	ok(!gw_ident_has_alt(&id, 1, 0, 2) && !gw_ident_has_alt(&id, 1, 1, 0) &&
	    !gw_ident_has_alt(&id, 0, 0, 0) && !gw_ident_has_alt(&id, 2, 0, 0),
	    "no alternate setting 2, no interface 1, none unconfigured or in "
	    "a configuration it does not have");

	gw_ident_clear(&id);
	ok(id.config[0] == NULL && id.str_raw[3] == NULL && id.nconfigs == 0,
	    "gw_ident_clear frees and zeroes");
	gw_ident_clear(&id);
	ok(1, "... twice");
	return done_testing();
}
