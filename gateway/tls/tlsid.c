/*
 * TLS identities, certificates and pairing codes (tlsid.h, protocol.md
 * 1.10).  OpenSSL 3.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "tls/tlsid.h"
#include "base/util.h"

#define ORG		"usbgw"
#define PLACEHOLDER_DAYS 30
#define RSA_BITS_MIN	2048
#define RSA_BITS_MAX	4096

enum kind { K_CA, K_SERVER, K_CLIENT, K_PLACEHOLDER };

struct tlsid_store {
	char		*dir;
	char		 name[TLSID_NAME_MAX + 1];
	int		 own_ca;
	EVP_PKEY	*ca_key;	/* NULL: a site CA without its key */
	X509		*ca;
	EVP_PKEY	*key;
	X509		*cert;
	char		*cert_path;
	char		 fpr[TLSID_FPR_HEX + 1];
	char		 ca_fpr[TLSID_FPR_HEX + 1];
};

struct tlsid_client {
	char		*dir;
	enum tlsid_role	 role;
	EVP_PKEY	*key;
	X509		*placeholder;
	X509		*cert;		/* NULL: not enrolled */
	X509		*ca;
	char		*csr;
};

/* What a context remembers (SSL_CTX ex_data). */
struct ctxdata {
	int		 server;
	int		 flags;
	tlsid_check_fn	 check;
	void		*arg;
};

/* What one connection's verification found (SSL ex_data). */
struct ssldata {
	int		 checked;	/* depth 0 judged */
	int		 pairing;
	struct tlsid_peer peer;
	char		 reason[256];
};

static int ctx_idx = -1, ssl_idx = -1;
static pthread_once_t idx_once = PTHREAD_ONCE_INIT;

static void
exfree(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl,
    void *argp)
{
	free(ptr);
}

static void
idx_init(void)
{
	ctx_idx = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, exfree);
	ssl_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, exfree);
}

static void
seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* --- names, roles, fingerprints -------------------------------------- */

const char *
tlsid_role_name(enum tlsid_role r)
{
	switch (r) {
	case TLSID_ROLE_GATEWAY:
		return "gateway";
	case TLSID_ROLE_AGENT:
		return "agent";
	case TLSID_ROLE_HOST:
		return "host";
	default:
		return "none";
	}
}

enum tlsid_role
tlsid_role_parse(const char *s)
{
	if (s == NULL)
		return TLSID_ROLE_NONE;
	if (strcmp(s, "gateway") == 0)
		return TLSID_ROLE_GATEWAY;
	if (strcmp(s, "agent") == 0)
		return TLSID_ROLE_AGENT;
	if (strcmp(s, "host") == 0)
		return TLSID_ROLE_HOST;
	return TLSID_ROLE_NONE;
}

static int
name_char(int c, int first)
{
	if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (c >= '0' && c <= '9'))
		return 1;
	return !first && (c == '.' || c == '_' || c == '-');
}

/* The same check over len bytes that need not end in a NUL. */
static int
name_check_n(const char *name, size_t len, char *why, size_t whylen)
{
	size_t i;
	int c;

	if (len == 0) {
		seterr(why, whylen, "empty name: expected 1 to %d characters "
		    "of A-Z a-z 0-9 . _ -", TLSID_NAME_MAX);
		return -1;
	}
	for (i = 0; i < len && i < TLSID_NAME_MAX; i++) {
		c = (unsigned char)name[i];
		if (name_char(c, i == 0))
			continue;
		if (c > 0x20 && c < 0x7f)
			seterr(why, whylen, "name: character '%c' at position "
			    "%zu: expected %sA-Z a-z 0-9%s", c, i + 1,
			    i == 0 ? "a first character of " : "",
			    i == 0 ? "" : " . _ -");
		else
			seterr(why, whylen, "name: byte 0x%02x at position "
			    "%zu: expected %sA-Z a-z 0-9%s", c, i + 1,
			    i == 0 ? "a first character of " : "",
			    i == 0 ? "" : " . _ -");
		return -1;
	}
	if (len > TLSID_NAME_MAX) {
		seterr(why, whylen, "name: %zu characters: expected at most %d",
		    len, TLSID_NAME_MAX);
		return -1;
	}
	return 0;
}

int
tlsid_name_check(const char *name, char *why, size_t whylen)
{
	return name_check_n(name, strnlen(name, TLSID_NAME_MAX + 1), why,
	    whylen);
}

static void
hex(const unsigned char *b, size_t n, char *out)
{
	static const char d[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = d[b[i] >> 4];
		out[2 * i + 1] = d[b[i] & 15];
	}
	out[2 * n] = '\0';
}

static int
fpr_raw(const X509 *cert, unsigned char md[32])
{
	unsigned int n = 0;

	return X509_digest(cert, EVP_sha256(), md, &n) == 1 && n == 32 ? 0 : -1;
}

int
tlsid_fpr(const X509 *cert, char out[TLSID_FPR_HEX + 1])
{
	unsigned char md[32];

	out[0] = '\0';
	if (fpr_raw(cert, md) == -1)
		return -1;
	hex(md, 32, out);
	return 0;
}

/* The one entry of nid in name as a checked name, or -1. */
static int
name_entry(const X509_NAME *xn, int nid, char *out, size_t outlen)
{
	const X509_NAME_ENTRY *e;
	const ASN1_STRING *s;
	int i, len;

	out[0] = '\0';
	if ((i = X509_NAME_get_index_by_NID(xn, nid, -1)) < 0 ||
	    X509_NAME_get_index_by_NID(xn, nid, i) >= 0)
		return -1;
	e = X509_NAME_get_entry(xn, i);
	s = X509_NAME_ENTRY_get_data(e);
	len = ASN1_STRING_length(s);
	if (len <= 0 || (size_t)len >= outlen ||
	    memchr(ASN1_STRING_get0_data(s), '\0', (size_t)len) != NULL)
		return -1;
	memcpy(out, ASN1_STRING_get0_data(s), (size_t)len);
	out[len] = '\0';
	return 0;
}

/* CN, OU and serial of a certificate into p (fpr too). */
static int
peer_of(const X509 *cert, struct tlsid_peer *p)
{
	const X509_NAME *xn = X509_get_subject_name(cert);
	const ASN1_INTEGER *ai = X509_get0_serialNumber(cert);
	unsigned char sb[TLSID_SERIAL_HEX / 2];
	char ou[16];
	struct tm tm;
	BIGNUM *bn;
	int n;

	memset(p, 0, sizeof(*p));
	if (name_entry(xn, NID_commonName, p->name, sizeof(p->name)) == -1 ||
	    tlsid_name_check(p->name, NULL, 0) == -1)
		p->name[0] = '\0';
	if (name_entry(xn, NID_organizationalUnitName, ou, sizeof(ou)) == 0)
		p->role = tlsid_role_parse(ou);
	if ((bn = ASN1_INTEGER_to_BN(ai, NULL)) != NULL) {
		n = BN_num_bytes(bn);
		if (n > 0 && (size_t)n <= sizeof(sb) && BN_bn2bin(bn, sb) == n)
			hex(sb, (size_t)n, p->serial);
		BN_free(bn);
	}
	if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm) == 1)
		p->not_after = timegm(&tm);
	return tlsid_fpr(cert, p->fpr);
}

/* --- files ------------------------------------------------------------ */

static char *
path_join(const char *dir, const char *file)
{
	size_t n = strlen(dir);
	char *p;

	xasprintf(&p, "%s%s%s", dir, n > 0 && dir[n - 1] == '/' ? "" : "/",
	    file);
	return p;
}

