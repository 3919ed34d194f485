/*
 * The daemon's counters for the metrics endpoint (metrics.c): plain
 * totals, bumped where things happen (relay, server, store, control,
 * upstream), read by metrics.c.  Layer 0: it calls nothing.  The event
 * loop is the only writer and reader, so there are no atomics.
 */
#ifndef USBGW_COUNTERS_H
#define USBGW_COUNTERS_H

#include <stdint.h>

#define CNT_PROBE_BUCKETS	9	/* + the +Inf bucket */
#define CNT_MAX_REASONS		32	/* distinct refusal reasons, then "other" */

struct cnt_reason {
	char		label[48];
	uint64_t	n;
};

struct usbgw_counters {
	uint64_t	relay_bytes_to_device;
	uint64_t	relay_bytes_from_device;
	uint64_t	relay_urbs;
	uint64_t	relay_refused;	/* URBs to denied interfaces */
	uint64_t	access_requests;
	uint64_t	audit_rows;
	uint64_t	control_requests;
	uint64_t	probes_failed;
	uint64_t	store_lost;	/* times the database went away */
	uint64_t	probe_bucket[CNT_PROBE_BUCKETS + 1];	/* cumulative at read */
	uint64_t	probe_count;
	uint64_t	probe_usec_sum;
	struct cnt_reason reasons[CNT_MAX_REASONS + 1];	/* [MAX]: "other" */
	unsigned	nreasons;
};

extern struct usbgw_counters cnt;
extern const double cnt_probe_bounds[CNT_PROBE_BUCKETS];	/* seconds */

/* A refused import or connection, by its reason (a fixed string). */
void	cnt_refusal(const char *reason);
/* A probe that ended well, after usec microseconds. */
void	cnt_probe(uint64_t usec);

#endif
