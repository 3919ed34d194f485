/*
 * usbdev: usbgw-agent's devices, on libusb (protocol.md 1.9.1-1.9.3).
 * The contract between the device layers (usbloop.c, usbdev.c, urb.c,
 * hotplug.c) and the agent above them (export.c, ctlconn.c, agent.c).
 *
 * The device layer finds devices (libusb hotplug, ENUMERATE included),
 * decides local vs exportable (hub, vhci, foreign driver, busy, and the
 * keep-list through the hook below), claims every interface of an
 * exportable device with libusb's auto-detach (race-free detach), runs
 * imports as an expsrv back end (usbdev_expsrv_ops), and gives devices
 * back to their kernel drivers on usbdev_shutdown().  Upward it speaks
 * only through struct usbdev_hooks.
 */
#ifndef USBGW_AGENT_USBDEV_H
#define USBGW_AGENT_USBDEV_H

#include <stdbool.h>
#include <stdint.h>

#include <event2/event.h>

#include "proto/expsrv.h"
#include "base/identity.h"
#include "proto/usbip.h"

struct usbdev_hooks {
	/*
	 * Keep-list: true if the device stays with the thin client
	 * (*ruleno: the config line that decided, 0 for the built-in
	 * default).  Called at each arrival, before a device is offered
	 * again after an import or a claim, and by usbdev_recheck_keep(),
	 * from the loop.
	 */
	bool	(*keep)(void *arg, const struct usbgw_identity *,
		    int *ruleno);
	/* no-reset list: true if the device must not be reset. */
	bool	(*no_reset)(void *arg, const struct usbgw_identity *);
	/*
	 * A device became exportable (added, with its list record) or
	 * stopped being exportable (removed: unplugged, or gone local).
	 * For the audit lines and the control connection's push.
	 */
	void	(*changed)(void *arg, const char *busid, bool added,
		    const struct usbip_dev *rec, const struct usbip_intf *,
		    uint8_t nintf);
	/* An audit line (key=value text, no "audit: " prefix). */
	void	(*audit)(void *arg, const char *line);
};

struct usbdev_conf {
	const char	*state_file;	/* held devices, for the guardian and
					 * --reattach; NULL: none */
	unsigned	 max_urbs_per_ep;	/* 0: default 64 (ISO 32) */
	bool		 zero_copy;	/* usbfs-mapped buffers (umem) */
};

/* Starts libusb inside the loop and enumerates (arrivals come later,
 * from the loop).  -1 with err filled when libusb cannot start. */
int		 usbdev_init(struct event_base *, const struct usbdev_conf *,
		    const struct usbdev_hooks *, void *arg, char *err,
		    size_t errsz);
/* The expsrv back end: arg is ignored (NULL). */
extern const struct expsrv_ops usbdev_expsrv_ops;
/* Each exportable, unheld device: its record and interfaces. */
void		 usbdev_foreach_exportable(void (*)(void *,
		    const struct usbip_dev *, const struct usbip_intf *,
		    uint8_t), void *);
/*
 * After a reload changed the keep-list (and no-reset): an exportable
 * device the keep-list now names is taken off the list at once and given
 * back to its kernel drivers (audit line keep-local ... reason=reload); a
 * kept device it no longer names is examined and claimed as if it had
 * just arrived.  For a device held by an import that is now kept, held()
 * is called with its busid: the caller ends that import, and the device
 * goes back to its drivers when the release is done instead of being
 * offered again.  Returns the number of devices whose side changed.
 */
int		 usbdev_recheck_keep(void (*held)(const char *busid));
/* Ends every import, releases every device and gives it back to its
 * kernel drivers; then libusb exits.  Blocking (shutdown only). */
void		 usbdev_shutdown(void);
/* --reattach: kernel drivers back for what the state file lists (the
 * agent is dead).  Returns the number of devices handled, -1 on error. */
int		 usbdev_reattach_state(const char *state_file, char *err,
		    size_t errsz);

#endif
