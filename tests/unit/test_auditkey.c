/*
 * The audit key and the keyed chain (issue 12, item 7): the key file
 * (created 0600 whatever the umask, whole or not at all, one winner when
 * several processes create it at once, refused when others may read it,
 * errors naming the file and line), row MACs from the key's since on
 * (an upgraded log's older rows stay verifiable; a keyed row stripped
 * of its MAC, or given another key's, is found), prunes with and
 * without the key, signed checkpoints, and the anchor line parser.
 */
#include <sys/stat.h>
#include <sys/wait.h>

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "db/audit.h"
#include "db/auditkey.h"
#include "db/db.h"
#include "base/log.h"
#include "tap.h"
#include "base/util.h"

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

static const char *
raw(struct db *db, const char *sql)
{
	static char	 msg[512];
	char		*e = NULL;

	if (sqlite3_exec(db_sqlite(db), sql, NULL, NULL, &e) == SQLITE_OK)
		return NULL;
	snprintf(msg, sizeof(msg), "%s", e ? e : "?");
	sqlite3_free(e);
	return msg;
}

static void
rows(struct audit *a, int n, int64_t ts)
{
	struct audit_event e;
	int i;

	memset(&e, 0, sizeof(e));
	e.event = "state";
	e.busid = "tc17:1-2";
	for (i = 0; i < n; i++)
		audit_append(a, &e, ts + i);
	audit_flush(a);
}

static void
write_file(const char *p, const char *text, mode_t mode)
{
	FILE *f;

	unlink(p);
	f = fopen(p, "w");
	fputs(text, f);
	fclose(f);
	chmod(p, mode);
}

