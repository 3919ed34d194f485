/*
 * hostname.c: forward-confirmed reverse DNS off the loop, cached.
 *
 * A fake resolver (hostname_set_resolver) plays DNS: a confirmed name, a
 * PTR whose name resolves elsewhere, a PTR with bad bytes, a numeric PTR,
 * no PTR, a temporary failure, a slow server; a fake clock ages the cache.
 * Checked: every callback exactly once, never inside hostname_lookup(),
 * never after cancel; the loop keeps running while a lookup hangs; one
 * resolver call per address within the ttl and again after it; at most
 * max_pending addresses resolving; the LRU cache bound; shutdown with
 * lookups queued, running and stuck.  Then the system resolver on
 * 127.0.0.1, when /etc/hosts names it localhost.
 */
#include <sys/socket.h>
#include <sys/types.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <netdb.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "base/hostname.h"
#include "base/log.h"
#include "tap.h"
#include "base/util.h"
#include "base/worker.h"

/* --- the fake DNS ------------------------------------------------------ */

struct fake_ptr {
	const char	*addr;
	const char	*name;		/* NULL: fails with err */
	int		 err;
};

static const struct fake_ptr ptrs[] = {
	{ "10.0.0.1",	 "VDI01.Example.ORG.", 0 },
	{ "10.0.0.2",	 "liar.example.org", 0 },
	{ "10.0.0.3",	 "bad\x1b[31mname.example.org", 0 },
	{ "10.0.0.4",	 NULL, EAI_NONAME },
	{ "10.0.0.5",	 NULL, EAI_AGAIN },
	{ "10.0.0.6",	 "10.0.0.6", 0 },
	{ "10.0.0.7",	 "gone.example.org", 0 },
	{ "10.0.0.8",	 "multi.example.org", 0 },
	{ "10.0.0.9",	 "a.example.org", 0 },
	{ "10.0.0.10",	 "b.example.org", 0 },
	{ "10.0.0.11",	 "c.example.org", 0 },
	{ "2001:db8::1", "v6host.example.org", 0 },
};

struct fake_fwd {
	const char	*name;
	const char	*addrs[4];
};

static const struct fake_fwd fwds[] = {
	{ "vdi01.example.org",	{ "10.0.0.1" } },
	{ "liar.example.org",	{ "10.0.0.99", "2001:db8::99" } },
	{ "multi.example.org",	{ "2001:db8::8", "10.0.0.80", "10.0.0.8" } },
	{ "v6host.example.org",	{ "10.0.0.1", "2001:db8::1" } },
	{ "a.example.org",	{ "10.0.0.9" } },
	{ "b.example.org",	{ "10.0.0.10" } },
	{ "c.example.org",	{ "10.0.0.11" } },
};

/*
 * 10.0.1.N is slow: its PTR answer "slowN.example.org" comes after
 * slow_ms, and resolves to 10.0.1.N.
 */
static atomic_uint	slow_ms;
static atomic_int	slow_running, slow_finished;
static atomic_int	ptr_calls[nitems(ptrs)];
static atomic_int	slow_calls[256];
static char		last_fwd[256];		/* (written by a thread) */

static int
fake_gni(const struct sockaddr *sa, socklen_t salen, char *host,
    socklen_t hostlen, char *serv, socklen_t servlen, int flags)
{
	char text[INET6_ADDRSTRLEN];
	unsigned n;
	size_t i;

	if (flags != NI_NAMEREQD || serv != NULL || servlen != 0)
		return EAI_BADFLAGS;
	if (sa->sa_family == AF_INET && salen == sizeof(struct sockaddr_in))
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr,
		    text, sizeof(text));
	else if (sa->sa_family == AF_INET6 &&
	    salen == sizeof(struct sockaddr_in6))
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->
		    sin6_addr, text, sizeof(text));
	else
		return EAI_FAMILY;
	if (sscanf(text, "10.0.1.%u", &n) == 1 && n < 256) {
		atomic_fetch_add(&slow_calls[n], 1);
		atomic_fetch_add(&slow_running, 1);
		usleep(atomic_load(&slow_ms) * 1000);
		snprintf(host, hostlen, "slow%u.example.org", n);
		atomic_fetch_sub(&slow_running, 1);
		atomic_fetch_add(&slow_finished, 1);
		return 0;
	}
	for (i = 0; i < nitems(ptrs); i++) {
		if (strcmp(ptrs[i].addr, text) != 0)
			continue;
		atomic_fetch_add(&ptr_calls[i], 1);
		if (ptrs[i].name == NULL)
			return ptrs[i].err;
		snprintf(host, hostlen, "%s", ptrs[i].name);
		return 0;
	}
	return EAI_NONAME;
}

