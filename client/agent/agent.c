/*
 * usbgw-agent: the thin client's USB/IP exporter on libusb (usbgw-agent(8),
 * protocol.md 1.9).  main(), options, configuration, signals, and the
 * device layer's hooks (keep-list, no-reset, audit lines).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <openssl/x509.h>

#include "aconf.h"
#include "ctlconn.h"
#include "tls/enrollc.h"
#include "export.h"
#include "guard.h"
#include "keep.h"
#include "base/log.h"
#include "tls/tlsid.h"
#include "usbdev.h"
#include "base/util.h"
#include "base/worker.h"

#include "base/version.h"
#define AGENT_VERSION	USBGW_VERSION
#define AGENT_MAX_FLAGS	64

static struct {
	const char	*conf_path;
	bool		 conf_must_exist;
	const char	*flag_opt[AGENT_MAX_FLAGS];	/* 'l' or 'a' */
	const char	*flag_val[AGENT_MAX_FLAGS];
	int		 nflags;
	struct aconf	*conf;		/* in force; the hooks read it */
	bool		 usb;		/* usbdev_init() succeeded */
	struct event_base *base;
} agent;

static __attribute__((noreturn)) void
usage(int code)
{
	fprintf(code ? stderr : stdout,
	    "usage: usbgw-agent -f [-nv] [-c FILE] [-l ADDRESS:PORT]... "
	    "[-a ADDRESS_OR_CIDR]...\n"
	    "       usbgw-agent --reattach [STATEFILE]\n"
	    "       usbgw-agent enroll [-c FILE] [--name NAME] [-t SECONDS] "
	    "GATEWAY[:PORT]\n"
	    "       usbgw-agent renew [-c FILE] [--days N | --force] "
	    "GATEWAY[:PORT]\n"
	    "  -f            stay in the foreground, log to stderr\n"
	    "  -c FILE       configuration file (default %s)\n"
	    "  -l ADDR:PORT  USB/IP listen address, may repeat (default *:%s)\n"
	    "  -a ADDR/CIDR  who may list and import, may repeat (default:\n"
	    "                nobody); adds to the file's allow-from\n"
	    "  -v            debug logging\n"
	    "  -n            check the configuration and exit\n"
	    "  --reattach    give the devices the state file lists back to\n"
	    "                their kernel drivers (the agent is dead)\n"
	    "  -V            print the version\n",
	    ACONF_DEFAULT_PATH, ACONF_DEFAULT_PORT);
	exit(code);
}

static void
add_flag(const char *opt, const char *val)
{
	if (agent.nflags >= AGENT_MAX_FLAGS) {
		fprintf(stderr, "usbgw-agent: more than %d -l and -a options\n",
		    AGENT_MAX_FLAGS);
		exit(2);
	}
	agent.flag_opt[agent.nflags] = opt;
	agent.flag_val[agent.nflags++] = val;
}

/* No name in the file: the host name's first label, if it is a valid
 * name (else "agent"). */
static void
default_name(struct aconf *c)
{
	char h[256];
	size_t i, n;

	if (c->name[0] != '\0')
		return;
	if (gethostname(h, sizeof(h)) == -1)
		h[0] = '\0';
	h[sizeof(h) - 1] = '\0';
	n = strcspn(h, ".");
	for (i = 0; i < n; i++)
		if (!((h[i] >= 'a' && h[i] <= 'z') || (h[i] >= 'A' &&
		    h[i] <= 'Z') || (h[i] >= '0' && h[i] <= '9') ||
		    h[i] == '-' || h[i] == '_'))
			break;
	if (n == 0 || i < n || n >= sizeof(c->name))
		usbgw_strlcpy(c->name, "agent", sizeof(c->name));
	else {
		memcpy(c->name, h, n);
		c->name[n] = '\0';
	}
}

/* The file, then the flags over it, then the built-in lists.  NULL and
 * every error in *errs (malloc'd) on failure. */
static struct aconf *
load_conf(char **errs)
{
	struct aconf *c = aconf_new();
	char err[512];
	int i, r;

	if (aconf_load(c, agent.conf_path, agent.conf_must_exist, errs) == -1) {
		aconf_free(c);
		return NULL;
	}
	for (i = 0; i < agent.nflags; i++) {
		r = agent.flag_opt[i][0] == 'l' ?
		    aconf_flag_listen(c, agent.flag_val[i], err, sizeof(err)) :
		    aconf_flag_allow(c, agent.flag_val[i], err, sizeof(err));
		if (r == -1) {
			xasprintf(errs, "usbgw-agent: %s\n", err);
			aconf_free(c);
			return NULL;
		}
	}
	aconf_finish(c);
	default_name(c);
	return c;
}

