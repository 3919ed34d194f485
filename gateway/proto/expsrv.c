/*
 * expsrv: the exporter's side of USB/IP for one TCP connection at a
 * time, as usbipd and usbip-host treat one: an op phase (OP_REQ_DEVLIST
 * answered then closed; OP_REQ_IMPORT refused then closed, or granted
 * and followed by) a URB phase for the imported device.  Every USB/IP
 * byte goes through the codec.  The contract is in expsrv.h; the
 * design in protocol.md 1.9.1 and 1.9.3.
 *
 * Payloads move between evbuffers (evbuffer_remove_buffer), never
 * through a staging copy of the engine's own; IN data a back end lends
 * (expsrv_urb_done_ref) is referenced by the output, not copied.
 *
 * A connection is torn down by conn_teardown() only, which marks it
 * DEAD; its memory is freed later from the loop (a callback up the
 * stack may still hold it), or, while the back end still owes it an
 * expsrv_import_done(), once that has come.  URBs the back end still
 * holds at teardown outlive it with u->conn == NULL.
 */
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"
#include "proto/expsrv.h"

/*
 * Limits.  usbipd + usbip-host have no explicit ones (the stub queues
 * whatever vhci sends); these are what the simulator always had, sized
 * so that vhci's own bounds never reach them: vhci keeps far fewer than
 * 1024 URBs of one device in flight, and a 16 MiB URB (the codec's
 * maximum) fits the OUT bound four times.
 */
#define EXPSRV_MAX_URBS		1024		/* in flight per connection */
#define EXPSRV_MAX_PENDING	(64u << 20)	/* OUT bytes held per conn */
#define EXPSRV_OUT_HIWAT	(8u << 20)	/* stop reading above this */
#define EXPSRV_OUT_LOWAT	(1u << 20)	/* resume below this */
#define EXPSRV_OP_TIMEOUT	30		/* seconds for the op phase */
/* Input held: one largest PDU and a read's worth more. */
#define EXPSRV_IN_HIWAT		(USBIP_MAX_URB_PDU + (1u << 20))
#define EXPSRV_READ_CHUNK	(256u << 10)	/* bytes asked of one readv() */
#define EXPSRV_READ_FIRST	(16u << 10)	/* ... at first, doubling */
#define EXPSRV_CLOSE_FLUSH	1		/* s, expsrv_conn_close() */
#define EXPSRV_ZEROS		(64u << 10)

enum conn_state {
	CONN_OP,	/* waiting for OP_REQ_DEVLIST / OP_REQ_IMPORT */
	CONN_IMPORTING,	/* import() runs (EXPSRV_IMPORT_ASYNC) */
	CONN_URB,	/* imported: CMD_SUBMIT / CMD_UNLINK */
	CONN_FLUSH,	/* reply queued, close once written */
	CONN_DEAD,	/* closed, freed from the loop */
};

TAILQ_HEAD(expsrv_connq, expsrv_conn);

struct expsrv_conn {
	TAILQ_ENTRY(expsrv_conn) entry;	/* srv->conns, ->dead or ->limbo */
	struct expsrv	*srv;		/* NULL: freed while import_pending */
	const struct expsrv_ops *ops;
	void		*arg;
	unsigned	 id;
	enum conn_state	 state;
	int		 fd;
	struct event	*rev;		/* readable, while reading */
	struct event	*wev;		/* writable, while out is not empty */
	struct event	*timeout;	/* op phase; then the close's flush */
	struct event	*kick;		/* process and write, from the loop */
	struct evbuffer	*in;
	struct evbuffer	*out;
	struct evbuffer	*list;		/* DEVLIST records being gathered */
	uint32_t	 nlisted;
	uint32_t	 list_st;	/* expsrv_list_refuse(): not ST_OK */
	char		 peer[64];
	char		 busid[USBIP_BUSID_SIZE];
	char		 why[96];	/* of a close waiting for its flush */
	void		*dev;
	uint32_t	 devid;
	struct expsrv_urb *urbs;	/* in flight, oldest first */
	struct expsrv_urb *urbs_tail;
	unsigned	 nurbs;
	size_t		 pending_bytes;	/* OUT bytes of the URBs in flight */
	size_t		 chunk;		/* bytes asked of the next readv() */
	unsigned	 busy;		/* inside the engine's own processing */
	bool		 kicked;	/* kick active, not yet run */
	bool		 reading;	/* rev added */
	bool		 read_paused;	/* output above out_hiwat */
	bool		 user_paused;	/* expsrv_conn_pause() */
	bool		 frozen;
	bool		 import_pending; /* expsrv_import_done() owed */
	bool		 have_hdr;	/* hdr/lay describe the next PDU */
	struct usbip_urb_hdr hdr;
	struct usbip_urb_layout lay;
	void		*data;
};

struct expsrv {
	struct event_base *base;
	const struct expsrv_ops *ops;
	void		*arg;
	struct expsrv_limits lim;
	struct expsrv_connq conns;
	unsigned	 nconns;
	struct expsrv_connq dead;	/* torn down, to free */
	struct expsrv_connq limbo;	/* torn down, import_done owed */
	struct event	*reaper;
};

static const uint8_t	 zeros[EXPSRV_ZEROS];
static unsigned		 conn_nextid = 1;

static void	conn_process(struct expsrv_conn *);
static void	conn_flush(struct expsrv_conn *);
static void	conn_teardown(struct expsrv_conn *, const char *why);

void
expsrv_limits_default(struct expsrv_limits *lim)
{
	lim->max_urbs = EXPSRV_MAX_URBS;
	lim->max_out_pending = EXPSRV_MAX_PENDING;
	lim->out_hiwat = EXPSRV_OUT_HIWAT;
	lim->out_lowat = EXPSRV_OUT_LOWAT;
	lim->op_timeout_s = EXPSRV_OP_TIMEOUT;
}

