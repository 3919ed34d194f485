/*
 * The audit log's hash chain, write queue, verification and pruning.
 *
 * Row hash (lowercase hex of SHA-256) over:
 *   "usbgw-audit-1" || prev_hash (64 ASCII hex digits) || the 16 columns
 *   seq, ts, event, device_id, busid, exporter, object, old_state,
 *   new_state, actor, actor_uid, actor_name, rule_id, host, reason, detail
 * each encoded by its SQLite storage class:
 *   NULL    0x00
 *   INTEGER 0x01, 8 bytes big-endian two's complement
 *   TEXT    0x02, 4-byte big-endian length, the bytes
 *   REAL    0x03, 8 bytes big-endian of the IEEE 754 value
 *   BLOB    0x04, 4-byte big-endian length, the bytes
 * A row that names the gateway that wrote it (column gateway, several
 * gateways on one store, protocol.md 4.5) is hashed as version 2:
 * "usbgw-audit-2" and the same 16 columns, then gateway (TEXT) as the
 * 17th.  A row with gateway NULL (SQLite, rows before migration 12) is
 * version 1, so old rows verify as they did.
 * The first row's prev_hash is 64 zeros.  Verification encodes what is
 * stored, so a change of type (5 -> '5') breaks the hash too.
 *
 * The hash chain is public: anyone can recompute it, so anyone who can
 * write the file can rewrite it.  Two things the file's writer cannot
 * make hold it (protocol.md 1.8): the row MAC (column mac, HMAC-SHA256
 * with the key outside the database, auditkey.c) on every row from the
 * key's `since` on, and signed checkpoints of the head (table
 * audit_checkpoints, logged as anchor lines) compared with the chain.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>
#include <sqlite3.h>	/* SQLITE_INTEGER, ...: the hashed types */

#include "db/audit.h"
#include "db/auditkey.h"
#include "db/db.h"
#include "base/log.h"
#include "db/sqldb.h"
#include "base/util.h"

#define HASH_TAG	"usbgw-audit-1"
#define HASH_TAG2	"usbgw-audit-2"	/* with the gateway column */
#define ZERO_HASH	"0000000000000000000000000000000000000000000000000000000000000000"
#define NCOLS		16	/* hashed columns (version 1) */
#define NCOLS2		17	/* version 2: and gateway */

enum qstr {
	Q_EVENT,
	Q_BUSID,
	Q_EXPORTER,
	Q_OBJECT,
	Q_OLD,
	Q_NEW,
	Q_ACTOR,
	Q_ACTOR_NAME,
	Q_HOST,
	Q_REASON,
	Q_DETAIL,
	Q_NSTR
};

/* A queued row: its strings live in one allocation, buf. */
struct qrow {
	int64_t		 ts;
	int64_t		 device_id;	/* 0: NULL */
	int64_t		 actor_uid;	/* -1: NULL */
	int64_t		 rule_id;	/* 0: NULL */
	const char	*s[Q_NSTR];	/* into buf, or NULL */
	char		*buf;
};

struct audit {
	struct db		*db;
	struct qrow		*q;
	size_t			 n, cap;
	struct sqldb_stmt	*st_head;
	struct sqldb_stmt	*st_insert;
	const struct audit_key	*key;		/* NULL: rows without MAC */
	unsigned		 cp_rows;	/* checkpoint every N rows, 0 off */
	unsigned		 since_cp;	/* rows written since the last */
	int64_t			 cp_seq;	/* the last checkpoint's seq */
	int64_t			 wrote_seq;	/* the last row we wrote */
	char			 gateway[64];	/* "": rows without it */
	char			 wrote_hash[65];
	uint64_t		 dropped;	/* rows past the hard bound */
	int64_t			 dropped_since;	/* the first one's time */
};

static const char insert_sql[] =
    "INSERT INTO audit_log (seq, ts, event, device_id, busid, exporter, "
    "object, old_state, new_state, actor, actor_uid, actor_name, rule_id, "
    "host, reason, detail, prev_hash, hash, mac, gateway) VALUES (?1, ?2, "
    "?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, "
    "?18, ?19, ?20)";
static const char head_sql[] =
    "SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1";

/* ------------------------------------------------------------------ */
/* Hashing                                                              */

/* One column value, as stored or about to be stored. */
struct hval {
	int		 type;		/* SQLITE_NULL, _INTEGER, _TEXT, ... */
	int64_t		 i;
	double		 d;
	const void	*p;
	size_t		 len;
};

static void
put_be(unsigned char *b, uint64_t v, int n)
{
	int i;

	for (i = n - 1; i >= 0; i--) {
		b[i] = (unsigned char)(v & 0xff);
		v >>= 8;
	}
}

