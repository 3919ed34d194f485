/*
 * The CLI's side of the control socket: connect, call, and read events.
 * Blocking I/O with poll() timeouts; a response is matched to its request
 * by id, and events that arrive while a call waits are queued (bounded).
 */
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctlproto.h"
#include "usbgw.h"
#include "util.h"

#define CLIENT_READ_CHUNK	65536

struct client {
	int		 fd;
	char		 path[108];
	uint8_t		*buf;
	size_t		 len, cap;
	json_int_t	 next_id;
	json_t		*events;	/* array: queued event messages */
	int		 eof;
	json_t		*early_error;	/* id-less error (refused at connect) */
};

int
exit_for_error(enum ctl_err e)
{
	switch (e) {
	case CTL_OK:
		return EXIT_OK;
	case CTL_E_REFUSED:
		return EXIT_REFUSED;
	case CTL_E_USAGE:
		return EXIT_USAGE;
	case CTL_E_NOTFOUND:
	case CTL_E_AMBIGUOUS:
		return EXIT_NOTFOUND;
	default:
		return EXIT_INTERNAL;
	}
}

struct client *
client_open(const char *path, int *status)
{
	struct sockaddr_un sun;
	struct client *cl;
	int fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		fprintf(stderr, "usbgw: socket path too long: %s\n", path);
		*status = EXIT_USAGE;
		return NULL;
	}
	usbgw_strlcpy(sun.sun_path, path, sizeof(sun.sun_path));
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1) {
		fprintf(stderr, "usbgw: socket: %s\n", strerror(errno));
		*status = EXIT_INTERNAL;
		return NULL;
	}
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		int e = errno;

		close(fd);
		if (e == EACCES || e == EPERM) {
			fprintf(stderr, "usbgw: cannot connect to %s: %s (not in "
			    "the socket's group?)\n", path, strerror(e));
			*status = EXIT_REFUSED;
		} else {
			fprintf(stderr, "usbgw: cannot connect to %s: %s (is "
			    "usbgwd running?)\n", path, strerror(e));
			*status = EXIT_UNREACHABLE;
		}
		return NULL;
	}
	cl = xcalloc(1, sizeof(*cl));
	cl->fd = fd;
	usbgw_strlcpy(cl->path, path, sizeof(cl->path));
	cl->next_id = 1;
	cl->events = json_array();
	*status = EXIT_OK;
	return cl;
}

void
client_close(struct client *cl)
{
	if (cl == NULL)
		return;
	close(cl->fd);
	free(cl->buf);
	json_decref(cl->events);
	json_decref(cl->early_error);
	free(cl);
}

int
client_fd(struct client *cl)
{
	return cl->fd;
}

int
client_pending_events(struct client *cl)
{
	return (int)json_array_size(cl->events);
}

