/*
 * usbgw-agent's control connections (protocol.md 1.9.4); the contract
 * is in ctlconn.h.
 *
 * A control connection is a struct ctl with an explicit state
 * (CTL_IDLE: dial-out waiting to retry, CTL_RESOLVING, CTL_CONNECTING,
 * CTL_HELLO, CTL_UP) and one teardown, ctl_close().  The dial-out one is
 * a single static object that, when it closes, goes on to the next
 * address or gateway line (dial_closed); listen-mode ones are allocated
 * per accepted CONTROL, listed in cc.listen, and freed from the loop
 * after their teardown (a bufferevent callback up the stack may still
 * hold them).  What happens once a connection is up (snapshot, pushes,
 * PING/PONG, BYE) is the same code for both.
 *
 * A dial-back is a small object of its own: a plain non-blocking socket
 * (no bufferevent, which could read the gateway's OP_REQ_IMPORT past the
 * 16-byte reply and lose it), the DIALBACK written, exactly the reply
 * read, then the socket handed over.
 *
 * Nothing here blocks the loop: a gateway given by name is resolved with
 * evdns (the 5 s connect deadline covers the lookup), a numeric address
 * is used as it is.
 */
#include <sys/queue.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>

#include "proto/agentproto.h"
#include "ctlconn.h"
#include "export.h"
#include "base/log.h"
#include "tls/tlsshim.h"
#include "base/util.h"

#define CC_TICK_S	1
#define CC_MAX_GATEWAYS	8
#define CC_LABEL_MAX	300

enum ctl_state {
	CTL_IDLE, CTL_RESOLVING, CTL_CONNECTING, CTL_HELLO, CTL_UP, CTL_DEAD
};

struct ctl {
	TAILQ_ENTRY(ctl)	 entry;		/* cc.listen, then cc.dead */
	bool			 listen;	/* accepted, not dialled */
	enum ctl_state		 state;
	struct bufferevent	*bev;
	struct tlsshim		*sh;		/* dial-out: TLS handshake */
	bool			 tls;		/* dial-out over TLS */
	bool			 tls_done;	/* its handshake passed */
	char			 label[CC_LABEL_MAX]; /* gateway line / peer */
	char			 addr[64];	/* listen: the peer's address */
	uint32_t		 seq_in, seq_out;
	uint64_t		 up_since, last_rx, last_tx, deadline; /* ms */
	bool			 refusing;	/* ST_NA queued: close once out */
	size_t			 snapshot_len;	/* allowed over the output cap */
	uint64_t		 rate_start;	/* ms: this second's start */
	unsigned		 rate_n;	/* messages read in it */
	bool			 paused;	/* reading, till resume_ev */
	struct event		*resume_ev;
};

TAILQ_HEAD(ctlq, ctl);

static struct {
	struct event_base	*base;
	char			 name[AGP_NAME_SIZE];
	ctlconn_foreach_fn	 foreach;
	ctlconn_adopt_fn	 adopt;
	bool			 stopping;
	struct event		*tick_ev;
	/* dial-out */
	struct net_addr	 gw[CC_MAX_GATEWAYS];
	size_t			 ngw, cur;	/* the gateway tried now */
	struct ctl		 dial;
	struct sockaddr_storage	 peer;		/* the control's address */
	socklen_t		 peerlen;
	unsigned		 backoff_ms;
	struct event		*retry_ev;
	struct evdns_base	*dns;
	struct evdns_getaddrinfo_request *dns_req;
	struct evutil_addrinfo	*ai, *ai_next;	/* a name's addresses */
	/* listen mode */
	struct ctlq		 listen;
	struct ctlq		 dead;
	struct event		*reaper;
	/* dial-backs in flight (at most CTLCONN_MAX_DIALBACKS) */
	TAILQ_HEAD(, dialback)	 dialbacks;
	unsigned		 ndialbacks;
} cc;

struct dialback {
	TAILQ_ENTRY(dialback) entry;		/* cc.dialbacks */
	int		 fd;
	bool		 tls;		/* its control connection is TLS */
	struct tlsshim	*sh;		/* the handshake, once connected */
	struct event	*ev;
	uint8_t		 out[AGP_HELLO_MAX];
	size_t		 outlen, outoff;
	uint8_t		 in[AGP_HELLO_HDR_LEN];
	size_t		 inlen;
	char		 busid[USBIP_BUSID_SIZE];
	char		 gateway[CC_LABEL_MAX];
	/* the control connection's address when the gateway asked: the
	 * dial-out one may have failed over to another gateway since */
	struct sockaddr_storage peer;
	socklen_t	 peerlen;
	uint64_t	 deadline;
};

/*
 * TLS (protocol.md 1.10.9), kept apart from cc (ctlconn_init clears
 * it): the agent's client context, which gateway lines dial TLS.
 */
static struct {
	SSL_CTX		*ctx;
	bool		 gw[CC_MAX_GATEWAYS];
} cct;

static void	dial_next(void);
static void	dial_closed(const char *why, bool was_up, uint64_t up_ms);
static void	ctl_read(struct bufferevent *, void *);

static uint64_t
now_ms(void)
{
	return now_usec() / 1000;
}

/* ---- the back-off, pure ------------------------------------------------- */

unsigned
ctlconn_backoff_next(unsigned prev_ms)
{
	if (prev_ms < CTLCONN_BACKOFF_MIN_MS)
		return CTLCONN_BACKOFF_MIN_MS;
	if (prev_ms >= CTLCONN_BACKOFF_MAX_MS / 2)
		return CTLCONN_BACKOFF_MAX_MS;
	return prev_ms * 2;
}

unsigned
ctlconn_backoff_after_up(unsigned cur_ms, uint64_t up_ms)
{
	return up_ms >= CTLCONN_UP_RESET_S * 1000ull ? 0 : cur_ms;
}

unsigned
ctlconn_backoff_delay(unsigned base_ms)
{
	return usbgw_jitter(base_ms, CTLCONN_BACKOFF_JITTER);
}

/* ---- one control connection, either way --------------------------------- */

