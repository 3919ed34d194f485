/*
 * libFuzzer harness for usbgw-sim's configuration parser
 * (contrib/sim/conf.c, compiled in here: the simulator is not part of
 * libusbgw).  Input: a configuration text.  Checks: no crash or
 * sanitizer report; an accepted configuration has at most
 * SIM_MAX_DEVICES devices, each with a valid busid, `exporters` groups
 * within their bounds (names and busids they make valid), and logged
 * nothing; a refused one logged 1..SIM_MAX_ERRORS messages, each
 * "fuzz:LINE: ..." with LINE within the text and only printable ASCII
 * (untrusted words are escaped before they reach a log).
 *
 * The parser reports errors through log_warnx().  They used to go to
 * stderr, a write(2) per error line, which was most of the time spent
 * per input; conf.c's log_warnx and log_warn are renamed here to a
 * function that checks each message in memory instead.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define log_warnx	fuzz_sim_warnx
#define log_warn	fuzz_sim_warnx
#include "../../contrib/sim/conf.c"
#undef log_warnx
#undef log_warn
#include "fuzz.h"

static int		nmsgs;		/* messages of the current input */
static unsigned long	maxline;	/* lines in the current input + 1 */

FUZZ_NOCOV void
fuzz_sim_warnx(const char *fmt, ...)
{
	char		 msg[2048], *end;
	unsigned long	 line;
	size_t		 i;
	va_list		 ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	nmsgs++;
	CHECK(strncmp(msg, "fuzz:", 5) == 0);
	line = strtoul(msg + 5, &end, 10);
	CHECK(end != msg + 5 && *end == ':');
	CHECK(line >= 1 && line <= maxline);
	for (i = 0; msg[i] != '\0'; i++)
		CHECK(msg[i] >= 0x20 && msg[i] < 0x7f);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sim_conf conf;
	char *text;
	size_t i;
	int rv;

	if (size > 65536)
		return 0;
	text = malloc(size + 1);
	memcpy(text, data, size);
	text[size] = '\0';
	nmsgs = 0;
	maxline = 1;
	for (i = 0; i < size && text[i] != '\0'; i++)
		maxline += text[i] == '\n';
	memset(&conf, 0, sizeof(conf));
	rv = conf_load_string("fuzz", text, &conf);
	if (rv == 0) {
		size_t total = 0;
		char busid[USBIP_BUSID_SIZE];

		CHECK(nmsgs == 0);
		CHECK(conf.nspecs <= SIM_MAX_DEVICES);
		for (i = 0; i < conf.nspecs; i++)
			CHECK(usbip_busid_valid(conf.specs[i].busid));
		CHECK(conf.ngroups <= SIM_MAX_EXPGROUPS);
		for (i = 0; i < conf.ngroups; i++) {
			const struct sim_expgroup *g = &conf.groups[i];

			CHECK(g->count >= 1 && g->ndevs >= 1 &&
			    g->ndevs <= SIM_MAX_DEVICES);
			CHECK(g->base_port == 0 ||
			    g->base_port + g->count - 1 <= 65535);
			CHECK(g->prefix[0] != '\0' &&
			    strlen(g->prefix) <= SIM_EXP_PREFIX_MAX);
			expgroup_busid(g->ndevs - 1, busid, sizeof(busid));
			CHECK(usbip_busid_valid(busid));
			total += g->count;
		}
		CHECK(total <= SIM_MAX_EXPORTERS);
	} else {
		CHECK(rv == -1);
		CHECK(nmsgs >= 1 && nmsgs <= SIM_MAX_ERRORS);
		CHECK(conf.nspecs == 0 && conf.specs == NULL);
	}
	conf_clear(&conf);
	free(text);
	return 0;
}
