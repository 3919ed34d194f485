/*
 * usbgw-agent's usbfs zero-copy buffers (client/agent/umem.c), with the
 * mapping and the handle's close replaced by counters: reuse, the
 * per-handle and agent-wide bounds, a failed mapping, and the handle's
 * end — closed only once every buffer lent out is back, and then from
 * the event loop, never inside the put (a libusb callback).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "../../client/agent/umem.h"
#include "tap.h"

static int	nalloc, nfree, nclose, fail_next;
static size_t	live;
static libusb_device_handle *closed_h;

static uint8_t *
fake_alloc(libusb_device_handle *h, size_t len)
{
	(void)h;
	if (fail_next > 0) {
		fail_next--;
		return NULL;
	}
	nalloc++;
	live += len;
	return calloc(1, len);
}

static void
fake_free(libusb_device_handle *h, uint8_t *p, size_t len)
{
	(void)h;
	nfree++;
	live -= len;
	free(p);
}

static void
fake_close(libusb_device_handle *h)
{
	nclose++;
	closed_h = h;
}

static const struct umem_ops fake = { fake_alloc, fake_free, fake_close };

/* Distinct fake handles (never dereferenced). */
static char	hA, hB;
#define HA	((libusb_device_handle *)(void *)&hA)
#define HB	((libusb_device_handle *)(void *)&hB)

static void
test_reuse(void)
{
	struct umem	*m = umem_new(HA);
	uint8_t		*a, *b, *c;
	size_t		 cap = 0, cap2 = 0;

	ok(umem_get(NULL, 65536, &cap) == NULL, "no umem: none");
	ok(umem_get(m, UMEM_MIN - 1, &cap) == NULL,
	    "below %d bytes: copied, not mapped", UMEM_MIN);
	ok(umem_get(m, UMEM_MAX_BUF + 1, &cap) == NULL,
	    "above the largest buffer: copied");
	is_int(nalloc, 0, "nothing mapped for those");
	a = umem_get(m, 120 * 1024, &cap);
	ok(a != NULL, "a 120 KiB transfer gets a mapped buffer");
	is_int(cap, 128 * 1024, "rounded to a power of two (128 KiB)");
	memset(a, 0xaa, cap);
	b = umem_get(m, 4096, &cap2);
	ok(b != NULL && b != a, "a second transfer gets another buffer");
	is_int(cap2, 16 * 1024, "the smallest made is 16 KiB");
	is_int(umem_out(m), 2, "two out");
	umem_put(m, a);
	c = umem_get(m, 100 * 1024, &cap);
	ok(c == a, "a buffer put back is reused");
	is_int(nalloc, 2, "without mapping again");
	umem_put(m, b);
	umem_put(m, c);
	is_int(umem_out(m), 0, "none out");
	is_int(umem_mapped(), 144 * 1024, "144 KiB kept mapped");
	umem_close(m);
	is_int(nclose, 1, "close with nothing out: the handle closes at once");
	is_int(nfree, 2, "every buffer unmapped");
	is_int(umem_mapped(), 0, "nothing mapped");
}

static void
test_bounds(void)
{
	struct umem	*a = umem_new(HA), *b = umem_new(HB);
	uint8_t		*p[UMEM_MAX_BUFS + 1], *q[8];
	size_t		 cap;
	unsigned	 i, n;

	nalloc = nfree = nclose = 0;
	for (i = 0; i < UMEM_MAX_BUFS; i++)
		p[i] = umem_get(a, 8192, &cap);
	for (i = 0, n = 0; i < UMEM_MAX_BUFS; i++)
		n += p[i] != NULL;
	is_int(n, UMEM_MAX_BUFS, "%d buffers out on one handle",
	    UMEM_MAX_BUFS);
	ok(umem_get(a, 8192, &cap) == NULL,
	    "one more on that handle: copied");
	for (i = 0; i < UMEM_MAX_BUFS; i++)
		umem_put(a, p[i]);
	/* The agent-wide bound: 1 MiB buffers up to UMEM_MAX_TOTAL. */
	for (i = 0, n = 0; i < 8; i++)
		if ((q[i] = umem_get(b, UMEM_MAX_BUF, &cap)) != NULL)
			n++;
	/* a's free 16 KiB buffers yield to b. */
	is_int(n, UMEM_MAX_TOTAL / UMEM_MAX_BUF,
	    "1 MiB buffers up to the agent's %u MiB mapped",
	    UMEM_MAX_TOTAL >> 20);
	ok(umem_mapped() <= UMEM_MAX_TOTAL, "mapped %zu <= %u",
	    umem_mapped(), UMEM_MAX_TOTAL);
	is_int(nfree, UMEM_MAX_BUFS,
	    "the other handle's free buffers were unmapped to make room");
	ok(umem_get(a, 8192, &cap) == NULL,
	    "the bound holds for the other handle too (copied)");
	for (i = 0; i < 8; i++)
		if (q[i] != NULL)
			umem_put(b, q[i]);
	ok((p[0] = umem_get(a, 8192, &cap)) != NULL,
	    "b's free buffers yield to a in turn");
	umem_put(a, p[0]);
	umem_close(a);
	umem_close(b);
	is_int(nclose, 2, "both handles closed");
	is_int(umem_mapped(), 0, "nothing mapped");
	is_int(live, 0, "every mapping undone");
}

