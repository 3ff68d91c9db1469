/*
 * Unit tests for common/score: the seed's worked example (823, win) printed
 * exactly, exact totals and floor, thresholds, gates (strictly above, chains
 * on final scores), constraint violations, the verified flag, external
 * scores from the test-suite / custom-script evaluators, and the result JSON
 * (key order, exact decimals, score_result_json == score_result_dumps).
 */
#include "score.h"
#include "bench/bench_v2_spec.h"
#include "isotime.h"
#include "tap.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct spec *parse(const char *text)
{
	struct spec *s = NULL;
	char err[512];
	if (spec_parse(text, strlen(text), &s, err, sizeof err) < 0)
		diag("spec error: %s", err);
	return s;
}

/* Scores answer (JSON text) against spec (JSON text); returns dumps (caller frees). */
static char *run(const char *spec, const char *answer, const char *metadata, const char *gt,
                 const struct score_match *m, struct score_result *out)
{
	json_error_t je;
	struct spec *s = parse(spec);
	if (!s)
		return NULL;
	json_t *a = answer ? json_loads(answer, JSON_DECODE_ANY, &je) : NULL;
	json_t *md = metadata ? json_loads(metadata, 0, &je) : NULL;
	json_t *g = gt ? json_loads(gt, 0, &je) : NULL;
	char err[256];
	char *text = NULL;
	if (score_eval(s, a, md, g, m, NULL, NULL, out, err, sizeof err) == 0)
		text = score_result_dumps(out);
	else
		diag("score_eval: %s", err);
	json_decref(a);
	json_decref(md);
	json_decref(g);
	spec_free(s);
	return text;
}

/* A spec whose dimensions score the constants given (expression "0.xyz"). */
static char *const_spec(const char *const *keys, const char *const *weights, const int *scores,
                        size_t n, const char *tail)
{
	struct strbuf sb = { 0 };
	strbuf_addf(&sb, "{\"evaluator\":\"deterministic\",\"dimensions\":[");
	for (size_t i = 0; i < n; i++)
		strbuf_addf(&sb, "%s{\"key\":\"%s\",\"weight\":%s,\"primitive\":\"expression\",\"expr\":\"%d/1000\"}",
		            i ? "," : "", keys[i], weights[i], scores[i]);
	strbuf_addf(&sb, "]%s}", tail ? tail : "");
	return sb.buf;
}

static void test_seed_example(void)
{
	static const char *const keys[] = { "correctness", "speed", "methodology", "completeness" };
	static const char *const w[] = { "0.5", "0.2", "0.15", "0.15" };
	static const int sc[] = { 900, 780, 690, 760 };
	char *spec = const_spec(keys, w, sc, 4, NULL);
	struct score_result r;
	char *text = run(spec, "{}", NULL, NULL, NULL, &r);
	is_str(text, "{\"score\":823,\"result\":\"win\",\"score_breakdown\":{"
	       "\"correctness\":{\"score\":900,\"weight\":0.5,\"weighted\":450},"
	       "\"speed\":{\"score\":780,\"weight\":0.2,\"weighted\":156},"
	       "\"methodology\":{\"score\":690,\"weight\":0.15,\"weighted\":103.5},"
	       "\"completeness\":{\"score\":760,\"weight\":0.15,\"weighted\":114}},"
	       "\"submission_warnings\":[],\"constraint_violations\":[],\"verified\":false}",
	       "seed worked example: 823, win, exact decimals");
	is_int(r.score, 823, "score 823");
	is_int(r.result, SCORE_WIN, "win");
	is_int(r.dims[2].weighted, 103500000, "103.5 exactly in micro-units");
	/* score_result_json carries the same values. */
	json_t *j = score_result_json(&r), *back = json_loads(text, 0, NULL);
	ok(json_equal(j, back), "score_result_json equals the parsed dumps");
	const char *k;
	json_t *v;
	static const char *const order[] = { "score", "result", "score_breakdown",
		"submission_warnings", "constraint_violations", "verified" };
	size_t i = 0;
	int in_order = 1;
	json_object_foreach(j, k, v)
		in_order &= i < 6 && !strcmp(k, order[i++]);
	ok(in_order && i == 6, "score_result_json key order");
	i = 0;
	in_order = 1;
	json_object_foreach(json_object_get(j, "score_breakdown"), k, v)
		in_order &= !strcmp(k, keys[i++]);
	ok(in_order, "breakdown in spec order");
	json_decref(j);
	json_decref(back);
	free(text);
	score_result_clear(&r);
	free(spec);
}

struct total_case {
	const char *w[3];
	int sc[3];
	const char *tail;
	int total;
	enum score_outcome res;
	const char *weighted0;    /* expected text of dims[0].weighted */
};

static const struct total_case total_cases[] = {
	{ { "0.333333", "0.333333", "0.333334" }, { 1000, 1000, 1000 }, NULL, 1000, SCORE_WIN, "333.333" },
	{ { "0.333333", "0.333333", "0.333334" }, { 999, 999, 999 }, NULL, 999, SCORE_WIN, "332.999667" },
	{ { "0.5", "0.25", "0.25" }, { 700, 700, 700 }, NULL, 700, SCORE_WIN, "350" },
	{ { "0.5", "0.25", "0.25" }, { 700, 699, 699 }, NULL, 699, SCORE_DRAW, "350" },
	{ { "0.5", "0.25", "0.25" }, { 400, 400, 400 }, NULL, 400, SCORE_DRAW, "200" },
	{ { "0.5", "0.25", "0.25" }, { 400, 399, 399 }, NULL, 399, SCORE_LOSS, "200" },
	{ { "0.5", "0.25", "0.25" }, { 0, 0, 0 }, NULL, 0, SCORE_LOSS, "0" },
	{ { "0.5", "0.25", "0.25" }, { 1, 2, 1 }, NULL, 1, SCORE_LOSS, "0.5" },
	{ { "0.000001", "0.499999", "0.5" }, { 1, 0, 0 }, NULL, 0, SCORE_LOSS, "0.000001" },
	{ { "0.1", "0.2", "0.7" }, { 999, 999, 999 }, NULL, 999, SCORE_WIN, "99.9" },
	{ { "0.5", "0.25", "0.25" }, { 600, 600, 600 }, ",\"thresholds\":{\"win\":600,\"draw\":300}", 600, SCORE_WIN, "300" },
	{ { "0.5", "0.25", "0.25" }, { 600, 600, 600 }, ",\"thresholds\":{\"win\":600.5,\"draw\":600}", 600, SCORE_DRAW, "300" },
	{ { "0.5", "0.25", "0.25" }, { 0, 0, 0 }, ",\"thresholds\":{\"win\":0,\"draw\":0}", 0, SCORE_WIN, "0" },
	{ { "0.5", "0.25", "0.25" }, { 1000, 1000, 1000 }, ",\"thresholds\":{\"win\":1000,\"draw\":1000}", 1000, SCORE_WIN, "500" },
};

static void test_totals(void)
{
	static const char *const keys[] = { "a", "b", "c" };
	for (size_t i = 0; i < sizeof total_cases / sizeof total_cases[0]; i++) {
		const struct total_case *c = &total_cases[i];
		char *spec = const_spec(keys, c->w, c->sc, 3, c->tail);
		struct score_result r;
		char *text = run(spec, NULL, NULL, NULL, NULL, &r);
		char buf[40];
		is_int(r.score, c->total, "total case %zu: %d", i, c->total);
		is_int(r.result, c->res, "total case %zu: %s", i, score_outcome_name(c->res));
		dec_format(r.dims[0].weighted, buf, sizeof buf);
		is_str(buf, c->weighted0, "total case %zu: weighted", i);
		ok(text && strstr(text, c->weighted0), "total case %zu: weighted printed exactly", i);
		free(text);
		score_result_clear(&r);
		free(spec);
	}
}

