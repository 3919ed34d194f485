/*
 * usbgwd: the USB/IP authorization gateway daemon.  See usbgwd(8).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <malloc.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <event2/event.h>

#include "base/hostname.h"
#include "base/log.h"
#include "base/util.h"
#include "control/config.h"
#include "control/control.h"
#include "control/hooks.h"
#include "core/agentgw.h"
#include "core/device.h"
#include "core/enroll.h"
#include "core/exporter.h"
#include "core/lease.h"
#include "core/local.h"
#include "core/loop.h"
#include "core/relay.h"
#include "core/session.h"
#include "core/store.h"
#include "core/tiers.h"
#include "core/upstream.h"
#include "daemon/commands.h"
#include "daemon/feed.h"
#include "daemon/gw.h"
#include "daemon/metrics.h"
#include "db/leasedb.h"
#include "db/sqldb.h"
#include "tls/tlsid.h"

#include "base/version.h"
#define USBGWD_VERSION	USBGW_VERSION

static const char *flag_keys[16], *flag_vals[16];
static int nflags;
static const char *conf_path;
static int conf_must_exist;
static const char *port_file;

static __attribute__((noreturn)) void
usage(int code)
{
	fprintf(code ? stderr : stdout,
	    "usage: usbgwd [-fhnV] [-c FILE] [-d DATABASE] [-s SOCKET] "
	    "[-l ADDRESS:PORT]\n"
	    "              [-N NAME] [-p PIDFILE] [-v LEVEL] [-P PORTFILE]\n"
	    "  -f            stay in the foreground, log to stderr\n"
	    "  -c FILE       configuration file (default %s)\n"
	    "  -d DATABASE   SQLite database file, or a PostgreSQL URI\n"
	    "                postgresql://USER@/DB?host=DIR (default %s)\n"
	    "  -s SOCKET     control socket (default %s)\n"
	    "  -l ADDR:PORT  USB/IP listen address, may repeat (default *:%s;\n"
	    "                none in local mode)\n"
	    "  -N NAME       this gateway's name among several on one database\n"
	    "                (gateway-name; default the host name)\n"
	    "  -p PIDFILE    pid file\n"
	    "  -v LEVEL      log level: error, warning, info, debug\n"
	    "  -n            check the configuration and exit\n"
	    "  -P FILE       write the first listening port to FILE (tests)\n"
	    "  -V            print the version\n",
	    CONFIG_DEFAULT_PATH, CONFIG_DEFAULT_DB, CONFIG_DEFAULT_SOCKET,
	    CONFIG_DEFAULT_PORT);
	exit(code);
}

static void
add_flag(const char *key, const char *val)
{
	if (nflags >= (int)nitems(flag_keys))
		fatalx("too many command-line options");
	flag_keys[nflags] = key;
	flag_vals[nflags] = val;
	nflags++;
}

/* Read the file, then apply the flags over it.  NULL on error. */
/* Errors ("FILE:LINE: ..." lines): on stderr at start, logged on SIGHUP. */
static void
config_errors(const char *errs, int reload)
{
	char *copy, *line, *save;

	if (!reload) {
		fprintf(stderr, "%s", errs);
		return;
	}
	copy = xstrdup(errs);
	for (line = strtok_r(copy, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save))
		log_warnx("%s", line);
	free(copy);
}

