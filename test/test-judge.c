/*
 * Unit tests for worker/judge's pure parts: the spend-budget setting
 * (ARBITER_JUDGE_BUDGET) and the verdict key (SHA-256 of what determines a
 * verdict). The provider flow is covered by test/integration/test_worker_judge.py.
 */
#undef NDEBUG
#include <string.h>

#include "judge.h"
#include "spec.h"
#include "tap.h"

static const char SPEC[] =
	"{\"evaluator\": \"judge\", \"dimensions\": [{\"key\": \"a\", \"weight\": 1, "
	"\"judge\": {\"name\": \"A\"}}], \"judge\": {\"provider\": \"openai\", \"model\": \"m\", "
	"\"base_url\": \"http://127.0.0.1:9/v1\", \"reads\": {\"fields\": [\"x\"]}}}";

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
	json_decref(a1);
	json_decref(a2);
	json_decref(a3);
	spec_free(s);
	return tap_done();
}
