/*
 * usbgw watch [--json] [--events LIST] [--prompt]
 *
 * Without --prompt: print every event as it happens (JSON Lines with
 * --json).  With --prompt: the pairing dialog for a terminal.  Each new
 * pending device or access request is queued (one entry per busid) and
 * shown with what, where and who; the operator answers approve once,
 * approve permanently, deny or skip.  An entry another operator resolves
 * meanwhile (approve, deny, gone, revoke events) leaves the queue with a
 * note.  A pairing (an agent or vhci host enrolling) is shown with its
 * name, address and code, answered approve, reject or skip.  Answers go
 * over the same connection; events that arrive while an answer is in
 * flight are queued by client.c.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "usbgw.h"
#include "util.h"

#define PROMPT_MAX_QUEUE	256
#define PROMPT_LINE_MAX		256

static const struct cmd_opt opts[] = {
	{ "events", 'e', "LIST", "only these events, comma-separated "
	    "(pending, access-request, approve, deny, revoke, ...)" },
	{ "prompt", 'p', NULL, "interactive: ask about each new pending device "
	    "or access request" },
	{ NULL, 0, NULL, NULL }
};

static const char *
ev_from(const json_t *d)
{
	return *jstr(d, "from") != '\0' ? jstr(d, "from") :
	    jstr(d, "old_state");
}

static const char *
ev_to(const json_t *d)
{
	return *jstr(d, "to") != '\0' ? jstr(d, "to") : jstr(d, "state");
}

static void
print_event_human(const json_t *msg)
{
	const json_t *d = json_object_get(msg, "data"), *dec;
	const char *type = jstr(msg, "event");
	double t = json_number_value(json_object_get(msg, "time"));
	time_t secs = (time_t)t;
	struct tm tm;
	char when[32], actor[128], line[1024], denied[512];
	size_t n = 0;

	localtime_r(&secs, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	n += (size_t)snprintf(line + n, sizeof(line) - n, "%s.%03d %-15s ",
	    when, (int)((t - (double)secs) * 1000) % 1000, type);
	if (*jstr(d, "busid") != '\0')
		n += (size_t)snprintf(line + n, sizeof(line) - n, "%s %s",
		    jstr(d, "busid"), device_name(d));
	else if (*jstr(d, "name") != '\0' || *jstr(d, "exporter") != '\0')
		n += (size_t)snprintf(line + n, sizeof(line) - n, "exporter %s "
		    "%s:%s", *jstr(d, "name") != '\0' ? jstr(d, "name") :
		    jstr(d, "exporter"), jstr(d, "host"), jfmt(d, "port"));
	if (n < sizeof(line) && *ev_from(d) != '\0' && *ev_to(d) != '\0')
		n += (size_t)snprintf(line + n, sizeof(line) - n, " [%s -> %s]",
		    ev_from(d), ev_to(d));
	if (n < sizeof(line) && *jstr(d, "host") != '\0' &&
	    *jstr(d, "busid") != '\0')
		n += (size_t)snprintf(line + n, sizeof(line) - n, " host %s",
		    jstr(d, "host"));
	if (n < sizeof(line) && json_object_get(d, "actor") != NULL)
		n += (size_t)snprintf(line + n, sizeof(line) - n, " by %s",
		    actor_str(json_object_get(d, "actor"), actor,
		    sizeof(actor)));
	if (n < sizeof(line) && *jstr(d, "reason") != '\0')
		n += (size_t)snprintf(line + n, sizeof(line) - n, ": %s",
		    jstr(d, "reason"));
	/* an interface-policy: which interfaces it denies */
	dec = json_object_get(d, "decision");
	if (n < sizeof(line) &&
	    json_is_true(json_object_get(dec, "per_interface")) &&
	    format_iface_decisions(dec, true, denied, sizeof(denied)) > 0)
		snprintf(line + n, sizeof(line) - n, " [interfaces denied: %s]",
		    denied);
	print_safe(stdout, line);
	putchar('\n');
}

static json_t *
events_arg(const char *list)
{
	json_t *a = json_array();
	char *copy = xstrdup(list), *t, *save;

	for (t = strtok_r(copy, ",", &save); t != NULL;
	    t = strtok_r(NULL, ",", &save))
		json_array_append_new(a, json_string(t));
	free(copy);
	return a;
}

