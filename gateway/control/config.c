/*
 * usbgwd.conf(5): a line-oriented file.
 *
 *	# comment
 *	key = value
 *	exporter NAME HOST[:PORT] [agent]
 *	agent NAME from ADDRESS[/PREFIX]
 *	hook EVENT[,EVENT...] COMMAND...
 *
 * The parser checks every line and reports every error as FILE:LINE, so an
 * operator fixes a file in one pass; a file with any error changes nothing
 * the daemon runs with (the caller loads into a fresh config).
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <arpa/inet.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "control/config.h"
#include "control/hooks.h"
#include "base/identity.h"
#include "base/log.h"
#include "base/util.h"

#define SIZE_K		1024ULL
#define MS_S		1000ULL
#define MS_DAY		(86400ULL * MS_S)
#define DURATION_MAX	(3650ULL * MS_DAY)	/* anything longer is a typo */

enum ktype {
	K_PATH,		/* char[CONFIG_PATH_MAX] */
	K_PATH_NONE,	/* same, "none" -> "" */
	K_SOCKET,	/* absolute, fits sun_path */
	K_GROUP,	/* char[CONFIG_NAME_MAX], "none" -> "" */
	K_GWNAME,	/* char[CONFIG_NAME_MAX], [A-Za-z0-9._-]{1,63} */
	K_BOOL,		/* int */
	K_UINT,		/* unsigned */
	K_SIZE,		/* size_t, bytes with k/m suffix */
	K_DURATION,	/* unsigned, milliseconds */
	K_SECONDS,	/* unsigned, seconds (a duration; min, max in ms) */
	K_LOGLEVEL,	/* int */
	K_LOGTARGET,	/* int log_stderr */
	K_LOGFORMAT,	/* int log_json */
	K_SOCKMODE,	/* mode_t */
	K_MODE,		/* enum config_mode */
	K_VHCI,		/* int, -1 any */
	K_LOCALATTACH,	/* int, enum attach_mode */
	K_STORELOSS,	/* int, enum config_store_loss */
	K_PRIV,		/* struct config_privlist, min = class */
	K_LISTEN,	/* listen[] */
	K_TLSLISTEN,	/* tls_listen[], repeatable */
	K_METRICS,	/* metrics_listen, metrics_on */
};

struct key {
	const char	*name;
	enum ktype	 type;
	size_t		 off;
	uint64_t	 min, max;
};

#define F(x)	offsetof(struct config, x)

static const struct key keys[] = {
	{ "database",		K_PATH,		F(database), 0, 0 },
	{ "gateway-name",	K_GWNAME,	F(gateway_name), 0, 0 },
	{ "pid-file",		K_PATH_NONE,	F(pidfile), 0, 0 },
	{ "log-level",		K_LOGLEVEL,	F(log_level), 0, 0 },
	{ "log-target",		K_LOGTARGET,	F(log_stderr), 0, 0 },
	{ "log-format",		K_LOGFORMAT,	F(log_json), 0, 0 },
	{ "control-socket",	K_SOCKET,	F(control_socket), 0, 0 },
	{ "control-group",	K_GROUP,	F(control_group), 0, 0 },
	{ "control-socket-mode", K_SOCKMODE,	F(control_mode), 0, 0 },
	{ "max-connections",	K_UINT,		F(max_connections), 1, 4096 },
	{ "max-connections-per-uid", K_UINT,	F(max_connections_per_uid), 1, 4096 },
	{ "control-admin-reserve", K_UINT,	F(control_admin_reserve), 1, 1024 },
	{ "control-audit-limit-per-uid", K_UINT, F(control_audit_limit_per_uid),
	    0, 1000000 },
	{ "control-audit-limit-total", K_UINT,	F(control_audit_limit_total),
	    0, 1000000 },
	{ "control-max-message", K_SIZE,	F(control_max_message),
	    SIZE_K, 16 * SIZE_K * SIZE_K },
	{ "control-max-output",	K_SIZE,		F(control_max_output),
	    64 * SIZE_K, 256 * SIZE_K * SIZE_K },
	{ "control-timeout",	K_DURATION,	F(control_timeout_ms),
	    100, 3600 * MS_S },
	{ "control-lookup-timeout", K_DURATION, F(control_lookup_timeout_ms),
	    100, 300 * MS_S },
	{ "allow-read",		K_PRIV,		0, PRIV_READ, 0 },
	{ "allow-approve",	K_PRIV,		0, PRIV_APPROVE, 0 },
	{ "allow-admin",	K_PRIV,		0, PRIV_ADMIN, 0 },
	{ "listen",		K_LISTEN,	0, 0, 0 },
	{ "tls-listen",		K_TLSLISTEN,	0, 0, 0 },
	{ "metrics-listen",	K_METRICS,	0, 0, 0 },
	{ "tls-dir",		K_PATH,		F(tls_dir), 0, 0 },
	{ "tls-cert-days",	K_UINT,		F(tls_cert_days), 1, 3650 },
	{ "tls-renew-days",	K_UINT,		F(tls_renew_days), 1, 3650 },
	{ "tls-renew-check",	K_DURATION,	F(tls_renew_check_ms), 100, MS_DAY },
	{ "pairing-timeout",	K_DURATION,	F(pairing_timeout_ms), MS_S,
	    3600 * MS_S },
	{ "max-pairings",	K_UINT,		F(max_pairings), 1, 64 },
	{ "max-pairings-per-minute", K_UINT,	F(max_pairings_per_minute), 1,
	    1000 },
	{ "exporters-dir",	K_PATH,		F(exporters_dir), 0, 0 },
	{ "poll-interval",	K_DURATION,	F(poll_interval_ms), 100, 3600 * MS_S },
	{ "probe-timeout",	K_DURATION,	F(probe_timeout_ms), 100, 300 * MS_S },
	{ "lease-time",		K_DURATION,	F(lease_ms), 3 * MS_S, 300 * MS_S },
	{ "attach-pending-wait", K_DURATION,	F(attach_pending_wait_ms),
	    0, 3600 * MS_S },
	{ "show-pending",	K_BOOL,		F(show_pending), 0, 0 },
	{ "max-sessions",	K_UINT,		F(max_sessions), 1, 1024 },
	{ "max-sessions-per-host", K_UINT,	F(max_sessions_per_host), 1, 1024 },
	{ "max-devices-per-exporter", K_UINT,	F(max_devices_per_exporter), 1, 1024 },
	{ "max-new-devices-per-minute", K_UINT, F(max_new_devices_per_minute), 1, 100000 },
	{ "max-probes",		K_UINT,		F(max_probes), 1, 4096 },
	{ "max-probes-per-exporter", K_UINT,	F(max_probes_per_exporter), 1, 1024 },
	{ "relay-stall-timeout", K_DURATION,	F(relay_stall_ms), 500, 3600 * MS_S },
	{ "audit-limit-per-host", K_UINT,	F(audit_limit_per_host), 0, 1000000 },
	{ "audit-limit-total",	K_UINT,		F(audit_limit_total), 0, 1000000 },
	{ "audit-retention",	K_SECONDS,	F(audit_retention_s), 0,
	    DURATION_MAX },
	{ "audit-key",		K_PATH,		F(audit_key), 0, 0 },
	{ "audit-checkpoint-rows", K_UINT,	F(audit_checkpoint_rows), 0, 1000000 },
	{ "audit-checkpoint-interval", K_DURATION, F(audit_checkpoint_interval_ms),
	    MS_S, 7 * MS_DAY },
	{ "host-names",		K_BOOL,		F(host_names), 0, 0 },
	{ "host-name-ttl",	K_DURATION,	F(host_name_ttl_ms), MS_S, MS_DAY },
	{ "host-name-timeout",	K_DURATION,	F(host_name_timeout_ms),
	    100, 30 * MS_S },
	{ "hook-timeout",	K_DURATION,	F(hook_timeout_ms), 100, 3600 * MS_S },
	{ "hook-max-running",	K_UINT,		F(hook_max_running), 1, 64 },
	{ "mode",		K_MODE,		F(mode), 0, 0 },
	{ "vhci-controller",	K_VHCI,		F(vhci_controller), 0, 31 },
	{ "vhci-root",		K_PATH,		F(vhci_root), 0, 0 },
	{ "local-attach",	K_LOCALATTACH,	F(local_attach), 0, 0 },
	{ "local-auto-attach",	K_BOOL,		F(local_auto_attach), 0, 0 },
	{ "vhci-lockdown",	K_BOOL,		F(vhci_lockdown), 0, 0 },
	{ "vhci-per-interface",	K_BOOL,		F(vhci_per_interface), 0, 0 },
	{ "store-loss",		K_STORELOSS,	F(store_loss), 0, 0 },
	{ "store-grace",	K_DURATION,	F(store_grace_ms), 0, 3600 * MS_S },
};

