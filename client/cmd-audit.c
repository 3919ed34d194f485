/*
 * usbgw audit [--since] [--device] | audit verify [anchors, keys,
 * --database] | audit anchor [-o FILE] | audit pubkey | audit prune
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "db/audit.h"
#include "db/auditkey.h"
#include "db/db.h"
#include "usbgw.h"
#include "db/sqldb.h"
#include "base/util.h"

static const struct cmd_opt list_opts[] = {
	{ "since", 0, "TIME", "rows from TIME on (a time, or a duration ago: "
	    "2h)" },
	{ "device", 'd', "BUSID", "rows about one device" },
	{ "limit", 'n', "N", "at most N rows (default 100)" },
	{ NULL, 0, NULL, NULL }
};

static const struct cmd_opt prune_opts[] = {
	{ "before", 0, "TIME", "delete rows older than TIME (or a duration "
	    "ago: 90d)" },
	{ NULL, 0, NULL, NULL }
};

static int
audit_exec(struct cmd_ctx *ctx)
{
	const char *since = arg_get(ctx, "since"), *dev = arg_get(ctx, "device");
	const char *limit = arg_get(ctx, "limit"), *es;
	struct table *t;
	json_t *args, *res, *r;
	char err[256], when[32], actor[128];
	long long n;
	time_t ts;
	size_t i;
	int st;

	args = json_object();
	if (since != NULL) {
		if (parse_since(since, time(NULL), &ts, err, sizeof(err)) != 0) {
			json_decref(args);
			return usage_error(ctx, "--since %s", err);
		}
		json_object_set_new(args, "since", json_integer(ts));
	}
	if (limit != NULL) {
		if (parse_num(limit, 1, 10000, &n, &es) != 0) {
			json_decref(args);
			return usage_error(ctx, "--limit %s: expected 1 to 10000",
			    limit);
		}
		json_object_set_new(args, "limit", json_integer(n));
	}
	if (dev != NULL)
		json_object_set_new(args, "device", json_string(dev));
	if ((st = cmd_call(ctx, "audit.list", args, &res)) != EXIT_OK ||
	    ctx->json)
		goto out;
	if (json_array_size(res) == 0) {
		printf("no audit rows\n");
		goto out;
	}
	t = table_new(7, "TIME", "BUSID", "ACTION", "FROM", "TO", "ACTOR",
	    "REASON");
	json_array_foreach(res, i, r) {
		fmt_time(when, sizeof(when),
		    json_integer_value(json_object_get(r, "time")));
		table_add(t, when, jfmt(r, "busid"), jstr2(r, "action", "event"),
		    jfmt(r, "from"), jfmt(r, "to"),
		    row_actor(r, actor, sizeof(actor)),
		    jstr2(r, "reason", "detail"));
	}
	table_print(t, stdout);
	table_free(t);
out:
	json_decref(res);
	return st;
}

static const struct cmd_opt verify_opts[] = {
	{ "anchor", 'a', "FILE", "compare with the anchors in FILE (from usbgw "
	    "audit anchor, or checkpoint lines of usbgwd's log)" },
	{ "seq", 0, "N", "compare row N's hash with --hash" },
	{ "hash", 0, "H", "the hash row --seq must have (64 hex digits)" },
	{ "pubkey", 0, "FILE", "check the anchors' and the stored checkpoints' "
	    "signatures with this public key (usbgw audit pubkey)" },
	{ "database", 0, "FILE", "verify this database file (or PostgreSQL "
	    "URI) here, without the daemon" },
	{ "key", 'k', "FILE", "with --database: the audit key file (secret): "
	    "check every row's MAC" },
	{ NULL, 0, NULL, NULL }
};

/* The anchors of --anchor FILE and of --seq/--hash, into *out. */
static int
read_anchors(struct cmd_ctx *ctx, struct audit_anchor **out, size_t *n)
{
	const char *file = arg_get(ctx, "anchor"), *seq = arg_get(ctx, "seq");
	const char *hash = arg_get(ctx, "hash");
	char err[512], line[256], *buf;
	size_t len = 0, cap = 1;
	ssize_t r;
	int fd, c;

	*out = NULL;
	*n = 0;
	if ((seq == NULL) != (hash == NULL))
		return usage_error(ctx, "--seq and --hash go together");
	if (file != NULL) {
		if ((fd = open(file, O_RDONLY | O_CLOEXEC)) == -1)
			return usage_error(ctx, "--anchor %s: %s", file,
			    strerror(errno));
		buf = xmalloc(AUDIT_ANCHOR_FILE_MAX + 1);
		while (len <= AUDIT_ANCHOR_FILE_MAX && (r = read(fd, buf + len,
		    AUDIT_ANCHOR_FILE_MAX + 1 - len)) > 0)
			len += (size_t)r;
		close(fd);
		if (len > AUDIT_ANCHOR_FILE_MAX) {
			free(buf);
			return usage_error(ctx, "--anchor %s: larger than %d "
			    "bytes: expected anchor lines", file,
			    AUDIT_ANCHOR_FILE_MAX);
		}
		cap = AUDIT_ANCHORS_MAX + 1;
		*out = xcalloc(cap, sizeof(**out));
		c = audit_anchor_parse(buf, len, file, *out, AUDIT_ANCHORS_MAX,
		    err, sizeof(err));
		free(buf);
		if (c == -1) {
			free(*out);
			*out = NULL;
			return usage_error(ctx, "%s", err);
		}
		*n = (size_t)c;
	}
	if (seq != NULL) {
		if (*out == NULL)
			*out = xcalloc(cap, sizeof(**out));
		snprintf(line, sizeof(line), "%s seq=%.24s hash=%.70s",
		    AUDIT_ANCHOR_TAG, seq, hash);
		if (strchr(seq, ' ') != NULL || strchr(hash, ' ') != NULL ||
		    audit_anchor_parse_line(line, strlen(line), &(*out)[*n],
		    err, sizeof(err)) != 1) {
			free(*out);
			*out = NULL;
			return usage_error(ctx, "--seq %s --hash %s: %s", seq, hash,
			    strchr(seq, ' ') || strchr(hash, ' ') ? "no spaces" :
			    err);
		}
		(*n)++;
	}
	return EXIT_OK;
}

