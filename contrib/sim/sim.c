/*
 * usbgw-sim: main program.  Options, listeners, signals, the device
 * set and its reload.  See usbgw-sim(1).
 */
#include <sys/resource.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <netdb.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/listener.h>

#include "base/log.h"
#include "base/util.h"
#include "sim.h"

#define SIM_DEFAULT_LISTEN	"127.0.0.1:3240"
#define SIM_BACKLOG		64
#define SIM_ACCEPT_PAUSE	1	/* seconds, after EMFILE/ENFILE */

struct sim sim;

struct listener {
	struct evconnlistener	*lev;
	char			 name[80];
	uint16_t		 port;
};

static struct listener	 listeners[SIM_MAX_LISTEN];
static size_t		 nlisteners;
static struct event	*accept_pause_ev;
/* The `exporters` statements the running exporters were made from. */
static struct sim_expgroup groups[SIM_MAX_EXPGROUPS];
static size_t		 ngroups;

static void __attribute__((noreturn))
usage(int status)
{
	fprintf(status == 0 ? stdout : stderr,
"usage: usbgw-sim [-dhAS] [-c FILE] [-l ADDR:PORT]... [-p FILE] [-P FILE]\n"
"                 [-C PATH] [-L FILE] [-m MAXCONN] [-u MAXURBS]\n"
"  -c FILE        devices and settings (default: a built-in set of five)\n"
"  -l ADDR:PORT   listen there (repeatable; default " SIM_DEFAULT_LISTEN
"; port 0 picks one;\n"
"                 [ADDR]:PORT for IPv6)\n"
"  -A             allow listening on non-loopback addresses\n"
"  -p FILE        write the (first) listening port to FILE\n"
"  -P FILE        write \"NAME PORT\" of each `exporters` exporter to FILE\n"
"  -C PATH        control socket: plug, unplug, list, reload\n"
"  -L FILE        log every PDU received to FILE (- for stdout)\n"
"  -S, --legacy-status  answer ST_NA to every failed import (old usbipd)\n"
"  -m MAXCONN     connections at most (default %d)\n"
"  -u MAXURBS     URBs in flight per connection at most (default %d)\n"
"  -d             debug logging\n"
"  -h, --help     this help\n", SIM_MAX_CONNS, SIM_MAX_URBS);
	exit(status);
}

/* ---- listeners ------------------------------------------------------- */

static bool
addr_is_loopback(const struct sockaddr *sa)
{
	const struct sockaddr_in *sin;
	const struct sockaddr_in6 *sin6;

	if (sa->sa_family == AF_INET) {
		sin = (const struct sockaddr_in *)sa;
		return (ntohl(sin->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		sin6 = (const struct sockaddr_in6 *)sa;
		if (IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr))
			return true;
		return IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr) &&
		    sin6->sin6_addr.s6_addr[12] == 127;
	}
	return false;
}

static void
listeners_enable(bool on)
{
	size_t i;

	for (i = 0; i < nlisteners; i++)
		(on ? evconnlistener_enable : evconnlistener_disable)(
		    listeners[i].lev);
	for (i = 0; i < sim.nexps; i++)
		(on ? evconnlistener_enable : evconnlistener_disable)(
		    sim.exps[i].lev);
}

static void
accept_resume_cb(int fd, short events, void *arg)
{
	listeners_enable(true);
}

static void
listener_error_cb(struct evconnlistener *lev, void *arg)
{
	struct timeval tv = { SIM_ACCEPT_PAUSE, 0 };
	int err = EVUTIL_SOCKET_ERROR();

	if (err == EMFILE || err == ENFILE) {
		/* Don't spin on a listener we cannot accept from. */
		log_warnx("accept: %s; pausing for %d s", strerror(err),
		    SIM_ACCEPT_PAUSE);
		listeners_enable(false);
		evtimer_add(accept_pause_ev, &tv);
		return;
	}
	log_warnx("accept: %s", strerror(err));
}

static void
listener_accept_cb(struct evconnlistener *lev, evutil_socket_t fd,
    struct sockaddr *sa, int socklen, void *arg)
{
	conn_accept(arg, fd, sa, socklen);
}

