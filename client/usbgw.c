/*
 * usbgw [-s SOCKET] COMMAND [ARGS...]: the table of commands, option
 * parsing from each entry's spec, --help, and dispatch.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "usbgw.h"
#include "base/util.h"

#include "base/version.h"

static const struct cmd_entry *const cmd_table[] = {
	&cmd_list_entry,
	&cmd_show_entry,
	&cmd_approve_entry,
	&cmd_deny_entry,
	&cmd_revoke_entry,
	&cmd_watch_entry,
	&cmd_status_entry,
	&cmd_gateways_entry,
	&cmd_policy_list_entry,
	&cmd_policy_add_entry,
	&cmd_policy_insert_entry,
	&cmd_policy_remove_entry,
	&cmd_policy_move_entry,
	&cmd_policy_test_entry,
	&cmd_policy_apply_entry,
	&cmd_policy_import_entry,
	&cmd_exporter_list_entry,
	&cmd_exporter_add_entry,
	&cmd_exporter_remove_entry,
	&cmd_exporter_import_entry,
	&cmd_audit_entry,
	&cmd_audit_verify_entry,
	&cmd_audit_anchor_entry,
	&cmd_audit_pubkey_entry,
	&cmd_audit_prune_entry,
	&cmd_attach_entry,
	&cmd_detach_entry,
	&cmd_agent_list_entry,
	&cmd_agent_approve_entry,
	&cmd_agent_reject_entry,
	&cmd_agent_revoke_entry,
};

static const struct cmd_opt common_opts[] = {
	{ "json", 0, NULL, "print the daemon's answer as JSON" },
	{ "help", 'h', NULL, "show this help" },
};

static int
opt_index(const struct cmd_entry *e, const char *lname)
{
	int i;

	for (i = 0; e->opts != NULL && e->opts[i].lname != NULL; i++)
		if (strcmp(e->opts[i].lname, lname) == 0)
			return i;
	return -1;
}

const char *
arg_get(const struct cmd_ctx *ctx, const char *lname)
{
	int i = opt_index(ctx->entry, lname);

	return i >= 0 && ctx->set[i] ? ctx->val[i] : NULL;
}

int
arg_has(const struct cmd_ctx *ctx, const char *lname)
{
	int i;

	if (strcmp(lname, "json") == 0)
		return ctx->json;
	i = opt_index(ctx->entry, lname);
	return i >= 0 && ctx->set[i];
}

int
usage_error(const struct cmd_ctx *ctx, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "usbgw %s: ", ctx->entry->name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nusage: usbgw %s%s%s\n", ctx->entry->name,
	    ctx->entry->usage[0] != '\0' ? " " : "", ctx->entry->usage);
	return EXIT_USAGE;
}

static void
opt_line(FILE *f, const struct cmd_opt *o)
{
	char left[64];

	if (o->sname != 0)
		snprintf(left, sizeof(left), "-%c, --%s%s%s", o->sname, o->lname,
		    o->arg != NULL ? " " : "", o->arg != NULL ? o->arg : "");
	else
		snprintf(left, sizeof(left), "    --%s%s%s", o->lname,
		    o->arg != NULL ? " " : "", o->arg != NULL ? o->arg : "");
	fprintf(f, "  %-26s %s\n", left, o->help);
}

void
cmd_help(const struct cmd_entry *e, FILE *f)
{
	size_t i;

	fprintf(f, "usage: usbgw [-s SOCKET] %s%s%s\n\n%s\n", e->name,
	    e->usage[0] != '\0' ? " " : "", e->usage, e->summary);
	fprintf(f, "\noptions:\n");
	for (i = 0; e->opts != NULL && e->opts[i].lname != NULL; i++)
		opt_line(f, &e->opts[i]);
	for (i = 0; i < nitems(common_opts); i++)
		opt_line(f, &common_opts[i]);
	fprintf(f, "\nprivilege needed: %s\n", ctl_priv_name(e->priv));
	fprintf(f, "exit status: 0 ok, 1 refused, 2 usage, 3 not found or "
	    "ambiguous, 4 daemon unreachable, 5 internal error\n");
}

static void
main_help(FILE *f)
{
	size_t i;
	int w = 0, n;

	for (i = 0; i < nitems(cmd_table); i++)
		if ((n = (int)strlen(cmd_table[i]->name)) > w)
			w = n;
	fprintf(f, "usage: usbgw [-s SOCKET] COMMAND [ARGS...]\n"
	    "       usbgw COMMAND --help\n\n"
	    "Operate the usbgw USB/IP gateway through its control socket\n"
	    "(-s, or $USBGW_SOCKET, default %s).\n\ncommands:\n",
	    USBGW_DEFAULT_SOCKET);
	for (i = 0; i < nitems(cmd_table); i++)
		fprintf(f, "  %-*s  %s\n", w, cmd_table[i]->name,
		    cmd_table[i]->summary);
	fprintf(f, "\nexit status: 0 ok, 1 refused, 2 usage, 3 not found or "
	    "ambiguous, 4 daemon unreachable, 5 internal error\n"
	    "See usbgw(1).\n");
}

/* Find the entry for argv: "policy add" takes two words. */
static const struct cmd_entry *
cmd_find(int argc, char **argv, int *words)
{
	size_t i, n;
	const struct cmd_entry *e;
	int pass;

	/* Two-word names first: "audit verify" before "audit". */
	for (pass = 2; pass >= 1; pass--) {
		for (i = 0; i < nitems(cmd_table); i++) {
			e = cmd_table[i];
			n = strcspn(e->name, " ");
			if (strncmp(e->name, argv[0], n) != 0 ||
			    argv[0][n] != '\0')
				continue;
			if (pass == 1 && e->name[n] == '\0') {
				*words = 1;
				return e;
			}
			if (pass == 2 && e->name[n] == ' ' && argc > 1 &&
			    strcmp(e->name + n + 1, argv[1]) == 0) {
				*words = 2;
				return e;
			}
		}
	}
	return NULL;
}

