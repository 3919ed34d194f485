/*
 * Helpers shared by the USB/IP codec's unit tests (test_usbip_*.c): a
 * growable byte buffer to write PDUs by hand, independent of the codec's
 * encoders, a request table for RET_SUBMIT lookups, and the truncation
 * check that feeds every prefix of a PDU to a decoder.
 *
 * Every prefix is handed to the decoder in a heap block of exactly that
 * size, so under ASan a decoder that reads past the length it was given
 * fails loudly instead of reading the rest of the PDU.
 */
#ifndef USBGW_USBIP_TEST_H
#define USBGW_USBIP_TEST_H

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/usbip.h"
#include "base/util.h"
#include "tap.h"

#define UT_UNUSED	__attribute__((unused))

/* ---- a PDU written by hand ------------------------------------------ */
struct pdu {
	uint8_t	*b;
	size_t	 len;
	size_t	 cap;
};

static UT_UNUSED void
pdu_init(struct pdu *p)
{
	p->b = NULL;
	p->len = p->cap = 0;
}

static UT_UNUSED void
pdu_free(struct pdu *p)
{
	free(p->b);
	pdu_init(p);
}

static UT_UNUSED uint8_t *
pdu_grow(struct pdu *p, size_t n)
{
	uint8_t	*at;

	if (p->len + n > p->cap) {
		size_t	ncap = p->cap ? p->cap : 64;

		while (ncap < p->len + n)
			ncap *= 2;
		p->b = realloc(p->b, ncap);
		if (p->b == NULL)
			abort();
		p->cap = ncap;
	}
	at = p->b + p->len;
	p->len += n;
	return at;
}

static UT_UNUSED void
pdu_u8(struct pdu *p, uint8_t v)
{
	*pdu_grow(p, 1) = v;
}

static UT_UNUSED void
pdu_be16(struct pdu *p, uint16_t v)
{
	put_be16(pdu_grow(p, 2), v);
}

static UT_UNUSED void
pdu_be32(struct pdu *p, uint32_t v)
{
	put_be32(pdu_grow(p, 4), v);
}

static UT_UNUSED void
pdu_zero(struct pdu *p, size_t n)
{
	memset(pdu_grow(p, n), 0, n);
}

static UT_UNUSED void
pdu_bytes(struct pdu *p, const void *v, size_t n)
{
	if (n != 0)
		memcpy(pdu_grow(p, n), v, n);
}

/* s, then zeros up to size bytes (s must be shorter than size). */
static UT_UNUSED void
pdu_str(struct pdu *p, const char *s, size_t size)
{
	size_t	n = strlen(s);

	if (n > size)
		abort();
	pdu_bytes(p, s, n);
	pdu_zero(p, size - n);
}

/* Append hex digits; whitespace is ignored.  Aborts on a bad digit. */
static UT_UNUSED void
pdu_hex(struct pdu *p, const char *hex)
{
	int	hi = -1, v;

	for (; *hex != '\0'; hex++) {
		if (isspace((unsigned char)*hex))
			continue;
		if (*hex >= '0' && *hex <= '9')
			v = *hex - '0';
		else if (*hex >= 'a' && *hex <= 'f')
			v = *hex - 'a' + 10;
		else if (*hex >= 'A' && *hex <= 'F')
			v = *hex - 'A' + 10;
		else
			abort();
		if (hi < 0)
			hi = v;
		else {
			pdu_u8(p, (uint8_t)(hi << 4 | v));
			hi = -1;
		}
	}
	if (hi >= 0)
		abort();
}

/* ---- requests a RET_SUBMIT can answer -------------------------------- */
#define REQ_TABLE_MAX	16

struct req_table {
	size_t	n;
	struct {
		uint32_t		seqnum;
		struct usbip_req_info	ri;
	} e[REQ_TABLE_MAX];
	unsigned int	lookups;
};

