/*
 * Follow subscriptions at the gateway (protocol.md 1.10.8).
 *
 * A vhci host (usbgw-attach --follow) sends OP_REQ_FOLLOW on a USB/IP
 * listener, plain or TLS, instead of an op request.  The session stays
 * open in state DS_FOLLOW; the gateway sends the list of busids that are
 * authorized for that host now, then AUTHORIZED / WITHDRAWN whenever
 * that changes.  Changes come from the core's own event path: device.c
 * calls its observers (device_observe) each time a decision is applied
 * (an approval, a revoke, a rule change, an approval's expiry, a probe,
 * a device gone or freed), and this module re-asks, for that device and
 * each subscription, the one question an import asks:
 * device_allowed_for() over the session's host identity (its
 * certificate's name, or its address and verified DNS name).  There is
 * no second copy of the rule here, and no polling.
 *
 * The list is a hint, never a grant: the host still imports through the
 * normal path, where the gateway decides again.
 *
 * Bounds: FOLLOW_PER_HOST subscriptions per host identity; each is a
 * session (max-sessions); at most FLP_MAX_DEVICES busids announced to
 * one subscription; more than FOLLOW_OUT_MAX bytes queued, or no byte
 * written for FOLLOW_WRITE_TIMEOUT_S, closes a host that does not read;
 * the host may send nothing but one PONG per PING (anything else closes
 * the subscription, audited as malformed), and three heartbeats without
 * its PONG close it too.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "base/hostlimit.h"
#include "base/log.h"
#include "base/util.h"
#include "core/device.h"
#include "core/exporter.h"
#include "core/follow.h"
#include "core/loop.h"
#include "core/relay.h"
#include "core/session.h"
#include "core/store.h"
#include "core/upstream.h"
#include "proto/followproto.h"

struct follower {
	TAILQ_ENTRY(follower)	 entry;
	struct dsession		*ds;
	char			 key[TLSID_NAME_MAX + HOSTLIMIT_KEY_MAX + 8];
	struct event		*ping_ev;
	uint32_t		 seq_out;	/* last sent */
	uint32_t		 seq_in;	/* last received */
	uint64_t		 ping_echo;	/* the PING awaiting its PONG */
	bool			 ping_out;
	unsigned		 missed;	/* heartbeats without a PONG */
	bool			 capped;	/* FLP_MAX_DEVICES reached: logged */
	char			(*busid)[USBIP_BUSID_SIZE];	/* announced */
	size_t			 n, cap;
};

static TAILQ_HEAD(, follower) followers = TAILQ_HEAD_INITIALIZER(followers);

static void	follow_read(struct bufferevent *, void *);
static void	follow_event(struct bufferevent *, short, void *);

bool
follow_authorized(struct device *dev, const struct dsession *ds)
{
	if (dev->dead || !dev->probed)
		return false;
	switch (dev->state) {
	case DEV_AUTHORIZED:
	case DEV_ATTACHED:
	case DEV_PENDING:	/* a rule or approval for this host only */
	case DEV_BLOCKED:
		/* exactly what ds_import() asks before it grants */
		return device_allowed_for(dev, ds);
	default:
		return false;
	}
}

/* The host's identity for the per-host bound: certificate or address. */
static void
follow_key(const struct dsession *ds, char *key, size_t len)
{
	if (ds->tls)
		snprintf(key, len, "cert:%s", ds->cert.name);
	else
		snprintf(key, len, "addr:%s", ds->hkey);
}

static ssize_t
set_find(const struct follower *f, const char *busid)
{
	size_t i;

	for (i = 0; i < f->n; i++)
		if (strcmp(f->busid[i], busid) == 0)
			return (ssize_t)i;
	return -1;
}

/* Send one message; false if the session was closed (a slow host). */
static bool
follow_send(struct follower *f, struct flp_msg *m)
{
	struct dsession *ds = f->ds;
	uint8_t buf[FLP_MSG_MAX];
	size_t n, queued;

	m->seq = ++f->seq_out;
	n = flp_msg_encode(buf, m);
	bufferevent_write(ds->bev, buf, n);
	queued = evbuffer_get_length(bufferevent_get_output(ds->bev));
	if (queued > FOLLOW_OUT_MAX) {
		char why[128];

		snprintf(why, sizeof(why), "follow: the host does not read "
		    "(%zu bytes queued)", queued);
		dsession_close(ds, why);
		return false;
	}
	return true;
}

static bool
follow_announce(struct follower *f, const char *busid)
{
	struct flp_msg m = { .type = FLP_AUTHORIZED };

	if (f->n == FLP_MAX_DEVICES) {
		if (!f->capped)
			log_warnx("session %s: follow: more than %d devices "
			    "authorized for this host; the rest not announced",
			    f->ds->peer, FLP_MAX_DEVICES);
		f->capped = true;
		return true;
	}
	if (f->n == f->cap) {
		f->cap = f->cap == 0 ? 8 : f->cap * 2;
		f->busid = xreallocarray(f->busid, f->cap, sizeof(*f->busid));
	}
	usbgw_strlcpy(f->busid[f->n++], busid, USBIP_BUSID_SIZE);
	usbgw_strlcpy(m.busid, busid, sizeof(m.busid));
	log_debug("session %s: follow: %s authorized", f->ds->peer, busid);
	return follow_send(f, &m);
}

