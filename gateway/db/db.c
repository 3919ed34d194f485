/*
 * The SQLite database: schema migrations from the embedded schema.sql,
 * and the daemon's reads and writes as cached prepared statements.
 */
#include <sys/stat.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db/db.h"
#include "base/log.h"
#include "policy/policy.h"
#include "policy/rule.h"
#include "db/sqldb.h"
#include "base/util.h"

/* schema.sql, compiled in by the Makefile (build dir: gen/schema_sql.c). */
extern const char usbgw_schema_sql[];
extern const char usbgw_schema_pg_sql[];


enum stmt_id {
	S_EXP_UPSERT,
	S_EXP_REMOVE,
	S_EXP_STATUS,
	S_EXP_LIST,
	S_EXP_KIND,
	S_EXP_SOURCE,
	S_EXP_SEEN,
	S_EXP_ERROR,
	S_DEV_FIND,
	S_DEV_TOUCH,
	S_DEV_INSERT,
	S_IFACE_INSERT,
	S_DEV_STATE,
	S_DEV_HOLDER,
	S_DEV_GET,
	S_DEV_LIST,
	S_DEV_LIST_EXPORTER,
	S_IFACE_GET,
	S_PRES_OPEN,
	S_PRES_INSERT,
	S_PRES_END,
	S_APPR_END_PRESENCE,
	S_RULE_COUNT,
	S_RULE_SHIFT,
	S_RULE_INSERT,
	S_RULE_POS,
	S_RULE_REMOVE,
	S_RULE_SETPOS,
	S_RULE_DEVICE,
	S_RULE_LOAD,
	S_APPR_SUPERSEDE,
	S_APPR_INSERT,
	S_APPR_END,
	S_APPR_END_DEV,
	S_APPR_ACTIVE,
	S_APPR_LIST,
	S_APPR_NEXT,
	S_APPR_DUE,
	S_ATT_INSERT,
	S_ATT_COUNTERS,
	S_ATT_END,
	S_ACC_INSERT,
	S_ACC_DECIDE,
	S_ATT_OPEN,
	S_ATT_CLOSE,
	S_ACC_WAITING,
	S_SET_GET,
	S_SET_PUT,
	S_USER_VERSION,
	S_AG_PENDING,
	S_AG_ACTIVATE,
	S_AG_RENEWED,
	S_AG_END,
	S_AG_LAPSE,
	S_AG_BY_FPR,
	S_AG_LIST,
	S_AG_ACTIVE_NAME,
	S_VIEW_NEXT,
	S_GW_PUT,
	S_GW_BEAT,
	S_GW_LIST,
	S_CHG_MAX,
	S_CHG_SINCE,
	S_DEV_PRESENT,
	S_NSTMTS
};

#define AGCOLS "SELECT id, name, role, state, COALESCE(fingerprint, ''), " \
	"COALESCE(serial, ''), key_fingerprint, COALESCE(not_after, 0), " \
	"COALESCE(address, ''), created_at, COALESCE(approved_at, 0), " \
	"COALESCE(approved_by, ''), COALESCE(ended_at, 0), " \
	"COALESCE(end_reason, '') FROM agents "

