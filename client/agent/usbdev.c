/*
 * usbdev: usbgw-agent's device objects (protocol.md 1.9.2).  One object
 * per USB device libusb reports, with the ownership state of 1.9.2
 * changed only through usbdev_setstate(), which logs.  The facts come
 * from sysfs (no traffic reaches a device before it is claimed), the
 * claim is every interface at once with libusb's auto-detach (one
 * USBDEVFS_DISCONNECT_CLAIM each: the race-free detach), and every
 * blocking libusb call runs on the worker, one job per device at a time.
 */
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/usbdevice_fs.h>

#include <event2/event.h>
#include <libusb.h>

#include "base/desc.h"
#include "base/identity.h"
#include "base/log.h"
#include "umem.h"
#include "usbdev_int.h"
#include "proto/usbip.h"
#include "base/util.h"
#include "base/worker.h"

#define SYSFS_USB	"/sys/bus/usb/devices"

struct usbdev *usbdev_list;
/* Devices off the list whose libusb handle waits for the loop to close it. */
static struct usbdev	*ud_closing;
static struct event	*ud_close_ev;

static struct {
	struct event_base *base;
	struct usbdev_conf conf;
	char		*state_file;
	struct usbdev_hooks hooks;
	void		*arg;
	struct worker	*worker;
} ud;

static void	ud_examine(struct usbdev *);
static void	ud_close_cb(evutil_socket_t, short, void *);
static void	ud_claim_done(struct udjob *);
static bool	ud_kept_now(struct usbdev *, int *);
static void	ud_keep_giveback(struct usbdev *, int, const char *);
static bool	ud_done_err(int);
static uint32_t	ud_intf_mask(const struct desc_config *);

/*
 * usbfs maps its zero-copy memory with the right page attributes from
 * Linux 5.7 on (2bef9aed6f0e, "usb: usbfs: correct kernel->user page
 * attribute mismatch"): before, on a host controller without coherent
 * DMA (many ARM boards) the agent could read a transfer's data stale.
 * So umem is used on 5.7 and later only.
 */
static bool
ud_kernel_maps_right(void)
{
	struct utsname	 u;
	unsigned	 major = 0, minor = 0;

	if (uname(&u) == -1 || sscanf(u.release, "%u.%u", &major,
	    &minor) != 2)
		return false;
	if (major > 5 || (major == 5 && minor >= 7))
		return true;
	log_info("usbfs zero-copy off: kernel %s (before 5.7)", u.release);
	return false;
}

void
usbdev_setup(struct event_base *base, const struct usbdev_conf *conf,
    const struct usbdev_hooks *hooks, void *arg)
{
	ud.base = base;
	ud.conf = *conf;
	ud.state_file = conf->state_file ? xstrdup(conf->state_file) : NULL;
	ud.conf.state_file = ud.state_file;
	ud.hooks = *hooks;
	ud.arg = arg;
	/* One thread: the blocking usbfs calls of all devices in order. */
	if ((ud.worker = worker_new(base, "usb device calls", 1)) == NULL)
		fatalx("usbdev: no worker thread");
	worker_priority(ud.worker, 0);
	if ((ud_close_ev = event_new(base, -1, 0, ud_close_cb, NULL)) == NULL)
		fatalx("usbdev: event_new");
	umem_setup(base, NULL, conf->zero_copy && ud_kernel_maps_right());
}

struct event_base *
usbdev_base(void)
{
	return ud.base;
}

unsigned
usbdev_max_urbs(bool iso)
{
	unsigned	 n = ud.conf.max_urbs_per_ep;

	if (n == 0)
		return iso ? 32 : 64;
	return iso && n > 32 ? 32 : n;
}

const char *
usbdev_state_name(const struct usbdev *d)
{
	static const char *const local[] = {
		[UDL_NONE] = "local", [UDL_HUB] = "local(hub)",
		[UDL_VHCI] = "local(vhci)",
		[UDL_FOREIGN] = "local(foreign-driver)",
		[UDL_BUSY] = "local(busy)", [UDL_KEPT] = "local(kept)",
	};

	switch (d->state) {
	case UD_NEW:		return "new";
	case UD_LOCAL:		return local[d->local];
	case UD_EXPORTABLE:	return "exportable";
	case UD_HELD:		return "held";
	case UD_RELEASING:	return "releasing";
	case UD_GONE:		return "gone";
	}
	return "?";
}

void
usbdev_audit(const char *fmt, ...)
{
	char		 line[1024];
	va_list		 ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (ud.hooks.audit != NULL)
		ud.hooks.audit(ud.arg, line);
	else
		log_info("audit: %s", line);
}

static bool
ud_offered(enum ud_state s)
{
	return s == UD_EXPORTABLE;
}

static bool
ud_owned(enum ud_state s)
{
	return s == UD_EXPORTABLE || s == UD_HELD || s == UD_RELEASING;
}

/* The one place a device's state changes. */
void
usbdev_setstate(struct usbdev *d, enum ud_state st, enum ud_local why,
    const char *reason)
{
	enum ud_state	 old = d->state;
	const char	*from = usbdev_state_name(d);

	d->state = st;
	d->local = st == UD_LOCAL ? why : UDL_NONE;
	log_info("device %s: %s -> %s%s%s", d->busid, from,
	    usbdev_state_name(d), reason ? ": " : "", reason ? reason : "");
	if (ud.hooks.changed == NULL)
		goto state;
	if (ud_offered(st) && !ud_offered(old))
		ud.hooks.changed(ud.arg, d->busid, true, &d->rec, d->intf,
		    d->rec.bNumInterfaces);
	else if ((st == UD_LOCAL || st == UD_GONE) && ud_owned(old))
		ud.hooks.changed(ud.arg, d->busid, false, &d->rec, d->intf,
		    d->rec.bNumInterfaces);
state:
	if (ud_owned(st) != ud_owned(old))
		usbdev_write_state();
}

struct usbdev *
usbdev_find(const char *busid)
{
	struct usbdev	*d;

	for (d = usbdev_list; d != NULL; d = d->next)
		if (d->listed && strcmp(d->busid, busid) == 0)
			return d;
	return NULL;
}

