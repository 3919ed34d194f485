/*
 * usbgw-agent's export.c (protocol.md 1.9.5) on a fake back end: the
 * allow-from that a reload (SIGHUP, export_set_conf) narrows applies to
 * the connections already open, not only to the next accept -- an
 * import held by a peer no longer allowed ends at once, an import asked
 * on a connection accepted before the reload is refused -- while a
 * dial-back connection (export_adopt: the agent's own connection to its
 * gateway, admitted by its token) is no allow-from peer and stays.
 */
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "../../client/agent/aconf.h"
#include "../../client/agent/export.h"
#include "base/log.h"
#include "tap.h"
#include "proto/usbip.h"
#include "base/util.h"

static int fake_dev;
static int n_import, n_release;

static void
f_list(void *arg, struct expsrv_conn *c)
{
	struct usbip_dev r;

	(void)arg;
	memset(&r, 0, sizeof(r));
	usbgw_strlcpy(r.busid, "1-1", sizeof(r.busid));
	expsrv_list_add(c, &r, NULL, 0);
}

static uint32_t
f_import(void *arg, struct expsrv_conn *c, const char *busid,
    struct usbip_dev *rec, void **dev)
{
	(void)arg;
	(void)c;
	n_import++;
	memset(rec, 0, sizeof(*rec));
	usbgw_strlcpy(rec->path, "/sys/devices/fake/1-1", sizeof(rec->path));
	usbgw_strlcpy(rec->busid, busid, sizeof(rec->busid));
	rec->busnum = 1;
	rec->devnum = 2;
	rec->speed = 3;
	rec->idVendor = 0x1209;
	rec->bConfigurationValue = 1;
	rec->bNumConfigurations = 1;
	*dev = &fake_dev;
	return ST_OK;
}

static int
f_ep_type(void *dev, uint32_t dir, uint32_t ep)
{
	(void)dev;
	(void)dir;
	return ep == 0 ? 0 : 2;
}

static void
f_submit(void *dev, struct expsrv_urb *u)
{
	(void)dev;
	expsrv_urb_done(u, 0, 0);
}

static bool
f_cancel(void *dev, struct expsrv_urb *u)
{
	(void)dev;
	(void)u;
	return true;
}

static void
f_release(void *dev, struct expsrv_conn *c, const char *why)
{
	(void)dev;
	(void)c;
	(void)why;
	n_release++;
}

static const struct expsrv_ops fake_ops = {
	.list = f_list,
	.import = f_import,
	.ep_type = f_ep_type,
	.submit = f_submit,
	.cancel = f_cancel,
	.release = f_release,
};

static struct event_base *base;

static struct aconf *
conf(const char *text)
{
	struct aconf *c = aconf_new();
	char *errs = NULL;

	if (aconf_parse_buf(c, "t.conf", text, strlen(text), &errs) != 0) {
		printf("# %s", errs);
		exit(1);
	}
	aconf_finish(c);
	return c;
}

static void
pump(int ms)
{
	int i;

	for (i = 0; i < ms; i++) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		usleep(1000);
	}
}

/* Read exactly n bytes from fd, pumping the loop; -1 on EOF or 2 s. */
static int
read_n(int fd, uint8_t *buf, size_t n)
{
	size_t got = 0;
	ssize_t r;
	int i;

	for (i = 0; i < 2000 && got < n; i++) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		r = recv(fd, buf + got, n - got, MSG_DONTWAIT);
		if (r == 0)
			return -1;
		if (r > 0)
			got += (size_t)r;
		else if (errno != EAGAIN)
			return -1;
		else
			usleep(1000);
	}
	return got == n ? 0 : -1;
}

/* Does the peer close fd within ms (anything sent is read and dropped)? */
static bool
closed_within(int fd, int ms)
{
	uint8_t buf[512];
	ssize_t r;
	int i;

	for (i = 0; i < ms; i++) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (r == 0 || (r < 0 && errno != EAGAIN))
			return true;
		usleep(1000);
	}
	return false;
}

/* OP_REQ_IMPORT of 1-1: the reply's status, or -1 if closed. */
static long
import_busid(int fd, const char *busid)
{
	uint8_t req[USBIP_IMPORT_REQ_LEN], rep[USBIP_OP_HDR_LEN];

	usbip_import_req_encode(req, busid);
	if (send(fd, req, sizeof(req), MSG_NOSIGNAL) != (ssize_t)sizeof(req))
		return -1;
	if (read_n(fd, rep, sizeof(rep)) == -1)
		return -1;
	return (long)get_be32(rep + 4);
}

