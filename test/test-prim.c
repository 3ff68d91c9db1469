/*
 * Unit tests for common/prim (and the primitive paths of common/score): the
 * data table test/data/prim_cases.json (one single-dimension spec per case,
 * evaluated through score_eval, checking the dimension score, the warnings'
 * "severity:field" list and the verified flag), plus direct tests of the
 * exact rounding helpers and the exactness edges.
 */
#include "prim.h"
#include "isotime.h"
#include "score.h"
#include "spec.h"
#include "tap.h"
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void run_case(const json_t *c)
{
	const char *name = json_string_value(json_object_get(c, "name"));
	json_t *dim = json_deep_copy(json_object_get(c, "dim"));
	json_object_set_new(dim, "key", json_string("d"));
	json_object_set_new(dim, "weight", json_integer(1));
	json_t *spec_j = json_pack("{s:s, s:[o]}", "evaluator", "deterministic", "dimensions", dim);
	if (json_object_get(c, "constraints"))
		json_object_set(spec_j, "constraints", json_object_get(c, "constraints"));
	struct spec *s;
	char err[512];
	if (spec_from_json(spec_j, &s, err, sizeof err) < 0) {
		ok(0, "%s: spec parses (%s)", name, err);
		json_decref(spec_j);
		return;
	}
	struct score_match m = { .attempt_number = 1 };
	const json_t *mj = json_object_get(c, "match");
	if (mj) {
		const json_t *a = json_object_get(mj, "started_at"), *b = json_object_get(mj, "submitted_at");
		if (a && b) {
			m.has_times = isotime_parse(json_string_value(a), json_string_length(a), &m.started_at_ms) == 0 &&
			              isotime_parse(json_string_value(b), json_string_length(b), &m.submitted_at_ms) == 0;
			ok(m.has_times, "%s: match times parse", name);
		}
		m.time_limit_secs = (int)json_integer_value(json_object_get(mj, "time_limit_secs"));
	}
	struct score_limits lim = { SCORE_DEFAULT_MAX_STRING_BYTES, false, 0 };
	if (json_object_get(c, "max_string_bytes"))
		lim.max_string_bytes = (size_t)json_integer_value(json_object_get(c, "max_string_bytes"));
	struct score_result r;
	int rc = score_eval(s, json_object_get(c, "answer"), json_object_get(c, "metadata"),
	                    json_object_get(c, "ground_truth"), &m, NULL, &lim, &r, err, sizeof err);
	if (rc < 0) {
		ok(0, "%s: score_eval (%s)", name, err);
		goto out;
	}
	is_int(r.dims[0].score, json_integer_value(json_object_get(c, "score")), "%s: score", name);
	is_int(r.score, r.dims[0].score, "%s: total equals the single dimension", name);
	const json_t *want_w = json_object_get(c, "warnings");
	if (want_w) {
		struct strbuf got = { 0 }, want = { 0 };
		strbuf_add(&got, "", 0);
		strbuf_add(&want, "", 0);
		size_t i;
		json_t *w;
		json_array_foreach(r.warnings, i, w)
			strbuf_addf(&got, "%s%s:%s", i ? " " : "",
			            json_string_value(json_object_get(w, "severity")),
			            json_string_value(json_object_get(w, "field")));
		json_array_foreach(want_w, i, w)
			strbuf_addf(&want, "%s%s", i ? " " : "", json_string_value(w));
		is_str(got.buf, want.buf, "%s: warnings", name);
		json_array_foreach(r.warnings, i, w)
			ok(json_is_string(json_object_get(w, "message")) &&
			   json_object_size(w) == 3, "%s: warning %zu has severity, field, message", name, i);
		strbuf_free(&got);
		strbuf_free(&want);
	}
	const json_t *v = json_object_get(c, "verified");
	if (v)
		is_int(r.verified, json_is_true(v), "%s: verified", name);
	score_result_clear(&r);
	/* With explain, the scorer takes its general paths (no fast paths that skip building
	 * normalised values): the score must not change. */
	lim.explain = true;
	if (score_eval(s, json_object_get(c, "answer"), json_object_get(c, "metadata"),
	               json_object_get(c, "ground_truth"), &m, NULL, &lim, &r, err, sizeof err) == 0) {
		is_int(r.dims[0].score, json_integer_value(json_object_get(c, "score")),
		       "%s: score with explain", name);
		const json_t *ev = json_object_get(c, "explain_vars");   /* the vars --explain shows */
		if (ev) {
			const json_t *gv = json_object_get(r.dims[0].detail, "vars");
			char *g = gv ? json_dumps(gv, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
			char *w = json_dumps(ev, JSON_COMPACT | JSON_SORT_KEYS);
			is_str(g ? g : "(none)", w, "%s: explained vars", name);
			free(g);
			free(w);
		}
		score_result_clear(&r);
	} else {
		ok(0, "%s: score_eval with explain (%s)", name, err);
	}
out:
	spec_free(s);
	json_decref(spec_j);
}

static void test_rounding(void)
{
	is_int(prim_permille_ratio(1999, 2000), 1000, "999.5 rounds up to 1000");
	is_int(prim_permille_ratio(1, 2000), 1, "0.5 rounds up to 1");
	is_int(prim_permille_ratio(1, 2001), 0, "0.49975 rounds down");
	is_int(prim_permille_ratio(2, 3), 667, "2/3");
	is_int(prim_permille_ratio(1, 3), 333, "1/3");
	is_int(prim_permille_ratio(0, 5), 0, "0/5");
	is_int(prim_permille_ratio(5, 5), 1000, "5/5");
	is_int(prim_permille_ratio(7, 5), 1000, "clamped above");
	is_int(prim_permille_ratio(1, 0), 0, "zero denominator");
	unsigned __int128 big = (unsigned __int128)1 << 126;
	is_int(prim_permille_ratio(big / 2, big), 500, "huge operands");
	/* Against the definition floor((2000·num + den) / (2·den)) on operands of every size up
	 * to 2^100, around 2^60 (where a 64-bit path would overflow) and exact halves. */
	int bad = 0;
	uint64_t x = 0x2545F4914F6CDD1Dull;
	for (int i = 0; i < 20000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		int bits = 1 + (int)(x % 100);
		unsigned __int128 den = ((unsigned __int128)x << 40 | (x >> 3)) & ((((unsigned __int128)1) << bits) - 1);
		if (i % 4 == 0)
			den = ((unsigned __int128)1 << 60) - 2 + (x % 5);
		if (den == 0)
			den = 1;
		unsigned __int128 num = (unsigned __int128)(x * 0x9E3779B97F4A7C15ull) % den;
		if (i % 7 == 0 && den % 2000 == 0)
			num = den / 2000;   /* exactly 0.5 permille */
		int want = (int)((2000 * num + den) / (2 * den));
		bad += prim_permille_ratio(num, den) != want;
	}
	is_int(bad, 0, "20000 ratios round half up as defined (64- and 128-bit operands)");
	is_int(prim_permille_double(0.6745), 675, "double 0.6745 (binary 0.67449999...) -> 675");
	is_int(prim_permille_double(0.9995), 1000, "double 0.9995 -> 1000");
	is_int(prim_permille_double(0.0004), 0, "0.0004 -> 0");
	is_int(prim_permille_double(-3), 0, "negative clamps to 0");
	is_int(prim_permille_double(7), 1000, "above 1 clamps to 1000");
	is_int(prim_permille_double(NAN), 0, "NaN -> 0");
	is_int(prim_permille_double(INFINITY), 1000, "inf -> 1000");
}

static void test_ratio_999_5(void)
{
	json_t *a = json_array(), *b = json_array();
	for (int i = 0; i < 2000; i++) {
		json_array_append_new(a, json_integer(i < 1999 ? i : -1));
		json_array_append_new(b, json_integer(i));
	}
	is_int(prim_exact_match_ratio(a, b, NULL, NULL), 1000, "exact_match_ratio 1999/2000 -> 1000");
	is_int(prim_coverage_ratio(a, b, NULL, NULL), 1000, "coverage_ratio 1999/2000 -> 1000");
	is_int(prim_set_overlap(a, b, false, NULL, NULL), 1000, "set_overlap intersection 1999/2000 -> 1000");
	json_array_set_new(a, 1998, json_integer(-2));
	is_int(prim_exact_match_ratio(a, b, NULL, NULL), 999, "exact_match_ratio 1998/2000 -> 999");
	json_decref(a);
	json_decref(b);
}

static void test_numeric_edges(void)
{
	struct dec_num tol = { 1, -2 };
	json_t *x = json_real(1.01), *y = json_real(1.0);
	is_int(prim_numeric_tolerance(x, y, &tol, false, NULL, NULL, NULL), 1000, "direct 1.01 vs 1.0");
	json_decref(x);
	json_decref(y);
	/* Exponent spreads beyond 10^36 are exact too (wide integers). */
	x = json_real(-1e-40);
	y = json_real(0.01);
	is_int(prim_numeric_tolerance(x, y, &tol, false, NULL, NULL, NULL), 0,
	       "-1e-40 vs 0.01 at tol 0.01: just outside");
	json_decref(x);
	x = json_real(1e-40);
	is_int(prim_numeric_tolerance(x, y, &tol, false, NULL, NULL, NULL), 1000,
	       "1e-40 vs 0.01 at tol 0.01: just inside");
	json_decref(x);
	json_decref(y);
	{
		struct dec_num t300 = { 1, 300 };
		x = json_real(1e300);
		y = json_real(-1e-300);
		is_int(prim_numeric_tolerance(x, y, &t300, false, NULL, NULL, NULL), 0,
		       "1e300 vs -1e-300 at tol 1e300: just outside");
		json_decref(x);
		x = json_real(3e300);
		is_int(prim_numeric_tolerance(x, y, &t300, true, NULL, NULL, NULL), 500,
		       "linear 3e300 vs -1e-300 at tol 1e300: 499.99.. -> 500");
		json_decref(x);
		json_decref(y);
		json_t *ga = json_pack("[f, f, f]", -1e-40, 5e-324, 1e308);
		json_t *wa = json_pack("[f, f, f]", 0.03, 0.02, 1e308);
		is_int(prim_numeric_tolerance(ga, wa, &tol, true, NULL, NULL, NULL), 750,
		       "linear array with -1e-40, a subnormal and 1e308: (0.5 + 0.75 + 1) / 3");
		json_decref(ga);
		json_decref(wa);
		struct dec_num tiny = { 5, -324 };
		ga = json_pack("[f, f]", 1e-323, -1.7976931348623157e308);
		wa = json_pack("[f, f]", 5e-324, 1.7976931348623157e308);
		is_int(prim_numeric_tolerance(ga, wa, &tiny, false, NULL, NULL, NULL), 500,
		       "tol 5e-324: 1e-323 vs 5e-324 within, -max vs max outside");
		json_decref(ga);
		json_decref(wa);
	}
	x = json_real(1e40);
	y = json_real(1e-40);
	is_int(prim_numeric_tolerance(x, y, &tol, false, NULL, NULL, NULL), 0, "1e40 vs 1e-40 outside");
	struct dec_num big = { 1, 41 };
	is_int(prim_numeric_tolerance(x, y, &big, false, NULL, NULL, NULL), 1000, "1e40 vs 1e-40 within 1e41");
	json_decref(x);
	json_decref(y);
	/* Large integers compare exactly. */
	x = json_integer(9007199254740993LL);
	y = json_integer(9007199254740992LL);
	struct dec_num zero = { 0, 0 };
	is_int(prim_numeric_tolerance(x, y, &zero, false, NULL, NULL, NULL), 0, "2^53+1 vs 2^53 at tol 0");
	struct dec_num one = { 1, 0 };
	is_int(prim_numeric_tolerance(x, y, &one, false, NULL, NULL, NULL), 1000, "2^53+1 vs 2^53 at tol 1");
	json_decref(x);
	json_decref(y);
	/* Linear decay over many elements stays exact. */
	json_t *a = json_array(), *b = json_array();
	for (int i = 0; i < 1000; i++) {
		json_array_append_new(a, json_real(1.03));   /* fraction 0.5 each */
		json_array_append_new(b, json_integer(1));
	}
	is_int(prim_numeric_tolerance(a, b, &tol, true, NULL, NULL, NULL), 500, "1000 elements at 0.5");
	json_decref(a);
	json_decref(b);
}

static void test_time_decay_direct(void)
{
	struct dec_num l300 = { 3, 2 }, lfrac = { 15, -1 };
	is_int(prim_time_decay(66000, &l300, 1.0, NULL), 780, "66 s of 300");
	is_int(prim_time_decay(-1, &l300, 1.0, NULL), 1000, "negative elapsed");
	is_int(prim_time_decay(300000, &l300, 1.0, NULL), 0, "at the limit");
	is_int(prim_time_decay(750, &lfrac, 1.0, NULL), 500, "0.75 s of 1.5 s");
	is_int(prim_time_decay(150000, &l300, 3.0, NULL), 125, "curve 3: 0.5^3");
	is_int(prim_time_decay(400000, &l300, 0.5, NULL), 0, "past the limit with a curve");
}

static void test_efficiency_direct(void)
{
	json_t *c = json_integer(0), *r = json_real(10.0), *f = json_real(10.5), *neg = json_integer(-1);
	struct prim_err e;
	is_int(prim_efficiency(c, 0, &e, NULL), 1000, "budget 0, count 0");
	is_int(prim_efficiency(r, 40, &e, NULL), 750, "integral real count");
	is_int(prim_efficiency(f, 40, &e, NULL), PRIM_BAD, "fractional count is ill-typed");
	is_int(prim_efficiency(neg, 40, &e, NULL), PRIM_BAD, "negative count is ill-typed");
	is_int(prim_efficiency(r, 0, &e, NULL), 0, "budget 0, count 10");
	json_decref(c);
	json_decref(r);
	json_decref(f);
	json_decref(neg);
}

/* prim_count_words (8 bytes at a time on ASCII) against a byte-by-byte count: random texts of
 * spaces, tabs, newlines, vertical tab, form feed, other controls, letters and some UTF-8,
 * at every length and offset up to 40 bytes. */
static void test_count_words(void)
{
	static const char alphabet[] = " \t\n\v\f\r\x01\x08\x0e\x1f!ab~\x7f";
	unsigned seed = 12345;
	int bad = 0;
	for (int round = 0; round < 4000; round++) {
		char t[48];
		size_t n = (size_t)round % 41;
		for (size_t i = 0; i < n; i++) {
			seed = seed * 1103515245u + 12345u;
			t[i] = alphabet[(seed >> 16) % (sizeof alphabet - 1)];
		}
		if (round % 7 == 3 && n >= 2) {   /* a two-byte UTF-8 letter (e acute) somewhere */
			size_t at = (seed >> 8) % (n - 1);
			t[at] = (char)0xC3;
			t[at + 1] = (char)0xA9;
		}
		size_t want = 0;
		bool in = false;
		for (size_t i = 0; i < n; i++) {
			unsigned char c = (unsigned char)t[i];
			bool ws = c == ' ' || (c >= 9 && c <= 13);
			want += !ws && !in;
			in = !ws;
		}
		if (prim_count_words(t, n) != want && bad++ < 5)
			diag("round %d: %zu words, counted %zu", round, want, prim_count_words(t, n));
	}
	is_int(bad, 0, "count_words agrees with a byte-by-byte count on 4000 random texts");
	static const char nine[] = "one two\tthree\nfour  five\r\nsix seven eight nine";
	is_int((long long)prim_count_words(nine, strlen(nine)), 9, "nine words across 8-byte blocks");
}

static void test_names(void)
{
	enum prim_kind k;
	for (int i = 1; i < PRIM_KIND_COUNT; i++) {
		const char *name = prim_kind_name((enum prim_kind)i);
		ok(name[0] && prim_kind_from_name(name, &k) == 0 && k == (enum prim_kind)i,
		   "primitive %d's name %s round-trips", i, name);
	}
	ok(prim_kind_from_name("Exact_match", &k) < 0, "names are case-sensitive");
	ok(prim_kind_from_name("", &k) < 0, "empty name");
	ok(!strcmp(prim_kind_name(PRIM_NONE), "") && !strcmp(prim_kind_name(PRIM_KIND_COUNT), ""),
	   "no name for PRIM_NONE or beyond the table");
}

/* A file's text (NUL-terminated, caller frees), or NULL. */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	struct strbuf sb = { 0 };
	char buf[65536];
	size_t n;
	strbuf_addlit(&sb, "");
	while ((n = fread(buf, 1, sizeof buf, f)) > 0)
		strbuf_add(&sb, buf, n);
	fclose(f);
	return sb.buf;
}

