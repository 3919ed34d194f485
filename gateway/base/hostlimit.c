/*
 * Per-key budgets for audit rows caused by peers the gateway refuses (see
 * hostlimit.h).  A fixed one-minute window per key, started by the key's
 * first request; one global window for the total.  A chained hash table
 * of at most HOSTLIMIT_MAX_HOSTS keys, and one shared entry beyond that.
 * Each struct hostlimit is one such set of budgets: the USB/IP side's
 * (per address, the hostlimit_* functions without an instance) and the
 * control socket's (per uid).
 */
#include <arpa/inet.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "base/hostlimit.h"
#include "base/log.h"
#include "base/util.h"

#define HL_BUCKETS	1024
#define HL_SWEEP_MS	5000

struct hl_host {
	struct hl_host	*next;
	char		 key[HOSTLIMIT_KEY_MAX];
	uint64_t	 window_start;
	unsigned	 written;
	unsigned	 suppressed[HOSTLIMIT_MAX_KINDS];
	unsigned	 refused;
};

static const char *const usbip_kinds[HL_NKINDS] = {
	"import-unknown", "import-refused", "access-request", "malformed",
	"agent-refused", "tls-refused",
};

struct hostlimit {
	struct hostlimit_spec	 spec;
	struct hl_host		*bucket[HL_BUCKETS];
	struct hl_host		*other;
	unsigned		 nkeys;
	unsigned		 per_host, total;
	uint64_t		 total_start;
	unsigned		 total_written;
	hostlimit_clock_fn	 clock;
	struct event		*sweep_ev;
};

/* The USB/IP side's budgets, behind the functions without an instance. */
static struct hostlimit *usbip_hl;
static const struct hostlimit_spec usbip_spec = {
	.kinds = usbip_kinds,
	.nkinds = HL_NKINDS,
	.refused = "connections refused (max-sessions-per-host)",
	.per_key = "from one address",
	.by_prefix = true,
};

static uint64_t
hl_default_clock(void)
{
	return now_usec() / 1000;
}

static uint64_t
hl_now(struct hostlimit *H)
{
	if (H->clock == NULL)
		H->clock = hl_default_clock;
	return H->clock();
}

static uint32_t
hl_hash(const char *s)
{
	uint32_t h = 2166136261u;

	while (*s != '\0') {
		h ^= (unsigned char)*s++;
		h *= 16777619u;
	}
	return h;
}

void
hostlimit_key(const char *addr, char *key, size_t keylen)
{
	struct in6_addr a;
	char buf[INET6_ADDRSTRLEN];

	if (strchr(addr, ':') != NULL && inet_pton(AF_INET6, addr, &a) == 1 &&
	    !IN6_IS_ADDR_V4MAPPED(&a) && !IN6_IS_ADDR_LOOPBACK(&a)) {
		memset(a.s6_addr + 8, 0, 8);
		inet_ntop(AF_INET6, &a, buf, sizeof(buf));
		snprintf(key, keylen, "%s/64", buf);
		return;
	}
	usbgw_strlcpy(key, addr, keylen);
}

static bool
hl_pending(const struct hostlimit *H, const struct hl_host *h)
{
	int k;

	if (h->refused > 0)
		return true;
	for (k = 0; k < H->spec.nkinds; k++)
		if (h->suppressed[k] > 0)
			return true;
	return false;
}

