/*
 * usbgw-agent's listeners, allow-from, connection cap, audit lines, and
 * the expsrv engine around the device layer's back end (export.h).
 *
 * The engine is given the back end's ops wrapped: import answers and
 * malformed requests become audit lines ("import" with the way the
 * connection came, "import-refused", "malformed"); the device layer
 * writes the device's own lines ("release" with its URBs and bytes,
 * "export", "gone", "keep-local").  What the wrapper keeps for an
 * import lives in the connection's data (expsrv_conn_set_data) from its
 * ST_OK answer to its release().
 */
#include <sys/queue.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <netdb.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/listener.h>

#include "export.h"
#include "base/hostlimit.h"
#include "base/log.h"
#include "tls/tlsshim.h"
#include "usbloop.h"
#include "base/util.h"

#define EXPORT_MAX_LISTENERS	(2 * ACONF_MAX_LISTEN)
#define EXPORT_BACKLOG		64
#define AUDIT_LINE_MAX		1024
#define PEER_MAX		(INET6_ADDRSTRLEN + 8)

struct listener {
	struct evconnlistener	*lev;
	char			 name[PEER_MAX];	/* "127.0.0.1:3240" */
};

/* One import, from its ST_OK to its release(). */
struct import {
	TAILQ_ENTRY(import) entry;
	struct expsrv_conn *conn;
	bool		 dialback;	/* export_adopt(): no allow-from peer */
	char		 busid[USBIP_BUSID_SIZE * 4];	/* escaped */
	char		 peer[PEER_MAX];
};

/*
 * The dial-back connections (export_adopt) not yet imported, by
 * connection id, with the one busid each may import: a small ring, since
 * each is imported at once or closed (an id pushed out only makes that
 * connection an allow-from peer: refused, fail closed).
 */
#define ADOPTED_MAX		64
#define EXPORT_TLS_MS		10000	/* an accepted connection's handshake */

/*
 * An accepted connection in its TLS handshake (tls required): the agent
 * is TLS's client on it (protocol.md 1.10.9).  Counted against
 * max-connections with the engine's.
 */
struct tls_accept {
	TAILQ_ENTRY(tls_accept)	 entry;
	struct tlsshim		*sh;
	struct sockaddr_storage	 ss;
	socklen_t		 sslen;
	char			 host[NI_MAXHOST];
	char			 listen[PEER_MAX];
};

struct adopted {
	unsigned	 id;		/* conn id + 1; 0: free */
	char		 busid[USBIP_BUSID_SIZE];
};

static struct {
	struct event_base	*base;
	const struct aconf	*conf;
	const struct expsrv_ops	*backend;
	struct expsrv		*srv;
	struct hostlimit	*hl;
	int			 audit_fd;
	char			 audit_path[ACONF_PATH_MAX];
	struct listener		 l[EXPORT_MAX_LISTENERS];
	unsigned		 nl;
	struct event		*resume_ev;	/* accept paused on EMFILE */
	TAILQ_HEAD(, import)	 imports;	/* every import granted */
	struct adopted		 adopted[ADOPTED_MAX];
	SSL_CTX			*tls_ctx;	/* the agent's identity, or NULL */
	TAILQ_HEAD(, tls_accept) tls_pending;
	unsigned		 ntls_pending;
	unsigned		 nadopted;
	export_extension_fn	 extension;
} ex = { .audit_fd = -1, .imports = TAILQ_HEAD_INITIALIZER(ex.imports) };

static const char *const audit_kinds[EXPORT_AK_N] = {
	"refused", "malformed",
};

/* ---- audit lines ---------------------------------------------------- */