static void
warn_nobody(const struct aconf *c)
{
	if (c->nallow == 0)
		log_warnx("allow-from is empty: nobody may list or import "
		    "devices (add allow-from lines or -a)");
}

/* ---- the device layer's hooks ------------------------------------------ */

static bool
hook_keep(void *arg, const struct usbgw_identity *id, int *ruleno)
{
	bool local;
	int n;

	(void)arg;
	local = keep_local(agent.conf->keep, id, &n);
	if (ruleno != NULL)
		*ruleno = n < 0 ? 0 : n;
	/* (the device layer writes the keep-local audit line) */
	return local;
}

static bool
hook_no_reset(void *arg, const struct usbgw_identity *id)
{
	(void)arg;
	return keep_no_reset(agent.conf->noreset, id);
}

static void
hook_changed(void *arg, const char *busid, bool added,
    const struct usbip_dev *rec, const struct usbip_intf *intf, uint8_t nintf)
{
	(void)arg;
	/* (the device layer writes the export and gone audit lines) */
	ctlconn_changed(busid, added, rec, intf, nintf);
}

static void
hook_audit(void *arg, const char *line)
{
	(void)arg;
	export_audit("%s", line);
}

static const struct usbdev_hooks hooks = {
	.keep = hook_keep,
	.no_reset = hook_no_reset,
	.changed = hook_changed,
	.audit = hook_audit,
};

/* ---- signals ---------------------------------------------------------- */

/* A held device the reloaded keep-list names: its import ends now. */
static void
end_kept_import(const char *busid)
{
	export_end_import(busid, "keep-local after reload");
}

static void
reload(void)
{
	struct aconf *c;
	char *errs = NULL, err[512], *line, *save;
	int n;

	if ((c = load_conf(&errs)) == NULL) {
		for (line = strtok_r(errs, "\n", &save); line != NULL;
		    line = strtok_r(NULL, "\n", &save))
			log_warnx("reload: %s", line);
		log_warnx("reload: configuration unchanged");
		free(errs);
		return;
	}
	if (export_set_conf(c, err, sizeof(err)) == -1) {
		log_warnx("reload: %s; configuration unchanged", err);
		aconf_free(c);
		return;
	}
	aconf_free(agent.conf);
	agent.conf = c;
	ctlconn_recheck_allowed();
	n = usbdev_recheck_keep(end_kept_import);
	log_info("reloaded %s: allow-from, keep-list (%d device(s) changed "
	    "side), no-reset, audit-log, max-connections; listen needs a "
	    "restart", c->path[0] != '\0' ? c->path : "(no file)", n);
	warn_nobody(c);
}

static void
signal_cb(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	(void)arg;
	if (sig == SIGHUP) {
		reload();
		return;
	}
	log_info("signal %d: shutting down", (int)sig);
	export_stop_listening();
	event_base_loopbreak(agent.base);
}

/* ---- main ------------------------------------------------------------- */

static int
reattach(const char *state_file)
{
	char err[512];
	int n;

	if ((n = usbdev_reattach_state(state_file, err, sizeof(err))) == -1) {
		fprintf(stderr, "usbgw-agent: --reattach %s: %s\n", state_file,
		    err);
		return 1;
	}
	printf("%d device%s given back to their drivers\n", n,
	    n == 1 ? "" : "s");
	return 0;
}

static volatile sig_atomic_t enroll_stop;

static void
enroll_signal(int sig)
{
	(void)sig;
	enroll_stop = 1;
}

/*
 * usbgw-agent enroll|renew (protocol.md 1.10.10): the agent's key and
 * certificate in the configuration's tls-dir (agent.key 0600, agent.pem,
 * gateway-ca.pem); the name asked for is --name, else the file's name,
 * else the host name.  Exit 0 paired (renewed, not due), 1 refused, 2
 * usage, 4 network.
 */