static const char *
conn_state_name(enum conn_state s)
{
	switch (s) {
	case CONN_OP:		return "op";
	case CONN_IMPORTING:	return "importing";
	case CONN_URB:		return "urb";
	case CONN_FLUSH:	return "flush";
	case CONN_DEAD:		return "dead";
	}
	return "?";
}

/* Every state change goes through here, so the debug log shows it. */
static void
conn_set_state(struct expsrv_conn *conn, enum conn_state s)
{
	log_debug("conn %u %s: %s -> %s", conn->id, conn->peer,
	    conn_state_name(conn->state), conn_state_name(s));
	conn->state = s;
}

/* ---- the in-flight table --------------------------------------------- */

static void
urbs_insert(struct expsrv_conn *conn, struct expsrv_urb *u)
{
	u->next = NULL;
	u->prev = conn->urbs_tail;
	if (conn->urbs_tail != NULL)
		conn->urbs_tail->next = u;
	else
		conn->urbs = u;
	conn->urbs_tail = u;
	conn->nurbs++;
	if (u->dir == USBIP_DIR_OUT)
		conn->pending_bytes += u->length;
}

static void
urbs_remove(struct expsrv_conn *conn, struct expsrv_urb *u)
{
	if (u->prev != NULL)
		u->prev->next = u->next;
	else
		conn->urbs = u->next;
	if (u->next != NULL)
		u->next->prev = u->prev;
	else
		conn->urbs_tail = u->prev;
	u->next = u->prev = NULL;
	conn->nurbs--;
	if (u->dir == USBIP_DIR_OUT)
		conn->pending_bytes -= u->length;
}

static struct expsrv_urb *
urbs_find(struct expsrv_conn *conn, uint32_t seqnum)
{
	struct expsrv_urb *u;

	for (u = conn->urbs_tail; u != NULL; u = u->prev)
		if (u->seqnum == seqnum)
			return u;
	return NULL;
}

/* Off its connection's table (if it still has one) and freed. */
static void
urb_free(struct expsrv_urb *u)
{
	if (u->conn != NULL)
		urbs_remove(u->conn, u);
	if (u->data != NULL)
		evbuffer_free(u->data);
	free(u->iso);
	free(u);
}

/* ---- teardown -------------------------------------------------------- */

static void
conn_free(struct expsrv_conn *conn)
{
	if (conn->rev != NULL)
		event_free(conn->rev);
	if (conn->wev != NULL)
		event_free(conn->wev);
	if (conn->timeout != NULL)
		event_free(conn->timeout);
	if (conn->kick != NULL)
		event_free(conn->kick);
	if (conn->in != NULL)
		evbuffer_free(conn->in);
	if (conn->out != NULL)
		evbuffer_free(conn->out);
	if (conn->list != NULL)
		evbuffer_free(conn->list);
	free(conn);
}

static void
reap_cb(int fd, short events, void *arg)
{
	struct expsrv *srv = arg;
	struct expsrv_conn *conn;

	while ((conn = TAILQ_FIRST(&srv->dead)) != NULL) {
		TAILQ_REMOVE(&srv->dead, conn, entry);
		conn_free(conn);
	}
}

/* A DEAD connection nobody owes anything to any more: free it soon. */
static void
conn_bury(struct expsrv_conn *conn)
{
	if (conn->srv == NULL) {
		conn_free(conn);
		return;
	}
	TAILQ_INSERT_TAIL(&conn->srv->dead, conn, entry);
	event_active(conn->srv->reaper, EV_TIMEOUT, 0);
}

/*
 * The one way a connection ends.  Its URBs are cancel()ed: those the
 * back end drops are freed, the others stay, orphaned, until their
 * completion.  Then the import ends (release(), once).
 */
static void
conn_teardown(struct expsrv_conn *conn, const char *why)
{
	struct expsrv *srv = conn->srv;
	struct expsrv_urb *u;
	void *dev;

	if (conn->state == CONN_DEAD)
		return;
	log_debug("conn %u %s: closed (%s)", conn->id, conn->peer, why);
	conn_set_state(conn, CONN_DEAD);
	event_del(conn->rev);
	event_del(conn->wev);
	event_del(conn->timeout);
	event_del(conn->kick);
	conn->reading = false;
	if (conn->fd != -1) {
		close(conn->fd);
		conn->fd = -1;
	}
	while ((u = conn->urbs) != NULL) {
		urbs_remove(conn, u);
		u->conn = NULL;
		if (!u->held || conn->ops->cancel(conn->dev, u))
			urb_free(u);
	}
	if ((dev = conn->dev) != NULL) {
		conn->dev = NULL;
		conn->ops->release(dev, conn, why);
	}
	TAILQ_REMOVE(&srv->conns, conn, entry);
	srv->nconns--;
	if (conn->import_pending)
		TAILQ_INSERT_TAIL(&srv->limbo, conn, entry);
	else
		conn_bury(conn);
}

static void
conn_malformed(struct expsrv_conn *conn, const char *why)
{
	if (conn->ops->pdu != NULL)
		conn->ops->pdu(conn->arg, conn, NULL, NULL, why);
	log_warnx("conn %u %s: malformed PDU: %s", conn->id, conn->peer, why);
	conn_teardown(conn, "malformed PDU");
}

/* Have output written (and input processed) from the loop, soon. */
static void
conn_kick(struct expsrv_conn *conn)
{
	if (conn->state != CONN_DEAD && conn->busy == 0) {
		conn->kicked = true;
		event_active(conn->kick, EV_TIMEOUT, 0);
	}
}

/* Read the socket exactly while input can be taken. */
static void
conn_rearm(struct expsrv_conn *conn)
{
	bool want;

	if (conn->state == CONN_DEAD)
		return;
	want = !conn->read_paused && !conn->user_paused &&
	    evbuffer_get_length(conn->in) < EXPSRV_IN_HIWAT;
	if (want && !conn->reading)
		event_add(conn->rev, NULL);
	else if (!want && conn->reading)
		event_del(conn->rev);
	conn->reading = want;
}

