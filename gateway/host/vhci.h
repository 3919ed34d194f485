/*
 * vhci_hcd through sysfs: what `usbip attach` does on the vhci host, as a
 * library the daemon can drive without blocking for long, without the
 * stock tool's 128-port cap, and with a seam for tests (struct vhci_io).
 *
 * The kernel's view (drivers/usb/usbip/vhci_sysfs.c, vhci.h):
 *  - vhci_hcd.0 .. vhci_hcd.(C-1) are platform devices; every one has a
 *    high-speed and a SuperSpeed root hub of H ports each (H is
 *    CONFIG_USBIP_VHCI_HC_PORTS, C is CONFIG_USBIP_VHCI_NR_HCS).
 *  - All attributes live on vhci_hcd.0: `nports` (= 2*H*C), `attach`,
 *    `detach`, and one status file per controller: `status`, `status.1`..
 *  - Ports are numbered globally: controller c, hub hs, root-hub port r
 *    is c*2H + r; the same on the ss hub is c*2H + H + r.
 *  - A status line is `hub port sta spd dev sockfd local_busid`, e.g.
 *    "hs  0000 004 000 00000000 000000 0-0" for a free port; spd, dev
 *    and sockfd are shown only once the device is addressed (sta 006).
 *  - `attach` takes "<port> <sockfd> <devid> <speed>" (decimal); the hub
 *    is chosen by speed (>= SUPER: ss), so the port must be on that hub.
 *    Errors: EINVAL (bad argument, not a SOCK_STREAM socket; older
 *    kernels also for a used port), EBUSY (port used), EAGAIN (controller
 *    not ready).  `detach` takes "<port>".
 */
#ifndef USBGW_VHCI_H
#define USBGW_VHCI_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define VHCI_PLATFORM_DIR	"/sys/devices/platform"
#define VHCI_USB_BUS_DIR	"/sys/bus/usb"

/*
 * Bounds.  The kernel allows at most 128 controllers of 15+15 ports
 * (3840 ports); the limits here are above that so a future kernel still
 * works, and finite so a hostile tree cannot make us allocate without end.
 */
#define VHCI_MAX_CONTROLLERS	512
#define VHCI_MAX_HC_PORTS	31	/* USB_MAXCHILDREN */
#define VHCI_BUSID_MAX		32	/* local_busid, NUL included */
#define VHCI_LINE_MAX		128	/* one status line, newline excluded */
#define VHCI_STATUS_MAX		16384	/* one status file (kernel: a page) */
#define VHCI_ATTR_MAX		256	/* any other attribute read */

/* Attach retries. */
#define VHCI_EAGAIN_TRIES	3	/* EAGAIN answers tolerated per attach */
#define VHCI_EAGAIN_BACKOFF_US	2000	/* first pause; doubles each time */

enum vhci_hub {
	VHCI_HUB_HS = 0,
	VHCI_HUB_SS = 1,
};

/* The sta column: enum usbip_device_status's VDEV_ST_* values. */
enum vhci_port_status {
	VHCI_ST_UNKNOWN = 0,	/* no valid line for this port: never chosen */
	VHCI_ST_FREE = 4,	/* VDEV_ST_NULL */
	VHCI_ST_INIT = 5,	/* VDEV_ST_NOTASSIGNED: attached, not addressed */
	VHCI_ST_USED = 6,	/* VDEV_ST_USED */
	VHCI_ST_ERROR = 7,	/* VDEV_ST_ERROR */
};

/* One port as the last status read showed it. */
struct vhci_port {
	unsigned int		port;		/* global number, as written to attach */
	unsigned int		controller;
	enum vhci_hub		hub;
	unsigned int		rhport;		/* 0-based on its root hub */
	enum vhci_port_status	status;
	uint32_t		speed;		/* USBIP_SPEED_*; 0 unless USED */
	uint32_t		devid;		/* 0 unless USED */
	int			sockfd;		/* attacher's fd number; 0 unless USED */
	char			local_busid[VHCI_BUSID_MAX];	/* "0-0" unless USED */
};