/*
 * Write a file whole and atomically: a temporary created with O_EXCL at
 * mode (whatever the umask), written, fsynced, renamed over path, and
 * the directory fsynced, so a crash leaves the old file or the new one.
 */
static int
write_atomic(const char *path, const void *buf, size_t len, mode_t mode,
    char *err, size_t errlen)
{
	char *tmp, *dir, *slash;
	const char *p = buf;
	size_t off = 0;
	ssize_t r;
	int fd, dfd, rc = -1;

	xasprintf(&tmp, "%s.tmp", path);
	(void)unlink(tmp);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, mode)) == -1) {
		seterr(err, errlen, "%s: cannot create it: %s", tmp,
		    strerror(errno));
		free(tmp);
		return -1;
	}
	if (fchmod(fd, mode) == -1)
		goto fail;
	while (off < len) {
		r = write(fd, p + off, len - off);
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			goto fail;
		off += (size_t)r;
	}
	if (fsync(fd) == -1)
		goto fail;
	close(fd);
	fd = -1;
	if (rename(tmp, path) == -1)
		goto fail;
	dir = xstrdup(path);
	if ((slash = strrchr(dir, '/')) != NULL)
		*slash = '\0';
	dfd = open(slash != NULL ? (dir[0] ? dir : "/") : ".",
	    O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd != -1) {
		(void)fsync(dfd);
		close(dfd);
	}
	free(dir);
	free(tmp);
	return 0;
fail:
	seterr(err, errlen, "%s: cannot write it: %s", path, strerror(errno));
	if (fd != -1)
		close(fd);
	(void)unlink(tmp);
	free(tmp);
	return rc;
}

/*
 * Read a small regular file.  secret: owned by this uid and no access
 * for group or others, as key files must be.  1: it does not exist
 * (*buf NULL), 0: read, -1: error in err.
 */
static int
read_file(const char *path, int secret, char **bufp, size_t *lenp, char *err,
    size_t errlen)
{
	struct stat st;
	char *buf;
	size_t n = 0;
	ssize_t r = 0;
	int fd;

	*bufp = NULL;
	*lenp = 0;
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY)) ==
	    -1) {
		if (errno == ENOENT)
			return 1;
		seterr(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		seterr(err, errlen, "%s: expected a regular file", path);
		goto fail;
	}
	if (secret && st.st_uid != geteuid()) {
		seterr(err, errlen, "%s: owned by uid %lu: expected the owner "
		    "to be this program's user (uid %lu), mode 0600", path,
		    (unsigned long)st.st_uid, (unsigned long)geteuid());
		goto fail;
	}
	if (secret && (st.st_mode & 077) != 0) {
		seterr(err, errlen, "%s: mode %04o: expected 0600 (no access "
		    "for group or others)", path, (unsigned)(st.st_mode & 07777));
		goto fail;
	}
	if (st.st_size > TLSID_FILE_MAX) {
		seterr(err, errlen, "%s: larger than %d bytes", path,
		    TLSID_FILE_MAX);
		goto fail;
	}
	buf = xmalloc(TLSID_FILE_MAX + 1);
	while (n < TLSID_FILE_MAX) {
		r = read(fd, buf + n, TLSID_FILE_MAX - n);
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	if (r == -1) {
		seterr(err, errlen, "%s: %s", path, strerror(errno));
		OPENSSL_cleanse(buf, n);
		free(buf);
		goto fail;
	}
	close(fd);
	buf[n] = '\0';
	*bufp = buf;
	*lenp = n;
	return 0;
fail:
	close(fd);
	return -1;
}

static int
exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* Acceptable keys: EC P-256, or RSA of 2048 to 4096 bits. */
static int
key_ok(EVP_PKEY *k, char *why, size_t whylen)
{
	char group[32];
	size_t gl = 0;
	int bits;

	switch (EVP_PKEY_get_base_id(k)) {
	case EVP_PKEY_EC:
		if (EVP_PKEY_get_group_name(k, group, sizeof(group), &gl) == 1 &&
		    strcmp(group, "prime256v1") == 0)
			return 0;
		seterr(why, whylen, "EC key on curve %s: expected P-256",
		    gl > 0 ? group : "(explicit parameters)");
		return -1;
	case EVP_PKEY_RSA:
		bits = EVP_PKEY_get_bits(k);
		if (bits >= RSA_BITS_MIN && bits <= RSA_BITS_MAX)
			return 0;
		seterr(why, whylen, "RSA key of %d bits: expected %d to %d",
		    bits, RSA_BITS_MIN, RSA_BITS_MAX);
		return -1;
	default:
		seterr(why, whylen, "a %s key: expected EC P-256 or RSA",
		    OBJ_nid2sn(EVP_PKEY_get_base_id(k)));
		return -1;
	}
}

static EVP_PKEY *
load_key(const char *path, int *missing, char *err, size_t errlen)
{
	EVP_PKEY *k = NULL;
	char *buf, why[128];
	size_t len;
	BIO *b;
	int r;

	*missing = 0;
	if ((r = read_file(path, 1, &buf, &len, err, errlen)) != 0) {
		if (r == 1) {
			*missing = 1;
			seterr(err, errlen, "%s: does not exist", path);
		}
		return NULL;
	}
	if ((b = BIO_new_mem_buf(buf, (int)len)) != NULL) {
		k = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
		BIO_free(b);
	}
	OPENSSL_cleanse(buf, len);
	free(buf);
	ERR_clear_error();
	if (k == NULL) {
		seterr(err, errlen, "%s: expected a private key in PEM "
		    "(unencrypted)", path);
		return NULL;
	}
	if (key_ok(k, why, sizeof(why)) == -1) {
		seterr(err, errlen, "%s: %s", path, why);
		EVP_PKEY_free(k);
		return NULL;
	}
	return k;
}

static X509 *
load_cert(const char *path, int *missing, char *err, size_t errlen)
{
	X509 *c = NULL;
	char *buf;
	size_t len;
	BIO *b;
	int r;

	*missing = 0;
	if ((r = read_file(path, 0, &buf, &len, err, errlen)) != 0) {
		if (r == 1) {
			*missing = 1;
			seterr(err, errlen, "%s: does not exist", path);
		}
		return NULL;
	}
	if ((b = BIO_new_mem_buf(buf, (int)len)) != NULL) {
		c = PEM_read_bio_X509(b, NULL, NULL, NULL);
		BIO_free(b);
	}
	free(buf);
	ERR_clear_error();
	if (c == NULL)
		seterr(err, errlen, "%s: expected a certificate in PEM", path);
	return c;
}

static char *
pem_cert(X509 *c, size_t *lenp)
{
	char *p, *out = NULL;
	long n;
	BIO *b;

	if ((b = BIO_new(BIO_s_mem())) == NULL)
		return NULL;
	if (PEM_write_bio_X509(b, c) == 1 && (n = BIO_get_mem_data(b, &p)) > 0) {
		out = xmalloc((size_t)n + 1);
		memcpy(out, p, (size_t)n);
		out[n] = '\0';
		if (lenp != NULL)
			*lenp = (size_t)n;
	}
	BIO_free(b);
	return out;
}

static int
write_cert(const char *path, X509 *c, char *err, size_t errlen)
{
	size_t len;
	char *pem;
	int rc;

	if ((pem = pem_cert(c, &len)) == NULL) {
		seterr(err, errlen, "%s: cannot encode the certificate", path);
		return -1;
	}
	rc = write_atomic(path, pem, len, 0644, err, errlen);
	free(pem);
	return rc;
}

/* The key as PEM (PKCS#8, unencrypted) into a 0600 file. */
static int
write_key(const char *path, EVP_PKEY *k, char *err, size_t errlen)
{
	BUF_MEM *bm = NULL;
	BIO *b;
	int rc = -1;

	b = BIO_new(BIO_s_secmem());
	if (b == NULL || PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL,
	    NULL) != 1 || BIO_get_mem_ptr(b, &bm) != 1 || bm == NULL)
		seterr(err, errlen, "%s: cannot encode the key", path);
	else
		rc = write_atomic(path, bm->data, bm->length, 0600, err,
		    errlen);
	BIO_free(b);	/* a mem BIO cleanses its buffer when freed */
	return rc;
}