static const char *
ctl_state_name(enum ctl_state st)
{
	static const char *const names[] = { "idle", "resolving",
	    "connecting", "hello", "up", "dead" };

	return (unsigned)st < nitems(names) ? names[st] : "?";
}

static void
ctl_set_state(struct ctl *x, enum ctl_state st, const char *why)
{
	if (x->state == st)
		return;
	log_debug("control %s: %s -> %s%s%s", x->label,
	    ctl_state_name(x->state), ctl_state_name(st), why ? ": " : "",
	    why ? why : "");
	x->state = st;
}

static void	ctl_close(struct ctl *, const char *why);

/*
 * Queue one message; false if the connection is not up, or closed now
 * because the gateway leaves more than CTLCONN_MAX_OUTPUT unread (over
 * the connection's own snapshot, which is bounded by USBIP_MAX_NDEV and
 * queued at once).  A gateway that sends and never reads costs the agent
 * that much memory and no more.
 */
static bool
ctl_send(struct ctl *x, struct agp_msg *m)
{
	uint8_t buf[AGP_MSG_MAX];
	size_t n;

	if (x->state != CTL_UP || x->bev == NULL)
		return false;
	if (evbuffer_get_length(bufferevent_get_output(x->bev)) >
	    CTLCONN_MAX_OUTPUT + x->snapshot_len) {
		ctl_close(x, "the gateway does not read its control "
		    "connection (more than 64 KiB unsent)");
		return false;
	}
	m->seq = ++x->seq_out;
	n = agp_msg_encode(buf, m);
	bufferevent_write(x->bev, buf, n);
	x->last_tx = now_ms();
	return true;
}

/* Reading resumes after a second that had CTLCONN_MAX_RATE messages. */

static void
ctl_resume(evutil_socket_t fd, short what, void *arg)
{
	struct ctl *x = arg;

	if (!x->paused || x->bev == NULL || x->state != CTL_UP)
		return;
	x->paused = false;
	bufferevent_enable(x->bev, EV_READ);
	ctl_read(x->bev, x);
}

/*
 * At most CTLCONN_MAX_RATE messages a second are read from a gateway
 * (as the gateway reads from an agent): beyond them the input waits in
 * the kernel, and what the agent owes in answers (PONG, OPEN_FAILED) is
 * bounded by the same rate.
 */
static bool
ctl_rate_ok(struct ctl *x)
{
	uint64_t now = now_ms(), left;
	struct timeval tv;

	if (now - x->rate_start >= 1000) {
		x->rate_start = now;
		x->rate_n = 0;
	}
	if (x->rate_n < CTLCONN_MAX_RATE) {
		x->rate_n++;
		return true;
	}
	left = 1000 - (now - x->rate_start);
	tv.tv_sec = 0;
	tv.tv_usec = (suseconds_t)(left * 1000);
	x->paused = true;
	bufferevent_disable(x->bev, EV_READ);
	evtimer_add(x->resume_ev, &tv);
	log_debug("control %s: %u messages this second, reading paused",
	    x->label, CTLCONN_MAX_RATE);
	return false;
}

static void
reap_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ctl *x;

	while ((x = TAILQ_FIRST(&cc.dead)) != NULL) {
		TAILQ_REMOVE(&cc.dead, x, entry);
		if (x->resume_ev != NULL)
			event_free(x->resume_ev);
		free(x);
	}
}

/*
 * The one teardown.  A listen-mode connection is gone (freed from the
 * loop); the dial-out one goes on with the next address or gateway.
 */
static void
ctl_close(struct ctl *x, const char *why)
{
	char r[256];
	bool was_up = x->state == CTL_UP;
	uint64_t up_ms = was_up ? now_ms() - x->up_since : 0;

	if (x->state == CTL_DEAD || (!x->listen && x->state == CTL_IDLE))
		return;
	tlsshim_free(x->sh);
	x->sh = NULL;
	if (x->bev != NULL) {
		bufferevent_setcb(x->bev, NULL, NULL, NULL, NULL);
		bufferevent_free(x->bev);
		x->bev = NULL;
	}
	if (x->resume_ev != NULL)
		evtimer_del(x->resume_ev);
	x->paused = false;
	x->snapshot_len = 0;
	log_escape(r, sizeof(r), why, strlen(why));
	if (was_up)
		export_audit("control %s=%s state=down reason=\"%s\"",
		    x->listen ? "peer" : "gateway", x->listen ? x->addr :
		    x->label, r);
	else
		log_debug("control %s: %s", x->label, why);
	if (!x->listen) {
		ctl_set_state(x, CTL_IDLE, why);
		dial_closed(why, was_up, up_ms);
		return;
	}
	ctl_set_state(x, CTL_DEAD, why);
	TAILQ_REMOVE(&cc.listen, x, entry);
	TAILQ_INSERT_TAIL(&cc.dead, x, entry);
	event_active(cc.reaper, EV_TIMEOUT, 0);
}

/* ---- snapshot and push -------------------------------------------------- */

static void
count_cb(void *arg, const struct usbip_dev *d, const struct usbip_intf *i,
    uint8_t n)
{
	(*(uint32_t *)arg)++;
}

struct added_arg {
	struct ctl	*x;
	uint32_t	 left;
};

static void
added_cb(void *arg, const struct usbip_dev *d, const struct usbip_intf *i,
    uint8_t n)
{
	struct added_arg *a = arg;
	struct agp_msg m;

	if (a->left == 0)
		return;		/* (changed between the two passes) */
	a->left--;
	memset(&m, 0, sizeof(m));
	m.type = AGP_DEV_ADDED;
	m.dev = *d;
	m.dev.bNumInterfaces = n < USBIP_MAX_INTERFACES ? n :
	    USBIP_MAX_INTERFACES;
	memcpy(m.intf, i, m.dev.bNumInterfaces * sizeof(*i));
	ctl_send(a->x, &m);
}

