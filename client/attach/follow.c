/*
 * usbgw-attach --follow (protocol.md 1.10.8): attach every device the
 * gateway says is authorized for this host, as soon as it says so; attach
 * again after a blip or a gateway restart; let go of what it withdraws.
 *
 * Threads.  The main thread only waits for SIGTERM/SIGINT.  Each gateway
 * has a thread of its own that holds the subscription (OP_REQ_FOLLOW on
 * a connection of its own, TLS with -T) and decides which busids to
 * attach; each attachment runs in a thread of its own through conn.c,
 * exactly as the single-shot mode does (connect, OP_REQ_IMPORT, vhci
 * attach of a socketpair end, the bounded relay), so a slow gateway or
 * a long import holds up nothing else.  A gateway thread stops an
 * attachment by shutting its socket down (the relay sees the end, the
 * vhci port is detached) and joins it.
 *
 * Fail closed:
 *  - the list is a hint: a busid is only ever imported, through the
 *    normal import, where the gateway decides again; what the gateway
 *    sends can make this program import a busid of that gateway, nothing
 *    else (the busid passes usbip_busid_valid(), goes into OP_REQ_IMPORT
 *    and nowhere else);
 *  - only what the current subscription's list says is attached: while
 *    there is no subscription (gateway down, blip), nothing new is
 *    started, and the next list's end lets go of whatever it does not
 *    name;
 *  - a busid withdrawn is let go at once (the gateway also cuts the
 *    import itself) and never tried again unless authorized anew;
 *  - a malformed message, a sequence gap, a list that breaks its count,
 *    or three heartbeats of silence end the subscription with a log line.
 *
 * Back-off (bounded, with jitter): the subscription 1 s doubling to 30 s,
 * +-20 %, reset once it has stayed up for 60 s; an attachment that failed
 * or ended while still authorized 0.5 s doubling to 30 s, +-20 %, reset
 * by a new AUTHORIZED or by an attachment that lived 60 s.
 */
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>

#include "attach.h"
#include "proto/followproto.h"
#include "base/log.h"
#include "tls/tlsclient.h"
#include "base/util.h"
#include "host/vhci.h"

#define SUB_FIRST_MS	1000
#define ATT_FIRST_MS	500
#define BACKOFF_MAX_MS	30000
#define BACKOFF_RESET_MS 60000
#define JITTER_PCT	20

enum fa_state {
	FA_IDLE,		/* no thread */
	FA_RUNNING,		/* its thread: importing or relaying */
};

struct fgw;

/* One busid of one gateway. */
struct fatt {
	TAILQ_ENTRY(fatt) entry;
	struct fgw	*g;
	char		 busid[USBIP_BUSID_SIZE];
	bool		 authorized;	/* in the subscription's list */
	bool		 in_list;	/* named by the list being received */
	enum fa_state	 state;
	pthread_t	 tid;
	int64_t		 next_try;	/* mono ms */
	unsigned	 tries;
	int64_t		 started;
	/* under g->mu, shared with its thread */
	int		 fd;		/* its gateway socket, -1 */
	bool		 cancel;
	bool		 done;
	bool		 attached;	/* reached the relay */
};

/* One gateway: its subscription and its busids. */
struct fgw {
	const char	*addr;
	SSL_CTX		*ctx;
	int		 timeout_s;
	pthread_t	 tid;
	pthread_mutex_t	 mu;
	int		 wake[2];	/* attachments' ends, the stop */
	TAILQ_HEAD(, fatt) atts;
	unsigned	 natts;
	/* the subscription */
	struct att_conn	 sub;
	bool		 up;
	bool		 listed;	/* the list arrived: changes follow */
	bool		 listing;	/* inside LIST_BEGIN .. LIST_END */
	uint32_t	 list_count, list_got;
	uint32_t	 seq_in, seq_out;
	uint16_t	 heartbeat_s;
	int64_t		 last_rx, up_since, next_sub;
	unsigned	 sub_tries;
	uint8_t		 in[FLP_MSG_MAX * 16];
	size_t		 inlen;
};

static struct vhci	*vh;
static pthread_mutex_t	 vhci_mu = PTHREAD_MUTEX_INITIALIZER;
static volatile sig_atomic_t fstop;

