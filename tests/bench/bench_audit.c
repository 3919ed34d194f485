/*
 * Audit log write cost: audit_append() (what the event loop pays per
 * row), and audit_flush() per row for batches of 1, 10, 100 and
 * AUDIT_QUEUE_MAX rows (one transaction each; a queue never holds more),
 * plus verification speed.  WAL with
 * synchronous=NORMAL, as the daemon opens it.
 *
 * usage: bench_audit [DIR | postgresql://URI]   (default /tmp)
 * With a PostgreSQL URI the rows go to that database (tests/bench/store.sh
 * compares the two back ends).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "db/audit.h"
#include "db/db.h"
#include "base/log.h"
#include "db/sqldb.h"

#define ROWS_PER_SIZE	2560

static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void
rm_db(const char *p)
{
	char buf[600];

	unlink(p);
	snprintf(buf, sizeof(buf), "%s-wal", p);
	unlink(buf);
	snprintf(buf, sizeof(buf), "%s-shm", p);
	unlink(buf);
}

int
main(int argc, char **argv)
{
	static const int	 sizes[] = { 1, 10, 100, AUDIT_QUEUE_MAX };
	struct db		*db;
	struct audit		*a;
	struct audit_event	 e;
	struct audit_verify	 v;
	struct actor		 op;
	char			 path[512], err[DB_ERR_MAX];
	double			 t0, t, worst;
	size_t			 s;
	int			 i, j, rows = 0;

	log_init("bench_audit", 1, LOG_LVL_ERR);
	if (argc > 1 && sqldb_is_pg(argv[1]))
		snprintf(path, sizeof(path), "%s", argv[1]);
	else
		snprintf(path, sizeof(path), "%s/usbgw-bench-audit-%d.db",
		    argc > 1 ? argv[1] : "/tmp", (int)getpid());
	if (!sqldb_is_pg(path))
		rm_db(path);
	if ((db = db_open(path, err, sizeof(err))) == NULL) {
		fprintf(stderr, "bench_audit: %s\n", err);
		return 1;
	}
	a = audit_new(db);
	memset(&op, 0, sizeof(op));
	op.kind = ACTOR_OPERATOR;
	op.uid = 1000;
	snprintf(op.name, sizeof(op.name), "alice");
	memset(&e, 0, sizeof(e));
	e.event = "state";
	e.device_id = 42;
	e.busid = "tc17-1-1.2";
	e.exporter = "tc17";
	e.old_state = "pending";
	e.new_state = "authorized";
	e.who = &op;
	e.reason = "ticket 4711: scanner for the reception desk";

	t0 = now_us();
	for (i = 0; i < AUDIT_QUEUE_MAX; i++)
		audit_append(a, &e, 1700000000 + i);
	t = (now_us() - t0) / AUDIT_QUEUE_MAX;
	audit_flush(a);
	rows += AUDIT_QUEUE_MAX;
	printf("audit: audit_append %.2f us/row (queued, no I/O)\n", t);

	for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		double total = 0;

		worst = 0;
		for (j = 0; j < ROWS_PER_SIZE / sizes[s]; j++) {
			for (i = 0; i < sizes[s]; i++)
				audit_append(a, &e, 1700001000 + rows + i);
			t0 = now_us();
			audit_flush(a);
			t = now_us() - t0;
			total += t;
			if (t > worst)
				worst = t;
			rows += sizes[s];
		}
		printf("audit: flush of %4d rows: %7.1f us/row, %8.1f us per "
		    "flush (worst %.0f us)\n", sizes[s],
		    total / ROWS_PER_SIZE, total / (ROWS_PER_SIZE / sizes[s]),
		    worst);
	}
	t0 = now_us();
	if (audit_verify(db, 0, NULL, &v) != 0)
		printf("audit: verify FAILED: %s\n", v.reason);
	t = now_us() - t0;
	printf("audit: verify %lld rows in %.1f ms (%.0f rows/s)\n",
	    (long long)v.rows, t / 1e3, (double)v.rows / (t / 1e6));
	audit_free(a);
	db_close(db);
	if (!sqldb_is_pg(path))
		rm_db(path);
	return 0;
}