static void
test_fail(void)
{
	struct umem	*m = umem_new(HA);
	size_t		 cap;
	uint8_t		*p;
	int		 i, n;

	nalloc = 0;
	fail_next = 1;
	ok(umem_get(m, 65536, &cap) == NULL,
	    "a mapping usbfs refuses: copied");
	for (i = 0, n = 0; i < 64; i++)
		n += umem_get(m, 65536, &cap) != NULL;
	is_int(n, 0, "no new try for the next 64 transfers");
	is_int(nalloc, 0, "(nothing mapped)");
	p = umem_get(m, 65536, &cap);
	ok(p != NULL, "then tried again, and mapped");
	umem_put(m, p);
	umem_close(m);
}

static void
test_close_deferred(struct event_base *base)
{
	struct umem	*m = umem_new(HB);
	uint8_t		*a, *b;
	size_t		 cap;

	nclose = 0;
	nfree = 0;
	closed_h = NULL;
	a = umem_get(m, 65536, &cap);
	b = umem_get(m, 65536, &cap);
	ok(a != NULL && b != NULL, "two buffers lent out");
	umem_close(m);
	is_int(nclose, 0, "close with two out: the handle stays open");
	umem_put(m, a);
	is_int(nfree, 1, "a buffer back after the close is unmapped at once");
	is_int(nclose, 0, "one still out: still open");
	umem_put(m, b);
	is_int(nclose, 0, "the last one back: not closed inside the put");
	event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	is_int(nclose, 1, "closed from the event loop");
	ok(closed_h == HB, "the right handle closed");
	is_int(nfree, 2, "both unmapped before the close");
	is_int(umem_mapped(), 0, "nothing mapped");
}

/* At exit, before libusb goes: every handle closes now. */
static void
test_teardown(struct event_base *base)
{
	struct umem	*a = umem_new(HA), *b = umem_new(HB);
	uint8_t		*pa, *pb;
	size_t		 cap;
	int		 freed;

	nclose = 0;
	pa = umem_get(a, 65536, &cap);
	pb = umem_get(b, 65536, &cap);
	umem_close(a);		/* one lent buffer: waits */
	umem_put(b, pb);
	umem_close(b);		/* nothing out: closed at once */
	is_int(nclose, 1, "before teardown: b closed, a waits for its buffer");
	freed = nfree;
	umem_teardown();
	is_int(nclose, 2, "teardown closes the waiting handle now");
	umem_put(a, pa);	/* the output freed after libusb went */
	is_int(nclose, 2, "a buffer back after teardown closes nothing more");
	is_int(nfree, freed, "and unmaps nothing through the closed handle");
	free(pa);		/* what the process's end does */
	live -= cap;
	event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	is_int(nclose, 2, "no close left queued on the loop");

	/* A close queued on the loop when teardown comes runs at teardown. */
	umem_setup(base, &fake, true);
	nclose = 0;
	a = umem_new(HA);
	pa = umem_get(a, 65536, &cap);
	umem_close(a);
	umem_put(a, pa);	/* queues the close */
	is_int(nclose, 0, "(the close queued)");
	umem_teardown();
	is_int(nclose, 1, "teardown runs a queued close at once");
	event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	is_int(nclose, 1, "and not again from the loop");
}

/* zero-copy off (the configuration, or a kernel before 5.7). */
static void
test_disabled(struct event_base *base)
{
	struct umem	*m;
	size_t		 cap;

	umem_setup(base, &fake, false);
	nalloc = 0;
	m = umem_new(HA);
	ok(umem_get(m, 65536, &cap) == NULL, "zero-copy off: copied");
	is_int(nalloc, 0, "nothing mapped");
	umem_close(m);
	umem_teardown();
}

int
main(void)
{
	struct event_base *base = event_base_new();

	if (base == NULL)
		return 1;
	umem_setup(base, &fake, true);
	test_reuse();
	test_bounds();
	test_fail();
	test_close_deferred(base);
	test_teardown(base);
	test_disabled(base);
	event_base_free(base);
	done_testing();
}
