/*
 * sqldb: the one storage interface, with two back ends.
 *
 * The gateway's state lives in one SQL database: an embedded SQLite file
 * (the default) or a PostgreSQL server shared by several gateways.  The
 * target string chooses: a libpq connection URI ("postgresql://..." or
 * "postgres://...") selects PostgreSQL (sqldb_pg.c, libpq); anything else
 * is a SQLite file path (sqldb_sqlite.c).  db.c writes every statement
 * once, in the SQL both accept, with ?N placeholders; the PostgreSQL back
 * end rewrites them to $N and prepares each statement once per
 * connection (PQprepare, named "sN").
 *
 * The model is SQLite's: prepare, bind, step (a row at a time: ROW, DONE
 * or ERROR), read columns, reset (clears the bindings too), finalize.
 * The PostgreSQL back end executes on the first step (PQexecPrepared,
 * text format) and then walks the PGresult; text results are parsed by
 * the column readers ("t"/"f" booleans read as 1/0).
 *
 * Transactions: sqldb_begin() is BEGIN IMMEDIATE on SQLite (the write
 * lock at once, no upgrade deadlock) and BEGIN on PostgreSQL; savepoints
 * nest inside.  One difference is hidden: a failed statement inside a
 * PostgreSQL transaction would abort the whole transaction, where SQLite
 * undoes that statement only.  Inside a transaction the PostgreSQL back
 * end therefore runs each statement under a savepoint of its own and
 * rolls back to it on error, so callers see SQLite's statement-level
 * atomicity on both (a batch survives one refused write).
 *
 * A lost PostgreSQL connection (a server restart, a failover) is made
 * again by the next statement or sqldb_alive() (libpq's asynchronous
 * reset, driven at most 200 ms per call, 5 s in all), attempts spaced by
 * a backoff (0.5 s doubling to 10 s, +-25 % jitter); statements are prepared again on
 * first use.  A transaction open on the lost connection counts as open
 * until the caller's COMMIT (which fails: nothing of it was committed)
 * or ROLLBACK; until then every statement fails, so that the rest of a
 * transaction never runs piecemeal on a new connection.
 *
 * Bounds (PostgreSQL): connect_timeout defaults to SQLDB_PG_CONNECT_S
 * unless the URI sets one, tcp_user_timeout and keepalives bound a dead
 * TCP peer, statement_timeout is SQLDB_PG_STATEMENT_MS on every
 * connection.  Errors carry the server's message.  The password is never
 * logged: sqldb_name() is the URI with any password removed, and that is
 * what messages name.
 *
 * No global state: every handle is independent; one handle is used from
 * one thread.
 */
#ifndef USBGW_SQLDB_H
#define USBGW_SQLDB_H

#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#define SQLDB_ERR_MAX		512
#define SQLDB_PG_CONNECT_S	"5"	/* connect_timeout when the URI has none */
#define SQLDB_PG_TCP_USER_MS	"10000"	/* tcp_user_timeout */
#define SQLDB_PG_STATEMENT_MS	10000	/* statement_timeout */
#define SQLDB_MAX_PARAMS	32	/* ?1 .. ?32 */

enum sqldb_kind {
	SQLDB_SQLITE,
	SQLDB_PG,
};

/* sqldb_step() */
enum {
	SQLDB_ERROR = -1,
	SQLDB_DONE = 0,
	SQLDB_ROW = 1,
};

/* sqldb_open() flags */
#define SQLDB_READONLY	0x1	/* SQLite: open read-only; PG: read-only sessions */

struct sqldb;
struct sqldb_stmt;

/* 1 if target is a PostgreSQL connection URI. */
int		 sqldb_is_pg(const char *target);
/*
 * The target with any password removed (user:PASSWORD@ and password=
 * in the query string), into out.  Other targets are copied.
 */
void		 sqldb_redact(const char *target, char *out, size_t len);

/*
 * Open a connection.  SQLite: the file must exist unless the caller
 * created it (db.c creates it 0600 first); PostgreSQL: connected, with
 * the session settings applied.  NULL on error with a message in err
 * naming the (redacted) target.
 */
struct sqldb	*sqldb_open(const char *target, int flags, char *err,
		    size_t errlen);
