/*
 * The URB relay: the hot path between a vhci host (downstream) and the
 * gateway's claim at the exporter (upstream).
 *
 * Every PDU is decoded and checked by the codec before it is forwarded:
 * requests must name the imported device (devid) and an endpoint the
 * device has, replies must answer a request in flight.  Payload bytes are
 * never inspected or copied by us: evbuffer_remove_buffer() moves whole
 * chains from one connection's input to the other's output, and only the
 * 48-byte header is pulled up and, where the devids differ, rewritten in
 * place.
 *
 * In-flight URBs are remembered by seqnum (vhci's counter; the gateway
 * does not renumber): direction, length and ISO packet count are what a
 * RET_SUBMIT needs to be parsed, since a reply carries none of them.  The
 * unlink race (PROTOCOL-NOTES.md) is handled by remembering each
 * CMD_UNLINK's target: RET_UNLINK(-ECONNRESET) retires the target, and
 * RET_UNLINK(0) means its RET_SUBMIT came first and already retired it.
 *
 * Backpressure: when one side's output passes GW_RELAY_HIWAT, reading
 * from the other side stops until the output drains to half; the
 * number of URBs in flight is capped the same way.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "desc.h"
#include "gw.h"
#include "log.h"
#include "util.h"

#define IF_SUBMIT	1
#define IF_UNLINK	2

#define RELAY_STALL_SEC	30	/* partial PDU or unread output this long */

static void	relay_down_read(struct bufferevent *, void *);
static void	relay_up_read(struct bufferevent *, void *);
static void	relay_down_write(struct bufferevent *, void *);
static void	relay_up_write(struct bufferevent *, void *);
static void	relay_down_event(struct bufferevent *, short, void *);
static void	relay_up_event(struct bufferevent *, short, void *);

/* ---- in-flight table: open addressing on seqnum ---------------------- */

static uint32_t
if_hash(uint32_t s)
{
	s ^= s >> 16;
	s *= 0x7feb352dU;
	s ^= s >> 15;
	return s;
}

void
inflight_init(struct inflight_tab *t, uint32_t cap)
{
	uint32_t c = 16;

	while (c < cap * 2)
		c <<= 1;
	t->slot = xcalloc(c, sizeof(*t->slot));
	t->cap = c;
	t->count = t->tombs = 0;
}

void
inflight_free(struct inflight_tab *t)
{
	free(t->slot);
	t->slot = NULL;
	t->cap = t->count = t->tombs = 0;
}

struct inflight *
inflight_get(struct inflight_tab *t, uint32_t seqnum)
{
	uint32_t i, m = t->cap - 1;

	for (i = if_hash(seqnum) & m;; i = (i + 1) & m) {
		struct inflight *f = &t->slot[i];

		if (f->used == 0)
			return NULL;
		if (f->used == 1 && f->seqnum == seqnum)
			return f;
	}
}

static void
inflight_rehash(struct inflight_tab *t)
{
	struct inflight *old = t->slot;
	uint32_t i, cap = t->cap;

	t->slot = xcalloc(cap, sizeof(*t->slot));
	t->count = t->tombs = 0;
	for (i = 0; i < cap; i++)
		if (old[i].used == 1)
			*inflight_put(t, old[i].seqnum) = old[i];
	free(old);
}

/* Returns a zeroed, used slot for seqnum (which must not be present). */
struct inflight *
inflight_put(struct inflight_tab *t, uint32_t seqnum)
{
	uint32_t i, m;

	if ((t->count + t->tombs + 1) * 4 > t->cap * 3)
		inflight_rehash(t);
	m = t->cap - 1;
	for (i = if_hash(seqnum) & m;; i = (i + 1) & m) {
		struct inflight *f = &t->slot[i];

		if (f->used != 1) {
			if (f->used == 2)
				t->tombs--;
			memset(f, 0, sizeof(*f));
			f->used = 1;
			f->seqnum = seqnum;
			t->count++;
			return f;
		}
	}
}

void
inflight_del(struct inflight_tab *t, struct inflight *f)
{
	f->used = 2;
	t->count--;
	t->tombs++;
	if (t->count == 0) {
		memset(t->slot, 0, (size_t)t->cap * sizeof(*t->slot));
		t->tombs = 0;
	}
}

/* ---- endpoint table -------------------------------------------------- */

/*
 * Load the endpoints of configuration `value`, interface alternate
 * settings as given (alt[i] for interface number i; all 0 after
 * SET_CONFIGURATION).  Unknown value: no endpoint but ep0.
 */
