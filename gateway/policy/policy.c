/*
 * Ordered rule sets: first match wins, with a vid:pid index.
 *
 * The index keeps, for every exact vid:pid and every "vid:*" named by an
 * indexable rule, the ascending list of positions of the rules that can
 * match it, plus one list of the rules that can match any vid:pid.  A
 * decision merges the (at most) three lists that concern the device in
 * position order, so it visits exactly the candidate rules in rule order
 * and stops at the first match: the same answer as a linear scan.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"
#include "base/util.h"

#define KEYS_MAX	RULE_SET_MAX	/* id keys per rule in the index */

struct plist {
	uint32_t	*v;
	uint32_t	 n, cap;
};

struct pbucket {
	uint32_t	 key;
	uint32_t	 used;
	struct plist	 l;
};

struct ptable {
	struct pbucket	*b;
	uint32_t	 cap;		/* power of two, or 0 */
	uint32_t	 n;
};

struct prule {
	int64_t		 id;
	struct rule	*r;
};

struct policy {
	struct prule	*rules;
	size_t		 n, cap;
	enum rule_target deflt;
	int		 dirty;
	struct plist	 generic;	/* rules for any vid:pid */
	struct ptable	 exact;		/* vid << 16 | pid */
	struct ptable	 vendor;	/* vid, rules with "vid:*" */
};

static void
plist_push(struct plist *l, uint32_t v)
{
	if (l->n > 0 && l->v[l->n - 1] == v)
		return;		/* same rule twice under one key */
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 4;
		l->v = xreallocarray(l->v, l->cap, sizeof(*l->v));
	}
	l->v[l->n++] = v;
}

static uint32_t
ptable_hash(uint32_t key)
{
	return key * 2654435761u;
}

static void
ptable_free(struct ptable *t)
{
	uint32_t i;

	for (i = 0; i < t->cap; i++)
		free(t->b[i].l.v);
	free(t->b);
	memset(t, 0, sizeof(*t));
}

static struct pbucket *
ptable_find(const struct ptable *t, uint32_t key)
{
	uint32_t i;

	if (t->cap == 0)
		return NULL;
	for (i = ptable_hash(key) & (t->cap - 1); t->b[i].used;
	    i = (i + 1) & (t->cap - 1))
		if (t->b[i].key == key)
			return &t->b[i];
	return NULL;
}

static struct pbucket *
ptable_get(struct ptable *t, uint32_t key)
{
	struct pbucket	*b, *old;
	uint32_t	 i, ocap;

	if ((b = ptable_find(t, key)) != NULL)
		return b;
	if ((t->n + 1) * 2 > t->cap) {
		old = t->b;
		ocap = t->cap;
		t->cap = ocap ? ocap * 2 : 64;
		t->b = xcalloc(t->cap, sizeof(*t->b));
		for (i = 0; i < ocap; i++) {
			uint32_t j;

			if (!old[i].used)
				continue;
			for (j = ptable_hash(old[i].key) & (t->cap - 1);
			    t->b[j].used; j = (j + 1) & (t->cap - 1))
				;
			t->b[j] = old[i];
		}
		free(old);
	}
	for (i = ptable_hash(key) & (t->cap - 1); t->b[i].used;
	    i = (i + 1) & (t->cap - 1))
		;
	t->b[i].used = 1;
	t->b[i].key = key;
	t->n++;
	return &t->b[i];
}

struct policy *
policy_new(void)
{
	struct policy *p;

	p = xcalloc(1, sizeof(*p));
	p->deflt = RULE_ASK;
	p->dirty = 1;
	return p;
}

static void
index_clear(struct policy *p)
{
	free(p->generic.v);
	memset(&p->generic, 0, sizeof(p->generic));
	ptable_free(&p->exact);
	ptable_free(&p->vendor);
}

void
policy_clear(struct policy *p)
{
	size_t i;

	for (i = 0; i < p->n; i++)
		rule_free(p->rules[i].r);
	p->n = 0;
	p->dirty = 1;
}

void
policy_free(struct policy *p)
{
	if (p == NULL)
		return;
	policy_clear(p);
	free(p->rules);
	index_clear(p);
	free(p);
}

void
policy_set_default(struct policy *p, enum rule_target t)
{
	p->deflt = t;
}

size_t
policy_count(const struct policy *p)
{
	return p->n;
}

long
policy_find(const struct policy *p, int64_t id)
{
	size_t i;

	for (i = 0; i < p->n; i++)
		if (p->rules[i].id == id)
			return (long)i;
	return -1;
}

const struct rule *
policy_rule_at(const struct policy *p, size_t pos, int64_t *id)
{
	if (pos >= p->n)
		return NULL;
	if (id != NULL)
		*id = p->rules[pos].id;
	return p->rules[pos].r;
}

