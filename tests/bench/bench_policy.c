/*
 * Policy decision time: 10,000 rules and 10,000 devices (issue 4's
 * target: median decision <= 20 us).  The rule set is what a large site
 * accumulates: mostly per-device rules written by permanent approvals,
 * some per-vendor rules, and a tail of generic rules (interfaces,
 * exporters, hosts), some with time windows.  Also times a linear scan
 * (no index) over a sample, for comparison.
 *
 * usage: bench_policy [NRULES [NDEVICES]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "policy/policy.h"
#include "policy/rule.h"
#include "base/util.h"

#define TARGET_US	20.0
#define LINEAR_SAMPLE	300

static uint32_t rng = 2463534242u;

static uint32_t
rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 17;
	rng ^= rng << 5;
	return rng % n;
}

static double
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Vendor/product space: 200 vendors x 64 products. */
#define NVENDORS	200
#define NPRODUCTS	64

static uint16_t
vendor(uint32_t i)
{
	return (uint16_t)(0x1000 + i * 7);
}

static char *
make_rule(size_t i, size_t n)
{
	/* Site-wide exceptions first (rarely matching), catch-alls last. */
	static const char *const head[] = {
		"via-exporter lab*",
		"to-host one-of { 10.9.0.0/16 kiosk* }",
		"with-interface all-of { 08:*:* 03:*:* } via-exporter tc0*",
		"name \"Rubber Ducky\"",
	};
	static const char *const tail[] = {
		"with-interface one-of { e0:*:* 02:*:* }",
		"with-interface all-of { 08:*:* 03:*:* }",
		"with-interface none-of { 08:*:* 03:*:* 09:*:* }",
	};
	char	buf[512];
	size_t	generic = n / 100, vendors = n / 25;

	if (i < generic / 2) {
		snprintf(buf, sizeof(buf), "%s %s%s", i % 2 ? "block" : "reject",
		    head[rnd(nitems(head))],
		    rnd(4) == 0 ? " if !localtime(07:00-19:00)" : "");
	} else if (i >= n - generic / 2) {
		snprintf(buf, sizeof(buf), "%s %s%s", i % 2 ? "block" : "reject",
		    tail[rnd(nitems(tail))],
		    rnd(4) == 0 ? " if !localtime(07:00-19:00)" : "");
	} else if (i % (n / vendors) == 0) {
		snprintf(buf, sizeof(buf), "allow id %04x:* with-interface "
		    "match-all { 03:*:* }%s", vendor(rnd(NVENDORS)),
		    rnd(10) == 0 ? " if weekday(mon-fri)" : "");
	} else {
		/* What a permanent approval writes. */
		snprintf(buf, sizeof(buf), "allow id %04x:%04x name \"Device %zu\" "
		    "serial \"SN%06zu\" via-exporter tc%03u with-interface "
		    "equals { 08:06:50 }%s", vendor(rnd(NVENDORS)),
		    rnd(NPRODUCTS), i, i, rnd(300),
		    rnd(20) == 0 ? " if localtime(08:00-18:00)" : "");
	}
	return xstrdup(buf);
}

static void
make_device(struct usbgw_identity *id, size_t i)
{
	static const struct usbgw_iface shapes[][2] = {
		{ { 0x08, 0x06, 0x50 }, { 0, 0, 0 } },
		{ { 0x03, 0x01, 0x01 }, { 0x03, 0x01, 0x02 } },
		{ { 0x08, 0x06, 0x50 }, { 0x03, 0x01, 0x01 } },
		{ { 0xe0, 0x01, 0x01 }, { 0x0a, 0x00, 0x00 } },
	};
	uint32_t s = rnd(nitems(shapes));

	memset(id, 0, sizeof(*id));
	snprintf(id->exporter, sizeof(id->exporter), "tc%03u", rnd(300));
	snprintf(id->exporter_busid, sizeof(id->exporter_busid), "1-%u",
	    rnd(8) + 1);
	snprintf(id->busid, sizeof(id->busid), "%s-%s", id->exporter,
	    id->exporter_busid);
	id->vid = vendor(rnd(NVENDORS));
	id->pid = (uint16_t)rnd(NPRODUCTS);
	id->n_ifaces = shapes[s][1].cls ? 2 : 1;
	memcpy(id->ifaces, shapes[s], sizeof(shapes[s]));
	snprintf(id->product, sizeof(id->product), "Device %u", rnd(10000));
	snprintf(id->serial, sizeof(id->serial), "SN%06zu", i);
	memset(id->hash, 'a', USBGW_HASH_HEX);
}

