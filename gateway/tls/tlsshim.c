/*
 * TLS terminated in-process for vhci hosts: the first-byte check, the
 * handshake on the loop, and the pump between the TLS connection and one
 * end of a socketpair (tlsshim.h).
 */
#include <sys/queue.h>
#include <sys/socket.h>

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include <openssl/err.h>

#include "base/log.h"
#include "tls/tlsclient.h"
#include "tls/tlsshim.h"
#include "base/util.h"

#define TLS_HANDSHAKE_RECORD	0x16

enum sh_state {
	SH_PEEK,		/* waiting for the first byte */
	SH_HANDSHAKE,		/* SSL_accept until done */
	SH_PUMP,		/* both ways, until one side ends */
};

struct tlsshim {
	LIST_ENTRY(tlsshim)	 entry;		/* pumps only */
	struct event_base	*base;
	enum sh_state		 state;
	evutil_socket_t		 fd;		/* the TCP connection */
	SSL_CTX			*ctx;
	SSL			*ssl;
	struct event		*io;		/* fd: peek, handshake; the pump */
	struct event		*pio;		/* the pump: the socketpair end */
	short			 ioflags, pioflags;	/* what they wait for */
	struct event		*deadline;	/* handshake; then the linger */
	struct tlsrelay		 relay;		/* SH_PUMP */
	int			 pfd;		/* our end of the socketpair */
	tlsshim_ready_fn	 ready;
	tlsshim_fail_fn		 fail;
	void			*arg;
	int			 flags;		/* TLSSHIM_CLIENT */
	bool			 ending;	/* a side ended: delivering the rest */
	char			 fpr[TLSID_FPR_HEX + 1];	/* the peer's */
	char			 name[TLSID_NAME_MAX + 1];	/* its CN */
	enum tlsid_role		 role;
	bool			 pairing;	/* a placeholder's session */
};

static LIST_HEAD(, tlsshim) pumps = LIST_HEAD_INITIALIZER(pumps);
static unsigned npumps;

static void	sh_io(evutil_socket_t, short, void *);
static void	sh_pump(evutil_socket_t, short, void *);

void
tlsshim_free(struct tlsshim *sh)
{
	if (sh == NULL)
		return;
	if (sh->state == SH_PUMP) {
		LIST_REMOVE(sh, entry);
		npumps--;
		tlsrelay_release(&sh->relay);
	}
	if (sh->io != NULL)
		event_free(sh->io);
	if (sh->pio != NULL)
		event_free(sh->pio);
	if (sh->deadline != NULL)
		event_free(sh->deadline);
	if (sh->ssl != NULL)
		SSL_free(sh->ssl);
	if (sh->fd >= 0)
		evutil_closesocket(sh->fd);
	if (sh->pfd >= 0)
		close(sh->pfd);
	SSL_CTX_free(sh->ctx);
	free(sh);
}

/* The handshake failed: tell the caller, then free. */
static void
sh_fail(struct tlsshim *sh, const char *why, int audit)
{
	sh->fail(why, audit, sh->arg);
	tlsshim_free(sh);
}

static void
sh_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct tlsshim *sh = arg;

	(void)fd;
	(void)what;
	if (sh->state == SH_PUMP) {
		/* lingering: what was left could not be delivered in time */
		log_debug("tls pump: %zu and %zu bytes undelivered at the end",
		    sh->relay.down.len, sh->relay.up.len);
		tlsshim_free(sh);
		return;
	}
	sh_fail(sh, sh->state == SH_PEEK ? "nothing sent in time (op-phase "
	    "deadline)" : "no TLS handshake in time (op-phase deadline)", 1);
}

/* Wait on ev for flags (persistent), touching the loop only on a change. */
static void
sh_arm(struct tlsshim *sh, struct event *ev, int fd, short *cur, short want,
    event_callback_fn cb)
{
	if (*cur == want)
		return;
	event_del(ev);
	event_assign(ev, sh->base, fd, want | EV_PERSIST, cb, sh);
	if (want != 0)
		event_add(ev, NULL);
	*cur = want;
}

static void
sh_wait(struct tlsshim *sh, short what)
{
	sh_arm(sh, sh->io, sh->fd, &sh->ioflags, what, sh_io);
}

/* ---- the pump ------------------------------------------------------------ */

#define SH_PASSES	16	/* relay passes per wake-up, then the loop */

/*
 * Move bytes both ways until nothing moves (or SH_PASSES, to leave the
 * loop to others: then it comes back at once), then wait for what each
 * side needs.  The end: the TLS peer ended and all it sent is delivered
 * (the socketpair end closes, the session sees EOF), the session ended
 * and all it sent is written (close_notify), or either side failed.
 */
