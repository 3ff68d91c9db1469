/*
 * Unit tests for common/spec: the data table test/data/spec_cases.json (every
 * validation rule of common/README.md "Scoring spec", each with the message it must produce, and
 * valid specs that must parse; spec_v2_cases.json, spec_v3_cases.json and
 * spec_v3_dims_cases.json the same for the spec languages v2 and v3), plus the parsed
 * view: defaults, topological gate order, external dimensions, thresholds and constraints.
 */
#include "spec.h"
#include "jpath.h"
#include "tap.h"

#include <stdlib.h>

static void run_case(const json_t *c)
{
	const char *name = json_string_value(json_object_get(c, "name"));
	const json_t *sj = json_object_get(c, "spec"), *want = json_object_get(c, "error");
	char *text = json_is_string(sj) ? strdup(json_string_value(sj))
	                                : json_dumps(sj, JSON_ENCODE_ANY | JSON_COMPACT);
	struct spec *s = NULL;
	char err[512] = "";
	int rc = spec_parse(text, strlen(text), &s, err, sizeof err);
	if (json_is_null(want)) {
		if (!ok(rc == 0 && s, "valid: %s", name))
			diag("error: %s", err);
	} else {
		const char *w = json_string_value(want);
		if (!ok(rc < 0 && !s && strstr(err, w), "invalid: %s", name))
			diag("got \"%s\", want it to contain \"%s\"", rc < 0 ? err : "(accepted)", w);
	}
	/* spec_from_json agrees with spec_parse. */
	if (!json_is_string(sj)) {
		struct spec *s2 = NULL;
		char err2[512] = "";
		int rc2 = spec_from_json(sj, &s2, err2, sizeof err2);
		ok(rc2 == rc && !strcmp(err, err2), "%s: spec_from_json agrees", name);
		spec_free(s2);
	}
	spec_free(s);
	free(text);
}

static struct spec *parse(const char *text)
{
	struct spec *s = NULL;
	char err[512];
	if (spec_parse(text, strlen(text), &s, err, sizeof err) < 0)
		diag("unexpected: %s", err);
	return s;
}

