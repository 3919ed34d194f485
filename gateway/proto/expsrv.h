/*
 * expsrv: the exporter's side of USB/IP -- what usbipd and the kernel's
 * usbip-host do for one TCP connection -- as one engine shared by
 * usbgw-sim (emulated devices) and usbgw-agent (real devices through
 * libusb).  protocol.md 1.9.1 and 1.9.3.
 *
 * The engine owns the socket, the op phase (OP_REQ_DEVLIST answered then
 * closed; OP_REQ_IMPORT refused then closed, or accepted and followed by)
 * the URB phase: framing and validation through the codec (usbip.c), the
 * devid check, the in-flight table keyed by seqnum, the unlink rules, the
 * ordered output, backpressure, and the timeouts.  A back end owns the
 * devices: what to list, whether an import is granted, the endpoint
 * table, and the transfers.  The back end never writes to the socket; it
 * completes URBs through expsrv_urb_done*().
 *
 * Ownership.  An expsrv_urb is the engine's.  The back end gets it in
 * submit() and must, exactly once, either complete it
 * (expsrv_urb_done*()) or -- only from cancel() -- drop it.  A URB may
 * outlive its connection: when a connection closes, every URB the back
 * end holds is cancel()ed; those it does not drop stay allocated, with
 * u->conn == NULL, until the back end completes them (their reply is
 * discarded).  The connection's release() is called once the import has
 * ended (after those cancel() calls), so the back end can reset the
 * device when its last completion comes.
 *
 * Unlink (CMD_UNLINK(u) naming p), as stub_rx.c / stub_tx.c, with the
 * order vhci needs (p's RET_SUBMIT before the RET_UNLINK naming it, or
 * never):
 *   p not in the table        RET_UNLINK(u, 0)
 *   p held by the back end    cancel(p): dropped -> RET_UNLINK(u, -ECONNRESET)
 *                             at once; otherwise nothing yet, and when p
 *                             completes with status -ECONNRESET (the
 *                             back end's "cancelled"): RET_UNLINK(u,
 *                             -ECONNRESET) alone; with any other status:
 *                             RET_SUBMIT(p) then RET_UNLINK(u, 0).
 *   p already being unlinked  the connection closes (vhci unlinks a URB
 *                             once; a second answer could overtake p's
 *                             RET_SUBMIT).
 * A CMD_SUBMIT whose seqnum is in flight closes the connection too.
 *
 * Callbacks run inside the loop; the back end may call expsrv_urb_done*()
 * from inside submit() or cancel() (a synchronous completion).  A
 * connection is torn down only by the engine (or expsrv_conn_close());
 * its memory is freed later from the loop.
 */
#ifndef USBGW_EXPSRV_H
#define USBGW_EXPSRV_H

#include <sys/socket.h>

#include <stdbool.h>
#include <stdint.h>

#include <event2/event.h>
#include <event2/buffer.h>

#include "proto/usbip.h"

struct expsrv;
struct expsrv_conn;

/* import() has started work and will call expsrv_import_done(). */
#define EXPSRV_IMPORT_ASYNC	0xffffffffu
/*
 * ep_type(): the back end does not know the endpoint and answers such
 * URBs itself (usbgw-sim stalls them, as its device would): the codec
 * infers ISO from number_of_packets and the URB is submitted.
 */
#define EXPSRV_EP_GUESS		(-2)

/* One CMD_SUBMIT as the back end sees it.  Read-only for the back end
 * except be, iso[].actual_length/status (before expsrv_urb_done_iso()). */
struct expsrv_urb {
	struct expsrv_conn *conn;	/* NULL once its connection is gone */
	uint32_t	 seqnum;
	uint32_t	 ep;		/* endpoint number 0..15 */
	uint32_t	 dir;		/* USBIP_DIR_OUT / USBIP_DIR_IN */
	uint32_t	 length;	/* transfer_buffer_length */
	uint32_t	 flags;		/* transfer_flags (URB_SHORT_NOT_OK, ...) */
	int32_t		 interval;
	uint8_t		 setup[8];	/* endpoint 0 only */
	uint32_t	 npackets;	/* ISO: number_of_packets, else 0 */
	struct usbip_iso_desc *iso;	/* npackets entries: the request's
					 * offset/length; actual_length and
					 * status for the back end to fill */
	struct evbuffer	*data;		/* OUT data as sent (ISO: packed) */
	void		*be;		/* the back end's, for its transfer */
	/* The engine's. */
	uint32_t	 unlink_seqnum;	/* the CMD_UNLINK waiting on it */
	bool		 unlinking;	/* unlink_seqnum is set */
	bool		 held;		/* the back end has it */
	struct expsrv_urb *next;	/* in-flight list */
	struct expsrv_urb *prev;
};