static void
sh_pump(evutil_socket_t fd, short what, void *arg)
{
	struct tlsshim *sh = arg;
	struct tlsrelay *r = &sh->relay;
	struct timeval tv = { TLSSHIM_LINGER_MS / 1000, 0 };
	enum tlsrelay_end end = TLSRELAY_GOING;
	bool progress = true;
	int i;

	if (what & EV_READ)	/* its socket is readable again */
		tlsrelay_readable(r, fd == sh->fd, fd == sh->pfd);
	for (i = 0; i < SH_PASSES && progress; i++) {
		progress = false;
		if ((end = tlsrelay_pass(r, &progress)) != TLSRELAY_GOING)
			break;
	}
	switch (end) {
	case TLSRELAY_GOING:
		break;
	case TLSRELAY_TLS_FAILED:
		/* a client learns only here that its certificate was refused */
		(sh->flags & TLSSHIM_CLIENT ? log_warnx : log_debug)("tls "
		    "pump: %s", r->err);
		/* FALLTHROUGH */
	default:
		tlsshim_free(sh);
		return;
	}
	if ((r->down.eof || r->up.eof) && !sh->ending) {
		/* one side ended: the rest within the linger time */
		sh->ending = true;
		evtimer_add(sh->deadline, &tv);
	}
	sh_arm(sh, sh->io, sh->fd, &sh->ioflags, (r->net_in ? EV_READ : 0) |
	    (r->net_out ? EV_WRITE : 0), sh_pump);
	sh_arm(sh, sh->pio, sh->pfd, &sh->pioflags,
	    (tlsrelay_plain_wants_read(r) ? EV_READ : 0) |
	    (tlsrelay_plain_wants_write(r) ? EV_WRITE : 0), sh_pump);
	/*
	 * More to do now: passes left over, or records decrypted and held.
	 * EV_TIMEOUT, not EV_READ: it says nothing of the socket.
	 */
	if (progress || (SSL_has_pending(sh->ssl) && !r->down.eof &&
	    r->down.len < TLSCLIENT_RELAY_BUF))
		event_active(sh->io, EV_TIMEOUT, 0);
}

/* The handshake is done: the socketpair, the pump, and the caller's end. */
static void
sh_established(struct tlsshim *sh)
{
	struct tlsshim_pairing pair;
	struct tlsid_peer peer;
	int sv[2];

	event_del(sh->deadline);
	if (tlsid_peer(sh->ssl, &peer) == -1 ||
	    (peer.pairing && (sh->flags & TLSSHIM_CLIENT))) {
		/* cannot happen: the contexts require a certificate, and
		 * only a server context admits a pairing placeholder */
		sh_fail(sh, sh->flags & TLSSHIM_CLIENT ? "no verified server "
		    "certificate" : "no verified client certificate", 1);
		return;
	}
	if (!peer.pairing) {
		char why[300], msg[320];

		/* revoked while the handshake ran (it was judged when the
		 * peer's certificate came, not at its Finished) */
		if (tlsid_recheck(sh->ssl, why, sizeof(why)) == -1) {
			snprintf(msg, sizeof(msg), "refused: %s", why);
			sh_fail(sh, msg, 1);
			return;
		}
	}
	memset(&pair, 0, sizeof(pair));
	if (peer.pairing && (tlsid_pair_code(sh->ssl, pair.code) == -1 ||
	    tlsid_peer_key_fpr(sh->ssl, pair.key_fpr) == -1)) {
		sh_fail(sh, "pairing: no code from the session", 1);
		return;
	}
	memcpy(sh->fpr, peer.fpr, sizeof(sh->fpr));
	memcpy(sh->name, peer.name, sizeof(sh->name));
	sh->role = peer.role;
	sh->pairing = peer.pairing != 0;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
	    sv) == -1) {
		log_warn("tls: socketpair");
		sh_fail(sh, "out of descriptors", 0);
		return;
	}
	if ((sh->pio = event_new(sh->base, -1, 0, sh_pump, sh)) == NULL ||
	    tlsrelay_init(&sh->relay, sh->ssl, sv[0]) == -1) {
		close(sv[0]);
		close(sv[1]);
		sh_fail(sh, "out of memory", 0);
		return;
	}
	sh->pfd = sv[0];
	sh->state = SH_PUMP;
	LIST_INSERT_HEAD(&pumps, sh, entry);
	npumps++;
	sh->ready(sv[1], &peer, peer.pairing ? &pair : NULL, sh->arg);
	sh->arg = NULL;
	/* the first pass: arms both events (data may already be held) */
	sh->ioflags = -1;
	sh_pump(-1, 0, sh);
}

/* ---- the first byte and the handshake ------------------------------------ */

