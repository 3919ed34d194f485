/*
 * Exporters: the gateway polls each one's device list (OP_REQ_DEVLIST)
 * every poll interval (+-EXP_JITTER_PCT at random, so that many
 * exporters added at once do not stay in lockstep) and detects arrivals
 * and removals.  While an exporter's list fails the interval grows
 * exponentially (up to EXP_BACKOFF_MAX_MS); its claims stay
 * (exp_poll_failed).  A poll that times out is only retried until
 * EXP_DOWN_TIMEOUTS do in a row: a loaded gateway or exporter is slow,
 * not down; a refused, reset or closed connection is down at once.
 *
 * Current usbipd leaves imported devices out of its list, so a device
 * the gateway holds is present while its claim is open, whether or not
 * the list shows it; its unplugging shows as the claim closing.
 */
#include <sys/socket.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "base/hostlimit.h"
#include "base/log.h"
#include "base/util.h"
#include "core/device.h"
#include "core/events.h"
#include "core/exporter.h"
#include "core/loop.h"
#include "core/relay.h"
#include "core/store.h"
#include "core/upstream.h"

#define EXP_BACKOFF_MAX_MS	60000
#define EXP_JITTER_PCT		10	/* every poll interval, +- */
#define EXP_DOWN_TIMEOUTS	3	/* polls timed out in a row: down */
#define EXP_AGENT_POLL_MS	60000	/* an agent's backstop poll, pushing */
/*
 * last_seen and last_error are written to the database when they change
 * meaning (first time, another error) or are this old there: a good list
 * every poll interval from hundreds of exporters is not a write each.
 */
#define EXP_SAVE_AFTER_S	60

static const struct exporter_agent_ops *agent_ops;
static bool leasing;		/* exporters wait for their lease */

static void	exp_poll_cb(evutil_socket_t, short, void *);
static void	exp_schedule(struct exporter *, unsigned);
static void	exp_read(struct bufferevent *, void *);
static void	exp_event(struct bufferevent *, short, void *);
static void	exp_device_free(void *);
static void	exp_poll_close(struct exporter *);

struct exporter *
exporter_new(const char *name, const char *host, uint16_t port)
{
	struct exporter *exp;

	exp = xcalloc(1, sizeof(*exp));
	exp->gw = gw;
	usbgw_strlcpy(exp->name, name, sizeof(exp->name));
	usbgw_strlcpy(exp->host, host, sizeof(exp->host));
	exp->port = port;
	exp->state = EXP_UNKNOWN;
	exp->kind = EXP_KIND_USBIP;
	TAILQ_INIT(&exp->devices);
	exp->leased = !leasing;
	exp->poll_ev = evtimer_new(gw->base, exp_poll_cb, exp);
	TAILQ_INSERT_TAIL(&gw->exporters, exp, entry);
	/* the first poll within a tenth of the interval: spread too */
	if (exp->leased)
		exp_schedule(exp, usbgw_random_uniform(gw->poll_ms / 10 + 1));
	return exp;
}

/*
 * An agent.  Listen mode: polled like usbipd (the backstop), and a
 * control connection kept open to it (agentgw.c).  Dial-out: never
 * polled (there is nothing to connect to); host holds "NET/PREFIX", the
 * addresses its control connection may come from.
 */
struct exporter *
exporter_new_agent(const char *name, enum exp_kind kind, const char *host,
    uint16_t port)
{
	struct exporter *exp = exporter_new(name, host, port);
	char addr[256], *slash;
	long long n;
	const char *es;

	exp->kind = kind;
	if (kind == EXP_KIND_DIALOUT) {
		evtimer_del(exp->poll_ev);
		usbgw_strlcpy(addr, host, sizeof(addr));
		slash = strchr(addr, '/');
		if (slash != NULL)
			*slash++ = '\0';
		if (usbgw_addr_parse(addr, &exp->net) == -1)
			memset(&exp->net, 0, sizeof(exp->net)); /* admits nobody */
		exp->net_prefix = exp->net.family == AF_INET ? 32 : 128;
		if (slash != NULL && parse_num(slash, 0, exp->net_prefix, &n,
		    &es) == 0)
			exp->net_prefix = (unsigned)n;
	} else if (kind == EXP_KIND_AGENT && agent_ops != NULL && exp->leased)
		agent_ops->start(exp);
	return exp;
}

