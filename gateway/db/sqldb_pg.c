/*
 * sqldb on PostgreSQL through libpq (sqldb.h): ?N rewritten to $N, each
 * statement prepared once per connection, executed on the first step in
 * text format, its PGresult then walked row by row.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <poll.h>

#include <libpq-fe.h>

#include "base/log.h"
#include "db/sqldb_impl.h"
#include "base/util.h"

/* The savepoint each statement runs under inside a transaction. */
#define STMT_SAVEPOINT	"sqldb_stmt"
/*
 * After a lost connection: a new one tried at once, then after 0.5 s,
 * 1, 2, 4 ... 10 s, each delay with +-25 % jitter (gateways that lost
 * one server do not all come back at the same instant).
 */
#define RETRY_MIN_MS	500
#define RETRY_MAX_MS	10000
/*
 * A new connection is made without blocking the caller for long: each
 * call drives libpq's asynchronous connect (PQresetStart/PQresetPoll) for
 * at most CONNECT_SLICE_MS, the rest in later calls, and gives up after
 * CONNECT_MAX_MS in all (connect_timeout's bound, which libpq does not
 * apply to an asynchronous connect).
 */
#define CONNECT_SLICE_MS	200
#define CONNECT_MAX_MS		5000

struct pg_db {
	struct sqldb	 base;
	PGconn		*conn;
	int		 flags;
	unsigned	 next_id;	/* statement names s1, s2, ... */
	unsigned	 gen;		/* connection generation (1, 2, ...) */
	int64_t		 retry_at;	/* monotonic ms: no new attempt before */
	int		 retry_ms;	/* the next delay */
	int		 connecting;	/* PQresetStart done, not finished */
	int64_t		 connect_end;	/* monotonic ms: give up then */
	int		 tx_open;	/* as last seen on the connection */
	int		 setup_ok;	/* session_setup() done on it */
	int64_t		 changes;
	char		 gateway[64];	/* usbgw.gateway, "" unset */
	char		 listen[64];	/* LISTEN on every connection, "" none */
};

struct pg_stmt {
	struct sqldb_stmt base;
	char		 name[16];
	char		*text;		/* the SQL with $N */
	unsigned	 gen;		/* prepared on this connection */
	int		 nparams;
	char		*vals[SQLDB_MAX_PARAMS];
	PGresult	*res;
	int		 executed;
	int		 row, nrows;
};

static const struct sqldb_ops pg_ops;

static struct pg_db *
PG(struct sqldb *db)
{
	return (struct pg_db *)db;
}

static struct pg_stmt *
PS(struct sqldb_stmt *st)
{
	return (struct pg_stmt *)st;
}

/* Server notices (NOTICE: relation exists, skipping) are not errors. */
static void
quiet(void *arg, const char *msg)
{
}

static int usable(struct pg_db *);

/* Whether a transaction is open, as the connection says now. */
static void
note_tx(struct pg_db *db)
{
	PGTransactionStatusType t;

	if (PQstatus(db->conn) != CONNECTION_OK)
		return;		/* keep the last known: it tells a lost tx */
	t = PQtransactionStatus(db->conn);
	db->tx_open = t == PQTRANS_INTRANS || t == PQTRANS_INERROR ||
	    t == PQTRANS_ACTIVE;
}

/*
 * One command; 0, or -1 with the server's message.  A transaction open
 * on a connection that was lost is gone: its COMMIT fails, its ROLLBACK
 * succeeds (nothing of it was committed), and nothing else runs until
 * one of them ends it: a new connection must not take the rest of a
 * transaction's statements one by one, each committed on its own.
 */