static int
row_hash(const char *prev, const struct hval *v, char out[65])
{
	/* version 2 when the 17th value, gateway, is there */
	const char	*tag = v[NCOLS].type != SQLITE_NULL ? HASH_TAG2 :
			    HASH_TAG;
	int		 ncols = v[NCOLS].type != SQLITE_NULL ? NCOLS2 : NCOLS;
	static const char hex[] = "0123456789abcdef";
	EVP_MD_CTX	*ctx;
	unsigned char	 md[EVP_MAX_MD_SIZE], b[9];
	unsigned int	 mdlen = 0;
	uint64_t	 u;
	int		 i, ok = 0;

	if ((ctx = EVP_MD_CTX_new()) == NULL)
		return -1;
	if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1 ||
	    EVP_DigestUpdate(ctx, tag, strlen(tag)) != 1 ||
	    EVP_DigestUpdate(ctx, prev, 64) != 1)
		goto done;
	for (i = 0; i < ncols; i++) {
		switch (v[i].type) {
		case SQLITE_INTEGER:
			b[0] = 0x01;
			put_be(b + 1, (uint64_t)v[i].i, 8);
			if (EVP_DigestUpdate(ctx, b, 9) != 1)
				goto done;
			break;
		case SQLITE_FLOAT:
			b[0] = 0x03;
			memcpy(&u, &v[i].d, sizeof(u));
			put_be(b + 1, u, 8);
			if (EVP_DigestUpdate(ctx, b, 9) != 1)
				goto done;
			break;
		case SQLITE_TEXT:
		case SQLITE_BLOB:
			b[0] = v[i].type == SQLITE_TEXT ? 0x02 : 0x04;
			put_be(b + 1, (uint64_t)v[i].len, 4);
			if (EVP_DigestUpdate(ctx, b, 5) != 1 ||
			    (v[i].len > 0 &&
			    EVP_DigestUpdate(ctx, v[i].p, v[i].len) != 1))
				goto done;
			break;
		default:
			b[0] = 0x00;
			if (EVP_DigestUpdate(ctx, b, 1) != 1)
				goto done;
			break;
		}
	}
	if (EVP_DigestFinal_ex(ctx, md, &mdlen) != 1 || mdlen != 32)
		goto done;
	for (i = 0; i < 32; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 0xf];
	}
	out[64] = '\0';
	ok = 1;
done:
	EVP_MD_CTX_free(ctx);
	return ok ? 0 : -1;
}

static void
hv_int(struct hval *v, int64_t i, int null)
{
	memset(v, 0, sizeof(*v));
	v->type = null ? SQLITE_NULL : SQLITE_INTEGER;
	v->i = i;
}

static void
hv_text(struct hval *v, const char *s)
{
	memset(v, 0, sizeof(*v));
	v->type = s == NULL ? SQLITE_NULL : SQLITE_TEXT;
	v->p = s;
	v->len = s == NULL ? 0 : strlen(s);
}

/* The 16 hashed columns of a queued row at seq. */
static void
qrow_values(const struct qrow *r, int64_t seq, struct hval *v)
{
	hv_int(&v[0], seq, 0);
	hv_int(&v[1], r->ts, 0);
	hv_text(&v[2], r->s[Q_EVENT]);
	hv_int(&v[3], r->device_id, r->device_id <= 0);
	hv_text(&v[4], r->s[Q_BUSID]);
	hv_text(&v[5], r->s[Q_EXPORTER]);
	hv_text(&v[6], r->s[Q_OBJECT]);
	hv_text(&v[7], r->s[Q_OLD]);
	hv_text(&v[8], r->s[Q_NEW]);
	hv_text(&v[9], r->s[Q_ACTOR]);
	hv_int(&v[10], r->actor_uid, r->actor_uid < 0);
	hv_text(&v[11], r->s[Q_ACTOR_NAME]);
	hv_int(&v[12], r->rule_id, r->rule_id <= 0);
	hv_text(&v[13], r->s[Q_HOST]);
	hv_text(&v[14], r->s[Q_REASON]);
	hv_text(&v[15], r->s[Q_DETAIL]);
}

/* ------------------------------------------------------------------ */
/* Queue                                                                */

struct audit *
audit_new(struct db *db)
{
	struct audit *a;

	a = xcalloc(1, sizeof(*a));
	a->db = db;
	return a;
}

static void
qrow_free(struct qrow *r)
{
	free(r->buf);
	memset(r, 0, sizeof(*r));
}

void
audit_free(struct audit *a)
{
	size_t i;

	if (a == NULL)
		return;
	if (a->n > 0 && audit_flush(a) == -1)
		log_warnx("audit: %zu rows could not be written", a->n);
	for (i = 0; i < a->n; i++)
		qrow_free(&a->q[i]);
	free(a->q);
	sqldb_finalize(a->st_head);
	sqldb_finalize(a->st_insert);
	free(a);
}

size_t
audit_pending(const struct audit *a)
{
	return a->n;
}

static void
qrow_fill(struct qrow *r, const struct audit_event *e, int64_t now)
{
	const struct actor	*w = e->who;
	const char		*kind = "system", *name = NULL;

	memset(r, 0, sizeof(*r));
	r->ts = now;
	r->device_id = e->device_id;
	r->actor_uid = -1;
	r->rule_id = e->rule_id;
	if (w != NULL) {
		switch (w->kind) {
		case ACTOR_RULE:
			kind = "rule";
			r->rule_id = w->rule_id;
			break;
		case ACTOR_OPERATOR:
			kind = "operator";
			r->actor_uid = (int64_t)w->uid;
			break;
		case ACTOR_SYSTEM:
			break;
		}
		if (w->name[0] != '\0')
			name = w->name;
	}
	{
		const char	*src[Q_NSTR];
		size_t		 len[Q_NSTR], total = 0, off = 0;
		int		 i;

		src[Q_EVENT] = e->event;
		src[Q_BUSID] = e->busid;
		src[Q_EXPORTER] = e->exporter;
		src[Q_OBJECT] = e->object;
		src[Q_OLD] = e->old_state;
		src[Q_NEW] = e->new_state;
		src[Q_ACTOR] = kind;
		src[Q_ACTOR_NAME] = name;
		src[Q_HOST] = e->host;
		src[Q_REASON] = e->reason;
		src[Q_DETAIL] = e->detail;
		for (i = 0; i < Q_NSTR; i++) {
			len[i] = src[i] != NULL ? strlen(src[i]) + 1 : 0;
			total += len[i];
		}
		r->buf = xmalloc(total);
		for (i = 0; i < Q_NSTR; i++) {
			if (src[i] == NULL)
				continue;
			memcpy(r->buf + off, src[i], len[i]);
			r->s[i] = r->buf + off;
			off += len[i];
		}
	}
}

