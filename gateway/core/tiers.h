/*
 * The rules as the daemon holds them (tiers.c), in two tiers.
 */
#ifndef USBGW_TIERS_H
#define USBGW_TIERS_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "proto/ctl.h"
#include "base/identity.h"

struct policy;

/* tiers.c: the rules as the daemon holds them, in two tiers */
int		 tiers_load(void);
void		 tiers_get(struct policy **admin, struct policy **op);
int64_t		 tiers_device_rule_admin(int64_t device_id);
int64_t		 tiers_device_rule(const struct usbgw_identity *,
		    int64_t device_id, bool deny, bool admin, const char *to_host,
		    const char *ipol, const struct actor *, const char *comment,
		    char *err, size_t errlen);

#endif
