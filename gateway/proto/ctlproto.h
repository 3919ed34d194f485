/*
 * The control protocol's messages, as bytes: framing, request and response
 * encoding and decoding.  Pure functions (no I/O, no globals), shared by
 * the daemon's control socket (control.c), the usbgw CLI and the fuzzer.
 * protocol.md part 2 is the reference.
 *
 * A frame is a 4-byte big-endian length N (1 <= N <= limit) followed by N
 * bytes of UTF-8 JSON text holding exactly one object.
 */
#ifndef USBGW_CTLPROTO_H
#define USBGW_CTLPROTO_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "proto/ctl.h"

#define CTL_PROTO_VERSION	1
#define CTL_FRAME_HDR		4
#define CTL_MAX_REQUEST		(64 * 1024)		/* default request limit */
/*
 * Any frame, hard limit.  The largest reply is `list`: about 600 bytes a
 * device as usbgw-sim's look (5.8 MB for 10,000), up to some 16 KiB for
 * one whose every string and approval is at its longest; 64 MiB holds
 * 10,000 devices at 6.7 KiB each.  Bounded so that a client's buffer is;
 * a longer reply is a `limit` error (ask for less: --state, --exporter).
 */
#define CTL_MAX_RESPONSE	(64 * 1024 * 1024)
#define CTL_MAX_RESPONSE_TEXT	"64 MiB"
#define CTL_MAX_CMD		64			/* bytes in a "cmd" */

enum ctl_dec {
	CTL_DEC_OK = 0,		/* *msg holds an object, *used bytes consumed */
	CTL_DEC_SHORT,		/* need more bytes */
	CTL_DEC_TOOBIG,		/* length over limit (or 0): fatal for the stream */
	CTL_DEC_BADJSON,	/* frame skipped (*used set); not a JSON object */
};

/*
 * Decode the first frame in buf[0..len).  On CTL_DEC_OK *msg is a new
 * reference to a JSON object.  On CTL_DEC_BADJSON the frame is consumed
 * (*used) so the stream stays in step; err says why.
 */
enum ctl_dec	 ctl_frame_decode(const uint8_t *buf, size_t len, size_t limit,
		    json_t **msg, size_t *used, char *err, size_t errlen);

/*
 * Encode msg as one frame into a malloc'd buffer; NULL if it would exceed
 * limit (or on encoding failure).  Object keys keep insertion order.
 */
uint8_t		*ctl_frame_encode(const json_t *msg, size_t limit, size_t *len);

/* A request, decoded.  Pointers borrow from the message. */
struct ctl_request {
	int		 has_id;
	json_int_t	 id;
	const char	*cmd;
	json_t		*args;		/* an object, never NULL */
};

/*
 * Check a decoded message is a version-1 request: {"v":1,"id":N,"cmd":S,
 * "args":{...}} ("id" and "args" optional).  Returns CTL_OK, or
 * CTL_E_VERSION (v missing or other than 1) or CTL_E_PROTOCOL with err
 * set.  req->has_id/id are set as soon as "id" is readable, so an error
 * reply can echo it.
 */
enum ctl_err	 ctl_request_parse(json_t *msg, struct ctl_request *req,
		    char *err, size_t errlen);

/* Build messages (new references; result is stolen, NULL means {}). */
json_t		*ctl_request_new(json_int_t id, const char *cmd, json_t *args);
json_t		*ctl_response_ok(int has_id, json_int_t id, json_t *result);
json_t		*ctl_response_error(int has_id, json_int_t id, enum ctl_err,
		    const char *message);
/* An error with details: an array of strings, one a line (stolen). */
json_t		*ctl_response_error_details(int has_id, json_int_t id,
		    enum ctl_err, const char *message, json_t *details);
json_t		*ctl_event_msg(const char *type, double time, json_t *data);

/* A daemon-to-client message, decoded (client side).  Borrowed pointers. */
struct ctl_reply {
	int		 is_event;
	/* response */
	int		 has_id;
	json_int_t	 id;
	int		 ok;
	json_t		*result;	/* ok: never NULL */
	enum ctl_err	 code;		/* !ok */
	const char	*code_name;	/* !ok, as sent (may be unknown to us) */
	const char	*message;	/* !ok, "" if none */
	json_t		*details;	/* !ok: an array, or NULL */
	/* event */
	const char	*event;
	double		 time;
	json_t		*data;		/* never NULL for an event */
};
enum ctl_err	 ctl_reply_parse(json_t *msg, struct ctl_reply *rep,
		    char *err, size_t errlen);

/* Error code names <-> enum ("not_found" ...); -1 if unknown. */
int		 ctl_err_parse(const char *);

#endif
