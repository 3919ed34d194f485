/*
 * The control commands the daemon offers (handlers.c, gwpolicy.c).
 */
#ifndef USBGW_COMMANDS_H
#define USBGW_COMMANDS_H

#include <stddef.h>

#include "proto/ctl.h"

/* handlers.c */
const struct ctl_cmd *gw_ctl_table(size_t *n);
const struct ctl_text_cmd *gw_ctl_text_table(size_t *n);
extern const struct ctl_cmd gwpolicy_cmds[];
extern const size_t gwpolicy_ncmds;
void		 gw_audit_refusal(const struct actor *, const char *cmd,
		    const char *why);

#endif
