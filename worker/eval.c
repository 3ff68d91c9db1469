/*
 * eval: the evaluate stage, from a loaded and checked job to its scoring:
 * `arbiter pause --challenge` holds, the judge lane's hand-off (a judged job
 * with no free judge slot waits in the lane), the rate limit, then the
 * evaluator: deterministic (scoring.h), the LLM judge (judging.h), or a
 * sandbox evaluator (test suite, custom script, container; marked `evaluating`
 * in the database first). A container job whose image the store lacks waits
 * for it in the delayed set (cause "image") up to ARBITER_IMAGE_WAIT_MS, then
 * fails with image_not_found. Event-loop thread only.
 */
#include "eval.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evaluator.h"
#include "image.h"
#include "isotime.h"
#include "judging.h"
#include "judgelane.h"
#include "log.h"
#include "metrics.h"
#include "opsctl.h"
#include "pgc.h"
#include "ratelimit.h"
#include "rq.h"
#include "scoring.h"
#include "util.h"

static void image_wait(struct worker *w, struct job *j, const char *why);

static void on_sandbox(int rc, const struct score_ext *ext, const char *err, void *data)
{
	struct job *j = data;
	struct worker *w = j->w;

	if (w->sp)
		metrics_sandbox_busy(sandbox_pool_busy(w->sp));
	if (j->state == JOB_ABANDONED || w->state == W_STOPPING) {
		pipeline_drop(w, j);
		return;
	}
	if (rc == EVALUATOR_IMAGE_MISSING) {
		/* Removed between the look before the mark and the run's own open: wait too. */
		image_wait(w, j, err && !strncmp(err, "image_not_found: ", 17) ? err + 17 : err);
		return;
	}
	if (rc < 0) {
		char why[600];
		snprintf(why, sizeof why, "internal_error: %s", err ? err : "evaluator failed");
		pipeline_retry(w, j, STAGE_EVAL, true, why);
		return;
	}
	if (ext && ext->extra)
		j->extra = json_deep_copy(ext->extra);
	if (spec_rubric(j->spec->spec)) {
		judging_run(w, j, ext);   /* hybrid: the judge also reads the test results */
		return;
	}
	scoring_run(w, j, ext);
}

/* The sandbox could not be set up (at start, or when last tried): try again, at most
 * once per SANDBOX_REOPEN_MS (it blocks the loop for one probe sandbox). What failed may
 * have passed (another process's cgroup clean-up, a language table being deployed); else
 * every sandboxed job of this worker would spend its attempts until it ended failed.
 * Returns 1 when the sandbox is up, 0 when the next try is not due yet, -1 when it was
 * tried and failed (w->sp_err says why). */
#define SANDBOX_REOPEN_MS 1000
static int sandbox_reopen(struct worker *w)
{
	uint64_t now = uv_now(w->loop);
	if (w->sp_retry_at && now < w->sp_retry_at)
		return 0;
	w->sp_retry_at = now + SANDBOX_REOPEN_MS;
	if (sandbox_pool_new(w->loop, w->cfg, &w->sp, w->sp_err, sizeof w->sp_err) < 0) {
		w->sp = NULL;
		LOGW(NULL, NULL, "sandbox still unavailable: %s", w->sp_err);
		return -1;
	}
	LOGI(NULL, NULL, "sandbox available again");
	return 1;
}

static void run_sandbox(struct worker *w, struct job *j)
{
	char started[32], submitted[32];
	isotime_format(j->row.started_ms, started, sizeof started);
	isotime_format(j->row.submitted_ms, submitted, sizeof submitted);
	json_t *match = json_pack("{s:s, s:s, s:i, s:b, s:i}", "started_at", started,
	                          "submitted_at", submitted, "time_limit_secs",
	                          j->row.time_limit_secs, "memoryless", j->row.memoryless,
	                          "attempt_number", j->row.attempt_number);
	job_set_state(j, JOB_EVALUATING);
	j->eval_started_ms = job_now_ms();
	j->eval_t0 = uv_hrtime();
	int rc = evaluator_run(w->sp, j->spec->spec, j->row.answer, j->row.metadata,
	                       j->spec->gt, match, on_sandbox, j);
	json_decref(match);
	if (rc < 0) {
		pipeline_retry(w, j, STAGE_EVAL, true, "internal_error: the evaluator refused the spec");
		return;
	}
	metrics_sandbox_busy(sandbox_pool_busy(w->sp));
}

