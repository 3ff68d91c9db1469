/*
 * Unit tests for worker/judge's pure parts: the spend-budget setting
 * (ARBITER_JUDGE_BUDGET), the verdict key (SHA-256 of what determines a
 * verdict) and the judge_verdicts row the commit writes (judge_row). The provider flow is covered by test/integration/test_worker_judge.py.
 */
#undef NDEBUG
#include <string.h>

#include "judge.h"
#include "spec.h"
#include "tap.h"

static const char SPEC[] =
	"{\"evaluator\": \"judge\", \"dimensions\": [{\"key\": \"a\", \"weight\": 1, "
	"\"judge\": {\"name\": \"A\"}}], \"judge\": {\"provider\": \"openai\", \"model\": \"m\", "
	"\"reads\": {\"fields\": [\"x\"]}}}";

int main(void)
{
	double usd;
	int per;
	ok(judge_budget_parse("", &usd, &per) == 0 && usd == 0, "empty: no budget");
	ok(judge_budget_parse("20/day", &usd, &per) == 0 && usd == 20 && per == 86400, "20/day");
	ok(judge_budget_parse("0.5/hour", &usd, &per) == 0 && usd == 0.5 && per == 3600, "0.5/hour");
	static const char *const bad[] = { "20", "0/day", "-1/day", "x/day", "5/week", "5/day ",
	                                   "/day", "nan/day" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ok(judge_budget_parse(bad[i], &usd, &per) < 0, "refused: '%s'", bad[i]);

	struct spec *s;
	char err[256];
	if (spec_parse(SPEC, strlen(SPEC), &s, err, sizeof err) < 0) {
		ok(0, "spec: %s", err);
		return tap_done();
	}
	json_t *a1 = json_pack("{s:i, s:s}", "x", 1, "ignored", "a");
	json_t *a2 = json_pack("{s:i, s:s}", "x", 1, "ignored", "b");
	json_t *a3 = json_pack("{s:i}", "x", 2);
	char k1[65], k2[65], k3[65];
	judge_key(spec_rubric(s), a1, NULL, k1);
	judge_key(spec_rubric(s), a2, NULL, k2);
	judge_key(spec_rubric(s), a3, NULL, k3);
	is_int((int)strlen(k1), 64, "key is 64 hex characters");
	is_str(k1, k2, "what the judge does not read does not change the key");
	ok(strcmp(k1, k3) != 0, "what it reads does");

	/* judge_row: only a pending verdict gives a row; its fields are the commit's columns. */
	struct judge_result res;
	memset(&res, 0, sizeof res);
	memcpy(res.key, k1, sizeof res.key);
	ok(judge_row(spec_rubric(s), &res) == NULL, "a cached verdict: no row to write");
	res.pending = true;
	res.verdict_text = "{\"scores\":{\"a\":{\"score\":70,\"reasoning\":\"r\"}},\"summary\":\"s\"}";
	res.tokens_in = 1000;
	res.tokens_out = 100;
	res.cost_usd = 0.00055;
	res.paid_calls = 2;
	res.replace = true;
	char *row = judge_row(spec_rubric(s), &res);
	json_t *o = row ? json_loads(row, 0, NULL) : NULL;
	ok(o != NULL, "row is JSON: %s", row ? row : "(null)");
	is_str(json_string_value(json_object_get(o, "key")), k1, "row: key");
	is_str(json_string_value(json_object_get(o, "provider")), "openai", "row: provider");
	is_str(json_string_value(json_object_get(o, "model")), "m", "row: model");
	is_str(json_string_value(json_object_get(o, "pv")), RUBRIC_PROMPT_VERSION, "row: prompt version");
	is_int((int)json_integer_value(json_object_get(json_object_get(json_object_get(
	       json_object_get(o, "verdict"), "scores"), "a"), "score")), 70, "row: verdict as JSON");
	is_int((int)json_integer_value(json_object_get(o, "ti")), 1000, "row: tokens in");
	is_int((int)json_integer_value(json_object_get(o, "tout")), 100, "row: tokens out");
	ok(json_number_value(json_object_get(o, "cost")) == 0.00055, "row: cost");
	is_int((int)json_integer_value(json_object_get(o, "calls")), 2, "row: calls paid");
	ok(json_is_true(json_object_get(o, "replace")), "row: replace (re-judged)");
	json_decref(o);
	free(row);
	res.paid_calls = 0;
	res.replace = false;
	row = judge_row(spec_rubric(s), &res);
	o = row ? json_loads(row, 0, NULL) : NULL;
	is_int((int)json_integer_value(json_object_get(o, "calls")), 1, "row: at least one call");
	ok(json_is_false(json_object_get(o, "replace")), "row: a first verdict does not replace");
	json_decref(o);
	free(row);

	json_decref(a1);
	json_decref(a2);
	json_decref(a3);
	spec_free(s);
	return tap_done();
}
