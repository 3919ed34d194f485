/*
 * Exporter leases (protocol.md 4.4).  Every lease/3 each exporter's lease
 * is taken or renewed with one statement on the server's clock
 * (leasedb.c); the exporter is polled and claimed only while it is held.
 * The holder measures its own deadline with its monotonic clock from the
 * start of its last successful renewal, and stops using the exporter when
 * lease - margin passes without one: by the time the server's clock lets
 * another gateway take the lease, this one has let go.
 */
#include <stdio.h>
#include <string.h>

#include <event2/event.h>

#include "core/lease.h"
#include "db/leasedb.h"
#include "base/log.h"
#include "control/config.h"
#include "db/sqldb.h"
#include "core/store.h"
#include "base/util.h"

static struct {
	struct leasedb	*db;
	char		 me[LEASEDB_HOLDER_MAX];
	unsigned	 lease_ms;
	struct event	*round_ev;
	struct event	*check_ev;
	bool		 failing;	/* the last statement failed (logged) */
	int64_t		 soonest_ms;	/* another's lease ends: this round */
} L;

static void	lease_round_cb(evutil_socket_t, short, void *);
static void	lease_check_cb(evutil_socket_t, short, void *);

/* Stop lease - margin after a renewal's start: a fifth, at least 1 s. */
static unsigned
lease_margin_ms(void)
{
	unsigned m = L.lease_ms / 5;

	return m < 1000 ? 1000 : m;
}

int
lease_init(const char *database, const char *me, unsigned lease_ms,
    char *err, size_t errlen)
{
	struct timeval tv;

	if (!sqldb_is_pg(database)) {
		exporter_set_leasing(false);
		return 0;
	}
	if ((L.db = leasedb_open(database, err, errlen)) == NULL)
		return -1;
	usbgw_strlcpy(L.me, me, sizeof(L.me));
	L.lease_ms = lease_ms;
	L.soonest_ms = -1;
	exporter_set_leasing(true);
	L.round_ev = event_new(gw->base, -1, EV_PERSIST, lease_round_cb, NULL);
	L.check_ev = event_new(gw->base, -1, EV_PERSIST, lease_check_cb, NULL);
	tv.tv_sec = 0;
	tv.tv_usec = LEASE_CHECK_MS * 1000;
	evtimer_add(L.check_ev, &tv);
	log_info("exporter leases: this gateway is \"%s\", lease %u ms",
	    L.me, L.lease_ms);
	return 0;
}

bool
lease_active(void)
{
	return L.db != NULL;
}

const char *
lease_me(void)
{
	return L.me;
}

/*
 * The next round in lease/3, or sooner when another gateway's lease ends
 * sooner (a killed holder's exporter is taken as soon as it expires, not
 * up to a round later).
 */
static void
lease_schedule(void)
{
	unsigned ms = L.lease_ms / 3;

	if (L.soonest_ms >= 0 && L.soonest_ms + 20 < ms)
		ms = (unsigned)L.soonest_ms + 20;
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(L.round_ev, &tv);
}

void
lease_set_time(unsigned lease_ms)
{
	if (L.db == NULL || lease_ms == L.lease_ms)
		return;
	L.lease_ms = lease_ms;
	lease_schedule();
}

bool
lease_take(struct exporter *exp)
{
	uint64_t t0 = now_usec();
	int64_t epoch, left;
	char holder[LEASEDB_HOLDER_MAX], why[160];
	int rc;

	if (L.db == NULL)
		return exp->leased;
	if (exp->dead || exp->id <= 0)
		return false;
	rc = leasedb_acquire(L.db, exp->id, L.me, L.lease_ms, &epoch,
	    holder, sizeof(holder), &left);
	if (rc == -1) {
		/* the deadline (lease_check_cb) ends a lease not renewed */
		if (!L.failing)
			log_warnx("exporter %s: lease not renewed: %s",
			    exp->name, leasedb_errmsg(L.db));
		L.failing = true;
		return exp->leased;
	}
	L.failing = false;
	usbgw_strlcpy(exp->lease_holder, holder, sizeof(exp->lease_holder));
	exp->lease_epoch = epoch;
	if (rc == 1) {
		exp->lease_deadline_us = t0 +
		    (uint64_t)(L.lease_ms - lease_margin_ms()) * 1000;
		if (!exp->leased && exp->lease_lapsed) {
			/* renewed after a lapse: nobody took it meanwhile
			 * (or gave it back): its claims and rows are ours */
			log_info("exporter %s: lease renewed after a lapse "
			    "(epoch %lld)", exp->name, (long long)epoch);
			gw_audit_exporter(exp, "lease-renewed", "after a lapse");
			exporter_lease_gained(exp);
		} else if (!exp->leased) {
			char d[64];

			log_info("exporter %s: lease taken (epoch %lld)",
			    exp->name, (long long)epoch);
			snprintf(d, sizeof(d), "epoch %lld", (long long)epoch);
			gw_audit_exporter(exp, "lease-taken", d);
			/* what a killed holder left open of it is closed now */
			store_close_stale(gw->cfg->mode == CONFIG_MODE_LOCAL,
			    "the exporter's previous lease holder stopped",
			    exp->name);
			exporter_lease_gained(exp);
		}
		return true;
	}
	if (exp->leased || exp->lease_lapsed) {
		snprintf(why, sizeof(why), "lease taken by gateway %s (epoch "
		    "%lld)", holder, (long long)epoch);
		exporter_lease_lost(exp, why);
	} else
		log_debug("exporter %s: leased by gateway %s for %lld ms more",
		    exp->name, holder, (long long)left);
	if (left >= 0 && (L.soonest_ms < 0 || left < L.soonest_ms))
		L.soonest_ms = left;
	return false;
}

static void
lease_round_cb(evutil_socket_t fd, short what, void *arg)
{
	struct exporter *exp, *next;

	(void)fd;
	(void)what;
	(void)arg;
	L.soonest_ms = -1;
	for (exp = TAILQ_FIRST(&gw->exporters); exp != NULL; exp = next) {
		next = TAILQ_NEXT(exp, entry);
		(void)lease_take(exp);
	}
	lease_schedule();
}

/*
 * A held lease whose deadline passed without a renewal: stop serving the
 * exporter (its claims are kept: exporter_lease_lapsed).
 */
static void
lease_check_cb(evutil_socket_t fd, short what, void *arg)
{
	struct exporter *exp, *next;
	uint64_t now = now_usec();

	(void)fd;
	(void)what;
	(void)arg;
	for (exp = TAILQ_FIRST(&gw->exporters); exp != NULL; exp = next) {
		next = TAILQ_NEXT(exp, entry);
		if (exp->leased && !exp->dead && now >= exp->lease_deadline_us)
			exporter_lease_lapsed(exp, "lease not renewed before "
			    "its deadline");
	}
}

/*
 * The first round at the next loop pass: after the batch that wrote the
 * exporters' rows (a lease row names its exporter's id) has committed.
 */
void
lease_start(void)
{
	struct timeval tv = { 0, 50 * 1000 };

	if (L.db == NULL)
		return;
	evtimer_add(L.round_ev, &tv);
}

void
lease_shutdown(void)
{
	if (L.db == NULL)
		return;
	if (leasedb_release(L.db, L.me, 0) == -1)
		log_warnx("exporter leases: not released (they expire in "
		    "%u ms): %s", L.lease_ms, leasedb_errmsg(L.db));
	else
		log_info("exporter leases released");
	event_free(L.round_ev);
	event_free(L.check_ev);
	L.round_ev = L.check_ev = NULL;
	leasedb_close(L.db);
	L.db = NULL;
}