static int
pg_exec(struct sqldb *db, const char *sql)
{
	struct pg_db	*p = PG(db);
	PGresult	*r;
	int		 rc = 0;

	if (PQstatus(p->conn) != CONNECTION_OK) {
		if (p->tx_open) {
			if (strcasecmp(sql, "ROLLBACK") == 0) {
				p->tx_open = 0;
				return 0;
			}
			if (strcasecmp(sql, "COMMIT") == 0) {
				p->tx_open = 0;
				return sqldb_seterr(db, "the connection to the "
				    "server was lost: the transaction was "
				    "rolled back");
			}
			return sqldb_seterr(db, "the connection to the server "
			    "was lost inside a transaction (rolled back)");
		}
		if (usable(p) == -1)
			return -1;
	} else if (!p->setup_ok && usable(p) == -1)
		return -1;
	r = PQexec(p->conn, sql);

	switch (PQresultStatus(r)) {
	case PGRES_COMMAND_OK:
	case PGRES_TUPLES_OK:
	case PGRES_EMPTY_QUERY:
		break;
	default:
		rc = sqldb_seterr(db, "%s", r != NULL ? PQresultErrorMessage(r) :
		    PQerrorMessage(p->conn));
		break;
	}
	PQclear(r);
	note_tx(p);
	return rc;
}

/* The session's settings, on every new connection.  0 or -1. */
static int
session_setup(struct pg_db *db)
{
	char sql[384];

	/* gateway and listen are checked names ([A-Za-z0-9._-], sqldb.c) */
	PQsetNoticeProcessor(db->conn, quiet, NULL);
	snprintf(sql, sizeof(sql), "SET statement_timeout = %d; "
	    "SET client_min_messages = warning; SET TIME ZONE 'UTC'%s"
	    "%s%s%s%s%s",
	    SQLDB_PG_STATEMENT_MS, (db->flags & SQLDB_READONLY) ?
	    "; SET default_transaction_read_only = on" : "",
	    db->gateway[0] ? "; SET usbgw.gateway = '" : "", db->gateway,
	    db->gateway[0] ? "'" : "", db->listen[0] ? "; LISTEN " : "",
	    db->listen);
	/* pg_stat_activity shows whose connection it is: usbgwd/NAME[/listen] */
	if (db->gateway[0] && strlen(sql) + 100 < sizeof(sql))
		snprintf(sql + strlen(sql), sizeof(sql) - strlen(sql),
		    "; SET application_name = 'usbgwd/%s%s'", db->gateway,
		    db->listen[0] ? "/listen" : "");
	db->setup_ok = 1;	/* pg_exec below must not recurse into us */
	if (pg_exec(&db->base, sql) == -1) {
		db->setup_ok = 0;
		return -1;
	}
	return 0;
}

struct sqldb *
sqldb_pg_open(const char *uri, int flags, char *err, size_t errlen)
{
	/*
	 * Ours first, the URI last: with expand_dbname a later keyword wins,
	 * so a connect_timeout (or any other) in the URI overrides these.
	 */
	const char *const keys[] = { "connect_timeout", "tcp_user_timeout",
	    "keepalives", "keepalives_idle", "keepalives_interval",
	    "keepalives_count", "application_name", "dbname", NULL };
	const char *const vals[] = { SQLDB_PG_CONNECT_S, SQLDB_PG_TCP_USER_MS,
	    "1", "10", "5", "3", "usbgwd", uri, NULL };
	struct pg_db	*db = xcalloc(1, sizeof(*db));

	db->base.ops = &pg_ops;
	db->base.kind = SQLDB_PG;
	db->flags = flags;
	db->gen = 1;
	db->retry_ms = RETRY_MIN_MS;
	sqldb_redact(uri, db->base.name, sizeof(db->base.name));
	db->conn = PQconnectdbParams(keys, vals, 1);
	if (db->conn == NULL || PQstatus(db->conn) != CONNECTION_OK ||
	    session_setup(db) == -1) {
		if (db->base.err[0] == '\0')
			sqldb_seterr(&db->base, "%s", db->conn != NULL ?
			    PQerrorMessage(db->conn) : "out of memory");
		snprintf(err, errlen, "%s: %s", db->base.name, db->base.err);
		PQfinish(db->conn);
		free(db);
		return NULL;
	}
	return &db->base;
}

