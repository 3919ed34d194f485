/*
 * urb: the agent's URB engine (protocol.md 1.9.3), the expsrv back end
 * usbdev_expsrv_ops.  expsrv owns the connection, the in-flight table and
 * the unlink order; this file turns each CMD_SUBMIT into a libusb
 * transfer, or into a libusb call on the worker for the four requests
 * the stub performs itself (never both), and completes it.
 *
 * Per endpoint and direction, at most usbdev_max_urbs() transfers are
 * submitted; the rest wait in order in a FIFO.  A transfer outlives its
 * import if it must: it holds a reference on its device and on the
 * import's state, and completes its URB (whose connection may be gone)
 * when libusb calls back.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <libusb.h>

#include "base/desc.h"
#include "proto/expsrv.h"
#include "base/log.h"
#include "urb.h"
#include "umem.h"
#include "urbmap.h"
#include "usbdev_int.h"
#include "usbloop.h"
#include "base/util.h"

#define URB_NQ		32			/* ep 0..15 x OUT/IN */
/* 3/4 of usbfs_memory_mb, less what umem has mapped (charged by usbfs
 * for as long as it is) */
#define URB_USBFS_BUDGET ((12u << 20) - umem_mapped())
#define URB_BUFCACHE_N	16			/* transfer buffers kept, */
#define URB_BUFCACHE_MAX (1u << 20)		/* each at most: 16 MiB */
#define URB_REF_MIN	4096			/* IN data lent, not copied */

struct urbstate;

struct uxfer {
	struct usbdev	*dev;
	struct urbstate	*us;
	struct expsrv_urb *u;
	struct libusb_transfer *t;
	uint8_t		*buf;
	size_t		 bufcap;
	struct umem	*mem;		/* buf is mapped by usbfs (umem) */
	size_t		 cost;		/* usbfs bytes while submitted */
	enum urbmap_cancel cancel;
	enum urbmap_req	 req;
	uint8_t		 q;		/* ep | dir << 4 */
	int		 type;		/* USB_XFER_* */
	bool		 submitted;
	struct uxfer	*qnext;		/* the endpoint's FIFO */
	struct uxfer	*next, *prev;	/* the import's transfers */
};

struct urbq {
	unsigned	 nsub;
	struct uxfer	*head, **tailp;
};

struct urbstate {
	unsigned	 refs;		/* the import + each transfer */
	struct usbdev	*dev;
	struct expsrv_conn *conn;	/* NULL once released */
	struct urbq	 q[URB_NQ];
	struct uxfer	*all;
	struct uxfer	*special;	/* an intercepted request */
	uint32_t	 special_wait;	/* queues that must drain first */
	bool		 special_started;
	bool		 importing;	/* async import: reset running */
	bool		 gone;		/* the device left: closing */
	bool		 closed;
	bool		 released;
	bool		 restored;
	struct event	*deadline;
	uint64_t	 urbs, bytes;
	char		 peer[64];
};

static size_t	urb_usbfs_bytes;
static bool	urb_budget_blocked;

/*
 * Transfer buffers freed are kept for the next transfers: a bulk stream
 * that mallocs and frees ~100 KiB per URB otherwise moves glibc's heap top
 * (brk) up and down and faults fresh pages in on every URB, which costs
 * more than the transfer's own system calls.  A reused buffer still holds
 * an earlier transfer's bytes (as a malloc'd one may): only what the
 * kernel reports as transferred (actual_length, each ISO packet's) is
 * ever sent.
 */
static struct {
	uint8_t		*buf;
	size_t		 cap;
} urb_bufcache[URB_BUFCACHE_N];
static unsigned	urb_nbufcache;
static bool	urb_bufcache_closed;		/* after urb_shutdown() */

/* A buffer of at least len bytes (1 for 0): the smallest kept that fits. */
static uint8_t *
buf_get(size_t len, size_t *cap)
{
	unsigned	 i, best = URB_BUFCACHE_N;
	uint8_t		*b;

	if (len == 0)
		len = 1;
	for (i = 0; i < urb_nbufcache; i++)
		if (urb_bufcache[i].cap >= len && (best == URB_BUFCACHE_N ||
		    urb_bufcache[i].cap < urb_bufcache[best].cap))
			best = i;
	if (best == URB_BUFCACHE_N) {
		*cap = len;
		return xmalloc(len);
	}
	b = urb_bufcache[best].buf;
	*cap = urb_bufcache[best].cap;
	urb_bufcache[best] = urb_bufcache[--urb_nbufcache];
	return b;
}

/* Keep b for later, or free it (too large, or the cache is full of
 * larger ones). */
