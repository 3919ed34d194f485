/*
 * libFuzzer harness for the relay's descriptor check (gateway/policy/ident.c):
 * the data of a vhci host's GET_DESCRIPTOR reply are a hostile device's
 * bytes, compared with what the probe read (also the device's bytes).
 *
 * Input: 8 bytes of setup, 1 byte n of reply length, n bytes of reply,
 * then the probe's configuration descriptor (the rest; also its device
 * descriptor's first 18 bytes when there are enough).
 * Checks: no read past any buffer (ASan; exact-size copies); a verdict
 * is NULL or a NUL-terminated text inside buf; the probe's own bytes
 * (a prefix of them) always pass; has_config/has_alt never read past
 * the configuration and agree with desc_parse_config.
 */
#include <string.h>

#include "base/desc.h"
#include "fuzz.h"
#include "policy/ident.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gw_ident id;
	uint8_t setup[8], *reply, *cfg;
	size_t n, clen;
	char buf[192];
	const char *w;

	if (size < 9)
		return 0;
	memcpy(setup, data, 8);
	n = data[8];
	data += 9;
	size -= 9;
	if (n > size)
		n = size;
	reply = malloc(n ? n : 1);
	memcpy(reply, data, n);
	data += n;
	size -= n;
	clen = size > 4096 ? 4096 : size;

	memset(&id, 0, sizeof(id));
	if (clen >= 18)
		memcpy(id.dev_desc, data, 18);
	id.nconfigs = id.nconfigs_dev = clen > 0;
	if (clen > 0) {
		cfg = malloc(clen);
		memcpy(cfg, data, clen);
		id.config[0] = cfg;
		id.config_len[0] = (uint16_t)clen;
		/* the same bytes as string, BOS, qualifier, other-speed */
		id.str_raw[3] = malloc(clen > 255 ? 255 : clen);
		memcpy(id.str_raw[3], data, clen > 255 ? 255 : clen);
		id.str_len[3] = (uint8_t)(clen > 255 ? 255 : clen);
		id.langid = (uint16_t)(setup[4] | setup[5] << 8);
	}
	w = gw_ident_check_read(&id, setup, reply, n, buf, sizeof(buf));
	CHECK(w == NULL || (w == buf && memchr(buf, '\0', sizeof(buf)) != NULL));
	if (clen > 0 && (setup[0] & 0xe0) == 0x80 && setup[3] == USB_DT_CONFIG &&
	    setup[2] == 0 && setup[1] == USB_REQ_GET_DESCRIPTOR)
		CHECK(gw_ident_check_read(&id, setup, id.config[0],
		    clen, buf, sizeof(buf)) == NULL);
	(void)gw_ident_has_config(&id, setup[2]);
	(void)gw_ident_has_alt(&id, setup[2], setup[4], setup[6]);
	free(reply);
	gw_ident_clear(&id);
	return 0;
}
