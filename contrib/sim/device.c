/*
 * Emulated devices: descriptors built from a spec, the standard and
 * class control requests a real device answers, and what each endpoint
 * does with URBs.  USB descriptors and setup packets are little-endian
 * USB bytes (not USB/IP bytes): they are built and read here with
 * explicit byte offsets.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/util.h"
#include "base/desc.h"
#include "sim.h"

#define USB_DT_DEVICE_QUALIFIER	0x06
#define USB_DT_OTHER_SPEED_CONFIG 0x07
#define USB_DT_BOS		0x0f
#define USB_DT_HID		0x21
#define USB_DT_REPORT		0x22
#define USB_DT_SS_EP_COMP	0x30

#define USB_REQ_SET_ADDRESS	0x05
#define USB_REQ_GET_INTERFACE	0x0a

#define USB_RECIP_DEVICE	0x00
#define USB_RECIP_INTERFACE	0x01
#define USB_RECIP_ENDPOINT	0x02
#define USB_RECIP_OTHER		0x03
#define USB_TYPE_STANDARD	0x00
#define USB_TYPE_CLASS		0x20
#define USB_DIR_IN		0x80

#define USB_FEAT_ENDPOINT_HALT	0
#define USB_FEAT_REMOTE_WAKEUP	1
#define USB_PORT_FEAT_RESET	4

#define HID_GET_REPORT		0x01
#define HID_GET_IDLE		0x02
#define HID_GET_PROTOCOL	0x03
#define HID_SET_REPORT		0x09
#define HID_SET_IDLE		0x0a
#define HID_SET_PROTOCOL	0x0b
#define MSC_RESET		0xff
#define MSC_GET_MAX_LUN		0xfe

#define URB_SHORT_NOT_OK	0x0001

#define SIM_CFG_MAX		512	/* our configurations are < 200 bytes */
#define SIM_CTRL_MAX		1024	/* largest control IN reply */
#define HID_REPORT_LEN		8

/* The HID 1.11 boot keyboard report descriptor (appendix E.6). */
static const uint8_t hid_report_desc[] = {
	0x05, 0x01, 0x09, 0x06, 0xa1, 0x01, 0x05, 0x07, 0x19, 0xe0, 0x29,
	0xe7, 0x15, 0x00, 0x25, 0x01, 0x75, 0x01, 0x95, 0x08, 0x81, 0x02,
	0x95, 0x01, 0x75, 0x08, 0x81, 0x01, 0x95, 0x05, 0x75, 0x01, 0x05,
	0x08, 0x19, 0x01, 0x29, 0x05, 0x91, 0x02, 0x95, 0x01, 0x75, 0x03,
	0x91, 0x01, 0x95, 0x06, 0x75, 0x08, 0x15, 0x00, 0x25, 0x65, 0x05,
	0x07, 0x19, 0x00, 0x29, 0x65, 0x81, 0x00, 0xc0,
};

static void	hid_timer_cb(int, short, void *);
static void	hid_service(struct sim_dev *);
static void	loop_service(struct sim_dev *);

static struct sim_devq *
devq(struct sim_exp *exp)
{
	return &exp->devs;
}

static void
put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static uint16_t
get_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

/* ---- the keyboard ---------------------------------------------------- */


/* Report k of the script: even k presses character k/2, odd releases. */
static void
hid_script_report(const struct sim_dev *dev, size_t k, uint8_t r[HID_REPORT_LEN])
{
	uint8_t mod, usage;

	memset(r, 0, HID_REPORT_LEN);
	if (k % 2 == 0 && hid_key((unsigned char)dev->spec.keys[k / 2], &mod,
	    &usage) == 0) {
		r[0] = mod;
		r[2] = usage;
	}
}

/* ---- descriptors ----------------------------------------------------- */

struct cfgbuf {
	uint8_t		*p;
	size_t		 len;
};

static uint8_t *
cfg_add(struct cfgbuf *b, size_t n)
{
	uint8_t *p;

	if (b->len + n > SIM_CFG_MAX)
		fatalx("configuration descriptor exceeds %d bytes",
		    SIM_CFG_MAX);
	p = b->p + b->len;
	memset(p, 0, n);
	b->len += n;
	return p;
}

static void
cfg_intf(struct sim_dev *dev, struct cfgbuf *b, uint8_t num, uint8_t alt,
    uint8_t nep, uint8_t cls, uint8_t sub, uint8_t proto)
{
	uint8_t *p = cfg_add(b, 9);

	p[0] = 9;
	p[1] = USB_DT_INTERFACE;
	p[2] = num;
	p[3] = alt;
	p[4] = nep;
	p[5] = cls;
	p[6] = sub;
	p[7] = proto;
	if (alt == 0) {
		dev->intf[num].bInterfaceClass = cls;
		dev->intf[num].bInterfaceSubClass = sub;
		dev->intf[num].bInterfaceProtocol = proto;
		if (num + 1 > dev->nintf)
			dev->nintf = (uint8_t)(num + 1);
	}
	if (alt + 1 > dev->nalt[num])
		dev->nalt[num] = (uint8_t)(alt + 1);
}

