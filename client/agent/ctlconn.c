/*
 * usbgw-agent's control connection, dial-out (protocol.md 1.9.4); the
 * contract is in ctlconn.h.
 *
 * One connection at a time, as an explicit state (CC_IDLE: waiting to
 * retry, CC_CONNECTING, CC_HELLO, CC_UP) with one teardown (cc_close).
 * A dial-back is a small object of its own: a plain non-blocking socket
 * (no bufferevent, which could read the gateway's OP_REQ_IMPORT past the
 * 16-byte reply and lose it), the DIALBACK written, exactly the reply
 * read, then the socket handed over.
 */
#include <sys/random.h>
#include <sys/socket.h>

#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "agentproto.h"
#include "ctlconn.h"
#include "log.h"
#include "util.h"

#define CC_TICK_S	1
#define CC_PING_S	15
#define CC_SILENT_S	45

enum cc_state { CC_IDLE, CC_CONNECTING, CC_HELLO, CC_UP };

static struct {
	struct event_base	*base;
	char			 name[AGP_NAME_SIZE];
	struct config_addr	 gw[8];
	size_t			 ngw, cur;	/* the gateway tried now */
	ctlconn_foreach_fn	 foreach;
	ctlconn_adopt_fn	 adopt;
	enum cc_state		 state;
	struct bufferevent	*bev;
	struct sockaddr_storage	 peer;		/* the control's address */
	socklen_t		 peerlen;
	uint32_t		 seq_in, seq_out;
	unsigned		 backoff_ms;
	uint64_t		 up_since, last_rx, last_tx, deadline; /* ms */
	struct event		*retry_ev, *tick_ev;
	bool			 stopping;
} cc;

struct dialback {
	int		 fd;
	struct event	*ev;
	uint8_t		 out[AGP_HELLO_MAX];
	size_t		 outlen, outoff;
	uint8_t		 in[AGP_HELLO_HDR_LEN];
	size_t		 inlen;
	char		 busid[USBIP_BUSID_SIZE];
	uint64_t	 deadline;
};

static void	cc_next(void);

static uint64_t
now_ms(void)
{
	return now_usec() / 1000;
}

static void
cc_set_state(enum cc_state st, const char *why)
{
	static const char *const names[] = { "idle", "connecting", "hello",
	    "up" };

	if (cc.state == st)
		return;
	log_debug("control %s:%s: %s -> %s%s%s", cc.gw[cc.cur].host,
	    cc.gw[cc.cur].port, names[cc.state], names[st], why ? ": " : "",
	    why ? why : "");
	cc.state = st;
}

static void
cc_send(struct agp_msg *m)
{
	uint8_t buf[AGP_MSG_MAX];
	size_t n;

	if (cc.state != CC_UP || cc.bev == NULL)
		return;
	m->seq = ++cc.seq_out;
	n = agp_msg_encode(buf, m);
	bufferevent_write(cc.bev, buf, n);
	cc.last_tx = now_ms();
}

/* The one teardown: the connection goes, the next gateway is tried. */
static void
cc_close(const char *why)
{
	struct timeval tv;
	unsigned ms;

	if (cc.bev != NULL) {
		bufferevent_free(cc.bev);
		cc.bev = NULL;
	}
	if (cc.state == CC_UP) {
		log_info("audit: control gateway=%s:%s state=down reason=\"%s\"",
		    cc.gw[cc.cur].host, cc.gw[cc.cur].port, why);
		if (now_ms() - cc.up_since >= CTLCONN_UP_RESET_S * 1000ull)
			cc.backoff_ms = 0;
	} else
		log_debug("control %s:%s: %s", cc.gw[cc.cur].host,
		    cc.gw[cc.cur].port, why);
	cc_set_state(CC_IDLE, why);
	if (cc.stopping)
		return;
	/* the next gateway at once; after a whole round, back off */
	if (++cc.cur < cc.ngw) {
		cc_next();
		return;
	}
	cc.cur = 0;
	cc.backoff_ms = cc.backoff_ms == 0 ? 1000 : cc.backoff_ms * 2;
	if (cc.backoff_ms > CTLCONN_BACKOFF_MAX_MS)
		cc.backoff_ms = CTLCONN_BACKOFF_MAX_MS;
	ms = usbgw_jitter(cc.backoff_ms, 20);
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(cc.retry_ev, &tv);
}

