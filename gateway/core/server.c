/*
 * The downstream USB/IP server: what `usbip list -r` and `usbip attach
 * -r GATEWAY` talk to.  Op phase only here; after a successful import
 * the connection becomes a relay (relay.c).
 *
 *  - OP_REQ_DEVLIST: the devices authorized for the asking host
 *    (pending ones too when show-pending is set); closed after the reply.
 *  - OP_REQ_IMPORT of an authorized device: ST_OK with the gateway's own
 *    device record, then URB phase.  Of a pending device: an access
 *    request (audited, announced), answered ST_NA at once or held up to
 *    attach-pending-wait for an operator.  Attached elsewhere:
 *    ST_DEV_BUSY.  Blocked: ST_NA.  Rejected (blocked by a reject rule,
 *    still claimed) and unknown busid: ST_NODEV.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <netdb.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "base/counters.h"
#include "base/hostname.h"
#include "base/log.h"
#include "base/util.h"
#include "control/config.h"
#include "core/agentgw.h"
#include "core/device.h"
#include "core/enroll.h"
#include "core/exporter.h"
#include "core/follow.h"
#include "core/loop.h"
#include "core/relay.h"
#include "core/session.h"
#include "core/store.h"
#include "core/upstream.h"
#include "proto/agentproto.h"
#include "proto/enrollproto.h"
#include "proto/followproto.h"
#include "tls/tlsshim.h"

#define TLS_HANDSHAKE_RECORD	0x16

static void	ds_read(struct bufferevent *, void *);
static void	ds_event(struct bufferevent *, short, void *);
static void	server_accept_tls(evutil_socket_t, const struct sockaddr *,
		    socklen_t, const char *, const char *, bool);

static void
ds_free(void *arg)
{
	struct dsession *ds = arg;

	if (ds->bev != NULL)
		bufferevent_free(ds->bev);
	if (ds->wait_ev != NULL)
		event_free(ds->wait_ev);
	if (ds->op_ev != NULL)
		event_free(ds->op_ev);
	free(ds);
}

/*
 * The op phase has one deadline, from accept: a peer that sends its
 * request a byte at a time does not hold a session longer than one that
 * sends nothing (a timeout that restarts on every byte would).
 */
static void
ds_op_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct dsession *ds = arg;

	if (ds->state == DS_OP && !ds->dead)
		dsession_close(ds, "no complete request in time (op-phase "
		    "deadline)");
}

/*
 * The host's verified name is known (or that it has none): requests
 * that waited for it are read now.
 */
static void
ds_named(const char *name, void *arg)
{
	struct dsession *ds = arg;

	ds->name_req = NULL;
	ds->named = true;
	if (name != NULL) {
		usbgw_strlcpy(ds->host_name, name, sizeof(ds->host_name));
		ds->name_src = DS_NAME_DNS;
	}
	log_debug("session %s: host name %s", ds->peer, name ? name : "(none)");
	ds_read(ds->bev, ds);
}

static const char *
ds_state_name(enum ds_state st)
{
	switch (st) {
	case DS_OP:		return "op";
	case DS_WAIT_APPROVAL:	return "attach-pending";
	case DS_RELAY:		return "relay";
	case DS_FOLLOW:		return "follow";
	case DS_CLOSING:	return "closing";
	}
	return "?";
}

/* Every session's state transition goes through here, and is logged. */
void
dsession_set_state(struct dsession *ds, enum ds_state st, const char *why)
{
	if (ds->state == st)
		return;
	log_debug("session %s: %s -> %s%s%s", ds->peer,
	    ds_state_name(ds->state), ds_state_name(st), why ? ": " : "",
	    why ? why : "");
	ds->state = st;
}

/*
 * Close a downstream session.  A relay is stopped and its device
 * detached (released and reclaimed fresh).  Freed from the loop.
 */
void
dsession_close(struct dsession *ds, const char *why)
{
	struct device *dev = ds->dev;

	if (ds->dead)
		return;
	ds->dead = true;
	follow_end(ds);
	if (ds->op_ev != NULL)
		event_del(ds->op_ev);
	hostname_cancel(ds->name_req);
	ds->name_req = NULL;
	(ds->quiet ? log_debug : log_info)("session %s%s%s closed: %s",
	    ds->peer, dev ? " " : "", dev ? dev->busid : "", why);
	if (ds->wait_ev != NULL)
		event_del(ds->wait_ev);
	if (ds->request_id != 0)
		store_access_outcome(ds->request_id, "withdrawn", NULL);
	if (ds->state == DS_RELAY && dev != NULL) {
		relay_stop(ds);
		dev->ds = NULL;
		/* the relay borrowed the claim's bufferevent */
		if (dev->up != NULL && dev->up->bev != NULL)
			bufferevent_setcb(dev->up->bev, NULL, NULL, NULL, NULL);
		device_detached(dev, why);
	} else if (dev != NULL && dev->ds == ds)
		dev->ds = NULL;
	ds->dev = NULL;
	dsession_set_state(ds, DS_CLOSING, why);
	TAILQ_REMOVE(&gw->sessions, ds, entry);
	gw->nsessions--;
	if (ds->bev != NULL) {
		bufferevent_setcb(ds->bev, NULL, NULL, NULL, NULL);
		bufferevent_disable(ds->bev, EV_READ | EV_WRITE);
	}
	gw_defer(ds_free, ds);
}

