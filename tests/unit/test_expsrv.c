/*
 * expsrv.c, the exporter's USB/IP engine, against a fake back end over a
 * socketpair, the test playing vhci with the codec: the op phase
 * (DEVLIST, import granted, refused, asynchronous, and the op timeout
 * racing an asynchronous grant), every row of the unlink table in its
 * interleavings, a URB outliving its connection, devid mismatch and
 * malformed PDUs, the max_urbs bound, backpressure (reading stops above
 * out_hiwat and resumes), pause/resume, expsrv_conn_close()'s flush,
 * IN data lent to the output (expsrv_urb_done_ref) and completions
 * written without a loop turn (expsrv_run_kicks).
 */
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/buffer.h>

#include "proto/expsrv.h"
#include "base/log.h"
#include "tap.h"
#include "proto/usbip.h"
#include "base/util.h"

#define DEVID		(1u << 16 | 2)	/* busnum 1, devnum 2 */
#define MAXHELD		64
#define ECONNRESET_	(-ECONNRESET)

enum cancel_mode {
	CANCEL_DROP,		/* true: dropped at once */
	CANCEL_LATER,		/* false: completion comes later */
	CANCEL_SYNC,		/* false, completed -ECONNRESET inside */
};

static struct {
	struct event_base *base;
	enum cancel_mode cancel;
	struct expsrv_urb *held[MAXHELD];
	int		 nheld;
	int		 nsubmit;
	int		 nreleased;
	struct expsrv_conn *released_conn;
	struct expsrv_conn *import_conn;	/* async import waiting */
	struct expsrv_conn *conn;		/* the last accepted */
	int		 pause_ep;		/* submit on it pauses */
	int		 dev;			/* the device (its address) */
} F;

/* ---- the fake back end ----------------------------------------------- */

static void
fake_record(struct usbip_dev *r, const char *busid)
{
	memset(r, 0, sizeof(*r));
	usbgw_strlcpy(r->busid, busid, sizeof(r->busid));
	snprintf(r->path, sizeof(r->path), "/fake/%s", busid);
	r->busnum = 1;
	r->devnum = 2;
	r->speed = USBIP_SPEED_HIGH;
	r->idVendor = 0x1209;
	r->idProduct = 0x0001;
	r->bNumConfigurations = 1;
	r->bConfigurationValue = 1;
}

static void
fake_list(void *arg, struct expsrv_conn *conn)
{
	struct usbip_dev r;
	struct usbip_intf i[2] = { { 8, 6, 0x50 }, { 3, 1, 1 } };

	fake_record(&r, "1-1");
	expsrv_list_add(conn, &r, i, 2);
	fake_record(&r, "1-2");
	expsrv_list_add(conn, &r, i + 1, 1);
}

static uint32_t
fake_import(void *arg, struct expsrv_conn *conn, const char *busid,
    struct usbip_dev *rec, void **dev)
{
	if (strcmp(busid, "1-1") == 0) {
		fake_record(rec, busid);
		*dev = &F.dev;
		return ST_OK;
	}
	if (strcmp(busid, "1-2") == 0) {
		F.import_conn = conn;
		return EXPSRV_IMPORT_ASYNC;
	}
	return ST_NODEV;
}

/* ep 1: bulk, ep 2: interrupt; the rest: none. */
static int
fake_ep_type(void *dev, uint32_t dir, uint32_t ep)
{
	return ep == 1 ? 2 : ep == 2 ? 3 : -1;
}

static void
hold(struct expsrv_urb *u)
{
	if (F.nheld < MAXHELD)
		F.held[F.nheld++] = u;
}

static void
unhold(struct expsrv_urb *u)
{
	int i;

	for (i = 0; i < F.nheld; i++)
		if (F.held[i] == u) {
			F.held[i] = F.held[--F.nheld];
			return;
		}
}

static struct expsrv_urb *
held_seq(uint32_t seqnum)
{
	int i;

	for (i = 0; i < F.nheld; i++)
		if (F.held[i]->seqnum == seqnum)
			return F.held[i];
	return NULL;
}

/* ep 0 completes at once (IN: length bytes of 0xa5); the rest is held. */
static void
fake_submit(void *dev, struct expsrv_urb *u)
{
	static uint8_t buf[65536];

	F.nsubmit++;
	if (u->ep == 0) {
		if (u->dir == USBIP_DIR_IN) {
			memset(buf, 0xa5, sizeof(buf));
			expsrv_urb_done_buf(u, 0, buf, u->length < sizeof(buf) ?
			    u->length : sizeof(buf));
		} else
			expsrv_urb_done(u, 0, u->length);
		return;
	}
	hold(u);
	if ((int)u->ep == F.pause_ep)
		expsrv_conn_pause(u->conn);
}

