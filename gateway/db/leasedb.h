/*
 * Exporter leases in the shared store (leasedb.c, protocol.md 4.4): the
 * statements, on a connection of their own so that a lease is taken,
 * renewed and released at once, never inside the daemon's write batch.
 * Times are the database server's clock.  PostgreSQL only: on SQLite
 * the one gateway holds every exporter without a row.
 */
#ifndef USBGW_LEASEDB_H
#define USBGW_LEASEDB_H

#include <stddef.h>
#include <stdint.h>

#define LEASEDB_HOLDER_MAX	96	/* gateway-name/pid in a lease row */

struct leasedb;

struct leasedb	*leasedb_open(const char *target, char *err, size_t errlen);
void		 leasedb_close(struct leasedb *);
const char	*leasedb_errmsg(const struct leasedb *);
/*
 * Take or renew exporter_id's lease for me, lease_ms from the server's
 * now: only when the lease is free, expired or already mine.  1 held
 * (*epoch: the lease's, grown when it changed hands), 0 held by another
 * (holder, *epoch and *left_ms, what remains of it, filled in), -1 an
 * error (leasedb_errmsg).
 */
int		 leasedb_acquire(struct leasedb *, int64_t exporter_id,
		    const char *me, unsigned lease_ms, int64_t *epoch,
		    char *holder, size_t holderlen, int64_t *left_ms);
/* My lease of exporter_id (0: all mine) expires now.  0 or -1. */
int		 leasedb_release(struct leasedb *, const char *me,
		    int64_t exporter_id);

#endif
