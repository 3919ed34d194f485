/*
 * The control socket server (protocol.md part 2).
 *
 * One struct ctl_conn per client, with an explicit state:
 *
 *	OPEN		reading requests, answering, maybe watching events
 *	DRAINING	a final error is queued; closed once it is written
 *	DEAD		closed; freed from the loop (a handler or an event
 *			broadcast may close a connection while a callback of
 *			that same connection is on the stack)
 *
 *	RESOLVING	accepted; who the peer is (user name, groups) is
 *			being looked up; requests wait in the input buffer
 *
 * Privilege is fixed at accept from SO_PEERCRED.  The daemon's table is
 * consulted for every command but the built-ins (hello, watch, unwatch).
 *
 * The user and group databases (NSS) may be a directory server: their
 * lookups (getpwuid_r, getgrouplist, getgrnam_r) run on a thread of their
 * own (worker.c), one at a time, never on the event loop.  A lookup still
 * running after control-lookup-timeout refuses its client; the thread
 * finishes it whenever NSS answers and the result is dropped.
 */
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "control/config.h"
#include "control/control.h"
#include "base/counters.h"
#include "proto/ctlproto.h"
#include "control/hooks.h"
#include "base/hostlimit.h"
#include "base/jsontext.h"
#include "base/log.h"
#include "proto/usbip.h"
#include "base/util.h"
#include "base/worker.h"

#include "base/version.h"

#define CONTROL_BACKLOG		64
#define CONTROL_ACCEPT_BURST	32	/* accepts per wakeup */
#define CONTROL_PAUSE_MS	1000	/* accept pause on EMFILE/ENFILE */
#define CONTROL_MAX_GROUPS	1024	/* supplementary groups considered */
#define CONTROL_PWBUF		16384
#define CTL_BURST		16	/* frames per read at CTL_PRIORITY */

enum conn_state {
	CONN_RESOLVING,
	CONN_OPEN,
	CONN_DRAINING,
	CONN_DEAD,
};

struct ctl_conn {
	TAILQ_ENTRY(ctl_conn)	 entry;
	enum conn_state		 state;
	uint64_t		 serial;
	struct bufferevent	*bev;
	struct actor		 who;
	gid_t			 gid;
	enum ctl_priv		 priv;
	int			 general;	/* not known to be admin */
	int			 probation;	/* admitted past max-connections:
						   kept only if admin */
	int			 watching;
	uint32_t		 events;	/* mask when watching */
	int			 watch_all;
	struct event		*lookup_ev;	/* lookup timeout */
	struct event		*more_ev;	/* frames left after a burst */
	/* a request whose handler said "not yet" (CTL_E_AGAIN): run again
	 * every CTL_AGAIN_STEP_MS until again_until; the frames after it
	 * wait, so that replies keep the requests' order */
	json_t			*parked;
	struct event		*again_ev;
	uint64_t		 again_until;	/* now_usec() */
};

/* A user lookup, from the loop to the lookup thread and back. */
struct lookup {
	uint64_t		 serial;	/* of the connection */
	uid_t			 uid;
	gid_t			 gid;
	struct config_privlist	 priv[PRIV_ADMIN + 1];	/* at accept */
	enum ctl_priv		 result;
	char			 name[sizeof(((struct actor *)0)->name)];
};

static struct worker	*lookups;	/* NULL: lookups on the loop */

TAILQ_HEAD(ctl_conns, ctl_conn);

static struct {
	struct event_base	*base;
	struct config		*cfg;		/* private copy */
	int			 fd;
	char			 path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct event		*accept_ev;
	struct event		*pause_ev;
	struct event		*reap_ev;
	const struct ctl_cmd	*cmds;
	size_t			 ncmds;
	const struct ctl_text_cmd *text_cmds;
	size_t			 ntext_cmds;
	control_audit_fn	 audit;
	struct ctl_conns	 conns;
	struct ctl_conns	 dead;
	unsigned		 nconns;
	unsigned		 ngeneral;	/* conns not known to be admin */
	unsigned		 nwatchers;
	uint64_t		 serial;
	struct hostlimit	*refusals;	/* audit rows per uid */
	control_summary_fn	 summary;
	void			(*commit)(void);
	control_gate_fn		 gate;
	void			(*hello)(json_t *);
	uint64_t		 limit_logged;	/* last "too many" log line */
	unsigned		 limit_unlogged;
} C = { .fd = -1 };

/* What the refusal budgets count (hostlimit.h), per uid. */
enum { RF_CONNECT, RF_COMMAND, RF_NKINDS };
static const char *const refusal_kinds[RF_NKINDS] = {
	"refused connect", "refused command",
};

static void	conn_close(struct ctl_conn *, const char *);
static void	conn_read_cb(struct bufferevent *, void *);
static void	again_cb(evutil_socket_t, short, void *);
static void	conn_update_timeouts(struct ctl_conn *);
static void	lookup_start(struct ctl_conn *);

static struct timeval
ms_timeval(unsigned ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	return tv;
}
static enum ctl_priv priv_compute(const struct config_privlist *, uid_t,
		    gid_t, char *, size_t);

static const char *const state_names[] = {
	"resolving", "open", "draining", "dead"
};

static void
conn_set_state(struct ctl_conn *c, enum conn_state s, const char *why)
{
	log_debug("control: conn %llu (uid %u): %s -> %s%s%s",
	    (unsigned long long)c->serial, (unsigned)c->who.uid,
	    state_names[c->state], state_names[s], why != NULL ? ": " : "",
	    why != NULL ? why : "");
	c->state = s;
}

static void
uid_key(uid_t uid, char *key, size_t len)
{
	snprintf(key, len, "control uid %u", (unsigned)uid);
}

/*
 * A refusal is an audit row and a log line, within the uid's budget
 * (control-audit-limit-per-uid rows a minute, -total from all uids);
 * past it, counted for the uid's audit-suppressed row and logged at
 * debug level only.  The peer gets its error either way.
 */
static void
refusal(const struct actor *who, const char *cmd, const char *why)
{
	char key[HOSTLIMIT_KEY_MAX];

	uid_key(who->uid, key, sizeof(key));
	if (C.refusals != NULL && !hostlimit_check(C.refusals, key,
	    strcmp(cmd, "connect") == 0 ? RF_CONNECT : RF_COMMAND)) {
		log_debug("control: refused %s for uid %u pid %ld (not "
		    "audited: over the uid's budget): %s", cmd,
		    (unsigned)who->uid, (long)who->pid, why);
		return;
	}
	log_info("control: refused %s for uid %u (%s) pid %ld: %s", cmd,
	    (unsigned)who->uid, who->name, (long)who->pid, why);
	if (C.audit != NULL)
		C.audit(who, cmd, why);
}

static void
refusals_write(const char *key, const char *detail)
{
	if (C.summary != NULL)
		C.summary(key, detail);
}