/* ---- replies --------------------------------------------------------- */

static void
add_zeros(struct evbuffer *out, uint32_t len)
{
	uint32_t n;

	while (len > 0) {
		n = len < EXPSRV_ZEROS ? len : EXPSRV_ZEROS;
		evbuffer_add_reference(out, zeros, n, NULL, NULL);
		len -= n;
	}
}

static void
ret_unlink(struct expsrv_conn *conn, uint32_t seqnum, int32_t status)
{
	struct usbip_urb_hdr r;
	uint8_t buf[USBIP_URB_HDR_LEN];

	memset(&r, 0, sizeof(r));
	r.command = USBIP_RET_UNLINK;
	r.seqnum = seqnum;
	r.u.ret_unlink.status = status;
	usbip_urb_hdr_encode(buf, &r);
	evbuffer_add(conn->out, buf, sizeof(buf));
}

/*
 * The start of every completion.  Returns the connection to write the
 * RET_SUBMIT to, or NULL when there is none to write: u's connection is
 * gone, or u was unlinked and RET_UNLINK(-ECONNRESET) stands for it (u
 * is freed then).
 */
static struct expsrv_conn *
done_begin(struct expsrv_urb *u, int32_t status)
{
	struct expsrv_conn *conn = u->conn;

	u->held = false;
	if (conn == NULL || conn->state == CONN_DEAD) {
		urb_free(u);
		return NULL;
	}
	if (u->unlinking && status == -ECONNRESET) {
		log_debug("conn %u: unlink %u: unlinked", conn->id, u->seqnum);
		ret_unlink(conn, u->unlink_seqnum, -ECONNRESET);
		urb_free(u);
		conn_kick(conn);
		return NULL;
	}
	return conn;
}

/* After the RET_SUBMIT: the unlink that waited on u, then u is done. */
static void
done_end(struct expsrv_conn *conn, struct expsrv_urb *u)
{
	if (u->unlinking) {
		log_debug("conn %u: unlink %u: completed first", conn->id,
		    u->seqnum);
		ret_unlink(conn, u->unlink_seqnum, 0);
	}
	urb_free(u);
	if (evbuffer_get_length(conn->out) > conn->srv->lim.out_hiwat)
		conn->read_paused = true;
	conn_kick(conn);
}

/* Write the RET_SUBMIT header; returns the zero bytes owed after data. */
static uint32_t
ret_submit_hdr(struct expsrv_conn *conn, struct expsrv_urb *u,
    int32_t status, uint32_t actual, int32_t start_frame)
{
	struct usbip_urb_hdr h;
	uint8_t buf[USBIP_URB_HDR_LEN];
	uint32_t i, errors = 0, extra = 0;

	for (i = 0; i < u->npackets; i++)
		if (u->iso[i].status != 0)
			errors++;
	memset(&h, 0, sizeof(h));
	h.command = USBIP_RET_SUBMIT;
	h.seqnum = u->seqnum;
	h.u.ret_submit.status = status;
	h.u.ret_submit.actual_length = (int32_t)actual;
	h.u.ret_submit.start_frame = start_frame;
	h.u.ret_submit.number_of_packets = (int32_t)u->npackets;
	h.u.ret_submit.error_count = (int32_t)errors;
	if (conn->ops->reply != NULL)
		extra = conn->ops->reply(conn->arg, conn, u, &h);
	usbip_urb_hdr_encode(buf, &h);
	evbuffer_add(conn->out, buf, sizeof(buf));
	return extra;
}

static void
ret_submit_iso(struct expsrv_conn *conn, struct expsrv_urb *u)
{
	uint8_t *buf;
	uint32_t i;

	if (u->npackets == 0)
		return;
	buf = xreallocarray(NULL, u->npackets, USBIP_ISO_DESC_LEN);
	for (i = 0; i < u->npackets; i++)
		usbip_iso_desc_encode(buf + (size_t)i * USBIP_ISO_DESC_LEN,
		    &u->iso[i]);
	evbuffer_add(conn->out, buf, (size_t)u->npackets * USBIP_ISO_DESC_LEN);
	free(buf);
}

void
expsrv_urb_done(struct expsrv_urb *u, int32_t status, uint32_t actual)
{
	struct expsrv_conn *conn;
	uint32_t extra;

	if ((conn = done_begin(u, status)) == NULL)
		return;
	extra = ret_submit_hdr(conn, u, status, u->dir == USBIP_DIR_IN ? 0 :
	    actual, 0);
	add_zeros(conn->out, extra);
	ret_submit_iso(conn, u);
	done_end(conn, u);
}

void
expsrv_urb_done_buf(struct expsrv_urb *u, int32_t status, const void *buf,
    uint32_t len)
{
	struct expsrv_conn *conn;
	uint32_t extra;

	if ((conn = done_begin(u, status)) == NULL)
		return;
	extra = ret_submit_hdr(conn, u, status, len, 0);
	evbuffer_add(conn->out, buf, len);
	add_zeros(conn->out, extra);
	done_end(conn, u);
}

void
expsrv_urb_done_ref(struct expsrv_urb *u, int32_t status, const void *buf,
    uint32_t len, void (*cleanup)(const void *, size_t, void *), void *arg)
{
	struct expsrv_conn *conn;
	uint32_t extra;

	if ((conn = done_begin(u, status)) == NULL) {
		cleanup(buf, len, arg);
		return;
	}
	extra = ret_submit_hdr(conn, u, status, len, 0);
	if (evbuffer_add_reference(conn->out, buf, len, cleanup, arg) == -1)
		fatalx("evbuffer_add_reference failed");
	add_zeros(conn->out, extra);
	done_end(conn, u);
}

void
expsrv_urb_done_evbuf(struct expsrv_urb *u, int32_t status,
    struct evbuffer *src, uint32_t len)
{
	struct expsrv_conn *conn;
	uint32_t extra;

