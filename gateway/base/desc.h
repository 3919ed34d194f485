/*
 * USB descriptors as the gateway reads them from a device it probes.
 * They are untrusted bytes: every descriptor is walked by bLength with
 * bounds checks, never cast to a struct (as libusb's descriptor.c does).
 */
#ifndef USBGW_DESC_H
#define USBGW_DESC_H

#include <stddef.h>
#include <stdint.h>

#define USB_DT_DEVICE		0x01
#define USB_DT_CONFIG		0x02
#define USB_DT_STRING		0x03
#define USB_DT_INTERFACE	0x04
#define USB_DT_ENDPOINT		0x05
#define USB_DT_DEVICE_QUALIFIER	0x06
#define USB_DT_OTHER_SPEED_CONFIG 0x07
#define USB_DT_BOS		0x0f
#define USB_DT_DEVICE_SIZE	18
#define USB_DT_CONFIG_SIZE	9

#define USB_REQ_GET_STATUS		0x00
#define USB_REQ_CLEAR_FEATURE		0x01
#define USB_REQ_SET_FEATURE		0x03
#define USB_REQ_GET_DESCRIPTOR		0x06
#define USB_REQ_GET_CONFIGURATION	0x08
#define USB_REQ_SET_CONFIGURATION	0x09
#define USB_REQ_SET_INTERFACE		0x0b

#define USB_XFER_CONTROL	0
#define USB_XFER_ISO		1
#define USB_XFER_BULK		2
#define USB_XFER_INT		3

#define DESC_MAX_INTF		32
#define DESC_MAX_ALT		16
#define DESC_MAX_EP		30

struct desc_device {
	uint16_t	bcdUSB;
	uint8_t		bDeviceClass, bDeviceSubClass, bDeviceProtocol;
	uint8_t		bMaxPacketSize0;
	uint16_t	idVendor, idProduct, bcdDevice;
	uint8_t		iManufacturer, iProduct, iSerialNumber;
	uint8_t		bNumConfigurations;
};

struct desc_ep {
	uint8_t		address;	/* bEndpointAddress */
	uint8_t		type;		/* USB_XFER_* */
	uint16_t	maxp;
};

struct desc_alt {
	uint8_t		number, alt;
	uint8_t		cls, subcls, proto;
	uint8_t		nep;
	struct desc_ep	ep[DESC_MAX_EP];
};

struct desc_config {
	uint16_t	total_len;
	uint8_t		value;		/* bConfigurationValue */
	uint8_t		nintf;		/* bNumInterfaces */
	uint8_t		nalt;		/* interface descriptors seen */
	struct desc_alt	alt[DESC_MAX_INTF * 2];
};

/* Returns 0, or -1 with *why. */
int	desc_parse_device(const uint8_t *p, size_t len, struct desc_device *,
	    const char **why);
int	desc_parse_config(const uint8_t *p, size_t len, struct desc_config *,
	    const char **why);
/*
 * Convert a string descriptor (UTF-16LE) to printable ASCII in out:
 * non-ASCII and control characters become '?'.  Returns 0 or -1.
 */
int	desc_string(const uint8_t *p, size_t len, char *out, size_t outsz);

#endif