static bool
fake_cancel(void *dev, struct expsrv_urb *u)
{
	unhold(u);
	switch (F.cancel) {
	case CANCEL_DROP:
		return true;
	case CANCEL_LATER:
		hold(u);
		return false;
	case CANCEL_SYNC:
		expsrv_urb_done(u, ECONNRESET_, 0);
		return false;
	}
	return true;
}

static void
fake_release(void *dev, struct expsrv_conn *conn, const char *why)
{
	F.nreleased++;
	F.released_conn = conn;
}

static const struct expsrv_ops fake_ops = {
	.list = fake_list,
	.import = fake_import,
	.ep_type = fake_ep_type,
	.submit = fake_submit,
	.cancel = fake_cancel,
	.release = fake_release,
};

/* The extension hook: takes op code 0x8067 (fd and bytes), not 0x8068. */
static struct {
	int		 calls;
	uint16_t	 code;
	int		 fd;
	uint8_t		 bytes[64];
	size_t		 nbytes;
	char		 peer[64];
	unsigned	 nconns;	/* expsrv_nconns() inside the hook */
	struct expsrv	*srv;
} X = { .fd = -1 };

static bool
fake_extension(void *arg, struct expsrv_conn *conn, uint16_t code, int fd,
    struct evbuffer *in)
{
	X.calls++;
	X.code = code;
	usbgw_strlcpy(X.peer, expsrv_conn_peer(conn), sizeof(X.peer));
	X.nconns = expsrv_nconns(X.srv);
	if (code != 0x8067)
		return false;
	X.fd = fd;
	X.nbytes = evbuffer_remove(in, X.bytes, sizeof(X.bytes));
	return true;
}

static const struct expsrv_ops ext_ops = {
	.list = fake_list,
	.import = fake_import,
	.ep_type = fake_ep_type,
	.submit = fake_submit,
	.cancel = fake_cancel,
	.release = fake_release,
	.extension = fake_extension,
};

/* ---- the test's side: vhci ------------------------------------------- */

static int
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int)(ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

/* Run the loop for ms milliseconds. */
static void
spin(int ms)
{
	int end = now_ms() + ms;

	do {
		event_base_loop(F.base, EVLOOP_NONBLOCK);
		usleep(500);
	} while (now_ms() < end);
	event_base_loop(F.base, EVLOOP_NONBLOCK);
}

static struct expsrv_conn *
connect_to(struct expsrv *srv, int *cfd)
{
	int s[2];

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, s) == -1)
		fatal("socketpair");
	fcntl(s[1], F_SETFL, O_NONBLOCK);
	*cfd = s[1];
	F.conn = expsrv_accept(srv, s[0], NULL, 0);
	return F.conn;
}

static void
put(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	ssize_t n;
	int end = now_ms() + 3000;

	while (len > 0 && now_ms() < end) {
		n = write(fd, p, len);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
		} else
			event_base_loop(F.base, EVLOOP_NONBLOCK);
	}
	spin(2);
}

/* Read exactly len bytes, running the loop; -1 at EOF, -2 on timeout. */
static int
get(int fd, void *buf, size_t len, int ms)
{
	uint8_t *p = buf;
	size_t got = 0;
	ssize_t n;
	int end = now_ms() + ms;

	while (got < len) {
		n = read(fd, p + got, len - got);
		if (n > 0) {
			got += (size_t)n;
			continue;
		}
		if (n == 0)
			return -1;
		if (now_ms() > end)
			return -2;
		event_base_loop(F.base, EVLOOP_NONBLOCK);
		usleep(200);
	}
	return 0;
}

/* Nothing more arrives within ms. */
static bool
quiet(int fd, int ms)
{
	struct pollfd pfd = { fd, POLLIN, 0 };

	spin(ms);
	return poll(&pfd, 1, 0) == 0;
}

/* The peer closed (EOF) within ms, whatever came before. */
static bool
closed(int fd, int ms)
{
	uint8_t buf[4096];
	ssize_t n;
	int end = now_ms() + ms;

	while (now_ms() < end) {
		n = read(fd, buf, sizeof(buf));
		if (n == 0)
			return true;
		if (n < 0 && errno != EAGAIN)
			return true;
		if (n < 0) {
			event_base_loop(F.base, EVLOOP_NONBLOCK);
			usleep(200);
		}
	}
	return false;
}

