/*
 * Persistence and audit for the daemon core, on the SQLite layer
 * (db.c) and the chained audit log (audit.c).
 *
 * Writes are grouped per loop pass: the first write opens a transaction
 * (db_batch()) and a zero-delay timer commits it at the end of the
 * pass; audit rows are queued and written in one transaction of their
 * own right after.  A burst of transitions (a claim storm: identity,
 * presence, state rows for thousands of devices) costs two commits, not
 * one per row.  Decisions an operator waits for flush at once.  Database errors are logged and never stop the gateway: the
 * device keeps working from memory and the audit queue holds rows
 * (bounded) until the database accepts them again.
 */
#include <sys/file.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "base/counters.h"
#include "base/log.h"
#include "base/util.h"
#include "control/config.h"
#include "core/loop.h"
#include "core/store.h"
#include "db/audit.h"
#include "db/auditkey.h"
#include "db/db.h"
#include "db/sqldb.h"
#include "policy/decision.h"

static struct db	*db;
static int		 lock_fd = -1;
static struct audit	*audit;
static struct event	*flush_ev;
static struct sqldb_stmt *st_history;
static struct audit_key	*akey;		/* the audit key (auditkey.h) */
static struct event	*cp_ev;		/* checkpoint timer */
static unsigned		 cp_rows = 1000, cp_interval_ms = 3600 * 1000;
/* The store's health (protocol.md 4.6): degraded while unreachable. */
static bool		 st_down;
static uint64_t		 st_down_since;	/* now_usec() */
static struct event	*health_ev;
static void		(*health_fn)(bool down);

struct db *
store_db(void)
{
	return db;
}

static int64_t
now_s(void)
{
	return (int64_t)time(NULL);
}

/* ---- the store's health (protocol.md 4.6) -------------------------------- */

bool
store_degraded(void)
{
	return st_down;
}

uint64_t
store_degraded_ms(void)
{
	return st_down ? (now_usec() - st_down_since) / 1000 : 0;
}

void
store_on_health(void (*fn)(bool down))
{
	health_fn = fn;
}

/*
 * Is the database there?  sqldb_alive() notices a connection the server
 * closed without a round trip and, on a lost one, drives the attempt to
 * connect again (its backoff).  A change is logged and told to the
 * daemon (store_on_health()), which fails closed while degraded and
 * reconciles when the store is back.
 */
void
store_health_check(void)
{
	bool down;

	if (db == NULL)
		return;
	down = !sqldb_alive(db_conn(db));
	if (down == st_down)
		return;
	st_down = down;
	if (down) {
		st_down_since = now_usec();
		cnt.store_lost++;
		log_warnx("database %s: unreachable (%s): degraded, nothing new "
		    "is authorized until it returns", sqldb_name(db_conn(db)),
		    sqldb_errmsg(db_conn(db)));
	} else
		log_info("database %s: reachable again after %llu ms",
		    sqldb_name(db_conn(db)), (unsigned long long)((now_usec() -
		    st_down_since) / 1000));
	if (health_fn != NULL)
		health_fn(down);
}

static void
health_cb(evutil_socket_t fd, short what, void *arg)
{
	store_health_check();
}

static int flush_failed;	/* the last flush_cb's outcome */

static void
flush_cb(evutil_socket_t fd, short what, void *arg)
{
	unsigned lost;
	int failed = 0;

	if (db != NULL && db_batch_commit(db, &lost) == -1) {
		log_warnx("database: the writes of this loop pass were lost "
		    "(%u statements): %s; the gateway goes on from memory",
		    lost, db_errmsg(db));
		failed = 1;
	}
	if (audit != NULL && audit_pending(audit) > 0 && audit_flush(audit) == -1) {
		log_warnx("audit: flush failed: %s; %zu rows held",
		    sqldb_errmsg(db_conn(db)), audit_pending(audit));
		failed = 1;
	}
	flush_failed = failed;
	/* a failed write is the first sign of a lost server: look now */
	if (failed && health_ev != NULL)
		store_health_check();
}

static void
flush_soon(void)
{
	struct timeval tv = { 0, 0 };

	if (flush_ev != NULL && !evtimer_pending(flush_ev, NULL))
		evtimer_add(flush_ev, &tv);
}

/* The first write of a loop pass opened a batch: commit it at its end. */
static void
batch_opened(void *arg)
{
	flush_soon();
}

int
store_flush(void)
{
	flush_cb(-1, 0, NULL);
	return flush_failed ? -1 : 0;
}

/*
 * Writes that take access away (an approval ended, a revocation
 * recorded) and failed because the store was away: kept here and
 * written first when it is back (store_replay_unwritten), so that
 * neither the reconcile, which reads the approvals from the store, nor
 * a restart brings back what was withdrawn (protocol.md 4.6).  Both
 * writes are idempotent.  Bounded: past the bound the loss is logged
 * (the revocation still holds in memory until a restart).
 */
#define UNWRITTEN_MAX	4096
static struct unwritten {
	int64_t		 approval_id;	/* 0: a setting */
	char		 a[64];		/* why, or the setting's key */
	char		 b[64];		/* by, or its value */
	int64_t		 when;
} *unw;
static size_t nunw;
static bool unw_warned;

static void
unwritten_add(int64_t approval_id, const char *a, const char *b,
    int64_t when)
{
	struct unwritten *u;

	if (unw == NULL && (unw = calloc(UNWRITTEN_MAX, sizeof(*unw))) == NULL)
		fatal("calloc");
	if (nunw == UNWRITTEN_MAX) {
		if (!unw_warned)
			log_warnx("database: more than %d withdrawals wait for "
			    "the store: the next ones hold only until a "
			    "restart", UNWRITTEN_MAX);
		unw_warned = true;
		return;
	}
	u = &unw[nunw++];
	u->approval_id = approval_id;
	usbgw_strlcpy(u->a, a, sizeof(u->a));
	usbgw_strlcpy(u->b, b, sizeof(u->b));
	u->when = when;
}

size_t
store_unwritten(void)
{
	return nunw;
}

int
store_replay_unwritten(void)
{
	size_t i, n = nunw;

	if (db == NULL || n == 0)
		return 0;
	for (i = 0; i < n; i++) {
		struct unwritten *u = &unw[i];

		if ((u->approval_id > 0 ? db_approval_end(db, u->approval_id,
		    u->a, u->b, u->when) : db_setting_set(db, u->a, u->b,
		    u->when)) == -1)
			break;
	}
	if (i < n || store_flush() == -1) {
		log_warnx("database: %zu withdrawals made while it was away "
		    "are still not written: %s", n, db_errmsg(db));
		return -1;
	}
	log_info("database: %zu withdrawals made while it was away written",
	    n);
	nunw = 0;
	unw_warned = false;
	return 0;
}

