/*
 * One connection from usbgw-attach to a gateway (attach.h): connect with
 * a deadline, TLS (-T), the op phase's whole reads and writes, the import,
 * and the bounded relay between the connection and vhci's socketpair end.
 * Shared by the single-shot mode and follow mode; every function keeps
 * its state in its arguments, so follow mode runs many at once, one
 * attachment per thread.
 *
 * The relay moves bytes, it does not parse them: the gateway checks every
 * PDU in both directions (relay.c).  Each direction has one bounded buffer
 * (RELAY_BUF); a side is read only while the buffer towards the other side
 * has room, so a slow side stops the fast one (no unbounded memory).
 */
#include <sys/socket.h>
#include <sys/types.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attach.h"
#include "base/parse.h"
#include "base/log.h"
#include "tls/tlsclient.h"
#include "tls/tlsid.h"
#include "base/util.h"

#define RELAY_BUF		(256 * 1024)	/* per direction */

struct pipebuf {
	uint8_t		*b;
	size_t		 off, len;	/* unsent bytes: b[off .. off+len) */
	bool		 eof;		/* the source side ended */
};

volatile sig_atomic_t att_stop;

int64_t
att_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int
att_check_gateway(const char *hostport, char *err, size_t errsz)
{
	struct net_addr a;
	const char *why;

	if (parse_addr(hostport, "3240", &a, &why) == -1) {
		snprintf(err, errsz, "%s: expected host[:port] (%s)", hostport,
		    why);
		return -1;
	}
	if (a.host[0] == '\0') {
		snprintf(err, errsz, "%s: expected host[:port] (no host)",
		    hostport);
		return -1;
	}
	return 0;
}

