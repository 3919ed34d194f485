/*
 * The gateway's side of usbgw-agent (protocol.md 1.9.4).
 *
 * One control connection per agent, as an object with an explicit
 * state (AC_CONNECTING, AC_HELLO, AC_UP) and one teardown (ac_close):
 *  - listen mode (exporter kind "agent"): the gateway connects to the
 *    agent's USB/IP port and sends CONTROL, on every (re)connect, with
 *    the exporters' back-off (poll-interval doubled to 60 s, +-10 %); a
 *    stock usbipd never sees the extension because only a declared
 *    agent gets it;
 *  - dial-out (exporter kind "agent-dialout", `agent NAME from CIDR`):
 *    the agent connects to the USB/IP listener and sends CONTROL; a name
 *    not declared, or an address outside its network, gets ST_NA, a
 *    close and an `agent-refused` row (budgeted like 1.6's
 *    unauthenticated peers).
 *
 * What an agent says is a claim (1.9.4, item 7): DEV_ADDED makes the
 * gateway claim now instead of at the next poll (the probe decides, as
 * for a list record: exporter_record), DEV_REMOVED marks an unheld
 * device gone now, a snapshot is the whole list.  At most
 * AGENTGW_MAX_RATE messages a second are read from one agent, then its
 * input is paused (backpressure).  A malformed message (the codec's
 * checks, a sequence number out of order, a snapshot that lies about
 * its count or does not end in 10 s) closes the control connection with
 * a log line and a `malformed` audit row; the claims, each on its own
 * connection, stay.
 *
 * Dial-back: a dial-out agent's claim asks for its connection with
 * OPEN_IMPORT(busid, token).  The token is 16 random bytes, good once,
 * for 10 s, for that agent and that busid; the agent's DIALBACK on the
 * listener must show all three (and come from the agent's network), and
 * the connection then becomes the claim's (upstream_dialed): the claim
 * and the probe are the one path of 1.6.  OPEN_FAILED, or no dial-back
 * in time, fails the claim (1.6's back-off).
 */
#include <sys/random.h>
#include <sys/socket.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "base/log.h"
#include "base/util.h"
#include "core/agentgw.h"
#include "core/device.h"
#include "core/exporter.h"
#include "core/lease.h"
#include "core/loop.h"
#include "core/relay.h"
#include "core/store.h"
#include "core/upstream.h"
#include "proto/agentproto.h"

#define AC_BACKOFF_MAX_MS	60000
#define AC_HELLO_MS		10000	/* connect + hello, at most */
#define AC_TICK_MS		1000
#define AC_GATEWAY_NAME		"usbgwd"

enum ac_state {
	AC_CONNECTING,		/* listen mode: TCP connect */
	AC_HELLO,		/* CONTROL sent / awaited */
	AC_UP,			/* messages */
	AC_CLOSED,
};

struct agentconn {
	TAILQ_ENTRY(agentconn)	 entry;
	struct exporter		*exp;	/* listen: always; dial-in: admitted */
	struct bufferevent	*bev;
	enum ac_state		 state;
	bool			 dialin;
	bool			 dead;
	char			 peer[280];	/* host:port */
	char			 host[256];
	struct usbgw_addr	 addr;
	char			 name[AGP_NAME_SIZE];	/* the agent's */
	bool			 tls;		/* over TLS: cert verified */
	struct tlsid_peer	 cert;		/* tls: the agent's certificate */
	uint32_t		 seq_in, seq_out;
	bool			 snapshot;
	uint32_t		 snap_count, snap_n;
	uint64_t		 snap_deadline;		/* ms */
	uint64_t		 hello_deadline;	/* ms */
	uint64_t		 rate_start;		/* ms */
	unsigned		 rate_n;
	bool			 paused;
	uint64_t		 last_rx, last_tx;	/* ms */
	struct event		*tick_ev;
	struct event		*resume_ev;
	/* listen mode: reconnects */
	struct event		*retry_ev;
	int			 fails;
};

struct agent_token {
	TAILQ_ENTRY(agent_token) entry;
	uint8_t			 token[AGP_TOKEN_LEN];
	struct exporter		*exp;
	struct upstream		*up;
	char			 busid[USBIP_BUSID_SIZE];
	uint64_t		 expires;		/* ms */
	struct event		*ev;
};

static TAILQ_HEAD(, agentconn) conns = TAILQ_HEAD_INITIALIZER(conns);
static TAILQ_HEAD(, agent_token) tokens = TAILQ_HEAD_INITIALIZER(tokens);
static unsigned ndialin;	/* dial-in connections not yet admitted */

static void	ac_read(struct bufferevent *, void *);
static void	ac_event(struct bufferevent *, short, void *);
static void	ac_connect(struct agentconn *);

static uint64_t
now_ms(void)
{
	return now_usec() / 1000;
}

