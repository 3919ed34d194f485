/*
 * The USB/IP codec: the one place where USB/IP bytes become values and
 * values become bytes.  Used by usbgwd, usbgw-sim, the test client and
 * the fuzzers.  See protocol.md, part 1.
 *
 * Rules this module keeps:
 *  - wire data is bytes until decoded: every field is read big-endian at
 *    an explicit offset after a length check; nothing is memcpy'd from
 *    the wire into a struct, and nothing is read past the length given;
 *  - decoders are incremental: they return USBIP_NEED_MORE for a prefix
 *    of a valid PDU, the PDU's length when it is complete, and
 *    USBIP_MALFORMED with a reason (a static string) otherwise;
 *  - every limit is a named constant below.
 */
#ifndef USBGW_USBIP_H
#define USBGW_USBIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define USBIP_VERSION		0x0111
#define USBIP_PORT		3240

/* Op phase codes (OP_* in the kernel documentation). */
#define OP_REQ_DEVLIST		0x8005
#define OP_REP_DEVLIST		0x0005
#define OP_REQ_IMPORT		0x8003
#define OP_REP_IMPORT		0x0003

/* Op phase status codes. */
#define ST_OK			0
#define ST_NA			1
#define ST_DEV_BUSY		2
#define ST_DEV_ERR		3
#define ST_NODEV		4
#define ST_ERROR		5
#define ST_MAX			ST_ERROR

/* URB phase commands. */
#define USBIP_CMD_SUBMIT	1
#define USBIP_CMD_UNLINK	2
#define USBIP_RET_SUBMIT	3
#define USBIP_RET_UNLINK	4

#define USBIP_DIR_OUT		0
#define USBIP_DIR_IN		1

/* Sizes on the wire. */
#define USBIP_OP_HDR_LEN	8
#define USBIP_BUSID_SIZE	32
#define USBIP_PATH_SIZE		256
#define USBIP_DEV_LEN		312
#define USBIP_INTF_LEN		4
#define USBIP_IMPORT_REQ_LEN	(USBIP_OP_HDR_LEN + USBIP_BUSID_SIZE)	/* 40 */
#define USBIP_IMPORT_REP_LEN	(USBIP_OP_HDR_LEN + USBIP_DEV_LEN)	/* 320 */
#define USBIP_URB_HDR_LEN	48
#define USBIP_ISO_DESC_LEN	16

/* Limits the codec enforces (protocol.md, "Limits"). */
#define USBIP_MAX_NDEV		1024		/* devices in one DEVLIST reply */
#define USBIP_MAX_INTERFACES	32		/* USB 2.0 9.6.3: at most 32 */
#define USBIP_MAX_ISO_PACKETS	1024		/* as the kernel's stub_rx.c */
#define USBIP_MAX_TRANSFER	(16u << 20)	/* bytes in one URB buffer */
#define USBIP_MAX_EP		15
#define USBIP_NP_NONE_WIN	0xffffffffu	/* usbip-win2's "not ISO" */
/* Largest URB PDU: header + data + ISO descriptors. */
#define USBIP_MAX_URB_PDU	(USBIP_URB_HDR_LEN + USBIP_MAX_TRANSFER + \
				 USBIP_MAX_ISO_PACKETS * USBIP_ISO_DESC_LEN)
#define USBIP_MAX_DEVLIST_REP	(USBIP_OP_HDR_LEN + 4 + USBIP_MAX_NDEV * \
				 (USBIP_DEV_LEN + 255 * USBIP_INTF_LEN))

/* Decoder results: >0 is the length of a complete PDU. */
#define USBIP_NEED_MORE		0
#define USBIP_MALFORMED		(-1)

/*
 * Direction of travel.  A PDU is legal only in one: requests go from the
 * importer (vhci side, "client") to the exporter ("server"), replies the
 * other way.  The gateway is a server downstream and a client upstream.
 */