static int64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A connection attempt failed (db->err says why): wait before the next. */
static int
backoff(struct pg_db *db)
{
	int jitter = db->retry_ms / 4, delay;

	db->connecting = 0;
	delay = db->retry_ms - jitter + (int)(random() % (2 * jitter + 1));
	db->retry_at = mono_ms() + delay;
	log_warnx("database %s: connecting again failed (next attempt in "
	    "%d ms): %s", db->base.name, delay, db->base.err);
	if ((db->retry_ms *= 2) > RETRY_MAX_MS)
		db->retry_ms = RETRY_MAX_MS;
	return -1;
}

/*
 * The connection, made again if the server closed it (a restart, a
 * failover): libpq's asynchronous reset (the same parameters), driven
 * CONNECT_SLICE_MS at a time so that an unreachable server costs the
 * event loop a slice now and then, never connect_timeout at once;
 * attempts are spaced by a backoff of 0.5 s doubling to 10 s with
 * jitter.  While an attempt is under way or waiting, statements fail at
 * once ("no connection to the server").  Statements are prepared again
 * lazily (their generation).  A transaction open on the lost connection
 * is gone with it, but counts as open (sqldb_in_tx()) until the caller's
 * COMMIT (which fails) or ROLLBACK: no new connection before that
 * (pg_exec()).  A connection whose session settings did not take is set
 * up again first (no statement runs without statement_timeout).
 * 0 with a good connection, or -1 (db->err says why).
 */
static int
usable(struct pg_db *db)
{
	PostgresPollingStatusType r;
	struct pollfd pfd;
	int64_t now, slice_end;

	if (!db->connecting && PQstatus(db->conn) == CONNECTION_OK)
		return db->setup_ok ? 0 : session_setup(db);
	if (db->tx_open)
		return sqldb_seterr(&db->base, "the connection to the server "
		    "was lost inside a transaction (rolled back)");
	now = mono_ms();
	if (!db->connecting) {
		if (now < db->retry_at)
			return sqldb_seterr(&db->base, "no connection to the "
			    "server (next attempt in %lld ms)",
			    (long long)(db->retry_at - now));
		db->setup_ok = 0;
		if (!PQresetStart(db->conn)) {
			sqldb_seterr(&db->base, "%s", PQerrorMessage(db->conn));
			return backoff(db);
		}
		db->connecting = 1;
		db->connect_end = now + CONNECT_MAX_MS;
	}
	slice_end = now + CONNECT_SLICE_MS;
	for (;;) {
		r = PQresetPoll(db->conn);
		if (r == PGRES_POLLING_OK || r == PGRES_POLLING_FAILED)
			break;
		now = mono_ms();
		if (now >= db->connect_end) {
			sqldb_seterr(&db->base, "connecting timed out after "
			    "%d ms", CONNECT_MAX_MS);
			return backoff(db);
		}
		if (now >= slice_end)
			return sqldb_seterr(&db->base, "no connection to the "
			    "server (connecting)");
		pfd.fd = PQsocket(db->conn);
		pfd.events = r == PGRES_POLLING_WRITING ? POLLOUT : POLLIN;
		pfd.revents = 0;
		if (pfd.fd < 0)
			break;
		(void)poll(&pfd, 1, (int)(slice_end - now));
	}
	db->connecting = 0;
	if (PQstatus(db->conn) != CONNECTION_OK || session_setup(db) == -1) {
		if (PQstatus(db->conn) != CONNECTION_OK)
			sqldb_seterr(&db->base, "%s", PQerrorMessage(db->conn));
		return backoff(db);
	}
	db->gen++;
	db->retry_ms = RETRY_MIN_MS;
	db->retry_at = 0;
	log_info("database %s: connected again", db->base.name);
	return 0;
}

/*
 * Is the server there?  Reads what the server sent without waiting
 * (PQconsumeInput: a closed connection shows as CONNECTION_BAD at once,
 * no round trip); on a lost connection, an attempt to connect again when
 * the backoff allows.  Inside a transaction: the last known state.
 */
static int
pg_alive(struct sqldb *base)
{
	struct pg_db *db = PG(base);

	if (db->tx_open)
		return PQstatus(db->conn) == CONNECTION_OK;
	if (!db->connecting && PQstatus(db->conn) == CONNECTION_OK &&
	    PQconsumeInput(db->conn) == 1 &&
	    PQstatus(db->conn) == CONNECTION_OK)
		return 1;
	return usable(db) == 0;
}

