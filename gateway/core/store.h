/*
 * Persistence and audit for the daemon core (store.c): it records and
 * loads, and decides nothing.
 *
 * Open work (issue 29 item 3; the three "known" lines of gateway/LAYERS):
 * store is below the device, the exporter and the session in the core's
 * order, yet its functions take those objects and read their fields.
 * The plan, one function family at a time, each its own commit with
 * make bench-compare against the one before:
 *   1. each store_* that writes takes the record db.c already writes
 *      (struct db_device, db_exporter, db_legs, db_approval; audit's
 *      struct audit_event), filled by the object's owner through one
 *      function of its own (device_db_record(), exporter_db_record(),
 *      dsession_legs()), so that the mapping from object to row lives
 *      beside the object and store only persists;
 *   2. loads hand back records (store_exporters_foreach already does);
 *   3. store.h then includes no core header: the known lines go, and
 *      03-layers fails if one comes back.
 * The `grep` that shows it done: no "dev->", "exp->" or "ds->" in
 * store.c.
 */
#ifndef USBGW_STORE_H
#define USBGW_STORE_H

#include <jansson.h>

#include "policy/decision.h"
#include "core/device.h"
#include "core/exporter.h"
#include "core/session.h"

/* store.c: persistence and audit (SQLite) */
struct db;

/* The audit key's default path when the database is PostgreSQL (with
 * SQLite: DATABASE.key). */
#define STORE_PG_AUDIT_KEY	"/var/lib/usbgw/audit.key"
struct usbgw_identity;
/*
 * Take the database's lock (DATABASE.lock), before store_open(): -1 with
 * "database PATH is in use by usbgwd pid N" in err when another daemon
 * holds it.  store_close() lets it go.
 */
int		 store_lock(const char *path, char *err, size_t errlen);
void		 store_lock_owner(void);	/* our pid in it, after daemon() */
/*
 * Open the database and the audit key (keypath, "" or NULL:
 * DATABASE.key; created on a log without keyed rows, refused if others
 * may read it or if it is missing while keyed rows exist).
 */
int		 store_open(const char *path, const char *keypath);
/* Checkpoint every rows rows (0: never) and every interval_ms. */
void		 store_audit_settings(unsigned rows, unsigned interval_ms);
struct audit_key;
struct audit_anchor;
const struct audit_key *store_audit_key(void);
/* A signed checkpoint of the head (audit_checkpoint()): 1, 0, -1. */
int		 store_audit_anchor(struct audit_anchor *);
/* The last audit row this daemon wrote: 1, or 0 if none. */
int		 store_audit_written(int64_t *seq, char hash[65]);
struct db	*store_db(void);
/*
 * The store's health (protocol.md 4.6).  With PostgreSQL the connection
 * is looked at every STORE_HEALTH_MS and after every failed write; the
 * store is degraded from the first sign of a lost server until a
 * connection works again (connecting again with backoff, sqldb.h).
 * While degraded nothing new is authorized (the callers check
 * store_degraded()); fn hears each change (down true, then false).
 * SQLite is never degraded.
 */
#define STORE_HEALTH_MS		250
#define STORE_UNAVAILABLE	"store unavailable"
bool		 store_degraded(void);
uint64_t	 store_degraded_ms(void);	/* how long so far, 0 if not */
void		 store_on_health(void (*fn)(bool down));
void		 store_health_check(void);
int		 store_flush(void);	/* 0, or -1: a write failed */
/* Withdrawals the store missed while away; written first when it is
 * back (protocol.md 4.6).  0, or -1 (kept for the next try). */
size_t		 store_unwritten(void);
int		 store_replay_unwritten(void);
void		 store_exporter_status(struct exporter *);
int		 store_audit_prune(int64_t before, const struct actor *,
		    int64_t *pruned);
void		 store_close(void);
void		 store_device_state(struct device *, enum dev_state old,
		    const struct actor *, const char *reason, int64_t rule_id);
/* What the database knows of a probed identity (store_device_identity). */
struct store_identity {
	int64_t		 id;		/* the identity's row */
	int64_t		 presence_id;
	bool		 created;	/* first time seen */
	int64_t		 old_id;	/* another identity held this busid */
	char		 old_hash[65];
	bool		 revoked;	/* revoked for this presence */
};
int		 store_device_identity(const struct device *,
		    const struct usbgw_identity *, struct store_identity *);
size_t		 store_approvals_load(int64_t device_id, int64_t presence_id,
		    struct approval *, size_t max);
int64_t		 store_approval_add(const struct device *,
		    const struct approval *, enum approve_scope row_scope,
		    int64_t rule_id, const char *message);
void		 store_approval_end(const struct device *, int64_t id,
		    const char *why, const struct actor *by);
void		 store_set_revoked(const struct device *, bool on);
bool		 store_revoked(const struct device *);
int		 store_set_gateway(const char *name);
enum { STORE_REMOTE_APPROVE, STORE_REMOTE_DENY, STORE_REMOTE_REVOKE };
int		 store_remote_decision(const char *busid, int kind,
		    const struct approve_opts *, const struct actor *,
		    int64_t *device_id, char *err, size_t errlen);
struct db_legs;
void		 store_attachment_legs(const struct device *,
		    const struct dsession *, struct db_legs *);
void		 store_attachment_begin(struct device *, struct dsession *,
		    const struct decision *);
void		 store_attachment_end(struct device *, const char *why);
void		 store_audit_device(struct device *, const char *action,
		    const struct actor *, const char *detail);
/* A vhci host's import that was refused: the host asking, the busid it
 * asked for (dev's, or as asked when unknown), what it was told. */
void		 store_audit_request(const char *action, struct device *,
		    const char *busid, const char *host, const char *peer,
		    const char *detail);
void		 store_audit(const char *action, const struct actor *,
		    const char *object, const char *detail);
json_t		*store_device_history(struct device *, int limit);
/* The audit columns, in the order store_audit_row_json() reads them. */
#define STORE_AUDIT_COLUMNS "seq, ts, event, busid, old_state, new_state, " \
	"actor, actor_uid, actor_name, rule_id, host, reason, detail, " \
	"exporter, object"
struct sqldb_stmt;
json_t		*store_audit_row_json(struct sqldb_stmt *);
/* An exporter's row written (id set), with an exporter-add row. */
void		 store_exporter_save(struct exporter *, const struct actor *);
/* The same without the audit row (an import audits once). */
void		 store_exporter_put(struct exporter *);
/* Marked removed, with an exporter-remove row (detail may be NULL). */
void		 store_exporter_delete(struct exporter *, const struct actor *,
		    const char *detail);
void		 store_exporter_drop(struct exporter *);	/* no row */
/* last_seen and last_error as the exporter has them. */
void		 store_exporter_seen(struct exporter *);
void		 store_exporter_error(struct exporter *);
struct db_exporter;
int		 store_exporters_foreach(int (*)(void *,
		    const struct db_exporter *), void *);
#define USBGW_RESTART_REASON \
	"gateway restarted (the previous run ended without closing it)"
/* What a killed daemon left open (after the lock, before the exporters). */
/* exporter: only that exporter's rows (its new lease holder); NULL: all. */
int		 store_close_stale(bool keep_local, const char *why,
		    const char *exporter);
int		 store_exporter_settle(int64_t exporter_id,
		    int (*present)(void *, const char *exporter_busid), void *arg,
		    const char *why);
int64_t		 store_access_request(struct device *, struct dsession *);
void		 store_access_outcome(int64_t request_id, const char *outcome,
		    const struct decision *);

#endif
