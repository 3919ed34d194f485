/*
 * Human output: aligned tables, times, and the one rule for text that
 * came from a device or the network: it reaches the terminal only through
 * safe_dup()/print_safe(), which show control characters (C0, DEL, C1 and
 * invalid UTF-8) as '?' so a device's product string cannot drive the
 * operator's terminal.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "usbgw.h"
#include "base/util.h"

#define RING		32
#define RING_SIZE	1024
#define TABLE_MAX_COLS	12

struct table {
	int	  ncols;
	char	 *hdr[TABLE_MAX_COLS];
	int	  right[TABLE_MAX_COLS];
	char	***rows;
	size_t	  nrows, cap;
};

static char *
ring_next(void)
{
	static char ring[RING][RING_SIZE];
	static int next;

	next = (next + 1) % RING;
	ring[next][0] = '\0';
	return ring[next];
}

/* Length of the UTF-8 sequence at s, or 0 if it is not a valid one. */
static size_t
utf8_len(const unsigned char *s)
{
	size_t n, i;
	unsigned cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) {
		n = 2;
		cp = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		n = 3;
		cp = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		n = 4;
		cp = s[0] & 0x07;
	} else
		return 0;
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) ||
	    (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	if (cp >= 0x80 && cp <= 0x9f)
		return 0;		/* C1 controls */
	if (cp == 0x2028 || cp == 0x2029 || (cp >= 0x202a && cp <= 0x202e) ||
	    (cp >= 0x2066 && cp <= 0x2069))
		return 0;		/* line separators, bidi overrides */
	return n;
}

char *
safe_dup(const char *s)
{
	const unsigned char *p = (const unsigned char *)(s != NULL ? s : "");
	char *out, *o;
	size_t n;

	out = o = xmalloc(strlen((const char *)p) + 1);
	while (*p != '\0') {
		if (*p < 0x20 || *p == 0x7f) {
			*o++ = '?';
			p++;
			continue;
		}
		n = utf8_len(p);
		if (n == 0) {
			*o++ = '?';
			p++;
			continue;
		}
		memcpy(o, p, n);
		o += n;
		p += n;
	}
	*o = '\0';
	return out;
}

void
print_safe(FILE *f, const char *s)
{
	char *t = safe_dup(s);

	fputs(t, f);
	free(t);
}

/* Columns a string takes: one per code point (safe_dup'd text). */
static int
width(const char *s)
{
	int w = 0;

	for (; *s != '\0'; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			w++;
	return w;
}

struct table *
table_new(int ncols, ...)
{
	struct table *t;
	va_list ap;
	int i;

	if (ncols > TABLE_MAX_COLS)
		ncols = TABLE_MAX_COLS;
	t = xcalloc(1, sizeof(*t));
	t->ncols = ncols;
	va_start(ap, ncols);
	for (i = 0; i < ncols; i++)
		t->hdr[i] = xstrdup(va_arg(ap, const char *));
	va_end(ap);
	return t;
}

void
table_align_right(struct table *t, int col)
{
	if (col >= 0 && col < t->ncols)
		t->right[col] = 1;
}

void
table_add(struct table *t, ...)
{
	va_list ap;
	char **row;
	const char *s;
	int i;

	if (t->nrows == t->cap) {
		t->cap = t->cap * 2 + 16;
		t->rows = xreallocarray(t->rows, t->cap, sizeof(*t->rows));
	}
	row = xcalloc((size_t)t->ncols, sizeof(*row));
	va_start(ap, t);
	for (i = 0; i < t->ncols; i++) {
		s = va_arg(ap, const char *);
		row[i] = safe_dup(s != NULL && *s != '\0' ? s : "-");
	}
	va_end(ap);
	t->rows[t->nrows++] = row;
}

static void
print_row(FILE *f, const struct table *t, char **cells, const int *w)
{
	int i, pad, last = t->ncols - 1;

	for (i = 0; i < t->ncols; i++) {
		pad = w[i] - width(cells[i]);
		if (t->right[i])
			fprintf(f, "%*s%s", pad, "", cells[i]);
		else if (i < last)
			fprintf(f, "%s%*s", cells[i], pad, "");
		else
			fputs(cells[i], f);
		if (i < last)
			fputs("  ", f);
	}
	fputc('\n', f);
}

void
table_print(struct table *t, FILE *f)
{
	int w[TABLE_MAX_COLS], i;
	size_t r;

	for (i = 0; i < t->ncols; i++) {
		w[i] = width(t->hdr[i]);
		for (r = 0; r < t->nrows; r++)
			if (width(t->rows[r][i]) > w[i])
				w[i] = width(t->rows[r][i]);
	}
	print_row(f, t, t->hdr, w);
	for (r = 0; r < t->nrows; r++)
		print_row(f, t, t->rows[r], w);
}

void
table_free(struct table *t)
{
	size_t r;
	int i;

	if (t == NULL)
		return;
	for (r = 0; r < t->nrows; r++) {
		for (i = 0; i < t->ncols; i++)
			free(t->rows[r][i]);
		free(t->rows[r]);
	}
	for (i = 0; i < t->ncols; i++)
		free(t->hdr[i]);
	free(t->rows);
	free(t);
}

const char *
jstr(const json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));

	return s != NULL ? s : "";
}

