/*
 * The audit log's keys and anchors (protocol.md 1.8).
 *
 * The key file (audit-key, default DATABASE.key) is the daemon's secret,
 * kept outside the database: a MAC key that authenticates every audit
 * row, and the seed of an Ed25519 key pair that signs checkpoints
 * (seq, hash, time of the chain's head).  It is text:
 *
 *	usbgw-audit-key 1
 *	mac  <64 hex digits>
 *	sign <64 hex digits>
 *	since <seq>		the first row the MAC key covers
 *
 * and is refused unless it is a regular file of the daemon's user with
 * no permission for group or others.  The public key (PEM) is not
 * secret.  An anchor is one line, as `usbgw audit anchor` writes it and
 * as the daemon logs each checkpoint:
 *
 *	usbgw-audit-anchor seq=N hash=H [time=T] [key=F] [sig=S]
 *
 * where F is the first 16 hex digits of SHA-256 over the public key
 * (DER) and S the Ed25519 signature (hex) over the message
 * "usbgw-audit-checkpoint-1 seq=N hash=H time=T".
 */
#ifndef USBGW_AUDITKEY_H
#define USBGW_AUDITKEY_H

#include <stddef.h>
#include <stdint.h>

struct audit_key;

#define AUDIT_KEY_FILE_MAX	4096	/* bytes of a key file */
#define AUDIT_ANCHOR_FILE_MAX	(1024 * 1024)	/* bytes of an anchor file */
#define AUDIT_ANCHORS_MAX	4096	/* anchors in one file */
#define AUDIT_ANCHOR_TAG	"usbgw-audit-anchor"
#define AUDIT_SIG_HEX		128
#define AUDIT_FPR_HEX		16

struct audit_anchor {
	int64_t		seq;			/* > 0 */
	char		hash[65];
	int64_t		time;			/* 0: not given */
	char		key[AUDIT_FPR_HEX + 1];	/* "": not given */
	char		sig[AUDIT_SIG_HEX + 1];	/* "": unsigned */
	int		line;			/* in its file, 0: none */
};

/*
 * Load the key file at path, checking who may read it (no access for
 * group or others; owned by this user, or, with any_owner, by anyone:
 * root verifying the daemon's key); NULL with a message naming the file
 * in err.  *missing is set when it does not exist.
 */
struct audit_key *audit_key_load(const char *path, int any_owner,
		    int *missing, char *err, size_t errlen);
/*
 * Create it with fresh random keys (0600 whatever the umask), never over
 * an existing file: written whole to a temporary file beside it, then
 * linked into place.  If another process put its key there first (two
 * gateways started at once), that key is loaded, with every check of
 * audit_key_load, and *created is 0; *created is 1 for the creator.
 */
struct audit_key *audit_key_create(const char *path, int64_t since,
		    int *created, char *err, size_t errlen);
/* Fresh keys in memory only (an in-memory database, tests). */
struct audit_key *audit_key_generate(int64_t since);
/* A public key only (PEM file): verifies, cannot MAC or sign. */
struct audit_key *audit_key_load_public(const char *path, char *err,
		    size_t errlen);
void		 audit_key_free(struct audit_key *);

int		 audit_key_has_secret(const struct audit_key *);
int64_t		 audit_key_since(const struct audit_key *);
const char	*audit_key_fpr(const struct audit_key *);
/* The public key as PEM, NUL-terminated, into buf.  0, or -1. */
int		 audit_key_public_pem(const struct audit_key *, char *buf,
		    size_t len);

/* HMAC-SHA256(mac key, "usbgw-audit-mac-1" || be64(seq) || hash), hex. */
int		 audit_key_mac(const struct audit_key *, int64_t seq,
		    const char hash[65], char out[65]);

/* The checkpoint message that is signed. */
void		 audit_anchor_message(const struct audit_anchor *, char *buf,
		    size_t len);
/* Sign (time, key and sig of a are set).  0, or -1. */
int		 audit_anchor_sign(const struct audit_key *,
		    struct audit_anchor *);
/* 1 if a's signature is valid for this key, 0 if not (or unsigned). */
int		 audit_anchor_verify(const struct audit_key *,
		    const struct audit_anchor *);
/* The anchor's line, without a newline. */
void		 audit_anchor_format(const struct audit_anchor *, char *buf,
		    size_t len);

/*
 * Parse one line: 1 and *a filled if it holds an anchor (the tag may
 * follow other text, a syslog prefix), 0 if it holds none, -1 with why
 * in err if it holds a malformed one.
 */
int		 audit_anchor_parse_line(const char *line, size_t len,
		    struct audit_anchor *a, char *err, size_t errlen);
/*
 * Every anchor in buf (lines without the tag are skipped), at most max.
 * Returns how many, or -1 with "NAME:LINE: why" in err.  None is an
 * error too.
 */
int		 audit_anchor_parse(const char *buf, size_t len,
		    const char *name, struct audit_anchor *out, size_t max,
		    char *err, size_t errlen);

#endif
