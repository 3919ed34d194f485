/*
 * The control socket against a fake command table: framing, versions,
 * malformed and oversized input, privileges per class (from forked
 * clients running as nobody) with every refusal audited, caps, timeouts,
 * events and slow watchers, socket creation, the EMFILE pause, and the
 * pure protocol codec and argument helpers.
 */
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "control/config.h"
#include "control/control.h"
#include "base/jsontext.h"
#include "proto/ctlproto.h"
#include "base/log.h"
#include "proto/usbip.h"
#include "base/util.h"
#include "tap.h"

#define NOBODY	65534

static struct event_base *base;
static struct config *cfg;
static char dir[40], sockpath[100];

/* Audit callback records. */
static struct {
	uid_t	uid;
	char	cmd[64];
	char	why[256];
} audits[64];
static int naudits;

static void
audit_cb(const struct actor *who, const char *cmd, const char *why)
{
	if (naudits < (int)nitems(audits)) {
		audits[naudits].uid = who->uid;
		snprintf(audits[naudits].cmd, sizeof(audits[0].cmd), "%s", cmd);
		snprintf(audits[naudits].why, sizeof(audits[0].why), "%s", why);
	}
	naudits++;
}

/* The fake daemon core. */
static int emit_in_handler;

static enum ctl_err
f_list(json_t *args, const struct actor *who, json_t **result, char *err,
    size_t errlen)
{
	*result = json_pack("[{s:s, s:s}]", "busid", "tc17-1-1", "state",
	    "pending");
	if (emit_in_handler)
		control_event("pending", json_pack("{s:s}", "busid", "tc17-1-1"));
	return CTL_OK;
}

static enum ctl_err
f_approve(json_t *args, const struct actor *who, json_t **result, char *err,
    size_t errlen)
{
	const char *busid;
	struct approve_opts o;
	enum ctl_err e;

	if ((e = ctl_args_approve(args, &busid, &o, err, errlen)) != CTL_OK)
		return e;
	*result = json_pack("{s:s, s:i, s:s}", "busid", busid, "scope",
	    (int)o.scope, "by", who->name);
	return CTL_OK;
}

static enum ctl_err
f_deny(json_t *args, const struct actor *who, json_t **result, char *err,
    size_t errlen)
{
	snprintf(err, errlen, "device tc17-1-1 is attached; revoke it first");
	return CTL_E_REFUSED;
}

static enum ctl_err
f_show(json_t *args, const struct actor *who, json_t **result, char *err,
    size_t errlen)
{
	snprintf(err, errlen, "no device matches busid zz");
	*result = json_object();	/* must be freed by control.c */
	return CTL_E_NOTFOUND;
}

static enum ctl_err
f_admin(json_t *args, const struct actor *who, json_t **result, char *err,
    size_t errlen)
{
	*result = json_pack("{s:i}", "id", 7);
	return CTL_OK;
}

/* list as text; "over" asks for more than a frame holds. */
static enum ctl_err
t_list(json_t *args, const struct actor *who, struct jtext *out, char *err,
    size_t errlen)
{
	static char chunk[1 << 16];
	size_t i;

	if (json_is_true(json_object_get(args, "bad"))) {
		snprintf(err, errlen, "argument bad: refused");
		return CTL_E_USAGE;
	}
	jt_open(out, '[');
	jt_str(out, "tc17-1-1");
	jt_int(out, 7);
	if (json_is_true(json_object_get(args, "over"))) {
		memset(chunk, 'x', sizeof(chunk) - 1);
		for (i = 0; i <= CTL_MAX_RESPONSE / sizeof(chunk) && !out->over;
		    i++)
			jt_str(out, chunk);
	}
	jt_close(out, ']');
	return CTL_OK;
}

static const struct ctl_text_cmd text_cmds[] = {
	{ "list",	t_list },
};

/* A reply over the frame limit. */
static enum ctl_err
f_big(json_t *args, const struct actor *who, json_t **result, char *err,
    size_t errlen)
{
	char *s = malloc(CTL_MAX_RESPONSE + 1);

	memset(s, 'x', CTL_MAX_RESPONSE);
	s[CTL_MAX_RESPONSE] = '\0';
	*result = json_pack("{s:s}", "big", s);
	free(s);
	return CTL_OK;
}

/* "not yet" (CTL_E_AGAIN) until later_ready calls; -1: never ready */
static int later_calls, later_ready;

static enum ctl_err
f_later(json_t *args, const struct actor *who, json_t **result, char *err,
    size_t errlen)
{
	later_calls++;
	if (later_ready < 0 || later_calls < later_ready) {
		snprintf(err, errlen, "not ready after %d tries", later_calls);
		return CTL_E_AGAIN;
	}
	*result = json_pack("{s:i}", "tries", later_calls);
	return CTL_OK;
}

static const struct ctl_cmd fake_cmds[] = {
	{ "big",	PRIV_READ,	f_big },
	{ "later",	PRIV_READ,	f_later },
	{ "list",	PRIV_READ,	f_list },
	{ "show",	PRIV_READ,	f_show },
	{ "approve",	PRIV_APPROVE,	f_approve },
	{ "deny",	PRIV_APPROVE,	f_deny },
	{ "policy.add",	PRIV_ADMIN,	f_admin },
};

/* Run the loop for ms milliseconds. */
static void
pump(int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
}

static int
client_connect(void)
{
	struct sockaddr_un sun;
	int fd;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", sockpath);
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		close(fd);
		return -1;
	}
	fcntl(fd, F_SETFL, O_NONBLOCK);
	return fd;
}

static void
send_raw(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	ssize_t n;

	while (len > 0) {
		n = write(fd, p, len);
		if (n == -1 && errno == EAGAIN) {
			pump(1);
			continue;
		}
		if (n <= 0)
			return;
		p += n;
		len -= (size_t)n;
	}
}