/* ---- the pairing dialog ----------------------------------------------- */

struct prompt {
	struct client	*cl;
	json_t		*queue;		/* array of event messages */
	char		 line[PROMPT_LINE_MAX];
	size_t		 len;
	int		 stdin_eof;
};

/* 1 for a pairing's events (pairing, pairing-end). */
static int
is_pairing(const json_t *msg)
{
	return strncmp(jstr(msg, "event"), "pairing", 7) == 0;
}

/*
 * What a question is about: a device's busid, or "pairing:ID" for a
 * pairing (the agents row's id), into buf.
 */
static const char *
qkey(const json_t *msg, char *buf, size_t len)
{
	const json_t *d = json_object_get(msg, "data");

	if (is_pairing(msg))
		snprintf(buf, len, "pairing:%lld", (long long)
		    json_integer_value(json_object_get(d, "id")));
	else
		usbgw_strlcpy(buf, jstr(d, "busid"), len);
	return buf;
}

static int
queue_find(struct prompt *p, const char *key)
{
	json_t *m;
	size_t i;
	char k[64];

	json_array_foreach(p->queue, i, m)
		if (strcmp(qkey(m, k, sizeof(k)), key) == 0)
			return (int)i;
	return -1;
}

/* An event: queue a question, or drop one another operator answered. */
static int
prompt_event(struct prompt *p, json_t *msg, const char *current)
{
	const char *type = jstr(msg, "event");
	const json_t *d = json_object_get(msg, "data");
	char key[64];
	const char *busid = qkey(msg, key, sizeof(key));
	char actor[128];
	int i, resolved = 0;

	if (*busid == '\0') {
		json_decref(msg);
		return 0;
	}
	i = queue_find(p, busid);
	if (strcmp(type, "pairing") == 0) {
		if (i < 0 && json_array_size(p->queue) < PROMPT_MAX_QUEUE)
			json_array_append(p->queue, msg);
	} else if (strcmp(type, "pairing-end") == 0) {
		if (i >= 0 || (current != NULL && strcmp(current, busid) == 0)) {
			printf("\n(pairing of ");
			print_safe(stdout, jstr(d, "name"));
			printf(": %s", jstr(d, "outcome"));
			if (*jstr(d, "actor") != '\0') {
				printf(" by ");
				print_safe(stdout, jstr(d, "actor"));
			}
			printf(" meanwhile)\n");
			resolved = current != NULL &&
			    strcmp(current, busid) == 0;
		}
		if (i >= 0)
			json_array_remove(p->queue, (size_t)i);
	} else if (strcmp(type, "identity-change") == 0 ||
	    strcmp(type, "identity-anomaly") == 0) {
		/*
		 * Another device now stands at this busid, or its exporter
		 * claims something else than it is: the question asked was
		 * about what stood there before.  Withdraw it; ask anew.
		 */
		if (i >= 0 || (current != NULL && strcmp(current, busid) == 0)) {
			printf("\n(");
			print_safe(stdout, busid);
			printf(": %s; the question is withdrawn and asked "
			    "again)\n", strcmp(type, "identity-anomaly") == 0 ?
			    "identity anomaly" : "a different device now");
			resolved = current != NULL &&
			    strcmp(current, busid) == 0;
		}
		if (i >= 0)
			json_array_set(p->queue, (size_t)i, msg);
		else if (json_array_size(p->queue) < PROMPT_MAX_QUEUE)
			json_array_append(p->queue, msg);
	} else if (strcmp(type, "pending") == 0 ||
	    strcmp(type, "access-request") == 0) {
		if (i >= 0)
			json_array_set(p->queue, (size_t)i, msg);	/* newer */
		else if (json_array_size(p->queue) < PROMPT_MAX_QUEUE)
			json_array_append(p->queue, msg);
	} else if (strcmp(type, "approve") == 0 || strcmp(type, "deny") == 0 ||
	    strcmp(type, "gone") == 0 || strcmp(type, "revoke") == 0) {
		if (i >= 0 || (current != NULL && strcmp(current, busid) == 0)) {
			printf("\n(");
			print_safe(stdout, busid);
			printf(": %s", type);
			if (json_object_get(d, "actor") != NULL) {
				printf(" by ");
				print_safe(stdout, actor_str(json_object_get(d,
				    "actor"), actor, sizeof(actor)));
			}
			printf(" meanwhile)\n");
			resolved = current != NULL &&
			    strcmp(current, busid) == 0;
		}
		if (i >= 0)
			json_array_remove(p->queue, (size_t)i);
	}
	json_decref(msg);
	return resolved;
}