/*
 * The seam between this module and the file system.  The default
 * (vhci_io_sysfs) does one open/write/close per attribute, as sysfs wants.
 * Tests replace write_attr to play the kernel: fail with EBUSY, EAGAIN or
 * EINVAL, and rewrite the fake status files the way the kernel would.
 */
struct vhci_io {
	/* Write len bytes in one write(2).  0, or -1 with errno. */
	int	(*write_attr)(void *arg, const char *path, const char *buf,
		    size_t len);
	/*
	 * Read the whole attribute into buf (size bytes), NUL-terminated.
	 * Returns the length, or -1 with errno (E2BIG if it does not fit).
	 */
	ssize_t	(*read_attr)(void *arg, const char *path, char *buf,
		    size_t size);
	/* Pause between EAGAIN retries. */
	void	(*sleep_usec)(void *arg, unsigned int usec);
	void	*arg;
};

extern const struct vhci_io vhci_io_sysfs;
int	vhci_sysfs_write(void *, const char *, const char *, size_t);
ssize_t	vhci_sysfs_read(void *, const char *, char *, size_t);
void	vhci_sysfs_sleep(void *, unsigned int);

struct vhci_params {
	const char		*platform_dir;	/* NULL: VHCI_PLATFORM_DIR */
	const char		*usb_bus_dir;	/* NULL: VHCI_USB_BUS_DIR */
	const struct vhci_io	*io;		/* NULL: vhci_io_sysfs */
	int			 eagain_tries;	/* <0: VHCI_EAGAIN_TRIES */
	unsigned int		 eagain_backoff_us; /* 0: VHCI_EAGAIN_BACKOFF_US */
};

struct vhci;

/*
 * Find vhci_hcd.0, read nports, count the status files (controllers),
 * find every controller's two root hubs (usbN under vhci_hcd.X, told
 * apart by their `speed`) and read the status.  NULL with errno on
 * failure (ENODEV: vhci_hcd is not loaded), logged.
 */
struct vhci	*vhci_open(const struct vhci_params *);
void		 vhci_free(struct vhci *);

unsigned int	 vhci_ncontrollers(const struct vhci *);
unsigned int	 vhci_hc_ports(const struct vhci *);	/* ports per root hub */
unsigned int	 vhci_nports(const struct vhci *);	/* all of them */

/*
 * Attach only to controller c (config "vhci-controller"); -1, the
 * default, uses every controller.  -1/EINVAL if c does not exist.
 */
int		 vhci_restrict_controller(struct vhci *, int c);

/* Re-read every status file, or one controller's.  0, or -1 (logged). */
int		 vhci_refresh(struct vhci *);
int		 vhci_refresh_controller(struct vhci *, unsigned int);
/* Malformed lines seen by the last refresh (each was logged). */
unsigned int	 vhci_bad_lines(const struct vhci *);

/* The port as last read, NULL if out of range. */
const struct vhci_port *vhci_port(const struct vhci *, unsigned int port);

/* The root hub a device of this speed must go to; -1 if unsupported. */
int		 vhci_hub_for_speed(uint32_t speed);
const char	*vhci_hub_name(enum vhci_hub);
const char	*vhci_status_name(enum vhci_port_status);

/*
 * Attach: pick the first free port on the hub for speed, write
 * "<port> <sockfd> <devid> <speed>" to attach, store the port in *portp.
 * The cached status proposes a port and its controller's status file is
 * re-read before every try (all of them only when the cache has no free
 * port left), so an attach costs one status read, not one per
 * controller.  EBUSY (or, from older kernels,
 * EINVAL on a port the re-read shows taken) means another attacher won
 * the race: try the next free port, each port once.  EAGAIN: pause
 * (backoff doubling) and retry, at most eagain_tries times.  Returns 0,
 * or -1 with errno: EINVAL (speed or argument refused), ENOSPC (no free
 * port on that hub), EBUSY (lost every race), EAGAIN, or the write's.
 * sockfd must be a SOCK_STREAM socket open in this process; the kernel
 * takes its own reference, the caller closes its fd afterwards.
 */