/* The pid a lock file names, 0 if it names none. */
static long
lock_holder(int fd)
{
	char	 buf[32], *end;
	ssize_t	 n;
	long	 pid;

	if ((n = pread(fd, buf, sizeof(buf) - 1, 0)) <= 0)
		return 0;
	buf[n] = '\0';
	pid = strtol(buf, &end, 10);
	if (pid <= 0 || (*end != '\n' && *end != '\0'))
		return 0;
	return pid;
}

/*
 * One daemon per database: two would poll the same exporters and claim
 * the same devices.  The daemon holds an exclusive flock(2) on
 * DATABASE.lock, a file of its own (SQLite's POSIX locks on the database
 * file are left alone), for its whole life: the kernel drops it when the
 * process dies, however it dies, so no stale lock blocks a restart.  The
 * file holds the holder's pid for the refusal message; the lock, not the
 * pid, decides.  A flock belongs to the open file description, so the
 * child of daemon(3) keeps it (store_lock_owner() then writes its pid);
 * O_CLOEXEC keeps it from the hooks the daemon runs.
 */
int
store_lock(const char *path, char *err, size_t errlen)
{
	struct stat	 st;
	char		*lpath;
	long		 pid;
	int		 fd;

	if (path[0] == '\0' || strcmp(path, ":memory:") == 0)
		return 0;
	/* a PostgreSQL database is shared by design: no file to hold */
	if (sqldb_is_pg(path))
		return 0;
	xasprintf(&lpath, "%s.lock", path);
	if ((fd = open(lpath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY,
	    0600)) == -1) {
		snprintf(err, errlen, "lock file %s: %s", lpath, strerror(errno));
		free(lpath);
		return -1;
	}
	while (flock(fd, LOCK_EX | LOCK_NB) == -1) {
		if (errno == EINTR)
			continue;
		if (errno != EWOULDBLOCK)
			snprintf(err, errlen, "lock file %s: %s", lpath,
			    strerror(errno));
		else if ((pid = lock_holder(fd)) != 0)
			snprintf(err, errlen, "database %s is in use by usbgwd "
			    "pid %ld", path, pid);
		else
			snprintf(err, errlen, "database %s is in use by another "
			    "usbgwd (lock file %s)", path, lpath);
		close(fd);
		free(lpath);
		return -1;
	}
	/* it says no more than a pid, but keep it like the database */
	if (fstat(fd, &st) == 0 && (st.st_mode & 077) != 0)
		(void)fchmod(fd, 0600);
	free(lpath);
	lock_fd = fd;
	store_lock_owner();
	return 0;
}

/* Write this process's pid into the lock file (again, after a fork). */
void
store_lock_owner(void)
{
	char	buf[32];
	int	n;

	if (lock_fd == -1)
		return;
	n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
	if (ftruncate(lock_fd, 0) == -1 ||
	    pwrite(lock_fd, buf, (size_t)n, 0) != n)
		log_warn("database lock file: cannot write the pid");
}

/* A signed checkpoint when rows were written since the last one. */
static void
checkpoint_cb(evutil_socket_t fd, short what, void *arg)
{
	int64_t seq;
	char hash[65];

	if (audit == NULL || akey == NULL)
		return;
	store_flush();
	if (audit_written(audit, &seq, hash) == 1 &&
	    seq > audit_checkpoint_seq(audit))
		audit_checkpoint(audit, now_s(), 0, NULL);
}

static void
checkpoint_arm(void)
{
	struct timeval tv;

	if (cp_ev == NULL)
		return;
	tv.tv_sec = cp_interval_ms / 1000;
	tv.tv_usec = (cp_interval_ms % 1000) * 1000;
	evtimer_add(cp_ev, &tv);
}

void
store_audit_settings(unsigned rows, unsigned interval_ms)
{
	cp_rows = rows;
	cp_interval_ms = interval_ms > 0 ? interval_ms : 3600 * 1000;
	if (audit != NULL)
		audit_set_checkpoint_rows(audit, cp_rows);
	checkpoint_arm();
}

/* path with its ".key" suffix (if any) replaced by ".pub". */
static void
pub_path(const char *keypath, char *out, size_t len)
{
	size_t n = strlen(keypath);

	if (n > 4 && strcmp(keypath + n - 4, ".key") == 0)
		n -= 4;
	snprintf(out, len, "%.*s.pub", (int)n, keypath);
}

/*
 * Write the public key (not secret) beside the key, for auditors.  The
 * temporary file is this process's own (mkostemp): gateways sharing the
 * key path write it at the same instant at start.
 */
