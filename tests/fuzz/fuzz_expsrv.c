/*
 * libFuzzer harness for expsrv.c, the exporter's USB/IP engine: one
 * connection per input, driven through a socketpair with the input as
 * everything the client (vhci) sends, against a fake back end that
 * holds URBs and completes them later, out of order.
 *
 * Input:
 *   byte 0   bits 0-1: what cancel() does (0, 3: drop at once; 1: the
 *            completion comes later; 2: completed -ECONNRESET inside
 *            cancel()); bit 2: a held URB completes with its data, not
 *            -ECONNRESET, when it was being unlinked;
 *   then     the client's bytes (busid "1-1" imports at once, "1-2"
 *            asynchronously; devid 0x00010002; ep 1 bulk, 2 interrupt
 *            (an OUT on it pauses the connection until it completes),
 *            3 isochronous).
 *
 * Checks, besides the sanitizers: the engine's output parses as replies
 * with the codec (RET_SUBMIT/RET_UNLINK headers, data only for IN, ISO
 * descriptors), every RET_SUBMIT answers a seqnum submitted and not yet
 * answered, no RET_UNLINK names a URB whose RET_SUBMIT is still to come
 * (the URB it unlinked is not in flight any more when it is written),
 * release() once per granted import, and nothing leaks once the held
 * URBs (orphans by then) complete.
 */
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/buffer.h>

#include "proto/expsrv.h"
#include "fuzz.h"
#include "base/log.h"
#include "proto/usbip.h"

#define MAXHELD		32
#define MAXTRACK	1024
#define ITERATIONS	64

static struct event_base *base;
static struct expsrv	*srv;
static int		 dev_token;

static struct {
	int		 cancel;
	bool		 data_on_unlink;
	struct expsrv_urb *held[MAXHELD];
	int		 nheld;
	struct expsrv_conn *import_conn;	/* async import owed */
	int		 granted;
	int		 released;
	/* What the client sends, in stream order. */
	uint32_t	 sub_seq[MAXTRACK];	/* CMD_SUBMITs */
	uint8_t		 sub_dir[MAXTRACK];
	bool		 sub_answered[MAXTRACK];
	uint32_t	 nsub;
	uint32_t	 unl_seq[MAXTRACK];	/* CMD_UNLINKs */
	uint32_t	 unl_target[MAXTRACK];
	uint32_t	 unl_nsub[MAXTRACK];	/* submits before it */
	uint32_t	 nunl;
	/* Targets of unlinks that shared a seqnum with another unlink: which
	 * one a reply answered is unknown, so whether the URB it names was
	 * dropped is too (vhci never reuses a seqnum; the fuzzer does). */
	uint32_t	 taint[MAXTRACK];
	uint32_t	 ntaint;
	struct evbuffer	*rx;			/* the engine's output */
	bool		 imported;
} F;

/* ---- the fake back end ----------------------------------------------- */

static void
fake_record(struct usbip_dev *r, const char *busid)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->busid, sizeof(r->busid), "%s", busid);
	r->busnum = 1;
	r->devnum = 2;
	r->speed = USBIP_SPEED_HIGH;
	r->bNumConfigurations = 1;
}

static void
fake_list(void *arg, struct expsrv_conn *conn)
{
	struct usbip_dev r;
	struct usbip_intf i = { 8, 6, 0x50 };

	fake_record(&r, "1-1");
	expsrv_list_add(conn, &r, &i, 1);
}

static uint32_t
fake_import(void *arg, struct expsrv_conn *conn, const char *busid,
    struct usbip_dev *rec, void **dev)
{
	if (strcmp(busid, "1-1") == 0) {
		fake_record(rec, busid);
		*dev = &dev_token;
		F.granted++;
		return ST_OK;
	}
	if (strcmp(busid, "1-2") == 0) {
		F.import_conn = conn;
		return EXPSRV_IMPORT_ASYNC;
	}
	return ST_NODEV;
}

static int
fake_ep_type(void *dev, uint32_t dir, uint32_t ep)
{
	CHECK(dev == &dev_token);
	switch (ep) {
	case 1:	return 2;
	case 2:	return 3;
	case 3:	return 1;
	default: return -1;
	}
}