static void
cfg_ep(struct sim_dev *dev, struct cfgbuf *b, uint8_t addr, uint8_t xfer,
    uint16_t maxp, uint8_t binterval, enum sim_ep_kind kind, uint8_t intf,
    uint8_t alt)
{
	struct sim_ep *ep = &dev->ep[addr & USB_DIR_IN ? USBIP_DIR_IN :
	    USBIP_DIR_OUT][addr & 0x0f];
	uint8_t *p = cfg_add(b, 7);

	p[0] = 7;
	p[1] = USB_DT_ENDPOINT;
	p[2] = addr;
	p[3] = xfer;
	put_le16(p + 4, maxp);
	p[6] = binterval;
	if (dev->spec.speed >= USBIP_SPEED_SUPER) {
		p = cfg_add(b, 6);
		p[0] = 6;
		p[1] = USB_DT_SS_EP_COMP;
		if (xfer != USB_XFER_BULK)
			put_le16(p + 4, maxp);
	}
	ep->kind = kind;
	ep->addr = addr;
	ep->xfer = xfer;
	ep->maxp = maxp;
	ep->binterval = binterval;
	ep->intf = intf;
	ep->alt = alt;
	TAILQ_INIT(&ep->queue);
}

static void
cfg_hid(struct sim_dev *dev, struct cfgbuf *b, uint8_t num, uint8_t epaddr)
{
	bool hs = dev->spec.speed >= USBIP_SPEED_HIGH;
	uint8_t *p;

	cfg_intf(dev, b, num, 0, 1, 0x03, 0x01, 0x01);
	p = cfg_add(b, 9);
	p[0] = 9;
	p[1] = USB_DT_HID;
	put_le16(p + 2, 0x0111);
	p[4] = 0;		/* country */
	p[5] = 1;		/* one class descriptor */
	p[6] = USB_DT_REPORT;
	put_le16(p + 7, sizeof(hid_report_desc));
	/* 10 ms at full/low speed; 2^(7-1) microframes = 8 ms at high. */
	cfg_ep(dev, b, epaddr, USB_XFER_INT, HID_REPORT_LEN, hs ? 7 : 10,
	    EPK_HID_IN, num, 0);
	dev->hid_intf = num;
}

static uint16_t
bulk_maxp(const struct sim_dev *dev)
{
	if (dev->spec.speed >= USBIP_SPEED_SUPER)
		return 1024;
	return dev->spec.speed == USBIP_SPEED_HIGH ? 512 : 64;
}

static void
cfg_msc(struct sim_dev *dev, struct cfgbuf *b, uint8_t num, uint8_t in,
    uint8_t out)
{
	cfg_intf(dev, b, num, 0, 2, 0x08, 0x06, 0x50);
	cfg_ep(dev, b, in, USB_XFER_BULK, bulk_maxp(dev), 0, EPK_LOOP_IN, num,
	    0);
	cfg_ep(dev, b, out, USB_XFER_BULK, bulk_maxp(dev), 0, EPK_LOOP_OUT,
	    num, 0);
	dev->msc_intf = num;
}

static void
build_config(struct sim_dev *dev)
{
	uint8_t buf[SIM_CFG_MAX], *p;
	struct cfgbuf b = { buf, 0 };
	bool fs = dev->spec.speed <= USBIP_SPEED_FULL;
	uint16_t isomaxp = fs ? 192 : 1024;

	cfg_add(&b, 9);
	switch (dev->spec.type) {
	case SIM_KEYBOARD:
		cfg_hid(dev, &b, 0, 0x81);
		break;
	case SIM_STORAGE:
		cfg_msc(dev, &b, 0, 0x81, 0x02);
		break;
	case SIM_COMPOSITE:
		cfg_hid(dev, &b, 0, 0x81);
		cfg_msc(dev, &b, 1, 0x82, 0x02);
		break;
	case SIM_AUDIO:
		/* Audio control, then one streaming interface whose alt 1
		 * has an ISO OUT and an ISO IN endpoint (1 ms interval). */
		cfg_intf(dev, &b, 0, 0, 0, 0x01, 0x01, 0x00);
		cfg_intf(dev, &b, 1, 0, 0, 0x01, 0x02, 0x00);
		cfg_intf(dev, &b, 1, 1, 2, 0x01, 0x02, 0x00);
		cfg_ep(dev, &b, 0x01, USB_XFER_ISO, isomaxp, fs ? 1 : 4,
		    EPK_ISO_OUT, 1, 1);
		cfg_ep(dev, &b, 0x82, USB_XFER_ISO, isomaxp, fs ? 1 : 4,
		    EPK_ISO_IN, 1, 1);
		break;
	case SIM_SOURCESINK:
		cfg_intf(dev, &b, 0, 0, 2, 0xff, 0x00, 0x00);
		cfg_ep(dev, &b, 0x81, USB_XFER_BULK, bulk_maxp(dev), 0,
		    EPK_SOURCE_IN, 0, 0);
		cfg_ep(dev, &b, 0x01, USB_XFER_BULK, bulk_maxp(dev), 0,
		    EPK_SINK_OUT, 0, 0);
		break;
	}
	p = buf;
	p[0] = 9;
	p[1] = USB_DT_CONFIG;
	put_le16(p + 2, (uint16_t)b.len);
	p[4] = dev->nintf;
	p[5] = 1;		/* bConfigurationValue */
	p[6] = 0;		/* iConfiguration */
	p[7] = 0xa0;		/* bus powered, remote wakeup */
	p[8] = 50;		/* 100 mA */
	dev->cfgdesc = xmalloc(b.len);
	memcpy(dev->cfgdesc, buf, b.len);
	dev->cfglen = b.len;
}

static uint16_t
bcd_usb(const struct sim_dev *dev)
{
	switch (dev->spec.speed) {
	case USBIP_SPEED_LOW:
	case USBIP_SPEED_FULL:
		return 0x0110;
	case USBIP_SPEED_HIGH:
		return 0x0200;
	default:
		return 0x0320;
	}
}