static void
buf_put(uint8_t *b, size_t cap)
{
	unsigned	 i, small = 0;

	if (b == NULL)
		return;
	if (cap > URB_BUFCACHE_MAX || urb_bufcache_closed) {
		free(b);
		return;
	}
	if (urb_nbufcache < URB_BUFCACHE_N) {
		urb_bufcache[urb_nbufcache].buf = b;
		urb_bufcache[urb_nbufcache++].cap = cap;
		return;
	}
	for (i = 1; i < URB_BUFCACHE_N; i++)
		if (urb_bufcache[i].cap < urb_bufcache[small].cap)
			small = i;
	if (urb_bufcache[small].cap >= cap) {
		free(b);
		return;
	}
	free(urb_bufcache[small].buf);
	urb_bufcache[small].buf = b;
	urb_bufcache[small].cap = cap;
}

static void
buf_cache_free(void)
{
	while (urb_nbufcache > 0)
		free(urb_bufcache[--urb_nbufcache].buf);
	urb_bufcache_closed = true;
}

/* The connection's output has written (or dropped) IN data it was lent. */
static void
buf_lent_back(const void *data, size_t len, void *cap)
{
	(void)len;
	buf_put((uint8_t *)(uintptr_t)data, (size_t)(uintptr_t)cap);
}

static void
umem_lent_back(const void *data, size_t len, void *mem)
{
	(void)len;
	umem_put(mem, (uint8_t *)(uintptr_t)data);
}

/*
 * A transfer buffer of len bytes for x: usbfs-mapped (no copy and no
 * allocation in the kernel per URB) when umem has one, else our own.
 * Control transfers stay in our memory: small, and their setup packet
 * is read by the kernel anyway.
 */
static uint8_t *
x_buf(struct uxfer *x, size_t len)
{
	uint8_t		*b;

	if (x->type != USB_XFER_CONTROL &&
	    (b = umem_get(x->dev->mem, len, &x->bufcap)) != NULL) {
		x->mem = x->dev->mem;
		return b;
	}
	return buf_get(len, &x->bufcap);
}

static void	urb_pump(struct urbstate *);
static void	urb_progress(struct urbstate *);
static void	urb_pump_all(void);

static void
us_unref(struct urbstate *us)
{
	if (--us->refs > 0)
		return;
	if (us->deadline != NULL)
		event_free(us->deadline);
	free(us);
}

static unsigned
qindex(uint32_t ep, uint32_t dir)
{
	return (ep & 0x0f) | (dir == USBIP_DIR_IN ? 0x10 : 0);
}

/* ---- endpoint table ----------------------------------------------- */

static const struct desc_ep *
urb_find_ep(const struct usbdev *d, uint32_t dir, uint32_t ep, int *iface)
{
	uint8_t		 addr = (uint8_t)(ep | (dir == USBIP_DIR_IN ? 0x80 : 0));
	const struct desc_alt *a;
	unsigned	 i, k;

	if (!d->have_cfg)
		return NULL;
	for (i = 0; i < d->cfg.nalt; i++) {
		a = &d->cfg.alt[i];
		if (a->number >= DESC_MAX_INTF || a->alt != d->alt[a->number])
			continue;
		for (k = 0; k < a->nep; k++)
			if (a->ep[k].address == addr) {
				if (iface != NULL)
					*iface = a->number;
				return &a->ep[k];
			}
	}
	return NULL;
}

static int
urb_ep_type(void *dev, uint32_t dir, uint32_t ep)
{
	const struct desc_ep *e;

	if (ep == 0)
		return USB_XFER_CONTROL;
	if (ep > USBIP_MAX_EP ||
	    (e = urb_find_ep(dev, dir, ep, NULL)) == NULL)
		return -1;
	return e->type;
}

/* The queues of interface iface's endpoints in its current alt. */
static uint32_t
urb_iface_queues(const struct usbdev *d, int iface)
{
	const struct desc_alt *a;
	uint32_t	 m = 0;
	unsigned	 i, k;

	for (i = 0; i < d->cfg.nalt; i++) {
		a = &d->cfg.alt[i];
		if (a->number != iface || a->alt != d->alt[a->number])
			continue;
		for (k = 0; k < a->nep; k++)
			m |= 1u << qindex(a->ep[k].address & 0x0f,
			    (a->ep[k].address & 0x80) ? USBIP_DIR_IN :
			    USBIP_DIR_OUT);
	}
	return m;
}

/* ---- transfers ---------------------------------------------------- */

static struct uxfer *
x_new(struct urbstate *us, struct expsrv_urb *u)
{
	struct uxfer	*x = xcalloc(1, sizeof(*x));

	x->dev = us->dev;
	x->us = us;
	x->u = u;
	u->be = x;
	us->refs++;
	usbdev_ref(x->dev);
	x->next = us->all;
	if (us->all != NULL)
		us->all->prev = x;
	us->all = x;
	return x;
}

