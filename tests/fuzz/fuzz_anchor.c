/*
 * libFuzzer harness for the audit anchor parser (auditkey.c): an anchor
 * file is untrusted text (a copy of a log, a file from a ticket).
 *
 * Input: the file's bytes.  Checks:
 *  - a refusal has a message naming the file ("f:" first);
 *  - every accepted anchor has seq > 0, a 64-digit lowercase hex hash,
 *    a signature and key fingerprint of their full length or none, and
 *    the line it came from;
 *  - its formatted line parses back to the same anchor.
 */
#include <string.h>

#include "db/auditkey.h"
#include "fuzz.h"

static int
hex_or_empty(const char *s, size_t n)
{
	size_t i, len = strlen(s);

	if (len != 0 && len != n)
		return 0;
	for (i = 0; i < len; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' &&
		    s[i] <= 'f')))
			return 0;
	return 1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct audit_anchor a[8], b;
	char err[512], line[512], e2[256];
	int n, i;

	err[0] = '\0';
	n = audit_anchor_parse((const char *)data, size, "f", a, 8, err,
	    sizeof(err));
	if (n == -1) {
		CHECK(strncmp(err, "f:", 2) == 0);
		return 0;
	}
	CHECK(n >= 1 && n <= 8);
	for (i = 0; i < n; i++) {
		CHECK(a[i].seq > 0 && a[i].line > 0 && a[i].time >= 0);
		CHECK(strlen(a[i].hash) == 64 && hex_or_empty(a[i].hash, 64));
		CHECK(hex_or_empty(a[i].sig, AUDIT_SIG_HEX));
		CHECK(hex_or_empty(a[i].key, AUDIT_FPR_HEX));
		audit_anchor_format(&a[i], line, sizeof(line));
		CHECK(audit_anchor_parse_line(line, strlen(line), &b, e2,
		    sizeof(e2)) == 1);
		CHECK(b.seq == a[i].seq && b.time == a[i].time &&
		    strcmp(b.hash, a[i].hash) == 0 &&
		    strcmp(b.sig, a[i].sig) == 0 && strcmp(b.key, a[i].key) == 0);
	}
	return 0;
}
