/*
 * vhci.c and the local attach back end against fake sysfs trees.
 *
 * The fake is a temp directory laid out as /sys/devices/platform and
 * /sys/bus/usb are.  Reads go to its regular files; writes go through a
 * vhci_io whose write_attr plays the kernel for `attach` and `detach`
 * (port and speed checks as vhci_sysfs.c does them, EBUSY, EAGAIN,
 * EINVAL on cue, a dup of the attached socket as the kernel's reference,
 * status files rewritten in the kernel's format) and for `authorized`
 * (interfaces appear when the device is authorized).
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <netinet/in.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host/attach.h"
#include "base/log.h"
#include "proto/usbip.h"
#include "base/util.h"
#include "host/vhci.h"

#include "tap.h"

/* ---- the fake kernel ------------------------------------------------ */

enum act {
	ACT_OK = 0,
	ACT_EBUSY_STEAL,	/* someone else takes the port first: EBUSY */
	ACT_EBUSY,		/* EBUSY, status unchanged */
	ACT_EINVAL_STEAL,	/* older kernel: EINVAL for a port in use */
	ACT_EINVAL,
	ACT_EAGAIN,
};

#define FK_MAX_SCRIPT	64
#define FK_MAX_LOG	512
#define FK_MAX_INTF	4

struct fk_port {
	int		status;		/* 4 free, 5 init, 6 used, 7 error */
	uint32_t	speed, devid;
	int		sockfd;
	int		kfd;		/* the kernel's reference, or -1 */
	char		busid[32];
};

struct fk_intf {
	uint8_t		cls, sub, proto;
};

static struct fake {
	char		root[PATH_MAX];
	char		plat[PATH_MAX];
	char		bus[PATH_MAX];
	char		hcd0[PATH_MAX];
	unsigned int	nctrl, hc, nports;
	struct fk_port	*ports;
	unsigned int	*busnum;	/* 2 per controller */
	int		auto_enumerate;
	enum act	script[FK_MAX_SCRIPT];
	int		nscript, iscript;
	unsigned int	nattach, ndetach, nsleep;
	unsigned int	sleeps[FK_MAX_SCRIPT];
	char		attach_log[FK_MAX_SCRIPT][64];
	char		wlog[FK_MAX_LOG][160];	/* "relpath=value" */
	int		nwlog;
	struct fk_intf	intf[FK_MAX_INTF];
	int		nintf;
} fk;

