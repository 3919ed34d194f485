/*
 * vhci-kernel: a fake vhci_hcd for the local-mode tests.  It builds a
 * sysfs-like tree under ROOT and plays the kernel's part in it, closely
 * enough that usbgwd (vhci-root = ROOT/sys/devices/platform) runs its
 * real code against it:
 *
 *  - vhci_hcd.0/{attach,detach} and bus/usb/drivers_probe are FIFOs that
 *    this program reads; status, status.N, nports, the root hubs' speed
 *    and *_authorized_default are plain files.
 *  - attach: the kernel takes its own reference to the attacher's socket
 *    (sockfd_lookup) before the write returns.  Here the attach FIFO is
 *    kept full, so the attacher's write blocks; meanwhile every socket of
 *    the attacher (-p PIDFILE) is copied with pidfd_getfd(2); then the
 *    FIFO is drained, the line "PORT SOCKFD DEVID SPEED" read, and the
 *    copy of SOCKFD kept.  The port shows sta 005 (not yet addressed).
 *  - it enumerates the device over that socket as vhci's hub driver
 *    would (GET_DESCRIPTOR device, configuration, serial string; devid
 *    as given), creates usbN/N-P and its interface directories with
 *    `authorized` files (from the root hub's *_authorized_default), and
 *    shows the port used (sta 006, spd, devid, sockfd, N-P).
 *  - detach "PORT", or the socket's EOF: the socket is closed, the port
 *    freed, the directories removed.
 *  - commands, one a line, on the FIFO ROOT/ctl: "unplug PORT" (the host
 *    lets go by itself), "foreign PORT DEVID SOCKFD SPEED" (a port that
 *    someone else attached), "badurb PORT" (a bulk IN URB to endpoint 9,
 *    which no simulated device has), "load PORT MIB KIB INFLIGHT" (bulk
 *    IN from endpoint 0x81, e.g. the simulator's source: MIB MiB in URBs
 *    of KIB KiB, INFLIGHT of them at a time; prints the throughput).
 *
 * Every event is one line on stdout ("attach port=0 sockfd=14 ..."), for
 * the test to grep.  ROOT/ready appears once the tree is built.
 *
 * usage: vhci-kernel [-c CONTROLLERS] [-n PORTS] -p PIDFILE ROOT
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/desc.h"
#include "proto/usbip.h"
#include "base/util.h"

#define VK_MAX_CTRL	8
#define VK_MAX_HC	15
#define VK_MAX_GRAB	256
#define VK_IO_MS	3000
#define VK_TICK_MS	2
#define VK_MAX_INTF	16
#define VK_ROOT_MAX	1024

struct vk_port {
	int		sta;		/* 4 free, 5 not addressed, 6 used */
	uint32_t	speed, devid;
	int		sockfd;		/* the attacher's fd number */
	int		fd;		/* our reference, -1 */
	char		busid[32];	/* "3-1" */
	bool		foreign;
	bool		enumerate;	/* to do, from the main loop */
};

static struct {
	char		root[VK_ROOT_MAX];
	char		plat[VK_ROOT_MAX + 32];	/* ROOT/sys/devices/platform */
	char		hcd0[VK_ROOT_MAX + 64];
	char		attach_path[PATH_MAX];	/* realpath */
	const char	*pidfile;
	int		nctrl, hc;
	struct vk_port	port[VK_MAX_CTRL * 2 * VK_MAX_HC];
	int		attach_fd, detach_fd, probe_fd, ctl_fd;
	int		pipe_size;
	pid_t		pid;
	int		pidfd;
	bool		can_grab;
	uint32_t	seq;
} K;

static volatile sig_atomic_t quit;

static void	service_attach(void);

static void vk_say(const char *, ...) __attribute__((format(printf, 1, 2)));

static void
vk_say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static void __attribute__((noreturn))
vk_die(const char *what)
{
	vk_say("fatal %s: %s", what, strerror(errno));
	exit(1);
}

static void
put_file(const char *path, const char *text)
{
	char tmp[PATH_MAX + 8];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if ((f = fopen(tmp, "w")) == NULL)
		vk_die(tmp);
	fputs(text, f);
	if (fclose(f) != 0 || rename(tmp, path) == -1)
		vk_die(path);
}

