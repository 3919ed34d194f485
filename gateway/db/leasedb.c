/*
 * Exporter leases in the shared store (leasedb.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/leasedb.h"
#include "db/sqldb.h"
#include "base/util.h"

/* The server's clock in Unix milliseconds (its transaction start). */
#define NOW_MS	"(extract(epoch FROM now()) * 1000)::bigint"

/*
 * One statement takes, renews or refuses: the row is written only when
 * it is free (no row), expired, or this gateway's.  The epoch grows when
 * the holder changes or the holder's own lease had run out (a new tenure:
 * it stopped using the exporter at its deadline), not on a renewal.
 */
static const char sql_acquire[] =
    "INSERT INTO exporter_leases (exporter_id, gateway, epoch, acquired_at, "
    "expires_ms) VALUES (?1, ?2, 1, " NOW_MS " / 1000, " NOW_MS " + ?3) "
    "ON CONFLICT (exporter_id) DO UPDATE SET "
    "gateway = excluded.gateway, "
    "epoch = exporter_leases.epoch + CASE WHEN exporter_leases.gateway = "
    "excluded.gateway AND exporter_leases.expires_ms >= " NOW_MS
    " THEN 0 ELSE 1 END, "
    "acquired_at = CASE WHEN exporter_leases.gateway = excluded.gateway AND "
    "exporter_leases.expires_ms >= " NOW_MS " THEN exporter_leases.acquired_at "
    "ELSE excluded.acquired_at END, "
    "expires_ms = excluded.expires_ms "
    "WHERE exporter_leases.expires_ms < " NOW_MS " OR "
    "exporter_leases.gateway = excluded.gateway "
    "RETURNING epoch";

static const char sql_holder[] =
    "SELECT gateway, epoch, expires_ms - " NOW_MS " FROM exporter_leases "
    "WHERE exporter_id = ?1";

static const char sql_release[] =
    "UPDATE exporter_leases SET expires_ms = " NOW_MS " - 1 "
    "WHERE gateway = ?1 AND (?2::bigint = 0 OR exporter_id = ?2) AND "
    "expires_ms >= " NOW_MS;

struct leasedb {
	struct sqldb		*c;
	struct sqldb_stmt	*acquire, *holder, *release;
};

struct leasedb *
leasedb_open(const char *target, char *err, size_t errlen)
{
	struct leasedb *l;

	if (!sqldb_is_pg(target)) {
		snprintf(err, errlen, "leases need PostgreSQL");
		return NULL;
	}
	l = xcalloc(1, sizeof(*l));
	if ((l->c = sqldb_open(target, 0, err, errlen)) == NULL) {
		free(l);
		return NULL;
	}
	if ((l->acquire = sqldb_prepare(l->c, sql_acquire)) == NULL ||
	    (l->holder = sqldb_prepare(l->c, sql_holder)) == NULL ||
	    (l->release = sqldb_prepare(l->c, sql_release)) == NULL) {
		snprintf(err, errlen, "preparing the lease statements: %s",
		    sqldb_errmsg(l->c));
		leasedb_close(l);
		return NULL;
	}
	return l;
}

void
leasedb_close(struct leasedb *l)
{
	if (l == NULL)
		return;
	sqldb_finalize(l->acquire);
	sqldb_finalize(l->holder);
	sqldb_finalize(l->release);
	sqldb_close(l->c);
	free(l);
}

const char *
leasedb_errmsg(const struct leasedb *l)
{
	return sqldb_errmsg(l->c);
}

/* After a first step that gave a row: the rest.  SQLDB_ERROR or not. */
static int
drain(struct sqldb_stmt *st)
{
	int rc;

	while ((rc = sqldb_step(st)) == SQLDB_ROW)
		;
	return rc;
}

int
leasedb_acquire(struct leasedb *l, int64_t exporter_id, const char *me,
    unsigned lease_ms, int64_t *epoch, char *holder, size_t holderlen,
    int64_t *left_ms)
{
	struct sqldb_stmt *st = l->acquire;
	const char *s;
	int rc;

	*epoch = 0;
	*left_ms = 0;
	usbgw_strlcpy(holder, "", holderlen);
	sqldb_reset(st);
	sqldb_bind_int64(st, 1, exporter_id);
	sqldb_bind_text(st, 2, me);
	sqldb_bind_int64(st, 3, lease_ms);
	rc = sqldb_step(st);
	if (rc == SQLDB_ROW) {
		*epoch = sqldb_column_int64(st, 0);
		usbgw_strlcpy(holder, me, holderlen);
		*left_ms = lease_ms;
	}
	if (rc == SQLDB_ROW && drain(st) == SQLDB_ERROR)
		rc = SQLDB_ERROR;
	sqldb_reset(st);
	if (rc == SQLDB_ERROR)
		return -1;
	if (rc == SQLDB_ROW)
		return 1;
	/* another gateway's, unexpired: who */
	st = l->holder;
	sqldb_reset(st);
	sqldb_bind_int64(st, 1, exporter_id);
	rc = sqldb_step(st);
	if (rc == SQLDB_ROW) {
		s = sqldb_column_text(st, 0);
		usbgw_strlcpy(holder, s != NULL ? s : "?", holderlen);
		*epoch = sqldb_column_int64(st, 1);
		*left_ms = sqldb_column_int64(st, 2);
	}
	if (rc == SQLDB_ROW && drain(st) == SQLDB_ERROR)
		rc = SQLDB_ERROR;
	sqldb_reset(st);
	return rc == SQLDB_ERROR ? -1 : 0;
}

int
leasedb_release(struct leasedb *l, const char *me, int64_t exporter_id)
{
	struct sqldb_stmt *st = l->release;
	int rc;

	sqldb_reset(st);
	sqldb_bind_text(st, 1, me);
	sqldb_bind_int64(st, 2, exporter_id);
	rc = sqldb_step(st);
	if (rc == SQLDB_ROW)
		rc = drain(st);
	sqldb_reset(st);
	return rc == SQLDB_ERROR ? -1 : 0;
}
