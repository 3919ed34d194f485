/*
 * Host names by forward-confirmed reverse DNS (hostname.h).
 *
 * Three kinds of object, all owned by the loop:
 *
 *	hn_entry	a cached answer: an address and its name, or "" for
 *			none, until it expires; in a hash table and on an
 *			LRU list.
 *	hn_pending	an address being resolved: one worker job, and the
 *			requests waiting for it.
 *	hostname_req	one caller's request.  Its one event is the timeout
 *			while it waits, and is re-armed at zero when its
 *			answer is known: every callback runs from its own
 *			event, so a callback may cancel any other request.
 *
 * The worker job (hn_job) is the thread's: it holds copies of what the
 * thread needs (the address, the resolver functions) and its results, and
 * never points at loop state the thread touches.  Its hn_pending pointer
 * is read on the loop only, in job_done(), which runs only while the
 * worker, and so the hn_pending, exists.
 */
#include <sys/queue.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "base/hostname.h"
#include "base/log.h"
#include "base/util.h"
#include "base/worker.h"

#define HN_BUCKETS_MIN	16
#define HN_BUCKETS_MAX	65536
#define HN_RAW_MAX	64		/* bytes of a bad PTR name logged */

/* An address as compared and cached: IPv4-mapped IPv6 is IPv4. */
struct hn_addr {
	int		family;		/* AF_INET or AF_INET6 */
	uint8_t		a[16];		/* 4 or 16 bytes used, rest 0 */
};

enum hn_result {
	HN_NAME,			/* confirmed */
	HN_NONAME,			/* a definite no */
	HN_TRANSIENT,			/* the resolver failed for now */
};

struct hn_entry {
	LIST_ENTRY(hn_entry)	 bucket;
	TAILQ_ENTRY(hn_entry)	 lru;		/* least recent first */
	struct hn_addr		 addr;
	uint64_t		 expires;	/* ms, hn_now() */
	char			 name[HOSTNAME_MAX + 1];	/* "": none */
};
LIST_HEAD(hn_bucket, hn_entry);
TAILQ_HEAD(hn_entries, hn_entry);

TAILQ_HEAD(hostname_reqs, hostname_req);

struct hn_pending {
	TAILQ_ENTRY(hn_pending)	 entry;
	struct hn_addr		 addr;
	struct hostname_reqs	 waiting;
};
TAILQ_HEAD(hn_pendings, hn_pending);

struct hn_job {
	struct hn_pending		*p;		/* loop side only */
	struct hn_addr			 addr;
	uint32_t			 scope;		/* IPv6 scope id */
	hostname_getnameinfo_fn		 gni;
	hostname_getaddrinfo_fn		 gai;
	hostname_freeaddrinfo_fn	 fai;
	/* Written by the thread. */
	enum hn_result			 result;
	const char			*why;		/* static text */
	int				 gai_err;	/* or 0 */
	char				 name[HOSTNAME_MAX + 1];
	char				 raw[HN_RAW_MAX + 1];	/* bad name */
};

struct hostname_req {
	TAILQ_ENTRY(hostname_req) all;
	TAILQ_ENTRY(hostname_req) wait;		/* on p->waiting */
	struct hn_pending	*p;		/* NULL: not waiting */
	struct event		*ev;		/* timeout, then answer */
	int			 answered;
	char			 name[HOSTNAME_MAX + 1];	/* "": none */
	struct hn_addr		 addr;
	hostname_cb		 cb;
	void			*arg;
};

static struct {
	int			 running;
	struct event_base	*base;
	struct hostname_opts	 o;
	struct worker		*w;		/* started on first need */
	int			 worker_failed;
	struct hn_bucket	*buckets;
	size_t			 nbuckets;	/* a power of 2 */
	uint32_t		 seed;
	struct hn_entries	 lru;
	unsigned		 ncached;
	struct hn_pendings	 pending;
	unsigned		 npending;
	struct hostname_reqs	 reqs;
} H;

/* Test hooks: set before or after hostname_init(), kept across it. */
static hostname_getnameinfo_fn	 resolver_gni;
static hostname_getaddrinfo_fn	 resolver_gai;
static hostname_freeaddrinfo_fn	 resolver_fai;
static uint64_t			(*hn_clock)(void);

static void	req_cb(evutil_socket_t, short, void *);

