/*
 * The simulator's configuration: a small block language (README.md),
 * and the key=value vocabulary the control socket's `plug` shares with
 * it.  Every error is reported as FILE:LINE: message, all of them (up
 * to SIM_MAX_ERRORS) before giving up, as OpenBSD parse.y does.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "base/log.h"
#include "base/util.h"
#include "sim.h"

#define CONF_MAX_SIZE	(1u << 20)
#define CONF_MAX_WORD	4096
#define GOT_MAX		100	/* bytes of a word quoted in an error */

/* The device set exported when no -c is given (same as example.conf). */
const char sim_default_conf[] =
    "device 1-1 { type keyboard; }\n"
    "device 1-2 { type storage; }\n"
    "device 1-3 { type composite; }\n"
    "device 1-4 { type audio; }\n"
    "device 1-5 { type sourcesink; }\n";

enum tok {
	T_EOF,
	T_NL,
	T_SEMI,
	T_LBRACE,
	T_RBRACE,
	T_WORD,
	T_ERR,
};

struct lex {
	const char	*name;
	const char	*p;
	const char	*end;
	int		 line;
	int		 tokline;
	char		 word[CONF_MAX_WORD];
	const char	*err;
	int		 peeked;	/* -1: none */
	int		 nerrors;
};

static const struct {
	const char	*name;
	enum sim_type	 type;
} types[] = {
	{ "keyboard",		SIM_KEYBOARD },
	{ "hid",		SIM_KEYBOARD },
	{ "storage",		SIM_STORAGE },
	{ "mass-storage",	SIM_STORAGE },
	{ "composite",		SIM_COMPOSITE },
	{ "audio",		SIM_AUDIO },
	{ "iso",		SIM_AUDIO },
	{ "sourcesink",		SIM_SOURCESINK },
	{ "zero",		SIM_SOURCESINK },
};

const char *
sim_type_name(enum sim_type t)
{
	size_t i;

	for (i = 0; i < nitems(types); i++)
		if (types[i].type == t)
			return types[i].name;
	return "unknown";
}

