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

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>

#include <openssl/err.h>

#include "log.h"
#include "tlsshim.h"
#include "util.h"

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
	evutil_socket_t		 fd;		/* until the TLS bufferevent owns it */
	SSL_CTX			*ctx;
	SSL			*ssl;		/* likewise */
	struct event		*io;		/* fd readiness (peek, handshake) */
	struct event		*deadline;	/* handshake; then the linger */
	struct bufferevent	*tls, *plain;
	tlsshim_ready_fn	 ready;
	tlsshim_fail_fn		 fail;
	void			*arg;
	bool			 closing;	/* one side ended: draining */
};

static LIST_HEAD(, tlsshim) pumps = LIST_HEAD_INITIALIZER(pumps);
static unsigned npumps;

static void	sh_io(evutil_socket_t, short, void *);

void
tlsshim_free(struct tlsshim *sh)
{
	if (sh == NULL)
		return;
	if (sh->state == SH_PUMP) {
		LIST_REMOVE(sh, entry);
		npumps--;
	}
	if (sh->io != NULL)
		event_free(sh->io);
	if (sh->deadline != NULL)
		event_free(sh->deadline);
	if (sh->tls != NULL) {
		/* close_notify, best effort: the peer tells an end from a cut */
		SSL *ssl = bufferevent_openssl_get_ssl(sh->tls);

		if (ssl != NULL && evbuffer_get_length(
		    bufferevent_get_output(sh->tls)) == 0) {
			(void)SSL_shutdown(ssl);
			ERR_clear_error();
		}
		bufferevent_free(sh->tls);	/* frees ssl, closes fd */
	}
	else {
		if (sh->ssl != NULL)
			SSL_free(sh->ssl);
		if (sh->fd >= 0)
			evutil_closesocket(sh->fd);
	}
	if (sh->plain != NULL)
		bufferevent_free(sh->plain);
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
		tlsshim_free(sh);
		return;
	}
	sh_fail(sh, sh->state == SH_PEEK ? "nothing sent in time (op-phase "
	    "deadline)" : "no TLS handshake in time (op-phase deadline)", 1);
}

static void
sh_wait(struct tlsshim *sh, short what)
{
	event_del(sh->io);
	event_assign(sh->io, sh->base, sh->fd, what | EV_PERSIST, sh_io, sh);
	event_add(sh->io, NULL);
}

/* ---- the pump ------------------------------------------------------------ */

static struct bufferevent *
sh_other(struct tlsshim *sh, struct bufferevent *bev)
{
	return bev == sh->tls ? sh->plain : sh->tls;
}

static void	sh_read(struct bufferevent *, void *);
static void	sh_event(struct bufferevent *, short, void *);

/* Its output drained below half: the other side is read again. */
static void
sh_drained(struct bufferevent *to, void *arg)
{
	struct tlsshim *sh = arg;

	if (sh->closing) {
		if (evbuffer_get_length(bufferevent_get_output(to)) == 0)
			tlsshim_free(sh);
		return;
	}
	bufferevent_setwatermark(to, EV_WRITE, 0, 0);
	bufferevent_setcb(to, sh_read, NULL, sh_event, sh);
	bufferevent_enable(sh_other(sh, to), EV_READ);
}

/* Move what one side sent to the other's output, bounded. */
static void
sh_read(struct bufferevent *from, void *arg)
{
	struct tlsshim *sh = arg;
	struct bufferevent *to = sh_other(sh, from);

	if (sh->closing)
		return;
	evbuffer_add_buffer(bufferevent_get_output(to),
	    bufferevent_get_input(from));
	if (evbuffer_get_length(bufferevent_get_output(to)) >= TLSSHIM_HIWAT) {
		bufferevent_disable(from, EV_READ);
		bufferevent_setwatermark(to, EV_WRITE, TLSSHIM_HIWAT / 2, 0);
		bufferevent_setcb(to, sh_read, sh_drained, sh_event, sh);
	}
}

/*
 * One side ended (EOF, error): the other gets what is queued for it
 * (bounded: TLSSHIM_HIWAT and TLSSHIM_LINGER_MS), then both close.  The
 * caller's end of the socketpair sees EOF, so its session ends too.
 */