static struct config *
load_config(int reload)
{
	struct config *cfg = config_new();
	char *errs = NULL, err[256], dir[CONFIG_PATH_MAX];
	int i, nlisten = 0;

	if (config_load(cfg, conf_path, conf_must_exist, &errs) != 0) {
		config_errors(errs, reload);
		free(errs);
		config_free(cfg);
		return NULL;
	}
	for (i = 0; i < nflags; i++) {
		if (strcmp(flag_keys[i], "listen") == 0 && nlisten++ > 0) {
			/* further -l flags add addresses */
			struct net_addr a;
			const char *es;

			if (cfg->nlisten >= CONFIG_MAX_LISTEN ||
			    parse_listen(flag_vals[i], &a, &es) == -1) {
				fprintf(stderr, "usbgwd: -l %s: invalid address\n",
				    flag_vals[i]);
				config_free(cfg);
				return NULL;
			}
			cfg->listen[cfg->nlisten++] = a;
			continue;
		}
		if (config_set(cfg, flag_keys[i], flag_vals[i], err,
		    sizeof(err)) == -1) {
			fprintf(stderr, "usbgwd: %s\n", err);
			config_free(cfg);
			return NULL;
		}
	}
	/* exporters.d, after the flags: -c decides where it is */
	if (config_load_exporters_dir(cfg, conf_path, dir, sizeof(dir),
	    &errs) != 0) {
		config_errors(errs, reload);
		free(errs);
		config_free(cfg);
		return NULL;
	}
	if (cfg->nexporter_files > 1)
		log_debug("%s: %zu files read", dir, cfg->nexporter_files - 1);
	return cfg;
}

/*
 * Every claim, attachment and control client is a descriptor: take the
 * hard limit (up to 64 Ki) rather than the soft 1024 a service starts
 * with, so that a few hundred thin clients do not run the gateway out.
 */
static void
raise_nofile(void)
{
	struct rlimit rl;
	rlim_t want;

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1)
		return;
	want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > 65536 ?
	    65536 : rl.rlim_max;
	if (want <= rl.rlim_cur)
		return;
	rl.rlim_cur = want;
	if (setrlimit(RLIMIT_NOFILE, &rl) == -1)
		log_warn("setrlimit RLIMIT_NOFILE %llu", (unsigned long long)want);
}

/*
 * The TLS store's directory: tls-dir, or "tls" beside the database.
 * Created 0700 if missing; an existing one is used as it is (tlsid.c
 * checks each key file's owner and mode).
 */
static void
tls_dir_path(const struct config *cfg, char *out, size_t len)
{
	const char *slash;

	if (cfg->tls_dir[0] != '\0') {
		if (usbgw_strlcpy(out, cfg->tls_dir, len) >= len)
			fatalx("tls-dir %s: path too long", cfg->tls_dir);
		return;
	}
	/* PostgreSQL: the default database's directory, /var/lib/usbgw */
	if (sqldb_is_pg(cfg->database)) {
		slash = strrchr(CONFIG_DEFAULT_DB, '/');
		snprintf(out, len, "%.*s/tls", (int)(slash - CONFIG_DEFAULT_DB),
		    CONFIG_DEFAULT_DB);
		return;
	}
	slash = strrchr(cfg->database, '/');
	if (slash == NULL)
		snprintf(out, len, "tls");
	else if ((size_t)snprintf(out, len, "%.*s/tls",
	    (int)(slash - cfg->database), cfg->database) >= len)
		fatalx("database %s: path too long for its tls directory",
		    cfg->database);
}

/*
 * This gateway in the exporter leases: its gateway-name and its pid, so
 * that a restarted gateway is a new holder (it waits for its old,
 * unexpired leases like any other: a killed gateway's leases are not
 * taken back before they expire, protocol.md 4.4).
 */
static void
lease_me_default(char *out, size_t len)
{
	snprintf(out, len, "%.63s/%ld", feed_gateway_name(), (long)getpid());
}

/* The control socket's commit after each request (store_flush's
 * outcome is for the store's own callers). */
static void
commit_flush(void)
{
	(void)store_flush();
}

/* The gateway's name in its certificates: its host name, if it is one. */
static void
tls_gateway_name(char *out, size_t len)
{
	char why[128], *dot;

	if (gethostname(out, len) == -1)
		out[0] = '\0';
	out[len - 1] = '\0';
	if ((dot = strchr(out, '.')) != NULL)
		*dot = '\0';
	if (tlsid_name_check(out, why, sizeof(why)) == -1)
		usbgw_strlcpy(out, "usbgw", len);
}

