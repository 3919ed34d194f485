/*
 * The endpoint map of a device's current configuration and alternate
 * settings, and the per-interface check of the relay (issue 17;
 * protocol.md 1.6, "Per-interface enforcement").  Pure functions of
 * their arguments: the device (device.c) owns the tables and keeps them
 * right across SET_CONFIGURATION and SET_INTERFACE; the relay asks
 * ifmap_refuse() about each URB when the decision lists interfaces.
 */
#ifndef USBGW_IFMAP_H
#define USBGW_IFMAP_H

#include <stddef.h>
#include <stdint.h>

#include "policy/decision.h"
#include "policy/ident.h"

#define IFMAP_NEP	16	/* endpoint numbers 0..15, per direction */
#define IFMAP_NINTF	32	/* interface numbers with an alternate setting */

/* One endpoint of the device's active configuration. */
struct gw_ep {
	uint8_t		present;
	uint8_t		type;		/* USB_ENDPOINT_XFER_* (0..3) */
	uint8_t		intf;		/* the bInterfaceNumber it belongs to
					   (the first that lists it, as Linux) */
	uint8_t		shared;		/* another interface lists it too */
	uint16_t	maxp;
	uint32_t	owners;		/* bit n: interface n lists it (n < 32) */
	uint8_t		owner_hi;	/* an interface >= 32 lists it */
};

/*
 * Fill in[] and out[] (IFMAP_NEP each) with the endpoints of
 * configuration `config` as the probe read it, interface i at alternate
 * setting alts[i] (alts NULL: all 0).  A configuration the probe did not
 * read: no endpoint but ep0.  Returns the number of endpoints loaded.
 */
int	ifmap_load(struct gw_ep *in, struct gw_ep *out,
	    const struct gw_ident *, uint8_t config, const uint8_t *alts);

/*
 * A descriptor set the endpoint map cannot describe faithfully: an
 * endpoint address listed by two interface numbers of one configuration
 * (in any alternate settings), or two interface descriptors with the
 * same (configuration, number, alternate setting).  NULL: none; else
 * what (written to buf).  The probe makes it an identity anomaly.
 */
const char *ifmap_anomaly(const struct gw_ident *, char *buf, size_t len);

/*
 * What the relay sees of the device when it checks one URB.
 */
struct ifmap_view {
	const struct decision	*dec;
	const struct gw_ep	*in, *out;	/* IFMAP_NEP each */
	uint8_t			 config;	/* bConfigurationValue now */
	const uint8_t		*alts;		/* IFMAP_NINTF */
	uint8_t			 dclass;	/* bDeviceClass (0x09: a hub) */
};

/*
 * Must this CMD_SUBMIT be refused because it belongs to an interface the
 * decision denies?  ep and dir (USBIP_DIR_*) as in the header; setup the
 * 8 setup bytes (used for ep 0).  NULL: it may pass; else why not
 * (also written to buf, which names the interface).
 */
const char *ifmap_refuse(const struct ifmap_view *, uint8_t ep, uint32_t dir,
	    const uint8_t setup[8], char *buf, size_t len);

#endif
