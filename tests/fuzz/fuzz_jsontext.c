/*
 * libFuzzer harness for jsontext.c's scanner and the CLI's reading of a
 * reply frame through it: differential, against jansson.
 *
 * Input: one byte (bits 0-1: indent 0, 2, 4, 1), then a JSON text.
 *
 * Checks that:
 *  - jt_scan accepts exactly what json_loadb (JSON_DECODE_ANY) accepts
 *    (texts with a duplicate member name are not compared: jansson keeps
 *    the last value, the scanner writes both, see jsontext.h),
 *    with only whitespace after the value (but for a text holding a NUL
 *    byte: jansson takes "0\0" as 0, and refuses "[0]\0"; the scanner
 *    refuses both, and such a text is not compared);
 *  - what it writes is byte for byte json_dumpb's output for the loaded
 *    value at that indent (JSON_REAL_PRECISION(15)), and check-only
 *    scanning agrees with writing;
 *  - the writer's output for any string jansson holds is jansson's, and
 *    for any bytes at all is a JSON string that loads.
 */
#include <string.h>

#include <jansson.h>

#include "arena.h"
#include "fuzz.h"
#include "base/jsontext.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int indents[] = { 0, 2, 4, 1 };
	const char *text, *end, *q;
	struct jt_error e;
	struct jtext b;
	json_error_t je;
	json_t *j, *s;
	char *want, *str;
	int indent;

	if (size < 1 || size > 64 * 1024)
		return 0;
	indent = indents[data[0] & 3];
	text = (const char *)data + 1;
	size--;

	/*
	 * Duplicate member names: jansson keeps the last value, the scanner
	 * writes both (jsontext.h); such a text is not compared.
	 */
	j = json_loadb(text, size, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES,
	    &je);
	if (j == NULL && (s = json_loadb(text, size, JSON_DECODE_ANY, &je)) !=
	    NULL) {
		json_decref(s);
		goto writer;
	}
	if (arena_failures > 0) {	/* jansson out of arena: no verdict */
		json_decref(j);
		arena_reset();
		return 0;
	}
	jtext_init(&b, 16 * 1024 * 1024);
	end = jt_scan(text, text, text + size, &b, indent, 0, &e);
	if (end != NULL)
		end = jt_ws(end, text + size);
	if (memchr(text, '\0', size) != NULL) {
		json_decref(j);
		j = NULL;
		CHECK(end != text + size);
	} else
		CHECK((j != NULL) == (end == text + size));
	q = jt_scan(text, text, text + size, NULL, 0, 0, &e);
	CHECK((q != NULL) == (end != NULL));
	if (j != NULL) {
		want = json_dumps(j, JSON_ENCODE_ANY | JSON_REAL_PRECISION(15) |
		    (indent > 0 ? JSON_INDENT(indent) : JSON_COMPACT));
		CHECK(want != NULL && !b.over && b.len == strlen(want) &&
		    memcmp(b.buf, want, b.len) == 0);
		arena_free(want);
		json_decref(j);
	}
	jtext_free(&b);

writer:	/* the writer, over the input's bytes as one string */
	str = malloc(size + 1);
	memcpy(str, text, size);
	str[size] = '\0';
	jtext_init(&b, 16 * 1024 * 1024);
	jt_str(&b, str);
	s = json_loadb(b.buf, b.len, JSON_DECODE_ANY, &je);
	CHECK(s != NULL && json_is_string(s));
	json_decref(s);
	if ((s = json_string(str)) != NULL) {
		want = json_dumps(s, JSON_ENCODE_ANY | JSON_COMPACT);
		CHECK(want != NULL && b.len == strlen(want) &&
		    memcmp(b.buf, want, b.len) == 0);
		arena_free(want);
		json_decref(s);
	}
	jtext_free(&b);
	free(str);
	arena_reset();
	return 0;
}