static void test_view(void)
{
	struct spec *s = parse("{\"evaluator\":\"deterministic\",\"dimensions\":["
		"{\"key\":\"lat\",\"weight\":0.25,\"primitive\":\"time_decay\",\"gate\":{\"dimension\":\"cost\",\"above\":100}},"
		"{\"key\":\"cost\",\"weight\":0.25,\"primitive\":\"time_decay\",\"gate\":{\"dimension\":\"ok\",\"above\":700}},"
		"{\"key\":\"ok\",\"weight\":0.3,\"primitive\":\"numeric_tolerance\",\"field\":\"a\",\"ground_truth_field\":\"b\"},"
		"{\"key\":\"set\",\"weight\":0.2,\"primitive\":\"set_overlap\",\"field\":\"a[0]\",\"ground_truth_field\":\"b.c\"}]}");
	if (!ok(s != NULL, "view spec parses"))
		return;
	is_int(spec_evaluator(s), SPEC_DETERMINISTIC, "evaluator");
	is_int(spec_ndims(s), 4, "ndims");
	is_str(spec_dim_key(s, 2), "ok", "key order is spec order");
	ok(spec_dim_key(s, 4) == NULL, "key out of range is NULL");
	is_int(spec_dim(s, 0)->weight, 250000, "weight in micro-units");
	is_int(spec_dim(s, 2)->tolerance.m, 1, "default tolerance mantissa");
	is_int(spec_dim(s, 2)->tolerance.e, -2, "default tolerance exponent (0.01)");
	ok(!spec_dim(s, 2)->linear, "default decay none");
	ok(spec_dim(s, 3)->jaccard, "default method jaccard");
	ok(spec_dim(s, 0)->curve == 1.0 && !spec_dim(s, 0)->has_time_limit, "time_decay defaults");
	is_str(jpath_text(spec_dim(s, 3)->field), "a[0]", "field path kept");
	const size_t *o = spec_topo_order(s);
	size_t pos[4];
	for (size_t i = 0; i < 4; i++)
		pos[o[i]] = i;
	ok(pos[2] < pos[1] && pos[1] < pos[0], "gate targets come first in topological order");
	ok(spec_win(s) == 700 && spec_draw(s) == 400, "default thresholds 700/400");
	int64_t v;
	ok(!spec_constraint(s, "token_budget", &v), "no constraints");
	ok(!spec_dim_external(s, 0), "deterministic dims are not external");
	spec_free(s);

	s = parse("{\"evaluator\":\"custom-script\",\"dimensions\":[{\"key\":\"a\",\"weight\":0.5},"
	          "{\"key\":\"b\",\"weight\":0.5,\"primitive\":\"time_decay\"}],"
	          "\"script\":{\"language\":\"sh\",\"source\":\"echo\"},"
	          "\"constraints\":{\"token_budget\":5,\"max_llm_calls\":null},\"thresholds\":{\"draw\":100.5}}");
	if (!ok(s != NULL, "custom-script spec parses"))
		return;
	is_str(spec_evaluator_name(spec_evaluator(s)), "custom-script", "evaluator name");
	ok(spec_dim_external(s, 0) && !spec_dim_external(s, 1), "dims without primitive are external");
	ok(spec_constraint(s, "token_budget", &v) && v == 5, "token_budget");
	ok(!spec_constraint(s, "max_llm_calls", &v), "null constraint is unset");
	ok(spec_draw(s) == 100.5 && spec_win(s) == 700, "draw given, win default");
	ok(json_is_object(json_object_get(spec_json(s), "script")), "spec_json exposes script");
	spec_free(s);

	s = parse("{\"evaluator\":\"test-suite\",\"dimensions\":[{\"key\":\"correctness\",\"weight\":0.5,"
	          "\"primitive\":\"exact_match\",\"field\":\"a\",\"ground_truth_field\":\"b\"},"
	          "{\"key\":\"speed\",\"weight\":0.5,\"primitive\":\"time_decay\"}],"
	          "\"test_suite\":{\"language\":[\"c\",\"python3\"],\"cases\":[{\"name\":\"x\",\"expected_stdout\":\"\"}]}}");
	if (!ok(s != NULL, "test-suite spec parses"))
		return;
	ok(spec_dim_external(s, 0) && !spec_dim_external(s, 1), "the suite's dimension is external");
	is_int(spec_dim(s, 0)->prim, PRIM_NONE, "its primitive is ignored");
	spec_free(s);
	spec_free(NULL);
}

int main(void)
{
	json_error_t je;
	json_t *cases = json_load_file("test/data/spec_cases.json", 0, &je);
	if (!cases) {
		ok(0, "load test/data/spec_cases.json: line %d: %s", je.line, je.text);
		return tap_done();
	}
	size_t i;
	json_t *c;
	json_array_foreach(cases, i, c)
		run_case(c);
	json_decref(cases);
	/* Spec language v2: every new construct's validation message names dimension and rule. */
	cases = json_load_file("test/data/spec_v2_cases.json", 0, &je);
	ok(cases != NULL, "load test/data/spec_v2_cases.json (line %d: %s)", je.line, je.text);
	json_array_foreach(cases, i, c)
		run_case(c);
	json_decref(cases);
	/* Spec language v3 (common/README.md "Spec language v3"). */
	cases = json_load_file("test/data/spec_v3_cases.json", 0, &je);
	ok(cases != NULL, "load test/data/spec_v3_cases.json (line %d: %s)", je.line, je.text);
	json_array_foreach(cases, i, c)
		run_case(c);
	json_decref(cases);
	/* Composite, helper and points dimensions, 32 dimensions (common/README.md "Composite
	 * dimensions", "Helper dimensions", "Points above 1000"). */
	cases = json_load_file("test/data/spec_v3_dims_cases.json", 0, &je);
	ok(cases != NULL, "load test/data/spec_v3_dims_cases.json (line %d: %s)", je.line, je.text);
	json_array_foreach(cases, i, c)
		run_case(c);
	json_decref(cases);
	test_view();
	return tap_done();
}