static void
send_op(int fd, uint16_t code, const char *busid)
{
	uint8_t b[USBIP_IMPORT_REQ_LEN];

	if (code == OP_REQ_IMPORT)
		put(fd, b, usbip_import_req_encode(b, busid));
	else
		put(fd, b, usbip_op_hdr_encode(b, code, 0));
}

/* Import busid; returns the reply's status, -1 if closed, -2 if none. */
static int
import(int fd, const char *busid)
{
	uint8_t b[USBIP_IMPORT_REP_LEN];
	int r;

	send_op(fd, OP_REQ_IMPORT, busid);
	if ((r = get(fd, b, USBIP_OP_HDR_LEN, 2000)) < 0)
		return r;
	if (get_be32(b + 4) == ST_OK && get(fd, b + 8, USBIP_DEV_LEN, 2000) < 0)
		return -1;
	return (int)get_be32(b + 4);
}

static void
submit(int fd, uint32_t seqnum, uint32_t devid, uint32_t dir, uint32_t ep,
    uint32_t len)
{
	struct usbip_urb_hdr h;
	uint8_t b[USBIP_URB_HDR_LEN];
	uint8_t *data = NULL;

	memset(&h, 0, sizeof(h));
	h.command = USBIP_CMD_SUBMIT;
	h.seqnum = seqnum;
	h.devid = devid;
	h.direction = dir;
	h.ep = ep;
	h.u.submit.transfer_buffer_length = (int32_t)len;
	if (ep == 0)
		usbip_setup_encode(h.u.submit.setup, dir == USBIP_DIR_IN ?
		    0x80 : 0, 6, 0x100, 0, (uint16_t)len);
	usbip_urb_hdr_encode(b, &h);
	put(fd, b, sizeof(b));
	if (dir == USBIP_DIR_OUT && len > 0) {
		data = xcalloc(1, len);
		put(fd, data, len);
		free(data);
	}
}

static void
unlink_(int fd, uint32_t seqnum, uint32_t target)
{
	struct usbip_urb_hdr h;
	uint8_t b[USBIP_URB_HDR_LEN];

	memset(&h, 0, sizeof(h));
	h.command = USBIP_CMD_UNLINK;
	h.seqnum = seqnum;
	h.devid = DEVID;
	h.u.unlink.unlink_seqnum = target;
	usbip_urb_hdr_encode(b, &h);
	put(fd, b, sizeof(b));
}

/* Read one reply: "S<seq>:<status>:<actual>" or "U<seq>:<status>". */
static const char *
reply(int fd, uint32_t in_len)
{
	static char out[64];
	struct usbip_urb_hdr h;
	uint8_t b[USBIP_URB_HDR_LEN], *data;
	const char *why;
	int r;

	if ((r = get(fd, b, sizeof(b), 2000)) < 0)
		return r == -1 ? "EOF" : "timeout";
	if (usbip_urb_hdr_decode(b, sizeof(b), USBIP_FROM_SERVER, &h,
	    &why) != USBIP_URB_HDR_LEN)
		return "malformed";
	if (h.command == USBIP_RET_UNLINK) {
		snprintf(out, sizeof(out), "U%u:%d", h.seqnum,
		    h.u.ret_unlink.status);
		return out;
	}
	if (in_len > 0 && h.u.ret_submit.actual_length > 0) {
		data = xmalloc((size_t)h.u.ret_submit.actual_length);
		r = get(fd, data, (size_t)h.u.ret_submit.actual_length, 2000);
		free(data);
		if (r < 0)
			return "short";
	}
	snprintf(out, sizeof(out), "S%u:%d:%d", h.seqnum,
	    h.u.ret_submit.status, h.u.ret_submit.actual_length);
	return out;
}

static void
reset_fake(void)
{
	F.cancel = CANCEL_DROP;
	F.nheld = 0;
	F.nsubmit = 0;
	F.nreleased = 0;
	F.released_conn = NULL;
	F.import_conn = NULL;
	F.pause_ep = -1;
}

/* ---- tests ----------------------------------------------------------- */

