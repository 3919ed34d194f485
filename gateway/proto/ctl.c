/* Names of the operator-facing enums in ctl.h. */
#include <string.h>

#include "proto/ctl.h"

static const char *const state_names[DEV_NSTATES] = {
	"probing", "pending", "authorized", "attached", "blocked", "gone"
};

const char *
dev_state_name(enum dev_state s)
{
	return (unsigned)s < DEV_NSTATES ? state_names[s] : "invalid";
}

int
dev_state_parse(const char *s)
{
	int i;

	for (i = 0; i < DEV_NSTATES; i++)
		if (strcmp(s, state_names[i]) == 0)
			return i;
	return -1;
}

const char *
ctl_priv_name(enum ctl_priv p)
{
	switch (p) {
	case PRIV_NONE:		return "none";
	case PRIV_READ:		return "read";
	case PRIV_APPROVE:	return "approve";
	case PRIV_ADMIN:	return "admin";
	}
	return "invalid";
}

const char *
ctl_err_name(enum ctl_err e)
{
	switch (e) {
	case CTL_OK:		return "ok";
	case CTL_E_REFUSED:	return "refused";
	case CTL_E_USAGE:	return "usage";
	case CTL_E_NOTFOUND:	return "not_found";
	case CTL_E_AMBIGUOUS:	return "ambiguous";
	case CTL_E_INTERNAL:	return "internal";
	case CTL_E_VERSION:	return "version";
	case CTL_E_PROTOCOL:	return "protocol";
	case CTL_E_LIMIT:	return "limit";
	case CTL_E_AGAIN:	return "again";
	case CTL_E_NERR:	break;
	}
	return "invalid";
}
