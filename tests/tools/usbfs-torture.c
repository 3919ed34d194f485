/*
 * usbfs-torture: the requests an exporter must intercept or get right,
 * sent from the vhci side through usbfs ioctls (asynchronous URBs, not
 * libusb), against a configfs gadget with a Loopback function
 * (usb_f_ss_lb: what arrives on bulk OUT comes back on bulk IN, one IN
 * transfer per OUT transfer, same length) and optionally a CDC ECM function
 * (usb_f_ecm: a data interface whose alternate setting 0 has no endpoints
 * and 1 has bulk IN/OUT carrying Ethernet frames to and from the gadget's
 * usbN network interface).  Used by tests/e2e scenario 66 in the qemu guest.
 *
 *   usbfs-torture [-t MS] [-a IPV4] [-R] DEVNODE
 *   usbfs-torture -u N [-t MS] DEVNODE
 *   usbfs-torture -I MS [-t MS] DEVNODE
 *   usbfs-torture -C MS [-t MS] DEVNODE
 *
 * -a IPV4    the address of the gadget's ECM network interface (up): an ARP
 *            request sent on bulk OUT must be answered on bulk IN (the
 *            SET_INTERFACE checks; skipped without it)
 * -R         also USBDEVFS_RESET and a SET_FEATURE(PORT_RESET) request
 * -u N       unplug mode: N bulk IN URBs left pending on the loopback, then
 *            wait (-t, default 30 s) until every one is reaped; "ok" when
 *            each came back with an error and no data
 *
 * -I MS      ISO mode: MS packets of 48 kHz stereo audio (QEMU's usb-audio),
 *            then "frames N", the frames the device took
 * -C MS      capture mode: MS milliseconds of packets from the first
 *            isochronous IN endpoint of an alternate setting 1 (a UAC2
 *            gadget's playback to the host), 8 URBs of 8 packets of
 *            wMaxPacketSize in flight; then "packets N", "bytes N" and
 *            "elapsed_ms N" (the caller knows the frame size)
 *
 * Output: one "ok - WHAT" or "not ok - WHAT: REASON" line per check; exit 0
 * when all passed.
 */

#include <sys/ioctl.h>
#include <sys/types.h>

#include <linux/usb/ch9.h>
#include <linux/usbdevice_fs.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include "base/util.h"

#define UT_DESC_MAX		4096
#define UT_MAX_IFACES		32
#define UT_BUF			1024	/* an IN URB's buffer */
#define UT_FLIGHT		64	/* URBs in flight on one endpoint */
#define UT_DEFAULT_TIMEOUT_MS	5000
#define UT_MAX_TIMEOUT_MS	600000
#define UT_MAX_UNPLUG		256
#define UT_UNLINK_ROUNDS	16

struct iface {
	int		present[2];	/* alternate settings 0 and 1 */
	uint8_t		class[2];
	uint8_t		in[2], out[2];	/* bulk endpoint addresses */
	uint8_t		iso_out[2];	/* isochronous OUT endpoint */
	uint16_t	iso_mps[2];	/* its wMaxPacketSize */
	uint8_t		iso_in[2];	/* isochronous IN endpoint */
	uint16_t	iso_in_mps[2];	/* its wMaxPacketSize */
};

static struct iface	ifs[UT_MAX_IFACES];
static int		fd = -1;
static unsigned int	timeout_ms = UT_DEFAULT_TIMEOUT_MS;
static int		nfail;
static int		lb = -1, ecm = -1;	/* interface numbers */
static uint8_t		cfgval;

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr, "usage: usbfs-torture [-t MS] [-a IPV4] [-R] "
	    "DEVNODE\n       usbfs-torture -u N [-t MS] DEVNODE\n"
	    "       usbfs-torture -I MS [-t MS] DEVNODE\n"
	    "       usbfs-torture -C MS [-t MS] DEVNODE\n");
	exit(2);
}

static long long
num_arg(const char *s, long long min, long long max, const char *what)
{
	const char	*errstr;
	long long	 v;

	if (parse_num(s, min, max, &v, &errstr) == -1) {
		fprintf(stderr, "usbfs-torture: %s %s: %s\n", what, s, errstr);
		exit(2);
	}
	return v;
}

static void result(int, const char *, const char *, ...)
    __attribute__((format(printf, 3, 4)));

static void
result(int good, const char *what, const char *fmt, ...)
{
	va_list	ap;

	if (good) {
		printf("ok - %s\n", what);
	} else {
		nfail++;
		printf("not ok - %s: ", what);
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
		printf("\n");
	}
	fflush(stdout);
}