static void
test_devlist(struct expsrv *srv)
{
	uint8_t b[USBIP_MAX_DEVLIST_REP];
	struct usbip_op op;
	struct usbip_dev d;
	struct usbip_intf intf[USBIP_MAX_INTERFACES];
	const char *why;
	size_t off = 0, len = USBIP_OP_HDR_LEN + 4 + 2 * USBIP_DEV_LEN +
	    3 * USBIP_INTF_LEN;
	int fd, n = 0;

	connect_to(srv, &fd);
	send_op(fd, OP_REQ_DEVLIST, NULL);
	is_int(get(fd, b, len, 2000), 0, "devlist: the whole reply arrives");
	ok(usbip_op_decode(b, len, USBIP_FROM_SERVER, &op, &why) ==
	    (int)len, "devlist: the codec accepts it");
	is_int(op.ndev, 2, "devlist: two devices");
	while (usbip_devlist_next(b, len, &off, &d, intf) == 1)
		n++;
	is_int(n, 2, "devlist: two records with their interfaces");
	ok(closed(fd, 1000), "devlist: closed after the reply");
	close(fd);
	is_int(expsrv_nconns(srv), 0, "devlist: connection gone");
}

static void
test_import_refused(struct expsrv *srv)
{
	int fd;

	reset_fake();
	connect_to(srv, &fd);
	is_int(import(fd, "9-9"), ST_NODEV, "import refused: ST_NODEV");
	ok(closed(fd, 1000), "import refused: closed after the 8 bytes");
	is_int(F.nreleased, 0, "import refused: nothing to release");
	close(fd);
}

static void
test_unlink_table(struct expsrv *srv)
{
	struct expsrv_urb *u;
	int fd;

	reset_fake();
	connect_to(srv, &fd);
	is_int(import(fd, "1-1"), ST_OK, "import 1-1: ST_OK");
	submit(fd, 1, DEVID, USBIP_DIR_IN, 0, 18);
	is_str(reply(fd, 18), "S1:0:18", "control IN: RET_SUBMIT with 18 bytes");

	/* p not in the table. */
	unlink_(fd, 10, 99);
	is_str(reply(fd, 0), "U10:0", "unlink of a URB not in flight: RET_UNLINK 0");

	/* p dropped at cancel. */
	F.cancel = CANCEL_DROP;
	submit(fd, 2, DEVID, USBIP_DIR_IN, 1, 512);
	ok(held_seq(2) != NULL, "bulk IN held by the back end");
	unlink_(fd, 11, 2);
	is_str(reply(fd, 0), "U11:-104", "dropped at cancel: RET_UNLINK -ECONNRESET");
	ok(quiet(fd, 30), "dropped at cancel: and no RET_SUBMIT");

	/* p completes cancelled, later. */
	F.cancel = CANCEL_LATER;
	submit(fd, 3, DEVID, USBIP_DIR_IN, 1, 512);
	unlink_(fd, 12, 3);
	ok(quiet(fd, 30), "cancel pending: nothing answered yet");
	u = held_seq(3);
	ok(u != NULL && u->unlinking && u->unlink_seqnum == 12,
	    "cancel pending: the URB is marked with the waiting unlink");
	unhold(u);
	expsrv_urb_done(u, ECONNRESET_, 0);
	is_str(reply(fd, 0), "U12:-104", "completes cancelled: RET_UNLINK -ECONNRESET");
	ok(quiet(fd, 30), "completes cancelled: alone, no RET_SUBMIT");

	/* p completes with data after the unlink came. */
	submit(fd, 4, DEVID, USBIP_DIR_IN, 1, 512);
	unlink_(fd, 13, 4);
	ok(quiet(fd, 30), "completion pending: nothing yet");
	u = held_seq(4);
	unhold(u);
	expsrv_urb_done_buf(u, 0, "abcd", 4);
	is_str(reply(fd, 4), "S4:0:4", "completes with data: RET_SUBMIT first, with its data");
	is_str(reply(fd, 0), "U13:0", "completes with data: then RET_UNLINK 0");

	/* p completed (cancelled) from inside cancel(). */
	F.cancel = CANCEL_SYNC;
	submit(fd, 5, DEVID, USBIP_DIR_IN, 1, 512);
	unlink_(fd, 14, 5);
	is_str(reply(fd, 0), "U14:-104", "completed inside cancel(): RET_UNLINK -ECONNRESET");
	ok(quiet(fd, 30), "completed inside cancel(): nothing else");

	/* An unlink naming an unlink. */
	F.cancel = CANCEL_LATER;
	submit(fd, 6, DEVID, USBIP_DIR_IN, 1, 512);
	unlink_(fd, 15, 6);
	unlink_(fd, 16, 15);
	is_str(reply(fd, 0), "U16:0", "unlink of an unlink: not a URB, RET_UNLINK 0");
	u = held_seq(6);
	unhold(u);
	expsrv_urb_done(u, ECONNRESET_, 0);
	is_str(reply(fd, 0), "U15:-104", "... and the first unlink is answered when its URB is");

	/* Out of order completions keep their own order. */
	submit(fd, 7, DEVID, USBIP_DIR_IN, 2, 8);
	submit(fd, 8, DEVID, USBIP_DIR_IN, 2, 8);
	u = held_seq(8);
	unhold(u);
	expsrv_urb_done_buf(u, 0, "12345678", 8);
	is_str(reply(fd, 8), "S8:0:8", "completion order is the device's");
	u = held_seq(7);
	unhold(u);
	expsrv_urb_done(u, -EPIPE, 0);
	is_str(reply(fd, 8), "S7:-32:0", "a stall carries its status");

	/* A second unlink of a URB already being unlinked. */
	submit(fd, 9, DEVID, USBIP_DIR_IN, 1, 512);
	unlink_(fd, 17, 9);
	u = held_seq(9);
	unlink_(fd, 18, 9);
	ok(closed(fd, 1000), "second unlink of one URB: connection closed");
	is_int(F.nreleased, 1, "second unlink: release() once");
	ok(u->conn == NULL, "the URB still held outlives its connection");
	unhold(u);
	expsrv_urb_done_buf(u, 0, "late", 4);	/* freed, no reply */
	spin(5);
	close(fd);
}

