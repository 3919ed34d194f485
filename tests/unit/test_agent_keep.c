/*
 * usbgw-agent's keep-list (client/agent/keep.c, protocol.md 1.9.2): the
 * built-in default against typical devices, file rules before it, first
 * match wins, hubs always local, the attributes a keep-list rule may
 * use, and the no-reset list.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../client/agent/keep.h"
#include "tap.h"
#include "base/util.h"

/* An identity: vid:pid, busid, then "cc:ss:pp" interfaces. */
static struct usbgw_identity
dev(uint16_t vid, uint16_t pid, const char *busid, const char *serial,
    const char *ifaces)
{
	struct usbgw_identity id;
	unsigned c, s, p;
	const char *q = ifaces;
	int n;

	memset(&id, 0, sizeof(id));
	id.vid = vid;
	id.pid = pid;
	snprintf(id.exporter_busid, sizeof(id.exporter_busid), "%s", busid);
	snprintf(id.serial, sizeof(id.serial), "%s", serial);
	snprintf(id.product, sizeof(id.product), "Test device");
	while (sscanf(q, " %x:%x:%x%n", &c, &s, &p, &n) == 3) {
		id.ifaces[id.n_ifaces].cls = (uint8_t)c;
		id.ifaces[id.n_ifaces].subcls = (uint8_t)s;
		id.ifaces[id.n_ifaces].proto = (uint8_t)p;
		id.n_ifaces++;
		q += n;
	}
	return id;
}

static struct keep_list *
list(const char *const *lines, size_t n, bool defaults)
{
	struct keep_list *k = keep_list_new();
	struct rule_error err;
	size_t i;

	for (i = 0; i < n; i++) {
		bool local = strncmp(lines[i], "keep-local ", 11) == 0;
		const char *text = strchr(lines[i], ' ') + 1;

		if (keep_list_add(k, local, text, (int)i + 1, &err) != 0)
			diag("line %zu: col %d: %s", i + 1, err.column, err.msg);
	}
	if (defaults)
		keep_list_add_defaults(k);
	return k;
}

static void
t_defaults(void)
{
	struct keep_list *k = list(NULL, 0, true);
	struct usbgw_identity id;
	int rn;

	id = dev(0x046d, 0xc31c, "1-2", "", "03:01:01 03:00:00");
	ok(keep_local(k, &id, &rn), "default: boot keyboard + media keys kept");
	is_int(rn, 0, "... by a built-in rule (0)");
	id = dev(0x046d, 0xc077, "1-3", "", "03:01:02");
	ok(keep_local(k, &id, NULL), "default: boot mouse kept");
	id = dev(0x1234, 0x0001, "1-4", "", "03:01:01 08:06:50");
	ok(!keep_local(k, &id, &rn), "default: keyboard + mass storage exported");
	id = dev(0x1050, 0x0407, "1-5", "", "03:00:00 0b:00:00");
	ok(!keep_local(k, &id, NULL), "default: FIDO key + CCID exported");
	id = dev(0x1050, 0x0120, "1-5", "", "03:00:00");
	ok(!keep_local(k, &id, &rn), "default: FIDO HID (no boot interface) "
	    "exported");
	is_int(rn, 0, "... by the built-in export rule (0)");
	id = dev(0x0781, 0x5567, "1-6", "", "08:06:50");
	ok(!keep_local(k, &id, &rn), "default: flash disk exported");
	is_int(rn, -1, "... by no rule (-1)");
	id = dev(0x05e3, 0x0608, "1-1", "", "09:00:00");
	ok(keep_local(k, &id, &rn), "default: hub kept");
	id = dev(0x05e3, 0x0608, "1-1", "", "");
	id.dev_class = 9;
	ok(keep_local(k, &id, NULL), "hub by device class kept");
	id = dev(0x1234, 0x0002, "1-7", "", "03:01:00");
	ok(!keep_local(k, &id, NULL), "HID boot subclass, protocol 0: exported");
	keep_list_free(k);
}