#define PERR_LINE_MAX	768	/* one "NAME:LINE: message\n" */

/*
 * Parse state: error text, and where each key was first set.  The error
 * text is bounded (CONFIG_MAX_ERRORS lines and the "giving up" one), so it
 * is gathered here and copied out once, instead of a realloc per line.
 */
struct parse {
	const char	*name;
	char		 errs[(CONFIG_MAX_ERRORS + 1) * PERR_LINE_MAX];
	size_t		 errlen;
	int		 nerrs;
	int		 key_line[nitems(keys)];
	int		 listen_from_file;
	int		 mode;		/* enum parse_mode */
	unsigned short	 file;		/* exporter_files[] of this text */
};

/* What a text may hold: a config file, an exporters.d file, an import. */
enum parse_mode {
	PM_CONFIG = 0,
	PM_EXPORTERS_D,		/* exporter and agent lines only */
	PM_IMPORT,		/* NAME HOST[:PORT] [agent] [tls=...] */
};

static void perr(struct parse *, int, const char *, ...)
    __attribute__((format(printf, 3, 4)));

static void
perr_append(struct parse *p, const char *s)
{
	size_t n = strlen(s);

	if (n >= sizeof(p->errs) - p->errlen)	/* cannot happen: bounded */
		n = sizeof(p->errs) - p->errlen - 1;
	memcpy(p->errs + p->errlen, s, n);
	p->errlen += n;
	p->errs[p->errlen] = '\0';
}