/* --- making certificates --------------------------------------------- */

static EVP_PKEY *
gen_key(void)
{
	return EVP_EC_gen("P-256");
}

static X509_NAME *
make_name(const char *cn, enum tlsid_role role)
{
	X509_NAME *n = X509_NAME_new();
	const char *ou = role == TLSID_ROLE_NONE ? "ca" : tlsid_role_name(role);

	if (n == NULL ||
	    X509_NAME_add_entry_by_txt(n, "O", MBSTRING_UTF8,
	    (const unsigned char *)ORG, -1, -1, 0) != 1 ||
	    X509_NAME_add_entry_by_txt(n, "OU", MBSTRING_UTF8,
	    (const unsigned char *)ou, -1, -1, 0) != 1 ||
	    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_UTF8,
	    (const unsigned char *)cn, -1, -1, 0) != 1) {
		X509_NAME_free(n);
		return NULL;
	}
	return n;
}

static int
add_ext(X509 *c, X509V3_CTX *v3, int nid, const char *value)
{
	X509_EXTENSION *e;
	int ok;

	if ((e = X509V3_EXT_nconf_nid(NULL, v3, nid, value)) == NULL)
		return -1;
	ok = X509_add_ext(c, e, -1);
	X509_EXTENSION_free(e);
	return ok == 1 ? 0 : -1;
}

static int
random_serial(X509 *c)
{
	unsigned char b[16];
	ASN1_INTEGER *ai = NULL;
	BIGNUM *bn;
	int ok = 0;

	if (RAND_bytes(b, sizeof(b)) != 1)
		return -1;
	b[0] &= 0x7f;	/* positive */
	b[0] |= 0x40;	/* 16 bytes long, never 0 */
	if ((bn = BN_bin2bn(b, sizeof(b), NULL)) != NULL &&
	    (ai = BN_to_ASN1_INTEGER(bn, NULL)) != NULL)
		ok = X509_set_serialNumber(c, ai) == 1;
	ASN1_INTEGER_free(ai);
	BN_free(bn);
	return ok ? 0 : -1;
}

/*
 * A certificate for pub with subject (cn, role), issued by issuer with
 * signkey (issuer NULL: self-signed), valid from now - 5 min to now +
 * days, with kind's extensions.
 */
static X509 *
make_cert(EVP_PKEY *pub, const char *cn, enum tlsid_role role, X509 *issuer,
    EVP_PKEY *signkey, enum kind kind, time_t now, int days)
{
	X509 *c = X509_new();
	X509_NAME *subj = make_name(cn, role);
	X509V3_CTX v3;
	int ok;

	if (c == NULL || subj == NULL)
		goto fail;
	ok = X509_set_version(c, X509_VERSION_3) == 1 &&
	    random_serial(c) == 0 &&
	    X509_set_subject_name(c, subj) == 1 &&
	    X509_set_issuer_name(c, issuer != NULL ?
	    X509_get_subject_name(issuer) : subj) == 1 &&
	    X509_time_adj_ex(X509_getm_notBefore(c), 0, -TLSID_BACKDATE,
	    &now) != NULL &&
	    X509_time_adj_ex(X509_getm_notAfter(c), days, 0, &now) != NULL &&
	    X509_set_pubkey(c, pub) == 1;
	if (!ok)
		goto fail;
	X509V3_set_ctx(&v3, issuer != NULL ? issuer : c, c, NULL, NULL, 0);
	switch (kind) {
	case K_CA:
		ok = add_ext(c, &v3, NID_basic_constraints,
		    "critical,CA:TRUE,pathlen:0") == 0 &&
		    add_ext(c, &v3, NID_key_usage,
		    "critical,keyCertSign,cRLSign") == 0;
		break;
	case K_SERVER:
	case K_CLIENT:
	case K_PLACEHOLDER:
		ok = add_ext(c, &v3, NID_basic_constraints,
		    "critical,CA:FALSE") == 0 &&
		    add_ext(c, &v3, NID_key_usage,
		    "critical,digitalSignature") == 0 &&
		    add_ext(c, &v3, NID_ext_key_usage, kind == K_SERVER ?
		    "serverAuth" : "clientAuth") == 0;
		break;
	}
	ok = ok && add_ext(c, &v3, NID_subject_key_identifier, "hash") == 0;
	if (ok && issuer != NULL)
		ok = add_ext(c, &v3, NID_authority_key_identifier,
		    "keyid:always") == 0;
	if (!ok || X509_sign(c, signkey, EVP_sha256()) <= 0)
		goto fail;
	X509_NAME_free(subj);
	return c;
fail:
	X509_NAME_free(subj);
	X509_free(c);
	ERR_clear_error();
	return NULL;
}

