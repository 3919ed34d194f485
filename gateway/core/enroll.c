/*
 * Enrollment at the gateway: pairing sessions, the operator's commands,
 * the agents table behind the TLS check, renewals (enroll.h; protocol.md
 * 1.10.10).
 */
#include <sys/queue.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "control/control.h"
#include "db/db.h"
#include "core/enroll.h"
#include "proto/enrollproto.h"
#include "core/events.h"
#include "base/log.h"
#include "core/store.h"
#include "base/util.h"

#define PAIR_READ_MS	10000	/* the request must arrive within */
#define PAIR_LINGER_MS	5000	/* to deliver the last message */
#define RENEW_MAX	16	/* renewal sessions at once */
#define REPLACE_MAX	8	/* active rows of one name (1, by the index) */

enum pair_state {
	PR_READING,		/* waiting for ENROLL or RENEW */
	PR_PENDING,		/* ENROLL taken: waiting for the operator */
	PR_CLOSING,		/* the last message on its way */
};

struct pairing {
	TAILQ_ENTRY(pairing)	 entry;
	enum pair_state		 state;
	bool			 renew;		/* an authenticated session */
	struct bufferevent	*bev;
	struct event		*timer;
	int64_t			 row;		/* agents.id once pending */
	struct tlsid_peer	 peer;		/* the placeholder, or the cert */
	char			 code[TLSID_CODE_LEN + 1];
	char			 key_fpr[TLSID_FPR_HEX + 1];
	char			 host[64];
	char			 name[TLSID_NAME_MAX + 1];
	enum tlsid_role		 role;
	char			*csr;
	time_t			 expires;
	/*
	 * Refused at accept (a bound): said after the request is read, so
	 * the client reads the reason (a close with its request unread
	 * would reset the connection and lose the answer).
	 */
	char			 refuse[128];
};

static struct {
	struct event_base	*base;
	struct tlsid_store	*st;
	struct enroll_conf	 c;
	TAILQ_HEAD(, pairing)	 list;
	unsigned		 npairing;	/* pairing sessions (not renewals) */
	unsigned		 nrenew;
	time_t			 window;	/* the rate's minute */
	unsigned		 nwindow;
} E = { .list = TAILQ_HEAD_INITIALIZER(E.list) };

static void	pr_read(struct bufferevent *, void *);

static time_t
now_t(void)
{
	return time(NULL);
}

static void
pr_free(struct pairing *p)
{
	TAILQ_REMOVE(&E.list, p, entry);
	if (p->renew)
		E.nrenew--;
	else
		E.npairing--;
	if (p->bev != NULL)
		bufferevent_free(p->bev);
	if (p->timer != NULL)
		event_free(p->timer);
	free(p->csr);
	free(p);
}

static void
pr_timer(struct pairing *p, unsigned ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(p->timer, &tv);
}

/* Written out: the session ends. */
static void
pr_written(struct bufferevent *bev, void *arg)
{
	struct pairing *p = arg;

	if (p->state == PR_CLOSING &&
	    evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		pr_free(p);
}

/* The last message: type with its fields, then the end. */
static void
pr_finish(struct pairing *p, enum enroll_type type, const char *f[ENROLL_F_MAX])
{
	uint8_t *msg = xcalloc(1, ENROLL_MSG_MAX);
	long n = enroll_encode(msg, type, f);

	p->state = PR_CLOSING;
	bufferevent_disable(p->bev, EV_READ);
	if (n > 0)
		bufferevent_write(p->bev, msg, (size_t)n);
	free(msg);
	/* freed by pr_written once sent, or by the timer: never here */
	event_del(p->timer);
	pr_timer(p, PAIR_LINGER_MS);
}

static void
pr_refuse(struct pairing *p, const char *reason)
{
	const char *f[ENROLL_F_MAX] = { NULL };
	char r[ENROLL_REASON_MAX + 1];

	usbgw_strlcpy(r, reason, sizeof(r));
	f[ENROLL_F_REASON] = r;
	pr_finish(p, ENROLL_T_REFUSED, f);
}

/* A pairing's end other than approval: its row, the audit, the event. */
static void
pr_end(struct pairing *p, const char *state, const char *event,
    const struct actor *who, const char *why)
{
	char detail[256];
	json_t *d;

	if (p->row > 0 && store_db() != NULL)
		db_agent_end(store_db(), p->row, state, why, now_t());
	snprintf(detail, sizeof(detail), "pairing %lld of %s (%s) from %s: %s",
	    (long long)p->row, p->name, tlsid_role_name(p->role), p->host, why);
	store_audit(event, who, p->name, detail);
	log_info("enroll: %s", detail);
	d = json_pack("{s:I, s:s, s:s, s:s, s:s, s:s}", "id", (json_int_t)p->row,
	    "name", p->name, "role", tlsid_role_name(p->role), "address",
	    p->host, "outcome", state, "reason", why);
	if (who != NULL)
		json_object_set_new(d, "actor", json_string(who->name));
	gw_emit("pairing-end", d);
}

static void
pr_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct pairing *p = arg;
	char why[128];

	(void)fd;
	(void)what;
	switch (p->state) {
	case PR_READING:
		log_info("enroll: %s: no request in time", p->host);
		pr_refuse(p, p->refuse[0] != '\0' ? p->refuse :
		    "no enrollment request in time");
		break;
	case PR_PENDING:
		snprintf(why, sizeof(why), "expired: not approved within %u s",
		    E.c.pairing_timeout_ms / 1000);
		pr_end(p, "lapsed", "pairing-expired", NULL, why);
		pr_refuse(p, why);
		break;
	case PR_CLOSING:
		pr_free(p);
		break;
	}
}

