/*
 * libFuzzer harness for the vhci status parser (vhci_status_parse).
 *
 * Input: byte 0 chooses the controller (0..3), byte 1 the ports per hub
 * (1..31), the rest is the status file's content as the kernel (or
 * anyone able to fake it) would have it.
 *
 * Besides "no crash, no read past the input" (ASan), it checks:
 *  - the count returned is the number of ports not left unknown;
 *  - every port's number, hub and rhport follow from its index;
 *  - a port not in use carries no details; a used one has a speed that
 *    belongs on its hub and a valid, NUL-terminated local_busid;
 *  - printing the parsed ports back in the kernel's format and parsing
 *    that again gives the same ports, with no malformed line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "base/log.h"
#include "host/vhci.h"

int	LLVMFuzzerInitialize(int *, char ***);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* Malformed lines are logged as warnings: keep the fuzzer quiet. */
	log_init("fuzz_vhci_status", 1, LOG_LVL_ERR);
	return 0;
}

FUZZ_NOCOV static size_t
render(const struct vhci_port *ports, unsigned int n, char *out, size_t size)
{
	size_t off = 0;
	unsigned int i;
	int w;

	w = snprintf(out, size, "hub port sta spd dev      sockfd local_busid\n");
	off = (size_t)w;
	for (i = 0; i < n; i++) {
		const struct vhci_port *p = &ports[i];

		if (p->status == VHCI_ST_UNKNOWN)
			continue;
		w = snprintf(out + off, size - off,
		    "%s  %04u %03u %03u %08x %06d %s\n",
		    vhci_hub_name(p->hub), p->port, (unsigned int)p->status,
		    p->speed, p->devid, p->sockfd, p->local_busid);
		CHECK(w > 0 && (size_t)w < size - off);
		off += (size_t)w;
	}
	return off;
}

/* Every port's fields against its index and state; n ports known. */
FUZZ_NOCOV static void
check_ports(const struct vhci_port *ports, unsigned int c, unsigned int hc,
    int n)
{
	unsigned int i, known = 0;

	CHECK(n >= 0 && n <= (int)(2 * hc));
	for (i = 0; i < 2 * hc; i++) {
		const struct vhci_port *p = &ports[i];

		CHECK(p->port == c * 2 * hc + i);
		CHECK(p->controller == c);
		CHECK(p->hub == (i < hc ? VHCI_HUB_HS : VHCI_HUB_SS));
		CHECK(p->rhport == i % hc);
		CHECK(memchr(p->local_busid, '\0', sizeof(p->local_busid)));
		CHECK(vhci_busid_valid(p->local_busid));
		if (p->status == VHCI_ST_UNKNOWN)
			continue;
		known++;
		CHECK(p->status >= VHCI_ST_FREE && p->status <= VHCI_ST_ERROR);
		if (p->status == VHCI_ST_USED) {
			CHECK(vhci_hub_for_speed(p->speed) == (int)p->hub);
			CHECK(strcmp(p->local_busid, "0-0") != 0);
			CHECK(p->sockfd >= 0);
		} else {
			CHECK(p->speed == 0 && p->devid == 0 && p->sockfd == 0);
			CHECK(strcmp(p->local_busid, "0-0") == 0);
		}
	}
	CHECK(known == (unsigned int)n);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct vhci_port ports[2 * VHCI_MAX_HC_PORTS];
	static struct vhci_port again[2 * VHCI_MAX_HC_PORTS];
	static char text[2 * VHCI_MAX_HC_PORTS * 96 + 64];
	unsigned int c, hc, nbad, nbad2;
	size_t len;
	int n, n2;

	if (size < 2)
		return 0;
	c = data[0] & 3;
	hc = data[1] % VHCI_MAX_HC_PORTS + 1;
	n = vhci_status_parse((const char *)data + 2, size - 2, c, hc, ports,
	    &nbad);
	check_ports(ports, c, hc, n);

	len = render(ports, 2 * hc, text, sizeof(text));
	n2 = vhci_status_parse(text, len, c, hc, again, &nbad2);
	CHECK(n2 == n && nbad2 == 0);
	CHECK(memcmp(ports, again, sizeof(ports[0]) * 2 * hc) == 0);
	return 0;
}