static void
test_orphan(struct expsrv *srv)
{
	struct expsrv_urb *u, *v;
	int fd;

	reset_fake();
	F.cancel = CANCEL_LATER;
	connect_to(srv, &fd);
	is_int(import(fd, "1-1"), ST_OK, "orphan: import");
	submit(fd, 1, DEVID, USBIP_DIR_IN, 1, 512);
	submit(fd, 2, DEVID, USBIP_DIR_OUT, 1, 100);
	u = held_seq(1);
	v = held_seq(2);
	ok(u != NULL && v != NULL, "orphan: two URBs held");
	close(fd);
	spin(20);
	is_int(expsrv_nconns(srv), 0, "orphan: the connection closed");
	is_int(F.nreleased, 1, "orphan: release() once");
	ok(u->conn == NULL && v->conn == NULL, "orphan: URBs kept, conn NULL");
	spin(5);			/* the connection is freed now */
	unhold(u);
	unhold(v);
	expsrv_urb_done_buf(u, 0, "data", 4);
	expsrv_urb_done(v, ECONNRESET_, 0);
	ok(1, "orphan: completions after the close just free (ASan)");
}

static int	lent_back;
static const void *lent_buf;

static void
lent_cleanup(const void *data, size_t len, void *arg)
{
	if (data == lent_buf && len == 8192 && arg == &lent_back)
		lent_back++;
	else
		lent_back = -100;
}

static void
test_lent_and_kicks(struct expsrv *srv)
{
	static uint8_t big[8192];
	struct pollfd pfd;
	struct expsrv_urb *u;
	uint8_t b[USBIP_URB_HDR_LEN + sizeof(big)];
	int fd;

	reset_fake();
	F.cancel = CANCEL_LATER;
	memset(big, 0x5a, sizeof(big));
	lent_buf = big;
	lent_back = 0;
	connect_to(srv, &fd);
	is_int(import(fd, "1-1"), ST_OK, "lent: import");
	expsrv_run_kicks(srv);
	ok(1, "run_kicks with nothing kicked: nothing happens");

	/* Written by expsrv_run_kicks(), without a loop turn. */
	submit(fd, 1, DEVID, USBIP_DIR_IN, 1, sizeof(big));
	u = held_seq(1);
	unhold(u);
	expsrv_urb_done_ref(u, 0, big, sizeof(big), lent_cleanup, &lent_back);
	is_int(lent_back, 0, "lent: the buffer is held until written");
	expsrv_run_kicks(srv);
	is_int(lent_back, 1, "run_kicks: written at once, the buffer given back");
	pfd.fd = fd;
	pfd.events = POLLIN;
	ok(poll(&pfd, 1, 0) == 1, "run_kicks: the reply is there without a loop turn");
	is_int((int)read(fd, b, sizeof(b)), (int)sizeof(b),
	    "run_kicks: RET_SUBMIT and its 8192 bytes in one piece");
	ok(b[USBIP_URB_HDR_LEN] == 0x5a && b[sizeof(b) - 1] == 0x5a,
	    "lent: the data is the buffer's");

	/* Unlinked and cancelled: no reply, the buffer back at once. */
	submit(fd, 2, DEVID, USBIP_DIR_IN, 1, sizeof(big));
	unlink_(fd, 10, 2);
	u = held_seq(2);
	unhold(u);
	expsrv_urb_done_ref(u, ECONNRESET_, big, sizeof(big), lent_cleanup,
	    &lent_back);
	is_int(lent_back, 2, "lent, unlinked: given back at once");
	is_str(reply(fd, 0), "U10:-104", "lent, unlinked: RET_UNLINK -ECONNRESET alone");

	/* Held in the output when the connection closes: given back. */
	submit(fd, 3, DEVID, USBIP_DIR_IN, 1, sizeof(big));
	u = held_seq(3);
	close(fd);
	unhold(u);
	expsrv_urb_done_ref(u, 0, big, sizeof(big), lent_cleanup, &lent_back);
	spin(20);
	is_int(lent_back, 3, "lent, connection gone: given back");
	is_int(expsrv_nconns(srv), 0, "lent: the connection closed");
}

