/*
 * The relay's in-flight table (relay.c): open addressing on seqnum with
 * tombstones, room for GW_MAX_INFLIGHT.  inflight_add refuses a seqnum
 * already in flight, reuses tombstones, and keeps every entry through
 * many adds and removals (tombstones shed by rehashing).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/device.h"
#include "core/exporter.h"
#include "core/loop.h"
#include "core/relay.h"
#include "core/session.h"
#include "core/store.h"
#include "core/upstream.h"
#include "tap.h"

int
main(void)
{
	struct inflight_tab t;
	struct inflight *f;
	uint32_t i, s, bad;

	inflight_init(&t, GW_MAX_INFLIGHT);

	f = inflight_add(&t, 42);
	ok(f != NULL && f->seqnum == 42 && f->used == 1, "add 42");
	f->length = 4096;
	ok(inflight_add(&t, 42) == NULL, "42 again: refused (in flight)");
	f = inflight_get(&t, 42);
	ok(f != NULL && f->length == 4096, "get 42: the same entry");
	is_int(t.count, 1, "one in flight");

	/* many, with deletions in between: tombstones, rehashing */
	for (i = 1, bad = 0; i <= 1500; i++) {
		if (inflight_add(&t, 1000 + i) == NULL)
			bad++;
		if (i % 3 == 0) {
			f = inflight_get(&t, 1000 + i - 1);
			if (f == NULL)
				bad++;
			else
				inflight_del(&t, f);
		}
	}
	is_int(bad, 0, "1500 added, every third one's predecessor removed");
	is_int(t.count, 1 + 1500 - 500, "1001 in flight");
	for (i = 1, bad = 0; i <= 1500; i++) {
		int gone = i % 3 == 2;

		f = inflight_get(&t, 1000 + i);
		if ((f == NULL) != gone || (f != NULL && f->seqnum != 1000 + i))
			bad++;
		if (!gone && inflight_add(&t, 1000 + i) != NULL)
			bad++;
	}
	is_int(bad, 0, "each present or absent as it should be; no duplicate "
	    "accepted past tombstones");
	ok(inflight_get(&t, 42) != NULL && inflight_get(&t, 42)->length == 4096,
	    "42 kept through it all");

	/* churn: a seqnum window sliding forever leaves tombstones behind */
	for (i = 0, bad = 0; i < 100000; i++) {
		if (inflight_add(&t, 100000 + i) == NULL)
			bad++;
		if ((f = inflight_get(&t, 100000 + i)) == NULL)
			bad++;
		else
			inflight_del(&t, f);
	}
	is_int(bad, 0, "100000 seqnums in and out, one at a time beside 1001");
	ok(t.tombs + t.count <= t.cap * 3 / 4, "tombstones kept in check "
	    "(%u + %u of %u)", t.tombs, t.count, t.cap);

	/*
	 * Small tables, crowded: remove one entry, and every other one must
	 * still be found and refused again, even where the removed one's
	 * tombstone sits earlier in its probe sequence.
	 */
	{
		struct inflight_tab u;
		uint32_t base, k, j, chained = 0;

		for (base = 0, bad = 0; base < 500; base++) {
			for (k = 0; k < 8; k++) {
				inflight_init(&u, 8);
				for (j = 0; j < 8; j++)
					(void)inflight_add(&u, base * 8 + j);
				inflight_del(&u, inflight_get(&u, base * 8 + k));
				for (j = 0; j < 8; j++) {
					if (j == k)
						continue;
					if (inflight_get(&u, base * 8 + j) == NULL ||
					    inflight_add(&u, base * 8 + j) != NULL)
						bad++;
				}
				/* did some entry sit past the tombstone? */
				for (j = 0; j < u.cap; j++)
					if (u.slot[j].used == 2 &&
					    u.slot[(j + 1) & (u.cap - 1)].used == 1)
						chained++;
				inflight_free(&u);
			}
		}
		is_int(bad, 0, "4000 crowded tables: no duplicate past a tombstone");
		ok(chained > 100, "the case arose (%u tombstones with an entry "
		    "right after)", chained);
	}

	/* a removed seqnum can be added again */
	inflight_del(&t, inflight_get(&t, 1001));
	ok(inflight_add(&t, 1001) != NULL, "a retired seqnum comes back");

	/* emptying resets tombstones */
	for (s = 0; s < t.cap; s++)
		if (t.slot[s].used == 1)
			inflight_del(&t, &t.slot[s]);
	is_int(t.count, 0, "all retired");
	is_int(t.tombs, 0, "no tombstone left when the table empties");
	inflight_free(&t);
	return done_testing();
}
