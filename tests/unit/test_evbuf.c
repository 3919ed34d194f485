/*
 * evbuf.c: reads and writes at an offset of an evbuffer whose chains end
 * anywhere — as the relay's input does, where a 48-byte header and the
 * devid inside it may be split between two reads.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

#include "base/evbuf.h"
#include "tap.h"

#define LEN	64

/*
 * A buffer holding bytes 0..LEN-1 (value = index) in chains that end
 * after each offset in cuts[] (ascending): each piece is added through an
 * evbuffer of its own, and evbuffer_add_buffer keeps chains whole.
 */
static struct evbuffer *
chained(const size_t *cuts, int ncuts)
{
	struct evbuffer *b = evbuffer_new(), *piece;
	uint8_t all[LEN];
	size_t from = 0, to;
	int i;

	for (i = 0; i < LEN; i++)
		all[i] = (uint8_t)i;
	for (i = 0; i <= ncuts; i++) {
		to = i < ncuts ? cuts[i] : LEN;
		piece = evbuffer_new();
		evbuffer_add(piece, all + from, to - from);
		evbuffer_add_buffer(b, piece);
		evbuffer_free(piece);
		from = to;
	}
	return b;
}

static int
chains(struct evbuffer *b)
{
	struct evbuffer_iovec v[LEN];

	return evbuffer_peek(b, -1, NULL, v, LEN);
}

int
main(void)
{
	const uint8_t devid[4] = { 0xde, 0xad, 0xbe, 0xef };
	uint8_t want[LEN], got[LEN];
	size_t c, cuts[3];
	int i, bad_copy = 0, bad_poke = 0, bad_rest = 0, split2 = 0;

	for (i = 0; i < LEN; i++)
		want[i] = (uint8_t)i;

	/* one cut at every offset: copy out a header at 8, rewrite its devid */
	for (c = 1; c < LEN; c++) {
		struct evbuffer *b = chained(&c, 1);

		if (chains(b) == 2)
			split2++;
		evbuf_copyout_at(b, 8, got, 48);
		bad_copy += memcmp(got, want + 8, 48) != 0;
		if (evbuf_poke(b, 8 + 8, devid, sizeof(devid)) != 0)
			bad_poke++;
		evbuffer_copyout(b, got, LEN);
		bad_poke += memcmp(got + 16, devid, 4) != 0;
		bad_rest += memcmp(got, want, 16) != 0 ||
		    memcmp(got + 20, want + 20, LEN - 20) != 0;
		evbuffer_free(b);
	}
	is_int(split2, LEN - 1, "every test buffer has the two chains asked for");
	is_int(bad_copy, 0, "copy out at an offset: right bytes wherever the chain ends");
	is_int(bad_poke, 0, "poke: the devid lands whole wherever the chain ends");
	is_int(bad_rest, 0, "poke: no byte outside the field changes");

	/* a field over three and four chains: 1-byte pieces */
	cuts[0] = 17;
	cuts[1] = 18;
	cuts[2] = 19;
	{
		struct evbuffer *b = chained(cuts, 3);

		is_int(chains(b), 4, "four chains, three of them inside the field");
		ok(evbuf_poke(b, 16, devid, 4) == 0, "poke over four chains");
		evbuffer_copyout(b, got, LEN);
		is_mem(got + 16, devid, 4, "the field over four chains is rewritten");
		ok(memcmp(got, want, 16) == 0 && memcmp(got + 20, want + 20,
		    LEN - 20) == 0, "and nothing else");
		evbuffer_free(b);
	}

	/* limits: nothing written past the end, a failing poke changes nothing */
	{
		struct evbuffer *b = chained(cuts, 3);

		ok(evbuf_poke(b, LEN - 2, devid, 4) == -1, "poke past the end: refused");
		ok(evbuf_poke(b, SIZE_MAX - 1, devid, 4) == -1, "poke at an offset that wraps: refused");
		evbuffer_copyout(b, got, LEN);
		is_mem(got, want, LEN, "a refused poke changes nothing");
		is_int((int)evbuffer_get_length(b), LEN, "nor the length");
		ok(evbuf_poke(b, LEN - 4, devid, 4) == 0, "poke of the last 4 bytes");
		evbuffer_copyout(b, got, LEN);
		is_mem(got + LEN - 4, devid, 4, "the last 4 bytes are rewritten");
		ok(evbuf_poke(b, 0, devid, 0) == 0, "a 0-byte poke is a no-op");
		evbuffer_free(b);
	}
	return done_testing();
}