static int
get_int_file(const char *path, int dflt)
{
	char buf[32];
	FILE *f;
	int v = dflt;

	if ((f = fopen(path, "r")) == NULL)
		return dflt;
	if (fgets(buf, sizeof(buf), f) != NULL)
		v = atoi(buf);
	fclose(f);
	return v;
}

static void
mkdir_p(const char *path)
{
	char tmp[PATH_MAX], *p;

	usbgw_strlcpy(tmp, path, sizeof(tmp));
	for (p = tmp + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) == -1 && errno != EEXIST)
			vk_die(tmp);
		*p = '/';
	}
	if (mkdir(tmp, 0755) == -1 && errno != EEXIST)
		vk_die(tmp);
}

static void
rm_rf(const char *path)
{
	char sub[PATH_MAX];
	struct dirent *de;
	DIR *d;

	if ((d = opendir(path)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (strcmp(de->d_name, ".") == 0 ||
			    strcmp(de->d_name, "..") == 0)
				continue;
			snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
			rm_rf(sub);
		}
		closedir(d);
		rmdir(path);
	} else
		unlink(path);
}

static int
open_fifo(const char *path)
{
	int fd;

	unlink(path);
	if (mkfifo(path, 0600) == -1)
		vk_die(path);
	/* O_RDWR: a writer never blocks for want of a reader, and we never
	 * see EOF between writers. */
	if ((fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)) == -1)
		vk_die(path);
	return fd;
}

static int
bus_of(int c, int ss)
{
	return 3 + 2 * c + ss;
}

static void
port_place(int p, int *c, int *ss, int *rh)
{
	*c = p / (2 * K.hc);
	*ss = (p % (2 * K.hc)) >= K.hc;
	*rh = p % K.hc;
}

static void
write_status(int c)
{
	char path[PATH_MAX + 16], buf[8192], line[128];
	const struct vk_port *vp;
	int i, p;

	snprintf(buf, sizeof(buf), "hub port sta spd dev      sockfd "
	    "local_busid\n");
	for (i = 0; i < 2 * K.hc; i++) {
		p = c * 2 * K.hc + i;
		vp = &K.port[p];
		if (vp->sta == 6)
			snprintf(line, sizeof(line), "%2s  %04d %03d %03u %08x "
			    "%06d %s\n", i < K.hc ? "hs" : "ss", p, vp->sta,
			    vp->speed, vp->devid, vp->sockfd, vp->busid);
		else
			snprintf(line, sizeof(line), "%2s  %04d %03d 000 "
			    "00000000 000000 0-0\n", i < K.hc ? "hs" : "ss", p,
			    vp->sta);
		usbgw_strlcat(buf, line, sizeof(buf));
	}
	if (c == 0)
		snprintf(path, sizeof(path), "%s/status", K.hcd0);
	else
		snprintf(path, sizeof(path), "%s/status.%d", K.hcd0, c);
	put_file(path, buf);
}