	if ((conn = done_begin(u, status)) == NULL) {
		evbuffer_drain(src, len);	/* moved, to nowhere */
		return;
	}
	extra = ret_submit_hdr(conn, u, status, len, 0);
	evbuffer_remove_buffer(src, conn->out, len);
	add_zeros(conn->out, extra);
	done_end(conn, u);
}

void
expsrv_urb_done_iso(struct expsrv_urb *u, struct evbuffer *packed,
    uint32_t actual, int32_t start_frame)
{
	struct expsrv_conn *conn;

	if ((conn = done_begin(u, 0)) == NULL) {
		if (packed != NULL)
			evbuffer_drain(packed, evbuffer_get_length(packed));
		return;
	}
	ret_submit_hdr(conn, u, 0, actual, start_frame);
	if (packed != NULL)
		evbuffer_add_buffer(conn->out, packed);
	ret_submit_iso(conn, u);
	done_end(conn, u);
}

/* ---- op phase -------------------------------------------------------- */

void
expsrv_list_add(struct expsrv_conn *conn, const struct usbip_dev *rec,
    const struct usbip_intf *intf, uint8_t nintf)
{
	struct usbip_dev r = *rec;
	uint8_t drec[USBIP_DEV_LEN], irec[USBIP_INTF_LEN];
	uint8_t i;

	if (conn->list == NULL)
		return;		/* not inside list() */
	if (conn->nlisted >= USBIP_MAX_NDEV) {
		if (conn->nlisted++ == USBIP_MAX_NDEV)
			log_warnx("conn %u %s: device list cut at %d devices",
			    conn->id, conn->peer, USBIP_MAX_NDEV);
		return;
	}
	r.bNumInterfaces = nintf;	/* the records that follow */
	evbuffer_add(conn->list, drec, usbip_dev_encode(drec, &r));
	for (i = 0; i < nintf; i++)
		evbuffer_add(conn->list, irec, usbip_intf_encode(irec,
		    &intf[i]));
	conn->nlisted++;
}

void
expsrv_list_refuse(struct expsrv_conn *conn, uint32_t st)
{
	if (conn->list != NULL && st != ST_OK)
		conn->list_st = st > ST_MAX ? ST_ERROR : st;
}

/* Returns -1 if the list hook closed the connection (no reply), else 0. */
static int
op_devlist(struct expsrv_conn *conn)
{
	uint8_t hdr[USBIP_OP_HDR_LEN + 4];
	uint32_t n;

	if ((conn->list = evbuffer_new()) == NULL)
		fatalx("out of memory");
	conn->nlisted = 0;
	conn->list_st = ST_OK;
	conn->ops->list(conn->arg, conn);
	if (conn->state == CONN_DEAD || conn->why[0] != '\0') {
		/* closed by the hook (expsrv_conn_close): nothing to send,
		 * and the connection is the teardown's now */
		evbuffer_free(conn->list);
		conn->list = NULL;
		return -1;
	}
	n = conn->nlisted < USBIP_MAX_NDEV ? conn->nlisted : USBIP_MAX_NDEV;
	if (conn->list_st != ST_OK) {
		/* refused: the status and no device (list_add()s dropped) */
		n = 0;
		evbuffer_drain(conn->list, evbuffer_get_length(conn->list));
	}
	usbip_devlist_rep_hdr_encode(hdr, n);
	if (conn->list_st != ST_OK)
		put_be32(hdr + 4, conn->list_st);	/* the op's status */
	evbuffer_add(conn->out, hdr, sizeof(hdr));
	evbuffer_add_buffer(conn->out, conn->list);
	evbuffer_free(conn->list);
	conn->list = NULL;
	log_debug("conn %u %s: device list, %u devices", conn->id, conn->peer,
	    n);
	conn_set_state(conn, CONN_FLUSH);
	return 0;
}

/* The end of an import, at once or from expsrv_import_done(). */
static void
import_finish(struct expsrv_conn *conn, uint32_t st,
    const struct usbip_dev *rec, void *dev)
{
	uint8_t rep[USBIP_IMPORT_REP_LEN];
	char esc[USBIP_BUSID_SIZE * 4 + 1];

	log_escape(esc, sizeof(esc), conn->busid, strlen(conn->busid));
	if (st == ST_OK && (rec == NULL || dev == NULL))
		fatalx("expsrv: import of %s granted without a record or "
		    "device", esc);
	if (st != ST_OK && st > ST_MAX)
		st = ST_ERROR;
	if (conn->state != CONN_IMPORTING) {
		/* Closed meanwhile (op timeout, peer gone): give it back. */
		if (conn->ops->imported != NULL)
			conn->ops->imported(conn->arg, conn, conn->busid, st,
			    dev);
		if (st == ST_OK) {
			log_info("conn %u %s: import %s granted after the "
			    "connection closed; released", conn->id,
			    conn->peer, esc);
			conn->ops->release(dev, conn, "closed during the import");
		}
		return;
	}
	if (st != ST_OK) {
		log_info("conn %u %s: import %s refused: %s", conn->id,
		    conn->peer, esc, usbip_st_name(st));
		evbuffer_add(conn->out, rep, usbip_import_rep_encode(rep, st,
		    NULL));
		conn_set_state(conn, CONN_FLUSH);
		if (conn->ops->imported != NULL)
			conn->ops->imported(conn->arg, conn, conn->busid, st,
			    NULL);
		return;
	}
	conn->dev = dev;
	conn->devid = rec->busnum << 16 | rec->devnum;
	evbuffer_add(conn->out, rep, usbip_import_rep_encode(rep, ST_OK, rec));
	event_del(conn->timeout);
	log_debug("conn %u %s: imported %s (devid 0x%08x)", conn->id,
	    conn->peer, esc, conn->devid);
	conn_set_state(conn, CONN_URB);
	if (conn->ops->imported != NULL)
		conn->ops->imported(conn->arg, conn, conn->busid, ST_OK, dev);
}

