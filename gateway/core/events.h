/*
 * The event bus (events.c): to watchers and hooks.
 */
#ifndef USBGW_EVENTS_H
#define USBGW_EVENTS_H

#include <jansson.h>

#include "proto/ctl.h"

/* events.c */
void		 gw_emit(const char *type, json_t *data);
void		 gw_policy_event(const struct actor *, const char *change);

#endif
