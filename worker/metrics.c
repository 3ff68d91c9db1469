/*
 * Process-wide metric registry (loop thread only, no locks) and its rendering
 * in the Prometheus text exposition format 0.0.4. Label values are mapped to
 * fixed tables so cardinality is bounded; known label combinations are always
 * rendered (as 0 before the first event) so rate() and dashboards work from
 * the first scrape, and the "other"/"unknown" rows appear once they are used.
 */
#include "metrics.h"
#include "version.h"

#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "job.h"

#define COUNTOF(a) (sizeof(a) / sizeof((a)[0]))

/* Label tables. The last entry of each is the catch-all; entries before
 * `*_KNOWN` are always rendered. */
static const char *const evaluators[] = {
	"deterministic", "test-suite", "custom-script", "judge", "unknown", "other",
};
#define EVAL_KNOWN 4
#define EVAL_UNKNOWN 4
static const char *const outcomes[] = {
	"completed", "rejected", "failed", "dead_lettered", "deferred", "duplicate", "other",
};
#define OUTCOME_KNOWN 6
static const char *const reasons[] = {
	"submission_not_found", "not_match_owner", "match_expired", "match_not_active",
	"invalid_spec", "rate_limited", "other",
};
#define REASON_KNOWN 6
static const char *const targets[] = { "redis", "postgres", "other" };
#define TARGET_KNOWN 2
static const char *const decisions[] = { "allowed", "deferred", "rejected", "error", "other" };
#define DECISION_KNOWN 4

#define NEVAL COUNTOF(evaluators)
#define NOUTCOME COUNTOF(outcomes)
#define NREASON COUNTOF(reasons)
#define NTARGET COUNTOF(targets)
#define NDECISION COUNTOF(decisions)

/* Histogram bucket upper bounds (the +Inf bucket is implicit). */
static const double eval_bounds[] = {
	0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120,
};
static const double e2e_bounds[] = {
	0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800,
};
static const double batch_bounds[] = { 1, 2, 4, 8, 16, 32, 64, 128, 256 };

#define MAX_BUCKETS 20

struct histogram {
	uint64_t buckets[MAX_BUCKETS + 1];  /* non-cumulative; last = above every bound */
	uint64_t count;
	double sum;
};

static struct {
	uint64_t jobs[NEVAL][NOUTCOME];
	uint64_t rejections[NREASON];
	uint64_t reconciled;
	uint64_t agent_lock_skips;
	uint64_t enqueued_implausible;   /* entries whose enqueued_at was not observed */
	uint64_t reconnects[NTARGET];
	uint64_t ratelimit[NDECISION];
	uint64_t ratelimit_resets;
	uint64_t standings_applied, standings_batches;
	double standings_lag;        /* valid when standings_lag_known */
	bool standings_lag_known;
	long inflight, sandbox_busy;
	long paused, paused_challenges;
	long bulk_len;
	uint64_t bulk_moved;
	long judge_lane_len;
	uint64_t judge_lane_in, judge_lane_out;
	long stream_len, lag, pending, dead;
	long delayed[4];            /* by cause: delayed_causes[] */
	long other_stream;
	struct histogram eval[NEVAL];
	struct histogram e2e;
	struct histogram batch;
	struct metrics_judge judge;
} M;

static size_t lookup(const char *const *table, size_t n, const char *v)
{
	if (v)
		for (size_t i = 0; i + 1 < n; i++)
			if (!strcmp(table[i], v))
				return i;
	return n - 1;
}

static size_t eval_index(const char *evaluator)
{
	if (!evaluator || !*evaluator || !strcmp(evaluator, "unknown"))
		return EVAL_UNKNOWN;
	for (size_t i = 0; i < EVAL_KNOWN; i++)
		if (!strcmp(evaluators[i], evaluator))
			return i;
	return NEVAL - 1;
}

static void observe(struct histogram *h, const double *bounds, size_t nb, double v)
{
	if (isnan(v))
		return;
	if (v < 0)
		v = 0;
	size_t i = 0;
	while (i < nb && v > bounds[i])
		i++;
	h->buckets[i]++;
	h->count++;
	h->sum += v;
}

void metrics_job(const char *evaluator, const char *outcome)
{
	M.jobs[eval_index(evaluator)][lookup(outcomes, NOUTCOME, outcome)]++;
}

_Static_assert(COUNTOF(e2e_bounds) + 1 == METRICS_E2E_BUCKETS, "METRICS_E2E_BUCKETS");