static const char *const stmt_sql[S_NSTMTS] = {
	[S_EXP_UPSERT] =
	    "INSERT INTO exporters (name, host, port, created_at) "
	    "VALUES (?1, ?2, ?3, ?4) ON CONFLICT (name) DO UPDATE SET "
	    "host = excluded.host, port = excluded.port, removed_at = NULL "
	    "RETURNING id",
	[S_EXP_REMOVE] =
	    "UPDATE exporters SET removed_at = ?2 "
	    "WHERE name = ?1 AND removed_at IS NULL",
	[S_EXP_STATUS] =
	    "UPDATE exporters SET status = ?2, last_seen = "
	    "CASE WHEN ?2 = 'up' THEN ?3 ELSE last_seen END WHERE id = ?1",
	[S_EXP_LIST] =
	    "SELECT id, name, host, port, status, kind, tls, source, "
	    "last_seen, last_error, last_error_at, origin FROM exporters "
	    "WHERE removed_at IS NULL ORDER BY name",
	[S_EXP_KIND] =
	    "UPDATE exporters SET kind = ?2, tls = ?3 WHERE id = ?1",
	[S_EXP_SOURCE] =
	    "UPDATE exporters SET source = ?2, origin = ?3 WHERE id = ?1",
	[S_EXP_SEEN] =
	    "UPDATE exporters SET last_seen = ?2 WHERE id = ?1",
	[S_EXP_ERROR] =
	    "UPDATE exporters SET last_error = ?2, last_error_at = ?3 "
	    "WHERE id = ?1",
	[S_DEV_FIND] =
	    "SELECT id FROM devices WHERE exporter_id = ?1 AND "
	    "exporter_busid = ?2 AND hash = ?3 AND serial = ?4 AND "
	    "manufacturer = ?5 AND product = ?6",
	[S_DEV_TOUCH] =
	    "UPDATE devices SET busid = ?2, last_seen = ?3 WHERE id = ?1",
	[S_DEV_INSERT] =
	    "INSERT INTO devices (exporter_id, exporter_busid, busid, vid, pid, "
	    "bcd_device, dev_class, dev_subclass, dev_protocol, speed, "
	    "manufacturer, product, serial, hash, state, state_since, "
	    "first_seen, last_seen) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
	    "?10, ?11, ?12, ?13, ?14, 'probing', ?15, ?15, ?15) RETURNING id",
	[S_IFACE_INSERT] =
	    "INSERT INTO interfaces (device_id, idx, class, subclass, protocol) "
	    "VALUES (?1, ?2, ?3, ?4, ?5)",
	[S_DEV_STATE] =
	    "UPDATE devices SET state = ?2, rule_id = ?3, state_since = ?4, "
	    "last_seen = max(last_seen, ?4) WHERE id = ?1",
	[S_DEV_HOLDER] =
	    "SELECT id FROM devices WHERE busid = ?1 AND state != 'gone'",
	[S_DEV_GET] =
	    "SELECT d.id, d.exporter_id, e.name, d.exporter_busid, d.busid, "
	    "d.vid, d.pid, d.bcd_device, d.dev_class, d.dev_subclass, "
	    "d.dev_protocol, d.speed, d.manufacturer, d.product, d.serial, "
	    "d.hash, d.state, d.state_since, d.rule_id, d.first_seen, "
	    "d.last_seen FROM devices d JOIN exporters e ON e.id = d.exporter_id "
	    "WHERE d.id = ?1",
	[S_DEV_LIST] =
	    "SELECT d.id, d.exporter_id, e.name, d.exporter_busid, d.busid, "
	    "d.vid, d.pid, d.bcd_device, d.dev_class, d.dev_subclass, "
	    "d.dev_protocol, d.speed, d.manufacturer, d.product, d.serial, "
	    "d.hash, d.state, d.state_since, d.rule_id, d.first_seen, "
	    "d.last_seen FROM devices d JOIN exporters e ON e.id = d.exporter_id "
	    "WHERE ?1 OR d.state != 'gone' ORDER BY d.id",
	[S_DEV_LIST_EXPORTER] =	/* index devices_port */
	    "SELECT d.id, d.exporter_id, e.name, d.exporter_busid, d.busid, "
	    "d.vid, d.pid, d.bcd_device, d.dev_class, d.dev_subclass, "
	    "d.dev_protocol, d.speed, d.manufacturer, d.product, d.serial, "
	    "d.hash, d.state, d.state_since, d.rule_id, d.first_seen, "
	    "d.last_seen FROM devices d JOIN exporters e ON e.id = d.exporter_id "
	    "WHERE d.exporter_id = ?2 AND (?1 OR d.state != 'gone') "
	    "ORDER BY d.id",
	[S_IFACE_GET] =
	    "SELECT class, subclass, protocol FROM interfaces "
	    "WHERE device_id = ?1 ORDER BY idx",
	[S_PRES_OPEN] =
	    "SELECT id FROM presences WHERE device_id = ?1 AND "
	    "departed_at IS NULL",
	[S_PRES_INSERT] =
	    "INSERT INTO presences (device_id, busid, arrived_at) "
	    "VALUES (?1, ?2, ?3) RETURNING id",
	[S_PRES_END] =
	    "UPDATE presences SET departed_at = ?2, depart_reason = ?3 "
	    "WHERE device_id = ?1 AND departed_at IS NULL RETURNING id",
	[S_APPR_END_PRESENCE] =
	    "UPDATE approvals SET ended_at = ?2, end_reason = 'gone', "
	    "ended_by = 'system' WHERE presence_id = ?1 AND scope = 'once' "
	    "AND ended_at IS NULL",
	[S_RULE_COUNT] =
	    "SELECT count(*) FROM rules WHERE position IS NOT NULL",
	[S_RULE_SHIFT] =
	    "UPDATE rules SET position = position + ?3 "
	    "WHERE position >= ?1 AND position <= ?2",
	[S_RULE_INSERT] =
	    "INSERT INTO rules (position, text, target, origin, device_id, "
	    "comment, created_at, created_by) "
	    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) RETURNING id",
	[S_RULE_POS] =
	    "SELECT position FROM rules WHERE id = ?1 AND position IS NOT NULL",
	[S_RULE_REMOVE] =
	    "UPDATE rules SET position = NULL, removed_at = ?2, removed_by = ?3 "
	    "WHERE id = ?1 AND position IS NOT NULL",
	[S_RULE_SETPOS] =
	    "UPDATE rules SET position = ?2 WHERE id = ?1",
	[S_RULE_DEVICE] =
	    "SELECT id, position, (origin IN ('approval', 'denial')) = "
	    "(?2 IN ('approval', 'denial')) FROM rules WHERE device_id = ?1 "
	    "AND removed_at IS NULL",
	[S_RULE_LOAD] =
	    "SELECT id, text FROM rules WHERE position IS NOT NULL AND "
	    "(origin IN ('approval', 'denial')) = ?1 ORDER BY position",
	[S_APPR_SUPERSEDE] =
	    "UPDATE approvals SET ended_at = ?3, end_reason = 'superseded', "
	    "ended_by = ?4 WHERE device_id = ?1 AND COALESCE(to_host, '') = ?2 "
	    "AND ended_at IS NULL",
	[S_APPR_INSERT] =
	    "INSERT INTO approvals (device_id, presence_id, decision, scope, "
	    "to_host, created_at, expires_at, actor_uid, actor_name, reason, "
	    "rule_id, override) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
	    "?10, ?11, ?12) RETURNING id",
	[S_APPR_END] =
	    "UPDATE approvals SET ended_at = ?2, end_reason = ?3, ended_by = ?4 "
	    "WHERE id = ?1 AND ended_at IS NULL",
	[S_APPR_END_DEV] =
	    "UPDATE approvals SET ended_at = ?2, end_reason = ?3, ended_by = ?4 "
	    "WHERE device_id = ?1 AND ended_at IS NULL",
	[S_APPR_ACTIVE] =
	    "SELECT id, device_id, presence_id, decision, scope, to_host, "
	    "created_at, expires_at, actor_uid, actor_name, reason, rule_id, "
	    "override "
	    "FROM approvals WHERE device_id = ?1 AND ended_at IS NULL AND "
	    "(expires_at IS NULL OR expires_at > ?3) AND "
	    "(scope != 'once' OR presence_id = ?2) AND (to_host IS NULL OR "
	    "(?4 IS NOT NULL AND to_host = ?4 COLLATE NOCASE) OR "
	    "(?5 IS NOT NULL AND to_host = ?5)) "
	    "ORDER BY created_at DESC, id DESC LIMIT 1",
	[S_APPR_LIST] =
	    "SELECT id, device_id, presence_id, decision, scope, to_host, "
	    "created_at, expires_at, actor_uid, actor_name, reason, rule_id, "
	    "override "
	    "FROM approvals WHERE device_id = ?1 AND ended_at IS NULL AND "
	    "(expires_at IS NULL OR expires_at > ?3) AND "
	    "(scope != 'once' OR presence_id = ?2) ORDER BY id",
	[S_APPR_NEXT] =
	    "SELECT id, expires_at FROM approvals WHERE ended_at IS NULL AND "
	    "expires_at IS NOT NULL ORDER BY expires_at, id LIMIT 1",
	[S_APPR_DUE] =
	    "SELECT id FROM approvals WHERE ended_at IS NULL AND "
	    "expires_at IS NOT NULL AND expires_at <= ?1 "
	    "ORDER BY expires_at, id LIMIT ?2",
	[S_ATT_INSERT] =
	    "INSERT INTO attachments (device_id, presence_id, approval_id, "
	    "rule_id, mode, host_name, host_addr, started_at, transport, "
	    "host_cert, up_transport, up_cert) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
	    "?7, ?8, ?9, ?10, ?11, ?12) RETURNING id",
	[S_ATT_COUNTERS] =
	    "UPDATE attachments SET bytes_to_device = ?2, bytes_from_device = ?3, "
	    "urbs_to_device = ?4, urbs_from_device = ?5, iface_refused = ?6 "
	    "WHERE id = ?1",
	[S_ATT_END] =
	    "UPDATE attachments SET bytes_to_device = ?2, bytes_from_device = ?3, "
	    "urbs_to_device = ?4, urbs_from_device = ?5, iface_refused = ?6, "
	    "ended_at = ?7, end_reason = ?8 WHERE id = ?1 AND ended_at IS NULL",
	[S_ACC_INSERT] =
	    "INSERT INTO access_requests (device_id, busid, host_name, host_addr, "
	    "requested_at, outcome, decided_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
	    "CASE WHEN ?6 = 'waiting' THEN NULL ELSE CAST(?5 AS BIGINT) END) "
	    "RETURNING id",
	[S_ACC_DECIDE] =
	    "UPDATE access_requests SET outcome = ?2, decided_at = ?3, "
	    "decided_by = ?4, approval_id = ?5 WHERE id = ?1 AND "
	    "outcome = 'waiting'",
	[S_ATT_OPEN] =
	    "SELECT a.id, a.device_id, COALESCE(d.busid, ''), "
	    "COALESCE(e.name, ''), COALESCE(a.host_name, COALESCE(a.host_addr, '')), "
	    "a.mode FROM attachments a LEFT JOIN devices d ON d.id = a.device_id "
	    "LEFT JOIN exporters e ON e.id = d.exporter_id "
	    "WHERE a.ended_at IS NULL AND (a.mode = 'proxy' OR ?1) ORDER BY a.id",
	[S_ATT_CLOSE] =
	    "UPDATE attachments SET ended_at = ?2, end_reason = ?3 "
	    "WHERE id = ?1 AND ended_at IS NULL",
	[S_ACC_WAITING] =
	    "SELECT r.id, COALESCE(r.device_id, 0), r.busid, COALESCE(e.name, ''), "
	    "COALESCE(r.host_name, r.host_addr), '' FROM access_requests r "
	    "LEFT JOIN devices d ON d.id = r.device_id "
	    "LEFT JOIN exporters e ON e.id = d.exporter_id "
	    "WHERE r.outcome = 'waiting' ORDER BY r.id",
	[S_SET_GET] =
	    "SELECT value FROM settings WHERE key = ?1",
	[S_SET_PUT] =
	    "INSERT INTO settings (key, value, updated_at) VALUES (?1, ?2, ?3) "
	    "ON CONFLICT (key) DO UPDATE SET value = excluded.value, "
	    "updated_at = excluded.updated_at",
	[S_USER_VERSION] =
	    "PRAGMA user_version",
	[S_GW_PUT] =
	    "INSERT INTO gateways (name, started_at, heartbeat, address, "
	    "version) VALUES (?1, ?2, ?2, ?3, ?4) ON CONFLICT (name) DO UPDATE "
	    "SET started_at = excluded.started_at, heartbeat = "
	    "excluded.heartbeat, address = excluded.address, version = "
	    "excluded.version",
	[S_GW_BEAT] =
	    "UPDATE gateways SET heartbeat = ?2 WHERE name = ?1",
	[S_GW_LIST] =
	    "SELECT name, started_at, heartbeat, COALESCE(address, ''), "
	    "version FROM gateways ORDER BY name",
	[S_CHG_MAX] =
	    "SELECT COALESCE(MAX(seq), 0) FROM changes",
	[S_CHG_SINCE] =
	    "SELECT seq, COALESCE(gateway, ''), kind, COALESCE(ref, '') "
	    "FROM changes WHERE seq > ?1 ORDER BY seq LIMIT ?2",
	[S_DEV_PRESENT] =
	    "SELECT d.id, p.id FROM devices d JOIN presences p ON "
	    "p.device_id = d.id AND p.departed_at IS NULL WHERE d.busid = ?1 "
	    "AND d.state <> 'gone' ORDER BY p.arrived_at DESC LIMIT 1",
	[S_AG_PENDING] =
	    "INSERT INTO agents (name, role, state, key_fingerprint, address, "
	    "created_at) VALUES (?1, ?2, 'pending', ?3, ?4, ?5) RETURNING id",
	[S_AG_ACTIVATE] =
	    "UPDATE agents SET state = 'active', fingerprint = ?2, serial = ?3, "
	    "not_after = ?4, approved_by = ?5, approved_at = ?6 "
	    "WHERE id = ?1 AND state = 'pending'",
	[S_AG_RENEWED] =
	    "INSERT INTO agents (name, role, state, fingerprint, serial, "
	    "key_fingerprint, not_after, address, created_at, approved_at, "
	    "approved_by, renewed_from) VALUES (?1, ?2, 'active', ?3, ?4, ?5, "
	    "?6, ?7, ?8, ?8, 'renewal', ?9) RETURNING id",
	[S_AG_END] =
	    "UPDATE agents SET state = ?2, end_reason = ?3, ended_at = ?4 "
	    "WHERE id = ?1 AND state IN ('pending', 'active')",
	[S_AG_LAPSE] =
	    "UPDATE agents SET state = 'lapsed', end_reason = ?1, ended_at = ?2 "
	    "WHERE state = 'pending'",
	[S_AG_BY_FPR] = AGCOLS "WHERE fingerprint = ?1",
	[S_AG_LIST] = AGCOLS "ORDER BY name, id",
	[S_AG_ACTIVE_NAME] = AGCOLS "WHERE name = ?1 AND state = 'active' "
	    "ORDER BY id",
	[S_VIEW_NEXT] =
	    "SELECT name FROM sqlite_master WHERE type = 'view' LIMIT 1",
};

/*
 * Where PostgreSQL needs other SQL than the table above: SQLite's
 * two-argument max() is GREATEST, COLLATE NOCASE is lower() on both
 * sides, the schema version is a table's row, the views are listed by
 * information_schema.  Everything else runs as written on both.
 */
static const char *const stmt_sql_pg[S_NSTMTS] = {
	[S_DEV_STATE] =
	    "UPDATE devices SET state = ?2, rule_id = ?3, state_since = ?4, "
	    "last_seen = GREATEST(last_seen, ?4) WHERE id = ?1",
	[S_APPR_ACTIVE] =
	    "SELECT id, device_id, presence_id, decision, scope, to_host, "
	    "created_at, expires_at, actor_uid, actor_name, reason, rule_id, "
	    "override "
	    "FROM approvals WHERE device_id = ?1 AND ended_at IS NULL AND "
	    "(expires_at IS NULL OR expires_at > ?3) AND "
	    "(scope != 'once' OR presence_id = ?2) AND (to_host IS NULL OR "
	    "(?4::text IS NOT NULL AND lower(to_host) = lower(?4)) OR "
	    "(?5::text IS NOT NULL AND to_host = ?5)) "
	    "ORDER BY created_at DESC, id DESC LIMIT 1",
	[S_USER_VERSION] =
	    "SELECT COALESCE(max(version), 0) FROM schema_version",
	[S_VIEW_NEXT] =
	    "SELECT table_name FROM information_schema.views "
	    "WHERE table_schema = current_schema() LIMIT 1",
};

struct db {
	struct sqldb	*c;
	char		*path;		/* redacted for PostgreSQL */
	struct sqldb_stmt *st[S_NSTMTS];
	char		 err[DB_ERR_MAX];
	void		(*batch_opened)(void *);	/* db_batch() */
	void		*batch_arg;
	int		 batch_open;	/* we began the open transaction */
	unsigned	 batch_writes;	/* write statements in it */
	int		 user_nested;	/* db_begin() made a savepoint */
};

static const char *const scope_names[] = {
	[SCOPE_ONCE] = "once",
	[SCOPE_FOR] = "for",
	[SCOPE_UNTIL] = "until",
	[SCOPE_PERMANENT] = "permanent",
};

/* ------------------------------------------------------------------ */

static int db_fail(struct db *, const char *, ...)
    __attribute__((format(printf, 2, 3)));
static int
db_fail(struct db *db, const char *fmt, ...)
{
	char	what[128];
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(db->err, sizeof(db->err), "%s: %s", what,
	    sqldb_errmsg(db->c));
	log_warnx("database %s: %s", db->path, db->err);
	return -1;
}

const char *
db_errmsg(struct db *db)
{
	return db->err;
}

sqlite3 *
db_sqlite(struct db *db)
{
	return sqldb_sqlite(db->c);
}

struct sqldb *
db_conn(struct db *db)
{
	return db->c;
}

int
db_is_pg(struct db *db)
{
	return sqldb_kind(db->c) == SQLDB_PG;
}

static int exec(struct db *, const char *);