/* True when text names primitive name as JSON ("primitive": "name", with or without the
 * space), or inside a C string literal (escaped quotes) when c_source. */
static bool names_prim(const char *text, const char *name, bool c_source)
{
	char a[128], b[128];
	if (c_source) {
		snprintf(a, sizeof a, "\\\"primitive\\\":\\\"%s\\\"", name);
		snprintf(b, sizeof b, "\\\"primitive\\\": \\\"%s\\\"", name);
	} else {
		snprintf(a, sizeof a, "\"primitive\":\"%s\"", name);
		snprintf(b, sizeof b, "\"primitive\": \"%s\"", name);
	}
	return strstr(text, a) || strstr(text, b);
}

/* Every primitive's descriptor (common/score.c prim_table) has what the descriptor's comment in
 * common/prim.h asks for besides its row: a row of a primitives table in common/README.md
 * ("| `name`"), cases in the unit case tables (test/data/prim*_cases.json), an implementation in
 * the differential reference (named in its REFERENCE_PRIMITIVES) and a fuzz seed (a spec of
 * test/fuzz/corpus/spec naming it, or fuzz_match's fixed spec). Its parameters are known to the
 * validator, and the flags are consistent. */
static void test_descriptors(void)
{
	char *readme = slurp("common/README.md");
	char *diff = slurp("test/integration/test_score_differential.py");
	char *fuzz_match = slurp("test/fuzz/fuzz_match.c");
	static const char *const tables[] = { "test/data/prim_cases.json",
		"test/data/prim_v2_cases.json", "test/data/prim_v3_cases.json" };
	char *cases[3];
	for (int t = 0; t < 3; t++)
		cases[t] = slurp(tables[t]);
	struct strbuf seeds = { 0 };
	strbuf_addlit(&seeds, "");
	for (int i = 0; i < 100; i++) {
		char path[64];
		snprintf(path, sizeof path, "test/fuzz/corpus/spec/%02d.json", i);
		char *t = slurp(path);
		if (t)
			strbuf_add(&seeds, t, strlen(t));
		free(t);
	}
	if (!ok(readme && diff && fuzz_match && cases[0] && cases[1] && cases[2] && seeds.len,
	        "descriptor test: the README, case tables, reference and fuzz corpus are readable"))
		goto out;
	const char *refs = strstr(diff, "REFERENCE_PRIMITIVES = ");
	const char *refs_end = refs ? strstr(refs, "\n\n") : NULL;
	ok(refs && refs_end, "the differential reference lists REFERENCE_PRIMITIVES");
	for (int i = 1; i < PRIM_KIND_COUNT && refs && refs_end; i++) {
		const char *name = prim_kind_name((enum prim_kind)i);
		char pat[96];
		snprintf(pat, sizeof pat, "| `%s`", name);
		ok(strstr(readme, pat) != NULL, "%s: a row in common/README.md's primitive tables", name);
		bool in_cases = false;
		for (int t = 0; t < 3; t++)
			in_cases |= names_prim(cases[t], name, false);
		ok(in_cases, "%s: cases in test/data/prim*_cases.json", name);
		snprintf(pat, sizeof pat, "'%s'", name);
		const char *at = strstr(refs, pat);
		ok(at && at < refs_end, "%s: implemented by the differential reference", name);
		ok(names_prim(seeds.buf, name, false) || names_prim(fuzz_match, name, true),
		   "%s: a fuzz seed (test/fuzz/corpus/spec or fuzz_match.c's spec)", name);
		unsigned fl = prim_flags((enum prim_kind)i);
		const char *const *pa = prim_params((enum prim_kind)i);
		bool has_field = false, has_gt = false;
		for (size_t k = 0; pa[k]; k++) {
			has_field |= !strcmp(pa[k], "field");
			has_gt |= !strcmp(pa[k], "ground_truth_field");
		}
		ok(has_field == !!(fl & PRIM_F_FIELD) &&
		   has_gt == !!(fl & (PRIM_F_GT | PRIM_F_GT_OPT)) &&
		   (!(fl & PRIM_F_NESTABLE) || (fl & PRIM_F_FIELD)),
		   "%s: flags agree with its parameters", name);
	}
out:
	free(readme);
	free(diff);
	free(fuzz_match);
	for (int t = 0; t < 3; t++)
		free(cases[t]);
	strbuf_free(&seeds);
}

