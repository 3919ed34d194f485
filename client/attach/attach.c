/*
 * usbgw-attach: the vhci host's side of the gateway (issue 15 item 3, its
 * transport-independent core; protocol.md 1.10).
 *
 *   usbgw-attach [-v] [-t SECONDS] [-T -c DIR] [-R ROOT] GATEWAY[:PORT] BUSID
 *   usbgw-attach --follow [-v] [-t SECONDS] [-T -c DIR] [-R ROOT]
 *       GATEWAY[:PORT] [GATEWAY[:PORT]...]
 *
 * Single-shot mode (this file):
 * Imports BUSID from the gateway (OP_REQ_IMPORT on a connection of its
 * own), then hands the kernel's vhci_hcd one end of a socketpair instead
 * of the network socket (vhci accepts any SOCK_STREAM socket: it only
 * calls kernel_sendmsg/kernel_recvmsg on it), and relays the other end to
 * the gateway until either side ends.  The kernel never sees the network:
 * what the relay's transport is (plaintext TCP, or TLS with -T) is this
 * program's business alone.  The connection, the import and the relay are
 * conn.c's, shared with follow mode (follow.c), which attaches whatever
 * the gateway says is authorized for this host and follows its changes.
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

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <getopt.h>

#include "attach.h"
#include "tls/enrollc.h"
#include "base/log.h"
#include "tls/tlsid.h"
#include "proto/usbip.h"
#include "base/util.h"
#include "host/vhci.h"
#include "base/version.h"

#define CONNECT_TIMEOUT_S	10
#define FOLLOW_MAX_GATEWAYS	8

static void
on_signal(int sig)
{
	(void)sig;
	att_stop = 1;
}

static void __attribute__((noreturn))
usage_to(FILE *f, int code)
{
	fprintf(f, "usage: usbgw-attach [-vV] [-t seconds] [-T -c dir] "
	    "[-R root] gateway[:port] busid\n"
	    "       usbgw-attach --follow [-v] [-t seconds] [-T -c dir "
	    "[--renew-check seconds]] [-R root] gateway[:port] ...\n"
	    "       usbgw-attach enroll -c dir [--name name] [-t seconds] "
	    "gateway[:port]\n"
	    "       usbgw-attach renew -c dir [--days n | --force] "
	    "gateway[:port]\n");
	exit(code);
}

static void __attribute__((noreturn))
usage(void)
{
	usage_to(stderr, ATT_EXIT_USAGE);
}

/*
 * usbgw-attach enroll|renew (protocol.md 1.10.10): the host's key and
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
	o.stop = &att_stop;
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
				return ATT_EXIT_USAGE;
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
				return ATT_EXIT_USAGE;
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
 * Before importing over TLS (once, or at the start of follow mode): a
 * certificate that ends within ENROLLC_RENEW_DAYS is renewed first (same
 * key, a session of its own); a failure is only logged (the certificate
 * in hand is still tried).
 */
static int
autorenew(const char *dir, const char *gateway)
{
	struct enrollc_opts o;
	char name[TLSID_NAME_MAX + 1], pem[1024];
	struct tlsid_client *cl;
	int due;

	snprintf(pem, sizeof(pem), "%s/host.pem", dir);
	if (access(pem, F_OK) == -1)
		return 0;	/* not enrolled: att_tls_context says so */
	enrollc_default_name(name, sizeof(name), "host");
	if ((cl = tlsid_client_key(dir, name, TLSID_ROLE_HOST, pem,
	    sizeof(pem))) == NULL)
		return 0;	/* att_tls_context says why */
	due = tlsid_client_enrolled(cl) && tlsid_expires_within(
	    tlsid_client_cert(cl), (long)ENROLLC_RENEW_DAYS * 86400);
	tlsid_client_free(cl);
	if (!due)
		return 0;
	log_info("%s: the host certificate expires within %d days: renewing",
	    gateway, ENROLLC_RENEW_DAYS);
	memset(&o, 0, sizeof(o));
	o.name = name;
	o.dir = dir;
	o.gateway = gateway;
	o.role = TLSID_ROLE_HOST;
	o.connect_s = CONNECT_TIMEOUT_S;
	o.renew_days = ENROLLC_RENEW_DAYS;
	o.stop = &att_stop;
	o.out = stderr;
	if (enrollc_renew(&o) != ENROLLC_OK) {
		log_warnx("%s: renewal failed; trying the certificate held",
		    gateway);
		return 0;
	}
	return 1;
}

/* follow mode's renewal check: a new context if renewed, else NULL. */
struct renew_arg {
	const char	*dir, *gateway;
};

static SSL_CTX *
follow_renew_cb(void *arg)
{
	struct renew_arg *ra = arg;
	SSL_CTX *ctx;
	char err[512];

	if (autorenew(ra->dir, ra->gateway) != 1)
		return NULL;
	if ((ctx = att_tls_context(ra->dir, err, sizeof(err))) == NULL)
		log_warnx("follow: the renewed certificate: %s (the old one "
		    "stays in use)", err);
	return ctx;
}

/*
 * The single-shot mode: import busid, hand vhci a socketpair end, relay
 * until either side ends.  The exit status.
 */
