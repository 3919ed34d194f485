/*
 * The claim: the gateway imports a device at its exporter itself, so
 * that the exporter reports it busy to anybody else, then reads its
 * descriptors with its own control URBs (device, every configuration in
 * full, BOS, device qualifier and other-speed configurations where the
 * device's USB version has them, the language table,
 * manufacturer/product/serial strings) under a timeout per step.  What
 * it read becomes the device's identity; the relay (relay.c) holds
 * every later read of the same descriptors by a vhci host to it.
 *
 * After the probe the connection stays open and idle (UP_IDLE) until a
 * vhci host attaches; the relay then takes the bufferevent over.
 *
 * The probe queue: at most max-probes claims (max-probes-per-exporter
 * of one exporter) are between their connect and the end of their probe
 * at once; the rest wait (UP_QUEUED, no connection, no timeout running)
 * in two FIFO queues, the claims of devices that were authorized or
 * attached (a re-claim after a detach) ahead of new devices.  A claim
 * storm is then a queue, not a storm of timeouts.  Queued claims are
 * started from an event of their own (up_queue_ev), never from inside
 * the callback that freed a slot: a start that fails reports to the
 * device from a clean stack.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "base/counters.h"
#include "base/desc.h"
#include "base/identity.h"
#include "base/log.h"
#include "base/util.h"
#include "core/loop.h"
#include "core/store.h"
#include "core/upstream.h"

enum probe_step {
	PROBE_DEVICE,
	PROBE_CONFIG_HDR,
	PROBE_CONFIG,
	PROBE_BOS_HDR,		/* bcdUSB >= 2.01, as the kernel's hub */
	PROBE_BOS,
	PROBE_QUALIFIER,	/* bcdUSB >= 2.00 */
	PROBE_OTHER_HDR,	/* other-speed configurations, if qualified */
	PROBE_OTHER,
	PROBE_LANGS,
	PROBE_MANUFACTURER,
	PROBE_PRODUCT,
	PROBE_SERIAL,
	PROBE_DONE,
};

#define PROBE_SEQ_BASE	0x10000000u	/* the gateway's own seqnums */

static void	up_read(struct bufferevent *, void *);
static void	up_event(struct bufferevent *, short, void *);
static void	up_probe_next(struct upstream *);
static void	up_deadline_cb(evutil_socket_t, short, void *);

/* The probe queue: [0] re-claims of authorized devices, [1] the rest. */
static TAILQ_HEAD(up_queue, upstream) up_queue[2] = {
	TAILQ_HEAD_INITIALIZER(up_queue[0]), TAILQ_HEAD_INITIALIZER(up_queue[1])
};
static const struct upstream_dialer *up_dialer;
static unsigned		 up_nqueued;
static unsigned		 up_nprobing;	/* claims holding a slot */
static struct event	*up_queue_ev;

static const char *
up_state_name(enum up_state st)
{
	switch (st) {
	case UP_QUEUED:		return "queued";
	case UP_CONNECTING:	return "connecting";
	case UP_IMPORTING:	return "importing";
	case UP_PROBING:	return "probing";
	case UP_IDLE:		return "idle";
	case UP_RELAYING:	return "relaying";
	case UP_CLOSED:		return "closed";
	}
	return "?";
}

/* Every claim's state transition goes through here, and is logged. */
void
upstream_set_state(struct upstream *up, enum up_state st, const char *why)
{
	if (up->state == st)
		return;
	log_debug("%s: claim %s -> %s%s%s", up->dev != NULL ? up->dev->busid :
	    "-", up_state_name(up->state), up_state_name(st), why ? ": " : "",
	    why ? why : "");
	up->state = st;
	if (up->queued && st != UP_QUEUED) {
		TAILQ_REMOVE(&up_queue[up->urgent ? 0 : 1], up, qentry);
		up->queued = false;
		up_nqueued--;
	}
	/* the probe is over (done, or failed): its slot is the next one's */
	if (up->slot && (st == UP_IDLE || st == UP_RELAYING || st == UP_CLOSED)) {
		if (up->deadline_ev != NULL)
			evtimer_del(up->deadline_ev);
		up->slot = false;
		if (st == UP_CLOSED)
			cnt.probes_failed++;
		else
			cnt_probe(now_usec() - up->probe_t0);
		up_nprobing--;
		up->exp->probing--;
		upstream_queue_kick();
	}
}

