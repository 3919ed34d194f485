/*
 * The URB relay: the hot path between a vhci host (downstream) and the
 * gateway's claim at the exporter (upstream).
 *
 * Every PDU is decoded and checked by the codec before it is forwarded:
 * requests must name the imported device (devid) and an endpoint the
 * device has, replies must answer a request in flight.  Payload bytes are
 * never inspected or copied by us: the checked PDUs at the head of one
 * connection's input are written to the other socket straight from that
 * input buffer (writev over its chains); only what the socket does not
 * take is moved to the output buffer (evbuffer_remove_buffer moves whole
 * chains and copies just the part of a chain it splits).  Each 48-byte
 * header is copied out to be decoded and, where the devids differ,
 * rewritten in place.
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
 *
 * Per-interface decisions (issue 17): when the applied decision lists
 * interface verdicts, a CMD_SUBMIT that belongs to a denied interface
 * (ifmap_refuse: its endpoint's interface in the endpoint map, or the
 * recipient of an ep0 request) is answered here with RET_SUBMIT -EPIPE
 * and dropped; the vhci host's own refusals back up into its output,
 * and reading it stops at GW_RELAY_HIWAT like any other backpressure.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "base/counters.h"
#include "base/desc.h"
#include "base/evbuf.h"
#include "base/log.h"
#include "base/util.h"
#include "core/device.h"
#include "core/loop.h"
#include "core/relay.h"
#include "core/session.h"
#include "core/store.h"
#include "core/upstream.h"
#include "policy/ident.h"
#include "policy/ifmap.h"

#define IF_SUBMIT	1
#define IF_UNLINK	2
/*
 * A seqnum a forwarded CMD_UNLINK names that is not (or no longer) in
 * flight: reserved until the RET_UNLINK, so the vhci host cannot reuse
 * it for a URB the RET_UNLINK would then retire (the exporter's real
 * RET_SUBMIT would look "not in flight": issue 17, F8).
 */
#define IF_HELD		3


/* ---- in-flight table: open addressing on seqnum ---------------------- */

static uint32_t
if_hash(uint32_t s)
{
	s ^= s >> 16;
	s *= 0x7feb352dU;
	s ^= s >> 15;
	return s;
}

/*
 * Room for `cap` seqnums at once, at most half the slots: the table does
 * not grow (the relay stops reading a vhci host at GW_MAX_INFLIGHT), it
 * only sheds tombstones when they crowd it.
 */
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
			*inflight_add(t, old[i].seqnum) = old[i];
	free(old);
}

/*
 * A zeroed, used slot for seqnum; NULL if seqnum is in flight already.
 * One probe sequence does both: it runs to an empty slot anyway.
 */
struct inflight *
inflight_add(struct inflight_tab *t, uint32_t seqnum)
{
	struct inflight *f, *slot = NULL;
	uint32_t i, m;

	if ((t->count + t->tombs + 1) * 4 > t->cap * 3)
		inflight_rehash(t);
	m = t->cap - 1;
	for (i = if_hash(seqnum) & m;; i = (i + 1) & m) {
		f = &t->slot[i];
		if (f->used == 1) {
			if (f->seqnum == seqnum)
				return NULL;
			continue;
		}
		if (slot == NULL)
			slot = f;	/* the first free one: reuse a tombstone */
		if (f->used == 0)
			break;
	}
	if (slot->used == 2)
		t->tombs--;
	memset(slot, 0, sizeof(*slot));
	slot->used = 1;
	slot->seqnum = seqnum;
	t->count++;
	return slot;
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
		device_set_interface(dev, (uint8_t)wIndex, (uint8_t)wValue);
	}
}

/*
 * A standard request that selects a configuration or an alternate
 * setting must name one the probe read: the endpoint table (and the
 * policy's interface set) follow it, and the device may not be moved
 * into a setting nobody verified.
 */
static const char *
relay_ep0_fits(const struct device *dev, const uint8_t *s)
{
	uint16_t wValue = (uint16_t)(s[2] | s[3] << 8);
	uint16_t wIndex = (uint16_t)(s[4] | s[5] << 8);

	if (s[0] == 0x00 && s[1] == USB_REQ_SET_CONFIGURATION &&
	    (wValue > 0xff || !gw_ident_has_config(&dev->ident,
	    (uint8_t)wValue)))
		return "SET_CONFIGURATION to a configuration the device "
		    "does not have";
	if (s[0] == 0x01 && s[1] == USB_REQ_SET_INTERFACE &&
	    (wValue > 0xff || wIndex > 0xff ||
	    !gw_ident_has_alt(&dev->ident, dev->cur_config, (uint8_t)wIndex,
	    (uint8_t)wValue)))
		return "SET_INTERFACE to an alternate setting the device "
		    "does not have in its current configuration";
	return NULL;
}

