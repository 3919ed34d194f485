/*
 * vhci_hcd through sysfs.  See vhci.h for the kernel's interface as this
 * module relies on it.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "proto/usbip.h"
#include "base/util.h"
#include "host/vhci.h"

#define VHCI_STATUS_TOKENS	7
#define VHCI_MAX_INTF		64	/* interface dirs looked at per device */
#define VHCI_PATH_MAX		PATH_MAX

struct vhci {
	char			*platform_dir;
	char			*usb_bus_dir;
	char			*hcd0;		/* platform_dir/vhci_hcd.0 */
	struct vhci_io		 io;
	int			 eagain_tries;
	unsigned int		 backoff_us;

	unsigned int		 ncontrollers;
	int			 only;		/* attach to this controller, -1 any */
	unsigned int		 hc_ports;
	unsigned int		 nports;
	struct vhci_port	*ports;		/* nports, by global number */
	unsigned int		*roothub;	/* 2 per controller: busnum or 0 */
	unsigned int		*bad;		/* malformed lines per controller */
	unsigned char		*first_read;	/* per controller: not read yet */
	char			*statbuf;	/* VHCI_STATUS_MAX */
};

/* ---- default I/O: real sysfs --------------------------------------- */

int
vhci_sysfs_write(void *arg, const char *path, const char *buf, size_t len)
{
	ssize_t n;
	int fd, saved;

	(void)arg;
	/* No O_CREAT: we never create a file in sysfs (or in a fake tree). */
	if ((fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC)) == -1)
		return -1;
	n = write(fd, buf, len);
	saved = errno;
	close(fd);
	if (n == -1) {
		errno = saved;
		return -1;
	}
	if ((size_t)n != len) {
		errno = EIO;
		return -1;
	}
	return 0;
}

ssize_t
vhci_sysfs_read(void *arg, const char *path, char *buf, size_t size)
{
	size_t off = 0;
	ssize_t n;
	int fd, saved;

	(void)arg;
	if (size == 0) {
		errno = EINVAL;
		return -1;
	}
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	for (;;) {
		if (off == size - 1) {
			/* Full: is there more?  Then it does not fit. */
			char c;

			n = read(fd, &c, 1);
			if (n == 1) {
				close(fd);
				errno = E2BIG;
				return -1;
			}
			if (n == -1 && errno == EINTR)
				continue;
			break;
		}
		n = read(fd, buf + off, size - 1 - off);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			saved = errno;
			close(fd);
			errno = saved;
			return -1;
		}
		if (n == 0)
			break;
		off += (size_t)n;
	}
	close(fd);
	buf[off] = '\0';
	return (ssize_t)off;
}

void
vhci_sysfs_sleep(void *arg, unsigned int usec)
{
	struct timespec ts;

	(void)arg;
	ts.tv_sec = usec / 1000000;
	ts.tv_nsec = (long)(usec % 1000000) * 1000;
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

const struct vhci_io vhci_io_sysfs = {
	.write_attr = vhci_sysfs_write,
	.read_attr = vhci_sysfs_read,
	.sleep_usec = vhci_sysfs_sleep,
	.arg = NULL,
};

/* ---- small helpers ---------------------------------------------------- */

static int path_fmt(char *, size_t, const char *, ...)
    __attribute__((format(printf, 3, 4)));

/* snprintf into a path buffer; -1 with ENAMETOOLONG on truncation. */
static int
path_fmt(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= size) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

/*
 * Read a small attribute and strip one trailing newline; anything that
 * is not printable ASCII makes it invalid (EINVAL).
 */
static int
read_small(struct vhci *v, const char *path, char *buf, size_t size)
{
	ssize_t n;
	size_t i;

	if ((n = v->io.read_attr(v->io.arg, path, buf, size)) == -1)
		return -1;
	if (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	for (i = 0; i < (size_t)n; i++) {
		if (buf[i] < 0x20 || buf[i] > 0x7e) {
			errno = EINVAL;
			return -1;
		}
	}
	return 0;
}

static int
read_uint(struct vhci *v, const char *path, long long max, long long *out)
{
	char buf[VHCI_ATTR_MAX];
	const char *errstr;

	if (read_small(v, path, buf, sizeof(buf)) == -1)
		return -1;
	if (parse_num(buf, 0, max, out, &errstr) == -1) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

static int
write_str(struct vhci *v, const char *path, const char *s)
{
	return v->io.write_attr(v->io.arg, path, s, strlen(s));
}

/* Decimal of 1..maxdigits digits, value <= max. */
static int
tok_dec(const char *s, size_t n, size_t maxdigits, unsigned long long max,
    unsigned long long *out)
{
	unsigned long long val = 0;
	size_t i;

	if (n == 0 || n > maxdigits || maxdigits > 19)
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		val = val * 10 + (unsigned long long)(s[i] - '0');
	}
	if (val > max)
		return -1;
	*out = val;
	return 0;
}

/* Hexadecimal of 1..8 digits. */
static int
tok_hex32(const char *s, size_t n, uint32_t *out)
{
	uint32_t val = 0;
	size_t i;
	int d;

	if (n == 0 || n > 8)
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] >= '0' && s[i] <= '9')
			d = s[i] - '0';
		else if (s[i] >= 'a' && s[i] <= 'f')
			d = s[i] - 'a' + 10;
		else if (s[i] >= 'A' && s[i] <= 'F')
			d = s[i] - 'A' + 10;
		else
			return -1;
		val = val << 4 | (uint32_t)d;
	}
	*out = val;
	return 0;
}