static void
ctl_snapshot(struct ctl *x)
{
	struct added_arg a = { x, 0 };
	struct agp_msg m;
	uint32_t n = 0;

	if (cc.foreach != NULL)
		cc.foreach(count_cb, &n);
	if (n > USBIP_MAX_NDEV)
		n = USBIP_MAX_NDEV;
	/* what the snapshot may add to the output cap: its largest size */
	x->snapshot_len = (size_t)(n + 2) * (AGP_MSG_HDR_LEN + USBIP_DEV_LEN +
	    USBIP_MAX_INTERFACES * USBIP_INTF_LEN);
	memset(&m, 0, sizeof(m));
	m.type = AGP_SNAPSHOT_BEGIN;
	m.count = n;
	ctl_send(x, &m);
	/* both passes run in this one callback: nothing changes between */
	a.left = n;
	if (cc.foreach != NULL && n > 0)
		cc.foreach(added_cb, &a);
	memset(&m, 0, sizeof(m));
	m.type = AGP_SNAPSHOT_END;
	ctl_send(x, &m);
}

void
ctlconn_changed(const char *busid, bool added, const struct usbip_dev *rec,
    const struct usbip_intf *intf, uint8_t nintf)
{
	struct agp_msg m;
	struct ctl *x, *xn;

	if (cc.base == NULL)
		return;
	memset(&m, 0, sizeof(m));
	if (added && rec != NULL) {
		m.type = AGP_DEV_ADDED;
		m.dev = *rec;
		m.dev.bNumInterfaces = nintf < USBIP_MAX_INTERFACES ? nintf :
		    USBIP_MAX_INTERFACES;
		if (intf != NULL)
			memcpy(m.intf, intf, m.dev.bNumInterfaces *
			    sizeof(*intf));
		else
			m.dev.bNumInterfaces = 0;
	} else {
		if (!usbip_busid_valid(busid))
			return;
		m.type = AGP_DEV_REMOVED;
		usbgw_strlcpy(m.busid, busid, sizeof(m.busid));
	}
	/* connections not up yet: their snapshot carries it */
	if (cc.dial.state == CTL_UP)
		ctl_send(&cc.dial, &m);
	/* (a send may close x: it leaves cc.listen) */
	for (x = TAILQ_FIRST(&cc.listen); x != NULL; x = xn) {
		xn = TAILQ_NEXT(x, entry);
		if (x->state == CTL_UP)
			ctl_send(x, &m);
	}
}

/* ---- dial-back ---------------------------------------------------------- */

static void
db_free(struct dialback *d, bool close_fd)
{
	TAILQ_REMOVE(&cc.dialbacks, d, entry);
	cc.ndialbacks--;
	if (d->ev != NULL)
		event_free(d->ev);
	tlsshim_free(d->sh);
	if (close_fd && d->fd >= 0)
		close(d->fd);
	explicit_bzero(d->out, sizeof(d->out));
	free(d);
}

static void	db_cb(evutil_socket_t, short, void *);

static void
db_tls_ready(int pfd, const struct tlsid_peer *peer,
    const struct tlsshim_pairing *pairing, void *arg)
{
	struct dialback *d = arg;
	struct timeval tv = { 1, 0 };

	d->sh = NULL;		/* a pump now */
	d->tls = false;		/* done: DIALBACK on the plain end */
	d->fd = pfd;
	log_debug("dial-back for %s: TLS, gateway certificate CN=%s",
	    d->busid, peer->name);
	event_assign(d->ev, cc.base, d->fd, EV_WRITE, db_cb, d);
	event_add(d->ev, &tv);
}

static void
db_tls_fail(const char *why, int audit, void *arg)
{
	struct dialback *d = arg;
	char r[256];

	(void)audit;
	d->sh = NULL;		/* tlsshim frees itself */
	log_escape(r, sizeof(r), why, strlen(why));
	export_audit("dial-back busid=%s gateway=%s state=refused "
	    "reason=\"tls: %s\"", d->busid, d->gateway, r);
	db_free(d, false);
}

static void
db_start_tls(struct dialback *d)
{
	uint64_t now = now_ms();
	unsigned ms = d->deadline > now ? (unsigned)(d->deadline - now) : 1;

	event_del(d->ev);
	d->sh = tlsshim_start(cc.base, cct.ctx, d->fd, TLSSHIM_CLIENT, ms,
	    db_tls_ready, db_tls_fail, d);
	d->fd = -1;		/* the shim's (closed by it, whatever happens) */
	if (d->sh == NULL) {
		log_warnx("dial-back for %s: TLS: out of memory", d->busid);
		db_free(d, false);
	}
}

static void
db_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dialback *d = arg;
	struct agp_hello h;
	const char *why = NULL;
	ssize_t r;
	int err = 0;
	socklen_t el = sizeof(err);

	if (now_ms() >= d->deadline) {
		log_warnx("dial-back for %s: no answer in time", d->busid);
		return db_free(d, true);
	}
	if (d->outoff < d->outlen) {
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 &&
		    err != 0) {
			log_warnx("dial-back for %s: %s", d->busid,
			    strerror(err));
			return db_free(d, true);
		}
		if (d->tls && d->outoff == 0 && (what & EV_WRITE)) {
			/* connected: TLS first, DIALBACK inside it */
			db_start_tls(d);
			return;
		}
		r = send(fd, d->out + d->outoff, d->outlen - d->outoff,
		    MSG_NOSIGNAL);
		if (r < 0 && errno != EAGAIN && errno != EINTR &&
		    errno != ENOTCONN) {
			log_warnx("dial-back for %s: %s", d->busid,
			    strerror(errno));
			return db_free(d, true);
		}
		if (r > 0)
			d->outoff += (size_t)r;
	}
	if (d->outoff == d->outlen) {
		/* exactly the reply: what follows is the import's */
		r = recv(fd, d->in + d->inlen, sizeof(d->in) - d->inlen, 0);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
			log_warnx("dial-back for %s: the gateway closed it",
			    d->busid);
			return db_free(d, true);
		}
		if (r > 0)
			d->inlen += (size_t)r;
		if (d->inlen == sizeof(d->in)) {
			if (agp_hello_decode(d->in, d->inlen,
			    USBIP_FROM_SERVER, &h, &why) != AGP_HELLO_HDR_LEN ||
			    h.kind != AGP_KIND_DIALBACK || h.status != ST_OK) {
				log_warnx("dial-back for %s refused: %s",
				    d->busid, why ? why : "ST_NA");
				return db_free(d, true);
			}
			export_audit("dial-back busid=%s gateway=%s", d->busid,
			    d->gateway);
			cc.adopt(d->fd, (struct sockaddr *)&d->peer,
			    d->peerlen, d->busid);
			return db_free(d, false);
		}
	}
	event_del(d->ev);
	event_assign(d->ev, cc.base, d->fd, d->outoff < d->outlen ?
	    EV_WRITE : EV_READ, db_cb, d);
	{
		struct timeval tv = { 1, 0 };

		event_add(d->ev, &tv);
	}
}