/* Prepare on the current connection.  0 or -1. */
static int
prepare_now(struct pg_stmt *s)
{
	struct pg_db	*db = PG(s->base.db);
	PGresult	*r;

	r = PQprepare(db->conn, s->name, s->text, s->nparams, NULL);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		sqldb_seterr(&db->base, "%s", r != NULL ?
		    PQresultErrorMessage(r) : PQerrorMessage(db->conn));
		PQclear(r);
		return -1;
	}
	PQclear(r);
	s->gen = db->gen;
	return 0;
}

static void
pg_close(struct sqldb *db)
{
	PQfinish(PG(db)->conn);
	free(db);
}

/*
 * ?N -> $N outside quotes and comments.  The highest N in *nparams.
 * NULL (db->err set) for a bare '?' or N out of range.
 */
static char *
rewrite(struct sqldb *db, const char *sql, int *nparams)
{
	size_t	 len = strlen(sql);
	char	*out = xmalloc(len + 1), *o = out, q;
	const char *p = sql;
	long	 n;

	*nparams = 0;
	while (*p != '\0') {
		if (*p == '\'' || *p == '"') {
			q = *p;
			*o++ = *p++;
			while (*p != '\0' && *p != q)
				*o++ = *p++;
			if (*p != '\0')
				*o++ = *p++;
			continue;
		}
		if (p[0] == '-' && p[1] == '-') {
			while (*p != '\0' && *p != '\n')
				*o++ = *p++;
			continue;
		}
		if (*p != '?') {
			*o++ = *p++;
			continue;
		}
		if (!isdigit((unsigned char)p[1]) ||
		    (n = strtol(p + 1, (char **)&p, 10)) < 1 ||
		    n > SQLDB_MAX_PARAMS) {
			sqldb_seterr(db, "parameter at offset %zu of \"%.40s\": "
			    "expected ?1 to ?%d", (size_t)(p - sql), sql,
			    SQLDB_MAX_PARAMS);
			free(out);
			return NULL;
		}
		if (n > *nparams)
			*nparams = (int)n;
		o += sprintf(o, "$%ld", n);	/* never longer than ?N */
	}
	*o = '\0';
	return out;
}

static struct sqldb_stmt *
pg_prepare(struct sqldb *db, const char *sql)
{
	struct pg_stmt	*s;
	char		*text;
	int		 n;

	if ((text = rewrite(db, sql, &n)) == NULL || usable(PG(db)) == -1) {
		free(text);
		return NULL;
	}
	s = xcalloc(1, sizeof(*s));
	s->base.db = db;
	s->base.readonly = sqldb_sql_readonly(sql);
	s->nparams = n;
	s->text = text;
	snprintf(s->name, sizeof(s->name), "s%u", ++PG(db)->next_id);
	if (prepare_now(s) == -1) {
		free(s->text);
		free(s);
		return NULL;
	}
	return &s->base;
}

static void
pg_reset(struct sqldb_stmt *st)
{
	struct pg_stmt	*s = PS(st);
	int		 i;

	PQclear(s->res);
	s->res = NULL;
	s->executed = 0;
	s->row = s->nrows = 0;
	for (i = 0; i < SQLDB_MAX_PARAMS; i++) {
		free(s->vals[i]);
		s->vals[i] = NULL;
	}
}

static void
pg_finalize(struct sqldb_stmt *st)
{
	struct pg_db	*db = PG(st->db);
	char		 sql[32];

	pg_reset(st);
	if (PQstatus(db->conn) == CONNECTION_OK && PS(st)->gen == db->gen) {
		snprintf(sql, sizeof(sql), "DEALLOCATE %s", PS(st)->name);
		PQclear(PQexec(db->conn, sql));
	}
	free(PS(st)->text);
	free(st);
}

static void
set_param(struct sqldb_stmt *st, int i, char *v)
{
	struct pg_stmt *s = PS(st);

	if (i < 1 || i > SQLDB_MAX_PARAMS) {
		free(v);
		return;
	}
	free(s->vals[i - 1]);
	s->vals[i - 1] = v;
}

