/*
 * feed: this gateway among several on one store (protocol.md 4.3).
 *
 * The gateway's name (gateway-name, default the host name) is the
 * writer's name on every store connection (the change feed's triggers
 * and the audit rows record it) and its row in table gateways (start
 * time, heartbeat, advertised address, version).
 *
 * The change feed: every write of shared state (rules, approvals,
 * settings, agents, exporters) appends a row to table changes in its own
 * transaction, under the write lock, and sends NOTIFY usbgw_changes at
 * commit (the PostgreSQL schema's triggers, migration 12).  This module
 * LISTENs on a connection of its own and, on a notification, on a
 * (re)connection and every second, reads the rows past the last seq it
 * applied, in order, and applies what other gateways wrote through the
 * paths our own control socket uses: rules -> the policy tiers read again
 * and every present device decided again; an approval, denial or
 * revocation -> that device's decisions read again and decided again.
 * NOTIFY is only the wake-up: a notification lost while the listening
 * connection was down is caught up by the read.  A read that fails
 * leaves the last seq where it was (the next tick reads again).
 *
 * On SQLite there is one gateway: no feed, no timer, only the row in
 * gateways.
 */
#include <sys/types.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "control/config.h"
#include "db/db.h"
#include "core/device.h"
#include "daemon/feed.h"
#include "base/log.h"
#include "db/sqldb.h"
#include "core/store.h"
#include "core/tiers.h"
#include "tls/tlsid.h"
#include "tls/tlsshim.h"
#include "base/util.h"
#include "base/version.h"

#define FEED_CHANNEL	"usbgw_changes"
#define FEED_TICK_MS	1000	/* the catch-up read without a notification */
#define FEED_BEAT_S	5	/* gateways.heartbeat */
#define FEED_BATCH	500	/* rows per read */
#define FEED_READS	20	/* reads per catch-up, then the next tick */
#define FEED_DEVS	256	/* devices to decide again per catch-up */

static struct {
	struct event_base	*base;
	bool			 on;		/* PostgreSQL: the feed runs */
	char			 name[CONFIG_NAME_MAX];
	char			 target[CONFIG_PATH_MAX];
	struct sqldb		*listen;	/* NULL: not connected */
	struct event		*rd_ev;
	struct event		*tick_ev;
	int64_t			 last;		/* the last seq applied */
	int64_t			 beat_at;
	uint64_t		 applied;	/* changes of others applied */
} feed;

/* What one catch-up found to apply. */
#define FEED_AGENTS	64	/* agent rows one catch-up looks at */

struct pending {
	bool		 rules;
	bool		 exporters;
	int64_t		 agent[FEED_AGENTS];
	size_t		 nagent;
	bool		 all_devs;	/* more devices than dev[] holds */
	int64_t		 dev[FEED_DEVS];
	size_t		 ndev;
	char		 from[CONFIG_NAME_MAX];	/* a gateway that wrote */
};

static void	(*exporters_cb)(void);

void
feed_on_exporters(void (*cb)(void))
{
	exporters_cb = cb;
}

const char *
feed_gateway_name(void)
{
	return feed.name;
}

static void
add_dev(struct pending *p, int64_t id)
{
	size_t i;

	if (id <= 0)
		return;
	for (i = 0; i < p->ndev; i++)
		if (p->dev[i] == id)
			return;
	if (p->ndev == FEED_DEVS)
		p->all_devs = true;
	else
		p->dev[p->ndev++] = id;
}

static int
collect(void *arg, const struct db_change *c)
{
	struct pending *p = arg;

	feed.last = c->seq;
	if (strcmp(c->gateway, feed.name) == 0)
		return 0;	/* ours: applied when we wrote it */
	feed.applied++;
	usbgw_strlcpy(p->from, c->gateway[0] ? c->gateway : "another gateway",
	    sizeof(p->from));
	if (strcmp(c->kind, "rule") == 0)
		p->rules = true;
	else if (strcmp(c->kind, "approval") == 0)
		add_dev(p, strtoll(c->ref, NULL, 10));
	else if (strcmp(c->kind, "exporter") == 0)
		p->exporters = true;
	else if (strcmp(c->kind, "agent") == 0 && p->nagent < FEED_AGENTS)
		p->agent[p->nagent++] = strtoll(c->ref, NULL, 10);
	else if (strcmp(c->kind, "setting") == 0 &&
	    strncmp(c->ref, "revoked.", 8) == 0)
		add_dev(p, strtoll(c->ref + 8, NULL, 10));
	/*
	 * agent: a certificate revoked at another gateway is refused here
	 * by the store's check at the next handshake; the connections it
	 * authenticated here are cut (apply).  exporter: the set is made
	 * what the store says (apply); the leases (4.4) decide who uses
	 * each.
	 */
	return 0;
}