enum usbip_flow {
	USBIP_FROM_CLIENT,	/* OP_REQ_*, CMD_SUBMIT, CMD_UNLINK */
	USBIP_FROM_SERVER,	/* OP_REP_*, RET_SUBMIT, RET_UNLINK */
};

/* USB speeds as usbip_device.speed carries them (enum usb_device_speed). */
enum usbip_speed {
	USBIP_SPEED_UNKNOWN = 0,
	USBIP_SPEED_LOW,
	USBIP_SPEED_FULL,
	USBIP_SPEED_HIGH,
	USBIP_SPEED_WIRELESS,
	USBIP_SPEED_SUPER,
	USBIP_SPEED_SUPER_PLUS,
};

struct usbip_op_hdr {
	uint16_t	version;
	uint16_t	code;
	uint32_t	status;
};

struct usbip_intf {
	uint8_t		bInterfaceClass;
	uint8_t		bInterfaceSubClass;
	uint8_t		bInterfaceProtocol;
};

/* One exported device (312 bytes on the wire); strings NUL-terminated. */
struct usbip_dev {
	char		path[USBIP_PATH_SIZE];
	char		busid[USBIP_BUSID_SIZE];
	uint32_t	busnum;
	uint32_t	devnum;
	uint32_t	speed;
	uint16_t	idVendor;
	uint16_t	idProduct;
	uint16_t	bcdDevice;
	uint8_t		bDeviceClass;
	uint8_t		bDeviceSubClass;
	uint8_t		bDeviceProtocol;
	uint8_t		bConfigurationValue;
	uint8_t		bNumConfigurations;
	uint8_t		bNumInterfaces;
};

/* The 48-byte URB header, decoded. */
struct usbip_urb_hdr {
	uint32_t	command;
	uint32_t	seqnum;
	uint32_t	devid;
	uint32_t	direction;
	uint32_t	ep;
	union {
		struct {
			uint32_t transfer_flags;
			int32_t	 transfer_buffer_length;
			int32_t	 start_frame;
			int32_t	 number_of_packets;
			int32_t	 interval;
			uint8_t	 setup[8];
		} submit;
		struct {
			int32_t	 status;
			int32_t	 actual_length;
			int32_t	 start_frame;
			int32_t	 number_of_packets;
			int32_t	 error_count;
		} ret_submit;
		struct {
			uint32_t unlink_seqnum;
		} unlink;
		struct {
			int32_t	 status;
		} ret_unlink;
	} u;
};

struct usbip_iso_desc {
	uint32_t	offset;
	uint32_t	length;
	uint32_t	actual_length;
	int32_t		status;
};

/*
 * What a RET_SUBMIT needs to be parsed: the request it answers, which
 * the receiver remembers by seqnum (a reply carries no direction).
 */
struct usbip_req_info {
	uint32_t	direction;
	uint32_t	length;		/* transfer_buffer_length requested */
	uint32_t	npackets;	/* ISO packets requested, 0 if not ISO */
	bool		iso;
};

/*
 * Layout of a URB PDU after its header: data bytes, then ISO
 * descriptors.  total = USBIP_URB_HDR_LEN + data_len + iso_len.
 */
struct usbip_urb_layout {
	uint32_t	data_len;
	uint32_t	niso;
	uint32_t	iso_len;
	uint32_t	total;
};

/* Decoded URB PDU; data and iso point into the caller's buffer. */
struct usbip_urb {
	struct usbip_urb_hdr	hdr;
	struct usbip_urb_layout	lay;
	const uint8_t		*data;
	const uint8_t		*iso;		/* niso * 16 bytes */
};

/* ---- byte order ------------------------------------------------------ */
static inline uint16_t
get_be16(const uint8_t *p)
{
	return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}

static inline uint32_t
get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

static inline void
put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void
put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline uint64_t
get_be64(const uint8_t *p)
{
	return (uint64_t)get_be32(p) << 32 | get_be32(p + 4);
}

static inline void
put_be64(uint8_t *p, uint64_t v)
{
	put_be32(p, (uint32_t)(v >> 32));
	put_be32(p + 4, (uint32_t)v);
}