unsigned
upstream_probing(void)
{
	return up_nprobing;
}

unsigned
upstream_queued(void)
{
	return up_nqueued;
}

/* The claim failed: the device decides what next; up is closed. */
static void
up_fail(struct upstream *up, int status, const char *why)
{
	struct device *dev = up->dev;

	if (up->dialing && up_dialer != NULL)
		up_dialer->cancel(up);	/* its token is spent */
	up->dialing = false;
	upstream_set_state(up, UP_CLOSED, why);
	up->ops->failed(dev, status, why);
}

static void
up_set_timeout(struct upstream *up, unsigned ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	bufferevent_set_timeouts(up->bev, ms ? &tv : NULL, ms ? &tv : NULL);
}

static void
up_deadline_arm(struct upstream *up, unsigned ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	if (up->deadline_ev == NULL)
		up->deadline_ev = evtimer_new(gw->base, up_deadline_cb, up);
	if (up->deadline_ev != NULL)
		evtimer_add(up->deadline_ev, &tv);
}

/*
 * The whole probe, from the connect to the last descriptor, has
 * GW_PROBE_DEADLINE x probe-timeout.  probe-timeout alone is an
 * inactivity timeout (every byte re-arms it): an exporter that
 * dribbles a byte per second would hold its probe slots for ever, and
 * with a few such exporters every slot, so that no other device is
 * claimed.  What the gateway itself stalled meanwhile (gw->stalled_ms,
 * loop.c) is not the exporter's and is granted again.
 */
static void
up_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct upstream *up = arg;
	uint64_t stalled = gw->stalled_ms - up->stalled0;
	char why[96];

	if (!up->slot)
		return;
	if (stalled > 0) {
		up->stalled0 = gw->stalled_ms;
		up_deadline_arm(up, stalled > 600000 ? 600000 : stalled);
		return;
	}
	snprintf(why, sizeof(why), "probe not finished within %u ms "
	    "(%d x probe-timeout)", GW_PROBE_DEADLINE * gw->probe_timeout_ms,
	    GW_PROBE_DEADLINE);
	up_fail(up, -1, why);
}

/* Connect: the claim takes a probe slot, its timeouts start now. */
static void
up_start(struct upstream *up)
{
	struct exporter *exp = up->exp;

	upstream_set_state(up, UP_CONNECTING, "probe slot");
	up->slot = true;
	up->probe_t0 = now_usec();
	up_nprobing++;
	exp->probing++;
	up->stalled0 = gw->stalled_ms;
	up_deadline_arm(up, GW_PROBE_DEADLINE * gw->probe_timeout_ms);
	if (exp->kind == EXP_KIND_DIALOUT) {
		const char *why = "no dial-out support";

		/* the agent connects back: upstream_dialed() */
		up->dialing = true;
		if (up_dialer == NULL || up_dialer->open(up, &why) == -1) {
			up->dialing = false;
			up_fail(up, UP_ST_UNREACHABLE, why);
		}
		return;
	}
	if ((exp->tls == EXP_TLS_REQUIRED ? gw_connect_tls(exp->host,
	    exp->port, exp->name, gw->probe_timeout_ms, &up->bev, up_read,
	    up_event, up) : gw_connect(exp->host, exp->port, &up->bev,
	    up_read, up_event, up)) == -1) {
		up_fail(up, -1, "cannot start a connection to the exporter");
		return;
	}
	up_set_timeout(up, gw->probe_timeout_ms);
}