int main(void)
{
	json_error_t je;
	json_t *cases = json_load_file("test/data/prim_cases.json", 0, &je);
	if (!cases) {
		ok(0, "load test/data/prim_cases.json: line %d: %s", je.line, je.text);
		return tap_done();
	}
	size_t i;
	json_t *c;
	json_array_foreach(cases, i, c)
		run_case(c);
	json_decref(cases);
	/* Spec language v2: the new primitives and options (common/README.md "Spec language v2"). */
	cases = json_load_file("test/data/prim_v2_cases.json", 0, &je);
	ok(cases != NULL, "load test/data/prim_v2_cases.json (line %d: %s)", je.line, je.text);
	json_array_foreach(cases, i, c)
		run_case(c);
	json_decref(cases);
	/* Spec language v3 (common/README.md "Spec language v3"). */
	cases = json_load_file("test/data/prim_v3_cases.json", 0, &je);
	ok(cases != NULL, "load test/data/prim_v3_cases.json (line %d: %s)", je.line, je.text);
	json_array_foreach(cases, i, c)
		run_case(c);
	json_decref(cases);
	test_rounding();
	test_ratio_999_5();
	test_numeric_edges();
	test_time_decay_direct();
	test_efficiency_direct();
	test_names();
	test_descriptors();
	test_count_words();
	return tap_done();
}
