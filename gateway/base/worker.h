/*
 * Blocking work off the event loop: a few threads take jobs from a queue,
 * run them, and hand each back to the loop.  For library calls that may
 * block for seconds (NSS user lookups in control.c, DNS in hostname.c).
 *
 *	w = worker_new(base, "host name lookups", 4);
 *	worker_submit(w, run, done, drop, job);
 *
 * run(job)	on a worker thread; must touch nothing but job (and
 *		thread-safe library calls).
 * done(job)	afterwards, on the event loop, from an event of its own
 *		(never inside worker_submit).  done owns job: it frees it.
 * drop(job)	instead of done, once the worker is freed: for a job still
 *		queued or finished but not yet handed back, inside
 *		worker_free(); for a job still running when worker_free()
 *		gave up waiting for it, on its worker thread when it ends.
 *		So drop must be thread-safe: typically free().  NULL: nothing.
 *
 * Jobs are not cancelled: a caller that no longer wants an answer keeps
 * the job (or an id in it) from reaching anything that went away, as
 * control.c does with a connection serial.  The queue is unbounded: the
 * caller bounds what it submits.
 *
 * worker_free() waits up to WORKER_JOIN_MS in all for running jobs; a
 * thread still stuck in a library call after that is detached and frees
 * what it holds (its job through drop, the worker's last reference) when
 * the call returns, so nothing it touches goes away under it.
 */
#ifndef USBGW_WORKER_H
#define USBGW_WORKER_H

struct event_base;
struct worker;

#define WORKER_MAX_THREADS	64
#define WORKER_JOIN_MS		1000

typedef void (*worker_fn)(void *);

/*
 * Start nthreads (1 .. WORKER_MAX_THREADS) threads, with every signal
 * blocked (signals are the loop's).  Returns NULL, logged, when not even
 * one could be started; fewer than asked is logged and used.
 */
struct worker	*worker_new(struct event_base *, const char *name,
		    unsigned nthreads);
void		 worker_submit(struct worker *, worker_fn run, worker_fn done,
		    worker_fn drop, void *arg);
void		 worker_free(struct worker *);	/* NULL: nothing */
/* The loop priority its completions run at (event_priority_set()). */
void		 worker_priority(struct worker *, int);

#endif
