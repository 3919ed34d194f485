/*
 * The endpoint map and the relay's per-interface check (ifmap.c, issue
 * 17): a composite device's descriptors built here, the map loaded as
 * device.c loads it across SET_CONFIGURATION and SET_INTERFACE, and
 * ifmap_refuse() asked about URBs and control requests under decisions
 * built by hand (the rule grammar is not needed for this).
 *
 * The device:
 *   configuration 1
 *     interface 0 alt 0  HID 03/01/01       0x81 interrupt IN
 *     interface 1 alt 0  storage 08/06/50   0x82 bulk IN, 0x02 bulk OUT
 *     interface 2 alt 0  audio 01/02/00     (no endpoints)
 *     interface 2 alt 1  audio 01/02/00     0x03 ISO OUT, 0x83 ISO IN
 *   configuration 2
 *     interface 0 alt 0  vendor ff/00/00    0x81 bulk IN, 0x01 bulk OUT
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/decision.h"
#include "base/desc.h"
#include "policy/ident.h"
#include "policy/ifmap.h"
#include "tap.h"
#include "proto/usbip.h"

static size_t
put_cfg(uint8_t *p, uint8_t value, uint8_t nintf)
{
	uint8_t c[9] = { 9, USB_DT_CONFIG, 0, 0, nintf, value, 0, 0x80, 50 };

	memcpy(p, c, 9);
	return 9;
}

static size_t
put_intf(uint8_t *p, uint8_t num, uint8_t alt, uint8_t nep, uint8_t cls,
    uint8_t sub, uint8_t proto)
{
	uint8_t d[9] = { 9, USB_DT_INTERFACE, num, alt, nep, cls, sub, proto,
	    0 };

	memcpy(p, d, 9);
	return 9;
}

static size_t
put_ep(uint8_t *p, uint8_t addr, uint8_t type, uint16_t maxp)
{
	uint8_t d[7] = { 7, USB_DT_ENDPOINT, addr, type, (uint8_t)maxp,
	    (uint8_t)(maxp >> 8), type == USB_XFER_ISO || type ==
	    USB_XFER_INT ? 1 : 0 };

	memcpy(p, d, 7);
	return 7;
}

static void
finish(uint8_t *p, size_t n)
{
	p[2] = (uint8_t)n;
	p[3] = (uint8_t)(n >> 8);
}

static void
build(struct gw_ident *id)
{
	uint8_t *p;
	size_t n;

	memset(id, 0, sizeof(*id));
	p = calloc(1, 256);
	n = put_cfg(p, 1, 3);
	n += put_intf(p + n, 0, 0, 1, 0x03, 0x01, 0x01);
	n += put_ep(p + n, 0x81, USB_XFER_INT, 8);
	n += put_intf(p + n, 1, 0, 2, 0x08, 0x06, 0x50);
	n += put_ep(p + n, 0x82, USB_XFER_BULK, 512);
	n += put_ep(p + n, 0x02, USB_XFER_BULK, 512);
	n += put_intf(p + n, 2, 0, 0, 0x01, 0x02, 0x00);
	n += put_intf(p + n, 2, 1, 2, 0x01, 0x02, 0x00);
	n += put_ep(p + n, 0x03, USB_XFER_ISO, 192);
	n += put_ep(p + n, 0x83, USB_XFER_ISO, 192);
	finish(p, n);
	id->config[0] = p;
	id->config_len[0] = (uint16_t)n;
	p = calloc(1, 256);
	n = put_cfg(p, 2, 1);
	n += put_intf(p + n, 0, 0, 2, 0xff, 0x00, 0x00);
	n += put_ep(p + n, 0x81, USB_XFER_BULK, 512);
	n += put_ep(p + n, 0x01, USB_XFER_BULK, 512);
	finish(p, n);
	id->config[1] = p;
	id->config_len[1] = (uint16_t)n;
	id->nconfigs = 2;
}

static void
verdict(struct decision *d, uint8_t config, uint8_t num, uint8_t alt,
    bool allow)
{
	struct iface_verdict *v = &d->iface[d->niface++];

	v->config = config;
	v->number = num;
	v->alt = alt;
	v->allow = allow;
}

static const uint8_t NOSETUP[8];

/* setup bytes */
static const uint8_t *
su(uint8_t rt, uint8_t req, uint16_t value, uint16_t index)
{
	static uint8_t s[8];

	s[0] = rt;
	s[1] = req;
	s[2] = (uint8_t)value;
	s[3] = (uint8_t)(value >> 8);
	s[4] = (uint8_t)index;
	s[5] = (uint8_t)(index >> 8);
	s[6] = s[7] = 0;
	return s;
}

