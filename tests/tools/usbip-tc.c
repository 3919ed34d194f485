/*
 * usbip-tc: the vhci-side USB/IP test client.
 *
 * It plays the part of `usbip attach` and of the vhci driver behind it:
 * lists and imports devices, runs a scripted URB sequence that checks
 * every answer, moves bulk data with K URBs in flight and measures
 * throughput and latency, and can send arbitrary bytes to see how a peer
 * copes.  Tests and benchmarks drive it; its output is one line per
 * step plus `RESULT key=value ...` lines for scripts.
 *
 * All USB/IP bytes go through the codec (gateway/proto/usbip.h).  One TCP
 * connection, non-blocking, driven by poll(); requests are remembered by
 * seqnum so replies are parsed and accepted in any order.
 */

#include <sys/types.h>
#include <sys/socket.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "base/log.h"
#include "tls/tlsclient.h"
#include "tls/tlsid.h"
#include "proto/usbip.h"
#include "base/util.h"

#define TC_DEFAULT_TIMEOUT_MS	5000
#define TC_MAX_TIMEOUT_MS	3600000
#define TC_MAX_INFLIGHT		256
#define TC_SLOTS		1024		/* power of two, > TC_MAX_INFLIGHT */
#define TC_BUF_MIN		(256u << 10)
#define TC_READ_CHUNK		(1u << 20)
#define TC_READS_PER_WAKE	8
#define TC_PATTERN_PERIOD	65521u		/* prime: URB-sized slices differ */
#define TC_MAX_SECONDS		86400
#define TC_MAX_ITERATIONS	10000000
#define TC_MAX_BYTES		(1ull << 40)
#define TC_MAX_RAW		(1u << 20)	/* bytes one raw command sends */
#define TC_MAX_RAW_CHUNKS	64
#define TC_RAW_SHOW		256		/* received bytes shown in hex */
#define TC_MAX_EPS		64
#define TC_DESC_MAX		65535		/* wTotalLength is 16 bits */
#define TC_STRDESC_MAX		255
#define TC_STR_OUT		512		/* printable string after escaping */
#define TC_SLICE_MS		200		/* poll slices while watching progress */
#define TC_UNLINK_GRACE_MS	100		/* watch for a late RET_SUBMIT */
#define TC_INT_WAIT_MS		1000		/* for an interrupt IN report */
#define TC_DEFAULT_URB		(64u << 10)
#define TC_DEFAULT_INFLIGHT	16
#define TC_DEFAULT_BYTES	(64ull << 20)

#define ECONNRESET_WIRE		(-104)		/* Linux -ECONNRESET on the wire */

/* USB chapter 9 values. */
#define USB_DT_DEVICE		1
#define USB_DT_CONFIG		2
#define USB_DT_STRING		3
#define USB_DT_INTERFACE	4
#define USB_DT_ENDPOINT		5
#define USB_REQ_GET_STATUS	0
#define USB_REQ_CLEAR_FEATURE	1
#define USB_REQ_GET_DESCRIPTOR	6
#define USB_REQ_SET_CONFIGURATION 9
#define USB_REQ_SET_INTERFACE	11
#define USB_XFER_CONTROL	0
#define USB_XFER_ISO		1
#define USB_XFER_BULK		2
#define USB_XFER_INT		3
#define URB_ISO_ASAP		0x0002

/*
 * Exit codes: tests tell outcomes apart by them.  A refused import exits
 * with TC_EXIT_REFUSED + the op status (11 ST_NA ... 15 ST_ERROR).
 */
enum tc_exit {
	TC_EXIT_OK = 0,
	TC_EXIT_FAIL = 1,	/* a check failed: data, descriptor, status */
	TC_EXIT_USAGE = 2,
	TC_EXIT_CONN = 3,	/* cannot connect; peer closed or reset */
	TC_EXIT_PROTO = 4,	/* the peer sent a malformed PDU */
	TC_EXIT_TIMEOUT = 5,	/* no answer in time */
	TC_EXIT_REFUSED = 10,
	TC_EXIT_REFUSED_OTHER = 19,
};

/* A byte buffer: data lives in p[off, len). */
struct tc_buf {
	uint8_t		*p;
	size_t		 off;
	size_t		 len;
	size_t		 cap;
};

struct tc;
struct tc_req;
typedef void (*tc_done_fn)(struct tc *, struct tc_req *,
    const struct usbip_urb *);
typedef bool (*tc_cond_fn)(struct tc *, void *);

enum tc_req_kind {
	REQ_FREE = 0,
	REQ_SUBMIT,
	REQ_UNLINK,
};

/* One request awaiting its reply, in slot (seqnum % TC_SLOTS). */
struct tc_req {
	enum tc_req_kind kind;
	bool		 unlinked;	/* got RET_UNLINK -ECONNRESET */
	uint32_t	 seqnum;
	uint32_t	 ep;
	struct usbip_req_info info;
	uint64_t	 t_submit;	/* ns, monotonic */
	uint64_t	 tag;		/* the caller's */
	uint32_t	 target;	/* REQ_UNLINK: seqnum unlinked */
	bool		 target_pending;/* REQ_UNLINK: still pending at reply */
	tc_done_fn	 done;
	void		*arg;
};

enum tc_close {
	CLOSE_NONE = 0,
	CLOSE_EOF,
	CLOSE_RESET,
};

struct tc {
	int		 fd;
	bool		 tls;		/* fd is a tlsclient_pipe end */
	pthread_t	 tls_thread;
	char		 peer[300];
	struct tc_buf	 in;
	struct tc_buf	 out;
	bool		 urb_phase;
	uint32_t	 devid;
	uint32_t	 next_seq;
	struct tc_req	*slots;
	unsigned	 nreq;
	int		 dead;		/* exit code once unusable, else 0 */
	enum tc_close	 close;
	uint64_t	 close_ns;	/* monotonic */
	uint64_t	 close_real_us;	/* wall clock */
	uint64_t	 rx_bytes;
	uint64_t	 tx_bytes;
	bool		 warned_fields;
	bool		 quiet_close;	/* a close is expected: no error line */
};

/* ---- options and commands ------------------------------------------------ */

enum xfer_dir {
	XFER_IN,
	XFER_OUT,
	XFER_LOOP,
};

enum lat_kind {
	LAT_CONTROL,
	LAT_IN,
	LAT_OUT,
	LAT_LOOP,
};

struct tc_opts {
	const char	*hostport;
	const char	*busid;
	char		**extra;	/* arguments after BUSID */
	int		 nextra;
	int		 timeout_ms;
	int		 verbose;
	bool		 json;
	uint64_t	 bytes;
	uint32_t	 urb;
	unsigned	 inflight;
	double		 seconds;
	enum xfer_dir	 dir;
	bool		 verify;
	bool		 verify_set;
	unsigned	 iterations;
	unsigned	 warmup;
	enum lat_kind	 lat_kind;
	uint32_t	 size;
	unsigned	 packets;
	int		 ep_in;		/* -1: from descriptors */
	int		 ep_out;
	char		*raw[TC_MAX_RAW_CHUNKS];
	unsigned	 nraw;
	bool		 raw_op;
	int		 wait_ms;
	int		 expect_close;	/* -1 no expectation, 0 open, 1 closed */
	bool		 expect_disconnect;
	int		 within_ms;	/* -1: no bound */
	const char	*ready_file;
	const char	*skip;
	int		 poll_ms;
};

struct tc_cmd {
	const char	*name;
	const char	*usage;
	int		 minargs;
	int		 maxargs;
	uint64_t	 opts;		/* OPT_* bits allowed */
	int		 (*exec)(struct tc_opts *);
	const char	*help;
};

static int verbose;			/* -v: trace PDUs on stderr */
static volatile sig_atomic_t marker_set;
static volatile uint64_t marker_ns;
static volatile sig_atomic_t time_up;	/* SIGUSR2: end a timed transfer now */
static uint64_t start_ns;		/* when the transfer phase began */

/* ---- time and small helpers ---------------------------------------------- */

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t
now_real_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static uint64_t
deadline_ms(int ms)
{
	return now_ns() + (uint64_t)ms * 1000000u;
}

static void
on_usr1(int sig)
{
	struct timespec ts;

	(void)sig;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	marker_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	marker_set = 1;
}

static void
on_usr2(int sig)
{
	(void)sig;
	time_up = 1;
}

static void verr(const char *, va_list) __attribute__((format(printf, 1, 0)));
static void
verr(const char *fmt, va_list ap)
{
	fflush(stdout);
	fprintf(stderr, "usbip-tc: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
}

static void errmsg(const char *, ...) __attribute__((format(printf, 1, 2)));
static void
errmsg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	verr(fmt, ap);
	va_end(ap);
}

/* Printable copy of a wire string for output. */
static const char *
esc(char *out, size_t outsz, const char *s)
{
	return log_escape(out, outsz, s, strlen(s));
}

static void
hexdump_line(char *out, size_t outsz, const uint8_t *p, size_t n)
{
	size_t i, o = 0;

	out[0] = '\0';
	for (i = 0; i < n && o + 3 < outsz; i++)
		o += (size_t)snprintf(out + o, outsz - o, "%02x", p[i]);
}

/* ---- buffers ------------------------------------------------------------- */

/* Make room for n more bytes after len, compacting before growing. */
static void
buf_reserve(struct tc_buf *b, size_t n)
{
	size_t want;

	if (b->cap - b->len >= n)
		return;
	if (b->off > 0) {
		memmove(b->p, b->p + b->off, b->len - b->off);
		b->len -= b->off;
		b->off = 0;
		if (b->cap - b->len >= n)
			return;
	}
	want = b->cap != 0 ? b->cap : TC_BUF_MIN;
	while (want - b->len < n)
		want *= 2;
	b->p = xreallocarray(b->p, want, 1);
	b->cap = want;
}

static void
buf_free(struct tc_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* ---- the connection ------------------------------------------------------ */

static void
tc_die(struct tc *tc, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void
tc_die(struct tc *tc, int code, const char *fmt, ...)
{
	va_list ap;

	if (tc->dead != 0)
		return;
	tc->dead = code;
	va_start(ap, fmt);
	verr(fmt, ap);
	va_end(ap);
}

static void
tc_closed(struct tc *tc, enum tc_close how, int err)
{
	if (tc->close != CLOSE_NONE)
		return;
	tc->close = how;
	tc->close_ns = now_ns();
	tc->close_real_us = now_real_us();
	if (tc->quiet_close)
		tc->dead = tc->dead != 0 ? tc->dead : TC_EXIT_CONN;
	else if (how == CLOSE_EOF)
		tc_die(tc, TC_EXIT_CONN, "%s: peer closed the connection",
		    tc->peer);
	else
		tc_die(tc, TC_EXIT_CONN, "%s: %s", tc->peer, strerror(err));
}

static struct tc *
tc_new(void)
{
	struct tc *tc;

	tc = xcalloc(1, sizeof(*tc));
	tc->fd = -1;
	tc->next_seq = 1;
	tc->slots = xcalloc(TC_SLOTS, sizeof(*tc->slots));
	return tc;
}

static void
tc_free(struct tc *tc)
{
	if (tc == NULL)
		return;
	if (tc->fd != -1)
		close(tc->fd);
	if (tc->tls)		/* it ends at the close */
		pthread_join(tc->tls_thread, NULL);
	buf_free(&tc->in);
	buf_free(&tc->out);
	free(tc->slots);
	free(tc);
}

/* Split HOST[:PORT], [V6]:PORT or a bare IPv6 literal. */
static int
split_hostport(const char *s, char *host, size_t hostsz, char *port,
    size_t portsz)
{
	const char *colon, *end;
	size_t n;

	if (s[0] == '[') {
		if ((end = strchr(s, ']')) == NULL)
			return -1;
		n = (size_t)(end - s - 1);
		if (n == 0 || n >= hostsz)
			return -1;
		memcpy(host, s + 1, n);
		host[n] = '\0';
		if (end[1] == '\0')
			snprintf(port, portsz, "%d", USBIP_PORT);
		else if (end[1] == ':' && end[2] != '\0') {
			if (usbgw_strlcpy(port, end + 2, portsz) >= portsz)
				return -1;
		} else
			return -1;
		return 0;
	}
	colon = strrchr(s, ':');
	if (colon == NULL || strchr(s, ':') != colon) {
		/* no port, or an IPv6 literal without brackets */
		if (usbgw_strlcpy(host, s, hostsz) >= hostsz || *s == '\0')
			return -1;
		snprintf(port, portsz, "%d", USBIP_PORT);
		return 0;
	}
	n = (size_t)(colon - s);
	if (n == 0 || n >= hostsz || colon[1] == '\0')
		return -1;
	memcpy(host, s, n);
	host[n] = '\0';
	if (usbgw_strlcpy(port, colon + 1, portsz) >= portsz)
		return -1;
	return 0;
}

/* --source ADDR: the local address to connect from (numeric). */
static const char *tc_source;

/* Bind fd to tc_source (same family as the peer).  0 or an errno. */
static int
bind_source(int fd, int family)
{
	struct addrinfo hints, *res;
	int r;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = family;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST;
	if (getaddrinfo(tc_source, NULL, &hints, &res) != 0)
		return EAFNOSUPPORT;
	r = bind(fd, res->ai_addr, res->ai_addrlen) == 0 ? 0 : errno;
	freeaddrinfo(res);
	return r;
}

/* --tls-dir, --tls-nocert, --tls-any-server: USB/IP in TLS. */
static const char *tc_tls_dir;
static bool tc_tls_nocert, tc_tls_any_server;

/*
 * TLS on the connected fd: the handshake here, then the bytes go through
 * a socketpair relayed by a thread (tlsclient_pipe), so everything else
 * reads and writes plain USB/IP as on a TCP connection.
 */
static int
tc_tls_wrap(struct tc *tc, int fd, int timeout_ms)
{
	struct tlsid_client *cl = NULL;
	SSL_CTX *ctx;
	SSL *ssl;
	char err[512];
	int pfd;

	if (tc_tls_nocert) {
		ctx = SSL_CTX_new(TLS_client_method());
		if (ctx != NULL) {
			SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
			SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
		}
		snprintf(err, sizeof(err), "TLS: no context");
	} else {
		char kp[1024];
		enum tlsid_role role = TLSID_ROLE_HOST;

		/* an agent's directory (tests: refused at a tls-listen) */
		snprintf(kp, sizeof(kp), "%s/host.key", tc_tls_dir);
		if (access(kp, F_OK) == -1) {
			snprintf(kp, sizeof(kp), "%s/agent.key", tc_tls_dir);
			if (access(kp, F_OK) == 0)
				role = TLSID_ROLE_AGENT;
		}
		cl = tlsid_client_key(tc_tls_dir, "usbip-tc", role, err,
		    sizeof(err));
		ctx = cl == NULL ? NULL : tlsid_ctx_client(cl, 0, NULL, NULL,
		    err, sizeof(err));
		if (ctx != NULL && tc_tls_any_server)
			SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
	}
	if (ctx == NULL) {
		errmsg("%s", err);
		tlsid_client_free(cl);
		close(fd);
		return TC_EXIT_USAGE;
	}
	ssl = tlsclient_connect(ctx, fd, timeout_ms, err, sizeof(err));
	SSL_CTX_free(ctx);
	tlsid_client_free(cl);
	if (ssl == NULL) {
		errmsg("%s: TLS: %s", tc->peer, err);
		close(fd);
		return TC_EXIT_CONN;
	}
	if ((pfd = tlsclient_pipe(ssl, fd, "usbip-tc", &tc->tls_thread)) ==
	    -1) {
		errmsg("TLS relay: %s", strerror(errno));
		SSL_free(ssl);
		close(fd);
		return TC_EXIT_CONN;
	}
	(void)fcntl(pfd, F_SETFL, fcntl(pfd, F_GETFL) | O_NONBLOCK);
	tc->fd = pfd;
	tc->tls = true;
	return TC_EXIT_OK;
}

/* Non-blocking connect with a deadline; TCP_NODELAY like usbip does. */
static int
tc_connect(struct tc *tc, const char *hostport, int timeout_ms)
{
	struct addrinfo hints, *res, *ai;
	struct pollfd pfd;
	char host[256], port[32];
	socklen_t sl;
	uint64_t deadline;
	int fd = -1, r, err = 0, one = 1, left;

	if (split_hostport(hostport, host, sizeof(host), port,
	    sizeof(port)) == -1) {
		errmsg("bad address \"%s\" (HOST[:PORT] or [V6]:PORT)",
		    hostport);
		return TC_EXIT_USAGE;
	}
	snprintf(tc->peer, sizeof(tc->peer), "%s", hostport);
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	if ((r = getaddrinfo(host, port, &hints, &res)) != 0) {
		errmsg("%s: %s", hostport, gai_strerror(r));
		return TC_EXIT_CONN;
	}
	deadline = deadline_ms(timeout_ms);
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK |
		    SOCK_CLOEXEC, ai->ai_protocol);
		if (fd == -1) {
			err = errno;
			continue;
		}
		if (tc_source != NULL &&
		    (err = bind_source(fd, ai->ai_family)) != 0) {
			close(fd);
			fd = -1;
			continue;
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		if (errno != EINPROGRESS) {
			err = errno;
			close(fd);
			fd = -1;
			continue;
		}
		pfd.fd = fd;
		pfd.events = POLLOUT;
		do {
			uint64_t now = now_ns();

			left = now >= deadline ? 0 :
			    (int)((deadline - now) / 1000000u) + 1;
			r = poll(&pfd, 1, left);
		} while (r == -1 && errno == EINTR);
		if (r == 0) {
			err = ETIMEDOUT;
			close(fd);
			fd = -1;
			continue;
		}
		sl = sizeof(err);
		if (r == -1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err,
		    &sl) == -1)
			err = errno;
		if (err == 0)
			break;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd == -1) {
		errmsg("connect to %s: %s", hostport, strerror(err));
		return err == ETIMEDOUT ? TC_EXIT_TIMEOUT : TC_EXIT_CONN;
	}
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == -1)
		errmsg("TCP_NODELAY: %s", strerror(errno));
	if (tc_tls_dir != NULL || tc_tls_nocert)
		return tc_tls_wrap(tc, fd, timeout_ms);
	tc->fd = fd;
	return TC_EXIT_OK;
}

