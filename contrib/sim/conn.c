/*
 * The simulator's connections: each exporter (struct sim_exp, what one
 * usbipd would be) serves USB/IP through its own expsrv engine
 * (gateway/proto/expsrv.c), with the exporter's emulated devices as the back
 * end.  Here: the back-end ops over device.c, and what only the
 * simulator does: the PDU log, the faults of control `inject`, the
 * list-* and import-config lies, legacy status codes, max-connections
 * per exporter, and the static IN pattern of the source device.
 */
#include <sys/socket.h>

#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"
#include "base/desc.h"
#include "sim.h"

/*
 * g_zero's mod63 pattern: byte i of a transfer is (i % wMaxPacketSize) %
 * 63.  One buffer per packet size; PATTERN_LEN is a multiple of each, so
 * chained references to the same buffer continue the pattern.
 */
#define PATTERN_LEN	(64 * 1024)

static const uint16_t	 pattern_maxp[] = { 64, 512, 1024 };
static uint8_t		 pattern_mod63[3][PATTERN_LEN];
static uint8_t		 pattern_zero[PATTERN_LEN];
static bool		 pattern_ready;
static struct evbuffer	*pattern_buf;	/* references, handed to expsrv */
static struct event	*pdulog_ev;	/* flushes the PDU log from the loop */

static const char *inject_name(enum sim_inject);

/* ---- the PDU log ----------------------------------------------------- */

static void
pdulog_flush_cb(int fd, short events, void *arg)
{
	pdulog_flush();
}