static uint64_t
hn_now(void)
{
	return hn_clock != NULL ? hn_clock() : now_usec() / 1000;
}

static struct timeval
ms_timeval(unsigned ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	return tv;
}

/* --- addresses (pure: used on the threads too) ----------------------- */

static int
addr_from_sa(const struct sockaddr *sa, socklen_t len, struct hn_addr *a,
    uint32_t *scope)
{
	const struct sockaddr_in *sin;
	const struct sockaddr_in6 *sin6;

	memset(a, 0, sizeof(*a));
	*scope = 0;
	if (sa == NULL)
		return -1;
	if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(*sin)) {
		sin = (const struct sockaddr_in *)sa;
		a->family = AF_INET;
		memcpy(a->a, &sin->sin_addr, 4);
		return 0;
	}
	if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(*sin6)) {
		sin6 = (const struct sockaddr_in6 *)sa;
		if (IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr)) {
			a->family = AF_INET;
			memcpy(a->a, sin6->sin6_addr.s6_addr + 12, 4);
			return 0;
		}
		a->family = AF_INET6;
		memcpy(a->a, &sin6->sin6_addr, 16);
		*scope = sin6->sin6_scope_id;
		return 0;
	}
	return -1;
}

static socklen_t
addr_to_sa(const struct hn_addr *a, uint32_t scope,
    struct sockaddr_storage *ss)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (a->family == AF_INET) {
		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr, a->a, 4);
		return sizeof(*sin);
	}
	sin6->sin6_family = AF_INET6;
	memcpy(&sin6->sin6_addr, a->a, 16);
	sin6->sin6_scope_id = scope;
	return sizeof(*sin6);
}

static int
addr_equal(const struct hn_addr *x, const struct hn_addr *y)
{
	return x->family == y->family && memcmp(x->a, y->a, sizeof(x->a)) == 0;
}

static const char *
addr_text(const struct hn_addr *a, char *buf, size_t len)
{
	if (inet_ntop(a->family, a->a, buf, (socklen_t)len) == NULL)
		usbgw_strlcpy(buf, "?", len);
	return buf;
}

/* --- names ------------------------------------------------------------ */

int
hostname_normalize(const char *in, size_t len, char *out, size_t outsz)
{
	struct in_addr ia;
	size_t i, label = 0;
	int digits = 1;
	char c;

	if (outsz == 0)
		return -1;
	out[0] = '\0';
	if (len > 0 && in[len - 1] == '.')
		len--;
	if (len == 0 || len > HOSTNAME_MAX || len >= outsz)
		return -1;
	for (i = 0; i < len; i++) {
		c = in[i];
		if (c == '.') {
			if (label == 0 || in[i - 1] == '-')
				goto bad;
			label = 0;
			digits = 1;
			out[i] = c;
			continue;
		}
		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-'))
			goto bad;
		if (c == '-' && label == 0)
			goto bad;
		if (c < '0' || c > '9')
			digits = 0;
		if (++label > HOSTNAME_LABEL_MAX)
			goto bad;
		out[i] = c;
	}
	if (label == 0 || in[len - 1] == '-' || digits)
		goto bad;
	out[len] = '\0';
	if (inet_aton(out, &ia) != 0)
		goto bad;
	return 0;
bad:
	out[0] = '\0';
	return -1;
}

/* --- the check, on a worker thread ------------------------------------ */

static void
job_fail(struct hn_job *j, int err, const char *why)
{
	j->gai_err = err;
	j->why = why;
	switch (err) {
	case EAI_AGAIN:
	case EAI_FAIL:
	case EAI_MEMORY:
	case EAI_SYSTEM:
	case EAI_OVERFLOW:
		j->result = HN_TRANSIENT;
		break;
	default:
		j->result = HN_NONAME;
		break;
	}
}