static void
tc_flush(struct tc *tc)
{
	ssize_t n;

	while (tc->out.off < tc->out.len && tc->close == CLOSE_NONE) {
		n = send(tc->fd, tc->out.p + tc->out.off,
		    tc->out.len - tc->out.off, MSG_NOSIGNAL);
		if (n > 0) {
			tc->out.off += (size_t)n;
			tc->tx_bytes += (uint64_t)n;
			continue;
		}
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		tc_closed(tc, CLOSE_RESET, errno);
		break;
	}
	if (tc->out.off == tc->out.len)
		tc->out.off = tc->out.len = 0;
}

static struct tc_req *
tc_find(struct tc *tc, uint32_t seqnum, enum tc_req_kind kind)
{
	struct tc_req *r = &tc->slots[seqnum & (TC_SLOTS - 1)];

	if (r->kind != kind || r->seqnum != seqnum)
		return NULL;
	return r;
}

/* The codec's view of our requests, to size a RET_SUBMIT. */
static int
tc_lookup(void *arg, uint32_t seqnum, struct usbip_req_info *info)
{
	struct tc_req *r = tc_find(arg, seqnum, REQ_SUBMIT);

	if (r == NULL)
		return -1;
	*info = r->info;
	return 0;
}

/*
 * Take a free slot and a seqnum for it.  Seqnums go up by one, skipping
 * 0 and any whose slot is held (an unlinked URB may linger), so a reply
 * finds its request in O(1).
 */
static struct tc_req *
tc_alloc(struct tc *tc, enum tc_req_kind kind)
{
	struct tc_req *r;
	unsigned tries;

	if (tc->nreq >= TC_SLOTS - 1)
		fatalx("too many requests outstanding");
	for (tries = 0; tries < 2 * TC_SLOTS; tries++) {
		uint32_t seq = tc->next_seq++;

		if (seq == 0)
			continue;
		r = &tc->slots[seq & (TC_SLOTS - 1)];
		if (r->kind != REQ_FREE)
			continue;
		memset(r, 0, sizeof(*r));
		r->kind = kind;
		r->seqnum = seq;
		tc->nreq++;
		return r;
	}
	fatalx("no free request slot");
}

static void
tc_release(struct tc *tc, struct tc_req *r)
{
	r->kind = REQ_FREE;
	tc->nreq--;
}

/* A CMD_SUBMIT as the caller describes it. */
struct tc_urb {
	uint32_t		 ep;
	uint32_t		 dir;
	uint32_t		 flags;
	uint32_t		 length;
	const uint8_t		*setup;		/* 8 bytes; control only */
	const uint8_t		*data;		/* OUT: length bytes, NULL = 0s */
	uint32_t		 npackets;	/* ISO */
	const struct usbip_iso_desc *iso;
	int32_t			 interval;
	uint64_t		 tag;
};

static uint32_t
tc_submit(struct tc *tc, const struct tc_urb *u, tc_done_fn done, void *arg)
{
	struct usbip_urb_hdr h;
	struct tc_req *r;
	uint8_t *p;
	size_t need;
	uint32_t i, dlen;

	r = tc_alloc(tc, REQ_SUBMIT);
	r->ep = u->ep;
	r->info.direction = u->dir;
	r->info.length = u->length;
	r->info.npackets = u->npackets;
	r->info.iso = u->npackets > 0;
	r->tag = u->tag;
	r->done = done;
	r->arg = arg;

	memset(&h, 0, sizeof(h));
	h.command = USBIP_CMD_SUBMIT;
	h.seqnum = r->seqnum;
	h.devid = tc->devid;
	h.direction = u->dir;
	h.ep = u->ep;
	h.u.submit.transfer_flags = u->flags;
	h.u.submit.transfer_buffer_length = (int32_t)u->length;
	h.u.submit.number_of_packets = (int32_t)u->npackets;
	h.u.submit.interval = u->interval;
	if (u->setup != NULL)
		memcpy(h.u.submit.setup, u->setup, 8);

	dlen = u->dir == USBIP_DIR_OUT ? u->length : 0;
	need = USBIP_URB_HDR_LEN + dlen + (size_t)u->npackets *
	    USBIP_ISO_DESC_LEN;
	buf_reserve(&tc->out, need);
	p = tc->out.p + tc->out.len;
	usbip_urb_hdr_encode(p, &h);
	p += USBIP_URB_HDR_LEN;
	if (dlen > 0) {
		if (u->data != NULL)
			memcpy(p, u->data, dlen);
		else
			memset(p, 0, dlen);
		p += dlen;
	}
	for (i = 0; i < u->npackets; i++, p += USBIP_ISO_DESC_LEN)
		usbip_iso_desc_encode(p, &u->iso[i]);
	tc->out.len += need;
	r->t_submit = now_ns();
	if (verbose)
		fprintf(stderr, "> CMD_SUBMIT seqnum=%u ep=%u dir=%s length=%u "
		    "packets=%u\n", r->seqnum, u->ep,
		    u->dir == USBIP_DIR_IN ? "in" : "out", u->length,
		    u->npackets);
	return r->seqnum;
}

static uint32_t
tc_unlink(struct tc *tc, uint32_t target, tc_done_fn done, void *arg)
{
	struct usbip_urb_hdr h;
	struct tc_req *r;

	r = tc_alloc(tc, REQ_UNLINK);
	r->target = target;
	r->done = done;
	r->arg = arg;
	memset(&h, 0, sizeof(h));
	h.command = USBIP_CMD_UNLINK;
	h.seqnum = r->seqnum;
	h.devid = tc->devid;
	h.u.unlink.unlink_seqnum = target;
	buf_reserve(&tc->out, USBIP_URB_HDR_LEN);
	usbip_urb_hdr_encode(tc->out.p + tc->out.len, &h);
	tc->out.len += USBIP_URB_HDR_LEN;
	r->t_submit = now_ns();
	if (verbose)
		fprintf(stderr, "> CMD_UNLINK seqnum=%u unlink_seqnum=%u\n",
		    r->seqnum, target);
	return r->seqnum;
}

/* Forget a request whose reply nobody waits for any more. */
static void
tc_forget(struct tc *tc, uint32_t seqnum)
{
	struct tc_req *r = tc_find(tc, seqnum, REQ_SUBMIT);

	if (r != NULL)
		tc_release(tc, r);
}

static void
tc_dispatch(struct tc *tc, const struct usbip_urb *u)
{
	struct tc_req *slot, req, *target;

	if (!tc->warned_fields && (u->hdr.devid != 0 ||
	    u->hdr.direction != 0 || u->hdr.ep != 0)) {
		tc->warned_fields = true;
		errmsg("warning: %s seqnum %u has devid/direction/ep "
		    "%08x/%u/%u, the kernel sends zeros",
		    usbip_cmd_name(u->hdr.command), u->hdr.seqnum,
		    u->hdr.devid, u->hdr.direction, u->hdr.ep);
	}
	if (verbose && u->hdr.command == USBIP_RET_SUBMIT)
		fprintf(stderr, "< RET_SUBMIT seqnum=%u status=%d "
		    "actual_length=%d packets=%d error_count=%d\n",
		    u->hdr.seqnum, u->hdr.u.ret_submit.status,
		    u->hdr.u.ret_submit.actual_length,
		    u->hdr.u.ret_submit.number_of_packets,
		    u->hdr.u.ret_submit.error_count);
	else if (verbose)
		fprintf(stderr, "< RET_UNLINK seqnum=%u status=%d\n",
		    u->hdr.seqnum, u->hdr.u.ret_unlink.status);
	switch (u->hdr.command) {
	case USBIP_RET_SUBMIT:
		slot = tc_find(tc, u->hdr.seqnum, REQ_SUBMIT);
		req = *slot;
		tc_release(tc, slot);
		if (req.done != NULL)
			req.done(tc, &req, u);
		break;
	case USBIP_RET_UNLINK:
		slot = tc_find(tc, u->hdr.seqnum, REQ_UNLINK);
		if (slot == NULL) {
			tc_die(tc, TC_EXIT_PROTO, "%s: RET_UNLINK for unknown "
			    "seqnum %u", tc->peer, u->hdr.seqnum);
			return;
		}
		req = *slot;
		tc_release(tc, slot);
		target = tc_find(tc, req.target, REQ_SUBMIT);
		req.target_pending = target != NULL && !target->unlinked;
		if (target != NULL &&
		    u->hdr.u.ret_unlink.status == ECONNRESET_WIRE)
			target->unlinked = true;
		if (req.done != NULL)
			req.done(tc, &req, u);
		break;
	}
}

/* Decode and dispatch every complete URB PDU in the input buffer. */
static void
tc_parse_urbs(struct tc *tc)
{
	struct usbip_urb_hdr h;
	struct usbip_urb u;
	struct tc_req *r;
	const char *why = "?";
	const uint8_t *p;
	size_t avail;
	int n;

	while (tc->dead == 0) {
		p = tc->in.p + tc->in.off;
		avail = tc->in.len - tc->in.off;
		n = usbip_urb_hdr_decode(p, avail, USBIP_FROM_SERVER, &h, &why);
		if (n == USBIP_NEED_MORE)
			break;
		if (n < 0) {
			tc_die(tc, TC_EXIT_PROTO, "%s: malformed URB PDU: %s",
			    tc->peer, why);
			return;
		}
		if (h.command == USBIP_RET_SUBMIT) {
			r = tc_find(tc, h.seqnum, REQ_SUBMIT);
			if (r == NULL) {
				tc_die(tc, TC_EXIT_PROTO, "%s: RET_SUBMIT for "
				    "unknown seqnum %u", tc->peer, h.seqnum);
				return;
			}
			if (r->unlinked) {
				tc_die(tc, TC_EXIT_PROTO, "%s: RET_SUBMIT for "
				    "seqnum %u after its RET_UNLINK "
				    "-ECONNRESET", tc->peer, h.seqnum);
				return;
			}
		}
		n = usbip_urb_decode(p, avail, USBIP_FROM_SERVER, tc_lookup,
		    tc, -1, &u, &why);
		if (n == USBIP_NEED_MORE) {
			buf_reserve(&tc->in, u.lay.total - avail);
			break;
		}
		if (n < 0) {
			tc_die(tc, TC_EXIT_PROTO, "%s: malformed %s seqnum %u: "
			    "%s", tc->peer, usbip_cmd_name(h.command),
			    h.seqnum, why);
			return;
		}
		tc->in.off += (size_t)n;
		tc_dispatch(tc, &u);
	}
	if (tc->in.off == tc->in.len)
		tc->in.off = tc->in.len = 0;
}

static void
tc_read(struct tc *tc)
{
	ssize_t n;
	size_t want;
	int i;

	for (i = 0; i < TC_READS_PER_WAKE && tc->close == CLOSE_NONE; i++) {
		buf_reserve(&tc->in, TC_READ_CHUNK);
		want = tc->in.cap - tc->in.len;
		n = recv(tc->fd, tc->in.p + tc->in.len, want, 0);
		if (n > 0) {
			tc->in.len += (size_t)n;
			tc->rx_bytes += (uint64_t)n;
			if (tc->urb_phase)
				tc_parse_urbs(tc);
			if (tc->dead != 0 || (size_t)n < want)
				return;
			continue;
		}
		if (n == 0) {
			tc_closed(tc, CLOSE_EOF, 0);
			return;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return;
		tc_closed(tc, CLOSE_RESET, errno);
		return;
	}
}

enum tc_run_result {
	RUN_OK = 0,		/* the condition holds */
	RUN_DEAD = -1,		/* connection unusable (tc->dead) */
	RUN_TIMEOUT = 1,	/* the deadline passed */
};

/*
 * Drive the connection until cond(tc, arg) holds, the connection dies,
 * or the deadline (monotonic ns, 0 = none) passes.  The condition is
 * checked first, so a wait for a close succeeds on a dead connection.
 */
static enum tc_run_result
tc_run(struct tc *tc, tc_cond_fn cond, void *arg, uint64_t deadline)
{
	struct pollfd pfd;
	uint64_t now;
	int r, ms;

	for (;;) {
		tc_flush(tc);
		if (cond != NULL && cond(tc, arg))
			return RUN_OK;
		if (tc->dead != 0)
			return RUN_DEAD;
		ms = -1;
		if (deadline != 0) {
			now = now_ns();
			if (now >= deadline)
				return RUN_TIMEOUT;
			ms = (int)((deadline - now + 999999) / 1000000u);
		}
		pfd.fd = tc->fd;
		pfd.events = POLLIN;
		if (tc->out.off < tc->out.len)
			pfd.events |= POLLOUT;
		r = poll(&pfd, 1, ms);
		if (r == -1) {
			if (errno == EINTR)
				continue;
			fatal("poll");
		}
		if (r == 0)
			continue;
		if (pfd.revents & (POLLIN | POLLHUP | POLLERR))
			tc_read(tc);
		if (pfd.revents & POLLOUT)
			tc_flush(tc);
	}
}

static bool
cond_closed(struct tc *tc, void *arg)
{
	(void)arg;
	return tc->close != CLOSE_NONE;
}

/* ---- op phase ------------------------------------------------------------ */

struct op_wait {
	struct usbip_op	 op;
	int		 n;
	const char	*why;
};

static bool
cond_op(struct tc *tc, void *arg)
{
	struct op_wait *w = arg;

	w->n = usbip_op_decode(tc->in.p + tc->in.off, tc->in.len - tc->in.off,
	    USBIP_FROM_SERVER, &w->op, &w->why);
	return w->n != USBIP_NEED_MORE;
}

/* Wait for one op reply of the given code; returns 0 or an exit code. */
static int
tc_op_reply(struct tc *tc, struct op_wait *w, uint16_t code, int timeout_ms)
{
	enum tc_run_result rr;

	rr = tc_run(tc, cond_op, w, deadline_ms(timeout_ms));
	if (rr == RUN_TIMEOUT) {
		errmsg("%s: no %s within %d ms", tc->peer, usbip_op_name(code),
		    timeout_ms);
		return TC_EXIT_TIMEOUT;
	}
	if (rr == RUN_DEAD)
		return tc->dead;
	if (w->n < 0) {
		errmsg("%s: malformed op reply: %s", tc->peer, w->why);
		return TC_EXIT_PROTO;
	}
	if (w->op.hdr.code != code) {
		errmsg("%s: expected %s, got %s", tc->peer, usbip_op_name(code),
		    usbip_op_name(w->op.hdr.code));
		return TC_EXIT_PROTO;
	}
	return TC_EXIT_OK;
}

static void
tc_send_bytes(struct tc *tc, const void *p, size_t n)
{
	buf_reserve(&tc->out, n);
	memcpy(tc->out.p + tc->out.len, p, n);
	tc->out.len += n;
}

static const char *
speed_str(uint32_t speed)
{
	const char *s = usbip_speed_name(speed);

	return s != NULL ? s : "?";
}

static const char *
st_str(uint32_t st)
{
	const char *s = usbip_st_name(st);

	return s != NULL ? s : "ST_?";
}

static int
refused_code(uint32_t status)
{
	if (status >= 1 && status <= ST_MAX)
		return TC_EXIT_REFUSED + (int)status;
	return TC_EXIT_REFUSED_OTHER;
}

/*
 * Import busid.  On ST_OK the connection enters the URB phase with devid
 * set; a refusal returns its TC_EXIT_REFUSED code with *status set.
 */
static int
tc_import(struct tc *tc, const char *busid, struct usbip_dev *dev,
    uint32_t *status, int timeout_ms)
{
	uint8_t req[USBIP_IMPORT_REQ_LEN];
	struct op_wait w;
	int rc;

	usbip_import_req_encode(req, busid);
	tc_send_bytes(tc, req, sizeof(req));
	tc->quiet_close = true;		/* a refusal is followed by a close */
	rc = tc_op_reply(tc, &w, OP_REP_IMPORT, timeout_ms);
	tc->quiet_close = false;
	if (rc != TC_EXIT_OK) {
		if (tc->close != CLOSE_NONE && rc == TC_EXIT_CONN)
			errmsg("%s: connection closed before OP_REP_IMPORT",
			    tc->peer);
		return rc;
	}
	tc->in.off += (size_t)w.n;
	*status = w.op.hdr.status;
	if (w.op.hdr.status != ST_OK)
		return refused_code(w.op.hdr.status);
	*dev = w.op.dev;
	/* As the stock client does: the reply must be for our busid. */
	if (strncmp(dev->busid, busid, USBIP_BUSID_SIZE) != 0) {
		char e[USBIP_BUSID_SIZE * 4];

		errmsg("%s: OP_REP_IMPORT for busid \"%s\", asked \"%s\"",
		    tc->peer, esc(e, sizeof(e), dev->busid), busid);
		return TC_EXIT_PROTO;
	}
	if (tc->in.off != tc->in.len) {
		errmsg("%s: %zu unexpected bytes after OP_REP_IMPORT",
		    tc->peer, tc->in.len - tc->in.off);
		return TC_EXIT_PROTO;
	}
	tc->in.off = tc->in.len = 0;
	tc->devid = dev->busnum << 16 | (dev->devnum & 0xffff);
	tc->urb_phase = true;
	return TC_EXIT_OK;
}

/* ---- descriptors --------------------------------------------------------- */

struct tc_ep {
	uint8_t		 addr;		/* bEndpointAddress */
	uint8_t		 xfer;		/* USB_XFER_* */
	uint16_t	 mps;		/* wMaxPacketSize, size bits */
	uint8_t		 binterval;
	uint8_t		 intf;
	uint8_t		 alt;
	uint8_t		 iclass;
};

struct tc_devinfo {
	struct usbip_dev dev;		/* from the import reply */
	uint8_t		 ddesc[18];
	uint8_t		*config;
	size_t		 config_len;
	uint8_t		 confval;
	uint8_t		 nintf;
	struct tc_ep	 eps[TC_MAX_EPS];
	unsigned	 neps;
};

static uint16_t
get_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

/*
 * Walk a configuration descriptor: every descriptor's bLength >= 2 and
 * inside wTotalLength, interface and endpoint descriptors long enough.
 * Fills the endpoint table.  Returns 0 or -1 with *why.
 */
static int
config_parse(struct tc_devinfo *di, const char **why)
{
	const uint8_t *p = di->config;
	size_t off, len = di->config_len;
	uint8_t intf = 0, alt = 0, iclass = 0, nif = 0;

	di->neps = 0;
	if (len < 9 || p[0] < 9 || p[1] != USB_DT_CONFIG) {
		*why = "not a configuration descriptor";
		return -1;
	}
	if (get_le16(p + 2) != len) {
		*why = "wTotalLength differs from the bytes returned";
		return -1;
	}
	di->confval = p[5];
	di->nintf = p[4];
	for (off = p[0]; off < len; off += p[off]) {
		if (len - off < 2 || p[off] < 2 || p[off] > len - off) {
			*why = "descriptor overruns wTotalLength";
			return -1;
		}
		if (p[off + 1] == USB_DT_INTERFACE) {
			if (p[off] < 9) {
				*why = "short interface descriptor";
				return -1;
			}
			intf = p[off + 2];
			alt = p[off + 3];
			iclass = p[off + 5];
			if (alt == 0)
				nif++;
		} else if (p[off + 1] == USB_DT_ENDPOINT) {
			struct tc_ep *e;

			if (p[off] < 7) {
				*why = "short endpoint descriptor";
				return -1;
			}
			if (di->neps == TC_MAX_EPS) {
				*why = "too many endpoints";
				return -1;
			}
			e = &di->eps[di->neps++];
			e->addr = p[off + 2];
			e->xfer = p[off + 3] & 3;
			e->mps = get_le16(p + off + 4) & 0x7ff;
			e->binterval = p[off + 6];
			e->intf = intf;
			e->alt = alt;
			e->iclass = iclass;
		}
	}
	if (nif != di->nintf) {
		*why = "bNumInterfaces differs from the interfaces present";
		return -1;
	}
	return 0;
}

/* First endpoint of a type and direction, in alternate setting alt (-1 any). */
static const struct tc_ep *
ep_find(const struct tc_devinfo *di, uint8_t xfer, bool in, int intf, int alt)
{
	unsigned i;

	for (i = 0; i < di->neps; i++) {
		const struct tc_ep *e = &di->eps[i];

		if (e->xfer != xfer || ((e->addr & 0x80) != 0) != in)
			continue;
		if ((intf >= 0 && e->intf != intf) || (alt >= 0 && e->alt != alt))
			continue;
		return e;
	}
	return NULL;
}

/*
 * A bulk IN/OUT pair on one interface (alternate setting 0); with
 * prefer_class >= 0, an interface of that class wins.
 */
static bool
bulk_pair(const struct tc_devinfo *di, int prefer_class,
    const struct tc_ep **in, const struct tc_ep **out)
{
	unsigned i;
	int pass;

	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < di->neps; i++) {
			const struct tc_ep *e = &di->eps[i], *o;

			if (e->xfer != USB_XFER_BULK || !(e->addr & 0x80) ||
			    e->alt != 0)
				continue;
			if (pass == 0 && prefer_class >= 0 &&
			    e->iclass != prefer_class)
				continue;
			o = ep_find(di, USB_XFER_BULK, false, e->intf, 0);
			if (o != NULL) {
				*in = e;
				*out = o;
				return true;
			}
		}
		if (prefer_class < 0)
			break;
	}
	return false;
}

