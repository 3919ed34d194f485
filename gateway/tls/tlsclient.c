/*
 * The client's side of USB/IP in TLS: handshake, op-phase I/O and the
 * bounded relay (tlsclient.h).
 */
#include <sys/socket.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>

#include "base/parse.h"
#include "tls/tlsclient.h"
#include "tls/tlsid.h"
#include "base/util.h"

static int64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for what SSL_get_error asked for, until deadline.  0 or -1. */
static int
wait_io(int fd, int sslerr, int64_t deadline)
{
	struct pollfd p = { .fd = fd };
	int64_t left;
	int r;

	p.events = sslerr == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN;
	for (;;) {
		left = deadline - mono_ms();
		if (left <= 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		r = poll(&p, 1, (int)left);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		return r == 1 ? 0 : -1;
	}
}

void
tlsclient_ssl_tune(SSL *ssl)
{
	SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE |
	    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	/* whole socket buffers per read(2), not a header and a body */
	SSL_set_read_ahead(ssl, 1);
	SSL_set_default_read_buffer_len(ssl, TLSCLIENT_NET_BUF);
}

SSL *
tlsclient_connect(SSL_CTX *ctx, int fd, int timeout_ms, char *err,
    size_t errlen)
{
	int64_t deadline = mono_ms() + timeout_ms;
	SSL *ssl;
	int r, e;

	(void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	if ((ssl = SSL_new(ctx)) == NULL || SSL_set_fd(ssl, fd) != 1) {
		ERR_clear_error();
		SSL_free(ssl);
		snprintf(err, errlen, "TLS: out of memory");
		return NULL;
	}
	tlsclient_ssl_tune(ssl);
	/*
	 * A gateway that ends the connection without close_notify (killed)
	 * is an end of stream, not an error that would drop what it sent
	 * before: USB/IP PDUs carry their own lengths, so a cut is seen.
	 */
	SSL_set_options(ssl, SSL_OP_IGNORE_UNEXPECTED_EOF);
	for (;;) {
		ERR_clear_error();
		if ((r = SSL_connect(ssl)) == 1)
			return ssl;
		e = SSL_get_error(ssl, r);
		if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
			tlsid_ssl_error(ssl, r, err, errlen);
			SSL_free(ssl);
			return NULL;
		}
		if (wait_io(fd, e, deadline) == -1) {
			snprintf(err, errlen, "TLS handshake: %s",
			    strerror(errno));
			SSL_free(ssl);
			return NULL;
		}
	}
}

int
tlsclient_write(SSL *ssl, int fd, const void *buf, size_t n, int timeout_ms,
    char *err, size_t errlen)
{
	int64_t deadline = mono_ms() + timeout_ms;
	const uint8_t *p = buf;
	size_t done = 0;
	int r, e;

	while (done < n) {
		ERR_clear_error();
		r = SSL_write(ssl, p + done, (int)(n - done));
		if (r > 0) {
			done += (size_t)r;
			continue;
		}
		e = SSL_get_error(ssl, r);
		if ((e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) ||
		    wait_io(fd, e, deadline) == -1) {
			if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
				snprintf(err, errlen, "TLS write: %s",
				    strerror(errno));
			else
				tlsid_ssl_error(ssl, r, err, errlen);
			return -1;
		}
	}
	return 0;
}

int
tlsclient_read(SSL *ssl, int fd, void *buf, size_t n, int timeout_ms,
    char *err, size_t errlen)
{
	int64_t deadline = mono_ms() + timeout_ms;
	uint8_t *p = buf;
	size_t got = 0;
	int r, e;

	while (got < n) {
		ERR_clear_error();
		r = SSL_read(ssl, p + got, (int)(n - got));
		if (r > 0) {
			got += (size_t)r;
			continue;
		}
		e = SSL_get_error(ssl, r);
		if (e == SSL_ERROR_ZERO_RETURN ||
		    (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)) {
			snprintf(err, errlen, "closed");
			return -1;
		}
		if ((e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) ||
		    wait_io(fd, e, deadline) == -1) {
			if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
				snprintf(err, errlen, "TLS read: %s",
				    strerror(errno));
			else
				tlsid_ssl_error(ssl, r, err, errlen);
			return -1;
		}
	}
	return 0;
}

/* ---- the relay ----------------------------------------------------------- */

int
tlsrelay_init(struct tlsrelay *r, SSL *ssl, int plainfd)
{
	BIO *sslside;

	memset(r, 0, sizeof(*r));
	/*
	 * The SSL writes its records into sslside; the relay takes them
	 * from netbio, the pair's other end, and sends them.  Reads stay on
	 * the socket BIO, into the read-ahead buffer.  The pair's buffer
	 * towards the SSL is never written: one byte.
	 */
	if (BIO_new_bio_pair(&sslside, TLSCLIENT_NET_BUF, &r->netbio, 1) != 1) {
		ERR_clear_error();
		return -1;
	}
	r->ssl = ssl;
	r->netfd = SSL_get_wfd(ssl);
	r->plainfd = plainfd;
	SSL_set0_wbio(ssl, sslside);
	r->down.b = xmalloc(TLSCLIENT_RELAY_BUF);
	r->up.b = xmalloc(TLSCLIENT_RELAY_BUF);
	(void)fcntl(plainfd, F_SETFL, fcntl(plainfd, F_GETFL) | O_NONBLOCK);
	return 0;
}

void
tlsrelay_release(struct tlsrelay *r)
{
	free(r->down.b);
	free(r->up.b);
	r->down.b = r->up.b = NULL;
	BIO_free(r->netbio);	/* the SSL's end stays until SSL_free */
	r->netbio = NULL;
}

/*
 * Send what the SSL has encrypted (netbio) to netfd until it is all sent
 * or the socket is full (then net_out).  0, or -1 with err set.
 */
static int
net_flush(struct tlsrelay *r, bool *progress)
{
	char *p;
	ssize_t n;
	int avail;

	while ((avail = BIO_nread0(r->netbio, &p)) > 0) {
		n = send(r->netfd, p, (size_t)avail, MSG_NOSIGNAL);
		if (n > 0) {
			(void)BIO_nread(r->netbio, &p, (int)n);
			*progress = true;
			continue;
		}
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			r->net_out = true;
			return 0;
		}
		snprintf(r->err, sizeof(r->err), "TLS write: %s",
		    n == 0 ? "nothing sent" : strerror(errno));
		return -1;
	}
	return 0;
}