/*
 * A write on a batched connection outside any transaction opens the
 * batch.  A failed BEGIN (the database busy, say) leaves the write to
 * run on its own, as without batching.
 */
static void
batch_join(struct db *db, struct sqldb_stmt *st)
{
	if (db->batch_opened == NULL || sqldb_readonly(st))
		return;
	if (sqldb_in_tx(db->c)) {
		if (db->batch_open)
			db->batch_writes++;
		return;
	}
	if (sqldb_begin(db->c) == -1) {
		db_fail(db, "batch begin");
		return;
	}
	db->batch_open = 1;
	db->batch_writes = 1;
	db->batch_opened(db->batch_arg);
}

void
db_batch(struct db *db, void (*opened)(void *), void *arg)
{
	db->batch_opened = opened;
	db->batch_arg = arg;
}

int
db_batch_commit(struct db *db, unsigned *lost)
{
	unsigned n = db->batch_writes;

	if (lost != NULL)
		*lost = 0;
	if (!db->batch_open)
		return 0;
	db->batch_open = 0;
	db->batch_writes = 0;
	/* an error that rolled the whole transaction back already */
	if (!sqldb_in_tx(db->c)) {
		if (lost != NULL)
			*lost = n;
		return db_fail(db, "batch of %u writes rolled back earlier", n);
	}
	if (exec(db, "COMMIT") == 0)
		return 0;
	if (sqldb_in_tx(db->c))
		sqldb_rollback(db->c);
	if (lost != NULL)
		*lost = n;
	return -1;
}

/* The statement, prepared once and ready for binding. */
static struct sqldb_stmt *
stmt(struct db *db, enum stmt_id id)
{
	struct sqldb_stmt *st = db->st[id];
	const char *sql = stmt_sql[id];

	if (st == NULL) {
		if (db_is_pg(db) && stmt_sql_pg[id] != NULL)
			sql = stmt_sql_pg[id];
		if ((st = sqldb_prepare(db->c, sql)) == NULL) {
			db_fail(db, "prepare \"%.48s...\"", sql);
			return NULL;
		}
		db->st[id] = st;
		batch_join(db, st);
		return st;
	}
	sqldb_reset(st);
	batch_join(db, st);
	return st;
}

static void
bind_text(struct sqldb_stmt *st, int i, const char *s)
{
	sqldb_bind_text(st, i, s);
}

/* 0 binds NULL (for optional ids). */
static void
bind_id(struct sqldb_stmt *st, int i, int64_t id)
{
	if (id <= 0)
		sqldb_bind_null(st, i);
	else
		sqldb_bind_int64(st, i, id);
}

static void
bind_u64(struct sqldb_stmt *st, int i, uint64_t v)
{
	sqldb_bind_int64(st, i, v > INT64_MAX ? INT64_MAX : (int64_t)v);
}

/* Run a statement that returns no row.  Returns the changes, or -1. */
static int
step_done(struct db *db, struct sqldb_stmt *st, const char *what)
{
	int rc = sqldb_step(st);

	sqldb_reset(st);
	if (rc != SQLDB_DONE)
		return db_fail(db, "%s", what);
	return (int)sqldb_changes(db->c);
}

/* Run a statement returning at most one integer.  1, 0 (no row) or -1. */
static int
step_int(struct db *db, struct sqldb_stmt *st, int64_t *out, const char *what)
{
	int rc = sqldb_step(st);

	if (rc == SQLDB_ROW) {
		*out = sqldb_column_int64(st, 0);
		while ((rc = sqldb_step(st)) == SQLDB_ROW)
			;
		sqldb_reset(st);
		if (rc != SQLDB_DONE)
			return db_fail(db, "%s", what);
		return 1;
	}
	sqldb_reset(st);
	if (rc != SQLDB_DONE)
		return db_fail(db, "%s", what);
	return 0;
}

/* An INSERT ... RETURNING id: the id, or -1. */
static int64_t
step_id(struct db *db, struct sqldb_stmt *st, const char *what)
{
	int64_t id = -1;

	if (step_int(db, st, &id, what) != 1)
		return -1;
	return id;
}

static void
col_text(struct sqldb_stmt *st, int i, char *out, size_t len)
{
	const char *s = sqldb_column_text(st, i);

	usbgw_strlcpy(out, s != NULL ? s : "", len);
}

static int
exec(struct db *db, const char *sql)
{
	if (sqldb_exec(db->c, sql) == -1)
		return db_fail(db, "%.40s", sql);
	return 0;
}

/* A transaction, or a savepoint inside the caller's transaction. */
static int
tx_begin(struct db *db, int *nested)
{
	*nested = sqldb_in_tx(db->c);
	if ((*nested ? sqldb_savepoint(db->c, "db_tx") :
	    sqldb_begin(db->c)) == -1)
		return db_fail(db, "%s", *nested ? "savepoint" : "begin");
	return 0;
}

static int
tx_end(struct db *db, int nested, int ok)
{
	if (ok) {
		if ((nested ? sqldb_release(db->c, "db_tx") :
		    sqldb_commit(db->c)) == -1) {
			db_fail(db, "commit");
			if (!nested && sqldb_in_tx(db->c))
				sqldb_rollback(db->c);
			return -1;
		}
		return 0;
	}
	if (nested) {
		sqldb_rollback_to(db->c, "db_tx");
		sqldb_release(db->c, "db_tx");
	} else
		sqldb_rollback(db->c);
	return -1;
}

int
db_begin(struct db *db)
{
	db->user_nested = sqldb_in_tx(db->c);
	if ((db->user_nested ? sqldb_savepoint(db->c, "db_user") :
	    sqldb_begin(db->c)) == -1)
		return db_fail(db, "begin");
	return 0;
}

int
db_commit(struct db *db)
{
	if ((db->user_nested ? sqldb_release(db->c, "db_user") :
	    sqldb_commit(db->c)) == -1)
		return db_fail(db, "commit");
	return 0;
}

int
db_rollback(struct db *db)
{
	if (!db->user_nested)
		return sqldb_rollback(db->c) == -1 ? db_fail(db, "rollback") : 0;
	if (sqldb_rollback_to(db->c, "db_user") == -1 ||
	    sqldb_release(db->c, "db_user") == -1)
		return db_fail(db, "rollback");
	return 0;
}

/* ------------------------------------------------------------------ */
/* Schema                                                               */

#define MIG_MARK	"\n-- @migration "
#define VIEWS_MARK	"\n-- @views"

/* The schema text of this connection's back end. */
static const char *
schema_text(int pg)
{
	return pg ? usbgw_schema_pg_sql : usbgw_schema_sql;
}

/*
 * Section n of the schema (n > 0: migration n; n == 0: the views) as
 * [*start, *end): from the line after its marker to the next marker.
 * Returns 0, or -1 if there is no such section.
 */
static int
schema_section(const char *text, int n, const char **start, const char **end)
{
	const char	*p = text, *m, *v, *mark, *body = NULL;
	long		 num, cur = -1;

	for (;;) {
		m = strstr(p, MIG_MARK);
		v = strstr(p, VIEWS_MARK);
		if (m != NULL && (v == NULL || m < v)) {
			mark = m;
			num = strtol(m + strlen(MIG_MARK), NULL, 10);
		} else {
			mark = v;
			num = 0;
		}
		if (body != NULL && cur == n) {
			*start = body;
			*end = mark != NULL ? mark : body + strlen(body);
			return 0;
		}
		if (mark == NULL)
			return -1;
		cur = num;
		if ((body = strchr(mark + 1, '\n')) == NULL)
			body = mark + strlen(mark);
		p = body;
	}
}

/* The lowest (first) or highest migration number of a schema text. */
static int
schema_bound(const char *text, int highest)
{
	const char	*p = text, *m;
	int		 best = 0;
	long		 v;

	while ((m = strstr(p, MIG_MARK)) != NULL) {
		v = strtol(m + strlen(MIG_MARK), NULL, 10);
		if (v > 0 && v < 1000000 && (best == 0 ||
		    (highest ? v > best : v < best)))
			best = (int)v;
		p = m + 1;
	}
	return best;
}

int
db_schema_version(void)
{
	return schema_bound(usbgw_schema_sql, 1);
}

int
db_schema_version_pg(void)
{
	return schema_bound(usbgw_schema_pg_sql, 1);
}

int
db_version(struct db *db)
{
	struct sqldb_stmt	*st = stmt(db, S_USER_VERSION);
	int64_t			 v = -1;

	if (st == NULL || step_int(db, st, &v, "schema version") != 1)
		return -1;
	return (int)v;
}

static int
exec_section(struct db *db, const char *start, const char *end)
{
	char	*sql = xstrndup(start, (size_t)(end - start));
	int	 rc;

	rc = sqldb_exec(db->c, sql);
	free(sql);
	if (rc == -1) {
		snprintf(db->err, sizeof(db->err), "%s", sqldb_errmsg(db->c));
		return -1;
	}
	return 0;
}

/* Every view of the database dropped (one transaction). */
static int
drop_views(struct db *db)
{
	struct sqldb_stmt *st;
	const char *name;
	char sql[200];
	int rc = 0, step;

	if (sqldb_begin(db->c) == -1)
		return db_fail(db, "begin");
	for (;;) {
		if ((st = stmt(db, S_VIEW_NEXT)) == NULL) {
			rc = -1;
			break;
		}
		if ((step = sqldb_step(st)) != SQLDB_ROW) {
			sqldb_reset(st);
			if (step == SQLDB_ERROR)
				rc = db_fail(db, "listing views");
			break;
		}
		name = sqldb_column_text(st, 0);
		snprintf(sql, sizeof(sql), "DROP VIEW \"%.150s\"%s",
		    name != NULL ? name : "", db_is_pg(db) ? " CASCADE" : "");
		sqldb_reset(st);
		if (name == NULL || strchr(sql + 11, '"') != strrchr(sql, '"') ||
		    exec(db, sql) == -1) {
			rc = -1;
			break;
		}
	}
	if (rc == -1) {
		sqldb_rollback(db->c);
		return -1;
	}
	return exec(db, "COMMIT");
}

/*
 * Several gateways may open one PostgreSQL database at once (a fresh one
 * too): everything from the creation of schema_version to the views
 * runs under a session advisory lock (key: "usbg"), and the version is
 * read under it.  Two CREATE TABLE IF NOT EXISTS at the same instant
 * both find no table and one fails on PostgreSQL's catalog (a duplicate
 * pg_type row), so the lock comes first.
 */
#define PG_MIGRATE_LOCK	"SELECT pg_advisory_lock(1970496103)"
#define PG_MIGRATE_UNLOCK "SELECT pg_advisory_unlock(1970496103)"