static int
print_verify(struct cmd_ctx *ctx, int r, const char *reason, long long rows,
    const char *msg)
{
	if (r == 0)
		printf("audit trail intact: %lld rows (", rows);
	else
		printf("audit trail does NOT verify: ");
	print_safe(stdout, r == 0 ? msg : reason);
	printf("%s\n", r == 0 ? ")" : "");
	return r == 0 ? EXIT_OK : r == 2 ? EXIT_CUT : EXIT_REFUSED;
}

/* --database: verify a file here; the daemon is not asked. */
static int
verify_local(struct cmd_ctx *ctx, struct audit_anchor *an, size_t n,
    struct audit_key *pub)
{
	const char *path = arg_get(ctx, "database"), *kf = arg_get(ctx, "key");
	struct audit_verify_opts o;
	struct audit_verify v;
	struct audit_key *key = NULL;
	struct db *db;
	char err[512], msg[256];
	int missing, r, st;

	if (kf != NULL && (key = audit_key_load(kf, geteuid() == 0, &missing, err,
	    sizeof(err))) == NULL)
		return usage_error(ctx, "--key: %s", err);
	if (key != NULL && pub != NULL &&
	    strcmp(audit_key_fpr(key), audit_key_fpr(pub)) != 0) {
		audit_key_free(key);
		return usage_error(ctx, "--key %s and --pubkey are not one key "
		    "pair (%s, %s)", kf, audit_key_fpr(key), audit_key_fpr(pub));
	}
	if ((db = db_open_readonly(path, err, sizeof(err))) == NULL) {
		audit_key_free(key);
		fprintf(stderr, "usbgw: --database %s\n", err);
		return EXIT_NOTFOUND;
	}
	memset(&o, 0, sizeof(o));
	o.key = key != NULL ? key : pub;
	o.anchors = an;
	o.nanchors = n;
	o.anchor_name = arg_get(ctx, "anchor");
	o.anchor_what = "the anchor";
	r = audit_verify_ex(db, &o, &v);
	if (r == -1) {
		fprintf(stderr, "usbgw: %s: %s\n", sqldb_name(db_conn(db)),
		    sqldb_errmsg(db_conn(db)));
		st = EXIT_INTERNAL;
	} else if (ctx->json) {
		json_t *j = json_pack("{s:b, s:I, s:I, s:s, s:s, s:b, s:b, s:I, "
		    "s:I, s:I}", "ok", r == 0, "rows", (json_int_t)v.rows,
		    "bad_seq", (json_int_t)v.bad_seq, "message", r == 0 ?
		    "chain intact" : v.reason, "head", v.head, "keyed",
		    v.keyed != 0, "cut", r == 2, "macs", (json_int_t)v.macs,
		    "anchors_checked", (json_int_t)v.anchors_checked,
		    "anchors_pruned", (json_int_t)v.anchors_pruned);
		print_json(j);
		json_decref(j);
		st = r == 0 ? EXIT_OK : r == 2 ? EXIT_CUT : EXIT_REFUSED;
	} else {
		snprintf(msg, sizeof(msg), "chain intact%s, %lld anchors and "
		    "checkpoints matched%s", v.keyed ? ", every keyed row's MAC "
		    "checked" : o.key != NULL ? ", signatures checked" :
		    ", no key: unsigned", (long long)v.anchors_checked,
		    v.anchors_pruned > 0 ? ", some anchors are older than the "
		    "first kept row (pruned) and were not checked" : "");
		st = print_verify(ctx, r, v.reason, (long long)v.rows, msg);
	}
	db_close(db);
	audit_key_free(key);
	return st;
}