static void
build_device(struct sim_dev *dev)
{
	uint8_t *p = dev->devdesc;

	p[0] = 18;
	p[1] = USB_DT_DEVICE;
	put_le16(p + 2, bcd_usb(dev));
	p[4] = 0;		/* class defined by the interfaces */
	p[5] = 0;
	p[6] = 0;
	switch (dev->spec.speed) {
	case USBIP_SPEED_LOW:
		p[7] = 8;
		break;
	case USBIP_SPEED_SUPER:
		p[7] = 9;	/* 2^9 = 512 */
		break;
	default:
		p[7] = 64;
	}
	put_le16(p + 8, dev->spec.vendor);
	put_le16(p + 10, dev->spec.product);
	put_le16(p + 12, dev->spec.bcd_device);
	p[14] = dev->spec.manufacturer != NULL ? 1 : 0;
	p[15] = dev->spec.product_name != NULL ? 2 : 0;
	p[16] = dev->spec.serial != NULL ? 3 : 0;
	p[17] = dev->spec.nconfigs;
}

/*
 * The disguise: the descriptors of a device of the disguise's type and
 * bcdDevice (the same vendor, product, speed and strings otherwise),
 * built as the real ones are, on a scratch device.
 */
static void
build_face(struct sim_dev *dev)
{
	struct sim_dev *t;
	int dir, i;

	if (!(dev->spec.set & SPEC_DISGUISE))
		return;
	t = xcalloc(1, sizeof(*t));
	t->spec = dev->spec;
	t->spec.type = dev->spec.disguise_type;
	t->spec.bcd_device = dev->spec.disguise_bcd;
	t->hid_intf = t->msc_intf = -1;
	for (dir = 0; dir < 2; dir++)
		for (i = 0; i < 16; i++)
			TAILQ_INIT(&t->ep[dir][i].queue);
	build_device(t);
	build_config(t);
	memcpy(dev->face_devdesc, t->devdesc, sizeof(dev->face_devdesc));
	dev->face_cfgdesc = t->cfgdesc;
	dev->face_cfglen = t->cfglen;
	free(t);
}

/* Does this descriptor read see the disguise? */
static bool
dev_disguised(struct sim_dev *dev)
{
	if (!(dev->spec.set & SPEC_DISGUISE))
		return false;
	dev->desc_reads++;
	return dev->disguised || (dev->spec.disguise_after > 0 &&
	    dev->desc_reads > dev->spec.disguise_after);
}

void
dev_disguise(struct sim_dev *dev)
{
	dev->disguised = true;
}

/* UTF-8 (already validated by the config) to a string descriptor. */
static size_t
string_desc(const char *s, uint8_t *out, size_t outsz)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = 2;
	uint32_t cp;
	int extra;

	while (*p != '\0' && n + 4 <= outsz && n + 4 <= 255) {
		if (*p < 0x80) {
			cp = *p++;
			extra = 0;
		} else if ((*p & 0xe0) == 0xc0) {
			cp = *p++ & 0x1f;
			extra = 1;
		} else if ((*p & 0xf0) == 0xe0) {
			cp = *p++ & 0x0f;
			extra = 2;
		} else {
			cp = *p++ & 0x07;
			extra = 3;
		}
		for (; extra > 0 && (*p & 0xc0) == 0x80; extra--)
			cp = cp << 6 | (*p++ & 0x3f);
		if (cp >= 0x10000) {
			cp -= 0x10000;
			put_le16(out + n, (uint16_t)(0xd800 | cp >> 10));
			put_le16(out + n + 2, (uint16_t)(0xdc00 | (cp & 0x3ff)));
			n += 4;
		} else {
			put_le16(out + n, (uint16_t)cp);
			n += 2;
		}
	}
	out[0] = (uint8_t)n;
	out[1] = USB_DT_STRING;
	return n;
}

/* ---- life cycle ------------------------------------------------------ */

struct sim_dev *
dev_new(struct sim_exp *exp, const struct sim_spec *spec, bool from_config,
    char *err, size_t errsz)
{
	struct sim_dev *dev, *d;
	unsigned long busnum = 1;
	const char *p;
	char *end;
	uint32_t devnum;
	bool used;

	if (dev_find(exp, spec->busid) != NULL) {
		snprintf(err, errsz, "device %s already exists", spec->busid);
		return NULL;
	}
	if (exp->ndevs >= SIM_MAX_DEVICES) {
		snprintf(err, errsz, "already %d devices", SIM_MAX_DEVICES);
		return NULL;
	}
	/* busid "B-P[.P...]" is on bus B, as sysfs names them. */
	p = spec->busid;
	if (*p >= '1' && *p <= '9') {
		busnum = strtoul(p, &end, 10);
		if (*end != '-' || busnum > 0xffff)
			busnum = 1;
	}
	/* devnum: as given, else the lowest free address >= 2. */
	devnum = spec->devnum;
	for (devnum = spec->devnum != 0 ? spec->devnum : 2; devnum <= 127;
	    devnum++) {
		used = false;
		TAILQ_FOREACH(d, devq(exp), entry)
			if (d->busnum == busnum && d->devnum == devnum)
				used = true;
		if (!used)
			break;
		if (spec->devnum != 0) {
			snprintf(err, errsz, "devnum %u already used on bus "
			    "%lu", spec->devnum, busnum);
			return NULL;
		}
	}
	if (devnum > 127) {
		snprintf(err, errsz, "no free device address on bus %lu",
		    busnum);
		return NULL;
	}

	dev = xcalloc(1, sizeof(*dev));
	dev->exp = exp;
	spec_copy(&dev->spec, spec);
	dev->from_config = from_config;
	dev->busnum = (uint32_t)busnum;
	dev->devnum = devnum;
	snprintf(dev->path, sizeof(dev->path),
	    "/sys/devices/platform/usbgw-sim/usb%u/%s", dev->busnum,
	    spec->busid);
	dev->hid_intf = -1;
	dev->msc_intf = -1;
	for (int dir = 0; dir < 2; dir++)
		for (int i = 0; i < 16; i++)
			TAILQ_INIT(&dev->ep[dir][i].queue);
	build_device(dev);
	build_config(dev);
	build_face(dev);
	if ((dev->fifo = evbuffer_new()) == NULL ||
	    (dev->isofifo = evbuffer_new()) == NULL ||
	    (dev->hid_timer = evtimer_new(sim.base, hid_timer_cb, dev)) == NULL)
		fatalx("out of memory");
	dev_release(dev);
	return dev;
}