static void
xmkdir(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void
xput(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void xsnprintf(char *, size_t, const char *, ...)
    __attribute__((format(printf, 3, 4)));

/* snprintf that dies on truncation (a test path never should be). */
static void
xsnprintf(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= size) {
		fprintf(stderr, "path too long\n");
		exit(2);
	}
}

static void
mkdirs(char *p)
{
	char *s;

	for (s = p + 1; *s; s++) {
		if (*s == '/') {
			*s = '\0';
			mkdir(p, 0755);
			*s = '/';
		}
	}
	mkdir(p, 0755);
}

static void
xmkdir(const char *fmt, ...)
{
	char path[PATH_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	mkdirs(path);
}

static void
xput(const char *path, const char *fmt, ...)
{
	va_list ap;
	FILE *f;

	if ((f = fopen(path, "w")) == NULL) {
		perror(path);
		exit(2);
	}
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
}

static int
xget(const char *path, char *buf, size_t size)
{
	FILE *f;
	size_t n;

	if ((f = fopen(path, "r")) == NULL)
		return -1;
	n = fread(buf, 1, size - 1, f);
	buf[n] = '\0';
	fclose(f);
	if (n > 0 && buf[n - 1] == '\n')
		buf[n - 1] = '\0';
	return 0;
}

static void
rmtree(const char *path)
{
	char sub[PATH_MAX];
	struct dirent *de;
	struct stat st;
	DIR *d;

	if (lstat(path, &st) == -1)
		return;
	if (!S_ISDIR(st.st_mode)) {
		unlink(path);
		return;
	}
	if ((d = opendir(path)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (strcmp(de->d_name, ".") == 0 ||
			    strcmp(de->d_name, "..") == 0)
				continue;
			xsnprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
			rmtree(sub);
		}
		closedir(d);
	}
	rmdir(path);
}

static unsigned int
fk_index(unsigned int c, int ss, unsigned int r)
{
	return c * 2 * fk.hc + (ss ? fk.hc : 0) + r;
}

/* Rewrite controller c's status file exactly as vhci_sysfs.c prints it. */
static void
fk_write_status(unsigned int c)
{
	char path[PATH_MAX], *buf, *s;
	struct fk_port *p;
	unsigned int i, idx;
	size_t size = 64 + 2 * fk.hc * 64;

	s = buf = xmalloc(size);
	s += sprintf(s, "hub port sta spd dev      sockfd local_busid\n");
	for (i = 0; i < 2 * fk.hc; i++) {
		idx = c * 2 * fk.hc + i;
		p = &fk.ports[idx];
		s += sprintf(s, "%s  %04u %03u ", i < fk.hc ? "hs" : "ss", idx,
		    p->status);
		if (p->status == 6)
			s += sprintf(s, "%03u %08x %06u %s", p->speed, p->devid,
			    p->sockfd, p->busid);
		else
			s += sprintf(s, "000 00000000 000000 0-0");
		s += sprintf(s, "\n");
	}
	if (c == 0)
		xsnprintf(path, sizeof(path), "%s/status", fk.hcd0);
	else
		xsnprintf(path, sizeof(path), "%s/status.%u", fk.hcd0, c);
	xput(path, "%s", buf);
	free(buf);
}

static void
fk_devdir(unsigned int idx, char *buf, size_t size)
{
	unsigned int c = idx / (2 * fk.hc), off = idx % (2 * fk.hc);
	unsigned int bus = fk.busnum[2 * c + (off >= fk.hc)];

	xsnprintf(buf, size, "%s/vhci_hcd.%u/usb%u/%u-%u", fk.plat, c, bus, bus,
	    off % fk.hc + 1);
}

/* The hub thread addressed the device: status 006, device dir appears. */
static void
fk_enumerate(unsigned int idx)
{
	unsigned int c = idx / (2 * fk.hc), off = idx % (2 * fk.hc);
	unsigned int bus = fk.busnum[2 * c + (off >= fk.hc)];
	char dir[PATH_MAX], path[PATH_MAX], def[8] = "1";

	fk.ports[idx].status = 6;
	xsnprintf(fk.ports[idx].busid, sizeof(fk.ports[idx].busid), "%u-%u",
	    bus, off % fk.hc + 1);
	fk_devdir(idx, dir, sizeof(dir));
	xmkdir("%s", dir);
	xsnprintf(path, sizeof(path), "%s/vhci_hcd.%u/usb%u/authorized_default",
	    fk.plat, c, bus);
	xget(path, def, sizeof(def));
	xsnprintf(path, sizeof(path), "%s/authorized", dir);
	xput(path, "%s\n", strcmp(def, "0") == 0 ? "0" : "1");
	fk_write_status(c);
}

/* Another attacher (or the fake's test) puts a device on idx. */
static void
fk_foreign(unsigned int idx, uint32_t devid, int sockfd)
{
	struct fk_port *p = &fk.ports[idx];

	p->status = 6;
	p->speed = (idx % (2 * fk.hc)) >= fk.hc ? USBIP_SPEED_SUPER :
	    USBIP_SPEED_HIGH;
	p->devid = devid;
	p->sockfd = sockfd;
	fk_enumerate(idx);
}

static void
fk_free_port(unsigned int idx)
{
	char dir[PATH_MAX];
	struct fk_port *p = &fk.ports[idx];

	if (p->kfd != -1)
		close(p->kfd);
	memset(p, 0, sizeof(*p));
	p->status = 4;
	p->kfd = -1;
	fk_devdir(idx, dir, sizeof(dir));
	rmtree(dir);
	fk_write_status(idx / (2 * fk.hc));
}

static enum act
fk_next_act(void)
{
	if (fk.iscript < fk.nscript)
		return fk.script[fk.iscript++];
	return ACT_OK;
}

/* attach_store(), as in drivers/usb/usbip/vhci_sysfs.c. */
static int
fk_attach(const char *buf)
{
	unsigned int port, sockfd, devid, speed, c, r, idx;
	int type, ss;
	socklen_t len = sizeof(type);
	struct fk_port *p;
	enum act a;
	char tail;

	if (fk.nattach < FK_MAX_SCRIPT)
		xsnprintf(fk.attach_log[fk.nattach], sizeof(fk.attach_log[0]),
		    "%s", buf);
	fk.nattach++;
	if (sscanf(buf, "%u %u %u %u%c", &port, &sockfd, &devid, &speed,
	    &tail) != 4)
		return -EINVAL;
	c = port / (2 * fk.hc);
	r = port % fk.hc;
	if (c >= fk.nctrl || speed < 1 || speed > 6)
		return -EINVAL;
	ss = speed >= USBIP_SPEED_SUPER;
	idx = fk_index(c, ss, r);
	p = &fk.ports[idx];

	a = fk_next_act();
	switch (a) {
	case ACT_EBUSY_STEAL:
	case ACT_EINVAL_STEAL:
		fk_foreign(idx, 0xdead0001, 99);
		return a == ACT_EBUSY_STEAL ? -EBUSY : -EINVAL;
	case ACT_EBUSY:
		return -EBUSY;
	case ACT_EINVAL:
		return -EINVAL;
	case ACT_EAGAIN:
		return -EAGAIN;
	case ACT_OK:
		break;
	}
	if (getsockopt((int)sockfd, SOL_SOCKET, SO_TYPE, &type, &len) == -1 ||
	    type != SOCK_STREAM)
		return -EINVAL;
	if (p->status != 4)
		return -EBUSY;
	p->status = 5;
	p->speed = speed;
	p->devid = devid;
	p->sockfd = (int)sockfd;
	p->kfd = fcntl((int)sockfd, F_DUPFD_CLOEXEC, 0);
	if (fk.auto_enumerate)
		fk_enumerate(idx);
	else
		fk_write_status(c);
	return 0;
}

static int
fk_detach(const char *buf)
{
	unsigned int port, c, idx;
	char tail;

	fk.ndetach++;
	if (sscanf(buf, "%u%c", &port, &tail) != 1)
		return -EINVAL;
	c = port / (2 * fk.hc);
	if (c >= fk.nctrl)
		return -EINVAL;
	idx = fk_index(c, (port / fk.hc) % 2, port % fk.hc);
	if (fk.ports[idx].status == 4)
		return -EINVAL;		/* "not connected" */
	fk_free_port(idx);
	return 0;
}

/* Authorizing a device makes its configuration and interfaces appear. */
static void
fk_authorized(const char *path, const char *buf)
{
	char dir[PATH_MAX], idir[PATH_MAX], p[PATH_MAX], def[8] = "1";
	const char *base, *slash;
	int i;

	if (strcmp(buf, "1") != 0)
		return;
	slash = strrchr(path, '/');
	xsnprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	base = strrchr(dir, '/') + 1;
	if (strchr(base, ':') != NULL)
		return;			/* an interface */
	xsnprintf(p, sizeof(p), "%.*s/interface_authorized_default",
	    (int)(base - 1 - dir), dir);
	xget(p, def, sizeof(def));
	for (i = 0; i < fk.nintf; i++) {
		xsnprintf(idir, sizeof(idir), "%s/%s:1.%d", dir, base, i);
		xmkdir("%s", idir);
		xsnprintf(p, sizeof(p), "%s/bInterfaceClass", idir);
		xput(p, "%02x\n", fk.intf[i].cls);
		xsnprintf(p, sizeof(p), "%s/bInterfaceSubClass", idir);
		xput(p, "%02x\n", fk.intf[i].sub);
		xsnprintf(p, sizeof(p), "%s/bInterfaceProtocol", idir);
		xput(p, "%02x\n", fk.intf[i].proto);
		xsnprintf(p, sizeof(p), "%s/authorized", idir);
		xput(p, "%s\n", def);
	}
}

static int
fk_write_attr(void *arg, const char *path, const char *buf, size_t len)
{
	char val[64], *rel;
	size_t rl = strlen(fk.root);
	int rv;

	(void)arg;
	xsnprintf(val, sizeof(val), "%.*s", (int)len, buf);
	rel = strncmp(path, fk.root, rl) == 0 ? (char *)path + rl : (char *)path;
	if (strcmp(rel, "/platform/vhci_hcd.0/attach") == 0)
		rv = fk_attach(val);
	else if (strcmp(rel, "/platform/vhci_hcd.0/detach") == 0)
		rv = fk_detach(val);
	else {
		if (fk.nwlog < FK_MAX_LOG)
			xsnprintf(fk.wlog[fk.nwlog++], sizeof(fk.wlog[0]),
			    "%s=%s", rel, val);
		if (vhci_sysfs_write(NULL, path, buf, len) == -1)
			return -1;
		if (strlen(rel) > 11 &&
		    strcmp(rel + strlen(rel) - 11, "/authorized") == 0)
			fk_authorized(path, val);
		return 0;
	}
	if (rv < 0) {
		errno = -rv;
		return -1;
	}
	return 0;
}

static void
fk_sleep(void *arg, unsigned int usec)
{
	(void)arg;
	if (fk.nsleep < FK_MAX_SCRIPT)
		fk.sleeps[fk.nsleep] = usec;
	fk.nsleep++;
}

static const struct vhci_io fk_io = {
	.write_attr = fk_write_attr,
	.read_attr = vhci_sysfs_read,
	.sleep_usec = fk_sleep,
	.arg = NULL,
};

static int
fk_logged(const char *entry)
{
	int i;

	for (i = 0; i < fk.nwlog; i++)
		if (strcmp(fk.wlog[i], entry) == 0)
			return 1;
	return 0;
}

static void
fk_destroy(void)
{
	unsigned int i;

	if (fk.ports != NULL) {
		for (i = 0; i < fk.nports; i++)
			if (fk.ports[i].kfd != -1)
				close(fk.ports[i].kfd);
	}
	free(fk.ports);
	free(fk.busnum);
	if (fk.root[0] != '\0')
		rmtree(fk.root);
	memset(&fk, 0, sizeof(fk));
}

/* A tree of nctrl controllers with hc+hc ports each. */
static void
fk_create(unsigned int nctrl, unsigned int hc)
{
	char path[PATH_MAX];
	unsigned int c, h, i;

	fk_destroy();
	xsnprintf(fk.root, sizeof(fk.root), "/tmp/usbgw-vhci.XXXXXX");
	if (mkdtemp(fk.root) == NULL) {
		perror("mkdtemp");
		exit(2);
	}
	xsnprintf(fk.plat, sizeof(fk.plat), "%s/platform", fk.root);
	xsnprintf(fk.bus, sizeof(fk.bus), "%s/bus/usb", fk.root);
	xsnprintf(fk.hcd0, sizeof(fk.hcd0), "%s/vhci_hcd.0", fk.plat);
	fk.nctrl = nctrl;
	fk.hc = hc;
	fk.nports = 2 * hc * nctrl;
	fk.ports = xcalloc(fk.nports, sizeof(*fk.ports));
	fk.busnum = xcalloc(2 * nctrl, sizeof(*fk.busnum));
	for (i = 0; i < fk.nports; i++) {
		fk.ports[i].status = 4;
		fk.ports[i].kfd = -1;
	}
	xmkdir("%s", fk.bus);
	xsnprintf(path, sizeof(path), "%s/drivers_probe", fk.bus);
	xput(path, "%s", "");
	for (c = 0; c < nctrl; c++) {
		for (h = 0; h < 2; h++) {
			/* usb1 is a "real" controller; vhci buses follow. */
			fk.busnum[2 * c + h] = 2 + 2 * c + h;
			xmkdir("%s/vhci_hcd.%u/usb%u", fk.plat, c,
			    fk.busnum[2 * c + h]);
			xsnprintf(path, sizeof(path), "%s/vhci_hcd.%u/usb%u/speed",
			    fk.plat, c, fk.busnum[2 * c + h]);
			xput(path, "%s\n", h ? "10000" : "480");
			xsnprintf(path, sizeof(path),
			    "%s/vhci_hcd.%u/usb%u/authorized_default", fk.plat,
			    c, fk.busnum[2 * c + h]);
			xput(path, "1\n");
			xsnprintf(path, sizeof(path),
			    "%s/vhci_hcd.%u/usb%u/interface_authorized_default",
			    fk.plat, c, fk.busnum[2 * c + h]);
			xput(path, "1\n");
		}
		fk_write_status(c);
	}
	xsnprintf(path, sizeof(path), "%s/nports", fk.hcd0);
	xput(path, "%u\n", fk.nports);
	xsnprintf(path, sizeof(path), "%s/attach", fk.hcd0);
	xput(path, "%s", "");
	xsnprintf(path, sizeof(path), "%s/detach", fk.hcd0);
	xput(path, "%s", "");
	/* A mass-storage and a HID interface, by default. */
	fk.nintf = 2;
	fk.intf[0] = (struct fk_intf){ 0x08, 0x06, 0x50 };
	fk.intf[1] = (struct fk_intf){ 0x03, 0x01, 0x01 };
}

static void
fk_script(int n, ...)
{
	va_list ap;
	int i;

	va_start(ap, n);
	for (i = 0; i < n && i < FK_MAX_SCRIPT; i++)
		fk.script[i] = (enum act)va_arg(ap, int);
	va_end(ap);
	fk.nscript = n;
	fk.iscript = 0;
}

static void
fk_script_fill(enum act a, int n)
{
	int i;

	for (i = 0; i < n && i < FK_MAX_SCRIPT; i++)
		fk.script[i] = a;
	fk.nscript = i;
	fk.iscript = 0;
}

static struct vhci *
fk_open(void)
{
	struct vhci_params vp;

	memset(&vp, 0, sizeof(vp));
	vp.platform_dir = fk.plat;
	vp.usb_bus_dir = fk.bus;
	vp.io = &fk_io;
	vp.eagain_tries = -1;
	return vhci_open(&vp);
}

static int
stream_fd(void)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == -1) {
		perror("socketpair");
		exit(2);
	}
	close(sv[1]);
	return sv[0];
}

