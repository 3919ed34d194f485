/*
 * TLS identities, certificates and pairing codes (issue 15's lowest
 * layer; protocol.md 1.10).  OpenSSL 3.
 *
 * The gateway's store (state directory, created on first start):
 *
 *	ca.key       0600  its CA's private key (EC P-256)
 *	ca.pem       0644  its CA: self-signed, CA:TRUE, pathlen 0, 10 years
 *	gateway.key  0600  its server key (EC P-256)
 *	gateway.pem  0644  its server certificate: CN = the gateway's name,
 *	                   OU = gateway, serverAuth, 1 year, signed by ca.pem
 *
 * or, with a site CA, the files named in struct tlsid_store_opts, only
 * loaded and checked (issuing needs the site CA's key too).
 *
 * An agent's or vhci host's directory (ROLE is "agent" or "host"):
 *
 *	ROLE.key        0600  its private key, made there, never sent
 *	ROLE.pem        0644  its certificate, once enrolled
 *	gateway-ca.pem  0644  the CA that issued it (pins the gateway)
 *
 * A key file is refused unless it is a regular file owned by this uid
 * with no access for group or others.  Certificates carry the peer's
 * name as subject CN and its role as the subject's one OU ("gateway",
 * "agent" or "host"), O = usbgw.  A fingerprint is SHA-256 over the
 * certificate's DER, 64 lowercase hex digits.
 *
 * Errors: NULL or -1, with a message naming the file (or the CSR) and
 * what was expected in err.  Nothing here logs, and no message carries
 * key material.
 */
#ifndef USBGW_TLSID_H
#define USBGW_TLSID_H

#include <stddef.h>
#include <time.h>

#include <openssl/ssl.h>
#include <openssl/x509.h>

#define TLSID_NAME_MAX		63	/* [A-Za-z0-9][A-Za-z0-9._-]{0,62} */
#define TLSID_FPR_HEX		64	/* SHA-256 over the DER certificate */
#define TLSID_SERIAL_HEX	40	/* at most 20 bytes (RFC 5280) */
#define TLSID_CODE_LEN		6	/* decimal digits of a pairing code */
#define TLSID_CSR_MAX		8192	/* bytes of a CSR (PEM) we parse */
#define TLSID_FILE_MAX		65536	/* bytes of a key or certificate file */
#define TLSID_CA_DAYS		3650
#define TLSID_SERVER_DAYS	365
#define TLSID_CLIENT_DAYS	365
#define TLSID_DAYS_MAX		3650
#define TLSID_BACKDATE		300	/* notBefore = now - 5 min (clock skew) */
#define TLSID_PAIR_LABEL	"EXPORTER-usbgw-pairing"

enum tlsid_role {
	TLSID_ROLE_NONE = 0,
	TLSID_ROLE_GATEWAY,
	TLSID_ROLE_AGENT,
	TLSID_ROLE_HOST
};

/* "gateway", "agent", "host", or "none". */
const char	*tlsid_role_name(enum tlsid_role);
/*
 * The context's check again, at the end of the handshake, for the peer
 * it judged while the handshake ran (the peer may have sent its
 * certificate, then held back its Finished while it was revoked): 0
 * allows (also: no check, a pairing peer), -1 denies with why.
 */
int		 tlsid_recheck(SSL *, char *why, size_t whylen);
/* The role of that name, TLSID_ROLE_NONE for anything else. */
enum tlsid_role	 tlsid_role_parse(const char *);

/*
 * 0 if name is [A-Za-z0-9][A-Za-z0-9._-]{0,62}; -1 with the first bad
 * character and its position (or the length) in why.
 */
int		 tlsid_name_check(const char *name, char *why, size_t whylen);

/* --- the gateway's store ------------------------------------------- */

struct tlsid_store;

struct tlsid_store_opts {
	const char	*name;		/* the gateway's name (own CA: its CN) */
	/*
	 * A site CA: ca_file set means load and check only, nothing is
	 * created.  cert_file and key_file default to DIR/gateway.pem and
	 * DIR/gateway.key; ca_key_file (optional) lets tlsid_issue work.
	 */
	const char	*ca_file;
	const char	*ca_key_file;
	const char	*cert_file;
	const char	*key_file;
	/*
	 * Own CA only: at open, a gateway.pem that expires within this many
	 * days (or has expired) is issued anew for the same key.  0: never,
	 * and an expired gateway.pem is an error.
	 */
	int		 renew_days;
};