static void test_gates(void)
{
	static const char *spec_fmt =
		"{\"evaluator\":\"deterministic\",\"dimensions\":["
		"{\"key\":\"latency\",\"weight\":0.2,\"primitive\":\"expression\",\"expr\":\"l\",\"vars\":{\"l\":\"l\"},"
		" \"gate\":{\"dimension\":\"cost\",\"above\":%s}},"
		"{\"key\":\"cost\",\"weight\":0.3,\"primitive\":\"expression\",\"expr\":\"c\",\"vars\":{\"c\":\"c\"},"
		" \"gate\":{\"dimension\":\"success\",\"above\":700}},"
		"{\"key\":\"success\",\"weight\":0.5,\"primitive\":\"expression\",\"expr\":\"s\",\"vars\":{\"s\":\"s\"}}]}";
	static const struct {
		const char *above, *answer;
		int lat, cost, succ, total;
	} cases[] = {
		{ "200", "{\"s\":0.8,\"c\":0.3,\"l\":0.5}", 500, 300, 800, 590 },
		{ "200", "{\"s\":0.7,\"c\":0.3,\"l\":0.5}", 0, 0, 700, 350 },      /* not strictly above */
		{ "200", "{\"s\":0.701,\"c\":0.3,\"l\":0.5}", 500, 300, 701, 540 },
		{ "300", "{\"s\":0.8,\"c\":0.3,\"l\":0.5}", 0, 300, 800, 490 },    /* 300 is not > 300 */
		{ "-1", "{\"s\":0.1,\"c\":0.3,\"l\":0.5}", 500, 0, 100, 150 },       /* gated cost (0) > -1 */
		{ "299.5", "{\"s\":0.8,\"c\":0.3,\"l\":0.5}", 500, 300, 800, 590 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char spec[2048];
		snprintf(spec, sizeof spec, spec_fmt, cases[i].above);
		struct score_result r;
		char *text = run(spec, cases[i].answer, NULL, NULL, NULL, &r);
		is_int(r.dims[0].score, cases[i].lat, "gate case %zu: latency", i);
		is_int(r.dims[1].score, cases[i].cost, "gate case %zu: cost", i);
		is_int(r.dims[2].score, cases[i].succ, "gate case %zu: success", i);
		is_int(r.score, cases[i].total, "gate case %zu: total", i);
		if (cases[i].cost == 0)
			ok(json_is_true(json_object_get(r.dims[1].detail, "gated")), "gate case %zu: detail", i);
		free(text);
		score_result_clear(&r);
	}
}

static void test_violations_verified(void)
{
	static const char *spec =
		"{\"evaluator\":\"deterministic\",\"dimensions\":["
		"{\"key\":\"correctness\",\"weight\":1,\"primitive\":\"exact_match\",\"field\":\"a\",\"ground_truth_field\":\"a\"}],"
		"\"constraints\":{\"token_budget\":1000,\"max_llm_calls\":10,\"max_tool_calls\":0}}";
	struct score_match m = { .has_times = true, .attempt_number = 1 };
	isotime_parse("2024-05-01T10:00:00Z", 20, &m.started_at_ms);
	isotime_parse("2024-05-01T10:01:00Z", 20, &m.submitted_at_ms);
	struct score_result r;
	char *text = run(spec, "{\"a\":1}",
	                 "{\"token_count\":1500,\"llm_call_count\":10,\"tool_call_count\":2.5,"
	                 "\"replay_log\":[{\"ts\":\"2024-05-01T10:00:30Z\",\"tool\":\"x\"}]}",
	                 "{\"a\":1}", &m, &r);
	ok(text && strstr(text, "\"constraint_violations\":[{\"constraint\":\"token_budget\",\"limit\":1000,"
	   "\"actual\":1500},{\"constraint\":\"max_tool_calls\",\"limit\":0,\"actual\":2.5}]"),
	   "violations listed in order, equal is not over");
	ok(text && strstr(text, "\"verified\":true}"), "verified");
	is_int(r.score, 1000, "violations do not change the score");
	free(text);
	score_result_clear(&r);
	text = run(spec, "{\"a\":1}", "{\"token_count\":\"many\"}", "{\"a\":1}", NULL, &r);
	ok(text && strstr(text, "\"constraint_violations\":[]"), "non-numeric counts are not violations");
	ok(text && strstr(text, "\"verified\":false"), "no match: not verified");
	free(text);
	score_result_clear(&r);
}

static void test_external(void)
{
	struct spec *s = parse("{\"evaluator\":\"custom-script\",\"dimensions\":["
		"{\"key\":\"correctness\",\"weight\":0.5},{\"key\":\"analysis\",\"weight\":0.25},"
		"{\"key\":\"speed\",\"weight\":0.25,\"primitive\":\"expression\",\"expr\":\"1\","
		"\"gate\":{\"dimension\":\"correctness\",\"above\":500}}],"
		"\"script\":{\"language\":\"sh\",\"source\":\"true\"}}");
	if (!ok(s != NULL, "custom-script spec"))
		return;
	struct score_result r;
	char err[256];
	ok(score_eval(s, NULL, NULL, NULL, NULL, NULL, NULL, &r, err, sizeof err) < 0 &&
	   strstr(err, "custom-script"), "external dims need ext");
	const char *keys[] = { "correctness", "bogus" };
	const int scores[] = { 1200, 5 };
	json_t *extra = json_pack("{s:[{s:s}], s:i}", "tests", "name", "t1", "score", 1);
	json_t *warns = json_pack("[{s:s, s:s, s:s}]", "severity", "warning", "field", "x", "message", "m");
	struct score_ext ext = { 2, keys, scores, extra, warns };
	ok(score_eval(s, NULL, NULL, NULL, NULL, &ext, NULL, &r, err, sizeof err) == 0, "score with ext");
	is_int(r.dims[0].score, 1000, "external score clamped to 1000");
	is_int(r.dims[1].score, 0, "missing external key scores 0");
	is_int(r.dims[2].score, 1000, "primitive dims still scored, gate on an external dim");
	is_int(r.score, 750, "total");
	char *text = score_result_dumps(&r);
	ok(text && strstr(text, "\"submission_warnings\":[{\"severity\":\"error\",\"field\":\"analysis\""),
	   "warning for the missing key first");
	ok(text && strstr(text, "{\"severity\":\"warning\",\"field\":\"x\",\"message\":\"m\"}]"),
	   "ext warnings appended");
	ok(text && strstr(text, "\"verified\":false,\"tests\":[{\"name\":\"t1\"}]}"),
	   "extra keys after verified; reserved keys not overridden");
	json_t *j = score_result_json(&r);
	ok(json_is_array(json_object_get(j, "tests")) &&
	   json_integer_value(json_object_get(j, "score")) == 750, "score_result_json merges extra");
	json_decref(j);
	free(text);
	score_result_clear(&r);
	json_decref(extra);
	json_decref(warns);
	spec_free(s);
}

static void test_misc(void)
{
	static const char *spec =
		"{\"evaluator\":\"deterministic\",\"dimensions\":["
		"{\"key\":\"a\",\"weight\":0.5,\"primitive\":\"fuzzy_string\",\"field\":\"t\",\"ground_truth_field\":\"t\"},"
		"{\"key\":\"b\",\"weight\":0.5,\"primitive\":\"exact_match\",\"field\":\"n\",\"ground_truth_field\":\"n\"}]}";
	struct score_result r;
	char *text = run(spec, NULL, NULL, NULL, NULL, &r);
	is_int(r.score, 0, "NULL documents: all missing");
	is_int(json_array_size(r.warnings), 4, "four missing-field warnings");
	free(text);
	score_result_clear(&r);
	/* A string over the default 1 MiB limit: that dimension 0 and a warning, quickly. */
	struct spec *s = parse(spec);
	size_t big = SCORE_DEFAULT_MAX_STRING_BYTES + 1;
	char *str = malloc(big + 1);
	memset(str, 'x', big);
	str[big] = 0;
	json_t *a = json_pack("{s:s, s:i}", "t", str, "n", 1);
	json_t *g = json_pack("{s:s, s:i}", "t", "xx", "n", 1);
	char err[200];
	ok(score_eval(s, a, NULL, g, NULL, NULL, NULL, &r, err, sizeof err) == 0, "score big input");
	is_int(r.dims[0].score, 0, "over-long string scores 0");
	is_int(r.dims[1].score, 1000, "other dimensions still scored");
	ok(strstr(json_string_value(json_object_get(json_array_get(r.warnings, 0), "message")),
	          "longer than 1048576 bytes") != NULL, "warning names the limit");
	score_result_clear(&r);
	struct score_limits lim = { big, false, 0 };
	ok(score_eval(s, a, NULL, g, NULL, NULL, &lim, &r, err, sizeof err) == 0, "with a larger limit");
	is_int(json_array_size(r.warnings), 0, "no warning under the limit");
	score_result_clear(&r);
	json_decref(a);
	json_decref(g);
	free(str);
	spec_free(s);
	score_result_clear(NULL);
	is_str(score_outcome_name(SCORE_DRAW), "draw", "outcome names");
	is_str(score_outcome_name(SCORE_LOSS), "loss", "outcome names");
}

/* The (severity, field) pairs of r's warnings as "severity:field,..." into buf. */
static const char *warn_fields(const struct score_result *r, char *buf, size_t n)
{
	size_t len = 0;
	buf[0] = 0;
	for (size_t i = 0; i < json_array_size(r->warnings) && len < n; i++) {
		const json_t *w = json_array_get(r->warnings, i);
		len += (size_t)snprintf(buf + len, n - len, "%s%s:%s", i ? "," : "",
		                        json_string_value(json_object_get(w, "severity")),
		                        json_string_value(json_object_get(w, "field")));
	}
	return buf;
}

/* Every missing or ill-typed side warns (answer side first); expression variables warn in the
 * order `vars` declares them. */
static void test_warning_sides(void)
{
	static const char *spec =
		"{\"evaluator\":\"deterministic\",\"dimensions\":["
		"{\"key\":\"a\",\"weight\":0.25,\"primitive\":\"fuzzy_string\",\"field\":\"t\",\"ground_truth_field\":\"t\"},"
		"{\"key\":\"b\",\"weight\":0.25,\"primitive\":\"set_overlap\",\"field\":\"s\",\"ground_truth_field\":\"s\"},"
		"{\"key\":\"c\",\"weight\":0.25,\"primitive\":\"numeric_tolerance\",\"field\":\"n\",\"ground_truth_field\":\"n\"},"
		"{\"key\":\"d\",\"weight\":0.25,\"primitive\":\"expression\",\"expr\":\"z + a\","
		"\"vars\":{\"z\":\"metadata.z\",\"a\":\"a\"}}]}";
	struct score_result r;
	char buf[512];
	char *text = run(spec, "{\"t\":5,\"s\":\"x\",\"n\":1}", "{}", "{\"s\":{},\"n\":[1]}", NULL, &r);
	is_str(warn_fields(&r, buf, sizeof buf),
	       "error:t,error:ground_truth.t,error:s,error:ground_truth.s,error:n,error:metadata.z,error:a",
	       "ill-typed + missing and ill-typed + ill-typed both warn; a shape mismatch once; vars "
	       "in declared order");
	free(text);
	score_result_clear(&r);
}

/* The custom-script value rule: round half up, clamp outside 0..1000 with the number quoted
 * as its shortest decimal text, reject non-numbers. */
static void test_script_value(void)
{
	static const struct { const char *in; int rc, out; const char *msg; } c[] = {
		{ "750", 0, 750, NULL }, { "749.5", 0, 750, NULL }, { "0.49", 0, 0, NULL },
		{ "1000", 0, 1000, NULL }, { "-0.40000000000000002", 1, 0, "score -0.4 is outside 0..1000 (clamped to 0)" },
		{ "1001", 1, 1000, "score 1001 is outside 0..1000 (clamped to 1000)" },
		{ "1e300", 1, 1000, "score 1e+300 is outside" },
		{ "\"1000\"", -1, 0, "must be a number 0..1000, got \"1000\"" },
		{ "null", -1, 0, "got null" }, { "true", -1, 0, "got true" },
	};
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		json_t *v = json_loads(c[i].in, JSON_DECODE_ANY, NULL);
		int out = -7;
		char msg[200] = "";
		int rc = score_script_value(v, &out, msg, sizeof msg);
		is_int(rc, c[i].rc, "script value %s: rule", c[i].in);
		if (rc >= 0)
			is_int(out, c[i].out, "script value %s: score", c[i].in);
		if (c[i].msg)
			ok(strstr(msg, c[i].msg) != NULL, "script value %s: message '%s'", c[i].in, msg);
		json_decref(v);
	}
}

/* total "round_each" against the default floor; a gate expression; explain details. */
static void test_v2_totals_gates(void)
{
	const char *tmpl =
		"{\"evaluator\":\"deterministic\",%s\"dimensions\":["
		"{\"key\":\"a\",\"weight\":0.25,\"primitive\":\"expression\",\"expr\":\"0.286\"},"
		"{\"key\":\"b\",\"weight\":0.15,\"primitive\":\"expression\",\"expr\":\"0.95\"},"
		"{\"key\":\"c\",\"weight\":0.25,\"primitive\":\"expression\",\"expr\":\"0.286\"},"
		"{\"key\":\"d\",\"weight\":0.35,\"primitive\":\"expression\",\"expr\":\"1\","
		" \"gate\":{\"expr\":\"a > 500 || b + c >= 1236\"}}]}";
	char text[1024], err[256];
	struct spec *s;
	struct score_result r;
	/* weighted: 71.5, 142.5, 71.5, and d: b + c = 950 + 286 = 1236 passes → 350 */
	snprintf(text, sizeof text, tmpl, "");
	ok(spec_parse(text, strlen(text), &s, err, sizeof err) == 0, "v2 totals spec parses (%s)", err);
	score_eval(s, NULL, NULL, NULL, NULL, NULL, NULL, &r, err, sizeof err);
	is_int(r.dims[3].score, 1000, "gate expression b + c >= 1236 passes");
	is_int(r.score, 635, "floor(71.5 + 142.5 + 71.5 + 350) = 635");
	score_result_clear(&r);
	spec_free(s);
	snprintf(text, sizeof text, tmpl, "\"total\":\"round_each\",");
	ok(spec_parse(text, strlen(text), &s, err, sizeof err) == 0, "round_each spec parses (%s)", err);
	struct score_limits lim = { 0, true, 0 };
	score_eval(s, NULL, NULL, NULL, NULL, NULL, &lim, &r, err, sizeof err);
	is_int(r.score, 637, "round_each: 72 + 143 + 72 + 350 = 637");
	json_t *ex = score_result_explain(&r);
	is_int((long long)json_object_size(ex), 4, "explain has every dimension");
	ok(json_is_real(json_object_get(json_object_get(ex, "a"), "value")), "explain shows the expression value");
	json_decref(ex);
	score_result_clear(&r);
	spec_free(s);
	/* The gate fails when b + c is one point short. */
	snprintf(text, sizeof text, "%s", tmpl);
	char *p = strstr(text, "1236");
	memcpy(p, "1237", 4);
	char text2[1024];
	snprintf(text2, sizeof text2, text, "");
	ok(spec_parse(text2, strlen(text2), &s, err, sizeof err) == 0, "gate spec parses (%s)", err);
	score_eval(s, NULL, NULL, NULL, NULL, NULL, NULL, &r, err, sizeof err);
	is_int(r.dims[3].score, 0, "gate expression b + c >= 1237 fails");
	ok(json_is_true(json_object_get(r.dims[3].detail, "gated")), "gated detail recorded");
	score_result_clear(&r);
	spec_free(s);
}