/* Bytes encrypted and not yet sent. */
static size_t
net_pending(const struct tlsrelay *r)
{
	return BIO_ctrl_pending(r->netbio);
}

static size_t
rbuf_room(struct tlsrelay_buf *rb)
{
	if (rb->off > 0 && rb->len > 0)
		memmove(rb->b, rb->b + rb->off, rb->len);
	rb->off = 0;
	return TLSCLIENT_RELAY_BUF - rb->len;
}

enum tlsrelay_end
tlsrelay_pass(struct tlsrelay *r, bool *progress)
{
	struct tlsrelay_buf *down = &r->down, *up = &r->up;
	ssize_t n;
	int rv, e;

	r->net_in = r->net_out = false;
	/* TLS -> plain: SSL_read while there is room (it may hold records) */
	while (!down->eof && rbuf_room(down) > 0) {
		if (r->net_rd_wait && !SSL_has_pending(r->ssl)) {
			r->net_in = true;	/* nothing new to read yet */
			break;
		}
		ERR_clear_error();
		rv = SSL_read(r->ssl, down->b + down->len,
		    (int)(TLSCLIENT_RELAY_BUF - down->len));
		if (rv > 0) {
			down->len += (size_t)rv;
			*progress = true;
			continue;
		}
		e = SSL_get_error(r->ssl, rv);
		if (e == SSL_ERROR_WANT_READ)
			r->net_in = r->net_rd_wait = true;
		else if (e == SSL_ERROR_WANT_WRITE)
			;	/* netbio full: sent below, then again */
		else if (e == SSL_ERROR_ZERO_RETURN ||
		    (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)) {
			down->eof = true;
			*progress = true;
		} else {
			tlsid_ssl_error(r->ssl, rv, r->err, sizeof(r->err));
			return TLSRELAY_TLS_FAILED;
		}
		break;
	}
	if (down->len > 0) {
		n = write(r->plainfd, down->b + down->off, down->len);
		if (n == -1 && errno != EAGAIN && errno != EINTR)
			return TLSRELAY_PLAIN_FAILED;
		if (n > 0) {
			down->off += (size_t)n;
			down->len -= (size_t)n;
			*progress = true;
		}
	}
	/* plain -> TLS */
	if (!up->eof && !r->plain_rd_wait && rbuf_room(up) > 0) {
		n = read(r->plainfd, up->b + up->len,
		    TLSCLIENT_RELAY_BUF - up->len);
		if (n == 0) {
			up->eof = true;
			*progress = true;
		} else if (n > 0) {
			up->len += (size_t)n;
			*progress = true;
		} else if (errno == EAGAIN)
			r->plain_rd_wait = true;
		else if (errno != EINTR)
			return TLSRELAY_PLAIN_FAILED;
	}
	/*
	 * Encrypt into netbio until it is full (SSL_write: WANT_WRITE), send
	 * it, again while sending made room.  SSL_read above may have queued
	 * a record too (a KeyUpdate's answer): it goes out here as well.
	 */
	for (;;) {
		bool sent = false;

		while (up->len > 0) {
			ERR_clear_error();
			rv = SSL_write(r->ssl, up->b + up->off, (int)up->len);
			if (rv > 0) {
				up->off += (size_t)rv;
				up->len -= (size_t)rv;
				*progress = true;
				continue;
			}
			e = SSL_get_error(r->ssl, rv);
			if (e == SSL_ERROR_WANT_READ)
				r->net_in = true;
			else if (e != SSL_ERROR_WANT_WRITE) {
				tlsid_ssl_error(r->ssl, rv, r->err,
				    sizeof(r->err));
				return TLSRELAY_TLS_FAILED;
			}
			break;
		}
		if (net_flush(r, &sent) == -1)
			return TLSRELAY_TLS_FAILED;
		if (sent)
			*progress = true;
		if (!sent || up->len == 0 || r->net_out)
			break;
	}
	if (down->eof && down->len == 0)
		return TLSRELAY_TLS_CLOSED;
	/*
	 * The plain side ended and all it sent is on the wire: close_notify,
	 * sent like the data (the caller bounds the wait: tlsshim's linger).
	 */
	if (up->eof && up->len == 0 && !r->shut && net_pending(r) == 0) {
		(void)SSL_shutdown(r->ssl);
		ERR_clear_error();
		r->shut = true;
		*progress = true;
		if (net_flush(r, progress) == -1)
			return TLSRELAY_PLAIN_CLOSED;	/* the peer is gone */
	}
	if (r->shut && net_pending(r) == 0)
		return TLSRELAY_PLAIN_CLOSED;
	return TLSRELAY_GOING;
}