/* Off the import's list; the caller completes or drops x->u. */
static void
x_unlink(struct uxfer *x)
{
	struct urbstate	*us = x->us;

	if (x->prev != NULL)
		x->prev->next = x->next;
	else if (us->all == x)
		us->all = x->next;
	if (x->next != NULL)
		x->next->prev = x->prev;
	x->next = x->prev = NULL;
	if (us->special == x) {
		us->special = NULL;
		us->special_started = false;
	}
}

static void
x_free(struct uxfer *x)
{
	struct usbdev	*d = x->dev;
	struct urbstate	*us = x->us;

	if (x->t != NULL)
		libusb_free_transfer(x->t);
	if (x->mem != NULL && x->buf != NULL)
		umem_put(x->mem, x->buf);
	else
		buf_put(x->buf, x->bufcap);
	free(x);
	us_unref(us);
	usbdev_unref(d);
}

static void
q_remove(struct urbq *q, struct uxfer *x)
{
	struct uxfer	**pp;

	for (pp = &q->head; *pp != NULL; pp = &(*pp)->qnext)
		if (*pp == x) {
			*pp = x->qnext;
			if (q->tailp == &x->qnext)
				q->tailp = pp;
			x->qnext = NULL;
			return;
		}
}

/* Complete a URB that never reached libusb (queued, or refused). */
static void
x_finish(struct uxfer *x, int32_t status)
{
	struct expsrv_urb *u = x->u;

	x_unlink(x);
	x->u = NULL;
	expsrv_urb_done(u, status, 0);
	x_free(x);
}

static enum urbmap_end
x_end(enum libusb_transfer_status st)
{
	switch (st) {
	case LIBUSB_TRANSFER_COMPLETED:	return URBEND_COMPLETED;
	case LIBUSB_TRANSFER_TIMED_OUT:	return URBEND_TIMED_OUT;
	case LIBUSB_TRANSFER_CANCELLED:	return URBEND_CANCELLED;
	case LIBUSB_TRANSFER_STALL:	return URBEND_STALL;
	case LIBUSB_TRANSFER_NO_DEVICE:	return URBEND_NO_DEVICE;
	case LIBUSB_TRANSFER_OVERFLOW:	return URBEND_OVERFLOW;
	case LIBUSB_TRANSFER_ERROR:
	default:			return URBEND_ERROR;
	}
}

static void LIBUSB_CALL
x_callback(struct libusb_transfer *t)
{
	struct uxfer	*x = t->user_data;
	struct expsrv_urb *u = x->u;
	struct urbstate	*us = x->us;
	struct usbdev	*d = x->dev;
	struct evbuffer	*packed;
	enum urbmap_end	 end = x_end(t->status);
	uint32_t	 actual = (uint32_t)t->actual_length;
	int32_t		 status;
	long long	 sum;
	int		 i;

	us->q[x->q].nsub--;
	urb_usbfs_bytes -= x->cost;
	x->submitted = false;
	x_unlink(x);
	x->u = NULL;
	usbdev_ref(d);
	us->refs++;

	status = urbmap_status(end, x->cancel, u->flags, actual, u->length);
	if (x->type == USB_XFER_ISO) {
		for (i = 0; i < t->num_iso_packets && (uint32_t)i < u->npackets;
		    i++) {
			u->iso[i].actual_length =
			    t->iso_packet_desc[i].actual_length;
			u->iso[i].status = urbmap_iso_status(
			    x_end(t->iso_packet_desc[i].status));
		}
		packed = NULL;
		if (u->dir == USBIP_DIR_IN && (packed = evbuffer_new()) == NULL)
			fatalx("urb: evbuffer_new");
		sum = urbmap_iso_pack(x->buf, (size_t)t->length, u->iso,
		    u->npackets, packed);
		if (sum < 0) {
			/* libusb gave more than asked: nothing of it. */
			for (i = 0; (uint32_t)i < u->npackets; i++) {
				u->iso[i].actual_length = 0;
				u->iso[i].status = -EPROTO;
			}
			if (packed != NULL)
				evbuffer_drain(packed,
				    evbuffer_get_length(packed));
			sum = 0;
		}
		/* A cancelled ISO URB says so for expsrv's unlink rule. */
		expsrv_urb_done_iso(u, packed, (uint32_t)sum, 0);
		if (packed != NULL)
			evbuffer_free(packed);
		actual = (uint32_t)sum;
		(void)status;
	} else if (u->dir == USBIP_DIR_IN) {
		if (actual > u->length)
			actual = u->length;
		if (x->type != USB_XFER_CONTROL && actual >= URB_REF_MIN) {
			/* Bulk data: the output takes the buffer, no copy. */
			if (x->mem != NULL)
				expsrv_urb_done_ref(u, status, x->buf, actual,
				    umem_lent_back, x->mem);
			else
				expsrv_urb_done_ref(u, status, x->buf, actual,
				    buf_lent_back, (void *)(uintptr_t)x->bufcap);
			x->buf = NULL;
		} else
			expsrv_urb_done_buf(u, status, x->type ==
			    USB_XFER_CONTROL ? x->buf +
			    LIBUSB_CONTROL_SETUP_SIZE : x->buf, actual);
	} else
		expsrv_urb_done(u, status, actual);
	us->urbs++;
	us->bytes += actual;
	if (t->status == LIBUSB_TRANSFER_NO_DEVICE)
		usbdev_gone(d);
	x_free(x);
	urb_pump(us);
	urb_pump_all();
	urb_progress(us);
	us_unref(us);
	usbdev_unref(d);
	usbloop_rearm();
}

