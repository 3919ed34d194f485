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

#include "proto/ctlproto.h"
#include "base/jsontext.h"
#include "usbgw.h"
#include "proto/usbip.h"
#include "base/util.h"

#define CLIENT_READ_CHUNK	65536

struct client {
	int		 fd;
	char		 path[108];
	uint8_t		*buf;
	size_t		 len, cap;
	json_int_t	 next_id;
	json_t		*events;	/* array: queued event messages */
	int		 eof;
	int		 timeout_ms;	/* for a response */
	int		 greeting;	/* the first call: is it usbgwd? */
	int		 badproto;	/* ... and it did not speak the protocol */
	json_t		*early_error;	/* id-less error (refused at connect) */
	json_t		*details;	/* the last error reply's details */
};

static int call(struct client *, const char *, json_t *, json_t **,
    struct jtext *, int, char *, size_t, int);

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

static int client_greet(struct client *);

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
	/*
	 * A socket that accepts but is not usbgwd's (another program's), or
	 * a daemon stopped with SIGSTOP (the kernel still accepts into the
	 * backlog), would otherwise be found out only after the 30 s a
	 * command may take.  client_greet() asks the kernel who listens
	 * (SO_PEERCRED: its pid) and says so at once.
	 */
	cl->greeting = 1;
	if ((*status = client_greet(cl)) != EXIT_OK) {
		client_close(cl);
		return NULL;
	}
	cl->greeting = 0;
	cl->timeout_ms = CLIENT_TIMEOUT_MS;
	return cl;
}

/*
 * The listening process, from /proc: its command name into comm ("" if
 * not visible: another pid namespace) and its state letter (R, S, T for
 * stopped, t for traced, ...), '?' if unknown.
 */
static char
peer_proc(int fd, pid_t *pidp, char *comm, size_t commsz)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);
	char path[64], buf[512], *p, *q;
	FILE *f;
	size_t n;

	comm[0] = '\0';
	*pidp = 0;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) == -1 ||
	    uc.pid <= 0)
		return '?';
	*pidp = uc.pid;
	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)uc.pid);
	if ((f = fopen(path, "re")) == NULL)
		return '?';
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* "pid (comm) S ...": comm may hold spaces and parentheses */
	if ((p = strchr(buf, '(')) == NULL || (q = strrchr(buf, ')')) == NULL ||
	    q < p || q[1] != ' ' || q[2] == '\0')
		return '?';
	*q = '\0';
	usbgw_strlcpy(comm, p + 1, commsz);
	return q[2];
}

static int
client_greet(struct client *cl)
{
	json_t *me = NULL;
	char msg[512] = "", comm[64];
	pid_t pid;
	char state;
	int st;

	state = peer_proc(cl->fd, &pid, comm, sizeof(comm));
	if (state == 'T' || state == 't') {
		fprintf(stderr, "usbgw: %s: %s (pid %ld) is stopped (%s): it "
		    "cannot answer\n", cl->path, comm, (long)pid,
		    state == 'T' ? "SIGSTOP?" : "a debugger?");
		return EXIT_UNREACHABLE;
	}
	/*
	 * usbgwd (or a process we cannot see) gets the usual 30 s: its
	 * answer may wait for a slow user database (control-lookup-timeout).
	 * Another program gets 3 s to prove it speaks the protocol.
	 */
	cl->timeout_ms = comm[0] == '\0' || strcmp(comm, "usbgwd") == 0 ?
	    CLIENT_TIMEOUT_MS : CLIENT_HELLO_MS;
	st = call(cl, "hello", NULL, &me, NULL, 0, msg, sizeof(msg), 1);
	json_decref(me);
	switch (st) {
	case EXIT_OK:
		break;
	case -1:	/* no answer in time */
		if (comm[0] != '\0' && strcmp(comm, "usbgwd") != 0)
			fprintf(stderr, "usbgw: %s: no answer in %d s: it "
			    "belongs to %s (pid %ld), not usbgwd\n", cl->path,
			    cl->timeout_ms / 1000, comm, (long)pid);
		else
			fprintf(stderr, "usbgw: %s: no answer in %d s: "
			    "usbgwd is hung?\n", cl->path,
			    cl->timeout_ms / 1000);
		st = EXIT_UNREACHABLE;
		break;
	case EXIT_INTERNAL:
		if (cl->badproto) {
			fprintf(stderr, "usbgw: %s does not speak usbgwd's "
			    "control protocol: is it usbgwd's socket?\n",
			    cl->path);
			st = EXIT_UNREACHABLE;
			break;
		}
		/* else the daemon's own error (a limit, ...) */
		/* FALLTHROUGH */
	default:	/* refused at connect, or the daemon went away */
		fprintf(stderr, "usbgw: ");
		print_safe(stderr, msg);
		fprintf(stderr, "\n");
		break;
	}
	return st;
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
	json_decref(cl->details);
	free(cl);
}

