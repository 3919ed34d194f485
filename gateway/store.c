/*
 * Persistence and audit for the daemon core.  (Interim: in memory only,
 * until the SQLite layer is wired in.)
 */
#include <string.h>

#include "gw.h"
#include "log.h"
#include "util.h"

static int64_t next_id = 1;

int
store_open(const char *path)
{
	return 0;
}

void
store_close(void)
{
}

void
store_device_load(struct device *dev)
{
	dev->id = next_id++;
}

void
store_device_state(struct device *dev, enum dev_state old,
    const struct actor *who, const char *reason)
{
}

void
store_device_identity(struct device *dev)
{
}

void
store_attachment_begin(struct device *dev, struct dsession *ds)
{
}

void
store_attachment_end(struct device *dev, const char *why)
{
}

void
store_approval_begin(struct device *dev)
{
}

void
store_approval_end(struct device *dev, const char *why)
{
}

void
store_audit_device(struct device *dev, const char *action,
    const struct actor *who, const char *detail)
{
	log_info("audit: %s %s: %s", dev->busid, action, detail ? detail : "");
}

void
store_audit(const char *action, const struct actor *who, const char *object,
    const char *detail)
{
	log_info("audit: %s %s: %s", object ? object : "", action,
	    detail ? detail : "");
}

int64_t
store_access_request(struct device *dev, struct dsession *ds)
{
	return next_id++;
}

void
store_access_outcome(int64_t request_id, const char *outcome)
{
}

json_t *
store_device_history(struct device *dev, int limit)
{
	return json_array();
}

void
store_exporter_save(struct exporter *exp, const struct actor *who)
{
	if (exp->id == 0)
		exp->id = next_id++;
}

void
store_exporter_delete(struct exporter *exp, const struct actor *who)
{
}

void
store_restore_exporters(void)
{
}