void
control_set_summary(control_summary_fn fn)
{
	C.summary = fn;
}

void
control_set_commit(void (*fn)(void))
{
	C.commit = fn;
}

void
control_set_gate(control_gate_fn fn)
{
	C.gate = fn;
}

void
control_set_hello(void (*fn)(json_t *))
{
	C.hello = fn;
}

void
control_set_text_cmds(const struct ctl_text_cmd *cmds, size_t n)
{
	C.text_cmds = cmds;
	C.ntext_cmds = n;
}

/* The output of a peer that reads it; NULL (and closed) for one that does not. */
static struct evbuffer *
conn_output(struct ctl_conn *c)
{
	struct evbuffer *out;

	if (c->state == CONN_DEAD)
		return NULL;
	out = bufferevent_get_output(c->bev);
	if (evbuffer_get_length(out) > C.cfg->control_max_output) {
		conn_close(c, "output over the high-water mark (peer not "
		    "reading)");
		return NULL;
	}
	return out;
}

static void
frame_free_cb(const void *data, size_t len, void *arg)
{
	free((void *)(uintptr_t)data);
}

/*
 * One text reply's buffer is kept for the next one: a list of 10,000
 * devices is some 6 MB, and a fresh buffer each time costs a page fault
 * per 4 KiB written (a fifth of the reply's time).  At most one is
 * kept, and only up to TEXT_SPARE_MAX.
 */
#define TEXT_SPARE_MAX	(32 * 1024 * 1024)
static struct {
	char	*buf;
	size_t	 cap;
} spare;

static void
text_free_cb(const void *data, size_t len, void *arg)
{
	size_t cap = (size_t)(uintptr_t)arg;

	if (spare.buf == NULL && cap <= TEXT_SPARE_MAX) {
		spare.buf = (char *)(uintptr_t)data;
		spare.cap = cap;
	} else
		free((void *)(uintptr_t)data);
}

/*
 * Queue one message; a peer that does not read its output is dropped.
 * A reply that cannot be encoded (over CTL_MAX_RESPONSE) is answered
 * with an error that keeps the request's id (has_id, id), so the client
 * hears why instead of waiting for an answer.
 */
static void
conn_send_reply(struct ctl_conn *c, json_t *msg, int has_id, json_int_t id)
{
	struct evbuffer *out;
	uint8_t *frame;
	size_t len;

	if (msg == NULL)
		return;
	if ((out = conn_output(c)) == NULL) {
		json_decref(msg);
		return;
	}
	frame = ctl_frame_encode(msg, CTL_MAX_RESPONSE, &len);
	json_decref(msg);
	if (frame == NULL) {
		log_warnx("control: reply too large or not encodable");
		msg = ctl_response_error(has_id, id, CTL_E_LIMIT,
		    "reply over the frame limit (" CTL_MAX_RESPONSE_TEXT ") "
		    "or not encodable");
		frame = ctl_frame_encode(msg, CTL_MAX_RESPONSE, &len);
		json_decref(msg);
		if (frame == NULL)
			return;
	}
	if (evbuffer_add_reference(out, frame, len, frame_free_cb, NULL) == -1)
		free(frame);	/* (libevent runs no cleanup on failure) */
}

static void
conn_send(struct ctl_conn *c, json_t *msg)
{
	conn_send_reply(c, msg, 0, 0);
}

static void
conn_reply_error(struct ctl_conn *c, int has_id, json_int_t id,
    enum ctl_err code, const char *message)
{
	conn_send(c, ctl_response_error(has_id, id, code, message));
}

/* Send a last error and close once it is written. */
static void
conn_fatal(struct ctl_conn *c, enum ctl_err code, const char *message)
{
	if (c->state != CONN_OPEN)
		return;
	conn_reply_error(c, 0, 0, code, message);
	if (c->state != CONN_OPEN)
		return;
	bufferevent_disable(c->bev, EV_READ);
	conn_set_state(c, CONN_DRAINING, message);
	if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
		conn_close(c, NULL);
}

static void
conn_free(struct ctl_conn *c)
{
	if (c == NULL)
		return;
	if (c->bev != NULL)
		bufferevent_free(c->bev);	/* closes the fd */
	if (c->lookup_ev != NULL)
		event_free(c->lookup_ev);
	if (c->more_ev != NULL)
		event_free(c->more_ev);
	if (c->again_ev != NULL)
		event_free(c->again_ev);
	json_decref(c->parked);
	free(c);
}

static void
reap_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ctl_conn *c;

	while ((c = TAILQ_FIRST(&C.dead)) != NULL) {
		TAILQ_REMOVE(&C.dead, c, entry);
		conn_free(c);
	}
}

static void
conn_close(struct ctl_conn *c, const char *why)
{
	if (c->state == CONN_DEAD)
		return;
	if (why != NULL)
		log_info("control: closing connection of uid %u (%s) pid %ld: "
		    "%s", (unsigned)c->who.uid, c->who.name, (long)c->who.pid,
		    why);
	conn_set_state(c, CONN_DEAD, why);
	if (c->watching)
		C.nwatchers--;
	c->watching = 0;
	if (c->general)
		C.ngeneral--;
	c->general = 0;
	C.nconns--;
	TAILQ_REMOVE(&C.conns, c, entry);
	TAILQ_INSERT_TAIL(&C.dead, c, entry);
	if (c->bev != NULL)
		bufferevent_disable(c->bev, EV_READ | EV_WRITE);
	if (c->lookup_ev != NULL)
		event_del(c->lookup_ev);
	if (c->again_ev != NULL)
		event_del(c->again_ev);
	event_active(C.reap_ev, EV_TIMEOUT, 0);
}

static ctl_text_fn
text_cmd_find(const char *name)
{
	size_t i;

	for (i = 0; i < C.ntext_cmds; i++)
		if (strcmp(C.text_cmds[i].name, name) == 0)
			return C.text_cmds[i].fn;
	return NULL;
}

/*
 * Run a text command and send its reply: the frame is written in place
 * (length, the response's head, the result the command writes, "}")
 * and handed to the output buffer without a copy.  The head is what
 * ctl_response_ok() encodes: {"v":1,"id":N,"ok":true,"result":...}.
 */