/* ISO: every packet fully done; IN data packed (zeros). */
static void
complete_iso(struct expsrv_urb *u)
{
	static const uint8_t zeros[4096];
	struct evbuffer *packed = NULL;
	uint32_t i, total = 0, left, n;

	if (u->dir == USBIP_DIR_IN && (packed = evbuffer_new()) == NULL)
		abort();
	for (i = 0; i < u->npackets; i++) {
		u->iso[i].actual_length = u->iso[i].length / (i % 2 + 1);
		u->iso[i].status = i % 3 == 2 ? -EXDEV : 0;
		total += u->iso[i].actual_length;
		for (left = u->iso[i].actual_length; packed != NULL && left > 0;
		    left -= n) {
			n = left < sizeof(zeros) ? left : sizeof(zeros);
			evbuffer_add(packed, zeros, n);
		}
	}
	expsrv_urb_done_iso(u, packed, total, 0);
	if (packed != NULL)
		evbuffer_free(packed);
}

static void
complete(struct expsrv_urb *u, int32_t status)
{
	static const uint8_t data[512];
	uint32_t n = u->length < sizeof(data) ? u->length : sizeof(data);

	if (u->npackets > 0)
		complete_iso(u);
	else if (u->dir == USBIP_DIR_IN && status == 0)
		expsrv_urb_done_buf(u, 0, data, n / 2);
	else
		expsrv_urb_done(u, status, status == 0 ? u->length : 0);
}

static void
fake_submit(void *dev, struct expsrv_urb *u)
{
	CHECK(dev == &dev_token);
	CHECK(u->held && u->conn != NULL);
	if (u->ep == 0 || u->ep == 3 || F.nheld >= MAXHELD) {
		complete(u, u->ep == 0 && u->setup[1] == 0x01 ? -EPIPE : 0);
		return;
	}
	F.held[F.nheld++] = u;
	if (u->ep == 2 && u->dir == USBIP_DIR_OUT)
		expsrv_conn_pause(u->conn);
}

static void
unhold(int i)
{
	F.held[i] = F.held[--F.nheld];
}

static bool
fake_cancel(void *dev, struct expsrv_urb *u)
{
	int i;

	for (i = 0; i < F.nheld; i++)
		if (F.held[i] == u)
			break;
	CHECK(i < F.nheld);
	switch (F.cancel) {
	case 1:
		return false;		/* stays held */
	case 2:
		unhold(i);
		expsrv_urb_done(u, -ECONNRESET, 0);
		return false;
	default:
		unhold(i);
		return true;
	}
}

static void
fake_release(void *dev, struct expsrv_conn *conn, const char *why)
{
	CHECK(dev == &dev_token);
	F.released++;
}

static const struct expsrv_ops fake_ops = {
	.list = fake_list,
	.import = fake_import,
	.ep_type = fake_ep_type,
	.submit = fake_submit,
	.cancel = fake_cancel,
	.release = fake_release,
};

/* Complete the held URBs (every other one, or all); resume a pause. */
static void
complete_held(bool all)
{
	struct expsrv_urb *u;
	struct expsrv_conn *conn;
	int i;

	for (i = F.nheld - 1; i >= 0; i -= all ? 1 : 2) {
		u = F.held[i];
		unhold(i);
		conn = u->conn;
		complete(u, u->unlinking && !F.data_on_unlink ? -ECONNRESET : 0);
		if (conn != NULL)
			expsrv_conn_resume(conn);
	}
}

/* ---- checking the output ----------------------------------------------- */

/* The first unanswered CMD_SUBMIT of seqnum among the first n. */
FUZZ_NOCOV static int
sub_find(uint32_t seqnum, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		if (F.sub_seq[i] == seqnum && !F.sub_answered[i])
			return (int)i;
	return -1;
}

/*
 * The client's side of the stream, parsed as the engine will, in order.
 * Parsing stops at the first PDU the engine refuses (it closes there).
 */
