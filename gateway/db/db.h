/*
 * The gateway's database (schema.sql for SQLite, schema_pg.sql for
 * PostgreSQL, both embedded; sqldb.h chooses the back end): opening and
 * migrating it, and the writes and reads the daemon needs, each one
 * prepared statement (prepared once, kept for the connection's life).
 *
 * Contract for every function below unless it says otherwise: returns
 * -1 on a database error (logged with log_warnx, and db_errmsg() has
 * the back end's message); ids are > 0; `now` is Unix seconds; strings are
 * copied (NULL means SQL NULL where a column allows it).  One connection
 * per process, used from one thread; statements are short, so calling
 * them from the event loop is fine (the audit log batches its writes,
 * see audit.h).  db_begin()/db_commit() group several calls into one
 * transaction; without them each call commits on its own, unless the
 * connection is batched (db_batch()).
 */
#ifndef USBGW_DB_H
#define USBGW_DB_H

#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "proto/ctl.h"
#include "base/identity.h"

struct db;
struct policy;
struct sqldb;
struct rule;

#define DB_ERR_MAX	256

/*
 * Open (creating the file 0600, not its directory) and migrate to the
 * newest schema version.  path: a SQLite file, or a PostgreSQL URI
 * ("postgresql://USER@/DB?host=DIR"; sqldb.h); messages name it without
 * its password.  NULL on error with a message in err.
 * db_open_version() stops at `version` (tests build old databases).
 */
struct db	*db_open(const char *path, char *err, size_t errlen);
struct db	*db_open_version(const char *path, int version, char *err,
		    size_t errlen);
/* Read only, as it is (no migration): for verifying a copy. */
struct db	*db_open_readonly(const char *path, char *err, size_t errlen);
void		 db_close(struct db *);

/* The newest version schema.sql (schema_pg.sql) defines, and the
 * database's. */
int		 db_schema_version(void);
int		 db_schema_version_pg(void);
int		 db_version(struct db *);
/* The SQLite handle for the modules still on it; NULL on PostgreSQL. */
sqlite3		*db_sqlite(struct db *);
/* The connection (raw SQL: tests, tools); 1 if it is PostgreSQL. */
struct sqldb	*db_conn(struct db *);
int		 db_is_pg(struct db *);
const char	*db_errmsg(struct db *);

/*
 * BEGIN IMMEDIATE / COMMIT / ROLLBACK.  0 or -1.  Inside a batch (or
 * any open transaction) they are a savepoint, its release and its
 * rollback: all-or-nothing within the batch, durable with it.
 */
int		 db_begin(struct db *);
int		 db_commit(struct db *);
int		 db_rollback(struct db *);

/*
 * Batching (the daemon): the first write on an idle connection opens a
 * transaction and calls opened(arg) once, so that the caller arranges a
 * db_batch_commit() soon (the daemon: at the end of the loop pass).
 * Every write until then joins that transaction: a burst of device
 * events costs one commit, not one each.  Reads see the batch's own
 * writes; other connections see them after the commit.
 * db_batch_commit(): 0 (also when nothing was open), or -1 when the
 * commit failed and the batch was rolled back (logged; *lost then says
 * how many statements were undone).  db_close() commits an open batch.
 */
void		 db_batch(struct db *, void (*opened)(void *), void *arg);
int		 db_batch_commit(struct db *, unsigned *lost);

/* --- exporters ------------------------------------------------------ */

struct db_exporter {
	int64_t		id;
	char		name[USBGW_EXPORTER_MAX];
	char		host[USBGW_HOST_MAX];
	int		port;
	char		status[8];	/* unknown, up, down */
	char		kind[16];	/* usbip, agent, agent-dialout */
	char		tls[16];	/* off, optional, required */
	char		source[8];	/* cli, file */
	char		origin[96];	/* file: "FILE:LINE" */
	int64_t		last_seen;	/* its last good list, 0: never */
	char		last_error[256];	/* "": none */
	int64_t		last_error_at;
};

/* Add or update (and un-remove) by name.  Returns the id. */
int64_t		 db_exporter_upsert(struct db *, const char *name,
		    const char *host, int port, int64_t now);
/* Its kind and TLS setting (exporter.h's names).  0 or -1. */
int		 db_exporter_set_kind(struct db *, int64_t id, const char *kind,
		    const char *tls);
/* Who owns it: "cli" (the database) or "file" (a config file, origin
 * "FILE:LINE", else NULL).  0 or -1. */
int		 db_exporter_set_source(struct db *, int64_t id, const char *,
		    const char *origin);
