/*
 * usbgw-agent's control connections (client/agent/ctlconn.c, protocol.md
 * 1.9.4), their pure parts and their wire behaviour, the test playing
 * the gateway with the codec (agentproto.c):
 *  - the dial-out back-off: 1 s doubling to 60 s, +-20 %, reset after
 *    60 s up;
 *  - listen mode over socketpairs, handed over as the engine's extension
 *    hook does (bytes already read included): the CONTROL reply, the
 *    snapshot's message sequence (seq 1, 2, ... with the count right),
 *    pushes, PING -> PONG, OPEN_IMPORT refused, a message out of
 *    sequence closing, one connection per gateway address, at most 8 up
 *    (the 9th ST_NA), other versions and kinds ST_NA, a malformed hello
 *    closed, BYE to every gateway at shutdown;
 *  - dial-out against a loopback listener: CONTROL with the agent's
 *    name, the snapshot, and the reconnect after a BYE about 1 s later.
 */
#include <sys/socket.h>
#include <netinet/in.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "../../client/agent/ctlconn.h"
#include "proto/agentproto.h"
#include "base/log.h"
#include "tap.h"
#include "base/util.h"

static struct event_base *base;
static int ndevs = 2;

static int
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int)(ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

static void
spin(int ms)
{
	int end = now_ms() + ms;

	do {
		event_base_loop(base, EVLOOP_NONBLOCK);
		usleep(300);
	} while (now_ms() < end);
}

static void
fake_record(struct usbip_dev *r, const char *busid)
{
	memset(r, 0, sizeof(*r));
	usbgw_strlcpy(r->busid, busid, sizeof(r->busid));
	snprintf(r->path, sizeof(r->path), "/sys/devices/fake/%s", busid);
	r->busnum = 1;
	r->devnum = 2;
	r->speed = USBIP_SPEED_HIGH;
	r->idVendor = 0x1209;
	r->idProduct = 0x0001;
	r->bNumConfigurations = 1;
	r->bConfigurationValue = 1;
	r->bNumInterfaces = 1;
}

static void
fake_foreach(void (*cb)(void *, const struct usbip_dev *,
    const struct usbip_intf *, uint8_t), void *arg)
{
	struct usbip_intf i = { 8, 6, 0x50 };
	struct usbip_dev r;
	char b[16];
	int k;

	for (k = 1; k <= ndevs; k++) {
		snprintf(b, sizeof(b), "1-%d", k);
		fake_record(&r, b);
		cb(arg, &r, &i, 1);
	}
}

/* ---- the gateway's side -------------------------------------------------- */

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
		if (n == 0 || (n < 0 && errno != EAGAIN))
			return -1;
		if (now_ms() > end)
			return -2;
		event_base_loop(base, EVLOOP_NONBLOCK);
		usleep(200);
	}
	return 0;
}

/* The peer closed within ms (whatever came before). */
static bool
closed(int fd, int ms)
{
	uint8_t buf[4096];
	ssize_t n;
	int end = now_ms() + ms;

	while (now_ms() < end) {
		n = read(fd, buf, sizeof(buf));
		if (n == 0 || (n < 0 && errno != EAGAIN))
			return true;
		if (n < 0) {
			event_base_loop(base, EVLOOP_NONBLOCK);
			usleep(200);
		}
	}
	return false;
}

static bool
quiet(int fd, int ms)
{
	struct pollfd pfd = { fd, POLLIN, 0 };

	spin(ms);
	return poll(&pfd, 1, 0) == 0;
}

static void
put(int fd, const void *buf, size_t len)
{
	if (write(fd, buf, len) != (ssize_t)len)
		fatal("write");
	spin(2);
}

/* The agent's hello reply; its status, -1 if closed or malformed. */
static int
get_reply(int fd, struct agp_hello *h)
{
	uint8_t b[AGP_HELLO_MAX];
	uint32_t len;
	const char *why;

	if (get(fd, b, AGP_HELLO_HDR_LEN, 2000) < 0)
		return -1;
	len = get_be32(b + 12);
	if (len > AGP_HELLO_MAX_BODY || (len > 0 &&
	    get(fd, b + AGP_HELLO_HDR_LEN, len, 2000) < 0))
		return -1;
	if (agp_hello_decode(b, AGP_HELLO_HDR_LEN + len, USBIP_FROM_SERVER, h,
	    &why) != (int)(AGP_HELLO_HDR_LEN + len))
		return -1;
	return (int)h->status;
}