static const char *
ac_state_name(enum ac_state st)
{
	switch (st) {
	case AC_CONNECTING:	return "connecting";
	case AC_HELLO:		return "hello";
	case AC_UP:		return "up";
	case AC_CLOSED:		return "closed";
	}
	return "?";
}

/* Every state change of a control connection goes through here. */
static void
ac_set_state(struct agentconn *ac, enum ac_state st, const char *why)
{
	if (ac->state == st)
		return;
	log_debug("agent %s (%s): control %s -> %s%s%s", ac->exp != NULL ?
	    ac->exp->name : "?", ac->peer, ac_state_name(ac->state),
	    ac_state_name(st), why ? ": " : "", why ? why : "");
	ac->state = st;
}

static const char *
ac_label(const struct agentconn *ac)
{
	return ac->exp != NULL ? ac->exp->name : ac->host;
}

/* ---- tokens ------------------------------------------------------------ */

static void
token_free(struct agent_token *t)
{
	TAILQ_REMOVE(&tokens, t, entry);
	if (t->ev != NULL)
		event_free(t->ev);
	explicit_bzero(t->token, sizeof(t->token));
	free(t);
}

static void
token_expired(evutil_socket_t fd, short what, void *arg)
{
	struct agent_token *t = arg;
	struct upstream *up = t->up;

	token_free(t);
	upstream_dial_failed(up, -1, "no dial-back from the agent within "
	    "10 s");
}

static struct agent_token *
token_find(const uint8_t tok[AGP_TOKEN_LEN])
{
	struct agent_token *t;

	TAILQ_FOREACH(t, &tokens, entry)
		if (CRYPTO_memcmp(t->token, tok, AGP_TOKEN_LEN) == 0)
			return t;
	return NULL;
}

/* ---- output ------------------------------------------------------------ */

static void	ac_close(struct agentconn *, const char *why, bool malformed);

static void
ac_send(struct agentconn *ac, struct agp_msg *m)
{
	uint8_t buf[AGP_MSG_MAX];
	size_t n;

	if (ac->dead || ac->state != AC_UP)
		return;
	if (evbuffer_get_length(bufferevent_get_output(ac->bev)) >
	    AGENTGW_MAX_OUTPUT) {
		ac_close(ac, "the agent does not read its control connection",
		    false);
		return;
	}
	m->seq = ++ac->seq_out;
	n = agp_msg_encode(buf, m);
	bufferevent_write(ac->bev, buf, n);
	ac->last_tx = now_ms();
}

/* The claim dialer (upstream.h): OPEN_IMPORT on the agent's control. */
static int
dial_open(struct upstream *up, const char **why)
{
	struct exporter *exp = up->exp;
	struct agent_token *t;
	struct agp_msg m;
	struct timeval tv = { AGENTGW_TOKEN_MS / 1000, 0 };

	if (exp->ctl == NULL || exp->ctl->state != AC_UP) {
		*why = "the agent has no control connection";
		return -1;
	}
	t = xcalloc(1, sizeof(*t));
	if (getrandom(t->token, sizeof(t->token), 0) !=
	    (ssize_t)sizeof(t->token)) {
		free(t);
		*why = "no random bytes for a token";
		return -1;
	}
	t->exp = exp;
	t->up = up;
	usbgw_strlcpy(t->busid, up->dev->up_busid, sizeof(t->busid));
	t->expires = now_ms() + AGENTGW_TOKEN_MS;
	t->ev = evtimer_new(gw->base, token_expired, t);
	evtimer_add(t->ev, &tv);
	TAILQ_INSERT_TAIL(&tokens, t, entry);
	memset(&m, 0, sizeof(m));
	m.type = AGP_OPEN_IMPORT;
	usbgw_strlcpy(m.busid, t->busid, sizeof(m.busid));
	memcpy(m.token, t->token, AGP_TOKEN_LEN);
	log_debug("%s: OPEN_IMPORT sent to agent %s", up->dev->busid,
	    exp->name);
	ac_send(exp->ctl, &m);
	return 0;
}

static void
dial_cancel(struct upstream *up)
{
	struct agent_token *t, *next;

	for (t = TAILQ_FIRST(&tokens); t != NULL; t = next) {
		next = TAILQ_NEXT(t, entry);
		if (t->up == up)
			token_free(t);
	}
}

static const struct upstream_dialer dialer = {
	.open = dial_open,
	.cancel = dial_cancel,
};

static const struct exporter_agent_ops agent_ops = {
	.start = agentgw_start,
	.stop = agentgw_stop,
};

void
agentgw_init(void)
{
	upstream_set_dialer(&dialer);
	exporter_set_agent_ops(&agent_ops);
}

/* ---- teardown ---------------------------------------------------------- */

