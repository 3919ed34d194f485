/*
 * usbloop: libusb inside the libevent loop (protocol.md 1.9.1), as
 * libusb's io.c "more advanced option" prescribes: one persistent event
 * per libusb pollfd, libusb_handle_events_timeout_completed() with a zero
 * timeout on activity, and a timer from libusb_get_next_timeout() when
 * libusb has no timerfd.  libusb's fds run at loop priority 0 when the
 * base has priorities (completions free usbfs memory and carry ISO
 * timing), sockets at 1.
 *
 * Every call that adds or removes a libusb fd (libusb_open,
 * libusb_close, libusb_init/exit) must run on the loop's thread: the
 * notifiers touch events, and libevent is not thread-safe here.
 */
#ifndef USBGW_AGENT_USBLOOP_H
#define USBGW_AGENT_USBLOOP_H

#include <event2/event.h>
#include <libusb.h>

int		 usbloop_start(struct event_base *, libusb_context *);
/*
 * fn runs after each round of libusb event handling (every completion
 * of the round has been called back): the exporter writes the round's
 * replies there, in the same loop turn.
 */
void		 usbloop_set_after(void (*fn)(void *), void *arg);
/* After submitting transfers: re-arm the timeout timer (no timerfd). */
void		 usbloop_rearm(void);
/* Handle libusb events, blocking for at most ms (shutdown only). */
void		 usbloop_run_blocking(int ms);
void		 usbloop_stop(void);

#endif