/* One message from the agent: its type, -1 if closed or malformed. */
static int
get_msg(int fd, struct agp_msg *m)
{
	uint8_t b[AGP_MSG_MAX];
	uint32_t len;
	const char *why;

	if (get(fd, b, 4, 2000) < 0)
		return -1;
	len = get_be32(b);
	if (len < AGP_MSG_LEN_MIN || len > AGP_MSG_LEN_MAX ||
	    get(fd, b + 4, len, 2000) < 0)
		return -1;
	if (agp_msg_decode(b, 4 + len, AGP_FROM_AGENT, m, &why) !=
	    (int)(4 + len))
		return -1;
	return m->type;
}

static void
send_msg(int fd, uint16_t type, uint32_t seq, uint64_t echo)
{
	uint8_t b[AGP_MSG_MAX];
	struct agp_msg m;

	memset(&m, 0, sizeof(m));
	m.type = type;
	m.seq = seq;
	m.echo = echo;
	if (type == AGP_OPEN_IMPORT) {
		usbgw_strlcpy(m.busid, "1-1", sizeof(m.busid));
		memset(m.token, 0x5a, sizeof(m.token));
	}
	put(fd, b, agp_msg_encode(b, &m));
}

static size_t
control_req(uint8_t *b)
{
	uint8_t nonce[AGP_NONCE_LEN] = { 0 };

	return agp_control_req_encode(b, "usbgwd", 0, nonce);
}

/*
 * A gateway connecting from peer: the first split bytes of its hello
 * read by the engine and handed over, the rest written to the socket.
 * Returns the test's end of the socketpair.
 */
static int
gateway_connect(const char *peer, const uint8_t *hello, size_t len,
    size_t split)
{
	struct evbuffer *in = evbuffer_new();
	int s[2];

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, s) == -1)
		fatal("socketpair");
	fcntl(s[0], F_SETFL, O_NONBLOCK);
	fcntl(s[1], F_SETFL, O_NONBLOCK);
	evbuffer_add(in, hello, split);
	if (!ctlconn_accept(OP_REQ_USBGW, s[0], peer, in))
		fatalx("ctlconn_accept refused OP_REQ_USBGW");
	if (evbuffer_get_length(in) != 0)
		fatalx("ctlconn_accept left bytes behind");
	evbuffer_free(in);
	if (split < len)
		put(s[1], hello + split, len - split);
	spin(2);
	return s[1];
}

/* Connect as a gateway, expect ST_OK and the (empty or not) snapshot. */
static int
gateway_up(const char *peer)
{
	uint8_t hello[AGP_HELLO_MAX];
	struct agp_hello h;
	struct agp_msg m;
	size_t n = control_req(hello);
	int fd = gateway_connect(peer, hello, n, n), k;

	if (get_reply(fd, &h) != ST_OK)
		return -1;
	for (k = 0; k < ndevs + 2; k++)
		if (get_msg(fd, &m) < 0)
			return -1;
	return fd;
}

/* ---- tests --------------------------------------------------------------- */

/* n pushes queued in one go (the loop not run between): their bytes. */
static size_t
push_many(int n)
{
	struct usbip_intf i = { 3, 1, 1 };
	struct usbip_dev r;
	int k;

	fake_record(&r, "1-9");
	for (k = 0; k < n; k++)
		ctlconn_changed("1-9", true, &r, &i, 1);
	return (size_t)n * (AGP_MSG_HDR_LEN + USBIP_DEV_LEN + USBIP_INTF_LEN);
}

/* PONGs readable from fd now (the loop run for ms first). */
static int
count_pongs(int fd, int ms)
{
	struct pollfd pfd = { fd, POLLIN, 0 };
	struct agp_msg m;
	int n = 0;

	spin(ms);
	while (poll(&pfd, 1, 0) == 1 && get_msg(fd, &m) == AGP_PONG)
		n++;
	return n;
}

