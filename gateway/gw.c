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

/* An exporter of any kind (enum exp_kind). */
struct exporter *
gw_exporter_new(const char *name, int kind, int tls, const char *host,
    uint16_t port)
{
	struct exporter *exp;

	/* the first connection is made from a timer: tls is set before */
	if (kind == EXP_KIND_AGENT || kind == EXP_KIND_DIALOUT)
		exp = exporter_new_agent(name, (enum exp_kind)kind, host, port);
	else
		exp = exporter_new(name, host, port);
	/* optional only for dial-out (exporter.h); else fail closed */
	exp->tls = tls == EXP_TLS_OPTIONAL && kind != EXP_KIND_DIALOUT ?
	    EXP_TLS_REQUIRED : (enum exp_tls)tls;
	return exp;
}

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
			    exp->port == port && (int)exp->kind == ce->kind &&
			    (int)exp->tls == ce->tls)
				continue;
			exporter_free(exp);
		}
		exp = gw_exporter_new(ce->name, ce->kind, ce->tls,
		    ce->addr.host, (uint16_t)port);
		store_exporter_save(exp, NULL);
	}
}

static int
restore_cb(void *arg, const char *name, const char *host, int port,
    int64_t id, const char *kind, const char *tls)
{
	struct exporter *exp;
	int k = exp_kind_parse(kind), t = exp_tls_parse(tls);

	if (exporter_find(name) != NULL || port < 1 || port > 65535)
		return 0;
	/* an unreadable tls setting: required (fail closed) */
	exp = gw_exporter_new(name, k < 0 ? EXP_KIND_USBIP : k,
	    t < 0 ? EXP_TLS_REQUIRED : t, host, (uint16_t)port);
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