/* Groups of 1..3 digits: "N-P" then ".P" any number of times. */
int
vhci_busid_valid(const char *s)
{
	size_t len, i, digits = 0;
	int dash = 0;

	if (s == NULL || (len = strnlen(s, VHCI_BUSID_MAX)) == 0 ||
	    len >= VHCI_BUSID_MAX)
		return 0;
	for (i = 0; i < len; i++) {
		if (s[i] >= '0' && s[i] <= '9') {
			if (++digits > 3)
				return 0;
			continue;
		}
		if (digits == 0)
			return 0;
		if (s[i] == '-' && !dash)
			dash = 1;
		else if (s[i] == '.' && dash)
			;
		else
			return 0;
		digits = 0;
	}
	return dash && digits > 0;
}

int
vhci_hub_for_speed(uint32_t speed)
{
	switch (speed) {
	case USBIP_SPEED_LOW:
	case USBIP_SPEED_FULL:
	case USBIP_SPEED_HIGH:
	case USBIP_SPEED_WIRELESS:
		return VHCI_HUB_HS;
	case USBIP_SPEED_SUPER:
	case USBIP_SPEED_SUPER_PLUS:
		return VHCI_HUB_SS;
	default:
		return -1;
	}
}

const char *
vhci_hub_name(enum vhci_hub hub)
{
	return hub == VHCI_HUB_SS ? "ss" : "hs";
}

const char *
vhci_status_name(enum vhci_port_status st)
{
	switch (st) {
	case VHCI_ST_FREE:
		return "free";
	case VHCI_ST_INIT:
		return "initializing";
	case VHCI_ST_USED:
		return "used";
	case VHCI_ST_ERROR:
		return "error";
	default:
		return "unknown";
	}
}

/* ---- status parsing ------------------------------------------------- */

static void
port_reset(struct vhci_port *p, unsigned int controller,
    unsigned int hc_ports, unsigned int idx)
{
	memset(p, 0, sizeof(*p));
	p->controller = controller;
	p->hub = idx < hc_ports ? VHCI_HUB_HS : VHCI_HUB_SS;
	p->rhport = idx % hc_ports;
	p->port = controller * 2 * hc_ports + idx;
	p->status = VHCI_ST_UNKNOWN;
	usbgw_strlcpy(p->local_busid, "0-0", sizeof(p->local_busid));
}

static void
bad_line(unsigned int controller, const char *line, size_t len,
    const char *why)
{
	char esc[VHCI_LINE_MAX * 4 + 1];

	log_escape(esc, sizeof(esc), line, len > VHCI_LINE_MAX ?
	    VHCI_LINE_MAX : len);
	log_warnx("vhci status of controller %u: %s: \"%s%s\"", controller,
	    why, esc, len > VHCI_LINE_MAX ? "..." : "");
}

/*
 * Decode one data line into *out.  Returns NULL, or why it is malformed.
 * The kernel prints "%2s  %04u %03u %03u %08x %06u %s"; we accept any
 * run of blanks between fields and the widths up to what the types allow.
 */
static const char *
parse_line(const char *line, size_t len, unsigned int controller,
    unsigned int hc_ports, struct vhci_port *out)
{
	const char *tok[VHCI_STATUS_TOKENS + 1];
	size_t tlen[VHCI_STATUS_TOKENS + 1];
	unsigned long long port, sta, spd, fd;
	unsigned int base, off, ntok = 0;
	uint32_t devid;
	size_t i = 0, start;
	enum vhci_hub hub;

	for (i = 0; i < len; i++) {
		/* A NUL would cut a field short after its length was taken. */
		if ((line[i] < 0x20 && line[i] != '\t') || line[i] > 0x7e)
			return "byte that is not printable ASCII";
	}
	i = 0;
	while (i < len) {
		if (line[i] == ' ' || line[i] == '\t') {
			i++;
			continue;
		}
		if (ntok == VHCI_STATUS_TOKENS)
			return "too many fields";
		start = i;
		while (i < len && line[i] != ' ' && line[i] != '\t')
			i++;
		tok[ntok] = line + start;
		tlen[ntok++] = i - start;
	}
	if (ntok != VHCI_STATUS_TOKENS)
		return "wrong number of fields";

	if (tlen[0] == 2 && memcmp(tok[0], "hs", 2) == 0)
		hub = VHCI_HUB_HS;
	else if (tlen[0] == 2 && memcmp(tok[0], "ss", 2) == 0)
		hub = VHCI_HUB_SS;
	else
		return "hub is neither hs nor ss";

	if (tok_dec(tok[1], tlen[1], 6, UINT_MAX, &port) == -1)
		return "bad port number";
	base = controller * 2 * hc_ports;
	if (port < base || port >= (unsigned long long)base + 2 * hc_ports)
		return "port not on this controller";
	off = (unsigned int)(port - base);
	if ((off < hc_ports ? VHCI_HUB_HS : VHCI_HUB_SS) != hub)
		return "port number on the wrong hub";

	if (tok_dec(tok[2], tlen[2], 3, 255, &sta) == -1)
		return "bad sta";
	if (sta < VHCI_ST_FREE || sta > VHCI_ST_ERROR)
		return "sta is not a vhci port state";
	if (tok_dec(tok[3], tlen[3], 3, 255, &spd) == -1)
		return "bad spd";
	if (tok_hex32(tok[4], tlen[4], &devid) == -1)
		return "bad dev";
	if (tok_dec(tok[5], tlen[5], 19, INT_MAX, &fd) == -1)
		return "bad sockfd";
	if (tlen[6] >= VHCI_BUSID_MAX)
		return "local_busid too long";

	memset(out, 0, sizeof(*out));
	memcpy(out->local_busid, tok[6], tlen[6]);
	out->local_busid[tlen[6]] = '\0';
	if (!vhci_busid_valid(out->local_busid))
		return "bad local_busid";

	out->port = (unsigned int)port;
	out->controller = controller;
	out->hub = hub;
	out->rhport = off % hc_ports;
	out->status = (enum vhci_port_status)sta;
	if (out->status == VHCI_ST_USED) {
		if (vhci_hub_for_speed((uint32_t)spd) != (int)hub)
			return "spd does not belong on this hub";
		if (strcmp(out->local_busid, "0-0") == 0)
			return "used port without a local_busid";
		out->speed = (uint32_t)spd;
		out->devid = devid;
		out->sockfd = (int)fd;
	} else if (spd != 0 || devid != 0 || fd != 0 ||
	    strcmp(out->local_busid, "0-0") != 0)
		return "details on a port that is not in use";
	return NULL;
}