static int
migrate_locked(struct db *db, int target, char *err, size_t errlen)
{
	const char	*text = schema_text(db_is_pg(db)), *s, *e;
	int		 cur, n, first, applied = 0;

	if ((cur = db_version(db)) == -1) {
		snprintf(err, errlen, "%s", db->err);
		return -1;
	}
	if (cur > schema_bound(text, 1)) {
		snprintf(err, errlen, "database schema version %d is newer than "
		    "this program's (%d)", cur, schema_bound(text, 1));
		return -1;
	}
	/*
	 * The PostgreSQL schema starts at a later version (its first
	 * section creates the schema of that version): a new database
	 * starts there.
	 */
	first = schema_bound(text, 0);
	if (cur == 0 && target > 0 && target < first) {
		snprintf(err, errlen, "the %s schema starts at version %d "
		    "(asked for %d)", db_is_pg(db) ? "PostgreSQL" : "SQLite",
		    first, target);
		return -1;
	}
	/*
	 * The views go first: they are made again after any migration, and
	 * one that names a table a migration rebuilds (DROP, then RENAME
	 * of the new one) makes SQLite refuse the RENAME ("error in view").
	 */
	if (cur < target && drop_views(db) == -1) {
		snprintf(err, errlen, "dropping the views: %s", db->err);
		return -1;
	}
	for (n = cur == 0 ? first : cur + 1; n <= target; n++) {
		if (schema_section(text, n, &s, &e) == -1) {
			snprintf(err, errlen, "the schema has no migration %d", n);
			return -1;
		}
		db->err[0] = '\0';
		if (sqldb_begin(db->c) == -1 ||
		    exec_section(db, s, e) == -1 || db_version(db) != n) {
			snprintf(err, errlen, "migration to version %d: %s", n,
			    db->err[0] ? db->err : sqldb_errmsg(db->c)[0] ?
			    sqldb_errmsg(db->c) : "schema version not set");
			if (sqldb_in_tx(db->c))
				sqldb_rollback(db->c);
			return -1;
		}
		if (exec(db, "COMMIT") == -1) {
			snprintf(err, errlen, "migration to version %d: %s", n,
			    db->err);
			return -1;
		}
		log_info("database %s: migrated to schema version %d",
		    db->path, n);
		applied = 1;
	}
	if (applied) {
		if (schema_section(text, 0, &s, &e) == -1 ||
		    sqldb_begin(db->c) == -1 ||
		    exec_section(db, s, e) == -1 || exec(db, "COMMIT") == -1) {
			snprintf(err, errlen, "views: %s", db->err[0] ? db->err :
			    sqldb_errmsg(db->c));
			if (sqldb_in_tx(db->c))
				sqldb_rollback(db->c);
			return -1;
		}
	}
	return 0;
}

static int
migrate(struct db *db, int target, char *err, size_t errlen)
{
	int rc;

	if (!db_is_pg(db))
		return migrate_locked(db, target, err, errlen);
	if (exec(db, PG_MIGRATE_LOCK) == -1) {
		snprintf(err, errlen, "%s", db->err);
		return -1;
	}
	if (exec(db, "CREATE TABLE IF NOT EXISTS schema_version "
	    "(version BIGINT NOT NULL)") == -1) {
		snprintf(err, errlen, "%s", db->err);
		rc = -1;
	} else
		rc = migrate_locked(db, target, err, errlen);
	if (exec(db, PG_MIGRATE_UNLOCK) == -1 && rc == 0) {
		snprintf(err, errlen, "%s", db->err);
		rc = -1;
	}
	return rc;
}

/*
 * The database holds who approved what: create it 0600 whatever the
 * umask, before SQLite would create it with 0644 & ~umask.  SQLite gives
 * the -wal and -shm files it creates the database file's mode, so they
 * follow.  An existing file keeps its mode (the operator may mean it), with
 * a warning when others can read or write it.
 */
static int
file_prepare(const char *path, char *err, size_t errlen)
{
	struct stat	 st;
	int		 fd;

	if (path[0] == '\0' || strcmp(path, ":memory:") == 0)
		return 0;
	if ((fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC |
	    O_NOCTTY, 0600)) != -1) {
		if (fchmod(fd, 0600) == -1) {
			snprintf(err, errlen, "%s: chmod 0600: %s", path,
			    strerror(errno));
			close(fd);
			return -1;
		}
		close(fd);
		return 0;
	}
	if (errno != EEXIST) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (stat(path, &st) == 0 && (st.st_mode & 077) != 0)
		log_warnx("database %s is %s by group or others (mode %04o): "
		    "left as it is; chmod 0600 it and its -wal and -shm files "
		    "unless that is meant", path, (st.st_mode & 044) != 0 ?
		    "readable" : "writable", (unsigned)(st.st_mode & 07777));
	return 0;
}

static struct db *
db_new(const char *target, int flags, char *err, size_t errlen)
{
	struct db	*db;
	struct sqldb	*c;

	if ((c = sqldb_open(target, flags, err, errlen)) == NULL)
		return NULL;
	db = xcalloc(1, sizeof(*db));
	db->c = c;
	db->path = xstrdup(sqldb_name(c));
	return db;
}

struct db *
db_open_version(const char *path, int version, char *err, size_t errlen)
{
	struct db	*db;

	if (errlen > 0)
		err[0] = '\0';
	if (!sqldb_is_pg(path) && file_prepare(path, err, errlen) == -1)
		return NULL;
	if ((db = db_new(path, 0, err, errlen)) == NULL)
		return NULL;
	if ((!db_is_pg(db) &&
	    (exec(db, "PRAGMA journal_mode = WAL") == -1 ||
	    exec(db, "PRAGMA synchronous = NORMAL") == -1 ||
	    exec(db, "PRAGMA foreign_keys = ON") == -1 ||
	    exec(db, "PRAGMA trusted_schema = OFF") == -1)) ||
	    migrate(db, version, err, errlen) == -1) {
		if (db->err[0] != '\0' && err[0] == '\0')
			snprintf(err, errlen, "%s", db->err);
		db_close(db);
		return NULL;
	}
	return db;
}

struct db *
db_open_readonly(const char *path, char *err, size_t errlen)
{
	struct db	*db;

	if (errlen > 0)
		err[0] = '\0';
	if ((db = db_new(path, SQLDB_READONLY, err, errlen)) == NULL)
		return NULL;
	if ((!db_is_pg(db) && exec(db, "PRAGMA trusted_schema = OFF") == -1) ||
	    exec(db, "SELECT 1 FROM audit_log LIMIT 1") == -1) {
		snprintf(err, errlen, "%s: %s", db->path, db->err);
		db_close(db);
		return NULL;
	}
	return db;
}

struct db *
db_open(const char *path, char *err, size_t errlen)
{
	if (errlen > 0)
		err[0] = '\0';
	return db_open_version(path, sqldb_is_pg(path) ?
	    db_schema_version_pg() : db_schema_version(), err, errlen);
}

void
db_close(struct db *db)
{
	int i;

	if (db == NULL)
		return;
	if (db->batch_open && db_batch_commit(db, NULL) == -1)
		log_warnx("database: last batch lost: %s", db->err);
	for (i = 0; i < S_NSTMTS; i++)
		sqldb_finalize(db->st[i]);
	sqldb_close(db->c);
	free(db->path);
	free(db);
}

/* ------------------------------------------------------------------ */
/* Exporters                                                            */

int64_t
db_exporter_upsert(struct db *db, const char *name, const char *host,
    int port, int64_t now)
{
	struct sqldb_stmt *st;
	int64_t		 id;

	if ((st = stmt(db, S_EXP_UPSERT)) == NULL)
		return -1;
	bind_text(st, 1, name);
	bind_text(st, 2, host);
	sqldb_bind_int64(st, 3, port);
	sqldb_bind_int64(st, 4, now);
	if (step_int(db, st, &id, "exporter upsert") != 1)
		return -1;
	return id;
}

int
db_exporter_set_kind(struct db *db, int64_t id, const char *kind,
    const char *tls)
{
	struct sqldb_stmt *st;

	if ((st = stmt(db, S_EXP_KIND)) == NULL)
		return -1;
	sqldb_bind_int64(st, 1, id);
	bind_text(st, 2, kind);
	bind_text(st, 3, tls);
	return step_done(db, st, "exporter kind") == -1 ? -1 : 0;
}

int
db_exporter_set_source(struct db *db, int64_t id, const char *source,
    const char *origin)
{
	struct sqldb_stmt *st;

	if ((st = stmt(db, S_EXP_SOURCE)) == NULL)
		return -1;
	sqldb_bind_int64(st, 1, id);
	bind_text(st, 2, source);
	bind_text(st, 3, origin);
	return step_done(db, st, "exporter source") == -1 ? -1 : 0;
}

int
db_exporter_seen(struct db *db, int64_t id, int64_t when)
{
	struct sqldb_stmt *st;

	if ((st = stmt(db, S_EXP_SEEN)) == NULL)
		return -1;
	sqldb_bind_int64(st, 1, id);
	sqldb_bind_int64(st, 2, when);
	return step_done(db, st, "exporter last seen") == -1 ? -1 : 0;
}

int
db_exporter_error(struct db *db, int64_t id, const char *error, int64_t when)
{
	struct sqldb_stmt *st;

	if ((st = stmt(db, S_EXP_ERROR)) == NULL)
		return -1;
	sqldb_bind_int64(st, 1, id);
	bind_text(st, 2, error);
	sqldb_bind_int64(st, 3, when);
	return step_done(db, st, "exporter last error") == -1 ? -1 : 0;
}

int
db_exporter_remove(struct db *db, const char *name, int64_t now)
{
	struct sqldb_stmt *st;

	if ((st = stmt(db, S_EXP_REMOVE)) == NULL)
		return -1;
	bind_text(st, 1, name);
	sqldb_bind_int64(st, 2, now);
	return step_done(db, st, "exporter remove");
}

int
db_exporter_status(struct db *db, int64_t id, const char *status, int64_t now)
{
	struct sqldb_stmt *st;

	if ((st = stmt(db, S_EXP_STATUS)) == NULL)
		return -1;
	sqldb_bind_int64(st, 1, id);
	bind_text(st, 2, status);
	sqldb_bind_int64(st, 3, now);
	return step_done(db, st, "exporter status") == -1 ? -1 : 0;
}