static int
attach_once(struct vhci *v, SSL_CTX *ctx, const char *gateway,
    const char *busid, int timeout_s)
{
	struct att_conn	 c;
	struct usbip_dev dev;
	char		 err[512];
	const char	*why;
	unsigned int	 port;
	int		 sv[2], r;

	if (att_connect(&c, gateway, ctx, timeout_s, err, sizeof(err)) == -1) {
		log_warnx("%s", err);
		return ATT_EXIT_NET;
	}
	r = att_import(&c, busid, &dev, timeout_s, err, sizeof(err));
	if (r != 0) {
		if (r > 0)
			log_warnx("%s: the gateway refused the import of %s "
			    "(status %d)", gateway, busid, r);
		else
			log_warnx("%s: %s", gateway, err);
		att_close(&c);
		return r > 0 ? ATT_EXIT_REFUSED : ATT_EXIT_NET;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == -1) {
		log_warn("socketpair");
		att_close(&c);
		return ATT_EXIT_VHCI;
	}
	if (vhci_attach(v, sv[0], dev.devnum | dev.busnum << 16, dev.speed,
	    &port) == -1) {
		log_warnx("vhci attach of %s (speed %u): %s", busid,
		    dev.speed, strerror(errno));
		close(sv[0]);
		close(sv[1]);
		att_close(&c);
		return ATT_EXIT_VHCI;
	}
	close(sv[0]);		/* the kernel holds its own reference */
	(void)fcntl(sv[1], F_SETFL, fcntl(sv[1], F_GETFL) | O_NONBLOCK);
	log_info("%s from %s on vhci port %u (%04x:%04x, speed %u)", busid,
	    gateway, port, dev.idVendor, dev.idProduct, dev.speed);
	why = att_relay(&c, sv[1], err, sizeof(err));
	if (err[0] != '\0')
		log_warnx("%s: TLS: %s", gateway, err);
	log_info("%s: %s; detaching vhci port %u", busid, why, port);
	att_close(&c);
	close(sv[1]);
	/* vhci sees the socket close and frees the port itself; detach in
	 * case it had not yet (EINVAL/ENOENT then: already free). */
	if (vhci_detach(v, port) == -1 && errno != EINVAL && errno != ENOENT)
		log_warn("vhci detach port %u", port);
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "tls", no_argument, NULL, 'T' },
		{ "follow", no_argument, NULL, 'F' },
		{ "renew-check", required_argument, NULL, 'K' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	struct follow_renew frn = { follow_renew_cb, NULL, 12 * 3600 };
	struct renew_arg ra;
	struct vhci	*v;
	struct vhci_params vp;
	SSL_CTX		*ctx = NULL;
	const char	*tls_dir = NULL, *root = NULL;
	char		 plat[1024], bus[1024];
	struct sigaction sa;
	char		 err[512];
	int		 ch, i, rc, timeout_s = CONNECT_TIMEOUT_S;
	int		 verbose = 0, use_tls = 0, follow = 0;

	if (argc >= 2 && (strcmp(argv[1], "enroll") == 0 ||
	    strcmp(argv[1], "renew") == 0))
		return enroll_main(argc - 1, argv + 1);
	while ((ch = getopt_long(argc, argv, "c:FR:t:TvV", longopts, NULL)) !=
	    -1) {
		switch (ch) {
		case 'c':
			tls_dir = optarg;
			break;
		case 'F':
			follow = 1;
			break;
		case 'K': {
			const char *e = NULL;
			long long t;

			if (parse_num(optarg, 1, 7 * 86400, &t, &e) == -1) {
				fprintf(stderr, "usbgw-attach: --renew-check "
				    "%s: %s (expected 1 to 604800 seconds)\n",
				    optarg, e);
				return ATT_EXIT_USAGE;
			}
			frn.check_s = (unsigned)t;
			break;
		}
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
				return ATT_EXIT_USAGE;
			}
			timeout_s = (int)t;
			break;
		}
		case 'v':
			verbose++;
			break;
		case 'V':
			printf("usbgw-attach %s\n", USBGW_VERSION);
			return 0;
		case 'h':
			usage_to(stdout, 0);
		default:
			usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (follow ? argc < 1 || argc > FOLLOW_MAX_GATEWAYS : argc != 2)
		usage();
	if (!follow && (strlen(argv[1]) == 0 ||
	    strlen(argv[1]) >= USBIP_BUSID_SIZE)) {
		fprintf(stderr, "usbgw-attach: busid \"%s\": expected 1 to %d "
		    "characters\n", argv[1], USBIP_BUSID_SIZE - 1);
		return ATT_EXIT_USAGE;
	}
	if (use_tls != (tls_dir != NULL)) {
		fprintf(stderr, "usbgw-attach: %s\n", use_tls ? "-T needs -c "
		    "DIR (the host's key, certificate and gateway-ca.pem)" :
		    "-c DIR is for -T");
		return ATT_EXIT_USAGE;
	}
	for (i = 0; follow && i < argc; i++)
		if (att_check_gateway(argv[i], err, sizeof(err)) == -1) {
			fprintf(stderr, "usbgw-attach: %s\n", err);
			return ATT_EXIT_USAGE;
		}
	log_init("usbgw-attach", 1, verbose ? LOG_LVL_DEBUG : LOG_LVL_INFO);
	/* due for renewal: renew first (with the first gateway) */
	if (use_tls)
		autorenew(tls_dir, argv[0]);
	/* the identity first: a bad file is a usage error, before vhci */
	if (use_tls && (ctx = att_tls_context(tls_dir, err,
	    sizeof(err))) == NULL) {
		log_warnx("%s", err);
		return ATT_EXIT_USAGE;
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
		return ATT_EXIT_VHCI;
	}
	ra.dir = tls_dir;
	ra.gateway = argv[0];
	frn.arg = &ra;
	if (follow)
		rc = follow_run(v, ctx, argv, argc, timeout_s, &frn);
	else
		rc = attach_once(v, ctx, argv[0], argv[1], timeout_s);
	SSL_CTX_free(ctx);
	vhci_free(v);
	return rc;
}