/* ---- the relay ------------------------------------------------------- */

/*
 * The relay owns both sockets and does its own I/O on raw events rather
 * than through bufferevents: libevent 2.1 reads at most 4096 bytes per
 * call (EVBUFFER_MAX_READ) and asks FIONREAD first, which costs a wake-up,
 * an ioctl and a readv per 4 KiB.  Here one readv takes up to
 * RELAY_READ bytes into the input evbuffer, whole PDUs are moved to the
 * other side's output evbuffer, and the output is written at once
 * (an epoll round trip only when the socket is full).
 *
 * SO_RCVLOWAT: a 64 KiB URB arrives in several segments; the kernel is
 * told to report the socket readable only once the rest of the PDU being
 * received is there (the peer must send those bytes anyway, so this
 * cannot deadlock; EOF still wakes us).  Set only when it changes.
 */
#define RELAY_READ		(128u * 1024)	/* one readv, one callback */
#define RELAY_LOWAT_MAX		(256u * 1024)
#define RELAY_TICK_MS		5000	/* at most; a quarter of the stall limit */
/* refusals audited one by one per attachment; the rest are counted */
#define RELAY_AUDIT_REFUSALS	16

struct relay;

struct rside {
	struct relay	*r;
	evutil_socket_t	 fd;
	struct event	*rev, *wev;
	struct evbuffer	*in;		/* bytes read from this socket */
	struct evbuffer	*out;		/* bytes to write to this socket */
	bool		 reading;
	int		 lowat;
	/*
	 * Stall: no progress for relay-stall-timeout, not a buffer that
	 * is not empty.  A peer reading steadily behind a faster one keeps
	 * `out` backed up for as long as it likes, and a partial PDU that
	 * grows is on its way.
	 */
	bool		 partial;	/* a partial PDU is buffered */
	uint64_t	 in_progress;	/* bytes arrived (read, or queued) */
	int		 in_queued;	/* the socket's queue at the last tick */
	bool		 out_pending;	/* out holds bytes the socket refused */
	uint64_t	 out_progress;	/* out became pending, or bytes written */
	const char	*name;
};

struct relay {
	struct dsession	*ds;
	struct device	*dev;
	relay_end_fn	 end;		/* the session's owner ends it */
	struct rside	 down;		/* vhci host */
	struct rside	 up;		/* exporter */
	struct event	*tick;
	/*
	 * The device's standing decision (device_decision(): the applied
	 * one, updated in place when the policy changes, so the next URB
	 * is judged by the current one).  With interface verdicts the
	 * relay refuses what belongs to a denied interface itself.
	 */
	const struct decision *dec;
	bool		 refuse_paused;	/* down stopped: its refusals queued */
	/*
	 * SET_CONFIGURATION and SET_INTERFACE requests forwarded and not
	 * answered: the exporters apply them before reading on, so under
	 * interface verdicts what follows cannot be judged against the
	 * map until the reply comes (issue 17, F2).
	 */
	uint32_t	 cfg_busy;
};

static bool
relay_cfg_change(const uint8_t *s)
{
	return (s[0] == 0x00 && s[1] == USB_REQ_SET_CONFIGURATION) ||
	    (s[0] == 0x01 && s[1] == USB_REQ_SET_INTERFACE);
}

static void	relay_from_down(struct relay *);
static void	relay_from_up(struct relay *);

static void
rside_lowat(struct rside *s, size_t need)
{
	int v = need > RELAY_LOWAT_MAX ? (int)RELAY_LOWAT_MAX : (int)need;

	if (v < 4096)
		v = 1;		/* not worth a syscall */
	if (v == s->lowat)
		return;
	s->lowat = v;
	setsockopt(s->fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v));
}

static void
relay_malformed(struct relay *r, const char *side, const char *why)
{
	char msg[256];

	snprintf(msg, sizeof(msg), "malformed PDU from %s: %s", side, why);
	device_audit_malformed(r->dev, r->ds, msg);
	r->end(r->ds, msg);
}

/* The side's peer closed or failed. */
static void
rside_lost(struct rside *s, const char *what)
{
	struct relay *r = s->r;
	char msg[128];

	snprintf(msg, sizeof(msg), "%s %s", s->name, what);
	if (s == &r->up)
		device_up_closed(r->dev, msg);	/* closes the session too */
	else
		r->end(r->ds, s == &r->down && strcmp(what, "closed") == 0 ?
		    "vhci host detached" : msg);
}

static void
rside_pause(struct rside *s)
{
	if (s->reading) {
		event_del(s->rev);
		s->reading = false;
	}
}