static long
ms_since(const struct timespec *t0)
{
	struct timespec	t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 +
	    (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/*
 * The descriptors usbfs returns on read: the device descriptor, then each
 * configuration.  Only the active configuration's interfaces are taken.
 */
static int
parse_desc(void)
{
	uint8_t	d[UT_DESC_MAX];
	ssize_t	len;
	size_t	off = 0;
	int	cur = -1, alt = 0, in_active = 0, ncfg = 0;
	char	buf[8];
	struct usbdevfs_ctrltransfer ct;

	/* GET_CONFIGURATION: which configuration is active. */
	memset(&ct, 0, sizeof(ct));
	ct.bRequestType = USB_DIR_IN;
	ct.bRequest = USB_REQ_GET_CONFIGURATION;
	ct.wLength = 1;
	ct.timeout = timeout_ms;
	ct.data = buf;
	if (ioctl(fd, USBDEVFS_CONTROL, &ct) != 1)
		return -1;
	cfgval = (uint8_t)buf[0];

	if ((len = read(fd, d, sizeof(d))) <= 0)
		return -1;
	while (off + 2 <= (size_t)len) {
		uint8_t blen = d[off], type = d[off + 1];

		if (blen < 2 || blen > (size_t)len - off)
			return -1;
		if (type == USB_DT_CONFIG && blen >= USB_DT_CONFIG_SIZE) {
			in_active = d[off + 5] == cfgval;
			ncfg++;
			cur = -1;
		} else if (type == USB_DT_INTERFACE && in_active) {
			if (blen < USB_DT_INTERFACE_SIZE)
				return -1;
			cur = d[off + 2];
			alt = d[off + 3];
			if (cur >= UT_MAX_IFACES || alt > 1) {
				cur = -1;
			} else {
				ifs[cur].present[alt] = 1;
				ifs[cur].class[alt] = d[off + 5];
			}
		} else if (type == USB_DT_ENDPOINT && cur >= 0) {
			if (blen < USB_DT_ENDPOINT_SIZE)
				return -1;
			uint8_t addr = d[off + 2], attr = d[off + 3];
			if ((attr & USB_ENDPOINT_XFERTYPE_MASK) ==
			    USB_ENDPOINT_XFER_BULK) {
				if (addr & USB_DIR_IN)
					ifs[cur].in[alt] = addr;
				else
					ifs[cur].out[alt] = addr;
			} else if ((attr & USB_ENDPOINT_XFERTYPE_MASK) ==
			    USB_ENDPOINT_XFER_ISOC && !(addr & USB_DIR_IN)) {
				ifs[cur].iso_out[alt] = addr;
				ifs[cur].iso_mps[alt] = (uint16_t)((d[off + 4] |
				    d[off + 5] << 8) & 0x7ff);
			} else if ((attr & USB_ENDPOINT_XFERTYPE_MASK) ==
			    USB_ENDPOINT_XFER_ISOC && (attr & 0x30) == 0 &&
			    ifs[cur].iso_in[alt] == 0) {
				/* data, not an explicit-feedback endpoint */
				ifs[cur].iso_in[alt] = addr;
				ifs[cur].iso_in_mps[alt] = (uint16_t)((d[off + 4] |
				    d[off + 5] << 8) & 0x7ff);
			}
		}
		off += blen;
	}
	for (int i = 0; i < UT_MAX_IFACES; i++) {
		if (ifs[i].present[0] && ifs[i].class[0] == 0xff &&
		    ifs[i].in[0] && ifs[i].out[0] && lb < 0)
			lb = i;
		if (ifs[i].present[0] && ifs[i].present[1] &&
		    ifs[i].in[0] == 0 && ifs[i].in[1] && ifs[i].out[1] &&
		    ecm < 0)
			ecm = i;
	}
	return 0;
}

static void
fill_pattern(uint8_t *buf, size_t len, unsigned int seed)
{
	uint32_t	x = 0x9e3779b9u ^ (seed * 2654435761u);

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		buf[i] = (uint8_t)x;
	}
}

/* --- asynchronous URBs -------------------------------------------------- */

static struct usbdevfs_urb *
urb_new(uint8_t ep, size_t len, unsigned int flags, uintptr_t tag)
{
	struct usbdevfs_urb	*u = xcalloc(1, sizeof(*u));

	u->type = USBDEVFS_URB_TYPE_BULK;
	u->endpoint = ep;
	u->flags = flags;
	u->buffer = len ? xcalloc(1, len) : NULL;
	u->buffer_length = (int)len;
	u->usercontext = (void *)tag;
	return u;
}

static void
urb_free(struct usbdevfs_urb *u)
{
	if (u != NULL) {
		free(u->buffer);
		free(u);
	}
}

static int
submit(struct usbdevfs_urb *u)
{
	return ioctl(fd, USBDEVFS_SUBMITURB, u);
}

/* The next reaped URB within ms, or NULL (errno ETIMEDOUT or the error). */
static struct usbdevfs_urb *
reap(unsigned int ms)
{
	struct usbdevfs_urb	*u = NULL;
	struct timespec		 t0;
	struct pollfd		 pfd;
	long			 left;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (ioctl(fd, USBDEVFS_REAPURBNDELAY, &u) == 0)
			return u;
		if (errno != EAGAIN)
			return NULL;
		if ((left = (long)ms - ms_since(&t0)) <= 0) {
			errno = ETIMEDOUT;
			return NULL;
		}
		pfd.fd = fd;
		pfd.events = POLLOUT;
		if (poll(&pfd, 1, (int)(left > 100 ? 100 : left)) == -1 &&
		    errno != EINTR)
			return NULL;
	}
}

/*
 * URBs reaped while waiting for another one: kept here until asked for (an
 * IN may come back before the OUT that fed it).
 */
static struct usbdevfs_urb *reaped[UT_MAX_UNPLUG];
static int		    nreaped;

/* Reap until u comes back. */
static int
reap_this(struct usbdevfs_urb *u, unsigned int ms)
{
	struct usbdevfs_urb	*r;

	for (int k = 0; k < nreaped; k++)
		if (reaped[k] == u) {
			reaped[k] = reaped[--nreaped];
			return 0;
		}
	while ((r = reap(ms)) != NULL) {
		if (r == u)
			return 0;
		if (nreaped < UT_MAX_UNPLUG)
			reaped[nreaped++] = r;
	}
	return -1;
}

/* One OUT of len bytes (pattern seed), its echo read back and compared. */
static int
echo(uint8_t out_ep, uint8_t in_ep, size_t len, unsigned int seed,
    char *why, size_t whylen)
{
	struct usbdevfs_urb	*o, *i;
	int			 rc = -1;

	o = urb_new(out_ep, len, 0, 1);
	i = urb_new(in_ep, len < UT_BUF ? UT_BUF : len, 0, 2);
	fill_pattern(o->buffer, len, seed);
	if (submit(i) == -1 || submit(o) == -1) {
		snprintf(why, whylen, "submit: %s", strerror(errno));
		/* an IN already submitted is discarded and reaped */
		ioctl(fd, USBDEVFS_DISCARDURB, i);
		reap_this(i, timeout_ms);
		goto out;
	}
	if (reap_this(o, timeout_ms) == -1 ||
	    reap_this(i, timeout_ms) == -1) {
		snprintf(why, whylen, "reap: %s", strerror(errno));
		ioctl(fd, USBDEVFS_DISCARDURB, i);
		ioctl(fd, USBDEVFS_DISCARDURB, o);
		goto out;	/* leaked: the device is wedged anyway */
	}
	if (o->status != 0 || o->actual_length != (int)len) {
		snprintf(why, whylen, "OUT status %d, %d of %zu bytes",
		    o->status, o->actual_length, len);
	} else if (i->status != 0 || i->actual_length != (int)len) {
		snprintf(why, whylen, "IN status %d, %d bytes, expected %zu",
		    i->status, i->actual_length, len);
	} else if (len && memcmp(o->buffer, i->buffer, len) != 0) {
		snprintf(why, whylen, "IN data differs from OUT");
	} else {
		rc = 0;
	}
	urb_free(o);
	urb_free(i);
	return rc;
out:
	return rc;
}