/* UTF-16LE string descriptor body to printable ASCII (\uXXXX escapes). */
static void
string_decode(const uint8_t *p, size_t n, char *out, size_t outsz)
{
	size_t i, o = 0;

	out[0] = '\0';
	for (i = 0; i + 1 < n && o + 7 < outsz; i += 2) {
		uint16_t c = get_le16(p + i);

		if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"')
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, outsz - o, "\\u%04x", c);
	}
	out[o] = '\0';
}

/* ---- synchronous requests ------------------------------------------------ */

struct tc_sync {
	bool		 done;
	int32_t		 status;
	uint32_t	 actual;
	uint8_t		*buf;
	size_t		 bufsz;
	uint64_t	 rtt_ns;
	int32_t		 npackets;
	int32_t		 error_count;
	int32_t		 start_frame;
	struct usbip_iso_desc *iso;	/* npackets, decoded */
	uint32_t	 niso;
};

static void
sync_done(struct tc *tc, struct tc_req *r, const struct usbip_urb *u)
{
	struct tc_sync *s = r->arg;
	uint32_t n, i;

	(void)tc;
	s->done = true;
	s->rtt_ns = now_ns() - r->t_submit;
	s->status = u->hdr.u.ret_submit.status;
	s->actual = (uint32_t)u->hdr.u.ret_submit.actual_length;
	s->npackets = u->hdr.u.ret_submit.number_of_packets;
	s->error_count = u->hdr.u.ret_submit.error_count;
	s->start_frame = u->hdr.u.ret_submit.start_frame;
	if (s->buf != NULL && u->lay.data_len > 0) {
		n = u->lay.data_len < s->bufsz ? u->lay.data_len :
		    (uint32_t)s->bufsz;
		memcpy(s->buf, u->data, n);
	}
	if (s->iso != NULL) {
		for (i = 0; i < u->lay.niso && i < s->niso; i++)
			usbip_iso_desc_decode(u->iso + (size_t)i *
			    USBIP_ISO_DESC_LEN, &s->iso[i]);
	}
}

static bool
cond_sync(struct tc *tc, void *arg)
{
	(void)tc;
	return ((struct tc_sync *)arg)->done;
}

/*
 * Submit one URB and wait for it.  On a timeout the URB is unlinked and
 * forgotten.  Returns 0 (s filled), or an exit code.
 */
static int
tc_sync_urb(struct tc *tc, const struct tc_urb *u, struct tc_sync *s,
    int timeout_ms)
{
	enum tc_run_result rr;
	struct tc_req *r;
	uint32_t seq;

	s->done = false;
	seq = tc_submit(tc, u, sync_done, s);
	rr = tc_run(tc, cond_sync, s, deadline_ms(timeout_ms));
	if (rr == RUN_OK)
		return TC_EXIT_OK;
	if (rr == RUN_DEAD)
		return tc->dead;
	if ((r = tc_find(tc, seq, REQ_SUBMIT)) != NULL) {
		r->done = NULL;
		r->arg = NULL;
		tc_unlink(tc, seq, NULL, NULL);
	}
	return TC_EXIT_TIMEOUT;
}

static int
tc_control(struct tc *tc, uint8_t type, uint8_t req, uint16_t value,
    uint16_t index, uint16_t length, const uint8_t *outdata, uint8_t *inbuf,
    struct tc_sync *s, int timeout_ms)
{
	struct tc_urb u;
	uint8_t setup[8];

	memset(&u, 0, sizeof(u));
	memset(s, 0, sizeof(*s));
	usbip_setup_encode(setup, type, req, value, index, length);
	u.ep = 0;
	u.dir = (type & 0x80) ? USBIP_DIR_IN : USBIP_DIR_OUT;
	u.length = length;
	u.setup = setup;
	u.data = outdata;
	s->buf = inbuf;
	s->bufsz = inbuf != NULL ? length : 0;
	return tc_sync_urb(tc, &u, s, timeout_ms);
}

static int
get_descriptor(struct tc *tc, uint8_t type, uint8_t index, uint16_t langid,
    uint8_t *buf, uint16_t len, struct tc_sync *s, int timeout_ms)
{
	return tc_control(tc, 0x80, USB_REQ_GET_DESCRIPTOR,
	    (uint16_t)(type << 8 | index), langid, len, NULL, buf, s,
	    timeout_ms);
}

/* ---- data patterns ------------------------------------------------------- */

/*
 * The loopback stream pattern: byte at stream offset o is pat[o % P],
 * with the table extended by one URB so any slice is contiguous.  P is
 * prime, so consecutive power-of-two URBs carry different bytes and a
 * duplicated, dropped or reordered URB shows.
 */
static uint8_t *
pattern_new(uint32_t maxurb)
{
	uint8_t *pat;
	uint32_t i, x = 0x9e3779b9u;
	size_t n = (size_t)TC_PATTERN_PERIOD + maxurb;

	pat = xmalloc(n);
	for (i = 0; i < TC_PATTERN_PERIOD; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		pat[i] = (uint8_t)(x >> 24);
	}
	for (; i < n; i++)
		pat[i] = pat[i - TC_PATTERN_PERIOD];
	return pat;
}

static const uint8_t *
pattern_at(const uint8_t *pat, uint64_t off)
{
	return pat + (off % TC_PATTERN_PERIOD);
}

/*
 * g_zero's source/sink pattern 1: byte i of a transfer is
 * (i % wMaxPacketSize) % 63 (f_sourcesink.c); the simulator's source
 * and sink use it too.
 */
static uint8_t *
gzero_pattern_new(uint32_t len, uint16_t mps)
{
	uint8_t *p;
	uint32_t i;

	p = xmalloc(len > 0 ? len : 1);
	if (mps == 0)
		mps = 512;
	for (i = 0; i < len; i++)
		p[i] = (uint8_t)((i % mps) % 63);
	return p;
}

/* ---- bulk streams -------------------------------------------------------- */

/*
 * A bulk stream keeps up to `inflight` URBs of `urb` bytes in flight.
 * In loop mode OUT data is the stream pattern and comes back on IN: IN
 * data is checked in the order the device completes INs, which is the
 * order it hands out FIFO bytes.  An IN is submitted only for bytes
 * already sent and not yet asked for, so every IN in flight can
 * complete and the stream drains without unlinks.
 */
struct xfer {
	struct tc	*tc;
	enum xfer_dir	 dir;
	uint8_t		 ep_in;		/* endpoint numbers */
	uint8_t		 ep_out;
	uint32_t	 urb;
	unsigned	 inflight;
	uint64_t	 total;		/* bytes to move, 0 = until stopped */
	uint64_t	 window;	/* loop: bytes out and not yet back */
	bool		 verify;
	bool		 stop;
	const uint8_t	*pat;		/* loop pattern */
	const uint8_t	*gzero;		/* in/out: per-transfer pattern */

	uint64_t	 out_sub;	/* OUT bytes submitted */
	uint64_t	 out_done;	/* OUT bytes the device took */
	uint64_t	 in_sub;	/* IN bytes asked for, all time */
	uint64_t	 in_req;	/* IN bytes asked for, in flight */
	uint64_t	 in_rx;		/* IN bytes received */
	unsigned	 n_in;
	unsigned	 n_out;
	uint64_t	 urbs;
	uint64_t	 short_in;
	bool		 failed;
	char		 failmsg[256];
	uint64_t	 t_first;	/* first completion, ns */
	uint64_t	 t_last;	/* last completion, ns */
	uint64_t	 t_progress;
	void		(*on_first)(struct xfer *);
	const char	*cookie;	/* ready file */
};

static void xfer_fill(struct xfer *);

static void xfer_fail(struct xfer *, const char *, ...)
    __attribute__((format(printf, 2, 3)));
static void
xfer_fail(struct xfer *x, const char *fmt, ...)
{
	va_list ap;

	if (x->failed)
		return;
	x->failed = true;
	x->stop = true;
	va_start(ap, fmt);
	vsnprintf(x->failmsg, sizeof(x->failmsg), fmt, ap);
	va_end(ap);
}

static bool
mem_mismatch(const uint8_t *got, const uint8_t *want, size_t n, size_t *at)
{
	size_t i;

	if (memcmp(got, want, n) == 0)
		return false;
	for (i = 0; i < n && got[i] == want[i]; i++)
		;
	*at = i;
	return true;
}

static void
xfer_done(struct tc *tc, struct tc_req *r, const struct usbip_urb *u)
{
	struct xfer *x = r->arg;
	int32_t status = u->hdr.u.ret_submit.status;
	uint32_t actual = (uint32_t)u->hdr.u.ret_submit.actual_length;
	size_t at;

	(void)tc;
	x->t_last = x->t_progress = now_ns();
	if (x->urbs++ == 0) {
		x->t_first = x->t_last;
		if (x->on_first != NULL)
			x->on_first(x);
	}
	if (r->info.direction == USBIP_DIR_OUT) {
		x->n_out--;
		x->out_done += actual;
		if (status != 0)
			xfer_fail(x, "bulk OUT seqnum %u: status %d", r->seqnum,
			    status);
		else if (actual != r->info.length)
			xfer_fail(x, "bulk OUT seqnum %u: device took %u of "
			    "%u bytes", r->seqnum, actual, r->info.length);
	} else {
		x->n_in--;
		x->in_req -= r->info.length;
		if (status != 0)
			xfer_fail(x, "bulk IN seqnum %u: status %d", r->seqnum,
			    status);
		else if (x->verify && x->dir == XFER_LOOP &&
		    mem_mismatch(u->data, pattern_at(x->pat, x->in_rx), actual,
		    &at))
			xfer_fail(x, "loopback data differ at stream byte "
			    "%" PRIu64 " (IN seqnum %u, byte %zu): got 0x%02x, "
			    "want 0x%02x", x->in_rx + at, r->seqnum, at,
			    u->data[at], pattern_at(x->pat, x->in_rx)[at]);
		else if (x->verify && x->dir == XFER_IN &&
		    mem_mismatch(u->data, x->gzero, actual, &at))
			xfer_fail(x, "source data differ at byte %zu of IN "
			    "seqnum %u: got 0x%02x, want 0x%02x", at, r->seqnum,
			    u->data[at], x->gzero[at]);
		if (actual < r->info.length)
			x->short_in++;
		x->in_rx += actual;
	}
	xfer_fill(x);
}

static void
xfer_submit(struct xfer *x, uint32_t dir, uint32_t len)
{
	struct tc_urb u;

	memset(&u, 0, sizeof(u));
	u.dir = dir;
	u.length = len;
	if (dir == USBIP_DIR_IN) {
		u.ep = x->ep_in;
		x->n_in++;
		x->in_req += len;
		x->in_sub += len;
	} else {
		u.ep = x->ep_out;
		u.data = x->dir == XFER_LOOP ? pattern_at(x->pat, x->out_sub) :
		    x->gzero;
		x->n_out++;
		x->out_sub += len;
	}
	tc_submit(x->tc, &u, xfer_done, x);
}

static uint32_t
min_u32(uint64_t a, uint64_t b)
{
	return (uint32_t)(a < b ? a : b);
}

static void
xfer_fill(struct xfer *x)
{
	uint64_t avail, back;

	while (!x->stop && x->n_in + x->n_out < x->inflight) {
		switch (x->dir) {
		case XFER_IN:
			if (x->total != 0 && x->in_sub >= x->total)
				return;
			xfer_submit(x, USBIP_DIR_IN, x->total == 0 ? x->urb :
			    min_u32(x->urb, x->total - x->in_sub));
			break;
		case XFER_OUT:
			if (x->total != 0 && x->out_sub >= x->total)
				return;
			xfer_submit(x, USBIP_DIR_OUT, x->total == 0 ? x->urb :
			    min_u32(x->urb, x->total - x->out_sub));
			break;
		case XFER_LOOP:
			avail = x->out_sub - x->in_rx - x->in_req;
			if (avail > 0) {
				xfer_submit(x, USBIP_DIR_IN,
				    min_u32(x->urb, avail));
				break;
			}
			back = x->out_sub - x->in_rx;
			if ((x->total != 0 && x->out_sub >= x->total) ||
			    back >= x->window)
				return;
			avail = x->window - back;
			if (x->total != 0 && x->total - x->out_sub < avail)
				avail = x->total - x->out_sub;
			xfer_submit(x, USBIP_DIR_OUT, min_u32(x->urb, avail));
			break;
		}
	}
}