static void
pr_event(struct bufferevent *bev, short what, void *arg)
{
	struct pairing *p = arg;

	(void)bev;
	(void)what;
	if (p->state == PR_PENDING)
		pr_end(p, "lapsed", "pairing-abandoned", NULL,
		    "the client closed the session");
	else if (p->state == PR_READING)
		log_debug("enroll: %s: closed before a request", p->host);
	pr_free(p);
}

static struct pairing *
pr_new(int fd, struct bufferevent *bev, const struct tlsid_peer *peer,
    const char *host, bool renew)
{
	struct pairing *p = xcalloc(1, sizeof(*p));

	p->renew = renew;
	p->peer = *peer;
	usbgw_strlcpy(p->host, host, sizeof(p->host));
	if (bev == NULL)
		bev = bufferevent_socket_new(E.base, fd, BEV_OPT_CLOSE_ON_FREE);
	p->bev = bev;
	p->timer = evtimer_new(E.base, pr_timeout, p);
	TAILQ_INSERT_TAIL(&E.list, p, entry);
	if (renew)
		E.nrenew++;
	else
		E.npairing++;
	if (p->bev == NULL || p->timer == NULL) {
		if (p->bev == NULL && fd >= 0)
			evutil_closesocket(fd);
		pr_free(p);
		return NULL;
	}
	bufferevent_setcb(p->bev, pr_read, pr_written, pr_event, p);
	bufferevent_setwatermark(p->bev, EV_READ, 0, ENROLL_MSG_MAX + 1);
	bufferevent_set_timeouts(p->bev, NULL, NULL);
	bufferevent_enable(p->bev, EV_READ | EV_WRITE);
	pr_timer(p, PAIR_READ_MS);
	return p;
}

/* ---- a pairing session ---------------------------------------------------- */

void
enroll_pairing_accept(int fd, const struct tlsid_peer *peer,
    const struct tlsshim_pairing *pair, const char *host)
{
	struct pairing *p, *q;
	const char *why = NULL;
	time_t now = now_t();
	unsigned nopen = 0, nall = 0;

	if (now - E.window >= 60) {
		E.window = now;
		E.nwindow = 0;
	}
	TAILQ_FOREACH(q, &E.list, entry) {
		if (!q->renew)
			nall++;
		if (q->renew || q->state == PR_CLOSING || q->refuse[0] != '\0')
			continue;
		nopen++;
		if (strcmp(q->host, host) == 0)
			why = "a pairing from this address is in progress "
			    "(one per address)";
	}
	/*
	 * Every pairing session holds a TLS pump until it is answered (a
	 * refused one for up to 10 s, so that its client reads why): all of
	 * them, refused ones too, are bounded, and past that a new one is
	 * closed at once, without an answer or an audit row (a flood).
	 */
	if (nall >= 2 * E.c.max_pairings + 8) {
		log_debug("enroll: pairing session from %s closed: %u pairing "
		    "sessions held", host, nall);
		evutil_closesocket(fd);
		return;
	}
	if (why == NULL && nopen >= E.c.max_pairings)
		why = "too many pairings in progress (max-pairings)";
	else if (why == NULL && E.nwindow >= E.c.max_per_minute)
		why = "too many pairing sessions this minute "
		    "(max-pairings-per-minute)";
	if ((p = pr_new(fd, NULL, peer, host, false)) == NULL)
		return;
	usbgw_strlcpy(p->code, pair->code, sizeof(p->code));
	usbgw_strlcpy(p->key_fpr, pair->key_fpr, sizeof(p->key_fpr));
	if (why != NULL) {
		char detail[256];

		snprintf(detail, sizeof(detail), "pairing of %s from %s "
		    "refused: %s", peer->name, host, why);
		store_audit("pairing-refused", NULL, peer->name, detail);
		log_info("enroll: %s", detail);
		usbgw_strlcpy(p->refuse, why, sizeof(p->refuse));
		return;
	}
	E.nwindow++;
	log_info("enroll: pairing session from %s (placeholder CN=%s %s)",
	    host, peer->name, tlsid_role_name(peer->role));
}

