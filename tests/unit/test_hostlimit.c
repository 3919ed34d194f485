/*
 * hostlimit.c: per-address and total budgets for the audit rows that
 * unauthenticated vhci-side peers cause, with a test clock and a writer
 * that records the summary rows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hostlimit.h"
#include "tap.h"

static uint64_t clock_ms = 1000000;
static char rows[64][600];
static char row_keys[64][HOSTLIMIT_KEY_MAX];
static int nrows;

static uint64_t
test_clock(void)
{
	return clock_ms;
}

static void
test_write(const char *key, const char *detail)
{
	if (nrows < 64) {
		snprintf(row_keys[nrows], sizeof(row_keys[nrows]), "%s", key);
		snprintf(rows[nrows], sizeof(rows[nrows]), "%s", detail);
	}
	nrows++;
}

/* How many of n requests of kind from addr may be written. */
static int
allowed(const char *addr, enum hostlimit_kind kind, int n)
{
	int i, ok = 0;

	for (i = 0; i < n; i++)
		ok += hostlimit_audit(addr, kind);
	return ok;
}

static void
test_keys(void)
{
	static const struct {
		const char *addr, *key, *what;
	} t[] = {
		{ "192.0.2.7", "192.0.2.7", "IPv4: the address itself" },
		{ "2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64", "IPv6: its /64" },
		{ "2001:db8:1:2:ffff::1", "2001:db8:1:2::/64",
		    "another address of the same /64: same key" },
		{ "::1", "::1", "IPv6 loopback: itself" },
		{ "::ffff:192.0.2.7", "::ffff:192.0.2.7", "IPv4-mapped: itself" },
		{ "not an address", "not an address", "anything else: itself" },
	};
	char k[HOSTLIMIT_KEY_MAX];
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		hostlimit_key(t[i].addr, k, sizeof(k));
		is_str(k, t[i].key, "%s", t[i].what);
	}
}

int
main(void)
{
	int i;

	test_keys();

	hostlimit_init(NULL, test_write, test_clock);
	hostlimit_set(5, 12);

	is_int(allowed("192.0.2.1", HL_IMPORT_UNKNOWN, 3), 3, "3 of 3 written");
	is_int(allowed("192.0.2.1", HL_ACCESS_REQUEST, 6), 2,
	    "the budget is per address, all kinds together: 2 of 6 more");
	is_int(allowed("192.0.2.2", HL_MALFORMED, 5), 5,
	    "another address has its own budget");
	is_int(allowed("2001:db8::1", HL_IMPORT_REFUSED, 1) +
	    allowed("2001:db8::2", HL_IMPORT_REFUSED, 9), 2,
	    "the total (12 a minute) caps all addresses together");
	is_int(nrows, 0, "no summary before the minute ends");

	hostlimit_refused("192.0.2.1");
	hostlimit_refused("192.0.2.1");
	clock_ms += 30000;
	hostlimit_sweep();
	is_int(nrows, 0, "half a minute later: nothing yet");
	clock_ms += 30000;
	hostlimit_sweep();
	is_int(nrows, 2, "a minute later: one summary row per address that "
	    "was held back (192.0.2.1 and the IPv6 /64)");
	for (i = 0; i < nrows && i < 2; i++) {
		if (strcmp(row_keys[i], "192.0.2.1") == 0) {
			is_str(rows[i], "in 60 s, not written one by one: 4 "
			    "access-request; 2 connections refused "
			    "(max-sessions-per-host) (limits: 5 rows a minute "
			    "from one address, 12 from all)",
			    "192.0.2.1: what was held back, by kind");
		} else {
			is_str(row_keys[i], "2001:db8::/64", "the IPv6 row is for the /64");
			is_str(rows[i], "in 60 s, not written one by one: 8 "
			    "import-refused (limits: 5 rows a minute from one "
			    "address, 12 from all)", "2001:db8::/64: 8 held back");
		}
	}
	is_int(allowed("192.0.2.1", HL_IMPORT_UNKNOWN, 5), 5,
	    "a new minute, a new budget");

	/* idle keys are forgotten; a key with nothing held back gives no row */
	nrows = 0;
	clock_ms += 60000;
	hostlimit_sweep();		/* ends 192.0.2.1's busy minute */
	clock_ms += 60000;
	hostlimit_sweep();		/* and a minute without a request */
	is_int(nrows, 0, "no row where nothing was held back");
	is_int(hostlimit_nkeys(), 0, "idle addresses are forgotten");

	/* bounded table: past HOSTLIMIT_MAX_HOSTS, one shared entry */
	hostlimit_set(1, 0);
	for (i = 0; i < HOSTLIMIT_MAX_HOSTS; i++) {
		char a[32];

		snprintf(a, sizeof(a), "10.%d.%d.%d", i >> 16, (i >> 8) & 255,
		    i & 255);
		(void)hostlimit_audit(a, HL_IMPORT_UNKNOWN);
	}
	is_int(hostlimit_nkeys(), HOSTLIMIT_MAX_HOSTS, "the table is full");
	is_int(allowed("198.51.100.1", HL_IMPORT_UNKNOWN, 3) +
	    allowed("198.51.100.2", HL_IMPORT_UNKNOWN, 3), 1,
	    "new addresses share one budget once the table is full");
	is_int(hostlimit_nkeys(), HOSTLIMIT_MAX_HOSTS + 1, "and one entry");

	/* shutdown writes what is still held back */
	nrows = 0;
	hostlimit_shutdown();
	is_int(nrows, 1, "shutdown: one summary (the shared entry's)");
	is_str(row_keys[0], HOSTLIMIT_OTHER, "for \"" HOSTLIMIT_OTHER "\"");
	ok(strstr(rows[0], "5 import-unknown") != NULL, "5 held back: %s", rows[0]);
	is_int(hostlimit_nkeys(), 0, "table freed");

	/* 0: no limit */
	hostlimit_set(0, 0);
	is_int(allowed("192.0.2.9", HL_MALFORMED, 10000), 10000,
	    "limits of 0: everything is written");
	hostlimit_shutdown();
	return done_testing();
}