/*
 * Start queued claims while there are slots: urgent ones first, each
 * queue in order, skipping a claim whose exporter has all its slots
 * (the scan passes at most max-probes exporters' waiting claims).
 */
static void
up_queue_cb(evutil_socket_t fd, short what, void *arg)
{
	struct upstream *up, *next;
	int q;

	/* (a start that fails reports to its own device, which touches no
	 * other claim: next stays valid) */
	for (q = 0; q < 2; q++) {
		for (up = TAILQ_FIRST(&up_queue[q]); up != NULL; up = next) {
			if (up_nprobing >= gw->max_probes)
				return;
			next = TAILQ_NEXT(up, qentry);
			if (up->exp->probing >= gw->max_probes_per_exporter)
				continue;
			up_start(up);
		}
	}
}

/* Start what the probe slots allow, from the loop (also: limits raised). */
void
upstream_queue_kick(void)
{
	if (up_nqueued == 0)
		return;
	if (up_queue_ev == NULL)
		up_queue_ev = event_new(gw->base, -1, 0, up_queue_cb, NULL);
	event_active(up_queue_ev, EV_TIMEOUT, 0);
}

/*
 * A new claim of dev: queued for a probe slot (urgent: ahead of new
 * devices), started from the loop.  Everything after arrives at ops.
 */
struct upstream *
upstream_new(struct device *dev, const struct upstream_ops *ops, bool urgent)
{
	struct upstream *up;

	up = xcalloc(1, sizeof(*up));
	up->dev = dev;
	up->exp = dev->exp;
	up->ops = ops;
	up->state = UP_QUEUED;
	up->urgent = urgent;
	up->seqnum = PROBE_SEQ_BASE;
	TAILQ_INSERT_TAIL(&up_queue[urgent ? 0 : 1], up, qentry);
	up->queued = true;
	up_nqueued++;
	upstream_queue_kick();
	return up;
}

static void
upstream_free(void *arg)
{
	struct upstream *up = arg;

	if (up->bev != NULL)
		bufferevent_free(up->bev);
	if (up->deadline_ev != NULL)
		event_free(up->deadline_ev);
	free(up);
}

/*
 * Close the claim: the connection goes now (the exporter sees the
 * session end and resets the device), the object is freed from the loop
 * since a callback of its bufferevent may be on the stack.
 */
void
upstream_set_dialer(const struct upstream_dialer *d)
{
	up_dialer = d;
}

/*
 * What the connection to the exporter is, for the attachment's records:
 * TLS with this certificate, or plaintext (NULL).
 */
static void
up_set_peer(struct upstream *up, const struct tlsid_peer *cert)
{
	up->tls = cert != NULL;
	usbgw_strlcpy(up->cert, cert != NULL ? cert->name : "",
	    sizeof(up->cert));
}

/*
 * The agent's dial-back connection, admitted by its token: from here on
 * it is the claim's connection, as if the gateway had connected.
 */
void
upstream_dialed(struct upstream *up, struct bufferevent *bev,
    const struct tlsid_peer *cert)
{
	up->dialing = false;
	up->bev = bev;
	up_set_peer(up, cert);
	bufferevent_setcb(bev, up_read, NULL, up_event, up);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	up_set_timeout(up, gw->probe_timeout_ms);
	up_event(bev, BEV_EVENT_CONNECTED, up);
}

/* OPEN_FAILED, no dial-back in time, the control connection lost. */
void
upstream_dial_failed(struct upstream *up, int status, const char *why)
{
	up->dialing = false;
	up_fail(up, status, why);
}

void
upstream_close(struct upstream *up)
{
	if (up == NULL)
		return;
	if (up->dialing && up_dialer != NULL)
		up_dialer->cancel(up);
	up->dialing = false;
	upstream_set_state(up, UP_CLOSED, "closed");
	up->dev = NULL;
	if (up->bev != NULL) {
		bufferevent_setcb(up->bev, NULL, NULL, NULL, NULL);
		bufferevent_disable(up->bev, EV_READ | EV_WRITE);
		bufferevent_free(up->bev);
		up->bev = NULL;
	}
	gw_defer(upstream_free, up);
}

