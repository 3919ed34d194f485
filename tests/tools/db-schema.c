/*
 * db-schema: the two schemas side by side (issue 16).  Both databases are
 * opened with db_open(), as usbgwd opens them (created and migrated).
 *
 *   db-schema dump TARGET
 *	every table and view, one line a column: "table NAME COLUMN TYPE",
 *	TYPE the coarse type: integer, text, or "-" (SQLite gives none for
 *	a view's computed column)
 *   db-schema compare SQLITE-PATH PG-URI
 *	the same objects with the same columns in the same order and the
 *	same coarse types (a view's column whose SQLite type is "-" is
 *	compared by name); prints each difference, exits 1 if any
 *   db-schema queries [-f] TARGET FILE
 *	runs every "-- name:" query of FILE (contrib/audit-queries.sql),
 *	its :parameters replaced by fixed values; "row NAME: V|V|..." for
 *	each row, then "ok NAME ROWS" or "error NAME: MESSAGE", exits 1 if
 *	any failed.  -f first writes the same rows into the new database
 *	through db.h (an exporter, devices, a rule, an approval,
 *	attachments, access requests, an agent, audit rows), so that the
 *	two back ends' answers can be compared row by row
 * TARGET: a SQLite path or a PostgreSQL URI.  Exit 2: usage or open error.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/db.h"
#include "base/log.h"
#include "policy/rule.h"
#include "db/sqldb.h"
#include "base/util.h"

#define MAXCOLS	2048

struct col {
	char	obj[64];
	char	kind[8];	/* table, view */
	char	name[64];
	char	type[8];	/* integer, text, - */
};

static const char *
coarse(const char *t)
{
	char	low[64];
	size_t	i;

	for (i = 0; t != NULL && t[i] != '\0' && i + 1 < sizeof(low); i++)
		low[i] = (char)tolower((unsigned char)t[i]);
	low[i] = '\0';
	if (low[0] == '\0')
		return "-";
	if (strstr(low, "int") != NULL)
		return "integer";
	if (strstr(low, "text") != NULL || strstr(low, "char") != NULL)
		return "text";
	return "other";
}

static struct db *
open_target(const char *target)
{
	char		 err[DB_ERR_MAX];
	struct db	*db = db_open(target, err, sizeof(err));

	if (db == NULL) {
		fprintf(stderr, "db-schema: %s\n", err);
		exit(2);
	}
	return db;
}

/* Every column of every table and view, by object name then position. */
static size_t
columns(struct db *db, struct col *out, size_t max)
{
	struct sqldb		*c = db_conn(db);
	struct sqldb_stmt	*objs, *cols;
	size_t			 n = 0;
	int			 pg = db_is_pg(db);

	objs = sqldb_prepare(c, pg ?
	    "SELECT table_name, CASE table_type WHEN 'VIEW' THEN 'view' "
	    "ELSE 'table' END FROM information_schema.tables WHERE "
	    "table_schema = current_schema() AND table_name != "
	    "'schema_version' ORDER BY table_name" :
	    "SELECT name, type FROM sqlite_master WHERE type IN ('table', "
	    "'view') AND name NOT LIKE 'sqlite_%' ORDER BY name");
	cols = sqldb_prepare(c, pg ?
	    "SELECT column_name, data_type FROM information_schema.columns "
	    "WHERE table_schema = current_schema() AND table_name = ?1 "
	    "ORDER BY ordinal_position" :
	    "SELECT name, type FROM pragma_table_info(?1) ORDER BY cid");
	if (objs == NULL || cols == NULL) {
		fprintf(stderr, "db-schema: %s\n", sqldb_errmsg(c));
		exit(2);
	}
	while (sqldb_step(objs) == SQLDB_ROW) {
		const char *obj = sqldb_column_text(objs, 0);
		const char *kind = sqldb_column_text(objs, 1);

		sqldb_reset(cols);
		sqldb_bind_text(cols, 1, obj);
		while (sqldb_step(cols) == SQLDB_ROW && n < max) {
			usbgw_strlcpy(out[n].obj, obj, sizeof(out[n].obj));
			usbgw_strlcpy(out[n].kind, kind, sizeof(out[n].kind));
			usbgw_strlcpy(out[n].name, sqldb_column_text(cols, 0),
			    sizeof(out[n].name));
			usbgw_strlcpy(out[n].type,
			    coarse(sqldb_column_text(cols, 1)),
			    sizeof(out[n].type));
			n++;
		}
	}
	sqldb_finalize(objs);
	sqldb_finalize(cols);
	return n;
}