static long
import(int fd)
{
	return import_busid(fd, "1-1");
}

/* OP_REQ_DEVLIST: the reply's status, *ndev its count. */
static long
devlist(int fd, uint32_t *ndev)
{
	uint8_t req[USBIP_OP_HDR_LEN], rep[USBIP_OP_HDR_LEN + 4];

	usbip_op_hdr_encode(req, OP_REQ_DEVLIST, 0);
	if (send(fd, req, sizeof(req), MSG_NOSIGNAL) != (ssize_t)sizeof(req))
		return -1;
	if (read_n(fd, rep, sizeof(rep)) == -1)
		return -1;
	*ndev = get_be32(rep + USBIP_OP_HDR_LEN);
	return (long)get_be32(rep + 4);
}

/* The extension hook (the agent's control connections): counts, closes. */
static int n_ext;

static bool
fake_ext(uint16_t code, int fd, const char *peer, struct evbuffer *in)
{
	(void)code;
	(void)peer;
	(void)in;
	n_ext++;
	close(fd);
	return true;
}

/* An extension op (OP_REQ_USBGW's header): closed within 1 s? */
static bool
ext_op(int fd)
{
	uint8_t req[USBIP_OP_HDR_LEN];

	usbip_op_hdr_encode(req, 0x8067, 0);
	if (send(fd, req, sizeof(req), MSG_NOSIGNAL) != (ssize_t)sizeof(req))
		return true;
	return closed_within(fd, 1000);
}

static int
client(uint16_t port)
{
	struct sockaddr_in sin;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd == -1 || connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1)
		return -1;
	pump(20);		/* accepted */
	return fd;
}

static uint16_t
free_port(void)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	uint16_t port;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	bind(fd, (struct sockaddr *)&sin, sizeof(sin));
	getsockname(fd, (struct sockaddr *)&sin, &sl);
	port = ntohs(sin.sin_port);
	close(fd);
	return port;
}