int
main(void)
{
	struct gw_ident id;
	struct gw_ep in[IFMAP_NEP], out[IFMAP_NEP];
	uint8_t alts[IFMAP_NINTF];
	struct decision d;
	struct ifmap_view v;
	char buf[160];
	const char *why;

	build(&id);

	/* ---- the map ---- */
	memset(alts, 0, sizeof(alts));
	is_int(ifmap_load(in, out, &id, 1, alts), 3,
	    "configuration 1, alternate settings 0: three endpoints");
	ok(in[1].present && in[1].intf == 0 && in[1].type == USB_XFER_INT,
	    "0x81: interrupt, interface 0");
	ok(in[2].present && in[2].intf == 1 && out[2].present &&
	    out[2].intf == 1, "0x82 and 0x02: interface 1");
	ok(!in[3].present && !out[3].present,
	    "0x83/0x03: not at interface 2's alternate setting 0");
	alts[2] = 1;	/* SET_INTERFACE 2/1 */
	is_int(ifmap_load(in, out, &id, 1, alts), 5,
	    "SET_INTERFACE 2/1: five endpoints");
	ok(in[3].present && in[3].intf == 2 && in[3].type == USB_XFER_ISO &&
	    out[3].present && out[3].intf == 2,
	    "0x83 and 0x03: ISO, interface 2");
	ok(in[2].intf == 1 && in[1].intf == 0,
	    "the other interfaces' endpoints keep their interfaces");
	memset(alts, 0, sizeof(alts));	/* SET_CONFIGURATION 2 */
	is_int(ifmap_load(in, out, &id, 2, alts), 2,
	    "SET_CONFIGURATION 2: two endpoints");
	ok(in[1].present && in[1].intf == 0 && in[1].type == USB_XFER_BULK &&
	    out[1].present && out[1].intf == 0 && !in[2].present &&
	    !out[2].present && !in[3].present,
	    "configuration 2: 0x81/0x01 bulk of interface 0, nothing else");
	is_int(ifmap_load(in, out, &id, 7, alts), 0,
	    "a configuration the probe did not read: no endpoint");
	is_int(ifmap_load(in, out, &id, 0, alts), 0,
	    "unconfigured: no endpoint");

	/* ---- the check: storage (1/0) and ISO (2/1) denied ---- */
	memset(&d, 0, sizeof(d));
	d.verdict = VERDICT_ALLOW;
	verdict(&d, 1, 0, 0, true);
	verdict(&d, 1, 1, 0, false);
	verdict(&d, 1, 2, 0, true);
	verdict(&d, 1, 2, 1, false);
	verdict(&d, 2, 0, 0, false);
	memset(alts, 0, sizeof(alts));
	ifmap_load(in, out, &id, 1, alts);
	v.dec = &d;
	v.in = in;
	v.out = out;
	v.config = 1;
	v.alts = alts;
	v.dclass = 0;

	ok(ifmap_refuse(&v, 1, USBIP_DIR_IN, NOSETUP, buf, sizeof(buf)) ==
	    NULL, "interrupt IN of the allowed HID interface passes");
	why = ifmap_refuse(&v, 2, USBIP_DIR_IN, NOSETUP, buf, sizeof(buf));
	ok(why != NULL && strstr(why, "interface 1") != NULL,
	    "bulk IN 0x82 of the denied storage interface: refused (%s)",
	    why ? why : "passed");
	ok(ifmap_refuse(&v, 2, USBIP_DIR_OUT, NOSETUP, buf, sizeof(buf)) !=
	    NULL, "bulk OUT 0x02 of the storage interface: refused");

	/* an interface-policy over a device with no interface listed: nothing */
	{
		struct decision e;
		struct ifmap_view w = v;

		memset(&e, 0, sizeof(e));
		e.verdict = VERDICT_ALLOW;
		e.per_iface = true;
		w.dec = &e;
		ok(ifmap_refuse(&w, 1, USBIP_DIR_IN, NOSETUP, buf,
		    sizeof(buf)) != NULL,
		    "per_iface with no verdicts: every endpoint refused");
		ok(ifmap_refuse(&w, 0, USBIP_DIR_OUT, su(0x01,
		    USB_REQ_SET_INTERFACE, 0, 0), buf, sizeof(buf)) != NULL,
		    "per_iface with no verdicts: SET_INTERFACE refused");
	}

	/* ep0 */
	ok(ifmap_refuse(&v, 0, USBIP_DIR_IN, su(0x80, USB_REQ_GET_DESCRIPTOR,
	    0x0100, 0), buf, sizeof(buf)) == NULL,
	    "GET_DESCRIPTOR(device) to the device passes");
	ok(ifmap_refuse(&v, 0, USBIP_DIR_OUT, su(0x00,
	    USB_REQ_SET_CONFIGURATION, 1, 0), buf, sizeof(buf)) == NULL,
	    "SET_CONFIGURATION (device recipient) passes");
	ok(ifmap_refuse(&v, 0, USBIP_DIR_IN, su(0xa1, 0x01, 0x0100, 0),
	    buf, sizeof(buf)) == NULL,
	    "HID GET_REPORT to interface 0 passes");
	why = ifmap_refuse(&v, 0, USBIP_DIR_IN, su(0xa1, 0xfe, 0, 1), buf,
	    sizeof(buf));
	ok(why != NULL && strstr(why, "interface 1") != NULL,
	    "class request Get Max LUN to interface 1: refused (%s)",
	    why ? why : "passed");
	ok(ifmap_refuse(&v, 0, USBIP_DIR_OUT, su(0x21, 0xff, 0, 1), buf,
	    sizeof(buf)) != NULL, "Bulk-Only Reset to interface 1: refused");
	ok(ifmap_refuse(&v, 0, USBIP_DIR_IN, su(0x81, USB_REQ_GET_DESCRIPTOR,
	    0x2200, 1), buf, sizeof(buf)) != NULL,
	    "standard GET_DESCRIPTOR to interface 1: refused");
	ok(ifmap_refuse(&v, 0, USBIP_DIR_OUT, su(0x41, 0x42, 0, 0x0301),
	    buf, sizeof(buf)) != NULL,
	    "vendor request to interface 1 (wIndex high byte set): refused");
	ok(ifmap_refuse(&v, 0, USBIP_DIR_OUT, su(0x40, 0x42, 0, 1), buf,
	    sizeof(buf)) == NULL, "vendor request to the device passes");
	ok(ifmap_refuse(&v, 0, USBIP_DIR_OUT, su(0x01, USB_REQ_SET_INTERFACE,
	    0, 1), buf, sizeof(buf)) != NULL,
	    "SET_INTERFACE 1/0 (denied interface): refused");
	why = ifmap_refuse(&v, 0, USBIP_DIR_OUT, su(0x01,
	    USB_REQ_SET_INTERFACE, 1, 2), buf, sizeof(buf));
	ok(why != NULL && strstr(why, "alternate setting 1") != NULL,
	    "SET_INTERFACE 2/1 (a denied alternate setting): refused (%s)",
	    why ? why : "passed");
	ok(ifmap_refuse(&v, 0, USBIP_DIR_OUT, su(0x01, USB_REQ_SET_INTERFACE,
	    0, 2), buf, sizeof(buf)) == NULL,
	    "SET_INTERFACE 2/0 (allowed) passes");
	ok(ifmap_refuse(&v, 0, USBIP_DIR_IN, su(0xa1, 0x01, 0, 9), buf,
	    sizeof(buf)) != NULL,
	    "a request to interface 9 (none such: not listed): refused");
	ok(ifmap_refuse(&v, 0, USBIP_DIR_OUT, su(0x02, USB_REQ_CLEAR_FEATURE,
	    0, 0x82), buf, sizeof(buf)) != NULL,
	    "CLEAR_FEATURE(HALT) to endpoint 0x82: refused");
	ok(ifmap_refuse(&v, 0, USBIP_DIR_OUT, su(0x02, USB_REQ_CLEAR_FEATURE,
	    0, 0x02), buf, sizeof(buf)) != NULL,
	    "CLEAR_FEATURE(HALT) to endpoint 0x02: refused");
	ok(ifmap_refuse(&v, 0, USBIP_DIR_OUT, su(0x02, USB_REQ_CLEAR_FEATURE,
	    0, 0x81), buf, sizeof(buf)) == NULL,
	    "CLEAR_FEATURE(HALT) to endpoint 0x81 (HID) passes");
	ok(ifmap_refuse(&v, 0, USBIP_DIR_IN, su(0x82, USB_REQ_GET_STATUS,
	    0, 0x80), buf, sizeof(buf)) == NULL,
	    "GET_STATUS to endpoint 0 passes");
	ok(ifmap_refuse(&v, 0, USBIP_DIR_IN, su(0x82, USB_REQ_GET_STATUS,
	    0, 0x85), buf, sizeof(buf)) != NULL,
	    "GET_STATUS to endpoint 0x85 (no such endpoint now): refused");
	/* F4: recipient other, class requests to the device */
	ok(ifmap_refuse(&v, 0, USBIP_DIR_IN, su(0xa3, USB_REQ_GET_STATUS,
	    0, 1), buf, sizeof(buf)) != NULL,
	    "recipient other (class GET_STATUS) under an interface-policy: "
	    "refused");
	ok(ifmap_refuse(&v, 0, USBIP_DIR_OUT, su(0x23, 0xff, 0, 0), buf,
	    sizeof(buf)) != NULL,
	    "recipient other, bRequest 0xff (a BOT reset to firmware that "
	    "ignores the recipient): refused");
	ok(ifmap_refuse(&v, 0, USBIP_DIR_OUT, su(0x23, USB_REQ_SET_FEATURE,
	    4, 1), buf, sizeof(buf)) == NULL,
	    "the port reset the exporters intercept (0x23 SET_FEATURE 4) "
	    "passes");
	ok(ifmap_refuse(&v, 0, USBIP_DIR_IN, su(0xa0, 0xfe, 0, 0), buf,
	    sizeof(buf)) != NULL,
	    "class request (Get Max LUN) to the device: refused");
	ok(ifmap_refuse(&v, 0, USBIP_DIR_OUT, su(0x20, 0xff, 0, 0), buf,
	    sizeof(buf)) != NULL,
	    "class request (BOT reset) to the device: refused");
	v.dclass = 0x09;
	ok(ifmap_refuse(&v, 0, USBIP_DIR_IN, su(0xa0, 0x06, 0x2900, 0), buf,
	    sizeof(buf)) == NULL,
	    "a hub: class GET_DESCRIPTOR(hub) to the device passes");
	v.dclass = 0;
	/* F6: SET_INTERFACE beyond what the map tracks */
	{
		struct decision e = d;
		struct ifmap_view w = v;

		verdict(&e, 1, 40, 0, true);
		w.dec = &e;
		ok(ifmap_refuse(&w, 0, USBIP_DIR_OUT, su(0x01,
		    USB_REQ_SET_INTERFACE, 0, 40), buf, sizeof(buf)) != NULL,
		    "SET_INTERFACE to interface 40 (>= %d, untracked): "
		    "refused even when allowed", IFMAP_NINTF);
	}
	ok(ifmap_refuse(&v, 0, USBIP_DIR_IN, su(0x84, USB_REQ_GET_STATUS,
	    0, 0), buf, sizeof(buf)) != NULL,
	    "a reserved recipient (4): refused");

	/* the alternate setting moves the ISO endpoints to a denied one */
	alts[2] = 1;
	ifmap_load(in, out, &id, 1, alts);
	ok(ifmap_refuse(&v, 3, USBIP_DIR_IN, NOSETUP, buf, sizeof(buf)) !=
	    NULL, "after SET_INTERFACE 2/1: ISO IN 0x83 refused");
	ok(ifmap_refuse(&v, 0, USBIP_DIR_IN, su(0xa1, 0x81, 0x0100, 2), buf,
	    sizeof(buf)) != NULL,
	    "a class request to interface 2 at alternate setting 1: refused");
	ok(ifmap_refuse(&v, 0, USBIP_DIR_OUT, su(0x01, USB_REQ_SET_INTERFACE,
	    0, 2), buf, sizeof(buf)) == NULL,
	    "SET_INTERFACE 2/0 back to the allowed setting passes");
	ok(ifmap_refuse(&v, 1, USBIP_DIR_IN, NOSETUP, buf, sizeof(buf)) ==
	    NULL, "0x81 still passes");

	/* SET_CONFIGURATION 2: its one interface is denied */
	memset(alts, 0, sizeof(alts));
	ifmap_load(in, out, &id, 2, alts);
	v.config = 2;
	ok(ifmap_refuse(&v, 1, USBIP_DIR_IN, NOSETUP, buf, sizeof(buf)) !=
	    NULL, "configuration 2: bulk IN 0x81 of its denied interface 0 "
	    "refused");
	ok(ifmap_refuse(&v, 0, USBIP_DIR_IN, su(0xa1, 0x01, 0, 0), buf,
	    sizeof(buf)) != NULL,
	    "configuration 2: a request to interface 0 refused");
	ok(ifmap_refuse(&v, 0, USBIP_DIR_OUT, su(0x00,
	    USB_REQ_SET_CONFIGURATION, 1, 0), buf, sizeof(buf)) == NULL,
	    "configuration 2: SET_CONFIGURATION 1 passes");

	/* the decision changes (a policy change): the next URB follows */
	memset(alts, 0, sizeof(alts));
	ifmap_load(in, out, &id, 1, alts);
	v.config = 1;
	d.iface[1].allow = true;
	ok(ifmap_refuse(&v, 2, USBIP_DIR_IN, NOSETUP, buf, sizeof(buf)) ==
	    NULL, "storage allowed now: 0x82 passes");
	d.iface[0].allow = false;
	ok(ifmap_refuse(&v, 1, USBIP_DIR_IN, NOSETUP, buf, sizeof(buf)) !=
	    NULL, "HID denied now: 0x81 refused");

	/* whole-device decisions */
	d.niface = 0;
	ok(ifmap_refuse(&v, 2, USBIP_DIR_IN, NOSETUP, buf, sizeof(buf)) ==
	    NULL && ifmap_refuse(&v, 0, USBIP_DIR_IN, su(0xa1, 0xfe, 0, 1),
	    buf, sizeof(buf)) == NULL,
	    "no interface verdicts, allowed: everything passes");
	d.verdict = VERDICT_BLOCK;
	ok(ifmap_refuse(&v, 1, USBIP_DIR_IN, NOSETUP, buf, sizeof(buf)) !=
	    NULL && ifmap_refuse(&v, 0, USBIP_DIR_IN, su(0x80,
	    USB_REQ_GET_DESCRIPTOR, 0x0100, 0), buf, sizeof(buf)) != NULL,
	    "blocked: nothing passes, ep0 to the device included");
	d.verdict = VERDICT_PENDING;
	ok(ifmap_refuse(&v, 1, USBIP_DIR_IN, NOSETUP, buf, sizeof(buf)) !=
	    NULL, "pending: nothing passes");

	/* a verdict list that names interfaces the device does not have */
	memset(&d, 0, sizeof(d));
	d.verdict = VERDICT_ALLOW;
	verdict(&d, 1, 0, 0, true);
	ok(ifmap_refuse(&v, 2, USBIP_DIR_IN, NOSETUP, buf, sizeof(buf)) !=
	    NULL, "an interface the verdicts do not list is denied");
	why = ifmap_refuse(&v, 2, USBIP_DIR_IN, NOSETUP, buf, 8);
	ok(why != NULL && strlen(why) < 8, "a short buffer: truncated");

	free(id.config[0]);
	free(id.config[1]);

	/* F1/F5: an endpoint address listed by two interfaces */
	{
		struct gw_ident h;
		uint8_t *p = calloc(1, 256);
		size_t n;

		memset(&h, 0, sizeof(h));
		n = put_cfg(p, 1, 2);
		n += put_intf(p + n, 0, 0, 2, 0x08, 0x06, 0x50);
		n += put_ep(p + n, 0x81, USB_XFER_BULK, 512);
		n += put_ep(p + n, 0x02, USB_XFER_BULK, 512);
		n += put_intf(p + n, 1, 0, 2, 0xff, 0x00, 0x00);
		n += put_ep(p + n, 0x81, USB_XFER_BULK, 512);
		n += put_ep(p + n, 0x02, USB_XFER_BULK, 512);
		finish(p, n);
		h.config[0] = p;
		h.config_len[0] = (uint16_t)n;
		h.nconfigs = 1;
		memset(alts, 0, sizeof(alts));
		ifmap_load(in, out, &h, 1, alts);
		ok(in[1].present && in[1].intf == 0 && out[2].intf == 0,
		    "an endpoint two interfaces list belongs to the first "
		    "(as Linux)");
		memset(&d, 0, sizeof(d));
		d.verdict = VERDICT_ALLOW;
		verdict(&d, 1, 0, 0, false);
		verdict(&d, 1, 1, 0, true);
		v.config = 1;
		v.dec = &d;
		why = ifmap_refuse(&v, 1, USBIP_DIR_IN, NOSETUP, buf,
		    sizeof(buf));
		ok(why != NULL, "storage (denied) and vendor (allowed) share "
		    "0x81: refused (%s)", why ? why : "passed");
		ok(ifmap_refuse(&v, 2, USBIP_DIR_OUT, NOSETUP, buf,
		    sizeof(buf)) != NULL, "... and 0x02 refused");
		d.iface[0].allow = true;
		ok(ifmap_refuse(&v, 1, USBIP_DIR_IN, NOSETUP, buf,
		    sizeof(buf)) == NULL, "both owners allowed: passes");
		d.iface[0].allow = false;
		d.iface[1].allow = false;
		d.iface[0].allow = true;
		ok(ifmap_refuse(&v, 1, USBIP_DIR_IN, NOSETUP, buf,
		    sizeof(buf)) != NULL,
		    "the first owner allowed, the second denied: refused");
		why = ifmap_anomaly(&h, buf, sizeof(buf));
		ok(why != NULL && strstr(why, "0x81") != NULL,
		    "the probe's anomaly: endpoint 0x81 in interfaces 0 and 1 "
		    "(%s)", why ? why : "none");
		/* the same address in alternate settings of one interface */
		p[9 + 9 + 7 + 7 + 2] = 0;	/* interface 1 -> 0 ... */
		p[9 + 9 + 7 + 7 + 3] = 1;	/* ... alternate setting 1 */
		ok(ifmap_anomaly(&h, buf, sizeof(buf)) == NULL,
		    "0x81 in two alternate settings of one interface: fine");
		p[9 + 9 + 7 + 7 + 3] = 0;	/* interface 0 alt 0 twice */
		why = ifmap_anomaly(&h, buf, sizeof(buf));
		ok(why != NULL && strstr(why, "twice") != NULL,
		    "two descriptors for interface 0 alternate setting 0: an "
		    "anomaly (%s)", why ? why : "none");
		free(p);
		build(&id);
		ok(ifmap_anomaly(&id, buf, sizeof(buf)) == NULL,
		    "the composite device (0x81 in two configurations): no "
		    "anomaly");
		free(id.config[0]);
		free(id.config[1]);
	}
	return done_testing();
}
