/*
 * usbgw policy list|add|insert|remove|move|test|apply|import: the ordered
 * rule set (protocol.md part 3 for the language).  First match wins.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"
#include "policy/rule.h"
#include "usbgw.h"
#include "base/util.h"

#define POLICY_MAX_RULES	10000
#define POLICY_MAX_LINE		4096

static const struct cmd_opt comment_opts[] = {
	{ "comment", 'c', "TEXT", "a note kept with the rule" },
	{ NULL, 0, NULL, NULL }
};

static const struct cmd_opt import_opts[] = {
	{ "replace", 0, NULL, "replace the admin rules instead of appending "
	    "(operators' permanent decisions stay)" },
	{ "partial", 0, NULL, "import the lines that map even if some do not" },
	{ "drop-unmapped", 0, NULL,
	    "drop USBGuard-only attributes (parent-hash, USBGuard hashes, ...)" },
	{ "allow-wider", 0, NULL, "with --drop-unmapped: also import allow "
	    "rules that dropping makes wider" },
	{ "exporter", 0, "NAME", "bind via-port rules to this exporter" },
	{ NULL, 0, NULL, NULL }
};

/* The rule is the remaining arguments joined by spaces. */
static char *
join_args(int argc, char **argv)
{
	size_t len = 1;
	char *s;
	int i;

	for (i = 0; i < argc; i++)
		len += strlen(argv[i]) + 1;
	s = xcalloc(1, len);
	for (i = 0; i < argc; i++) {
		if (i > 0)
			usbgw_strlcat(s, " ", len);
		usbgw_strlcat(s, argv[i], len);
	}
	return s;
}

static int
parse_pos(const struct cmd_ctx *ctx, const char *what, const char *s,
    long long *out)
{
	const char *es;

	if (parse_num(s, 1, 1000000, out, &es) != 0)
		return usage_error(ctx, "%s \"%s\": expected a positive number",
		    what, s);
	return 0;
}

static int
policy_list_exec(struct cmd_ctx *ctx)
{
	struct table *t;
	json_t *res, *r;
	size_t i;
	int st;

	if ((st = cmd_call(ctx, "policy.list", NULL, &res)) != EXIT_OK ||
	    ctx->json)
		goto out;
	if (json_array_size(res) == 0) {
		printf("no rules: every new device is pending\n");
		goto out;
	}
	t = table_new(4, "POS", "ID", "RULE", "COMMENT");
	table_align_right(t, 0);
	table_align_right(t, 1);
	json_array_foreach(res, i, r)
		table_add(t, jfmt(r, "position"), jfmt(r, "id"), jstr(r, "rule"),
		    jstr(r, "comment"));
	table_print(t, stdout);
	table_free(t);
out:
	json_decref(res);
	return st;
}

static int
policy_add_common(struct cmd_ctx *ctx, const char *cmd, long long pos,
    int first)
{
	const char *c = arg_get(ctx, "comment");
	json_t *args, *res;
	char *rule;
	int st;

	rule = join_args(ctx->argc - first, ctx->argv + first);
	args = json_pack("{s:s}", "rule", rule);
	free(rule);
	if (pos > 0)
		json_object_set_new(args, "position", json_integer(pos));
	if (c != NULL)
		json_object_set_new(args, "comment", json_string(c));
	if ((st = cmd_call(ctx, cmd, args, &res)) == EXIT_OK && !ctx->json)
		printf("added rule %s at position %s\n", jfmt(res, "id"),
		    jfmt(res, "position"));
	json_decref(res);
	return st;
}

static int
policy_add_exec(struct cmd_ctx *ctx)
{
	return policy_add_common(ctx, "policy.add", 0, 0);
}

static int
policy_insert_exec(struct cmd_ctx *ctx)
{
	long long pos;

	if (parse_pos(ctx, "position", ctx->argv[0], &pos) != 0)
		return EXIT_USAGE;
	return policy_add_common(ctx, "policy.insert", pos, 1);
}

static int
policy_remove_exec(struct cmd_ctx *ctx)
{
	json_t *res;
	long long id;
	int st;

	if (parse_pos(ctx, "rule id", ctx->argv[0], &id) != 0)
		return EXIT_USAGE;
	st = cmd_call(ctx, "policy.remove", json_pack("{s:I}", "id",
	    (json_int_t)id), &res);
	if (st == EXIT_OK && !ctx->json)
		printf("removed rule %lld\n", id);
	json_decref(res);
	return st;
}

static int
policy_move_exec(struct cmd_ctx *ctx)
{
	json_t *res;
	long long id, pos;
	int st;

	if (parse_pos(ctx, "rule id", ctx->argv[0], &id) != 0 ||
	    parse_pos(ctx, "position", ctx->argv[1], &pos) != 0)
		return EXIT_USAGE;
	st = cmd_call(ctx, "policy.move", json_pack("{s:I, s:I}", "id",
	    (json_int_t)id, "position", (json_int_t)pos), &res);
	if (st == EXIT_OK && !ctx->json) {
		json_t *p = json_object_get(res, "position");
		const char *note = json_string_value(json_object_get(res,
		    "note"));

		if (json_is_integer(p) && json_integer_value(p) != pos)
			printf("moved rule %lld to position %lld, not %lld "
			    "(%lld rules; %s)\n", id,
			    (long long)json_integer_value(p), pos,
			    (long long)json_integer_value(json_object_get(res,
			    "rules")), note != NULL ? note : "");
		else
			printf("moved rule %lld to position %lld\n", id, pos);
	}
	json_decref(res);
	return st;
}