static void
relay_load_eps(struct device *dev, uint8_t value, const uint8_t *alts)
{
	struct desc_config c;
	const char *why;
	int i, k, j;

	memset(dev->ep_in, 0, sizeof(dev->ep_in));
	memset(dev->ep_out, 0, sizeof(dev->ep_out));
	dev->cur_config = value;
	for (i = 0; i < GW_MAX_CONFIGS; i++) {
		if (dev->ident.config[i] == NULL)
			continue;
		if (desc_parse_config(dev->ident.config[i],
		    dev->ident.config_len[i], &c, &why) == -1 ||
		    c.value != value)
			continue;
		for (k = 0; k < c.nalt; k++) {
			struct desc_alt *a = &c.alt[k];
			uint8_t want = a->number < DESC_MAX_INTF && alts ?
			    alts[a->number] : 0;

			if (a->alt != want)
				continue;
			for (j = 0; j < a->nep; j++) {
				struct desc_ep *e = &a->ep[j];
				struct gw_ep *g = (e->address & 0x80) ?
				    &dev->ep_in[e->address & 0x0f] :
				    &dev->ep_out[e->address & 0x0f];

				g->present = 1;
				g->type = e->type;
				g->maxp = e->maxp;
			}
		}
		break;
	}
}

void
device_load_endpoints(struct device *dev, uint8_t value)
{
	memset(dev->alt, 0, sizeof(dev->alt));
	relay_load_eps(dev, value, dev->alt);
}

/* A successful control request that changes the endpoint set. */
static void
relay_control_done(struct device *dev, const struct inflight *f)
{
	const uint8_t *s = f->setup;
	uint16_t wValue = (uint16_t)(s[2] | s[3] << 8);
	uint16_t wIndex = (uint16_t)(s[4] | s[5] << 8);

	if (s[0] == 0x00 && s[1] == USB_REQ_SET_CONFIGURATION) {
		log_debug("%s: SET_CONFIGURATION %u", dev->busid, wValue & 0xff);
		device_load_endpoints(dev, (uint8_t)wValue);
		device_config_changed(dev);
	} else if (s[0] == 0x01 && s[1] == USB_REQ_SET_INTERFACE &&
	    wIndex < DESC_MAX_INTF) {
		dev->alt[wIndex] = (uint8_t)wValue;
		relay_load_eps(dev, dev->cur_config, dev->alt);
	}
}

/* ---- the relay ------------------------------------------------------- */

static void
relay_malformed(struct dsession *ds, const char *side, const char *why)
{
	char msg[256];

	snprintf(msg, sizeof(msg), "malformed PDU from %s: %s", side, why);
	device_audit_malformed(ds->dev, ds, msg);
	dsession_close(ds, msg);
}

/* Arm or disarm the stall timer on a side holding a partial PDU. */
static void
relay_stall_timer(struct bufferevent *bev, bool partial)
{
	struct timeval tv = { RELAY_STALL_SEC, 0 };

	bufferevent_set_timeouts(bev, partial ? &tv : NULL, &tv);
}

void
relay_start(struct dsession *ds, struct device *dev)
{
	struct upstream *up = dev->up;

	ds->state = DS_RELAY;
	inflight_init(&ds->inflight, GW_MAX_INFLIGHT);
	up->state = UP_RELAYING;
	dev->bytes_down = dev->bytes_up = dev->urbs = 0;

	bufferevent_setcb(ds->bev, relay_down_read, relay_down_write,
	    relay_down_event, ds);
	bufferevent_setcb(up->bev, relay_up_read, relay_up_write,
	    relay_up_event, ds);
	bufferevent_setwatermark(ds->bev, EV_READ, 0, USBIP_MAX_URB_PDU);
	bufferevent_setwatermark(up->bev, EV_READ, 0, USBIP_MAX_URB_PDU);
	bufferevent_setwatermark(ds->bev, EV_WRITE, GW_RELAY_HIWAT / 2, 0);
	bufferevent_setwatermark(up->bev, EV_WRITE, GW_RELAY_HIWAT / 2, 0);
	bufferevent_set_max_single_read(ds->bev, 256 * 1024);
	bufferevent_set_max_single_read(up->bev, 256 * 1024);
	bufferevent_set_max_single_write(ds->bev, 256 * 1024);
	bufferevent_set_max_single_write(up->bev, 256 * 1024);
	relay_stall_timer(ds->bev, false);
	relay_stall_timer(up->bev, false);
	bufferevent_enable(ds->bev, EV_READ | EV_WRITE);
	bufferevent_enable(up->bev, EV_READ | EV_WRITE);
	/* A vhci host may have pipelined its first URBs behind the import. */
	if (evbuffer_get_length(bufferevent_get_input(ds->bev)) > 0)
		relay_down_read(ds->bev, ds);
}

void
relay_stop(struct dsession *ds)
{
	inflight_free(&ds->inflight);
}