static void
pg_bind_int64(struct sqldb_stmt *st, int i, int64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%" PRId64, v);
	set_param(st, i, xstrdup(buf));
}

static void
pg_bind_text(struct sqldb_stmt *st, int i, const char *v)
{
	set_param(st, i, xstrdup(v));
}

static void
pg_bind_null(struct sqldb_stmt *st, int i)
{
	set_param(st, i, NULL);
}

/* A transaction lost with its connection counts until ROLLBACK/COMMIT. */
static int
pg_in_tx(struct sqldb *db)
{
	note_tx(PG(db));
	return PG(db)->tx_open;
}

/*
 * Run the statement.  Inside a transaction under a savepoint of its
 * own, so that a failure undoes this statement only (SQLite's rule), not
 * the whole transaction.
 */
static int
execute(struct pg_stmt *s)
{
	struct sqldb	*db = s->base.db;
	PGconn		*conn;
	int		 sp, ok;

	if (usable(PG(db)) == -1 ||
	    (s->gen != PG(db)->gen && prepare_now(s) == -1))
		return -1;
	conn = PG(db)->conn;
	if ((sp = pg_in_tx(db)) && pg_exec(db, "SAVEPOINT " STMT_SAVEPOINT) == -1)
		return -1;
	s->res = PQexecPrepared(conn, s->name, s->nparams,
	    (const char *const *)s->vals, NULL, NULL, 0);
	note_tx(PG(db));
	switch (PQresultStatus(s->res)) {
	case PGRES_TUPLES_OK:
	case PGRES_COMMAND_OK:
		ok = 1;
		break;
	default:
		ok = 0;
		sqldb_seterr(db, "%s", s->res != NULL ?
		    PQresultErrorMessage(s->res) : PQerrorMessage(conn));
		break;
	}
	if (sp) {
		if (ok)
			ok = pg_exec(db, "RELEASE SAVEPOINT " STMT_SAVEPOINT) == 0;
		else {
			char keep[SQLDB_ERR_MAX];

			memcpy(keep, db->err, sizeof(keep));
			pg_exec(db, "ROLLBACK TO SAVEPOINT " STMT_SAVEPOINT);
			pg_exec(db, "RELEASE SAVEPOINT " STMT_SAVEPOINT);
			memcpy(db->err, keep, sizeof(keep));
		}
	}
	if (!ok)
		return -1;
	PG(db)->changes = strtoll(PQcmdTuples(s->res), NULL, 10);
	s->nrows = PQresultStatus(s->res) == PGRES_TUPLES_OK ?
	    PQntuples(s->res) : 0;
	s->row = -1;
	return 0;
}

static int
pg_step(struct sqldb_stmt *st)
{
	struct pg_stmt *s = PS(st);

	if (!s->executed) {
		s->executed = 1;
		if (execute(s) == -1) {
			PQclear(s->res);
			s->res = NULL;
			s->nrows = 0;
			return SQLDB_ERROR;
		}
	}
	if (s->res == NULL)
		return SQLDB_ERROR;
	if (s->row + 1 < s->nrows) {
		s->row++;
		return SQLDB_ROW;
	}
	s->row = s->nrows;
	return SQLDB_DONE;
}

static int
pg_column_count(struct sqldb_stmt *st)
{
	return PS(st)->res != NULL ? PQnfields(PS(st)->res) : 0;
}

static int
valid(struct pg_stmt *s, int col)
{
	return s->res != NULL && s->row >= 0 && s->row < s->nrows &&
	    col >= 0 && col < PQnfields(s->res);
}

static int
pg_column_is_null(struct sqldb_stmt *st, int col)
{
	struct pg_stmt *s = PS(st);

	return !valid(s, col) || PQgetisnull(s->res, s->row, col);
}

static const char *
pg_column_text(struct sqldb_stmt *st, int col)
{
	struct pg_stmt *s = PS(st);

	if (pg_column_is_null(st, col))
		return NULL;
	return PQgetvalue(s->res, s->row, col);
}