void
exporter_set_leasing(bool on)
{
	leasing = on;
}

/* The lease is this gateway's now: poll (and keep an agent's control). */
void
exporter_lease_gained(struct exporter *exp)
{
	if (exp->leased || exp->dead)
		return;
	exp->leased = true;
	exp->lease_lapsed = false;
	exp->listed_once = false;	/* its first list: no rate */
	exp->good_lists = 0;
	exp->lists_ok = 0;
	if (exp->kind == EXP_KIND_AGENT && agent_ops != NULL)
		agent_ops->start(exp);
	if (exp->kind != EXP_KIND_DIALOUT)
		exp_schedule(exp, 0);
}

/*
 * The lease is lost (taken by another gateway, or not renewed before
 * this gateway's deadline): stop using the exporter before anyone else
 * may.  Every attachment ends and every claim is released (the next
 * holder claims the devices); the devices are forgotten without being
 * marked gone (they are still plugged in, and their state is the next
 * holder's to write).  Imports held for them are answered as the
 * devices are freed (device observers).
 */
void
exporter_lease_lost(struct exporter *exp, const char *why)
{
	struct device *dev;

	if ((!exp->leased && !exp->lease_lapsed) || exp->dead)
		return;
	exp->leased = false;
	exp->lease_lapsed = false;
	log_warnx("exporter %s: %s: its devices are released", exp->name, why);
	if (agent_ops != NULL)
		agent_ops->stop(exp);
	evtimer_del(exp->poll_ev);
	exp_poll_close(exp);
	while ((dev = TAILQ_FIRST(&exp->devices)) != NULL) {
		device_release(dev, why);
		device_forget(dev);
		TAILQ_REMOVE(&exp->devices, dev, entry);
		gw_defer(exp_device_free, dev);
	}
	exp->fails = exp->timeouts = 0;
	/* not written to the store: the exporter's row is the holder's now */
	exp->state = EXP_UNKNOWN;
	gw_audit_exporter(exp, "lease-lost", why);
}

/*
 * The lease could not be renewed before this gateway's deadline (the
 * store is away, or only the lease's connection), and no other holder is
 * known: stop serving the exporter -- no poll, no new import (the import
 * path answers as for another gateway's exporter), the store-loss
 * setting decides the running attachments -- but keep every claim.  A
 * released claim at a stock usbipd frees the device for anyone on the
 * network, and while the store is away nobody may take the lease anyway;
 * a gateway that took it meanwhile finds the devices busy until this one
 * learns of it.  The next round that reaches the store either renews the
 * lease (exporter_lease_gained: serving again) or finds another holder
 * (exporter_lease_lost: the claims released then).
 */
void
exporter_lease_lapsed(struct exporter *exp, const char *why)
{
	if (!exp->leased || exp->dead)
		return;
	exp->leased = false;
	exp->lease_lapsed = true;
	log_warnx("exporter %s: %s: not served until the lease is renewed or "
	    "another gateway is known to hold it; its claims are kept",
	    exp->name, why);
	evtimer_del(exp->poll_ev);
	exp_poll_close(exp);
	gw_audit_exporter(exp, "lease-lapsed", why);
}

void
exporter_set_agent_ops(const struct exporter_agent_ops *ops)
{
	agent_ops = ops;
}

static void
exp_poll_close(struct exporter *exp)
{
	if (exp->poll_bev != NULL) {
		bufferevent_free(exp->poll_bev);
		exp->poll_bev = NULL;
	}
}