/* match_objects pairs each expected object with the first unused submitted object of the same
 * key, in submission order, whatever the number of duplicates and however the key sort
 * orders them: compared with a direct O(n^2) pairing on 300 submitted objects (ids with many
 * duplicates, some keys as numbers, some missing) and 120 expected ones. */
static void test_match_objects_pairing(void)
{
	enum { NS = 300, NE = 120 };
	int sid[NS], eid[NE];
	bool used[NS] = { false };
	struct strbuf a = { 0 }, g = { 0 };
	strbuf_addf(&a, "{\"x\":[");
	for (int i = 0; i < NS; i++) {
		sid[i] = (i * 37 + i / 7) % 53;
		if (i % 11 == 5)
			strbuf_addf(&a, "%s{\"v\":%d}", i ? "," : "", i);   /* no key: never paired */
		else if (sid[i] % 2)
			strbuf_addf(&a, "%s{\"id\":%d,\"v\":%d}", i ? "," : "", sid[i], i);
		else
			strbuf_addf(&a, "%s{\"id\":\"k%d\",\"v\":%d}", i ? "," : "", sid[i], i);
		if (i % 11 == 5)
			sid[i] = -1;
	}
	strbuf_addf(&a, "]}");
	int eq = 0;
	strbuf_addf(&g, "{\"x\":[");
	for (int j = 0; j < NE; j++) {
		eid[j] = (j * 13) % 61;   /* ids 53..60 match nothing */
		int pick = -1;
		for (int i = 0; i < NS && pick < 0; i++)
			if (!used[i] && sid[i] == eid[j])
				pick = i;
		if (pick >= 0)
			used[pick] = true;
		int v = pick >= 0 && j % 3 ? pick : -1;   /* 2 in 3 pairs agree on v */
		eq += v >= 0;
		if (eid[j] % 2)
			strbuf_addf(&g, "%s{\"id\":%d,\"v\":%d}", j ? "," : "", eid[j], v);
		else
			strbuf_addf(&g, "%s{\"id\":\"k%d\",\"v\":%d}", j ? "," : "", eid[j], v);
	}
	strbuf_addf(&g, "]}");
	struct score_result r;
	char *t = run("{\"evaluator\":\"deterministic\",\"dimensions\":[{\"key\":\"m\",\"weight\":1,"
	              "\"primitive\":\"match_objects\",\"field\":\"x\",\"ground_truth_field\":\"x\","
	              "\"match_on\":\"id\",\"method\":\"recall\",\"fields\":[{\"primitive\":\"exact_match\","
	              "\"field\":\"v\"}]}]}", a.buf, NULL, g.buf, NULL, &r);
	ok(t != NULL, "match_objects on 300 x 120 scores");
	ok(eq > 40, "the pairing reference found pairs (%d)", eq);
	if (t)
		is_int(r.dims[0].score, prim_permille_ratio((unsigned)eq, NE),
		       "pairs follow submission order among duplicate keys (%d of %d agree)", eq, NE);
	free(t);
	score_result_clear(&r);
	strbuf_free(&a);
	strbuf_free(&g);
}

/* match_objects keys of every form pair only with equal values: a plain string key is kept as
 * its bytes, any other key as its canonical text, and the string "1" must not pair with the
 * number 1 (same bytes, different forms) nor a string needing escapes with anything but
 * itself. Each expected object names in v the submitted object it must pair with. */
static void test_match_objects_key_forms(void)
{
	struct score_result r;
	char *t = run("{\"evaluator\":\"deterministic\",\"dimensions\":[{\"key\":\"m\",\"weight\":1,"
	              "\"primitive\":\"match_objects\",\"field\":\"x\",\"ground_truth_field\":\"x\","
	              "\"match_on\":\"id\",\"method\":\"recall\",\"fields\":[{\"primitive\":\"exact_match\","
	              "\"field\":\"v\"}]}]}",
	              "{\"x\":[{\"id\":\"1\",\"v\":\"s1\"},{\"id\":1,\"v\":\"n1\"},{\"id\":\"a\\\"b\",\"v\":\"q\"},"
	              "{\"id\":\"x\",\"v\":\"x\"},{\"id\":{\"k\":\"1\"},\"v\":\"o\"},{\"id\":\"\\\"1\\\"\",\"v\":\"qq\"},"
	              "{\"id\":[\"1\"],\"v\":\"a\"}]}",
	              NULL,
	              "{\"x\":[{\"id\":1,\"v\":\"n1\"},{\"id\":\"a\\\"b\",\"v\":\"q\"},{\"id\":\"1\",\"v\":\"s1\"},"
	              "{\"id\":\"y\",\"v\":\"y\"},{\"id\":[\"1\"],\"v\":\"a\"},{\"id\":{\"k\":\"1\"},\"v\":\"o\"},"
	              "{\"id\":\"\\\"1\\\"\",\"v\":\"qq\"},{\"id\":\"x\",\"v\":\"x\"}]}",
	              NULL, &r);
	ok(t != NULL, "match_objects with keys of every form scores");
	if (t)   /* 7 of 8 expected objects pair, each with the one it names */
		is_int(r.dims[0].score, 875, "each key pairs with its equal only (7 of 8)");
	free(t);
	score_result_clear(&r);
}

/* One evaluation's work is bounded as a whole (common/README.md "Work budget"): a spec of 16 heavy text
 * dimensions on a 1 MiB answer is charged at most SCORE_WORK_BUDGET units; the dimensions
 * that no longer fit score 0 with the budget warning, the same ones on every run. Counts
 * work units, never time. */
static void test_work_budget(void)
{
	size_t big = (size_t)1 << 20;
	static const char unit[] = "Caf\xC3\xA9 na\xC3\xAFve r\xC3\xA9sum\xC3\xA9 aaaab ";   /* 26 bytes */
	char *t = xmalloc(big + 1), *u = xmalloc(big + 1);
	for (size_t i = 0; i < big; i++) {
		t[i] = "Cafe naive resume aaaab "[i % 24];   /* ASCII */
		u[i] = unit[i % (sizeof unit - 1)];
	}
	t[big] = 0;
	u[big - big % (sizeof unit - 1)] = 0;   /* whole units only: valid UTF-8 */
	json_t *ans = json_pack("{s:s, s:s}", "t", t, "u", u);
	static const char *const heavy[] = {
		("\"primitive\":\"term_coverage\",\"field\":\"t\",\"terms\":[\"zz\",\"na\\u00efve\",{\"regex\":\"(a|aa)*c\"}],"
		 "\"normalize\":[\"nfkc\",\"casefold\",\"punctuation\",\"whitespace\"]"),
		"\"primitive\":\"token_overlap\",\"field\":\"t\",\"ground_truth_field\":\"t\",\"method\":\"f1\"",
		"\"primitive\":\"exact_match\",\"field\":\"t\",\"ground_truth_field\":\"t\",\"normalize\":[\"nfkc\",\"casefold\"]",
		"\"primitive\":\"regex_match\",\"field\":\"t\",\"pattern\":\"(.*a){12}x\"",
	};
	struct strbuf sp = { 0 };
	strbuf_addf(&sp, "{\"evaluator\":\"deterministic\",\"total\":\"round_each\",\"dimensions\":[");
	for (int i = 0; i < 16; i++)
		strbuf_addf(&sp, "%s{\"key\":\"d%d\",\"weight\":0.0625,%s}", i ? "," : "", i, heavy[i % 4]);
	strbuf_addf(&sp, "]}");
	struct spec *s = parse(sp.buf);
	ok(s != NULL, "16 heavy text dimensions parse");
	char err[256], *first = NULL;
	for (int run = 0; s && run < 2; run++) {
		struct score_result r;
		struct score_limits lim = { (size_t)2 << 20, false, 0 };
		if (score_eval(s, ans, NULL, ans, NULL, NULL, &lim, &r, err, sizeof err) < 0) {
			ok(0, "score_eval: %s", err);
			break;
		}
		char *dump = score_result_dumps(&r);
		if (run == 0) {
			ok(r.work > SCORE_WORK_BUDGET / 2 && r.work <= SCORE_WORK_BUDGET,
			   "work charged within the budget: %llu of %llu units", (unsigned long long)r.work,
			   (unsigned long long)SCORE_WORK_BUDGET);
			/* d0 (terms on ASCII text: normalising ~4.2 M, scans ~3.1 M, its regex) and d2
			 * (exact_match, normalising both sides ~8.4 M) fit; d1, token_overlap of 1 MiB
			 * against itself (~134 M), never fits, and d3's regex spends what is left. */
			struct strbuf got = { 0 };
			strbuf_addlit(&got, "");
			for (size_t i = 0; i < json_array_size(r.warnings); i++) {
				const char *m = json_string_value(json_object_get(json_array_get(r.warnings, i), "message"));
				int k = -1;
				if (m && strstr(m, "work budget of 40000000 units is spent") &&
				    sscanf(m, "dimension 'd%d'", &k) == 1)
					strbuf_addf(&got, "%s%d", got.len ? "," : "", k);
			}
			is_str(got.buf, "1,3,4,5,6,7,8,9,10,11,12,13,14,15",
			       "the dimensions that did not fit are named in the warnings");
			strbuf_free(&got);
			is_int(r.dims[0].score, 333, "d0 (1 of 3 terms) was scored");
			is_int(r.dims[1].score, 0, "d1 scores 0");
			is_int(r.dims[2].score, 1000, "d2, after a dimension that did not fit, was scored");
			for (size_t i = 3; i < 16; i++)
				if (r.dims[i].score != 0)
					ok(0, "d%zu scores 0", i);
			first = dump;
		} else {
			is_str(dump, first, "a second run gives the same result (deterministic)");
			free(dump);
		}
		score_result_clear(&r);
	}
	free(first);
	spec_free(s);
	strbuf_free(&sp);
	json_decref(ans);
	free(t);
	free(u);
}

