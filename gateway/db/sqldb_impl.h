/*
 * sqldb's back-end contract (sqldb.h for the interface).  Each back end
 * embeds struct sqldb and struct sqldb_stmt first in its own handles and
 * fills an ops table; sqldb.c dispatches and keeps what is common (the
 * name, the error buffer, transactions as SQL).
 */
#ifndef USBGW_SQLDB_IMPL_H
#define USBGW_SQLDB_IMPL_H

#include "db/sqldb.h"

struct sqldb_ops {
	const char	*begin_sql;	/* "BEGIN IMMEDIATE", "BEGIN" */
	void		 (*close)(struct sqldb *);
	int		 (*exec)(struct sqldb *, const char *);
	struct sqldb_stmt *(*prepare)(struct sqldb *, const char *);
	void		 (*finalize)(struct sqldb_stmt *);
	void		 (*reset)(struct sqldb_stmt *);
	void		 (*bind_int64)(struct sqldb_stmt *, int, int64_t);
	void		 (*bind_text)(struct sqldb_stmt *, int, const char *);
	void		 (*bind_null)(struct sqldb_stmt *, int);
	int		 (*step)(struct sqldb_stmt *);
	int		 (*column_count)(struct sqldb_stmt *);
	const char	*(*column_text)(struct sqldb_stmt *, int);
	int64_t		 (*column_int64)(struct sqldb_stmt *, int);
	int		 (*column_is_null)(struct sqldb_stmt *, int);
	int		 (*column_type)(struct sqldb_stmt *, int);
	size_t		 (*column_bytes)(struct sqldb_stmt *, int);
	double		 (*column_double)(struct sqldb_stmt *, int);
	int64_t		 (*changes)(struct sqldb *);
	int		 (*in_tx)(struct sqldb *);
	sqlite3		*(*sqlite)(struct sqldb *);
	int		 (*alive)(struct sqldb *);	/* NULL: always */
};

struct sqldb {
	const struct sqldb_ops	*ops;
	enum sqldb_kind		 kind;
	char			 name[256];	/* redacted target */
	char			 err[SQLDB_ERR_MAX];
};

struct sqldb_stmt {
	struct sqldb		*db;
	int			 readonly;
};

struct sqldb	*sqldb_sqlite_open(const char *, int, char *, size_t);
struct sqldb	*sqldb_pg_open(const char *, int, char *, size_t);
int		 sqldb_pg_set_gateway(struct sqldb *, const char *);
int		 sqldb_pg_listen(struct sqldb *, const char *);
int		 sqldb_pg_socket(struct sqldb *);
int		 sqldb_pg_notified(struct sqldb *);
/* The error message, formatted into db->err.  Returns -1. */
int		 sqldb_seterr(struct sqldb *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));
/* 1 if sql's first keyword is SELECT, WITH, PRAGMA or VALUES. */
int		 sqldb_sql_readonly(const char *sql);

#endif