static void
perr(struct parse *p, int line, const char *fmt, ...)
{
	char msg[512], out[PERR_LINE_MAX];
	va_list ap;

	if (++p->nerrs > CONFIG_MAX_ERRORS) {
		if (p->nerrs == CONFIG_MAX_ERRORS + 1) {
			snprintf(out, sizeof(out), "%s: too many errors, "
			    "giving up\n", p->name);
			perr_append(p, out);
		}
		return;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (line > 0)
		snprintf(out, sizeof(out), "%s:%d: %s\n", p->name, line, msg);
	else
		snprintf(out, sizeof(out), "%s: %s\n", p->name, msg);
	perr_append(p, out);
}

struct config *
config_new(void)
{
	struct config *c;

	c = xcalloc(1, sizeof(*c));
	usbgw_strlcpy(c->database, CONFIG_DEFAULT_DB, sizeof(c->database));
	usbgw_strlcpy(c->pidfile, CONFIG_DEFAULT_PIDFILE, sizeof(c->pidfile));
	c->log_level = LOG_LVL_INFO;
	c->log_stderr = 0;
	usbgw_strlcpy(c->control_socket, CONFIG_DEFAULT_SOCKET,
	    sizeof(c->control_socket));
	c->control_mode = 0660;
	c->max_connections = 64;
	c->max_connections_per_uid = 16;
	c->control_admin_reserve = 8;
	c->control_audit_limit_per_uid = 10;
	c->control_audit_limit_total = 100;
	c->control_max_message = 64 * SIZE_K;
	c->control_max_output = 4 * SIZE_K * SIZE_K;
	c->control_timeout_ms = 30 * MS_S;
	c->control_lookup_timeout_ms = 5 * MS_S;
	c->nlisten = 0;			/* config_listen_addrs() */
	c->poll_interval_ms = 3 * MS_S;
	c->store_loss = CONFIG_STORE_LOSS_STOP;
	c->store_grace_ms = CONFIG_STORE_GRACE_MS;
	c->probe_timeout_ms = 5 * MS_S;
	c->lease_ms = 10 * MS_S;
	c->attach_pending_wait_ms = 0;
	c->show_pending = 0;
	c->max_sessions = 256;
	c->max_sessions_per_host = 16;
	c->tls_cert_days = 365;
	c->tls_renew_days = 30;
	c->tls_renew_check_ms = 3600 * MS_S;
	c->pairing_timeout_ms = 300 * MS_S;
	c->max_pairings = 4;
	c->max_pairings_per_minute = 10;
	c->max_devices_per_exporter = 64;
	c->max_new_devices_per_minute = 64;
	c->max_probes = 64;
	c->max_probes_per_exporter = 8;
	c->relay_stall_ms = 30 * MS_S;
	c->audit_limit_per_host = 60;
	c->audit_limit_total = 600;
	c->audit_retention_s = 30 * 86400;
	c->audit_key[0] = '\0';		/* DATABASE.key */
	c->audit_checkpoint_rows = 1000;
	c->audit_checkpoint_interval_ms = 3600 * MS_S;
	c->host_names = 1;
	c->host_name_ttl_ms = 300 * MS_S;
	c->host_name_timeout_ms = 2 * MS_S;
	c->hook_timeout_ms = 10 * MS_S;
	c->hook_max_running = 4;
	c->mode = CONFIG_MODE_PROXY;
	c->vhci_controller = -1;
	usbgw_strlcpy(c->vhci_root, CONFIG_DEFAULT_VHCI_ROOT,
	    sizeof(c->vhci_root));
	c->local_attach = 0;		/* direct */
	c->local_auto_attach = 1;
	c->vhci_lockdown = 0;
	c->vhci_per_interface = 0;
	return c;
}

void
config_free(struct config *c)
{
	free(c);
}

/* Does any listen line say tls=optional (a TLS context is needed)? */
int
config_tls_optional(const struct config *c)
{
	size_t i;

	for (i = 0; i < c->nlisten; i++)
		if (c->listen_tls[i])
			return 1;
	return 0;
}

size_t
config_listen_addrs(const struct config *c, const struct net_addr **addrs)
{
	static const struct net_addr any = { "", CONFIG_DEFAULT_PORT };

	if (c->nlisten > 0) {
		*addrs = c->listen;
		return c->nlisten;
	}
	*addrs = &any;
	return c->mode == CONFIG_MODE_LOCAL ? 0 : 1;
}

static int
parse_size(const char *s, unsigned long long *out)
{
	unsigned long long v = 0, mult = 1;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return -1;
	while (*p >= '0' && *p <= '9') {
		if (v > (ULLONG_MAX - 9) / 10)
			return -1;
		v = v * 10 + (unsigned)(*p++ - '0');
	}
	if (*p == 'k' || *p == 'K')
		mult = SIZE_K, p++;
	else if (*p == 'm' || *p == 'M')
		mult = SIZE_K * SIZE_K, p++;
	if (*p != '\0' || v > ULLONG_MAX / mult)
		return -1;
	*out = v * mult;
	return 0;
}


static int
name_valid(const char *s, size_t max)
{
	size_t n = strlen(s), i;

	if (n == 0 || n >= max || s[0] == '-')
		return 0;
	for (i = 0; i < n; i++)
		if (!parse_host_char(s[i]) && !(s[i] == '$' && i == n - 1))
			return 0;
	return 1;
}

static int
all_digits(const char *s)
{
	if (*s == '\0')
		return 0;
	for (; *s != '\0'; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

static int
parse_principal(const char *s, struct config_principal *p)
{
	long long id;
	const char *errstr;

	memset(p, 0, sizeof(*p));
	if (*s == '@') {
		p->is_group = 1;
		s++;
	}
	if (all_digits(s)) {
		if (parse_num(s, 0, 0xfffffffeLL, &id, &errstr) != 0)
			return -1;
		p->is_numeric = 1;
		p->id = (unsigned long)id;
	} else if (!name_valid(s, 33))
		return -1;
	usbgw_strlcpy(p->name, s, sizeof(p->name));
	return 0;
}

static const char *
ktype_expect(enum ktype t)
{
	switch (t) {
	case K_PATH:		return "a path";
	case K_PATH_NONE:	return "a path or none";
	case K_SOCKET:		return "an absolute socket path";
	case K_GROUP:		return "a group name or none";
	case K_GWNAME:		return "a gateway name (1-63 of A-Z a-z 0-9 . _ -)";
	case K_BOOL:		return "yes or no";
	case K_UINT:		return "a number";
	case K_SIZE:		return "a size in bytes (suffix k or m allowed)";
	case K_DURATION:	return "a duration like 1500ms, 30s, 10m, 2h or 1d";
	case K_SECONDS:		return "a duration like 30s, 10m, 2h or 90d";
	case K_LOGLEVEL:	return "error, warning, info or debug";
	case K_LOGTARGET:	return "stderr or syslog";
	case K_LOGFORMAT:	return "text or json";
	case K_SOCKMODE:	return "0600, 0660 or 0666";
	case K_MODE:		return "proxy or local";
	case K_VHCI:		return "a controller number or any";
	case K_LOCALATTACH:	return "direct or inspected";
	case K_STORELOSS:	return "stop or keep";
	case K_PRIV:		return "user names, uids, @groups or @gids";
	case K_LISTEN:
	case K_TLSLISTEN:	return "ADDRESS:PORT, [IPV6]:PORT or *:PORT";
	case K_METRICS:		return "PORT (on 127.0.0.1), ADDRESS:PORT or none";
	}
	return "a value";
}

static void
fmt_duration(char *buf, size_t len, uint64_t ms)
{
	if (ms % MS_DAY == 0 && ms != 0)
		snprintf(buf, len, "%llud", (unsigned long long)(ms / MS_DAY));
	else if (ms % (3600 * MS_S) == 0 && ms != 0)
		snprintf(buf, len, "%lluh", (unsigned long long)(ms / 3600 / MS_S));
	else if (ms % (60 * MS_S) == 0 && ms != 0)
		snprintf(buf, len, "%llum", (unsigned long long)(ms / 60 / MS_S));
	else if (ms % MS_S == 0)
		snprintf(buf, len, "%llus", (unsigned long long)(ms / MS_S));
	else
		snprintf(buf, len, "%llums", (unsigned long long)ms);
}

#define SHOWN_MAX	64	/* a value quoted in an error message */

/* A value as quoted in an error message: bounded, "..." when cut. */
static void
shorten(char *out, size_t len, const char *v)
{
	if (strlen(v) < len) {
		usbgw_strlcpy(out, v, len);
		return;
	}
	memcpy(out, v, len - 4);
	memcpy(out + len - 4, "...", 4);
}

/*
 * Apply one key.  Returns 0, or -1 with a message (without the key name)
 * in err.
 */
static int
key_apply(struct config *c, const struct key *k, const char *v, int from_flag,
    int *listen_seen, char *err, size_t errlen)
{
	char *field = (char *)c + k->off;
	const char *errstr, *tok;
	unsigned long long u;
	uint64_t ms;
	long long n;
	char lo[16], hi[16], buf[CONFIG_MAX_LINE + 1], shown[SHOWN_MAX];
	char *save, *t;
	struct config_privlist *pl;
	struct net_addr a;
	int lvl;

	(void)from_flag;
	shorten(shown, sizeof(shown), v);
	if (*v == '\0' && k->type != K_PRIV) {
		snprintf(err, errlen, "expected %s, got nothing",
		    ktype_expect(k->type));
		return -1;
	}
	switch (k->type) {
	case K_PATH:
	case K_PATH_NONE:
	case K_SOCKET:
		if (k->type == K_PATH_NONE && strcmp(v, "none") == 0)
			v = "";
		if (strlen(v) >= CONFIG_PATH_MAX) {
			snprintf(err, errlen, "expected a path of at most %d "
			    "bytes", CONFIG_PATH_MAX - 1);
			return -1;
		}
		if (k->type == K_SOCKET) {
			struct sockaddr_un sun;

			if (v[0] != '/' || strlen(v) >= sizeof(sun.sun_path)) {
				snprintf(err, errlen, "expected an absolute path "
				    "of at most %zu bytes, got \"%s\"",
				    sizeof(sun.sun_path) - 1, shown);
				return -1;
			}
		}
		usbgw_strlcpy(field, v, CONFIG_PATH_MAX);
		return 0;
	case K_GROUP:
		if (strcmp(v, "none") == 0)
			v = "";
		else if (!name_valid(v, CONFIG_NAME_MAX) && !all_digits(v)) {
			snprintf(err, errlen, "expected a group name or none, "
			    "got \"%s\"", shown);
			return -1;
		}
		usbgw_strlcpy(field, v, CONFIG_NAME_MAX);
		return 0;
	case K_GWNAME:
		if (strlen(v) >= CONFIG_NAME_MAX || strspn(v,
		    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		    "0123456789._-") != strlen(v)) {
			snprintf(err, errlen, "expected %s, got \"%s\"",
			    ktype_expect(k->type), shown);
			return -1;
		}
		usbgw_strlcpy(field, v, CONFIG_NAME_MAX);
		return 0;
	case K_BOOL:
		if (strcmp(v, "yes") == 0 || strcmp(v, "true") == 0 ||
		    strcmp(v, "on") == 0)
			*(int *)field = 1;
		else if (strcmp(v, "no") == 0 || strcmp(v, "false") == 0 ||
		    strcmp(v, "off") == 0)
			*(int *)field = 0;
		else
			goto bad;
		return 0;
	case K_UINT:
		if (parse_num(v, (long long)k->min, (long long)k->max, &n,
		    &errstr) != 0) {
			snprintf(err, errlen, "expected a number from %llu to "
			    "%llu, got \"%s\"", (unsigned long long)k->min,
			    (unsigned long long)k->max, shown);
			return -1;
		}
		*(unsigned *)field = (unsigned)n;
		return 0;
	case K_SIZE:
		if (parse_size(v, &u) != 0)
			goto bad;
		if (u < k->min || u > k->max) {
			snprintf(err, errlen, "expected a size from %lluk to "
			    "%llum, got \"%s\"", (unsigned long long)k->min /
			    SIZE_K, (unsigned long long)k->max / SIZE_K / SIZE_K,
			    v);
			return -1;
		}
		*(size_t *)field = (size_t)u;
		return 0;
	case K_DURATION:
	case K_SECONDS:
		if (parse_duration(v, DURATION_MAX, &ms, &errstr) != 0) {
			if (strcmp(errstr, "too large") != 0)
				goto bad;
			ms = UINT64_MAX;	/* said with the range */
		}
		if (ms < k->min || ms > k->max) {
			fmt_duration(lo, sizeof(lo), k->min);
			fmt_duration(hi, sizeof(hi), k->max);
			snprintf(err, errlen, "expected a duration from %s to "
			    "%s, got \"%s\"", lo, hi, shown);
			return -1;
		}
		if (k->type == K_DURATION)
			*(unsigned *)field = (unsigned)ms;
		else if (ms % MS_S == 0)
			*(unsigned *)field = (unsigned)(ms / MS_S);
		else {
			snprintf(err, errlen, "expected whole seconds, got "
			    "\"%s\"", shown);
			return -1;
		}
		return 0;
	case K_LOGLEVEL:
		if ((lvl = log_level_parse(v)) < 0)
			goto bad;
		*(int *)field = lvl;
		return 0;
	case K_LOGFORMAT:
		if (strcmp(v, "text") == 0)
			*(int *)field = 0;
		else if (strcmp(v, "json") == 0)
			*(int *)field = 1;
		else
			goto bad;
		return 0;
	case K_LOGTARGET:
		if (strcmp(v, "stderr") == 0)
			*(int *)field = 1;
		else if (strcmp(v, "syslog") == 0)
			*(int *)field = 0;
		else
			goto bad;
		return 0;
	case K_SOCKMODE:
		if (strcmp(v, "0600") == 0 || strcmp(v, "600") == 0)
			*(mode_t *)field = 0600;
		else if (strcmp(v, "0660") == 0 || strcmp(v, "660") == 0)
			*(mode_t *)field = 0660;
		else if (strcmp(v, "0666") == 0 || strcmp(v, "666") == 0)
			*(mode_t *)field = 0666;
		else
			goto bad;
		return 0;
	case K_STORELOSS:
		if (strcmp(v, "stop") == 0)
			*(int *)field = CONFIG_STORE_LOSS_STOP;
		else if (strcmp(v, "keep") == 0)
			*(int *)field = CONFIG_STORE_LOSS_KEEP;
		else
			goto bad;
		return 0;
	case K_MODE:
		if (strcmp(v, "proxy") == 0)
			*(enum config_mode *)field = CONFIG_MODE_PROXY;
		else if (strcmp(v, "local") == 0)
			*(enum config_mode *)field = CONFIG_MODE_LOCAL;
		else
			goto bad;
		return 0;
	case K_VHCI:
		if (strcmp(v, "any") == 0)
			*(int *)field = -1;
		else if (parse_num(v, (long long)k->min, (long long)k->max, &n,
		    &errstr) == 0)
			*(int *)field = (int)n;
		else {
			snprintf(err, errlen, "expected a controller number "
			    "from 0 to %llu or any, got \"%s\"",
			    (unsigned long long)k->max, shown);
			return -1;
		}
		return 0;
	case K_LOCALATTACH:
		if (strcmp(v, "direct") == 0)
			*(int *)field = 0;
		else if (strcmp(v, "inspected") == 0)
			*(int *)field = 1;
		else
			goto bad;
		return 0;
	case K_PRIV:
		pl = &c->priv[k->min];
		if (strlen(v) >= sizeof(buf)) {
			snprintf(err, errlen, "list too long");
			return -1;
		}
		usbgw_strlcpy(buf, v, sizeof(buf));
		for (t = strtok_r(buf, " \t,", &save); t != NULL;
		    t = strtok_r(NULL, " \t,", &save)) {
			tok = t;
			if (pl->n >= CONFIG_MAX_PRINCIPALS) {
				snprintf(err, errlen, "expected at most %d "
				    "entries", CONFIG_MAX_PRINCIPALS);
				return -1;
			}
			if (parse_principal(tok, &pl->p[pl->n]) != 0) {
				snprintf(err, errlen, "expected a user name, uid, "
				    "@group or @gid, got \"%s\"", tok);
				return -1;
			}
			pl->n++;
		}
		return 0;
	case K_LISTEN: {
		char lbuf[CONFIG_HOST_MAX + 32], *opt;
		int ltls = 0;

		/* "ADDRESS:PORT [tls=optional|off]" (protocol.md 1.10.9) */
		usbgw_strlcpy(lbuf, v, sizeof(lbuf));
		if ((opt = strpbrk(lbuf, " \t")) != NULL) {
			*opt++ = '\0';
			opt += strspn(opt, " \t");
			if (strcmp(opt, "tls=optional") == 0)
				ltls = 1;
			else if (strcmp(opt, "tls=off") != 0) {
				snprintf(err, errlen, "expected ADDRESS:PORT "
				    "[tls=optional|off] (a TLS-only listener is "
				    "tls-listen), got \"%s\"", shown);
				return -1;
			}
		}
		if (parse_hostport(lbuf, CONFIG_DEFAULT_PORT, &a, &errstr, 0) != 0) {
			snprintf(err, errlen, "%s, got \"%s\"", errstr, shown);
			return -1;
		}
		if (!*listen_seen) {
			c->nlisten = 0;
			*listen_seen = 1;
		}
		if (c->nlisten >= CONFIG_MAX_LISTEN) {
			snprintf(err, errlen, "expected at most %d listen "
			    "addresses", CONFIG_MAX_LISTEN);
			return -1;
		}
		c->listen_tls[c->nlisten] = ltls;
		c->listen[c->nlisten++] = a;
		return 0;
	}
	case K_METRICS:
		if (strcmp(v, "none") == 0) {
			c->metrics_on = 0;
			return 0;
		}
		if (strspn(v, "0123456789") == strlen(v)) {
			char lb[64];

			snprintf(lb, sizeof(lb), "127.0.0.1:%s", v);
			if (parse_hostport(lb, NULL, &a, &errstr, 1) != 0)
				goto bad;
		} else if (strchr(v, ':') == NULL ||
		    parse_hostport(v, NULL, &a, &errstr, 1) != 0)
			goto bad;
		c->metrics_listen = a;
		c->metrics_on = 1;
		return 0;
	case K_TLSLISTEN:
		if (parse_hostport(v, CONFIG_DEFAULT_PORT, &a, &errstr, 0) != 0) {
			snprintf(err, errlen, "%s, got \"%s\"", errstr, shown);
			return -1;
		}
		if (c->ntls_listen >= CONFIG_MAX_LISTEN) {
			snprintf(err, errlen, "expected at most %d tls-listen "
			    "addresses", CONFIG_MAX_LISTEN);
			return -1;
		}
		c->tls_listen[c->ntls_listen++] = a;
		return 0;
	}
bad:
	snprintf(err, errlen, "expected %s, got \"%s\"", ktype_expect(k->type), shown);
	return -1;
}

static const struct key *
key_find(const char *name, size_t *idx)
{
	size_t i;

	for (i = 0; i < nitems(keys); i++)
		if (keys[i].name[0] == name[0] &&
		    strcmp(keys[i].name, name) == 0) {
			if (idx != NULL)
				*idx = i;
			return &keys[i];
		}
	return NULL;
}

int
config_set(struct config *c, const char *key, const char *value, char *err,
    size_t errlen)
{
	const struct key *k;
	char msg[512];

	if ((k = key_find(key, NULL)) == NULL) {
		snprintf(err, errlen, "unknown key \"%s\"", key);
		return -1;
	}
	if (key_apply(c, k, value, 1, &c->listen_overridden, msg,
	    sizeof(msg)) != 0) {
		snprintf(err, errlen, "%s: %s", key, msg);
		return -1;
	}
	return 0;
}

static char *
skip_ws(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

static void
rtrim(char *s)
{
	size_t n = strlen(s);

	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' ||
	    s[n - 1] == '\r'))
		s[--n] = '\0';
}

/* Strip one pair of double quotes around a whole value. */
static int
unquote(char *v)
{
	size_t n = strlen(v);

	if (n == 0 || v[0] != '"')
		return 0;
	if (n < 2 || v[n - 1] != '"')
		return -1;
	memmove(v, v + 1, n - 2);
	v[n - 2] = '\0';
	return strchr(v, '"') != NULL ? -1 : 0;
}

void
config_host_canon(char *host, size_t len)
{
	char addr[INET6_ADDRSTRLEN + 1], out[INET6_ADDRSTRLEN];
	unsigned char bin[16];
	const char *zone = strchr(host, '%');
	size_t alen = zone != NULL ? (size_t)(zone - host) : strlen(host), i;

	if (alen < sizeof(addr)) {
		memcpy(addr, host, alen);
		addr[alen] = '\0';
		if ((strchr(addr, ':') != NULL &&
		    inet_pton(AF_INET6, addr, bin) == 1 &&
		    inet_ntop(AF_INET6, bin, out, sizeof(out)) != NULL) ||
		    (zone == NULL && inet_pton(AF_INET, addr, bin) == 1 &&
		    inet_ntop(AF_INET, bin, out, sizeof(out)) != NULL)) {
			char z[CONFIG_HOST_MAX];

			usbgw_strlcpy(z, zone != NULL ? zone : "", sizeof(z));
			if (strlen(out) + strlen(z) < len)
				snprintf(host, len, "%s%s", out, z);
			return;
		}
	}
	for (i = 0; i < alen; i++)
		if (host[i] >= 'A' && host[i] <= 'Z')
			host[i] = (char)(host[i] - 'A' + 'a');
}

const char *
config_exporter_where(const struct config *c, const struct config_exporter *e,
    char *buf, size_t len)
{
	snprintf(buf, len, "%s:%d", e->file < c->nexporter_files ?
	    c->exporter_files[e->file] : "?", e->line);
	return buf;
}

/* Where another declaration is, as this file's errors say it. */
static const char *
where_other(const struct config *c, const struct parse *p,
    const struct config_exporter *e, char *buf, size_t len)
{
	if (e->file == p->file)
		snprintf(buf, len, "line %d", e->line);
	else
		config_exporter_where(c, e, buf, len);
	return buf;
}

/* A name or address declared before (any file of this configuration)? */
static int
exporter_dup(struct config *c, struct parse *p, int line, const char *what,
    const char *name, const struct net_addr *a)
{
	const struct config_exporter *o;
	char w[CONFIG_FILE_NAME_MAX + 16], shown[CONFIG_HOST_MAX + 16];
	size_t i;

	for (i = 0; i < c->nexporters; i++) {
		o = &c->exporters[i];
		if (strcmp(o->name, name) == 0) {
			perr(p, line, "%s %s: already declared at %s", what, name,
			    where_other(c, p, o, w, sizeof(w)));
			return 1;
		}
	}
	if (a == NULL)
		return 0;		/* a dial-out agent: no address of its own */
	for (i = 0; i < c->nexporters; i++) {
		o = &c->exporters[i];
		if (o->kind != 2 && strcmp(o->addr.host, a->host) == 0 &&
		    strcmp(o->addr.port, a->port) == 0) {
			snprintf(shown, sizeof(shown), strchr(a->host, ':') ?
			    "[%s]:%s" : "%s:%s", a->host, a->port);
			perr(p, line, "%s %s: address %s is exporter %s's "
			    "(%s): one exporter, one name", what, name, shown,
			    o->name, where_other(c, p, o, w, sizeof(w)));
			return 1;
		}
	}
	if (c->nexporters >= CONFIG_MAX_EXPORTERS) {
		perr(p, line, "expected at most %d exporters",
		    CONFIG_MAX_EXPORTERS);
		return 1;
	}
	return 0;
}

static void
parse_exporter(struct config *c, struct parse *p, int line, char *rest)
{
	struct config_exporter *e;
	char *name, *addr, *extra, *save;
	const char *errstr, *form = p->mode == PM_IMPORT ?
	    "NAME HOST[:PORT] [agent] [tls=required|off]" :
	    "exporter NAME HOST[:PORT] [agent] [tls=required|off]";
	struct net_addr a;
	int kind = 0, tls = 0;

	name = strtok_r(rest, " \t", &save);
	addr = name != NULL ? strtok_r(NULL, " \t", &save) : NULL;
	extra = addr != NULL ? strtok_r(NULL, " \t", &save) : NULL;
	if (extra != NULL && strcmp(extra, "agent") == 0) {
		kind = 1;
		extra = strtok_r(NULL, " \t", &save);
	}
	if (extra != NULL && strncmp(extra, "tls=", 4) == 0) {
		if (strcmp(extra + 4, "required") == 0)
			tls = 2;
		else if (strcmp(extra + 4, "off") == 0)
			tls = 0;
		else {
			perr(p, line, "exporter %s: expected tls=required or "
			    "tls=off, got \"%s\" (optional is offered for "
			    "dial-out agents only: the gateway would fall back "
			    "to plaintext on a connection an attacker can make "
			    "fail)", name != NULL ? name : "?", extra);
			return;
		}
		extra = strtok_r(NULL, " \t", &save);
	}
	if (name == NULL || addr == NULL || extra != NULL) {
		perr(p, line, "expected \"%s\"", form);
		return;
	}
	if (!name_valid(name, 32) || strchr(name, '$') != NULL) {
		perr(p, line, "exporter: expected a name of 1 to 31 letters, "
		    "digits, '.', '-' or '_', got \"%s\"", name);
		return;
	}
	if (parse_addr(addr, CONFIG_DEFAULT_PORT, &a, &errstr) != 0) {
		perr(p, line, "exporter %s: %s, got \"%s\"", name, errstr, addr);
		return;
	}
	if (a.host[0] == '\0') {
		perr(p, line, "exporter %s: expected a host, got \"%s\"", name,
		    addr);
		return;
	}
	config_host_canon(a.host, sizeof(a.host));
	if (exporter_dup(c, p, line, "exporter", name, &a))
		return;
	e = &c->exporters[c->nexporters++];
	usbgw_strlcpy(e->name, name, sizeof(e->name));
	e->addr = a;
	e->kind = kind;
	e->tls = tls;
	e->line = line;
	e->file = p->file;
}

/*
 * "ADDRESS[/PREFIX]", an IPv4 or IPv6 network with no host bits set
 * (part 3, 3.6): written back canonical into out.
 */
static int
parse_net(const char *s, char *out, size_t outlen, const char **errstr)
{
	char tmp[INET6_ADDRSTRLEN + 8], buf[INET6_ADDRSTRLEN], *slash;
	struct usbgw_addr a, m;
	long long n;
	unsigned full, i;

	if (strlen(s) >= sizeof(tmp)) {
		*errstr = "expected ADDRESS[/PREFIX]";
		return -1;
	}
	usbgw_strlcpy(tmp, s, sizeof(tmp));
	if ((slash = strchr(tmp, '/')) != NULL)
		*slash++ = '\0';
	if (usbgw_addr_parse(tmp, &a) == -1) {
		*errstr = "expected an IPv4 or IPv6 address";
		return -1;
	}
	full = a.family == AF_INET ? 32 : 128;
	n = full;
	if (slash != NULL && parse_num(slash, 0, full, &n, errstr) == -1) {
		*errstr = full == 32 ? "expected a prefix length 0-32" :
		    "expected a prefix length 0-128";
		return -1;
	}
	m = a;
	for (i = 0; i < 16; i++) {
		int bits = (int)n - (int)i * 8;

		if (bits < 8)
			m.addr[i] &= bits <= 0 ? 0 : (uint8_t)(0xff << (8 - bits));
	}
	if (memcmp(m.addr, a.addr, sizeof(a.addr)) != 0) {
		*errstr = "host bits set in the network";
		return -1;
	}
	snprintf(out, outlen, "%s/%lld", usbgw_addr_format(&a, buf,
	    sizeof(buf)), n);
	return 0;
}

/* agent NAME from ADDRESS[/PREFIX]: a dial-out agent. */
static void
parse_agent(struct config *c, struct parse *p, int line, char *rest)
{
	struct config_exporter *e;
	char *name, *from, *net, *extra, *save, canon[CONFIG_HOST_MAX];
	const char *errstr = NULL;
	int tls = 0;

	name = strtok_r(rest, " \t", &save);
	from = name != NULL ? strtok_r(NULL, " \t", &save) : NULL;
	net = from != NULL ? strtok_r(NULL, " \t", &save) : NULL;
	extra = net != NULL ? strtok_r(NULL, " \t", &save) : NULL;
	if (extra != NULL && strncmp(extra, "tls=", 4) == 0) {
		if (strcmp(extra + 4, "required") == 0)
			tls = 2;
		else if (strcmp(extra + 4, "optional") == 0)
			tls = 1;
		else if (strcmp(extra + 4, "off") != 0) {
			perr(p, line, "agent %s: expected tls=required, "
			    "tls=optional or tls=off, got \"%s\"", name, extra);
			return;
		}
		extra = strtok_r(NULL, " \t", &save);
	}
	if (name == NULL || from == NULL || strcmp(from, "from") != 0 ||
	    net == NULL || extra != NULL) {
		perr(p, line, "expected \"agent NAME from ADDRESS[/PREFIX] "
		    "[tls=required|optional|off]\"");
		return;
	}
	if (!name_valid(name, 32) || strchr(name, '$') != NULL) {
		perr(p, line, "agent: expected a name of 1 to 31 letters, "
		    "digits, '.', '-' or '_', got \"%s\"", name);
		return;
	}
	if (parse_net(net, canon, sizeof(canon), &errstr) == -1) {
		perr(p, line, "agent %s: %s, got \"%s\"", name, errstr, net);
		return;
	}
	if (exporter_dup(c, p, line, "agent", name, NULL))
		return;
	if (c->nexporters >= CONFIG_MAX_EXPORTERS) {
		perr(p, line, "expected at most %d exporters",
		    CONFIG_MAX_EXPORTERS);
		return;
	}
	e = &c->exporters[c->nexporters++];
	e->file = p->file;
	usbgw_strlcpy(e->name, name, sizeof(e->name));
	usbgw_strlcpy(e->addr.host, canon, sizeof(e->addr.host));
	usbgw_strlcpy(e->addr.port, CONFIG_DEFAULT_PORT, sizeof(e->addr.port));
	e->kind = 2;
	e->tls = tls;
	e->line = line;
}

static void
parse_hook(struct config *c, struct parse *p, int line, char *rest)
{
	struct config_hook *h;
	char *evs, *cmd, *t, *save;
	uint32_t mask = 0;
	int ev, bad = 0;

	evs = rest;
	cmd = rest + strcspn(rest, " \t");
	if (*cmd != '\0')
		*cmd++ = '\0';
	cmd = skip_ws(cmd);
	if (*evs == '\0' || *cmd == '\0') {
		perr(p, line, "expected \"hook EVENT[,EVENT...] COMMAND\"");
		return;
	}
	for (t = strtok_r(evs, ",", &save); t != NULL;
	    t = strtok_r(NULL, ",", &save)) {
		if (strcmp(t, "all") == 0 || strcmp(t, "*") == 0)
			mask |= HOOK_EV_ALL;
		else if ((ev = hook_event_parse(t)) >= 0)
			mask |= 1u << ev;
		else {
			perr(p, line, "hook: expected an event name (pending, "
			    "access-request, approve, deny, revoke, "
			    "identity-change, gone, attach, detach, probed, "
			    "exporter-up, exporter-down, policy, identity-anomaly, "
			    "pairing, pairing-end or all), "
			    "got \"%s\"", t);
			bad = 1;
		}
	}
	if (bad)
		return;
	if (mask == 0) {
		perr(p, line, "hook: expected at least one event");
		return;
	}
	if (strlen(cmd) >= CONFIG_PATH_MAX) {
		perr(p, line, "hook: command longer than %d bytes",
		    CONFIG_PATH_MAX - 1);
		return;
	}
	if (c->nhooks >= CONFIG_MAX_HOOKS) {
		perr(p, line, "expected at most %d hooks", CONFIG_MAX_HOOKS);
		return;
	}
	h = &c->hooks[c->nhooks++];
	h->events = mask;
	usbgw_strlcpy(h->command, cmd, sizeof(h->command));
	h->line = line;
}

static void
parse_line(struct config *c, struct parse *p, int line, char *s)
{
	const struct key *k;
	char *key, *v, *eq, msg[512];
	size_t idx, i;

	rtrim(s);
	s = skip_ws(s);
	if (*s == '\0' || *s == '#')
		return;
	for (i = 0; s[i] != '\0'; i++)
		if ((unsigned char)s[i] < 0x20 && s[i] != '\t') {
			perr(p, line, "expected text, got control character "
			    "0x%02x", (unsigned char)s[i]);
			return;
		}

	if (p->mode == PM_IMPORT) {
		/* "exporter NAME ..." too: a config file's lines pasted */
		if (strncmp(s, "exporter", 8) == 0 && (s[8] == ' ' ||
		    s[8] == '\t'))
			s = skip_ws(s + 8);
		parse_exporter(c, p, line, s);
		return;
	}
	if (strncmp(s, "exporter", 8) == 0 && (s[8] == ' ' || s[8] == '\t')) {
		parse_exporter(c, p, line, skip_ws(s + 8));
		return;
	}
	if (p->mode == PM_EXPORTERS_D && !(strncmp(s, "agent", 5) == 0 &&
	    (s[5] == ' ' || s[5] == '\t'))) {
		perr(p, line, "expected \"exporter NAME HOST[:PORT] [agent] "
		    "[tls=required|off]\" or \"agent NAME from "
		    "ADDRESS[/PREFIX]\" (an exporters.d file holds exporters "
		    "only; other settings go in the config file)");
		return;
	}
	if (strncmp(s, "hook", 4) == 0 && (s[4] == ' ' || s[4] == '\t')) {
		parse_hook(c, p, line, skip_ws(s + 4));
		return;
	}
	if (strncmp(s, "agent", 5) == 0 && (s[5] == ' ' || s[5] == '\t')) {
		parse_agent(c, p, line, skip_ws(s + 5));
		return;
	}
	if ((eq = strchr(s, '=')) == NULL) {
		perr(p, line, "expected \"KEY = VALUE\", \"exporter NAME "
		    "HOST[:PORT] [agent]\", \"agent NAME from ADDRESS[/PREFIX]\" "
		    "or \"hook EVENTS COMMAND\"");
		return;
	}
	*eq = '\0';
	key = s;
	rtrim(key);
	v = skip_ws(eq + 1);
	if (*key == '\0') {
		perr(p, line, "expected a key before '='");
		return;
	}
	if ((k = key_find(key, &idx)) == NULL) {
		perr(p, line, "unknown key \"%s\" (see usbgwd.conf(5))", key);
		return;
	}
	if (unquote(v) != 0) {
		perr(p, line, "%s: expected a closing '\"'", key);
		return;
	}
	if (k->type != K_PRIV && k->type != K_LISTEN && k->type != K_TLSLISTEN &&
	    p->key_line[idx] != 0) {
		perr(p, line, "%s: already set at line %d", key,
		    p->key_line[idx]);
		return;
	}
	if (key_apply(c, k, v, 0, &p->listen_from_file, msg, sizeof(msg)) != 0) {
		perr(p, line, "%s: %s", key, msg);
		return;
	}
	if (p->key_line[idx] == 0)
		p->key_line[idx] = line;
}

/* The part of a path after its last '/'. */
static const char *
base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s != NULL && s[1] != '\0' ? s + 1 : path;
}

/* Register a file exporters are declared in; its index, or -1 if full. */
static int
exporter_file_add(struct config *c, const char *name)
{
	if (c->nexporter_files >= CONFIG_MAX_EXPORTER_FILES)
		return -1;
	usbgw_strlcpy(c->exporter_files[c->nexporter_files], base_name(name),
	    CONFIG_FILE_NAME_MAX);
	return (int)c->nexporter_files++;
}

static void
parse_init(struct parse *p, const char *name, int mode)
{
	p->name = name;
	p->errs[0] = '\0';
	p->errlen = 0;
	p->nerrs = 0;
	memset(p->key_line, 0, sizeof(p->key_line));
	p->listen_from_file = 0;
	p->mode = mode;
	p->file = 0;
}

/* Every line of buf through parse_line; 0, or -1 with *errs. */
static int
parse_text(struct config *c, struct parse *p, const char *buf, size_t len,
    char **errs)
{
	char line[CONFIG_MAX_LINE + 1];
	size_t i = 0, n;
	const char *nl;
	int lineno = 0;

	*errs = NULL;
	if (len > CONFIG_MAX_FILE) {
		perr(p, 0, "larger than %d bytes", CONFIG_MAX_FILE);
		*errs = xstrdup(p->errs);
		return -1;
	}
	while (i < len) {
		lineno++;
		nl = memchr(buf + i, '\n', len - i);
		n = nl != NULL ? (size_t)(nl - (buf + i)) : len - i;
		if (n > CONFIG_MAX_LINE)
			perr(p, lineno, "line longer than %d bytes",
			    CONFIG_MAX_LINE);
		else if (memchr(buf + i, '\0', n) != NULL)
			perr(p, lineno, "expected text, got a NUL byte");
		else {
			memcpy(line, buf + i, n);
			line[n] = '\0';
			parse_line(c, p, lineno, line);
		}
		i += n + (nl != NULL);
	}
	if (p->nerrs > 0) {
		*errs = xstrdup(p->errs);
		return -1;
	}
	return 0;
}

int
config_parse_buf(struct config *c, const char *name, const char *buf,
    size_t len, char **errs)
{
	struct parse p;

	parse_init(&p, name, PM_CONFIG);
	if (c->nexporter_files == 0)
		exporter_file_add(c, name);
	return parse_text(c, &p, buf, len, errs);
}

int
config_parse_exporter_list(struct config *c, const char *name,
    const char *buf, size_t len, char **errs)
{
	struct parse p;
	int f;

	parse_init(&p, name, PM_IMPORT);
	if ((f = exporter_file_add(c, name)) < 0) {
		xasprintf(errs, "%s: too many files\n", name);
		return -1;
	}
	p.file = (unsigned short)f;
	return parse_text(c, &p, buf, len, errs);
}

int
config_load(struct config *c, const char *path, int must_exist, char **errs)
{
	char *buf;
	size_t len;
	int rv;

	if ((rv = usbgw_read_config_file(path, CONFIG_MAX_FILE, must_exist, &buf, &len,
	    errs)) != 0)
		return rv == 1 ? 0 : -1;
	rv = config_parse_buf(c, path, buf, len, errs);
	if (rv == 0)
		usbgw_strlcpy(c->path, path, sizeof(c->path));
	free(buf);
	return rv;
}

/* Append text to a malloc'd error text. */
static void
errs_cat(char **errs, const char *text)
{
	size_t a = *errs != NULL ? strlen(*errs) : 0, b = strlen(text);

	*errs = xreallocarray(*errs, 1, a + b + 1);
	memcpy(*errs + a, text, b + 1);
}

static int
name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.conf names in dir, sorted (caller frees); -1 with errno. */
static int
dir_conf_names(const char *dir, char ***names, size_t *n)
{
	DIR *d;
	struct dirent *de;
	size_t len, cap = 0;

	*names = NULL;
	*n = 0;
	if ((d = opendir(dir)) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		len = strlen(de->d_name);
		if (de->d_name[0] == '.' || len <= 5 ||
		    strcmp(de->d_name + len - 5, ".conf") != 0)
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 16;
			*names = xreallocarray(*names, cap, sizeof(**names));
		}
		(*names)[(*n)++] = xstrdup(de->d_name);
	}
	closedir(d);
	if (*n > 1)
		qsort(*names, *n, sizeof(**names), name_cmp);
	return 0;
}