static void
write_pub(const char *keypath)
{
	char path[CONFIG_PATH_MAX + 8], tmp[CONFIG_PATH_MAX + 16], pem[512];
	int fd, n;

	pub_path(keypath, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
	if (audit_key_public_pem(akey, pem, sizeof(pem)) == -1)
		return;
	n = (int)strlen(pem);
	if ((fd = mkostemp(tmp, O_CLOEXEC)) == -1) {
		log_warn("audit public key %s", path);
		return;
	}
	if (fchmod(fd, 0644) == -1 || write(fd, pem, (size_t)n) != n ||
	    close(fd) == -1 || rename(tmp, path) == -1) {
		log_warn("audit public key %s", path);
		unlink(tmp);
	}
}

/* The newest row: does it carry this key's MAC?  1 yes/none due, 0 no. */
static int
head_mac_ok(int64_t *seq)
{
	struct sqldb_stmt *st;
	char		 mac[65];
	int		 ok = 1;

	*seq = 0;
	if ((st = sqldb_prepare(db_conn(db), "SELECT seq, hash, mac FROM "
	    "audit_log ORDER BY seq DESC LIMIT 1")) == NULL)
		return 1;
	if (sqldb_step(st) == SQLDB_ROW) {
		const char *h = sqldb_column_text(st, 1);
		const char *m = sqldb_column_text(st, 2);

		*seq = sqldb_column_int64(st, 0);
		if (*seq >= audit_key_since(akey))
			ok = h != NULL && m != NULL && strlen(h) == 64 &&
			    audit_key_mac(akey, *seq, h, mac) == 0 &&
			    strcmp(mac, m) == 0;
	}
	sqldb_finalize(st);
	return ok;
}

/* The rows that carry a MAC: how many, first and last seq. */
static int64_t
keyed_rows(int64_t *first, int64_t *last)
{
	struct sqldb_stmt *st;
	int64_t		 n = 0;

	*first = *last = 0;
	if ((st = sqldb_prepare(db_conn(db), "SELECT count(*), min(seq), "
	    "max(seq) FROM audit_log WHERE mac IS NOT NULL")) == NULL)
		return -1;
	if (sqldb_step(st) == SQLDB_ROW) {
		n = sqldb_column_int64(st, 0);
		*first = sqldb_column_int64(st, 1);
		*last = sqldb_column_int64(st, 2);
	}
	sqldb_finalize(st);
	return n;
}

/*
 * Load the audit key, or create it on a log that has no keyed row yet
 * (a new database, or one from before keys): rows from the next seq on
 * carry its MAC.  A log with keyed rows and no key file is refused: a
 * new key would report every one of them as forged, and a deleted key
 * must not pass unnoticed.
 */
static int
key_open(const char *dbpath, const char *keypath, int *created)
{
	char		 path[CONFIG_PATH_MAX + 8], err[512], hash[65];
	int64_t		 seq, first, last, n;
	int		 missing;

	*created = 0;
	if (dbpath[0] == '\0' || strcmp(dbpath, ":memory:") == 0) {
		audit_head(db, &seq, hash);
		if ((akey = audit_key_generate(seq + 1)) == NULL)
			return -1;
		log_info("audit key: in memory only (database %s)", dbpath);
		return 0;
	}
	if (keypath != NULL && keypath[0] != '\0')
		usbgw_strlcpy(path, keypath, sizeof(path));
	else if (sqldb_is_pg(dbpath))	/* no file beside a URI */
		usbgw_strlcpy(path, STORE_PG_AUDIT_KEY, sizeof(path));
	else
		snprintf(path, sizeof(path), "%s.key", dbpath);
	if ((akey = audit_key_load(path, 0, &missing, err, sizeof(err))) != NULL)
		goto loaded;
	if (!missing) {
		log_warnx("%s", err);
		return -1;
	}
	if ((n = keyed_rows(&first, &last)) != 0) {
		log_warnx("audit key %s is missing, but the audit log has keyed "
		    "rows (seq %lld to %lld): restore the key file (a new key "
		    "would not verify them)", path, (long long)first,
		    (long long)last);
		return -1;
	}
	/*
	 * Another gateway starting at the same instant may create it too:
	 * the first to link its file wins, the others load that one.
	 */
	err[0] = '\0';
	if (audit_head(db, &seq, hash) == -1 || (akey = audit_key_create(path,
	    seq + 1, created, err, sizeof(err))) == NULL) {
		log_warnx("%s", err[0] ? err : "audit key: cannot create it");
		return -1;
	}
	if (*created)
		log_info("audit key %s created: rows from seq %lld on carry its "
		    "MAC", path, (long long)(seq + 1));
	else
		log_info("audit key %s: created at the same instant by another "
		    "gateway: that one loaded", path);
loaded:
	write_pub(path);
	log_info("audit key %s: public key %s, keyed chain from seq %lld", path,
	    audit_key_fpr(akey), (long long)audit_key_since(akey));
	return 0;
}

int
store_open(const char *target, const char *keypath)
{
	char path[256];		/* for messages: no password */

	char err[DB_ERR_MAX], detail[256];
	int64_t seq;
	int created;

	sqldb_redact(target, path, sizeof(path));
	if ((db = db_open(target, err, sizeof(err))) == NULL) {
		log_warnx("database %s: %s", path, err);
		return -1;
	}
	if ((audit = audit_new(db)) == NULL) {
		log_warnx("database %s: cannot start the audit log", path);
		return -1;
	}
	if (key_open(target, keypath, &created) == -1)
		return -1;
	audit_set_key(audit, akey);
	audit_set_checkpoint_rows(audit, cp_rows);
	if (created) {
		snprintf(detail, sizeof(detail), "created: rows from seq %lld on "
		    "carry its MAC; public key %s", (long long)audit_key_since(
		    akey), audit_key_fpr(akey));
		store_audit("audit-key", NULL, "audit key", detail);
	} else if (!head_mac_ok(&seq)) {
		log_warnx("audit: the newest row (seq %lld) does not carry this "
		    "key's MAC: the audit log or the key file was replaced; run "
		    "usbgw audit verify", (long long)seq);
		snprintf(detail, sizeof(detail), "at start: the newest row (seq "
		    "%lld) does not carry the key's MAC", (long long)seq);
		store_audit("audit-tampered", NULL, "audit_log", detail);
	}
	if ((st_history = sqldb_prepare(db_conn(db),
	    "SELECT " STORE_AUDIT_COLUMNS " FROM audit_log "
	    "WHERE device_id = ?1 OR (device_id IS NULL AND "
	    "busid = ?2) ORDER BY seq DESC LIMIT ?3")) == NULL) {
		log_warnx("database %s: %s", path, db_errmsg(db));
		return -1;
	}
	if (gw != NULL) {
		flush_ev = evtimer_new(gw->base, flush_cb, NULL);
		db_batch(db, batch_opened, NULL);
		cp_ev = event_new(gw->base, -1, EV_PERSIST, checkpoint_cb, NULL);
		checkpoint_arm();
		/* a SQLite file does not go away: no health checks there */
		if (sqldb_kind(db_conn(db)) == SQLDB_PG) {
			struct timeval tv = { 0, STORE_HEALTH_MS * 1000 };

			health_ev = event_new(gw->base, -1, EV_PERSIST,
			    health_cb, NULL);
			evtimer_add(health_ev, &tv);
		}
	}
	log_info("database %s (schema version %d)", path, db_version(db));
	return 0;
}

void
store_close(void)
{
	store_flush();
	/* the head as it is now, signed: the last anchor of this run */
	if (audit != NULL && akey != NULL)
		audit_checkpoint(audit, now_s(), 0, NULL);
	if (flush_ev != NULL)
		event_free(flush_ev);
	flush_ev = NULL;
	if (cp_ev != NULL)
		event_free(cp_ev);
	cp_ev = NULL;
	if (health_ev != NULL)
		event_free(health_ev);
	health_ev = NULL;
	sqldb_finalize(st_history);
	st_history = NULL;
	audit_free(audit);
	audit = NULL;
	audit_key_free(akey);
	akey = NULL;
	db_close(db);
	db = NULL;
	if (lock_fd != -1)
		close(lock_fd);		/* last: the database is closed */
	lock_fd = -1;
}

/*
 * log-format = json: each audited event is also a structured log line
 * (event, busid, exporter, host), so log shippers see the decisions with
 * their fields; the text log keeps its own lines.
 */
static void
log_audit_event(const struct audit_event *ev)
{
	struct log_ctx ctx = { ev->event, ev->busid, ev->exporter, ev->host };
	char msg[1024];
	size_t n = 0;

#define ADD(...) do { if (n < sizeof(msg)) n += (size_t)snprintf(msg + n, \
	sizeof(msg) - n, __VA_ARGS__); } while (0)
	ADD("%s", ev->event);
	if (ev->old_state != NULL || ev->new_state != NULL)
		ADD(" %s -> %s", ev->old_state ? ev->old_state : "-",
		    ev->new_state ? ev->new_state : "-");
	if (ev->who != NULL && ev->who->kind != ACTOR_SYSTEM)
		ADD(" by %s", ev->who->name);
	if (ev->object != NULL)
		ADD(" [%s]", ev->object);
	if (ev->reason != NULL)
		ADD(": %s", ev->reason);
	if (ev->detail != NULL)
		ADD(" (%s)", ev->detail);