static void
up_event(struct bufferevent *bev, short what, void *arg)
{
	struct upstream *up = arg;
	uint8_t req[USBIP_IMPORT_REQ_LEN];

	if (what & BEV_EVENT_CONNECTED) {
		if (up->exp->kind != EXP_KIND_DIALOUT)	/* else: dialed */
			up_set_peer(up, gw_tls_peer());
		gw_socket_tune(bufferevent_getfd(bev));
		usbip_import_req_encode(req, up->dev->up_busid);
		bufferevent_write(bev, req, sizeof(req));
		upstream_set_state(up, UP_IMPORTING, NULL);
		return;
	}
	if (what & BEV_EVENT_TIMEOUT) {
		if (gw_timeout_spurious(bev, what))
			return;		/* the gateway was slow, not the exporter */
		return up_fail(up, -1, up->state == UP_IDLE ?
		    "exporter stalled" : "exporter timed out");
	}
	if (up->state == UP_IDLE) {
		up->ops->closed(up->dev, (what & BEV_EVENT_EOF) ?
		    "exporter closed the device's session" :
		    "exporter connection error");
		return;
	}
	if (up->state == UP_CONNECTING)
		return up_fail(up, UP_ST_UNREACHABLE, gw_tls_error() != NULL ?
		    gw_tls_error() : "cannot reach exporter");
	up_fail(up, -1, (what & BEV_EVENT_EOF) ? "exporter closed the connection" :
	    "exporter connection error");
}

/* Send a control IN request on ep0 with the gateway's own seqnum. */
static void
up_control_in(struct upstream *up, uint8_t type, uint8_t req, uint16_t value,
    uint16_t index, uint16_t length)
{
	struct usbip_urb_hdr h;
	uint8_t buf[USBIP_URB_HDR_LEN];

	usbip_control_submit(&h, ++up->seqnum, up->devid, type, req, value,
	    index, length);
	up->req_len = length;
	usbip_urb_hdr_encode(buf, &h);
	bufferevent_write(up->bev, buf, sizeof(buf));
}

static void
get_descriptor(struct upstream *up, uint8_t type, uint8_t index,
    uint16_t langid, uint16_t length)
{
	up_control_in(up, 0x80, USB_REQ_GET_DESCRIPTOR,
	    (uint16_t)(type << 8 | index), langid, length);
}

/* The identity's hash: SHA-256 over the device and configuration descriptors. */
static void
up_hash(struct device *dev)
{
	struct gw_ident *id = &dev->ident;
	struct iovec parts[1 + GW_MAX_CONFIGS];
	size_t n = 0;
	int i;

	parts[n].iov_base = id->dev_desc;
	parts[n++].iov_len = sizeof(id->dev_desc);
	for (i = 0; i < GW_MAX_CONFIGS; i++)
		if (id->config[i] != NULL) {
			parts[n].iov_base = id->config[i];
			parts[n++].iov_len = id->config_len[i];
		}
	if (identity_hash(parts, n, id->hash) == -1)
		fatalx("SHA-256 failed");
}

/* Keep a string descriptor as read: slot 0 the language table. */
static void
probe_keep_string(struct gw_ident *id, int slot, const uint8_t *data,
    uint32_t len)
{
	if (len > 255)
		len = 255;
	free(id->str_raw[slot]);
	id->str_raw[slot] = xmalloc(len);
	memcpy(id->str_raw[slot], data, len);
	id->str_len[slot] = (uint8_t)len;
}