/*
 * A gateway that does not read: closed once more than 64 KiB wait to be
 * sent (pushes here: 328 bytes each, queued in one loop turn); one that
 * floods: at most 256 of its messages read a second.
 */
static void
test_listen_hostile(void)
{
	uint8_t b[AGP_MSG_MAX * 8];
	struct agp_msg m;
	size_t off = 0;
	int fd, k, n1, n2;

	fd = gateway_up("10.0.4.1:1");
	ok(fd >= 0, "hostile: a gateway up");
	push_many(150);
	ok(ctlconn_nlisten(true) == 1 && !closed(fd, 50),
	    "hostile: 150 pushes (48 KiB) unread: still up");
	close(fd);
	spin(5);
	fd = gateway_up("10.0.4.2:1");
	push_many(250);
	is_int(ctlconn_nlisten(true), 0,
	    "hostile: 250 pushes (80 KiB) unread: closed at 64 KiB");
	ok(closed(fd, 1000), "hostile: the gateway sees it closed");
	close(fd);

	fd = gateway_up("10.0.4.3:1");
	memset(&m, 0, sizeof(m));
	m.type = AGP_PING;
	for (k = 1; k <= 600; k++) {
		m.seq = (uint32_t)k;
		m.echo = (uint64_t)k;
		off += agp_msg_encode(b + off, &m);
		if (off + AGP_MSG_MAX > sizeof(b) || k == 600) {
			if (write(fd, b, off) != (ssize_t)off)
				fatal("write");
			off = 0;
		}
	}
	n1 = count_pongs(fd, 500);
	n2 = count_pongs(fd, 1300);
	ok(n1 >= 200 && n1 <= 256,
	    "hostile: 600 PINGs at once: %d PONGs in the first 0.5 s", n1);
	ok(n2 >= 200 && n1 + n2 <= 2 * 256,
	    "hostile: then the next second's (%d)", n2);
	is_int(ctlconn_nlisten(true), 1, "hostile: a flood is slowed, not closed");
	close(fd);
	spin(5);
}

static void
test_backoff(void)
{
	static const unsigned want[] = { 1000, 2000, 4000, 8000, 16000,
	    32000, 60000, 60000 };
	unsigned b = 0, d, lo = ~0u, hi = 0;
	size_t i;
	bool seq_ok = true, in_range = true;

	for (i = 0; i < nitems(want); i++) {
		b = ctlconn_backoff_next(b);
		if (b != want[i]) {
			seq_ok = false;
			diag("back-off %zu: %u, want %u", i, b, want[i]);
		}
	}
	ok(seq_ok, "back-off: 1 s doubling to 60 s, then 60 s");
	is_int(ctlconn_backoff_after_up(32000, 59999), 32000,
	    "back-off: kept after 59.999 s up");
	is_int(ctlconn_backoff_after_up(32000, 60000), 0,
	    "back-off: reset after 60 s up");
	is_int(ctlconn_backoff_next(ctlconn_backoff_after_up(60000, 60000)),
	    1000, "back-off: after a reset, 1 s again");
	for (i = 0; i < 2000; i++) {
		d = ctlconn_backoff_delay(10000);
		if (d < 8000 || d > 12000)
			in_range = false;
		lo = d < lo ? d : lo;
		hi = d > hi ? d : hi;
	}
	ok(in_range, "back-off: the delay within +-20 %% (%u..%u ms)", lo, hi);
	ok(lo < 8500 && hi > 11500, "back-off: and spread over it");
	d = ctlconn_backoff_delay(60000);
	ok(d >= 48000 && d <= 72000, "back-off: 60 s +-20 %% (%u)", d);
}