static void
job_run(void *arg)
{
	struct hn_job *j = arg;
	struct sockaddr_storage ss;
	struct addrinfo hints, *res = NULL, *ai;
	struct hn_addr a;
	char host[NI_MAXHOST];
	socklen_t sslen;
	uint32_t scope;
	int rv;

	sslen = addr_to_sa(&j->addr, j->scope, &ss);
	memset(host, 0, sizeof(host));
	rv = j->gni((struct sockaddr *)&ss, sslen, host, sizeof(host), NULL, 0,
	    NI_NAMEREQD);
	if (rv != 0) {
		job_fail(j, rv, "no reverse (PTR) name");
		return;
	}
	host[sizeof(host) - 1] = '\0';
	if (hostname_normalize(host, strlen(host), j->name,
	    sizeof(j->name)) != 0) {
		usbgw_strlcpy(j->raw, host, sizeof(j->raw));
		j->result = HN_NONAME;
		j->why = "its reverse name is not a host name";
		return;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	rv = j->gai(j->name, NULL, &hints, &res);
	if (rv != 0) {
		job_fail(j, rv, "its reverse name does not resolve");
		return;
	}
	j->result = HN_NONAME;
	j->why = "its reverse name resolves to other addresses";
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		if (addr_from_sa(ai->ai_addr, ai->ai_addrlen, &a, &scope) == 0 &&
		    addr_equal(&a, &j->addr)) {
			j->result = HN_NAME;
			j->why = NULL;
			break;
		}
	}
	if (res != NULL)
		j->fai(res);
}

/* --- the cache ---------------------------------------------------------- */

static struct hn_bucket *
cache_bucket(const struct hn_addr *a)
{
	uint32_t h = 2166136261u ^ H.seed;
	size_t i;

	h = (h ^ (uint32_t)a->family) * 16777619u;
	for (i = 0; i < sizeof(a->a); i++)
		h = (h ^ a->a[i]) * 16777619u;
	h ^= h >> 16;
	return &H.buckets[h & (H.nbuckets - 1)];
}

static void
cache_remove(struct hn_entry *e)
{
	LIST_REMOVE(e, bucket);
	TAILQ_REMOVE(&H.lru, e, lru);
	H.ncached--;
	free(e);
}

static void
cache_clear(void)
{
	struct hn_entry *e;

	while ((e = TAILQ_FIRST(&H.lru)) != NULL)
		cache_remove(e);
}

static void
cache_trim(unsigned max)
{
	while (H.ncached > max)
		cache_remove(TAILQ_FIRST(&H.lru));
}

/* A fresh answer for a, made most recent; an expired one goes. */
static struct hn_entry *
cache_find(const struct hn_addr *a)
{
	struct hn_entry *e;

	LIST_FOREACH(e, cache_bucket(a), bucket)
		if (addr_equal(&e->addr, a))
			break;
	if (e == NULL)
		return NULL;
	if (hn_now() >= e->expires) {
		cache_remove(e);
		return NULL;
	}
	TAILQ_REMOVE(&H.lru, e, lru);
	TAILQ_INSERT_TAIL(&H.lru, e, lru);
	return e;
}

static void
cache_put(const struct hn_addr *a, const char *name, unsigned lifetime_ms)
{
	struct hn_entry *e;

	LIST_FOREACH(e, cache_bucket(a), bucket)
		if (addr_equal(&e->addr, a)) {
			cache_remove(e);
			break;
		}
	cache_trim(H.o.max_cache - 1);
	e = xcalloc(1, sizeof(*e));
	e->addr = *a;
	e->expires = hn_now() + lifetime_ms;
	usbgw_strlcpy(e->name, name, sizeof(e->name));
	LIST_INSERT_HEAD(cache_bucket(a), e, bucket);
	TAILQ_INSERT_TAIL(&H.lru, e, lru);
	H.ncached++;
}

/* --- requests ------------------------------------------------------------ */

static void
req_free(struct hostname_req *r)
{
	if (r->p != NULL)
		TAILQ_REMOVE(&r->p->waiting, r, wait);
	TAILQ_REMOVE(&H.reqs, r, all);
	event_free(r->ev);
	free(r);
}

/* The answer is known: deliver it from r's own event, at once. */
static void
req_answer(struct hostname_req *r, const char *name)
{
	struct timeval tv = { 0, 0 };

	r->answered = 1;
	usbgw_strlcpy(r->name, name != NULL ? name : "", sizeof(r->name));
	evtimer_add(r->ev, &tv);	/* (replaces the timeout) */
}