/* (a partial PDU's clock restarts: we, not the peer, held it up) */
static void
rside_resume(struct rside *s)
{
	if (!s->reading) {
		event_add(s->rev, NULL);
		s->reading = true;
		s->in_progress = now_usec();
	}
}

/* Write what we can now; wait for EV_WRITE only for the rest. */
static int
rside_flush(struct rside *s)
{
	int n = 0;

	if (evbuffer_get_length(s->out) > 0) {
		n = evbuffer_write(s->out, s->fd);
		if (n == -1 && errno != EAGAIN && errno != EWOULDBLOCK &&
		    errno != EINTR) {
			rside_lost(s, "write error");
			return -1;
		}
	}
	if (evbuffer_get_length(s->out) > 0) {
		if (!s->out_pending || n > 0)
			s->out_progress = now_usec();
		s->out_pending = true;
		if (!event_pending(s->wev, EV_WRITE, NULL))
			event_add(s->wev, NULL);
	} else {
		s->out_pending = false;
		event_del(s->wev);
	}
	return 0;
}

static void
rside_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct rside *s = arg;
	struct relay *r = s->r;
	struct evbuffer_iovec v[2];
	struct iovec iov[2];
	size_t left;
	ssize_t n;
	int i, nv;

	/*
	 * One read per wake-up, then forward at once: reading on while
	 * more arrives would turn the pipeline into batches (the peer
	 * idles while we collect).  Level-triggered: we come back.
	 */
	nv = evbuffer_reserve_space(s->in, RELAY_READ, v, 2);
	if (nv <= 0)
		fatalx("evbuffer_reserve_space");
	for (i = 0; i < nv; i++) {
		iov[i].iov_base = v[i].iov_base;
		iov[i].iov_len = v[i].iov_len;
	}
	n = readv(fd, iov, nv);
	if (n == 0)
		return rside_lost(s, "closed");
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return;
		return rside_lost(s, "read error");
	}
	s->in_progress = now_usec();
	for (i = 0, left = (size_t)n; i < nv; i++) {
		if (v[i].iov_len > left)
			v[i].iov_len = left;
		left -= v[i].iov_len;
	}
	evbuffer_commit_space(s->in, v, nv > 1 && v[1].iov_len ? nv : 1);
	if (s == &r->down)
		relay_from_down(r);
	else
		relay_from_up(r);
}

static void
rside_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct rside *s = arg;
	struct relay *r = s->r;
	struct rside *other = s == &r->down ? &r->up : &r->down;

	if (rside_flush(s) == -1)
		return;
	/*
	 * The vhci host read the refusals that stopped it: read it again.
	 * The exporter's side first if its output to the host stopped it
	 * too (relay_from_up resumes the host at its end); either call is
	 * the last thing done here, since it may end the session.
	 */
	if (s == &r->down && r->refuse_paused &&
	    evbuffer_get_length(s->out) < GW_RELAY_HIWAT / 2) {
		r->refuse_paused = false;
		if (!r->up.reading) {
			rside_resume(&r->up);
			relay_from_up(r);
		} else if (r->ds->inflight.count < GW_MAX_INFLIGHT &&
		    evbuffer_get_length(r->up.out) < GW_RELAY_HIWAT / 2) {
			rside_resume(s);
			relay_from_down(r);
		}
		return;
	}
	/* Output drained below half the mark: resume the other side. */
	if (!other->reading && evbuffer_get_length(s->out) < GW_RELAY_HIWAT / 2 &&
	    (other != &r->down || (r->ds->inflight.count < GW_MAX_INFLIGHT &&
	    !r->refuse_paused))) {
		rside_resume(other);
		if (other == &r->down)
			relay_from_down(r);
		else
			relay_from_up(r);
	}
}

/*
 * Has the side stalled: output queued for it and not a byte of it
 * written for relay-stall-timeout, or a partial PDU from it and not a
 * byte more for as long?  Bytes of a large PDU wait in the socket below
 * SO_RCVLOWAT, unread by us: the socket's queue growing is progress too.
 * A side we stopped reading (backpressure) is not judged on its input.
 * Either way, what the gateway had not handled yet (it was stopped or
 * busy past the limit) is the peer's progress: bytes that came, room
 * the peer made.
 */
static const char *
rside_stalled(struct rside *s, uint64_t now, uint64_t lim)
{
	int q;

	if (s->out_pending && now - s->out_progress > lim) {
		/* room in the socket now: the peer read, the gateway was
		 * too busy to write (gw_timeout_spurious' rule) */
		if (!gw_fd_progress(s->fd, EV_WRITE))
			return "not reading";
		s->out_progress = now;
	}
	if (!s->reading || !s->partial)
		return NULL;
	if (ioctl(s->fd, FIONREAD, &q) == 0) {
		if (q > s->in_queued)
			s->in_progress = now;
		s->in_queued = q;
	}
	if (now - s->in_progress > lim)
		return "in the middle of a PDU";
	return NULL;
}