static void
t_file_rules(void)
{
	static const char *const lines[] = {
		"keep-local serial \"KEEP\"",
		"export id 046d:c31c",
		"keep-local via-port \"3-1\"",
		"export with-interface 09:00:00",
		"keep-local id 1234:*",
		"export id 1234:0001",
	};
	struct keep_list *k = list(lines, nitems(lines), true);
	struct usbgw_identity id;
	int rn;

	id = dev(0x0525, 0xa4a0, "1-9", "KEEP", "ff:00:00");
	ok(keep_local(k, &id, &rn), "serial rule keeps a vendor device");
	is_int(rn, 1, "... line 1");
	id = dev(0x046d, 0xc31c, "1-2", "", "03:01:01");
	ok(!keep_local(k, &id, &rn), "a file rule overrides the built-in "
	    "keep of a boot keyboard");
	is_int(rn, 2, "... line 2");
	id = dev(0x0781, 0x5567, "3-1", "", "08:06:50");
	ok(keep_local(k, &id, &rn), "via-port rule keeps a disk on port 3-1");
	is_int(rn, 3, "... line 3");
	id = dev(0x0781, 0x5567, "3-2", "", "08:06:50");
	ok(!keep_local(k, &id, NULL), "... not one on 3-2");
	id = dev(0x05e3, 0x0608, "1-1", "", "09:00:00");
	ok(keep_local(k, &id, &rn), "a hub stays local whatever the file says");
	is_int(rn, 0, "... rule 0");
	id = dev(0x1234, 0x0001, "1-8", "", "ff:00:00");
	ok(keep_local(k, &id, &rn), "first match wins (line 5 before 6)");
	is_int(rn, 5, "... line 5");
	keep_list_free(k);
}

static void
t_bad_rules(void)
{
	static const struct {
		const char *text;
		int col;
		const char *msg;
	} v[] = {
		{ "id 1234:5678 to-host vdi01", 14, "attribute 'to-host' is not "
		    "allowed here" },
		{ "via-exporter tc1", 1, "attribute 'via-exporter' is not allowed" },
		{ "label \"x\"", 1, "attribute 'label' is not allowed" },
		{ "id 1234:5678 if localtime(08:00-18:00)", 14, "'if' is not "
		    "allowed here" },
		{ "id 12345:1", 4, "" },
		{ "serial \"unterminated", 8, "" },
		{ "colour red", 1, "expected attribute name" },
	};
	struct keep_list *k = keep_list_new();
	struct rule_error err;
	size_t i;

	for (i = 0; i < nitems(v); i++) {
		ok(keep_list_add(k, true, v[i].text, 1, &err) == -1,
		    "refused: %s", v[i].text);
		is_int(err.column, v[i].col, "... at column %d", v[i].col);
		ok(strstr(err.msg, v[i].msg) != NULL &&
		    strncmp(err.msg, "column", 6) != 0,
		    "... message '%s' names it", err.msg);
	}
	is_int((int)keep_list_len(k), 0, "nothing added");
	keep_list_free(k);
}

static void
t_noreset(void)
{
	struct keep_list *k = keep_list_new();
	struct rule_error err;
	struct usbgw_identity id;

	keep_noreset_add_defaults(k);
	id = dev(0x1210, 0x001c, "1-1", "", "01:01:00");
	ok(keep_no_reset(k, &id), "no-reset default: 1210:001c");
	id = dev(0x2798, 0x0001, "1-1", "", "ff:00:00");
	ok(keep_no_reset(k, &id), "no-reset default: 2798:0001");
	id = dev(0x0781, 0x5567, "1-1", "", "08:06:50");
	ok(!keep_no_reset(k, &id), "a disk is reset");
	ok(keep_list_add(k, true, "id 0781:*", 3, &err) == 0, "a no-reset rule");
	ok(keep_no_reset(k, &id), "... then it is not");
	keep_list_free(k);
}

int
main(void)
{
	t_defaults();
	t_file_rules();
	t_bad_rules();
	t_noreset();
	return done_testing();
}