static UT_UNUSED void
req_add(struct req_table *t, uint32_t seqnum, uint32_t dir, uint32_t length,
    uint32_t npackets, bool iso)
{
	if (t->n == REQ_TABLE_MAX)
		abort();
	t->e[t->n].seqnum = seqnum;
	t->e[t->n].ri.direction = dir;
	t->e[t->n].ri.length = length;
	t->e[t->n].ri.npackets = npackets;
	t->e[t->n].ri.iso = iso;
	t->n++;
}

static UT_UNUSED int
req_lookup(void *arg, uint32_t seqnum, struct usbip_req_info *ri)
{
	struct req_table	*t = arg;
	size_t			 i;

	t->lookups++;
	for (i = 0; i < t->n; i++) {
		if (t->e[i].seqnum == seqnum) {
			*ri = t->e[i].ri;
			return 0;
		}
	}
	return -1;
}

/* ---- URB PDUs written field by field --------------------------------- */
static UT_UNUSED void
pdu_basic(struct pdu *p, uint32_t cmd, uint32_t seqnum, uint32_t devid,
    uint32_t dir, uint32_t ep)
{
	pdu_be32(p, cmd);
	pdu_be32(p, seqnum);
	pdu_be32(p, devid);
	pdu_be32(p, dir);
	pdu_be32(p, ep);
}

/* CMD_SUBMIT header; setup may be NULL (zeros). */
static UT_UNUSED void
pdu_cmd_submit(struct pdu *p, uint32_t seqnum, uint32_t devid, uint32_t dir,
    uint32_t ep, uint32_t flags, uint32_t tbl, uint32_t start_frame,
    uint32_t np, uint32_t interval, const uint8_t *setup)
{
	pdu_basic(p, USBIP_CMD_SUBMIT, seqnum, devid, dir, ep);
	pdu_be32(p, flags);
	pdu_be32(p, tbl);
	pdu_be32(p, start_frame);
	pdu_be32(p, np);
	pdu_be32(p, interval);
	if (setup != NULL)
		pdu_bytes(p, setup, 8);
	else
		pdu_zero(p, 8);
}

static UT_UNUSED void
pdu_ret_submit(struct pdu *p, uint32_t seqnum, uint32_t status,
    uint32_t actual, uint32_t start_frame, uint32_t np, uint32_t errors)
{
	pdu_basic(p, USBIP_RET_SUBMIT, seqnum, 0, 0, 0);
	pdu_be32(p, status);
	pdu_be32(p, actual);
	pdu_be32(p, start_frame);
	pdu_be32(p, np);
	pdu_be32(p, errors);
	pdu_zero(p, 8);
}

static UT_UNUSED void
pdu_cmd_unlink(struct pdu *p, uint32_t seqnum, uint32_t devid,
    uint32_t victim)
{
	pdu_basic(p, USBIP_CMD_UNLINK, seqnum, devid, 0, 0);
	pdu_be32(p, victim);
	pdu_zero(p, 24);
}

static UT_UNUSED void
pdu_ret_unlink(struct pdu *p, uint32_t seqnum, uint32_t status)
{
	pdu_basic(p, USBIP_RET_UNLINK, seqnum, 0, 0, 0);
	pdu_be32(p, status);
	pdu_zero(p, 24);
}

static UT_UNUSED void
pdu_iso(struct pdu *p, uint32_t offset, uint32_t length, uint32_t actual,
    uint32_t status)
{
	pdu_be32(p, offset);
	pdu_be32(p, length);
	pdu_be32(p, actual);
	pdu_be32(p, status);
}

/* A pattern that differs at every byte position mod 251. */
static UT_UNUSED void
pdu_pattern(struct pdu *p, size_t n, unsigned int seed)
{
	uint8_t	*at = pdu_grow(p, n);
	size_t	 i;

	for (i = 0; i < n; i++)
		at[i] = (uint8_t)((i + seed) % 251);
}

/* ---- decoding with an exact-size copy -------------------------------- */
static UT_UNUSED uint8_t *
exact_copy(const uint8_t *b, size_t n)
{
	uint8_t	*c = malloc(n);

	if (c == NULL && n != 0)
		abort();
	if (n != 0)
		memcpy(c, b, n);
	return c;
}