int		 vhci_attach(struct vhci *, int sockfd, uint32_t devid,
		    uint32_t speed, unsigned int *portp);

/* Write the port number to detach, retrying EAGAIN.  0 or -1/errno. */
int		 vhci_detach(struct vhci *, unsigned int port);

/*
 * Ports not free (INIT, USED, ERROR) as last read, for reconciliation:
 * *out is a new array of *nout entries (NULL if none), caller frees.
 */
int		 vhci_used_ports(struct vhci *, struct vhci_port **out,
		    size_t *nout);

/* ---- authorization (Documentation/usb/authorization.rst) ------------ */

/* Root hub bus number of a controller's hub, 0 if not found. */
unsigned int	 vhci_roothub_busnum(const struct vhci *, unsigned int ctrl,
		    enum vhci_hub);

/*
 * Write authorized_default and interface_authorized_default on every
 * vhci root hub (a value < 0 leaves that attribute alone).  Fails if a
 * root hub is missing or a write fails: lock-down is all or nothing.
 */
int		 vhci_set_authorized_default(struct vhci *, int dev_default,
		    int intf_default);

/* An interface as the vhci host's kernel sees it (interface dir N-P:C.I). */
struct vhci_intf {
	char		name[VHCI_BUSID_MAX + 8];	/* "3-1:1.0" */
	unsigned int	config;
	unsigned int	number;
	uint8_t		iclass, isubclass, iprotocol;
	int		authorized;		/* as read, -1 unknown */
};

/* Return 1 to authorize the interface, 0 to keep it without a driver. */
typedef int (*vhci_intf_cb)(void *arg, const struct vhci_intf *);

struct vhci_authz_result {
	char		local_busid[VHCI_BUSID_MAX];
	unsigned int	nallowed;
	unsigned int	ndenied;
};

/*
 * Authorize the device on port, which we attached with devid and sockfd
 * (checked against the status so we never authorize someone else's
 * device): write 1 to usbN/N-P/authorized; then, if cb is set, ask cb
 * for each interface, write its authorized (1 or 0) and write the
 * allowed interfaces' names to drivers_probe.  Returns 0 done, 1 not yet
 * (the kernel has not enumerated the device: call again later), -1 with
 * errno (ESTALE: the port holds another device; ENODEV: port gone).
 */
int		 vhci_authorize(struct vhci *, unsigned int port, uint32_t devid,
		    int sockfd, vhci_intf_cb cb, void *arg,
		    struct vhci_authz_result *);

/* Write 0 to the device's authorized (drivers unbind at once). */
int		 vhci_deauthorize(struct vhci *, unsigned int port);

/* ---- parsing (exposed for tests and the fuzzer) ---------------------- */

/*
 * Parse one controller's status file (buf[0..len), not NUL-terminated,
 * may contain anything).  ports has 2*hc_ports entries, indexed
 * hub*hc_ports + rhport; each is reset, then filled from a valid line.
 * A line that is malformed, out of this controller's range, on the
 * wrong hub for its number, or a second line for the same port is
 * counted in *nbad and logged; a port with no valid line (or with
 * conflicting lines) is VHCI_ST_UNKNOWN.  Returns the number of ports
 * filled, or -1 if the arguments are out of bounds.
 */
int		 vhci_status_parse(const char *buf, size_t len,
		    unsigned int controller, unsigned int hc_ports,
		    struct vhci_port *ports, unsigned int *nbad);

/* Is s a USB device name the kernel prints ("0-0", "3-1", "3-1.4.2")? */
int		 vhci_busid_valid(const char *s);

#endif
