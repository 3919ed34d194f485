/*
 * Enrollment, the client's side (enrollc.h; protocol.md 1.10.10).
 */
#include <sys/socket.h>
#include <sys/stat.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>

#include "base/parse.h"
#include "tls/enrollc.h"
#include "proto/enrollproto.h"
#include "tls/tlsclient.h"
#include "base/util.h"

static int64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
enrollc_default_name(char *out, size_t len, const char *fallback)
{
	char *dot;

	if (gethostname(out, len) == -1)
		out[0] = '\0';
	out[len - 1] = '\0';
	if ((dot = strchr(out, '.')) != NULL)
		*dot = '\0';
	if (tlsid_name_check(out, NULL, 0) == -1)
		usbgw_strlcpy(out, fallback, len);
}

/* What has been read from the gateway: messages can arrive together
 * (PENDING and, at once, ISSUED or REFUSED), so what follows the one
 * returned is kept for the next call. */
struct inbuf {
	uint8_t		*b;		/* ENROLL_MSG_MAX bytes */
	size_t		 have;
	size_t		 last;		/* the message returned last time */
};

/*
 * One message from the gateway (m points into in->b until the next call)
 * before deadline (mono ms), checking *stop twice a second.  Its length;
 * 0 when stopped; -1 with err (-2: the gateway's TLS refused our
 * certificate or the connection failed, for ENROLLC_NET vs REFUSED).
 */
static long
read_msg(SSL *ssl, int fd, struct inbuf *in, struct enroll_msg *m,
    int64_t deadline, volatile sig_atomic_t *stop, char *err, size_t errlen)
{
	uint8_t *buf = in->b;
	const char *why = NULL;
	struct pollfd p = { .fd = fd };
	long r;
	int n, e;

	if (in->last > 0) {
		memmove(buf, buf + in->last, in->have - in->last);
		in->have -= in->last;
		in->last = 0;
	}
	for (;;) {
		if (in->have > 0) {
			r = enroll_decode(buf, in->have, 0, m, &why);
			if (r > 0) {
				in->last = (size_t)r;
				return r;
			}
			if (r < 0) {
				snprintf(err, errlen, "malformed reply from "
				    "the gateway: %s", why);
				return -1;
			}
		}
		if (stop != NULL && *stop)
			return 0;
		if (mono_ms() >= deadline) {
			snprintf(err, errlen, "no answer in time");
			return -1;
		}
		ERR_clear_error();
		n = SSL_read(ssl, buf + in->have, (int)(ENROLL_MSG_MAX -
		    in->have));
		if (n > 0) {
			in->have += (size_t)n;
			continue;
		}
		e = SSL_get_error(ssl, n);
		if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
			p.events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
			(void)poll(&p, 1, 500);
			continue;
		}
		if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL &&
		    ERR_peek_error() == 0))
			snprintf(err, errlen, "the gateway closed the "
			    "connection");
		else
			tlsid_ssl_error(ssl, n, err, errlen);
		return -2;
	}
}

/* The session: TCP, TLS with ctx.  ssl and *fd, or NULL with err. */
static SSL *
open_session(const struct enrollc_opts *o, SSL_CTX *ctx, int *fd, char *err,
    size_t errlen)
{
	SSL *ssl;

	if ((*fd = tlsclient_dial(o->gateway, o->connect_s, err, errlen)) == -1)
		return NULL;
	if ((ssl = tlsclient_connect(ctx, *fd, o->connect_s * 1000, err,
	    errlen)) == NULL) {
		close(*fd);
		*fd = -1;
	}
	return ssl;
}

static void
fmt_time(time_t t, char *out, size_t len)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, len, "%Y-%m-%d %H:%M:%S UTC", &tm);
}

/* ISSUED: check the CA against the session, store both. */
static int
take_issued(const struct enrollc_opts *o, struct tlsid_client *cl, SSL *ssl,
    const struct enroll_msg *m, const char *what)
{
	char *cert = NULL, *ca = NULL, err[512], when[40];
	struct tlsid_peer info;
	int rc = ENROLLC_REFUSED;

	cert = xcalloc(1, m->flen[ENROLL_F_CERT] + 1);
	ca = xcalloc(1, m->flen[ENROLL_F_CA] + 1);
	enroll_field(m, ENROLL_F_CERT, cert, m->flen[ENROLL_F_CERT] + 1);
	enroll_field(m, ENROLL_F_CA, ca, m->flen[ENROLL_F_CA] + 1);
	if (tlsid_session_ca_check(ssl, ca, strlen(ca), err, sizeof(err)) ==
	    -1 || tlsid_client_install(cl, cert, strlen(cert), ca, strlen(ca),
	    err, sizeof(err)) == -1) {
		fprintf(o->out, "%s: the gateway's answer is not acceptable: "
		    "%s; nothing stored\n", what, err);
		goto out;
	}
	if (tlsid_cert_info(cert, strlen(cert), &info) == 0) {
		fmt_time(info.not_after, when, sizeof(when));
		fprintf(o->out, "%s: certificate for %s (%s) stored in %s, "
		    "fingerprint %s, valid until %s\n", what, info.name,
		    tlsid_role_name(info.role), o->dir, info.fpr, when);
	}
	rc = ENROLLC_OK;
out:
	free(cert);
	free(ca);
	return rc;
}