static int
enroll_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "name", required_argument, NULL, 'n' },
		{ "days", required_argument, NULL, 'd' },
		{ "force", no_argument, NULL, 'F' },
		{ NULL, 0, NULL, 0 }
	};
	struct enrollc_opts o;
	struct sigaction sa;
	char name[TLSID_NAME_MAX + 1], *errs = NULL;
	const char *e = NULL;
	long long v;
	int ch, rc, renew = strcmp(argv[0], "renew") == 0;

	memset(&o, 0, sizeof(o));
	o.role = TLSID_ROLE_AGENT;
	o.wait_s = ENROLLC_WAIT_S;
	o.connect_s = ENROLLC_CONNECT_S;
	o.renew_days = ENROLLC_RENEW_DAYS;
	o.stop = &enroll_stop;
	o.out = stdout;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "c:d:Fn:t:", longopts, NULL)) !=
	    -1) {
		switch (ch) {
		case 'c':
			agent.conf_path = optarg;
			agent.conf_must_exist = true;
			break;
		case 'd':
			if (parse_num(optarg, 0, 3650, &v, &e) == -1) {
				fprintf(stderr, "usbgw-agent: --days %s: %s "
				    "(expected 0 to 3650)\n", optarg, e);
				return 2;
			}
			o.renew_days = (int)v;
			break;
		case 'F':
			o.renew_days = -1;
			break;
		case 'n':
			o.name = optarg;
			break;
		case 't':
			if (parse_num(optarg, 1, 3600, &v, &e) == -1) {
				fprintf(stderr, "usbgw-agent: -t %s: %s "
				    "(expected 1 to 3600 seconds)\n", optarg, e);
				return 2;
			}
			o.wait_s = (int)v;
			break;
		default:
			usage(2);
		}
	}
	if (optind != argc - 1)
		usage(2);
	o.gateway = argv[optind];
	if (agent.conf_path == NULL)
		agent.conf_path = ACONF_DEFAULT_PATH;
	if ((agent.conf = load_conf(&errs)) == NULL) {
		fprintf(stderr, "%s", errs);
		free(errs);
		return 2;
	}
	if (o.name == NULL && agent.conf->name[0] != '\0')
		o.name = agent.conf->name;
	if (o.name == NULL) {
		enrollc_default_name(name, sizeof(name), "agent");
		o.name = name;
	}
	o.dir = agent.conf->tls_dir;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = enroll_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = renew ? enrollc_renew(&o) : enrollc_enroll(&o);
	aconf_free(agent.conf);
	return rc;
}

/*
 * The agent's TLS identity (protocol.md 1.10.9), when anything uses TLS
 * (`tls required`, or a `gateway ... tls` line): agent.key (0600, this
 * uid's: checked), agent.pem and gateway-ca.pem from tls-dir, and the
 * client context made of them.  Any problem stops the start, naming the
 * file: the agent does not run with less than the TLS it was told to
 * use.  gw_tls[i] says whether gateway line i is dialled over TLS.
 */
static SSL_CTX *
agent_tls_load(const struct aconf *c, long *expires_in, char *err,
    size_t errlen)
{
	struct tlsid_client *cl;
	SSL_CTX *ctx;
	char e[512], cn[TLSID_NAME_MAX + 1];

	if ((cl = tlsid_client_key(c->tls_dir, c->name, TLSID_ROLE_AGENT,
	    e, sizeof(e))) == NULL) {
		snprintf(err, errlen, "TLS: %s", e);
		return NULL;
	}
	if (!tlsid_client_enrolled(cl)) {
		snprintf(err, errlen, "TLS: %.600s/agent.pem and gateway-ca.pem: "
		    "missing: the agent has no certificate (enroll it, or set "
		    "tls off and no gateway line with tls)", c->tls_dir);
		tlsid_client_free(cl);
		return NULL;
	}
	if (X509_NAME_get_text_by_NID(X509_get_subject_name(
	    tlsid_client_cert(cl)), NID_commonName, cn, sizeof(cn)) <= 0 ||
	    strcmp(cn, c->name) != 0) {
		snprintf(err, errlen, "TLS: %.600s/agent.pem is the certificate of "
		    "\"%s\": expected the agent's name, \"%s\" (the gateway "
		    "binds the name to the certificate)", c->tls_dir, cn,
		    c->name);
		tlsid_client_free(cl);
		return NULL;
	}
	if (expires_in != NULL) {
		/* the first of 1 h, 1 d, ... that it ends within (coarse) */
		long s;

		for (s = 3600; s < 3650L * 86400 &&
		    !tlsid_expires_within(tlsid_client_cert(cl), s); s *= 2)
			;
		*expires_in = s;
	}
	if ((ctx = tlsid_ctx_client(cl, 0, NULL, NULL, e, sizeof(e))) ==
	    NULL)
		snprintf(err, errlen, "TLS client context: %s", e);
	tlsid_client_free(cl);
	return ctx;
}