void metrics_totals(struct metrics_totals *out)
{
	memset(out, 0, sizeof *out);
	size_t c = lookup(outcomes, NOUTCOME, "completed"), f = lookup(outcomes, NOUTCOME, "failed");
	size_t d = lookup(outcomes, NOUTCOME, "dead_lettered"), r = lookup(outcomes, NOUTCOME, "rejected");
	for (size_t e = 0; e < NEVAL; e++) {
		out->completed += M.jobs[e][c];
		out->failed += M.jobs[e][f] + M.jobs[e][d];
		out->rejected += M.jobs[e][r];
	}
	for (size_t i = 0; i < METRICS_E2E_BUCKETS; i++)
		out->e2e[i] = M.e2e.buckets[i];
}

const double *metrics_e2e_bounds(size_t *n)
{
	*n = COUNTOF(e2e_bounds);
	return e2e_bounds;
}

void metrics_rejected(const char *reason)
{
	M.rejections[lookup(reasons, NREASON, reason)]++;
}

void metrics_eval_seconds(const char *evaluator, double secs)
{
	observe(&M.eval[eval_index(evaluator)], eval_bounds, COUNTOF(eval_bounds), secs);
}

void metrics_e2e_seconds(double secs)
{
	if (secs < 0)
		secs = 0;
	if (secs > METRICS_E2E_MAX_SECS)
		secs = METRICS_E2E_MAX_SECS;
	observe(&M.e2e, e2e_bounds, COUNTOF(e2e_bounds), secs);
}

int metrics_e2e_job(int64_t enqueued_at_ms, int64_t submitted_at_ms, int64_t now_ms)
{
	/* enqueued_at_ms is any int64 an entry carried; submitted_at_ms (SQL-clamped to
	 * +-9e15) and now_ms are real times, so the bounds below do not overflow, and the
	 * difference is taken only once enqueued_at_ms lies between them. */
	if (enqueued_at_ms < submitted_at_ms - METRICS_ENQUEUE_SKEW_MS ||
	    enqueued_at_ms > now_ms + METRICS_ENQUEUE_SKEW_MS) {
		M.enqueued_implausible++;
		return 0;
	}
	metrics_e2e_seconds((double)(now_ms - enqueued_at_ms) / 1000.0);
	return 1;
}

void metrics_inflight(int n)
{
	M.inflight = n < 0 ? 0 : n;
}

void metrics_paused(int all, int challenges)
{
	M.paused = all ? 1 : 0;
	M.paused_challenges = challenges < 0 ? 0 : challenges;
}

void metrics_bulk(long long moved, long long length)
{
	if (moved > 0)
		M.bulk_moved += (uint64_t)moved;
	M.bulk_len = length < 0 ? 0 : (long)length;
}

void metrics_judge_lane(long long to_lane, long long from_lane, long long length)
{
	if (to_lane > 0)
		M.judge_lane_in += (uint64_t)to_lane;
	if (from_lane > 0)
		M.judge_lane_out += (uint64_t)from_lane;
	if (length >= 0)
		M.judge_lane_len = (long)length;
}

void metrics_judge(const struct metrics_judge *j)
{
	M.judge = *j;
}

void metrics_sandbox_busy(int n)
{
	M.sandbox_busy = n < 0 ? 0 : n;
}

void metrics_delayed(long rate_limit, long pause, long retry, long image)
{
	long v[] = { rate_limit, pause, retry, image };
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
		if (v[i] >= 0)
			M.delayed[i] = v[i];
}

void metrics_queue(long stream_len, long lag, long pending, long dead)
{
	if (stream_len >= 0)
		M.stream_len = stream_len;
	if (lag >= 0)
		M.lag = lag;
	if (pending >= 0)
		M.pending = pending;
	if (dead >= 0)
		M.dead = dead;
}

void metrics_other_stream(long n)
{
	M.other_stream = n;
}

void metrics_reconciled(long n)
{
	if (n > 0)
		M.reconciled += (uint64_t)n;
}

void metrics_agent_lock_skip(void)
{
	M.agent_lock_skips++;
}

void metrics_reconnect(const char *what)
{
	M.reconnects[lookup(targets, NTARGET, what)]++;
}

void metrics_commit_batch(int size)
{
	observe(&M.batch, batch_bounds, COUNTOF(batch_bounds), size);
}

void metrics_ratelimit(const char *decision)
{
	M.ratelimit[lookup(decisions, NDECISION, decision)]++;
}

