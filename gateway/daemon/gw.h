/*
 * The gateway assembled (gw.c): exporters from the configuration and the
 * store, shutdown, the store's loss.  Not an umbrella: each module
 * includes the core headers it uses (gateway/README.md has the map).
 * One libevent loop, one thread.
 *
 * Ownership: the gateway owns exporters; an exporter owns its devices; a
 * device owns at most one upstream session (its claim at the exporter)
 * and is bound to at most one downstream session (the vhci host that
 * imported it).
 *
 * Teardown, the same for every object: x_close(x, why) or x_free(x)
 * accepts NULL and a half-built object, marks it dead, unhooks it from
 * its owner, its peers and the loop, and frees it from the loop
 * (gw_defer) when a callback may still hold it; a dead object's
 * callbacks return at once.
 */
#ifndef USBGW_GW_H
#define USBGW_GW_H

#include <stdint.h>

#include <jansson.h>

struct exporter;

struct config;

/* gw.c: the gateway assembled */
void		 gw_restore(void);
void		 gw_exporters_from_store(void);
struct exporter	*gw_exporter_new(const char *name, int kind, int tls,
		    const char *host, uint16_t port);
int		 gw_check_exporters(const struct config *, char **errs);
void		 gw_sync_exporters(const struct config *);
void		 gw_shutdown(void);
/*
 * Losing the store (protocol.md 4.6): the control gate, hello's and
 * status's "store" field, store-loss/store-grace, the reconcile on
 * return.  Once, before the control socket.
 */
void		 gw_store_loss_start(void);
/* handlers.c: the store's state into hello's and status's reply. */
void		 gw_store_status(json_t *);

#endif