/* Hand x to libusb.  On failure x is completed at once. */
static void
x_start(struct uxfer *x)
{
	struct usbdev	*d = x->dev;
	struct urbstate	*us = x->us;
	struct expsrv_urb *u = x->u;
	unsigned char	 addr = (unsigned char)(u->ep |
	    (u->dir == USBIP_DIR_IN ? 0x80 : 0));
	const char	*why;
	long long	 total;
	uint32_t	 i;
	int		 r;

	switch (x->type) {
	case USB_XFER_CONTROL:
		x->t = libusb_alloc_transfer(0);
		x->buf = buf_get(LIBUSB_CONTROL_SETUP_SIZE + u->length,
		    &x->bufcap);
		memcpy(x->buf, u->setup, 8);
		if (u->dir == USBIP_DIR_OUT && u->length > 0)
			evbuffer_copyout(u->data, x->buf + 8, u->length);
		libusb_fill_control_transfer(x->t, d->h, x->buf, x_callback,
		    x, 0);
		x->cost = LIBUSB_CONTROL_SETUP_SIZE + u->length;
		break;
	case USB_XFER_BULK:
	case USB_XFER_INT:
		x->t = libusb_alloc_transfer(0);
		x->buf = x_buf(x, u->length);
		if (u->dir == USBIP_DIR_OUT && u->length > 0)
			evbuffer_copyout(u->data, x->buf, u->length);
		if (x->type == USB_XFER_BULK)
			libusb_fill_bulk_transfer(x->t, d->h, addr, x->buf,
			    (int)u->length, x_callback, x, 0);
		else
			libusb_fill_interrupt_transfer(x->t, d->h, addr,
			    x->buf, (int)u->length, x_callback, x, 0);
		if (u->flags & URBF_ZERO_PACKET)
			x->t->flags |= LIBUSB_TRANSFER_ADD_ZERO_PACKET;
		x->cost = u->length;
		break;
	case USB_XFER_ISO:
		total = urbmap_iso_total(u->iso, u->npackets, u->length);
		if (total < 0 || u->npackets == 0) {
			why = "ISO packets outside the buffer";
			goto malformed;
		}
		x->t = libusb_alloc_transfer((int)u->npackets);
		x->buf = x_buf(x, (size_t)total);
		/* No data stage (every packet empty): u->data is NULL. */
		if (u->dir == USBIP_DIR_OUT &&
		    urbmap_iso_gather(u->data != NULL ?
		    evbuffer_pullup(u->data, -1) : NULL, u->data != NULL ?
		    evbuffer_get_length(u->data) : 0, u->iso, u->npackets,
		    x->buf, (size_t)total, &why) < 0)
			goto malformed;
		libusb_fill_iso_transfer(x->t, d->h, addr, x->buf, (int)total,
		    (int)u->npackets, x_callback, x, 0);
		for (i = 0; i < u->npackets; i++)
			x->t->iso_packet_desc[i].length = u->iso[i].length;
		x->cost = (size_t)total;
		break;
	default:
		why = "endpoint type unknown";
		goto malformed;
	}
	if (x->t == NULL)
		fatalx("urb: libusb_alloc_transfer");
	usbdev_touch(d);
	if ((r = libusb_submit_transfer(x->t)) != 0) {
		log_debug("device %s: seqnum %u: submit: %s", d->busid,
		    u->seqnum, libusb_strerror(r));
		x_finish(x, urbmap_errno(r));
		if (r == LIBUSB_ERROR_NO_DEVICE)
			usbdev_gone(d);
		return;
	}
	x->submitted = true;
	us->q[x->q].nsub++;
	urb_usbfs_bytes += x->cost;
	usbloop_rearm();
	return;
malformed:
	usbdev_audit("malformed peer=%s busid=%s reason=\"%s\"", us->peer,
	    d->busid, why);
	x_finish(x, -EINVAL);
	if (us->conn != NULL)
		expsrv_conn_close(us->conn, why);
}

