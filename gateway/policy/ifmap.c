/*
 * The endpoint map and the per-interface check (ifmap.h).
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/desc.h"
#include "policy/ifmap.h"
#include "proto/usbip.h"

_Static_assert(IFMAP_NINTF == DESC_MAX_INTF, "one alternate setting per "
    "interface number the descriptors may use");

int
ifmap_load(struct gw_ep *in, struct gw_ep *out, const struct gw_ident *id,
    uint8_t config, const uint8_t *alts)
{
	struct desc_config c;
	const char *why;
	int i, k, j, n = 0;

	memset(in, 0, IFMAP_NEP * sizeof(*in));
	memset(out, 0, IFMAP_NEP * sizeof(*out));
	for (i = 0; i < GW_MAX_CONFIGS; i++) {
		if (id->config[i] == NULL)
			continue;
		if (desc_parse_config(id->config[i], id->config_len[i], &c,
		    &why) == -1 || c.value != config)
			continue;
		for (k = 0; k < c.nalt; k++) {
			struct desc_alt *a = &c.alt[k];
			uint8_t want = a->number < IFMAP_NINTF && alts ?
			    alts[a->number] : 0;

			if (a->alt != want)
				continue;
			for (j = 0; j < a->nep; j++) {
				struct desc_ep *e = &a->ep[j];
				struct gw_ep *g = (e->address & 0x80) ?
				    &in[e->address & 0x0f] :
				    &out[e->address & 0x0f];

				/*
				 * Two interfaces list it: Linux gives it to
				 * the first; the check asks about every
				 * owner (the probe calls it an anomaly).
				 */
				if (a->number < 32)
					g->owners |= 1u << a->number;
				else
					g->owner_hi = 1;
				if (g->present) {
					if (g->intf != a->number)
						g->shared = 1;
					continue;
				}
				g->present = 1;
				g->type = e->type;
				g->intf = a->number;
				g->maxp = e->maxp;
				n++;
			}
		}
		break;
	}
	return n;
}

const char *
ifmap_anomaly(const struct gw_ident *id, char *buf, size_t len)
{
	struct desc_config c;
	const char *why;
	int i, k, l, j, m;

	for (i = 0; i < GW_MAX_CONFIGS; i++) {
		if (id->config[i] == NULL || desc_parse_config(id->config[i],
		    id->config_len[i], &c, &why) == -1)
			continue;
		for (k = 0; k < c.nalt; k++) {
			struct desc_alt *a = &c.alt[k];

			for (l = k + 1; l < c.nalt; l++) {
				struct desc_alt *b = &c.alt[l];

				if (a->number == b->number &&
				    a->alt == b->alt) {
					snprintf(buf, len, "configuration %u "
					    "describes interface %u alternate "
					    "setting %u twice", c.value,
					    a->number, a->alt);
					return buf;
				}
				if (a->number == b->number)
					continue;
				for (j = 0; j < a->nep; j++)
					for (m = 0; m < b->nep; m++) {
						if (a->ep[j].address !=
						    b->ep[m].address)
							continue;
						snprintf(buf, len, "endpoint "
						    "0x%02x of configuration "
						    "%u is listed by interfaces "
						    "%u and %u",
						    a->ep[j].address, c.value,
						    a->number, b->number);
						return buf;
					}
			}
		}
	}
	return NULL;
}

static const char *refused_intf(const struct ifmap_view *, uint8_t,
    uint8_t, const char *, char *, size_t);

/* May the host use interface `num` at its current alternate setting? */
static const char *
intf_refuse(const struct ifmap_view *v, uint8_t num, const char *what,
    char *buf, size_t len)
{
	uint8_t alt = num < IFMAP_NINTF ? v->alts[num] : 0;

	if (decision_iface_allowed(v->dec, v->config, num, alt))
		return NULL;
	return refused_intf(v, num, alt, what, buf, len);
}

/* An endpoint listed by more than one interface: every one must pass. */
static const char *
shared_refuse(const struct ifmap_view *v, const struct gw_ep *e,
    uint8_t addr, char *buf, size_t len)
{
	uint8_t n, alt;

	if (e->owner_hi) {
		snprintf(buf, len, "endpoint 0x%02x, which interface %u shares "
		    "with an interface numbered 32 or more", addr, e->intf);
		return buf;
	}
	for (n = 0; n < 32; n++) {
		if (!(e->owners & (1u << n)))
			continue;
		alt = v->alts[n];
		if (!decision_iface_allowed(v->dec, v->config, n, alt)) {
			snprintf(buf, len, "endpoint 0x%02x, which interface "
			    "%u (configuration %u, alternate setting %u, "
			    "denied by the decision) lists too", addr, n,
			    v->config, alt);
			return buf;
		}
	}
	return NULL;
}

static const char *
refused_intf(const struct ifmap_view *v, uint8_t num, uint8_t alt,
    const char *what, char *buf, size_t len)
{
	snprintf(buf, len, "%s interface %u (configuration %u, alternate "
	    "setting %u), which the decision denies", what, num, v->config,
	    alt);
	return buf;
}