/* ENROLL: name, role and CSR checked against the session; pending. */
static void
pr_enroll(struct pairing *p, const struct enroll_msg *m)
{
	char name[TLSID_NAME_MAX + 2], role[16], why[256], kf[TLSID_FPR_HEX + 1];
	char detail[320], line[448];
	size_t clen = m->flen[ENROLL_F_CSR];
	uint8_t msg[ENROLL_HDR_LEN];
	json_t *d;
	long n;

	if (enroll_field(m, ENROLL_F_NAME, name, sizeof(name)) == -1 ||
	    tlsid_name_check(name, why, sizeof(why)) == -1) {
		snprintf(detail, sizeof(detail), "name: %s", why);
		goto refuse;
	}
	if (strcmp(name, p->peer.name) != 0) {
		snprintf(detail, sizeof(detail), "name %s differs from the "
		    "pairing certificate's CN %s", name, p->peer.name);
		goto refuse;
	}
	usbgw_strlcpy(p->name, name, sizeof(p->name));
	if (enroll_field(m, ENROLL_F_ROLE, role, sizeof(role)) == -1 ||
	    ((p->role = tlsid_role_parse(role)) != TLSID_ROLE_AGENT &&
	    p->role != TLSID_ROLE_HOST)) {
		snprintf(detail, sizeof(detail), "role: expected agent or host");
		goto refuse;
	}
	if (p->role != p->peer.role) {
		snprintf(detail, sizeof(detail), "role %s differs from the "
		    "pairing certificate's (%s)", role,
		    tlsid_role_name(p->peer.role));
		goto refuse;
	}
	p->csr = xcalloc(1, clen + 1);
	memcpy(p->csr, m->f[ENROLL_F_CSR], clen);
	if (tlsid_csr_key_fpr(p->csr, clen, kf, why, sizeof(why)) == -1) {
		snprintf(detail, sizeof(detail), "%s", why);
		goto refuse;
	}
	if (strcmp(kf, p->key_fpr) != 0) {
		snprintf(detail, sizeof(detail), "the CSR's key is not the "
		    "session's (the pairing certificate's) key");
		goto refuse;
	}
	if (store_db() == NULL || (p->row = db_agent_pending(store_db(),
	    p->name, tlsid_role_name(p->role), p->key_fpr, p->host,
	    now_t())) <= 0) {
		p->row = 0;
		snprintf(detail, sizeof(detail), "the gateway cannot record "
		    "the pairing (database)");
		goto refuse;
	}
	p->state = PR_PENDING;
	p->expires = now_t() + E.c.pairing_timeout_ms / 1000;
	event_del(p->timer);
	pr_timer(p, E.c.pairing_timeout_ms);
	snprintf(detail, sizeof(detail), "pairing %lld: %s (%s) from %s, key "
	    "%.16s...", (long long)p->row, p->name, tlsid_role_name(p->role),
	    p->host, p->key_fpr);
	store_audit("pairing-started", NULL, p->name, detail);
	snprintf(detail, sizeof(detail), "pairing %lld: %s from %s shows "
	    "code %s", (long long)p->row, p->name, p->host, p->code);
	store_audit("pairing-code", NULL, p->name, detail);
	log_info("enroll: %s; waiting for usbgw agent approve", detail);
	if ((n = enroll_encode(msg, ENROLL_T_PENDING, NULL)) > 0)
		bufferevent_write(p->bev, msg, (size_t)n);
	d = json_pack("{s:I, s:s, s:s, s:s, s:s, s:I}", "id",
	    (json_int_t)p->row, "name", p->name, "role",
	    tlsid_role_name(p->role), "address", p->host, "code", p->code,
	    "expires", (json_int_t)p->expires);
	gw_emit("pairing", d);
	return;
refuse:
	snprintf(line, sizeof(line), "pairing from %s refused: %s", p->host,
	    detail);
	store_audit("pairing-refused", NULL, p->peer.name, line);
	log_info("enroll: %s", line);
	pr_refuse(p, detail);
}

