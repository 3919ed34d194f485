/*
 * TLS identities (gateway/tlsid.[ch], issue 15's foundation): the
 * gateway's CA and server identity on disk (created 0600/0644 whatever
 * the umask, the same after a reopen, key files of the wrong mode or
 * owner refused, mismatched, expired or foreign certificates refused
 * naming the file, renewal), issuing from CSRs (agent, host; bad names,
 * oversized, bad signature, weak or foreign keys refused), TLS 1.3
 * handshakes over socketpairs (a good client seen by name and role; no
 * certificate, another CA, expired, revoked, plaintext, TLS 1.2 refused
 * with their reasons), and pairing codes (the same at both ends, another
 * for another session, another on each side of a man in the middle).
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "tap.h"
#include "tls/tlsid.h"
#include "base/util.h"

static char	top[64];

static const char *
path(const char *dir, const char *name)
{
	static char buf[4][PATH_MAX];
	static int  i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s/%s", top, dir, name);
	return buf[i];
}

static const char *
mkdir_in(const char *name)
{
	const char *p = path(name, "");

	mkdir(p, 0700);
	return p;
}

#define like(got, sub, ...) do {					\
	const char *g_ = (got), *s_ = (sub);				\
	if (!ok(g_ != NULL && strstr(g_, s_) != NULL, __VA_ARGS__))	\
		diag("got \"%s\", expected it to contain \"%s\"",	\
		    g_ ? g_ : "(null)", s_);				\
} while (0)

static int
file_mode(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0 ? (int)(st.st_mode & 07777) : -1;
}

static int
is_hex64(const char *s)
{
	size_t i;

	if (strlen(s) != 64)
		return 0;
	for (i = 0; i < 64; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

static X509 *
x509_of(const char *pem)
{
	BIO *b = BIO_new_mem_buf(pem, -1);
	X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);

	BIO_free(b);
	return x;
}

static void
subject_entry(X509 *x, int nid, char *out, size_t len)
{
	out[0] = '\0';
	X509_NAME_get_text_by_NID(X509_get_subject_name(x), nid, out, (int)len);
}

/* A CSR for k with CN cn (OpenSSL directly: keys tlsid would not make). */
static char *
csr_for(EVP_PKEY *k, const char *cn)
{
	X509_REQ *r = X509_REQ_new();
	X509_NAME *n = X509_NAME_new();
	BIO *b = BIO_new(BIO_s_mem());
	char *p, *out;
	long len;

	X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
	    (const unsigned char *)cn, -1, -1, 0);
	X509_REQ_set_subject_name(r, n);
	X509_REQ_set_pubkey(r, k);
	X509_REQ_sign(r, k, EVP_get_digestbyname("SHA256") &&
	    EVP_PKEY_get_base_id(k) != EVP_PKEY_ED25519 ? EVP_sha256() : NULL);
	PEM_write_bio_X509_REQ(b, r);
	len = BIO_get_mem_data(b, &p);
	out = xstrndup(p, (size_t)len);
	BIO_free(b);
	X509_NAME_free(n);
	X509_REQ_free(r);
	return out;
}

/* The CSR with the last byte of its DER (in the signature) flipped. */
static char *
csr_bad_signature(const char *pem)
{
	BIO *b = BIO_new_mem_buf(pem, -1), *o;
	X509_REQ *r = PEM_read_bio_X509_REQ(b, NULL, NULL, NULL);
	unsigned char *der = NULL;
	const unsigned char *q;
	char *p, *out;
	long len;
	int n;

	BIO_free(b);
	n = i2d_X509_REQ(r, &der);
	X509_REQ_free(r);
	der[n - 1] ^= 0x01;
	q = der;
	r = d2i_X509_REQ(NULL, &q, n);
	OPENSSL_free(der);
	o = BIO_new(BIO_s_mem());
	PEM_write_bio_X509_REQ(o, r);
	len = BIO_get_mem_data(o, &p);
	out = xstrndup(p, (size_t)len);
	BIO_free(o);
	X509_REQ_free(r);
	return out;
}

/* A client context the tlsid API would not make: any key, cert, version. */
static SSL_CTX *
raw_ctx(const char *keyfile, const char *certpem, int maxver)
{
	SSL_CTX *c = SSL_CTX_new(TLS_client_method());
	EVP_PKEY *k;
	X509 *x;
	FILE *f;

	SSL_CTX_set_verify(c, SSL_VERIFY_NONE, NULL);
	if (maxver != 0) {
		SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
		SSL_CTX_set_max_proto_version(c, maxver);
	}
	if (certpem != NULL) {
		x = x509_of(certpem);
		SSL_CTX_use_certificate(c, x);
		X509_free(x);
	}
	if (keyfile != NULL && (f = fopen(keyfile, "r")) != NULL) {
		k = PEM_read_PrivateKey(f, NULL, NULL, NULL);
		fclose(f);
		SSL_CTX_use_PrivateKey(c, k);
		EVP_PKEY_free(k);
	}
	return c;
}

/* --- handshakes over a socketpair, the server in a thread ------------- */

struct revoked {
	char		 serial[TLSID_SERIAL_HEX + 1];
	int		 calls;
	struct tlsid_peer seen;
};

struct side {
	SSL_CTX		*ctx;		/* client NULL: plain bytes */
	const char	*plain;
	size_t		 plainlen;
	int		 fd;
	int		 ok;
	char		 err[256];
	int		 have_peer;
	struct tlsid_peer peer;
	int		 have_code;
	char		 code[TLSID_CODE_LEN + 1];
	unsigned char	 mat[32];
	int		 recheck;	/* tlsid_recheck after the handshake */
	struct revoked	*revoke_mid;	/* ... having revoked the peer */
	int		 recheck_rc;
	char		 recheck_why[256];
};