int
policy_insert(struct policy *p, size_t pos, int64_t id, struct rule *r)
{
	if (id <= 0 || r == NULL || policy_find(p, id) != -1 ||
	    p->n >= UINT32_MAX - 1)
		return -1;
	if (pos > p->n)
		pos = p->n;
	if (p->n == p->cap) {
		p->cap = p->cap ? p->cap * 2 : 64;
		p->rules = xreallocarray(p->rules, p->cap, sizeof(*p->rules));
	}
	memmove(&p->rules[pos + 1], &p->rules[pos],
	    (p->n - pos) * sizeof(*p->rules));
	p->rules[pos].id = id;
	p->rules[pos].r = r;
	p->n++;
	p->dirty = 1;
	return 0;
}

int
policy_append(struct policy *p, int64_t id, struct rule *r)
{
	return policy_insert(p, p->n, id, r);
}

int
policy_remove(struct policy *p, int64_t id)
{
	long pos;

	if ((pos = policy_find(p, id)) == -1)
		return -1;
	rule_free(p->rules[pos].r);
	memmove(&p->rules[pos], &p->rules[pos + 1],
	    (p->n - (size_t)pos - 1) * sizeof(*p->rules));
	p->n--;
	p->dirty = 1;
	return 0;
}

int
policy_move(struct policy *p, int64_t id, size_t to)
{
	struct prule	pr;
	long		pos;

	if ((pos = policy_find(p, id)) == -1)
		return -1;
	pr = p->rules[pos];
	memmove(&p->rules[pos], &p->rules[pos + 1],
	    (p->n - (size_t)pos - 1) * sizeof(*p->rules));
	p->n--;
	if (to > p->n)
		to = p->n;
	memmove(&p->rules[to + 1], &p->rules[to],
	    (p->n - to) * sizeof(*p->rules));
	p->rules[to] = pr;
	p->n++;
	p->dirty = 1;
	return 0;
}

void
policy_prepare(struct policy *p)
{
	struct rule_idkey	keys[KEYS_MAX];
	struct pbucket		*b;
	size_t			 i;
	int			 k, j;

	if (!p->dirty)
		return;
	index_clear(p);
	for (i = 0; i < p->n; i++) {
		k = rule_id_keys(p->rules[i].r, keys, nitems(keys));
		if (k < 0) {
			plist_push(&p->generic, (uint32_t)i);
			continue;
		}
		for (j = 0; j < k; j++) {
			if (keys[j].any_pid)
				b = ptable_get(&p->vendor, keys[j].vid);
			else
				b = ptable_get(&p->exact,
				    (uint32_t)keys[j].vid << 16 | keys[j].pid);
			plist_push(&b->l, (uint32_t)i);
		}
	}
	p->dirty = 0;
}

void
policy_evaluate(struct policy *p, const struct usbgw_identity *id,
    const struct usbgw_context *ctx, int64_t now, struct policy_decision *d)
{
	const struct plist	*l[3];
	const struct pbucket	*b;
	const struct rule	*r;
	uint32_t		 pos[3] = { 0, 0, 0 }, best, last = UINT32_MAX;
	int64_t			 t;
	int			 j, bi;

	policy_prepare(p);
	d->target = p->deflt;
	d->rule_id = 0;
	d->rule = NULL;
	d->next_change = RULE_NEVER;

	l[0] = &p->generic;
	b = ptable_find(&p->exact, (uint32_t)id->vid << 16 | id->pid);
	l[1] = b ? &b->l : NULL;
	b = ptable_find(&p->vendor, id->vid);
	l[2] = b ? &b->l : NULL;

	for (;;) {
		best = UINT32_MAX;
		bi = -1;
		for (j = 0; j < 3; j++) {
			if (l[j] != NULL && pos[j] < l[j]->n &&
			    l[j]->v[pos[j]] < best) {
				best = l[j]->v[pos[j]];
				bi = j;
			}
		}
		if (bi == -1)
			break;
		pos[bi]++;
		if (best == last)
			continue;	/* in two lists: visited already */
		last = best;
		r = p->rules[best].r;
		if (!rule_match_attrs(r, id, ctx))
			continue;
		if (rule_has_condition(r)) {
			t = rule_next_change(r, now);
			if (t < d->next_change)
				d->next_change = t;
			if (!rule_match_cond(r, ctx, now))
				continue;
		}
		d->target = rule_target(r);
		d->rule_id = p->rules[best].id;
		d->rule = r;
		return;
	}
}

/* ------------------------------------------------------------------ */
/* USBGuard rules.conf import                                           */