/* vhci host → exporter */
static void
relay_down_read(struct bufferevent *bev, void *arg)
{
	struct dsession *ds = arg;
	struct device *dev = ds->dev;
	struct upstream *up = dev->up;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct evbuffer *out = bufferevent_get_output(up->bev);
	struct usbip_urb_hdr h;
	struct usbip_urb_layout lay;
	struct inflight *f;
	const char *why;
	uint8_t *p, iso[USBIP_MAX_ISO_PACKETS * USBIP_ISO_DESC_LEN];
	size_t len;
	int ep_iso;

	for (;;) {
		if (evbuffer_get_length(out) >= GW_RELAY_HIWAT ||
		    ds->inflight.count >= GW_MAX_INFLIGHT) {
			bufferevent_disable(bev, EV_READ);
			break;
		}
		len = evbuffer_get_length(in);
		if (len < USBIP_URB_HDR_LEN)
			break;
		p = evbuffer_pullup(in, USBIP_URB_HDR_LEN);
		if (usbip_urb_hdr_decode(p, len, USBIP_FROM_CLIENT, &h,
		    &why) < 0)
			return relay_malformed(ds, "vhci host", why);
		if (h.devid != dev->gw_devid)
			return relay_malformed(ds, "vhci host",
			    "devid does not name the imported device");
		if (inflight_get(&ds->inflight, h.seqnum) != NULL)
			return relay_malformed(ds, "vhci host",
			    "seqnum already in flight");

		ep_iso = 0;
		if (h.command == USBIP_CMD_SUBMIT && h.ep != 0) {
			struct gw_ep *e = h.direction == USBIP_DIR_IN ?
			    &dev->ep_in[h.ep] : &dev->ep_out[h.ep];

			if (!e->present)
				return relay_malformed(ds, "vhci host",
				    "request to an endpoint the device does not have");
			ep_iso = e->type == USB_XFER_ISO;
		}
		if (usbip_urb_layout(&h, NULL, ep_iso, &lay, &why) == -1)
			return relay_malformed(ds, "vhci host", why);
		if (len < lay.total)
			break;
		if (lay.niso > 0) {
			struct evbuffer_ptr pos;

			evbuffer_ptr_set(in, &pos,
			    USBIP_URB_HDR_LEN + lay.data_len, EVBUFFER_PTR_SET);
			evbuffer_copyout_from(in, &pos, iso, lay.iso_len);
			if (usbip_iso_check(&h, iso, lay.niso,
			    (uint32_t)h.u.submit.transfer_buffer_length,
			    &why) == -1)
				return relay_malformed(ds, "vhci host", why);
		}

		f = inflight_put(&ds->inflight, h.seqnum);
		if (h.command == USBIP_CMD_SUBMIT) {
			f->kind = IF_SUBMIT;
			f->direction = (uint8_t)h.direction;
			f->length = (uint32_t)h.u.submit.transfer_buffer_length;
			f->npackets = lay.niso;
			f->iso = lay.niso > 0;
			f->ep = (uint8_t)h.ep;
			if (h.ep == 0)
				memcpy(f->setup, h.u.submit.setup, 8);
		} else {
			f->kind = IF_UNLINK;
			f->target = h.u.unlink.unlink_seqnum;
		}
		if (up->devid != dev->gw_devid)
			put_be32(p + 8, up->devid);
		dev->bytes_up += lay.total;
		evbuffer_remove_buffer(in, out, lay.total);
	}
	relay_stall_timer(bev, evbuffer_get_length(in) > 0);
}