/* "policy" alone or with an unknown verb: list the verbs. */
static int
group_usage(const char *group, const char *verb)
{
	size_t i, n = strlen(group);
	int any = 0;

	for (i = 0; i < nitems(cmd_table); i++)
		if (strncmp(cmd_table[i]->name, group, n) == 0 &&
		    cmd_table[i]->name[n] == ' ')
			any = 1;
	if (!any)
		return 0;
	if (verb != NULL && strcmp(verb, "--help") != 0 &&
	    strcmp(verb, "-h") != 0)
		fprintf(stderr, "usbgw %s: unknown subcommand \"%s\"\n", group,
		    verb);
	else if (verb == NULL)
		fprintf(stderr, "usbgw %s: a subcommand is needed\n", group);
	fprintf(verb != NULL && (strcmp(verb, "--help") == 0 ||
	    strcmp(verb, "-h") == 0) ? stdout : stderr, "usage:\n");
	for (i = 0; i < nitems(cmd_table); i++)
		if (strncmp(cmd_table[i]->name, group, n) == 0 &&
		    cmd_table[i]->name[n] == ' ')
			fprintf(verb != NULL && (strcmp(verb, "--help") == 0 ||
			    strcmp(verb, "-h") == 0) ? stdout : stderr,
			    "  usbgw %s %s\n", cmd_table[i]->name,
			    cmd_table[i]->usage);
	return 1;
}

/*
 * Parse the command's options with getopt_long from its spec.  Options
 * may come before or after positional arguments; "--" ends them.
 */