void
usbdev_ref(struct usbdev *d)
{
	d->refs++;
}


/* The handle goes: its umem closes it once its buffers are back. */
static void
ud_handle_close(struct usbdev *d)
{
	if (d->mem != NULL)
		umem_close(d->mem);
	else
		libusb_close(d->h);
	d->mem = NULL;
	d->h = NULL;
}

static void
ud_close_pending(void)
{
	struct usbdev	*d;

	while ((d = ud_closing) != NULL) {
		ud_closing = d->next;
		if (d->h != NULL)
			ud_handle_close(d);	/* it removes an fd */
		libusb_unref_device(d->ldev);
		free(d->descs);
		free(d);
	}
}

static void
ud_close_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	ud_close_pending();
}

/*
 * The last reference often goes inside a transfer's callback (the device
 * left: its last transfer calls back), and there libusb_close() must not
 * run: libusb's Linux back end calls back holding open_devs_lock, which
 * libusb_close() takes (a self-deadlock: the loop stops, the import's socket
 * never closes, vhci waits forever).  So the handle is closed by a loop
 * callback of its own, outside libusb's event handling.
 */
static void
ud_free(struct usbdev *d)
{
	struct usbdev	**pp;

	for (pp = &usbdev_list; *pp != NULL; pp = &(*pp)->next)
		if (*pp == d) {
			*pp = d->next;
			break;
		}
	if (d->retry != NULL)
		event_free(d->retry);
	d->retry = NULL;
	d->next = ud_closing;
	ud_closing = d;
	if (ud_close_ev != NULL)
		event_active(ud_close_ev, EV_TIMEOUT, 0);
	else
		ud_close_pending();
}

void
usbdev_unref(struct usbdev *d)
{
	if (--d->refs == 0)
		ud_free(d);
}

/* Off the list for good: nothing new reaches it; freed at the last ref. */
static void
ud_vanish(struct usbdev *d, const char *why)
{
	if (!d->listed)
		return;
	if (d->state != UD_GONE) {
		usbdev_setstate(d, UD_GONE, UDL_NONE, why);
		usbdev_audit("gone busid=%s id=%04x:%04x", d->busid,
		    d->rec.idVendor, d->rec.idProduct);
	}
	if (d->retry != NULL)
		evtimer_del(d->retry);
	d->listed = false;
	d->claimed = 0;
	d->taken = false;
	usbdev_write_state();
	if (d->on_gone != NULL)
		d->on_gone(d);
	usbdev_unref(d);
}

/* ---- worker jobs -------------------------------------------------- */

static int
ud_claim_mask(libusb_device_handle *h, uint32_t mask, uint32_t *claimed,
    uint32_t *detached)
{
	int		 i, r;

	*claimed = 0;
	libusb_set_auto_detach_kernel_driver(h, 1);
	for (i = 0; i < 32; i++) {
		if (!(mask & (1u << i)))
			continue;
		if (libusb_kernel_driver_active(h, i) == 1)
			*detached |= 1u << i;
		if ((r = libusb_claim_interface(h, i)) != 0)
			goto undo;
		*claimed |= 1u << i;
	}
	return 0;
undo:
	/* All or nothing: release (auto-detach re-attaches the drivers). */
	for (i = 0; i < 32; i++)
		if (*claimed & (1u << i))
			libusb_release_interface(h, i);
	*claimed = 0;
	return r;
}

static void
ud_release_all(libusb_device_handle *h, uint32_t claimed)
{
	int		 i;

	libusb_set_auto_detach_kernel_driver(h, 0);
	for (i = 0; i < 32; i++)
		if (claimed & (1u << i))
			libusb_release_interface(h, i);
}

/*
 * SET_CONFIGURATION through usbfs: release with auto-detach off (no
 * kernel driver gets the old interfaces), set, claim the new ones.  The
 * kernel binds drivers to the new interfaces before the claim detaches
 * them again (protocol.md 1.9.2, the one open window).
 */
static int
ud_setconf(libusb_device_handle *h, int value, uint32_t old, uint32_t mask,
    uint32_t *claimed, uint32_t *detached)
{
	int		 r, r2;

	ud_release_all(h, old);
	r = libusb_set_configuration(h, value);
	r2 = ud_claim_mask(h, r == 0 ? mask : old, claimed, detached);
	return r != 0 ? r : r2;
}

/*
 * Give the device back to the thin client's kernel drivers, on the worker
 * or at shutdown: release every interface this handle holds (libusb's own
 * record, right even when a job's result never reached the loop), reset
 * unless no_reset, the configuration it had at claim back if it is not
 * the current one (that binds drivers by itself; the host may have
 * unconfigured the device, SET_CONFIGURATION 0), then a driver connected
 * to each interface of that configuration (EBUSY: one is bound already).
 */
static int
ud_giveback_sync(libusb_device_handle *h, uint8_t config_first,
    uint32_t mask_first, bool no_reset)
{
	int		 c = -1, i, r = 0, r2;

	ud_release_all(h, ~0u);
	if (!no_reset)
		r = libusb_reset_device(h);
	if (config_first != 0 && (libusb_get_configuration(h, &c) != 0 ||
	    c != config_first)) {
		r2 = libusb_set_configuration(h, config_first);
		if (ud_done_err(r) && !ud_done_err(r2))
			r = r2;
	}
	for (i = 0; i < 32; i++) {
		if (!(mask_first & (1u << i)))
			continue;
		r2 = libusb_attach_kernel_driver(h, i);
		if (ud_done_err(r) && !ud_done_err(r2))
			r = r2;
	}
	return ud_done_err(r) ? 0 : r;
}

struct udjob_in {
	uint32_t	 mask;		/* interfaces to claim */
	uint32_t	 old;		/* interfaces claimed now */
	uint8_t		 config_first;
	uint8_t		 config;
	uint32_t	 mask_first;	/* the first configuration's */
	bool		 no_reset;
};

struct udjob_full {
	struct udjob	 j;
	struct udjob_in	 in;
	libusb_device_handle *h;
};