static int
count_fds(void)
{
	struct dirent *de;
	DIR *d;
	int n = 0;

	if ((d = opendir("/proc/self/fd")) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* A connected TCP pair on loopback: *a (the "upstream" end), *b. */
static void
tcp_pair(int *a, int *b)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int l;

	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (l == -1 || bind(l, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
	    listen(l, 1) == -1 ||
	    getsockname(l, (struct sockaddr *)&sin, &len) == -1) {
		perror("listen");
		exit(2);
	}
	*a = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (connect(*a, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
	    (*b = accept(l, NULL, NULL)) == -1) {
		perror("connect");
		exit(2);
	}
	close(l);
}

/* ---- tests ------------------------------------------------------------ */

static void
test_discovery(void)
{
	const struct vhci_port *p;
	struct vhci *v;
	unsigned int i, nfree = 0;

	fk_create(3, 8);
	v = fk_open();
	ok(v != NULL, "open: 3 controllers of 8+8");
	if (v == NULL)
		return;
	is_int(vhci_ncontrollers(v), 3, "three controllers");
	is_int(vhci_hc_ports(v), 8, "eight ports per hub");
	is_int(vhci_nports(v), 48, "48 ports");
	for (i = 0; i < 48; i++)
		nfree += vhci_port(v, i)->status == VHCI_ST_FREE;
	is_int(nfree, 48, "every port free");
	is_int(vhci_bad_lines(v), 0, "no malformed line");
	p = vhci_port(v, 0);
	ok(p->controller == 0 && p->hub == VHCI_HUB_HS && p->rhport == 0,
	    "port 0: controller 0, hs, rhport 0");
	p = vhci_port(v, 8);
	ok(p->controller == 0 && p->hub == VHCI_HUB_SS && p->rhport == 0,
	    "port 8: controller 0, ss, rhport 0");
	p = vhci_port(v, 16);
	ok(p->controller == 1 && p->hub == VHCI_HUB_HS && p->rhport == 0,
	    "port 16: controller 1, hs, rhport 0");
	p = vhci_port(v, 47);
	ok(p->controller == 2 && p->hub == VHCI_HUB_SS && p->rhport == 7,
	    "port 47: controller 2, ss, rhport 7");
	ok(vhci_port(v, 48) == NULL, "port 48 does not exist");
	is_int(vhci_roothub_busnum(v, 0, VHCI_HUB_HS), 2, "ctrl 0 hs is usb2");
	is_int(vhci_roothub_busnum(v, 2, VHCI_HUB_SS), 7, "ctrl 2 ss is usb7");
	vhci_free(v);

	/* No vhci_hcd at all. */
	fk_create(1, 8);
	rmtree(fk.plat);
	errno = 0;
	v = fk_open();
	ok(v == NULL && errno == ENODEV, "no vhci_hcd.0: ENODEV");
	vhci_free(v);

	/* nports that does not fit the status files. */
	fk_create(2, 8);
	{
		char path[PATH_MAX];

		xsnprintf(path, sizeof(path), "%s/nports", fk.hcd0);
		xput(path, "30\n");
	}
	errno = 0;
	v = fk_open();
	ok(v == NULL && errno == EINVAL, "nports 30 for 2 controllers: EINVAL");
	vhci_free(v);
}

static void
test_speed_hub(void)
{
	struct vhci *v;
	unsigned int port = 999;
	int fd, rv;

	is_int(vhci_hub_for_speed(USBIP_SPEED_LOW), VHCI_HUB_HS, "low -> hs");
	is_int(vhci_hub_for_speed(USBIP_SPEED_FULL), VHCI_HUB_HS, "full -> hs");
	is_int(vhci_hub_for_speed(USBIP_SPEED_HIGH), VHCI_HUB_HS, "high -> hs");
	is_int(vhci_hub_for_speed(USBIP_SPEED_WIRELESS), VHCI_HUB_HS,
	    "wireless -> hs");
	is_int(vhci_hub_for_speed(USBIP_SPEED_SUPER), VHCI_HUB_SS, "super -> ss");
	is_int(vhci_hub_for_speed(USBIP_SPEED_SUPER_PLUS), VHCI_HUB_SS,
	    "super+ -> ss");
	is_int(vhci_hub_for_speed(USBIP_SPEED_UNKNOWN), -1, "unknown refused");
	is_int(vhci_hub_for_speed(7), -1, "speed 7 refused");

	fk_create(1, 8);
	v = fk_open();
	fd = stream_fd();
	errno = 0;
	rv = vhci_attach(v, fd, 0x10002, USBIP_SPEED_UNKNOWN, &port);
	ok(rv == -1 && errno == EINVAL, "attach speed 0: EINVAL");
	is_int(fk.nattach, 0, "nothing written for speed 0");

	rv = vhci_attach(v, fd, 0x10002, USBIP_SPEED_HIGH, &port);
	ok(rv == 0 && port == 0, "high-speed device on port 0");
	{
		char want[64];

		xsnprintf(want, sizeof(want), "0 %d %u 3", fd, 0x10002);
		is_str(fk.attach_log[0], want, "attach wrote \"port fd devid speed\"");
	}
	is_int(vhci_port(v, 0)->status, VHCI_ST_INIT, "port 0 initializing");
	ok(fk.ports[0].status == 5 && fk.ports[0].kfd != -1,
	    "the kernel holds the socket on hs port 0");
	rv = vhci_attach(v, fd, 0x10003, USBIP_SPEED_SUPER, &port);
	ok(rv == 0 && port == 8, "superspeed device on port 8 (first ss)");
	ok(fk.ports[8].status == 5 && fk.ports[8].speed == 5,
	    "the kernel put it on ss rhport 0, the port we were told");
	rv = vhci_attach(v, fd, 0x10004, USBIP_SPEED_SUPER_PLUS, &port);
	ok(rv == 0 && port == 9, "superspeed+ device on port 9");
	rv = vhci_attach(v, fd, 0x10005, USBIP_SPEED_LOW, &port);
	ok(rv == 0 && port == 1, "low-speed device on port 1 (hs)");
	rv = vhci_attach(v, fd, 0x10006, USBIP_SPEED_FULL, &port);
	ok(rv == 0 && port == 2, "full-speed device on port 2 (hs)");
	close(fd);
	vhci_free(v);
}

static void
test_busy_and_controllers(void)
{
	struct vhci *v;
	unsigned int port, i, want;
	int fd, rv, okall = 1;

	fk_create(3, 8);
	for (i = 0; i < 6; i++)
		fk_foreign(i, 0x20000 + i, 40 + (int)i);
	v = fk_open();
	fd = stream_fd();
	rv = vhci_attach(v, fd, 0x10002, USBIP_SPEED_HIGH, &port);
	ok(rv == 0 && port == 6, "ports 0-5 used by others: got port 6");
	rv = vhci_attach(v, fd, 0x10003, USBIP_SPEED_HIGH, &port);
	ok(rv == 0 && port == 7, "then port 7");
	rv = vhci_attach(v, fd, 0x10004, USBIP_SPEED_HIGH, &port);
	ok(rv == 0 && port == 16, "controller 0 hs full: controller 1 port 16");
	for (i = 1; i < 16; i++) {
		want = i < 8 ? 16 + i : 32 + (i - 8);
		rv = vhci_attach(v, fd, 0x10010 + i, USBIP_SPEED_HIGH, &port);
		if (rv != 0 || port != want)
			okall = 0;
	}
	ok(okall, "hs ports fill in order: 17-23, then 32-39");
	errno = 0;
	rv = vhci_attach(v, fd, 0x10030, USBIP_SPEED_HIGH, &port);
	ok(rv == -1 && errno == ENOSPC, "every hs port used: ENOSPC");
	rv = vhci_attach(v, fd, 0x10031, USBIP_SPEED_SUPER, &port);
	ok(rv == 0 && port == 8, "a superspeed device still fits (port 8)");

	/* Restricted to controller 2 (config "vhci-controller 2"). */
	ok(vhci_restrict_controller(v, 3) == -1 && errno == EINVAL,
	    "no controller 3 to restrict to");
	ok(vhci_restrict_controller(v, 2) == 0, "restrict to controller 2");
	rv = vhci_attach(v, fd, 0x10033, USBIP_SPEED_SUPER, &port);
	ok(rv == 0 && port == 40, "superspeed on controller 2: port 40");
	vhci_restrict_controller(v, -1);
	rv = vhci_attach(v, fd, 0x10034, USBIP_SPEED_SUPER, &port);
	ok(rv == 0 && port == 9, "any controller again: port 9");

	/* A port freed behind our back is found by the full re-read. */
	fk_free_port(33);
	rv = vhci_attach(v, fd, 0x10032, USBIP_SPEED_HIGH, &port);
	ok(rv == 0 && port == 33, "port freed by someone else is reused");
	close(fd);
	vhci_free(v);
}

static void
test_races(void)
{
	struct vhci *v;
	unsigned int port, n;
	int fd, rv, distinct;

	fk_create(3, 8);
	v = fk_open();
	fd = stream_fd();

	fk_script(1, ACT_EBUSY_STEAL);
	rv = vhci_attach(v, fd, 0x10002, USBIP_SPEED_HIGH, &port);
	ok(rv == 0 && port == 1, "EBUSY race on port 0: attached on port 1");
	is_int(fk.nattach, 2, "two attach writes");
	ok(fk.ports[0].status == 6 && fk.ports[0].devid == 0xdead0001,
	    "port 0 is the other attacher's");

	fk.nattach = 0;
	fk_script(3, ACT_EBUSY, ACT_EBUSY, ACT_EBUSY);
	rv = vhci_attach(v, fd, 0x10003, USBIP_SPEED_HIGH, &port);
	ok(rv == 0 && port == 5, "EBUSY thrice with status unchanged: port 5");
	distinct = strncmp(fk.attach_log[0], "2 ", 2) == 0 &&
	    strncmp(fk.attach_log[1], "3 ", 2) == 0 &&
	    strncmp(fk.attach_log[2], "4 ", 2) == 0 &&
	    strncmp(fk.attach_log[3], "5 ", 2) == 0;
	ok(distinct, "each EBUSY port tried once (2, 3, 4, then 5)");

	/* EBUSY forever: bounded by the ports of the hub. */
	fk.nattach = 0;
	fk_script_fill(ACT_EBUSY, FK_MAX_SCRIPT);
	errno = 0;
	rv = vhci_attach(v, fd, 0x10004, USBIP_SPEED_SUPER, &port);
	ok(rv == -1 && errno == EBUSY, "EBUSY on every ss port: EBUSY");
	is_int(fk.nattach, 24, "one try per ss port (24), then give up");
	fk.nscript = fk.iscript = 0;

	/* Older kernels: EINVAL for a port in use. */
	fk.nattach = 0;
	fk_script(1, ACT_EINVAL_STEAL);
	rv = vhci_attach(v, fd, 0x10005, USBIP_SPEED_HIGH, &port);
	ok(rv == 0 && port == 3, "EINVAL on a port now used: next port (3)");
	is_int(fk.nattach, 2, "two writes");

	/* A real EINVAL ends it at once. */
	fk.nattach = 0;
	fk_script(1, ACT_EINVAL);
	errno = 0;
	rv = vhci_attach(v, fd, 0x10006, USBIP_SPEED_HIGH, &port);
	ok(rv == -1 && errno == EINVAL, "EINVAL on a free port: EINVAL");
	is_int(fk.nattach, 1, "one write only");

	/* Not a stream socket: the kernel refuses. */
	{
		int dg = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

		errno = 0;
		rv = vhci_attach(v, dg, 0x10006, USBIP_SPEED_HIGH, &port);
		ok(rv == -1 && errno == EINVAL, "datagram socket: EINVAL");
		close(dg);
	}

	/* EAGAIN: short backoff, bounded. */
	fk.nattach = fk.nsleep = 0;
	fk_script(2, ACT_EAGAIN, ACT_EAGAIN);
	rv = vhci_attach(v, fd, 0x10007, USBIP_SPEED_HIGH, &port);
	ok(rv == 0 && port == 4, "EAGAIN twice, then attached (port 4)");
	ok(fk.nattach == 3 && fk.nsleep == 2, "three writes, two pauses");
	ok(fk.sleeps[0] == VHCI_EAGAIN_BACKOFF_US &&
	    fk.sleeps[1] == 2 * VHCI_EAGAIN_BACKOFF_US, "backoff doubles");
	fk.nattach = fk.nsleep = 0;
	fk_script_fill(ACT_EAGAIN, 10);
	errno = 0;
	rv = vhci_attach(v, fd, 0x10008, USBIP_SPEED_HIGH, &port);
	ok(rv == -1 && errno == EAGAIN, "EAGAIN forever: EAGAIN");
	n = fk.nattach;
	ok(n == VHCI_EAGAIN_TRIES + 1 && fk.nsleep == VHCI_EAGAIN_TRIES,
	    "bounded: %u writes, %u pauses", n, fk.nsleep);
	fk.nscript = fk.iscript = 0;

	/* detach */
	fk.ndetach = 0;
	rv = vhci_detach(v, 4);
	ok(rv == 0 && fk.ports[4].status == 4 && fk.ndetach == 1,
	    "detach 4 frees the port");
	errno = 0;
	rv = vhci_detach(v, 4);
	ok(rv == -1 && errno == EINVAL, "detach of a free port: the kernel's EINVAL");
	errno = 0;
	rv = vhci_detach(v, 48);
	ok(rv == -1 && errno == EINVAL, "detach beyond nports: EINVAL");
	close(fd);
	vhci_free(v);
}

static void
test_big(void)
{
	struct vhci *v;
	unsigned int port, i, maxport = 0, nok = 0;
	char want[64];
	int fd, rv;

	/* The kernel's largest: 128 controllers of 15+15 ports. */
	fk_create(128, 15);
	v = fk_open();
	ok(v != NULL && vhci_nports(v) == 3840, "128 x 15+15: 3840 ports");
	if (v == NULL)
		return;
	fd = stream_fd();
	for (i = 0; i < 1920; i++) {
		rv = vhci_attach(v, fd, 0x10000 + i, USBIP_SPEED_HIGH, &port);
		if (rv == 0 && vhci_port(v, port)->hub == VHCI_HUB_HS) {
			nok++;
			if (port > maxport)
				maxport = port;
		}
	}
	is_int(nok, 1920, "1920 high-speed devices attached");
	is_int(maxport, 127 * 30 + 14, "the last on port 3824 (ctrl 127 hs 15)");
	for (i = 0; i < 1920; i++) {
		rv = vhci_attach(v, fd, 0x20000 + i, USBIP_SPEED_SUPER, &port);
		if (rv == 0 && vhci_port(v, port)->hub == VHCI_HUB_SS) {
			nok++;
			if (port > maxport)
				maxport = port;
		}
	}
	is_int(nok, 3840, "and 1920 superspeed: every port used");
	is_int(maxport, 3839, "the last on port 3839");
	xsnprintf(want, sizeof(want), "3839 %d %u 5", fd, 0x20000 + 1919);
	ok(fk.nattach >= 3840 && fk.ports[3839].devid == 0x20000 + 1919,
	    "the kernel took \"%s\"", want);
	errno = 0;
	ok(vhci_attach(v, fd, 1, USBIP_SPEED_HIGH, &port) == -1 &&
	    errno == ENOSPC, "then ENOSPC");
	vhci_refresh(v);
	is_int(vhci_port(v, 3000)->status, VHCI_ST_INIT, "port 3000 seen used");
	close(fd);
	vhci_free(v);
	fk_destroy();
}

struct parse_case {
	const char	*line;
	const char	*what;
};

static void
test_parse(void)
{
	static const struct parse_case bad[] = {
		{ "garbage", "one word" },
		{ "xs  0000 004 000 00000000 000000 0-0", "hub xs" },
		{ "hs  0000 004 000 00000000 000000", "six fields" },
		{ "hs  0000 004 000 00000000 000000 0-0 extra", "eight fields" },
		{ "hs  0016 004 000 00000000 000000 0-0", "port of controller 1" },
		{ "ss  0000 004 000 00000000 000000 0-0", "hs port number on ss" },
		{ "hs  0008 004 000 00000000 000000 0-0", "ss port number on hs" },
		{ "hs  -001 004 000 00000000 000000 0-0", "negative port" },
		{ "hs  0000 003 000 00000000 000000 0-0", "sta 3 (a stub state)" },
		{ "hs  0000 008 000 00000000 000000 0-0", "sta 8" },
		{ "hs  0000 0004 000 00000000 000000 0-0", "sta four digits" },
		{ "hs  0000 006 003 0001000g 000007 3-1", "dev not hex" },
		{ "hs  0000 006 003 000100020 000007 3-1", "dev nine digits" },
		{ "hs  0000 006 003 00010002 99999999999 3-1", "sockfd > INT_MAX" },
		{ "hs  0000 006 003 00010002 000007 ../../etc", "busid with slashes" },
		{ "hs  0000 006 003 00010002 000007 3-1;rm", "busid with ;" },
		{ "hs  0000 006 003 00010002 000007 0-0", "used without busid" },
		{ "hs  0000 006 005 00010002 000007 3-1", "superspeed on hs" },
		{ "ss  0008 006 003 00010002 000007 4-1", "high speed on ss" },
		{ "hs  0000 006 000 00010002 000007 3-1", "used with speed 0" },
		{ "hs  0000 004 003 00000000 000000 0-0", "free with a speed" },
		{ "hs  0000 004 000 00000001 000000 0-0", "free with a devid" },
		{ "hs  0000 004 000 00000000 000000 3-1", "free with a busid" },
		{ "hs  0000 006 003 00010002 000007 3-1111", "busid group of 4" },
		{ "hs  0000 006 003 00010002 000007 3-", "busid ends in -" },
		{ "hs  0000 006 003 00010002 000007 3-1-2", "busid two dashes" },
		{ "hs  0000 006 003 00010002 000007 "
		  "1-1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1", "busid too long" },
		{ "hs\x01 0000 004 000 00000000 000000 0-0", "control byte" },
		{ "hs  0000 004 000 00000000 000000 0-0\r", "CR" },
	};
	struct vhci_port ports[16];
	char buf[512];
	unsigned int i, nbad;
	int n, allbad = 1;

	for (i = 0; i < nitems(bad); i++) {
		n = vhci_status_parse(bad[i].line, strlen(bad[i].line), 0, 8,
		    ports, &nbad);
		if (n != 0 || nbad != 1 || ports[0].status != VHCI_ST_UNKNOWN ||
		    ports[8].status != VHCI_ST_UNKNOWN) {
			allbad = 0;
			diag("accepted: %s", bad[i].what);
		}
	}
	ok(allbad, "%zu kinds of malformed line refused, port left unknown",
	    nitems(bad));

	n = vhci_status_parse("hs  0002 006 003 00010002 000007 3-3\n", 37, 0,
	    8, ports, &nbad);
	ok(n == 1 && nbad == 0, "a used line parses");
	ok(ports[2].status == VHCI_ST_USED && ports[2].speed == 3 &&
	    ports[2].devid == 0x10002 && ports[2].sockfd == 7 &&
	    strcmp(ports[2].local_busid, "3-3") == 0 && ports[2].port == 2,
	    "its fields: used, high speed, devid 00010002, fd 7, 3-3");
	ok(ports[0].status == VHCI_ST_UNKNOWN, "lines not given stay unknown");

	n = vhci_status_parse("ss  0041 005 000 00000000 0000000000000000 0-0",
	    46, 2, 8, ports, &nbad);
	ok(n == 1 && ports[9].status == VHCI_ST_INIT && ports[9].rhport == 1 &&
	    ports[9].controller == 2, "the not-ready format (16-digit sockfd)");

	xsnprintf(buf, sizeof(buf),
	    "hub port sta spd dev      sockfd local_busid\n"
	    "hs  0000 004 000 00000000 000000 0-0\n"
	    "hs  0001 004 000 00000000 000000 0-0\n"
	    "hs  0001 006 003 00010002 000007 3-2\n"
	    "\n"
	    "ss  0008 006 005 00020003 000123 4-1.2\n");
	n = vhci_status_parse(buf, strlen(buf), 0, 8, ports, &nbad);
	ok(n == 2 && nbad == 1, "a port listed twice: counted bad");
	ok(ports[1].status == VHCI_ST_UNKNOWN, "and believed neither way");
	ok(ports[0].status == VHCI_ST_FREE && ports[8].status == VHCI_ST_USED &&
	    ports[8].sockfd == 123 && strcmp(ports[8].local_busid, "4-1.2") == 0,
	    "the other lines stand");

	memset(buf, 'a', sizeof(buf));
	memcpy(buf + 300, "\nhs  0003 004 000 00000000 000000 0-0\n", 38);
	n = vhci_status_parse(buf, 338, 0, 8, ports, &nbad);
	ok(n == 1 && nbad == 1 && ports[3].status == VHCI_ST_FREE,
	    "a 300-byte line is refused, the next one read");

	memcpy(buf, "hs  0004 004 000 00000000 000000 0-0\n", 37);
	buf[25] = '\0';
	n = vhci_status_parse(buf, 37, 0, 8, ports, &nbad);
	ok(n == 0 && nbad == 1, "a NUL inside a line");
	/* Found by the fuzzer: a NUL inside the busid field cut it short. */
	memcpy(buf, "hs  0000 006 003 00010002 000003 3-1.4\0\0.2\n", 43);
	n = vhci_status_parse(buf, 43, 0, 8, ports, &nbad);
	ok(n == 0 && nbad == 1 && ports[0].status == VHCI_ST_UNKNOWN,
	    "a NUL inside the busid field");
	n = vhci_status_parse(NULL, 0, 0, 8, ports, &nbad);
	ok(n == 0 && nbad == 0, "empty status: nothing known");
	ok(vhci_status_parse("", 0, 0, 0, ports, &nbad) == -1,
	    "zero ports per hub refused");
	ok(vhci_status_parse("", 0, 0, VHCI_MAX_HC_PORTS + 1, ports, &nbad) == -1,
	    "too many ports per hub refused");

	ok(vhci_busid_valid("0-0") && vhci_busid_valid("3-1") &&
	    vhci_busid_valid("12-1.4.15"), "busids 0-0, 3-1, 12-1.4.15 valid");
	ok(!vhci_busid_valid("") && !vhci_busid_valid("-1") &&
	    !vhci_busid_valid("3") && !vhci_busid_valid("3-1.") &&
	    !vhci_busid_valid("3.1-1") && !vhci_busid_valid("usb3"),
	    "busids '', -1, 3, 3-1., 3.1-1, usb3 invalid");
}

static void
test_malformed_tree(void)
{
	char path[PATH_MAX];
	struct vhci *v;
	unsigned int port;
	int fd, rv;

	fk_create(2, 8);
	/* Controller 1's status: half garbage. */
	xsnprintf(path, sizeof(path), "%s/status.1", fk.hcd0);
	xput(path,
	    "hub port sta spd dev      sockfd local_busid\n"
	    "hs  0016 004 000 00000000 000000 0-0\n"
	    "hs  0017 zzz\n"
	    "hs  0018 004 000 00000000 000000 0-0 trailing\n"
	    "hs  0002 004 000 00000000 000000 0-0\n"
	    "hs  0019 004 000 00000000 000000 0-0\n");
	v = fk_open();
	ok(v != NULL, "open with a damaged status.1");
	if (v == NULL)
		return;
	is_int(vhci_bad_lines(v), 3, "three malformed lines counted");
	is_int(vhci_port(v, 17)->status, VHCI_ST_UNKNOWN, "port 17 unknown");
	is_int(vhci_port(v, 16)->status, VHCI_ST_FREE, "port 16 free");
	is_int(vhci_port(v, 2)->status, VHCI_ST_FREE,
	    "controller 0 unaffected by a line about its port");
	fd = stream_fd();
	/* Fill controller 0's hs ports; the next must be 16, then 19. */
	for (rv = 0; rv < 8; rv++)
		vhci_attach(v, fd, 1, USBIP_SPEED_HIGH, &port);
	rv = vhci_attach(v, fd, 2, USBIP_SPEED_HIGH, &port);
	ok(rv == 0 && port == 16, "attach uses known-free port 16");
	/* The fake rewrote status.1 whole; damage it again. */
	xput(path,
	    "hub port sta spd dev      sockfd local_busid\n"
	    "hs  0017 zzz\n"
	    "hs  0019 004 000 00000000 000000 0-0\n");
	rv = vhci_attach(v, fd, 3, USBIP_SPEED_HIGH, &port);
	ok(rv == 0 && port == 19, "skips unknown 17 and 18: port 19");
	rv = vhci_attach(v, fd, 4, USBIP_SPEED_HIGH, &port);
	ok(rv == 0 && port == 17,
	    "once the kernel rewrote status.1, port 17 is usable again");

	/* An unreadable status file: its ports are unknown, open fails. */
	unlink(path);
	mkdir(path, 0755);
	ok(vhci_refresh(v) == -1, "refresh reports the unreadable file");
	is_int(vhci_port(v, 20)->status, VHCI_ST_UNKNOWN,
	    "its ports are unknown");
	close(fd);
	vhci_free(v);
}

static void
test_reconcile(void)
{
	struct attach_backend *be;
	struct attach_found *found;
	struct attach_record rec[5];
	struct vhci *v;
	size_t nfound, i;
	int adopt = -1, foreign = -1, stale = -1, unsure = -1, reused = -1;

	fk_create(3, 8);
	fk_foreign(0, 0x10002, 5);	/* ours, direct */
	fk_foreign(1, 0x30004, 6);	/* somebody else's */
	fk_foreign(8, 0x10003, 7);	/* ours, inspected */
	fk.ports[2].status = 5;		/* ours, still starting */
	fk_write_status(0);
	fk_foreign(16, 0x55555, 9);	/* our port 16, now another device */
	v = fk_open();
	be = attach_local_new(v, NULL);
	ok(be != NULL && be->ops == &attach_local_ops, "local back end");
	ok(be->ops->reconcile(be, &found, &nfound) == 0 && nfound == 5,
	    "reconcile lists the 5 ports in use");

	memset(rec, 0, sizeof(rec));
	rec[0] = (struct attach_record){ 0, 0x10002, 5, ATTACH_DIRECT, 0 };
	rec[1] = (struct attach_record){ 8, 0x10003, 7, ATTACH_INSPECTED, 0 };
	rec[2] = (struct attach_record){ 2, 0x10009, 8, ATTACH_DIRECT, 0 };
	rec[3] = (struct attach_record){ 3, 0x1000a, 4, ATTACH_DIRECT, 0 };
	rec[4] = (struct attach_record){ 16, 0x1000b, 9, ATTACH_DIRECT, 0 };
	attach_classify(found, nfound, rec, 5);
	for (i = 0; i < nfound; i++) {
		switch (found[i].port) {
		case 0: adopt = (int)found[i].verdict; break;
		case 1: foreign = (int)found[i].verdict; break;
		case 2: unsure = (int)found[i].verdict; break;
		case 8: stale = (int)found[i].verdict; break;
		case 16: reused = (int)found[i].verdict; break;
		}
	}
	is_int(adopt, ATTACH_V_ADOPT, "port 0 (ours, direct, alive): adopt");
	is_int(foreign, ATTACH_V_FOREIGN, "port 1 (not in the db): foreign");
	is_int(stale, ATTACH_V_STALE, "port 8 (ours, inspected): stale");
	is_int(unsure, ATTACH_V_UNSURE, "port 2 (starting): unsure");
	is_int(reused, ATTACH_V_FOREIGN, "port 16 (other devid): foreign");
	ok(rec[0].found >= 0 && rec[1].found >= 0 && rec[2].found >= 0,
	    "records 0-2 matched");
	ok(rec[3].found == -1 && rec[4].found == -1,
	    "records for ports 3 and 16 lost");
	for (i = 0; i < nfound; i++)
		if (found[i].port == 1)
			ok(found[i].devid == 0x30004 && found[i].kernel_fd == 6 &&
			    found[i].live && strcmp(found[i].local_busid, "2-2") == 0,
			    "foreign port reported with devid, fd, busid 2-2");
	free(found);
	ok(fk.ndetach == 0 && fk.nattach == 0, "reconcile wrote nothing");

	/* Adopt, then detach: the port is ours, it goes. */
	{
		struct attach_ctx ctx;

		attach_ctx_init(&ctx);
		ctx.port = 0;
		ctx.devid = 0x10002;
		ctx.kernel_fd = 5;
		ctx.state = ATTACH_ATTACHED;
		ok(be->ops->check(be, &ctx) == 1, "adopted port checks alive");
		ok(be->ops->detach(be, &ctx) == 0 && fk.ndetach == 1 &&
		    fk.ports[0].status == 4, "adopted port detached");
	}
	ok(attach_local_detach_port(be, 1) == 0 && fk.ports[1].status == 4,
	    "a foreign port goes only on explicit order");
	be->ops->free(be);
}

struct allow_arg {
	int	calls;
	uint8_t	allow_class;
	char	seen[4][40];
};

static int
allow_class(void *arg, const struct attach_intf *ai)
{
	struct allow_arg *a = arg;

	if (a->calls < 4)
		xsnprintf(a->seen[a->calls], sizeof(a->seen[0]), "%s %02x:%02x:%02x",
		    ai->name, ai->iclass, ai->isubclass, ai->iprotocol);
	a->calls++;
	return ai->iclass == a->allow_class;
}

static void
test_authorization(void)
{
	struct attach_local_params lp = { 1, 1 };
	struct attach_backend *be;
	struct attach_authz az;
	struct attach_ctx ctx;
	struct allow_arg aa;
	char path[PATH_MAX], val[16], dev[PATH_MAX];
	struct vhci *v;
	unsigned int c, h;
	int up, peer, rv, allzero = 1;

	fk_create(3, 8);
	v = fk_open();
	be = attach_local_new(v, &lp);
	ok(be != NULL, "lock-down back end");
	for (c = 0; c < 3; c++) {
		for (h = 0; h < 2; h++) {
			xsnprintf(path, sizeof(path),
			    "%s/vhci_hcd.%u/usb%u/authorized_default", fk.plat, c,
			    fk.busnum[2 * c + h]);
			if (xget(path, val, sizeof(val)) == -1 ||
			    strcmp(val, "0") != 0)
				allzero = 0;
			xsnprintf(path, sizeof(path),
			    "%s/vhci_hcd.%u/usb%u/interface_authorized_default",
			    fk.plat, c, fk.busnum[2 * c + h]);
			if (xget(path, val, sizeof(val)) == -1 ||
			    strcmp(val, "0") != 0)
				allzero = 0;
		}
	}
	ok(allzero, "authorized_default and interface_authorized_default 0 "
	    "on all 6 root hubs");
	ok(fk_logged("/platform/vhci_hcd.2/usb7/authorized_default=0"),
	    "written through the io seam (usb7)");

	tcp_pair(&up, &peer);
	attach_ctx_init(&ctx);
	xsnprintf(ctx.busid, sizeof(ctx.busid), "tc17-1-1");
	ctx.devid = 0x10002;
	ctx.speed = USBIP_SPEED_HIGH;
	ctx.upstream_fd = up;
	rv = be->ops->attach(be, &ctx);
	ok(rv == 0 && ctx.port == 0, "attached direct on port 0");
	memset(&az, 0, sizeof(az));
	memset(&aa, 0, sizeof(aa));
	aa.allow_class = 0x03;
	az.allow = allow_class;
	az.arg = &aa;
	rv = be->ops->authorize(be, &ctx, &az);
	is_int(rv, 1, "not enumerated yet: authorize says later");
	fk_enumerate(0);
	fk_devdir(0, dev, sizeof(dev));
	xsnprintf(path, sizeof(path), "%s/authorized", dev);
	xget(path, val, sizeof(val));
	is_str(val, "0", "enumerated device starts unauthorized");
	rv = be->ops->authorize(be, &ctx, &az);
	is_int(rv, 0, "authorize done");
	xget(path, val, sizeof(val));
	is_str(val, "1", "device authorized=1");
	is_str(ctx.local_busid, "2-1", "local busid 2-1");
	is_int(aa.calls, 2, "policy asked for both interfaces");
	is_str(aa.seen[0], "2-1:1.0 08:06:50", "interface 0 as the host sees it");
	is_str(aa.seen[1], "2-1:1.1 03:01:01", "interface 1 as the host sees it");
	ok(az.nallowed == 1 && az.ndenied == 1, "one allowed, one denied");
	xsnprintf(path, sizeof(path), "%s/2-1:1.0/authorized", dev);
	xget(path, val, sizeof(val));
	is_str(val, "0", "mass storage stays unauthorized");
	xsnprintf(path, sizeof(path), "%s/2-1:1.1/authorized", dev);
	xget(path, val, sizeof(val));
	is_str(val, "1", "HID authorized");
	ok(fk_logged("/bus/usb/drivers_probe=2-1:1.1") &&
	    !fk_logged("/bus/usb/drivers_probe=2-1:1.0"),
	    "drivers_probe for the HID interface only");

	/* Whole-device authorization (no per-interface policy). */
	{
		struct attach_ctx c2;
		int up2, peer2;

		tcp_pair(&up2, &peer2);
		attach_ctx_init(&c2);
		c2.devid = 0x10003;
		c2.speed = USBIP_SPEED_SUPER;
		c2.upstream_fd = up2;
		ok(be->ops->attach(be, &c2) == 0 && c2.port == 8,
		    "superspeed device on port 8");
		fk_enumerate(8);
		ok(be->ops->authorize(be, &c2, NULL) == 0 &&
		    strcmp(c2.local_busid, "3-1") == 0,
		    "authorized as a whole on the ss bus (3-1)");
		fk_devdir(8, dev, sizeof(dev));
		xsnprintf(path, sizeof(path), "%s/authorized", dev);
		xget(path, val, sizeof(val));
		is_str(val, "1", "3-1 authorized=1");
		close(up2);
		close(peer2);
	}

	/* The port now holds another device: nothing is authorized. */
	fk.ports[0].devid = 0x99999;
	fk_write_status(0);
	fk.nwlog = 0;
	errno = 0;
	rv = be->ops->authorize(be, &ctx, &az);
	ok(rv == -1 && errno == ESTALE, "someone else's device: ESTALE");
	is_int(fk.nwlog, 0, "nothing written");
	close(up);
	close(peer);
	be->ops->free(be);

	/* A root hub missing from sysfs: lock-down refuses to start. */
	fk_create(2, 8);
	xsnprintf(path, sizeof(path), "%s/vhci_hcd.1/usb5", fk.plat);
	rmtree(path);
	v = fk_open();
	errno = 0;
	be = attach_local_new(v, &lp);
	ok(be == NULL && errno == ENODEV, "missing root hub: no lock-down, no start");
	vhci_free(v);
}

static void
test_local_modes(void)
{
	struct attach_backend *be;
	struct attach_ctx ctx;
	struct vhci *v;
	char buf[16];
	int up, peer, kfd, fds_before, rv, fl;
	ssize_t n;

	fk_create(1, 8);
	v = fk_open();
	be = attach_local_new(v, NULL);

	/* direct */
	tcp_pair(&up, &peer);
	attach_ctx_init(&ctx);
	ctx.devid = 0x10002;
	ctx.speed = USBIP_SPEED_HIGH;
	ctx.upstream_fd = up;
	ctx.mode = ATTACH_DIRECT;
	rv = be->ops->attach(be, &ctx);
	ok(rv == 0 && ctx.state == ATTACH_ATTACHED, "direct: attached");
	ok(ctx.relay_fd == -1 && ctx.kernel_fd == up,
	    "direct: the kernel got the upstream fd, no relay");
	kfd = fk.ports[ctx.port].kfd;
	n = write(peer, "urb!", 4);
	ok(n == 4 && read(kfd, buf, sizeof(buf)) == 4 &&
	    memcmp(buf, "urb!", 4) == 0,
	    "direct: what the exporter sends reaches the kernel's socket");
	close(up);	/* the caller's duty; the kernel keeps its own */
	n = write(kfd, "ret", 3);
	ok(n == 3 && read(peer, buf, sizeof(buf)) == 3,
	    "direct: after the gateway closed its fd, the kernel still talks");
	errno = 0;
	rv = be->ops->attach(be, &ctx);
	ok(rv == -1 && errno == EALREADY, "attach twice: EALREADY");

	/* check, device leaves by itself, detach is then a no-op */
	ok(be->ops->check(be, &ctx) == 1, "check: still attached");
	fk_free_port((unsigned int)ctx.port);
	ok(be->ops->check(be, &ctx) == 0 && ctx.state == ATTACH_DETACHED,
	    "check: the vhci host let go");
	fk.ndetach = 0;
	ctx.state = ATTACH_ATTACHED;
	ok(be->ops->detach(be, &ctx) == 0 && fk.ndetach == 0,
	    "detach of a port already free writes nothing");
	close(peer);

	/* inspected */
	tcp_pair(&up, &peer);
	attach_ctx_init(&ctx);
	ctx.devid = 0x10003;
	ctx.speed = USBIP_SPEED_HIGH;
	ctx.upstream_fd = up;
	ctx.mode = ATTACH_INSPECTED;
	rv = be->ops->attach(be, &ctx);
	ok(rv == 0 && ctx.relay_fd >= 0 && ctx.kernel_fd >= 0 &&
	    ctx.kernel_fd != up, "inspected: attached with a socketpair");
	fl = fcntl(ctx.relay_fd, F_GETFL);
	ok(fl != -1 && (fl & O_NONBLOCK) &&
	    (fcntl(ctx.relay_fd, F_GETFD) & FD_CLOEXEC),
	    "inspected: relay end non-blocking, close-on-exec");
	ok(fcntl(ctx.kernel_fd, F_GETFD) == -1 && errno == EBADF,
	    "inspected: our copy of the kernel's end is closed");
	kfd = fk.ports[ctx.port].kfd;
	n = write(ctx.relay_fd, "cmd", 3);
	ok(n == 3 && read(kfd, buf, sizeof(buf)) == 3 &&
	    memcmp(buf, "cmd", 3) == 0, "inspected: relay -> kernel");
	n = write(kfd, "reply", 5);
	ok(n == 5 && read(ctx.relay_fd, buf, sizeof(buf)) == 5 &&
	    memcmp(buf, "reply", 5) == 0, "inspected: kernel -> relay");
	{
		char b2[4];

		n = recv(peer, b2, sizeof(b2), MSG_DONTWAIT);
		ok(n == -1 && errno == EAGAIN,
		    "inspected: the exporter sees nothing unrelayed");
	}
	fk.ndetach = 0;
	ok(be->ops->detach(be, &ctx) == 0 && fk.ndetach == 1 &&
	    ctx.state == ATTACH_DETACHED, "inspected: detach wrote the port");
	n = read(ctx.relay_fd, buf, sizeof(buf));
	ok(n == 0, "inspected: relay reads EOF once the kernel let go");
	ok(be->ops->detach(be, &ctx) == 0 && fk.ndetach == 1,
	    "detach again: no write");
	close(ctx.relay_fd);

	/* A port reused by another device is never detached. */
	attach_ctx_init(&ctx);
	ctx.devid = 0x10004;
	ctx.speed = USBIP_SPEED_HIGH;
	ctx.upstream_fd = up;
	ok(be->ops->attach(be, &ctx) == 0, "attached again");
	fk_free_port((unsigned int)ctx.port);
	fk_foreign((unsigned int)ctx.port, 0x77777, 3);
	fk.ndetach = 0;
	ok(be->ops->detach(be, &ctx) == 0 && fk.ndetach == 0 &&
	    fk.ports[ctx.port].status == 6,
	    "our port now holds another device: left alone");

	/* Failure leaks nothing. */
	fds_before = count_fds();
	fk_script_fill(ACT_EAGAIN, 10);
	attach_ctx_init(&ctx);
	ctx.devid = 0x10005;
	ctx.speed = USBIP_SPEED_HIGH;
	ctx.upstream_fd = up;
	ctx.mode = ATTACH_INSPECTED;
	errno = 0;
	rv = be->ops->attach(be, &ctx);
	ok(rv == -1 && errno == EAGAIN && ctx.state == ATTACH_IDLE &&
	    ctx.relay_fd == -1, "inspected attach failing: EAGAIN, idle");
	is_int(count_fds(), fds_before, "no descriptor leaked");
	ok(fcntl(up, F_GETFD) != -1, "the caller's upstream fd untouched");
	fk.nscript = fk.iscript = 0;
	{
		int dg = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

		ctx.upstream_fd = dg;
		errno = 0;
		ok(be->ops->attach(be, &ctx) == -1 && errno == EBADF,
		    "upstream not a stream socket: EBADF");
		close(dg);
	}
	close(up);
	close(peer);
	be->ops->free(be);
}

static void
test_names(void)
{
	enum attach_mode m;

	ok(attach_mode_parse("direct", &m) == 0 && m == ATTACH_DIRECT &&
	    attach_mode_parse("inspected", &m) == 0 && m == ATTACH_INSPECTED &&
	    attach_mode_parse("relay", &m) == -1, "mode names parse");
	is_str(attach_mode_name(ATTACH_INSPECTED), "inspected", "mode name");
	is_str(attach_verdict_name(ATTACH_V_STALE), "stale", "verdict name");
	is_str(vhci_status_name(VHCI_ST_INIT), "initializing", "status name");
}

int
main(void)
{
	log_init("test_vhci", 1, getenv("TEST_VERBOSE") ? LOG_LVL_DEBUG :
	    LOG_LVL_ERR);
	test_discovery();
	test_speed_hub();
	test_busy_and_controllers();
	test_races();
	test_parse();
	test_malformed_tree();
	test_reconcile();
	test_authorization();
	test_local_modes();
	test_big();
	test_names();
	fk_destroy();
	return done_testing();
}
