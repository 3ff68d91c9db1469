/*
 * Unit tests for common/norm: each step alone and combined (fixed order),
 * Unicode cases, numeric strings (what is and is not a JSON number), deep
 * application to arrays and objects (keys untouched), and step parsing
 * messages.
 */
#include "norm.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

struct tcase { const char *steps; const char *in; const char *out; };

static unsigned steps_of(const char *list)
{
	json_t *a = json_loads(list, 0, NULL);
	unsigned s = 0;
	char err[200];
	if (norm_parse(a, &s, err, sizeof err) < 0)
		s = 0;
	json_decref(a);
	return s;
}

static const struct tcase tcases[] = {
	{ "[\"trim\"]", "  a b  ", "a b" },
	{ "[\"trim\"]", "\xE2\x80\x83x\xE2\x80\x83", "x" },           /* em space is whitespace */
	{ "[\"trim\"]", "   ", "" },
	{ "[\"casefold\"]", "Stra\xC3\x9F" "E", "strasse" },
	{ "[\"casefold\"]", "ABC def", "abc def" },
	{ "[\"nfkc\"]", "\xEF\xAC\x81", "fi" },
	{ "[\"nfkc\"]", "e\xCC\x81", "\xC3\xA9" },
	{ "[\"whitespace\"]", "a \t\n b", "a b" },
	{ "[\"whitespace\"]", "  a  ", " a " },
	{ "[\"whitespace\", \"trim\"]", "  a   b  ", "a b" },
	{ "[\"separators\"]", "a-b_c d", "a b c d" },
	{ "[\"separators\", \"whitespace\"]", "a - b", "a b" },
	{ "[\"punctuation\"]", "Hello, world! (ok)", "Hello world ok" },
	{ "[\"punctuation\"]", "a+b=c $5", "a+b=c $5" },           /* symbols are not punctuation */
	{ "[\"punctuation\"]", "\xC2\xABquote\xC2\xBB", "quote" },   /* « » */
	{ "[\"punctuation\", \"separators\"]", "well-known", "well known" },   /* separators first */
	{ "[\"trim\", \"casefold\", \"punctuation\", \"whitespace\"]", "  The END.  ", "the end" },
	{ "[]", "Same", "Same" },
};

int main(void)
{
	for (size_t i = 0; i < sizeof tcases / sizeof tcases[0]; i++) {
		const struct tcase *c = &tcases[i];
		size_t n;
		char *o = norm_text(steps_of(c->steps), c->in, strlen(c->in), &n);
		is_str(o, c->out, "%s \"%s\"", c->steps, c->in);
		is_int((long long)n, (long long)strlen(c->out), "%s \"%s\": length", c->steps, c->in);
		free(o);
	}
	/* numeric: JSON number grammar only, after the other steps, surrounding spaces ignored. */
	static const struct { const char *in; const char *out; } nums[] = {
		{ "\"42\"", "42" }, { "\" -1.50 \"", "-1.5" }, { "\"1e3\"", "1000.0" },
		{ "\"0.1\"", "0.10000000000000001" }, { "\"+1\"", "\"+1\"" }, { "\"01\"", "\"01\"" },
		{ "\"1.\"", "\"1.\"" }, { "\"abc\"", "\"abc\"" }, { "\"\"", "\"\"" },
		{ "\"NaN\"", "\"NaN\"" }, { "\"1e999\"", "\"1e999\"" }, { "7", "7" },
		{ "[\"1\", {\"K\": \"2\"}]", "[1, {\"K\": 2}]" },
	};
	for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
		json_t *v = json_loads(nums[i].in, JSON_DECODE_ANY, NULL);
		json_t *r = norm_value(NORM_NUMERIC | NORM_TRIM, v);
		char *t = json_dumps(r, JSON_ENCODE_ANY);
		is_str(t, nums[i].out, "numeric %s", nums[i].in);
		free(t);
		json_decref(r);
		json_decref(v);
	}
	/* The ASCII fast path agrees with the general (Unicode) path on every ASCII character and
	 * every combination of text steps: the same text with one "\xC3\xA9" (e acute, a letter
	 * NFKC and folding leave alone) in the middle takes the general path; the results must
	 * be equal once it is replaced by 'e'. */
	static const char *const shapes[][2] = { { "", "" }, { " ", " " }, { "A-", "_b " },
	                                         { "\t", "x" }, { "@AZ[`az{ Q", "MNOPQRSTUV-" } };
	int mism = 0;
	for (unsigned st = 0; st < 64; st++)
		for (int ch = 1; ch < 128; ch++)
			for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
				char a8[48], b8[48];
				int la = snprintf(a8, sizeof a8, "%s%c\xC3\xA9%c%s", shapes[k][0], ch, ch, shapes[k][1]);
				int lb = snprintf(b8, sizeof b8, "%s%ce%c%s", shapes[k][0], ch, ch, shapes[k][1]);
				size_t na, nb;
				char *ga = norm_text(st, a8, (size_t)la, &na), *gb = norm_text(st, b8, (size_t)lb, &nb);
				char *e = strstr(ga, "\xC3\xA9");
				if (e) {   /* replace the two bytes by 'e' */
					*e = 'e';
					memmove(e + 1, e + 2, strlen(e + 2) + 1);
					na--;
				}
				if (!e || na != nb || strcmp(ga, gb)) {
					if (mism++ < 5)
						diag("steps %#x char %d shape %zu: general '%s' ascii '%s'", st, ch, k, ga, gb);
				}
				free(ga);
				free(gb);
			}
	is_int(mism, 0, "ASCII fast path = general path (64 step sets x 127 characters x 5 shapes)");
	/* Deep: object keys are not normalised. */
	json_t *v = json_loads("{\"Key\": [\" A \", {\"In\": \"B\"}], \"n\": null}", 0, NULL);
	json_t *r = norm_value(NORM_CASEFOLD | NORM_TRIM, v);
	char *t = json_dumps(r, JSON_SORT_KEYS | JSON_COMPACT);
	is_str(t, "{\"Key\":[\"a\",{\"In\":\"b\"}],\"n\":null}", "deep, keys untouched");
	free(t);
	json_decref(r);
	r = norm_value(0, v);
	ok(r == v, "no steps: the same value");
	json_decref(r);
	json_decref(v);
	/* Parsing. */
	char err[200], d[100];
	unsigned s;
	json_t *a = json_loads("[\"whitespace\", \"nfkc\", \"trim\"]", 0, NULL);
	is_int(norm_parse(a, &s, err, sizeof err), 0, "parse a list");
	norm_describe(s, d, sizeof d);
	is_str(d, "nfkc,whitespace,trim", "steps described in their fixed order");
	json_decref(a);
	a = json_loads("[\"trim\", 3]", 0, NULL);
	is_int(norm_parse(a, &s, err, sizeof err), -1, "a number is not a step");
	ok(strstr(err, "normalize[1]: unknown step 'a number'") != NULL, "message: %s", err);
	json_decref(a);
	a = json_string("trim");
	is_int(norm_parse(a, &s, err, sizeof err), -1, "a string is not a list");
	ok(strstr(err, "normalize must be an array") != NULL, "message: %s", err);
	json_decref(a);
	return tap_done();
}