static void
udjob_run(void *arg)
{
	struct udjob_full *f = arg;
	struct udjob	*j = &f->j;
	libusb_device_handle *h = f->h;
	int		 c = 0, r;

	j->claimed = f->in.old;
	j->config = f->in.config;
	switch (j->op) {
	case UDJ_CLAIM:
		j->detached = 0;
		r = libusb_get_configuration(h, &c);
		if (r == 0 && c == 0)
			r = LIBUSB_ERROR_BUSY;	/* unconfigured */
		if (r == 0) {
			j->config = (uint8_t)c;
			r = ud_claim_mask(h, f->in.mask, &j->claimed,
			    &j->detached);
		}
		j->result = r;
		break;
	case UDJ_RESET:
		j->result = libusb_reset_device(h);
		break;
	case UDJ_SETCONF:
		j->detached = 0;
		j->result = ud_setconf(h, j->a, f->in.old, f->in.mask,
		    &j->claimed, &j->detached);
		if (j->result == 0)
			j->config = (uint8_t)j->a;
		break;
	case UDJ_SETALT:
		j->result = libusb_set_interface_alt_setting(h, j->a, j->b);
		break;
	case UDJ_CLEARHALT:
		j->result = libusb_clear_halt(h, (unsigned char)j->a);
		break;
	case UDJ_GIVEBACK:
		j->result = ud_giveback_sync(h, f->in.config_first,
		    f->in.mask_first, f->in.no_reset);
		j->claimed = 0;
		break;
	case UDJ_RESTORE:
		r = 0;
		if (!f->in.no_reset)
			r = libusb_reset_device(h);
		if (r == 0 && f->in.config != f->in.config_first) {
			j->detached = 0;
			r = ud_setconf(h, f->in.config_first, f->in.old,
			    f->in.mask_first, &j->claimed, &j->detached);
			if (r == 0)
				j->config = f->in.config_first;
		}
		j->result = r;
		break;
	}
}

static void	udjob_next(struct usbdev *);

static void
udjob_done(void *arg)
{
	struct udjob_full *f = arg;
	struct udjob	*j = &f->j;
	struct usbdev	*d = j->dev;
	bool		 queued;

	d->jobs = j->next;
	/*
	 * Only a job queued behind this one is started here: one that done()
	 * queues on an empty queue has been started by usbdev_job() already
	 * (starting it again would run it twice on the worker).
	 */
	queued = d->jobs != NULL;
	if (j->done != NULL)
		j->done(j);
	free(f);
	if (queued)
		udjob_next(d);
	usbdev_unref(d);
}

static uint32_t
ud_intf_mask(const struct desc_config *c)
{
	uint32_t	 m = 0;
	unsigned	 i;

	for (i = 0; i < c->nalt; i++)
		if (c->alt[i].number < 32)
			m |= 1u << c->alt[i].number;
	return m;
}

static void
udjob_next(struct usbdev *d)
{
	struct udjob_full *f = (struct udjob_full *)d->jobs;

	f->h = d->h;
	f->in.old = d->claimed;
	f->in.config = d->config;
	f->in.config_first = d->config_first;
	f->in.no_reset = d->no_reset;
	f->in.mask = d->have_cfg ? ud_intf_mask(&d->cfg) : 0;
	if (f->j.op == UDJ_SETCONF)
		f->in.mask = (uint32_t)f->j.b;
	if ((f->j.op == UDJ_RESTORE && d->config != d->config_first) ||
	    f->j.op == UDJ_GIVEBACK)
		f->in.mask_first = usbdev_config_mask(d, d->config_first);
	worker_submit(ud.worker, udjob_run, udjob_done, free, f);
}

void
usbdev_job(struct usbdev *d, enum udjob_op op, int a, int b,
    void (*done)(struct udjob *), void *arg)
{
	struct udjob_full *f = xcalloc(1, sizeof(*f));
	struct udjob	**pp;

	f->j.dev = d;
	f->j.op = op;
	f->j.a = a;
	f->j.b = b;
	f->j.done = done;
	f->j.arg = arg;
	usbdev_ref(d);
	for (pp = &d->jobs; *pp != NULL; pp = &(*pp)->next)
		;
	*pp = &f->j;
	if (d->jobs == &f->j)
		udjob_next(d);
}

bool
usbdev_job_running(const struct usbdev *d)
{
	return d->jobs != NULL;
}

/* ---- sysfs -------------------------------------------------------- */

