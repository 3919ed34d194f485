/*
 * The control socket (-C PATH): a Unix stream socket speaking lines.
 * Each request is one line; the reply is zero or more data lines, then
 * "ok" or "error: MESSAGE".  Commands (README.md):
 *
 *	plug BUSID TYPE [KEY=VALUE ...]
 *	unplug BUSID
 *	list [EXPORTER]
 *	exporters
 *	reload
 *	inject BUSID seqnum|command|overflow|iso|freeze|disguise|raw HEX
 *	help
 *
 * A BUSID may be EXPORTER/BUSID: a device of an exporter made by an
 * `exporters` statement ('/' is in no busid).
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/listener.h>

#include "base/log.h"
#include "base/util.h"
#include "sim.h"

#define CTL_MAX_ARGS	32

struct ctl_client {
	TAILQ_ENTRY(ctl_client) entry;
	struct bufferevent	*bev;
	bool			 closing;	/* close once the reply is out */
};

static TAILQ_HEAD(, ctl_client) clients = TAILQ_HEAD_INITIALIZER(clients);
static unsigned			 nclients;
static struct evconnlistener	*ctl_listener;
static char			*ctl_path;

static void
ctl_free(struct ctl_client *c)
{
	TAILQ_REMOVE(&clients, c, entry);
	nclients--;
	bufferevent_free(c->bev);
	free(c);
}

static void
ctl_reply(struct ctl_client *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
ctl_reply(struct ctl_client *c, const char *fmt, ...)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);
	va_list ap;

	va_start(ap, fmt);
	evbuffer_add_vprintf(out, fmt, ap);
	va_end(ap);
	evbuffer_add(out, "\n", 1);
}

/*
 * Split arg, "BUSID" or "EXPORTER/BUSID", into its exporter and busid
 * (pointing into arg).  Replies with an error and returns NULL if there
 * is no such exporter.
 */
static struct sim_exp *
ctl_target(struct ctl_client *c, char *arg, char **busid)
{
	struct sim_exp *exp;
	char *slash;

	if ((slash = strchr(arg, '/')) == NULL) {
		*busid = arg;
		return &sim.main;
	}
	*slash = '\0';
	*busid = slash + 1;
	if ((exp = sim_exp_find(arg)) == NULL || exp == &sim.main) {
		ctl_reply(c, "error: no exporter %s (expected a name from an "
		    "'exporters' statement, see the exporters command)", arg);
		return NULL;
	}
	return exp;
}

static void
cmd_exporters(struct ctl_client *c)
{
	struct sim_dev *dev;
	unsigned imported;
	size_t i;

	for (i = 0; i < sim.nexps; i++) {
		imported = 0;
		TAILQ_FOREACH(dev, &sim.exps[i].devs, entry)
			if (dev->owner != NULL)
				imported++;
		ctl_reply(c, "%s port=%u devices=%u imported=%u connections=%u",
		    sim.exps[i].name, sim.exps[i].port, sim.exps[i].ndevs,
		    imported, sim_exp_nconns(&sim.exps[i]));
	}
	ctl_reply(c, "ok");
}

static void
cmd_list(struct ctl_client *c, int argc, char **argv)
{
	struct sim_exp *exp = &sim.main;
	struct sim_dev *dev;

	if (argc > 2) {
		ctl_reply(c, "error: usage: list [EXPORTER]");
		return;
	}
	if (argc == 2 && ((exp = sim_exp_find(argv[1])) == NULL ||
	    exp == &sim.main)) {
		ctl_reply(c, "error: no exporter %s", argv[1]);
		return;
	}
	TAILQ_FOREACH(dev, &exp->devs, entry) {
		ctl_reply(c, "%s %s %04x:%04x busnum=%u devnum=%u speed=%s "
		    "state=%s%s%s imports=%llu urbs=%llu bytes_out=%llu "
		    "bytes_in=%llu origin=%s", dev->spec.busid,
		    sim_type_name(dev->spec.type), dev->spec.vendor,
		    dev->spec.product, dev->busnum, dev->devnum,
		    usbip_speed_name(dev->spec.speed),
		    dev->owner != NULL ? "imported" : "available",
		    dev->owner != NULL ? " peer=" : "",
		    dev->owner != NULL ? expsrv_conn_peer(dev->owner) : "",
		    (unsigned long long)dev->nimports,
		    (unsigned long long)dev->nurbs,
		    (unsigned long long)dev->bytes_out,
		    (unsigned long long)dev->bytes_in,
		    dev->from_config ? "config" : "control");
	}
	ctl_reply(c, "ok");
}