void metrics_ratelimit_reset(void)
{
	M.ratelimit_resets++;
}

void metrics_standings(int applied, double lag_seconds)
{
	if (applied > 0) {
		M.standings_applied += (uint64_t)applied;
		M.standings_batches++;
	}
	if (!isnan(lag_seconds)) {
		M.standings_lag = lag_seconds < 0 ? 0 : lag_seconds;
		M.standings_lag_known = true;
	}
}

void metrics_reset(void)
{
	memset(&M, 0, sizeof(M));
}

/* ---- rendering ---- */

/* Shortest text that reads back as the same double; integers without a
 * fraction or exponent; NaN/Inf in Prometheus spelling. */
static void fmt_double(char *buf, size_t n, double v)
{
	if (isnan(v)) {
		snprintf(buf, n, "NaN");
		return;
	}
	if (isinf(v)) {
		snprintf(buf, n, v > 0 ? "+Inf" : "-Inf");
		return;
	}
	if (v == floor(v) && fabs(v) < 1e15) {
		snprintf(buf, n, "%.0f", v);
		return;
	}
	for (int prec = 6; prec <= 17; prec++) {
		snprintf(buf, n, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			return;
	}
}

static void add_escaped(struct strbuf *out, const char *s, int label)
{
	for (; *s; s++) {
		if (*s == '\\')
			strbuf_addlit(out, "\\\\");
		else if (*s == '\n')
			strbuf_addlit(out, "\\n");
		else if (*s == '"' && label)
			strbuf_addlit(out, "\\\"");
		else
			strbuf_add(out, s, 1);
	}
}

/* The cause label of arbiter_delayed_jobs, in the order of metrics_delayed's arguments. */
static const char *const delayed_causes[] = { "rate_limit", "pause", "retry", "image" };

static void header(struct strbuf *out, const char *name, const char *type, const char *help)
{
	strbuf_addf(out, "# HELP %s ", name);
	add_escaped(out, help, 0);
	strbuf_addf(out, "\n# TYPE %s %s\n", name, type);
}

/* One sample line: name{k1="v1",k2="v2"} value. Labels NULL-terminated pairs. */
static void sample(struct strbuf *out, const char *name, const char *const *labels, double v)
{
	char num[64];
	strbuf_addf(out, "%s", name);
	if (labels && labels[0]) {
		strbuf_addlit(out, "{");
		for (size_t i = 0; labels[i]; i += 2) {
			if (i)
				strbuf_addlit(out, ",");
			strbuf_addf(out, "%s=\"", labels[i]);
			add_escaped(out, labels[i + 1], 1);
			strbuf_addlit(out, "\"");
		}
		strbuf_addlit(out, "}");
	}
	fmt_double(num, sizeof(num), v);
	strbuf_addf(out, " %s\n", num);
}

static void histogram_samples(struct strbuf *out, const char *name, const char *lname,
                              const char *lvalue, const struct histogram *h,
                              const double *bounds, size_t nb)
{
	char bname[128], le[64];
	const char *labels[5];
	const char *base[3];
	uint64_t cum = 0;
	size_t k = 0;

	if (lname) {
		labels[k++] = lname;
		labels[k++] = lvalue;
	}
	snprintf(bname, sizeof(bname), "%s_bucket", name);
	for (size_t i = 0; i <= nb; i++) {
		cum += h->buckets[i];
		if (i < nb)
			fmt_double(le, sizeof(le), bounds[i]);
		else
			snprintf(le, sizeof(le), "+Inf");
		labels[k] = "le";
		labels[k + 1] = le;
		labels[k + 2] = NULL;
		sample(out, bname, labels, (double)cum);
	}
	base[0] = lname;
	base[1] = lvalue;
	base[2] = NULL;
	snprintf(bname, sizeof(bname), "%s_sum", name);
	sample(out, bname, lname ? base : NULL, h->sum);
	snprintf(bname, sizeof(bname), "%s_count", name);
	sample(out, bname, lname ? base : NULL, (double)h->count);
}

static void gauge(struct strbuf *out, const char *name, const char *help, double v)
{
	header(out, name, "gauge", help);
	sample(out, name, NULL, v);
}

static void labelled_counter(struct strbuf *out, const char *name, const char *help,
                             const char *lname, const char *const *table, size_t n,
                             size_t known, const uint64_t *values)
{
	header(out, name, "counter", help);
	for (size_t i = 0; i < n; i++) {
		if (i >= known && !values[i])
			continue;
		const char *labels[] = { lname, table[i], NULL };
		sample(out, name, labels, (double)values[i]);
	}
}

/* Process start time in Unix seconds from /proc (cached), or -1. */
static double process_start_time(void)
{
	static double cached = -2;
	if (cached > -2)
		return cached;
	cached = -1;
	char buf[1024];
	FILE *f = fopen("/proc/self/stat", "r");
	if (!f)
		return cached;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')');   /* comm may contain spaces */
	if (!p)
		return cached;
	/* After ") " come fields 3..; starttime is field 22. */
	p++;
	unsigned long long start = 0;
	int field = 2;
	char *save = NULL;
	for (char *tok = strtok_r(p, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		if (++field == 22) {
			start = strtoull(tok, NULL, 10);
			break;
		}
	}
	if (field != 22)
		return cached;
	f = fopen("/proc/stat", "r");
	if (!f)
		return cached;
	unsigned long long btime = 0;
	char line[256];
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "btime %llu", &btime) == 1)
			break;
	fclose(f);
	long hz = sysconf(_SC_CLK_TCK);
	if (btime && hz > 0)
		cached = (double)btime + (double)start / (double)hz;
	return cached;
}