int
audit_append(struct audit *a, const struct audit_event *e, int64_t now)
{
	if (e->event == NULL || e->event[0] == '\0')
		return -1;
	if (a->n >= AUDIT_QUEUE_MAX && audit_flush(a) == -1 &&
	    a->n >= AUDIT_QUEUE_HARD_MAX) {
		/* counted; one summary row when the database is back */
		if (a->dropped++ == 0) {
			a->dropped_since = now;
			log_warnx("audit: %d rows held and the database failing: "
			    "rows from \"%s\" on are counted, not kept, until "
			    "it returns", AUDIT_QUEUE_HARD_MAX, e->event);
		}
		return -1;
	}
	if (a->n == a->cap) {
		a->cap = a->cap ? a->cap * 2 : 64;
		a->q = xreallocarray(a->q, a->cap, sizeof(*a->q));
	}
	qrow_fill(&a->q[a->n++], e, now);
	return 0;
}

/* A statement for one use (sqldb_finalize() it): 0 or -1. */
static int
prep1(struct sqldb *h, const char *sql, struct sqldb_stmt **st)
{
	if ((*st = sqldb_prepare(h, sql)) == NULL) {
		log_warnx("audit: prepare: %s", sqldb_errmsg(h));
		return -1;
	}
	return 0;
}

static int
prep(struct audit *a, struct sqldb_stmt **st, const char *sql)
{
	if (*st != NULL) {
		sqldb_reset(*st);
		return 0;
	}
	return prep1(db_conn(a->db), sql, st);
}

/* The chain's head, inside the current transaction. */
static int
read_head(struct audit *a, int64_t *seq, char hash[65])
{
	struct sqldb *h = db_conn(a->db);
	int	 rc;

	if (prep(a, &a->st_head, head_sql) == -1)
		return -1;
	rc = sqldb_step(a->st_head);
	if (rc == SQLDB_ROW) {
		const char *t = sqldb_column_text(a->st_head, 1);

		*seq = sqldb_column_int64(a->st_head, 0);
		usbgw_strlcpy(hash, t ? (const char *)t : "", 65);
	} else {
		*seq = 0;
		memcpy(hash, ZERO_HASH, 65);
	}
	sqldb_reset(a->st_head);
	if (rc != SQLDB_ROW && rc != SQLDB_DONE) {
		log_warnx("audit: head: %s", sqldb_errmsg(h));
		return -1;
	}
	return 0;
}

/* Chain and insert one row after (*seq, prev); advances them. */
static int
write_row(struct audit *a, const struct qrow *r, int64_t *seq, char prev[65])
{
	struct sqldb	*h = db_conn(a->db);
	struct sqldb_stmt	*st;
	struct hval	 v[NCOLS2];
	char		 hash[65], mac[65];
	int		 i, rc;

	qrow_values(r, *seq + 1, v);
	hv_text(&v[NCOLS], a->gateway[0] ? a->gateway : NULL);
	if (row_hash(prev, v, hash) == -1 ||
	    prep(a, &a->st_insert, insert_sql) == -1)
		return -1;
	st = a->st_insert;
	for (i = 0; i < NCOLS; i++) {
		if (v[i].type == SQLITE_INTEGER)
			sqldb_bind_int64(st, i + 1, v[i].i);
		else if (v[i].type == SQLITE_TEXT)
			sqldb_bind_text(st, i + 1, (const char *)v[i].p);
		else
			sqldb_bind_null(st, i + 1);
	}
	sqldb_bind_text(st, 17, prev);
	sqldb_bind_text(st, 18, hash);
	if (a->key != NULL) {
		if (audit_key_mac(a->key, *seq + 1, hash, mac) == -1)
			return -1;
		sqldb_bind_text(st, 19, mac);
	} else
		sqldb_bind_null(st, 19);
	if (a->gateway[0])
		sqldb_bind_text(st, 20, a->gateway);
	else
		sqldb_bind_null(st, 20);
	rc = sqldb_step(st);
	sqldb_reset(st);
	if (rc != SQLDB_DONE) {
		log_warnx("audit: insert: %s", sqldb_errmsg(h));
		return -1;
	}
	(*seq)++;
	memcpy(prev, hash, 65);
	a->since_cp++;
	return 0;
}

static int
sql(struct audit *a, const char *s)
{
	struct sqldb *h = db_conn(a->db);

	if (sqldb_exec(h, s) == -1) {
		log_warnx("audit: %s: %s", s, sqldb_errmsg(h));
		return -1;
	}
	return 0;
}

static int tx_end(struct audit *, int, int);

static int
tx_begin(struct audit *a, int *nested)
{
	*nested = sqldb_in_tx(db_conn(a->db));
	if (*nested ? sql(a, "SAVEPOINT audit_tx") == -1 :
	    sqldb_begin(db_conn(a->db)) == -1) {
		log_warnx("audit: begin: %s", sqldb_errmsg(db_conn(a->db)));
		return -1;
	}
	/*
	 * Gateways sharing a PostgreSQL database append to one chain: the
	 * head is read and extended under a transaction-scoped advisory
	 * lock ("usbh"), so two writers never both take seq N+1.
	 */
	if (db_is_pg(a->db) &&
	    sql(a, "SELECT pg_advisory_xact_lock(1970496104)") == -1) {
		tx_end(a, *nested, 0);
		return -1;
	}
	return 0;
}

