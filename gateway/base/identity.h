/*
 * What the gateway itself read from a device (its identity), and the
 * network context of a policy decision.  This is the input of the rule
 * language (rule.h) and of the policy (policy.h); the daemon fills it
 * from its probe.  Plain data: no pointers, copyable with '='.
 */
#ifndef USBGW_IDENTITY_H
#define USBGW_IDENTITY_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#define USBGW_EXPORTER_MAX	32	/* exporter name, incl. NUL */
#define USBGW_BUSID_MAX		32	/* busid, incl. NUL (USB/IP's 32) */
#define USBGW_STR_MAX		128	/* descriptor strings: 127 bytes + NUL */
#define USBGW_IFACE_MAX		32	/* USB 2.0 9.6.3 */
#define USBGW_HASH_HEX		64	/* SHA-256 as lowercase hex */
#define USBGW_HOST_MAX		256	/* vhci host name, incl. NUL */

struct usbgw_iface {
	uint8_t		cls;
	uint8_t		subcls;
	uint8_t		proto;
};

/*
 * Strings (exporter, busids, manufacturer, product, serial) are always
 * NUL-terminated, and the daemon has already made them safe: printable
 * UTF-8, anything else escaped.  Rules compare them byte for byte.  An
 * absent string descriptor is the empty string.
 */
struct usbgw_identity {
	char			exporter[USBGW_EXPORTER_MAX];
	char			exporter_busid[USBGW_BUSID_MAX]; /* upstream */
	char			busid[USBGW_BUSID_MAX];	/* the gateway's */
	uint16_t		vid;
	uint16_t		pid;
	uint16_t		bcd_device;
	uint8_t			dev_class;
	uint8_t			dev_subclass;
	uint8_t			dev_protocol;
	uint32_t		speed;		/* USB/IP speed code */
	uint8_t			n_ifaces;	/* <= USBGW_IFACE_MAX */
	struct usbgw_iface	ifaces[USBGW_IFACE_MAX];
	char			manufacturer[USBGW_STR_MAX];
	char			product[USBGW_STR_MAX];
	char			serial[USBGW_STR_MAX];
	char			hash[USBGW_HASH_HEX + 1];	/* lowercase hex */
};

/* An IPv4 or IPv6 address (IPv4 in addr[0..3]). */
struct usbgw_addr {
	int		family;		/* AF_INET, AF_INET6, or 0: none */
	uint8_t		addr[16];
};

struct rule;

/*
 * The network context of a decision: the vhci host asking, if any.  At
 * device arrival there is no host (host_name NULL, host_addr.family 0);
 * when a host lists or imports a device, the daemon evaluates again with
 * the host filled in, so rules with to-host apply per host.
 *
 * allowed_matches, if not NULL, answers the allowed-matches(QUERY)
 * condition: return 1 if some currently allowed (authorized or attached)
 * device other than the one being decided matches query's attributes
 * (rule_match_attrs()), else 0.  NULL makes the condition false.
 */
struct usbgw_context {
	const char		*host_name;
	struct usbgw_addr	 host_addr;
	int			(*allowed_matches)(void *arg,
				    const struct rule *query);
	void			*arg;
};

/*
 * SHA-256 over the concatenation of n buffers (the device descriptor,
 * then every configuration descriptor in full, in index order), as
 * lowercase hex into out.  Returns 0, or -1 if libcrypto fails.
 */
int	identity_hash(const struct iovec *parts, size_t n,
	    char out[USBGW_HASH_HEX + 1]);

/* Parse "a.b.c.d" or an IPv6 address (no prefix).  Returns 0 or -1. */
int	usbgw_addr_parse(const char *s, struct usbgw_addr *out);

/* Is host inside net/prefix (an IPv4 net takes IPv4-mapped IPv6 hosts)? */
bool	usbgw_addr_in(const struct usbgw_addr *net, unsigned prefix,
	    const struct usbgw_addr *host);

/* Format an address into buf (INET6_ADDRSTRLEN is enough).  Returns buf. */
char	*usbgw_addr_format(const struct usbgw_addr *a, char *buf, size_t len);

/* "08:06:50 03:01:01 ..." into buf (3 * 9 bytes per interface). */
char	*identity_ifaces_format(const struct usbgw_identity *, char *buf,
	    size_t len);

#endif