/* Read exactly n bytes before the deadline (non-blocking fd). */
static int
read_full(int fd, uint8_t *buf, size_t n, int64_t deadline)
{
	size_t		 got = 0;
	ssize_t		 r;
	struct pollfd	 p = { .fd = fd, .events = POLLIN };

	while (got < n) {
		int64_t left = deadline - att_mono_ms();

		if (left <= 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		if (poll(&p, 1, (int)left) == -1) {
			if (errno == EINTR && !att_stop)
				continue;
			return -1;
		}
		r = read(fd, buf + got, n - got);
		if (r == 0) {
			errno = ECONNRESET;
			return -1;
		}
		if (r == -1) {
			if (errno == EAGAIN || (errno == EINTR && !att_stop))
				continue;
			return -1;
		}
		got += (size_t)r;
	}
	return 0;
}

static int
write_full(int fd, const uint8_t *buf, size_t n, int timeout_ms)
{
	size_t		 done = 0;
	ssize_t		 r;
	struct pollfd	 p = { .fd = fd, .events = POLLOUT };

	while (done < n) {
		r = write(fd, buf + done, n - done);
		if (r == -1) {
			if (errno == EAGAIN) {
				if (poll(&p, 1, timeout_ms) != 1) {
					errno = ETIMEDOUT;
					return -1;
				}
				continue;
			}
			if (errno == EINTR && !att_stop)
				continue;
			return -1;
		}
		done += (size_t)r;
	}
	return 0;
}

int
att_write(struct att_conn *c, const void *buf, size_t n, int timeout_ms,
    char *err, size_t errsz)
{
	if (c->tls != NULL)
		return tlsclient_write(c->tls, c->fd, buf, n, timeout_ms, err,
		    errsz);
	if (write_full(c->fd, buf, n, timeout_ms) == -1) {
		snprintf(err, errsz, "%s", strerror(errno));
		return -1;
	}
	return 0;
}

int
att_read(struct att_conn *c, void *buf, size_t n, int64_t deadline, char *err,
    size_t errsz)
{
	int64_t left = deadline - att_mono_ms();

	if (c->tls != NULL) {
		if (left <= 0) {
			snprintf(err, errsz, "timed out");
			return -1;
		}
		return tlsclient_read(c->tls, c->fd, buf, n, (int)left, err,
		    errsz);
	}
	if (read_full(c->fd, buf, n, deadline) == -1) {
		snprintf(err, errsz, "%s", errno == ECONNRESET ? "closed" :
		    strerror(errno));
		return -1;
	}
	return 0;
}

int
att_connect(struct att_conn *c, const char *gateway, SSL_CTX *ctx,
    int timeout_s, char *err, size_t errsz)
{
	char why[256];

	c->tls = NULL;
	if ((c->fd = tlsclient_dial(gateway, timeout_s, err, errsz)) == -1)
		return -1;
	if (ctx == NULL)
		return 0;
	c->tls = tlsclient_connect(ctx, c->fd, timeout_s * 1000, why,
	    sizeof(why));
	if (c->tls == NULL) {
		snprintf(err, errsz, "%s: TLS: %s", gateway, why);
		close(c->fd);
		c->fd = -1;
		return -1;
	}
	log_debug("%s: TLS 1.3 with %s", gateway, SSL_get_cipher_name(c->tls));
	return 0;
}

void
att_close(struct att_conn *c)
{
	SSL_free(c->tls);
	c->tls = NULL;
	if (c->fd != -1)
		close(c->fd);
	c->fd = -1;
}

/*
 * The host's TLS context from dir (-c): its key, certificate and the
 * gateway's CA.  NULL with the reason (naming the file) in err.
 */
SSL_CTX *
att_tls_context(const char *dir, char *err, size_t errsz)
{
	struct tlsid_client *cl;
	SSL_CTX *ctx;
	char name[TLSID_NAME_MAX + 1], why[128], *dot;

	/* the name goes into a CSR only; the certificate's is what counts */
	if (gethostname(name, sizeof(name)) == -1)
		name[0] = '\0';
	name[sizeof(name) - 1] = '\0';
	if ((dot = strchr(name, '.')) != NULL)
		*dot = '\0';
	if (tlsid_name_check(name, why, sizeof(why)) == -1)
		usbgw_strlcpy(name, "host", sizeof(name));
	if ((cl = tlsid_client_key(dir, name, TLSID_ROLE_HOST, err,
	    errsz)) == NULL)
		return NULL;
	ctx = tlsid_ctx_client(cl, 0, NULL, NULL, err, errsz);
	tlsid_client_free(cl);
	return ctx;
}

/*
 * OP_REQ_IMPORT / OP_REP_IMPORT.  Returns 0 with *dev filled, or the
 * status (> 0) the gateway answered, or -1 on a broken reply (err).
 */
int
att_import(struct att_conn *c, const char *busid, struct usbip_dev *dev,
    int timeout_s, char *err, size_t errsz)
{
	uint8_t		 req[USBIP_IMPORT_REQ_LEN], rep[USBIP_IMPORT_REP_LEN];
	struct usbip_op	 op;
	const char	*why = NULL;
	int64_t		 deadline = att_mono_ms() + timeout_s * 3000LL;
	char		 e[256];
	int		 r;

	usbip_import_req_encode(req, busid);
	if (att_write(c, req, sizeof(req), timeout_s * 1000, e,
	    sizeof(e)) == -1) {
		snprintf(err, errsz, "sending the import: %s", e);
		return -1;
	}
	if (att_read(c, rep, USBIP_OP_HDR_LEN, deadline, e, sizeof(e)) == -1) {
		snprintf(err, errsz, "reading the import reply: %s", e);
		return -1;
	}
	r = usbip_op_decode(rep, USBIP_OP_HDR_LEN, USBIP_FROM_SERVER, &op, &why);
	if (r == USBIP_NEED_MORE) {
		if (att_read(c, rep + USBIP_OP_HDR_LEN,
		    sizeof(rep) - USBIP_OP_HDR_LEN, deadline, e,
		    sizeof(e)) == -1) {
			snprintf(err, errsz, "reading the import reply: %s", e);
			return -1;
		}
		r = usbip_op_decode(rep, sizeof(rep), USBIP_FROM_SERVER, &op,
		    &why);
	}
	if (r == USBIP_MALFORMED || r == USBIP_NEED_MORE ||
	    op.hdr.code != OP_REP_IMPORT) {
		snprintf(err, errsz, "malformed import reply: %s",
		    why != NULL ? why : "not OP_REP_IMPORT");
		return -1;
	}
	if (op.hdr.status != ST_OK)
		return (int)op.hdr.status;
	if (strncmp(op.dev.busid, busid, sizeof(op.dev.busid)) != 0 &&
	    strchr(busid, ':') == NULL) {
		snprintf(err, errsz, "the reply names busid %.32s, not %s",
		    op.dev.busid, busid);
		return -1;
	}
	*dev = op.dev;
	return 0;
}

/* One direction's step: read from `from` into pb, write pb to `to`. */
static int
pump_read(int from, struct pipebuf *pb)
{
	ssize_t	 r;

	if (pb->eof || pb->len == RELAY_BUF)
		return 0;
	if (pb->off > 0 && pb->len > 0)
		memmove(pb->b, pb->b + pb->off, pb->len);
	pb->off = 0;
	r = read(from, pb->b + pb->len, RELAY_BUF - pb->len);
	if (r == 0) {
		pb->eof = true;
		return 0;
	}
	if (r == -1)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	pb->len += (size_t)r;
	return 0;
}

static int
pump_write(int to, struct pipebuf *pb)
{
	ssize_t	 r;

	if (pb->len == 0)
		return 0;
	r = write(to, pb->b + pb->off, pb->len);
	if (r == -1)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	pb->off += (size_t)r;
	pb->len -= (size_t)r;
	if (pb->len == 0)
		pb->off = 0;
	return 0;
}

/*
 * Relay gw <-> kern until one side ends.  Returns a reason for the log.
 * When a side has ended, what it sent before is still delivered to the
 * other side (bounded by the buffer) before both close.
 */
static const char *
relay(int gw, int kern)
{
	struct pipebuf	 up = { 0 }, down = { 0 };	/* up: kern -> gw */
	struct pollfd	 p[2];
	const char	*why = NULL;

	up.b = xmalloc(RELAY_BUF);
	down.b = xmalloc(RELAY_BUF);
	while (!att_stop) {
		p[0].fd = gw;
		p[0].events = (down.eof || down.len == RELAY_BUF ? 0 : POLLIN) |
		    (up.len > 0 ? POLLOUT : 0);
		p[1].fd = kern;
		p[1].events = (up.eof || up.len == RELAY_BUF ? 0 : POLLIN) |
		    (down.len > 0 ? POLLOUT : 0);
		if (down.eof && down.len == 0) {
			why = "the gateway closed the connection";
			break;
		}
		if (up.eof && up.len == 0) {
			why = "vhci closed its end (detached)";
			break;
		}
		if (poll(p, 2, -1) == -1) {
			if (errno == EINTR)
				continue;
			why = "poll failed";
			break;
		}
		if ((p[0].revents & (POLLERR | POLLNVAL)) ||
		    (p[1].revents & (POLLERR | POLLNVAL))) {
			why = p[0].revents & (POLLERR | POLLNVAL) ?
			    "the gateway connection failed" :
			    "vhci's end failed";
			break;
		}
		if (pump_read(gw, &down) == -1) {
			why = "reading from the gateway failed";
			break;
		}
		if (pump_read(kern, &up) == -1) {
			why = "reading from vhci failed";
			break;
		}
		if (pump_write(kern, &down) == -1) {
			why = "writing to vhci failed";
			break;
		}
		if (pump_write(gw, &up) == -1) {
			why = "writing to the gateway failed";
			break;
		}
	}
	if (why == NULL)
		why = "signal";
	free(up.b);
	free(down.b);
	return why;
}

const char *
att_relay(struct att_conn *c, int kern, char *err, size_t errsz)
{
	err[0] = '\0';
	if (c->tls != NULL)
		return tlsclient_relay(c->tls, c->fd, kern, &att_stop, err,
		    errsz);
	return relay(c->fd, kern);
}