/* Close once the reply has been written (DEVLIST, refused imports). */
static void
ds_close_after_write(struct bufferevent *bev, void *arg)
{
	struct dsession *ds = arg;

	if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		dsession_close(ds, "reply sent");
}

void
dsession_reply_and_close(struct dsession *ds, const void *buf, size_t len)
{
	bufferevent_write(ds->bev, buf, len);
	bufferevent_setcb(ds->bev, NULL, ds_close_after_write, ds_event, ds);
	bufferevent_disable(ds->bev, EV_READ);
	bufferevent_setwatermark(ds->bev, EV_WRITE, 0, 0);
}

/* The device record the gateway shows: its own busid, path and devid. */
static void
ds_dev_record(const struct device *dev, struct usbip_dev *rec)
{
	/* what the probe verified; the exporter's claims stay out of it */
	memset(rec, 0, sizeof(*rec));
	rec->speed = dev->up != NULL ? dev->up->rec.speed : 0;
	rec->bConfigurationValue = dev->cur_config;
	rec->bNumInterfaces = dev->nintf;
	snprintf(rec->path, sizeof(rec->path), "/usbgw/%s/%s", dev->exp->name,
	    dev->up_busid);
	usbgw_strlcpy(rec->busid, dev->busid, sizeof(rec->busid));
	rec->busnum = dev->gw_devid >> 16;
	rec->devnum = dev->gw_devid & 0xffff;
	rec->idVendor = dev->ident.vid;
	rec->idProduct = dev->ident.pid;
	rec->bcdDevice = dev->ident.bcd;
	rec->bDeviceClass = dev->ident.dclass;
	rec->bDeviceSubClass = dev->ident.dsubclass;
	rec->bDeviceProtocol = dev->ident.dprotocol;
	rec->bNumConfigurations = dev->ident.nconfigs_dev;
}

bool
device_visible_to(const struct device *dev, const struct dsession *ds)
{
	if (!dev->probed || dev->up == NULL || dev->dead)
		return false;
	switch (dev->state) {
	case DEV_AUTHORIZED:
	case DEV_ATTACHED:
		return device_allowed_for((struct device *)dev, ds);
	case DEV_PENDING:
		return gw->show_pending ||
		    device_allowed_for((struct device *)dev, ds);
	default:
		return false;
	}
}

static void
ds_devlist(struct dsession *ds)
{
	struct evbuffer *out = evbuffer_new();
	struct exporter *exp;
	struct device *dev;
	struct usbip_dev rec;
	uint8_t hdr[USBIP_OP_HDR_LEN + 4], buf[USBIP_DEV_LEN];
	uint32_t n = 0;
	int i;

	TAILQ_FOREACH(exp, &gw->exporters, entry)
		TAILQ_FOREACH(dev, &exp->devices, entry) {
			if (!device_visible_to(dev, ds))
				continue;
			if (n == USBIP_MAX_NDEV)
				break;
			ds_dev_record(dev, &rec);
			usbip_dev_encode(buf, &rec);
			evbuffer_add(out, buf, USBIP_DEV_LEN);
			for (i = 0; i < rec.bNumInterfaces; i++) {
				uint8_t ib[USBIP_INTF_LEN];

				usbip_intf_encode(ib, &dev->intf[i]);
				evbuffer_add(out, ib, sizeof(ib));
			}
			n++;
		}
	usbip_devlist_rep_hdr_encode(hdr, n);
	evbuffer_prepend(out, hdr, sizeof(hdr));
	bufferevent_write_buffer(ds->bev, out);
	evbuffer_free(out);
	dsession_reply_and_close(ds, NULL, 0);
}

static void
ds_import_refuse(struct dsession *ds, uint32_t status, const char *why)
{
	uint8_t rep[USBIP_OP_HDR_LEN];

	cnt_refusal(why);
	(ds->quiet ? log_debug : log_info)("session %s: import refused (%s): "
	    "%s", ds->peer, usbip_st_name(status), why);
	usbip_op_hdr_encode(rep, OP_REP_IMPORT, status);
	dsession_reply_and_close(ds, rep, sizeof(rep));
}

static bool ds_may_audit(struct dsession *, enum hostlimit_kind);

/*
 * The store is unavailable (protocol.md 4.6): no import is granted, not
 * even of an authorized device (nothing new is authorized, and the
 * attachment could not be recorded).  Refused here and when a held
 * import would be granted.  true if refused.
 */