static void
build_tree(void)
{
	char path[PATH_MAX + 64], buf[32];
	int c, ss, p;

	snprintf(K.plat, sizeof(K.plat), "%s/sys/devices/platform", K.root);
	snprintf(K.hcd0, sizeof(K.hcd0), "%s/vhci_hcd.0", K.plat);
	for (c = 0; c < K.nctrl; c++) {
		for (ss = 0; ss < 2; ss++) {
			snprintf(path, sizeof(path), "%s/vhci_hcd.%d/usb%d",
			    K.plat, c, bus_of(c, ss));
			mkdir_p(path);
			usbgw_strlcat(path, "/speed", sizeof(path));
			put_file(path, ss ? "5000\n" : "480\n");
			snprintf(path, sizeof(path), "%s/vhci_hcd.%d/usb%d/"
			    "authorized_default", K.plat, c, bus_of(c, ss));
			put_file(path, "1\n");
			snprintf(path, sizeof(path), "%s/vhci_hcd.%d/usb%d/"
			    "interface_authorized_default", K.plat, c,
			    bus_of(c, ss));
			put_file(path, "1\n");
		}
	}
	snprintf(path, sizeof(path), "%s/nports", K.hcd0);
	snprintf(buf, sizeof(buf), "%d\n", K.nctrl * 2 * K.hc);
	put_file(path, buf);
	for (p = 0; p < K.nctrl * 2 * K.hc; p++) {
		K.port[p].sta = 4;
		K.port[p].fd = -1;
	}
	for (c = 0; c < K.nctrl; c++)
		write_status(c);
	snprintf(path, sizeof(path), "%s/attach", K.hcd0);
	K.attach_fd = open_fifo(path);
	if (realpath(path, K.attach_path) == NULL)
		vk_die(path);
	snprintf(path, sizeof(path), "%s/detach", K.hcd0);
	K.detach_fd = open_fifo(path);
	snprintf(path, sizeof(path), "%s/sys/bus/usb", K.root);
	mkdir_p(path);
	usbgw_strlcat(path, "/drivers_probe", sizeof(path));
	K.probe_fd = open_fifo(path);
	snprintf(path, sizeof(path), "%s/ctl", K.root);
	K.ctl_fd = open_fifo(path);

	/* The smallest pipe, filled: an attacher's write waits for us. */
	K.pipe_size = fcntl(K.attach_fd, F_SETPIPE_SZ, 4096);
	if (K.pipe_size == -1)
		K.pipe_size = fcntl(K.attach_fd, F_GETPIPE_SZ);
	if (K.pipe_size <= 0)
		vk_die("F_GETPIPE_SZ");
}

static void
fill_attach(void)
{
	char junk[4096];
	int left = K.pipe_size;
	ssize_t n;

	memset(junk, 'x', sizeof(junk));
	while (left > 0) {
		n = write(K.attach_fd, junk, (size_t)left < sizeof(junk) ?
		    (size_t)left : sizeof(junk));
		if (n <= 0) {
			if (n == -1 && errno == EAGAIN)
				break;	/* full already */
			vk_die("filling attach");
		}
		left -= (int)n;
	}
}

/*
 * Move exactly len bytes (POLLIN: read into buf, POLLOUT: send from it)
 * within VK_IO_MS.
 */
static int
io_full(int fd, short events, void *buf, size_t len)
{
	struct pollfd pfd = { fd, events, 0 };
	size_t off = 0;
	ssize_t n;
	int waited = 0;

	while (off < len) {
		/*
		 * An inspected attachment's URBs go through the attacher:
		 * never wait on it while it waits on us (another attach).
		 */
		service_attach();
		if (poll(&pfd, 1, VK_TICK_MS) <= 0) {
			if ((waited += VK_TICK_MS) >= VK_IO_MS)
				return -1;
			continue;
		}
		n = events == POLLIN ? read(fd, (char *)buf + off, len - off) :
		    send(fd, (char *)buf + off, len - off, MSG_NOSIGNAL);
		if (n == 0 && events == POLLIN)
			return -1;
		if (n == -1) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return -1;
		}
		off += (size_t)n;
	}
	return 0;
}

static int
read_full(int fd, void *buf, size_t len)
{
	return io_full(fd, POLLIN, buf, len);
}

static int
write_full(int fd, const void *buf, size_t len)
{
	return io_full(fd, POLLOUT, (void *)(uintptr_t)buf, len);
}

/* A control IN transfer on ep0, as vhci sends it; data into out. */
static int
control_in(int fd, uint32_t devid, uint8_t type, uint8_t req, uint16_t value,
    uint16_t index, uint16_t len, uint8_t *out, uint32_t *got)
{
	struct usbip_urb_hdr h;
	uint8_t buf[USBIP_URB_HDR_LEN];
	const char *why;
	uint32_t seq = ++K.seq;

	usbip_control_submit(&h, seq, devid, type, req, value, index, len);
	usbip_urb_hdr_encode(buf, &h);
	if (write_full(fd, buf, sizeof(buf)) == -1 ||
	    read_full(fd, buf, sizeof(buf)) == -1)
		return -1;
	if (usbip_urb_hdr_decode(buf, sizeof(buf), USBIP_FROM_SERVER, &h,
	    &why) < 0 || h.command != USBIP_RET_SUBMIT || h.seqnum != seq ||
	    h.u.ret_submit.actual_length < 0 ||
	    h.u.ret_submit.actual_length > len) {
		vk_say("error bad reply to seqnum %u", seq);
		return -1;
	}
	*got = (uint32_t)h.u.ret_submit.actual_length;
	if (*got > 0 && read_full(fd, out, *got) == -1)
		return -1;
	return h.u.ret_submit.status == 0 ? 0 : -1;
}

