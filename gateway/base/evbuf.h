/*
 * Byte access at an offset of a libevent evbuffer, whatever its chains:
 * the relay decodes and rewrites headers in place, where a chain may end
 * in the middle of a field.
 */
#ifndef USBGW_EVBUF_H
#define USBGW_EVBUF_H

#include <stddef.h>

struct evbuffer;

/* Copy len bytes at offset `at` out (the caller knows they are there). */
void	evbuf_copyout_at(struct evbuffer *, size_t at, void *dst, size_t len);

/* Overwrite len bytes at offset `at` with src; 0, or -1 if the buffer
 * holds fewer than at + len bytes (then nothing is written). */
int	evbuf_poke(struct evbuffer *, size_t at, const void *src, size_t len);

#endif