/*
 * ep0: the request's recipient (bmRequestType & 0x1f) decides.  The
 * device belongs to no interface and passes, but under an
 * interface-policy not a class request unless the device is a hub
 * (cheap firmware dispatches on bRequest alone: a Bulk-Only reset or Get
 * Max LUN sent to the device reaches the storage function).  "Other" (a
 * hub's port) passes only as the port reset the exporters intercept
 * (0x23 SET_FEATURE PORT_RESET) under an interface-policy.  An interface
 * (wIndex low byte: bInterfaceNumber, whatever the request type:
 * standard, class or vendor) or an endpoint (wIndex low byte: its
 * address; 0 is ep0, the device's; every interface that lists it) must
 * be allowed; SET_INTERFACE is judged on the setting it selects, and
 * refused for an interface number the map does not track (>= 32).
 * Reserved recipients are refused: nothing says whose they are.
 */
static const char *
ep0_refuse(const struct ifmap_view *v, const uint8_t s[8], char *buf,
    size_t len)
{
	uint8_t rcpt = s[0] & 0x1f, idx = s[4], alt = s[2];
	bool ipol = v->dec->per_iface || v->dec->niface != 0;
	const struct gw_ep *e;
	const char *why;

	if (rcpt == 2 && (idx & 0x0f) == 0)
		rcpt = 0;	/* ep0 (either direction): the device's */
	switch (rcpt) {
	case 0:		/* device */
	case 3:		/* other */
		if (v->dec->verdict != VERDICT_ALLOW) {
			snprintf(buf, len, "control request to the device, "
			    "which the decision does not allow");
			return buf;
		}
		if (!ipol)
			return NULL;
		if (rcpt == 3 && !(s[0] == 0x23 &&
		    s[1] == USB_REQ_SET_FEATURE && s[2] == 4 && s[3] == 0)) {
			snprintf(buf, len, "control request 0x%02x/0x%02x to "
			    "recipient \"other\" under an interface-policy "
			    "(only the port reset passes)", s[0], s[1]);
			return buf;
		}
		if (rcpt == 0 && (s[0] & 0x60) == 0x20 &&
		    v->dclass != 0x09) {
			snprintf(buf, len, "class request 0x%02x to the "
			    "device (not a hub) under an interface-policy",
			    s[1]);
			return buf;
		}
		return NULL;
	case 1:		/* interface */
		if (s[0] == 0x01 && s[1] == USB_REQ_SET_INTERFACE) {
			if (s[3] == 0 && idx < IFMAP_NINTF &&
			    decision_iface_allowed(v->dec, v->config, idx,
			    alt))
				return NULL;
			snprintf(buf, len, "SET_INTERFACE to alternate setting "
			    "%u of interface %u (configuration %u), which the "
			    "decision denies%s", alt, idx, v->config,
			    idx >= IFMAP_NINTF ? " (or the gateway does not "
			    "track)" : "");
			return buf;
		}
		return intf_refuse(v, idx, "control request to", buf, len);
	case 2:		/* endpoint */
		e = (idx & 0x80) ? &v->in[idx & 0x0f] : &v->out[idx & 0x0f];
		if (e->present) {
			char what[48];

			snprintf(what, sizeof(what), "control request to "
			    "endpoint 0x%02x of", idx);
			if ((why = intf_refuse(v, e->intf, what, buf,
			    len)) != NULL || !e->shared)
				return why;
			return shared_refuse(v, e, idx, buf, len);
		}
		snprintf(buf, len, "control request to endpoint 0x%02x, which "
		    "the current configuration and alternate settings do not "
		    "have", idx);
		return buf;
	default:
		snprintf(buf, len, "control request to reserved recipient %u",
		    rcpt);
		return buf;
	}
}

const char *
ifmap_refuse(const struct ifmap_view *v, uint8_t ep, uint32_t dir,
    const uint8_t setup[8], char *buf, size_t len)
{
	const struct gw_ep *e;
	uint8_t addr, alt;

	if (ep == 0)
		return ep0_refuse(v, setup, buf, len);
	ep &= 0x0f;
	addr = dir == USBIP_DIR_IN ? 0x80 | ep : ep;
	e = dir == USBIP_DIR_IN ? &v->in[ep] : &v->out[ep];
	if (!e->present) {
		/* (the relay refuses these as malformed before asking) */
		snprintf(buf, len, "URB to endpoint 0x%02x, which the current "
		    "configuration and alternate settings do not have", addr);
		return buf;
	}
	/* the hot path: nothing formatted unless refused */
	alt = e->intf < IFMAP_NINTF ? v->alts[e->intf] : 0;
	if (decision_iface_allowed(v->dec, v->config, e->intf, alt))
		return __builtin_expect(e->shared, 0) ?
		    shared_refuse(v, e, addr, buf, len) : NULL;
	snprintf(buf, len, "URB to endpoint 0x%02x of interface %u "
	    "(configuration %u, alternate setting %u), which the decision "
	    "denies", addr, e->intf, v->config, alt);
	return buf;
}
