/*
 * Hooks: run a site's command on events without ever blocking the loop.
 *
 * Each run is a struct hook_run with an explicit state.  A child is
 * spawned with posix_spawn into its own process group (so a timeout kills
 * whatever the shell started too), watched through a pidfd (no SIGCHLD
 * handler that could steal other children), and its output is read from
 * a pipe and logged, escaped and bounded.
 */
#include <sys/queue.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "control/config.h"
#include "control/hooks.h"
#include "base/log.h"
#include "base/util.h"

#define HOOK_PATH	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define HOOK_KEY_MAX	48
#define HOOK_POLL_MS	100	/* exit polling when pidfd_open is missing */

static const char *const event_names[HOOK_NEVENTS] = {
	"pending", "access-request", "approve", "deny", "revoke",
	"identity-change", "gone", "attach", "detach", "probed",
	"exporter-up", "exporter-down", "policy", "identity-anomaly",
	"pairing", "pairing-end",
};

enum run_state {
	RUN_QUEUED,
	RUN_RUNNING,
	RUN_TERMINATING,	/* SIGTERM sent, waiting for exit or grace */
	RUN_KILLED,		/* SIGKILL sent */
};

struct hook_run {
	TAILQ_ENTRY(hook_run)	 entry;
	enum run_state		 state;
	char			 event[32];
	int			 line;		/* config line of the hook */
	char			*command;
	char			**envp;
	pid_t			 pid;
	int			 pidfd;
	struct event		*exit_ev;	/* pidfd readable, or poll timer */
	struct event		*timer;		/* time limit, then grace */
	int			 outfd;
	struct event		*out_ev;
	char			 outline[256];
	size_t			 outlen;
	size_t			 logged;
	uint64_t		 started;
};
TAILQ_HEAD(hook_runs, hook_run);

static struct {
	struct event_base	*base;
	struct config_hook	 hooks[CONFIG_MAX_HOOKS];
	size_t			 nhooks;
	unsigned		 timeout_ms;
	unsigned		 max_running;
	struct hook_runs	 running;
	struct hook_runs	 queue;
	unsigned		 nrunning;
	unsigned		 nqueued;
	int			 ready;
} H;

static void	run_start(struct hook_run *);
static void	run_finish(struct hook_run *, int status);

const char *
hook_event_name(enum hook_event e)
{
	return (unsigned)e < HOOK_NEVENTS ? event_names[e] : "invalid";
}

int
hook_event_parse(const char *s)
{
	int i;

	for (i = 0; i < HOOK_NEVENTS; i++)
		if (strcmp(s, event_names[i]) == 0)
			return i;
	return -1;
}

static void
hooks_copy_config(const struct config *cfg)
{
	memcpy(H.hooks, cfg->hooks, sizeof(H.hooks));
	H.nhooks = cfg->nhooks;
	H.timeout_ms = cfg->hook_timeout_ms;
	H.max_running = cfg->hook_max_running > 0 ? cfg->hook_max_running : 1;
}

void
hooks_init(struct event_base *base, const struct config *cfg)
{
	if (!H.ready) {
		TAILQ_INIT(&H.running);
		TAILQ_INIT(&H.queue);
		H.ready = 1;
	}
	H.base = base;
	hooks_copy_config(cfg);
}

void
hooks_reconfigure(const struct config *cfg)
{
	struct hook_run *r;

	hooks_copy_config(cfg);
	while (H.nrunning < H.max_running &&
	    (r = TAILQ_FIRST(&H.queue)) != NULL) {
		TAILQ_REMOVE(&H.queue, r, entry);
		H.nqueued--;
		run_start(r);
	}
}

unsigned
hooks_running(void)
{
	return H.nrunning;
}

unsigned
hooks_queued(void)
{
	return H.nqueued;
}

static void
run_free(struct hook_run *r)
{
	char **e;

	if (r == NULL)
		return;
	if (r->exit_ev != NULL)
		event_free(r->exit_ev);
	if (r->timer != NULL)
		event_free(r->timer);
	if (r->out_ev != NULL)
		event_free(r->out_ev);
	if (r->pidfd != -1)
		close(r->pidfd);
	if (r->outfd != -1)
		close(r->outfd);
	if (r->envp != NULL)
		for (e = r->envp; *e != NULL; e++)
			free(*e);
	free(r->envp);
	free(r->command);
	free(r);
}

