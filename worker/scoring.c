/*
 * scoring: the end of the evaluate stage: scoring a loaded job with its spec
 * (deterministic inline, or on libuv's thread pool when the inputs are large),
 * with the external scores of a sandbox evaluator or the judge's verdict, and
 * handing the result to the commit. Event-loop thread only (the thread-pool
 * part touches only the job, see scoring.c).
 */
#include "scoring.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "metrics.h"
#include "util.h"

void scoring_fill_match(const struct job *j, struct score_match *m)
{
	memset(m, 0, sizeof *m);
	m->has_times = true;
	m->started_at_ms = j->row.started_ms;
	m->submitted_at_ms = j->row.submitted_ms;
	m->time_limit_secs = j->row.time_limit_secs;
	m->memoryless = j->row.memoryless;
	m->attempt_number = j->row.attempt_number;
}

void scoring_finish(struct worker *w, struct job *j)
{
	j->has_res = true;
	j->eval_done_ms = job_now_ms();
	if (j->row.unreadable[0] && j->res.warnings)
		json_array_append_new(j->res.warnings, json_pack("{s:s, s:s, s:s}", "severity", "error",
		                      "field", "answer", "message", j->row.unreadable));
	metrics_eval_seconds(pipeline_evaluator(j), (double)(uv_hrtime() - j->eval_t0) / 1e9);
	j->res_json = score_result_dumps(&j->res);
	j->op = j->kind == JOB_EVALUATE ? OP_COMPLETE : OP_REEVAL;
	/* The inputs are not needed any more (a failed commit is retried from the
	 * result): a job waiting for its commit holds only what it writes. */
	json_decref(j->row.answer);
	json_decref(j->row.metadata);
	j->row.answer = j->row.metadata = NULL;
	LOGD(j->sub, j->id, "evaluated: score %d %s", j->res.score,
	     score_outcome_name(j->res.result));
	pipeline_to_commit(w, j);
}

/* Deterministic scoring of large inputs runs on libuv's thread pool: a
 * fuzzy_string over long texts costs up to ~0.25 s per dimension and must not
 * stall the loop. The job (state JOB_EVALUATING) is not touched by the loop
 * meanwhile; score_eval_prepared is pure and the shared spec / ground truth /
 * preparation are only read (jansson's reference counts are atomic). */
#define OFFLOAD_INPUT_BYTES 16384

struct score_work {
	uv_work_t req;
	struct job *j;
	struct score_match m;
	struct score_limits lim;
	int rc;
	char err[512];
};

static void score_work_cb(uv_work_t *req)
{
	struct score_work *sw = req->data;
	struct job *j = sw->j;
	sw->rc = score_eval_prepared(j->spec->prep, j->row.answer, j->row.metadata, &sw->m,
	                             NULL, &sw->lim, &j->res, sw->err, sizeof sw->err);
}

static void score_after_cb(uv_work_t *req, int status)
{
	struct score_work *sw = req->data;
	struct job *j = sw->j;
	struct worker *w = j->w;
	int rc = status < 0 ? -1 : sw->rc;
	char why[600];

	if (status < 0)
		snprintf(sw->err, sizeof sw->err, "%s", uv_strerror(status));
	snprintf(why, sizeof why, "internal_error: %s", sw->err);
	free(sw);
	if (rc == 0)
		j->has_res = true;     /* so that job_free / job_clear_result release it */
	if (j->state == JOB_ABANDONED || w->state == W_STOPPING) {
		pipeline_drop(w, j);
		return;
	}
	if (rc < 0) {
		pipeline_retry(w, j, STAGE_EVAL, true, why);
		return;
	}
	scoring_finish(w, j);
}

void scoring_run(struct worker *w, struct job *j, const struct score_ext *ext)
{
	struct score_match m;
	struct score_limits lim = { w->cfg->max_string_bytes, false,
	                            j->row.input_bytes + j->spec->gt_bytes };
	char err[512];

	scoring_fill_match(j, &m);
	job_clear_result(j);
	if (!ext && j->row.input_bytes + j->spec->gt_bytes > OFFLOAD_INPUT_BYTES) {
		struct score_work *sw = xcalloc(1, sizeof *sw);
		sw->req.data = sw;
		sw->j = j;
		sw->m = m;
		sw->lim = lim;
		job_set_state(j, JOB_EVALUATING);
		if (uv_queue_work(w->loop, &sw->req, score_work_cb, score_after_cb) == 0)
			return;
		free(sw);      /* cannot queue: score here */
	}
	if (score_eval_prepared(j->spec->prep, j->row.answer, j->row.metadata, &m, ext, &lim,
	                        &j->res, err, sizeof err) < 0) {
		char why[600];
		snprintf(why, sizeof why, "internal_error: %s", err);
		pipeline_retry(w, j, STAGE_EVAL, true, why);
		return;
	}
	scoring_finish(w, j);
}
