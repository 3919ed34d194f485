/*
 * umem: usbfs zero-copy transfer buffers (see umem.h).
 */
#include <stdlib.h>

#include "base/log.h"
#include "umem.h"
#include "base/util.h"

#define UMEM_ROUND	(16u << 10)	/* smallest buffer made */
#define UMEM_RETRY	64		/* gets skipped after a failed map */

struct umem_buf {
	uint8_t		*p;
	size_t		 cap;
	bool		 out;
};

struct umem {
	libusb_device_handle *h;
	struct umem_buf	 b[UMEM_MAX_BUFS];
	unsigned	 n;		/* b[0..n) in use */
	unsigned	 nout;
	unsigned	 skip;		/* after a failed map */
	bool		 closing;
	bool		 orphan;	/* handle closed at exit, buffers out */
	bool		 logged;
	struct event	*ev;		/* the deferred close */
	struct umem	*next, **prevp;	/* every umem open */
};

static uint8_t *
lib_alloc(libusb_device_handle *h, size_t len)
{
	return libusb_dev_mem_alloc(h, len);
}

static void
lib_free(libusb_device_handle *h, uint8_t *p, size_t len)
{
	(void)libusb_dev_mem_free(h, p, len);
}

static void
lib_close(libusb_device_handle *h)
{
	libusb_close(h);
}

static const struct umem_ops lib_ops = { lib_alloc, lib_free, lib_close };

static struct {
	struct event_base *base;
	struct umem_ops	 ops;
	size_t		 mapped;
	unsigned long long hits;
	struct umem	*all;
	bool		 enabled;
} um = { NULL, { lib_alloc, lib_free, lib_close }, 0, 0, NULL, false };

static void	finish(struct umem *);

void
umem_setup(struct event_base *base, const struct umem_ops *ops, bool enabled)
{
	um.base = base;
	um.ops = ops != NULL ? *ops : lib_ops;
	um.enabled = enabled;
}

/*
 * Before libusb goes (libusb_exit): every handle still here is closed
 * now.  A close that waited for the loop runs at once; one whose buffers
 * are still lent (an output not yet freed at exit) closes its handle now
 * and leaves the mappings to the process's end: a buffer put back later
 * only counts.
 */
void
umem_teardown(void)
{
	struct umem	*m, *next;

	for (m = um.all; m != NULL; m = next) {
		next = m->next;
		if (!m->closing)
			continue;	/* its device's (not reached) */
		if (m->nout == 0) {
			finish(m);
			continue;
		}
		um.ops.close(m->h);
		m->orphan = true;
		if ((*m->prevp = m->next) != NULL)
			m->next->prevp = m->prevp;
		m->prevp = NULL;
	}
	um.base = NULL;
	um.enabled = false;
}

struct umem *
umem_new(libusb_device_handle *h)
{
	struct umem	*m = xcalloc(1, sizeof(*m));

	m->h = h;
	if ((m->next = um.all) != NULL)
		m->next->prevp = &m->next;
	m->prevp = &um.all;
	um.all = m;
	return m;
}

static void
unmap(struct umem *m, unsigned i)
{
	um.ops.free(m->h, m->b[i].p, m->b[i].cap);
	um.mapped -= m->b[i].cap;
	m->b[i] = m->b[--m->n];
}

static void
finish(struct umem *m)
{
	if (m->prevp != NULL) {
		if ((*m->prevp = m->next) != NULL)
			m->next->prevp = m->prevp;
		m->prevp = NULL;
	}
	if (m->ev != NULL)
		event_free(m->ev);
	um.ops.close(m->h);
	free(m);
}

static void
close_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	finish(arg);
}

static size_t
roundup_cap(size_t len)
{
	size_t	c = UMEM_ROUND;

	while (c < len)
		c <<= 1;
	return c;
}

/* Unmap free buffers (too small for the caller: none fits) until a
 * buffer of want bytes fits m's count and the agent's total: m's own
 * first, then other handles' (an idle device's cache yields). */
static void
make_room(struct umem *m, size_t want)
{
	struct umem	*o;
	unsigned	 i;

	for (i = 0; i < m->n && (m->n == UMEM_MAX_BUFS ||
	    um.mapped + want > UMEM_MAX_TOTAL); )
		if (!m->b[i].out)
			unmap(m, i);
		else
			i++;
	for (o = um.all; o != NULL && um.mapped + want > UMEM_MAX_TOTAL;
	    o = o->next)
		for (i = 0; i < o->n && um.mapped + want > UMEM_MAX_TOTAL; )
			if (o != m && !o->b[i].out)
				unmap(o, i);
			else
				i++;
}

uint8_t *
umem_get(struct umem *m, size_t len, size_t *cap)
{
	unsigned	 i, best = UMEM_MAX_BUFS;
	size_t		 want;
	uint8_t		*p;

	if (m == NULL || !um.enabled || m->closing || len < UMEM_MIN ||
	    len > UMEM_MAX_BUF)
		return NULL;
	for (i = 0; i < m->n; i++)
		if (!m->b[i].out && m->b[i].cap >= len &&
		    (best == UMEM_MAX_BUFS || m->b[i].cap < m->b[best].cap))
			best = i;
	if (best == UMEM_MAX_BUFS) {
		if (m->skip > 0) {
			m->skip--;
			return NULL;
		}
		want = roundup_cap(len);
		make_room(m, want);
		if (m->n == UMEM_MAX_BUFS || um.mapped + want > UMEM_MAX_TOTAL)
			return NULL;
		if ((p = um.ops.alloc(m->h, want)) == NULL) {
			if (!m->logged)
				log_info("umem: no usbfs mapping of %zu bytes: "
				    "transfers copied for now", want);
			m->logged = true;
			m->skip = UMEM_RETRY;
			return NULL;
		}
		best = m->n++;
		m->b[best].p = p;
		m->b[best].cap = want;
		um.mapped += want;
	}
	m->b[best].out = true;
	m->nout++;
	um.hits++;
	*cap = m->b[best].cap;
	return m->b[best].p;
}

void
umem_put(struct umem *m, uint8_t *p)
{
	unsigned	 i;

	for (i = 0; i < m->n; i++)
		if (m->b[i].p == p && m->b[i].out)
			break;
	if (i == m->n)
		fatalx("umem: a buffer put back that is not out");
	m->b[i].out = false;
	m->nout--;
	if (m->orphan) {
		if (m->nout == 0)
			free(m);
		return;
	}
	if (!m->closing)
		return;
	unmap(m, i);
	if (m->nout > 0)
		return;
	/* The last one: close from the loop (this may be a libusb
	 * callback, where libusb_close() deadlocks). */
	if (um.base != NULL &&
	    (m->ev = event_new(um.base, -1, 0, close_cb, m)) != NULL)
		event_active(m->ev, EV_TIMEOUT, 0);
	else
		finish(m);
}

void
umem_close(struct umem *m)
{
	unsigned	 i;

	if (m == NULL)
		return;
	m->closing = true;
	for (i = 0; i < m->n; )
		if (!m->b[i].out)
			unmap(m, i);
		else
			i++;
	if (m->nout == 0)
		finish(m);
}

size_t
umem_mapped(void)
{
	return um.mapped;
}

unsigned
umem_out(const struct umem *m)
{
	return m->nout;
}

unsigned long long
umem_hits(void)
{
	return um.hits;
}
