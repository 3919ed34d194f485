/*
 * libFuzzer harness for the descriptor parsers the gateway runs over
 * what a device it probes returns (gateway/base/desc.c): device, configuration
 * and string descriptors are untrusted bytes.
 *
 * Input: one byte choosing the parser, then the descriptor bytes.
 * Checks: nothing is read past the input (ASan, the input is copied to
 * an exact-size buffer); an accepted configuration has every endpoint
 * address in 1..15 (either direction), type 0..3, at most DESC_MAX_EP
 * endpoints per interface and DESC_MAX_INTF * 2 interface descriptors;
 * a string converts to printable ASCII only, NUL-terminated, bounded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/desc.h"
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct desc_device dd;
	struct desc_config c;
	const char *why = NULL;
	uint8_t *p;
	char s[128];
	size_t n, i;
	int k, j;

	if (size < 1)
		return 0;
	n = size - 1;
	p = malloc(n ? n : 1);
	memcpy(p, data + 1, n);
	switch (data[0] % 3) {
	case 0:
		if (desc_parse_device(p, n, &dd, &why) == -1)
			CHECK(why != NULL);
		else
			CHECK(n >= USB_DT_DEVICE_SIZE);
		break;
	case 1:
		if (desc_parse_config(p, n, &c, &why) == -1) {
			CHECK(why != NULL);
			break;
		}
		CHECK(n >= USB_DT_CONFIG_SIZE);
		CHECK(c.nalt <= DESC_MAX_INTF * 2);
		for (k = 0; k < c.nalt; k++) {
			CHECK(c.alt[k].nep <= DESC_MAX_EP);
			for (j = 0; j < c.alt[k].nep; j++) {
				CHECK((c.alt[k].ep[j].address & 0x0f) != 0);
				CHECK(c.alt[k].ep[j].type <= 3);
			}
		}
		break;
	case 2:
		memset(s, 'x', sizeof(s));
		if (desc_string(p, n, s, sizeof(s)) == 0) {
			size_t len = strnlen(s, sizeof(s));

			CHECK(len < sizeof(s));
			for (i = 0; i < len; i++)
				CHECK(s[i] >= 0x20 && s[i] < 0x7f);
		}
		break;
	}
	free(p);
	return 0;
}
