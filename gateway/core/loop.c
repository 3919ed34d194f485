/*
 * The loop's shared context (the gw object): settings, the lists the
 * gateway's modules hang their objects on, outgoing connections and
 * deferred frees.  The lowest layer of the daemon core
 * (gateway/LAYERS): it calls nothing above it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/dns.h>
#include <event2/util.h>
#include <event2/event.h>
#include <event2/bufferevent.h>

#include "base/log.h"
#include "base/util.h"
#include "core/loop.h"
#include "tls/tlsshim.h"

struct gw *gw;

static void	gw_beat_cb(evutil_socket_t, short, void *);
static void	gtd_sweep(bool all);
static LIST_HEAD(, gw_tlsdial) gw_tlsdials = LIST_HEAD_INITIALIZER(gw_tlsdials);

void
gw_init(struct event_base *base)
{
	gw = xcalloc(1, sizeof(*gw));
	gw->base = base;
	TAILQ_INIT(&gw->exporters);
	TAILQ_INIT(&gw->sessions);
	gw->started = now_usec();
	gw->poll_ms = 3000;
	gw->probe_timeout_ms = 5000;
	gw->attach_wait_ms = 0;
	gw->relay_stall_ms = 30000;
	gw->max_sessions = GW_MAX_DOWNSTREAM;
	gw->max_sessions_per_host = GW_MAX_DOWNSTREAM;
	gw->max_devices_per_exporter = 64;
	gw->max_new_devices_per_minute = 64;
	gw->max_probes = 64;
	gw->max_probes_per_exporter = 8;
	gw->dns = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
	    EVDNS_BASE_DISABLE_WHEN_INACTIVE);
	if (gw->dns == NULL)
		gw->dns = evdns_base_new(base, 0);
	gw->beat_ev = event_new(base, -1, EV_PERSIST, gw_beat_cb, NULL);
	if (gw->beat_ev != NULL) {
		struct timeval tv = { 0, GW_BEAT_MS * 1000 };

		gw->beat_at = now_usec();
		event_add(gw->beat_ev, &tv);
	}
}

/*
 * The loop's own lateness: a 100 ms heartbeat that finds more than
 * GW_STALL_MIN_MS since its last run adds the excess to gw->stalled_ms.
 * A deadline that spans a stalled gateway (stopped, swapped out, a long
 * callback) is the gateway's lateness, not the peer's: see
 * upstream.c's probe deadline.  Expired timers run in expiry order, so
 * the heartbeat (due first) has counted a stop before any deadline that
 * expired during it runs.
 */
static void
gw_beat_cb(evutil_socket_t fd, short what, void *arg)
{
	uint64_t now = now_usec(), gap = (now - gw->beat_at) / 1000;

	if (gap > GW_BEAT_MS + GW_STALL_MIN_MS)
		gw->stalled_ms += gap - GW_BEAT_MS;
	gw->beat_at = now;
	if (!LIST_EMPTY(&gw_tlsdials))
		gtd_sweep(false);
}

/*
 * Start a non-blocking connection to host:port.  The caller sets
 * timeouts; connection success or failure arrives at ecb.
 */