/* ---- snapshot and push -------------------------------------------------- */

static void
count_cb(void *arg, const struct usbip_dev *d, const struct usbip_intf *i,
    uint8_t n)
{
	(*(uint32_t *)arg)++;
}

static void
added_cb(void *arg, const struct usbip_dev *d, const struct usbip_intf *i,
    uint8_t n)
{
	struct agp_msg m;
	uint32_t *left = arg;

	if (*left == 0)
		return;		/* (changed between the two passes) */
	(*left)--;
	memset(&m, 0, sizeof(m));
	m.type = AGP_DEV_ADDED;
	m.dev = *d;
	m.dev.bNumInterfaces = n < USBIP_MAX_INTERFACES ? n :
	    USBIP_MAX_INTERFACES;
	memcpy(m.intf, i, m.dev.bNumInterfaces * sizeof(*i));
	cc_send(&m);
}

static void
cc_snapshot(void)
{
	struct agp_msg m;
	uint32_t n = 0, left;

	if (cc.foreach != NULL)
		cc.foreach(count_cb, &n);
	if (n > USBIP_MAX_NDEV)
		n = USBIP_MAX_NDEV;
	memset(&m, 0, sizeof(m));
	m.type = AGP_SNAPSHOT_BEGIN;
	m.count = n;
	cc_send(&m);
	/* both passes run in this one callback: nothing changes between */
	left = n;
	if (cc.foreach != NULL && n > 0)
		cc.foreach(added_cb, &left);
	memset(&m, 0, sizeof(m));
	m.type = AGP_SNAPSHOT_END;
	cc_send(&m);
}

void
ctlconn_changed(const char *busid, bool added, const struct usbip_dev *rec,
    const struct usbip_intf *intf, uint8_t nintf)
{
	struct agp_msg m;

	if (cc.state != CC_UP)
		return;		/* the next snapshot carries it */
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
	cc_send(&m);
}

/* ---- dial-back ---------------------------------------------------------- */