static void
pdulog(struct expsrv_conn *conn, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
pdulog(struct expsrv_conn *conn, const char *fmt, ...)
{
	struct timespec ts;
	struct tm tm;
	char when[32];
	va_list ap;

	if (sim.pdulog == NULL)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	fprintf(sim.pdulog, "%s.%06ldZ peer=%s conn=%u ", when,
	    ts.tv_nsec / 1000, expsrv_conn_peer(conn), expsrv_conn_id(conn));
	va_start(ap, fmt);
	vfprintf(sim.pdulog, fmt, ap);
	va_end(ap);
	fputc('\n', sim.pdulog);
	/* Written out once the loop is done with what it read. */
	if (pdulog_ev == NULL && (pdulog_ev = event_new(sim.base, -1, 0,
	    pdulog_flush_cb, NULL)) == NULL)
		fatalx("event_new failed");
	event_active(pdulog_ev, EV_TIMEOUT, 0);
}

void
pdulog_flush(void)
{
	if (sim.pdulog != NULL)
		fflush(sim.pdulog);
}

static void
pdulog_urb(struct expsrv_conn *conn, const struct usbip_urb_hdr *h)
{
	const struct sim_dev *dev = expsrv_conn_dev(conn);
	const uint8_t *s = h->u.submit.setup;
	char extra[64] = "";

	if (h->command == USBIP_CMD_UNLINK) {
		pdulog(conn, "cmd=CMD_UNLINK seqnum=%u devid=0x%08x "
		    "unlink_seqnum=%u busid=%s", h->seqnum, h->devid,
		    h->u.unlink.unlink_seqnum, dev->spec.busid);
		return;
	}
	if (h->ep == 0)
		snprintf(extra, sizeof(extra), " setup=%02x%02x%02x%02x%02x"
		    "%02x%02x%02x", s[0], s[1], s[2], s[3], s[4], s[5], s[6],
		    s[7]);
	else if (usbip_submit_is_iso(h))
		snprintf(extra, sizeof(extra), " npackets=%d",
		    h->u.submit.number_of_packets);
	pdulog(conn, "cmd=%s seqnum=%u devid=0x%08x ep=%u dir=%s len=%d%s "
	    "busid=%s", usbip_cmd_name(h->command), h->seqnum, h->devid, h->ep,
	    h->direction == USBIP_DIR_IN ? "in" : "out",
	    h->u.submit.transfer_buffer_length, extra, dev->spec.busid);
}

static void
sim_pdu(void *arg, struct expsrv_conn *conn, const struct usbip_op *op,
    const struct usbip_urb_hdr *urb, const char *malformed)
{
	char esc[USBIP_BUSID_SIZE * 4 + 1];

	if (malformed != NULL)
		pdulog(conn, "cmd=MALFORMED why=\"%s\"", malformed);
	else if (urb != NULL)
		pdulog_urb(conn, urb);
	else if (op->hdr.code == OP_REQ_IMPORT) {
		log_escape(esc, sizeof(esc), op->busid, strlen(op->busid));
		pdulog(conn, "cmd=%s busid=%s", usbip_op_name(op->hdr.code),
		    esc);
	} else
		pdulog(conn, "cmd=%s", usbip_op_name(op->hdr.code));
}

/* ---- faults, for tests of the importer's robustness --------------------- */

static const struct {
	const char	*name;
	enum sim_inject	 inject;
} injects[] = {
	{ "seqnum",	INJ_SEQNUM },
	{ "command",	INJ_COMMAND },
	{ "overflow",	INJ_OVERFLOW },
	{ "iso",	INJ_ISO },
};

static const char *
inject_name(enum sim_inject inj)
{
	size_t i;

	for (i = 0; i < nitems(injects); i++)
		if (injects[i].inject == inj)
			return injects[i].name;
	return "none";
}

/*
 * Every RET_SUBMIT header passes here: count the IN bytes, and apply a
 * pending fault (conn_inject()).  Returns how many zero bytes must
 * follow the reply's data so that the stream stays in step with the
 * actual_length it now claims.
 */
static uint32_t
sim_reply(void *arg, struct expsrv_conn *conn, struct expsrv_urb *u,
    struct usbip_urb_hdr *h)
{
	struct sim_dev *dev = expsrv_conn_dev(conn);
	uint32_t extra = 0;

	if (dev == NULL)
		return 0;
	if (u->dir == USBIP_DIR_IN)
		dev->bytes_in += (uint32_t)h->u.ret_submit.actual_length;
	switch (dev->inject) {
	case INJ_NONE:
		return 0;
	case INJ_SEQNUM:
		h->seqnum ^= 0x80000000u;
		break;
	case INJ_COMMAND:
		h->command = 7;
		break;
	case INJ_OVERFLOW:
		if (u->dir != USBIP_DIR_IN || u->npackets > 0)
			return 0;
		extra = u->length + 1 - (uint32_t)h->u.ret_submit.actual_length;
		h->u.ret_submit.actual_length = (int32_t)(u->length + 1);
		break;
	case INJ_ISO:
		if (u->npackets == 0)
			return 0;
		u->iso[0].actual_length = u->iso[0].length + 1;
		break;
	}
	log_info("conn %u %s: injected %s into the reply to seqnum %u",
	    expsrv_conn_id(conn), expsrv_conn_peer(conn),
	    inject_name(dev->inject), u->seqnum);
	dev->inject = INJ_NONE;
	return extra;
}

/*
 * Make the imported device's connection misbehave (control `inject`):
 * the next RET_SUBMIT gets an unknown seqnum, an unknown command, an
 * actual_length one more than was asked (IN), or an ISO packet longer
 * than itself; `raw HEX` writes bytes now; `freeze` stops answering
 * (input is read and dropped, so a close is still noticed).
 */
int
conn_inject(struct sim_dev *dev, const char *what, const char *arg,
    char *err, size_t errsz)
{
	struct expsrv_conn *conn = dev->owner;
	uint8_t *bytes;
	size_t i, n;
	int hi, lo;

	if (strcmp(what, "freeze") == 0) {
		expsrv_conn_freeze(conn);
		return 0;
	}
	if (strcmp(what, "raw") == 0) {
		n = arg != NULL ? strlen(arg) : 0;
		if (n == 0 || n % 2 != 0 || n / 2 > SIM_INJECT_MAX) {
			snprintf(err, errsz, "raw: expected 1..%d bytes in hex",
			    SIM_INJECT_MAX);
			return -1;
		}
		bytes = xmalloc(n / 2);
		for (i = 0; i < n / 2; i++) {
			hi = usbgw_hexval(arg[2 * i]);
			lo = usbgw_hexval(arg[2 * i + 1]);
			if (hi < 0 || lo < 0) {
				free(bytes);
				snprintf(err, errsz, "raw: expected hex digits");
				return -1;
			}
			bytes[i] = (uint8_t)(hi << 4 | lo);
		}
		expsrv_conn_send(conn, bytes, n / 2);
		free(bytes);
		log_info("conn %u %s: injected %zu raw bytes",
		    expsrv_conn_id(conn), expsrv_conn_peer(conn), n / 2);
		return 0;
	}
	for (i = 0; i < nitems(injects); i++) {
		if (strcmp(what, injects[i].name) == 0) {
			dev->inject = injects[i].inject;
			return 0;
		}
	}
	snprintf(err, errsz, "expected seqnum, command, overflow, iso, freeze "
	    "or raw HEX");
	return -1;
}

/* ---- the source device's pattern ------------------------------------- */

static void
pattern_init(void)
{
	size_t i, k;

	for (k = 0; k < nitems(pattern_maxp); k++)
		for (i = 0; i < PATTERN_LEN; i++)
			pattern_mod63[k][i] = (uint8_t)((i % pattern_maxp[k]) %
			    63);
	if ((pattern_buf = evbuffer_new()) == NULL)
		fatalx("out of memory");
	pattern_ready = true;
}

void
urb_done_pattern(struct expsrv_urb *u, enum sim_pattern pat, uint16_t maxp,
    uint32_t len)
{
	const uint8_t *p = pattern_zero;
	uint32_t n, left = len;
	size_t i;

	if (!pattern_ready)
		pattern_init();
	if (pat == SIM_PATTERN_MOD63) {
		for (i = 0; i < nitems(pattern_maxp); i++)
			if (pattern_maxp[i] == maxp)
				p = pattern_mod63[i];
		if (p == pattern_zero)
			fatalx("no mod63 pattern for packet size %u", maxp);
	}
	while (left > 0) {
		n = left < PATTERN_LEN ? left : PATTERN_LEN;
		evbuffer_add_reference(pattern_buf, p, n, NULL, NULL);
		left -= n;
	}
	/* Whole chains move: the reply references the pattern, no copy. */
	expsrv_urb_done_evbuf(u, 0, pattern_buf, len);
}

/* ---- the back end: an exporter's devices ------------------------------ */

/* As current usbipd: devices in use are not exportable. */
static void
sim_list(void *arg, struct expsrv_conn *conn)
{
	struct sim_exp *exp = arg;
	struct sim_dev *dev;
	struct usbip_dev rec;
	const struct usbip_intf *intf;
	uint8_t nintf;

	TAILQ_FOREACH(dev, &exp->devs, entry) {
		if (dev->owner != NULL)
			continue;
		nintf = dev_listed(dev, &rec, &intf);
		expsrv_list_add(conn, &rec, intf, nintf);
	}
}

static uint32_t
sim_import(void *arg, struct expsrv_conn *conn, const char *busid,
    struct usbip_dev *rec, void **devp)
{
	struct sim_exp *exp = arg;
	struct sim_dev *dev = dev_find(exp, busid);
	char esc[USBIP_BUSID_SIZE * 4 + 1];

	if (dev == NULL)
		return sim.legacy_status ? ST_NA : ST_NODEV;
	if (dev->owner != NULL)
		return sim.legacy_status ? ST_NA : ST_DEV_BUSY;
	dev_attach(dev, conn);
	dev_record(dev, rec);
	if (dev->spec.set & SPEC_IMPORT_CFG)
		rec->bConfigurationValue = dev->spec.import_config;	/* a lie */
	*devp = dev;
	log_escape(esc, sizeof(esc), busid, strlen(busid));
	log_info("conn %u %s: imported %s%s%s (devid 0x%08x)",
	    expsrv_conn_id(conn), expsrv_conn_peer(conn), exp->name,
	    exp->name[0] != '\0' ? "/" : "", esc,
	    dev->busnum << 16 | dev->devnum);
	return ST_OK;
}

/*
 * An endpoint the device has in no alternate setting is not refused
 * here: the device stalls such URBs (-EPIPE), as a real one would.
 */
static int
sim_ep_type(void *arg, uint32_t dir, uint32_t num)
{
	struct sim_ep *ep = dev_ep_any(arg, dir, num);

	return ep != NULL ? ep->xfer : EXPSRV_EP_GUESS;
}

/*
 * Check the ISO packets of a URB for an ISO endpoint as the kernel's
 * stub and host controller do: no more packets than the buffer needs at
 * the endpoint's packet size, none longer than a packet.
 */
static int
sim_check(void *arg, const struct expsrv_urb *u, const char **why)
{
	const struct sim_ep *ep;
	uint64_t need;
	uint32_t i;

	if (u->npackets == 0)
		return 0;
	ep = dev_ep_any(arg, u->dir, u->ep);
	if (ep == NULL || ep->xfer != USB_XFER_ISO)
		return 0;
	need = ((uint64_t)u->length + ep->maxp - 1) / ep->maxp;
	if (u->npackets > need) {
		*why = "more ISO packets than the buffer needs";
		return -1;
	}
	for (i = 0; i < u->npackets; i++) {
		if (u->iso[i].length > ep->maxp) {
			*why = "ISO packet longer than the endpoint's maximum";
			return -1;
		}
	}
	return 0;
}

static void
sim_submit(void *arg, struct expsrv_urb *u)
{
	dev_submit(arg, u);
}

/* The device's URBs wait on endpoint queues only: dropped at once. */
static bool
sim_cancel(void *arg, struct expsrv_urb *u)
{
	dev_dequeue(u);
	return true;
}

static void
sim_release(void *arg, struct expsrv_conn *conn, const char *why)
{
	struct sim_dev *dev = arg;

	log_info("conn %u %s: closed (%s, device %s%s%s)", expsrv_conn_id(conn),
	    expsrv_conn_peer(conn), why, dev->exp->name,
	    dev->exp->name[0] != '\0' ? "/" : "", dev->spec.busid);
	dev_release(dev);
	if (dev->removed)
		dev_free(dev);
}

static const struct expsrv_ops sim_ops = {
	.list = sim_list,
	.import = sim_import,
	.ep_type = sim_ep_type,
	.submit = sim_submit,
	.cancel = sim_cancel,
	.release = sim_release,
	.check = sim_check,
	.pdu = sim_pdu,
	.reply = sim_reply,
};

/* ---- connections ----------------------------------------------------- */

unsigned
sim_exp_nconns(const struct sim_exp *exp)
{
	return exp->srv != NULL ? expsrv_nconns(exp->srv) : 0;
}

void
conn_accept(struct sim_exp *exp, int fd, const struct sockaddr *sa,
    int socklen)
{
	struct expsrv_limits lim;
	char host[NI_MAXHOST], serv[NI_MAXSERV];

	if (exp->srv == NULL) {
		expsrv_limits_default(&lim);
		lim.max_urbs = sim.max_urbs;
		exp->srv = expsrv_new(sim.base, &sim_ops, exp, &lim);
	}
	/* max-connections holds per exporter, as for one usbipd each. */
	if (expsrv_nconns(exp->srv) >= sim.max_conns) {
		if (getnameinfo(sa, (socklen_t)socklen, host, sizeof(host),
		    serv, sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
			usbgw_strlcpy(host, "?", sizeof(host));
			usbgw_strlcpy(serv, "?", sizeof(serv));
		}
		log_warnx("%s:%s: refused, already %u connections%s%s", host,
		    serv, expsrv_nconns(exp->srv), exp->name[0] != '\0' ?
		    " to " : "", exp->name);
		close(fd);
		return;
	}
	expsrv_accept(exp->srv, fd, sa, (socklen_t)socklen);
}

void
conn_closeall(void)
{
	size_t i;

	expsrv_free(sim.main.srv);
	sim.main.srv = NULL;
	for (i = 0; i < sim.nexps; i++) {
		expsrv_free(sim.exps[i].srv);
		sim.exps[i].srv = NULL;
	}
	if (pdulog_ev != NULL) {
		event_free(pdulog_ev);
		pdulog_ev = NULL;
	}
	if (pattern_buf != NULL) {
		evbuffer_free(pattern_buf);
		pattern_buf = NULL;
		pattern_ready = false;
	}
}