static int
status_parse(const char *buf, size_t len, unsigned int controller,
    unsigned int hc_ports, struct vhci_port *ports, unsigned int *nbad,
    int verbose)
{
	unsigned char seen[2 * VHCI_MAX_HC_PORTS];
	struct vhci_port p;
	const char *line, *nl, *why;
	size_t left, llen;
	unsigned int i, idx, bad = 0;
	int filled = 0;

	if (nbad != NULL)
		*nbad = 0;
	if (hc_ports == 0 || hc_ports > VHCI_MAX_HC_PORTS ||
	    controller >= VHCI_MAX_CONTROLLERS || ports == NULL ||
	    (buf == NULL && len != 0))
		return -1;
	for (i = 0; i < 2 * hc_ports; i++)
		port_reset(&ports[i], controller, hc_ports, i);
	memset(seen, 0, sizeof(seen));

	line = buf;
	left = len;
	while (left > 0) {
		nl = memchr(line, '\n', left);
		llen = nl != NULL ? (size_t)(nl - line) : left;
		if (llen == 0)
			goto next;
		if (llen > VHCI_LINE_MAX) {
			if (verbose)
				bad_line(controller, line, llen, "line too long");
			bad++;
			goto next;
		}
		if (llen >= 4 && memcmp(line, "hub ", 4) == 0)
			goto next;	/* the header */
		if ((why = parse_line(line, llen, controller, hc_ports,
		    &p)) != NULL) {
			if (verbose)
				bad_line(controller, line, llen, why);
			bad++;
			goto next;
		}
		idx = p.port - controller * 2 * hc_ports;
		if (seen[idx]) {
			/* Two answers for one port: believe neither. */
			if (verbose)
				bad_line(controller, line, llen, "port listed twice");
			bad++;
			if (ports[idx].status != VHCI_ST_UNKNOWN)
				filled--;
			port_reset(&ports[idx], controller, hc_ports, idx);
			goto next;
		}
		seen[idx] = 1;
		ports[idx] = p;
		filled++;
next:
		if (nl == NULL)
			break;
		left -= llen + 1;
		line = nl + 1;
	}
	if (nbad != NULL)
		*nbad = bad;
	return filled;
}

int
vhci_status_parse(const char *buf, size_t len, unsigned int controller,
    unsigned int hc_ports, struct vhci_port *ports, unsigned int *nbad)
{
	return status_parse(buf, len, controller, hc_ports, ports, nbad, 1);
}

/* ---- open, refresh ---------------------------------------------------- */

unsigned int
vhci_ncontrollers(const struct vhci *v)
{
	return v->ncontrollers;
}

unsigned int
vhci_hc_ports(const struct vhci *v)
{
	return v->hc_ports;
}

unsigned int
vhci_nports(const struct vhci *v)
{
	return v->nports;
}

int
vhci_restrict_controller(struct vhci *v, int c)
{
	if (c < -1 || (c >= 0 && (unsigned int)c >= v->ncontrollers)) {
		log_warnx("vhci: no controller %d (there are %u)", c,
		    v->ncontrollers);
		errno = EINVAL;
		return -1;
	}
	v->only = c;
	return 0;
}

const struct vhci_port *
vhci_port(const struct vhci *v, unsigned int port)
{
	if (port >= v->nports)
		return NULL;
	return &v->ports[port];
}

static int
status_path(const struct vhci *v, unsigned int c, char *buf, size_t size)
{
	if (c == 0)
		return path_fmt(buf, size, "%s/status", v->hcd0);
	return path_fmt(buf, size, "%s/status.%u", v->hcd0, c);
}