/*
 * An agent row another gateway changed: a certificate revoked there (or
 * replaced by a re-enrolment, not by a renewal) loses what it
 * authenticated here too, as at the gateway that ended it (enroll.c):
 * by fingerprint, and by name and role.
 */
struct agent_cut {
	struct pending	*p;
	unsigned	 cut;
};

static int
agent_cut_cb(void *arg, const struct db_agent *a)
{
	struct agent_cut *x = arg;
	char detail[320];
	unsigned n;
	size_t i;

	for (i = 0; i < x->p->nagent; i++)
		if (x->p->agent[i] == a->id)
			break;
	if (i == x->p->nagent)
		return 0;
	if (strcmp(a->state, "revoked") != 0 &&
	    (strcmp(a->state, "replaced") != 0 ||
	    strcmp(a->end_reason, "renewed") == 0))
		return 0;
	n = (a->fpr[0] != '\0' ? tlsshim_cut(a->fpr) : 0) +
	    tlsshim_cut_identity(a->name, tlsid_role_parse(a->role));
	x->cut += n;
	if (n == 0)
		return 0;
	snprintf(detail, sizeof(detail), "%s (%s) certificate %.16s... %s at "
	    "gateway %s: %u connection%s cut here", a->name, a->role, a->fpr,
	    a->state, x->p->from, n, n == 1 ? "" : "s");
	log_info("feed: %s", detail);
	store_audit("agent-cut", NULL, a->name, detail);
	return 0;
}

static void
apply_agents(struct pending *p)
{
	struct agent_cut x = { p, 0 };

	if (db_agent_foreach(store_db(), NULL, agent_cut_cb, &x) == -1)
		log_warnx("feed: cannot read the agents changed at %s: %s",
		    p->from, db_errmsg(store_db()));
}

/* Everything of dev's decisions again: its approvals, then the rules. */
static void
apply(struct pending *p)
{
	struct actor who;
	struct device *dev;
	char why[128];
	size_t i;

	memset(&who, 0, sizeof(who));
	who.kind = ACTOR_SYSTEM;
	usbgw_strlcpy(who.name, p->from, sizeof(who.name));
	snprintf(why, sizeof(why), "decided at gateway %s", p->from);
	if (p->nagent > 0)
		apply_agents(p);
	if (p->exporters && exporters_cb != NULL)
		exporters_cb();
	if (p->rules)
		tiers_load();
	if (p->all_devs)
		device_reload_all_decisions(&who, why);
	else
		for (i = 0; i < p->ndev; i++)
			if ((dev = device_by_id(p->dev[i])) != NULL)
				device_reload_decisions(dev, &who, why);
	if (p->rules)
		device_reeval_all(&who, why, 0, NULL);
}

int
feed_catch_up(void)
{
	struct pending p;
	int i, n = 0;

	if (!feed.on)
		return 0;
	memset(&p, 0, sizeof(p));
	for (i = 0; i < FEED_READS; i++) {
		n = db_changes_since(store_db(), feed.last, FEED_BATCH, collect,
		    &p);
		if (n < FEED_BATCH)
			break;
	}
	if (p.rules || p.exporters || p.nagent > 0 || p.ndev > 0 ||
	    p.all_devs)
		apply(&p);
	if (n == -1) {
		log_debug("feed: cannot read changes after seq %" PRId64 ": %s",
		    feed.last, db_errmsg(store_db()));
		return -1;
	}
	return 0;
}

static void
listen_drop(void)
{
	if (feed.rd_ev != NULL)
		event_free(feed.rd_ev);
	feed.rd_ev = NULL;
}

static void
on_read(evutil_socket_t fd, short what, void *arg)
{
	if (sqldb_notified(feed.listen) == -1) {
		log_warnx("feed: the listening connection was lost (%s); "
		    "reading the feed every second until it is back",
		    sqldb_errmsg(feed.listen));
		listen_drop();
	}
	feed_catch_up();
}

