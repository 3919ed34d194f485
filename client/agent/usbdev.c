/*
 * STUB of client/agent/usbdev.c (the usbdev helper writes the real
 * one): libusb never starts here, as on a machine without usbfs.
 * Dropped at merge.
 */
#include <stdio.h>

#include "usbdev.h"

int
usbdev_init(struct event_base *base, const struct usbdev_conf *conf,
    const struct usbdev_hooks *hooks, void *arg, char *err, size_t errsz)
{
	(void)base;
	(void)conf;
	(void)hooks;
	(void)arg;
	snprintf(err, errsz, "libusb_init: stub device layer (no usbfs)");
	return -1;
}

static void
stub_list(void *arg, struct expsrv_conn *c)
{
	(void)arg;
	(void)c;
}

static uint32_t
stub_import(void *arg, struct expsrv_conn *c, const char *busid,
    struct usbip_dev *rec, void **dev)
{
	(void)arg;
	(void)c;
	(void)busid;
	(void)rec;
	(void)dev;
	return ST_NODEV;
}

const struct expsrv_ops usbdev_expsrv_ops = {
	.list = stub_list,
	.import = stub_import,
};

void
usbdev_foreach_exportable(void (*fn)(void *, const struct usbip_dev *,
    const struct usbip_intf *, uint8_t), void *arg)
{
	(void)fn;
	(void)arg;
}

void
usbdev_shutdown(void)
{
}

int
usbdev_reattach_state(const char *state_file, char *err, size_t errsz)
{
	FILE *f;

	if ((f = fopen(state_file, "r")) == NULL) {
		snprintf(err, errsz, "cannot open (stub device layer)");
		return -1;
	}
	fclose(f);
	return 0;
}