#undef ADD
	log_ctx(LOG_LVL_INFO, &ctx, "%s", msg);
}

static void
append(struct audit_event *ev)
{
	static const struct actor sys = { .kind = ACTOR_SYSTEM, .name = "system" };

	if (audit == NULL)
		return;
	if (ev->who == NULL)
		ev->who = &sys;
	audit_append(audit, ev, now_s());
	cnt.audit_rows++;
	flush_soon();
	if (log_json())
		log_audit_event(ev);
}

/*
 * The attach row's detail: "host leg tcp, exporter leg tls (certificate
 * tc17)".  Certificate names passed the CN's character check (tlsid.c).
 */
static void
legs_text(const struct db_legs *l, char *buf, size_t len)
{
	snprintf(buf, len, "host leg %s%s%s%s, exporter leg %s%s%s%s",
	    l->transport, l->host_cert != NULL ? " (certificate " : "",
	    l->host_cert != NULL ? l->host_cert : "",
	    l->host_cert != NULL ? ")" : "", l->up_transport,
	    l->up_cert != NULL ? " (certificate " : "",
	    l->up_cert != NULL ? l->up_cert : "", l->up_cert != NULL ? ")" : "");
}

void
store_device_state(struct device *dev, enum dev_state old,
    const struct actor *who, const char *reason, int64_t rule_id)
{
	struct audit_event ev;
	struct db_legs legs;
	char detail[2 * TLSID_NAME_MAX + 96];

	if (db != NULL && dev->id != 0) {
		db_device_set_state(db, dev->id, dev->state,
		    who != NULL && who->kind == ACTOR_RULE ? who->rule_id :
		    dev->rule_id, now_s());
		if (dev->state == DEV_GONE) {
			db_presence_end(db, dev->id, reason ? reason : "gone",
			    now_s());
			dev->presence_id = 0;
		}
	}
	memset(&ev, 0, sizeof(ev));
	ev.event = "state";
	ev.device_id = dev->id;
	ev.busid = dev->busid;
	ev.exporter = dev->exp->name;
	ev.old_state = dev_state_name(old);
	ev.new_state = dev_state_name(dev->state);
	ev.who = who;
	ev.host = dev->ds != NULL ? dev->ds->host : NULL;
	ev.reason = reason;
	ev.rule_id = rule_id;
	if (dev->state == DEV_ATTACHED) {
		store_attachment_legs(dev, dev->ds, &legs);
		legs_text(&legs, detail, sizeof(detail));
		ev.detail = detail;
	}
	append(&ev);
	if (who != NULL && who->kind == ACTOR_OPERATOR)
		store_flush();
}

/*
 * The probe is done: find or make the device's row for this identity
 * and open (or continue) its presence.  A different identity at the same
 * gateway busid is a different device: the old row goes gone.  Also
 * loads whether an operator revoked the device for this presence.
 * Writes the audit rows of what it recorded; decides nothing.
 */
int
store_device_identity(const struct device *dev,
    const struct usbgw_identity *idp, struct store_identity *si)
{
	struct usbgw_identity id = *idp;
	struct db_device old;
	struct audit_event ev;
	int created = 0;
	int64_t now = now_s(), rid, holder;

	memset(si, 0, sizeof(*si));
	if (db == NULL)
		return -1;
	/* one indexed look-up: the row that holds this busid now */
	holder = db_device_busid_holder(db, dev->busid);
	if (holder > 0 && db_device_get(db, holder, &old) == 1 &&
	    (strcmp(old.ident.hash, id.hash) != 0 ||
	    strcmp(old.ident.serial, id.serial) != 0 ||
	    strcmp(old.ident.manufacturer, id.manufacturer) != 0 ||
	    strcmp(old.ident.product, id.product) != 0 ||
	    old.exporter_id != dev->exp->id)) {
		db_device_set_state(db, holder, DEV_GONE, 0, now);
		db_presence_end(db, holder, "identity changed", now);
		si->old_id = holder;
		usbgw_strlcpy(si->old_hash, old.ident.hash, sizeof(si->old_hash));
	}
	rid = db_device_upsert(db, dev->exp->id, &id, now, &created);
	if (rid <= 0) {
		log_warnx("%s: cannot record the device: %s", dev->busid,
		    db_errmsg(db));
		return -1;
	}
	si->id = rid;
	si->created = created != 0;
	si->presence_id = db_presence_current(db, rid);
	if (si->presence_id == 0)
		si->presence_id = db_presence_begin(db, rid, dev->busid, now);

	/* an operator's revoke holds for the rest of the presence */
	{
		char key[48], val[32];

		snprintf(key, sizeof(key), "revoked.%lld", (long long)rid);
		if (db_setting_get(db, key, val, sizeof(val)) == 1 &&
		    si->presence_id != 0 &&
		    strtoll(val, NULL, 10) == si->presence_id)
			si->revoked = true;
	}

	memset(&ev, 0, sizeof(ev));
	ev.event = created ? "new-device" : "probed";
	ev.device_id = rid;
	ev.busid = dev->busid;
	ev.exporter = dev->exp->name;
	ev.detail = dev->ident.hash;
	append(&ev);
	if (si->old_id != 0) {
		char msg[160];

		snprintf(msg, sizeof(msg), "descriptor hash %.16s... -> %.16s...",
		    si->old_hash, dev->ident.hash);
		ev.event = "identity-change";
		ev.detail = msg;
		append(&ev);
	}
	return 0;
}