static void process_metrics(struct strbuf *out)
{
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		unsigned long vsz = 0, rss = 0;
		if (fscanf(f, "%lu %lu", &vsz, &rss) == 2) {
			double page = (double)sysconf(_SC_PAGESIZE);
			gauge(out, "process_resident_memory_bytes", "Resident memory size in bytes.",
			      (double)rss * page);
			gauge(out, "process_virtual_memory_bytes", "Virtual memory size in bytes.",
			      (double)vsz * page);
		}
		fclose(f);
	}
	struct rusage ru;
	if (!getrusage(RUSAGE_SELF, &ru)) {
		double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		             (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
		header(out, "process_cpu_seconds_total", "counter",
		       "Total user and system CPU time spent in seconds.");
		sample(out, "process_cpu_seconds_total", NULL, cpu);
	}
	DIR *d = opendir("/proc/self/fd");
	if (d) {
		long nfd = 0;
		struct dirent *e;
		while ((e = readdir(d)))
			if (e->d_name[0] != '.')
				nfd++;
		closedir(d);
		gauge(out, "process_open_fds", "Number of open file descriptors.", (double)(nfd - 1));
	}
	struct rlimit rl;
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY)
		gauge(out, "process_max_fds", "Maximum number of open file descriptors.",
		      (double)rl.rlim_cur);
	double st = process_start_time();
	if (st >= 0)
		gauge(out, "process_start_time_seconds",
		      "Start time of the process since unix epoch in seconds.", st);
}

/* Jobs: outcomes, rejections, evaluation and end-to-end times, commit batches. */
static void render_jobs(struct strbuf *out)
{
	header(out, "arbiter_jobs_total", "counter",
	       "Jobs finished, by evaluator and outcome.");
	for (size_t e = 0; e < NEVAL; e++)
		for (size_t o = 0; o < NOUTCOME; o++) {
			if ((e >= EVAL_KNOWN || o >= OUTCOME_KNOWN) && !M.jobs[e][o])
				continue;
			const char *labels[] = { "evaluator", evaluators[e], "outcome", outcomes[o], NULL };
			sample(out, "arbiter_jobs_total", labels, (double)M.jobs[e][o]);
		}

	labelled_counter(out, "arbiter_rejections_total",
	                 "Submissions rejected before scoring, by reason.",
	                 "reason", reasons, NREASON, REASON_KNOWN, M.rejections);

	header(out, "arbiter_evaluation_duration_seconds", "histogram",
	       "Time spent evaluating one submission, by evaluator.");
	for (size_t e = 0; e < NEVAL; e++) {
		if (e >= EVAL_KNOWN && !M.eval[e].count)
			continue;
		histogram_samples(out, "arbiter_evaluation_duration_seconds", "evaluator",
		                  evaluators[e], &M.eval[e], eval_bounds, COUNTOF(eval_bounds));
	}

	header(out, "arbiter_end_to_end_latency_seconds", "histogram",
	       "Time from enqueued_at to the committed result.");
	histogram_samples(out, "arbiter_end_to_end_latency_seconds", NULL, NULL, &M.e2e,
	                  e2e_bounds, COUNTOF(e2e_bounds));

	header(out, "arbiter_enqueued_at_implausible_total", "counter",
	       "Committed jobs whose enqueued_at was before their submission or ahead of now, "
	       "left out of arbiter_end_to_end_latency_seconds.");
	sample(out, "arbiter_enqueued_at_implausible_total", NULL, (double)M.enqueued_implausible);

	header(out, "arbiter_commit_batch_size", "histogram",
	       "Evaluations committed per database transaction.");
	histogram_samples(out, "arbiter_commit_batch_size", NULL, NULL, &M.batch,
	                  batch_bounds, COUNTOF(batch_bounds));
}

