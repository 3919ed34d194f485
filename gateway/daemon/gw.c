/*
 * The gateway assembled: exporters from the configuration and the
 * database, shutdown, and figures over every device.  The top layer
 * (gateway/LAYERS), with usbgwd.c.
 */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/util.h"
#include "control/config.h"
#include "control/control.h"
#include "core/device.h"
#include "core/exporter.h"
#include "core/loop.h"
#include "core/relay.h"
#include "core/store.h"
#include "core/upstream.h"
#include "daemon/feed.h"
#include "daemon/gw.h"
#include "db/db.h"

#include <event2/event.h>

/* An exporter of any kind (enum exp_kind). */
struct exporter *
gw_exporter_new(const char *name, int kind, int tls, const char *host,
    uint16_t port)
{
	struct exporter *exp;

	/* the first connection is made from a timer: tls is set before */
	if (kind == EXP_KIND_AGENT || kind == EXP_KIND_DIALOUT)
		exp = exporter_new_agent(name, (enum exp_kind)kind, host, port);
	else
		exp = exporter_new(name, host, port);
	/* optional only for dial-out (exporter.h); else fail closed */
	exp->tls = tls == EXP_TLS_OPTIONAL && kind != EXP_KIND_DIALOUT ?
	    EXP_TLS_REQUIRED : (enum exp_tls)tls;
	return exp;
}

/* Is name declared in the configuration's files?  Its entry or NULL. */
static const struct config_exporter *
cfg_declared(const struct config *cfg, const char *name)
{
	size_t i;

	for (i = 0; i < cfg->nexporters; i++)
		if (strcmp(cfg->exporters[i].name, name) == 0)
			return &cfg->exporters[i];
	return NULL;
}

/*
 * Before a configuration is used: does a file declare an exporter at
 * the address of one the database owns (usbgw exporter add or import)
 * under another name?  That exporter stays; the configuration is
 * refused (at start: usbgwd does not start; on SIGHUP: the old one is
 * kept).  0, or -1 with *errs ("FILE:LINE: ..." lines, caller frees).
 */
int
gw_check_exporters(const struct config *cfg, char **errs)
{
	const struct config_exporter *ce;
	struct exporter *exp;
	long long port;
	const char *es;
	char where[128], line[512], *out = NULL;
	size_t i, len = 0, n;

	*errs = NULL;
	for (i = 0; i < cfg->nexporters; i++) {
		ce = &cfg->exporters[i];
		if (ce->kind == EXP_KIND_DIALOUT ||
		    parse_num(ce->addr.port, 1, 65535, &port, &es) == -1)
			continue;
		exp = exporter_find_addr(ce->addr.host, (uint16_t)port, NULL);
		if (exp == NULL || exp->source == EXP_SRC_FILE ||
		    strcmp(exp->name, ce->name) == 0 ||
		    cfg_declared(cfg, exp->name) != NULL)
			continue;
		n = (size_t)snprintf(line, sizeof(line), "%s: exporter %s: "
		    "address %s%s%s:%s is exporter %s's (added with usbgw "
		    "exporter add or import): one exporter, one name\n",
		    config_exporter_where(cfg, ce, where, sizeof(where)),
		    ce->name, strchr(ce->addr.host, ':') ? "[" : "",
		    ce->addr.host, strchr(ce->addr.host, ':') ? "]" : "",
		    ce->addr.port, exp->name);
		if (n >= sizeof(line))
			n = sizeof(line) - 1;
		out = xreallocarray(out, 1, len + n + 1);
		memcpy(out + len, line, n + 1);
		len += n;
	}
	*errs = out;
	return out != NULL ? -1 : 0;
}

/*
 * Make the file-owned exporters what the configuration's files declare
 * (the config file and exporters.d): one whose line was deleted is
 * removed as usbgw exporter remove does (its claims end, its devices are
 * gone, an attachment ends: fail closed), a changed one is made again,
 * a new one added.  Exporters the database owns are left alone, but one
 * a file now declares by the same name becomes the file's.
 */
