/*
 * An exporter (exporter.c): polled for its device list, owner of its
 * devices.
 */
#ifndef USBGW_EXPORTER_H
#define USBGW_EXPORTER_H

#include "device.h"
#include "loop.h"

enum exp_state {
	EXP_UNKNOWN,
	EXP_UP,
	EXP_DOWN,
};

struct exporter {
	TAILQ_ENTRY(exporter)	 entry;
	struct gw		*gw;
	int64_t			 id;
	char			 name[GW_NAME_MAX];
	char			 host[256];
	uint16_t		 port;
	enum exp_state		 state;
	bool			 dead;
	TAILQ_HEAD(, device)	 devices;
	struct event		*poll_ev;
	struct bufferevent	*poll_bev;
	unsigned		 backoff_ms;
	uint64_t		 last_ok;
	int			 fails;		/* failed polls in a row */
	int			 timeouts;	/* of them timed out */
	/* max-devices-per-exporter: new devices this minute; over it now */
	uint64_t		 new_window;
	unsigned		 new_count;
	bool			 over_limit;
	bool			 listed_once;	/* its first list: no rate */
	unsigned		 good_lists;	/* since start, up to 2 */
	unsigned		 lists_ok;	/* good lists in a row */
	unsigned		 probing;	/* claims in a probe slot (upstream.c) */
};


/* exporter.c */
struct exporter	*exporter_new(const char *name, const char *host, uint16_t port);
void		 exporter_free(struct exporter *);
struct exporter	*exporter_find(const char *name);
const char	*exp_state_name(enum exp_state);
struct device	*gw_device_find(const char *busid, int *nmatch);
bool		 gw_exporter_name_valid(const char *);
double		 gw_urb_rate(void);
void		 gw_exporter_event(struct exporter *, const char *why);
void		 gw_audit_exporter(struct exporter *, const char *action,
		    const char *detail);

#endif