void
dev_free(struct sim_dev *dev)
{
	if (dev == NULL)
		return;
	if (dev->hid_timer != NULL)
		event_free(dev->hid_timer);
	if (dev->fifo != NULL)
		evbuffer_free(dev->fifo);
	if (dev->isofifo != NULL)
		evbuffer_free(dev->isofifo);
	free(dev->cfgdesc);
	free(dev->face_cfgdesc);
	spec_clear(&dev->spec);
	free(dev);
}

struct sim_dev *
dev_find(struct sim_exp *exp, const char *busid)
{
	struct sim_dev *dev;

	TAILQ_FOREACH(dev, devq(exp), entry)
		if (strcmp(dev->spec.busid, busid) == 0)
			return dev;
	return NULL;
}

void
dev_add(struct sim_dev *dev)
{
	TAILQ_INSERT_TAIL(devq(dev->exp), dev, entry);
	dev->exp->ndevs++;
	/* A generated exporter's devices (thousands): not one line each. */
	if (dev->exp->name[0] != '\0')
		return;
	log_info("plugged %s: %s %04x:%04x (bus %u dev %u, %s speed)",
	    dev->spec.busid, sim_type_name(dev->spec.type), dev->spec.vendor,
	    dev->spec.product, dev->busnum, dev->devnum,
	    usbip_speed_name(dev->spec.speed));
}

/*
 * Unplug: gone from the exporter at once; an import of it ends (its
 * connection flushes what it has queued first, for at most 1 s) and
 * the device is freed at the import's release.
 */
void
dev_remove(struct sim_dev *dev)
{
	TAILQ_REMOVE(devq(dev->exp), dev, entry);
	dev->exp->ndevs--;
	if (dev->exp->name[0] == '\0')
		log_info("unplugged %s", dev->spec.busid);
	else
		log_debug("unplugged %s/%s", dev->exp->name, dev->spec.busid);
	dev->removed = true;
	if (dev->owner != NULL)
		expsrv_conn_close(dev->owner, "device unplugged");
	else
		dev_free(dev);
}

void
dev_record(const struct sim_dev *dev, struct usbip_dev *r)
{
	memset(r, 0, sizeof(*r));
	usbgw_strlcpy(r->path, dev->path, sizeof(r->path));
	usbgw_strlcpy(r->busid, dev->spec.busid, sizeof(r->busid));
	r->busnum = dev->busnum;
	r->devnum = dev->devnum;
	r->speed = dev->spec.speed;
	r->idVendor = dev->spec.vendor;
	r->idProduct = dev->spec.product;
	r->bcdDevice = dev->spec.bcd_device;
	r->bDeviceClass = dev->devdesc[4];
	r->bDeviceSubClass = dev->devdesc[5];
	r->bDeviceProtocol = dev->devdesc[6];
	r->bConfigurationValue = dev->config;
	r->bNumConfigurations = dev->spec.nconfigs;
	r->bNumInterfaces = dev->nintf;
}

/*
 * The entry of the device list: the record and interface triplets, or
 * what the spec's list-id and list-interfaces make it claim instead.
 * Returns the number of interfaces in *intf.
 */
uint8_t
dev_listed(const struct sim_dev *dev, struct usbip_dev *r,
    const struct usbip_intf **intf)
{
	dev_record(dev, r);
	*intf = dev->intf;
	if (dev->spec.set & SPEC_LIST_ID) {
		r->idVendor = dev->spec.list_vendor;
		r->idProduct = dev->spec.list_product;
	}
	if (dev->spec.set & SPEC_LIST_INTF) {
		r->bNumInterfaces = dev->spec.list_nintf;
		*intf = dev->spec.list_intf;
	}
	return r->bNumInterfaces;
}

/*
 * The device as the exporter's host left it: configured (usbip-host
 * exports configured devices), alternate settings 0, no halt, buffers
 * empty, key script at its start.
 */
static void
dev_reset_state(struct sim_dev *dev)
{
	int dir, i;

	dev->config = 1;
	memset(dev->alt, 0, sizeof(dev->alt));
	for (dir = 0; dir < 2; dir++)
		for (i = 0; i < 16; i++)
			dev->ep[dir][i].halted = false;
	evbuffer_drain(dev->fifo, evbuffer_get_length(dev->fifo));
	evbuffer_drain(dev->isofifo, evbuffer_get_length(dev->isofifo));
	dev->key_report = 0;
	dev->next_report_us = 0;
	evtimer_del(dev->hid_timer);
	dev->hid_idle = 0;
	dev->hid_protocol = 1;
	dev->hid_leds = 0;
	dev->frame = 0;
	dev->desc_reads = 0;
	dev->disguised = false;
	dev->inject = INJ_NONE;
}