/*
 * With tls-listen (or tls-dir) configured: open the store (its CA and
 * certificate made on the first start), and make the server context
 * that every TLS listener uses.  Any error stops the start, naming the
 * file and what was expected (a key readable by others, a certificate
 * that does not match its key, ...).
 */
static SSL_CTX *tls_ctx_out;	/* for gw->tls_ctx, once gw exists */
static struct tlsid_store *tls_store;	/* kept for issuing and renewal */
static struct event *tls_renew_ev;

/* The listeners' server context from the store: pairing-capable
 * (1.10.10). */
static SSL_CTX *
tls_context(char *err, size_t errlen)
{
	return tlsid_ctx_server(tls_store, TLSID_PAIRING, server_tls_checker(),
	    NULL, err, errlen);
}

/* The context of the connections the gateway opens (TLS's server on
 * them, 1.10.9): no pairing. */
static SSL_CTX *
tls_context_out(char *err, size_t errlen)
{
	return tlsid_ctx_server(tls_store, 0, server_tls_checker(), NULL, err,
	    errlen);
}

static void
tls_start(const struct config *cfg)
{
	struct tlsid_store_opts o;
	SSL_CTX *ctx;
	char dir[CONFIG_PATH_MAX], name[TLSID_NAME_MAX + 1], err[512];

	if (cfg->ntls_listen == 0 && cfg->tls_dir[0] == '\0')
		return;
	tls_dir_path(cfg, dir, sizeof(dir));
	if (mkdir(dir, 0700) == -1 && errno != EEXIST)
		fatal("tls-dir %s", dir);
	tls_gateway_name(name, sizeof(name));
	memset(&o, 0, sizeof(o));
	o.name = name;
	o.renew_days = (int)cfg->tls_renew_days;
	if ((tls_store = tlsid_store_open(dir, &o, err, sizeof(err))) == NULL)
		fatalx("TLS store: %s", err);
	if ((ctx = tls_context(err, sizeof(err))) == NULL)
		fatalx("TLS server context: %s", err);
	log_info("TLS store %s: gateway certificate %.16s..., CA %.16s...",
	    dir, tlsid_store_fpr(tls_store), tlsid_store_ca_fpr(tls_store));
	if (cfg->ntls_listen > 0 || config_tls_optional(cfg))
		server_set_tls(ctx);
	SSL_CTX_free(ctx);
	/*
	 * Exporters with tls required connect with it (gw_connect_tls):
	 * the same identity, no pairing (a placeholder is never an agent).
	 */
	if ((tls_ctx_out = tls_context_out(err, sizeof(err))) == NULL)
		fatalx("TLS server context: %s", err);
}

/*
 * gateway.pem on a timer (not only at start): when it expires within
 * tls-renew-days it is issued anew for the same key, and new
 * connections get a context with it; connections already made go on
 * with the one they have (each SSL holds its context).
 */
static void
tls_renew_check(evutil_socket_t fd, short what, void *arg)
{
	const struct config *cfg = gw->cfg;
	struct timeval tv = { cfg->tls_renew_check_ms / 1000,
	    (cfg->tls_renew_check_ms % 1000) * 1000 };
	char err[512], old[TLSID_FPR_HEX + 1], detail[256];
	SSL_CTX *ctx;

	(void)fd;
	(void)what;
	(void)arg;
	evtimer_add(tls_renew_ev, &tv);
	if (!tlsid_expires_within(tlsid_store_cert(tls_store),
	    (long)cfg->tls_renew_days * 86400))
		return;
	usbgw_strlcpy(old, tlsid_store_fpr(tls_store), sizeof(old));
	if (tlsid_store_renew(tls_store, time(NULL), TLSID_SERVER_DAYS, err,
	    sizeof(err)) == -1 || (ctx = tls_context(err, sizeof(err))) ==
	    NULL) {
		log_warnx("TLS: gateway certificate not renewed: %s", err);
		return;
	}
	if (server_tls_enabled())
		server_set_tls(ctx);
	SSL_CTX_free(ctx);
	if ((ctx = tls_context_out(err, sizeof(err))) != NULL) {
		SSL_CTX_free(gw->tls_ctx);	/* dials hold their own */
		gw->tls_ctx = ctx;
	} else
		log_warnx("TLS: outgoing context not renewed: %s", err);
	snprintf(detail, sizeof(detail), "gateway.pem %.16s... renewed as "
	    "%.16s... for %d days", old, tlsid_store_fpr(tls_store),
	    TLSID_SERVER_DAYS);
	store_audit("gateway-certificate-renewed", NULL, "gateway.pem", detail);
	log_info("TLS: %s", detail);
}