static void
fmt_time(const ASN1_TIME *t, char *buf, size_t len)
{
	struct tm tm;

	if (ASN1_TIME_to_tm(t, &tm) != 1 ||
	    strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
		snprintf(buf, len, "(unreadable time)");
}

/* Within its validity period at now?  0, or -1 with why. */
static int
check_time(const X509 *c, time_t now, char *why, size_t whylen)
{
	char t[40];

	if (X509_cmp_time(X509_get0_notAfter(c), &now) <= 0) {
		fmt_time(X509_get0_notAfter(c), t, sizeof(t));
		seterr(why, whylen, "expired (notAfter %s)", t);
		return -1;
	}
	if (X509_cmp_time(X509_get0_notBefore(c), &now) > 0) {
		fmt_time(X509_get0_notBefore(c), t, sizeof(t));
		seterr(why, whylen, "not valid yet (notBefore %s)", t);
		return -1;
	}
	return 0;
}

/* A CA certificate we may trust: a CA, in its validity period. */
static int
check_ca(const char *path, X509 *ca, EVP_PKEY *key, time_t now, char *err,
    size_t errlen)
{
	char why[96];

	if (X509_check_ca(ca) == 0) {
		seterr(err, errlen, "%s: not a CA certificate (expected "
		    "basicConstraints CA:TRUE)", path);
		return -1;
	}
	if (check_time(ca, now, why, sizeof(why)) == -1) {
		seterr(err, errlen, "%s: %s", path, why);
		return -1;
	}
	if (key != NULL && X509_check_private_key(ca, key) != 1) {
		ERR_clear_error();
		seterr(err, errlen, "%s: does not match its key", path);
		return -1;
	}
	return 0;
}

/* A leaf: matches key (if given), in its period, signed by ca. */
static int
check_leaf(const char *path, X509 *c, EVP_PKEY *key, X509 *ca, time_t now,
    int want_time, char *err, size_t errlen)
{
	char why[96];
	EVP_PKEY *capub = X509_get0_pubkey(ca);

	if (key != NULL && X509_check_private_key(c, key) != 1) {
		ERR_clear_error();
		seterr(err, errlen, "%s: does not match its key", path);
		return -1;
	}
	if (X509_check_issued(ca, c) != X509_V_OK || capub == NULL ||
	    X509_verify(c, capub) != 1) {
		ERR_clear_error();
		seterr(err, errlen, "%s: not signed by the CA", path);
		return -1;
	}
	if (want_time && check_time(c, now, why, sizeof(why)) == -1) {
		seterr(err, errlen, "%s: %s", path, why);
		return -1;
	}
	return 0;
}

/* --- the gateway's store --------------------------------------------- */

void
tlsid_store_free(struct tlsid_store *s)
{
	if (s == NULL)
		return;
	EVP_PKEY_free(s->ca_key);
	EVP_PKEY_free(s->key);
	X509_free(s->ca);
	X509_free(s->cert);
	free(s->dir);
	free(s->cert_path);
	free(s);
}

static int
store_fprs(struct tlsid_store *s, char *err, size_t errlen)
{
	if (tlsid_fpr(s->cert, s->fpr) == -1 ||
	    tlsid_fpr(s->ca, s->ca_fpr) == -1) {
		seterr(err, errlen, "cannot hash the certificates");
		return -1;
	}
	return 0;
}

/* A new CA and server identity in s (memory). */
static int
store_make(struct tlsid_store *s, time_t now, char *err, size_t errlen)
{
	char cn[TLSID_NAME_MAX + 1];

	snprintf(cn, sizeof(cn), "%.*s CA", TLSID_NAME_MAX - 3, s->name);
	if ((s->ca_key = gen_key()) == NULL ||
	    (s->ca = make_cert(s->ca_key, cn, TLSID_ROLE_NONE, NULL,
	    s->ca_key, K_CA, now, TLSID_CA_DAYS)) == NULL ||
	    (s->key = gen_key()) == NULL ||
	    (s->cert = make_cert(s->key, s->name, TLSID_ROLE_GATEWAY, s->ca,
	    s->ca_key, K_SERVER, now, TLSID_SERVER_DAYS)) == NULL) {
		ERR_clear_error();
		seterr(err, errlen, "cannot make the CA and server keys");
		return -1;
	}
	return 0;
}

struct tlsid_store *
tlsid_store_generate(const char *name, char *err, size_t errlen)
{
	struct tlsid_store *s;
	char why[128];

	if (tlsid_name_check(name, why, sizeof(why)) == -1) {
		seterr(err, errlen, "gateway %s", why);
		return NULL;
	}
	s = xcalloc(1, sizeof(*s));
	usbgw_strlcpy(s->name, name, sizeof(s->name));
	s->own_ca = 1;
	if (store_make(s, time(NULL), err, errlen) == -1 ||
	    store_fprs(s, err, errlen) == -1) {
		tlsid_store_free(s);
		return NULL;
	}
	return s;
}

/* First start: make everything and write it, keys first. */
static int
store_create(struct tlsid_store *s, const char *cak, const char *cap,
    const char *gk, const char *gp, char *err, size_t errlen)
{
	if (store_make(s, time(NULL), err, errlen) == -1)
		return -1;
	if (write_key(cak, s->ca_key, err, errlen) == -1 ||
	    write_cert(cap, s->ca, err, errlen) == -1 ||
	    write_key(gk, s->key, err, errlen) == -1 ||
	    write_cert(gp, s->cert, err, errlen) == -1)
		return -1;
	return 0;
}

/* The server identity, with the CA loaded: load it, or complete it. */
static int
store_server(struct tlsid_store *s, const struct tlsid_store_opts *o,
    const char *gk, const char *gp, time_t now, char *err, size_t errlen)
{
	int kmiss, cmiss;

	s->key = load_key(gk, &kmiss, err, errlen);
	if (s->key == NULL && !(kmiss && s->own_ca))
		return -1;
	if (s->key == NULL) {
		/* Own CA, no key yet (a first start cut short): make one. */
		if (exists(gp)) {
			seterr(err, errlen, "%s: exists without its key %s",
			    gp, gk);
			return -1;
		}
		if ((s->key = gen_key()) == NULL ||
		    write_key(gk, s->key, err, errlen) == -1)
			return -1;
	}
	s->cert = load_cert(gp, &cmiss, err, errlen);
	if (s->cert == NULL && !(cmiss && s->own_ca))
		return -1;
	if (s->cert == NULL)
		return tlsid_store_renew(s, now, TLSID_SERVER_DAYS, err,
		    errlen);
	if (check_leaf(gp, s->cert, s->key, s->ca, now, 0, err, errlen) == -1)
		return -1;
	if (s->own_ca && o->renew_days > 0 && s->ca_key != NULL &&
	    tlsid_expires_within(s->cert, (long)o->renew_days * 86400))
		return tlsid_store_renew(s, now, TLSID_SERVER_DAYS, err,
		    errlen);
	return check_leaf(gp, s->cert, s->key, s->ca, now, 1, err, errlen);
}

struct tlsid_store *
tlsid_store_open(const char *dir, const struct tlsid_store_opts *o,
    char *err, size_t errlen)
{
	struct tlsid_store *s;
	char *cak, *cap, *gk, *gp, why[128];
	time_t now = time(NULL);
	struct stat st;
	int miss, rc = -1;

	if (o->name == NULL || tlsid_name_check(o->name, why, sizeof(why)) ==
	    -1) {
		seterr(err, errlen, "gateway %s", o->name ? why : "name: none");
		return NULL;
	}
	if (stat(dir, &st) == -1 || !S_ISDIR(st.st_mode)) {
		seterr(err, errlen, "%s: expected a directory", dir);
		return NULL;
	}
	s = xcalloc(1, sizeof(*s));
	s->dir = xstrdup(dir);
	usbgw_strlcpy(s->name, o->name, sizeof(s->name));
	s->own_ca = o->ca_file == NULL;
	cak = o->ca_file ? (o->ca_key_file ? xstrdup(o->ca_key_file) : NULL) :
	    path_join(dir, "ca.key");
	cap = o->ca_file ? xstrdup(o->ca_file) : path_join(dir, "ca.pem");
	gk = o->key_file ? xstrdup(o->key_file) : path_join(dir, "gateway.key");
	gp = o->cert_file ? xstrdup(o->cert_file) :
	    path_join(dir, "gateway.pem");
	s->cert_path = xstrdup(gp);

	if (s->own_ca && !exists(cak) && !exists(cap)) {
		if (exists(gk) || exists(gp)) {
			seterr(err, errlen, "%s: exists without the CA that "
			    "issued it (%s)", exists(gp) ? gp : gk, cap);
			goto out;
		}
		rc = store_create(s, cak, cap, gk, gp, err, errlen);
		goto out;
	}
	if (cak != NULL && (s->ca_key = load_key(cak, &miss, err, errlen)) ==
	    NULL)
		goto out;
	if ((s->ca = load_cert(cap, &miss, err, errlen)) == NULL ||
	    check_ca(cap, s->ca, s->ca_key, now, err, errlen) == -1)
		goto out;
	rc = store_server(s, o, gk, gp, now, err, errlen);
out:
	if (rc == 0)
		rc = store_fprs(s, err, errlen);
	free(cak);
	free(cap);
	free(gk);
	free(gp);
	if (rc == -1) {
		tlsid_store_free(s);
		return NULL;
	}
	return s;
}

int
tlsid_store_renew(struct tlsid_store *s, time_t now, int days, char *err,
    size_t errlen)
{
	X509 *c;

	if (!s->own_ca || s->ca_key == NULL) {
		seterr(err, errlen, "%s: issued by a site CA: renew it there",
		    s->cert_path ? s->cert_path : "gateway certificate");
		return -1;
	}
	if ((c = make_cert(s->key, s->name, TLSID_ROLE_GATEWAY, s->ca,
	    s->ca_key, K_SERVER, now, days)) == NULL) {
		seterr(err, errlen, "cannot issue the server certificate");
		return -1;
	}
	if (s->cert_path != NULL && write_cert(s->cert_path, c, err, errlen) ==
	    -1) {
		X509_free(c);
		return -1;
	}
	X509_free(s->cert);
	s->cert = c;
	return store_fprs(s, err, errlen);
}

const char *
tlsid_store_fpr(const struct tlsid_store *s)
{
	return s->fpr;
}

const char *
tlsid_store_ca_fpr(const struct tlsid_store *s)
{
	return s->ca_fpr;
}

X509 *
tlsid_store_cert(const struct tlsid_store *s)
{
	return s->cert;
}

X509 *
tlsid_store_ca(const struct tlsid_store *s)
{
	return s->ca;
}

char *
tlsid_store_ca_pem(const struct tlsid_store *s)
{
	return pem_cert(s->ca, NULL);
}

int
tlsid_store_can_issue(const struct tlsid_store *s)
{
	return s->ca_key != NULL;
}

/* --- issuing -------------------------------------------------------- */

static X509_REQ *
csr_parse(const char *pem, size_t len, char *err, size_t errlen)
{
	X509_REQ *req = NULL;
	BIO *b;

	if (len > TLSID_CSR_MAX) {
		seterr(err, errlen, "CSR of %zu bytes: expected at most %d",
		    len, TLSID_CSR_MAX);
		return NULL;
	}
	if ((b = BIO_new_mem_buf(pem, (int)len)) != NULL) {
		req = PEM_read_bio_X509_REQ(b, NULL, NULL, NULL);
		BIO_free(b);
	}
	ERR_clear_error();
	if (req == NULL)
		seterr(err, errlen, "CSR: expected a certificate request in "
		    "PEM (BEGIN CERTIFICATE REQUEST)");
	return req;
}

int
tlsid_issue_at(const struct tlsid_store *s, const char *csr_pem, size_t len,
    const char *name, enum tlsid_role role, time_t now, int days,
    char **out_pem, char fpr[TLSID_FPR_HEX + 1], char *err, size_t errlen)
{
	char cn[TLSID_NAME_MAX + 1], why[128];
	X509_REQ *req;
	EVP_PKEY *pub;
	X509 *c = NULL;
	int rc = -1;

	*out_pem = NULL;
	fpr[0] = '\0';
	if (s->ca_key == NULL) {
		seterr(err, errlen, "cannot issue: the CA's key is not here "
		    "(a site CA without ca-key)");
		return -1;
	}
	if (role != TLSID_ROLE_AGENT && role != TLSID_ROLE_HOST) {
		seterr(err, errlen, "cannot issue for role %s: expected agent "
		    "or host", tlsid_role_name(role));
		return -1;
	}
	if (days < 1 || days > TLSID_DAYS_MAX) {
		seterr(err, errlen, "%d days: expected 1 to %d", days,
		    TLSID_DAYS_MAX);
		return -1;
	}
	if (name != NULL && tlsid_name_check(name, why, sizeof(why)) == -1) {
		seterr(err, errlen, "%s", why);
		return -1;
	}
	if ((req = csr_parse(csr_pem, len, err, errlen)) == NULL)
		return -1;
	if ((pub = X509_REQ_get0_pubkey(req)) == NULL) {
		seterr(err, errlen, "CSR: no usable public key");
		goto out;
	}
	if (key_ok(pub, why, sizeof(why)) == -1) {
		seterr(err, errlen, "CSR: %s", why);
		goto out;
	}
	if (X509_REQ_verify(req, pub) != 1) {
		seterr(err, errlen, "CSR: bad signature (expected the request "
		    "to be signed by its own key)");
		goto out;
	}
	if (name == NULL) {
		const X509_NAME *xn = X509_REQ_get_subject_name(req);
		int i = X509_NAME_get_index_by_NID(xn, NID_commonName, -1);
		const ASN1_STRING *as;

		if (i < 0 || X509_NAME_get_index_by_NID(xn, NID_commonName, i)
		    >= 0) {
			seterr(err, errlen, "CSR: expected exactly one CN "
			    "(the name)");
			goto out;
		}
		as = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(xn, i));
		if (name_check_n((const char *)ASN1_STRING_get0_data(as),
		    (size_t)ASN1_STRING_length(as), why, sizeof(why)) == -1) {
			seterr(err, errlen, "CSR: %s", why);
			goto out;
		}
		memcpy(cn, ASN1_STRING_get0_data(as),
		    (size_t)ASN1_STRING_length(as));
		cn[ASN1_STRING_length(as)] = '\0';
	} else
		usbgw_strlcpy(cn, name, sizeof(cn));
	if ((c = make_cert(pub, cn, role, s->ca, s->ca_key, K_CLIENT, now,
	    days)) == NULL || (*out_pem = pem_cert(c, NULL)) == NULL ||
	    tlsid_fpr(c, fpr) == -1) {
		seterr(err, errlen, "cannot issue the certificate");
		free(*out_pem);
		*out_pem = NULL;
		goto out;
	}
	rc = 0;
out:
	ERR_clear_error();
	X509_free(c);
	X509_REQ_free(req);
	return rc;
}