struct busid_find {
	const char	*busid;
	bool		 found;
};

static void
find_cb(void *arg, const struct usbip_dev *d, const struct usbip_intf *i,
    uint8_t n)
{
	struct busid_find *f = arg;

	if (strcmp(d->busid, f->busid) == 0)
		f->found = true;
}

static void
open_failed(struct ctl *x, const struct agp_msg *m, uint32_t st,
    const char *why)
{
	struct agp_msg r;

	memset(&r, 0, sizeof(r));
	r.type = AGP_OPEN_FAILED;
	memcpy(r.token, m->token, AGP_TOKEN_LEN);
	r.status = st;
	ctl_send(x, &r);
	export_audit("open-failed busid=%s reason=\"%s\"", m->busid, why);
}

/*
 * OPEN_IMPORT: a new connection to the control connection's address.
 * Only on the dial-out connection: in listen mode the gateway imports on
 * connections of its own, and the address a listen-mode gateway came
 * from is no listener.
 */
/* A dial-back in flight for busid. */
static bool
db_busy(const char *busid)
{
	struct dialback *d;

	TAILQ_FOREACH(d, &cc.dialbacks, entry)
		if (strcmp(d->busid, busid) == 0)
			return true;
	return false;
}

static void
ctl_open_import(struct ctl *x, const struct agp_msg *m)
{
	struct busid_find f = { m->busid, false };
	struct dialback *d;
	struct timeval tv = { 1, 0 };

	if (x->listen)
		return open_failed(x, m, ST_NA, "OPEN_IMPORT in listen mode");
	/* nothing is opened before these checks */
	if (cc.foreach != NULL)
		cc.foreach(find_cb, &f);
	if (!f.found || cc.adopt == NULL)
		return open_failed(x, m, ST_NODEV, "not exportable");
	if (db_busy(m->busid))
		return open_failed(x, m, ST_DEV_BUSY, "a dial-back for it is "
		    "in progress");
	if (cc.ndialbacks >= CTLCONN_MAX_DIALBACKS)
		return open_failed(x, m, ST_NA, "16 dial-backs in progress");
	d = xcalloc(1, sizeof(*d));
	d->fd = -1;
	TAILQ_INSERT_TAIL(&cc.dialbacks, d, entry);
	cc.ndialbacks++;
	usbgw_strlcpy(d->busid, m->busid, sizeof(d->busid));
	usbgw_strlcpy(d->gateway, x->label, sizeof(d->gateway));
	memcpy(&d->peer, &cc.peer, sizeof(d->peer));
	d->peerlen = cc.peerlen;
	/* the control connection's transport: a TLS gateway, a TLS dial-back */
	d->tls = x->tls;
	d->outlen = agp_dialback_req_encode(d->out, m->token, m->busid);
	d->deadline = now_ms() + CTLCONN_CONNECT_S * 1000ull;
	d->fd = socket(d->peer.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0);
	/* an idle import carries nothing: keepalives find a gateway gone */
	fd_keepalive(d->fd);
	if (d->fd == -1 || (connect(d->fd, (struct sockaddr *)&d->peer,
	    d->peerlen) == -1 && errno != EINPROGRESS)) {
		log_warnx("dial-back for %s: %s", d->busid, strerror(errno));
		open_failed(x, m, ST_ERROR, "cannot connect");
		db_free(d, true);
		return;
	}
	d->ev = event_new(cc.base, d->fd, EV_WRITE, db_cb, d);
	event_add(d->ev, &tv);
}

/* ---- messages, once up ---------------------------------------------------- */

/* One message from the gateway; false if the connection closed. */
static bool
ctl_message(struct ctl *x, const struct agp_msg *m)
{
	struct agp_msg r;

	if (m->seq != x->seq_in + 1) {
		ctl_close(x, "message out of sequence");
		return false;
	}
	x->seq_in = m->seq;
	switch (m->type) {
	case AGP_OPEN_IMPORT:
		ctl_open_import(x, m);
		break;
	case AGP_PING:
		memset(&r, 0, sizeof(r));
		r.type = AGP_PONG;
		r.echo = m->echo;
		if (!ctl_send(x, &r))
			return false;
		break;
	case AGP_PONG:
		break;
	case AGP_BYE:
		ctl_close(x, "the gateway said BYE");
		return false;
	default:	/* the codec lets no other type from a gateway through */
		ctl_close(x, "unexpected message");
		return false;
	}
	return true;
}

static void
ctl_up(struct ctl *x, const char *gwname)
{
	char n[AGP_NAME_SIZE * 4];

	ctl_set_state(x, CTL_UP, NULL);
	x->seq_in = x->seq_out = 0;
	x->up_since = x->last_tx = x->last_rx = x->rate_start = now_ms();
	x->rate_n = 0;
	x->paused = false;
	log_escape(n, sizeof(n), gwname, strlen(gwname));
	if (x->listen)
		export_audit("control peer=%s state=up name=%s via=listen",
		    x->addr, n);
	else
		export_audit("control gateway=%s state=up name=%s", x->label,
		    n);
	ctl_snapshot(x);
}