static void
ac_free(void *arg)
{
	struct agentconn *ac = arg;

	if (ac->bev != NULL)
		bufferevent_free(ac->bev);
	if (ac->tick_ev != NULL)
		event_free(ac->tick_ev);
	if (ac->resume_ev != NULL)
		event_free(ac->resume_ev);
	if (ac->retry_ev != NULL)
		event_free(ac->retry_ev);
	free(ac);
}

/* Listen mode: the next connect, 1.6's back-off from poll-interval. */
static void
ac_retry_later(struct agentconn *ac)
{
	unsigned ms = gw->poll_ms;
	struct timeval tv;
	int i;

	for (i = 1; i < ac->fails && ms < AC_BACKOFF_MAX_MS; i++)
		ms *= 2;
	if (ms > AC_BACKOFF_MAX_MS)
		ms = AC_BACKOFF_MAX_MS;
	ms = usbgw_jitter(ms, 10);
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(ac->retry_ev, &tv);
}

/*
 * The one teardown: the connection goes (a listen-mode object stays for
 * its next connect), the exporter hears that its control is down, a
 * malformed close is logged and audited.
 */
static void
ac_close(struct agentconn *ac, const char *why, bool malformed)
{
	struct exporter *exp = ac->exp;
	bool was_up = ac->state == AC_UP;
	char msg[200];

	if (ac->dead || ac->state == AC_CLOSED)
		return;
	if (malformed) {
		snprintf(msg, sizeof(msg), "malformed control message: %s",
		    why);
		log_warnx("agent %s (%s) control closed: %s", ac_label(ac),
		    ac->peer, msg);
		if (exp != NULL)
			gw_audit_exporter(exp, "malformed", msg);
		else if (hostlimit_audit(ac->host, HL_MALFORMED))
			store_audit("malformed", NULL, ac->host, msg);
	} else
		(was_up ? log_info : log_debug)("agent %s (%s) control "
		    "closed: %s", ac_label(ac), ac->peer, why);
	ac_set_state(ac, AC_CLOSED, why);
	if (ac->bev != NULL) {
		bufferevent_setcb(ac->bev, NULL, NULL, NULL, NULL);
		bufferevent_free(ac->bev);
		ac->bev = NULL;
	}
	evtimer_del(ac->tick_ev);
	evtimer_del(ac->resume_ev);
	ac->snapshot = false;
	ac->paused = false;
	if (ac->dialin && exp == NULL)
		ndialin--;
	if (exp != NULL && exp->ctl == ac) {
		exp->ctl = NULL;
		exporter_ctl_changed(exp, why);
	}
	if (!ac->dialin && exp != NULL && !exp->dead) {
		if (!was_up)
			ac->fails++;
		else
			ac->fails = 1;
		ac_retry_later(ac);
		return;
	}
	ac->dead = true;
	TAILQ_REMOVE(&conns, ac, entry);
	gw_defer(ac_free, ac);
}

/* ---- messages ---------------------------------------------------------- */

static void
ac_resume(evutil_socket_t fd, short what, void *arg)
{
	struct agentconn *ac = arg;

	if (ac->dead || ac->bev == NULL || !ac->paused)
		return;
	ac->paused = false;
	bufferevent_enable(ac->bev, EV_READ);
	ac_read(ac->bev, ac);
}

/* At most AGENTGW_MAX_RATE messages a second: then the input waits. */
static bool
ac_rate_ok(struct agentconn *ac)
{
	uint64_t now = now_ms();
	struct timeval tv;
	uint64_t left;

	if (now - ac->rate_start >= 1000) {
		ac->rate_start = now;
		ac->rate_n = 0;
	}
	if (ac->rate_n < AGENTGW_MAX_RATE) {
		ac->rate_n++;
		return true;
	}
	left = 1000 - (now - ac->rate_start);
	tv.tv_sec = 0;
	tv.tv_usec = (suseconds_t)(left * 1000);
	ac->paused = true;
	bufferevent_disable(ac->bev, EV_READ);
	evtimer_add(ac->resume_ev, &tv);
	log_debug("agent %s: %u messages this second, reading paused",
	    ac_label(ac), AGENTGW_MAX_RATE);
	return false;
}

static void
ac_open_failed(struct agentconn *ac, const struct agp_msg *m)
{
	struct agent_token *t = token_find(m->token);
	struct upstream *up;
	char why[96];

	if (t == NULL || t->exp != ac->exp) {
		log_info("agent %s: OPEN_FAILED for a token not issued to it "
		    "(or used, or expired): ignored", ac_label(ac));
		return;
	}
	up = t->up;
	token_free(t);
	/* ST_NODEV: no longer a device of the agent's (gone, not retried) */
	if (m->status == ST_NODEV && up->dev != NULL)
		up->dev->seen = false;
	snprintf(why, sizeof(why), "the agent could not open the import: %s",
	    usbip_st_name(m->status));
	upstream_dial_failed(up, (int)m->status, why);
}