/* Submit from the FIFOs what the per-endpoint and usbfs bounds allow. */
static void
urb_pump(struct urbstate *us)
{
	struct uxfer	*x;
	struct urbq	*q;
	unsigned	 i, max;

	if (us->special != NULL || us->gone || us->released)
		return;
	us->refs++;	/* x_start may close the connection */
	for (i = 0; i < URB_NQ; i++) {
		q = &us->q[i];
		while ((x = q->head) != NULL) {
			max = usbdev_max_urbs(x->type == USB_XFER_ISO);
			if (q->nsub >= max)
				break;
			if (urb_usbfs_bytes > 0 &&
			    urb_usbfs_bytes + x->cost > URB_USBFS_BUDGET) {
				urb_budget_blocked = true;
				break;
			}
			q->head = x->qnext;
			if (q->head == NULL)
				q->tailp = &q->head;
			x->qnext = NULL;
			x_start(x);
			if (us->special != NULL || us->gone || us->released)
				goto out;
		}
	}
out:
	us_unref(us);
}

/* usbfs room came back: every import may submit again. */
static void
urb_pump_all(void)
{
	struct usbdev	*d;

	if (!urb_budget_blocked)
		return;
	urb_budget_blocked = false;
	for (d = usbdev_list; d != NULL; d = d->next)
		if (d->us != NULL)
			urb_pump(d->us);
}

/* Everything of the import's (or of the queues in mask) stops:
 * queued URBs complete with -ESHUTDOWN, submitted ones are cancelled
 * (their callbacks answer -ESHUTDOWN). */
static void
urb_stop(struct urbstate *us, uint32_t mask)
{
	struct uxfer	*x, *nx;
	unsigned	 i;

	for (i = 0; i < URB_NQ; i++) {
		if (!(mask & (1u << i)))
			continue;
		while ((x = us->q[i].head) != NULL) {
			us->q[i].head = x->qnext;
			if (us->q[i].head == NULL)
				us->q[i].tailp = &us->q[i].head;
			x->qnext = NULL;
			x_finish(x, -ESHUTDOWN);
		}
	}
	for (x = us->all; x != NULL; x = nx) {
		nx = x->next;
		if (x->submitted && (mask & (1u << x->q))) {
			if (x->cancel == URBCANCEL_NONE)
				x->cancel = URBCANCEL_AGENT;
			libusb_cancel_transfer(x->t);
		}
	}
}

static bool
urb_quiet(const struct urbstate *us, uint32_t mask)
{
	unsigned	 i;

	for (i = 0; i < URB_NQ; i++)
		if ((mask & (1u << i)) && us->q[i].nsub > 0)
			return false;
	return true;
}

/* ---- intercepted requests ----------------------------------------- */

static void
special_done(struct udjob *j)
{
	struct uxfer	*x = j->arg;
	struct urbstate	*us = x->us;
	struct usbdev	*d = x->dev;
	struct expsrv_urb *u = x->u;
	int32_t		 status = urbmap_errno(j->result);
	uint16_t	 value = (uint16_t)(u->setup[2] | u->setup[3] << 8);
	uint16_t	 index = (uint16_t)(u->setup[4] | u->setup[5] << 8);

	switch (x->req) {
	case URBREQ_SET_INTERFACE:
		if (j->result == 0)
			usbdev_set_alt(d, (uint8_t)index, (uint8_t)value);
		break;
	case URBREQ_SET_CONFIG:
		usbdev_set_config(d, j);
		if (j->result == 0 && j->claimed != usbdev_config_mask(d,
		    (uint8_t)value)) {
			/* Not every interface is ours: fail closed. */
			status = -EBUSY;
			if (us->conn != NULL)
				expsrv_conn_close(us->conn,
				    "configuration not wholly claimed");
		}
		break;
	case URBREQ_PORT_RESET:
		if (j->result == 0)
			usbdev_was_reset(d);
		break;
	default:
		break;
	}
	log_debug("device %s: %s: %s", d->busid, urbmap_req_name(x->req),
	    libusb_strerror(j->result));
	usbdev_ref(d);
	us->refs++;
	x_finish(x, status);
	if (j->result == LIBUSB_ERROR_NOT_FOUND &&
	    x->req == URBREQ_PORT_RESET)
		usbdev_gone(d);		/* re-enumerated */
	else if (j->result == LIBUSB_ERROR_NO_DEVICE)
		usbdev_gone(d);
	if (us->conn != NULL && !us->gone)
		expsrv_conn_resume(us->conn);
	urb_pump(us);
	urb_progress(us);
	us_unref(us);
	usbdev_unref(d);
}