FUZZ_NOCOV static void
track_input(const uint8_t *p, size_t len)
{
	struct usbip_op op;
	struct usbip_urb_hdr h;
	struct usbip_urb_layout lay;
	const char *why;
	size_t off = 0;
	int r;

	r = usbip_op_decode(p, len, USBIP_FROM_CLIENT, &op, &why);
	if (r <= 0 || op.hdr.code != OP_REQ_IMPORT)
		return;
	off = (size_t)r;
	while (len - off >= USBIP_URB_HDR_LEN && F.nsub < MAXTRACK &&
	    F.nunl < MAXTRACK) {
		if (usbip_urb_hdr_decode(p + off, len - off, USBIP_FROM_CLIENT,
		    &h, &why) != USBIP_URB_HDR_LEN)
			return;
		if (h.command == USBIP_CMD_SUBMIT && h.ep > 3)
			return;
		if (usbip_urb_layout(&h, NULL, h.command == USBIP_CMD_SUBMIT &&
		    h.ep == 3 ? 1 : 0, &lay, &why) == -1)
			return;
		if (lay.total > len - off)
			return;
		if (h.command == USBIP_CMD_SUBMIT) {
			F.sub_seq[F.nsub] = h.seqnum;
			F.sub_dir[F.nsub] = (uint8_t)h.direction;
			F.sub_answered[F.nsub++] = false;
		} else {
			F.unl_seq[F.nunl] = h.seqnum;
			F.unl_target[F.nunl] = h.u.unlink.unlink_seqnum;
			F.unl_nsub[F.nunl++] = F.nsub;
		}
		off += lay.total;
	}
}

/*
 * Every reply well formed; a RET_SUBMIT only for a URB submitted and
 * not answered yet; a RET_UNLINK(0) only when every earlier submit of
 * the URB it names has had its RET_SUBMIT (never overtaking one).
 */
FUZZ_NOCOV static bool
tainted(uint32_t target)
{
	uint32_t k;

	for (k = 0; k < F.ntaint; k++)
		if (F.taint[k] == target)
			return true;
	return false;
}

FUZZ_NOCOV static void
check_unlink(const struct usbip_urb_hdr *h)
{
	uint32_t k, k2, same = 0;
	int i;

	for (k = F.nunl, k2 = 0; k2 < F.nunl; k2++)
		if (F.unl_seq[k2] == h->seqnum && same++ == 0)
			k = k2;
	if (k == F.nunl)
		return;		/* past what track_input() followed */
	if (same > 1) {
		/* Two unlinks share a seqnum: ambiguous.  Either may have
		 * dropped its target, so later checks of those are off. */
		for (k2 = 0; k2 < F.nunl && F.ntaint < MAXTRACK; k2++)
			if (F.unl_seq[k2] == h->seqnum)
				F.taint[F.ntaint++] = F.unl_target[k2];
		return;
	}
	i = sub_find(F.unl_target[k], F.unl_nsub[k]);
	if (h->u.ret_unlink.status == 0 && !tainted(F.unl_target[k]))
		CHECK(i < 0);
	else if (i >= 0)
		F.sub_answered[i] = true;	/* dropped: never answered */
	F.unl_seq[k] = F.unl_seq[--F.nunl];
	F.unl_target[k] = F.unl_target[F.nunl];
	F.unl_nsub[k] = F.unl_nsub[F.nunl];
}