static enum ctl_err
conn_text_reply(struct ctl_conn *c, const struct ctl_request *req,
    ctl_text_fn fn, char *err, size_t errlen)
{
	struct evbuffer *out;
	struct jtext b;
	enum ctl_err rc;
	char head[64];
	int n;

	jtext_init(&b, CTL_FRAME_HDR + CTL_MAX_RESPONSE);
	if (spare.buf != NULL) {
		b.buf = spare.buf;
		b.cap = spare.cap;
		spare.buf = NULL;
	}
	jt_raw(&b, "\0\0\0\0", CTL_FRAME_HDR);
	if (req->has_id)
		n = snprintf(head, sizeof(head), "{\"v\":%d,\"id\":%" JSON_INTEGER_FORMAT
		    ",\"ok\":true,\"result\":", CTL_PROTO_VERSION, req->id);
	else
		n = snprintf(head, sizeof(head), "{\"v\":%d,\"id\":null,"
		    "\"ok\":true,\"result\":", CTL_PROTO_VERSION);
	jt_raw(&b, head, (size_t)n);
	if ((rc = fn(req->args, &c->who, &b, err, errlen)) != CTL_OK) {
		jtext_free(&b);
		return rc;
	}
	jt_close(&b, '}');
	if (b.over) {
		jtext_free(&b);
		snprintf(err, errlen, "the reply to %s is over the frame limit "
		    "(" CTL_MAX_RESPONSE_TEXT ", protocol.md 2.2); ask for less "
		    "(list: --state, --exporter)", req->cmd);
		log_warnx("control: %s", err);
		return CTL_E_LIMIT;
	}
	put_be32((uint8_t *)b.buf, (uint32_t)(b.len - CTL_FRAME_HDR));
	if ((out = conn_output(c)) == NULL) {
		jtext_free(&b);
		return CTL_OK;
	}
	if (evbuffer_add_reference(out, b.buf, b.len, text_free_cb,
	    (void *)(uintptr_t)b.cap) == -1)
		free(b.buf);
	return CTL_OK;
}

static const struct ctl_cmd *
cmd_find(const char *name)
{
	size_t i;

	for (i = 0; i < C.ncmds; i++)
		if (strcmp(C.cmds[i].name, name) == 0)
			return &C.cmds[i];
	return NULL;
}

static json_t *
builtin_hello(struct ctl_conn *c)
{
	json_t *r;

	r = json_pack("{s:i, s:s, s:I, s:s, s:I, s:s}",
	    "version", CTL_PROTO_VERSION,
	    "daemon", "usbgwd " USBGW_VERSION,
	    "uid", (json_int_t)c->who.uid,
	    "name", c->who.name,
	    "pid", (json_int_t)c->who.pid,
	    "privilege", ctl_priv_name(c->priv));
	if (r != NULL && C.hello != NULL)
		C.hello(r);
	return r;
}

static enum ctl_err
builtin_watch(struct ctl_conn *c, json_t *args, json_t **result, char *err,
    size_t errlen)
{
	json_t *evs, *v, *names;
	uint32_t mask = 0;
	size_t i;
	int ev;

	evs = json_object_get(args, "events");
	names = json_array();
	if (evs == NULL || json_is_null(evs)) {
		c->watch_all = 1;
		for (ev = 0; ev < HOOK_NEVENTS; ev++)
			json_array_append_new(names,
			    json_string(hook_event_name(ev)));
	} else if (!json_is_array(evs) || json_array_size(evs) == 0) {
		json_decref(names);
		snprintf(err, errlen, "argument events: expected a non-empty "
		    "array of event names");
		return CTL_E_USAGE;
	} else {
		json_array_foreach(evs, i, v) {
			if (!json_is_string(v) ||
			    (ev = hook_event_parse(json_string_value(v))) < 0) {
				size_t off;

				json_decref(names);
				if (json_is_string(v))
					off = (size_t)snprintf(err, errlen,
					    "no event is called \"%.40s\": "
					    "expected one of ",
					    json_string_value(v));
				else
					off = (size_t)snprintf(err, errlen,
					    "events: entry %zu is not an event "
					    "name: expected one of ", i + 1);
				for (ev = 0; ev < HOOK_NEVENTS && off < errlen;
				    ev++)
					off += (size_t)snprintf(err + off,
					    errlen - off, "%s%s", ev ? ", " : "",
					    hook_event_name(ev));
				return CTL_E_USAGE;
			}
			mask |= 1u << ev;
			json_array_append(names, v);
		}
		c->watch_all = 0;
	}
	c->events = mask;
	if (!c->watching)
		C.nwatchers++;
	c->watching = 1;
	*result = json_pack("{s:o}", "events", names);
	return CTL_OK;
}

/*
 * Park msg, whose handler said "not yet": it runs again from again_cb.
 * The first time sets the deadline; false once it has passed.
 */
static bool
conn_park(struct ctl_conn *c, json_t *msg, bool again)
{
	struct timeval tv = ms_timeval(CTL_AGAIN_STEP_MS);
	uint64_t now = now_usec();

	if (!again)
		c->again_until = now + (uint64_t)CTL_AGAIN_MAX_MS * 1000;
	else if (now >= c->again_until)
		return false;
	if (c->again_ev == NULL &&
	    (c->again_ev = evtimer_new(C.base, again_cb, c)) == NULL)
		return false;
	c->parked = json_incref(msg);
	evtimer_add(c->again_ev, &tv);
	/* the peer waits for this answer: no read timeout meanwhile */
	tv = ms_timeval(C.cfg->control_timeout_ms);
	bufferevent_set_timeouts(c->bev, NULL, &tv);
	return true;
}

