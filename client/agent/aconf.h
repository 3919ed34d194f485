/*
 * usbgw-agent's configuration: defaults, the config file
 * (usbgw-agent(8), contrib/usbgw-agent.conf) and the command line's
 * -l and -a.  One "KEY VALUE" per line:
 *
 *	name NAME			listen ADDRESS:PORT | none
 *	allow-from ADDRESS_OR_CIDR...	keep-local RULE
 *	export RULE			no-reset RULE
 *	audit-log FILE			state-file FILE | none
 *	gateway HOST[:PORT] [tls]	max-connections N
 *	tls required | off		tls-dir DIR
 *
 * Every error is "FILE:LINE:COLUMN: message" (COLUMN counts characters,
 * 1-based) and every error of a file is reported at once, at most
 * ACONF_MAX_ERRORS.  A file with any error changes nothing the agent
 * runs with: the caller loads into a fresh struct aconf and swaps.
 */
#ifndef USBGW_AGENT_ACONF_H
#define USBGW_AGENT_ACONF_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "base/parse.h"		/* struct net_addr, its parsers */
#include "policy/decision.h"		/* struct host_match: 3.6's networks */
#include "keep.h"

#define ACONF_DEFAULT_PATH	"/etc/usbgw/usbgw-agent.conf"
#define ACONF_DEFAULT_STATE	"/run/usbgw-agent/held"
#define ACONF_DEFAULT_TLS_DIR	"/var/lib/usbgw-agent/tls"
#define ACONF_DEFAULT_PORT	"3240"
#define ACONF_MAX_FILE		(256 * 1024)	/* bytes in a config file */
#define ACONF_MAX_LINE		4096
#define ACONF_MAX_ERRORS	50
#define ACONF_MAX_LISTEN	16
#define ACONF_MAX_ALLOW		256
#define ACONF_MAX_GATEWAYS	8
#define ACONF_NAME_MAX		32	/* [A-Za-z0-9._-]{1,31} + NUL */
#define ACONF_PATH_MAX		1024
#define ACONF_MAX_CONNS		1024

struct aconf {
	char		 path[ACONF_PATH_MAX];		/* file read, "" if none */
	char		 name[ACONF_NAME_MAX];		/* "": the host name */

	/* Listeners: none given means *:3240; listen_none means none. */
	struct net_addr listen[ACONF_MAX_LISTEN];
	size_t		 nlisten;
	bool		 listen_none;

	/* Who may list and import: nobody when empty. */
	struct host_match allow[ACONF_MAX_ALLOW];
	size_t		 nallow;

	struct keep_list *keep;		/* keep-local / export, file order */
	struct keep_list *noreset;	/* no-reset */

	char		 audit_log[ACONF_PATH_MAX];	/* "": log only */
	char		 state_file[ACONF_PATH_MAX];	/* "": none */
	struct net_addr gateways[ACONF_MAX_GATEWAYS];  /* dial-out */
	bool		 gateways_tls[ACONF_MAX_GATEWAYS];	/* "tls" */
	size_t		 ngateways;
	/*
	 * TLS (protocol.md 1.10.8): tls_required makes every connection
	 * TLS (the agent always TLS's client, even on connections the
	 * gateway opened), plaintext refused; a "gateway ... tls" line
	 * dials that gateway over TLS whatever tls says.  tls_dir holds
	 * agent.key (0600), agent.pem and gateway-ca.pem.
	 */
	bool		 tls_required;
	char		 tls_dir[ACONF_PATH_MAX];
	/* Renewal on a timer (protocol.md 1.10.10): every renew_check_ms,
	 * a certificate ending within renew_days is renewed through the
	 * first gateway line dialled over TLS. */
	unsigned	 renew_days;
	uint64_t	 renew_check_ms;
	unsigned	 max_connections;
	/* usbfs zero-copy buffers (protocol.md 1.9.3): on unless "zero-copy
	 * off" (and only on a kernel that maps them right, >= 5.7). */
	bool		 zero_copy;

	/* Internal: the first -l replaces the file's listen lines. */
	bool		 listen_flagged;
};

struct aconf	*aconf_new(void);		/* defaults, empty lists */
void		 aconf_free(struct aconf *);	/* NULL is fine */

/*
 * Read a file into c.  A missing file is an error only when must_exist.
 * Returns 0, or -1 with *errs a malloc'd text of "FILE:LINE:COL: ..."
 * lines (the caller frees it).  Pure over a buffer: aconf_parse_buf().
 */
int		 aconf_load(struct aconf *, const char *path, bool must_exist,
		    char **errs);
int		 aconf_parse_buf(struct aconf *, const char *name,
		    const char *buf, size_t len, char **errs);

/* -l ADDRESS:PORT (the first replaces the file's listen lines) and
 * -a ADDRESS_OR_CIDR.  Returns 0, or -1 with a message in err. */
int		 aconf_flag_listen(struct aconf *, const char *, char *err,
		    size_t errlen);
int		 aconf_flag_allow(struct aconf *, const char *, char *err,
		    size_t errlen);

/*
 * After the file and the flags: append the built-in keep-list and
 * no-reset rules after the file's (protocol.md 1.9.2), so that a file
 * rule can override them.
 */
void		 aconf_finish(struct aconf *);

/* Where to listen (nlisten 0 and not none: *:3240); the count. */
size_t		 aconf_listen_addrs(const struct aconf *,
		    const struct net_addr **);

/* Is this peer in allow-from?  (An IPv4 network takes mapped IPv6.) */
bool		 aconf_allowed(const struct aconf *, const struct sockaddr *);

#endif