struct expsrv_ops {
	/*
	 * OP_REQ_DEVLIST: call expsrv_list_add() once per device offered
	 * to this connection (none: an empty list), expsrv_list_refuse()
	 * for a status and no device, or expsrv_conn_close() for no reply
	 * at all (the engine then stops there).
	 */
	void	 (*list)(void *arg, struct expsrv_conn *);
	/*
	 * OP_REQ_IMPORT of busid: return ST_OK with *rec filled and *dev
	 * set (the back end's device, passed to the calls below), a
	 * refusal (ST_NODEV, ST_DEV_BUSY, ST_DEV_ERR, ST_NA), or
	 * EXPSRV_IMPORT_ASYNC and call expsrv_import_done() later.
	 */
	uint32_t (*import)(void *arg, struct expsrv_conn *, const char *busid,
		    struct usbip_dev *rec, void **dev);
	/*
	 * The transfer type (USB_XFER_*: 0 control, 1 iso, 2 bulk, 3
	 * interrupt) of endpoint ep in direction dir in the device's
	 * current configuration and alternate settings, or -1 if it has
	 * none: the URB is malformed and the connection closes (or
	 * EXPSRV_EP_GUESS, above).
	 */
	int	 (*ep_type)(void *dev, uint32_t dir, uint32_t ep);
	/* Start u; complete it now or later with expsrv_urb_done*(). */
	void	 (*submit)(void *dev, struct expsrv_urb *u);
	/*
	 * Stop u (an unlink, or its connection closing).  Return true if
	 * u was dropped now (no completion follows: the back end has
	 * forgotten it, the engine frees it), false if its completion will
	 * come (status -ECONNRESET if it was cancelled, its true result
	 * otherwise; it may already have come from inside cancel(): after
	 * false the engine does not touch u again).
	 */
	bool	 (*cancel)(void *dev, struct expsrv_urb *u);
	/* The import ended (why: for the log); called once. */
	void	 (*release)(void *dev, struct expsrv_conn *, const char *why);
	/*
	 * Optional (NULL: not called).  The OP_REQ_IMPORT of busid was
	 * answered with st (ST_OK: dev is the back end's device), whether
	 * import() answered at once or through expsrv_import_done(); once
	 * per import request, after the reply was queued.  For audit lines
	 * (usbgw-agent's export.c wraps a back end's ops with it).
	 */
	void	 (*imported)(void *arg, struct expsrv_conn *, const char *busid,
		    uint32_t st, void *dev);
	/*
	 * Optional (NULL: an op code the engine does not serve is
	 * malformed, as for usbipd).  The op phase's first 4 bytes show
	 * version 0x0111 and an op code other than OP_REQ_DEVLIST and
	 * OP_REQ_IMPORT (usbgw's OP_REQ_USBGW, protocol.md 1.9.4).  Return
	 * true to take the connection over: fd and the bytes read so far
	 * (in, from the op header on; move them out before returning)
	 * become the hook's, and the engine forgets the connection without
	 * closing fd (expsrv_nconns() stops counting it; conn stays
	 * readable, expsrv_conn_peer() and all, until the hook returns).
	 * false: nothing taken, the op is malformed and the connection
	 * closes.  Called at most once per connection, before any reply.
	 */
	bool	 (*extension)(void *arg, struct expsrv_conn *, uint16_t code,
		    int fd, struct evbuffer *in);

	/* Optional hooks (NULL: none), for usbgw-sim's tests of importers. */
	/*
	 * A complete CMD_SUBMIT before submit() (data and ISO descriptors
	 * read): -1 with *why closes the connection as malformed (usbgw-sim
	 * checks ISO packets against the endpoint's packet size here).
	 */
	int	 (*check)(void *dev, const struct expsrv_urb *u,
		    const char **why);
	/*
	 * Every request as decoded: an op PDU (op), a URB header (urb;
	 * before the devid check), or a malformed PDU (malformed: why);
	 * the other two NULL.  For a PDU log.
	 */
	void	 (*pdu)(void *arg, struct expsrv_conn *,
		    const struct usbip_op *op, const struct usbip_urb_hdr *urb,
		    const char *malformed);
	/*
	 * A RET_SUBMIT header about to be written for u, which the hook
	 * may change (fault injection, counters).  Returns how many zero
	 * bytes must follow the reply's data (an actual_length made
	 * larger), usually 0.
	 */
	uint32_t (*reply)(void *arg, struct expsrv_conn *, struct expsrv_urb *u,
		    struct usbip_urb_hdr *h);
};