int
db_exporter_foreach(struct db *db, int (*cb)(void *, const struct db_exporter *),
    void *arg)
{
	struct sqldb_stmt	*st;
	struct db_exporter	 e;
	int			 rc;

	if ((st = stmt(db, S_EXP_LIST)) == NULL)
		return -1;
	while ((rc = sqldb_step(st)) == SQLDB_ROW) {
		memset(&e, 0, sizeof(e));
		e.id = sqldb_column_int64(st, 0);
		col_text(st, 1, e.name, sizeof(e.name));
		col_text(st, 2, e.host, sizeof(e.host));
		e.port = sqldb_column_int64(st, 3);
		col_text(st, 4, e.status, sizeof(e.status));
		col_text(st, 5, e.kind, sizeof(e.kind));
		col_text(st, 6, e.tls, sizeof(e.tls));
		col_text(st, 7, e.source, sizeof(e.source));
		e.last_seen = sqldb_column_int64(st, 8);
		col_text(st, 9, e.last_error, sizeof(e.last_error));
		e.last_error_at = sqldb_column_int64(st, 10);
		col_text(st, 11, e.origin, sizeof(e.origin));
		if (cb(arg, &e) != 0) {
			sqldb_reset(st);
			return 0;
		}
	}
	sqldb_reset(st);
	return rc == SQLDB_DONE ? 0 : db_fail(db, "exporter list");
}

/* ------------------------------------------------------------------ */
/* Devices                                                              */

int64_t
db_device_upsert(struct db *db, int64_t exporter_id,
    const struct usbgw_identity *id, int64_t now, int *created)
{
	struct sqldb_stmt *st;
	int64_t		 dev = 0;
	int		 nested, rc, ok = 0;
	unsigned	 i;

	if (created != NULL)
		*created = 0;
	if (tx_begin(db, &nested) == -1)
		return -1;
	if ((st = stmt(db, S_DEV_FIND)) == NULL)
		goto done;
	sqldb_bind_int64(st, 1, exporter_id);
	bind_text(st, 2, id->exporter_busid);
	bind_text(st, 3, id->hash);
	bind_text(st, 4, id->serial);
	bind_text(st, 5, id->manufacturer);
	bind_text(st, 6, id->product);
	if ((rc = step_int(db, st, &dev, "device find")) == -1)
		goto done;
	if (rc == 1) {
		if ((st = stmt(db, S_DEV_TOUCH)) == NULL)
			goto done;
		sqldb_bind_int64(st, 1, dev);
		bind_text(st, 2, id->busid);
		sqldb_bind_int64(st, 3, now);
		ok = step_done(db, st, "device touch") != -1;
		goto done;
	}
	if ((st = stmt(db, S_DEV_INSERT)) == NULL)
		goto done;
	sqldb_bind_int64(st, 1, exporter_id);
	bind_text(st, 2, id->exporter_busid);
	bind_text(st, 3, id->busid);
	sqldb_bind_int64(st, 4, id->vid);
	sqldb_bind_int64(st, 5, id->pid);
	sqldb_bind_int64(st, 6, id->bcd_device);
	sqldb_bind_int64(st, 7, id->dev_class);
	sqldb_bind_int64(st, 8, id->dev_subclass);
	sqldb_bind_int64(st, 9, id->dev_protocol);
	sqldb_bind_int64(st, 10, id->speed);
	bind_text(st, 11, id->manufacturer);
	bind_text(st, 12, id->product);
	bind_text(st, 13, id->serial);
	bind_text(st, 14, id->hash);
	sqldb_bind_int64(st, 15, now);
	if ((dev = step_id(db, st, "device insert")) == -1)
		goto done;
	for (i = 0; i < id->n_ifaces && i < USBGW_IFACE_MAX; i++) {
		if ((st = stmt(db, S_IFACE_INSERT)) == NULL)
			goto done;
		sqldb_bind_int64(st, 1, dev);
		sqldb_bind_int64(st, 2, (int)i);
		sqldb_bind_int64(st, 3, id->ifaces[i].cls);
		sqldb_bind_int64(st, 4, id->ifaces[i].subcls);
		sqldb_bind_int64(st, 5, id->ifaces[i].proto);
		if (step_done(db, st, "interface insert") == -1)
			goto done;
	}
	if (created != NULL)
		*created = 1;
	ok = 1;
done:
	if (tx_end(db, nested, ok) == -1)
		return -1;
	return dev;
}

int
db_device_set_state(struct db *db, int64_t device_id, enum dev_state state,
    int64_t rule_id, int64_t now)
{
	struct sqldb_stmt *st;
	int		 n;

	if ((unsigned)state >= DEV_NSTATES ||
	    (st = stmt(db, S_DEV_STATE)) == NULL)
		return -1;
	sqldb_bind_int64(st, 1, device_id);
	bind_text(st, 2, dev_state_name(state));
	bind_id(st, 3, rule_id);
	sqldb_bind_int64(st, 4, now);
	if ((n = step_done(db, st, "device state")) == -1)
		return -1;
	return n == 1 ? 0 : -1;
}

static int
read_device(struct db *db, struct sqldb_stmt *st, struct db_device *d)
{
	struct sqldb_stmt *fs;
	char		 state[16];
	int		 s, rc;

	memset(d, 0, sizeof(*d));
	d->id = sqldb_column_int64(st, 0);
	d->exporter_id = sqldb_column_int64(st, 1);
	col_text(st, 2, d->ident.exporter, sizeof(d->ident.exporter));
	col_text(st, 3, d->ident.exporter_busid,
	    sizeof(d->ident.exporter_busid));
	col_text(st, 4, d->ident.busid, sizeof(d->ident.busid));
	d->ident.vid = (uint16_t)sqldb_column_int64(st, 5);
	d->ident.pid = (uint16_t)sqldb_column_int64(st, 6);
	d->ident.bcd_device = (uint16_t)sqldb_column_int64(st, 7);
	d->ident.dev_class = (uint8_t)sqldb_column_int64(st, 8);
	d->ident.dev_subclass = (uint8_t)sqldb_column_int64(st, 9);
	d->ident.dev_protocol = (uint8_t)sqldb_column_int64(st, 10);
	d->ident.speed = (uint32_t)sqldb_column_int64(st, 11);
	col_text(st, 12, d->ident.manufacturer, sizeof(d->ident.manufacturer));
	col_text(st, 13, d->ident.product, sizeof(d->ident.product));
	col_text(st, 14, d->ident.serial, sizeof(d->ident.serial));
	col_text(st, 15, d->ident.hash, sizeof(d->ident.hash));
	col_text(st, 16, state, sizeof(state));
	s = dev_state_parse(state);
	d->state = s < 0 ? DEV_PENDING : (enum dev_state)s;
	d->state_since = sqldb_column_int64(st, 17);
	d->rule_id = sqldb_column_int64(st, 18);
	d->first_seen = sqldb_column_int64(st, 19);
	d->last_seen = sqldb_column_int64(st, 20);

	if ((fs = stmt(db, S_IFACE_GET)) == NULL)
		return -1;
	sqldb_bind_int64(fs, 1, d->id);
	while ((rc = sqldb_step(fs)) == SQLDB_ROW &&
	    d->ident.n_ifaces < USBGW_IFACE_MAX) {
		struct usbgw_iface *f = &d->ident.ifaces[d->ident.n_ifaces++];

		f->cls = (uint8_t)sqldb_column_int64(fs, 0);
		f->subcls = (uint8_t)sqldb_column_int64(fs, 1);
		f->proto = (uint8_t)sqldb_column_int64(fs, 2);
	}
	sqldb_reset(fs);
	if (rc != SQLDB_ROW && rc != SQLDB_DONE)
		return db_fail(db, "interfaces");
	return 0;
}

int
db_device_get(struct db *db, int64_t device_id, struct db_device *out)
{
	struct sqldb_stmt *st;
	int		 rc;

	if ((st = stmt(db, S_DEV_GET)) == NULL)
		return -1;
	sqldb_bind_int64(st, 1, device_id);
	rc = sqldb_step(st);
	if (rc == SQLDB_DONE) {
		sqldb_reset(st);
		return 0;
	}
	if (rc != SQLDB_ROW) {
		sqldb_reset(st);
		return db_fail(db, "device get");
	}
	rc = read_device(db, st, out);
	sqldb_reset(st);
	return rc == -1 ? -1 : 1;
}

int64_t
db_device_busid_holder(struct db *db, const char *busid)
{
	struct sqldb_stmt *st;
	int64_t		 id = 0;
	int		 rc;

	if ((st = stmt(db, S_DEV_HOLDER)) == NULL)
		return -1;
	bind_text(st, 1, busid);
	rc = sqldb_step(st);
	if (rc == SQLDB_ROW)
		id = sqldb_column_int64(st, 0);
	sqldb_reset(st);
	if (rc != SQLDB_ROW && rc != SQLDB_DONE)
		return db_fail(db, "busid holder");
	return id;
}

static int
device_foreach(struct db *db, int64_t exporter_id, int include_gone,
    int (*cb)(void *, const struct db_device *), void *arg)
{
	struct sqldb_stmt	*st;
	struct db_device	 d;
	int			 rc;

	if ((st = stmt(db, exporter_id > 0 ? S_DEV_LIST_EXPORTER :
	    S_DEV_LIST)) == NULL)
		return -1;
	sqldb_bind_int64(st, 1, include_gone ? 1 : 0);
	if (exporter_id > 0)
		sqldb_bind_int64(st, 2, exporter_id);
	while ((rc = sqldb_step(st)) == SQLDB_ROW) {
		if (read_device(db, st, &d) == -1) {
			sqldb_reset(st);
			return -1;
		}
		if (cb(arg, &d) != 0) {
			sqldb_reset(st);
			return 0;
		}
	}
	sqldb_reset(st);
	return rc == SQLDB_DONE ? 0 : db_fail(db, "device list");
}

int
db_device_foreach(struct db *db, int include_gone,
    int (*cb)(void *, const struct db_device *), void *arg)
{
	return device_foreach(db, 0, include_gone, cb, arg);
}

int
db_exporter_devices_foreach(struct db *db, int64_t exporter_id,
    int include_gone, int (*cb)(void *, const struct db_device *), void *arg)
{
	if (exporter_id <= 0)
		return 0;
	return device_foreach(db, exporter_id, include_gone, cb, arg);
}

/* ------------------------------------------------------------------ */
/* Presences                                                            */

int64_t
db_presence_current(struct db *db, int64_t device_id)
{
	struct sqldb_stmt *st;
	int64_t		 id = 0;

	if ((st = stmt(db, S_PRES_OPEN)) == NULL)
		return -1;
	sqldb_bind_int64(st, 1, device_id);
	if (step_int(db, st, &id, "presence") == -1)
		return -1;
	return id;
}

int64_t
db_presence_begin(struct db *db, int64_t device_id, const char *busid,
    int64_t now)
{
	struct sqldb_stmt *st;
	int64_t		 id;

	if ((id = db_presence_current(db, device_id)) != 0)
		return id;
	if ((st = stmt(db, S_PRES_INSERT)) == NULL)
		return -1;
	sqldb_bind_int64(st, 1, device_id);
	bind_text(st, 2, busid);
	sqldb_bind_int64(st, 3, now);
	return step_id(db, st, "presence insert");
}