/* One message from an agent, decoded; false if the connection closed. */
static bool
ac_message(struct agentconn *ac, const struct agp_msg *m)
{
	struct exporter *exp = ac->exp;
	struct agp_msg r;
	char why[96];

	if (m->seq != ac->seq_in + 1) {
		snprintf(why, sizeof(why), "sequence number %u, expected %u",
		    m->seq, ac->seq_in + 1);
		ac_close(ac, why, true);
		return false;
	}
	ac->seq_in = m->seq;
	switch (m->type) {
	case AGP_SNAPSHOT_BEGIN:
		if (ac->snapshot) {
			ac_close(ac, "SNAPSHOT_BEGIN inside a snapshot", true);
			return false;
		}
		ac->snapshot = true;
		ac->snap_count = m->count;
		ac->snap_n = 0;
		ac->snap_deadline = now_ms() + AGENTGW_SNAPSHOT_MS;
		exporter_snapshot_begin(exp);
		break;
	case AGP_SNAPSHOT_END:
		if (!ac->snapshot) {
			ac_close(ac, "SNAPSHOT_END without SNAPSHOT_BEGIN", true);
			return false;
		}
		if (ac->snap_n != ac->snap_count) {
			snprintf(why, sizeof(why), "snapshot of %u devices "
			    "announced %u", ac->snap_n, ac->snap_count);
			ac_close(ac, why, true);
			return false;
		}
		ac->snapshot = false;
		exporter_snapshot_end(exp);
		break;
	case AGP_DEV_ADDED:
		if (ac->snapshot && ++ac->snap_n > ac->snap_count) {
			ac_close(ac, "snapshot longer than announced", true);
			return false;
		}
		exporter_record(exp, &m->dev, m->intf);
		break;
	case AGP_DEV_REMOVED:
		exporter_removed(exp, m->busid, "the agent reports it removed");
		break;
	case AGP_OPEN_FAILED:
		ac_open_failed(ac, m);
		break;
	case AGP_PING:
		memset(&r, 0, sizeof(r));
		r.type = AGP_PONG;
		r.echo = m->echo;
		ac_send(ac, &r);
		break;
	case AGP_PONG:
		break;
	case AGP_BYE:
		snprintf(why, sizeof(why), "the agent said BYE (%u)", m->reason);
		ac_close(ac, why, false);
		return false;
	default:	/* the codec lets no other type from an agent through */
		ac_close(ac, "unexpected message", true);
		return false;
	}
	return !ac->dead && ac->state == AC_UP;
}

static void
ac_up(struct agentconn *ac, const char *name)
{
	struct exporter *exp = ac->exp;

	usbgw_strlcpy(ac->name, name, sizeof(ac->name));
	ac_set_state(ac, AC_UP, NULL);
	ac->fails = 0;
	ac->seq_in = ac->seq_out = 0;
	ac->last_rx = ac->last_tx = now_ms();
	if (exp->ctl != NULL && exp->ctl != ac)
		ac_close(exp->ctl, "replaced by a new control connection",
		    false);
	exp->ctl = ac;
	log_info("agent %s (%s, calls itself %s): control connection up%s",
	    exp->name, ac->peer, name, ac->dialin ? " (dial-out)" : "");
	exporter_ctl_changed(exp, "control connection up");
}

/* Listen mode: the agent's OP_REP_USBGW. */
static int
ac_hello_reply(struct agentconn *ac, struct evbuffer *in)
{
	struct agp_hello h;
	const char *why = NULL;
	size_t len = evbuffer_get_length(in);
	uint8_t *p = evbuffer_pullup(in, len < AGP_HELLO_MAX ? -1 :
	    AGP_HELLO_MAX);
	char msg[96];
	int r;

	r = agp_hello_decode(p, len, USBIP_FROM_SERVER, &h, &why);
	if (r == AGP_NEED_MORE)
		return 0;
	if (r < 0) {
		ac_close(ac, why, true);
		return -1;
	}
	evbuffer_drain(in, (size_t)r);
	if (h.ext_version != AGP_EXT_VERSION) {
		snprintf(msg, sizeof(msg), "the agent speaks extension "
		    "version %u, not %u", h.ext_version, AGP_EXT_VERSION);
		ac_close(ac, msg, false);
		return -1;
	}
	if (h.kind != AGP_KIND_CONTROL) {
		ac_close(ac, "reply to CONTROL of another kind", true);
		return -1;
	}
	if (h.status != ST_OK) {
		ac_close(ac, "the agent refused the control connection", false);
		return -1;
	}
	ac_up(ac, h.name);
	return 0;
}

/* ---- dial-in: CONTROL and DIALBACK on the listener --------------------- */