static void
tls_enroll_start(struct event_base *base, const struct config *cfg)
{
	struct enroll_conf ec;

	memset(&ec, 0, sizeof(ec));
	ec.cert_days = (int)cfg->tls_cert_days;
	ec.renew_days = (int)cfg->tls_renew_days;
	ec.pairing_timeout_ms = cfg->pairing_timeout_ms;
	ec.max_pairings = cfg->max_pairings;
	ec.max_per_minute = cfg->max_pairings_per_minute;
	enroll_init(base, tls_store, &ec);
	if (tls_store != NULL) {
		tls_renew_ev = evtimer_new(base, tls_renew_check, NULL);
		tls_renew_check(-1, 0, NULL);
	}
}

/* A summary of audit rows held back from one address (hostlimit.h). */
static void
hostlimit_write(const char *key, const char *detail)
{
	store_audit("audit-suppressed", NULL, key, detail);
}

static void
apply_settings(struct config *cfg)
{
	gw->cfg = cfg;
	gw->poll_ms = cfg->poll_interval_ms;
	gw->probe_timeout_ms = cfg->probe_timeout_ms;
	lease_set_time(cfg->lease_ms);
	gw->attach_wait_ms = cfg->attach_pending_wait_ms;
	gw->relay_stall_ms = cfg->relay_stall_ms;
	gw->show_pending = cfg->show_pending != 0;
	/* names in --to: verified by DNS, or by a TLS host's certificate */
	gw->host_names = cfg->host_names != 0 || server_tls_enabled();
	gw->max_sessions = cfg->max_sessions;
	gw->max_sessions_per_host = cfg->max_sessions_per_host;
	gw->max_devices_per_exporter = cfg->max_devices_per_exporter;
	gw->max_new_devices_per_minute = cfg->max_new_devices_per_minute;
	gw->max_probes = cfg->max_probes;
	gw->max_probes_per_exporter = cfg->max_probes_per_exporter;
	upstream_queue_kick();		/* limits raised by a reload */
	hostlimit_set(cfg->audit_limit_per_host, cfg->audit_limit_total);
	store_audit_settings(cfg->audit_checkpoint_rows,
	    cfg->audit_checkpoint_interval_ms);
	log_setlevel(cfg->log_level);
	log_set_json(cfg->log_json);
}