static void
send_text(int fd, const char *text)
{
	uint8_t hdr[4];

	put_be32(hdr, (uint32_t)strlen(text));
	send_raw(fd, hdr, 4);
	send_raw(fd, text, strlen(text));
}

/* Per-fd receive buffers, so frames that arrive together are kept. */
static struct rbuf {
	int	fd;
	uint8_t	buf[1 << 20];
	size_t	len;
} rb[8];

static struct rbuf *
rbuf_of(int fd)
{
	size_t i;

	for (i = 0; i < nitems(rb); i++)
		if (rb[i].fd == fd)
			return &rb[i];
	for (i = 0; i < nitems(rb); i++)
		if (rb[i].fd == 0) {
			rb[i].fd = fd;
			rb[i].len = 0;
			return &rb[i];
		}
	abort();
}

static void
client_close(int fd)
{
	struct rbuf *r = rbuf_of(fd);

	r->fd = 0;
	r->len = 0;
	close(fd);
}

/*
 * Wait up to ms for a whole message.  NULL on timeout; *eof set when the
 * daemon closed the connection.
 */
static json_t *
recv_msg(int fd, int ms, int *eof)
{
	struct rbuf *r = rbuf_of(fd);
	json_t *msg;
	size_t used;
	char err[256];
	ssize_t n;
	uint64_t end = now_usec() + (uint64_t)ms * 1000;

	if (eof != NULL)
		*eof = 0;
	for (;;) {
		switch (ctl_frame_decode(r->buf, r->len, CTL_MAX_RESPONSE, &msg,
		    &used, err, sizeof(err))) {
		case CTL_DEC_OK:
			memmove(r->buf, r->buf + used, r->len - used);
			r->len -= used;
			return msg;
		case CTL_DEC_SHORT:
			break;
		default:
			diag("bad frame from daemon: %s", err);
			return NULL;
		}
		n = read(fd, r->buf + r->len, sizeof(r->buf) - r->len);
		if (n > 0) {
			r->len += (size_t)n;
			continue;
		}
		if (n == 0 || (n == -1 && errno != EAGAIN)) {
			if (eof != NULL)
				*eof = 1;
			return NULL;
		}
		if (now_usec() > end)
			return NULL;
		pump(2);
	}
}

static json_t *
rpc(int fd, const char *text)
{
	send_text(fd, text);
	return recv_msg(fd, 2000, NULL);
}

static const char *
err_code(json_t *m)
{
	return json_string_value(json_object_get(json_object_get(m, "error"),
	    "code"));
}

static const char *
err_message(json_t *m)
{
	return json_string_value(json_object_get(json_object_get(m, "error"),
	    "message"));
}

/* Wait until the daemon closed fd (EOF), at most ms. */
static int
wait_eof(int fd, int ms)
{
	json_t *m;
	int eof;
	uint64_t end = now_usec() + (uint64_t)ms * 1000;

	while (now_usec() < end) {
		m = recv_msg(fd, 20, &eof);
		json_decref(m);
		if (eof)
			return 1;
	}
	return 0;
}

static void
start(void)
{
	ok(control_init(base, cfg, fake_cmds, nitems(fake_cmds), audit_cb) == 0,
	    "control_init on %s", sockpath);
}

static void
test_socket_setup(void)
{
	struct sockaddr_un sun;
	struct stat st;
	int fd, fd2;

	/* A regular file in the way. */
	close(open(sockpath, O_CREAT | O_WRONLY, 0600));
	ok(control_init(base, cfg, fake_cmds, nitems(fake_cmds), audit_cb) == -1,
	    "refuses when the path is not a socket");
	unlink(sockpath);

	/* A live listener. */
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", sockpath);
	ok(bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0 &&
	    listen(fd, 1) == 0, "test listener");
	ok(control_init(base, cfg, fake_cmds, nitems(fake_cmds), audit_cb) == -1,
	    "refuses when a live daemon listens");
	ok(stat(sockpath, &st) == 0, "live socket left alone");
	close(fd);	/* now stale: bound, nobody listening */

	/* The stale socket is replaced. */
	cfg->control_mode = 0660;
	snprintf(cfg->control_group, sizeof(cfg->control_group), "nogroup");
	start();
	ok(stat(sockpath, &st) == 0 && S_ISSOCK(st.st_mode), "socket created");
	is_int(st.st_mode & 07777, 0660, "mode 0660");
	is_int(st.st_gid, NOBODY, "group nogroup");
	ok(control_init(base, cfg, fake_cmds, nitems(fake_cmds), audit_cb) == -1,
	    "a second control_init is refused");
	fd2 = client_connect();
	ok(fd2 != -1, "connects");
	client_close(fd2);
	control_shutdown();
	ok(stat(sockpath, &st) == -1 && errno == ENOENT,
	    "shutdown removes the socket");
}

/* A reply too large to send: an error the client can match to its request. */
static void
test_big_reply(void)
{
	json_t *m;
	int fd;

	/* building 64 MiB takes longer than the test's 300 ms idle timeout */
	cfg->control_timeout_ms = 30000;
	control_reconfigure(cfg);
	fd = client_connect();
	send_text(fd, "{\"v\":1,\"id\":41,\"cmd\":\"big\"}");
	m = recv_msg(fd, 30000, NULL);
	is_int(json_integer_value(json_object_get(m, "id")), 41,
	    "a reply over the frame limit: the error keeps the request's id");
	is_str(err_code(m), "limit", "... and is a limit error");
	json_decref(m);
	m = rpc(fd, "{\"v\":1,\"id\":42,\"cmd\":\"hello\"}");
	ok(json_is_true(json_object_get(m, "ok")), "... the connection goes on");
	json_decref(m);
	client_close(fd);
	cfg->control_timeout_ms = 300;
	control_reconfigure(cfg);
}

