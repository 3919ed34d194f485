/*
 * Hooks: a site's command run on chosen events (usbgwd.conf(5) "hook"
 * lines), so a gateway can notify a chat or open a ticket.
 *
 * The command runs with /bin/sh -c in its own process group, stdin from
 * /dev/null, stdout and stderr logged (escaped, bounded), and an
 * environment of PATH plus USBGW_* variables only.  Values are sanitized
 * (printable ASCII; anything else becomes '?'; bounded length) and are
 * never interpolated into the command line.  hooks_run() never blocks:
 * children are spawned with posix_spawn and reaped through a pidfd on the
 * event loop; at its time limit a hook's process group gets SIGTERM, then
 * SIGKILL HOOK_KILL_GRACE_MS later.  At most hook-max-running hooks run at
 * once; further runs wait in a queue of HOOK_MAX_QUEUED, beyond which they
 * are dropped with a log line.
 *
 * The daemon must not reap children it did not start (no waitpid(-1), no
 * SIGCHLD set to SIG_IGN).
 */
#ifndef USBGW_HOOKS_H
#define USBGW_HOOKS_H

#include <stddef.h>
#include <jansson.h>

#define HOOK_MAX_QUEUED		64
#define HOOK_KILL_GRACE_MS	2000
#define HOOK_MAX_ENV		48		/* USBGW_* variables per run */
#define HOOK_MAX_VALUE		1024		/* bytes per value, after sanitizing */
#define HOOK_MAX_OUTPUT		4096		/* bytes of hook output logged per run */

/*
 * The event vocabulary, shared by hooks, the control socket's event
 * stream (control_event()) and usbgw watch.  Keep names stable.
 */
enum hook_event {
	HOOK_EV_PENDING = 0,	/* a device became pending */
	HOOK_EV_ACCESS_REQUEST,	/* a vhci host asked to import a pending device */
	HOOK_EV_APPROVE,	/* a device became authorized (operator or rule) */
	HOOK_EV_DENY,		/* a device became blocked (operator or rule) */
	HOOK_EV_REVOKE,		/* an authorization was withdrawn or expired */
	HOOK_EV_IDENTITY_CHANGE, /* a device's descriptors hash changed */
	HOOK_EV_GONE,		/* a device left (unplugged, exporter lost) */
	HOOK_EV_ATTACH,		/* a vhci host attached an authorized device */
	HOOK_EV_DETACH,		/* ... and let it go */
	HOOK_EV_PROBED,		/* a new device was claimed and identified */
	HOOK_EV_EXPORTER_UP,
	HOOK_EV_EXPORTER_DOWN,
	HOOK_EV_POLICY,		/* the rule set changed */
	HOOK_EV_ANOMALY,	/* an exporter's claim differs from the probe */
	HOOK_EV_PAIRING,	/* an agent or host waits for its code's approval */
	HOOK_EV_PAIRING_END,	/* ... approved, rejected or lapsed */
	HOOK_NEVENTS
};
#define HOOK_EV_ALL	((1u << HOOK_NEVENTS) - 1)

const char	*hook_event_name(enum hook_event);
int		 hook_event_parse(const char *);	/* -1 if unknown */

struct event_base;
struct config;

struct hook_kv {
	const char	*key;		/* without the USBGW_ prefix: "BUSID" */
	const char	*value;
};

/* Start with cfg's hooks (copied: cfg need not outlive the call). */
void		 hooks_init(struct event_base *, const struct config *cfg);
/* Replace the hook list and limits (SIGHUP); running hooks finish. */
void		 hooks_reconfigure(const struct config *cfg);
/* Kill every running hook (SIGKILL to its group), drop the queue, free. */
void		 hooks_shutdown(void);

/*
 * Run every hook configured for event ("pending", ...).  USBGW_EVENT and
 * USBGW_TIME are always set; kv adds USBGW_<KEY>=<value>.  Returns how
 * many runs were started or queued.
 */
int		 hooks_run(const char *event, const struct hook_kv *kv, size_t nkv);

/*
 * Same with the variables taken from a JSON object (typically the event's
 * data): every string, integer, real or boolean member KEY becomes
 * USBGW_<KEY> (upper-cased, other than [A-Z0-9] turned into '_'); arrays of
 * scalars are joined with spaces; nested objects are flattened one level
 * as USBGW_<KEY>_<SUBKEY>.  data is borrowed.
 */
int		 hooks_run_json(const char *event, const json_t *data);

/* Runs in progress and queued (for status and tests). */
unsigned	 hooks_running(void);
unsigned	 hooks_queued(void);

#endif
