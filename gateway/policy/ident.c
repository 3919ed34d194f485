/* What the probe read from a device (ident.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/decision.h"
#include "base/desc.h"
#include "policy/ident.h"

void
gw_ident_clear(struct gw_ident *id)
{
	int i;

	for (i = 0; i < GW_MAX_CONFIGS; i++) {
		free(id->config[i]);
		free(id->other[i]);
	}
	for (i = 0; i < 4; i++)
		free(id->str_raw[i]);
	free(id->bos);
	memset(id, 0, sizeof(*id));
}

/* The probe's bytes of the descriptor a GET_DESCRIPTOR setup names. */
static int
ident_expected(const struct gw_ident *id, uint8_t type, uint8_t idx,
    uint16_t windex, const uint8_t **want, size_t *wlen, const char **name)
{
	int k;

	*want = NULL;
	*wlen = 0;
	switch (type) {
	case USB_DT_DEVICE:
		*name = "device";
		*want = id->dev_desc;
		*wlen = sizeof(id->dev_desc);
		return 1;
	case USB_DT_CONFIG:
		*name = "configuration";
		if (idx < id->nconfigs && idx < GW_MAX_CONFIGS) {
			*want = id->config[idx];
			*wlen = id->config_len[idx];
		}
		return 1;
	case USB_DT_OTHER_SPEED_CONFIG:
		*name = "other-speed configuration";
		if (idx < id->nconfigs && idx < GW_MAX_CONFIGS) {
			*want = id->other[idx];
			*wlen = id->other_len[idx];
		}
		return 1;
	case USB_DT_BOS:
		*name = "BOS";
		*want = id->bos;
		*wlen = id->bos_len;
		return 1;
	case USB_DT_DEVICE_QUALIFIER:
		*name = "device qualifier";
		if (id->qualifier_len > 0) {
			*want = id->qualifier;
			*wlen = id->qualifier_len;
		}
		return 1;
	case USB_DT_STRING:
		if (idx == 0) {
			*name = "language table";
			*want = id->str_raw[0];
			*wlen = id->str_len[0];
			return 1;
		}
		/*
		 * The identity's strings, in the language the probe (and
		 * the kernel: usb_string()) reads: the table's first.
		 */
		for (k = 1; k <= 3; k++) {
			if (id->dev_desc[13 + k] != idx || windex != id->langid ||
			    id->langid == 0)
				continue;
			*name = k == 1 ? "manufacturer string" : k == 2 ?
			    "product string" : "serial number string";
			*want = id->str_raw[k];
			*wlen = id->str_len[k];
			return 1;
		}
		return 0;	/* not part of the identity */
	default:
		return 0;
	}
}

/*
 * A vhci host read a descriptor: setup is its GET_DESCRIPTOR request,
 * data the n bytes the device returned.  The bytes must be what the
 * probe read (a prefix of it: the host may ask for fewer), and a
 * descriptor the device did not have for the probe it may not have now.
 * Returns NULL, or what differs (in buf).  Other requests, and
 * descriptors that are not part of the identity (class descriptors,
 * other strings), pass.
 */
const char *
gw_ident_check_read(const struct gw_ident *id, const uint8_t setup[8],
    const uint8_t *data, size_t n, char *buf, size_t bufsz)
{
	uint8_t type = setup[3], idx = setup[2];
	uint16_t windex = (uint16_t)(setup[4] | setup[5] << 8);
	const uint8_t *want;
	const char *name;
	size_t wlen, i;

	if ((setup[0] & 0xe0) != 0x80 || setup[1] != USB_REQ_GET_DESCRIPTOR ||
	    n == 0)
		return NULL;
	if (ident_expected(id, type, idx, windex, &want, &wlen, &name) == 0)
		return NULL;
	if (want == NULL) {
		snprintf(buf, bufsz, "the device shows the vhci host a %s "
		    "descriptor (index %u) it did not show the probe", name,
		    idx);
		return buf;
	}
	for (i = 0; i < n && i < wlen; i++)
		if (data[i] != want[i])
			break;
	if (i < n) {
		snprintf(buf, bufsz, "the %s descriptor (index %u) the device "
		    "shows the vhci host differs from the probe's at byte %zu",
		    name, idx, i);
		return buf;
	}
	return NULL;
}

/* The configuration with bConfigurationValue value, parsed; -1 if none. */
static int
ident_config(const struct gw_ident *id, uint8_t value, struct desc_config *c)
{
	const char *why;
	int i;

	for (i = 0; i < id->nconfigs && i < GW_MAX_CONFIGS; i++) {
		if (id->config[i] == NULL || desc_parse_config(id->config[i],
		    id->config_len[i], c, &why) == -1)
			continue;
		if (c->value == value)
			return 0;
	}
	return -1;
}

bool
gw_ident_has_config(const struct gw_ident *id, uint8_t value)
{
	struct desc_config c;

	return value == 0 || ident_config(id, value, &c) == 0;
}

bool
gw_ident_has_alt(const struct gw_ident *id, uint8_t config, uint8_t intf,
    uint8_t alt)
{
	struct desc_config c;
	int i;

	if (config == 0 || ident_config(id, config, &c) == -1)
		return false;
	for (i = 0; i < c.nalt; i++)
		if (c.alt[i].number == intf && c.alt[i].alt == alt)
			return true;
	return false;
}

size_t
gw_ident_ifaces(const struct gw_ident *id, struct iface_verdict *out,
    size_t max)
{
	struct desc_config c;
	const char *why;
	size_t n = 0;
	int i, j;

	for (i = 0; i < id->nconfigs && i < GW_MAX_CONFIGS; i++) {
		if (id->config[i] == NULL || desc_parse_config(id->config[i],
		    id->config_len[i], &c, &why) == -1)
			continue;
		for (j = 0; j < c.nalt && n < max; j++, n++) {
			memset(&out[n], 0, sizeof(out[n]));
			out[n].config = c.value;
			out[n].number = c.alt[j].number;
			out[n].alt = c.alt[j].alt;
			out[n].cls = c.alt[j].cls;
			out[n].subcls = c.alt[j].subcls;
			out[n].proto = c.alt[j].proto;
		}
	}
	return n;
}