struct approvals_load {
	struct approval	*out;
	size_t		 max, n;
};

static int
approvals_load_cb(void *arg, const struct db_approval *a)
{
	struct approvals_load *l = arg;
	struct approval *p;
	char err[160];

	if (a->scope == SCOPE_PERMANENT)
		return 0;	/* its rule decides */
	if (l->n == l->max)
		return 1;
	p = &l->out[l->n];
	memset(p, 0, sizeof(*p));
	/* a stored limit that no longer parses matches no host: fail closed */
	if (host_match_parse(a->to_host, true, &p->to, err, sizeof(err)) == -1) {
		log_warnx("approval %lld: host limit \"%.64s\": %s; it applies "
		    "to no host", (long long)a->id, a->to_host, err);
		if (!a->deny)
			return 0;
		memset(&p->to, 0, sizeof(p->to));
	}
	p->id = a->id;
	p->deny = a->deny != 0;
	p->override = a->override != 0;
	p->scope = a->scope;
	p->expires_at = a->expires_at;
	p->by.kind = a->actor_uid >= 0 ? ACTOR_OPERATOR : ACTOR_SYSTEM;
	p->by.uid = a->actor_uid >= 0 ? (uid_t)a->actor_uid : 0;
	usbgw_strlcpy(p->by.name, a->actor_name, sizeof(p->by.name));
	l->n++;
	return 0;
}

/* The device's active operator decisions (permanent ones are rules). */
size_t
store_approvals_load(int64_t device_id, int64_t presence_id,
    struct approval *out, size_t max)
{
	struct approvals_load l = { out, max, 0 };

	if (db == NULL || device_id == 0)
		return 0;
	if (db_approvals_list(db, device_id, presence_id, now_s(),
	    approvals_load_cb, &l) == -1)
		log_warnx("device %lld: cannot load approvals: %s",
		    (long long)device_id, db_errmsg(db));
	return l.n;
}

/*
 * An attachment's two legs as the records say them: the host leg is the
 * session's (no session: local mode's direct attachment, the gateway's
 * own vhci), the exporter leg the claim's connection (a claim always has
 * one while a host is attached; "tcp" otherwise, the column's default).
 */
void
store_attachment_legs(const struct device *dev, const struct dsession *ds,
    struct db_legs *legs)
{
	legs->transport = ds != NULL ? dsession_transport(ds) : "local";
	legs->host_cert = ds != NULL && ds->tls ? ds->cert.name : NULL;
	legs->up_transport = upstream_transport(dev->up);
	if (legs->up_transport == NULL)
		legs->up_transport = "tcp";
	legs->up_cert = upstream_cert(dev->up);
}

void
store_attachment_begin(struct device *dev, struct dsession *ds,
    const struct decision *d)
{
	struct db_legs legs;

	if (db == NULL || dev->id == 0)
		return;
	store_attachment_legs(dev, ds, &legs);
	dev->attach_id = db_attachment_begin(db, dev->id, dev->presence_id,
	    d->approval_id, d->rule_id, "proxy",
	    ds->host_name[0] ? ds->host_name : NULL, ds->host, &legs, now_s());
	if (dev->attach_id < 0)
		dev->attach_id = 0;
}

void
store_attachment_end(struct device *dev, const char *why)
{
	struct db_counters c;

	if (db == NULL || dev->attach_id == 0)
		return;
	memset(&c, 0, sizeof(c));
	c.bytes_to_device = dev->bytes_up;
	c.bytes_from_device = dev->bytes_down;
	c.urbs_from_device = dev->urbs;
	c.urbs_to_device = dev->urbs;
	c.iface_refused = dev->refused;
	db_attachment_end(db, dev->attach_id, &c, why, now_s());
	dev->attach_id = 0;
}

static const char *const scope_text[] = { "once", "for", "until",
    "permanent" };

/*
 * Record an operator's decision (row_scope: what the operator asked
 * for; a permanent one names the rule it wrote) and its audit row.
 * Returns the approvals row id, or -1.
 */
int64_t
store_approval_add(const struct device *dev, const struct approval *p,
    enum approve_scope row_scope, int64_t rule_id, const char *message)
{
	struct db_approval a;
	struct audit_event ev;
	char detail[192], to[HOST_NAME_MAX_LEN + 1];
	int64_t id = -1;

	host_match_format(&p->to, to, sizeof(to));
	memset(&a, 0, sizeof(a));
	a.device_id = dev->id;
	a.presence_id = dev->presence_id;
	a.deny = p->deny;
	a.override = p->override;
	a.scope = row_scope;
	usbgw_strlcpy(a.to_host, to, sizeof(a.to_host));
	a.created_at = now_s();
	a.expires_at = p->expires_at;
	a.actor_uid = p->by.kind == ACTOR_OPERATOR ? (int64_t)p->by.uid : -1;
	usbgw_strlcpy(a.actor_name, p->by.name, sizeof(a.actor_name));
	usbgw_strlcpy(a.reason, message, sizeof(a.reason));
	a.rule_id = rule_id;
	if (db != NULL && dev->id != 0)
		id = db_approval_add(db, &a);

	memset(&ev, 0, sizeof(ev));
	ev.event = p->deny ? "deny" : "approve";
	ev.device_id = dev->id;
	ev.busid = dev->busid;
	ev.exporter = dev->exp->name;
	ev.who = &p->by;
	ev.host = to[0] ? to : NULL;
	ev.reason = message;
	snprintf(detail, sizeof(detail), "scope %s", scope_text[row_scope]);
	if (p->expires_at) {
		char t[32];

		snprintf(detail + strlen(detail), sizeof(detail) - strlen(detail),
		    ", expires %s", usbgw_fmt_utc(t, sizeof(t), p->expires_at));
	}
	if (rule_id)
		snprintf(detail + strlen(detail), sizeof(detail) - strlen(detail),
		    ", rule %lld", (long long)rule_id);
	if (p->override)
		snprintf(detail + strlen(detail), sizeof(detail) - strlen(detail),
		    ", override of the admin rules");
	ev.detail = detail;
	append(&ev);
	store_flush();
	return id;
}

/*
 * A decision about a device this gateway does not hold (protocol.md
 * 4.2): the approval, denial or revocation is written for the present
 * device with that busid, with its audit row, and committed at once;
 * the holder applies it when the change feed brings it.  revoke ends
 * every active decision and marks the presence revoked (what
 * device_revoke() writes).  1 recorded, 0 no present device with that
 * busid, -1 the store failed (err says why).
 */