/* The spec of bench-score_v2 (10 dimensions; match_objects and keyed_map read the ground
 * truth, so they are prepared). */
static const char *const prep_spec = bench_v2_spec;
/* Composite forms the bench spec lacks: two match_on keys normalised, a normalised nested
 * numeric exact_match and a linear numeric_tolerance, the mean method; keyed_map over listed
 * keys with a numeric_tolerance item; a nested match_objects inside keyed_map; coverage_ratio,
 * set_overlap without normalize, token_overlap with it, exact_match normalised. */
static const char *prep_spec2 =
	"{\"evaluator\":\"deterministic\",\"dimensions\":["
	"{\"key\":\"objs\",\"weight\":0.3,\"primitive\":\"match_objects\",\"field\":\"findings\","
	" \"ground_truth_field\":\"findings\",\"match_on\":[\"id\",\"kind\"],\"normalize\":[\"casefold\",\"trim\"],"
	" \"method\":\"mean\",\"fields\":["
	"  {\"primitive\":\"exact_match\",\"field\":\"severity\",\"normalize\":[\"trim\",\"numeric\"],\"weight\":0.3},"
	"  {\"primitive\":\"numeric_tolerance\",\"field\":\"cvss\",\"tolerance\":1,\"decay\":\"linear\",\"weight\":0.7}]},"
	"{\"key\":\"listed\",\"weight\":0.2,\"primitive\":\"keyed_map\",\"field\":\"answers\","
	" \"ground_truth_field\":\"answers\",\"keys\":[\"q0\",\"q1\",\"q2\",\"q9\",\"zz\"],"
	" \"item\":{\"primitive\":\"numeric_tolerance\",\"tolerance\":0.5}},"
	"{\"key\":\"nested\",\"weight\":0.2,\"primitive\":\"keyed_map\",\"field\":\"groups\","
	" \"ground_truth_field\":\"groups\",\"item\":{\"primitive\":\"match_objects\",\"match_on\":\"id\","
	"  \"fields\":[{\"primitive\":\"exact_match\",\"field\":\"severity\",\"normalize\":[\"casefold\"],\"weight\":1}]}},"
	"{\"key\":\"cov\",\"weight\":0.1,\"primitive\":\"coverage_ratio\",\"field\":\"hosts\","
	" \"ground_truth_field\":\"hosts\",\"normalize\":[\"casefold\"]},"
	"{\"key\":\"jac\",\"weight\":0.1,\"primitive\":\"set_overlap\",\"field\":\"hosts\","
	" \"ground_truth_field\":\"hosts\"},"
	"{\"key\":\"tok\",\"weight\":0.05,\"primitive\":\"token_overlap\",\"field\":\"summary\","
	" \"ground_truth_field\":\"summary\",\"method\":\"jaccard\",\"normalize\":[\"casefold\"]},"
	"{\"key\":\"tick\",\"weight\":0.05,\"primitive\":\"exact_match\",\"field\":\"ticket\","
	" \"ground_truth_field\":\"ticket\",\"normalize\":[\"casefold\",\"trim\"]}]}";

static uint64_t prep_rng = 88172645463325252ull;

static unsigned rnd(unsigned n)
{
	prep_rng ^= prep_rng << 13;
	prep_rng ^= prep_rng >> 7;
	prep_rng ^= prep_rng << 17;
	return (unsigned)(prep_rng % n);
}

static void rnd_findings(struct strbuf *sb, unsigned max)
{
	static const char *const sev[] = { "\"low\"", "\"LOW \"", "\" High\"", "\"high\"", "\"3\"",
	                                   "\"3.0\"", "\" 3 \"", "\"x\\\"y\"", "5", "\"critical\"" };
	unsigned n = rnd(max + 1);
	strbuf_addf(sb, "[");
	for (unsigned k = 0; k < n; k++) {
		if (k)
			strbuf_addf(sb, ",");
		if (rnd(20) == 0) {
			strbuf_addf(sb, rnd(2) ? "7" : "\"F-1\"");
			continue;
		}
		strbuf_addf(sb, "{");
		unsigned id = rnd(max / 2 + 2), f = rnd(10);
		if (f == 0)
			strbuf_addf(sb, "\"name\":\"x\"");
		else if (f == 1)
			strbuf_addf(sb, "\"id\":%u", id);
		else if (f == 2)
			strbuf_addf(sb, "\"id\":\"F\\\"%u\"", id);
		else
			strbuf_addf(sb, "\"id\":\"%sF-%03u\"", rnd(4) ? "" : " ", id);
		if (rnd(3))
			strbuf_addf(sb, ",\"kind\":\"%s\"", rnd(2) ? "a" : "A");
		if (rnd(8))
			strbuf_addf(sb, ",\"severity\":%s", sev[rnd(10)]);
		switch (rnd(5)) {
		case 0: strbuf_addf(sb, ",\"cvss\":%u", rnd(10)); break;
		case 1: case 2: strbuf_addf(sb, ",\"cvss\":%u.%u", rnd(10), rnd(10)); break;
		case 3: strbuf_addf(sb, ",\"cvss\":\"4.5\""); break;
		default: break;
		}
		strbuf_addf(sb, "}");
	}
	strbuf_addf(sb, "]");
}

/* A random document of the bench's shape: duplicate, missing and ill-typed keys, values in
 * several spellings, some missing or of the wrong type. */
static json_t *rnd_doc(void)
{
	static const char *const ans[] = { "\"1\"", "\"1.0\"", "\" 1 \"", "\"01\"", "\"A\"", "\"a\"",
	                                   "1", "1.25", "\"x\"", "[1]" };
	struct strbuf sb = { 0 };
	strbuf_addf(&sb, "{\"findings\":");
	rnd_findings(&sb, 24);
	strbuf_addf(&sb, ",\"answers\":{");
	for (unsigned k = 0, first = 1; k < 12; k++)
		if (rnd(4)) {
			strbuf_addf(&sb, "%s\"q%u\":%s", first ? "" : ",", k, ans[rnd(10)]);
			first = 0;
		}
	strbuf_addf(&sb, "},\"groups\":{");
	for (unsigned k = 0, n = rnd(4); k < n; k++) {
		strbuf_addf(&sb, "%s\"g%u\":", k ? "," : "", rnd(4));
		rnd_findings(&sb, 6);
	}
	strbuf_addf(&sb, "},\"report\":\"root cause: outage at CVE-2024-1234, %u ms. Rollback\","
	            "\"ticket\":\"%s\",\"summary\":\"%s\",\"hosts\":[\"DB%u\",\"db%u\",\"DB1\"],"
	            "\"impact\":%u}", rnd(300), (const char *[]){ "OPS-12", " ops-12 ", "x" }[rnd(3)], rnd(2) ? "a database outage"
	            : "the outage", rnd(4), rnd(4), 100 + rnd(40));
	json_error_t je;
	json_t *v = json_loads(sb.buf, 0, &je);
	if (!v)
		diag("random document: %s: %s", je.text, sb.buf);
	strbuf_free(&sb);
	return v;
}