int
enrollc_enroll(const struct enrollc_opts *o)
{
	struct tlsid_client *cl;
	struct enroll_msg m;
	const char *f[ENROLL_F_MAX] = { NULL };
	char err[512], why[128], code[TLSID_CODE_LEN + 1],
	    reason[ENROLL_REASON_MAX + 1];
	struct inbuf in = { NULL, 0, 0 };
	uint8_t *buf = NULL;
	SSL_CTX *ctx = NULL;
	SSL *ssl = NULL;
	int fd = -1, rc = ENROLLC_NET;
	long n;

	if (tlsid_name_check(o->name, why, sizeof(why)) == -1) {
		fprintf(stderr, "enroll: --name %s: %s\n", o->name, why);
		return ENROLLC_USAGE;
	}
	if (mkdir(o->dir, 0700) == -1 && errno != EEXIST) {
		fprintf(stderr, "enroll: %s: %s\n", o->dir, strerror(errno));
		return ENROLLC_USAGE;
	}
	if ((cl = tlsid_client_key(o->dir, o->name, o->role, err,
	    sizeof(err))) == NULL) {
		fprintf(stderr, "enroll: %s\n", err);
		return ENROLLC_USAGE;
	}
	if (tlsid_client_enrolled(cl))
		fprintf(o->out, "enroll: %s already holds a certificate; "
		    "pairing again (the same key)\n", o->dir);
	if ((ctx = tlsid_ctx_client(cl, TLSID_PAIRING, NULL, NULL, err,
	    sizeof(err))) == NULL) {
		fprintf(stderr, "enroll: %s\n", err);
		rc = ENROLLC_USAGE;
		goto out;
	}
	if ((ssl = open_session(o, ctx, &fd, err, sizeof(err))) == NULL) {
		fprintf(stderr, "enroll: %s\n", err);
		goto out;
	}
	if (tlsid_pair_code(ssl, code) == -1) {
		fprintf(stderr, "enroll: no pairing code from the session\n");
		goto out;
	}
	buf = xcalloc(1, ENROLL_MSG_MAX);
	f[ENROLL_F_NAME] = o->name;
	f[ENROLL_F_ROLE] = tlsid_role_name(o->role);
	f[ENROLL_F_CSR] = tlsid_client_csr(cl);
	if ((n = enroll_encode(buf, ENROLL_T_ENROLL, f)) < 0) {
		fprintf(stderr, "enroll: the request does not fit\n");
		rc = ENROLLC_USAGE;
		goto out;
	}
	if (tlsclient_write(ssl, fd, buf, (size_t)n, o->connect_s * 1000, err,
	    sizeof(err)) == -1) {
		fprintf(stderr, "enroll: %s\n", err);
		goto out;
	}
	in.b = xcalloc(1, ENROLL_MSG_MAX);
	for (;;) {
		n = read_msg(ssl, fd, &in, &m, mono_ms() + (int64_t)o->wait_s *
		    1000, o->stop, err, sizeof(err));
		if (n == 0) {
			fprintf(o->out, "enroll: cancelled; the gateway drops "
			    "the pairing\n");
			rc = ENROLLC_REFUSED;
			goto out;
		}
		if (n < 0) {
			fprintf(stderr, "enroll: %s\n", err);
			rc = n == -2 ? ENROLLC_NET : ENROLLC_REFUSED;
			goto out;
		}
		if (m.type != ENROLL_T_PENDING)
			break;
		fprintf(o->out, "pairing code: %s\n"
		    "Check that the gateway shows the same code for %s, then "
		    "approve it there:\n  usbgw agent approve %s --name %s\n"
		    "waiting for the approval (at most %d s, Ctrl-C cancels)\n",
		    code, o->name, code, o->name, o->wait_s);
		fflush(o->out);
	}
	if (m.type == ENROLL_T_REFUSED) {
		enroll_field(&m, ENROLL_F_REASON, reason, sizeof(reason));
		fprintf(o->out, "enroll: refused by the gateway: ");
		for (n = 0; reason[n] != '\0'; n++)
			fputc(reason[n] >= 0x20 && reason[n] < 0x7f ?
			    reason[n] : '?', o->out);
		fputc('\n', o->out);
		rc = ENROLLC_REFUSED;
		goto out;
	}
	rc = take_issued(o, cl, ssl, &m, "paired");
out:
	if (ssl != NULL) {
		SSL_shutdown(ssl);
		SSL_free(ssl);
	}
	if (fd != -1)
		close(fd);
	free(buf);
	free(in.b);
	SSL_CTX_free(ctx);
	tlsid_client_free(cl);
	return rc;
}

