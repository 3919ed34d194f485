/*
 * The Prometheus text endpoint (issue 18 item 2): `metrics-listen =
 * [ADDRESS:]PORT` (a bare port is on 127.0.0.1; off unless set) serves
 * GET /metrics in the text format 0.0.4 with libevent's evhttp, on the
 * daemon's loop.  What it shows is read at request time: the devices and
 * exporters from gw, the totals from counters.c.  Bounded: GET and HEAD
 * only, 8 KiB of headers, no body, 10 s per connection; anything else is
 * 404 or 501.  It shows counts and names the operator already sees in
 * `usbgw list` (busids are not labels: a label per device would grow
 * with the fleet), so a loopback listener is the default and anything
 * wider is the operator's choice (protect it as the control socket).
 */
#include <sys/types.h>

#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "control/config.h"
#include "base/counters.h"
#include "proto/ctl.h"
#include "core/device.h"
#include "core/exporter.h"
#include "base/log.h"
#include "core/loop.h"
#include "daemon/metrics.h"
#include "core/store.h"
#include "base/util.h"

static struct evhttp *http;

/* A label value: \\, \" and \n escaped (the text format's rules). */
static void
lv(struct evbuffer *b, const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s == '\\' || *s == '"')
			evbuffer_add_printf(b, "\\%c", *s);
		else if (*s == '\n')
			evbuffer_add(b, "\\n", 2);
		else
			evbuffer_add(b, s, 1);
	}
}

static void
head(struct evbuffer *b, const char *name, const char *type,
    const char *help)
{
	evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help,
	    name, type);
}

static void
scalar(struct evbuffer *b, const char *name, const char *type,
    const char *help, unsigned long long v)
{
	head(b, name, type, help);
	evbuffer_add_printf(b, "%s %llu\n", name, v);
}

static void
metrics_write(struct evbuffer *b)
{
	struct exporter *exp;
	struct device *dev;
	unsigned long long n[DEV_NSTATES], attached = 0, cum;
	unsigned i;
	int st;

	head(b, "usbgw_devices", "gauge", "Devices the gateway holds, by "
	    "exporter and state.");
	TAILQ_FOREACH(exp, &gw->exporters, entry) {
		if (exp->dead)
			continue;
		memset(n, 0, sizeof(n));
		TAILQ_FOREACH(dev, &exp->devices, entry)
			if (!dev->dead && dev->state < DEV_NSTATES)
				n[dev->state]++;
		for (st = 0; st < DEV_NSTATES; st++) {
			if (st == DEV_GONE)
				continue;
			evbuffer_add(b, "usbgw_devices{exporter=\"", 24);
			lv(b, exp->name);
			evbuffer_add_printf(b, "\",state=\"%s\"} %llu\n",
			    dev_state_name((enum dev_state)st), n[st]);
		}
		attached += n[DEV_ATTACHED];
	}
	head(b, "usbgw_exporter_up", "gauge", "1 if the exporter answers, "
	    "0 if not.");
	TAILQ_FOREACH(exp, &gw->exporters, entry) {
		if (exp->dead)
			continue;
		evbuffer_add(b, "usbgw_exporter_up{exporter=\"", 28);
		lv(b, exp->name);
		evbuffer_add_printf(b, "\"} %d\n", exp->state == EXP_UP);
	}
	scalar(b, "usbgw_store_up", "gauge", "1 if the database answers, 0 "
	    "while the gateway is degraded (nothing new is authorized).",
	    !store_degraded());
	scalar(b, "usbgw_store_lost_total", "counter", "Times the database "
	    "became unreachable.", cnt.store_lost);
	scalar(b, "usbgw_attachments", "gauge", "Devices attached to a vhci "
	    "host now.", attached);
	scalar(b, "usbgw_sessions", "gauge", "USB/IP sessions from vhci hosts "
	    "now.", gw->nsessions);
	head(b, "usbgw_relayed_bytes_total", "counter", "Bytes relayed "
	    "between vhci hosts and devices (USB/IP headers included).");
	evbuffer_add_printf(b, "usbgw_relayed_bytes_total{direction="
	    "\"to_device\"} %llu\n", (unsigned long long)
	    cnt.relay_bytes_to_device);
	evbuffer_add_printf(b, "usbgw_relayed_bytes_total{direction="
	    "\"from_device\"} %llu\n", (unsigned long long)
	    cnt.relay_bytes_from_device);
	scalar(b, "usbgw_relayed_urbs_total", "counter", "URBs completed "
	    "through the relay.", cnt.relay_urbs);
	scalar(b, "usbgw_relay_iface_refused_total", "counter", "URBs and "
	    "control requests to denied interfaces answered by the relay "
	    "with a stall.", cnt.relay_refused);
	head(b, "usbgw_refusals_total", "counter", "Imports and connections "
	    "refused, by reason.");
	for (i = 0; i <= CNT_MAX_REASONS; i++) {
		if (cnt.reasons[i].n == 0)
			continue;
		evbuffer_add_printf(b, "usbgw_refusals_total{reason=\"%s\"} "
		    "%llu\n", cnt.reasons[i].label,
		    (unsigned long long)cnt.reasons[i].n);
	}
	scalar(b, "usbgw_access_requests_total", "counter", "Imports of a "
	    "pending device (access requests).", cnt.access_requests);
	head(b, "usbgw_probe_duration_seconds", "histogram", "Time from a "
	    "claim's connect to the end of its probe (probes that ended "
	    "well).");
	for (i = 0, cum = 0; i < CNT_PROBE_BUCKETS; i++) {
		cum += cnt.probe_bucket[i];
		evbuffer_add_printf(b, "usbgw_probe_duration_seconds_bucket"
		    "{le=\"%g\"} %llu\n", cnt_probe_bounds[i], cum);
	}
	cum += cnt.probe_bucket[CNT_PROBE_BUCKETS];
	evbuffer_add_printf(b, "usbgw_probe_duration_seconds_bucket{le="
	    "\"+Inf\"} %llu\n", cum);
	evbuffer_add_printf(b, "usbgw_probe_duration_seconds_sum %.6f\n",
	    (double)cnt.probe_usec_sum / 1e6);
	evbuffer_add_printf(b, "usbgw_probe_duration_seconds_count %llu\n",
	    (unsigned long long)cnt.probe_count);
	scalar(b, "usbgw_probes_failed_total", "counter", "Probes that failed "
	    "(timeout, error, exporter gone).", cnt.probes_failed);
	scalar(b, "usbgw_audit_rows_total", "counter", "Rows appended to the "
	    "audit log since the start.", cnt.audit_rows);
	scalar(b, "usbgw_control_requests_total", "counter", "Requests on the "
	    "control socket.", cnt.control_requests);
}

