/*
 * usbloop: libusb inside the libevent loop (see usbloop.h).
 */
#include <poll.h>
#include <stdlib.h>

#include <event2/event.h>
#include <libusb.h>

#include "base/log.h"
#include "usbloop.h"
#include "base/util.h"

struct ufd {
	int		 fd;
	struct event	*ev;
	struct ufd	*next;
};

static struct {
	struct event_base *base;
	libusb_context	*ctx;
	struct ufd	*fds;
	struct event	*timer;		/* only without timerfd */
	int		 has_timerfd;
	void		(*after)(void *);
	void		*after_arg;
} ul;

static void	usbloop_handle(evutil_socket_t, short, void *);

static void
usbloop_arm_timer(void)
{
	struct timeval	 tv;
	int		 r;

	if (ul.has_timerfd || ul.timer == NULL)
		return;
	r = libusb_get_next_timeout(ul.ctx, &tv);
	if (r == 1)
		evtimer_add(ul.timer, &tv);
	else if (r == 0)
		evtimer_del(ul.timer);
	else {
		/* An error: poll again soon rather than never. */
		tv.tv_sec = 0;
		tv.tv_usec = 100000;
		evtimer_add(ul.timer, &tv);
	}
}

static void
usbloop_handle(evutil_socket_t fd, short what, void *arg)
{
	struct timeval	 zero = { 0, 0 };
	int		 r;

	(void)fd;
	(void)what;
	(void)arg;
	r = libusb_handle_events_timeout_completed(ul.ctx, &zero, NULL);
	if (r != 0 && r != LIBUSB_ERROR_INTERRUPTED)
		log_warnx("usbloop: libusb event handling: %s",
		    libusb_strerror(r));
	usbloop_arm_timer();
	if (ul.after != NULL)
		ul.after(ul.after_arg);
}

static void
usbloop_added(int fd, short events, void *arg)
{
	struct ufd	*u;
	short		 what = EV_PERSIST;

	(void)arg;
	for (u = ul.fds; u != NULL; u = u->next)
		if (u->fd == fd)
			break;
	if (events & POLLIN)
		what |= EV_READ;
	if (events & POLLOUT)
		what |= EV_WRITE;
	if (u == NULL) {
		u = xcalloc(1, sizeof(*u));
		u->fd = fd;
		u->next = ul.fds;
		ul.fds = u;
	} else if (u->ev != NULL) {
		event_free(u->ev);
		u->ev = NULL;
	}
	u->ev = event_new(ul.base, fd, what, usbloop_handle, NULL);
	if (u->ev == NULL)
		fatalx("usbloop: event_new for libusb fd %d", fd);
	if (event_base_get_npriorities(ul.base) > 1)
		event_priority_set(u->ev, 0);
	if (event_add(u->ev, NULL) == -1)
		fatalx("usbloop: event_add for libusb fd %d", fd);
	log_debug("usbloop: libusb fd %d (%s%s)", fd,
	    (events & POLLIN) ? "in" : "", (events & POLLOUT) ? "out" : "");
}

static void
usbloop_removed(int fd, void *arg)
{
	struct ufd	**pp, *u;

	(void)arg;
	for (pp = &ul.fds; (u = *pp) != NULL; pp = &u->next)
		if (u->fd == fd) {
			*pp = u->next;
			if (u->ev != NULL)
				event_free(u->ev);
			free(u);
			log_debug("usbloop: libusb fd %d gone", fd);
			return;
		}
}

int
usbloop_start(struct event_base *base, libusb_context *ctx)
{
	const struct libusb_pollfd **pfd, **p;

	ul.base = base;
	ul.ctx = ctx;
	ul.has_timerfd = libusb_pollfds_handle_timeouts(ctx);
	if (!ul.has_timerfd) {
		ul.timer = evtimer_new(base, usbloop_handle, NULL);
		if (ul.timer == NULL)
			return -1;
		if (event_base_get_npriorities(base) > 1)
			event_priority_set(ul.timer, 0);
	}
	libusb_set_pollfd_notifiers(ctx, usbloop_added, usbloop_removed,
	    NULL);
	if ((pfd = libusb_get_pollfds(ctx)) == NULL) {
		usbloop_stop();
		return -1;
	}
	for (p = pfd; *p != NULL; p++)
		usbloop_added((*p)->fd, (*p)->events, NULL);
	libusb_free_pollfds(pfd);
	log_debug("usbloop: started (%s)", ul.has_timerfd ? "timerfd" :
	    "timer from libusb_get_next_timeout");
	return 0;
}

void
usbloop_set_after(void (*fn)(void *), void *arg)
{
	ul.after = fn;
	ul.after_arg = arg;
}

void
usbloop_rearm(void)
{
	usbloop_arm_timer();
}

void
usbloop_run_blocking(int ms)
{
	struct timeval	 tv;

	if (ul.ctx == NULL)
		return;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	libusb_handle_events_timeout_completed(ul.ctx, &tv, NULL);
}

void
usbloop_stop(void)
{
	struct ufd	*u;

	if (ul.ctx != NULL)
		libusb_set_pollfd_notifiers(ul.ctx, NULL, NULL, NULL);
	while ((u = ul.fds) != NULL) {
		ul.fds = u->next;
		if (u->ev != NULL)
			event_free(u->ev);
		free(u);
	}
	if (ul.timer != NULL)
		event_free(ul.timer);
	ul.timer = NULL;
	ul.ctx = NULL;
}