static void
show_pairing(const json_t *msg)
{
	const json_t *d = json_object_get(msg, "data");

	printf("\nPairing request (enrollment):\n  name        ");
	print_safe(stdout, jstr(d, "name"));
	printf(" (%s)\n  from        ", jstr(d, "role"));
	print_safe(stdout, jstr(d, "address"));
	printf("\n  code        ");
	print_safe(stdout, jstr(d, "code"));
	printf("\nApprove only if the client shows the same code.\n"
	    "[a]pprove, [r]eject, [s]kip, [q]uit? ");
	fflush(stdout);
}

/* agent.approve or agent.reject for the pairing the question showed. */
static int
answer_pairing(struct prompt *p, const json_t *d, char c)
{
	json_t *res = NULL, *args;
	char msg[512];
	int st;

	args = json_pack("{s:s, s:s, s:I}", "code", jstr(d, "code"), "name",
	    jstr(d, "name"), "id", json_integer_value(json_object_get(d, "id")));
	st = client_call_quiet(p->cl, c == 'a' ? "agent.approve" :
	    "agent.reject", args, &res, msg, sizeof(msg));
	if (st == EXIT_OK) {
		printf("%s ", c == 'a' ? "approved" : "rejected");
		print_safe(stdout, jstr(d, "name"));
		if (c == 'a') {
			printf(": certificate ");
			print_safe(stdout, jstr(res, "fingerprint"));
		}
		printf("\n");
	} else {
		printf("could not %s the pairing: ", c == 'a' ? "approve" :
		    "reject");
		print_safe(stdout, msg);
		printf("\n");
	}
	json_decref(res);
	return st == EXIT_UNREACHABLE ? st : EXIT_OK;
}

static void
show_question(const json_t *msg)
{
	const json_t *d = json_object_get(msg, "data"), *ifs, *x, *dec;
	const char *cn;
	char denied[512];
	size_t i;

	if (strcmp(jstr(msg, "event"), "access-request") == 0)
		printf("\nAccess request for a pending device:\n");
	else if (strcmp(jstr(msg, "event"), "identity-change") == 0)
		printf("\nA different device now at this busid:\n");
	else if (strcmp(jstr(msg, "event"), "identity-anomaly") == 0) {
		printf("\nIdentity anomaly (blocked until you decide): ");
		print_safe(stdout, jstr(d, "anomaly"));
		printf("\n");
	} else
		printf("\nNew device waiting for approval:\n");
	printf("  busid       ");
	print_safe(stdout, jstr(d, "busid"));
	printf("\n  device      ");
	print_safe(stdout, device_name(d));
	if (*jstr(d, "serial") != '\0') {
		printf("\n  serial      ");
		print_safe(stdout, jstr(d, "serial"));
	}
	if (json_is_array(ifs = json_object_get(d, "interfaces")) &&
	    json_array_size(ifs) > 0) {
		printf("\n  interfaces ");
		json_array_foreach(ifs, i, x) {
			printf(" ");
			print_safe(stdout, json_string_value(x));
			if (json_is_string(x) &&
			    (cn = usb_class_name(json_string_value(x))) != NULL)
				printf(" (%s)", cn);
		}
	}
	dec = json_object_get(d, "decision");
	if (json_is_true(json_object_get(dec, "per_interface"))) {
		size_t nd = format_iface_decisions(dec, true, denied,
		    sizeof(denied));

		printf("\n  interface-policy, once approved: ");
		if (nd == 0)
			printf("every interface allowed");
		else if (nd == json_array_size(json_object_get(dec,
		    "interfaces"))) {
			printf("every interface denied (");
			print_safe(stdout, denied);
			printf("): nothing usable");
		} else {
			printf("denied ");
			print_safe(stdout, denied);
		}
	}
	if (*device_identity_str(d) != '\0') {
		printf("\n  identity    ");
		print_safe(stdout, device_identity_str(d));
	}
	printf("\n  exporter    ");
	print_safe(stdout, jstr(d, "exporter"));
	printf(" (busid ");
	print_safe(stdout, jstr(d, "exporter_busid"));
	printf(")\n");
	if (*jstr(d, "host") != '\0') {
		printf("  requested   by ");
		print_safe(stdout, jstr(d, "host"));
		printf("\n");
	}
	printf("[a]pprove once, approve [p]ermanently, [d]eny, [s]kip, "
	    "[q]uit? ");
	fflush(stdout);
}