/*
 * Fixed-size NUL-padded strings of the extensions' PDUs (agentproto,
 * followproto): get_padded() wants a NUL inside the field and only NULs
 * after it (a sender that leaks stack bytes there is refused), 0 or -1;
 * out holds size bytes.  put_padded() writes at most size - 1 bytes of s
 * and pads with NULs.
 */
int		 get_padded(const uint8_t *p, size_t size, char *out);
void		 put_padded(uint8_t *p, size_t size, const char *s);

/* ---- names ----------------------------------------------------------- */
const char	*usbip_op_name(uint16_t code);
const char	*usbip_st_name(uint32_t status);
const char	*usbip_cmd_name(uint32_t command);
const char	*usbip_speed_name(uint32_t speed);

/*
 * Is busid acceptable (1..31 bytes of [A-Za-z0-9._:-])?  The stock
 * tools and sysfs both see it, so nothing else gets through.
 */
bool		 usbip_busid_valid(const char *busid);

/* ---- op phase -------------------------------------------------------- */

/*
 * Decode one op-phase PDU travelling in `flow` from buf[0..len).
 * Returns the PDU's length when complete, USBIP_NEED_MORE, or
 * USBIP_MALFORMED with *why set.  On success *hdr is filled; for
 * OP_REP_DEVLIST *ndev is the device count (the records are then read
 * with usbip_devlist_next()); for OP_REQ_IMPORT busid is filled; for an
 * OP_REP_IMPORT with ST_OK, *dev is filled.  Pointers not needed for
 * the PDU's kind may be NULL.
 */
struct usbip_op {
	struct usbip_op_hdr	hdr;
	uint32_t		ndev;			/* OP_REP_DEVLIST */
	char			busid[USBIP_BUSID_SIZE];/* OP_REQ_IMPORT */
	struct usbip_dev	dev;			/* OP_REP_IMPORT, ST_OK */
};
int	usbip_op_decode(const uint8_t *buf, size_t len, enum usbip_flow flow,
	    struct usbip_op *op, const char **why);

/*
 * Iterate the device records of a complete OP_REP_DEVLIST (already
 * accepted by usbip_op_decode()).  *off starts at 0.  Fills dev and up to
 * USBIP_MAX_INTERFACES interfaces; returns 1 with a device, 0 at the end.
 */
int	usbip_devlist_next(const uint8_t *buf, size_t len, size_t *off,
	    struct usbip_dev *dev, struct usbip_intf *intf);

/* Encoders.  Each returns the bytes written (buffer sizes as named). */
size_t	usbip_op_hdr_encode(uint8_t out[USBIP_OP_HDR_LEN], uint16_t code,
	    uint32_t status);
size_t	usbip_import_req_encode(uint8_t out[USBIP_IMPORT_REQ_LEN],
	    const char *busid);
size_t	usbip_dev_encode(uint8_t out[USBIP_DEV_LEN], const struct usbip_dev *);
size_t	usbip_intf_encode(uint8_t out[USBIP_INTF_LEN], const struct usbip_intf *);
/* Import reply: 8 bytes if status != ST_OK, else 320 (dev required). */
size_t	usbip_import_rep_encode(uint8_t out[USBIP_IMPORT_REP_LEN],
	    uint32_t status, const struct usbip_dev *dev);
/* Devlist reply header + ndev; records follow via usbip_dev/intf_encode. */
size_t	usbip_devlist_rep_hdr_encode(uint8_t out[USBIP_OP_HDR_LEN + 4],
	    uint32_t ndev);

/* ---- URB phase ------------------------------------------------------- */

/*
 * Decode and check the 48-byte header of a URB PDU travelling in `flow`.
 * Returns USBIP_URB_HDR_LEN, USBIP_NEED_MORE or USBIP_MALFORMED.
 * Checks: command legal for the direction of travel; direction 0/1 and
 * ep 0..15 in CMD_SUBMIT; transfer_buffer_length 0..USBIP_MAX_TRANSFER;
 * number_of_packets 0, 0xffffffff or 1..USBIP_MAX_ISO_PACKETS;
 * RET_SUBMIT actual_length in 0..USBIP_MAX_TRANSFER; ISO error_count <=
 * number_of_packets.
 */