/* Dial-out: the gateway's OP_REP_USBGW.  -1 if closed, 0 otherwise. */
static int
dial_hello(struct ctl *x, struct evbuffer *in)
{
	struct agp_hello h;
	const char *why = NULL;
	size_t len = evbuffer_get_length(in);
	uint8_t *p = evbuffer_pullup(in, len < AGP_HELLO_MAX ? -1 :
	    AGP_HELLO_MAX);
	int n;

	n = agp_hello_decode(p, len, USBIP_FROM_SERVER, &h, &why);
	if (n == AGP_NEED_MORE)
		return 0;
	if (n < 0) {
		ctl_close(x, why);
		return -1;
	}
	evbuffer_drain(in, (size_t)n);
	if (h.ext_version != AGP_EXT_VERSION || h.status != ST_OK ||
	    h.kind != AGP_KIND_CONTROL) {
		ctl_close(x, "the gateway refused CONTROL");
		return -1;
	}
	ctl_up(x, h.name);
	return 0;
}

static unsigned
listen_count(bool up, const char *addr, const struct ctl *except)
{
	const struct ctl *x;
	unsigned n = 0;

	TAILQ_FOREACH(x, &cc.listen, entry)
		if (x != except && (up ? x->state == CTL_UP :
		    x->state == CTL_HELLO) && (addr == NULL ||
		    strcmp(x->addr, addr) == 0))
			n++;
	return n;
}

unsigned
ctlconn_nlisten(bool up)
{
	return listen_count(up, NULL, NULL);
}

/* Listen mode: refused with ST_NA, closed once the reply is out. */
static void
listen_refuse(struct ctl *x, uint16_t kind, const char *why)
{
	uint8_t rep[AGP_HELLO_MAX];
	char r[256];

	export_audit_peer(x->addr, EXPORT_AK_REFUSED, "refused peer=%s "
	    "reason=\"control: %s\"", x->addr, log_escape(r, sizeof(r), why,
	    strlen(why)));
	x->refusing = true;
	x->deadline = now_ms() + 1000;	/* to write 16 bytes */
	bufferevent_disable(x->bev, EV_READ);
	bufferevent_write(x->bev, rep, agp_empty_rep_encode(rep, ST_NA, kind));
}

/* Listen mode: the gateway's OP_REQ_USBGW.  -1 if closed, 0 otherwise. */
static int
listen_hello(struct ctl *x, struct evbuffer *in)
{
	struct agp_hello h;
	struct ctl *o, *on;
	const char *why = NULL;
	char r[256], msg[96];
	size_t len = evbuffer_get_length(in);
	uint8_t *p = evbuffer_pullup(in, len < AGP_HELLO_MAX ? -1 :
	    AGP_HELLO_MAX);
	uint8_t rep[AGP_HELLO_MAX];
	int n;

	n = agp_hello_decode(p, len, USBIP_FROM_CLIENT, &h, &why);
	if (n == AGP_NEED_MORE)
		return 0;
	if (n < 0) {
		export_audit_peer(x->addr, EXPORT_AK_MALFORMED, "malformed "
		    "peer=%s reason=\"control: %s\"", x->addr,
		    log_escape(r, sizeof(r), why, strlen(why)));
		ctl_close(x, why);
		return -1;
	}
	evbuffer_drain(in, (size_t)n);
	if (h.ext_version != AGP_EXT_VERSION) {
		snprintf(msg, sizeof(msg), "extension version %u, not %u",
		    h.ext_version, AGP_EXT_VERSION);
		listen_refuse(x, h.kind, msg);
		return -1;
	}
	if (h.kind != AGP_KIND_CONTROL) {
		listen_refuse(x, h.kind, "DIALBACK to an agent");
		return -1;
	}
	/* one per gateway address: a restarted gateway's replaces the old */
	for (o = TAILQ_FIRST(&cc.listen); o != NULL; o = on) {
		on = TAILQ_NEXT(o, entry);
		if (o != x && o->state == CTL_UP && strcmp(o->addr,
		    x->addr) == 0)
			ctl_close(o, "replaced by a new control connection "
			    "from the same address");
	}
	if (listen_count(true, NULL, x) >= CTLCONN_MAX_LISTEN) {
		snprintf(msg, sizeof(msg), "%d control connections up",
		    CTLCONN_MAX_LISTEN);
		listen_refuse(x, AGP_KIND_CONTROL, msg);
		return -1;
	}
	bufferevent_write(x->bev, rep, agp_control_rep_encode(rep, ST_OK,
	    cc.name, 0, CTLCONN_HEARTBEAT_S));
	ctl_up(x, h.name);
	return 0;
}

static void
ctl_read(struct bufferevent *bev, void *arg)
{
	struct ctl *x = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct agp_msg m;
	const char *why = NULL;
	char r[256];
	size_t len;
	uint8_t *p;
	int n;

	if (x->refusing)
		return;
	x->last_rx = now_ms();
	if (x->state == CTL_HELLO && (x->listen ? listen_hello(x, in) :
	    dial_hello(x, in)) == -1)
		return;
	while (x->state == CTL_UP && !x->paused &&
	    (len = evbuffer_get_length(in)) > 0) {
		p = evbuffer_pullup(in, len < AGP_MSG_MAX ? -1 : AGP_MSG_MAX);
		n = agp_msg_decode(p, len, AGP_FROM_GATEWAY, &m, &why);
		if (n == AGP_NEED_MORE)
			return;
		if (n < 0) {
			log_escape(r, sizeof(r), why, strlen(why));
			if (x->listen)
				export_audit_peer(x->addr, EXPORT_AK_MALFORMED,
				    "malformed peer=%s reason=\"control: %s\"",
				    x->addr, r);
			else
				export_audit("malformed gateway=%s "
				    "reason=\"%s\"", x->label, r);
			ctl_close(x, "malformed message");
			return;
		}
		if (!ctl_rate_ok(x))
			return;
		evbuffer_drain(in, (size_t)n);
		if (!ctl_message(x, &m))
			return;
	}
}

