/*
 * The database: schema application, migration from a version-1 database
 * (the frozen fixture tests/unit/data/schema-v1.sql, and one built in
 * the test), the daemon's helpers, constraints and views.
 */
#include <sys/stat.h>

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db/audit.h"
#include "db/db.h"
#include "base/log.h"
#include "policy/policy.h"
#include "policy/rule.h"
#include "db/sqldb.h"
#include "tap.h"
#include "base/util.h"

/* An attachment's legs: the host leg as given, the exporter leg tcp. */
#define LEGS(t, c)	(&(struct db_legs){ (t), (c), "tcp", NULL })

#ifndef FIXTURE_DIR
#define FIXTURE_DIR	"tests/unit/data"
#endif

static char	dir[64];

static const char *
path(const char *name)
{
	static char buf[4][PATH_MAX];
	static int  i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", dir, name);
	return buf[i];
}

/* One integer from raw SQL (on the db's own connection, either back end). */
static long long
q1(struct db *db, const char *sql)
{
	struct sqldb_stmt	*st;
	long long		 v = -999;

	if ((st = sqldb_prepare(db_conn(db), sql)) == NULL) {
		diag("prepare %s: %s", sql, sqldb_errmsg(db_conn(db)));
		return v;
	}
	if (sqldb_step(st) == SQLDB_ROW)
		v = sqldb_column_int64(st, 0);
	sqldb_finalize(st);
	return v;
}

/* One text from raw SQL, into a static buffer. */
static const char *
qs(struct db *db, const char *sql)
{
	static char		 buf[4096];
	struct sqldb_stmt	*st;
	const char		*t;

	snprintf(buf, sizeof(buf), "(error)");
	if ((st = sqldb_prepare(db_conn(db), sql)) == NULL) {
		diag("prepare %s: %s", sql, sqldb_errmsg(db_conn(db)));
		return buf;
	}
	if (sqldb_step(st) == SQLDB_ROW) {
		t = sqldb_column_text(st, 0);
		snprintf(buf, sizeof(buf), "%s", t ? t : "(null)");
	} else
		snprintf(buf, sizeof(buf), "(no row)");
	sqldb_finalize(st);
	return buf;
}

/* Run raw SQL; returns the back end's error message or NULL. */
static const char *
raw(struct db *db, const char *sql)
{
	static char	 msg[512];

	if (sqldb_exec(db_conn(db), sql) == 0)
		return NULL;
	snprintf(msg, sizeof(msg), "%s", sqldb_errmsg(db_conn(db)));
	return msg;
}

/*
 * The PostgreSQL database of $USBGW_PG_URI (NULL: not set), emptied:
 * each test that runs on it starts from a new schema.
 */
static const char *
pg_fresh(void)
{
	const char	*uri = getenv("USBGW_PG_URI");
	struct sqldb	*c;
	char		 err[SQLDB_ERR_MAX];

	if (uri == NULL || uri[0] == '\0')
		return NULL;
	if ((c = sqldb_open(uri, 0, err, sizeof(err))) == NULL) {
		diag("%s", err);
		return uri;	/* the test's open fails and says so */
	}
	if (sqldb_exec(c, "DROP SCHEMA public CASCADE; "
	    "CREATE SCHEMA public") == -1)
		diag("emptying %s: %s", sqldb_name(c), sqldb_errmsg(c));
	sqldb_close(c);
	return uri;
}

/* The target of a test run: a SQLite file in dir, or PostgreSQL. */
static const char *
target(int pg, const char *file)
{
	return pg ? pg_fresh() : path(file);
}

/* The same target again (a reopen, a second connection): not emptied. */
static const char *
again(int pg, const char *file)
{
	return pg ? getenv("USBGW_PG_URI") : path(file);
}

static void
rm_db(const char *p)
{
	char buf[PATH_MAX];

	unlink(p);
	snprintf(buf, sizeof(buf), "%s-wal", p);
	unlink(buf);
	snprintf(buf, sizeof(buf), "%s-shm", p);
	unlink(buf);
}

/* The schema as sqlite_master shows it, for comparing databases. */
static char *
schema_dump(struct db *db)
{
	sqlite3_stmt	*st;
	size_t		 len = 0;
	char		*out = xstrdup("");

	if (sqlite3_prepare_v2(db_sqlite(db), "SELECT type || ' ' || name || "
	    "' ' || tbl_name || ' ' || IFNULL(sql, '') FROM sqlite_master "
	    "ORDER BY type, name", -1, &st, NULL) != SQLITE_OK)
		return out;
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *s = (const char *)sqlite3_column_text(st, 0);
		size_t n = strlen(s);

		out = xreallocarray(out, len + n + 2, 1);
		memcpy(out + len, s, n);
		len += n;
		out[len++] = '\n';
		out[len] = '\0';
	}
	sqlite3_finalize(st);
	return out;
}

static void
identity(struct usbgw_identity *id, const char *port, uint16_t vid,
    uint16_t pid, char hashc, const char *serial)
{
	memset(id, 0, sizeof(*id));
	usbgw_strlcpy(id->exporter, "tc17", sizeof(id->exporter));
	usbgw_strlcpy(id->exporter_busid, port, sizeof(id->exporter_busid));
	snprintf(id->busid, sizeof(id->busid), "tc17-%s", port);
	id->vid = vid;
	id->pid = pid;
	id->n_ifaces = 2;
	id->ifaces[0].cls = 0x08;
	id->ifaces[0].subcls = 0x06;
	id->ifaces[0].proto = 0x50;
	id->ifaces[1].cls = 0x03;
	id->ifaces[1].subcls = 0x01;
	id->ifaces[1].proto = 0x01;
	usbgw_strlcpy(id->manufacturer, "ACME", sizeof(id->manufacturer));
	usbgw_strlcpy(id->product, "Stick", sizeof(id->product));
	usbgw_strlcpy(id->serial, serial, sizeof(id->serial));
	memset(id->hash, hashc, USBGW_HASH_HEX);
	id->hash[USBGW_HASH_HEX] = '\0';
}