int
store_remote_decision(const char *busid, int kind, const struct approve_opts *o,
    const struct actor *who, int64_t *device_id, char *err, size_t errlen)
{
	struct db_approval a;
	struct audit_event ev;
	int64_t did = 0, pid = 0;
	char detail[192], key[48], val[32];
	int rc;

	if (db == NULL) {
		snprintf(err, errlen, "no database");
		return -1;
	}
	if ((rc = db_device_present(db, busid, &did, &pid)) != 1) {
		if (rc == -1)
			snprintf(err, errlen, "database: %s", db_errmsg(db));
		return rc;
	}
	*device_id = did;
	memset(&ev, 0, sizeof(ev));
	ev.device_id = did;
	ev.busid = busid;
	ev.who = who;
	ev.reason = o->message[0] ? o->message : NULL;
	if (kind == STORE_REMOTE_REVOKE) {
		snprintf(key, sizeof(key), "revoked.%lld", (long long)did);
		snprintf(val, sizeof(val), "%lld", (long long)pid);
		if (db_approvals_end_device(db, did, "revoked", who->name,
		    now_s()) == -1 ||
		    db_setting_set(db, key, val, now_s()) == -1)
			goto fail;
		ev.event = "revoke";
		ev.detail = "at a gateway that does not hold the device";
	} else {
		memset(&a, 0, sizeof(a));
		a.device_id = did;
		a.presence_id = pid;
		a.deny = kind == STORE_REMOTE_DENY;
		a.override = o->override;
		a.scope = o->scope;
		usbgw_strlcpy(a.to_host, o->to_host, sizeof(a.to_host));
		a.created_at = now_s();
		a.expires_at = o->expires_at;
		a.actor_uid = who->kind == ACTOR_OPERATOR ? (int64_t)who->uid : -1;
		usbgw_strlcpy(a.actor_name, who->name, sizeof(a.actor_name));
		usbgw_strlcpy(a.reason, o->message, sizeof(a.reason));
		if (db_approval_add(db, &a) <= 0)
			goto fail;
		if (!a.deny) {
			/* a revocation ends with a new approval (device_approve) */
			snprintf(key, sizeof(key), "revoked.%lld", (long long)did);
			if (db_setting_set(db, key, "0", now_s()) == -1)
				goto fail;
		}
		ev.event = a.deny ? "deny" : "approve";
		ev.host = o->to_host[0] ? o->to_host : NULL;
		snprintf(detail, sizeof(detail), "scope %s%s, at a gateway that "
		    "does not hold the device", scope_text[o->scope],
		    o->expires_at ? " (expires)" : "");
		ev.detail = detail;
	}
	append(&ev);
	store_flush();
	return 1;
fail:
	snprintf(err, errlen, "database: cannot record the decision: %s",
	    db_errmsg(db));
	return -1;
}

/* An approval ended: why, and who ended it (NULL: the system). */
void
store_approval_end(const struct device *dev, int64_t id, const char *why,
    const struct actor *by)
{
	const char *who = by != NULL ? by->name : "system";

	if (db == NULL || id <= 0)
		return;
	/*
	 * At once, not with the loop pass: an approval that ended (used
	 * once, expired, withdrawn) and came back after a crash would
	 * allow the device again.  A store that is away: written when it
	 * is back.
	 */
	if (db_approval_end(db, id, why, who, now_s()) == -1 ||
	    store_flush() == -1)
		unwritten_add(id, why != NULL ? why : "", who, now_s());
}

void
store_audit_device(struct device *dev, const char *action,
    const struct actor *who, const char *detail)
{
	struct audit_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.event = action;
	ev.device_id = dev != NULL ? dev->id : 0;
	ev.busid = dev != NULL ? dev->busid : NULL;
	ev.exporter = dev != NULL ? dev->exp->name : NULL;
	ev.who = who;
	ev.host = dev != NULL && dev->ds != NULL ? dev->ds->host : NULL;
	ev.detail = detail;
	append(&ev);
}

void
store_audit_request(const char *action, struct device *dev,
    const char *busid, const char *host, const char *peer,
    const char *detail)
{
	struct audit_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.event = action;
	ev.device_id = dev != NULL ? dev->id : 0;
	ev.busid = dev != NULL ? dev->busid : busid;
	ev.exporter = dev != NULL ? dev->exp->name : NULL;
	ev.host = host;
	ev.object = peer;
	ev.detail = detail;
	append(&ev);
}

void
store_audit(const char *action, const struct actor *who, const char *object,
    const char *detail)
{
	struct audit_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.event = action;
	ev.object = object;
	ev.who = who;
	ev.detail = detail;
	append(&ev);
}

int64_t
store_access_request(struct device *dev, struct dsession *ds)
{
	struct audit_event ev;
	int64_t id = 0;

	if (db != NULL)
		id = db_access_request_add(db, dev->id, dev->busid,
		    ds->host_name[0] ? ds->host_name : NULL, ds->host,
		    "waiting", now_s());
	memset(&ev, 0, sizeof(ev));
	ev.event = "access-request";
	ev.device_id = dev->id;
	ev.busid = dev->busid;
	ev.exporter = dev->exp->name;
	ev.host = ds->host;
	ev.old_state = dev_state_name(dev->state);
	append(&ev);
	return id > 0 ? id : -1;
}

/* A held or refused access request's end, linked to what decided it. */
void
store_access_outcome(int64_t request_id, const char *outcome,
    const struct decision *d)
{
	if (db != NULL && request_id > 0)
		db_access_request_decide(db, request_id, outcome,
		    d != NULL ? d->actor.name : "system",
		    d != NULL ? d->approval_id : 0, now_s());
}

/*
 * One audit row, selected as STORE_AUDIT_COLUMNS, as the control
 * protocol shows it (audit.list, show's history).
 */
json_t *
store_audit_row_json(struct sqldb_stmt *st)
{
	static const char *const names[] = { "id", "time", "action", "busid",
	    "from", "to", "actor", "actor_uid", "actor_name", "rule_id",
	    "host", "reason", "detail", "exporter", "object" };
	json_t *o = json_object();
	int i;

	for (i = 0; i < (int)nitems(names); i++) {
		switch (sqldb_column_type(st, i)) {
		case SQLITE_INTEGER:
			json_object_set_new(o, names[i],
			    json_integer(sqldb_column_int64(st, i)));
			break;
		case SQLITE_TEXT:
			json_object_set_new(o, names[i], json_string(
			    sqldb_column_text(st, i)));
			break;
		default:
			json_object_set_new(o, names[i], json_null());
			break;
		}
	}
	return o;
}

