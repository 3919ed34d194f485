/*
 * The gateway assembled: exporters from the configuration and the
 * database, shutdown, and figures over every device.  The top layer
 * (gateway/LAYERS), with usbgwd.c.
 */
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "gw.h"
#include "log.h"
#include "util.h"

/* Bring the exporter list in line with the config file's. */
void
gw_sync_exporters(const struct config *cfg)
{
	struct exporter *exp;
	size_t i;
	long long port;
	const char *es;

	for (i = 0; i < cfg->nexporters; i++) {
		const struct config_exporter *ce = &cfg->exporters[i];

		if (parse_num(ce->addr.port, 1, 65535, &port, &es) == -1)
			continue;
		exp = exporter_find(ce->name);
		if (exp != NULL) {
			if (strcmp(exp->host, ce->addr.host) == 0 &&
			    exp->port == port)
				continue;
			exporter_free(exp);
		}
		exp = exporter_new(ce->name, ce->addr.host, (uint16_t)port);
		store_exporter_save(exp, NULL);
	}
}

static int
restore_cb(void *arg, const char *name, const char *host, int port,
    int64_t id)
{
	struct exporter *exp;

	if (exporter_find(name) != NULL || port < 1 || port > 65535)
		return 0;
	exp = exporter_new(name, host, (uint16_t)port);
	exp->id = id;
	return 0;
}

/* Exporters known to the database. */
void
gw_restore(void)
{
	store_exporters_foreach(restore_cb, NULL);
}

/*
 * Release every claim (the exporters reset their devices), without
 * marking anything gone: the devices are still plugged in, and their
 * presences and once-approvals continue when the gateway comes back.
 */
void
gw_shutdown(void)
{
	struct exporter *exp;

	gw->shutting_down = true;
	while ((exp = TAILQ_FIRST(&gw->exporters)) != NULL)
		exporter_free(exp);
}
