/*
 * Control protocol messages as bytes: framing and the shape of requests,
 * responses and events (protocol.md part 2).  No I/O here, so the daemon,
 * the CLI and the fuzzer share one decoder.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/ctlproto.h"
#include "proto/usbip.h"
#include "base/util.h"

#define CTL_DUMP_FLAGS	(JSON_COMPACT | JSON_REAL_PRECISION(15))

enum ctl_dec
ctl_frame_decode(const uint8_t *buf, size_t len, size_t limit, json_t **msg,
    size_t *used, char *err, size_t errlen)
{
	json_error_t je;
	json_t *j;
	uint32_t n;

	*msg = NULL;
	*used = 0;
	if (len < CTL_FRAME_HDR)
		return CTL_DEC_SHORT;
	n = get_be32(buf);
	if (limit > CTL_MAX_RESPONSE)
		limit = CTL_MAX_RESPONSE;
	if (n == 0 || n > limit) {
		snprintf(err, errlen, "frame length %u outside 1..%zu", n, limit);
		return CTL_DEC_TOOBIG;
	}
	if (len - CTL_FRAME_HDR < n)
		return CTL_DEC_SHORT;
	*used = CTL_FRAME_HDR + (size_t)n;

	j = json_loadb((const char *)buf + CTL_FRAME_HDR, n,
	    JSON_REJECT_DUPLICATES, &je);
	if (j == NULL) {
		snprintf(err, errlen, "malformed JSON at byte %d: %s",
		    je.position, je.text);
		return CTL_DEC_BADJSON;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		snprintf(err, errlen, "message is not a JSON object");
		return CTL_DEC_BADJSON;
	}
	*msg = j;
	return CTL_DEC_OK;
}

uint8_t *
ctl_frame_encode(const json_t *msg, size_t limit, size_t *len)
{
	uint8_t *out;
	size_t n;

	*len = 0;
	if (limit > CTL_MAX_RESPONSE)
		limit = CTL_MAX_RESPONSE;
	n = json_dumpb(msg, NULL, 0, CTL_DUMP_FLAGS);
	if (n == 0 || n > limit)
		return NULL;
	out = xmalloc(CTL_FRAME_HDR + n);
	if (json_dumpb(msg, (char *)out + CTL_FRAME_HDR, n, CTL_DUMP_FLAGS) != n) {
		free(out);
		return NULL;
	}
	put_be32(out, (uint32_t)n);
	*len = CTL_FRAME_HDR + n;
	return out;
}

static int
cmd_name_valid(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > CTL_MAX_CMD)
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '.' || c == '-' || c == '_'))
			return 0;
	}
	return 1;
}

enum ctl_err
ctl_request_parse(json_t *msg, struct ctl_request *req, char *err,
    size_t errlen)
{
	json_t *v, *id, *cmd, *args;

	memset(req, 0, sizeof(*req));
	id = json_object_get(msg, "id");
	if (id != NULL && !json_is_null(id)) {
		if (!json_is_integer(id)) {
			snprintf(err, errlen, "\"id\" must be an integer");
			return CTL_E_PROTOCOL;
		}
		req->has_id = 1;
		req->id = json_integer_value(id);
	}

	v = json_object_get(msg, "v");
	if (v == NULL || !json_is_integer(v) ||
	    json_integer_value(v) != CTL_PROTO_VERSION) {
		snprintf(err, errlen, "unsupported protocol version; this daemon "
		    "speaks version %d", CTL_PROTO_VERSION);
		return CTL_E_VERSION;
	}

	cmd = json_object_get(msg, "cmd");
	if (cmd == NULL || !json_is_string(cmd)) {
		snprintf(err, errlen, "missing \"cmd\" string");
		return CTL_E_PROTOCOL;
	}
	if (!cmd_name_valid(json_string_value(cmd))) {
		snprintf(err, errlen, "invalid command name");
		return CTL_E_PROTOCOL;
	}
	req->cmd = json_string_value(cmd);

	args = json_object_get(msg, "args");
	if (args == NULL || json_is_null(args)) {
		args = json_object();
		if (args == NULL || json_object_set_new(msg, "args", args) != 0) {
			snprintf(err, errlen, "out of memory");
			return CTL_E_INTERNAL;
		}
	} else if (!json_is_object(args)) {
		snprintf(err, errlen, "\"args\" must be an object");
		return CTL_E_PROTOCOL;
	}
	req->args = args;
	return CTL_OK;
}

static json_t *
msg_head(int has_id, json_int_t id)
{
	json_t *m;

	m = json_object();
	if (m == NULL)
		return NULL;
	json_object_set_new(m, "v", json_integer(CTL_PROTO_VERSION));
	json_object_set_new(m, "id", has_id ? json_integer(id) : json_null());
	return m;
}

json_t *
ctl_request_new(json_int_t id, const char *cmd, json_t *args)
{
	json_t *m;

	m = msg_head(1, id);
	if (m == NULL) {
		json_decref(args);
		return NULL;
	}
	json_object_set_new(m, "cmd", json_string(cmd));
	json_object_set_new(m, "args", args != NULL ? args : json_object());
	return m;
}

json_t *
ctl_response_ok(int has_id, json_int_t id, json_t *result)
{
	json_t *m;

	m = msg_head(has_id, id);
	if (m == NULL) {
		json_decref(result);
		return NULL;
	}
	json_object_set_new(m, "ok", json_true());
	json_object_set_new(m, "result", result != NULL ? result : json_object());
	return m;
}

json_t *
ctl_response_error(int has_id, json_int_t id, enum ctl_err code,
    const char *message)
{
	return ctl_response_error_details(has_id, id, code, message, NULL);
}

json_t *
ctl_response_error_details(int has_id, json_int_t id, enum ctl_err code,
    const char *message, json_t *details)
{
	json_t *m, *e;

	m = msg_head(has_id, id);
	if (m == NULL) {
		json_decref(details);
		return NULL;
	}
	json_object_set_new(m, "ok", json_false());
	e = json_object();
	json_object_set_new(e, "code", json_string(ctl_err_name(code)));
	/* A handler's message may carry device bytes: never drop the reply. */
	if (json_object_set_new(e, "message",
	    json_string(message != NULL ? message : "")) != 0)
		json_object_set_new(e, "message",
		    json_string("(message not valid UTF-8)"));
	if (details != NULL)
		json_object_set_new(e, "details", details);
	json_object_set_new(m, "error", e);
	return m;
}