static void
test_devid_malformed(struct expsrv *srv)
{
	uint8_t bad[USBIP_URB_HDR_LEN];
	int fd;

	reset_fake();
	connect_to(srv, &fd);
	is_int(import(fd, "1-1"), ST_OK, "devid: import");
	submit(fd, 1, DEVID + 1, USBIP_DIR_IN, 0, 18);
	ok(closed(fd, 1000), "devid mismatch: closed, unanswered");
	is_int(F.nreleased, 1, "devid mismatch: release() once");
	close(fd);

	reset_fake();
	connect_to(srv, &fd);
	put(fd, "\x01\x10\x80\x05\0\0\0\0", 8);
	ok(closed(fd, 1000), "op phase: a wrong version closes");
	close(fd);

	reset_fake();
	connect_to(srv, &fd);
	is_int(import(fd, "1-1"), ST_OK, "malformed: import");
	memset(bad, 0, sizeof(bad));
	put_be32(bad, 7);			/* no such command */
	put_be32(bad + 8, DEVID);
	put(fd, bad, sizeof(bad));
	ok(closed(fd, 1000), "URB phase: an unknown command closes");
	is_int(F.nreleased, 1, "malformed: release() once");
	close(fd);

	reset_fake();
	connect_to(srv, &fd);
	is_int(import(fd, "1-1"), ST_OK, "ep: import");
	submit(fd, 1, DEVID, USBIP_DIR_IN, 5, 8);
	ok(closed(fd, 1000), "an endpoint the back end lacks (ep_type -1) closes");
	close(fd);

	reset_fake();
	connect_to(srv, &fd);
	is_int(import(fd, "1-1"), ST_OK, "dup: import");
	submit(fd, 1, DEVID, USBIP_DIR_IN, 1, 8);
	submit(fd, 1, DEVID, USBIP_DIR_IN, 1, 8);
	ok(closed(fd, 1000), "a seqnum already in flight closes");
	is_int(F.nheld, 0, "dup: the held URB was cancelled");
	close(fd);
}

/*
 * The extension hook: an unknown op code is offered to it with the bytes
 * read; taken, the socket is the hook's (open, not closed by the engine,
 * no reply), the engine counts the connection no more; declined, or
 * without the hook, the op is malformed and closes.  Known ops never
 * reach it.
 */
static void
test_extension(struct expsrv *srv, struct expsrv *ext)
{
	static const uint8_t hello[20] = { 0x01, 0x11, 0x80, 0x67, 0, 0, 0, 0,
	    0, 1, 0, 1, 0, 0, 0, 4, 'a', 'b', 'c', 'd' };
	uint8_t b[8];
	int fd;

	reset_fake();
	connect_to(srv, &fd);
	put(fd, hello, sizeof(hello));
	ok(closed(fd, 1000), "extension: without the hook 0x8067 closes");
	close(fd);

	X.srv = ext;
	connect_to(ext, &fd);
	put(fd, hello, 3);
	is_int(X.calls, 0, "extension: not offered before 4 bytes");
	put(fd, hello + 3, sizeof(hello) - 3);
	is_int(X.calls, 1, "extension: offered once the op code is in");
	is_int(X.code, 0x8067, "extension: with its op code");
	is_int((int)X.nbytes, (int)sizeof(hello),
	    "extension: every byte read handed over");
	ok(memcmp(X.bytes, hello, sizeof(hello)) == 0,
	    "extension: from the op header on");
	is_int(X.nconns, 1, "extension: the engine still counts it in the hook");
	is_str(X.peer, "local", "extension: its peer readable in the hook");
	is_int(expsrv_nconns(ext), 0, "extension: taken, the engine forgets it");
	spin(20);
	ok(X.fd >= 0 && fcntl(X.fd, F_GETFD) != -1,
	    "extension: the socket is not closed by the engine");
	ok(quiet(fd, 50), "extension: no reply from the engine");
	ok(X.fd >= 0 && write(X.fd, "OK", 2) == 2 && get(fd, b, 2, 1000) == 0 &&
	    memcmp(b, "OK", 2) == 0, "extension: the hook's socket works");
	if (X.fd >= 0)
		close(X.fd);
	ok(closed(fd, 1000), "extension: closed by the hook, not before");
	close(fd);

	X.calls = 0;
	connect_to(ext, &fd);
	put(fd, "\x01\x11\x80\x68\0\0\0\0", 8);
	is_int(X.calls, 1, "extension: 0x8068 offered");
	ok(closed(fd, 1000), "extension: declined, the op is malformed");
	close(fd);
	is_int(expsrv_nconns(ext), 0, "extension: declined: connection gone");

	X.calls = 0;
	connect_to(ext, &fd);
	send_op(fd, OP_REQ_DEVLIST, NULL);
	ok(get(fd, b, 8, 2000) == 0 && get_be16(b + 2) == OP_REP_DEVLIST,
	    "extension: DEVLIST still answered by the engine");
	is_int(X.calls, 0, "extension: known ops never offered");
	ok(closed(fd, 1000), "extension: DEVLIST: closed after the reply");
	close(fd);
	spin(5);
}