static void
lex_error(struct lex *lx, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Report an error at a line.  Messages quote words of the file (property
 * names, values, a stray word), so the whole message is escaped here,
 * once, rather than at each call site (found by fuzz_simconf: a quoted
 * property name with a "\n" escape reached the log raw).  log_escape()
 * also shows '\' as \x5c, so no message names an escape with one.
 */
static void
lex_error(struct lex *lx, int line, const char *fmt, ...)
{
	char msg[512], esc[sizeof(msg) * 4];
	va_list ap;

	lx->nerrors++;
	if (lx->nerrors > SIM_MAX_ERRORS)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_escape(esc, sizeof(esc), msg, strlen(msg));
	if (lx->nerrors == SIM_MAX_ERRORS)
		log_warnx("%s:%d: %s (stopping after %d errors)", lx->name,
		    line, esc, SIM_MAX_ERRORS);
	else
		log_warnx("%s:%d: %s", lx->name, line, esc);
}

/* A character of a key script as a HID boot-keyboard usage (and shift). */
int
hid_key(int c, uint8_t *modifier, uint8_t *usage)
{
	static const char plain[] = "-=[]\\;'`,./";
	static const char shifted[] = "_+{}|:\"~<>?";
	static const uint8_t punct[] = {
		0x2d, 0x2e, 0x2f, 0x30, 0x31, 0x33, 0x34, 0x35, 0x36, 0x37,
		0x38,
	};
	static const char shdigits[] = ")!@#$%^&*(";
	const char *p;

	*modifier = 0;
	if (c >= 'a' && c <= 'z')
		*usage = (uint8_t)(0x04 + c - 'a');
	else if (c >= 'A' && c <= 'Z') {
		*modifier = 0x02;	/* left shift */
		*usage = (uint8_t)(0x04 + c - 'A');
	} else if (c >= '1' && c <= '9')
		*usage = (uint8_t)(0x1e + c - '1');
	else if (c == '0')
		*usage = 0x27;
	else if (c == '\n')
		*usage = 0x28;
	else if (c == '\t')
		*usage = 0x2b;
	else if (c == ' ')
		*usage = 0x2c;
	else if (c != '\0' && (p = strchr(plain, c)) != NULL)
		*usage = punct[p - plain];
	else if (c != '\0' && (p = strchr(shifted, c)) != NULL) {
		*modifier = 0x02;
		*usage = punct[p - shifted];
	} else if (c != '\0' && (p = strchr(shdigits, c)) != NULL) {
		*modifier = 0x02;
		*usage = p == shdigits ? 0x27 : (uint8_t)(0x1e + (p - shdigits) - 1);
	} else
		return -1;
	return 0;
}

static bool
is_special(int c)
{
	return c == '{' || c == '}' || c == ';' || c == '\n' || c == '"' ||
	    c == ' ' || c == '\t' || c == '\r';
}

/*
 * A word is a run of bare characters and double-quoted parts, joined
 * (as a shell does): `manufacturer="ACME Inc"` is one word.  Escapes
 * inside quotes: \n \t \r \\ \" \xHH (not \x00).
 */
static enum tok
lex_word(struct lex *lx)
{
	size_t n = 0;
	int h1, h2, c;

	while (lx->p < lx->end) {
		c = (unsigned char)*lx->p;
		if (c == '"') {
			lx->p++;
			for (;;) {
				if (lx->p >= lx->end || *lx->p == '\n') {
					lx->err = "unterminated string";
					return T_ERR;
				}
				c = (unsigned char)*lx->p++;
				if (c == '"')
					break;
				if (c == '\\') {
					if (lx->p >= lx->end) {
						lx->err = "unterminated string";
						return T_ERR;
					}
					c = (unsigned char)*lx->p++;
					switch (c) {
					case 'n': c = '\n'; break;
					case 't': c = '\t'; break;
					case 'r': c = '\r'; break;
					case '\\': case '"': break;
					case 'x':
						if (lx->end - lx->p < 2 ||
						    (h1 = usbgw_hexval(lx->p[0])) < 0 ||
						    (h2 = usbgw_hexval(lx->p[1])) < 0 ||
						    (h1 | h2) == 0) {
							lx->err = "bad hex escape "
							    "(expected two hex "
							    "digits after "
							    "backslash-x, not 00)";
							return T_ERR;
						}
						c = h1 << 4 | h2;
						lx->p += 2;
						break;
					default:
						lx->err = "unknown escape in "
						    "string";
						return T_ERR;
					}
				} else if (c == '\0') {
					lx->err = "NUL byte in string";
					return T_ERR;
				}
				if (n + 1 >= sizeof(lx->word)) {
					lx->err = "word too long";
					return T_ERR;
				}
				lx->word[n++] = (char)c;
			}
			continue;
		}
		if (is_special(c))
			break;
		if (c == '\0' || !isprint(c)) {
			lx->p++;
			lx->err = "unexpected control character";
			return T_ERR;
		}
		if (n + 1 >= sizeof(lx->word)) {
			lx->err = "word too long";
			return T_ERR;
		}
		lx->word[n++] = (char)c;
		lx->p++;
	}
	lx->word[n] = '\0';
	return T_WORD;
}

static enum tok
lex_next(struct lex *lx)
{
	int c;

	if (lx->peeked != -1) {
		c = lx->peeked;
		lx->peeked = -1;
		return (enum tok)c;
	}
	for (;;) {
		if (lx->p >= lx->end) {
			lx->tokline = lx->line;
			return T_EOF;
		}
		c = (unsigned char)*lx->p;
		if (c == ' ' || c == '\t' || c == '\r') {
			lx->p++;
			continue;
		}
		if (c == '#') {
			while (lx->p < lx->end && *lx->p != '\n')
				lx->p++;
			continue;
		}
		break;
	}
	lx->tokline = lx->line;
	switch (c) {
	case '\n':
		lx->p++;
		lx->line++;
		return T_NL;
	case ';':
		lx->p++;
		return T_SEMI;
	case '{':
		lx->p++;
		return T_LBRACE;
	case '}':
		lx->p++;
		return T_RBRACE;
	default:
		return lex_word(lx);
	}
}

static void
lex_unget(struct lex *lx, enum tok t)
{
	lx->peeked = (int)t;
}

/* Skip to the end of the current statement (newline or ';'). */
static void
lex_skip(struct lex *lx, enum tok t)
{
	while (t != T_NL && t != T_SEMI && t != T_EOF) {
		if (t == T_RBRACE) {
			lex_unget(lx, t);
			return;
		}
		t = lex_next(lx);
	}
}

static const char *
tok_desc(struct lex *lx, enum tok t)
{
	switch (t) {
	case T_EOF:	return "end of file";
	case T_NL:	return "end of line";
	case T_SEMI:	return "';'";
	case T_LBRACE:	return "'{'";
	case T_RBRACE:	return "'}'";
	case T_ERR:	return lx->err;
	default:	return "a word";
	}
}

/* ---- values ---------------------------------------------------------- */

static int
parse_u32(const char *s, unsigned long long max, uint32_t *out)
{
	unsigned long long v;
	char *end;

	if (*s == '\0' || *s == '-' || *s == '+' || isspace((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno != 0 || *end != '\0' || v > max)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static int
parse_size(const char *s, uint32_t *out)
{
	unsigned long long v, mul = 1;
	char buf[32], *end;
	size_t n = strlen(s);

	if (n == 0 || n >= sizeof(buf) || *s == '-' || *s == '+')
		return -1;
	memcpy(buf, s, n + 1);
	if (buf[n - 1] == 'K' || buf[n - 1] == 'k')
		mul = 1024;
	else if (buf[n - 1] == 'M' || buf[n - 1] == 'm')
		mul = 1024 * 1024;
	if (mul != 1)
		buf[n - 1] = '\0';
	errno = 0;
	v = strtoull(buf, &end, 0);
	if (errno != 0 || *end != '\0' || end == buf || v > SIM_FIFO_MAX)
		return -1;
	v *= mul;
	if (v < SIM_FIFO_MIN || v > SIM_FIFO_MAX)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static int
parse_bool(const char *s, bool *out)
{
	if (strcmp(s, "yes") == 0 || strcmp(s, "true") == 0 ||
	    strcmp(s, "on") == 0 || strcmp(s, "1") == 0)
		*out = true;
	else if (strcmp(s, "no") == 0 || strcmp(s, "false") == 0 ||
	    strcmp(s, "off") == 0 || strcmp(s, "0") == 0)
		*out = false;
	else
		return -1;
	return 0;
}

/* UTF-16 code units of a UTF-8 string, or -1 if it is not valid UTF-8. */
static long
utf16_units(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	long units = 0;
	uint32_t cp;
	int n, i;

	while (*p != '\0') {
		if (*p < 0x80) {
			p++;
			units++;
			continue;
		}
		if ((*p & 0xe0) == 0xc0) {
			n = 1;
			cp = *p & 0x1f;
		} else if ((*p & 0xf0) == 0xe0) {
			n = 2;
			cp = *p & 0x0f;
		} else if ((*p & 0xf8) == 0xf0) {
			n = 3;
			cp = *p & 0x07;
		} else
			return -1;
		p++;
		for (i = 0; i < n; i++, p++) {
			if ((*p & 0xc0) != 0x80)
				return -1;
			cp = cp << 6 | (*p & 0x3f);
		}
		if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) ||
		    (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return -1;
		units += cp >= 0x10000 ? 2 : 1;
	}
	return units;
}

static int
set_string(char **dst, const char *value, const char *key, char *err,
    size_t errsz)
{
	long units = utf16_units(value);

	if (units < 0) {
		snprintf(err, errsz, "%s: expected a UTF-8 string", key);
		return -1;
	}
	if (units > SIM_MAX_STRING) {
		snprintf(err, errsz, "%s: string longer than %d UTF-16 units",
		    key, SIM_MAX_STRING);
		return -1;
	}
	free(*dst);
	*dst = xstrdup(value);
	return 0;
}

void
spec_init(struct sim_spec *s, const char *busid)
{
	memset(s, 0, sizeof(*s));
	usbgw_strlcpy(s->busid, busid, sizeof(s->busid));
}

void
spec_clear(struct sim_spec *s)
{
	if (s == NULL)
		return;
	free(s->manufacturer);
	free(s->product_name);
	free(s->serial);
	free(s->keys);
	free(s->disguise_serial);
	memset(s, 0, sizeof(*s));
}

static char *
dupnull(const char *s)
{
	return s == NULL ? NULL : xstrdup(s);
}

void
spec_copy(struct sim_spec *dst, const struct sim_spec *src)
{
	*dst = *src;
	dst->manufacturer = dupnull(src->manufacturer);
	dst->product_name = dupnull(src->product_name);
	dst->serial = dupnull(src->serial);
	dst->keys = dupnull(src->keys);
	dst->disguise_serial = dupnull(src->disguise_serial);
}

static bool
streq_null(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

/* Equal as devices: the line they were defined on does not count. */
bool
spec_equal(const struct sim_spec *a, const struct sim_spec *b)
{
	return strcmp(a->busid, b->busid) == 0 && a->type == b->type &&
	    a->vendor == b->vendor && a->product == b->product &&
	    a->bcd_device == b->bcd_device && a->speed == b->speed &&
	    a->devnum == b->devnum && a->interval_ms == b->interval_ms &&
	    a->repeat == b->repeat && a->fifo_size == b->fifo_size &&
	    a->pattern == b->pattern &&
	    streq_null(a->manufacturer, b->manufacturer) &&
	    streq_null(a->product_name, b->product_name) &&
	    streq_null(a->serial, b->serial) && streq_null(a->keys, b->keys) &&
	    (a->set & SPEC_LIES) == (b->set & SPEC_LIES) &&
	    a->list_nintf == b->list_nintf &&
	    memcmp(a->list_intf, b->list_intf,
	    a->list_nintf * sizeof(a->list_intf[0])) == 0 &&
	    a->list_vendor == b->list_vendor &&
	    a->list_product == b->list_product &&
	    a->import_config == b->import_config &&
	    a->nconfigs == b->nconfigs &&
	    (a->set & SPEC_DISGUISE) == (b->set & SPEC_DISGUISE) &&
	    a->disguise_type == b->disguise_type &&
	    a->disguise_bcd == b->disguise_bcd &&
	    streq_null(a->disguise_serial, b->disguise_serial) &&
	    a->disguise_after == b->disguise_after &&
	    a->disguise_bos == b->disguise_bos &&
	    a->disguise_other == b->disguise_other;
}

#define SPEC_KEYS_LIST	"type vendor product bcd speed devnum manufacturer " \
			"product_name serial keys interval repeat fifo pattern " \
			"list-interfaces list-id import-config configs " \
			"disguise disguise-bcd disguise-serial disguise-after " \
			"disguise-bos disguise-other-speed"

/* Exactly two hex digits; -1 otherwise. */
static int
hex2(const char *p)
{
	int h, l;

	if ((h = usbgw_hexval((unsigned char)p[0])) < 0 ||
	    (l = usbgw_hexval((unsigned char)p[1])) < 0)
		return -1;
	return h << 4 | l;
}

/*
 * "CC:SS:PP CC:SS:PP ...": 1..SIM_MAX_LIST_INTF interface triplets, two
 * hex digits each, separated by blanks.
 */
static int
parse_intf_list(const char *s, struct usbip_intf *out, uint8_t *n)
{
	int c, sc, pr;

	*n = 0;
	for (;;) {
		while (*s == ' ' || *s == '\t')
			s++;
		if (*s == '\0')
			break;
		if (*n >= SIM_MAX_LIST_INTF)
			return -1;
		if ((c = hex2(s)) < 0 || s[2] != ':' ||
		    (sc = hex2(s + 3)) < 0 || s[5] != ':' ||
		    (pr = hex2(s + 6)) < 0 ||
		    (s[8] != '\0' && s[8] != ' ' && s[8] != '\t'))
			return -1;
		out[*n].bInterfaceClass = (uint8_t)c;
		out[*n].bInterfaceSubClass = (uint8_t)sc;
		out[*n].bInterfaceProtocol = (uint8_t)pr;
		(*n)++;
		s += 8;
	}
	return *n > 0 ? 0 : -1;
}

/* "VVVV:PPPP", four hex digits each (as USBGuard's `id`). */
static int
parse_vidpid(const char *s, uint16_t *vid, uint16_t *pid)
{
	int a, b, c, d;

	if (strlen(s) != 9 || s[4] != ':' || (a = hex2(s)) < 0 ||
	    (b = hex2(s + 2)) < 0 || (c = hex2(s + 5)) < 0 ||
	    (d = hex2(s + 7)) < 0)
		return -1;
	*vid = (uint16_t)(a << 8 | b);
	*pid = (uint16_t)(c << 8 | d);
	return 0;
}

/*
 * Set one property.  Returns 0, or -1 with a message in err naming what
 * was expected.
 */
int
spec_set(struct sim_spec *s, const char *key, const char *value, char *err,
    size_t errsz)
{
	uint32_t v;
	size_t i;
	const char *p;
	uint8_t mod, usage;

	if (strcmp(key, "type") == 0) {
		for (i = 0; i < nitems(types); i++) {
			if (strcmp(value, types[i].name) == 0) {
				s->type = types[i].type;
				s->has_type = true;
				return 0;
			}
		}
		snprintf(err, errsz, "type: expected keyboard, storage, "
		    "composite, audio or sourcesink");
		return -1;
	}
	if (strcmp(key, "vendor") == 0 || strcmp(key, "product") == 0 ||
	    strcmp(key, "bcd") == 0) {
		if (parse_u32(value, 0xffff, &v) == -1) {
			snprintf(err, errsz, "%s: expected a number 0..0xffff",
			    key);
			return -1;
		}
		if (key[0] == 'v') {
			s->vendor = (uint16_t)v;
			s->set |= SPEC_VENDOR;
		} else if (key[0] == 'p') {
			s->product = (uint16_t)v;
			s->set |= SPEC_PRODUCT;
		} else {
			s->bcd_device = (uint16_t)v;
			s->set |= SPEC_BCD;
		}
		return 0;
	}
	if (strcmp(key, "speed") == 0) {
		if (strcmp(value, "low") == 0)
			s->speed = USBIP_SPEED_LOW;
		else if (strcmp(value, "full") == 0)
			s->speed = USBIP_SPEED_FULL;
		else if (strcmp(value, "high") == 0)
			s->speed = USBIP_SPEED_HIGH;
		else if (strcmp(value, "super") == 0)
			s->speed = USBIP_SPEED_SUPER;
		else {
			snprintf(err, errsz, "speed: expected low, full, high "
			    "or super");
			return -1;
		}
		s->set |= SPEC_SPEED;
		return 0;
	}
	if (strcmp(key, "devnum") == 0) {
		if (parse_u32(value, 127, &v) == -1 || v == 0) {
			snprintf(err, errsz, "devnum: expected a number "
			    "1..127");
			return -1;
		}
		s->devnum = v;
		return 0;
	}
	if (strcmp(key, "manufacturer") == 0) {
		s->set |= SPEC_MANUF;
		return set_string(&s->manufacturer, value, key, err, errsz);
	}
	if (strcmp(key, "product_name") == 0) {
		s->set |= SPEC_PRODNAME;
		return set_string(&s->product_name, value, key, err, errsz);
	}
	if (strcmp(key, "serial") == 0) {
		s->set |= SPEC_SERIAL;
		return set_string(&s->serial, value, key, err, errsz);
	}
	if (strcmp(key, "keys") == 0) {
		if (strlen(value) > SIM_MAX_KEYS) {
			snprintf(err, errsz, "keys: expected at most %d "
			    "characters", SIM_MAX_KEYS);
			return -1;
		}
		for (p = value; *p != '\0'; p++) {
			if (hid_key((unsigned char)*p, &mod, &usage) == -1) {
				snprintf(err, errsz, "keys: character 0x%02x "
				    "has no key (expected printable ASCII, "
				    "newline or tab)", (unsigned char)*p);
				return -1;
			}
		}
		free(s->keys);
		s->keys = xstrdup(value);
		s->set |= SPEC_KEYS;
		return 0;
	}
	if (strcmp(key, "interval") == 0) {
		if (parse_u32(value, 60000, &v) == -1 || v == 0) {
			snprintf(err, errsz, "interval: expected milliseconds "
			    "1..60000");
			return -1;
		}
		s->interval_ms = v;
		s->set |= SPEC_INTERVAL;
		return 0;
	}
	if (strcmp(key, "repeat") == 0) {
		if (parse_bool(value, &s->repeat) == -1) {
			snprintf(err, errsz, "repeat: expected yes or no");
			return -1;
		}
		s->set |= SPEC_REPEAT;
		return 0;
	}
	if (strcmp(key, "fifo") == 0) {
		if (parse_size(value, &s->fifo_size) == -1) {
			snprintf(err, errsz, "fifo: expected a size %u..%uM "
			    "(suffix K or M)", SIM_FIFO_MIN,
			    SIM_FIFO_MAX >> 20);
			return -1;
		}
		s->set |= SPEC_FIFO;
		return 0;
	}
	if (strcmp(key, "pattern") == 0) {
		if (strcmp(value, "mod63") == 0)
			s->pattern = SIM_PATTERN_MOD63;
		else if (strcmp(value, "zero") == 0)
			s->pattern = SIM_PATTERN_ZERO;
		else {
			snprintf(err, errsz, "pattern: expected mod63 or zero");
			return -1;
		}
		s->set |= SPEC_PATTERN;
		return 0;
	}
	if (strcmp(key, "list-interfaces") == 0) {
		if (parse_intf_list(value, s->list_intf, &s->list_nintf) ==
		    -1) {
			snprintf(err, errsz, "list-interfaces: expected 1..%d "
			    "interface triplets CC:SS:PP (two hex digits "
			    "each, separated by blanks, e.g. \"08:06:50\")",
			    SIM_MAX_LIST_INTF);
			s->list_nintf = 0;
			return -1;
		}
		s->set |= SPEC_LIST_INTF;
		return 0;
	}
	if (strcmp(key, "list-id") == 0) {
		if (parse_vidpid(value, &s->list_vendor, &s->list_product) ==
		    -1) {
			snprintf(err, errsz, "list-id: expected VID:PID, four "
			    "hex digits each (e.g. 1209:0002)");
			return -1;
		}
		s->set |= SPEC_LIST_ID;
		return 0;
	}
	if (strcmp(key, "import-config") == 0) {
		if (parse_u32(value, 255, &v) == -1) {
			snprintf(err, errsz, "import-config: expected a "
			    "bConfigurationValue 0..255");
			return -1;
		}
		s->import_config = (uint8_t)v;
		s->set |= SPEC_IMPORT_CFG;
		return 0;
	}
	if (strcmp(key, "configs") == 0) {
		if (parse_u32(value, 255, &v) == -1 || v == 0) {
			snprintf(err, errsz, "configs: expected a number of "
			    "configurations 1..255");
			return -1;
		}
		s->nconfigs = (uint8_t)v;
		return 0;
	}
	if (strcmp(key, "disguise") == 0) {
		for (i = 0; i < nitems(types); i++) {
			if (strcmp(value, types[i].name) == 0) {
				s->disguise_type = types[i].type;
				s->set |= SPEC_DISGUISE | SPEC_DISGUISE_TYPE;
				return 0;
			}
		}
		snprintf(err, errsz, "disguise: expected keyboard, storage, "
		    "composite, audio or sourcesink");
		return -1;
	}
	if (strcmp(key, "disguise-bcd") == 0) {
		if (parse_u32(value, 0xffff, &v) == -1) {
			snprintf(err, errsz, "disguise-bcd: expected a number "
			    "0..0xffff");
			return -1;
		}
		s->disguise_bcd = (uint16_t)v;
		s->set |= SPEC_DISGUISE | SPEC_DISGUISE_BCD;
		return 0;
	}
	if (strcmp(key, "disguise-serial") == 0) {
		s->set |= SPEC_DISGUISE;
		return set_string(&s->disguise_serial, value, key, err, errsz);
	}
	if (strcmp(key, "disguise-after") == 0) {
		if (parse_u32(value, 1000000, &v) == -1) {
			snprintf(err, errsz, "disguise-after: expected a number "
			    "of descriptor reads 0..1000000");
			return -1;
		}
		s->disguise_after = v;
		s->set |= SPEC_DISGUISE;
		return 0;
	}
	if (strcmp(key, "disguise-bos") == 0 ||
	    strcmp(key, "disguise-other-speed") == 0) {
		bool *b = key[9] == 'b' ? &s->disguise_bos : &s->disguise_other;

		if (parse_bool(value, b) == -1) {
			snprintf(err, errsz, "%s: expected yes or no", key);
			return -1;
		}
		s->set |= SPEC_DISGUISE;
		return 0;
	}
	snprintf(err, errsz, "unknown property '%s' (expected one of: %s)",
	    key, SPEC_KEYS_LIST);
	return -1;
}

static const struct {
	enum sim_type	 type;
	uint16_t	 product;
	uint32_t	 speed;
	const char	*name;
} type_defaults[] = {
	{ SIM_KEYBOARD,   0x0001, USBIP_SPEED_FULL, "Simulated Keyboard" },
	{ SIM_STORAGE,    0x0002, USBIP_SPEED_HIGH, "Simulated Mass Storage" },
	{ SIM_COMPOSITE,  0x0003, USBIP_SPEED_HIGH, "Simulated Composite" },
	{ SIM_AUDIO,      0x0004, USBIP_SPEED_FULL, "Simulated Audio" },
	{ SIM_SOURCESINK, 0x0005, USBIP_SPEED_HIGH, "Simulated Source/Sink" },
};

/* pid.codes' open-source vendor ID; its PIDs 0x0001..0x0010 are for tests. */
#define SIM_DEFAULT_VENDOR	0x1209
#define SIM_DEFAULT_BCD		0x0100
#define SIM_DEFAULT_INTERVAL	10
#define SIM_DEFAULT_KEYS	"usbgw\n"

int
spec_finish(struct sim_spec *s, char *err, size_t errsz)
{
	bool hid, bulk;
	size_t i;
	char serial[64];

	if (!s->has_type) {
		snprintf(err, errsz, "device %s: expected a type", s->busid);
		return -1;
	}
	for (i = 0; i < nitems(type_defaults); i++)
		if (type_defaults[i].type == s->type)
			break;
	hid = s->type == SIM_KEYBOARD || s->type == SIM_COMPOSITE;
	bulk = s->type == SIM_STORAGE || s->type == SIM_COMPOSITE ||
	    s->type == SIM_SOURCESINK;
	if ((s->set & (SPEC_KEYS | SPEC_INTERVAL | SPEC_REPEAT)) && !hid) {
		snprintf(err, errsz, "device %s: keys, interval and repeat "
		    "apply only to keyboard and composite devices", s->busid);
		return -1;
	}
	if ((s->set & SPEC_FIFO) && s->type != SIM_STORAGE &&
	    s->type != SIM_COMPOSITE && s->type != SIM_AUDIO) {
		snprintf(err, errsz, "device %s: fifo applies only to storage, "
		    "composite and audio devices", s->busid);
		return -1;
	}
	if ((s->set & SPEC_PATTERN) && s->type != SIM_SOURCESINK) {
		snprintf(err, errsz, "device %s: pattern applies only to "
		    "sourcesink devices", s->busid);
		return -1;
	}
	if (!(s->set & SPEC_SPEED))
		s->speed = type_defaults[i].speed;
	if (s->speed == USBIP_SPEED_LOW && (bulk || s->type == SIM_AUDIO)) {
		snprintf(err, errsz, "device %s: a low-speed device has no "
		    "bulk or isochronous endpoints; expected speed full, "
		    "high or super", s->busid);
		return -1;
	}
	if (!(s->set & SPEC_VENDOR))
		s->vendor = SIM_DEFAULT_VENDOR;
	if (!(s->set & SPEC_PRODUCT))
		s->product = type_defaults[i].product;
	if (!(s->set & SPEC_BCD))
		s->bcd_device = SIM_DEFAULT_BCD;
	if (!(s->set & SPEC_MANUF))
		s->manufacturer = xstrdup("usbgw-sim");
	if (!(s->set & SPEC_PRODNAME))
		s->product_name = xstrdup(type_defaults[i].name);
	if (!(s->set & SPEC_SERIAL)) {
		snprintf(serial, sizeof(serial), "SIM-%s", s->busid);
		s->serial = xstrdup(serial);
	}
	if (!(s->set & SPEC_INTERVAL))
		s->interval_ms = SIM_DEFAULT_INTERVAL;
	if (s->nconfigs == 0)
		s->nconfigs = 1;
	if (!(s->set & SPEC_DISGUISE_TYPE))
		s->disguise_type = s->type;
	if (!(s->set & SPEC_DISGUISE_BCD))
		s->disguise_bcd = s->bcd_device;
	if (hid && !(s->set & SPEC_KEYS))
		s->keys = xstrdup(SIM_DEFAULT_KEYS);
	if (!(s->set & SPEC_FIFO))
		s->fifo_size = s->type == SIM_AUDIO ? SIM_ISO_FIFO :
		    SIM_FIFO_DEFAULT;
	/* An empty string means "no string descriptor". */
	if (s->manufacturer != NULL && *s->manufacturer == '\0') {
		free(s->manufacturer);
		s->manufacturer = NULL;
	}
	if (s->product_name != NULL && *s->product_name == '\0') {
		free(s->product_name);
		s->product_name = NULL;
	}
	if (s->serial != NULL && *s->serial == '\0') {
		free(s->serial);
		s->serial = NULL;
	}
	s->set = SPEC_VENDOR | SPEC_PRODUCT | SPEC_BCD | SPEC_SPEED |
	    SPEC_MANUF | SPEC_PRODNAME | SPEC_SERIAL | SPEC_INTERVAL |
	    SPEC_FIFO | (hid ? SPEC_KEYS : 0) |
	    (s->set & (SPEC_PATTERN | SPEC_REPEAT | SPEC_LIES | SPEC_DISGUISE |
	    SPEC_DISGUISE_TYPE | SPEC_DISGUISE_BCD));
	return 0;
}

/* ---- the file -------------------------------------------------------- */

/* Statement end: newline, ';', EOF, or a '}' left for the caller. */
static bool
expect_end(struct lex *lx, const char *what)
{
	enum tok t = lex_next(lx);

	if (t == T_NL || t == T_SEMI || t == T_EOF)
		return true;
	if (t == T_RBRACE) {
		lex_unget(lx, t);
		return true;
	}
	lex_error(lx, lx->tokline, "expected ';' or end of line after %s, "
	    "got %s", what, t == T_WORD ? lx->word : tok_desc(lx, t));
	lex_skip(lx, t);
	return false;
}

static void
parse_device(struct lex *lx, struct sim_conf *conf)
{
	struct sim_spec spec;
	char key[64], err[256];
	enum tok t;
	int open_line = lx->tokline;
	size_t i;
	bool ok = true;

	t = lex_next(lx);
	if (t != T_WORD || !usbip_busid_valid(lx->word)) {
		lex_error(lx, lx->tokline, "expected a busid after 'device' "
		    "(1..31 of A-Z a-z 0-9 . - _ :), got %s",
		    t == T_WORD ? "an invalid word" : tok_desc(lx, t));
		lex_skip(lx, t);
		return;
	}
	spec_init(&spec, lx->word);
	spec.line = open_line;
	while ((t = lex_next(lx)) == T_NL)
		;
	if (t != T_LBRACE) {
		lex_error(lx, t == T_EOF ? open_line : lx->tokline,
		    "expected '{' after 'device %s'", spec.busid);
		lex_skip(lx, t);
		spec_clear(&spec);
		return;
	}
	for (;;) {
		t = lex_next(lx);
		if (t == T_NL || t == T_SEMI)
			continue;
		if (t == T_RBRACE)
			break;
		if (t == T_EOF) {
			lex_error(lx, lx->tokline, "expected '}' to close "
			    "device %s (opened at line %d)", spec.busid,
			    open_line);
			spec_clear(&spec);
			return;
		}
		if (t != T_WORD) {
			lex_error(lx, lx->tokline, "expected a property name "
			    "or '}', got %s", tok_desc(lx, t));
			lex_skip(lx, t);
			ok = false;
			continue;
		}
		usbgw_strlcpy(key, lx->word, sizeof(key));
		t = lex_next(lx);
		if (t != T_WORD) {
			lex_error(lx, lx->tokline, "expected a value for '%s', "
			    "got %s", key, tok_desc(lx, t));
			lex_skip(lx, t);
			ok = false;
			continue;
		}
		if (spec_set(&spec, key, lx->word, err, sizeof(err)) == -1) {
			lex_error(lx, lx->tokline, "%s, got \"%.*s\"", err,
			    GOT_MAX, lx->word);
			ok = false;
		}
		if (!expect_end(lx, key))
			ok = false;
	}
	if (ok && spec_finish(&spec, err, sizeof(err)) == -1) {
		lex_error(lx, open_line, "%s", err);
		ok = false;
	}
	for (i = 0; ok && i < conf->nspecs; i++) {
		if (strcmp(conf->specs[i].busid, spec.busid) == 0) {
			lex_error(lx, open_line, "duplicate device %s (first "
			    "defined at line %d)", spec.busid,
			    conf->specs[i].line);
			ok = false;
		}
	}
	if (ok && conf->nspecs >= SIM_MAX_DEVICES) {
		lex_error(lx, open_line, "more than %d devices",
		    SIM_MAX_DEVICES);
		ok = false;
	}
	if (!ok) {
		spec_clear(&spec);
		return;
	}
	conf->specs = xreallocarray(conf->specs, conf->nspecs + 1,
	    sizeof(*conf->specs));
	conf->specs[conf->nspecs++] = spec;
	expect_end(lx, "'}'");
}

static void
parse_global(struct lex *lx, struct sim_conf *conf, const char *key)
{
	char k[64];
	enum tok t;
	bool b;
	long long n;
	const char *errstr;
	int line = lx->tokline;

	usbgw_strlcpy(k, key, sizeof(k));
	t = lex_next(lx);
	if (t != T_WORD) {
		lex_error(lx, line, "expected a value for '%s', got %s", k,
		    tok_desc(lx, t));
		lex_skip(lx, t);
		return;
	}
	if (strcmp(k, "listen") == 0) {
		if (conf->nlisten >= SIM_MAX_LISTEN)
			lex_error(lx, line, "more than %d listen addresses",
			    SIM_MAX_LISTEN);
		else
			conf->listen[conf->nlisten++] = xstrdup(lx->word);
	} else if (strcmp(k, "legacy-status") == 0) {
		if (parse_bool(lx->word, &b) == -1)
			lex_error(lx, line, "legacy-status: expected yes or "
			    "no");
		else
			conf->legacy_status = b;
	} else if (strcmp(k, "max-connections") == 0) {
		if (parse_num(lx->word, 1, SIM_MAX_CONNS_LIMIT, &n,
		    &errstr) == -1)
			lex_error(lx, line, "max-connections: expected a "
			    "number 1..%d", SIM_MAX_CONNS_LIMIT);
		else
			conf->max_conns = n;
	} else {
		if (parse_num(lx->word, 1, SIM_MAX_URBS_LIMIT, &n,
		    &errstr) == -1)
			lex_error(lx, line, "max-urbs: expected a number "
			    "1..%d", SIM_MAX_URBS_LIMIT);
		else
			conf->max_urbs = n;
	}
	expect_end(lx, k);
}

/*
 * exporters N [base-port P] [devices-per-exporter K] [type T]
 *     [name-prefix S] [address A]
 * N exporters S1..SN of K generated devices each (struct sim_expgroup).
 */
static void
parse_exporters(struct lex *lx, struct sim_conf *conf)
{
	struct sim_expgroup g;
	char key[64], esc[128];
	enum tok t;
	uint32_t v;
	size_t i, total = 0, totaldevs = 0;
	int line = lx->tokline;
	bool ok = true;

	memset(&g, 0, sizeof(g));
	g.line = line;
	g.ndevs = 10;
	g.type = SIM_SOURCESINK;
	usbgw_strlcpy(g.prefix, "sim", sizeof(g.prefix));
	usbgw_strlcpy(g.addr, "127.0.0.1", sizeof(g.addr));
	t = lex_next(lx);
	if (t != T_WORD || parse_u32(lx->word, SIM_MAX_EXPORTERS, &v) == -1 ||
	    v == 0) {
		lex_error(lx, line, "exporters: expected a number of exporters "
		    "1..%d, got %s", SIM_MAX_EXPORTERS, t == T_WORD ?
		    log_escape(esc, sizeof(esc), lx->word, strlen(lx->word)) :
		    tok_desc(lx, t));
		lex_skip(lx, t);
		return;
	}
	g.count = v;
	for (;;) {
		t = lex_next(lx);
		if (t == T_NL || t == T_SEMI || t == T_EOF || t == T_RBRACE) {
			if (t == T_RBRACE)
				lex_unget(lx, t);
			break;
		}
		if (t != T_WORD) {
			lex_error(lx, lx->tokline, "exporters: expected a key "
			    "(base-port, devices-per-exporter, type, "
			    "name-prefix, address), got %s", tok_desc(lx, t));
			lex_skip(lx, t);
			return;
		}
		usbgw_strlcpy(key, lx->word, sizeof(key));
		if ((t = lex_next(lx)) != T_WORD) {
			lex_error(lx, lx->tokline, "exporters: expected a value "
			    "for '%s', got %s", key, tok_desc(lx, t));
			lex_skip(lx, t);
			return;
		}
		log_escape(esc, sizeof(esc), lx->word, strlen(lx->word));
		if (strcmp(key, "base-port") == 0) {
			if (parse_u32(lx->word, 65535, &v) == -1) {
				lex_error(lx, lx->tokline, "base-port: expected "
				    "a port 0..65535 (0: each chosen by the "
				    "kernel), got \"%s\"", esc);
				ok = false;
			} else
				g.base_port = v;
		} else if (strcmp(key, "devices-per-exporter") == 0) {
			if (parse_u32(lx->word, SIM_MAX_DEVICES, &v) == -1 ||
			    v == 0) {
				lex_error(lx, lx->tokline, "devices-per-exporter:"
				    " expected a number 1..%d, got \"%s\"",
				    SIM_MAX_DEVICES, esc);
				ok = false;
			} else
				g.ndevs = v;
		} else if (strcmp(key, "type") == 0) {
			for (i = 0; i < nitems(types); i++)
				if (strcmp(lx->word, types[i].name) == 0)
					break;
			if (i == nitems(types)) {
				lex_error(lx, lx->tokline, "type: expected "
				    "keyboard, storage, composite, audio or "
				    "sourcesink, got \"%s\"", esc);
				ok = false;
			} else
				g.type = types[i].type;
		} else if (strcmp(key, "name-prefix") == 0) {
			/* Names are PREFIX1..PREFIXN: a prefix ending in a
			 * digit could make two groups' names meet. */
			const char *w = lx->word;
			size_t n = strlen(w);

			if (n == 0 || n > SIM_EXP_PREFIX_MAX ||
			    !isalpha((unsigned char)w[0]) ||
			    isdigit((unsigned char)w[n - 1]) ||
			    strspn(w, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
			    "abcdefghijklmnopqrstuvwxyz0123456789-_.") != n) {
				lex_error(lx, lx->tokline, "name-prefix: expected"
				    " 1..%d of A-Z a-z 0-9 - _ . starting with "
				    "a letter and not ending with a digit, got "
				    "\"%s\"", SIM_EXP_PREFIX_MAX, esc);
				ok = false;
			} else
				usbgw_strlcpy(g.prefix, w, sizeof(g.prefix));
		} else if (strcmp(key, "address") == 0) {
			if (usbgw_strlcpy(g.addr, lx->word, sizeof(g.addr)) >=
			    sizeof(g.addr) || lx->word[0] == '\0') {
				lex_error(lx, lx->tokline, "address: expected a "
				    "numeric address, got \"%s\"", esc);
				ok = false;
			}
		} else {
			lex_error(lx, lx->tokline, "exporters: unknown key '%s' "
			    "(expected base-port, devices-per-exporter, type, "
			    "name-prefix or address)", log_escape(esc,
			    sizeof(esc), key, strlen(key)));
			ok = false;
		}
	}
	if (!ok)
		return;
	if (g.base_port != 0 && g.base_port + g.count - 1 > 65535) {
		lex_error(lx, line, "exporters: ports %u..%u: expected a "
		    "base-port at most %u for %u exporters", g.base_port,
		    g.base_port + g.count - 1, 65536 - g.count, g.count);
		return;
	}
	for (i = 0; i < conf->ngroups; i++) {
		total += conf->groups[i].count;
		totaldevs += (size_t)conf->groups[i].count *
		    conf->groups[i].ndevs;
		if (strcmp(conf->groups[i].prefix, g.prefix) == 0) {
			lex_error(lx, line, "exporters: name-prefix \"%s\" "
			    "already used at line %d (expected another)",
			    g.prefix, conf->groups[i].line);
			return;
		}
	}
	if (conf->ngroups >= SIM_MAX_EXPGROUPS) {
		lex_error(lx, line, "more than %d 'exporters' statements",
		    SIM_MAX_EXPGROUPS);
		return;
	}
	if (total + g.count > SIM_MAX_EXPORTERS ||
	    totaldevs + (size_t)g.count * g.ndevs > SIM_MAX_EXPDEVS) {
		lex_error(lx, line, "exporters: expected at most %d exporters "
		    "and %d devices in all", SIM_MAX_EXPORTERS,
		    SIM_MAX_EXPDEVS);
		return;
	}
	conf->groups[conf->ngroups++] = g;
}

/* Device i of a generated exporter: buses of 100 ports, 1-1 .. 1-100, 2-1... */
void
expgroup_busid(unsigned i, char *busid, size_t size)
{
	snprintf(busid, size, "%u-%u", 1 + i / 100, 1 + i % 100);
}

int
conf_load_string(const char *name, const char *text, struct sim_conf *conf)
{
	struct lex lex, *lx = &lex;
	enum tok t;
	int rv;

	memset(conf, 0, sizeof(*conf));
	conf->legacy_status = -1;
	/* Every field but the 4 KB word buffer, which lex_word() fills. */
	lx->name = name;
	lx->p = text;
	lx->end = text + strlen(text);
	lx->line = 1;
	lx->tokline = 1;
	lx->word[0] = '\0';
	lx->err = NULL;
	lx->peeked = -1;
	lx->nerrors = 0;
	while ((t = lex_next(lx)) != T_EOF) {
		if (t == T_NL || t == T_SEMI)
			continue;
		if (t == T_WORD && strcmp(lx->word, "device") == 0)
			parse_device(lx, conf);
		else if (t == T_WORD && strcmp(lx->word, "exporters") == 0)
			parse_exporters(lx, conf);
		else if (t == T_WORD && (strcmp(lx->word, "listen") == 0 ||
		    strcmp(lx->word, "legacy-status") == 0 ||
		    strcmp(lx->word, "max-connections") == 0 ||
		    strcmp(lx->word, "max-urbs") == 0))
			parse_global(lx, conf, lx->word);
		else {
			lex_error(lx, lx->tokline, "expected 'device', "
			    "'exporters', 'listen', 'legacy-status', "
			    "'max-connections' or 'max-urbs', got %s%.*s%s", t == T_WORD ? "'" : "",
			    GOT_MAX, t == T_WORD ? lx->word : tok_desc(lx, t),
			    t == T_WORD ? "'" : "");
			/*
			 * lex_skip() leaves a '}' for the block it ends; at the
			 * top level there is no block, and handing the '}'
			 * back would loop here forever (found by fuzz_simconf).
			 */
			if (t != T_RBRACE)
				lex_skip(lx, t);
		}
	}
	rv = lx->nerrors > 0 ? -1 : 0;
	if (rv == -1)
		conf_clear(conf);
	return rv;
}

int
conf_load(const char *path, struct sim_conf *conf)
{
	struct stat st;
	char *text;
	ssize_t n;
	size_t off = 0;
	int fd, rv;

	memset(conf, 0, sizeof(*conf));
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		log_warn("%s", path);
		return -1;
	}
	if (fstat(fd, &st) == -1 || (!S_ISREG(st.st_mode) &&
	    !S_ISCHR(st.st_mode))) {
		log_warnx("%s: not a regular file", path);
		close(fd);
		return -1;
	}
	text = xmalloc(CONF_MAX_SIZE + 1);
	while (off < CONF_MAX_SIZE) {
		n = read(fd, text + off, CONF_MAX_SIZE - off);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			log_warn("%s", path);
			close(fd);
			free(text);
			return -1;
		}
		if (n == 0)
			break;
		off += (size_t)n;
	}
	close(fd);
	if (off == CONF_MAX_SIZE) {
		log_warnx("%s: larger than %u bytes", path, CONF_MAX_SIZE);
		free(text);
		return -1;
	}
	text[off] = '\0';
	if (memchr(text, '\0', off) != NULL) {
		log_warnx("%s: contains a NUL byte", path);
		free(text);
		return -1;
	}
	rv = conf_load_string(path, text, conf);
	free(text);
	return rv;
}

void
conf_clear(struct sim_conf *conf)
{
	size_t i;

	for (i = 0; i < conf->nspecs; i++)
		spec_clear(&conf->specs[i]);
	free(conf->specs);
	for (i = 0; i < conf->nlisten; i++)
		free(conf->listen[i]);
	memset(conf, 0, sizeof(*conf));
	conf->legacy_status = -1;
}

int
conf_split(char *line, char **argv, int maxargs, const char **err)
{
	struct lex lx;
	enum tok t;
	int argc = 0;
	size_t n;
	char *copy, *out = line;

	/*
	 * The lexer reads a copy; words are written back into line.  A word
	 * unescaped is never longer than its source and every word but the
	 * last is followed by a separator, so they fit.
	 */
	copy = xstrdup(line);
	memset(&lx, 0, sizeof(lx));
	lx.name = "control";
	lx.p = copy;
	lx.end = copy + strlen(copy);
	lx.line = 1;
	lx.peeked = -1;
	for (;;) {
		t = lex_next(&lx);
		if (t == T_EOF)
			break;
		if (t != T_WORD) {
			*err = t == T_ERR ? lx.err : "unexpected '{', '}', ';' "
			    "or newline (quote it)";
			argc = -1;
			break;
		}
		if (argc >= maxargs) {
			*err = "too many words";
			argc = -1;
			break;
		}
		n = strlen(lx.word);
		memcpy(out, lx.word, n + 1);
		argv[argc++] = out;
		out += n + 1;
	}
	free(copy);
	return argc;
}
