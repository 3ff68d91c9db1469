/*
 * Unit tests for common/jpath: the path grammar (accepted and rejected
 * paths with their error positions) and resolution against a document,
 * including missing keys, out-of-range indexes and type mismatches.
 */
#include "jpath.h"
#include "tap.h"
#include "util.h"

#include <stdlib.h>

static const char *doc_text =
	"{\"a\": {\"b\": [10, {\"c\": \"deep\"}, [5, 6]]}, \"a.b\": 1, \"list\": [\"x\", \"y\"],"
	" \"0\": \"zero-key\", \"n\": null, \"sp ace\": 2, \"q\\\"k\": 3, \"\\u00e9\": 4}";

struct get_case {
	const char *path;
	const char *want;   /* canonical JSON of the value, or NULL = missing */
	const char *why;    /* substring of the reason when missing */
};

static const struct get_case get_cases[] = {
	{ "a.b[0]", "10", NULL },
	{ "a.b[1].c", "\"deep\"", NULL },
	{ "a.b[2][1]", "6", NULL },
	{ "a.b.2.0", "5", NULL },
	{ "[\"a.b\"]", "1", NULL },
	{ "a[\"b\"][0]", "10", NULL },
	{ "list[1]", "\"y\"", NULL },
	{ "list.1", "\"y\"", NULL },
	{ "0", "\"zero-key\"", NULL },
	{ "n", "null", NULL },
	{ "sp ace", "2", NULL },
	{ "[\"q\\\"k\"]", "3", NULL },
	{ "[\"\\u00e9\"]", "4", NULL },
	{ "\xc3\xa9", "4", NULL },
	{ "missing", NULL, "key 'missing' not found" },
	{ "a.x", NULL, "key 'x' not found" },
	{ "a.b[3]", NULL, "index 3 out of range (length 3)" },
	{ "a.b[99999]", NULL, "out of range" },
	{ "list[0].x", NULL, "cannot look up key 'x' in a string" },
	{ "a[0]", NULL, "cannot index an object with [0]" },
	{ "list.x", NULL, "cannot look up key 'x' in an array" },
	{ "n.x", NULL, "in null" },
	{ "a.b[0][0]", NULL, "cannot index a number" },
	{ "[0]", NULL, "cannot index an object" },
};

struct parse_case {
	const char *path;
	const char *err;    /* substring, NULL = valid */
};

static const struct parse_case parse_cases[] = {
	{ "a", NULL }, { "a.b.c", NULL }, { "a[0]", NULL }, { "a[0][12]", NULL }, { "[0]", NULL },
	{ "[\"x\"]", NULL }, { "a.0", NULL }, { "a-b_c d", NULL }, { "[\"\"]", NULL },
	{ "", "position 0: empty path" },
	{ ".a", "position 0: empty key" },
	{ "a.", "position 2: path ends with '.'" },
	{ "a..b", "position 2: empty key" },
	{ "a[", "expected a non-negative integer index" },
	{ "a[]", "position 2: expected a non-negative integer index" },
	{ "a[-1]", "expected a non-negative integer index" },
	{ "a[1", "position 3: expected ']'" },
	{ "a[01]", "leading zero" },
	{ "a[x]", "expected a non-negative integer index" },
	{ "a[1]b", "position 4: expected '.' or '['" },
	{ "a]", "expected '.' or '['" },
	{ "a[\"x]", "unterminated quoted key" },
	{ "a[\"x\\q\"]", "unknown escape" },
	{ "a[\"\\ud800\"]", "unpaired surrogate" },
	{ "a[\"\\u0000\"]", "\\u0000 in key" },
	{ "a[99999999999]", "index too large" },
	{ "a.\"b\"", "empty key" },
	{ "a.[0]", "empty key" },
};

int main(void)
{
	json_error_t je;
	json_t *doc = json_loads(doc_text, 0, &je);
	if (!ok(doc != NULL, "document parses"))
		return tap_done();
	for (size_t i = 0; i < sizeof get_cases / sizeof get_cases[0]; i++) {
		const struct get_case *c = &get_cases[i];
		struct jpath *p;
		char err[200], why[200] = "";
		if (!ok(jpath_parse(c->path, strlen(c->path), &p, err, sizeof err) == 0, "parse '%s'", c->path)) {
			diag("%s", err);
			continue;
		}
		is_str(jpath_text(p), c->path, "text of '%s'", c->path);
		const json_t *v = jpath_get(p, doc, why, sizeof why);
		if (c->want) {
			char *got = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
			is_str(got, c->want, "get '%s'", c->path);
			free(got);
		} else {
			ok(v == NULL, "get '%s' is missing", c->path);
			if (!ok(strstr(why, c->why) != NULL, "why for '%s'", c->path))
				diag("why: %s", why);
		}
		jpath_free(p);
	}
	for (size_t i = 0; i < sizeof parse_cases / sizeof parse_cases[0]; i++) {
		const struct parse_case *c = &parse_cases[i];
		struct jpath *p = (struct jpath *)1;
		char err[200] = "";
		int rc = jpath_parse(c->path, strlen(c->path), &p, err, sizeof err);
		if (!c->err) {
			ok(rc == 0 && p, "'%s' is valid", c->path);
		} else {
			ok(rc < 0 && p == NULL, "'%s' is invalid", c->path);
			if (!ok(strstr(err, c->err) != NULL, "'%s' message", c->path))
				diag("got: %s", err);
		}
		jpath_free(rc == 0 ? p : NULL);
	}
	/* Limits. */
	char longp[1100];
	memset(longp, 'a', sizeof longp - 1);
	longp[sizeof longp - 1] = 0;
	struct jpath *p;
	char err[200];
	ok(jpath_parse(longp, strlen(longp), &p, err, sizeof err) < 0 && strstr(err, "1024"),
	   "paths over 1024 bytes are rejected");
	struct strbuf sb = { 0 };
	for (int i = 0; i < 65; i++)
		strbuf_add(&sb, i ? ".a" : "a", i ? 2 : 1);
	ok(jpath_parse(sb.buf, sb.len, &p, err, sizeof err) < 0 && strstr(err, "64 segments"),
	   "more than 64 segments are rejected");
	strbuf_free(&sb);
	ok(jpath_parse("a\0b", 3, &p, err, sizeof err) < 0, "NUL in a path is rejected");
	ok(jpath_parse("a", 1, &p, err, sizeof err) == 0, "parse a");
	ok(jpath_get(p, NULL, NULL, 0) == NULL, "NULL document is missing");
	json_t *arr = json_array();
	ok(jpath_get(p, arr, NULL, 0) == NULL, "why may be NULL");
	json_decref(arr);
	jpath_free(p);
	jpath_free(NULL);
	json_decref(doc);
	return tap_done();
}