int
tlsid_issue(const struct tlsid_store *s, const char *csr_pem, size_t len,
    const char *name, enum tlsid_role role, int days, char **out_pem,
    char fpr[TLSID_FPR_HEX + 1], char *err, size_t errlen)
{
	return tlsid_issue_at(s, csr_pem, len, name, role, time(NULL), days,
	    out_pem, fpr, err, errlen);
}

/* --- the agent's or vhci host's side --------------------------------- */

void
tlsid_client_free(struct tlsid_client *c)
{
	if (c == NULL)
		return;
	EVP_PKEY_free(c->key);
	X509_free(c->placeholder);
	X509_free(c->cert);
	X509_free(c->ca);
	free(c->csr);
	free(c->dir);
	free(c);
}

static char *
make_csr(EVP_PKEY *k, const char *name, enum tlsid_role role)
{
	X509_REQ *req = X509_REQ_new();
	X509_NAME *n = make_name(name, role);
	char *p, *out = NULL;
	long len;
	BIO *b = NULL;

	if (req != NULL && n != NULL && X509_REQ_set_version(req, 0) == 1 &&
	    X509_REQ_set_subject_name(req, n) == 1 &&
	    X509_REQ_set_pubkey(req, k) == 1 &&
	    X509_REQ_sign(req, k, EVP_sha256()) > 0 &&
	    (b = BIO_new(BIO_s_mem())) != NULL &&
	    PEM_write_bio_X509_REQ(b, req) == 1 &&
	    (len = BIO_get_mem_data(b, &p)) > 0) {
		out = xmalloc((size_t)len + 1);
		memcpy(out, p, (size_t)len);
		out[len] = '\0';
	}
	BIO_free(b);
	X509_NAME_free(n);
	X509_REQ_free(req);
	ERR_clear_error();
	return out;
}

static int
client_paths(const struct tlsid_client *c, char **key, char **cert,
    char **ca)
{
	char file[32];

	snprintf(file, sizeof(file), "%s.key", tlsid_role_name(c->role));
	*key = path_join(c->dir, file);
	snprintf(file, sizeof(file), "%s.pem", tlsid_role_name(c->role));
	*cert = path_join(c->dir, file);
	*ca = path_join(c->dir, "gateway-ca.pem");
	return 0;
}