/*
 * Issue a certificate for p's CSR (name and role as given): *pem (the
 * caller frees) and info.  0, or -1 with err.  Nothing is sent yet: the
 * row is recorded first, so the client never holds a certificate the
 * agents table does not know.
 */
static int
pr_issue(struct pairing *p, char **pem, struct tlsid_peer *info, char *err,
    size_t errlen)
{
	char fpr[TLSID_FPR_HEX + 1];

	*pem = NULL;
	if (E.st == NULL || !tlsid_store_can_issue(E.st)) {
		snprintf(err, errlen, "this gateway cannot issue certificates "
		    "(no CA key)");
		return -1;
	}
	if (tlsid_issue(E.st, p->csr, strlen(p->csr), p->name, p->role,
	    E.c.cert_days, pem, fpr, err, errlen) == -1)
		return -1;
	if (tlsid_cert_info(*pem, strlen(*pem), info) == -1) {
		snprintf(err, errlen, "cannot read the issued certificate");
		free(*pem);
		*pem = NULL;
		return -1;
	}
	return 0;
}

/* ISSUED: the certificate and the CA; the session ends. */
static void
pr_send_issued(struct pairing *p, const char *pem)
{
	const char *f[ENROLL_F_MAX] = { NULL };
	char *ca;

	if ((ca = tlsid_store_ca_pem(E.st)) == NULL) {
		pr_refuse(p, "the gateway cannot read its CA");
		return;
	}
	f[ENROLL_F_CERT] = pem;
	f[ENROLL_F_CA] = ca;
	pr_finish(p, ENROLL_T_ISSUED, f);
	free(ca);
}

/* RENEW on an authenticated session: the same key, name and role. */
static void
pr_renew(struct pairing *p, const struct enroll_msg *m)
{
	struct db_agent old;
	struct tlsid_peer info;
	char why[256], kf[TLSID_FPR_HEX + 1], detail[448], na[32], *pem;
	size_t clen = m->flen[ENROLL_F_CSR];
	time_t now = now_t();
	struct tm tm;
	int64_t id;

	if (store_db() == NULL ||
	    db_agent_by_fpr(store_db(), p->peer.fpr, &old) != 1 ||
	    strcmp(old.state, "active") != 0) {
		snprintf(why, sizeof(why), "certificate CN=%s is not an active "
		    "enrollment", p->peer.name);
		goto refuse;
	}
	p->csr = xcalloc(1, clen + 1);
	memcpy(p->csr, m->f[ENROLL_F_CSR], clen);
	if (tlsid_csr_key_fpr(p->csr, clen, kf, why, sizeof(why)) == -1)
		goto refuse;
	if (strcmp(kf, old.key_fpr) != 0) {
		snprintf(why, sizeof(why), "the CSR's key is not the enrolled "
		    "key: renewal keeps the key (enroll again for a new one)");
		goto refuse;
	}
	if (old.not_after - now > (int64_t)E.c.renew_days * 86400) {
		gmtime_r(&(time_t){ (time_t)old.not_after }, &tm);
		strftime(na, sizeof(na), "%Y-%m-%d %H:%M:%S UTC", &tm);
		snprintf(why, sizeof(why), "not due: the certificate is valid "
		    "until %s; renewals are taken within %d days of the end",
		    na, E.c.renew_days);
		goto refuse;
	}
	usbgw_strlcpy(p->name, old.name, sizeof(p->name));
	p->role = tlsid_role_parse(old.role);
	if (pr_issue(p, &pem, &info, why, sizeof(why)) == -1)
		goto refuse;
	if ((id = db_agent_renewed(store_db(), &old, info.fpr, info.serial,
	    (int64_t)info.not_after, now)) <= 0) {
		free(pem);
		snprintf(why, sizeof(why), "the gateway cannot record the new "
		    "certificate (database)");
		goto refuse;
	}
	pr_send_issued(p, pem);
	free(pem);
	snprintf(detail, sizeof(detail), "%s (%s): certificate %.16s... "
	    "renewed as %.16s... (row %lld), until %lld", old.name, old.role,
	    old.fpr, info.fpr, (long long)id, (long long)info.not_after);
	store_audit("certificate-renewed", NULL, old.name, detail);
	log_info("enroll: %s", detail);
	return;
refuse:
	snprintf(detail, sizeof(detail), "renewal of %s from %s refused: %s",
	    p->peer.name, p->host, why);
	store_audit("renewal-refused", NULL, p->peer.name, detail);
	log_info("enroll: %s", detail);
	if (p->state != PR_CLOSING)
		pr_refuse(p, why);
}

