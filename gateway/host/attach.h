/*
 * Attach back ends: how an approved device, already claimed by the
 * gateway (its upstream session has imported it from the exporter and is
 * in URB phase), is handed to a vhci host.
 *
 *  proxy  a remote vhci host ran `usbip attach -r GATEWAY -b BUSID`; the
 *         gateway's downstream USB/IP server answered the import and
 *         relays between that connection and the upstream session.  Its
 *         ops are the daemon's (attach_proxy_ops, defined with the server).
 *  local  the gateway runs on the vhci host and attaches the device to
 *         this host's vhci_hcd itself, through sysfs (vhci.h), in one of
 *         two modes:
 *           direct     the kernel gets the upstream TCP socket itself: no
 *                      gateway overhead, and the gateway sees no URB;
 *           inspected  the kernel gets one end of a socketpair(AF_UNIX,
 *                      SOCK_STREAM) and the gateway relays between the
 *                      other end and the upstream socket, so counters,
 *                      endpoint checks and every URB-level rule apply.
 *
 * The daemon keeps one struct attach_ctx per attachment and calls the
 * back end's ops on it; both back ends fill the same result fields, so
 * the relay, the audit rows and the database do not care which one it is.
 */
#ifndef USBGW_ATTACH_H
#define USBGW_ATTACH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define ATTACH_BUSID_MAX	32
#define ATTACH_PAIR_SNDBUF	(2u << 20)	/* inspected socketpair buffers */

enum attach_mode {
	ATTACH_DIRECT = 0,
	ATTACH_INSPECTED,
};

enum attach_state {
	ATTACH_IDLE = 0,	/* not attached (never, or failed) */
	ATTACH_ATTACHED,	/* the vhci side has it */
	ATTACH_DETACHED,	/* it was attached and is no longer */
};

/* One attachment.  The caller owns it; the back end fills the results. */
struct attach_ctx {
	/* -- set by the caller before attach() -- */
	char			 busid[ATTACH_BUSID_MAX]; /* gateway's, for logs */
	uint32_t		 devid;	/* what the kernel puts in CMD_SUBMIT */
	uint32_t		 speed;	/* USBIP_SPEED_*, from OP_REP_IMPORT */
	enum attach_mode	 mode;	/* local only; proxy ignores it */
	int			 upstream_fd;	/* claim socket, URB phase */
	int			 downstream_fd;	/* proxy: vhci host's socket */

	/* -- set by the back end -- */
	enum attach_state	 state;
	int			 port;		/* local: vhci port; else -1 */
	int			 kernel_fd;	/* local: fd number written to
						   `attach` (the status shows it) */
	int			 relay_fd;	/* relay upstream_fd <-> this, or
						   -1 (direct: the kernel talks to
						   the exporter itself) */
	char			 local_busid[ATTACH_BUSID_MAX]; /* "3-1" once
						   the vhci host enumerated it */
};

/* An interface as the vhci host's kernel sees it, for authorize(). */
struct attach_intf {
	const char		*name;		/* "3-1:1.0" */
	unsigned int		 config, number;
	uint8_t			 iclass, isubclass, iprotocol;
};

/* What authorize() may let through. */
struct attach_authz {
	/*
	 * NULL: authorize the device as a whole (every interface gets its
	 * driver).  Else called once per interface of the active
	 * configuration; 1 lets the interface bind a driver, 0 keeps it
	 * without one.  It sees the class triple the vhci host's kernel
	 * read, so a device that claims one thing to the gateway's probe
	 * and another to the host is judged on the latter too.
	 */
	int	(*allow)(void *arg, const struct attach_intf *);
	void	*arg;
	/* results */
	unsigned int	nallowed, ndenied;
};

/* An attachment found by reconcile(). */
enum attach_verdict {
	ATTACH_V_FOREIGN = 0,	/* not ours: report it, leave it alone */
	ATTACH_V_ADOPT,		/* ours and alive: take it back */
	ATTACH_V_STALE,		/* ours but dead (inspected: the relay died
				   with the old process): detach it */
	ATTACH_V_UNSURE,	/* ours by port, but the kernel shows no
				   identity yet: reconcile again shortly */
};

struct attach_found {
	int			 port;
	int			 live;		/* 1 in use, 0 starting or failed */
	uint32_t		 devid;		/* 0 unless live */
	int			 kernel_fd;	/* 0 unless live */
	uint32_t		 speed;
	char			 local_busid[ATTACH_BUSID_MAX];
	/* set by attach_classify() */
	enum attach_verdict	 verdict;
	ssize_t			 record;	/* index in records, or -1 */
};

/* What the database remembers of one attachment, for attach_classify(). */
struct attach_record {
	int			 port;
	uint32_t		 devid;
	int			 kernel_fd;
	enum attach_mode	 mode;
	ssize_t			 found;		/* out: index in found, -1 lost */
};

struct attach_backend;

/*
 * The back end contract.  Every op runs on the event loop: none blocks
 * for more than a few sysfs writes (local) or any network round trip.
 * Ops return 0 on success, -1 with errno set and a log line written.
 */
