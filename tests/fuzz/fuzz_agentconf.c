/*
 * libFuzzer harness for usbgw-agent's configuration parser
 * (client/agent/aconf.c and the keep-list it fills, keep.c, compiled in
 * here: they are not part of libusbgw).  Input: a configuration text.
 * Checks: no crash or sanitizer report; an accepted file stays within
 * every bound (listeners, allow-from, gateways, rules, max-connections,
 * a valid name); a refused one has 1..ACONF_MAX_ERRORS lines (and one
 * "too many errors" line past that), each "fuzz:LINE:COL: ..." with LINE
 * within the text and only printable ASCII (untrusted words are shown
 * escaped).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../client/agent/aconf.c"
#include "../../client/agent/keep.c"
#include "fuzz.h"

static FUZZ_NOCOV void
check_errors(const char *errs, unsigned long maxline)
{
	const char *p = errs, *nl, *end;
	unsigned long line, col;
	int n = 0;

	CHECK(errs != NULL && *errs != '\0');
	for (; *p != '\0'; p = nl + 1) {
		nl = strchr(p, '\n');
		CHECK(nl != NULL);
		n++;
		CHECK(strncmp(p, "fuzz:", 5) == 0);
		for (end = p; end < nl; end++)
			CHECK(*end >= 0x20 && *end < 0x7f);
		if (strncmp(p, "fuzz: ", 6) == 0) {	/* giving up */
			CHECK(n == ACONF_MAX_ERRORS + 1);
			continue;
		}
		line = strtoul(p + 5, (char **)&end, 10);
		CHECK(end != p + 5 && *end == ':');
		CHECK(line >= 1 && line <= maxline);
		col = strtoul(end + 1, (char **)&end, 10);
		CHECK(col >= 1 && *end == ':');
	}
	CHECK(n >= 1 && n <= ACONF_MAX_ERRORS + 1);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct aconf *c;
	char *errs = NULL;
	unsigned long maxline = 1;
	size_t i;

	if (size > 65536)
		return 0;
	for (i = 0; i < size; i++)
		maxline += data[i] == '\n';
	c = aconf_new();
	if (aconf_parse_buf(c, "fuzz", (const char *)data, size, &errs) == 0) {
		CHECK(errs == NULL);
		CHECK(c->nlisten <= ACONF_MAX_LISTEN);
		CHECK(c->nallow <= ACONF_MAX_ALLOW);
		CHECK(c->ngateways <= ACONF_MAX_GATEWAYS);
		CHECK(c->max_connections >= 1 &&
		    c->max_connections <= ACONF_MAX_CONNS);
		CHECK(c->name[0] == '\0' || name_ok(c->name));
		CHECK(keep_list_len(c->keep) + keep_list_len(c->noreset) <=
		    2 * KEEP_MAX_RULES);
		for (i = 0; i < c->nallow; i++)
			CHECK(c->allow[i].kind == HOST_ADDR);
		aconf_finish(c);
	} else
		check_errors(errs, maxline);
	free(errs);
	aconf_free(c);
	return 0;
}
