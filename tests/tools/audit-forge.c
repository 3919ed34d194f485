/*
 * audit-forge: the "database writer" attacker of the audit log, for
 * tests.  It holds write access to the database file and nothing else
 * (no key file), and re-chains the log with plain SHA-256 as the
 * unkeyed chain is computed (protocol.md 1.8), written here again from
 * the documented format, not from gateway/db/audit.c.
 *
 *	audit-forge DB edit SQL		run SQL (UPDATE, DELETE) on the log
 *	audit-forge DB rechain SEQ	recompute prev_hash and hash of every
 *					row from SEQ on (after editing one)
 *	audit-forge DB strip		set every row's mac to NULL (when the
 *					column exists: pretend no key was used)
 *
 * The append-only triggers are dropped and put back as they were, so
 * the file looks untouched to anyone who reads its schema.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <sqlite3.h>

#define NCOLS	16

static sqlite3 *h;

static void
die(const char *what)
{
	fprintf(stderr, "audit-forge: %s: %s\n", what, h ? sqlite3_errmsg(h) :
	    "?");
	exit(1);
}

static void
exec(const char *sql)
{
	if (sqlite3_exec(h, sql, NULL, NULL, NULL) != SQLITE_OK)
		die(sql);
}

static void
put_be(unsigned char *b, uint64_t v, int n)
{
	int i;

	for (i = n - 1; i >= 0; i--) {
		b[i] = (unsigned char)(v & 0xff);
		v >>= 8;
	}
}

/* "usbgw-audit-1" || prev || the 16 columns by storage class, hex. */
static void
plain_hash(const char *prev, sqlite3_stmt *st, char out[65])
{
	static const char hex[] = "0123456789abcdef";
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	unsigned char md[32], b[9];
	unsigned int n;
	uint64_t u;
	double d;
	int i;

	EVP_DigestInit_ex(c, EVP_sha256(), NULL);
	EVP_DigestUpdate(c, "usbgw-audit-1", 13);
	EVP_DigestUpdate(c, prev, 64);
	for (i = 0; i < NCOLS; i++) {
		switch (sqlite3_column_type(st, i)) {
		case SQLITE_INTEGER:
			b[0] = 1;
			put_be(b + 1, (uint64_t)sqlite3_column_int64(st, i), 8);
			EVP_DigestUpdate(c, b, 9);
			break;
		case SQLITE_FLOAT:
			b[0] = 3;
			d = sqlite3_column_double(st, i);
			memcpy(&u, &d, 8);
			put_be(b + 1, u, 8);
			EVP_DigestUpdate(c, b, 9);
			break;
		case SQLITE_TEXT:
		case SQLITE_BLOB:
			b[0] = sqlite3_column_type(st, i) == SQLITE_TEXT ? 2 : 4;
			put_be(b + 1, (uint64_t)sqlite3_column_bytes(st, i), 4);
			EVP_DigestUpdate(c, b, 5);
			EVP_DigestUpdate(c, sqlite3_column_blob(st, i),
			    (size_t)sqlite3_column_bytes(st, i));
			break;
		default:
			b[0] = 0;
			EVP_DigestUpdate(c, b, 1);
		}
	}
	EVP_DigestFinal_ex(c, md, &n);
	EVP_MD_CTX_free(c);
	for (i = 0; i < 32; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[64] = '\0';
}

/*
 * Drop every trigger of the database; the SQL to create them again.
 * (Whatever the schema version: the attacker reads it from the file.)
 */
static char *
drop_triggers(void)
{
	sqlite3_stmt *st;
	size_t len = 1;
	char *all = calloc(1, 1), *names = calloc(1, 1), drop[256];
	size_t nlen = 1;

	if (sqlite3_prepare_v2(h, "SELECT name, sql FROM sqlite_master WHERE "
	    "type = 'trigger'", -1, &st, NULL) != SQLITE_OK)
		die("triggers");
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *n = (const char *)sqlite3_column_text(st, 0);
		const char *s = (const char *)sqlite3_column_text(st, 1);

		len += strlen(s) + 2;
		all = realloc(all, len);
		strcat(all, s);
		strcat(all, ";");
		snprintf(drop, sizeof(drop), "DROP TRIGGER \"%s\";", n);
		nlen += strlen(drop);
		names = realloc(names, nlen);
		strcat(names, drop);
	}
	sqlite3_finalize(st);
	exec(names);
	free(names);
	return all;
}

static void
rechain(int64_t from)
{
	sqlite3_stmt *st, *up;
	char prev[65], hash[65];

	if (sqlite3_prepare_v2(h, "SELECT seq, ts, event, device_id, busid, "
	    "exporter, object, old_state, new_state, actor, actor_uid, "
	    "actor_name, rule_id, host, reason, detail, prev_hash FROM "
	    "audit_log WHERE seq >= ?1 ORDER BY seq", -1, &st, NULL) !=
	    SQLITE_OK ||
	    sqlite3_prepare_v2(h, "UPDATE audit_log SET prev_hash = ?1, hash = "
	    "?2 WHERE seq = ?3", -1, &up, NULL) != SQLITE_OK)
		die("prepare");
	sqlite3_bind_int64(st, 1, from);
	prev[0] = '\0';
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (prev[0] == '\0')	/* the first row keeps its prev_hash */
			snprintf(prev, sizeof(prev), "%s",
			    (const char *)sqlite3_column_text(st, 16));
		plain_hash(prev, st, hash);
		sqlite3_bind_text(up, 1, prev, 64, SQLITE_TRANSIENT);
		sqlite3_bind_text(up, 2, hash, 64, SQLITE_TRANSIENT);
		sqlite3_bind_int64(up, 3, sqlite3_column_int64(st, 0));
		if (sqlite3_step(up) != SQLITE_DONE)
			die("update");
		sqlite3_reset(up);
		memcpy(prev, hash, 65);
	}
	sqlite3_finalize(st);
	sqlite3_finalize(up);
}

int
main(int argc, char **argv)
{
	char *trig;

	if (argc < 3 || (strcmp(argv[2], "strip") != 0 && argc != 4)) {
		fprintf(stderr, "usage: audit-forge DB edit SQL | rechain SEQ | "
		    "strip\n");
		return 2;
	}
	if (sqlite3_open(argv[1], &h) != SQLITE_OK)
		die(argv[1]);
	sqlite3_busy_timeout(h, 10000);
	exec("BEGIN IMMEDIATE");
	trig = drop_triggers();
	if (strcmp(argv[2], "rechain") == 0)
		rechain(strtoll(argv[3], NULL, 10));
	else if (strcmp(argv[2], "edit") == 0)
		exec(argv[3]);
	else if (strcmp(argv[2], "strip") == 0) {
		if (sqlite3_exec(h, "UPDATE audit_log SET mac = NULL", NULL,
		    NULL, NULL) != SQLITE_OK)
			fprintf(stderr, "audit-forge: strip: no mac column\n");
	} else {
		fprintf(stderr, "audit-forge: unknown command %s\n", argv[2]);
		return 2;
	}
	exec(trig);
	exec("COMMIT");
	free(trig);
	sqlite3_close(h);
	return 0;
}