static void
db_free(struct dialback *d, bool close_fd)
{
	if (d->ev != NULL)
		event_free(d->ev);
	if (close_fd && d->fd >= 0)
		close(d->fd);
	explicit_bzero(d->out, sizeof(d->out));
	free(d);
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
			log_info("audit: dial-back busid=%s gateway=%s:%s",
			    d->busid, cc.gw[cc.cur].host, cc.gw[cc.cur].port);
			cc.adopt(d->fd, (struct sockaddr *)&cc.peer,
			    cc.peerlen);
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

/* OPEN_IMPORT: a new connection to the control connection's address. */
static void
cc_open_import(const struct agp_msg *m)
{
	struct busid_find f = { m->busid, false };
	struct dialback *d;
	struct agp_msg r;
	struct timeval tv = { 1, 0 };

	if (cc.foreach != NULL)
		cc.foreach(find_cb, &f);
	if (!f.found || cc.adopt == NULL) {
		memset(&r, 0, sizeof(r));
		r.type = AGP_OPEN_FAILED;
		memcpy(r.token, m->token, AGP_TOKEN_LEN);
		r.status = ST_NODEV;
		cc_send(&r);
		log_info("audit: open-failed busid=%s reason=\"not exportable\"",
		    m->busid);
		return;
	}
	d = xcalloc(1, sizeof(*d));
	usbgw_strlcpy(d->busid, m->busid, sizeof(d->busid));
	d->outlen = agp_dialback_req_encode(d->out, m->token, m->busid);
	d->deadline = now_ms() + CTLCONN_CONNECT_S * 1000ull;
	d->fd = socket(cc.peer.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0);
	if (d->fd == -1 || (connect(d->fd, (struct sockaddr *)&cc.peer,
	    cc.peerlen) == -1 && errno != EINPROGRESS)) {
		log_warnx("dial-back for %s: %s", d->busid, strerror(errno));
		memset(&r, 0, sizeof(r));
		r.type = AGP_OPEN_FAILED;
		memcpy(r.token, m->token, AGP_TOKEN_LEN);
		r.status = ST_ERROR;
		cc_send(&r);
		db_free(d, true);
		return;
	}
	d->ev = event_new(cc.base, d->fd, EV_WRITE, db_cb, d);
	event_add(d->ev, &tv);
}

/* ---- the control connection --------------------------------------------- */

static void
cc_read(struct bufferevent *bev, void *arg)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	struct agp_hello h;
	struct agp_msg m, r;
	const char *why = NULL;
	size_t len;
	uint8_t *p;
	int n;

	cc.last_rx = now_ms();
	if (cc.state == CC_HELLO) {
		len = evbuffer_get_length(in);
		p = evbuffer_pullup(in, len < AGP_HELLO_MAX ? -1 : AGP_HELLO_MAX);
		n = agp_hello_decode(p, len, USBIP_FROM_SERVER, &h, &why);
		if (n == AGP_NEED_MORE)
			return;
		if (n < 0)
			return cc_close(why);
		evbuffer_drain(in, (size_t)n);
		if (h.ext_version != AGP_EXT_VERSION || h.status != ST_OK ||
		    h.kind != AGP_KIND_CONTROL)
			return cc_close("the gateway refused CONTROL");
		cc_set_state(CC_UP, NULL);
		cc.seq_in = cc.seq_out = 0;
		cc.up_since = cc.last_tx = now_ms();
		log_info("audit: control gateway=%s:%s state=up name=%s",
		    cc.gw[cc.cur].host, cc.gw[cc.cur].port, h.name);
		cc_snapshot();
	}
	while (cc.state == CC_UP && (len = evbuffer_get_length(in)) > 0) {
		p = evbuffer_pullup(in, len < AGP_MSG_MAX ? -1 : AGP_MSG_MAX);
		n = agp_msg_decode(p, len, AGP_FROM_GATEWAY, &m, &why);
		if (n == AGP_NEED_MORE)
			return;
		if (n < 0) {
			log_warnx("audit: malformed gateway=%s:%s reason=\"%s\"",
			    cc.gw[cc.cur].host, cc.gw[cc.cur].port, why);
			return cc_close("malformed message");
		}
		evbuffer_drain(in, (size_t)n);
		if (m.seq != cc.seq_in + 1)
			return cc_close("message out of sequence");
		cc.seq_in = m.seq;
		switch (m.type) {
		case AGP_OPEN_IMPORT:
			cc_open_import(&m);
			break;
		case AGP_PING:
			memset(&r, 0, sizeof(r));
			r.type = AGP_PONG;
			r.echo = m.echo;
			cc_send(&r);
			break;
		case AGP_PONG:
			break;
		case AGP_BYE:
			return cc_close("the gateway said BYE");
		default:
			return cc_close("unexpected message");
		}
	}
}

static void
cc_event(struct bufferevent *bev, short what, void *arg)
{
	uint8_t req[AGP_HELLO_MAX], nonce[AGP_NONCE_LEN];
	size_t n;

	if (what & BEV_EVENT_CONNECTED) {
		int fd = bufferevent_getfd(bev), one = 1;

		setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
		cc.peerlen = sizeof(cc.peer);
		if (getpeername(fd, (struct sockaddr *)&cc.peer,
		    &cc.peerlen) == -1)
			return cc_close("getpeername failed");
		if (getrandom(nonce, sizeof(nonce), 0) != sizeof(nonce))
			memset(nonce, 0, sizeof(nonce));
		n = agp_control_req_encode(req, cc.name, 0, nonce);
		bufferevent_write(bev, req, n);
		cc_set_state(CC_HELLO, "CONTROL sent");
		return;
	}
	cc_close(what & BEV_EVENT_EOF ? "the gateway closed the connection" :
	    "connection failed");
}