static int
sysfs_read(const char *busid, const char *attr, char *buf, size_t sz)
{
	char		 path[PATH_MAX];
	ssize_t		 n;
	int		 fd;

	snprintf(path, sizeof(path), SYSFS_USB "/%s/%s", busid, attr);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	n = read(fd, buf, sz - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return 0;
}

static int
sysfs_num(const char *busid, const char *attr, int base, long long max,
    long long *out)
{
	char		 buf[64], *end;
	long long	 v;

	if (sysfs_read(busid, attr, buf, sizeof(buf)) == -1 || buf[0] == '\0')
		return -1;
	errno = 0;
	v = strtoll(buf, &end, base);
	if (errno != 0 || *end != '\0' || v < 0 || v > max)
		return -1;
	*out = v;
	return 0;
}

static uint8_t *
sysfs_descs(const char *busid, size_t *len)
{
	char		 path[PATH_MAX];
	uint8_t		*buf;
	ssize_t		 n;
	size_t		 got = 0;
	int		 fd;

	snprintf(path, sizeof(path), SYSFS_USB "/%s/descriptors", busid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return NULL;
	buf = xmalloc(UD_MAX_DESCS);
	while (got < UD_MAX_DESCS &&
	    (n = read(fd, buf + got, UD_MAX_DESCS - got)) > 0)
		got += (size_t)n;
	close(fd);
	if (got < USB_DT_DEVICE_SIZE) {
		free(buf);
		return NULL;
	}
	*len = got;
	return buf;
}

/* The basename of the device-level driver link, "" if none. */
static void
sysfs_driver(const char *busid, char *out, size_t sz)
{
	char		 path[PATH_MAX], link[PATH_MAX], *base;
	ssize_t		 n;

	out[0] = '\0';
	snprintf(path, sizeof(path), SYSFS_USB "/%s/driver", busid);
	if ((n = readlink(path, link, sizeof(link) - 1)) <= 0)
		return;
	link[n] = '\0';
	base = strrchr(link, '/');
	usbgw_strlcpy(out, base ? base + 1 : link, sz);
}

/* A printable copy of a sysfs string attribute (identity strings). */
static void
sysfs_string(const char *busid, const char *attr, char *out, size_t sz)
{
	char		 raw[USBGW_STR_MAX * 2];

	out[0] = '\0';
	if (sysfs_read(busid, attr, raw, sizeof(raw)) == -1)
		return;
	log_escape(out, sz, raw, strlen(raw));
}

/* "B-p1.p2..." as the kernel names the device; -1 for a root hub. */
static int
ud_busid(libusb_device *ldev, char *out, size_t sz)
{
	uint8_t		 ports[8];
	int		 n, i;
	size_t		 off;

	n = libusb_get_port_numbers(ldev, ports, sizeof(ports));
	if (n <= 0)
		return -1;
	off = (size_t)snprintf(out, sz, "%u-", libusb_get_bus_number(ldev));
	for (i = 0; i < n && off < sz; i++)
		off += (size_t)snprintf(out + off, sz - off, "%s%u",
		    i ? "." : "", ports[i]);
	return off < sz ? 0 : -1;
}

static uint32_t
ud_speed(libusb_device *ldev)
{
	switch (libusb_get_device_speed(ldev)) {
	case LIBUSB_SPEED_LOW:		return USBIP_SPEED_LOW;
	case LIBUSB_SPEED_FULL:		return USBIP_SPEED_FULL;
	case LIBUSB_SPEED_HIGH:		return USBIP_SPEED_HIGH;
	case LIBUSB_SPEED_SUPER:	return USBIP_SPEED_SUPER;
	case LIBUSB_SPEED_SUPER_PLUS:	return USBIP_SPEED_SUPER_PLUS;
	default:			return USBIP_SPEED_UNKNOWN;
	}
}

/*
 * Find configuration value in the sysfs copy (device descriptor, then
 * each configuration in full) and make it d->cfg.  0 or -1.
 */
static int
ud_find_config(const struct usbdev *d, uint8_t value, struct desc_config *out)
{
	size_t		 off = USB_DT_DEVICE_SIZE, tl;
	const char	*why;

	while (off + USB_DT_CONFIG_SIZE <= d->descslen) {
		tl = (size_t)(d->descs[off + 2] | d->descs[off + 3] << 8);
		if (d->descs[off + 1] != USB_DT_CONFIG ||
		    tl < USB_DT_CONFIG_SIZE || off + tl > d->descslen)
			return -1;
		if (d->descs[off + 5] == value) {
			if (desc_parse_config(d->descs + off, tl, out,
			    &why) == -1) {
				log_warnx("device %s: configuration %u: %s",
				    d->busid, value, why);
				return -1;
			}
			return 0;
		}
		off += tl;
	}
	return -1;
}

int
usbdev_load_config(struct usbdev *d, uint8_t value)
{
	if (ud_find_config(d, value, &d->cfg) == -1)
		return -1;
	d->have_cfg = true;
	d->config = value;
	memset(d->alt, 0, sizeof(d->alt));
	return 0;
}

uint32_t
usbdev_config_mask(const struct usbdev *d, uint8_t value)
{
	struct desc_config *c = xcalloc(1, sizeof(*c));
	uint32_t	 m = 0;

	if (ud_find_config(d, value, c) == 0)
		m = ud_intf_mask(c);
	free(c);
	return m;
}

/* The record, interface records and identity from the current config. */
static void
ud_records(struct usbdev *d)
{
	unsigned	 i, n = 0;

	for (i = 0; i < d->cfg.nalt && n < USBIP_MAX_INTERFACES; i++) {
		if (d->cfg.alt[i].alt != 0)
			continue;
		d->intf[n].bInterfaceClass = d->cfg.alt[i].cls;
		d->intf[n].bInterfaceSubClass = d->cfg.alt[i].subcls;
		d->intf[n].bInterfaceProtocol = d->cfg.alt[i].proto;
		d->ident.ifaces[n].cls = d->cfg.alt[i].cls;
		d->ident.ifaces[n].subcls = d->cfg.alt[i].subcls;
		d->ident.ifaces[n].proto = d->cfg.alt[i].proto;
		n++;
	}
	d->rec.bNumInterfaces = (uint8_t)n;
	d->ident.n_ifaces = (uint8_t)n;
	d->rec.bConfigurationValue = d->config;
}

/* Read everything the decisions need from sysfs.  0, or -1 logged. */
static int
ud_read(struct usbdev *d)
{
	struct desc_device dd;
	struct iovec	 iov;
	char		 path[PATH_MAX], real[PATH_MAX];
	long long	 busnum, devnum, cfg;
	const char	*why;

	if ((d->descs = sysfs_descs(d->busid, &d->descslen)) == NULL) {
		log_warnx("device %s: no descriptors in sysfs", d->busid);
		return -1;
	}
	if (desc_parse_device(d->descs, d->descslen, &dd, &why) == -1) {
		log_warnx("device %s: device descriptor: %s", d->busid, why);
		return -1;
	}
	if (sysfs_num(d->busid, "busnum", 10, 255, &busnum) == -1 ||
	    sysfs_num(d->busid, "devnum", 10, 255, &devnum) == -1) {
		log_warnx("device %s: no busnum/devnum in sysfs", d->busid);
		return -1;
	}
	/* They must be libusb's device: a swap at the port shows here. */
	if (busnum != libusb_get_bus_number(d->ldev) ||
	    devnum != libusb_get_device_address(d->ldev)) {
		log_warnx("device %s: sysfs says %lld-%lld, libusb %u-%u",
		    d->busid, busnum, devnum, libusb_get_bus_number(d->ldev),
		    libusb_get_device_address(d->ldev));
		return -1;
	}
	if (sysfs_num(d->busid, "bConfigurationValue", 10, 255, &cfg) == -1)
		cfg = 0;	/* unconfigured: the file is empty */
	snprintf(path, sizeof(path), SYSFS_USB "/%s", d->busid);
	if (realpath(path, real) == NULL)
		usbgw_strlcpy(real, path, sizeof(real));
	usbgw_strlcpy(d->rec.path, real, sizeof(d->rec.path));
	usbgw_strlcpy(d->rec.busid, d->busid, sizeof(d->rec.busid));
	d->rec.busnum = (uint32_t)busnum;
	d->rec.devnum = (uint32_t)devnum;
	d->rec.speed = ud_speed(d->ldev);
	d->rec.idVendor = dd.idVendor;
	d->rec.idProduct = dd.idProduct;
	d->rec.bcdDevice = dd.bcdDevice;
	d->rec.bDeviceClass = dd.bDeviceClass;
	d->rec.bDeviceSubClass = dd.bDeviceSubClass;
	d->rec.bDeviceProtocol = dd.bDeviceProtocol;
	d->rec.bNumConfigurations = dd.bNumConfigurations;

	usbgw_strlcpy(d->ident.busid, d->busid, sizeof(d->ident.busid));
	usbgw_strlcpy(d->ident.exporter_busid, d->busid,
	    sizeof(d->ident.exporter_busid));
	d->ident.vid = dd.idVendor;
	d->ident.pid = dd.idProduct;
	d->ident.bcd_device = dd.bcdDevice;
	d->ident.dev_class = dd.bDeviceClass;
	d->ident.dev_subclass = dd.bDeviceSubClass;
	d->ident.dev_protocol = dd.bDeviceProtocol;
	d->ident.speed = d->rec.speed;
	sysfs_string(d->busid, "manufacturer", d->ident.manufacturer,
	    sizeof(d->ident.manufacturer));
	sysfs_string(d->busid, "product", d->ident.product,
	    sizeof(d->ident.product));
	sysfs_string(d->busid, "serial", d->ident.serial,
	    sizeof(d->ident.serial));
	/* The gateway hashes the device descriptor and every configuration
	 * in full, in index order: what sysfs's copy is. */
	iov.iov_base = d->descs;
	iov.iov_len = d->descslen;
	if (identity_hash(&iov, 1, d->ident.hash) == -1)
		d->ident.hash[0] = '\0';
	if (cfg != 0 && usbdev_load_config(d, (uint8_t)cfg) == -1) {
		log_warnx("device %s: configuration %lld unreadable", d->busid,
		    cfg);
		return -1;
	}
	d->config = (uint8_t)cfg;
	ud_records(d);
	return 0;
}

static bool
ud_on_vhci(const struct usbdev *d)
{
	return strstr(d->rec.path, "/vhci_hcd") != NULL;
}

static void
ud_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct usbdev	*d = arg;

	(void)fd;
	(void)what;
	if (d->listed && d->state == UD_LOCAL &&
	    (d->local == UDL_BUSY || d->local == UDL_FOREIGN))
		ud_examine(d);
}

static void
ud_retry_later(struct usbdev *d)
{
	struct timeval	 tv = { UD_RETRY_S, 0 };

	if (d->retry == NULL &&
	    (d->retry = evtimer_new(ud.base, ud_retry_cb, d)) == NULL)
		return;
	evtimer_add(d->retry, &tv);
}

/* Steps 2 and 4 of 1.9.2's arrival (again every 2 s while they fail). */
static void
ud_examine(struct usbdev *d)
{
	char		 drv[64];
	int		 r, rule;

	if (ud_kept_now(d, &rule)) {	/* kept since a reload: no claim */
		if (d->taken && d->h != NULL) {
			/* still ours (a restore that failed): give it back */
			ud_keep_giveback(d, rule, "reload");
			return;
		}
		usbdev_setstate(d, UD_LOCAL, UDL_KEPT, "keep-list");
		usbdev_audit("keep-local busid=%s id=%04x:%04x rule=%d",
		    d->busid, d->rec.idVendor, d->rec.idProduct, rule);
		return;
	}

	sysfs_driver(d->busid, drv, sizeof(drv));
	if (drv[0] != '\0' && strcmp(drv, "usb") != 0) {
		if (d->state != UD_LOCAL || d->local != UDL_FOREIGN)
			usbdev_setstate(d, UD_LOCAL, UDL_FOREIGN, drv);
		ud_retry_later(d);
		return;
	}
	if (d->config == 0 || !d->have_cfg) {
		if (d->state != UD_LOCAL || d->local != UDL_BUSY)
			usbdev_setstate(d, UD_LOCAL, UDL_BUSY,
			    "not configured");
		ud_retry_later(d);
		return;
	}
	if (d->h == NULL && (r = libusb_open(d->ldev, &d->h)) != 0) {
		d->h = NULL;
		if (d->state != UD_LOCAL || d->local != UDL_BUSY)
			usbdev_setstate(d, UD_LOCAL, UDL_BUSY,
			    libusb_strerror(r));
		ud_retry_later(d);
		return;
	}
	if (d->mem == NULL)
		d->mem = umem_new(d->h);
	usbdev_job(d, UDJ_CLAIM, 0, 0, ud_claim_done, NULL);
}

static void
ud_claim_done(struct udjob *j)
{
	struct usbdev	*d = j->dev;
	int		 rule = 0;

	if (!d->listed)
		return;
	if (j->result != 0) {
		if (j->result == LIBUSB_ERROR_NO_DEVICE) {
			ud_vanish(d, "gone while claiming");
			return;
		}
		if (d->state != UD_LOCAL || d->local != UDL_BUSY)
			usbdev_setstate(d, UD_LOCAL, UDL_BUSY,
			    libusb_strerror(j->result));
		/* Close: the next try opens afresh (and frees the fd). */
		ud_handle_close(d);
		ud_retry_later(d);
		return;
	}
	d->claimed = j->claimed;
	d->detached = j->detached;
	d->taken = true;
	if (j->config != d->config)
		usbdev_load_config(d, j->config);
	d->config_first = d->config;
	d->dirty = true;
	if (ud_kept_now(d, &rule)) {	/* a reload during the claim */
		ud_keep_giveback(d, rule, "reload");
		return;
	}
	usbdev_setstate(d, UD_EXPORTABLE, UDL_NONE, NULL);
	usbdev_audit("export busid=%s id=%04x:%04x", d->busid,
	    d->rec.idVendor, d->rec.idProduct);
}

void
usbdev_arrive(libusb_device *ldev)
{
	struct usbdev	*d, *old;
	char		 busid[USBIP_BUSID_SIZE];
	int		 rule = 0;

	if (ud_busid(ldev, busid, sizeof(busid)) == -1)
		return;		/* a root hub */
	if ((old = usbdev_find(busid)) != NULL) {
		if (old->ldev == ldev)
			return;	/* ENUMERATE and an arrival: seen */
		ud_vanish(old, "replaced at its port");
	}
	d = xcalloc(1, sizeof(*d));
	d->ldev = libusb_ref_device(ldev);
	usbgw_strlcpy(d->busid, busid, sizeof(d->busid));
	d->refs = 1;
	d->listed = true;
	d->state = UD_NEW;
	d->next = usbdev_list;
	usbdev_list = d;
	log_debug("device %s: arrived", busid);

	if (ud_read(d) == -1) {
		usbdev_setstate(d, UD_LOCAL, UDL_BUSY, "unreadable");
		return;
	}
	if (d->rec.bDeviceClass == LIBUSB_CLASS_HUB) {
		usbdev_setstate(d, UD_LOCAL, UDL_HUB, NULL);
		return;
	}
	if (ud_on_vhci(d)) {
		usbdev_setstate(d, UD_LOCAL, UDL_VHCI, NULL);
		return;
	}
	if (ud.hooks.keep != NULL && ud.hooks.keep(ud.arg, &d->ident, &rule)) {
		usbdev_setstate(d, UD_LOCAL, UDL_KEPT, NULL);
		usbdev_audit("keep-local busid=%s id=%04x:%04x rule=%d",
		    d->busid, d->rec.idVendor, d->rec.idProduct, rule);
		return;
	}
	d->no_reset = ud.hooks.no_reset != NULL &&
	    ud.hooks.no_reset(ud.arg, &d->ident);
	ud_examine(d);
}

void
usbdev_left(libusb_device *ldev)
{
	struct usbdev	*d;

	for (d = usbdev_list; d != NULL; d = d->next)
		if (d->listed && d->ldev == ldev) {
			ud_vanish(d, "unplugged");
			return;
		}
}

void
usbdev_gone(struct usbdev *d)
{
	ud_vanish(d, "no device");
}

void
usbdev_touch(struct usbdev *d)
{
	d->dirty = true;
}

void
usbdev_was_reset(struct usbdev *d)
{
	d->dirty = false;
	memset(d->alt, 0, sizeof(d->alt));
}

void
usbdev_set_alt(struct usbdev *d, uint8_t iface, uint8_t alt)
{
	if (iface < DESC_MAX_INTF)
		d->alt[iface] = alt;
}

/* After a SET_CONFIGURATION job: what is claimed now, and the config. */
void
usbdev_set_config(struct usbdev *d, const struct udjob *j)
{
	d->claimed = j->claimed;
	d->detached |= j->detached;
	if (j->result == 0) {
		if (j->config == 0) {
			d->have_cfg = false;
			d->config = 0;
		} else if (usbdev_load_config(d, j->config) == -1)
			d->have_cfg = false;
	}
	usbdev_write_state();
}

/* ---- release ------------------------------------------------------ */

static void
ud_restore_done(struct udjob *j)
{
	struct usbdev	*d = j->dev;
	int		 rule = 0;

	if (!d->listed)
		return;
	if (j->result == LIBUSB_ERROR_NOT_FOUND ||
	    j->result == LIBUSB_ERROR_NO_DEVICE) {
		/* Re-enumerated by the reset: a new arrival follows. */
		ud_vanish(d, "re-enumerated by the reset");
		return;
	}
	d->claimed = j->claimed;
	if (j->config != d->config)
		usbdev_load_config(d, j->config);
	memset(d->alt, 0, sizeof(d->alt));
	if (j->result != 0 || d->claimed != ud_intf_mask(&d->cfg)) {
		/* Not whole again: offer it to nobody, hold what we have. */
		log_warnx("device %s: restore after the import: %s", d->busid,
		    libusb_strerror(j->result));
		usbdev_setstate(d, UD_LOCAL, UDL_BUSY, "restore failed");
		usbdev_write_state();
		return;
	}
	if (!d->no_reset)
		d->dirty = false;
	if (ud_kept_now(d, &rule)) {	/* a reload during the import */
		ud_keep_giveback(d, rule, "reload");
		return;
	}
	usbdev_setstate(d, UD_EXPORTABLE, UDL_NONE, "released");
}

/* ---- keep-list reload ------------------------------------------- */

static bool
ud_kept_now(struct usbdev *d, int *rule)
{
	*rule = 0;
	return ud.hooks.keep != NULL && ud.hooks.keep(ud.arg, &d->ident, rule);
}

bool
usbdev_kept_now(struct usbdev *d)
{
	int		 rule;

	return ud_kept_now(d, &rule);
}

void
usbdev_keep_giveback(struct usbdev *d)
{
	int		 rule;

	if (d->listed && ud_kept_now(d, &rule))
		ud_keep_giveback(d, rule, "reload");
}

static void
ud_giveback_done(struct udjob *j)
{
	struct usbdev	*d = j->dev;
	int		 rule = (int)(intptr_t)j->arg;

	if (!d->listed)
		return;
	if (j->result != 0)
		log_warnx("device %s: giving it back to its kernel drivers: %s",
		    d->busid, libusb_strerror(j->result));
	d->claimed = 0;
	d->taken = false;
	if (d->h != NULL)
		ud_handle_close(d);
	usbdev_setstate(d, UD_LOCAL, UDL_KEPT, "keep-list");
	usbdev_audit("keep-local busid=%s id=%04x:%04x rule=%d reason=reload",
	    d->busid, d->rec.idVendor, d->rec.idProduct, rule);
}

/*
 * Off the list now (RELEASING is owned, not offered: the state file still
 * names it for the guardian until the drivers are back), then the worker
 * gives it back.
 */
static void
ud_keep_giveback(struct usbdev *d, int rule, const char *why)
{
	usbdev_setstate(d, UD_RELEASING, UDL_NONE, why);
	usbdev_job(d, UDJ_GIVEBACK, 0, 0, ud_giveback_done,
	    (void *)(intptr_t)rule);
}

int
usbdev_recheck_keep(void (*held)(const char *busid))
{
	struct usbdev	*d, *next;
	int		 rule, n = 0;
	bool		 kept;

	for (d = usbdev_list; d != NULL; d = next) {
		next = d->next;
		if (!d->listed)
			continue;
		kept = ud_kept_now(d, &rule);
		if (d->state != UD_HELD && d->state != UD_RELEASING)
			d->no_reset = ud.hooks.no_reset != NULL &&
			    ud.hooks.no_reset(ud.arg, &d->ident);
		switch (d->state) {
		case UD_EXPORTABLE:
			if (!kept)
				break;
			ud_keep_giveback(d, rule, "reload");
			n++;
			break;
		case UD_HELD:
			if (kept && held != NULL) {
				held(d->busid);	/* the release checks again */
				n++;
			}
			break;
		case UD_LOCAL:
			if ((d->local == UDL_BUSY || d->local == UDL_FOREIGN) &&
			    kept && !usbdev_job_running(d)) {
				/* waiting for a retry: kept instead */
				if (d->retry != NULL)
					evtimer_del(d->retry);
				ud_examine(d);
				n++;
				break;
			}
			if (d->local != UDL_KEPT || kept)
				break;
			log_info("device %s: no longer in the keep-list",
			    d->busid);
			ud_examine(d);
			n++;
			break;
		default:
			break;
		}
	}
	return n;
}

void
usbdev_release_ready(struct usbdev *d)
{
	if (!d->listed || d->state != UD_RELEASING)
		return;
	usbdev_job(d, UDJ_RESTORE, 0, 0, ud_restore_done, NULL);
}

/* ---- the state file ----------------------------------------------- */

void
usbdev_write_state(void)
{
	struct usbdev	*d;
	char		 tmp[PATH_MAX];
	FILE		*f;
	int		 fd, i;

	if (ud.state_file == NULL)
		return;
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", ud.state_file) >=
	    sizeof(tmp))
		return;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd == -1 || (f = fdopen(fd, "w")) == NULL) {
		log_warn("state file %s", tmp);
		if (fd != -1)
			close(fd);
		return;
	}
	fprintf(f, "# usbgw-agent held devices: busid busnum devnum "
	    "config interfaces (- for none) [no-reset]\n");
	for (d = usbdev_list; d != NULL; d = d->next) {
		if (!d->listed || !d->taken)
			continue;
		fprintf(f, "%s %u %u %u ", d->busid, d->rec.busnum,
		    d->rec.devnum, d->config_first);
		if (d->claimed == 0)
			fputc('-', f);	/* unconfigured by the host */
		for (i = 0; i < 32; i++)
			if (d->claimed & (1u << i))
				fprintf(f, "%s%d", (d->claimed &
				    ((1u << i) - 1)) ? "," : "", i);
		fprintf(f, "%s\n", d->no_reset ? " no-reset" : "");
	}
	if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
		log_warn("state file %s", tmp);
		fclose(f);
		unlink(tmp);
		return;
	}
	fclose(f);
	if (rename(tmp, ud.state_file) == -1)
		log_warn("state file %s", ud.state_file);
}

