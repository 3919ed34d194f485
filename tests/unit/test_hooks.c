/*
 * Hooks: the environment a hook sees (only PATH and sanitized USBGW_*),
 * event selection, the JSON flattening, output logging, the concurrency
 * cap and queue bound, and a hook that hangs: killed at its limit (TERM,
 * then KILL for one that ignores TERM) while the loop keeps running.
 */
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "control/config.h"
#include "control/hooks.h"
#include "base/log.h"
#include "base/util.h"
#include "tap.h"

static struct event_base *base;
static char dir[64];
static int ticks;

static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	ticks++;
}

static void
pump(int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
}

/* Pump until no hook runs or ms passed; returns ms waited. */
static int
pump_until_idle(int ms)
{
	int waited = 0;

	while (hooks_running() + hooks_queued() > 0 && waited < ms) {
		pump(10);
		waited += 10;
	}
	return waited;
}

static char *
slurp(const char *name)
{
	char path[256], *buf;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((f = fopen(path, "r")) == NULL)
		return NULL;
	buf = calloc(1, 65536);
	n = fread(buf, 1, 65535, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static int
has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	const char *p = text;

	while (p != NULL && *p != '\0') {
		if (strncmp(p, line, n) == 0 && (p[n] == '\n' || p[n] == '\0'))
			return 1;
		p = strchr(p, '\n');
		if (p != NULL)
			p++;
	}
	return 0;
}

static int
count_lines(const char *text)
{
	int n = 0;

	for (; text != NULL && *text != '\0'; text++)
		n += *text == '\n';
	return n;
}

static struct config *
mkcfg(const char *text)
{
	struct config *c = config_new();
	char *errs = NULL;

	if (config_parse_buf(c, "hooks.conf", text, strlen(text), &errs) != 0) {
		diag("config: %s", errs);
		exit(1);
	}
	free(errs);
	return c;
}

static void
test_env(void)
{
	struct config *c;
	char conf[1024], *env;
	json_t *j;
	struct hook_kv kv[] = {
		{ "BUSID", "tc17-1-1.2" },
		{ "vid", "046d" },
		{ "product", "Evil\nProduct\x01\xc3\xa9" },
		{ "EVENT", "forged" },
		{ "exporter busid", "1-1.2" },
		{ NULL, "skipped" },
	};

	snprintf(conf, sizeof(conf),
	    "hook pending,approve env > %s/env.$USBGW_EVENT\n"
	    "hook deny echo deny > %s/deny\n", dir, dir);
	c = mkcfg(conf);
	hooks_init(base, c);
	setenv("SECRET_FROM_PARENT", "x", 1);

	is_int(hooks_run("pending", kv, nitems(kv)), 1, "one hook for pending");
	is_int(hooks_run("revoke", kv, nitems(kv)), 0, "none for revoke");
	is_int(hooks_run("no-such-event", kv, nitems(kv)), 0, "unknown event");
	pump_until_idle(3000);
	env = slurp("env.pending");
	ok(env != NULL, "hook ran");
	ok(has_line(env, "USBGW_EVENT=pending"), "USBGW_EVENT");
	ok(has_line(env, "USBGW_BUSID=tc17-1-1.2"), "USBGW_BUSID");
	ok(has_line(env, "USBGW_VID=046d"), "key upper-cased");
	ok(has_line(env, "USBGW_PRODUCT=Evil?Product???"),
	    "value sanitized to printable ASCII");
	ok(has_line(env, "USBGW_EXPORTER_BUSID=1-1.2"), "key characters mapped");
	ok(strstr(env, "forged") == NULL, "USBGW_EVENT cannot be forged");
	ok(strstr(env, "SECRET_FROM_PARENT") == NULL,
	    "daemon environment not passed");
	ok(strstr(env, "USBGW_TIME=") != NULL, "USBGW_TIME");
	ok(strstr(env, "PATH=/usr/local/sbin:") != NULL, "fixed PATH");
	free(env);

	j = json_pack("{s:s, s:s, s:i, s:b, s:n, "
	    "s:[s,s], s:{s:s, s:i}, s:{s:{s:s}}}",
	    "busid", "tc17-1-2", "state", "authorized", "port", 3240,
	    "attached", 1, "attached_to", "interfaces", "03:01:01", "08:06:50",
	    "actor", "name", "alice", "uid", 1000, "deep", "er", "x", "y");
	is_int(hooks_run_json("approve", j), 1, "JSON hook started");
	json_decref(j);
	pump_until_idle(3000);
	env = slurp("env.approve");
	ok(env != NULL, "JSON hook ran");
	ok(has_line(env, "USBGW_BUSID=tc17-1-2"), "JSON string");
	ok(has_line(env, "USBGW_PORT=3240"), "JSON integer");
	ok(has_line(env, "USBGW_ATTACHED=1"), "JSON boolean");
	ok(has_line(env, "USBGW_ATTACHED_TO="), "JSON null is empty");
	ok(has_line(env, "USBGW_INTERFACES=03:01:01 08:06:50"),
	    "JSON array joined");
	ok(has_line(env, "USBGW_ACTOR_NAME=alice"), "nested object flattened");
	ok(has_line(env, "USBGW_ACTOR_UID=1000"), "nested integer");
	ok(strstr(env, "USBGW_DEEP") == NULL, "deeper nesting ignored");
	free(env);
	config_free(c);
}

static void
test_output_logged(void)
{
	struct config *c;
	char conf[512], logpath[256], *log;
	int fd, saved;

	snprintf(conf, sizeof(conf), "hook gone echo hello from hook; "
	    "printf 'bad\\001byte\\n' >&2; exit 3\n");
	c = mkcfg(conf);
	hooks_reconfigure(c);
	snprintf(logpath, sizeof(logpath), "%s/log", dir);
	fd = open(logpath, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	fflush(stderr);
	saved = dup(2);
	dup2(fd, 2);
	close(fd);
	log_setlevel(LOG_LVL_INFO);
	hooks_run("gone", NULL, 0);
	pump_until_idle(3000);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	log_setlevel(LOG_LVL_ERR);
	log = slurp("log");
	ok(log != NULL && strstr(log, ": hello from hook") != NULL,
	    "stdout logged");
	ok(log != NULL && strstr(log, ": bad\\x01byte") != NULL,
	    "stderr logged, escaped");
	ok(log != NULL && strstr(log, "exited with status 3") != NULL,
	    "exit status logged");
	free(log);
	config_free(c);
}

static void
test_cap_and_queue(void)
{
	struct config *c;
	char conf[512], *out;
	int i, n = 0;

	snprintf(conf, sizeof(conf), "hook-max-running = 2\n"
	    "hook detach sleep 0.3; echo done >> %s/cap\n", dir);
	c = mkcfg(conf);
	hooks_reconfigure(c);
	for (i = 0; i < 5; i++)
		n += hooks_run("detach", NULL, 0);
	is_int(n, 5, "five runs accepted");
	is_int(hooks_running(), 2, "two run at once");
	is_int(hooks_queued(), 3, "three wait");
	pump_until_idle(5000);
	out = slurp("cap");
	is_int(count_lines(out), 5, "all five ran");
	free(out);
	config_free(c);

	/* Queue bound: 1 running + HOOK_MAX_QUEUED queued, the rest dropped. */
	c = mkcfg("hook-max-running = 1\nhook attach sleep 5\n");
	hooks_reconfigure(c);
	for (i = 0, n = 0; i < HOOK_MAX_QUEUED + 10; i++)
		n += hooks_run("attach", NULL, 0);
	is_int(n, HOOK_MAX_QUEUED + 1, "queue is bounded");
	is_int(hooks_queued(), HOOK_MAX_QUEUED, "queue full");
	hooks_shutdown();
	is_int(hooks_running() + hooks_queued(), 0, "shutdown kills and drops");
	config_free(c);
}

static int
pid_alive(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	if ((f = fopen(path, "r")) == NULL)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p != NULL && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

static pid_t
read_pid(const char *name)
{
	char *s = slurp(name);
	pid_t pid = s != NULL ? (pid_t)atol(s) : 0;

	free(s);
	return pid;
}

static void
test_hang(void)
{
	struct config *c;
	char conf[1024];
	struct event *tick;
	struct timeval tv = { 0, 20000 };
	uint64_t t0, dt;
	pid_t sh, child, sh2;

	snprintf(conf, sizeof(conf), "hook-timeout = 300ms\n"
	    "hook revoke echo $$ > %s/pid; sleep 30 & echo $! > %s/child; wait\n"
	    "hook identity-change trap '' TERM; echo $$ > %s/pid2; "
	    "sleep 30 & wait; wait; wait\n", dir, dir, dir);
	c = mkcfg(conf);
	hooks_init(base, c);
	tick = event_new(base, -1, EV_PERSIST, tick_cb, NULL);
	event_add(tick, &tv);

	ticks = 0;
	t0 = now_usec();
	is_int(hooks_run("revoke", NULL, 0), 1, "hanging hook started");
	dt = now_usec() - t0;
	/* (bounds are loose: a shared, loaded machine; the hook sleeps 30 s) */
	ok(dt < 1000000, "hooks_run returned at once (%llu us)",
	    (unsigned long long)dt);
	pump(150);
	sh = read_pid("pid");
	child = read_pid("child");
	ok(sh > 0 && pid_alive(sh), "hook shell running");
	ok(child > 0 && pid_alive(child), "its child running");
	pump_until_idle(10000);
	/* (by the clock: on a loaded machine a pump takes longer than asked) */
	dt = (now_usec() - t0) / 1000;
	ok(hooks_running() == 0, "hook ended after %llu ms",
	    (unsigned long long)dt);
	ok(dt >= 280 && dt < 10000,
	    "killed at its 300 ms limit, not before (nor after its 30 s)");
	ok(!pid_alive(sh), "shell gone");
	pump(50);
	ok(!pid_alive(child), "its child killed too (process group)");
	ok(ticks >= 5, "loop kept running: %d ticks", ticks);

	/* One that ignores SIGTERM is killed HOOK_KILL_GRACE_MS later. */
	t0 = now_usec();
	hooks_run("identity-change", NULL, 0);
	pump(150);
	sh2 = read_pid("pid2");
	ok(sh2 > 0 && pid_alive(sh2), "TERM-ignoring hook running");
	pump(600);
	ok(pid_alive(sh2), "still alive after SIGTERM");
	pump_until_idle(15000);
	dt = (now_usec() - t0) / 1000;
	ok(hooks_running() == 0 && !pid_alive(sh2), "killed with SIGKILL after "
	    "%llu ms", (unsigned long long)dt);
	ok(dt >= 300 + HOOK_KILL_GRACE_MS - 100 && dt < 300 +
	    HOOK_KILL_GRACE_MS + 10000, "at limit + grace, not before");
	event_free(tick);
	config_free(c);
}

int
main(void)
{
	signal(SIGPIPE, SIG_IGN);
	log_init("test_hooks", 1, getenv("TEST_VERBOSE") ? LOG_LVL_DEBUG :
	    LOG_LVL_ERR);
	snprintf(dir, sizeof(dir), "/tmp/test_hooks.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return 1;
	base = event_base_new();

	is_str(hook_event_name(HOOK_EV_ACCESS_REQUEST), "access-request",
	    "event names");
	is_int(hook_event_parse("identity-change"), HOOK_EV_IDENTITY_CHANGE,
	    "event parse");
	is_int(hook_event_parse("plugged"), -1, "unknown event");

	test_env();
	test_output_logged();
	test_cap_and_queue();
	test_hang();
	hooks_shutdown();
	event_base_free(base);
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			diag("cleanup failed");
	}
	return done_testing();
}