/* Connect to cc.gw[cc.cur]. */
static void
cc_next(void)
{
	struct addrinfo hints, *res = NULL;
	const struct config_addr *a = &cc.gw[cc.cur];

	cc_set_state(CC_CONNECTING, NULL);
	cc.deadline = now_ms() + CTLCONN_CONNECT_S * 1000ull;
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	/* (a host name is resolved here, blocking: see the report) */
	if (getaddrinfo(a->host, a->port, &hints, &res) != 0 || res == NULL) {
		if (res != NULL)
			freeaddrinfo(res);
		return cc_close("cannot resolve the gateway");
	}
	cc.bev = bufferevent_socket_new(cc.base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (cc.bev == NULL) {
		freeaddrinfo(res);
		return cc_close("out of memory");
	}
	bufferevent_setcb(cc.bev, cc_read, NULL, cc_event, NULL);
	bufferevent_setwatermark(cc.bev, EV_READ, 0, 2 * AGP_MSG_MAX);
	bufferevent_enable(cc.bev, EV_READ | EV_WRITE);
	if (bufferevent_socket_connect(cc.bev, res->ai_addr,
	    (int)res->ai_addrlen) == -1) {
		freeaddrinfo(res);
		return cc_close("cannot connect");
	}
	freeaddrinfo(res);
}

static void
cc_retry(evutil_socket_t fd, short what, void *arg)
{
	cc_next();
}

static void
cc_tick(evutil_socket_t fd, short what, void *arg)
{
	struct timeval tv = { CC_TICK_S, 0 };
	uint64_t now = now_ms();
	struct agp_msg m;

	if ((cc.state == CC_CONNECTING || cc.state == CC_HELLO) &&
	    now >= cc.deadline)
		cc_close("no answer within 5 s");
	else if (cc.state == CC_UP) {
		if (now - cc.last_rx >= CC_SILENT_S * 1000ull)
			cc_close("the gateway was silent for 45 s");
		else if (now - cc.last_tx >= CC_PING_S * 1000ull) {
			memset(&m, 0, sizeof(m));
			m.type = AGP_PING;
			m.echo = now;
			cc_send(&m);
		}
	}
	if (!cc.stopping)
		evtimer_add(cc.tick_ev, &tv);
}

int
ctlconn_init(struct event_base *base, const char *name,
    const struct config_addr *gws, size_t n, ctlconn_foreach_fn foreach,
    ctlconn_adopt_fn adopt)
{
	struct timeval tv = { CC_TICK_S, 0 };

	if (n == 0 || !agp_name_valid(name))
		return -1;
	memset(&cc, 0, sizeof(cc));
	cc.base = base;
	usbgw_strlcpy(cc.name, name, sizeof(cc.name));
	cc.ngw = n < nitems(cc.gw) ? n : nitems(cc.gw);
	memcpy(cc.gw, gws, cc.ngw * sizeof(*gws));
	cc.foreach = foreach;
	cc.adopt = adopt;
	cc.retry_ev = evtimer_new(base, cc_retry, NULL);
	cc.tick_ev = evtimer_new(base, cc_tick, NULL);
	evtimer_add(cc.tick_ev, &tv);
	cc_next();
	return 0;
}

void
ctlconn_shutdown(void)
{
	struct agp_msg m;
	uint8_t buf[AGP_MSG_MAX];
	size_t n;

	if (cc.base == NULL)
		return;
	/* written now, the loop will not run for it (a bufferevent's
	 * output is drained by the loop only): when nothing else waits */
	if (cc.state == CC_UP && cc.bev != NULL &&
	    evbuffer_get_length(bufferevent_get_output(cc.bev)) == 0) {
		memset(&m, 0, sizeof(m));
		m.type = AGP_BYE;
		m.seq = ++cc.seq_out;
		n = agp_msg_encode(buf, &m);
		(void)send(bufferevent_getfd(cc.bev), buf, n,
		    MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	cc.stopping = true;
	cc_close("shutting down");
	event_free(cc.retry_ev);
	event_free(cc.tick_ev);
	cc.base = NULL;
}