void
dev_attach(struct sim_dev *dev, struct expsrv_conn *conn)
{
	dev_reset_state(dev);
	dev->owner = conn;
	dev->nimports++;
}

/* The connection has cancelled its URBs already: the queues are empty. */
void
dev_release(struct sim_dev *dev)
{
	dev->owner = NULL;
	dev_reset_state(dev);
}

struct sim_ep *
dev_ep_any(struct sim_dev *dev, uint32_t dir, uint32_t num)
{
	struct sim_ep *ep;

	if (dir > USBIP_DIR_IN || num == 0 || num > USBIP_MAX_EP)
		return NULL;
	ep = &dev->ep[dir][num];
	return ep->kind == EPK_NONE ? NULL : ep;
}

/* The endpoint if it exists in the current configuration and setting. */
static struct sim_ep *
dev_ep_active(struct sim_dev *dev, uint32_t dir, uint32_t num)
{
	struct sim_ep *ep = dev_ep_any(dev, dir, num);

	if (ep == NULL || dev->config == 0 || dev->alt[ep->intf] != ep->alt)
		return NULL;
	return ep;
}

static struct sim_ep *
dev_ep_byaddr(struct sim_dev *dev, uint16_t addr)
{
	return dev_ep_active(dev, addr & USB_DIR_IN ? USBIP_DIR_IN :
	    USBIP_DIR_OUT, addr & 0x0f);
}

/*
 * Complete every URB queued on ep with status, as the host controller
 * does when an endpoint is disabled (set configuration/interface).
 */
static void
ep_enqueue(struct sim_ep *ep, struct expsrv_urb *u)
{
	struct sim_qurb *q = xcalloc(1, sizeof(*q));

	q->ep = ep;
	q->u = u;
	u->be = q;
	TAILQ_INSERT_TAIL(&ep->queue, q, entry);
}

void
dev_dequeue(struct expsrv_urb *u)
{
	struct sim_qurb *q = u->be;

	if (q == NULL)
		return;
	TAILQ_REMOVE(&q->ep->queue, q, entry);
	u->be = NULL;
	free(q);
}

/* The first URB waiting on ep, taken off the queue; NULL if none. */
static struct expsrv_urb *
ep_first(struct sim_ep *ep)
{
	struct sim_qurb *q = TAILQ_FIRST(&ep->queue);

	return q != NULL ? q->u : NULL;
}

static void
ep_flush(struct sim_ep *ep, int32_t status)
{
	struct expsrv_urb *u;

	while ((u = ep_first(ep)) != NULL) {
		dev_dequeue(u);
		expsrv_urb_done(u, status, 0);
	}
}

static void
dev_flush_intf(struct sim_dev *dev, int intf)
{
	int dir, i;

	for (dir = 0; dir < 2; dir++)
		for (i = 1; i < 16; i++)
			if (dev->ep[dir][i].kind != EPK_NONE &&
			    (intf == -1 || dev->ep[dir][i].intf == intf)) {
				ep_flush(&dev->ep[dir][i], -ESHUTDOWN);
				dev->ep[dir][i].halted = false;
			}
}

/* ---- control requests ------------------------------------------------ */

/*
 * Answer a GET_DESCRIPTOR.  Returns the descriptor's length (the caller
 * truncates to wLength), or -1 to stall.
 */
