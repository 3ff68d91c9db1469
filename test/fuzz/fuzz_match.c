/*
 * libFuzzer harness for the composite primitives of spec language v2
 * (match_objects, keyed_map with nested primitives, term_coverage,
 * token_overlap, count, text_length, regex_match, normalisation): a fixed
 * spec, and the input parsed as JSON used as both the answer and the ground
 * truth (fields a / b of it and of its "gt" member). The ground truth's side is
 * prepared once (score_prepare) and evaluated twice with it; the score must be in
 * 0..1000, identical on the second run and equal (every dimension's score, the
 * warnings' count, the work units) to the unprepared scoring of the same spec
 * reading the expected values from @metadata (never prepared), and the result
 * must dump to valid JSON.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "score.h"
#include "spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char spec_text[] =
	"{\"evaluator\":\"deterministic\",\"total\":\"round_each\",\"dimensions\":["
	"{\"key\":\"m\",\"weight\":0.2,\"primitive\":\"match_objects\",\"field\":\"a\","
	" \"ground_truth_field\":\"gt.a\",\"match_on\":[\"id\",\"k.x\"],\"method\":\"f1\","
	" \"normalize\":[\"casefold\",\"numeric\"],\"fields\":["
	"  {\"primitive\":\"exact_match\",\"field\":\"v\",\"weight\":0.3,\"normalize\":[\"trim\"]},"
	"  {\"primitive\":\"numeric_tolerance\",\"field\":\"n\",\"tolerance\":0.5,\"weight\":0.2},"
	"  {\"primitive\":\"set_overlap\",\"field\":\"s\",\"method\":\"precision\",\"weight\":0.5}]},"
	"{\"key\":\"k\",\"weight\":0.2,\"primitive\":\"keyed_map\",\"field\":\"b\","
	" \"ground_truth_field\":\"gt.b\",\"item\":{\"primitive\":\"match_objects\",\"match_on\":\"id\","
	"  \"method\":\"mean\",\"fields\":[{\"primitive\":\"fuzzy_string\",\"field\":\"t\"}]}},"
	"{\"key\":\"t\",\"weight\":0.2,\"primitive\":\"term_coverage\",\"field\":\"c\","
	" \"terms\":[\"alpha\",[\"beta\",{\"regex\":\"g(am)+a\\\\b\"}],{\"regex\":\"^\\\\d{2,4}\"}],"
	" \"normalize\":[\"nfkc\",\"casefold\",\"punctuation\",\"whitespace\"]},"
	"{\"key\":\"o\",\"weight\":0.1,\"primitive\":\"token_overlap\",\"field\":\"c\","
	" \"ground_truth_field\":\"gt.c\",\"method\":\"f1\"},"
	"{\"key\":\"n\",\"weight\":0.1,\"primitive\":\"count\",\"field\":\"a\",\"of\":\"distinct\","
	" \"ramp\":[[0,0],[3,0.5],[10,1]]},"
	"{\"key\":\"l\",\"weight\":0.1,\"primitive\":\"text_length\",\"field\":\"c\",\"unit\":\"words\","
	" \"steps\":[[1,0.1],[5,1]]},"
	"{\"key\":\"r\",\"weight\":0.1,\"primitive\":\"regex_match\",\"field\":\"c\","
	" \"pattern\":\"(a|b)*c{1,3}[^x-z]\",\"case_insensitive\":true}]}";

/* spec_text with every ground_truth_field read from @metadata: never prepared. */
static struct spec *unprepared_spec(void)
{
	static const char gtf[] = "\"ground_truth_field\":\"";
	static char buf[sizeof spec_text + 256];
	const char *p = spec_text, *q;
	size_t n = 0;
	while ((q = strstr(p, gtf))) {
		size_t pre = (size_t)(q - p) + strlen(gtf);
		memcpy(buf + n, p, pre);
		memcpy(buf + n + pre, "@metadata.", 10);
		n += pre + 10;
		p += pre;
	}
	memcpy(buf + n, p, strlen(p) + 1);
	struct spec *s;
	char err[256];
	if (spec_parse(buf, strlen(buf), &s, err, sizeof err) < 0)
		abort();
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct spec *s, *su;
	char err[256];
	if (!s && spec_parse(spec_text, strlen(spec_text), &s, err, sizeof err) < 0)
		abort();
	if (!su)
		su = unprepared_spec();
	json_t *doc = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
	if (!doc)
		return 0;
	struct score_limits lim = { 4096, true, 0 };
	struct score_result r1, r2, r3;
	struct score_prep *prep = score_prepare(s, doc);
	if (score_eval_prepared(prep, doc, NULL, NULL, NULL, &lim, &r1, err, sizeof err) < 0 ||
	    score_eval_prepared(prep, doc, NULL, NULL, NULL, &lim, &r2, err, sizeof err) < 0 ||
	    score_eval(su, doc, doc, NULL, NULL, NULL, &lim, &r3, err, sizeof err) < 0)
		abort();
	score_prep_free(prep);
	if (r1.score < 0 || r1.score > 1000 || r1.score != r2.score || r1.score != r3.score ||
	    r1.work != r3.work || json_array_size(r1.warnings) != json_array_size(r3.warnings))
		abort();
	for (size_t i = 0; i < r1.ndims; i++)
		if (r1.dims[i].score != r2.dims[i].score || r1.dims[i].score != r3.dims[i].score ||
		    r1.dims[i].score < 0 || r1.dims[i].score > 1000)
			abort();
	char *text = score_result_dumps(&r1);
	json_t *back = json_loads(text, 0, NULL);
	if (!back)
		abort();
	json_decref(back);
	free(text);
	json_t *ex = score_result_explain(&r1);
	char *et = json_dumps(ex, JSON_COMPACT);
	if (!et)
		abort();
	free(et);
	json_decref(ex);
	score_result_clear(&r1);
	score_result_clear(&r2);
	score_result_clear(&r3);
	json_decref(doc);
	return 0;
}
