/*
 * judging: the evaluate stage's hand-off to the LLM judge (judge.h): the
 * evaluator judge, or the judge after the test suite of a hybrid spec. It
 * checks the shared spend budget ({base}:judge:spend:<period>) when
 * ARBITER_JUDGE_BUDGET is set, asks the judge, counts the job in
 * w->judge_waiting meanwhile, and scores the verdict (scoring.h). Event-loop
 * thread only.
 */
#include "judging.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "judge.h"
#include "judgelane.h"
#include "log.h"
#include "metrics.h"
#include "rq.h"
#include "scoring.h"
#include "util.h"

struct judge_job {
	struct job *j;
	size_t n;                           /* scores from the test suite (hybrid) */
	char *keys[SPEC_MAX_DIMS];
	int scores[SPEC_MAX_DIMS];
	json_t *extra, *warnings;           /* the test suite's, owned; NULL for evaluator judge */
};

static void judge_job_free(struct judge_job *jj)
{
	for (size_t i = 0; i < jj->n; i++)
		free(jj->keys[i]);
	json_decref(jj->extra);
	json_decref(jj->warnings);
	free(jj);
}

static void budget_spend(struct worker *w, double usd);

static void on_judge(int rc, const struct judge_result *res, const char *err, void *data)
{
	struct judge_job *jj = data;
	struct job *j = jj->j;
	struct worker *w = j->w;
	const struct spec *s = j->spec->spec;
	const struct rubric *r = spec_rubric(s);
	char why[900];

	w->judge_waiting--;   /* it takes an ARBITER_CONCURRENCY slot again */
	judgelane_kick(w->jlane);   /* a judge slot is free: read a job from the lane */

	if (j->state == JOB_ABANDONED || w->state == W_STOPPING) {
		judge_job_free(jj);
		pipeline_drop(w, j);
		return;
	}
	if (rc != JUDGE_OK) {
		/* Provider trouble is not the submission's fault: retried without using up an
		 * attempt. An invalid verdict or a spec that cannot be judged here is an
		 * internal_error (counted). The reason is arbiter's own words: nothing of the
		 * provider's answer goes into last_error or the dead letter. */
		snprintf(why, sizeof why, "%s: %s", rc == JUDGE_UNAVAILABLE ?
		         "judge unavailable" : "internal_error", err ? err : "judge failed");
		judge_job_free(jj);
		pipeline_retry(w, j, STAGE_EVAL, rc != JUDGE_UNAVAILABLE, why);
		return;
	}
	json_t *extra = jj->extra ? json_deep_copy(jj->extra) : json_object();
	json_t *jd = rubric_result_json(r, &res->v);
	json_object_set_new(jd, "verdict_key", json_string(res->key));
	json_object_set_new(jd, "cached", json_boolean(res->cached));
	json_object_set_new(jd, "calls", json_integer(res->calls));
	json_object_set_new(jd, "tokens_in", json_integer(res->tokens_in));
	json_object_set_new(jd, "tokens_out", json_integer(res->tokens_out));
	json_object_set_new(jd, "cost_usd", json_real(res->cost_usd));
	json_object_set_new(extra, "judge", jd);
	struct rubric_ext re;
	rubric_ext_merge(r, &res->v, jj->n, (const char *const *)jj->keys, jj->scores, &re);
	struct score_ext ext = { re.n, re.keys, re.scores, extra, jj->warnings };
	struct score_match m;
	struct score_limits lim = { w->cfg->max_string_bytes, false, 0 };
	char e2[512];
	scoring_fill_match(j, &m);
	job_clear_result(j);
	json_decref(j->extra);
	j->extra = extra;
	int src = score_eval_prepared(j->spec->prep, j->row.answer, j->row.metadata, &m, &ext, &lim,
	                              &j->res, e2, sizeof e2);
	if (src < 0) {
		judge_job_free(jj);
		snprintf(why, sizeof why, "internal_error: %s", e2);
		pipeline_retry(w, j, STAGE_EVAL, true, why);
		return;
	}
	judge_job_free(jj);
	/* Each judged dimension keeps its criterion, the judge's 0-100 score and reasoning. */
	rubric_annotate(r, &res->v, j->res.dims, j->res.ndims);
	/* A verdict not stored yet is written by the commit, with the result. */
	j->judge_row = judge_row(r, res);
	if (j->judge_row)
		snprintf(j->judge_key, sizeof j->judge_key, "%s", res->key);
	if (res->calls > 0)
		budget_spend(w, res->cost_usd);
	scoring_finish(w, j);
}