static void
relay_tick(evutil_socket_t fd, short what, void *arg)
{
	struct relay *r = arg;
	uint64_t now = now_usec(), lim = gw->relay_stall_ms * 1000ull;
	struct rside *sides[2] = { &r->down, &r->up };
	const char *how;
	int i;

	for (i = 0; i < 2; i++) {
		struct rside *s = sides[i];
		char msg[128];

		if ((how = rside_stalled(s, now, lim)) == NULL)
			continue;
		snprintf(msg, sizeof(msg), "%s stalled (%s for %u ms)",
		    s->name, how, gw->relay_stall_ms);
		if (s == &r->up)
			device_up_closed(r->dev, msg);
		else
			r->end(r->ds, msg);
		return;
	}
}

/* Take the socket and any buffered bytes over from a bufferevent. */
static void
rside_init(struct relay *r, struct rside *s, struct bufferevent *bev,
    const char *name)
{
	s->r = r;
	s->name = name;
	s->fd = bufferevent_getfd(bev);
	s->in = evbuffer_new();
	s->out = evbuffer_new();
	/* (a socket bufferevent's output cannot be drained by others:
	 * nothing may be pending there) */
	evbuffer_add_buffer(s->in, bufferevent_get_input(bev));
	bufferevent_disable(bev, EV_READ | EV_WRITE);
	bufferevent_setcb(bev, NULL, NULL, NULL, NULL);
	bufferevent_setfd(bev, -1);	/* the relay owns the socket now */
	s->lowat = 1;
	s->in_progress = now_usec();
	s->rev = event_new(gw->base, s->fd, EV_READ | EV_PERSIST,
	    rside_read_cb, s);
	s->wev = event_new(gw->base, s->fd, EV_WRITE | EV_PERSIST,
	    rside_write_cb, s);
	rside_resume(s);
}

static void
rside_free(struct rside *s)
{
	if (s->rev != NULL)
		event_free(s->rev);
	if (s->wev != NULL)
		event_free(s->wev);
	if (s->in != NULL)
		evbuffer_free(s->in);
	if (s->out != NULL)
		evbuffer_free(s->out);
	if (s->fd != -1)
		evutil_closesocket(s->fd);
	s->fd = -1;
}

void
relay_start(struct dsession *ds, struct device *dev, const void *first,
    size_t firstlen, relay_end_fn end)
{
	struct upstream *up = dev->up;
	struct relay *r;
	unsigned tick = gw->relay_stall_ms / 4;
	struct timeval tv;

	if (tick > RELAY_TICK_MS)
		tick = RELAY_TICK_MS;
	if (tick < 100)
		tick = 100;
	tv.tv_sec = tick / 1000;
	tv.tv_usec = (tick % 1000) * 1000;
	r = xcalloc(1, sizeof(*r));
	r->ds = ds;
	r->dev = dev;
	r->end = end;
	ds->relay = r;		/* the owner set DS_RELAY */
	inflight_init(&ds->inflight, GW_MAX_INFLIGHT);
	upstream_set_state(up, UP_RELAYING, "relaying");
	dev->bytes_down = dev->bytes_up = dev->urbs = 0;
	dev->refused = 0;
	r->dec = device_decision(dev);

	rside_init(r, &r->down, ds->bev, "vhci host");
	rside_init(r, &r->up, up->bev, "exporter");
	evbuffer_add(r->down.out, first, firstlen);
	r->tick = event_new(gw->base, -1, EV_PERSIST, relay_tick, r);
	event_add(r->tick, &tv);
	/* the import reply; and URBs pipelined behind the import */
	if (rside_flush(&r->down) == -1)
		return;
	if (evbuffer_get_length(r->down.in) > 0)
		relay_from_down(r);
}

/* Close both sockets: the vhci host sees the disconnect, the exporter the
 * claim's end (it resets the device). */
void
relay_stop(struct dsession *ds)
{
	struct relay *r = ds->relay;

	if (r == NULL)
		return;
	ds->relay = NULL;
	if (r->dev->refused > RELAY_AUDIT_REFUSALS) {
		char msg[192];

		snprintf(msg, sizeof(msg), "%llu URBs and control requests to "
		    "denied interfaces refused in this attachment (the first "
		    "%u audited one by one)",
		    (unsigned long long)r->dev->refused, RELAY_AUDIT_REFUSALS);
		device_audit_iface_refused(r->dev, ds, msg);
	}
	if (r->tick != NULL)
		event_free(r->tick);
	rside_free(&r->down);
	rside_free(&r->up);
	inflight_free(&ds->inflight);
	free(r);
}

