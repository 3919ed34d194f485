/*
 * Exporter leases (lease.c, protocol.md 4.4): which of the gateways on
 * one PostgreSQL store polls and claims an exporter's devices.
 */
#ifndef USBGW_LEASE_H
#define USBGW_LEASE_H

#include <stdbool.h>

#include "core/exporter.h"

#define LEASE_DEFAULT_MS	10000
#define LEASE_CHECK_MS		200	/* the deadline is looked at this often */

/*
 * Before any exporter is made: on PostgreSQL, open the lease connection
 * and make exporters wait for their lease; on SQLite nothing (every
 * exporter is this gateway's).  me: this gateway's name in the lease
 * rows.  0, or -1 with err.
 */
int		 lease_init(const char *database, const char *me,
		    unsigned lease_ms, char *err, size_t errlen);
/* After the exporters are made: the first round now, then every lease/3. */
void		 lease_start(void);
/* A new lease time (SIGHUP). */
void		 lease_set_time(unsigned lease_ms);
/* Take (or renew) exp's lease now.  true: held. */
bool		 lease_take(struct exporter *);
/*
 * At a clean stop, after every claim was released: the leases expire
 * now, for the other gateways to take at their next round.
 */
void		 lease_shutdown(void);
bool		 lease_active(void);	/* PostgreSQL: leases in use */
const char	*lease_me(void);

#endif