static void
cmd_plug(struct ctl_client *c, int argc, char **argv)
{
	struct sim_spec spec;
	struct sim_exp *exp;
	char err[256], *eq, *busid;
	int i;

	if (argc < 3) {
		ctl_reply(c, "error: usage: plug BUSID TYPE [KEY=VALUE ...]");
		return;
	}
	if ((exp = ctl_target(c, argv[1], &busid)) == NULL)
		return;
	if (!usbip_busid_valid(busid)) {
		ctl_reply(c, "error: expected a busid (1..31 of A-Z a-z 0-9 "
		    ". - _ :)");
		return;
	}
	spec_init(&spec, busid);
	if (spec_set(&spec, "type", argv[2], err, sizeof(err)) == -1)
		goto fail;
	for (i = 3; i < argc; i++) {
		if ((eq = strchr(argv[i], '=')) == NULL) {
			snprintf(err, sizeof(err), "expected KEY=VALUE, got "
			    "'%s'", argv[i]);
			goto fail;
		}
		*eq = '\0';
		if (spec_set(&spec, argv[i], eq + 1, err, sizeof(err)) == -1)
			goto fail;
	}
	if (spec_finish(&spec, err, sizeof(err)) == -1 ||
	    sim_plug(exp, &spec, false, err, sizeof(err)) == -1)
		goto fail;
	spec_clear(&spec);
	ctl_reply(c, "ok");
	return;
fail:
	spec_clear(&spec);
	ctl_reply(c, "error: %s", err);
}

static void
cmd_unplug(struct ctl_client *c, int argc, char **argv)
{
	struct sim_dev *dev;
	struct sim_exp *exp;
	char *busid;

	if (argc != 2) {
		ctl_reply(c, "error: usage: unplug BUSID");
		return;
	}
	if ((exp = ctl_target(c, argv[1], &busid)) == NULL)
		return;
	if ((dev = dev_find(exp, busid)) == NULL) {
		ctl_reply(c, "error: no device %s", busid);
		return;
	}
	dev_remove(dev);
	ctl_reply(c, "ok");
}

static void
cmd_inject(struct ctl_client *c, int argc, char **argv)
{
	struct sim_dev *dev;
	struct sim_exp *exp;
	char err[256], *busid;

	if (argc < 3 || argc > 4) {
		ctl_reply(c, "error: usage: inject BUSID seqnum|command|"
		    "overflow|iso|freeze|disguise|raw HEX");
		return;
	}
	if ((exp = ctl_target(c, argv[1], &busid)) == NULL)
		return;
	if ((dev = dev_find(exp, busid)) == NULL) {
		ctl_reply(c, "error: no device %s", busid);
		return;
	}
	if (dev->owner == NULL) {
		ctl_reply(c, "error: device %s is not imported", busid);
		return;
	}
	if (strcmp(argv[2], "disguise") == 0) {
		if (!(dev->spec.set & SPEC_DISGUISE)) {
			ctl_reply(c, "error: device %s has no disguise "
			    "(give it disguise keys)", busid);
			return;
		}
		dev_disguise(dev);	/* until the import ends */
		ctl_reply(c, "ok");
		return;
	}
	if (conn_inject(dev, argv[2], argc == 4 ? argv[3] : NULL, err,
	    sizeof(err)) == -1) {
		ctl_reply(c, "error: %s", err);
		return;
	}
	ctl_reply(c, "ok");
}