int	usbip_urb_hdr_decode(const uint8_t *buf, size_t len, enum usbip_flow flow,
	    struct usbip_urb_hdr *h, const char **why);

/*
 * Is this a ISO URB?  Without knowledge of the endpoint's type (the
 * kernel uses the pipe), a CMD_SUBMIT is ISO iff number_of_packets is in
 * 1..USBIP_MAX_ISO_PACKETS.
 */
bool	usbip_submit_is_iso(const struct usbip_urb_hdr *h);

/*
 * Compute the layout of the PDU whose header is h.  For RET_SUBMIT, req
 * is the request it answers (required); for CMD_SUBMIT, ep_iso says
 * whether the endpoint is isochronous (-1: unknown, use
 * usbip_submit_is_iso()).  Checks actual_length <= requested length,
 * ISO packet counts against the request, and non-ISO counts being 0 or
 * 0xffffffff.  Returns 0 or -1 with *why.
 */
int	usbip_urb_layout(const struct usbip_urb_hdr *h,
	    const struct usbip_req_info *req, int ep_iso,
	    struct usbip_urb_layout *lay, const char **why);

/*
 * Check the niso ISO descriptors at iso (niso * 16 bytes, already in
 * memory): each offset+length within the URB buffer (computed in 64
 * bits), actual_length <= length, and for RET_SUBMIT the actual lengths
 * summing to actual_length (the data is packed).  buflen is the
 * transfer_buffer_length of the request.  Returns 0 or -1 with *why.
 */
int	usbip_iso_check(const struct usbip_urb_hdr *h, const uint8_t *iso,
	    uint32_t niso, uint32_t buflen, const char **why);

void	usbip_iso_desc_decode(const uint8_t *p, struct usbip_iso_desc *d);
void	usbip_iso_desc_encode(uint8_t out[USBIP_ISO_DESC_LEN],
	    const struct usbip_iso_desc *d);

/*
 * Decode one whole URB PDU (header, layout, ISO check) from buf[0..len).
 * For RET_SUBMIT, lookup(arg, seqnum, &req) finds the request (returns
 * 0, or -1 for an unknown seqnum, which is malformed).  For CMD_SUBMIT,
 * ep_iso as above.  Returns the PDU length, USBIP_NEED_MORE or
 * USBIP_MALFORMED.
 */
typedef int (*usbip_req_lookup_fn)(void *arg, uint32_t seqnum,
	    struct usbip_req_info *req);
int	usbip_urb_decode(const uint8_t *buf, size_t len, enum usbip_flow flow,
	    usbip_req_lookup_fn lookup, void *arg, int ep_iso,
	    struct usbip_urb *u, const char **why);

/* Equal in every field the header's command carries. */
bool	usbip_urb_hdr_equal(const struct usbip_urb_hdr *,
	    const struct usbip_urb_hdr *);

/* Encode the 48-byte header (reserved/pad bytes zero). */
size_t	usbip_urb_hdr_encode(uint8_t out[USBIP_URB_HDR_LEN],
	    const struct usbip_urb_hdr *h);

/* The 8-byte setup packet of a control request (little-endian words). */
void	usbip_setup_encode(uint8_t out[8], uint8_t bmRequestType,
	    uint8_t bRequest, uint16_t wValue, uint16_t wIndex,
	    uint16_t wLength);
/* A CMD_SUBMIT on endpoint 0: direction and transfer_flags (URB_DIR_IN)
 * from bit 7 of bmRequestType, transfer_buffer_length wLength. */
void	usbip_control_submit(struct usbip_urb_hdr *h, uint32_t seqnum,
	    uint32_t devid, uint8_t bmRequestType, uint8_t bRequest,
	    uint16_t wValue, uint16_t wIndex, uint16_t wLength);

#endif
