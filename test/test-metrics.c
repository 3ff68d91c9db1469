/*
 * Tests for worker/metrics: counters, gauges and histograms move as recorded,
 * label values are bounded to known sets, and the rendering is valid
 * Prometheus text exposition 0.0.4 (every sample belongs to a family declared
 * with # HELP and # TYPE, histogram buckets are cumulative and end in +Inf).
 */
#undef NDEBUG
#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "tap.h"
#include "util.h"

static char *render(void)
{
	struct strbuf sb = { 0 };
	is_int(metrics_render(&sb), 0, "metrics_render returns 0");
	return sb.buf;
}

/* Value of the sample line that starts with `key ` (name plus labels), or NAN. */
static double value_of(const char *text, const char *key)
{
	size_t kl = strlen(key);
	for (const char *p = text; p && *p;) {
		if (!strncmp(p, key, kl) && p[kl] == ' ')
			return strtod(p + kl + 1, NULL);
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return NAN;
}

static bool name_char(char c, bool first)
{
	return isalpha((unsigned char)c) || c == '_' || c == ':' || (!first && isdigit((unsigned char)c));
}

/* A strict check of the exposition format. Returns NULL or a description. */
static const char *check_format(const char *text, char *why, size_t n)
{
	char family[128] = "", ftype[32] = "";
	bool have_help = false;
	int lineno = 0;
	double last_bucket = -1;

	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n');
		if (!nl) {
			snprintf(why, n, "last line has no newline");
			return why;
		}
		char line[1024];
		size_t len = (size_t)(nl - p);
		if (len >= sizeof(line)) {
			snprintf(why, n, "line %d too long", lineno);
			return why;
		}
		memcpy(line, p, len);
		line[len] = 0;
		lineno++;
		p = nl + 1;

		if (!strncmp(line, "# HELP ", 7)) {
			if (sscanf(line + 7, "%127s", family) != 1) {
				snprintf(why, n, "line %d: bad HELP", lineno);
				return why;
			}
			have_help = true;
			ftype[0] = 0;
			continue;
		}
		if (!strncmp(line, "# TYPE ", 7)) {
			char name[128];
			if (sscanf(line + 7, "%127s %31s", name, ftype) != 2 || strcmp(name, family) ||
			    !have_help) {
				snprintf(why, n, "line %d: TYPE without matching HELP", lineno);
				return why;
			}
			if (strcmp(ftype, "counter") && strcmp(ftype, "gauge") && strcmp(ftype, "histogram")) {
				snprintf(why, n, "line %d: unknown type %s", lineno, ftype);
				return why;
			}
			last_bucket = -1;
			continue;
		}
		if (line[0] == '#') {
			snprintf(why, n, "line %d: stray comment", lineno);
			return why;
		}
		/* sample: name[{labels}] value */
		size_t i = 0;
		if (!name_char(line[0], true)) {
			snprintf(why, n, "line %d: bad metric name", lineno);
			return why;
		}
		while (name_char(line[i], i == 0))
			i++;
		char name[128];
		memcpy(name, line, i);
		name[i] = 0;
		bool ok_name = !strcmp(name, family);
		if (!strcmp(ftype, "histogram")) {
			size_t fl = strlen(family);
			ok_name = !strncmp(name, family, fl) &&
			          (!strcmp(name + fl, "_bucket") || !strcmp(name + fl, "_sum") ||
			           !strcmp(name + fl, "_count"));
		}
		if (!ok_name || !ftype[0]) {
			snprintf(why, n, "line %d: sample %s outside its family %s", lineno, name, family);
			return why;
		}
		char le[64] = "";
		if (line[i] == '{') {
			i++;
			for (;;) {
				size_t ls = i;
				while (name_char(line[i], i == ls))
					i++;
				if (i == ls || line[i] != '=' || line[i + 1] != '"') {
					snprintf(why, n, "line %d: bad label", lineno);
					return why;
				}
				bool is_le = (i - ls == 2 && !strncmp(line + ls, "le", 2));
				i += 2;
				size_t vs = i;
				while (line[i] && line[i] != '"') {
					if (line[i] == '\\') {
						if (line[i + 1] != '\\' && line[i + 1] != '"' && line[i + 1] != 'n') {
							snprintf(why, n, "line %d: bad escape", lineno);
							return why;
						}
						i++;
					}
					i++;
				}
				if (line[i] != '"') {
					snprintf(why, n, "line %d: unterminated label value", lineno);
					return why;
				}
				if (is_le && i - vs < sizeof(le)) {
					memcpy(le, line + vs, i - vs);
					le[i - vs] = 0;
				}
				i++;
				if (line[i] == ',') {
					i++;
					continue;
				}
				if (line[i] == '}') {
					i++;
					break;
				}
				snprintf(why, n, "line %d: bad label list", lineno);
				return why;
			}
		}
		if (line[i] != ' ') {
			snprintf(why, n, "line %d: no space before value", lineno);
			return why;
		}
		char *end;
		double v = strtod(line + i + 1, &end);
		if (*end || end == line + i + 1) {
			snprintf(why, n, "line %d: bad value", lineno);
			return why;
		}
		if (le[0]) {
			if (v < last_bucket) {
				snprintf(why, n, "line %d: buckets not cumulative", lineno);
				return why;
			}
			last_bucket = !strcmp(le, "+Inf") ? -1 : v;
		}
	}
	return NULL;
}