/* The queues are quiet: run the intercepted request's libusb call. */
static void
special_start(struct urbstate *us)
{
	struct uxfer	*x = us->special;
	struct usbdev	*d = us->dev;
	struct expsrv_urb *u = x->u;
	uint16_t	 value = (uint16_t)(u->setup[2] | u->setup[3] << 8);
	uint16_t	 index = (uint16_t)(u->setup[4] | u->setup[5] << 8);
	unsigned	 i;

	us->special_started = true;
	switch (x->req) {
	case URBREQ_CLEAR_HALT:
		usbdev_job(d, UDJ_CLEARHALT, index & 0x8f, 0, special_done, x);
		break;
	case URBREQ_SET_INTERFACE:
		usbdev_job(d, UDJ_SETALT, index, value, special_done, x);
		break;
	case URBREQ_SET_CONFIG:
		if ((value & 0xff) == d->config) {
			/* Same value: no reconfiguration, alts back to 0. */
			for (i = 0; i < DESC_MAX_INTF; i++)
				if (d->alt[i] != 0) {
					usbdev_set_alt(d, (uint8_t)i, 0);
					usbdev_job(d, UDJ_SETALT, (int)i, 0,
					    NULL, NULL);
				}
			x_finish(x, 0);
			if (us->conn != NULL)
				expsrv_conn_resume(us->conn);
			urb_pump(us);
			return;
		}
		usbdev_job(d, UDJ_SETCONF, value & 0xff,
		    (int)usbdev_config_mask(d, (uint8_t)value), special_done,
		    x);
		break;
	case URBREQ_PORT_RESET:
		if (!d->dirty || d->no_reset) {
			/* A clean device answers 0 unreset. */
			x_finish(x, 0);
			if (us->conn != NULL)
				expsrv_conn_resume(us->conn);
			urb_pump(us);
			return;
		}
		usbdev_job(d, UDJ_RESET, 0, 0, special_done, x);
		break;
	default:
		break;
	}
}

static void
special_submit(struct urbstate *us, struct uxfer *x)
{
	struct expsrv_urb *u = x->u;
	uint16_t	 index = (uint16_t)(u->setup[4] | u->setup[5] << 8);

	if (us->special != NULL) {
		/* The connection is paused while one runs: not reached. */
		x_finish(x, -EBUSY);
		return;
	}
	us->special = x;
	us->special_started = false;
	if (us->conn != NULL)
		expsrv_conn_pause(us->conn);
	switch (x->req) {
	case URBREQ_SET_INTERFACE:
		us->special_wait = urb_iface_queues(us->dev, index);
		break;
	case URBREQ_SET_CONFIG:
	case URBREQ_PORT_RESET:
		us->special_wait = 0xffffffffu & ~1u & ~(1u << 16);
		break;
	default:
		us->special_wait = 0;	/* CLEAR_HALT: nothing to stop */
		break;
	}
	if (us->special_wait != 0)
		urb_stop(us, us->special_wait);
	urb_progress(us);
}

/* ---- the import's progress ---------------------------------------- */

static void
urb_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct urbstate	*us = arg;

	(void)fd;
	(void)what;
	log_warnx("device %s: transfers not called back within %d ms",
	    us->dev->busid, UD_RELEASE_WAIT_MS);
	us->refs++;	/* the close below may release the import */
	if (us->gone && !us->closed && us->conn != NULL) {
		us->closed = true;
		expsrv_conn_close(us->conn, "device gone");
	}
	if (us->released && !us->restored && !usbdev_job_running(us->dev)) {
		us->restored = true;
		usbdev_release_ready(us->dev);
	}
	us_unref(us);
}

static void
urb_arm_deadline(struct urbstate *us)
{
	struct timeval	 tv = { 0, UD_RELEASE_WAIT_MS * 1000 };

	if (us->deadline == NULL)
		us->deadline = evtimer_new(usbdev_base(), urb_deadline_cb, us);
	if (us->deadline != NULL && !evtimer_pending(us->deadline, NULL))
		evtimer_add(us->deadline, &tv);
}

/* After any completion: start what waited for quiet queues. */
static void
urb_progress(struct urbstate *us)
{
	/* Closing the connection releases the import (urb_release), which
	 * may drop the last reference but this one. */
	us->refs++;
	if (us->special != NULL && !us->special_started &&
	    urb_quiet(us, us->special_wait))
		special_start(us);
	if (!urb_quiet(us, 0xffffffffu) || us->special != NULL)
		goto out;
	if (us->deadline != NULL)
		evtimer_del(us->deadline);
	if (us->gone && !us->closed && us->conn != NULL) {
		us->closed = true;
		expsrv_conn_close(us->conn, "device gone");
	}
	if (us->released && !us->restored &&
	    !usbdev_job_running(us->dev)) {
		us->restored = true;
		usbdev_release_ready(us->dev);
	}
out:
	us_unref(us);
}

/* usbdev: the device left (unplugged, NO_DEVICE, re-enumerated). */
static void
urb_on_gone(struct usbdev *d)
{
	struct urbstate	*us = d->us;

	if (us == NULL || us->gone)
		return;
	us->gone = true;
	if (us->conn != NULL)
		expsrv_conn_pause(us->conn);
	if (us->special != NULL && !us->special_started)
		x_finish(us->special, -ESHUTDOWN);
	urb_stop(us, 0xffffffffu);
	urb_arm_deadline(us);
	urb_progress(us);
}

