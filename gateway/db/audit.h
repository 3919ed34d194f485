/*
 * The audit log: append-only rows in the audit_log table, each chained
 * to the previous one by a SHA-256 hash, so that editing, inserting or
 * deleting a row with the sqlite3 shell is found by audit_verify().
 *
 * Writes are queued in memory by audit_append() (cheap, no I/O) and
 * written by audit_flush() in one transaction: call it from a short
 * timer or at the end of a loop iteration, and at shutdown; after a
 * decision that must be on disk before anything else happens (revoke,
 * approve), call it at once.  A full queue flushes synchronously.
 *
 * The hash chain holds against anyone who changes rows without
 * recomputing every later hash.  Someone with write access to the file
 * who does recompute them is caught by the row MACs (a key outside the
 * database, audit_set_key()) and by signed checkpoints of the head
 * (audit_checkpoint(): stored, and logged as anchor lines to keep
 * elsewhere).  What each detects and what neither can: protocol.md 1.8.
 */
#ifndef USBGW_AUDIT_H
#define USBGW_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include "proto/ctl.h"

struct db;
struct audit;
struct audit_key;
struct audit_anchor;

#define AUDIT_QUEUE_MAX		256	/* rows queued before a forced flush */
/*
 * Rows kept while the database fails (protocol.md 4.6); past the bound
 * rows are counted, not kept, and the first flush that works writes one
 * AUDIT_EVENT_DROPPED row saying how many and since when.
 */
#define AUDIT_QUEUE_HARD_MAX	10000
#define AUDIT_EVENT_DROPPED	"audit-dropped"
#define AUDIT_EVENT_PRUNE	"audit-prune"	/* the prune checkpoint row */

/*
 * One row.  Only event is required; strings may be NULL (SQL NULL).
 * who NULL means the system.  For ACTOR_RULE the rule id is who->rule_id,
 * for ACTOR_OPERATOR uid and name are who->uid and who->name.
 */
struct audit_event {
	const char		*event;		/* "state", "approve", ... */
	int64_t			 device_id;	/* 0: none */
	const char		*busid;
	const char		*exporter;
	const char		*object;	/* what else it is about */
	const char		*old_state;
	const char		*new_state;
	const struct actor	*who;
	const char		*host;		/* vhci host involved */
	const char		*reason;	/* the operator's message */
	const char		*detail;
	int64_t			 rule_id;	/* the rule it concerns (a rule
						   actor's own id otherwise) */
};

struct audit	*audit_new(struct db *);
/* Flushes what is queued, then frees (NULL is fine). */
void		 audit_free(struct audit *);

/* Queue a row stamped `now` (Unix seconds).  0, or -1 (queue full). */
int		 audit_append(struct audit *, const struct audit_event *,
		    int64_t now);
/* Write the queue in one transaction: rows written, or -1 (kept queued). */
int		 audit_flush(struct audit *);
size_t		 audit_pending(const struct audit *);

/*
 * The key for row MACs (the caller keeps it alive; NULL: rows carry no
 * MAC, for tests only), and a signed checkpoint every n rows (0: none).
 */
void		 audit_set_key(struct audit *, const struct audit_key *);
/*
 * Rows written from now on name this gateway (column gateway, hashed
 * as version 2); NULL or "": rows without it (one gateway, SQLite).
 */
void		 audit_set_gateway(struct audit *, const char *name);
void		 audit_set_checkpoint_rows(struct audit *, unsigned n);

/*
 * Sign the head (flushing first), store the checkpoint and log it as an
 * anchor line at info level.  Unless force, a stored checkpoint that is
 * already at the head is returned instead of a new one.  1 (new), 0
 * (the stored one, or an empty log: out->seq 0), -1 (error, or no
 * secret key).  out may be NULL.
 */
int		 audit_checkpoint(struct audit *, int64_t now, int force,
		    struct audit_anchor *out);
int64_t		 audit_checkpoint_seq(const struct audit *);
/* The last row this audit wrote (committed): 1, or 0 if none yet. */
int		 audit_written(const struct audit *, int64_t *seq,
		    char hash[65]);

struct audit_verify {
	int64_t		rows;		/* rows checked */
	int64_t		first_seq, last_seq;
	int64_t		bad_seq;	/* first broken row, 0 if intact */
	char		reason[384];	/* why, "" if intact */
	char		head[65];	/* hash of the last row */
	int		keyed;		/* MACs were checked (secret key) */
	int64_t		macs;		/* rows whose MAC was checked */
	int64_t		anchors_checked;
	int64_t		anchors_pruned;	/* older than the first kept row */
	int		cut;		/* an anchor is past the last row */
};

/*
 * What to verify against.  key: with its secret, every row from its
 * since on must carry its MAC; public or secret, the stored checkpoints'
 * and the anchors' signatures must verify.  Without a key the stored
 * checkpoints are compared unsigned.  anchors: (seq, hash) kept
 * elsewhere; each named in messages as "the anchor (NAME:LINE)" or
 * anchor_what.
 */
struct audit_verify_opts {
	const struct audit_key		*key;
	const struct audit_anchor	*anchors;
	size_t				 nanchors;
	const char			*anchor_name;	/* file, or NULL */
	const char			*anchor_what;	/* else this */
	const struct audit_anchor	*own;	/* "the last row this daemon
						   wrote", or NULL */
};

/*
 * 0 intact, 1 a row is bad (bad_seq, reason), 2 cut short (an anchor
 * names a seq past the last row), -1 database error.
 */
int		 audit_verify_ex(struct db *, const struct audit_verify_opts *,
		    struct audit_verify *);

/*
 * Recompute the chain.  Returns 0 if intact, 1 if broken (bad_seq and
 * reason name the first broken link), -1 on a database error.  Rows
 * before the first one must have been removed by audit_prune(): their
 * checkpoint row is checked.  If expect_head is not NULL it must equal
 * the hash of the row expect_seq (catches a truncated tail).
 */
int		 audit_verify(struct db *, int64_t expect_seq,
		    const char *expect_head, struct audit_verify *);

/* The last row's seq and hash (seq 0 and 64 zeros if empty).  0 or -1. */
int		 audit_head(struct db *, int64_t *seq, char hash[65]);

/*
 * Whether a prune made at `now` may remove the rows older than `before`
 * (Unix seconds) when the rows younger than retention_s must stay
 * (audit-retention): a cut-off in the future would take every row,
 * the newest included.  AUDIT_PRUNE_OK, or why not with a message in err
 * that names the latest cut-off allowed.  Pure: decides, touches nothing.
 */
enum audit_prune_check {
	AUDIT_PRUNE_OK = 0,
	AUDIT_PRUNE_FUTURE,		/* before > now */
	AUDIT_PRUNE_RETAINED,		/* before > now - retention_s */
};
enum audit_prune_check audit_prune_check(int64_t before, int64_t now,
		    int64_t retention_s, char *err, size_t errlen);

/*
 * Remove the rows older than `before` (Unix seconds): every row up to
 * the last row with ts < before.  It first appends, in the same
 * transaction, a checkpoint row (event AUDIT_EVENT_PRUNE, detail
 * "through_seq=N last_hash=H rows=C before=T") so that the chain stays
 * verifiable.  *pruned gets the number of rows removed.  0 or -1.
 */
int		 audit_prune(struct audit *, int64_t before,
		    const struct actor *, const char *reason, int64_t now,
		    int64_t *pruned);

#endif