/* The text of a result, with its explain detail when there is one. */
static char *result_text(struct score_result *r)
{
	char *t = score_result_dumps(r);
	json_t *ex = score_result_explain(r);
	char *e = json_dumps(ex, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
	struct strbuf sb = { 0 };
	strbuf_addf(&sb, "%s %s", t, e);
	free(t);
	free(e);
	json_decref(ex);
	return sb.buf;
}

/* One preparation of the ground truth's side serves every evaluation (score_prepare): for
 * random ground truths and answers, scoring with one preparation gives exactly what
 * score_eval gives with a fresh one each time (result, warnings, work units, explain), and the
 * same scores and work as the unprepared code (the same spec reading the expected values from
 * @metadata, which is never prepared). */
static void test_prepared(void)
{
	const char *specs[2] = { prep_spec, prep_spec2 };
	int differ = 0, differ_unprep = 0, runs = 0, pairs = 0;
	for (int sp = 0; sp < 2; sp++) {
		struct spec *s = parse(specs[sp]);
		/* the same spec reading its expected values from @metadata: not prepared */
		struct strbuf alt = { 0 };
		const char *p = specs[sp], *q;
		while ((q = strstr(p, "\"ground_truth_field\":\""))) {
			size_t pre = (size_t)(q - p) + strlen("\"ground_truth_field\":\"");
			strbuf_add(&alt, p, pre);
			strbuf_addf(&alt, "@metadata.");
			p += pre;
		}
		strbuf_addf(&alt, "%s", p);
		struct spec *su = parse(alt.buf);
		ok(s && su, "spec %d and its unprepared form parse", sp);
		for (int g = 0; s && su && g < 12; g++) {
			json_t *gt = rnd_doc();
			json_t *meta = json_deep_copy(gt);
			json_object_set_new(meta, "api_calls", json_integer(20 + g));
			json_object_set_new(meta, "retries", json_integer(g % 2));
			struct score_prep *prep = score_prepare(s, gt);
			for (int k = 0; k < 40; k++) {
				json_t *a = rnd_doc();
				struct score_limits lim = { 0, k % 4 == 0, 0 };
				struct score_result r1, r2, r3;
				char err[256];
				int rc1 = score_eval_prepared(prep, a, meta, NULL, NULL, &lim, &r1, err, sizeof err);
				int rc2 = score_eval(s, a, meta, gt, NULL, NULL, &lim, &r2, err, sizeof err);
				int rc3 = score_eval(su, a, meta, gt, NULL, NULL, &lim, &r3, err, sizeof err);
				runs++;
				if (rc1 || rc2 || rc3) {
					differ++;
					continue;
				}
				char *t1 = result_text(&r1), *t2 = result_text(&r2);
				if (strcmp(t1, t2)) {
					if (differ++ < 3)
						diag("prepared: %s\nfresh:    %s", t1, t2);
				}
				bool same = r1.score == r3.score && r1.work == r3.work &&
				            json_array_size(r1.warnings) == json_array_size(r3.warnings);
				for (size_t i = 0; i < r1.ndims; i++)
					same &= r1.dims[i].score == r3.dims[i].score;
				if (!same && differ_unprep++ < 3) {
					char *t3 = result_text(&r3);
					diag("prepared:   %s\nunprepared: %s", t1, t3);
					free(t3);
				}
				pairs += r1.dims[0].score > 0;
				free(t1);
				free(t2);
				score_result_clear(&r1);
				score_result_clear(&r2);
				score_result_clear(&r3);
				json_decref(a);
			}
			score_prep_free(prep);
			json_decref(meta);
			json_decref(gt);
		}
		strbuf_free(&alt);
		spec_free(s);
		spec_free(su);
	}
	is_int(runs, 960, "960 random evaluations");
	ok(pairs > 100, "objects were paired in %d of them", pairs);
	is_int(differ, 0, "one preparation for many answers gives what a fresh one gives");
	is_int(differ_unprep, 0, "prepared and unprepared scoring agree (scores, warnings, work)");
}

/* n ground-truth objects {"id": "Knnnnnn"}; with mask, keys whose hashes agree in the bits of
 * mask (all in one slot of the prepared hash index), else consecutive keys. */
static json_t *key_objects(unsigned n, uint64_t mask, unsigned skip)
{
	json_t *arr = json_array();
	char k[16];
	for (unsigned v = 0, got = 0; got < n + skip; v++) {
		snprintf(k, sizeof k, "K%06u", v);
		if (mask && (score_key_hash(k, 7) & mask) != 0)
			continue;
		if (got++ >= skip)
			json_array_append_new(arr, json_pack("{s:s}", "id", k));
	}
	return arr;
}

/* The prepared hash index of match_objects' expected keys: keys that fill one run of slots
 * find their pairs like the binary search does; a ground truth whose keys would make a run
 * longer than the bound gets no index (its preparation is smaller by exactly the index) and
 * still pairs the same. */
static void test_prepared_index(void)
{
	struct spec *s = parse("{\"evaluator\":\"deterministic\",\"dimensions\":[{\"key\":\"m\",\"weight\":1,"
	                       "\"primitive\":\"match_objects\",\"field\":\"f\",\"ground_truth_field\":\"f\","
	                       "\"match_on\":\"id\",\"method\":\"f1\"}]}");
	struct spec *su = parse("{\"evaluator\":\"deterministic\",\"dimensions\":[{\"key\":\"m\",\"weight\":1,"
	                        "\"primitive\":\"match_objects\",\"field\":\"f\",\"ground_truth_field\":\"@metadata.f\","
	                        "\"match_on\":\"id\",\"method\":\"f1\"}]}");
	/* 20 keys: 64 slots, all 20 from one slot (a run of 20); 40 keys: 128 slots, a run of 40 */
	struct { unsigned n; uint64_t mask; } cases[] = { { 20, 63 }, { 40, 127 } };
	for (int c = 0; s && su && c < 2; c++) {
		json_t *gt = json_pack("{s:o}", "f", key_objects(cases[c].n, cases[c].mask, 0));
		json_t *plain = json_pack("{s:o}", "f", key_objects(cases[c].n, 0, 0));
		struct score_prep *p = score_prepare(s, gt), *pp = score_prepare(s, plain);
		size_t diff = score_prep_bytes(pp) - score_prep_bytes(p);
		if (c == 0)
			is_int((long long)diff, 0, "%u keys in one run of slots: indexed", cases[c].n);
		else
			is_int((long long)diff, 128 * 4, "%u keys in one run of slots: no index", cases[c].n);
		/* answers: the expected keys reversed, duplicated, and other keys of the same slot */
		int differ = 0, full = 0;
		for (int a = 0; a < 4; a++) {
			json_t *f = json_array();
			json_t *mine = json_object_get(gt, "f");
			for (size_t i = json_array_size(mine); i-- > 0;)
				if ((i + (size_t)a) % (size_t)(a + 1) == 0)
					json_array_append(f, json_array_get(mine, i));
			json_t *more = key_objects(3 * (unsigned)a, cases[c].mask, cases[c].n);
			json_array_extend(f, more);
			json_decref(more);
			if (a == 3)
				json_array_extend(f, mine);   /* every key twice */
			json_t *ans = json_pack("{s:o}", "f", f);
			struct score_result r1, r2;
			char err[256];
			score_eval_prepared(p, ans, NULL, NULL, NULL, NULL, &r1, err, sizeof err);
			score_eval(su, ans, gt, NULL, NULL, NULL, NULL, &r2, err, sizeof err);
			differ += r1.score != r2.score || r1.work != r2.work;
			full += a == 0 && r1.score == 1000;
			score_result_clear(&r1);
			score_result_clear(&r2);
			json_decref(ans);
		}
		is_int(differ, 0, "%u colliding keys: pairs as unprepared scoring does", cases[c].n);
		is_int(full, 1, "%u colliding keys: all found", cases[c].n);
		score_prep_free(p);
		score_prep_free(pp);
		json_decref(gt);
		json_decref(plain);
	}
	spec_free(s);
	spec_free(su);
}

/* The preparation's costly steps are bounded like an evaluation's (SCORE_WORK_BUDGET units):
 * six normalised exact_match dimensions on a 200 KB non-ASCII reference (12.8 M units each)
 * prepare the first three only; the rest are left to the evaluations, which score exactly
 * as unprepared scoring does. */
static void test_prepared_bound(void)
{
	static const char unit[] = "Caf\xC3\xA9 na\xC3\xAFve ";   /* 13 bytes */
	size_t reps = 16000, len = reps * (sizeof unit - 1);
	char *t = xmalloc(len + 1);
	for (size_t i = 0; i < reps; i++)
		memcpy(t + i * (sizeof unit - 1), unit, sizeof unit - 1);
	t[len] = 0;
	struct strbuf sp = { 0 }, su = { 0 };
	for (int v = 0; v < 2; v++) {
		struct strbuf *b = v ? &su : &sp;
		strbuf_addf(b, "{\"evaluator\":\"deterministic\",\"dimensions\":[");
		for (int i = 0; i < 6; i++)
			strbuf_addf(b, "%s{\"key\":\"d%d\",\"weight\":0.1,\"primitive\":\"exact_match\",\"field\":\"t\","
			            "\"ground_truth_field\":\"%st\",\"normalize\":[\"casefold\"]}", i ? "," : "", i,
			            v ? "@metadata." : "");
		strbuf_addf(b, ",{\"key\":\"e\",\"weight\":0.4,\"primitive\":\"expression\",\"expr\":\"1\"}]}");
	}
	struct spec *s = parse(sp.buf), *u = parse(su.buf);
	json_t *gt = json_pack("{s:s}", "t", t);
	t[0] = 'c';   /* the answer differs: both sides are normalised */
	json_t *ans = json_pack("{s:s}", "t", t);
	struct score_prep *p = s ? score_prepare(s, gt) : NULL;
	uint64_t each = 32 + 64 * (uint64_t)len;
	ok(p && score_prep_work(p) == 3 * each, "three of six dimensions prepared (%llu units)",
	   (unsigned long long)score_prep_work(p));
	struct score_result r1, r2;
	char err[256];
	if (p && u && score_eval_prepared(p, ans, gt, NULL, NULL, NULL, &r1, err, sizeof err) == 0 &&
	    score_eval(u, ans, gt, NULL, NULL, NULL, NULL, &r2, err, sizeof err) == 0) {
		char *a = score_result_dumps(&r1), *b = score_result_dumps(&r2);
		ok(r1.work == r2.work && r1.score == r2.score &&
		   json_array_size(r1.warnings) == json_array_size(r2.warnings),
		   "the same scores, warnings and work as unprepared scoring (%llu units)",
		   (unsigned long long)r1.work);
		is_int(r1.dims[0].score, 1000, "d0 scored");
		is_int(r1.dims[1].score, 0, "d1 did not fit the evaluation's budget");
		free(a);
		free(b);
		score_result_clear(&r1);
		score_result_clear(&r2);
	} else {
		ok(0, "scored");
	}
	score_prep_free(p);
	spec_free(s);
	spec_free(u);
	json_decref(gt);
	json_decref(ans);
	strbuf_free(&sp);
	strbuf_free(&su);
	free(t);
}

/* The README's bound on one evaluation's CPU time ("Measured performance": worst single
 * evaluation ≤ 50 ms), with a margin for this shared machine; address + undefined sanitizer
 * builds run about 11 times slower (443 ms measured for a 39 ms case). */
#if defined(__SANITIZE_ADDRESS__)
#define EVAL_CPU_LIMIT 2.5
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EVAL_CPU_LIMIT 2.5
#endif
#endif
#ifndef EVAL_CPU_LIMIT
#define EVAL_CPU_LIMIT 0.25
#endif

static double cpu_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* n pseudo-random lower-case letters and spaces from *seed (xorshift). */
static json_t *random_text(size_t n, uint64_t *seed)
{
	char *t = xmalloc(n + 1);
	for (size_t i = 0; i < n; i++) {
		uint64_t x = *seed;
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		*seed = x;
		t[i] = "abcdefghijklmnopqrstuvwxyz "[x % 27];
	}
	t[n] = 0;
	json_t *v = json_stringn(t, n);
	free(t);
	return v;
}

/* One element of the worst-case documents: "id", a 100,000-character text "s" (different on
 * either side: the common prefix and suffix strip nothing; too long for fuzzy_string's
 * distance to fit the budget) and a 20,000-character one "f" (its distance fits), the same
 * 100,000-character text "e" on both sides,
 * 2,000 strings "a" and 2,000 numbers "x". */
static json_t *budget_elem(int id, json_t *same, uint64_t *seed)
{
	json_t *a = json_array(), *x = json_array();
	for (int i = 0; i < 2000; i++) {
		char b[32];
		snprintf(b, sizeof b, "item%d-%llu", i, (unsigned long long)(*seed % 97));
		json_array_append_new(a, json_string(b));
		json_array_append_new(x, json_real(i + 0.5));
	}
	json_t *e = json_object();
	json_object_set_new(e, "id", json_integer(id));
	json_object_set_new(e, "s", random_text(100000, seed));
	json_object_set_new(e, "f", random_text(20000, seed));
	json_object_set(e, "e", same);
	json_object_set_new(e, "a", a);
	json_object_set_new(e, "x", x);
	return e;
}

/* A document: "m" 64 keys k0..k63 of elements, "o" the same elements as an array, "n" four
 * levels of {"a": ...} above element 0. */
static json_t *budget_doc(json_t *const *same, uint64_t *seed)
{
	json_t *doc = json_object(), *m = json_object(), *o = json_array(), *n = NULL;
	for (int i = 0; i < 64; i++) {
		char k[8];
		json_t *e = budget_elem(i, same[i], seed);
		snprintf(k, sizeof k, "k%d", i);
		json_object_set(m, k, e);
		json_array_append(o, e);
		if (i == 0)
			n = json_incref(e);
		json_decref(e);
	}
	for (int l = 0; l < 4; l++)
		n = json_pack("{s:o}", "a", n);
	json_object_set_new(doc, "m", m);
	json_object_set_new(doc, "o", o);
	json_object_set_new(doc, "n", n);
	return doc;
}

/* Every primitive, at every nesting level, is charged to the one work budget (common/README.md "Work
 * budget"): for each primitive that can be nested, the worst inputs the limits allow
 * (strings of 100,000 characters, the longest fuzzy_string compared before, and of 20,000,
 * whose distance fits the budget; 64 keys; 64 objects
 * with 32 fields; 4 levels of nesting, each level listing one key 64 times) as 16 top-level
 * dimensions, as a keyed_map item, as 32 match_objects fields and at the bottom of the
 * deepest nesting. Each evaluation stays within SCORE_WORK_BUDGET units and the README's
 * CPU bound, and a second run gives the same result and units (work is counted, never
 * timed). */
static void test_work_budget_worst(void)
{
	static const char *const leaf[] = {   /* "%s" is the field path */
		"\"primitive\":\"fuzzy_string\",\"field\":\"%1$s\",\"ground_truth_field\":\"%1$s\"",
		"\"primitive\":\"fuzzy_string\",\"field\":\"%1$s\",\"ground_truth_field\":\"%1$s\"",
		"\"primitive\":\"exact_match\",\"field\":\"%1$s\",\"ground_truth_field\":\"%1$s\",\"case_insensitive\":true",
		"\"primitive\":\"exact_match_ratio\",\"field\":\"%1$s\",\"ground_truth_field\":\"%1$s\"",
		"\"primitive\":\"numeric_tolerance\",\"field\":\"%1$s\",\"ground_truth_field\":\"%1$s\",\"tolerance\":0.1",
		"\"primitive\":\"coverage_ratio\",\"field\":\"%1$s\",\"ground_truth_field\":\"%1$s\"",
		"\"primitive\":\"set_overlap\",\"field\":\"%1$s\",\"ground_truth_field\":\"%1$s\",\"method\":\"f1\"",
		"\"primitive\":\"text_length\",\"field\":\"%1$s\",\"unit\":\"words\",\"target\":100",
		"\"primitive\":\"term_coverage\",\"field\":\"%1$s\",\"terms\":[\"zzzz\",\"qqq\",{\"regex\":\"(a|b)*c\"}]",
		"\"primitive\":\"regex_match\",\"field\":\"%1$s\",\"pattern\":\"(.*a){12}x\"",
		"\"primitive\":\"token_overlap\",\"field\":\"%1$s\",\"ground_truth_field\":\"%1$s\",\"method\":\"f1\"",
		"\"primitive\":\"count\",\"field\":\"%1$s\",\"of\":\"distinct\",\"target\":10",
		/* v3 (common/README.md "Spec language v3") */
		"\"primitive\":\"text_contains\",\"field\":\"%1$s\",\"ground_truth_field\":\"%1$s\",\"normalize\":[\"casefold\"]",
		"\"primitive\":\"term_coverage\",\"field\":\"%1$s\",\"ground_truth_field\":\"%1$s\",\"terms_from\":\"words\"",
		"\"primitive\":\"term_coverage\",\"field\":\"%1$s\",\"normalize\":[\"nfkc\"],\"terms\":[{\"ground_truth\":\"m.k0.s\",\"prefix\":\"x\"},{\"ground_truth\":\"m.k1.s\"}]",
	};
	static const char *const path[] = { "s", "f", "e", "a", "x", "a", "a", "s", "s", "s", "s", "a",
	                                    "s", "s", "s" };
	uint64_t seed = 0x9E3779B97F4A7C15ull;
	json_t *same[64];
	for (int i = 0; i < 64; i++)
		same[i] = random_text(100000, &seed);
	json_t *ans = budget_doc(same, &seed), *gt = budget_doc(same, &seed);
	for (int i = 0; i < 64; i++)
		json_decref(same[i]);
	struct strbuf dup = { 0 };   /* "a" 64 times */
	for (int i = 0; i < 64; i++)
		strbuf_addf(&dup, "%s\"a\"", i ? "," : "");
	static const char *const shape[] = { "top", "keyed_map", "match_objects", "nested",
	                                     "composite" };
	double worst = 0;
	for (size_t p = 0; p < sizeof leaf / sizeof leaf[0]; p++) {
		for (size_t h = 0; h < BENCH_WORST_SHAPES; h++) {
			struct strbuf sp = { 0 };
			bench_worst_spec(&sp, leaf[p], path[p], (int)h, dup.buf);
			struct spec *s = parse(sp.buf);
			char err[256], *first = NULL, name[96];
			snprintf(name, sizeof name, "%s %s", leaf[p] + 13, shape[h]);
			*strchr(name, '"') = 0;   /* the primitive's name, its field, the shape */
			snprintf(name + strlen(name), sizeof name - strlen(name), "(%s) %s", path[p],
			         shape[h]);
			ok(s != NULL, "%s: the worst-case spec parses", name);
			struct score_prep *prep = s ? score_prepare(s, gt) : NULL;
			uint64_t work0 = 0;
			double tmin = 1e9;   /* the faster of the two runs: one run can lose its CPU
			                      * to page faults when the machine is busy */
			for (int run = 0; s && run < 2; run++) {
				struct score_result r;
				struct score_limits lim = { SCORE_DEFAULT_MAX_STRING_BYTES, false, 0 };
				double t0 = cpu_now();
				int rc = score_eval_prepared(prep, ans, NULL, NULL, NULL, &lim, &r, err, sizeof err);
				double t = cpu_now() - t0;
				if (rc < 0) {
					ok(0, "%s: score_eval: %s", name, err);
					break;
				}
				if (t < tmin)
					tmin = t;
				char *dump = score_result_dumps(&r);
				if (run == 0) {
					ok(r.work <= SCORE_WORK_BUDGET, "%s: %llu work units, within the budget",
					   name, (unsigned long long)r.work);
					first = dump;
					work0 = r.work;
				} else {
					ok(!strcmp(dump, first) && r.work == work0, "%s: the same result and work "
					   "on a second run", name);
					free(dump);
				}
				score_result_clear(&r);
			}
			if (s) {
				if (tmin > worst)
					worst = tmin;
				ok(tmin <= EVAL_CPU_LIMIT, "%s: %.1f ms CPU (the faster of two runs), within "
				   "%.0f ms", name, tmin * 1e3, EVAL_CPU_LIMIT * 1e3);
			}
			free(first);
			score_prep_free(prep);
			spec_free(s);
			strbuf_free(&sp);
		}
	}
	diag("worst evaluation of the worst cases: %.1f ms CPU", worst * 1e3);
	strbuf_free(&dup);
	json_decref(ans);
	json_decref(gt);
}

/* The v3 keyed shapes at sizes beyond the budget (common/README.md "Spec language v3"):
 * keyed_map with records on one or both sides, match_objects with keyed sides and with the
 * methods distinct (60,000 distinct 1,000-character values) and points, 60,000
 * elements a side (keys built with a suffix, all submitted records under one key too, so
 * pairing walks one chain), each pair compared by text_contains on 1,000-character texts. Their
 * keys are charged before they are built: each evaluation stays within the budget and the CPU
 * bound, scores 0 with the budget's warning when it does not fit, and a second run gives the
 * same result and units. */
static void test_work_budget_keyed(void)
{
	enum { N = 60000 };
	uint64_t seed = 0x51ED2701u;
	json_t *txt = random_text(1000, &seed);
	json_t *recs = json_array(), *obj = json_object(), *same = json_array(), *sobj = json_object();
	for (int i = 0; i < N; i++) {
		char k[32];
		snprintf(k, sizeof k, "k%d", i);
		json_array_append_new(recs, json_pack("{s:s, s:O}", "id", k, "v", txt));
		json_array_append_new(same, json_pack("{s:s, s:O}", "id", "k0", "v", txt));
		snprintf(k, sizeof k, "k%d_e", i);
		json_object_set_new(obj, k, json_pack("{s:O}", "v", txt));
		json_object_set(sobj, k, txt);
	}
	json_t *ans = json_pack("{s:o, s:o, s:O}", "obj", obj, "same", same, "recs", recs);
	json_t *gt = json_pack("{s:o, s:o}", "recs", recs, "obj", sobj);
	json_decref(txt);
	static const char *const dims[] = {
		"\"primitive\":\"keyed_map\",\"field\":\"obj\",\"ground_truth_field\":\"recs\","
		"\"ground_truth_key\":{\"path\":\"id\",\"suffix\":\"_e\"},\"item\":{\"primitive\":"
		"\"text_contains\",\"field\":\"v\",\"ground_truth_field\":\"v\"}",
		"\"primitive\":\"keyed_map\",\"field\":\"same\",\"ground_truth_field\":\"recs\","
		"\"field_key\":\"id\",\"ground_truth_key\":\"id\",\"item\":{\"primitive\":"
		"\"text_contains\",\"field\":\"v\"}",
		"\"primitive\":\"match_objects\",\"field\":\"obj\",\"ground_truth_field\":\"recs\","
		"\"field_keyed\":true,\"normalize\":[\"casefold\"],\"match_on\":{\"path\":\"id\","
		"\"suffix\":\"_e\"},\"fields\":[{\"primitive\":\"text_contains\",\"field\":\"v\"}]",
		"\"primitive\":\"match_objects\",\"field\":\"same\",\"ground_truth_field\":\"obj\","
		"\"ground_truth_keyed\":true,\"match_on\":{\"path\":\"id\",\"suffix\":\"_e\"},"
		"\"fields\":[{\"primitive\":\"text_contains\",\"field\":\"v\","
		"\"ground_truth_field\":\"@element\"}]",
		"\"primitive\":\"match_objects\",\"field\":\"recs\",\"ground_truth_field\":\"recs\","
		"\"match_on\":\"id\",\"method\":\"distinct\",\"distinct_of\":\"v\",\"target\":3",
		"\"primitive\":\"match_objects\",\"field\":\"obj\",\"ground_truth_field\":\"recs\","
		"\"field_keyed\":true,\"match_on\":{\"path\":\"id\",\"suffix\":\"_e\"},\"method\":"
		"\"points\",\"points\":0.5,\"max_points\":1000000",
	};
	for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
		struct strbuf sp = { 0 };
		strbuf_addf(&sp, "{\"evaluator\":\"deterministic\",\"dimensions\":[{\"key\":\"d\","
		            "\"weight\":1,%s}]}", dims[i]);
		struct spec *s = parse(sp.buf);
		char err[256], *first = NULL;
		uint64_t work0 = 0;
		double tmin = 1e9;   /* the faster of the two runs, as above */
		ok(s != NULL, "keyed worst case %zu: the spec parses", i);
		for (int run = 0; s && run < 2; run++) {
			struct score_result r;
			struct score_limits lim = { SCORE_DEFAULT_MAX_STRING_BYTES, false, 0 };
			double t0 = cpu_now();
			int rc = score_eval(s, ans, NULL, gt, NULL, NULL, &lim, &r, err, sizeof err);
			double t = cpu_now() - t0;
			if (!ok(rc == 0, "keyed worst case %zu: scores", i))
				break;
			if (t < tmin)
				tmin = t;
			char *dump = score_result_dumps(&r);
			if (run == 0) {
				ok(r.work <= SCORE_WORK_BUDGET, "keyed worst case %zu: %llu work units (within "
				   "the budget), score %d", i, (unsigned long long)r.work, r.score);
				ok(r.score > 0 || strstr(dump, "work budget"), "keyed worst case %zu: scored, or "
				   "0 with the budget's warning", i);
				first = dump;
				work0 = r.work;
			} else {
				ok(!strcmp(dump, first) && r.work == work0, "keyed worst case %zu: the same "
				   "result and work on a second run", i);
				free(dump);
			}
			score_result_clear(&r);
		}
		if (s)
			ok(tmin <= EVAL_CPU_LIMIT, "keyed worst case %zu: %.1f ms CPU (the faster of two "
			   "runs), within %.0f ms", i, tmin * 1e3, EVAL_CPU_LIMIT * 1e3);
		free(first);
		spec_free(s);
		strbuf_free(&sp);
	}
	json_decref(ans);
	json_decref(gt);
}