/* Refused: ST_NA, closed once written, an agent-refused row (budgeted). */
static void
ac_refuse(struct agentconn *ac, uint16_t kind, const char *why)
{
	uint8_t rep[AGP_HELLO_HDR_LEN];
	size_t n = agp_empty_rep_encode(rep, ST_NA, kind);
	int fd = bufferevent_getfd(ac->bev);

	if (hostlimit_audit(ac->host, HL_AGENT_REFUSED)) {
		log_info("agent connection from %s refused: %s", ac->peer, why);
		store_audit("agent-refused", NULL, ac->host, why);
	} else
		log_debug("agent connection from %s refused: %s", ac->peer,
		    why);
	/* a short reply on a fresh socket: written now, then closed */
	if (fd >= 0)
		(void)send(fd, rep, n, MSG_NOSIGNAL | MSG_DONTWAIT);
	ac_close(ac, why, false);
}

/*
 * A dial-out agent's transport against its declaration (tls required,
 * optional, off), and over TLS its certificate against the name the
 * hello (CONTROL) or the token (DIALBACK) says: the name is bound to the
 * certificate, so an agent certified as tc17 cannot be tc18.  true (why
 * set) if refused.
 */
static bool
ac_transport_refused(const struct agentconn *ac, const struct exporter *exp,
    const char *what, char *why, size_t whylen)
{
	if (!ac->tls && exp->tls == EXP_TLS_REQUIRED) {
		snprintf(why, whylen, "%s from agent %s in plaintext: its tls "
		    "is required", what, exp->name);
		return true;
	}
	if (ac->tls && exp->tls == EXP_TLS_OFF) {
		snprintf(why, whylen, "%s from agent %s over TLS: it is "
		    "declared tls=off", what, exp->name);
		return true;
	}
	if (ac->tls && strcmp(ac->cert.name, exp->name) != 0) {
		snprintf(why, whylen, "%s as agent %s with the certificate "
		    "of %s: the name must be the certificate's", what,
		    exp->name, ac->cert.name);
		return true;
	}
	return false;
}

static struct exporter *
dialout_find(const char *name)
{
	struct exporter *exp = exporter_find(name);

	return exp != NULL && exp->kind == EXP_KIND_DIALOUT ? exp : NULL;
}

static void
ac_dialin_control(struct agentconn *ac, const struct agp_hello *h)
{
	struct exporter *exp = dialout_find(h->name);
	uint8_t rep[AGP_HELLO_MAX];
	char why[256], esc[64];
	size_t n;

	if (exp == NULL) {
		snprintf(why, sizeof(why), "CONTROL from agent \"%s\": no "
		    "such agent declared", log_escape(esc, sizeof(esc),
		    h->name, sizeof(h->name)));
		return ac_refuse(ac, AGP_KIND_CONTROL, why);
	}
	if (!usbgw_addr_in(&exp->net, exp->net_prefix, &ac->addr)) {
		snprintf(why, sizeof(why), "CONTROL from agent %s: address "
		    "outside %.64s", exp->name, exp->host);
		return ac_refuse(ac, AGP_KIND_CONTROL, why);
	}
	if (ac_transport_refused(ac, exp, "CONTROL", why, sizeof(why)))
		return ac_refuse(ac, AGP_KIND_CONTROL, why);
	/* several gateways (4.7): ours to lease, or the agent tries its next */
	if (!lease_take(exp)) {
		snprintf(why, sizeof(why), "CONTROL from agent %s: its lease "
		    "is held by gateway %.64s", exp->name,
		    exp->lease_holder[0] != '\0' ? exp->lease_holder : "?");
		return ac_refuse(ac, AGP_KIND_CONTROL, why);
	}
	n = agp_control_rep_encode(rep, ST_OK, AC_GATEWAY_NAME, 0,
	    AGENTGW_PING_S);
	bufferevent_write(ac->bev, rep, n);
	ndialin--;
	ac->exp = exp;
	ac_up(ac, h->name);
}