static void
exporter_destroy(void *arg)
{
	struct exporter *exp = arg;
	struct device *dev;

	while ((dev = TAILQ_FIRST(&exp->devices)) != NULL) {
		TAILQ_REMOVE(&exp->devices, dev, entry);
		device_free(dev);
	}
	free(exp);
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

/*
 * The live devices whose busid starts with busid, "a, b, c" into buf (at
 * most 8 named, then "and N more"): what an ambiguous busid could mean.
 */
void
gw_device_candidates(const char *busid, char *buf, size_t sz)
{
	struct exporter *exp;
	struct device *dev;
	size_t len = strlen(busid), off = 0;
	int n = 0;

	if (sz == 0)
		return;
	buf[0] = '\0';
	TAILQ_FOREACH(exp, &gw->exporters, entry)
		TAILQ_FOREACH(dev, &exp->devices, entry) {
			if (dev->dead || len == 0 ||
			    strncmp(dev->busid, busid, len) != 0)
				continue;
			if (++n <= 8 && off < sz)
				off += (size_t)snprintf(buf + off, sz - off,
				    "%s%s", n > 1 ? ", " : "", dev->busid);
		}
	if (n > 8 && off < sz)
		snprintf(buf + off, sz - off, " and %d more", n - 8);
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

void
gw_exporter_event(struct exporter *exp, const char *why)
{
	json_t *d = json_pack("{s:s, s:s, s:i, s:s, s:s}", "exporter", exp->name,
	    "host", exp->host, "port", (int)exp->port,
	    "state", exp_state_name(exp->state), "reason", why ? why : "");

	store_audit(exp->state == EXP_UP ? "exporter-up" : "exporter-down",
	    NULL, exp->name, why);
	gw_emit(exp->state == EXP_UP ? "exporter-up" : "exporter-down", d);
}

void
gw_audit_exporter(struct exporter *exp, const char *action, const char *detail)
{
	store_audit(action, NULL, exp->name, detail);
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

struct exporter *
exporter_find_addr(const char *host, uint16_t port, const struct exporter *skip)
{
	struct exporter *exp;

	TAILQ_FOREACH(exp, &gw->exporters, entry)
		if (!exp->dead && exp != skip && exp->kind != EXP_KIND_DIALOUT &&
		    exp->port == port && strcmp(exp->host, host) == 0)
			return exp;
	return NULL;
}

const char *
exporter_origin(const struct exporter *exp, char *buf, size_t len)
{
	if (exp->source == EXP_SRC_FILE)
		snprintf(buf, len, "declared at %s", exp->origin[0] != '\0' ?
		    exp->origin : "the config file");
	else
		snprintf(buf, len, "added with usbgw exporter add or import");
	return buf;
}

void
exporter_seen(struct exporter *exp)
{
	exp->last_seen = (int64_t)time(NULL);
	if (exp->seen_saved == 0 ||
	    exp->last_seen - exp->seen_saved >= EXP_SAVE_AFTER_S)
		store_exporter_seen(exp);
}

void
exporter_failed(struct exporter *exp, const char *why)
{
	int64_t now = (int64_t)time(NULL), before = exp->last_error_at;
	bool same;

	if (why == NULL || *why == '\0')
		why = "failed (no reason given)";
	same = strncmp(exp->last_error, why, sizeof(exp->last_error) - 1) == 0;
	usbgw_strlcpy(exp->last_error, why, sizeof(exp->last_error));
	exp->last_error_at = now;
	if (!same || now - before >= EXP_SAVE_AFTER_S)
		store_exporter_error(exp);
}

/* Tear down every device of the exporter and remove it. */
void
exporter_free(struct exporter *exp)
{
	struct device *dev;

	if (exp->last_seen != exp->seen_saved)
		store_exporter_seen(exp);	/* what the next start shows */
	exp->dead = true;
	if (agent_ops != NULL)
		agent_ops->stop(exp);
	TAILQ_FOREACH(dev, &exp->devices, entry) {
		if (gw->shutting_down)
			device_release(dev, "gateway shutting down");
		else
			device_gone(dev, "exporter removed");
	}
	exp_poll_close(exp);
	event_free(exp->poll_ev);
	exp->poll_ev = NULL;
	TAILQ_REMOVE(&gw->exporters, exp, entry);
	gw_defer(exporter_destroy, exp);
}

static void
exp_schedule(struct exporter *exp, unsigned ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	if (exp->poll_ev != NULL)
		evtimer_add(exp->poll_ev, &tv);
}

static void
exp_set_state(struct exporter *exp, enum exp_state st, const char *why)
{
	if (exp->state == st)
		return;
	log_info("exporter %s (%s:%u) %s%s%s", exp->name, exp->host, exp->port,
	    exp_state_name(st), why ? ": " : "", why ? why : "");
	exp->state = st;
	store_exporter_status(exp);
	gw_exporter_event(exp, why);
}

/*
 * The poll interval: an agent whose control connection is up pushes its
 * changes, and is polled only as a backstop.
 */
static unsigned
exp_poll_ms(const struct exporter *exp)
{
	if (exp->kind == EXP_KIND_AGENT && exp->ctl != NULL &&
	    gw->poll_ms < EXP_AGENT_POLL_MS)
		return EXP_AGENT_POLL_MS;
	return gw->poll_ms;
}

/* The poll interval after n failed polls in a row: doubled each time. */
static unsigned
exp_backoff(int n)
{
	unsigned ms = gw->poll_ms;

	for (int i = 1; i < n && ms < EXP_BACKOFF_MAX_MS; i++)
		ms *= 2;
	if (ms > EXP_BACKOFF_MAX_MS)
		ms = EXP_BACKOFF_MAX_MS;
	return usbgw_jitter(ms, EXP_JITTER_PCT);
}

/*
 * The poll failed (no connection, a malformed or closed list, or
 * EXP_DOWN_TIMEOUTS timeouts in a row): the exporter is down, and
 * polled again with back-off.  No claim is dropped for it.  A claim
 * lives on its own connection, and a list that did not arrive says
 * nothing about the devices: one reply too slow on a loaded machine
 * must not hand every device back to the exporter, where anybody could
 * import it.  A claim ends when its own connection fails (keep-alive
 * finds a dead exporter host); a device with no claim goes when the
 * exporter refuses its claim's connection, or when two good lists in a
 * row do not show it.
 */
static void
exp_poll_failed(struct exporter *exp, const char *why)
{
	exp_poll_close(exp);
	exp->fails++;
	exp->lists_ok = 0;
	exporter_failed(exp, why);
	exp_set_state(exp, EXP_DOWN, why);
	exp_schedule(exp, exp_backoff(exp->fails));
}

/*
 * The list did not come within probe-timeout, and nothing of it waits
 * in the socket either (exp_event): the exporter is slow, or the
 * gateway was so busy that the exporter's reply is not there yet.
 * Either way the exporter is not down: polled again with back-off, and
 * down only when EXP_DOWN_TIMEOUTS polls in a row time out.
 */
static void
exp_poll_timed_out(struct exporter *exp)
{
	char why[80];

	if (++exp->timeouts >= EXP_DOWN_TIMEOUTS) {
		snprintf(why, sizeof(why), "device list timed out (%d polls "
		    "in a row)", exp->timeouts);
		exp_poll_failed(exp, why);
		return;
	}
	log_info("exporter %s: device list timed out (%d in a row): "
	    "polled again", exp->name, exp->timeouts);
	snprintf(why, sizeof(why), "device list timed out (%d in a row)",
	    exp->timeouts);
	exporter_failed(exp, why);
	exp_poll_close(exp);
	exp->fails++;
	exp_schedule(exp, exp_backoff(exp->fails));
}

static void
exp_poll_cb(evutil_socket_t fd, short what, void *arg)
{
	struct exporter *exp = arg;
	struct timeval tv;
	unsigned ms = gw->probe_timeout_ms;

	if (exp->poll_bev != NULL || exp->kind == EXP_KIND_DIALOUT ||
	    !exp->leased)
		return;		/* one poll at a time; a dial-out agent: none;
				   another gateway's exporter: none */
	if ((exp->tls == EXP_TLS_REQUIRED ? gw_connect_tls(exp->host,
	    exp->port, exp->name, ms, &exp->poll_bev, exp_read, exp_event,
	    exp) : gw_connect(exp->host, exp->port, &exp->poll_bev, exp_read,
	    exp_event, exp)) == -1) {
		exp_poll_failed(exp, "cannot start connection");
		return;
	}
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	bufferevent_set_timeouts(exp->poll_bev, &tv, &tv);
	bufferevent_setwatermark(exp->poll_bev, EV_READ, 0,
	    USBIP_MAX_DEVLIST_REP);
}

/*
 * A TLS connection to the exporter refused (no TLS, another name, an
 * agent certificate refused): a log line and a tls-refused row, within
 * the per-address budget of the other refusals.
 */
void
exporter_tls_refused(struct exporter *exp, const char *why)
{
	if (!hostlimit_audit(exp->host, HL_TLS_REFUSED)) {
		log_debug("exporter %s: %s", exp->name, why);
		return;
	}
	log_warnx("exporter %s: %s", exp->name, why);
	gw_audit_exporter(exp, "tls-refused", why);
}

static void
exp_event(struct bufferevent *bev, short what, void *arg)
{
	struct exporter *exp = arg;
	uint8_t req[USBIP_OP_HDR_LEN];

	if (what & BEV_EVENT_CONNECTED) {
		usbip_op_hdr_encode(req, OP_REQ_DEVLIST, ST_OK);
		bufferevent_write(bev, req, sizeof(req));
		return;
	}
	if (what & BEV_EVENT_TIMEOUT) {
		if (!gw_timeout_spurious(bev, what))
			exp_poll_timed_out(exp);
	} else if (gw_tls_error() != NULL) {
		exporter_tls_refused(exp, gw_tls_error());
		exp_poll_failed(exp, gw_tls_error());
	} else if (what & BEV_EVENT_EOF)
		exp_poll_failed(exp, "exporter closed the connection");
	else
		exp_poll_failed(exp, evutil_socket_error_to_string(
		    EVUTIL_SOCKET_ERROR()));
}

static struct device *
exp_device_by_upbusid(struct exporter *exp, const char *busid)
{
	struct device *dev;

	TAILQ_FOREACH(dev, &exp->devices, entry)
		if (!dev->dead && strcmp(dev->up_busid, busid) == 0)
			return dev;
	return NULL;
}

static void
exp_device_free(void *arg)
{
	device_free(arg);
}

/*
 * Keep fewer than max-devices-per-exporter gone devices of this exporter
 * in memory: the oldest go first (the database keeps them; one that
 * returns is loaded again).  Only a device with nothing left open.
 */
static void
exp_evict_gone(struct exporter *exp)
{
	struct device *dev, *oldest;
	unsigned ngone;

	for (;;) {
		ngone = 0;
		oldest = NULL;
		TAILQ_FOREACH(dev, &exp->devices, entry) {
			if (dev->dead || dev->state != DEV_GONE)
				continue;
			ngone++;
			if (dev->up == NULL && dev->ds == NULL &&
			    !device_reclaim_pending(dev) &&
			    (oldest == NULL || dev->state_since < oldest->state_since))
				oldest = dev;
		}
		if (ngone < gw->max_devices_per_exporter || oldest == NULL)
			return;
		log_debug("%s: forgotten (gone, exporter %s has %u gone "
		    "devices)", oldest->busid, exp->name, ngone);
		device_forget(oldest);
		TAILQ_REMOVE(&exp->devices, oldest, entry);
		gw_defer(exp_device_free, oldest);
	}
}

/*
 * A new device in the list: within max-devices-per-exporter devices
 * present and max-new-devices-per-minute new ones this minute?  A thin
 * client has a few ports; an exporter listing hundreds of devices, or new
 * busids at every poll, would make the gateway claim (a connection each),
 * probe and remember without end.  The exporter's first list since the
 * gateway started is not rated: after a restart every device in it is
 * new to the gateway.
 */
static bool
exp_may_add(struct exporter *exp, const char *busid, bool first)
{
	struct device *dev;
	unsigned present = 0;
	uint64_t now = now_usec() / 1000;
	char msg[256], esc[64];

	TAILQ_FOREACH(dev, &exp->devices, entry)
		if (!dev->dead && dev->state != DEV_GONE)
			present++;
	if (now - exp->new_window >= 60000) {
		exp->new_window = now;
		exp->new_count = 0;
	}
	if (present < gw->max_devices_per_exporter &&
	    (first || exp->new_count < gw->max_new_devices_per_minute)) {
		if (!first)
			exp->new_count++;
		return true;
	}
	if (!exp->over_limit) {
		exp->over_limit = true;
		if (present >= gw->max_devices_per_exporter)
			snprintf(msg, sizeof(msg), "%u devices present "
			    "(max-devices-per-exporter): %s and any further "
			    "devices not taken", present,
			    log_escape(esc, sizeof(esc), busid,
			    USBIP_BUSID_SIZE));
		else
			snprintf(msg, sizeof(msg), "%u new devices this minute "
			    "(max-new-devices-per-minute): %s and any further "
			    "new devices not taken yet", exp->new_count,
			    log_escape(esc, sizeof(esc), busid,
			    USBIP_BUSID_SIZE));
		log_warnx("exporter %s: %s", exp->name, msg);
		gw_audit_exporter(exp, "exporter-over-limit", msg);
	}
	return false;
}

/*
 * The exporter lists a device the gateway holds an idle claim on.  Stock
 * usbipd lists only devices nobody imported, so the claim does not hold
 * the device any more (the exporter restarted under a half-open
 * connection, say): anybody may import it now.  One list may have been
 * made just before the claim's import; two in a row are not: the stale
 * claim is closed and the device claimed afresh.
 */
static void
exp_listed_held(struct device *dev)
{
	if (dev->up == NULL || dev->up->state != UP_IDLE || dev->ds != NULL) {
		dev->listed_held = 0;
		return;
	}
	if (++dev->listed_held < 2)
		return;
	dev->listed_held = 0;
	store_audit_device(dev, "claim-stale", NULL, "the exporter lists the "
	    "device as free in two lists in a row: claimed afresh");
	device_up_closed(dev, "the exporter lists the device as free: the "
	    "claim does not hold it");
}

/*
 * One device record of a list (or an agent's DEV_ADDED): a new device
 * within the limits is taken and claimed, a known unheld one claimed
 * again.  False if a limit left it alone.
 */
static bool
exp_record_one(struct exporter *exp, const struct usbip_dev *rec,
    const struct usbip_intf *intf, bool first)
{
	struct device *dev;
	char esc[64];

	if (!usbip_busid_valid(rec->busid)) {
		log_warnx("exporter %s lists an unusable busid \"%s\"",
		    exp->name, log_escape(esc, sizeof(esc), rec->busid,
		    sizeof(rec->busid)));
		return true;
	}
	dev = exp_device_by_upbusid(exp, rec->busid);
	if (dev == NULL) {
		if (!exp_may_add(exp, rec->busid, first))
			return false;
		exp_evict_gone(exp);
		dev = device_new(exp, rec);
	}
	device_listed(dev, rec, intf);
	dev->seen = true;
	dev->missed = 0;
	if (dev->up == NULL && dev->ds == NULL)
		device_claim(dev);
	else
		exp_listed_held(dev);
	return true;
}

/* A complete device list arrived: reconcile. */
static void
exp_devlist(struct exporter *exp, const uint8_t *buf, size_t len)
{
	struct usbip_dev rec;
	struct usbip_intf intf[USBIP_MAX_INTERFACES];
	struct device *dev;
	size_t off = 0;
	bool skipped = false, first = !exp->listed_once;

	exp->listed_once = true;
	if (exp->lists_ok < 2)
		exp->lists_ok++;
	TAILQ_FOREACH(dev, &exp->devices, entry)
		dev->seen = false;
	while (usbip_devlist_next(buf, len, &off, &rec, intf))
		if (!exp_record_one(exp, &rec, intf, first))
			skipped = true;
	TAILQ_FOREACH(dev, &exp->devices, entry) {
		if (dev->seen || dev->state == DEV_GONE)
			continue;
		dev->listed_held = 0;
		if (dev->up != NULL && dev->up->state != UP_CLOSED &&
		    dev->up->state != UP_QUEUED &&
		    dev->up->state != UP_CONNECTING)
			continue;	/* we hold it: usbipd hides it */
		if (device_reclaim_pending(dev))
			continue;	/* between release and reclaim */
		/* two good lists in a row without it (one may be stale) */
		if (++dev->missed < 2)
			continue;
		device_gone(dev, "no longer in the exporter's list (two lists "
		    "in a row)");
	}
	if (!skipped && exp->over_limit) {
		exp->over_limit = false;
		log_info("exporter %s: within its device limits again",
		    exp->name);
	}
}

/* Does the gateway hold a device (not gone) at this port of exp? */
static int
exp_port_present(void *arg, const char *up_busid)
{
	struct exporter *exp = arg;
	struct device *dev;

	TAILQ_FOREACH(dev, &exp->devices, entry)
		if (!dev->dead && dev->state != DEV_GONE &&
		    strcmp(dev->up_busid, up_busid) == 0)
			return 1;
	return 0;
}

/*
 * The exporter's second good list since start: rows the database holds
 * for ports where neither list showed a device (and no claim holds
 * one) are devices that left while no gateway watched.  Their
 * presences end.
 */
static void
exp_settle(struct exporter *exp)
{
	if (exp->good_lists >= 2 || ++exp->good_lists < 2)
		return;
	store_exporter_settle(exp->id, exp_port_present, exp,
	    "not at its exporter after the gateway restarted (absent from "
	    "two device lists)");
}

static void
exp_read(struct bufferevent *bev, void *arg)
{
	struct exporter *exp = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct usbip_op op;
	const char *why = NULL;
	size_t len = evbuffer_get_length(in);
	uint8_t *p;
	int r;

	p = evbuffer_pullup(in, -1);
	r = usbip_op_decode(p, len, USBIP_FROM_SERVER, &op, &why);
	if (r == USBIP_NEED_MORE)
		return;
	if (r < 0 || op.hdr.code != OP_REP_DEVLIST || op.hdr.status != ST_OK) {
		char msg[160];

		snprintf(msg, sizeof(msg), "bad device list: %s",
		    r < 0 ? why : op.hdr.code != OP_REP_DEVLIST ?
		    "unexpected op code" : usbip_st_name(op.hdr.status));
		gw_audit_exporter(exp, "malformed", msg);
		exp_poll_failed(exp, msg);
		return;
	}
	exp->fails = 0;
	exp->timeouts = 0;
	exp->last_ok = now_usec();
	exporter_seen(exp);
	exp_set_state(exp, EXP_UP, NULL);
	exp_devlist(exp, p, (size_t)r);
	exp_settle(exp);
	exp_poll_close(exp);
	exp_schedule(exp, usbgw_jitter(exp_poll_ms(exp), EXP_JITTER_PCT));
}


/* ---- what an agent pushes (agentgw.c), protocol.md 1.9.4 --------------- */

/*
 * Does the gateway hold dev's claim (imported, probing, idle or
 * relaying)?  An agent's word about a held device counts for nothing:
 * the claim's connection is the truth.
 */
static bool
exp_dev_held(const struct device *dev)
{
	return dev->ds != NULL || (dev->up != NULL &&
	    dev->up->state != UP_CLOSED && dev->up->state != UP_QUEUED &&
	    dev->up->state != UP_CONNECTING);
}

void
exporter_ctl_changed(struct exporter *exp, const char *why)
{
	if (exp->dead)
		return;
	if (exp->kind == EXP_KIND_DIALOUT) {
		/* its control connection is all the gateway sees of it */
		if (exp->ctl != NULL)
			exporter_seen(exp);
		else
			exporter_failed(exp, why != NULL ? why :
			    "control connection closed");
		exp_set_state(exp, exp->ctl != NULL ? EXP_UP : EXP_DOWN, why);
		return;
	}
	/* listen mode: the backstop poll's interval changes now */
	if (exp->poll_bev == NULL && exp->fails == 0)
		exp_schedule(exp, usbgw_jitter(exp->ctl != NULL ?
		    exp_poll_ms(exp) : gw->poll_ms / 10 + 1, EXP_JITTER_PCT));
}

void
exporter_record(struct exporter *exp, const struct usbip_dev *rec,
    const struct usbip_intf *intf)
{
	bool first = !exp->listed_once;

	if (exp->dead)
		return;
	exp->listed_once = true;
	exp_record_one(exp, rec, intf, first);
}

void
exporter_removed(struct exporter *exp, const char *busid, const char *why)
{
	struct device *dev = exp_device_by_upbusid(exp, busid);

	if (dev == NULL || dev->state == DEV_GONE)
		return;
	dev->seen = false;
	dev->listed_held = 0;
	if (exp_dev_held(dev)) {
		log_debug("%s: the agent reports it removed; held: the "
		    "claim decides", dev->busid);
		return;
	}
	device_gone(dev, why);
}

void
exporter_snapshot_begin(struct exporter *exp)
{
	struct device *dev;

	TAILQ_FOREACH(dev, &exp->devices, entry)
		dev->seen = false;
}

/*
 * A snapshot is the agent's whole list of exportable devices, in order
 * on one connection: a device it does not show and the gateway does not
 * hold (nor is about to claim again after a release) has left.
 */
void
exporter_snapshot_end(struct exporter *exp)
{
	struct device *dev;

	if (exp->dead)
		return;
	exp->listed_once = true;
	exporter_seen(exp);
	if (exp->lists_ok < 2)
		exp->lists_ok++;
	TAILQ_FOREACH(dev, &exp->devices, entry) {
		if (dev->dead || dev->seen || dev->state == DEV_GONE ||
		    exp_dev_held(dev) || device_reclaim_pending(dev))
			continue;
		device_gone(dev, "not in the agent's snapshot");
	}
	exp_settle(exp);
}