static bool
xfer_complete(const struct xfer *x)
{
	if (x->n_in + x->n_out > 0)
		return false;
	if (x->stop)
		return true;
	switch (x->dir) {
	case XFER_IN:
		return x->total != 0 && x->in_sub >= x->total;
	case XFER_OUT:
		return x->total != 0 && x->out_sub >= x->total;
	case XFER_LOOP:
		return x->total != 0 && x->in_rx >= x->total;
	}
	return false;
}

static bool
cond_xfer(struct tc *tc, void *arg)
{
	(void)tc;
	return xfer_complete(arg);
}

static bool
cond_xfer_drained(struct tc *tc, void *arg)
{
	struct xfer *x = arg;

	(void)tc;
	return x->n_in + x->n_out == 0;
}

static void
xfer_init(struct xfer *x, struct tc *tc, enum xfer_dir dir, uint32_t urb,
    unsigned inflight)
{
	memset(x, 0, sizeof(*x));
	x->tc = tc;
	x->dir = dir;
	x->urb = urb;
	x->inflight = inflight;
	x->window = (uint64_t)urb * (inflight > 1 ? inflight / 2 : 1);
	x->verify = true;
}

/*
 * Run a stream until it completes, stalls for timeout_ms without
 * progress, or (until_ns != 0) that time comes, after which no new URB
 * is submitted and the stream drains.  Returns 0 or an exit code.
 */
static int
xfer_run(struct xfer *x, uint64_t until_ns, int timeout_ms)
{
	enum tc_run_result rr;
	uint64_t slice, now;

	x->t_progress = now_ns();
	xfer_fill(x);
	for (;;) {
		now = now_ns();
		if (until_ns != 0 && (now >= until_ns || time_up) && !x->stop)
			x->stop = true;
		slice = now + (uint64_t)TC_SLICE_MS * 1000000u;
		if (until_ns != 0 && !x->stop && until_ns < slice)
			slice = until_ns;
		rr = tc_run(x->tc, x->stop ? cond_xfer_drained : cond_xfer, x,
		    slice);
		if (rr == RUN_OK)
			return x->failed ? TC_EXIT_FAIL : TC_EXIT_OK;
		if (rr == RUN_DEAD)
			return x->tc->dead;
		if (now_ns() - x->t_progress >
		    (uint64_t)timeout_ms * 1000000u) {
			xfer_fail(x, "no progress for %d ms (%u IN, %u OUT in "
			    "flight)", timeout_ms, x->n_in, x->n_out);
			return TC_EXIT_TIMEOUT;
		}
	}
}

/* ---- shared setup for transfer commands ---------------------------------- */

static void
write_ready_file(const char *path)
{
	char tmp[4096];
	FILE *f;

	if (path == NULL)
		return;
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
		fatalx("ready file path too long");
	if ((f = fopen(tmp, "w")) == NULL)
		fatal("%s", tmp);
	fprintf(f, "%ld\n", (long)getpid());
	if (fclose(f) != 0 || rename(tmp, path) == -1)
		fatal("%s", path);
}

/* Print the disconnect line; returns the exit code it implies. */
static int
report_disconnect(struct tc *tc, const struct tc_opts *o)
{
	double since_marker = -1;

	if (tc->close == CLOSE_NONE) {
		if (o->expect_disconnect) {
			printf("FAIL disconnect expected, none seen\n");
			return TC_EXIT_FAIL;
		}
		return TC_EXIT_OK;
	}
	printf("DISCONNECT kind=%s after_start_ms=%.1f",
	    tc->close == CLOSE_EOF ? "eof" : "reset",
	    (double)(tc->close_ns - start_ns) / 1e6);
	if (marker_set) {
		since_marker = ((double)tc->close_ns - (double)marker_ns) / 1e6;
		printf(" since_marker_ms=%.1f", since_marker);
	}
	printf(" realtime_us=%" PRIu64 "\n", tc->close_real_us);
	if (!o->expect_disconnect)
		return TC_EXIT_CONN;
	if (o->within_ms >= 0 && marker_set && since_marker > o->within_ms) {
		printf("FAIL disconnect %.1f ms after the marker, bound %d ms\n",
		    since_marker, o->within_ms);
		return TC_EXIT_FAIL;
	}
	return TC_EXIT_OK;
}

/*
 * The exit code of a run that may have ended in a disconnect: a failed
 * check stands; otherwise the disconnect decides (expected or not).
 */
static int
finish_rc(struct tc *tc, const struct tc_opts *o, int rc)
{
	int drc;

	if (tc->close == CLOSE_NONE && !o->expect_disconnect)
		return rc;
	drc = report_disconnect(tc, o);
	return rc == TC_EXIT_FAIL ? rc : drc;
}

/* Connect and import; prints one line.  Returns 0 or an exit code. */
static int
open_import(struct tc **tcp, const struct tc_opts *o, struct usbip_dev *dev)
{
	struct tc *tc;
	uint32_t status = ST_OK;
	int rc;

	*tcp = tc = tc_new();
	if ((rc = tc_connect(tc, o->hostport, o->timeout_ms)) != TC_EXIT_OK)
		return rc;
	rc = tc_import(tc, o->busid, dev, &status, o->timeout_ms);
	if (rc >= TC_EXIT_REFUSED) {
		printf("FAIL import %s: refused, %s (%u)\n", o->busid,
		    st_str(status), status);
		return rc;
	}
	if (rc != TC_EXIT_OK)
		return rc;
	start_ns = now_ns();
	if (o->expect_disconnect)
		tc->quiet_close = true;
	return TC_EXIT_OK;
}

/*
 * Read the device and configuration descriptors and set the
 * configuration, as a host does before using a device.  Quiet unless
 * something fails; `what` names the failing step.
 */
static int
setup_device(struct tc *tc, const struct tc_opts *o, struct tc_devinfo *di,
    const char **what, char *detail, size_t detailsz)
{
	struct tc_sync s;
	uint8_t head[9];
	const char *why;
	uint16_t total;
	int rc;

	*what = "desc-device";
	rc = get_descriptor(tc, USB_DT_DEVICE, 0, 0, di->ddesc, 18, &s,
	    o->timeout_ms);
	if (rc != 0)
		return rc;
	if (s.status != 0 || s.actual != 18 || di->ddesc[0] != 18 ||
	    di->ddesc[1] != USB_DT_DEVICE) {
		snprintf(detail, detailsz, "status %d, %u bytes", s.status,
		    s.actual);
		return TC_EXIT_FAIL;
	}
	*what = "desc-config-head";
	rc = get_descriptor(tc, USB_DT_CONFIG, 0, 0, head, 9, &s,
	    o->timeout_ms);
	if (rc != 0)
		return rc;
	if (s.status != 0 || s.actual != 9 || head[1] != USB_DT_CONFIG ||
	    (total = get_le16(head + 2)) < 9) {
		snprintf(detail, detailsz, "status %d, %u bytes", s.status,
		    s.actual);
		return TC_EXIT_FAIL;
	}
	*what = "desc-config";
	free(di->config);
	di->config = xmalloc(total);
	rc = get_descriptor(tc, USB_DT_CONFIG, 0, 0, di->config, total, &s,
	    o->timeout_ms);
	if (rc != 0)
		return rc;
	di->config_len = s.actual;
	if (s.status != 0 || s.actual != total) {
		snprintf(detail, detailsz, "status %d, %u of %u bytes",
		    s.status, s.actual, total);
		return TC_EXIT_FAIL;
	}
	if (config_parse(di, &why) == -1) {
		snprintf(detail, detailsz, "%s", why);
		return TC_EXIT_FAIL;
	}
	*what = "set-config";
	rc = tc_control(tc, 0x00, USB_REQ_SET_CONFIGURATION, di->confval, 0, 0,
	    NULL, NULL, &s, o->timeout_ms);
	if (rc != 0)
		return rc;
	if (s.status != 0) {
		snprintf(detail, detailsz, "status %d", s.status);
		return TC_EXIT_FAIL;
	}
	return TC_EXIT_OK;
}

/* Pick the endpoints a bulk stream uses, honouring --ep-in/--ep-out. */
static int
pick_bulk(const struct tc_devinfo *di, const struct tc_opts *o,
    enum xfer_dir dir, uint8_t *ep_in, uint8_t *ep_out, uint16_t *mps_in,
    uint16_t *mps_out)
{
	const struct tc_ep *in = NULL, *out = NULL;

	if (dir == XFER_LOOP)
		bulk_pair(di, 0x08, &in, &out);
	else if (dir == XFER_IN)
		bulk_pair(di, 0xff, &in, &out);
	else
		bulk_pair(di, 0xff, &in, &out);
	if (in == NULL && dir == XFER_IN)
		in = ep_find(di, USB_XFER_BULK, true, -1, 0);
	if (out == NULL && dir == XFER_OUT)
		out = ep_find(di, USB_XFER_BULK, false, -1, 0);
	*ep_in = in != NULL ? in->addr & 0x0f : 0;
	*ep_out = out != NULL ? out->addr & 0x0f : 0;
	*mps_in = in != NULL ? in->mps : 512;
	*mps_out = out != NULL ? out->mps : 512;
	if (o->ep_in >= 0)
		*ep_in = (uint8_t)o->ep_in;
	if (o->ep_out >= 0)
		*ep_out = (uint8_t)o->ep_out;
	if ((dir != XFER_OUT && *ep_in == 0) ||
	    (dir != XFER_IN && *ep_out == 0)) {
		printf("FAIL endpoints: the device has no suitable bulk "
		    "endpoint%s (use --ep-in/--ep-out)\n",
		    dir == XFER_LOOP ? " pair" : "");
		return TC_EXIT_FAIL;
	}
	return TC_EXIT_OK;
}

/* ---- list ---------------------------------------------------------------- */

static json_t *
dev_json(const struct usbip_dev *d, const struct usbip_intf *intf,
    bool with_intf)
{
	char e[USBIP_PATH_SIZE * 4], hex[8];
	json_t *o, *a;
	int i;

	o = json_object();
	json_object_set_new(o, "busid", json_string(esc(e, sizeof(e),
	    d->busid)));
	json_object_set_new(o, "path", json_string(esc(e, sizeof(e),
	    d->path)));
	json_object_set_new(o, "busnum", json_integer(d->busnum));
	json_object_set_new(o, "devnum", json_integer(d->devnum));
	json_object_set_new(o, "speed", json_string(speed_str(d->speed)));
	snprintf(hex, sizeof(hex), "%04x", d->idVendor);
	json_object_set_new(o, "vid", json_string(hex));
	snprintf(hex, sizeof(hex), "%04x", d->idProduct);
	json_object_set_new(o, "pid", json_string(hex));
	snprintf(hex, sizeof(hex), "%04x", d->bcdDevice);
	json_object_set_new(o, "bcd_device", json_string(hex));
	json_object_set_new(o, "class", json_integer(d->bDeviceClass));
	json_object_set_new(o, "subclass", json_integer(d->bDeviceSubClass));
	json_object_set_new(o, "protocol", json_integer(d->bDeviceProtocol));
	json_object_set_new(o, "configuration",
	    json_integer(d->bConfigurationValue));
	json_object_set_new(o, "num_configurations",
	    json_integer(d->bNumConfigurations));
	json_object_set_new(o, "num_interfaces",
	    json_integer(d->bNumInterfaces));
	if (with_intf) {
		a = json_array();
		for (i = 0; i < d->bNumInterfaces && i < USBIP_MAX_INTERFACES;
		    i++) {
			json_t *io = json_object();

			json_object_set_new(io, "class",
			    json_integer(intf[i].bInterfaceClass));
			json_object_set_new(io, "subclass",
			    json_integer(intf[i].bInterfaceSubClass));
			json_object_set_new(io, "protocol",
			    json_integer(intf[i].bInterfaceProtocol));
			json_array_append_new(a, io);
		}
		json_object_set_new(o, "interfaces", a);
	}
	return o;
}

static void
json_print(json_t *j)
{
	char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);

	if (s == NULL)
		fatalx("json_dumps failed");
	printf("%s\n", s);
	free(s);
}

static int
cmd_list(struct tc_opts *o)
{
	struct usbip_intf intf[USBIP_MAX_INTERFACES];
	struct usbip_dev d;
	struct op_wait w;
	struct tc *tc;
	char e1[USBIP_BUSID_SIZE * 4], e2[USBIP_PATH_SIZE * 4];
	uint8_t req[USBIP_OP_HDR_LEN];
	json_t *arr = NULL;
	size_t off = 0;
	unsigned n = 0;
	int rc, i;

	tc = tc_new();
	if ((rc = tc_connect(tc, o->hostport, o->timeout_ms)) != TC_EXIT_OK)
		goto out;
	usbip_op_hdr_encode(req, OP_REQ_DEVLIST, ST_OK);
	tc_send_bytes(tc, req, sizeof(req));
	if ((rc = tc_op_reply(tc, &w, OP_REP_DEVLIST, o->timeout_ms)) != 0)
		goto out;
	if (w.op.hdr.status != ST_OK) {
		printf("FAIL devlist: %s (%u)\n", st_str(w.op.hdr.status),
		    w.op.hdr.status);
		rc = refused_code(w.op.hdr.status);
		goto out;
	}
	if (o->json)
		arr = json_array();
	while (usbip_devlist_next(tc->in.p + tc->in.off, (size_t)w.n, &off,
	    &d, intf) == 1) {
		n++;
		if (o->json) {
			json_array_append_new(arr, dev_json(&d, intf, true));
			continue;
		}
		printf("%s: %04x:%04x bcdDevice %04x class %02x/%02x/%02x "
		    "speed %s busnum %u devnum %u config %u/%u\n",
		    esc(e1, sizeof(e1), d.busid), d.idVendor, d.idProduct,
		    d.bcdDevice, d.bDeviceClass, d.bDeviceSubClass,
		    d.bDeviceProtocol, speed_str(d.speed), d.busnum, d.devnum,
		    d.bConfigurationValue, d.bNumConfigurations);
		printf("    path %s\n", esc(e2, sizeof(e2), d.path));
		for (i = 0; i < d.bNumInterfaces; i++)
			printf("    interface %d: %02x/%02x/%02x\n", i,
			    intf[i].bInterfaceClass, intf[i].bInterfaceSubClass,
			    intf[i].bInterfaceProtocol);
	}
	if (n != w.op.ndev) {
		errmsg("devlist: %u records decoded of %u announced", n,
		    w.op.ndev);
		rc = TC_EXIT_PROTO;
		goto out;
	}
	if (o->json)
		json_print(arr);
	else
		printf("RESULT ndev=%u\n", n);
	rc = TC_EXIT_OK;
out:
	json_decref(arr);
	tc_free(tc);
	return rc;
}

/* ---- import, hold -------------------------------------------------------- */

static void
print_import(const struct usbip_dev *d, bool json)
{
	char e[USBIP_PATH_SIZE * 4];
	json_t *j;

	if (json) {
		j = dev_json(d, NULL, false);
		json_object_set_new(j, "status", json_string("ST_OK"));
		json_print(j);
		json_decref(j);
		return;
	}
	printf("ok import %s busnum=%u devnum=%u speed=%s vid=%04x pid=%04x "
	    "bcd=%04x class=%02x/%02x/%02x config=%u/%u interfaces=%u\n",
	    esc(e, sizeof(e), d->busid), d->busnum, d->devnum,
	    speed_str(d->speed), d->idVendor, d->idProduct, d->bcdDevice,
	    d->bDeviceClass, d->bDeviceSubClass, d->bDeviceProtocol,
	    d->bConfigurationValue, d->bNumConfigurations, d->bNumInterfaces);
}

static int
cmd_import(struct tc_opts *o)
{
	struct usbip_dev d;
	struct tc *tc;
	uint32_t status = ST_OK;
	json_t *j;
	int rc;

	tc = tc_new();
	if ((rc = tc_connect(tc, o->hostport, o->timeout_ms)) != TC_EXIT_OK)
		goto out;
	rc = tc_import(tc, o->busid, &d, &status, o->timeout_ms);
	if (rc >= TC_EXIT_REFUSED) {
		if (o->json) {
			j = json_object();
			json_object_set_new(j, "busid", json_string(o->busid));
			json_object_set_new(j, "status",
			    json_string(st_str(status)));
			json_object_set_new(j, "status_code",
			    json_integer(status));
			json_print(j);
			json_decref(j);
		} else {
			printf("refused import %s: %s (%u)\n", o->busid,
			    st_str(status), status);
			printf("RESULT status=%s code=%u\n", st_str(status),
			    status);
		}
		goto out;
	}
	if (rc != TC_EXIT_OK)
		goto out;
	print_import(&d, o->json);
	if (!o->json)
		printf("RESULT status=ST_OK code=0 busnum=%u devnum=%u "
		    "speed=%s vid=%04x pid=%04x\n", d.busnum, d.devnum,
		    speed_str(d.speed), d.idVendor, d.idProduct);
out:
	tc_free(tc);
	return rc;
}