int
main(int argc, char **argv)
{
	struct policy		*p;
	struct policy_decision	 d;
	struct usbgw_identity	*devs;
	struct usbgw_context	 ctx;
	struct rule		**lin;
	struct rule_error	 err;
	size_t			 nrules = 10000, ndevs = 10000, i, j;
	size_t			 counts[4] = { 0, 0, 0, 0 };
	double			*t, t0, build, sum = 0;
	int64_t			 now = (int64_t)time(NULL);
	char			*s;

	if (argc > 1)
		nrules = strtoul(argv[1], NULL, 10);
	if (argc > 2)
		ndevs = strtoul(argv[2], NULL, 10);
	if (nrules < 100 || ndevs < 1) {
		fprintf(stderr, "usage: bench_policy [NRULES>=100 [NDEVICES]]\n");
		return 2;
	}

	p = policy_new();
	lin = xcalloc(nrules, sizeof(*lin));
	for (i = 0; i < nrules; i++) {
		s = make_rule(i, nrules);
		if ((lin[i] = rule_parse(s, &err)) == NULL) {
			fprintf(stderr, "bench rule %zu: %s\n", i, err.msg);
			return 1;
		}
		policy_append(p, (int64_t)i + 1, rule_parse(s, &err));
		free(s);
	}
	t0 = now_ns();
	policy_prepare(p);
	build = now_ns() - t0;

	devs = xcalloc(ndevs, sizeof(*devs));
	for (i = 0; i < ndevs; i++)
		make_device(&devs[i], i);
	memset(&ctx, 0, sizeof(ctx));
	ctx.host_name = "vdi07";
	usbgw_addr_parse("10.1.0.7", &ctx.host_addr);

	t = xcalloc(ndevs, sizeof(*t));
	for (i = 0; i < ndevs; i++) {
		t0 = now_ns();
		policy_evaluate(p, &devs[i], &ctx, now, &d);
		t[i] = now_ns() - t0;
		sum += t[i];
		counts[d.target]++;
	}
	qsort(t, ndevs, sizeof(*t), cmp_double);
	printf("policy: %zu rules, %zu devices (index built in %.1f ms)\n",
	    nrules, ndevs, build / 1e6);
	printf("policy: decision median %.2f us, mean %.2f us, p90 %.2f us, "
	    "p99 %.2f us, max %.2f us\n", t[ndevs / 2] / 1e3,
	    sum / (double)ndevs / 1e3, t[ndevs * 9 / 10] / 1e3,
	    t[ndevs * 99 / 100] / 1e3, t[ndevs - 1] / 1e3);
	printf("policy: decisions allow %zu, block %zu, reject %zu, ask %zu\n",
	    counts[RULE_ALLOW], counts[RULE_BLOCK], counts[RULE_REJECT],
	    counts[RULE_ASK]);

	/* Linear scan without the index, on a sample. */
	{
		size_t n = ndevs < LINEAR_SAMPLE ? ndevs : LINEAR_SAMPLE;

		for (i = 0; i < n; i++) {
			t0 = now_ns();
			for (j = 0; j < nrules; j++)
				if (rule_match(lin[j], &devs[i], &ctx, now))
					break;
			t[i] = now_ns() - t0;
		}
		qsort(t, n, sizeof(*t), cmp_double);
		printf("policy: linear scan (no index) median %.2f us over %zu "
		    "devices\n", t[n / 2] / 1e3, n);
	}
	/* Recompute the indexed median for the verdict line. */
	for (i = 0; i < ndevs; i++) {
		t0 = now_ns();
		policy_evaluate(p, &devs[i], &ctx, now, &d);
		t[i] = now_ns() - t0;
	}
	qsort(t, ndevs, sizeof(*t), cmp_double);
	printf("policy: target median <= %.0f us: %s (%.2f us)\n", TARGET_US,
	    t[ndevs / 2] / 1e3 <= TARGET_US ? "met" : "MISSED",
	    t[ndevs / 2] / 1e3);

	for (i = 0; i < nrules; i++)
		rule_free(lin[i]);
	free(lin);
	free(t);
	free(devs);
	policy_free(p);
	return 0;
}