static int64_t
backoff_ms(unsigned first, unsigned tries)
{
	int64_t ms = first;
	unsigned i;

	for (i = 0; i < tries && ms < BACKOFF_MAX_MS; i++)
		ms *= 2;
	if (ms > BACKOFF_MAX_MS)
		ms = BACKOFF_MAX_MS;
	/* +-JITTER_PCT, so that many hosts do not come back at once */
	return ms - ms * JITTER_PCT / 100 +
	    usbgw_random_uniform((uint32_t)(ms * 2 * JITTER_PCT / 100) + 1);
}

static void
wake(struct fgw *g)
{
	ssize_t r;

	do
		r = write(g->wake[1], "x", 1);
	while (r == -1 && errno == EINTR);
}

/* ---- one attachment, in its own thread ---------------------------------- */

static void
att_done(struct fatt *a, struct att_conn *c)
{
	struct fgw *g = a->g;

	pthread_mutex_lock(&g->mu);
	a->fd = -1;
	att_close(c);
	a->done = true;
	pthread_mutex_unlock(&g->mu);
	wake(g);
}

/*
 * The context connections are made with: renewal (follow_run's main
 * thread) swaps it under ctx_mu; a connection takes a reference of its
 * own for its handshake (the SSL keeps one after).
 */
static pthread_mutex_t ctx_mu = PTHREAD_MUTEX_INITIALIZER;

static int
att_connect_ctx(struct att_conn *c, struct fgw *g, char *err, size_t errsz)
{
	SSL_CTX *ctx;
	int r;

	pthread_mutex_lock(&ctx_mu);
	if ((ctx = g->ctx) != NULL)
		SSL_CTX_up_ref(ctx);
	pthread_mutex_unlock(&ctx_mu);
	r = att_connect(c, g->addr, ctx, g->timeout_s, err, errsz);
	SSL_CTX_free(ctx);
	return r;
}

static void *
att_main(void *arg)
{
	struct fatt	*a = arg;
	struct fgw	*g = a->g;
	struct att_conn	 c = { .fd = -1 };
	struct usbip_dev dev;
	char		 err[512];
	const char	*why;
	unsigned int	 port;
	int		 sv[2], r;
	bool		 cancel;

	if (att_connect_ctx(&c, g, err, sizeof(err)) == -1) {
		log_warnx("%s: %s", a->busid, err);
		goto out;
	}
	pthread_mutex_lock(&g->mu);
	a->fd = c.fd;
	cancel = a->cancel;
	pthread_mutex_unlock(&g->mu);
	if (cancel)
		goto out;
	r = att_import(&c, a->busid, &dev, g->timeout_s, err, sizeof(err));
	if (r != 0) {
		if (r > 0)
			log_warnx("%s: the gateway %s refused the import "
			    "(status %d)", a->busid, g->addr, r);
		else
			log_warnx("%s: %s: %s", a->busid, g->addr, err);
		goto out;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == -1) {
		log_warn("%s: socketpair", a->busid);
		goto out;
	}
	pthread_mutex_lock(&g->mu);
	cancel = a->cancel;
	pthread_mutex_unlock(&g->mu);
	pthread_mutex_lock(&vhci_mu);
	r = cancel ? -1 : vhci_attach(vh, sv[0], dev.devnum | dev.busnum << 16,
	    dev.speed, &port);
	pthread_mutex_unlock(&vhci_mu);
	close(sv[0]);		/* the kernel holds its own reference */
	if (r == -1) {
		if (!cancel)
			log_warnx("%s: vhci attach (speed %u): %s", a->busid,
			    dev.speed, strerror(errno));
		close(sv[1]);
		goto out;
	}
	(void)fcntl(sv[1], F_SETFL, fcntl(sv[1], F_GETFL) | O_NONBLOCK);
	pthread_mutex_lock(&g->mu);
	a->attached = true;
	pthread_mutex_unlock(&g->mu);
	log_info("%s from %s on vhci port %u (%04x:%04x, speed %u)", a->busid,
	    g->addr, port, dev.idVendor, dev.idProduct, dev.speed);
	why = att_relay(&c, sv[1], err, sizeof(err));
	if (err[0] != '\0')
		log_warnx("%s: %s: TLS: %s", a->busid, g->addr, err);
	pthread_mutex_lock(&g->mu);
	cancel = a->cancel;
	pthread_mutex_unlock(&g->mu);
	log_info("%s: %s; detaching vhci port %u", a->busid, cancel ?
	    "no longer authorized for this host" : why, port);
	close(sv[1]);
	pthread_mutex_lock(&vhci_mu);
	if (vhci_detach(vh, port) == -1 && errno != EINVAL && errno != ENOENT)
		log_warn("vhci detach port %u", port);
	pthread_mutex_unlock(&vhci_mu);
out:
	att_done(a, &c);
	OPENSSL_thread_stop();
	return NULL;
}

