/*
 * Budgets for the audit rows that peers the gateway refuses can make it
 * write.  One struct hostlimit is one set of budgets, keyed by a string
 * (hostlimit_new); the control socket keeps one per uid.  The functions
 * without an instance are the USB/IP side's, per address: anyone who
 * reaches the USB/IP port can send an import of an unknown, blocked or
 * pending busid, or a malformed request, and each is an audit row (an access request is also an event and may run hooks).
 * Per address (IPv6: per /64, which one attacker holds whole) at most
 * `per_host` such rows a minute are written, and at most `total` from all
 * addresses; the rest are counted, and one `audit-suppressed` row per
 * address and minute says how many of each were not written.  The
 * requests themselves are refused all the same.
 *
 * The table holds HOSTLIMIT_MAX_HOSTS addresses; past that, new addresses
 * share one entry ("other addresses").  Memory and rows stay bounded
 * whatever the number of peers.
 */
#ifndef USBGW_HOSTLIMIT_H
#define USBGW_HOSTLIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HOSTLIMIT_WINDOW_MS	60000
#define HOSTLIMIT_MAX_HOSTS	4096
#define HOSTLIMIT_KEY_MAX	64
#define HOSTLIMIT_OTHER		"other addresses"
#define HOSTLIMIT_MAX_KINDS	8

enum hostlimit_kind {
	HL_IMPORT_UNKNOWN,	/* import of a busid the gateway does not show */
	HL_IMPORT_REFUSED,	/* import of a blocked or not-for-you device */
	HL_ACCESS_REQUEST,	/* import of a pending device */
	HL_MALFORMED,		/* malformed op-phase request */
	HL_AGENT_REFUSED,	/* an agent's CONTROL or DIALBACK refused */
	HL_TLS_REFUSED,		/* a TLS handshake failed, or the wrong one */
	HL_NKINDS
};

/* Writes one summary row: key (an address or /64, or HOSTLIMIT_OTHER)
 * and its text. */
typedef void (*hostlimit_write_fn)(const char *key, const char *detail);
/* Milliseconds from any fixed origin (tests pass their own clock). */
typedef uint64_t (*hostlimit_clock_fn)(void);

struct event_base;
struct hostlimit;

/* What a set of budgets counts, and how its summary rows read:
 * "in 60 s, not written one by one: N KIND, ...; R REFUSED (limits: P
 * rows a minute PER_KEY, T from all)". */
struct hostlimit_spec {
	const char *const	*kinds;		/* nkinds names */
	int			 nkinds;	/* 1..HOSTLIMIT_MAX_KINDS */
	const char		*refused;	/* "connections refused (...)" */
	const char		*per_key;	/* "from one address" */
	bool			 by_prefix;	/* key IPv6 addresses by /64 */
	hostlimit_write_fn	 write;		/* the summary row */
};

/* A set of budgets (no limits until hostlimit_limits).  base may be NULL:
 * no sweep timer.  clock NULL: the monotonic clock. */
struct hostlimit *hostlimit_new(struct event_base *,
	    const struct hostlimit_spec *, hostlimit_clock_fn);
/* Write every pending summary and free it; NULL is fine. */
void	 hostlimit_free(struct hostlimit *);
/* Rows a minute per key and in all; 0 = no limit. */
void	 hostlimit_limits(struct hostlimit *, unsigned per_key, unsigned total);
/* May a row of this kind for this key be written now?  Counts it either
 * way. */
bool	 hostlimit_check(struct hostlimit *, const char *key, int kind);
/* Something the key asked for was refused before any row: counted. */
void	 hostlimit_count_refused(struct hostlimit *, const char *key);
void	 hostlimit_sweep_of(struct hostlimit *);
unsigned hostlimit_nkeys_of(const struct hostlimit *);

/* ---- the USB/IP side's budgets (per address) ---- */

/* base may be NULL (no sweep timer: summaries at the next request from
 * the same key, at hostlimit_sweep or at hostlimit_shutdown). */
void	 hostlimit_init(struct event_base *base, hostlimit_write_fn,
	    hostlimit_clock_fn);
/* Rows a minute; 0 = no limit. */
void	 hostlimit_set(unsigned per_host, unsigned total);
/* The key an address is counted under: itself, or an IPv6 /64 prefix. */
void	 hostlimit_key(const char *addr, char *key, size_t keylen);
/* May a row of this kind from this address be written now?  Counts it
 * either way. */
bool	 hostlimit_audit(const char *addr, enum hostlimit_kind);
/* A connection from this address was refused (max-sessions-per-host):
 * counted for the summary row. */
void	 hostlimit_refused(const char *addr);
/* Write the summaries of windows that have ended; forget idle keys. */
void	 hostlimit_sweep(void);
/* Write every pending summary and free the table. */
void	 hostlimit_shutdown(void);
unsigned hostlimit_nkeys(void);

#endif
