/*
 * Runs every query of contrib/audit-queries.sql (the README's "Audit with
 * SQL") against a database produced by a scripted scenario written with
 * the db and audit APIs, as the daemon writes it, and checks the rows.
 *
 * The scenario is anchored on the real clock (T0 = now - 2 days) because
 * the views judge "active" and "pending for how long" against now.
 */
#include <limits.h>
#include <stdarg.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "db/audit.h"
#include "db/db.h"
#include "base/log.h"
#include "policy/rule.h"
#include "tap.h"
#include "base/util.h"

/* An attachment's legs: the host leg as given, the exporter leg tcp. */
#define LEGS(t, c)	(&(struct db_legs){ (t), (c), "tcp", NULL })

#define QUERIES_FILE	"contrib/audit-queries.sql"
#define MAX_QUERIES	64
#define MAX_ROWS	16

static int64_t	 now, T0;
static struct db *db;
static struct audit *au;

static struct actor	 sys_actor, root, alice, bob, mallory;

static const char *
dt(int64_t t)
{
	static char	buf[8][32];
	static int	i;
	struct tm	tm;
	time_t		tt = (time_t)t;

	i = (i + 1) % 8;
	gmtime_r(&tt, &tm);
	strftime(buf[i], sizeof(buf[i]), "%Y-%m-%d %H:%M:%S", &tm);
	return buf[i];
}

static void
operator(struct actor *a, uid_t uid, const char *name)
{
	memset(a, 0, sizeof(*a));
	a->kind = ACTOR_OPERATOR;
	a->uid = uid;
	usbgw_strlcpy(a->name, name, sizeof(a->name));
}

static void
ev(int64_t t, const char *event, int64_t dev, const char *busid,
    const char *old, const char *new, const struct actor *who,
    const char *host, const char *reason, const char *object,
    const char *detail)
{
	struct audit_event e;

	memset(&e, 0, sizeof(e));
	e.event = event;
	e.device_id = dev;
	e.busid = busid;
	e.exporter = busid ? (strncmp(busid, "tc17", 4) == 0 ? "tc17" :
	    "tc18") : NULL;
	e.old_state = old;
	e.new_state = new;
	e.who = who;
	e.host = host;
	e.reason = reason;
	e.object = object;
	e.detail = detail;
	if (audit_append(au, &e, t) == -1)
		abort();
}