static int
tx_end(struct audit *a, int nested, int ok)
{
	struct sqldb *h = db_conn(a->db);

	if (ok)
		return sql(a, nested ? "RELEASE audit_tx" : "COMMIT");
	if (nested) {
		sqldb_exec(h, "ROLLBACK TO audit_tx");
		sqldb_exec(h, "RELEASE audit_tx");
	} else
		sqldb_rollback(h);
	return -1;
}

int
audit_flush(struct audit *a)
{
	int64_t	seq;
	char	prev[65];
	size_t	i, n = a->n;
	int	nested, ok = 0;

	if (n == 0)
		return 0;
	if (tx_begin(a, &nested) == -1)
		return -1;
	if (read_head(a, &seq, prev) == -1)
		goto done;
	for (i = 0; i < n; i++)
		if (write_row(a, &a->q[i], &seq, prev) == -1)
			goto done;
	if (a->dropped > 0) {
		struct audit_event ev;
		struct qrow r;
		char detail[160];
		int rc;

		memset(&ev, 0, sizeof(ev));
		snprintf(detail, sizeof(detail), "%llu rows not kept while the "
		    "database failed (more than %d held), the first at %lld",
		    (unsigned long long)a->dropped, AUDIT_QUEUE_HARD_MAX,
		    (long long)a->dropped_since);
		ev.event = AUDIT_EVENT_DROPPED;
		ev.object = "audit_log";
		ev.detail = detail;
		memset(&r, 0, sizeof(r));
		qrow_fill(&r, &ev, (int64_t)time(NULL));
		rc = write_row(a, &r, &seq, prev);
		qrow_free(&r);
		if (rc == -1)
			goto done;
	}
	ok = 1;
done:
	if (tx_end(a, nested, ok) == -1) {
		a->since_cp = 0;	/* recounted from the next checkpoint */
		return -1;
	}
	for (i = 0; i < n; i++)
		qrow_free(&a->q[i]);
	a->n = 0;
	if (a->dropped > 0) {
		log_warnx("audit: %llu rows were not kept while the database "
		    "failed; row \"" AUDIT_EVENT_DROPPED "\" says so",
		    (unsigned long long)a->dropped);
		a->dropped = 0;
	}
	if (!nested) {
		a->wrote_seq = seq;
		memcpy(a->wrote_hash, prev, 65);
	}
	if (!nested && a->cp_rows > 0 && a->since_cp >= a->cp_rows &&
	    a->key != NULL)
		audit_checkpoint(a, (int64_t)time(NULL), 0, NULL);
	return (int)n;
}

/* ------------------------------------------------------------------ */
/* Verification                                                         */

int
audit_head(struct db *db, int64_t *seq, char hash[65])
{
	struct sqldb	*h = db_conn(db);
	struct sqldb_stmt	*st;
	int		 rc;

	if (prep1(h, head_sql, &st) != 0)
		return -1;
	rc = sqldb_step(st);
	if (rc == SQLDB_ROW) {
		const char *t = sqldb_column_text(st, 1);

		*seq = sqldb_column_int64(st, 0);
		usbgw_strlcpy(hash, t ? (const char *)t : "", 65);
	} else {
		*seq = 0;
		memcpy(hash, ZERO_HASH, 65);
	}
	sqldb_finalize(st);
	return rc == SQLDB_ROW || rc == SQLDB_DONE ? 0 : -1;
}

static int vfail(struct audit_verify *, int64_t, const char *, ...)
    __attribute__((format(printf, 3, 4)));
static int
vfail(struct audit_verify *v, int64_t seq, const char *fmt, ...)
{
	va_list ap;

	v->bad_seq = seq;
	va_start(ap, fmt);
	vsnprintf(v->reason, sizeof(v->reason), fmt, ap);
	va_end(ap);
	return 1;
}

/*
 * The last_hash of the prune checkpoint that removed the rows up to
 * through, into out.  1 if found, 0 if not, -1 on error.
 */
static int
find_checkpoint(struct sqldb *h, int64_t through, char out[65])
{
	struct sqldb_stmt	*st;
	long long	 t;
	char		 hash[65];
	int		 rc, found = 0;

	if (prep1(h, "SELECT detail FROM audit_log WHERE event = "
	    "?1 ORDER BY seq DESC", &st) != 0)
		return -1;
	sqldb_bind_text(st, 1, AUDIT_EVENT_PRUNE);
	while ((rc = sqldb_step(st)) == SQLDB_ROW) {
		const char *d = sqldb_column_text(st, 0);

		if (d != NULL && sscanf((const char *)d,
		    "through_seq=%lld last_hash=%64[0-9a-f]", &t, hash) == 2 &&
		    t == through && strlen(hash) == 64) {
			memcpy(out, hash, 65);
			found = 1;
			break;
		}
	}
	sqldb_finalize(st);
	if (!found && rc != SQLDB_DONE)
		return -1;
	return found;
}

static void
col_value(struct sqldb_stmt *st, int i, struct hval *v)
{
	memset(v, 0, sizeof(*v));
	v->type = sqldb_column_type(st, i);
	switch (v->type) {
	case SQLITE_INTEGER:
		v->i = sqldb_column_int64(st, i);
		break;
	case SQLITE_FLOAT:
		v->d = sqldb_column_double(st, i);
		break;
	case SQLITE_TEXT:
		v->p = sqldb_column_text(st, i);
		v->len = sqldb_column_bytes(st, i);
		break;
	case SQLITE_BLOB:
		v->p = sqldb_column_text(st, i);
		v->len = sqldb_column_bytes(st, i);
		break;
	}
}