void
tlsrelay_readable(struct tlsrelay *r, bool net, bool plain)
{
	if (net)
		r->net_rd_wait = false;
	if (plain)
		r->plain_rd_wait = false;
}

bool
tlsrelay_plain_wants_read(const struct tlsrelay *r)
{
	return !r->up.eof && r->up.len < TLSCLIENT_RELAY_BUF;
}

bool
tlsrelay_plain_wants_write(const struct tlsrelay *r)
{
	return r->down.len > 0;
}

const char *
tlsclient_relay(SSL *ssl, int netfd, int plainfd, volatile sig_atomic_t *stop,
    char *err, size_t errlen)
{
	static const char *const why_end[] = {
		[TLSRELAY_GOING] = "signal",
		[TLSRELAY_TLS_CLOSED] = "the gateway closed the connection",
		[TLSRELAY_PLAIN_CLOSED] = "the local end closed",
		[TLSRELAY_TLS_FAILED] = "the gateway's TLS connection failed",
		[TLSRELAY_PLAIN_FAILED] = "the local end failed",
	};
	struct tlsrelay r;
	struct pollfd p[2];
	enum tlsrelay_end end = TLSRELAY_GOING;
	const char *why = NULL;
	bool progress;

	err[0] = '\0';
	if (tlsrelay_init(&r, ssl, plainfd) == -1) {
		snprintf(err, errlen, "TLS relay: out of memory");
		return "out of memory";
	}
	while (stop == NULL || !*stop) {
		progress = false;
		if ((end = tlsrelay_pass(&r, &progress)) != TLSRELAY_GOING)
			break;
		if (progress)
			continue;
		p[0].fd = netfd;
		p[0].events = (r.net_in ? POLLIN : 0) | (r.net_out ? POLLOUT : 0);
		p[1].fd = plainfd;
		p[1].events = (tlsrelay_plain_wants_read(&r) ? POLLIN : 0) |
		    (tlsrelay_plain_wants_write(&r) ? POLLOUT : 0);
		if (poll(p, 2, -1) == -1 && errno != EINTR) {
			why = "poll failed";
			break;
		}
		tlsrelay_readable(&r, p[0].revents & (POLLIN | POLLHUP | POLLERR),
		    p[1].revents & (POLLIN | POLLHUP | POLLERR));
		if (p[1].revents & POLLNVAL) {
			end = TLSRELAY_PLAIN_FAILED;
			break;
		}
	}
	if (why == NULL)
		why = why_end[end];
	if (end == TLSRELAY_TLS_FAILED)
		snprintf(err, errlen, "%s", r.err);
	tlsrelay_release(&r);
	return why;
}

