/*
 * sqldb: the back-end choice and what both back ends share (sqldb.h).
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "db/sqldb_impl.h"
#include "base/util.h"

int
sqldb_is_pg(const char *target)
{
	return target != NULL && (strncmp(target, "postgresql://", 13) == 0 ||
	    strncmp(target, "postgres://", 11) == 0);
}

/*
 * A URI query parameter's name as libpq reads it (percent-decoded), then
 * is it a secret?  password and sslpassword, any case.
 */
static int
secret_param(const char *p, size_t n)
{
	char	 key[32];
	size_t	 k = 0, i;

	for (i = 0; i < n && k + 1 < sizeof(key); i++) {
		if (p[i] == '%' && i + 2 < n && isxdigit((unsigned char)p[i + 1]) &&
		    isxdigit((unsigned char)p[i + 2])) {
			char hex[3] = { p[i + 1], p[i + 2], '\0' };

			key[k++] = (char)strtol(hex, NULL, 16);
			i += 2;
		} else
			key[k++] = p[i];
	}
	if (i < n)
		return 0;	/* longer than any name we look for */
	key[k] = '\0';
	return strcasecmp(key, "password") == 0 ||
	    strcasecmp(key, "sslpassword") == 0;
}

/*
 * user:PASSWORD@host -> user@host, and password= / sslpassword= (their
 * names percent-encoded or not) dropped from the query string.  A target
 * that is not a URI but mentions a password (a key=value conninfo) is not
 * shown at all.  The result is for messages only.
 */
void
sqldb_redact(const char *target, char *out, size_t len)
{
	const char	*auth, *at, *colon, *slash, *query, *p, *e, *eq;
	size_t		 o = 0, n;

	if (len == 0)
		return;
	out[0] = '\0';
	if (!sqldb_is_pg(target)) {
		if (strcasestr(target, "password") != NULL)
			usbgw_strlcpy(out, "(a connection string with a password: "
			    "not shown)", len);
		else
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
	query = strchr(slash, '?');
	for (p = target; *p != '\0' && (query == NULL || p <= query) &&
	    o + 1 < len; p++) {
		if (colon != NULL && p == colon) {
			p = at - 1;	/* skip ":PASSWORD" */
			continue;
		}
		out[o++] = *p;	/* up to and with the '?' */
	}
	if (query == NULL) {
		out[o] = '\0';
		return;
	}
	/* the parameters, each kept unless it is a secret */
	for (p = query + 1; *p != '\0'; p = *e == '&' ? e + 1 : e) {
		e = p + strcspn(p, "&");
		eq = memchr(p, '=', (size_t)(e - p));
		if (secret_param(p, (size_t)((eq != NULL ? eq : e) - p)))
			continue;
		n = (size_t)(e - p);
		if (out[o - 1] != '?' && o + 1 < len)
			out[o++] = '&';
		if (o + n >= len)
			n = len - o - 1;
		memcpy(out + o, p, n);
		o += n;
	}
	if (o > 0 && out[o - 1] == '?')
		o--;
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

/* [A-Za-z0-9._-]{1,63}: safe in a SET or LISTEN without quoting. */
static int
plain_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 63)
		return 0;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "0123456789._-") == n;
}

int
sqldb_set_gateway(struct sqldb *db, const char *name)
{
	if (!plain_name(name))
		return sqldb_seterr(db, "gateway name \"%s\": expected 1-63 "
		    "of A-Z a-z 0-9 . _ -", name);
	return db->kind == SQLDB_PG ? sqldb_pg_set_gateway(db, name) : 0;
}

int
sqldb_listen(struct sqldb *db, const char *channel)
{
	if (db->kind != SQLDB_PG)
		return sqldb_seterr(db, "no notifications on SQLite");
	if (!plain_name(channel) || strchr(channel, '.') != NULL ||
	    strchr(channel, '-') != NULL)
		return sqldb_seterr(db, "channel \"%s\": expected 1-63 of "
		    "A-Z a-z 0-9 _", channel);
	return sqldb_pg_listen(db, channel);
}

int
sqldb_socket(struct sqldb *db)
{
	return db->kind == SQLDB_PG ? sqldb_pg_socket(db) : -1;
}

int
sqldb_notified(struct sqldb *db)
{
	if (db->kind != SQLDB_PG)
		return sqldb_seterr(db, "no notifications on SQLite");
	return sqldb_pg_notified(db);
}