static bool
ds_store_down(struct dsession *ds, struct device *dev)
{
	if (!store_degraded())
		return false;
	if (ds->request_id != 0) {
		store_access_outcome(ds->request_id, "refused", NULL);
		ds->request_id = 0;
	}
	ds->dev = NULL;
	if (ds_may_audit(ds, HL_IMPORT_REFUSED))
		store_audit_request("import-refused", dev, NULL, ds->host,
		    ds->peer, STORE_UNAVAILABLE);
	ds_import_refuse(ds, ST_NA, STORE_UNAVAILABLE);
	return true;
}

static void
ds_import_accept(struct dsession *ds, struct device *dev)
{
	struct usbip_dev rec;
	struct decision d;
	uint8_t rep[USBIP_IMPORT_REP_LEN];
	size_t n;

	if (ds_store_down(ds, dev))
		return;
	device_decide(dev, ds, &d);	/* what grants it, for the records */
	ds_dev_record(dev, &rec);
	n = usbip_import_rep_encode(rep, ST_OK, &rec);
	if (ds->request_id != 0) {
		store_access_outcome(ds->request_id, "granted", &d);
		ds->request_id = 0;
	}
	if (ds->wait_ev != NULL)
		event_del(ds->wait_ev);
	ds->dev = dev;
	dev->ds = ds;
	device_set_state(dev, DEV_ATTACHED, &d.actor, ds->peer);
	store_attachment_begin(dev, ds, &d);
	dsession_set_state(ds, DS_RELAY, dev->busid);
	relay_start(ds, dev, rep, n, dsession_close); /* it sends the reply */
}

/*
 * A device pending or blocked for no host that this host's own decision
 * allows (a rule or approval limited to it): authorized, credited to
 * what allows it, and imported.
 */
static void
ds_import_for_host(struct dsession *ds, struct device *dev)
{
	struct decision d;

	device_decide(dev, ds, &d);
	device_set_state(dev, DEV_AUTHORIZED, &d.actor, d.why);
	ds_import_accept(ds, dev);
}

/* Is the device free to be imported right now? */
static bool
ds_importable(const struct device *dev)
{
	return dev->up != NULL && dev->up->state == UP_IDLE && dev->ds == NULL;
}

static void
ds_wait_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct dsession *ds = arg;

	dsession_set_state(ds, DS_OP, "no approval in time");
	if (ds->request_id != 0) {
		store_access_outcome(ds->request_id, "timeout", NULL);
		ds->request_id = 0;
	}
	ds->dev = NULL;
	ds_import_refuse(ds, ST_NA, "no approval in time");
}

/*
 * dev is gone (or about to be freed): every import held for it is
 * answered now, and no session keeps a pointer to it.  A held import
 * belongs to its device.
 */
static void
server_device_gone(struct device *dev)
{
	struct dsession *ds, *next;

	for (ds = TAILQ_FIRST(&gw->sessions); ds != NULL; ds = next) {
		next = TAILQ_NEXT(ds, entry);
		if (ds->dev != dev || ds->dead)
			continue;
		if (ds->state == DS_RELAY) {
			dsession_close(ds, "device gone");
			continue;
		}
		if (ds->state == DS_WAIT_APPROVAL) {
			dsession_set_state(ds, DS_OP, "device gone");
			if (ds->request_id != 0) {
				store_access_outcome(ds->request_id, "refused",
				    NULL);
				ds->request_id = 0;
			}
			ds->dev = NULL;
			ds_import_refuse(ds, ST_NODEV, "device gone");
			continue;
		}
		ds->dev = NULL;
	}
}

/* A device's decision changed: answer the imports held for it. */
static void
server_device_decided(struct device *dev)
{
	struct dsession *ds, *next;
	struct decision d;

	if (dev->state == DEV_GONE) {
		server_device_gone(dev);
		return;
	}
	for (ds = TAILQ_FIRST(&gw->sessions); ds != NULL; ds = next) {
		next = TAILQ_NEXT(ds, entry);
		if (ds->state != DS_WAIT_APPROVAL || ds->dev != dev)
			continue;
		if (dev->state == DEV_PENDING || dev->state == DEV_PROBING)
			continue;
		if (dev->state == DEV_AUTHORIZED && !ds_importable(dev) &&
		    device_allowed_for(dev, ds))
			continue;	/* still being claimed */
		dsession_set_state(ds, DS_OP, "decided");
		if (dev->state == DEV_AUTHORIZED && device_allowed_for(dev, ds) &&
		    ds_importable(dev)) {
			ds_import_accept(ds, dev);
		} else {
			if (ds->request_id != 0) {
				device_decide(dev, ds, &d);
				store_access_outcome(ds->request_id, "denied",
				    &d);
				ds->request_id = 0;
			}
			ds->dev = NULL;
			/* a reject rule: the device vanishes for vhci hosts */
			if (device_rejected(dev))
				ds_import_refuse(ds, ST_NODEV,
				    "device rejected");
			else
				ds_import_refuse(ds, ST_NA,
				    "access request denied");
		}
	}
}

/* The core cuts a device's vhci host off: its session ends. */
static void
server_device_cut(struct device *dev, const char *why)
{
	if (dev->ds != NULL)
		dsession_close(dev->ds, why);
}

