/*
 * The audit log's key file, row MACs, checkpoint signatures and the
 * anchor line parser (auditkey.h).  OpenSSL: HMAC-SHA256, Ed25519.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>

#include "db/auditkey.h"
#include "base/util.h"

#define KEY_TAG		"usbgw-audit-key 1"
#define MAC_TAG		"usbgw-audit-mac-1"
#define MSG_TAG		"usbgw-audit-checkpoint-1"

struct audit_key {
	int		 secret;		/* mac and pkey's private half */
	unsigned char	 mac[32];
	EVP_PKEY	*pkey;
	int64_t		 since;
	char		 fpr[AUDIT_FPR_HEX + 1];
};

static const char hexd[] = "0123456789abcdef";

static void
to_hex(const unsigned char *b, size_t n, char *out)
{
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = hexd[b[i] >> 4];
		out[2 * i + 1] = hexd[b[i] & 15];
	}
	out[2 * n] = '\0';
}

static int
hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Exactly 2n lowercase hex digits into b.  0, or -1. */
static int
from_hex(const char *s, size_t slen, unsigned char *b, size_t n)
{
	size_t i;

	if (slen != 2 * n)
		return -1;
	for (i = 0; i < n; i++) {
		int hi = hexval((unsigned char)s[2 * i]);
		int lo = hexval((unsigned char)s[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		b[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

static int
is_hex(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (hexval((unsigned char)s[i]) < 0)
			return 0;
	return 1;
}

/* Fingerprint: SHA-256 over the DER public key, first 8 bytes in hex. */
static int
set_fpr(struct audit_key *k)
{
	unsigned char *der = NULL, md[32];
	unsigned int mdlen = 0;
	int n;

	if ((n = i2d_PUBKEY(k->pkey, &der)) <= 0)
		return -1;
	n = EVP_Digest(der, (size_t)n, md, &mdlen, EVP_sha256(), NULL);
	OPENSSL_free(der);
	if (n != 1 || mdlen != 32)
		return -1;
	to_hex(md, AUDIT_FPR_HEX / 2, k->fpr);
	return 0;
}

static struct audit_key *
key_from(const unsigned char mac[32], const unsigned char seed[32],
    int64_t since)
{
	struct audit_key *k = xcalloc(1, sizeof(*k));

	k->secret = 1;
	memcpy(k->mac, mac, 32);
	k->since = since;
	if ((k->pkey = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL,
	    seed, 32)) == NULL || set_fpr(k) == -1) {
		audit_key_free(k);
		return NULL;
	}
	return k;
}

void
audit_key_free(struct audit_key *k)
{
	if (k == NULL)
		return;
	EVP_PKEY_free(k->pkey);
	OPENSSL_cleanse(k, sizeof(*k));
	free(k);
}

struct audit_key *
audit_key_generate(int64_t since)
{
	unsigned char b[64];
	struct audit_key *k;

	if (RAND_bytes(b, sizeof(b)) != 1)
		return NULL;
	k = key_from(b, b + 32, since);
	OPENSSL_cleanse(b, sizeof(b));
	return k;
}

/* The key file's text (its secret: cleanse buf after use). */
static int
key_text(const unsigned char b[64], int64_t since, char *buf, size_t len)
{
	char mac[65], sign[65];
	int n;

	to_hex(b, 32, mac);
	to_hex(b + 32, 32, sign);
	n = snprintf(buf, len, "%s\n# usbgwd's audit key: keep it secret "
	    "(mode 0600), back it up apart from the database\nmac %s\n"
	    "sign %s\nsince %" PRId64 "\n", KEY_TAG, mac, sign, since);
	OPENSSL_cleanse(mac, sizeof(mac));
	OPENSSL_cleanse(sign, sizeof(sign));
	return n > 0 && (size_t)n < len ? n : -1;
}

/*
 * Fsync the directory of path (the link made in it survives a crash).
 * Best effort: the key is in place either way.
 */
static void
sync_dir(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	int fd;

	if (slash == NULL)
		usbgw_strlcpy(dir, ".", sizeof(dir));
	else if (slash == path)
		usbgw_strlcpy(dir, "/", sizeof(dir));
	else if ((size_t)(slash - path) < sizeof(dir))
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	else
		return;
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return;
	(void)fsync(fd);
	close(fd);
}

/*
 * Put tmp in place at path unless path exists: link(2), then tmp is
 * removed, or, where the file system has no hard links,
 * renameat2(RENAME_NOREPLACE).  0, or -1 with errno (EEXIST: someone
 * else's file is there) and tmp removed.
 */
static int
link_noreplace(const char *tmp, const char *path)
{
	int rc, e;

	if ((rc = link(tmp, path)) == -1 && (errno == EPERM ||
	    errno == EOPNOTSUPP || errno == EMLINK) &&
	    renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
		return 0;			/* renamed: no tmp left */
	e = errno;
	unlink(tmp);
	errno = e;
	return rc;
}

/*
 * The key file appears whole or not at all: written to a temporary file
 * (mkostemp: O_EXCL, 0600) in the same directory, fsynced, then linked
 * into place without replacing anything.  Gateways started at the same
 * instant on one key path (protocol.md 4.1) each write their own
 * temporary file; the first link wins and every other one loads the
 * winner's key, complete because it was linked in whole, with every
 * check of audit_key_load (owner, mode 0600, no symbolic link, length).
 */
struct audit_key *
audit_key_create(const char *path, int64_t since, int *created, char *err,
    size_t errlen)
{
	unsigned char b[64];
	char buf[512], tmp[PATH_MAX];
	struct audit_key *k = NULL;
	int fd, n, missing, placed;

	*created = 0;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path) >=
	    (int)sizeof(tmp)) {
		snprintf(err, errlen, "audit key %.200s...: path too long",
		    path);
		return NULL;
	}
	if (RAND_bytes(b, sizeof(b)) != 1) {
		snprintf(err, errlen, "audit key %s: no random bytes", path);
		return NULL;
	}
	if ((fd = mkostemp(tmp, O_CLOEXEC)) == -1) {
		snprintf(err, errlen, "audit key %s: cannot create it: %s",
		    path, strerror(errno));
		goto out;
	}
	n = key_text(b, since, buf, sizeof(buf));
	if (fchmod(fd, 0600) == -1 || n < 0 || write(fd, buf, (size_t)n) != n ||
	    fsync(fd) == -1) {
		snprintf(err, errlen, "audit key %s: cannot write it: %s",
		    path, strerror(errno));
		close(fd);
		unlink(tmp);
		goto out;
	}
	close(fd);
	placed = link_noreplace(tmp, path) == 0;
	if (!placed && errno != EEXIST) {
		snprintf(err, errlen, "audit key %s: cannot create it: %s",
		    path, strerror(errno));
		goto out;
	}
	if (!placed) {
		/* another process's, linked first: that one is the key */
		k = audit_key_load(path, 0, &missing, err, errlen);
		goto out;
	}
	sync_dir(path);
	*created = 1;
	if ((k = key_from(b, b + 32, since)) == NULL)
		snprintf(err, errlen, "audit key %s: cannot make the keys", path);
out:
	OPENSSL_cleanse(b, sizeof(b));
	OPENSSL_cleanse(buf, sizeof(buf));
	return k;
}

/* Read a whole small file (at most max bytes) into a NUL-ended buffer. */
static char *
read_small(int fd, size_t max, size_t *len)
{
	char *buf = xmalloc(max + 1);
	size_t n = 0;
	ssize_t r;

	while (n <= max) {
		r = read(fd, buf + n, max + 1 - n);
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	if (n > max || r == -1) {
		OPENSSL_cleanse(buf, n > max ? max + 1 : n);
		free(buf);
		if (r != -1)
			errno = EFBIG;
		return NULL;
	}
	buf[n] = '\0';
	*len = n;
	return buf;
}

/* Parse the key file's text; 0, or -1 with "LINE: why" in err. */
static struct audit_key *
key_parse(const char *path, char *buf, char *err, size_t errlen)
{
	unsigned char mac[32], seed[32];
	char *line, *save = NULL, *v;
	long long since = -1;
	int lineno = 0, have_mac = 0, have_sign = 0, tag = 0;
	struct audit_key *k = NULL;
	const char *es;

	for (line = strtok_r(buf, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		lineno++;
		if (line[0] == '#' || line[0] == '\0')
			continue;
		if (!tag) {
			if (strcmp(line, KEY_TAG) != 0) {
				snprintf(err, errlen, "audit key %s:%d: expected "
				    "\"%s\" first", path, lineno, KEY_TAG);
				goto out;
			}
			tag = 1;
			continue;
		}
		if ((v = strchr(line, ' ')) == NULL) {
			snprintf(err, errlen, "audit key %s:%d: expected "
			    "\"mac HEX\", \"sign HEX\" or \"since N\"", path,
			    lineno);
			goto out;
		}
		*v++ = '\0';
		if (strcmp(line, "mac") == 0 && !have_mac &&
		    from_hex(v, strlen(v), mac, 32) == 0)
			have_mac = 1;
		else if (strcmp(line, "sign") == 0 && !have_sign &&
		    from_hex(v, strlen(v), seed, 32) == 0)
			have_sign = 1;
		else if (strcmp(line, "since") == 0 && since == -1 &&
		    parse_num(v, 1, INT64_MAX, &since, &es) == 0)
			;
		else {
			snprintf(err, errlen, "audit key %s:%d: %s: expected "
			    "%s, once", path, lineno, line,
			    strcmp(line, "since") == 0 ? "a seq from 1" :
			    "64 lowercase hex digits");
			goto out;
		}
	}
	if (!tag || !have_mac || !have_sign || since == -1) {
		snprintf(err, errlen, "audit key %s: expected the lines \"%s\", "
		    "mac, sign and since", path, KEY_TAG);
		goto out;
	}
	if ((k = key_from(mac, seed, since)) == NULL)
		snprintf(err, errlen, "audit key %s: cannot make the keys", path);
out:
	OPENSSL_cleanse(mac, sizeof(mac));
	OPENSSL_cleanse(seed, sizeof(seed));
	return k;
}

struct audit_key *
audit_key_load(const char *path, int any_owner, int *missing, char *err,
    size_t errlen)
{
	struct stat st;
	struct audit_key *k;
	size_t len;
	char *buf;
	int fd;

	*missing = 0;
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY)) ==
	    -1) {
		*missing = errno == ENOENT;
		snprintf(err, errlen, "audit key %s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "audit key %s: expected a regular file",
		    path);
		close(fd);
		return NULL;
	}
	if (st.st_uid != geteuid() && !any_owner) {
		snprintf(err, errlen, "audit key %s: owned by uid %lu: expected "
		    "the daemon's user (uid %lu)", path, (unsigned long)st.st_uid,
		    (unsigned long)geteuid());
		close(fd);
		return NULL;
	}
	if ((st.st_mode & 077) != 0) {
		snprintf(err, errlen, "audit key %s: mode %04o: expected 0600 "
		    "(no access for group or others)", path,
		    (unsigned)(st.st_mode & 07777));
		close(fd);
		return NULL;
	}
	buf = read_small(fd, AUDIT_KEY_FILE_MAX, &len);
	close(fd);
	if (buf == NULL) {
		snprintf(err, errlen, "audit key %s: %s", path, errno == EFBIG ?
		    "larger than 4096 bytes: expected a key file" :
		    strerror(errno));
		return NULL;
	}
	if (strlen(buf) != len) {
		snprintf(err, errlen, "audit key %s: a NUL byte: expected text",
		    path);
		k = NULL;
	} else
		k = key_parse(path, buf, err, errlen);
	OPENSSL_cleanse(buf, len);
	free(buf);
	return k;
}

struct audit_key *
audit_key_load_public(const char *path, char *err, size_t errlen)
{
	struct audit_key *k;
	FILE *f;

	if ((f = fopen(path, "re")) == NULL) {
		snprintf(err, errlen, "public key %s: %s", path, strerror(errno));
		return NULL;
	}
	k = xcalloc(1, sizeof(*k));
	k->pkey = PEM_read_PUBKEY(f, NULL, NULL, NULL);
	fclose(f);
	if (k->pkey == NULL || EVP_PKEY_get_id(k->pkey) != EVP_PKEY_ED25519 ||
	    set_fpr(k) == -1) {
		snprintf(err, errlen, "public key %s: expected an Ed25519 public "
		    "key in PEM (usbgw audit pubkey)", path);
		audit_key_free(k);
		return NULL;
	}
	return k;
}

int
audit_key_has_secret(const struct audit_key *k)
{
	return k != NULL && k->secret;
}

int64_t
audit_key_since(const struct audit_key *k)
{
	return k->since;
}

const char *
audit_key_fpr(const struct audit_key *k)
{
	return k->fpr;
}

int
audit_key_public_pem(const struct audit_key *k, char *buf, size_t len)
{
	BIO *b;
	char *p;
	long n;
	int rc = -1;

	if ((b = BIO_new(BIO_s_mem())) == NULL)
		return -1;
	if (PEM_write_bio_PUBKEY(b, k->pkey) == 1 &&
	    (n = BIO_get_mem_data(b, &p)) > 0 && (size_t)n < len) {
		memcpy(buf, p, (size_t)n);
		buf[n] = '\0';
		rc = 0;
	}
	BIO_free(b);
	return rc;
}

int
audit_key_mac(const struct audit_key *k, int64_t seq, const char hash[65],
    char out[65])
{
	unsigned char msg[sizeof(MAC_TAG) - 1 + 8 + 64], md[32];
	unsigned int mdlen = 0;
	uint64_t u = (uint64_t)seq;
	size_t off = sizeof(MAC_TAG) - 1;
	int i;

	if (!k->secret)
		return -1;
	memcpy(msg, MAC_TAG, off);
	for (i = 7; i >= 0; i--) {
		msg[off + (size_t)i] = (unsigned char)(u & 0xff);
		u >>= 8;
	}
	memcpy(msg + off + 8, hash, 64);
	if (HMAC(EVP_sha256(), k->mac, 32, msg, sizeof(msg), md, &mdlen) ==
	    NULL || mdlen != 32)
		return -1;
	to_hex(md, 32, out);
	return 0;
}

void
audit_anchor_message(const struct audit_anchor *a, char *buf, size_t len)
{
	snprintf(buf, len, "%s seq=%" PRId64 " hash=%s time=%" PRId64, MSG_TAG,
	    a->seq, a->hash, a->time);
}

int
audit_anchor_sign(const struct audit_key *k, struct audit_anchor *a)
{
	unsigned char sig[64];
	size_t siglen = sizeof(sig);
	char msg[256];
	EVP_MD_CTX *c;
	int ok;

	if (!k->secret || (c = EVP_MD_CTX_new()) == NULL)
		return -1;
	audit_anchor_message(a, msg, sizeof(msg));
	ok = EVP_DigestSignInit(c, NULL, NULL, NULL, k->pkey) == 1 &&
	    EVP_DigestSign(c, sig, &siglen, (const unsigned char *)msg,
	    strlen(msg)) == 1 && siglen == 64;
	EVP_MD_CTX_free(c);
	if (!ok)
		return -1;
	to_hex(sig, 64, a->sig);
	memcpy(a->key, k->fpr, sizeof(a->key));
	return 0;
}

int
audit_anchor_verify(const struct audit_key *k, const struct audit_anchor *a)
{
	unsigned char sig[64];
	char msg[256];
	EVP_MD_CTX *c;
	int ok;

	if (from_hex(a->sig, strlen(a->sig), sig, 64) == -1)
		return 0;
	if ((c = EVP_MD_CTX_new()) == NULL)
		return 0;
	audit_anchor_message(a, msg, sizeof(msg));
	ok = EVP_DigestVerifyInit(c, NULL, NULL, NULL, k->pkey) == 1 &&
	    EVP_DigestVerify(c, sig, 64, (const unsigned char *)msg,
	    strlen(msg)) == 1;
	EVP_MD_CTX_free(c);
	return ok;
}

void
audit_anchor_format(const struct audit_anchor *a, char *buf, size_t len)
{
	int n;

	n = snprintf(buf, len, "%s seq=%" PRId64 " hash=%s", AUDIT_ANCHOR_TAG,
	    a->seq, a->hash);
	if (n < 0 || (size_t)n >= len)
		return;
	if (a->time != 0 || a->sig[0] != '\0')
		n += snprintf(buf + n, len - (size_t)n, " time=%" PRId64, a->time);
	if (n > 0 && (size_t)n < len && a->key[0] != '\0')
		n += snprintf(buf + n, len - (size_t)n, " key=%s", a->key);
	if (n > 0 && (size_t)n < len && a->sig[0] != '\0')
		snprintf(buf + n, len - (size_t)n, " sig=%s", a->sig);
}

/* The anchor's fields, in any order, each once; seq and hash required. */
int
audit_anchor_parse_line(const char *line, size_t len, struct audit_anchor *a,
    char *err, size_t errlen)
{
	const size_t tl = sizeof(AUDIT_ANCHOR_TAG) - 1;
	const char *p = NULL, *end = line + len, *f, *eq, *fe;
	long long n;
	const char *es;
	char num[24];
	size_t i, vl;
	int seen = 0;

	for (i = 0; i + tl <= len; i++)
		if (memcmp(line + i, AUDIT_ANCHOR_TAG, tl) == 0 &&
		    (i == 0 || line[i - 1] == ' ' || line[i - 1] == ':') &&
		    (i + tl == len || line[i + tl] == ' ')) {
			p = line + i + tl;
			break;
		}
	if (p == NULL)
		return 0;
	memset(a, 0, sizeof(*a));
	while (p < end) {
		while (p < end && *p == ' ')
			p++;
		if (p == end)
			break;
		f = p;
		while (p < end && *p != ' ')
			p++;
		fe = p;
		if ((eq = memchr(f, '=', (size_t)(fe - f))) == NULL) {
			snprintf(err, errlen, "\"%.*s\": expected NAME=VALUE "
			    "(seq, hash, time, key, sig)", (int)(fe - f > 32 ? 32 :
			    fe - f), f);
			return -1;
		}
		vl = (size_t)(fe - eq - 1);
#define FIELD(name, bit) ((size_t)(eq - f) == sizeof(name) - 1 && \
	memcmp(f, name, sizeof(name) - 1) == 0 && !(seen & (bit)) && \
	((seen |= (bit)), 1))
		if (FIELD("seq", 1) || FIELD("time", 2)) {
			int is_seq = f[0] == 's';

			if (vl == 0 || vl >= sizeof(num)) {
				n = -1;
			} else {
				memcpy(num, eq + 1, vl);
				num[vl] = '\0';
				if (parse_num(num, is_seq ? 1 : 0, INT64_MAX, &n,
				    &es) != 0)
					n = -1;
			}
			if (n < 0) {
				snprintf(err, errlen, "%s: expected a number "
				    "from %d", is_seq ? "seq" : "time",
				    is_seq ? 1 : 0);
				return -1;
			}
			if (is_seq)
				a->seq = n;
			else
				a->time = n;
		} else if (FIELD("hash", 4)) {
			if (vl != 64 || !is_hex(eq + 1, vl)) {
				snprintf(err, errlen, "hash: expected 64 "
				    "lowercase hex digits");
				return -1;
			}
			memcpy(a->hash, eq + 1, 64);
		} else if (FIELD("key", 8)) {
			if (vl != AUDIT_FPR_HEX || !is_hex(eq + 1, vl)) {
				snprintf(err, errlen, "key: expected %d "
				    "lowercase hex digits", AUDIT_FPR_HEX);
				return -1;
			}
			memcpy(a->key, eq + 1, vl);
		} else if (FIELD("sig", 16)) {
			if (vl != AUDIT_SIG_HEX || !is_hex(eq + 1, vl)) {
				snprintf(err, errlen, "sig: expected %d "
				    "lowercase hex digits", AUDIT_SIG_HEX);
				return -1;
			}
			memcpy(a->sig, eq + 1, vl);
		} else {
			snprintf(err, errlen, "\"%.*s\": expected one each of "
			    "seq, hash, time, key, sig", (int)(eq - f > 16 ? 16 :
			    eq - f), f);
			return -1;
		}
#undef FIELD
	}
	if ((seen & 5) != 5) {
		snprintf(err, errlen, "expected seq=N and hash=H");
		return -1;
	}
	return 1;
}

int
audit_anchor_parse(const char *buf, size_t len, const char *name,
    struct audit_anchor *out, size_t max, char *err, size_t errlen)
{
	const char *p = buf, *end = buf + len, *nl;
	struct audit_anchor a;
	char why[192];
	size_t n = 0;
	int line = 0, r;

	while (p < end) {
		line++;
		nl = memchr(p, '\n', (size_t)(end - p));
		if (nl == NULL)
			nl = end;
		r = audit_anchor_parse_line(p, (size_t)(nl - p), &a, why,
		    sizeof(why));
		if (r == -1) {
			snprintf(err, errlen, "%s:%d: %s", name, line, why);
			return -1;
		}
		if (r == 1 && n == max) {
			snprintf(err, errlen, "%s:%d: more than %zu anchors",
			    name, line, max);
			return -1;
		}
		if (r == 1) {
			a.line = line;
			out[n++] = a;
		}
		p = nl + 1;
	}
	if (n == 0) {
		snprintf(err, errlen, "%s: no %s line: expected the output of "
		    "usbgw audit anchor, or a checkpoint line of usbgwd's log",
		    name, AUDIT_ANCHOR_TAG);
		return -1;
	}
	return (int)n;
}
