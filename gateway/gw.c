/*
 * The gateway object: the loop's shared state, outgoing connections,
 * deferred frees and device lookup by busid.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <event2/bufferevent.h>

#include "config.h"
#include "gw.h"
#include "log.h"
#include "util.h"

struct gw *gw;

void
gw_init(struct event_base *base)
{
	gw = xcalloc(1, sizeof(*gw));
	gw->base = base;
	TAILQ_INIT(&gw->exporters);
	TAILQ_INIT(&gw->sessions);
	gw->started = now_usec();
	gw->poll_ms = 3000;
	gw->probe_timeout_ms = 5000;
	gw->attach_wait_ms = 0;
	gw->max_sessions = GW_MAX_DOWNSTREAM;
	gw->max_sessions_per_host = GW_MAX_DOWNSTREAM;
	gw->max_devices_per_exporter = 64;
	gw->max_new_devices_per_minute = 64;
	gw->dns = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
	    EVDNS_BASE_DISABLE_WHEN_INACTIVE);
	if (gw->dns == NULL)
		gw->dns = evdns_base_new(base, 0);
}

const char *
exp_state_name(enum exp_state s)
{
	switch (s) {
	case EXP_UNKNOWN:	return "unknown";
	case EXP_UP:		return "up";
	case EXP_DOWN:		return "down";
	}
	return "invalid";
}

/*
 * Start a non-blocking connection to host:port.  The caller sets
 * timeouts; connection success or failure arrives at ecb.
 */
int
gw_connect(const char *host, uint16_t port, struct bufferevent **bevp,
    bufferevent_data_cb rcb, bufferevent_event_cb ecb, void *arg)
{
	struct bufferevent *bev;

	bev = bufferevent_socket_new(gw->base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL)
		return -1;
	bufferevent_setcb(bev, rcb, NULL, ecb, arg);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	*bevp = bev;
	if (bufferevent_socket_connect_hostname(bev, gw->dns, AF_UNSPEC, host,
	    port) == -1) {
		/* ecb has not run; the caller frees nothing else */
		bufferevent_free(bev);
		*bevp = NULL;
		return -1;
	}
	return 0;
}

/*
 * Per-socket settings for the relay: no Nagle delay (a CMD_SUBMIT for an
 * IN transfer is a lone 48-byte header that must leave at once).
 */
void
gw_socket_tune(evutil_socket_t fd)
{
	int one = 1;

	if (fd >= 0)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

struct gw_deferred {
	void	(*fn)(void *);
	void	*arg;
};

static void
gw_deferred_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gw_deferred *d = arg;

	d->fn(d->arg);
	free(d);
}

/* Run fn(arg) from the loop, after the current callback returns. */
void
gw_defer(void (*fn)(void *), void *arg)
{
	struct gw_deferred *d = xmalloc(sizeof(*d));
	struct timeval tv = { 0, 0 };

	d->fn = fn;
	d->arg = arg;
	if (event_base_once(gw->base, -1, EV_TIMEOUT, gw_deferred_cb, d,
	    &tv) == -1)
		fatalx("event_base_once");
}

/*
 * Find a device by busid or by an unambiguous prefix of one.  *nmatch
 * (may be NULL) receives the number of prefix matches; an exact match
 * always wins.
 */
struct device *
gw_device_find(const char *busid, int *nmatch)
{
	struct exporter *exp;
	struct device *dev, *found = NULL;
	size_t len = strlen(busid);
	int n = 0;

	TAILQ_FOREACH(exp, &gw->exporters, entry) {
		TAILQ_FOREACH(dev, &exp->devices, entry) {
			if (dev->dead)
				continue;
			if (strcmp(dev->busid, busid) == 0) {
				if (nmatch != NULL)
					*nmatch = 1;
				return dev;
			}
			if (len > 0 && strncmp(dev->busid, busid, len) == 0) {
				found = dev;
				n++;
			}
		}
	}
	if (nmatch != NULL)
		*nmatch = n;
	return n == 1 ? found : NULL;
}

struct exporter *
exporter_find(const char *name)
{
	struct exporter *exp;

	TAILQ_FOREACH(exp, &gw->exporters, entry)
		if (!exp->dead && strcmp(exp->name, name) == 0)
			return exp;
	return NULL;
}

bool
gw_exporter_name_valid(const char *s)
{
	size_t i;

	for (i = 0; s[i] != '\0'; i++) {
		char c = s[i];

		if (i >= GW_NAME_MAX - 1)
			return false;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_'))
			return false;
	}
	return i > 0;
}

/* Bring the exporter list in line with the config file's. */
void
gw_sync_exporters(const struct config *cfg)
{
	struct exporter *exp;
	size_t i;
	long long port;
	const char *es;

	for (i = 0; i < cfg->nexporters; i++) {
		const struct config_exporter *ce = &cfg->exporters[i];

		if (parse_num(ce->addr.port, 1, 65535, &port, &es) == -1)
			continue;
		exp = exporter_find(ce->name);
		if (exp != NULL) {
			if (strcmp(exp->host, ce->addr.host) == 0 &&
			    exp->port == port)
				continue;
			exporter_free(exp);
		}
		exp = exporter_new(ce->name, ce->addr.host, (uint16_t)port);
		store_exporter_save(exp, NULL);
	}
}

/* Exporters known to the database. */
void
gw_restore(void)
{
	store_restore_exporters();
}

/*
 * Release every claim (the exporters reset their devices), without
 * marking anything gone: the devices are still plugged in, and their
 * presences and once-approvals continue when the gateway comes back.
 */
void
gw_shutdown(void)
{
	struct exporter *exp;

	gw->shutting_down = true;
	while ((exp = TAILQ_FIRST(&gw->exporters)) != NULL)
		exporter_free(exp);
}

void
gw_free(void)
{
	if (gw->dns != NULL)
		evdns_base_free(gw->dns, 0);
	free(gw);
	gw = NULL;
}

/* URBs per second over the last sampling period. */
double
gw_urb_rate(void)
{
	struct exporter *exp;
	struct device *dev;
	uint64_t total = 0, now = now_usec();
	double rate;

	TAILQ_FOREACH(exp, &gw->exporters, entry)
		TAILQ_FOREACH(dev, &exp->devices, entry)
			total += dev->urbs;
	if (gw->rate_at == 0 || now <= gw->rate_at) {
		gw->rate_at = now;
		gw->rate_urbs = total;
		return 0;
	}
	rate = (double)(total >= gw->rate_urbs ? total - gw->rate_urbs : 0) *
	    1e6 / (double)(now - gw->rate_at);
	gw->rate_at = now;
	gw->rate_urbs = total;
	return rate;
}