/* Hear of the core's decisions (every mode: local mode has sessions too). */
void
server_init(void)
{
	static const struct device_observer obs = {
		.decided = server_device_decided,
		.cut = server_device_cut,
		.freed = server_device_gone,
	};

	device_observe(&obs);
	follow_init();
}

/*
 * Hold an import: answered by server_device_decided() when the device's
 * decision or claim changes, or refused when ms run out.
 */
static void
ds_hold(struct dsession *ds, struct device *dev, unsigned ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	ds->dev = dev;
	dsession_set_state(ds, DS_WAIT_APPROVAL, dev->busid);
	/*
	 * Reading stays on so that a vhci host giving up is noticed (EOF:
	 * the request is withdrawn and its slot freed); ds_read leaves
	 * bytes alone outside DS_OP, up to the 4 KiB watermark.
	 */
	bufferevent_set_timeouts(ds->bev, NULL, NULL);
	if (ds->wait_ev == NULL)
		ds->wait_ev = evtimer_new(gw->base, ds_wait_timeout, ds);
	evtimer_add(ds->wait_ev, &tv);
}

/*
 * May this session's refusal be written to the audit log (hostlimit.h)?
 * If not, the session stays quiet in the log too.
 */
static bool
ds_may_audit(struct dsession *ds, enum hostlimit_kind kind)
{
	if (hostlimit_audit(ds->host, kind))
		return true;
	ds->quiet = true;
	return false;
}

/*
 * Several gateways (protocol.md 4.7): busid "EXPORTER:BUSID" of an
 * exporter another gateway leases is refused here, with an audit row
 * naming the holder (the host imports from that gateway).  true when
 * refused.
 */
static bool
ds_import_elsewhere(struct dsession *ds, const char *busid)
{
	struct exporter *exp;
	char name[GW_NAME_MAX], esc[64], detail[160];
	const char *colon = memchr(busid, ':', USBIP_BUSID_SIZE);

	if (colon == NULL || (size_t)(colon - busid) >= sizeof(name))
		return false;
	memcpy(name, busid, (size_t)(colon - busid));
	name[colon - busid] = '\0';
	if ((exp = exporter_find(name)) == NULL || exp->leased)
		return false;
	if (exp->lease_holder[0] != '\0')
		snprintf(detail, sizeof(detail), "held by gateway %s (epoch "
		    "%lld)", exp->lease_holder, (long long)exp->lease_epoch);
	else
		snprintf(detail, sizeof(detail), "no gateway holds exporter "
		    "%s's lease yet", exp->name);
	if (ds_may_audit(ds, HL_IMPORT_UNKNOWN))
		store_audit_request("import-elsewhere", NULL,
		    log_escape(esc, sizeof(esc), busid, USBIP_BUSID_SIZE),
		    ds->host, ds->peer, detail);
	ds_import_refuse(ds, ST_NA, detail);
	return true;
}

static void
ds_import(struct dsession *ds, const char *busid)
{
	struct device *dev;
	char esc[64];

	dev = gw_device_find(busid, NULL);
	if (dev == NULL && ds_import_elsewhere(ds, busid))
		return;
	if (dev == NULL || strcmp(dev->busid, busid) != 0) {
		/* the stock client compares busids: no prefixes here */
		if (ds_may_audit(ds, HL_IMPORT_UNKNOWN))
			store_audit_request("import-unknown", NULL,
			    log_escape(esc, sizeof(esc), busid,
			    USBIP_BUSID_SIZE), ds->host, ds->peer,
			    "unknown busid");
		return ds_import_refuse(ds, ST_NODEV, "unknown busid");
	}
	if (ds_store_down(ds, dev))
		return;
	switch (dev->state) {
	case DEV_AUTHORIZED:
		if (!device_allowed_for(dev, ds)) {
			if (ds_may_audit(ds, HL_IMPORT_REFUSED))
				store_audit_request("import-refused", dev, NULL,
				    ds->host, ds->peer,
				    "not authorized for this host");
			return ds_import_refuse(ds, ST_NA,
			    "not authorized for this host");
		}
		if (!ds_importable(dev))
			/* being claimed again after a detach: wait for it */
			return ds_hold(ds, dev, GW_RECLAIM_WAIT_MS);
		return ds_import_accept(ds, dev);
	case DEV_ATTACHED:
		return ds_import_refuse(ds, ST_DEV_BUSY, "already attached");
	case DEV_PENDING:
		if (device_allowed_for(dev, ds) && ds_importable(dev))
			return ds_import_for_host(ds, dev);
		/* FALLTHROUGH */
	case DEV_PROBING:
		/* over the address's budget: no row, no event, no hold */
		if (!ds_may_audit(ds, HL_ACCESS_REQUEST))
			return ds_import_refuse(ds, ST_NA, "device pending "
			    "(access requests from this address over the limit)");
		ds->dev = dev;
		cnt.access_requests++;
		ds->request_id = store_access_request(dev, ds);
		gw_access_event(dev, ds);
		if (gw->attach_wait_ms == 0) {
			store_access_outcome(ds->request_id, "refused", NULL);
			ds->request_id = 0;
			ds->dev = NULL;
			return ds_import_refuse(ds, ST_NA, "device pending");
		}
		/* attach-pending: hold the import until decided or timeout */
		return ds_hold(ds, dev, gw->attach_wait_ms);
	case DEV_BLOCKED:
		/* blocked for no host, but a rule may allow this one */
		if (device_allowed_for(dev, ds) && ds_importable(dev))
			return ds_import_for_host(ds, dev);
		if (ds_may_audit(ds, HL_IMPORT_REFUSED))
			store_audit_request("import-refused", dev, NULL,
			    ds->host, ds->peer, device_rejected(dev) ?
			    "device rejected" : "device blocked");
		/* rejected: the gateway holds it, vhci hosts do not see it */
		if (device_rejected(dev))
			return ds_import_refuse(ds, ST_NODEV, "device rejected");
		return ds_import_refuse(ds, ST_NA, "device blocked");
	default:
		return ds_import_refuse(ds, ST_NODEV, "device gone");
	}
}