static void
test_fresh(void)
{
	struct db	*db;
	char		 err[DB_ERR_MAX];
	static const char *const objects[] = {
		"table exporters", "table rules", "table devices",
		"table interfaces", "table presences", "table approvals",
		"table attachments", "table access_requests", "table audit_log",
		"table audit_prune_guard", "table settings",
		"table audit_checkpoints",
		"view v_devices", "view v_pending", "view v_rules",
		"view v_approvals", "view v_device_history",
		"view v_access_requests", "view v_attachment_traffic",
		"view v_identity_changes", "view v_audit",
		"trigger audit_log_no_update", "trigger audit_log_no_delete",
		"trigger audit_log_append_only", "trigger rules_text_immutable",
		"trigger audit_checkpoints_no_update",
		"trigger audit_checkpoints_no_delete",
	};
	size_t		 i;
	char		 sql[256], want[128];

	is_int(db_schema_version(), 15, "schema.sql defines version 15");
	db = db_open(path("fresh.db"), err, sizeof(err));
	if (!ok(db != NULL, "open a new database"))
		diag("%s", err);
	is_int(db_version(db), db_schema_version(),
	    "migrated to the newest version");
	is_str(qs(db, "PRAGMA journal_mode"), "wal", "WAL");
	is_int(q1(db, "PRAGMA foreign_keys"), 1, "foreign keys on");
	for (i = 0; i < nitems(objects); i++) {
		const char *sp = strchr(objects[i], ' ');

		snprintf(sql, sizeof(sql), "SELECT count(*) FROM sqlite_master "
		    "WHERE type = '%.*s' AND name = '%s'",
		    (int)(sp - objects[i]), objects[i], sp + 1);
		is_int(q1(db, sql), 1, "%s exists", objects[i]);
	}
	db_close(db);

	db = db_open(path("fresh.db"), err, sizeof(err));
	ok(db != NULL && db_version(db) == db_schema_version(),
	    "reopen: nothing to migrate");
	ok(raw(db, "PRAGMA user_version = 99") == NULL, "pretend a newer schema");
	db_close(db);
	db = db_open(path("fresh.db"), err, sizeof(err));
	ok(db == NULL, "a newer database is refused");
	snprintf(want, sizeof(want), "database schema version 99 is newer "
	    "than this program's (%d)", db_schema_version());
	is_str(err, want, "with a clear message");
	db_close(db);

	db = db_open("/nonexistent-dir/x.db", err, sizeof(err));
	ok(db == NULL && strstr(err, "/nonexistent-dir/x.db") != NULL,
	    "no directory is created: %s", err);
}

/*
 * A new PostgreSQL database: the schema of schema_pg.sql at the same
 * version as schema.sql, its objects, the version checks, errors that
 * name the target without its password.
 */
static void
test_fresh_pg(void)
{
	struct db	*db;
	char		 err[DB_ERR_MAX], red[256];
	const char	*uri = pg_fresh();
	static const char *const tables[] = { "exporters", "rules", "devices",
		"interfaces", "presences", "approvals", "attachments",
		"access_requests", "audit_log", "audit_prune_guard", "settings",
		"audit_checkpoints", "agents" };
	static const char *const triggers[] = { "audit_log_no_update",
		"audit_log_no_delete", "audit_log_append_only",
		"rules_text_immutable", "audit_checkpoints_no_update",
		"audit_checkpoints_no_delete" };
	size_t		 i;
	char		 sql[256];

	is_int(db_schema_version_pg(), db_schema_version(),
	    "schema_pg.sql is at schema.sql's version");
	db = db_open(uri, err, sizeof(err));
	if (!ok(db != NULL, "open a new PostgreSQL database"))
		diag("%s", err);
	if (db == NULL)
		return;
	ok(db_is_pg(db) && db_sqlite(db) == NULL, "it is PostgreSQL, "
	    "no SQLite handle");
	is_int(db_version(db), db_schema_version(), "created at the newest "
	    "version (%d)", db_schema_version());
	for (i = 0; i < nitems(tables); i++) {
		snprintf(sql, sizeof(sql), "SELECT count(*) FROM "
		    "information_schema.tables WHERE table_schema = "
		    "current_schema() AND table_name = '%s' AND "
		    "table_type = 'BASE TABLE'", tables[i]);
		is_int(q1(db, sql), 1, "table %s exists", tables[i]);
	}
	is_int(q1(db, "SELECT count(*) FROM information_schema.views WHERE "
	    "table_schema = current_schema()"), 12, "12 views");
	for (i = 0; i < nitems(triggers); i++) {
		snprintf(sql, sizeof(sql), "SELECT count(*) FROM pg_trigger "
		    "WHERE tgname = '%s'", triggers[i]);
		is_int(q1(db, sql), 1, "trigger %s exists", triggers[i]);
	}
	{
		const char *m = raw(db, "INSERT INTO audit_log (seq, ts, event, "
		    "actor, prev_hash, hash) VALUES (5, 1, 'x', 'system', "
		    "repeat('0', 64), repeat('1', 64))");

		ok(m != NULL && strstr(m, "appended with the next seq") != NULL,
		    "audit_log: only the next seq (%s)", m ? m : "accepted");
	}
	db_close(db);

	db = db_open(uri, err, sizeof(err));
	ok(db != NULL && db_version(db) == db_schema_version(),
	    "reopen: nothing to migrate");
	ok(raw(db, "UPDATE schema_version SET version = 99") == NULL,
	    "pretend a newer schema");
	db_close(db);
	db = db_open(uri, err, sizeof(err));
	ok(db == NULL, "a newer database is refused");
	snprintf(sql, sizeof(sql), "database schema version 99 is newer than "
	    "this program's (%d)", db_schema_version());
	is_str(err, sql, "with a clear message");
	db_close(db);

	uri = pg_fresh();
	db = db_open_version(uri, 5, err, sizeof(err));
	ok(db == NULL, "no PostgreSQL database older than version 10 (its "
	    "first section)");
	is_str(err, "the PostgreSQL schema starts at version 10 (asked for 5)",
	    "says so");
	db_close(db);

	db = db_open("postgresql://alice:s3cret@/usbgw?host=/nonexistent-dir"
	    "&connect_timeout=2", err, sizeof(err));
	ok(db == NULL, "no server: refused");
	ok(strncmp(err, "postgresql://alice@/usbgw?host=/nonexistent-dir",
	    47) == 0, "the message names the target: %s", err);
	ok(strstr(err, "s3cret") == NULL, "without the password");
	sqldb_redact("postgres://bob:pw@db.example:5432/gw?password=x2&"
	    "sslmode=require", red, sizeof(red));
	is_str(red, "postgres://bob@db.example:5432/gw?sslmode=require",
	    "redact: user info and password= both");
	sqldb_redact("postgresql://u@/d?host=/tmp&password=pw", red, sizeof(red));
	is_str(red, "postgresql://u@/d?host=/tmp", "redact: password= last");
	sqldb_redact("postgresql:///d?password=pw", red, sizeof(red));
	is_str(red, "postgresql:///d", "redact: password= alone");
	sqldb_redact("postgresql://u:p@w@h/d", red, sizeof(red));
	is_str(red, "postgresql://u@h/d", "redact: an '@' in the password");
	sqldb_redact("/var/lib/usbgw/usbgw.db", red, sizeof(red));
	is_str(red, "/var/lib/usbgw/usbgw.db", "redact: a path is a path");
	sqldb_redact("postgresql://u@/d?%70assword=pw&host=/tmp", red,
	    sizeof(red));
	is_str(red, "postgresql://u@/d?host=/tmp",
	    "redact: a percent-encoded parameter name (libpq decodes it)");
	sqldb_redact("postgresql://u@/d?sslpassword=pw&PASSWORD=x", red,
	    sizeof(red));
	is_str(red, "postgresql://u@/d", "redact: sslpassword= and PASSWORD=");
	sqldb_redact("host=/tmp password=pw dbname=x", red, sizeof(red));
	ok(strstr(red, "pw dbname") == NULL && strstr(red, "password=pw") ==
	    NULL, "redact: a key=value conninfo with a password (%s)", red);
	ok(sqldb_is_pg("postgresql://x") && sqldb_is_pg("postgres://x") &&
	    !sqldb_is_pg("postgresql.db") && !sqldb_is_pg("pg://x"),
	    "which targets are PostgreSQL");
}

