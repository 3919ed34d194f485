/*
 * What every libFuzzer harness here shares: the entry point's prototype
 * and CHECK, an invariant that aborts (a finding) when it does not hold.
 */
#ifndef USBGW_FUZZ_H
#define USBGW_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/*
 * For a harness's own checking code: no coverage instrumentation (its
 * loops and comparisons would be counted as features of the input and
 * cost a callback per byte compared), sanitizers still on.
 */
#define FUZZ_NOCOV	__attribute__((no_sanitize("coverage")))

#define CHECK(c) do {							\
	if (!(c)) {							\
		fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__,	\
		    __LINE__, #c);					\
		abort();						\
	}								\
} while (0)

#endif
