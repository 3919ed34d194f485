/*
 * libFuzzer harness for usbgw-sim's configuration parser
 * (contrib/sim/conf.c, compiled in here: the simulator is not part of
 * libusbgw).  Input: a configuration text.  Checks: no crash or
 * sanitizer report; an accepted configuration has at most
 * SIM_MAX_DEVICES devices, each with a valid busid, and `exporters`
 * groups within their bounds (names and busids they make valid); a
 * refused one has an error message naming the line ("fuzz:LINE: ...").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../contrib/sim/conf.c"
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sim_conf conf;
	char *text;

	if (size > 65536)
		return 0;
	text = malloc(size + 1);
	memcpy(text, data, size);
	text[size] = '\0';
	memset(&conf, 0, sizeof(conf));
	if (conf_load_string("fuzz", text, &conf) == 0)
		{
		size_t i;

		size_t total = 0;
		char busid[USBIP_BUSID_SIZE];

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
	}
	conf_clear(&conf);
	free(text);
	return 0;
}