/* One control reply of the probe arrived (status, data). */
static void
up_probe_reply(struct upstream *up, int32_t status, const uint8_t *data,
    uint32_t len)
{
	struct device *dev = up->dev;
	struct gw_ident *id = &dev->ident;
	struct desc_device dd;
	const char *why;
	uint16_t total;

	switch (up->probe_step) {
	case PROBE_DEVICE:
		if (status != 0 || len < USB_DT_DEVICE_SIZE)
			return up_fail(up, -1, "device descriptor unreadable");
		if (desc_parse_device(data, len, &dd, &why) == -1)
			return up_fail(up, -1, why);
		{
			uint32_t speed = id->speed;

			gw_ident_clear(id);	/* nothing of an earlier probe stays */
			id->speed = speed;
		}
		memcpy(id->dev_desc, data, USB_DT_DEVICE_SIZE);
		id->vid = dd.idVendor;
		id->pid = dd.idProduct;
		id->bcd = dd.bcdDevice;
		id->dclass = dd.bDeviceClass;
		id->dsubclass = dd.bDeviceSubClass;
		id->dprotocol = dd.bDeviceProtocol;
		/* more than it reads: the device is refused (device.c) */
		id->nconfigs_dev = dd.bNumConfigurations;
		id->nconfigs = dd.bNumConfigurations < GW_MAX_CONFIGS ?
		    dd.bNumConfigurations : GW_MAX_CONFIGS;
		up->bcd_usb = dd.bcdUSB;
		up->probe_cfg = 0;
		up->probe_step = id->nconfigs ? PROBE_CONFIG_HDR : PROBE_BOS_HDR;
		break;
	case PROBE_CONFIG_HDR:
		if (status != 0 || len < USB_DT_CONFIG_SIZE)
			return up_fail(up, -1, "configuration descriptor unreadable");
		total = (uint16_t)(data[2] | data[3] << 8);
		if (total < USB_DT_CONFIG_SIZE || total > GW_MAX_CONFIG_LEN)
			return up_fail(up, -1, "configuration wTotalLength out of range");
		up->cfg_total = total;
		up->probe_step = PROBE_CONFIG;
		break;
	case PROBE_CONFIG:
		if (status != 0 || len != up->cfg_total)
			return up_fail(up, -1, "configuration descriptor short");
		{
			struct desc_config c;

			if (desc_parse_config(data, len, &c, &why) == -1)
				return up_fail(up, -1, why);
		}
		free(id->config[up->probe_cfg]);
		id->config[up->probe_cfg] = xmalloc(len);
		memcpy(id->config[up->probe_cfg], data, len);
		id->config_len[up->probe_cfg] = (uint16_t)len;
		if (++up->probe_cfg < id->nconfigs)
			up->probe_step = PROBE_CONFIG_HDR;
		else
			up->probe_step = PROBE_BOS_HDR;
		break;
	/*
	 * BOS, qualifier and other-speed configurations are optional: a
	 * stall means the device has none, and then it may not show one
	 * to a vhci host either.
	 */
	case PROBE_BOS_HDR:
		up->probe_step = PROBE_QUALIFIER;
		if (status != 0 || len < 5 || data[0] < 5 || data[1] != USB_DT_BOS)
			break;
		total = (uint16_t)(data[2] | data[3] << 8);
		if (total < 5 || total > GW_MAX_CONFIG_LEN)
			return up_fail(up, -1, "BOS wTotalLength out of range");
		up->cfg_total = total;
		up->probe_step = PROBE_BOS;
		break;
	case PROBE_BOS:
		if (status != 0 || len != up->cfg_total)
			return up_fail(up, -1, "BOS descriptor short");
		id->bos = xmalloc(len);
		memcpy(id->bos, data, len);
		id->bos_len = (uint16_t)len;
		up->probe_step = PROBE_QUALIFIER;
		break;
	case PROBE_QUALIFIER:
		up->probe_step = PROBE_LANGS;
		if (status != 0 || len == 0)
			break;
		if (len > sizeof(id->qualifier))
			return up_fail(up, -1, "device qualifier too long");
		memcpy(id->qualifier, data, len);
		id->qualifier_len = (uint8_t)len;
		up->probe_cfg = 0;
		if (len == sizeof(id->qualifier) &&
		    data[1] == USB_DT_DEVICE_QUALIFIER && id->nconfigs > 0)
			up->probe_step = PROBE_OTHER_HDR;
		break;
	case PROBE_OTHER_HDR:
		if (status != 0 || len < USB_DT_CONFIG_SIZE) {
			/* none for this index: the next */
			up->probe_step = ++up->probe_cfg < id->nconfigs ?
			    PROBE_OTHER_HDR : PROBE_LANGS;
			break;
		}
		total = (uint16_t)(data[2] | data[3] << 8);
		if (total < USB_DT_CONFIG_SIZE || total > GW_MAX_CONFIG_LEN)
			return up_fail(up, -1,
			    "other-speed wTotalLength out of range");
		up->cfg_total = total;
		up->probe_step = PROBE_OTHER;
		break;
	case PROBE_OTHER:
		if (status != 0 || len != up->cfg_total)
			return up_fail(up, -1,
			    "other-speed configuration descriptor short");
		id->other[up->probe_cfg] = xmalloc(len);
		memcpy(id->other[up->probe_cfg], data, len);
		id->other_len[up->probe_cfg] = (uint16_t)len;
		up->probe_step = ++up->probe_cfg < id->nconfigs ?
		    PROBE_OTHER_HDR : PROBE_LANGS;
		break;
	case PROBE_LANGS:
		up->langid = 0;
		if (status == 0 && len >= 4 && data[1] == USB_DT_STRING)
			up->langid = (uint16_t)(data[2] | data[3] << 8);
		if (status == 0 && len > 0)
			probe_keep_string(id, 0, data, len);
		id->langid = up->langid;
		up->probe_step = up->langid ? PROBE_MANUFACTURER : PROBE_DONE;
		break;
	case PROBE_MANUFACTURER:
	case PROBE_PRODUCT:
	case PROBE_SERIAL: {
		char *out = up->probe_step == PROBE_MANUFACTURER ?
		    id->manufacturer : up->probe_step == PROBE_PRODUCT ?
		    id->product : id->serial;

		if (status == 0) {
			desc_string(data, len, out, GW_STR_MAX);
			probe_keep_string(id, 1 + up->probe_step -
			    PROBE_MANUFACTURER, data, len);
		}
		up->probe_step++;
		break;
	}
	default:
		return up_fail(up, -1, "probe out of step");
	}
	up_probe_next(up);
}