/*
 * Check the ISO descriptors of the PDU at offset `at` of `in` (complete,
 * as lay says): they sit after the data, so they are copied out, 16 KiB
 * at most; the data itself is not touched.
 */
static int
relay_iso_check(struct evbuffer *in, size_t at, const struct usbip_urb_hdr *h,
    const struct usbip_urb_layout *lay, uint32_t buflen, const char **why)
{
	uint8_t iso[USBIP_MAX_ISO_PACKETS * USBIP_ISO_DESC_LEN];
	evbuf_copyout_at(in, at + USBIP_URB_HDR_LEN + lay->data_len, iso,
	    lay->iso_len);
	return usbip_iso_check(h, iso, lay->niso, buflen, why);
}

/* Rewrite the devid of the header at offset `at` of `in`. */
static void
relay_put_devid(struct evbuffer *in, size_t at, uint32_t devid)
{
	uint8_t b[4];

	put_be32(b, devid);
	(void)evbuf_poke(in, at + 8, b, sizeof(b));
}

/*
 * Pass the first n bytes of `in` (checked PDUs) on to side o: written
 * from `in` itself when nothing is queued before them, the rest queued.
 * Write errors are left to rside_flush, which sees them again.
 */
static void
relay_forward(struct evbuffer *in, size_t n, struct rside *o)
{
	int w;

	if (n == 0)
		return;
	if (evbuffer_get_length(o->out) == 0) {
		w = evbuffer_write_atmost(in, o->fd, (ev_ssize_t)n);
		if (w > 0)
			n -= (size_t)w;
	}
	if (n > 0)
		evbuffer_remove_buffer(in, o->out, n);
}

/* Bookkeeping after a pass over one side's input. */
static void
rside_after(struct rside *s, size_t need)
{
	s->partial = evbuffer_get_length(s->in) > 0;
	rside_lowat(s, need);
}

/*
 * The reply to a vhci host's GET_DESCRIPTOR: the descriptor must be the
 * one the probe read.  The data are copied out of the input (descriptor
 * replies are few and short).  Returns 0, or -1 when the session was
 * ended (the reply is not forwarded).
 */
static int
relay_check_descriptor(struct relay *r, size_t at, const struct inflight *f,
    uint32_t n)
{
	struct dsession *ds = r->ds;
	struct device *dev = r->dev;
	uint8_t *data;
	const char *what;
	char buf[192], msg[256];

	if (n == 0 || (f->setup[0] & 0xe0) != 0x80 ||
	    f->setup[1] != USB_REQ_GET_DESCRIPTOR)
		return 0;
	data = xmalloc(n);
	evbuf_copyout_at(r->up.in, at + USBIP_URB_HDR_LEN, data, n);
	what = gw_ident_check_read(&dev->ident, f->setup, data, n, buf,
	    sizeof(buf));
	free(data);
	if (what == NULL)
		return 0;
	snprintf(msg, sizeof(msg), "descriptor mismatch: %s", what);
	/* the anomaly blocks the device, which may end the session */
	device_descriptor_anomaly(dev, what);
	if (!ds->dead && ds->relay == r)
		r->end(ds, msg);
	return -1;
}

/*
 * Answer the CMD_SUBMIT at the head of `in` (lay.total bytes, complete)
 * ourselves with RET_SUBMIT -EPIPE, as a stalled endpoint would, and
 * drop it: it never reaches the exporter.  An ISO URB gets its packets
 * back, each with actual_length 0 and -EPIPE (vhci reads as many
 * descriptors as it sent).  Returns 0, or -1 when the session ended.
 */
static int
relay_refuse(struct relay *r, const struct usbip_urb_hdr *h,
    const struct usbip_urb_layout *lay, const char *why)
{
	struct usbip_urb_hdr rh;
	struct usbip_iso_desc d;
	uint8_t b[USBIP_URB_HDR_LEN], iso[USBIP_ISO_DESC_LEN];
	uint32_t i;

	if (inflight_get(&r->ds->inflight, h->seqnum) != NULL) {
		relay_malformed(r, "vhci host", "seqnum already in flight");
		return -1;
	}
	memset(&rh, 0, sizeof(rh));
	rh.command = USBIP_RET_SUBMIT;
	rh.seqnum = h->seqnum;
	rh.u.ret_submit.status = -EPIPE;
	rh.u.ret_submit.number_of_packets = (int32_t)lay->niso;
	rh.u.ret_submit.error_count = (int32_t)lay->niso;
	usbip_urb_hdr_encode(b, &rh);
	evbuffer_add(r->down.out, b, sizeof(b));
	for (i = 0; i < lay->niso; i++) {
		evbuf_copyout_at(r->down.in, USBIP_URB_HDR_LEN + lay->data_len +
		    (size_t)i * USBIP_ISO_DESC_LEN, iso, sizeof(iso));
		usbip_iso_desc_decode(iso, &d);
		d.actual_length = 0;
		d.status = -EPIPE;
		usbip_iso_desc_encode(iso, &d);
		evbuffer_add(r->down.out, iso, sizeof(iso));
	}
	evbuffer_drain(r->down.in, lay->total);
	r->dev->refused++;
	cnt.relay_refused++;
	if (r->dev->refused <= RELAY_AUDIT_REFUSALS)
		device_audit_iface_refused(r->dev, r->ds, why);
	if (r->dev->refused == RELAY_AUDIT_REFUSALS + 1)
		log_info("%s: more than %u refusals in this attachment: "
		    "counted, no longer audited one by one", r->dev->busid,
		    RELAY_AUDIT_REFUSALS);
	return 0;
}

