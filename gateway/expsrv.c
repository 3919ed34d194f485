/*
 * STUB of gateway/expsrv.c (the expsrv helper writes the real one): the
 * op phase only.  OP_REQ_DEVLIST: answered with the devices the back end
 * lists (records dropped: zero devices), then closed.  OP_REQ_IMPORT:
 * the back end's answer if it refuses, ST_NA otherwise (no URB phase),
 * then closed.  Dropped at merge.
 */
#include <sys/socket.h>
#include <netdb.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/bufferevent.h>

#include "expsrv.h"
#include "util.h"

struct expsrv {
	struct event_base	*base;
	const struct expsrv_ops	*ops;
	void			*arg;
	struct expsrv_limits	 lim;
	unsigned		 nconns;
	struct expsrv_conn	*conns;
};

struct expsrv_conn {
	struct expsrv		*srv;
	struct bufferevent	*bev;
	struct expsrv_conn	*next;
	char			 peer[NI_MAXHOST + NI_MAXSERV + 4];
	void			*data;
	bool			 closing;
};

void
expsrv_limits_default(struct expsrv_limits *l)
{
	l->max_urbs = 1024;
	l->max_out_pending = 8u << 20;
	l->out_hiwat = 4u << 20;
	l->out_lowat = 1u << 20;
	l->op_timeout_s = 10;
}

struct expsrv *
expsrv_new(struct event_base *base, const struct expsrv_ops *ops, void *arg,
    const struct expsrv_limits *lim)
{
	struct expsrv *s = xcalloc(1, sizeof(*s));

	s->base = base;
	s->ops = ops;
	s->arg = arg;
	s->lim = *lim;
	return s;
}

static void
conn_free(struct expsrv_conn *c)
{
	struct expsrv *s = c->srv;
	struct expsrv_conn **pp;

	for (pp = &s->conns; *pp != NULL; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	s->nconns--;
	bufferevent_free(c->bev);
	free(c);
}

void
expsrv_closeall(struct expsrv *s)
{
	while (s->conns != NULL)
		conn_free(s->conns);
}

void
expsrv_free(struct expsrv *s)
{
	if (s == NULL)
		return;
	expsrv_closeall(s);
	free(s);
}

unsigned
expsrv_nconns(const struct expsrv *s)
{
	return s->nconns;
}

static void
write_cb(struct bufferevent *bev, void *arg)
{
	struct expsrv_conn *c = arg;

	(void)bev;
	if (c->closing)
		conn_free(c);
}

static void
finish(struct expsrv_conn *c)
{
	c->closing = true;
	bufferevent_disable(c->bev, EV_READ);
	if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
		conn_free(c);
}

static void
read_cb(struct bufferevent *bev, void *arg)
{
	struct expsrv_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct usbip_op op;
	struct usbip_dev rec;
	uint8_t hdr[USBIP_OP_HDR_LEN + 4];
	const char *why;
	void *dev = NULL;
	uint32_t st;
	size_t len = evbuffer_get_length(in);
	int r;

	if (c->closing)
		return;
	r = usbip_op_decode(evbuffer_pullup(in, -1), len, USBIP_FROM_CLIENT,
	    &op, &why);
	if (r == USBIP_NEED_MORE)
		return;
	if (r == USBIP_MALFORMED) {
		finish(c);
		return;
	}
	if (op.hdr.code == OP_REQ_DEVLIST) {
		c->srv->ops->list(c->srv->arg, c);
		bufferevent_write(bev, hdr, usbip_devlist_rep_hdr_encode(hdr, 0));
	} else {
		memset(&rec, 0, sizeof(rec));
		st = c->srv->ops->import(c->srv->arg, c, op.busid, &rec, &dev);
		if (st == ST_OK || st == EXPSRV_IMPORT_ASYNC)
			st = ST_NA;
		bufferevent_write(bev, hdr, usbip_op_hdr_encode(hdr,
		    OP_REP_IMPORT, st));
		if (c->srv->ops->imported != NULL)
			c->srv->ops->imported(c->srv->arg, c, op.busid, st, NULL);
	}
	finish(c);
}

static void
event_cb(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	conn_free(arg);
}

struct expsrv_conn *
expsrv_accept(struct expsrv *s, int fd, const struct sockaddr *sa,
    socklen_t salen)
{
	struct expsrv_conn *c = xcalloc(1, sizeof(*c));
	struct timeval tv = { s->lim.op_timeout_s, 0 };
	char h[NI_MAXHOST], p[NI_MAXSERV];

	fd_nonblock_cloexec(fd);
	c->srv = s;
	if (getnameinfo(sa, salen, h, sizeof(h), p, sizeof(p),
	    NI_NUMERICHOST | NI_NUMERICSERV) == 0)
		snprintf(c->peer, sizeof(c->peer), sa->sa_family == AF_INET6 ?
		    "[%s]:%s" : "%s:%s", h, p);
	c->bev = bufferevent_socket_new(s->base, fd, BEV_OPT_CLOSE_ON_FREE);
	bufferevent_setcb(c->bev, read_cb, write_cb, event_cb, c);
	bufferevent_set_timeouts(c->bev, &tv, &tv);
	bufferevent_enable(c->bev, EV_READ);
	c->next = s->conns;
	s->conns = c;
	s->nconns++;
	return c;
}

void
expsrv_list_add(struct expsrv_conn *c, const struct usbip_dev *d,
    const struct usbip_intf *i, uint8_t n)
{
	(void)c;
	(void)d;
	(void)i;
	(void)n;
}

void
expsrv_import_done(struct expsrv_conn *c, uint32_t st,
    const struct usbip_dev *rec, void *dev)
{
	(void)c;
	(void)st;
	(void)rec;
	(void)dev;
}

void expsrv_urb_done(struct expsrv_urb *u, int32_t s, uint32_t a)
{ (void)u; (void)s; (void)a; }
void expsrv_urb_done_buf(struct expsrv_urb *u, int32_t s, const void *b,
    uint32_t l)
{ (void)u; (void)s; (void)b; (void)l; }
void expsrv_urb_done_evbuf(struct expsrv_urb *u, int32_t s,
    struct evbuffer *b, uint32_t l)
{ (void)u; (void)s; (void)b; (void)l; }
void expsrv_urb_done_iso(struct expsrv_urb *u, struct evbuffer *p, uint32_t a,
    int32_t f)
{ (void)u; (void)p; (void)a; (void)f; }

const char *
expsrv_conn_peer(const struct expsrv_conn *c)
{
	return c->peer;
}

unsigned
expsrv_conn_id(const struct expsrv_conn *c)
{
	(void)c;
	return 0;
}

void *
expsrv_conn_dev(const struct expsrv_conn *c)
{
	(void)c;
	return NULL;
}

void expsrv_conn_pause(struct expsrv_conn *c) { (void)c; }
void expsrv_conn_resume(struct expsrv_conn *c) { (void)c; }

void
expsrv_conn_close(struct expsrv_conn *c, const char *why)
{
	(void)why;
	finish(c);
}

void
expsrv_conn_set_data(struct expsrv_conn *c, void *d)
{
	c->data = d;
}

void *
expsrv_conn_data(const struct expsrv_conn *c)
{
	return c->data;
}