static void
test_async_import(struct expsrv *srv, struct expsrv *quick)
{
	struct usbip_dev rec;
	uint8_t b[USBIP_IMPORT_REP_LEN];
	int fd;

	reset_fake();
	connect_to(srv, &fd);
	send_op(fd, OP_REQ_IMPORT, "1-2");
	ok(F.import_conn != NULL && quiet(fd, 30),
	    "async import: no reply while import() works");
	fake_record(&rec, "1-2");
	expsrv_import_done(F.import_conn, ST_OK, &rec, &F.dev);
	is_int(get(fd, b, sizeof(b), 2000), 0, "async import: the reply comes");
	is_int(get_be32(b + 4), ST_OK, "async import: ST_OK");
	ok(expsrv_conn_dev(F.conn) == &F.dev, "async import: device set");
	submit(fd, 1, DEVID, USBIP_DIR_IN, 0, 18);
	is_str(reply(fd, 18), "S1:0:18", "async import: the URB phase runs");
	close(fd);
	spin(10);
	is_int(F.nreleased, 1, "async import: release() once at close");

	/* Refused asynchronously. */
	reset_fake();
	connect_to(srv, &fd);
	send_op(fd, OP_REQ_IMPORT, "1-2");
	spin(5);
	expsrv_import_done(F.import_conn, ST_DEV_BUSY, NULL, NULL);
	is_int(get(fd, b, 8, 2000), 0, "async refusal: 8 bytes");
	is_int(get_be32(b + 4), ST_DEV_BUSY, "async refusal: ST_DEV_BUSY");
	ok(closed(fd, 1000), "async refusal: closed");
	close(fd);

	/* The op timeout fires first: the late grant is released. */
	reset_fake();
	connect_to(quick, &fd);
	send_op(fd, OP_REQ_IMPORT, "1-2");
	ok(closed(fd, 2500), "async import: the op timeout still closes");
	is_int(expsrv_nconns(quick), 0, "async import: connection gone");
	is_int(F.nreleased, 0, "async import: nothing to release yet");
	fake_record(&rec, "1-2");
	expsrv_import_done(F.import_conn, ST_OK, &rec, &F.dev);
	is_int(F.nreleased, 1, "async import: a grant after the close is released");
	ok(F.released_conn == F.import_conn, "... with its connection");
	spin(5);
	close(fd);
}

static void
test_max_urbs(struct expsrv *small)
{
	int fd, i;

	reset_fake();
	F.cancel = CANCEL_DROP;
	connect_to(small, &fd);
	is_int(import(fd, "1-1"), ST_OK, "max_urbs: import");
	for (i = 1; i <= 4; i++)
		submit(fd, (uint32_t)i, DEVID, USBIP_DIR_IN, 1, 64);
	is_int(F.nheld, 4, "max_urbs 4: four held");
	ok(quiet(fd, 20), "max_urbs 4: still open");
	submit(fd, 5, DEVID, USBIP_DIR_IN, 1, 64);
	ok(closed(fd, 1000), "max_urbs 4: the fifth closes");
	is_int(F.nheld, 0, "max_urbs: all cancelled at the close");
	close(fd);
}