static void
ac_dialin_dialback(struct agentconn *ac, const struct agp_hello *h)
{
	struct agent_token *t = token_find(h->token);
	struct exporter *exp;
	struct upstream *up;
	struct bufferevent *bev;
	struct tlsid_peer cert;
	bool tls;
	uint8_t rep[AGP_HELLO_HDR_LEN];
	char why[256];
	size_t n;

	if (t == NULL || now_ms() >= t->expires)
		return ac_refuse(ac, AGP_KIND_DIALBACK, "DIALBACK with a "
		    "token not issued, used or expired");
	exp = t->exp;
	if (!usbgw_addr_in(&exp->net, exp->net_prefix, &ac->addr)) {
		snprintf(why, sizeof(why), "DIALBACK for agent %s from an "
		    "address outside %.64s", exp->name, exp->host);
		/* a token seen from elsewhere is spent: fail closed */
		up = t->up;
		token_free(t);
		upstream_dial_failed(up, -1, "dial-back refused");
		return ac_refuse(ac, AGP_KIND_DIALBACK, why);
	}
	if (strcmp(t->busid, h->busid) != 0 ||
	    ac_transport_refused(ac, exp, "DIALBACK", why, sizeof(why))) {
		if (strcmp(t->busid, h->busid) != 0)
			snprintf(why, sizeof(why), "DIALBACK for agent %s: the "
			    "token was issued for another busid", exp->name);
		up = t->up;
		token_free(t);
		upstream_dial_failed(up, -1, "dial-back refused");
		return ac_refuse(ac, AGP_KIND_DIALBACK, why);
	}
	if (evbuffer_get_length(bufferevent_get_input(ac->bev)) != 0)
		return ac_close(ac, "bytes after DIALBACK before the import",
		    true);
	up = t->up;
	token_free(t);
	n = agp_empty_rep_encode(rep, ST_OK, AGP_KIND_DIALBACK);
	bufferevent_write(ac->bev, rep, n);
	log_debug("%s: dial-back from agent %s (%s)", up->dev->busid,
	    exp->name, ac->peer);
	/* the connection is the claim's from here on */
	bev = ac->bev;
	ac->bev = NULL;
	tls = ac->tls;
	cert = ac->cert;
	bufferevent_setcb(bev, NULL, NULL, NULL, NULL);
	ac_close(ac, "dial-back handed to its claim", false);
	upstream_dialed(up, bev, tls ? &cert : NULL);
}

static int
ac_hello_request(struct agentconn *ac, struct evbuffer *in)
{
	struct agp_hello h;
	const char *why = NULL;
	size_t len = evbuffer_get_length(in);
	uint8_t *p = evbuffer_pullup(in, len < AGP_HELLO_MAX ? -1 :
	    AGP_HELLO_MAX);
	int r;

	r = agp_hello_decode(p, len, USBIP_FROM_CLIENT, &h, &why);
	if (r == AGP_NEED_MORE)
		return 0;
	if (r < 0) {
		ac_close(ac, why, true);
		return -1;
	}
	evbuffer_drain(in, (size_t)r);
	if (h.ext_version != AGP_EXT_VERSION) {
		/* ST_NA with the version spoken here */
		ac_refuse(ac, h.kind, "extension version not spoken here");
		return -1;
	}
	if (h.kind == AGP_KIND_CONTROL)
		ac_dialin_control(ac, &h);
	else
		ac_dialin_dialback(ac, &h);
	return ac->state == AC_UP ? 0 : -1;
}

/* ---- the connection's callbacks ---------------------------------------- */

static void
ac_read(struct bufferevent *bev, void *arg)
{
	struct agentconn *ac = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct agp_msg m;
	const char *why = NULL;
	size_t len;
	uint8_t *p;
	int r;

	if (ac->dead || ac->state == AC_CLOSED)
		return;
	ac->last_rx = now_ms();
	if (ac->state == AC_HELLO) {
		if ((ac->dialin ? ac_hello_request(ac, in) :
		    ac_hello_reply(ac, in)) == -1 || ac->state != AC_UP)
			return;
	}
	while (ac->state == AC_UP && !ac->paused &&
	    (len = evbuffer_get_length(in)) > 0) {
		p = evbuffer_pullup(in, len < AGP_MSG_MAX ? -1 : AGP_MSG_MAX);
		r = agp_msg_decode(p, len, AGP_FROM_AGENT, &m, &why);
		if (r == AGP_NEED_MORE)
			return;
		if (r < 0)
			return ac_close(ac, why, true);
		if (!ac_rate_ok(ac))
			return;
		evbuffer_drain(in, (size_t)r);
		if (!ac_message(ac, &m))
			return;
	}
}

static void
ac_event(struct bufferevent *bev, short what, void *arg)
{
	struct agentconn *ac = arg;
	uint8_t req[AGP_HELLO_MAX], nonce[AGP_NONCE_LEN];
	size_t n;

	if (what & BEV_EVENT_CONNECTED) {
		/* with tls required, gw_connect_tls checked the certificate */
		ac->tls = ac->exp != NULL && ac->exp->tls == EXP_TLS_REQUIRED;
		gw_socket_tune(bufferevent_getfd(bev));
		gw_socket_keepalive(bufferevent_getfd(bev));
		if (getrandom(nonce, sizeof(nonce), 0) != sizeof(nonce))
			memset(nonce, 0, sizeof(nonce));
		n = agp_control_req_encode(req, AC_GATEWAY_NAME, 0, nonce);
		bufferevent_write(bev, req, n);
		ac_set_state(ac, AC_HELLO, "CONTROL sent");
		return;
	}
	if (gw_tls_error() != NULL && ac->exp != NULL) {
		exporter_tls_refused(ac->exp, gw_tls_error());
		ac_close(ac, gw_tls_error(), false);
	} else if (what & BEV_EVENT_EOF)
		ac_close(ac, ac->state == AC_UP ? "the agent closed the control "
		    "connection" : "the agent closed the connection (not an "
		    "agent, or it refused us)", false);
	else
		ac_close(ac, ac->state == AC_CONNECTING ? "cannot reach the "
		    "agent" : "control connection error", false);
}