int
vhci_refresh_controller(struct vhci *v, unsigned int c)
{
	char path[VHCI_PATH_MAX];
	struct vhci_port *ports;
	unsigned int prev;
	ssize_t n;
	int filled;

	if (c >= v->ncontrollers) {
		errno = EINVAL;
		return -1;
	}
	ports = &v->ports[c * 2 * v->hc_ports];
	if (status_path(v, c, path, sizeof(path)) == -1 ||
	    (n = v->io.read_attr(v->io.arg, path, v->statbuf,
	    VHCI_STATUS_MAX)) == -1) {
		log_warn("vhci: reading status of controller %u", c);
		/* Unreadable: no port of it may be chosen. */
		vhci_status_parse(NULL, 0, c, v->hc_ports, ports, NULL);
		return -1;
	}
	/*
	 * The daemon re-reads status often (every attach, every check of a
	 * direct attachment): name each malformed line only when the count
	 * changes, not on every read.
	 */
	prev = v->bad[c];
	filled = status_parse(v->statbuf, (size_t)n, c, v->hc_ports, ports,
	    &v->bad[c], 0);
	if (v->bad[c] == prev && !v->first_read[c])
		return 0;
	v->first_read[c] = 0;
	if (v->bad[c] != 0)
		status_parse(v->statbuf, (size_t)n, c, v->hc_ports, ports,
		    &v->bad[c], 1);
	if (filled < (int)(2 * v->hc_ports))
		log_warnx("vhci: controller %u: %u of %u ports unknown "
		    "(%u malformed status lines)", c,
		    2 * v->hc_ports - (unsigned int)(filled < 0 ? 0 : filled),
		    2 * v->hc_ports, v->bad[c]);
	return 0;
}

int
vhci_refresh(struct vhci *v)
{
	unsigned int c;
	int rv = 0;

	for (c = 0; c < v->ncontrollers; c++)
		if (vhci_refresh_controller(v, c) == -1)
			rv = -1;
	return rv;
}

unsigned int
vhci_bad_lines(const struct vhci *v)
{
	unsigned int c, n = 0;

	for (c = 0; c < v->ncontrollers; c++)
		n += v->bad[c];
	return n;
}

/* Parse "usbN" strictly; 0 if it is not one. */
static unsigned int
usb_dir_busnum(const char *name)
{
	unsigned long long n;

	if (strncmp(name, "usb", 3) != 0)
		return 0;
	if (tok_dec(name + 3, strlen(name + 3), 3, 999, &n) == -1 || n == 0)
		return 0;
	return (unsigned int)n;
}

/*
 * Find controller c's root hubs: the usbN directories under vhci_hcd.c,
 * high-speed (speed 480) and SuperSpeed (speed >= 5000).
 */
static void
find_roothubs(struct vhci *v, unsigned int c)
{
	char dir[VHCI_PATH_MAX], path[VHCI_PATH_MAX];
	struct dirent *de;
	unsigned int bus, *slot;
	long long speed;
	DIR *d;

	v->roothub[2 * c] = v->roothub[2 * c + 1] = 0;
	if (path_fmt(dir, sizeof(dir), "%s/vhci_hcd.%u", v->platform_dir,
	    c) == -1 || (d = opendir(dir)) == NULL) {
		log_debug("vhci: no directory for controller %u", c);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if ((bus = usb_dir_busnum(de->d_name)) == 0)
			continue;
		if (path_fmt(path, sizeof(path), "%s/%s/speed", dir,
		    de->d_name) == -1 ||
		    read_uint(v, path, 1000000, &speed) == -1) {
			log_warn("vhci: controller %u: speed of %s", c,
			    de->d_name);
			continue;
		}
		if (speed == 480)
			slot = &v->roothub[2 * c + VHCI_HUB_HS];
		else if (speed >= 5000)
			slot = &v->roothub[2 * c + VHCI_HUB_SS];
		else {
			log_warnx("vhci: controller %u: %s has speed %lld",
			    c, de->d_name, speed);
			continue;
		}
		if (*slot != 0) {
			log_warnx("vhci: controller %u: two %s root hubs "
			    "(usb%u, %s)", c, slot == &v->roothub[2 * c] ?
			    "hs" : "ss", *slot, de->d_name);
			continue;
		}
		*slot = bus;
	}
	closedir(d);
}