/* Values reach a shell's environment: printable ASCII only, bounded. */
static char *
env_entry(const char *key, const char *value)
{
	char k[HOOK_KEY_MAX + 1], *out;
	size_t i, n, klen;

	for (i = 0, klen = 0; key[i] != '\0' && klen < HOOK_KEY_MAX; i++) {
		char c = key[i];

		if (c >= 'a' && c <= 'z')
			c = (char)(c - 'a' + 'A');
		else if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
			c = '_';
		k[klen++] = c;
	}
	k[klen] = '\0';
	n = strnlen(value, HOOK_MAX_VALUE);
	xasprintf(&out, "USBGW_%s=%.*s", k, (int)n, value);
	for (i = strlen("USBGW_") + klen + 1; out[i] != '\0'; i++)
		if ((unsigned char)out[i] < 0x20 || (unsigned char)out[i] > 0x7e)
			out[i] = '?';
	return out;
}

static int
env_has(char **envp, size_t n, const char *entry)
{
	size_t i, klen = strcspn(entry, "=") + 1;

	for (i = 0; i < n; i++)
		if (strncmp(envp[i], entry, klen) == 0)
			return 1;
	return 0;
}

static char **
env_build(const char *event, const struct hook_kv *kv, size_t nkv)
{
	char **envp, tbuf[32], *e;
	size_t n = 0, i;

	envp = xcalloc(HOOK_MAX_ENV + 4, sizeof(*envp));
	envp[n++] = xstrdup(HOOK_PATH);
	envp[n++] = env_entry("EVENT", event);
	snprintf(tbuf, sizeof(tbuf), "%lld", (long long)time(NULL));
	envp[n++] = env_entry("TIME", tbuf);
	for (i = 0; i < nkv && n < HOOK_MAX_ENV + 3; i++) {
		if (kv[i].key == NULL || kv[i].key[0] == '\0')
			continue;
		e = env_entry(kv[i].key, kv[i].value != NULL ? kv[i].value : "");
		if (env_has(envp, n, e))
			free(e);		/* first one wins; EVENT fixed */
		else
			envp[n++] = e;
	}
	envp[n] = NULL;
	return envp;
}

static void
out_flush_line(struct hook_run *r)
{
	char esc[sizeof(r->outline) * 4 + 1];

	if (r->outlen == 0)
		return;
	if (r->logged < HOOK_MAX_OUTPUT) {
		log_escape(esc, sizeof(esc), r->outline, r->outlen);
		log_info("hook %s (line %d) [%ld]: %s", r->event, r->line,
		    (long)r->pid, esc);
	} else if (r->logged - r->outlen < HOOK_MAX_OUTPUT)
		log_info("hook %s (line %d) [%ld]: (further output not logged)",
		    r->event, r->line, (long)r->pid);
	r->outlen = 0;
}

/* Read what the pipe holds; returns 1 at EOF or error. */
static int
out_drain(struct hook_run *r)
{
	char buf[1024];
	ssize_t n, i;

	for (;;) {
		n = read(r->outfd, buf, sizeof(buf));
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && errno == EAGAIN)
			return 0;
		if (n <= 0)
			return 1;
		for (i = 0; i < n; i++) {
			r->logged++;
			if (buf[i] == '\n' ||
			    r->outlen == sizeof(r->outline)) {
				out_flush_line(r);
				if (buf[i] == '\n')
					continue;
			}
			r->outline[r->outlen++] = buf[i];
		}
	}
}

static void
out_close(struct hook_run *r)
{
	if (r->out_ev != NULL) {
		event_free(r->out_ev);
		r->out_ev = NULL;
	}
	if (r->outfd != -1) {
		out_drain(r);
		out_flush_line(r);
		close(r->outfd);
		r->outfd = -1;
	}
}

static void
out_cb(evutil_socket_t fd, short what, void *arg)
{
	struct hook_run *r = arg;

	if (out_drain(r))
		out_close(r);
}

static void
run_reap(struct hook_run *r)
{
	siginfo_t si;
	int status;

	memset(&si, 0, sizeof(si));
	if (r->pidfd != -1) {
		if (waitid(P_PIDFD, (id_t)r->pidfd, &si, WEXITED | WNOHANG) == -1)
			return;
	} else if (waitid(P_PID, (id_t)r->pid, &si, WEXITED | WNOHANG) == -1)
		return;
	if (si.si_pid == 0)
		return;		/* not yet */
	if (si.si_code == CLD_EXITED)
		status = si.si_status << 8;
	else
		status = si.si_status & 0x7f;
	run_finish(r, status);
}