/* Integers as SQLite reads them: booleans 1/0, text's leading number. */
static int64_t
pg_column_int64(struct sqldb_stmt *st, int col)
{
	const char *v = pg_column_text(st, col);

	if (v == NULL)
		return 0;
	if (strcmp(v, "t") == 0)
		return 1;
	if (strcmp(v, "f") == 0)
		return 0;
	return strtoll(v, NULL, 10);
}

/* Type oids of pg_type.h (catalog/pg_type_d.h is a server header). */
#define OID_BYTEA	17
#define OID_INT8	20
#define OID_INT2	21
#define OID_INT4	23
#define OID_FLOAT4	700
#define OID_FLOAT8	701
#define OID_NUMERIC	1700

static int
pg_column_type(struct sqldb_stmt *st, int col)
{
	if (pg_column_is_null(st, col))
		return SQLITE_NULL;
	switch (PQftype(PS(st)->res, col)) {
	case OID_INT2:
	case OID_INT4:
	case OID_INT8:
		return SQLITE_INTEGER;
	case OID_FLOAT4:
	case OID_FLOAT8:
	case OID_NUMERIC:
		return SQLITE_FLOAT;
	case OID_BYTEA:
		return SQLITE_BLOB;
	default:
		return SQLITE_TEXT;
	}
}

static size_t
pg_column_bytes(struct sqldb_stmt *st, int col)
{
	struct pg_stmt *s = PS(st);

	if (pg_column_is_null(st, col))
		return 0;
	return (size_t)PQgetlength(s->res, s->row, col);
}

static double
pg_column_double(struct sqldb_stmt *st, int col)
{
	const char *v = pg_column_text(st, col);

	return v != NULL ? strtod(v, NULL) : 0.0;
}

static int64_t
pg_changes(struct sqldb *db)
{
	return PG(db)->changes;
}

static sqlite3 *
pg_sqlite(struct sqldb *db)
{
	return NULL;
}

static const struct sqldb_ops pg_ops = {
	.begin_sql = "BEGIN",
	.alive = pg_alive,
	.close = pg_close,
	.exec = pg_exec,
	.prepare = pg_prepare,
	.finalize = pg_finalize,
	.reset = pg_reset,
	.bind_int64 = pg_bind_int64,
	.bind_text = pg_bind_text,
	.bind_null = pg_bind_null,
	.step = pg_step,
	.column_count = pg_column_count,
	.column_text = pg_column_text,
	.column_int64 = pg_column_int64,
	.column_is_null = pg_column_is_null,
	.column_type = pg_column_type,
	.column_bytes = pg_column_bytes,
	.column_double = pg_column_double,
	.changes = pg_changes,
	.in_tx = pg_in_tx,
	.sqlite = pg_sqlite,
};

/* sqldb_set_gateway(): on this connection and every later one. */
int
sqldb_pg_set_gateway(struct sqldb *db, const char *name)
{
	struct pg_db *p = PG(db);

	usbgw_strlcpy(p->gateway, name, sizeof(p->gateway));
	p->setup_ok = 0;	/* the next statement sets it */
	return usable(p);
}

/* sqldb_listen() */
int
sqldb_pg_listen(struct sqldb *db, const char *channel)
{
	struct pg_db *p = PG(db);

	usbgw_strlcpy(p->listen, channel, sizeof(p->listen));
	p->setup_ok = 0;
	return usable(p);
}

int
sqldb_pg_socket(struct sqldb *db)
{
	struct pg_db *p = PG(db);

	return PQstatus(p->conn) == CONNECTION_OK ? PQsocket(p->conn) : -1;
}

/* sqldb_notified() */
int
sqldb_pg_notified(struct sqldb *db)
{
	struct pg_db	*p = PG(db);
	PGnotify	*n;
	int		 count = 0;

	if (PQstatus(p->conn) != CONNECTION_OK ||
	    PQconsumeInput(p->conn) != 1 ||
	    PQstatus(p->conn) != CONNECTION_OK)
		return sqldb_seterr(db, "%s", PQerrorMessage(p->conn));
	while ((n = PQnotifies(p->conn)) != NULL) {
		count++;
		PQfreemem(n);
	}
	return count;
}