static int
policy_test_exec(struct cmd_ctx *ctx)
{
	const char *pos = arg_get(ctx, "position");
	struct table *t;
	json_t *res, *d, *args;
	char *rule, *end;
	size_t i, n = 0, changed = 0;
	bool per_iface = false;
	long p = 0;
	int st;

	if (pos != NULL) {
		errno = 0;
		p = strtol(pos, &end, 10);
		if (errno != 0 || *end != '\0' || p < 1)
			return usage_error(ctx, "--position %s: expected a "
			    "position, 1 or more", pos);
	}
	rule = join_args(ctx->argc, ctx->argv);
	args = json_pack("{s:s}", "rule", rule);
	if (p > 0)
		json_object_set_new(args, "position", json_integer(p));
	st = cmd_call(ctx, "policy.test", args, &res);
	free(rule);
	if (st != EXIT_OK || ctx->json)
		goto out;
	if (json_array_size(res) == 0) {
		printf("no devices present\n");
		goto out;
	}
	/* a column for the interfaces denied when an interface-policy decides */
	json_array_foreach(res, i, d)
		if (json_is_true(json_object_get(d, "per_interface")))
			per_iface = true;
	if (per_iface)
		t = table_new(7, "BUSID", "STATE", "DEVICE", "MATCH", "TARGET",
		    "WOULD BE", "INTERFACES DENIED");
	else
		t = table_new(6, "BUSID", "STATE", "DEVICE", "MATCH", "TARGET",
		    "WOULD BE");
	json_array_foreach(res, i, d) {
		int m = json_is_true(json_object_get(d, "match"));
		char denied[1024];
		size_t nd;

		n += (size_t)m;
		if (*jstr(d, "would") != '\0' &&
		    strcmp(jstr(d, "would"), jstr(d, "state")) != 0)
			changed++;
		if (!per_iface) {
			table_add(t, jstr(d, "busid"), jstr(d, "state"),
			    device_name(d), m ? "yes" : "no", m ? jfmt(d,
			    "target") : "", jstr(d, "would"));
			continue;
		}
		nd = format_iface_decisions(d, true, denied, sizeof(denied));
		if (!json_is_true(json_object_get(d, "per_interface")))
			denied[0] = '\0';
		else if (json_array_size(json_object_get(d, "interfaces")) == 0)
			usbgw_strlcpy(denied, "all (none known)", sizeof(denied));
		else if (nd == json_array_size(json_object_get(d, "interfaces")))
			usbgw_strlcat(denied, " (all: nothing usable)",
			    sizeof(denied));
		else if (nd == 0)
			usbgw_strlcpy(denied, "none", sizeof(denied));
		table_add(t, jstr(d, "busid"), jstr(d, "state"), device_name(d),
		    m ? "yes" : "no", m ? jfmt(d, "target") : "",
		    jstr(d, "would"), denied);
	}
	table_print(t, stdout);
	table_free(t);
	printf("added, it would change the state of %zu (the whole decision: "
	    "operator approvals and denials included)\n", changed);
	printf("the rule matches %zu of %zu present devices; nothing was "
	    "changed\n", n, json_array_size(res));
out:
	json_decref(res);
	return st;
}

static int
policy_apply_exec(struct cmd_ctx *ctx)
{
	struct table *t;
	json_t *res, *c;
	size_t i;
	int st;

	if ((st = cmd_call(ctx, "policy.apply", NULL, &res)) != EXIT_OK ||
	    ctx->json)
		goto out;
	if (json_array_size(res) == 0) {
		printf("no device changed state\n");
		goto out;
	}
	t = table_new(4, "BUSID", "FROM", "TO", "RULE");
	json_array_foreach(res, i, c)
		table_add(t, jstr(c, "busid"), jstr(c, "from"), jstr(c, "to"),
		    jfmt(c, "rule_id"));
	table_print(t, stdout);
	table_free(t);
out:
	json_decref(res);
	return st;
}

/*
 * Rules from a file (or stdin) in USBGuard's rules.conf syntax, which ours
 * extends.  Each line is parsed here (policy_import_usbguard()), so every
 * line that does not map is reported with its number and reason; then
 * the whole lot goes to the daemon in one policy.import (all or nothing
 * there).  Unless --partial, one unmappable line imports nothing.
 */
