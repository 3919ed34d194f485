/*
 * jsontext.c against jansson: the writer writes what json_dumpb
 * (JSON_COMPACT) writes for the same values; the scanner accepts what
 * json_loadb accepts and writes it again as json_dumpb (JSON_INDENT(n) /
 * JSON_COMPACT, JSON_REAL_PRECISION(15)) does.  Fixed cases, then random
 * trees and random strings.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/jsontext.h"
#include "tap.h"

static char *
dump(const json_t *j, size_t flags)
{
	return json_dumps(j, flags | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
}

/* jt_str(s) == jansson's dump of json_string(s) */
static int
str_same(const char *s)
{
	struct jtext b;
	json_t *j = json_string(s);
	char *want;
	int same;

	if (j == NULL)
		return 0;
	want = dump(j, JSON_COMPACT);
	jtext_init(&b, 1 << 20);
	jt_str(&b, s);
	same = b.len == strlen(want) && memcmp(b.buf, want, b.len) == 0;
	if (!same)
		diag("string: got %.*s want %s", (int)b.len, b.buf, want);
	jtext_free(&b);
	free(want);
	json_decref(j);
	return same;
}

/* scan(text) == dump(load(text)) at indent (0: compact); or both refuse */
static int
scan_same(const char *text, size_t len, int indent)
{
	struct jt_error e;
	struct jtext b;
	json_error_t je;
	const char *end;
	json_t *j;
	char *want = NULL;
	int same;

	j = json_loadb(text, len, JSON_DECODE_ANY, &je);
	if (j != NULL)
		want = dump(j, indent > 0 ? JSON_INDENT(indent) : JSON_COMPACT);
	jtext_init(&b, 1 << 24);
	end = jt_scan(text, text, text + len, &b, indent, 0, &e);
	if (end != NULL)
		end = jt_ws(end, text + len);
	if (j == NULL)
		same = end == NULL || end != text + len;
	else
		same = end == text + len && !b.over && b.len == strlen(want) &&
		    memcmp(b.buf, want, b.len) == 0;
	if (!same)
		diag("scan %.60s: got %s %.200s, jansson %s %.200s", text,
		    end ? "ok" : "error", end ? b.buf : e.text,
		    j ? "ok" : "error", j ? want : je.text);
	/* checking alone agrees too */
	if (same && (jt_scan(text, text, text + len, NULL, 0, 0, &e) != NULL) !=
	    (end != NULL)) {
		diag("scan %.60s: check-only disagrees", text);
		same = 0;
	}
	jtext_free(&b);
	free(want);
	json_decref(j);
	return same;
}

static json_t *
random_value(int depth)
{
	static const char *const words[] = { "busid", "a\"b", "\\", "\x01",
	    "tab\there", "\xc3\xa9t\xc3\xa9", "\xf0\x9f\x98\x80", "", "/",
	    "\x7f", "\xe2\x80\xa8", "new\nline" };
	int k = rand() % (depth > 4 ? 6 : 8);
	json_t *v;
	int i, n;

	switch (k) {
	case 0: return json_null();
	case 1: return json_boolean(rand() & 1);
	case 2: return json_integer((json_int_t)rand() * (rand() & 1 ? -1 : 1)
		    * (rand() % 3 == 0 ? 1000000007LL : 1));
	case 3: return json_real((double)rand() / ((rand() % 1000) + 1) *
		    (rand() & 1 ? 1e-20 : 1e20));
	case 4:
	case 5: return json_string(words[rand() % 12]);
	case 6:
		v = json_array();
		n = rand() % 4;
		for (i = 0; i < n; i++)
			json_array_append_new(v, random_value(depth + 1));
		return v;
	default:
		v = json_object();
		n = rand() % 5;
		for (i = 0; i < n; i++) {
			char key[32];

			snprintf(key, sizeof(key), "%s%d", words[rand() % 12], i);
			json_object_set_new(v, key, random_value(depth + 1));
		}
		return v;
	}
}