static void
op_import(struct expsrv_conn *conn, const char *busid)
{
	struct usbip_dev rec;
	void *dev = NULL;
	uint32_t st;

	usbgw_strlcpy(conn->busid, busid, sizeof(conn->busid));
	memset(&rec, 0, sizeof(rec));
	conn_set_state(conn, CONN_IMPORTING);
	conn->import_pending = true;
	st = conn->ops->import(conn->arg, conn, busid, &rec, &dev);
	if (st == EXPSRV_IMPORT_ASYNC)
		return;		/* expsrv_import_done() may have come */
	conn->import_pending = false;
	import_finish(conn, st, &rec, dev);
}

void
expsrv_import_done(struct expsrv_conn *conn, uint32_t st,
    const struct usbip_dev *rec, void *dev)
{
	if (!conn->import_pending)
		fatalx("expsrv: import_done on conn %u without an import",
		    conn->id);
	conn->import_pending = false;
	import_finish(conn, st, rec, dev);
	if (conn->state != CONN_DEAD) {
		conn_kick(conn);
		return;
	}
	/* Torn down while the import ran: it waited in limbo for this. */
	if (conn->srv != NULL)
		TAILQ_REMOVE(&conn->srv->limbo, conn, entry);
	conn_bury(conn);
}

/*
 * An op code the engine does not serve, offered to the extension hook.
 * Taken: the socket is the hook's, the connection ends here without
 * closing it.  Returns -1 if taken, 0 if not (the op is malformed).
 */
static int
op_extension(struct expsrv_conn *conn, uint16_t code)
{
	if (!conn->ops->extension(conn->arg, conn, code, conn->fd, conn->in))
		return 0;
	evbuffer_drain(conn->in, evbuffer_get_length(conn->in));
	conn->fd = -1;			/* the hook's now: not closed */
	conn_teardown(conn, "handed over (extension op)");
	return -1;
}

/* Returns 1 if a PDU was handled, 0 if more bytes are needed, -1 closed. */
static int
op_step(struct expsrv_conn *conn)
{
	struct usbip_op op;
	const char *why = "?";
	size_t len = evbuffer_get_length(conn->in);
	const uint8_t *p;
	uint16_t code;
	int r;

	if (len == 0)
		return 0;
	if (len >= 4 && conn->ops->extension != NULL) {
		if ((p = evbuffer_pullup(conn->in, 4)) == NULL)
			fatalx("evbuffer_pullup failed");
		code = get_be16(p + 2);
		if (get_be16(p) == USBIP_VERSION && code != OP_REQ_DEVLIST &&
		    code != OP_REQ_IMPORT && op_extension(conn, code) == -1)
			return -1;
	}
	if (len > USBIP_IMPORT_REQ_LEN)
		len = USBIP_IMPORT_REQ_LEN;
	if ((p = evbuffer_pullup(conn->in, (ssize_t)len)) == NULL)
		fatalx("evbuffer_pullup failed");
	r = usbip_op_decode(p, len, USBIP_FROM_CLIENT, &op, &why);
	if (r == USBIP_NEED_MORE)
		return 0;
	if (r == USBIP_MALFORMED) {
		conn_malformed(conn, why);
		return -1;
	}
	evbuffer_drain(conn->in, (size_t)r);
	if (conn->ops->pdu != NULL)
		conn->ops->pdu(conn->arg, conn, &op, NULL, NULL);
	if (op.hdr.code == OP_REQ_IMPORT)
		op_import(conn, op.busid);
	else if (op_devlist(conn) == -1)
		return -1;
	return 1;
}

/* ---- URB phase ------------------------------------------------------- */

/*
 * CMD_UNLINK(u) naming p, in the order vhci needs: p's RET_SUBMIT goes
 * into the output before the RET_UNLINK that names it, or never (the
 * table in expsrv.h).  RET_UNLINK carries the unlink's own seqnum.
 */
static int
urb_unlink(struct expsrv_conn *conn, const struct usbip_urb_hdr *h)
{
	struct expsrv_urb *p;

	p = urbs_find(conn, h->u.unlink.unlink_seqnum);
	if (p == NULL) {
		/* Completed: its RET_SUBMIT is already ahead of this. */
		log_debug("conn %u: unlink %u: not pending", conn->id,
		    h->u.unlink.unlink_seqnum);
		ret_unlink(conn, h->seqnum, 0);
		return 1;
	}
	if (p->unlinking) {
		/*
		 * vhci unlinks a URB once (usb_hcd_check_unlink_urb()); a
		 * second answer could only overtake p's RET_SUBMIT.
		 */
		conn_malformed(conn, "CMD_UNLINK of a URB already being "
		    "unlinked");
		return -1;
	}
	/* Set first: cancel() may complete p before it returns. */
	p->unlinking = true;
	p->unlink_seqnum = h->seqnum;
	if (conn->ops->cancel(conn->dev, p)) {
		log_debug("conn %u: unlink %u: dropped", conn->id, p->seqnum);
		p->held = false;
		urb_free(p);
		ret_unlink(conn, h->seqnum, -ECONNRESET);
	}
	return 1;
}