static int
dump(const char *target)
{
	static struct col	 c[MAXCOLS];
	struct db		*db = open_target(target);
	size_t			 i, n = columns(db, c, MAXCOLS);

	for (i = 0; i < n; i++)
		printf("%s %s %s %s\n", c[i].kind, c[i].obj, c[i].name,
		    c[i].type);
	db_close(db);
	return 0;
}

static int
compare(const char *lite, const char *pg)
{
	static struct col	 a[MAXCOLS], b[MAXCOLS];
	struct db		*da = open_target(lite), *dbb = open_target(pg);
	size_t			 na = columns(da, a, MAXCOLS);
	size_t			 nb = columns(dbb, b, MAXCOLS), i;
	int			 diffs = 0;

	for (i = 0; i < na || i < nb; i++) {
		if (i >= na || i >= nb) {
			const struct col *x = i < na ? &a[i] : &b[i];

			printf("only in %s: %s %s.%s\n", i < na ? "SQLite" :
			    "PostgreSQL", x->kind, x->obj, x->name);
			diffs++;
			continue;
		}
		if (strcmp(a[i].obj, b[i].obj) != 0 ||
		    strcmp(a[i].kind, b[i].kind) != 0 ||
		    strcmp(a[i].name, b[i].name) != 0 ||
		    (strcmp(a[i].type, "-") != 0 &&
		    strcmp(a[i].type, b[i].type) != 0)) {
			printf("differ: SQLite %s %s.%s %s, PostgreSQL %s "
			    "%s.%s %s\n", a[i].kind, a[i].obj, a[i].name,
			    a[i].type, b[i].kind, b[i].obj, b[i].name,
			    b[i].type);
			diffs++;
		}
	}
	printf("%zu columns in SQLite, %zu in PostgreSQL, %d differences\n",
	    na, nb, diffs);
	db_close(da);
	db_close(dbb);
	return diffs == 0 ? 0 : 1;
}

static void
ident(struct usbgw_identity *id, const char *port, uint16_t pid, char h,
    const char *serial)
{
	memset(id, 0, sizeof(*id));
	usbgw_strlcpy(id->exporter, "tc17", sizeof(id->exporter));
	usbgw_strlcpy(id->exporter_busid, port, sizeof(id->exporter_busid));
	snprintf(id->busid, sizeof(id->busid), "tc17:%s", port);
	id->vid = 0x046d;
	id->pid = pid;
	id->n_ifaces = 2;
	id->ifaces[0].cls = 0x08;
	id->ifaces[0].subcls = 0x06;
	id->ifaces[0].proto = 0x50;
	id->ifaces[1].cls = 0x03;
	usbgw_strlcpy(id->manufacturer, "ACME", sizeof(id->manufacturer));
	usbgw_strlcpy(id->product, "Stick", sizeof(id->product));
	usbgw_strlcpy(id->serial, serial, sizeof(id->serial));
	memset(id->hash, h, USBGW_HASH_HEX);
	id->hash[USBGW_HASH_HEX] = '\0';
}

