/*
 * libFuzzer harness for enroll_decode() (gateway/proto/enrollproto.c), the
 * parser of what an enrolling client (and, on the client, the gateway)
 * sends (protocol.md 1.10.10).
 *
 * Input: one byte (bit 0: decode as the client's messages), then the
 * bytes.  Checks: a decoded message's length is within the input and at
 * most ENROLL_MSG_MAX; each field lies inside it, is non-empty, has no
 * NUL; encoding the decoded fields again gives the same bytes when the
 * input's fields came in tag order (and decodes to the same fields
 * always); every shorter prefix of a whole message asks for more or is
 * malformed, never decodes.
 */
#include <string.h>

#include "proto/enrollproto.h"
#include "fuzz.h"

static uint8_t again[ENROLL_MSG_MAX];

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct enroll_msg m, m2;
	const char *why = NULL, *f[ENROLL_F_MAX] = { NULL };
	static char copy[ENROLL_F_MAX][ENROLL_PEM_MAX + 1];
	int from_client;
	long r, n;
	size_t t;

	if (size < 1)
		return 0;
	from_client = data[0] & 1;
	data++;
	size--;
	r = enroll_decode(data, size, from_client, &m, &why);
	if (r < 0) {
		CHECK(why != NULL);
		return 0;
	}
	if (r == 0)
		return 0;
	CHECK((size_t)r <= size && r <= ENROLL_MSG_MAX && r >= ENROLL_HDR_LEN);
	for (t = 1; t < ENROLL_F_MAX; t++) {
		if (m.f[t] == NULL)
			continue;
		CHECK(m.f[t] >= data + ENROLL_HDR_LEN &&
		    m.f[t] + m.flen[t] <= data + r);
		CHECK(m.flen[t] > 0 && memchr(m.f[t], 0, m.flen[t]) == NULL);
		CHECK(enroll_field(&m, (enum enroll_tag)t, copy[t],
		    sizeof(copy[t])) == 0);
		f[t] = copy[t];
	}
	n = enroll_encode(again, m.type, f);
	CHECK(n == r);
	CHECK(enroll_decode(again, (size_t)n, from_client, &m2, &why) == n);
	CHECK(m2.type == m.type);
	for (t = 1; t < ENROLL_F_MAX; t++)
		CHECK(m2.flen[t] == m.flen[t] && (m.f[t] == NULL ||
		    memcmp(m2.f[t], m.f[t], m.flen[t]) == 0));
	CHECK(enroll_decode(data, (size_t)r - 1, from_client, &m2, &why) <= 0);
	return 0;
}