/* Listen mode: a refusal written out, the connection ends. */
static void
ctl_written(struct bufferevent *bev, void *arg)
{
	struct ctl *x = arg;

	if (x->refusing)
		ctl_close(x, "refused");
}

/* The gateway's certificate verified: the bev reads the plain end. */
static void
dial_tls_ready(int pfd, const struct tlsid_peer *peer,
    const struct tlsshim_pairing *pairing, void *arg)
{
	struct ctl *x = arg;

	uint8_t req[AGP_HELLO_MAX], nonce[AGP_NONCE_LEN];

	x->sh = NULL;		/* a pump now: it owns itself */
	x->tls_done = true;
	log_info("gateway %s: TLS, certificate CN=%s fingerprint %.16s...",
	    x->label, peer->name, peer->fpr);
	bufferevent_setfd(x->bev, pfd);
	bufferevent_enable(x->bev, EV_READ | EV_WRITE);
	if (getrandom(nonce, sizeof(nonce), 0) != sizeof(nonce))
		memset(nonce, 0, sizeof(nonce));
	bufferevent_write(x->bev, req, agp_control_req_encode(req, cc.name, 0,
	    nonce));
	ctl_set_state(x, CTL_HELLO, "CONTROL sent (TLS)");
}

static void
dial_tls_fail(const char *why, int audit, void *arg)
{
	struct ctl *x = arg;
	char r[256];

	(void)audit;
	x->sh = NULL;		/* tlsshim frees itself */
	log_escape(r, sizeof(r), why, strlen(why));
	export_audit("control gateway=%s state=refused reason=\"tls: %s\"",
	    x->label, r);
	ctl_close(x, why);
}

/* Dial-out over TLS: the handshake on fd, the bev waits without it. */
static void
dial_start_tls(struct ctl *x, int fd)
{
	uint64_t now = now_ms();
	unsigned ms = x->deadline > now ? (unsigned)(x->deadline - now) : 1;

	bufferevent_disable(x->bev, EV_READ | EV_WRITE);
	bufferevent_setfd(x->bev, -1);
	x->sh = tlsshim_start(cc.base, cct.ctx, fd, TLSSHIM_CLIENT, ms,
	    dial_tls_ready, dial_tls_fail, x);
	if (x->sh == NULL)
		ctl_close(x, "TLS: out of memory");
}

static void
ctl_event(struct bufferevent *bev, short what, void *arg)
{
	struct ctl *x = arg;
	uint8_t req[AGP_HELLO_MAX], nonce[AGP_NONCE_LEN];
	int fd, one = 1;

	if ((what & BEV_EVENT_CONNECTED) && !x->listen) {
		fd = bufferevent_getfd(bev);
		setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
		cc.peerlen = sizeof(cc.peer);
		if (getpeername(fd, (struct sockaddr *)&cc.peer,
		    &cc.peerlen) == -1)
			return ctl_close(x, "getpeername failed");
		if (x->tls && !x->tls_done) {
			dial_start_tls(x, fd);
			return;
		}
		if (getrandom(nonce, sizeof(nonce), 0) != sizeof(nonce))
			memset(nonce, 0, sizeof(nonce));
		bufferevent_write(bev, req, agp_control_req_encode(req,
		    cc.name, 0, nonce));
		ctl_set_state(x, CTL_HELLO, "CONTROL sent");
		return;
	}
	ctl_close(x, what & BEV_EVENT_EOF ? "the gateway closed the "
	    "connection" : x->state == CTL_CONNECTING ? "connection failed" :
	    "connection error");
}

/* ---- dial-out ------------------------------------------------------------ */

static void
dial_free_ai(void)
{
	if (cc.ai != NULL)
		evutil_freeaddrinfo(cc.ai);
	cc.ai = cc.ai_next = NULL;
}

/* Connect the dial-out connection to sa. */
static void
dial_connect(const struct sockaddr *sa, socklen_t salen)
{
	struct ctl *x = &cc.dial;

	ctl_set_state(x, CTL_CONNECTING, NULL);
	x->tls_done = false;
	x->bev = bufferevent_socket_new(cc.base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (x->bev == NULL)
		return ctl_close(x, "out of memory");
	bufferevent_setcb(x->bev, ctl_read, NULL, ctl_event, x);
	bufferevent_setwatermark(x->bev, EV_READ, 0, 2 * AGP_MSG_MAX);
	bufferevent_enable(x->bev, EV_READ | EV_WRITE);
	if (bufferevent_socket_connect(x->bev, sa, (int)salen) == -1)
		return ctl_close(x, "cannot connect");
}

/* The next address of the name being tried. */
static void
dial_next_ai(void)
{
	struct evutil_addrinfo *ai = cc.ai_next;

	cc.ai_next = ai->ai_next;
	dial_connect(ai->ai_addr, (socklen_t)ai->ai_addrlen);
}

static void
dial_resolved(int err, struct evutil_addrinfo *res, void *arg)
{
	const struct net_addr *a = &cc.gw[cc.cur];
	char h[sizeof(a->host) * 4];

	if (err == EVUTIL_EAI_CANCEL) {
		if (res != NULL)
			evutil_freeaddrinfo(res);
		return;
	}
	cc.dns_req = NULL;
	if (err != 0 || res == NULL) {
		if (res != NULL)
			evutil_freeaddrinfo(res);
		log_warnx("gateway %s:%s: cannot resolve %s (%s): trying the "
		    "next gateway line", log_escape(h, sizeof(h), a->host,
		    strlen(a->host)), a->port, h, evutil_gai_strerror(err));
		return ctl_close(&cc.dial, "cannot resolve the gateway");
	}
	dial_free_ai();
	cc.ai = cc.ai_next = res;
	dial_next_ai();
}

/* The asynchronous resolver, made when a name first needs it. */
static struct evdns_base *
dial_dns(void)
{
	if (cc.dns != NULL)
		return cc.dns;
	cc.dns = evdns_base_new(cc.base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
	    EVDNS_BASE_DISABLE_WHEN_INACTIVE);
	if (cc.dns == NULL) {
		log_warnx("no name servers (resolv.conf): gateway names "
		    "resolve from the hosts file only");
		cc.dns = evdns_base_new(cc.base, 0);
		if (cc.dns != NULL)
			evdns_base_load_hosts(cc.dns, NULL);
	}
	return cc.dns;
}

/*
 * Start on cc.gw[cc.cur]: a numeric address is connected to at once, a
 * name is resolved first (every address it has is tried in turn).
 */
static void
dial_next(void)
{
	const struct net_addr *a = &cc.gw[cc.cur];
	struct ctl *x = &cc.dial;
	struct evutil_addrinfo hints;
	struct evdns_getaddrinfo_request *req;
	struct sockaddr_storage ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	unsigned long port = strtoul(a->port, NULL, 10);

	snprintf(x->label, sizeof(x->label), "%s:%s", a->host, a->port);
	x->deadline = now_ms() + CTLCONN_CONNECT_S * 1000ull;
	x->tls = cct.gw[cc.cur];
	dial_free_ai();
	memset(&ss, 0, sizeof(ss));
	if (evutil_inet_pton(AF_INET, a->host, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)port);
		return dial_connect((struct sockaddr *)sin, sizeof(*sin));
	}
	if (evutil_inet_pton(AF_INET6, a->host, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)port);
		return dial_connect((struct sockaddr *)sin6, sizeof(*sin6));
	}
	if (dial_dns() == NULL)
		return ctl_close(x, "no resolver");
	ctl_set_state(x, CTL_RESOLVING, NULL);
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_protocol = IPPROTO_TCP;
	hints.ai_flags = EVUTIL_AI_NUMERICSERV | EVUTIL_AI_ADDRCONFIG;
	/* may answer at once (hosts file, error): dial_resolved ran then */
	req = evdns_getaddrinfo(cc.dns, a->host, a->port, &hints,
	    dial_resolved, NULL);
	if (req != NULL)
		cc.dns_req = req;
}