struct expsrv_limits {
	unsigned	 max_urbs;	/* in flight per connection */
	size_t		 max_out_pending; /* OUT bytes held per connection */
	size_t		 out_hiwat;	/* stop reading above this output */
	size_t		 out_lowat;	/* resume below this */
	int		 op_timeout_s;	/* whole op phase, from accept */
};
/* The values usbipd + usbip-host effectively have (see expsrv.c). */
void		 expsrv_limits_default(struct expsrv_limits *);

struct expsrv	*expsrv_new(struct event_base *, const struct expsrv_ops *,
		    void *arg, const struct expsrv_limits *);
/* Closes every connection; URBs still held stay until completed. */
void		 expsrv_free(struct expsrv *);
/* Takes an accepted socket (made non-blocking here); label: for logs. */
struct expsrv_conn *expsrv_accept(struct expsrv *, int fd,
		    const struct sockaddr *, socklen_t);
void		 expsrv_closeall(struct expsrv *);
unsigned	 expsrv_nconns(const struct expsrv *);

/* Op phase, from list() / import(). */
void		 expsrv_list_add(struct expsrv_conn *, const struct usbip_dev *,
		    const struct usbip_intf *, uint8_t nintf);
void		 expsrv_import_done(struct expsrv_conn *, uint32_t st,
		    const struct usbip_dev *rec, void *dev);
/* From list() only: the reply is st (ST_NA...) with no device. */
void		 expsrv_list_refuse(struct expsrv_conn *, uint32_t st);

/* Completions.  status: 0 or a negative errno as vhci expects. */
void		 expsrv_urb_done(struct expsrv_urb *, int32_t status,
		    uint32_t actual);			/* OUT, or no data */
void		 expsrv_urb_done_buf(struct expsrv_urb *, int32_t status,
		    const void *buf, uint32_t len);	/* IN data, copied */
/* IN data, not copied: the output refers to buf until it is written,
 * then calls cleanup(buf, len, arg) (at once when there is no reply). */
void		 expsrv_urb_done_ref(struct expsrv_urb *, int32_t status,
		    const void *buf, uint32_t len,
		    void (*cleanup)(const void *, size_t, void *), void *arg);
void		 expsrv_urb_done_evbuf(struct expsrv_urb *, int32_t status,
		    struct evbuffer *src, uint32_t len); /* IN data, moved */
/* ISO: u->iso[] filled; packed: the IN data packed as 1.3.4 (NULL for
 * OUT), actual: the sum of the packets' actual lengths. */
void		 expsrv_urb_done_iso(struct expsrv_urb *,
		    struct evbuffer *packed, uint32_t actual,
		    int32_t start_frame);

/*
 * Write now what completions since the loop's last turn queued (one write
 * per connection), rather than from the loop's next turn: for a back end
 * that completes URBs in batches, after each batch.
 */
void		 expsrv_run_kicks(struct expsrv *);

/* A connection, for the back end. */
const char	*expsrv_conn_peer(const struct expsrv_conn *);	/* "addr:port" */
unsigned	 expsrv_conn_id(const struct expsrv_conn *);
void		*expsrv_conn_dev(const struct expsrv_conn *);	/* NULL in op phase */
/*
 * Stop / resume reading requests (while an intercepted control request
 * runs on a worker, so that later PDUs keep their order).
 */
void		 expsrv_conn_pause(struct expsrv_conn *);
void		 expsrv_conn_resume(struct expsrv_conn *);
/*
 * End the connection (device gone, malformed request seen by the back
 * end): what is queued is flushed for at most 1 s, then closed.
 */
void		 expsrv_conn_close(struct expsrv_conn *, const char *why);
/*
 * Fault injection (usbgw-sim's `inject`): freeze stops every reply
 * (input is read and dropped, so a close is still noticed); send
 * writes raw bytes into the ordered output now.
 */
void		 expsrv_conn_freeze(struct expsrv_conn *);
void		 expsrv_conn_send(struct expsrv_conn *, const void *, size_t);
/* Per-connection data for the owner of the server (peer class, ...). */
void		 expsrv_conn_set_data(struct expsrv_conn *, void *);
void		*expsrv_conn_data(const struct expsrv_conn *);

#endif