struct tlsid_client *
tlsid_client_key(const char *dir, const char *name, enum tlsid_role role,
    char *err, size_t errlen)
{
	struct tlsid_client *c;
	char *kp, *cp, *ap, why[128];
	int miss, cmiss, amiss, rc = -1;

	if (role != TLSID_ROLE_AGENT && role != TLSID_ROLE_HOST) {
		seterr(err, errlen, "role %s: expected agent or host",
		    tlsid_role_name(role));
		return NULL;
	}
	if (tlsid_name_check(name, why, sizeof(why)) == -1) {
		seterr(err, errlen, "%s", why);
		return NULL;
	}
	c = xcalloc(1, sizeof(*c));
	c->dir = xstrdup(dir);
	c->role = role;
	client_paths(c, &kp, &cp, &ap);
	if ((c->key = load_key(kp, &miss, err, errlen)) == NULL) {
		if (!miss)
			goto out;
		if ((c->key = gen_key()) == NULL) {
			seterr(err, errlen, "%s: cannot make a key", kp);
			goto out;
		}
		if (write_key(kp, c->key, err, errlen) == -1)
			goto out;
	}
	if ((c->csr = make_csr(c->key, name, role)) == NULL ||
	    (c->placeholder = make_cert(c->key, name, role, NULL, c->key,
	    K_PLACEHOLDER, time(NULL), PLACEHOLDER_DAYS)) == NULL) {
		seterr(err, errlen, "%s: cannot make the CSR", kp);
		goto out;
	}
	c->cert = load_cert(cp, &cmiss, err, errlen);
	c->ca = load_cert(ap, &amiss, err, errlen);
	if (cmiss && amiss) {
		rc = 0;		/* not enrolled yet */
		goto out;
	}
	if (c->cert == NULL || c->ca == NULL) {
		if (cmiss || amiss)
			seterr(err, errlen, "%s: exists without %s",
			    cmiss ? ap : cp, cmiss ? cp : ap);
		goto out;
	}
	if (check_ca(ap, c->ca, NULL, time(NULL), err, errlen) == 0 &&
	    check_leaf(cp, c->cert, c->key, c->ca, time(NULL), 0, err,
	    errlen) == 0)
		rc = 0;
out:
	free(kp);
	free(cp);
	free(ap);
	if (rc == -1) {
		tlsid_client_free(c);
		return NULL;
	}
	return c;
}

const char *
tlsid_client_csr(const struct tlsid_client *c)
{
	return c->csr;
}

int
tlsid_client_enrolled(const struct tlsid_client *c)
{
	return c->cert != NULL && c->ca != NULL;
}

X509 *
tlsid_client_cert(const struct tlsid_client *c)
{
	return c->cert;
}

static X509 *
cert_from_pem(const char *pem, size_t len)
{
	X509 *x = NULL;
	BIO *b;

	if (len > TLSID_FILE_MAX)
		return NULL;
	if ((b = BIO_new_mem_buf(pem, (int)len)) != NULL) {
		x = PEM_read_bio_X509(b, NULL, NULL, NULL);
		BIO_free(b);
	}
	ERR_clear_error();
	return x;
}

int
tlsid_client_install(struct tlsid_client *c, const char *cert_pem,
    size_t certlen, const char *ca_pem, size_t calen, char *err,
    size_t errlen)
{
	X509 *cert = cert_from_pem(cert_pem, certlen);
	X509 *ca = cert_from_pem(ca_pem, calen);
	char *kp, *cp, *ap;
	time_t now = time(NULL);
	int rc = -1;

	client_paths(c, &kp, &cp, &ap);
	if (cert == NULL || ca == NULL) {
		seterr(err, errlen, "%s: expected a certificate in PEM",
		    cert == NULL ? cp : ap);
		goto out;
	}
	if (check_ca(ap, ca, NULL, now, err, errlen) == -1 ||
	    check_leaf(cp, cert, c->key, ca, now, 1, err, errlen) == -1 ||
	    write_cert(ap, ca, err, errlen) == -1 ||
	    write_cert(cp, cert, err, errlen) == -1)
		goto out;
	X509_free(c->cert);
	X509_free(c->ca);
	c->cert = cert;
	c->ca = ca;
	cert = ca = NULL;
	rc = 0;
out:
	X509_free(cert);
	X509_free(ca);
	free(kp);
	free(cp);
	free(ap);
	return rc;
}

/* --- TLS contexts --------------------------------------------------- */

static struct ssldata *
ssldata(SSL *ssl)
{
	struct ssldata *d = SSL_get_ex_data(ssl, ssl_idx);

	if (d == NULL) {
		d = xcalloc(1, sizeof(*d));
		if (SSL_set_ex_data(ssl, ssl_idx, d) != 1) {
			free(d);
			return NULL;
		}
	}
	return d;
}

static const char *
verify_why(int e)
{
	switch (e) {
	case X509_V_ERR_CERT_HAS_EXPIRED:
		return "expired";
	case X509_V_ERR_CERT_NOT_YET_VALID:
		return "not valid yet";
	case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
	case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
	case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
	case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
	case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
		return "not issued by this gateway's CA";
	case X509_V_ERR_INVALID_PURPOSE:
		return "not for this use (extended key usage)";
	default:
		return X509_verify_cert_error_string(e);
	}
}

/* The peer's (leaf's) CN for a log line: name characters, others '?'. */
static void
leaf_cn(X509_STORE_CTX *xs, char *out, size_t len)
{
	STACK_OF(X509) *chain = X509_STORE_CTX_get0_chain(xs);
	X509 *leaf = chain != NULL && sk_X509_num(chain) > 0 ?
	    sk_X509_value(chain, 0) : X509_STORE_CTX_get0_cert(xs);
	size_t i;

	if (leaf == NULL || name_entry(X509_get_subject_name(leaf),
	    NID_commonName, out, len) == -1) {
		snprintf(out, len, "?");
		return;
	}
	for (i = 0; out[i] != '\0'; i++)
		if (!name_char((unsigned char)out[i], 0))
			out[i] = '?';
}

/* A self-signed placeholder we may pair with: signature, key, name. */
static int
placeholder_ok(X509 *cert, struct ssldata *d)
{
	EVP_PKEY *pub = X509_get0_pubkey(cert);
	char why[128];

	if (pub == NULL || X509_verify(cert, pub) != 1) {
		ERR_clear_error();
		snprintf(d->reason, sizeof(d->reason), "pairing certificate: "
		    "bad self-signature");
		return 0;
	}
	if (key_ok(pub, why, sizeof(why)) == -1) {
		snprintf(d->reason, sizeof(d->reason), "pairing certificate: "
		    "%s", why);
		return 0;
	}
	if (name_entry(X509_get_subject_name(cert), NID_commonName, why,
	    sizeof(why)) == -1 || tlsid_name_check(why, NULL, 0) == -1) {
		snprintf(d->reason, sizeof(d->reason), "pairing certificate: "
		    "expected one CN, a valid name");
		return 0;
	}
	d->pairing = 1;
	return 1;
}

/*
 * The verification hook.  A failure at any depth records why; the leaf,
 * once its chain verified, is checked for its role and handed to the
 * caller's check.  Pairing: the server admits a lone self-signed leaf,
 * the client (enrolling) any server certificate.
 */
