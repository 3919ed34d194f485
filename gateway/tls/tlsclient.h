/*
 * The client's side of USB/IP in TLS (protocol.md 1.10.7): a handshake
 * with a deadline on a connected socket, whole reads and writes for the
 * op phase, and a bounded relay between the TLS connection and a plain
 * stream socket (the one vhci_hcd holds, or a test client's).  Blocking
 * in the caller's thread, driven by poll() on a non-blocking socket; for
 * usbgw-attach and the test tools, not for the daemon's loop.
 */
#ifndef USBGW_TLSCLIENT_H
#define USBGW_TLSCLIENT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

#define TLSCLIENT_RELAY_BUF	(256 * 1024)	/* per direction */
/*
 * TLS records are 16 KiB at most, and OpenSSL writes each with a write(2)
 * of its own and, without read-ahead into a larger buffer, reads each
 * with one (or two) read(2)s.  On a busy stream that is a system call per
 * 16 KiB each way, which costs more than the cryptography where system
 * calls are dear (a VM).  So the relay encrypts into TLSCLIENT_NET_BUF
 * bytes of memory (a BIO pair) and sends them with one send(2), and reads
 * ahead into a TLSCLIENT_NET_BUF buffer (SSL_set_default_read_buffer_len
 * before the handshake: tlsclient_ssl_tune).  Measured (tests/bench/
 * tls.sh, protocol.md 1.10.7 "Performance").
 */
#define TLSCLIENT_NET_BUF	(128 * 1024)

/*
 * The relay's settings for an SSL, before its handshake (both ends): read
 * ahead into a TLSCLIENT_NET_BUF buffer, partial writes, a moving write
 * buffer.
 */
void		 tlsclient_ssl_tune(SSL *);
/*
 * TLS 1.3 handshake on fd (connected, made non-blocking here) with ctx,
 * within timeout_ms.  An SSL on success; NULL with the reason in err
 * (tlsid_ssl_error's words).  With TLS 1.3 a server that refuses our
 * certificate says so after this returns: the first read fails.
 */
SSL		*tlsclient_connect(SSL_CTX *, int fd, int timeout_ms, char *err,
		    size_t errlen);
/* Write all n bytes, or read exactly n, before the deadline (ms from
 * now).  0, or -1 with the reason in err ("closed" for EOF on a read). */
int		 tlsclient_write(SSL *, int fd, const void *, size_t n,
		    int timeout_ms, char *err, size_t errlen);
int		 tlsclient_read(SSL *, int fd, void *, size_t n, int timeout_ms,
		    char *err, size_t errlen);
/*
 * One relay's state between a TLS connection and a plain stream socket,
 * driven by whoever waits for its descriptors (tlsclient_relay with
 * poll(), tlsshim.c with the daemon's loop).  Each direction has one
 * TLSCLIENT_RELAY_BUF buffer; a side is read only while the buffer
 * towards the other has room.
 */
struct tlsrelay_buf {
	uint8_t		*b;
	size_t		 off, len;	/* unsent: b[off .. off+len) */
	bool		 eof;		/* its source ended */
};

struct tlsrelay {
	SSL			*ssl;
	int			 netfd;		/* the TLS connection's socket */
	int			 plainfd;
	BIO			*netbio;	/* encrypted, to send to netfd */
	struct tlsrelay_buf	 down;		/* TLS -> plain */
	struct tlsrelay_buf	 up;		/* plain -> TLS */
	bool			 net_in, net_out;	/* TLS waits for these */
	/*
	 * The last read of that side found nothing: it is read again only
	 * once the caller says it is readable (tlsrelay_readable), not on
	 * every pass, which would be a failing read(2) each time.
	 */
	bool			 net_rd_wait, plain_rd_wait;
	bool			 shut;		/* close_notify queued */
	char			 err[256];	/* TLSRELAY_TLS_FAILED: why */
};

enum tlsrelay_end {
	TLSRELAY_GOING = 0,
	TLSRELAY_TLS_CLOSED,	/* the TLS peer ended; all it sent delivered */
	TLSRELAY_PLAIN_CLOSED,	/* the plain end ended; all sent; close_notify */
	TLSRELAY_TLS_FAILED,	/* err says why */
	TLSRELAY_PLAIN_FAILED,
};

/*
 * After the handshake: plainfd is made non-blocking, the buffers are
 * allocated, and the SSL now writes into the relay's BIO pair (its
 * records go out through tlsrelay_pass).  0, or -1 (out of memory: the
 * SSL is as it was).
 */
int		 tlsrelay_init(struct tlsrelay *, SSL *, int plainfd);
void		 tlsrelay_release(struct tlsrelay *);	/* the buffers */
/*
 * Every step that can progress without blocking, once: sets *progress
 * when a byte moved or a side ended; net_in/net_out say what the TLS
 * side waits for.  TLSRELAY_GOING, or how it ended.
 */
enum tlsrelay_end tlsrelay_pass(struct tlsrelay *, bool *progress);
/* The caller's loop saw netfd's or plainfd's readiness for reading. */
void		 tlsrelay_readable(struct tlsrelay *, bool net, bool plain);
bool		 tlsrelay_plain_wants_read(const struct tlsrelay *);
bool		 tlsrelay_plain_wants_write(const struct tlsrelay *);

/*
 * Relay ssl (on netfd) <-> plainfd until one side ends or *stop is set;
 * each direction one TLSCLIENT_RELAY_BUF buffer, a side read only while
 * the buffer towards the other has room.  What an ended side sent is
 * delivered first.  Sends close_notify when the plain side ended.
 * Returns a reason for the log; err gets a TLS error's words, if any.
 */
const char	*tlsclient_relay(SSL *, int netfd, int plainfd,
		    volatile sig_atomic_t *stop, char *err, size_t errlen);
/*
 * The relay in a thread of its own (test tools): returns the other end of
 * a socketpair whose first end is relayed to ssl; the thread frees ssl,
 * closes netfd and its end when done, and writes a TLS error's reason to
 * stderr prefixed with prog.  The caller closes the returned end, then
 * joins *tid (before exit: OpenSSL's cleanup at exit must not race the
 * thread).  -1 on error.
 */
#include <pthread.h>
int		 tlsclient_pipe(SSL *, int netfd, const char *prog,
		    pthread_t *tid);

/* Blocking TCP connect with a deadline (usbgw-attach, enrollment). */
int		 tlsclient_dial(const char *hostport, int timeout_s, char *err,
		    size_t errsz);

#endif
