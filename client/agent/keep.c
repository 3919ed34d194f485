/*
 * The keep-list: an ordered list of device rules, first match wins
 * (keep.h, protocol.md 1.9.2).  Each rule is parsed by rule.c with the
 * target "block" (keep-local) or "allow" (export) and RULE_PARSE_DEVICE,
 * which refuses network attributes, labels and conditions at their
 * column.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keep.h"
#include "base/log.h"
#include "base/util.h"

struct keep_entry {
	struct rule	*rule;
	bool		 local;
	int		 line;
};

struct keep_list {
	struct keep_entry	*v;
	size_t			 n, cap;
};

#define USB_CLASS_HUB	0x09

struct keep_list *
keep_list_new(void)
{
	return xcalloc(1, sizeof(struct keep_list));
}

void
keep_list_free(struct keep_list *k)
{
	size_t i;

	if (k == NULL)
		return;
	for (i = 0; i < k->n; i++)
		rule_free(k->v[i].rule);
	free(k->v);
	free(k);
}

size_t
keep_list_len(const struct keep_list *k)
{
	return k->n;
}

int
keep_list_add(struct keep_list *k, bool local, const char *text, int line,
    struct rule_error *err)
{
	static const char allow[] = "allow ", block[] = "block ";
	const char *prefix = local ? block : allow, *m;
	struct rule *r;
	char *full;
	int col;

	memset(err, 0, sizeof(*err));
	if (k->n >= KEEP_MAX_RULES) {
		err->column = 1;
		snprintf(err->msg, sizeof(err->msg), "expected at most %d "
		    "keep-local, export and no-reset rules", KEEP_MAX_RULES);
		return -1;
	}
	xasprintf(&full, "%s%s", prefix, text);
	r = rule_parse_ex(full, RULE_PARSE_DEVICE, err);
	free(full);
	if (r == NULL) {
		/* The column in TEXT, and the message without "column N: ". */
		col = err->column - (int)(sizeof(allow) - 1);
		err->column = col < 1 ? 1 : col;
		if (strncmp(err->msg, "column ", 7) == 0 &&
		    (m = strstr(err->msg, ": ")) != NULL)
			memmove(err->msg, m + 2, strlen(m + 2) + 1);
		return -1;
	}
	if (k->n == k->cap) {
		k->cap = k->cap == 0 ? 8 : k->cap * 2;
		k->v = xreallocarray(k->v, k->cap, sizeof(*k->v));
	}
	k->v[k->n].rule = r;
	k->v[k->n].local = local;
	k->v[k->n].line = line;
	k->n++;
	return 0;
}

static void
add_builtin(struct keep_list *k, bool local, const char *text)
{
	struct rule_error err;

	if (keep_list_add(k, local, text, 0, &err) == -1)
		fatalx("built-in rule \"%s\": %s", text, err.msg);
}

void
keep_list_add_defaults(struct keep_list *k)
{
	add_builtin(k, false, "with-interface match-all { 03:00:* }");
	add_builtin(k, true, "with-interface match-all "
	    "{ 03:01:01 03:01:02 03:00:* }");
	add_builtin(k, true, "with-interface match-all { 09:*:* }");
}

void
keep_noreset_add_defaults(struct keep_list *k)
{
	add_builtin(k, true, "id 1210:001c");
	add_builtin(k, true, "id 2798:0001");
}

static bool
is_hub(const struct usbgw_identity *id)
{
	uint8_t i;

	if (id->dev_class == USB_CLASS_HUB)
		return true;
	for (i = 0; i < id->n_ifaces && i < USBGW_IFACE_MAX; i++)
		if (id->ifaces[i].cls == USB_CLASS_HUB)
			return true;
	return false;
}

bool
keep_local(const struct keep_list *k, const struct usbgw_identity *id,
    int *ruleno)
{
	size_t i;
	int dummy;

	if (ruleno == NULL)
		ruleno = &dummy;
	*ruleno = 0;
	if (is_hub(id))
		return true;
	for (i = 0; k != NULL && i < k->n; i++)
		if (rule_match_attrs(k->v[i].rule, id, NULL)) {
			*ruleno = k->v[i].line;
			return k->v[i].local;
		}
	*ruleno = -1;
	return false;
}

bool
keep_no_reset(const struct keep_list *k, const struct usbgw_identity *id)
{
	size_t i;

	for (i = 0; k != NULL && i < k->n; i++)
		if (rule_match_attrs(k->v[i].rule, id, NULL))
			return true;
	return false;
}
