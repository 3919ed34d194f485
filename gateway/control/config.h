/*
 * usbgwd's configuration: defaults, the config file (usbgwd.conf(5)) and
 * single-key overrides from the command line.
 *
 * Usage in the daemon:
 *
 *	struct config *cfg = config_new();		(defaults)
 *	char *errs = NULL;
 *	if (config_load(cfg, path, must_exist, &errs) != 0)
 *		fatalx("%s", errs);			(every error, one a line)
 *	config_set(cfg, "database", optarg, err, sizeof(err));   (a -d flag)
 *
 * On SIGHUP the daemon loads into a fresh config, re-applies its flags with
 * config_set(), and swaps on success; the old config stays in use when the
 * file has errors.  Every string field is NUL-terminated and bounded.
 */
#ifndef USBGW_CONFIG_H
#define USBGW_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/parse.h"
#include "proto/ctl.h"

#define CONFIG_DEFAULT_PATH	"/etc/usbgw/usbgwd.conf"
#define CONFIG_DEFAULT_DB	"/var/lib/usbgw/usbgw.db"
#define CONFIG_DEFAULT_SOCKET	"/run/usbgw/control.sock"
#define CONFIG_DEFAULT_PIDFILE	"/run/usbgwd.pid"
#define CONFIG_DEFAULT_PORT	USBIP_DEFAULT_PORT
#define CONFIG_DEFAULT_VHCI_ROOT "/sys/devices/platform"

#define CONFIG_MAX_FILE		(1024 * 1024)	/* bytes in a config file */
#define CONFIG_MAX_LINE		4096
#define CONFIG_MAX_ERRORS	50		/* reported; then "too many errors" */
#define CONFIG_MAX_LISTEN	16
#define CONFIG_MAX_EXPORTERS	4096		/* config file + exporters.d */
#define CONFIG_MAX_EXPORTER_FILES 256		/* the config file + exporters.d */
#define CONFIG_FILE_NAME_MAX	64		/* a file's name in exporters.d */
#define CONFIG_MAX_PRINCIPALS	64		/* per privilege class */
#define CONFIG_MAX_HOOKS	16
#define CONFIG_NAME_MAX		64		/* exporter, user, group names */
#define CONFIG_HOST_MAX		NET_HOST_MAX
#define CONFIG_PATH_MAX		1024

enum config_mode {
	CONFIG_MODE_PROXY = 0,	/* vhci hosts attach through the gateway */
	CONFIG_MODE_LOCAL,	/* the gateway attaches through local vhci */
};

/* store-loss: what running attachments do while the database is away. */
enum config_store_loss {
	CONFIG_STORE_LOSS_STOP = 0,	/* end them after store-grace */
	CONFIG_STORE_LOSS_KEEP,		/* let them run until it returns */
};
#define CONFIG_STORE_GRACE_MS	10000	/* the lease time's default (4.4) */

/* "HOST:PORT"; host "" means every address (wildcard). */

/*
 * kind: 0 usbipd, 1 an agent in listen mode ("exporter NAME HOST agent"),
 * 2 a dial-out agent ("agent NAME from CIDR": addr.host holds the
 * network as NET/PREFIX, canonical).  The values are enum exp_kind's.
 */
struct config_exporter {
	char		name[CONFIG_NAME_MAX];
	struct net_addr addr;
	int		kind;
	int		tls;		/* enum exp_tls: 0 off, 1 optional, 2 required */
	int		line;		/* where it was declared: */
	unsigned short	file;		/* struct config's exporter_files[] */
};

/* A user ("alice", or a numeric uid) or a group ("@ops", "@1001"). */
struct config_principal {
	int		is_group;
	int		is_numeric;
	unsigned long	id;		/* when is_numeric */
	char		name[CONFIG_NAME_MAX];
};

struct config_privlist {
	struct config_principal	p[CONFIG_MAX_PRINCIPALS];
	size_t			n;
};

/* Events a hook runs on: a bit per name in hooks.h's hook_event list. */
struct config_hook {
	uint32_t	events;		/* 1u << enum hook_event */
	char		command[CONFIG_PATH_MAX];	/* run with /bin/sh -c */
	int		line;
};

struct config {
	char		path[CONFIG_PATH_MAX];		/* file read, "" if none */

	char		database[CONFIG_PATH_MAX];
	char		pidfile[CONFIG_PATH_MAX];
	int		log_level;			/* enum log_level */
	int		log_stderr;			/* 1 stderr, 0 syslog */
	int		log_json;			/* log-format = json */