/* test/data/score_v3_dims_cases.json: whole specs with composite, helper and points
 * dimensions (common/README.md "Composite dimensions", "Helper dimensions", "Points above 1000"), each
 * with its total, dimension scores and warnings ("severity:field", in order); scored with and
 * without explain (the same result, and every dimension explained). The differential test
 * scores the same table against its reference. */
static void test_v3_dims_table(void)
{
	json_error_t je;
	json_t *cases = json_load_file("test/data/score_v3_dims_cases.json", 0, &je);
	if (!ok(cases != NULL, "load test/data/score_v3_dims_cases.json (line %d: %s)", je.line,
	        je.text))
		return;
	size_t i;
	json_t *c;
	json_array_foreach(cases, i, c) {
		const char *name = json_string_value(json_object_get(c, "name"));
		struct spec *s = NULL;
		char err[512];
		if (!ok(spec_from_json(json_object_get(c, "spec"), &s, err, sizeof err) == 0,
		        "%s: spec parses", name)) {
			diag("%s", err);
			continue;
		}
		const json_t *mj = json_object_get(c, "match");
		struct score_match m = { 0 };
		if (mj) {
			const char *a = json_string_value(json_object_get(mj, "started_at"));
			const char *b = json_string_value(json_object_get(mj, "submitted_at"));
			m.has_times = isotime_parse(a, strlen(a), &m.started_at_ms) == 0 &&
			              isotime_parse(b, strlen(b), &m.submitted_at_ms) == 0;
		}
		char *dumps[2] = { NULL, NULL };
		for (int ex = 0; ex < 2; ex++) {
			struct score_result r;
			struct score_limits lim = { 0, ex == 1, 0 };
			if (score_eval(s, json_object_get(c, "answer"), json_object_get(c, "metadata"),
			               json_object_get(c, "ground_truth"), mj ? &m : NULL, NULL, &lim, &r,
			               err, sizeof err) < 0) {
				ok(0, "%s: scores: %s", name, err);
				break;
			}
			dumps[ex] = score_result_dumps(&r);
			if (ex == 0) {
				is_int(r.score, json_integer_value(json_object_get(c, "score")), "%s: total", name);
				const json_t *want = json_object_get(c, "dimensions");
				bool same = r.ndims == json_object_size(want);
				for (size_t k = 0; k < r.ndims; k++)
					same = same && json_integer_value(json_object_get(want, r.dims[k].key)) ==
					               r.dims[k].score;
				if (!ok(same, "%s: dimension scores", name))
					diag("%s", dumps[0]);
				struct strbuf w = { 0 }, ww = { 0 };
				strbuf_addlit(&w, "");
				strbuf_addlit(&ww, "");
				size_t j;
				json_t *x;
				json_array_foreach(r.warnings, j, x)
					strbuf_addf(&w, "%s:%s ", json_string_value(json_object_get(x, "severity")),
					            json_string_value(json_object_get(x, "field")));
				json_array_foreach(json_object_get(c, "warnings"), j, x)
					strbuf_addf(&ww, "%s ", json_string_value(x));
				is_str(w.buf, ww.buf, "%s: warnings", name);
				strbuf_free(&w);
				strbuf_free(&ww);
			} else {
				bool all = true;
				for (size_t k = 0; k < r.ndims; k++)
					all = all && r.dims[k].detail &&
					      json_object_get(r.dims[k].detail, "score");
				ok(all && !strcmp(dumps[0], dumps[1]), "%s: explain gives the same result and "
				   "explains every dimension", name);
			}
			score_result_clear(&r);
		}
		free(dumps[0]);
		free(dumps[1]);
		spec_free(s);
	}
	json_decref(cases);
}