static void
test_listen_sequence(void)
{
	uint8_t hello[AGP_HELLO_MAX];
	struct agp_hello h;
	struct agp_msg m;
	struct usbip_dev r;
	struct usbip_intf i = { 3, 1, 1 };
	struct evbuffer *in;
	size_t n = control_req(hello);
	int fd;

	in = evbuffer_new();
	ok(!ctlconn_accept(OP_REQ_IMPORT, -1, "10.0.0.9:1", in),
	    "accept: another op code is not taken");
	evbuffer_free(in);

	/* 5 bytes read by the engine, the rest arrives later */
	fd = gateway_connect("10.0.0.1:4000", hello, n, 5);
	is_int(get_reply(fd, &h), ST_OK, "listen: CONTROL answered ST_OK");
	is_int(h.kind, AGP_KIND_CONTROL, "listen: reply of kind CONTROL");
	is_str(h.name, "tu1", "listen: with the agent's name");
	is_int(h.heartbeat_s, CTLCONN_HEARTBEAT_S, "listen: heartbeat 15 s");
	is_int(ctlconn_nlisten(true), 1, "listen: one connection up");

	ok(get_msg(fd, &m) == AGP_SNAPSHOT_BEGIN && m.seq == 1 &&
	    m.count == 2, "sequence: 1 SNAPSHOT_BEGIN count 2");
	ok(get_msg(fd, &m) == AGP_DEV_ADDED && m.seq == 2 &&
	    strcmp(m.dev.busid, "1-1") == 0 && m.dev.bNumInterfaces == 1 &&
	    m.intf[0].bInterfaceClass == 8, "sequence: 2 DEV_ADDED 1-1");
	ok(get_msg(fd, &m) == AGP_DEV_ADDED && m.seq == 3 &&
	    strcmp(m.dev.busid, "1-2") == 0, "sequence: 3 DEV_ADDED 1-2");
	ok(get_msg(fd, &m) == AGP_SNAPSHOT_END && m.seq == 4,
	    "sequence: 4 SNAPSHOT_END");

	fake_record(&r, "1-3");
	ctlconn_changed("1-3", true, &r, &i, 1);
	ok(get_msg(fd, &m) == AGP_DEV_ADDED && m.seq == 5 &&
	    strcmp(m.dev.busid, "1-3") == 0 && m.intf[0].bInterfaceClass == 3,
	    "push: 5 DEV_ADDED 1-3 with its interface");
	ctlconn_changed("1-1", false, NULL, NULL, 0);
	ok(get_msg(fd, &m) == AGP_DEV_REMOVED && m.seq == 6 &&
	    strcmp(m.busid, "1-1") == 0, "push: 6 DEV_REMOVED 1-1");
	ctlconn_changed("../x", false, NULL, NULL, 0);
	ok(quiet(fd, 20), "push: an invalid busid is not sent");

	send_msg(fd, AGP_PING, 1, 0x1122334455667788ull);
	ok(get_msg(fd, &m) == AGP_PONG && m.seq == 7 &&
	    m.echo == 0x1122334455667788ull, "PING 1 -> PONG 7 with its echo");
	send_msg(fd, AGP_OPEN_IMPORT, 2, 0);
	ok(get_msg(fd, &m) == AGP_OPEN_FAILED && m.seq == 8 &&
	    m.status == ST_NA && m.token[0] == 0x5a,
	    "OPEN_IMPORT in listen mode: OPEN_FAILED ST_NA with its token");
	send_msg(fd, AGP_PING, 9, 1);
	ok(closed(fd, 1000), "a gateway message out of sequence closes");
	close(fd);
	spin(5);
	is_int(ctlconn_nlisten(true), 0, "listen: none up after the close");
}