static void
conn_request(struct ctl_conn *c, json_t *msg, bool again)
{
	struct ctl_request req;
	const struct ctl_cmd *cmd;
	json_t *result = NULL;
	ctl_text_fn tfn;
	const char *gate;
	enum ctl_err rc;
	char err[512], why[600];

	if (!again)
		cnt.control_requests++;
	err[0] = '\0';
	rc = ctl_request_parse(msg, &req, err, sizeof(err));
	if (rc != CTL_OK) {
		conn_reply_error(c, req.has_id, req.id, rc, err);
		return;
	}

	/* Built-ins need only a connection, which already means PRIV_READ. */
	if (strcmp(req.cmd, "hello") == 0) {
		conn_send(c, ctl_response_ok(req.has_id, req.id,
		    builtin_hello(c)));
		return;
	}
	if (strcmp(req.cmd, "watch") == 0) {
		rc = builtin_watch(c, req.args, &result, err, sizeof(err));
		if (rc == CTL_OK)
			conn_send(c, ctl_response_ok(req.has_id, req.id, result));
		else
			conn_reply_error(c, req.has_id, req.id, rc, err);
		conn_update_timeouts(c);
		return;
	}
	if (strcmp(req.cmd, "unwatch") == 0) {
		if (c->watching)
			C.nwatchers--;
		c->watching = 0;
		conn_send(c, ctl_response_ok(req.has_id, req.id, NULL));
		conn_update_timeouts(c);
		return;
	}

	if ((cmd = cmd_find(req.cmd)) == NULL) {
		snprintf(err, sizeof(err), "unknown command \"%s\"", req.cmd);
		conn_reply_error(c, req.has_id, req.id, CTL_E_USAGE, err);
		return;
	}
	if (c->priv < cmd->priv) {
		snprintf(why, sizeof(why), "%s requires the %s privilege; uid %u "
		    "(%s) holds %s", cmd->name, ctl_priv_name(cmd->priv),
		    (unsigned)c->who.uid, c->who.name, ctl_priv_name(c->priv));
		refusal(&c->who, cmd->name, why);
		conn_reply_error(c, req.has_id, req.id, CTL_E_REFUSED, why);
		return;
	}
	c->who.priv = c->priv;
	/* the daemon may refuse a change now (the store is unavailable) */
	if (cmd->priv > PRIV_READ && C.gate != NULL &&
	    (gate = C.gate(cmd->name)) != NULL) {
		usbgw_strlcpy(why, gate, sizeof(why));
		refusal(&c->who, cmd->name, why);
		conn_reply_error(c, req.has_id, req.id, CTL_E_INTERNAL, why);
		return;
	}
	if ((tfn = text_cmd_find(cmd->name)) != NULL) {
		if ((rc = conn_text_reply(c, &req, tfn, err, sizeof(err))) ==
		    CTL_OK)
			return;
	} else {
		rc = cmd->fn(req.args, &c->who, &result, err, sizeof(err));
		if (rc == CTL_E_AGAIN) {
			json_decref(result);
			result = NULL;
			if (conn_park(c, msg, again))
				return;
			rc = CTL_E_REFUSED;	/* waited long enough */
		}
		/* what a decision wrote is durable before "ok" is sent */
		if (cmd->priv > PRIV_READ && C.commit != NULL)
			C.commit();
		if (rc == CTL_OK) {
			conn_send_reply(c, ctl_response_ok(req.has_id, req.id,
			    result), req.has_id, req.id);
			return;
		}
	}
	if (err[0] == '\0')
		usbgw_strlcpy(err, ctl_err_name(rc), sizeof(err));
	if (rc == CTL_E_REFUSED)
		refusal(&c->who, cmd->name, err);
	/* a handler's result on an error: the error's details (one a line) */
	if (json_is_array(result) && json_array_size(result) > 0) {
		conn_send(c, ctl_response_error_details(req.has_id, req.id, rc,
		    err, result));
		return;
	}
	json_decref(result);
	conn_reply_error(c, req.has_id, req.id, rc, err);
}

static void
conn_read_cb(struct bufferevent *bev, void *arg)
{
	struct ctl_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	uint8_t hdr[CTL_FRAME_HDR], *p;
	size_t len, want, used;
	uint32_t n;
	json_t *msg;
	char err[256];
	unsigned burst = 0;

	while (c->state == CONN_OPEN && c->parked == NULL) {
		/*
		 * The control plane runs before the devices (priority 0),
		 * but one client's backlog must not hold them up: after a
		 * burst the rest of its frames wait their turn with
		 * everything else (more_ev, the devices' priority).
		 */
		if (burst++ == CTL_BURST) {
			if (evbuffer_get_length(in) >= CTL_FRAME_HDR)
				event_active(c->more_ev, EV_TIMEOUT, 1);
			break;
		}
		len = evbuffer_get_length(in);
		if (len < CTL_FRAME_HDR)
			break;
		evbuffer_copyout(in, hdr, sizeof(hdr));
		n = get_be32(hdr);
		want = (n == 0 || n > C.cfg->control_max_message) ?
		    CTL_FRAME_HDR : CTL_FRAME_HDR + (size_t)n;
		if (len < want)
			break;
		if ((p = evbuffer_pullup(in, (ev_ssize_t)want)) == NULL) {
			conn_close(c, "out of memory");
			return;
		}
		switch (ctl_frame_decode(p, want, C.cfg->control_max_message,
		    &msg, &used, err, sizeof(err))) {
		case CTL_DEC_OK:
			evbuffer_drain(in, used);
			conn_request(c, msg, false);
			json_decref(msg);
			break;
		case CTL_DEC_BADJSON:
			evbuffer_drain(in, used);
			conn_reply_error(c, 0, 0, CTL_E_PROTOCOL, err);
			break;
		case CTL_DEC_TOOBIG:
			conn_fatal(c, CTL_E_LIMIT, err);
			return;
		case CTL_DEC_SHORT:
			return;	/* not reached: want bytes are there */
		}
	}
	if (c->state == CONN_OPEN)
		conn_update_timeouts(c);
}

/* A parked request's next try; once answered, the frames after it. */
static void
again_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ctl_conn *c = arg;
	json_t *msg = c->parked;

	c->parked = NULL;
	if (c->state != CONN_OPEN || msg == NULL) {
		json_decref(msg);
		return;
	}
	conn_request(c, msg, true);
	json_decref(msg);
	if (c->state == CONN_OPEN && c->parked == NULL && c->bev != NULL)
		conn_read_cb(c->bev, c);
}

static void
conn_more_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ctl_conn *c = arg;

	if (c->state == CONN_OPEN && c->bev != NULL)
		conn_read_cb(c->bev, c);
}

static void
conn_write_cb(struct bufferevent *bev, void *arg)
{
	struct ctl_conn *c = arg;

	if (c->state == CONN_DRAINING)
		conn_close(c, NULL);
}

static void
conn_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct ctl_conn *c = arg;

	if (what & BEV_EVENT_TIMEOUT)
		conn_close(c, (what & BEV_EVENT_READING) ?
		    "timed out waiting for a request" :
		    "timed out writing (peer not reading)");
	else if (what & BEV_EVENT_EOF)
		conn_close(c, NULL);
	else if (what & BEV_EVENT_ERROR)
		conn_close(c, strerror(EVUTIL_SOCKET_ERROR()));
}

/*
 * A peer must make progress: with a partial frame buffered, or when it
 * does not watch events, it has control-timeout to send more.  A watcher
 * with nothing pending may stay silent forever.
 */
static void
conn_update_timeouts(struct ctl_conn *c)
{
	struct timeval tv;
	int partial;

	if (c->state != CONN_OPEN)
		return;
	tv = ms_timeval(C.cfg->control_timeout_ms);
	partial = evbuffer_get_length(bufferevent_get_input(c->bev)) > 0;
	/* a parked request: the peer waits for its answer (conn_park) */
	if ((c->watching && !partial) || c->parked != NULL)
		bufferevent_set_timeouts(c->bev, NULL, &tv);
	else
		bufferevent_set_timeouts(c->bev, &tv, &tv);
}

/*
 * Refuse a connection over a cap: a `limit` error, then close.  Counted
 * in the uid's audit-suppressed row; logged at most once a second (with
 * the number not logged meanwhile), whatever the rate of connects.
 */
