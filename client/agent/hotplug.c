/*
 * hotplug: libusb's hotplug callbacks (LIBUSB_HOTPLUG_ENUMERATE
 * included) -> arrivals and departures, run as a deferred step of the
 * loop: a callback runs inside libusb_handle_events*() (or inside
 * libusb_hotplug_register_callback() for ENUMERATE), where libusb forbids
 * its synchronous API, so it only records the device and activates the
 * step.  Also the device layers' start and stop (usbdev_init,
 * usbdev_shutdown of usbdev.h), being their top.
 *
 * Debian's libusb is built with udev: devices present at start are
 * enumerated by scanning sysfs through libudev (no udevd needed), but
 * arrivals and departures come from the udev monitor, that is from a
 * running udevd.  Without it the agent learns departures from its
 * transfers (NO_DEVICE) and sees no new device.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <libusb.h>

#include "base/log.h"
#include "urb.h"
#include "usbdev.h"
#include "usbdev_int.h"
#include "usbloop.h"
#include "base/util.h"

struct hp_pend {
	libusb_device	*dev;
	bool		 arrived;
	struct hp_pend	*next;
};

static struct {
	libusb_context	*ctx;
	libusb_hotplug_callback_handle cb;
	bool		 has_cb;
	struct event	*step;
	struct hp_pend	*head, **tailp;
} hp;

static void
hp_queue(libusb_device *dev, bool arrived)
{
	struct hp_pend	*p = xcalloc(1, sizeof(*p));

	p->dev = libusb_ref_device(dev);
	p->arrived = arrived;
	*hp.tailp = p;
	hp.tailp = &p->next;
	event_active(hp.step, EV_TIMEOUT, 0);
}

static int LIBUSB_CALL
hp_callback(libusb_context *ctx, libusb_device *dev,
    libusb_hotplug_event ev, void *arg)
{
	(void)ctx;
	(void)arg;
	hp_queue(dev, ev == LIBUSB_HOTPLUG_EVENT_DEVICE_ARRIVED);
	return 0;
}

static void
hp_step(evutil_socket_t fd, short what, void *arg)
{
	struct hp_pend	*p;

	(void)fd;
	(void)what;
	(void)arg;
	while ((p = hp.head) != NULL) {
		hp.head = p->next;
		if (hp.head == NULL)
			hp.tailp = &hp.head;
		if (p->arrived)
			usbdev_arrive(p->dev);
		else
			usbdev_left(p->dev);
		libusb_unref_device(p->dev);
		free(p);
	}
}

int
usbdev_init(struct event_base *base, const struct usbdev_conf *conf,
    const struct usbdev_hooks *hooks, void *arg, char *err, size_t errsz)
{
	libusb_device	**list;
	ssize_t		 n, i;
	int		 r;

	hp.tailp = &hp.head;
	if ((r = libusb_init(&hp.ctx)) != 0) {
		snprintf(err, errsz, "libusb: %s", libusb_strerror(r));
		return -1;
	}
	if (usbloop_start(base, hp.ctx) == -1) {
		snprintf(err, errsz, "libusb: no poll fds for the loop");
		libusb_exit(hp.ctx);
		return -1;
	}
	usbdev_setup(base, conf, hooks, arg);
	if ((hp.step = event_new(base, -1, 0, hp_step, NULL)) == NULL)
		fatalx("hotplug: event_new");
	if (libusb_has_capability(LIBUSB_CAP_HAS_HOTPLUG)) {
		r = libusb_hotplug_register_callback(hp.ctx,
		    LIBUSB_HOTPLUG_EVENT_DEVICE_ARRIVED |
		    LIBUSB_HOTPLUG_EVENT_DEVICE_LEFT, LIBUSB_HOTPLUG_ENUMERATE,
		    LIBUSB_HOTPLUG_MATCH_ANY, LIBUSB_HOTPLUG_MATCH_ANY,
		    LIBUSB_HOTPLUG_MATCH_ANY, hp_callback, NULL, &hp.cb);
		if (r == 0) {
			hp.has_cb = true;
			log_info("usb: hotplug on (libusb %s)",
			    libusb_get_version()->describe);
			return 0;
		}
		log_warnx("usb: hotplug: %s; devices found at start only",
		    libusb_strerror(r));
	} else
		log_warnx("usb: libusb has no hotplug; devices found at start "
		    "only");
	if ((n = libusb_get_device_list(hp.ctx, &list)) < 0) {
		snprintf(err, errsz, "libusb: device list: %s",
		    libusb_strerror((int)n));
		return -1;
	}
	for (i = 0; i < n; i++)
		hp_queue(list[i], true);
	libusb_free_device_list(list, 1);
	return 0;
}

void
usbdev_shutdown(void)
{
	struct hp_pend	*p;

	if (hp.ctx == NULL)
		return;
	if (hp.has_cb)
		libusb_hotplug_deregister_callback(hp.ctx, hp.cb);
	hp.has_cb = false;
	while ((p = hp.head) != NULL) {
		hp.head = p->next;
		libusb_unref_device(p->dev);
		free(p);
	}
	hp.tailp = &hp.head;
	if (hp.step != NULL)
		event_free(hp.step);
	hp.step = NULL;
	urb_shutdown();
	usbdev_teardown();
	usbloop_stop();
	libusb_exit(hp.ctx);
	hp.ctx = NULL;
}