static int
verify_cb(int ok, X509_STORE_CTX *xs)
{
	SSL *ssl = X509_STORE_CTX_get_ex_data(xs,
	    SSL_get_ex_data_X509_STORE_CTX_idx());
	struct ctxdata *cd;
	struct ssldata *d;
	X509 *cert = X509_STORE_CTX_get_current_cert(xs);
	int depth = X509_STORE_CTX_get_error_depth(xs);
	int e = X509_STORE_CTX_get_error(xs);
	struct tlsid_peer p;
	char why[160], cn[TLSID_NAME_MAX + 1], t[40];

	if (ssl == NULL || (cd = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl),
	    ctx_idx)) == NULL || (d = ssldata(ssl)) == NULL)
		return 0;
	if ((cd->flags & TLSID_PAIRING) && !cd->server) {
		d->pairing = 1;		/* the code authenticates the server */
		return 1;
	}
	if (!ok) {
		if ((cd->flags & TLSID_PAIRING) && depth == 0 &&
		    e == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT &&
		    X509_STORE_CTX_get0_chain(xs) != NULL &&
		    sk_X509_num(X509_STORE_CTX_get0_chain(xs)) == 1)
			return placeholder_ok(cert, d);
		leaf_cn(xs, cn, sizeof(cn));
		if (e == X509_V_ERR_CERT_HAS_EXPIRED && cert != NULL) {
			fmt_time(X509_get0_notAfter(cert), t, sizeof(t));
			snprintf(d->reason, sizeof(d->reason), "certificate "
			    "CN=%s expired (notAfter %s; at depth %d)", cn,
			    t, depth);
		} else
			snprintf(d->reason, sizeof(d->reason), "certificate "
			    "CN=%s %s (at depth %d)", cn, verify_why(e), depth);
		return 0;
	}
	if (depth > 0 || d->checked)
		return 1;
	d->checked = 1;
	if (peer_of(cert, &p) == -1) {
		snprintf(d->reason, sizeof(d->reason), "cannot read the "
		    "certificate");
		return 0;
	}
	p.pairing = d->pairing;
	d->peer = p;
	if (d->pairing)
		return 1;
	if (p.name[0] == '\0') {
		snprintf(d->reason, sizeof(d->reason), "certificate: expected "
		    "one CN, a valid name");
		goto deny;
	}
	if (cd->server && p.role != TLSID_ROLE_AGENT &&
	    p.role != TLSID_ROLE_HOST) {
		snprintf(d->reason, sizeof(d->reason), "certificate CN=%s: "
		    "role %s: expected agent or host", p.name,
		    tlsid_role_name(p.role));
		goto deny;
	}
	if (cd->check != NULL) {
		why[0] = '\0';
		if (cd->check(&p, cd->arg, why, sizeof(why)) != 0) {
			snprintf(d->reason, sizeof(d->reason), "refused: %s",
			    why[0] ? why : "by the check");
			goto deny;
		}
	}
	return 1;
deny:
	/* CERT_REJECTED: the peer gets a bad_certificate alert. */
	X509_STORE_CTX_set_error(xs, X509_V_ERR_CERT_REJECTED);
	return 0;
}

static SSL_CTX *
ctx_new(int server, int flags, tlsid_check_fn check, void *arg,
    EVP_PKEY *key, X509 *cert, X509 *ca, char *err, size_t errlen)
{
	SSL_CTX *ctx;
	struct ctxdata *cd;
	X509_STORE *st;
	int mode;

	pthread_once(&idx_once, idx_init);
	if (ctx_idx < 0 || ssl_idx < 0) {
		seterr(err, errlen, "TLS: no ex_data index");
		return NULL;
	}
	if ((ctx = SSL_CTX_new(server ? TLS_server_method() :
	    TLS_client_method())) == NULL)
		goto fail;
	cd = xcalloc(1, sizeof(*cd));
	cd->server = server;
	cd->flags = flags;
	cd->check = check;
	cd->arg = arg;
	if (SSL_CTX_set_ex_data(ctx, ctx_idx, cd) != 1) {
		free(cd);
		goto fail;
	}
	if (SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1 ||
	    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) != 1 ||
	    SSL_CTX_use_certificate(ctx, cert) != 1 ||
	    SSL_CTX_use_PrivateKey(ctx, key) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1)
		goto fail;
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	if (server && SSL_CTX_set_num_tickets(ctx, 0) != 1)
		goto fail;
	if (ca != NULL) {
		st = SSL_CTX_get_cert_store(ctx);
		if (X509_STORE_add_cert(st, ca) != 1)
			goto fail;
		X509_STORE_set_flags(st, X509_V_FLAG_PARTIAL_CHAIN);
		if (server && SSL_CTX_add_client_CA(ctx, ca) != 1)
			goto fail;
	}
	if (SSL_CTX_set_purpose(ctx, server ? X509_PURPOSE_SSL_CLIENT :
	    X509_PURPOSE_SSL_SERVER) != 1)
		goto fail;
	mode = SSL_VERIFY_PEER;
	if (server)
		mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
	SSL_CTX_set_verify(ctx, mode, verify_cb);
	SSL_CTX_set_verify_depth(ctx, 1);
	return ctx;
fail:
	ERR_clear_error();
	SSL_CTX_free(ctx);
	seterr(err, errlen, "TLS: cannot set up the %s context",
	    server ? "server" : "client");
	return NULL;
}

SSL_CTX *
tlsid_ctx_server(const struct tlsid_store *s, int flags, tlsid_check_fn check,
    void *arg, char *err, size_t errlen)
{
	return ctx_new(1, flags, check, arg, s->key, s->cert, s->ca, err,
	    errlen);
}

SSL_CTX *
tlsid_ctx_client(const struct tlsid_client *c, int flags,
    tlsid_check_fn check, void *arg, char *err, size_t errlen)
{
	if (flags & TLSID_PAIRING)
		return ctx_new(0, flags, NULL, NULL, c->key, c->placeholder,
		    NULL, err, errlen);
	if (!tlsid_client_enrolled(c)) {
		seterr(err, errlen, "%s: no %s certificate yet: enroll first",
		    c->dir, tlsid_role_name(c->role));
		return NULL;
	}
	return ctx_new(0, flags, check, arg, c->key, c->cert, c->ca, err,
	    errlen);
}

int
tlsid_recheck(SSL *ssl, char *why, size_t whylen)
{
	struct ssldata *d = ssl_idx < 0 ? NULL : SSL_get_ex_data(ssl, ssl_idx);
	struct ctxdata *cd = ctx_idx < 0 ? NULL :
	    SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ctx_idx);

	if (d == NULL || d->pairing || !d->checked || cd == NULL ||
	    cd->check == NULL)
		return 0;
	if (cd->check(&d->peer, cd->arg, why, whylen) != 0)
		return -1;
	return 0;
}

int
tlsid_peer(SSL *ssl, struct tlsid_peer *p)
{
	struct ssldata *d = ssl_idx < 0 ? NULL : SSL_get_ex_data(ssl, ssl_idx);
	X509 *cert;

	memset(p, 0, sizeof(*p));
	if (!SSL_is_init_finished(ssl) ||
	    (cert = SSL_get0_peer_certificate(ssl)) == NULL)
		return -1;
	if (d != NULL && d->pairing) {
		if (peer_of(cert, p) == -1)
			return -1;
		p->pairing = 1;
		return 0;
	}
	if (SSL_get_verify_result(ssl) != X509_V_OK || d == NULL ||
	    !d->checked)
		return -1;
	*p = d->peer;
	return 0;
}