/* Does the decision's interface verdicts refuse this CMD_SUBMIT? */
static const char *
relay_iface_refuses(struct relay *r, const struct usbip_urb_hdr *h,
    char *buf, size_t len)
{
	const struct device *dev = r->dev;
	struct ifmap_view v;
	uint8_t rcpt = h->u.submit.setup[0] & 0x1f;

	/*
	 * Behind a SET_CONFIGURATION or SET_INTERFACE not yet answered the
	 * map may be out of date: what an interface or endpoint owns waits
	 * for no one, it is refused (a host that waits for the reply, as
	 * Linux does, sends nothing here).
	 */
	if (r->cfg_busy != 0 && (r->dec->per_iface || r->dec->niface != 0) &&
	    (h->ep != 0 || rcpt == 1 || (rcpt == 2 &&
	    (h->u.submit.setup[4] & 0x0f) != 0))) {
		snprintf(buf, len, "URB to endpoint 0x%02x (ep0: recipient "
		    "%u) while a SET_CONFIGURATION or SET_INTERFACE is in "
		    "flight", (unsigned)(h->ep | (h->direction ==
		    USBIP_DIR_IN ? 0x80 : 0)), rcpt);
		return buf;
	}
	v.dec = r->dec;
	v.in = dev->ep_in;
	v.out = dev->ep_out;
	v.config = dev->cur_config;
	v.alts = dev->alt;
	v.dclass = dev->ident.dclass;
	return ifmap_refuse(&v, (uint8_t)h->ep, h->direction,
	    h->u.submit.setup, buf, len);
}