static struct addrinfo *
fake_ai(const char *text)
{
	struct addrinfo *ai;
	struct sockaddr_in *sin;
	struct sockaddr_in6 *sin6;

	ai = xcalloc(1, sizeof(*ai) + sizeof(struct sockaddr_storage));
	ai->ai_addr = (struct sockaddr *)(ai + 1);
	ai->ai_socktype = SOCK_STREAM;
	if (strchr(text, ':') != NULL) {
		sin6 = (struct sockaddr_in6 *)ai->ai_addr;
		sin6->sin6_family = AF_INET6;
		inet_pton(AF_INET6, text, &sin6->sin6_addr);
		ai->ai_family = AF_INET6;
		ai->ai_addrlen = sizeof(*sin6);
	} else {
		sin = (struct sockaddr_in *)ai->ai_addr;
		sin->sin_family = AF_INET;
		inet_pton(AF_INET, text, &sin->sin_addr);
		ai->ai_family = AF_INET;
		ai->ai_addrlen = sizeof(*sin);
	}
	return ai;
}

static int
fake_gai(const char *name, const char *serv, const struct addrinfo *hints,
    struct addrinfo **res)
{
	struct addrinfo *head = NULL, **tail = &head;
	char text[32];
	unsigned n;
	size_t i, k;

	*res = NULL;
	snprintf(last_fwd, sizeof(last_fwd), "%s", name);
	if (sscanf(name, "slow%u.example.org", &n) == 1) {
		snprintf(text, sizeof(text), "10.0.1.%u", n);
		*res = fake_ai(text);
		return 0;
	}
	for (i = 0; i < nitems(fwds); i++) {
		if (strcmp(fwds[i].name, name) != 0)
			continue;
		for (k = 0; k < nitems(fwds[i].addrs) &&
		    fwds[i].addrs[k] != NULL; k++) {
			*tail = fake_ai(fwds[i].addrs[k]);
			tail = &(*tail)->ai_next;
		}
		*res = head;
		return 0;
	}
	return EAI_NONAME;
}

static void
fake_fai(struct addrinfo *ai)
{
	struct addrinfo *next;

	for (; ai != NULL; ai = next) {
		next = ai->ai_next;
		free(ai);
	}
}

static uint64_t fake_now = 1000000;

static uint64_t
fake_clock(void)
{
	return fake_now;
}

static int
calls(const char *addr)
{
	size_t i;

	for (i = 0; i < nitems(ptrs); i++)
		if (strcmp(ptrs[i].addr, addr) == 0)
			return atomic_load(&ptr_calls[i]);
	return -1;
}

/* --- the loop and the callers ------------------------------------------ */

static struct event_base *base;
static struct event *tick_ev;
static unsigned ticks;
static int sync_calls;		/* callbacks inside hostname_lookup() */
static int in_lookup;

struct res {
	int		 called;
	int		 null;
	char		 name[HOSTNAME_MAX + 1];
	uint64_t	 at_ms;
	struct hostname_req	*req;
	struct res	*cancel;	/* cancelled by this one's callback */
};

static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	ticks++;
}

static void
res_cb(const char *name, void *arg)
{
	struct res *r = arg;

	if (in_lookup)
		sync_calls++;
	r->called++;
	r->null = name == NULL;
	snprintf(r->name, sizeof(r->name), "%s", name != NULL ? name : "");
	r->at_ms = now_usec() / 1000;
	r->req = NULL;
	if (r->cancel != NULL && r->cancel->req != NULL) {
		hostname_cancel(r->cancel->req);
		r->cancel->req = NULL;
	}
}