/*
 * The dial-out connection closed (or never came up): the name's next
 * address, else the next gateway line at once, else, after a whole
 * round, the back-off.
 */
static void
dial_closed(const char *why, bool was_up, uint64_t up_ms)
{
	struct timeval tv;
	unsigned ms;

	if (cc.dns_req != NULL) {
		evdns_getaddrinfo_cancel(cc.dns_req);
		cc.dns_req = NULL;
	}
	if (was_up)
		cc.backoff_ms = ctlconn_backoff_after_up(cc.backoff_ms, up_ms);
	if (cc.stopping) {
		dial_free_ai();
		return;
	}
	if (!was_up && cc.ai_next != NULL)
		return dial_next_ai();
	dial_free_ai();
	if (++cc.cur < cc.ngw)
		return dial_next();
	cc.cur = 0;
	cc.backoff_ms = ctlconn_backoff_next(cc.backoff_ms);
	ms = ctlconn_backoff_delay(cc.backoff_ms);
	log_debug("control: every gateway line tried (%s); again in %u ms",
	    why, ms);
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(cc.retry_ev, &tv);
}

static void
dial_retry(evutil_socket_t fd, short what, void *arg)
{
	dial_next();
}

/* ---- listen mode ----------------------------------------------------------- */

bool
ctlconn_accept(uint16_t code, int fd, const char *peer, struct evbuffer *in)
{
	struct ctl *x;
	char addr[64];
	int one = 1;

	if (code != OP_REQ_USBGW || cc.base == NULL || cc.stopping)
		return false;
	usbgw_hostport_addr(peer, addr, sizeof(addr));
	/* hellos are bounded too: beyond them, closed unanswered */
	if (listen_count(false, NULL, NULL) >= CTLCONN_MAX_LISTEN) {
		close(fd);
		export_audit_peer(addr, EXPORT_AK_REFUSED, "refused peer=%s "
		    "reason=\"control: %d hellos at once\"", addr,
		    CTLCONN_MAX_LISTEN);
		return true;
	}
	x = xcalloc(1, sizeof(*x));
	x->listen = true;
	x->resume_ev = evtimer_new(cc.base, ctl_resume, x);
	if (x->resume_ev == NULL)
		fatalx("out of memory");
	usbgw_strlcpy(x->label, peer, sizeof(x->label));
	usbgw_strlcpy(x->addr, addr, sizeof(x->addr));
	x->bev = bufferevent_socket_new(cc.base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (x->bev == NULL) {
		close(fd);
		free(x);
		log_warnx("control %s: out of memory", peer);
		return true;
	}
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	TAILQ_INSERT_TAIL(&cc.listen, x, entry);
	x->state = CTL_HELLO;
	x->deadline = now_ms() + CTLCONN_HELLO_S * 1000ull;
	log_debug("control %s: OP_REQ_USBGW on the USB/IP listener", peer);
	/* a socket bufferevent's input is frozen at its end (only its own
	 * reads add): thawed for the bytes the engine read already */
	evbuffer_unfreeze(bufferevent_get_input(x->bev), 0);
	if (evbuffer_add_buffer(bufferevent_get_input(x->bev), in) == -1)
		fatalx("evbuffer_add_buffer failed");
	evbuffer_freeze(bufferevent_get_input(x->bev), 0);
	bufferevent_setcb(x->bev, ctl_read, ctl_written, ctl_event, x);
	bufferevent_setwatermark(x->bev, EV_READ, 0, 2 * AGP_MSG_MAX);
	bufferevent_enable(x->bev, EV_READ | EV_WRITE);
	ctl_read(x->bev, x);	/* the hello may be in already */
	return true;
}

/*
 * After a reload: listen-mode control connections (up or in their
 * hello) of peers allow-from no longer names end, as their imports do
 * (export_set_conf).  The dial-out one is the agent's own: allow-from
 * does not apply to it.
 */
void
ctlconn_recheck_allowed(void)
{
	struct ctl *x, *xn;

	if (cc.base == NULL)
		return;
	for (x = TAILQ_FIRST(&cc.listen); x != NULL; x = xn) {
		xn = TAILQ_NEXT(x, entry);
		if (x->state == CTL_DEAD || export_addr_allowed(x->addr))
			continue;
		export_audit("refused peer=%s reason=\"control: no longer in "
		    "allow-from\"", x->addr);
		ctl_close(x, "peer no longer in allow-from");
	}
}

/* ---- timers, life -------------------------------------------------------- */

/* Deadlines and heartbeat of one connection. */
static void
ctl_tick_one(struct ctl *x, uint64_t now)
{
	struct agp_msg m;

	if (x->refusing) {
		if (now >= x->deadline)
			ctl_close(x, "refusal not written within 1 s");
		return;
	}
	if (x->state == CTL_RESOLVING || x->state == CTL_CONNECTING ||
	    x->state == CTL_HELLO) {
		if (now >= x->deadline)
			ctl_close(x, x->listen ? "no CONTROL within 10 s" :
			    "no answer within 5 s");
	} else if (x->state == CTL_UP) {
		/* (paused: the gateway has said plenty, unread) */
		if (now - x->last_rx >= CTLCONN_SILENT_S * 1000ull &&
		    !x->paused)
			ctl_close(x, "the gateway was silent for 45 s");
		else if (now - x->last_tx >= CTLCONN_HEARTBEAT_S * 1000ull) {
			memset(&m, 0, sizeof(m));
			m.type = AGP_PING;
			m.echo = now;
			ctl_send(x, &m);
		}
	}
}

static void
ctl_tick(evutil_socket_t fd, short what, void *arg)
{
	struct timeval tv = { CC_TICK_S, 0 };
	uint64_t now = now_ms();
	struct ctl *x, *xn;

	if (cc.ngw > 0)
		ctl_tick_one(&cc.dial, now);
	for (x = TAILQ_FIRST(&cc.listen); x != NULL; x = xn) {
		xn = TAILQ_NEXT(x, entry);
		ctl_tick_one(x, now);
	}
	if (!cc.stopping)
		evtimer_add(cc.tick_ev, &tv);
}

int
ctlconn_init(struct event_base *base, const char *name,
    const struct net_addr *gws, size_t n, ctlconn_foreach_fn foreach,
    ctlconn_adopt_fn adopt)
{
	struct timeval tv = { CC_TICK_S, 0 };

	if (!agp_name_valid(name))
		return -1;
	memset(&cc, 0, sizeof(cc));
	cc.base = base;
	usbgw_strlcpy(cc.name, name, sizeof(cc.name));
	cc.ngw = n < nitems(cc.gw) ? n : nitems(cc.gw);
	if (cc.ngw > 0)
		memcpy(cc.gw, gws, cc.ngw * sizeof(*gws));
	cc.foreach = foreach;
	cc.adopt = adopt;
	TAILQ_INIT(&cc.listen);
	TAILQ_INIT(&cc.dead);
	TAILQ_INIT(&cc.dialbacks);
	cc.dial.state = CTL_IDLE;
	cc.dial.resume_ev = evtimer_new(base, ctl_resume, &cc.dial);
	cc.retry_ev = evtimer_new(base, dial_retry, NULL);
	cc.tick_ev = evtimer_new(base, ctl_tick, NULL);
	cc.reaper = event_new(base, -1, 0, reap_cb, NULL);
	if (cc.retry_ev == NULL || cc.tick_ev == NULL || cc.reaper == NULL ||
	    cc.dial.resume_ev == NULL)
		fatalx("out of memory");
	evtimer_add(cc.tick_ev, &tv);
	if (cc.ngw > 0)
		dial_next();
	return 0;
}

void
ctlconn_set_tls(SSL_CTX *ctx, const bool *gw_tls, size_t n)
{
	size_t i;

	if (ctx != NULL)
		SSL_CTX_up_ref(ctx);
	SSL_CTX_free(cct.ctx);
	cct.ctx = ctx;
	for (i = 0; i < nitems(cct.gw); i++)
		cct.gw[i] = ctx != NULL && gw_tls != NULL && i < n && gw_tls[i];
}

/* BYE written now: the loop will not run for it (a bufferevent's output
 * is drained by the loop only), so only when nothing else waits. */
static void
ctl_bye(struct ctl *x)
{
	struct agp_msg m;
	uint8_t buf[AGP_MSG_MAX];
	size_t n;

	if (x->state != CTL_UP || x->bev == NULL ||
	    evbuffer_get_length(bufferevent_get_output(x->bev)) != 0)
		return;
	memset(&m, 0, sizeof(m));
	m.type = AGP_BYE;
	m.seq = ++x->seq_out;
	n = agp_msg_encode(buf, &m);
	(void)send(bufferevent_getfd(x->bev), buf, n,
	    MSG_NOSIGNAL | MSG_DONTWAIT);
}

void
ctlconn_shutdown(void)
{
	struct ctl *x;

	if (cc.base == NULL)
		return;
	cc.stopping = true;
	if (cc.ngw > 0) {
		ctl_bye(&cc.dial);
		ctl_close(&cc.dial, "shutting down");
	}
	if (cc.dns_req != NULL) {
		evdns_getaddrinfo_cancel(cc.dns_req);
		cc.dns_req = NULL;
	}
	dial_free_ai();
	while ((x = TAILQ_FIRST(&cc.listen)) != NULL) {
		ctl_bye(x);
		if (x->state == CTL_DEAD) {	/* (cannot be: listed) */
			TAILQ_REMOVE(&cc.listen, x, entry);
			continue;
		}
		ctl_close(x, "shutting down");
	}
	reap_cb(-1, 0, NULL);
	while (!TAILQ_EMPTY(&cc.dialbacks))
		db_free(TAILQ_FIRST(&cc.dialbacks), true);
	if (cc.dns != NULL)
		evdns_base_free(cc.dns, 0);
	cc.dns = NULL;
	event_free(cc.dial.resume_ev);
	event_free(cc.retry_ev);
	event_free(cc.tick_ev);
	event_free(cc.reaper);
	cc.base = NULL;
}
