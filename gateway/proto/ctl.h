/*
 * The daemon's operator-facing vocabulary, shared by the control socket
 * (control.c), the daemon core and the CLI: who is acting, device states,
 * approval scopes, and the table of operations the control socket
 * dispatches to.  The daemon core implements struct ctl_ops; tests may
 * plug in a fake.
 */
#ifndef USBGW_CTL_H
#define USBGW_CTL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <jansson.h>

/* Device states as operators see them (keep names stable: scripts use them). */
enum dev_state {
	DEV_PROBING = 0,
	DEV_PENDING,
	DEV_AUTHORIZED,
	DEV_ATTACHED,
	DEV_BLOCKED,
	DEV_GONE,
	DEV_NSTATES
};
const char	*dev_state_name(enum dev_state);
int		 dev_state_parse(const char *);	/* -1 if unknown */

/* Privilege classes, from SO_PEERCRED at accept time. */
enum ctl_priv {
	PRIV_NONE = 0,
	PRIV_READ = 1,		/* list, show, audit, watch, status */
	PRIV_APPROVE = 2,	/* approve, deny, revoke (+ read) */
	PRIV_ADMIN = 3,		/* policy, exporters, settings (+ all) */
};
const char	*ctl_priv_name(enum ctl_priv);

/* Who does something: written to the audit log with every transition. */
enum actor_kind {
	ACTOR_SYSTEM = 0,
	ACTOR_RULE,
	ACTOR_OPERATOR,
};
struct actor {
	enum actor_kind	kind;
	int64_t		rule_id;	/* ACTOR_RULE */
	uid_t		uid;		/* ACTOR_OPERATOR */
	pid_t		pid;
	char		name[64];	/* user name, or "system" */
	enum ctl_priv	priv;		/* ACTOR_OPERATOR: what the socket granted */
};

/* Scope of an approval or a denial. */
enum approve_scope {
	SCOPE_ONCE = 0,		/* this presence only */
	SCOPE_FOR,		/* for a duration (expires_at set) */
	SCOPE_UNTIL,		/* until a time (expires_at set) */
	SCOPE_PERMANENT,	/* writes a rule from the device's identity */
};
struct approve_opts {
	enum approve_scope scope;
	int64_t		expires_at;	/* unix seconds, SCOPE_FOR/UNTIL */
	char		to_host[256];	/* "" = any vhci host */
	char		message[512];
	bool		override;	/* admin: beat an admin rule's block */
};

/* Error classes; the CLI maps them to exit codes (see usbgw(1)). */
enum ctl_err {
	CTL_OK = 0,
	CTL_E_REFUSED,		/* privilege or state refuses it */
	CTL_E_USAGE,		/* malformed request / bad argument */
	CTL_E_NOTFOUND,		/* no such device/exporter/rule */
	CTL_E_AMBIGUOUS,	/* busid prefix matches several */
	CTL_E_INTERNAL,
	/* Protocol-level errors, sent by control.c itself (protocol.md part 2). */
	CTL_E_VERSION,		/* request's protocol version not supported */
	CTL_E_PROTOCOL,		/* malformed frame, JSON or request */
	CTL_E_LIMIT,		/* a connection cap or size limit refused it */
	/*
	 * Never on the wire: a handler's "not yet" (the state it needs is on
	 * its way, e.g. a device's claim being taken again).  control.c parks
	 * the request and runs the handler again every CTL_AGAIN_STEP_MS for
	 * up to CTL_AGAIN_MAX_MS; past that the peer gets `refused` with the
	 * handler's last message.  A handler returns it only before it has
	 * changed anything.
	 */
	CTL_E_AGAIN,
	CTL_E_NERR
};
const char	*ctl_err_name(enum ctl_err);

/*
 * A control command as the daemon dispatches it.  control.c owns the
 * socket, framing, credentials and privilege checks; it looks the
 * request's "cmd" up in a table of these that the daemon core provides
 * (tests provide a fake one) and calls fn with the request's "args"
 * object.  fn returns CTL_OK with *result set to a new JSON value (owned
 * by the caller; NULL means {}), or an error with a one-line human
 * message in err and, if it has more to say (every bad line of an
 * import), *result set to an array of strings: the reply's
 * error.details.  Busid arguments may be unambiguous prefixes.
 * Handlers never block the event loop.
 */
#define CTL_AGAIN_STEP_MS	50
#define CTL_AGAIN_MAX_MS	10000

typedef enum ctl_err (*ctl_fn)(json_t *args, const struct actor *who,
    json_t **result, char *err, size_t errlen);

struct ctl_cmd {
	const char	*name;		/* "list", "approve", "policy.add", ... */
	enum ctl_priv	 priv;		/* least privilege that may run it */
	ctl_fn		 fn;
};

#endif