/* An anchor the walk compares with: given, stored, or our own head. */
struct vanchor {
	struct audit_anchor	 a;
	char			 what[96];	/* "the anchor", ... */
	size_t			 ord;		/* keeps qsort stable */
};

static int
vanchor_cmp(const void *x, const void *y)
{
	const struct vanchor *p = x, *q = y;

	if (p->a.seq != q->a.seq)
		return p->a.seq < q->a.seq ? -1 : 1;
	return p->ord < q->ord ? -1 : p->ord > q->ord;
}

/*
 * The stored checkpoints, appended to *va (*n of *cap).  With a key,
 * each signature must verify: 1 and v filled if one does not.
 */
static int
load_checkpoints(struct sqldb *h, const struct audit_key *key,
    struct vanchor **va, size_t *n, size_t *cap, struct audit_verify *v)
{
	struct sqldb_stmt	*st;
	int		 rc;

	if (prep1(h, "SELECT id, seq, ts, hash, key, sig FROM "
	    "audit_checkpoints ORDER BY id", &st) != 0)
		return -1;
	while ((rc = sqldb_step(st)) == SQLDB_ROW) {
		struct vanchor *c;
		const char *t;

		if (*n == *cap) {
			*cap = *cap ? *cap * 2 : 16;
			*va = xreallocarray(*va, *cap, sizeof(**va));
		}
		c = &(*va)[*n];
		memset(c, 0, sizeof(*c));
		snprintf(c->what, sizeof(c->what), "checkpoint id %lld",
		    (long long)sqldb_column_int64(st, 0));
		c->a.seq = sqldb_column_int64(st, 1);
		c->a.time = sqldb_column_int64(st, 2);
		t = sqldb_column_text(st, 3);
		usbgw_strlcpy(c->a.hash, t ? (const char *)t : "",
		    sizeof(c->a.hash));
		t = sqldb_column_text(st, 4);
		usbgw_strlcpy(c->a.key, t ? (const char *)t : "",
		    sizeof(c->a.key));
		t = sqldb_column_text(st, 5);
		usbgw_strlcpy(c->a.sig, t ? (const char *)t : "",
		    sizeof(c->a.sig));
		if (key != NULL && !audit_anchor_verify(key, &c->a)) {
			sqldb_finalize(st);
			return vfail(v, c->a.seq, "%s (seq %" PRId64 "): its "
			    "signature does not verify with the key %s (the "
			    "checkpoint was forged)", c->what, c->a.seq,
			    audit_key_fpr(key));
		}
		(*n)++;
	}
	sqldb_finalize(st);
	return rc == SQLDB_DONE ? 0 : -1;
}

/* Whether audit_log has the gateway column (schema version 12 on). */
static int
have_gateway_column(struct sqldb *h)
{
	struct sqldb_stmt	*st;
	int			 r = 0;

	if (prep1(h, sqldb_kind(h) == SQLDB_PG ? "SELECT 1 FROM "
	    "information_schema.columns WHERE table_name = 'audit_log' AND "
	    "column_name = 'gateway' AND table_schema = current_schema()" :
	    "SELECT 1 FROM pragma_table_info('audit_log') WHERE name = "
	    "'gateway'", &st) != 0)
		return 0;
	r = sqldb_step(st) == SQLDB_ROW;
	sqldb_finalize(st);
	return r;
}

/* Whether audit_log has the mac column (schema version 4 on). */
static int
have_mac_column(struct sqldb *h)
{
	struct sqldb_stmt	*st;
	int			 r = 0;

	if (sqldb_kind(h) == SQLDB_PG)
		return 1;	/* its schema starts at version 10 */
	if (prep1(h, "SELECT 1 FROM pragma_table_info('audit_log') "
	    "WHERE name = 'mac'", &st) != 0)
		return 0;
	r = sqldb_step(st) == SQLDB_ROW;
	sqldb_finalize(st);
	return r;
}

static void
vcut(struct audit_verify *v, const struct vanchor *c, int64_t last)
{
	v->cut = 1;
	if (last == 0)
		vfail(v, c->a.seq, "the log was cut short: it holds no row, "
		    "%s names seq %" PRId64, c->what, c->a.seq);
	else
		vfail(v, c->a.seq, "the log was cut short: it ends at seq %"
		    PRId64 ", %s names seq %" PRId64, last, c->what, c->a.seq);
}

int
audit_verify_ex(struct db *db, const struct audit_verify_opts *o,
    struct audit_verify *v)
{
	static const struct audit_verify_opts none;
	struct sqldb	*h = db_conn(db);
	struct sqldb_stmt	*st = NULL;
	struct hval	 val[NCOLS2];
	char		 vsql[512];
	struct vanchor	*va = NULL;
	size_t		 nva = 0, cap = 0, ai = 0, i;
	char		 expect_prev[65], hash[65], stored[65], prev[65], mac[65];
	int64_t		 seq, last = 0, guard = 0, since = 0;
	int		 rc, c, broken = 0, macs, secret;

	if (o == NULL)
		o = &none;
	secret = audit_key_has_secret(o->key);
	memset(v, 0, sizeof(*v));
	memcpy(v->head, ZERO_HASH, 65);
	if (prep1(h, "SELECT count(*) FROM audit_prune_guard", &st) != 0)
		return -1;
	if (sqldb_step(st) == SQLDB_ROW)
		guard = sqldb_column_int64(st, 0);
	sqldb_finalize(st);
	st = NULL;
	if (guard != 0)
		return vfail(v, 0, "audit_prune_guard is not empty: deletes "
		    "of audit rows are enabled");
	macs = have_mac_column(h);
	if (secret) {
		since = audit_key_since(o->key);
		v->keyed = 1;
	}