/* The spend key of the current budget period: <base>:judge:spend:<period start, Unix s>. */
static void budget_key(const struct worker *w, char *buf, size_t n)
{
	int64_t now = job_now_ms() / 1000;
	snprintf(buf, n, "%s:spend:%lld", w->k_judge,
	         (long long)(now - now % w->judge_budget_period_s));
}

/* Adds a fresh verdict's cost to the shared spend (fire and forget). */
static void budget_spend(struct worker *w, double usd)
{
	if (w->judge_budget_usd <= 0 || usd <= 0 || !w->rq_cmd)
		return;
	char k[300], v[40], ttl[24];
	budget_key(w, k, sizeof k);
	snprintf(v, sizeof v, "%.9f", usd);
	snprintf(ttl, sizeof ttl, "%d", 2 * w->judge_budget_period_s);
	const char *a1[] = { "INCRBYFLOAT", k, v }, *a2[] = { "EXPIRE", k, ttl };
	rq_cmdv(w->rq_cmd, 0, NULL, NULL, 3, a1, NULL);
	rq_cmdv(w->rq_cmd, 0, NULL, NULL, 3, a2, NULL);
}

static void judge_go(struct worker *w, struct job *j, struct judge_job *jj);

static void on_budget(struct rq *r, redisReply *reply, const char *err, void *data)
{
	(void)r;
	struct judge_job *jj = data;
	struct job *j = jj->j;
	struct worker *w = j->w;
	char why[300];
	if (j->state == JOB_ABANDONED || w->state == W_STOPPING) {
		judge_job_free(jj);
		pipeline_drop(w, j);
		return;
	}
	if (!reply || reply->type == REDIS_REPLY_ERROR) {
		snprintf(why, sizeof why, "judge budget: redis: %s", err ? err : reply->str);
		judge_job_free(jj);
		pipeline_retry(w, j, STAGE_EVAL, false, why);
		return;
	}
	double spent = reply->type == REDIS_REPLY_STRING ? strtod(reply->str, NULL) : 0;
	if (spent >= w->judge_budget_usd) {
		/* Deferred, not failed: the job waits (not counted) until the next period. */
		snprintf(why, sizeof why, "judge budget exhausted: %.4f of %.4f USD this %s", spent,
		         w->judge_budget_usd, w->judge_budget_period_s == 3600 ? "hour" : "day");
		metrics_job(pipeline_evaluator(j), "deferred");
		judge_job_free(jj);
		pipeline_retry(w, j, STAGE_EVAL, false, why);
		return;
	}
	judge_go(w, j, jj);
}

void judging_run(struct worker *w, struct job *j, const struct score_ext *ext)
{
	struct judge_job *jj = xcalloc(1, sizeof *jj);
	jj->j = j;
	for (size_t i = 0; ext && i < ext->n && i < SPEC_MAX_DIMS; i++, jj->n++) {
		jj->keys[i] = xstrdup(ext->keys[i]);
		jj->scores[i] = ext->scores[i];
	}
	if (ext && ext->extra)
		jj->extra = json_deep_copy(ext->extra);
	if (ext && ext->warnings)
		jj->warnings = json_deep_copy(ext->warnings);
	job_set_state(j, JOB_EVALUATING);
	if (w->judge_budget_usd > 0) {
		char k[300];
		budget_key(w, k, sizeof k);
		const char *argv[] = { "GET", k };
		if (rq_cmdv(w->rq_cmd, 0, on_budget, jj, 2, argv, NULL) == 0)
			return;
		judge_job_free(jj);
		pipeline_retry(w, j, STAGE_EVAL, false, "judge budget: redis unavailable");
		return;
	}
	judge_go(w, j, jj);
}

static void judge_go(struct worker *w, struct job *j, struct judge_job *jj)
{
	const char *rj = job_field(j, "rejudge");
	if (j->judge_headed) {   /* from here on it counts in judge_waiting */
		j->judge_headed = false;
		w->judge_headed--;
	}
	if (judge_run(w->judge, spec_rubric(j->spec->spec), j->row.answer,
	              jj->extra ? json_object_get(jj->extra, "tests") : NULL, j->id,
	              rj && !strcmp(rj, "1"), on_judge, jj) < 0) {
		judge_job_free(jj);
		pipeline_retry(w, j, STAGE_EVAL, false, "judge unavailable: the judge client is closed");
		return;
	}
	w->judge_waiting++;
	pipeline_kick(w);   /* its ARBITER_CONCURRENCY slot is free while it waits: read more */
}