static void
ds_read(struct bufferevent *bev, void *arg)
{
	struct dsession *ds = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct usbip_op op;
	const char *why = NULL;
	size_t len = evbuffer_get_length(in);
	uint8_t *p;
	int r;

	if (ds->state != DS_OP || !ds->named)
		return;		/* its name first: every decision needs it */
	p = evbuffer_pullup(in, len < USBIP_IMPORT_REQ_LEN ? -1 :
	    USBIP_IMPORT_REQ_LEN);
	if (len > 0 && p[0] == TLS_HANDSHAKE_RECORD && !ds->tls) {
		/* an op header starts 0x01 (version 1.1.1): this is TLS */
		const char *msg = "TLS on a plaintext listener";

		if (ds_may_audit(ds, HL_TLS_REFUSED))
			store_audit("tls-refused", NULL, ds->host, msg);
		dsession_close(ds, msg);
		return;
	}
	if (ds->tls && enroll_is_msg(p, len)) {
		/* a renewal over the certificate's own session (enroll.c) */
		struct bufferevent *rbev = ds->bev;

		if (len < 4)
			return;		/* the magic's other bytes first */
		ds->bev = NULL;
		ds->quiet = true;
		dsession_close(ds, "an enrollment message, handed over");
		enroll_renew_accept(rbev, &ds->cert, ds->host);
		return;
	}
	if (ds->tls && len > 0 && (agp_is_hello(p, len, true) ? ds->cert.role !=
	    TLSID_ROLE_AGENT : ds->cert.role != TLSID_ROLE_HOST)) {
		/*
		 * The certificate's role decides what the connection may
		 * be (protocol.md 1.10.9): an agent's certificate cannot
		 * import or list devices, a vhci host's cannot announce
		 * them.
		 */
		char msg[160];

		snprintf(msg, sizeof(msg), "certificate CN=%s is a%s %s's: %s",
		    ds->cert.name, ds->cert.role == TLSID_ROLE_AGENT ? "n" :
		    "", tlsid_role_name(ds->cert.role),
		    ds->cert.role == TLSID_ROLE_AGENT ? "an agent cannot "
		    "import or list devices" : "only an agent may announce "
		    "devices");
		if (ds_may_audit(ds, HL_TLS_REFUSED)) {
			log_info("session %s: TLS connection refused: %s",
			    ds->peer, msg);
			store_audit("tls-refused", NULL, ds->peer, msg);
		}
		ds->quiet = true;
		dsession_close(ds, msg);
		return;
	}
	if (flp_is_hello(p, len)) {
		/* usbgw-attach --follow (protocol.md 1.10.8) */
		follow_hello(ds);
		return;
	}
	if (agp_is_hello(p, len, true)) {
		/* an agent's CONTROL or DIALBACK (protocol.md 1.9.4) */
		struct bufferevent *abev = ds->bev;

		ds->bev = NULL;
		ds->quiet = true;
		dsession_close(ds, "an agent's connection, handed over");
		agentgw_accept(abev, ds->host, &ds->addr, ds->tls ? &ds->cert :
		    NULL);
		return;
	}
	r = usbip_op_decode(p, len, USBIP_FROM_CLIENT, &op, &why);
	if (r == USBIP_NEED_MORE)
		return;
	if (r < 0) {
		char msg[160];

		snprintf(msg, sizeof(msg), "malformed op request: %s", why);
		if (ds_may_audit(ds, HL_MALFORMED))
			store_audit("malformed", NULL, ds->peer, msg);
		dsession_close(ds, msg);
		return;
	}
	evbuffer_drain(in, (size_t)r);
	if (ds->op_ev != NULL)
		event_del(ds->op_ev);	/* the request is complete */
	bufferevent_set_timeouts(bev, NULL, NULL);
	if (op.hdr.code == OP_REQ_DEVLIST)
		ds_devlist(ds);
	else
		ds_import(ds, op.busid);
}

