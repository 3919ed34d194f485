/*
 * usbgw-attach: the vhci host's side of the gateway (issue 15 item 3, its
 * transport-independent core; protocol.md 1.10).
 *
 *   usbgw-attach [-v] [-t SECONDS] [-T -c DIR] [-R ROOT] GATEWAY[:PORT] BUSID
 *
 * Imports BUSID from the gateway (OP_REQ_IMPORT on a connection of its
 * own), then hands the kernel's vhci_hcd one end of a socketpair instead
 * of the network socket (vhci accepts any SOCK_STREAM socket: it only
 * calls kernel_sendmsg/kernel_recvmsg on it), and relays the other end to
 * the gateway until either side ends.  The kernel never sees the network:
 * what the relay's transport is (plaintext TCP now, TLS once issue 15's
 * transport lands) is this program's business alone.
 *
 * The relay moves bytes, it does not parse them: the gateway checks every
 * PDU in both directions (relay.c).  Each direction has one bounded buffer
 * (RELAY_BUF); a side is read only while the buffer towards the other side
 * has room, so a slow side stops the fast one (no unbounded memory).
 *
 * The end, whichever comes first: the gateway closes (revoke, device gone,
 * gateway stopped) -> the vhci port is detached and the program exits 0;
 * vhci closes its end (usbip detach, device reset by the kernel) -> the
 * gateway connection is closed, exit 0; SIGTERM/SIGINT -> detach, exit 0.
 * An import the gateway refuses exits 1 with its status; no vhci_hcd, no
 * free port: exit 3.  Fail closed: nothing here outlives the gateway's
 * connection, so a revoke at the gateway ends the device on this host.
 */
#include <sys/socket.h>
#include <sys/types.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <getopt.h>

#include "config.h"
#include "enrollc.h"
#include "log.h"
#include "tlsclient.h"
#include "tlsid.h"
#include "usbip.h"
#include "util.h"
#include "vhci.h"

#define RELAY_BUF		(256 * 1024)	/* per direction */
#define CONNECT_TIMEOUT_S	10
#define EXIT_REFUSED		1
#define EXIT_USAGE		2
#define EXIT_VHCI		3
#define EXIT_NET		4

struct pipebuf {
	uint8_t		*b;
	size_t		 off, len;	/* unsent bytes: b[off .. off+len) */
	bool		 eof;		/* the source side ended */
};

static volatile sig_atomic_t stop;
static SSL *tls;		/* -T: the gateway connection's TLS */

static void
on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr, "usage: usbgw-attach [-v] [-t seconds] [-T -c dir] "
	    "[-R root] gateway[:port] busid\n"
	    "       usbgw-attach enroll -c dir [--name name] [-t seconds] "
	    "gateway[:port]\n"
	    "       usbgw-attach renew -c dir [--days n | --force] "
	    "gateway[:port]\n");
	exit(EXIT_USAGE);
}

/*
 * usbgw-attach enroll|renew (protocol.md 1.10.8): the host's key and
 * certificate in -c DIR (host.key 0600, host.pem, gateway-ca.pem).
 * Exit 0 paired (renewed, or not due), 1 refused, 2 usage, 4 network.
 */
static int
enroll_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "name", required_argument, NULL, 'n' },
		{ "days", required_argument, NULL, 'd' },
		{ "force", no_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 }
	};
	struct enrollc_opts o;
	struct sigaction sa;
	char name[TLSID_NAME_MAX + 1];
	const char *e = NULL;
	long long v;
	int ch, renew = strcmp(argv[0], "renew") == 0;

	memset(&o, 0, sizeof(o));
	o.role = TLSID_ROLE_HOST;
	o.wait_s = ENROLLC_WAIT_S;
	o.connect_s = CONNECT_TIMEOUT_S;
	o.renew_days = ENROLLC_RENEW_DAYS;
	o.stop = &stop;
	o.out = stdout;
	enrollc_default_name(name, sizeof(name), "host");
	o.name = name;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "c:d:fn:t:", longopts, NULL)) !=
	    -1) {
		switch (ch) {
		case 'c':
			o.dir = optarg;
			break;
		case 'd':
			if (parse_num(optarg, 0, 3650, &v, &e) == -1) {
				fprintf(stderr, "usbgw-attach: --days %s: %s "
				    "(expected 0 to 3650)\n", optarg, e);
				return EXIT_USAGE;
			}
			o.renew_days = (int)v;
			break;
		case 'f':
			o.renew_days = -1;
			break;
		case 'n':
			o.name = optarg;
			break;
		case 't':
			if (parse_num(optarg, 1, 3600, &v, &e) == -1) {
				fprintf(stderr, "usbgw-attach: -t %s: %s "
				    "(expected 1 to 3600 seconds)\n", optarg, e);
				return EXIT_USAGE;
			}
			o.wait_s = (int)v;
			break;
		default:
			usage();
		}
	}
	if (optind != argc - 1 || o.dir == NULL)
		usage();
	o.gateway = argv[optind];
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	return renew ? enrollc_renew(&o) : enrollc_enroll(&o);
}

