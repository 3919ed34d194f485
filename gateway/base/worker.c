/*
 * Threads for blocking calls, and the way their results get back to the
 * event loop (worker.h).
 *
 * Jobs go to the threads on a queue under a mutex and come back on a
 * second one; a byte on a pipe wakes the loop when that second queue
 * turns non-empty.  The loop never blocks on the mutex for longer than a
 * list operation: no library call runs under it.
 *
 * struct worker is reference counted: the owner holds one reference and
 * every thread one, so a thread left running at worker_free() keeps the
 * mutex and the pipe it uses alive; the last to let go frees them.
 */
#include <sys/queue.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "base/log.h"
#include "base/util.h"
#include "base/worker.h"

struct worker_job {
	TAILQ_ENTRY(worker_job)	 entry;
	worker_fn		 run;
	worker_fn		 done;
	worker_fn		 drop;
	void			*arg;
};
TAILQ_HEAD(worker_jobs, worker_job);

struct worker {
	char			 name[64];
	pthread_mutex_t		 mu;
	pthread_cond_t		 cv;
	struct worker_jobs	 todo;		/* under mu */
	struct worker_jobs	 done;		/* under mu */
	int			 stop;		/* under mu */
	unsigned		 refs;		/* under mu */
	int			 pipe[2];	/* wakes the loop */
	struct event		*ev;
	pthread_t		 threads[WORKER_MAX_THREADS];
	unsigned		 nthreads;
};

static void
job_drop(struct worker_job *j)
{
	if (j->drop != NULL)
		j->drop(j->arg);
	free(j);
}

static void
worker_destroy(struct worker *w)
{
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	if (w->pipe[0] != -1)
		close(w->pipe[0]);
	if (w->pipe[1] != -1)
		close(w->pipe[1]);
	free(w);
}

static void
worker_hold(struct worker *w)
{
	pthread_mutex_lock(&w->mu);
	w->refs++;
	pthread_mutex_unlock(&w->mu);
}

static void
worker_release(struct worker *w)
{
	unsigned refs;

	pthread_mutex_lock(&w->mu);
	refs = --w->refs;
	pthread_mutex_unlock(&w->mu);
	if (refs == 0)
		worker_destroy(w);
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	struct worker_job *j;
	int wake;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (TAILQ_EMPTY(&w->todo) && !w->stop)
			pthread_cond_wait(&w->cv, &w->mu);
		if (w->stop)
			break;
		j = TAILQ_FIRST(&w->todo);
		TAILQ_REMOVE(&w->todo, j, entry);
		pthread_mutex_unlock(&w->mu);

		j->run(j->arg);

		pthread_mutex_lock(&w->mu);
		if (w->stop) {
			/* worker_free() has been: nobody will take it */
			pthread_mutex_unlock(&w->mu);
			job_drop(j);
			pthread_mutex_lock(&w->mu);
			break;
		}
		wake = TAILQ_EMPTY(&w->done);
		TAILQ_INSERT_TAIL(&w->done, j, entry);
		pthread_mutex_unlock(&w->mu);
		/*
		 * (Our reference keeps the pipe open.  It cannot be full:
		 * a byte goes in only when the queue turns non-empty.)
		 */
		if (wake && write(w->pipe[1], "", 1) != 1)
			log_debug("%s: wakeup not written", w->name);
		pthread_mutex_lock(&w->mu);
	}
	pthread_mutex_unlock(&w->mu);
	worker_release(w);
	return NULL;
}

/* Finished jobs, on the loop.  A done callback may free the worker. */
static void
worker_wake_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;
	struct worker_job *j;
	char buf[64];

	while (read(fd, buf, sizeof(buf)) > 0)
		;
	worker_hold(w);
	for (;;) {
		pthread_mutex_lock(&w->mu);
		if (w->stop || (j = TAILQ_FIRST(&w->done)) == NULL) {
			pthread_mutex_unlock(&w->mu);
			break;
		}
		TAILQ_REMOVE(&w->done, j, entry);
		pthread_mutex_unlock(&w->mu);
		j->done(j->arg);
		free(j);
	}
	worker_release(w);
}

struct worker *
worker_new(struct event_base *base, const char *name, unsigned nthreads)
{
	struct worker *w;
	sigset_t all, old;
	unsigned i;
	int rv = 0;

	if (nthreads == 0)
		nthreads = 1;
	if (nthreads > WORKER_MAX_THREADS)
		nthreads = WORKER_MAX_THREADS;
	w = xcalloc(1, sizeof(*w));
	usbgw_strlcpy(w->name, name, sizeof(w->name));
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	TAILQ_INIT(&w->todo);
	TAILQ_INIT(&w->done);
	w->refs = 1;
	if (pipe2(w->pipe, O_CLOEXEC | O_NONBLOCK) == -1) {
		log_warn("%s: pipe", w->name);
		w->pipe[0] = w->pipe[1] = -1;
		worker_destroy(w);
		return NULL;
	}
	if ((w->ev = event_new(base, w->pipe[0], EV_READ | EV_PERSIST,
	    worker_wake_cb, w)) == NULL)
		fatalx("%s: event_new", w->name);
	event_add(w->ev, NULL);

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (i = 0; i < nthreads; i++) {
		w->refs++;
		rv = pthread_create(&w->threads[i], NULL, worker_main, w);
		if (rv != 0) {
			w->refs--;
			break;
		}
		w->nthreads++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (w->nthreads == 0) {
		log_warnx("%s: pthread_create: %s", w->name, strerror(rv));
		event_free(w->ev);
		worker_destroy(w);
		return NULL;
	}
	if (w->nthreads < nthreads)
		log_warnx("%s: pthread_create: %s (%u threads of %u)", w->name,
		    strerror(rv), w->nthreads, nthreads);
	return w;
}

void
worker_submit(struct worker *w, worker_fn run, worker_fn done, worker_fn drop,
    void *arg)
{
	struct worker_job *j;

	j = xcalloc(1, sizeof(*j));
	j->run = run;
	j->done = done;
	j->drop = drop;
	j->arg = arg;
	pthread_mutex_lock(&w->mu);
	TAILQ_INSERT_TAIL(&w->todo, j, entry);
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

void
worker_free(struct worker *w)
{
	struct worker_jobs left;
	struct worker_job *j;
	struct timespec ts;
	unsigned i, stuck = 0;

	if (w == NULL)
		return;
	event_free(w->ev);
	w->ev = NULL;

	TAILQ_INIT(&left);
	pthread_mutex_lock(&w->mu);
	w->stop = 1;
	TAILQ_CONCAT(&left, &w->todo, entry);
	TAILQ_CONCAT(&left, &w->done, entry);
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	while ((j = TAILQ_FIRST(&left)) != NULL) {
		TAILQ_REMOVE(&left, j, entry);
		job_drop(j);
	}

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += WORKER_JOIN_MS / 1000;
	ts.tv_nsec += (WORKER_JOIN_MS % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	for (i = 0; i < w->nthreads; i++) {
		if (pthread_timedjoin_np(w->threads[i], NULL, &ts) != 0) {
			pthread_detach(w->threads[i]);
			stuck++;
		}
	}
	if (stuck > 0)
		log_warnx("%s: %u still running at shutdown, left to finish",
		    w->name, stuck);
	worker_release(w);
}

void
worker_priority(struct worker *w, int pri)
{
	if (w == NULL || w->ev == NULL)
		return;
	event_del(w->ev);
	if (event_priority_set(w->ev, pri) == -1)
		log_warnx("%s: cannot set priority %d", w->name, pri);
	event_add(w->ev, NULL);
}