/*
 * Open the gateway's store in dir (which must exist): create the CA and
 * the server identity on first start, load and check them afterwards
 * (key file owner and mode; each certificate matches its key, is in its
 * validity period, is signed by the CA; the CA is a CA).
 */
struct tlsid_store *tlsid_store_open(const char *dir,
		    const struct tlsid_store_opts *, char *err, size_t errlen);
/* A CA and server identity in memory only (tests, fuzzing). */
struct tlsid_store *tlsid_store_generate(const char *name, char *err,
		    size_t errlen);
void		 tlsid_store_free(struct tlsid_store *);

/* Issue gateway.pem anew (same key) from now for days; own CA only. */
int		 tlsid_store_renew(struct tlsid_store *, time_t now, int days,
		    char *err, size_t errlen);

const char	*tlsid_store_fpr(const struct tlsid_store *);	/* gateway.pem */
const char	*tlsid_store_ca_fpr(const struct tlsid_store *);	/* ca.pem */
X509		*tlsid_store_cert(const struct tlsid_store *);	/* borrowed */
X509		*tlsid_store_ca(const struct tlsid_store *);	/* borrowed */
/* The CA certificate as PEM (NUL-terminated; the caller frees). */
char		*tlsid_store_ca_pem(const struct tlsid_store *);
int		 tlsid_store_can_issue(const struct tlsid_store *);

/* --- issuing -------------------------------------------------------- */

/*
 * Issue a client certificate from an untrusted CSR (PEM, at most
 * TLSID_CSR_MAX bytes; its signature verified; EC P-256 or RSA 2048 to
 * 4096 bits).  Only the CSR's public key is used: the subject is O =
 * usbgw, OU = role, CN = name (NULL: the CSR's one CN, checked like a
 * name), with clientAuth, a random 128-bit serial, notBefore now - 5 min
 * and notAfter now + days (1..TLSID_DAYS_MAX).  role is agent or host.
 * *out_pem (the caller frees) and fpr are set on success.
 */
int		 tlsid_issue(const struct tlsid_store *, const char *csr_pem,
		    size_t len, const char *name, enum tlsid_role role,
		    int days, char **out_pem, char fpr[TLSID_FPR_HEX + 1],
		    char *err, size_t errlen);
/* The same with "now" given (tests: backdated, already expired). */
int		 tlsid_issue_at(const struct tlsid_store *, const char *csr_pem,
		    size_t len, const char *name, enum tlsid_role role,
		    time_t now, int days, char **out_pem,
		    char fpr[TLSID_FPR_HEX + 1], char *err, size_t errlen);

/* --- the agent's or vhci host's side --------------------------------- */

struct tlsid_client;

/*
 * Make (first time) or load dir/ROLE.key, and with it a CSR (subject
 * O = usbgw, OU = role, CN = name) and a self-signed placeholder
 * certificate for pairing.  ROLE.pem and gateway-ca.pem are loaded and
 * checked too when they exist (both or neither): the certificate must
 * match the key and be signed by that CA; an expired one is loaded
 * (the gateway refuses it; see tlsid_expires_within).
 */
struct tlsid_client *tlsid_client_key(const char *dir, const char *name,
		    enum tlsid_role role, char *err, size_t errlen);
void		 tlsid_client_free(struct tlsid_client *);
const char	*tlsid_client_csr(const struct tlsid_client *);	/* PEM */
int		 tlsid_client_enrolled(const struct tlsid_client *);
X509		*tlsid_client_cert(const struct tlsid_client *);	/* NULL: none */
/*
 * After pairing: check cert_pem (matches our key, signed by ca_pem, CA
 * a CA) and write ROLE.pem and gateway-ca.pem.
 */
int		 tlsid_client_install(struct tlsid_client *, const char *cert_pem,
		    size_t certlen, const char *ca_pem, size_t calen, char *err,
		    size_t errlen);

/* --- TLS contexts --------------------------------------------------- */

struct tlsid_peer {
	char		 name[TLSID_NAME_MAX + 1];	/* subject CN */
	enum tlsid_role	 role;				/* subject OU */
	char		 fpr[TLSID_FPR_HEX + 1];
	char		 serial[TLSID_SERIAL_HEX + 1];	/* lowercase hex */
	time_t		 not_after;
	int		 pairing;	/* 1: unauthenticated, pairing only */
};