struct vhci *
vhci_open(const struct vhci_params *params)
{
	struct vhci_params defaults;
	char path[VHCI_PATH_MAX];
	struct stat st;
	struct vhci *v;
	long long nports;
	unsigned int c, i;
	int saved;

	if (params == NULL) {
		memset(&defaults, 0, sizeof(defaults));
		defaults.eagain_tries = -1;
		params = &defaults;
	}
	v = xcalloc(1, sizeof(*v));
	v->platform_dir = xstrdup(params->platform_dir != NULL ?
	    params->platform_dir : VHCI_PLATFORM_DIR);
	v->usb_bus_dir = xstrdup(params->usb_bus_dir != NULL ?
	    params->usb_bus_dir : VHCI_USB_BUS_DIR);
	v->io = params->io != NULL ? *params->io : vhci_io_sysfs;
	v->eagain_tries = params->eagain_tries < 0 ? VHCI_EAGAIN_TRIES :
	    params->eagain_tries;
	v->backoff_us = params->eagain_backoff_us != 0 ?
	    params->eagain_backoff_us : VHCI_EAGAIN_BACKOFF_US;
	xasprintf(&v->hcd0, "%s/vhci_hcd.0", v->platform_dir);
	v->statbuf = xmalloc(VHCI_STATUS_MAX);

	if (stat(v->hcd0, &st) == -1 || !S_ISDIR(st.st_mode)) {
		log_warnx("vhci: %s not found (is the vhci-hcd module "
		    "loaded?)", v->hcd0);
		errno = ENODEV;
		goto fail;
	}
	if (path_fmt(path, sizeof(path), "%s/nports", v->hcd0) == -1 ||
	    read_uint(v, path, (long long)VHCI_MAX_CONTROLLERS * 2 *
	    VHCI_MAX_HC_PORTS, &nports) == -1 || nports == 0) {
		log_warnx("vhci: %s/nports unreadable or out of range",
		    v->hcd0);
		errno = EINVAL;
		goto fail;
	}
	for (c = 0; c < VHCI_MAX_CONTROLLERS; c++) {
		if (status_path(v, c, path, sizeof(path)) == -1 ||
		    stat(path, &st) == -1)
			break;
	}
	if (c == 0) {
		log_warnx("vhci: %s has no status file", v->hcd0);
		errno = ENODEV;
		goto fail;
	}
	if (nports % (2 * c) != 0 || nports / (2 * c) > VHCI_MAX_HC_PORTS) {
		log_warnx("vhci: nports %lld does not fit %u controllers of "
		    "two hubs (at most %u ports each)", nports, c,
		    VHCI_MAX_HC_PORTS);
		errno = EINVAL;
		goto fail;
	}
	v->ncontrollers = c;
	v->only = -1;
	v->nports = (unsigned int)nports;
	v->hc_ports = v->nports / (2 * c);
	v->ports = xcalloc(v->nports, sizeof(*v->ports));
	for (c = 0; c < v->ncontrollers; c++)
		for (i = 0; i < 2 * v->hc_ports; i++)
			port_reset(&v->ports[c * 2 * v->hc_ports + i], c,
			    v->hc_ports, i);
	v->roothub = xcalloc(2 * (size_t)v->ncontrollers,
	    sizeof(*v->roothub));
	v->bad = xcalloc(v->ncontrollers, sizeof(*v->bad));
	v->first_read = xmalloc(v->ncontrollers);
	memset(v->first_read, 1, v->ncontrollers);
	for (c = 0; c < v->ncontrollers; c++)
		find_roothubs(v, c);
	if (vhci_refresh(v) == -1) {
		errno = EIO;
		goto fail;
	}
	log_info("vhci: %u controller%s, %u+%u ports each, %u ports",
	    v->ncontrollers, v->ncontrollers == 1 ? "" : "s", v->hc_ports,
	    v->hc_ports, v->nports);
	return v;

fail:
	saved = errno;
	vhci_free(v);
	errno = saved;
	return NULL;
}

void
vhci_free(struct vhci *v)
{
	if (v == NULL)
		return;
	free(v->platform_dir);
	free(v->usb_bus_dir);
	free(v->hcd0);
	free(v->ports);
	free(v->roothub);
	free(v->bad);
	free(v->first_read);
	free(v->statbuf);
	free(v);
}

/* ---- attach, detach ------------------------------------------------- */

static int
first_free(const struct vhci *v, enum vhci_hub hub,
    const unsigned char *tried)
{
	const struct vhci_port *p;
	unsigned int c, r;

	for (c = 0; c < v->ncontrollers; c++) {
		if (v->only != -1 && c != (unsigned int)v->only)
			continue;
		for (r = 0; r < v->hc_ports; r++) {
			p = &v->ports[c * 2 * v->hc_ports +
			    (hub == VHCI_HUB_SS ? v->hc_ports : 0) + r];
			if (p->status == VHCI_ST_FREE && !tried[p->port])
				return (int)p->port;
		}
	}
	return -1;
}

static void
eagain_pause(struct vhci *v, int n)
{
	unsigned int us = v->backoff_us;

	while (--n > 0 && us < 1000000)
		us *= 2;
	v->io.sleep_usec(v->io.arg, us);
}