static int
audit_verify_exec(struct cmd_ctx *ctx)
{
	const char *pubf = arg_get(ctx, "pubkey");
	struct audit_anchor *an = NULL;
	struct audit_key *pub = NULL;
	json_t *res = NULL, *args, *arr;
	char err[512];
	size_t n = 0, i;
	int st;

	if (arg_get(ctx, "key") != NULL && arg_get(ctx, "database") == NULL)
		return usage_error(ctx, "--key goes with --database (the daemon "
		    "holds its own key)");
	if ((st = read_anchors(ctx, &an, &n)) != EXIT_OK)
		return st;
	if (pubf != NULL && (pub = audit_key_load_public(pubf, err,
	    sizeof(err))) == NULL) {
		free(an);
		return usage_error(ctx, "--pubkey: %s", err);
	}
	if (arg_get(ctx, "database") != NULL) {
		st = verify_local(ctx, an, n, pub);
		goto out;
	}
	/* the daemon verifies; signatures first here, with our own key */
	for (i = 0; pub != NULL && i < n; i++)
		if (an[i].sig[0] != '\0' && !audit_anchor_verify(pub, &an[i])) {
			printf("audit trail does NOT verify: %s:%d: the signature "
			    "does not verify with the public key %s\n",
			    arg_get(ctx, "anchor"), an[i].line,
			    audit_key_fpr(pub));
			st = EXIT_REFUSED;
			goto out;
		}
	args = json_object();
	if (n > 0) {
		arr = json_array();
		for (i = 0; i < n; i++) {
			json_t *o = json_pack("{s:I, s:s}", "seq",
			    (json_int_t)an[i].seq, "hash", an[i].hash);

			if (an[i].time != 0)
				json_object_set_new(o, "time",
				    json_integer(an[i].time));
			if (an[i].key[0] != '\0')
				json_object_set_new(o, "key",
				    json_string(an[i].key));
			if (an[i].sig[0] != '\0')
				json_object_set_new(o, "sig",
				    json_string(an[i].sig));
			json_array_append_new(arr, o);
		}
		json_object_set_new(args, "anchors", arr);
	}
	if ((st = cmd_call(ctx, "audit.verify", args, &res)) != EXIT_OK)
		goto out;
	if (json_is_true(json_object_get(res, "ok")))
		st = EXIT_OK;
	else if (json_is_true(json_object_get(res, "cut")))
		st = EXIT_CUT;
	else
		st = EXIT_REFUSED;
	if (!ctx->json)
		print_verify(ctx, st == EXIT_OK ? 0 : st == EXIT_CUT ? 2 : 1,
		    jstr(res, "message"), (long long)json_integer_value(
		    json_object_get(res, "rows")), jstr(res, "message"));
out:
	json_decref(res);
	audit_key_free(pub);
	free(an);
	return st;
}