/* ---- giving devices back (shutdown) ------------------------------- */

static bool
ud_done_err(int r)
{
	return r == 0 || r == LIBUSB_ERROR_NOT_FOUND ||
	    r == LIBUSB_ERROR_NO_DEVICE || r == LIBUSB_ERROR_NOT_SUPPORTED ||
	    r == LIBUSB_ERROR_BUSY;
}

/*
 * As usbredirhost_release(host, 1): auto-detach off, release every
 * interface before attaching any, reset unless no-reset, then the
 * configuration back (it binds drivers itself) or each driver back.
 */
void
usbdev_giveback(struct usbdev *d)
{
	int		 r;

	if (d->h == NULL || !d->taken)
		return;
	r = ud_giveback_sync(d->h, d->config_first,
	    usbdev_config_mask(d, d->config_first), d->no_reset);
	if (r != 0)
		log_warnx("device %s: giving it back to its kernel drivers: "
		    "%s", d->busid, libusb_strerror(r));
	else
		log_info("device %s: given back to its kernel drivers",
		    d->busid);
	d->claimed = 0;
	d->taken = false;
}

void
usbdev_teardown(void)
{
	struct usbdev	*d;

	/* Jobs still queued are dropped (their devices leak: we exit). */
	worker_free(ud.worker);
	ud.worker = NULL;
	for (d = usbdev_list; d != NULL; d = d->next) {
		d->jobs = NULL;
		usbdev_giveback(d);
	}
	while ((d = usbdev_list) != NULL) {
		usbdev_list = d->next;
		if (d->retry != NULL)
			event_free(d->retry);
		if (d->h != NULL)
			ud_handle_close(d);
		libusb_unref_device(d->ldev);
		free(d->descs);
		free(d);
	}
	ud_close_pending();
	umem_teardown();
	if (ud_close_ev != NULL)
		event_free(ud_close_ev);
	ud_close_ev = NULL;
	if (ud.state_file != NULL)
		unlink(ud.state_file);
	free(ud.state_file);
	ud.state_file = NULL;
}