int
config_load_exporters_dir(struct config *c, const char *conf_path, char *dirbuf,
    size_t dirlen, char **errs)
{
	char dir[CONFIG_PATH_MAX], path[CONFIG_PATH_MAX * 2], msg[CONFIG_PATH_MAX * 2 + 128];
	char **names, *buf, *ferrs;
	const char *slash;
	struct parse *p;
	size_t i, n, len;
	int f, rv = 0;

	*errs = NULL;
	if (dirbuf != NULL && dirlen > 0)
		dirbuf[0] = '\0';
	if (strcmp(c->exporters_dir, "none") == 0)
		return 0;
	slash = conf_path != NULL ? strrchr(conf_path, '/') : NULL;
	if (c->exporters_dir[0] == '/')
		usbgw_strlcpy(dir, c->exporters_dir, sizeof(dir));
	else if (snprintf(dir, sizeof(dir), "%.*s%s%s",
	    slash != NULL ? (int)(slash - conf_path) : 1,
	    slash != NULL ? conf_path : ".", "/", c->exporters_dir[0] != '\0' ?
	    c->exporters_dir : "exporters.d") >= (int)sizeof(dir)) {
		xasprintf(errs, "exporters-dir: the path is longer than %d "
		    "bytes\n", CONFIG_PATH_MAX - 1);
		return -1;
	}
	if (dirbuf != NULL)
		usbgw_strlcpy(dirbuf, dir, dirlen);
	if (c->nexporter_files == 0)
		exporter_file_add(c, conf_path != NULL ? conf_path : "-");
	if (dir_conf_names(dir, &names, &n) == -1) {
		if (errno == ENOENT)
			return 0;		/* no directory: no exporters */
		xasprintf(errs, "%s: cannot read the exporters directory: "
		    "%s\n", dir, strerror(errno));
		return -1;
	}
	p = xcalloc(1, sizeof(*p));
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (strlen(names[i]) >= CONFIG_FILE_NAME_MAX) {
			snprintf(msg, sizeof(msg), "%s: expected a file name "
			    "of at most %d bytes\n", path,
			    CONFIG_FILE_NAME_MAX - 1);
			errs_cat(errs, msg);
			rv = -1;
			continue;
		}
		if ((f = exporter_file_add(c, names[i])) < 0) {
			snprintf(msg, sizeof(msg), "%s: expected at most %d "
			    "files in the exporters directory\n", path,
			    CONFIG_MAX_EXPORTER_FILES - 1);
			errs_cat(errs, msg);
			rv = -1;
			break;
		}
		if (usbgw_read_config_file(path, CONFIG_MAX_FILE, 1, &buf,
		    &len, &ferrs) != 0) {
			errs_cat(errs, ferrs);
			free(ferrs);
			rv = -1;
			continue;
		}
		parse_init(p, path, PM_EXPORTERS_D);
		p->file = (unsigned short)f;
		if (parse_text(c, p, buf, len, &ferrs) != 0) {
			errs_cat(errs, ferrs);
			free(ferrs);
			rv = -1;
		}
		free(buf);
	}
	free(p);
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rv;
}