static void
conn_over_limit(struct ctl_conn *c, const char *why)
{
	char key[HOSTLIMIT_KEY_MAX];
	uint64_t now = now_usec();

	uid_key(c->who.uid, key, sizeof(key));
	if (C.refusals != NULL)
		hostlimit_count_refused(C.refusals, key);
	if (now - C.limit_logged >= 1000000) {
		log_warnx("control: refusing uid %u pid %ld: %s (%u more "
		    "refused since the last such line)", (unsigned)c->who.uid,
		    (long)c->who.pid, why, C.limit_unlogged);
		C.limit_logged = now;
		C.limit_unlogged = 0;
	} else
		C.limit_unlogged++;
	conn_fatal(c, CTL_E_LIMIT, why);
}

static unsigned
conns_of_uid(uid_t uid)
{
	struct ctl_conn *c;
	unsigned n = 0;

	TAILQ_FOREACH(c, &C.conns, entry)
		if (c->who.uid == uid)
			n++;
	return n;
}

static void
conn_new(int fd)
{
	struct ctl_conn *c;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	char why[256];

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == -1 ||
	    len != sizeof(cred)) {
		log_warn("control: SO_PEERCRED");
		close(fd);
		return;
	}
	c = xcalloc(1, sizeof(*c));
	c->serial = ++C.serial;
	c->state = CONN_OPEN;
	c->who.kind = ACTOR_OPERATOR;
	c->who.uid = cred.uid;
	c->who.pid = cred.pid;
	c->gid = cred.gid;
	c->bev = bufferevent_socket_new(C.base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (c->bev == NULL ||
	    (c->more_ev = event_new(C.base, -1, 0, conn_more_cb, c)) == NULL) {
		log_warnx("control: bufferevent_socket_new failed");
		if (c->bev != NULL)
			bufferevent_free(c->bev);
		else
			close(fd);
		free(c);
		return;
	}
	bufferevent_priority_set(c->bev, CTL_PRIORITY);
	/* Count this one before the caps so a refused peer is accounted. */
	TAILQ_INSERT_TAIL(&C.conns, c, entry);
	C.nconns++;
	bufferevent_setcb(c->bev, conn_read_cb, conn_write_cb, conn_event_cb, c);
	bufferevent_setwatermark(c->bev, EV_READ, 0,
	    C.cfg->control_max_message + CTL_FRAME_HDR);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);

	snprintf(c->who.name, sizeof(c->who.name), "%u", (unsigned)cred.uid);
	if (conns_of_uid(cred.uid) > C.cfg->max_connections_per_uid) {
		snprintf(why, sizeof(why), "too many control connections for "
		    "uid %u (max-connections-per-uid %u)", (unsigned)cred.uid,
		    C.cfg->max_connections_per_uid);
		conn_over_limit(c, why);
		return;
	}
	/*
	 * max-connections is for everyone but admins; control-admin-reserve
	 * more are kept for them, so that no number of read-only watchers
	 * locks an admin out.  root and the daemon's own user are admins
	 * before any lookup, and only their per-uid cap applies to them.
	 * Anyone else counts as general until the lookup says admin; past
	 * max-connections it may still take a reserved slot on probation,
	 * and keeps it only if it turns out to be an admin.
	 */
	if (cred.uid != 0 && cred.uid != geteuid()) {
		c->general = 1;
		C.ngeneral++;
		if (C.nconns > C.cfg->max_connections +
		    C.cfg->control_admin_reserve) {
			snprintf(why, sizeof(why), "too many control "
			    "connections (max-connections %u and %u reserved "
			    "for admins are in use)", C.cfg->max_connections,
			    C.cfg->control_admin_reserve);
			conn_over_limit(c, why);
			return;
		}
		if (C.ngeneral > C.cfg->max_connections)
			c->probation = 1;
	}
	lookup_start(c);
}

/* Who the peer is, is known (c->priv, c->who.name): open for requests. */
static void
conn_resolved(struct ctl_conn *c)
{
	char why[256];

	if (c->lookup_ev != NULL)
		event_del(c->lookup_ev);
	conn_set_state(c, CONN_OPEN, NULL);
	log_debug("control: conn %llu from uid %u (%s) pid %ld: %s",
	    (unsigned long long)c->serial, (unsigned)c->who.uid, c->who.name,
	    (long)c->who.pid, ctl_priv_name(c->priv));
	if (c->priv == PRIV_NONE) {
		snprintf(why, sizeof(why), "uid %u (%s) holds no privilege on "
		    "this gateway", (unsigned)c->who.uid, c->who.name);
		refusal(&c->who, "connect", why);
		conn_fatal(c, CTL_E_REFUSED, why);
		return;
	}
	if (c->priv == PRIV_ADMIN && c->general) {
		c->general = 0;		/* an admin: off the general count */
		C.ngeneral--;
	} else if (c->probation) {
		snprintf(why, sizeof(why), "too many control connections "
		    "(max-connections %u in use; the %u past it are reserved "
		    "for admins)", C.cfg->max_connections,
		    C.cfg->control_admin_reserve);
		conn_over_limit(c, why);
		return;
	}
	c->probation = 0;
	conn_read_cb(c->bev, c);	/* requests sent meanwhile */
}

static void
lookup_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ctl_conn *c = arg;
	char why[256];

	if (c->state != CONN_RESOLVING)
		return;
	conn_set_state(c, CONN_OPEN, NULL);
	c->priv = PRIV_NONE;
	snprintf(why, sizeof(why), "the user and group lookup for uid %u did "
	    "not finish within %u ms", (unsigned)c->who.uid,
	    C.cfg->control_lookup_timeout_ms);
	log_warnx("control: %s", why);
	refusal(&c->who, "connect", why);
	conn_fatal(c, CTL_E_REFUSED, why);
}

/* A result from the lookup thread, on the loop. */
static void
lookup_done(void *arg)
{
	struct lookup *l = arg;
	struct ctl_conn *c;

	TAILQ_FOREACH(c, &C.conns, entry)
		if (c->serial == l->serial)
			break;
	if (c != NULL && c->state == CONN_RESOLVING) {
		c->priv = l->result;
		usbgw_strlcpy(c->who.name, l->name, sizeof(c->who.name));
		conn_resolved(c);
	}
	free(l);
}

/* On the lookup thread. */
static void
lookup_run(void *arg)
{
	struct lookup *l = arg;

	l->result = priv_compute(l->priv, l->uid, l->gid, l->name,
	    sizeof(l->name));
}

/*
 * Start finding out who the peer is.  Without the lookup thread (it could
 * not be started) the lookup happens here, as it did before there was one.
 */