static SSL_CTX *
agent_tls(const struct aconf *c, bool gw_tls[ACONF_MAX_GATEWAYS])
{
	SSL_CTX *ctx;
	char err[1024];
	bool any = c->tls_required;
	size_t i;

	for (i = 0; i < ACONF_MAX_GATEWAYS; i++) {
		gw_tls[i] = i < c->ngateways && (c->tls_required ||
		    c->gateways_tls[i]);
		any = any || gw_tls[i];
	}
	if (!any)
		return NULL;
	if ((ctx = agent_tls_load(c, NULL, err, sizeof(err))) == NULL)
		fatalx("%s", err);
	log_info("TLS identity %s/agent.pem: CN=%s%s", c->tls_dir, c->name,
	    c->tls_required ? ", tls required" : "");
	return ctx;
}

/*
 * Renewal on a timer (protocol.md 1.10.10): every tls-renew-check, if
 * agent.pem ends within tls-renew-days, a worker thread renews it
 * (enrollc_renew: a new CSR for the same key over a session the current
 * certificate authenticates) through the first gateway line dialled
 * over TLS; then a new client context goes to the listeners and the
 * control connections, for new connections only: the ones running keep
 * theirs, and no attachment drops.  A failure is logged and tried again
 * at the next check.
 */
static struct {
	struct event	*ev;
	struct worker	*w;
	bool		 running;
	bool		 gw_tls[ACONF_MAX_GATEWAYS];
	size_t		 ngw;		/* the gateway lines dialled (at start:
					   a reload does not change them) */
	struct net_addr gws[ACONF_MAX_GATEWAYS];
	SSL_CTX		*ctx;		/* in force; one reference ours */
} rn;

struct renew_job {
	struct enrollc_opts	 o;
	char			 gateway[NET_HOST_MAX + 16];
	char			 dir[ACONF_PATH_MAX];
	char			 name[TLSID_NAME_MAX + 1];
	char			*out;
	size_t			 outlen;
	int			 rc;
};

static void
renew_run(void *arg)
{
	struct renew_job *j = arg;
	FILE *f;

	if ((f = open_memstream(&j->out, &j->outlen)) == NULL) {
		j->rc = ENROLLC_USAGE;
		return;
	}
	j->o.out = f;
	j->rc = enrollc_renew(&j->o);
	fclose(f);
}

static void
renew_done(void *arg)
{
	struct renew_job *j = arg;
	char err[1024], *line, *save = NULL;
	SSL_CTX *ctx;

	rn.running = false;
	for (line = j->out != NULL ? strtok_r(j->out, "\n", &save) : NULL;
	    line != NULL; line = strtok_r(NULL, "\n", &save))
		log_info("TLS renewal: %s", line);
	if (j->rc != ENROLLC_OK)
		log_warnx("TLS renewal through %s failed (exit %d): trying "
		    "again in %llu s", j->gateway, j->rc, (unsigned long long)
		    agent.conf->renew_check_ms / 1000);
	else if ((ctx = agent_tls_load(agent.conf, NULL, err,
	    sizeof(err))) == NULL)
		log_warnx("TLS renewal: %s: the old certificate stays in use",
		    err);
	else {
		export_set_tls(ctx);
		ctlconn_set_tls(ctx, rn.gw_tls, rn.ngw);
		SSL_CTX_free(rn.ctx);
		rn.ctx = ctx;
		log_info("TLS renewal: %s/agent.pem renewed through %s: new "
		    "connections use it, the running ones go on",
		    agent.conf->tls_dir, j->gateway);
	}
	free(j->out);
	free(j);
}

static void
renew_drop(void *arg)
{
	struct renew_job *j = arg;

	free(j->out);
	free(j);
}