static void
req_cb(evutil_socket_t fd, short what, void *arg)
{
	struct hostname_req *r = arg;
	hostname_cb cb = r->cb;
	void *cbarg = r->arg;
	char name[HOSTNAME_MAX + 1], ab[INET6_ADDRSTRLEN];

	if (r->answered)
		usbgw_strlcpy(name, r->name, sizeof(name));
	else {
		name[0] = '\0';
		log_debug("hostname: %s: no answer within %u ms, no name for "
		    "now", addr_text(&r->addr, ab, sizeof(ab)),
		    H.o.timeout_ms);
	}
	req_free(r);
	cb(name[0] != '\0' ? name : NULL, cbarg);
}

/* --- lookups on the worker ------------------------------------------------ */

static void
job_log(const struct hn_job *j)
{
	char ab[INET6_ADDRSTRLEN], raw[4 * HN_RAW_MAX + 1];

	addr_text(&j->addr, ab, sizeof(ab));
	if (j->result == HN_NAME)
		log_debug("hostname: %s is %s", ab, j->name);
	else if (j->raw[0] != '\0')
		log_info("hostname: %s: no name: %s (\"%s\")", ab, j->why,
		    log_escape(raw, sizeof(raw), j->raw, strlen(j->raw)));
	else if (j->gai_err != 0)
		log_debug("hostname: %s: no name: %s%s%s (%s)", ab, j->why,
		    j->name[0] != '\0' ? ", " : "", j->name,
		    gai_strerror(j->gai_err));
	else
		log_info("hostname: %s: no name: %s (%s)", ab, j->why, j->name);
}

static void
job_done(void *arg)
{
	struct hn_job *j = arg;
	struct hn_pending *p = j->p;
	struct hostname_req *r;
	const char *name = j->result == HN_NAME ? j->name : "";
	unsigned life = H.o.ttl_ms;

	job_log(j);
	if (j->result == HN_TRANSIENT && life > HOSTNAME_TRANSIENT_MS)
		life = HOSTNAME_TRANSIENT_MS;
	if (H.o.enabled)
		cache_put(&j->addr, name, life);
	while ((r = TAILQ_FIRST(&p->waiting)) != NULL) {
		TAILQ_REMOVE(&p->waiting, r, wait);
		r->p = NULL;
		req_answer(r, name);
	}
	TAILQ_REMOVE(&H.pending, p, entry);
	H.npending--;
	free(p);
	free(j);
}

static struct hn_pending *
pending_find(const struct hn_addr *a)
{
	struct hn_pending *p;

	TAILQ_FOREACH(p, &H.pending, entry)
		if (addr_equal(&p->addr, a))
			return p;
	return NULL;
}

static struct hn_pending *
pending_start(const struct hn_addr *a, uint32_t scope)
{
	struct hn_pending *p;
	struct hn_job *j;
	char ab[INET6_ADDRSTRLEN];
	unsigned n;

	if (H.npending >= H.o.max_pending) {
		log_debug("hostname: %s: %u lookups running already, no name "
		    "for now", addr_text(a, ab, sizeof(ab)), H.npending);
		return NULL;
	}
	if (H.w == NULL && !H.worker_failed) {
		n = H.o.max_pending < HOSTNAME_THREADS ? H.o.max_pending :
		    HOSTNAME_THREADS;
		if ((H.w = worker_new(H.base, "hostname: lookups", n)) == NULL) {
			log_warnx("hostname: no thread for lookups: hosts "
			    "have no names");
			H.worker_failed = 1;
		}
	}
	if (H.w == NULL)
		return NULL;

	p = xcalloc(1, sizeof(*p));
	p->addr = *a;
	TAILQ_INIT(&p->waiting);
	TAILQ_INSERT_TAIL(&H.pending, p, entry);
	H.npending++;

	j = xcalloc(1, sizeof(*j));
	j->p = p;
	j->addr = *a;
	j->scope = scope;
	j->gni = resolver_gni != NULL ? resolver_gni : getnameinfo;
	j->gai = resolver_gai != NULL ? resolver_gai : getaddrinfo;
	j->fai = resolver_fai != NULL ? resolver_fai : freeaddrinfo;
	worker_submit(H.w, job_run, job_done, free, j);
	return p;
}

/* --- the interface ----------------------------------------------------- */

static void
opts_set(const struct hostname_opts *o)
{
	H.o = *o;
	if (H.o.max_cache == 0)
		H.o.max_cache = HOSTNAME_DEFAULT_MAX_CACHE;
	if (H.o.max_pending == 0)
		H.o.max_pending = HOSTNAME_DEFAULT_MAX_PENDING;
}