static void
lookup_start(struct ctl_conn *c)
{
	struct lookup *l;
	struct timeval tv;

	if (lookups == NULL) {
		c->priv = control_priv_for(C.cfg, c->who.uid, c->gid,
		    c->who.name, sizeof(c->who.name));
		conn_resolved(c);
		return;
	}
	l = xcalloc(1, sizeof(*l));
	l->serial = c->serial;
	l->uid = c->who.uid;
	l->gid = c->gid;
	memcpy(l->priv, C.cfg->priv, sizeof(l->priv));
	conn_set_state(c, CONN_RESOLVING, NULL);
	if ((c->lookup_ev = evtimer_new(C.base, lookup_timeout_cb, c)) == NULL)
		fatalx("evtimer_new");
	tv = ms_timeval(C.cfg->control_lookup_timeout_ms);
	evtimer_add(c->lookup_ev, &tv);
	worker_submit(lookups, lookup_run, lookup_done, free, l);
}

static void
pause_cb(evutil_socket_t fd, short what, void *arg)
{
	event_add(C.accept_ev, NULL);
}

static void
accept_cb(evutil_socket_t fd, short what, void *arg)
{
	struct timeval tv;
	int s, i;

	for (i = 0; i < CONTROL_ACCEPT_BURST; i++) {
		s = accept4(C.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (s == -1) {
			switch (errno) {
			case EINTR:
			case ECONNABORTED:
				continue;
			case EAGAIN:
				return;
			case EMFILE:
			case ENFILE:
			case ENOBUFS:
			case ENOMEM:
				log_warn("control: accept (pausing %d ms)",
				    CONTROL_PAUSE_MS);
				event_del(C.accept_ev);
				tv = ms_timeval(CONTROL_PAUSE_MS);
				evtimer_add(C.pause_ev, &tv);
				return;
			default:
				log_warn("control: accept");
				return;
			}
		}
		conn_new(s);
	}
}

/* 0 found, -1 no such group, else the errno of the look-up. */
static int
lookup_group_err(const char *name, gid_t *gid)
{
	struct group gr, *res = NULL;
	char *buf;
	int rv;

	buf = xmalloc(CONTROL_PWBUF);
	rv = getgrnam_r(name, &gr, buf, CONTROL_PWBUF, &res);
	if (rv == 0 && res != NULL)
		*gid = res->gr_gid;
	free(buf);
	return rv != 0 ? rv : res != NULL ? 0 : -1;
}

static int
lookup_group(const char *name, gid_t *gid)
{
	return lookup_group_err(name, gid) == 0 ? 0 : -1;
}

static int
principal_gid(const struct config_principal *p, gid_t *gid)
{
	if (p->is_numeric) {
		*gid = (gid_t)p->id;
		return 0;
	}
	return lookup_group(p->name, gid);
}

enum ctl_priv
control_priv_for(const struct config *cfg, uid_t uid, gid_t gid, char *name,
    size_t namelen)
{
	return priv_compute(cfg->priv, uid, gid, name, namelen);
}

/* Thread-safe: the lookup thread's work (and the fallback's). */
static enum ctl_priv
priv_compute(const struct config_privlist *privs, uid_t uid, gid_t gid,
    char *name, size_t namelen)
{
	struct passwd pw, *res = NULL;
	gid_t *groups = NULL, pg;
	char *buf;
	int ng = 0, cls;
	size_t i, j;
	enum ctl_priv priv = PRIV_NONE;

	buf = xmalloc(CONTROL_PWBUF);
	if (getpwuid_r(uid, &pw, buf, CONTROL_PWBUF, &res) != 0)
		res = NULL;
	if (name != NULL) {
		if (res != NULL)
			usbgw_strlcpy(name, res->pw_name, namelen);
		else
			snprintf(name, namelen, "%u", (unsigned)uid);
	}
	if (uid == 0 || uid == geteuid()) {
		priv = PRIV_ADMIN;
		goto out;
	}
	if (res != NULL) {
		ng = CONTROL_MAX_GROUPS;
		groups = xcalloc((size_t)ng, sizeof(*groups));
		if (getgrouplist(res->pw_name, res->pw_gid, groups, &ng) == -1)
			ng = CONTROL_MAX_GROUPS;	/* the first ones */
	}

	for (cls = PRIV_ADMIN; cls >= PRIV_READ && priv == PRIV_NONE; cls--) {
		const struct config_privlist *pl = &privs[cls];

		for (i = 0; i < pl->n && priv == PRIV_NONE; i++) {
			const struct config_principal *p = &pl->p[i];

			if (!p->is_group) {
				if ((p->is_numeric && p->id == uid) ||
				    (!p->is_numeric && res != NULL &&
				    strcmp(p->name, res->pw_name) == 0))
					priv = (enum ctl_priv)cls;
				continue;
			}
			if (principal_gid(p, &pg) != 0)
				continue;
			if (pg == gid || (res != NULL && pg == res->pw_gid))
				priv = (enum ctl_priv)cls;
			for (j = 0; j < (size_t)ng && priv == PRIV_NONE; j++)
				if (groups[j] == pg)
					priv = (enum ctl_priv)cls;
		}
	}
out:
	free(groups);
	free(buf);
	return priv;
}

/* Is something answering on path?  1 live, 0 stale, -1 error. */
static int
socket_live(const char *path)
{
	struct sockaddr_un sun;
	int fd, rv;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	usbgw_strlcpy(sun.sun_path, path, sizeof(sun.sun_path));
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0)) == -1)
		return -1;
	rv = connect(fd, (struct sockaddr *)&sun, sizeof(sun));
	if (rv == 0 || errno == EAGAIN || errno == EINPROGRESS)
		rv = 1;
	else if (errno == ECONNREFUSED)
		rv = 0;
	else
		rv = -1;
	close(fd);
	return rv;
}

/*
 * The socket's group and mode from cfg (at start, and again at a reload:
 * who may connect).  Never wider for a moment: the mode goes to 0600
 * first, then the group, then the mode asked for.  -1 with err set; the
 * socket is then 0600 (nobody but root connects: closed, not open).
 */
static int
socket_perms(const struct config *cfg, char *err, size_t errlen)
{
	const char *g = cfg->control_group, *es;
	long long n;
	gid_t gid = (gid_t)-1;
	int rv;

	if (g[0] != '\0') {
		if (parse_num(g, 0, 0xfffffffeLL, &n, &es) == 0)
			gid = (gid_t)n;
		else if ((rv = lookup_group_err(g, &gid)) != 0) {
			snprintf(err, errlen, "control-group %s: %s", g,
			    rv > 0 ? strerror(rv) : "no such group");
			return -1;
		}
	}
	if (chmod(C.path, 0600) == -1 ||
	    (gid != (gid_t)-1 && chown(C.path, (uid_t)-1, gid) == -1) ||
	    chmod(C.path, cfg->control_mode) == -1) {
		snprintf(err, errlen, "%s: group %s, mode %04o: %s", C.path,
		    g[0] != '\0' ? g : "(unchanged)",
		    (unsigned)cfg->control_mode, strerror(errno));
		(void)chmod(C.path, 0600);
		return -1;
	}
	return 0;
}