/* ---- a gateway's busids ----------------------------------------------- */

static struct fatt *
fatt_find(struct fgw *g, const char *busid)
{
	struct fatt *a;

	TAILQ_FOREACH(a, &g->atts, entry)
		if (strcmp(a->busid, busid) == 0)
			return a;
	return NULL;
}

static struct fatt *
fatt_get(struct fgw *g, const char *busid)
{
	struct fatt *a;

	if ((a = fatt_find(g, busid)) != NULL)
		return a;
	a = xcalloc(1, sizeof(*a));
	a->g = g;
	a->fd = -1;
	usbgw_strlcpy(a->busid, busid, sizeof(a->busid));
	TAILQ_INSERT_TAIL(&g->atts, a, entry);
	g->natts++;
	return a;
}

/* Stop a running attachment: its socket shut down, the relay ends. */
static void
fatt_cancel(struct fatt *a)
{
	struct fgw *g = a->g;

	pthread_mutex_lock(&g->mu);
	if (!a->cancel && !a->done) {
		a->cancel = true;
		if (a->fd != -1)
			shutdown(a->fd, SHUT_RDWR);
	}
	pthread_mutex_unlock(&g->mu);
}

static void
fatt_start(struct fatt *a, int64_t now)
{
	a->cancel = a->done = a->attached = false;
	a->started = now;
	if (pthread_create(&a->tid, NULL, att_main, a) != 0) {
		log_warnx("%s: cannot start a thread", a->busid);
		a->next_try = now + backoff_ms(ATT_FIRST_MS, a->tries++);
		return;
	}
	a->state = FA_RUNNING;
}

/*
 * One pass over the busids: reap ended threads, stop what is not
 * authorized, start what is and is due.  Returns the ms until the next
 * due start (or -1).
 */
static int64_t
fgw_reconcile(struct fgw *g, int64_t now)
{
	struct fatt *a, *next;
	int64_t wait = -1;
	bool done, attached;

	for (a = TAILQ_FIRST(&g->atts); a != NULL; a = next) {
		next = TAILQ_NEXT(a, entry);
		if (a->state == FA_RUNNING) {
			pthread_mutex_lock(&g->mu);
			done = a->done;
			attached = a->attached;
			pthread_mutex_unlock(&g->mu);
			if (done) {
				pthread_join(a->tid, NULL);
				a->state = FA_IDLE;
				if (attached && now - a->started >= BACKOFF_RESET_MS)
					a->tries = 0;
				a->next_try = now + backoff_ms(ATT_FIRST_MS,
				    a->tries);
				if (a->tries < 32)
					a->tries++;
			} else if (!a->authorized)
				fatt_cancel(a);
		}
		if (a->state == FA_IDLE && !a->authorized) {
			TAILQ_REMOVE(&g->atts, a, entry);
			g->natts--;
			free(a);
			continue;
		}
		/* only what the current list names; nothing without one */
		if (a->state != FA_IDLE || !g->listed || fstop)
			continue;
		if (now >= a->next_try)
			fatt_start(a, now);
		else if (wait == -1 || a->next_try - now < wait)
			wait = a->next_try - now;
	}
	return wait;
}

/* ---- the subscription -------------------------------------------------- */

static void
sub_close(struct fgw *g, const char *why)
{
	int64_t now = att_mono_ms();

	if (g->up)
		log_warnx("%s: follow: subscription closed: %s", g->addr, why);
	att_close(&g->sub);
	g->up = g->listed = g->listing = false;
	g->inlen = 0;
	if (now - g->up_since >= BACKOFF_RESET_MS)
		g->sub_tries = 0;
	g->next_sub = now + backoff_ms(SUB_FIRST_MS, g->sub_tries);
	if (g->sub_tries < 32)
		g->sub_tries++;
}

