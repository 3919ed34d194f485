/*
 * jansson's allocations in an arena, for harnesses that build JSON
 * values per input (fuzz_control, fuzz_jsontext).  Under ASan every
 * malloc and free records a stack trace and goes through the
 * quarantine, which was most of the time per input; here jansson gets a
 * bump pointer over a static buffer instead (json_set_alloc_funcs),
 * reset after each input, with a poisoned 16-byte redzone after every
 * block and a block poisoned again when freed, so ASan still reports an
 * overflow, a use after free or a double free in the code under test;
 * and a count of live blocks, which must be 0 when an input is done (a
 * missing json_decref, or a jansson string not given back to
 * arena_free, fails at once, on its input).
 *
 * Include once, in the harness (it defines LLVMFuzzerInitialize, which
 * installs the arena); call arena_reset() at the end of every input.
 * What jansson returns to be freed (json_dumps) goes to arena_free().
 */
#ifndef USBGW_FUZZ_ARENA_H
#define USBGW_FUZZ_ARENA_H

#include <sanitizer/asan_interface.h>

#include <stdint.h>
#include <string.h>

#include <jansson.h>

#include "fuzz.h"

#define ARENA_SIZE	(32u << 20)
#define ARENA_ALIGN	16u
#define ARENA_REDZONE	16u

struct arena_hdr {
	size_t		size;		/* bytes asked for */
	size_t		live;		/* 1 until freed */
};

static uint8_t	arena[ARENA_SIZE] __attribute__((aligned(ARENA_ALIGN)));
static size_t	arena_used;
static size_t	arena_live;	/* blocks not freed */
static unsigned	arena_failures;	/* allocations refused in this input */

/* Header, block, redzone; the header and redzone stay poisoned. */
FUZZ_NOCOV static void *
arena_malloc(size_t n)
{
	size_t need = sizeof(struct arena_hdr) +
	    ((n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1)) + ARENA_REDZONE;
	struct arena_hdr *h;

	if (n > ARENA_SIZE || need > ARENA_SIZE - arena_used) {
		arena_failures++;
		return NULL;	/* jansson fails cleanly: an error path */
	}
	h = (struct arena_hdr *)(arena + arena_used);
	arena_used += need;
	ASAN_UNPOISON_MEMORY_REGION(h, sizeof(*h));
	h->size = n;
	h->live = 1;
	ASAN_POISON_MEMORY_REGION(h, sizeof(*h));
	ASAN_UNPOISON_MEMORY_REGION(h + 1, n);
	arena_live++;
	return h + 1;
}

FUZZ_NOCOV static void
arena_free(void *p)
{
	struct arena_hdr *h;

	if (p == NULL)
		return;
	CHECK((uint8_t *)p > arena && (uint8_t *)p < arena + arena_used);
	h = (struct arena_hdr *)p - 1;
	ASAN_UNPOISON_MEMORY_REGION(h, sizeof(*h));
	CHECK(h->live == 1);		/* a double free otherwise */
	h->live = 0;
	ASAN_POISON_MEMORY_REGION(h, sizeof(*h) + h->size);
	arena_live--;
}

/* After an input: nothing may be left allocated; then start over. */
FUZZ_NOCOV static void
arena_reset(void)
{
	CHECK(arena_live == 0);
	arena_used = 0;
	arena_failures = 0;
}

int	LLVMFuzzerInitialize(int *, char ***);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	ASAN_POISON_MEMORY_REGION(arena, sizeof(arena));
	json_set_alloc_funcs(arena_malloc, arena_free);
	return 0;
}

#endif