static int
get_descriptor(struct sim_dev *dev, uint8_t rt, uint16_t value,
    uint16_t index, uint8_t *out, size_t outsz)
{
	uint8_t type = value >> 8, idx = value & 0xff;
	const char *s;
	uint8_t *p = out;
	bool face;

	if (rt == (USB_DIR_IN | USB_RECIP_INTERFACE)) {
		if (dev->hid_intf < 0 || index != dev->hid_intf)
			return -1;
		if (type == USB_DT_REPORT) {
			memcpy(out, hid_report_desc, sizeof(hid_report_desc));
			return (int)sizeof(hid_report_desc);
		}
		if (type == USB_DT_HID) {
			/* The HID descriptor follows the interface's. */
			const uint8_t *c = dev->cfgdesc;
			size_t off = 0;

			while (off + 2 <= dev->cfglen && c[off] >= 2) {
				if (c[off + 1] == USB_DT_HID) {
					memcpy(out, c + off, c[off]);
					return c[off];
				}
				off += c[off];
			}
		}
		return -1;
	}
	if (rt != USB_DIR_IN)
		return -1;
	face = dev_disguised(dev);
	switch (type) {
	case USB_DT_DEVICE:
		memcpy(out, face ? dev->face_devdesc : dev->devdesc,
		    sizeof(dev->devdesc));
		return (int)sizeof(dev->devdesc);
	case USB_DT_CONFIG:
	case USB_DT_OTHER_SPEED_CONFIG: {
		const uint8_t *c = face ? dev->face_cfgdesc : dev->cfgdesc;
		size_t n = face ? dev->face_cfglen : dev->cfglen;

		if (type == USB_DT_OTHER_SPEED_CONFIG &&
		    !(face && dev->spec.disguise_other))
			return -1;
		/* configurations 2.. (`configs`) are copies of the first */
		if (idx >= dev->spec.nconfigs || n > outsz)
			return -1;
		memcpy(out, c, n);
		out[1] = type;
		out[5] = (uint8_t)(idx + 1);
		return (int)n;
	}
	case USB_DT_STRING:
		if (idx == 3 && face && dev->spec.disguise_serial != NULL)
			return (int)string_desc(dev->spec.disguise_serial, out,
			    outsz);
		if (idx == 0) {
			p[0] = 4;
			p[1] = USB_DT_STRING;
			put_le16(p + 2, 0x0409);	/* English (US) */
			return 4;
		}
		/* Like most devices, any language ID gets the one table. */
		s = idx == 1 ? dev->spec.manufacturer :
		    idx == 2 ? dev->spec.product_name :
		    idx == 3 ? dev->spec.serial : NULL;
		if (s == NULL)
			return -1;
		return (int)string_desc(s, out, outsz);
	case USB_DT_DEVICE_QUALIFIER:
		/* Only a high-speed device has one (USB 2.0 9.6.2). */
		if (dev->spec.speed != USBIP_SPEED_HIGH)
			return -1;
		p[0] = 10;
		p[1] = USB_DT_DEVICE_QUALIFIER;
		put_le16(p + 2, 0x0200);
		p[4] = dev->devdesc[4];
		p[5] = dev->devdesc[5];
		p[6] = dev->devdesc[6];
		p[7] = 64;
		p[8] = 1;
		p[9] = 0;
		return 10;
	case USB_DT_BOS:
		if (dev->spec.speed < USBIP_SPEED_SUPER &&
		    !(face && dev->spec.disguise_bos))
			return -1;
		memset(p, 0, 22);
		p[0] = 5;
		p[1] = USB_DT_BOS;
		put_le16(p + 2, 22);
		p[4] = 2;
		p[5] = 7;		/* USB 2.0 extension */
		p[6] = 0x10;
		p[7] = 0x02;
		p[8] = 0x02;		/* LPM */
		p[12] = 10;		/* SuperSpeed USB device capability */
		p[13] = 0x10;
		p[14] = 0x03;
		put_le16(p + 16, 0x000e);	/* full, high, super */
		p[18] = 1;
		p[19] = 0x0a;
		put_le16(p + 20, 0x07ff);
		if (face && dev->spec.disguise_bos)
			p[8] = 0x06;	/* LPM and BESL: another device */
		return 22;
	default:
		return -1;
	}
}

static int
ctrl_standard(struct sim_dev *dev, const uint8_t *setup, uint8_t *out,
    size_t outsz)
{
	uint8_t rt = setup[0], req = setup[1];
	uint16_t value = get_le16(setup + 2), index = get_le16(setup + 4);
	uint8_t recip = rt & 0x1f;
	struct sim_ep *ep;

	switch (req) {
	case USB_REQ_GET_STATUS:
		if (!(rt & USB_DIR_IN))
			return -1;
		out[0] = out[1] = 0;
		if (recip == USB_RECIP_DEVICE)
			return 2;
		if (recip == USB_RECIP_INTERFACE)
			return index < dev->nintf ? 2 : -1;
		if (recip == USB_RECIP_ENDPOINT) {
			if ((index & 0x0f) == 0)
				return 2;
			if ((ep = dev_ep_byaddr(dev, index)) == NULL)
				return -1;
			out[0] = ep->halted ? 1 : 0;
			return 2;
		}
		return -1;
	case USB_REQ_CLEAR_FEATURE:
	case USB_REQ_SET_FEATURE:
		if (rt == USB_RECIP_DEVICE && value == USB_FEAT_REMOTE_WAKEUP)
			return 0;
		if (rt != USB_RECIP_ENDPOINT || value != USB_FEAT_ENDPOINT_HALT)
			return -1;
		if ((index & 0x0f) == 0)
			return 0;
		if ((ep = dev_ep_byaddr(dev, index)) == NULL)
			return -1;
		ep->halted = req == USB_REQ_SET_FEATURE;
		return 0;
	case USB_REQ_SET_ADDRESS:
		/* vhci handles it locally; harmless if it comes anyway. */
		return rt == USB_RECIP_DEVICE ? 0 : -1;
	case USB_REQ_GET_DESCRIPTOR:
		return get_descriptor(dev, rt, value, index, out, outsz);
	case USB_REQ_GET_CONFIGURATION:
		if (rt != (USB_DIR_IN | USB_RECIP_DEVICE))
			return -1;
		out[0] = dev->config;
		return 1;
	case USB_REQ_SET_CONFIGURATION:
		if (rt != USB_RECIP_DEVICE || value > dev->spec.nconfigs)
			return -1;
		/* As usb_set_configuration(): every endpoint is reset. */
		dev_flush_intf(dev, -1);
		dev->config = (uint8_t)value;
		memset(dev->alt, 0, sizeof(dev->alt));
		return 0;
	case USB_REQ_GET_INTERFACE:
		if (rt != (USB_DIR_IN | USB_RECIP_INTERFACE) ||
		    dev->config == 0 || index >= dev->nintf)
			return -1;
		out[0] = dev->alt[index];
		return 1;
	case USB_REQ_SET_INTERFACE:
		if (rt != USB_RECIP_INTERFACE || dev->config == 0 ||
		    index >= dev->nintf || value >= dev->nalt[index])
			return -1;
		dev_flush_intf(dev, index);
		dev->alt[index] = (uint8_t)value;
		return 0;
	default:
		return -1;
	}
}