static int
socket_create(const struct config *cfg)
{
	struct sockaddr_un sun;
	struct stat st;
	char dir[sizeof(sun.sun_path)], *slash, err[256];
	mode_t old;
	int fd, live;

	if (strlen(cfg->control_socket) >= sizeof(sun.sun_path)) {
		log_warnx("control: socket path too long: %s",
		    cfg->control_socket);
		return -1;
	}
	usbgw_strlcpy(C.path, cfg->control_socket, sizeof(C.path));

	usbgw_strlcpy(dir, C.path, sizeof(dir));
	if ((slash = strrchr(dir, '/')) != NULL && slash != dir) {
		*slash = '\0';
		if (mkdir(dir, 0755) == -1 && errno != EEXIST) {
			log_warn("control: mkdir %s", dir);
			return -1;
		}
	}

	if (lstat(C.path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			log_warnx("control: %s exists and is not a socket",
			    C.path);
			return -1;
		}
		live = socket_live(C.path);
		if (live == 1) {
			log_warnx("control: a daemon already listens on %s",
			    C.path);
			return -1;
		}
		if (live == -1) {
			log_warn("control: cannot test %s", C.path);
			return -1;
		}
		if (unlink(C.path) == -1) {
			log_warn("control: unlink stale %s", C.path);
			return -1;
		}
		log_info("control: removed stale socket %s", C.path);
	}

	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0)) == -1) {
		log_warn("control: socket");
		return -1;
	}
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	usbgw_strlcpy(sun.sun_path, C.path, sizeof(sun.sun_path));
	old = umask(0177);
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		umask(old);
		log_warn("control: bind %s", C.path);
		close(fd);
		return -1;
	}
	umask(old);
	if (socket_perms(cfg, err, sizeof(err)) == -1) {
		log_warnx("control: %s", err);
		goto fail;
	}
	if (listen(fd, CONTROL_BACKLOG) == -1) {
		log_warn("control: listen");
		goto fail;
	}
	return fd;
fail:
	unlink(C.path);
	close(fd);
	return -1;
}

int
control_init(struct event_base *base, const struct config *cfg,
    const struct ctl_cmd *cmds, size_t ncmds, control_audit_fn audit)
{
	if (C.fd != -1) {
		log_warnx("control: already started");
		return -1;
	}
	TAILQ_INIT(&C.conns);
	TAILQ_INIT(&C.dead);
	C.base = base;
	C.cmds = cmds;
	C.ncmds = ncmds;
	C.audit = audit;
	C.nconns = C.ngeneral = C.nwatchers = 0;
	C.cfg = xmalloc(sizeof(*C.cfg));
	memcpy(C.cfg, cfg, sizeof(*C.cfg));
	if ((C.fd = socket_create(cfg)) == -1) {
		free(C.cfg);
		C.cfg = NULL;
		return -1;
	}
	/* (NULL, logged: the lookups stay on the event loop) */
	lookups = worker_new(base, "control: user lookups", 1);
	C.accept_ev = event_new(base, C.fd, EV_READ | EV_PERSIST, accept_cb,
	    NULL);
	event_priority_set(C.accept_ev, CTL_PRIORITY);
	worker_priority(lookups, CTL_PRIORITY);
	C.pause_ev = evtimer_new(base, pause_cb, NULL);
	C.reap_ev = event_new(base, -1, 0, reap_cb, NULL);
	{
		static const struct hostlimit_spec spec = {
			.kinds = refusal_kinds,
			.nkinds = RF_NKINDS,
			.refused = "connections refused (max-connections, "
			    "max-connections-per-uid)",
			.per_key = "from one uid",
			.write = refusals_write,
		};

		C.refusals = hostlimit_new(base, &spec, NULL);
		hostlimit_limits(C.refusals, cfg->control_audit_limit_per_uid,
		    cfg->control_audit_limit_total);
	}
	event_add(C.accept_ev, NULL);
	log_info("control: listening on %s (mode %04o%s%s)", C.path,
	    (unsigned)cfg->control_mode, cfg->control_group[0] != '\0' ?
	    ", group " : "", cfg->control_group);
	return 0;
}

void
control_reconfigure(const struct config *cfg)
{
	if (C.cfg == NULL)
		return;
	char err[256];
	int changed;

	if (strcmp(cfg->control_socket, C.path) != 0)
		log_warnx("control: socket path change to %s needs a restart",
		    cfg->control_socket);
	changed = strcmp(cfg->control_group, C.cfg->control_group) != 0 ||
	    cfg->control_mode != C.cfg->control_mode;
	if (changed && socket_perms(cfg, err, sizeof(err)) == -1)
		log_warnx("control: reload: %s: the socket is 0600 now (root "
		    "only) until a reload or restart sets it", err);
	else if (changed)
		log_info("control: reload: socket %s now mode %04o%s%s",
		    C.path, (unsigned)cfg->control_mode,
		    cfg->control_group[0] != '\0' ? ", group " : "",
		    cfg->control_group);
	/* Keep the path the socket really has. */
	memcpy(C.cfg, cfg, sizeof(*C.cfg));
	usbgw_strlcpy(C.cfg->control_socket, C.path,
	    sizeof(C.cfg->control_socket));
	if (C.refusals != NULL)
		hostlimit_limits(C.refusals, cfg->control_audit_limit_per_uid,
		    cfg->control_audit_limit_total);
}

void
control_shutdown(void)
{
	struct ctl_conn *c;

	if (C.fd == -1)
		return;
	while ((c = TAILQ_FIRST(&C.conns)) != NULL)
		conn_close(c, NULL);
	reap_cb(-1, 0, NULL);
	hostlimit_free(C.refusals);	/* summaries still held back */
	C.refusals = NULL;
	worker_free(lookups);
	lookups = NULL;
	event_free(C.accept_ev);
	event_free(C.pause_ev);
	event_free(C.reap_ev);
	C.accept_ev = C.pause_ev = C.reap_ev = NULL;
	close(C.fd);
	C.fd = -1;
	unlink(C.path);
	free(C.cfg);
	C.cfg = NULL;
	free(spare.buf);
	spare.buf = NULL;
}