static void
test_key_file(void)
{
	struct audit_key *k, *k2;
	struct stat st;
	char err[512];
	int missing, created;
	mode_t old;

	ok(audit_key_load(path("none.key"), 0, &missing, err, sizeof(err)) ==
	    NULL && missing, "a missing key file: missing");
	old = umask(0);
	k = audit_key_create(path("a.key"), 7, &created, err, sizeof(err));
	umask(old);
	ok(k != NULL && created, "create a key file with umask 0 (%s)",
	    k ? "" : err);
	ok(stat(path("a.key"), &st) == 0 && (st.st_mode & 0777) == 0600,
	    "... it is 0600 anyway");
	k2 = audit_key_create(path("a.key"), 9, &created, err, sizeof(err));
	ok(k2 != NULL && !created && audit_key_since(k2) == 7 &&
	    strcmp(audit_key_fpr(k), audit_key_fpr(k2)) == 0,
	    "never over an existing one: that one is loaded (since 7)");
	audit_key_free(k2);
	chmod(path("a.key"), 0644);
	ok(audit_key_create(path("a.key"), 9, &created, err, sizeof(err)) ==
	    NULL && strstr(err, "mode 0644: expected 0600") != NULL,
	    "... with every check of a load (%s)", err);
	chmod(path("a.key"), 0600);
	ok(symlink(path("a.key"), path("f.key")) == 0 &&
	    audit_key_create(path("f.key"), 9, &created, err, sizeof(err)) ==
	    NULL && !created, "a symbolic link in its place: refused, not "
	    "followed (%s)", err);
	ok(audit_key_create("/nonexistent-dir/a.key", 1, &created, err,
	    sizeof(err)) == NULL && strstr(err, "/nonexistent-dir/a.key: "
	    "cannot create it: No such file") != NULL, "no directory: %s", err);
	k2 = audit_key_load(path("a.key"), 0, &missing, err, sizeof(err));
	ok(k2 != NULL && audit_key_has_secret(k2) &&
	    audit_key_since(k2) == 7, "load it back: since 7");
	ok(k2 != NULL && strcmp(audit_key_fpr(k), audit_key_fpr(k2)) == 0,
	    "... the same key (fingerprint %s)", audit_key_fpr(k));
	audit_key_free(k2);
	chmod(path("a.key"), 0640);
	ok(audit_key_load(path("a.key"), 0, &missing, err, sizeof(err)) == NULL &&
	    !missing, "group-readable: refused");
	ok(strncmp(err, "audit key /tmp/", 15) == 0, "... naming the file");
	ok(strstr(err, "a.key: mode 0640: expected 0600") != NULL,
	    "... its mode and what is expected (%s)", err);
	chmod(path("a.key"), 0604);
	ok(audit_key_load(path("a.key"), 0, &missing, err, sizeof(err)) == NULL,
	    "world-readable: refused");

	write_file(path("b.key"), "usbgw-audit-key 1\nmac 00\n", 0600);
	ok(audit_key_load(path("b.key"), 0, &missing, err, sizeof(err)) == NULL,
	    "a short mac: refused");
	ok(strstr(err, "b.key:2: mac: expected 64 lowercase hex digits") !=
	    NULL, "... naming file, line and field (%s)", err);
	write_file(path("c.key"), "hello\n", 0600);
	ok(audit_key_load(path("c.key"), 0, &missing, err, sizeof(err)) == NULL &&
	    strstr(err, "c.key:1: expected \"usbgw-audit-key 1\" first") !=
	    NULL, "not a key file: %s", err);
	{
		char big[AUDIT_KEY_FILE_MAX + 10];

		memset(big, '#', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		write_file(path("d.key"), big, 0600);
	}
	ok(audit_key_load(path("d.key"), 0, &missing, err, sizeof(err)) == NULL &&
	    strstr(err, "larger than 4096 bytes") != NULL, "too large: %s",
	    err);
	chmod(path("a.key"), 0600);
	ok(symlink(path("a.key"), path("e.key")) == 0 &&
	    audit_key_load(path("e.key"), 0, &missing, err, sizeof(err)) == NULL,
	    "a symbolic link is not followed");
	audit_key_free(k);
}


/*
 * Gateways started at the same instant on one key path (protocol.md
 * 4.1): RACERS processes released together by a pipe each create the
 * key; every one must come back with a key, all the same one, exactly
 * one of them its creator, and nothing but the key left in the
 * directory.  ROUNDS rounds on fresh paths.
 */
#define RACERS	8
#define ROUNDS	25

static int
race_round(const char *kp, char fprs[RACERS][AUDIT_FPR_HEX + 3])
{
	int go[2], out[2], i, n, status, bad = 0;
	pid_t pids[RACERS];
	char c;

	if (pipe(go) == -1 || pipe(out) == -1)
		return -1;
	for (i = 0; i < RACERS; i++) {
		if ((pids[i] = fork()) == -1)
			return -1;
		if (pids[i] == 0) {
			struct audit_key *k;
			char err[512], line[AUDIT_FPR_HEX + 3];
			int created;

			close(go[1]);
			close(out[0]);
			if (read(go[0], &c, 1) != 0)	/* EOF: go */
				_exit(2);
			k = audit_key_create(kp, 1, &created, err, sizeof(err));
			snprintf(line, sizeof(line), "%c %s", k == NULL ? 'x' :
			    created ? 'c' : 'l', k != NULL ? audit_key_fpr(k) : "");
			if (k == NULL)
				fprintf(stderr, "# racer: %s\n", err);
			if (write(out[1], line, sizeof(line)) !=
			    (ssize_t)sizeof(line))
				_exit(3);
			audit_key_free(k);
			_exit(0);
		}
	}
	close(go[0]);
	close(out[1]);
	close(go[1]);				/* all of them at once */
	for (n = 0; n < RACERS; n++)
		if (read(out[0], fprs[n], sizeof(fprs[n])) !=
		    (ssize_t)sizeof(fprs[n]))
			break;
	close(out[0]);
	for (i = 0; i < RACERS; i++)
		if (waitpid(pids[i], &status, 0) == -1 || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0)
			bad++;
	return bad == 0 ? n : -1;
}

static void
test_key_race(void)
{
	char fprs[RACERS][AUDIT_FPR_HEX + 3], kp[128], sub[96];
	int r, i, n, failed = 0, created, same, extra = 0;
	struct dirent *de;
	DIR *d;

	for (r = 0; r < ROUNDS; r++) {
		snprintf(sub, sizeof(sub), "%s/race%d", dir, r);
		mkdir(sub, 0700);
		snprintf(kp, sizeof(kp), "%s/site.key", sub);
		if ((n = race_round(kp, fprs)) != RACERS) {
			diag("round %d: %d of %d racers answered", r, n, RACERS);
			failed++;
			continue;
		}
		for (i = 0, created = 0, same = 1; i < RACERS; i++) {
			if (fprs[i][0] == 'x' ||
			    strcmp(fprs[i] + 2, fprs[0] + 2) != 0)
				same = 0;
			created += fprs[i][0] == 'c';
		}
		if (!same || created != 1) {
			for (i = 0; i < RACERS; i++)
				diag("round %d: racer %d: %s %s", r, i,
				    fprs[i][0] == 'c' ? "created" : fprs[i][0] ==
				    'l' ? "loaded" : "failed", fprs[i] + 2);
			failed++;
		}
		if ((d = opendir(sub)) != NULL) {
			while ((de = readdir(d)) != NULL)
				if (strcmp(de->d_name, ".") != 0 &&
				    strcmp(de->d_name, "..") != 0 &&
				    strcmp(de->d_name, "site.key") != 0) {
					diag("round %d: left: %s", r, de->d_name);
					extra++;
				}
			closedir(d);
		}
	}
	ok(failed == 0, "%d processes creating one key file at once, %d "
	    "rounds: every one has the same key, one created it (%d rounds "
	    "failed)", RACERS,
	    ROUNDS, failed);
	ok(extra == 0, "... and only the key file is left (%d others)", extra);
}

static struct db *
open_db(const char *name)
{
	char err[DB_ERR_MAX];
	struct db *db;

	unlink(path(name));
	if ((db = db_open(path(name), err, sizeof(err))) == NULL) {
		diag("%s", err);
		abort();
	}
	return db;
}

static int
verify(struct db *db, const struct audit_key *k, struct audit_verify *v)
{
	struct audit_verify_opts o;

	memset(&o, 0, sizeof(o));
	o.key = k;
	return audit_verify_ex(db, &o, v);
}

static void
test_keyed_chain(void)
{
	struct db *db = open_db("keyed.db");
	struct audit *a = audit_new(db), *intruder;
	struct audit_key *k, *other;
	struct audit_verify v;
	int64_t n;
	struct actor op;

	rows(a, 5, 1000);			/* before the upgrade */
	k = audit_key_generate(6);
	audit_set_key(a, k);
	rows(a, 5, 1005);
	ok(verify(db, k, &v) == 0 && v.keyed && v.macs == 5 && v.rows == 10,
	    "upgraded log: 5 old rows by hash, 5 by MAC (%s)", v.reason);
	other = audit_key_generate(6);
	is_int(verify(db, other, &v), 1, "another key: not verified");
	is_str(v.reason, "seq 6: its MAC does not match (the row was changed, "
	    "or the chain recomputed, without the key)", "... at seq 6");

	/* a downgrade: a keyed row's MAC removed */
	ok(raw(db, "DROP TRIGGER audit_log_no_update; UPDATE audit_log SET mac "
	    "= NULL WHERE seq = 8") == NULL, "strip seq 8's MAC");
	is_int(verify(db, k, &v), 1, "found");
	is_str(v.reason, "seq 8: no MAC, but the key's chain starts at seq 6 "
	    "(the row was written or rewritten without the key)", "... at 8");
	is_int(verify(db, NULL, &v), 0, "(without the key: not visible)");

	/* an intruder with the code, without the key, appends and prunes */
	audit_free(a);
	db_close(db);
	db = open_db("keyed2.db");
	a = audit_new(db);
	audit_set_key(a, k);
	rows(a, 10, 1000);			/* since 6: rows 6.. keyed */
	intruder = audit_new(db);
	rows(intruder, 1, 2000);
	is_int(verify(db, k, &v), 1, "a row appended without the key: found");
	is_int(v.bad_seq, 11, "... at seq 11");
	audit_free(intruder);
	audit_free(a);
	db_close(db);

	db = open_db("keyed3.db");
	a = audit_new(db);
	k = (audit_key_free(k), audit_key_generate(1));
	audit_set_key(a, k);
	rows(a, 10, 1000);
	memset(&op, 0, sizeof(op));
	op.kind = ACTOR_OPERATOR;
	ok(audit_prune(a, 1005, &op, "retention", 3000, &n) == 0 && n == 5,
	    "the daemon prunes 5 rows");
	ok(verify(db, k, &v) == 0 && v.first_seq == 6, "the pruned log "
	    "verifies with the key (%s)", v.reason);
	intruder = audit_new(db);
	ok(audit_prune(intruder, 1008, &op, "cover", 3001, &n) == 0 && n == 3,
	    "an intruder without the key prunes 3 more");
	is_int(verify(db, k, &v), 1, "found with the key");
	is_int(v.bad_seq, 12, "... at the forged prune row (seq 12)");
	audit_free(intruder);
	audit_free(a);
	audit_key_free(k);
	audit_key_free(other);
	db_close(db);
}

static void
test_checkpoints(void)
{
	struct db *db = open_db("cp.db");
	struct audit *a = audit_new(db);
	struct audit_key *k = audit_key_generate(1), *pub;
	struct audit_anchor an, an2, back;
	struct audit_verify_opts o;
	struct audit_verify v;
	char pem[512], line[512], err[256];
	FILE *f;

	audit_set_key(a, k);
	memset(&an, 0, sizeof(an));
	is_int(audit_checkpoint(a, 5000, 0, &an), 0, "an empty log: nothing "
	    "to sign");
	rows(a, 4, 1000);
	is_int(audit_checkpoint(a, 5000, 0, &an), 1, "checkpoint the head");
	ok(an.seq == 4 && an.time == 5000 && strlen(an.sig) == 128,
	    "... seq 4, time, signature");
	is_int(audit_checkpoint(a, 5001, 0, &an2), 0, "again at the same "
	    "head: the stored one");
	is_str(an2.sig, an.sig, "... the same signature");
	audit_set_checkpoint_rows(a, 3);
	rows(a, 3, 1004);
	is_int((int)audit_checkpoint_seq(a), 7, "every 3 rows: one at seq 7");

	ok(audit_key_public_pem(k, pem, sizeof(pem)) == 0, "public key PEM");
	f = fopen(path("pub.pem"), "w");
	fputs(pem, f);
	fclose(f);
	pub = audit_key_load_public(path("pub.pem"), err, sizeof(err));
	ok(pub != NULL && !audit_key_has_secret(pub) &&
	    strcmp(audit_key_fpr(pub), audit_key_fpr(k)) == 0,
	    "load it back: public only, same fingerprint");
	ok(pub != NULL && audit_anchor_verify(pub, &an), "the anchor's "
	    "signature verifies with it");
	an2 = an;
	an2.seq = 3;
	ok(pub != NULL && !audit_anchor_verify(pub, &an2), "... not for "
	    "another seq");

	audit_anchor_format(&an, line, sizeof(line));
	is_int(audit_anchor_parse_line(line, strlen(line), &back, err,
	    sizeof(err)), 1, "the formatted anchor parses");
	ok(back.seq == an.seq && strcmp(back.hash, an.hash) == 0 &&
	    back.time == an.time && strcmp(back.sig, an.sig) == 0 &&
	    strcmp(back.key, an.key) == 0, "... to the same fields");

	memset(&o, 0, sizeof(o));
	o.key = pub;
	ok(audit_verify_ex(db, &o, &v) == 0 && v.anchors_checked == 2,
	    "the log verifies with the public key, 2 checkpoints (%s)",
	    v.reason);
	ok(raw(db, "INSERT INTO audit_checkpoints (seq, ts, hash, key, sig) "
	    "SELECT seq, ts, hash, key, substr(sig, 2) || '0' FROM "
	    "audit_checkpoints WHERE id = 1") == NULL, "a forged checkpoint");
	is_int(audit_verify_ex(db, &o, &v), 1, "found with the public key");
	ok(strncmp(v.reason, "checkpoint id 3 (seq 4): its signature does not "
	    "verify with the key ", 66) == 0, "... naming it: %s", v.reason);
	audit_key_free(pub);
	audit_free(a);
	audit_key_free(k);
	db_close(db);
}

static void
test_anchor_parse(void)
{
	static const char H[] = "0123456789abcdef0123456789abcdef"
	    "0123456789abcdef0123456789abcdef";
	static const struct {
		const char	*line;
		int		 want;
		const char	*err;
	} t[] = {
		{ "nothing here", 0, NULL },
		{ "usbgw-audit-anchor seq=5 hash=%s", 1, NULL },
		{ "Jan 1 usbgwd[1]: [info]: audit checkpoint: usbgw-audit-anchor "
		  "seq=5 hash=%s time=9", 1, NULL },
		{ "xusbgw-audit-anchor seq=5 hash=%s", 0, NULL },
		{ "usbgw-audit-anchor seq=5", -1, "expected seq=N and hash=H" },
		{ "usbgw-audit-anchor seq=0 hash=%s", -1,
		  "seq: expected a number from 1" },
		{ "usbgw-audit-anchor seq=5 seq=6 hash=%s", -1,
		  "\"seq\": expected one each of seq, hash, time, key, sig" },
		{ "usbgw-audit-anchor seq=5 hash=%s color=red", -1,
		  "\"color\": expected one each of seq, hash, time, key, sig" },
		{ "usbgw-audit-anchor seq=5 hash=%s sig=zz", -1,
		  "sig: expected 128 lowercase hex digits" },
		{ "usbgw-audit-anchor seq=5 hash=%s junk", -1,
		  "\"junk\": expected NAME=VALUE (seq, hash, time, key, sig)" },
		{ "usbgw-audit-anchor seq=99999999999999999999 hash=%s", -1,
		  "seq: expected a number from 1" },
	};
	struct audit_anchor a, many[3];
	char line[512], err[256];
	size_t i;

	for (i = 0; i < nitems(t); i++) {
		{	/* "%s" in the line stands for a valid hash */
			const char *pc = strstr(t[i].line, "%s");

			if (pc == NULL)
				snprintf(line, sizeof(line), "%s", t[i].line);
			else
				snprintf(line, sizeof(line), "%.*s%s%s",
				    (int)(pc - t[i].line), t[i].line, H, pc + 2);
		}
		err[0] = '\0';
		is_int(audit_anchor_parse_line(line, strlen(line), &a, err,
		    sizeof(err)), t[i].want, "parse: %.60s", t[i].line);
		if (t[i].err != NULL)
			is_str(err, t[i].err, "... %s", t[i].err);
	}
	snprintf(line, sizeof(line), "# kept\nusbgw-audit-anchor seq=1 hash=%s\n"
	    "other\nusbgw-audit-anchor seq=2 hash=%s", H, H);
	is_int(audit_anchor_parse(line, strlen(line), "f", many, 3, err,
	    sizeof(err)), 2, "a file: two anchors, other lines skipped");
	is_int(many[1].line, 4, "... the second on line 4");
	is_int(audit_anchor_parse(line, strlen(line), "f", many, 1, err,
	    sizeof(err)), -1, "more than allowed: refused");
	is_str(err, "f:4: more than 1 anchors", "... saying where");
	is_int(audit_anchor_parse("a\nb\n", 4, "g", many, 3, err, sizeof(err)),
	    -1, "no anchor at all: refused");
}

static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Not pass/fail: what the MAC costs a batched write and a verify. */
static void
test_cost(void)
{
	struct audit_verify v;
	struct audit_key *k = audit_key_generate(1);
	double t[4];
	int i, n = 20000;

	for (i = 0; i < 2; i++) {
		struct db *db = open_db(i ? "cost-k.db" : "cost.db");
		struct audit *a = audit_new(db);
		double t0;

		if (i)
			audit_set_key(a, k);
		t0 = now_us();
		rows(a, n, 1000);
		t[2 * i] = (now_us() - t0) / n;
		t0 = now_us();
		ok(verify(db, i ? k : NULL, &v) == 0 && v.rows == n,
		    "%d rows verify %s", n, i ? "with the key" : "by hash");
		t[2 * i + 1] = (now_us() - t0) / n;
		audit_free(a);
		db_close(db);
	}
	diag("audit cost per row: batched write %.2f us unkeyed, %.2f us "
	    "keyed; verify %.2f us by hash, %.2f us with MACs", t[0], t[2],
	    t[1], t[3]);
	audit_key_free(k);
}

int
main(void)
{
	log_init("test_auditkey", 1, LOG_LVL_ERR);
	snprintf(dir, sizeof(dir), "/tmp/usbgw-test-auditkey-XXXXXX");
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	test_key_file();
	test_key_race();
	test_keyed_chain();
	test_checkpoints();
	test_anchor_parse();
	test_cost();
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			diag("could not remove %s", dir);
	}
	return done_testing();
}