	/* the anchors: given, ours, stored (signatures checked first) */
	for (i = 0; i < o->nanchors; i++) {
		if (nva == cap) {
			cap = cap ? cap * 2 : 16;
			va = xreallocarray(va, cap, sizeof(*va));
		}
		memset(&va[nva], 0, sizeof(va[nva]));
		va[nva].a = o->anchors[i];
		if (o->anchor_name != NULL && o->anchors[i].line > 0)
			snprintf(va[nva].what, sizeof(va[nva].what),
			    "the anchor (%.60s:%d)", o->anchor_name,
			    o->anchors[i].line);
		else
			snprintf(va[nva].what, sizeof(va[nva].what),
			    "%s", o->anchor_what ? o->anchor_what : "the anchor");
		if (o->key != NULL && o->anchors[i].sig[0] != '\0' &&
		    !audit_anchor_verify(o->key, &o->anchors[i])) {
			broken = vfail(v, o->anchors[i].seq, "%s:%d: the "
			    "signature does not verify with the public key %s%s%s",
			    o->anchor_name ? o->anchor_name : "anchor",
			    o->anchors[i].line, audit_key_fpr(o->key),
			    o->anchors[i].key[0] ? ": it names key " : "",
			    o->anchors[i].key);
			goto out;
		}
		nva++;
	}
	if (o->own != NULL) {
		if (nva == cap) {
			cap = cap ? cap * 2 : 16;
			va = xreallocarray(va, cap, sizeof(*va));
		}
		memset(&va[nva], 0, sizeof(va[nva]));
		va[nva].a = *o->own;
		snprintf(va[nva].what, sizeof(va[nva].what), "the last row "
		    "this daemon wrote");
		nva++;
	}
	if (macs && (c = load_checkpoints(h, o->key, &va, &nva, &cap, v)) != 0) {
		if (c == -1)
			goto fail;
		broken = c;
		goto out;
	}
	for (i = 0; i < nva; i++)
		va[i].ord = i;
	if (nva > 0)
		qsort(va, nva, sizeof(*va), vanchor_cmp);

	snprintf(vsql, sizeof(vsql), "SELECT seq, ts, event, device_id, "
	    "busid, exporter, object, old_state, new_state, actor, actor_uid, "
	    "actor_name, rule_id, host, reason, detail, prev_hash, hash, %s, %s "
	    "FROM audit_log ORDER BY seq", macs ? "mac" : "NULL",
	    have_gateway_column(h) ? "gateway" : "NULL");
	if (prep1(h, vsql, &st) != 0)
		goto fail;
	memcpy(expect_prev, ZERO_HASH, 65);
	while ((rc = sqldb_step(st)) == SQLDB_ROW) {
		seq = sqldb_column_int64(st, 0);
		for (i = 0; i < NCOLS; i++)
			col_value(st, (int)i, &val[i]);
		/* gateway: version 2 unless NULL (any type is hashed) */
		col_value(st, 19, &val[NCOLS]);
		usbgw_strlcpy(prev, sqldb_column_text(st, 16) ?
		    sqldb_column_text(st, 16) : "", sizeof(prev));
		usbgw_strlcpy(stored, sqldb_column_text(st, 17) ?
		    sqldb_column_text(st, 17) : "",
		    sizeof(stored));
		if (v->rows == 0) {
			v->first_seq = seq;
			if (seq > 1) {
				int f = find_checkpoint(h, seq - 1, expect_prev);

				if (f == -1)
					goto fail;
				if (f == 0) {
					broken = vfail(v, seq, "seq %" PRId64
					    ": the rows before it were removed "
					    "without a prune checkpoint", seq);
					break;
				}
			}
			/* anchors in the pruned part: only the last is known */
			for (; ai < nva && va[ai].a.seq < seq; ai++) {
				if (va[ai].a.seq != seq - 1) {
					v->anchors_pruned++;
					continue;
				}
				if (strcmp(va[ai].a.hash, expect_prev) != 0) {
					broken = vfail(v, seq - 1, "seq %" PRId64
					    " (pruned): the prune checkpoint's "
					    "hash differs from %s", seq - 1,
					    va[ai].what);
					break;
				}
				v->anchors_checked++;
			}
			if (broken)
				break;
		} else if (seq != last + 1) {
			if (seq == last + 2)
				broken = vfail(v, seq, "seq %" PRId64 " follows "
				    "seq %" PRId64 ": row %" PRId64 " is missing",
				    seq, last, last + 1);
			else
				broken = vfail(v, seq, "seq %" PRId64 " follows "
				    "seq %" PRId64 ": rows %" PRId64 "-%" PRId64
				    " are missing", seq, last, last + 1, seq - 1);
			break;
		}
		if (row_hash(prev, val, hash) == -1)
			goto fail;
		if (strcmp(hash, stored) != 0) {
			broken = vfail(v, seq, "seq %" PRId64 ": its content "
			    "does not match its hash (the row was changed)",
			    seq);
			break;
		}
		if (strcmp(prev, expect_prev) != 0) {
			broken = vfail(v, seq, "seq %" PRId64 ": prev_hash does "
			    "not match %s (a row before it was changed or "
			    "replaced)", seq, v->rows == 0 ?
			    "the prune checkpoint" : "the previous row's hash");
			break;
		}
		if (secret && seq >= since) {
			const char *m = sqldb_column_text(st, 18);

			if (m == NULL) {
				broken = vfail(v, seq, "seq %" PRId64 ": no MAC, "
				    "but the key's chain starts at seq %" PRId64
				    " (the row was written or rewritten without "
				    "the key)", seq, since);
				break;
			}
			if (audit_key_mac(o->key, seq, stored, mac) == -1)
				goto fail;
			if (strcmp((const char *)m, mac) != 0) {
				broken = vfail(v, seq, "seq %" PRId64 ": its MAC "
				    "does not match (the row was changed, or the "
				    "chain recomputed, without the key)", seq);
				break;
			}
			v->macs++;
		}
		for (; ai < nva && va[ai].a.seq <= seq; ai++) {
			if (strcmp(va[ai].a.hash, stored) != 0) {
				broken = vfail(v, seq, "seq %" PRId64 ": its hash "
				    "differs from %s (this row or one before it "
				    "was changed and the chain recomputed)", seq,
				    va[ai].what);
				break;
			}
			v->anchors_checked++;
		}
		if (broken)
			break;
		memcpy(expect_prev, stored, 65);
		memcpy(v->head, stored, 65);
		last = seq;
		v->last_seq = seq;
		v->rows++;
	}
	if (!broken && rc != SQLDB_DONE)
		goto fail;
	if (!broken && ai < nva) {
		vcut(v, &va[ai], last);
		broken = 2;
	}
	/* a key that must have signed rows, and none carries its MAC */
	if (!broken && secret && v->macs == 0 && last >= since && since > 0) {
		broken = vfail(v, last, "seq %" PRId64 ": no row carries the "
		    "key's MAC, but its chain starts at seq %" PRId64, last,
		    since);
	}
	if (broken && v->reason[0] == '\0')
		vfail(v, v->bad_seq, "broken");
out:
	sqldb_finalize(st);
	free(va);
	return broken;
fail:
	sqldb_finalize(st);
	free(va);
	return -1;
}

