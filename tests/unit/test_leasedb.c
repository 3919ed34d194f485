/*
 * Exporter lease statements (gateway/db/leasedb.c, protocol.md 4.4) on a
 * real PostgreSQL ($USBGW_PG_URI, emptied; without it nothing runs):
 * take a free lease, refuse one another gateway holds unexpired, renew
 * without a new epoch, take an expired or released one with the next
 * epoch, and refuse SQLite.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db/db.h"
#include "db/leasedb.h"
#include "db/sqldb.h"
#include "tap.h"

static void
pg_empty(const char *uri)
{
	struct sqldb *c;
	char err[SQLDB_ERR_MAX];

	if ((c = sqldb_open(uri, 0, err, sizeof(err))) == NULL) {
		diag("%s", err);
		return;
	}
	if (sqldb_exec(c, "DROP SCHEMA public CASCADE; "
	    "CREATE SCHEMA public") == -1)
		diag("emptying: %s", sqldb_errmsg(c));
	sqldb_close(c);
}

int
main(void)
{
	const char *uri = getenv("USBGW_PG_URI");
	struct leasedb *a, *b;
	struct db *db;
	char err[512], holder[LEASEDB_HOLDER_MAX];
	int64_t e1, e2, epoch, left;

	ok(leasedb_open("/tmp/x.db", err, sizeof(err)) == NULL &&
	    strstr(err, "PostgreSQL") != NULL, "SQLite: no leases (%s)", err);
	if (uri == NULL || uri[0] == '\0') {
		diag("USBGW_PG_URI not set: the PostgreSQL runs are left out");
		return done_testing();
	}
	diag("PostgreSQL: %s", uri);
	pg_empty(uri);
	if ((db = db_open(uri, err, sizeof(err))) == NULL) {
		diag("%s", err);
		ok(0, "schema made");
		return done_testing();
	}
	e1 = db_exporter_upsert(db, "e1", "127.0.0.1", 3240, 1);
	e2 = db_exporter_upsert(db, "e2", "127.0.0.2", 3240, 1);
	db_close(db);
	ok(e1 > 0 && e2 > 0, "two exporters");
	a = leasedb_open(uri, err, sizeof(err));
	b = leasedb_open(uri, err, sizeof(err));
	if (!ok(a != NULL && b != NULL, "two gateways' lease connections"))
		return done_testing();

	is_int(leasedb_acquire(a, e1, "A", 10000, &epoch, holder,
	    sizeof(holder), &left), 1, "A takes e1's free lease");
	is_int(epoch, 1, "epoch 1");
	is_int(leasedb_acquire(b, e1, "B", 10000, &epoch, holder,
	    sizeof(holder), &left), 0, "B is refused e1 (A's, unexpired)");
	is_str(holder, "A", "and told A holds it");
	ok(left > 8000 && left <= 10000, "with what is left (%lld ms)",
	    (long long)left);
	is_int(leasedb_acquire(a, e1, "A", 10000, &epoch, holder,
	    sizeof(holder), &left), 1, "A renews");
	is_int(epoch, 1, "a renewal keeps the epoch");
	is_int(leasedb_acquire(b, e2, "B", 300, &epoch, holder,
	    sizeof(holder), &left), 1, "B takes e2 for 300 ms");
	usleep(450 * 1000);
	is_int(leasedb_acquire(a, e2, "A", 10000, &epoch, holder,
	    sizeof(holder), &left), 1, "A takes e2 once B's lease expired");
	is_int(epoch, 2, "the next epoch (a new holder)");
	is_int(leasedb_acquire(b, e2, "B", 10000, &epoch, holder,
	    sizeof(holder), &left), 0, "B, the old holder, is refused it");
	is_int(leasedb_release(b, "B", 0), 0, "B's release of what it does "
	    "not hold");
	is_int(leasedb_acquire(b, e2, "B", 10000, &epoch, holder,
	    sizeof(holder), &left), 0, "changes nothing: still refused");
	is_int(leasedb_release(a, "A", 0), 0, "A releases all (a clean stop)");
	is_int(leasedb_acquire(b, e1, "B", 10000, &epoch, holder,
	    sizeof(holder), &left), 1, "B takes e1 at once");
	is_int(epoch, 2, "epoch 2");
	is_int(leasedb_acquire(b, e2, "B", 10000, &epoch, holder,
	    sizeof(holder), &left), 1, "and e2");
	is_int(epoch, 3, "epoch 3");
	is_int(leasedb_acquire(a, 999999, "A", 10000, &epoch, holder,
	    sizeof(holder), &left), -1, "an exporter not in the store: an "
	    "error (its row names the exporter)");
	leasedb_close(a);
	leasedb_close(b);
	return done_testing();
}