static void
renew_tick(evutil_socket_t fd, short what, void *arg)
{
	const struct aconf *c = agent.conf;
	struct renew_job *j;
	struct timeval tv;
	SSL_CTX *probe;
	char err[1024];
	long left = 0;
	size_t i;

	tv.tv_sec = (time_t)(c->renew_check_ms / 1000);
	tv.tv_usec = (suseconds_t)(c->renew_check_ms % 1000) * 1000;
	evtimer_add(rn.ev, &tv);
	if (rn.running)
		return;
	if ((probe = agent_tls_load(c, &left, err, sizeof(err))) == NULL) {
		log_warnx("TLS renewal: %s", err);
		return;
	}
	SSL_CTX_free(probe);
	if (left > (long)c->renew_days * 86400)
		return;		/* not due */
	for (i = 0; i < rn.ngw; i++)
		if (rn.gw_tls[i])
			break;
	if (i == rn.ngw) {
		log_warnx("TLS: %s/agent.pem ends within %u days and no "
		    "gateway line is dialled over TLS to renew it through: "
		    "run usbgw-agent renew", c->tls_dir, c->renew_days);
		return;
	}
	j = xcalloc(1, sizeof(*j));
	if (strchr(rn.gws[i].host, ':') != NULL)
		snprintf(j->gateway, sizeof(j->gateway), "[%s]:%s",
		    rn.gws[i].host, rn.gws[i].port);
	else
		snprintf(j->gateway, sizeof(j->gateway), "%s:%s",
		    rn.gws[i].host, rn.gws[i].port);
	usbgw_strlcpy(j->dir, c->tls_dir, sizeof(j->dir));
	usbgw_strlcpy(j->name, c->name, sizeof(j->name));
	j->o.gateway = j->gateway;
	j->o.dir = j->dir;
	j->o.name = j->name;
	j->o.role = TLSID_ROLE_AGENT;
	j->o.connect_s = ENROLLC_CONNECT_S;
	j->o.wait_s = ENROLLC_WAIT_S;
	j->o.renew_days = (int)c->renew_days;
	rn.running = true;
	log_info("TLS: %s/agent.pem ends within %u days: renewing it through "
	    "%s", c->tls_dir, c->renew_days, j->gateway);
	worker_submit(rn.w, renew_run, renew_done, renew_drop, j);
}

static void
renew_start(SSL_CTX *ctx, const bool gw_tls[ACONF_MAX_GATEWAYS])
{
	rn.ctx = ctx;
	if (ctx == NULL)
		return;
	SSL_CTX_up_ref(ctx);
	memcpy(rn.gw_tls, gw_tls, sizeof(rn.gw_tls));
	rn.ngw = agent.conf->ngateways;
	memcpy(rn.gws, agent.conf->gateways, sizeof(rn.gws));
	if ((rn.w = worker_new(agent.base, "certificate renewal", 1)) == NULL ||
	    (rn.ev = evtimer_new(agent.base, renew_tick, NULL)) == NULL) {
		log_warnx("TLS: no renewal timer");
		return;
	}
	/* the first check soon after the start (the control connections
	 * are up by then), then every tls-renew-check */
	{
		struct timeval tv;
		uint64_t ms = agent.conf->renew_check_ms < 10000 ?
		    agent.conf->renew_check_ms : 10000;

		tv.tv_sec = (time_t)(ms / 1000);
		tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
		evtimer_add(rn.ev, &tv);
	}
}