int
db_presence_end(struct db *db, int64_t device_id, const char *reason,
    int64_t now)
{
	struct sqldb_stmt *st;
	int64_t		 pid = 0;
	int		 nested, rc = -1;

	if (tx_begin(db, &nested) == -1)
		return -1;
	if ((st = stmt(db, S_PRES_END)) == NULL)
		goto done;
	sqldb_bind_int64(st, 1, device_id);
	sqldb_bind_int64(st, 2, now);
	bind_text(st, 3, reason);
	if ((rc = step_int(db, st, &pid, "presence end")) != 1)
		goto done;
	if ((st = stmt(db, S_APPR_END_PRESENCE)) == NULL) {
		rc = -1;
		goto done;
	}
	sqldb_bind_int64(st, 1, pid);
	sqldb_bind_int64(st, 2, now);
	if (step_done(db, st, "once-approvals end") == -1)
		rc = -1;
done:
	if (tx_end(db, nested, rc != -1) == -1)
		return -1;
	return rc;
}

/* ------------------------------------------------------------------ */
/* Rules                                                                */

static int64_t
rule_count(struct db *db)
{
	struct sqldb_stmt *st;
	int64_t		 n = -1;

	if ((st = stmt(db, S_RULE_COUNT)) == NULL ||
	    step_int(db, st, &n, "rule count") != 1)
		return -1;
	return n;
}

static int
rule_shift(struct db *db, int64_t from, int64_t to, int delta)
{
	struct sqldb_stmt *st;

	if ((st = stmt(db, S_RULE_SHIFT)) == NULL)
		return -1;
	sqldb_bind_int64(st, 1, from);
	sqldb_bind_int64(st, 2, to);
	sqldb_bind_int64(st, 3, delta);
	return step_done(db, st, "rule shift") == -1 ? -1 : 0;
}

/* Position of an active rule, 0 if none. */
static int64_t
rule_position(struct db *db, int64_t rule_id)
{
	struct sqldb_stmt *st;
	int64_t		 pos = 0;

	if ((st = stmt(db, S_RULE_POS)) == NULL)
		return -1;
	sqldb_bind_int64(st, 1, rule_id);
	if (step_int(db, st, &pos, "rule position") == -1)
		return -1;
	return pos;
}

/* Insert at a 1-based position (inside a transaction). */
static int64_t
rule_insert(struct db *db, long position, const struct rule *r,
    const char *origin, int64_t device_id, const char *comment,
    const char *by, int64_t now)
{
	struct sqldb_stmt *st;
	int64_t		 n;
	char		*text;
	int64_t		 id;

	if ((n = rule_count(db)) == -1)
		return -1;
	if (position <= 0 || position > n)
		position = (long)n + 1;
	else if (rule_shift(db, position, INT64_MAX, 1) == -1)
		return -1;
	if ((st = stmt(db, S_RULE_INSERT)) == NULL)
		return -1;
	text = rule_format(r);
	sqldb_bind_int64(st, 1, position);
	bind_text(st, 2, text);
	bind_text(st, 3, rule_target_name(rule_target(r)));
	bind_text(st, 4, origin);
	bind_id(st, 5, device_id);
	bind_text(st, 6, comment);
	sqldb_bind_int64(st, 7, now);
	bind_text(st, 8, by);
	id = step_id(db, st, "rule insert");
	free(text);
	return id;
}

/* Remove an active rule at pos (inside a transaction). */
static int
rule_unlink(struct db *db, int64_t rule_id, int64_t pos, const char *by,
    int64_t now)
{
	struct sqldb_stmt *st;

	if ((st = stmt(db, S_RULE_REMOVE)) == NULL)
		return -1;
	sqldb_bind_int64(st, 1, rule_id);
	sqldb_bind_int64(st, 2, now);
	bind_text(st, 3, by);
	if (step_done(db, st, "rule remove") == -1)
		return -1;
	return rule_shift(db, pos + 1, INT64_MAX, -1);
}

int64_t
db_rule_add(struct db *db, long position, const struct rule *r,
    const char *origin, int64_t device_id, const char *comment,
    const char *by, int64_t now)
{
	int64_t	id;
	int	nested;

	if (tx_begin(db, &nested) == -1)
		return -1;
	id = rule_insert(db, position, r, origin, device_id, comment, by, now);
	if (tx_end(db, nested, id != -1) == -1)
		return -1;
	return id;
}

int
db_rule_remove(struct db *db, int64_t rule_id, const char *by, int64_t now)
{
	int64_t	pos;
	int	nested, rc = -1;

	if (tx_begin(db, &nested) == -1)
		return -1;
	if ((pos = rule_position(db, rule_id)) == -1)
		goto done;
	if (pos == 0) {
		rc = 0;
		goto done;
	}
	if (rule_unlink(db, rule_id, pos, by, now) == 0)
		rc = 1;
done:
	if (tx_end(db, nested, rc != -1) == -1)
		return -1;
	return rc;
}

int
db_rule_move(struct db *db, int64_t rule_id, long position)
{
	struct sqldb_stmt *st;
	int64_t		 pos, n;
	int		 nested, rc = -1;

	if (tx_begin(db, &nested) == -1)
		return -1;
	if ((pos = rule_position(db, rule_id)) == -1 ||
	    (n = rule_count(db)) == -1)
		goto done;
	if (pos == 0) {
		rc = 0;
		goto done;
	}
	if (position < 1)
		position = 1;
	if (position > n)
		position = (long)n;
	if (position < pos) {
		if (rule_shift(db, position, pos - 1, 1) == -1)
			goto done;
	} else if (position > pos) {
		if (rule_shift(db, pos + 1, position, -1) == -1)
			goto done;
	}
	if ((st = stmt(db, S_RULE_SETPOS)) == NULL)
		goto done;
	sqldb_bind_int64(st, 1, rule_id);
	sqldb_bind_int64(st, 2, position);
	if (step_done(db, st, "rule move") != -1)
		rc = 1;
done:
	if (tx_end(db, nested, rc != -1) == -1)
		return -1;
	return rc;
}

int
db_rule_of_device(struct db *db, int64_t device_id, int64_t *rule_id,
    char *origin, size_t len)
{
	struct sqldb_stmt *st;
	int		 rc;

	if ((st = stmt(db, S_RULE_DEVICE)) == NULL)
		return -1;
	sqldb_bind_int64(st, 1, device_id);
	bind_text(st, 2, "admin");
	rc = sqldb_step(st);
	if (rc == SQLDB_ROW) {
		*rule_id = sqldb_column_int64(st, 0);
		/* column 2: 1 when in the admin tier (same as "admin") */
		usbgw_strlcpy(origin, sqldb_column_int64(st, 2) ? "admin" :
		    "operator", len);
	}
	sqldb_reset(st);
	if (rc == SQLDB_ROW)
		return 1;
	return rc == SQLDB_DONE ? 0 : db_fail(db, "device rule");
}

int64_t
db_rule_set_device(struct db *db, int64_t device_id, long position,
    const struct rule *r, const char *origin, const char *comment,
    const char *by, int64_t now)
{
	struct sqldb_stmt *st;
	int64_t		 old = 0, oldpos = 0, pos = position, id = -1;
	int		 nested, rc, same_tier = 0;

	if (tx_begin(db, &nested) == -1)
		return -1;
	if ((st = stmt(db, S_RULE_DEVICE)) == NULL)
		goto done;
	sqldb_bind_int64(st, 1, device_id);
	bind_text(st, 2, origin);
	rc = sqldb_step(st);
	if (rc == SQLDB_ROW) {
		old = sqldb_column_int64(st, 0);
		oldpos = sqldb_column_int64(st, 1);
		same_tier = sqldb_column_int64(st, 2);
	}
	sqldb_reset(st);
	if (rc != SQLDB_ROW && rc != SQLDB_DONE) {
		db_fail(db, "device rule");
		goto done;
	}
	if (old != 0 && rule_unlink(db, old, oldpos, by, now) == -1)
		goto done;
	/* in the old one's place if that is in the same tier */
	if (old != 0 && same_tier && position == 0)
		pos = oldpos;
	id = rule_insert(db, (long)pos, r, origin, device_id, comment, by, now);
done:
	if (tx_end(db, nested, id != -1) == -1)
		return -1;
	return id;
}

int
db_rules_load(struct db *db, struct policy *p, int operator_tier,
    void (*bad)(void *, int64_t, const char *, const char *), void *arg)
{
	struct sqldb_stmt	*st;
	struct rule_error	 err;
	struct rule		*r;
	const char		*text;
	int64_t			 id;
	int			 rc, nbad = 0;

	if ((st = stmt(db, S_RULE_LOAD)) == NULL)
		return -1;
	sqldb_bind_int64(st, 1, operator_tier ? 1 : 0);
	policy_clear(p);
	while ((rc = sqldb_step(st)) == SQLDB_ROW) {
		id = sqldb_column_int64(st, 0);
		text = sqldb_column_text(st, 1);
		if (text == NULL || (r = rule_parse(text, &err)) == NULL) {
			if (text == NULL)
				snprintf(err.msg, sizeof(err.msg), "no text");
			if (bad != NULL)
				bad(arg, id, text ? text : "", err.msg);
			log_warnx("rule %lld does not parse (%s): it counts "
			    "as \"ask\"", (long long)id, err.msg);
			r = rule_parse("ask", &err);
			nbad++;
		}
		if (policy_append(p, id, r) == -1)
			rule_free(r);
	}
	sqldb_reset(st);
	if (rc != SQLDB_DONE)
		return db_fail(db, "rules load");
	return nbad;
}

/* ------------------------------------------------------------------ */
/* Approvals                                                            */

int64_t
db_approval_add(struct db *db, const struct db_approval *a)
{
	struct sqldb_stmt *st;
	int64_t		 id = -1;
	int		 nested;

	if ((unsigned)a->scope >= nitems(scope_names))
		return -1;
	if (tx_begin(db, &nested) == -1)
		return -1;
	if ((st = stmt(db, S_APPR_SUPERSEDE)) == NULL)
		goto done;
	sqldb_bind_int64(st, 1, a->device_id);
	bind_text(st, 2, a->to_host);
	sqldb_bind_int64(st, 3, a->created_at);
	bind_text(st, 4, a->actor_name);
	if (step_done(db, st, "approval supersede") == -1)
		goto done;
	if ((st = stmt(db, S_APPR_INSERT)) == NULL)
		goto done;
	sqldb_bind_int64(st, 1, a->device_id);
	bind_id(st, 2, a->presence_id);
	bind_text(st, 3, a->deny ? "deny" : "allow");
	bind_text(st, 4, scope_names[a->scope]);
	bind_text(st, 5, a->to_host[0] ? a->to_host : NULL);
	sqldb_bind_int64(st, 6, a->created_at);
	if (a->scope == SCOPE_FOR || a->scope == SCOPE_UNTIL)
		sqldb_bind_int64(st, 7, a->expires_at);
	else
		sqldb_bind_null(st, 7);
	if (a->actor_uid >= 0)
		sqldb_bind_int64(st, 8, a->actor_uid);
	else
		sqldb_bind_null(st, 8);
	bind_text(st, 9, a->actor_name);
	bind_text(st, 10, a->reason[0] ? a->reason : NULL);
	bind_id(st, 11, a->rule_id);
	sqldb_bind_int64(st, 12, a->override ? 1 : 0);
	id = step_id(db, st, "approval insert");
done:
	if (tx_end(db, nested, id != -1) == -1)
		return -1;
	return id;
}