static const struct cmd_opt anchor_opts[] = {
	{ "output", 'o', "FILE", "write the anchor line to FILE" },
	{ NULL, 0, NULL, NULL }
};

static int
audit_anchor_exec(struct cmd_ctx *ctx)
{
	const char *file = arg_get(ctx, "output"), *line;
	json_t *res;
	FILE *f;
	int st;

	if ((st = cmd_call(ctx, "audit.anchor", NULL, &res)) != EXIT_OK)
		goto out;
	line = jstr(res, "line");
	if (strncmp(line, AUDIT_ANCHOR_TAG " ", sizeof(AUDIT_ANCHOR_TAG)) != 0 ||
	    strchr(line, '\n') != NULL) {
		fprintf(stderr, "usbgw: the daemon sent no anchor line\n");
		st = EXIT_INTERNAL;
		goto out;
	}
	if (file != NULL) {
		if ((f = fopen(file, "we")) == NULL) {
			fprintf(stderr, "usbgw: %s: %s\n", file, strerror(errno));
			st = EXIT_INTERNAL;
			goto out;
		}
		fprintf(f, "%s\n", line);
		if (fclose(f) != 0) {
			fprintf(stderr, "usbgw: %s: %s\n", file, strerror(errno));
			st = EXIT_INTERNAL;
			goto out;
		}
	}
	if (!ctx->json)
		printf("%s\n", line);
out:
	json_decref(res);
	return st;
}

static int
audit_pubkey_exec(struct cmd_ctx *ctx)
{
	json_t *res;
	int st;

	if ((st = cmd_call(ctx, "audit.pubkey", NULL, &res)) == EXIT_OK &&
	    !ctx->json)
		printf("%s", jstr(res, "pem"));
	json_decref(res);
	return st;
}

static int
audit_prune_exec(struct cmd_ctx *ctx)
{
	const char *before = arg_get(ctx, "before");
	json_t *res;
	char err[256], when[32];
	time_t ts;
	int st;

	if (before == NULL)
		return usage_error(ctx, "--before is required");
	if (parse_since(before, time(NULL), &ts, err, sizeof(err)) != 0)
		return usage_error(ctx, "--before %s", err);
	st = cmd_call(ctx, "audit.prune", json_pack("{s:I}", "before",
	    (json_int_t)ts), &res);
	if (st == EXIT_OK && !ctx->json) {
		fmt_time(when, sizeof(when), (json_int_t)ts);
		printf("deleted %s audit rows older than %s\n",
		    jfmt(res, "deleted"), when);
	}
	json_decref(res);
	return st;
}

const struct cmd_entry cmd_audit_entry = {
	"audit", "[--since TIME] [--device BUSID] [--limit N] [--json]",
	"show the audit log: every transition, who did it and why",
	PRIV_READ, 0, 0, list_opts, audit_exec
};
const struct cmd_entry cmd_audit_verify_entry = {
	"audit verify", "[--anchor FILE] [--seq N --hash H] [--pubkey FILE] "
	"[--database FILE [--key FILE]] [--json]",
	"check the audit trail is intact (exit 1 if a row is bad, 6 if it "
	"was cut short)",
	PRIV_READ, 0, 0, verify_opts, audit_verify_exec
};
const struct cmd_entry cmd_audit_anchor_entry = {
	"audit anchor", "[-o FILE] [--json]",
	"sign the audit log's head and print it as an anchor line to keep "
	"elsewhere",
	PRIV_READ, 0, 0, anchor_opts, audit_anchor_exec
};
const struct cmd_entry cmd_audit_pubkey_entry = {
	"audit pubkey", "[--json]",
	"print the public key that signs the audit checkpoints (PEM)",
	PRIV_READ, 0, 0, NULL, audit_pubkey_exec
};
const struct cmd_entry cmd_audit_prune_entry = {
	"audit prune", "--before TIME",
	"delete audit rows older than TIME",
	PRIV_ADMIN, 0, 0, prune_opts, audit_prune_exec
};
