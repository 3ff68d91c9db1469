/*
 * libFuzzer harness for the LLM judge's parsers of untrusted text
 * (common/rubric): the provider response parser for each of the three
 * providers, and the strict verdict parser, over the same input. A verdict
 * that parses must dump to text that parses again to the same scores. Must
 * never crash, leak or trip UBSan.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rubric.h"
#include "spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct spec *spec;

static const char SPEC[] =
	"{\"evaluator\": \"judge\", \"dimensions\": ["
	"{\"key\": \"code_quality\", \"weight\": 0.5, \"judge\": {\"name\": \"Code quality\"}},"
	"{\"key\": \"design\", \"weight\": 0.5, \"judge\": {\"name\": \"Design\"}}],"
	"\"judge\": {\"provider\": \"openai\", \"model\": \"m\", "
	"\"max_input_bytes\": 1024, \"reads\": {\"fields\": [\"a\", \"b[0]\", \"c.d\"], "
	"\"files\": [\"x.py\"], \"self_description\": \"S.md\"}}}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256];
	if (!spec && spec_parse(SPEC, strlen(SPEC), &spec, err, sizeof err) < 0)
		abort();
	const struct rubric *r = spec_rubric(spec);
	const char *text = (const char *)data;
	for (int p = RUBRIC_OPENAI; p <= RUBRIC_ANTHROPIC; p++) {
		struct rubric_reply rep;
		err[0] = 0;
		if (rubric_reply_parse((enum rubric_provider)p, text, size, &rep, err, sizeof err) == 0)
			rubric_reply_clear(&rep);
		else if (!err[0])
			abort();   /* a failure always says why */
	}
	json_t *answer = json_loadb(text, size, 0, NULL);
	if (answer) {
		json_t *tests = json_is_object(answer) ? json_object_get(answer, "tests") : NULL;
		json_t *m = rubric_materials(r, answer, tests);
		char *d = json_dumps(m, JSON_COMPACT | JSON_ENSURE_ASCII);
		if (!d || strlen(d) > 4096)   /* the cap, plus fixed overhead of keys and markers */
			abort();
		char *sys = NULL, *user = NULL;
		if (rubric_prompt(r, m, "0123456789abcdef0123456789abcdef", &sys, &user) == 0) {
			int lines = 0;
			for (const char *p = user; *p; p++)
				lines += *p == '\n';
			if (lines != 3)
				abort();   /* the data stays one line between the delimiters */
		}
		free(sys);
		free(user);
		free(d);
		json_decref(m);
		json_decref(answer);
	}
	struct rubric_verdict v;
	err[0] = 0;
	if (rubric_verdict_parse(r, text, size, &v, err, sizeof err) < 0) {
		if (!err[0])
			abort();
		return 0;
	}
	for (size_t i = 0; i < v.n; i++)
		if (v.score[i] < 0 || v.score[i] > 100)
			abort();
	char *d = rubric_verdict_dumps(r, &v);
	struct rubric_verdict w;
	if (!d || rubric_verdict_parse(r, d, strlen(d), &w, err, sizeof err) < 0)
		abort();
	for (size_t i = 0; i < v.n; i++)
		if (w.score[i] != v.score[i] || strcmp(w.reasoning[i], v.reasoning[i]))
			abort();
	rubric_verdict_clear(&w);
	rubric_verdict_clear(&v);
	free(d);
	return 0;
}