/*
 * Before an import over TLS: a certificate that expires within
 * ENROLLC_RENEW_DAYS is renewed first (same key, its own session); a
 * failure is only logged (the certificate in hand is still tried).
 */
static void
autorenew(const char *dir, const char *gateway)
{
	struct enrollc_opts o;
	char name[TLSID_NAME_MAX + 1], pem[1024];

	struct tlsid_client *cl;
	int due;

	snprintf(pem, sizeof(pem), "%s/host.pem", dir);
	if (access(pem, F_OK) == -1)
		return;		/* not enrolled: tls_context says so */
	enrollc_default_name(name, sizeof(name), "host");
	if ((cl = tlsid_client_key(dir, name, TLSID_ROLE_HOST, pem,
	    sizeof(pem))) == NULL)
		return;		/* tls_context says why */
	due = tlsid_client_enrolled(cl) && tlsid_expires_within(
	    tlsid_client_cert(cl), (long)ENROLLC_RENEW_DAYS * 86400);
	tlsid_client_free(cl);
	if (!due)
		return;
	log_info("%s: the host certificate expires within %d days: renewing",
	    gateway, ENROLLC_RENEW_DAYS);
	memset(&o, 0, sizeof(o));
	o.name = name;
	o.dir = dir;
	o.gateway = gateway;
	o.role = TLSID_ROLE_HOST;
	o.connect_s = CONNECT_TIMEOUT_S;
	o.renew_days = ENROLLC_RENEW_DAYS;
	o.stop = &stop;
	o.out = stderr;
	if (enrollc_renew(&o) != ENROLLC_OK)
		log_warnx("%s: renewal failed; trying the certificate held",
		    gateway);
}

/* Connect with a deadline; -1 with a message in err. */
static int
dial(const char *hostport, int timeout_s, char *err, size_t errsz)
{
	struct config_addr a;
	struct addrinfo	 hints, *res, *ai;
	const char	*why;
	int		 fd = -1, r, one = 1;

	if (config_parse_addr(hostport, "3240", &a, &why) == -1) {
		snprintf(err, errsz, "%s: expected host[:port] (%s)", hostport,
		    why);
		return -1;
	}
	if (a.host[0] == '\0') {
		snprintf(err, errsz, "%s: expected host[:port] (no host)",
		    hostport);
		return -1;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	if ((r = getaddrinfo(a.host, a.port, &hints, &res)) != 0) {
		snprintf(err, errsz, "%s: %s", hostport, gai_strerror(r));
		return -1;
	}
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		struct pollfd	 p;
		socklen_t	 sl = sizeof(r);

		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC |
		    SOCK_NONBLOCK, ai->ai_protocol);
		if (fd == -1)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == -1 &&
		    errno != EINPROGRESS)
			goto next;
		p.fd = fd;
		p.events = POLLOUT;
		if (poll(&p, 1, timeout_s * 1000) != 1) {
			errno = ETIMEDOUT;
			goto next;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &r, &sl) == -1 ||
		    r != 0) {
			errno = r;
			goto next;
		}
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
		    sizeof(one));
		(void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one,
		    sizeof(one));
		freeaddrinfo(res);
		return fd;
next:
		snprintf(err, errsz, "%s: connect: %s", hostport,
		    strerror(errno));
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return -1;
}

/* Read exactly n bytes before the deadline (nonblocking fd). */
static int
read_full(int fd, uint8_t *buf, size_t n, time_t deadline)
{
	size_t		 got = 0;
	ssize_t		 r;
	struct pollfd	 p = { .fd = fd, .events = POLLIN };

	while (got < n) {
		time_t now = time(NULL);

		if (now >= deadline) {
			errno = ETIMEDOUT;
			return -1;
		}
		if (poll(&p, 1, (int)(deadline - now) * 1000) == -1) {
			if (errno == EINTR && !stop)
				continue;
			return -1;
		}
		r = read(fd, buf + got, n - got);
		if (r == 0) {
			errno = ECONNRESET;
			return -1;
		}
		if (r == -1) {
			if (errno == EAGAIN || (errno == EINTR && !stop))
				continue;
			return -1;
		}
		got += (size_t)r;
	}
	return 0;
}