/* Terminate the server process behind db's connection (another one). */
static int
pg_kill_conn(struct db *db)
{
	struct sqldb	*c;
	char		 err[SQLDB_ERR_MAX], sql[96];
	long long	 pid = q1(db, "SELECT pg_backend_pid()");
	int		 rc;

	if ((c = sqldb_open(getenv("USBGW_PG_URI"), 0, err, sizeof(err))) ==
	    NULL) {
		diag("%s", err);
		return -1;
	}
	snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(%lld)", pid);
	rc = sqldb_exec(c, sql);
	sqldb_close(c);
	return rc;
}

/*
 * The server closes the connection (a restart, a failover): outside a
 * transaction the next statement connects again; inside one, nothing
 * of it is committed, its COMMIT fails, and no statement runs on a new
 * connection until the transaction is ended (else the rest of it would
 * be committed piecemeal).
 */
static void
test_pg_lost(void)
{
	struct db	*db;
	char		 err[DB_ERR_MAX];
	int64_t		 e;

	db = db_open(pg_fresh(), err, sizeof(err));
	if (!ok(db != NULL, "open (PostgreSQL)"))
		return;
	ok(db_exporter_upsert(db, "a1", "127.0.0.1", 3240, 1) > 0, "a write");
	ok(pg_kill_conn(db) == 0, "the server ends our connection");
	e = db_exporter_upsert(db, "a2", "127.0.0.1", 3240, 2);
	ok(e == -1, "the write that finds it lost fails");
	e = db_exporter_upsert(db, "a3", "127.0.0.1", 3240, 3);
	ok(e > 0, "the next one connects again and succeeds");
	ok(db_exporter_status(db, e, "up", 4) == 0, "and the statements "
	    "prepared before the loss are prepared again");

	ok(db_begin(db) == 0, "a transaction");
	ok(db_exporter_upsert(db, "t1", "127.0.0.1", 3240, 5) > 0,
	    "a write in it");
	ok(pg_kill_conn(db) == 0, "the connection is lost inside it");
	ok(db_exporter_upsert(db, "t2", "127.0.0.1", 3240, 6) == -1,
	    "the next write fails");
	ok(db_exporter_upsert(db, "t3", "127.0.0.1", 3240, 7) == -1,
	    "and so does the one after: no new connection mid-transaction");
	ok(sqldb_in_tx(db_conn(db)), "the transaction still counts as open");
	ok(db_commit(db) == -1, "its COMMIT fails");
	ok(strstr(db_errmsg(db), "lost") != NULL, "saying the connection "
	    "was lost: %s", db_errmsg(db));
	ok(!sqldb_in_tx(db_conn(db)), "then no transaction is open");
	ok(db_exporter_upsert(db, "t4", "127.0.0.1", 3240, 8) > 0,
	    "a write after it connects again");
	is_str(qs(db, "SELECT group_concat(name, ',') FROM (SELECT name FROM "
	    "exporters ORDER BY name) n"), "a1,a3,t4",
	    "nothing of the lost transaction was committed");
	db_close(db);
}