int
audit_verify(struct db *db, int64_t expect_seq, const char *expect_head,
    struct audit_verify *v)
{
	struct audit_verify_opts o;
	struct audit_anchor a;
	int r;

	memset(&o, 0, sizeof(o));
	if (expect_head != NULL && expect_seq > 0) {
		memset(&a, 0, sizeof(a));
		a.seq = expect_seq;
		usbgw_strlcpy(a.hash, expect_head, sizeof(a.hash));
		o.anchors = &a;
		o.nanchors = 1;
		o.anchor_what = "the recorded head";
	}
	r = audit_verify_ex(db, &o, v);
	return r == 2 ? 1 : r;
}

/* ------------------------------------------------------------------ */
/* Keys and checkpoints                                                 */

void
audit_set_key(struct audit *a, const struct audit_key *key)
{
	a->key = key;
}

void
audit_set_gateway(struct audit *a, const char *name)
{
	usbgw_strlcpy(a->gateway, name != NULL ? name : "",
	    sizeof(a->gateway));
}

void
audit_set_checkpoint_rows(struct audit *a, unsigned n)
{
	a->cp_rows = n;
}

int
audit_written(const struct audit *a, int64_t *seq, char hash[65])
{
	if (a->wrote_seq == 0)
		return 0;
	*seq = a->wrote_seq;
	memcpy(hash, a->wrote_hash, 65);
	return 1;
}

int
audit_checkpoint(struct audit *a, int64_t now, int force,
    struct audit_anchor *out)
{
	struct sqldb	*h = db_conn(a->db);
	struct sqldb_stmt	*st = NULL;
	struct audit_anchor an;
	char		 line[512];
	int64_t		 seq;
	int		 rc;

	if (a->key == NULL || !audit_key_has_secret(a->key))
		return -1;
	if (a->n > 0 && audit_flush(a) == -1)
		return -1;
	memset(&an, 0, sizeof(an));
	if (read_head(a, &seq, an.hash) == -1)
		return -1;
	if (seq == 0)
		return 0;		/* nothing to sign */
	an.seq = seq;
	/* the newest stored one, if it is already at the head */
	if (!force && prep1(h, "SELECT ts, hash, key, sig FROM "
	    "audit_checkpoints WHERE seq = ?1 ORDER BY id DESC LIMIT 1", &st) == 0) {
		sqldb_bind_int64(st, 1, seq);
		if (sqldb_step(st) == SQLDB_ROW &&
		    sqldb_column_text(st, 1) != NULL &&
		    strcmp(sqldb_column_text(st, 1), an.hash) ==
		    0) {
			an.time = sqldb_column_int64(st, 0);
			usbgw_strlcpy(an.key, 
			    sqldb_column_text(st, 2), sizeof(an.key));
			usbgw_strlcpy(an.sig, 
			    sqldb_column_text(st, 3), sizeof(an.sig));
			sqldb_finalize(st);
			if (out != NULL)
				*out = an;
			a->cp_seq = seq;
			a->since_cp = 0;
			return 0;
		}
		sqldb_finalize(st);
		st = NULL;
	}
	an.time = now;
	if (audit_anchor_sign(a->key, &an) == -1) {
		log_warnx("audit: cannot sign a checkpoint");
		return -1;
	}
	if (prep1(h, "INSERT INTO audit_checkpoints (seq, ts, hash, "
	    "key, sig) VALUES (?1, ?2, ?3, ?4, ?5)", &st) != 0) {
		log_warnx("audit: checkpoint: %s", sqldb_errmsg(h));
		return -1;
	}
	sqldb_bind_int64(st, 1, an.seq);
	sqldb_bind_int64(st, 2, an.time);
	sqldb_bind_text(st, 3, an.hash);
	sqldb_bind_text(st, 4, an.key);
	sqldb_bind_text(st, 5, an.sig);
	rc = sqldb_step(st);
	sqldb_finalize(st);
	if (rc != SQLDB_DONE) {
		log_warnx("audit: checkpoint: %s", sqldb_errmsg(h));
		return -1;
	}
	a->cp_seq = seq;
	a->since_cp = 0;
	/* one parseable line: an anchor for `usbgw audit verify --anchor` */
	audit_anchor_format(&an, line, sizeof(line));
	log_info("audit checkpoint: %s", line);
	if (out != NULL)
		*out = an;
	return 1;
}