static int64_t
device(int64_t exp, const char *port, const char *busid, uint16_t vid,
    uint16_t pid, const char *product, const char *serial, char hashc,
    uint8_t cls, int64_t t)
{
	struct usbgw_identity	id;
	int64_t			d;

	memset(&id, 0, sizeof(id));
	usbgw_strlcpy(id.exporter, exp == 1 ? "tc17" : "tc18",
	    sizeof(id.exporter));
	usbgw_strlcpy(id.exporter_busid, port, sizeof(id.exporter_busid));
	usbgw_strlcpy(id.busid, busid, sizeof(id.busid));
	id.vid = vid;
	id.pid = pid;
	id.n_ifaces = 1;
	id.ifaces[0].cls = cls;
	usbgw_strlcpy(id.product, product, sizeof(id.product));
	usbgw_strlcpy(id.serial, serial, sizeof(id.serial));
	memset(id.hash, hashc, USBGW_HASH_HEX);
	if ((d = db_device_upsert(db, exp, &id, t, NULL)) <= 0 ||
	    db_presence_begin(db, d, busid, t) <= 0)
		abort();
	ev(t, "new-device", d, busid, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
	return d;
}

static void
state(int64_t t, int64_t dev, const char *busid, enum dev_state from,
    enum dev_state to, int64_t rule, const struct actor *who,
    const char *host, const char *reason)
{
	struct actor	 ra;

	if (db_device_set_state(db, dev, to, rule, t) == -1)
		abort();
	if (rule > 0 && who == NULL) {
		memset(&ra, 0, sizeof(ra));
		ra.kind = ACTOR_RULE;
		ra.rule_id = rule;
		who = &ra;
	}
	ev(t, "state", dev, busid, dev_state_name(from), dev_state_name(to),
	    who, host, reason, NULL, NULL);
}

static int64_t
approval(int64_t t, int64_t dev, int64_t presence, enum approve_scope scope,
    int64_t expires, const struct actor *who, const char *reason)
{
	struct db_approval	a;
	int64_t			id;

	memset(&a, 0, sizeof(a));
	a.device_id = dev;
	a.presence_id = presence;
	a.scope = scope;
	a.created_at = t;
	a.expires_at = expires;
	a.actor_uid = who->uid;
	usbgw_strlcpy(a.actor_name, who->name, sizeof(a.actor_name));
	usbgw_strlcpy(a.reason, reason, sizeof(a.reason));
	if ((id = db_approval_add(db, &a)) <= 0)
		abort();
	return id;
}

static int64_t
add_rule(int64_t t, const char *text)
{
	struct rule_error	 err;
	struct rule		*r = rule_parse(text, &err);
	int64_t			 id;

	if (r == NULL)
		abort();
	id = db_rule_add(db, 0, r, "admin", 0, NULL, "root", t);
	rule_free(r);
	ev(t, "policy-add", 0, NULL, NULL, NULL, &root, NULL, NULL, NULL, text);
	return id;
}

/* The scenario: a few days in the life of a gateway, in time order. */
static void
scenario(void)
{
	struct db_counters	c;
	int64_t			tc17, tc18, r1, r2, r3, A, B, C, D, E, E2, pD;
	int64_t			a1, q1, t1, t2, t3;

	memset(&sys_actor, 0, sizeof(sys_actor));
	operator(&root, 0, "root");
	operator(&alice, 1000, "alice");
	operator(&bob, 1001, "bob");
	operator(&mallory, 1002, "mallory");

	tc17 = db_exporter_upsert(db, "tc17", "10.0.0.17", 3240, T0);
	tc18 = db_exporter_upsert(db, "tc18", "10.0.0.18", 3240, T0);
	r1 = add_rule(T0, "block with-interface one-of { 03:*:* }");
	r2 = add_rule(T0 + 1, "allow id 1234:*");
	r3 = add_rule(T0 + 2, "reject via-exporter lab*");

	/* A flash disk: pending, asked for, approved until tomorrow, used. */
	A = device(tc17, "1-1", "tc17-1-1", 0x0781, 0x5567, "Cruzer Blade",
	    "S-A", 'a', 0x08, T0 + 10);
	state(T0 + 11, A, "tc17-1-1", DEV_PROBING, DEV_PENDING, 0, NULL, NULL,
	    NULL);
	q1 = db_access_request_add(db, A, "tc17-1-1", "vdi01", "10.1.0.1",
	    "waiting", T0 + 20);
	ev(T0 + 20, "access-request", A, "tc17-1-1", NULL, NULL, NULL, "vdi01",
	    NULL, NULL, NULL);
	a1 = approval(T0 + 30, A, 0, SCOPE_UNTIL, now + 86400, &alice,
	    "ticket 42");
	ev(T0 + 30, "approve", A, "tc17-1-1", NULL, NULL, &alice, NULL,
	    "ticket 42", NULL, NULL);
	state(T0 + 30, A, "tc17-1-1", DEV_PENDING, DEV_AUTHORIZED, 0, &alice,
	    NULL, "ticket 42");
	db_access_request_decide(db, q1, "granted", "alice", a1, T0 + 30);
	t1 = db_attachment_begin(db, A, db_presence_current(db, A), a1, 0,
	    "proxy", "vdi01", "10.1.0.1", LEGS("tcp", NULL), T0 + 40);
	state(T0 + 40, A, "tc17-1-1", DEV_AUTHORIZED, DEV_ATTACHED, 0, NULL,
	    "vdi01", NULL);

	/* A keyboard, blocked by rule 1. */
	B = device(tc17, "1-2", "tc17-1-2", 0x046d, 0xc31c, "Keyboard K120",
	    "", 'b', 0x03, T0 + 50);
	state(T0 + 51, B, "tc17-1-2", DEV_PROBING, DEV_BLOCKED, r1, NULL, NULL,
	    NULL);

	c.bytes_to_device = 10485760;
	c.bytes_from_device = 1048576;
	c.urbs_to_device = 2560;
	c.urbs_from_device = 2560;
	c.iface_refused = 0;
	db_attachment_end(db, t1, &c, "detached", T0 + 100);
	state(T0 + 100, A, "tc17-1-1", DEV_ATTACHED, DEV_AUTHORIZED, 0, NULL,
	    "vdi01", "detached");

	/* A stick approved once by bob, revoked by alice while in use. */
	D = device(tc18, "2-2", "tc18-2-2", 0x0951, 0x1666, "DataTraveler",
	    "S-D", 'e', 0x08, T0 + 150);
	pD = db_presence_current(db, D);
	state(T0 + 151, D, "tc18-2-2", DEV_PROBING, DEV_PENDING, 0, NULL, NULL,
	    NULL);
	approval(T0 + 160, D, pD, SCOPE_ONCE, 0, &bob, "printing");
	ev(T0 + 160, "approve", D, "tc18-2-2", NULL, NULL, &bob, NULL,
	    "printing", NULL, NULL);
	state(T0 + 160, D, "tc18-2-2", DEV_PENDING, DEV_AUTHORIZED, 0, &bob,
	    NULL, "printing");
	t2 = db_attachment_begin(db, D, pD, 0, 0, "proxy", "vdi03", "10.1.0.3",
	    LEGS("tcp", NULL), T0 + 170);
	state(T0 + 170, D, "tc18-2-2", DEV_AUTHORIZED, DEV_ATTACHED, 0, NULL,
	    "vdi03", NULL);
	c.bytes_to_device = 500;
	c.bytes_from_device = 600;
	c.urbs_to_device = 5;
	c.urbs_from_device = 6;
	c.iface_refused = 7;	/* URBs to denied interfaces, stalled */
	db_attachment_end(db, t2, &c, "revoked", T0 + 200);
	db_approvals_end_device(db, D, "revoked", "alice", T0 + 200);
	state(T0 + 200, D, "tc18-2-2", DEV_ATTACHED, DEV_BLOCKED, 0, &alice,
	    "vdi03", "left desk");

	/* A gadget allowed by rule 2 comes back with other descriptors. */
	E = device(tc17, "1-3", "tc17-1-3", 0x1234, 0x5678, "Gadget", "X", 'c',
	    0x03, T0 + 300);
	state(T0 + 301, E, "tc17-1-3", DEV_PROBING, DEV_AUTHORIZED, r2, NULL,
	    NULL, NULL);
	state(T0 + 400, E, "tc17-1-3", DEV_AUTHORIZED, DEV_GONE, 0, NULL, NULL,
	    "unplugged");
	db_presence_end(db, E, "unplugged", T0 + 400);
	E2 = device(tc17, "1-3", "tc17-1-3", 0x1234, 0x5678, "Gadget", "X", 'd',
	    0x03, T0 + 500);
	ev(T0 + 500, "identity-change", E2, "tc17-1-3", NULL, NULL, NULL, NULL,
	    NULL, NULL, "descriptor hash changed");
	state(T0 + 501, E2, "tc17-1-3", DEV_PROBING, DEV_PENDING, 0, NULL, NULL,
	    NULL);

	db_rule_remove(db, r3, "root", T0 + 600);
	ev(T0 + 600, "policy-remove", 0, NULL, NULL, NULL, &root, NULL,
	    "no lab exporters any more", NULL, "rule 3");

	/* Today: a scanner, a refused operator, a malformed session. */
	/* as the daemon writes an unknown busid: an audit row only, no
	 * access request (a row as schema 9 and earlier wrote it: host in
	 * object, the busid in detail; then one as written now) */
	ev(now - 18000, "import-unknown", 0, NULL, NULL, NULL, NULL, NULL, NULL,
	    "10.6.6.6", "tc99-1-1");
	ev(now - 17990, "import-unknown", 0, "tc99-1-2", NULL, NULL, NULL,
	    "10.6.6.6", NULL, "10.6.6.6", "unknown busid");
	/* vdi03 asks for the blocked keyboard */
	ev(now - 17000, "import-refused", B, "tc17-1-2", NULL, NULL, NULL,
	    "10.1.0.3", NULL, "10.1.0.3", "device blocked");
	ev(now - 14400, "refused", 0, NULL, NULL, NULL, &mallory, NULL, NULL,
	    "control", "approve tc17-1-1: needs the approve privilege");
	ev(now - 14000, "malformed", 0, NULL, NULL, NULL, NULL, NULL, NULL,
	    "10.6.6.6:41000", "CMD_SUBMIT: transfer_buffer_length -1");
	/* the scanner keeps on: held back; a thin client lists too much */
	ev(now - 13900, "audit-suppressed", 0, NULL, NULL, NULL, NULL, NULL,
	    NULL, "10.6.6.6", "in 60 s, not written one by one: 5000 "
	    "import-unknown; 40 connections refused (max-sessions-per-host)");
	ev(now - 13000, "exporter-over-limit", 0, NULL, NULL, NULL, NULL, NULL,
	    NULL, "tc18", "64 devices present (max-devices-per-exporter): 9-9 "
	    "and any further devices not taken");

	/* A webcam waits; a host asks for it. */
	C = device(tc18, "2-1", "tc18-2-1", 0x046d, 0x0825, "Webcam C270", "",
	    'f', 0x0e, now - 10800);
	state(now - 10800, C, "tc18-2-1", DEV_PROBING, DEV_PENDING, 0, NULL,
	    NULL, NULL);
	db_access_request_add(db, C, "tc18-2-1", "vdi02", "10.1.0.2",
	    "waiting", now - 7200);
	ev(now - 7200, "access-request", C, "tc18-2-1", NULL, NULL, NULL,
	    "vdi02", NULL, NULL, NULL);

	/* The flash disk is in use again, on vdi02. */
	t3 = db_attachment_begin(db, A, db_presence_current(db, A), a1, 0,
	    "proxy", "vdi02", "10.1.0.2",
	    &(struct db_legs){ "tls", "vdi02", "tls", "tc17" }, now - 3600);
	state(now - 3600, A, "tc17-1-1", DEV_AUTHORIZED, DEV_ATTACHED, 0, NULL,
	    "vdi02", NULL);
	c.bytes_to_device = 4096;
	c.bytes_from_device = 8192;
	c.urbs_to_device = 2;
	c.urbs_from_device = 4;
	c.iface_refused = 2;
	db_attachment_counters(db, t3, &c);

	if (audit_flush(au) == -1)
		abort();
}

/* ------------------------------------------------------------------ */

struct query {
	char	*name;
	char	*sql;
};

static size_t
load_queries(const char *text, struct query *q, size_t max)
{
	const char	*p = text, *next, *eol;
	size_t		 n = 0;

	while ((p = strstr(p, "-- name: ")) != NULL && n < max) {
		eol = strchr(p, '\n');
		if (eol == NULL)
			break;
		q[n].name = xstrndup(p + 9, (size_t)(eol - p - 9));
		next = strstr(eol, "-- name: ");
		q[n].sql = xstrndup(eol + 1, next ? (size_t)(next - eol - 1) :
		    strlen(eol + 1));
		n++;
		p = eol;
	}
	return n;
}

/*
 * Text times are UTC and their columns say so (..._utc): a column that
 * holds "YYYY-MM-DD HH:MM:SS" under another name is counted (and shown).
 */
static int zone_unsaid;

static int
is_text_time(const char *t)
{
	static const char pat[] = "dddd-dd-dd dd:dd:dd";
	size_t i;

	for (i = 0; pat[i] != '\0'; i++)
		if (pat[i] == 'd' ? !isdigit((unsigned char)t[i]) :
		    t[i] != pat[i])
			return 0;
	return t[i] == '\0';
}

static void
check_zone(const char *what, sqlite3_stmt *st, int col, const char *t)
{
	const char *name = sqlite3_column_name(st, col);
	size_t l = name != NULL ? strlen(name) : 0;

	if (t == NULL || !is_text_time(t) ||
	    (l > 4 && strcmp(name + l - 4, "_utc") == 0))
		return;
	if (zone_unsaid++ < 20)
		diag("%s: column %s holds a text time (%s) but its name does "
		    "not say UTC", what, name ? name : "?", t);
}

/* Rows as "a|b|c" (NULL as NULL), into out[]; returns the count. */
static int
run(const struct query *q, char out[][1024], int max)
{
	sqlite3_stmt	*st;
	const char	*tail;
	int		 i, n = 0, rc;

	if (sqlite3_prepare_v2(db_sqlite(db), q->sql, -1, &st, &tail) !=
	    SQLITE_OK) {
		diag("%s: %s", q->name, sqlite3_errmsg(db_sqlite(db)));
		return -1;
	}
	if (tail != NULL && strspn(tail, " \t\n") != strlen(tail)) {
		diag("%s: more than one statement", q->name);
		sqlite3_finalize(st);
		return -1;
	}
	for (i = 1; i <= sqlite3_bind_parameter_count(st); i++) {
		const char *p = sqlite3_bind_parameter_name(st, i);

		if (p == NULL)
			continue;
		if (strcmp(p, ":busid") == 0)
			sqlite3_bind_text(st, i, "tc17-1-1", -1, SQLITE_STATIC);
		else if (strcmp(p, ":since") == 0)
			sqlite3_bind_int64(st, i, strcmp(q->name,
			    "access-requests") == 0 ? now - 86400 : T0 - 10);
		else if (strcmp(p, ":within") == 0)
			sqlite3_bind_int64(st, i, 2 * 86400);
		else if (strcmp(p, ":from") == 0)
			sqlite3_bind_int64(st, i, T0 + 30);
		else if (strcmp(p, ":to") == 0)
			sqlite3_bind_int64(st, i, T0 + 150);
		else {
			diag("%s: unknown parameter %s", q->name, p);
			sqlite3_finalize(st);
			return -1;
		}
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW && n < max) {
		out[n][0] = '\0';
		for (i = 0; i < sqlite3_column_count(st); i++) {
			const unsigned char *t = sqlite3_column_text(st, i);

			check_zone(q->name, st, i, (const char *)t);
			if (i > 0)
				usbgw_strlcat(out[n], "|", sizeof(out[n]));
			usbgw_strlcat(out[n], t ? (const char *)t : "NULL",
			    sizeof(out[n]));
		}
		n++;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? n : -1;
}

/* "*" in an expected field matches anything. */
static int
row_matches(const char *got, const char *want)
{
	const char *g = got, *w = want, *ge, *we;

	for (;;) {
		ge = strchr(g, '|');
		we = strchr(w, '|');
		if ((ge == NULL) != (we == NULL))
			return 0;
		if (!(we ? (we - w == 1 && *w == '*') : strcmp(w, "*") == 0)) {
			size_t gl = ge ? (size_t)(ge - g) : strlen(g);
			size_t wl = we ? (size_t)(we - w) : strlen(w);

			if (gl != wl || memcmp(g, w, gl) != 0)
				return 0;
		}
		if (ge == NULL)
			return 1;
		g = ge + 1;
		w = we + 1;
	}
}

struct expect {
	const char	*name;
	const char	*rows[MAX_ROWS];
};

static char	ebuf[128][512];
static int	en;

static const char *
E(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *
E(const char *fmt, ...)
{
	va_list	ap;
	char	*b = ebuf[en++ % 128];

	va_start(ap, fmt);
	vsnprintf(b, 512, fmt, ap);
	va_end(ap);
	return b;
}

int
main(void)
{
	struct query		 q[MAX_QUERIES];
	struct audit_verify	 v;
	char			 dir[64], path[PATH_MAX + 64], err[DB_ERR_MAX];
	char			 rows[MAX_ROWS][1024], *text, head[65];
	size_t			 nq, i, j, k;
	int64_t			 hseq;
	int			 n;
	FILE			*f;
	long			 len;
	const char		*hc = "cccccccccccccccccccccccccccccccc"
				    "cccccccccccccccccccccccccccccccc";
	const char		*hd = "dddddddddddddddddddddddddddddddd"
				    "dddddddddddddddddddddddddddddddd";

	log_init("test_audit_queries", 1, LOG_LVL_WARN);
	now = (int64_t)time(NULL);
	T0 = now - 2 * 86400;
	snprintf(dir, sizeof(dir), "/tmp/usbgw-test-aq-XXXXXX");
	if (mkdtemp(dir) == NULL)
		return 1;
	snprintf(path, sizeof(path), "%s/audit.db", dir);
	db = db_open(path, err, sizeof(err));
	if (db == NULL) {
		diag("%s", err);
		return 1;
	}
	au = audit_new(db);
	scenario();
	ok(audit_verify(db, 0, NULL, &v) == 0, "the scenario's audit log "
	    "verifies (%lld rows)", (long long)v.rows);

	if ((f = fopen(QUERIES_FILE, "r")) == NULL) {
		char exe[PATH_MAX];
		ssize_t r = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

		if (r > 0) {
			exe[r] = '\0';
			*strrchr(exe, '/') = '\0';
			snprintf(path, sizeof(path), "%s/../../%s", exe,
			    QUERIES_FILE);
			f = fopen(path, "r");
		}
	}
	if (!ok(f != NULL, "read %s", QUERIES_FILE))
		return done_testing();
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	fseek(f, 0, SEEK_SET);
	text = xmalloc((size_t)len + 1);
	if (fread(text, 1, (size_t)len, f) != (size_t)len)
		len = 0;
	text[len] = '\0';
	fclose(f);
	nq = load_queries(text, q, MAX_QUERIES);
	free(text);
	ok(nq >= 10, "%zu queries (at least ten)", nq);

	{
		const struct expect ex[] = {
		{ "pending-now", {
			E("tc17-1-3|tc17|1234:5678|Gadget|X|%s|*|0",
			    dt(T0 + 501)),
			E("tc18-2-1|tc18|046d:0825|Webcam C270||%s|*|1",
			    dt(now - 10800)), NULL } },
		{ "approvals-active", {
			E("1|tc17-1-1|0781:5567|S-A|allow|until|any|alice|%s|"
			    "ticket 42|%s", dt(T0 + 30), dt(now + 86400)),
			NULL } },
		{ "approvals-history", {
			E("1|tc17-1-1|allow|until|alice|%s|ticket 42|%s|active|"
			    "NULL|NULL", dt(T0 + 30), dt(now + 86400)),
			E("2|tc18-2-2|allow|once|bob|%s|printing|NULL|revoked|%s|"
			    "alice", dt(T0 + 160), dt(T0 + 200)), NULL } },
		{ "expiring-soon", {
			E("1|tc17-1-1|alice|%s", dt(now + 86400)), NULL } },
		{ "device-history", {
			E("*|%s|new-device|NULL|NULL|system|NULL|NULL|NULL|NULL",
			    dt(T0 + 10)),
			E("*|%s|state|probing|pending|system|NULL|NULL|NULL|NULL",
			    dt(T0 + 11)),
			E("*|%s|access-request|NULL|NULL|system|NULL|NULL|vdi01|"
			    "NULL", dt(T0 + 20)),
			E("*|%s|approve|NULL|NULL|operator|alice|NULL|NULL|"
			    "ticket 42", dt(T0 + 30)),
			E("*|%s|state|pending|authorized|operator|alice|NULL|"
			    "NULL|ticket 42", dt(T0 + 30)),
			E("*|%s|state|authorized|attached|system|NULL|NULL|vdi01|"
			    "NULL", dt(T0 + 40)),
			E("*|%s|state|attached|authorized|system|NULL|NULL|vdi01|"
			    "detached", dt(T0 + 100)),
			E("*|%s|state|authorized|attached|system|NULL|NULL|vdi02|"
			    "NULL", dt(now - 3600)), NULL } },
		{ "access-requests", {
			E("2|%s|tc18-2-1|vdi02|Webcam C270|waiting|NULL|NULL",
			    dt(now - 7200)), NULL } },
		{ "access-unknown-busids", {
			E("10.6.6.6|2|tc99-1-1,tc99-1-2|%s|%s", dt(now - 18000),
			    dt(now - 17990)), NULL } },
		{ "hosts-refused", {
			E("10.6.6.6|2|2|unknown busid|%s|%s", dt(now - 18000),
			    dt(now - 17990)),
			E("10.1.0.3|1|1|device blocked|%s|%s", dt(now - 17000),
			    dt(now - 17000)), NULL } },
		{ "storage-attached-between", {
			E("tc17-1-1|0781:5567|Cruzer Blade|S-A|vdi01|%s|%s|"
			    "10485760|1048576", dt(T0 + 40), dt(T0 + 100)),
			NULL } },
		{ "attached-now", {
			E("tc17-1-1|0781:5567|Cruzer Blade|vdi02|10.1.0.2|%s|*|"
			    "12288", dt(now - 3600)), NULL } },
		{ "traffic-per-attachment", {
			E("1|tc17-1-1|Cruzer Blade|vdi01|%s|%s|60|10485760|"
			    "1048576|2560|2560|detached", dt(T0 + 40),
			    dt(T0 + 100)),
			E("3|tc17-1-1|Cruzer Blade|vdi02|%s|NULL|*|4096|8192|2|4|"
			    "NULL", dt(now - 3600)),
			E("2|tc18-2-2|DataTraveler|vdi03|%s|%s|30|500|600|5|6|"
			    "revoked", dt(T0 + 170), dt(T0 + 200)), NULL } },
		{ "attachment-legs", {
			E("3|tc17-1-1|tc17|vdi02|%s|tls|vdi02|tls|tc17",
			    dt(now - 3600)),
			E("2|tc18-2-2|tc18|vdi03|%s|tcp|-|tcp|-", dt(T0 + 170)),
			E("1|tc17-1-1|tc17|vdi01|%s|tcp|-|tcp|-", dt(T0 + 40)),
			NULL } },
		{ "iface-refusals", {
			E("2|tc18-2-2|DataTraveler|vdi03|%s|%s|7|5|revoked",
			    dt(T0 + 170), dt(T0 + 200)),
			E("3|tc17-1-1|Cruzer Blade|vdi02|%s|NULL|2|2|NULL",
			    dt(now - 3600)), NULL } },
		{ "traffic-per-host", {
			"vdi01|1|10485760|1048576|60",
			"vdi02|1|4096|8192|*",
			"vdi03|1|500|600|30", NULL } },
		{ "identity-changes", {
			E("tc17|1-3|1234:5678|X|%s|%s|%s|pending", hc, hd,
			    dt(T0 + 500)), NULL } },
		{ "blocked-by-rule", {
			"tc17-1-2|046d:c31c|Keyboard K120|blocked|1|"
			    "block with-interface one-of { 03:*:* }", NULL } },
		{ "revocations", {
			E("*|%s|tc18-2-2|attached|blocked|operator|alice|"
			    "left desk", dt(T0 + 200)), NULL } },
		{ "operator-activity", {
			E("alice|1000|approve|1|%s|%s", dt(T0 + 30), dt(T0 + 30)),
			E("alice|1000|state|2|%s|%s", dt(T0 + 30), dt(T0 + 200)),
			E("bob|1001|approve|1|%s|%s", dt(T0 + 160), dt(T0 + 160)),
			E("bob|1001|state|1|%s|%s", dt(T0 + 160), dt(T0 + 160)),
			E("mallory|1002|refused|1|%s|%s", dt(now - 14400),
			    dt(now - 14400)),
			E("root|0|policy-add|3|%s|%s", dt(T0), dt(T0 + 2)),
			E("root|0|policy-remove|1|%s|%s", dt(T0 + 600),
			    dt(T0 + 600)), NULL } },
		{ "refused-control", {
			E("*|%s|1002|mallory|control|approve tc17-1-1: needs the "
			    "approve privilege", dt(now - 14400)), NULL } },
		{ "malformed-sessions", {
			E("*|%s|10.6.6.6:41000|CMD_SUBMIT: transfer_buffer_length "
			    "-1", dt(now - 14000)), NULL } },
		{ "over-limits", {
			E("*|%s|audit-suppressed|10.6.6.6|in 60 s, not written "
			    "one by one: 5000 import-unknown; 40 connections "
			    "refused (max-sessions-per-host)", dt(now - 13900)),
			E("*|%s|exporter-over-limit|tc18|64 devices present "
			    "(max-devices-per-exporter): 9-9 and any further "
			    "devices not taken", dt(now - 13000)), NULL } },
		{ "policy-changes", {
			E("1|block with-interface one-of { 03:*:* }|admin|%s|root|"
			    "NULL|NULL", dt(T0)),
			E("2|allow id 1234:*|admin|%s|root|NULL|NULL", dt(T0 + 1)),
			E("3|reject via-exporter lab*|admin|%s|root|%s|root",
			    dt(T0 + 2), dt(T0 + 600)), NULL } },
		{ "devices-per-exporter", {
			"tc17|attached|1", "tc17|blocked|1", "tc17|gone|1",
			"tc17|pending|1", "tc18|blocked|1", "tc18|pending|1",
			NULL } },
		{ "audit-head", { "*|*|*", NULL } },
		};

		for (i = 0; i < nq; i++) {
			const struct expect *x = NULL;

			for (j = 0; j < nitems(ex); j++)
				if (strcmp(ex[j].name, q[i].name) == 0)
					x = &ex[j];
			if (!ok(x != NULL, "query %s has expected rows",
			    q[i].name))
				continue;
			n = run(&q[i], rows, MAX_ROWS);
			for (k = 0; x->rows[k] != NULL; k++)
				;
			if (!ok(n == (int)k, "%s: %zu rows", q[i].name, k)) {
				for (j = 0; n > 0 && j < (size_t)n; j++)
					diag("got: %s", rows[j]);
			}
			for (j = 0; j < k && (int)j < n; j++)
				if (!ok(row_matches(rows[j], x->rows[j]),
				    "%s: row %zu", q[i].name, j + 1))
					diag("got      %s\nexpected %s", rows[j],
					    x->rows[j]);
		}
		for (j = 0; j < nitems(ex); j++) {
			int found = 0;

			for (i = 0; i < nq; i++)
				if (strcmp(ex[j].name, q[i].name) == 0)
					found = 1;
			ok(found, "expected query %s is in the file", ex[j].name);
		}
	}
	ok(zone_unsaid == 0, "every text time the queries return is in a "
	    "column named ..._utc (%d not)", zone_unsaid);

	/* The same for every view, over every row the scenario left. */
	{
		sqlite3_stmt *vs;
		struct query vq;
		int nviews = 0, withrows = 0;

		zone_unsaid = 0;
		if (sqlite3_prepare_v2(db_sqlite(db), "SELECT name FROM "
		    "sqlite_master WHERE type = 'view' ORDER BY name", -1, &vs,
		    NULL) != SQLITE_OK)
			ok(0, "list the views");
		else
			while (sqlite3_step(vs) == SQLITE_ROW) {
				char sql[128];

				snprintf(sql, sizeof(sql), "SELECT * FROM %s",
				    (const char *)sqlite3_column_text(vs, 0));
				vq.name = (char *)sqlite3_column_text(vs, 0);
				vq.sql = sql;
				nviews++;
				if (run(&vq, rows, MAX_ROWS) > 0)
					withrows++;
			}
		sqlite3_finalize(vs);
		ok(nviews >= 12 && withrows >= 10, "%d views, %d with rows",
		    nviews, withrows);
		ok(zone_unsaid == 0, "every text time in the views is in a "
		    "column named ..._utc (%d not)", zone_unsaid);
	}

	/* audit-head: the same as audit_head(). */
	for (i = 0; i < nq; i++) {
		if (strcmp(q[i].name, "audit-head") != 0)
			continue;
		n = run(&q[i], rows, MAX_ROWS);
		audit_head(db, &hseq, head);
		ok(n == 1 && strncmp(rows[0], E("%lld|", (long long)hseq),
		    strlen(E("%lld|", (long long)hseq))) == 0 &&
		    strstr(rows[0], head) != NULL, "audit-head is the chain's "
		    "head");
	}

	for (i = 0; i < nq; i++) {
		free(q[i].name);
		free(q[i].sql);
	}
	audit_free(au);
	db_close(db);
	snprintf(path, sizeof(path), "%s/audit.db", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/audit.db-wal", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/audit.db-shm", dir);
	unlink(path);
	rmdir(dir);
	return done_testing();
}