static const char SQL_MARK[] =
	"UPDATE submissions SET status = 'evaluating', attempts = GREATEST(attempts, $2::int) "
	"WHERE id = $1::uuid AND status IN ('queued', 'evaluating')";

static void on_mark(const struct pgc_result *r, void *data)
{
	struct job *j = data;
	struct worker *w = j->w;
	if (j->state == JOB_ABANDONED || w->state == W_STOPPING) {
		pipeline_drop(w, j);
		return;
	}
	if (r->err) {
		char why[512];
		snprintf(why, sizeof why, "marking the submission evaluating failed: %s", r->err);
		pipeline_note_db_error(w, r);
		pipeline_retry(w, j, STAGE_EVAL, false, why);
		return;
	}
	j->marked = true;
	run_sandbox(w, j);
}

/* ---- a container job's image ------------------------------------------------------ */

/* A job waiting for its image looks again after the time it has waited so far (at least
 * the first, at most the second; jitter: half to all of it), and once more at the deadline. */
#define IMAGE_RECHECK_MIN_MS 1000
#define IMAGE_RECHECK_MAX_MS 30000

/* The store lacks j's image (why says so): before ARBITER_IMAGE_WAIT_MS has passed since
 * the job first found it missing (j->image_since_ms, carried by its entry), the entry waits
 * in the delayed set (cause "image"; no attempt is spent) and comes back to look again;
 * after it, the job fails with image_not_found (a dead-letter copy, as every failure). */
static void image_wait(struct worker *w, struct job *j, const char *why)
{
	int64_t now = job_now_ms(), limit = w->cfg->image_wait_ms;
	if (j->image_since_ms <= 0 || j->image_since_ms > now)
		j->image_since_ms = now;
	int64_t waited = now - j->image_since_ms;
	char msg[900];
	if (waited >= limit) {
		snprintf(msg, sizeof msg, "image_not_found: %s (waited %lld ms for it, "
		         "ARBITER_IMAGE_WAIT_MS=%lld)", why ? why : "", (long long)waited,
		         (long long)limit);
		pipeline_fail(w, j, msg);
		return;
	}
	uint64_t d = waited < IMAGE_RECHECK_MIN_MS ? IMAGE_RECHECK_MIN_MS : (uint64_t)waited;
	if (d > IMAGE_RECHECK_MAX_MS)
		d = IMAGE_RECHECK_MAX_MS;
	d = d / 2 + pipeline_rand(w) % (d / 2 + 1);
	if ((int64_t)d > limit - waited)
		d = (uint64_t)(limit - waited);
	snprintf(msg, sizeof msg, "waiting for the image: %s", why ? why : "");
	job_set_error(j, msg);
	LOGI(j->sub, j->id, "%s; waited %lld of %lld ms (ARBITER_IMAGE_WAIT_MS), looking again in "
	     "%llu ms", j->last_error, (long long)waited, (long long)limit, (unsigned long long)d);
	if (pipeline_park_begin(w, j, STAGE_EVAL, (uint32_t)d)) {
		opsctl_image_wait(w->ops, j, (uint32_t)d, pipeline_parked);
		return;
	}
	pipeline_wait(w, j, STAGE_EVAL, (uint32_t)d);
}

static void sandboxed(struct worker *w, struct job *j);

struct image_probe {
	uv_fs_t req;
	struct job *j;
};

static void on_image_probe(uv_fs_t *req)
{
	struct image_probe *p = req->data;
	struct job *j = p->j;
	struct worker *w = j->w;
	ssize_t res = req->result;
	uv_fs_req_cleanup(req);
	free(p);
	if (j->state == JOB_ABANDONED || w->state == W_STOPPING) {
		pipeline_drop(w, j);
		return;
	}
	if (res == UV_ENOENT || res == UV_ENOTDIR) {
		char dir[4096], why[4400];
		struct image_opts io;
		image_opts_from_config(w->cfg, &io, dir, sizeof dir);
		snprintf(why, sizeof why, "image %s is not in the image store %s (import it with "
		         "`arbiter image import`)",
		         json_string_value(json_object_get(spec_json(j->spec->spec), "image")), dir);
		image_wait(w, j, why);
		return;
	}
	/* There (or unreadable for another reason, which the evaluator's own open reports). */
	sandboxed(w, j);
}