static void
sh_io(evutil_socket_t fd, short what, void *arg)
{
	struct tlsshim *sh = arg;
	char why[256];
	unsigned char b;
	ssize_t n;
	int r;

	(void)fd;
	(void)what;
	if (sh->state == SH_PEEK) {
		n = recv(sh->fd, &b, 1, MSG_PEEK);
		if (n == -1 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n == 0) {
			sh_fail(sh, "closed before the handshake", 0);
			return;
		}
		if (n == -1) {
			snprintf(why, sizeof(why), "before the handshake: %s",
			    strerror(errno));
			sh_fail(sh, why, 0);
			return;
		}
		if (b != TLS_HANDSHAKE_RECORD && (sh->flags &
		    TLSSHIM_OPTIONAL)) {
			/* plaintext, as allowed: the TCP socket goes back */
			evutil_socket_t tfd = sh->fd;

			sh->fd = -1;
			sh->ready(tfd, NULL, NULL, sh->arg);
			tlsshim_free(sh);
			return;
		}
		if (b != TLS_HANDSHAKE_RECORD) {
			sh_fail(sh, "plaintext on a TLS listener", 1);
			return;
		}
		if ((sh->ssl = SSL_new(sh->ctx)) == NULL ||
		    SSL_set_fd(sh->ssl, sh->fd) != 1) {
			ERR_clear_error();
			sh_fail(sh, "out of memory", 0);
			return;
		}
		SSL_set_accept_state(sh->ssl);
		tlsclient_ssl_tune(sh->ssl);	/* read-ahead buffer, modes */
		sh->state = SH_HANDSHAKE;
	}
	ERR_clear_error();
	r = sh->flags & TLSSHIM_CLIENT ? SSL_connect(sh->ssl) :
	    SSL_accept(sh->ssl);
	if (r == 1) {
		sh_established(sh);
		return;
	}
	switch (SSL_get_error(sh->ssl, r)) {
	case SSL_ERROR_WANT_READ:
		sh_wait(sh, EV_READ);
		return;
	case SSL_ERROR_WANT_WRITE:
		sh_wait(sh, EV_WRITE);
		return;
	default:
		sh_fail(sh, tlsid_ssl_error(sh->ssl, r, why, sizeof(why)), 1);
		return;
	}
}

struct tlsshim *
tlsshim_start(struct event_base *base, SSL_CTX *ctx, evutil_socket_t fd,
    int flags, unsigned timeout_ms, tlsshim_ready_fn ready,
    tlsshim_fail_fn fail, void *arg)
{
	struct tlsshim *sh;
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };

	sh = xcalloc(1, sizeof(*sh));
	sh->base = base;
	sh->fd = fd;
	sh->flags = flags;
	sh->state = SH_PEEK;
	sh->ready = ready;
	sh->fail = fail;
	sh->arg = arg;
	SSL_CTX_up_ref(ctx);
	sh->ctx = ctx;
	sh->pfd = -1;
	sh->io = event_new(base, fd, EV_READ | EV_PERSIST, sh_io, sh);
	sh->deadline = evtimer_new(base, sh_deadline, sh);
	if (sh->io == NULL || sh->deadline == NULL) {
		tlsshim_free(sh);
		return NULL;
	}
	if (flags & TLSSHIM_CLIENT) {
		/* the client speaks first: its ClientHello, from the loop */
		if ((sh->ssl = SSL_new(ctx)) == NULL ||
		    SSL_set_fd(sh->ssl, fd) != 1) {
			ERR_clear_error();
			tlsshim_free(sh);
			return NULL;
		}
		SSL_set_connect_state(sh->ssl);
		tlsclient_ssl_tune(sh->ssl);	/* read-ahead buffer, modes */
		sh->state = SH_HANDSHAKE;
		event_assign(sh->io, base, fd, EV_WRITE | EV_PERSIST, sh_io,
		    sh);
		sh->ioflags = EV_WRITE;
	} else
		sh->ioflags = EV_READ;
	event_add(sh->io, NULL);
	evtimer_add(sh->deadline, &tv);
	return sh;
}

struct tlsshim *
tlsshim_accept(struct event_base *base, SSL_CTX *ctx, evutil_socket_t fd,
    unsigned timeout_ms, tlsshim_ready_fn ready, tlsshim_fail_fn fail,
    void *arg)
{
	return tlsshim_start(base, ctx, fd, 0, timeout_ms, ready, fail, arg);
}

unsigned
tlsshim_npumps(void)
{
	return npumps;
}

unsigned
tlsshim_cut(const char *fpr)
{
	struct tlsshim *sh, *next;
	unsigned n = 0;

	for (sh = LIST_FIRST(&pumps); sh != NULL; sh = next) {
		next = LIST_NEXT(sh, entry);
		if (strcmp(sh->fpr, fpr) == 0) {
			tlsshim_free(sh);
			n++;
		}
	}
	return n;
}

unsigned
tlsshim_cut_identity(const char *name, enum tlsid_role role)
{
	struct tlsshim *sh, *next;
	unsigned n = 0;

	for (sh = LIST_FIRST(&pumps); sh != NULL; sh = next) {
		next = LIST_NEXT(sh, entry);
		if (!sh->pairing && sh->role == role &&
		    strcmp(sh->name, name) == 0) {
			tlsshim_free(sh);
			n++;
		}
	}
	return n;
}

void
tlsshim_shutdown(void)
{
	struct tlsshim *sh;

	while ((sh = LIST_FIRST(&pumps)) != NULL)
		tlsshim_free(sh);
}
