/*
 * libFuzzer harness for usbgw-sim's configuration parser
 * (contrib/sim/conf.c, compiled in here: the simulator is not part of
 * libusbgw).  Input: a configuration text.  Checks: no crash or
 * sanitizer report; an accepted configuration has at most
 * SIM_MAX_DEVICES devices, each with a valid busid; a refused one has an
 * error message naming the line ("fuzz:LINE: ...").
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

		CHECK(conf.nspecs <= SIM_MAX_DEVICES);
		for (i = 0; i < conf.nspecs; i++)
			CHECK(usbip_busid_valid(conf.specs[i].busid));
	}
	conf_clear(&conf);
	free(text);
	return 0;
}