void
gw_sync_exporters(const struct config *cfg)
{
	struct exporter *exp, *next;
	const struct config_exporter *ce;
	size_t i;
	long long port;
	const char *es;
	char where[96], detail[160];

	for (exp = TAILQ_FIRST(&gw->exporters); exp != NULL; exp = next) {
		next = TAILQ_NEXT(exp, entry);
		if (exp->dead || exp->source != EXP_SRC_FILE ||
		    cfg_declared(cfg, exp->name) != NULL)
			continue;
		snprintf(detail, sizeof(detail), "no longer in the "
		    "configuration (was %s)", exp->origin[0] != '\0' ?
		    exp->origin : "the config file");
		log_info("exporter %s: %s: removed", exp->name, detail);
		store_exporter_delete(exp, NULL, detail);
		exporter_free(exp);
	}
	for (i = 0; i < cfg->nexporters; i++) {
		ce = &cfg->exporters[i];
		if (parse_num(ce->addr.port, 1, 65535, &port, &es) == -1)
			continue;
		config_exporter_where(cfg, ce, where, sizeof(where));
		exp = exporter_find(ce->name);
		if (exp != NULL) {
			if (strcmp(exp->host, ce->addr.host) == 0 &&
			    exp->port == port && (int)exp->kind == ce->kind &&
			    (int)exp->tls == ce->tls) {
				if (exp->source != EXP_SRC_FILE ||
				    strcmp(exp->origin, where) != 0) {
					exp->source = EXP_SRC_FILE;
					usbgw_strlcpy(exp->origin, where,
					    sizeof(exp->origin));
					store_exporter_put(exp);
				}
				continue;
			}
			log_info("exporter %s: changed in %s: made again",
			    exp->name, where);
			exporter_free(exp);
		}
		exp = gw_exporter_new(ce->name, ce->kind, ce->tls,
		    ce->addr.host, (uint16_t)port);
		exp->source = EXP_SRC_FILE;
		usbgw_strlcpy(exp->origin, where, sizeof(exp->origin));
		store_exporter_save(exp, NULL);
	}
}

static int
restore_cb(void *arg, const struct db_exporter *e)
{
	struct exporter *exp;
	int k = exp_kind_parse(e->kind), t = exp_tls_parse(e->tls);
	char host[sizeof(e->host)];

	if (exporter_find(e->name) != NULL || e->port < 1 || e->port > 65535)
		return 0;
	usbgw_strlcpy(host, e->host, sizeof(host));
	if (k != EXP_KIND_DIALOUT)
		config_host_canon(host, sizeof(host));
	/* an unreadable tls setting: required (fail closed) */
	exp = gw_exporter_new(e->name, k < 0 ? EXP_KIND_USBIP : k,
	    t < 0 ? EXP_TLS_REQUIRED : t, host, (uint16_t)e->port);
	exp->id = e->id;
	exp->source = strcmp(e->source, "file") == 0 ? EXP_SRC_FILE :
	    EXP_SRC_CLI;
	usbgw_strlcpy(exp->origin, e->origin, sizeof(exp->origin));
	exp->last_seen = exp->seen_saved = e->last_seen;
	usbgw_strlcpy(exp->last_error, e->last_error, sizeof(exp->last_error));
	exp->last_error_at = e->last_error_at;
	return 0;
}

/* Exporters known to the database. */
void
gw_restore(void)
{
	store_exporters_foreach(restore_cb, NULL);
}

static unsigned store_gen;

/*
 * Who owns an exporter (the CLI's database or a file, and where) changes
 * nothing of its connection: taken as the store has it, in place, as a
 * restart would (its claims stay).
 */
static void
from_store_owner(struct exporter *exp, const struct db_exporter *e)
{
	enum exp_source src = strcmp(e->source, "file") == 0 ? EXP_SRC_FILE :
	    EXP_SRC_CLI;

	if (exp->source == src && strcmp(exp->origin, e->origin) == 0)
		return;
	log_info("exporter %s: now %s%s%s at another gateway", exp->name,
	    src == EXP_SRC_FILE ? "a file's" : "the database's",
	    e->origin[0] != '\0' ? ", " : "", e->origin);
	exp->source = src;
	usbgw_strlcpy(exp->origin, e->origin, sizeof(exp->origin));
}

static int
from_store_cb(void *arg, const struct db_exporter *e)
{
	struct exporter *exp = exporter_find(e->name);
	int k = exp_kind_parse(e->kind), t = exp_tls_parse(e->tls);
	char host[sizeof(e->host)];

	(void)arg;
	usbgw_strlcpy(host, e->host, sizeof(host));
	if (k != EXP_KIND_DIALOUT)
		config_host_canon(host, sizeof(host));
	if (exp != NULL && (strcmp(exp->host, host) != 0 ||
	    exp->port != e->port || (k >= 0 && (int)exp->kind != k) ||
	    (t >= 0 && (int)exp->tls != t))) {
		log_info("exporter %s: changed at another gateway: made again",
		    exp->name);
		exporter_free(exp);
		exp = NULL;
	}
	if (exp == NULL) {
		restore_cb(NULL, e);
		if ((exp = exporter_find(e->name)) != NULL)
			log_info("exporter %s (%s:%d): added at another gateway",
			    e->name, e->host, e->port);
	}
	if (exp != NULL) {
		exp->store_gen = store_gen;
		from_store_owner(exp, e);
	}
	return 0;
}

