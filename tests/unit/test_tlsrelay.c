/*
 * The TLS relay (gateway/tls/tlsclient.c, struct tlsrelay: usbip-tc's and
 * usbgw-attach's relay, and the gateway's pump in tlsshim.c): records are
 * encrypted into a BIO pair and sent in large writes, and a side is read
 * only once it is readable again.  Through a socketpair with a small
 * send buffer and a slow reader (so the pair fills and sends block):
 * everything the plain side sent reaches the TLS peer, byte for byte,
 * before the close_notify, which comes after the last byte (a clean
 * end, not a truncation); the other way, everything the TLS peer sent
 * reaches the plain side before its EOF; both ways at once.
 */
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "tap.h"
#include "tls/tlsclient.h"
#include "base/util.h"

#define NBYTES	(8u * 1024 * 1024)

static uint8_t
pat(size_t i, unsigned seed)
{
	return (uint8_t)((i * 131u + (i >> 9) + seed) & 0xff);
}

/* A throwaway self-signed P-256 server context (TLS 1.3 only). */
static SSL_CTX *
server_ctx(void)
{
	EVP_PKEY *k = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

	if (k == NULL || x == NULL || ctx == NULL)
		return NULL;
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), -60);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
	    (const unsigned char *)"relay-test", -1, -1, 0);
	X509_set_issuer_name(x, X509_get_subject_name(x));
	X509_set_pubkey(x, k);
	if (X509_sign(x, k, EVP_sha256()) == 0 ||
	    SSL_CTX_use_certificate(ctx, x) != 1 ||
	    SSL_CTX_use_PrivateKey(ctx, k) != 1)
		return NULL;
	SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
	X509_free(x);
	EVP_PKEY_free(k);
	return ctx;
}

static SSL_CTX *
client_ctx(void)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

	if (ctx != NULL) {
		SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
	}
	return ctx;
}

struct conn {
	SSL		*peer;		/* the TLS peer's end, blocking */
	int		 plain;		/* the relay's plain end (tlsclient_pipe) */
	pthread_t	 relay;
};

static void *
accept_main(void *arg)
{
	SSL *ssl = arg;

	return SSL_accept(ssl) == 1 ? ssl : NULL;
}

/*
 * A TLS connection over a socketpair: the peer (server) at one end, the
 * relay (client, tlsclient_connect and tlsclient_pipe) at the other; the
 * relay's socket sends through a small buffer.
 */
static int
conn_open(struct conn *c, SSL_CTX *sctx, SSL_CTX *cctx)
{
	int sv[2], small = 4096;
	pthread_t t;
	void *ok;
	char err[256];
	SSL *cssl;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == -1)
		return -1;
	(void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	(void)setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	c->peer = SSL_new(sctx);
	SSL_set_fd(c->peer, sv[1]);
	pthread_create(&t, NULL, accept_main, c->peer);
	cssl = tlsclient_connect(cctx, sv[0], 5000, err, sizeof(err));
	pthread_join(t, &ok);
	if (cssl == NULL || ok == NULL) {
		diag("handshake: %s", cssl == NULL ? err : "server failed");
		return -1;
	}
	if ((c->plain = tlsclient_pipe(cssl, sv[0], "test_tlsrelay",
	    &c->relay)) == -1)
		return -1;
	return 0;
}

static void
conn_close(struct conn *c)
{
	int fd = SSL_get_fd(c->peer);

	close(c->plain);
	pthread_join(c->relay, NULL);
	SSL_free(c->peer);
	close(fd);
}