void
enroll_renew_accept(struct bufferevent *bev, const struct tlsid_peer *peer,
    const char *host)
{
	struct pairing *p;

	if (E.nrenew >= RENEW_MAX) {
		bufferevent_free(bev);
		log_info("enroll: renewal from %s: %u in progress, closed",
		    host, E.nrenew);
		return;
	}
	if ((p = pr_new(-1, bev, peer, host, true)) == NULL)
		return;
	log_info("enroll: renewal session from %s (CN=%s)", host, peer->name);
	pr_read(p->bev, p);
}

static void
pr_read(struct bufferevent *bev, void *arg)
{
	struct pairing *p = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len = evbuffer_get_length(in);
	struct enroll_msg m;
	const char *why = NULL;
	char detail[256];
	uint8_t *buf;
	long r;

	if (p->state != PR_READING) {
		evbuffer_drain(in, len);	/* nothing more is expected */
		return;
	}
	if (len == 0)
		return;
	buf = evbuffer_pullup(in, (ssize_t)len);
	r = enroll_decode(buf, len, 1, &m, &why);
	if (r == 0 && len <= ENROLL_MSG_MAX)
		return;
	if (r <= 0) {
		if (why == NULL)
			why = "message too long";
		snprintf(detail, sizeof(detail), "%s from %s: malformed "
		    "enrollment message: %s", p->renew ? "renewal" : "pairing",
		    p->host, why);
		store_audit("malformed", NULL, p->host, detail);
		log_info("enroll: %s", detail);
		pr_refuse(p, detail);
		return;
	}
	if (p->refuse[0] != '\0')
		pr_refuse(p, p->refuse);	/* audited at accept */
	else if (p->renew && m.type == ENROLL_T_RENEW)
		pr_renew(p, &m);
	else if (!p->renew && m.type == ENROLL_T_ENROLL)
		pr_enroll(p, &m);
	else {
		snprintf(detail, sizeof(detail), "%s from %s: %s", p->renew ?
		    "renewal" : "pairing", p->host, p->renew ? "ENROLL on an "
		    "enrolled session (pair with a placeholder)" :
		    "RENEW needs an enrolled certificate");
		store_audit("pairing-refused", NULL, p->peer.name, detail);
		pr_refuse(p, detail);
		return;
	}
	if (p->state != PR_CLOSING)
		evbuffer_drain(in, evbuffer_get_length(in));
}

/* ---- the TLS check ------------------------------------------------------ */

int
enroll_check(const struct tlsid_peer *peer, char *why, size_t whylen)
{
	struct db_agent a;
	int r;

	if (store_db() == NULL) {
		snprintf(why, whylen, "certificate CN=%s: no database to check "
		    "it against", peer->name);
		return -1;
	}
	r = db_agent_by_fpr(store_db(), peer->fpr, &a);
	if (r == -1) {
		snprintf(why, whylen, "certificate CN=%s: cannot check it "
		    "(database error)", peer->name);
		return -1;
	}
	if (r == 0) {
		snprintf(why, whylen, "certificate CN=%s (fingerprint %.16s...) "
		    "is unknown: not enrolled at this gateway", peer->name,
		    peer->fpr);
		return -1;
	}
	if (strcmp(a.state, "active") != 0) {
		snprintf(why, whylen, "certificate CN=%s (fingerprint %.16s...) "
		    "%s", peer->name, peer->fpr, strcmp(a.state, "revoked") ==
		    0 ? "is revoked" : strcmp(a.state, "replaced") == 0 ?
		    "was replaced by a newer one" : "is not active");
		return -1;
	}
	if (strcmp(a.name, peer->name) != 0 ||
	    strcmp(a.role, tlsid_role_name(peer->role)) != 0) {
		snprintf(why, whylen, "certificate CN=%s does not match its "
		    "enrollment (%s, %s)", peer->name, a.name, a.role);
		return -1;
	}
	if (a.not_after <= (int64_t)now_t()) {
		snprintf(why, whylen, "certificate CN=%s expired", peer->name);
		return -1;
	}
	return 0;
}

