/*
 * Per-address budgets for audit rows caused by unauthenticated peers (see
 * hostlimit.h).  A fixed one-minute window per key, started by the key's
 * first request; one global window for the total.  A chained hash table
 * of at most HOSTLIMIT_MAX_HOSTS keys, and one shared entry beyond that.
 */
#include <arpa/inet.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "hostlimit.h"
#include "util.h"

#define HL_BUCKETS	1024
#define HL_SWEEP_MS	5000

struct hl_host {
	struct hl_host	*next;
	char		 key[HOSTLIMIT_KEY_MAX];
	uint64_t	 window_start;
	unsigned	 written;
	unsigned	 suppressed[HL_NKINDS];
	unsigned	 refused;
};

static const char *const kind_names[HL_NKINDS] = {
	"import-unknown", "import-refused", "access-request", "malformed",
};

static struct {
	struct hl_host		*bucket[HL_BUCKETS];
	struct hl_host		*other;
	unsigned		 nkeys;
	unsigned		 per_host, total;
	uint64_t		 total_start;
	unsigned		 total_written;
	hostlimit_write_fn	 write;
	hostlimit_clock_fn	 clock;
	struct event		*sweep_ev;
} H;

static uint64_t
hl_default_clock(void)
{
	return now_usec() / 1000;
}

static uint64_t
hl_now(void)
{
	if (H.clock == NULL)
		H.clock = hl_default_clock;
	return H.clock();
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
hl_pending(const struct hl_host *h)
{
	int k;

	if (h->refused > 0)
		return true;
	for (k = 0; k < HL_NKINDS; k++)
		if (h->suppressed[k] > 0)
			return true;
	return false;
}

/* Write h's summary (if anything was held back) and start a new window. */
static void
hl_close_window(struct hl_host *h, uint64_t now)
{
	char detail[512];
	size_t off;
	int k, first = 1;

	if (hl_pending(h) && H.write != NULL) {
		off = (size_t)snprintf(detail, sizeof(detail),
		    "in %llu s, not written one by one:",
		    (unsigned long long)((now - h->window_start + 999) / 1000));
		for (k = 0; k < HL_NKINDS; k++) {
			if (h->suppressed[k] == 0 || off >= sizeof(detail))
				continue;
			off += (size_t)snprintf(detail + off, sizeof(detail) - off,
			    "%s %u %s", first ? "" : ",", h->suppressed[k],
			    kind_names[k]);
			first = 0;
		}
		if (first && off < sizeof(detail))
			off += (size_t)snprintf(detail + off, sizeof(detail) - off,
			    " nothing");
		if (h->refused > 0 && off < sizeof(detail))
			off += (size_t)snprintf(detail + off, sizeof(detail) - off,
			    "; %u connections refused (max-sessions-per-host)",
			    h->refused);
		if (off < sizeof(detail))
			snprintf(detail + off, sizeof(detail) - off,
			    " (limits: %u rows a minute from one address, %u "
			    "from all)", H.per_host, H.total);
		H.write(h->key, detail);
	}
	memset(h->suppressed, 0, sizeof(h->suppressed));
	h->refused = 0;
	h->written = 0;
	h->window_start = now;
}

static struct hl_host *
hl_find(const char *addr, uint64_t now)
{
	char key[HOSTLIMIT_KEY_MAX];
	struct hl_host *h;
	uint32_t b;

	hostlimit_key(addr, key, sizeof(key));
	b = hl_hash(key) % HL_BUCKETS;
	for (h = H.bucket[b]; h != NULL; h = h->next)
		if (strcmp(h->key, key) == 0)
			break;
	if (h == NULL) {
		if (H.nkeys >= HOSTLIMIT_MAX_HOSTS) {
			if (H.other == NULL) {
				H.other = xcalloc(1, sizeof(*H.other));
				usbgw_strlcpy(H.other->key, HOSTLIMIT_OTHER,
				    sizeof(H.other->key));
				H.other->window_start = now;
			}
			h = H.other;
		} else {
			h = xcalloc(1, sizeof(*h));
			usbgw_strlcpy(h->key, key, sizeof(h->key));
			h->window_start = now;
			h->next = H.bucket[b];
			H.bucket[b] = h;
			H.nkeys++;
		}
	}
	if (now - h->window_start >= HOSTLIMIT_WINDOW_MS)
		hl_close_window(h, now);
	return h;
}

bool
hostlimit_audit(const char *addr, enum hostlimit_kind kind)
{
	uint64_t now = hl_now();
	struct hl_host *h = hl_find(addr, now);

	if (now - H.total_start >= HOSTLIMIT_WINDOW_MS) {
		H.total_start = now;
		H.total_written = 0;
	}
	if ((H.per_host != 0 && h->written >= H.per_host) ||
	    (H.total != 0 && H.total_written >= H.total)) {
		h->suppressed[kind]++;
		return false;
	}
	h->written++;
	H.total_written++;
	return true;
}

void
hostlimit_refused(const char *addr)
{
	hl_find(addr, hl_now())->refused++;
}

void
hostlimit_sweep(void)
{
	uint64_t now = hl_now();
	struct hl_host **pp, *h;
	int b;

	for (b = 0; b < HL_BUCKETS; b++) {
		for (pp = &H.bucket[b]; (h = *pp) != NULL; ) {
			if (now - h->window_start >= HOSTLIMIT_WINDOW_MS) {
				bool idle = !hl_pending(h) && h->written == 0;

				hl_close_window(h, now);
				if (idle) {	/* a whole window without a request */
					*pp = h->next;
					free(h);
					H.nkeys--;
					continue;
				}
			}
			pp = &h->next;
		}
	}
	if (H.other != NULL && now - H.other->window_start >= HOSTLIMIT_WINDOW_MS)
		hl_close_window(H.other, now);
}

static void
hl_sweep_cb(evutil_socket_t fd, short what, void *arg)
{
	hostlimit_sweep();
}

void
hostlimit_init(struct event_base *base, hostlimit_write_fn write,
    hostlimit_clock_fn clock)
{
	struct timeval tv = { HL_SWEEP_MS / 1000, (HL_SWEEP_MS % 1000) * 1000 };

	H.write = write;
	H.clock = clock != NULL ? clock : hl_default_clock;
	H.total_start = H.clock();
	if (base != NULL) {
		H.sweep_ev = event_new(base, -1, EV_PERSIST, hl_sweep_cb, NULL);
		event_add(H.sweep_ev, &tv);
	}
}

void
hostlimit_set(unsigned per_host, unsigned total)
{
	H.per_host = per_host;
	H.total = total;
}

unsigned
hostlimit_nkeys(void)
{
	return H.nkeys + (H.other != NULL);
}

void
hostlimit_shutdown(void)
{
	uint64_t now = hl_now();
	struct hl_host *h, *next;
	int b;

	if (H.sweep_ev != NULL)
		event_free(H.sweep_ev);
	H.sweep_ev = NULL;
	for (b = 0; b < HL_BUCKETS; b++) {
		for (h = H.bucket[b]; h != NULL; h = next) {
			next = h->next;
			if (hl_pending(h))
				hl_close_window(h, now);
			free(h);
		}
		H.bucket[b] = NULL;
	}
	if (H.other != NULL) {
		if (hl_pending(H.other))
			hl_close_window(H.other, now);
		free(H.other);
		H.other = NULL;
	}
	H.nkeys = 0;
}
