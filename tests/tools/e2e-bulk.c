/*
 * e2e-bulk: move data through a loopback gadget (usb_f_ss_lb's Loopback
 * function: what arrives on its bulk OUT endpoint comes back on bulk IN)
 * through usbfs, and check every byte.  Used by tests/e2e inside the qemu
 * guest on the vhci side, where the device's node is /dev/bus/usb/BBB/DDD.
 *
 *   e2e-bulk [-m MIB] [-c KIB] [-i INTERFACE] [-t MS] DEVNODE
 *
 * Each chunk is written whole, then read back whole and compared.  The
 * gadget echoes what its queued OUT requests received (qlen x bulk_buflen,
 * 32 x 4 KiB by default), so a chunk must not exceed that: the write would
 * wait for room the gadget never makes.
 *
 * Output: one line, "ok BYTES bytes in SECONDS s, RATE MB/s" (MB = 2^20
 * bytes); on a mismatch the offset and both bytes.  Exit 0 or 1.
 */

#include <sys/ioctl.h>
#include <sys/types.h>

#include <linux/usb/ch9.h>
#include <linux/usbdevice_fs.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/util.h"

#define EB_DESC_MAX		4096	/* device + configuration descriptors */
#define EB_DEFAULT_MIB		8
#define EB_MAX_MIB		4096
#define EB_DEFAULT_CHUNK_KIB	64
#define EB_MAX_CHUNK_KIB	1024
#define EB_DEFAULT_TIMEOUT_MS	5000
#define EB_MAX_TIMEOUT_MS	600000
#define EB_MAX_INTERFACE	255

struct bulk_eps {
	unsigned int	in;	/* endpoint addresses, 0 if not found */
	unsigned int	out;
};

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr, "usage: e2e-bulk [-m MIB] [-c KIB] [-i INTERFACE] "
	    "[-t MS] /dev/bus/usb/BBB/DDD\n");
	exit(1);
}

static long long
num_arg(const char *s, long long min, long long max, const char *what)
{
	const char	*errstr;
	long long	 v;

	if (parse_num(s, min, max, &v, &errstr) == -1) {
		fprintf(stderr, "e2e-bulk: %s %s: %s\n", what, s, errstr);
		exit(1);
	}
	return v;
}

/*
 * Walk the descriptors usbfs returns on read (device descriptor, then every
 * configuration with its interfaces and endpoints) and take the first bulk IN
 * and bulk OUT endpoint of alternate setting 0 of interface ifnum.  Every
 * descriptor's bLength is checked against what is left.
 */
static int
find_bulk_eps(const uint8_t *d, size_t len, unsigned int ifnum,
    struct bulk_eps *eps)
{
	size_t	off = 0;
	int	in_iface = 0;

	memset(eps, 0, sizeof(*eps));
	while (off + 2 <= len) {
		uint8_t blen = d[off], type = d[off + 1];

		if (blen < 2 || blen > len - off)
			return -1;
		if (type == USB_DT_INTERFACE) {
			if (blen < USB_DT_INTERFACE_SIZE)
				return -1;
			in_iface = d[off + 2] == ifnum && d[off + 3] == 0;
		} else if (type == USB_DT_ENDPOINT && in_iface) {
			if (blen < USB_DT_ENDPOINT_SIZE)
				return -1;
			uint8_t addr = d[off + 2], attr = d[off + 3];
			if ((attr & USB_ENDPOINT_XFERTYPE_MASK) ==
			    USB_ENDPOINT_XFER_BULK) {
				if ((addr & USB_DIR_IN) && eps->in == 0)
					eps->in = addr;
				else if (!(addr & USB_DIR_IN) && eps->out == 0)
					eps->out = addr;
			}
		}
		off += blen;
	}
	return eps->in != 0 && eps->out != 0 ? 0 : -1;
}

/* A pattern that differs in every chunk and every position (xorshift64). */
static void
fill_pattern(uint8_t *buf, size_t len, uint64_t chunkno)
{
	uint64_t	x = 0x9e3779b97f4a7c15ULL ^ (chunkno + 1);
	size_t		i;

	for (i = 0; i < len; i++) {
		if ((i & 7) == 0) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
		}
		buf[i] = (uint8_t)(x >> ((i & 7) * 8));
	}
}