/* A container job first looks for its image (a stat of its image.json on the thread pool:
 * the store may be slow storage), before anything is marked: a job waiting for its image
 * stays `queued`. */
static void image_probe(struct worker *w, struct job *j)
{
	char dir[4096], path[4200];
	struct image_opts io;
	image_opts_from_config(w->cfg, &io, dir, sizeof dir);
	const char *digest = json_string_value(json_object_get(spec_json(j->spec->spec), "image"));
	if (image_meta_path(&io, digest, path, sizeof path) < 0) {
		sandboxed(w, j);   /* (a valid spec names a digest: the evaluator reports it) */
		return;
	}
	struct image_probe *p = xcalloc(1, sizeof *p);
	p->j = j;
	p->req.data = p;
	if (j->state != JOB_RATELIMIT)     /* (from on_rl it is already) */
		job_set_state(j, JOB_RATELIMIT);   /* held by on_image_probe, like a rate limit check */
	int rc = uv_fs_stat(w->loop, &p->req, path, on_image_probe);
	if (rc < 0) {
		uv_fs_req_cleanup(&p->req);
		free(p);
		char why[200];
		snprintf(why, sizeof why, "looking for the image: %s", uv_strerror(rc));
		pipeline_retry(w, j, STAGE_EVAL, false, why);
	}
}

static void evaluate(struct worker *w, struct job *j)
{
	j->eval_started_ms = job_now_ms();
	j->eval_t0 = uv_hrtime();
	if (j->spec->ev == SPEC_DETERMINISTIC) {
		scoring_run(w, j, NULL);
		return;
	}
	if (j->spec->ev == SPEC_JUDGE) {
		judging_run(w, j, NULL);
		return;
	}
	if (j->spec->ev == SPEC_CONTAINER) {
		image_probe(w, j);
		return;
	}
	sandboxed(w, j);
}

/* The sandbox evaluators: the sandbox must be up; the job is marked, then run. */
static void sandboxed(struct worker *w, struct job *j)
{
	int up = w->sp ? 1 : sandbox_reopen(w);
	if (up == 0) {
		/* Only a failed set-up try counts against a job. */
		pipeline_retry(w, j, STAGE_EVAL, false, "sandbox unavailable: waiting for the next set-up try");
		return;
	}
	if (up < 0) {
		char why[320];
		snprintf(why, sizeof why, "internal_error: sandbox unavailable: %s", w->sp_err);
		pipeline_retry(w, j, STAGE_EVAL, true, why);
		return;
	}
	if (j->kind == JOB_EVALUATE && !j->marked) {
		/* A sandbox run is long: make it visible (status evaluating) and count
		 * the attempt durably before it starts. */
		char att[16];
		snprintf(att, sizeof att, "%d", j->attempts);
		const char *params[] = { j->sub, att };
		struct pgc_stmt st = { SQL_MARK, 2, params };
		job_set_state(j, JOB_MARKING);
		if (pgc_run(w->pg, &st, 1, on_mark, j) < 0)
			pipeline_retry(w, j, STAGE_EVAL, false, "database pool closed");
		return;
	}
	run_sandbox(w, j);
}

static void on_rl(enum rl_decision d, int64_t retry_at_ms, const char *err, void *data)
{
	struct job *j = data;
	struct worker *w = j->w;

	if (j->state == JOB_ABANDONED || w->state == W_STOPPING) {
		pipeline_drop(w, j);
		return;
	}
	switch (d) {
	case RL_ALLOW:
		j->rl_done = true;
		evaluate(w, j);
		return;
	case RL_DEFERRED:
		LOGI(j->sub, j->id, "rate limited: deferred until %lld", (long long)retry_at_ms);
		metrics_job(pipeline_evaluator(j), job_outcome_name(OUTCOME_DEFERRED));
		pipeline_drop(w, j);
		return;
	case RL_REJECT:
		pipeline_reject(w, j, REASON_RATE_LIMITED, NULL);
		return;
	case RL_ERROR:
	default: {
		char why[300];
		snprintf(why, sizeof why, "rate limiter: %s", err ? err : "error");
		pipeline_retry(w, j, STAGE_EVAL, false, why);
		return;
	}
	}
}

