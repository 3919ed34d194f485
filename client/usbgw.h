/*
 * usbgw, the operator's CLI: shared declarations.
 *
 * Every command is a struct cmd_entry in its own cmd-*.c file, listed in
 * usbgw.c's table.  The table drives option parsing, --help, usage errors
 * and dispatch; a command's exec function gets its parsed options and
 * positional arguments in a struct cmd_ctx and returns an exit status.
 */
#ifndef USBGW_CLIENT_H
#define USBGW_CLIENT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <jansson.h>

#include "proto/ctl.h"

/* Exit statuses (usbgw(1) "EXIT STATUS"). */
#define EXIT_OK		 0
#define EXIT_REFUSED	 1	/* privilege or the device's state refused it */
#define EXIT_USAGE	 2	/* bad command line or argument */
#define EXIT_NOTFOUND	 3	/* no such device/exporter/rule, or ambiguous */
#define EXIT_UNREACHABLE 4	/* cannot reach the daemon, or it went away */
#define EXIT_INTERNAL	 5	/* the daemon or usbgw failed */
#define EXIT_CUT	 6	/* audit verify: the log was cut short */

#define USBGW_DEFAULT_SOCKET	"/run/usbgw/control.sock"
#define CLIENT_TIMEOUT_MS	30000	/* waiting for a response */
#define CLIENT_HELLO_MS		3000	/* the first answer on a connection */
#define CLIENT_MAX_QUEUED	1024	/* events held while a call is pending */
#define CMD_MAX_OPTS		16

struct cmd_opt {
	const char	*lname;		/* "for" -> --for */
	int		 sname;		/* 'm' -> -m, 0 none */
	const char	*arg;		/* NULL: a flag; else the value's name */
	const char	*help;
};

struct cmd_ctx;

struct cmd_entry {
	const char		*name;		/* "approve", "policy add" */
	const char		*usage;		/* after the name */
	const char		*summary;	/* one line */
	enum ctl_priv		 priv;		/* what the daemon will ask for */
	int			 min_args;
	int			 max_args;	/* -1: unlimited */
	const struct cmd_opt	*opts;		/* { NULL } terminated, or NULL */
	int			(*exec)(struct cmd_ctx *);
};

struct client;

struct cmd_ctx {
	const struct cmd_entry	*entry;
	const char		*socket;
	int			 argc;		/* positional arguments */
	char			**argv;
	const char		*val[CMD_MAX_OPTS];	/* by index in opts */
	int			 set[CMD_MAX_OPTS];
	int			 json;		/* --json */
	struct client		*cl;
};

/* usbgw.c */
const char	*arg_get(const struct cmd_ctx *, const char *lname);
int		 arg_has(const struct cmd_ctx *, const char *lname);
int		 usage_error(const struct cmd_ctx *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));
void		 cmd_help(const struct cmd_entry *, FILE *);

/* client.c: the connection to usbgwd. */
struct client	*client_open(const char *path, int *status);
void		 client_close(struct client *);
/*
 * Call cmd with args (stolen; NULL = {}).  On success *result is a new
 * reference and EXIT_OK is returned; otherwise the error is printed as
 * "usbgw: message" and the exit status for it is returned.  Events that
 * arrive meanwhile are queued for client_next_event().
 */
int		 client_call(struct client *, const char *cmd, json_t *args,
		    json_t **result);
/* Same, quiet: the error's code and message are returned instead. */
/*
 * A call whose result is appended to text as JSON, written as jansson's
 * JSON_INDENT(indent) would (2: as print_json; 0: compact), checked but
 * never built as a tree (jsontext.h): for big results (list).
 */
struct jtext;
int		 client_call_text(struct client *, const char *cmd, json_t *args,
		    int indent, struct jtext *text);
int		 client_call_quiet(struct client *, const char *cmd, json_t *args,
		    json_t **result, char *msg, size_t msglen);
