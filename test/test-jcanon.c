/*
 * Unit tests for common/jcanon: deep equality (numbers as exact decimals,
 * ordered arrays, objects by key set, optional Unicode case folding of string
 * values) and the canonical text used to compare set items. Table-driven.
 */
#include "jcanon.h"
#include "tap.h"

#include <stdlib.h>

struct eq_case {
	const char *a, *b;
	int fold;
	int equal;
};

static const struct eq_case eq_cases[] = {
	{ "1", "1.0", 0, 1 }, { "1", "1.5", 0, 0 }, { "100", "1e2", 0, 1 }, { "0.1", "0.10", 0, 1 },
	{ "-0.0", "0", 0, 1 }, { "0.30000000000000004", "0.3", 0, 0 },
	{ "9007199254740993", "9007199254740992", 0, 0 }, { "9007199254740992", "9007199254740992.0", 0, 1 },
	{ "\"a\"", "\"a\"", 0, 1 }, { "\"a\"", "\"A\"", 0, 0 }, { "\"a\"", "\"A\"", 1, 1 },
	{ "\"Straße\"", "\"STRASSE\"", 1, 1 }, { "\"Straße\"", "\"STRASSE\"", 0, 0 },
	{ "\"ΣΊΣΥΦΟΣ\"", "\"σίσυφος\"", 1, 1 }, { "\"ǅ\"", "\"ǆ\"", 1, 1 },
	{ "\"Ａ\"", "\"ａ\"", 1, 1 }, { "\"Ａ\"", "\"a\"", 1, 0 },
	{ "\"é\"", "\"e\\u0301\"", 1, 0 }, { "\"K\"", "\"\\u212a\"", 1, 1 },
	{ "\"1\"", "1", 0, 0 }, { "true", "1", 0, 0 }, { "false", "0", 0, 0 }, { "null", "null", 0, 1 },
	{ "null", "false", 0, 0 }, { "true", "true", 0, 1 }, { "[]", "{}", 0, 0 },
	{ "[1,2]", "[1,2]", 0, 1 }, { "[1,2]", "[2,1]", 0, 0 }, { "[1]", "[1,1]", 0, 0 },
	{ "[[1,[2.0]]]", "[[1.0,[2]]]", 0, 1 },
	{ "{\"a\":1,\"b\":2}", "{\"b\":2,\"a\":1.0}", 0, 1 }, { "{\"a\":1}", "{\"a\":1,\"b\":2}", 0, 0 },
	{ "{\"a\":1}", "{\"b\":1}", 0, 0 }, { "{\"A\":\"x\"}", "{\"a\":\"x\"}", 1, 0 },
	{ "{\"k\":[\"ÄB\",{\"z\":\"Ǆ\"}]}", "{\"k\":[\"äb\",{\"z\":\"ǆ\"}]}", 1, 1 },
	{ "{}", "{}", 0, 1 }, { "\"\"", "\"\"", 1, 1 },
};

struct canon_case {
	const char *in, *out;
};

static const struct canon_case canon_cases[] = {
	{ "1", "1" }, { "1.0", "1" }, { "1e2", "1e2" }, { "100", "1e2" }, { "0.25", "25e-2" },
	{ "\"a\\\"b\\\\c\\n\\u0001\"", "\"a\\\"b\\\\c\\u000a\\u0001\"" }, { "\"é\"", "\"é\"" },
	{ "{\"b\":1,\"a\":[true,false,null]}", "{\"a\":[true,false,null],\"b\":1}" },
	{ "{\"b\":{\"d\":1,\"c\":2.50},\"a\":{}}", "{\"a\":{},\"b\":{\"c\":25e-1,\"d\":1}}" },
	{ "[]", "[]" }, { "{\"\":1,\"a\":2,\"A\":3}", "{\"\":1,\"A\":3,\"a\":2}" },
};

static json_t *load(const char *s)
{
	json_error_t je;
	json_t *v = json_loads(s, JSON_DECODE_ANY, &je);
	if (!v)
		diag("bad test JSON %s: %s", s, je.text);
	return v;
}

int main(void)
{
	for (size_t i = 0; i < sizeof eq_cases / sizeof eq_cases[0]; i++) {
		const struct eq_case *c = &eq_cases[i];
		json_t *a = load(c->a), *b = load(c->b);
		is_int(jcanon_equal(a, b, c->fold), c->equal, "%s %s %s%s", c->a, c->equal ? "==" : "!=",
		       c->b, c->fold ? " (case-insensitive)" : "");
		is_int(jcanon_equal(b, a, c->fold), c->equal, "symmetric: %s / %s", c->b, c->a);
		if (!c->fold) {
			struct strbuf x = { 0 }, y = { 0 };
			jcanon_dump(a, &x);
			jcanon_dump(b, &y);
			is_int(!strcmp(x.buf, y.buf), c->equal, "canonical texts agree with equality: %s / %s",
			       c->a, c->b);
			strbuf_free(&x);
			strbuf_free(&y);
		}
		json_decref(a);
		json_decref(b);
	}
	ok(jcanon_equal(NULL, NULL, false), "NULL equals NULL");
	json_t *one = json_integer(1);
	ok(!jcanon_equal(one, NULL, false) && !jcanon_equal(NULL, one, false), "NULL differs");
	json_decref(one);
	for (size_t i = 0; i < sizeof canon_cases / sizeof canon_cases[0]; i++) {
		json_t *v = load(canon_cases[i].in);
		struct strbuf sb = { 0 };
		jcanon_dump(v, &sb);
		is_str(sb.buf, canon_cases[i].out, "canonical %s", canon_cases[i].in);
		strbuf_free(&sb);
		json_decref(v);
	}
	size_t n;
	char *f = jcanon_casefold("ÀB ß", strlen("ÀB ß"), &n);
	is_str(f, "àb ss", "casefold");
	is_int(n, strlen("àb ss"), "casefold length");
	free(f);
	ok(jcanon_casefold("\xff", 1, &n) == NULL, "invalid UTF-8 is rejected");
	return tap_done();
}
