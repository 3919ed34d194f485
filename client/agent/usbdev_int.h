/*
 * The device layers' shared view of a device (usbdev.c owns it; urb.c
 * and hotplug.c read it and call usbdev.c's functions to change it).
 * Not for the agent above: its contract is usbdev.h.
 */
#ifndef USBGW_AGENT_USBDEV_INT_H
#define USBGW_AGENT_USBDEV_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <libusb.h>

#include "base/desc.h"
#include "proto/expsrv.h"
#include "base/identity.h"
#include "usbdev.h"
#include "proto/usbip.h"

/* protocol.md 1.9.2's states; "new" is an arrival being examined or
 * claimed, offered to nobody. */
enum ud_state {
	UD_NEW,
	UD_LOCAL,
	UD_EXPORTABLE,
	UD_HELD,
	UD_RELEASING,
	UD_GONE,
};

enum ud_local {
	UDL_NONE,
	UDL_HUB,
	UDL_VHCI,
	UDL_FOREIGN,	/* a device-level driver other than "usb" */
	UDL_BUSY,	/* an interface held by another program, or no access */
	UDL_KEPT,	/* the keep-list */
};

#define UD_RETRY_S		2	/* foreign-driver and busy rechecks */
#define UD_RELEASE_WAIT_MS	1000	/* cancellations awaited at release */
#define UD_MAX_DESCS		(64 * 1024)

struct urbstate;
struct udjob;

struct usbdev {
	libusb_device	*ldev;
	libusb_device_handle *h;
	struct umem	*mem;		/* h's zero-copy buffers; closes h */
	char		 busid[USBIP_BUSID_SIZE];
	enum ud_state	 state;
	enum ud_local	 local;
	unsigned	 refs;		/* the list, transfers, jobs */
	bool		 listed;	/* in the device list */

	struct usbip_dev rec;
	struct usbip_intf intf[USBIP_MAX_INTERFACES];
	struct usbgw_identity ident;
	uint8_t		*descs;		/* sysfs "descriptors": device +
					 * every configuration, raw */
	size_t		 descslen;

	/* The claim. */
	uint8_t		 config_first;	/* at claim: restored at release */
	uint8_t		 config;	/* current bConfigurationValue */
	struct desc_config cfg;		/* the current configuration */
	bool		 have_cfg;
	uint8_t		 alt[DESC_MAX_INTF];	/* current alt per interface */
	uint32_t	 claimed;	/* interface numbers claimed (mask) */
	uint32_t	 detached;	/* those that had a kernel driver */
	bool		 taken;		/* claimed from the thin client, not
					 * given back yet (even with no
					 * interface claimed: unconfigured) */
	bool		 dirty;		/* touched since the last reset */
	bool		 no_reset;

	/* The import (urb.c's). */
	struct expsrv_conn *conn;
	struct urbstate	*us;
	void		(*on_gone)(struct usbdev *);

	/* Worker jobs, one at a time per device. */
	struct udjob	*jobs;		/* queued; the first is running */
	struct event	*retry;		/* busy / foreign-driver recheck */
	struct usbdev	*next;
};

/* A blocking libusb call, run on the worker. */
enum udjob_op {
	UDJ_CLAIM,	/* claim every interface (all or nothing) */
	UDJ_RESET,	/* libusb_reset_device */
	UDJ_SETCONF,	/* a = configuration value, b = nintf of it */
	UDJ_SETALT,	/* a = interface, b = alt */
	UDJ_CLEARHALT,	/* a = endpoint address */
	UDJ_RESTORE,	/* end of an import: reset, config back, re-claim */
	UDJ_GIVEBACK,	/* kept after a reload: release, reset, drivers back */
};

struct udjob {
	struct usbdev	*dev;
	enum udjob_op	 op;
	int		 a, b;
	int		 result;	/* LIBUSB_SUCCESS or LIBUSB_ERROR_* */
	void		(*done)(struct udjob *);
	void		*arg;
	/* Filled by run: */
	uint32_t	 claimed, detached;
	uint8_t		 config;
	struct udjob	*next;
};

extern struct usbdev *usbdev_list;

void		 usbdev_setup(struct event_base *, const struct usbdev_conf *,
		    const struct usbdev_hooks *, void *arg);
void		 usbdev_teardown(void);
struct event_base *usbdev_base(void);
unsigned	 usbdev_max_urbs(bool iso);
struct usbdev	*usbdev_find(const char *busid);
void		 usbdev_arrive(libusb_device *);
void		 usbdev_left(libusb_device *);
void		 usbdev_setstate(struct usbdev *, enum ud_state, enum ud_local,
		    const char *why);
const char	*usbdev_state_name(const struct usbdev *);
void		 usbdev_ref(struct usbdev *);
void		 usbdev_unref(struct usbdev *);
/* Queue a job; done(job) runs on the loop, then the job is freed. */
void		 usbdev_job(struct usbdev *, enum udjob_op, int a, int b,
		    void (*done)(struct udjob *), void *arg);
bool		 usbdev_job_running(const struct usbdev *);
/* The current configuration changed (value): parse it from descs. */
int		 usbdev_load_config(struct usbdev *, uint8_t value);
/* The interface numbers of configuration value (mask), 0 if none. */
uint32_t	 usbdev_config_mask(const struct usbdev *, uint8_t value);
/* urb.c's changes, applied by their owner. */
void		 usbdev_touch(struct usbdev *);
void		 usbdev_was_reset(struct usbdev *);
void		 usbdev_set_alt(struct usbdev *, uint8_t iface, uint8_t alt);
void		 usbdev_set_config(struct usbdev *, const struct udjob *);
/* A transfer said NO_DEVICE: gone. */
void		 usbdev_gone(struct usbdev *);
/* The import ended: releasing; restore and back to exportable when
 * nothing is in flight any more (urb.c calls usbdev_release_ready()). */
void		 usbdev_release_ready(struct usbdev *);
/* Does the keep-list (as reloaded last) name the device now? */
bool		 usbdev_kept_now(struct usbdev *);
/* Kept now and listed: give it back to its kernel drivers (a worker
 * job), then local(kept). */
void		 usbdev_keep_giveback(struct usbdev *);
void		 usbdev_audit(const char *fmt, ...)
		    __attribute__((format(printf, 1, 2)));
void		 usbdev_write_state(void);
/* Give a device back to its kernel drivers now (blocking: shutdown). */
void		 usbdev_giveback(struct usbdev *);

#endif