static int
urb_submit(struct expsrv_conn *conn)
{
	const struct usbip_urb_hdr *h = &conn->hdr;
	const struct usbip_urb_layout *lay = &conn->lay;
	const struct expsrv_limits *lim = &conn->srv->lim;
	struct expsrv_urb *u;
	const uint8_t *p;
	const char *why = "?";
	uint32_t i;

	if (urbs_find(conn, h->seqnum) != NULL) {
		conn_malformed(conn, "seqnum already in flight");
		return -1;
	}
	if (conn->nurbs >= lim->max_urbs) {
		log_warnx("conn %u %s: more than %u URBs in flight", conn->id,
		    conn->peer, lim->max_urbs);
		conn_teardown(conn, "too many URBs in flight");
		return -1;
	}
	u = xcalloc(1, sizeof(*u));
	u->conn = conn;
	u->seqnum = h->seqnum;
	u->ep = h->ep;
	u->dir = h->direction;
	u->length = (uint32_t)h->u.submit.transfer_buffer_length;
	u->flags = h->u.submit.transfer_flags;
	u->interval = h->u.submit.interval;
	memcpy(u->setup, h->u.submit.setup, sizeof(u->setup));
	u->npackets = lay->niso;
	urbs_insert(conn, u);
	if (lay->data_len > 0) {
		if ((u->data = evbuffer_new()) == NULL)
			fatalx("out of memory");
		evbuffer_remove_buffer(conn->in, u->data, lay->data_len);
	}
	if (lay->niso > 0) {
		if ((p = evbuffer_pullup(conn->in, lay->iso_len)) == NULL)
			fatalx("evbuffer_pullup failed");
		if (usbip_iso_check(h, p, lay->niso, u->length, &why) == -1) {
			conn_malformed(conn, why);
			return -1;
		}
		u->iso = xreallocarray(NULL, lay->niso, sizeof(*u->iso));
		for (i = 0; i < lay->niso; i++) {
			usbip_iso_desc_decode(p + (size_t)i *
			    USBIP_ISO_DESC_LEN, &u->iso[i]);
			u->iso[i].actual_length = 0;
			u->iso[i].status = 0;
		}
		evbuffer_drain(conn->in, lay->iso_len);
	}
	if (conn->ops->check != NULL &&
	    conn->ops->check(conn->dev, u, &why) == -1) {
		conn_malformed(conn, why);
		return -1;
	}
	if (conn->pending_bytes > lim->max_out_pending) {
		log_warnx("conn %u %s: more than %zu bytes of OUT data queued",
		    conn->id, conn->peer, lim->max_out_pending);
		conn_teardown(conn, "too much OUT data queued");
		return -1;
	}
	u->held = true;
	conn->ops->submit(conn->dev, u);
	return 1;
}

static int
urb_step(struct expsrv_conn *conn)
{
	struct usbip_urb_hdr *h = &conn->hdr;
	const uint8_t *p;
	const char *why = "?";
	int ep_iso, t;

	if (!conn->have_hdr) {
		if (evbuffer_get_length(conn->in) < USBIP_URB_HDR_LEN)
			return 0;
		if ((p = evbuffer_pullup(conn->in, USBIP_URB_HDR_LEN)) == NULL)
			fatalx("evbuffer_pullup failed");
		if (usbip_urb_hdr_decode(p, USBIP_URB_HDR_LEN,
		    USBIP_FROM_CLIENT, h, &why) != USBIP_URB_HDR_LEN) {
			conn_malformed(conn, why);
			return -1;
		}
		if (conn->ops->pdu != NULL)
			conn->ops->pdu(conn->arg, conn, NULL, h, NULL);
		if (h->devid != conn->devid) {
			/* As the stub's valid_request(): not ours, drop. */
			log_warnx("conn %u %s: devid 0x%08x is not the imported "
			    "device's 0x%08x", conn->id, conn->peer, h->devid,
			    conn->devid);
			conn_teardown(conn, "devid mismatch");
			return -1;
		}
		ep_iso = 0;
		if (h->command == USBIP_CMD_SUBMIT && h->ep != 0) {
			t = conn->ops->ep_type(conn->dev, h->direction, h->ep);
			if (t == -1) {
				conn_malformed(conn, "request to an endpoint "
				    "the device does not have");
				return -1;
			}
			ep_iso = t == EXPSRV_EP_GUESS ? -1 : t == 1;
		}
		if (usbip_urb_layout(h, NULL, ep_iso, &conn->lay, &why) == -1) {
			conn_malformed(conn, why);
			return -1;
		}
		conn->have_hdr = true;
	}
	if (evbuffer_get_length(conn->in) < conn->lay.total)
		return 0;
	conn->have_hdr = false;
	evbuffer_drain(conn->in, USBIP_URB_HDR_LEN);
	if (h->command == USBIP_CMD_UNLINK)
		return urb_unlink(conn, h);
	return urb_submit(conn);
}

/* ---- events ---------------------------------------------------------- */

/*
 * The socket is driven directly rather than through a bufferevent:
 * libevent 2.1's evbuffer_read() reads at most 4096 bytes per call
 * (EVBUFFER_MAX_READ), one event loop turn per 4 KiB, whatever
 * bufferevent_set_max_single_read() says.  Here one readv() fills up to
 * EXPSRV_READ_CHUNK bytes of reserved evbuffer space.  A connection
 * starts with EXPSRV_READ_FIRST and doubles whenever a read fills what
 * it asked for: an op-phase poll (a gateway's DEVLIST every few seconds,
 * per exporter) does not allocate and fault in 256 KiB.
 */

/* Returns bytes read, 0 at EOF, -1 with errno (EAGAIN: nothing yet). */
static ssize_t
conn_fill(struct expsrv_conn *conn)
{
	struct evbuffer_iovec vec[2];
	struct iovec iov[2];
	size_t room, len = evbuffer_get_length(conn->in);
	ssize_t n;
	int nvec, i, saved;

	room = len < EXPSRV_IN_HIWAT ? EXPSRV_IN_HIWAT - len : 0;
	if (room > conn->chunk)
		room = conn->chunk;
	if (room == 0) {
		errno = EAGAIN;
		return -1;
	}
	nvec = evbuffer_reserve_space(conn->in, (ev_ssize_t)room, vec, 2);
	if (nvec <= 0)
		fatalx("evbuffer_reserve_space failed");
	for (i = 0; i < nvec; i++) {
		iov[i].iov_base = vec[i].iov_base;
		iov[i].iov_len = vec[i].iov_len;
	}
	do
		n = readv(conn->fd, iov, nvec);
	while (n == -1 && errno == EINTR);
	if (n <= 0) {
		saved = errno;
		evbuffer_commit_space(conn->in, vec, 0);
		errno = saved;
		return n;
	}
	if ((size_t)n <= vec[0].iov_len) {
		vec[0].iov_len = (size_t)n;
		nvec = 1;
	} else
		vec[1].iov_len = (size_t)n - vec[0].iov_len;
	evbuffer_commit_space(conn->in, vec, nvec);
	if ((size_t)n == room && conn->chunk < EXPSRV_READ_CHUNK)
		conn->chunk *= 2;
	return n;
}