static void
exit_cb(evutil_socket_t fd, short what, void *arg)
{
	run_reap(arg);
}

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct hook_run *r = arg;
	struct timeval tv;

	switch (r->state) {
	case RUN_RUNNING:
		log_warnx("hook %s (line %d) [%ld]: time limit of %u ms "
		    "reached, terminating", r->event, r->line, (long)r->pid,
		    H.timeout_ms);
		kill(-r->pid, SIGTERM);
		r->state = RUN_TERMINATING;
		tv.tv_sec = HOOK_KILL_GRACE_MS / 1000;
		tv.tv_usec = (HOOK_KILL_GRACE_MS % 1000) * 1000;
		evtimer_add(r->timer, &tv);
		break;
	case RUN_TERMINATING:
		log_warnx("hook %s (line %d) [%ld]: still running, killing",
		    r->event, r->line, (long)r->pid);
		kill(-r->pid, SIGKILL);
		r->state = RUN_KILLED;
		break;
	default:
		break;
	}
}

static void
run_finish(struct hook_run *r, int status)
{
	struct hook_run *next;
	uint64_t ms = (now_usec() - r->started) / 1000;

	out_close(r);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		log_debug("hook %s (line %d) [%ld]: done in %llu ms", r->event,
		    r->line, (long)r->pid, (unsigned long long)ms);
	else if (WIFEXITED(status))
		log_warnx("hook %s (line %d) [%ld]: exited with status %d "
		    "after %llu ms", r->event, r->line, (long)r->pid,
		    WEXITSTATUS(status), (unsigned long long)ms);
	else
		log_warnx("hook %s (line %d) [%ld]: killed by signal %d after "
		    "%llu ms", r->event, r->line, (long)r->pid, WTERMSIG(status),
		    (unsigned long long)ms);
	TAILQ_REMOVE(&H.running, r, entry);
	H.nrunning--;
	run_free(r);

	while (H.nrunning < H.max_running &&
	    (next = TAILQ_FIRST(&H.queue)) != NULL) {
		TAILQ_REMOVE(&H.queue, next, entry);
		H.nqueued--;
		run_start(next);
	}
}

static int
spawn_child(struct hook_run *r, int outw)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, all;
	char *argv[4];
	int rv;

	argv[0] = (char *)"/bin/sh";
	argv[1] = (char *)"-c";
	argv[2] = r->command;
	argv[3] = NULL;

	sigemptyset(&none);
	sigfillset(&all);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, outw, 1);
	posix_spawn_file_actions_adddup2(&fa, outw, 2);
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	posix_spawnattr_init(&at);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP |
	    POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setpgroup(&at, 0);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	rv = posix_spawn(&r->pid, "/bin/sh", &fa, &at, argv, r->envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	return rv;
}

static void
run_start(struct hook_run *r)
{
	struct timeval tv;
	int p[2], rv;

	TAILQ_INSERT_TAIL(&H.running, r, entry);
	H.nrunning++;
	r->state = RUN_RUNNING;
	r->started = now_usec();

	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) == -1) {
		log_warn("hook %s (line %d): pipe", r->event, r->line);
		run_finish(r, 127 << 8);
		return;
	}
	rv = spawn_child(r, p[1]);
	close(p[1]);
	r->outfd = p[0];
	if (rv != 0) {
		errno = rv;
		log_warn("hook %s (line %d): spawn /bin/sh", r->event, r->line);
		run_finish(r, 127 << 8);
		return;
	}
	log_info("hook %s (line %d) [%ld]: started", r->event, r->line,
	    (long)r->pid);

	r->out_ev = event_new(H.base, r->outfd, EV_READ | EV_PERSIST, out_cb, r);
	event_add(r->out_ev, NULL);

	r->pidfd = (int)syscall(SYS_pidfd_open, r->pid, 0);
	if (r->pidfd != -1) {
		r->exit_ev = event_new(H.base, r->pidfd, EV_READ | EV_PERSIST,
		    exit_cb, r);
		event_add(r->exit_ev, NULL);
	} else {
		/* Kernels before 5.3: poll for the exit. */
		r->exit_ev = event_new(H.base, -1, EV_PERSIST, exit_cb, r);
		tv.tv_sec = 0;
		tv.tv_usec = HOOK_POLL_MS * 1000;
		event_add(r->exit_ev, &tv);
	}

	r->timer = evtimer_new(H.base, timer_cb, r);
	tv.tv_sec = H.timeout_ms / 1000;
	tv.tv_usec = (H.timeout_ms % 1000) * 1000;
	evtimer_add(r->timer, &tv);
}