int64_t
audit_checkpoint_seq(const struct audit *a)
{
	return a->cp_seq;
}

/* ------------------------------------------------------------------ */
/* Pruning                                                              */

#define fmt_utc usbgw_fmt_utc

/* A whole number of seconds as 90d, 12h, 30m or 45s. */
static void
fmt_span(char *buf, size_t len, int64_t s)
{
	if (s != 0 && s % 86400 == 0)
		snprintf(buf, len, "%" PRId64 "d", s / 86400);
	else if (s != 0 && s % 3600 == 0)
		snprintf(buf, len, "%" PRId64 "h", s / 3600);
	else if (s != 0 && s % 60 == 0)
		snprintf(buf, len, "%" PRId64 "m", s / 60);
	else
		snprintf(buf, len, "%" PRId64 "s", s);
}

enum audit_prune_check
audit_prune_check(int64_t before, int64_t now, int64_t retention_s,
    char *err, size_t errlen)
{
	char b[32], latest[32], span[32];

	fmt_utc(b, sizeof(b), before);
	if (before > now) {
		fmt_utc(latest, sizeof(latest), now);
		snprintf(err, errlen, "before %s is later than now (%s): "
		    "expected a time no later than now", b, latest);
		return AUDIT_PRUNE_FUTURE;
	}
	if (before > now - retention_s) {
		fmt_utc(latest, sizeof(latest), now - retention_s);
		fmt_span(span, sizeof(span), retention_s);
		snprintf(err, errlen, "before %s would delete rows younger than "
		    "audit-retention (%s): expected a time no later than %s",
		    b, span, latest);
		return AUDIT_PRUNE_RETAINED;
	}
	return AUDIT_PRUNE_OK;
}

int
audit_prune(struct audit *a, int64_t before, const struct actor *who,
    const char *reason, int64_t now, int64_t *pruned)
{
	struct sqldb		*h = db_conn(a->db);
	struct sqldb_stmt	*st = NULL;
	struct audit_event	 e;
	struct qrow		 r;
	int64_t			 through = 0, count = 0, seq;
	char			 last_hash[65], prev[65], detail[256];
	int			 nested, ok = 0;

	*pruned = 0;
	if (audit_flush(a) == -1)
		return -1;
	if (tx_begin(a, &nested) == -1)
		return -1;
	memset(&r, 0, sizeof(r));
	if (prep1(h, "SELECT seq, hash, (SELECT count(*) FROM "
	    "audit_log l WHERE l.seq <= m.seq) FROM audit_log m WHERE seq = "
	    "(SELECT max(seq) FROM audit_log WHERE ts < ?1)", &st) != 0)
		goto done;
	sqldb_bind_int64(st, 1, before);
	if (sqldb_step(st) == SQLDB_ROW) {
		through = sqldb_column_int64(st, 0);
		usbgw_strlcpy(last_hash, sqldb_column_text(st, 1) ?
		    sqldb_column_text(st, 1) : "",
		    sizeof(last_hash));
		count = sqldb_column_int64(st, 2);
	}
	sqldb_finalize(st);
	st = NULL;
	if (through == 0) {
		ok = 1;
		goto done;
	}
	snprintf(detail, sizeof(detail), "through_seq=%" PRId64 " last_hash=%s "
	    "rows=%" PRId64 " before=%" PRId64, through, last_hash, count,
	    before);
	memset(&e, 0, sizeof(e));
	e.event = AUDIT_EVENT_PRUNE;
	e.who = who;
	e.reason = reason;
	e.detail = detail;
	qrow_fill(&r, &e, now);
	if (read_head(a, &seq, prev) == -1 || write_row(a, &r, &seq, prev) == -1)
		goto done;
	if (prep1(h, "INSERT INTO audit_prune_guard (through_seq) "
	    "VALUES (?1)", &st) != 0)
		goto done;
	sqldb_bind_int64(st, 1, through);
	if (sqldb_step(st) != SQLDB_DONE)
		goto done;
	sqldb_finalize(st);
	if (prep1(h, "DELETE FROM audit_log WHERE seq <= ?1", &st) != 0)
		goto done;
	sqldb_bind_int64(st, 1, through);
	if (sqldb_step(st) != SQLDB_DONE)
		goto done;
	*pruned = sqldb_changes(h);
	sqldb_finalize(st);
	st = NULL;
	if (sql(a, "DELETE FROM audit_prune_guard") == -1)
		goto done;
	ok = 1;
done:
	if (!ok)
		log_warnx("audit: prune: %s", sqldb_errmsg(h));
	sqldb_finalize(st);
	qrow_free(&r);
	if (tx_end(a, nested, ok) == -1) {
		*pruned = 0;
		return -1;
	}
	return 0;
}