/* Handle the complete PDUs buffered, while nothing holds them back. */
static void
conn_process(struct expsrv_conn *conn)
{
	int r;

	conn->busy++;
	while (!conn->read_paused && !conn->user_paused) {
		switch (conn->state) {
		case CONN_OP:
			r = op_step(conn);
			break;
		case CONN_URB:
			r = urb_step(conn);
			break;
		case CONN_FLUSH:
			/* The reply is all there is; ignore the rest. */
			evbuffer_drain(conn->in, evbuffer_get_length(conn->in));
			r = 0;
			break;
		default:
			r = 0;	/* importing: the rest waits; dead */
		}
		if (r <= 0)
			break;
		if (evbuffer_get_length(conn->out) > conn->srv->lim.out_hiwat)
			conn->read_paused = true;
	}
	conn->busy--;
	conn_rearm(conn);
}

/*
 * Write what can be written now; wait for writability for the rest.
 * Resumes reading once the output is down to out_lowat, and closes a
 * connection in CONN_FLUSH once its reply is out.
 */
static void
conn_flush(struct expsrv_conn *conn)
{
	char why[128];
	int n;

	if (conn->state == CONN_DEAD || conn->frozen)
		return;
	while (evbuffer_get_length(conn->out) > 0) {
		n = evbuffer_write(conn->out, conn->fd);
		if (n > 0)
			continue;
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		snprintf(why, sizeof(why), "write: %s",
		    n == 0 ? "closed" : strerror(errno));
		conn_teardown(conn, why);
		return;
	}
	if (evbuffer_get_length(conn->out) > 0) {
		if (!event_pending(conn->wev, EV_WRITE, NULL))
			event_add(conn->wev, NULL);
	} else if (event_pending(conn->wev, EV_WRITE, NULL))
		event_del(conn->wev);
	if (conn->state == CONN_FLUSH && evbuffer_get_length(conn->out) == 0) {
		conn_teardown(conn, conn->why[0] != '\0' ? conn->why :
		    "reply sent");
		return;
	}
	if (conn->read_paused &&
	    evbuffer_get_length(conn->out) <= conn->srv->lim.out_lowat) {
		conn->read_paused = false;
		conn_process(conn);
		if (conn->state != CONN_DEAD &&
		    evbuffer_get_length(conn->out) > 0 &&
		    !event_pending(conn->wev, EV_WRITE, NULL))
			event_add(conn->wev, NULL);
	}
}

static void
conn_read_cb(int fd, short events, void *arg)
{
	struct expsrv_conn *conn = arg;
	char why[128];
	ssize_t n;

	n = conn_fill(conn);
	if (n == 0) {
		conn_teardown(conn, "peer closed");
		return;
	}
	if (n == -1 && errno != EAGAIN && errno != EWOULDBLOCK) {
		snprintf(why, sizeof(why), "read: %s", strerror(errno));
		conn_teardown(conn, why);
		return;
	}
	if (conn->frozen) {
		/* Frozen: requests are swallowed unanswered. */
		evbuffer_drain(conn->in, evbuffer_get_length(conn->in));
		return;
	}
	conn->busy++;
	conn_process(conn);
	conn_flush(conn);
	conn->busy--;
	conn_rearm(conn);
}

static void
conn_write_cb(int fd, short events, void *arg)
{
	conn_flush(arg);
}

/* Completions and resumes from outside the engine's own processing. */
static void
conn_kick_cb(int fd, short events, void *arg)
{
	struct expsrv_conn *conn = arg;

	conn->kicked = false;
	conn->busy++;
	conn_process(conn);
	conn_flush(conn);
	conn->busy--;
	conn_rearm(conn);
}

/*
 * Run now the kicks that completions queued since the loop last ran them.
 * A back end whose completions arrive in a batch (libusb's event handling)
 * calls this after the batch: its replies go out in one write per
 * connection in the same loop turn, not one turn later.  A kick may
 * complete or close other connections: the scan starts over after each.
 */
void
expsrv_run_kicks(struct expsrv *srv)
{
	struct expsrv_conn *conn;

again:
	TAILQ_FOREACH(conn, &srv->conns, entry)
		if (conn->kicked && conn->busy == 0) {
			event_del(conn->kick);
			conn_kick_cb(-1, 0, conn);
			goto again;
		}
}

static void
conn_timeout_cb(int fd, short events, void *arg)
{
	struct expsrv_conn *conn = arg;

	if (conn->state == CONN_FLUSH && conn->why[0] != '\0') {
		log_warnx("conn %u %s: output not flushed within %d s",
		    conn->id, conn->peer, EXPSRV_CLOSE_FLUSH);
		conn_teardown(conn, conn->why);
		return;
	}
	log_warnx("conn %u %s: no request within %d s", conn->id, conn->peer,
	    conn->srv->lim.op_timeout_s);
	conn_teardown(conn, "op phase timeout");
}

/* ---- the server ------------------------------------------------------ */

struct expsrv *
expsrv_new(struct event_base *base, const struct expsrv_ops *ops, void *arg,
    const struct expsrv_limits *lim)
{
	struct expsrv *srv;

	srv = xcalloc(1, sizeof(*srv));
	srv->base = base;
	srv->ops = ops;
	srv->arg = arg;
	if (lim != NULL)
		srv->lim = *lim;
	else
		expsrv_limits_default(&srv->lim);
	TAILQ_INIT(&srv->conns);
	TAILQ_INIT(&srv->dead);
	TAILQ_INIT(&srv->limbo);
	if ((srv->reaper = event_new(base, -1, 0, reap_cb, srv)) == NULL)
		fatalx("event_new failed");
	return srv;
}