int
db_approval_end(struct db *db, int64_t approval_id, const char *reason,
    const char *by, int64_t now)
{
	struct sqldb_stmt *st;

	if ((st = stmt(db, S_APPR_END)) == NULL)
		return -1;
	sqldb_bind_int64(st, 1, approval_id);
	sqldb_bind_int64(st, 2, now);
	bind_text(st, 3, reason);
	bind_text(st, 4, by);
	return step_done(db, st, "approval end");
}

int
db_approvals_end_device(struct db *db, int64_t device_id, const char *reason,
    const char *by, int64_t now)
{
	struct sqldb_stmt *st;

	if ((st = stmt(db, S_APPR_END_DEV)) == NULL)
		return -1;
	sqldb_bind_int64(st, 1, device_id);
	sqldb_bind_int64(st, 2, now);
	bind_text(st, 3, reason);
	bind_text(st, 4, by);
	return step_done(db, st, "approvals end");
}

/* One approvals row, selected as S_APPR_ACTIVE/S_APPR_LIST select it. */
static void
approval_row(struct sqldb_stmt *st, struct db_approval *a)
{
	char	scope[16], decision[8];
	size_t	i;

	memset(a, 0, sizeof(*a));
	a->id = sqldb_column_int64(st, 0);
	a->device_id = sqldb_column_int64(st, 1);
	a->presence_id = sqldb_column_int64(st, 2);
	col_text(st, 3, decision, sizeof(decision));
	a->deny = strcmp(decision, "deny") == 0;
	col_text(st, 4, scope, sizeof(scope));
	for (i = 0; i < nitems(scope_names); i++)
		if (strcmp(scope, scope_names[i]) == 0)
			a->scope = (enum approve_scope)i;
	col_text(st, 5, a->to_host, sizeof(a->to_host));
	a->created_at = sqldb_column_int64(st, 6);
	a->expires_at = sqldb_column_int64(st, 7);
	a->actor_uid = sqldb_column_is_null(st, 8) ? -1 :
	    sqldb_column_int64(st, 8);
	col_text(st, 9, a->actor_name, sizeof(a->actor_name));
	col_text(st, 10, a->reason, sizeof(a->reason));
	a->rule_id = sqldb_column_int64(st, 11);
	a->override = sqldb_column_int64(st, 12) != 0;
}

int
db_approval_active(struct db *db, int64_t device_id, int64_t presence_id,
    const char *host_name, const char *host_addr, int64_t now,
    struct db_approval *a)
{
	struct sqldb_stmt *st;
	int		 rc;

	if ((st = stmt(db, S_APPR_ACTIVE)) == NULL)
		return -1;
	sqldb_bind_int64(st, 1, device_id);
	sqldb_bind_int64(st, 2, presence_id);
	sqldb_bind_int64(st, 3, now);
	bind_text(st, 4, host_name);
	bind_text(st, 5, host_addr);
	rc = sqldb_step(st);
	if (rc != SQLDB_ROW) {
		sqldb_reset(st);
		return rc == SQLDB_DONE ? 0 : db_fail(db, "approval active");
	}
	approval_row(st, a);
	sqldb_reset(st);
	return 1;
}

int
db_approvals_list(struct db *db, int64_t device_id, int64_t presence_id,
    int64_t now, int (*cb)(void *, const struct db_approval *), void *arg)
{
	struct db_approval	 a;
	struct sqldb_stmt	*st;
	int			 rc, n = 0;

	if ((st = stmt(db, S_APPR_LIST)) == NULL)
		return -1;
	sqldb_bind_int64(st, 1, device_id);
	sqldb_bind_int64(st, 2, presence_id);
	sqldb_bind_int64(st, 3, now);
	while ((rc = sqldb_step(st)) == SQLDB_ROW) {
		approval_row(st, &a);
		n++;
		if (cb(arg, &a) != 0) {
			rc = SQLDB_DONE;
			break;
		}
	}
	sqldb_reset(st);
	return rc == SQLDB_DONE ? n : db_fail(db, "approvals list");
}

int
db_approval_next_expiry(struct db *db, int64_t *when, int64_t *approval_id)
{
	struct sqldb_stmt *st;
	int		 rc;

	if ((st = stmt(db, S_APPR_NEXT)) == NULL)
		return -1;
	rc = sqldb_step(st);
	if (rc == SQLDB_ROW) {
		if (approval_id != NULL)
			*approval_id = sqldb_column_int64(st, 0);
		*when = sqldb_column_int64(st, 1);
	}
	sqldb_reset(st);
	if (rc == SQLDB_ROW)
		return 1;
	return rc == SQLDB_DONE ? 0 : db_fail(db, "next expiry");
}

int
db_approvals_due(struct db *db, int64_t now, int64_t *ids, size_t max)
{
	struct sqldb_stmt *st;
	int		 rc, n = 0;

	if ((st = stmt(db, S_APPR_DUE)) == NULL)
		return -1;
	sqldb_bind_int64(st, 1, now);
	sqldb_bind_int64(st, 2, (int64_t)(max > INT32_MAX ? INT32_MAX : max));
	while ((rc = sqldb_step(st)) == SQLDB_ROW && (size_t)n < max)
		ids[n++] = sqldb_column_int64(st, 0);
	sqldb_reset(st);
	if (rc != SQLDB_ROW && rc != SQLDB_DONE)
		return db_fail(db, "approvals due");
	return n;
}

/* ------------------------------------------------------------------ */
/* Attachments, access requests, settings                               */

int64_t
db_attachment_begin(struct db *db, int64_t device_id, int64_t presence_id,
    int64_t approval_id, int64_t rule_id, const char *mode,
    const char *host_name, const char *host_addr, const struct db_legs *legs,
    int64_t now)
{
	struct sqldb_stmt *st;

	if ((st = stmt(db, S_ATT_INSERT)) == NULL)
		return -1;
	sqldb_bind_int64(st, 1, device_id);
	bind_id(st, 2, presence_id);
	bind_id(st, 3, approval_id);
	bind_id(st, 4, rule_id);
	bind_text(st, 5, mode);
	bind_text(st, 6, host_name);
	bind_text(st, 7, host_addr);
	sqldb_bind_int64(st, 8, now);
	bind_text(st, 9, legs->transport);
	bind_text(st, 10, legs->host_cert);
	bind_text(st, 11, legs->up_transport);
	bind_text(st, 12, legs->up_cert);
	return step_id(db, st, "attachment insert");
}

static void
bind_counters(struct sqldb_stmt *st, const struct db_counters *c)
{
	bind_u64(st, 2, c->bytes_to_device);
	bind_u64(st, 3, c->bytes_from_device);
	bind_u64(st, 4, c->urbs_to_device);
	bind_u64(st, 5, c->urbs_from_device);
	bind_u64(st, 6, c->iface_refused);
}

int
db_attachment_counters(struct db *db, int64_t id, const struct db_counters *c)
{
	struct sqldb_stmt *st;

	if ((st = stmt(db, S_ATT_COUNTERS)) == NULL)
		return -1;
	sqldb_bind_int64(st, 1, id);
	bind_counters(st, c);
	return step_done(db, st, "attachment counters") == -1 ? -1 : 0;
}

int
db_attachment_end(struct db *db, int64_t id, const struct db_counters *c,
    const char *reason, int64_t now)
{
	struct sqldb_stmt *st;

	if ((st = stmt(db, S_ATT_END)) == NULL)
		return -1;
	sqldb_bind_int64(st, 1, id);
	bind_counters(st, c);
	sqldb_bind_int64(st, 7, now);
	bind_text(st, 8, reason);
	return step_done(db, st, "attachment end") == -1 ? -1 : 0;
}

/* Rows of S_ATT_OPEN / S_ACC_WAITING: id, device, busid, exporter, host, mode. */
static int
open_rows(struct db *db, struct sqldb_stmt *st, const char *what,
    int (*cb)(void *, const struct db_open_row *), void *arg)
{
	struct db_open_row r;
	int rc;

	while ((rc = sqldb_step(st)) == SQLDB_ROW) {
		memset(&r, 0, sizeof(r));
		r.id = sqldb_column_int64(st, 0);
		r.device_id = sqldb_column_int64(st, 1);
		col_text(st, 2, r.busid, sizeof(r.busid));
		col_text(st, 3, r.exporter, sizeof(r.exporter));
		col_text(st, 4, r.host, sizeof(r.host));
		col_text(st, 5, r.mode, sizeof(r.mode));
		if (cb(arg, &r) != 0)
			break;
	}
	sqldb_reset(st);
	return rc == SQLDB_ROW || rc == SQLDB_DONE ? 0 : db_fail(db, "%s", what);
}

int
db_open_attachments_foreach(struct db *db, int include_local,
    int (*cb)(void *, const struct db_open_row *), void *arg)
{
	struct sqldb_stmt *st;

	if ((st = stmt(db, S_ATT_OPEN)) == NULL)
		return -1;
	sqldb_bind_int64(st, 1, include_local ? 1 : 0);
	return open_rows(db, st, "open attachments", cb, arg);
}

int
db_attachment_close(struct db *db, int64_t id, const char *reason, int64_t now)
{
	struct sqldb_stmt *st;

	if ((st = stmt(db, S_ATT_CLOSE)) == NULL)
		return -1;
	sqldb_bind_int64(st, 1, id);
	sqldb_bind_int64(st, 2, now);
	bind_text(st, 3, reason);
	return step_done(db, st, "attachment close");
}

int
db_waiting_requests_foreach(struct db *db,
    int (*cb)(void *, const struct db_open_row *), void *arg)
{
	struct sqldb_stmt *st;

	if ((st = stmt(db, S_ACC_WAITING)) == NULL)
		return -1;
	return open_rows(db, st, "waiting access requests", cb, arg);
}

int64_t
db_access_request_add(struct db *db, int64_t device_id, const char *busid,
    const char *host_name, const char *host_addr, const char *outcome,
    int64_t now)
{
	struct sqldb_stmt *st;

	if ((st = stmt(db, S_ACC_INSERT)) == NULL)
		return -1;
	bind_id(st, 1, device_id);
	bind_text(st, 2, busid);
	bind_text(st, 3, host_name);
	bind_text(st, 4, host_addr);
	sqldb_bind_int64(st, 5, now);
	bind_text(st, 6, outcome);
	return step_id(db, st, "access request");
}