void
control_event(const char *type, json_t *data)
{
	struct ctl_conn *c, *next;
	struct evbuffer *out;
	struct timespec ts;
	json_t *msg;
	uint8_t *frame;
	size_t len;
	int ev;

	if (C.fd == -1 || C.nwatchers == 0) {
		json_decref(data);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	msg = ctl_event_msg(type, (double)ts.tv_sec +
	    (double)(ts.tv_nsec / 1000000) / 1000.0, data);
	if (msg == NULL)
		return;
	frame = ctl_frame_encode(msg, CTL_MAX_RESPONSE, &len);
	json_decref(msg);
	if (frame == NULL) {
		log_warnx("control: event %s not encodable, dropped", type);
		return;
	}
	ev = hook_event_parse(type);
	for (c = TAILQ_FIRST(&C.conns); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		if (c->state != CONN_OPEN || !c->watching || c->priv < PRIV_READ)
			continue;
		if (!c->watch_all && (ev < 0 || (c->events & (1u << ev)) == 0))
			continue;
		out = bufferevent_get_output(c->bev);
		if (evbuffer_get_length(out) > C.cfg->control_max_output) {
			conn_close(c, "watcher not reading its events");
			continue;
		}
		evbuffer_add(out, frame, len);
	}
	free(frame);
}

unsigned
control_nconns(void)
{
	return C.nconns;
}

unsigned
control_nwatchers(void)
{
	return C.nwatchers;
}

json_t *
ctl_actor_json(const struct actor *a)
{
	switch (a->kind) {
	case ACTOR_OPERATOR:
		return json_pack("{s:s, s:I, s:s, s:I}", "kind", "operator",
		    "uid", (json_int_t)a->uid, "name", a->name,
		    "pid", (json_int_t)a->pid);
	case ACTOR_RULE:
		return json_pack("{s:s, s:I}", "kind", "rule",
		    "rule_id", (json_int_t)a->rule_id);
	case ACTOR_SYSTEM:
		break;
	}
	return json_pack("{s:s}", "kind", "system");
}

enum ctl_err
ctl_arg_str(json_t *args, const char *key, int required, const char **out,
    char *err, size_t errlen)
{
	json_t *v = json_object_get(args, key);

	if (v == NULL || json_is_null(v)) {
		if (!required)
			return CTL_OK;
		snprintf(err, errlen, "missing argument %s", key);
		return CTL_E_USAGE;
	}
	if (!json_is_string(v)) {
		snprintf(err, errlen, "argument %s: expected a string", key);
		return CTL_E_USAGE;
	}
	*out = json_string_value(v);
	return CTL_OK;
}

enum ctl_err
ctl_arg_busid(json_t *args, const char **out, char *err, size_t errlen)
{
	enum ctl_err e;

	if ((e = ctl_arg_str(args, "busid", 1, out, err, errlen)) != CTL_OK)
		return e;
	if ((*out)[0] == '\0') {
		snprintf(err, errlen, "busid: an empty busid: expected "
		    "EXPORTER:BUSID (tc17:1-2) or a prefix of exactly one");
		return CTL_E_USAGE;
	}
	return CTL_OK;
}

enum ctl_err
ctl_arg_int(json_t *args, const char *key, int required, json_int_t min,
    json_int_t max, json_int_t *out, char *err, size_t errlen)
{
	json_t *v = json_object_get(args, key);
	json_int_t n;

	if (v == NULL || json_is_null(v)) {
		if (!required)
			return CTL_OK;
		snprintf(err, errlen, "missing argument %s", key);
		return CTL_E_USAGE;
	}
	if (!json_is_integer(v)) {
		snprintf(err, errlen, "argument %s: expected an integer", key);
		return CTL_E_USAGE;
	}
	n = json_integer_value(v);
	if (n < min || n > max) {
		snprintf(err, errlen, "argument %s: expected %" JSON_INTEGER_FORMAT
		    " to %" JSON_INTEGER_FORMAT, key, min, max);
		return CTL_E_USAGE;
	}
	*out = n;
	return CTL_OK;
}

enum ctl_err
ctl_arg_bool(json_t *args, const char *key, int *out, char *err,
    size_t errlen)
{
	json_t *v = json_object_get(args, key);

	if (v == NULL || json_is_null(v))
		return CTL_OK;
	if (!json_is_boolean(v)) {
		snprintf(err, errlen, "argument %s: expected true or false", key);
		return CTL_E_USAGE;
	}
	*out = json_is_true(v);
	return CTL_OK;
}

static int
printable(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 0;
	return 1;
}

#define APPROVE_MAX_SECONDS	(10LL * 366 * 86400)

enum ctl_err
ctl_args_approve(json_t *args, const char **busid, struct approve_opts *opts,
    char *err, size_t errlen)
{
	const char *scope = "once", *to = NULL, *msg = NULL;
	json_int_t d = 0, until = 0, now = (json_int_t)time(NULL);
	enum ctl_err e;
	int override = 0;

	memset(opts, 0, sizeof(*opts));
	if ((e = ctl_arg_bool(args, "override", &override, err, errlen)) !=
	    CTL_OK)
		return e;
	opts->override = override != 0;
	if ((e = ctl_arg_busid(args, busid, err, errlen)) != CTL_OK ||
	    (e = ctl_arg_str(args, "scope", 0, &scope, err, errlen)) != CTL_OK ||
	    (e = ctl_arg_str(args, "to", 0, &to, err, errlen)) != CTL_OK ||
	    (e = ctl_arg_str(args, "message", 0, &msg, err, errlen)) != CTL_OK)
		return e;
	if (strcmp(scope, "once") == 0)
		opts->scope = SCOPE_ONCE;
	else if (strcmp(scope, "for") == 0) {
		opts->scope = SCOPE_FOR;
		if ((e = ctl_arg_int(args, "duration", 1, 1, APPROVE_MAX_SECONDS,
		    &d, err, errlen)) != CTL_OK)
			return e;
		opts->expires_at = now + d;
	} else if (strcmp(scope, "until") == 0) {
		opts->scope = SCOPE_UNTIL;
		if ((e = ctl_arg_int(args, "until", 1, now + 1,
		    now + APPROVE_MAX_SECONDS, &until, err, errlen)) != CTL_OK) {
			if (json_is_integer(json_object_get(args, "until")))
				snprintf(err, errlen, "argument until: expected "
				    "a time in the future (within 10 years)");
			return e;
		}
		opts->expires_at = until;
	} else if (strcmp(scope, "permanent") == 0)
		opts->scope = SCOPE_PERMANENT;
	else {
		snprintf(err, errlen, "argument scope: expected one of once, "
		    "for, until, permanent");
		return CTL_E_USAGE;
	}
	if (to != NULL) {
		if (strlen(to) >= sizeof(opts->to_host) || !printable(to) ||
		    strchr(to, ' ') != NULL || to[0] == '\0') {
			snprintf(err, errlen, "the host to approve for (to): "
			    "expected a host name or address of 1 to %zu "
			    "printable characters without spaces",
			    sizeof(opts->to_host) - 1);
			return CTL_E_USAGE;
		}
		usbgw_strlcpy(opts->to_host, to, sizeof(opts->to_host));
	}
	if (msg != NULL) {
		if (strlen(msg) >= sizeof(opts->message) || !printable(msg)) {
			snprintf(err, errlen, "argument message: expected one "
			    "line of at most %zu bytes",
			    sizeof(opts->message) - 1);
			return CTL_E_USAGE;
		}
		usbgw_strlcpy(opts->message, msg, sizeof(opts->message));
	}
	return CTL_OK;
}