int main(void)
{
	char why[256];
	char *t;

	metrics_reset();
	t = render();
	ok(strstr(t, "# HELP arbiter_jobs_total ") != NULL, "jobs_total has HELP");
	ok(strstr(t, "# TYPE arbiter_jobs_total counter\n") != NULL, "jobs_total is a counter");
	is_int(value_of(t, "arbiter_jobs_total{evaluator=\"deterministic\",outcome=\"completed\"}"), 0,
	       "known series present at 0 before any job");
	ok(isnan(value_of(t, "arbiter_jobs_total{evaluator=\"other\",outcome=\"completed\"}")),
	   "catch-all series absent until used");
	is_str(check_format(t, why, sizeof(why)), NULL, "fresh exposition is well-formed");
	free(t);

	metrics_job("deterministic", "completed");
	metrics_job("deterministic", "completed");
	metrics_job("test-suite", "failed");
	metrics_job("javascript-thing", "completed");
	metrics_job(NULL, "rejected");
	metrics_job("custom-script", "exploded");
	metrics_rejected("match_expired");
	metrics_rejected("rate_limited");
	metrics_rejected("bogus\"reason\n");
	metrics_eval_seconds("deterministic", 0.003);
	metrics_eval_seconds("deterministic", 0.005);   /* on a bound: counted in le="0.005" */
	metrics_eval_seconds("deterministic", 1000);    /* beyond every bound */
	metrics_eval_seconds("deterministic", NAN);     /* ignored */
	metrics_e2e_seconds(0.2);
	metrics_e2e_seconds(1.79e9);   /* enqueued_at far in the past (#16): clamped */
	/* #22: an enqueued_at that cannot be the enqueue time is counted, not observed. The
	 * submission was submitted at S, the worker's clock reads N (Unix ms). */
	{
		const int64_t S = 1790000000000LL, N = S + 5000, SK = METRICS_ENQUEUE_SKEW_MS;
		is_int(metrics_e2e_job(1, S, N), 0, "enqueued_at 1 (1970): implausible");
		is_int(metrics_e2e_job(0, S, N), 0, "enqueued_at 0: implausible");
		is_int(metrics_e2e_job(INT64_MIN, S, N), 0, "enqueued_at INT64_MIN: implausible");
		is_int(metrics_e2e_job(INT64_MAX, S, N), 0, "enqueued_at INT64_MAX: implausible");
		is_int(metrics_e2e_job(S - SK - 1, S, N), 0, "just beyond the skew before submitted_at");
		is_int(metrics_e2e_job(N + SK + 1, S, N), 0, "just beyond the skew ahead of now");
		is_int(metrics_e2e_job(S - SK, S, N), 1, "skew before submitted_at: observed");
		is_int(metrics_e2e_job(N + SK, S, N), 1, "skew ahead of now: observed (as 0 s)");
	}
	metrics_inflight(7);
	metrics_sandbox_busy(3);
	metrics_queue(10, 4, 2, 1);
	metrics_queue(11, -1, -1, -1);
	metrics_delayed(5, 2, 1, 4);
	metrics_delayed(-1, 3, -1, -1);
	metrics_reconciled(3);
	metrics_reconciled(-5);
	metrics_reconnect("redis");
	metrics_reconnect("postgres");
	metrics_reconnect("postgres");
	metrics_reconnect("mysql");
	metrics_commit_batch(5);
	metrics_ratelimit("allowed");
	metrics_ratelimit("deferred");
	metrics_ratelimit("deferred");

	t = render();
	is_str(check_format(t, why, sizeof(why)), NULL, "exposition after events is well-formed");
	is_int(value_of(t, "arbiter_jobs_total{evaluator=\"deterministic\",outcome=\"completed\"}"), 2,
	       "completed deterministic jobs counted");
	is_int(value_of(t, "arbiter_jobs_total{evaluator=\"test-suite\",outcome=\"failed\"}"), 1,
	       "failed test-suite job counted");
	is_int(value_of(t, "arbiter_jobs_total{evaluator=\"other\",outcome=\"completed\"}"), 1,
	       "unknown evaluator folded into other");
	is_int(value_of(t, "arbiter_jobs_total{evaluator=\"unknown\",outcome=\"rejected\"}"), 1,
	       "NULL evaluator counted as unknown");
	is_int(value_of(t, "arbiter_jobs_total{evaluator=\"custom-script\",outcome=\"other\"}"), 1,
	       "unknown outcome folded into other");
	is_int(value_of(t, "arbiter_rejections_total{reason=\"match_expired\"}"), 1, "rejection reason");
	is_int(value_of(t, "arbiter_rejections_total{reason=\"rate_limited\"}"), 1, "rate_limited reason");
	is_int(value_of(t, "arbiter_rejections_total{reason=\"other\"}"), 1,
	       "hostile reason folded into other (never rendered raw)");
	ok(!strstr(t, "bogus"), "raw unknown label value never appears");

	is_int(value_of(t, "arbiter_evaluation_duration_seconds_bucket{evaluator=\"deterministic\",le=\"0.001\"}"), 0,
	       "bucket below the observations");
	is_int(value_of(t, "arbiter_evaluation_duration_seconds_bucket{evaluator=\"deterministic\",le=\"0.005\"}"), 2,
	       "le bucket is inclusive and cumulative");
	is_int(value_of(t, "arbiter_evaluation_duration_seconds_bucket{evaluator=\"deterministic\",le=\"120\"}"), 2,
	       "large value not in the last finite bucket");
	is_int(value_of(t, "arbiter_evaluation_duration_seconds_bucket{evaluator=\"deterministic\",le=\"+Inf\"}"), 3,
	       "+Inf bucket counts all");
	is_int(value_of(t, "arbiter_evaluation_duration_seconds_count{evaluator=\"deterministic\"}"), 3,
	       "histogram count (NaN ignored)");
	ok(fabs(value_of(t, "arbiter_evaluation_duration_seconds_sum{evaluator=\"deterministic\"}") - 1000.008) < 1e-9,
	   "histogram sum");
	ok(strstr(t, "arbiter_evaluation_duration_seconds_sum{evaluator=\"deterministic\"} 1000.008\n") != NULL,
	   "sum printed as shortest round-trip decimal");
	is_int(value_of(t, "arbiter_end_to_end_latency_seconds_bucket{le=\"0.25\"}"), 2, "e2e bucket");
	is_int(value_of(t, "arbiter_end_to_end_latency_seconds_bucket{le=\"0.1\"}"), 1,
	       "e2e lower bucket (the enqueued_at ahead of now, as 0 s)");
	ok(value_of(t, "arbiter_end_to_end_latency_seconds_sum") <= METRICS_E2E_MAX_SECS + 65.2 + 1e-9,
	   "e2e sum: a far-past enqueued_at counts at most METRICS_E2E_MAX_SECS (sum %g)",
	   value_of(t, "arbiter_end_to_end_latency_seconds_sum"));
	is_int(value_of(t, "arbiter_end_to_end_latency_seconds_count"), 4, "e2e count");
	is_int(value_of(t, "arbiter_enqueued_at_implausible_total"), 6, "implausible enqueued_at counted");
	is_int(value_of(t, "arbiter_commit_batch_size_bucket{le=\"4\"}"), 0, "batch below");
	is_int(value_of(t, "arbiter_commit_batch_size_bucket{le=\"8\"}"), 1, "batch bucket");
	is_int(value_of(t, "arbiter_commit_batch_size_count"), 1, "batch count");

	is_int(value_of(t, "arbiter_jobs_in_flight"), 7, "in-flight gauge");
	is_int(value_of(t, "arbiter_sandbox_slots_busy"), 3, "sandbox gauge");
	is_int(value_of(t, "arbiter_stream_length"), 11, "stream length updated");
	is_int(value_of(t, "arbiter_consumer_group_lag"), 4, "negative lag leaves the gauge");
	is_int(value_of(t, "arbiter_consumer_group_pending"), 2, "pending gauge");
	is_int(value_of(t, "arbiter_delayed_jobs{cause=\"rate_limit\"}"), 5, "delayed: rate limit");
	is_int(value_of(t, "arbiter_delayed_jobs{cause=\"pause\"}"), 3, "delayed: pause holds");
	is_int(value_of(t, "arbiter_delayed_jobs{cause=\"retry\"}"), 1, "delayed: retries");
	is_int(value_of(t, "arbiter_delayed_jobs{cause=\"image\"}"), 4, "delayed: image waits");
	is_int(value_of(t, "arbiter_dead_letter_length"), 1, "dead gauge");
	is_int(value_of(t, "arbiter_reconciler_requeued_total"), 3, "reconciler counter ignores negatives");
	is_int(value_of(t, "arbiter_reconnects_total{target=\"redis\"}"), 1, "redis reconnect");
	is_int(value_of(t, "arbiter_reconnects_total{target=\"postgres\"}"), 2, "postgres reconnects");
	is_int(value_of(t, "arbiter_reconnects_total{target=\"other\"}"), 1, "other target");
	is_int(value_of(t, "arbiter_ratelimit_decisions_total{decision=\"allowed\"}"), 1, "allowed");
	is_int(value_of(t, "arbiter_ratelimit_decisions_total{decision=\"deferred\"}"), 2, "deferred");
	is_int(value_of(t, "arbiter_ratelimit_decisions_total{decision=\"rejected\"}"), 0, "rejected at 0");
	ok(value_of(t, "process_resident_memory_bytes") > 0, "resident memory reported");
	ok(value_of(t, "process_open_fds") >= 3, "open fds reported");
	ok(value_of(t, "process_start_time_seconds") > 1.6e9, "start time is a Unix time");
	free(t);

	struct strbuf names = { 0 };
	metrics_names(&names);
	const char *want[] = {
		"arbiter_jobs_total", "arbiter_rejections_total", "arbiter_evaluation_duration_seconds",
		"arbiter_end_to_end_latency_seconds", "arbiter_jobs_in_flight",
		"arbiter_sandbox_slots_busy", "arbiter_stream_length", "arbiter_consumer_group_lag",
		"arbiter_consumer_group_pending", "arbiter_delayed_jobs", "arbiter_dead_letter_length",
		"arbiter_reconciler_requeued_total", "arbiter_commit_agent_lock_skips_total",
		"arbiter_reconnects_total",
		"arbiter_enqueued_at_implausible_total",
		"arbiter_commit_batch_size", "arbiter_ratelimit_decisions_total",
		"process_resident_memory_bytes",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		char line[128];
		snprintf(line, sizeof(line), "%s\n", want[i]);
		ok(names.buf && strstr(names.buf, line) != NULL, "metrics_names lists %s", want[i]);
	}
	strbuf_free(&names);

	/* Many observations keep counts exact. */
	metrics_reset();
	for (int i = 0; i < 100000; i++)
		metrics_job("deterministic", "completed");
	t = render();
	is_int(value_of(t, "arbiter_jobs_total{evaluator=\"deterministic\",outcome=\"completed\"}"), 100000,
	       "large counts exact");
	is_int(value_of(t, "arbiter_jobs_in_flight"), 0, "reset zeroes gauges");
	free(t);

	/* The standings projection: counters add up, a batch counts only with results, the lag
	 * gauge is NaN until known and keeps its value when a call brings none. */
	metrics_reset();
	t = render();
	ok(isnan(value_of(t, "arbiter_standings_lag_seconds")), "standings lag NaN until known");
	free(t);
	metrics_standings(120, 0.25);
	metrics_standings(0, NAN);
	metrics_standings(30, -0.5);
	t = render();
	is_str(check_format(t, why, sizeof(why)), NULL, "standings exposition is well-formed");
	is_int(value_of(t, "arbiter_standings_applied_total"), 150, "standings results applied");
	is_int(value_of(t, "arbiter_standings_batches_total"), 2, "standings batches that applied");
	ok(value_of(t, "arbiter_standings_lag_seconds") == 0, "a negative lag (clock skew) shows 0");
	ok(strstr(t, "# TYPE arbiter_standings_lag_seconds gauge\n") != NULL, "standings lag is a gauge");
	free(t);
	metrics_standings(0, 1.5);
	t = render();
	ok(value_of(t, "arbiter_standings_lag_seconds") == 1.5, "standings lag follows the last answer");
	free(t);

	/* The LLM judge's counters. */
	struct metrics_judge mj = { 3, 2, 1, 4, 9, 12000, 800, 0.5, 1, 7 };
	metrics_judge(&mj);
	metrics_job("judge", "completed");
	t = render();
	is_str(check_format(t, why, sizeof(why)), NULL, "judge exposition is well-formed");
	is_int(value_of(t, "arbiter_judge_verdicts_total{outcome=\"cached\"}"), 3, "cached verdicts");
	is_int(value_of(t, "arbiter_judge_verdicts_total{outcome=\"unavailable\"}"), 4,
	       "unavailable verdicts");
	is_int(value_of(t, "arbiter_judge_tokens_total{direction=\"in\"}"), 12000, "tokens in");
	is_int(value_of(t, "arbiter_judge_requests_total"), 9, "requests");
	is_int(value_of(t, "arbiter_judge_in_flight"), 7, "in flight");
	is_int(value_of(t, "arbiter_jobs_total{evaluator=\"judge\",outcome=\"completed\"}"), 1,
	       "evaluator label judge");
	free(t);
	return tap_done();
}