static void
sh_event(struct bufferevent *bev, short what, void *arg)
{
	struct tlsshim *sh = arg;
	struct bufferevent *to = sh_other(sh, bev);
	struct timeval tv = { TLSSHIM_LINGER_MS / 1000, 0 };

	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)))
		return;
	if (what & BEV_EVENT_ERROR && bev == sh->tls) {
		unsigned long e;

		while ((e = bufferevent_get_openssl_error(bev)) != 0)
			log_debug("tls pump: %s", ERR_reason_error_string(e) ?
			    ERR_reason_error_string(e) : "TLS error");
	}
	if (sh->closing || evbuffer_get_length(bufferevent_get_output(to)) == 0) {
		tlsshim_free(sh);
		return;
	}
	/* the rest is moved already: deliver it, read nothing more */
	sh->closing = true;
	bufferevent_disable(bev, EV_READ);
	bufferevent_disable(to, EV_READ);
	bufferevent_setwatermark(to, EV_WRITE, 0, 0);
	bufferevent_setcb(to, NULL, sh_drained, sh_event, sh);
	bufferevent_setcb(bev, NULL, NULL, sh_event, sh);
	evtimer_add(sh->deadline, &tv);
}

/* The handshake is done: the socketpair, the pump, and the caller's end. */
static void
sh_established(struct tlsshim *sh)
{
	struct tlsid_peer peer;
	int sv[2];

	event_del(sh->deadline);
	event_del(sh->io);
	if (tlsid_peer(sh->ssl, &peer) == -1 || peer.pairing) {
		/* cannot happen with a non-pairing context: fail closed */
		sh_fail(sh, "no verified client certificate", 1);
		return;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
	    sv) == -1) {
		log_warn("tls: socketpair");
		sh_fail(sh, "out of descriptors", 0);
		return;
	}
	sh->tls = bufferevent_openssl_socket_new(sh->base, sh->fd, sh->ssl,
	    BUFFEREVENT_SSL_OPEN, BEV_OPT_CLOSE_ON_FREE);
	if (sh->tls == NULL) {
		close(sv[0]);
		close(sv[1]);
		sh_fail(sh, "out of memory", 0);
		return;
	}
	sh->fd = -1;
	sh->ssl = NULL;
	bufferevent_openssl_set_allow_dirty_shutdown(sh->tls, 1);
	sh->plain = bufferevent_socket_new(sh->base, sv[0],
	    BEV_OPT_CLOSE_ON_FREE);
	if (sh->plain == NULL) {
		close(sv[0]);
		close(sv[1]);
		sh_fail(sh, "out of memory", 0);
		return;
	}
	bufferevent_setcb(sh->tls, sh_read, NULL, sh_event, sh);
	bufferevent_setcb(sh->plain, sh_read, NULL, sh_event, sh);
	bufferevent_setwatermark(sh->tls, EV_READ, 0, TLSSHIM_CHUNK);
	bufferevent_setwatermark(sh->plain, EV_READ, 0, TLSSHIM_CHUNK);
	bufferevent_enable(sh->tls, EV_READ | EV_WRITE);
	bufferevent_enable(sh->plain, EV_READ | EV_WRITE);
	sh->state = SH_PUMP;
	LIST_INSERT_HEAD(&pumps, sh, entry);
	npumps++;
	sh->ready(sv[1], &peer, sh->arg);
	sh->arg = NULL;
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
		sh->state = SH_HANDSHAKE;
	}
	ERR_clear_error();
	r = SSL_accept(sh->ssl);
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
tlsshim_accept(struct event_base *base, SSL_CTX *ctx, evutil_socket_t fd,
    unsigned timeout_ms, tlsshim_ready_fn ready, tlsshim_fail_fn fail,
    void *arg)
{
	struct tlsshim *sh;
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };

	sh = xcalloc(1, sizeof(*sh));
	sh->base = base;
	sh->fd = fd;
	sh->state = SH_PEEK;
	sh->ready = ready;
	sh->fail = fail;
	sh->arg = arg;
	SSL_CTX_up_ref(ctx);
	sh->ctx = ctx;
	sh->io = event_new(base, fd, EV_READ | EV_PERSIST, sh_io, sh);
	sh->deadline = evtimer_new(base, sh_deadline, sh);
	if (sh->io == NULL || sh->deadline == NULL) {
		tlsshim_free(sh);
		return NULL;
	}
	event_add(sh->io, NULL);
	evtimer_add(sh->deadline, &tv);
	return sh;
}

unsigned
tlsshim_npumps(void)
{
	return npumps;
}

void
tlsshim_shutdown(void)
{
	struct tlsshim *sh;

	while ((sh = LIST_FIRST(&pumps)) != NULL)
		tlsshim_free(sh);
}