static int
lb_echo(size_t len, unsigned int seed, char *why, size_t whylen)
{
	return echo(ifs[lb].out[0], ifs[lb].in[0], len, seed, why, whylen);
}

/* Read and drop what the loopback still holds (a short wait each). */
static void
lb_drain(void)
{
	struct usbdevfs_urb	*i;

	for (int n = 0; n < 64; n++) {
		i = urb_new(ifs[lb].in[0], 4096, 0, 9);
		if (submit(i) == -1) {
			urb_free(i);
			return;
		}
		if (reap_this(i, 200) == -1) {
			ioctl(fd, USBDEVFS_DISCARDURB, i);
			reap_this(i, timeout_ms);
			urb_free(i);
			return;
		}
		urb_free(i);
	}
}

static int
claim(int ifnum)
{
	struct usbdevfs_ioctl	dc;
	unsigned int		n = (unsigned int)ifnum;

	if (ioctl(fd, USBDEVFS_CLAIMINTERFACE, &n) == 0)
		return 0;
	if (errno != EBUSY)
		return -1;
	/* a vhci-side driver took it (cdc_ether, say): take it from it */
	memset(&dc, 0, sizeof(dc));
	dc.ifno = ifnum;
	dc.ioctl_code = USBDEVFS_DISCONNECT;
	ioctl(fd, USBDEVFS_IOCTL, &dc);
	return ioctl(fd, USBDEVFS_CLAIMINTERFACE, &n);
}

static int
release(int ifnum)
{
	unsigned int	n = (unsigned int)ifnum;

	return ioctl(fd, USBDEVFS_RELEASEINTERFACE, &n);
}

static int
setintf(int ifnum, int alt)
{
	struct usbdevfs_setinterface	si;

	si.interface = (unsigned int)ifnum;
	si.altsetting = (unsigned int)alt;
	return ioctl(fd, USBDEVFS_SETINTERFACE, &si);
}

static int
control(uint8_t rt, uint8_t req, uint16_t val, uint16_t idx)
{
	struct usbdevfs_ctrltransfer	ct;

	memset(&ct, 0, sizeof(ct));
	ct.bRequestType = rt;
	ct.bRequest = req;
	ct.wValue = val;
	ct.wIndex = idx;
	ct.timeout = timeout_ms;
	return ioctl(fd, USBDEVFS_CONTROL, &ct);
}

static int
connected(void)
{
	struct usbdevfs_connectinfo	ci;

	return ioctl(fd, USBDEVFS_CONNECTINFO, &ci) == 0;
}

/* --- the checks --------------------------------------------------------- */

static void
t_zero_length(void)
{
	struct usbdevfs_urb	*o, *i;
	char			 why[128];

	/* The loopback echoes a zero-length OUT as a zero-length IN. */
	o = urb_new(ifs[lb].out[0], 0, 0, 1);
	i = urb_new(ifs[lb].in[0], UT_BUF, 0, 2);
	if (submit(i) == -1 || submit(o) == -1) {
		result(0, "zero-length OUT and IN", "submit: %s",
		    strerror(errno));
		return;
	}
	if (reap_this(o, timeout_ms) == -1 ||
	    reap_this(i, timeout_ms) == -1) {
		result(0, "zero-length OUT and IN", "reap: %s",
		    strerror(errno));
		return;
	}
	result(o->status == 0 && o->actual_length == 0,
	    "zero-length OUT completes", "status %d, actual %d", o->status,
	    o->actual_length);
	result(i->status == 0 && i->actual_length == 0,
	    "zero-length IN (the echo) completes with 0 bytes",
	    "status %d, actual %d", i->status, i->actual_length);
	urb_free(o);
	urb_free(i);
	result(lb_echo(777, 5, why, sizeof(why)) == 0,
	    "echo after the zero-length packets", "%s", why);
}

static void
t_short(int short_not_ok)
{
	struct usbdevfs_urb	*o, *i;
	const char		*what = short_not_ok ?
	    "short IN with SHORT_NOT_OK: -EREMOTEIO and the 100 bytes" :
	    "short IN (100 of 1024 bytes) completes with 100 bytes";
	char			 why[128];

	o = urb_new(ifs[lb].out[0], 100, 0, 1);
	i = urb_new(ifs[lb].in[0], UT_BUF,
	    short_not_ok ? USBDEVFS_URB_SHORT_NOT_OK : 0, 2);
	fill_pattern(o->buffer, 100, 11);
	if (submit(i) == -1 || submit(o) == -1 ||
	    reap_this(o, timeout_ms) == -1 ||
	    reap_this(i, timeout_ms) == -1) {
		result(0, what, "%s", strerror(errno));
		return;
	}
	if (short_not_ok)
		result(i->status == -EREMOTEIO && i->actual_length == 100 &&
		    memcmp(i->buffer, o->buffer, 100) == 0, what,
		    "status %d (%s), actual %d", i->status,
		    strerror(-i->status), i->actual_length);
	else
		result(i->status == 0 && i->actual_length == 100 &&
		    memcmp(i->buffer, o->buffer, 100) == 0, what,
		    "status %d, actual %d", i->status, i->actual_length);
	urb_free(o);
	urb_free(i);
	result(lb_echo(1000, 12, why, sizeof(why)) == 0,
	    short_not_ok ? "echo after the SHORT_NOT_OK IN" :
	    "echo after the short IN", "%s", why);
}