/* The same rows in either database, through db.h (times fixed, 2023). */
static int
fill(struct db *db)
{
	struct usbgw_identity	 id;
	struct db_approval	 a;
	struct db_counters	 c = { 4096, 1024, 10, 5, 3 };
	struct rule_error	 re;
	struct rule		*r;
	const int64_t		 t = 1700000000;
	int64_t			 e, d1, d2, d3, p2, ap, att;
	char			 sql[512];
	int			 i, fails = 0;
	static const char *const ev[][5] = {
		{ "state", "tc17:1-2", "authorized", "pending", "operator" },
		{ "approve", "tc17:1-2", NULL, NULL, "operator" },
		{ "import-unknown", NULL, NULL, NULL, "system" },
		{ "import-refused", "tc17:1-1", NULL, NULL, "system" },
		{ "refused", NULL, NULL, NULL, "operator" },
	};

	e = db_exporter_upsert(db, "tc17", "127.0.0.1", 3240, t);
	fails += db_exporter_status(db, e, "up", t) != 0;
	ident(&id, "1-1", 0x0001, 'a', "S1");
	d1 = db_device_upsert(db, e, &id, t, NULL);
	fails += db_device_set_state(db, d1, DEV_PENDING, 0, t + 10) != 0;
	ident(&id, "1-2", 0x0002, 'b', "S2");
	d2 = db_device_upsert(db, e, &id, t, NULL);
	p2 = db_presence_begin(db, d2, "tc17:1-2", t);
	ident(&id, "1-2", 0x0002, 'c', "S2");	/* an identity change */
	usbgw_strlcpy(id.busid, "tc17:1-3", sizeof(id.busid));
	d3 = db_device_upsert(db, e, &id, t + 50, NULL);
	fails += db_device_set_state(db, d3, DEV_BLOCKED, 0, t + 50) != 0;
	if ((r = rule_parse("block id 046d:0002 serial \"S2\"", &re)) != NULL) {
		int64_t rid = db_rule_add(db, 0, r, "admin", 0, "lab",
		    "root", t);

		fails += rid <= 0 || db_device_set_state(db, d3, DEV_BLOCKED,
		    rid, t + 51) != 0;
		rule_free(r);
	} else
		fails++;
	memset(&a, 0, sizeof(a));
	a.device_id = d2;
	a.presence_id = p2;
	a.scope = SCOPE_FOR;
	a.created_at = t + 20;
	a.expires_at = t + 3600;
	a.actor_uid = 1000;
	usbgw_strlcpy(a.actor_name, "alice", sizeof(a.actor_name));
	usbgw_strlcpy(a.reason, "backup", sizeof(a.reason));
	ap = db_approval_add(db, &a);
	fails += db_device_set_state(db, d2, DEV_ATTACHED, 0, t + 30) != 0;
	att = db_attachment_begin(db, d2, p2, ap, 0, "proxy", "host1",
	    "192.0.2.1", &(struct db_legs){ "tls", "host1", "tcp", NULL },
	    t + 30);
	fails += db_attachment_end(db, att, &c, "released", t + 90) != 0;
	att = db_attachment_begin(db, d2, p2, ap, 0, "proxy", NULL,
	    "192.0.2.2", &(struct db_legs){ "tcp", NULL, "tcp", NULL },
	    t + 100);
	fails += db_attachment_counters(db, att, &c) != 0;
	fails += db_access_request_add(db, d1, "tc17:1-1", "host1",
	    "192.0.2.1", "refused", t + 40) <= 0;
	fails += db_access_request_add(db, d1, "tc17:1-1", NULL, "192.0.2.3",
	    "waiting", t + 41) <= 0;
	fails += db_agent_pending(db, "desk-1", "agent", "ab", "192.0.2.9",
	    t) <= 0;
	for (i = 0; i < (int)nitems(ev); i++) {
		snprintf(sql, sizeof(sql), "INSERT INTO audit_log (seq, ts, "
		    "event, device_id, busid, exporter, object, old_state, "
		    "new_state, actor, actor_name, detail, prev_hash, hash) "
		    "VALUES (%d, %lld, '%s', %s, %s%s%s, 'tc17', "
		    "'host1 192.0.2.1', %s%s%s, %s%s%s, '%s', 'alice', "
		    "'tc17:9-9', '%064d', '%064d')", i + 1,
		    (long long)(t + 200 + i), ev[i][0],
		    ev[i][1] ? "2" : "NULL",
		    ev[i][1] ? "'" : "", ev[i][1] ? ev[i][1] : "NULL",
		    ev[i][1] ? "'" : "",
		    ev[i][2] ? "'" : "", ev[i][2] ? ev[i][2] : "NULL",
		    ev[i][2] ? "'" : "",
		    ev[i][3] ? "'" : "", ev[i][3] ? ev[i][3] : "NULL",
		    ev[i][3] ? "'" : "", ev[i][4], i, i + 1);
		if (sqldb_exec(db_conn(db), sql) == -1) {
			fprintf(stderr, "db-schema: fill: %s\n",
			    sqldb_errmsg(db_conn(db)));
			fails++;
		}
	}
	fails += e <= 0 || d1 <= 0 || d2 <= 0 || d3 <= 0 || p2 <= 0 ||
	    ap <= 0 || att <= 0;
	return fails;
}

/* The value a :parameter stands for in the test (same on both). */
static const char *
param(const char *name, size_t len)
{
	if (len == 5 && strncmp(name, "busid", 5) == 0)
		return "'tc17:1-1.2'";
	if (len == 6 && strncmp(name, "within", 6) == 0)
		return "3600";
	return "1700000000";	/* :since, :from, :to */
}