static void
dump_add(char **out, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
dump_add(char **out, size_t *len, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		fatal("vasprintf");
	*out = xreallocarray(*out, 1, *len + (size_t)n + 1);
	memcpy(*out + *len, s, (size_t)n + 1);
	*len += (size_t)n;
	free(s);
}

static void
fmt_addr(char *buf, size_t len, const struct net_addr *a)
{
	if (a->host[0] == '\0')
		snprintf(buf, len, "*:%s", a->port);
	else if (strchr(a->host, ':') != NULL)
		snprintf(buf, len, "[%s]:%s", a->host, a->port);
	else
		snprintf(buf, len, "%s:%s", a->host, a->port);
}

char *
config_dump(const struct config *c)
{
	static const char *const lvl[] = { "error", "warning", "info", "debug" };
	const struct key *k;
	const struct config_privlist *pl;
	char *out = NULL, buf[CONFIG_HOST_MAX + 16], evs[512];
	const char *fld;
	size_t len = 0, i, j;
	int ev;

	dump_add(&out, &len, "# effective configuration\n");
	for (i = 0; i < nitems(keys); i++) {
		k = &keys[i];
		fld = (const char *)c + k->off;
		switch (k->type) {
		case K_PATH:
		case K_SOCKET:
			if (*fld == '\0')	/* audit-key, tls-dir, ...: derived */
				dump_add(&out, &len, "# %s = %s (default)\n",
				    k->name, strcmp(k->name, "tls-dir") == 0 ?
				    "DATABASE's directory/tls" :
				    strcmp(k->name, "exporters-dir") == 0 ?
				    "exporters.d (beside the config file)" :
				    "DATABASE.key");
			else
				dump_add(&out, &len, "%s = %s\n", k->name, fld);
			break;
		case K_GWNAME:
			if (*fld == '\0')
				dump_add(&out, &len, "# %s = (the host name) "
				    "(default)\n", k->name);
			else
				dump_add(&out, &len, "%s = %s\n", k->name, fld);
			break;
		case K_PATH_NONE:
		case K_GROUP:
			dump_add(&out, &len, "%s = %s\n", k->name,
			    *fld != '\0' ? fld : "none");
			break;
		case K_BOOL:
			dump_add(&out, &len, "%s = %s\n", k->name,
			    *(const int *)fld ? "yes" : "no");
			break;
		case K_UINT:
			dump_add(&out, &len, "%s = %u\n", k->name,
			    *(const unsigned *)fld);
			break;
		case K_SIZE:
			dump_add(&out, &len, "%s = %zu\n", k->name,
			    *(const size_t *)fld);
			break;
		case K_DURATION:
			fmt_duration(buf, sizeof(buf), *(const unsigned *)fld);
			dump_add(&out, &len, "%s = %s\n", k->name, buf);
			break;
		case K_SECONDS:
			fmt_duration(buf, sizeof(buf),
			    *(const unsigned *)fld * MS_S);
			dump_add(&out, &len, "%s = %s\n", k->name, buf);
			break;
		case K_LOGLEVEL:
			dump_add(&out, &len, "%s = %s\n", k->name,
			    lvl[*(const int *)fld & 3]);
			break;
		case K_LOGTARGET:
			dump_add(&out, &len, "%s = %s\n", k->name,
			    *(const int *)fld ? "stderr" : "syslog");
			break;
		case K_LOGFORMAT:
			dump_add(&out, &len, "%s = %s\n", k->name,
			    *(const int *)fld ? "json" : "text");
			break;
		case K_SOCKMODE:
			dump_add(&out, &len, "%s = %04o\n", k->name,
			    (unsigned)*(const mode_t *)fld);
			break;
		case K_MODE:
			dump_add(&out, &len, "%s = %s\n", k->name,
			    *(const enum config_mode *)fld == CONFIG_MODE_LOCAL ?
			    "local" : "proxy");
			break;
		case K_VHCI:
			if (*(const int *)fld < 0)
				dump_add(&out, &len, "%s = any\n", k->name);
			else
				dump_add(&out, &len, "%s = %d\n", k->name,
				    *(const int *)fld);
			break;
		case K_STORELOSS:
			dump_add(&out, &len, "%s = %s\n", k->name,
			    *(const int *)fld == CONFIG_STORE_LOSS_KEEP ?
			    "keep" : "stop");
			break;
		case K_LOCALATTACH:
			dump_add(&out, &len, "%s = %s\n", k->name,
			    *(const int *)fld ? "inspected" : "direct");
			break;
		case K_PRIV:
			pl = &c->priv[k->min];
			if (pl->n == 0)
				break;
			dump_add(&out, &len, "%s =", k->name);
			for (j = 0; j < pl->n; j++)
				dump_add(&out, &len, " %s%s",
				    pl->p[j].is_group ? "@" : "", pl->p[j].name);
			dump_add(&out, &len, "\n");
			break;
		case K_LISTEN:
			for (j = 0; j < c->nlisten; j++) {
				fmt_addr(buf, sizeof(buf), &c->listen[j]);
				dump_add(&out, &len, "listen = %s%s\n", buf,
				    c->listen_tls[j] ? " tls=optional" : "");
			}
			break;
		case K_METRICS:
			if (c->metrics_on) {
				fmt_addr(buf, sizeof(buf), &c->metrics_listen);
				dump_add(&out, &len, "metrics-listen = %s\n",
				    buf);
			} else
				dump_add(&out, &len, "metrics-listen = none\n");
			break;
		case K_TLSLISTEN:
			for (j = 0; j < c->ntls_listen; j++) {
				fmt_addr(buf, sizeof(buf), &c->tls_listen[j]);
				dump_add(&out, &len, "tls-listen = %s\n", buf);
			}
			break;
		}
	}
	for (i = 0; i < c->nexporters; i++) {
		static const char *const tlsw[] = { "", " tls=optional",
		    " tls=required" };
		const char *tw = c->exporters[i].tls >= 0 &&
		    c->exporters[i].tls <= 2 ? tlsw[c->exporters[i].tls] : "";

		if (c->exporters[i].file != 0 && (i == 0 ||
		    c->exporters[i - 1].file != c->exporters[i].file) &&
		    c->exporters[i].file < c->nexporter_files)
			dump_add(&out, &len, "# from exporters.d: %s\n",
			    c->exporter_files[c->exporters[i].file]);

		if (c->exporters[i].kind == 2) {
			dump_add(&out, &len, "agent %s from %s%s\n",
			    c->exporters[i].name, c->exporters[i].addr.host, tw);
			continue;
		}
		fmt_addr(buf, sizeof(buf), &c->exporters[i].addr);
		dump_add(&out, &len, "exporter %s %s%s%s\n",
		    c->exporters[i].name, buf, c->exporters[i].kind == 1 ?
		    " agent" : "", tw);
	}
	for (i = 0; i < c->nhooks; i++) {
		evs[0] = '\0';
		if (c->hooks[i].events == HOOK_EV_ALL)
			usbgw_strlcpy(evs, "all", sizeof(evs));
		else
			for (ev = 0; ev < HOOK_NEVENTS; ev++)
				if (c->hooks[i].events & (1u << ev)) {
					if (evs[0] != '\0')
						usbgw_strlcat(evs, ",", sizeof(evs));
					usbgw_strlcat(evs, hook_event_name(ev),
					    sizeof(evs));
				}
		dump_add(&out, &len, "hook %s %s\n", evs, c->hooks[i].command);
	}
	return out;
}