static void
test_listen_bounds(void)
{
	uint8_t hello[AGP_HELLO_MAX], other[AGP_HELLO_MAX];
	struct agp_hello h;
	char peer[64];
	int fds[CTLCONN_MAX_LISTEN], a, b, fd, k;
	size_t n = control_req(hello);
	bool all = true;

	/* one per gateway address: the newer replaces the older */
	a = gateway_up("10.0.0.2:1000");
	b = gateway_up("10.0.0.2:1001");
	ok(a >= 0 && b >= 0, "same address: both answered");
	ok(closed(a, 1000), "same address: the older connection closed");
	ok(quiet(b, 20), "same address: the newer stays");
	is_int(ctlconn_nlisten(true), 1, "same address: one up");
	close(a);

	/* [v6] peers are told apart by address, not port */
	a = gateway_up("[fd00::1]:1000");
	ok(a >= 0 && quiet(b, 20), "an IPv6 gateway beside an IPv4 one");
	close(a);
	close(b);
	spin(10);

	for (k = 0; k < CTLCONN_MAX_LISTEN; k++) {
		snprintf(peer, sizeof(peer), "10.0.1.%d:2000", k + 1);
		if ((fds[k] = gateway_up(peer)) < 0)
			all = false;
	}
	ok(all, "8 gateways up");
	is_int(ctlconn_nlisten(true), CTLCONN_MAX_LISTEN, "8 counted up");
	fd = gateway_connect("10.0.1.99:2000", hello, n, n);
	is_int(get_reply(fd, &h), ST_NA, "the 9th gateway: ST_NA");
	ok(closed(fd, 1000), "the 9th: closed after the refusal");
	close(fd);
	is_int(ctlconn_nlisten(true), CTLCONN_MAX_LISTEN, "still 8 up");
	close(fds[0]);
	spin(10);
	fd = gateway_up("10.0.1.99:2001");
	ok(fd >= 0, "one gone: the 9th address gets in");
	close(fd);
	for (k = 1; k < CTLCONN_MAX_LISTEN; k++)
		close(fds[k]);
	spin(10);
	is_int(ctlconn_nlisten(true), 0, "all closed: none up");

	/* other versions, kinds and garbage */
	memcpy(other, hello, n);
	put_be16(other + 8, 2);
	fd = gateway_connect("10.0.2.1:1", other, n, n);
	ok(get_reply(fd, &h) == ST_NA && h.ext_version == AGP_EXT_VERSION,
	    "extension version 2: ST_NA with version 1");
	ok(closed(fd, 1000), "version 2: closed");
	close(fd);
	n = agp_dialback_req_encode(other, hello + 20, "1-1");
	fd = gateway_connect("10.0.2.2:1", other, n, n);
	ok(get_reply(fd, &h) == ST_NA && h.kind == AGP_KIND_DIALBACK,
	    "DIALBACK to an agent: ST_NA");
	close(fd);
	n = control_req(other);
	put_be16(other + 10, 7);
	fd = gateway_connect("10.0.2.3:1", other, n, n);
	ok(closed(fd, 1000), "an unknown kind: closed unanswered");
	close(fd);
	n = control_req(other);
	fd = gateway_connect("10.0.2.4:1", other, 4, 4);
	is_int(ctlconn_nlisten(false), 1, "a hello in progress is counted");
	close(fd);
	spin(10);
	is_int(ctlconn_nlisten(false), 0, "and forgotten when its peer goes");
}

/* Dial-out against a loopback listener; returns the accepted fd. */
static int
accept_within(int lfd, int ms)
{
	int end = now_ms() + ms, fd;

	while (now_ms() < end) {
		if ((fd = accept(lfd, NULL, NULL)) >= 0) {
			fcntl(fd, F_SETFL, O_NONBLOCK);
			return fd;
		}
		event_base_loop(base, EVLOOP_NONBLOCK);
		usleep(500);
	}
	return -1;
}