/* Its last good device list; its last failure and when.  0 or -1. */
int		 db_exporter_seen(struct db *, int64_t id, int64_t when);
int		 db_exporter_error(struct db *, int64_t id, const char *error,
		    int64_t when);
/* Mark removed.  1 if done, 0 if no such (active) exporter. */
int		 db_exporter_remove(struct db *, const char *name, int64_t now);
/* status "up" (also sets last_seen), "down" or "unknown".  0 or -1. */
int		 db_exporter_status(struct db *, int64_t id, const char *status,
		    int64_t now);
/* Active exporters by name; stops early if cb returns non-zero. */
int		 db_exporter_foreach(struct db *,
		    int (*cb)(void *, const struct db_exporter *), void *arg);

/* --- devices -------------------------------------------------------- */

struct db_device {
	int64_t			id;
	int64_t			exporter_id;
	struct usbgw_identity	ident;		/* busid: the last one used */
	enum dev_state		state;
	int64_t			state_since;
	int64_t			rule_id;	/* 0: none */
	int64_t			first_seen, last_seen;
};

/*
 * Find the device row of this identity at this exporter (same port,
 * descriptor hash, serial, manufacturer and product strings) or create
 * it in state probing with its interfaces.  Updates busid and last_seen.
 * *created (if not NULL) says which.  Fails if another device that is
 * not gone holds ident->busid: mark the old one gone first.
 */
int64_t		 db_device_upsert(struct db *, int64_t exporter_id,
		    const struct usbgw_identity *, int64_t now, int *created);
/* Set state (and the deciding rule, 0 for none); state_since = now. */
int		 db_device_set_state(struct db *, int64_t device_id,
		    enum dev_state, int64_t rule_id, int64_t now);
/* 1 and *out filled, 0 if no such device. */
int		 db_device_get(struct db *, int64_t device_id,
		    struct db_device *out);
/* Devices by id; gone ones only if include_gone.  cb non-zero stops. */
/* The row, not gone, that holds the gateway busid now: id, 0, or -1. */
int64_t		 db_device_busid_holder(struct db *, const char *busid);
int		 db_device_foreach(struct db *, int include_gone,
		    int (*cb)(void *, const struct db_device *), void *arg);
/* The same for one exporter's devices (an index, not a scan). */
int		 db_exporter_devices_foreach(struct db *, int64_t exporter_id,
		    int include_gone,
		    int (*cb)(void *, const struct db_device *), void *arg);

/* --- presences ------------------------------------------------------ */

/* Open a presence (or return the open one).  Returns its id. */
int64_t		 db_presence_begin(struct db *, int64_t device_id,
		    const char *busid, int64_t now);
/*
 * End the device's open presence, and its once-approvals (end reason
 * "gone").  1 if one was open, 0 if none.
 */
int		 db_presence_end(struct db *, int64_t device_id,
		    const char *reason, int64_t now);
/* The open presence's id, 0 if none. */
int64_t		 db_presence_current(struct db *, int64_t device_id);

/* --- rules ---------------------------------------------------------- */

/*
 * origin: "admin", "approval", "denial", "import" or "config".
 * Positions are 1-based; position <= 0 or past the end appends.  The
 * stored text is rule_format(rule).
 */
int64_t		 db_rule_add(struct db *, long position, const struct rule *,
		    const char *origin, int64_t device_id, const char *comment,
		    const char *by, int64_t now);
/* Remove (keeps the row).  1 if removed, 0 if no such active rule. */
int		 db_rule_remove(struct db *, int64_t rule_id, const char *by,
		    int64_t now);
/* Move to position (clamped).  1 if moved, 0 if no such active rule. */
int		 db_rule_move(struct db *, int64_t rule_id, long position);
/*
 * The rule a permanent approval or denial writes for a device: goes at
 * position (0: last), or, with position 0, in the place of the device's
 * previous such rule of the same tier (origin approval/denial: the
 * operator tier; others: admin).  The old rule is removed either way.
 * Returns the new rule's id.
 */
/* The device's rule (a permanent decision's) and its tier ("admin" or
 * "operator"): 1, 0 if none, -1. */
int		 db_rule_of_device(struct db *, int64_t device_id,
		    int64_t *rule_id, char *tier, size_t len);
int64_t		 db_rule_set_device(struct db *, int64_t device_id,
		    long position, const struct rule *, const char *origin,
		    const char *comment,
		    const char *by, int64_t now);
/*
 * Replace the policy's rules with the active rules, in order.  A stored
 * rule that no longer parses is reported through bad (if not NULL) and
 * replaced by "ask" at its position: fail safe, devices go pending.
 * Returns the number of such rules, or -1.
 */
