/*
 * The enrollment exchange's codec (enrollproto.h; protocol.md 1.10.10).
 */
#include <string.h>

#include "proto/enrollproto.h"

static const size_t field_max[ENROLL_F_MAX] = {
	[ENROLL_F_NAME] = 63,
	[ENROLL_F_ROLE] = 8,
	[ENROLL_F_CSR] = ENROLL_PEM_MAX,
	[ENROLL_F_CERT] = ENROLL_PEM_MAX,
	[ENROLL_F_CA] = ENROLL_PEM_MAX,
	[ENROLL_F_REASON] = ENROLL_REASON_MAX,
};

/* The fields each type must carry (a bit per tag); no others allowed. */
#define B(t)	(1u << (t))
static unsigned
fields_of(enum enroll_type t)
{
	switch (t) {
	case ENROLL_T_ENROLL:
		return B(ENROLL_F_NAME) | B(ENROLL_F_ROLE) | B(ENROLL_F_CSR);
	case ENROLL_T_RENEW:
		return B(ENROLL_F_CSR);
	case ENROLL_T_PENDING:
		return 0;
	case ENROLL_T_ISSUED:
		return B(ENROLL_F_CERT) | B(ENROLL_F_CA);
	case ENROLL_T_REFUSED:
		return B(ENROLL_F_REASON);
	}
	return 0;
}

const char *
enroll_type_name(enum enroll_type t)
{
	switch (t) {
	case ENROLL_T_ENROLL:	return "ENROLL";
	case ENROLL_T_RENEW:	return "RENEW";
	case ENROLL_T_PENDING:	return "PENDING";
	case ENROLL_T_ISSUED:	return "ISSUED";
	case ENROLL_T_REFUSED:	return "REFUSED";
	}
	return "unknown";
}

int
enroll_is_msg(const uint8_t *buf, size_t len)
{
	size_t n = len < 4 ? len : 4;

	return len > 0 && memcmp(buf, ENROLL_MAGIC, n) == 0;
}

static unsigned
be16(const uint8_t *p)
{
	return (unsigned)p[0] << 8 | p[1];
}

long
enroll_decode(const uint8_t *buf, size_t len, int from_client,
    struct enroll_msg *m, const char **why)
{
	size_t blen, off, fl;
	unsigned want, seen = 0, tag;

	memset(m, 0, sizeof(*m));
	if (!enroll_is_msg(buf, len)) {
		*why = "expected the magic \"UGWE\"";
		return -1;
	}
	if (len < ENROLL_HDR_LEN)
		return 0;
	if (buf[4] != ENROLL_VERSION) {
		*why = "version: expected 1";
		return -1;
	}
	m->type = buf[5];
	if (from_client ? m->type != ENROLL_T_ENROLL &&
	    m->type != ENROLL_T_RENEW : m->type < ENROLL_T_PENDING ||
	    m->type > ENROLL_T_REFUSED) {
		*why = from_client ? "type: expected ENROLL (1) or RENEW (2)" :
		    "type: expected PENDING (3), ISSUED (4) or REFUSED (5)";
		return -1;
	}
	blen = be16(buf + 6);
	if (blen > ENROLL_BODY_MAX) {
		*why = "body length: expected at most 16384 bytes";
		return -1;
	}
	if (len < ENROLL_HDR_LEN + blen)
		return 0;
	want = fields_of(m->type);
	for (off = 0; off < blen; off += fl) {
		if (blen - off < 3) {
			*why = "field header cut short";
			return -1;
		}
		tag = buf[ENROLL_HDR_LEN + off];
		fl = be16(buf + ENROLL_HDR_LEN + off + 1);
		off += 3;
		if (tag == 0 || tag >= ENROLL_F_MAX || !(want & B(tag))) {
			*why = "a field this message does not carry";
			return -1;
		}
		if (seen & B(tag)) {
			*why = "a field given twice";
			return -1;
		}
		if (fl > blen - off) {
			*why = "field length past the body's end";
			return -1;
		}
		if (fl == 0 || fl > field_max[tag]) {
			*why = "field length out of bounds";
			return -1;
		}
		if (memchr(buf + ENROLL_HDR_LEN + off, '\0', fl) != NULL) {
			*why = "a NUL byte in a field";
			return -1;
		}
		seen |= B(tag);
		m->f[tag] = buf + ENROLL_HDR_LEN + off;
		m->flen[tag] = fl;
	}
	if (seen != want) {
		*why = "a required field is missing";
		return -1;
	}
	return (long)(ENROLL_HDR_LEN + blen);
}

long
enroll_encode(uint8_t *out, enum enroll_type t, const char *f[ENROLL_F_MAX])
{
	unsigned want = fields_of(t), tag;
	size_t off = ENROLL_HDR_LEN, fl;

	memcpy(out, ENROLL_MAGIC, 4);
	out[4] = ENROLL_VERSION;
	out[5] = (uint8_t)t;
	for (tag = 1; tag < ENROLL_F_MAX; tag++) {
		if (!(want & B(tag)))
			continue;
		if (f == NULL || f[tag] == NULL)
			return -1;
		fl = strlen(f[tag]);
		if (fl == 0 || fl > field_max[tag] ||
		    off + 3 + fl > ENROLL_MSG_MAX)
			return -1;
		out[off] = (uint8_t)tag;
		out[off + 1] = (uint8_t)(fl >> 8);
		out[off + 2] = (uint8_t)fl;
		memcpy(out + off + 3, f[tag], fl);
		off += 3 + fl;
	}
	out[6] = (uint8_t)((off - ENROLL_HDR_LEN) >> 8);
	out[7] = (uint8_t)(off - ENROLL_HDR_LEN);
	return (long)off;
}

int
enroll_field(const struct enroll_msg *m, enum enroll_tag t, char *out,
    size_t outlen)
{
	if (t <= 0 || t >= ENROLL_F_MAX || m->f[t] == NULL ||
	    m->flen[t] >= outlen)
		return -1;
	memcpy(out, m->f[t], m->flen[t]);
	out[m->flen[t]] = '\0';
	return 0;
}