/* ---- --reattach --------------------------------------------------- */

/* The interface directory's driver: "" if none. */
static void
ra_iface_driver(const char *busid, unsigned cfg, int ifno, char *out,
    size_t sz)
{
	char	 name[USBIP_BUSID_SIZE + 16];

	snprintf(name, sizeof(name), "%s:%u.%d", busid, cfg, ifno);
	sysfs_driver(name, out, sz);
}

/*
 * Give a dead agent's device back to the kernel:
 *  1. claim each listed interface ourselves: EBUSY while the dead agent's
 *     usbfs files still close (retry every 50 ms for up to 2 s); one a
 *     kernel driver took meanwhile is left alone;
 *  2. release them and reset the device (unless no-reset): the agent may
 *     have died halfway through a transfer, and a mass-storage device in
 *     the middle of a command answers usb-storage's first INQUIRY only
 *     after the SCSI timeout and a reset recovery (seen as 10 s in e2e 67),
 *     or the remote host may have chosen another alternate setting; with
 *     no driver bound the reset binds nothing by itself;
 *  3. the configuration the device had at claim if the host changed it
 *     (that binds the drivers itself), else connect each listed interface:
 *     EBUSY there means a driver is bound, which is the goal.
 */
static int
ra_connect(const char *busid, unsigned busnum, unsigned devnum,
    unsigned config, uint32_t ifaces, bool reset, char *err, size_t errsz)
{
	struct usbdevfs_ioctl cmd;
	char		 node[64], drv[64];
	struct timespec	 ts = { 0, 50 * 1000 * 1000 };
	uint32_t	 held = 0;
	long long	 cv;
	unsigned int	 ifno;
	int		 fd, i, tries, left = 0;

	snprintf(node, sizeof(node), "/dev/bus/usb/%03u/%03u", busnum, devnum);
	if ((fd = open(node, O_RDWR | O_CLOEXEC)) == -1) {
		snprintf(err, errsz, "%s (%s): %s", busid, node,
		    strerror(errno));
		return -1;
	}
	/* Empty (not a number) while the device is unconfigured. */
	if (sysfs_num(busid, "bConfigurationValue", 10, 255, &cv) == -1)
		cv = 0;
	for (i = 0; i < 32; i++) {
		if (!(ifaces & (1u << i)))
			continue;
		for (tries = 0; tries < 40; tries++) {
			ifno = (unsigned)i;
			if (ioctl(fd, USBDEVFS_CLAIMINTERFACE, &ifno) == 0) {
				held |= 1u << i;
				break;
			}
			if (errno != EBUSY)
				break;	/* not in this configuration */
			ra_iface_driver(busid, (unsigned)cv, i, drv,
			    sizeof(drv));
			if (drv[0] != '\0' && strcmp(drv, "usbfs") != 0)
				break;	/* a kernel driver has it */
			nanosleep(&ts, NULL);
		}
		if (tries == 40)
			left++;
	}
	if (left > 0) {
		close(fd);
		snprintf(err, errsz, "%s: %d interface(s) still busy", busid,
		    left);
		return -1;
	}
	for (i = 0; i < 32; i++) {
		ifno = (unsigned)i;
		if (held & (1u << i))
			(void)ioctl(fd, USBDEVFS_RELEASEINTERFACE, &ifno);
	}
	if (reset && ioctl(fd, USBDEVFS_RESET, NULL) == -1)
		log_warn("reattach: %s: reset", busid);
	if (config != 0 && (unsigned)cv != config) {
		ifno = config;
		if (ioctl(fd, USBDEVFS_SETCONFIGURATION, &ifno) == 0) {
			close(fd);
			return 0;
		}
		log_warn("reattach: %s: configuration %u", busid, config);
	}
	for (i = 0; i < 32; i++) {
		if (!(ifaces & (1u << i)))
			continue;
		memset(&cmd, 0, sizeof(cmd));
		cmd.ifno = i;
		cmd.ioctl_code = USBDEVFS_CONNECT;
		if (ioctl(fd, USBDEVFS_IOCTL, &cmd) == -1 && errno != EBUSY &&
		    errno != EINVAL && errno != ENODATA)
			log_warn("reattach: %s: interface %d", busid, i);
	}
	close(fd);
	return 0;
}