json_t *
client_error_details(struct client *cl)
{
	return cl != NULL ? cl->details : NULL;
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
 * Wait until cl->buf starts with one whole frame, at most timeout_ms (-1
 * forever).  Returns 0 with *used its length (header included), -1 on
 * timeout, EXIT_UNREACHABLE at EOF, EXIT_INTERNAL on a framing error
 * (message printed).  The frame stays in the buffer until consume().
 */
static int
read_frame(struct client *cl, int timeout_ms, size_t *used)
{
	struct pollfd pfd;
	ssize_t n;
	uint32_t flen;
	size_t want;
	int r;
	uint64_t end = timeout_ms < 0 ? 0 :
	    now_usec() + (uint64_t)timeout_ms * 1000;

	for (;;) {
		want = CTL_FRAME_HDR;
		if (cl->len >= CTL_FRAME_HDR) {
			flen = get_be32(cl->buf);
			if (flen == 0 || flen > CTL_MAX_RESPONSE) {
				if (cl->greeting) {	/* client_greet says */
					cl->badproto = 1;
					return EXIT_INTERNAL;
				}
				fprintf(stderr, "usbgw: bad message from the "
				    "daemon: frame length %u outside 1..%d\n",
				    flen, CTL_MAX_RESPONSE);
				return EXIT_INTERNAL;
			}
			want = CTL_FRAME_HDR + (size_t)flen;
			if (cl->len >= want) {
				*used = want;
				return 0;
			}
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
		/*
		 * Room for the whole frame at once once its length is known;
		 * a big one in 2 MiB pages where the kernel allows (list of
		 * 10,000 devices: 6 MB, 1,500 page faults fewer).
		 */
		if (cl->cap - cl->len < CLIENT_READ_CHUNK || cl->cap < want) {
			size_t ncap = cl->cap * 2 + CLIENT_READ_CHUNK;
			struct jtext big;

			if (ncap < want + CLIENT_READ_CHUNK)
				ncap = want + CLIENT_READ_CHUNK;
			jtext_init(&big, ncap);
			jtext_reserve(&big, ncap);
			if (big.buf != NULL && big.cap >= ncap) {
				if (cl->len > 0)
					memcpy(big.buf, cl->buf, cl->len);
				free(cl->buf);
				cl->buf = (uint8_t *)big.buf;
			} else {
				jtext_free(&big);
				cl->buf = xreallocarray(cl->buf, 1, ncap);
			}
			cl->cap = ncap;
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

static void
consume(struct client *cl, size_t used)
{
	memmove(cl->buf, cl->buf + used, cl->len - used);
	cl->len -= used;
}

/*
 * Read one message, waiting at most timeout_ms (-1 forever).  Returns 0
 * with *msg, -1 on timeout, EXIT_UNREACHABLE at EOF, EXIT_INTERNAL on a
 * protocol error (message printed).
 */
static int
read_msg(struct client *cl, int timeout_ms, json_t **msg)
{
	size_t used;
	char err[256];
	int rv;

	*msg = NULL;
	if ((rv = read_frame(cl, timeout_ms, &used)) != 0)
		return rv;
	rv = 0;
	err[0] = '\0';
	switch (ctl_frame_decode(cl->buf, used, CTL_MAX_RESPONSE, msg, &used,
	    err, sizeof(err))) {
	case CTL_DEC_OK:
		break;
	case CTL_DEC_BADJSON:
	case CTL_DEC_TOOBIG:
	case CTL_DEC_SHORT:
		if (!cl->greeting)	/* else client_greet says */
			fprintf(stderr, "usbgw: bad message from the daemon: "
			    "%s\n", err);
		cl->badproto = cl->greeting;
		rv = EXIT_INTERNAL;
		break;
	}
	consume(cl, used);
	return rv;
}

/*
 * The fast way to a big result (list --json of 10,000 devices): if the
 * frame in cl->buf[0..n) is the successful response to request id, its
 * "result" is checked and written to out as jansson would write it with
 * JSON_INDENT(indent) (print_json: 2; 0: compact), without a tree; the other members are read with jansson
 * and checked by ctl_reply_parse as always.  Returns 1 when done, 0 when
 * the frame is something else (an event, an error reply, another id:
 * the caller decodes it the usual way), -1 when it is not valid JSON
 * (err set).
 */
static int
frame_result_text(const uint8_t *buf, size_t n, json_int_t id, int indent,
    struct jtext *out, char *err, size_t errlen)
{
	const char *start = (const char *)buf, *p, *end = start + n, *v;
	struct ctl_reply rep;
	struct jt_error e;
	json_t *head, *j;
	char key[64], perr[128];
	bool trunc, have_result = false;
	size_t mark = out->len;
	int rv = -1;

	head = json_object();
	p = jt_ws(start, end);
	if (p >= end || *p != '{') {
		snprintf(err, errlen, "message is not a JSON object");
		goto out;
	}
	p = jt_ws(p + 1, end);
	while (p < end && *p != '}') {
		if ((p = jt_string(start, p, end, key, sizeof(key), &trunc,
		    &e)) == NULL)
			goto bad;
		p = jt_ws(p, end);
		if (p >= end || *p != ':') {
			e.position = (size_t)(p - start);
			snprintf(e.text, sizeof(e.text), "':' expected");
			goto bad;
		}
		v = jt_ws(p + 1, end);
		if (!trunc && strcmp(key, "result") == 0 && !have_result) {
			have_result = true;
			jtext_reserve(out, n + n / 2);
			p = jt_scan(start, v, end, out, indent, 0, &e);
		} else if (!trunc && strcmp(key, "result") != 0 &&
		    json_object_get(head, key) == NULL) {
			if ((p = jt_scan(start, v, end, NULL, 0, 0, &e)) !=
			    NULL && (j = json_loadb(v, (size_t)(p - v),
			    JSON_DECODE_ANY, NULL)) != NULL)
				json_object_set_new(head, key, j);
		} else {
			snprintf(err, errlen, "duplicate or overlong member "
			    "name in the message");
			goto out;
		}
		if (p == NULL)
			goto bad;
		p = jt_ws(p, end);
		if (p < end && *p == ',') {
			p = jt_ws(p + 1, end);
			if (p >= end || *p != '"') {	/* no trailing comma */
				e.position = (size_t)(p - start);
				snprintf(e.text, sizeof(e.text),
				    "member name expected");
				goto bad;
			}
		} else if (p >= end || *p != '}') {
			e.position = (size_t)(p - start);
			snprintf(e.text, sizeof(e.text), "'}' or ',' expected");
			goto bad;
		}
	}
	if (p >= end || jt_ws(p + 1, end) != end) {
		e.position = (size_t)(p - start);
		snprintf(e.text, sizeof(e.text), "end of the message expected");
		goto bad;
	}
	rv = 0;
	if (!have_result || out->over ||
	    ctl_reply_parse(head, &rep, perr, sizeof(perr)) != CTL_OK ||
	    rep.is_event || !rep.has_id || rep.id != id || !rep.ok)
		goto out;
	rv = 1;
	goto out;
bad:
	snprintf(err, errlen, "malformed JSON at byte %zu: %s", e.position,
	    e.text);
out:
	if (rv != 1) {
		out->len = mark;
		out->over = false;
	}
	json_decref(head);
	return rv;
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
    struct jtext *text, int indent, char *emsg, size_t emsglen, int quiet)
{
	struct ctl_reply rep;
	json_t *req, *msg;
	json_int_t id = cl->next_id++;
	uint8_t *frame;
	size_t len, used;
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
		rv = read_frame(cl, cl->timeout_ms, &used);
		if (rv == 0 && text != NULL) {
			rv = frame_result_text(cl->buf + CTL_FRAME_HDR,
			    used - CTL_FRAME_HDR, id, indent, text, err,
			    sizeof(err));
			if (rv == 1) {
				consume(cl, used);
				return EXIT_OK;
			}
			if (rv == -1) {
				consume(cl, used);
				snprintf(emsg, emsglen, "bad message from the "
				    "daemon: %s", err);
				if (!quiet)
					fprintf(stderr, "usbgw: %s\n", emsg);
				return EXIT_INTERNAL;
			}
		}
		if (rv == 0)
			rv = read_msg(cl, 0, &msg);
		if (rv == -1 && cl->greeting)
			return -1;
		if (rv == -1) {
			snprintf(emsg, emsglen, "no answer from the daemon in "
			    "%d s", cl->timeout_ms / 1000);
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
			cl->badproto = cl->greeting;
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
	json_decref(cl->details);
	cl->details = rep.details != NULL ? json_incref(rep.details) : NULL;
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

	return call(cl, cmd, args, result, NULL, 0, msg, sizeof(msg), 0);
}

int
client_call_text(struct client *cl, const char *cmd, json_t *args,
    int indent, struct jtext *text)
{
	json_t *result = NULL;
	char msg[512];
	int st;

	st = call(cl, cmd, args, &result, text, indent, msg, sizeof(msg), 0);
	if (st == EXIT_OK && result != NULL) {
		/* not the fast way (never from usbgwd): the same text */
		char *t = json_dumps(result, (indent > 0 ? JSON_INDENT(indent) :
		    JSON_COMPACT) | JSON_REAL_PRECISION(15) | JSON_ENCODE_ANY);

		if (t != NULL)
			jt_raw(text, t, strlen(t));
		free(t);
	}
	json_decref(result);
	return st;
}

int
client_call_quiet(struct client *cl, const char *cmd, json_t *args,
    json_t **result, char *msg, size_t msglen)
{
	return call(cl, cmd, args, result, NULL, 0, msg, msglen, 1);
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