/* The queue and the process around it: gauges, reconciler, reconnects, rate limit,
 * pause, bulk lane, build. */
static void render_queue(struct strbuf *out)
{
	gauge(out, "arbiter_jobs_in_flight", "Jobs currently in flight in this process.",
	      (double)M.inflight);
	gauge(out, "arbiter_sandbox_slots_busy", "Sandbox slots currently in use.",
	      (double)M.sandbox_busy);
	gauge(out, "arbiter_stream_length", "Entries in the jobs stream (backlog plus pending).",
	      (double)M.stream_len);
	gauge(out, "arbiter_consumer_group_lag",
	      "Entries in the jobs stream not yet delivered to the consumer group.", (double)M.lag);
	gauge(out, "arbiter_consumer_group_pending",
	      "Entries delivered to the consumer group but not yet acknowledged.",
	      (double)M.pending);
	header(out, "arbiter_delayed_jobs", "gauge", "Jobs waiting in the delayed set, by cause: "
	       "rate_limit (deferred by the rate limit), pause (held by a challenge pause), retry "
	       "(a failing job waiting for its next attempt), image (a container job waiting for "
	       "its image to be imported).");
	for (size_t i = 0; i < sizeof delayed_causes / sizeof delayed_causes[0]; i++) {
		const char *labels[] = { "cause", delayed_causes[i], NULL };
		sample(out, "arbiter_delayed_jobs", labels, (double)M.delayed[i]);
	}
	gauge(out, "arbiter_dead_letter_length", "Entries in the dead-letter stream.",
	      (double)M.dead);
	gauge(out, "arbiter_other_style_stream_length",
	      "Entries in the job stream of the other key style, which no worker reads "
	      "(a producer XADDs to the wrong name).", (double)M.other_stream);

	header(out, "arbiter_reconciler_requeued_total", "counter",
	       "Queued submissions missing from Redis that the reconciler re-enqueued.");
	sample(out, "arbiter_reconciler_requeued_total", NULL, (double)M.reconciled);

	header(out, "arbiter_commit_agent_lock_skips_total", "counter",
	       "Jobs that left a commit batch because another transaction held their agent's row "
	       "(they come back within milliseconds).");
	sample(out, "arbiter_commit_agent_lock_skips_total", NULL, (double)M.agent_lock_skips);

	labelled_counter(out, "arbiter_reconnects_total",
	                 "Reconnections to Redis and PostgreSQL.",
	                 "target", targets, NTARGET, TARGET_KNOWN, M.reconnects);
	labelled_counter(out, "arbiter_ratelimit_decisions_total",
	                 "Rate-limit decisions, by decision.",
	                 "decision", decisions, NDECISION, DECISION_KNOWN, M.ratelimit);
	header(out, "arbiter_ratelimit_state_resets_total", "counter",
	       "Limiter keys found holding implausible state (not a finite time, too far ahead, "
	       "not a hash) and reset.");
	sample(out, "arbiter_ratelimit_state_resets_total", NULL, (double)M.ratelimit_resets);

	gauge(out, "arbiter_standings_lag_seconds",
	      "How far the standings projection is behind: seconds since the snapshot of its last "
	      "batch that left no committed result unapplied (NaN until known).",
	      M.standings_lag_known ? M.standings_lag : NAN);
	header(out, "arbiter_standings_applied_total", "counter",
	       "Results this process applied to the standings projection.");
	sample(out, "arbiter_standings_applied_total", NULL, (double)M.standings_applied);
	header(out, "arbiter_standings_batches_total", "counter",
	       "Standings projection transactions of this process that applied results.");
	sample(out, "arbiter_standings_batches_total", NULL, (double)M.standings_batches);

	gauge(out, "arbiter_paused", "1 while `arbiter pause` stops this worker reading jobs.",
	      (double)M.paused);
	gauge(out, "arbiter_paused_challenges", "Challenges whose jobs `arbiter pause --challenge` holds back.",
	      (double)M.paused_challenges);
	gauge(out, "arbiter_bulk_lane_length", "Jobs waiting in the bulk (re-evaluation) lane.",
	      (double)M.bulk_len);
	header(out, "arbiter_bulk_moved_total", "counter",
	       "Bulk-lane jobs this process moved to the live stream.");
	sample(out, "arbiter_bulk_moved_total", NULL, (double)M.bulk_moved);
	gauge(out, "arbiter_judge_lane_length", "Entries in the judge lane: judged jobs waiting for a judge slot, or read by a worker and not done yet.",
	      (double)M.judge_lane_len);
	header(out, "arbiter_judge_lane_moves_total", "counter",
	       "Judged jobs this process moved to the judge lane (to=lane) and read from it for a free judge slot (to=worker).");
	const char *const to_lane[] = { "to", "lane", NULL }, *const to_stream[] = { "to", "worker", NULL };
	sample(out, "arbiter_judge_lane_moves_total", to_lane, (double)M.judge_lane_in);
	sample(out, "arbiter_judge_lane_moves_total", to_stream, (double)M.judge_lane_out);
	header(out, "arbiter_build_info", "gauge",
	       "Always 1; the labels say which build runs (version: project version + git commit).");
	{
		const char *labels[] = { "version", ARBITER_VERSION, NULL };
		sample(out, "arbiter_build_info", labels, 1);
	}
}