/* vhci host → exporter */
static void
relay_from_down(struct relay *r)
{
	struct dsession *ds = r->ds;
	struct device *dev = r->dev;
	struct upstream *up = dev->up;
	struct evbuffer *in = r->down.in, *out = r->up.out;
	struct usbip_urb_hdr h;
	struct usbip_urb_layout lay;
	struct inflight *f, *t;
	const char *why;
	uint8_t hb[USBIP_URB_HDR_LEN];
	size_t len, need = 0, fwd = 0;	/* fwd: checked bytes at the head */
	int ep_iso;
	bool refused = false;
	char rbuf[192];

	for (;;) {
		if (evbuffer_get_length(out) + fwd >= GW_RELAY_HIWAT ||
		    ds->inflight.count >= GW_MAX_INFLIGHT) {
			rside_pause(&r->down);
			break;
		}
		len = evbuffer_get_length(in) - fwd;
		if (len < USBIP_URB_HDR_LEN) {
			need = USBIP_URB_HDR_LEN - len;
			break;
		}
		evbuf_copyout_at(in, fwd, hb, sizeof(hb));
		if (usbip_urb_hdr_decode(hb, USBIP_URB_HDR_LEN,
		    USBIP_FROM_CLIENT, &h, &why) < 0)
			return relay_malformed(r, "vhci host", why);
		if (h.devid != dev->gw_devid)
			return relay_malformed(r, "vhci host",
			    "devid does not name the imported device");
		ep_iso = 0;
		if (h.command == USBIP_CMD_SUBMIT && h.ep != 0) {
			struct gw_ep *e = h.direction == USBIP_DIR_IN ?
			    &dev->ep_in[h.ep] : &dev->ep_out[h.ep];

			if (!e->present)
				return relay_malformed(r, "vhci host",
				    "request to an endpoint the device does not "
				    "have in its current configuration and "
				    "alternate setting");
			ep_iso = e->type == USB_XFER_ISO;
		}
		if (h.command == USBIP_CMD_SUBMIT && h.ep == 0 &&
		    (why = relay_ep0_fits(dev, h.u.submit.setup)) != NULL)
			return relay_malformed(r, "vhci host", why);
		if (usbip_urb_layout(&h, NULL, ep_iso, &lay, &why) == -1)
			return relay_malformed(r, "vhci host", why);
		if (len < lay.total) {
			need = lay.total - len;
			break;
		}
		if (lay.niso > 0 && relay_iso_check(in, fwd, &h, &lay,
		    (uint32_t)h.u.submit.transfer_buffer_length, &why) == -1)
			return relay_malformed(r, "vhci host", why);
		/*
		 * Per-interface decisions (issue 17): one branch for a
		 * decision without interface verdicts.  A refused URB is
		 * answered here; what was checked before it goes first.
		 */
		if (__builtin_expect((r->dec->per_iface || r->dec->niface != 0) ||
		    r->dec->verdict != VERDICT_ALLOW, 0) &&
		    h.command == USBIP_CMD_SUBMIT &&
		    (why = relay_iface_refuses(r, &h, rbuf,
		    sizeof(rbuf))) != NULL) {
			relay_forward(in, fwd, &r->up);
			fwd = 0;
			if (relay_refuse(r, &h, &lay, why) == -1)
				return;
			refused = true;
			if (evbuffer_get_length(r->down.out) >= GW_RELAY_HIWAT) {
				r->refuse_paused = true;
				rside_pause(&r->down);
				break;
			}
			continue;
		}

		if ((f = inflight_add(&ds->inflight, h.seqnum)) == NULL)
			return relay_malformed(r, "vhci host",
			    "seqnum already in flight");
		if (h.command == USBIP_CMD_SUBMIT) {
			f->kind = IF_SUBMIT;
			f->direction = (uint8_t)h.direction;
			f->length = (uint32_t)h.u.submit.transfer_buffer_length;
			f->npackets = lay.niso;
			f->iso = ep_iso;
			f->ep = (uint8_t)h.ep;
			if (h.ep == 0) {
				memcpy(f->setup, h.u.submit.setup, 8);
				if (relay_cfg_change(f->setup))
					r->cfg_busy++;
			}
		} else {
			f->kind = IF_UNLINK;
			f->target = h.u.unlink.unlink_seqnum;
			if ((t = inflight_get(&ds->inflight, f->target)) ==
			    NULL) {
				t = inflight_add(&ds->inflight, f->target);
				t->kind = IF_HELD;
			} else if (t->kind == IF_SUBMIT)
				t->unlinking = 1;
		}
		if (up->devid != dev->gw_devid)
			relay_put_devid(in, fwd, up->devid);
		dev->bytes_up += lay.total;
		cnt.relay_bytes_to_device += lay.total;
		fwd += lay.total;
	}
	relay_forward(in, fwd, &r->up);
	rside_after(&r->down, need);
	if (rside_flush(&r->up) == -1)
		return;
	if (refused)
		rside_flush(&r->down);
}

/*
 * A SET_CONFIGURATION or SET_INTERFACE ended without success (unlinked,
 * or a status): the stub may have applied it all the same, and the map
 * no longer says what the device has.  Under interface verdicts the
 * attachment ends (issue 17, F3).  Returns -1 when it did.
 */
static int
relay_cfg_lost(struct relay *r, const uint8_t *s, const char *how)
{
	const struct device *dev = r->dev;
	char msg[160];
	int i;

	r->cfg_busy--;
	if (!(r->dec->per_iface || r->dec->niface != 0))
		return 0;
	/*
	 * Applied or not, the map is the same: a SET_INTERFACE to the
	 * current setting (Linux sends one to an interface with a single
	 * setting, and many devices stall it), a SET_CONFIGURATION to the
	 * current configuration with every interface at setting 0.
	 */
	if (s[1] == USB_REQ_SET_INTERFACE && s[4] < IFMAP_NINTF &&
	    dev->alt[s[4]] == s[2])
		return 0;
	if (s[1] == USB_REQ_SET_CONFIGURATION && s[2] == dev->cur_config) {
		for (i = 0; i < IFMAP_NINTF && dev->alt[i] == 0; i++)
			;
		if (i == IFMAP_NINTF)
			return 0;
	}
	snprintf(msg, sizeof(msg), "configuration state unknown after a %s "
	    "SET_CONFIGURATION or SET_INTERFACE", how);
	log_warnx("%s: %s: attachment ended", r->dev->busid, msg);
	device_audit_iface_refused(r->dev, r->ds, msg);
	r->end(r->ds, msg);
	return -1;
}