static void
audit_write(const char *line)
{
	char buf[AUDIT_LINE_MAX + 64], ts[40];
	struct timespec tv;
	struct tm tm;
	int n;

	log_info("audit: %s", line);
	if (ex.audit_fd == -1)
		return;
	clock_gettime(CLOCK_REALTIME, &tv);
	localtime_r(&tv.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S%z", &tm);
	n = snprintf(buf, sizeof(buf), "%s audit: %s\n", ts, line);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(buf))
		n = (int)sizeof(buf) - 1;
	/* One write per line on an O_APPEND file: lines never interleave. */
	if (write(ex.audit_fd, buf, (size_t)n) != n)
		log_warn("audit-log %s", ex.audit_path);
}

static void vaudit(const char *, va_list) __attribute__((format(printf, 1, 0)));

static void
vaudit(const char *fmt, va_list ap)
{
	char line[AUDIT_LINE_MAX];

	vsnprintf(line, sizeof(line), fmt, ap);
	audit_write(line);
}

void
export_audit(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vaudit(fmt, ap);
	va_end(ap);
}

void
export_audit_peer(const char *addr, int kind, const char *fmt, ...)
{
	va_list ap;

	if (ex.hl != NULL && !hostlimit_check(ex.hl, addr, kind))
		return;
	va_start(ap, fmt);
	vaudit(fmt, ap);
	va_end(ap);
}

/* The budget's summary: one line a minute per address held back. */
static void
audit_summary(const char *key, const char *detail)
{
	char k[HOSTLIMIT_KEY_MAX * 4], d[1024];

	export_audit("suppressed peer=%s detail=\"%s\"",
	    log_escape(k, sizeof(k), key, strlen(key)),
	    log_escape(d, sizeof(d), detail, strlen(detail)));
}

static int
audit_open(const char *path, char *err, size_t errlen)
{
	int fd = -1;

	if (path[0] != '\0' && (fd = open(path, O_WRONLY | O_APPEND | O_CREAT |
	    O_CLOEXEC | O_NOCTTY, 0600)) == -1) {
		snprintf(err, errlen, "audit-log %s: %s", path, strerror(errno));
		return -1;
	}
	if (ex.audit_fd != -1)
		close(ex.audit_fd);
	ex.audit_fd = fd;
	usbgw_strlcpy(ex.audit_path, path, sizeof(ex.audit_path));
	return 0;
}

/* ---- the back end, wrapped ---------------------------------------------- */

/* c's entry if it was adopted (a dial-back), else NULL. */
static struct adopted *
adopted_find(const struct expsrv_conn *c)
{
	unsigned i, id = expsrv_conn_id(c) + 1;

	for (i = 0; i < ADOPTED_MAX; i++)
		if (ex.adopted[i].id == id)
			return &ex.adopted[i];
	return NULL;
}

/* Was c adopted (a dial-back)?  Forgotten once asked (take). */
static bool
adopted(const struct expsrv_conn *c, bool take)
{
	struct adopted *a = adopted_find(c);

	if (a != NULL && take)
		a->id = 0;
	return a != NULL;
}

/*
 * Is the peer of c in allow-from now?  allow-from is checked at accept,
 * and again at each import and at each reload (export_set_conf): a
 * reload that drops a peer ends what that peer holds.
 */
static bool
conn_allowed(const struct expsrv_conn *c)
{
	char a[PEER_MAX];

	usbgw_hostport_addr(expsrv_conn_peer(c), a, sizeof(a));
	return export_addr_allowed(a);
}

bool
export_addr_allowed(const char *addr)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	char a[INET6_ADDRSTRLEN];
	const char *pct;

	/* a link-local peer's name carries its zone (fe80::1%eth0) */
	if ((pct = strchr(addr, '%')) != NULL) {
		if ((size_t)(pct - addr) >= sizeof(a))
			return false;
		memcpy(a, addr, (size_t)(pct - addr));
		a[pct - addr] = '\0';
		addr = a;
	}
	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, addr, &sin->sin_addr) == 1)
		sin->sin_family = AF_INET;
	else if (inet_pton(AF_INET6, addr, &sin6->sin6_addr) == 1)
		sin6->sin6_family = AF_INET6;
	else
		return false;
	return ex.conf != NULL && aconf_allowed(ex.conf,
	    (struct sockaddr *)&ss);
}