static void	revoke_serial(struct revoked *, const char *);

static void
after_handshake(SSL *ssl, struct side *s)
{
	s->have_peer = tlsid_peer(ssl, &s->peer) == 0;
	s->recheck_why[0] = '\0';
	if (s->revoke_mid != NULL && s->have_peer)
		revoke_serial(s->revoke_mid, s->peer.serial);
	s->recheck_rc = s->recheck ? tlsid_recheck(ssl, s->recheck_why,
	    sizeof(s->recheck_why)) : 0;
	s->have_code = tlsid_pair_code(ssl, s->code) == 0 &&
	    tlsid_pair_material(ssl, s->mat) == 0;
}

static void *
server_main(void *arg)
{
	struct side *s = arg;
	SSL *ssl = SSL_new(s->ctx);
	char c;
	int r;

	SSL_set_fd(ssl, s->fd);
	if ((r = SSL_accept(ssl)) != 1) {
		tlsid_ssl_error(ssl, r, s->err, sizeof(s->err));
	} else {
		after_handshake(ssl, s);
		s->ok = SSL_write(ssl, "x", 1) == 1;
		(void)SSL_read(ssl, &c, 1);	/* until the client closes */
	}
	ERR_clear_error();
	SSL_free(ssl);
	close(s->fd);
	return NULL;
}

static void
client_run(struct side *s)
{
	char c, buf[64];
	SSL *ssl;
	int r;

	if (s->ctx == NULL) {
		if (write(s->fd, s->plain, s->plainlen) < 0)
			diag("plain write: %s", strerror(errno));
		while (read(s->fd, buf, sizeof(buf)) > 0)
			;
		close(s->fd);
		return;
	}
	ssl = SSL_new(s->ctx);
	SSL_set_fd(ssl, s->fd);
	if ((r = SSL_connect(ssl)) != 1) {
		tlsid_ssl_error(ssl, r, s->err, sizeof(s->err));
	} else {
		after_handshake(ssl, s);
		/* TLS 1.3: the server judges our certificate after this. */
		if ((r = SSL_read(ssl, &c, 1)) == 1 && c == 'x')
			s->ok = 1;
		else
			tlsid_ssl_error(ssl, r, s->err, sizeof(s->err));
		SSL_shutdown(ssl);
	}
	ERR_clear_error();
	SSL_free(ssl);
	close(s->fd);
}