static int
get_desc(int fd, uint32_t devid, uint8_t type, uint8_t idx, uint16_t lang,
    uint16_t len, uint8_t *out, uint32_t *got)
{
	return control_in(fd, devid, 0x80, USB_REQ_GET_DESCRIPTOR,
	    (uint16_t)(type << 8 | idx), lang, len, out, got);
}

static void
intf_dirs(const char *devdir, const char *busid, const struct desc_config *c,
    int authorized, char *list, size_t listlen)
{
	char dir[PATH_MAX + 64], file[PATH_MAX + 96], val[16], one[16];
	int i;

	list[0] = '\0';
	for (i = 0; i < c->nalt; i++) {
		const struct desc_alt *a = &c->alt[i];

		if (a->alt != 0)
			continue;
		snprintf(dir, sizeof(dir), "%s/%s:%u.%u", devdir, busid,
		    c->value, a->number);
		mkdir_p(dir);
#define ATTR(name, fmt, v) do { \
	snprintf(file, sizeof(file), "%s/" name, dir); \
	snprintf(val, sizeof(val), fmt "\n", v); \
	put_file(file, val); } while (0)
		ATTR("bInterfaceClass", "%02x", a->cls);
		ATTR("bInterfaceSubClass", "%02x", a->subcls);
		ATTR("bInterfaceProtocol", "%02x", a->proto);
		ATTR("authorized", "%d", authorized);
#undef ATTR
		snprintf(one, sizeof(one), "%s%02x:%02x:%02x", list[0] ? "," :
		    "", a->cls, a->subcls, a->proto);
		usbgw_strlcat(list, one, listlen);
	}
}

static void
port_dir(int p, char *out, size_t len)
{
	int c, ss, rh;

	port_place(p, &c, &ss, &rh);
	snprintf(out, len, "%s/vhci_hcd.%d/usb%d/%d-%d", K.plat, c,
	    bus_of(c, ss), bus_of(c, ss), rh + 1);
}

/* Enumerate the device on port p: what the hub driver reads first. */
static void
enumerate(int p)
{
	struct vk_port *vp = &K.port[p];
	uint8_t dd[18], cfg[4096], str[255];
	char dir[PATH_MAX + 32], file[PATH_MAX + 64], serial[128] = "";
	char ifs[VK_MAX_INTF * 10] = "";
	struct desc_config c;
	uint32_t got;
	const char *why;
	uint16_t total;
	int ctrl, ss, rh, dev_auth, intf_auth;

	port_place(p, &ctrl, &ss, &rh);
	if (get_desc(vp->fd, vp->devid, USB_DT_DEVICE, 0, 0, 18, dd,
	    &got) == -1 || got != 18) {
		vk_say("error enumerate port=%d: device descriptor", p);
		goto bad;
	}
	if (get_desc(vp->fd, vp->devid, USB_DT_CONFIG, 0, 0, 9, cfg,
	    &got) == -1 || got != 9) {
		vk_say("error enumerate port=%d: configuration header", p);
		goto bad;
	}
	total = (uint16_t)(cfg[2] | cfg[3] << 8);
	if (total < 9 || total > sizeof(cfg) ||
	    get_desc(vp->fd, vp->devid, USB_DT_CONFIG, 0, 0, total, cfg,
	    &got) == -1 || got != total ||
	    desc_parse_config(cfg, total, &c, &why) == -1) {
		vk_say("error enumerate port=%d: configuration", p);
		goto bad;
	}
	if (dd[16] != 0 && get_desc(vp->fd, vp->devid, USB_DT_STRING, dd[16],
	    0x0409, sizeof(str), str, &got) == 0)
		desc_string(str, got, serial, sizeof(serial));

	snprintf(vp->busid, sizeof(vp->busid), "%d-%d", bus_of(ctrl, ss),
	    rh + 1);
	snprintf(file, sizeof(file), "%s/vhci_hcd.%d/usb%d/authorized_default",
	    K.plat, ctrl, bus_of(ctrl, ss));
	dev_auth = get_int_file(file, 1) != 0;
	snprintf(file, sizeof(file), "%s/vhci_hcd.%d/usb%d/"
	    "interface_authorized_default", K.plat, ctrl, bus_of(ctrl, ss));
	intf_auth = get_int_file(file, 1) != 0;
	port_dir(p, dir, sizeof(dir));
	mkdir_p(dir);
	snprintf(file, sizeof(file), "%s/authorized", dir);
	put_file(file, dev_auth ? "1\n" : "0\n");
	intf_dirs(dir, vp->busid, &c, intf_auth, ifs, sizeof(ifs));
	vp->sta = 6;
	write_status(ctrl);
	vk_say("enumerated port=%d busid=%s vid=%02x%02x pid=%02x%02x "
	    "serial=%s ifaces=%s authorized=%d", p, vp->busid, dd[9], dd[8],
	    dd[11], dd[10], serial, ifs, dev_auth);
	return;
bad:
	vp->sta = 7;
	write_status(ctrl);
}