const char *
jfmt(const json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	char *b;

	if (v == NULL || json_is_null(v))
		return "";
	b = ring_next();
	switch (json_typeof(v)) {
	case JSON_STRING:
		usbgw_strlcpy(b, json_string_value(v), RING_SIZE);
		break;
	case JSON_INTEGER:
		snprintf(b, RING_SIZE, "%" JSON_INTEGER_FORMAT,
		    json_integer_value(v));
		break;
	case JSON_REAL:
		snprintf(b, RING_SIZE, "%.1f", json_real_value(v));
		break;
	case JSON_TRUE:
		usbgw_strlcpy(b, "yes", RING_SIZE);
		break;
	case JSON_FALSE:
		usbgw_strlcpy(b, "no", RING_SIZE);
		break;
	default:
		break;
	}
	return b;
}

void
print_json(const json_t *v)
{
	json_dumpf(v, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(15));
	fputc('\n', stdout);
}

void
fmt_time(char *buf, size_t len, json_int_t t)
{
	struct tm tm;
	time_t tt = (time_t)t;

	if (t <= 0 || localtime_r(&tt, &tm) == NULL) {
		usbgw_strlcpy(buf, "-", len);
		return;
	}
	/* local time, and the zone said (TZ decides: UTC, CET, ...) */
	strftime(buf, len, "%Y-%m-%d %H:%M:%S %Z", &tm);
}

/* Compact: 45s, 3m, 2h05m, 1d03h. */
void
fmt_duration(char *buf, size_t len, int64_t s)
{
	if (s < 0)
		s = 0;
	if (s < 60)
		snprintf(buf, len, "%llds", (long long)s);
	else if (s < 3600)
		snprintf(buf, len, "%lldm", (long long)s / 60);
	else if (s < 86400)
		snprintf(buf, len, "%lldh%02lldm", (long long)s / 3600,
		    (long long)(s % 3600) / 60);
	else
		snprintf(buf, len, "%lldd%02lldh", (long long)s / 86400,
		    (long long)(s % 86400) / 3600);
}

void
fmt_age(char *buf, size_t len, json_int_t since)
{
	char d[32];

	if (since <= 0) {
		usbgw_strlcpy(buf, "-", len);
		return;
	}
	fmt_duration(d, sizeof(d), (int64_t)time(NULL) - since);
	snprintf(buf, len, "%s ago", d);
}

const char *
device_name(const json_t *dev)
{
	char *b = ring_next();
	const char *m = jstr(dev, "manufacturer"), *p = jstr(dev, "product");

	snprintf(b, RING_SIZE, "%s:%s%s%s%s%s", jstr(dev, "vid"),
	    jstr(dev, "pid"), *m != '\0' || *p != '\0' ? " " : "", m,
	    *m != '\0' && *p != '\0' ? " " : "", p);
	return b;
}

/*
 * The identity a decision hit, as the daemon names it: "device 12, hash
 * 1a2b3c4d5e6f7a8b" ("" from a daemon that does not say).
 */
const char *
device_identity_str(const json_t *dev)
{
	char *b = ring_next();
	const json_t *id = json_object_get(dev, "id");

	if (!json_is_integer(id) || *jstr(dev, "hash") == '\0') {
		b[0] = '\0';
		return b;
	}
	snprintf(b, RING_SIZE, "device %lld, identity %.16s, hash %.16s",
	    (long long)json_integer_value(id), jstr(dev, "identity"),
	    jstr(dev, "hash"));
	return b;
}