/* exporter → vhci host */
static void
relay_from_up(struct relay *r)
{
	struct dsession *ds = r->ds;
	struct device *dev = r->dev;
	struct evbuffer *in = r->up.in, *out = r->down.out;
	struct usbip_urb_hdr h;
	struct usbip_urb_layout lay;
	struct usbip_req_info req;
	struct inflight *f, *t;
	const char *why;
	uint8_t hb[USBIP_URB_HDR_LEN];
	size_t len, need = 0, fwd = 0;	/* fwd: checked bytes at the head */

	for (;;) {
		if (evbuffer_get_length(out) + fwd >= GW_RELAY_HIWAT) {
			rside_pause(&r->up);
			break;
		}
		len = evbuffer_get_length(in) - fwd;
		if (len < USBIP_URB_HDR_LEN) {
			need = USBIP_URB_HDR_LEN - len;
			break;
		}
		evbuf_copyout_at(in, fwd, hb, sizeof(hb));
		if (usbip_urb_hdr_decode(hb, USBIP_URB_HDR_LEN,
		    USBIP_FROM_SERVER, &h, &why) < 0)
			return relay_malformed(r, "exporter", why);
		f = inflight_get(&ds->inflight, h.seqnum);

		if (h.command == USBIP_RET_UNLINK) {
			if (f == NULL || f->kind != IF_UNLINK) {
				/* vhci only logs these; so do we. */
				log_info("%s: RET_UNLINK for unknown seqnum %u "
				    "dropped", dev->busid, h.seqnum);
				relay_forward(in, fwd, &r->down);
				fwd = 0;
				evbuffer_drain(in, USBIP_URB_HDR_LEN);
				continue;
			}
			/*
			 * Whatever the status, the target is finished: if it
			 * completed first its RET_SUBMIT retired it already;
			 * if the unlink took effect the stub sends no
			 * RET_SUBMIT, and the status is the URB's own
			 * (usually -ECONNRESET).  vhci does the same.
			 */
			if ((t = inflight_get(&ds->inflight, f->target)) != NULL &&
			    t->kind == IF_HELD)
				inflight_del(&ds->inflight, t);
			else if (t != NULL && t->kind == IF_SUBMIT) {
				bool cfg = t->ep == 0 &&
				    relay_cfg_change(t->setup);
				uint8_t setup[8];

				memcpy(setup, t->setup, 8);
				inflight_del(&ds->inflight, t);
				if (cfg && relay_cfg_lost(r, setup,
				    "unlinked") == -1)
					return;
			}
			inflight_del(&ds->inflight, f);
			fwd += USBIP_URB_HDR_LEN;
			dev->bytes_down += USBIP_URB_HDR_LEN;
			cnt.relay_bytes_from_device += USBIP_URB_HDR_LEN;
			continue;
		}

		/* RET_SUBMIT */
		if (f == NULL || f->kind != IF_SUBMIT)
			return relay_malformed(r, "exporter",
			    "RET_SUBMIT for a seqnum not in flight");
		req.direction = f->direction;
		req.length = f->length;
		req.npackets = f->npackets;
		req.iso = f->iso;
		if (usbip_urb_layout(&h, &req, -1, &lay, &why) == -1)
			return relay_malformed(r, "exporter", why);
		if (len < lay.total) {
			need = lay.total - len;
			break;
		}
		if (lay.niso > 0 && relay_iso_check(in, fwd, &h, &lay, req.length,
		    &why) == -1)
			return relay_malformed(r, "exporter", why);
		if (f->ep == 0 && f->direction == USBIP_DIR_IN &&
		    relay_check_descriptor(r, fwd, f, lay.data_len) == -1)
			return;
		{
			struct inflight done = *f;

			/* an unlink names it: held until its RET_UNLINK */
			if (__builtin_expect(f->unlinking, 0))
				f->kind = IF_HELD;
			else
				inflight_del(&ds->inflight, f);
			dev->urbs++;
			dev->bytes_down += lay.total;
			cnt.relay_urbs++;
			cnt.relay_bytes_from_device += lay.total;
			fwd += lay.total;
			if (done.ep == 0 && relay_cfg_change(done.setup) &&
			    h.u.ret_submit.status != 0 &&
			    relay_cfg_lost(r, done.setup, "failed") == -1)
				return;
			if (done.ep == 0 && h.u.ret_submit.status == 0) {
				if (relay_cfg_change(done.setup))
					r->cfg_busy--;
				relay_control_done(dev, &done);
				if (ds->dead)
					return;	/* policy withdrew it */
			}
		}
	}
	relay_forward(in, fwd, &r->down);
	rside_after(&r->up, need);
	if (rside_flush(&r->down) == -1)
		return;
	/* replies retired URBs: the vhci host may send more */
	if (!r->down.reading && !r->refuse_paused &&
	    ds->inflight.count < GW_MAX_INFLIGHT &&
	    evbuffer_get_length(r->up.out) < GW_RELAY_HIWAT / 2) {
		rside_resume(&r->down);
		relay_from_down(r);
	}
}
