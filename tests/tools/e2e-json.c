/*
 * e2e-json: pick values out of a JSON array of objects (what `usbgw list
 * --json` prints) for the busybox shell scenarios of tests/e2e, which have
 * no jq.
 *
 *   e2e-json get FIELD [KEY=VALUE ...] < array.json
 *   e2e-json count [KEY=VALUE ...] < array.json
 *
 * get prints FIELD of the first object whose KEY members all equal VALUE,
 * compared as text (strings as they are, integers in decimal, true, false,
 * null); count prints how many objects match.  The input must be an array:
 * the interface promises one, and a wrapper object is a failure here.
 *
 * Exit status: 0 found, 1 no object matches, 2 FIELD is missing from the
 * matching object, 3 usage or input error.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/util.h"

#define EJ_MAX_CONDS	16
#define EJ_EXIT_NOMATCH	1
#define EJ_EXIT_NOFIELD	2
#define EJ_EXIT_USAGE	3

struct cond {
	const char	*key;
	const char	*value;
};

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr, "usage: e2e-json get FIELD [KEY=VALUE ...] < array.json\n"
	    "       e2e-json count [KEY=VALUE ...] < array.json\n");
	exit(EJ_EXIT_USAGE);
}

/* The text form of a JSON value, as the shell compares it; caller frees. */
static char *
value_text(const json_t *v)
{
	char	*s;

	switch (json_typeof(v)) {
	case JSON_STRING:
		return xstrdup(json_string_value(v));
	case JSON_INTEGER:
		xasprintf(&s, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		return s;
	case JSON_REAL:
		xasprintf(&s, "%g", json_real_value(v));
		return s;
	case JSON_TRUE:
		return xstrdup("true");
	case JSON_FALSE:
		return xstrdup("false");
	case JSON_NULL:
		return xstrdup("null");
	default:
		s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		return s != NULL ? s : xstrdup("");
	}
}

static int
matches(json_t *obj, const struct cond *conds, size_t nconds)
{
	json_t	*v;
	char	*t;
	size_t	 i;
	int	 eq;

	if (!json_is_object(obj))
		return 0;
	for (i = 0; i < nconds; i++) {
		if ((v = json_object_get(obj, conds[i].key)) == NULL)
			return 0;
		t = value_text(v);
		eq = strcmp(t, conds[i].value) == 0;
		free(t);
		if (!eq)
			return 0;
	}
	return 1;
}

int
main(int argc, char **argv)
{
	struct cond	 conds[EJ_MAX_CONDS];
	json_error_t	 jerr;
	json_t		*root, *obj, *v;
	const char	*field = NULL;
	char		*eq, *t;
	size_t		 nconds = 0, idx, count = 0;
	int		 get, i;

	if (argc < 2)
		usage();
	if (strcmp(argv[1], "get") == 0) {
		if (argc < 3)
			usage();
		get = 1;
		field = argv[2];
		i = 3;
	} else if (strcmp(argv[1], "count") == 0) {
		get = 0;
		i = 2;
	} else
		usage();
	for (; i < argc; i++) {
		if ((eq = strchr(argv[i], '=')) == NULL || eq == argv[i])
			usage();
		if (nconds == EJ_MAX_CONDS) {
			fprintf(stderr, "e2e-json: more than %d conditions\n",
			    EJ_MAX_CONDS);
			return EJ_EXIT_USAGE;
		}
		*eq = '\0';
		conds[nconds].key = argv[i];
		conds[nconds].value = eq + 1;
		nconds++;
	}

	if ((root = json_loadf(stdin, 0, &jerr)) == NULL) {
		fprintf(stderr, "e2e-json: input line %d: %s\n", jerr.line,
		    jerr.text);
		return EJ_EXIT_USAGE;
	}
	if (!json_is_array(root)) {
		fprintf(stderr, "e2e-json: input is not a JSON array\n");
		json_decref(root);
		return EJ_EXIT_USAGE;
	}
	json_array_foreach(root, idx, obj) {
		if (!matches(obj, conds, nconds))
			continue;
		if (!get) {
			count++;
			continue;
		}
		if ((v = json_object_get(obj, field)) == NULL) {
			fprintf(stderr, "e2e-json: object %zu has no \"%s\"\n",
			    idx, field);
			json_decref(root);
			return EJ_EXIT_NOFIELD;
		}
		t = value_text(v);
		printf("%s\n", t);
		free(t);
		json_decref(root);
		return 0;
	}
	json_decref(root);
	if (!get) {
		printf("%zu\n", count);
		return 0;
	}
	return EJ_EXIT_NOMATCH;
}