int
main(void)
{
	struct aconf *open_conf, *narrow, *narrow2, *ll;
	struct net_addr la;
	struct sockaddr_in gwsa;
	char err[256];
	uint16_t port;
	int held, early, early2, early3, early4, sp[2];
	long st;

	log_init("test_agent_export", 1, LOG_LVL_WARN);
	base = event_base_new();
	open_conf = conf("allow-from 127.0.0.1\n");
	narrow = conf("allow-from 10.0.0.0/8\n");
	narrow2 = conf("allow-from 10.0.0.0/8\nmax-connections 8\n");
	ll = conf("allow-from 127.0.0.1\nallow-from fe80::/10\n");
	ok(export_init(base, open_conf, &fake_ops, err, sizeof(err)) == 0,
	    "export_init");
	export_set_extension(fake_ext);
	port = free_port();
	memset(&la, 0, sizeof(la));
	usbgw_strlcpy(la.host, "127.0.0.1", sizeof(la.host));
	snprintf(la.port, sizeof(la.port), "%u", port);
	ok(export_listen(&la) == 0, "listening on 127.0.0.1:%u", port);

	/* an import held by 127.0.0.1, allowed when it began */
	held = client(port);
	is_int(import(held), ST_OK, "127.0.0.1 (allowed) imports 1-1");
	/* a connection accepted while allowed, its import asked later */
	early = client(port);
	ok(early >= 0, "a second connection, accepted, in its op phase");
	/* a dial-back's peer: the agent's own connection to its gateway */
	memset(&gwsa, 0, sizeof(gwsa));
	gwsa.sin_family = AF_INET;
	gwsa.sin_port = htons(3240);
	gwsa.sin_addr.s_addr = htonl(0xc0000201);	/* 192.0.2.1 */
	/* two more, for device lists asked after the reload */
	early2 = client(port);
	early3 = client(port);
	early4 = client(port);
	ok(early2 >= 0 && early3 >= 0 && early4 >= 0,
	    "three more, in their op phase");
	{
		int e = client(port), q[2];
		bool c;

		c = ext_op(e);
		ok(c && n_ext == 1, "an extension op of an allowed peer goes "
		    "to the hook (%d call)", n_ext);
		close(e);
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, q) == -1)
			return 1;
		export_adopt(q[0], (struct sockaddr *)&gwsa, sizeof(gwsa),
		    "1-1");
		c = ext_op(q[1]);
		ok(c && n_ext == 1, "one on a dial-back: closed, the hook "
		    "not called (%d call in all)", n_ext);
		close(q[1]);
	}
	/* a dial-back: the agent's own connection to its gateway */
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == -1)
		return 1;
	/* tied to its busid: no other, and no device list */
	{
		int o[2], l[2];
		uint32_t nd = 99;

		if (socketpair(AF_UNIX, SOCK_STREAM, 0, o) == -1 ||
		    socketpair(AF_UNIX, SOCK_STREAM, 0, l) == -1)
			return 1;
		export_adopt(o[0], (struct sockaddr *)&gwsa, sizeof(gwsa),
		    "1-1");
		is_int(import_busid(o[1], "1-2"), ST_NA,
		    "a dial-back for 1-1 may not import 1-2 (ST_NA)");
		is_int(n_import, 1, "the back end is not asked");
		export_adopt(l[0], (struct sockaddr *)&gwsa, sizeof(gwsa),
		    "1-1");
		ok(devlist(l[1], &nd) == ST_NA && nd == 0,
		    "a device list on a dial-back: ST_NA, no device (%u)", nd);
		is_int(devlist(client(port), &nd), ST_OK,
		    "the listener's device list (an allowed peer): ST_OK");
		is_int(nd, 1, "with its device");
		close(o[1]);
		close(l[1]);
	}
	export_adopt(sp[0], (struct sockaddr *)&gwsa, sizeof(gwsa), "1-1");
	is_int(import(sp[1]), ST_OK,
	    "a dial-back (192.0.2.1, not in allow-from) imports 1-1");
	is_int(n_import, 2, "two imports granted by the back end");

	/* SIGHUP: allow-from no longer has 127.0.0.1 */
	ok(export_set_conf(narrow, err, sizeof(err)) == 0, "reload");
	ok(closed_within(held, 1500),
	    "the import of a peer no longer in allow-from ends at once");
	is_int(n_release, 1, "and the back end releases the device");
	st = import(early);
	ok(st != ST_OK, "an import asked after the reload on a connection "
	    "accepted before it is refused (%ld)", st);
	is_int(n_import, 2, "the back end is not even asked");
	{
		uint32_t nd = 99;
		bool c;

		/* closed by the list hook, inside the engine's op step */
		is_int(devlist(early2, &nd), -1, "a device list asked after "
		    "the reload on a connection accepted before it: closed, "
		    "no reply");
		is_int(devlist(early3, &nd), -1, "and on another one");
		c = ext_op(early4);
		ok(c && n_ext == 1, "an extension op there: closed, the hook "
		    "not called (%d call in all)", n_ext);
	}
	ok(!closed_within(sp[1], 300), "the dial-back import stays");

	/* another reload: the dial-back is still no allow-from peer */
	ok(export_set_conf(narrow2, err, sizeof(err)) == 0, "reload again");
	ok(!closed_within(sp[1], 300), "the dial-back import still stays");
	is_int(n_release, 1, "one release so far");

	close(sp[1]);
	pump(100);
	is_int(n_release, 2, "the dial-back's release when it closes");

	/* allowed again: the engine is whole after those closes (its count
	 * of connections, its lists), and a zoned link-local name is an
	 * address like any other */
	ok(export_set_conf(ll, err, sizeof(err)) == 0,
	    "reload: 127.0.0.1 and fe80::/10 allowed");
	{
		uint32_t nd = 99;
		int c1 = client(port), c2 = client(port);

		is_int(devlist(c1, &nd), ST_OK, "a new connection's device "
		    "list: ST_OK");
		is_int(nd, 1, "with its device");
		is_int(devlist(c2, &nd), ST_OK, "and another's");
		close(c1);
		close(c2);
	}
	ok(export_addr_allowed("fe80::1%lo"), "fe80::1%%lo: allowed "
	    "(its zone is not part of the address)");
	ok(!export_addr_allowed("2001:db8::1%lo"), "2001:db8::1%%lo: not");

	close(held);
	close(early);
	close(early2);
	close(early3);
	close(early4);
	export_stop_listening();
	export_closeall();
	export_shutdown();
	pump(10);
	event_base_free(base);
	aconf_free(open_conf);
	aconf_free(narrow);
	aconf_free(narrow2);
	aconf_free(ll);
	return done_testing();
}
