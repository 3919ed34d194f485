/*
 * log-format = json (log.c): each line parses as one JSON object with the
 * seven members, whatever bytes the message holds (quotes, backslashes,
 * control characters, bytes that are not UTF-8, a message longer than the
 * line), and valid UTF-8 passes through unchanged.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "base/log.h"
#include "tap.h"

static FILE *cap;

/* The lines written to stderr since the last call, one JSON each. */
static json_t *
next_line(void)
{
	static char line[65536];
	json_error_t e;

	fflush(stderr);
	if (fgets(line, sizeof(line), cap) == NULL)
		return NULL;
	return json_loads(line, 0, &e);
}

static const char *
str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

int
main(void)
{
	struct log_ctx ctx = { "state", "tc17:1-2", "tc17", "10.1.0.2" };
	char big[3000];
	json_t *o;
	FILE *w;
	int fd;

	w = tmpfile();
	fd = fileno(w);
	if (dup2(fd, 2) == -1)
		return 1;
	setvbuf(stderr, NULL, _IONBF, 0);
	{
		char path[64];

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		cap = fopen(path, "r");
	}
	if (cap == NULL)
		return 1;
	log_init("test", 1, LOG_LVL_DEBUG);
	log_set_json(1);

	log_ctx(LOG_LVL_INFO, &ctx, "pending -> authorized by %s", "alice");
	o = next_line();
	ok(o != NULL, "a structured line parses");
	is_str(str(o, "event"), "state", "event");
	is_str(str(o, "busid"), "tc17:1-2", "busid");
	is_str(str(o, "exporter"), "tc17", "exporter");
	is_str(str(o, "host"), "10.1.0.2", "host");
	is_str(str(o, "level"), "info", "level");
	is_str(str(o, "message"), "pending -> authorized by alice", "message");
	ok(str(o, "time") != NULL && strlen(str(o, "time")) == 24 &&
	    str(o, "time")[23] == 'Z', "time: ISO 8601 UTC with ms (%s)",
	    str(o, "time") ? str(o, "time") : "");
	json_decref(o);

	log_warnx("quote \" backslash \\ tab \t ctl \x01 del \x7f");
	o = next_line();
	ok(o != NULL, "a plain line with quotes and control bytes parses");
	is_str(str(o, "event"), "log", "... event log");
	ok(json_is_null(json_object_get(o, "busid")) &&
	    json_is_null(json_object_get(o, "exporter")) &&
	    json_is_null(json_object_get(o, "host")),
	    "... busid, exporter, host null");
	is_str(str(o, "level"), "warning", "... level warning");
	is_str(str(o, "message"), "quote \" backslash \\ tab \t ctl \x01 "
	    "del \x7f", "... the message, byte for byte");
	json_decref(o);

	log_info("latin1 \xe9t\xe9 and utf8 \xc3\xa9t\xc3\xa9 and cut \xe2\x82");
	o = next_line();
	ok(o != NULL, "bytes that are not UTF-8: the line still parses");
	is_str(str(o, "message"), "latin1 \xc3\xa9t\xc3\xa9 and utf8 "
	    "\xc3\xa9t\xc3\xa9 and cut \xc3\xa2\xc2\x82",
	    "... each bad byte as \\u00XX, valid UTF-8 unchanged");
	json_decref(o);

	memset(big, '"', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	log_info("%s", big);
	o = next_line();
	ok(o != NULL, "a message longer than the line (escaped): still one "
	    "object");
	ok(o != NULL && str(o, "message") != NULL &&
	    strspn(str(o, "message"), "\"") == strlen(str(o, "message")) &&
	    strlen(str(o, "message")) > 500, "... cut, not broken (%zu bytes)",
	    o && str(o, "message") ? strlen(str(o, "message")) : 0);
	json_decref(o);

	log_debug("debug %d", 1);
	o = next_line();
	is_str(o ? str(o, "level") : NULL, "debug", "debug level");
	json_decref(o);
	log_setlevel(LOG_LVL_INFO);
	log_debug("not shown");
	log_set_json(0);
	log_info("text again");
	{
		char line[512];

		fflush(stderr);
		ok(fgets(line, sizeof(line), cap) != NULL &&
		    line[0] != '{' && strstr(line, "test[info]: text again"),
		    "log-format text: the text line");
	}
	return done_testing();
}
