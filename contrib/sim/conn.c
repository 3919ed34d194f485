/*
 * One TCP connection to the simulator, as usbipd and usbip-host treat
 * one: an op phase (OP_REQ_DEVLIST, answered then closed; OP_REQ_IMPORT,
 * failed then closed or successful and followed by) a URB phase for
 * the imported device.  Every USB/IP byte goes through the codec.
 *
 * Payloads move between evbuffers (evbuffer_remove_buffer), never
 * through a staging copy of their own; IN data of the source device is
 * a reference to a static pattern.
 *
 * A connection is torn down by conn_close() only; the struct is freed
 * later from the loop (a callback may still hold it).
 */
#include <sys/socket.h>
#include <sys/uio.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "util.h"
#include "sim.h"

/*
 * g_zero's mod63 pattern: byte i of a transfer is (i % wMaxPacketSize) %
 * 63.  One buffer per packet size; PATTERN_LEN is a multiple of each, so
 * chained references to the same buffer continue the pattern.
 */
#define PATTERN_LEN	(64 * 1024)

static const uint16_t	 pattern_maxp[] = { 64, 512, 1024 };
static uint8_t		 pattern_mod63[3][PATTERN_LEN];
static uint8_t		 pattern_zero[PATTERN_LEN];
static bool		 pattern_ready;
static unsigned		 conn_nextid = 1;
static struct sim_connq	 dead_conns = TAILQ_HEAD_INITIALIZER(dead_conns);
static struct event	*reaper;

static void	conn_process(struct sim_conn *);
static const char *inject_name(enum sim_inject);

static const char *
conn_state_name(enum sim_conn_state s)
{
	switch (s) {
	case CONN_OP:		return "op";
	case CONN_URB:		return "urb";
	case CONN_FLUSH:	return "flush";
	case CONN_DEAD:		return "dead";
	}
	return "?";
}

/* Every state change goes through here, so the debug log shows it. */
static void
conn_set_state(struct sim_conn *conn, enum sim_conn_state s)
{
	log_debug("conn %u %s: %s -> %s", conn->id, conn->peer,
	    conn_state_name(conn->state), conn_state_name(s));
	conn->state = s;
}

/* ---- the PDU log ----------------------------------------------------- */