static void
ctl_command(struct ctl_client *c, char *line)
{
	char *argv[CTL_MAX_ARGS];
	const char *err = "?";
	int argc;

	if ((argc = conf_split(line, argv, CTL_MAX_ARGS, &err)) == -1) {
		ctl_reply(c, "error: %s", err);
		return;
	}
	if (argc == 0)
		return;
	if (strcmp(argv[0], "list") == 0)
		cmd_list(c, argc, argv);
	else if (strcmp(argv[0], "exporters") == 0 && argc == 1)
		cmd_exporters(c);
	else if (strcmp(argv[0], "plug") == 0)
		cmd_plug(c, argc, argv);
	else if (strcmp(argv[0], "unplug") == 0)
		cmd_unplug(c, argc, argv);
	else if (strcmp(argv[0], "inject") == 0)
		cmd_inject(c, argc, argv);
	else if (strcmp(argv[0], "reload") == 0 && argc == 1) {
		sim_reload();
		ctl_reply(c, "ok");
	} else if (strcmp(argv[0], "help") == 0) {
		ctl_reply(c, "plug BUSID TYPE [KEY=VALUE ...]");
		ctl_reply(c, "unplug BUSID");
		ctl_reply(c, "list [EXPORTER]");
		ctl_reply(c, "exporters");
		ctl_reply(c, "reload");
		ctl_reply(c, "inject BUSID seqnum|command|overflow|iso|freeze|"
		    "raw HEX");
		ctl_reply(c, "ok");
	} else
		ctl_reply(c, "error: unknown command (expected plug, unplug, "
		    "list, exporters, reload, inject or help)");
}

static void
ctl_read_cb(struct bufferevent *bev, void *arg)
{
	struct ctl_client *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	char *line;
	size_t n;

	while (!c->closing &&
	    (line = evbuffer_readln(in, &n, EVBUFFER_EOL_CRLF)) != NULL) {
		if (n > SIM_CTL_LINE || strlen(line) != n) {
			ctl_reply(c, "error: line too long or contains NUL");
			c->closing = true;
		} else
			ctl_command(c, line);
		free(line);
	}
	if (!c->closing && evbuffer_get_length(in) > SIM_CTL_LINE) {
		ctl_reply(c, "error: line too long");
		c->closing = true;
	}
	if (c->closing) {
		bufferevent_disable(bev, EV_READ);
		if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
			ctl_free(c);
	}
}

static void
ctl_write_cb(struct bufferevent *bev, void *arg)
{
	struct ctl_client *c = arg;

	if (c->closing)
		ctl_free(c);
}

static void
ctl_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct ctl_client *c = arg;

	/* A client that shut its side down still gets its replies. */
	c->closing = true;
	if ((what & BEV_EVENT_ERROR) ||
	    evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		ctl_free(c);
	else
		bufferevent_disable(bev, EV_READ);
}

static void
ctl_accept_cb(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int socklen, void *arg)
{
	struct ctl_client *c;

	if (nclients >= SIM_MAX_CTL) {
		log_warnx("control: refused, already %d clients", SIM_MAX_CTL);
		close(fd);
		return;
	}
	c = xcalloc(1, sizeof(*c));
	if ((c->bev = bufferevent_socket_new(sim.base, fd,
	    BEV_OPT_CLOSE_ON_FREE)) == NULL)
		fatalx("out of memory");
	bufferevent_setcb(c->bev, ctl_read_cb, ctl_write_cb, ctl_event_cb, c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	TAILQ_INSERT_TAIL(&clients, c, entry);
	nclients++;
}

int
ctl_open(const char *path)
{
	struct sockaddr_un sun;
	struct stat st;
	mode_t old;
	int fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (usbgw_strlcpy(sun.sun_path, path, sizeof(sun.sun_path)) >=
	    sizeof(sun.sun_path)) {
		log_warnx("%s: control socket path too long", path);
		return -1;
	}
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			log_warnx("%s: exists and is not a socket", path);
			return -1;
		}
		unlink(path);
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
	    0)) == -1) {
		log_warn("socket");
		return -1;
	}
	old = umask(0077);
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		log_warn("%s: bind", path);
		umask(old);
		close(fd);
		return -1;
	}
	umask(old);
	if ((ctl_listener = evconnlistener_new(sim.base, ctl_accept_cb, NULL,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, SIM_MAX_CTL,
	    fd)) == NULL) {
		log_warnx("%s: cannot listen", path);
		close(fd);
		unlink(path);
		return -1;
	}
	ctl_path = xstrdup(path);
	log_info("control socket %s", path);
	return 0;
}

void
ctl_close(void)
{
	struct ctl_client *c;

	while ((c = TAILQ_FIRST(&clients)) != NULL)
		ctl_free(c);
	if (ctl_listener != NULL) {
		evconnlistener_free(ctl_listener);
		ctl_listener = NULL;
	}
	if (ctl_path != NULL) {
		unlink(ctl_path);
		free(ctl_path);
		ctl_path = NULL;
	}
}