void
expsrv_closeall(struct expsrv *srv)
{
	struct expsrv_conn *conn;

	while ((conn = TAILQ_FIRST(&srv->conns)) != NULL)
		conn_teardown(conn, "shutting down");
}

void
expsrv_free(struct expsrv *srv)
{
	struct expsrv_conn *conn;

	if (srv == NULL)
		return;
	expsrv_closeall(srv);
	reap_cb(-1, 0, srv);
	/* Those still owed an import_done are freed when it comes. */
	while ((conn = TAILQ_FIRST(&srv->limbo)) != NULL) {
		TAILQ_REMOVE(&srv->limbo, conn, entry);
		conn->srv = NULL;
	}
	event_free(srv->reaper);
	free(srv);
}

unsigned
expsrv_nconns(const struct expsrv *srv)
{
	return srv->nconns;
}

static void
peer_name(const struct sockaddr *sa, socklen_t salen, char *out, size_t outsz)
{
	char host[NI_MAXHOST], serv[NI_MAXSERV];

	if (sa == NULL || (sa->sa_family != AF_INET &&
	    sa->sa_family != AF_INET6)) {
		usbgw_strlcpy(out, "local", outsz);
		return;
	}
	if (getnameinfo(sa, salen, host, sizeof(host), serv, sizeof(serv),
	    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
		usbgw_strlcpy(host, "?", sizeof(host));
		usbgw_strlcpy(serv, "?", sizeof(serv));
	}
	snprintf(out, outsz, sa->sa_family == AF_INET6 ? "[%s]:%s" : "%s:%s",
	    host, serv);
}

struct expsrv_conn *
expsrv_accept(struct expsrv *srv, int fd, const struct sockaddr *sa,
    socklen_t salen)
{
	struct expsrv_conn *conn;
	struct timeval tv = { srv->lim.op_timeout_s, 0 };
	int one = 1;

	if (fd_nonblock_cloexec(fd) == -1)
		log_warn("fcntl");
	if (sa != NULL && (sa->sa_family == AF_INET ||
	    sa->sa_family == AF_INET6) && setsockopt(fd, IPPROTO_TCP,
	    TCP_NODELAY, &one, sizeof(one)) == -1)
		log_warn("setsockopt TCP_NODELAY");
	conn = xcalloc(1, sizeof(*conn));
	conn->srv = srv;
	conn->ops = srv->ops;
	conn->arg = srv->arg;
	conn->id = conn_nextid++;
	conn->state = CONN_OP;
	conn->chunk = EXPSRV_READ_FIRST;
	peer_name(sa, salen, conn->peer, sizeof(conn->peer));
	conn->fd = fd;
	conn->in = evbuffer_new();
	conn->out = evbuffer_new();
	conn->rev = event_new(srv->base, fd, EV_READ | EV_PERSIST,
	    conn_read_cb, conn);
	conn->wev = event_new(srv->base, fd, EV_WRITE | EV_PERSIST,
	    conn_write_cb, conn);
	conn->timeout = evtimer_new(srv->base, conn_timeout_cb, conn);
	conn->kick = event_new(srv->base, -1, 0, conn_kick_cb, conn);
	if (conn->in == NULL || conn->out == NULL || conn->rev == NULL ||
	    conn->wev == NULL || conn->timeout == NULL || conn->kick == NULL)
		fatalx("out of memory");
	evtimer_add(conn->timeout, &tv);
	TAILQ_INSERT_TAIL(&srv->conns, conn, entry);
	srv->nconns++;
	conn_rearm(conn);
	log_debug("conn %u %s: accepted", conn->id, conn->peer);
	return conn;
}

/* ---- a connection, for the back end ---------------------------------- */

const char *
expsrv_conn_peer(const struct expsrv_conn *conn)
{
	return conn->peer;
}

unsigned
expsrv_conn_id(const struct expsrv_conn *conn)
{
	return conn->id;
}

void *
expsrv_conn_dev(const struct expsrv_conn *conn)
{
	return conn->dev;
}

void
expsrv_conn_pause(struct expsrv_conn *conn)
{
	conn->user_paused = true;
	conn_rearm(conn);
}

void
expsrv_conn_resume(struct expsrv_conn *conn)
{
	if (!conn->user_paused)
		return;
	conn->user_paused = false;
	conn_rearm(conn);
	if (conn->state != CONN_DEAD) {
		conn->kicked = true;
		event_active(conn->kick, EV_TIMEOUT, 0);
	}
}

void
expsrv_conn_close(struct expsrv_conn *conn, const char *why)
{
	struct timeval tv = { EXPSRV_CLOSE_FLUSH, 0 };

	if (conn->state == CONN_DEAD || conn->why[0] != '\0')
		return;
	if (conn->frozen || evbuffer_get_length(conn->out) == 0) {
		conn_teardown(conn, why);
		return;
	}
	/* No more requests; what is queued gets EXPSRV_CLOSE_FLUSH s. */
	usbgw_strlcpy(conn->why, why, sizeof(conn->why));
	conn_set_state(conn, CONN_FLUSH);
	evtimer_add(conn->timeout, &tv);
	conn_kick(conn);
}

void
expsrv_conn_freeze(struct expsrv_conn *conn)
{
	conn->frozen = true;
	if (conn->state != CONN_DEAD && event_pending(conn->wev, EV_WRITE,
	    NULL))
		event_del(conn->wev);
	log_info("conn %u %s: frozen", conn->id, conn->peer);
}

void
expsrv_conn_send(struct expsrv_conn *conn, const void *buf, size_t len)
{
	if (conn->state == CONN_DEAD)
		return;
	evbuffer_add(conn->out, buf, len);
	conn_kick(conn);
}

void
expsrv_conn_set_data(struct expsrv_conn *conn, void *data)
{
	conn->data = data;
}

void *
expsrv_conn_data(const struct expsrv_conn *conn)
{
	return conn->data;
}