static int
write_full(int fd, const uint8_t *buf, size_t n)
{
	size_t		 done = 0;
	ssize_t		 r;
	struct pollfd	 p = { .fd = fd, .events = POLLOUT };

	while (done < n) {
		r = write(fd, buf + done, n - done);
		if (r == -1) {
			if (errno == EAGAIN) {
				if (poll(&p, 1, CONNECT_TIMEOUT_S * 1000) != 1)
					return -1;
				continue;
			}
			if (errno == EINTR && !stop)
				continue;
			return -1;
		}
		done += (size_t)r;
	}
	return 0;
}

/* The op phase's I/O: TLS (-T) or plain. */
static int
io_write(int fd, const uint8_t *buf, size_t n, char *err, size_t errsz)
{
	char why[256];

	if (tls != NULL) {
		if (tlsclient_write(tls, fd, buf, n, CONNECT_TIMEOUT_S * 1000,
		    why, sizeof(why)) == -1) {
			snprintf(err, errsz, "sending the import: %s", why);
			return -1;
		}
		return 0;
	}
	if (write_full(fd, buf, n) == -1) {
		snprintf(err, errsz, "sending the import: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static int
io_read(int fd, uint8_t *buf, size_t n, time_t deadline, char *err,
    size_t errsz)
{
	char why[256];
	time_t now = time(NULL);

	if (tls != NULL) {
		if (now >= deadline || tlsclient_read(tls, fd, buf, n,
		    (int)(deadline - now) * 1000, why, sizeof(why)) == -1) {
			snprintf(err, errsz, "reading the import reply: %s",
			    now >= deadline ? "timed out" : why);
			return -1;
		}
		return 0;
	}
	if (read_full(fd, buf, n, deadline) == -1) {
		snprintf(err, errsz, "reading the import reply: %s",
		    strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * The host's TLS context from dir (-c): its key, certificate and the
 * gateway's CA.  NULL with the reason (naming the file) in err.
 */
static SSL_CTX *
tls_context(const char *dir, char *err, size_t errsz)
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
static int
import(int fd, const char *busid, struct usbip_dev *dev, char *err,
    size_t errsz)
{
	uint8_t		 req[USBIP_IMPORT_REQ_LEN], rep[USBIP_IMPORT_REP_LEN];
	struct usbip_op	 op;
	const char	*why = NULL;
	time_t		 deadline = time(NULL) + CONNECT_TIMEOUT_S * 3;
	int		 r;

	usbip_import_req_encode(req, busid);
	if (io_write(fd, req, sizeof(req), err, errsz) == -1)
		return -1;
	if (io_read(fd, rep, USBIP_OP_HDR_LEN, deadline, err, errsz) == -1)
		return -1;
	r = usbip_op_decode(rep, USBIP_OP_HDR_LEN, USBIP_FROM_SERVER, &op, &why);
	if (r == USBIP_NEED_MORE) {
		if (io_read(fd, rep + USBIP_OP_HDR_LEN,
		    sizeof(rep) - USBIP_OP_HDR_LEN, deadline, err, errsz) == -1)
			return -1;
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
	while (!stop) {
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

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "tls", no_argument, NULL, 'T' },
		{ NULL, 0, NULL, 0 }
	};
	struct vhci	*v;
	struct vhci_params vp;
	struct usbip_dev dev;
	SSL_CTX		*ctx = NULL;
	const char	*tls_dir = NULL, *root = NULL;
	char		 plat[1024], bus[1024];
	struct sigaction sa;
	char		 err[512];
	const char	*why;
	unsigned int	 port;
	int		 ch, gw, sv[2], r, timeout_s = CONNECT_TIMEOUT_S;
	int		 verbose = 0, use_tls = 0;

	if (argc >= 2 && (strcmp(argv[1], "enroll") == 0 ||
	    strcmp(argv[1], "renew") == 0))
		return enroll_main(argc - 1, argv + 1);
	while ((ch = getopt_long(argc, argv, "c:R:t:Tv", longopts, NULL)) !=
	    -1) {
		switch (ch) {
		case 'c':
			tls_dir = optarg;
			break;
		case 'R':
			root = optarg;
			break;
		case 'T':
			use_tls = 1;
			break;
		case 't': {
			const char *e = NULL;
			long long t;

			if (parse_num(optarg, 1, 600, &t, &e) == -1) {
				fprintf(stderr, "usbgw-attach: -t %s: %s "
				    "(expected 1 to 600 seconds)\n", optarg, e);
				return EXIT_USAGE;
			}
			timeout_s = (int)t;
			break;
		}
		case 'v':
			verbose++;
			break;
		default:
			usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (argc != 2)
		usage();
	if (strlen(argv[1]) == 0 || strlen(argv[1]) >= USBIP_BUSID_SIZE) {
		fprintf(stderr, "usbgw-attach: busid \"%s\": expected 1 to %d "
		    "characters\n", argv[1], USBIP_BUSID_SIZE - 1);
		return EXIT_USAGE;
	}
	if (use_tls != (tls_dir != NULL)) {
		fprintf(stderr, "usbgw-attach: %s\n", use_tls ? "-T needs -c "
		    "DIR (the host's key, certificate and gateway-ca.pem)" :
		    "-c DIR is for -T");
		return EXIT_USAGE;
	}
	log_init("usbgw-attach", 1, verbose ? LOG_LVL_DEBUG : LOG_LVL_INFO);
	/* due for renewal: renew first, then the identity */
	if (use_tls)
		autorenew(tls_dir, argv[0]);
	/* the identity first: a bad file is a usage error, before vhci */
	if (use_tls && (ctx = tls_context(tls_dir, err, sizeof(err))) == NULL) {
		log_warnx("%s", err);
		return EXIT_USAGE;
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);

	memset(&vp, 0, sizeof(vp));
	vp.eagain_tries = -1;
	if (root != NULL) {
		/* -R: another sysfs root (tests: tests/tools/vhci-kernel) */
		snprintf(plat, sizeof(plat), "%s/sys/devices/platform", root);
		snprintf(bus, sizeof(bus), "%s/sys/bus/usb", root);
		vp.platform_dir = plat;
		vp.usb_bus_dir = bus;
	}
	if ((v = vhci_open(&vp)) == NULL) {
		log_warnx("vhci_hcd: %s (modprobe vhci-hcd)", strerror(errno));
		SSL_CTX_free(ctx);
		return EXIT_VHCI;
	}
	if ((gw = dial(argv[0], timeout_s, err, sizeof(err))) == -1) {
		log_warnx("%s", err);
		SSL_CTX_free(ctx);
		vhci_free(v);
		return EXIT_NET;
	}
	if (ctx != NULL) {
		tls = tlsclient_connect(ctx, gw, timeout_s * 1000, err,
		    sizeof(err));
		SSL_CTX_free(ctx);
		if (tls == NULL) {
			log_warnx("%s: TLS: %s", argv[0], err);
			close(gw);
			vhci_free(v);
			return EXIT_NET;
		}
		log_debug("%s: TLS 1.3 with %s", argv[0],
		    SSL_get_cipher_name(tls));
	}
	r = import(gw, argv[1], &dev, err, sizeof(err));
	if (r != 0) {
		if (r > 0)
			log_warnx("%s: the gateway refused the import of %s "
			    "(status %d)", argv[0], argv[1], r);
		else
			log_warnx("%s: %s", argv[0], err);
		SSL_free(tls);
		close(gw);
		vhci_free(v);
		return r > 0 ? EXIT_REFUSED : EXIT_NET;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == -1) {
		log_warn("socketpair");
		SSL_free(tls);
		close(gw);
		vhci_free(v);
		return EXIT_VHCI;
	}
	if (vhci_attach(v, sv[0], dev.devnum | dev.busnum << 16, dev.speed,
	    &port) == -1) {
		log_warnx("vhci attach of %s (speed %u): %s", argv[1],
		    dev.speed, strerror(errno));
		close(sv[0]);
		close(sv[1]);
		SSL_free(tls);
		close(gw);
		vhci_free(v);
		return EXIT_VHCI;
	}
	close(sv[0]);		/* the kernel holds its own reference */
	(void)fcntl(sv[1], F_SETFL, fcntl(sv[1], F_GETFL) | O_NONBLOCK);
	log_info("%s from %s on vhci port %u (%04x:%04x, speed %u)", argv[1],
	    argv[0], port, dev.idVendor, dev.idProduct, dev.speed);

	if (tls != NULL) {
		why = tlsclient_relay(tls, gw, sv[1], &stop, err, sizeof(err));
		if (err[0] != '\0')
			log_warnx("%s: TLS: %s", argv[0], err);
		SSL_free(tls);
	} else
		why = relay(gw, sv[1]);
	log_info("%s: %s; detaching vhci port %u", argv[1], why, port);
	close(gw);
	close(sv[1]);
	/* vhci sees the socket close and frees the port itself; detach in
	 * case it had not yet (EINVAL/ENOENT then: already free). */
	if (vhci_detach(v, port) == -1 && errno != EINVAL && errno != ENOENT)
		log_warn("vhci detach port %u", port);
	vhci_free(v);
	return 0;
}