/* Import and keep the device until T seconds pass or the peer closes. */
static int
cmd_hold(struct tc_opts *o)
{
	struct usbip_dev d;
	struct tc_sync s;
	struct tc *tc;
	uint64_t end, next;
	unsigned polls = 0;
	int rc;

	if ((rc = open_import(&tc, o, &d)) != TC_EXIT_OK)
		goto out;
	print_import(&d, false);
	write_ready_file(o->ready_file);
	end = o->seconds > 0 ? start_ns + (uint64_t)(o->seconds * 1e9) : 0;
	for (;;) {
		next = end;
		if (o->poll_ms > 0) {
			uint64_t p = now_ns() + (uint64_t)o->poll_ms * 1000000u;

			if (next == 0 || p < next)
				next = p;
		}
		if (tc_run(tc, cond_closed, NULL, next) == RUN_OK ||
		    tc->close != CLOSE_NONE)
			break;
		if (tc->dead != 0) {
			rc = tc->dead;
			goto out;
		}
		if (end != 0 && now_ns() >= end)
			break;
		rc = tc_control(tc, 0x80, USB_REQ_GET_STATUS, 0, 0, 2, NULL,
		    NULL, &s, o->timeout_ms);
		if (rc != 0 && tc->close == CLOSE_NONE)
			goto out;
		polls++;
	}
	printf("RESULT held_ms=%.1f polls=%u\n", (double)((tc->close !=
	    CLOSE_NONE ? tc->close_ns : now_ns()) - start_ns) / 1e6, polls);
	rc = report_disconnect(tc, o);
out:
	tc_free(tc);
	return rc;
}

/* ---- desc ---------------------------------------------------------------- */

/*
 * Read the descriptors named TYPE:INDEX[:LANGID[:LENGTH]] (numbers in C
 * syntax; LENGTH default 255, at most 4096) one after the other, as a
 * host's driver would, and print each reply in hex.
 */
static int
cmd_desc(struct tc_opts *o)
{
	struct usbip_dev d;
	struct tc_sync s;
	struct tc *tc;
	unsigned long v[4];
	uint8_t buf[4096];
	char hex[2 * sizeof(buf) + 1];
	int i, k, rc;

	if ((rc = open_import(&tc, o, &d)) != TC_EXIT_OK)
		goto out;
	for (i = 0; i < o->nextra; i++) {
		char *p = o->extra[i], *end;

		v[2] = 0;
		v[3] = 255;
		for (k = 0; k < 4; k++) {
			v[k] = strtoul(p, &end, 0);
			if (end == p || (*end != ':' && *end != '\0'))
				break;
			p = end + (*end == ':');
			if (*end == '\0') {
				k++;
				break;
			}
		}
		if (k < 2 || *p != '\0' || v[0] > 255 || v[1] > 255 ||
		    v[2] > 0xffff || v[3] == 0 || v[3] > sizeof(buf)) {
			errmsg("desc: \"%s\": expected TYPE:INDEX[:LANGID[:LENGTH]]",
			    o->extra[i]);
			rc = TC_EXIT_USAGE;
			goto out;
		}
		memset(&s, 0, sizeof(s));
		rc = get_descriptor(tc, (uint8_t)v[0], (uint8_t)v[1],
		    (uint16_t)v[2], buf, (uint16_t)v[3], &s, o->timeout_ms);
		if (!s.done) {
			printf("desc %s: no reply (%s)\n", o->extra[i],
			    tc->close != CLOSE_NONE ? "connection closed" :
			    "timeout");
			rc = rc != 0 ? rc : TC_EXIT_CONN;
			goto out;
		}
		for (k = 0; k < (int)s.actual && k < (int)sizeof(buf); k++)
			snprintf(hex + 2 * k, 3, "%02x", buf[k]);
		hex[2 * k] = '\0';
		printf("desc %s: status=%d len=%u data=%s\n", o->extra[i],
		    s.status, s.actual, hex);
		rc = TC_EXIT_OK;
	}
out:
	tc_free(tc);
	return rc;
}

/* ---- script -------------------------------------------------------------- */

struct script {
	struct tc		*tc;
	struct tc_opts		*o;
	struct tc_devinfo	 di;
	unsigned		 passed;
	unsigned		 failed;
	unsigned		 skipped;
	int			 fatal;		/* connection lost: stop */
	int			 first_rc;
};

static void step(struct script *, int, const char *, const char *, ...)
    __attribute__((format(printf, 4, 5)));

/* Report one step: rc 0 ok, -1 skip, else a failure exit code. */
static void
step(struct script *sc, int rc, const char *name, const char *fmt, ...)
{
	va_list ap;

	if (rc == 0) {
		sc->passed++;
		printf("ok %s", name);
	} else if (rc < 0) {
		sc->skipped++;
		printf("skip %s", name);
	} else {
		sc->failed++;
		if (sc->first_rc == 0)
			sc->first_rc = rc;
		printf("FAIL %s", name);
		if (sc->tc->dead != 0)
			sc->fatal = sc->tc->dead;
	}
	if (fmt != NULL && *fmt != '\0') {
		printf(" ");
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
	}
	printf("\n");
}

static bool
skipped(const struct script *sc, const char *name)
{
	const char *s = sc->o->skip, *p;
	size_t n = strlen(name);

	if (s == NULL)
		return false;
	for (p = s; (p = strstr(p, name)) != NULL; p += n) {
		if ((p == s || p[-1] == ',') && (p[n] == '\0' || p[n] == ','))
			return true;
	}
	return false;
}

/* Map a synchronous request's outcome to a step result. */
static int
sync_rc(struct script *sc, int rc, const struct tc_sync *s)
{
	if (rc != 0)
		return rc;
	(void)sc;
	return s->status == 0 ? 0 : TC_EXIT_FAIL;
}

static void
script_device_desc(struct script *sc)
{
	struct tc_devinfo *di = &sc->di;
	const struct usbip_dev *d = &di->dev;
	const uint8_t *dd = di->ddesc;
	struct tc_sync s;
	int rc;

	rc = get_descriptor(sc->tc, USB_DT_DEVICE, 0, 0, di->ddesc, 18, &s,
	    sc->o->timeout_ms);
	if ((rc = sync_rc(sc, rc, &s)) != 0) {
		step(sc, rc, "desc-device", "status %d", s.status);
		return;
	}
	if (s.actual != 18 || dd[0] != 18 || dd[1] != USB_DT_DEVICE) {
		step(sc, TC_EXIT_FAIL, "desc-device", "%u bytes, bLength %u "
		    "type %u", s.actual, dd[0], dd[1]);
		return;
	}
	if (get_le16(dd + 8) != d->idVendor ||
	    get_le16(dd + 10) != d->idProduct ||
	    get_le16(dd + 12) != d->bcdDevice || dd[4] != d->bDeviceClass ||
	    dd[5] != d->bDeviceSubClass || dd[6] != d->bDeviceProtocol ||
	    dd[17] != d->bNumConfigurations) {
		step(sc, TC_EXIT_FAIL, "desc-device", "differs from the import "
		    "record: %04x:%04x bcd %04x class %02x/%02x/%02x nconf %u",
		    get_le16(dd + 8), get_le16(dd + 10), get_le16(dd + 12),
		    dd[4], dd[5], dd[6], dd[17]);
		return;
	}
	step(sc, 0, "desc-device", "usb=%x.%02x vid=%04x pid=%04x bcd=%04x "
	    "class=%02x/%02x/%02x mps0=%u iManufacturer=%u iProduct=%u "
	    "iSerial=%u nconf=%u rtt_us=%.1f", dd[3], dd[2], get_le16(dd + 8),
	    get_le16(dd + 10), get_le16(dd + 12), dd[4], dd[5], dd[6], dd[7],
	    dd[14], dd[15], dd[16], dd[17], (double)s.rtt_ns / 1e3);
}

static void
script_config_desc(struct script *sc)
{
	struct tc_devinfo *di = &sc->di;
	struct tc_sync s;
	uint8_t head[9];
	const char *why;
	uint16_t total;
	unsigned i;
	char eps[TC_MAX_EPS * 12];
	size_t o = 0;
	int rc;

	rc = get_descriptor(sc->tc, USB_DT_CONFIG, 0, 0, head, 9, &s,
	    sc->o->timeout_ms);
	if ((rc = sync_rc(sc, rc, &s)) != 0 || s.actual != 9 ||
	    head[1] != USB_DT_CONFIG || head[0] < 9) {
		step(sc, rc != 0 ? rc : TC_EXIT_FAIL, "desc-config-head",
		    "status %d, %u bytes", s.status, s.actual);
		return;
	}
	total = get_le16(head + 2);
	step(sc, 0, "desc-config-head", "wTotalLength=%u bNumInterfaces=%u "
	    "bConfigurationValue=%u", total, head[4], head[5]);
	if (total < 9) {
		step(sc, TC_EXIT_FAIL, "desc-config", "wTotalLength %u", total);
		return;
	}
	free(di->config);
	di->config = xmalloc(total);
	rc = get_descriptor(sc->tc, USB_DT_CONFIG, 0, 0, di->config, total, &s,
	    sc->o->timeout_ms);
	di->config_len = s.actual;
	if ((rc = sync_rc(sc, rc, &s)) != 0 || s.actual != total) {
		step(sc, rc != 0 ? rc : TC_EXIT_FAIL, "desc-config",
		    "status %d, %u of %u bytes", s.status, s.actual, total);
		return;
	}
	if (memcmp(di->config, head, 9) != 0) {
		step(sc, TC_EXIT_FAIL, "desc-config", "first 9 bytes differ "
		    "from the short read");
		return;
	}
	if (config_parse(di, &why) == -1) {
		step(sc, TC_EXIT_FAIL, "desc-config", "%s", why);
		return;
	}
	if (di->dev.bConfigurationValue == di->confval &&
	    di->dev.bNumInterfaces != di->nintf) {
		step(sc, TC_EXIT_FAIL, "desc-config", "%u interfaces, import "
		    "record says %u", di->nintf, di->dev.bNumInterfaces);
		return;
	}
	eps[0] = '\0';
	for (i = 0; i < di->neps && o + 12 < sizeof(eps); i++) {
		static const char *const xn[] = { "ctl", "iso", "bulk", "int" };

		o += (size_t)snprintf(eps + o, sizeof(eps) - o, "%s%02x:%s",
		    i ? "," : "", di->eps[i].addr, xn[di->eps[i].xfer]);
	}
	step(sc, 0, "desc-config", "%zu bytes interfaces=%u endpoints=%s",
	    di->config_len, di->nintf, di->neps ? eps : "none");
}

static void
script_strings(struct script *sc)
{
	const uint8_t *dd = sc->di.ddesc;
	static const char *const names[3] = {
		"manufacturer", "product", "serial"
	};
	uint8_t buf[TC_STRDESC_MAX];
	char str[TC_STR_OUT];
	struct tc_sync s;
	uint16_t langid;
	int rc, i;

	if (dd[14] == 0 && dd[15] == 0 && dd[16] == 0) {
		step(sc, -1, "desc-langs", "device has no strings");
		return;
	}
	rc = get_descriptor(sc->tc, USB_DT_STRING, 0, 0, buf, sizeof(buf), &s,
	    sc->o->timeout_ms);
	if ((rc = sync_rc(sc, rc, &s)) != 0 || s.actual < 4 ||
	    buf[1] != USB_DT_STRING || buf[0] != s.actual || (buf[0] & 1)) {
		step(sc, rc != 0 ? rc : TC_EXIT_FAIL, "desc-langs",
		    "status %d, %u bytes", s.status, s.actual);
		return;
	}
	langid = get_le16(buf + 2);
	step(sc, 0, "desc-langs", "langids=%u first=%04x", (buf[0] - 2) / 2,
	    langid);
	for (i = 0; i < 3; i++) {
		char name[32];

		snprintf(name, sizeof(name), "desc-string-%s", names[i]);
		if (dd[14 + i] == 0) {
			step(sc, -1, name, "index 0");
			continue;
		}
		rc = get_descriptor(sc->tc, USB_DT_STRING, dd[14 + i], langid,
		    buf, sizeof(buf), &s, sc->o->timeout_ms);
		if ((rc = sync_rc(sc, rc, &s)) != 0 || s.actual < 2 ||
		    buf[1] != USB_DT_STRING || buf[0] != s.actual ||
		    (buf[0] & 1)) {
			step(sc, rc != 0 ? rc : TC_EXIT_FAIL, name,
			    "index %u: status %d, %u bytes", dd[14 + i],
			    s.status, s.actual);
			if (sc->fatal)
				return;
			continue;
		}
		string_decode(buf + 2, s.actual - 2u, str, sizeof(str));
		step(sc, 0, name, "index=%u \"%s\"", dd[14 + i], str);
	}
}

static void
script_simple_controls(struct script *sc)
{
	struct tc_devinfo *di = &sc->di;
	struct tc_sync s;
	uint8_t st[2];
	unsigned i;
	int rc;

	rc = tc_control(sc->tc, 0x00, USB_REQ_SET_CONFIGURATION, di->confval,
	    0, 0, NULL, NULL, &s, sc->o->timeout_ms);
	step(sc, sync_rc(sc, rc, &s), "set-config", "value=%u status=%d",
	    di->confval, s.status);
	if (sc->fatal)
		return;
	rc = tc_control(sc->tc, 0x80, USB_REQ_GET_STATUS, 0, 0, 2, NULL, st,
	    &s, sc->o->timeout_ms);
	if ((rc = sync_rc(sc, rc, &s)) == 0 && s.actual != 2)
		rc = TC_EXIT_FAIL;
	step(sc, rc, "get-status", "status=%d actual=%u value=%04x", s.status,
	    s.actual, s.actual == 2 ? get_le16(st) : 0);
	if (sc->fatal)
		return;
	if (di->nintf > 0) {
		rc = tc_control(sc->tc, 0x01, USB_REQ_SET_INTERFACE, 0, 0, 0,
		    NULL, NULL, &s, sc->o->timeout_ms);
		step(sc, sync_rc(sc, rc, &s), "set-interface",
		    "interface=0 alt=0 status=%d", s.status);
		if (sc->fatal)
			return;
	}
	for (i = 0; i < di->neps; i++) {
		if (di->eps[i].xfer != USB_XFER_BULK || di->eps[i].alt != 0)
			continue;
		rc = tc_control(sc->tc, 0x02, USB_REQ_CLEAR_FEATURE, 0,
		    di->eps[i].addr, 0, NULL, NULL, &s, sc->o->timeout_ms);
		step(sc, sync_rc(sc, rc, &s), "clear-halt", "ep=%02x status=%d",
		    di->eps[i].addr, s.status);
		if (sc->fatal)
			return;
	}
}

static void
print_rate(const char *prefix, uint64_t bytes, uint64_t urbs, uint64_t ns)
{
	double sec = ns > 0 ? (double)ns / 1e9 : 1e-9;

	printf("%sbytes=%" PRIu64 " urbs=%" PRIu64 " seconds=%.3f "
	    "mb_per_s=%.1f urbs_per_s=%.0f", prefix, bytes, urbs, sec,
	    (double)bytes / sec / 1e6, (double)urbs / sec);
}

static void
script_bulk(struct script *sc, const struct tc_ep *in, const struct tc_ep *out)
{
	struct xfer x;
	uint8_t *pat;
	uint64_t t0;
	int rc;

	pat = pattern_new(sc->o->urb);
	xfer_init(&x, sc->tc, XFER_LOOP, sc->o->urb, sc->o->inflight);
	x.ep_in = in->addr & 0x0f;
	x.ep_out = out->addr & 0x0f;
	x.total = sc->o->bytes;
	x.pat = pat;
	t0 = now_ns();
	rc = xfer_run(&x, 0, sc->o->timeout_ms);
	if (rc == 0 && x.in_rx != x.total) {
		xfer_fail(&x, "received %" PRIu64 " of %" PRIu64 " bytes",
		    x.in_rx, x.total);
		rc = TC_EXIT_FAIL;
	}
	if (rc == 0) {
		printf("ok bulk-loop ep_out=%02x ep_in=%02x urb=%u inflight=%u "
		    "verified ", out->addr, in->addr, x.urb, x.inflight);
		print_rate("", x.in_rx, x.urbs, now_ns() - t0);
		printf(" short_in=%" PRIu64 "\n", x.short_in);
		sc->passed++;
	} else
		step(sc, rc, "bulk-loop", "%s (out %" PRIu64 " back %" PRIu64
		    ")", x.failed ? x.failmsg : "connection lost", x.out_sub,
		    x.in_rx);
	free(pat);
}

/* ---- unlink -------------------------------------------------------------- */

struct unlink_test {
	struct tc_sync	 sub;		/* the URB unlinked */
	bool		 unlink_done;
	int32_t		 unlink_status;
	bool		 target_pending;
	bool		 submit_first;	/* RET_SUBMIT came before RET_UNLINK */
	struct tc_sync	 aux;		/* OUT completing the IN */
};

static void
unlink_done(struct tc *tc, struct tc_req *r, const struct usbip_urb *u)
{
	struct unlink_test *t = r->arg;

	(void)tc;
	t->unlink_done = true;
	t->unlink_status = u->hdr.u.ret_unlink.status;
	t->target_pending = r->target_pending;
	t->submit_first = t->sub.done;
}

static bool
cond_unlink(struct tc *tc, void *arg)
{
	struct unlink_test *t = arg;

	(void)tc;
	return t->unlink_done && (t->unlink_status == ECONNRESET_WIRE ||
	    t->sub.done) && (t->aux.bufsz == 0 || t->aux.done);
}

static bool
cond_never(struct tc *tc, void *arg)
{
	(void)tc;
	(void)arg;
	return false;
}

/*
 * Check the outcome of an unlink, in either legal order:
 *   unlinked:  RET_UNLINK -ECONNRESET and no RET_SUBMIT for the URB;
 *   completed: RET_SUBMIT first, then RET_UNLINK 0.
 * A barrier (GET_STATUS) plus a grace period catch a late RET_SUBMIT.
 */