/* Text commands: the reply frame written in place. */
static void
test_text_reply(void)
{
	json_t *m;
	char *t;
	int fd;

	control_set_text_cmds(text_cmds, nitems(text_cmds));
	fd = client_connect();
	m = rpc(fd, "{\"v\":1,\"id\":51,\"cmd\":\"list\"}");
	t = m != NULL ? json_dumps(m, JSON_COMPACT) : NULL;
	is_str(t, "{\"v\":1,\"id\":51,\"ok\":true,\"result\":"
	    "[\"tc17-1-1\",7]}", "text command: the response as "
	    "ctl_response_ok() has it");
	free(t);
	json_decref(m);
	m = rpc(fd, "{\"v\":1,\"cmd\":\"list\"}");
	ok(m != NULL && json_is_null(json_object_get(m, "id")) &&
	    json_is_array(json_object_get(m, "result")),
	    "text command: no id, \"id\":null");
	json_decref(m);
	m = rpc(fd, "{\"v\":1,\"id\":52,\"cmd\":\"list\",\"args\":"
	    "{\"bad\":true}}");
	is_str(err_code(m), "usage", "text command: its error is the reply");
	is_int(json_integer_value(json_object_get(m, "id")), 52, "... with the id");
	json_decref(m);
	/* 64 MiB written: slow under ASan, longer than the 300 ms timeout */
	client_close(fd);
	cfg->control_timeout_ms = 30000;
	control_reconfigure(cfg);
	fd = client_connect();
	send_text(fd, "{\"v\":1,\"id\":53,\"cmd\":\"list\",\"args\":"
	    "{\"over\":true}}");
	m = recv_msg(fd, 30000, NULL);
	is_str(err_code(m), "limit", "text command over the frame limit: "
	    "a limit error");
	is_int(json_integer_value(json_object_get(m, "id")), 53, "... with the id");
	ok(err_message(m) != NULL && strstr(err_message(m), "64 MiB") != NULL,
	    "... naming the limit (%s)", err_message(m));
	json_decref(m);
	client_close(fd);
	cfg->control_timeout_ms = 300;
	control_reconfigure(cfg);
	control_set_text_cmds(NULL, 0);
}