static void on_held(struct worker *w, struct job *j, bool ok)
{
	if (j->state == JOB_ABANDONED || w->state == W_STOPPING) {
		pipeline_drop(w, j);
		return;
	}
	if (ok) {
		metrics_job(pipeline_evaluator(j), job_outcome_name(OUTCOME_DEFERRED));
		pipeline_drop(w, j);
		return;
	}
	pipeline_retry(w, j, STAGE_EVAL, false, "challenge paused: the job could not be held");
}

/* Free judge slots (pipeline_judge_room), 0 while draining. */
static int judge_room(const struct worker *w)
{
	if (w->state != W_RUNNING)
		return 0;
	return pipeline_judge_room(w);
}

static void judge_admit(struct worker *w, struct job *j)
{
	pipeline_lane_release(w, j);   /* its slot was counted there */
	if (!j->judge_headed) {
		j->judge_headed = true;
		w->judge_headed++;
	}
}

static void on_diverted(int rc, void *data)
{
	struct job *j = data;
	struct worker *w = j->w;
	if (j->state == JOB_ABANDONED || w->state == W_STOPPING) {
		pipeline_drop(w, j);
		return;
	}
	if (rc >= 0) {
		/* 1: its entry waits in the lane; 0: no longer ours (someone else has it). */
		if (rc == 1)
			LOGD(j->sub, j->id, "no free judge slot: job moved to the judge lane");
		pipeline_drop(w, j);
		return;
	}
	/* Redis refused: it waits here for a judge slot, as it would without the lane. */
	judge_admit(w, j);
	eval_start(w, j);
}

/* A judged job with no free judge slot goes to the judge lane (true: on its way there).
 * A job read from the lane never goes back: it was read for a free slot, and if that slot
 * was taken meanwhile (a fresh job admitted in between) it waits here for the next.
 * Checked before the rate limit: a job sent to the lane is read from it as a new entry and
 * rate-limited then, once; after the limit it would be counted twice. So a job that passed
 * the limit already (a retry of its judge call) stays. The verdict cache is not asked
 * first: that lookup would be paid again when the job is read from the lane, while a cached
 * verdict holds a judge slot only for the lookup. */
static bool judge_lane_divert(struct worker *w, struct job *j)
{
	bool judged = j->spec && j->spec->spec && spec_rubric(j->spec->spec);
	if (j->stream == JOB_STREAM_LANE) {
		if (judged)
			judge_admit(w, j);
		else
			pipeline_lane_release(w, j);   /* (its spec no longer asks the judge) */
		return false;
	}
	if (!w->jlane || j->judge_headed || j->rl_done || j->commit_unknown || j->poison ||
	    j->nf == 0 || !judged)
		return false;
	if (!judgelane_take(w->jlane, judge_room(w)) &&
	    judgelane_divert(w->jlane, w->cfg->worker_id, j->id, j->fields, j->flens, j->nf,
	                     j->attempts, on_diverted, j) == 0) {
		job_set_state(j, JOB_RATELIMIT);   /* (held by on_diverted, like a rate limit check) */
		return true;
	}
	judge_admit(w, j);
	return false;
}

void eval_start(struct worker *w, struct job *j)
{
	if (opsctl_holds(w->ops, j)) {
		/* `arbiter pause --challenge`: back to the delayed set for a while. */
		job_set_state(j, JOB_RATELIMIT);
		opsctl_hold(w->ops, j, on_held);
		return;
	}
	if (judge_lane_divert(w, j))
		return;
	if (j->kind == JOB_EVALUATE && !j->rl_done) {
		const char *ip = j->source_ip ? j->source_ip : j->row.source_ip;
		job_set_state(j, JOB_RATELIMIT);
		if (rl_check_stream(w->rl, w->rq_cmd, pipeline_stream_key(w, j->stream), ip, false,
		                    j->id, (const char *const *)j->fields, j->nf, on_rl, j) < 0)
			pipeline_retry(w, j, STAGE_EVAL, false, "rate limiter unavailable");
		return;
	}
	evaluate(w, j);
}