	/* This gateway's name among several on one store (protocol.md
	 * 4.3): "" is the host name (feed.c). */
	char		gateway_name[CONFIG_NAME_MAX];

	/* Control socket (control.c). */
	char		control_socket[CONFIG_PATH_MAX];
	char		control_group[CONFIG_NAME_MAX];	/* "" = leave gid */
	mode_t		control_mode;			/* 0600, 0660 or 0666 */
	unsigned	max_connections;
	unsigned	max_connections_per_uid;
	unsigned	control_admin_reserve;	/* slots past max-connections */
	unsigned	control_audit_limit_per_uid;	/* refused rows/min */
	unsigned	control_audit_limit_total;
	size_t		control_max_message;		/* request bytes */
	size_t		control_max_output;		/* queued bytes/conn */
	unsigned	control_timeout_ms;
	unsigned	control_lookup_timeout_ms;	/* NSS, off the loop */
	struct config_privlist	priv[PRIV_ADMIN + 1];	/* [PRIV_READ..ADMIN] */

	/* USB/IP side. */
	struct net_addr	listen[CONFIG_MAX_LISTEN];	/* configured */
	size_t		nlisten;		/* 0: see config_listen_addrs() */
	int		listen_tls[CONFIG_MAX_LISTEN];	/* 1: tls=optional */
	/* TLS listeners for vhci hosts (server.c, tlsshim.c) and the store
	 * of the gateway's CA, key and certificate (tlsid.c). */
	/* Prometheus text endpoint (metrics.c): off unless set. */
	struct net_addr	metrics_listen;
	int		metrics_on;
	struct net_addr	tls_listen[CONFIG_MAX_LISTEN];
	size_t		ntls_listen;
	char		tls_dir[CONFIG_PATH_MAX];	/* "": DATABASE dir/tls */
	/* Enrollment (enroll.c, protocol.md 1.10.10). */
	unsigned	tls_cert_days;		/* issued agent/host certificates */
	unsigned	tls_renew_days;		/* renew within this many days */
	unsigned	tls_renew_check_ms;	/* gateway.pem checked this often */
	unsigned	pairing_timeout_ms;	/* a pending pairing lapses */
	unsigned	max_pairings;		/* at once, in all */
	unsigned	max_pairings_per_minute;	/* new pairing sessions */
	struct config_exporter	exporters[CONFIG_MAX_EXPORTERS];
	size_t		nexporters;
	/*
	 * Where exporters are declared: [0] the config file's name, then the
	 * exporters.d files read, in name order (base names, for messages:
	 * "site-a.conf:3").  exporters_dir: "" DIR(config)/exporters.d,
	 * "none" no directory; relative to the config file's directory.
	 */
	char		exporter_files[CONFIG_MAX_EXPORTER_FILES][CONFIG_FILE_NAME_MAX];
	size_t		nexporter_files;
	char		exporters_dir[CONFIG_PATH_MAX];
	unsigned	poll_interval_ms;
	/*
	 * The database unreachable (protocol.md 4.6): running attachments
	 * end after store_grace_ms (stop) or run on (keep).
	 */
	int		store_loss;			/* CONFIG_STORE_LOSS_* */
	unsigned	store_grace_ms;
	unsigned	probe_timeout_ms;
	unsigned	lease_ms;	/* exporter leases (PostgreSQL) */
	unsigned	attach_pending_wait_ms;		/* 0 = ST_NA at once */
	int		show_pending;			/* in DEVLIST */
	unsigned	max_sessions;			/* downstream TCP */
	unsigned	max_sessions_per_host;	/* in the request phase */
	unsigned	max_devices_per_exporter;	/* present */
	unsigned	max_new_devices_per_minute;	/* per exporter */
	unsigned	max_probes;		/* claims probing at once */
	unsigned	max_probes_per_exporter;
	unsigned	relay_stall_ms;		/* no progress this long: cut */
	unsigned	audit_limit_per_host;	/* rows a minute, 0: none */
	unsigned	audit_limit_total;
	unsigned	audit_retention_s;	/* audit prune keeps younger */
	char		audit_key[CONFIG_PATH_MAX];	/* "": DATABASE.key */
	unsigned	audit_checkpoint_rows;	/* sign every N rows, 0: never */
	unsigned	audit_checkpoint_interval_ms;	/* and this often */