struct attach_ops {
	const char	*name;		/* "proxy", "local" */

	/*
	 * Hand ctx's device over.  Before the call the caller must have
	 * stopped reading upstream_fd (bufferevent_disable EV_READ) and
	 * must hold no buffered byte or in-flight URB on it: the stream
	 * continues at a PDU boundary.  ctx->devid must be the exporter's
	 * devid in direct mode (nobody rewrites it there).
	 * On success: state ATTACHED, port/kernel_fd/relay_fd set.
	 *  - direct: the kernel holds its own reference to the upstream
	 *    socket; the caller must close upstream_fd without reading or
	 *    writing it again (freeing its bufferevent with
	 *    BEV_OPT_CLOSE_ON_FREE does that).  relay_fd is -1.
	 *  - inspected: relay_fd is the gateway's end of the socketpair,
	 *    non-blocking and close-on-exec, owned by the caller, which
	 *    relays between it and upstream_fd.  The kernel's end is closed.
	 *  - proxy: relay_fd is downstream_fd.
	 * On failure: state IDLE, nothing of the caller's is closed, no
	 * descriptor is left open by the back end.
	 */
	int	(*attach)(struct attach_backend *, struct attach_ctx *);

	/*
	 * Take the device away from the vhci side (revoke, expiry, policy
	 * change, shutdown when asked).  Idempotent: 0 when the device is
	 * no longer attached, whether our request or something else made
	 * it leave.  Local never touches a port that holds another device
	 * than ctx's (a port reused after our device left).  After it,
	 * state is DETACHED; the caller still owns and closes relay_fd
	 * (inspected: it reads EOF from the kernel's side first).
	 */
	int	(*detach)(struct attach_backend *, struct attach_ctx *);

	/*
	 * Is ctx still attached?  1 yes, 0 no (state becomes DETACHED),
	 * -1 cannot tell.  Direct mode needs it: the gateway sees no URB,
	 * so it polls to learn that the vhci host let go.  NULL: the back
	 * end learns it from its own connection (proxy).
	 */
	int	(*check)(struct attach_backend *, struct attach_ctx *);

	/*
	 * Authorize the attached device on the vhci host (local, with
	 * lock-down: authorized_default=0 on the vhci root hubs).  Returns
	 * 0 done, 1 not yet (the host has not enumerated the device: call
	 * again in a few tens of milliseconds, give up after a few seconds),
	 * -1 error (ESTALE: the port holds another device).  Fills
	 * ctx->local_busid and az's counts.  NULL for proxy: the remote
	 * host's authorization is its own.
	 */
	int	(*authorize)(struct attach_backend *, struct attach_ctx *,
		    struct attach_authz *az);

	/*
	 * List what is attached now, on start, so the daemon can adopt the
	 * attachments its database knows (see attach_classify()) and report
	 * the others.  *found is a new array (NULL if *nfound is 0) that the
	 * caller frees.  Never detaches anything.  Proxy: nothing survives
	 * the process, so it lists nothing.
	 */
	int	(*reconcile)(struct attach_backend *,
		    struct attach_found **found, size_t *nfound);

	/* Release the back end (not the attachments: they outlive it). */
	void	(*free)(struct attach_backend *);
};

struct attach_backend {
	const struct attach_ops	*ops;
	void			*priv;
};

/* Defined by the daemon's downstream server (issue 3). */
extern const struct attach_ops attach_proxy_ops;
extern const struct attach_ops attach_local_ops;

/* ctx with every fd -1, port -1, state IDLE. */
void		 attach_ctx_init(struct attach_ctx *);

const char	*attach_mode_name(enum attach_mode);
int		 attach_mode_parse(const char *, enum attach_mode *);
const char	*attach_state_name(enum attach_state);
const char	*attach_verdict_name(enum attach_verdict);

/*
 * Match what reconcile() found against what the database remembers:
 * same port, and once the kernel shows it, same devid and kernel_fd.
 * Sets every found[i].verdict/record and every records[j].found.
 * A record no found entry matches is lost (the device left while the
 * gateway was down).
 */
void		 attach_classify(struct attach_found *found, size_t nfound,
		    struct attach_record *records, size_t nrecords);

/* ---- the local vhci back end ----------------------------------------- */

struct vhci;

struct attach_local_params {
	int	lockdown;	/* authorized_default=0 on the vhci root hubs */
	int	per_interface;	/* and interface_authorized_default=0 */
};

/*
 * A local back end over an open vhci (which it then owns and frees).
 * With lockdown, writes the defaults at once and fails (NULL, errno) if
 * it cannot (then v is still the caller's): a lock-down that is not in
 * force must stop the start.
 */
struct attach_backend	*attach_local_new(struct vhci *,
			    const struct attach_local_params *);
struct vhci		*attach_local_vhci(struct attach_backend *);

/*
 * Detach a port the gateway did not attach: only on an operator's
 * explicit order, never from reconciliation.
 */
int			 attach_local_detach_port(struct attach_backend *,
			    unsigned int port);

#endif