int
main(void)
{
	static const char *const valid[] = {
		"{}", "[]", "[ ]", "{ }", "0", "-0", "1", "-1", "1.5", "-0.0",
		"1e5", "1E+10", "1e-7", "0.1", "123456789.123456789",
		"9223372036854775807", "-9223372036854775808", "2.5e-320",
		"1e308", "\"\\u00e9\"", "\"\\ud83d\\ude00\"", "\"\\/\"",
		"\"\\u001f\\u007f\"", "\"\\b\\f\\n\\r\\t\\\"\\\\\"",
		"\"\xc3\xa9\"", " [1, [2, [3, {}]], {\"a\": [] }] ",
		"{\"v\":1,\"id\":null,\"ok\":true,\"result\":[{\"a\":\"b\"}]}",
		"\t\n\r {\"k\" : true , \"l\":false,\"m\":null}",
		"\"\\u2028\"",
	};
	static const char *const invalid[] = {
		"", " ", "[", "]", "[1,]", "{\"a\"}", "{\"a\":}", "{,}", "[,1]",
		"\"\\u0000\"", "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"",
		"01", "1.", ".5", "-", "+1", "1e", "1e+", "\"\x01\"",
		"\"\xff\"", "\"\xc0\x80\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"",
		"tru", "nul", "\"abc", "\"\\x\"", "\"\\u12\"",
		"99999999999999999999", "-99999999999999999999", "1e999",
		"{\"a\":1 \"b\":2}", "[1 2]", "{1:2}", "NaN", "Infinity",
	};
	struct jtext b;
	size_t i;
	int r, k;
	char *deep;

	/* writer: every byte alone, and a few strings */
	for (i = 1, k = 1; i < 128; i++) {
		char s[2] = { (char)i, 0 };

		k &= str_same(s);
	}
	ok(k, "writer: each ASCII character escaped as jansson does");
	k = str_same("") & str_same("\xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80") &
	    str_same("say \"hi\"\\\n\x1b[31m") & str_same("\xe2\x80\xa8");
	ok(k, "writer: UTF-8, quotes, backslash, ESC as jansson writes them");

	jtext_init(&b, 1024);
	jt_str(&b, "a\xff" "b\xc3");
	is_int(b.len, 10, "writer: invalid UTF-8 bytes become U+FFFD");
	ok(b.len == 10 && memcmp(b.buf, "\"a\xef\xbf\xbd" "b\xef\xbf\xbd\"", 10)
	    == 0, "writer: ... each of them");
	jtext_free(&b);

	jtext_init(&b, 1024);
	jt_open(&b, '{');
	jt_kint(&b, "min", INT64_MIN);
	jt_kint(&b, "max", INT64_MAX);
	jt_knull(&b, "n");
	jt_kbool(&b, "t", true);
	jt_kint_or_null(&b, "z", 0);
	jt_key(&b, "a");
	jt_open(&b, '[');
	jt_str(&b, "x");
	jt_int(&b, 0);
	jt_open(&b, '{');
	jt_close(&b, '}');
	jt_open(&b, '[');
	jt_close(&b, ']');
	jt_bool(&b, false);
	jt_null(&b);
	jt_close(&b, ']');
	jt_close(&b, '}');
	jt_raw(&b, "", 1);
	is_str(b.buf, "{\"min\":-9223372036854775808,\"max\":9223372036854775807,"
	    "\"n\":null,\"t\":true,\"z\":null,\"a\":[\"x\",0,{},[],false,null]}",
	    "writer: commas, keys and values in place");
	jtext_free(&b);

	jtext_init(&b, 8);
	jt_str(&b, "12345");
	ok(!b.over && b.len == 7, "limit: 7 bytes in a limit of 8");
	jt_str(&b, "x");
	ok(b.over && b.len <= 8, "limit: past it, over set, never more than the "
	    "limit");
	jtext_free(&b);

	/* a big reservation (2 MiB pages where allowed) is an ordinary buffer */
	jtext_init(&b, 64 << 20);
	jtext_reserve(&b, 8 << 20);
	ok(b.buf != NULL && b.cap >= (8u << 20) && b.len == 0,
	    "reserve 8 MiB: room for 8 MiB");
	for (r = 0; r < (1 << 20) && !b.over; r++)
		jt_int(&b, r % 10);
	ok(!b.over && b.len == 2 * (1u << 20) - 1 && b.buf[0] == '0' &&
	    b.buf[b.len - 1] == '5', "... written through and past it");
	jtext_free(&b);

	/* scanner: fixed cases */
	for (i = 0, k = 1; i < sizeof(valid) / sizeof(valid[0]); i++)
		k &= scan_same(valid[i], strlen(valid[i]), 2) &
		    scan_same(valid[i], strlen(valid[i]), 0) &
		    scan_same(valid[i], strlen(valid[i]), 4);
	ok(k, "scanner: %zu valid texts written as jansson writes them "
	    "(indent 2, 4, compact)", sizeof(valid) / sizeof(valid[0]));
	for (i = 0, k = 1; i < sizeof(invalid) / sizeof(invalid[0]); i++)
		k &= scan_same(invalid[i], strlen(invalid[i]), 2);
	ok(k, "scanner: %zu invalid texts refused as jansson refuses them",
	    sizeof(invalid) / sizeof(invalid[0]));

	deep = malloc(2 * JT_MAX_DEPTH + 4);
	for (r = 0; r < 2; r++) {
		int d = JT_MAX_DEPTH + r;	/* 2048 fits, 2049 does not */

		memset(deep, '[', (size_t)d);
		memset(deep + d, ']', (size_t)d);
		k = scan_same(deep, 2 * (size_t)d, 0);
		ok(k, "scanner: nesting %d as jansson judges it", d);
	}
	free(deep);

	/* random trees, dumped compact and pretty, scanned back */
	srand(13);
	for (r = 0, k = 1; r < 3000; r++) {
		json_t *v = random_value(0);
		char *c = dump(v, JSON_COMPACT), *p = dump(v, JSON_INDENT(3));

		k &= scan_same(c, strlen(c), 2) & scan_same(p, strlen(p), 0);
		free(c);
		free(p);
		json_decref(v);
		if (!k)
			break;
	}
	ok(k, "scanner: 3000 random trees, compact to indented and back");

	/* random byte strings: the writer's output loads to the same bytes */
	for (r = 0, k = 1; r < 20000 && k; r++) {
		unsigned char s[12];
		size_t n = (size_t)(rand() % 11), j;

		for (j = 0; j < n; j++)
			s[j] = (unsigned char)(1 + rand() % 255);
		s[n] = 0;
		json_t *t = json_string((char *)s);

		if (t != NULL) {
			json_decref(t);
			k &= str_same((char *)s);
		} else {
			jtext_init(&b, 1024);
			jt_str(&b, (char *)s);
			k &= scan_same(b.buf, b.len, 0);
			jtext_free(&b);
		}
	}
	ok(k, "writer: random byte strings, valid UTF-8 as jansson writes them, "
	    "invalid still valid JSON");

	{
		const char *t = "\"a\\u00e9\\ud83d\\ude00b\" tail";
		struct jt_error e;
		char out[16];
		bool trunc;
		const char *q;

		q = jt_string(t, t, t + strlen(t), out, sizeof(out), &trunc, &e);
		ok(q != NULL && *q == ' ' && !trunc &&
		    strcmp(out, "a\xc3\xa9\xf0\x9f\x98\x80" "b") == 0,
		    "jt_string decodes escapes and surrogate pairs");
		q = jt_string(t, t, t + strlen(t), out, 4, &trunc, &e);
		ok(q != NULL && trunc && strcmp(out, "a\xc3\xa9") == 0,
		    "jt_string truncates at a character boundary");
		q = jt_string(t, t, t + strlen(t), out, 5, &trunc, &e);
		ok(q != NULL && trunc && strcmp(out, "a\xc3\xa9") == 0,
		    "a truncated string is a prefix: nothing shorter after the "
		    "character that did not fit");
	}
	done_testing();
}
