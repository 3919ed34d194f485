/*
 * Budgets for what unauthenticated vhci-side peers can make the gateway
 * write: anyone who reaches the USB/IP port can send an import of an
 * unknown, blocked or pending busid, or a malformed request, and each is
 * an audit row (an access request is also an event and may run hooks).
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

enum hostlimit_kind {
	HL_IMPORT_UNKNOWN,	/* import of a busid the gateway does not show */
	HL_IMPORT_REFUSED,	/* import of a blocked or not-for-you device */
	HL_ACCESS_REQUEST,	/* import of a pending device */
	HL_MALFORMED,		/* malformed op-phase request */
	HL_NKINDS
};

/* Writes one summary row: key (an address or /64, or HOSTLIMIT_OTHER)
 * and its text. */
typedef void (*hostlimit_write_fn)(const char *key, const char *detail);
/* Milliseconds from any fixed origin (tests pass their own clock). */
typedef uint64_t (*hostlimit_clock_fn)(void);

struct event_base;

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