/* Issue the request for the current step, skipping empty ones. */
static void
up_probe_next(struct upstream *up)
{
	struct gw_ident *id = &up->dev->ident;
	uint8_t idx;

	for (;;) {
		switch (up->probe_step) {
		case PROBE_DEVICE:
			return get_descriptor(up, USB_DT_DEVICE, 0, 0,
			    USB_DT_DEVICE_SIZE);
		case PROBE_CONFIG_HDR:
			return get_descriptor(up, USB_DT_CONFIG,
			    (uint8_t)up->probe_cfg, 0, USB_DT_CONFIG_SIZE);
		case PROBE_CONFIG:
			return get_descriptor(up, USB_DT_CONFIG,
			    (uint8_t)up->probe_cfg, 0, up->cfg_total);
		case PROBE_BOS_HDR:
			if (up->bcd_usb >= 0x0201)
				return get_descriptor(up, USB_DT_BOS, 0, 0, 5);
			up->probe_step = PROBE_QUALIFIER;
			break;
		case PROBE_BOS:
			return get_descriptor(up, USB_DT_BOS, 0, 0,
			    up->cfg_total);
		case PROBE_QUALIFIER:
			if (up->bcd_usb >= 0x0200)
				return get_descriptor(up,
				    USB_DT_DEVICE_QUALIFIER, 0, 0,
				    sizeof(id->qualifier));
			up->probe_step = PROBE_LANGS;
			break;
		case PROBE_OTHER_HDR:
			return get_descriptor(up, USB_DT_OTHER_SPEED_CONFIG,
			    (uint8_t)up->probe_cfg, 0, USB_DT_CONFIG_SIZE);
		case PROBE_OTHER:
			return get_descriptor(up, USB_DT_OTHER_SPEED_CONFIG,
			    (uint8_t)up->probe_cfg, 0, up->cfg_total);
		case PROBE_LANGS:
			return get_descriptor(up, USB_DT_STRING, 0, 0, 255);
		case PROBE_MANUFACTURER:
		case PROBE_PRODUCT:
		case PROBE_SERIAL:
			idx = id->dev_desc[14 + up->probe_step -
			    PROBE_MANUFACTURER];
			if (idx != 0)
				return get_descriptor(up, USB_DT_STRING, idx,
				    up->langid, 255);
			up->probe_step++;
			break;
		case PROBE_DONE:
		default:
			up_hash(up->dev);
			upstream_set_state(up, UP_IDLE, "probed");
			up_set_timeout(up, 0);
			gw_socket_keepalive(bufferevent_getfd(up->bev));
			up->dev->probed = true;
			up->ops->claimed(up->dev);
			return;
		}
	}
}