static int
send_all(struct client *cl, const uint8_t *p, size_t len)
{
	ssize_t n;

	while (len > 0) {
		n = write(cl->fd, p, len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * Read one message, waiting at most timeout_ms (-1 forever).  Returns 0
 * with *msg, -1 on timeout, EXIT_UNREACHABLE at EOF, EXIT_INTERNAL on a
 * protocol error (message printed).
 */
static int
read_msg(struct client *cl, int timeout_ms, json_t **msg)
{
	struct pollfd pfd;
	size_t used;
	ssize_t n;
	char err[256];
	int r;
	uint64_t end = timeout_ms < 0 ? 0 :
	    now_usec() + (uint64_t)timeout_ms * 1000;

	*msg = NULL;
	for (;;) {
		switch (ctl_frame_decode(cl->buf, cl->len, CTL_MAX_RESPONSE, msg,
		    &used, err, sizeof(err))) {
		case CTL_DEC_OK:
			memmove(cl->buf, cl->buf + used, cl->len - used);
			cl->len -= used;
			return 0;
		case CTL_DEC_BADJSON:
		case CTL_DEC_TOOBIG:
			fprintf(stderr, "usbgw: bad message from the daemon: "
			    "%s\n", err);
			return EXIT_INTERNAL;
		case CTL_DEC_SHORT:
			break;
		}
		if (cl->eof)
			return EXIT_UNREACHABLE;
		pfd.fd = cl->fd;
		pfd.events = POLLIN;
		if (timeout_ms >= 0) {
			uint64_t now = now_usec();

			r = poll(&pfd, 1, now >= end ? 0 :
			    (int)((end - now + 999) / 1000));
		} else
			r = poll(&pfd, 1, -1);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == 0)
			return -1;
		if (cl->cap - cl->len < CLIENT_READ_CHUNK) {
			if (cl->cap > CTL_MAX_RESPONSE + CLIENT_READ_CHUNK) {
				fprintf(stderr, "usbgw: message from the daemon "
				    "too large\n");
				return EXIT_INTERNAL;
			}
			cl->cap = cl->cap * 2 + CLIENT_READ_CHUNK;
			cl->buf = xreallocarray(cl->buf, 1, cl->cap);
		}
		n = read(cl->fd, cl->buf + cl->len, cl->cap - cl->len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			cl->eof = 1;
		else
			cl->len += (size_t)n;
	}
}

/* A message that is not the awaited response: queue events, keep errors. */
static int
stash(struct client *cl, json_t *msg, struct ctl_reply *rep)
{
	if (rep->is_event) {
		if (json_array_size(cl->events) >= CLIENT_MAX_QUEUED)
			json_array_remove(cl->events, 0);
		json_array_append_new(cl->events, msg);
		return 1;
	}
	if (!rep->has_id && !rep->ok) {
		/* refused at connect, or a limit: the daemon closes next */
		json_decref(cl->early_error);
		cl->early_error = msg;
		return 1;
	}
	json_decref(msg);
	return 0;
}

static int
report_early(struct client *cl, char *msg, size_t msglen, int quiet)
{
	struct ctl_reply rep;
	char err[128];

	if (cl->early_error == NULL ||
	    ctl_reply_parse(cl->early_error, &rep, err, sizeof(err)) != CTL_OK)
		return 0;
	if (quiet)
		snprintf(msg, msglen, "%s", rep.message);
	else {
		fprintf(stderr, "usbgw: ");
		print_safe(stderr, rep.message);
		fprintf(stderr, "\n");
	}
	return exit_for_error(rep.code);
}

static int
call(struct client *cl, const char *cmd, json_t *args, json_t **result,
    char *emsg, size_t emsglen, int quiet)
{
	struct ctl_reply rep;
	json_t *req, *msg;
	json_int_t id = cl->next_id++;
	uint8_t *frame;
	size_t len;
	char err[256];
	int rv, st;

	*result = NULL;
	req = ctl_request_new(id, cmd, args);
	frame = ctl_frame_encode(req, CTL_MAX_REQUEST, &len);
	json_decref(req);
	if (frame == NULL) {
		snprintf(emsg, emsglen, "request too large");
		if (!quiet)
			fprintf(stderr, "usbgw: request too large\n");
		return EXIT_USAGE;
	}
	/*
	 * A write error is not final: a daemon that refused us at connect
	 * has said why before closing, and read_msg() finds it.
	 */
	(void)send_all(cl, frame, len);
	free(frame);

	for (;;) {
		rv = read_msg(cl, CLIENT_TIMEOUT_MS, &msg);
		if (rv == -1) {
			snprintf(emsg, emsglen, "no answer from the daemon in "
			    "%d s", CLIENT_TIMEOUT_MS / 1000);
			if (!quiet)
				fprintf(stderr, "usbgw: %s\n", emsg);
			return EXIT_UNREACHABLE;
		}
		if (rv == EXIT_UNREACHABLE) {
			if ((st = report_early(cl, emsg, emsglen, quiet)) != 0)
				return st;
			snprintf(emsg, emsglen, "the daemon closed the "
			    "connection");
			if (!quiet)
				fprintf(stderr, "usbgw: %s\n", emsg);
			return EXIT_UNREACHABLE;
		}
		if (rv != 0)
			return rv;
		if ((st = ctl_reply_parse(msg, &rep, err, sizeof(err))) !=
		    CTL_OK) {
			json_decref(msg);
			snprintf(emsg, emsglen, "%s", err);
			if (!quiet)
				fprintf(stderr, "usbgw: %s\n", err);
			return EXIT_INTERNAL;
		}
		if (!rep.is_event && rep.has_id && rep.id == id)
			break;
		if (!stash(cl, msg, &rep))
			continue;
	}
	if (rep.ok) {
		*result = json_incref(rep.result);
		json_decref(msg);
		return EXIT_OK;
	}
	snprintf(emsg, emsglen, "%s", rep.message[0] != '\0' ? rep.message :
	    rep.code_name);
	if (!quiet) {
		fprintf(stderr, "usbgw: ");
		print_safe(stderr, emsg);
		fprintf(stderr, "\n");
	}
	st = exit_for_error(rep.code);
	json_decref(msg);
	return st;
}

int
client_call(struct client *cl, const char *cmd, json_t *args, json_t **result)
{
	char msg[512];

	return call(cl, cmd, args, result, msg, sizeof(msg), 0);
}

int
client_call_quiet(struct client *cl, const char *cmd, json_t *args,
    json_t **result, char *msg, size_t msglen)
{
	return call(cl, cmd, args, result, msg, msglen, 1);
}

int
client_next_event(struct client *cl, int timeout_ms, json_t **ev)
{
	struct ctl_reply rep;
	json_t *msg;
	char err[256];
	int rv;

	*ev = NULL;
	if (json_array_size(cl->events) > 0) {
		*ev = json_incref(json_array_get(cl->events, 0));
		json_array_remove(cl->events, 0);
		return EXIT_OK;
	}
	for (;;) {
		rv = read_msg(cl, timeout_ms, &msg);
		if (rv == EXIT_UNREACHABLE) {
			if (report_early(cl, err, sizeof(err), 0) != 0)
				return EXIT_UNREACHABLE;
			fprintf(stderr, "usbgw: the daemon closed the "
			    "connection\n");
			return EXIT_UNREACHABLE;
		}
		if (rv != 0)
			return rv;
		if (ctl_reply_parse(msg, &rep, err, sizeof(err)) != CTL_OK) {
			json_decref(msg);
			fprintf(stderr, "usbgw: %s\n", err);
			return EXIT_INTERNAL;
		}
		if (rep.is_event) {
			*ev = msg;
			return EXIT_OK;
		}
		if (!rep.has_id && !rep.ok) {
			json_decref(cl->early_error);
			cl->early_error = msg;
			continue;
		}
		json_decref(msg);	/* a stray response */
	}
}

int
cmd_connect(struct cmd_ctx *ctx)
{
	int st;

	if (ctx->cl != NULL)
		return EXIT_OK;
	ctx->cl = client_open(ctx->socket, &st);
	return ctx->cl != NULL ? EXIT_OK : st;
}

int
cmd_call(struct cmd_ctx *ctx, const char *cmd, json_t *args, json_t **result)
{
	int st;

	*result = NULL;
	if ((st = cmd_connect(ctx)) != EXIT_OK) {
		json_decref(args);
		return st;
	}
	st = client_call(ctx->cl, cmd, args, result);
	if (st == EXIT_OK && ctx->json)
		print_json(*result);
	return st;
}