/*
 * The caller's check of a peer whose certificate chain verified
 * (revocation, expected names): 0 allows, -1 denies with a reason in why
 * (the handshake fails; tlsid_ssl_error says "refused: WHY").  Called
 * once per handshake from inside it, never for a pairing peer.
 */
typedef int	(*tlsid_check_fn)(const struct tlsid_peer *, void *arg,
		    char *why, size_t whylen);

#define TLSID_PAIRING	0x1

/*
 * A server context: TLS 1.3 only, a client certificate required and
 * verified against the CA (clientAuth, role agent or host), then check.
 * With TLSID_PAIRING a client that shows a self-signed placeholder
 * (valid self-signature, acceptable key, a valid name) is admitted too,
 * its session marked pairing (tlsid_peer) for the enrollment exchange
 * only; a certificate from another CA is still refused.  No session
 * tickets or resumption: every connection's certificate is checked.
 */
SSL_CTX		*tlsid_ctx_server(const struct tlsid_store *, int flags,
		    tlsid_check_fn, void *arg, char *err, size_t errlen);
/*
 * A client context: TLS 1.3 only, our certificate, the server's chain
 * verified against gateway-ca.pem (serverAuth), then check.  With
 * TLSID_PAIRING (enrolling) it shows the placeholder and takes any
 * server certificate: the pairing code is what authenticates it.
 */
SSL_CTX		*tlsid_ctx_client(const struct tlsid_client *, int flags,
		    tlsid_check_fn, void *arg, char *err, size_t errlen);

/* The peer of a finished handshake.  0, or -1 when there is none. */
int		 tlsid_peer(SSL *, struct tlsid_peer *);
/*
 * Why a handshake (or I/O) on ssl failed, for a log line and an audit
 * row: the verification's reason when one was recorded ("no client
 * certificate", "certificate ... expired ...", "not issued by this
 * gateway's CA", "refused: WHY", "not TLS (plaintext?)", "peer does not
 * speak TLS 1.3", ...).  ret is what SSL_accept/SSL_connect returned.
 * Empties OpenSSL's error queue.  Returns buf.
 */
const char	*tlsid_ssl_error(SSL *, int ret, char *buf, size_t len);

/* --- pairing codes -------------------------------------------------- */

/*
 * The 32 bytes both ends derive from the session: the TLS exporter
 * (RFC 8446 7.5) with label TLSID_PAIR_LABEL and context = SHA-256 of
 * the server's certificate || SHA-256 of the client's.  0, or -1.
 */
int		 tlsid_pair_material(SSL *, unsigned char out[32]);
/* Its first 8 bytes (big endian) mod 10^6, as 6 digits.  0, or -1. */
int		 tlsid_pair_code(SSL *, char out[TLSID_CODE_LEN + 1]);
/* 1 if a and b are the same 6-digit code (constant time), else 0. */
int		 tlsid_code_equal(const char *a, const char *b);

/* --- renewal -------------------------------------------------------- */

/* 1 if cert's notAfter is within seconds from now (or past), else 0. */
int		 tlsid_expires_within(const X509 *cert, long seconds);
/* The fingerprint of a certificate.  0, or -1. */
int		 tlsid_fpr(const X509 *cert, char out[TLSID_FPR_HEX + 1]);

/* --- enrollment (protocol.md 1.10.10) --------------------------------- */

/*
 * SHA-256 over the public key (SubjectPublicKeyInfo DER), 64 hex digits:
 * of a CSR (checked as tlsid_issue parses it), or of the peer's
 * certificate in a finished handshake (the pairing placeholder's key).
 * 0, or -1 (err says why for the CSR).
 */
int		 tlsid_csr_key_fpr(const char *csr_pem, size_t len,
		    char out[TLSID_FPR_HEX + 1], char *err, size_t errlen);
int		 tlsid_peer_key_fpr(SSL *, char out[TLSID_FPR_HEX + 1]);
/* Name, role, fingerprint, serial and notAfter of a PEM certificate. */
int		 tlsid_cert_info(const char *pem, size_t len,
		    struct tlsid_peer *);
/*
 * The enrolling client's check of the CA the gateway returned: it must
 * be a certificate of the chain the server showed in this session, and
 * the server's certificate must be signed by it.  0, or -1 with err.
 */
int		 tlsid_session_ca_check(SSL *, const char *ca_pem, size_t len,
		    char *err, size_t errlen);

#endif