static void
add_problem(struct import_result *res, unsigned line, const char *reason)
{
	struct import_problem *pr;

	res->problems = xreallocarray(res->problems, res->nproblems + 1,
	    sizeof(*res->problems));
	pr = &res->problems[res->nproblems++];
	pr->line = line;
	usbgw_strlcpy(pr->reason, reason, sizeof(pr->reason));
}

int
policy_import_usbguard(FILE *fp, unsigned flags, struct import_result *res)
{
	return policy_import_usbguard_ex(fp, flags, NULL, res);
}

/* r with via-exporter "exp" added (r freed), or NULL with why set. */
static struct rule *
bind_exporter(struct rule *r, const char *exp, char *why, size_t whylen)
{
	struct rule_error	 err;
	struct rule		*nr;
	char			*text, *bound;

	text = rule_format(r);
	xasprintf(&bound, "%s via-exporter \"%s\"", text, exp);
	free(text);
	nr = rule_parse(bound, &err);
	free(bound);
	rule_free(r);
	if (nr == NULL)
		snprintf(why, whylen, "via-port bound to exporter %.64s: %.150s",
		    exp, err.msg);
	return nr;
}

int
policy_import_usbguard_ex(FILE *fp, unsigned flags, const char *exporter,
    struct import_result *res)
{
	struct rule_error	 err;
	struct rule		*r;
	struct import_rule	*ir;
	char			*line = NULL, *s, reason[256];
	size_t			 cap = 0, len;
	ssize_t			 n;
	unsigned		 lineno = 0;

	memset(res, 0, sizeof(*res));
	while ((n = getline(&line, &cap, fp)) != -1) {
		lineno++;
		len = (size_t)n;
		while (len > 0 && (line[len - 1] == '\n' ||
		    line[len - 1] == '\r'))
			line[--len] = '\0';
		for (s = line; *s == ' ' || *s == '\t'; s++)
			;
		if (*s == '\0' || *s == '#')
			continue;
		if (strlen(s) != (size_t)(line + len - s)) {
			add_problem(res, lineno, "NUL byte in line");
			continue;
		}
		/* The whole line, so that columns are the file's. */
		r = rule_parse_ex(line, RULE_PARSE_USBGUARD, &err);
		if (r == NULL) {
			add_problem(res, lineno, err.msg);
			continue;
		}
		if (err.ndropped > 0 && !(flags & IMPORT_DROP_UNMAPPED)) {
			snprintf(reason, sizeof(reason), "USBGuard-only "
			    "attributes do not map: %.180s", err.msg +
			    strlen("dropped: "));
			add_problem(res, lineno, reason);
			rule_free(r);
			continue;
		}
		if (err.ndropped > 0 && rule_target(r) == RULE_ALLOW &&
		    rule_attr_count(r) > 0 && !(flags & IMPORT_ALLOW_WIDER)) {
			snprintf(reason, sizeof(reason), "dropping %.90s would "
			    "make this allow rule wider than USBGuard's (it "
			    "would allow devices that rule does not): "
			    "--allow-wider imports the wider form",
			    err.msg + strlen("dropped: "));
			add_problem(res, lineno, reason);
			rule_free(r);
			continue;
		}
		if (err.ndropped > 0 && rule_attr_count(r) == 0 &&
		    rule_target(r) == RULE_ALLOW) {
			snprintf(reason, sizeof(reason), "dropping the USBGuard-"
			    "only attributes (%.150s) would allow every device",
			    err.msg + strlen("dropped: "));
			add_problem(res, lineno, reason);
			rule_free(r);
			continue;
		}
		if (rule_has_via_port(r) && !rule_has_via_exporter(r)) {
			if (exporter == NULL) {
				add_problem(res, lineno, "via-port names that "
				    "port on every exporter here: --exporter "
				    "NAME binds it to one");
				rule_free(r);
				continue;
			}
			if ((r = bind_exporter(r, exporter, reason,
			    sizeof(reason))) == NULL) {
				add_problem(res, lineno, reason);
				continue;
			}
		}
		res->rules = xreallocarray(res->rules, res->nrules + 1,
		    sizeof(*res->rules));
		ir = &res->rules[res->nrules++];
		ir->line = lineno;
		ir->rule = r;
		ir->warning[0] = '\0';
		if (err.ndropped > 0)
			usbgw_strlcpy(ir->warning, err.msg, sizeof(ir->warning));
	}
	res->lines = lineno;
	free(line);
	if (ferror(fp)) {
		import_result_free(res);
		errno = EIO;
		return -1;
	}
	return 0;
}

void
import_result_free(struct import_result *res)
{
	size_t i;

	for (i = 0; i < res->nrules; i++)
		rule_free(res->rules[i].rule);
	free(res->rules);
	free(res->problems);
	memset(res, 0, sizeof(*res));
}
