/*
 * The names of vhci hosts, by forward-confirmed reverse DNS (FCrDNS),
 * resolved off the event loop and cached.
 *
 * A peer address has a name when both hold:
 *	getnameinfo(address, NI_NAMEREQD) gives NAME (a PTR record, or
 *	    /etc/hosts, as nsswitch.conf says), and NAME is a host name
 *	    (hostname_normalize() below);
 *	getaddrinfo(NAME) gives, among its addresses, the peer's own.
 * An IPv4-mapped IPv6 address (::ffff:a.b.c.d, from a dual-stack
 * listener) counts as the IPv4 address a.b.c.d, in the lookups, the
 * comparison and the cache.  The name is as trustworthy as DNS: whoever
 * controls the PTR zone of an address names it only as far as they also
 * control the forward zone of that name.
 *
 * Usage on the event loop (single-threaded: none of this is thread-safe):
 *
 *	struct hostname_opts o = { .enabled = 1, .ttl_ms = 300000,
 *	    .timeout_ms = 2000 };
 *	hostname_init(base, &o);
 *	s->name_req = hostname_lookup(sa, salen, name_cb, s);
 *	...
 *	static void name_cb(const char *name, void *arg)
 *	{	struct session *s = arg;
 *		s->name_req = NULL;		(the handle is spent)
 *		(name: "vdi01.example.org", or NULL: no name)	}
 *	...
 *	hostname_cancel(s->name_req);		(s goes away first)
 *	hostname_shutdown();
 *
 * Contract of hostname_lookup():
 *  - cb is called exactly once, on the loop, from an event of its own:
 *    never inside hostname_lookup(), not even for a cached answer or when
 *    names are disabled, so callers have one code path;
 *  - unless hostname_cancel() is called first: then never;
 *  - name is NULL (no name) or a normalized host name, valid during the
 *    call only; the handle is freed before cb runs (do not cancel it from
 *    cb or after);
 *  - cb may call hostname_lookup() and hostname_cancel() on other handles;
 *  - NULL is returned only when the module is not running (before
 *    hostname_init(), after hostname_shutdown()): cb will not be called.
 *
 * Answers:
 *  - a cached one (positive or negative) is kept ttl_ms; getaddrinfo(3)
 *    does not tell a record's DNS TTL, so this lifetime is fixed.  A
 *    temporary failure (EAI_AGAIN and the like: the DNS server did not
 *    answer) is kept at most HOSTNAME_TRANSIENT_MS, so a DNS outage does
 *    not leave hosts nameless for a whole ttl_ms;
 *  - a lookup not answered within timeout_ms answers "no name" to its
 *    caller; the thread goes on and its late answer is cached for the next
 *    caller;
 *  - several callers asking for one address while it is being resolved
 *    share one lookup;
 *  - at most max_pending addresses are being resolved at once (queued or
 *    running on HOSTNAME_THREADS threads; one whose callers timed out
 *    still counts until the resolver returns); beyond that a lookup
 *    answers "no name" at once.  The cache holds at most max_cache
 *    answers, the least recently used going first;
 *  - with enabled 0 every lookup answers "no name", and no thread runs.
 */
#ifndef USBGW_HOSTNAME_H
#define USBGW_HOSTNAME_H

#include <sys/types.h>
#include <sys/socket.h>

#include <netdb.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct hostname_req;

#define HOSTNAME_MAX		253	/* bytes of a name, without NUL */
#define HOSTNAME_LABEL_MAX	63
#define HOSTNAME_THREADS	4
#define HOSTNAME_TRANSIENT_MS	10000	/* temporary failures, at most */
#define HOSTNAME_DEFAULT_MAX_CACHE	4096
#define HOSTNAME_DEFAULT_MAX_PENDING	64

struct hostname_opts {
	int		enabled;
	unsigned	ttl_ms;		/* answers kept (config host-name-ttl) */
	unsigned	timeout_ms;	/* per caller (host-name-timeout) */
	unsigned	max_cache;	/* answers; 0: default */
	unsigned	max_pending;	/* addresses resolving; 0: default */
};

typedef void (*hostname_cb)(const char *name, void *arg);

/* Returns 0, or -1 (logged) when already running. */
int		 hostname_init(struct event_base *, const struct hostname_opts *);

/*
 * New options for later lookups (SIGHUP).  The cache is emptied when
 * names are turned off or the ttl shortened, and trimmed to max_cache.
 */
void		 hostname_reconfigure(const struct hostname_opts *);

/*
 * Stop: every outstanding request is freed without its callback being
 * called, so call this after the objects holding requests are gone (or
 * have cancelled them).  A resolver call still running is waited for up
 * to WORKER_JOIN_MS, then left to finish on its own (worker.h).
 */
void		 hostname_shutdown(void);

struct hostname_req *hostname_lookup(const struct sockaddr *, socklen_t,
		    hostname_cb cb, void *arg);
void		 hostname_cancel(struct hostname_req *);	/* NULL: nothing */

/*
 * The name a PTR answer may give, or not: at most HOSTNAME_MAX bytes once
 * one trailing dot is dropped; dot-separated labels of 1 to 63 letters,
 * digits and hyphens, none beginning or ending with a hyphen; the last
 * label not all digits, and the whole not an IPv4 address in any form
 * inet_aton(3) reads ("10.1.2.3", "0x0a010203": getaddrinfo would take it
 * as that address without asking DNS).  Out gets the name lowercased.
 * in is untrusted bytes (a NUL among them refuses it).  Returns 0, or -1
 * with out "" (outsz > HOSTNAME_MAX needed for any name to fit).
 */
int		 hostname_normalize(const char *in, size_t len, char *out,
		    size_t outsz);

/*
 * For tests: resolver functions instead of the system's (NULL: the
 * system's), for lookups started after the call; fai frees what gai
 * returns.  And a millisecond clock for cache lifetimes (NULL: monotonic).
 */
typedef int (*hostname_getnameinfo_fn)(const struct sockaddr *, socklen_t,
		    char *, socklen_t, char *, socklen_t, int);
typedef int (*hostname_getaddrinfo_fn)(const char *, const char *,
		    const struct addrinfo *, struct addrinfo **);
typedef void (*hostname_freeaddrinfo_fn)(struct addrinfo *);
void		 hostname_set_resolver(hostname_getnameinfo_fn,
		    hostname_getaddrinfo_fn, hostname_freeaddrinfo_fn);
void		 hostname_set_clock(uint64_t (*)(void));

/* Cached answers and addresses being resolved, for tests and status. */
void		 hostname_stats(unsigned *ncached, unsigned *npending);

#endif