static void
test_backpressure(struct expsrv *small)
{
	char want[32];
	const char *got;
	int fd, i, before, bad = 0;

	reset_fake();
	connect_to(small, &fd);
	is_int(import(fd, "1-1"), ST_OK, "backpressure: import");
	/* 64 x 64 KiB of replies; the socket holds a few hundred KiB. */
	for (i = 1; i <= 64; i++)
		submit(fd, (uint32_t)i, DEVID, USBIP_DIR_IN, 0, 65535);
	spin(50);
	before = F.nsubmit;
	ok(before < 64, "backpressure: reading stopped above out_hiwat "
	    "(%d of 64 submitted)", before);
	for (i = 1; i <= 64; i++) {
		snprintf(want, sizeof(want), "S%d:0:65535", i);
		got = reply(fd, 65535);
		if (strcmp(got, want) != 0 && bad++ == 0)
			diag("reply %d: %s", i, got);
	}
	is_int(bad, 0, "backpressure: all 64 replies, in order, once read");
	is_int(F.nsubmit, 64, "backpressure: reading resumed");
	close(fd);
	spin(5);
}

static void
test_pause(struct expsrv *srv)
{
	struct expsrv_urb *u;
	struct expsrv_conn *conn;
	int fd;

	reset_fake();
	conn = connect_to(srv, &fd);
	is_int(import(fd, "1-1"), ST_OK, "pause: import");
	F.pause_ep = 2;
	submit(fd, 1, DEVID, USBIP_DIR_OUT, 2, 0);	/* intercepted */
	submit(fd, 2, DEVID, USBIP_DIR_IN, 0, 18);
	ok(quiet(fd, 30), "pause: nothing after the paused request");
	is_int(F.nsubmit, 1, "pause: the next request is not read");
	u = held_seq(1);
	unhold(u);
	expsrv_urb_done(u, 0, 0);
	expsrv_conn_resume(conn);
	is_str(reply(fd, 0), "S1:0:0", "resume: the intercepted request's answer first");
	is_str(reply(fd, 18), "S2:0:18", "resume: then the next request");
	close(fd);
	spin(5);
}

static void
test_close_flush(struct expsrv *srv)
{
	struct expsrv_urb *u;
	int fd, n;

	reset_fake();
	F.cancel = CANCEL_DROP;
	connect_to(srv, &fd);
	is_int(import(fd, "1-1"), ST_OK, "close: import");
	submit(fd, 1, DEVID, USBIP_DIR_IN, 1, 64);
	submit(fd, 2, DEVID, USBIP_DIR_IN, 1, 64);
	u = held_seq(1);
	unhold(u);
	expsrv_urb_done(u, -ESHUTDOWN, 0);
	expsrv_conn_close(F.conn, "device gone");
	is_str(reply(fd, 64), "S1:-108:0", "close: what was queued is flushed");
	ok(closed(fd, 1000), "close: then closed");
	is_int(F.nreleased, 1, "close: release() once");
	is_int(F.nheld, 0, "close: the URB still held was cancelled");
	n = expsrv_nconns(srv);
	is_int(n, 0, "close: connection gone");
	close(fd);
	spin(5);
}

int
main(void)
{
	struct expsrv_limits lim;
	struct expsrv *srv, *quick, *small, *ext;

	log_init("test_expsrv", 1, LOG_LVL_ERR);
	signal(SIGPIPE, SIG_IGN);
	if ((F.base = event_base_new()) == NULL)
		fatalx("event_base_new");
	srv = expsrv_new(F.base, &fake_ops, NULL, NULL);
	expsrv_limits_default(&lim);
	lim.op_timeout_s = 1;
	quick = expsrv_new(F.base, &fake_ops, NULL, &lim);
	expsrv_limits_default(&lim);
	lim.max_urbs = 4;
	lim.out_hiwat = 256 << 10;
	lim.out_lowat = 64 << 10;
	small = expsrv_new(F.base, &fake_ops, NULL, &lim);
	ext = expsrv_new(F.base, &ext_ops, NULL, NULL);

	test_devlist(srv);
	test_import_refused(srv);
	test_unlink_table(srv);
	test_orphan(srv);
	test_lent_and_kicks(srv);
	test_devid_malformed(srv);
	test_async_import(srv, quick);
	test_max_urbs(small);
	test_backpressure(small);
	test_pause(srv);
	test_close_flush(srv);
	test_extension(srv, ext);

	expsrv_free(srv);
	expsrv_free(quick);
	expsrv_free(small);
	expsrv_free(ext);
	event_base_free(F.base);
	return done_testing();
}
