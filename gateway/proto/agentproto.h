/*
 * agentproto: the codec of usbgw's USB/IP extension between the gateway
 * and usbgw-agent (protocol.md 1.9.4).  Layer 0, beside usbip.c, under
 * the same rules: wire data is bytes until decoded, every field read
 * big-endian at an explicit offset after a length check, decoders
 * incremental (AGP_NEED_MORE for a proper prefix of a valid PDU, the
 * PDU's length once complete, AGP_MALFORMED with a static reason as
 * soon as the offending field has arrived), every bound a named
 * constant below.
 *
 * Two kinds of PDU:
 *  - the hello, an op-phase exchange: OP_REQ_USBGW (the side that opened
 *    the TCP connection) and OP_REP_USBGW, kinds CONTROL and DIALBACK;
 *  - after a CONTROL's ST_OK, framed messages both ways:
 *	u32 length (8..4096, the bytes after it) | u16 type | u16 flags (0)
 *	| u32 seq | body
 */
#ifndef USBGW_AGENTPROTO_H
#define USBGW_AGENTPROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/usbip.h"

#define OP_REQ_USBGW		0x8067
#define OP_REP_USBGW		0x0067

#define AGP_EXT_VERSION		1
#define AGP_KIND_CONTROL	1
#define AGP_KIND_DIALBACK	2

#define AGP_NAME_SIZE		32	/* [A-Za-z0-9._-]{1,31}, NUL-padded */
#define AGP_NONCE_LEN		16
#define AGP_TOKEN_LEN		16

/* The hello: op header | u16 ext_version | u16 kind | u32 len | body. */
#define AGP_HELLO_HDR_LEN	(USBIP_OP_HDR_LEN + 8)		/* 16 */
#define AGP_HELLO_MAX_BODY	1024
#define AGP_CONTROL_REQ_BODY	(AGP_NAME_SIZE + 4 + AGP_NONCE_LEN)	/* 52 */
#define AGP_CONTROL_REP_BODY	(AGP_NAME_SIZE + 4 + 2)		/* 38 */
#define AGP_DIALBACK_REQ_BODY	(AGP_TOKEN_LEN + USBIP_BUSID_SIZE)	/* 48 */
#define AGP_HELLO_MAX		(AGP_HELLO_HDR_LEN + AGP_HELLO_MAX_BODY)
#define AGP_HEARTBEAT_MIN_S	1
#define AGP_HEARTBEAT_MAX_S	3600

/* Messages. */
#define AGP_MSG_LEN_MIN		8		/* type, flags, seq */
#define AGP_MSG_LEN_MAX		4096
#define AGP_MSG_HDR_LEN		12		/* with the length word */
#define AGP_MSG_MAX		(4 + AGP_MSG_LEN_MAX)

enum agp_type {
	AGP_SNAPSHOT_BEGIN = 1,
	AGP_SNAPSHOT_END,
	AGP_DEV_ADDED,
	AGP_DEV_REMOVED,
	AGP_OPEN_IMPORT,
	AGP_OPEN_FAILED,
	AGP_PING,
	AGP_PONG,
	AGP_BYE,
	AGP_TYPE_MAX = AGP_BYE,
};

/* Who sent a message: each type has one legal sender (PING/PONG/BYE both). */
enum agp_from {
	AGP_FROM_AGENT,
	AGP_FROM_GATEWAY,
};

/* Decoder results: >0 is the length of a complete PDU. */
#define AGP_NEED_MORE		0
#define AGP_MALFORMED		(-1)

/*
 * A hello, decoded.  Which fields are filled depends on kind, direction
 * and status (a refusal, status != ST_OK, has an empty body).  A hello
 * whose ext_version is not AGP_EXT_VERSION is returned whole (its body
 * skipped, at most AGP_HELLO_MAX_BODY) with only the header fields set:
 * the receiver answers ST_NA with its own version.
 */