static void
test_dialout(void)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	struct net_addr gw;
	struct agp_hello h;
	struct agp_msg m;
	uint8_t b[AGP_HELLO_MAX];
	const char *why;
	int lfd, fd, t0, k;

	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (lfd == -1 || bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) ==
	    -1 || listen(lfd, 4) == -1 || getsockname(lfd,
	    (struct sockaddr *)&sin, &sl) == -1)
		fatal("listen");
	memset(&gw, 0, sizeof(gw));
	usbgw_strlcpy(gw.host, "127.0.0.1", sizeof(gw.host));
	snprintf(gw.port, sizeof(gw.port), "%u", ntohs(sin.sin_port));
	ctlconn_shutdown();
	ok(ctlconn_init(base, "tu2", &gw, 1, fake_foreach, NULL) == 0,
	    "dial-out: started");
	fd = accept_within(lfd, 3000);
	ok(fd >= 0, "dial-out: the agent connects");
	ok(get(fd, b, AGP_HELLO_HDR_LEN + AGP_CONTROL_REQ_BODY, 2000) == 0 &&
	    agp_hello_decode(b, AGP_HELLO_HDR_LEN + AGP_CONTROL_REQ_BODY,
	    USBIP_FROM_CLIENT, &h, &why) > 0 && h.kind == AGP_KIND_CONTROL &&
	    strcmp(h.name, "tu2") == 0, "dial-out: CONTROL with its name");
	put(fd, b, agp_control_rep_encode(b, ST_OK, "usbgwd", 0, 15));
	for (k = 1; k <= ndevs + 2; k++)
		if (get_msg(fd, &m) < 0 || m.seq != (uint32_t)k)
			break;
	is_int(k, ndevs + 3, "dial-out: the snapshot, seq 1..4");
	send_msg(fd, AGP_OPEN_IMPORT, 1, 0);
	ok(get_msg(fd, &m) == AGP_OPEN_FAILED && m.status == ST_NODEV,
	    "dial-out: OPEN_IMPORT without a dial-back: OPEN_FAILED ST_NODEV");
	send_msg(fd, AGP_BYE, 2, 0);
	t0 = now_ms();
	ok(closed(fd, 1000), "dial-out: BYE closes");
	close(fd);
	fd = accept_within(lfd, 3000);
	k = now_ms() - t0;
	ok(fd >= 0 && k >= 700 && k <= 1500,
	    "dial-out: back 1 s (+-20 %%) later: %d ms", k);
	/* the dial-out one is bounded as well */
	ok(fd >= 0 && get(fd, b, AGP_HELLO_HDR_LEN + AGP_CONTROL_REQ_BODY,
	    2000) == 0, "dial-out: CONTROL again");
	put(fd, b, agp_control_rep_encode(b, ST_OK, "usbgwd", 0, 15));
	for (k = 1; k <= ndevs + 2; k++)
		if (get_msg(fd, &m) < 0)
			break;
	push_many(250);
	ok(closed(fd, 1000),
	    "dial-out: 250 pushes (80 KiB) unread: closed at 64 KiB");
	if (fd >= 0)
		close(fd);
	close(lfd);
}

/* ---- dial-backs ------------------------------------------------------------ */

static char adopted_busid[USBIP_BUSID_SIZE];
static int adopted_port = -1, nadopted;

static void
fake_adopt(int fd, const struct sockaddr *sa, socklen_t len,
    const char *busid)
{
	const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;

	(void)len;
	usbgw_strlcpy(adopted_busid, busid, sizeof(adopted_busid));
	adopted_port = ntohs(sin->sin_port);
	nadopted++;
	close(fd);
}

static int
listener(struct net_addr *gw)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (lfd == -1 || bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) ==
	    -1 || listen(lfd, 64) == -1 || getsockname(lfd,
	    (struct sockaddr *)&sin, &sl) == -1)
		fatal("listen");
	memset(gw, 0, sizeof(*gw));
	usbgw_strlcpy(gw->host, "127.0.0.1", sizeof(gw->host));
	snprintf(gw->port, sizeof(gw->port), "%u", ntohs(sin.sin_port));
	return lfd;
}

/* The dial-out control up on lfd: the accepted fd, snapshot read. */
static int
dial_up(int lfd)
{
	struct agp_msg m;
	uint8_t b[AGP_HELLO_MAX];
	int fd = accept_within(lfd, 3000), k;

	if (fd < 0 || get(fd, b, AGP_HELLO_HDR_LEN + AGP_CONTROL_REQ_BODY,
	    2000) != 0)
		return -1;
	put(fd, b, agp_control_rep_encode(b, ST_OK, "usbgwd", 0, 15));
	for (k = 0; k < ndevs + 2; k++)
		if (get_msg(fd, &m) < 0)
			return -1;
	return fd;
}

static void
open_import(int fd, uint32_t seq, const char *busid)
{
	uint8_t b[AGP_MSG_MAX];
	struct agp_msg m;

	memset(&m, 0, sizeof(m));
	m.type = AGP_OPEN_IMPORT;
	m.seq = seq;
	usbgw_strlcpy(m.busid, busid, sizeof(m.busid));
	memset(m.token, (int)seq, sizeof(m.token));
	put(fd, b, agp_msg_encode(b, &m));
}

/*
 * At most one dial-back in flight per busid (ST_DEV_BUSY), 16 in all
 * (ST_NA), an unknown busid ST_NODEV with nothing opened; the dial-back
 * connects to, and is handed over with the address of, the gateway that
 * asked, even after a failover to another, and with its busid.
 */
