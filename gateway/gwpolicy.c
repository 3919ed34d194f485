/*
 * The daemon's rule set.  (Interim: no rules until the policy database
 * is wired in.)
 */
#include "gw.h"

int
policy_decide_device(struct device *dev, const struct dsession *ds,
    struct decision *d)
{
	return -1;
}

int
gwpolicy_load(void)
{
	return 0;
}

int
gwpolicy_add_device_rule(struct device *dev, bool deny, const char *to_host,
    const struct actor *who, const char *comment, char *err, size_t errlen)
{
	return 0;
}