unsigned
enroll_npending(void)
{
	struct pairing *p;
	unsigned n = 0;

	TAILQ_FOREACH(p, &E.list, entry)
		if (p->state == PR_PENDING)
			n++;
	return n;
}

/* ---- the operator's commands ------------------------------------------- */

#define ERR(code, ...) do { snprintf(err, errlen, __VA_ARGS__); return code; } while (0)

/* Pending pairings matching code (and name, id when given) into m[]. */
static size_t
pr_match(const char *code, const char *name, int64_t id,
    struct pairing **m, size_t max)
{
	struct pairing *p;
	size_t n = 0;

	TAILQ_FOREACH(p, &E.list, entry) {
		if (p->state != PR_PENDING || p->renew)
			continue;
		if (!tlsid_code_equal(p->code, code))
			continue;
		if ((name != NULL && strcmp(p->name, name) != 0) ||
		    (id > 0 && p->row != id))
			continue;
		if (n < max)
			m[n] = p;
		n++;
	}
	return n;
}

/* "tc17 (agent) from ADDR, code C" for each pending pairing, or "none". */
static void
pr_candidates(char *out, size_t len)
{
	struct pairing *p;
	size_t off = 0;
	int n;

	out[0] = '\0';
	TAILQ_FOREACH(p, &E.list, entry) {
		if (p->state != PR_PENDING || p->renew)
			continue;
		n = snprintf(out + off, len - off, "%s%s (%s) from %s, code %s",
		    off ? "; " : "", p->name, tlsid_role_name(p->role),
		    p->host, p->code);
		if (n < 0 || (size_t)n >= len - off)
			break;
		off += (size_t)n;
	}
	if (off == 0)
		usbgw_strlcpy(out, "none", len);
}

/* The pairing an approve or reject names: exactly one, or an error. */
static enum ctl_err
pr_find(json_t *args, struct pairing **pp, char *err, size_t errlen)
{
	const char *code, *name = NULL;
	struct pairing *m[2];
	json_int_t id = 0;
	char cands[768];
	enum ctl_err e;
	size_t n, i;

	if ((e = ctl_arg_str(args, "code", 1, &code, err, errlen)) != CTL_OK ||
	    (e = ctl_arg_str(args, "name", 0, &name, err, errlen)) != CTL_OK ||
	    (e = ctl_arg_int(args, "id", 0, 1, INT64_MAX, &id, err,
	    errlen)) != CTL_OK)
		return e;
	for (i = 0; code[i] != '\0'; i++)
		if (code[i] < '0' || code[i] > '9')
			break;
	if (i != TLSID_CODE_LEN || code[i] != '\0')
		ERR(CTL_E_USAGE, "argument code: expected the 6 digits the "
		    "client shows, got \"%.16s\"", code);
	n = pr_match(code, name, (int64_t)id, m, 2);
	pr_candidates(cands, sizeof(cands));
	if (n == 0)
		ERR(CTL_E_NOTFOUND, "no pending pairing with code %s%s%s; "
		    "pending: %s", code, name ? " and name " : "", name ? name :
		    "", cands);
	if (n > 1)
		ERR(CTL_E_AMBIGUOUS, "code %s matches %zu pending pairings (give "
		    "--name); pending: %s", code, n, cands);
	*pp = m[0];
	return CTL_OK;
}

static json_t *
agent_json(const struct db_agent *a)
{
	struct pairing *p;
	const char *state = a->state;
	json_t *o;

	if (strcmp(state, "active") == 0 && a->not_after > 0 &&
	    a->not_after <= (int64_t)now_t())
		state = "expired";
	o = json_pack("{s:I, s:s, s:s, s:s, s:s, s:I, s:s}", "id",
	    (json_int_t)a->id, "name", a->name, "role", a->role, "state", state,
	    "key_fingerprint", a->key_fpr, "created_at",
	    (json_int_t)a->created_at, "address", a->address);
	json_object_set_new(o, "fingerprint", a->fpr[0] ? json_string(a->fpr) :
	    json_null());
	json_object_set_new(o, "serial", a->serial[0] ? json_string(a->serial) :
	    json_null());
	json_object_set_new(o, "not_after", a->not_after ?
	    json_integer(a->not_after) : json_null());
	if (a->approved_at) {
		json_object_set_new(o, "approved_at",
		    json_integer(a->approved_at));
		json_object_set_new(o, "approved_by",
		    json_string(a->approved_by));
	}
	if (a->ended_at) {
		json_object_set_new(o, "ended_at", json_integer(a->ended_at));
		json_object_set_new(o, "end_reason", json_string(a->end_reason));
	}
	if (strcmp(a->state, "pending") == 0)
		TAILQ_FOREACH(p, &E.list, entry)
			if (p->row == a->id && p->state == PR_PENDING) {
				json_object_set_new(o, "code",
				    json_string(p->code));
				json_object_set_new(o, "expires",
				    json_integer(p->expires));
			}
	return o;
}

