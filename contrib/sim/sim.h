/*
 * usbgw-sim: a USB/IP exporter of emulated devices, behaving like the
 * kernel's usbip-host behind usbipd.  See contrib/sim/README.md.
 *
 * Objects:
 *  - sim_spec: what the config file or a `plug` command says about one
 *    device (identity and options); comparable, so a reload can tell
 *    what changed;
 *  - sim_dev: an exported device built from a spec: descriptors,
 *    endpoints and their runtime state; owned by at most one connection;
 *  - sim_exp: an exporter (one usbipd): its devices and its expsrv, the
 *    engine (gateway/proto/expsrv.c) that serves its connections; conn.c is
 *    the simulator's back end to it, device.c the devices behind that;
 *  - sim_qurb: a URB (struct expsrv_urb) waiting on an endpoint.
 */
#ifndef USBGW_SIM_H
#define USBGW_SIM_H

#include <sys/queue.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <event2/event.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "proto/expsrv.h"
#include "proto/usbip.h"

/* Limits (named, documented in usbgw-sim.1 and README.md). */
#define SIM_MAX_DEVICES		256
#define SIM_MAX_CONNS		64		/* default for -m */
#define SIM_MAX_CONNS_LIMIT	4096
#define SIM_MAX_URBS		1024		/* in flight per connection */
#define SIM_MAX_URBS_LIMIT	65536
/* Per connection: the engine's (expsrv_limits_default()), but -u. */
#define SIM_FIFO_DEFAULT	(4u << 20)
#define SIM_FIFO_MIN		64
#define SIM_FIFO_MAX		(64u << 20)
#define SIM_ISO_FIFO		(64u << 10)
#define SIM_MAX_KEYS		1024		/* characters in a key script */
#define SIM_MAX_STRING		126		/* UTF-16 units in a string */
#define SIM_MAX_INTF		4
#define SIM_MAX_CTL		16		/* control clients */
#define SIM_CTL_LINE		4096
#define SIM_MAX_ERRORS		20		/* config errors reported */
#define SIM_MAX_LISTEN		8
#define SIM_INJECT_MAX		1024		/* bytes of `inject raw` */
#define SIM_MAX_LIST_INTF	USBIP_MAX_INTERFACES	/* list-interfaces */
#define SIM_MAX_EXPORTERS	10000		/* all `exporters` statements */
#define SIM_MAX_EXPGROUPS	16		/* `exporters` statements */
#define SIM_MAX_EXPDEVS		200000		/* devices of all exporters */
#define SIM_EXP_PREFIX_MAX	16		/* name-prefix, bytes */

enum sim_type {
	SIM_KEYBOARD,
	SIM_STORAGE,
	SIM_COMPOSITE,
	SIM_AUDIO,
	SIM_SOURCESINK,
};

enum sim_pattern {
	SIM_PATTERN_MOD63,	/* byte i: (i % wMaxPacketSize) % 63, as g_zero */
	SIM_PATTERN_ZERO,
};