const char *
tlsid_ssl_error(SSL *ssl, int ret, char *buf, size_t len)
{
	struct ssldata *d = ssl == NULL || ssl_idx < 0 ? NULL :
	    SSL_get_ex_data(ssl, ssl_idx);
	unsigned long e = ERR_peek_last_error();
	int r = ERR_GET_REASON(e), se = ssl ? SSL_get_error(ssl, ret) : 0;
	const char *why;

	if (d != NULL && d->reason[0] != '\0') {
		snprintf(buf, len, "%s", d->reason);
		ERR_clear_error();
		return buf;
	}
	if (e == 0) {
		if (se == SSL_ERROR_SYSCALL || se == SSL_ERROR_ZERO_RETURN)
			snprintf(buf, len, "connection closed during the "
			    "handshake");
		else
			snprintf(buf, len, "TLS error %d", se);
		return buf;
	}
	switch (ERR_GET_LIB(e) == ERR_LIB_SSL ? r : -1) {
	case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
		why = "no client certificate";
		break;
	case SSL_R_WRONG_VERSION_NUMBER:
	case SSL_R_HTTP_REQUEST:
	case SSL_R_HTTPS_PROXY_REQUEST:
	case SSL_R_PACKET_LENGTH_TOO_LONG:
	case SSL_R_RECORD_LENGTH_MISMATCH:
	case SSL_R_UNKNOWN_PROTOCOL:
		why = "not TLS (plaintext?)";
		break;
	case SSL_R_UNSUPPORTED_PROTOCOL:
	case SSL_R_NO_PROTOCOLS_AVAILABLE:
	case SSL_R_TLSV1_ALERT_PROTOCOL_VERSION:
		why = "peer does not speak TLS 1.3";
		break;
	case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
		why = "peer wants a certificate we did not send";
		break;
	case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
	case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
	case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
	case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
	case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
	case SSL_R_TLSV1_ALERT_ACCESS_DENIED:
		snprintf(buf, len, "peer refused our certificate (%s)",
		    ERR_reason_error_string(e));
		ERR_clear_error();
		return buf;
	default:
		why = NULL;
	}
	if (why != NULL)
		snprintf(buf, len, "%s", why);
	else
		snprintf(buf, len, "TLS: %s", ERR_reason_error_string(e) ?
		    ERR_reason_error_string(e) : "unknown error");
	ERR_clear_error();
	return buf;
}

/* --- pairing codes -------------------------------------------------- */

int
tlsid_pair_material(SSL *ssl, unsigned char out[32])
{
	unsigned char ctx[64];
	X509 *own = SSL_get_certificate(ssl);
	X509 *peer = SSL_get0_peer_certificate(ssl);
	X509 *srv, *cli;

	if (own == NULL || peer == NULL || !SSL_is_init_finished(ssl) ||
	    SSL_version(ssl) != TLS1_3_VERSION)
		return -1;
	srv = SSL_is_server(ssl) ? own : peer;
	cli = SSL_is_server(ssl) ? peer : own;
	if (fpr_raw(srv, ctx) == -1 || fpr_raw(cli, ctx + 32) == -1)
		return -1;
	if (SSL_export_keying_material(ssl, out, 32, TLSID_PAIR_LABEL,
	    sizeof(TLSID_PAIR_LABEL) - 1, ctx, sizeof(ctx), 1) != 1) {
		ERR_clear_error();
		return -1;
	}
	return 0;
}

int
tlsid_pair_code(SSL *ssl, char out[TLSID_CODE_LEN + 1])
{
	unsigned char m[32];
	uint64_t v = 0;
	int i;

	out[0] = '\0';
	if (tlsid_pair_material(ssl, m) == -1)
		return -1;
	for (i = 0; i < 8; i++)
		v = v << 8 | m[i];
	OPENSSL_cleanse(m, sizeof(m));
	snprintf(out, TLSID_CODE_LEN + 1, "%06u", (unsigned)(v % 1000000));
	return 0;
}

int
tlsid_code_equal(const char *a, const char *b)
{
	unsigned char x[TLSID_CODE_LEN], y[TLSID_CODE_LEN];
	int i, bad = 0;

	if (a == NULL || b == NULL)
		return 0;
	for (i = 0; i < TLSID_CODE_LEN; i++) {
		x[i] = (unsigned char)a[i];
		y[i] = (unsigned char)b[i];
		bad |= x[i] < '0' || x[i] > '9' || y[i] < '0' || y[i] > '9';
		if (a[i] == '\0' || b[i] == '\0')
			return 0;
	}
	if (a[TLSID_CODE_LEN] != '\0' || b[TLSID_CODE_LEN] != '\0' || bad)
		return 0;
	return CRYPTO_memcmp(x, y, sizeof(x)) == 0;
}

/* --- renewal -------------------------------------------------------- */

int
tlsid_expires_within(const X509 *cert, long seconds)
{
	time_t t = time(NULL) + seconds;

	return X509_cmp_time(X509_get0_notAfter(cert), &t) <= 0;
}

/* --- enrollment helpers --------------------------------------------- */

/* SHA-256 over a public key's SubjectPublicKeyInfo DER, as hex. */
static int
key_fpr(EVP_PKEY *pub, char out[TLSID_FPR_HEX + 1])
{
	unsigned char *der = NULL, md[32];
	unsigned int mdlen = 0;
	int n, rc = -1;

	out[0] = '\0';
	if (pub == NULL || (n = i2d_PUBKEY(pub, &der)) <= 0)
		goto out;
	if (EVP_Digest(der, (size_t)n, md, &mdlen, EVP_sha256(), NULL) == 1 &&
	    mdlen == 32) {
		hex(md, 32, out);
		rc = 0;
	}
out:
	OPENSSL_free(der);
	ERR_clear_error();
	return rc;
}

int
tlsid_csr_key_fpr(const char *csr_pem, size_t len,
    char out[TLSID_FPR_HEX + 1], char *err, size_t errlen)
{
	X509_REQ *req;
	int rc;

	out[0] = '\0';
	if ((req = csr_parse(csr_pem, len, err, errlen)) == NULL)
		return -1;
	if ((rc = key_fpr(X509_REQ_get0_pubkey(req), out)) == -1)
		seterr(err, errlen, "CSR: no usable public key");
	X509_REQ_free(req);
	return rc;
}

int
tlsid_peer_key_fpr(SSL *ssl, char out[TLSID_FPR_HEX + 1])
{
	X509 *cert = SSL_get0_peer_certificate(ssl);

	out[0] = '\0';
	if (cert == NULL)
		return -1;
	return key_fpr(X509_get0_pubkey(cert), out);
}

int
tlsid_cert_info(const char *pem, size_t len, struct tlsid_peer *p)
{
	X509 *x = cert_from_pem(pem, len);
	int rc;

	memset(p, 0, sizeof(*p));
	if (x == NULL)
		return -1;
	rc = peer_of(x, p);
	X509_free(x);
	return rc;
}

int
tlsid_session_ca_check(SSL *ssl, const char *ca_pem, size_t len, char *err,
    size_t errlen)
{
	STACK_OF(X509) *chain = SSL_get_peer_cert_chain(ssl);
	X509 *ca = cert_from_pem(ca_pem, len), *leaf, *x;
	unsigned char a[32], b[32];
	int i, found = 0, rc = -1;

	if (ca == NULL) {
		seterr(err, errlen, "the gateway's CA: expected a certificate "
		    "in PEM");
		return -1;
	}
	leaf = SSL_get0_peer_certificate(ssl);
	if (chain == NULL || leaf == NULL || fpr_raw(ca, a) == -1) {
		seterr(err, errlen, "the session has no server certificate");
		goto out;
	}
	for (i = 0; i < sk_X509_num(chain); i++) {
		x = sk_X509_value(chain, i);
		if (fpr_raw(x, b) == 0 && CRYPTO_memcmp(a, b, 32) == 0)
			found = 1;
	}
	if (!found) {
		seterr(err, errlen, "the CA sent is not the one in the "
		    "session's certificate chain");
		goto out;
	}
	if (X509_verify(leaf, X509_get0_pubkey(ca)) != 1) {
		seterr(err, errlen, "the session's server certificate is not "
		    "signed by the CA sent");
		goto out;
	}
	rc = 0;
out:
	ERR_clear_error();
	X509_free(ca);
	return rc;
}