static void
test_protocol(void)
{
	json_t *m;
	int fd, eof;
	uint8_t hdr[4];

	fd = client_connect();
	ok(fd != -1, "connect");

	m = rpc(fd, "{\"v\":1,\"id\":1,\"cmd\":\"hello\"}");
	ok(json_is_true(json_object_get(m, "ok")), "hello ok");
	is_int(json_integer_value(json_object_get(m, "id")), 1, "id echoed");
	is_str(json_string_value(json_object_get(json_object_get(m, "result"),
	    "privilege")), "admin", "root is admin");
	is_int(json_integer_value(json_object_get(json_object_get(m, "result"),
	    "version")), 1, "protocol version 1");
	json_decref(m);

	m = rpc(fd, "{\"v\":1,\"id\":2,\"cmd\":\"list\",\"args\":{}}");
	ok(json_is_array(json_object_get(m, "result")), "list returns array");
	json_decref(m);

	m = rpc(fd, "{\"v\":2,\"id\":3,\"cmd\":\"list\"}");
	is_str(err_code(m), "version", "v 2 refused with version");
	is_int(json_integer_value(json_object_get(m, "id")), 3,
	    "version error echoes id");
	ok(err_message(m) != NULL && strstr(err_message(m), "version 1") != NULL,
	    "version error names the supported version");
	json_decref(m);

	m = rpc(fd, "{\"id\":4,\"cmd\":\"list\"}");
	is_str(err_code(m), "version", "missing v refused");
	json_decref(m);

	m = rpc(fd, "{\"v\":1,\"id\":5,\"cmd\":\"list\"");
	is_str(err_code(m), "protocol", "truncated JSON: protocol error");
	ok(json_is_null(json_object_get(m, "id")), "id null");
	json_decref(m);

	m = rpc(fd, "[1,2]");
	is_str(err_code(m), "protocol", "array: protocol error");
	json_decref(m);

	m = rpc(fd, "{\"v\":1,\"id\":1,\"id\":2,\"cmd\":\"list\"}");
	is_str(err_code(m), "protocol", "duplicate key refused");
	json_decref(m);

	m = rpc(fd, "{\"v\":1,\"id\":\"x\",\"cmd\":\"list\"}");
	is_str(err_code(m), "protocol", "string id refused");
	json_decref(m);

	m = rpc(fd, "{\"v\":1,\"id\":6,\"cmd\":\"list\",\"args\":[]}");
	is_str(err_code(m), "protocol", "args array refused");
	json_decref(m);

	m = rpc(fd, "{\"v\":1,\"id\":7,\"cmd\":\"LIST\"}");
	is_str(err_code(m), "protocol", "invalid command name");
	json_decref(m);

	m = rpc(fd, "{\"v\":1,\"id\":8,\"cmd\":\"frobnicate\"}");
	is_str(err_code(m), "usage", "unknown command: usage");
	is_str(err_message(m), "unknown command \"frobnicate\"",
	    "unknown command message");
	json_decref(m);

	m = rpc(fd, "{\"v\":1,\"id\":9,\"cmd\":\"show\",\"args\":{\"busid\":"
	    "\"zz\"}}");
	is_str(err_code(m), "not_found", "handler error code");
	is_str(err_message(m), "no device matches busid zz",
	    "handler error message");
	json_decref(m);

	m = rpc(fd, "{\"v\":1,\"id\":10,\"cmd\":\"approve\",\"args\":{\"busid\":"
	    "\"tc\",\"scope\":\"for\",\"duration\":60}}");
	ok(json_is_true(json_object_get(m, "ok")), "approve with args");
	is_str(json_string_value(json_object_get(json_object_get(m, "result"),
	    "by")), "root", "actor name from SO_PEERCRED");
	json_decref(m);

	m = rpc(fd, "{\"v\":1,\"id\":11,\"cmd\":\"approve\",\"args\":{\"busid\":"
	    "\"tc\",\"scope\":\"sometimes\"}}");
	is_str(err_code(m), "usage", "bad scope");
	json_decref(m);

	naudits = 0;
	m = rpc(fd, "{\"v\":1,\"id\":12,\"cmd\":\"deny\",\"args\":{\"busid\":"
	    "\"tc\"}}");
	is_str(err_code(m), "refused", "handler refusal");
	is_int(naudits, 1, "handler refusal audited");
	is_str(audits[0].cmd, "deny", "audited command");
	is_str(audits[0].why, "device tc17-1-1 is attached; revoke it first",
	    "audited reason");
	json_decref(m);

	/* Two requests in one write, answered in order. */
	{
		const char *a = "{\"v\":1,\"id\":21,\"cmd\":\"hello\"}";
		const char *b = "{\"v\":1,\"id\":22,\"cmd\":\"list\"}";
		uint8_t buf[256];
		size_t la = strlen(a), lb = strlen(b);

		put_be32(buf, (uint32_t)la);
		memcpy(buf + 4, a, la);
		put_be32(buf + 4 + la, (uint32_t)lb);
		memcpy(buf + 8 + la, b, lb);
		send_raw(fd, buf, 8 + la + lb);
		m = recv_msg(fd, 2000, NULL);
		is_int(json_integer_value(json_object_get(m, "id")), 21,
		    "pipelined: first");
		json_decref(m);
		m = recv_msg(fd, 2000, NULL);
		is_int(json_integer_value(json_object_get(m, "id")), 22,
		    "pipelined: second");
		json_decref(m);
	}

	/* A request byte by byte still works. */
	{
		const char *t = "{\"v\":1,\"id\":30,\"cmd\":\"hello\"}";
		uint8_t buf[128];
		size_t i, l = strlen(t);

		put_be32(buf, (uint32_t)l);
		memcpy(buf + 4, t, l);
		for (i = 0; i < l + 4; i++) {
			send_raw(fd, buf + i, 1);
			pump(1);
		}
		m = recv_msg(fd, 2000, NULL);
		is_int(json_integer_value(json_object_get(m, "id")), 30,
		    "request split into single bytes");
		json_decref(m);
	}

	/* Oversized frame: limit error, then closed. */
	put_be32(hdr, 1025);
	send_raw(fd, hdr, 4);
	m = recv_msg(fd, 2000, &eof);
	is_str(err_code(m), "limit", "oversized frame: limit");
	json_decref(m);
	ok(wait_eof(fd, 2000), "closed after an oversized frame");
	client_close(fd);

	fd = client_connect();
	put_be32(hdr, 0);
	send_raw(fd, hdr, 4);
	m = recv_msg(fd, 2000, &eof);
	is_str(err_code(m), "limit", "zero-length frame: limit");
	json_decref(m);
	ok(wait_eof(fd, 2000), "closed after a zero-length frame");
	client_close(fd);

	/* A frame at the limit is fine. */
	{
		char big[1025];

		fd = client_connect();
		memset(big, ' ', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		memcpy(big, "{\"v\":1,\"id\":40,\"cmd\":\"hello\"}", 29);
		m = rpc(fd, big);
		ok(json_is_true(json_object_get(m, "ok")),
		    "1024-byte frame accepted");
		json_decref(m);
		client_close(fd);
	}
	pump(20);
	is_int(control_nconns(), 0, "all connections gone");
}

static void
test_timeouts(void)
{
	int fd, fd2;
	uint8_t hdr[4];
	json_t *m;
	uint64_t t0;

	/* Partial frame then silence. */
	fd = client_connect();
	put_be32(hdr, 100);
	send_raw(fd, hdr, 4);
	send_raw(fd, "{\"v\"", 4);
	t0 = now_usec();
	ok(wait_eof(fd, 3000), "partial frame: closed");
	ok(now_usec() - t0 >= 250000, "... after the timeout (%llu ms)",
	    (unsigned long long)(now_usec() - t0) / 1000);
	client_close(fd);

	/* Idle non-watcher closed; idle watcher kept. */
	fd = client_connect();
	fd2 = client_connect();
	m = rpc(fd2, "{\"v\":1,\"id\":1,\"cmd\":\"watch\"}");
	ok(json_is_true(json_object_get(m, "ok")), "watch ok");
	ok(json_is_array(json_object_get(json_object_get(m, "result"),
	    "events")), "watch lists its events");
	json_decref(m);
	ok(wait_eof(fd, 3000), "idle non-watcher closed");
	client_close(fd);
	pump(600);
	is_int(control_nwatchers(), 1, "idle watcher still connected");
	control_event("gone", json_pack("{s:s}", "busid", "x"));
	m = recv_msg(fd2, 1000, NULL);
	is_str(json_string_value(json_object_get(m, "event")), "gone",
	    "idle watcher gets an event");
	json_decref(m);
	client_close(fd2);
	pump(20);
	is_int(control_nwatchers(), 0, "watcher gone");
}

/*
 * A handler's "not yet": the request is run again until it answers, the
 * peer's idle timeout does not cut it meanwhile, the requests after it
 * are answered after it, a wait has a bound, and a peer that leaves
 * while its request is parked is cleaned up.
 */
static void
test_again(void)
{
	json_t *m;
	int fd, eof;
	uint64_t t0;

	fd = client_connect();
	later_calls = 0;
	later_ready = 12;	/* ~550 ms: over the 300 ms idle timeout */
	send_text(fd, "{\"v\":1,\"id\":1,\"cmd\":\"later\"}"
	    "");
	send_text(fd, "{\"v\":1,\"id\":2,\"cmd\":\"hello\"}");
	m = recv_msg(fd, 5000, &eof);
	is_int(json_integer_value(json_object_get(m, "id")), 1,
	    "not yet: the parked request is answered first");
	ok(json_is_true(json_object_get(m, "ok")), "... ok once ready");
	is_int(json_integer_value(json_object_get(json_object_get(m,
	    "result"), "tries")), 12, "... after 12 tries");
	json_decref(m);
	m = recv_msg(fd, 2000, &eof);
	is_int(json_integer_value(json_object_get(m, "id")), 2,
	    "... the request behind it answered after it");
	ok(!eof, "... the idle timeout did not cut the waiting peer");
	json_decref(m);
	client_close(fd);

	/* never ready: refused after the bound, with the handler's words */
	fd = client_connect();
	later_calls = 0;
	later_ready = -1;
	t0 = now_usec();
	send_text(fd, "{\"v\":1,\"id\":3,\"cmd\":\"later\"}");
	m = recv_msg(fd, CTL_AGAIN_MAX_MS + 5000, &eof);
	is_str(err_code(m), "refused", "never ready: refused");
	ok(err_message(m) != NULL &&
	    strncmp(err_message(m), "not ready after ", 16) == 0 &&
	    atoi(err_message(m) + 16) >= CTL_AGAIN_MAX_MS / CTL_AGAIN_STEP_MS / 2,
	    "... with the handler's last message (%s)", err_message(m) ?
	    err_message(m) : "none");
	ok(now_usec() - t0 >= (uint64_t)CTL_AGAIN_MAX_MS * 1000,
	    "... after the bound (%llu ms)",
	    (unsigned long long)(now_usec() - t0) / 1000);
	json_decref(m);
	client_close(fd);

	/* the peer leaves while parked: no further try, nothing leaks */
	fd = client_connect();
	later_calls = 0;
	later_ready = -1;
	send_text(fd, "{\"v\":1,\"id\":4,\"cmd\":\"later\"}");
	pump(120);
	client_close(fd);
	pump(200);
	t0 = (uint64_t)later_calls;
	pump(300);
	is_int(later_calls, (int)t0, "a peer gone while parked: no more tries");
	is_int((int)control_nconns(), 0, "... and its connection is freed");
}

static void
test_events(void)
{
	int w1, w2, other;
	json_t *m;
	double now = (double)time(NULL);

	w1 = client_connect();
	w2 = client_connect();
	other = client_connect();
	json_decref(rpc(w1, "{\"v\":1,\"id\":1,\"cmd\":\"watch\"}"));
	m = rpc(w2, "{\"v\":1,\"id\":1,\"cmd\":\"watch\",\"args\":{\"events\":"
	    "[\"approve\"]}}");
	is_int(json_array_size(json_object_get(json_object_get(m, "result"),
	    "events")), 1, "filtered watch");
	json_decref(m);
	m = rpc(other, "{\"v\":1,\"id\":1,\"cmd\":\"watch\",\"args\":{\"events\":"
	    "[\"plugged\"]}}");
	is_str(err_code(m), "usage", "unknown event name refused");
	json_decref(m);
	is_int(control_nwatchers(), 2, "two watchers");

	control_event("pending", json_pack("{s:s}", "busid", "tc17-1-1"));
	m = recv_msg(w1, 1000, NULL);
	is_str(json_string_value(json_object_get(m, "event")), "pending",
	    "watcher 1 gets pending");
	is_str(json_string_value(json_object_get(json_object_get(m, "data"),
	    "busid")), "tc17-1-1", "event data");
	ok(json_is_real(json_object_get(m, "time")) &&
	    json_real_value(json_object_get(m, "time")) >= now - 1,
	    "event time");
	is_int(json_integer_value(json_object_get(m, "v")), 1, "event v");
	json_decref(m);
	m = recv_msg(w2, 100, NULL);
	ok(m == NULL, "filtered watcher does not get pending");
	m = recv_msg(other, 100, NULL);
	ok(m == NULL, "non-watcher gets nothing");

	control_event("approve", NULL);
	m = recv_msg(w2, 1000, NULL);
	is_str(json_string_value(json_object_get(m, "event")), "approve",
	    "filtered watcher gets approve");
	ok(json_is_object(json_object_get(m, "data")), "NULL data is {}");
	json_decref(m);
	json_decref(recv_msg(w1, 1000, NULL));

	/* An event raised inside a handler comes after nothing is lost. */
	emit_in_handler = 1;
	m = rpc(w1, "{\"v\":1,\"id\":5,\"cmd\":\"list\"}");
	emit_in_handler = 0;
	is_str(json_string_value(json_object_get(m, "event")), "pending",
	    "event raised by a handler is queued first");
	json_decref(m);
	m = recv_msg(w1, 1000, NULL);
	is_int(json_integer_value(json_object_get(m, "id")), 5,
	    "then the response");
	json_decref(m);

	m = rpc(w1, "{\"v\":1,\"id\":6,\"cmd\":\"unwatch\"}");
	ok(json_is_true(json_object_get(m, "ok")), "unwatch");
	json_decref(m);
	control_event("pending", NULL);
	ok(recv_msg(w1, 100, NULL) == NULL, "no events after unwatch");
	client_close(w1);
	client_close(w2);
	client_close(other);
	pump(20);
}

static void
test_slow_watcher(void)
{
	int w, i, rcv = 4096;
	json_t *big;
	char *s;

	w = client_connect();
	setsockopt(w, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
	json_decref(rpc(w, "{\"v\":1,\"id\":1,\"cmd\":\"watch\"}"));
	s = malloc(16384);
	memset(s, 'a', 16383);
	s[16383] = '\0';
	for (i = 0; i < 400 && control_nwatchers() > 0; i++) {
		big = json_pack("{s:s}", "blob", s);
		control_event("pending", big);
		pump(1);
	}
	free(s);
	is_int(control_nwatchers(), 0, "slow watcher disconnected after %d "
	    "events", i);
	ok(i < 400, "daemon did not buffer without bound");
	ok(wait_eof(w, 3000), "slow watcher sees EOF after its backlog");
	client_close(w);
	pump(20);
}

static void
test_caps(void)
{
	int fds[8], i, extra, eof;
	json_t *m;

	/* max-connections 4, per uid 3. */
	for (i = 0; i < 3; i++) {
		fds[i] = client_connect();
		m = rpc(fds[i], "{\"v\":1,\"id\":1,\"cmd\":\"hello\"}");
		ok(json_is_true(json_object_get(m, "ok")), "conn %d ok", i + 1);
		json_decref(m);
	}
	extra = client_connect();
	m = recv_msg(extra, 2000, &eof);
	is_str(err_code(m), "limit", "4th connection of uid 0: limit");
	is_str(err_message(m), "too many control connections for uid 0 "
	    "(max-connections-per-uid 3)", "per-uid message");
	json_decref(m);
	ok(wait_eof(extra, 2000), "then closed");
	client_close(extra);
	pump(20);

	cfg->max_connections_per_uid = 10;
	control_reconfigure(cfg);
	fds[3] = client_connect();
	json_decref(rpc(fds[3], "{\"v\":1,\"id\":1,\"cmd\":\"hello\"}"));
	is_int(control_nconns(), 4, "four connections");
	/* max-connections is for non-admins: root is held to its per-uid
	 * cap only (integration test 64 runs the non-admin side) */
	extra = client_connect();
	m = rpc(extra, "{\"v\":1,\"id\":1,\"cmd\":\"hello\"}");
	ok(json_is_true(json_object_get(m, "ok")), "5th connection of root: "
	    "admitted past max-connections (admins are not held to it)");
	json_decref(m);
	is_int(control_nconns(), 5, "five connections");
	client_close(extra);
	for (i = 0; i < 4; i++)
		client_close(fds[i]);
	pump(50);
	is_int(control_nconns(), 0, "connections released");
	cfg->max_connections_per_uid = 3;
	control_reconfigure(cfg);
}

/*
 * Run cmd as uid/gid in a child; its exit status is the error class it
 * got (0 ok), 100 if it could not connect, 101 on no reply, 102 if the
 * daemon refused the connection before any request was answered.
 */
static int
as_user(uid_t uid, gid_t gid, const char *cmd)
{
	pid_t pid;
	int st, i;

	fflush(stdout);
	if ((pid = fork()) == 0) {
		char text[256], buf[4096];
		uint8_t hdr[4];
		size_t len = 0, used;
		ssize_t n;
		json_t *m;
		char err[128];
		int fd, code;
		struct sockaddr_un sun;

		alarm(5);
		if (setgroups(0, NULL) == -1 || setgid(gid) == -1 ||
		    setuid(uid) == -1)
			_exit(103);
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		memset(&sun, 0, sizeof(sun));
		sun.sun_family = AF_UNIX;
		snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", sockpath);
		if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1)
			_exit(100);
		snprintf(text, sizeof(text), "{\"v\":1,\"id\":99,\"cmd\":\"%s\","
		    "\"args\":{\"busid\":\"tc\"}}", cmd);
		put_be32(hdr, (uint32_t)strlen(text));
		/*
		 * A daemon that refuses at connect may have written its
		 * error and closed before we write: a failed write is then
		 * expected, and the reply is still there to read.
		 */
		signal(SIGPIPE, SIG_IGN);
		if (write(fd, hdr, 4) == 4)
			(void)!write(fd, text, strlen(text));
		for (;;) {
			if (ctl_frame_decode((uint8_t *)buf, len, sizeof(buf), &m,
			    &used, err, sizeof(err)) == CTL_DEC_OK)
				break;
			n = read(fd, buf + len, sizeof(buf) - len);
			if (n <= 0)
				_exit(101);
			len += (size_t)n;
		}
		if (json_is_true(json_object_get(m, "ok")))
			_exit(0);
		if (json_is_null(json_object_get(m, "id")))
			_exit(102);
		code = ctl_err_parse(err_code(m));
		_exit(code < 0 ? 104 : code);
	}
	for (i = 0; i < 5000; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 200;
		pump(1);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return 201;
}

static void
set_priv(enum ctl_priv cls, const char *list)
{
	char err[256];
	int c;

	for (c = PRIV_READ; c <= PRIV_ADMIN; c++)
		cfg->priv[c].n = 0;
	if (list != NULL && config_set(cfg, cls == PRIV_READ ? "allow-read" :
	    cls == PRIV_APPROVE ? "allow-approve" : "allow-admin", list, err,
	    sizeof(err)) != 0)
		diag("%s", err);
	control_reconfigure(cfg);
}

static void
test_privileges(void)
{
	char name[64];

	/* control_priv_for directly. */
	set_priv(PRIV_READ, NULL);
	is_int(control_priv_for(cfg, 0, 0, name, sizeof(name)), PRIV_ADMIN,
	    "root is admin");
	is_str(name, "root", "root's name");
	is_int(control_priv_for(cfg, NOBODY, NOBODY, name, sizeof(name)),
	    PRIV_NONE, "nobody holds nothing by default");
	is_str(name, "nobody", "nobody's name");
	is_int(control_priv_for(cfg, 54321, 54321, name, sizeof(name)),
	    PRIV_NONE, "unknown uid holds nothing");
	is_str(name, "54321", "unknown uid named by number");
	set_priv(PRIV_READ, "nobody");
	is_int(control_priv_for(cfg, NOBODY, NOBODY, NULL, 0), PRIV_READ,
	    "by user name");
	set_priv(PRIV_APPROVE, "65534");
	is_int(control_priv_for(cfg, NOBODY, NOBODY, NULL, 0), PRIV_APPROVE,
	    "by uid");
	set_priv(PRIV_ADMIN, "@nogroup");
	is_int(control_priv_for(cfg, NOBODY, 12345, NULL, 0), PRIV_ADMIN,
	    "by primary group from the passwd entry");
	set_priv(PRIV_READ, "@12345");
	is_int(control_priv_for(cfg, NOBODY, 12345, NULL, 0), PRIV_READ,
	    "by the peer's gid");
	set_priv(PRIV_READ, "@no-such-group");
	is_int(control_priv_for(cfg, NOBODY, NOBODY, NULL, 0), PRIV_NONE,
	    "unknown group matches nobody");

	/* Real connections from uid nobody (socket mode 0666 for this). */
	naudits = 0;
	set_priv(PRIV_READ, NULL);
	is_int(as_user(NOBODY, NOBODY, "list"), 102,
	    "no privilege: refused at connect");
	is_int(naudits, 1, "connect refusal audited");
	is_int(audits[0].uid, NOBODY, "audit names the uid");
	is_str(audits[0].cmd, "connect", "audit says connect");
	is_str(audits[0].why, "uid 65534 (nobody) holds no privilege on this "
	    "gateway", "audit reason");

	naudits = 0;
	set_priv(PRIV_READ, "nobody");
	is_int(as_user(NOBODY, NOBODY, "list"), 0, "read: list ok");
	is_int(as_user(NOBODY, NOBODY, "approve"), CTL_E_REFUSED,
	    "read: approve refused");
	is_int(as_user(NOBODY, NOBODY, "policy.add"), CTL_E_REFUSED,
	    "read: policy.add refused");
	is_int(naudits, 2, "both refusals audited");
	is_str(audits[0].cmd, "approve", "approve refusal audited");
	is_str(audits[0].why, "approve requires the approve privilege; uid "
	    "65534 (nobody) holds read", "refusal reason");
	is_str(audits[1].cmd, "policy.add", "policy.add refusal audited");

	naudits = 0;
	set_priv(PRIV_APPROVE, "@nogroup");
	is_int(as_user(NOBODY, NOBODY, "list"), 0, "approve: list ok");
	is_int(as_user(NOBODY, NOBODY, "approve"), 0, "approve: approve ok");
	is_int(as_user(NOBODY, NOBODY, "policy.add"), CTL_E_REFUSED,
	    "approve: policy.add refused");
	is_int(naudits, 1, "one refusal audited");

	set_priv(PRIV_ADMIN, "nobody");
	is_int(as_user(NOBODY, NOBODY, "policy.add"), 0, "admin: policy.add ok");
	is_int(as_user(NOBODY, NOBODY, "approve"), 0, "admin: approve ok");
	set_priv(PRIV_READ, NULL);
}

static void
test_emfile(void)
{
	struct rlimit old, rl;
	int fillers[64], nf = 0, fd, i;
	json_t *m;
	uint64_t t0;

	getrlimit(RLIMIT_NOFILE, &old);
	/* Leave exactly one free descriptor: the client's socket takes it. */
	for (;;) {
		fd = dup(0);
		if (fd == -1)
			break;
		if (nf < (int)nitems(fillers))
			fillers[nf++] = fd;
		else {
			close(fd);
			break;
		}
	}
	for (i = 0; i < nf; i++)
		close(fillers[i]);
	fd = dup(0);
	rl = old;
	rl.rlim_cur = (rlim_t)fd + 2;	/* fd and one more */
	close(fd);
	setrlimit(RLIMIT_NOFILE, &rl);
	nf = 0;
	while ((fd = dup(0)) != -1 && nf < (int)nitems(fillers))
		fillers[nf++] = fd;
	close(fillers[--nf]);		/* one slot for the client */
	fd = client_connect();
	ok(fd != -1, "client connected with the table full");
	t0 = now_usec();
	pump(200);			/* accept fails with EMFILE: paused */
	for (i = 0; i < nf; i++)
		close(fillers[i]);
	setrlimit(RLIMIT_NOFILE, &old);
	m = rpc(fd, "{\"v\":1,\"id\":1,\"cmd\":\"hello\"}");
	ok(json_is_true(json_object_get(m, "ok")), "served after the pause");
	ok(now_usec() - t0 >= 800000, "accept resumed after ~1 s (%llu ms)",
	    (unsigned long long)(now_usec() - t0) / 1000);
	json_decref(m);
	client_close(fd);
	pump(20);
}

static void
test_codec(void)
{
	uint8_t buf[64], *enc;
	json_t *m, *r;
	size_t used, len;
	char err[128];
	struct ctl_request req;
	struct ctl_reply rep;

	memcpy(buf, "\0\0\0\x02{}", 6);
	is_int(ctl_frame_decode(buf, 3, 100, &m, &used, err, sizeof(err)),
	    CTL_DEC_SHORT, "3 bytes: short");
	is_int(ctl_frame_decode(buf, 5, 100, &m, &used, err, sizeof(err)),
	    CTL_DEC_SHORT, "header + 1: short");
	is_int(ctl_frame_decode(buf, 6, 100, &m, &used, err, sizeof(err)),
	    CTL_DEC_OK, "{} decodes");
	is_int(used, 6, "6 bytes used");
	json_decref(m);
	is_int(ctl_frame_decode(buf, 6, 1, &m, &used, err, sizeof(err)),
	    CTL_DEC_TOOBIG, "over the limit");
	is_str(err, "frame length 2 outside 1..1", "limit message");
	memcpy(buf, "\0\0\0\x03{\0}", 7);
	is_int(ctl_frame_decode(buf, 7, 100, &m, &used, err, sizeof(err)),
	    CTL_DEC_BADJSON, "NUL inside JSON refused");
	is_int(used, 7, "bad frame consumed");
	memcpy(buf, "\0\0\0\x0c{\"a\":\"\\u0000\"}", 16);
	is_int(ctl_frame_decode(buf, 16, 100, &m, &used, err, sizeof(err)),
	    CTL_DEC_BADJSON, "\\u0000 refused");
	memcpy(buf, "\0\0\0\x08{\"a\":\"\xff\"}", 12);
	is_int(ctl_frame_decode(buf, 12, 100, &m, &used, err, sizeof(err)),
	    CTL_DEC_BADJSON, "invalid UTF-8 refused");

	m = ctl_request_new(5, "approve", json_pack("{s:s}", "busid", "x"));
	enc = ctl_frame_encode(m, CTL_MAX_REQUEST, &len);
	json_decref(m);
	ok(enc != NULL, "request encodes");
	is_int(get_be32(enc), len - 4, "length prefix");
	is_int(ctl_frame_decode(enc, len, CTL_MAX_REQUEST, &m, &used, err,
	    sizeof(err)), CTL_DEC_OK, "and decodes");
	is_int(ctl_request_parse(m, &req, err, sizeof(err)), CTL_OK,
	    "valid request");
	is_str(req.cmd, "approve", "cmd");
	is_int(req.id, 5, "id");
	is_str(json_string_value(json_object_get(req.args, "busid")), "x",
	    "args");
	json_decref(m);
	free(enc);
	m = json_pack("{s:s}", "a", "b");
	ok(ctl_frame_encode(m, 5, &len) == NULL, "encode over limit refused");
	json_decref(m);

	r = ctl_response_error(1, 9, CTL_E_AMBIGUOUS, "2 devices match");
	is_int(ctl_reply_parse(r, &rep, err, sizeof(err)), CTL_OK, "reply");
	is_int(rep.ok, 0, "not ok");
	is_int(rep.code, CTL_E_AMBIGUOUS, "ambiguous");
	is_str(rep.message, "2 devices match", "message");
	json_decref(r);
	r = json_pack("{s:i, s:n, s:b, s:{s:s}}", "v", 1, "id", "ok", 0, "error",
	    "code", "brand_new");
	is_int(ctl_reply_parse(r, &rep, err, sizeof(err)), CTL_OK,
	    "unknown code parses");
	is_int(rep.code, CTL_E_INTERNAL, "unknown code is internal");
	is_str(rep.code_name, "brand_new", "name kept");
	json_decref(r);
	r = ctl_event_msg("pending", 12.5, NULL);
	is_int(ctl_reply_parse(r, &rep, err, sizeof(err)), CTL_OK, "event");
	ok(rep.is_event && strcmp(rep.event, "pending") == 0 &&
	    rep.time == 12.5 && json_is_object(rep.data), "event fields");
	json_decref(r);
	is_int(ctl_err_parse("not_found"), CTL_E_NOTFOUND, "err names");
	is_int(ctl_err_parse("limit"), CTL_E_LIMIT, "err names (added)");
	is_int(ctl_err_parse("nope"), -1, "unknown err name");
}

static void
test_args(void)
{
	json_t *a;
	const char *busid;
	struct approve_opts o;
	char err[256];
	time_t now = time(NULL);

	a = json_pack("{s:s}", "busid", "tc");
	is_int(ctl_args_approve(a, &busid, &o, err, sizeof(err)), CTL_OK,
	    "busid only");
	is_int(o.scope, SCOPE_ONCE, "once by default");
	json_decref(a);
	a = json_pack("{s:s, s:s, s:i, s:s, s:s}", "busid", "tc", "scope", "for",
	    "duration", 3600, "to", "vdi01", "message", "ticket 42");
	is_int(ctl_args_approve(a, &busid, &o, err, sizeof(err)), CTL_OK,
	    "for 1h");
	ok(o.expires_at >= now + 3600 && o.expires_at <= now + 3602,
	    "expires in an hour");
	is_str(o.to_host, "vdi01", "to");
	is_str(o.message, "ticket 42", "message");
	json_decref(a);
	a = json_pack("{s:s, s:s}", "busid", "tc", "scope", "for");
	is_int(ctl_args_approve(a, &busid, &o, err, sizeof(err)), CTL_E_USAGE,
	    "for without duration");
	is_str(err, "missing argument duration", "message");
	json_decref(a);
	a = json_pack("{s:s, s:s, s:I}", "busid", "tc", "scope", "until",
	    "until", (json_int_t)now - 10);
	is_int(ctl_args_approve(a, &busid, &o, err, sizeof(err)), CTL_E_USAGE,
	    "until in the past");
	is_str(err, "argument until: expected a time in the future (within 10 "
	    "years)", "message");
	json_decref(a);
	a = json_pack("{s:s, s:s}", "busid", "tc", "message", "two\nlines");
	is_int(ctl_args_approve(a, &busid, &o, err, sizeof(err)), CTL_E_USAGE,
	    "multi-line message refused");
	json_decref(a);
	a = json_pack("{s:i}", "busid", 3);
	is_int(ctl_args_approve(a, &busid, &o, err, sizeof(err)), CTL_E_USAGE,
	    "integer busid");
	is_str(err, "argument busid: expected a string", "message");
	json_decref(a);
}

int
main(void)
{
	signal(SIGPIPE, SIG_IGN);
	log_init("test_control", 1, getenv("TEST_VERBOSE") ? LOG_LVL_DEBUG :
	    LOG_LVL_ERR);
	test_codec();
	test_args();

	if (geteuid() != 0) {
		diag("not root: skipping socket tests");
		return done_testing();
	}
	snprintf(dir, sizeof(dir), "/tmp/test_control.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return 1;
	chmod(dir, 0755);
	snprintf(sockpath, sizeof(sockpath), "%s/run/control.sock", dir);
	base = event_base_new();
	cfg = config_new();
	snprintf(cfg->control_socket, sizeof(cfg->control_socket), "%s",
	    sockpath);
	cfg->max_connections = 4;
	cfg->max_connections_per_uid = 3;
	cfg->control_max_message = 1024;
	cfg->control_max_output = 64 * 1024;
	cfg->control_timeout_ms = 300;

	mkdir(dir, 0755);
	{
		char run[96];

		snprintf(run, sizeof(run), "%s/run", dir);
		mkdir(run, 0755);
	}
	test_socket_setup();

	cfg->control_mode = 0666;
	cfg->control_group[0] = '\0';
	start();
	test_protocol();
	test_big_reply();
	test_text_reply();
	test_timeouts();
	test_again();
	test_events();
	test_slow_watcher();
	test_caps();
	test_privileges();
	test_emfile();
	control_shutdown();
	event_base_free(base);
	config_free(cfg);
	{
		char run[96];

		snprintf(run, sizeof(run), "%s/run", dir);
		rmdir(run);
		rmdir(dir);
	}
	return done_testing();
}