/* Every second: hello deadline, snapshot deadline, heartbeat. */
static void
ac_tick(evutil_socket_t fd, short what, void *arg)
{
	struct agentconn *ac = arg;
	struct timeval tv = { AC_TICK_MS / 1000, 0 };
	uint64_t now = now_ms();
	struct agp_msg m;

	if (ac->dead || ac->state == AC_CLOSED)
		return;
	if (ac->state != AC_UP) {
		if (now >= ac->hello_deadline) {
			ac_close(ac, "no CONTROL exchange within 10 s", false);
			return;
		}
	} else {
		if (ac->snapshot && now >= ac->snap_deadline) {
			ac_close(ac, "snapshot unfinished after 10 s", true);
			return;
		}
		if (now - ac->last_rx >= AGENTGW_SILENT_S * 1000ull &&
		    !ac->paused) {
			ac_close(ac, "the agent was silent for 45 s", false);
			return;
		}
		if (now - ac->last_tx >= AGENTGW_PING_S * 1000ull) {
			memset(&m, 0, sizeof(m));
			m.type = AGP_PING;
			m.echo = now;
			ac_send(ac, &m);
		}
	}
	if (!ac->dead && ac->state != AC_CLOSED)
		evtimer_add(ac->tick_ev, &tv);
}

static struct agentconn *
ac_new(void)
{
	struct agentconn *ac = xcalloc(1, sizeof(*ac));

	ac->tick_ev = evtimer_new(gw->base, ac_tick, ac);
	ac->resume_ev = evtimer_new(gw->base, ac_resume, ac);
	TAILQ_INSERT_TAIL(&conns, ac, entry);
	return ac;
}

static void
ac_start_timers(struct agentconn *ac)
{
	struct timeval tv = { AC_TICK_MS / 1000, 0 };

	ac->hello_deadline = now_ms() + AC_HELLO_MS;
	ac->rate_start = now_ms();
	ac->rate_n = 0;
	evtimer_add(ac->tick_ev, &tv);
}

/* ---- listen mode ------------------------------------------------------- */

static void
ac_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	ac_connect(arg);
}

static void
ac_connect(struct agentconn *ac)
{
	struct exporter *exp = ac->exp;

	if (exp == NULL || exp->dead)
		return;
	ac_set_state(ac, AC_CONNECTING, NULL);
	ac_start_timers(ac);
	if ((exp->tls == EXP_TLS_REQUIRED ? gw_connect_tls(exp->host,
	    exp->port, exp->name, AC_HELLO_MS, &ac->bev, ac_read, ac_event,
	    ac) : gw_connect(exp->host, exp->port, &ac->bev, ac_read,
	    ac_event, ac)) == -1) {
		ac->bev = NULL;
		ac_close(ac, "cannot start a connection to the agent", false);
		return;
	}
	/* bounded input: a message at most, twice */
	bufferevent_setwatermark(ac->bev, EV_READ, 0, 2 * AGP_MSG_MAX);
}

void
agentgw_start(struct exporter *exp)
{
	struct agentconn *ac = ac_new();

	ac->exp = exp;
	snprintf(ac->peer, sizeof(ac->peer), "%.255s:%u", exp->host,
	    exp->port);
	usbgw_strlcpy(ac->host, exp->host, sizeof(ac->host));
	ac->retry_ev = evtimer_new(gw->base, ac_retry_cb, ac);
	ac->state = AC_CLOSED;
	/* the first connect soon, spread like the first polls */
	ac->fails = 0;
	{
		unsigned ms = usbgw_random_uniform(gw->poll_ms / 10 + 1);
		struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

		evtimer_add(ac->retry_ev, &tv);
	}
}

void
agentgw_stop(struct exporter *exp)
{
	struct agentconn *ac, *next;
	struct agent_token *t, *tn;

	for (t = TAILQ_FIRST(&tokens); t != NULL; t = tn) {
		tn = TAILQ_NEXT(t, entry);
		if (t->exp == exp)
			token_free(t);	/* its claim is closed with exp */
	}
	for (ac = TAILQ_FIRST(&conns); ac != NULL; ac = next) {
		next = TAILQ_NEXT(ac, entry);
		if (ac->exp != exp || ac->dead)
			continue;
		ac->dialin = true;	/* no reconnect: it goes */
		if (ac->state == AC_CLOSED) {
			ac->dead = true;
			TAILQ_REMOVE(&conns, ac, entry);
			gw_defer(ac_free, ac);
		} else {
			ac->exp = NULL;
			if (exp->ctl == ac)
				exp->ctl = NULL;
			ndialin++;	/* balanced by ac_close */
			ac_close(ac, "exporter removed", false);
		}
	}
}