static char *
slurp(const char *p)
{
	FILE	*f = fopen(p, "r");
	char	*buf;
	long	 n;

	if (f == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = xmalloc((size_t)n + 1);
	if (fread(buf, 1, (size_t)n, f) != (size_t)n)
		n = 0;
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void
test_migrate_fixture(void)
{
	struct db		*db, *fresh;
	struct audit_verify	 v;
	sqlite3			*raw_db;
	char			 err[DB_ERR_MAX], *sql, *a, *b, *e = NULL;
	const char		*fx = getenv("USBGW_FIXTURES");
	char			 fpath[PATH_MAX + 64], exe[PATH_MAX];
	ssize_t			 n;

	/* $USBGW_FIXTURES, ./tests/unit/data, or relative to build/tests/. */
	snprintf(fpath, sizeof(fpath), "%s/schema-v1.sql",
	    fx ? fx : FIXTURE_DIR);
	if (access(fpath, R_OK) == -1 &&
	    (n = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) > 0) {
		exe[n] = '\0';
		if (strrchr(exe, '/') != NULL)
			*strrchr(exe, '/') = '\0';
		snprintf(fpath, sizeof(fpath), "%s/../../%s/schema-v1.sql", exe,
		    FIXTURE_DIR);
	}
	sql = slurp(fpath);
	if (!ok(sql != NULL, "read %s", fpath))
		return;
	ok(sqlite3_open(path("v1.db"), &raw_db) == SQLITE_OK &&
	    sqlite3_exec(raw_db, sql, NULL, NULL, &e) == SQLITE_OK,
	    "create a version-1 database from the fixture%s%s", e ? ": " : "",
	    e ? e : "");
	sqlite3_free(e);
	/* a permanent approval's rule went first in versions 1 and 2 */
	ok(sqlite3_exec(raw_db, "UPDATE rules SET position = 2 WHERE id = 1; "
	    "INSERT INTO rules VALUES (2, 1, 'allow id 1234:5678', 'allow', "
	    "'approval', NULL, NULL, 1700000001, 'alice', NULL, NULL)", NULL,
	    NULL, NULL) == SQLITE_OK, "an approval's rule at position 1");
	sqlite3_close(raw_db);
	free(sql);

	db = db_open(path("v1.db"), err, sizeof(err));
	if (!ok(db != NULL, "open the version-1 database"))
		diag("%s", err);
	if (db == NULL)
		return;
	is_int(db_version(db), db_schema_version(), "migrated 1 -> newest");
	is_str(qs(db, "SELECT group_concat(id || '@' || position, ',') FROM "
	    "(SELECT * FROM rules ORDER BY position)"), "1@1,2@2",
	    "migration 3: the operator tier moved after the admin rules");
	is_int(q1(db, "SELECT count(*) FROM pragma_table_info('approvals') "
	    "WHERE name = 'override'"), 1, "migration 3: approvals.override");
	is_int(q1(db, "SELECT count(*) FROM devices"), 2, "devices kept");
	is_int(q1(db, "SELECT count(*) FROM audit_log"), 3, "audit rows kept");
	is_int(q1(db, "SELECT count(*) FROM pragma_table_info('devices') "
	    "WHERE name = 'label'"), 1, "devices.label added");
	ok(raw(db, "UPDATE devices SET label = 'reception' WHERE id = 1") ==
	    NULL, "and usable");
	ok(db_setting_set(db, "busid.next", "7", 1) == 0, "settings table added");
	is_str(qs(db, "SELECT serial || ' ' || state || ' ' || interfaces FROM "
	    "v_devices WHERE busid = 'tc17-1-1'"), "4C530001 authorized 08:06:50",
	    "v_devices on migrated data");
	is_str(qs(db, "SELECT decided_by || ' ' || scope || ' ' || reason || ' ' "
	    "|| status FROM v_approvals"), "alice for backup expired",
	    "v_approvals on migrated data");
	is_str(qs(db, "SELECT bytes_to_device || ' ' || seconds || ' ' || "
	    "iface_refused FROM v_attachment_traffic"), "1048576 60 0",
	    "v_attachment_traffic (migration 15: an older row refused 0)");
	is_str(qs(db, "SELECT group_concat(event || ':' || actor, ',') FROM "
	    "v_device_history WHERE busid = 'tc17-1-1'"),
	    "state:system,approve:operator", "v_device_history");
	ok(audit_verify(db, 0, NULL, &v) == 0 && v.rows == 3,
	    "the migrated audit chain verifies (%s)", v.reason);

	fresh = db_open(path("fresh2.db"), err, sizeof(err));
	a = schema_dump(db);
	b = schema_dump(fresh);
	is_str(a, b, "migrated schema equals a fresh one");
	free(a);
	free(b);
	db_close(fresh);
	db_close(db);
}

static void
test_migrate_built(void)
{
	struct db		*db;
	struct usbgw_identity	 id;
	char			 err[DB_ERR_MAX];
	int64_t			 e, d;

	db = db_open_version(path("built.db"), 1, err, sizeof(err));
	ok(db != NULL && db_version(db) == 1, "build a version-1 database");
	ok(q1(db, "SELECT count(*) FROM sqlite_master WHERE name = 'settings'")
	    == 0, "version 1 has no settings table");
	e = db_exporter_upsert(db, "tc17", "127.0.0.1", 3240, 100);
	identity(&id, "1-1", 0x1234, 0x5678, 'c', "X");
	d = db_device_upsert(db, e, &id, 100, NULL);
	ok(e > 0 && d > 0, "data in version 1");
	ok(db_access_request_add(db, d, "tc17:1-1", NULL, "192.0.2.7",
	    "waiting", 100) > 0 && db_access_request_add(db, d, "tc17:1-1",
	    NULL, "192.0.2.8", "refused", 101) > 0,
	    "access requests in version 1");
	db_close(db);
	db = db_open(path("built.db"), err, sizeof(err));
	if (!ok(db != NULL && db_version(db) == db_schema_version(),
	    "reopen migrates to the newest"))
		diag("%s", err);
	is_int(q1(db, "SELECT count(*) FROM interfaces WHERE device_id = 1"), 2,
	    "data kept");
	is_int(q1(db, "SELECT count(*) FROM access_requests WHERE "
	    "(outcome = 'waiting' AND host_addr = '192.0.2.7') OR "
	    "(outcome = 'refused' AND decided_at = 101)"), 2,
	    "migration 5: the access requests kept as they were");
	is_int(db_access_request_decide(db, 1, "interrupted", "system", 0, 200),
	    1, "migration 5: outcome interrupted accepted");
	is_int(q1(db, "SELECT count(*) FROM v_access_requests WHERE "
	    "outcome = 'interrupted'"), 1, "... and shown by v_access_requests");
	is_int(q1(db, "SELECT count(*) FROM sqlite_master WHERE type = 'view'"),
	    12, "views created (v_refused_requests, v_storage_attachments, "
	    "v_agents too)");
	db_close(db);
}

static int64_t bad_id;

static void
bad_cb(void *arg, int64_t id, const char *text, const char *error)
{
	bad_id = id;
	diag("bad rule %lld \"%s\": %s", (long long)id, text, error);
}

static int
count_cb(void *arg, const struct db_exporter *e)
{
	(*(int *)arg)++;
	return 0;
}

static int
dev_cb(void *arg, const struct db_device *d)
{
	(*(int *)arg)++;
	return 0;
}

static void
test_helpers(int pg)
{
	struct db		*db;
	struct db_device	 dd;
	struct usbgw_identity	 id, id2;
	struct db_approval	 a, got;
	struct db_counters	 c;
	struct policy		*p;
	struct rule_error	 re;
	struct rule		*r;
	char			 err[DB_ERR_MAX], val[32];
	int64_t			 e, d1, d2, d3, p1, r1, r2, r3, r4, r5, ra, rd, a1, a2,
				 a3, when, aid, t, ids[8];
	int			 created, n;

	db = db_open(target(pg, "h.db"), err, sizeof(err));
	if (!ok(db != NULL, "open (%s)", pg ? "PostgreSQL" : "SQLite"))
		diag("%s", err);
	if (db == NULL)
		return;

	/* Exporters. */
	e = db_exporter_upsert(db, "tc17", "10.0.0.17", 3240, 100);
	ok(e > 0, "exporter added");
	is_int(db_exporter_upsert(db, "tc17", "10.0.0.18", 3241, 101), e,
	    "upsert keeps the id");
	is_str(qs(db, "SELECT host || ':' || port FROM exporters"),
	    "10.0.0.18:3241", "and updates the address");
	ok(db_exporter_status(db, e, "up", 150) == 0 &&
	    q1(db, "SELECT last_seen FROM exporters") == 150, "status up");
	ok(db_exporter_status(db, e, "down", 160) == 0 &&
	    q1(db, "SELECT last_seen FROM exporters") == 150,
	    "status down keeps last_seen");
	ok(db_exporter_status(db, e, "sideways", 160) == -1,
	    "an unknown status is refused by the schema");
	is_str(qs(db, "SELECT kind FROM exporters"), "usbip",
	    "migration 6: an exporter is a usbipd by default");
	is_str(qs(db, "SELECT tls FROM exporters"), "off",
	    "migration 9: TLS off by default");
	ok(db_exporter_set_kind(db, e, "agent-dialout", "required") == 0,
	    "kind set");
	is_str(qs(db, "SELECT kind FROM exporters"), "agent-dialout",
	    "kind stored");
	is_str(qs(db, "SELECT tls FROM exporters"), "required",
	    "tls stored");
	ok(db_exporter_set_kind(db, e, "teapot", "off") == -1,
	    "an unknown kind is refused by the schema");
	ok(db_exporter_set_kind(db, e, "usbip", "sometimes") == -1,
	    "an unknown tls setting is refused by the schema");
	ok(db_exporter_set_kind(db, e, "usbip", "off") == 0, "kind back");
	/* PostgreSQL's identity moves on at ON CONFLICT too: ids have gaps */
	t = db_exporter_upsert(db, "tc18", "10.0.0.19", 3240, 100);
	ok(pg ? t > e : t == e + 1, "second exporter (%lld after %lld)",
	    (long long)t, (long long)e);
	n = 0;
	db_exporter_foreach(db, count_cb, &n);
	is_int(n, 2, "two exporters listed");
	is_int(db_exporter_remove(db, "tc18", 200), 1, "remove");
	is_int(db_exporter_remove(db, "tc18", 200), 0, "remove again: none");
	n = 0;
	db_exporter_foreach(db, count_cb, &n);
	is_int(n, 1, "removed ones are not listed");
	ok(db_exporter_upsert(db, "", "h", 1, 1) == -1, "empty name refused");
	ok(db_exporter_upsert(db, "x", "h", 70000, 1) == -1, "bad port refused");

	/* Devices. */
	identity(&id, "1-1", 0x0781, 0x5567, 'a', "S1");
	d1 = db_device_upsert(db, e, &id, 1000, &created);
	ok(d1 > 0 && created == 1, "device created");
	is_str(qs(db, "SELECT state || ' ' || interfaces FROM v_devices"),
	    "probing 08:06:50 03:01:01", "in state probing, interfaces kept");
	is_int(db_device_upsert(db, e, &id, 1100, &created), d1,
	    "same identity: same row");
	is_int(created, 0, "not created");
	is_int(q1(db, "SELECT last_seen FROM devices"), 1100, "last_seen");
	ok(db_device_set_state(db, d1, DEV_PENDING, 0, 1101) == 0, "pending");
	id2 = id;
	memset(id2.hash, 'b', USBGW_HASH_HEX);
	ok(db_device_upsert(db, e, &id2, 1200, NULL) == -1,
	    "a second present device with the same busid is refused");
	ok(db_device_set_state(db, d1, DEV_GONE, 0, 1200) == 0, "old one gone");
	d2 = db_device_upsert(db, e, &id2, 1201, &created);
	ok(d2 > d1 && created, "changed descriptors: a new device row");
	ok(db_device_get(db, d2, &dd) == 1 && dd.state == DEV_PROBING &&
	    dd.ident.n_ifaces == 2 && dd.ident.ifaces[1].cls == 3 &&
	    strcmp(dd.ident.exporter, "tc17") == 0 &&
	    strcmp(dd.ident.hash, id2.hash) == 0, "device get");
	is_int(db_device_get(db, 999, &dd), 0, "device get: none");
	identity(&id, "1-2", 0x046d, 0xc31c, 'c', "");
	d3 = db_device_upsert(db, e, &id, 1300, NULL);
	n = 0;
	db_device_foreach(db, 0, dev_cb, &n);
	is_int(n, 2, "two devices present");
	n = 0;
	db_device_foreach(db, 1, dev_cb, &n);
	is_int(n, 3, "three with the gone one");
	{
		int64_t e2 = db_exporter_upsert(db, "tc19", "10.0.0.20", 3240,
		    1300);

		identity(&id, "1-1", 0x0781, 0x5567, 'a', "S9");
		snprintf(id.busid, sizeof(id.busid), "tc19-1-1");
		ok(e2 > 0 && db_device_upsert(db, e2, &id, 1300, NULL) > 0,
		    "a device of another exporter");
		n = 0;
		db_device_foreach(db, 0, dev_cb, &n);
		is_int(n, 3, "three present in all");
		n = 0;
		db_exporter_devices_foreach(db, e, 0, dev_cb, &n);
		is_int(n, 2, "the first exporter's present devices only");
		n = 0;
		db_exporter_devices_foreach(db, e, 1, dev_cb, &n);
		is_int(n, 3, "and its gone one");
		n = 0;
		db_exporter_devices_foreach(db, e2, 1, dev_cb, &n);
		is_int(n, 1, "the other exporter's one device");
		n = 0;
		db_exporter_devices_foreach(db, 0, 1, dev_cb, &n);
		is_int(n, 0, "no exporter: nothing");
		ok(db_device_set_state(db, db_device_busid_holder(db,
		    id.busid), DEV_GONE, 0, 1301) == 0, "it goes");
	}
	ok(db_device_set_state(db, 999, DEV_PENDING, 0, 1) == -1,
	    "state of a missing device");
	ok(raw(db, "INSERT INTO devices (exporter_id, exporter_busid, busid, "
	    "vid, pid, hash, state_since, first_seen, last_seen) VALUES (99, "
	    "'1', 'b', 1, 1, '" "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "aaaaaaaaaaaaaaaa', 1, 1, 1)") != NULL,
	    "foreign keys are enforced");
	is_str(qs(db, "SELECT exporter || ' ' || old_hash || ' ' || new_hash "
	    "FROM v_identity_changes"), "tc17 "
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa "
	    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
	    "v_identity_changes finds the changed device");

	/* Presences. */
	p1 = db_presence_begin(db, d2, "tc17-1-1", 1201);
	ok(p1 > 0, "presence");
	is_int(db_presence_begin(db, d2, "tc17-1-1", 1202), p1,
	    "presence begin is idempotent");
	is_int(db_presence_current(db, d2), p1, "current presence");
	is_int(db_presence_current(db, d3), 0, "no presence");

	/* Approvals. */
	memset(&a, 0, sizeof(a));
	a.device_id = d2;
	a.presence_id = p1;
	a.scope = SCOPE_ONCE;
	a.created_at = 1300;
	a.actor_uid = 1000;
	usbgw_strlcpy(a.actor_name, "alice", sizeof(a.actor_name));
	usbgw_strlcpy(a.reason, "ticket 42", sizeof(a.reason));
	a1 = db_approval_add(db, &a);
	ok(a1 > 0, "approve once");
	ok(db_approval_active(db, d2, p1, NULL, NULL, 1301, &got) == 1 &&
	    got.id == a1 && got.scope == SCOPE_ONCE && got.actor_uid == 1000 &&
	    strcmp(got.reason, "ticket 42") == 0, "active for this presence");
	is_int(db_approval_active(db, d2, p1 + 1, NULL, NULL, 1301, &got), 0,
	    "not for another presence");
	is_int(db_presence_end(db, d2, "unplugged", 1400), 1, "presence ends");
	is_int(db_presence_end(db, d2, "unplugged", 1400), 0, "only once");
	is_str(qs(db, "SELECT end_reason FROM approvals WHERE id = 1"), "gone",
	    "the once-approval ended with it");
	p1 = db_presence_begin(db, d2, "tc17-1-1", 1500);

	memset(&a, 0, sizeof(a));
	a.device_id = d2;
	a.scope = SCOPE_FOR;
	a.created_at = 1500;
	a.expires_at = 1500 + 3600;
	a.actor_uid = -1;
	usbgw_strlcpy(a.actor_name, "bob", sizeof(a.actor_name));
	a2 = db_approval_add(db, &a);
	a.scope = SCOPE_UNTIL;
	a.expires_at = 1500 + 60;
	usbgw_strlcpy(a.to_host, "VDI01", sizeof(a.to_host));
	a3 = db_approval_add(db, &a);
	ok(a2 > 0 && a3 > 0, "approve for an hour; until a time to one host");
	ok(db_approval_active(db, d2, p1, NULL, NULL, 1501, &got) == 1 &&
	    got.id == a2 && got.actor_uid == -1, "no host: the any-host one");
	ok(db_approval_active(db, d2, p1, "vdi01", "10.0.0.1", 1501, &got) == 1
	    && got.id == a3 && strcmp(got.to_host, "VDI01") == 0,
	    "host vdi01 (any case): the newest, host-specific one");
	ok(db_approval_active(db, d2, p1, "vdi01", NULL, 1561, &got) == 1 &&
	    got.id == a2, "after its expiry: the hour-long one");
	ok(db_approval_next_expiry(db, &when, &aid) == 1 && when == 1560 &&
	    aid == a3, "next expiry");
	is_int(db_approvals_due(db, 1559, ids, nitems(ids)), 0, "none due yet");
	n = db_approvals_due(db, 1560, ids, nitems(ids));
	ok(n == 1 && ids[0] == a3, "one due at 1560");
	is_int(db_approval_end(db, a3, "expired", "system", 1560), 1,
	    "end it");
	is_int(db_approval_end(db, a3, "expired", "system", 1560), 0,
	    "end again: not active");
	ok(db_approval_next_expiry(db, &when, &aid) == 1 && aid == a2,
	    "next expiry moves on");
	db_close(db);
	db = db_open(again(pg, "h.db"), err, sizeof(err));
	ok(db != NULL && db_approval_next_expiry(db, &when, &aid) == 1 &&
	    aid == a2 && when == 1500 + 3600, "the expiry survives a restart");
	n = db_approvals_due(db, 1500 + 3600, ids, nitems(ids));
	ok(n == 1 && ids[0] == a2, "and is due on time after it");
	a.scope = SCOPE_FOR;
	a.to_host[0] = '\0';
	a.expires_at = 9000;
	a.created_at = 1600;
	a.deny = 1;
	a.scope = SCOPE_UNTIL;
	ok(db_approval_add(db, &a) > 0, "a denial");
	is_str(qs(db, "SELECT end_reason FROM approvals WHERE id = 2"),
	    "superseded", "supersedes the earlier decision for any host");
	ok(db_approval_active(db, d2, p1, NULL, NULL, 1601, &got) == 1 &&
	    got.deny, "the denial applies");
	is_int(db_approvals_end_device(db, d2, "revoked", "alice", 1700), 1,
	    "revoke all of the device's decisions");
	is_int(db_approval_next_expiry(db, &when, &aid), 0, "nothing to expire");
	a.scope = SCOPE_ONCE;
	a.presence_id = 0;
	ok(db_approval_add(db, &a) == -1, "once without a presence: refused");

	/* Rules. */
	r = rule_parse("allow id 0781:*", &re);
	r1 = db_rule_add(db, 0, r, "admin", 0, NULL, "root", 10);
	rule_free(r);
	r = rule_parse("block with-interface one-of { 03:*:* }", &re);
	r2 = db_rule_add(db, 0, r, "admin", 0, "keyboards", "root", 11);
	rule_free(r);
	r = rule_parse("reject via-exporter lab*", &re);
	r3 = db_rule_add(db, 1, r, "config", 0, NULL, "root", 12);
	rule_free(r);
	r = rule_parse("ask", &re);
	r4 = db_rule_add(db, 2, r, "import", 0, NULL, "root", 13);
	rule_free(r);
	is_str(qs(db, "SELECT group_concat(rule_id, ',') FROM v_rules"),
	    "3,4,1,2", "insert positions");
	is_str(qs(db, "SELECT group_concat(position, ',') FROM v_rules"),
	    "1,2,3,4", "contiguous positions");
	is_int(db_rule_move(db, r3, 4), 1, "move first to last");
	is_str(qs(db, "SELECT group_concat(rule_id, ',') FROM v_rules"),
	    "4,1,2,3", "moved");
	is_int(db_rule_move(db, r2, 1), 1, "move third to first");
	is_str(qs(db, "SELECT group_concat(rule_id, ',') FROM v_rules"),
	    "2,4,1,3", "moved");
	is_int(db_rule_move(db, r2, 99), 1, "move past the end");
	is_str(qs(db, "SELECT group_concat(rule_id || '@' || position, ',') "
	    "FROM v_rules"), "4@1,1@2,3@3,2@4", "clamped");
	is_int(db_rule_remove(db, r1, "root", 20), 1, "remove");
	is_int(db_rule_remove(db, r1, "root", 20), 0, "remove again: none");
	is_int(db_rule_move(db, r1, 1), 0, "move a removed rule: none");
	is_str(qs(db, "SELECT group_concat(rule_id || '@' || position, ',') "
	    "FROM v_rules"), "4@1,3@2,2@3", "positions close up");
	is_str(qs(db, "SELECT removed_by || ' ' || text FROM rules WHERE id = 1"),
	    "root allow id 0781:*", "the removed rule stays, with who");
	ok(raw(db, "UPDATE rules SET text = 'allow' WHERE id = 2") != NULL,
	    "rule text is immutable");
	r = rule_parse("allow id 0781:5567 serial \"S1\"", &re);
	rd = db_rule_set_device(db, d2, 1, r, "approval", "permanent", "alice",
	    30);
	rule_free(r);
	is_str(qs(db, "SELECT group_concat(rule_id, ',') FROM v_rules"),
	    "5,4,3,2", "a device rule goes where asked (first)");
	ok(db_rule_move(db, rd, 3) == 1, "an operator moves it");
	r = rule_parse("block id 0781:5567 serial \"S1\"", &re);
	r5 = db_rule_set_device(db, d2, 0, r, "denial", NULL, "bob", 31);
	rule_free(r);
	is_str(qs(db, "SELECT group_concat(rule_id || ':' || target, ',') FROM "
	    "v_rules"), "4:ask,3:reject,6:block,2:block",
	    "a new device rule replaces the old one in its place");
	is_str(qs(db, "SELECT removed_by FROM rules WHERE id = 5"), "bob",
	    "the old one is removed");
	/* across tiers a device rule goes where its new tier puts it */
	r = rule_parse("allow id 0781:5567 serial \"S1\"", &re);
	ra = db_rule_set_device(db, d2, 1, r, "admin", "override", "root", 32);
	rule_free(r);
	is_str(qs(db, "SELECT group_concat(rule_id || ':' || target, ',') FROM "
	    "v_rules"), "7:allow,4:ask,3:reject,2:block",
	    "an admin override replaces the operator's rule, first");
	r = rule_parse("block id 0781:5567 serial \"S1\"", &re);
	r5 = db_rule_set_device(db, d2, 0, r, "denial", NULL, "bob", 33);
	rule_free(r);
	is_str(qs(db, "SELECT group_concat(rule_id || ':' || target, ',') FROM "
	    "v_rules"), "4:ask,3:reject,2:block,8:block",
	    "an operator's denial replaces the admin's rule, last (its tier)");
	ok(ra == 7 && r5 == 8, "new ids");
	p = policy_new();
	is_int(db_rules_load(db, p, 1, NULL, NULL), 0, "load the operator tier");
	is_int(policy_count(p), 1, "1 operator rule");
	{
		int64_t	 rid;
		char	*s = rule_format(policy_rule_at(p, 0, &rid));

		ok(rid == r5 && strcmp(s, "block id 0781:5567 serial \"S1\"") ==
		    0, "the denial's rule, with its id");
		free(s);
	}
	is_int(db_rules_load(db, p, 0, NULL, NULL), 0, "load the admin tier");
	is_int(policy_count(p), 3, "3 admin rules, the device rule not among them");
	{
		int64_t	 rid;
		char	*s = rule_format(policy_rule_at(p, 2, &rid));

		ok(rid == 2 && strncmp(s, "block ", 6) == 0,
		    "in order, with ids");
		free(s);
	}
	is_int(db_rule_remove(db, r4, "root", 32), 1, "remove the catch-all");
	ok(raw(db, pg ? "DROP TRIGGER rules_text_immutable ON rules; "
	    "UPDATE rules SET text = 'reject bogus' WHERE id = 3" :
	    "DROP TRIGGER rules_text_immutable; UPDATE rules SET "
	    "text = 'reject bogus' WHERE id = 3") == NULL,
	    "corrupt a stored rule behind the daemon's back");
	bad_id = 0;
	is_int(db_rules_load(db, p, 0, bad_cb, NULL), 1, "one bad rule reported");
	is_int(bad_id, 3, "rule 3 is the bad one");
	{
		struct usbgw_identity	 x;
		struct policy_decision	 pd;

		identity(&x, "9-9", 0x1111, 0x2222, 'e', "");
		usbgw_strlcpy(x.exporter, "lab1", sizeof(x.exporter));
		policy_evaluate(p, &x, NULL, 0, &pd);
		ok(pd.target == RULE_ASK && pd.rule_id == 3,
		    "the bad rule counts as ask (fail safe, not reject/allow)");
	}
	policy_free(p);

	/* Attachments. */
	t = db_attachment_begin(db, d2, p1, a2, 0, "proxy", "vdi01",
	    "10.1.0.1", &(struct db_legs){ "tls", "vdi01", "tls", "tc17" },
	    2000);
	ok(t > 0, "attachment");
	is_str(qs(db, "SELECT transport || ' ' || host_cert FROM attachments "
	    "WHERE ended_at IS NULL"), "tls vdi01",
	    "its transport and certificate name");
	is_str(qs(db, "SELECT up_transport || ' ' || up_cert FROM attachments "
	    "WHERE ended_at IS NULL"), "tls tc17",
	    "its exporter leg's transport and certificate name");
	ok(db_attachment_begin(db, d2, p1, a2, 0, "proxy", "vdi02", "10.1.0.2",
	    LEGS("tcp", NULL), 2001) == -1, "one open attachment per device");
	c.bytes_to_device = 1000;
	c.bytes_from_device = 2000;
	c.urbs_to_device = 10;
	c.urbs_from_device = 20;
	c.iface_refused = 3;
	ok(db_attachment_counters(db, t, &c) == 0, "counters");
	is_str(qs(db, "SELECT urbs_to_device || ' ' || iface_refused FROM "
	    "attachments WHERE ended_at IS NULL"), "10 3",
	    "counters while it runs, its refusals too");
	c.bytes_from_device = UINT64_MAX;
	c.iface_refused = 41;
	ok(db_attachment_end(db, t, &c, "revoked", 2060) == 0, "end");
	is_str(qs(db, "SELECT bytes_to_device || ' ' || bytes_from_device || ' ' "
	    "|| urbs_from_device || ' ' || iface_refused || ' ' || seconds || "
	    "' ' || end_reason FROM v_attachment_traffic"),
	    "1000 9223372036854775807 20 41 60 revoked",
	    "traffic and refusals (counters saturate at INT64_MAX)");
	ok(db_attachment_begin(db, d2, p1, 0, 0, "carrier-pigeon", NULL, NULL,
	    LEGS("tcp", NULL), 2100) == -1, "bad mode refused");
	ok(db_attachment_begin(db, d2, p1, 0, 0, "proxy", NULL, NULL,
	    LEGS("carrier-pigeon", NULL), 2100) == -1, "bad transport refused");
	ok(db_attachment_begin(db, d2, p1, 0, 0, "proxy", NULL, NULL,
	    &(struct db_legs){ "tcp", NULL, "local", NULL }, 2100) == -1,
	    "bad exporter leg transport refused (tcp or tls only)");

	/* Access requests. */
	t = db_access_request_add(db, d3, "tc17-1-2", "vdi01", "10.1.0.1",
	    "waiting", 3000);
	ok(t > 0, "access request");
	is_int(db_access_request_decide(db, t, "granted", "alice", a2, 3010), 1,
	    "granted");
	is_int(db_access_request_decide(db, t, "denied", "bob", 0, 3011), 0,
	    "only once");
	t = db_access_request_add(db, 0, "tc99-9-9", NULL, "10.6.6.6",
	    "refused", 3100);
	is_str(qs(db, "SELECT outcome || ' ' || wait_seconds || ' ' || "
	    "COALESCE(vid, '-') FROM v_access_requests ORDER BY request_id"),
	    "granted 10 046d", "v_access_requests");
	is_str(qs(db, "SELECT outcome || ' ' || wait_seconds || ' ' || "
	    "COALESCE(CAST(device_id AS TEXT), '-') FROM v_access_requests WHERE request_id = 2"),
	    "refused 0 -", "an unknown busid");
	ok(db_access_request_add(db, d3, "b", NULL, "1", "maybe", 1) == -1,
	    "bad outcome refused");

	/* Pending view. */
	ok(db_device_set_state(db, d3, DEV_PENDING, 0, 3200) == 0, "d3 pending");
	is_str(qs(db, "SELECT busid || ' ' || vid || ':' || pid FROM v_pending"),
	    "tc17-1-2 046d:c31c", "v_pending");

	/* Settings. */
	is_int(db_setting_get(db, "k", val, sizeof(val)), 0, "unset setting");
	ok(db_setting_set(db, "k", "v1", 1) == 0 &&
	    db_setting_set(db, "k", "v2", 2) == 0, "set twice");
	ok(db_setting_get(db, "k", val, sizeof(val)) == 1 &&
	    strcmp(val, "v2") == 0, "get");

	/* Transactions group calls. */
	ok(db_begin(db) == 0, "begin");
	r = rule_parse("allow id 9999:*", &re);
	ok(db_rule_add(db, 0, r, "admin", 0, NULL, "root", 40) > 0,
	    "add inside a transaction (savepoint)");
	ok(db_rollback(db) == 0, "rollback");
	is_int(q1(db, "SELECT count(*) FROM rules WHERE text = "
	    "'allow id 9999:*'"), 0, "rolled back");
	ok(db_rule_add(db, 0, r, "bogus-origin", 0, NULL, "root", 40) == -1,
	    "bad origin refused");
	is_str(qs(db, "SELECT group_concat(rule_id || '@' || position, ',') "
	    "FROM v_rules"), "3@1,2@2,8@3", "a failed add leaves positions alone");
	rule_free(r);
	(void)r4;
	db_close(db);
}

static unsigned
mode_of(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0 ? (unsigned)(st.st_mode & 07777) : 0;
}

/*
 * A database the program creates is 0600 with its -wal and -shm,
 * whatever the umask; an existing file keeps its mode.
 */
static int batch_calls;

static void
batch_cb(void *arg)
{
	batch_calls++;
	is_int(*(int *)arg, 7, "the batch callback gets its argument");
}

/*
 * db_batch(): the first write opens one transaction for all writes until
 * db_batch_commit(); another connection sees them only after it.
 */
static void
test_batch(int pg)
{
	char err[DB_ERR_MAX];
	struct db *db, *other;
	unsigned lost = 99;
	int arg = 7, n;
	int64_t e;

	db = db_open(target(pg, "b.db"), err, sizeof(err));
	other = db_open(again(pg, "b.db"), err, sizeof(err));
	ok(db != NULL && other != NULL, "two connections");
	if (db == NULL || other == NULL)
		return;
	db_batch(db, batch_cb, &arg);
	batch_calls = 0;
	n = 0;
	db_exporter_foreach(db, count_cb, &n);
	is_int(batch_calls, 0, "a read opens no batch");
	ok(!sqldb_in_tx(db_conn(db)), "no transaction open");
	e = db_exporter_upsert(db, "b1", "127.0.0.1", 3240, 1);
	ok(e > 0, "a write");
	is_int(batch_calls, 1, "the first write opened the batch");
	ok(sqldb_in_tx(db_conn(db)), "a transaction is open");
	ok(db_exporter_upsert(db, "b2", "127.0.0.1", 3241, 1) > 0 &&
	    db_exporter_status(db, e, "up", 2) == 0, "more writes");
	is_int(batch_calls, 1, "they joined it");
	is_int(q1(db, "SELECT count(*) FROM exporters"), 2,
	    "the batch sees its own writes");
	is_int(q1(other, "SELECT count(*) FROM exporters"), 0,
	    "another connection does not, before the commit");
	/* db_begin() inside the batch: a savepoint */
	ok(db_begin(db) == 0, "db_begin inside a batch");
	ok(db_exporter_upsert(db, "b3", "127.0.0.1", 3242, 1) > 0, "a write");
	ok(db_rollback(db) == 0, "db_rollback inside a batch");
	is_int(q1(db, "SELECT count(*) FROM exporters"), 2,
	    "the rollback undid its savepoint only");
	ok(db_begin(db) == 0 && db_exporter_upsert(db, "b4", "127.0.0.1",
	    3243, 1) > 0 && db_commit(db) == 0, "a savepoint released");
	ok(sqldb_in_tx(db_conn(db)),
	    "the batch is still open after it");
	ok(db_batch_commit(db, &lost) == 0 && lost == 0, "the batch commits");
	ok(!sqldb_in_tx(db_conn(db)), "nothing open after");
	is_int(q1(other, "SELECT count(*) FROM exporters"), 3,
	    "the other connection sees the three rows");
	ok(db_batch_commit(db, &lost) == 0 && lost == 0,
	    "committing with no batch open is a no-op");
	/* a new batch; a writer on the other connection waits for it */
	ok(db_exporter_remove(db, "b4", 5) == 1, "a write after the commit");
	is_int(batch_calls, 2, "opens a new batch");
	db_close(db);
	is_int(q1(other, "SELECT count(*) FROM exporters WHERE removed_at "
	    "IS NULL"), 2, "db_close committed the open batch");
	db_close(other);
}

static void
test_modes(void)
{
	struct db	*db;
	char		 err[DB_ERR_MAX], wal[PATH_MAX], shm[PATH_MAX];
	mode_t		 old;
	int		 fd;

	old = umask(000);
	db = db_open(path("m0.db"), err, sizeof(err));
	if (!ok(db != NULL, "umask 000: open a new database"))
		diag("%s", err);
	snprintf(wal, sizeof(wal), "%s-wal", path("m0.db"));
	snprintf(shm, sizeof(shm), "%s-shm", path("m0.db"));
	is_int(mode_of(path("m0.db")), 0600, "the database file is 0600");
	is_int(mode_of(wal), 0600, "its -wal file is 0600");
	is_int(mode_of(shm), 0600, "its -shm file is 0600");
	db_close(db);

	umask(0277);
	db = db_open(path("m1.db"), err, sizeof(err));
	if (!ok(db != NULL, "umask 0277: open a new database"))
		diag("%s", err);
	is_int(mode_of(path("m1.db")), 0600, "the database file is 0600 "
	    "(writable: the umask took nothing the daemon needs)");
	db_close(db);

	umask(022);
	fd = open(path("m2.db"), O_RDWR | O_CREAT | O_EXCL, 0644);
	ok(fd != -1, "an existing empty file, 0644");
	if (fd != -1)
		close(fd);
	db = db_open(path("m2.db"), err, sizeof(err));
	ok(db != NULL, "opened (a warning says others can read it)");
	is_int(mode_of(path("m2.db")), 0644, "its mode is left as it is");
	db_close(db);
	umask(old);
}

int
main(void)
{
	log_init("test_db", 1, LOG_LVL_WARN);
	snprintf(dir, sizeof(dir), "/tmp/usbgw-test-db-XXXXXX");
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	test_fresh();
	test_migrate_fixture();
	test_migrate_built();
	test_helpers(0);
	test_modes();
	test_batch(0);
	if (getenv("USBGW_PG_URI") != NULL && getenv("USBGW_PG_URI")[0]) {
		diag("PostgreSQL: %s", getenv("USBGW_PG_URI"));
		test_fresh_pg();
		test_helpers(1);
		test_batch(1);
		test_pg_lost();
	} else
		diag("USBGW_PG_URI not set: the PostgreSQL runs are left out");
	{
		const char *const files[] = { "fresh.db", "fresh2.db", "v1.db",
		    "built.db", "h.db", "m0.db", "m1.db", "m2.db", "b.db" };
		size_t i;

		for (i = 0; i < nitems(files); i++)
			rm_db(path(files[i]));
		rmdir(dir);
	}
	return done_testing();
}