/* Write h's summary (if anything was held back) and start a new window. */
static void
hl_close_window(struct hostlimit *H, struct hl_host *h, uint64_t now)
{
	char detail[512];
	size_t off;
	int k, first = 1;

	if (hl_pending(H, h) && H->spec.write != NULL) {
		off = (size_t)snprintf(detail, sizeof(detail),
		    "in %llu s, not written one by one:",
		    (unsigned long long)((now - h->window_start + 999) / 1000));
		for (k = 0; k < H->spec.nkinds; k++) {
			if (h->suppressed[k] == 0 || off >= sizeof(detail))
				continue;
			off += (size_t)snprintf(detail + off, sizeof(detail) - off,
			    "%s %u %s", first ? "" : ",", h->suppressed[k],
			    H->spec.kinds[k]);
			first = 0;
		}
		if (first && off < sizeof(detail))
			off += (size_t)snprintf(detail + off, sizeof(detail) - off,
			    " nothing");
		if (h->refused > 0 && off < sizeof(detail))
			off += (size_t)snprintf(detail + off, sizeof(detail) - off,
			    "; %u %s", h->refused, H->spec.refused);
		if (off < sizeof(detail))
			snprintf(detail + off, sizeof(detail) - off,
			    " (limits: %u rows a minute %s, %u from all)",
			    H->per_host, H->spec.per_key, H->total);
		H->spec.write(h->key, detail);
	}
	memset(h->suppressed, 0, sizeof(h->suppressed));
	h->refused = 0;
	h->written = 0;
	h->window_start = now;
}

static struct hl_host *
hl_find(struct hostlimit *H, const char *addr, uint64_t now)
{
	char key[HOSTLIMIT_KEY_MAX];
	struct hl_host *h;
	uint32_t b;

	if (H->spec.by_prefix)
		hostlimit_key(addr, key, sizeof(key));
	else
		usbgw_strlcpy(key, addr, sizeof(key));
	b = hl_hash(key) % HL_BUCKETS;
	for (h = H->bucket[b]; h != NULL; h = h->next)
		if (strcmp(h->key, key) == 0)
			break;
	if (h == NULL) {
		if (H->nkeys >= HOSTLIMIT_MAX_HOSTS) {
			if (H->other == NULL) {
				H->other = xcalloc(1, sizeof(*H->other));
				usbgw_strlcpy(H->other->key, HOSTLIMIT_OTHER,
				    sizeof(H->other->key));
				H->other->window_start = now;
			}
			h = H->other;
		} else {
			h = xcalloc(1, sizeof(*h));
			usbgw_strlcpy(h->key, key, sizeof(h->key));
			h->window_start = now;
			h->next = H->bucket[b];
			H->bucket[b] = h;
			H->nkeys++;
		}
	}
	if (now - h->window_start >= HOSTLIMIT_WINDOW_MS)
		hl_close_window(H, h, now);
	return h;
}

bool
hostlimit_check(struct hostlimit *H, const char *key, int kind)
{
	uint64_t now = hl_now(H);
	struct hl_host *h = hl_find(H, key, now);

	if (kind < 0 || kind >= H->spec.nkinds)
		kind = 0;
	if (now - H->total_start >= HOSTLIMIT_WINDOW_MS) {
		H->total_start = now;
		H->total_written = 0;
	}
	if ((H->per_host != 0 && h->written >= H->per_host) ||
	    (H->total != 0 && H->total_written >= H->total)) {
		h->suppressed[kind]++;
		return false;
	}
	h->written++;
	H->total_written++;
	return true;
}

void
hostlimit_count_refused(struct hostlimit *H, const char *key)
{
	hl_find(H, key, hl_now(H))->refused++;
}

void
hostlimit_sweep_of(struct hostlimit *H)
{
	uint64_t now = hl_now(H);
	struct hl_host **pp, *h;
	int b;

	for (b = 0; b < HL_BUCKETS; b++) {
		for (pp = &H->bucket[b]; (h = *pp) != NULL; ) {
			if (now - h->window_start >= HOSTLIMIT_WINDOW_MS) {
				bool idle = !hl_pending(H, h) && h->written == 0;

				hl_close_window(H, h, now);
				if (idle) {	/* a whole window without a request */
					*pp = h->next;
					free(h);
					H->nkeys--;
					continue;
				}
			}
			pp = &h->next;
		}
	}
	if (H->other != NULL &&
	    now - H->other->window_start >= HOSTLIMIT_WINDOW_MS)
		hl_close_window(H, H->other, now);
}