static socklen_t
mksa(const char *text, struct sockaddr_storage *ss)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (strchr(text, ':') != NULL) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(40000);
		inet_pton(AF_INET6, text, &sin6->sin6_addr);
		return sizeof(*sin6);
	}
	sin->sin_family = AF_INET;
	sin->sin_port = htons(40000);
	inet_pton(AF_INET, text, &sin->sin_addr);
	return sizeof(*sin);
}

static struct hostname_req *
look(const char *addr, struct res *r)
{
	struct sockaddr_storage ss;
	socklen_t len = mksa(addr, &ss);

	memset(r, 0, sizeof(*r));
	in_lookup = 1;
	r->req = hostname_lookup((struct sockaddr *)&ss, len, res_cb, r);
	in_lookup = 0;
	return r->req;
}

static void
loop_for(unsigned ms)
{
	uint64_t end = now_usec() / 1000 + ms;

	while (now_usec() / 1000 < end)
		event_base_loop(base, EVLOOP_ONCE);
}

static void
wait_for(struct res *r, unsigned max_ms)
{
	uint64_t end = now_usec() / 1000 + max_ms;

	while (!r->called && now_usec() / 1000 < end)
		event_base_loop(base, EVLOOP_ONCE);
}

static void
wait_idle(unsigned max_ms)
{
	uint64_t end = now_usec() / 1000 + max_ms;
	unsigned np = 1;

	for (;;) {
		hostname_stats(NULL, &np);
		if (np == 0 || now_usec() / 1000 >= end)
			break;
		event_base_loop(base, EVLOOP_ONCE);
	}
}

/* Look addr up and wait for the answer: its name, or "(null)". */
static const char *
resolve(const char *addr, struct res *r)
{
	look(addr, r);
	ok(r->req != NULL && r->called == 0, "%s: a request, no callback yet",
	    addr);
	wait_for(r, 3000);
	is_int(r->called, 1, "%s: one callback", addr);
	return r->null ? "(null)" : r->name;
}

static struct hostname_opts
opts(unsigned timeout_ms, unsigned max_cache, unsigned max_pending)
{
	struct hostname_opts o;

	memset(&o, 0, sizeof(o));
	o.enabled = 1;
	o.ttl_ms = 60000;
	o.timeout_ms = timeout_ms;
	o.max_cache = max_cache;
	o.max_pending = max_pending;
	return o;
}

/* --- the tests ----------------------------------------------------------- */