static int
unlink_verdict(struct script *sc, struct unlink_test *t, uint32_t seq,
    const char **order, char *detail, size_t dsz)
{
	struct tc_sync s;
	int rc;

	*order = "?";
	if (t->unlink_status == ECONNRESET_WIRE) {
		*order = "unlinked";
		if (t->submit_first || !t->target_pending) {
			snprintf(detail, dsz, "RET_UNLINK -ECONNRESET for a URB "
			    "already completed");
			return TC_EXIT_FAIL;
		}
		rc = tc_control(sc->tc, 0x80, USB_REQ_GET_STATUS, 0, 0, 2, NULL,
		    NULL, &s, sc->o->timeout_ms);
		if (rc == 0)
			tc_run(sc->tc, cond_never, NULL,
			    deadline_ms(TC_UNLINK_GRACE_MS));
		if (sc->tc->dead != 0) {
			snprintf(detail, dsz, "connection lost after the "
			    "unlink");
			return sc->tc->dead;
		}
		tc_forget(sc->tc, seq);
		if (rc != 0) {
			snprintf(detail, dsz, "barrier GET_STATUS failed");
			return rc;
		}
		return 0;
	}
	if (t->unlink_status == 0) {
		*order = "completed";
		if (!t->submit_first) {
			snprintf(detail, dsz, "RET_UNLINK 0 while the URB is "
			    "still pending");
			return TC_EXIT_FAIL;
		}
		return 0;
	}
	snprintf(detail, dsz, "RET_UNLINK status %d", t->unlink_status);
	return TC_EXIT_FAIL;
}

static int
unlink_wait(struct script *sc, struct unlink_test *t, char *detail,
    size_t dsz)
{
	enum tc_run_result rr;

	rr = tc_run(sc->tc, cond_unlink, t, deadline_ms(sc->o->timeout_ms));
	if (rr == RUN_DEAD) {
		snprintf(detail, dsz, "connection lost");
		return sc->tc->dead;
	}
	if (rr == RUN_TIMEOUT) {
		snprintf(detail, dsz, "RET_UNLINK %s, RET_SUBMIT %s after "
		    "%d ms", t->unlink_done ? "seen" : "missing",
		    t->sub.done ? "seen" : "missing", sc->o->timeout_ms);
		return TC_EXIT_TIMEOUT;
	}
	return 0;
}

/*
 * Loopback device, FIFO empty: an IN pends until OUT data arrives.
 * pending:   IN, UNLINK(IN)          -> the device unlinks it;
 * completed: IN, OUT, UNLINK(IN)     -> the OUT completes the IN first.
 */
static void
script_unlink_loop(struct script *sc, const struct tc_ep *in,
    const struct tc_ep *out, bool complete_first)
{
	const char *name = complete_first ? "unlink-completed" :
	    "unlink-pending";
	struct unlink_test t;
	struct tc_urb u;
	uint8_t *pat, got[512];
	const char *order = "?";
	char detail[160] = "";
	uint32_t seq, len = sizeof(got);
	size_t at;
	int rc;

	memset(&t, 0, sizeof(t));
	pat = pattern_new(len);
	memset(&u, 0, sizeof(u));
	u.ep = in->addr & 0x0f;
	u.dir = USBIP_DIR_IN;
	u.length = len;
	t.sub.buf = got;
	t.sub.bufsz = len;
	seq = tc_submit(sc->tc, &u, sync_done, &t.sub);
	if (complete_first) {
		u.ep = out->addr & 0x0f;
		u.dir = USBIP_DIR_OUT;
		u.data = pat;
		t.aux.bufsz = 1;	/* wait for it too */
		tc_submit(sc->tc, &u, sync_done, &t.aux);
	}
	tc_unlink(sc->tc, seq, unlink_done, &t);
	if ((rc = unlink_wait(sc, &t, detail, sizeof(detail))) == 0)
		rc = unlink_verdict(sc, &t, seq, &order, detail,
		    sizeof(detail));
	if (rc == 0 && t.submit_first) {
		if (t.sub.status != 0 || t.sub.actual != len)
			snprintf(detail, sizeof(detail), "completed IN: status "
			    "%d, %u bytes", t.sub.status, t.sub.actual);
		else if (mem_mismatch(got, pat, len, &at))
			snprintf(detail, sizeof(detail), "completed IN: data "
			    "differ at byte %zu", at);
		if (detail[0] != '\0')
			rc = TC_EXIT_FAIL;
	}
	if (rc == 0 && complete_first && !t.submit_first) {
		/* Unlinked after all: the OUT's bytes wait in the FIFO. */
		struct tc_sync s;

		memset(&u, 0, sizeof(u));
		u.ep = in->addr & 0x0f;
		u.dir = USBIP_DIR_IN;
		u.length = len;
		memset(&s, 0, sizeof(s));
		rc = tc_sync_urb(sc->tc, &u, &s, sc->o->timeout_ms);
		if (rc == 0 && (s.status != 0 || s.actual != len)) {
			snprintf(detail, sizeof(detail), "FIFO drain: status "
			    "%d, %u bytes", s.status, s.actual);
			rc = TC_EXIT_FAIL;
		}
	}
	if (rc == 0 && complete_first && (!t.aux.done || t.aux.status != 0)) {
		snprintf(detail, sizeof(detail), "OUT status %d",
		    t.aux.status);
		rc = TC_EXIT_FAIL;
	}
	step(sc, rc, name, "order=%s unlink_status=%d%s%s", order,
	    t.unlink_status, detail[0] ? " " : "", detail);
	free(pat);
}

/*
 * Interrupt IN: read one report, waiting at most TC_INT_WAIT_MS (a
 * keyboard nobody types on has nothing to say, and its read pends, as
 * on a real device).  Then unlink a read: the pending one, or a fresh
 * one if a report came; either unlink order is legal.
 */
static void
script_interrupt(struct script *sc, const struct tc_ep *e)
{
	struct unlink_test t;
	struct tc_urb u;
	uint8_t buf[1024];
	char hex[2 * 64 + 1], detail[160] = "";
	const char *order = "?";
	uint32_t len = e->mps > 0 && e->mps <= sizeof(buf) ? e->mps : 8, seq;
	int wait_ms = sc->o->timeout_ms < TC_INT_WAIT_MS ? sc->o->timeout_ms :
	    TC_INT_WAIT_MS;
	enum tc_run_result rr;
	int rc = 0;

	memset(&u, 0, sizeof(u));
	u.ep = e->addr & 0x0f;
	u.dir = USBIP_DIR_IN;
	u.length = len;
	u.interval = e->binterval;
	memset(&t, 0, sizeof(t));
	t.sub.buf = buf;
	t.sub.bufsz = len;
	seq = tc_submit(sc->tc, &u, sync_done, &t.sub);
	rr = tc_run(sc->tc, cond_sync, &t.sub, deadline_ms(wait_ms));
	if (rr == RUN_DEAD) {
		step(sc, sc->tc->dead, "interrupt-in", "connection lost");
		return;
	}
	if (rr == RUN_OK) {
		if (t.sub.status != 0)
			rc = TC_EXIT_FAIL;
		hexdump_line(hex, sizeof(hex), buf, t.sub.actual < 64 ?
		    t.sub.actual : 64);
		step(sc, rc, "interrupt-in", "ep=%02x report=yes status=%d "
		    "actual=%u data=%s rtt_ms=%.1f", e->addr, t.sub.status,
		    t.sub.actual, hex, (double)t.sub.rtt_ns / 1e6);
		if (sc->fatal || skipped(sc, "unlink"))
			return;
		memset(&t, 0, sizeof(t));
		t.sub.buf = buf;
		t.sub.bufsz = len;
		seq = tc_submit(sc->tc, &u, sync_done, &t.sub);
	} else {
		step(sc, 0, "interrupt-in", "ep=%02x report=no pending after "
		    "%d ms", e->addr, wait_ms);
		if (skipped(sc, "unlink")) {
			struct tc_req *r = tc_find(sc->tc, seq, REQ_SUBMIT);

			if (r != NULL)
				r->done = NULL;
			tc_unlink(sc->tc, seq, NULL, NULL);
			return;
		}
	}
	tc_unlink(sc->tc, seq, unlink_done, &t);
	if ((rc = unlink_wait(sc, &t, detail, sizeof(detail))) == 0)
		rc = unlink_verdict(sc, &t, seq, &order, detail,
		    sizeof(detail));
	step(sc, rc, "unlink-interrupt", "order=%s unlink_status=%d%s%s",
	    order, t.unlink_status, detail[0] ? " " : "", detail);
}

/* ---- ISO ----------------------------------------------------------------- */

struct iso_result {
	unsigned	 urbs;
	uint64_t	 bytes_out;
	uint64_t	 bytes_in;
	unsigned	 packets;
	unsigned	 verified;	/* IN bytes checked against OUT */
};

/* Select an alternate setting (ISO endpoints often live in alt 1). */
static int
set_alt(struct tc *tc, uint8_t intf, uint8_t alt, int timeout_ms,
    char *detail, size_t dsz)
{
	struct tc_sync s;
	int rc;

	rc = tc_control(tc, 0x01, USB_REQ_SET_INTERFACE, alt, intf, 0, NULL,
	    NULL, &s, timeout_ms);
	if (rc == 0 && s.status != 0) {
		snprintf(detail, dsz, "SET_INTERFACE %u/%u: status %d", intf,
		    alt, s.status);
		rc = TC_EXIT_FAIL;
	}
	return rc;
}

/*
 * ISO OUT then ISO IN, `iterations` times, `packets` packets of the
 * endpoints' wMaxPacketSize.  Every packet must complete with status 0
 * and the full length.  If the device loops ISO OUT back to ISO IN (the
 * simulator's ISO device does), the IN data must be what went out.
 */
static int
iso_exchange(struct tc *tc, const struct tc_ep *in, const struct tc_ep *out,
    unsigned packets, unsigned iterations, int timeout_ms,
    struct iso_result *res, char *detail, size_t dsz)
{
	struct usbip_iso_desc *desc, *got;
	struct tc_sync s;
	struct tc_urb u;
	uint8_t *pat, *buf, *unpacked;
	uint32_t mps, len, i, it, off;
	uint64_t stream = 0;
	size_t at;
	int rc = 0;

	mps = out != NULL ? out->mps : in->mps;
	if (in != NULL && in->mps < mps)
		mps = in->mps;
	if (mps == 0) {
		snprintf(detail, dsz, "wMaxPacketSize 0");
		return TC_EXIT_FAIL;
	}
	len = mps * packets;
	desc = xcalloc(packets, sizeof(*desc));
	got = xcalloc(packets, sizeof(*got));
	buf = xmalloc(len);
	unpacked = xmalloc(len);
	pat = pattern_new(len);
	for (i = 0; i < packets; i++) {
		desc[i].offset = i * mps;
		desc[i].length = mps;
	}
	memset(res, 0, sizeof(*res));
	for (it = 0; it < iterations && rc == 0; it++) {
		if (out != NULL) {
			memset(&u, 0, sizeof(u));
			u.ep = out->addr & 0x0f;
			u.dir = USBIP_DIR_OUT;
			u.flags = URB_ISO_ASAP;
			u.length = len;
			u.data = pattern_at(pat, stream);
			u.npackets = packets;
			u.iso = desc;
			u.interval = out->binterval;
			memset(&s, 0, sizeof(s));
			s.iso = got;
			s.niso = packets;
			rc = tc_sync_urb(tc, &u, &s, timeout_ms);
			if (rc != 0)
				break;
			res->urbs++;
			if (s.status != 0 || s.error_count != 0 ||
			    s.npackets != (int32_t)packets || s.actual != len) {
				snprintf(detail, dsz, "ISO OUT: status %d "
				    "error_count %d packets %d actual %u/%u",
				    s.status, s.error_count, s.npackets,
				    s.actual, len);
				rc = TC_EXIT_FAIL;
				break;
			}
			for (i = 0; i < packets; i++)
				if (got[i].status != 0 ||
				    got[i].actual_length != mps) {
					snprintf(detail, dsz, "ISO OUT packet "
					    "%u: status %d actual %u", i,
					    got[i].status, got[i].actual_length);
					rc = TC_EXIT_FAIL;
					break;
				}
			res->bytes_out += len;
			res->packets += packets;
		}
		if (rc != 0 || in == NULL)
			continue;
		memset(&u, 0, sizeof(u));
		u.ep = in->addr & 0x0f;
		u.dir = USBIP_DIR_IN;
		u.flags = URB_ISO_ASAP;
		u.length = len;
		u.npackets = packets;
		u.iso = desc;
		u.interval = in->binterval;
		memset(&s, 0, sizeof(s));
		s.buf = buf;
		s.bufsz = len;
		s.iso = got;
		s.niso = packets;
		rc = tc_sync_urb(tc, &u, &s, timeout_ms);
		if (rc != 0)
			break;
		res->urbs++;
		if (s.status != 0 || s.npackets != (int32_t)packets) {
			snprintf(detail, dsz, "ISO IN: status %d packets %d",
			    s.status, s.npackets);
			rc = TC_EXIT_FAIL;
			break;
		}
		/* Data arrive packed; put each packet back at its offset. */
		memset(unpacked, 0, len);
		for (i = 0, off = 0; i < packets; i++) {
			if (got[i].offset != desc[i].offset ||
			    got[i].length != desc[i].length) {
				snprintf(detail, dsz, "ISO IN packet %u: "
				    "offset/length %u/%u, sent %u/%u", i,
				    got[i].offset, got[i].length,
				    desc[i].offset, desc[i].length);
				rc = TC_EXIT_FAIL;
				break;
			}
			memcpy(unpacked + got[i].offset, buf + off,
			    got[i].actual_length);
			off += got[i].actual_length;
		}
		if (rc != 0)
			break;
		res->bytes_in += s.actual;
		res->packets += packets;
		if (out != NULL) {
			if (s.actual != len || s.error_count != 0) {
				snprintf(detail, dsz, "ISO IN: %u of %u bytes, "
				    "error_count %d", s.actual, len,
				    s.error_count);
				rc = TC_EXIT_FAIL;
				break;
			}
			if (mem_mismatch(unpacked, pattern_at(pat, stream), len,
			    &at)) {
				snprintf(detail, dsz, "ISO IN data differ from "
				    "ISO OUT at byte %zu (packet %zu)", at,
				    at / mps);
				rc = TC_EXIT_FAIL;
				break;
			}
			res->verified += len;
		}
		stream += len;
	}
	free(desc);
	free(got);
	free(buf);
	free(unpacked);
	free(pat);
	return rc;
}

static int
iso_find(const struct tc_devinfo *di, const struct tc_ep **in,
    const struct tc_ep **out)
{
	*in = ep_find(di, USB_XFER_ISO, true, -1, -1);
	*out = ep_find(di, USB_XFER_ISO, false, -1, -1);
	if (*in != NULL && *out != NULL &&
	    ((*in)->intf != (*out)->intf || (*in)->alt != (*out)->alt))
		*out = ep_find(di, USB_XFER_ISO, false, (*in)->intf,
		    (*in)->alt);
	return *in != NULL || *out != NULL ? 0 : -1;
}

static void
script_iso(struct script *sc)
{
	const struct tc_ep *in, *out, *e;
	struct iso_result res;
	char detail[200] = "";
	int rc;

	if (iso_find(&sc->di, &in, &out) == -1)
		return;
	e = in != NULL ? in : out;
	if (e->alt != 0) {
		rc = set_alt(sc->tc, e->intf, e->alt, sc->o->timeout_ms,
		    detail, sizeof(detail));
		step(sc, rc, "set-interface", "interface=%u alt=%u%s%s",
		    e->intf, e->alt, detail[0] ? " " : "", detail);
		if (rc != 0)
			return;
	}
	rc = iso_exchange(sc->tc, in, out, sc->o->packets, 4,
	    sc->o->timeout_ms, &res, detail, sizeof(detail));
	step(sc, rc, "iso", "ep_out=%02x ep_in=%02x packets=%u urbs=%u "
	    "out=%" PRIu64 " in=%" PRIu64 " verified=%u%s%s",
	    out != NULL ? out->addr : 0, in != NULL ? in->addr : 0,
	    sc->o->packets, res.urbs, res.bytes_out, res.bytes_in,
	    res.verified, detail[0] ? " " : "", detail);
}