/*
 * The listening connection, (re)made: a statement on a lost connection
 * connects again (sqldb's backoff bounds the attempts) and LISTENs
 * again; then the catch-up reads what was missed meanwhile.
 */
static void
listen_up(void)
{
	char err[SQLDB_ERR_MAX];
	int fd;

	if (feed.listen == NULL) {
		if ((feed.listen = sqldb_open(feed.target, 0, err,
		    sizeof(err))) == NULL) {
			log_warnx("feed: %s", err);
			return;
		}
		if (sqldb_set_gateway(feed.listen, feed.name) == -1 ||
		    sqldb_listen(feed.listen, FEED_CHANNEL) == -1) {
			log_warnx("feed: LISTEN: %s", sqldb_errmsg(feed.listen));
			return;
		}
	} else if (sqldb_exec(feed.listen, "SELECT 1") == -1)
		return;		/* sqldb logged it */
	if ((fd = sqldb_socket(feed.listen)) == -1)
		return;
	feed.rd_ev = event_new(feed.base, fd, EV_READ | EV_PERSIST, on_read,
	    NULL);
	event_add(feed.rd_ev, NULL);
	log_debug("feed: listening (after seq %" PRId64 ")", feed.last);
}

static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
	int64_t now = (int64_t)time(NULL);

	if (feed.rd_ev == NULL)
		listen_up();
	feed_catch_up();
	if (now - feed.beat_at >= FEED_BEAT_S) {
		feed.beat_at = now;
		if (db_gateway_beat(store_db(), feed.name, now) == -1)
			log_debug("feed: heartbeat: %s", db_errmsg(store_db()));
	}
}

/* gateway-name, or the host name made a name ("" and bad bytes: "_"). */
static void
name_of(const struct config *cfg, char *out, size_t len)
{
	char host[256];
	size_t i;

	if (cfg->gateway_name[0] != '\0') {
		usbgw_strlcpy(out, cfg->gateway_name, len);
		return;
	}
	if (gethostname(host, sizeof(host)) == -1 || host[0] == '\0')
		usbgw_strlcpy(host, "usbgwd", sizeof(host));
	host[sizeof(host) - 1] = '\0';
	for (i = 0; host[i] != '\0'; i++)
		if (strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		    "0123456789._-", host[i]) == NULL)
			host[i] = '_';
	usbgw_strlcpy(out, host, len);
}

int
feed_start(struct event_base *base, const struct config *cfg)
{
	struct db_gateway g;
	const struct net_addr *la;
	struct timeval tv = { FEED_TICK_MS / 1000, (FEED_TICK_MS % 1000) * 1000 };

	memset(&feed, 0, sizeof(feed));
	feed.base = base;
	name_of(cfg, feed.name, sizeof(feed.name));
	usbgw_strlcpy(feed.target, cfg->database, sizeof(feed.target));
	if (store_set_gateway(feed.name) == -1)
		return -1;
	memset(&g, 0, sizeof(g));
	usbgw_strlcpy(g.name, feed.name, sizeof(g.name));
	g.started_at = feed.beat_at = (int64_t)time(NULL);
	if (config_listen_addrs(cfg, &la) > 0 &&
	    (size_t)snprintf(g.address, sizeof(g.address), "%.100s:%s",
	    la[0].host[0] != '\0' ? la[0].host : "*", la[0].port) >=
	    sizeof(g.address))
		g.address[0] = '\0';
	usbgw_strlcpy(g.version, USBGW_VERSION, sizeof(g.version));
	if (db_gateway_put(store_db(), &g) == -1)
		log_warnx("gateway %s: cannot record it: %s", feed.name,
		    db_errmsg(store_db()));
	if (!sqldb_is_pg(cfg->database))
		return 0;
	/* what the store holds now is what start-up loaded */
	if (db_changes_max(store_db(), &feed.last) == -1) {
		log_warnx("feed: %s", db_errmsg(store_db()));
		return -1;
	}
	feed.on = true;
	listen_up();
	feed.tick_ev = event_new(base, -1, EV_PERSIST, on_tick, NULL);
	event_add(feed.tick_ev, &tv);
	log_info("gateway %s: change feed from seq %" PRId64, feed.name,
	    feed.last);
	return 0;
}

void
feed_stop(void)
{
	listen_drop();
	if (feed.tick_ev != NULL)
		event_free(feed.tick_ev);
	feed.tick_ev = NULL;
	sqldb_close(feed.listen);
	feed.listen = NULL;
	feed.on = false;
}