static int
list_cb(void *arg, const struct db_agent *a)
{
	json_array_append_new(arg, agent_json(a));
	return 0;
}

static enum ctl_err
h_agent_list(json_t *args, const struct actor *who, json_t **res, char *err,
    size_t errlen)
{
	json_t *a;

	(void)args;
	(void)who;
	if (store_db() == NULL)
		ERR(CTL_E_INTERNAL, "no database");
	a = json_array();
	if (db_agent_foreach(store_db(), NULL, list_cb, a) == -1) {
		json_decref(a);
		ERR(CTL_E_INTERNAL, "cannot read the agents table");
	}
	*res = a;
	return CTL_OK;
}

struct actives {
	struct db_agent	 a[REPLACE_MAX];
	size_t		 n;
};

static int
actives_cb(void *arg, const struct db_agent *a)
{
	struct actives *x = arg;

	if (x->n < REPLACE_MAX)
		x->a[x->n++] = *a;
	return 0;
}

/*
 * End every active certificate of name (revoked or replaced) and cut the
 * connections each authenticated.  The number of connections cut, or -1.
 */
static int
end_actives(const char *name, const char *state, const char *event,
    const struct actor *who, const char *why, size_t *nrows)
{
	struct actives x;
	char detail[320];
	unsigned cut, total = 0;
	size_t i;

	memset(&x, 0, sizeof(x));
	if (db_agent_foreach(store_db(), name, actives_cb, &x) == -1)
		return -1;
	for (i = 0; i < x.n; i++) {
		if (db_agent_end(store_db(), x.a[i].id, state, why, now_t()) == -1)
			return -1;
		/*
		 * By name and role, not only by this row's fingerprint: the
		 * connections a renewed-away (replaced) certificate of the
		 * name authenticated run on, and must end too.
		 */
		cut = tlsshim_cut(x.a[i].fpr) + tlsshim_cut_identity(name,
		    tlsid_role_parse(x.a[i].role));
		total += cut;
		snprintf(detail, sizeof(detail), "%s (%s) certificate %.16s... "
		    "%s: %s; %u connection%s cut", name, x.a[i].role,
		    x.a[i].fpr, state, why, cut, cut == 1 ? "" : "s");
		store_audit(event, who, name, detail);
		log_info("enroll: %s", detail);
	}
	*nrows = x.n;
	return (int)total;
}

static enum ctl_err
h_agent_approve(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	struct tlsid_peer info;
	struct pairing *p;
	char why[256], detail[320], *pem;
	enum ctl_err e;
	size_t nrep = 0;
	json_t *d;
	int cut;

	if ((e = pr_find(args, &p, err, errlen)) != CTL_OK)
		return e;
	if (pr_issue(p, &pem, &info, why, sizeof(why)) == -1) {
		pr_end(p, "rejected", "pairing-failed", who, why);
		pr_refuse(p, why);
		ERR(CTL_E_REFUSED, "cannot issue %s's certificate: %s", p->name,
		    why);
	}
	/* a re-enrollment replaces the name's certificate, once approved */
	snprintf(why, sizeof(why), "re-enrolled (pairing %lld approved)",
	    (long long)p->row);
	if ((cut = end_actives(p->name, "replaced", "agent-replaced", who, why,
	    &nrep)) == -1 || db_agent_activate(store_db(), p->row, info.fpr,
	    info.serial, (int64_t)info.not_after, who->name, now_t()) != 1) {
		free(pem);
		snprintf(why, sizeof(why), "the gateway cannot record the "
		    "certificate (database)");
		pr_end(p, "rejected", "pairing-failed", who, why);
		pr_refuse(p, why);
		ERR(CTL_E_INTERNAL, "pairing of %s: %s", p->name, why);
	}
	pr_send_issued(p, pem);
	free(pem);
	snprintf(detail, sizeof(detail), "pairing %lld: %s (%s) from %s, code "
	    "%s", (long long)p->row, p->name, tlsid_role_name(p->role),
	    p->host, p->code);
	store_audit("pairing-approved", who, p->name, detail);
	snprintf(detail, sizeof(detail), "%s (%s): certificate %s serial %s "
	    "until %lld", p->name, tlsid_role_name(p->role), info.fpr,
	    info.serial, (long long)info.not_after);
	store_audit("certificate-issued", who, p->name, detail);
	log_info("enroll: %s, approved by %s", detail, who->name);
	d = json_pack("{s:I, s:s, s:s, s:s, s:s, s:s}", "id", (json_int_t)p->row,
	    "name", p->name, "role", tlsid_role_name(p->role), "address",
	    p->host, "outcome", "approved", "actor", who->name);
	gw_emit("pairing-end", d);
	*res = json_pack("{s:I, s:s, s:s, s:s, s:s, s:I, s:I, s:i}", "id",
	    (json_int_t)p->row, "name", p->name, "role",
	    tlsid_role_name(p->role), "fingerprint", info.fpr, "serial",
	    info.serial, "not_after", (json_int_t)info.not_after, "replaced",
	    (json_int_t)nrep, "connections_cut", cut);
	p->row = 0;
	return CTL_OK;
}