static void
sub_open(struct fgw *g)
{
	uint8_t req[FLP_HELLO_MAX], rep[FLP_HELLO_HDR_LEN + FLP_REP_BODY];
	struct flp_hello h;
	const char *why = NULL;
	char err[512];
	int64_t deadline;
	size_t n;
	int r;

	g->up_since = att_mono_ms();
	if (att_connect_ctx(&g->sub, g, err, sizeof(err)) == -1) {
		log_warnx("follow: %s", err);
		goto fail;
	}
	deadline = att_mono_ms() + g->timeout_s * 1000LL;
	n = flp_req_encode(req, 0);
	if (att_write(&g->sub, req, n, g->timeout_s * 1000, err,
	    sizeof(err)) == -1 ||
	    att_read(&g->sub, rep, FLP_HELLO_HDR_LEN, deadline, err,
	    sizeof(err)) == -1) {
		log_warnx("%s: follow: subscribing: %s", g->addr, err);
		goto fail;
	}
	r = flp_hello_decode(rep, FLP_HELLO_HDR_LEN, USBIP_FROM_SERVER, &h,
	    &why);
	if (r == FLP_NEED_MORE && h.len <= FLP_REP_BODY && h.len > 0) {
		if (att_read(&g->sub, rep + FLP_HELLO_HDR_LEN, h.len, deadline,
		    err, sizeof(err)) == -1) {
			log_warnx("%s: follow: subscribing: %s", g->addr, err);
			goto fail;
		}
		r = flp_hello_decode(rep, FLP_HELLO_HDR_LEN + h.len,
		    USBIP_FROM_SERVER, &h, &why);
	}
	if (r <= 0 || h.ext_version != FLP_EXT_VERSION) {
		log_warnx("%s: follow: malformed reply to the subscription: %s",
		    g->addr, r < 0 ? why : r == 0 ? "truncated" :
		    "another version");
		goto fail;
	}
	if (h.status != ST_OK) {
		log_warnx("%s: follow: the gateway refused the subscription "
		    "(status %u)", g->addr, h.status);
		goto fail;
	}
	g->up = true;
	g->seq_in = g->seq_out = 0;
	g->heartbeat_s = h.heartbeat_s;
	g->last_rx = att_mono_ms();
	(void)fcntl(g->sub.fd, F_SETFL, fcntl(g->sub.fd, F_GETFL) | O_NONBLOCK);
	log_info("%s: follow: subscribed (the gateway knows this host as %s)",
	    g->addr, h.host);
	return;
fail:
	g->up = true;		/* for sub_close's bookkeeping */
	g->up_since = att_mono_ms();
	att_close(&g->sub);
	g->up = false;
	sub_close(g, "");
}

/* A message broke the protocol: the subscription ends. */
static int
sub_malformed(struct fgw *g, const char *why)
{
	char msg[160];

	snprintf(msg, sizeof(msg), "malformed message: %s", why);
	sub_close(g, msg);
	return -1;
}