static void
port_free(int p, const char *what)
{
	struct vk_port *vp = &K.port[p];
	char dir[PATH_MAX + 32];
	int c, ss, rh;

	port_place(p, &c, &ss, &rh);
	if (vp->fd != -1)
		close(vp->fd);
	if (vp->sta == 6 || vp->sta == 7) {
		port_dir(p, dir, sizeof(dir));
		rm_rf(dir);
	}
	memset(vp, 0, sizeof(*vp));
	vp->sta = 4;
	vp->fd = -1;
	write_status(c);
	vk_say("%s port=%d", what, p);
}

struct grab {
	int	num, fd;
};

/* Copy every socket of the attacher (it is blocked in its write). */
static int
grab_sockets(struct grab *g, int max)
{
	char dir[64], path[PATH_MAX], link[PATH_MAX];
	struct dirent *de;
	ssize_t n;
	int count = 0, fd;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%ld/fd", (long)K.pid);
	if ((d = opendir(dir)) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL && count < max) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if ((n = readlink(path, link, sizeof(link) - 1)) <= 0)
			continue;
		link[n] = '\0';
		if (strncmp(link, "socket:", 7) != 0)
			continue;
		fd = (int)syscall(SYS_pidfd_getfd, K.pidfd, atoi(de->d_name), 0);
		if (fd == -1)
			continue;
		g[count].num = atoi(de->d_name);
		g[count].fd = fd;
		count++;
	}
	closedir(d);
	return count;
}

/* Has the attacher opened the attach FIFO (and so is about to block)? */
static bool
attacher_waiting(void)
{
	char dir[64], path[PATH_MAX], link[PATH_MAX];
	struct dirent *de;
	bool found = false;
	ssize_t n;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%ld/fd", (long)K.pid);
	if ((d = opendir(dir)) == NULL)
		return false;
	while (!found && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if ((n = readlink(path, link, sizeof(link) - 1)) <= 0)
			continue;
		link[n] = '\0';
		found = strcmp(link, K.attach_path) == 0;
	}
	closedir(d);
	return found;
}