static void
test_normalize(void)
{
	static const struct {
		const char	*in;
		const char	*out;		/* NULL: refused */
	} t[] = {
		{ "vdi01", "vdi01" },
		{ "VDI01.Example.ORG.", "vdi01.example.org" },
		{ "localhost", "localhost" },
		{ "a-b.c-d.example", "a-b.c-d.example" },
		{ "1.2.3.example", "1.2.3.example" },
		{ "xn--bcher-kva.example", "xn--bcher-kva.example" },
		{ "0x7f", NULL },		/* inet_aton: 0.0.0.127 */
		{ "0x7f.0x1", NULL },
		{ "10.1.2.3", NULL },
		{ "10.1.2.3.", NULL },
		{ "123", NULL },
		{ "host.123", NULL },
		{ "", NULL },
		{ ".", NULL },
		{ "..", NULL },
		{ "a..b", NULL },
		{ ".a", NULL },
		{ "a.b..", NULL },
		{ "-a.example", NULL },
		{ "a-.example", NULL },
		{ "a.example-", NULL },
		{ "a_b.example", NULL },
		{ "a b.example", NULL },
		{ "a\tb", NULL },
		{ "a\nb", NULL },
		{ "a\x1b[31m", NULL },
		{ "a'b", NULL },
		{ "a;b", NULL },
		{ "a%b", NULL },
		{ "a/b", NULL },
		{ "a\\b", NULL },
		{ "\xc3\xa9t\xc3\xa9", NULL },
		{ "*.example", NULL },
	};
	char out[HOSTNAME_MAX + 1], big[600];
	size_t i;
	int rv;

	for (i = 0; i < nitems(t); i++) {
		memset(out, 'x', sizeof(out));
		rv = hostname_normalize(t[i].in, strlen(t[i].in), out,
		    sizeof(out));
		if (t[i].out != NULL) {
			is_int(rv, 0, "normalize: \"%s\" accepted", t[i].in);
			is_str(out, t[i].out, "normalize: \"%s\"", t[i].in);
		} else {
			ok(rv == -1 && out[0] == '\0', "normalize: item %zu "
			    "refused, out \"\"", i);
		}
	}
	ok(hostname_normalize("ab\0cd", 5, out, sizeof(out)) == -1,
	    "normalize: a NUL inside refused");
	ok(hostname_normalize("abcd", 2, out, sizeof(out)) == 0 &&
	    strcmp(out, "ab") == 0, "normalize: only len bytes read");

	/* Labels up to 63, names up to 253 (254 with the trailing dot). */
	memset(big, 'a', 63);
	big[63] = '\0';
	ok(hostname_normalize(big, 63, out, sizeof(out)) == 0,
	    "normalize: 63-byte label");
	big[63] = 'a';
	ok(hostname_normalize(big, 64, out, sizeof(out)) == -1,
	    "normalize: 64-byte label refused");
	for (i = 0; i < 253; i++)
		big[i] = i % 64 == 63 ? '.' : 'a';
	big[253] = '.';
	ok(hostname_normalize(big, 253, out, sizeof(out)) == 0 &&
	    strlen(out) == 253, "normalize: 253 bytes");
	ok(hostname_normalize(big, 254, out, sizeof(out)) == 0 &&
	    strlen(out) == 253, "normalize: 253 bytes and the root dot");
	big[253] = 'a';
	ok(hostname_normalize(big, 254, out, sizeof(out)) == -1,
	    "normalize: 254 bytes refused");
	ok(hostname_normalize("example", 7, out, 7) == -1,
	    "normalize: no room for the NUL: refused");
	ok(hostname_normalize("example", 7, out, 8) == 0,
	    "normalize: room just enough");
}