static int
policy_import_exec(struct cmd_ctx *ctx)
{
	const char *path = ctx->argc > 0 ? ctx->argv[0] : "-";
	struct import_result ir;
	json_t *rules, *res = NULL;
	unsigned flags = (arg_has(ctx, "drop-unmapped") ? IMPORT_DROP_UNMAPPED :
	    0) | (arg_has(ctx, "allow-wider") ? IMPORT_ALLOW_WIDER : 0);
	size_t i;
	FILE *f;
	int st;

	if (strcmp(path, "-") == 0)
		f = stdin;
	else if ((f = fopen(path, "r")) == NULL) {
		fprintf(stderr, "usbgw policy import: %s: %s\n", path,
		    strerror(errno));
		return EXIT_USAGE;
	}
	if (arg_has(ctx, "allow-wider") && !arg_has(ctx, "drop-unmapped")) {
		if (f != stdin)
			fclose(f);
		return usage_error(ctx, "--allow-wider: only with "
		    "--drop-unmapped (nothing is dropped without it)");
	}
	st = policy_import_usbguard_ex(f, flags, arg_get(ctx, "exporter"),
	    &ir);
	if (f != stdin)
		fclose(f);
	if (st == -1) {
		fprintf(stderr, "usbgw policy import: %s: read error\n", path);
		return EXIT_USAGE;
	}
	for (i = 0; i < ir.nproblems; i++)
		fprintf(stderr, "%s:%u: not imported: %s\n", path,
		    ir.problems[i].line, ir.problems[i].reason);
	for (i = 0; i < ir.nrules; i++)
		if (ir.rules[i].warning[0] != '\0')
			fprintf(stderr, "%s:%u: warning: %s\n", path,
			    ir.rules[i].line, ir.rules[i].warning);
	if (ir.nproblems > 0 && !arg_has(ctx, "partial")) {
		fprintf(stderr, "usbgw policy import: %zu line(s) do not map; "
		    "nothing imported (--partial imports the rest)\n",
		    ir.nproblems);
		import_result_free(&ir);
		return EXIT_USAGE;
	}
	if (ir.nrules > POLICY_MAX_RULES) {
		fprintf(stderr, "usbgw policy import: more than %d rules\n",
		    POLICY_MAX_RULES);
		import_result_free(&ir);
		return EXIT_USAGE;
	}
	rules = json_array();
	for (i = 0; i < ir.nrules; i++) {
		char *text = rule_format(ir.rules[i].rule);

		json_array_append_new(rules, json_string(text));
		free(text);
	}
	import_result_free(&ir);
	st = cmd_call(ctx, "policy.import", json_pack("{s:O, s:b}", "rules",
	    rules, "replace", arg_has(ctx, "replace")), &res);
	if (st == EXIT_OK && !ctx->json)
		printf("imported %s rules%s%s%s\n", jfmt(res, "added"),
		    arg_has(ctx, "replace") ? " (removed " : "",
		    arg_has(ctx, "replace") ? jfmt(res, "removed") : "",
		    arg_has(ctx, "replace") ? ")" : "");
	json_decref(res);
	json_decref(rules);
	return st;
}

const struct cmd_entry cmd_policy_list_entry = {
	"policy list", "[--json]", "list the rules in evaluation order",
	PRIV_READ, 0, 0, NULL, policy_list_exec
};
const struct cmd_entry cmd_policy_add_entry = {
	"policy add", "RULE [-c COMMENT]", "append a rule",
	PRIV_ADMIN, 1, -1, comment_opts, policy_add_exec
};
const struct cmd_entry cmd_policy_insert_entry = {
	"policy insert", "POSITION RULE [-c COMMENT]",
	"insert a rule at POSITION (1 is first)",
	PRIV_ADMIN, 2, -1, comment_opts, policy_insert_exec
};
const struct cmd_entry cmd_policy_remove_entry = {
	"policy remove", "ID", "remove rule ID",
	PRIV_ADMIN, 1, 1, NULL, policy_remove_exec
};
const struct cmd_entry cmd_policy_move_entry = {
	"policy move", "ID POSITION", "move rule ID to POSITION",
	PRIV_ADMIN, 2, 2, NULL, policy_move_exec
};
static const struct cmd_opt test_opts[] = {
	{ "position", 0, "N", "as if inserted at position N (default: after "
	    "the admin rules)" },
	{ NULL, 0, NULL, NULL }
};

const struct cmd_entry cmd_policy_test_entry = {
	"policy test", "RULE [--position N] [--json]",
	"show what adding RULE would do to every present device, changing "
	"nothing",
	PRIV_READ, 1, -1, test_opts, policy_test_exec
};
const struct cmd_entry cmd_policy_apply_entry = {
	"policy apply", "[--json]",
	"re-evaluate the present devices against the rules now",
	PRIV_ADMIN, 0, 0, NULL, policy_apply_exec
};
const struct cmd_entry cmd_policy_import_entry = {
	"policy import", "[FILE | -] [--replace] [--partial] [--drop-unmapped "
	"[--allow-wider]] [--exporter NAME]",
	"add rules from FILE (one a line; USBGuard rules.conf syntax)",
	PRIV_ADMIN, 0, 1, import_opts, policy_import_exec
};