static void
do_attach(void)
{
	struct grab g[VK_MAX_GRAB];
	char junk[4096], line[128];
	int ng = 0, i, port, sockfd, c, ss, rh, want_ss, kept = -1;
	unsigned int devid, speed;
	struct pollfd pfd = { K.attach_fd, POLLIN, 0 };
	struct timespec tick = { 0, VK_TICK_MS * 1000000L };
	ssize_t n;
	int left = K.pipe_size;

	if (K.can_grab)
		ng = grab_sockets(g, VK_MAX_GRAB);
	while (left > 0) {
		n = read(K.attach_fd, junk, (size_t)left < sizeof(junk) ?
		    (size_t)left : sizeof(junk));
		if (n <= 0)
			break;
		left -= (int)n;
	}
	/* The attacher's write completes now. */
	if (poll(&pfd, 1, VK_IO_MS) <= 0 ||
	    (n = read(K.attach_fd, line, sizeof(line) - 1)) <= 0) {
		vk_say("error attach: nothing written");
		goto out;
	}
	line[n] = '\0';
	/* Until the attacher has closed the file: one write, one attach. */
	for (i = 0; i < VK_IO_MS / VK_TICK_MS && attacher_waiting(); i++)
		nanosleep(&tick, NULL);
	if (sscanf(line, "%d %d %u %u", &port, &sockfd, &devid, &speed) != 4 ||
	    port < 0 || port >= K.nctrl * 2 * K.hc) {
		vk_say("error attach: bad line \"%s\"", line);
		goto out;
	}
	port_place(port, &c, &ss, &rh);
	want_ss = speed >= USBIP_SPEED_SUPER;
	vk_say("attach port=%d sockfd=%d devid=%u speed=%u hub=%s", port,
	    sockfd, devid, speed, ss ? "ss" : "hs");
	if (ss != want_ss) {
		vk_say("error attach port=%d: speed %u on the %s hub", port,
		    speed, ss ? "ss" : "hs");
		goto out;
	}
	if (K.port[port].sta != 4) {
		vk_say("error attach port=%d: busy", port);
		goto out;
	}
	for (i = 0; i < ng; i++)
		if (g[i].num == sockfd)
			kept = i;
	K.port[port].speed = speed;
	K.port[port].devid = devid;
	K.port[port].sockfd = sockfd;
	K.port[port].fd = -1;
	K.port[port].sta = 5;
	write_status(c);
	if (kept == -1) {
		vk_say("nograb port=%d", port);
		goto out;
	}
	K.port[port].fd = g[kept].fd;
	g[kept].fd = -1;
	{
		struct sockaddr_storage ss_addr;
		socklen_t sl = sizeof(ss_addr);

		getsockname(K.port[port].fd, (struct sockaddr *)&ss_addr, &sl);
		vk_say("grabbed port=%d kind=%s", port,
		    ss_addr.ss_family == AF_UNIX ? "socketpair" : "tcp");
	}
	K.port[port].enumerate = true;
out:
	for (i = 0; i < ng; i++)
		if (g[i].fd != -1)
			close(g[i].fd);
	fill_attach();
}

static void
service_attach(void)
{
	if (K.pid > 0 && K.pidfd > 0 && attacher_waiting())
		do_attach();
}

static void
do_detach(void)
{
	char buf[64];
	ssize_t n;
	int port;

	if ((n = read(K.detach_fd, buf, sizeof(buf) - 1)) <= 0)
		return;
	buf[n] = '\0';
	port = atoi(buf);
	if (port < 0 || port >= K.nctrl * 2 * K.hc || K.port[port].sta == 4) {
		/* the kernel would answer EINVAL; a FIFO cannot */
		vk_say("detach-refused \"%s\": not connected", buf);
		return;
	}
	port_free(port, "detach");
}

static void
do_probe(void)
{
	char buf[256];
	ssize_t n;

	if ((n = read(K.probe_fd, buf, sizeof(buf) - 1)) <= 0)
		return;
	buf[n] = '\0';
	vk_say("probe %s", buf);
}

static void
bad_urb(int p)
{
	struct usbip_urb_hdr h;
	uint8_t buf[USBIP_URB_HDR_LEN];

	memset(&h, 0, sizeof(h));
	h.command = USBIP_CMD_SUBMIT;
	h.seqnum = ++K.seq;
	h.devid = K.port[p].devid;
	h.direction = USBIP_DIR_IN;
	h.ep = 9;
	h.u.submit.transfer_flags = 0x0200;
	h.u.submit.transfer_buffer_length = 512;
	usbip_urb_hdr_encode(buf, &h);
	vk_say("badurb port=%d sent=%s", p, write_full(K.port[p].fd, buf,
	    sizeof(buf)) == 0 ? "yes" : "no");
}

/* Plain blocking-style I/O for the load: no attach is served meanwhile. */
static int
load_io(int fd, void *buf, size_t len, bool out)
{
	struct pollfd pfd = { fd, out ? POLLOUT : POLLIN, 0 };
	size_t off = 0;
	ssize_t n;

	while (off < len) {
		n = out ? send(fd, (const char *)buf + off, len - off,
		    MSG_NOSIGNAL | MSG_DONTWAIT) : recv(fd, (char *)buf + off,
		    len - off, MSG_DONTWAIT);
		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			return -1;
		if (poll(&pfd, 1, VK_IO_MS) <= 0)
			return -1;
	}
	return 0;
}