int		 db_rules_load(struct db *, struct policy *, int operator_tier,
		    void (*bad)(void *, int64_t rule_id, const char *text,
		    const char *error), void *arg);

/* --- approvals ------------------------------------------------------ */

struct db_approval {
	int64_t			id;
	int64_t			device_id;
	int64_t			presence_id;	/* SCOPE_ONCE: required */
	int			deny;		/* 0: allow, 1: deny */
	enum approve_scope	scope;
	char			to_host[USBGW_HOST_MAX]; /* "": any host */
	int64_t			created_at;
	int64_t			expires_at;	/* SCOPE_FOR/UNTIL, else 0 */
	int64_t			actor_uid;	/* -1: none */
	char			actor_name[64];
	char			reason[512];
	int64_t			rule_id;	/* SCOPE_PERMANENT, else 0 */
	int			override;	/* an admin's override */
};

/*
 * Record a decision; the device's earlier active decisions for the same
 * to_host end ("superseded") in the same transaction.  Returns the id.
 */
int64_t		 db_approval_add(struct db *, const struct db_approval *);
/* End one (reason: "revoked", "expired", ...).  1 if ended, 0 if not active. */
int		 db_approval_end(struct db *, int64_t approval_id,
		    const char *reason, const char *by, int64_t now);
/* End all of a device's active decisions.  Returns how many. */
int		 db_approvals_end_device(struct db *, int64_t device_id,
		    const char *reason, const char *by, int64_t now);
/*
 * The newest active decision that applies to the device now: not ended,
 * not expired, of this presence if scope once, and for this host
 * (to_host empty, or equal to host_name ignoring case, or to host_addr).
 * host_name/host_addr may be NULL (no host: only decisions for any
 * host apply).  1 and *out filled, 0 if none.
 */
int		 db_approval_active(struct db *, int64_t device_id,
		    int64_t presence_id, const char *host_name,
		    const char *host_addr, int64_t now, struct db_approval *out);
/*
 * Every active decision of the device, oldest first: not ended, not
 * expired at now, of this presence if scope once.  cb returns non-zero
 * to stop.  Returns how many were passed to cb, or -1.
 */
int		 db_approvals_list(struct db *, int64_t device_id,
		    int64_t presence_id, int64_t now,
		    int (*cb)(void *, const struct db_approval *), void *arg);
/* The earliest expiry of an active decision: 1 with *when, *id; 0 none. */
int		 db_approval_next_expiry(struct db *, int64_t *when,
		    int64_t *approval_id);
/* Active decisions with expires_at <= now (up to max ids).  Count or -1. */
int		 db_approvals_due(struct db *, int64_t now, int64_t *ids,
		    size_t max);

/* --- attachments ---------------------------------------------------- */

struct db_counters {
	uint64_t	bytes_to_device;
	uint64_t	bytes_from_device;
	uint64_t	urbs_to_device;
	uint64_t	urbs_from_device;
	uint64_t	iface_refused;	/* URBs to denied interfaces, stalled */
};

/*
 * An attachment's two legs (protocol.md 1.10.9): the host leg (vhci host
 * -> gateway) "tcp", "tls" or "local", and the exporter leg (gateway ->
 * exporter or agent) "tcp" or "tls"; each certificate the verified CN,
 * or NULL without TLS.
 */
struct db_legs {
	const char	*transport;
	const char	*host_cert;
	const char	*up_transport;
	const char	*up_cert;
};

/*
 * mode: "proxy" or "local".  Ids may be 0 (none).  Returns the id.
 */
int64_t		 db_attachment_begin(struct db *, int64_t device_id,
		    int64_t presence_id, int64_t approval_id, int64_t rule_id,
		    const char *mode, const char *host_name,
		    const char *host_addr, const struct db_legs *,
		    int64_t now);
int		 db_attachment_counters(struct db *, int64_t attachment_id,
		    const struct db_counters *);
int		 db_attachment_end(struct db *, int64_t attachment_id,
		    const struct db_counters *, const char *reason, int64_t now);

/*
 * A row a killed daemon may have left open (an attachment, a waiting
 * access request), with what the audit row of its closing names.
 */
struct db_open_row {
	int64_t		id;
	int64_t		device_id;	/* 0: none */
	char		busid[40];
	char		exporter[64];
	char		host[256];	/* verified name, else address */
	char		mode[8];	/* attachments: proxy or local */
};
/* Open attachments: proxy ones, local ones too if include_local. */
int		 db_open_attachments_foreach(struct db *, int include_local,
		    int (*cb)(void *, const struct db_open_row *), void *arg);
