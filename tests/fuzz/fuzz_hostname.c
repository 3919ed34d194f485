/*
 * libFuzzer harness for hostname_normalize(), the check a PTR answer (an
 * untrusted name) passes before it names a host in rules, logs and SQL.
 *
 * Input: the bytes of the name.  Checks, when it is accepted:
 *  - 1 to HOSTNAME_MAX bytes of a-z, 0-9, '-' and '.', in labels of 1 to
 *    HOSTNAME_LABEL_MAX bytes that neither begin nor end with '-';
 *  - it is the input lowercased, one trailing dot dropped;
 *  - the last label is not all digits, and inet_aton() does not read it;
 *  - normalizing it again gives it again;
 * when refused, out is "".  Output buffers are allocated to their exact
 * size, a short one too, so ASan sees a write past either.
 */
#include <arpa/inet.h>

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "base/hostname.h"

static void
check_name(const char *in, size_t len, const char *out)
{
	struct in_addr ia;
	size_t n = strlen(out), i, label = 0;
	int digits = 1;
	char again[HOSTNAME_MAX + 1];

	CHECK(n >= 1 && n <= HOSTNAME_MAX);
	CHECK(n == len || (n == len - 1 && in[len - 1] == '.'));
	for (i = 0; i < n; i++) {
		CHECK(out[i] == tolower((unsigned char)in[i]));
		if (out[i] == '.') {
			CHECK(label > 0 && out[i - 1] != '-');
			label = 0;
			digits = 1;
			continue;
		}
		CHECK((out[i] >= 'a' && out[i] <= 'z') ||
		    (out[i] >= '0' && out[i] <= '9') || out[i] == '-');
		CHECK(label > 0 || out[i] != '-');
		if (out[i] < '0' || out[i] > '9')
			digits = 0;
		CHECK(++label <= HOSTNAME_LABEL_MAX);
	}
	CHECK(label > 0 && out[n - 1] != '-' && !digits);
	CHECK(inet_aton(out, &ia) == 0);
	CHECK(hostname_normalize(out, n, again, sizeof(again)) == 0);
	CHECK(strcmp(again, out) == 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *in = (const char *)data;
	char *out, *small;
	size_t smallsz;
	int rv;

	if (size > 4 * HOSTNAME_MAX)
		return 0;
	out = malloc(HOSTNAME_MAX + 1);
	if (out == NULL)
		return 0;
	rv = hostname_normalize(in, size, out, HOSTNAME_MAX + 1);
	CHECK(rv == 0 || rv == -1);
	if (rv == 0)
		check_name(in, size, out);
	else
		CHECK(out[0] == '\0');

	/* The same into a buffer that may be too small: same answer or -1. */
	smallsz = size > 0 ? (size_t)data[0] % (HOSTNAME_MAX + 2) + 1 : 1;
	small = malloc(smallsz);
	if (small != NULL) {
		if (hostname_normalize(in, size, small, smallsz) == 0) {
			CHECK(rv == 0);
			CHECK(strcmp(small, out) == 0);
		} else
			CHECK(small[0] == '\0');
		free(small);
	}
	free(out);
	return 0;
}