static int
up_lookup(void *arg, uint32_t seqnum, struct usbip_req_info *req)
{
	struct upstream *up = arg;

	if (seqnum != up->seqnum)
		return -1;
	req->direction = USBIP_DIR_IN;
	req->length = up->req_len;
	req->npackets = 0;
	req->iso = false;
	return 0;
}

static void
up_read(struct bufferevent *bev, void *arg)
{
	struct upstream *up = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct usbip_op op;
	struct usbip_urb u;
	const char *why = "";
	uint8_t *p;
	size_t len;
	int r;

	while (up->state != UP_CLOSED && (len = evbuffer_get_length(in)) > 0) {
		switch (up->state) {
		case UP_IMPORTING:
			p = evbuffer_pullup(in, -1);
			r = usbip_op_decode(p, len, USBIP_FROM_SERVER, &op, &why);
			if (r == USBIP_NEED_MORE)
				return;
			if (r < 0)
				return up_fail(up, -1, why);
			if (op.hdr.code != OP_REP_IMPORT)
				return up_fail(up, -1, "unexpected reply to import");
			if (op.hdr.status != ST_OK)
				return up_fail(up, (int)op.hdr.status,
				    usbip_st_name(op.hdr.status));
			if (strcmp(op.dev.busid, up->dev->up_busid) != 0)
				return up_fail(up, -1,
				    "import reply names another busid");
			evbuffer_drain(in, (size_t)r);
			up->rec = op.dev;
			up->devid = op.dev.busnum << 16 | op.dev.devnum;
			upstream_set_state(up, UP_PROBING, NULL);
			up->probe_step = PROBE_DEVICE;
			up_probe_next(up);
			break;
		case UP_PROBING:
			p = evbuffer_pullup(in, -1);
			r = usbip_urb_decode(p, len, USBIP_FROM_SERVER,
			    up_lookup, up, -1, &u, &why);
			if (r == USBIP_NEED_MORE)
				return;
			if (r < 0)
				return up_fail(up, -1, why);
			if (u.hdr.command != USBIP_RET_SUBMIT)
				return up_fail(up, -1, "unexpected URB reply");
			{
				uint8_t data[GW_MAX_CONFIG_LEN];
				uint32_t n = u.lay.data_len;

				memcpy(data, u.data, n);
				evbuffer_drain(in, (size_t)r);
				up_probe_reply(up, u.hdr.u.ret_submit.status,
				    data, n);
			}
			break;
		case UP_IDLE:
			return up_fail(up, -1,
			    "exporter sent data on an idle claim");
		default:
			return up_fail(up, -1, "unexpected data");
		}
	}
}