void		 sqldb_close(struct sqldb *);
enum sqldb_kind	 sqldb_kind(const struct sqldb *);
/* The target as messages may show it (no password). */
const char	*sqldb_name(const struct sqldb *);
/* The last error's message (the server's, for PostgreSQL). */
const char	*sqldb_errmsg(const struct sqldb *);
/* The SQLite handle, NULL on PostgreSQL. */
sqlite3		*sqldb_sqlite(struct sqldb *);

/* Run a script (several statements, no parameters).  0 or -1. */
int		 sqldb_exec(struct sqldb *, const char *sql);

/*
 * A statement with ?1..?N placeholders (N <= SQLDB_MAX_PARAMS).  NULL
 * on error (sqldb_errmsg).  Kept prepared until sqldb_finalize().
 */
struct sqldb_stmt *sqldb_prepare(struct sqldb *, const char *sql);
void		 sqldb_finalize(struct sqldb_stmt *);
/* 1 if the statement only reads (SELECT, WITH ... SELECT, PRAGMA). */
int		 sqldb_readonly(const struct sqldb_stmt *);
/* Ready to run again; the bindings are cleared (NULL). */
void		 sqldb_reset(struct sqldb_stmt *);
void		 sqldb_bind_int64(struct sqldb_stmt *, int i, int64_t v);
void		 sqldb_bind_text(struct sqldb_stmt *, int i, const char *s);
void		 sqldb_bind_null(struct sqldb_stmt *, int i);
/* SQLDB_ROW, SQLDB_DONE or SQLDB_ERROR. */
int		 sqldb_step(struct sqldb_stmt *);
int		 sqldb_column_count(struct sqldb_stmt *);
int64_t		 sqldb_column_int64(struct sqldb_stmt *, int col);
/* NULL for SQL NULL; valid until the next step or reset. */
const char	*sqldb_column_text(struct sqldb_stmt *, int col);
int		 sqldb_column_is_null(struct sqldb_stmt *, int col);
/*
 * The value's type as SQLite's codes: SQLITE_NULL, SQLITE_INTEGER,
 * SQLITE_FLOAT, SQLITE_TEXT, SQLITE_BLOB.  SQLite: the stored storage
 * class; PostgreSQL: from the column's type (int2/4/8 INTEGER,
 * float4/8 and numeric FLOAT, bytea BLOB, anything else TEXT).
 */
int		 sqldb_column_type(struct sqldb_stmt *, int col);
/* The text's length in bytes (0 for NULL). */
size_t		 sqldb_column_bytes(struct sqldb_stmt *, int col);
double		 sqldb_column_double(struct sqldb_stmt *, int col);
/*
 * 1 if the connection works (SQLite: always).  PostgreSQL: notices a
 * connection the server closed without a round trip, and on a lost one
 * drives the attempt to connect again (backoff as above); 0 meanwhile.
 */
int		 sqldb_alive(struct sqldb *);
/* Rows the last completed write changed. */
int64_t		 sqldb_changes(struct sqldb *);

/* 1 inside a transaction. */
int		 sqldb_in_tx(struct sqldb *);
int		 sqldb_begin(struct sqldb *);
int		 sqldb_commit(struct sqldb *);
int		 sqldb_rollback(struct sqldb *);
/* name: [a-z_]+ */
int		 sqldb_savepoint(struct sqldb *, const char *name);
int		 sqldb_release(struct sqldb *, const char *name);
int		 sqldb_rollback_to(struct sqldb *, const char *name);

/*
 * Several gateways on one PostgreSQL database (protocol.md 4.3).  A
 * name is [A-Za-z0-9._-], 1..63 bytes.
 *
 * sqldb_set_gateway: the writer's name, the session setting
 * usbgw.gateway on this connection and every new one (the change feed's
 * triggers record it).  SQLite: nothing to do, 0.
 *
 * sqldb_listen: LISTEN on channel, on this connection and every new one
 * (a lost notification is the reader's to catch up: the feed is a
 * table).  sqldb_socket: the connection's descriptor to wait on, -1
 * without a connection.  sqldb_notified: read what the server sent and
 * drop the notifications, returning how many came (0 or more), or -1 if
 * the connection is lost (a statement on it connects again).  SQLite:
 * -1 (no notifications there).
 */
int		 sqldb_set_gateway(struct sqldb *, const char *name);
int		 sqldb_listen(struct sqldb *, const char *channel);
int		 sqldb_socket(struct sqldb *);
int		 sqldb_notified(struct sqldb *);

#endif
