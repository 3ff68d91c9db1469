/*
 * Benchmark of the deterministic scorer as the worker uses it: one
 * 4-dimension spec (exact_match_ratio, numeric_tolerance with linear decay,
 * set_overlap, time_decay) parsed once; per evaluation the answer is parsed
 * from its JSON text as the worker reads it (jload, jansson for what it leaves, the values in
 * an arena: common/jarena.h), scored with score_eval_prepared (the ground truth prepared once,
 * as the worker's spec cache does), printed with score_result_dumps, and everything freed.
 * 64 distinct answers rotate. Prints evaluations per second (single thread) and
 * per CPU second, and exits 1 below the 100,000/s target per CPU second (this
 * machine is shared: the wall-clock rate measures the other processes) unless
 * --no-check.
 * Usage: bench-score [seconds, default 2] [--no-check]
 */
#include "isotime.h"
#include "jarena.h"
#include "jload.h"
#include "score.h"
#include "spec.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *spec_text =
	"{\"evaluator\":\"deterministic\",\"dimensions\":["
	"{\"key\":\"correctness\",\"weight\":0.4,\"primitive\":\"exact_match_ratio\","
	" \"field\":\"answers\",\"ground_truth_field\":\"expected_answers\"},"
	"{\"key\":\"precision\",\"weight\":0.2,\"primitive\":\"numeric_tolerance\","
	" \"field\":\"estimate\",\"ground_truth_field\":\"value\",\"tolerance\":0.05,\"decay\":\"linear\"},"
	"{\"key\":\"completeness\",\"weight\":0.25,\"primitive\":\"set_overlap\","
	" \"field\":\"found\",\"ground_truth_field\":\"expected\",\"method\":\"jaccard\"},"
	"{\"key\":\"speed\",\"weight\":0.15,\"primitive\":\"time_decay\"}],"
	"\"constraints\":{\"token_budget\":200000,\"max_llm_calls\":40}}";

static const char *gt_text =
	"{\"expected_answers\":[\"B\",\"C\",\"A\",\"D\",\"B\",\"A\",\"C\",\"D\",\"A\",\"B\"],"
	"\"value\":42.5,\"expected\":[\"CVE-2024-0001\",\"CVE-2024-0002\",\"CVE-2024-0003\","
	"\"CVE-2024-0004\",\"CVE-2024-0005\",\"CVE-2024-0006\"]}";

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU time of this process: on a shared, loaded machine the wall-clock rate drops with the
 * load, the CPU-time rate much less. Both are printed. */
static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	jarena_install();   /* as the worker does, before any jansson call */
	double secs = 2.0;
	int check = 1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--no-check"))
			check = 0;
		else
			secs = atof(argv[i]);
	}
	if (!(secs > 0))
		secs = 2.0;
	struct spec *s;
	char err[256];
	if (spec_parse(spec_text, strlen(spec_text), &s, err, sizeof err) < 0) {
		fprintf(stderr, "spec: %s\n", err);
		return 2;
	}
	json_t *gt = json_loads(gt_text, 0, NULL);
	struct score_match m = { .has_times = true, .time_limit_secs = 300, .attempt_number = 1 };
	isotime_parse("2024-05-01T10:00:00Z", 20, &m.started_at_ms);
	m.submitted_at_ms = m.started_at_ms + 66000;

	enum { NANS = 64 };
	char *answers[NANS];
	static const char letters[] = "ABCD";
	for (int i = 0; i < NANS; i++) {
		struct strbuf sb = { 0 };
		strbuf_addf(&sb, "{\"answers\":[");
		for (int k = 0; k < 10; k++)
			strbuf_addf(&sb, "%s\"%c\"", k ? "," : "", letters[(i * 7 + k * 3) % 4]);
		strbuf_addf(&sb, "],\"estimate\":%d.%d,\"found\":[", 42 + i % 3, i % 10);
		for (int k = 0; k < 4 + i % 4; k++)
			strbuf_addf(&sb, "%s\"CVE-2024-%04d\"", k ? "," : "", 1 + (k + i) % 9);
		strbuf_addf(&sb, "],\"notes\":\"answer number %d\"}", i);
		answers[i] = sb.buf;
	}

	struct score_prep *prep = score_prepare(s, gt);   /* once, as the worker's spec cache */
	long n = 0;
	size_t bytes = 0;
	long checksum = 0;
	double t0 = now(), t1 = t0, c0 = cpu_now();
	while (t1 - t0 < secs) {
		for (int k = 0; k < 1000; k++, n++) {
			const char *text = answers[n % NANS];
			json_error_t je;
			struct jarena *ar = jarena_begin_for(strlen(text));   /* as the worker */
			json_t *a = jload(text, strlen(text));
			if (!a)
				a = json_loadb(text, strlen(text), JSON_DECODE_ANY, &je);
			jarena_end(ar);
			struct score_result r;
			if (!a || score_eval_prepared(prep, a, NULL, &m, NULL, NULL, &r, err, sizeof err) < 0) {
				fprintf(stderr, "evaluation failed\n");
				return 2;
			}
			char *out = score_result_dumps(&r);
			bytes += strlen(out);
			checksum += r.score;
			free(out);
			score_result_clear(&r);
			json_decref(a);
		}
		t1 = now();
	}
	double rate = (double)n / (t1 - t0), cpu_rate = (double)n / (cpu_now() - c0);
	printf("bench-score: %ld evaluations in %.3f s = %.0f evaluations/s (%.2f us each), "
	       "4 dimensions, answer parsed + score_eval + score_result_dumps; "
	       "avg output %zu bytes; checksum %ld; per CPU second: %.0f evaluations/s\n",
	       n, t1 - t0, rate, 1e6 / rate, bytes / (size_t)n, checksum, cpu_rate);
	for (int i = 0; i < NANS; i++)
		free(answers[i]);
	score_prep_free(prep);
	json_decref(gt);
	spec_free(s);
	if (check && cpu_rate < 100000) {
		printf("bench-score: below the 100,000/s target (per CPU second)\n");
		return 1;
	}
	return 0;
}