static void
w_list(void *arg, struct expsrv_conn *c)
{
	char peer[PEER_MAX];

	(void)arg;
	/* a dial-back exists for one import: no device list on it */
	if (adopted(c, false)) {
		usbgw_hostport_addr(expsrv_conn_peer(c), peer, sizeof(peer));
		export_audit("refused peer=%s via=dial-back reason=\"device "
		    "list on a dial-back\"", peer);
		expsrv_list_refuse(c, ST_NA);
		return;
	}
	/* accepted under an allow-from that a reload has narrowed since */
	if (!conn_allowed(c)) {
		usbgw_hostport_addr(expsrv_conn_peer(c), peer, sizeof(peer));
		export_audit_peer(peer, EXPORT_AK_REFUSED, "refused peer=%s "
		    "reason=\"device list: no longer in allow-from\"", peer);
		expsrv_conn_close(c, "peer no longer in allow-from");
		return;
	}
	if (ex.backend != NULL)
		ex.backend->list(NULL, c);
}

static uint32_t
w_import(void *arg, struct expsrv_conn *c, const char *busid,
    struct usbip_dev *rec, void **dev)
{
	struct adopted *a = adopted_find(c);

	(void)arg;
	/* a dial-back imports the busid it was opened for, nothing else */
	if (a != NULL && strncmp(a->busid, busid, sizeof(a->busid)) != 0)
		return ST_NA;
	if (ex.backend == NULL)
		return ST_NODEV;
	/* accepted under an allow-from that a reload has narrowed since */
	if (a == NULL && !conn_allowed(c))
		return ST_NA;
	return ex.backend->import(NULL, c, busid, rec, dev);
}

static void
w_imported(void *arg, struct expsrv_conn *c, const char *busid, uint32_t st,
    void *dev)
{
	struct import *im;
	char peer[PEER_MAX], b[USBIP_BUSID_SIZE * 4];

	(void)arg;
	(void)dev;
	usbgw_hostport_addr(expsrv_conn_peer(c), peer, sizeof(peer));
	log_escape(b, sizeof(b), busid, strnlen(busid, USBIP_BUSID_SIZE));
	if (st != ST_OK) {
		export_audit("import-refused busid=%s peer=%s status=%s", b,
		    peer, usbip_st_name(st));
		return;
	}
	im = xcalloc(1, sizeof(*im));
	im->conn = c;
	im->dialback = adopted(c, true);
	usbgw_strlcpy(im->busid, b, sizeof(im->busid));
	usbgw_strlcpy(im->peer, peer, sizeof(im->peer));
	free(expsrv_conn_data(c));
	expsrv_conn_set_data(c, im);
	TAILQ_INSERT_TAIL(&ex.imports, im, entry);
	export_audit("import busid=%s peer=%s via=%s", b, peer,
	    im->dialback ? "dial-back" : "listen");
	if (ex.backend != NULL && ex.backend->imported != NULL)
		ex.backend->imported(NULL, c, busid, st, dev);
	/* granted asynchronously after a reload took the peer out */
	if (!im->dialback && !conn_allowed(c))
		expsrv_conn_close(c, "peer no longer in allow-from");
}

static int
w_ep_type(void *dev, uint32_t dir, uint32_t ep)
{
	return ex.backend != NULL ? ex.backend->ep_type(dev, dir, ep) : -1;
}

static void
w_submit(void *dev, struct expsrv_urb *u)
{
	ex.backend->submit(dev, u);
}

static bool
w_cancel(void *dev, struct expsrv_urb *u)
{
	return ex.backend->cancel(dev, u);
}

