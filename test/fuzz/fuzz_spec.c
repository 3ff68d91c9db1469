/*
 * libFuzzer harness for the scoring-spec parser (common/spec) and, when a
 * spec parses, for the scorer: the input is used as the spec, and the same
 * document as answer, metadata and ground truth, with fixed match times, so
 * every primitive, gate and path runs on arbitrary shapes. Must never crash,
 * leak or trip UBSan.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "score.h"
#include "spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct spec *s = NULL;
	char err[256];
	if (spec_parse((const char *)data, size, &s, err, sizeof err) < 0) {
		if (strlen(err) == 0)
			abort();   /* a failure always says why */
		return 0;
	}
	const json_t *doc = spec_json(s);
	struct score_match m = { .has_times = true, .started_at_ms = 1714557600000LL,
	                         .submitted_at_ms = 1714557666000LL, .time_limit_secs = 300,
	                         .attempt_number = 1 };
	struct score_limits lim = { 4096, false, 0 };
	const char *keys[SPEC_MAX_DIMS];
	int scores[SPEC_MAX_DIMS];
	size_t n = spec_ndims(s);
	for (size_t i = 0; i < n; i++) {
		keys[i] = spec_dim_key(s, i);
		scores[i] = (int)(i * 137 % 1200) - 100;
	}
	struct score_ext ext = { n, keys, scores, NULL, NULL };
	struct score_result r;
	if (score_eval(s, doc, json_object_get(doc, "metadata"), doc, &m,
	               spec_evaluator(s) == SPEC_DETERMINISTIC ? NULL : &ext, &lim, &r, err,
	               sizeof err) == 0) {
		if (r.score < 0 || r.score > 1000)
			abort();
		char *text = score_result_dumps(&r);
		json_t *back = json_loads(text, 0, NULL);
		if (!back)
			abort();   /* dumps must always be valid JSON */
		json_decref(back);
		free(text);
		json_t *j = score_result_json(&r);
		json_decref(j);
		score_result_clear(&r);
	}
	spec_free(s);
	return 0;
}