struct sim_spec {
	char		 busid[USBIP_BUSID_SIZE];
	enum sim_type	 type;
	bool		 has_type;
	uint16_t	 vendor;
	uint16_t	 product;
	uint16_t	 bcd_device;
	uint32_t	 speed;		/* enum usbip_speed */
	uint32_t	 devnum;	/* 0: assigned */
	char		*manufacturer;	/* NULL: no string */
	char		*product_name;
	char		*serial;
	char		*keys;		/* key script, NUL-terminated */
	uint32_t	 interval_ms;	/* between two HID reports */
	bool		 repeat;	/* restart the key script at its end */
	uint32_t	 fifo_size;	/* loopback FIFO bound */
	enum sim_pattern pattern;
	/*
	 * Lies (for testing an importer): what the device's OP_REP_DEVLIST
	 * entry and OP_REP_IMPORT reply claim instead of the truth.  The
	 * descriptors the device answers with do not change.
	 */
	uint8_t		 list_nintf;	/* list-interfaces */
	struct usbip_intf list_intf[SIM_MAX_LIST_INTF];
	uint16_t	 list_vendor;	/* list-id */
	uint16_t	 list_product;
	uint8_t		 import_config;	/* import-config */
	/*
	 * Two faces (for testing the relay's descriptor checks): after
	 * disguise-after descriptor reads in one import (0: only after
	 * `inject BUSID disguise`), the device answers descriptor reads
	 * as the disguise says, while its behaviour stays the same.
	 */
	uint8_t		 nconfigs;	/* configs: bNumConfigurations */
	enum sim_type	 disguise_type;
	uint16_t	 disguise_bcd;
	char		*disguise_serial;
	uint32_t	 disguise_after;
	bool		 disguise_bos;
	bool		 disguise_other;
	int		 line;		/* where it was defined, 0: not a file */
	unsigned	 set;		/* SPEC_* given explicitly */
};
#define SPEC_VENDOR	0x001
#define SPEC_PRODUCT	0x002
#define SPEC_BCD	0x004
#define SPEC_SPEED	0x008
#define SPEC_MANUF	0x010
#define SPEC_PRODNAME	0x020
#define SPEC_SERIAL	0x040
#define SPEC_KEYS	0x080
#define SPEC_INTERVAL	0x100
#define SPEC_FIFO	0x200
#define SPEC_PATTERN	0x400
#define SPEC_REPEAT	0x800
#define SPEC_LIST_INTF	0x1000
#define SPEC_LIST_ID	0x2000
#define SPEC_IMPORT_CFG	0x4000
#define SPEC_LIES	(SPEC_LIST_INTF | SPEC_LIST_ID | SPEC_IMPORT_CFG)
#define SPEC_DISGUISE	0x8000		/* any disguise-* key */
#define SPEC_DISGUISE_TYPE 0x10000
#define SPEC_DISGUISE_BCD 0x20000

/* What an endpoint does with URBs. */
enum sim_ep_kind {
	EPK_NONE = 0,
	EPK_HID_IN,		/* interrupt IN: key script reports */
	EPK_LOOP_IN,		/* bulk IN: mass-storage loopback FIFO */
	EPK_LOOP_OUT,		/* bulk OUT: into the loopback FIFO */
	EPK_SOURCE_IN,		/* bulk IN: pattern, at once */
	EPK_SINK_OUT,		/* bulk OUT: discarded */
	EPK_ISO_IN,		/* iso IN: from the ISO FIFO */
	EPK_ISO_OUT,		/* iso OUT: into the ISO FIFO */
};

/* A URB queued on an endpoint until the device has data or room. */
struct sim_qurb {
	TAILQ_ENTRY(sim_qurb) entry;
	struct sim_ep	*ep;
	struct expsrv_urb *u;		/* u->be points back here */
};
TAILQ_HEAD(sim_urbq, sim_qurb);

struct sim_ep {
	enum sim_ep_kind kind;
	uint8_t		 addr;		/* bEndpointAddress */
	uint8_t		 xfer;		/* USB_XFER_* */
	uint16_t	 maxp;
	uint8_t		 binterval;
	uint8_t		 intf;		/* interface it belongs to */
	uint8_t		 alt;		/* alternate setting it needs */
	bool		 halted;
	struct sim_urbq	 queue;		/* URBs waiting on this endpoint */
};

struct sim_exp;

/* A fault to put into the next reply (control `inject`). */
enum sim_inject {
	INJ_NONE,
	INJ_SEQNUM,	/* RET_SUBMIT for a seqnum never sent */
	INJ_COMMAND,	/* unknown command code */
	INJ_OVERFLOW,	/* actual_length > transfer_buffer_length (IN) */
	INJ_ISO,	/* ISO packet actual_length > its length */
};