/* ---- dial-in ----------------------------------------------------------- */

/* The same source for the hello slots: an IPv4 address, an IPv6 /64. */
static bool
same_source(const struct usbgw_addr *a, const struct usbgw_addr *b)
{
	if (a->family != b->family)
		return false;
	return usbgw_addr_in(a, a->family == AF_INET ? 32 : 64, b);
}

/* The oldest dial-in connection still in its hello (from `from`, or
 * from anywhere if NULL), and how many there are. */
static struct agentconn *
dialin_oldest(const struct usbgw_addr *from, unsigned *n)
{
	struct agentconn *ac, *oldest = NULL;

	*n = 0;
	TAILQ_FOREACH(ac, &conns, entry) {
		if (ac->dead || !ac->dialin || ac->exp != NULL ||
		    ac->state != AC_HELLO)
			continue;
		if (from != NULL && !same_source(from, &ac->addr))
			continue;
		if (oldest == NULL)
			oldest = ac;	/* conns is in the order of arrival */
		(*n)++;
	}
	return oldest;
}

/*
 * A hello slot for a new dial-in connection, always: an address that
 * holds AGENTGW_MAX_DIALIN_PER_HOST of them loses its oldest, and when
 * all AGENTGW_MAX_DIALIN are taken the oldest of all goes.  Refusing
 * the newcomer instead would let anybody who reaches the USB/IP port
 * lock every dial-out agent out (CONTROL and DIALBACK alike) with 256
 * stalled connections every 10 s; now a stalled hello only ever
 * displaces another stalled hello, and an agent's own hello, done in
 * one round trip, is displaced only by 32 (or 256) newer ones arriving
 * within that round trip.
 */
static void
dialin_make_room(const char *host, const struct usbgw_addr *addr)
{
	struct agentconn *old;
	unsigned n;
	char why[96];

	if (ndialin < AGENTGW_MAX_DIALIN_PER_HOST)
		return;		/* (the usual case: no scan) */
	old = dialin_oldest(addr, &n);
	if (old != NULL && n >= AGENTGW_MAX_DIALIN_PER_HOST)
		snprintf(why, sizeof(why), "%u hellos from this address at "
		    "once, the oldest goes", n);
	else if (ndialin >= AGENTGW_MAX_DIALIN &&
	    (old = dialin_oldest(NULL, &n)) != NULL)
		snprintf(why, sizeof(why), "%u hellos at once, the oldest "
		    "goes", n);
	else
		return;
	/* debug: an attacker must not fill the log either */
	log_debug("agent connection from %s closed: %s", old->peer, why);
	hostlimit_refused(host);
	ac_close(old, why, false);
}

void
agentgw_accept(struct bufferevent *bev, const char *host,
    const struct usbgw_addr *addr, const struct tlsid_peer *cert)
{
	struct agentconn *ac;
	int fd = bufferevent_getfd(bev);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char port[8] = "?";

	dialin_make_room(host, addr);
	ac = ac_new();
	ac->dialin = true;
	ac->bev = bev;
	ac->addr = *addr;
	if (cert != NULL) {
		ac->tls = true;
		ac->cert = *cert;
	}
	usbgw_strlcpy(ac->host, host, sizeof(ac->host));
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0)
		snprintf(port, sizeof(port), "%u", ntohs(ss.ss_family ==
		    AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port :
		    ((struct sockaddr_in *)&ss)->sin_port));
	if (cert != NULL)
		snprintf(ac->peer, sizeof(ac->peer), "%s (tls %s)", host,
		    cert->name);
	else
		snprintf(ac->peer, sizeof(ac->peer), "%s:%s", host, port);
	ac->state = AC_HELLO;
	ndialin++;
	ac_start_timers(ac);
	bufferevent_setcb(bev, ac_read, NULL, ac_event, ac);
	bufferevent_set_timeouts(bev, NULL, NULL);
	bufferevent_setwatermark(bev, EV_READ, 0, 2 * AGP_MSG_MAX);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	gw_socket_keepalive(fd);
	ac_read(bev, ac);
}

void
agentgw_shutdown(void)
{
	struct agentconn *ac;
	struct agent_token *t;

	while ((t = TAILQ_FIRST(&tokens)) != NULL)
		token_free(t);
	while ((ac = TAILQ_FIRST(&conns)) != NULL) {
		if (ac->exp != NULL)
			agentgw_stop(ac->exp);
		else {
			ac->dialin = true;
			if (ac->state == AC_CLOSED) {
				ac->dead = true;
				TAILQ_REMOVE(&conns, ac, entry);
				gw_defer(ac_free, ac);
			} else
				ac_close(ac, "gateway shutting down", false);
		}
	}
}