static void
nap(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* plain side: write NBYTES of pattern seed, then shut the write side */
struct writer {
	int		 fd;
	unsigned	 seed;
	size_t		 done;
	int		 keep_open;	/* no shutdown after the data */
};

static void *
plain_writer(void *arg)
{
	struct writer *w = arg;
	uint8_t buf[60000];
	size_t i, n;
	ssize_t r;

	while (w->done < NBYTES) {
		n = NBYTES - w->done < sizeof(buf) ? NBYTES - w->done : sizeof(buf);
		for (i = 0; i < n; i++)
			buf[i] = pat(w->done + i, w->seed);
		if ((r = write(w->fd, buf, n)) <= 0)
			break;
		w->done += (size_t)r;
	}
	/* the relay ends both ways when a side ends: no half-close */
	if (!w->keep_open)
		shutdown(w->fd, SHUT_WR);
	return NULL;
}

/* Read from the TLS peer, slowly at first; the count of pattern bytes
 * matched, *clean set when the end was a close_notify. */
static size_t
tls_read_all(SSL *ssl, unsigned seed, int *clean)
{
	uint8_t buf[7000];
	size_t got = 0, i;
	int r, bad = 0;

	nap(300);		/* the relay's buffers and its BIO pair fill */
	*clean = 0;
	for (;;) {
		r = SSL_read(ssl, buf, sizeof(buf));
		if (r <= 0) {
			*clean = SSL_get_error(ssl, r) == SSL_ERROR_ZERO_RETURN;
			ERR_clear_error();
			break;
		}
		for (i = 0; i < (size_t)r && !bad; i++)
			if (buf[i] != pat(got + i, seed))
				bad = 1;
		if (bad) {
			diag("byte %zu differs", got + i - 1);
			break;
		}
		got += (size_t)r;
	}
	return got;
}

/* Read the plain side to EOF, slowly at first; pattern bytes matched. */
static size_t
plain_read_all(int fd, unsigned seed, int *eof)
{
	uint8_t buf[7000];
	size_t got = 0, i;
	ssize_t r;

	nap(300);
	*eof = 0;
	for (;;) {
		r = read(fd, buf, sizeof(buf));
		if (r <= 0) {
			*eof = r == 0;
			break;
		}
		for (i = 0; i < (size_t)r; i++)
			if (buf[i] != pat(got + i, seed)) {
				diag("byte %zu differs", got + i);
				return got;
			}
		got += (size_t)r;
	}
	return got;
}

struct peer_writer {
	SSL		*ssl;
	unsigned	 seed;
	size_t		 done;
	int		 shutdown;	/* close_notify after the data */
};

static void *
peer_writer(void *arg)
{
	struct peer_writer *w = arg;
	uint8_t buf[50000];
	size_t i, n;
	int r;

	while (w->done < NBYTES) {
		n = NBYTES - w->done < sizeof(buf) ? NBYTES - w->done : sizeof(buf);
		for (i = 0; i < n; i++)
			buf[i] = pat(w->done + i, w->seed);
		if ((r = SSL_write(w->ssl, buf, (int)n)) <= 0)
			break;
		w->done += (size_t)r;
	}
	if (w->shutdown)
		SSL_shutdown(w->ssl);
	return NULL;
}

/* plain side: read to EOF, checking the pattern (the both-ways case) */
struct reader {
	int		 fd;
	unsigned	 seed;
	size_t		 got;
	int		 eof;
};

static void *
plain_reader(void *arg)
{
	struct reader *rd = arg;

	rd->got = plain_read_all(rd->fd, rd->seed, &rd->eof);
	return NULL;
}

/*
 * The peer, non-blocking in one thread (an SSL is not for two threads):
 * SSL_write its NBYTES and SSL_read the plain side's NBYTES in turn,
 * then close_notify.  Returns the bytes read that matched.
 */
static size_t
peer_both_ways(SSL *ssl, unsigned wseed, unsigned rseed, size_t *sent)
{
	uint8_t in[7000], out[16384];
	struct pollfd p = { .fd = SSL_get_fd(ssl) };
	size_t got = 0, i, n;
	time_t end = time(NULL) + 60;
	int r, e, want, moved;

	(void)fcntl(p.fd, F_SETFL, fcntl(p.fd, F_GETFL) | O_NONBLOCK);
	*sent = 0;
	while ((got < NBYTES || *sent < NBYTES) && time(NULL) < end) {
		want = moved = 0;
		if (*sent < NBYTES) {
			n = NBYTES - *sent < sizeof(out) ? NBYTES - *sent :
			    sizeof(out);
			for (i = 0; i < n; i++)
				out[i] = pat(*sent + i, wseed);
			r = SSL_write(ssl, out, (int)n);
			if (r > 0) {
				*sent += (size_t)r;
				moved = 1;
			} else if ((e = SSL_get_error(ssl, r)) ==
			    SSL_ERROR_WANT_WRITE)
				want |= POLLOUT;
			else if (e == SSL_ERROR_WANT_READ)
				want |= POLLIN;
			else
				return got;
			ERR_clear_error();
		}
		if (got < NBYTES) {
			r = SSL_read(ssl, in, sizeof(in));
			if (r > 0) {
				for (i = 0; i < (size_t)r; i++)
					if (in[i] != pat(got + i, rseed))
						return got;
				got += (size_t)r;
				continue;
			}
			if ((e = SSL_get_error(ssl, r)) == SSL_ERROR_WANT_READ)
				want |= POLLIN;
			else if (e == SSL_ERROR_WANT_WRITE)
				want |= POLLOUT;
			else
				return got;
			ERR_clear_error();
		}
		if (!moved) {
			p.events = (short)want;
			(void)poll(&p, 1, 100);
		}
	}
	/* close_notify, however long the relay takes to make room for it */
	while (time(NULL) < end && (r = SSL_shutdown(ssl)) < 0 &&
	    SSL_get_error(ssl, r) == SSL_ERROR_WANT_WRITE) {
		ERR_clear_error();
		p.events = POLLOUT;
		(void)poll(&p, 1, 100);
	}
	return got;
}

int
main(void)
{
	SSL_CTX *sctx, *cctx;
	struct conn c;
	struct writer w;
	struct reader rd;
	struct peer_writer pw;
	pthread_t t, t2;
	size_t got, sent;
	int clean;

	signal(SIGPIPE, SIG_IGN);
	alarm(120);		/* a stalled relay fails the test, not hangs it */
	sctx = server_ctx();
	cctx = client_ctx();
	if (sctx == NULL || cctx == NULL)
		{ printf("Bail out! no TLS contexts\n"); return 1; }

	/* plain -> TLS, then the plain side ends */
	if (conn_open(&c, sctx, cctx) == -1)
		{ printf("Bail out! no TLS connection\n"); return 1; }
	w = (struct writer){ .fd = c.plain, .seed = 7 };
	pthread_create(&t, NULL, plain_writer, &w);
	got = tls_read_all(c.peer, 7, &clean);
	pthread_join(t, NULL);
	ok(got == NBYTES, "plain -> TLS: all %u bytes reached the peer, in "
	    "order, through a small send buffer (got %zu)", NBYTES, got);
	ok(clean, "... then a close_notify: a clean end after the last byte");
	conn_close(&c);

	/* TLS -> plain, then the peer ends with close_notify */
	if (conn_open(&c, sctx, cctx) == -1)
		{ printf("Bail out! no TLS connection\n"); return 1; }
	pw = (struct peer_writer){ .ssl = c.peer, .seed = 9, .shutdown = 1 };
	pthread_create(&t, NULL, peer_writer, &pw);
	got = plain_read_all(c.plain, 9, &clean);
	pthread_join(t, NULL);
	ok(got == NBYTES, "TLS -> plain: all %u bytes reached the plain side "
	    "(got %zu)", NBYTES, got);
	ok(clean, "... then EOF");
	conn_close(&c);

	/* both ways at once: neither direction stalls the other */
	if (conn_open(&c, sctx, cctx) == -1)
		{ printf("Bail out! no TLS connection\n"); return 1; }
	w = (struct writer){ .fd = c.plain, .seed = 3, .keep_open = 1 };
	rd = (struct reader){ .fd = c.plain, .seed = 5 };
	pthread_create(&t, NULL, plain_writer, &w);
	pthread_create(&t2, NULL, plain_reader, &rd);
	got = peer_both_ways(c.peer, 5, 3, &sent);
	pthread_join(t, NULL);
	pthread_join(t2, NULL);
	ok(got == NBYTES, "both ways: the peer got all %u bytes the plain "
	    "side sent (got %zu)", NBYTES, got);
	ok(sent == NBYTES, "both ways: the peer sent all %u bytes (sent %zu)",
	    NBYTES, sent);
	ok(rd.got == NBYTES, "both ways: the plain side got all %u bytes the "
	    "peer sent (got %zu)", NBYTES, rd.got);
	ok(rd.eof, "... then EOF (the peer's close_notify)");
	conn_close(&c);

	SSL_CTX_free(sctx);
	SSL_CTX_free(cctx);
	return done_testing();
}