/*
 * Wait for a line on stdin or for events.  Returns 1 with a line in
 * p->line; 0 when the current question got resolved elsewhere, or, when
 * idle (current NULL), as soon as a question is queued; -1 at stdin EOF;
 * or an exit status (> 1) when the daemon went away.
 */
static int
wait_line(struct prompt *p, const char *current)
{
	struct pollfd pfd[2];
	json_t *ev;
	ssize_t n;
	char *nl;
	int st;

	for (;;) {
		while ((st = client_next_event(p->cl, 0, &ev)) == EXIT_OK)
			if (prompt_event(p, ev, current))
				return 0;
		if (st != -1)
			return st;
		if (current == NULL && json_array_size(p->queue) > 0)
			return 0;	/* idle, and there is a question */
		if ((nl = memchr(p->line, '\n', p->len)) != NULL) {
			*nl = '\0';
			return 1;
		}
		if (p->stdin_eof)
			return -1;
		pfd[0].fd = client_fd(p->cl);
		pfd[0].events = POLLIN;
		pfd[1].fd = 0;
		pfd[1].events = POLLIN;
		if (poll(pfd, 2, -1) == -1 && errno != EINTR)
			return EXIT_INTERNAL;
		if (pfd[1].revents != 0) {
			if (p->len >= sizeof(p->line) - 1)
				p->len = 0;	/* an overlong line: drop it */
			n = read(0, p->line + p->len, sizeof(p->line) - 1 - p->len);
			if (n <= 0)
				p->stdin_eof = 1;
			else
				p->len += (size_t)n;
		}
	}
}

static void
consume_line(struct prompt *p)
{
	size_t l = strlen(p->line) + 1;

	memmove(p->line, p->line + l, p->len - l);
	p->len -= l;
}

/*
 * The operator's answer names the identity the question showed: if
 * another device stands at the busid by now, the daemon refuses.
 */
static int
answer(struct prompt *p, const char *busid, const char *hash, char c)
{
	json_t *res = NULL, *args;
	char msg[512];
	const char *cmd = c == 'd' ? "deny" : "approve";
	int st;

	args = json_pack("{s:s, s:s, s:s}", "busid", busid, "scope",
	    c == 'p' ? "permanent" : "once", "message",
	    "answered at usbgw watch --prompt");
	if (c == 'd')
		json_object_set_new(args, "permanent", json_false());
	if (*hash != '\0')
		json_object_set_new(args, "identity", json_string(hash));
	st = client_call_quiet(p->cl, cmd, args, &res, msg, sizeof(msg));
	if (st == EXIT_OK) {
		printf("%s ", c == 'd' ? "denied" : "approved");
		print_safe(stdout, busid);
		printf("%s; now %s\n", c == 'p' ? " permanently" : c == 'a' ?
		    " once" : "", jstr(res, "state"));
	} else {
		printf("could not %s ", cmd);
		print_safe(stdout, busid);
		printf(": ");
		print_safe(stdout, msg);
		printf("\n");
	}
	json_decref(res);
	return st == EXIT_UNREACHABLE ? st : EXIT_OK;
}