/* Filter and scan on large arrays (common/README.md "Filter and scan"): each configuration
 * is charged before it runs, stays within the work budget and within the CPU bound, and its
 * units stay near a nanosecond each (the ratio is printed). */
static void test_scan_budget(void)
{
	static const char *const vars[] = {
		/* 64 literals of 8 bytes in an `in` test: 544 units per element */
		"{\"path\":\"runs\",\"where\":{\"field\":\"s\",\"in\":[%s]},\"reduce\":\"count\"}",
		/* a deep compare against a 64-member ground-truth object per element */
		"{\"path\":\"runs\",\"where\":{\"equals_path\":\"@ground_truth.obj\"},"
		"\"reduce\":\"count\"}",
		/* 16 tests per element, then an exact sum of decimals */
		"{\"path\":\"runs\",\"where\":[%s],\"reduce\":\"sum\",\"of\":\"x\"}",
		/* new running maxima, descending */
		"{\"path\":\"runs\",\"where\":{\"field\":\"x\",\"type\":\"number\"},"
		"\"reduce\":\"new_best\",\"of\":\"x\",\"order\":\"descending\"}",
	};
	static const char *const vname[] = { "in of 64 literals", "equals a 64-member object",
	                                     "16 tests and a sum", "new_best" };
	struct strbuf lits = { 0 }, tests = { 0 }, obj = { 0 };
	for (int i = 0; i < 64; i++)
		strbuf_addf(&lits, "%s\"lit%05d\"", i ? "," : "", i);
	for (int i = 0; i < 16; i++)
		strbuf_addf(&tests, "%s{\"field\":\"s\",\"equals\":\"pass\"}", i ? "," : "");
	strbuf_addlit(&obj, "{");
	for (int i = 0; i < 64; i++)
		strbuf_addf(&obj, "%s\"k%d\":\"value%d\"", i ? "," : "", i, i);
	strbuf_addlit(&obj, "}");
	for (int n = 0; n < 2; n++) {
		size_t nel = n ? 300000 : 40000;   /* one that fits, one far over */
		json_t *runs = json_array(), *o = json_loads(obj.buf, 0, NULL);
		for (size_t i = 0; i < nel; i++)
			json_array_append_new(runs, i % 7 != 3 ? json_pack("{s:s, s:f}", "s", "pass", "x",
			                                                   (double)(i % 1000) / 10)
			                                       : json_deep_copy(o));
		json_t *ans = json_pack("{s:o}", "runs", runs), *gt = json_pack("{s:o}", "obj", o);
		for (size_t k = 0; k < sizeof vars / sizeof vars[0]; k++) {
			struct strbuf var = { 0 }, sp = { 0 };
			strbuf_addf(&var, vars[k], k == 0 ? lits.buf : tests.buf);
			strbuf_addlit(&sp, "{\"evaluator\":\"deterministic\",\"dimensions\":[");
			for (int d = 0; d < 32; d++)
				strbuf_addf(&sp, "%s{\"key\":\"d%d\",\"weight\":0.03125,\"primitive\":"
				            "\"expression\",\"expr\":\"min(1, v / 1000)\",\"vars\":{\"v\":%s}}",
				            d ? "," : "", d, var.buf);
			strbuf_addlit(&sp, "]}");
			struct spec *s = parse(sp.buf);
			struct score_result r;
			char err[256];
			double t0 = cpu_now();
			int rc = s ? score_eval(s, ans, NULL, gt, NULL, NULL, NULL, &r, err, sizeof err) : -1;
			double t = cpu_now() - t0;
			if (!ok(rc == 0, "scan %s, %zu elements: scores", vname[k], nel))
				diag("%s", s ? err : "spec does not parse");
			if (rc == 0 && json_array_size(r.warnings) &&
			    !strstr(json_string_value(json_object_get(json_array_get(r.warnings, 0),
			                                              "message")), "work budget"))
				diag("%s", json_string_value(json_object_get(json_array_get(r.warnings, 0),
				                                             "message")));
			if (rc == 0) {
				ok(r.work <= SCORE_WORK_BUDGET && t <= EVAL_CPU_LIMIT, "scan %s, %zu elements: "
				   "%llu units, %.1f ms CPU (%.2f ns a unit), within the budget and %.0f ms",
				   vname[k], nel, (unsigned long long)r.work, t * 1e3,
				   r.work ? t * 1e9 / (double)r.work : 0.0, EVAL_CPU_LIMIT * 1e3);
				score_result_clear(&r);
			}
			spec_free(s);
			strbuf_free(&var);
			strbuf_free(&sp);
		}
		json_decref(ans);
		json_decref(gt);
	}
	strbuf_free(&lits);
	strbuf_free(&tests);
	strbuf_free(&obj);
}

/* --explain of the v3 dimensions: a composite's parts (each with its own detail and score),
 * the dimensions it reads, its scans, the exact value rounded once, points and helpers. */
static void test_v3_explain(void)
{
	struct score_result r;
	struct score_limits lim = { 0, true, 0 };
	char err[256];
	struct spec *s = parse("{\"evaluator\":\"deterministic\",\"dimensions\":["
		"{\"key\":\"h\",\"helper\":true,\"primitive\":\"text_length\",\"field\":\"s\",\"target\":10},"
		"{\"key\":\"c\",\"weight\":1,\"primitive\":\"expression\",\"full_score\":7,"
		"\"expr\":\"max(e, 0.7 * f) * hh + 0 * n\",\"vars\":{"
		"\"e\":{\"primitive\":\"exact_match\",\"field\":\"s\",\"ground_truth_field\":\"s\"},"
		"\"f\":{\"primitive\":\"fuzzy_string\",\"field\":\"s\",\"ground_truth_field\":\"s\"},"
		"\"hh\":{\"dimension\":\"h\"},"
		"\"n\":{\"path\":\"xs\",\"where\":{\"type\":\"number\"},\"reduce\":\"count\"}}}]}");
	json_t *a = json_pack("{s:s, s:[i, s, i]}", "s", "kitten", "xs", 1, "a", 2);
	json_t *g = json_pack("{s:s}", "s", "sitting");
	if (!ok(s && score_eval(s, a, NULL, g, NULL, NULL, &lim, &r, err, sizeof err) == 0,
	        "v3 explain: scores"))
		goto out;
	const json_t *c = r.dims[1].detail, *h = r.dims[0].detail;
	const json_t *parts = json_object_get(c, "parts"), *ex = json_object_get(c, "exact");
	ok(json_is_true(json_object_get(h, "helper")), "v3 explain: a helper says so");
	is_int(json_integer_value(json_object_get(json_object_get(parts, "f"), "score")), 571,
	       "v3 explain: a part's score (fuzzy kitten/sitting)");
	ok(json_object_get(json_object_get(parts, "f"), "submitted") != NULL,
	   "v3 explain: a part's own detail (the values it read)");
	is_int(json_integer_value(json_object_get(json_object_get(json_object_get(c, "dimensions"),
	       "hh"), "score")), 600, "v3 explain: the dimension read and its score");
	is_int(json_integer_value(json_object_get(json_object_get(json_object_get(c, "scans"),
	       "n"), "kept")), 2, "v3 explain: a scan's kept elements");
	/* 0.7 × 0.571 × 0.6 = 0.23982 = 11991/50000 → × 7 = 1.68 → 2 */
	ok(json_integer_value(json_array_get(ex, 0)) == 11991 &&
	   json_integer_value(json_array_get(ex, 1)) == 50000, "v3 explain: the exact value rounded");
	is_int(json_integer_value(json_object_get(c, "full_score")), 7, "v3 explain: full_score");
	is_int(r.dims[1].score, 2, "v3 explain: 0.23982 of 7 points is 2");
	score_result_clear(&r);
out:
	json_decref(a);
	json_decref(g);
	spec_free(s);
}