int
hooks_run(const char *event, const struct hook_kv *kv, size_t nkv)
{
	struct hook_run *r;
	size_t i;
	int ev, n = 0;

	if (!H.ready || H.base == NULL)
		return 0;
	if ((ev = hook_event_parse(event)) < 0) {
		log_warnx("%s: unknown event \"%s\"", __func__, event);
		return 0;
	}
	for (i = 0; i < H.nhooks; i++) {
		if ((H.hooks[i].events & (1u << ev)) == 0)
			continue;
		if (H.nrunning >= H.max_running &&
		    H.nqueued >= HOOK_MAX_QUEUED) {
			log_warnx("hook %s (line %d): %u running and %u queued, "
			    "dropped", event, H.hooks[i].line, H.nrunning,
			    H.nqueued);
			continue;
		}
		r = xcalloc(1, sizeof(*r));
		r->pidfd = -1;
		r->outfd = -1;
		r->state = RUN_QUEUED;
		usbgw_strlcpy(r->event, event, sizeof(r->event));
		r->line = H.hooks[i].line;
		r->command = xstrdup(H.hooks[i].command);
		r->envp = env_build(event, kv, nkv);
		if (H.nrunning < H.max_running)
			run_start(r);
		else {
			TAILQ_INSERT_TAIL(&H.queue, r, entry);
			H.nqueued++;
		}
		n++;
	}
	return n;
}

static void
scalar_str(const json_t *v, char *buf, size_t len)
{
	buf[0] = '\0';
	switch (json_typeof(v)) {
	case JSON_STRING:
		usbgw_strlcpy(buf, json_string_value(v), len);
		break;
	case JSON_INTEGER:
		snprintf(buf, len, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		break;
	case JSON_REAL:
		snprintf(buf, len, "%.3f", json_real_value(v));
		break;
	case JSON_TRUE:
		usbgw_strlcpy(buf, "1", len);
		break;
	case JSON_FALSE:
		usbgw_strlcpy(buf, "0", len);
		break;
	default:
		break;
	}
}

static int
is_scalar(const json_t *v)
{
	return json_is_string(v) || json_is_number(v) || json_is_boolean(v) ||
	    json_is_null(v);
}

int
hooks_run_json(const char *event, const json_t *data)
{
	struct hook_kv kv[HOOK_MAX_ENV] = { { NULL, NULL } };
	char keys[HOOK_MAX_ENV][HOOK_KEY_MAX + 1];
	char *vals[HOOK_MAX_ENV];
	char sbuf[HOOK_MAX_VALUE + 1];
	const char *k, *k2;
	json_t *v, *v2;
	size_t n = 0, i, idx;
	int rv;

	if (json_is_object(data)) {
		json_object_foreach((json_t *)data, k, v) {
			if (n >= HOOK_MAX_ENV)
				break;
			if (is_scalar(v)) {
				scalar_str(v, sbuf, sizeof(sbuf));
				snprintf(keys[n], sizeof(keys[n]), "%s", k);
				vals[n++] = xstrdup(sbuf);
			} else if (json_is_array(v)) {
				char *joined = xstrdup("");

				json_array_foreach(v, idx, v2) {
					char *t;

					if (!is_scalar(v2))
						continue;
					scalar_str(v2, sbuf, sizeof(sbuf));
					xasprintf(&t, "%s%s%s", joined,
					    joined[0] != '\0' ? " " : "", sbuf);
					free(joined);
					joined = t;
					if (strlen(joined) > HOOK_MAX_VALUE)
						break;
				}
				snprintf(keys[n], sizeof(keys[n]), "%s", k);
				vals[n++] = joined;
			} else if (json_is_object(v)) {
				json_object_foreach(v, k2, v2) {
					if (n >= HOOK_MAX_ENV)
						break;
					if (!is_scalar(v2))
						continue;
					scalar_str(v2, sbuf, sizeof(sbuf));
					snprintf(keys[n], sizeof(keys[n]),
					    "%s_%s", k, k2);
					vals[n++] = xstrdup(sbuf);
				}
			}
		}
	}
	for (i = 0; i < n; i++) {
		kv[i].key = keys[i];
		kv[i].value = vals[i];
	}
	rv = hooks_run(event, kv, n);
	for (i = 0; i < n; i++)
		free(vals[i]);
	return rv;
}

void
hooks_shutdown(void)
{
	struct hook_run *r;

	if (!H.ready)
		return;
	while ((r = TAILQ_FIRST(&H.queue)) != NULL) {
		TAILQ_REMOVE(&H.queue, r, entry);
		run_free(r);
	}
	H.nqueued = 0;
	while ((r = TAILQ_FIRST(&H.running)) != NULL) {
		TAILQ_REMOVE(&H.running, r, entry);
		if (r->pid > 0) {
			kill(-r->pid, SIGKILL);
			while (waitpid(r->pid, NULL, 0) == -1 && errno == EINTR)
				;
		}
		run_free(r);
	}
	H.nrunning = 0;
}