int
vhci_attach(struct vhci *v, int sockfd, uint32_t devid, uint32_t speed,
    unsigned int *portp)
{
	char path[VHCI_PATH_MAX], buf[64];
	unsigned char *tried;
	unsigned int rounds, max_rounds;
	int hub, port, eagains = 0, lost = 0, full = 0, err = 0;

	if ((hub = vhci_hub_for_speed(speed)) == -1) {
		log_warnx("vhci: cannot attach a device of speed %u (%s)",
		    speed, usbip_speed_name(speed));
		errno = EINVAL;
		return -1;
	}
	if (sockfd < 0) {
		errno = EBADF;
		return -1;
	}
	if (path_fmt(path, sizeof(path), "%s/attach", v->hcd0) == -1)
		return -1;
	tried = xcalloc(v->nports, 1);

	/*
	 * The cached status proposes a port; its controller's status is
	 * re-read before the write, so one attach reads one status file,
	 * not all of them (3840 ports are 128 files).  Only when the cache
	 * has no free port left is everything re-read, once.  Bounded:
	 * every EBUSY marks one port tried, every EAGAIN counts against
	 * eagain_tries, and the rounds are capped for a tree that changes
	 * under our feet.
	 */
	max_rounds = 2 * v->nports + (unsigned int)v->eagain_tries + 2;
	for (rounds = 0; rounds < max_rounds; rounds++) {
		if ((port = first_free(v, (enum vhci_hub)hub, tried)) == -1) {
			if (!full) {
				full = 1;
				vhci_refresh(v);
				continue;
			}
			if (lost) {
				log_warnx("vhci: lost the race for %d %s "
				    "port%s", lost, vhci_hub_name(hub),
				    lost == 1 ? "" : "s");
				err = EBUSY;
			} else {
				log_warnx("vhci: no free %s port",
				    vhci_hub_name(hub));
				err = ENOSPC;
			}
			goto fail;
		}
		vhci_refresh_controller(v, v->ports[port].controller);
		if (v->ports[port].status != VHCI_ST_FREE)
			continue;
		snprintf(buf, sizeof(buf), "%d %d %u %u", port, sockfd, devid,
		    speed);
		if (v->io.write_attr(v->io.arg, path, buf, strlen(buf)) == 0) {
			v->ports[port].status = VHCI_ST_INIT;
			*portp = (unsigned int)port;
			free(tried);
			log_info("vhci: attached devid %08x (%s) to port %d "
			    "(controller %u, %s %u)", devid,
			    usbip_speed_name(speed), port,
			    v->ports[port].controller, vhci_hub_name(hub),
			    v->ports[port].rhport + 1);
			return 0;
		}
		err = errno;
		if (err == EINVAL) {
			/* Older kernels say EINVAL for a port in use. */
			vhci_refresh_controller(v, v->ports[port].controller);
			if (v->ports[port].status == VHCI_ST_FREE) {
				log_warnx("vhci: attach \"%s\" refused", buf);
				goto fail;
			}
			err = EBUSY;
		}
		if (err == EBUSY) {
			log_debug("vhci: port %d taken meanwhile, next", port);
			tried[port] = 1;
			lost++;
			continue;
		}
		if (err == EAGAIN) {
			if (++eagains > v->eagain_tries) {
				log_warnx("vhci: controller not ready "
				    "(EAGAIN %d times)", eagains);
				goto fail;
			}
			eagain_pause(v, eagains);
			continue;
		}
		log_warnx("vhci: writing \"%s\" to %s: %s", buf, path,
		    strerror(err));
		goto fail;
	}
	log_warnx("vhci: no stable free port after %u rounds", rounds);
	err = EBUSY;
fail:
	free(tried);
	errno = err;
	return -1;
}

int
vhci_detach(struct vhci *v, unsigned int port)
{
	char path[VHCI_PATH_MAX], buf[16];
	int eagains = 0, err;

	if (port >= v->nports) {
		errno = EINVAL;
		return -1;
	}
	if (path_fmt(path, sizeof(path), "%s/detach", v->hcd0) == -1)
		return -1;
	snprintf(buf, sizeof(buf), "%u", port);
	for (;;) {
		if (v->io.write_attr(v->io.arg, path, buf, strlen(buf)) == 0) {
			log_info("vhci: detached port %u", port);
			return 0;
		}
		err = errno;
		if (err != EAGAIN || ++eagains > v->eagain_tries)
			break;
		eagain_pause(v, eagains);
	}
	log_warnx("vhci: detaching port %u: %s", port, strerror(err));
	errno = err;
	return -1;
}

int
vhci_used_ports(struct vhci *v, struct vhci_port **out, size_t *nout)
{
	struct vhci_port *list = NULL;
	size_t n = 0, i;

	for (i = 0; i < v->nports; i++) {
		if (v->ports[i].status == VHCI_ST_FREE ||
		    v->ports[i].status == VHCI_ST_UNKNOWN)
			continue;
		list = xreallocarray(list, n + 1, sizeof(*list));
		list[n++] = v->ports[i];
	}
	*out = list;
	*nout = n;
	return 0;
}

/* ---- authorization ------------------------------------------------- */

unsigned int
vhci_roothub_busnum(const struct vhci *v, unsigned int c, enum vhci_hub hub)
{
	if (c >= v->ncontrollers)
		return 0;
	return v->roothub[2 * c + (hub == VHCI_HUB_SS ? 1 : 0)];
}

int
vhci_set_authorized_default(struct vhci *v, int dev_default,
    int intf_default)
{
	char path[VHCI_PATH_MAX], val[8];
	unsigned int c, h, bus;

	if (dev_default > 2 || intf_default > 1) {
		errno = EINVAL;
		return -1;
	}
	for (c = 0; c < v->ncontrollers; c++) {
		for (h = 0; h < 2; h++) {
			if ((bus = v->roothub[2 * c + h]) == 0) {
				log_warnx("vhci: controller %u has no %s root "
				    "hub in sysfs", c, vhci_hub_name(h));
				errno = ENODEV;
				return -1;
			}
			if (dev_default >= 0) {
				snprintf(val, sizeof(val), "%d", dev_default);
				if (path_fmt(path, sizeof(path),
				    "%s/vhci_hcd.%u/usb%u/authorized_default",
				    v->platform_dir, c, bus) == -1 ||
				    write_str(v, path, val) == -1) {
					log_warn("vhci: writing %s", path);
					return -1;
				}
			}
			if (intf_default >= 0) {
				snprintf(val, sizeof(val), "%d", intf_default);
				if (path_fmt(path, sizeof(path),
				    "%s/vhci_hcd.%u/usb%u/"
				    "interface_authorized_default",
				    v->platform_dir, c, bus) == -1 ||
				    write_str(v, path, val) == -1) {
					log_warn("vhci: writing %s", path);
					return -1;
				}
			}
		}
	}
	log_info("vhci: root hubs: authorized_default %d, "
	    "interface_authorized_default %d", dev_default, intf_default);
	return 0;
}