int
enrollc_renew(const struct enrollc_opts *o)
{
	struct tlsid_client *cl;
	struct enroll_msg m;
	const char *f[ENROLL_F_MAX] = { NULL };
	char err[512], reason[ENROLL_REASON_MAX + 1];
	struct inbuf in = { NULL, 0, 0 };
	uint8_t *buf = NULL;
	SSL_CTX *ctx = NULL;
	SSL *ssl = NULL;
	int fd = -1, rc = ENROLLC_NET;
	long n;

	if ((cl = tlsid_client_key(o->dir, o->name, o->role, err,
	    sizeof(err))) == NULL) {
		fprintf(stderr, "renew: %s\n", err);
		return ENROLLC_USAGE;
	}
	if (!tlsid_client_enrolled(cl)) {
		fprintf(stderr, "renew: %s: no %s certificate yet (enroll "
		    "first)\n", o->dir, tlsid_role_name(o->role));
		rc = ENROLLC_USAGE;
		goto out;
	}
	if (o->renew_days >= 0 && !tlsid_expires_within(tlsid_client_cert(cl),
	    (long)o->renew_days * 86400)) {
		fprintf(o->out, "renew: not due (the certificate expires in "
		    "more than %d days)\n", o->renew_days);
		rc = ENROLLC_OK;
		goto out;
	}
	if ((ctx = tlsid_ctx_client(cl, 0, NULL, NULL, err,
	    sizeof(err))) == NULL) {
		fprintf(stderr, "renew: %s\n", err);
		rc = ENROLLC_USAGE;
		goto out;
	}
	if ((ssl = open_session(o, ctx, &fd, err, sizeof(err))) == NULL) {
		fprintf(stderr, "renew: %s\n", err);
		goto out;
	}
	buf = xcalloc(1, ENROLL_MSG_MAX);
	f[ENROLL_F_CSR] = tlsid_client_csr(cl);
	if ((n = enroll_encode(buf, ENROLL_T_RENEW, f)) < 0 ||
	    tlsclient_write(ssl, fd, buf, (size_t)n, o->connect_s * 1000, err,
	    sizeof(err)) == -1) {
		fprintf(stderr, "renew: %s\n", n < 0 ? "the request does not "
		    "fit" : err);
		goto out;
	}
	in.b = xcalloc(1, ENROLL_MSG_MAX);
	n = read_msg(ssl, fd, &in, &m, mono_ms() + (int64_t)o->connect_s *
	    3000, o->stop, err, sizeof(err));
	if (n <= 0) {
		fprintf(stderr, "renew: %s\n", n == 0 ? "cancelled" : err);
		rc = n == -2 ? ENROLLC_NET : ENROLLC_REFUSED;
		goto out;
	}
	if (m.type != ENROLL_T_ISSUED) {
		reason[0] = '\0';
		enroll_field(&m, ENROLL_F_REASON, reason, sizeof(reason));
		for (n = 0; reason[n] != '\0'; n++)
			if (reason[n] < 0x20 || reason[n] >= 0x7f)
				reason[n] = '?';
		fprintf(o->out, "renew: refused by the gateway: %s\n",
		    m.type == ENROLL_T_REFUSED ? reason : "unexpected reply");
		rc = ENROLLC_REFUSED;
		goto out;
	}
	rc = take_issued(o, cl, ssl, &m, "renewed");
out:
	if (ssl != NULL) {
		SSL_shutdown(ssl);
		SSL_free(ssl);
	}
	if (fd != -1)
		close(fd);
	free(buf);
	free(in.b);
	SSL_CTX_free(ctx);
	tlsid_client_free(cl);
	return rc;
}