static void
test_dialback(void)
{
	struct net_addr gw[2];
	struct agp_msg m;
	uint8_t b[AGP_HELLO_MAX];
	char busid[16];
	int la, lb, ca, cb, da, fd, k, n, busy = 0, na = 0, other = 0;

	la = listener(&gw[0]);
	lb = listener(&gw[1]);
	ctlconn_shutdown();
	ndevs = 20;
	ok(ctlconn_init(base, "tu3", gw, 2, fake_foreach, fake_adopt) == 0,
	    "dial-back: started with two gateway lines");
	ca = dial_up(la);
	ok(ca >= 0, "dial-back: up on gateway A");
	open_import(ca, 1, "9-9");
	ok(get_msg(ca, &m) == AGP_OPEN_FAILED && m.status == ST_NODEV &&
	    accept_within(la, 100) == -1,
	    "an unknown busid: ST_NODEV, no connection opened");
	open_import(ca, 2, "1-1");
	da = accept_within(la, 2000);
	ok(da >= 0, "OPEN_IMPORT 1-1: a dial-back to gateway A");
	/* A goes away before it answers; the agent fails over to B */
	send_msg(ca, AGP_BYE, 3, 0);
	close(ca);
	cb = dial_up(lb);
	ok(cb >= 0, "failed over to gateway B");
	put(da, b, agp_empty_rep_encode(b, ST_OK, AGP_KIND_DIALBACK));
	for (k = 0; k < 200 && nadopted == 0; k++)
		spin(5);
	is_int(nadopted, 1, "A's dial-back answered: handed over");
	is_int(adopted_port, atoi(gw[0].port),
	    "with gateway A's address, not B's (the one up now)");
	is_str(adopted_busid, "1-1", "and with its busid");
	close(da);

	/* caps: 1-1 twice, then 1-1..1-20 */
	open_import(cb, 1, "1-1");
	open_import(cb, 2, "1-1");
	ok(get_msg(cb, &m) == AGP_OPEN_FAILED && m.status == ST_DEV_BUSY &&
	    m.token[0] == 2, "a second OPEN_IMPORT of 1-1: ST_DEV_BUSY");
	for (k = 2; k <= 20; k++) {
		snprintf(busid, sizeof(busid), "1-%d", k);
		open_import(cb, (uint32_t)k + 1, busid);
	}
	for (k = 0; k < 4; k++) {
		if (get_msg(cb, &m) != AGP_OPEN_FAILED)
			break;
		if (m.status == ST_NA)
			na++;
		else
			other++;
	}
	for (n = 0; (fd = accept_within(lb, n < 16 ? 1000 : 200)) >= 0; n++)
		close(fd);
	is_int(n, 16, "16 dial-backs in flight at most (connections seen)");
	ok(na == 4 && other == 0 && !busy,
	    "the 17th to 20th: ST_NA (%d ST_NA, %d other)", na, other);
	close(cb);
	spin(20);
	close(la);
	close(lb);
	ndevs = 2;
}

int
main(void)
{
	log_init("test_agent_ctlconn", 1, LOG_LVL_ERR);
	signal(SIGPIPE, SIG_IGN);
	if ((base = event_base_new()) == NULL)
		fatalx("event_base_new");

	test_backoff();
	ok(ctlconn_init(base, "tu1", NULL, 0, fake_foreach, NULL) == 0,
	    "listen mode only: started");
	ok(ctlconn_init(base, "no/slash", NULL, 0, fake_foreach, NULL) == -1,
	    "an invalid name is refused");
	test_listen_sequence();
	test_listen_bounds();
	test_listen_hostile();
	test_dialout();
	test_dialback();
	ctlconn_shutdown();
	ok(ctlconn_init(base, "tu1", NULL, 0, fake_foreach, NULL) == 0,
	    "listen mode only again");
	{
		struct agp_msg m;
		int fd = gateway_up("10.0.3.1:1");

		ctlconn_shutdown();
		ok(fd >= 0 && get_msg(fd, &m) == AGP_BYE && m.seq == 5,
		    "shutdown: BYE to a listen-mode gateway (seq 5)");
		ok(closed(fd, 1000), "shutdown: then closed");
		close(fd);
	}
	spin(5);
	event_base_free(base);
	return done_testing();
}