/*
 * The device directory for port p: vhci_hcd.C/usbN/N-P, and its name.
 * -1 with ENODEV if the root hub is unknown.
 */
static int
device_dir(struct vhci *v, const struct vhci_port *p, char *dir,
    size_t dsize, char *name, size_t nsize)
{
	unsigned int bus;

	if ((bus = vhci_roothub_busnum(v, p->controller, p->hub)) == 0) {
		log_warnx("vhci: port %u: controller %u has no %s root hub "
		    "in sysfs", p->port, p->controller, vhci_hub_name(p->hub));
		errno = ENODEV;
		return -1;
	}
	if (path_fmt(name, nsize, "%u-%u", bus, p->rhport + 1) == -1 ||
	    path_fmt(dir, dsize, "%s/vhci_hcd.%u/usb%u/%s", v->platform_dir,
	    p->controller, bus, name) == -1)
		return -1;
	return 0;
}

static int
read_hex8(struct vhci *v, const char *dir, const char *attr, uint8_t *out)
{
	char path[VHCI_PATH_MAX], buf[VHCI_ATTR_MAX];
	uint32_t val;

	if (path_fmt(path, sizeof(path), "%s/%s", dir, attr) == -1 ||
	    read_small(v, path, buf, sizeof(buf)) == -1)
		return -1;
	if (tok_hex32(buf, strlen(buf), &val) == -1 || val > 0xff) {
		errno = EINVAL;
		return -1;
	}
	*out = (uint8_t)val;
	return 0;
}

static int
intf_cmp(const void *a, const void *b)
{
	const struct vhci_intf *x = a, *y = b;

	if (x->config != y->config)
		return x->config < y->config ? -1 : 1;
	if (x->number != y->number)
		return x->number < y->number ? -1 : 1;
	return 0;
}

/*
 * Interface directories of the device busid in dir ("3-1:1.0"): name,
 * config and number from the name, class triple and authorized read.
 * Returns how many (at most max), unreadable ones skipped with a log.
 */
static int
list_interfaces(struct vhci *v, const char *dir, const char *busid,
    struct vhci_intf *out, int max)
{
	char idir[VHCI_PATH_MAX], path[VHCI_PATH_MAX];
	const char *rest, *dot;
	unsigned long long cfg, num;
	struct dirent *de;
	struct vhci_intf *f;
	size_t blen = strlen(busid);
	long long auth;
	int n = 0;
	DIR *d;

	if ((d = opendir(dir)) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, busid, blen) != 0 ||
		    de->d_name[blen] != ':')
			continue;
		rest = de->d_name + blen + 1;
		if ((dot = strchr(rest, '.')) == NULL ||
		    tok_dec(rest, (size_t)(dot - rest), 3, 255, &cfg) == -1 ||
		    tok_dec(dot + 1, strlen(dot + 1), 3, 255, &num) == -1)
			continue;
		if (n == max) {
			log_warnx("vhci: %s: more than %d interfaces, the "
			    "rest stay unauthorized", busid, max);
			break;
		}
		f = &out[n];
		memset(f, 0, sizeof(*f));
		if (path_fmt(f->name, sizeof(f->name), "%s", de->d_name) ==
		    -1 || path_fmt(idir, sizeof(idir), "%s/%s", dir,
		    de->d_name) == -1)
			continue;
		f->config = (unsigned int)cfg;
		f->number = (unsigned int)num;
		if (read_hex8(v, idir, "bInterfaceClass", &f->iclass) == -1 ||
		    read_hex8(v, idir, "bInterfaceSubClass",
		    &f->isubclass) == -1 ||
		    read_hex8(v, idir, "bInterfaceProtocol",
		    &f->iprotocol) == -1) {
			log_warn("vhci: %s: reading its class", f->name);
			continue;
		}
		f->authorized = -1;
		if (path_fmt(path, sizeof(path), "%s/authorized", idir) == 0 &&
		    read_uint(v, path, 1, &auth) == 0)
			f->authorized = (int)auth;
		n++;
	}
	closedir(d);
	qsort(out, (size_t)n, sizeof(*out), intf_cmp);
	return n;
}