/* The LLM judge: verdicts, requests, tokens, cost, circuits. */
static void render_judge(struct strbuf *out)
{
	header(out, "arbiter_judge_verdicts_total", "counter",
	       "LLM judge verdicts, by outcome: cached (no provider call), fresh, invalid "
	       "(no valid verdict after the repair), unavailable (provider trouble, retried later).");
	static const char *const vsrc[] = { "cached", "fresh", "invalid", "unavailable" };
	const uint64_t vval[] = { M.judge.cached, M.judge.fresh, M.judge.invalid, M.judge.unavailable };
	for (size_t i = 0; i < 4; i++) {
		const char *l[] = { "outcome", vsrc[i], NULL };
		sample(out, "arbiter_judge_verdicts_total", l, (double)vval[i]);
	}
	header(out, "arbiter_judge_requests_total", "counter",
	       "HTTP requests sent to LLM judge providers (retries and repairs included).");
	sample(out, "arbiter_judge_requests_total", NULL, (double)M.judge.requests);
	header(out, "arbiter_judge_tokens_total", "counter",
	       "Tokens the LLM judge providers reported, by direction.");
	const char *tin[] = { "direction", "in", NULL }, *tout[] = { "direction", "out", NULL };
	sample(out, "arbiter_judge_tokens_total", tin, (double)M.judge.tokens_in);
	sample(out, "arbiter_judge_tokens_total", tout, (double)M.judge.tokens_out);
	header(out, "arbiter_judge_cost_usd_total", "counter",
	       "Spend on LLM judge providers in USD, at the providers' prices (ARBITER_JUDGE_PROVIDERS).");
	sample(out, "arbiter_judge_cost_usd_total", NULL, M.judge.cost_usd);
	gauge(out, "arbiter_judge_circuits_open", "LLM judge providers whose circuit is open.",
	      (double)M.judge.circuits_open);
	gauge(out, "arbiter_judge_in_flight", "LLM judge verdicts in progress in this process.",
	      (double)M.judge.in_flight);
}

int metrics_render(struct strbuf *out)
{
	render_jobs(out);
	render_queue(out);
	render_judge(out);
	header(out, "arbiter_job_bad_transitions_total", "counter",
	       "Job state changes outside the allowed-transition table (a bug; release builds).");
	sample(out, "arbiter_job_bad_transitions_total", NULL, (double)job_bad_transitions());

	process_metrics(out);
	return 0;
}

void metrics_names(struct strbuf *out)
{
	struct strbuf r = { 0 };
	metrics_render(&r);
	for (char *line = r.buf; line && *line;) {
		char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		if (len > 7 && !strncmp(line, "# TYPE ", 7)) {
			const char *name = line + 7;
			const char *sp = memchr(name, ' ', len - 7);
			if (sp) {
				strbuf_add(out, name, (size_t)(sp - name));
				strbuf_addlit(out, "\n");
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	strbuf_free(&r);
}
