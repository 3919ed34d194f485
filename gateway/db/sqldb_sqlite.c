/*
 * sqldb on SQLite: a thin layer over sqlite3_stmt (sqldb.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/sqldb_impl.h"
#include "base/util.h"

#define SQLITE_BUSY_MS	2000	/* wait for a lock held by another process */

struct sl_db {
	struct sqldb	 base;
	sqlite3		*h;
};

struct sl_stmt {
	struct sqldb_stmt base;
	sqlite3_stmt	*st;
};

static const struct sqldb_ops sl_ops;

static sqlite3 *
H(struct sqldb *db)
{
	return ((struct sl_db *)db)->h;
}

static sqlite3_stmt *
ST(struct sqldb_stmt *st)
{
	return ((struct sl_stmt *)st)->st;
}

struct sqldb *
sqldb_sqlite_open(const char *path, int flags, char *err, size_t errlen)
{
	struct sl_db	*db = xcalloc(1, sizeof(*db));
	int		 rc;

	db->base.ops = &sl_ops;
	db->base.kind = SQLDB_SQLITE;
	usbgw_strlcpy(db->base.name, path, sizeof(db->base.name));
	rc = sqlite3_open_v2(path, &db->h, (flags & SQLDB_READONLY) ?
	    SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX :
	    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
	    NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", path, db->h ?
		    sqlite3_errmsg(db->h) : sqlite3_errstr(rc));
		sqlite3_close(db->h);
		free(db);
		return NULL;
	}
	sqlite3_extended_result_codes(db->h, 1);
	sqlite3_busy_timeout(db->h, SQLITE_BUSY_MS);
	return &db->base;
}

static void
sl_close(struct sqldb *db)
{
	sqlite3_close(H(db));
	free(db);
}

static int
sl_exec(struct sqldb *db, const char *sql)
{
	char	*msg = NULL;

	if (sqlite3_exec(H(db), sql, NULL, NULL, &msg) == SQLITE_OK)
		return 0;
	sqldb_seterr(db, "%s", msg != NULL ? msg : sqlite3_errmsg(H(db)));
	sqlite3_free(msg);
	return -1;
}

static struct sqldb_stmt *
sl_prepare(struct sqldb *db, const char *sql)
{
	struct sl_stmt	*s;
	sqlite3_stmt	*st;

	if (sqlite3_prepare_v3(H(db), sql, -1, SQLITE_PREPARE_PERSISTENT, &st,
	    NULL) != SQLITE_OK) {
		sqldb_seterr(db, "%s", sqlite3_errmsg(H(db)));
		return NULL;
	}
	if (st == NULL) {
		sqldb_seterr(db, "no statement in \"%.40s\"", sql);
		return NULL;
	}
	s = xcalloc(1, sizeof(*s));
	s->base.db = db;
	s->base.readonly = sqlite3_stmt_readonly(st);
	s->st = st;
	return &s->base;
}

static void
sl_finalize(struct sqldb_stmt *st)
{
	sqlite3_finalize(ST(st));
	free(st);
}

static void
sl_reset(struct sqldb_stmt *st)
{
	sqlite3_reset(ST(st));
	sqlite3_clear_bindings(ST(st));
}

static void
sl_bind_int64(struct sqldb_stmt *st, int i, int64_t v)
{
	sqlite3_bind_int64(ST(st), i, v);
}

static void
sl_bind_text(struct sqldb_stmt *st, int i, const char *s)
{
	sqlite3_bind_text(ST(st), i, s, -1, SQLITE_TRANSIENT);
}

static void
sl_bind_null(struct sqldb_stmt *st, int i)
{
	sqlite3_bind_null(ST(st), i);
}

static int
sl_step(struct sqldb_stmt *st)
{
	int rc = sqlite3_step(ST(st));

	if (rc == SQLITE_ROW)
		return SQLDB_ROW;
	if (rc == SQLITE_DONE)
		return SQLDB_DONE;
	sqldb_seterr(st->db, "%s", sqlite3_errmsg(H(st->db)));
	return SQLDB_ERROR;
}

static int
sl_column_count(struct sqldb_stmt *st)
{
	return sqlite3_column_count(ST(st));
}

static const char *
sl_column_text(struct sqldb_stmt *st, int col)
{
	return (const char *)sqlite3_column_text(ST(st), col);
}

static int64_t
sl_column_int64(struct sqldb_stmt *st, int col)
{
	return sqlite3_column_int64(ST(st), col);
}

static int
sl_column_is_null(struct sqldb_stmt *st, int col)
{
	return sqlite3_column_type(ST(st), col) == SQLITE_NULL;
}

static int
sl_column_type(struct sqldb_stmt *st, int col)
{
	return sqlite3_column_type(ST(st), col);
}

static size_t
sl_column_bytes(struct sqldb_stmt *st, int col)
{
	return (size_t)sqlite3_column_bytes(ST(st), col);
}

static double
sl_column_double(struct sqldb_stmt *st, int col)
{
	return sqlite3_column_double(ST(st), col);
}

static int64_t
sl_changes(struct sqldb *db)
{
	return sqlite3_changes64(H(db));
}

static int
sl_in_tx(struct sqldb *db)
{
	return !sqlite3_get_autocommit(H(db));
}

static sqlite3 *
sl_sqlite(struct sqldb *db)
{
	return H(db);
}

static const struct sqldb_ops sl_ops = {
	.begin_sql = "BEGIN IMMEDIATE",
	.close = sl_close,
	.exec = sl_exec,
	.prepare = sl_prepare,
	.finalize = sl_finalize,
	.reset = sl_reset,
	.bind_int64 = sl_bind_int64,
	.bind_text = sl_bind_text,
	.bind_null = sl_bind_null,
	.step = sl_step,
	.column_count = sl_column_count,
	.column_text = sl_column_text,
	.column_int64 = sl_column_int64,
	.column_is_null = sl_column_is_null,
	.column_type = sl_column_type,
	.column_bytes = sl_column_bytes,
	.column_double = sl_column_double,
	.changes = sl_changes,
	.in_tx = sl_in_tx,
	.sqlite = sl_sqlite,
};
