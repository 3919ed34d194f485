/*
 * urb: the agent's URB engine (urb.c), the expsrv back end
 * usbdev_expsrv_ops of usbdev.h.  This header: what hotplug.c needs.
 */
#ifndef USBGW_AGENT_URB_H
#define USBGW_AGENT_URB_H

/* Shutdown: end the imports still held, await libusb's callbacks
 * (blocking, at most UD_RELEASE_WAIT_MS). */
void	urb_shutdown(void);

#endif
