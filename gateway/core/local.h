/*
 * Local mode (local.c): the gateway attaches devices to this host's
 * vhci_hcd itself.
 */
#ifndef USBGW_LOCAL_H
#define USBGW_LOCAL_H

#include <jansson.h>

#include "proto/ctl.h"

/* local.c: local mode (vhci on this host) */
void		 local_start(void);
void		 local_shutdown(void);
enum ctl_err	 local_ctl_attach(json_t *, const struct actor *, json_t **,
		    char *, size_t);
enum ctl_err	 local_ctl_detach(json_t *, const struct actor *, json_t **,
		    char *, size_t);

#endif