static int
sub_message(struct fgw *g, const struct flp_msg *m)
{
	struct fatt *a;
	uint8_t out[FLP_MSG_MAX];
	struct flp_msg pong;
	char err[256];
	size_t n;

	if (m->seq != g->seq_in + 1)
		return sub_malformed(g, "sequence number out of order");
	g->seq_in = m->seq;
	switch (m->type) {
	case FLP_LIST_BEGIN:
		if (g->listing || g->listed)
			return sub_malformed(g, "a second list");
		g->listing = true;
		g->list_count = m->count;
		g->list_got = 0;
		TAILQ_FOREACH(a, &g->atts, entry)
			a->in_list = false;
		return 0;
	case FLP_AUTHORIZED:
		if (!g->listing && !g->listed)
			return sub_malformed(g, "AUTHORIZED before the list");
		a = fatt_find(g, m->busid);
		if (g->listing) {
			if (++g->list_got > g->list_count)
				return sub_malformed(g, "more devices than the "
				    "list's count");
			if (a != NULL && a->in_list)
				return sub_malformed(g, "a busid twice in the "
				    "list");
		} else if (a != NULL && a->authorized)
			return sub_malformed(g, "AUTHORIZED twice");
		if (a == NULL && g->natts >= FLP_MAX_DEVICES)
			return sub_malformed(g, "more than 1024 devices");
		a = fatt_get(g, m->busid);
		if (g->listing) {
			a->in_list = true;
			if (!a->authorized)
				a->tries = 0, a->next_try = 0;
			return 0;
		}
		log_info("%s: follow: %s authorized for this host", g->addr,
		    m->busid);
		a->authorized = true;
		a->tries = 0;
		a->next_try = 0;	/* at once */
		return 0;
	case FLP_LIST_END:
		if (!g->listing)
			return sub_malformed(g, "LIST_END without LIST_BEGIN");
		if (g->list_got != g->list_count)
			return sub_malformed(g, "fewer devices than the list's "
			    "count");
		g->listing = false;
		g->listed = true;
		g->sub_tries = 0;	/* a working subscription */
		TAILQ_FOREACH(a, &g->atts, entry)
			a->authorized = a->in_list;
		log_info("%s: follow: %u device%s authorized for this host",
		    g->addr, g->list_count, g->list_count == 1 ? "" : "s");
		return 0;
	case FLP_WITHDRAWN:
		if (!g->listed)
			return sub_malformed(g, "WITHDRAWN before the list's "
			    "end");
		a = fatt_find(g, m->busid);
		if (a == NULL || !a->authorized)
			return sub_malformed(g, "WITHDRAWN of a busid not "
			    "authorized");
		log_info("%s: follow: %s withdrawn (%s)", g->addr, m->busid,
		    flp_reason_name(m->reason));
		a->authorized = false;
		return 0;
	case FLP_PING:
		memset(&pong, 0, sizeof(pong));
		pong.type = FLP_PONG;
		pong.seq = ++g->seq_out;
		pong.echo = m->echo;
		n = flp_msg_encode(out, &pong);
		if (att_write(&g->sub, out, n, g->timeout_s * 1000, err,
		    sizeof(err)) == -1) {
			sub_close(g, err);
			return -1;
		}
		return 0;
	default:
		return sub_malformed(g, "unexpected message type");
	}
}

/* Read what is there (non-blocking) and handle whole messages. */
static void
sub_input(struct fgw *g)
{
	struct flp_msg m;
	const char *why = NULL;
	size_t off;
	ssize_t r;
	int e, d;

	for (;;) {
		if (g->sub.tls != NULL) {
			ERR_clear_error();
			r = SSL_read(g->sub.tls, g->in + g->inlen,
			    (int)(sizeof(g->in) - g->inlen));
			if (r <= 0) {
				e = SSL_get_error(g->sub.tls, (int)r);
				if (e == SSL_ERROR_WANT_READ ||
				    e == SSL_ERROR_WANT_WRITE)
					return;
				sub_close(g, e == SSL_ERROR_ZERO_RETURN ||
				    e == SSL_ERROR_SYSCALL ? "the gateway "
				    "closed the connection" : "TLS error");
				return;
			}
		} else {
			r = read(g->sub.fd, g->in + g->inlen,
			    sizeof(g->in) - g->inlen);
			if (r == -1 && (errno == EAGAIN || errno == EINTR))
				return;
			if (r <= 0) {
				sub_close(g, r == 0 ? "the gateway closed the "
				    "connection" : strerror(errno));
				return;
			}
		}
		g->inlen += (size_t)r;
		g->last_rx = att_mono_ms();
		for (off = 0; off < g->inlen; off += (size_t)d) {
			d = flp_msg_decode(g->in + off, g->inlen - off,
			    FLP_FROM_GATEWAY, &m, &why);
			if (d == FLP_NEED_MORE)
				break;
			if (d < 0) {
				sub_malformed(g, why);
				return;
			}
			if (sub_message(g, &m) == -1)
				return;
		}
		memmove(g->in, g->in + off, g->inlen - off);
		g->inlen -= off;
	}
}