int
gw_connect(const char *host, uint16_t port, struct bufferevent **bevp,
    bufferevent_data_cb rcb, bufferevent_event_cb ecb, void *arg)
{
	struct bufferevent *bev;
	struct sockaddr_storage ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	int r;

	bev = bufferevent_socket_new(gw->base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL)
		return -1;
	bufferevent_setcb(bev, rcb, NULL, ecb, arg);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	*bevp = bev;
	/*
	 * A numeric address (the usual exporter) is connected to at once:
	 * evdns_getaddrinfo() costs 8 % of a claim storm's time for an
	 * answer it need not look up.
	 */
	memset(&ss, 0, sizeof(ss));
	if (evutil_inet_pton(AF_INET, host, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		r = bufferevent_socket_connect(bev, (struct sockaddr *)&ss,
		    sizeof(*sin));
	} else if (evutil_inet_pton(AF_INET6, host, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		r = bufferevent_socket_connect(bev, (struct sockaddr *)&ss,
		    sizeof(*sin6));
	} else
		r = bufferevent_socket_connect_hostname(bev, gw->dns,
		    AF_UNSPEC, host, port);
	if (r == -1) {
		/* ecb has not run; the caller frees nothing else */
		bufferevent_free(bev);
		*bevp = NULL;
		return -1;
	}
	return 0;
}

/* ---- gw_connect_tls -------------------------------------------------- */

/*
 * One outgoing TLS connection in its handshake.  It holds a reference to
 * the caller's bev: a caller that frees it meanwhile leaves its callbacks
 * NULL (bufferevent_free clears them), which is how the end of the
 * handshake knows nobody waits for it.
 */
struct gw_tlsdial {
	LIST_ENTRY(gw_tlsdial)	 entry;
	struct bufferevent	*bev;
	bufferevent_data_cb	 rcb;
	bufferevent_event_cb	 ecb;
	void			*arg;
	char			 name[64];
	char			 peer[280];
	unsigned		 timeout_ms;
	struct tlsshim		*sh;
};

static const char *gw_tls_why;
static const struct tlsid_peer *gw_tls_who;

const char *
gw_tls_error(void)
{
	return gw_tls_why;
}

const struct tlsid_peer *
gw_tls_peer(void)
{
	return gw_tls_who;
}

/* The caller's bev, or NULL if it was freed meanwhile. */
static struct bufferevent *
gtd_caller(struct gw_tlsdial *d)
{
	bufferevent_event_cb ecb = NULL;

	bufferevent_getcb(d->bev, NULL, NULL, &ecb, NULL);
	return ecb == NULL ? NULL : d->bev;
}

static void
gtd_free(struct gw_tlsdial *d)
{
	LIST_REMOVE(d, entry);
	tlsshim_free(d->sh);
	bufferevent_decref(d->bev);
	free(d);
}

/*
 * From the heartbeat: dials whose caller freed its bev (a timeout, the
 * exporter removed) end now, not at their own deadline.
 */
static void
gtd_sweep(bool all)
{
	struct gw_tlsdial *d, *next;

	for (d = LIST_FIRST(&gw_tlsdials); d != NULL; d = next) {
		next = LIST_NEXT(d, entry);
		if (all || gtd_caller(d) == NULL)
			gtd_free(d);
	}
}

/* The handshake or the check failed: the caller's ecb, with why. */
static void
gtd_fail(struct gw_tlsdial *d, const char *why)
{
	struct bufferevent *bev = gtd_caller(d);

	if (bev != NULL) {
		bufferevent_setcb(bev, d->rcb, NULL, d->ecb, d->arg);
		gw_tls_why = why;
		d->ecb(bev, BEV_EVENT_ERROR, d->arg);
		gw_tls_why = NULL;
	} else
		log_debug("%s: TLS handshake of an abandoned connection: %s",
		    d->peer, why);
	gtd_free(d);
}

static void
gtd_shim_fail(const char *why, int audit, void *arg)
{
	struct gw_tlsdial *d = arg;
	char msg[512];

	(void)audit;
	d->sh = NULL;		/* freed by tlsshim after this */
	if (strncmp(why, "nothing sent", 12) == 0)
		snprintf(msg, sizeof(msg), "no TLS handshake from %s within "
		    "%u ms (a plaintext usbipd?)", d->peer, d->timeout_ms);
	else if (strcmp(why, "plaintext on a TLS listener") == 0)
		snprintf(msg, sizeof(msg), "%s answered in plaintext, not "
		    "TLS", d->peer);
	else
		snprintf(msg, sizeof(msg), "TLS with %s refused: %s", d->peer,
		    why);
	gtd_fail(d, msg);
}

static void
gtd_ready(int fd, const struct tlsid_peer *peer,
    const struct tlsshim_pairing *pairing, void *arg)
{
	struct gw_tlsdial *d = arg;
	struct bufferevent *bev = gtd_caller(d);
	char msg[512];

	d->sh = NULL;		/* a pump now: it owns itself */
	(void)pairing;		/* its context has no pairing: always NULL */
	if (bev == NULL) {
		close(fd);	/* the pump sees the end and closes TLS */
		gtd_free(d);
		return;
	}
	if (peer->role != TLSID_ROLE_AGENT) {
		close(fd);
		snprintf(msg, sizeof(msg), "TLS with %s refused: certificate "
		    "CN=%s is a %s's, not an agent's", d->peer, peer->name,
		    tlsid_role_name(peer->role));
		gtd_fail(d, msg);
		return;
	}
	if (strcmp(peer->name, d->name) != 0) {
		close(fd);
		snprintf(msg, sizeof(msg), "TLS with %s refused: certificate "
		    "CN=%s, expected %s", d->peer, peer->name, d->name);
		gtd_fail(d, msg);
		return;
	}
	log_debug("%s: TLS, certificate CN=%s fingerprint %.16s...", d->peer,
	    peer->name, peer->fpr);
	bufferevent_setfd(bev, fd);
	bufferevent_setcb(bev, d->rcb, NULL, d->ecb, d->arg);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	gw_tls_who = peer;
	d->ecb(bev, BEV_EVENT_CONNECTED, d->arg);
	gw_tls_who = NULL;
	gtd_free(d);
}

/* The TCP connection: the handshake on its socket, the bev waits. */
static void
gtd_event(struct bufferevent *bev, short what, void *arg)
{
	struct gw_tlsdial *d = arg;
	evutil_socket_t fd;

	if (!(what & BEV_EVENT_CONNECTED)) {
		bufferevent_setcb(bev, d->rcb, NULL, d->ecb, d->arg);
		d->ecb(bev, what, d->arg);
		gtd_free(d);
		return;
	}
	fd = bufferevent_getfd(bev);
	gw_socket_tune(fd);
	gw_socket_keepalive(fd);
	bufferevent_disable(bev, EV_READ | EV_WRITE);
	bufferevent_setfd(bev, -1);	/* the shim owns fd now */
	d->sh = tlsshim_start(gw->base, gw->tls_ctx, fd, 0, d->timeout_ms,
	    gtd_ready, gtd_shim_fail, d);
	if (d->sh == NULL)
		gtd_fail(d, "TLS: out of memory or descriptors");
}

int
gw_connect_tls(const char *host, uint16_t port, const char *name,
    unsigned timeout_ms, struct bufferevent **bevp, bufferevent_data_cb rcb,
    bufferevent_event_cb ecb, void *arg)
{
	struct gw_tlsdial *d;

	if (gw->tls_ctx == NULL) {
		log_warnx("%s:%u: TLS required but no tls-dir is set", host,
		    port);
		return -1;
	}
	d = xcalloc(1, sizeof(*d));
	d->rcb = rcb;
	d->ecb = ecb;
	d->arg = arg;
	d->timeout_ms = timeout_ms;
	usbgw_strlcpy(d->name, name, sizeof(d->name));
	snprintf(d->peer, sizeof(d->peer), "%.255s:%u", host, port);
	if (gw_connect(host, port, bevp, NULL, gtd_event, d) == -1) {
		free(d);
		return -1;
	}
	d->bev = *bevp;
	bufferevent_incref(d->bev);
	LIST_INSERT_HEAD(&gw_tlsdials, d, entry);
	return 0;
}

/*
 * Per-socket settings for the relay: no Nagle delay (a CMD_SUBMIT for an
 * IN transfer is a lone 48-byte header that must leave at once).
 */
void
gw_socket_tune(evutil_socket_t fd)
{
	int one = 1;

	if (fd >= 0)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/*
 * An idle claim carries no traffic, so only keep-alive finds an exporter
 * host that vanished (power, cable): fd_keepalive (util.c).
 */
void
gw_socket_keepalive(evutil_socket_t fd)
{
	fd_keepalive(fd);
}

/*
 * Has the socket something for us that the loop has not handled yet?
 * EV_READ: bytes waiting to be read.  EV_WRITE: room to write (a
 * connect that completed, or a peer that read what we sent).
 */
bool
gw_fd_progress(evutil_socket_t fd, short what)
{
	struct pollfd p = { .fd = fd, .events = 0 };
	int q = 0;

	if (fd < 0)
		return false;
	if ((what & EV_READ) && ioctl(fd, FIONREAD, &q) == 0 && q > 0)
		return true;
	if (!(what & EV_WRITE))
		return false;
	p.events = POLLOUT;
	return poll(&p, 1, 0) == 1 && (p.revents & POLLOUT) != 0;
}

/*
 * A bufferevent reported BEV_EVENT_TIMEOUT: was it the peer, or the
 * gateway?  When the process was stopped or busy past the deadline,
 * libevent runs the expired timeout on waking, possibly before the read
 * event of a reply that has sat in the socket all along.  A timeout is
 * only a timeout if nothing arrived: when the socket has progress
 * waiting (bytes to read on a read timeout; room to write, or the
 * connect done, on a write timeout) the direction libevent disabled is
 * enabled again, which re-arms its timeout, and true is returned: the
 * caller goes on waiting.  The peer's own slowness is still caught: a
 * peer that sends nothing leaves nothing to find.
 */
bool
gw_timeout_spurious(struct bufferevent *bev, short what)
{
	evutil_socket_t fd = bufferevent_getfd(bev);
	short dir = 0;

	if (!(what & BEV_EVENT_TIMEOUT))
		return false;
	if ((what & BEV_EVENT_READING) && gw_fd_progress(fd, EV_READ))
		dir |= EV_READ;
	if ((what & BEV_EVENT_WRITING) && gw_fd_progress(fd, EV_WRITE))
		dir |= EV_WRITE;
	if (dir == 0)
		return false;
	log_debug("fd %d: timeout with %s waiting: the gateway was slow, "
	    "not the peer; waiting on", (int)fd,
	    (dir & EV_READ) ? "bytes" : "the connection writable");
	bufferevent_enable(bev, dir);
	return true;
}

struct gw_deferred {
	void	(*fn)(void *);
	void	*arg;
};

static void
gw_deferred_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gw_deferred *d = arg;

	d->fn(d->arg);
	free(d);
}

/* Run fn(arg) from the loop, after the current callback returns. */
void
gw_defer(void (*fn)(void *), void *arg)
{
	struct gw_deferred *d = xmalloc(sizeof(*d));
	struct timeval tv = { 0, 0 };

	d->fn = fn;
	d->arg = arg;
	if (event_base_once(gw->base, -1, EV_TIMEOUT, gw_deferred_cb, d,
	    &tv) == -1)
		fatalx("event_base_once");
}

void
gw_free(void)
{
	gtd_sweep(true);
	SSL_CTX_free(gw->tls_ctx);
	if (gw->beat_ev != NULL)
		event_free(gw->beat_ev);
	if (gw->dns != NULL)
		evdns_base_free(gw->dns, 0);
	free(gw);
	gw = NULL;
}