struct sim_dev {
	TAILQ_ENTRY(sim_dev) entry;
	struct sim_exp	*exp;		/* the exporter that exports it */
	struct sim_spec	 spec;
	bool		 from_config;	/* reload may remove it */
	uint32_t	 busnum;
	uint32_t	 devnum;
	char		 path[USBIP_PATH_SIZE];
	struct expsrv_conn *owner;	/* importing connection or NULL */
	bool		 removed;	/* unplugged; freed at its release */

	/* Descriptors, built once from the spec. */
	uint8_t		 devdesc[18];
	uint8_t		*cfgdesc;
	size_t		 cfglen;
	uint8_t		 nintf;
	struct usbip_intf intf[SIM_MAX_INTF];
	uint8_t		 nalt[SIM_MAX_INTF];	/* alternate settings */
	int		 hid_intf;		/* -1: none */
	int		 msc_intf;
	struct sim_ep	 ep[2][16];		/* [USBIP_DIR_*][number] */
	/* The disguise's descriptors (spec.set & SPEC_DISGUISE). */
	uint8_t		 face_devdesc[18];
	uint8_t		*face_cfgdesc;
	size_t		 face_cfglen;

	/* Runtime state, reset at every import and release. */
	uint8_t		 config;
	uint8_t		 alt[SIM_MAX_INTF];
	struct evbuffer	*fifo;			/* bulk loopback */
	struct evbuffer	*isofifo;
	size_t		 key_report;		/* next report of the script */
	uint64_t	 next_report_us;
	struct event	*hid_timer;
	uint8_t		 hid_idle;
	uint8_t		 hid_protocol;
	uint8_t		 hid_leds;
	uint32_t	 frame;
	uint32_t	 desc_reads;		/* GET_DESCRIPTORs this import */
	bool		 disguised;		/* injected */
	enum sim_inject	 inject;		/* for the next reply */

	/* Counters since plugged. */
	uint64_t	 nimports;
	uint64_t	 nurbs;
	uint64_t	 bytes_out;
	uint64_t	 bytes_in;
};
TAILQ_HEAD(sim_devq, sim_dev);

/*
 * An exporter: what one usbipd would be, its own devices (busids,
 * devnums, imports) and connection count.  The main exporter has the
 * listeners of -l/listen and the devices of `device` blocks and `plug`;
 * each one an `exporters` statement makes has one listener of its own
 * and a generated device set.  A connection sees only its exporter.
 */
struct sim_exp {
	char		 name[USBIP_BUSID_SIZE];	/* "" for the main one */
	struct sim_devq	 devs;
	unsigned	 ndevs;
	struct expsrv	*srv;		/* its connections; made at the first */
	uint16_t	 port;
	struct evconnlistener *lev;	/* NULL for the main exporter */
};

/* Global settings and state (sim.c). */
struct sim {
	struct event_base *base;
	struct sim_exp	 main;		/* -l/listen, device blocks, plug */
	struct sim_exp	*exps;		/* made by `exporters` statements */
	size_t		 nexps;
	unsigned	 max_conns;
	unsigned	 max_urbs;
	bool		 legacy_status;
	FILE		*pdulog;
	const char	*conffile;
};
extern struct sim sim;

/*
 * `exporters N [base-port P] [devices-per-exporter K] [type T]
 * [name-prefix S] [address A]`: N exporters named S1..SN, listening on
 * A:P+i (or a kernel-chosen port each when P is 0), each exporting K
 * devices of type T.
 */
struct sim_expgroup {
	unsigned	 count;
	unsigned	 base_port;	/* 0: kernel-chosen */
	unsigned	 ndevs;
	enum sim_type	 type;
	char		 prefix[SIM_EXP_PREFIX_MAX + 1];
	char		 addr[64];
	int		 line;
};