static int
cmd_script(struct tc_opts *o)
{
	struct script sc;
	const struct tc_ep *in = NULL, *out = NULL, *ie;
	int rc;

	memset(&sc, 0, sizeof(sc));
	sc.o = o;
	rc = open_import(&sc.tc, o, &sc.di.dev);
	if (rc != TC_EXIT_OK) {
		tc_free(sc.tc);
		return rc;
	}
	print_import(&sc.di.dev, false);
	sc.passed++;
	write_ready_file(o->ready_file);

	script_device_desc(&sc);
	if (!sc.fatal && sc.failed == 0)
		script_config_desc(&sc);
	if (!sc.fatal && sc.failed == 0)
		script_strings(&sc);
	if (!sc.fatal && sc.di.config != NULL && sc.failed == 0)
		script_simple_controls(&sc);
	if (!sc.fatal && sc.di.config != NULL && sc.failed == 0) {
		if (bulk_pair(&sc.di, 0x08, &in, &out) && in->iclass == 0x08) {
			if (skipped(&sc, "bulk"))
				step(&sc, -1, "bulk-loop", "--skip");
			else
				script_bulk(&sc, in, out);
			if (!sc.fatal && !skipped(&sc, "unlink") &&
			    !skipped(&sc, "unlink-pending"))
				script_unlink_loop(&sc, in, out, false);
			if (!sc.fatal && !skipped(&sc, "unlink") &&
			    !skipped(&sc, "unlink-completed"))
				script_unlink_loop(&sc, in, out, true);
		} else
			step(&sc, -1, "bulk-loop", "no mass-storage bulk pair");
	}
	if (!sc.fatal && sc.di.config != NULL && sc.failed == 0 &&
	    (ie = ep_find(&sc.di, USB_XFER_INT, true, -1, 0)) != NULL) {
		if (skipped(&sc, "interrupt"))
			step(&sc, -1, "interrupt-in", "--skip");
		else
			script_interrupt(&sc, ie);
	}
	if (!sc.fatal && sc.di.config != NULL && sc.failed == 0 &&
	    !skipped(&sc, "iso"))
		script_iso(&sc);

	printf("RESULT steps=%u passed=%u failed=%u skipped=%u\n",
	    sc.passed + sc.failed + sc.skipped, sc.passed, sc.failed,
	    sc.skipped);
	rc = finish_rc(sc.tc, o, sc.first_rc);
	free(sc.di.config);
	tc_free(sc.tc);
	return rc;
}

/* ---- load and latency ---------------------------------------------------- */

static void
load_first(struct xfer *x)
{
	write_ready_file(x->cookie);
}

static int
open_setup(struct tc **tcp, struct tc_opts *o, struct tc_devinfo *di)
{
	const char *what = "";
	char detail[160] = "";
	int rc;

	if ((rc = open_import(tcp, o, &di->dev)) != TC_EXIT_OK)
		return rc;
	rc = setup_device(*tcp, o, di, &what, detail, sizeof(detail));
	if (rc != 0)
		printf("FAIL %s %s\n", what, detail[0] ? detail :
		    "connection lost");
	return rc;
}

static const char *
dir_name(enum xfer_dir d)
{
	return d == XFER_IN ? "in" : d == XFER_OUT ? "out" : "loop";
}

static int
cmd_load(struct tc_opts *o)
{
	struct tc_devinfo di;
	struct xfer x;
	struct tc *tc = NULL;
	uint8_t *pat = NULL, *gz = NULL;
	uint16_t mps_in, mps_out;
	uint64_t t0, elapsed, bytes;
	int rc;

	memset(&di, 0, sizeof(di));
	if ((rc = open_setup(&tc, o, &di)) != TC_EXIT_OK)
		goto out;
	xfer_init(&x, tc, o->dir, o->urb, o->inflight);
	if ((rc = pick_bulk(&di, o, o->dir, &x.ep_in, &x.ep_out, &mps_in,
	    &mps_out)) != 0)
		goto out;
	if (o->dir == XFER_LOOP)
		x.pat = pat = pattern_new(o->urb);
	else
		x.gzero = gz = gzero_pattern_new(o->urb, o->dir == XFER_IN ?
		    mps_in : mps_out);
	/* Verifying a source pattern is opt-in; loop data always is. */
	x.verify = o->dir == XFER_LOOP ? (o->verify_set ? o->verify : true) :
	    (o->verify_set && o->verify);
	x.total = o->bytes;
	x.on_first = load_first;
	x.cookie = o->ready_file;
	printf("load dir=%s ep_in=%u ep_out=%u urb=%u inflight=%u "
	    "seconds=%.1f verify=%s\n", dir_name(o->dir), x.ep_in, x.ep_out,
	    x.urb, x.inflight, o->seconds, x.verify ? "yes" : "no");
	t0 = now_ns();
	rc = xfer_run(&x, o->bytes != 0 ? 0 : t0 + (uint64_t)(o->seconds * 1e9),
	    o->timeout_ms);
	elapsed = (x.t_last > t0 ? x.t_last : now_ns()) - t0;
	bytes = o->dir == XFER_OUT ? x.out_done : x.in_rx;
	if (x.failed)
		printf("FAIL load %s\n", x.failmsg);
	printf("RESULT dir=%s urb=%u inflight=%u ", dir_name(o->dir), x.urb,
	    x.inflight);
	print_rate("", bytes, x.urbs, elapsed);
	printf(" bytes_out=%" PRIu64 " bytes_in=%" PRIu64 " verified=%s\n",
	    x.out_done, x.in_rx, x.verify && !x.failed ? "yes" : "no");
	rc = finish_rc(tc, o, x.failed && rc != TC_EXIT_TIMEOUT ?
	    TC_EXIT_FAIL : rc);
out:
	free(pat);
	free(gz);
	free(di.config);
	tc_free(tc);
	return rc;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static const char *
lat_name(enum lat_kind k)
{
	static const char *const names[] = { "control", "in", "out", "loop" };

	return names[k];
}

/*
 * One URB at a time; each round trip is timed from submit to the parsed
 * reply.  loop times its OUT and IN separately.
 */
static int
cmd_latency(struct tc_opts *o)
{
	struct tc_devinfo di;
	struct tc_sync s;
	struct tc_urb u;
	struct tc *tc = NULL;
	uint64_t *rtt = NULL, sum = 0;
	uint8_t *data = NULL, *buf = NULL;
	uint8_t ep_in = 0, ep_out = 0, setup[8];
	uint16_t mps_in, mps_out;
	unsigned i, n = 0, total, per;
	size_t p99;
	int rc;

	memset(&di, 0, sizeof(di));
	if ((rc = open_setup(&tc, o, &di)) != TC_EXIT_OK)
		goto out;
	if (o->lat_kind != LAT_CONTROL && (rc = pick_bulk(&di, o,
	    o->lat_kind == LAT_IN ? XFER_IN : o->lat_kind == LAT_OUT ?
	    XFER_OUT : XFER_LOOP, &ep_in, &ep_out, &mps_in, &mps_out)) != 0)
		goto out;
	per = o->lat_kind == LAT_LOOP ? 2 : 1;
	total = o->warmup + o->iterations;
	rtt = xcalloc((size_t)o->iterations * per, sizeof(*rtt));
	data = pattern_new(o->size);
	buf = xmalloc(o->size > 0 ? o->size : 1);
	usbip_setup_encode(setup, 0x80, USB_REQ_GET_STATUS, 0, 0, 2);
	for (i = 0; i < total; i++) {
		unsigned k;

		for (k = 0; k < per; k++) {
			memset(&u, 0, sizeof(u));
			memset(&s, 0, sizeof(s));
			s.buf = buf;
			s.bufsz = o->size;
			if (o->lat_kind == LAT_CONTROL) {
				u.dir = USBIP_DIR_IN;
				u.length = 2;
				u.setup = setup;
			} else if (o->lat_kind == LAT_IN ||
			    (o->lat_kind == LAT_LOOP && k == 1)) {
				u.ep = ep_in;
				u.dir = USBIP_DIR_IN;
				u.length = o->size;
			} else {
				u.ep = ep_out;
				u.dir = USBIP_DIR_OUT;
				u.length = o->size;
				u.data = data;
			}
			if ((rc = tc_sync_urb(tc, &u, &s, o->timeout_ms)) != 0)
				goto report;
			if (s.status != 0 || s.actual != u.length) {
				printf("FAIL latency %s URB %u: status %d, %u "
				    "of %u bytes\n", lat_name(o->lat_kind), i,
				    s.status, s.actual, u.length);
				rc = TC_EXIT_FAIL;
				goto report;
			}
			if (o->lat_kind == LAT_LOOP && k == 1 &&
			    memcmp(buf, data, o->size) != 0) {
				printf("FAIL latency loop URB %u: data "
				    "differ\n", i);
				rc = TC_EXIT_FAIL;
				goto report;
			}
			if (i >= o->warmup) {
				rtt[n++] = s.rtt_ns;
				sum += s.rtt_ns;
			}
		}
		if (i == 0)
			write_ready_file(o->ready_file);
	}
report:
	if (n > 0) {
		qsort(rtt, n, sizeof(*rtt), cmp_u64);
		p99 = ((size_t)n * 99 + 99) / 100;
		if (p99 > 0)
			p99--;
		printf("RESULT kind=%s size=%u n=%u min_us=%.1f median_us=%.1f "
		    "p99_us=%.1f max_us=%.1f mean_us=%.1f\n",
		    lat_name(o->lat_kind), o->lat_kind == LAT_CONTROL ? 2 :
		    o->size, n, (double)rtt[0] / 1e3,
		    (double)rtt[n / 2] / 1e3, (double)rtt[p99] / 1e3,
		    (double)rtt[n - 1] / 1e3, (double)sum / n / 1e3);
	}
	rc = finish_rc(tc, o, rc);
out:
	free(rtt);
	free(data);
	free(buf);
	free(di.config);
	tc_free(tc);
	return rc;
}

static int
cmd_iso(struct tc_opts *o)
{
	const struct tc_ep *in, *out, *e;
	struct tc_devinfo di;
	struct iso_result res;
	struct tc *tc = NULL;
	char detail[200] = "";
	int rc;

	memset(&di, 0, sizeof(di));
	if ((rc = open_setup(&tc, o, &di)) != TC_EXIT_OK)
		goto out;
	if (iso_find(&di, &in, &out) == -1) {
		printf("FAIL iso: the device has no ISO endpoint\n");
		rc = TC_EXIT_FAIL;
		goto out;
	}
	e = in != NULL ? in : out;
	if (e->alt != 0 && (rc = set_alt(tc, e->intf, e->alt, o->timeout_ms,
	    detail, sizeof(detail))) != 0) {
		printf("FAIL set-interface %s\n", detail);
		goto out;
	}
	write_ready_file(o->ready_file);
	rc = iso_exchange(tc, in, out, o->packets, o->iterations,
	    o->timeout_ms, &res, detail, sizeof(detail));
	printf("%s iso ep_out=%02x ep_in=%02x packets=%u iterations=%u%s%s\n",
	    rc == 0 ? "ok" : "FAIL", out != NULL ? out->addr : 0,
	    in != NULL ? in->addr : 0, o->packets, o->iterations,
	    detail[0] ? " " : "", detail);
	printf("RESULT urbs=%u packets=%u bytes_out=%" PRIu64 " bytes_in=%"
	    PRIu64 " verified=%u\n", res.urbs, res.packets, res.bytes_out,
	    res.bytes_in, res.verified);
	rc = finish_rc(tc, o, rc);
out:
	free(di.config);
	tc_free(tc);
	return rc;
}

/* ---- raw ----------------------------------------------------------------- */

/*
 * Hex bytes; whitespace, ':' and '_' are ignored; the word DEVID stands
 * for the imported device's devid (4 bytes, big-endian).
 */
static int
hex_parse(const char *s, uint32_t devid, uint8_t **out, size_t *outlen)
{
	/* (DEVID: 5 characters for 4 bytes, more than 2 hex digits' 1) */
	uint8_t *b = xmalloc(strlen(s) + 8);
	size_t n = 0;
	int hi = -1, v;

	for (; *s != '\0'; s++) {
		if (strncmp(s, "DEVID", 5) == 0) {
			if (hi != -1)
				goto bad;
			put_be32(b + n, devid);
			n += 4;
			s += 4;
			continue;
		}
		if (*s == ' ' || *s == '\t' || *s == '\n' || *s == ':' ||
		    *s == '_')
			continue;
		if (*s >= '0' && *s <= '9')
			v = *s - '0';
		else if (*s >= 'a' && *s <= 'f')
			v = *s - 'a' + 10;
		else if (*s >= 'A' && *s <= 'F')
			v = *s - 'A' + 10;
		else
			goto bad;
		if (hi == -1)
			hi = v;
		else {
			b[n++] = (uint8_t)(hi << 4 | v);
			hi = -1;
		}
	}
	if (hi != -1)
		goto bad;
	*out = b;
	*outlen = n;
	return 0;
bad:
	free(b);
	return -1;
}

/*
 * Send arbitrary bytes after an import (or with --op, right after
 * connecting) and report what came back and whether and when the peer
 * closed the connection.
 */
static int
cmd_raw(struct tc_opts *o)
{
	struct usbip_dev d;
	struct tc *tc = NULL;
	uint8_t *b;
	size_t n, sent = 0, shown;
	char hex[2 * TC_RAW_SHOW + 1];
	uint64_t t0;
	unsigned i;
	int rc;

	for (i = 0; i < o->nraw; i++) {
		if (hex_parse(o->raw[i], 0, &b, &n) == -1) {
			errmsg("--hex: not hex: \"%s\"", o->raw[i]);
			return TC_EXIT_USAGE;
		}
		free(b);
	}
	if (o->raw_op) {
		tc = tc_new();
		if ((rc = tc_connect(tc, o->hostport, o->timeout_ms)) != 0)
			goto out;
		start_ns = now_ns();
	} else {
		if ((rc = open_import(&tc, o, &d)) != TC_EXIT_OK)
			goto out;
		print_import(&d, false);
	}
	tc->quiet_close = true;
	tc->urb_phase = false;		/* keep what arrives as raw bytes */
	for (i = 0; i < o->nraw; i++) {
		hex_parse(o->raw[i], tc->devid, &b, &n);
		tc_send_bytes(tc, b, n);
		sent += n;
		free(b);
	}
	t0 = now_ns();
	printf("raw sent=%zu\n", sent);
	tc_run(tc, cond_closed, NULL, deadline_ms(o->wait_ms));
	n = tc->in.len - tc->in.off;
	shown = n < TC_RAW_SHOW ? n : TC_RAW_SHOW;
	hexdump_line(hex, sizeof(hex), tc->in.p + tc->in.off, shown);
	if (n > 0)
		printf("raw received=%zu data=%s%s\n", n, hex,
		    shown < n ? "..." : "");
	if (tc->close != CLOSE_NONE)
		printf("RESULT closed=1 kind=%s close_ms=%.1f received=%zu\n",
		    tc->close == CLOSE_EOF ? "eof" : "reset",
		    (double)(tc->close_ns - t0) / 1e6, n);
	else
		printf("RESULT closed=0 waited_ms=%d received=%zu\n",
		    o->wait_ms, n);
	rc = TC_EXIT_OK;
	if (o->expect_close == 1 && tc->close == CLOSE_NONE) {
		printf("FAIL the peer kept the connection open\n");
		rc = TC_EXIT_FAIL;
	} else if (o->expect_close == 0 && tc->close != CLOSE_NONE) {
		printf("FAIL the peer closed the connection\n");
		rc = TC_EXIT_FAIL;
	}
out:
	tc_free(tc);
	return rc;
}

/* ---- command line -------------------------------------------------------- */

enum {
	OPT_JSON = 256,
	OPT_BYTES,
	OPT_URB,
	OPT_INFLIGHT,
	OPT_SECONDS,
	OPT_DIR,
	OPT_ITERATIONS,
	OPT_WARMUP,
	OPT_KIND,
	OPT_SIZE,
	OPT_PACKETS,
	OPT_EP_IN,
	OPT_EP_OUT,
	OPT_VERIFY,
	OPT_NO_VERIFY,
	OPT_HEX,
	OPT_OP,
	OPT_WAIT,
	OPT_EXPECT_CLOSE,
	OPT_EXPECT_OPEN,
	OPT_EXPECT_DISCONNECT,
	OPT_WITHIN,
	OPT_READY_FILE,
	OPT_SKIP,
	OPT_POLL,
	OPT_TIMEOUT,
	OPT_VERBOSE,
	OPT_HELP,
	OPT_SOURCE,
	OPT_TLS_DIR,
	OPT_TLS_NOCERT,
	OPT_TLS_ANY_SERVER,
	OPT_LAST
};
#define O(x)		(1ull << ((x) - OPT_JSON))
#define O_COMMON	(O(OPT_TIMEOUT) | O(OPT_VERBOSE) | O(OPT_HELP) | \
			 O(OPT_SOURCE) | O(OPT_TLS_DIR) | O(OPT_TLS_NOCERT) | \
			 O(OPT_TLS_ANY_SERVER))
#define O_DISC		(O(OPT_EXPECT_DISCONNECT) | O(OPT_WITHIN) | \
			 O(OPT_READY_FILE))
#define O_EPS		(O(OPT_EP_IN) | O(OPT_EP_OUT))