/* ---- expsrv_ops --------------------------------------------------- */

static void
urb_list(void *arg, struct expsrv_conn *c)
{
	struct usbdev	*d;

	(void)arg;
	for (d = usbdev_list; d != NULL; d = d->next)
		if (d->listed && d->state == UD_EXPORTABLE)
			expsrv_list_add(c, &d->rec, d->intf,
			    d->rec.bNumInterfaces);
}

void
usbdev_foreach_exportable(void (*fn)(void *, const struct usbip_dev *,
    const struct usbip_intf *, uint8_t), void *arg)
{
	struct usbdev	*d;

	for (d = usbdev_list; d != NULL; d = d->next)
		if (d->listed && d->state == UD_EXPORTABLE)
			fn(arg, &d->rec, d->intf, d->rec.bNumInterfaces);
}

/*
 * The import's reset ended in a refusal (st): nothing was submitted.  The
 * device lets the import go, then(device) says what becomes of it, and
 * the job's and the import's references end.
 */
static void
import_refuse(struct urbstate *us, uint32_t st, void (*then)(struct usbdev *))
{
	struct usbdev	*d = us->dev;

	expsrv_import_done(us->conn, st, NULL, NULL);
	d->us = NULL;
	d->conn = NULL;
	d->on_gone = NULL;
	us->released = true;
	us->restored = true;
	then(d);
	us->refs--;		/* the job's (the import's is left) */
	us_unref(us);		/* the import's */
	usbdev_unref(d);
}

static void
import_reset_done(struct udjob *j)
{
	struct urbstate	*us = j->arg;
	struct usbdev	*d = j->dev;

	us->importing = false;
	if (us->released) {		/* the connection went meanwhile */
		urb_progress(us);
		us_unref(us);
		return;
	}
	if (j->result == LIBUSB_ERROR_NOT_FOUND ||
	    j->result == LIBUSB_ERROR_NO_DEVICE) {
		/* Re-enumerated: a new arrival follows; this import ends. */
		import_refuse(us, ST_DEV_ERR, usbdev_gone);
		return;
	}
	if (j->result != 0)
		log_warnx("device %s: reset before the import: %s", d->busid,
		    libusb_strerror(j->result));
	else
		usbdev_was_reset(d);
	if (d->listed && usbdev_kept_now(d)) {
		/*
		 * A reload put it in the keep-list during the reset: the
		 * reload's end of held imports (export_end_import) had no
		 * import to end yet.  Refused; nothing was submitted, so
		 * nothing to restore: given back at once, as the reload
		 * gives back an exportable device.
		 */
		log_info("device %s: keep-local since a reload during the "
		    "import's reset: import refused", d->busid);
		import_refuse(us, ST_NA, usbdev_keep_giveback);
		return;
	}
	expsrv_import_done(us->conn, ST_OK, &d->rec, d);
	us_unref(us);
}

static uint32_t
urb_import(void *arg, struct expsrv_conn *c, const char *busid,
    struct usbip_dev *rec, void **dev)
{
	struct usbdev	*d;
	struct urbstate	*us;

	(void)arg;
	if ((d = usbdev_find(busid)) == NULL || d->state == UD_LOCAL ||
	    d->state == UD_NEW || d->state == UD_GONE)
		return ST_NODEV;
	if (d->state != UD_EXPORTABLE || usbdev_job_running(d) ||
	    d->us != NULL)
		return ST_DEV_BUSY;
	us = xcalloc(1, sizeof(*us));
	us->refs = 1;
	us->dev = d;
	us->conn = c;
	for (unsigned i = 0; i < URB_NQ; i++)
		us->q[i].tailp = &us->q[i].head;
	usbgw_strlcpy(us->peer, expsrv_conn_peer(c), sizeof(us->peer));
	usbdev_ref(d);
	d->us = us;
	d->conn = c;
	d->on_gone = urb_on_gone;
	usbdev_setstate(d, UD_HELD, UDL_NONE, us->peer);
	/* (the listener writes the import audit line: it knows how the
	 * connection came) */
	if (d->dirty && !d->no_reset) {
		/* "The first thing almost any usb-guest does is a (slow)
		 * device-reset" (usbredirhost): do it before the reply. */
		us->importing = true;
		us->refs++;
		usbdev_job(d, UDJ_RESET, 0, 0, import_reset_done, us);
		return EXPSRV_IMPORT_ASYNC;
	}
	*rec = d->rec;
	*dev = d;
	return ST_OK;
}