/* One v3 construct's worst case (common/README.md "Work budget"): spec (a whole spec) scored
 * twice on ans / gt stays within SCORE_WORK_BUDGET and the CPU bound, scores above 0 or gives
 * the budget's warning, and gives the same result and units both times. */
static void worst_case(const char *name, const char *spec, const json_t *ans, const json_t *gt)
{
	struct spec *s = parse(spec);
	char err[256], *first = NULL;
	uint64_t work0 = 0;
	double tmin = 1e9;
	if (!ok(s != NULL, "%s: the spec parses", name))
		return;
	for (int run = 0; run < 2; run++) {
		struct score_result r;
		struct score_limits lim = { SCORE_DEFAULT_MAX_STRING_BYTES, false, 0 };
		double t0 = cpu_now();
		int rc = score_eval(s, ans, NULL, gt, NULL, NULL, &lim, &r, err, sizeof err);
		double t = cpu_now() - t0;
		if (!ok(rc == 0, "%s: scores", name))
			break;
		tmin = t < tmin ? t : tmin;
		char *dump = score_result_dumps(&r);
		if (run == 0) {
			ok(r.work <= SCORE_WORK_BUDGET && (r.score > 0 || strstr(dump, "work budget")),
			   "%s: %llu work units (within the budget), score %d", name,
			   (unsigned long long)r.work, r.score);
			first = dump;
			work0 = r.work;
		} else {
			ok(!strcmp(dump, first) && r.work == work0, "%s: the same result and work on a "
			   "second run", name);
			free(dump);
		}
		score_result_clear(&r);
	}
	ok(tmin <= EVAL_CPU_LIMIT, "%s: %.1f ms CPU (the faster of two runs), within %.0f ms", name,
	   tmin * 1e3, EVAL_CPU_LIMIT * 1e3);
	free(first);
	spec_free(s);
}

/* The worst cases of the v3 constructs added after the composite dimensions: each on a
 * 1,000,000-byte text (the longest string the default limit allows) as 32 dimensions, the
 * most a spec has. */
static void test_v3_rest_worst(void)
{
	char *t = xmalloc(1000001);
	for (size_t i = 0; i < 1000000; i++)
		t[i] = i % 2 ? '\n' : 'a';
	t[1000000] = 0;
	json_t *ans = json_pack("{s:s}", "t", t), *gt = json_object();
	struct strbuf sp = { 0 };
	strbuf_addlit(&sp, "{\"evaluator\":\"deterministic\",\"dimensions\":[");
	for (int i = 0; i < 32; i++)
		strbuf_addf(&sp, "%s{\"key\":\"d%d\",\"weight\":%s,\"primitive\":\"text_length\","
		            "\"field\":\"t\",\"unit\":\"lines\",\"target\":600000}", i ? "," : "", i,
		            i ? "0.03" : "0.07");
	strbuf_addlit(&sp, "]}");
	worst_case("text_length lines: 32 x 500,000 lines", sp.buf, ans, gt);
	strbuf_free(&sp);
	/* unwrap and type vars: constant work (a path lookup each), not charged; 32 dimensions of
	 * 64 vars each reading 64 path segments */
	json_t *deep = json_integer(7);
	struct strbuf path = { 0 };
	strbuf_addlit(&path, "t");
	for (int l = 0; l < 62; l++) {
		deep = json_pack("{s:o}", "a", deep);
		strbuf_addlit(&path, ".a");
	}
	json_object_set_new(ans, "deep", json_pack("{s:o}", "count", deep));
	memset(&sp, 0, sizeof sp);
	strbuf_addlit(&sp, "{\"evaluator\":\"deterministic\",\"dimensions\":[");
	for (int i = 0; i < 32; i++) {
		strbuf_addf(&sp, "%s{\"key\":\"d%d\",\"weight\":%s,\"primitive\":\"expression\","
		            "\"expr\":\"v0 / 100\",\"vars\":{", i ? "," : "", i, i ? "0.03" : "0.07");
		for (int v = 0; v < 64; v++)
			strbuf_addf(&sp, "%s\"v%d\":{\"path\":\"deep\",\"unwrap\":\"count.%s\"%s}",
			            v ? "," : "", v, path.buf + 2, v % 2 ? ",\"type\":\"number\"" : "");
		strbuf_addlit(&sp, "}}");
	}
	strbuf_addlit(&sp, "]}");
	worst_case("unwrap and type: 32 dimensions x 64 vars x 64 path segments", sp.buf, ans, gt);
	strbuf_free(&path);
	strbuf_free(&sp);
	/* a field of 16 paths joined: each one the 1,000,000-byte text (16 MB per dimension,
	 * charged before it is built), as 32 dimensions */
	memset(&sp, 0, sizeof sp);
	strbuf_addlit(&sp, "{\"evaluator\":\"deterministic\",\"dimensions\":[");
	for (int i = 0; i < 32; i++) {
		strbuf_addf(&sp, "%s{\"key\":\"d%d\",\"weight\":%s,\"primitive\":\"text_length\","
		            "\"unit\":\"lines\",\"target\":600000,\"field\":[", i ? "," : "", i,
		            i ? "0.03" : "0.07");
		for (int k = 0; k < 16; k++)
			strbuf_addf(&sp, "%s\"t\"", k ? "," : "");
		strbuf_addlit(&sp, "]}");
	}
	strbuf_addlit(&sp, "]}");
	worst_case("joined fields: 32 dimensions x 16 paths x 1,000,000 bytes", sp.buf, ans, gt);
	strbuf_free(&sp);
	/* projections over 200,000 records on both sides, as 32 set_overlap dimensions */
	json_t *recs = json_array();
	for (int i = 0; i < 200000; i++)
		json_array_append_new(recs, json_pack("{s:i}", "id", i % 1000));
	json_object_set(ans, "recs", recs);
	json_object_set_new(gt, "recs", recs);
	memset(&sp, 0, sizeof sp);
	strbuf_addlit(&sp, "{\"evaluator\":\"deterministic\",\"dimensions\":[");
	for (int i = 0; i < 32; i++)
		strbuf_addf(&sp, "%s{\"key\":\"d%d\",\"weight\":%s,\"primitive\":\"set_overlap\","
		            "\"field\":\"recs[*].id\",\"ground_truth_field\":\"recs[*].id\"}",
		            i ? "," : "", i, i ? "0.03" : "0.07");
	strbuf_addlit(&sp, "]}");
	worst_case("projection: 32 dimensions x 200,000 records on both sides", sp.buf, ans, gt);
	strbuf_free(&sp);
	json_decref(ans);
	json_decref(gt);
	free(t);
}

/* --explain of the constructs after the composite dimensions: a part's exact fraction, what an
 * unwrap or type var's path held, a projected and a joined value, a line count. */
static void test_v3_rest_explain(void)
{
	struct score_result r;
	struct score_limits lim = { 0, true, 0 };
	char err[256];
	struct spec *s = parse("{\"evaluator\":\"deterministic\",\"dimensions\":["
		"{\"key\":\"c\",\"weight\":0.25,\"primitive\":\"expression\",\"expr\":\"0.5 * f + 0 * n"
		" + 0 * t\",\"vars\":{\"f\":{\"primitive\":\"coverage_ratio\",\"field\":\"a\","
		"\"ground_truth_field\":\"b\"},\"n\":{\"path\":\"n\",\"unwrap\":\"count\"},"
		"\"t\":{\"path\":\"n\",\"type\":\"object\"}}},"
		"{\"key\":\"p\",\"weight\":0.25,\"primitive\":\"coverage_ratio\",\"field\":\"a\","
		"\"ground_truth_field\":\"r[*].id\"},"
		"{\"key\":\"j\",\"weight\":0.25,\"primitive\":\"text_length\",\"field\":[\"x\",\"y\"],"
		"\"separator\":\"\\n\",\"unit\":\"lines\",\"target\":2},"
		"{\"key\":\"l\",\"weight\":0.25,\"primitive\":\"text_length\",\"field\":\"x\","
		"\"unit\":\"lines\",\"target\":2}]}");
	json_t *a = json_pack("{s:[s], s:{s:i}, s:s, s:s}", "a", "p", "n", "count", 3, "x", "one",
	                      "y", "two");
	json_t *g = json_pack("{s:[s,s,s,s,s,s], s:[{s:s},{s:s},{s:i}]}", "b", "p", "q", "r", "s",
	                      "t", "u", "r", "id", "p", "id", "q", "x", 1);
	if (!ok(s && score_eval(s, a, NULL, g, NULL, NULL, &lim, &r, err, sizeof err) == 0,
	        "v3 rest explain: scores"))
		goto out;
	json_t *ex = score_result_explain(&r);
	json_t *c = json_object_get(ex, "c"), *f = json_object_get(json_object_get(c, "parts"), "f");
	json_t *fx = json_object_get(f, "exact");
	ok(json_integer_value(json_array_get(fx, 0)) == 1 &&
	   json_integer_value(json_array_get(fx, 1)) == 6 &&
	   json_integer_value(json_object_get(f, "score")) == 167,
	   "v3 rest explain: a part's exact fraction 1/6 beside its score 167");
	is_int(r.dims[0].score, 83, "v3 rest explain: 0.5 x 1/6 rounded once is 83");
	json_t *rd = json_object_get(c, "read");
	ok(!strcmp(json_string_value(json_object_get(rd, "n")), "an object") &&
	   !strcmp(json_string_value(json_object_get(rd, "t")), "an object") &&
	   json_real_value(json_object_get(json_object_get(c, "vars"), "n")) == 3,
	   "v3 rest explain: an unwrap and a type var show what the path held, and the number read");
	ok(json_array_size(json_object_get(json_object_get(ex, "p"), "expected")) == 2,
	   "v3 rest explain: the projected expected value (2 of 3 records hold id)");
	ok(!strcmp(json_string_value(json_object_get(json_object_get(ex, "j"), "submitted")),
	           "one\ntwo") &&
	   json_integer_value(json_object_get(json_object_get(ex, "j"), "length")) == 2,
	   "v3 rest explain: the joined text and its line count");
	is_int(r.dims[3].score, 500, "v3 rest explain: one line of two");
	json_decref(ex);
	score_result_clear(&r);
out:
	json_decref(a);
	json_decref(g);
	spec_free(s);
}

int main(void)
{
	test_v3_explain();
	test_v3_rest_explain();
	test_v3_rest_worst();
	test_v3_dims_table();
	test_work_budget_worst();
	test_prepared_bound();
	test_prepared_index();
	test_prepared();
	test_work_budget();
	test_match_objects_pairing();
	test_match_objects_key_forms();
	test_script_value();
	test_v2_totals_gates();
	test_warning_sides();
	test_seed_example();
	test_totals();
	test_gates();
	test_violations_verified();
	test_external();
	test_misc();
	test_work_budget_keyed();   /* these two last: their 60,000-element documents */
	test_scan_budget();   /* and 300,000-element arrays leave the heap fragmented,
	                       * which would slow the timed worst cases above */
	return tap_done();
}
