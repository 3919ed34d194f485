/*
 * followproto: the codec of usbgw-attach's follow subscription
 * (protocol.md 1.10.8).  Layer 0, beside usbip.c and agentproto.c, under
 * the same rules: bytes until decoded, every field read big-endian at an
 * explicit offset after a length check, decoders incremental
 * (FLP_NEED_MORE for a proper prefix of a valid PDU, the PDU's length
 * once complete, FLP_MALFORMED with a static reason as soon as the
 * offending field has arrived), every bound a named constant below.
 *
 * A vhci host opens a connection to a gateway's USB/IP listener (plain or
 * TLS) and sends the hello OP_REQ_FOLLOW; the gateway answers
 * OP_REP_FOLLOW and then pushes messages, framed as the agent's control
 * messages (1.9.4):
 *	u32 length (8..FLP_MSG_LEN_MAX, the bytes after it) | u16 type
 *	| u16 flags (0) | u32 seq | body
 * The only message a host sends is PONG.
 */
#ifndef USBGW_FOLLOWPROTO_H
#define USBGW_FOLLOWPROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/usbip.h"

#define OP_REQ_FOLLOW		0x8068
#define OP_REP_FOLLOW		0x0068

#define FLP_EXT_VERSION		1
#define FLP_KIND_SUBSCRIBE	1

#define FLP_HOST_SIZE		64	/* [A-Za-z0-9._:-]{1,63}, NUL-padded */
/* The hello: op header | u16 ext_version | u16 kind | u32 len | body. */
#define FLP_HELLO_HDR_LEN	(USBIP_OP_HDR_LEN + 8)		/* 16 */
#define FLP_HELLO_MAX_BODY	1024	/* another version's, skipped */
#define FLP_REQ_BODY		4	/* u32 caps */
#define FLP_REP_BODY		(2 + FLP_HOST_SIZE)	/* heartbeat, host */
#define FLP_HELLO_MAX		(FLP_HELLO_HDR_LEN + FLP_HELLO_MAX_BODY)
#define FLP_HEARTBEAT_MIN_S	1
#define FLP_HEARTBEAT_MAX_S	3600

/* Messages. */
#define FLP_MSG_LEN_MIN		8		/* type, flags, seq */
#define FLP_MSG_LEN_MAX		64
#define FLP_MSG_MAX		(4 + FLP_MSG_LEN_MAX)
/* Devices one subscription announces at most (a snapshot's count). */
#define FLP_MAX_DEVICES		1024

enum flp_type {
	FLP_LIST_BEGIN = 1,	/* gateway: u32 count */
	FLP_LIST_END,		/* gateway: nothing */
	FLP_AUTHORIZED,		/* gateway: busid[32] */
	FLP_WITHDRAWN,		/* gateway: busid[32] | u32 reason */
	FLP_PING,		/* gateway: u64 echo */
	FLP_PONG,		/* host: u64 echo (PING's) */
	FLP_TYPE_MAX = FLP_PONG,
};

/* Why a busid was withdrawn (for the log; the host acts the same). */
enum flp_reason {
	FLP_WHY_NOT_AUTHORIZED = 1,	/* revoked, denied, another host's */
	FLP_WHY_GONE,			/* left its exporter */
	FLP_WHY_MAX = FLP_WHY_GONE,
};

enum flp_from {
	FLP_FROM_GATEWAY,
	FLP_FROM_HOST,
};

#define FLP_NEED_MORE		0
#define FLP_MALFORMED		(-1)

struct flp_hello {
	uint16_t	code;		/* OP_REQ_FOLLOW / OP_REP_FOLLOW */
	uint32_t	status;		/* ST_OK or ST_NA in a reply */
	uint16_t	ext_version;
	uint16_t	kind;
	uint32_t	len;		/* body bytes */
	uint32_t	caps;		/* request */
	uint16_t	heartbeat_s;	/* ST_OK reply */
	char		host[FLP_HOST_SIZE];	/* ST_OK reply */
};

struct flp_msg {
	uint16_t	type;
	uint32_t	seq;
	uint32_t	count;		/* LIST_BEGIN */
	char		busid[USBIP_BUSID_SIZE];	/* AUTHORIZED, WITHDRAWN */
	uint32_t	reason;		/* WITHDRAWN */
	uint64_t	echo;		/* PING, PONG */
};

const char	*flp_type_name(uint16_t type);
const char	*flp_reason_name(uint32_t reason);
/* [A-Za-z0-9._:-]{1,63}: how the gateway names the host in its reply. */
bool		 flp_host_valid(const char *);
/* Do 4 bytes show version 0x0111 and OP_REQ_FOLLOW? */
bool		 flp_is_hello(const uint8_t *buf, size_t len);

/*
 * Decode a hello travelling in flow (USBIP_FROM_CLIENT: the host's
 * request).  A hello of another ext_version is returned whole (body
 * skipped) with only its header fields set, for the receiver to refuse.
 */
int		 flp_hello_decode(const uint8_t *buf, size_t len,
		    enum usbip_flow flow, struct flp_hello *, const char **why);
/* Encoders into out[FLP_HELLO_MAX]. */
size_t		 flp_req_encode(uint8_t *out, uint32_t caps);
size_t		 flp_rep_encode(uint8_t *out, uint32_t status,
		    uint16_t heartbeat_s, const char *host);

/*
 * Decode one message sent by `from`: length 8..FLP_MSG_LEN_MAX, a known
 * type that `from` may send, flags 0, the body's length for its type, a
 * busid that passes usbip_busid_valid() and is NUL-padded, a count up to
 * FLP_MAX_DEVICES, a known reason.  The sequence is the caller's to check.
 */
int		 flp_msg_decode(const uint8_t *buf, size_t len,
		    enum flp_from from, struct flp_msg *, const char **why);
/* Encode into out[FLP_MSG_MAX]. */
size_t		 flp_msg_encode(uint8_t *out, const struct flp_msg *);

#endif