static void
urb_submit(void *dev, struct expsrv_urb *u)
{
	struct usbdev	*d = dev;
	struct urbstate	*us = d->us;
	struct uxfer	*x;
	struct urbq	*q;
	const char	*why;

	if (us == NULL || us->gone || us->released) {
		expsrv_urb_done(u, -ESHUTDOWN, 0);
		return;
	}
	x = x_new(us, u);
	x->q = (uint8_t)qindex(u->ep, u->dir);
	x->type = urb_ep_type(d, u->dir, u->ep);
	if (x->type == USB_XFER_CONTROL) {
		if (urbmap_check_control(u->setup, u->dir, u->length,
		    &why) == -1) {
			usbdev_audit("malformed peer=%s busid=%s "
			    "reason=\"%s\"", us->peer, d->busid, why);
			x_finish(x, -EINVAL);
			expsrv_conn_close(us->conn, why);
			return;
		}
		x->req = urbmap_classify(u->setup);
		if (x->req != URBREQ_PLAIN) {
			special_submit(us, x);
			return;
		}
		x->cost = LIBUSB_CONTROL_SETUP_SIZE + u->length;
	} else
		x->cost = u->length;
	if (x->type < 0) {
		x_finish(x, -EPIPE);	/* expsrv checked ep_type first */
		return;
	}
	q = &us->q[x->q];
	*q->tailp = x;
	q->tailp = &x->qnext;
	urb_pump(us);
}

static bool
urb_cancel(void *dev, struct expsrv_urb *u)
{
	struct uxfer	*x = u->be;
	struct urbstate	*us;
	int		 r;

	(void)dev;
	if (x == NULL)
		return false;
	us = x->us;
	if (x->submitted) {
		if (x->cancel == URBCANCEL_NONE)
			x->cancel = URBCANCEL_UNLINK;
		/* NOT_FOUND: the callback is due anyway. */
		if ((r = libusb_cancel_transfer(x->t)) != 0 &&
		    r != LIBUSB_ERROR_NOT_FOUND)
			log_debug("device %s: cancel seqnum %u: %s",
			    x->dev->busid, u->seqnum, libusb_strerror(r));
		return false;
	}
	if (us->special == x) {
		if (us->special_started)
			return false;	/* its call runs: its true result */
		x_unlink(x);
		x->u = NULL;
		u->be = NULL;
		x_free(x);
		if (us->conn != NULL)
			expsrv_conn_resume(us->conn);
		urb_pump(us);
		return true;
	}
	/* Queued: forget it. */
	q_remove(&us->q[x->q], x);
	x_unlink(x);
	x->u = NULL;
	u->be = NULL;
	x_free(x);
	return true;
}

static void
urb_release(void *dev, struct expsrv_conn *c, const char *why)
{
	struct usbdev	*d = dev;
	struct urbstate	*us = d->us;

	(void)c;
	if (us == NULL)
		return;
	usbdev_audit("release busid=%s peer=%s reason=\"%s\" urbs=%llu "
	    "bytes=%llu", d->busid, us->peer, why ? why : "",
	    (unsigned long long)us->urbs, (unsigned long long)us->bytes);
	us->released = true;
	us->conn = NULL;
	d->conn = NULL;
	d->us = NULL;
	d->on_gone = NULL;
	if (d->listed && d->state == UD_HELD)
		usbdev_setstate(d, UD_RELEASING, UDL_NONE, why);
	if (us->special != NULL && !us->special_started)
		x_finish(us->special, -ESHUTDOWN);
	urb_stop(us, 0xffffffffu);
	if (!d->listed)
		us->restored = true;	/* gone: nothing to restore */
	urb_arm_deadline(us);
	urb_progress(us);
	us_unref(us);
	usbdev_unref(d);
}

const struct expsrv_ops usbdev_expsrv_ops = {
	.list = urb_list,
	.import = urb_import,
	.ep_type = urb_ep_type,
	.submit = urb_submit,
	.cancel = urb_cancel,
	.release = urb_release,
};

/*
 * Shutdown (blocking): every import still held ends as if its device
 * had gone (its replies are dropped: the agent freed expsrv first), and
 * libusb is given up to UD_RELEASE_WAIT_MS to call every transfer back.
 */
void
urb_shutdown(void)
{
	struct usbdev	*d;
	struct uxfer	*x;
	bool		 busy;
	int		 waited;

	for (d = usbdev_list; d != NULL; d = d->next)
		if (d->us != NULL) {
			d->us->conn = NULL;
			urb_on_gone(d);
		}
	for (waited = 0; waited < UD_RELEASE_WAIT_MS; waited += 50) {
		busy = false;
		for (d = usbdev_list; d != NULL; d = d->next)
			if (d->us != NULL)
				for (x = d->us->all; x != NULL; x = x->next)
					busy |= x->submitted;
		if (!busy)
			break;
		usbloop_run_blocking(50);
	}	buf_cache_free();
}