static void
hl_sweep_cb(evutil_socket_t fd, short what, void *arg)
{
	hostlimit_sweep_of(arg);
}

struct hostlimit *
hostlimit_new(struct event_base *base, const struct hostlimit_spec *spec,
    hostlimit_clock_fn clock)
{
	struct timeval tv = { HL_SWEEP_MS / 1000, (HL_SWEEP_MS % 1000) * 1000 };
	struct hostlimit *H;

	if (spec->nkinds < 1 || spec->nkinds > HOSTLIMIT_MAX_KINDS)
		fatalx("hostlimit_new: %d kinds", spec->nkinds);
	H = xcalloc(1, sizeof(*H));
	H->spec = *spec;
	H->clock = clock != NULL ? clock : hl_default_clock;
	H->total_start = H->clock();
	if (base != NULL) {
		H->sweep_ev = event_new(base, -1, EV_PERSIST, hl_sweep_cb, H);
		event_add(H->sweep_ev, &tv);
	}
	return H;
}

void
hostlimit_limits(struct hostlimit *H, unsigned per_key, unsigned total)
{
	H->per_host = per_key;
	H->total = total;
}

unsigned
hostlimit_nkeys_of(const struct hostlimit *H)
{
	return H->nkeys + (H->other != NULL);
}

/* Write every pending summary, empty the table, stop the sweep. */
static void
hl_clear(struct hostlimit *H)
{
	uint64_t now = hl_now(H);
	struct hl_host *h, *next;
	int b;

	if (H->sweep_ev != NULL)
		event_free(H->sweep_ev);
	H->sweep_ev = NULL;
	for (b = 0; b < HL_BUCKETS; b++) {
		for (h = H->bucket[b]; h != NULL; h = next) {
			next = h->next;
			if (hl_pending(H, h))
				hl_close_window(H, h, now);
			free(h);
		}
		H->bucket[b] = NULL;
	}
	if (H->other != NULL) {
		if (hl_pending(H, H->other))
			hl_close_window(H, H->other, now);
		free(H->other);
		H->other = NULL;
	}
	H->nkeys = 0;
}

void
hostlimit_free(struct hostlimit *H)
{
	if (H == NULL)
		return;
	hl_clear(H);
	free(H);
}

/* ---- the USB/IP side's budgets ---------------------------------------- */

static struct hostlimit *
usbip(void)
{
	if (usbip_hl == NULL)
		usbip_hl = hostlimit_new(NULL, &usbip_spec, NULL);
	return usbip_hl;
}

bool
hostlimit_audit(const char *addr, enum hostlimit_kind kind)
{
	return hostlimit_check(usbip(), addr, (int)kind);
}

void
hostlimit_refused(const char *addr)
{
	hostlimit_count_refused(usbip(), addr);
}

void
hostlimit_sweep(void)
{
	hostlimit_sweep_of(usbip());
}

void
hostlimit_init(struct event_base *base, hostlimit_write_fn write,
    hostlimit_clock_fn clock)
{
	struct hostlimit_spec spec = usbip_spec;
	unsigned per = 0, total = 0;

	if (usbip_hl != NULL) {
		per = usbip_hl->per_host;
		total = usbip_hl->total;
		hostlimit_free(usbip_hl);
	}
	spec.write = write;
	usbip_hl = hostlimit_new(base, &spec, clock);
	hostlimit_limits(usbip_hl, per, total);
}

void
hostlimit_set(unsigned per_host, unsigned total)
{
	hostlimit_limits(usbip(), per_host, total);
}

unsigned
hostlimit_nkeys(void)
{
	return hostlimit_nkeys_of(usbip());
}

/* (the instance stays, empty: limits and writer as they were) */
void
hostlimit_shutdown(void)
{
	hl_clear(usbip());
}
