/*
 * libFuzzer harness for host_match_parse (approvals' host limits).
 *
 * Input: the text of one limit (a NUL ends it early), parsed with and
 * without names_checked.  Checks:
 *  - a refusal has a message, NUL-terminated in any buffer size, and
 *    leaves a limit that admits no host (it fails closed);
 *  - an accepted limit is "any host" only for empty text, a name only
 *    when names are checked, lower case, at most 253 characters of
 *    letters, digits, '-' and '.', a prefix no longer than its address;
 *  - its canonical text parses back to the same limit and text;
 *  - it admits the host it names.
 */
#include <sys/socket.h>

#include <ctype.h>
#include <stdbool.h>
#include <string.h>

#include "policy/decision.h"
#include "fuzz.h"

static bool
same(const struct host_match *a, const struct host_match *b)
{
	return a->kind == b->kind && a->prefix == b->prefix &&
	    memcmp(&a->addr, &b->addr, sizeof(a->addr)) == 0 &&
	    strcmp(a->name, b->name) == 0;
}

static void
refused(const char *text, bool names, const struct host_match *m,
    const char *err)
{
	struct host_match	m2;
	struct host_id		h;
	char			small[7];

	CHECK(err[0] != '\0');
	memset(&h, 0, sizeof(h));
	usbgw_addr_parse("10.1.2.3", &h.addr);
	h.name = "";
	CHECK(!host_match_test(m, &h));
	usbgw_addr_parse("::ffff:10.1.2.3", &h.addr);
	CHECK(!host_match_test(m, &h));
	memset(small, 'x', sizeof(small));
	CHECK(host_match_parse(text, names, &m2, small, sizeof(small)) == -1);
	CHECK(memchr(small, '\0', sizeof(small)) != NULL);
}

static void
accepted(const char *text, bool names, const struct host_match *m)
{
	struct host_match	 m2;
	struct host_id		 h;
	char			 buf[HOST_NAME_MAX_LEN + 8], buf2[sizeof(buf)];
	char			 err[256], up[HOST_NAME_MAX_LEN + 2];
	size_t			 i, len;

	memset(&h, 0, sizeof(h));
	switch (m->kind) {
	case HOST_ANY:
		CHECK(text[0] == '\0');
		break;
	case HOST_ADDR:
		CHECK(m->addr.family == AF_INET || m->addr.family == AF_INET6);
		CHECK(m->prefix <= (m->addr.family == AF_INET ? 32u : 128u));
		h.addr = m->addr;
		break;
	case HOST_NAME:
		CHECK(names);
		len = strlen(m->name);
		CHECK(len > 0 && len <= HOST_NAME_MAX_LEN);
		for (i = 0; i < len; i++) {
			CHECK(islower((unsigned char)m->name[i]) ||
			    isdigit((unsigned char)m->name[i]) ||
			    m->name[i] == '-' || m->name[i] == '.');
			up[i] = (char)toupper((unsigned char)m->name[i]);
		}
		up[len] = '.';
		up[len + 1] = '\0';
		h.name = up;
		break;
	}
	CHECK(host_match_test(m, &h));
	host_match_format(m, buf, sizeof(buf));
	CHECK(host_match_parse(buf, true, &m2, err, sizeof(err)) == 0);
	CHECK(same(m, &m2));
	CHECK(strcmp(host_match_format(&m2, buf2, sizeof(buf2)), buf) == 0);
}

static void
one(const char *text, bool names)
{
	struct host_match	m;
	char			err[256];

	memset(err, 'x', sizeof(err));
	if (host_match_parse(text, names, &m, err, sizeof(err)) == -1) {
		CHECK(memchr(err, '\0', sizeof(err)) != NULL);
		refused(text, names, &m, err);
		return;
	}
	CHECK(err[0] == '\0');
	accepted(text, names, &m);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	text[1024];

	if (size >= sizeof(text))
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	one(text, false);
	one(text, true);
	return 0;
}