static int
prompt_loop(struct client *cl)
{
	struct prompt p;
	json_t *q;
	char busid[64], hash[72];
	int r, st = EXIT_OK;

	memset(&p, 0, sizeof(p));
	p.cl = cl;
	p.queue = json_array();
	printf("waiting for pending devices, access requests and pairings "
	    "(q or Ctrl-D to quit)\n");
	fflush(stdout);
	for (;;) {
		if (json_array_size(p.queue) == 0) {
			r = wait_line(&p, NULL);
			if (r == -1)
				break;
			if (r > 1) {
				st = r;
				break;
			}
			if (r == 1) {
				if (p.line[0] == 'q') {
					consume_line(&p);
					break;
				}
				consume_line(&p);
			}
			continue;
		}
		q = json_incref(json_array_get(p.queue, 0));
		json_array_remove(p.queue, 0);
		qkey(q, busid, sizeof(busid));
		if (is_pairing(q)) {
			show_pairing(q);
			for (;;) {
				r = wait_line(&p, busid);
				if (r != 1)
					break;
				if (strcmp(p.line, "a") == 0 ||
				    strcmp(p.line, "r") == 0) {
					char c = p.line[0];

					consume_line(&p);
					r = answer_pairing(&p, json_object_get(q,
					    "data"), c);
					break;
				}
				if (strcmp(p.line, "s") == 0 ||
				    strcmp(p.line, "q") == 0) {
					r = p.line[0] == 'q' ? -1 : EXIT_OK;
					consume_line(&p);
					if (r == EXIT_OK)
						printf("skipped\n");
					break;
				}
				consume_line(&p);
				printf("please answer a, r, s or q: ");
				fflush(stdout);
			}
			json_decref(q);
			fflush(stdout);
			if (r == -1)
				break;
			if (r > 1) {
				st = r;
				break;
			}
			continue;
		}
		/* the answer names the identity shown: its device id */
		snprintf(hash, sizeof(hash), "%lld", (long long)
		    json_integer_value(json_object_get(json_object_get(q,
		    "data"), "id")));
		if (strcmp(hash, "0") == 0)
			hash[0] = '\0';
		show_question(q);
		json_decref(q);
		for (;;) {
			r = wait_line(&p, busid);
			if (r != 1)
				break;
			if (strcmp(p.line, "a") == 0 || strcmp(p.line, "p") == 0 ||
			    strcmp(p.line, "d") == 0) {
				char c = p.line[0];

				consume_line(&p);
				r = answer(&p, busid, hash, c);
				break;
			}
			if (strcmp(p.line, "s") == 0) {
				consume_line(&p);
				printf("skipped\n");
				r = EXIT_OK;
				break;
			}
			if (strcmp(p.line, "q") == 0) {
				consume_line(&p);
				r = -1;
				break;
			}
			consume_line(&p);
			printf("please answer a, p, d, s or q: ");
			fflush(stdout);
		}
		fflush(stdout);
		if (r == -1)
			break;
		if (r > 1) {
			st = r;
			break;
		}
	}
	json_decref(p.queue);
	return st;
}

static int
cmd_watch_exec(struct cmd_ctx *ctx)
{
	const char *events = arg_get(ctx, "events");
	int prompt = arg_has(ctx, "prompt");
	json_t *args, *res = NULL, *ev;
	int st;

	if (prompt && ctx->json)
		return usage_error(ctx, "--prompt and --json exclude each other");
	if (prompt && (!isatty(0) || !isatty(1)))
		return usage_error(ctx, "--prompt needs a terminal");
	if ((st = cmd_connect(ctx)) != EXIT_OK)
		return st;
	args = json_object();
	if (events != NULL)
		json_object_set_new(args, "events", events_arg(events));
	else if (prompt)
		json_object_set_new(args, "events", events_arg("pending,"
		    "access-request,approve,deny,revoke,gone,identity-change,"
		    "identity-anomaly,pairing,pairing-end"));
	if ((st = client_call(ctx->cl, "watch", args, &res)) != EXIT_OK)
		return st;
	json_decref(res);
	if (prompt)
		return prompt_loop(ctx->cl);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (;;) {
		if ((st = client_next_event(ctx->cl, -1, &ev)) != EXIT_OK)
			return st;
		if (ctx->json) {
			json_dumpf(ev, stdout, JSON_COMPACT |
			    JSON_REAL_PRECISION(15));
			putchar('\n');
		} else
			print_event_human(ev);
		json_decref(ev);
		if (fflush(stdout) == EOF)
			return EXIT_OK;		/* reader went away */
	}
}

const struct cmd_entry cmd_watch_entry = {
	"watch", "[--json] [--events LIST] [--prompt]",
	"print events as they happen, or (--prompt) answer pending devices "
	"interactively",
	PRIV_READ, 0, 0, opts, cmd_watch_exec
};
