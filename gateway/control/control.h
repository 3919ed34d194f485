/*
 * The control socket: a Unix stream socket the usbgw CLI talks to with the
 * protocol in ctlproto.h / protocol.md part 2.
 *
 * control.c owns the socket, framing, peer credentials (SO_PEERCRED at
 * accept) and privilege checks; the daemon core supplies a table of
 * struct ctl_cmd (ctl.h) and an audit callback.  A request's "cmd" is
 * looked up in the table; a peer whose privilege is below the entry's
 * priv is refused without calling it.  Built-in commands handled here:
 *
 *	hello	(PRIV_READ)	protocol version, peer uid/name/privilege
 *	watch	(PRIV_READ)	subscribe this connection to events
 *	unwatch	(PRIV_READ)	unsubscribe
 *
 * There is one control socket per process (module state, like log.c).
 */
#ifndef USBGW_CONTROL_H
#define USBGW_CONTROL_H

#include <stddef.h>
#include <sys/types.h>
#include <jansson.h>

#include "proto/ctl.h"

struct event_base;
struct config;

/*
 * The loop priority of the control socket's events (libevent: lower runs
 * first).  The daemon's base has CTL_NPRIORITIES queues, everything else
 * at the default (1), and a dispatch interval that returns to polling
 * after a few ms of device work (usbgwd.c): an operator's command waits
 * for at most that, not for a whole pass of a 10,000-device claim storm.
 * One client's backlog yields after CTL_BURST frames (control.c).
 */
#define CTL_PRIORITY	0
#define CTL_NPRIORITIES	2

/*
 * Called for every refused request or connection: a peer without any
 * privilege at connect (cmd "connect"), a command above the peer's
 * privilege, and any handler that returns CTL_E_REFUSED.  why is a
 * one-line reason.  Called from the event loop; must not block.
 */
typedef void (*control_audit_fn)(const struct actor *who, const char *cmd,
    const char *why);
/* One summary row for the refusals of one uid not written one by one
 * (object: "control uid U"), at the end of its minute. */
typedef void (*control_summary_fn)(const char *object, const char *detail);

/*
 * A command whose result is written as JSON text instead of built as a
 * json_t: fn appends exactly one JSON value to out (jsontext.h: its
 * writer, or text it checked), which control.c sends as the response's
 * "result" in a frame it builds in place, without a tree or a second
 * dump (`list` of 10,000 devices).  The command's entry in the ctl_cmd
 * table still names its privilege (and a json_t fn for other callers);
 * a name registered here is answered by fn.  A reply over
 * CTL_MAX_RESPONSE gets a `limit` error.  The table must outlive the
 * control socket.
 */
struct jtext;
typedef enum ctl_err (*ctl_text_fn)(json_t *args, const struct actor *who,
    struct jtext *out, char *err, size_t errlen);
struct ctl_text_cmd {
	const char	*name;
	ctl_text_fn	 fn;
};
void		 control_set_text_cmds(const struct ctl_text_cmd *, size_t);

/* Where summary rows go (before control_init; none: not written). */
void		 control_set_summary(control_summary_fn);
/*
 * Called after a command above PRIV_READ ran and before its reply is
 * queued: the daemon commits what the command wrote (store_flush()), so
 * that an acknowledged decision survives a crash right after it.
 */
void		 control_set_commit(void (*)(void));
/*
 * Asked before a command above PRIV_READ runs: NULL lets it run; a
 * message refuses it (an `internal` error, exit 5, and a refusal row):
 * the daemon refuses changes while its store is unavailable.
 */
typedef const char *(*control_gate_fn)(const char *cmd);
void		 control_set_gate(control_gate_fn);
/* Adds the daemon's fields to hello's reply (its store's state). */
void		 control_set_hello(void (*)(json_t *));

/*
 * Create the socket at cfg->control_socket and start accepting.  Refuses
 * (returns -1, logged) if a live daemon answers on that path or the path
 * exists and is not a socket; unlinks a stale socket; creates it under
 * umask 0177, then chmod cfg->control_mode and chown to
 * cfg->control_group (if set).  The table (and its strings) must outlive
 * the control socket.  Privilege lists and limits are copied from cfg.
 */
int		 control_init(struct event_base *base, const struct config *cfg,
		    const struct ctl_cmd *cmds, size_t ncmds,
		    control_audit_fn audit);

/* New privilege lists and limits (SIGHUP).  Connected peers keep theirs. */
void		 control_reconfigure(const struct config *cfg);

/* Close every connection, close and unlink the socket. */
void		 control_shutdown(void);

/*
 * Broadcast an event to every subscribed connection: {"v":1,"event":type,
 * "time":now,"data":data}.  Steals data (NULL means {}).  A subscriber
 * whose queued output is over the high-water mark is disconnected instead
 * of buffering.  type is one of hook_event_name()'s names.  Safe to call
 * from a command handler.
 */
void		 control_event(const char *type, json_t *data);

/* Connections open now and how many of them watch (status, tests). */
unsigned	 control_nconns(void);
unsigned	 control_nwatchers(void);

/*
 * The privilege cfg grants a peer: root and the daemon's own uid have
 * PRIV_ADMIN; otherwise the highest class whose list names the user (by
 * name or uid) or one of its groups (primary gid, the peer's gid, and the
 * supplementary groups of the user from getgrouplist()).  name (may be
 * NULL) receives the user name or the decimal uid.
 */
enum ctl_priv	 control_priv_for(const struct config *cfg, uid_t uid,
		    gid_t gid, char *name, size_t namelen);

/*
 * Argument helpers for handlers.  Each returns CTL_OK, or CTL_E_USAGE
 * with a message in err ("missing argument busid", "argument scope: expected
 * one of once, for, until, permanent").  Missing optional arguments leave
 * the output untouched.
 */
enum ctl_err	 ctl_arg_str(json_t *args, const char *key, int required,
		    const char **out, char *err, size_t errlen);
/*
 * The required "busid": a string, and not empty (an empty prefix would
 * name no device or, worse, every one: a usage error, not "not found").
 */
enum ctl_err	 ctl_arg_busid(json_t *args, const char **out, char *err,
		    size_t errlen);
enum ctl_err	 ctl_arg_int(json_t *args, const char *key, int required,
		    json_int_t min, json_int_t max, json_int_t *out,
		    char *err, size_t errlen);
enum ctl_err	 ctl_arg_bool(json_t *args, const char *key, int *out,
		    char *err, size_t errlen);
/*
 * "approve" arguments: busid (required), scope, duration (s), until (unix
 * s), to, message -> opts (expires_at computed from now for "for").
 */
enum ctl_err	 ctl_args_approve(json_t *args, const char **busid,
		    struct approve_opts *opts, char *err, size_t errlen);

/* An actor as protocol.md 2.5 shows it (new reference). */
json_t		*ctl_actor_json(const struct actor *);

#endif