static int
cmd_parse(struct cmd_ctx *ctx, int argc, char **argv)
{
	const struct cmd_entry *e = ctx->entry;
	struct option lopts[CMD_MAX_OPTS + 3];
	char sopts[CMD_MAX_OPTS * 2 + 8], *p = sopts;
	int i, n = 0, c, li;

	for (i = 0; e->opts != NULL && e->opts[i].lname != NULL; i++) {
		lopts[n].name = e->opts[i].lname;
		lopts[n].has_arg = e->opts[i].arg != NULL ? required_argument :
		    no_argument;
		lopts[n].flag = NULL;
		lopts[n].val = 1000 + i;
		n++;
		if (e->opts[i].sname != 0) {
			*p++ = (char)e->opts[i].sname;
			if (e->opts[i].arg != NULL)
				*p++ = ':';
		}
	}
	lopts[n++] = (struct option){ "json", no_argument, NULL, 900 };
	lopts[n++] = (struct option){ "help", no_argument, NULL, 'h' };
	lopts[n] = (struct option){ NULL, 0, NULL, 0 };
	*p++ = 'h';
	*p = '\0';

	optind = 0;	/* glibc: a full restart of the scan */
	opterr = 0;
	{
		char spec[sizeof(sopts) + 2];

		snprintf(spec, sizeof(spec), ":%s", sopts);
		while ((c = getopt_long(argc, argv, spec, lopts, &li)) != -1) {
			if (c == 'h') {
				cmd_help(e, stdout);
				return -1;
			}
			if (c == 900) {
				ctx->json = 1;
				continue;
			}
			if (c == '?') {
				if (optopt != 0)
					return usage_error(ctx, "unknown option "
					    "-%c", optopt);
				return usage_error(ctx, "unknown option %s",
				    argv[optind - 1]);
			}
			if (c == ':')
				return usage_error(ctx, "option %s needs a "
				    "value", argv[optind - 1]);
			if (c < 1000) {
				for (i = 0; e->opts[i].lname != NULL; i++)
					if (e->opts[i].sname == c)
						break;
				c = 1000 + i;
			}
			i = c - 1000;
			if (ctx->set[i] && e->opts[i].arg != NULL)
				return usage_error(ctx, "option --%s given twice",
				    e->opts[i].lname);
			ctx->set[i] = 1;
			ctx->val[i] = optarg;
		}
	}
	ctx->argc = argc - optind;
	ctx->argv = argv + optind;
	if (ctx->argc < e->min_args)
		return usage_error(ctx, "missing argument");
	if (e->max_args >= 0 && ctx->argc > e->max_args)
		return usage_error(ctx, "unexpected argument \"%s\"",
		    ctx->argv[e->max_args]);
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct option gopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	struct cmd_ctx ctx;
	const struct cmd_entry *e;
	const char *sock;
	int c, words, rv;

	signal(SIGPIPE, SIG_IGN);
	sock = getenv("USBGW_SOCKET");
	if (sock == NULL || *sock == '\0')
		sock = USBGW_DEFAULT_SOCKET;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+s:hV", gopts, NULL)) != -1) {
		switch (c) {
		case 's':
			sock = optarg;
			break;
		case 'h':
			main_help(stdout);
			return EXIT_OK;
		case 'V':
			printf("usbgw %s (control protocol %d)\n", USBGW_VERSION,
			    1);
			return EXIT_OK;
		default:
			fprintf(stderr, "usbgw: unknown option %s\n",
			    argv[optind - 1]);
			main_help(stderr);
			return EXIT_USAGE;
		}
	}
	argc -= optind;
	argv += optind;
	if (argc == 0) {
		main_help(stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[0], "help") == 0) {
		if (argc < 2) {
			main_help(stdout);
			return EXIT_OK;
		}
		if ((e = cmd_find(argc - 1, argv + 1, &words)) == NULL) {
			if (group_usage(argv[1], argc > 2 ? argv[2] : "--help"))
				return argc > 2 ? EXIT_USAGE : EXIT_OK;
			fprintf(stderr, "usbgw: unknown command \"%s\"\n",
			    argv[1]);
			return EXIT_USAGE;
		}
		cmd_help(e, stdout);
		return EXIT_OK;
	}
	if ((e = cmd_find(argc, argv, &words)) == NULL) {
		if (group_usage(argv[0], argc > 1 ? argv[1] : NULL))
			return argc > 1 && (strcmp(argv[1], "--help") == 0 ||
			    strcmp(argv[1], "-h") == 0) ? EXIT_OK : EXIT_USAGE;
		fprintf(stderr, "usbgw: unknown command \"%s\"; see usbgw "
		    "--help\n", argv[0]);
		return EXIT_USAGE;
	}
	memset(&ctx, 0, sizeof(ctx));
	ctx.entry = e;
	ctx.socket = sock;
	/* getopt_long wants argv[0] to be the program: keep the last word. */
	rv = cmd_parse(&ctx, argc - words + 1, argv + words - 1);
	if (rv == -1)
		return EXIT_OK;		/* --help */
	if (rv != 0)
		return rv;
	rv = e->exec(&ctx);
	if (ctx.cl != NULL)
		client_close(ctx.cl);
	if (fflush(stdout) == EOF || ferror(stdout)) {
		if (errno != EPIPE)
			fprintf(stderr, "usbgw: write error: %s\n",
			    strerror(errno));
		return rv == EXIT_OK ? EXIT_INTERNAL : rv;
	}
	return rv;
}