/* Split "ADDR:PORT", "[ADDR]:PORT" or "PORT". */
static int
split_hostport(const char *s, char *host, size_t hostsz, char *port,
    size_t portsz)
{
	const char *colon, *end;

	if (*s == '[') {
		if ((end = strchr(s, ']')) == NULL || end[1] != ':')
			return -1;
		if ((size_t)(end - s - 1) >= hostsz)
			return -1;
		memcpy(host, s + 1, (size_t)(end - s - 1));
		host[end - s - 1] = '\0';
		colon = end + 1;
	} else if ((colon = strrchr(s, ':')) == NULL) {
		usbgw_strlcpy(host, "127.0.0.1", hostsz);
		colon = s - 1;
	} else {
		if (memchr(s, ':', (size_t)(colon - s)) != NULL ||
		    (size_t)(colon - s) >= hostsz)
			return -1;
		memcpy(host, s, (size_t)(colon - s));
		host[colon - s] = '\0';
	}
	if (usbgw_strlcpy(port, colon + 1, portsz) >= portsz || *port == '\0')
		return -1;
	return 0;
}

/*
 * Listen on spec ("ADDR:PORT") for exporter exp; the listener's name
 * and port are written to name and *portp.
 */
static struct evconnlistener *
listen_spec(const char *spec, bool any, struct sim_exp *exp, char *name,
    size_t namesz, uint16_t *portp)
{
	struct evconnlistener *lev;
	struct addrinfo hints, *res;
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof(ss);
	char host[NI_MAXHOST], port[16];
	long long n;
	const char *errstr;
	int r, fd;

	if (split_hostport(spec, host, sizeof(host), port, sizeof(port)) == -1 ||
	    parse_num(port, 0, 65535, &n, &errstr) == -1) {
		log_warnx("%s: expected ADDR:PORT or [ADDR]:PORT (port "
		    "0..65535)", spec);
		return NULL;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
	if ((r = getaddrinfo(host, port, &hints, &res)) != 0) {
		log_warnx("%s: %s (expected a numeric address)", spec,
		    gai_strerror(r));
		return NULL;
	}
	if (!any && !addr_is_loopback(res->ai_addr)) {
		log_warnx("%s: not a loopback address (use -A to allow it)",
		    spec);
		freeaddrinfo(res);
		return NULL;
	}
	lev = evconnlistener_new_bind(sim.base, listener_accept_cb, exp,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
	    SIM_BACKLOG, res->ai_addr, (int)res->ai_addrlen);
	freeaddrinfo(res);
	if (lev == NULL) {
		log_warn("%s: cannot listen", spec);
		return NULL;
	}
	evconnlistener_set_error_cb(lev, listener_error_cb);
	fd = evconnlistener_get_fd(lev);
	if (getsockname(fd, (struct sockaddr *)&ss, &sslen) == -1 ||
	    getnameinfo((struct sockaddr *)&ss, sslen, host, sizeof(host),
	    port, sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
		log_warn("%s: getsockname", spec);
		evconnlistener_free(lev);
		return NULL;
	}
	snprintf(name, namesz, ss.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s",
	    host, port);
	*portp = (uint16_t)atoi(port);
	return lev;
}

static int
listen_on(const char *spec, bool any)
{
	struct listener *l;

	if (nlisteners >= SIM_MAX_LISTEN) {
		log_warnx("more than %d listen addresses", SIM_MAX_LISTEN);
		return -1;
	}
	l = &listeners[nlisteners];
	if ((l->lev = listen_spec(spec, any, &sim.main, l->name,
	    sizeof(l->name), &l->port)) == NULL)
		return -1;
	nlisteners++;
	log_info("listening on %s", l->name);
	return 0;
}

static int
write_portfile(const char *path, uint16_t port)
{
	char *tmp;
	FILE *f;

	/* Written whole then renamed, so a test polling it never reads half. */
	xasprintf(&tmp, "%s.tmp", path);
	if ((f = fopen(tmp, "w")) == NULL) {
		log_warn("%s", tmp);
		free(tmp);
		return -1;
	}
	fprintf(f, "%u\n", port);
	if (fclose(f) != 0 || rename(tmp, path) == -1) {
		log_warn("%s", path);
		unlink(tmp);
		free(tmp);
		return -1;
	}
	free(tmp);
	return 0;
}

/* "NAME PORT" per generated exporter, written whole then renamed. */
static int
write_exportersfile(const char *path)
{
	char *tmp;
	FILE *f;
	size_t i;

	xasprintf(&tmp, "%s.tmp", path);
	if ((f = fopen(tmp, "w")) == NULL) {
		log_warn("%s", tmp);
		free(tmp);
		return -1;
	}
	for (i = 0; i < sim.nexps; i++)
		fprintf(f, "%s %u\n", sim.exps[i].name, sim.exps[i].port);
	if (fclose(f) != 0 || rename(tmp, path) == -1) {
		log_warn("%s", path);
		unlink(tmp);
		free(tmp);
		return -1;
	}
	free(tmp);
	return 0;
}

/*
 * Every claimed device is a connection and every exporter a listener:
 * take the hard limit of descriptors rather than the soft 1024.
 */
static void
raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1 || rl.rlim_cur >= rl.rlim_max)
		return;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) == -1)
		log_warn("setrlimit RLIMIT_NOFILE");
}

