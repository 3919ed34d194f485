/*
 * The enrollment exchange's codec (gateway/proto/enrollproto.c; protocol.md
 * 1.10.10): round trips of every message type, and each way a message can
 * be malformed (magic, version, type for the direction, body length,
 * field header, unknown / repeated / missing field, empty or overlong
 * field, NUL in a field), and partial input asking for more.
 */
#include <stdint.h>
#include <string.h>

#include "proto/enrollproto.h"
#include "tap.h"

static uint8_t buf[ENROLL_MSG_MAX + 64];

static long
enc(enum enroll_type t, const char *name, const char *role, const char *csr,
    const char *cert, const char *ca, const char *reason)
{
	const char *f[ENROLL_F_MAX] = { NULL };

	f[ENROLL_F_NAME] = name;
	f[ENROLL_F_ROLE] = role;
	f[ENROLL_F_CSR] = csr;
	f[ENROLL_F_CERT] = cert;
	f[ENROLL_F_CA] = ca;
	f[ENROLL_F_REASON] = reason;
	return enroll_encode(buf, t, f);
}

static const char *
dec_why(const uint8_t *b, size_t len, int from_client)
{
	struct enroll_msg m;
	const char *why = NULL;
	long r = enroll_decode(b, len, from_client, &m, &why);

	return r < 0 ? why : r == 0 ? "need more" : "ok";
}

/* A hand-made message: header, then the body given. */
static size_t
raw(uint8_t type, const uint8_t *body, size_t blen)
{
	memcpy(buf, "UGWE", 4);
	buf[4] = 1;
	buf[5] = type;
	buf[6] = (uint8_t)(blen >> 8);
	buf[7] = (uint8_t)blen;
	if (blen > 0)	/* memcpy's source may not be NULL, even for 0 */
		memcpy(buf + 8, body, blen);
	return 8 + blen;
}