/* exporter → vhci host */
static void
relay_up_read(struct bufferevent *bev, void *arg)
{
	struct dsession *ds = arg;
	struct device *dev = ds->dev;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct evbuffer *out = bufferevent_get_output(ds->bev);
	struct usbip_urb_hdr h;
	struct usbip_urb_layout lay;
	struct usbip_req_info req;
	struct inflight *f, *t;
	const char *why;
	uint8_t *p, iso[USBIP_MAX_ISO_PACKETS * USBIP_ISO_DESC_LEN];
	size_t len;

	for (;;) {
		if (evbuffer_get_length(out) >= GW_RELAY_HIWAT) {
			bufferevent_disable(bev, EV_READ);
			break;
		}
		len = evbuffer_get_length(in);
		if (len < USBIP_URB_HDR_LEN)
			break;
		p = evbuffer_pullup(in, USBIP_URB_HDR_LEN);
		if (usbip_urb_hdr_decode(p, len, USBIP_FROM_SERVER, &h,
		    &why) < 0)
			return relay_malformed(ds, "exporter", why);
		f = inflight_get(&ds->inflight, h.seqnum);

		if (h.command == USBIP_RET_UNLINK) {
			if (f == NULL || f->kind != IF_UNLINK) {
				/* vhci only logs these; so do we. */
				log_info("%s: RET_UNLINK for unknown seqnum %u "
				    "dropped", dev->busid, h.seqnum);
				evbuffer_drain(in, USBIP_URB_HDR_LEN);
				continue;
			}
			if (h.u.ret_unlink.status == -ECONNRESET &&
			    (t = inflight_get(&ds->inflight, f->target)) != NULL &&
			    t->kind == IF_SUBMIT)
				inflight_del(&ds->inflight, t);
			inflight_del(&ds->inflight, f);
			evbuffer_remove_buffer(in, out, USBIP_URB_HDR_LEN);
			dev->bytes_down += USBIP_URB_HDR_LEN;
			continue;
		}

		/* RET_SUBMIT */
		if (f == NULL || f->kind != IF_SUBMIT)
			return relay_malformed(ds, "exporter",
			    "RET_SUBMIT for a seqnum not in flight");
		req.direction = f->direction;
		req.length = f->length;
		req.npackets = f->npackets;
		req.iso = f->iso;
		if (usbip_urb_layout(&h, &req, -1, &lay, &why) == -1)
			return relay_malformed(ds, "exporter", why);
		if (len < lay.total)
			break;
		if (lay.niso > 0) {
			struct evbuffer_ptr pos;

			evbuffer_ptr_set(in, &pos,
			    USBIP_URB_HDR_LEN + lay.data_len, EVBUFFER_PTR_SET);
			evbuffer_copyout_from(in, &pos, iso, lay.iso_len);
			if (usbip_iso_check(&h, iso, lay.niso, req.length,
			    &why) == -1)
				return relay_malformed(ds, "exporter", why);
		}
		{
			struct inflight done = *f;

			inflight_del(&ds->inflight, f);
			dev->urbs++;
			dev->bytes_down += lay.total;
			evbuffer_remove_buffer(in, out, lay.total);
			if (done.ep == 0 && h.u.ret_submit.status == 0) {
				relay_control_done(dev, &done);
				if (ds->dead)
					return;	/* policy withdrew it */
			}
		}
	}
	relay_stall_timer(bev, evbuffer_get_length(in) > 0);
}

/* Output drained below half the high-water mark: resume the other side. */
static void
relay_down_write(struct bufferevent *bev, void *arg)
{
	struct dsession *ds = arg;
	struct upstream *up = ds->dev->up;

	if (!(bufferevent_get_enabled(up->bev) & EV_READ)) {
		bufferevent_enable(up->bev, EV_READ);
		relay_up_read(up->bev, ds);
	}
}

static void
relay_up_write(struct bufferevent *bev, void *arg)
{
	struct dsession *ds = arg;

	if (!(bufferevent_get_enabled(ds->bev) & EV_READ)) {
		bufferevent_enable(ds->bev, EV_READ);
		relay_down_read(ds->bev, ds);
	}
}

static void
relay_down_event(struct bufferevent *bev, short what, void *arg)
{
	struct dsession *ds = arg;

	if (what & BEV_EVENT_TIMEOUT)
		dsession_close(ds, "vhci host stalled");
	else if (what & BEV_EVENT_EOF)
		dsession_close(ds, "vhci host detached");
	else
		dsession_close(ds, "vhci host connection error");
}

static void
relay_up_event(struct bufferevent *bev, short what, void *arg)
{
	struct dsession *ds = arg;
	struct device *dev = ds->dev;

	if (what & BEV_EVENT_TIMEOUT)
		device_up_closed(dev, "exporter stalled");
	else if (what & BEV_EVENT_EOF)
		device_up_closed(dev, "exporter closed the device's session");
	else
		device_up_closed(dev, "exporter connection error");
}

/* The interface list of configuration `value` (alt settings 0). */
void
device_load_interfaces(struct device *dev, uint8_t value)
{
	struct desc_config c;
	const char *why;
	int i, k;

	for (i = 0; i < GW_MAX_CONFIGS; i++) {
		if (dev->ident.config[i] == NULL ||
		    desc_parse_config(dev->ident.config[i],
		    dev->ident.config_len[i], &c, &why) == -1 ||
		    c.value != value)
			continue;
		dev->nintf = 0;
		for (k = 0; k < c.nalt && dev->nintf < USBIP_MAX_INTERFACES; k++) {
			if (c.alt[k].alt != 0)
				continue;
			dev->intf[dev->nintf].bInterfaceClass = c.alt[k].cls;
			dev->intf[dev->nintf].bInterfaceSubClass = c.alt[k].subcls;
			dev->intf[dev->nintf].bInterfaceProtocol = c.alt[k].proto;
			dev->nintf++;
		}
		return;
	}
}