/* conf.c: config file, plug arguments. */
struct sim_conf {
	struct sim_spec	*specs;
	size_t		 nspecs;
	struct sim_expgroup groups[SIM_MAX_EXPGROUPS];
	size_t		 ngroups;
	char		*listen[SIM_MAX_LISTEN];
	size_t		 nlisten;
	int		 legacy_status;		/* -1: not set */
	long long	 max_conns;		/* 0: not set */
	long long	 max_urbs;
};
int		 conf_load(const char *path, struct sim_conf *);
int		 conf_load_string(const char *name, const char *text,
		    struct sim_conf *);
void		 conf_clear(struct sim_conf *);
void		 spec_init(struct sim_spec *, const char *busid);
void		 spec_clear(struct sim_spec *);
void		 spec_copy(struct sim_spec *, const struct sim_spec *);
bool		 spec_equal(const struct sim_spec *, const struct sim_spec *);
int		 spec_set(struct sim_spec *, const char *key, const char *value,
		    char *err, size_t errsz);
/* Check a complete spec and fill what was not given from its type. */
int		 spec_finish(struct sim_spec *, char *err, size_t errsz);
const char	*sim_type_name(enum sim_type);
/* Split a control line into words (quotes, escapes); returns count or -1. */
int		 conf_split(char *line, char **argv, int maxargs,
		    const char **err);
extern const char sim_default_conf[];

/* The busid of device i (0-based) of a generated exporter. */
void		 expgroup_busid(unsigned i, char *busid, size_t size);

/* device.c */
struct sim_dev	*dev_new(struct sim_exp *, const struct sim_spec *,
		    bool from_config, char *err, size_t errsz);
void		 dev_free(struct sim_dev *);
struct sim_dev	*dev_find(struct sim_exp *, const char *busid);
void		 dev_add(struct sim_dev *);
void		 dev_remove(struct sim_dev *);	/* closes its import */
void		 dev_record(const struct sim_dev *, struct usbip_dev *);
/* The record and interfaces a DEVLIST entry claims (list-* lies). */
uint8_t		 dev_listed(const struct sim_dev *, struct usbip_dev *,
		    const struct usbip_intf **);
void		 dev_attach(struct sim_dev *, struct expsrv_conn *);
void		 dev_release(struct sim_dev *);
/* The endpoint if the device has it in any alternate setting. */
struct sim_ep	*dev_ep_any(struct sim_dev *, uint32_t dir, uint32_t num);
/* Complete or queue u (endpoint 0 included); u is the device's now. */
void		 dev_submit(struct sim_dev *, struct expsrv_urb *);
/* Take u off its endpoint's queue, if it waits on one. */
void		 dev_dequeue(struct expsrv_urb *);

/* Boot keyboard usage for an ASCII character; -1 if it has none. */
int		 hid_key(int c, uint8_t *modifier, uint8_t *usage);

/* conn.c: the simulator as expsrv's back end, the PDU log, faults. */
void		 conn_accept(struct sim_exp *, int fd, const struct sockaddr *,
		    int socklen);
unsigned	 sim_exp_nconns(const struct sim_exp *);
void		 dev_disguise(struct sim_dev *);
/* A fault in the imported device's connection (control `inject`). */
int		 conn_inject(struct sim_dev *, const char *what,
		    const char *arg, char *err, size_t errsz);
/* Close every connection of every exporter (at exit). */
void		 conn_closeall(void);
/*
 * Complete an IN URB with len bytes of the static pattern, sent by
 * reference without a copy (maxp: the endpoint's packet size).  The
 * other completions are expsrv's (expsrv_urb_done*()).
 */
void		 urb_done_pattern(struct expsrv_urb *, enum sim_pattern,
		    uint16_t maxp, uint32_t len);
void		 pdulog_flush(void);

/* ctl.c */
int		 ctl_open(const char *path);
void		 ctl_close(void);

/* sim.c */
void		 sim_reload(void);
int		 sim_plug(struct sim_exp *, const struct sim_spec *,
		    bool from_config, char *err, size_t errsz);
/* The exporter of that name ("" or NULL: the main one), or NULL. */
struct sim_exp	*sim_exp_find(const char *name);

#endif