static UT_UNUSED int
op_decode_exact(const uint8_t *b, size_t n, enum usbip_flow flow,
    struct usbip_op *op, const char **why)
{
	uint8_t	*c = exact_copy(b, n);
	int	 rv;

	*why = NULL;
	rv = usbip_op_decode(c, n, flow, op, why);
	free(c);
	return rv;
}

/*
 * Decode a URB PDU from an exact-size copy.  The usbip_urb's data and iso
 * pointers would dangle after the copy is freed, so they are rebased onto
 * b (same offsets).
 */
static UT_UNUSED int
urb_decode_exact(const uint8_t *b, size_t n, enum usbip_flow flow,
    struct req_table *t, int ep_iso, struct usbip_urb *u, const char **why)
{
	uint8_t	*c = exact_copy(b, n);
	int	 rv;

	*why = NULL;
	memset(u, 0, sizeof(*u));
	rv = usbip_urb_decode(c, n, flow, t != NULL ? req_lookup : NULL, t,
	    ep_iso, u, why);
	if (rv > 0) {
		if (u->data != NULL)
			u->data = b + (u->data - c);
		if (u->iso != NULL)
			u->iso = b + (u->iso - c);
	}
	free(c);
	return rv;
}

/*
 * Every proper prefix of the complete op PDU b[0..n) must say "need
 * more".  Returns the first prefix length that does not, or n.
 */
static UT_UNUSED size_t
op_first_bad_prefix(const uint8_t *b, size_t n, enum usbip_flow flow,
    int *rv, const char **why)
{
	struct usbip_op	op;
	size_t		i;

	for (i = 0; i < n; i++) {
		*rv = op_decode_exact(b, i, flow, &op, why);
		if (*rv != USBIP_NEED_MORE)
			return i;
	}
	return n;
}

static UT_UNUSED size_t
urb_first_bad_prefix(const uint8_t *b, size_t n, enum usbip_flow flow,
    struct req_table *t, int ep_iso, int *rv, const char **why)
{
	struct usbip_urb	u;
	size_t			i;

	for (i = 0; i < n; i++) {
		*rv = urb_decode_exact(b, i, flow, t, ep_iso, &u, why);
		if (*rv != USBIP_NEED_MORE)
			return i;
	}
	return n;
}

#define op_truncations_ok(b, n, flow, name) do {			\
	int rv_; const char *why_ = NULL;				\
	size_t bad_ = op_first_bad_prefix((b), (n), (flow), &rv_, &why_); \
	if (!ok(bad_ == (n), "%s: all %zu prefixes need more", (name),	\
	    (size_t)(n)))						\
		diag("prefix %zu returned %d (%s)", bad_, rv_,		\
		    why_ ? why_ : "-");					\
} while (0)

#define urb_truncations_ok(b, n, flow, t, ep_iso, name) do {		\
	int rv_; const char *why_ = NULL;				\
	size_t bad_ = urb_first_bad_prefix((b), (n), (flow), (t),	\
	    (ep_iso), &rv_, &why_);					\
	if (!ok(bad_ == (n), "%s: all %zu prefixes need more", (name),	\
	    (size_t)(n)))						\
		diag("prefix %zu returned %d (%s)", bad_, rv_,		\
		    why_ ? why_ : "-");					\
} while (0)

/* The op PDU must be refused with exactly this reason. */
#define op_refused(b, n, flow, reason, name) do {			\
	struct usbip_op op_; const char *why_ = NULL;			\
	int rv_ = op_decode_exact((b), (n), (flow), &op_, &why_);	\
	is_int(rv_, USBIP_MALFORMED, "%s: refused", (name));		\
	is_str(why_, (reason), "%s: reason", (name));			\
} while (0)

#define urb_refused(b, n, flow, t, ep_iso, reason, name) do {		\
	struct usbip_urb u_; const char *why_ = NULL;			\
	int rv_ = urb_decode_exact((b), (n), (flow), (t), (ep_iso), &u_, \
	    &why_);							\
	is_int(rv_, USBIP_MALFORMED, "%s: refused", (name));		\
	is_str(why_, (reason), "%s: reason", (name));			\
} while (0)

#endif