static void
w_release(void *dev, struct expsrv_conn *c, const char *why)
{
	struct import *im = expsrv_conn_data(c);

	if (im != NULL) {
		expsrv_conn_set_data(c, NULL);
		TAILQ_REMOVE(&ex.imports, im, entry);
		free(im);
	}
	if (ex.backend != NULL)
		ex.backend->release(dev, c, why);
}

/* A malformed request closes its connection: an audit line, budgeted. */
static void
w_pdu(void *arg, struct expsrv_conn *c, const struct usbip_op *op,
    const struct usbip_urb_hdr *urb, const char *malformed)
{
	struct import *im;
	char peer[PEER_MAX], r[256];

	(void)arg;
	(void)op;
	(void)urb;
	if (malformed == NULL)
		return;
	usbgw_hostport_addr(expsrv_conn_peer(c), peer, sizeof(peer));
	im = expsrv_conn_data(c);
	export_audit_peer(peer, EXPORT_AK_MALFORMED, "malformed peer=%s%s%s "
	    "reason=\"%s\"", peer, im != NULL ? " busid=" : "",
	    im != NULL ? im->busid : "", log_escape(r, sizeof(r), malformed,
	    strlen(malformed)));
}

/* An op code the engine does not serve: the extension's, if it wants it. */
static bool
w_extension(void *arg, struct expsrv_conn *c, uint16_t code, int fd,
    struct evbuffer *in)
{
	char peer[PEER_MAX];
	bool dialback;

	(void)arg;
	if (ex.extension == NULL)
		return false;
	/*
	 * Taken and closed, unanswered: a dial-back exists for its one
	 * import, and a peer that a reload took out of allow-from after the
	 * accept gets nothing more (not a control connection either).
	 */
	if ((dialback = adopted(c, false)) || !conn_allowed(c)) {
		usbgw_hostport_addr(expsrv_conn_peer(c), peer, sizeof(peer));
		export_audit_peer(peer, EXPORT_AK_REFUSED, "refused peer=%s "
		    "reason=\"%s\"", peer, dialback ? "extension op on a "
		    "dial-back" : "no longer in allow-from");
		close(fd);
		return true;
	}
	return ex.extension(code, fd, expsrv_conn_peer(c), in);
}

void
export_set_extension(export_extension_fn fn)
{
	ex.extension = fn;
}

static const struct expsrv_ops wrapped_ops = {
	.extension = w_extension,
	.pdu = w_pdu,
	.list = w_list,
	.import = w_import,
	.ep_type = w_ep_type,
	.submit = w_submit,
	.cancel = w_cancel,
	.release = w_release,
	.imported = w_imported,
};

/* ---- listeners ------------------------------------------------------- */

