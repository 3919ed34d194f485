/*
 * What the gateway's probe (upstream.c) read from a device: its
 * identity, as bytes.  The device (device.c) owns it; the relay holds
 * what a vhci host reads to it.
 */
#ifndef USBGW_IDENT_H
#define USBGW_IDENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>


#define GW_MAX_CONFIGS		8	/* configurations read per device */
#define GW_STR_MAX		128	/* descriptor strings, sanitized */

/* What the probe read from the device. */
struct gw_ident {
	uint16_t	vid, pid, bcd;
	uint8_t		dclass, dsubclass, dprotocol;
	uint8_t		nconfigs;	/* read: at most GW_MAX_CONFIGS */
	uint8_t		nconfigs_dev;	/* bNumConfigurations */
	uint32_t	speed;
	uint8_t		dev_desc[18];
	uint8_t		*config[GW_MAX_CONFIGS];	/* full descriptors */
	uint16_t	config_len[GW_MAX_CONFIGS];
	/*
	 * What else the probe read, as read (NULL/0: the device stalled
	 * or has none): the relay holds every later read of these to it.
	 */
	uint8_t		*bos;
	uint16_t	 bos_len;
	uint8_t		 qualifier[10];
	uint8_t		 qualifier_len;
	uint8_t		*other[GW_MAX_CONFIGS];	/* other-speed configurations */
	uint16_t	 other_len[GW_MAX_CONFIGS];
	uint8_t		*str_raw[4];	/* language table, manufacturer, product, serial */
	uint8_t		 str_len[4];
	uint16_t	 langid;
	char		manufacturer[GW_STR_MAX];
	char		product[GW_STR_MAX];
	char		serial[GW_STR_MAX];
	char		hash[65];	/* hex SHA-256 over dev_desc + configs */
	char		identity[65];	/* the whole identity's digest (below) */
};

/* Free what a probe read and zero it (the speed too). */
void	gw_ident_clear(struct gw_ident *);

/*
 * A vhci host's standard GET_DESCRIPTOR (setup) got n bytes of data:
 * NULL if they are the probe's (or not part of the identity), else what
 * differs, written to buf.
 */
const char *gw_ident_check_read(const struct gw_ident *, const uint8_t setup[8],
	    const uint8_t *data, size_t n, char *buf, size_t bufsz);
/* Does the device have configuration value (0: unconfigured, always)? */
bool	gw_ident_has_config(const struct gw_ident *, uint8_t value);
/* ... and alternate setting alt of interface intf in configuration config? */
bool	gw_ident_has_alt(const struct gw_ident *, uint8_t config, uint8_t intf,
	    uint8_t alt);

/*
 * Every interface descriptor of every configuration the probe read
 * (configuration value, number, alternate setting, class triple), in
 * descriptor order, at most max: what decide() gives verdicts for.  A
 * configuration that does not parse lists nothing (its interfaces stay
 * denied under an interface-policy).  Returns the count.
 */
struct iface_verdict;
size_t	gw_ident_ifaces(const struct gw_ident *, struct iface_verdict *out,
	    size_t max);

#endif
