/*
 * JSON as text, without a jansson tree: a writer whose compact output is
 * byte for byte what json_dumpb(JSON_COMPACT) writes for the same values,
 * and a scanner that checks a JSON text (the grammar, UTF-8, no \u0000,
 * nesting at most JT_MAX_DEPTH: what json_loadb refuses, it refuses) and
 * can write it again as json_dumpb(JSON_INDENT(n) | JSON_REAL_PRECISION
 * (15)) would after json_loadb.  Pure functions, shared by the daemon
 * (the list reply: 10,000 devices without a tree and a double dump) and
 * the CLI (list --json passes the daemon's array through).
 *
 * What the scanner does not check: duplicate member names (json_loadb
 * without JSON_REJECT_DUPLICATES keeps the last; the scanner writes both).
 */
#ifndef USBGW_JSONTEXT_H
#define USBGW_JSONTEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JT_MAX_DEPTH	2048	/* jansson's JSON_PARSER_MAX_DEPTH */

/*
 * A growing buffer with a hard limit: a write that does not fit is
 * dropped and over is set; the text is then incomplete, and the caller
 * reports the limit instead of using it.
 */
struct jtext {
	char	*buf;
	size_t	 len, cap, limit;
	bool	 over;
};

void	 jtext_init(struct jtext *, size_t limit);
void	 jtext_free(struct jtext *);
void	 jt_raw(struct jtext *, const char *, size_t);
/* Room for n more bytes now (up to the limit), to grow once. */
void	 jtext_reserve(struct jtext *, size_t n);

/*
 * The writer.  Each value or key is preceded by a comma unless it is the
 * first thing in its object or array (the last byte written is '{', '['
 * or ':') or the buffer is empty: callers write members in order and
 * never a comma.  Strings are escaped as jansson escapes them; a byte
 * that is not part of valid UTF-8 is written as U+FFFD (jansson refuses
 * such a string; the daemon's strings are sanitized before they get
 * here, so this is a last line, not a path).
 */
void	 jt_open(struct jtext *, char c);		/* '{' or '[' */
void	 jt_close(struct jtext *, char c);		/* '}' or ']' */
void	 jt_key(struct jtext *, const char *key);
void	 jt_str(struct jtext *, const char *s);
void	 jt_int(struct jtext *, int64_t);
void	 jt_null(struct jtext *);
void	 jt_bool(struct jtext *, bool);
/* Members: "key":value. */
void	 jt_kstr(struct jtext *, const char *key, const char *s);
void	 jt_kint(struct jtext *, const char *key, int64_t);
void	 jt_knull(struct jtext *, const char *key);
void	 jt_kbool(struct jtext *, const char *key, bool);
/* "key":int, or null when v is 0. */
void	 jt_kint_or_null(struct jtext *, const char *key, int64_t v);

/* Where the scanner stopped and why. */
struct jt_error {
	size_t	 position;		/* byte offset from the text's start */
	char	 text[96];
};

/*
 * Scan one JSON value at p (leading whitespace skipped) in [p, end).
 * out NULL: check only.  Else write it to out as jansson's
 * JSON_INDENT(indent) (indent 0: JSON_COMPACT) with JSON_REAL_PRECISION
 * (15) would, depth being the nesting the value starts at (0 at the
 * top).  start is the text's start, for error positions.  Returns the
 * byte after the value, or NULL with e set.
 */
const char *jt_scan(const char *start, const char *p, const char *end,
	    struct jtext *out, int indent, int depth, struct jt_error *e);

/* Skip JSON whitespace. */
const char *jt_ws(const char *p, const char *end);

/*
 * Decode the JSON string at p (its opening quote) into out (NUL-ended,
 * truncated to outsz - 1 bytes at a character boundary; *truncated set
 * when it was).  Returns the byte after the closing quote, or NULL with
 * e set (bad escape, bad UTF-8, \u0000, unterminated).
 */
const char *jt_string(const char *start, const char *p, const char *end,
	    char *out, size_t outsz, bool *truncated, struct jt_error *e);

#endif
