#include <string.h>

#include "base/desc.h"

#define FAIL(msg) do { if (why != NULL) *why = (msg); return -1; } while (0)

static uint16_t
le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

int
desc_parse_device(const uint8_t *p, size_t len, struct desc_device *d,
    const char **why)
{
	if (len < USB_DT_DEVICE_SIZE)
		FAIL("device descriptor too short");
	if (p[0] < USB_DT_DEVICE_SIZE || p[1] != USB_DT_DEVICE)
		FAIL("not a device descriptor");
	d->bcdUSB = le16(p + 2);
	d->bDeviceClass = p[4];
	d->bDeviceSubClass = p[5];
	d->bDeviceProtocol = p[6];
	d->bMaxPacketSize0 = p[7];
	d->idVendor = le16(p + 8);
	d->idProduct = le16(p + 10);
	d->bcdDevice = le16(p + 12);
	d->iManufacturer = p[14];
	d->iProduct = p[15];
	d->iSerialNumber = p[16];
	d->bNumConfigurations = p[17];
	return 0;
}

int
desc_parse_config(const uint8_t *p, size_t len, struct desc_config *c,
    const char **why)
{
	struct desc_alt *cur = NULL;
	size_t off;

	memset(c, 0, sizeof(*c));
	if (len < USB_DT_CONFIG_SIZE)
		FAIL("configuration descriptor too short");
	if (p[0] < USB_DT_CONFIG_SIZE || p[1] != USB_DT_CONFIG)
		FAIL("not a configuration descriptor");
	c->total_len = le16(p + 2);
	c->nintf = p[4];
	c->value = p[5];
	if (c->total_len < USB_DT_CONFIG_SIZE)
		FAIL("wTotalLength shorter than the descriptor");
	if (len > c->total_len)
		len = c->total_len;
	for (off = p[0]; off < len; off += p[off]) {
		const uint8_t *d = p + off;

		if (len - off < 2 || d[0] < 2)
			FAIL("descriptor with bLength < 2");
		if (d[0] > len - off)
			FAIL("descriptor runs past wTotalLength");
		switch (d[1]) {
		case USB_DT_INTERFACE:
			if (d[0] < 9)
				FAIL("interface descriptor too short");
			if (c->nalt >= DESC_MAX_INTF * 2)
				FAIL("too many interface descriptors");
			cur = &c->alt[c->nalt++];
			cur->number = d[2];
			cur->alt = d[3];
			cur->cls = d[5];
			cur->subcls = d[6];
			cur->proto = d[7];
			break;
		case USB_DT_ENDPOINT:
			if (d[0] < 7)
				FAIL("endpoint descriptor too short");
			if (cur == NULL)
				FAIL("endpoint outside an interface");
			if (cur->nep >= DESC_MAX_EP)
				FAIL("too many endpoints in an interface");
			if ((d[2] & 0x0f) == 0)
				FAIL("endpoint descriptor for endpoint 0");
			cur->ep[cur->nep].address = d[2];
			cur->ep[cur->nep].type = d[3] & 0x03;
			cur->ep[cur->nep].maxp = le16(d + 4) & 0x7ff;
			cur->nep++;
			break;
		default:
			break;
		}
	}
	return 0;
}

int
desc_string(const uint8_t *p, size_t len, char *out, size_t outsz)
{
	size_t i, o = 0, n;

	if (outsz == 0)
		return -1;
	out[0] = '\0';
	if (len < 2 || p[1] != USB_DT_STRING || p[0] < 2)
		return -1;
	n = p[0] < len ? p[0] : len;
	for (i = 2; i + 1 < n && o + 1 < outsz; i += 2) {
		uint16_t ch = le16(p + i);

		out[o++] = (ch >= 0x20 && ch < 0x7f && ch != '"' &&
		    ch != '\\') ? (char)ch : '?';
	}
	out[o] = '\0';
	return 0;
}