static int
ctrl_class(struct sim_dev *dev, const uint8_t *setup, const uint8_t *odata,
    uint32_t olen, uint8_t *out)
{
	uint8_t rt = setup[0], req = setup[1];
	uint16_t value = get_le16(setup + 2), index = get_le16(setup + 4);
	bool in = rt & USB_DIR_IN;

	/* SET_FEATURE(PORT_RESET): the stub resets the device itself. */
	if (rt == (USB_TYPE_CLASS | USB_RECIP_OTHER) &&
	    req == USB_REQ_SET_FEATURE && value == USB_PORT_FEAT_RESET) {
		dev_flush_intf(dev, -1);
		return 0;
	}
	if ((rt & 0x1f) != USB_RECIP_INTERFACE)
		return -1;
	if (dev->hid_intf >= 0 && index == dev->hid_intf) {
		switch (req) {
		case HID_SET_IDLE:
			if (in)
				return -1;
			dev->hid_idle = value >> 8;
			return 0;
		case HID_GET_IDLE:
			if (!in)
				return -1;
			out[0] = dev->hid_idle;
			return 1;
		case HID_SET_PROTOCOL:
			if (in || value > 1)
				return -1;
			dev->hid_protocol = (uint8_t)value;
			return 0;
		case HID_GET_PROTOCOL:
			if (!in)
				return -1;
			out[0] = dev->hid_protocol;
			return 1;
		case HID_GET_REPORT:
			if (!in || value >> 8 != 1)	/* input report */
				return -1;
			memset(out, 0, HID_REPORT_LEN);
			return HID_REPORT_LEN;
		case HID_SET_REPORT:
			if (in || value >> 8 != 2)	/* output report */
				return -1;
			if (olen >= 1)
				dev->hid_leds = odata[0];
			return 0;
		}
		return -1;
	}
	if (dev->msc_intf >= 0 && index == dev->msc_intf) {
		if (req == MSC_RESET && !in && value == 0) {
			evbuffer_drain(dev->fifo, evbuffer_get_length(dev->fifo));
			return 0;
		}
		if (req == MSC_GET_MAX_LUN && in) {
			out[0] = 0;
			return 1;
		}
	}
	return -1;
}

static void
dev_control(struct sim_dev *dev, struct expsrv_urb *u, const uint8_t *setup)
{
	uint8_t out[SIM_CTRL_MAX], odata[64];
	uint16_t wlength = get_le16(setup + 6);
	bool in = setup[0] & USB_DIR_IN;
	uint32_t olen = 0;
	int r;

	/* The data stage's direction is the setup packet's. */
	if ((in && u->dir != USBIP_DIR_IN) ||
	    (!in && u->dir != USBIP_DIR_OUT)) {
		expsrv_urb_done(u, -EPIPE, 0);
		return;
	}
	if (!in && u->data != NULL) {
		olen = (uint32_t)evbuffer_get_length(u->data);
		evbuffer_copyout(u->data, odata, sizeof(odata));
	}
	switch (setup[0] & 0x60) {
	case USB_TYPE_STANDARD:
		r = ctrl_standard(dev, setup, out, sizeof(out));
		break;
	case USB_TYPE_CLASS:
		r = ctrl_class(dev, setup, odata, olen, out);
		break;
	default:
		r = -1;
	}
	if (r < 0) {
		expsrv_urb_done(u, -EPIPE, 0);
		return;
	}
	if (!in) {
		expsrv_urb_done(u, 0, olen < wlength ? olen : wlength);
		return;
	}
	if ((uint32_t)r > wlength)
		r = wlength;
	if ((uint32_t)r > u->length)
		r = (int)u->length;
	expsrv_urb_done_buf(u, (u->flags & URB_SHORT_NOT_OK) && (uint32_t)r <
	    u->length ? -EREMOTEIO : 0, out, (uint32_t)r);
}

/* ---- endpoints ------------------------------------------------------- */

static void
hid_timer_cb(int fd, short events, void *arg)
{
	struct sim_dev *dev = arg;

	hid_service(dev);
}

static struct sim_ep *
hid_ep(struct sim_dev *dev)
{
	int i;

	for (i = 1; i < 16; i++)
		if (dev->ep[USBIP_DIR_IN][i].kind == EPK_HID_IN)
			return &dev->ep[USBIP_DIR_IN][i];
	return NULL;
}

/*
 * Deliver due key reports to queued interrupt IN URBs, one report per
 * interval; a URB with no report due stays queued (the device NAKs).
 */
static void
hid_service(struct sim_dev *dev)
{
	struct sim_ep *ep = hid_ep(dev);
	struct expsrv_urb *u;
	uint8_t r[HID_REPORT_LEN];
	size_t nreports;
	uint64_t now;
	struct timeval tv;

	nreports = dev->spec.keys != NULL ? 2 * strlen(dev->spec.keys) : 0;
	while (ep != NULL && (u = ep_first(ep)) != NULL) {
		if (nreports == 0)
			return;
		if (dev->key_report >= nreports) {
			if (!dev->spec.repeat)
				return;
			dev->key_report = 0;
		}
		now = now_usec();
		if (now < dev->next_report_us) {
			if (!evtimer_pending(dev->hid_timer, NULL)) {
				tv.tv_sec = (time_t)((dev->next_report_us -
				    now) / 1000000);
				tv.tv_usec = (suseconds_t)((dev->next_report_us -
				    now) % 1000000);
				evtimer_add(dev->hid_timer, &tv);
			}
			return;
		}
		hid_script_report(dev, dev->key_report, r);
		dev->key_report++;
		dev->next_report_us = now + (uint64_t)dev->spec.interval_ms *
		    1000;
		dev_dequeue(u);
		if (u->length < HID_REPORT_LEN)
			expsrv_urb_done(u, -EOVERFLOW, 0);
		else
			expsrv_urb_done_buf(u, 0, r, HID_REPORT_LEN);
	}
}