int
hostname_init(struct event_base *base, const struct hostname_opts *o)
{
	size_t i;

	if (H.running) {
		log_warnx("hostname: already started");
		return -1;
	}
	memset(&H, 0, sizeof(H));
	H.base = base;
	opts_set(o);
	TAILQ_INIT(&H.lru);
	TAILQ_INIT(&H.pending);
	TAILQ_INIT(&H.reqs);
	for (H.nbuckets = HN_BUCKETS_MIN; H.nbuckets < H.o.max_cache &&
	    H.nbuckets < HN_BUCKETS_MAX; H.nbuckets *= 2)
		;
	H.buckets = xcalloc(H.nbuckets, sizeof(*H.buckets));
	for (i = 0; i < H.nbuckets; i++)
		LIST_INIT(&H.buckets[i]);
	if (getrandom(&H.seed, sizeof(H.seed), GRND_NONBLOCK) !=
	    (ssize_t)sizeof(H.seed))
		H.seed = (uint32_t)now_usec() ^ (uint32_t)getpid();
	H.running = 1;
	return 0;
}

void
hostname_reconfigure(const struct hostname_opts *o)
{
	struct hn_entry *e;
	uint64_t until;

	if (!H.running)
		return;
	opts_set(o);
	if (!H.o.enabled) {
		cache_clear();
		return;
	}
	until = hn_now() + H.o.ttl_ms;
	TAILQ_FOREACH(e, &H.lru, lru)
		if (e->expires > until)
			e->expires = until;
	cache_trim(H.o.max_cache);
}

void
hostname_shutdown(void)
{
	struct hostname_req *r;
	struct hn_pending *p;
	unsigned n = 0;

	if (!H.running)
		return;
	H.running = 0;
	worker_free(H.w);		/* no job_done() after this */
	H.w = NULL;
	while ((r = TAILQ_FIRST(&H.reqs)) != NULL) {
		req_free(r);
		n++;
	}
	if (n > 0)
		log_debug("hostname: %u lookups outstanding at shutdown", n);
	while ((p = TAILQ_FIRST(&H.pending)) != NULL) {
		TAILQ_REMOVE(&H.pending, p, entry);
		free(p);
	}
	H.npending = 0;
	cache_clear();
	free(H.buckets);
	H.buckets = NULL;
}

struct hostname_req *
hostname_lookup(const struct sockaddr *sa, socklen_t len, hostname_cb cb,
    void *arg)
{
	struct hostname_req *r;
	struct hn_entry *e;
	struct hn_pending *p;
	struct timeval tv;
	uint32_t scope;

	if (!H.running)
		return NULL;
	r = xcalloc(1, sizeof(*r));
	r->cb = cb;
	r->arg = arg;
	if ((r->ev = evtimer_new(H.base, req_cb, r)) == NULL)
		fatalx("hostname: evtimer_new");
	TAILQ_INSERT_TAIL(&H.reqs, r, all);

	if (addr_from_sa(sa, len, &r->addr, &scope) != 0 || !H.o.enabled) {
		req_answer(r, NULL);
		return r;
	}
	if ((e = cache_find(&r->addr)) != NULL) {
		req_answer(r, e->name);
		return r;
	}
	if ((p = pending_find(&r->addr)) == NULL &&
	    (p = pending_start(&r->addr, scope)) == NULL) {
		req_answer(r, NULL);
		return r;
	}
	r->p = p;
	TAILQ_INSERT_TAIL(&p->waiting, r, wait);
	tv = ms_timeval(H.o.timeout_ms);
	evtimer_add(r->ev, &tv);
	return r;
}

void
hostname_cancel(struct hostname_req *r)
{
	if (r != NULL)
		req_free(r);
}

void
hostname_set_resolver(hostname_getnameinfo_fn gni, hostname_getaddrinfo_fn gai,
    hostname_freeaddrinfo_fn fai)
{
	resolver_gni = gni;
	resolver_gai = gai;
	resolver_fai = fai;
}

void
hostname_set_clock(uint64_t (*fn)(void))
{
	hn_clock = fn;
}

void
hostname_stats(unsigned *ncached, unsigned *npending)
{
	if (ncached != NULL)
		*ncached = H.ncached;
	if (npending != NULL)
		*npending = H.npending;
}