static int
authorize_interfaces(struct vhci *v, const char *dir, const char *busid,
    vhci_intf_cb cb, void *arg, struct vhci_authz_result *res)
{
	struct vhci_intf intf[VHCI_MAX_INTF];
	unsigned char allow[VHCI_MAX_INTF];
	char path[VHCI_PATH_MAX], probe[VHCI_PATH_MAX];
	int n, i, rv = 0;

	if ((n = list_interfaces(v, dir, busid, intf, VHCI_MAX_INTF)) == -1) {
		log_warn("vhci: listing %s", dir);
		return -1;
	}
	/* Every decision first, then authorize, then probe (rst: "side effects"). */
	for (i = 0; i < n; i++)
		allow[i] = cb(arg, &intf[i]) == 1;
	for (i = 0; i < n; i++) {
		if (path_fmt(path, sizeof(path), "%s/%s/authorized", dir,
		    intf[i].name) == -1)
			return -1;
		if (allow[i]) {
			if (write_str(v, path, "1") == -1) {
				log_warn("vhci: authorizing %s", intf[i].name);
				allow[i] = 0;
				rv = -1;
				continue;
			}
			res->nallowed++;
		} else {
			res->ndenied++;
			if (intf[i].authorized != 0 &&
			    write_str(v, path, "0") == -1) {
				log_warn("vhci: deauthorizing %s",
				    intf[i].name);
				rv = -1;
			}
		}
		log_info("vhci: interface %s (class %02x:%02x:%02x) %s",
		    intf[i].name, intf[i].iclass, intf[i].isubclass,
		    intf[i].iprotocol, allow[i] ? "authorized" : "kept "
		    "without a driver");
	}
	if (path_fmt(probe, sizeof(probe), "%s/drivers_probe",
	    v->usb_bus_dir) == -1)
		return -1;
	for (i = 0; i < n; i++) {
		/* A probe that binds nothing is not an error of ours. */
		if (allow[i] && write_str(v, probe, intf[i].name) == -1)
			log_warn("vhci: drivers_probe %s", intf[i].name);
	}
	return rv;
}

/*
 * Check that port still holds what we attached; returns 0 and the port,
 * 1 if it is not addressed yet, -1 with errno.
 */
static int
port_is_ours(struct vhci *v, unsigned int port, uint32_t devid, int sockfd,
    const struct vhci_port **pp)
{
	const struct vhci_port *p;

	if (port >= v->nports) {
		errno = EINVAL;
		return -1;
	}
	if (vhci_refresh_controller(v, v->ports[port].controller) == -1) {
		errno = EIO;
		return -1;
	}
	p = &v->ports[port];
	*pp = p;
	switch (p->status) {
	case VHCI_ST_INIT:
		return 1;
	case VHCI_ST_USED:
		if (p->devid != devid || p->sockfd != sockfd) {
			log_warnx("vhci: port %u now holds devid %08x fd %d, "
			    "not ours (%08x fd %d)", port, p->devid,
			    p->sockfd, devid, sockfd);
			errno = ESTALE;
			return -1;
		}
		return 0;
	default:
		errno = ENODEV;
		return -1;
	}
}

int
vhci_authorize(struct vhci *v, unsigned int port, uint32_t devid,
    int sockfd, vhci_intf_cb cb, void *arg, struct vhci_authz_result *res)
{
	const struct vhci_port *p;
	char dir[VHCI_PATH_MAX], name[VHCI_BUSID_MAX], path[VHCI_PATH_MAX];
	struct vhci_authz_result dummy;
	struct stat st;
	int rv;

	if (res == NULL)
		res = &dummy;
	memset(res, 0, sizeof(*res));
	if ((rv = port_is_ours(v, port, devid, sockfd, &p)) != 0)
		return rv;
	if (device_dir(v, p, dir, sizeof(dir), name, sizeof(name)) == -1)
		return -1;
	if (strcmp(name, p->local_busid) != 0) {
		log_warnx("vhci: port %u: status says %s, expected %s", port,
		    p->local_busid, name);
		errno = EPROTO;
		return -1;
	}
	if (stat(dir, &st) == -1 || !S_ISDIR(st.st_mode))
		return 1;	/* status is ahead of sysfs registration */
	usbgw_strlcpy(res->local_busid, name, sizeof(res->local_busid));
	if (path_fmt(path, sizeof(path), "%s/authorized", dir) == -1)
		return -1;
	if (write_str(v, path, "1") == -1) {
		log_warn("vhci: authorizing %s", name);
		return -1;
	}
	log_info("vhci: device %s on port %u authorized", name, port);
	if (cb != NULL &&
	    authorize_interfaces(v, dir, name, cb, arg, res) == -1)
		return -1;
	return 0;
}

int
vhci_deauthorize(struct vhci *v, unsigned int port)
{
	char dir[VHCI_PATH_MAX], name[VHCI_BUSID_MAX], path[VHCI_PATH_MAX];
	const struct vhci_port *p;

	if (port >= v->nports) {
		errno = EINVAL;
		return -1;
	}
	if (vhci_refresh_controller(v, v->ports[port].controller) == -1)
		return -1;
	p = &v->ports[port];
	if (p->status != VHCI_ST_USED) {
		errno = ENODEV;
		return -1;
	}
	if (device_dir(v, p, dir, sizeof(dir), name, sizeof(name)) == -1 ||
	    path_fmt(path, sizeof(path), "%s/authorized", dir) == -1)
		return -1;
	if (write_str(v, path, "0") == -1) {
		log_warn("vhci: deauthorizing %s", name);
		return -1;
	}
	return 0;
}