FUZZ_NOCOV static void
check_output(void)
{
	struct usbip_urb_hdr h;
	struct usbip_req_info req;
	struct usbip_urb_layout lay;
	const uint8_t *p;
	const char *why;
	uint8_t hdr[USBIP_OP_HDR_LEN];
	size_t len = evbuffer_get_length(F.rx);
	int i;

	if (len < USBIP_OP_HDR_LEN)
		return;
	evbuffer_copyout(F.rx, hdr, USBIP_OP_HDR_LEN);
	if (get_be16(hdr + 2) != OP_REP_IMPORT || get_be32(hdr + 4) != ST_OK)
		return;
	CHECK(len >= USBIP_IMPORT_REP_LEN);
	evbuffer_drain(F.rx, USBIP_IMPORT_REP_LEN);
	/*
	 * The harness closes the connection after ITERATIONS turns
	 * (expsrv_closeall): output not yet written then is dropped, so
	 * the stream may end inside its last reply (a 16 MiB ISO IN, say).
	 * Every reply before that is whole.
	 */
	while ((len = evbuffer_get_length(F.rx)) > 0) {
		if (len < USBIP_URB_HDR_LEN)
			break;
		p = evbuffer_pullup(F.rx, USBIP_URB_HDR_LEN);
		CHECK(usbip_urb_hdr_decode(p, len, USBIP_FROM_SERVER, &h,
		    &why) == USBIP_URB_HDR_LEN);
		if (h.command == USBIP_RET_UNLINK) {
			check_unlink(&h);
			evbuffer_drain(F.rx, USBIP_URB_HDR_LEN);
			continue;
		}
		i = sub_find(h.seqnum, F.nsub);
		CHECK(i >= 0);
		F.sub_answered[i] = true;
		memset(&req, 0, sizeof(req));
		req.direction = F.sub_dir[i];
		req.length = USBIP_MAX_TRANSFER;
		req.npackets = (uint32_t)(h.u.ret_submit.number_of_packets > 0 ?
		    h.u.ret_submit.number_of_packets : 0);
		req.iso = req.npackets > 0;
		CHECK(usbip_urb_layout(&h, &req, -1, &lay, &why) == 0);
		if (len < lay.total)
			break;		/* the last, cut by the close */
		evbuffer_drain(F.rx, lay.total);
	}
}

/* ---- the harness ------------------------------------------------------ */

static void
drain(int fd)
{
	uint8_t buf[65536];
	ssize_t n;

	while ((n = read(fd, buf, sizeof(buf))) > 0)
		evbuffer_add(F.rx, buf, (size_t)n);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct usbip_dev rec;
	size_t off = 0;
	ssize_t n;
	int s[2], i;

	if (size < 1)
		return 0;
	if (base == NULL) {
		log_init("fuzz_expsrv", 1, LOG_LVL_ERR);
		if ((base = event_base_new()) == NULL)
			abort();
		srv = expsrv_new(base, &fake_ops, NULL, NULL);
		if ((F.rx = evbuffer_new()) == NULL)
			abort();
	}
	F.cancel = data[0] & 3;
	F.data_on_unlink = data[0] & 4;
	F.nheld = 0;
	F.import_conn = NULL;
	F.granted = F.released = 0;
	F.nsub = F.nunl = F.ntaint = 0;
	evbuffer_drain(F.rx, evbuffer_get_length(F.rx));
	data++;
	size--;
	track_input(data, size);

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, s) == -1)
		abort();
	fcntl(s[1], F_SETFL, O_NONBLOCK);
	expsrv_accept(srv, s[0], NULL, 0);
	for (i = 0; i < ITERATIONS && expsrv_nconns(srv) > 0; i++) {
		if (off < size) {
			n = write(s[1], data + off, size - off);
			if (n > 0)
				off += (size_t)n;
			if (off == size)
				shutdown(s[1], SHUT_WR);
		} else if (size == 0 && i == 0)
			shutdown(s[1], SHUT_WR);
		event_base_loop(base, EVLOOP_NONBLOCK);
		drain(s[1]);
		if (F.import_conn != NULL && i % 3 == 2) {
			fake_record(&rec, "1-2");
			F.granted++;
			expsrv_import_done(F.import_conn, ST_OK, &rec, &dev_token);
			F.import_conn = NULL;
		}
		complete_held(false);
		event_base_loop(base, EVLOOP_NONBLOCK);
		drain(s[1]);
	}
	expsrv_closeall(srv);
	drain(s[1]);
	if (F.import_conn != NULL) {		/* granted after the close */
		fake_record(&rec, "1-2");
		F.granted++;
		expsrv_import_done(F.import_conn, ST_OK, &rec, &dev_token);
	}
	complete_held(true);			/* orphans: just freed */
	event_base_loop(base, EVLOOP_NONBLOCK);	/* the reaper */
	CHECK(F.released == F.granted);
	CHECK(F.nheld == 0);
	CHECK(expsrv_nconns(srv) == 0);
	check_output();
	close(s[1]);
	return 0;
}
