/*
 * Byte access at an offset of an evbuffer (see evbuf.h).
 */
#include <string.h>

#include <event2/buffer.h>

#include "base/evbuf.h"

void
evbuf_copyout_at(struct evbuffer *b, size_t at, void *dst, size_t len)
{
	struct evbuffer_ptr pos;

	evbuffer_ptr_set(b, &pos, at, EVBUFFER_PTR_SET);
	evbuffer_copyout_from(b, &pos, dst, len);
}

int
evbuf_poke(struct evbuffer *b, size_t at, const void *src, size_t len)
{
	struct evbuffer_ptr pos;
	struct evbuffer_iovec vec[8];
	const unsigned char *s = src;
	size_t n;
	int i, nv;

	if (len == 0)
		return 0;
	if (at + len < at || evbuffer_get_length(b) < at + len ||
	    evbuffer_ptr_set(b, &pos, at, EVBUFFER_PTR_SET) == -1)
		return -1;
	/* a field of a few bytes spans a few chains at most; go on by
	 * position if it spans more than vec holds */
	while (len > 0) {
		nv = evbuffer_peek(b, (ev_ssize_t)len, &pos, vec, 8);
		if (nv > 8)
			nv = 8;
		for (i = 0; i < nv && len > 0; i++) {
			n = vec[i].iov_len < len ? vec[i].iov_len : len;
			memcpy(vec[i].iov_base, s, n);
			s += n;
			len -= n;
			at += n;
		}
		if (len > 0 && evbuffer_ptr_set(b, &pos, at,
		    EVBUFFER_PTR_SET) == -1)
			return -1;
	}
	return 0;
}