static void
pdulog(struct sim_conn *conn, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
pdulog(struct sim_conn *conn, const char *fmt, ...)
{
	struct timespec ts;
	struct tm tm;
	char when[32];
	va_list ap;

	if (sim.pdulog == NULL)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	fprintf(sim.pdulog, "%s.%06ldZ peer=%s conn=%u ", when,
	    ts.tv_nsec / 1000, conn->peer, conn->id);
	va_start(ap, fmt);
	vfprintf(sim.pdulog, fmt, ap);
	va_end(ap);
	fputc('\n', sim.pdulog);
}

void
pdulog_flush(void)
{
	if (sim.pdulog != NULL)
		fflush(sim.pdulog);
}

static void
pdulog_urb(struct sim_conn *conn, const struct usbip_urb_hdr *h)
{
	const uint8_t *s = h->u.submit.setup;
	char extra[64] = "";

	if (h->command == USBIP_CMD_UNLINK) {
		pdulog(conn, "cmd=CMD_UNLINK seqnum=%u devid=0x%08x "
		    "unlink_seqnum=%u busid=%s", h->seqnum, h->devid,
		    h->u.unlink.unlink_seqnum, conn->dev->spec.busid);
		return;
	}
	if (h->ep == 0)
		snprintf(extra, sizeof(extra), " setup=%02x%02x%02x%02x%02x"
		    "%02x%02x%02x", s[0], s[1], s[2], s[3], s[4], s[5], s[6],
		    s[7]);
	else if (usbip_submit_is_iso(h))
		snprintf(extra, sizeof(extra), " npackets=%d",
		    h->u.submit.number_of_packets);
	pdulog(conn, "cmd=%s seqnum=%u devid=0x%08x ep=%u dir=%s len=%d%s "
	    "busid=%s", usbip_cmd_name(h->command), h->seqnum, h->devid, h->ep,
	    h->direction == USBIP_DIR_IN ? "in" : "out",
	    h->u.submit.transfer_buffer_length, extra, conn->dev->spec.busid);
}

/* ---- teardown -------------------------------------------------------- */

static void
reap_cb(int fd, short events, void *arg)
{
	struct sim_conn *conn;

	while ((conn = TAILQ_FIRST(&dead_conns)) != NULL) {
		TAILQ_REMOVE(&dead_conns, conn, entry);
		free(conn);
	}
}

void
urb_free(struct sim_urb *u)
{
	struct sim_conn *conn = u->conn;

	if (u->queued)
		TAILQ_REMOVE(&u->ep->queue, u, qentry);
	TAILQ_REMOVE(&conn->urbs, u, centry);
	conn->nurbs--;
	if (u->dir == USBIP_DIR_OUT)
		conn->pending_bytes -= u->length;
	if (u->data != NULL)
		evbuffer_free(u->data);
	free(u->iso);
	free(u);
}

void
conn_close(struct sim_conn *conn, const char *why)
{
	struct sim_urb *u;

	if (conn->state == CONN_DEAD)
		return;
	if (conn->dev != NULL)
		log_info("conn %u %s: closed (%s, device %s%s%s)", conn->id,
		    conn->peer, why, conn->exp->name,
		    conn->exp->name[0] != '\0' ? "/" : "",
		    conn->dev->spec.busid);
	else
		log_debug("conn %u %s: closed (%s)", conn->id, conn->peer, why);
	/* Pending URBs die with the connection: no reply for them. */
	while ((u = TAILQ_FIRST(&conn->urbs)) != NULL)
		urb_free(u);
	if (conn->dev != NULL) {
		dev_release(conn->dev);
		conn->dev = NULL;
	}
	if (conn->rev != NULL) {
		event_free(conn->rev);
		conn->rev = NULL;
	}
	if (conn->wev != NULL) {
		event_free(conn->wev);
		conn->wev = NULL;
	}
	if (conn->fd != -1) {
		close(conn->fd);
		conn->fd = -1;
	}
	if (conn->in != NULL) {
		evbuffer_free(conn->in);
		conn->in = NULL;
	}
	if (conn->out != NULL) {
		evbuffer_free(conn->out);
		conn->out = NULL;
	}
	if (conn->timeout != NULL) {
		event_free(conn->timeout);
		conn->timeout = NULL;
	}
	conn_set_state(conn, CONN_DEAD);
	TAILQ_REMOVE(&sim.conns, conn, entry);
	sim.nconns--;
	conn->exp->nconns--;
	TAILQ_INSERT_TAIL(&dead_conns, conn, entry);
	event_active(reaper, EV_TIMEOUT, 0);
}

void
conn_closeall(void)
{
	struct sim_conn *conn;

	while ((conn = TAILQ_FIRST(&sim.conns)) != NULL)
		conn_close(conn, "shutting down");
	reap_cb(-1, 0, NULL);
	if (reaper != NULL) {
		event_free(reaper);
		reaper = NULL;
	}
}

static void
conn_malformed(struct sim_conn *conn, const char *why)
{
	pdulog(conn, "cmd=MALFORMED why=\"%s\"", why);
	log_warnx("conn %u %s: malformed PDU: %s", conn->id, conn->peer, why);
	conn_close(conn, "malformed PDU");
}

/* ---- replies --------------------------------------------------------- */

static struct evbuffer *
conn_out(struct sim_conn *conn)
{
	return conn->out;
}

/*
 * Apply a pending fault (conn_inject()) to the reply being written.
 * Returns how many zero bytes must follow the reply's data so that the
 * stream stays in step with the actual_length it now claims.
 */
static uint32_t
inject_apply(struct sim_urb *u, struct usbip_urb_hdr *h)
{
	struct sim_conn *conn = u->conn;
	uint32_t extra = 0;

	switch (conn->inject) {
	case INJ_NONE:
		return 0;
	case INJ_SEQNUM:
		h->seqnum ^= 0x80000000u;
		break;
	case INJ_COMMAND:
		h->command = 7;
		break;
	case INJ_OVERFLOW:
		if (u->dir != USBIP_DIR_IN || u->npackets > 0)
			return 0;
		extra = u->length + 1 - (uint32_t)h->u.ret_submit.actual_length;
		h->u.ret_submit.actual_length = (int32_t)(u->length + 1);
		break;
	case INJ_ISO:
		if (u->npackets == 0)
			return 0;
		u->iso[0].actual_length = u->iso[0].length + 1;
		break;
	}
	log_info("conn %u %s: injected %s into the reply to seqnum %u",
	    conn->id, conn->peer, inject_name(conn->inject), u->seqnum);
	conn->inject = INJ_NONE;
	return extra;
}

static void
add_zeros(struct evbuffer *out, uint32_t len)
{
	uint32_t n;

	while (len > 0) {
		n = len < PATTERN_LEN ? len : PATTERN_LEN;
		evbuffer_add_reference(out, pattern_zero, n, NULL, NULL);
		len -= n;
	}
}

/* Write the RET_SUBMIT header; returns the zero bytes owed after data. */
static uint32_t
ret_submit_hdr(struct sim_urb *u, int32_t status, uint32_t actual,
    int32_t start_frame)
{
	struct usbip_urb_hdr h;
	uint8_t buf[USBIP_URB_HDR_LEN];
	uint32_t i, errors = 0, extra;

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
	extra = inject_apply(u, &h);
	usbip_urb_hdr_encode(buf, &h);
	evbuffer_add(conn_out(u->conn), buf, sizeof(buf));
	if (u->dir == USBIP_DIR_IN && u->conn->dev != NULL)
		u->conn->dev->bytes_in += actual;
	return extra;
}

static void
ret_submit_iso(struct sim_urb *u)
{
	uint8_t *buf;
	uint32_t i;

	if (u->npackets == 0)
		return;
	buf = xreallocarray(NULL, u->npackets, USBIP_ISO_DESC_LEN);
	for (i = 0; i < u->npackets; i++)
		usbip_iso_desc_encode(buf + (size_t)i * USBIP_ISO_DESC_LEN,
		    &u->iso[i]);
	evbuffer_add(conn_out(u->conn), buf,
	    (size_t)u->npackets * USBIP_ISO_DESC_LEN);
	free(buf);
}

void
urb_done(struct sim_urb *u, int32_t status, uint32_t actual)
{
	uint32_t extra;

	extra = ret_submit_hdr(u, status, u->dir == USBIP_DIR_IN ? 0 : actual,
	    0);
	add_zeros(conn_out(u->conn), extra);
	ret_submit_iso(u);
	urb_free(u);
}

void
urb_done_buf(struct sim_urb *u, int32_t status, const void *buf,
    uint32_t len)
{
	uint32_t extra;

	extra = ret_submit_hdr(u, status, len, 0);
	evbuffer_add(conn_out(u->conn), buf, len);
	add_zeros(conn_out(u->conn), extra);
	urb_free(u);
}

void
urb_done_evbuf(struct sim_urb *u, int32_t status, struct evbuffer *src,
    uint32_t len)
{
	uint32_t extra;

	extra = ret_submit_hdr(u, status, len, 0);
	evbuffer_remove_buffer(src, conn_out(u->conn), len);
	add_zeros(conn_out(u->conn), extra);
	urb_free(u);
}

void
urb_done_pattern(struct sim_urb *u, enum sim_pattern pat, uint16_t maxp,
    uint32_t len)
{
	struct evbuffer *out = conn_out(u->conn);
	const uint8_t *p = pattern_zero;
	uint32_t n, extra;
	size_t i;

	if (pat == SIM_PATTERN_MOD63) {
		for (i = 0; i < nitems(pattern_maxp); i++)
			if (pattern_maxp[i] == maxp)
				p = pattern_mod63[i];
		if (p == pattern_zero)
			fatalx("no mod63 pattern for packet size %u", maxp);
	}
	extra = ret_submit_hdr(u, 0, len, 0);
	while (len > 0) {
		n = len < PATTERN_LEN ? len : PATTERN_LEN;
		evbuffer_add_reference(out, p, n, NULL, NULL);
		len -= n;
	}
	add_zeros(out, extra);
	urb_free(u);
}

void
urb_done_iso(struct sim_urb *u, struct evbuffer *packed, uint32_t actual,
    int32_t start_frame)
{
	ret_submit_hdr(u, 0, actual, start_frame);
	if (packed != NULL)
		evbuffer_add_buffer(conn_out(u->conn), packed);
	ret_submit_iso(u);
	urb_free(u);
}

/* ---- faults, for tests of the importer's robustness --------------------- */

static const struct {
	const char	*name;
	enum sim_inject	 inject;
} injects[] = {
	{ "seqnum",	INJ_SEQNUM },
	{ "command",	INJ_COMMAND },
	{ "overflow",	INJ_OVERFLOW },
	{ "iso",	INJ_ISO },
};

static const char *
inject_name(enum sim_inject inj)
{
	size_t i;

	for (i = 0; i < nitems(injects); i++)
		if (injects[i].inject == inj)
			return injects[i].name;
	return "none";
}

/*
 * Make the imported device's connection misbehave (control `inject`):
 * the next RET_SUBMIT gets an unknown seqnum, an unknown command, an
 * actual_length one more than was asked (IN), or an ISO packet longer
 * than itself; `raw HEX` writes bytes now; `freeze` stops answering
 * (input is read and dropped, so a close is still noticed).
 */
int
conn_inject(struct sim_conn *conn, const char *what, const char *arg,
    char *err, size_t errsz)
{
	uint8_t *bytes;
	size_t i, n;
	int hi, lo;

	if (strcmp(what, "freeze") == 0) {
		conn->frozen = true;
		if (event_pending(conn->wev, EV_WRITE, NULL))
			event_del(conn->wev);
		log_info("conn %u %s: frozen", conn->id, conn->peer);
		return 0;
	}
	if (strcmp(what, "raw") == 0) {
		n = arg != NULL ? strlen(arg) : 0;
		if (n == 0 || n % 2 != 0 || n / 2 > SIM_INJECT_MAX) {
			snprintf(err, errsz, "raw: expected 1..%d bytes in hex",
			    SIM_INJECT_MAX);
			return -1;
		}
		bytes = xmalloc(n / 2);
		for (i = 0; i < n / 2; i++) {
			hi = usbgw_hexval(arg[2 * i]);
			lo = usbgw_hexval(arg[2 * i + 1]);
			if (hi < 0 || lo < 0) {
				free(bytes);
				snprintf(err, errsz, "raw: expected hex digits");
				return -1;
			}
			bytes[i] = (uint8_t)(hi << 4 | lo);
		}
		evbuffer_add(conn->out, bytes, n / 2);
		free(bytes);
		log_info("conn %u %s: injected %zu raw bytes", conn->id,
		    conn->peer, n / 2);
		conn_flush(conn);
		return 0;
	}
	for (i = 0; i < nitems(injects); i++) {
		if (strcmp(what, injects[i].name) == 0) {
			conn->inject = injects[i].inject;
			return 0;
		}
	}
	snprintf(err, errsz, "expected seqnum, command, overflow, iso, freeze "
	    "or raw HEX");
	return -1;
}

/* ---- op phase -------------------------------------------------------- */

static void
op_devlist(struct sim_conn *conn)
{
	struct evbuffer *out = conn_out(conn);
	struct sim_dev *dev;
	struct usbip_dev rec;
	const struct usbip_intf *intf;
	uint8_t hdr[USBIP_OP_HDR_LEN + 4], drec[USBIP_DEV_LEN];
	uint8_t irec[USBIP_INTF_LEN], nintf;
	uint32_t n = 0;
	int i;

	/* As current usbipd: devices in use are not exportable. */
	TAILQ_FOREACH(dev, &conn->exp->devs, entry)
		if (dev->owner == NULL)
			n++;
	evbuffer_add(out, hdr, usbip_devlist_rep_hdr_encode(hdr, n));
	TAILQ_FOREACH(dev, &conn->exp->devs, entry) {
		if (dev->owner != NULL)
			continue;
		nintf = dev_listed(dev, &rec, &intf);
		evbuffer_add(out, drec, usbip_dev_encode(drec, &rec));
		for (i = 0; i < nintf; i++)
			evbuffer_add(out, irec, usbip_intf_encode(irec,
			    &intf[i]));
	}
	log_debug("conn %u %s: device list, %u devices", conn->id, conn->peer,
	    n);
	conn_set_state(conn, CONN_FLUSH);
}

static void
op_import(struct sim_conn *conn, const char *busid)
{
	struct sim_dev *dev = dev_find(conn->exp, busid);
	struct usbip_dev rec;
	uint8_t rep[USBIP_IMPORT_REP_LEN];
	char esc[USBIP_BUSID_SIZE * 4 + 1];
	uint32_t st;

	log_escape(esc, sizeof(esc), busid, strlen(busid));
	if (dev == NULL)
		st = ST_NODEV;
	else if (dev->owner != NULL)
		st = ST_DEV_BUSY;
	else
		st = ST_OK;
	if (st != ST_OK) {
		if (sim.legacy_status)
			st = ST_NA;
		log_info("conn %u %s: import %s refused: %s", conn->id,
		    conn->peer, esc, usbip_st_name(st));
		evbuffer_add(conn_out(conn), rep,
		    usbip_import_rep_encode(rep, st, NULL));
		conn_set_state(conn, CONN_FLUSH);
		return;
	}
	dev_attach(dev, conn);
	conn->dev = dev;
	conn->devid = dev->busnum << 16 | dev->devnum;
	dev_record(dev, &rec);
	if (dev->spec.set & SPEC_IMPORT_CFG)
		rec.bConfigurationValue = dev->spec.import_config;	/* a lie */
	evbuffer_add(conn_out(conn), rep,
	    usbip_import_rep_encode(rep, ST_OK, &rec));
	event_del(conn->timeout);
	log_info("conn %u %s: imported %s%s%s (devid 0x%08x)", conn->id,
	    conn->peer, conn->exp->name, conn->exp->name[0] != '\0' ? "/" : "",
	    esc, conn->devid);
	conn_set_state(conn, CONN_URB);
}

/* Returns 1 if a PDU was handled, 0 if more bytes are needed, -1 closed. */
static int
op_step(struct sim_conn *conn, struct evbuffer *in)
{
	struct usbip_op op;
	const char *why = "?";
	char esc[USBIP_BUSID_SIZE * 4 + 1];
	size_t len = evbuffer_get_length(in);
	const uint8_t *p;
	int r;

	if (len == 0)
		return 0;
	if (len > USBIP_IMPORT_REQ_LEN)
		len = USBIP_IMPORT_REQ_LEN;
	if ((p = evbuffer_pullup(in, (ssize_t)len)) == NULL)
		fatalx("evbuffer_pullup failed");
	r = usbip_op_decode(p, len, USBIP_FROM_CLIENT, &op, &why);
	if (r == USBIP_NEED_MORE)
		return 0;
	if (r == USBIP_MALFORMED) {
		conn_malformed(conn, why);
		return -1;
	}
	evbuffer_drain(in, (size_t)r);
	if (op.hdr.code == OP_REQ_IMPORT) {
		log_escape(esc, sizeof(esc), op.busid, strlen(op.busid));
		pdulog(conn, "cmd=%s busid=%s", usbip_op_name(op.hdr.code),
		    esc);
		op_import(conn, op.busid);
	} else {
		pdulog(conn, "cmd=%s", usbip_op_name(op.hdr.code));
		op_devlist(conn);
	}
	return 1;
}

/* ---- URB phase ------------------------------------------------------- */

static void
urb_unlink(struct sim_conn *conn, const struct usbip_urb_hdr *h)
{
	struct usbip_urb_hdr r;
	struct sim_urb *u;
	uint8_t buf[USBIP_URB_HDR_LEN];

	/*
	 * As stub_rx.c: a URB still pending is given back without its
	 * RET_SUBMIT, and RET_UNLINK says -ECONNRESET; a URB not pending
	 * has been completed and its RET_SUBMIT is already queued ahead
	 * of this reply, which says 0.  RET_UNLINK carries the unlink's
	 * own seqnum.
	 */
	TAILQ_FOREACH(u, &conn->urbs, centry)
		if (u->seqnum == h->u.unlink.unlink_seqnum)
			break;
	memset(&r, 0, sizeof(r));
	r.command = USBIP_RET_UNLINK;
	r.seqnum = h->seqnum;
	if (u != NULL) {
		urb_free(u);
		r.u.ret_unlink.status = -ECONNRESET;
	}
	log_debug("conn %u: unlink %u: %s", conn->id,
	    h->u.unlink.unlink_seqnum, r.u.ret_unlink.status != 0 ?
	    "unlinked" : "not pending");
	usbip_urb_hdr_encode(buf, &r);
	evbuffer_add(conn_out(conn), buf, sizeof(buf));
}

/*
 * Check the ISO packets of a URB for an ISO endpoint as the kernel's
 * stub and host controller do: no more packets than the buffer needs at
 * the endpoint's packet size, none longer than a packet.
 */
static int
iso_fits(const struct sim_ep *ep, const struct sim_urb *u, const char **why)
{
	uint64_t need;
	uint32_t i;

	if (ep == NULL || ep->xfer != 1)
		return 0;
	need = ((uint64_t)u->length + ep->maxp - 1) / ep->maxp;
	if (u->npackets > need) {
		*why = "more ISO packets than the buffer needs";
		return -1;
	}
	for (i = 0; i < u->npackets; i++) {
		if (u->iso[i].length > ep->maxp) {
			*why = "ISO packet longer than the endpoint's maximum";
			return -1;
		}
	}
	return 0;
}

static int
urb_submit(struct sim_conn *conn, struct evbuffer *in)
{
	const struct usbip_urb_hdr *h = &conn->hdr;
	const struct usbip_urb_layout *lay = &conn->lay;
	struct sim_urb *u;
	const uint8_t *p;
	const char *why = "?";
	uint32_t i;

	if (conn->nurbs >= sim.max_urbs) {
		log_warnx("conn %u %s: more than %u URBs in flight", conn->id,
		    conn->peer, sim.max_urbs);
		conn_close(conn, "too many URBs in flight");
		return -1;
	}
	u = xcalloc(1, sizeof(*u));
	u->conn = conn;
	u->seqnum = h->seqnum;
	u->epnum = h->ep;
	u->dir = h->direction;
	u->length = (uint32_t)h->u.submit.transfer_buffer_length;
	u->flags = h->u.submit.transfer_flags;
	u->npackets = lay->niso;
	TAILQ_INSERT_TAIL(&conn->urbs, u, centry);
	conn->nurbs++;
	if (u->dir == USBIP_DIR_OUT)
		conn->pending_bytes += u->length;
	if (lay->data_len > 0) {
		if ((u->data = evbuffer_new()) == NULL)
			fatalx("out of memory");
		evbuffer_remove_buffer(in, u->data, lay->data_len);
	}
	if (lay->niso > 0) {
		if ((p = evbuffer_pullup(in, lay->iso_len)) == NULL)
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
		evbuffer_drain(in, lay->iso_len);
		if (iso_fits(dev_ep_any(conn->dev, u->dir, u->epnum), u,
		    &why) == -1) {
			conn_malformed(conn, why);
			return -1;
		}
	}
	if (conn->pending_bytes > SIM_MAX_PENDING) {
		log_warnx("conn %u %s: more than %u bytes of OUT data queued",
		    conn->id, conn->peer, SIM_MAX_PENDING);
		conn_close(conn, "too much OUT data queued");
		return -1;
	}
	dev_submit(conn->dev, u, h->u.submit.setup);
	return 1;
}

static int
urb_step(struct sim_conn *conn, struct evbuffer *in)
{
	struct usbip_urb_hdr *h = &conn->hdr;
	struct sim_ep *ep;
	const uint8_t *p;
	const char *why = "?";
	int ep_iso;

	if (!conn->have_hdr) {
		if (evbuffer_get_length(in) < USBIP_URB_HDR_LEN)
			return 0;
		if ((p = evbuffer_pullup(in, USBIP_URB_HDR_LEN)) == NULL)
			fatalx("evbuffer_pullup failed");
		if (usbip_urb_hdr_decode(p, USBIP_URB_HDR_LEN,
		    USBIP_FROM_CLIENT, h, &why) != USBIP_URB_HDR_LEN) {
			conn_malformed(conn, why);
			return -1;
		}
		pdulog_urb(conn, h);
		if (h->devid != conn->devid) {
			/* As the stub's valid_request(): not ours, drop. */
			log_warnx("conn %u %s: devid 0x%08x is not the imported "
			    "device's 0x%08x", conn->id, conn->peer, h->devid,
			    conn->devid);
			conn_close(conn, "devid mismatch");
			return -1;
		}
		ep_iso = 0;
		if (h->command == USBIP_CMD_SUBMIT && h->ep != 0) {
			ep = dev_ep_any(conn->dev, h->direction, h->ep);
			ep_iso = ep == NULL ? -1 : ep->xfer == 1;
		}
		if (usbip_urb_layout(h, NULL, ep_iso, &conn->lay, &why) == -1) {
			conn_malformed(conn, why);
			return -1;
		}
		conn->have_hdr = true;
	}
	if (evbuffer_get_length(in) < conn->lay.total)
		return 0;
	conn->have_hdr = false;
	evbuffer_drain(in, USBIP_URB_HDR_LEN);
	if (h->command == USBIP_CMD_UNLINK) {
		urb_unlink(conn, h);
		return 1;
	}
	return urb_submit(conn, in);
}

/* ---- events ---------------------------------------------------------- */

/*
 * The socket is driven directly rather than through a bufferevent:
 * libevent 2.1's evbuffer_read() reads at most 4096 bytes per call
 * (EVBUFFER_MAX_READ), one event loop turn per 4 KiB, whatever
 * bufferevent_set_max_single_read() says.  Here one readv() fills up to
 * SIM_READ_CHUNK bytes of reserved evbuffer space.
 */

/* Returns bytes read, 0 at EOF, -1 with errno (EAGAIN: nothing yet). */
static ssize_t
conn_fill(struct sim_conn *conn)
{
	struct evbuffer_iovec vec[2];
	struct iovec iov[2];
	size_t room, len = evbuffer_get_length(conn->in);
	ssize_t n;
	int nvec, i;

	room = len < SIM_IN_HIWAT ? SIM_IN_HIWAT - len : 0;
	if (room > SIM_READ_CHUNK)
		room = SIM_READ_CHUNK;
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
		int saved = errno;

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
	return n;
}

static void
conn_pause(struct sim_conn *conn)
{
	conn->read_paused = true;
	event_del(conn->rev);
}

static void
conn_process(struct sim_conn *conn)
{
	int r;

	while (!conn->read_paused) {
		switch (conn->state) {
		case CONN_OP:
			r = op_step(conn, conn->in);
			break;
		case CONN_URB:
			r = urb_step(conn, conn->in);
			break;
		case CONN_FLUSH:
			/* The reply is all there is; ignore the rest. */
			evbuffer_drain(conn->in, evbuffer_get_length(conn->in));
			return;
		default:
			return;
		}
		if (r <= 0)
			return;
		if (evbuffer_get_length(conn->out) > SIM_OUT_HIWAT)
			conn_pause(conn);
	}
}

/*
 * Write what can be written now; wait for writability for the rest.
 * Resumes reading once the output is down to SIM_OUT_LOWAT, and closes
 * a connection in CONN_FLUSH once its reply is out.
 */
void
conn_flush(struct sim_conn *conn)
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
		conn_close(conn, why);
		return;
	}
	if (evbuffer_get_length(conn->out) > 0) {
		if (!event_pending(conn->wev, EV_WRITE, NULL))
			event_add(conn->wev, NULL);
	} else if (event_pending(conn->wev, EV_WRITE, NULL))
		event_del(conn->wev);
	if (conn->state == CONN_FLUSH && evbuffer_get_length(conn->out) == 0) {
		conn_close(conn, "reply sent");
		return;
	}
	if (conn->read_paused &&
	    evbuffer_get_length(conn->out) <= SIM_OUT_LOWAT) {
		conn->read_paused = false;
		event_add(conn->rev, NULL);
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
	struct sim_conn *conn = arg;
	char why[128];
	ssize_t n;

	n = conn_fill(conn);
	if (n == 0) {
		conn_close(conn, "peer closed");
		return;
	}
	if (n == -1 && errno != EAGAIN && errno != EWOULDBLOCK) {
		snprintf(why, sizeof(why), "read: %s", strerror(errno));
		conn_close(conn, why);
		return;
	}
	if (conn->frozen) {
		/* Frozen: requests are swallowed unanswered. */
		evbuffer_drain(conn->in, evbuffer_get_length(conn->in));
		return;
	}
	conn_process(conn);
	pdulog_flush();
	conn_flush(conn);
}