static void
sa_format(const struct sockaddr *sa, socklen_t len, char *host, size_t hostlen,
    char *port, size_t portlen)
{
	if (getnameinfo(sa, len, host, (socklen_t)hostlen, port,
	    (socklen_t)portlen, NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
		usbgw_strlcpy(host, "?", hostlen);
		usbgw_strlcpy(port, "?", portlen);
	}
}

void
export_adopt(int fd, const struct sockaddr *sa, socklen_t salen,
    const char *busid)
{
	char host[NI_MAXHOST], port[NI_MAXSERV];

	struct expsrv_conn *c;

	sa_format(sa, salen, host, sizeof(host), port, sizeof(port));
	log_debug("dial-back connection to %s:%s", host, port);
	if ((c = expsrv_accept(ex.srv, fd, sa, salen)) != NULL) {
		ex.adopted[ex.nadopted].id = expsrv_conn_id(c) + 1;
		usbgw_strlcpy(ex.adopted[ex.nadopted].busid, busid,
		    sizeof(ex.adopted[ex.nadopted].busid));
		ex.nadopted = (ex.nadopted + 1) % ADOPTED_MAX;
	}
}

void
export_set_tls(SSL_CTX *ctx)
{
	if (ctx != NULL)
		SSL_CTX_up_ref(ctx);
	SSL_CTX_free(ex.tls_ctx);
	ex.tls_ctx = ctx;
}

static void
tls_accept_free(struct tls_accept *ta)
{
	TAILQ_REMOVE(&ex.tls_pending, ta, entry);
	ex.ntls_pending--;
	free(ta);
}

/* The gateway's certificate verified: the engine takes the plain end. */
static void
tls_accept_ready(int fd, const struct tlsid_peer *peer,
    const struct tlsshim_pairing *pairing, void *arg)
{
	struct tls_accept *ta = arg;

	(void)pairing;
	/* a reload during the handshake may have taken the peer out */
	if (!aconf_allowed(ex.conf, (struct sockaddr *)&ta->ss)) {
		close(fd);
		export_audit_peer(ta->host, EXPORT_AK_REFUSED, "refused "
		    "peer=%s listen=%s reason=\"no longer in allow-from "
		    "(after the TLS handshake)\"", ta->host, ta->listen);
		tls_accept_free(ta);
		return;
	}
	log_info("connection from %s on %s: TLS, gateway certificate CN=%s "
	    "fingerprint %.16s...", ta->host, ta->listen, peer->name,
	    peer->fpr);
	expsrv_accept(ex.srv, fd, (struct sockaddr *)&ta->ss, ta->sslen);
	tls_accept_free(ta);
}

static void
tls_accept_fail(const char *why, int audit, void *arg)
{
	struct tls_accept *ta = arg;

	(void)audit;
	export_audit_peer(ta->host, EXPORT_AK_REFUSED, "refused peer=%s "
	    "listen=%s reason=\"tls required: %s\"", ta->host, ta->listen,
	    why);
	tls_accept_free(ta);
}

/* tls required: the handshake first, as TLS's client. */
static void
accept_tls(evutil_socket_t fd, const struct sockaddr *sa, socklen_t salen,
    const char *host, const struct listener *l)
{
	struct tls_accept *ta;

	if (ex.tls_ctx == NULL) {
		close(fd);
		export_audit_peer(host, EXPORT_AK_REFUSED, "refused peer=%s "
		    "listen=%s reason=\"tls required, but no TLS identity "
		    "was loaded at start\"", host, l->name);
		return;
	}
	ta = xcalloc(1, sizeof(*ta));
	memcpy(&ta->ss, sa, (size_t)salen < sizeof(ta->ss) ? (size_t)salen :
	    sizeof(ta->ss));
	ta->sslen = salen;
	usbgw_strlcpy(ta->host, host, sizeof(ta->host));
	usbgw_strlcpy(ta->listen, l->name, sizeof(ta->listen));
	TAILQ_INSERT_TAIL(&ex.tls_pending, ta, entry);
	ex.ntls_pending++;
	ta->sh = tlsshim_start(ex.base, ex.tls_ctx, fd, TLSSHIM_CLIENT,
	    EXPORT_TLS_MS, tls_accept_ready, tls_accept_fail, ta);
	if (ta->sh == NULL) {
		log_warnx("connection from %s: TLS: out of memory", host);
		tls_accept_free(ta);
	}
}

static void
accept_cb(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa,
    int salen, void *arg)
{
	struct listener *l = arg;
	char host[NI_MAXHOST], port[NI_MAXSERV];

	(void)lev;
	sa_format(sa, (socklen_t)salen, host, sizeof(host), port, sizeof(port));
	/* Before any byte is read: a refused peer learns nothing. */
	if (!aconf_allowed(ex.conf, sa)) {
		close(fd);
		export_audit_peer(host, EXPORT_AK_REFUSED, "refused peer=%s "
		    "listen=%s reason=\"not in allow-from\"", host, l->name);
		return;
	}
	if (expsrv_nconns(ex.srv) + ex.ntls_pending >=
	    ex.conf->max_connections) {
		close(fd);
		export_audit_peer(host, EXPORT_AK_REFUSED, "refused peer=%s "
		    "listen=%s reason=\"max-connections (%u)\"", host, l->name,
		    ex.conf->max_connections);
		return;
	}
	log_debug("connection from %s:%s on %s", host, port, l->name);
	/*
	 * An idle import (a disk nobody reads, an interrupt IN waiting)
	 * carries nothing: only keepalives find a gateway host that is gone
	 * (power, cable), which ends its imports (1.9.2): 10 s idle, 3
	 * probes 5 s apart, as the gateway's own claims (1.6).
	 */
	fd_keepalive(fd);
	if (ex.conf->tls_required) {
		accept_tls(fd, sa, (socklen_t)salen, host, l);
		return;
	}
	expsrv_accept(ex.srv, fd, sa, (socklen_t)salen);
}

static void
resume_cb(evutil_socket_t fd, short what, void *arg)
{
	unsigned i;

	(void)fd;
	(void)what;
	(void)arg;
	for (i = 0; i < ex.nl; i++)
		evconnlistener_enable(ex.l[i].lev);
}

/* EMFILE and the like: pause accepting for a second, not spin. */
static void
accept_error_cb(struct evconnlistener *lev, void *arg)
{
	struct timeval tv = { 1, 0 };
	struct listener *l = arg;
	unsigned i;

	(void)lev;
	log_warn("accept on %s (paused for 1 s)", l->name);
	for (i = 0; i < ex.nl; i++)
		evconnlistener_disable(ex.l[i].lev);
	evtimer_add(ex.resume_ev, &tv);
}

static int
listen_one(const char *host, const char *port, bool v6only)
{
	struct addrinfo hints, *res;
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof(ss);
	struct listener *l;
	char h[NI_MAXHOST], p[NI_MAXSERV];
	unsigned flags = LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE |
	    LEV_OPT_CLOSE_ON_EXEC;
	int r;

	if (ex.nl >= EXPORT_MAX_LISTENERS) {
		log_warnx("more than %d listeners", EXPORT_MAX_LISTENERS);
		return -1;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
	if ((r = getaddrinfo(host, port, &hints, &res)) != 0) {
		log_warnx("listen %s:%s: %s", host, port, gai_strerror(r));
		return -1;
	}
	if (v6only)
		flags |= LEV_OPT_BIND_IPV6ONLY;
	l = &ex.l[ex.nl];
	l->lev = evconnlistener_new_bind(ex.base, accept_cb, l, flags,
	    EXPORT_BACKLOG, res->ai_addr, (int)res->ai_addrlen);
	freeaddrinfo(res);
	if (l->lev == NULL) {
		log_warn("cannot listen on %s%s%s:%s", v6only ? "[" : "", host,
		    v6only ? "]" : "", port);
		return -1;
	}
	evconnlistener_set_error_cb(l->lev, accept_error_cb);
	if (getsockname(evconnlistener_get_fd(l->lev), (struct sockaddr *)&ss,
	    &sslen) == 0) {
		sa_format((struct sockaddr *)&ss, sslen, h, sizeof(h), p,
		    sizeof(p));
		snprintf(l->name, sizeof(l->name), ss.ss_family == AF_INET6 ?
		    "[%s]:%s" : "%s:%s", h, p);
	} else
		snprintf(l->name, sizeof(l->name), "%s:%s", host, port);
	ex.nl++;
	log_info("listening on %s", l->name);
	return 0;
}

int
export_listen(const struct net_addr *a)
{
	if (a->host[0] != '\0')
		return listen_one(a->host, a->port, false);
	/* '*': IPv4 and, where the host has it, IPv6. */
	if (listen_one("0.0.0.0", a->port, false) == -1)
		return -1;
	if (listen_one("::", a->port, true) == -1)
		log_warnx("no IPv6 listener on [::]:%s: IPv4 only", a->port);
	return 0;
}

unsigned
export_nlisteners(void)
{
	return ex.nl;
}

void
export_stop_listening(void)
{
	unsigned i;

	for (i = 0; i < ex.nl; i++)
		evconnlistener_free(ex.l[i].lev);
	ex.nl = 0;
	if (ex.resume_ev != NULL)
		evtimer_del(ex.resume_ev);
}

void
export_closeall(void)
{
	if (ex.srv != NULL)
		expsrv_closeall(ex.srv);
}

/* ---- life ------------------------------------------------------------- */

/* A round of libusb completions: their replies leave now (1.9.1). */
static void
export_after_usb(void *arg)
{
	(void)arg;
	if (ex.srv != NULL)
		expsrv_run_kicks(ex.srv);
}

int
export_init(struct event_base *base, const struct aconf *c,
    const struct expsrv_ops *backend, char *err, size_t errlen)
{
	static const struct hostlimit_spec spec = {
		.kinds = audit_kinds,
		.nkinds = EXPORT_AK_N,
		.refused = "connections refused",
		.per_key = "from one address",
		.by_prefix = true,
		.write = audit_summary,
	};
	struct expsrv_limits lim;

	ex.base = base;
	ex.conf = c;
	ex.backend = backend;
	TAILQ_INIT(&ex.tls_pending);
	if (audit_open(c->audit_log, err, errlen) == -1)
		return -1;
	ex.hl = hostlimit_new(base, &spec, NULL);
	hostlimit_limits(ex.hl, EXPORT_AUDIT_PER_HOST, EXPORT_AUDIT_TOTAL);
	expsrv_limits_default(&lim);
	ex.srv = expsrv_new(base, &wrapped_ops, NULL, &lim);
	usbloop_set_after(export_after_usb, NULL);
	ex.resume_ev = evtimer_new(base, resume_cb, NULL);
	return 0;
}

int
export_set_conf(const struct aconf *c, char *err, size_t errlen)
{
	struct import *im, *next;

	if (audit_open(c->audit_log, err, errlen) == -1)
		return -1;
	ex.conf = c;
	/* what a peer that allow-from no longer names holds ends now */
	for (im = TAILQ_FIRST(&ex.imports); im != NULL; im = next) {
		next = TAILQ_NEXT(im, entry);
		if (im->dialback || conn_allowed(im->conn))
			continue;
		export_audit("refused peer=%s busid=%s reason=\"no longer in "
		    "allow-from\"", im->peer, im->busid);
		expsrv_conn_close(im->conn, "peer no longer in allow-from");
	}
	return 0;
}

int
export_end_import(const char *busid, const char *why)
{
	struct import *im, *next;
	int		 n = 0;

	for (im = TAILQ_FIRST(&ex.imports); im != NULL; im = next) {
		next = TAILQ_NEXT(im, entry);
		if (strcmp(im->busid, busid) != 0)
			continue;
		export_audit("end peer=%s busid=%s reason=\"%s\"", im->peer,
		    im->busid, why);
		expsrv_conn_close(im->conn, why);
		n++;
	}
	return n;
}

void
export_shutdown(void)
{
	struct tls_accept *ta;

	usbloop_set_after(NULL, NULL);
	export_stop_listening();
	while (ex.ntls_pending > 0 &&
	    (ta = TAILQ_FIRST(&ex.tls_pending)) != NULL) {
		tlsshim_free(ta->sh);
		tls_accept_free(ta);
	}
	tlsshim_shutdown();		/* every pump: their connections end */
	export_set_tls(NULL);
	if (ex.srv != NULL)
		expsrv_free(ex.srv);
	ex.srv = NULL;
	hostlimit_free(ex.hl);		/* its summaries are audit lines */
	ex.hl = NULL;
	if (ex.resume_ev != NULL)
		event_free(ex.resume_ev);
	ex.resume_ev = NULL;
	if (ex.audit_fd != -1)
		close(ex.audit_fd);
	ex.audit_fd = -1;
}