static void
test_answers(void)
{
	struct hostname_opts o = opts(1000, 64, 8);
	struct res r;
	struct sockaddr_un_like {
		sa_family_t	family;
		char		path[32];
	} un = { AF_UNIX, "/tmp/x" };

	look("10.0.0.1", &r);
	ok(r.req == NULL, "no request before hostname_init");
	ok(hostname_init(base, &o) == 0, "hostname_init");
	ok(hostname_init(base, &o) == -1, "a second hostname_init refused");

	is_str(resolve("10.0.0.1", &r), "vdi01.example.org",
	    "confirmed: lowercase, no trailing dot");
	is_str(last_fwd, "vdi01.example.org", "the forward lookup was of the "
	    "normalized name");
	is_int(calls("10.0.0.1"), 1, "one PTR lookup");
	is_str(resolve("10.0.0.1", &r), "vdi01.example.org", "cached answer");
	is_int(calls("10.0.0.1"), 1, "still one PTR lookup");
	is_str(resolve("::ffff:10.0.0.1", &r), "vdi01.example.org",
	    "an IPv4-mapped peer is its IPv4 address (and its cache entry)");
	is_int(calls("10.0.0.1"), 1, "still one PTR lookup");
	is_str(resolve("2001:db8::1", &r), "v6host.example.org", "IPv6");
	is_str(resolve("10.0.0.8", &r), "multi.example.org",
	    "confirmed by the third address of three");
	is_str(resolve("10.0.0.2", &r), "(null)",
	    "a PTR name resolving to other addresses: no name");
	is_str(resolve("10.0.0.3", &r), "(null)", "a PTR with bad bytes: no "
	    "name");
	is_str(resolve("10.0.0.6", &r), "(null)", "a numeric PTR: no name");
	is_str(resolve("10.0.0.7", &r), "(null)", "a PTR name that does not "
	    "resolve: no name");
	is_str(resolve("10.0.0.4", &r), "(null)", "no PTR: no name");
	is_str(resolve("10.0.0.5", &r), "(null)", "temporary failure: no name");
	is_int(sync_calls, 0, "no callback ran inside hostname_lookup()");

	/* Negative answers are cached too; a temporary failure not as long. */
	is_str(resolve("10.0.0.2", &r), "(null)", "no name again");
	is_int(calls("10.0.0.2"), 1, "from the cache");
	is_str(resolve("10.0.0.5", &r), "(null)", "temporary failure again");
	is_int(calls("10.0.0.5"), 1, "from the cache");
	fake_now += HOSTNAME_TRANSIENT_MS;
	is_str(resolve("10.0.0.5", &r), "(null)", "temporary failure, later");
	is_int(calls("10.0.0.5"), 2, "asked again after HOSTNAME_TRANSIENT_MS");
	is_str(resolve("10.0.0.4", &r), "(null)", "no PTR, later");
	is_int(calls("10.0.0.4"), 1, "still cached: a definite answer lives "
	    "the ttl");

	/* Expiry. */
	fake_now += o.ttl_ms - HOSTNAME_TRANSIENT_MS - 1;
	is_str(resolve("10.0.0.1", &r), "vdi01.example.org", "1 ms before "
	    "the ttl");
	is_int(calls("10.0.0.1"), 1, "cached");
	fake_now += 1;
	is_str(resolve("10.0.0.1", &r), "vdi01.example.org", "at the ttl");
	is_int(calls("10.0.0.1"), 2, "asked again");

	/* Not IP, and names turned off. */
	{
		in_lookup = 1;
		memset(&r, 0, sizeof(r));
		r.req = hostname_lookup((struct sockaddr *)&un, sizeof(un),
		    res_cb, &r);
		in_lookup = 0;
		ok(r.req != NULL && r.called == 0, "AF_UNIX: a request");
		wait_for(&r, 1000);
		ok(r.called == 1 && r.null, "AF_UNIX: no name");
	}
	o.enabled = 0;
	hostname_reconfigure(&o);
	is_str(resolve("10.0.0.1", &r), "(null)", "names off: no name");
	is_int(calls("10.0.0.1"), 2, "and no lookup");
	{
		unsigned nc;

		hostname_stats(&nc, NULL);
		is_int(nc, 0, "names off: the cache is emptied");
	}
	o.enabled = 1;
	hostname_reconfigure(&o);
	is_str(resolve("10.0.0.1", &r), "vdi01.example.org", "names on again");
	is_int(calls("10.0.0.1"), 3, "looked up");
	is_int(sync_calls, 0, "no callback ran inside hostname_lookup()");
	hostname_shutdown();
	look("10.0.0.1", &r);
	ok(r.req == NULL, "no request after hostname_shutdown");
}

