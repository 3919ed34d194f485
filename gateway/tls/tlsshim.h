/*
 * TLS for a vhci host's connection, terminated in-process (issue 15;
 * protocol.md 1.10.7).  A TLS listener's accepted socket goes here:
 *
 *  1. the first byte must be 0x16 (a TLS handshake record), read with
 *     MSG_PEEK, or the connection is refused ("plaintext on a TLS
 *     listener");
 *  2. the handshake runs non-blocking on the loop (SSL_accept), under one
 *     deadline from accept; a failure is reported with its reason
 *     (tlsid_ssl_error: no client certificate, another CA's, expired,
 *     refused by the context's check, not TLS 1.3);
 *  3. after it, a socketpair: one end is handed to the caller, which
 *     treats it exactly as an accepted TCP connection (the op phase, held
 *     imports and the relay never see TLS); the other end and the TLS
 *     connection are pumped both ways on the loop (struct tlsrelay,
 *     tlsclient.h: one TLSCLIENT_RELAY_BUF buffer per direction, a side
 *     read only while the buffer towards the other has room).  When
 *     either side ends, what it sent is delivered to the other (within
 *     TLSSHIM_LINGER_MS), a close_notify is sent if it was the
 *     session's side, and both are closed.
 *
 * The pump reads and writes its descriptors itself rather than through
 * bufferevents: libevent 2.1 reads at most 4 KiB per read(2), and on a
 * virtual machine's expensive system calls that kept TLS at an eighth of
 * the plain relay's throughput.
 *
 * Exactly one of ready or fail is called, once, from the loop, unless
 * tlsshim_free comes first.  After ready the pump owns itself; it ends
 * when either side closes, or at tlsshim_shutdown.
 *
 * (Later, on kernels with the `tls` module, kTLS could take the pump's
 * place: the handshake here, then setsockopt(TCP_ULP, "tls") with the
 * session's keys, and the relay reading plaintext from the TCP socket.)
 */
#ifndef USBGW_TLSSHIM_H
#define USBGW_TLSSHIM_H

#include <event2/event.h>
#include <openssl/ssl.h>

#include "tls/tlsid.h"

#define TLSSHIM_LINGER_MS	5000	/* to deliver what a closed side sent */

struct tlsshim;

/* A pairing session's (TLSID_PAIRING contexts; protocol.md 1.10.4). */
struct tlsshim_pairing {
	char		 code[TLSID_CODE_LEN + 1];	/* the session's code */
	char		 key_fpr[TLSID_FPR_HEX + 1];	/* the placeholder's key */
};

/* The handshake succeeded: fd is the caller's end of the socketpair
 * (non-blocking, close-on-exec); peer is the verified certificate's, or
 * the placeholder's when peer->pairing, and then pairing is set (else
 * NULL). */
typedef void	(*tlsshim_ready_fn)(int fd, const struct tlsid_peer *,
		    const struct tlsshim_pairing *, void *arg);
/* It did not: why is for the log line and the audit row; audit is 0 when
 * the peer sent nothing at all (closed at once: a port probe). */
typedef void	(*tlsshim_fail_fn)(const char *why, int audit, void *arg);

/*
 * Take fd (an accepted TCP socket, closed here whatever happens) into a
 * TLS handshake with ctx (a tlsid_ctx_server context; a reference is
 * taken).  NULL only if out of descriptors or memory (fd closed).
 */
struct tlsshim	*tlsshim_accept(struct event_base *, SSL_CTX *ctx,
		    evutil_socket_t fd, unsigned timeout_ms, tlsshim_ready_fn,
		    tlsshim_fail_fn, void *arg);
/*
 * The same with flags: TLSSHIM_CLIENT runs the handshake as TLS's
 * client (SSL_connect with a tlsid_ctx_client context; no first-byte
 * check: the client speaks first).  usbgw-agent is always TLS's client,
 * even on a TCP connection the gateway opened (protocol.md 1.10.8); a
 * client's pump logs a TLS failure as a warning, since a TLS 1.3 server
 * refuses a client's certificate only after the handshake.
 */
#define TLSSHIM_CLIENT	0x1
/* A server whose first byte is not TLS's hands the TCP socket back:
 * ready(fd, NULL peer) (a tls=optional listener). */
#define TLSSHIM_OPTIONAL 0x2
struct tlsshim	*tlsshim_start(struct event_base *, SSL_CTX *ctx,
		    evutil_socket_t fd, int flags, unsigned timeout_ms,
		    tlsshim_ready_fn, tlsshim_fail_fn, void *arg);
/* Cancel a handshake (no callback); NULL is fine. */
void		 tlsshim_free(struct tlsshim *);
/* Pumps running (handshakes are their callers'). */
unsigned	 tlsshim_npumps(void);
/*
 * Close every pump whose peer showed the certificate with this
 * fingerprint (a revoke): the TLS connection ends at once, the session's
 * end sees EOF.  The number closed.
 */
unsigned	 tlsshim_cut(const char *fpr);
/*
 * Every pump a certificate of that name and role authenticated, whatever
 * the certificate (a renewal leaves the running ones on the old one):
 * cut.  Pairing sessions are not (a re-enrollment's own has that CN).
 */
unsigned	 tlsshim_cut_identity(const char *name, enum tlsid_role);
/* Close every pump (at exit). */
void		 tlsshim_shutdown(void);

#endif