/* sql with every :name outside quotes replaced; malloc'd. */
static char *
substitute(const char *sql)
{
	size_t	 cap = strlen(sql) * 4 + 64, o = 0, n;
	char	*out = xmalloc(cap), q;
	const char *p = sql, *v;

	while (*p != '\0' && o + 32 < cap) {
		if (*p == '\'' || *p == '"') {
			q = *p;
			out[o++] = *p++;
			while (*p != '\0' && *p != q && o + 32 < cap)
				out[o++] = *p++;
			if (*p != '\0')
				out[o++] = *p++;
			continue;
		}
		if (*p == ':' && p[1] != ':' && (p == sql || p[-1] != ':') &&
		    (isalpha((unsigned char)p[1]) || p[1] == '_')) {
			for (n = 1; isalnum((unsigned char)p[n]) ||
			    p[n] == '_'; n++)
				;
			v = param(p + 1, n - 1);
			if (o + strlen(v) + 32 >= cap)
				break;
			memcpy(out + o, v, strlen(v));
			o += strlen(v);
			p += n;
			continue;
		}
		out[o++] = *p++;
	}
	out[o] = '\0';
	return out;
}

/* "row NAME: v1|v2|..." (NULL as \\N). */
static void
print_row(const char *name, struct sqldb_stmt *st)
{
	int i, n = sqldb_column_count(st);

	printf("row %s: ", name);
	for (i = 0; i < n; i++) {
		const char *v = sqldb_column_text(st, i);

		printf("%s%s", i ? "|" : "", v != NULL ? v : "\\N");
	}
	printf("\n");
}

static int
queries(const char *target, const char *file, int filled)
{
	FILE			*f = fopen(file, "r");
	struct db		*db;
	struct sqldb_stmt	*st;
	char			 line[1024], name[128] = "", *sql = NULL, *s;
	size_t			 len = 0;
	int			 failed = 0, nq = 0, rows, rc;

	if (f == NULL) {
		perror(file);
		return 2;
	}
	db = open_target(target);
	if (filled && fill(db) != 0) {
		fprintf(stderr, "db-schema: filling %s failed\n", target);
		return 2;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, "-- name: ", 9) == 0) {
			usbgw_strlcpy(name, line + 9, sizeof(name));
			name[strcspn(name, "\n")] = '\0';
			free(sql);
			sql = NULL;
			len = 0;
			continue;
		}
		if (name[0] == '\0' || strncmp(line, "--", 2) == 0)
			continue;
		sql = xreallocarray(sql, len + strlen(line) + 1, 1);
		memcpy(sql + len, line, strlen(line) + 1);
		len += strlen(line);
		if (strchr(line, ';') == NULL)
			continue;
		*strrchr(sql, ';') = '\0';
		s = substitute(sql);
		nq++;
		rows = 0;
		if ((st = sqldb_prepare(db_conn(db), s)) == NULL)
			rc = SQLDB_ERROR;
		else {
			while ((rc = sqldb_step(st)) == SQLDB_ROW) {
				rows++;
				print_row(name, st);
			}
		}
		if (rc == SQLDB_ERROR) {
			printf("error %s: %s\n", name,
			    sqldb_errmsg(db_conn(db)));
			failed++;
		} else
			printf("ok %s %d\n", name, rows);
		sqldb_finalize(st);
		free(s);
		free(sql);
		sql = NULL;
		len = 0;
		name[0] = '\0';
	}
	free(sql);
	fclose(f);
	db_close(db);
	printf("%d queries, %d failed\n", nq, failed);
	return failed == 0 && nq > 0 ? 0 : 1;
}

int
main(int argc, char **argv)
{
	log_init("db-schema", 1, LOG_LVL_WARN);
	if (argc == 3 && strcmp(argv[1], "dump") == 0)
		return dump(argv[2]);
	if (argc == 4 && strcmp(argv[1], "compare") == 0)
		return compare(argv[2], argv[3]);
	if (argc == 4 && strcmp(argv[1], "queries") == 0)
		return queries(argv[2], argv[3], 0);
	if (argc == 5 && strcmp(argv[1], "queries") == 0 &&
	    strcmp(argv[2], "-f") == 0)
		return queries(argv[3], argv[4], 1);
	fprintf(stderr, "usage: db-schema dump TARGET | compare SQLITE PG-URI "
	    "| queries TARGET FILE\n");
	return 2;
}