json_t *
store_device_history(struct device *dev, int limit)
{
	json_t *a = json_array();

	if (db == NULL)
		return a;
	store_flush();
	sqldb_reset(st_history);
	sqldb_bind_int64(st_history, 1, dev->id);
	sqldb_bind_text(st_history, 2, dev->busid);
	sqldb_bind_int64(st_history, 3, limit);
	while (sqldb_step(st_history) == SQLDB_ROW)
		json_array_insert_new(a, 0, store_audit_row_json(st_history));
	sqldb_reset(st_history);
	return a;
}

void
store_exporter_put(struct exporter *exp)
{
	int64_t id;

	if (db == NULL)
		return;
	id = db_exporter_upsert(db, exp->name, exp->host, exp->port, now_s());
	if (id > 0) {
		exp->id = id;
		db_exporter_set_kind(db, id, exp_kind_name(exp->kind),
		    exp_tls_name(exp->tls));
		db_exporter_set_source(db, id, exp->source == EXP_SRC_FILE ?
		    "file" : "cli", exp->source == EXP_SRC_FILE ? exp->origin :
		    NULL);
	}
}

void
store_exporter_save(struct exporter *exp, const struct actor *who)
{
	struct audit_event ev;
	char detail[400];

	if (db == NULL)
		return;
	store_exporter_put(exp);
	memset(&ev, 0, sizeof(ev));
	ev.event = "exporter-add";
	ev.exporter = exp->name;
	ev.object = exp->name;
	ev.who = who;
	if (exp->kind == EXP_KIND_DIALOUT)
		snprintf(detail, sizeof(detail), "agent from %s%s%s", exp->host,
		    exp->tls != EXP_TLS_OFF ? " tls=" : "", exp->tls !=
		    EXP_TLS_OFF ? exp_tls_name(exp->tls) : "");
	else
		snprintf(detail, sizeof(detail), "%s:%u%s%s", exp->host,
		    exp->port, exp->kind == EXP_KIND_AGENT ? " agent" : "",
		    exp->tls == EXP_TLS_REQUIRED ? " tls=required" : "");
	if (exp->source == EXP_SRC_FILE && exp->origin[0] != '\0') {
		usbgw_strlcat(detail, " (", sizeof(detail));
		usbgw_strlcat(detail, exp->origin, sizeof(detail));
		usbgw_strlcat(detail, ")", sizeof(detail));
	}
	ev.detail = detail;
	append(&ev);
}

void
store_exporter_drop(struct exporter *exp)
{
	if (db != NULL)
		db_exporter_remove(db, exp->name, now_s());
}

void
store_exporter_delete(struct exporter *exp, const struct actor *who,
    const char *detail)
{
	struct audit_event ev;

	if (db == NULL)
		return;
	store_exporter_drop(exp);
	memset(&ev, 0, sizeof(ev));
	ev.event = "exporter-remove";
	ev.exporter = exp->name;
	ev.object = exp->name;
	ev.who = who;
	ev.detail = detail;
	append(&ev);
}

void
store_exporter_status(struct exporter *exp)
{
	if (db != NULL && exp->id > 0)
		db_exporter_status(db, exp->id, exp->state == EXP_UP ? "up" :
		    exp->state == EXP_DOWN ? "down" : "unknown", now_s());
}

void
store_exporter_seen(struct exporter *exp)
{
	if (db != NULL && exp->id > 0 && exp->last_seen > 0 &&
	    db_exporter_seen(db, exp->id, exp->last_seen) == 0)
		exp->seen_saved = exp->last_seen;
}

void
store_exporter_error(struct exporter *exp)
{
	if (db != NULL && exp->id > 0)
		db_exporter_error(db, exp->id, exp->last_error[0] != '\0' ?
		    exp->last_error : NULL, exp->last_error_at);
}

/* Every exporter the database knows (not removed). */
int
store_exporters_foreach(int (*cb)(void *, const struct db_exporter *),
    void *arg)
{
	if (db == NULL)
		return -1;
	return db_exporter_foreach(db, cb, arg) == -1 ? -1 : 0;
}

int
store_audit_prune(int64_t before, const struct actor *who, int64_t *pruned)
{
	if (audit == NULL)
		return -1;
	if (audit_prune(audit, before, who, "audit prune", now_s(), pruned) ==
	    -1)
		return -1;
	/* the kept rows' predecessor, signed and logged */
	if (akey != NULL)
		audit_checkpoint(audit, now_s(), 0, NULL);
	return 0;
}

/* ---- what a killed daemon left open -------------------------------------- */

struct open_rows {
	struct db_open_row	*v;
	size_t			 n, cap;
};

static int
open_rows_add(void *arg, const struct db_open_row *r)
{
	struct open_rows *o = arg;

	if (o->n == o->cap) {
		o->cap = o->cap ? o->cap * 2 : 16;
		o->v = xreallocarray(o->v, o->cap, sizeof(*o->v));
	}
	o->v[o->n++] = *r;
	return 0;
}

/* One audit row for a row closed at start: "restart-closed", OBJECT. */
static void
audit_restart_closed(const char *object, int64_t device_id, const char *busid,
    const char *exporter, const char *host, const char *reason,
    const char *detail)
{
	struct audit_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.event = "restart-closed";
	ev.object = object;
	ev.device_id = device_id;
	ev.busid = busid[0] != '\0' ? busid : NULL;
	ev.exporter = exporter[0] != '\0' ? exporter : NULL;
	ev.host = host[0] != '\0' ? host : NULL;
	ev.reason = reason;
	ev.detail = detail;
	append(&ev);
}

/*
 * At start, after the database lock is taken: close what the previous
 * run left open because it ended without closing it (SIGKILL, a crash,
 * power loss).  A proxy attachment's connections died with that process,
 * and so did every held import; a local one is local mode's to adopt or
 * end (keep_local), unless this run is not in local mode.  Each row
 * closed gets one audit row (event restart-closed, object "attachment N"
 * or "access-request N", reason: why).  Returns the number closed.
 */