static void *
fgw_main(void *arg)
{
	struct fgw *g = arg;
	struct pollfd p[2];
	struct fatt *a;
	int64_t now, wait, t;
	char buf[64];

	while (!fstop) {
		now = att_mono_ms();
		if (!g->up && now >= g->next_sub)
			sub_open(g);
		now = att_mono_ms();
		if (g->up && now - g->last_rx > 3000LL * g->heartbeat_s)
			sub_close(g, "the gateway is silent (three "
			    "heartbeats)");
		wait = fgw_reconcile(g, now);
		t = g->up ? g->last_rx + 3000LL * g->heartbeat_s - now + 1 :
		    g->next_sub - now;
		if (t < 0)
			t = 0;
		if (wait == -1 || t < wait)
			wait = t;
		p[0].fd = g->wake[0];
		p[0].events = POLLIN;
		p[1].fd = g->up ? g->sub.fd : -1;
		p[1].events = POLLIN;
		/* TLS may hold decrypted bytes that poll does not see */
		if (g->up && g->sub.tls != NULL && SSL_pending(g->sub.tls) > 0)
			wait = 0;
		if (poll(p, 2, (int)(wait > 60000 ? 60000 : wait)) == -1 &&
		    errno != EINTR)
			break;
		if (p[0].revents & POLLIN)
			while (read(g->wake[0], buf, sizeof(buf)) > 0)
				;
		if (g->up && (p[1].revents & (POLLIN | POLLHUP | POLLERR) ||
		    (g->sub.tls != NULL && SSL_pending(g->sub.tls) > 0)))
			sub_input(g);
	}
	/* stopping: every attachment ends, its vhci port detached */
	TAILQ_FOREACH(a, &g->atts, entry)
		if (a->state == FA_RUNNING)
			fatt_cancel(a);
	while ((a = TAILQ_FIRST(&g->atts)) != NULL) {
		if (a->state == FA_RUNNING)
			pthread_join(a->tid, NULL);
		TAILQ_REMOVE(&g->atts, a, entry);
		free(a);
	}
	att_close(&g->sub);
	OPENSSL_thread_stop();
	return NULL;
}

int
follow_run(struct vhci *v, SSL_CTX *ctx, char **gateways, int n,
    int timeout_s, const struct follow_renew *rn)
{
	struct fgw *gs;
	struct timespec ts;
	sigset_t set;
	SSL_CTX *nctx, *old;
	int i, sig;

	vh = v;
	/* the signals come to sigwait here, never to the workers */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	gs = xcalloc((size_t)n, sizeof(*gs));
	for (i = 0; i < n; i++) {
		struct fgw *g = &gs[i];

		g->addr = gateways[i];
		g->ctx = ctx;
		if (ctx != NULL)
			SSL_CTX_up_ref(ctx);	/* each gateway holds one */
		g->timeout_s = timeout_s;
		g->sub.fd = -1;
		TAILQ_INIT(&g->atts);
		pthread_mutex_init(&g->mu, NULL);
		if (pipe2(g->wake, O_CLOEXEC | O_NONBLOCK) == -1)
			fatal("pipe");
		if (pthread_create(&g->tid, NULL, fgw_main, g) != 0)
			fatalx("cannot start a thread");
	}
	log_info("follow: %d gateway%s, %s", n, n == 1 ? "" : "s",
	    ctx != NULL ? "TLS" : "plain USB/IP");
	for (;;) {
		if (rn == NULL || rn->renew == NULL || ctx == NULL) {
			if (sigwait(&set, &sig) != 0)
				sig = SIGTERM;
		} else {
			ts.tv_sec = rn->check_s;
			ts.tv_nsec = 0;
			if ((sig = sigtimedwait(&set, NULL, &ts)) == -1 &&
			    errno == EAGAIN) {
				/* the renewal check */
				if ((nctx = rn->renew(rn->arg)) == NULL)
					continue;
				pthread_mutex_lock(&ctx_mu);
				for (i = 0; i < n; i++) {
					old = gs[i].ctx;
					SSL_CTX_up_ref(nctx);
					gs[i].ctx = nctx;
					SSL_CTX_free(old);
				}
				pthread_mutex_unlock(&ctx_mu);
				SSL_CTX_free(nctx);
				log_info("follow: the renewed certificate is in "
				    "use for new connections; the running "
				    "ones go on");
				continue;
			}
			if (sig == -1)
				continue;	/* EINTR */
		}
		if (sig != SIGHUP)
			break;
		log_info("follow: SIGHUP ignored");
	}
	log_info("follow: signal %d: detaching everything", sig);
	fstop = 1;
	for (i = 0; i < n; i++)
		wake(&gs[i]);
	for (i = 0; i < n; i++) {
		pthread_join(gs[i].tid, NULL);
		close(gs[i].wake[0]);
		close(gs[i].wake[1]);
		SSL_CTX_free(gs[i].ctx);
		pthread_mutex_destroy(&gs[i].mu);
	}
	free(gs);
	return 0;
}