/* Verified vhci host names (hostname.h), as the configuration says. */
static void
hostname_opts(const struct config *cfg, struct hostname_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->enabled = cfg->host_names != 0;
	o->ttl_ms = cfg->host_name_ttl_ms;
	o->timeout_ms = cfg->host_name_timeout_ms;
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct config *cfg, *old;
	char *errs;
	struct hostname_opts ho;

	switch (sig) {
	case SIGHUP:
		log_info("SIGHUP: reloading configuration");
		if ((cfg = load_config(1)) == NULL) {
			log_warnx("configuration has errors; keeping the old one");
			return;
		}
		if (gw_check_exporters(cfg, &errs) != 0) {
			config_errors(errs, 1);
			free(errs);
			config_free(cfg);
			log_warnx("configuration has errors; keeping the old one");
			return;
		}
		old = gw->cfg;
		apply_settings(cfg);
		control_reconfigure(cfg);
		hooks_reconfigure(cfg);
		hostname_opts(cfg, &ho);
		hostname_reconfigure(&ho);
		gw_sync_exporters(cfg);
		tiers_load();
		config_free(old);
		break;
	case SIGTERM:
	case SIGINT:
		log_info("%s: shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
		event_base_loopexit(gw->base, NULL);
		break;
	}
}

static void
write_pidfile(const char *path)
{
	FILE *f;

	if (path == NULL || path[0] == '\0')
		return;
	if ((f = fopen(path, "w")) == NULL) {
		log_warn("pid file %s", path);
		return;
	}
	fprintf(f, "%ld\n", (long)getpid());
	fclose(f);
}

static void
write_portfile(void)
{
	char tmp[1024];
	FILE *f;

	if (port_file == NULL)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", port_file);
	if ((f = fopen(tmp, "w")) == NULL)
		fatal("%s", tmp);
	fprintf(f, "%d\n", server_port());
	fclose(f);
	if (rename(tmp, port_file) == -1)
		fatal("rename %s", port_file);
}

/*
 * The event base: two priorities, the control socket's first
 * (CTL_PRIORITY), and at most LOOP_SLICE_MS of device callbacks before
 * the loop polls again, so that a ready control event never waits for a
 * whole pass of thousands of device events.
 */
#define LOOP_SLICE_MS	5

static struct event_base *
loop_base(void)
{
	struct event_config	*ec;
	struct event_base	*base;
	struct timeval		 slice = { 0, LOOP_SLICE_MS * 1000 };

	if ((ec = event_config_new()) == NULL)
		return NULL;
	if (event_config_set_max_dispatch_interval(ec, &slice, -1,
	    CTL_PRIORITY + 1) == -1) {
		event_config_free(ec);
		return NULL;
	}
	base = event_base_new_with_config(ec);
	event_config_free(ec);
	if (base != NULL && event_base_priority_init(base, CTL_NPRIORITIES) ==
	    -1) {
		event_base_free(base);
		return NULL;
	}
	return base;
}

/*
 * usbgwd -n: every user and group the configuration names exists on this
 * system (a typo would otherwise only show as a refused operator later).
 * Numeric ids are taken as they are.  The count of problems; each is
 * printed with the file and the key.
 */
static int
check_principals(const struct config *c)
{
	static const char *const keys[] = { NULL, "allow-read",
	    "allow-approve", "allow-admin" };
	char buf[16384];
	struct passwd pw, *pr;
	struct group gr, *gp;
	const struct config_principal *p;
	size_t i;
	int cls, rv, bad = 0;

	for (cls = PRIV_READ; cls <= PRIV_ADMIN; cls++)
		for (i = 0; i < c->priv[cls].n; i++) {
			p = &c->priv[cls].p[i];
			if (p->is_numeric)
				continue;
			if (p->is_group) {
				gp = NULL;
				rv = getgrnam_r(p->name, &gr, buf, sizeof(buf),
				    &gp);
			} else {
				pr = NULL;
				rv = getpwnam_r(p->name, &pw, buf, sizeof(buf),
				    &pr);
				gp = pr != NULL ? &gr : NULL;
			}
			if (rv == 0 && gp != NULL)
				continue;
			fprintf(stderr, "usbgwd: %s: %s: %s \"%s%s\": %s\n",
			    conf_path, keys[cls], p->is_group ? "group" :
			    "user", p->is_group ? "@" : "", p->name, rv != 0 ?
			    strerror(rv) : "does not exist on this system "
			    "(expected an existing name, or a number)");
			bad++;
		}
	if (c->control_group[0] != '\0' &&
	    strspn(c->control_group, "0123456789") !=
	    strlen(c->control_group)) {
		gp = NULL;
		rv = getgrnam_r(c->control_group, &gr, buf, sizeof(buf), &gp);
		if (rv != 0 || gp == NULL) {
			fprintf(stderr, "usbgwd: %s: control-group: group "
			    "\"%s\": %s\n", conf_path, c->control_group,
			    rv != 0 ? strerror(rv) : "does not exist on this "
			    "system (expected an existing group, a gid, or "
			    "none)");
			bad++;
		}
	}
	return bad;
}

int
main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	struct event_base *base;
	struct config *cfg;
	char *errs;
	const struct ctl_cmd *ctl_table;
	size_t nctl;
	int ch, foreground = 0, check_only = 0, sigs[] = { SIGHUP, SIGTERM, SIGINT };
	struct hostname_opts ho;
	const struct net_addr *la;
	char err[512], lease_name[LEASEDB_HOLDER_MAX];
	size_t i, nla;

	log_init("usbgwd", 1, LOG_LVL_INFO);
	while ((ch = getopt_long(argc, argv, "c:d:fhl:nN:p:P:s:v:V", longopts,
	    NULL)) != -1) {
		switch (ch) {
		case 'c':
			conf_path = optarg;
			conf_must_exist = 1;
			break;
		case 'd':
			add_flag("database", optarg);
			break;
		case 'f':
			foreground = 1;
			break;
		case 'h':
			usage(0);
		case 'l':
			add_flag("listen", optarg);
			break;
		case 'n':
			check_only = 1;
			break;
		case 'N':
			add_flag("gateway-name", optarg);
			break;
		case 'p':
			add_flag("pid-file", optarg);
			break;
		case 'P':
			port_file = optarg;
			break;
		case 's':
			add_flag("control-socket", optarg);
			break;
		case 'v':
			add_flag("log-level", optarg);
			break;
		case 'V':
			printf("usbgwd %s\n", USBGWD_VERSION);
			return 0;
		default:
			usage(2);
		}
	}
	if (optind != argc)
		usage(2);
	if (conf_path == NULL) {
		conf_path = CONFIG_DEFAULT_PATH;
		conf_must_exist = 0;
	}
	if ((cfg = load_config(0)) == NULL)
		return 2;
	if (check_only) {
		int bad = check_principals(cfg);

		if (bad == 0)
			printf("configuration OK\n");
		config_free(cfg);
		return bad ? 2 : 0;
	}
	/* before daemon(): whoever started us sees the refusal */
	if (store_lock(cfg->database, err, sizeof(err)) == -1) {
		config_free(cfg);
		fatalx("%s", err);
	}
	if (foreground)
		cfg->log_stderr = 1;
	log_init("usbgwd", cfg->log_stderr, cfg->log_level);
	log_set_json(cfg->log_json);
	/* before daemon(), like the lock: a bad key file stops the start */
	tls_start(cfg);

	signal(SIGPIPE, SIG_IGN);
	/*
	 * The relay allocates and frees 128 KiB buffers at URB rate: keep
	 * them on the heap instead of mmap/munmap and trimming, which
	 * would fault fresh pages in for every URB.
	 */
	mallopt(M_MMAP_THRESHOLD, 4 << 20);
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
	if (!foreground && daemon(0, 0) == -1)
		fatal("daemon");
	store_lock_owner();

	raise_nofile();
	if ((base = loop_base()) == NULL)
		fatalx("event_base_new");
	gw_init(base);
	gw->tls_ctx = tls_ctx_out;	/* the reference moves to gw */
	tls_ctx_out = NULL;
	hostlimit_init(base, hostlimit_write, NULL);
	apply_settings(cfg);
	hostname_opts(cfg, &ho);
	if (hostname_init(base, &ho) == -1)
		fatalx("cannot start host name look-ups");

	if (store_open(cfg->database, cfg->audit_key) == -1) {
		char name[256];

		sqldb_redact(cfg->database, name, sizeof(name));
		fatalx("cannot open database %s", name);
	}
	if (feed_start(base, cfg) == -1)
		fatalx("cannot start the change feed");
	lease_me_default(lease_name, sizeof(lease_name));
	if (lease_init(cfg->database, lease_name, cfg->lease_ms, err,
	    sizeof(err)) == -1)
		fatalx("exporter leases: %s", err);
	/*
	 * The lock is ours: what a killed run left open is closed now.  With
	 * leases (several gateways) only an exporter's new holder may: when
	 * it takes the lease (lease.c), not every gateway at its start.
	 */
	if (!lease_active())
		store_close_stale(cfg->mode == CONFIG_MODE_LOCAL,
		    USBGW_RESTART_REASON, NULL);
	tiers_load();
	hooks_init(base, cfg);
	server_init();
	agentgw_init();
	tls_enroll_start(base, cfg);
	ctl_table = gw_ctl_table(&nctl);
	control_set_summary(hostlimit_write);
	control_set_commit(commit_flush);
	gw_store_loss_start();
	{
		const struct ctl_text_cmd *text;
		size_t ntext;

		text = gw_ctl_text_table(&ntext);
		control_set_text_cmds(text, ntext);
	}
	if (control_init(base, cfg, ctl_table, nctl, gw_audit_refusal) == -1)
		fatalx("cannot start the control socket %s", cfg->control_socket);
	nla = config_listen_addrs(cfg, &la);
	for (i = 0; i < nla; i++)
		if (server_listen(la[i].host, la[i].port,
		    cfg->nlisten > 0 && cfg->listen_tls[i]) == -1)
			fatalx("cannot listen on %s:%s", la[i].host[0] != '\0' ?
			    la[i].host : "*", la[i].port);
	if (nla == 0)
		log_info("local mode: no USB/IP listener (no listen configured)");
	for (i = 0; i < cfg->ntls_listen; i++) {
		la = &cfg->tls_listen[i];
		if (server_listen_tls(la->host, la->port) == -1)
			fatalx("cannot listen (TLS) on %s:%s", la->host[0] !=
			    '\0' ? la->host : "*", la->port);
	}
	if (metrics_start(base, cfg) == -1)
		fatalx("cannot listen for metrics on %s:%s",
		    cfg->metrics_listen.host, cfg->metrics_listen.port);
	write_pidfile(cfg->pidfile);

	for (i = 0; i < nitems(sigs); i++) {
		gw->sigev[i] = evsignal_new(base, sigs[i], on_signal, NULL);
		evsignal_add(gw->sigev[i], NULL);
	}
	gw_restore();			/* exporters and devices from the db */
	feed_on_exporters(gw_exporters_from_store);	/* and others' */
	if (gw_check_exporters(cfg, &errs) != 0) {
		config_errors(errs, 1);
		fatalx("the configuration declares an exporter the database "
		    "has under another name (see above)");
	}
	gw_sync_exporters(cfg);		/* and from the files */
	lease_start();			/* PostgreSQL: the exporters we may use */
	local_start();			/* local mode: vhci, reconciliation */
	/* ready (-P): after local mode's lock-down is in force */
	write_portfile();
	log_info("usbgwd %s started (pid %ld)", USBGWD_VERSION, (long)getpid());
	store_audit("daemon-start", NULL, "usbgwd", USBGWD_VERSION);

	event_base_dispatch(base);

	metrics_stop();
	hostlimit_shutdown();		/* summaries still held back */
	store_audit("daemon-stop", NULL, "usbgwd", "clean shutdown");
	local_shutdown();
	enroll_shutdown();
	server_shutdown();
	feed_stop();
	gw_shutdown();
	agentgw_shutdown();
	lease_shutdown();		/* the claims are released: others may */
	hostname_shutdown();		/* after the sessions that asked */
	control_shutdown();
	hooks_shutdown();
	/* let deferred frees and closes run */
	event_base_loop(base, EVLOOP_NONBLOCK);
	store_close();
	if (tls_renew_ev != NULL)
		event_free(tls_renew_ev);
	tlsid_store_free(tls_store);
	for (i = 0; i < nitems(sigs); i++)
		event_free(gw->sigev[i]);
	/* cfg was freed by a SIGHUP reload: gw->cfg is the one in force */
	if (gw->cfg->pidfile[0] != '\0')
		unlink(gw->cfg->pidfile);
	config_free(gw->cfg);
	gw_free();
	event_base_free(base);
	log_info("stopped");
	return 0;
}