static bool
follow_withdraw(struct follower *f, size_t i, uint32_t reason)
{
	struct flp_msg m = { .type = FLP_WITHDRAWN, .reason = reason };

	usbgw_strlcpy(m.busid, f->busid[i], sizeof(m.busid));
	f->n--;
	if (i != f->n)
		memcpy(f->busid[i], f->busid[f->n], USBIP_BUSID_SIZE);
	log_debug("session %s: follow: %s withdrawn (%s)", f->ds->peer,
	    m.busid, flp_reason_name(reason));
	return follow_send(f, &m);
}

/* A decision was applied to dev: tell every subscriber what changed. */
static void
follow_decided(struct device *dev)
{
	struct follower *f, *next;
	ssize_t i;
	bool now;

	for (f = TAILQ_FIRST(&followers); f != NULL; f = next) {
		next = TAILQ_NEXT(f, entry);
		now = follow_authorized(dev, f->ds);
		i = set_find(f, dev->busid);
		if (now && i == -1)
			follow_announce(f, dev->busid);
		else if (!now && i != -1)
			follow_withdraw(f, (size_t)i, dev->state == DEV_GONE ?
			    FLP_WHY_GONE : FLP_WHY_NOT_AUTHORIZED);
	}
}

static void
follow_freed(struct device *dev)
{
	struct follower *f, *next;
	ssize_t i;

	for (f = TAILQ_FIRST(&followers); f != NULL; f = next) {
		next = TAILQ_NEXT(f, entry);
		if ((i = set_find(f, dev->busid)) != -1)
			follow_withdraw(f, (size_t)i, FLP_WHY_GONE);
	}
}

void
follow_init(void)
{
	static const struct device_observer obs = {
		.decided = follow_decided,
		.freed = follow_freed,
	};

	device_observe(&obs);
}

static void
follow_ping(evutil_socket_t fd, short what, void *arg)
{
	struct follower *f = arg;
	struct flp_msg m = { .type = FLP_PING };
	struct timeval tv = { FOLLOW_HEARTBEAT_S, 0 };

	if (f->ping_out) {
		/* one PING outstanding at a time: its PONG is awaited */
		if (++f->missed >= 3)
			dsession_close(f->ds, "follow: no PONG for three "
			    "heartbeats");
		else
			evtimer_add(f->ping_ev, &tv);
		return;
	}
	f->ping_echo = now_usec();
	f->ping_out = true;
	m.echo = f->ping_echo;
	if (follow_send(f, &m))
		evtimer_add(f->ping_ev, &tv);
}

/* A malformed message from the host: closed, audited within its budget. */
static void
follow_malformed(struct follower *f, const char *why)
{
	struct dsession *ds = f->ds;
	char msg[160];

	snprintf(msg, sizeof(msg), "follow: malformed message: %s", why);
	if (hostlimit_audit(ds->host, HL_MALFORMED))
		store_audit("malformed", NULL, ds->peer, msg);
	dsession_close(ds, msg);
}

static void
follow_read(struct bufferevent *bev, void *arg)
{
	struct dsession *ds = arg;
	struct follower *f = ds->follow;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct flp_msg m;
	const char *why = NULL;
	size_t len;
	uint8_t *p;
	int r;

	while (!ds->dead && (len = evbuffer_get_length(in)) > 0) {
		p = evbuffer_pullup(in, len < FLP_MSG_MAX ? -1 : FLP_MSG_MAX);
		r = flp_msg_decode(p, len, FLP_FROM_HOST, &m, &why);
		if (r == FLP_NEED_MORE)
			return;
		if (r < 0)
			return follow_malformed(f, why);
		if (m.seq != f->seq_in + 1)
			return follow_malformed(f, "sequence number out of "
			    "order");
		if (!f->ping_out || m.echo != f->ping_echo)
			return follow_malformed(f, "PONG without its PING");
		evbuffer_drain(in, (size_t)r);
		f->seq_in = m.seq;
		f->ping_out = false;
		f->missed = 0;
	}
}

static void
follow_event(struct bufferevent *bev, short what, void *arg)
{
	struct dsession *ds = arg;

	if (what & BEV_EVENT_TIMEOUT)
		dsession_close(ds, "follow: the host does not read (write "
		    "timeout)");
	else if (what & BEV_EVENT_EOF)
		dsession_close(ds, "follow: the host closed");
	else
		dsession_close(ds, "follow: connection error");
}

/* Refuse with ST_NA: the reply, then the close (after it is written). */
static void
follow_refuse(struct dsession *ds, const char *why)
{
	uint8_t rep[FLP_HELLO_MAX];
	size_t n = flp_rep_encode(rep, ST_NA, 0, NULL);

	(ds->quiet ? log_debug : log_info)("session %s: follow refused: %s",
	    ds->peer, why);
	dsession_reply_and_close(ds, rep, n);
}

