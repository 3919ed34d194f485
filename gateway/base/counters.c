/*
 * The daemon's counters: see counters.h.
 */
#include <ctype.h>
#include <string.h>

#include "base/counters.h"

struct usbgw_counters cnt;

const double cnt_probe_bounds[CNT_PROBE_BUCKETS] = {
	0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10
};

/*
 * Reasons become label values: lower case, [a-z0-9_] (a run of anything
 * else one '_'), at most 47 bytes.  The reasons are the code's fixed
 * strings, so the set is small; past CNT_MAX_REASONS distinct ones (a
 * bug), the rest count as "other".
 */
void
cnt_refusal(const char *reason)
{
	char label[sizeof(cnt.reasons[0].label)];
	size_t o = 0;
	unsigned i;
	int gap = 0;

	for (; *reason != '\0' && o < sizeof(label) - 1; reason++) {
		unsigned char c = (unsigned char)*reason;

		if (isalnum(c)) {
			if (gap && o > 0 && o < sizeof(label) - 2)
				label[o++] = '_';
			label[o++] = (char)tolower(c);
			gap = 0;
		} else
			gap = 1;
	}
	label[o] = '\0';
	if (o == 0)
		strcpy(label, "unknown");
	for (i = 0; i < cnt.nreasons; i++)
		if (strcmp(cnt.reasons[i].label, label) == 0) {
			cnt.reasons[i].n++;
			return;
		}
	if (cnt.nreasons < CNT_MAX_REASONS) {
		memcpy(cnt.reasons[cnt.nreasons].label, label, sizeof(label));
		cnt.reasons[cnt.nreasons++].n = 1;
		return;
	}
	strcpy(cnt.reasons[CNT_MAX_REASONS].label, "other");
	cnt.reasons[CNT_MAX_REASONS].n++;
}

void
cnt_probe(uint64_t usec)
{
	unsigned i;

	for (i = 0; i < CNT_PROBE_BUCKETS; i++)
		if ((double)usec <= cnt_probe_bounds[i] * 1e6)
			break;
	cnt.probe_bucket[i]++;
	cnt.probe_count++;
	cnt.probe_usec_sum += usec;
}