static void
metrics_cb(struct evhttp_request *req, void *arg)
{
	struct evbuffer *b;
	enum evhttp_cmd_type m = evhttp_request_get_command(req);

	if (m != EVHTTP_REQ_GET && m != EVHTTP_REQ_HEAD) {
		evhttp_send_error(req, 405, "GET or HEAD");
		return;
	}
	if ((b = evbuffer_new()) == NULL) {
		evhttp_send_error(req, 500, "out of memory");
		return;
	}
	metrics_write(b);
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	evhttp_send_reply(req, 200, "OK", b);
	evbuffer_free(b);
}

static void
other_cb(struct evhttp_request *req, void *arg)
{
	evhttp_send_error(req, 404, "only /metrics here");
}

int
metrics_start(struct event_base *base, const struct config *cfg)
{
	const char *host;
	long port;

	if (!cfg->metrics_on)
		return 0;
	if ((http = evhttp_new(base)) == NULL)
		return -1;
	evhttp_set_timeout(http, 10);
	evhttp_set_max_headers_size(http, 8192);
	evhttp_set_max_body_size(http, 0);
	evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD);
	evhttp_set_cb(http, "/metrics", metrics_cb, NULL);
	evhttp_set_gencb(http, other_cb, NULL);
	host = cfg->metrics_listen.host[0] != '\0' ? cfg->metrics_listen.host :
	    "0.0.0.0";
	port = strtol(cfg->metrics_listen.port, NULL, 10);
	if (evhttp_bind_socket(http, host, (unsigned short)port) != 0) {
		log_warnx("metrics: cannot listen on %s:%ld", host, port);
		evhttp_free(http);
		http = NULL;
		return -1;
	}
	log_info("metrics: http://%s:%ld/metrics", host, port);
	return 0;
}

void
metrics_stop(void)
{
	if (http != NULL)
		evhttp_free(http);
	http = NULL;
}
