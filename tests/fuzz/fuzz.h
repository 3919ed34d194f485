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

#define CHECK(c) do {							\
	if (!(c)) {							\
		fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__,	\
		    __LINE__, #c);					\
		abort();						\
	}								\
} while (0)

#endif
