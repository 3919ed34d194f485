/*
 * sqldb: the back-end choice and what both back ends share (sqldb.h).
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "sqldb_impl.h"
#include "util.h"

int
sqldb_is_pg(const char *target)
{
	return target != NULL && (strncmp(target, "postgresql://", 13) == 0 ||
	    strncmp(target, "postgres://", 11) == 0);
}

/*
 * user:PASSWORD@host -> user@host, and password=X in the query string
 * dropped.  The result is for messages only.
 */
void
sqldb_redact(const char *target, char *out, size_t len)
{
	const char	*auth, *at, *colon, *slash, *p;
	size_t		 o = 0;

	if (len == 0)
		return;
	out[0] = '\0';
	if (!sqldb_is_pg(target)) {
		usbgw_strlcpy(out, target, len);
		return;
	}
	auth = strstr(target, "://") + 3;
	slash = auth + strcspn(auth, "/?");
	at = memchr(auth, '@', (size_t)(slash - auth));
	/* the last '@' before the host part ends the user info */
	for (p = auth; at != NULL && p < slash; p++)
		if (*p == '@')
			at = p;
	colon = at != NULL ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
	for (p = target; *p != '\0' && o + 1 < len; p++) {
		if (colon != NULL && p == colon) {
			p = at - 1;	/* skip ":PASSWORD" */
			continue;
		}
		if (p > slash && (p[-1] == '?' || p[-1] == '&') &&
		    strncasecmp(p, "password=", 9) == 0) {
			p += strcspn(p, "&");
			if (*p == '\0') {
				/* the last parameter: its '&' or '?' goes too */
				if (o > 0 && (out[o - 1] == '&' ||
				    out[o - 1] == '?'))
					o--;
				break;
			}
			continue;	/* drops the '&' too */
		}
		out[o++] = *p;
	}
	out[o] = '\0';
}

struct sqldb *
sqldb_open(const char *target, int flags, char *err, size_t errlen)
{
	if (errlen > 0)
		err[0] = '\0';
	if (sqldb_is_pg(target))
		return sqldb_pg_open(target, flags, err, errlen);
	return sqldb_sqlite_open(target, flags, err, errlen);
}

int
sqldb_seterr(struct sqldb *db, const char *fmt, ...)
{
	va_list	ap;
	size_t	n;

	va_start(ap, fmt);
	vsnprintf(db->err, sizeof(db->err), fmt, ap);
	va_end(ap);
	/* libpq's messages end in a newline, some have a hint line too */
	n = strlen(db->err);
	while (n > 0 && isspace((unsigned char)db->err[n - 1]))
		db->err[--n] = '\0';
	/* one log line: an inner newline or tab becomes a space */
	for (char *p = db->err; *p != '\0'; p++)
		if (*p == '\n' || *p == '\r' || *p == '\t')
			*p = ' ';
	return -1;
}

int
sqldb_sql_readonly(const char *sql)
{
	static const char *const ro[] = { "SELECT", "WITH", "PRAGMA", "VALUES" };
	size_t	i, n;

	while (isspace((unsigned char)*sql) || *sql == '(')
		sql++;
	for (i = 0; i < nitems(ro); i++) {
		n = strlen(ro[i]);
		if (strncasecmp(sql, ro[i], n) == 0 &&
		    !isalnum((unsigned char)sql[n]) && sql[n] != '_')
			return 1;
	}
	return 0;
}

void
sqldb_close(struct sqldb *db)
{
	if (db != NULL)
		db->ops->close(db);
}

enum sqldb_kind
sqldb_kind(const struct sqldb *db)
{
	return db->kind;
}

const char *
sqldb_name(const struct sqldb *db)
{
	return db->name;
}

const char *
sqldb_errmsg(const struct sqldb *db)
{
	return db->err;
}

sqlite3 *
sqldb_sqlite(struct sqldb *db)
{
	return db->ops->sqlite(db);
}

int
sqldb_exec(struct sqldb *db, const char *sql)
{
	return db->ops->exec(db, sql);
}

struct sqldb_stmt *
sqldb_prepare(struct sqldb *db, const char *sql)
{
	return db->ops->prepare(db, sql);
}

void
sqldb_finalize(struct sqldb_stmt *st)
{
	if (st != NULL)
		st->db->ops->finalize(st);
}

int
sqldb_readonly(const struct sqldb_stmt *st)
{
	return st->readonly;
}

void
sqldb_reset(struct sqldb_stmt *st)
{
	st->db->ops->reset(st);
}

void
sqldb_bind_int64(struct sqldb_stmt *st, int i, int64_t v)
{
	st->db->ops->bind_int64(st, i, v);
}

void
sqldb_bind_text(struct sqldb_stmt *st, int i, const char *s)
{
	if (s == NULL)
		st->db->ops->bind_null(st, i);
	else
		st->db->ops->bind_text(st, i, s);
}

void
sqldb_bind_null(struct sqldb_stmt *st, int i)
{
	st->db->ops->bind_null(st, i);
}

int
sqldb_step(struct sqldb_stmt *st)
{
	return st->db->ops->step(st);
}

int
sqldb_column_count(struct sqldb_stmt *st)
{
	return st->db->ops->column_count(st);
}

int64_t
sqldb_column_int64(struct sqldb_stmt *st, int col)
{
	return st->db->ops->column_int64(st, col);
}

const char *
sqldb_column_text(struct sqldb_stmt *st, int col)
{
	return st->db->ops->column_text(st, col);
}

int
sqldb_column_is_null(struct sqldb_stmt *st, int col)
{
	return st->db->ops->column_is_null(st, col);
}

int
sqldb_column_type(struct sqldb_stmt *st, int col)
{
	return st->db->ops->column_type(st, col);
}

size_t
sqldb_column_bytes(struct sqldb_stmt *st, int col)
{
	return st->db->ops->column_bytes(st, col);
}

double
sqldb_column_double(struct sqldb_stmt *st, int col)
{
	return st->db->ops->column_double(st, col);
}

int
sqldb_alive(struct sqldb *db)
{
	return db->ops->alive == NULL || db->ops->alive(db);
}

int64_t
sqldb_changes(struct sqldb *db)
{
	return db->ops->changes(db);
}

int
sqldb_in_tx(struct sqldb *db)
{
	return db->ops->in_tx(db);
}

int
sqldb_begin(struct sqldb *db)
{
	return db->ops->exec(db, db->ops->begin_sql);
}

int
sqldb_commit(struct sqldb *db)
{
	return db->ops->exec(db, "COMMIT");
}

int
sqldb_rollback(struct sqldb *db)
{
	return db->ops->exec(db, "ROLLBACK");
}

static int
savepoint_sql(struct sqldb *db, const char *verb, const char *name)
{
	char	sql[96];

	if (name[0] == '\0' || strspn(name, "abcdefghijklmnopqrstuvwxyz_") !=
	    strlen(name) || strlen(name) > 40)
		return sqldb_seterr(db, "savepoint name \"%.40s\": expected "
		    "1 to 40 of [a-z_]", name);
	snprintf(sql, sizeof(sql), "%s %s", verb, name);
	return db->ops->exec(db, sql);
}

int
sqldb_savepoint(struct sqldb *db, const char *name)
{
	return savepoint_sql(db, "SAVEPOINT", name);
}

int
sqldb_release(struct sqldb *db, const char *name)
{
	return savepoint_sql(db, "RELEASE SAVEPOINT", name);
}

int
sqldb_rollback_to(struct sqldb *db, const char *name)
{
	return savepoint_sql(db, "ROLLBACK TO SAVEPOINT", name);
}