/*
 * Exporters are shared state (protocol.md 4.2): when the change feed says
 * another gateway added, changed or removed one, the set here is made
 * what the store says.  One removed there ends its claims and attachments
 * here too (fail closed); the leases decide who polls the others.  A read
 * that fails changes nothing (the next change, or a restart, tries again).
 */
void
gw_exporters_from_store(void)
{
	struct exporter *exp, *next;

	store_gen++;
	if (store_exporters_foreach(from_store_cb, NULL) == -1)
		return;
	for (exp = TAILQ_FIRST(&gw->exporters); exp != NULL; exp = next) {
		next = TAILQ_NEXT(exp, entry);
		if (exp->dead || exp->store_gen == store_gen)
			continue;
		log_info("exporter %s: removed at another gateway", exp->name);
		exporter_free(exp);
	}
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

/* ---- losing the store (protocol.md 4.6) ---------------------------------- */

static const struct actor store_actor = { .kind = ACTOR_SYSTEM,
    .name = "system" };
static struct event *grace_ev;

/*
 * Commands that only take access away run while the store is away (in
 * memory; the handlers say when their row could not be written): a
 * revocation must not wait for the database.  Everything else above
 * PRIV_READ (approve, policy, exporters, enrolment, attach, prune) is
 * refused: nothing new is authorized without the store.
 */
static const char *const store_down_allowed[] = {
	"deny", "revoke", "detach", "agent.reject", "agent.revoke",
};

static const char *
store_gate(const char *cmd)
{
	size_t i;

	if (!store_degraded())
		return NULL;
	for (i = 0; i < nitems(store_down_allowed); i++)
		if (strcmp(cmd, store_down_allowed[i]) == 0)
			return NULL;
	return STORE_UNAVAILABLE ": cannot record the decision (the database "
	    "is unreachable; the gateway is degraded until it returns)";
}

/* store-loss = stop: the grace is over, the attachments end. */
static void
grace_cb(evutil_socket_t fd, short what, void *arg)
{
	unsigned n;

	if (!store_degraded())
		return;
	n = device_cut_all(STORE_UNAVAILABLE ": store-loss = stop, "
	    "store-grace over");
	log_warnx("database unreachable for %llu ms: %u attachment%s ended "
	    "(store-loss = stop); the devices stay claimed",
	    (unsigned long long)store_degraded_ms(), n, n == 1 ? "" : "s");
}

static void
store_health(bool down)
{
	const struct config *cfg = gw->cfg;
	unsigned ms = cfg != NULL ? cfg->store_grace_ms : CONFIG_STORE_GRACE_MS;
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	char detail[128];

	if (down) {
		/* queued: written when the store is back */
		store_audit("store-lost", NULL, "database", "unreachable: "
		    "nothing new is authorized until it returns");
		if (cfg == NULL || cfg->store_loss == CONFIG_STORE_LOSS_STOP)
			evtimer_add(grace_ev, &tv);
		return;
	}
	evtimer_del(grace_ev);
	/*
	 * Back: reconcile (4.6), in this order.
	 *  1. the leases: one lost to another gateway meanwhile ends
	 *     everything of its exporter.  HOOK(i16-lease): call the lease
	 *     check here.
	 *  2. the change feed from the last seq applied (feed_catch_up:
	 *     rules, approvals and revocations written elsewhere meanwhile).
	 *  3. every device held: recorded if it was probed meanwhile, its
	 *     approvals as the store has them, decided again (what waited
	 *     pending).
	 *  4. write what waited (store_flush()).
	 */
	/* what was withdrawn meanwhile first: the reconcile reads the store */
	(void)store_replay_unwritten();
	(void)feed_catch_up();
	device_reconcile_all(&store_actor, "store available again");
	store_flush();
	snprintf(detail, sizeof(detail), "reachable again; devices decided "
	    "again");
	store_audit("store-back", NULL, "database", detail);
}

/* After the configuration is applied, before the control socket. */
void
gw_store_loss_start(void)
{
	if (grace_ev == NULL)
		grace_ev = evtimer_new(gw->base, grace_cb, NULL);
	store_on_health(store_health);
	control_set_gate(store_gate);
	control_set_hello(gw_store_status);
}