static unsigned
follow_count(const char *key)
{
	struct follower *f;
	unsigned n = 0;

	TAILQ_FOREACH(f, &followers, entry)
		if (strcmp(f->key, key) == 0)
			n++;
	return n;
}

/* The subscription starts: the reply, then the list as it is now. */
static void
follow_start(struct dsession *ds, const struct flp_hello *h)
{
	struct follower *f;
	struct exporter *exp;
	struct device *dev;
	struct flp_msg m;
	struct timeval wt = { FOLLOW_WRITE_TIMEOUT_S, 0 };
	struct timeval hb = { FOLLOW_HEARTBEAT_S, 0 };
	uint8_t rep[FLP_HELLO_MAX];
	const char *name;
	char key[sizeof(f->key)];
	size_t n, count = 0;

	follow_key(ds, key, sizeof(key));
	if (follow_count(key) >= FOLLOW_PER_HOST) {
		char why[96];

		snprintf(why, sizeof(why), "%d subscriptions of this host "
		    "already", FOLLOW_PER_HOST);
		if (hostlimit_audit(ds->host, HL_IMPORT_REFUSED))
			store_audit("follow-refused", NULL, ds->peer, why);
		else
			ds->quiet = true;
		return follow_refuse(ds, why);
	}
	f = xcalloc(1, sizeof(*f));
	f->ds = ds;
	usbgw_strlcpy(f->key, key, sizeof(f->key));
	f->ping_ev = evtimer_new(gw->base, follow_ping, f);
	ds->follow = f;
	TAILQ_INSERT_TAIL(&followers, f, entry);
	dsession_set_state(ds, DS_FOLLOW, "subscribed");

	name = ds->host_name[0] != '\0' && flp_host_valid(ds->host_name) ?
	    ds->host_name : ds->host;
	n = flp_rep_encode(rep, ST_OK, FOLLOW_HEARTBEAT_S, name);
	bufferevent_write(ds->bev, rep, n);
	bufferevent_setcb(ds->bev, follow_read, NULL, follow_event, ds);
	bufferevent_setwatermark(ds->bev, EV_READ, 0, FLP_MSG_MAX);
	bufferevent_set_timeouts(ds->bev, NULL, &wt);
	evtimer_add(f->ping_ev, &hb);

	TAILQ_FOREACH(exp, &gw->exporters, entry)
		TAILQ_FOREACH(dev, &exp->devices, entry)
			if (follow_authorized(dev, ds))
				count++;
	if (count > FLP_MAX_DEVICES)
		count = FLP_MAX_DEVICES;
	log_info("session %s: follow: subscribed as %s (caps %#x), %zu "
	    "device%s authorized", ds->peer, name, h->caps, count,
	    count == 1 ? "" : "s");
	memset(&m, 0, sizeof(m));
	m.type = FLP_LIST_BEGIN;
	m.count = (uint32_t)count;
	if (!follow_send(f, &m))
		return;
	TAILQ_FOREACH(exp, &gw->exporters, entry)
		TAILQ_FOREACH(dev, &exp->devices, entry)
			if (f->n < count && follow_authorized(dev, ds) &&
			    !follow_announce(f, dev->busid))
				return;
	memset(&m, 0, sizeof(m));
	m.type = FLP_LIST_END;
	follow_send(f, &m);
	/* anything the host sent after its hello is judged now */
	follow_read(ds->bev, ds);
}

void
follow_hello(struct dsession *ds)
{
	struct evbuffer *in = bufferevent_get_input(ds->bev);
	struct flp_hello h;
	const char *why = NULL;
	size_t len = evbuffer_get_length(in);
	uint8_t *p;
	int r;

	p = evbuffer_pullup(in, len < FLP_HELLO_MAX ? -1 : FLP_HELLO_MAX);
	r = flp_hello_decode(p, len, USBIP_FROM_CLIENT, &h, &why);
	if (r == FLP_NEED_MORE) {
		if (len >= FLP_HELLO_MAX)	/* cannot happen: bounded */
			dsession_close(ds, "follow: hello too long");
		return;
	}
	if (r < 0) {
		char msg[160];

		snprintf(msg, sizeof(msg), "malformed follow hello: %s", why);
		if (hostlimit_audit(ds->host, HL_MALFORMED))
			store_audit("malformed", NULL, ds->peer, msg);
		dsession_close(ds, msg);
		return;
	}
	evbuffer_drain(in, (size_t)r);
	if (ds->op_ev != NULL)
		event_del(ds->op_ev);
	bufferevent_set_timeouts(ds->bev, NULL, NULL);
	if (h.ext_version != FLP_EXT_VERSION) {
		char why2[64];

		snprintf(why2, sizeof(why2), "follow version %u (this gateway "
		    "speaks %d)", h.ext_version, FLP_EXT_VERSION);
		return follow_refuse(ds, why2);
	}
	follow_start(ds, &h);
}

void
follow_end(struct dsession *ds)
{
	struct follower *f = ds->follow;

	if (f == NULL)
		return;
	ds->follow = NULL;
	TAILQ_REMOVE(&followers, f, entry);
	if (f->ping_ev != NULL)
		event_free(f->ping_ev);
	free(f->busid);
	free(f);
}