int
main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ "reattach", no_argument, NULL, 'R' },
		{ NULL, 0, NULL, 0 }
	};
	static const int signums[] = { SIGHUP, SIGTERM, SIGINT };
	struct event *sigs[nitems(signums)];
	const struct net_addr *la;
	struct usbdev_conf uc;
	SSL_CTX *tls_ctx;
	bool gw_tls[ACONF_MAX_GATEWAYS];
	char *errs = NULL, err[512];
	bool foreground = false, check_only = false, do_reattach = false;
	size_t i, nla;
	int ch;

	log_init("usbgw-agent", 1, LOG_LVL_INFO);
	if (argc >= 2 && (strcmp(argv[1], "enroll") == 0 ||
	    strcmp(argv[1], "renew") == 0))
		return enroll_main(argc - 1, argv + 1);
	while ((ch = getopt_long(argc, argv, "a:c:fhl:nvV", longopts,
	    NULL)) != -1) {
		switch (ch) {
		case 'a':
			add_flag("a", optarg);
			break;
		case 'c':
			agent.conf_path = optarg;
			agent.conf_must_exist = true;
			break;
		case 'f':
			foreground = true;
			break;
		case 'h':
			usage(0);
		case 'l':
			add_flag("l", optarg);
			break;
		case 'n':
			check_only = true;
			break;
		case 'R':
			do_reattach = true;
			break;
		case 'v':
			log_setlevel(LOG_LVL_DEBUG);
			break;
		case 'V':
			printf("usbgw-agent %s\n", AGENT_VERSION);
			return 0;
		default:
			usage(2);
		}
	}
	if (optind < argc - (do_reattach ? 1 : 0))
		usage(2);
	if (agent.conf_path == NULL)
		agent.conf_path = ACONF_DEFAULT_PATH;

	if (do_reattach && optind < argc)
		return reattach(argv[optind]);
	if ((agent.conf = load_conf(&errs)) == NULL) {
		fprintf(stderr, "%s", errs);
		free(errs);
		return 1;
	}
	if (do_reattach) {
		i = (size_t)reattach(agent.conf->state_file);
		aconf_free(agent.conf);
		return (int)i;
	}
	if (check_only) {
		warn_nobody(agent.conf);
		printf("configuration OK\n");
		aconf_free(agent.conf);
		return 0;
	}
	/* before daemon(): a bad key file stops the start where it is seen */
	tls_ctx = agent_tls(agent.conf, gw_tls);
	if (!foreground)
		log_init("usbgw-agent", 0, log_getlevel());
	signal(SIGPIPE, SIG_IGN);
	if (!foreground && daemon(0, 0) == -1)
		fatal("daemon");
	/* Before libusb and the listeners: the guardian holds neither. */
	if (agent.conf->state_file[0] != '\0' &&
	    guard_start(agent.conf->state_file) == -1)
		fatal("cannot start the guardian");
	if ((agent.base = event_base_new()) == NULL)
		fatalx("event_base_new");
	/* Sockets at priority 1, libusb's descriptors at 0 (1.9.1). */
	event_base_priority_init(agent.base, 2);

	memset(&uc, 0, sizeof(uc));
	uc.state_file = agent.conf->state_file[0] != '\0' ?
	    agent.conf->state_file : NULL;
	uc.zero_copy = agent.conf->zero_copy;
	if (usbdev_init(agent.base, &uc, &hooks, NULL, err, sizeof(err)) == -1)
		log_warnx("USB devices unavailable (%s): serving an empty "
		    "device list", err);
	else
		agent.usb = true;
	if (export_init(agent.base, agent.conf, agent.usb ?
	    &usbdev_expsrv_ops : NULL, err, sizeof(err)) == -1)
		fatalx("%s", err);
	export_set_tls(tls_ctx);
	nla = aconf_listen_addrs(agent.conf, &la);
	for (i = 0; i < nla; i++)
		if (export_listen(&la[i]) == -1)
			fatalx("cannot listen on %s:%s", la[i].host[0] != '\0' ?
			    la[i].host : "*", la[i].port);
	if (nla == 0)
		log_info("listen none: no USB/IP listener");
	/* dial-out to the gateway lines (if any); listen-mode control
	 * connections arrive through the engine's extension hook */
	/*
	 * TLS before the first dial: ctlconn_init dials at once, and a
	 * connection takes its transport when it starts (it was plaintext
	 * for the first dial-out with tls required: the control hello and
	 * the device list in clear to whoever answered).
	 */
	ctlconn_set_tls(tls_ctx, gw_tls, agent.conf->ngateways);
	if (ctlconn_init(agent.base, agent.conf->name, agent.conf->gateways,
	    agent.conf->ngateways, agent.usb ? usbdev_foreach_exportable :
	    NULL, export_adopt) == 0)
		export_set_extension(ctlconn_accept);
	else if (agent.conf->ngateways > 0)
		fatalx("cannot dial out as \"%s\"", agent.conf->name);
	else
		log_warnx("name \"%s\" is not [A-Za-z0-9._-]{1,31}: no "
		    "control connections", agent.conf->name);
	warn_nobody(agent.conf);

	for (i = 0; i < nitems(signums); i++)
		if ((sigs[i] = evsignal_new(agent.base, signums[i], signal_cb,
		    NULL)) == NULL || evsignal_add(sigs[i], NULL) == -1)
			fatalx("cannot handle signal %d", signums[i]);
	log_info("usbgw-agent %s started (pid %ld, name %s)", AGENT_VERSION,
	    (long)getpid(), agent.conf->name);
	renew_start(tls_ctx, gw_tls);

	event_base_dispatch(agent.base);

	ctlconn_shutdown();
	ctlconn_set_tls(NULL, NULL, 0);
	export_set_tls(NULL);
	if (rn.ev != NULL)
		event_free(rn.ev);
	SSL_CTX_free(rn.ctx);
	SSL_CTX_free(tls_ctx);
	export_stop_listening();
	export_closeall();
	if (agent.usb)
		usbdev_shutdown();
	export_shutdown();
	event_base_loop(agent.base, EVLOOP_NONBLOCK);	/* deferred frees */
	for (i = 0; i < nitems(signums); i++)
		event_free(sigs[i]);
	event_base_free(agent.base);
	aconf_free(agent.conf);
	log_info("usbgw-agent stopped");
	return 0;
}
