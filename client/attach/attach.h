/*
 * usbgw-attach's pieces (protocol.md 1.10.6, 1.10.8): one connection to a
 * gateway, plain or TLS (conn.c), used by the single-shot mode
 * (attach.c) and by follow mode (follow.c), which runs many of them.
 */
#ifndef USBGW_ATTACH_CLIENT_H
#define USBGW_ATTACH_CLIENT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

#include "proto/usbip.h"

#define ATT_EXIT_REFUSED	1
#define ATT_EXIT_USAGE		2
#define ATT_EXIT_VHCI		3
#define ATT_EXIT_NET		4

struct vhci;

/* One connection to a gateway: the socket, and its TLS if -T. */
struct att_conn {
	int	 fd;
	SSL	*tls;
};

/* The single-shot mode's SIGTERM/SIGINT (follow mode uses sigwait). */
extern volatile sig_atomic_t att_stop;

int64_t		 att_mono_ms(void);
/* The host's TLS context from dir (-c).  NULL with the reason in err. */
SSL_CTX		*att_tls_context(const char *dir, char *err, size_t errsz);
/* Is GATEWAY[:PORT] well-formed?  0, or -1 with the reason in err. */
int		 att_check_gateway(const char *gateway, char *err,
		    size_t errsz);
/* Connect to GATEWAY[:PORT] (deadline timeout_s), then TLS with ctx if
 * ctx is set.  0, or -1 with the reason in err. */
int		 att_connect(struct att_conn *, const char *gateway,
		    SSL_CTX *ctx, int timeout_s, char *err, size_t errsz);
void		 att_close(struct att_conn *);
/* Write all n bytes within timeout_ms / read exactly n before the
 * deadline (att_mono_ms() based).  0, or -1 with the reason in err. */
int		 att_write(struct att_conn *, const void *, size_t n,
		    int timeout_ms, char *err, size_t errsz);
int		 att_read(struct att_conn *, void *, size_t n, int64_t deadline,
		    char *err, size_t errsz);
/*
 * OP_REQ_IMPORT / OP_REP_IMPORT on c.  0 with *dev, the status (> 0) the
 * gateway answered, or -1 on a broken reply (err).
 */
int		 att_import(struct att_conn *, const char *busid,
		    struct usbip_dev *dev, int timeout_s, char *err,
		    size_t errsz);
/*
 * Relay c <-> kern (vhci's socketpair end) until one side ends, att_stop
 * is set, or someone shuts c->fd down (follow mode's cancel).  Returns a
 * reason for the log; err gets a TLS error's words, if any.
 */
const char	*att_relay(struct att_conn *, int kern, char *err,
		    size_t errsz);

/*
 * follow.c: usbgw-attach --follow; returns the exit status.  Every
 * renew_check_s seconds renew() is called (from the main thread); a new
 * context it returns (one reference, given) replaces the one connections
 * are made with from then on; the running ones go on.
 */
struct follow_renew {
	SSL_CTX		*(*renew)(void *);
	void		 *arg;
	unsigned	  check_s;
};
int		 follow_run(struct vhci *, SSL_CTX *, char **gateways,
		    int ngateways, int timeout_s, const struct follow_renew *);

#endif
