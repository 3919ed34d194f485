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
#include "base/util.h"

#define PROMPT_MAX_QUEUE	256
#define PROMPT_LINE_MAX		256
#define PROMPT_LIST_MAX		20	/* already-pending devices listed */
#define PROMPT_MAX_ASKED	4096	/* presence keys remembered */

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
	char when[32], zone[16], actor[128], line[1024], denied[512];
	size_t n = 0;

	/* local time, its zone said on every line (TZ decides) */
	localtime_r(&secs, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	strftime(zone, sizeof(zone), "%Z", &tm);
	n += (size_t)snprintf(line + n, sizeof(line) - n, "%s.%03d %s %-15s ",
	    when, (int)((t - (double)secs) * 1000) % 1000, zone, type);
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
	json_t		*asked;		/* presence keys already asked */
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

/*
 * What makes a device question the same question: the device at the
 * busid (its id, one per identity), and for an access request the host
 * that asked.  A key asked once in this presence is not asked again: the
 * already-pending list and the events that raced it name the same
 * devices.  A decision, a departure or an identity change at the busid
 * ends the presence's questions (forget_busid).
 */
static const char *
presence_key(const json_t *msg, char *buf, size_t len)
{
	const json_t *d = json_object_get(msg, "data");
	int access = strcmp(jstr(msg, "event"), "access-request") == 0;

	snprintf(buf, len, "%s#%lld#%s", jstr(d, "busid"), (long long)
	    json_integer_value(json_object_get(d, "id")),
	    access ? jstr(d, "host") : "");
	return buf;
}

static int
was_asked(struct prompt *p, const json_t *msg)
{
	char k[PROMPT_LINE_MAX];

	return json_object_get(p->asked, presence_key(msg, k, sizeof(k))) !=
	    NULL;
}

static void
mark_asked(struct prompt *p, const json_t *msg)
{
	char k[PROMPT_LINE_MAX];

	/* bounded: past the cap, forget them all (the worst is a re-ask) */
	if (json_object_size(p->asked) >= PROMPT_MAX_ASKED)
		json_object_clear(p->asked);
	json_object_set_new(p->asked, presence_key(msg, k, sizeof(k)),
	    json_true());
}

/* The questions asked about busid's presence are answered, or moot. */
static void
forget_busid(struct prompt *p, const char *busid)
{
	const char *k;
	json_t *v;
	void *tmp;
	size_t l = strlen(busid);

	json_object_foreach_safe(p->asked, tmp, k, v)
		if (strncmp(k, busid, l) == 0 && k[l] == '#')
			json_object_del(p->asked, k);
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
		forget_busid(p, busid);
		if (i >= 0)
			json_array_set(p->queue, (size_t)i, msg);
		else if (json_array_size(p->queue) < PROMPT_MAX_QUEUE)
			json_array_append(p->queue, msg);
	} else if (strcmp(type, "pending") == 0 ||
	    strcmp(type, "access-request") == 0) {
		if (was_asked(p, msg))
			;	/* this presence's question was asked */
		else if (i >= 0)
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
		forget_busid(p, busid);
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
	char since[48], denied[512];
	size_t i;

	if (strcmp(jstr(msg, "event"), "access-request") == 0)
		printf("\nAccess request for a pending device:\n");
	else if (strcmp(jstr(msg, "event"), "identity-change") == 0)
		printf("\nA different device now at this busid:\n");
	else if (strcmp(jstr(msg, "event"), "identity-anomaly") == 0) {
		printf("\nIdentity anomaly (blocked until you decide): ");
		print_safe(stdout, jstr(d, "anomaly"));
		printf("\n");
	} else if (json_is_true(json_object_get(msg, "already"))) {
		fmt_time(since, sizeof(since), json_integer_value(
		    json_object_get(d, "since")));
		printf("\nDevice waiting for approval since %s:\n", since);
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
	printf("(a/p/d take: for 1h, until 18:00, to HOST, -m REASON; ? for "
	    "help)\n[a]pprove once, approve [p]ermanently, [d]eny, [s]kip, "
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
 * An answer to a device question: a key, then for a, p and d the words
 * usbgw approve/deny take, with or without their dashes:
 *
 *	a [once | for DURATION | until TIME] [to HOST] [-m REASON...]
 *	p [to HOST] [-m REASON...]
 *	d [-m REASON...]
 *	s | q | ?
 *
 * -m takes the rest of the line.  A word that does not fit makes the
 * whole answer invalid: nothing is sent, the operator is asked again.
 */
struct answer {
	char		 key;
	const char	*scope;		/* once, for, until, permanent */
	int64_t		 secs;		/* for */
	time_t		 until;
	char		 to[PROMPT_LINE_MAX];
	char		 reason[PROMPT_LINE_MAX];
};

#define ANSWER_HELP \
	"  a                      approve for this presence of the device\n" \
	"  a for 1h               approve for a while (30s, 10m, 2h, 1d)\n" \
	"  a until 18:00          approve until a time (as usbgw approve " \
	    "--until)\n" \
	"  p                      approve permanently (an allow rule)\n" \
	"  d                      deny\n" \
	"  ... to HOST            a and p: only for this vhci host (address, " \
	    "CIDR or name)\n" \
	"  ... -m REASON          why, for the audit log (the rest of the " \
	    "line)\n" \
	"  s skip, q quit;  e.g.  a for 2h to vdi01 -m scanner for Alice\n"

/* The word at *pp (blank-separated), NUL-terminated in place; NULL at end. */
static char *
next_word(char **pp)
{
	char *w = *pp + strspn(*pp, " \t");

	if (*w == '\0')
		return NULL;
	*pp = w + strcspn(w, " \t");
	if (**pp != '\0')
		*(*pp)++ = '\0';
	return w;
}

static int
parse_answer(const char *line, struct answer *a, char *err, size_t errlen)
{
	char buf[PROMPT_LINE_MAX], when[PROMPT_LINE_MAX], *rest = buf, *w, *v;
	char why[PROMPT_LINE_MAX];
	const char *word;
	int scoped = 0;			/* once, for or until given */

	memset(a, 0, sizeof(*a));
	usbgw_strlcpy(buf, line, sizeof(buf));
	if ((w = next_word(&rest)) == NULL || strlen(w) != 1 ||
	    strchr("apdsq?", w[0]) == NULL) {
		snprintf(err, errlen, "please answer a, p, d, s or q (? for "
		    "help)");
		return -1;
	}
	a->key = w[0];
	a->scope = a->key == 'p' ? "permanent" : "once";
	while ((w = next_word(&rest)) != NULL) {
		word = w + strspn(w, "-");	/* --for and for alike */
		if (strchr("sq?", a->key) != NULL) {
			snprintf(err, errlen, "%c takes no more words (\"%.64s\")",
			    a->key, w);
			return -1;
		}
		if (strcmp(word, "m") == 0 || strcmp(word, "message") == 0) {
			rest += strspn(rest, " \t");
			if (*rest == '\0') {
				snprintf(err, errlen, "%.64s: expected a reason "
				    "after it", w);
				return -1;
			}
			usbgw_strlcpy(a->reason, rest, sizeof(a->reason));
			break;
		}
		if (a->key == 'd') {
			snprintf(err, errlen, "\"%.64s\": deny takes only -m REASON",
			    w);
			return -1;
		}
		if (strcmp(word, "to") == 0 || strcmp(word, "t") == 0) {
			if (a->to[0] != '\0') {
				snprintf(err, errlen, "to given twice");
				return -1;
			}
			if ((v = next_word(&rest)) == NULL) {
				snprintf(err, errlen, "%.64s: expected a host "
				    "(an address, a CIDR prefix or a name)", w);
				return -1;
			}
			usbgw_strlcpy(a->to, v, sizeof(a->to));
			continue;
		}
		if (strcmp(word, "once") != 0 && strcmp(word, "for") != 0 &&
		    strcmp(word, "until") != 0) {
			snprintf(err, errlen, "unknown word \"%.64s\": expected "
			    "once, for DURATION, until TIME, to HOST or -m "
			    "REASON", w);
			return -1;
		}
		if (a->key == 'p') {
			snprintf(err, errlen, "\"%.64s\": p is permanent; for a "
			    "while, answer a %.64s ...", w, word);
			return -1;
		}
		if (scoped++) {
			snprintf(err, errlen, "\"%.64s\": once, for and until "
			    "exclude each other", w);
			return -1;
		}
		if (strcmp(word, "once") == 0)
			continue;
		if ((v = next_word(&rest)) == NULL) {
			snprintf(err, errlen, "%.64s: expected %.64s", w,
			    strcmp(word, "for") == 0 ? "a duration like 30s, "
			    "10m, 2h or 1d" : "a time like 18:00 or "
			    "2025-01-31T18:00");
			return -1;
		}
		if (strcmp(word, "for") == 0) {
			if (parse_duration_s(v, &a->secs, why, sizeof(why)) !=
			    0) {
				snprintf(err, errlen, "for %.160s", why);
				return -1;
			}
			a->scope = "for";
			continue;
		}
		/* "until 2025-01-31 18:00": the date and time words joined */
		usbgw_strlcpy(when, v, sizeof(when));
		rest += strspn(rest, " \t");
		if (strlen(v) == 10 && v[4] == '-' && v[7] == '-' &&
		    *rest >= '0' && *rest <= '9' && rest[strcspn(rest,
		    " \t:")] == ':')
			snprintf(when, sizeof(when), "%.64s %.64s", v,
			    next_word(&rest));
		if (parse_time(when, time(NULL), &a->until, why,
		    sizeof(why)) != 0) {
			snprintf(err, errlen, "until %.160s", why);
			return -1;
		}
		if (a->until <= time(NULL)) {
			snprintf(err, errlen, "until %.64s: that time is past",
			    when);
			return -1;
		}
		a->scope = "until";
	}
	return 0;
}

/*
 * Send the answer.  It names the identity the question showed: if
 * another device stands at the busid by now, the daemon refuses.
 */
static int
answer(struct prompt *p, const char *busid, const char *hash,
    const struct answer *a)
{
	json_t *res = NULL, *args;
	char msg[512], when[48], d[32];
	const char *cmd = a->key == 'd' ? "deny" : "approve";
	int st;

	args = json_pack("{s:s, s:s}", "busid", busid, "message",
	    a->reason[0] != '\0' ? a->reason :
	    "answered at usbgw watch --prompt");
	if (a->key == 'd')
		json_object_set_new(args, "permanent", json_false());
	else {
		json_object_set_new(args, "scope", json_string(a->scope));
		if (strcmp(a->scope, "for") == 0)
			json_object_set_new(args, "duration",
			    json_integer(a->secs));
		else if (strcmp(a->scope, "until") == 0)
			json_object_set_new(args, "until",
			    json_integer((json_int_t)a->until));
		if (a->to[0] != '\0')
			json_object_set_new(args, "to", json_string(a->to));
	}
	if (*hash != '\0')
		json_object_set_new(args, "identity", json_string(hash));
	st = client_call_quiet(p->cl, cmd, args, &res, msg, sizeof(msg));
	if (st == EXIT_OK) {
		printf("%s ", a->key == 'd' ? "denied" : "approved");
		print_safe(stdout, busid);
		if (a->key == 'p')
			printf(" permanently");
		else if (a->key == 'a' && strcmp(a->scope, "for") == 0) {
			fmt_duration(d, sizeof(d), a->secs);
			fmt_time(when, sizeof(when), (json_int_t)(time(NULL) +
			    a->secs));
			printf(" for %s, until %s", d, when);
		} else if (a->key == 'a' && strcmp(a->scope, "until") == 0) {
			fmt_time(when, sizeof(when), (json_int_t)a->until);
			printf(" until %s", when);
		} else if (a->key == 'a')
			printf(" once");
		if (a->to[0] != '\0') {
			printf(", for host ");
			print_safe(stdout, a->to);
		}
		printf("; now %s\n", jstr(res, "state"));
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

/*
 * The devices pending when the dialog starts, queued before the events:
 * asked first.  The watch subscription came before this list, so a
 * device that turns pending meanwhile shows in both; its presence key
 * makes it one question.
 */
static int
queue_pending(struct prompt *p)
{
	json_t *res = NULL, *dev, *msg;
	char msgbuf[512], key[64];
	size_t i, n = 0, left = 0;
	int st;

	st = client_call_quiet(p->cl, "list", json_pack("{s:s}", "state",
	    "pending"), &res, msgbuf, sizeof(msgbuf));
	if (st != EXIT_OK) {
		printf("could not list the pending devices: ");
		print_safe(stdout, msgbuf);
		printf("\n");
		return st == EXIT_UNREACHABLE ? st : EXIT_OK;
	}
	json_array_foreach(res, i, dev) {
		if (!json_is_object(dev) || *jstr(dev, "busid") == '\0')
			continue;
		msg = json_pack("{s:s, s:O, s:b}", "event", "pending", "data",
		    dev, "already", 1);
		if (queue_find(p, qkey(msg, key, sizeof(key))) < 0) {
			if (json_array_size(p->queue) < PROMPT_MAX_QUEUE) {
				json_array_append(p->queue, msg);
				n++;
			} else
				left++;
		}
		json_decref(msg);
	}
	if (n == 0)
		printf("no device is waiting for approval now\n");
	else
		printf("%zu device%s already waiting for approval: asked "
		    "first\n", n, n == 1 ? "" : "s");
	/* the list, then the questions one by one */
	for (i = 0; i < json_array_size(p->queue) && i < PROMPT_LIST_MAX;
	    i++) {
		dev = json_object_get(json_array_get(p->queue, i), "data");
		printf("  ");
		print_safe(stdout, jstr(dev, "busid"));
		printf("  ");
		print_safe(stdout, device_name(dev));
		printf("\n");
	}
	if (json_array_size(p->queue) > PROMPT_LIST_MAX)
		printf("  ... and %zu more\n", json_array_size(p->queue) -
		    PROMPT_LIST_MAX);
	json_decref(res);
	if (left > 0)
		printf("(%zu more not queued: see usbgw list --state "
		    "pending)\n", left);
	return EXIT_OK;
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
	p.asked = json_object();
	printf("waiting for pending devices, access requests and pairings "
	    "(q or Ctrl-D to quit)\n");
	if ((st = queue_pending(&p)) != EXIT_OK)
		goto out;
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
		if (was_asked(&p, q)) {
			json_decref(q);		/* this presence: asked */
			continue;
		}
		mark_asked(&p, q);
		/* the answer names the identity shown: its device id */
		snprintf(hash, sizeof(hash), "%lld", (long long)
		    json_integer_value(json_object_get(json_object_get(q,
		    "data"), "id")));
		if (strcmp(hash, "0") == 0)
			hash[0] = '\0';
		show_question(q);
		json_decref(q);
		for (;;) {
			struct answer a;
			char err[256];

			r = wait_line(&p, busid);
			if (r != 1)
				break;
			if (parse_answer(p.line, &a, err, sizeof(err)) != 0) {
				consume_line(&p);
				printf("%s%s: ", err, strncmp(err, "please", 6) ==
				    0 ? "" : "; nothing sent, answer again");
				fflush(stdout);
				continue;
			}
			consume_line(&p);
			if (a.key == '?') {
				printf("%s[a]pprove once, approve "
				    "[p]ermanently, [d]eny, [s]kip, [q]uit? ",
				    ANSWER_HELP);
				fflush(stdout);
				continue;
			}
			if (a.key == 's') {
				printf("skipped\n");
				r = EXIT_OK;
			} else if (a.key == 'q')
				r = -1;
			else
				r = answer(&p, busid, hash, &a);
			break;
		}
		fflush(stdout);
		if (r == -1)
			break;
		if (r > 1) {
			st = r;
			break;
		}
	}
out:
	json_decref(p.queue);
	json_decref(p.asked);
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