static void
test_slow(void)
{
	struct hostname_opts o = opts(300, 64, 3);
	struct res r, r2, rs[4];
	uint64_t t0;
	unsigned t0_ticks, np;
	int i;

	hostname_init(base, &o);

	/* Two callers, one lookup. */
	atomic_store(&slow_ms, 100);
	look("10.0.1.1", &r);
	look("10.0.1.1", &r2);
	wait_for(&r, 2000);
	wait_for(&r2, 2000);
	ok(r.called == 1 && r2.called == 1, "two callers for one address: "
	    "both answered");
	is_str(r2.name, "slow1.example.org", "with the name");
	is_int(atomic_load(&slow_calls[1]), 1, "by one resolver call");

	/* A lookup over timeout_ms: "no name" then, the loop running. */
	atomic_store(&slow_ms, 900);
	t0 = now_usec() / 1000;
	t0_ticks = ticks;
	look("10.0.1.2", &r);
	wait_for(&r, 3000);
	ok(r.called == 1 && r.null, "a slow lookup answers no name");
	ok(r.at_ms - t0 >= 280 && r.at_ms - t0 < 800, "after about "
	    "timeout_ms (%llu ms)", (unsigned long long)(r.at_ms - t0));
	ok(ticks - t0_ticks >= 10, "a 10 ms timer fired %u times meanwhile",
	    ticks - t0_ticks);
	hostname_stats(NULL, &np);
	is_int(np, 1, "the resolver goes on");
	wait_idle(3000);
	is_str(resolve("10.0.1.2", &r), "slow2.example.org", "its late answer "
	    "was cached");
	is_int(atomic_load(&slow_calls[2]), 1, "no second resolver call");

	/* Cancelled: never called, while waiting or once answered. */
	atomic_store(&slow_ms, 150);
	look("10.0.1.3", &r);
	hostname_cancel(r.req);
	look("10.0.0.10", &r2);			/* (not slow) */
	loop_for(400);
	ok(r.called == 0, "cancelled while resolving: no callback");
	ok(r2.called == 1 && strcmp(r2.name, "b.example.org") == 0,
	    "another caller unaffected");
	is_str(resolve("10.0.1.3", &r), "slow3.example.org", "the cancelled "
	    "lookup's answer was cached");
	look("10.0.1.3", &r);
	hostname_cancel(r.req);
	loop_for(50);
	ok(r.called == 0, "cancelled with its cached answer due: no callback");
	hostname_cancel(NULL);

	/* A callback cancels another request answered at the same time. */
	atomic_store(&slow_ms, 100);
	look("10.0.1.4", &r);
	look("10.0.1.4", &r2);
	r.cancel = &r2;
	r2.cancel = &r;
	loop_for(400);
	is_int(r.called + r2.called, 1, "of two answered together, the one "
	    "cancelled by the other's callback is not called");

	/* max_pending 3: a fourth address at once gets no name, at once. */
	wait_idle(2000);
	o.timeout_ms = 2000;
	hostname_reconfigure(&o);
	atomic_store(&slow_ms, 400);
	look("10.0.1.5", &rs[0]);
	look("10.0.1.6", &rs[1]);
	look("10.0.1.7", &rs[2]);
	look("10.0.1.5", &r2);			/* joins the first */
	t0 = now_usec() / 1000;
	look("10.0.1.8", &rs[3]);
	ok(rs[3].req != NULL && rs[3].called == 0, "over max_pending: a "
	    "request, no callback yet");
	wait_for(&rs[3], 2000);
	ok(rs[3].called == 1 && rs[3].null, "over max_pending: no name");
	ok(rs[3].at_ms - t0 < 200, "at once (%llu ms)",
	    (unsigned long long)(rs[3].at_ms - t0));
	is_int(atomic_load(&slow_calls[8]), 0, "without a resolver call");
	for (i = 0; i < 3; i++)
		wait_for(&rs[i], 3000);
	wait_for(&r2, 3000);
	ok(rs[0].called == 1 && rs[1].called == 1 && rs[2].called == 1 &&
	    r2.called == 1, "the three within max_pending answered");
	is_str(rs[2].name, "slow7.example.org", "with names");
	is_str(r2.name, "slow5.example.org", "the joined caller too (it does "
	    "not count against max_pending)");
	is_int(sync_calls, 0, "no callback ran inside hostname_lookup()");
	hostname_shutdown();
}

static void
test_lru(void)
{
	struct hostname_opts o = opts(1000, 2, 4);
	struct res r;
	unsigned nc;
	int c9 = calls("10.0.0.9"), c10 = calls("10.0.0.10");

	hostname_init(base, &o);
	resolve("10.0.0.9", &r);
	resolve("10.0.0.10", &r);
	resolve("10.0.0.9", &r);		/* 10.0.0.10 least recent */
	resolve("10.0.0.11", &r);
	hostname_stats(&nc, NULL);
	is_int(nc, 2, "max_cache 2: two answers kept");
	is_int(calls("10.0.0.9") - c9, 1, "10.0.0.9 looked up once");
	is_str(resolve("10.0.0.9", &r), "a.example.org", "recently used: kept");
	is_int(calls("10.0.0.9") - c9, 1, "from the cache");
	is_str(resolve("10.0.0.10", &r), "b.example.org", "least recently "
	    "used: evicted");
	is_int(calls("10.0.0.10") - c10, 2, "looked up again");

	/* A shorter ttl applies to what is cached. */
	o.ttl_ms = 1000;
	hostname_reconfigure(&o);
	fake_now += 1000;
	is_str(resolve("10.0.0.10", &r), "b.example.org", "after a shorter "
	    "ttl");
	is_int(calls("10.0.0.10") - c10, 3, "the cached answer expired by "
	    "it");
	hostname_shutdown();
}