int
db_access_request_decide(struct db *db, int64_t id, const char *outcome,
    const char *by, int64_t approval_id, int64_t now)
{
	struct sqldb_stmt *st;

	if ((st = stmt(db, S_ACC_DECIDE)) == NULL)
		return -1;
	sqldb_bind_int64(st, 1, id);
	bind_text(st, 2, outcome);
	sqldb_bind_int64(st, 3, now);
	bind_text(st, 4, by);
	bind_id(st, 5, approval_id);
	return step_done(db, st, "access decide");
}

int
db_setting_get(struct db *db, const char *key, char *value, size_t len)
{
	struct sqldb_stmt *st;
	int		 rc;

	if ((st = stmt(db, S_SET_GET)) == NULL)
		return -1;
	bind_text(st, 1, key);
	rc = sqldb_step(st);
	if (rc == SQLDB_ROW)
		col_text(st, 0, value, len);
	sqldb_reset(st);
	if (rc == SQLDB_ROW)
		return 1;
	return rc == SQLDB_DONE ? 0 : db_fail(db, "setting get");
}

int
db_setting_set(struct db *db, const char *key, const char *value, int64_t now)
{
	struct sqldb_stmt *st;

	if ((st = stmt(db, S_SET_PUT)) == NULL)
		return -1;
	bind_text(st, 1, key);
	bind_text(st, 2, value);
	sqldb_bind_int64(st, 3, now);
	return step_done(db, st, "setting set") == -1 ? -1 : 0;
}

/* --- agents ----------------------------------------------------------- */

int64_t
db_agent_pending(struct db *db, const char *name, const char *role,
    const char *key_fpr, const char *address, int64_t now)
{
	struct sqldb_stmt *st = stmt(db, S_AG_PENDING);
	int64_t id;

	if (st == NULL)
		return -1;
	bind_text(st, 1, name);
	bind_text(st, 2, role);
	bind_text(st, 3, key_fpr);
	bind_text(st, 4, address);
	sqldb_bind_int64(st, 5, now);
	if (step_int(db, st, &id, "agent pending") != 1)
		return -1;
	return id;
}

int
db_agent_activate(struct db *db, int64_t id, const char *fpr,
    const char *serial, int64_t not_after, const char *by, int64_t now)
{
	struct sqldb_stmt *st = stmt(db, S_AG_ACTIVATE);

	if (st == NULL)
		return -1;
	sqldb_bind_int64(st, 1, id);
	bind_text(st, 2, fpr);
	bind_text(st, 3, serial);
	sqldb_bind_int64(st, 4, not_after);
	bind_text(st, 5, by);
	sqldb_bind_int64(st, 6, now);
	return step_done(db, st, "agent activate");
}

int
db_agent_end(struct db *db, int64_t id, const char *state, const char *reason,
    int64_t now)
{
	struct sqldb_stmt *st = stmt(db, S_AG_END);

	if (st == NULL)
		return -1;
	sqldb_bind_int64(st, 1, id);
	bind_text(st, 2, state);
	bind_text(st, 3, reason);
	sqldb_bind_int64(st, 4, now);
	return step_done(db, st, "agent end");
}

int64_t
db_agent_renewed(struct db *db, const struct db_agent *old, const char *fpr,
    const char *serial, int64_t not_after, int64_t now)
{
	struct sqldb_stmt *st;
	int64_t id = -1;
	int nested;

	if (tx_begin(db, &nested) == -1)
		return -1;
	if (db_agent_end(db, old->id, "replaced", "renewed", now) != 1)
		goto out;
	if ((st = stmt(db, S_AG_RENEWED)) == NULL)
		goto out;
	bind_text(st, 1, old->name);
	bind_text(st, 2, old->role);
	bind_text(st, 3, fpr);
	bind_text(st, 4, serial);
	bind_text(st, 5, old->key_fpr);
	sqldb_bind_int64(st, 6, not_after);
	bind_text(st, 7, old->address[0] ? old->address : NULL);
	sqldb_bind_int64(st, 8, now);
	sqldb_bind_int64(st, 9, old->id);
	if (step_int(db, st, &id, "agent renewed") != 1)
		id = -1;
out:
	if (tx_end(db, nested, id > 0) == -1)
		return -1;
	return id;
}

int
db_agent_lapse_pending(struct db *db, const char *reason, int64_t now)
{
	struct sqldb_stmt *st = stmt(db, S_AG_LAPSE);

	if (st == NULL)
		return -1;
	bind_text(st, 1, reason);
	sqldb_bind_int64(st, 2, now);
	return step_done(db, st, "agents lapse");
}

static void
agent_row(struct sqldb_stmt *st, struct db_agent *a)
{
	memset(a, 0, sizeof(*a));
	a->id = sqldb_column_int64(st, 0);
	col_text(st, 1, a->name, sizeof(a->name));
	col_text(st, 2, a->role, sizeof(a->role));
	col_text(st, 3, a->state, sizeof(a->state));
	col_text(st, 4, a->fpr, sizeof(a->fpr));
	col_text(st, 5, a->serial, sizeof(a->serial));
	col_text(st, 6, a->key_fpr, sizeof(a->key_fpr));
	a->not_after = sqldb_column_int64(st, 7);
	col_text(st, 8, a->address, sizeof(a->address));
	a->created_at = sqldb_column_int64(st, 9);
	a->approved_at = sqldb_column_int64(st, 10);
	col_text(st, 11, a->approved_by, sizeof(a->approved_by));
	a->ended_at = sqldb_column_int64(st, 12);
	col_text(st, 13, a->end_reason, sizeof(a->end_reason));
}

int
db_agent_by_fpr(struct db *db, const char *fpr, struct db_agent *a)
{
	struct sqldb_stmt *st = stmt(db, S_AG_BY_FPR);
	int rc;

	if (st == NULL)
		return -1;
	bind_text(st, 1, fpr);
	rc = sqldb_step(st);
	if (rc == SQLDB_ROW)
		agent_row(st, a);
	sqldb_reset(st);
	if (rc == SQLDB_ROW)
		return 1;
	return rc == SQLDB_DONE ? 0 : db_fail(db, "agent by fingerprint");
}

int
db_agent_foreach(struct db *db, const char *active_name,
    int (*cb)(void *, const struct db_agent *), void *arg)
{
	struct sqldb_stmt *st = stmt(db, active_name != NULL ? S_AG_ACTIVE_NAME :
	    S_AG_LIST);
	struct db_agent a;
	int rc;

	if (st == NULL)
		return -1;
	if (active_name != NULL)
		bind_text(st, 1, active_name);
	while ((rc = sqldb_step(st)) == SQLDB_ROW) {
		agent_row(st, &a);
		if (cb(arg, &a) != 0) {
			rc = SQLDB_DONE;
			break;
		}
	}
	sqldb_reset(st);
	return rc == SQLDB_DONE ? 0 : db_fail(db, "agents");
}

/* --- several gateways (protocol.md 4.3) ------------------------------- */

int
db_gateway_put(struct db *db, const struct db_gateway *g)
{
	struct sqldb_stmt *st;

	if ((st = stmt(db, S_GW_PUT)) == NULL)
		return -1;
	bind_text(st, 1, g->name);
	sqldb_bind_int64(st, 2, g->started_at);
	bind_text(st, 3, g->address);
	bind_text(st, 4, g->version);
	return step_done(db, st, "gateway put") == -1 ? -1 : 0;
}

int
db_gateway_beat(struct db *db, const char *name, int64_t now)
{
	struct sqldb_stmt *st;

	if ((st = stmt(db, S_GW_BEAT)) == NULL)
		return -1;
	bind_text(st, 1, name);
	sqldb_bind_int64(st, 2, now);
	return step_done(db, st, "gateway heartbeat") == -1 ? -1 : 0;
}

int
db_gateways_list(struct db *db, int (*cb)(void *, const struct db_gateway *),
    void *arg)
{
	struct db_gateway g;
	struct sqldb_stmt *st;
	int rc, n = 0;

	if ((st = stmt(db, S_GW_LIST)) == NULL)
		return -1;
	while ((rc = sqldb_step(st)) == SQLDB_ROW) {
		col_text(st, 0, g.name, sizeof(g.name));
		g.started_at = sqldb_column_int64(st, 1);
		g.heartbeat = sqldb_column_int64(st, 2);
		col_text(st, 3, g.address, sizeof(g.address));
		col_text(st, 4, g.version, sizeof(g.version));
		n++;
		if (cb(arg, &g) != 0) {
			rc = SQLDB_DONE;
			break;
		}
	}
	sqldb_reset(st);
	return rc == SQLDB_DONE ? n : db_fail(db, "gateways list");
}

int
db_changes_max(struct db *db, int64_t *seq)
{
	struct sqldb_stmt *st;
	int rc;

	if ((st = stmt(db, S_CHG_MAX)) == NULL)
		return -1;
	if ((rc = sqldb_step(st)) == SQLDB_ROW)
		*seq = sqldb_column_int64(st, 0);
	sqldb_reset(st);
	return rc == SQLDB_ROW ? 0 : db_fail(db, "changes max");
}

int
db_changes_since(struct db *db, int64_t after, int limit,
    int (*cb)(void *, const struct db_change *), void *arg)
{
	struct db_change c;
	struct sqldb_stmt *st;
	int rc, n = 0;

	if ((st = stmt(db, S_CHG_SINCE)) == NULL)
		return -1;
	sqldb_bind_int64(st, 1, after);
	sqldb_bind_int64(st, 2, limit);
	while ((rc = sqldb_step(st)) == SQLDB_ROW) {
		c.seq = sqldb_column_int64(st, 0);
		col_text(st, 1, c.gateway, sizeof(c.gateway));
		col_text(st, 2, c.kind, sizeof(c.kind));
		col_text(st, 3, c.ref, sizeof(c.ref));
		n++;
		if (cb(arg, &c) != 0) {
			rc = SQLDB_DONE;
			break;
		}
	}
	sqldb_reset(st);
	return rc == SQLDB_DONE ? n : db_fail(db, "changes since");
}

int
db_device_present(struct db *db, const char *busid, int64_t *device_id,
    int64_t *presence_id)
{
	struct sqldb_stmt *st;
	int rc;

	if ((st = stmt(db, S_DEV_PRESENT)) == NULL)
		return -1;
	bind_text(st, 1, busid);
	if ((rc = sqldb_step(st)) == SQLDB_ROW) {
		*device_id = sqldb_column_int64(st, 0);
		*presence_id = sqldb_column_int64(st, 1);
	}
	sqldb_reset(st);
	if (rc == SQLDB_ROW)
		return 1;
	return rc == SQLDB_DONE ? 0 : db_fail(db, "device present");
}