/*
 * Next event (a new reference to the whole message) waiting at most
 * timeout_ms (-1 forever).  Returns EXIT_OK, EXIT_UNREACHABLE when the
 * daemon went away, or -1 on timeout.
 */
int		 client_next_event(struct client *, int timeout_ms, json_t **ev);
int		 client_fd(struct client *);
/* The last error reply's details (an array of strings), borrowed; NULL. */
json_t		*client_error_details(struct client *);
int		 client_pending_events(struct client *);
/* Connect ctx->cl if not yet; returns EXIT_OK or a failure status. */
int		 cmd_connect(struct cmd_ctx *);
/* Connect, call, and on --json print the result; the common case. */
int		 cmd_call(struct cmd_ctx *, const char *cmd, json_t *args,
		    json_t **result);
int		 exit_for_error(enum ctl_err);

/* output.c */
struct table;
struct table	*table_new(int ncols, ...);		/* header names */
void		 table_add(struct table *, ...);	/* ncols cells */
void		 table_print(struct table *, FILE *);
void		 table_free(struct table *);
void		 table_align_right(struct table *, int col);
/* Printable copy of untrusted text (control bytes shown as '?'). */
char		*safe_dup(const char *);
void		 print_safe(FILE *, const char *);
const char	*jstr(const json_t *obj, const char *key);	/* "" if absent */
const char	*jfmt(const json_t *obj, const char *key);	/* any scalar */
void		 print_json(const json_t *);
void		 fmt_time(char *, size_t, json_int_t unix_s);
void		 fmt_age(char *, size_t, json_int_t since);
void		 fmt_duration(char *, size_t, int64_t secs);
const char	*device_name(const json_t *dev);	/* "046d:c52b Logitech ..." */
const char	*device_identity_str(const json_t *dev); /* "device 12, hash ..." */
const char	*actor_str(const json_t *actor, char *buf, size_t len);
const char	*usb_class_name(const char *ccsspp);	/* NULL if unknown */
const char	*row_actor(const json_t *row, char *buf, size_t len);
const char	*jstr2(const json_t *obj, const char *key, const char *alt);
/*
 * A decision's per-interface verdicts (its "interfaces" array), one line
 * each: "config 1 interface 0 alt 0  08:06:50 (Mass Storage)  deny
 * (interface-policy: deny)".  denied_only: only those the interface-policy
 * denies (pending: once approved), on one line: "1.1/0 08:06:50" ("" if
 * none).  Returns how many the policy (else the decision) denies.
 */
size_t		 format_iface_decisions(const json_t *decision, bool denied_only,
		    char *buf, size_t len);
/* jfmt() and device_name() return one of 32 rotating static buffers. */

/* timeparse.c */
int		 parse_duration_s(const char *, int64_t *secs, char *err,
		    size_t errlen);
int		 parse_time(const char *, time_t now, time_t *out, char *err,
		    size_t errlen);
/* A time, or a duration meaning "that long ago". */
int		 parse_since(const char *, time_t now, time_t *out, char *err,
		    size_t errlen);

/* The commands. */
extern const struct cmd_entry cmd_list_entry, cmd_show_entry,
    cmd_approve_entry, cmd_deny_entry, cmd_revoke_entry,
    cmd_policy_list_entry, cmd_policy_add_entry, cmd_policy_insert_entry,
    cmd_policy_remove_entry, cmd_policy_move_entry, cmd_policy_test_entry,
    cmd_policy_apply_entry, cmd_policy_import_entry,
    cmd_exporter_list_entry, cmd_exporter_add_entry, cmd_exporter_import_entry,
    cmd_exporter_remove_entry, cmd_audit_entry, cmd_audit_verify_entry,
    cmd_audit_anchor_entry, cmd_audit_pubkey_entry,
    cmd_audit_prune_entry, cmd_watch_entry, cmd_status_entry,
    cmd_attach_entry, cmd_detach_entry, cmd_agent_list_entry,
    cmd_agent_approve_entry, cmd_agent_reject_entry, cmd_agent_revoke_entry,
    cmd_gateways_entry;

#endif