static void
test_shutdown(void)
{
	struct hostname_opts o = opts(5000, 64, 8);
	struct res r[4];
	uint64_t t0, t;
	int i, fin;

	/* Queued, running, answered but not yet delivered. */
	hostname_init(base, &o);
	resolve("10.0.0.9", &r[0]);
	atomic_store(&slow_ms, 200);
	look("10.0.1.20", &r[0]);
	look("10.0.1.21", &r[1]);
	look("10.0.1.21", &r[2]);
	look("10.0.0.9", &r[3]);		/* cached: due at once */
	loop_for(20);
	ok(r[3].called == 1, "the cached answer came");
	look("10.0.0.9", &r[3]);
	hostname_shutdown();
	loop_for(300);
	for (i = 0; i < 4; i++)
		ok(r[i].called == 0, "after shutdown: no callback (%d)", i);

	/* A resolver stuck past WORKER_JOIN_MS is left to finish. */
	hostname_init(base, &o);
	atomic_store(&slow_ms, WORKER_JOIN_MS + 500);
	fin = atomic_load(&slow_finished);
	look("10.0.1.22", &r[0]);
	while (atomic_load(&slow_running) == 0)
		usleep(1000);
	t0 = now_usec() / 1000;
	hostname_shutdown();
	t = now_usec() / 1000 - t0;
	ok(t >= WORKER_JOIN_MS - 50 && t < WORKER_JOIN_MS + 400,
	    "shutdown waited WORKER_JOIN_MS for it (%llu ms)",
	    (unsigned long long)t);
	ok(atomic_load(&slow_finished) == fin, "and returned while it runs");
	/* a new instance while the old thread is still in the resolver */
	hostname_init(base, &o);
	is_str(resolve("10.0.0.10", &r[1]), "b.example.org", "a new instance "
	    "meanwhile works");
	while (atomic_load(&slow_finished) == fin)
		usleep(1000);
	usleep(100 * 1000);		/* (it drops its job, frees the worker) */
	loop_for(50);
	ok(r[0].called == 0, "the stuck lookup's caller is never called");
	hostname_shutdown();
}

static void
test_system(void)
{
	struct hostname_opts o = opts(5000, 64, 8);
	struct res r;
	char line[512], *tok, *save;
	FILE *f;
	int mapped = 0;

	/* What the files backend answers for 127.0.0.1: its first name. */
	if ((f = fopen("/etc/hosts", "r")) != NULL) {
		while (!mapped && fgets(line, sizeof(line), f) != NULL) {
			if ((tok = strtok_r(line, " \t\r\n", &save)) == NULL ||
			    strcmp(tok, "127.0.0.1") != 0)
				continue;
			tok = strtok_r(NULL, " \t\r\n", &save);
			mapped = tok != NULL && strcmp(tok, "localhost") == 0;
			break;
		}
		fclose(f);
	}
	if (!mapped) {
		skip("/etc/hosts does not name 127.0.0.1 localhost first");
		skip("(the system resolver)");
		return;
	}
	hostname_set_resolver(NULL, NULL, NULL);
	hostname_set_clock(NULL);
	hostname_init(base, &o);
	look("127.0.0.1", &r);
	wait_for(&r, 5000);
	is_int(r.called, 1, "system resolver: 127.0.0.1 answered");
	is_str(r.null ? "(null)" : r.name, "localhost",
	    "system resolver: 127.0.0.1 is localhost");
	hostname_shutdown();
}

int
main(void)
{
	struct timeval tv = { 0, 10000 };

	log_init("test_hostname", 1, getenv("TEST_VERBOSE") ? LOG_LVL_DEBUG :
	    LOG_LVL_ERR);
	base = event_base_new();
	tick_ev = event_new(base, -1, EV_PERSIST, tick_cb, NULL);
	event_add(tick_ev, &tv);
	hostname_set_resolver(fake_gni, fake_gai, fake_fai);
	hostname_set_clock(fake_clock);

	test_normalize();
	test_answers();
	test_slow();
	test_lru();
	test_shutdown();
	test_system();

	event_free(tick_ev);
	event_base_free(base);
	return done_testing();
}