static void
ds_event(struct bufferevent *bev, short what, void *arg)
{
	struct dsession *ds = arg;

	if (what & BEV_EVENT_TIMEOUT)
		dsession_close(ds, "op phase timed out");
	else if (what & BEV_EVENT_EOF)
		dsession_close(ds, "peer closed");
	else
		dsession_close(ds, "connection error");
}

/* Sessions from one address (or /64) still in the request phase. */
static unsigned
requests_from(const char *hkey)
{
	struct dsession *ds;
	unsigned n = 0;

	TAILQ_FOREACH(ds, &gw->sessions, entry)
		if (!ds->dead && ds->state != DS_RELAY &&
		    ds->state != DS_FOLLOW && strcmp(ds->hkey, hkey) == 0)
			n++;
	return n;
}

/* The host part of an accepted peer's address. */
static void
peer_host(const struct sockaddr *sa, char *host, size_t len)
{
	if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr,
		    host, (socklen_t)len);
	else
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr,
		    host, (socklen_t)len);
}

/*
 * Connections still in their TLS handshake (tlsshim.c), each with the
 * address it came from: counted with the sessions against max-sessions
 * and, per address, against max-sessions-per-host.
 */
struct tls_pending {
	TAILQ_ENTRY(tls_pending) entry;
	struct tlsshim		*sh;
	struct sockaddr_storage	 ss;
	socklen_t		 sslen;
	char			 host[INET6_ADDRSTRLEN];
	char			 hkey[HOSTLIMIT_KEY_MAX];
	uint64_t		 accepted;	/* usec: the op-phase deadline's start */
};

static TAILQ_HEAD(, tls_pending) tls_pending =
    TAILQ_HEAD_INITIALIZER(tls_pending);
static unsigned ntls_pending;
static SSL_CTX *tls_ctx;
static int tls_marker;		/* a TLS listener's callback argument */
static int tls_opt_marker;	/* a tls=optional listener's */

/* May another connection from this address start now? */
static bool
server_admit(const char *host, const char *hkey)
{
	struct tls_pending *tp;
	unsigned n;

	if (gw->nsessions + ntls_pending >= gw->max_sessions) {
		cnt_refusal("max-sessions");
		log_warnx("downstream connection refused: %u sessions, %u TLS "
		    "handshakes", gw->nsessions, ntls_pending);
		return false;
	}
	n = requests_from(hkey);
	TAILQ_FOREACH(tp, &tls_pending, entry)
		if (strcmp(tp->hkey, hkey) == 0)
			n++;
	if (n >= gw->max_sessions_per_host) {
		/* counted for the minute's audit-suppressed row */
		log_debug("downstream connection from %s refused: %u requests "
		    "in progress from %s", host, gw->max_sessions_per_host,
		    hkey);
		cnt_refusal("max-sessions-per-host");
		hostlimit_refused(host);
		return false;
	}
	return true;
}

/*
 * A session for an accepted connection (TCP, or the socketpair end of a
 * TLS one): the op phase starts, with its deadline.  NULL if out of
 * memory (fd closed).
 */