static struct sim_ep *
ep_of_kind(struct sim_dev *dev, int dir, enum sim_ep_kind kind)
{
	int i;

	for (i = 1; i < 16; i++)
		if (dev->ep[dir][i].kind == kind)
			return &dev->ep[dir][i];
	return NULL;
}

/*
 * Mass-storage loopback: OUT data enters the FIFO while it holds less
 * than fifo_size bytes (else the OUT URB waits, as a device NAKs); an
 * IN URB takes what the FIFO holds, up to its length, as soon as it
 * holds anything (a short packet ends it), else it waits.
 */
static void
loop_service(struct sim_dev *dev)
{
	struct sim_ep *in = ep_of_kind(dev, USBIP_DIR_IN, EPK_LOOP_IN);
	struct sim_ep *out = ep_of_kind(dev, USBIP_DIR_OUT, EPK_LOOP_OUT);
	struct expsrv_urb *u;
	size_t have;
	uint32_t n;
	bool progress;

	do {
		progress = false;
		while ((u = ep_first(out)) != NULL &&
		    evbuffer_get_length(dev->fifo) < dev->spec.fifo_size) {
			n = u->data != NULL ?
			    (uint32_t)evbuffer_get_length(u->data) : 0;
			if (n > 0)
				evbuffer_add_buffer(dev->fifo, u->data);
			dev_dequeue(u);
			expsrv_urb_done(u, 0, n);
			progress = true;
		}
		while ((u = ep_first(in)) != NULL &&
		    (have = evbuffer_get_length(dev->fifo)) > 0) {
			n = have < u->length ? (uint32_t)have : u->length;
			dev_dequeue(u);
			expsrv_urb_done_evbuf(u, (u->flags & URB_SHORT_NOT_OK) &&
			    n < u->length ? -EREMOTEIO : 0, dev->fifo, n);
			progress = true;
		}
	} while (progress);
}

/* ISO OUT: every packet is accepted; its bytes enter the ISO FIFO while
 * there is room (the rest is dropped, as a full audio ring drops). */
static void
iso_out(struct sim_dev *dev, struct expsrv_urb *u)
{
	const uint8_t *data = NULL;
	uint32_t i, total = 0, room, n, frame;
	size_t len;

	len = u->data != NULL ? evbuffer_get_length(u->data) : 0;
	if (len > 0)
		data = evbuffer_pullup(u->data, -1);
	for (i = 0; i < u->npackets; i++) {
		struct usbip_iso_desc *d = &u->iso[i];

		/* Checked by the codec: offset + length <= length. */
		room = SIM_ISO_FIFO - (uint32_t)evbuffer_get_length(dev->isofifo);
		n = d->length < room ? d->length : room;
		if (n > 0 && data != NULL)
			evbuffer_add(dev->isofifo, data + d->offset, n);
		d->actual_length = d->length;
		d->status = 0;
		total += d->length;
	}
	frame = dev->frame;
	dev->frame += u->npackets;
	expsrv_urb_done_iso(u, NULL, total, (int32_t)frame);
}

/* ISO IN: each packet gets what the ISO FIFO holds, up to its length. */
static void
iso_in(struct sim_dev *dev, struct expsrv_urb *u)
{
	struct evbuffer *packed;
	uint32_t i, total = 0, n, frame;
	size_t have;

	if ((packed = evbuffer_new()) == NULL)
		fatalx("out of memory");
	for (i = 0; i < u->npackets; i++) {
		struct usbip_iso_desc *d = &u->iso[i];

		have = evbuffer_get_length(dev->isofifo);
		n = have < d->length ? (uint32_t)have : d->length;
		if (n > 0)
			evbuffer_remove_buffer(dev->isofifo, packed, n);
		d->actual_length = n;
		d->status = 0;
		total += n;
	}
	frame = dev->frame;
	dev->frame += u->npackets;
	expsrv_urb_done_iso(u, packed, total, (int32_t)frame);
	evbuffer_free(packed);
}

void
dev_submit(struct sim_dev *dev, struct expsrv_urb *u)
{
	struct sim_ep *ep;

	dev->nurbs++;
	if (u->data != NULL)
		dev->bytes_out += evbuffer_get_length(u->data);
	if (u->ep == 0) {
		dev_control(dev, u, u->setup);
		return;
	}
	ep = dev_ep_active(dev, u->dir, u->ep);
	if (ep == NULL || ep->halted) {
		expsrv_urb_done(u, -EPIPE, 0);
		return;
	}
	switch (ep->kind) {
	case EPK_HID_IN:
		ep_enqueue(ep, u);
		hid_service(dev);
		break;
	case EPK_LOOP_IN:
	case EPK_LOOP_OUT:
		if (u->length == 0) {
			expsrv_urb_done(u, 0, 0);
			break;
		}
		ep_enqueue(ep, u);
		loop_service(dev);
		break;
	case EPK_SOURCE_IN:
		urb_done_pattern(u, dev->spec.pattern, ep->maxp, u->length);
		break;
	case EPK_SINK_OUT:
		expsrv_urb_done(u, 0, u->length);
		break;
	case EPK_ISO_IN:
		iso_in(dev, u);
		break;
	case EPK_ISO_OUT:
		iso_out(dev, u);
		break;
	case EPK_NONE:
		expsrv_urb_done(u, -EPIPE, 0);
		break;
	}
}
