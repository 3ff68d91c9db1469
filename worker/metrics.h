/*
 * Process-wide metric registry and its Prometheus text rendering (exposition
 * format 0.0.4). Every function here runs on the loop thread only: there are
 * no locks. Label values come from fixed, known sets so the number of series
 * stays bounded: an unknown evaluator, outcome, reason, target or decision is
 * counted under "other" (NULL or "" under "unknown" for the evaluator).
 *
 * Exported families (names per Prometheus conventions):
 *   arbiter_jobs_total{evaluator,outcome}            counter
 *   arbiter_rejections_total{reason}                 counter
 *   arbiter_evaluation_duration_seconds{evaluator}   histogram
 *   arbiter_end_to_end_latency_seconds               histogram
 *   arbiter_commit_batch_size                        histogram
 *   arbiter_jobs_in_flight, arbiter_sandbox_slots_busy, arbiter_stream_length,
 *   arbiter_consumer_group_lag, arbiter_consumer_group_pending,
 *   arbiter_delayed_jobs, arbiter_dead_letter_length gauges
 *   arbiter_reconciler_requeued_total                counter
 *   arbiter_reconnects_total{target}                 counter
 *   arbiter_ratelimit_decisions_total{decision}      counter
 *   arbiter_ratelimit_state_resets_total             counter
 *   arbiter_standings_lag_seconds gauge, arbiter_standings_applied_total and
 *   arbiter_standings_batches_total counters (the standings projection)
 *   arbiter_build_info{version}, process_* (resident memory, CPU, fds, start)
 */
#ifndef ARBITER_METRICS_H
#define ARBITER_METRICS_H

#include "util.h"

/* Counts one finished job. evaluator: deterministic, test-suite, custom-script
 * (NULL/"" → "unknown"); outcome: completed, rejected, failed, dead_lettered,
 * deferred, duplicate. Strings are not retained. */
void metrics_job(const char *evaluator, const char *outcome);
/* Counts one rejection by reason: the reasons of worker/README.md "Validation before scoring" (submission_not_found,
 * not_match_owner, match_expired, match_not_active, invalid_spec) and
 * rate_limited. */
void metrics_rejected(const char *reason);
/* Observes the time an evaluator took (histogram, seconds, label evaluator). */
void metrics_eval_seconds(const char *evaluator, double secs);
/* Longest end-to-end latency observed, in seconds (one day): an entry's
 * enqueued_at comes from the API server, and one far in the past must not
 * skew the histogram's sum. */
#define METRICS_E2E_MAX_SECS 86400.0

/* Observes enqueued_at → commit latency (histogram, seconds), clamped into
 * [0, METRICS_E2E_MAX_SECS]; NaN is ignored. */
void metrics_e2e_seconds(double secs);
/* How far an entry's enqueued_at may be ahead of the submission's submitted_at's
 * lower bound or of the worker's clock: the API server's, PostgreSQL's and the
 * worker's clocks may differ by this much. */
#define METRICS_ENQUEUE_SKEW_MS 60000

/* One committed job's end-to-end latency: enqueued_at_ms (the entry's enqueued_at,
 * Unix ms) to now_ms. A value before submitted_at_ms (the submission's submitted_at) −
 * METRICS_ENQUEUE_SKEW_MS, or after now_ms + METRICS_ENQUEUE_SKEW_MS, cannot be when the
 * job was enqueued: it is not observed but counted in
 * arbiter_enqueued_at_implausible_total. Returns 1 when observed, 0 when counted. */
int metrics_e2e_job(int64_t enqueued_at_ms, int64_t submitted_at_ms, int64_t now_ms);
/* Gauge: jobs in flight in this process. */
void metrics_inflight(int n);
/* Gauge: sandbox slots in use. */
void metrics_sandbox_busy(int n);
/* The pause switches as this worker sees them (gauges arbiter_paused, arbiter_paused_challenges). */
void metrics_paused(int all, int challenges);
/* The bulk lane: jobs moved to the live stream (added up), its current length. */
void metrics_bulk(long long moved, long long length);

/* The judge lane (judgelane.h): jobs moved to it and read from it by this process (added up),
 * its length last seen (negative = unknown, kept). */
void metrics_judge_lane(long long to_lane, long long from_lane, long long length);
/* LLM judge counters and gauges (worker/judge.h judge_stats), set as a whole. */
#include <stdint.h>
struct metrics_judge {
	uint64_t cached, fresh, invalid, unavailable, requests, tokens_in, tokens_out;
	double cost_usd;
	int circuits_open, in_flight;
};
void metrics_judge(const struct metrics_judge *j);
/* Queue gauges: XLEN of {prefix}:jobs, the group's lag and pending count,
 * XLEN of {prefix}:dead. A negative value means "unknown this time" and leaves
 * that gauge unchanged. */
void metrics_queue(long stream_len, long lag, long pending, long dead);
/* Gauge arbiter_delayed_jobs{cause}: the members of {prefix}:delayed by cause
 * (rl_lua_delayed_causes): rate-limit deferrals, challenge-pause holds, retries of
 * failing jobs, container jobs waiting for their image. A negative value leaves that
 * series unchanged. */
void metrics_delayed(long rate_limit, long pause, long retry, long image);
/* Gauge arbiter_other_style_stream_length: entries in the job stream of the other
 * key style (rkeys_other_jobs), which no worker of this deployment reads. */
void metrics_other_stream(long n);
/* Counter: submissions the reconciler re-enqueued (adds n, n ≥ 0). */
void metrics_reconciled(long n);
/* Counter: one job left its commit batch because another transaction held its agent's row. */
void metrics_agent_lock_skip(void);
/* Counter: one reconnect of "redis" or "postgres". */
void metrics_reconnect(const char *what);
/* Observes the number of evaluations committed in one transaction. */
void metrics_commit_batch(int size);
/* The standings projection (standings_apply.h): adds applied results (a positive
 * count also counts one batch) and sets the lag gauge (NaN leaves it unchanged). */
void metrics_standings(int applied, double lag_seconds);
/* Counter: one rate-limit decision: allowed, deferred, rejected (or error). */
void metrics_ratelimit(const char *decision);
/* Counts one limiter key whose implausible state the rate-limit script reset
 * (worker/README.md "Rate limiting"). */
void metrics_ratelimit_reset(void);
/* The end-to-end latency histogram's buckets: METRICS_E2E_BUCKETS - 1 upper bounds in
 * seconds (metrics_e2e_bounds) and one above them all. */
#define METRICS_E2E_BUCKETS 17

/* What the worker's stats stream (opsctl_stats) carries, as totals since the process
 * started: jobs completed, failed (failed and dead-lettered) and rejected, and the
 * end-to-end latency histogram's bucket counts (not cumulative). */
struct metrics_totals {
	uint64_t completed, failed, rejected;
	uint64_t e2e[METRICS_E2E_BUCKETS];
};

/* Fills *out from the counters. */
void metrics_totals(struct metrics_totals *out);

/* The end-to-end histogram's upper bounds in seconds; *n gets METRICS_E2E_BUCKETS - 1. */
const double *metrics_e2e_bounds(size_t *n);

/* Appends the whole exposition (# HELP, # TYPE, samples) to out. Returns 0. */
int  metrics_render(struct strbuf *out);

/* Settings and helpers for tests and tools. */

/* Appends the metric family names that metrics_render exports, one per line
 * (histograms as their base name). Used by `arbiter metrics-names` and the
 * deploy test that cross-checks dashboards against the binary. */
void metrics_names(struct strbuf *out);
/* Zeroes every metric (tests only). */
void metrics_reset(void);

#endif
