/*
 * libFuzzer harness for the usbgwd.conf parser (config.c).
 *
 * Input: the file's bytes.  Besides ASan/UBSan cleanliness it checks that:
 *  - the parser accepts or refuses with at least one "NAME:LINE: ..."
 *    message, never more than CONFIG_MAX_ERRORS + 1 lines;
 *  - every string of an accepted config is NUL-terminated within its field
 *    and the counts are within their bounds;
 *  - config_dump() of an accepted config parses again to the same dump.
 *
 * struct config is ~130 KB (fixed arrays of exporters, hooks and
 * principals): over ASan's largest size class, so config_new() per input
 * meant an mmap, a calloc's worth of page faults and a munmap, twice, and
 * ran the harness at ~3 k inputs/s.  The defaults are taken once from
 * config_new() and copied into two static configs per input instead; the
 * parser sees the same fresh defaults either way.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/config.h"
#include "fuzz.h"

#define TERMINATED(f)	CHECK(memchr((f), '\0', sizeof(f)) != NULL)

FUZZ_NOCOV static void
check_bounds(const struct config *c)
{
	size_t i, j;

	TERMINATED(c->database);
	TERMINATED(c->pidfile);
	TERMINATED(c->control_socket);
	TERMINATED(c->control_group);
	CHECK(c->nlisten <= CONFIG_MAX_LISTEN);
	CHECK(c->nexporters <= CONFIG_MAX_EXPORTERS);
	CHECK(c->nhooks <= CONFIG_MAX_HOOKS);
	for (i = 0; i < c->nlisten; i++) {
		TERMINATED(c->listen[i].host);
		TERMINATED(c->listen[i].port);
	}
	for (i = 0; i < c->nexporters; i++) {
		TERMINATED(c->exporters[i].name);
		CHECK(c->exporters[i].addr.host[0] != '\0');
	}
	for (i = 0; i < c->nhooks; i++) {
		TERMINATED(c->hooks[i].command);
		CHECK(c->hooks[i].events != 0);
	}
	for (i = PRIV_READ; i <= PRIV_ADMIN; i++) {
		CHECK(c->priv[i].n <= CONFIG_MAX_PRINCIPALS);
		for (j = 0; j < c->priv[i].n; j++)
			TERMINATED(c->priv[i].p[j].name);
	}
}

/* A refusal: "f:LINE: ..." lines, at least one, at most the cap + 1. */
FUZZ_NOCOV static void
check_errors(const char *errs)
{
	size_t i, lines = 0;

	CHECK(errs != NULL && strncmp(errs, "f:", 2) == 0);
	for (i = 0; errs[i] != '\0'; i++)
		lines += errs[i] == '\n';
	CHECK(lines >= 1 && lines <= CONFIG_MAX_ERRORS + 1);
}

static struct config	*defaults;
static struct config	 cfg1, cfg2;

int	LLVMFuzzerInitialize(int *, char ***);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	defaults = config_new();
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config *c = &cfg1, *c2 = &cfg2;
	char *errs = NULL, *errs2 = NULL, *d1, *d2;

	*c = *defaults;
	if (config_parse_buf(c, "f", (const char *)data, size, &errs) != 0) {
		check_errors(errs);
		free(errs);
		return 0;
	}
	CHECK(errs == NULL);
	check_bounds(c);
	d1 = config_dump(c);
	*c2 = *defaults;
	if (config_parse_buf(c2, "dump", d1, strlen(d1), &errs2) != 0) {
		fprintf(stderr, "dump does not parse:\n%s\n%s", d1, errs2);
		abort();
	}
	d2 = config_dump(c2);
	CHECK(strcmp(d1, d2) == 0);
	free(d1);
	free(d2);
	return 0;
}