static enum ctl_err
h_agent_reject(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	struct pairing *p;
	enum ctl_err e;
	const char *msg = NULL;

	if ((e = pr_find(args, &p, err, errlen)) != CTL_OK ||
	    (e = ctl_arg_str(args, "message", 0, &msg, err, errlen)) != CTL_OK)
		return e;
	*res = json_pack("{s:I, s:s, s:s}", "id", (json_int_t)p->row, "name",
	    p->name, "state", "rejected");
	pr_end(p, "rejected", "pairing-rejected", who, msg != NULL && *msg ?
	    msg : "rejected by the operator");
	pr_refuse(p, "rejected by the gateway's operator");
	return CTL_OK;
}

static enum ctl_err
h_agent_revoke(json_t *args, const struct actor *who, json_t **res,
    char *err, size_t errlen)
{
	const char *name, *msg = NULL;
	char why[256];
	enum ctl_err e;
	size_t n = 0;
	int cut;

	if ((e = ctl_arg_str(args, "name", 1, &name, err, errlen)) != CTL_OK ||
	    (e = ctl_arg_str(args, "message", 0, &msg, err, errlen)) != CTL_OK)
		return e;
	if (tlsid_name_check(name, why, sizeof(why)) == -1)
		ERR(CTL_E_USAGE, "argument name: %s", why);
	if (store_db() == NULL)
		ERR(CTL_E_INTERNAL, "no database");
	snprintf(why, sizeof(why), "%s", msg != NULL && *msg ? msg :
	    "revoked by the operator");
	if ((cut = end_actives(name, "revoked", "agent-revoked", who, why,
	    &n)) == -1)
		ERR(CTL_E_INTERNAL, "cannot update the agents table");
	if (n == 0)
		ERR(CTL_E_NOTFOUND, "no active certificate named %s", name);
	*res = json_pack("{s:s, s:I, s:i}", "name", name, "revoked",
	    (json_int_t)n, "connections_cut", cut);
	return CTL_OK;
}

const struct ctl_cmd enroll_cmds[] = {
	{ "agent.list",		PRIV_READ,	h_agent_list },
	{ "agent.approve",	PRIV_ADMIN,	h_agent_approve },
	{ "agent.reject",	PRIV_ADMIN,	h_agent_reject },
	{ "agent.revoke",	PRIV_ADMIN,	h_agent_revoke },
};
const size_t enroll_ncmds = nitems(enroll_cmds);

/* ---- start and stop -------------------------------------------------------- */

void
enroll_init(struct event_base *base, struct tlsid_store *st,
    const struct enroll_conf *c)
{
	int n;

	E.base = base;
	E.st = st;
	E.c = *c;
	if (store_db() != NULL && (n = db_agent_lapse_pending(store_db(),
	    "the gateway restarted", now_t())) > 0) {
		log_info("enroll: %d pairing%s of an earlier run lapsed", n,
		    n == 1 ? "" : "s");
		store_audit("pairing-expired", NULL, "agents",
		    "pairings pending when the gateway stopped lapsed");
	}
}

void
enroll_shutdown(void)
{
	struct pairing *p;

	while ((p = TAILQ_FIRST(&E.list)) != NULL) {
		if (p->state == PR_PENDING && store_db() != NULL)
			db_agent_end(store_db(), p->row, "lapsed",
			    "the gateway stopped", now_t());
		pr_free(p);
	}
	E.st = NULL;
}