static void
handshake(struct side *srv, struct side *cli)
{
	struct timeval tv = { 10, 0 };
	pthread_t t;
	int sv[2];

	srv->ok = cli->ok = 0;
	srv->err[0] = cli->err[0] = '\0';
	srv->have_peer = cli->have_peer = 0;
	srv->have_code = cli->have_code = 0;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == -1)
		exit(2);
	setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(sv[1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	srv->fd = sv[0];
	cli->fd = sv[1];
	pthread_create(&t, NULL, server_main, srv);
	client_run(cli);
	pthread_join(t, NULL);
}

/* --- the check hook (revocation) -------------------------------------- */


static void
revoke_serial(struct revoked *r, const char *serial)
{
	snprintf(r->serial, sizeof(r->serial), "%s", serial);
}

static int
check_revoked(const struct tlsid_peer *p, void *arg, char *why, size_t len)
{
	struct revoked *r = arg;

	r->calls++;
	r->seen = *p;
	if (r->serial[0] != '\0' && strcmp(p->serial, r->serial) == 0) {
		snprintf(why, len, "revoked (serial %s)", p->serial);
		return -1;
	}
	return 0;
}

/* --- tests -------------------------------------------------------------- */

static void
test_names(void)
{
	char why[128];

	ok(tlsid_name_check("tc17", why, sizeof(why)) == 0, "name tc17");
	ok(tlsid_name_check("a", why, sizeof(why)) == 0, "name a");
	ok(tlsid_name_check("vdi-01.example_x", why, sizeof(why)) == 0,
	    "name with . _ -");
	ok(tlsid_name_check(
	    "a23456789012345678901234567890123456789012345678901234567890123",
	    why, sizeof(why)) == 0, "63 characters");
	ok(tlsid_name_check(
	    "a234567890123456789012345678901234567890123456789012345678901234",
	    why, sizeof(why)) == -1, "64 characters refused");
	like(why, "64 characters", "... saying how long");
	ok(tlsid_name_check("vdi/01", why, sizeof(why)) == -1, "vdi/01 refused");
	like(why, "'/' at position 4", "... naming the character");
	ok(tlsid_name_check("-x", why, sizeof(why)) == -1, "-x refused");
	like(why, "'-' at position 1", "... a first character");
	ok(tlsid_name_check("a b", why, sizeof(why)) == -1, "a b refused");
	like(why, "byte 0x20 at position 2", "... unprintable ones in hex");
	ok(tlsid_name_check("", why, sizeof(why)) == -1, "empty refused");
	is_int(tlsid_role_parse("agent"), TLSID_ROLE_AGENT, "role agent");
	is_int(tlsid_role_parse("host"), TLSID_ROLE_HOST, "role host");
	is_int(tlsid_role_parse("Agent"), TLSID_ROLE_NONE, "role Agent: none");
}

static void
test_codes(void)
{
	ok(tlsid_code_equal("012345", "012345"), "codes equal");
	ok(!tlsid_code_equal("012345", "012346"), "codes differ");
	ok(!tlsid_code_equal("01234", "01234"), "5 digits: not a code");
	ok(!tlsid_code_equal("0123456", "0123456"), "7 digits: not a code");
	ok(!tlsid_code_equal("01234a", "01234a"), "a letter: not a code");
	ok(!tlsid_code_equal(NULL, "012345"), "NULL: not a code");
}

static struct tlsid_store *
open_store(const char *dir, const char *name, int renew, char *err,
    size_t errlen)
{
	struct tlsid_store_opts o;

	memset(&o, 0, sizeof(o));
	o.name = name;
	o.renew_days = renew;
	return tlsid_store_open(path(dir, ""), &o, err, errlen);
}

static void
test_store(void)
{
	struct tlsid_store *s, *s2;
	struct tlsid_store_opts o;
	char err[512], fpr[65], cafpr[65], cn[64];
	time_t now = time(NULL);
	mode_t um;

	mkdir_in("gw");
	um = umask(077);
	s = open_store("gw", "gw1", 0, err, sizeof(err));
	umask(um);
	if (!ok(s != NULL, "store created in an empty directory"))
		diag("%s", err);
	is_int(file_mode(path("gw", "ca.key")), 0600, "ca.key 0600");
	is_int(file_mode(path("gw", "gateway.key")), 0600, "gateway.key 0600");
	is_int(file_mode(path("gw", "ca.pem")), 0644,
	    "ca.pem 0644 (under umask 077)");
	is_int(file_mode(path("gw", "gateway.pem")), 0644, "gateway.pem 0644");
	ok(access(path("gw", "ca.key.tmp"), F_OK) == -1, "no temporary left");
	ok(is_hex64(tlsid_store_fpr(s)), "fingerprint: 64 lowercase hex");
	ok(strcmp(tlsid_store_fpr(s), tlsid_store_ca_fpr(s)) != 0,
	    "CA and server fingerprints differ");
	snprintf(fpr, sizeof(fpr), "%s", tlsid_store_fpr(s));
	snprintf(cafpr, sizeof(cafpr), "%s", tlsid_store_ca_fpr(s));
	subject_entry(tlsid_store_cert(s), NID_commonName, cn, sizeof(cn));
	is_str(cn, "gw1", "server CN = the gateway's name");
	subject_entry(tlsid_store_cert(s), NID_organizationalUnitName, cn,
	    sizeof(cn));
	is_str(cn, "gateway", "server OU = gateway");
	ok(X509_check_ca(tlsid_store_ca(s)) == 1, "ca.pem is a CA");
	ok(X509_check_purpose(tlsid_store_cert(s), X509_PURPOSE_SSL_SERVER,
	    0) == 1, "gateway.pem is for TLS servers");
	ok(X509_check_purpose(tlsid_store_cert(s), X509_PURPOSE_SSL_CLIENT,
	    0) != 1, "... and not for clients");
	ok(tlsid_expires_within(tlsid_store_ca(s), 3651L * 86400) &&
	    !tlsid_expires_within(tlsid_store_ca(s), 3640L * 86400),
	    "CA valid about 10 years");
	ok(tlsid_expires_within(tlsid_store_cert(s), 366L * 86400) &&
	    !tlsid_expires_within(tlsid_store_cert(s), 360L * 86400),
	    "server certificate valid about 1 year");
	tlsid_store_free(s);

	s = open_store("gw", "gw1", 0, err, sizeof(err));
	if (!ok(s != NULL, "store reopened"))
		diag("%s", err);
	is_str(s ? tlsid_store_fpr(s) : "", fpr, "same server fingerprint");
	is_str(s ? tlsid_store_ca_fpr(s) : "", cafpr, "same CA fingerprint");
	tlsid_store_free(s);

	/* Key files: mode and owner. */
	chmod(path("gw", "ca.key"), 0644);
	s = open_store("gw", "gw1", 0, err, sizeof(err));
	ok(s == NULL, "ca.key 0644 refused");
	like(err, path("gw", "ca.key"), "... naming the file");
	like(err, "mode 0644: expected 0600", "... its mode and 0600");
	tlsid_store_free(s);
	chmod(path("gw", "ca.key"), 0600);
	chmod(path("gw", "gateway.key"), 0640);
	s = open_store("gw", "gw1", 0, err, sizeof(err));
	ok(s == NULL, "gateway.key 0640 refused");
	like(err, "gateway.key: mode 0640", "... naming the file and mode");
	tlsid_store_free(s);
	chmod(path("gw", "gateway.key"), 0600);
	if (geteuid() == 0) {
		ok(chown(path("gw", "gateway.key"), 65534, 65534) == 0,
		    "chown gateway.key to uid 65534");
		s = open_store("gw", "gw1", 0, err, sizeof(err));
		ok(s == NULL, "gateway.key of another owner refused");
		like(err, "gateway.key: owned by uid 65534", "... naming it");
		tlsid_store_free(s);
		ok(chown(path("gw", "gateway.key"), 0, 0) == 0, "chown back");
	} else {
		skip("not root: cannot chown a key to another uid");
		skip("not root");
		skip("not root");
		skip("not root");
	}

	/* A certificate that is not its key's, or not the CA's. */
	mkdir_in("gw2");
	s2 = open_store("gw2", "gw2", 0, err, sizeof(err));
	ok(s2 != NULL, "a second gateway's store");
	rename(path("gw", "gateway.pem"), path("gw", "gateway.pem.save"));
	ok(link(path("gw2", "gateway.pem"), path("gw", "gateway.pem")) == 0,
	    "gateway.pem replaced by gw2's");
	s = open_store("gw", "gw1", 0, err, sizeof(err));
	ok(s == NULL, "another gateway's certificate refused");
	like(err, "gateway.pem: does not match its key", "... naming it");
	tlsid_store_free(s);
	rename(path("gw", "gateway.pem.save"), path("gw", "gateway.pem"));

	memset(&o, 0, sizeof(o));
	o.name = "gw1";
	o.ca_file = path("gw2", "ca.pem");
	s = tlsid_store_open(path("gw", ""), &o, err, sizeof(err));
	ok(s == NULL, "site CA that did not sign gateway.pem refused");
	like(err, "gateway.pem: not signed by the CA", "... naming it");
	tlsid_store_free(s);
	o.ca_file = path("gw", "ca.pem");
	s = tlsid_store_open(path("gw", ""), &o, err, sizeof(err));
	if (!ok(s != NULL, "site CA mode: loads the files named"))
		diag("%s", err);
	ok(s && !tlsid_store_can_issue(s), "... and cannot issue without "
	    "the CA's key");
	ok(s && tlsid_store_renew(s, now, 30, err, sizeof(err)) == -1,
	    "... nor renew");
	tlsid_store_free(s);
	o.ca_file = path("gw", "gateway.pem");
	s = tlsid_store_open(path("gw", ""), &o, err, sizeof(err));
	ok(s == NULL, "a site CA that is not a CA refused");
	like(err, "not a CA certificate", "... saying so");
	tlsid_store_free(s);

	/* Expired, then renewed at open. */
	s = open_store("gw", "gw1", 0, err, sizeof(err));
	ok(s && tlsid_store_renew(s, now - 400 * 86400, 30, err,
	    sizeof(err)) == 0, "gateway.pem backdated: expired 370 days ago");
	tlsid_store_free(s);
	s = open_store("gw", "gw1", 0, err, sizeof(err));
	ok(s == NULL, "expired gateway.pem refused");
	like(err, "gateway.pem: expired (notAfter ", "... naming it");
	tlsid_store_free(s);
	s = open_store("gw", "gw1", 30, err, sizeof(err));
	if (!ok(s != NULL, "renew-days 30: renewed at open"))
		diag("%s", err);
	ok(s && !tlsid_expires_within(tlsid_store_cert(s), 300L * 86400),
	    "... for a year");
	ok(s && strcmp(tlsid_store_fpr(s), fpr) != 0 &&
	    strcmp(tlsid_store_ca_fpr(s), cafpr) == 0,
	    "... a new certificate, the same CA");
	tlsid_store_free(s);

	/* A first start cut short: the CA is there, gateway.* are not. */
	unlink(path("gw2", "gateway.pem"));
	unlink(path("gw2", "gateway.key"));
	s2 = (tlsid_store_free(s2), open_store("gw2", "gw2", 0, err,
	    sizeof(err)));
	ok(s2 != NULL, "missing server identity made again from the CA");
	is_int(file_mode(path("gw2", "gateway.key")), 0600, "... key 0600");
	tlsid_store_free(s2);
	unlink(path("gw2", "ca.pem"));
	s2 = open_store("gw2", "gw2", 0, err, sizeof(err));
	ok(s2 == NULL, "ca.key without ca.pem refused");
	like(err, "ca.pem: does not exist", "... naming the missing file");
	tlsid_store_free(s2);
	s2 = open_store("gw", "bad name", 0, err, sizeof(err));
	ok(s2 == NULL, "a bad gateway name refused");
	like(err, "byte 0x20 at position 4", "... naming the character");
}

static void
test_issue(struct tlsid_store *s)
{
	struct tlsid_client *c;
	char err[512], fpr[65], fpr2[65], *pem = NULL, *csr, *big, buf[64];
	const char *csrp;
	EVP_PKEY *k;
	X509 *x;
	time_t before, after;

	mkdir_in("tc17");
	c = tlsid_client_key(path("tc17", ""), "tc17", TLSID_ROLE_AGENT, err,
	    sizeof(err));
	if (!ok(c != NULL, "agent key made"))
		diag("%s", err);
	is_int(file_mode(path("tc17", "agent.key")), 0600, "agent.key 0600");
	ok(!tlsid_client_enrolled(c), "not enrolled yet");
	csrp = tlsid_client_csr(c);
	like(csrp, "-----BEGIN CERTIFICATE REQUEST-----", "a CSR in PEM");

	before = time(NULL);
	ok(tlsid_issue(s, csrp, strlen(csrp), NULL, TLSID_ROLE_AGENT, 30, &pem,
	    fpr, err, sizeof(err)) == 0, "agent certificate issued");
	after = time(NULL);
	ok(is_hex64(fpr), "fingerprint: 64 lowercase hex");
	x = pem ? x509_of(pem) : NULL;
	ok(x != NULL, "it is a certificate in PEM");
	if (x != NULL) {
		char f2[65];

		subject_entry(x, NID_commonName, buf, sizeof(buf));
		is_str(buf, "tc17", "CN = the CSR's name");
		subject_entry(x, NID_organizationalUnitName, buf, sizeof(buf));
		is_str(buf, "agent", "OU = agent");
		ok(X509_check_purpose(x, X509_PURPOSE_SSL_CLIENT, 0) == 1,
		    "clientAuth");
		ok(X509_check_purpose(x, X509_PURPOSE_SSL_SERVER, 0) != 1,
		    "not serverAuth");
		ok(X509_verify(x, X509_get0_pubkey(tlsid_store_ca(s))) == 1,
		    "signed by the CA");
		is_int(ASN1_STRING_length(X509_get0_serialNumber(x)), 16,
		    "serial: 16 bytes (128 bits, top bit clear)");
		tlsid_fpr(x, f2);
		is_str(f2, fpr, "returned fingerprint is the certificate's");
		ok(X509_cmp_time(X509_get0_notBefore(x),
		    &(time_t){ after - 300 }) < 0 &&
		    X509_cmp_time(X509_get0_notBefore(x),
		    &(time_t){ before - 301 }) > 0, "notBefore = now - 5 min");
		ok(tlsid_expires_within(x, 30 * 86400 + 5) &&
		    !tlsid_expires_within(x, 30 * 86400 - 5),
		    "notAfter = now + 30 days");
		X509_free(x);
	}
	ok(tlsid_client_install(c, pem, strlen(pem), "x", 1, err,
	    sizeof(err)) == -1, "install refuses a CA that is not PEM");
	{
		char *capem = tlsid_store_ca_pem(s);

		ok(tlsid_client_install(c, pem, strlen(pem), capem,
		    strlen(capem), err, sizeof(err)) == 0, "agent installs it");
		free(capem);
	}
	is_int(file_mode(path("tc17", "agent.pem")), 0644, "agent.pem 0644");
	is_int(file_mode(path("tc17", "gateway-ca.pem")), 0644,
	    "gateway-ca.pem 0644");
	free(pem);
	pem = NULL;
	ok(tlsid_client_enrolled(c), "enrolled");
	tlsid_client_free(c);
	c = tlsid_client_key(path("tc17", ""), "tc17", TLSID_ROLE_AGENT, err,
	    sizeof(err));
	ok(c && tlsid_client_enrolled(c), "reloaded: enrolled");
	ok(c && tlsid_fpr(tlsid_client_cert(c), fpr2) == 0 &&
	    strcmp(fpr, fpr2) == 0, "... with the same certificate");
	tlsid_client_free(c);
	chmod(path("tc17", "agent.key"), 0644);
	c = tlsid_client_key(path("tc17", ""), "tc17", TLSID_ROLE_AGENT, err,
	    sizeof(err));
	ok(c == NULL, "agent.key 0644 refused");
	like(err, "agent.key: mode 0644: expected 0600", "... naming it");
	chmod(path("tc17", "agent.key"), 0600);

	/* A host, named by the gateway (the CSR's CN is not used). */
	mkdir_in("vdi01");
	c = tlsid_client_key(path("vdi01", ""), "whatever", TLSID_ROLE_HOST, err,
	    sizeof(err));
	csrp = c ? tlsid_client_csr(c) : "";
	ok(tlsid_issue(s, csrp, strlen(csrp), "vdi01", TLSID_ROLE_HOST, 365,
	    &pem, fpr, err, sizeof(err)) == 0, "host certificate issued");
	x = pem ? x509_of(pem) : NULL;
	if (x != NULL) {
		subject_entry(x, NID_commonName, buf, sizeof(buf));
		is_str(buf, "vdi01", "CN = the name given");
		subject_entry(x, NID_organizationalUnitName, buf, sizeof(buf));
		is_str(buf, "host", "OU = host");
		X509_free(x);
	} else {
		skip("no certificate");
		skip("no certificate");
	}
	free(pem);
	pem = NULL;

	/* Refusals. */
	ok(tlsid_issue(s, csrp, strlen(csrp), "vdi/01", TLSID_ROLE_HOST, 365,
	    &pem, fpr, err, sizeof(err)) == -1 && pem == NULL,
	    "name vdi/01 refused");
	like(err, "character '/' at position 4", "... naming the character");
	ok(tlsid_issue(s, csrp, strlen(csrp), "vdi01", TLSID_ROLE_GATEWAY, 365,
	    &pem, fpr, err, sizeof(err)) == -1, "role gateway refused");
	ok(tlsid_issue(s, csrp, strlen(csrp), "vdi01", TLSID_ROLE_HOST, 0,
	    &pem, fpr, err, sizeof(err)) == -1, "0 days refused");
	tlsid_client_free(c);

	k = EVP_EC_gen("P-256");
	csr = csr_for(k, "bad!name");
	ok(tlsid_issue(s, csr, strlen(csr), NULL, TLSID_ROLE_AGENT, 30, &pem,
	    fpr, err, sizeof(err)) == -1, "CSR CN bad!name refused");
	like(err, "CSR: name: character '!' at position 4",
	    "... naming the character");
	free(csr);
	csr = csr_for(k, "good");
	ok(tlsid_issue(s, csr, strlen(csr), NULL, TLSID_ROLE_AGENT, 30, &pem,
	    fpr, err, sizeof(err)) == 0, "CSR CN good accepted");
	free(pem);
	pem = NULL;
	big = xmalloc(TLSID_CSR_MAX + 2);
	memset(big, 'A', TLSID_CSR_MAX + 1);
	memcpy(big, csr, strlen(csr));
	big[TLSID_CSR_MAX + 1] = '\0';
	ok(tlsid_issue(s, big, TLSID_CSR_MAX + 1, NULL, TLSID_ROLE_AGENT, 30,
	    &pem, fpr, err, sizeof(err)) == -1, "CSR of 8193 bytes refused");
	like(err, "CSR of 8193 bytes: expected at most 8192", "... saying so");
	free(big);
	big = csr_bad_signature(csr);
	ok(tlsid_issue(s, big, strlen(big), NULL, TLSID_ROLE_AGENT, 30, &pem,
	    fpr, err, sizeof(err)) == -1, "CSR with a bad signature refused");
	like(err, "CSR: bad signature", "... saying so");
	free(big);
	free(csr);
	EVP_PKEY_free(k);
	ok(tlsid_issue(s, "hello", 5, NULL, TLSID_ROLE_AGENT, 30, &pem, fpr,
	    err, sizeof(err)) == -1, "not a CSR refused");
	like(err, "expected a certificate request in PEM", "... saying so");

	k = EVP_RSA_gen(1024);
	csr = csr_for(k, "weak");
	ok(tlsid_issue(s, csr, strlen(csr), NULL, TLSID_ROLE_AGENT, 30, &pem,
	    fpr, err, sizeof(err)) == -1, "RSA 1024 refused");
	like(err, "RSA key of 1024 bits: expected 2048 to 4096", "... saying so");
	free(csr);
	EVP_PKEY_free(k);
	k = EVP_RSA_gen(2048);
	csr = csr_for(k, "rsa2048");
	ok(tlsid_issue(s, csr, strlen(csr), NULL, TLSID_ROLE_AGENT, 30, &pem,
	    fpr, err, sizeof(err)) == 0, "RSA 2048 accepted");
	free(pem);
	pem = NULL;
	free(csr);
	EVP_PKEY_free(k);
	k = EVP_EC_gen("P-384");
	csr = csr_for(k, "p384");
	ok(tlsid_issue(s, csr, strlen(csr), NULL, TLSID_ROLE_AGENT, 30, &pem,
	    fpr, err, sizeof(err)) == -1, "EC P-384 refused");
	like(err, "curve secp384r1: expected P-256", "... saying so");
	free(csr);
	EVP_PKEY_free(k);
	k = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
	csr = csr_for(k, "ed");
	ok(tlsid_issue(s, csr, strlen(csr), NULL, TLSID_ROLE_AGENT, 30, &pem,
	    fpr, err, sizeof(err)) == -1, "Ed25519 refused");
	like(err, "expected EC P-256 or RSA", "... saying so");
	free(csr);
	EVP_PKEY_free(k);
}

/* An enrolled client in dir, issued by s with now and days. */
static struct tlsid_client *
enrolled(struct tlsid_store *s, const char *dir, const char *name,
    enum tlsid_role role, char **pemp)
{
	struct tlsid_client *c;
	char err[512], fpr[65], *pem, *capem;
	const char *csr;

	mkdir_in(dir);
	c = tlsid_client_key(path(dir, ""), name, role, err, sizeof(err));
	csr = tlsid_client_csr(c);
	if (tlsid_issue(s, csr, strlen(csr), name, role, 30, &pem, fpr, err,
	    sizeof(err)) == -1) {
		diag("%s", err);
		exit(2);
	}
	capem = tlsid_store_ca_pem(s);
	if (tlsid_client_install(c, pem, strlen(pem), capem, strlen(capem),
	    err, sizeof(err)) == -1) {
		diag("%s", err);
		exit(2);
	}
	free(capem);
	if (pemp != NULL)
		*pemp = pem;
	else
		free(pem);
	return c;
}

static void
test_handshakes(struct tlsid_store *s, struct tlsid_store *other)
{
	struct tlsid_client *agent, *host, *stranger;
	struct side srv, cli;
	struct revoked rv, cv;
	char err[512], fpr[65], *pem, *agentpem;
	const char *csr;
	static const char devlist[8] = { 0x01, 0x11, (char)0x80, 0x05 };

	memset(&srv, 0, sizeof(srv));
	memset(&cli, 0, sizeof(cli));
	memset(&rv, 0, sizeof(rv));
	memset(&cv, 0, sizeof(cv));
	agent = enrolled(s, "a1", "tc17", TLSID_ROLE_AGENT, &agentpem);
	host = enrolled(s, "h1", "vdi01", TLSID_ROLE_HOST, NULL);
	stranger = enrolled(other, "x1", "tc17", TLSID_ROLE_AGENT, NULL);

	srv.ctx = tlsid_ctx_server(s, 0, check_revoked, &rv, err, sizeof(err));
	ok(srv.ctx != NULL, "server context");
	cli.ctx = tlsid_ctx_client(agent, 0, check_revoked, &cv, err,
	    sizeof(err));
	ok(cli.ctx != NULL, "agent's client context");
	ok(SSL_CTX_get_min_proto_version(srv.ctx) == TLS1_3_VERSION &&
	    SSL_CTX_get_max_proto_version(srv.ctx) == TLS1_3_VERSION,
	    "server: TLS 1.3 only");

	handshake(&srv, &cli);
	if (!ok(srv.ok && cli.ok, "agent accepted"))
		diag("server: %s; client: %s", srv.err, cli.err);
	ok(srv.have_peer, "server sees its peer");
	is_str(srv.peer.name, "tc17", "... named tc17");
	is_int(srv.peer.role, TLSID_ROLE_AGENT, "... role agent");
	is_int(srv.peer.pairing, 0, "... authenticated, not pairing");
	ok(tlsid_fpr(tlsid_client_cert(agent), fpr) == 0 &&
	    strcmp(srv.peer.fpr, fpr) == 0, "... with its fingerprint");
	ok(strlen(srv.peer.serial) == 32, "... and its 128-bit serial");
	ok(srv.peer.not_after > time(NULL) + 29 * 86400, "... and notAfter");
	is_int(rv.calls, 1, "the server's check ran once");
	is_str(rv.seen.name, "tc17", "... and saw tc17");
	is_int(cv.calls, 1, "the client's check ran once");
	is_str(cv.seen.name, "gw1", "... and saw the gateway gw1");
	is_int(cv.seen.role, TLSID_ROLE_GATEWAY, "... role gateway");
	is_str(cv.seen.fpr, tlsid_store_fpr(s), "... its fingerprint");
	ok(srv.have_code && cli.have_code, "both ends derive a code");
	ok(tlsid_code_equal(srv.code, cli.code), "the same code at both ends");
	SSL_CTX_free(cli.ctx);

	cli.ctx = tlsid_ctx_client(host, 0, NULL, NULL, err, sizeof(err));
	handshake(&srv, &cli);
	ok(srv.ok && cli.ok, "host accepted");
	is_str(srv.peer.name, "vdi01", "... named vdi01");
	is_int(srv.peer.role, TLSID_ROLE_HOST, "... role host");
	SSL_CTX_free(cli.ctx);

	/* Revoked: the hook denies the agent's serial. */
	cli.ctx = tlsid_ctx_client(agent, 0, NULL, NULL, err, sizeof(err));
	handshake(&srv, &cli);
	snprintf(rv.serial, sizeof(rv.serial), "%s", srv.peer.serial);
	handshake(&srv, &cli);
	ok(!srv.ok && !cli.ok, "revoked agent refused");
	like(srv.err, "refused: revoked (serial ", "... the hook's reason");
	like(cli.err, "peer refused our certificate", "... the agent is told");
	rv.serial[0] = '\0';

	/* Revoked while the handshake ran (after its certificate was
	 * judged): tlsid_recheck at the end says so (tlsshim drops it). */
	srv.recheck = 1;
	handshake(&srv, &cli);
	ok(srv.ok && srv.recheck_rc == 0, "not revoked: the recheck allows");
	srv.revoke_mid = &rv;
	handshake(&srv, &cli);
	srv.revoke_mid = NULL;
	srv.recheck = 0;
	ok(srv.recheck_rc == -1, "revoked during the handshake: the recheck "
	    "at its end denies");
	like(srv.recheck_why, "revoked (serial ", "... with the hook's reason");
	rv.serial[0] = '\0';
	SSL_CTX_free(cli.ctx);

	/* No client certificate. */
	cli.ctx = raw_ctx(NULL, NULL, 0);
	handshake(&srv, &cli);
	ok(!srv.ok && !cli.ok, "no client certificate refused");
	is_str(srv.err, "no client certificate", "... saying so");
	SSL_CTX_free(cli.ctx);

	/* Another CA's certificate (the client itself trusts anyone). */
	{
		BIO *b = BIO_new(BIO_s_mem());
		char *p;
		long n;

		PEM_write_bio_X509(b, tlsid_client_cert(stranger));
		n = BIO_get_mem_data(b, &p);
		pem = xstrndup(p, (size_t)n);
		BIO_free(b);
	}
	cli.ctx = raw_ctx(path("x1", "agent.key"), pem, 0);
	handshake(&srv, &cli);
	ok(!srv.ok && !cli.ok, "another CA's certificate refused");
	like(srv.err, "CN=tc17 not issued by this gateway's CA (at depth 0)",
	    "... saying so");
	SSL_CTX_free(cli.ctx);
	free(pem);

	/* The agent's client context refuses another gateway. */
	cli.ctx = tlsid_ctx_client(stranger, 0, NULL, NULL, err, sizeof(err));
	handshake(&srv, &cli);
	ok(!srv.ok && !cli.ok, "an agent of another gateway refuses this one");
	like(cli.err, "CN=gw1 not issued by this gateway's CA",
	    "... saying so");
	SSL_CTX_free(cli.ctx);

	/* Expired: issued 400 days ago for 30 days. */
	csr = tlsid_client_csr(agent);
	ok(tlsid_issue_at(s, csr, strlen(csr), "tc17", TLSID_ROLE_AGENT,
	    time(NULL) - 400 * 86400, 30, &pem, fpr, err, sizeof(err)) == 0,
	    "an expired certificate issued");
	cli.ctx = raw_ctx(path("a1", "agent.key"), pem, 0);
	handshake(&srv, &cli);
	ok(!srv.ok && !cli.ok, "expired certificate refused");
	like(srv.err, "CN=tc17 expired (notAfter ", "... saying so");
	SSL_CTX_free(cli.ctx);
	free(pem);

	/* The gateway's own server certificate as a client certificate. */
	{
		BIO *b = BIO_new(BIO_s_mem());
		char *p;
		long n;

		PEM_write_bio_X509(b, tlsid_store_cert(s));
		n = BIO_get_mem_data(b, &p);
		pem = xstrndup(p, (size_t)n);
		BIO_free(b);
	}
	cli.ctx = raw_ctx(path("gw", "gateway.key"), pem, 0);
	handshake(&srv, &cli);
	ok(!srv.ok, "a server certificate as a client's refused");
	like(srv.err, "not for this use", "... saying so");
	SSL_CTX_free(cli.ctx);
	free(pem);

	/* Plaintext: a USB/IP OP_REQ_DEVLIST. */
	cli.ctx = NULL;
	cli.plain = devlist;
	cli.plainlen = sizeof(devlist);
	handshake(&srv, &cli);
	ok(!srv.ok, "plaintext refused");
	is_str(srv.err, "not TLS (plaintext?)", "... saying so");

	/* TLS 1.2 only. */
	cli.ctx = raw_ctx(path("a1", "agent.key"), agentpem, TLS1_2_VERSION);
	handshake(&srv, &cli);
	ok(!srv.ok && !cli.ok, "TLS 1.2 client refused");
	is_str(srv.err, "peer does not speak TLS 1.3", "... saying so");
	SSL_CTX_free(cli.ctx);
	free(agentpem);

	/* Two sessions, two codes. */
	{
		char code1[TLSID_CODE_LEN + 1];
		unsigned char mat1[32];

		cli.ctx = tlsid_ctx_client(agent, 0, NULL, NULL, err,
		    sizeof(err));
		handshake(&srv, &cli);
		memcpy(code1, cli.code, sizeof(code1));
		memcpy(mat1, cli.mat, sizeof(mat1));
		handshake(&srv, &cli);
		ok(srv.ok && cli.ok && cli.have_code, "a second session");
		ok(memcmp(mat1, cli.mat, 32) != 0,
		    "its keying material differs from the first's");
		/* A 1 in 10^6 chance of the same 6 digits by accident. */
		ok(strcmp(code1, cli.code) != 0, "its code differs (%s, %s)",
		    code1, cli.code);
		SSL_CTX_free(cli.ctx);
	}
	SSL_CTX_free(srv.ctx);
	tlsid_client_free(agent);
	tlsid_client_free(host);
	tlsid_client_free(stranger);
}

static void
test_pairing(struct tlsid_store *s, struct tlsid_store *mitm)
{
	struct tlsid_client *newbie, *mallory, *agent;
	struct side srv, cli, msrv, mcli;
	char err[512], fpr[TLSID_FPR_HEX + 1], *pem;
	const char *csr;

	memset(&srv, 0, sizeof(srv));
	memset(&cli, 0, sizeof(cli));
	memset(&msrv, 0, sizeof(msrv));
	memset(&mcli, 0, sizeof(mcli));
	mkdir_in("new");
	newbie = tlsid_client_key(path("new", ""), "tc18", TLSID_ROLE_AGENT,
	    err, sizeof(err));
	ok(tlsid_ctx_client(newbie, 0, NULL, NULL, err, sizeof(err)) == NULL,
	    "an agent that is not enrolled has no ordinary client context");
	like(err, "enroll first", "... saying so");
	srv.ctx = tlsid_ctx_server(s, TLSID_PAIRING, NULL, NULL, err,
	    sizeof(err));
	cli.ctx = tlsid_ctx_client(newbie, TLSID_PAIRING, NULL, NULL, err,
	    sizeof(err));
	ok(srv.ctx && cli.ctx, "pairing contexts");
	handshake(&srv, &cli);
	if (!ok(srv.ok && cli.ok, "pairing session established"))
		diag("server: %s; client: %s", srv.err, cli.err);
	ok(srv.have_peer && srv.peer.pairing, "server: unauthenticated, "
	    "pairing");
	is_str(srv.peer.name, "tc18", "... the requested name");
	ok(cli.have_peer && cli.peer.pairing, "client: pairing");
	is_str(cli.peer.fpr, tlsid_store_fpr(s),
	    "client sees the gateway's fingerprint");
	ok(srv.have_code && cli.have_code &&
	    tlsid_code_equal(srv.code, cli.code),
	    "the same code at both ends (%s)", srv.code);
	ok(memcmp(srv.mat, cli.mat, 32) == 0, "... from the same material");

	/* The normal server context does not admit a placeholder. */
	{
		struct side s2 = srv;

		s2.ctx = tlsid_ctx_server(s, 0, NULL, NULL, err, sizeof(err));
		handshake(&s2, &cli);
		ok(!s2.ok, "placeholder refused without TLSID_PAIRING");
		like(s2.err, "not issued by this gateway's CA", "... saying so");
		SSL_CTX_free(s2.ctx);
	}

	/*
	 * A man in the middle: the agent reaches mallory's pairing server
	 * (its own CA and key), mallory reaches the gateway with its own
	 * placeholder.  Each session agrees with itself, not with the other.
	 */
	mkdir_in("mallory");
	mallory = tlsid_client_key(path("mallory", ""), "tc18",
	    TLSID_ROLE_AGENT, err, sizeof(err));
	msrv.ctx = tlsid_ctx_server(mitm, TLSID_PAIRING, NULL, NULL, err,
	    sizeof(err));
	mcli.ctx = tlsid_ctx_client(mallory, TLSID_PAIRING, NULL, NULL, err,
	    sizeof(err));
	handshake(&msrv, &cli);		/* agent -> mallory */
	handshake(&srv, &mcli);		/* mallory -> gateway */
	ok(msrv.ok && cli.ok && srv.ok && mcli.ok, "both MITM sessions up");
	ok(tlsid_code_equal(cli.code, msrv.code) &&
	    tlsid_code_equal(mcli.code, srv.code), "each agrees with itself");
	ok(memcmp(cli.mat, srv.mat, 32) != 0,
	    "the agent's material differs from the gateway's");
	/* A 1 in 10^6 chance of the same 6 digits by accident. */
	ok(!tlsid_code_equal(cli.code, srv.code),
	    "the agent's code differs from the gateway's (%s, %s)", cli.code,
	    srv.code);
	SSL_CTX_free(msrv.ctx);
	SSL_CTX_free(mcli.ctx);

	/* Pairing server: an enrolled agent is still authenticated. */
	agent = enrolled(s, "a2", "tc19", TLSID_ROLE_AGENT, NULL);
	SSL_CTX_free(cli.ctx);
	cli.ctx = tlsid_ctx_client(agent, 0, NULL, NULL, err, sizeof(err));
	handshake(&srv, &cli);
	ok(srv.ok && srv.have_peer && !srv.peer.pairing &&
	    strcmp(srv.peer.name, "tc19") == 0,
	    "pairing server: an enrolled agent is authenticated");
	SSL_CTX_free(cli.ctx);

	/* ... and another CA's certificate is still refused. */
	csr = tlsid_client_csr(agent);
	if (tlsid_issue(mitm, csr, strlen(csr), "tc19", TLSID_ROLE_AGENT, 30,
	    &pem, fpr, err, sizeof(err)) == 0) {
		cli.ctx = raw_ctx(path("a2", "agent.key"), pem, 0);
		handshake(&srv, &cli);
		ok(!srv.ok, "pairing server: another CA's certificate refused");
		like(srv.err, "not issued by this gateway's CA", "... saying so");
		SSL_CTX_free(cli.ctx);
		free(pem);
	}
	SSL_CTX_free(srv.ctx);
	tlsid_client_free(agent);
	tlsid_client_free(mallory);
	tlsid_client_free(newbie);
}

int
main(void)
{
	struct tlsid_store *s, *other;
	char err[512], cmd[128];

	signal(SIGPIPE, SIG_IGN);
	snprintf(top, sizeof(top), "/tmp/test_tlsid.XXXXXX");
	if (mkdtemp(top) == NULL)
		return 2;
	test_names();
	test_codes();
	test_store();
	s = open_store("gw", "gw1", 0, err, sizeof(err));
	if (!ok(s != NULL, "the gateway's store for the handshakes"))
		diag("%s", err);
	other = tlsid_store_generate("other", err, sizeof(err));
	ok(other != NULL, "another gateway, in memory");
	if (s != NULL && other != NULL) {
		test_issue(s);
		test_handshakes(s, other);
		test_pairing(s, other);
	}
	tlsid_store_free(s);
	tlsid_store_free(other);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
	if (system(cmd) != 0)
		diag("could not remove %s", top);
	return done_testing();
}