struct pipe_arg {
	SSL		*ssl;
	int		 netfd, plainfd;
	const char	*prog;
};

static void *
pipe_main(void *arg)
{
	struct pipe_arg *pa = arg;
	char err[256];

	tlsclient_relay(pa->ssl, pa->netfd, pa->plainfd, NULL, err,
	    sizeof(err));
	if (err[0] != '\0')
		fprintf(stderr, "%s: TLS: %s\n", pa->prog, err);
	close(pa->plainfd);
	SSL_free(pa->ssl);
	close(pa->netfd);
	free(pa);
	OPENSSL_thread_stop();	/* its thread-local state, now, not at exit */
	return NULL;
}

int
tlsclient_pipe(SSL *ssl, int netfd, const char *prog, pthread_t *tid)
{
	struct pipe_arg *pa;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == -1)
		return -1;
	pa = xcalloc(1, sizeof(*pa));
	pa->ssl = ssl;
	pa->netfd = netfd;
	pa->plainfd = sv[0];
	pa->prog = prog;
	if (pthread_create(tid, NULL, pipe_main, pa) != 0) {
		free(pa);
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	return sv[1];
}

/*
 * A TCP connection to HOST[:PORT] (port 3240 by default) within
 * timeout_s, blocking: the callers are usbgw-attach and the enrollment
 * client, never the daemon's loop.  fd (TCP_NODELAY, SO_KEEPALIVE), or -1
 * with a message in err.
 */
int
tlsclient_dial(const char *hostport, int timeout_s, char *err, size_t errsz)
{
	struct net_addr a;
	struct addrinfo	 hints, *res, *ai;
	const char	*why;
	int		 fd = -1, r, one = 1;

	if (parse_addr(hostport, "3240", &a, &why) == -1) {
		snprintf(err, errsz, "%s: expected host[:port] (%s)", hostport,
		    why);
		return -1;
	}
	if (a.host[0] == '\0') {
		snprintf(err, errsz, "%s: expected host[:port] (no host)",
		    hostport);
		return -1;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	if ((r = getaddrinfo(a.host, a.port, &hints, &res)) != 0) {
		snprintf(err, errsz, "%s: %s", hostport, gai_strerror(r));
		return -1;
	}
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		struct pollfd	 p;
		socklen_t	 sl = sizeof(r);

		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC |
		    SOCK_NONBLOCK, ai->ai_protocol);
		if (fd == -1)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == -1 &&
		    errno != EINPROGRESS)
			goto next;
		p.fd = fd;
		p.events = POLLOUT;
		if (poll(&p, 1, timeout_s * 1000) != 1) {
			errno = ETIMEDOUT;
			goto next;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &r, &sl) == -1 ||
		    r != 0) {
			errno = r;
			goto next;
		}
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
		    sizeof(one));
		(void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one,
		    sizeof(one));
		freeaddrinfo(res);
		return fd;
next:
		snprintf(err, errsz, "%s: connect: %s", hostport,
		    strerror(errno));
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return -1;
}