struct agp_hello {
	uint16_t	code;		/* OP_REQ_USBGW / OP_REP_USBGW */
	uint32_t	status;		/* ST_OK or ST_NA in a reply */
	uint16_t	ext_version;
	uint16_t	kind;
	uint32_t	len;		/* body bytes */
	/* CONTROL */
	char		name[AGP_NAME_SIZE];
	uint32_t	caps;
	uint8_t		nonce[AGP_NONCE_LEN];	/* request */
	uint16_t	heartbeat_s;		/* reply */
	/* DIALBACK request */
	uint8_t		token[AGP_TOKEN_LEN];
	char		busid[USBIP_BUSID_SIZE];
};

/* One message, decoded; fields by type. */
struct agp_msg {
	uint16_t	type;
	uint32_t	seq;
	uint32_t	count;		/* SNAPSHOT_BEGIN */
	struct usbip_dev dev;		/* DEV_ADDED */
	struct usbip_intf intf[USBIP_MAX_INTERFACES];
	char		busid[USBIP_BUSID_SIZE]; /* DEV_REMOVED, OPEN_IMPORT */
	uint8_t		token[AGP_TOKEN_LEN];	/* OPEN_IMPORT, OPEN_FAILED */
	uint32_t	status;		/* OPEN_FAILED: a USB/IP ST_* */
	uint64_t	echo;		/* PING, PONG */
	uint32_t	reason;		/* BYE */
};

const char	*agp_kind_name(uint16_t kind);
const char	*agp_type_name(uint16_t type);
/* [A-Za-z0-9._-]{1,31}: an agent's (or gateway's) name in a CONTROL. */
bool		 agp_name_valid(const char *);

/*
 * Is this the start of a hello?  True once 4 bytes show version 0x0111
 * and code OP_REQ_USBGW (req) or OP_REP_USBGW (!req): how a USB/IP
 * listener tells an extension connection from a stock op request.
 */
bool		 agp_is_hello(const uint8_t *buf, size_t len, bool req);

/*
 * Decode a hello travelling in flow (USBIP_FROM_CLIENT: the request, from
 * the side that opened the connection).  Returns its length,
 * AGP_NEED_MORE or AGP_MALFORMED with *why.
 */
int		 agp_hello_decode(const uint8_t *buf, size_t len,
		    enum usbip_flow flow, struct agp_hello *, const char **why);

/* Encoders: the bytes written into out[AGP_HELLO_MAX]. */
size_t		 agp_control_req_encode(uint8_t *out, const char *name,
		    uint32_t caps, const uint8_t nonce[AGP_NONCE_LEN]);
size_t		 agp_control_rep_encode(uint8_t *out, uint32_t status,
		    const char *name, uint32_t caps, uint16_t heartbeat_s);
size_t		 agp_dialback_req_encode(uint8_t *out,
		    const uint8_t token[AGP_TOKEN_LEN], const char *busid);
/* A reply with an empty body: a DIALBACK's, or any refusal (ST_NA). */
size_t		 agp_empty_rep_encode(uint8_t *out, uint32_t status,
		    uint16_t kind);

/*
 * Decode one message sent by `from` from buf[0..len).  Checks: length
 * 8..4096, a known type that `from` may send, flags 0, the body's
 * length for the type, and every body field (a busid passing
 * usbip_busid_valid(), a device record the usbip codec accepts with
 * exactly its bNumInterfaces interface records, a snapshot count up to
 * USBIP_MAX_NDEV, an OPEN_FAILED status 1..ST_MAX).  The sequence
 * number is the connection's to check.
 */
int		 agp_msg_decode(const uint8_t *buf, size_t len,
		    enum agp_from from, struct agp_msg *, const char **why);

/* Encoders: the bytes written into out[AGP_MSG_MAX]. */
size_t		 agp_msg_encode(uint8_t *out, const struct agp_msg *);
/* Convenience for DEV_ADDED (intf: dev->bNumInterfaces entries). */
size_t		 agp_dev_added_encode(uint8_t *out, uint32_t seq,
		    const struct usbip_dev *, const struct usbip_intf *);

#endif