int
main(void)
{
	struct enroll_msg m;
	const char *why;
	char s[ENROLL_PEM_MAX + 2];
	static char big[ENROLL_PEM_MAX + 2];
	long n, r;
	size_t i;

	/* round trips */
	n = enc(ENROLL_T_ENROLL, "vdi01", "host", "-----CSR-----", NULL, NULL,
	    NULL);
	ok(n > 8, "ENROLL encodes (%ld bytes)", n);
	r = enroll_decode(buf, (size_t)n, 1, &m, &why);
	is_int(r, n, "... and decodes whole");
	ok(m.type == ENROLL_T_ENROLL, "... as ENROLL");
	ok(enroll_field(&m, ENROLL_F_NAME, s, sizeof(s)) == 0 &&
	    strcmp(s, "vdi01") == 0, "... name");
	ok(enroll_field(&m, ENROLL_F_ROLE, s, sizeof(s)) == 0 &&
	    strcmp(s, "host") == 0, "... role");
	ok(enroll_field(&m, ENROLL_F_CSR, s, sizeof(s)) == 0 &&
	    strcmp(s, "-----CSR-----") == 0, "... csr");
	ok(enroll_field(&m, ENROLL_F_CERT, s, sizeof(s)) == -1, "... no cert");
	ok(enroll_field(&m, ENROLL_F_NAME, s, 5) == -1,
	    "a field longer than the caller's buffer is not copied");
	is_str(dec_why(buf, (size_t)n, 0), "type: expected PENDING (3), ISSUED "
	    "(4) or REFUSED (5)", "ENROLL from the gateway: malformed");
	for (i = 1; i < (size_t)n; i++)
		if (enroll_decode(buf, i, 1, &m, &why) != 0)
			break;
	is_int((long)i, n, "every prefix asks for more");

	n = enc(ENROLL_T_RENEW, NULL, NULL, "csr", NULL, NULL, NULL);
	ok(n > 0 && enroll_decode(buf, (size_t)n, 1, &m, &why) == n &&
	    m.type == ENROLL_T_RENEW, "RENEW round trip");
	n = enc(ENROLL_T_PENDING, NULL, NULL, NULL, NULL, NULL, NULL);
	is_int(n, 8, "PENDING is a bare header");
	ok(enroll_decode(buf, 8, 0, &m, &why) == 8 &&
	    m.type == ENROLL_T_PENDING, "... decodes");
	n = enc(ENROLL_T_ISSUED, NULL, NULL, NULL, "cert", "ca", NULL);
	ok(n > 0 && enroll_decode(buf, (size_t)n, 0, &m, &why) == n &&
	    m.flen[ENROLL_F_CERT] == 4 && m.flen[ENROLL_F_CA] == 2,
	    "ISSUED round trip");
	n = enc(ENROLL_T_REFUSED, NULL, NULL, NULL, NULL, NULL, "no");
	ok(n > 0 && enroll_decode(buf, (size_t)n, 0, &m, &why) == n,
	    "REFUSED round trip");
	is_str(dec_why(buf, (size_t)n, 1), "type: expected ENROLL (1) or RENEW "
	    "(2)", "REFUSED from a client: malformed");

	/* the encoder refuses what the decoder would */
	ok(enc(ENROLL_T_ENROLL, "vdi01", NULL, "csr", NULL, NULL, NULL) == -1,
	    "encode: a required field missing");
	ok(enc(ENROLL_T_ENROLL, "", "host", "csr", NULL, NULL, NULL) == -1,
	    "encode: an empty field");
	memset(big, 'A', ENROLL_PEM_MAX + 1);
	ok(enc(ENROLL_T_RENEW, NULL, NULL, big, NULL, NULL, NULL) == -1,
	    "encode: a CSR over %d bytes", ENROLL_PEM_MAX);
	big[ENROLL_PEM_MAX] = '\0';
	ok(enc(ENROLL_T_RENEW, NULL, NULL, big, NULL, NULL, NULL) > 0,
	    "encode: a CSR of exactly %d bytes", ENROLL_PEM_MAX);

	/* malformed */
	n = enc(ENROLL_T_RENEW, NULL, NULL, "csr", NULL, NULL, NULL);
	buf[0] = 'X';
	is_str(dec_why(buf, (size_t)n, 1), "expected the magic \"UGWE\"",
	    "another magic");
	is_str(dec_why((const uint8_t *)"\x01\x11\x80\x03", 4, 1),
	    "expected the magic \"UGWE\"", "a USB/IP op header");
	ok(enroll_is_msg((const uint8_t *)"UG", 2) &&
	    !enroll_is_msg((const uint8_t *)"\x16\x03", 2),
	    "enroll_is_msg: a prefix of the magic yes, TLS no");
	n = enc(ENROLL_T_RENEW, NULL, NULL, "csr", NULL, NULL, NULL);
	buf[4] = 2;
	is_str(dec_why(buf, (size_t)n, 1), "version: expected 1", "version 2");
	buf[4] = 1;
	buf[5] = 9;
	is_str(dec_why(buf, (size_t)n, 1), "type: expected ENROLL (1) or RENEW "
	    "(2)", "type 9");
	raw(2, NULL, 0);
	buf[6] = 0x40;
	buf[7] = 0x01;
	is_str(dec_why(buf, 8, 1), "body length: expected at most 16384 bytes",
	    "a body over the bound");
	{
		static const uint8_t cut[] = { 3, 0 };
		static const uint8_t unknown[] = { 9, 0, 1, 'x' };
		static const uint8_t foreign[] = { 1, 0, 1, 'x', 3, 0, 1, 'c' };
		static const uint8_t twice[] = { 3, 0, 1, 'c', 3, 0, 1, 'c' };
		static const uint8_t past[] = { 3, 0, 9, 'c' };
		static const uint8_t empty[] = { 3, 0, 0 };
		static const uint8_t nul[] = { 3, 0, 2, 'c', 0 };
		static const uint8_t longrole[] = { 1, 0, 1, 'n', 2, 0, 9,
		    'h', 'h', 'h', 'h', 'h', 'h', 'h', 'h', 'h', 3, 0, 1, 'c' };

		is_str(dec_why(buf, raw(2, cut, sizeof(cut)), 1),
		    "field header cut short", "a field header cut short");
		is_str(dec_why(buf, raw(2, unknown, sizeof(unknown)), 1),
		    "a field this message does not carry", "an unknown tag");
		is_str(dec_why(buf, raw(2, foreign, sizeof(foreign)), 1),
		    "a field this message does not carry",
		    "RENEW with a name");
		is_str(dec_why(buf, raw(2, twice, sizeof(twice)), 1),
		    "a field given twice", "a field twice");
		is_str(dec_why(buf, raw(2, past, sizeof(past)), 1),
		    "field length past the body's end", "a field past the end");
		is_str(dec_why(buf, raw(2, empty, sizeof(empty)), 1),
		    "field length out of bounds", "an empty field");
		is_str(dec_why(buf, raw(2, nul, sizeof(nul)), 1),
		    "a NUL byte in a field", "a NUL in a field");
		is_str(dec_why(buf, raw(1, longrole, sizeof(longrole)), 1),
		    "field length out of bounds", "a role of 9 bytes");
		is_str(dec_why(buf, raw(2, NULL, 0), 1),
		    "a required field is missing", "RENEW without its CSR");
	}
	done_testing();
	return 0;
}