	/* vhci host names (hostname.c): forward-confirmed reverse DNS. */
	int		host_names;			/* look them up */
	unsigned	host_name_ttl_ms;		/* answers cached */
	unsigned	host_name_timeout_ms;		/* then: no name */

	/* Hooks (hooks.c). */
	struct config_hook	hooks[CONFIG_MAX_HOOKS];
	size_t		nhooks;
	unsigned	hook_timeout_ms;
	unsigned	hook_max_running;

	/* Local mode (vhci on this host; gateway/core/local.c). */
	enum config_mode mode;
	int		vhci_controller;		/* -1 = any */
	char		vhci_root[CONFIG_PATH_MAX];	/* sysfs platform dir */
	int		local_attach;			/* enum attach_mode */
	int		local_auto_attach;		/* attach on approval */
	int		vhci_lockdown;			/* authorized_default=0 */
	int		vhci_per_interface;		/* per-interface authz */

	/* Internal: the first "listen" from config_set() drops the file's. */
	int		listen_overridden;
};

struct config	*config_new(void);		/* every default set */
void		 config_free(struct config *);

/*
 * Read a config file into cfg (on top of what is there).  A missing file
 * is an error only when must_exist.  Returns 0, or -1 with *errs set to a
 * malloc'd text of "FILE:LINE: message" lines (all errors, at most
 * CONFIG_MAX_ERRORS) that the caller frees.  On error cfg may be half
 * updated: load into a fresh config when that matters.
 */
int		 config_load(struct config *cfg, const char *path, int must_exist,
		    char **errs);

/* Same over a buffer in memory (name is used in messages).  Pure: fuzzable. */
int		 config_parse_buf(struct config *cfg, const char *name,
		    const char *buf, size_t len, char **errs);

/*
 * Set one key as if "key = value" appeared in the file (for command-line
 * overrides).  The first "listen" set this way replaces every listen
 * address of the file, later ones add to it; "allow-*" keys add.  Returns
 * 0, or -1 with a message in err.
 */
int		 config_set(struct config *cfg, const char *key, const char *value,
		    char *err, size_t errlen);


/*
 * Where the daemon serves USB/IP: the listen addresses configured (file
 * or flags) or, when none is, *:3240 in proxy mode and nowhere in local
 * mode, where the gateway attaches devices itself and serves other hosts
 * only on addresses set explicitly.  The number of addresses, in *addrs.
 */
int		 config_tls_optional(const struct config *);
size_t		 config_listen_addrs(const struct config *,
		    const struct net_addr **addrs);

/*
 * The exporters.d directory (exporters-dir; protocol.md 1.11.2): every
 * "*.conf" file in it, in name order, each in the config file's
 * exporter syntax ("exporter ..." and "agent ..." lines only), added to
 * cfg's exporters.  conf_path is the config file's path (the default
 * directory and relative ones are beside it).  A missing directory is
 * none.  Returns 0, or -1 with *errs as config_load's ("FILE:LINE: ..."
 * for every error of every file).  The directory read into dir (may be
 * NULL) when it is not "none".
 */
int		 config_load_exporters_dir(struct config *cfg, const char *conf_path,
		    char *dir, size_t dirlen, char **errs);

/*
 * An import file (usbgw exporter import): one "NAME HOST[:PORT] [agent]
 * [tls=required|off]" a line (a leading "exporter" word allowed), '#'
 * comments and blank lines skipped.  Every line is checked as the config
 * file's exporter lines are (name, address, port, options, a duplicate
 * name or address in the file); the entries are added to cfg (a fresh
 * one: config_new()).  Returns 0, or -1 with *errs ("NAME:LINE: ..."
 * lines, the caller frees).  Pure: fuzzable.
 */
int		 config_parse_exporter_list(struct config *cfg, const char *name,
		    const char *buf, size_t len, char **errs);

/*
 * An exporter's host written one way for one address: IPv4 and IPv6
 * literals as inet_ntop writes them (2001:DB8:0::2 -> 2001:db8::2, the
 * zone after '%' kept as written), host names in lower case.  Two
 * exporters with the same canonical host and port are one exporter
 * (config, exporters.d, exporter add and import refuse the second).
 * Names are not resolved: "localhost" and "127.0.0.1" differ.
 */
void		 config_host_canon(char *host, size_t len);

/* "FILE:LINE" of an exporter, into buf (its file by name). */
const char	*config_exporter_where(const struct config *,
		    const struct config_exporter *, char *buf, size_t len);

/* Write the effective configuration, in file syntax, to a malloc'd text. */
char		*config_dump(const struct config *);

#endif