/* UT_FLIGHT IN URBs pending at once, then UT_FLIGHT OUTs of distinct lengths. */
static void
t_in_flight(void)
{
	struct usbdevfs_urb	*in[UT_FLIGHT], *out[UT_FLIGHT], *r;
	int			 n, got_in = 0, got_out = 0, bad = 0;
	int			 next = 0, early = 0;
	char			 why[160] = "";
	struct timespec		 t0;

	for (n = 0; n < UT_FLIGHT; n++) {
		in[n] = urb_new(ifs[lb].in[0], UT_BUF, 0, (uintptr_t)n);
		if (submit(in[n]) == -1) {
			result(0, "64 bulk IN URBs in flight on one endpoint",
			    "submit #%d: %s", n, strerror(errno));
			for (int k = 0; k < n; k++)
				ioctl(fd, USBDEVFS_DISCARDURB, in[k]);
			for (int k = 0; k < n; k++)
				reap(timeout_ms);
			return;
		}
	}
	/* None may complete before there is data. */
	if ((r = reap(300)) != NULL) {
		early = 1;
		snprintf(why, sizeof(why), "IN #%d completed without data "
		    "(status %d)", (int)(uintptr_t)r->usercontext, r->status);
	}
	for (n = 0; n < UT_FLIGHT; n++) {
		size_t len = 100 + (size_t)n * 7;

		out[n] = urb_new(ifs[lb].out[0], len, 0, 1000 + (uintptr_t)n);
		fill_pattern(out[n]->buffer, len, 100 + (unsigned int)n);
		if (submit(out[n]) == -1) {
			snprintf(why, sizeof(why), "submit OUT #%d: %s", n,
			    strerror(errno));
			bad++;
			urb_free(out[n]);
			out[n] = NULL;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (got_in + got_out < 2 * UT_FLIGHT - bad - early &&
	    ms_since(&t0) < (long)timeout_ms * 2) {
		if ((r = reap(timeout_ms)) == NULL)
			break;
		uintptr_t tag = (uintptr_t)r->usercontext;
		if (tag >= 1000) {
			got_out++;
			if (r->status != 0 && !why[0])
				snprintf(why, sizeof(why), "OUT #%d status %d",
				    (int)(tag - 1000), r->status);
			continue;
		}
		got_in++;
		/* IN URBs complete in submission order, each one echo. */
		int k = (int)tag;
		size_t len = 100 + (size_t)next * 7;
		if (k != next && !why[0])
			snprintf(why, sizeof(why), "IN #%d completed when #%d "
			    "was due", k, next);
		else if ((r->status != 0 || r->actual_length != (int)len ||
		    out[k] == NULL ||
		    memcmp(r->buffer, out[k]->buffer, len) != 0) && !why[0])
			snprintf(why, sizeof(why), "IN #%d: status %d, %d "
			    "bytes (expected %zu and OUT #%d's data)", k,
			    r->status, r->actual_length, len, k);
		next++;
	}
	if (got_in + got_out < 2 * UT_FLIGHT - bad - early && !why[0])
		snprintf(why, sizeof(why), "reaped %d IN and %d OUT of %d "
		    "each: %s", got_in, got_out, UT_FLIGHT, strerror(errno));
	result(!why[0], "64 bulk IN URBs in flight on one endpoint, then 64 "
	    "OUT: every IN gets its echo, in order", "%s", why);
	for (n = 0; n < UT_FLIGHT; n++) {
		urb_free(in[n]);
		urb_free(out[n]);
	}
	if (why[0])
		lb_drain();
	result(lb_echo(1000, 13, why, sizeof(why)) == 0,
	    "echo after the 64 in flight", "%s", why);
}

/* A pending IN discarded: the unlink reaches the exporter, the device stays. */
static void
t_unlink(void)
{
	struct usbdevfs_urb	*i, *o;
	char			 why[160] = "";
	int			 round, cancelled = 0, completed = 0;

	for (round = 0; round < UT_UNLINK_ROUNDS && !why[0]; round++) {
		i = urb_new(ifs[lb].in[0], UT_BUF, 0, 2);
		if (submit(i) == -1) {
			snprintf(why, sizeof(why), "submit: %s",
			    strerror(errno));
			urb_free(i);
			break;
		}
		usleep((useconds_t)(round % 4) * 50000);
		if (ioctl(fd, USBDEVFS_DISCARDURB, i) == -1 && errno != EINVAL)
			snprintf(why, sizeof(why), "discard: %s",
			    strerror(errno));
		if (reap_this(i, timeout_ms) == -1) {
			snprintf(why, sizeof(why), "round %d: the discarded "
			    "IN never came back: %s", round, strerror(errno));
			break;
		}
		if (i->status != -ECONNRESET && i->status != -ENOENT)
			snprintf(why, sizeof(why), "round %d: status %d, "
			    "expected -ECONNRESET", round, i->status);
		urb_free(i);
	}
	result(!why[0], "a pending bulk IN discarded (16 times): each comes "
	    "back -ECONNRESET", "%s", why);
	result(connected(), "the device is still there after the unlinks",
	    "%s", strerror(errno));
	result(lb_echo(1000, 21, why, sizeof(why)) == 0,
	    "echo after the unlinks", "%s", why);

	/* The race: data arrives while the unlink travels. */
	why[0] = '\0';
	for (round = 0; round < UT_UNLINK_ROUNDS && !why[0]; round++) {
		i = urb_new(ifs[lb].in[0], UT_BUF, 0, 2);
		o = urb_new(ifs[lb].out[0], 64, 0, 1);
		fill_pattern(o->buffer, 64, 30 + (unsigned int)round);
		if (submit(i) == -1 || submit(o) == -1) {
			snprintf(why, sizeof(why), "submit: %s",
			    strerror(errno));
			break;
		}
		if (round & 1)
			usleep(1000);
		ioctl(fd, USBDEVFS_DISCARDURB, i);
		if (reap_this(o, timeout_ms) == -1 ||
		    reap_this(i, timeout_ms) == -1) {
			snprintf(why, sizeof(why), "round %d: not every URB "
			    "came back: %s", round, strerror(errno));
			break;
		}
		if (i->status == 0 && i->actual_length == 64 &&
		    memcmp(i->buffer, o->buffer, 64) == 0)
			completed++;
		else if ((i->status == -ECONNRESET || i->status == -ENOENT))
			cancelled++;
		else
			snprintf(why, sizeof(why), "round %d: IN status %d, "
			    "%d bytes", round, i->status, i->actual_length);
		urb_free(i);
		urb_free(o);
		lb_drain();
	}
	result(!why[0], "unlink racing the data (16 times): each IN either "
	    "completes with the data or is cancelled", "%s (completed %d, "
	    "cancelled %d)", why, completed, cancelled);
	printf("# unlink race: %d completed, %d cancelled\n", completed,
	    cancelled);
	result(connected() && lb_echo(1000, 22, why, sizeof(why)) == 0,
	    "echo after the unlink races", "%s", why);
}

/* SET_FEATURE(ENDPOINT_HALT), a stalled transfer, CLEAR_HALT, traffic. */
static void
t_halt(uint8_t ep)
{
	struct usbdevfs_urb	*u;
	unsigned int		 e = ep;
	char			 what[96], why[128];
	int			 st;

	snprintf(what, sizeof(what), "endpoint 0x%02x halted: the next "
	    "transfer gets -EPIPE", ep);
	if (control(USB_RECIP_ENDPOINT, USB_REQ_SET_FEATURE,
	    USB_ENDPOINT_HALT, ep) == -1) {
		result(0, what, "SET_FEATURE(ENDPOINT_HALT): %s",
		    strerror(errno));
		return;
	}
	u = urb_new(ep, (ep & USB_DIR_IN) ? UT_BUF : 64, 0, 3);
	if (submit(u) == -1) {
		st = -errno;
	} else if (reap_this(u, timeout_ms) == -1) {
		ioctl(fd, USBDEVFS_DISCARDURB, u);
		reap_this(u, timeout_ms);
		st = 1;
	} else {
		st = u->status;
	}
	urb_free(u);
	result(st == -EPIPE, what, "status %d", st);
	snprintf(what, sizeof(what), "CLEAR_HALT on 0x%02x, then echo", ep);
	if (ioctl(fd, USBDEVFS_CLEAR_HALT, &e) == -1)
		result(0, what, "CLEAR_HALT: %s", strerror(errno));
	else
		result(lb_echo(1000, 40 + ep, why, sizeof(why)) == 0, what,
		    "%s", why);
	/* CLEAR_HALT on an endpoint that is not halted is harmless too. */
	result(ioctl(fd, USBDEVFS_CLEAR_HALT, &e) == 0 &&
	    lb_echo(500, 41 + ep, why, sizeof(why)) == 0,
	    "CLEAR_HALT on a running endpoint, then echo", "%s",
	    why[0] ? why : strerror(errno));
}

/* SET_INTERFACE with an IN pending on the interface's endpoint. */
static void
t_setintf_pending(void)
{
	struct usbdevfs_urb	*i;
	char			 why[128];
	int			 r;

	i = urb_new(ifs[lb].in[0], UT_BUF, 0, 2);
	if (submit(i) == -1) {
		result(0, "SET_INTERFACE alt 0 with an IN pending", "submit: "
		    "%s", strerror(errno));
		urb_free(i);
		return;
	}
	usleep(100000);
	r = setintf(lb, 0);
	result(r == 0, "SET_INTERFACE (loopback, alt 0) with an IN pending",
	    "%s", strerror(errno));
	if (reap_this(i, timeout_ms) == -1) {
		result(0, "the pending IN comes back", "%s", strerror(errno));
		return;
	}
	result(i->status < 0 && i->actual_length == 0,
	    "the pending IN comes back with an error", "status %d, %d bytes",
	    i->status, i->actual_length);
	urb_free(i);
	result(lb_echo(1000, 50, why, sizeof(why)) == 0,
	    "echo after SET_INTERFACE", "%s", why);
}

/*
 * An ARP request for the gadget's address on the ECM data interface's bulk
 * OUT; the answer is looked for among the frames on bulk IN.
 */
static int
ecm_arp(in_addr_t gadget_ip, unsigned int seed, char *why, size_t whylen)
{
	static const uint8_t mac[6] = { 0x02, 0x66, 0x66, 0x66, 0x66, 0x00 };
	struct usbdevfs_urb	*o, *i;
	struct timespec		 t0;
	uint8_t			*f;
	in_addr_t		 me = htonl(0x0a420000u | (seed & 0xff) | 0x100);
	int			 frames = 0;

	o = urb_new(ifs[ecm].out[1], 42, 0, 1);
	f = o->buffer;
	memset(f, 0xff, 6);			/* broadcast */
	memcpy(f + 6, mac, 6);
	f[11] = (uint8_t)seed;
	f[12] = 0x08; f[13] = 0x06;		/* ARP */
	f[14] = 0; f[15] = 1;			/* Ethernet */
	f[16] = 0x08; f[17] = 0x00;		/* IPv4 */
	f[18] = 6; f[19] = 4;
	f[20] = 0; f[21] = 1;			/* request */
	memcpy(f + 22, f + 6, 6);
	memcpy(f + 28, &me, 4);
	memset(f + 32, 0, 6);
	memcpy(f + 38, &gadget_ip, 4);
	if (submit(o) == -1 || reap_this(o, timeout_ms) == -1) {
		snprintf(why, whylen, "ARP request on 0x%02x: %s",
		    ifs[ecm].out[1], strerror(errno));
		return -1;
	}
	if (o->status != 0) {
		snprintf(why, whylen, "ARP request: status %d", o->status);
		urb_free(o);
		return -1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (ms_since(&t0) < (long)timeout_ms) {
		i = urb_new(ifs[ecm].in[1], 2048, 0, 2);
		if (submit(i) == -1) {
			snprintf(why, whylen, "IN 0x%02x: %s", ifs[ecm].in[1],
			    strerror(errno));
			urb_free(i);
			break;
		}
		if (reap_this(i, 1000) == -1) {
			ioctl(fd, USBDEVFS_DISCARDURB, i);
			reap_this(i, timeout_ms);
			urb_free(i);
			continue;
		}
		f = i->buffer;
		frames++;
		if (i->status == 0 && i->actual_length >= 42 &&
		    f[12] == 0x08 && f[13] == 0x06 && f[21] == 2 &&
		    memcmp(f + 28, &gadget_ip, 4) == 0 &&
		    memcmp(f + 32, (uint8_t *)o->buffer + 6, 6) == 0) {
			urb_free(i);
			urb_free(o);
			return 0;
		}
		urb_free(i);
	}
	snprintf(why, whylen, "no ARP reply from the gadget among %d frames "
	    "in %u ms", frames, timeout_ms);
	urb_free(o);
	return -1;
}

/* ECM data interface: alt 0 (no endpoints) -> 1 -> 0 -> 1 -> 0, traffic each. */
static void
t_setintf_alts(const char *ip)
{
	struct usbdevfs_urb	*u;
	struct in_addr		 a;
	char			 why[160];
	int			 st;

	if (ecm < 0 || ip == NULL || inet_pton(AF_INET, ip, &a) != 1) {
		printf("ok - SET_INTERFACE alt 0 -> 1 -> 0 # SKIP %s\n",
		    ecm < 0 ? "no interface with alternate settings 0 "
		    "(no endpoints) and 1 (bulk)" : "no -a IPV4");
		return;
	}
	if (claim(ecm) == -1) {
		result(0, "claim the ECM data interface", "%s",
		    strerror(errno));
		return;
	}
	for (int round = 0; round < 2; round++) {
		result(setintf(ecm, 1) == 0, round ? "SET_INTERFACE alt 0 -> 1 "
		    "again" : "SET_INTERFACE alt 0 -> 1 (ECM data interface)",
		    "%s", strerror(errno));
		result(ecm_arp(a.s_addr, (unsigned int)round, why,
		    sizeof(why)) == 0, round ? "alt 1 again: the gadget "
		    "answers an ARP request" : "alt 1: the gadget answers an "
		    "ARP request through the bulk pair", "%s", why);
		result(lb_echo(1000, 62, why, sizeof(why)) == 0,
		    "loopback echo while the other interface is in alt 1",
		    "%s", why);
		result(setintf(ecm, 0) == 0, "SET_INTERFACE alt 1 -> 0", "%s",
		    strerror(errno));
		u = urb_new(ifs[ecm].out[1], 42, 0, 7);
		if (submit(u) == 0) {
			reap_this(u, timeout_ms);
			st = u->status;
		} else {
			st = -errno;
		}
		urb_free(u);
		result(st < 0, "alt 0 has no endpoints: a transfer is refused",
		    "status %d", st);
		result(lb_echo(1000, 63, why, sizeof(why)) == 0,
		    "loopback echo after alt 0", "%s", why);
	}
	release(ecm);
}

static void
t_setconfig(void)
{
	unsigned int	c = cfgval;
	char		why[128];
	int		r;

	release(lb);
	/* usbfs refuses while any driver (usb-storage, say) has an interface */
	for (int i = 0; i < UT_MAX_IFACES; i++) {
		struct usbdevfs_ioctl	dc;

		if (!ifs[i].present[0])
			continue;
		memset(&dc, 0, sizeof(dc));
		dc.ifno = i;
		dc.ioctl_code = USBDEVFS_DISCONNECT;
		ioctl(fd, USBDEVFS_IOCTL, &dc);
	}
	r = ioctl(fd, USBDEVFS_SETCONFIGURATION, &c);
	result(r == 0, "SET_CONFIGURATION to the same value", "%s",
	    strerror(errno));
	if (claim(lb) == -1) {
		result(0, "claim the loopback again", "%s", strerror(errno));
		return;
	}
	result(lb_echo(1000, 70, why, sizeof(why)) == 0,
	    "echo after SET_CONFIGURATION", "%s", why);
}

static void
t_reset(void)
{
	char	why[128];
	int	r;

	/*
	 * The class request Windows' USB/IP client sends for a port reset: the
	 * exporter intercepts it (protocol.md 1.9.3).
	 */
	r = control(USB_TYPE_CLASS | USB_RECIP_OTHER, USB_REQ_SET_FEATURE,
	    4 /* USB_PORT_FEAT_RESET */, 0);
	result(r == 0, "SET_FEATURE(PORT_RESET) request answered", "%s",
	    strerror(errno));
	result(lb_echo(1000, 80, why, sizeof(why)) == 0,
	    "echo after SET_FEATURE(PORT_RESET)", "%s", why);

	r = ioctl(fd, USBDEVFS_RESET, NULL);
	result(r == 0, "USBDEVFS_RESET", "%s", strerror(errno));
	/* The reset unbinds usbfs from the interfaces: claim again. */
	release(lb);
	if (claim(lb) == -1) {
		result(0, "claim the loopback after the reset", "%s",
		    strerror(errno));
		return;
	}
	result(lb_echo(1000, 81, why, sizeof(why)) == 0,
	    "echo after USBDEVFS_RESET", "%s", why);
}

/* Unplug mode: n pending INs, each must come back with an error. */
static int
unplug_wait(int n)
{
	struct usbdevfs_urb	*u[UT_MAX_UNPLUG], *r;
	int			 got = 0, errs = 0, data = 0, k;
	struct timespec		 t0;

	for (k = 0; k < n; k++) {
		u[k] = urb_new(ifs[lb].in[0], UT_BUF, 0, (uintptr_t)k);
		if (submit(u[k]) == -1) {
			printf("not ok - submit IN #%d: %s\n", k,
			    strerror(errno));
			return 1;
		}
	}
	printf("pending %d\n", n);
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (got < n && ms_since(&t0) < (long)timeout_ms) {
		if ((r = reap(timeout_ms)) == NULL) {
			if (errno == ENODEV)
				break;	/* gone with URBs unreaped: kernel bug */
			continue;
		}
		got++;
		if (r->status < 0)
			errs++;
		if (r->actual_length > 0)
			data++;
		printf("# IN #%d: status %d, %d bytes\n",
		    (int)(uintptr_t)r->usercontext, r->status,
		    r->actual_length);
		urb_free(r);
	}
	result(got == n && errs == n && data == 0, "unplug: every pending "
	    "IN came back with an error", "%d of %d reaped, %d errors, %d "
	    "with data (%s)", got, n, errs, data, strerror(errno));
	return nfail != 0;
}

/* Submit u as an ISO URB of n packets of pkt bytes on ep (ASAP). */
static int
iso_submit(struct usbdevfs_urb *u, uint8_t ep, int n, unsigned int pkt)
{
	for (int p = 0; p < n; p++) {
		u->iso_frame_desc[p].length = pkt;
		u->iso_frame_desc[p].actual_length = 0;
		u->iso_frame_desc[p].status = 0;
	}
	u->type = USBDEVFS_URB_TYPE_ISO;
	u->endpoint = ep;
	u->flags = USBDEVFS_URB_ISO_ASAP;
	u->buffer_length = (int)(n * pkt);
	u->number_of_packets = n;
	u->status = 0;
	u->usercontext = (void *)1;
	return submit(u);
}

/*
 * ISO mode: ms packets of 48 kHz 16-bit stereo (192 bytes each, one per
 * 1 ms frame: QEMU's usb-audio) on the first interface whose alternate
 * setting 1 has an isochronous OUT endpoint.  No sample is zero, so the
 * frames that arrive can be told from silence.
 */
#define UT_ISO_PKTS	8	/* packets per URB */
#define UT_ISO_URBS	8	/* URBs in flight */
#define UT_ISO_PKT	192

static int
iso_play(long ms)
{
	struct usbdevfs_urb	*u[UT_ISO_URBS], *r;
	size_t			 ulen = sizeof(struct usbdevfs_urb) +
	    UT_ISO_PKTS * sizeof(struct usbdevfs_iso_packet_desc);
	long			 sent = 0, queued = 0, good = 0, bad = 0;
	int			 as = -1, k, inflight = 0;
	char			 what[160];

	for (k = 0; k < UT_MAX_IFACES; k++)
		if (ifs[k].present[1] && ifs[k].iso_out[1] &&
		    ifs[k].iso_mps[1] >= UT_ISO_PKT) {
			as = k;
			break;
		}
	if (as < 0) {
		printf("not ok - ISO OUT: no interface with an isochronous OUT "
		    "endpoint of >= %d bytes in alternate setting 1\n",
		    UT_ISO_PKT);
		return 1;
	}
	if (claim(as) == -1 || setintf(as, 1) == -1) {
		printf("not ok - ISO OUT: claim and SET_INTERFACE %d alt 1: "
		    "%s\n", as, strerror(errno));
		return 1;
	}
	for (k = 0; k < UT_ISO_URBS; k++) {
		u[k] = xcalloc(1, ulen);
		u[k]->buffer = xcalloc(UT_ISO_PKTS, UT_ISO_PKT);
	}
	/*
	 * First a URB of one empty packet: no data stage at all in its
	 * CMD_SUBMIT (transfer_buffer_length 0, one ISO descriptor of 0
	 * bytes), which Linux's usb_submit_urb accepts.  It must come back
	 * from the device (status 0), and the stream below must still play
	 * (an exporter that fell over on it would fail both).
	 */
	if (iso_submit(u[0], ifs[as].iso_out[1], 1, 0) == -1)
		result(0, "ISO OUT: a URB of one empty packet is answered",
		    "submit: %s", strerror(errno));
	else if ((r = reap(timeout_ms)) == NULL)
		result(0, "ISO OUT: a URB of one empty packet is answered",
		    "no answer in %u ms: %s", timeout_ms, strerror(errno));
	else {
		/* by the device: an exporter that fell over makes vhci
		 * give it back with -ESHUTDOWN */
		result(r == u[0] && r->status == 0, "ISO OUT: a URB of one "
		    "empty packet is answered", "%s, status %d",
		    r == u[0] ? "this URB" : "another URB", r->status);
		printf("# iso: the empty packet's URB: status %d, packet "
		    "status %d\n", r->status, r->iso_frame_desc[0].status);
		r->usercontext = NULL;
	}
	snprintf(what, sizeof(what), "ISO OUT: %ld ms of 48 kHz stereo on "
	    "endpoint 0x%02x (interface %d alt 1)", ms, ifs[as].iso_out[1], as);
	for (;;) {
		/* keep UT_ISO_URBS in flight until ms packets are queued */
		for (k = 0; k < UT_ISO_URBS && queued < ms; k++) {
			int16_t	*smp;
			int	 n = 0;

			if (u[k]->usercontext != NULL)
				continue;	/* in flight */
			smp = u[k]->buffer;
			for (int p = 0; p < UT_ISO_PKTS && queued < ms; p++) {
				for (int f = 0; f < 96; f++)
					smp[p * 96 + f] = (int16_t)(1000 +
					    ((queued * 48 + f / 2) % 2000));
				n++;
				queued++;
			}
			if (iso_submit(u[k], ifs[as].iso_out[1], n,
			    UT_ISO_PKT) == -1) {
				printf("not ok - %s: submit: %s\n", what,
				    strerror(errno));
				return 1;
			}
			inflight++;
		}
		if (inflight == 0)
			break;
		if ((r = reap(timeout_ms)) == NULL) {
			printf("not ok - %s: reap: %s (%ld packets sent)\n",
			    what, strerror(errno), sent);
			return 1;
		}
		inflight--;
		for (int p = 0; p < r->number_of_packets; p++) {
			sent++;
			if (r->iso_frame_desc[p].status == 0 &&
			    r->iso_frame_desc[p].actual_length == UT_ISO_PKT)
				good++;
			else
				bad++;
		}
		r->usercontext = NULL;
	}
	setintf(as, 0);
	printf("# iso: %ld packets, %ld good, %ld failed, %ld frames\n", sent,
	    good, bad, good * 48);
	result(sent == ms && bad == 0, what, "%ld packets of %ld sent, %ld "
	    "failed", sent, ms, bad);
	printf("frames %ld\n", good * 48);
	for (k = 0; k < UT_ISO_URBS; k++)
		urb_free(u[k]);
	return nfail != 0;
}

/*
 * ISO unlinks: every URB in flight discarded (newest first) while the
 * stream runs; each must come back, completed (0) or cancelled (-ENOENT,
 * -ECONNRESET), and the endpoint must stream again afterwards.
 */
static void
iso_unlink(struct usbdevfs_urb **u, uint8_t ep, unsigned int mps)
{
	struct usbdevfs_urb	*r;
	int			 k, back = 0, done = 0, cancelled = 0, other = 0;
	int			 again = 0;

	for (k = 0; k < UT_ISO_URBS; k++) {
		if (iso_submit(u[k], ep, UT_ISO_PKTS, mps) == -1) {
			result(0, "ISO IN unlink", "submit: %s",
			    strerror(errno));
			return;
		}
	}
	usleep(2000);
	for (k = UT_ISO_URBS - 1; k >= 0; k--)
		ioctl(fd, USBDEVFS_DISCARDURB, u[k]);
	while (back < UT_ISO_URBS && (r = reap(timeout_ms)) != NULL) {
		back++;
		if (r->status == 0)
			done++;
		else if (r->status == -ENOENT || r->status == -ECONNRESET)
			cancelled++;
		else
			other++;
	}
	/* the stream goes on: one more URB, every packet status 0 */
	if (back == UT_ISO_URBS &&
	    iso_submit(u[0], ep, UT_ISO_PKTS, mps) == 0 &&
	    (r = reap(timeout_ms)) != NULL && r->status == 0) {
		again = 1;
		for (int p = 0; p < r->number_of_packets; p++)
			if (r->iso_frame_desc[p].status != 0)
				again = 0;
	}
	printf("# iso unlink: %d of %d back, %d completed, %d cancelled, "
	    "%d other\n", back, UT_ISO_URBS, done, cancelled, other);
	result(back == UT_ISO_URBS && other == 0 && again, "ISO IN unlink: "
	    "8 URBs discarded in flight all come back (completed or "
	    "cancelled), then the endpoint streams again", "%d of %d back, "
	    "%d with another status, stream again: %s", back, UT_ISO_URBS,
	    other, again ? "yes" : "no");
}

/*
 * Capture mode: ms packets (one per 1 ms frame at full speed, per bInterval
 * at high speed: the device decides what each holds) from the first
 * interface whose alternate setting 1 has an isochronous IN data endpoint.
 * Every packet must come back with status 0; the caller checks the byte
 * count against the sample rate it configured.
 */
static int
iso_capture(long ms)
{
	struct usbdevfs_urb	*u[UT_ISO_URBS], *r;
	size_t			 ulen = sizeof(struct usbdevfs_urb) +
	    UT_ISO_PKTS * sizeof(struct usbdevfs_iso_packet_desc);
	long			 got = 0, queued = 0, bad = 0, bytes = 0;
	int			 as = -1, k, inflight = 0;
	unsigned int		 mps;
	struct timespec		 t0, t1;
	char			 what[160];

	for (k = 0; k < UT_MAX_IFACES; k++)
		if (ifs[k].present[1] && ifs[k].iso_in[1] &&
		    ifs[k].iso_in_mps[1] > 0) {
			as = k;
			break;
		}
	if (as < 0) {
		printf("not ok - ISO IN: no interface with an isochronous IN "
		    "endpoint in alternate setting 1\n");
		return 1;
	}
	mps = ifs[as].iso_in_mps[1];
	if (claim(as) == -1 || setintf(as, 1) == -1) {
		printf("not ok - ISO IN: claim and SET_INTERFACE %d alt 1: "
		    "%s\n", as, strerror(errno));
		return 1;
	}
	for (k = 0; k < UT_ISO_URBS; k++) {
		u[k] = xcalloc(1, ulen);
		u[k]->buffer = xcalloc(UT_ISO_PKTS, mps);
	}
	snprintf(what, sizeof(what), "ISO IN: %ld packets captured from "
	    "endpoint 0x%02x (interface %d alt 1, wMaxPacketSize %u)", ms,
	    ifs[as].iso_in[1], as, mps);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		for (k = 0; k < UT_ISO_URBS && queued < ms; k++) {
			int	 n = 0;

			if (u[k]->usercontext != NULL)
				continue;	/* in flight */
			n = ms - queued < UT_ISO_PKTS ? (int)(ms - queued) :
			    UT_ISO_PKTS;
			queued += n;
			if (iso_submit(u[k], ifs[as].iso_in[1], n, mps) == -1) {
				printf("not ok - %s: submit: %s\n", what,
				    strerror(errno));
				return 1;
			}
			inflight++;
		}
		if (inflight == 0)
			break;
		if ((r = reap(timeout_ms)) == NULL) {
			printf("not ok - %s: reap: %s (%ld packets back)\n",
			    what, strerror(errno), got);
			return 1;
		}
		inflight--;
		for (int p = 0; p < r->number_of_packets; p++) {
			got++;
			if (r->iso_frame_desc[p].status != 0 ||
			    r->iso_frame_desc[p].actual_length > mps)
				bad++;
			else
				bytes += r->iso_frame_desc[p].actual_length;
		}
		r->usercontext = NULL;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("# iso in: %ld packets, %ld failed, %ld bytes\n", got, bad,
	    bytes);
	result(got == ms && bad == 0, what, "%ld packets of %ld back, %ld "
	    "failed", got, ms, bad);
	iso_unlink(u, ifs[as].iso_in[1], mps);
	setintf(as, 0);
	printf("packets %ld\nbytes %ld\nelapsed_ms %lld\n", got, bytes,
	    (long long)(t1.tv_sec - t0.tv_sec) * 1000 +
	    (t1.tv_nsec - t0.tv_nsec) / 1000000);
	for (k = 0; k < UT_ISO_URBS; k++)
		urb_free(u[k]);
	return nfail != 0;
}

int
main(int argc, char **argv)
{
	const char	*ip = NULL;
	int		 ch, reset = 0, unplug = 0;
	long		 iso_ms = 0, cap_ms = 0;
	char		 why[128];

	while ((ch = getopt(argc, argv, "a:C:I:Rt:u:")) != -1) {
		switch (ch) {
		case 'a':
			ip = optarg;
			break;
		case 'C':
			cap_ms = (long)num_arg(optarg, 1, 600000, "capture ms");
			break;
		case 'I':
			iso_ms = (long)num_arg(optarg, 1, 600000, "ISO ms");
			break;
		case 'R':
			reset = 1;
			break;
		case 't':
			timeout_ms = (unsigned int)num_arg(optarg, 1,
			    UT_MAX_TIMEOUT_MS, "timeout ms");
			break;
		case 'u':
			unplug = (int)num_arg(optarg, 1, UT_MAX_UNPLUG,
			    "pending URBs");
			break;
		default:
			usage();
		}
	}
	if (argc - optind != 1)
		usage();
	signal(SIGPIPE, SIG_IGN);
	if ((fd = open(argv[optind], O_RDWR | O_CLOEXEC)) == -1) {
		printf("not ok - open %s: %s\n", argv[optind],
		    strerror(errno));
		return 1;
	}
	if (parse_desc() == -1) {
		printf("not ok - %s: descriptors unreadable\n", argv[optind]);
		return 1;
	}
	if (iso_ms > 0)
		return iso_play(iso_ms);
	if (cap_ms > 0)
		return iso_capture(cap_ms);
	if (lb < 0) {
		printf("not ok - %s: no vendor-specific interface with bulk "
		    "IN and OUT (a Loopback function)\n", argv[optind]);
		return 1;
	}
	printf("# configuration %u, loopback interface %d (IN 0x%02x, OUT "
	    "0x%02x), ECM data interface %d\n", cfgval, lb, ifs[lb].in[0],
	    ifs[lb].out[0], ecm);
	if (claim(lb) == -1) {
		printf("not ok - claim interface %d: %s\n", lb,
		    strerror(errno));
		return 1;
	}
	if (unplug)
		return unplug_wait(unplug);

	lb_drain();
	result(lb_echo(1000, 1, why, sizeof(why)) == 0,
	    "bulk echo of 1000 bytes (baseline)", "%s", why);
	t_zero_length();
	t_short(0);
	t_short(1);
	t_in_flight();
	t_unlink();
	t_halt(ifs[lb].in[0]);
	t_halt(ifs[lb].out[0]);
	t_setintf_pending();
	t_setintf_alts(ip);
	t_setconfig();
	if (reset)
		t_reset();
	result(connected(), "the device is still attached at the end", "%s",
	    strerror(errno));
	release(lb);
	close(fd);
	return nfail != 0;
}