int
usbdev_reattach_state(const char *state_file, char *err, size_t errsz)
{
	FILE		*f;
	char		 line[512], busid[USBIP_BUSID_SIZE], list[256], *p, *e;
	char		 flag[16];
	unsigned	 busnum, devnum, config, lineno = 0;
	long long	 b, dn;
	uint32_t	 ifaces;
	long		 v;
	int		 n = 0, bad = 0;

	if ((f = fopen(state_file, "re")) == NULL) {
		if (errno == ENOENT)
			return 0;	/* nothing held */
		snprintf(err, errsz, "%s: %s", state_file, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		lineno++;
		if (line[0] == '#' || line[0] == '\n')
			continue;
		flag[0] = '\0';
		if (sscanf(line, "%31s %u %u %u %255s %15s", busid, &busnum,
		    &devnum, &config, list, flag) < 5 ||
		    (flag[0] != '\0' && strcmp(flag, "no-reset") != 0) ||
		    !usbip_busid_valid(busid) ||
		    busnum > 255 || devnum > 255) {
			snprintf(err, errsz, "%s:%u: expected \"busid busnum "
			    "devnum config interfaces [no-reset]\"",
			    state_file, lineno);
			bad++;
			continue;
		}
		ifaces = 0;
		p = list;
		if (strcmp(list, "-") == 0)	/* none: unconfigured */
			p = list + 1;
		for (; *p != '\0'; p = e + (*e == ',')) {
			errno = 0;
			v = strtol(p, &e, 10);
			if (e == p || errno != 0 || v < 0 || v > 31 ||
			    (*e != ',' && *e != '\0'))
				break;
			ifaces |= 1u << v;
		}
		if (*p != '\0') {
			snprintf(err, errsz, "%s:%u: bad interface list",
			    state_file, lineno);
			bad++;
			continue;
		}
		/* Only the same device: not a newcomer at the same port. */
		if (sysfs_num(busid, "busnum", 10, 255, &b) == -1 ||
		    sysfs_num(busid, "devnum", 10, 255, &dn) == -1 ||
		    b != busnum || dn != devnum) {
			log_info("reattach: %s: not the device listed "
			    "(gone or replaced)", busid);
			continue;
		}
		if (ra_connect(busid, busnum, devnum, config, ifaces,
		    flag[0] == '\0', err, errsz) == -1) {
			bad++;
			continue;
		}
		log_info("reattach: %s: kernel drivers back", busid);
		n++;
	}
	fclose(f);
	return bad ? -1 : n;
}