static int
bulk(int fd, unsigned int ep, void *buf, size_t len, unsigned int timeout_ms)
{
	struct usbdevfs_bulktransfer	bt;

	memset(&bt, 0, sizeof(bt));
	bt.ep = ep;
	bt.len = (unsigned int)len;
	bt.timeout = timeout_ms;
	bt.data = buf;
	return ioctl(fd, USBDEVFS_BULK, &bt);
}

static double
now_s(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int
main(int argc, char **argv)
{
	uint8_t			 desc[EB_DESC_MAX], *out, *in;
	struct bulk_eps		 eps;
	unsigned int		 ifnum = 0, timeout_ms = EB_DEFAULT_TIMEOUT_MS;
	size_t			 chunk = EB_DEFAULT_CHUNK_KIB * 1024, got, i;
	uint64_t		 total = (uint64_t)EB_DEFAULT_MIB << 20, done, n;
	ssize_t			 dlen;
	double			 t0, t;
	int			 ch, fd, r;

	while ((ch = getopt(argc, argv, "c:i:m:t:")) != -1) {
		switch (ch) {
		case 'c':
			chunk = (size_t)num_arg(optarg, 1, EB_MAX_CHUNK_KIB,
			    "chunk KiB") * 1024;
			break;
		case 'i':
			ifnum = (unsigned int)num_arg(optarg, 0,
			    EB_MAX_INTERFACE, "interface");
			break;
		case 'm':
			total = (uint64_t)num_arg(optarg, 1, EB_MAX_MIB,
			    "MiB") << 20;
			break;
		case 't':
			timeout_ms = (unsigned int)num_arg(optarg, 1,
			    EB_MAX_TIMEOUT_MS, "timeout ms");
			break;
		default:
			usage();
		}
	}
	if (argc - optind != 1)
		usage();

	if ((fd = open(argv[optind], O_RDWR | O_CLOEXEC)) == -1) {
		fprintf(stderr, "e2e-bulk: %s: %s\n", argv[optind],
		    strerror(errno));
		return 1;
	}
	if ((dlen = read(fd, desc, sizeof(desc))) <= 0 ||
	    find_bulk_eps(desc, (size_t)dlen, ifnum, &eps) == -1) {
		fprintf(stderr, "e2e-bulk: no bulk IN and OUT endpoint on "
		    "interface %u\n", ifnum);
		return 1;
	}
	if (ioctl(fd, USBDEVFS_CLAIMINTERFACE, &ifnum) == -1) {
		fprintf(stderr, "e2e-bulk: claim interface %u: %s\n", ifnum,
		    strerror(errno));
		return 1;
	}
	out = xmalloc(chunk);
	in = xmalloc(chunk);

	t0 = now_s();
	for (done = 0, n = 0; done < total; done += chunk, n++) {
		size_t len = total - done < chunk ? (size_t)(total - done) : chunk;

		fill_pattern(out, len, n);
		if ((r = bulk(fd, eps.out, out, len, timeout_ms)) < 0 ||
		    (size_t)r != len) {
			fprintf(stderr, "e2e-bulk: OUT 0x%02x at %llu: %s\n",
			    eps.out, (unsigned long long)done,
			    r < 0 ? strerror(errno) : "short write");
			return 1;
		}
		for (got = 0; got < len; got += (size_t)r) {
			r = bulk(fd, eps.in, in + got, len - got, timeout_ms);
			if (r <= 0) {
				fprintf(stderr, "e2e-bulk: IN 0x%02x at %llu: "
				    "%s\n", eps.in,
				    (unsigned long long)(done + got),
				    r < 0 ? strerror(errno) : "no data");
				return 1;
			}
		}
		if (memcmp(out, in, len) != 0) {
			for (i = 0; i < len && out[i] == in[i]; i++)
				;
			fprintf(stderr, "e2e-bulk: mismatch at byte %llu: "
			    "sent 0x%02x, got 0x%02x\n",
			    (unsigned long long)(done + i), out[i], in[i]);
			return 1;
		}
	}
	t = now_s() - t0;
	if (t <= 0)
		t = 1e-9;
	printf("ok %llu bytes in %.3f s, %.2f MB/s\n",
	    (unsigned long long)total, t, (double)total / 1048576.0 / t);
	ioctl(fd, USBDEVFS_RELEASEINTERFACE, &ifnum);
	free(out);
	free(in);
	close(fd);
	return 0;
}