static void
bulk_load(int p, unsigned int mib, unsigned int kib, unsigned int inflight)
{
	static uint8_t data[USBIP_MAX_TRANSFER];
	struct vk_port *vp = &K.port[p];
	struct usbip_urb_hdr h;
	struct timespec t0, t1;
	uint8_t buf[USBIP_URB_HDR_LEN];
	uint64_t want = (uint64_t)mib << 20, got = 0, asked = 0;
	uint32_t len = kib << 10, out = 0;
	const char *why;
	double secs;

	if (len == 0 || len > sizeof(data) || inflight == 0 || want == 0) {
		vk_say("error load: bad arguments");
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (got < want) {
		while (out < inflight && asked < want) {
			memset(&h, 0, sizeof(h));
			h.command = USBIP_CMD_SUBMIT;
			h.seqnum = ++K.seq;
			h.devid = vp->devid;
			h.direction = USBIP_DIR_IN;
			h.ep = 1;
			h.u.submit.transfer_flags = 0x0200;
			h.u.submit.transfer_buffer_length = (int32_t)len;
			usbip_urb_hdr_encode(buf, &h);
			if (load_io(vp->fd, buf, sizeof(buf), true) == -1)
				goto fail;
			asked += len;
			out++;
		}
		if (load_io(vp->fd, buf, sizeof(buf), false) == -1 ||
		    usbip_urb_hdr_decode(buf, sizeof(buf), USBIP_FROM_SERVER, &h,
		    &why) < 0 || h.command != USBIP_RET_SUBMIT ||
		    h.u.ret_submit.status != 0 ||
		    h.u.ret_submit.actual_length <= 0 ||
		    (uint32_t)h.u.ret_submit.actual_length > len ||
		    load_io(vp->fd, data, (size_t)h.u.ret_submit.actual_length,
		    false) == -1)
			goto fail;
		got += (uint64_t)h.u.ret_submit.actual_length;
		out--;
	}
	/* the URBs still in flight complete too: drain them */
	while (out > 0) {
		if (load_io(vp->fd, buf, sizeof(buf), false) == -1 ||
		    usbip_urb_hdr_decode(buf, sizeof(buf), USBIP_FROM_SERVER, &h,
		    &why) < 0 || h.u.ret_submit.actual_length < 0 ||
		    (uint32_t)h.u.ret_submit.actual_length > len ||
		    load_io(vp->fd, data, (size_t)h.u.ret_submit.actual_length,
		    false) == -1)
			goto fail;
		out--;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) +
	    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	vk_say("load port=%d bytes=%llu seconds=%.3f mibps=%.1f", p,
	    (unsigned long long)got, secs, (double)got / 1048576.0 / secs);
	return;
fail:
	vk_say("error load port=%d after %llu bytes", p,
	    (unsigned long long)got);
}

static void
do_ctl(void)
{
	char buf[256], *line, *save = NULL;
	unsigned int devid, speed, mib, kib, inflight;
	int port, sockfd, c, ss, rh;
	ssize_t n;

	if ((n = read(K.ctl_fd, buf, sizeof(buf) - 1)) <= 0)
		return;
	buf[n] = '\0';
	for (line = strtok_r(buf, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		if (sscanf(line, "unplug %d", &port) == 1 && port >= 0 &&
		    port < K.nctrl * 2 * K.hc && K.port[port].sta != 4)
			port_free(port, "unplug");
		else if (sscanf(line, "load %d %u %u %u", &port, &mib, &kib,
		    &inflight) == 4 && port >= 0 &&
		    port < K.nctrl * 2 * K.hc && K.port[port].fd != -1)
			bulk_load(port, mib, kib, inflight);
		else if (sscanf(line, "badurb %d", &port) == 1 && port >= 0 &&
		    port < K.nctrl * 2 * K.hc && K.port[port].fd != -1)
			bad_urb(port);
		else if (sscanf(line, "foreign %d %x %d %u", &port, &devid,
		    &sockfd, &speed) == 4 && port >= 0 &&
		    port < K.nctrl * 2 * K.hc && K.port[port].sta == 4) {
			port_place(port, &c, &ss, &rh);
			K.port[port].sta = 6;
			K.port[port].devid = devid;
			K.port[port].sockfd = sockfd;
			K.port[port].speed = speed;
			K.port[port].foreign = true;
			snprintf(K.port[port].busid, sizeof(K.port[port].busid),
			    "%d-%d", bus_of(c, ss), rh + 1);
			write_status(c);
			vk_say("foreign port=%d", port);
		} else
			vk_say("error ctl \"%s\"", line);
	}
}

/* The attacher's side of a connection closed: vhci frees the port. */
static void
check_sockets(void)
{
	char c;
	int p;

	for (p = 0; p < K.nctrl * 2 * K.hc; p++) {
		if (K.port[p].fd == -1)
			continue;
		if (recv(K.port[p].fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0)
			port_free(p, "connection-lost");
	}
}

static void
on_term(int sig)
{
	quit = 1;
}

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr, "usage: vhci-kernel [-c CONTROLLERS] [-n PORTS] "
	    "-p PIDFILE ROOT\n");
	exit(2);
}

int
main(int argc, char *argv[])
{
	struct pollfd pfd[3];
	struct timespec ts = { 0, VK_TICK_MS * 1000000L };
	char ready[PATH_MAX + 8];
	int ch, self, pid, p;

	K.nctrl = 1;
	K.hc = 8;
	while ((ch = getopt(argc, argv, "c:n:p:")) != -1) {
		switch (ch) {
		case 'c':
			K.nctrl = atoi(optarg);
			break;
		case 'n':
			K.hc = atoi(optarg);
			break;
		case 'p':
			K.pidfile = optarg;
			break;
		default:
			usage();
		}
	}
	if (argc - optind != 1 || K.pidfile == NULL || K.nctrl < 1 ||
	    K.nctrl > VK_MAX_CTRL || K.hc < 1 || K.hc > VK_MAX_HC)
		usage();
	if (usbgw_strlcpy(K.root, argv[optind], sizeof(K.root)) >=
	    sizeof(K.root))
		usage();
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);

	build_tree();
	fill_attach();
	/* Can we copy a process's descriptors (pidfd_getfd, ptrace rights)? */
	if ((self = (int)syscall(SYS_pidfd_open, getpid(), 0)) != -1) {
		int fd = (int)syscall(SYS_pidfd_getfd, self, K.ctl_fd, 0);

		K.can_grab = fd != -1;
		if (fd != -1)
			close(fd);
		close(self);
	}
	vk_say("ready grab=%s ports=%d", K.can_grab ? "yes" : "no",
	    K.nctrl * 2 * K.hc);
	snprintf(ready, sizeof(ready), "%s/ready", K.root);
	put_file(ready, K.can_grab ? "grab\n" : "nograb\n");

	while (!quit) {
		if ((pid = get_int_file(K.pidfile, 0)) > 0 && pid != K.pid) {
			/* a (new) attacher: the daemon was (re)started */
			if (K.pidfd > 0)
				close(K.pidfd);
			K.pid = pid;
			K.pidfd = (int)syscall(SYS_pidfd_open, K.pid, 0);
			vk_say("attacher pid=%ld", (long)K.pid);
		}
		service_attach();
		for (p = 0; p < K.nctrl * 2 * K.hc; p++) {
			if (K.port[p].enumerate) {
				K.port[p].enumerate = false;
				enumerate(p);
			}
		}
		pfd[0] = (struct pollfd){ K.detach_fd, POLLIN, 0 };
		pfd[1] = (struct pollfd){ K.probe_fd, POLLIN, 0 };
		pfd[2] = (struct pollfd){ K.ctl_fd, POLLIN, 0 };
		if (poll(pfd, 3, 0) > 0) {
			if (pfd[0].revents & POLLIN)
				do_detach();
			if (pfd[1].revents & POLLIN)
				do_probe();
			if (pfd[2].revents & POLLIN)
				do_ctl();
		}
		check_sockets();
		nanosleep(&ts, NULL);
	}
	vk_say("exit");
	return 0;
}