/* ---- devices --------------------------------------------------------- */

int
sim_plug(struct sim_exp *exp, const struct sim_spec *spec, bool from_config,
    char *err, size_t errsz)
{
	struct sim_dev *dev;

	if ((dev = dev_new(exp, spec, from_config, err, errsz)) == NULL)
		return -1;
	dev_add(dev);
	return 0;
}

struct sim_exp *
sim_exp_find(const char *name)
{
	size_t i;

	if (name == NULL || *name == '\0')
		return &sim.main;
	for (i = 0; i < sim.nexps; i++)
		if (strcmp(sim.exps[i].name, name) == 0)
			return &sim.exps[i];
	return NULL;
}

/*
 * Make the exporters of the `exporters` statements: a listener each,
 * then its devices.  Returns -1 (logged) if one cannot listen.
 */
static int
exporters_build(const struct sim_conf *conf, bool any)
{
	const struct sim_expgroup *g;
	struct sim_exp *exp;
	struct sim_spec spec;
	struct rlimit rl;
	char addr[96], busid[USBIP_BUSID_SIZE], serial[96], err[256];
	size_t gi, total = 0, devs = 0;
	unsigned i, j;

	for (gi = 0; gi < conf->ngroups; gi++) {
		total += conf->groups[gi].count;
		devs += (size_t)conf->groups[gi].count *
		    conf->groups[gi].ndevs;
	}
	if (total == 0)
		return 0;
	/* A listener per exporter and a connection per claimed device. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    total + devs + 64 > rl.rlim_cur)
		log_warnx("%zu exporters and %zu devices may need %zu "
		    "descriptors; the limit is %llu", total, devs,
		    total + devs + 64, (unsigned long long)rl.rlim_cur);
	sim.exps = xreallocarray(NULL, total, sizeof(*sim.exps));
	for (gi = 0; gi < conf->ngroups; gi++) {
		g = &conf->groups[gi];
		for (i = 0; i < g->count; i++) {
			exp = &sim.exps[sim.nexps];
			memset(exp, 0, sizeof(*exp));
			TAILQ_INIT(&exp->devs);
			snprintf(exp->name, sizeof(exp->name), "%s%u",
			    g->prefix, i + 1);
			snprintf(addr, sizeof(addr), strchr(g->addr, ':') !=
			    NULL ? "[%s]:%u" : "%s:%u", g->addr,
			    g->base_port != 0 ? g->base_port + i : 0);
			if ((exp->lev = listen_spec(addr, any, exp, err,
			    sizeof(err), &exp->port)) == NULL) {
				log_warnx("%s:%d: exporter %s cannot listen on "
				    "%s", sim.conffile != NULL ? sim.conffile :
				    "built-in", g->line, exp->name, addr);
				return -1;
			}
			sim.nexps++;
			for (j = 0; j < g->ndevs; j++) {
				expgroup_busid(j, busid, sizeof(busid));
				spec_init(&spec, busid);
				spec.line = g->line;
				snprintf(serial, sizeof(serial), "SIM-%s-%s",
				    exp->name, busid);
				if (spec_set(&spec, "type", sim_type_name(g->type),
				    err, sizeof(err)) == -1 ||
				    spec_set(&spec, "serial", serial, err,
				    sizeof(err)) == -1 ||
				    spec_finish(&spec, err, sizeof(err)) == -1 ||
				    sim_plug(exp, &spec, true, err,
				    sizeof(err)) == -1)
					fatalx("exporter %s device %s: %s",
					    exp->name, busid, err);
				spec_clear(&spec);
			}
		}
	}
	memcpy(groups, conf->groups, sizeof(groups));
	ngroups = conf->ngroups;
	log_info("%zu exporters, %zu devices in all, listening (%s on port %u, ...)",
	    sim.nexps, devs, sim.exps[0].name, sim.exps[0].port);
	return 0;
}

static void
exporters_free(void)
{
	size_t i;

	for (i = 0; i < sim.nexps; i++) {
		expsrv_free(sim.exps[i].srv);
		sim.exps[i].srv = NULL;
		while (!TAILQ_EMPTY(&sim.exps[i].devs))
			dev_remove(TAILQ_FIRST(&sim.exps[i].devs));
		evconnlistener_free(sim.exps[i].lev);
	}
	free(sim.exps);
	sim.exps = NULL;
	sim.nexps = 0;
}

static const struct sim_spec *
conf_find(const struct sim_conf *conf, const char *busid)
{
	size_t i;

	for (i = 0; i < conf->nspecs; i++)
		if (strcmp(conf->specs[i].busid, busid) == 0)
			return &conf->specs[i];
	return NULL;
}

/*
 * Make the configured devices those of conf: remove those gone or
 * changed (closing their imports, as an unplug does), add the new and
 * changed ones.  Devices plugged over the control socket stay.
 */
static void
apply_conf(const struct sim_conf *conf)
{
	struct sim_dev *dev, *next;
	const struct sim_spec *spec;
	char err[256];
	size_t i;

	for (dev = TAILQ_FIRST(&sim.main.devs); dev != NULL; dev = next) {
		next = TAILQ_NEXT(dev, entry);
		if (!dev->from_config)
			continue;
		spec = conf_find(conf, dev->spec.busid);
		if (spec == NULL || !spec_equal(spec, &dev->spec))
			dev_remove(dev);
	}
	for (i = 0; i < conf->nspecs; i++) {
		spec = &conf->specs[i];
		if ((dev = dev_find(&sim.main, spec->busid)) != NULL) {
			if (!dev->from_config)
				log_warnx("%s:%d: device %s was plugged over "
				    "the control socket; left as it is",
				    sim.conffile != NULL ? sim.conffile :
				    "built-in", spec->line, spec->busid);
			continue;
		}
		if (sim_plug(&sim.main, spec, true, err, sizeof(err)) == -1)
			log_warnx("%s:%d: %s", sim.conffile != NULL ?
			    sim.conffile : "built-in", spec->line, err);
	}
}

void
sim_reload(void)
{
	struct sim_conf conf;

	if (sim.conffile == NULL) {
		log_info("reload: no config file (-c); nothing to do");
		return;
	}
	if (conf_load(sim.conffile, &conf) == -1) {
		log_warnx("reload: %s has errors; devices unchanged",
		    sim.conffile);
		return;
	}
	apply_conf(&conf);
	/* Exporters and their listeners are made once, at start. */
	if (conf.ngroups != ngroups || memcmp(conf.groups, groups,
	    ngroups * sizeof(groups[0])) != 0)
		log_warnx("reload: %s: 'exporters' statements changed; they "
		    "take effect at the next start only", sim.conffile);
	conf_clear(&conf);
	log_info("reloaded %s", sim.conffile);
}

/* ---- signals --------------------------------------------------------- */

static void
signal_cb(int sig, short events, void *arg)
{
	switch (sig) {
	case SIGHUP:
		log_info("SIGHUP: reloading");
		sim_reload();
		break;
	default:
		log_info("signal %d: shutting down", sig);
		event_base_loopexit(sim.base, NULL);
	}
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "help",		no_argument,	NULL, 'h' },
		{ "legacy-status",	no_argument,	NULL, 'S' },
		{ NULL,			0,		NULL, 0 },
	};
	struct sim_conf conf;
	struct event *sigs[4];
	const int signums[4] = { SIGTERM, SIGINT, SIGHUP, 0 };
	const char *listen_args[SIM_MAX_LISTEN], *portfile = NULL;
	const char *expfile = NULL;
	const char *ctlpath = NULL, *logpath = NULL, *errstr;
	size_t nlisten_args = 0, i;
	bool any = false, debug = false, legacy = false;
	long long maxconns = 0, maxurbs = 0;
	int ch, rv;

	log_init("usbgw-sim", 1, LOG_LVL_INFO);
	/*
	 * Socket reads fill fresh evbuffer chains of 256 KiB and more (expsrv);
	 * keep glibc from mapping and trimming them back to the kernel each
	 * time (a page fault per 4 KiB on every read).
	 */
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 128 << 20);
	TAILQ_INIT(&sim.main.devs);
	while ((ch = getopt_long(argc, argv, "AC:c:dhL:l:m:p:P:Su:", longopts,
	    NULL)) != -1) {
		switch (ch) {
		case 'A':
			any = true;
			break;
		case 'C':
			ctlpath = optarg;
			break;
		case 'c':
			sim.conffile = optarg;
			break;
		case 'd':
			debug = true;
			break;
		case 'h':
			usage(0);
		case 'L':
			logpath = optarg;
			break;
		case 'l':
			if (nlisten_args >= SIM_MAX_LISTEN)
				fatalx("more than %d -l options",
				    SIM_MAX_LISTEN);
			listen_args[nlisten_args++] = optarg;
			break;
		case 'm':
			if (parse_num(optarg, 1, SIM_MAX_CONNS_LIMIT, &maxconns,
			    &errstr) == -1)
				fatalx("-m %s: %s (expected 1..%d)", optarg,
				    errstr, SIM_MAX_CONNS_LIMIT);
			break;
		case 'p':
			portfile = optarg;
			break;
		case 'P':
			expfile = optarg;
			break;
		case 'S':
			legacy = true;
			break;
		case 'u':
			if (parse_num(optarg, 1, SIM_MAX_URBS_LIMIT, &maxurbs,
			    &errstr) == -1)
				fatalx("-u %s: %s (expected 1..%d)", optarg,
				    errstr, SIM_MAX_URBS_LIMIT);
			break;
		default:
			usage(2);
		}
	}
	if (optind != argc)
		usage(2);
	if (debug)
		log_setlevel(LOG_LVL_DEBUG);
	signal(SIGPIPE, SIG_IGN);
	raise_nofile();

	if ((sim.base = event_base_new()) == NULL)
		fatalx("event_base_new failed");
	if (sim.conffile != NULL)
		rv = conf_load(sim.conffile, &conf);
	else
		rv = conf_load_string("built-in", sim_default_conf, &conf);
	if (rv == -1)
		fatalx("%s: configuration has errors",
		    sim.conffile != NULL ? sim.conffile : "built-in");

	/* Command-line flags override the file. */
	sim.max_conns = maxconns != 0 ? (unsigned)maxconns :
	    conf.max_conns != 0 ? (unsigned)conf.max_conns : SIM_MAX_CONNS;
	sim.max_urbs = maxurbs != 0 ? (unsigned)maxurbs :
	    conf.max_urbs != 0 ? (unsigned)conf.max_urbs : SIM_MAX_URBS;
	sim.legacy_status = legacy || conf.legacy_status == 1;
	if (logpath != NULL) {
		if (strcmp(logpath, "-") == 0)
			sim.pdulog = stdout;
		else if ((sim.pdulog = fopen(logpath, "ae")) == NULL)
			fatal("%s", logpath);
	}

	if ((accept_pause_ev = evtimer_new(sim.base, accept_resume_cb,
	    NULL)) == NULL)
		fatalx("evtimer_new failed");
	if (nlisten_args > 0) {
		for (i = 0; i < nlisten_args; i++)
			if (listen_on(listen_args[i], any) == -1)
				exit(1);
	} else if (conf.nlisten > 0) {
		for (i = 0; i < conf.nlisten; i++)
			if (listen_on(conf.listen[i], any) == -1)
				exit(1);
	} else if (conf.ngroups == 0 &&
	    listen_on(SIM_DEFAULT_LISTEN, any) == -1)
		exit(1);
	if (ctlpath != NULL && ctl_open(ctlpath) == -1)
		exit(1);

	apply_conf(&conf);
	if (exporters_build(&conf, any) == -1)
		exit(1);
	conf_clear(&conf);
	if (portfile != NULL && write_portfile(portfile, nlisteners > 0 ?
	    listeners[0].port : sim.exps[0].port) == -1)
		exit(1);
	if (expfile != NULL && write_exportersfile(expfile) == -1)
		exit(1);

	for (i = 0; signums[i] != 0; i++) {
		if ((sigs[i] = evsignal_new(sim.base, signums[i], signal_cb,
		    NULL)) == NULL || evsignal_add(sigs[i], NULL) == -1)
			fatalx("cannot handle signal %d", signums[i]);
	}
	sigs[i] = NULL;

	event_base_dispatch(sim.base);

	conn_closeall();
	ctl_close();
	while (!TAILQ_EMPTY(&sim.main.devs))
		dev_remove(TAILQ_FIRST(&sim.main.devs));
	exporters_free();
	for (i = 0; i < nlisteners; i++)
		evconnlistener_free(listeners[i].lev);
	for (i = 0; sigs[i] != NULL; i++)
		event_free(sigs[i]);
	event_free(accept_pause_ev);
	pdulog_flush();
	if (sim.pdulog != NULL && sim.pdulog != stdout)
		fclose(sim.pdulog);
	event_base_free(sim.base);
	log_info("exited");
	return 0;
}