int
store_close_stale(bool keep_local, const char *why, const char *exporter)
{
	struct open_rows o = { NULL, 0, 0 };
	char object[48], detail[96];
	int64_t now = now_s();
	size_t i;
	int n = 0;

	if (db == NULL)
		return 0;
	if (db_open_attachments_foreach(db, !keep_local, open_rows_add,
	    &o) == -1)
		log_warnx("database: cannot read the open attachments: %s",
		    db_errmsg(db));
	for (i = 0; i < o.n; i++) {
		const struct db_open_row *r = &o.v[i];

		if (exporter != NULL && strcmp(r->exporter, exporter) != 0)
			continue;
		if (db_attachment_close(db, r->id, why, now) != 1)
			continue;
		snprintf(object, sizeof(object), "attachment %lld",
		    (long long)r->id);
		snprintf(detail, sizeof(detail), "%s mode; traffic counted "
		    "up to the last save", r->mode);
		audit_restart_closed(object, r->device_id, r->busid,
		    r->exporter, r->host, why, detail);
		n++;
	}
	o.n = 0;
	if (db_waiting_requests_foreach(db, open_rows_add, &o) == -1)
		log_warnx("database: cannot read the waiting access requests: "
		    "%s", db_errmsg(db));
	for (i = 0; i < o.n; i++) {
		const struct db_open_row *r = &o.v[i];

		if (exporter != NULL && strcmp(r->exporter, exporter) != 0)
			continue;
		if (db_access_request_decide(db, r->id, "interrupted",
		    "system", 0, now) != 1)
			continue;
		snprintf(object, sizeof(object), "access-request %lld",
		    (long long)r->id);
		audit_restart_closed(object, r->device_id, r->busid,
		    r->exporter, r->host, why, "outcome interrupted: the "
		    "host's held import was cut off with the process");
		n++;
	}
	free(o.v);
	if (n > 0) {
		log_info("closed %d rows the previous run left open", n);
		store_flush();
	}
	return n;
}

struct settle {
	int64_t		 exporter_id;
	int		(*present)(void *, const char *exporter_busid);
	void		*arg;
	int64_t		*ids;
	size_t		 n, cap;
};

static int
settle_cb(void *arg, const struct db_device *d)
{
	struct settle *s = arg;

	if (d->exporter_id != s->exporter_id ||
	    s->present(s->arg, d->ident.exporter_busid))
		return 0;
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 16;
		s->ids = xreallocarray(s->ids, s->cap, sizeof(*s->ids));
	}
	s->ids[s->n++] = d->id;
	return 0;
}

/*
 * The exporter's device lists since this start showed no device at
 * these rows' ports (present() says which ports it has): the devices
 * left while no gateway was watching.  Their rows go gone and their
 * presences end (with their once-approvals), each with a state audit
 * row and a restart-closed row.  Store decides nothing: the caller
 * says when and what is present.  Returns the number of rows closed.
 */
int
store_exporter_settle(int64_t exporter_id,
    int (*present)(void *, const char *exporter_busid), void *arg,
    const char *why)
{
	struct settle s = { exporter_id, present, arg, NULL, 0, 0 };
	struct db_device d;
	struct audit_event ev;
	char object[48];
	int64_t now = now_s(), pres;
	size_t i;
	int n = 0;

	if (db == NULL || exporter_id <= 0)
		return 0;
	if (db_exporter_devices_foreach(db, exporter_id, 0, settle_cb, &s) ==
	    -1)
		log_warnx("database: cannot read the devices: %s", db_errmsg(db));
	for (i = 0; i < s.n; i++) {
		if (db_device_get(db, s.ids[i], &d) != 1 || d.state == DEV_GONE)
			continue;
		pres = db_presence_current(db, d.id);
		if (db_device_set_state(db, d.id, DEV_GONE, 0, now) == -1)
			continue;
		memset(&ev, 0, sizeof(ev));
		ev.event = "state";
		ev.device_id = d.id;
		ev.busid = d.ident.busid;
		ev.exporter = d.ident.exporter;
		ev.old_state = dev_state_name(d.state);
		ev.new_state = dev_state_name(DEV_GONE);
		ev.reason = why;
		append(&ev);
		if (pres > 0 && db_presence_end(db, d.id, why, now) == 1) {
			snprintf(object, sizeof(object), "presence %lld",
			    (long long)pres);
			audit_restart_closed(object, d.id, d.ident.busid,
			    d.ident.exporter, "", why, NULL);
		}
		n++;
	}
	free(s.ids);
	if (n > 0)
		log_info("%d devices of exporter %lld left while the gateway "
		    "was down", n, (long long)exporter_id);
	return n;
}

/*
 * An operator's revoke keeps the device pending, whatever the rules say,
 * until the device leaves or an operator decides again; it is kept with
 * the presence so that a gateway restart does not undo it.
 */
void
store_set_revoked(const struct device *dev, bool on)
{
	char key[48], val[32];

	if (db == NULL || dev->id == 0)
		return;
	snprintf(key, sizeof(key), "revoked.%lld", (long long)dev->id);
	snprintf(val, sizeof(val), "%lld", on ? (long long)dev->presence_id : 0LL);
	if (db_setting_set(db, key, val, now_s()) == -1 || store_flush() == -1)
		unwritten_add(0, key, val, now_s());
}

/*
 * This gateway's name on the store (protocol.md 4.3, 4.5): the
 * connection's usbgw.gateway (the feed's triggers record it) and, on
 * PostgreSQL, the audit rows' gateway column.  On SQLite (one gateway)
 * audit rows stay as they were.  0 or -1.
 */
int
store_set_gateway(const char *name)
{
	if (db == NULL)
		return -1;
	if (sqldb_set_gateway(db_conn(db), name) == -1) {
		log_warnx("%s", sqldb_errmsg(db_conn(db)));
		return -1;
	}
	if (sqldb_kind(db_conn(db)) == SQLDB_PG)
		audit_set_gateway(audit, name);
	return 0;
}

/*
 * Whether the store says dev is revoked for its presence (the feed).
 * A read that fails says revoked: the device stays pending (fail
 * closed) until the next decision about it is read.
 */
bool
store_revoked(const struct device *dev)
{
	char key[48], val[32];
	int rc;

	if (db == NULL || dev->id == 0 || dev->presence_id == 0)
		return false;
	snprintf(key, sizeof(key), "revoked.%lld", (long long)dev->id);
	if ((rc = db_setting_get(db, key, val, sizeof(val))) == -1) {
		log_warnx("device %lld: cannot read its revocation (%s): kept "
		    "as revoked", (long long)dev->id, db_errmsg(db));
		return true;
	}
	return rc == 1 && strtoll(val, NULL, 10) == dev->presence_id;
}

const struct audit_key *
store_audit_key(void)
{
	return akey;
}

int
store_audit_anchor(struct audit_anchor *out)
{
	if (audit == NULL || akey == NULL)
		return -1;
	return audit_checkpoint(audit, now_s(), 0, out);
}

int
store_audit_written(int64_t *seq, char hash[65])
{
	return audit != NULL ? audit_written(audit, seq, hash) : 0;
}