static struct dsession *
ds_new(evutil_socket_t fd, const struct sockaddr *sa, socklen_t salen,
    const char *host, const char *hkey, unsigned op_ms)
{
	struct dsession *ds;
	struct timeval tv = { op_ms / 1000, (op_ms % 1000) * 1000 };

	ds = xcalloc(1, sizeof(*ds));	/* state DS_OP */
	ds->gw = gw;
	ds->started = now_usec();
	memcpy(&ds->ss, sa, (size_t)salen < sizeof(ds->ss) ? (size_t)salen :
	    sizeof(ds->ss));
	usbgw_strlcpy(ds->host, host, sizeof(ds->host));
	if (usbgw_addr_parse(host, &ds->addr) == -1)
		memset(&ds->addr, 0, sizeof(ds->addr));	/* matches no address */
	usbgw_strlcpy(ds->hkey, hkey, sizeof(ds->hkey));
	snprintf(ds->peer, sizeof(ds->peer), "%s", host);
	gw_socket_tune(fd);
	ds->bev = bufferevent_socket_new(gw->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (ds->bev == NULL) {
		evutil_closesocket(fd);
		free(ds);
		return NULL;
	}
	TAILQ_INSERT_TAIL(&gw->sessions, ds, entry);
	gw->nsessions++;
	bufferevent_setcb(ds->bev, ds_read, NULL, ds_event, ds);
	bufferevent_setwatermark(ds->bev, EV_READ, 0, 4096);
	/* the op phase's deadline runs from now; writes have a timeout */
	bufferevent_set_timeouts(ds->bev, NULL, &tv);
	ds->op_ev = evtimer_new(gw->base, ds_op_deadline, ds);
	evtimer_add(ds->op_ev, &tv);
	return ds;
}

static void
tls_pending_free(struct tls_pending *tp)
{
	TAILQ_REMOVE(&tls_pending, tp, entry);
	ntls_pending--;
	free(tp);
}

/* A handshake failed, or a TLS listener saw plaintext: refused, audited. */
static void
server_tls_failed(const char *why, int audit, void *arg)
{
	struct tls_pending *tp = arg;
	bool quiet = !audit || !hostlimit_audit(tp->host, HL_TLS_REFUSED);

	cnt_refusal("tls handshake");
	(quiet ? log_debug : log_info)("session %s: TLS connection refused: "
	    "%s", tp->host, why);
	if (!quiet)
		store_audit("tls-refused", NULL, tp->host, why);
	tls_pending_free(tp);
}

/*
 * The handshake verified a certificate of this gateway's CA: a session on
 * the socketpair's end, named by the certificate.  The name is the
 * certificate's CN as the chain vouches for it, nothing the host says in
 * the session, and no DNS look-up runs (a certificate is the stronger
 * proof); the address is kept for address limits and the records.
 */
static void	ds_start_plain(struct dsession *);

static void
server_tls_ready(int fd, const struct tlsid_peer *peer,
    const struct tlsshim_pairing *pairing, void *arg)
{
	struct tls_pending *tp = arg;
	struct dsession *ds;
	uint64_t spent_ms = (now_usec() - tp->accepted) / 1000;
	unsigned left_ms;

	if (peer != NULL && peer->pairing) {
		/* a placeholder: the enrollment exchange only (enroll.c) */
		enroll_pairing_accept(fd, peer, pairing, tp->host);
		tls_pending_free(tp);
		return;
	}

	/* one op-phase deadline from accept: the handshake spent some */
	left_ms = spent_ms >= GW_OP_TIMEOUT_MS ? 1 :
	    GW_OP_TIMEOUT_MS - (unsigned)spent_ms;
	ds = ds_new(fd, (struct sockaddr *)&tp->ss, tp->sslen, tp->host,
	    tp->hkey, left_ms);
	tls_pending_free(tp);
	if (ds == NULL)
		return;
	if (peer == NULL) {
		/* an optional listener, and the first byte was not TLS's */
		ds_start_plain(ds);
		return;
	}
	ds->tls = true;
	ds->cert = *peer;
	usbgw_strlcpy(ds->host_name, peer->name, sizeof(ds->host_name));
	ds->name_src = DS_NAME_CERT;
	ds->named = true;
	snprintf(ds->peer, sizeof(ds->peer), "%s (tls %s)", ds->host,
	    peer->name);
	bufferevent_enable(ds->bev, EV_READ | EV_WRITE);
	log_info("session %s: TLS, certificate CN=%s role %s fingerprint "
	    "%.16s...", ds->peer, peer->name, tlsid_role_name(peer->role),
	    peer->fpr);
}

/* Accepted on a TLS listener: the first byte and the handshake first.
 * optional: a first byte other than TLS's makes it a plain session. */
static void
server_accept_tls(evutil_socket_t fd, const struct sockaddr *sa,
    socklen_t salen, const char *host, const char *hkey, bool optional)
{
	struct tls_pending *tp;

	if (tls_ctx == NULL) {		/* cannot happen: no listener then */
		evutil_closesocket(fd);
		return;
	}
	tp = xcalloc(1, sizeof(*tp));
	memcpy(&tp->ss, sa, (size_t)salen < sizeof(tp->ss) ? (size_t)salen :
	    sizeof(tp->ss));
	tp->sslen = salen;
	tp->accepted = now_usec();
	usbgw_strlcpy(tp->host, host, sizeof(tp->host));
	usbgw_strlcpy(tp->hkey, hkey, sizeof(tp->hkey));
	gw_socket_tune(fd);
	TAILQ_INSERT_TAIL(&tls_pending, tp, entry);
	ntls_pending++;
	tp->sh = tlsshim_start(gw->base, tls_ctx, fd, optional ?
	    TLSSHIM_OPTIONAL : 0, GW_OP_TIMEOUT_MS, server_tls_ready,
	    server_tls_failed, tp);
	if (tp->sh == NULL)
		tls_pending_free(tp);
	else
		log_debug("session %s: TLS connection, handshake", host);
}

/*
 * The check every client certificate passes at the handshake, after its
 * chain: a vhci host or an agent (tlsid.c admits no other role).  What
 * each may do is decided by its role afterwards: on a listener, by the
 * first request (ds_read: an agent's hello, a host's op request); on the
 * gateway's own connection to an exporter, by gw_connect_tls (an agent
 * named as the exporter).
 */
static int
server_tls_check(const struct tlsid_peer *peer, void *arg, char *why,
    size_t whylen)
{
	(void)arg;
	if (peer->role != TLSID_ROLE_HOST && peer->role != TLSID_ROLE_AGENT) {
		snprintf(why, whylen, "certificate CN=%s has the role %s: "
		    "expected host or agent", peer->name,
		    tlsid_role_name(peer->role));
		return -1;
	}
	/* enrolled, active, unexpired: the agents table (enroll.c) */
	return enroll_check(peer, why, whylen);
}

void
server_set_tls(SSL_CTX *ctx)
{
	if (ctx != NULL)
		SSL_CTX_up_ref(ctx);
	SSL_CTX_free(tls_ctx);
	tls_ctx = ctx;
}

bool
server_tls_enabled(void)
{
	return tls_ctx != NULL;
}

/* The check hook for tlsid_ctx_server (usbgwd.c makes the context). */
tlsid_check_fn
server_tls_checker(void)
{
	return server_tls_check;
}

static void
server_accept(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct dsession *ds;
	char host[INET6_ADDRSTRLEN], hkey[HOSTLIMIT_KEY_MAX];

	peer_host(sa, host, sizeof(host));
	hostlimit_key(host, hkey, sizeof(hkey));
	if (!server_admit(host, hkey)) {
		evutil_closesocket(fd);
		return;
	}
	if (arg == &tls_marker || arg == &tls_opt_marker) {
		server_accept_tls(fd, sa, (socklen_t)salen, host, hkey,
		    arg == &tls_opt_marker);
		return;
	}
	if ((ds = ds_new(fd, sa, (socklen_t)salen, host, hkey,
	    GW_OP_TIMEOUT_MS)) == NULL)
		return;
	ds_start_plain(ds);
}

/* A plain session starts: reading, and its name looked up (FCrDNS). */
static void
ds_start_plain(struct dsession *ds)
{
	bufferevent_enable(ds->bev, EV_READ | EV_WRITE);
	log_debug("session %s: connected", ds->peer);
	/* its name, verified off the loop; requests wait for it (bounded) */
	ds->name_req = hostname_lookup((struct sockaddr *)&ds->ss,
	    ds->ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
	    sizeof(struct sockaddr_in), ds_named, ds);
	if (ds->name_req == NULL)
		ds->named = true;	/* look-ups not running: no name */
}

static void
server_resume(evutil_socket_t fd, short what, void *arg)
{
	evconnlistener_enable(arg);
}

static void
server_accept_error(struct evconnlistener *l, void *arg)
{
	struct timeval tv = { 1, 0 };
	int err = EVUTIL_SOCKET_ERROR();

	log_warnx("accept: %s", evutil_socket_error_to_string(err));
	if (err == EMFILE || err == ENFILE) {
		/* pause accepting for a second instead of spinning */
		evconnlistener_disable(l);
		event_base_once(gw->base, -1, EV_TIMEOUT, server_resume, l, &tv);
	}
}

/* Listen on "HOST:PORT" (host may be empty for every address). */
static int
listen_on(const char *host, const char *port, void *arg)
{
	struct addrinfo hints, *res, *ai;
	struct evconnlistener *l;
	int r, n = 0;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV;
	if ((r = getaddrinfo(host[0] ? host : NULL, port, &hints, &res)) != 0) {
		log_warnx("listen %s:%s: %s", host, port, gai_strerror(r));
		return -1;
	}
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		evutil_socket_t fd;
		int one = 1;

		if (gw->nlisteners >= (int)nitems(gw->listeners))
			break;
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK |
		    SOCK_CLOEXEC, 0);
		if (fd == -1)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (ai->ai_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one,
			    sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == -1) {
			log_warn("bind %s:%s", host, port);
			close(fd);
			continue;
		}
		l = evconnlistener_new(gw->base, server_accept, arg,
		    LEV_OPT_CLOSE_ON_FREE, 128, fd);
		if (l == NULL) {
			close(fd);
			continue;
		}
		evconnlistener_set_error_cb(l, server_accept_error);
		gw->listeners[gw->nlisteners++] = l;
		n++;
	}
	freeaddrinfo(res);
	return n > 0 ? 0 : -1;
}

