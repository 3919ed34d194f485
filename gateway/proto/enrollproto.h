/*
 * The enrollment exchange inside a TLS session (protocol.md 1.10.10):
 * small framed messages, pure encode/decode, no I/O.
 *
 *	magic "UGWE" (4) | version 1 (1) | type (1) | body length (2, BE)
 *	body: fields, each tag (1) | length (2, BE) | bytes
 *
 * The client speaks first: ENROLL (in a pairing session: name, role, CSR)
 * or RENEW (in an authenticated session: CSR).  The gateway answers
 * PENDING (the operator has to confirm the code), then ISSUED (the
 * certificate and the CA) or REFUSED (a reason).  Every field is bounded;
 * a message with a missing, repeated, unknown or overlong field, another
 * magic or version, or a body over ENROLL_BODY_MAX is malformed.
 */
#ifndef USBGW_ENROLLPROTO_H
#define USBGW_ENROLLPROTO_H

#include <stddef.h>
#include <stdint.h>

#define ENROLL_MAGIC		"UGWE"
#define ENROLL_VERSION		1
#define ENROLL_HDR_LEN		8
#define ENROLL_BODY_MAX		16384
#define ENROLL_MSG_MAX		(ENROLL_HDR_LEN + ENROLL_BODY_MAX)
#define ENROLL_PEM_MAX		8192	/* a CSR, a certificate, the CA */
#define ENROLL_REASON_MAX	255

enum enroll_type {
	ENROLL_T_ENROLL = 1,	/* client: name, role, csr */
	ENROLL_T_RENEW = 2,	/* client: csr */
	ENROLL_T_PENDING = 3,	/* gateway: (nothing) */
	ENROLL_T_ISSUED = 4,	/* gateway: cert, ca */
	ENROLL_T_REFUSED = 5,	/* gateway: reason */
};

enum enroll_tag {
	ENROLL_F_NAME = 1,
	ENROLL_F_ROLE = 2,
	ENROLL_F_CSR = 3,
	ENROLL_F_CERT = 4,
	ENROLL_F_CA = 5,
	ENROLL_F_REASON = 6,
	ENROLL_F_MAX
};

/* A decoded message: fields point into the caller's buffer (not NUL-
 * terminated there; the *_copy helpers make C strings). */
struct enroll_msg {
	enum enroll_type type;
	const uint8_t	*f[ENROLL_F_MAX];
	size_t		 flen[ENROLL_F_MAX];
};

/* 1 if buf (len bytes so far, len >= 1) can start an enrollment message. */
int		 enroll_is_msg(const uint8_t *buf, size_t len);
/*
 * Decode one message from buf: its total length (> 0), 0 when more bytes
 * are needed, or -1 when malformed with why set (a constant string).
 * from_client: the types a client sends, else the gateway's.
 */
long		 enroll_decode(const uint8_t *buf, size_t len, int from_client,
		    struct enroll_msg *, const char **why);
/*
 * Encode a message with the fields given (NULL: absent) into out (at
 * least ENROLL_MSG_MAX bytes).  Its length, or -1 if a field is too long
 * or a required one missing.
 */
long		 enroll_encode(uint8_t *out, enum enroll_type,
		    const char *f[ENROLL_F_MAX]);
/* Field tag as a C string in out (outlen > flen), or -1 if absent. */
int		 enroll_field(const struct enroll_msg *, enum enroll_tag,
		    char *out, size_t outlen);
const char	*enroll_type_name(enum enroll_type);

#endif