json_t *
ctl_event_msg(const char *type, double time, json_t *data)
{
	json_t *m;

	m = json_object();
	if (m == NULL) {
		json_decref(data);
		return NULL;
	}
	json_object_set_new(m, "v", json_integer(CTL_PROTO_VERSION));
	json_object_set_new(m, "event", json_string(type));
	json_object_set_new(m, "time", json_real(time));
	json_object_set_new(m, "data", data != NULL ? data : json_object());
	return m;
}

int
ctl_err_parse(const char *s)
{
	int i;

	for (i = 0; i < CTL_E_NERR; i++)
		if (strcmp(s, ctl_err_name((enum ctl_err)i)) == 0)
			return i;
	return -1;
}

enum ctl_err
ctl_reply_parse(json_t *msg, struct ctl_reply *rep, char *err, size_t errlen)
{
	json_t *v, *j, *e;
	int code;

	memset(rep, 0, sizeof(*rep));
	v = json_object_get(msg, "v");
	if (v == NULL || !json_is_integer(v) ||
	    json_integer_value(v) != CTL_PROTO_VERSION) {
		snprintf(err, errlen, "daemon speaks another protocol version "
		    "(this usbgw speaks version %d)", CTL_PROTO_VERSION);
		return CTL_E_VERSION;
	}

	if ((j = json_object_get(msg, "event")) != NULL) {
		if (!json_is_string(j)) {
			snprintf(err, errlen, "\"event\" must be a string");
			return CTL_E_PROTOCOL;
		}
		rep->is_event = 1;
		rep->event = json_string_value(j);
		j = json_object_get(msg, "time");
		rep->time = json_is_number(j) ? json_number_value(j) : 0;
		j = json_object_get(msg, "data");
		if (j == NULL || json_is_null(j)) {
			json_object_set_new(msg, "data", json_object());
			j = json_object_get(msg, "data");
		}
		if (j == NULL) {
			snprintf(err, errlen, "out of memory");
			return CTL_E_INTERNAL;
		}
		rep->data = j;
		return CTL_OK;
	}

	j = json_object_get(msg, "id");
	if (j != NULL && json_is_integer(j)) {
		rep->has_id = 1;
		rep->id = json_integer_value(j);
	} else if (j != NULL && !json_is_null(j)) {
		snprintf(err, errlen, "\"id\" must be an integer or null");
		return CTL_E_PROTOCOL;
	}
	j = json_object_get(msg, "ok");
	if (!json_is_boolean(j)) {
		snprintf(err, errlen, "missing \"ok\" boolean");
		return CTL_E_PROTOCOL;
	}
	rep->ok = json_is_true(j);
	if (rep->ok) {
		j = json_object_get(msg, "result");
		if (j == NULL || json_is_null(j)) {
			json_object_set_new(msg, "result", json_object());
			j = json_object_get(msg, "result");
		}
		if (j == NULL) {
			snprintf(err, errlen, "out of memory");
			return CTL_E_INTERNAL;
		}
		rep->result = j;
		return CTL_OK;
	}
	e = json_object_get(msg, "error");
	if (!json_is_object(e) ||
	    !json_is_string(json_object_get(e, "code"))) {
		snprintf(err, errlen, "error reply without a code");
		return CTL_E_PROTOCOL;
	}
	rep->code_name = json_string_value(json_object_get(e, "code"));
	code = ctl_err_parse(rep->code_name);
	rep->code = code < 0 || code == CTL_OK ? CTL_E_INTERNAL :
	    (enum ctl_err)code;
	j = json_object_get(e, "message");
	rep->message = json_is_string(j) ? json_string_value(j) : "";
	j = json_object_get(e, "details");
	rep->details = json_is_array(j) ? j : NULL;
	return CTL_OK;
}
