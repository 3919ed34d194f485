/*
 * worker.c: jobs run on a worker thread and come back on the loop; at
 * worker_free() queued and undelivered jobs are dropped, a job stuck past
 * WORKER_JOIN_MS is left to its thread, which drops it when it ends; a
 * done callback may free its worker.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "base/log.h"
#include "tap.h"
#include "base/util.h"
#include "base/worker.h"

static struct event_base *base;
static pthread_t loop_thread;
static atomic_int ndropped;

struct job {
	int		 n;
	unsigned	 sleep_ms;
	int		 ran_off_loop;
	int		*ndone;
	struct worker	*free_me;	/* worker_free() from done */
};

static void
job_run(void *arg)
{
	struct job *j = arg;

	j->ran_off_loop = !pthread_equal(pthread_self(), loop_thread);
	if (j->sleep_ms > 0)
		usleep(j->sleep_ms * 1000);
}

static void
job_done(void *arg)
{
	struct job *j = arg;

	if (j->ran_off_loop && pthread_equal(pthread_self(), loop_thread))
		(*j->ndone)++;
	if (j->free_me != NULL)
		worker_free(j->free_me);
	free(j);
}

static void
job_drop(void *arg)
{
	atomic_fetch_add(&ndropped, 1);
	free(arg);
}

static struct job *
job_new(int *ndone, unsigned sleep_ms)
{
	struct job *j = xcalloc(1, sizeof(*j));

	j->ndone = ndone;
	j->sleep_ms = sleep_ms;
	return j;
}

static void
loop_for(unsigned ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
}

int
main(void)
{
	struct worker *w;
	uint64_t t0, t;
	int ndone = 0, i;

	log_init("test_worker", 1, getenv("TEST_VERBOSE") ? LOG_LVL_DEBUG :
	    LOG_LVL_ERR);
	loop_thread = pthread_self();
	base = event_base_new();

	/* Jobs come back, each once, on the loop. */
	w = worker_new(base, "test", 3);
	ok(w != NULL, "worker with 3 threads");
	for (i = 0; i < 20; i++)
		worker_submit(w, job_run, job_done, job_drop, job_new(&ndone,
		    i % 4));
	is_int(ndone, 0, "nothing done inside worker_submit");
	for (i = 0; i < 100 && ndone < 20; i++)
		loop_for(20);
	is_int(ndone, 20, "20 jobs ran off the loop and came back on it");
	worker_free(w);
	is_int(atomic_load(&ndropped), 0, "none dropped");

	/* Queued and finished-but-undelivered jobs are dropped at free. */
	ndone = 0;
	w = worker_new(base, "test", 1);
	for (i = 0; i < 5; i++)
		worker_submit(w, job_run, job_done, job_drop, job_new(&ndone,
		    50));
	usleep(120 * 1000);		/* ~2 done, 1 running, 2 queued */
	worker_free(w);
	is_int(ndone, 0, "no done after worker_free");
	is_int(atomic_load(&ndropped), 5, "all 5 dropped (done, running, "
	    "queued)");
	loop_for(50);
	is_int(ndone, 0, "still none later");

	/* A job stuck past WORKER_JOIN_MS: left behind, dropped by its thread. */
	atomic_store(&ndropped, 0);
	w = worker_new(base, "test", 1);
	worker_submit(w, job_run, job_done, job_drop, job_new(&ndone,
	    WORKER_JOIN_MS + 500));
	usleep(50 * 1000);
	t0 = now_usec();
	worker_free(w);
	t = (now_usec() - t0) / 1000;
	ok(t >= WORKER_JOIN_MS - 50 && t < WORKER_JOIN_MS + 400,
	    "worker_free waited about WORKER_JOIN_MS (%llu ms)",
	    (unsigned long long)t);
	is_int(atomic_load(&ndropped), 0, "the stuck job is not dropped yet");
	for (i = 0; i < 100 && atomic_load(&ndropped) == 0; i++)
		usleep(20 * 1000);
	is_int(atomic_load(&ndropped), 1, "its thread dropped it when it ended");
	usleep(50 * 1000);		/* (the thread frees the worker) */

	/* A done callback frees its own worker; later jobs are dropped. */
	atomic_store(&ndropped, 0);
	ndone = 0;
	w = worker_new(base, "test", 1);
	{
		struct job *j = job_new(&ndone, 0);

		j->free_me = w;
		worker_submit(w, job_run, job_done, job_drop, j);
		worker_submit(w, job_run, job_done, job_drop, job_new(&ndone,
		    100));
	}
	for (i = 0; i < 50 && ndone == 0; i++)
		loop_for(20);
	is_int(ndone, 1, "the first done ran and freed the worker");
	is_int(atomic_load(&ndropped), 1, "the second job was dropped");
	loop_for(150);
	is_int(ndone, 1, "and never came back");

	event_base_free(base);
	return done_testing();
}