static void
conn_write_cb(int fd, short events, void *arg)
{
	conn_flush(arg);
	pdulog_flush();
}

static void
conn_timeout_cb(int fd, short events, void *arg)
{
	struct sim_conn *conn = arg;

	log_warnx("conn %u %s: no request within %d s", conn->id, conn->peer,
	    SIM_OP_TIMEOUT);
	conn_close(conn, "op phase timeout");
}

static void
pattern_init(void)
{
	size_t i, k;

	for (k = 0; k < nitems(pattern_maxp); k++)
		for (i = 0; i < PATTERN_LEN; i++)
			pattern_mod63[k][i] = (uint8_t)((i % pattern_maxp[k]) %
			    63);
	pattern_ready = true;
}

void
conn_accept(struct sim_exp *exp, int fd, const struct sockaddr *sa,
    int socklen)
{
	struct sim_conn *conn;
	char host[NI_MAXHOST], serv[NI_MAXSERV];
	struct timeval tv = { SIM_OP_TIMEOUT, 0 };
	int one = 1;

	if (!pattern_ready)
		pattern_init();
	if (reaper == NULL &&
	    (reaper = event_new(sim.base, -1, 0, reap_cb, NULL)) == NULL)
		fatalx("event_new failed");
	if (getnameinfo(sa, (socklen_t)socklen, host, sizeof(host), serv,
	    sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
		usbgw_strlcpy(host, "?", sizeof(host));
		usbgw_strlcpy(serv, "?", sizeof(serv));
	}
	/* max-connections holds per exporter, as for one usbipd each. */
	if (exp->nconns >= sim.max_conns) {
		log_warnx("%s:%s: refused, already %u connections%s%s", host,
		    serv, exp->nconns, exp->name[0] != '\0' ? " to " : "",
		    exp->name);
		close(fd);
		return;
	}
	if (fd_nonblock_cloexec(fd) == -1)
		log_warn("fcntl");
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == -1)
		log_warn("setsockopt TCP_NODELAY");
	conn = xcalloc(1, sizeof(*conn));
	conn->exp = exp;
	conn->id = conn_nextid++;
	conn->state = CONN_OP;
	TAILQ_INIT(&conn->urbs);
	snprintf(conn->peer, sizeof(conn->peer), sa->sa_family == AF_INET6 ?
	    "[%s]:%s" : "%s:%s", host, serv);
	conn->fd = fd;
	conn->in = evbuffer_new();
	conn->out = evbuffer_new();
	conn->rev = event_new(sim.base, fd, EV_READ | EV_PERSIST, conn_read_cb,
	    conn);
	conn->wev = event_new(sim.base, fd, EV_WRITE | EV_PERSIST,
	    conn_write_cb, conn);
	conn->timeout = evtimer_new(sim.base, conn_timeout_cb, conn);
	if (conn->in == NULL || conn->out == NULL || conn->rev == NULL ||
	    conn->wev == NULL || conn->timeout == NULL)
		fatalx("out of memory");
	event_add(conn->rev, NULL);
	evtimer_add(conn->timeout, &tv);
	TAILQ_INSERT_TAIL(&sim.conns, conn, entry);
	sim.nconns++;
	exp->nconns++;
	log_debug("conn %u %s: accepted", conn->id, conn->peer);
}