/* An actor as protocol.md shows it, or a plain string (older daemons). */
const char *
actor_str(const json_t *a, char *buf, size_t len)
{
	const char *kind;

	if (json_is_string(a)) {
		usbgw_strlcpy(buf, json_string_value(a), len);
		return buf;
	}
	if (!json_is_object(a)) {
		usbgw_strlcpy(buf, "-", len);
		return buf;
	}
	kind = jstr(a, "kind");
	if (strcmp(kind, "operator") == 0)
		snprintf(buf, len, "%s (uid %s)", jstr(a, "name"),
		    jfmt(a, "uid"));
	else if (strcmp(kind, "rule") == 0)
		snprintf(buf, len, "rule %s", jfmt(a, "rule_id"));
	else
		snprintf(buf, len, "%s", *kind != '\0' ? kind : "-");
	return buf;
}

/* "03:01:01" -> "HID keyboard"; NULL when we have no name for it. */
const char *
usb_class_name(const char *ifc)
{
	static const struct {
		const char	*prefix;
		const char	*name;
	} names[] = {
		{ "03:01:01", "HID keyboard" },
		{ "03:01:02", "HID mouse" },
		{ "03:", "HID" },
		{ "01:", "audio" },
		{ "02:", "communications" },
		{ "05:", "physical" },
		{ "06:", "image" },
		{ "07:", "printer" },
		{ "08:", "mass storage" },
		{ "09:", "hub" },
		{ "0a:", "CDC data" },
		{ "0b:", "smart card" },
		{ "0d:", "content security" },
		{ "0e:", "video" },
		{ "0f:", "personal healthcare" },
		{ "10:", "audio/video" },
		{ "dc:", "diagnostic" },
		{ "e0:", "wireless" },
		{ "ef:", "miscellaneous" },
		{ "fe:", "application specific" },
		{ "ff:", "vendor specific" },
	};
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strncmp(ifc, names[i].prefix, strlen(names[i].prefix)) == 0)
			return names[i].name;
	return NULL;
}

/*
 * Who, for an audit row or an event: an actor object, or the daemon's
 * flat form ("actor": "operator", "actor_uid", "actor_name", "rule_id").
 */
const char *
row_actor(const json_t *row, char *buf, size_t len)
{
	const json_t *a = json_object_get(row, "actor");
	const char *kind = json_string_value(a);

	if (kind == NULL)
		return actor_str(a, buf, len);
	if (strcmp(kind, "operator") == 0 &&
	    json_object_get(row, "actor_uid") != NULL)
		snprintf(buf, len, "%s (uid %s)", jstr(row, "actor_name"),
		    jfmt(row, "actor_uid"));
	else if (strcmp(kind, "rule") == 0 &&
	    json_is_integer(json_object_get(row, "rule_id")))
		snprintf(buf, len, "rule %s", jfmt(row, "rule_id"));
	else
		usbgw_strlcpy(buf, kind, len);
	return buf;
}

/* The first of two members that is a non-empty string. */
const char *
jstr2(const json_t *obj, const char *key, const char *alt)
{
	return *jstr(obj, key) != '\0' ? jstr(obj, key) : jstr(obj, alt);
}

size_t
format_iface_decisions(const json_t *d, bool denied_only, char *buf,
    size_t len)
{
	const json_t *a = json_object_get(d, "interfaces"), *x;
	const char *name, *dec;
	size_t i, denied = 0;
	char one[160];

	if (len > 0)
		buf[0] = '\0';
	if (!json_is_array(a))
		return 0;
	json_array_foreach(a, i, x) {
		/* the policy's word where there is one (pending: if approved) */
		dec = *jstr(x, "policy") != '\0' ? jstr(x, "policy") :
		    jstr(x, "decision");
		if (strcmp(dec, "allow") != 0)
			denied++;
		else if (denied_only)
			continue;
		name = usb_class_name(jstr(x, "class"));
		if (denied_only)
			snprintf(one, sizeof(one), "%s%s.%s/%s %s",
			    buf[0] != '\0' ? " " : "", jfmt(x, "config"),
			    jfmt(x, "number"), jfmt(x, "alt"), jstr(x, "class"));
		else
			snprintf(one, sizeof(one), "%sconfig %s interface %s alt "
			    "%s  %s%s%s%s  %s%s%s%s", buf[0] != '\0' ? "\n" : "",
			    jfmt(x, "config"), jfmt(x, "number"), jfmt(x, "alt"),
			    jstr(x, "class"), name != NULL ? " (" : "",
			    name != NULL ? name : "", name != NULL ? ")" : "",
			    jstr(x, "decision"), *jstr(x, "policy") != '\0' ?
			    " (interface-policy: " : "", jstr(x, "policy"),
			    *jstr(x, "policy") != '\0' ? ")" : "");
		usbgw_strlcat(buf, one, len);
	}
	return denied;
}