static const struct option longopts[] = {
	{ "json",		no_argument,		NULL, OPT_JSON },
	{ "bytes",		required_argument,	NULL, OPT_BYTES },
	{ "urb",		required_argument,	NULL, OPT_URB },
	{ "inflight",		required_argument,	NULL, OPT_INFLIGHT },
	{ "seconds",		required_argument,	NULL, OPT_SECONDS },
	{ "dir",		required_argument,	NULL, OPT_DIR },
	{ "iterations",		required_argument,	NULL, OPT_ITERATIONS },
	{ "warmup",		required_argument,	NULL, OPT_WARMUP },
	{ "kind",		required_argument,	NULL, OPT_KIND },
	{ "size",		required_argument,	NULL, OPT_SIZE },
	{ "packets",		required_argument,	NULL, OPT_PACKETS },
	{ "ep-in",		required_argument,	NULL, OPT_EP_IN },
	{ "ep-out",		required_argument,	NULL, OPT_EP_OUT },
	{ "verify",		no_argument,		NULL, OPT_VERIFY },
	{ "no-verify",		no_argument,		NULL, OPT_NO_VERIFY },
	{ "hex",		required_argument,	NULL, OPT_HEX },
	{ "op",			no_argument,		NULL, OPT_OP },
	{ "wait",		required_argument,	NULL, OPT_WAIT },
	{ "expect-close",	no_argument,		NULL, OPT_EXPECT_CLOSE },
	{ "expect-open",	no_argument,		NULL, OPT_EXPECT_OPEN },
	{ "expect-disconnect",	no_argument,		NULL,
	    OPT_EXPECT_DISCONNECT },
	{ "within",		required_argument,	NULL, OPT_WITHIN },
	{ "ready-file",		required_argument,	NULL, OPT_READY_FILE },
	{ "skip",		required_argument,	NULL, OPT_SKIP },
	{ "poll",		required_argument,	NULL, OPT_POLL },
	{ "source",		required_argument,	NULL, OPT_SOURCE },
	{ "tls-dir",		required_argument,	NULL, OPT_TLS_DIR },
	{ "tls-nocert",		no_argument,		NULL, OPT_TLS_NOCERT },
	{ "tls-any-server",	no_argument,		NULL, OPT_TLS_ANY_SERVER },
	{ "timeout",		required_argument,	NULL, OPT_TIMEOUT },
	{ "verbose",		no_argument,		NULL, OPT_VERBOSE },
	{ "help",		no_argument,		NULL, OPT_HELP },
	{ NULL,			0,			NULL, 0 }
};

static const struct tc_cmd cmds[] = {
	{ "list", "HOST[:PORT] [--json]", 1, 1,
	    O_COMMON | O(OPT_JSON), cmd_list,
	    "OP_REQ_DEVLIST: print the exported devices and interfaces" },
	{ "import", "HOST[:PORT] BUSID [--json]", 2, 2,
	    O_COMMON | O(OPT_JSON), cmd_import,
	    "OP_REQ_IMPORT: print the result (exit 0, or 10+status)" },
	{ "hold", "HOST[:PORT] BUSID [--seconds T] [--poll MS] "
	    "[--expect-disconnect [--within MS]] [--ready-file F]", 2, 2,
	    O_COMMON | O_DISC | O(OPT_SECONDS) | O(OPT_POLL), cmd_hold,
	    "import and keep the device (T=0: until the peer closes)" },
	{ "script", "HOST[:PORT] BUSID [--bytes N] [--urb S] [--inflight K] "
	    "[--packets P]\n"
	    "      [--skip bulk,unlink,unlink-pending,unlink-completed,interrupt,iso]",
	    2, 2,
	    O_COMMON | O_DISC | O(OPT_BYTES) | O(OPT_URB) | O(OPT_INFLIGHT) |
	    O(OPT_PACKETS) | O(OPT_SKIP), cmd_script,
	    "descriptors, strings, SET_CONFIGURATION, bulk loopback with "
	    "data check, interrupt IN, unlink in both orders, ISO" },
	{ "load", "HOST[:PORT] BUSID [--dir in|out|loop] [--urb S] "
	    "[--inflight K] [--seconds T | --bytes N] [--[no-]verify]", 2, 2,
	    O_COMMON | O_DISC | O_EPS | O(OPT_DIR) | O(OPT_URB) |
	    O(OPT_INFLIGHT) | O(OPT_SECONDS) | O(OPT_BYTES) | O(OPT_VERIFY) |
	    O(OPT_NO_VERIFY), cmd_load,
	    "keep K bulk URBs of S bytes in flight; print MB/s and URBs/s" },
	{ "latency", "HOST[:PORT] BUSID [--kind control|in|out|loop] "
	    "[--size N] [--iterations N] [--warmup N]", 2, 2,
	    O_COMMON | O_DISC | O_EPS | O(OPT_KIND) | O(OPT_SIZE) |
	    O(OPT_ITERATIONS) | O(OPT_WARMUP), cmd_latency,
	    "one URB at a time; print median and p99 round trip in us" },
	{ "iso", "HOST[:PORT] BUSID [--packets P] [--iterations N]", 2, 2,
	    O_COMMON | O_DISC | O(OPT_PACKETS) | O(OPT_ITERATIONS), cmd_iso,
	    "ISO OUT and IN on the device's ISO endpoints, data checked" },
	{ "desc", "HOST[:PORT] BUSID TYPE:INDEX[:LANGID[:LENGTH]]...", 3, 34,
	    O_COMMON, cmd_desc,
	    "GET_DESCRIPTOR each, in order; print the replies in hex" },
	{ "raw", "HOST[:PORT] [BUSID] --hex HEX... [--op] [--wait MS] "
	    "[--expect-close|--expect-open]", 1, 2,
	    O_COMMON | O(OPT_HEX) | O(OPT_OP) | O(OPT_WAIT) |
	    O(OPT_EXPECT_CLOSE) | O(OPT_EXPECT_OPEN), cmd_raw,
	    "send bytes after the import (--op: instead of it); report the "
	    "peer's answer and close" },
};

static void
usage(FILE *f)
{
	size_t i;

	fprintf(f, "usage: usbip-tc COMMAND ARGS [OPTIONS]\n\ncommands:\n");
	for (i = 0; i < nitems(cmds); i++)
		fprintf(f, "  %s %s\n      %s\n", cmds[i].name, cmds[i].usage,
		    cmds[i].help);
	fprintf(f,
	    "\ncommon options:\n"
	    "  -t, --timeout MS      per-reply timeout (default %d)\n"
	    "  -v, --verbose         trace every URB PDU on stderr\n"
	    "  --source ADDR         connect from this local address\n"
	    "  --tls-dir DIR         USB/IP in TLS with DIR's host.key, host.pem\n"
	    "                        and gateway-ca.pem (a gateway's tls-listen)\n"
	    "  --tls-nocert          TLS without a client certificate (tests)\n"
	    "  --tls-any-server      do not check the gateway's certificate\n"
	    "  --expect-disconnect   the peer is expected to close: print\n"
	    "                        DISCONNECT with the time since SIGUSR1\n"
	    "                        (the marker); exit 0 only if it closed\n"
	    "  --within MS           ... and no later than MS after the marker\n"
	    "  --ready-file F        written once data flows (after import)\n"
	    "SIGUSR2 ends a timed transfer (--seconds) now, as if its time\n"
	    "were up: it drains, prints its figures and exits as it would.\n"
	    "sizes take K, M, G suffixes (binary).  Defaults: --urb 64K "
	    "--inflight 16\n--bytes 64M (script) --seconds 5 --dir loop "
	    "--iterations 1000 --warmup 100\n--size 64 --packets 8 --wait "
	    "2000.\n"
	    "\nexit: 0 ok, 1 check failed, 2 usage, 3 connection error or\n"
	    "unexpected close, 4 malformed reply, 5 timeout, 10+status "
	    "import refused\n(11 ST_NA, 12 ST_DEV_BUSY, 13 ST_DEV_ERR, "
	    "14 ST_NODEV, 15 ST_ERROR).\n"
	    "Output: one line per step (ok/FAIL/skip NAME ...), RESULT "
	    "key=value lines.\n", TC_DEFAULT_TIMEOUT_MS);
}

static int
parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0)
		return -1;
	if (strcmp(end, "K") == 0 || strcmp(end, "KiB") == 0 ||
	    strcmp(end, "k") == 0)
		mul = 1024;
	else if (strcmp(end, "M") == 0 || strcmp(end, "MiB") == 0)
		mul = 1024 * 1024;
	else if (strcmp(end, "G") == 0 || strcmp(end, "GiB") == 0)
		mul = 1024 * 1024 * 1024;
	else if (*end != '\0')
		return -1;
	if (v > max / mul || v * mul < min || v * mul > max)
		return -1;
	*out = v * mul;
	return 0;
}

static int
parse_int_opt(const char *name, const char *s, long long min, long long max,
    long long *out)
{
	const char *errstr;

	if (parse_num(s, min, max, out, &errstr) == -1) {
		errmsg("--%s %s: %s (%lld..%lld)", name, s, errstr, min, max);
		return -1;
	}
	return 0;
}

static int
parse_opts(const struct tc_cmd *cmd, int argc, char **argv, struct tc_opts *o)
{
	uint64_t v;
	long long n;
	char *end;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "t:vh", longopts, NULL)) != -1) {
		if (c == 't')
			c = OPT_TIMEOUT;
		else if (c == 'v')
			c = OPT_VERBOSE;
		else if (c == 'h')
			c = OPT_HELP;
		else if (c < OPT_JSON || c >= OPT_LAST)
			return -1;
		if (!(cmd->opts & O(c))) {
			errmsg("%s: option %s not valid here", cmd->name,
			    argv[optind - 1]);
			return -1;
		}
		switch (c) {
		case OPT_HELP:
			printf("usage: usbip-tc %s %s\n  %s\n", cmd->name,
			    cmd->usage, cmd->help);
			exit(0);
		case OPT_SOURCE:
			tc_source = optarg;
			break;
		case OPT_TLS_DIR:
			tc_tls_dir = optarg;
			break;
		case OPT_TLS_NOCERT:
			tc_tls_nocert = true;
			break;
		case OPT_TLS_ANY_SERVER:
			tc_tls_any_server = true;
			break;
		case OPT_VERBOSE:
			o->verbose++;
			break;
		case OPT_TIMEOUT:
			if (parse_int_opt("timeout", optarg, 1,
			    TC_MAX_TIMEOUT_MS, &n) == -1)
				return -1;
			o->timeout_ms = (int)n;
			break;
		case OPT_JSON:
			o->json = true;
			break;
		case OPT_BYTES:
			if (parse_size(optarg, 1, TC_MAX_BYTES, &v) == -1) {
				errmsg("--bytes %s: not a size", optarg);
				return -1;
			}
			o->bytes = v;
			break;
		case OPT_URB:
			if (parse_size(optarg, 1, USBIP_MAX_TRANSFER,
			    &v) == -1) {
				errmsg("--urb %s: 1..%u bytes", optarg,
				    USBIP_MAX_TRANSFER);
				return -1;
			}
			o->urb = (uint32_t)v;
			break;
		case OPT_SIZE:
			if (parse_size(optarg, 1, USBIP_MAX_TRANSFER,
			    &v) == -1) {
				errmsg("--size %s: 1..%u bytes", optarg,
				    USBIP_MAX_TRANSFER);
				return -1;
			}
			o->size = (uint32_t)v;
			break;
		case OPT_INFLIGHT:
			if (parse_int_opt("inflight", optarg, 1,
			    TC_MAX_INFLIGHT, &n) == -1)
				return -1;
			o->inflight = (unsigned)n;
			break;
		case OPT_SECONDS:
			errno = 0;
			o->seconds = strtod(optarg, &end);
			if (errno != 0 || *end != '\0' || end == optarg ||
			    !(o->seconds >= 0) || o->seconds > TC_MAX_SECONDS) {
				errmsg("--seconds %s: 0..%d", optarg,
				    TC_MAX_SECONDS);
				return -1;
			}
			break;
		case OPT_DIR:
			if (strcmp(optarg, "in") == 0)
				o->dir = XFER_IN;
			else if (strcmp(optarg, "out") == 0)
				o->dir = XFER_OUT;
			else if (strcmp(optarg, "loop") == 0)
				o->dir = XFER_LOOP;
			else {
				errmsg("--dir: in, out or loop");
				return -1;
			}
			break;
		case OPT_KIND:
			if (strcmp(optarg, "control") == 0)
				o->lat_kind = LAT_CONTROL;
			else if (strcmp(optarg, "in") == 0)
				o->lat_kind = LAT_IN;
			else if (strcmp(optarg, "out") == 0)
				o->lat_kind = LAT_OUT;
			else if (strcmp(optarg, "loop") == 0)
				o->lat_kind = LAT_LOOP;
			else {
				errmsg("--kind: control, in, out or loop");
				return -1;
			}
			break;
		case OPT_ITERATIONS:
			if (parse_int_opt("iterations", optarg, 1,
			    TC_MAX_ITERATIONS, &n) == -1)
				return -1;
			o->iterations = (unsigned)n;
			break;
		case OPT_WARMUP:
			if (parse_int_opt("warmup", optarg, 0,
			    TC_MAX_ITERATIONS, &n) == -1)
				return -1;
			o->warmup = (unsigned)n;
			break;
		case OPT_PACKETS:
			if (parse_int_opt("packets", optarg, 1,
			    USBIP_MAX_ISO_PACKETS, &n) == -1)
				return -1;
			o->packets = (unsigned)n;
			break;
		case OPT_EP_IN:
		case OPT_EP_OUT:
			if (parse_int_opt(c == OPT_EP_IN ? "ep-in" : "ep-out",
			    optarg, 1, USBIP_MAX_EP, &n) == -1)
				return -1;
			if (c == OPT_EP_IN)
				o->ep_in = (int)n;
			else
				o->ep_out = (int)n;
			break;
		case OPT_VERIFY:
		case OPT_NO_VERIFY:
			o->verify = c == OPT_VERIFY;
			o->verify_set = true;
			break;
		case OPT_HEX:
			if (o->nraw == TC_MAX_RAW_CHUNKS ||
			    strlen(optarg) > 2 * TC_MAX_RAW) {
				errmsg("--hex: at most %d chunks of %u bytes",
				    TC_MAX_RAW_CHUNKS, TC_MAX_RAW);
				return -1;
			}
			o->raw[o->nraw++] = optarg;
			break;
		case OPT_OP:
			o->raw_op = true;
			break;
		case OPT_WAIT:
			if (parse_int_opt("wait", optarg, 0, TC_MAX_TIMEOUT_MS,
			    &n) == -1)
				return -1;
			o->wait_ms = (int)n;
			break;
		case OPT_EXPECT_CLOSE:
			o->expect_close = 1;
			break;
		case OPT_EXPECT_OPEN:
			o->expect_close = 0;
			break;
		case OPT_EXPECT_DISCONNECT:
			o->expect_disconnect = true;
			break;
		case OPT_WITHIN:
			if (parse_int_opt("within", optarg, 0,
			    TC_MAX_TIMEOUT_MS, &n) == -1)
				return -1;
			o->within_ms = (int)n;
			break;
		case OPT_READY_FILE:
			o->ready_file = optarg;
			break;
		case OPT_SKIP:
			o->skip = optarg;
			break;
		case OPT_POLL:
			if (parse_int_opt("poll", optarg, 1, TC_MAX_TIMEOUT_MS,
			    &n) == -1)
				return -1;
			o->poll_ms = (int)n;
			break;
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < cmd->minargs || argc > cmd->maxargs) {
		fprintf(stderr, "usage: usbip-tc %s %s\n", cmd->name,
		    cmd->usage);
		return -1;
	}
	o->hostport = argv[0];
	o->extra = argv + 2;
	o->nextra = argc > 2 ? argc - 2 : 0;
	if (argc > 1) {
		o->busid = argv[1];
		if (!usbip_busid_valid(o->busid)) {
			errmsg("busid \"%s\": 1..31 of [A-Za-z0-9._:-]",
			    o->busid);
			return -1;
		}
	}
	if (cmd->exec == cmd_raw) {
		if (o->nraw == 0) {
			errmsg("raw: give the bytes with --hex");
			return -1;
		}
		if (!o->raw_op && o->busid == NULL) {
			errmsg("raw: BUSID needed unless --op");
			return -1;
		}
	}
	return 0;
}

int
main(int argc, char **argv)
{
	struct tc_opts o;
	struct sigaction sa;
	const struct tc_cmd *cmd = NULL;
	size_t i;

	log_init("usbip-tc", 1, LOG_LVL_WARN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_RESTART;	/* poll() still wakes with EINTR */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = on_usr2;
	sigaction(SIGUSR2, &sa, NULL);

	if (argc < 2) {
		usage(stderr);
		return TC_EXIT_USAGE;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return TC_EXIT_OK;
	}
	for (i = 0; i < nitems(cmds); i++)
		if (strcmp(argv[1], cmds[i].name) == 0)
			cmd = &cmds[i];
	if (cmd == NULL) {
		errmsg("unknown command \"%s\"", argv[1]);
		usage(stderr);
		return TC_EXIT_USAGE;
	}

	memset(&o, 0, sizeof(o));
	o.timeout_ms = TC_DEFAULT_TIMEOUT_MS;
	o.urb = TC_DEFAULT_URB;
	o.inflight = TC_DEFAULT_INFLIGHT;
	o.seconds = -1;
	o.dir = XFER_LOOP;
	o.iterations = 0;
	o.warmup = 100;
	o.lat_kind = LAT_CONTROL;
	o.size = 64;
	o.packets = 8;
	o.ep_in = o.ep_out = -1;
	o.wait_ms = 2000;
	o.expect_close = -1;
	o.within_ms = -1;
	if (parse_opts(cmd, argc - 1, argv + 1, &o) == -1)
		return TC_EXIT_USAGE;
	verbose = o.verbose;
	if (o.verbose > 0)
		log_setlevel(LOG_LVL_DEBUG);
	if (cmd->exec == cmd_script && o.bytes == 0)
		o.bytes = TC_DEFAULT_BYTES;
	if (o.seconds < 0)
		o.seconds = cmd->exec == cmd_hold ? 0 : 5;
	if (o.iterations == 0)
		o.iterations = cmd->exec == cmd_iso ? 16 : 1000;
	return cmd->exec(&o);
}