/* Plain USB/IP (-l, listen); optional: TLS too, the first byte decides. */
int
server_listen(const char *host, const char *port, bool optional)
{
	if (optional && tls_ctx == NULL)
		return -1;
	return listen_on(host, port, optional ? &tls_opt_marker : NULL);
}

/* USB/IP in TLS (tls-listen); server_set_tls first. */
int
server_listen_tls(const char *host, const char *port)
{
	if (tls_ctx == NULL)
		return -1;
	return listen_on(host, port, &tls_marker);
}

/* The port the first listener got (tests listen on port 0). */
int
server_port(void)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	evutil_socket_t fd;

	if (gw->nlisteners == 0)
		return -1;
	fd = evconnlistener_get_fd(gw->listeners[0]);
	if (getsockname(fd, (struct sockaddr *)&ss, &len) == -1)
		return -1;
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

void
server_shutdown(void)
{
	struct tls_pending *tp;
	struct dsession *ds;
	int i;

	for (i = 0; i < gw->nlisteners; i++)
		evconnlistener_free(gw->listeners[i]);
	gw->nlisteners = 0;
	while ((tp = TAILQ_FIRST(&tls_pending)) != NULL) {
		tlsshim_free(tp->sh);
		tls_pending_free(tp);
	}
	while ((ds = TAILQ_FIRST(&gw->sessions)) != NULL)
		dsession_close(ds, "gateway shutting down");
	tlsshim_shutdown();
	server_set_tls(NULL);
}