/* End an attachment, keeping its counters as last saved.  Changes or -1. */
int		 db_attachment_close(struct db *, int64_t attachment_id,
		    const char *reason, int64_t now);

/* --- access requests ------------------------------------------------ */

int		 db_waiting_requests_foreach(struct db *,
		    int (*cb)(void *, const struct db_open_row *), void *arg);

/*
 * device_id 0: unknown busid.  outcome: "waiting" (held) or any final
 * one: "granted", "refused", "denied", "timeout", "withdrawn",
 * "interrupted" (the gateway stopped without answering it).
 */
int64_t		 db_access_request_add(struct db *, int64_t device_id,
		    const char *busid, const char *host_name,
		    const char *host_addr, const char *outcome, int64_t now);
/* Final outcome of a waiting request.  1 if set, 0 if not waiting. */
int		 db_access_request_decide(struct db *, int64_t request_id,
		    const char *outcome, const char *by, int64_t approval_id,
		    int64_t now);

/* --- settings ------------------------------------------------------- */

/* 1 and value copied (truncated to len), 0 if unset. */
int		 db_setting_get(struct db *, const char *key, char *value,
		    size_t len);
int		 db_setting_set(struct db *, const char *key, const char *value,
		    int64_t now);

/* --- agents: enrolled agents and vhci hosts (protocol.md 1.10.10) ---- */

struct db_agent {
	int64_t		id;
	char		name[64];
	char		role[8];		/* agent, host */
	char		state[10];		/* schema.sql: agents.state */
	char		fpr[65];		/* "" while pending */
	char		serial[41];
	char		key_fpr[65];
	int64_t		not_after;		/* 0 while pending */
	char		address[64];
	int64_t		created_at;
	int64_t		approved_at;
	char		approved_by[64];
	int64_t		ended_at;
	char		end_reason[128];
};

/* A pending row.  Its id, or -1. */
int64_t		 db_agent_pending(struct db *, const char *name,
		    const char *role, const char *key_fpr, const char *address,
		    int64_t now);
/* pending -> active with its certificate.  1, 0 (not pending), -1. */
int		 db_agent_activate(struct db *, int64_t id, const char *fpr,
		    const char *serial, int64_t not_after, const char *by,
		    int64_t now);
/* A renewal: a new active row (its id, or -1), the old one replaced. */
int64_t		 db_agent_renewed(struct db *, const struct db_agent *old,
		    const char *fpr, const char *serial, int64_t not_after,
		    int64_t now);
/* Row id ends in state (revoked, replaced, rejected, lapsed) if it is
 * in from (NULL: pending or active).  1, 0, or -1. */
int		 db_agent_end(struct db *, int64_t id, const char *state,
		    const char *reason, int64_t now);
/* Every pending row -> lapsed (a start: their sessions are gone). */
int		 db_agent_lapse_pending(struct db *, const char *reason,
		    int64_t now);
/* The row of a certificate.  1, 0 (none) or -1. */
int		 db_agent_by_fpr(struct db *, const char *fpr,
		    struct db_agent *);
/* Each row, by name then id; active only for the name given (non-NULL
 * name).  cb returns non-zero to stop.  0 or -1. */
int		 db_agent_foreach(struct db *, const char *active_name,
		    int (*cb)(void *, const struct db_agent *), void *arg);

/*
 * Several gateways on one store (protocol.md 4.3): the gateways table,
 * the change feed (its rows are written by the PostgreSQL schema's
 * triggers), and a present device found by busid (a decision at a
 * gateway that does not hold it).
 */
struct db_gateway {
	char		name[64];
	int64_t		started_at;
	int64_t		heartbeat;
	char		address[128];
	char		version[32];
};
struct db_change {
	int64_t		seq;
	char		gateway[64];
	char		kind[16];
	char		ref[64];
};
int		 db_gateway_put(struct db *, const struct db_gateway *);
int		 db_gateway_beat(struct db *, const char *name, int64_t now);
/* Rows by name; the callback returns non-zero to stop.  Count or -1. */
int		 db_gateways_list(struct db *,
		    int (*)(void *, const struct db_gateway *), void *);
int		 db_changes_max(struct db *, int64_t *seq);
/* Up to limit rows after seq after, in order.  Count or -1. */
int		 db_changes_since(struct db *, int64_t after, int limit,
		    int (*)(void *, const struct db_change *), void *);
/* 1 with the ids, 0 if no present device has busid, -1. */
int		 db_device_present(struct db *, const char *busid,
		    int64_t *device_id, int64_t *presence_id);

#endif
