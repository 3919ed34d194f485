/*
 * bench_watch: how long from an operator's request to the event reaching
 * a watcher (usbgw watch), over the control socket.
 *
 *	bench_watch [N]				self-hosted: control.c with a
 *						fake core in a child process
 *	bench_watch SOCKET BUSID [N]		a running usbgwd: approve and
 *						revoke BUSID in turn
 *
 * Each round sends a request on one connection and times the arrival of
 * the matching event on another, subscribed one.  Prints the median, 99th
 * percentile and maximum in microseconds; the target is 100 ms.
 */
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "control/config.h"
#include "control/control.h"
#include "proto/ctlproto.h"
#include "base/log.h"
#include "base/util.h"

#define TARGET_US	100000

struct conn {
	int	fd;
	uint8_t	buf[1 << 16];
	size_t	len;
};

static enum ctl_err
fake_approve(json_t *args, const struct actor *who, json_t **res, char *err,
    size_t errlen)
{
	const char *b = "x";

	ctl_arg_str(args, "busid", 0, &b, err, errlen);
	control_event("approve", json_pack("{s:s}", "busid", b));
	*res = json_pack("{s:s, s:s}", "busid", b, "state", "authorized");
	return CTL_OK;
}

static const struct ctl_cmd fake_cmds[] = {
	{ "approve",	PRIV_APPROVE,	fake_approve },
	{ "revoke",	PRIV_APPROVE,	fake_approve },
};

static pid_t
serve(const char *path)
{
	struct event_base *base;
	struct config *cfg;
	pid_t pid;

	if ((pid = fork()) != 0)
		return pid;
	log_init("bench_watch", 1, LOG_LVL_WARN);
	base = event_base_new();
	cfg = config_new();
	usbgw_strlcpy(cfg->control_socket, path, sizeof(cfg->control_socket));
	if (control_init(base, cfg, fake_cmds, nitems(fake_cmds), NULL) != 0)
		_exit(1);
	event_base_dispatch(base);
	_exit(0);
}

static int
conn_open(struct conn *c, const char *path)
{
	struct sockaddr_un sun;
	int i;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	usbgw_strlcpy(sun.sun_path, path, sizeof(sun.sun_path));
	c->len = 0;
	for (i = 0; i < 200; i++) {
		c->fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (connect(c->fd, (struct sockaddr *)&sun, sizeof(sun)) == 0)
			return 0;
		close(c->fd);
		usleep(10000);
	}
	return -1;
}

static void
conn_send(struct conn *c, json_int_t id, const char *cmd, json_t *args)
{
	json_t *m = ctl_request_new(id, cmd, args);
	uint8_t *f;
	size_t len;

	f = ctl_frame_encode(m, CTL_MAX_REQUEST, &len);
	json_decref(m);
	if (f == NULL || write(c->fd, f, len) != (ssize_t)len) {
		fprintf(stderr, "bench_watch: write failed\n");
		exit(1);
	}
	free(f);
}

static json_t *
conn_recv(struct conn *c)
{
	struct pollfd pfd = { c->fd, POLLIN, 0 };
	json_t *m;
	size_t used;
	ssize_t n;
	char err[256];

	for (;;) {
		if (ctl_frame_decode(c->buf, c->len, CTL_MAX_RESPONSE, &m, &used,
		    err, sizeof(err)) == CTL_DEC_OK) {
			memmove(c->buf, c->buf + used, c->len - used);
			c->len -= used;
			return m;
		}
		if (poll(&pfd, 1, 5000) <= 0 ||
		    (n = read(c->fd, c->buf + c->len,
		    sizeof(c->buf) - c->len)) <= 0) {
			fprintf(stderr, "bench_watch: no answer\n");
			exit(1);
		}
		c->len += (size_t)n;
	}
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
	struct conn req, w;
	const char *path, *busid = "bench-1";
	char tmp[] = "/tmp/bench_watch.XXXXXX", sock[128];
	uint64_t *lat, t0;
	json_t *m, *r;
	pid_t srv = 0;
	int n = 1000, i, self = argc < 3;
	const char *ev;

	signal(SIGPIPE, SIG_IGN);
	if (self) {
		if (argc == 2)
			n = atoi(argv[1]);
		if (mkdtemp(tmp) == NULL)
			return 1;
		snprintf(sock, sizeof(sock), "%s/c.sock", tmp);
		path = sock;
		srv = serve(path);
	} else {
		path = argv[1];
		busid = argv[2];
		if (argc > 3)
			n = atoi(argv[3]);
	}
	if (n < 1 || n > 1000000)
		n = 1000;
	if (conn_open(&w, path) != 0 || conn_open(&req, path) != 0) {
		fprintf(stderr, "bench_watch: cannot connect to %s\n", path);
		return 1;
	}
	conn_send(&w, 1, "watch", json_pack("{s:[s,s,s]}", "events", "approve",
	    "revoke", "pending"));
	json_decref(conn_recv(&w));
	lat = xcalloc((size_t)n, sizeof(*lat));
	for (i = 0; i < n; i++) {
		const char *cmd = self || i % 2 == 0 ? "approve" : "revoke";

		t0 = now_usec();
		conn_send(&req, i + 1, cmd, json_pack("{s:s}", "busid", busid));
		for (;;) {
			m = conn_recv(&w);
			ev = json_string_value(json_object_get(m, "event"));
			r = json_object_get(json_object_get(m, "data"), "busid");
			if (ev != NULL && (strcmp(ev, cmd) == 0 ||
			    (strcmp(cmd, "revoke") == 0 &&
			    strcmp(ev, "pending") == 0)) &&
			    json_is_string(r) &&
			    strcmp(json_string_value(r), busid) == 0) {
				json_decref(m);
				break;
			}
			json_decref(m);
		}
		lat[i] = now_usec() - t0;
		m = conn_recv(&req);
		if (!json_is_true(json_object_get(m, "ok"))) {
			fprintf(stderr, "bench_watch: %s refused\n", cmd);
			return 1;
		}
		json_decref(m);
	}
	qsort(lat, (size_t)n, sizeof(*lat), cmp_u64);
	printf("watch latency (%s): %d rounds, median %llu us, p99 %llu us, "
	    "max %llu us (target < %d us): %s\n",
	    self ? "control socket, fake core" : "usbgwd", n,
	    (unsigned long long)lat[n / 2],
	    (unsigned long long)lat[(size_t)n * 99 / 100],
	    (unsigned long long)lat[n - 1], TARGET_US,
	    lat[(size_t)n * 99 / 100] < TARGET_US ? "ok" : "MISSED");
	free(lat);
	if (srv > 0) {
		kill(srv, SIGTERM);
		waitpid(srv, NULL, 0);
		unlink(sock);
		rmdir(tmp);
	}
	return 0;
}
