/*
 * commit: the exactly-once commit of sql/README.md, for many jobs per
 * transaction.
 *
 * A batch is one reserved connection and two pipelined round trips:
 *   1. BEGIN; lock the batch's agents (FOR NO KEY UPDATE, ascending id), then
 *      its submissions (same, ascending id) and read, under those locks, each
 *      submission's status and match status and, for reevaluations, the
 *      original result and what the match's Elo change is now.
 *   2. cplan.c decides from those rows (duplicates, Elo in batch order: an
 *      agent seen twice is updated twice, in order; see cplan.h for the
 *      ordering rules); this file turns the plan into one statement per kind
 *      of write (data-modifying CTEs over jsonb_to_recordset: results,
 *      dimensions, matches, elo_history, submissions), the agents' final
 *      rows, COMMIT.
 * Every writer locks agents before submissions, and always in ascending id
 * order, so batches from any number of replicas never deadlock; if
 * PostgreSQL reports one anyway the batch is retried. A submission found
 * final under the lock is a duplicate: nothing is written for it.
 * Only after COMMIT are the entries acknowledged (ack.c, one MULTI).
 * A batch that fails with a non-transient error is retried one job per
 * transaction, so one bad evaluation cannot sink the others.
 *
 * Agents are locked with SKIP LOCKED: a job whose agent row another
 * transaction holds (an API server, another replica's commit) leaves the
 * batch and comes back alone a few milliseconds later (pipeline_contended),
 * so one held row never stalls the others. Other
 * locks are bounded by the session's lock_timeout (ARBITER_PG_LOCK_TIMEOUT_MS):
 * on 55P03 the batch is committed one job per transaction, and only the job
 * whose row is held keeps waiting; neither spends attempts.
 *
 * FOR NO KEY UPDATE (not FOR UPDATE): it serializes us on the row exactly as
 * FOR UPDATE would, but does not block the foreign-key checks (FOR KEY SHARE)
 * of API servers inserting matches and submissions for the same agent.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elo.h"
#include "log.h"
#include "metrics.h"
#include "notify.h"
#include "cplan.h"
#include "judge.h"
#include "pgc.h"
#include "commit.h"

struct cbatch {
	struct worker *w;
	struct pgc_conn *conn;
	int n;
	int idx_agents, idx_subs, idx_reeval;
	struct job *jobs[];
};

static const char SQL_LOCK_AGENTS[] =
	"SELECT id, elo, match_count, win_count, draw_count, loss_count, current_streak, "
	"best_streak FROM agents WHERE id = ANY($1::uuid[]) ORDER BY id FOR NO KEY UPDATE SKIP LOCKED";

/* "Has a first result" is a scalar subquery, not EXISTS: a prepared statement keeps the
 * generic plan made while the tables were small, and for EXISTS the planner may then pick
 * its hashed form, which reads every first result of the history on each call (a commit's
 * cost grew with the history: 31 -> 275 us per evaluation over 40,000 evaluations). A
 * scalar subquery is always one probe of the unique (submission_id, eval_seq) index. */
static const char SQL_LOCK_SUBS[] =
	"SELECT s.id, s.status, m.status, (SELECT r.id FROM evaluation_results r "
	"WHERE r.submission_id = s.id AND r.eval_seq = 1) IS NOT NULL FROM submissions s "
	"JOIN matches m ON m.id = s.match_id "
	"WHERE s.id = ANY($1::uuid[]) ORDER BY s.id FOR NO KEY UPDATE OF s";

/* Under the submission locks: the first result and the match's current
 * (effective) Elo change, for reevaluations. (Scalar subqueries for the same
 * reason as in SQL_LOCK_SUBS; (submission_id, job_id) is unique.) */
static const char SQL_REEVAL_INFO[] =
	"SELECT q.ord, r.id IS NOT NULL, COALESCE(r.elo_before, m.elo_before), "
	"COALESCE(r.k_factor, h.k_factor), COALESCE(m.elo_change, r.elo_change, 0), "
	"(SELECT max(x.eval_seq) FROM evaluation_results x WHERE x.submission_id = q.sub), "
	"(SELECT y.id FROM evaluation_results y WHERE y.submission_id = q.sub "
	"AND y.job_id = q.job) IS NOT NULL, h.opponent_elo, m.elo_before, m.elo_after, m.elo_change "
	"FROM jsonb_to_recordset($1::jsonb) AS q(ord int, sub uuid, job text) "
	"JOIN submissions s ON s.id = q.sub JOIN matches m ON m.id = s.match_id "
	"LEFT JOIN evaluation_results r ON r.submission_id = q.sub AND r.eval_seq = 1 "
	"LEFT JOIN LATERAL (SELECT e.opponent_elo, e.k_factor FROM elo_history e "
	"WHERE e.agent_id = s.agent_id AND e.match_id = s.match_id AND e.reason = 'evaluation' "
	"ORDER BY e.id LIMIT 1) h ON true";

/* First evaluations: one statement for the whole batch. The submissions were
 * locked and found unfinished in phase 1, so the writes need no status
 * condition; rows are found through the primary key ($3, the ids), never
 * through the partial index of unfinished submissions (whose statistics lag
 * behind a fresh backlog and would make the planner scan all of it).
 * The results carry their agent, challenge and submission time, taken from the
 * rows this statement updates, for the standings trigger (sql/006, README there). */
static const char SQL_COMPLETE[] =
	"WITH j AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(sub uuid, mat uuid, "
	"agent uuid, job text, ev text, sc int, rs text, vf bool, res jsonb, log jsonb, "
	"dims jsonb, st bigint, ct bigint, att int, eb int, ea int, ec int, k int, opp int, "
	"bonus numeric, ord int)), "
	"s AS (UPDATE submissions t SET status = 'completed', reject_reason = NULL, "
	"last_error = NULL, attempts = GREATEST(t.attempts, j.att) FROM j "
	"WHERE t.id = ANY($3::uuid[]) AND t.id = j.sub RETURNING t.id, t.agent_id, t.submitted_at), "
	"m AS (UPDATE matches t SET status = 'completed', result = j.rs, score = j.sc, "
	"verified = j.vf, elo_before = j.eb, elo_after = j.ea, elo_change = j.ec, "
	"completed_at = clock_timestamp() FROM j JOIN s ON s.id = j.sub "
	"WHERE t.id = j.mat RETURNING t.id, t.challenge_id), "
	"r AS (INSERT INTO evaluation_results (submission_id, eval_seq, job_id, evaluator, score, "
	"result, score_breakdown, submission_warnings, constraint_violations, verified, "
	"evaluation_log, worker_id, started_at, completed_at, elo_before, elo_change, k_factor, "
	"standings_agent_id, standings_challenge_id, standings_submitted_at) "
	"SELECT j.sub, 1, j.job, j.ev, j.sc, j.rs, COALESCE(j.res->'score_breakdown', '{}'), "
	"COALESCE(j.res->'submission_warnings', '[]'), "
	"COALESCE(j.res->'constraint_violations', '[]'), j.vf, j.log, $2, "
	"to_timestamp(j.st / 1000.0), clock_timestamp(), j.eb, j.ec, j.k, "
	"s.agent_id, m.challenge_id, s.submitted_at "
	"FROM j JOIN s ON s.id = j.sub LEFT JOIN m ON m.id = j.mat ORDER BY j.ord "
	"RETURNING id, submission_id), "
	"d AS (INSERT INTO evaluation_dimensions (result_id, key, score, weight, weighted, detail) "
	"SELECT r.id, x.key, x.score, x.weight, x.weighted, x.detail FROM r "
	"JOIN j ON j.sub = r.submission_id, jsonb_to_recordset(j.dims) AS x(key text, score int, "
	"weight numeric, weighted numeric, detail jsonb)), "
	"h AS (INSERT INTO elo_history (agent_id, match_id, result_id, elo_before, elo_after, "
	"elo_change, opponent_elo, k_factor, bonus, reason) "
	"SELECT j.agent, j.mat, r.id, j.eb, j.ea, j.ec, j.opp, j.k, j.bonus, 'evaluation' "
	"FROM j JOIN r ON r.submission_id = j.sub ORDER BY j.ord) "
	"SELECT count(*) FROM s";

/* Reevaluations: appended results; Elo adjustments logged in elo_history. */
static const char SQL_REEVAL[] =
	"WITH j AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(sub uuid, seq int, job text, "
	"ev text, sc int, rs text, vf bool, res jsonb, log jsonb, dims jsonb, st bigint, "
	"ct bigint, eb int, ec int, k int, adj bool, agent uuid, mat uuid, hb int, ha int, hc int, "
	"opp int, bonus numeric, ord int)), "
	"r AS (INSERT INTO evaluation_results (submission_id, eval_seq, job_id, evaluator, score, "
	"result, score_breakdown, submission_warnings, constraint_violations, verified, "
	"evaluation_log, worker_id, started_at, completed_at, elo_before, elo_change, k_factor) "
	"SELECT j.sub, j.seq, j.job, j.ev, j.sc, j.rs, COALESCE(j.res->'score_breakdown', '{}'), "
	"COALESCE(j.res->'submission_warnings', '[]'), "
	"COALESCE(j.res->'constraint_violations', '[]'), j.vf, j.log, $2, "
	"to_timestamp(j.st / 1000.0), clock_timestamp(), j.eb, j.ec, j.k "
	"FROM j ORDER BY j.ord ON CONFLICT (submission_id, job_id) DO NOTHING "
	"RETURNING id, submission_id, job_id), "
	"d AS (INSERT INTO evaluation_dimensions (result_id, key, score, weight, weighted, detail) "
	"SELECT r.id, x.key, x.score, x.weight, x.weighted, x.detail FROM r "
	"JOIN j ON j.sub = r.submission_id AND j.job = r.job_id, "
	"jsonb_to_recordset(j.dims) AS x(key text, score int, weight numeric, weighted numeric, "
	"detail jsonb)), "
	"h AS (INSERT INTO elo_history (agent_id, match_id, result_id, elo_before, elo_after, "
	"elo_change, opponent_elo, k_factor, bonus, reason) "
	"SELECT j.agent, j.mat, r.id, j.hb, j.ha, j.hc, j.opp, j.k, j.bonus, 'reevaluation_adjust' "
	"FROM j JOIN r ON r.submission_id = j.sub AND r.job_id = j.job WHERE j.adj ORDER BY j.ord) "
	"SELECT count(*) FROM r";

/* elo=adjust: the match shows the latest adjusted evaluation and its effective change. */
static const char SQL_REEVAL_MATCHES[] =
	"UPDATE matches t SET result = g.rs, score = g.sc, verified = g.vf, elo_change = g.ec, "
	"elo_after = g.ea FROM jsonb_to_recordset($1::jsonb) AS g(id uuid, rs text, sc int, "
	"vf bool, ec int, ea int) WHERE t.id = g.id";

static const char SQL_AGENTS[] =
	"UPDATE agents t SET elo = g.elo, match_count = g.mc, win_count = g.w, draw_count = g.d, "
	"loss_count = g.l, current_streak = g.cs, best_streak = g.bs "
	"FROM jsonb_to_recordset($1::jsonb) AS g(id uuid, elo int, mc int, w int, d int, l int, "
	"cs int, bs int) WHERE t.id = g.id";

static const char SQL_REJECT[] =
	"UPDATE submissions t SET status = 'rejected', reject_reason = x.reason, last_error = x.err "
	"FROM jsonb_to_recordset($1::jsonb) AS x(sub uuid, reason text, err text) "
	"WHERE t.id = ANY($2::uuid[]) AND t.id = x.sub";

static const char SQL_FAIL[] =
	"UPDATE submissions t SET status = 'failed', last_error = x.err, reject_reason = NULL, "
	"attempts = GREATEST(t.attempts, x.att) "
	"FROM jsonb_to_recordset($1::jsonb) AS x(sub uuid, err text, att int) "
	"WHERE t.id = ANY($2::uuid[]) AND t.id = x.sub";

/* An evaluate job for a submission that has its result already: completed again. */
static const char SQL_RESTORE[] =
	"UPDATE submissions SET status = 'completed', reject_reason = NULL, last_error = NULL "
	"WHERE id = ANY($1::uuid[])";

/* LLM judge verdicts paid for by the batch's jobs (worker/judge.h, sql/003_judge.sql): stored
 * with their results. A first verdict keeps one stored before; a re-judged one replaces it
 * and adds up what was paid. One row per key (two jobs may share a verdict). */
static const char SQL_VERDICTS[] =
	"INSERT INTO judge_verdicts AS t (key, provider, model, prompt_version, verdict, tokens_in, "
	"tokens_out, cost_usd, calls, rejudged_at) SELECT DISTINCT ON (v.key) v.key, v.provider, "
	"v.model, v.pv, v.verdict, v.ti, v.tout, v.cost, v.calls, "
	"CASE WHEN v.replace THEN now() END FROM jsonb_to_recordset($1::jsonb) AS v(key text, "
	"provider text, model text, pv text, verdict jsonb, ti bigint, tout bigint, cost numeric, "
	"calls int, replace bool) ORDER BY v.key, v.replace DESC "
	"ON CONFLICT (key) DO UPDATE SET verdict = EXCLUDED.verdict, "
	"tokens_in = t.tokens_in + EXCLUDED.tokens_in, tokens_out = t.tokens_out + EXCLUDED.tokens_out, "
	"cost_usd = t.cost_usd + EXCLUDED.cost_usd, calls = t.calls + EXCLUDED.calls, "
	"rejudged_at = EXCLUDED.rejudged_at WHERE EXCLUDED.rejudged_at IS NOT NULL";

/* Phase 2's first statement: no statement_timeout for the writes (below), and hash and merge
 * joins allowed again: the writes join the batch's own rows with each other (hashing those is
 * right), and reach the tables by key (sequential scans stay off). */
static const char SQL_NO_STATEMENT_TIMEOUT[] =
	"SELECT set_config('statement_timeout', '0', true), set_config('enable_hashjoin', 'on', true), "
	"set_config('enable_mergejoin', 'on', true)";
/* Right after BEGIN: the locking reads reach their rows by key (ids of the batch), so their
 * plans must be keyed nested loops whatever the statistics say: made while a table was
 * small, a plan could scan it whole (matches, evaluation_results) and keep doing so as the
 * history grew. And every prepared statement of the transaction runs its generic plan,
 * made once per connection (under these settings), never a custom plan per call. Left to
 * itself (plan_cache_mode auto), PostgreSQL kept planning the statements that take the
 * batch's ids as an array on every call: a custom plan knows the array's length, so it
 * always looked cheaper than the generic one. That was ~0.5 ms of planning per evaluation
 * when batches are small (bench_commit --profile at 500 jobs/s: the load, lock and
 * challenge statements planned on every call, the commit's write on one in five).
 * Transaction-scoped (PgBouncer's transaction pooling sees no session state).
 * test/integration/test_commit_plans.py checks the plans. */
const char SQL_KEYED_PLANS[] =
	"SELECT set_config('enable_seqscan', 'off', true), set_config('enable_hashjoin', 'off', true), "
	"set_config('enable_mergejoin', 'off', true), "
	"set_config('plan_cache_mode', 'force_generic_plan', true)";
static const char SQL_BEGIN[] = "BEGIN";
static const char SQL_COMMIT[] = "COMMIT";

/* ---- helpers ------------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "{a,b,c}" of the sorted unique ids (uuids need no quoting). */
static void id_array(const char **ids, int n, struct strbuf *out)
{
	qsort(ids, (size_t)n, sizeof *ids, cmp_str);
	strbuf_addlit(out, "{");
	for (int i = 0, k = 0; i < n; i++) {
		if (i && !strcmp(ids[i], ids[i - 1]))
			continue;
		if (k++)
			strbuf_addlit(out, ",");
		strbuf_add(out, ids[i], strlen(ids[i]));
	}
	strbuf_addlit(out, "}");
}

static const char *bonus_text(int tenths)
{
	return tenths == 12 ? "1.2" : tenths == 11 ? "1.1" : "1.0";
}

static void add_dec(struct strbuf *sb, dec6 v)
{
	char buf[40];
	int n = dec_format(v, buf, sizeof buf);
	strbuf_add(sb, buf, (size_t)n);
}

static void add_json(struct strbuf *sb, const json_t *v)
{
	char *s = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15)) : NULL;
	if (s) {
		strbuf_add(sb, s, strlen(s));
		free(s);
	} else {
		strbuf_addlit(sb, "null");
	}
}

/* The evaluation_log object: who evaluated, when, how long, and the
 * sandbox's tests / compile outcome. */
static void add_log(struct strbuf *sb, struct worker *w, const struct job *j)
{
	strbuf_addlit(sb, "{\"evaluator\":");
	job_json_str(sb, pipeline_evaluator(j) ? pipeline_evaluator(j) : "unknown");
	strbuf_addlit(sb, ",\"kind\":");
	job_json_str(sb, j->kind == JOB_EVALUATE ? "evaluate" : "reevaluate");
	if (j->kind == JOB_REEVALUATE) {
		strbuf_addlit(sb, ",\"elo\":");
		job_json_str(sb, j->elo == JOB_ELO_ADJUST ? "adjust" : "keep");
	}
	strbuf_addlit(sb, ",\"job_id\":");
	job_json_str(sb, j->id);
	strbuf_addlit(sb, ",\"worker_id\":");
	job_json_str(sb, w->cfg->worker_id);
	strbuf_addf(sb, ",\"attempt\":%d,\"duration_ms\":%lld,\"challenge_id\":", j->attempts,
	            (long long)(j->eval_done_ms - j->eval_started_ms));
	job_json_str(sb, j->row.challenge_id);
	const json_t *extra = j->res.extra ? j->res.extra : j->extra;
	if (extra && json_is_object(extra)) {
		const char *k;
		json_t *v;
		json_object_foreach((json_t *)extra, k, v) {
			strbuf_addlit(sb, ",");
			job_json_str(sb, k);
			strbuf_addlit(sb, ":");
			add_json(sb, v);
		}
	}
	strbuf_addlit(sb, "}");
}

static void add_dims(struct strbuf *sb, const struct job *j)
{
	strbuf_addlit(sb, "[");
	for (size_t i = 0; i < j->res.ndims; i++) {
		const struct score_dim *d = &j->res.dims[i];
		if (i)
			strbuf_addlit(sb, ",");
		strbuf_addlit(sb, "{\"key\":");
		job_json_str(sb, d->key);
		strbuf_addf(sb, ",\"score\":%d,\"weight\":", d->score);
		add_dec(sb, d->weight);
		strbuf_addlit(sb, ",\"weighted\":");
		add_dec(sb, d->weighted);
		strbuf_addlit(sb, ",\"detail\":");
		add_json(sb, d->detail);
		strbuf_addlit(sb, "}");
	}
	strbuf_addlit(sb, "]");
}

/* Fields common to COMPLETE and REEVAL rows. */
static void add_eval_fields(struct strbuf *sb, struct worker *w, const struct job *j, int ord)
{
	strbuf_addlit(sb, "\"sub\":");
	job_json_str(sb, j->sub);
	strbuf_addlit(sb, ",\"job\":");
	job_json_str(sb, j->id);
	strbuf_addlit(sb, ",\"ev\":");
	job_json_str(sb, pipeline_evaluator(j) ? pipeline_evaluator(j) : "unknown");
	strbuf_addf(sb, ",\"sc\":%d,\"rs\":\"%s\",\"vf\":%s,\"res\":", j->res.score,
	            score_outcome_name(j->res.result), j->res.verified ? "true" : "false");
	if (j->res_json)
		strbuf_add(sb, j->res_json, strlen(j->res_json));
	else
		strbuf_addlit(sb, "{}");
	strbuf_addlit(sb, ",\"log\":");
	add_log(sb, w, j);
	strbuf_addlit(sb, ",\"dims\":");
	add_dims(sb, j);
	strbuf_addf(sb, ",\"st\":%lld,\"ct\":%lld,\"ord\":%d", (long long)j->eval_started_ms,
	            (long long)j->eval_done_ms, ord);
}

/* ---- batch lifecycle ----------------------------------------------------------------- */

static void batch_free(struct cbatch *b)
{
	free(b);
}

static void reset_job(struct job *j)
{
	j->duplicate = false;
	j->op_eff = OP_NONE;
}

static void commit_failed(struct cbatch *b, const struct pgc_result *r)
{
	struct worker *w = b->w;
	char why[600];
	bool deadlock = !strcmp(r->sqlstate, "40P01") || !strcmp(r->sqlstate, "40001");

	if (b->conn)
		pgc_release(b->conn);
	b->conn = NULL;
	w->commits_inflight--;
	pipeline_note_db_error(w, r);
	snprintf(why, sizeof why, "commit failed: %s%s%s", r->err ? r->err : "unknown error",
	         r->sqlstate[0] ? " SQLSTATE " : "", r->sqlstate);
	if (w->state == W_STOPPING) {
		for (int i = 0; i < b->n; i++)
			pipeline_retry(w, b->jobs[i], STAGE_COMMIT, false, why);
	} else if (!strcmp(r->sqlstate, "55P03") && b->n > 1) {
		/* lock_timeout: a row of the batch (a submission or match an API
		 * transaction holds) stayed locked. Commit the jobs one by one, so
		 * only the job whose row is held waits (and backs off alone). */
		LOGW(NULL, NULL, "%s: committing the %d jobs of the batch one by one", why, b->n);
		for (int i = b->n - 1; i >= 0; i--) {
			struct job *j = b->jobs[i];
			reset_job(j);
			j->solo = true;
			job_set_state(j, JOB_COMMIT_WAIT);
			jobq_push_front(&w->commit_q, j);
		}
	} else if (r->transient) {
		/* Connection loss, timeout, deadlock: the whole batch again. A deadlock
		 * counts against a job only when it was alone in its transaction. */
		for (int i = 0; i < b->n; i++) {
			reset_job(b->jobs[i]);
			pipeline_retry(w, b->jobs[i], STAGE_COMMIT, deadlock && b->n == 1, why);
		}
	} else if (b->n > 1) {
		LOGW(NULL, NULL, "%s: retrying the %d jobs of the batch one by one", why, b->n);
		for (int i = b->n - 1; i >= 0; i--) {
			struct job *j = b->jobs[i];
			reset_job(j);
			j->solo = true;
			job_set_state(j, JOB_COMMIT_WAIT);
			jobq_push_front(&w->commit_q, j);
		}
	} else {
		struct job *j = b->jobs[0];
		reset_job(j);
		if (j->op == OP_FAIL) {
			LOGE(j->sub, j->id, "%s: cannot record the failure; dead-lettering it anyway", why);
			j->op_eff = OP_FAIL;
			pipeline_to_ack(w, j, ACK_DEAD, NULL, OUTCOME_FAILED);
		} else {
			pipeline_retry(w, j, STAGE_COMMIT, true, why);
		}
	}
	batch_free(b);
	pipeline_kick(w);
}

static void on_phase2(const struct pgc_result *r, void *data)
{
	struct cbatch *b = data;
	struct worker *w = b->w;
	int nev = 0;
	int64_t now = job_now_ms();

	if (r->err) {
		/* Lost with the COMMIT in flight: the outcome is unknown (a retry
		 * with the same entry id finds out; a released copy could not). */
		if (r->transient)
			for (int i = 0; i < b->n; i++)
				b->jobs[i]->commit_unknown = true;
		commit_failed(b, r);
		return;
	}
	pgc_release(b->conn);
	b->conn = NULL;
	w->commits_inflight--;
	pipeline_note_db_ok(w);
	for (int i = 0; i < b->n; i++) {
		struct job *j = b->jobs[i];
		j->solo = false;
		if (j->duplicate) {
			LOGD(j->sub, j->id, "duplicate: the submission was already final");
			pipeline_to_ack(w, j, ACK_PLAIN, NULL, OUTCOME_DUPLICATE);
			continue;
		}
		switch (j->op_eff) {
		case OP_COMPLETE:
		case OP_REEVAL:
			nev++;
			if (j->has_enqueued_at)
				metrics_e2e_job(j->enqueued_at_ms, j->row.submitted_ms, now);
			if (j->op_eff == OP_COMPLETE && j->eu.clamped)
				LOGW(j->sub, j->id, "rating outside %d..%d (agent or challenge %s): clamped "
				     "to %d vs opponent %d", ELO_RATING_MIN, ELO_RATING_MAX,
				     j->row.challenge_id, j->eu.before, j->eu.opponent);
			if (j->op_eff == OP_COMPLETE)
				LOGI(j->sub, j->id, "completed: score %d %s, elo %d -> %d (%+d)", j->res.score,
				     score_outcome_name(j->res.result), j->eu.before, j->eu.after,
				     j->eu.change);
			else
				LOGI(j->sub, j->id, "reevaluated (eval_seq %d, elo %s): score %d %s%s",
				     j->eval_seq, j->elo == JOB_ELO_ADJUST ? "adjust" : "keep", j->res.score,
				     score_outcome_name(j->res.result),
				     j->elo == JOB_ELO_ADJUST ? "" : ", rating unchanged");
			if (j->judge_row)
				judge_committed(w->judge, j->judge_key);
			pipeline_to_ack(w, j, ACK_PLAIN, NULL, OUTCOME_COMPLETED);
			break;
		case OP_REJECT:
			pipeline_to_ack(w, j, ACK_PLAIN, NULL, OUTCOME_REJECTED);
			break;
		case OP_RESTORE:
			LOGI(j->sub, j->id, "already evaluated (its status had been set back): "
			     "completed again, result kept; use kind=reevaluate to evaluate again");
			pipeline_to_ack(w, j, ACK_PLAIN, NULL, OUTCOME_DUPLICATE);
			break;
		case OP_FAIL:
			pipeline_to_ack(w, j, ACK_DEAD, NULL, OUTCOME_FAILED);
			break;
		case OP_REFUSED:
			/* Refused under the lock (cplan): nothing written; the submission keeps its
			 * status and first result, the job goes to the dead letters with the reason. */
			LOGE(j->sub, j->id, "reevaluate refused: %s", j->last_error);
			pipeline_to_ack(w, j, ACK_DEAD, j->last_error, OUTCOME_DEAD_LETTERED);
			break;
		case OP_NO_RESULT:
		default:
			/* Decided under the lock: a reevaluation with nothing to reevaluate. */
			pipeline_to_ack(w, j, ACK_DEAD, "reevaluate_without_result", OUTCOME_DEAD_LETTERED);
			break;
		}
	}
	if (nev)
		metrics_commit_batch(nev);
	batch_free(b);
	pipeline_kick(w);
}

static int geti(PGresult *res, int row, int col)
{
	return PQgetisnull(res, row, col) ? 0 : atoi(PQgetvalue(res, row, col));
}

/* What the locks returned (phase 1's result sets, by column number as the
 * statements above list them), into the plan's inputs. */
static void read_locked(struct cbatch *b, const struct pgc_result *r, struct cplan_agent **ag,
                        int *na, struct cplan_sub **ss, int *ns, struct cplan_orig *ri)
{
	*na = *ns = 0;
	*ag = NULL;
	*ss = NULL;
	if (b->idx_agents >= 0) {
		PGresult *res = r->res[b->idx_agents];
		*na = PQntuples(res);
		*ag = xcalloc((size_t)*na + 1, sizeof **ag);
		for (int i = 0; i < *na; i++) {
			struct cplan_agent *a = &(*ag)[i];
			snprintf(a->id, sizeof a->id, "%s", PQgetvalue(res, i, 0));
			/* Stored values outside the documented ranges (common/elo.h) are
			 * clamped, with a warning; the row is written back clamped when
			 * the batch touches it. */
			bool clamped = false;
			a->elo = elo_clamp_rating(geti(res, i, 1), &clamped);
			a->mc = elo_clamp_count(geti(res, i, 2), &clamped);
			a->win = elo_clamp_count(geti(res, i, 3), &clamped);
			a->draw = elo_clamp_count(geti(res, i, 4), &clamped);
			a->loss = elo_clamp_count(geti(res, i, 5), &clamped);
			a->cs = elo_clamp_count(geti(res, i, 6), &clamped);
			a->bs = elo_clamp_count(geti(res, i, 7), &clamped);
			if (clamped)
				LOGW(NULL, NULL, "agent %s: stored elo %s or counts outside the documented "
				     "ranges (elo %d..%d, counts >= 0): clamped", a->id,
				     PQgetvalue(res, i, 1), ELO_RATING_MIN, ELO_RATING_MAX);
		}
	}
	if (b->idx_subs >= 0) {
		PGresult *res = r->res[b->idx_subs];
		*ns = PQntuples(res);
		*ss = xcalloc((size_t)*ns + 1, sizeof **ss);
		for (int i = 0; i < *ns; i++) {
			struct cplan_sub *x = &(*ss)[i];
			snprintf(x->id, sizeof x->id, "%s", PQgetvalue(res, i, 0));
			x->status = job_status_parse(PQgetvalue(res, i, 1));
			x->match_status = job_status_parse(PQgetvalue(res, i, 2));
			x->has_result = PQgetvalue(res, i, 3)[0] == 't';
		}
	}
	if (b->idx_reeval >= 0) {
		PGresult *res = r->res[b->idx_reeval];
		for (int i = 0; i < PQntuples(res); i++) {
			int ord = geti(res, i, 0);
			if (ord < 0 || ord >= b->n)
				continue;
			struct cplan_orig *x = &ri[ord];
			x->found = true;
			x->has_result = PQgetvalue(res, i, 1)[0] == 't';
			x->has_before = !PQgetisnull(res, i, 2);
			x->elo_before = geti(res, i, 2);
			x->k = PQgetisnull(res, i, 3) ? 0 : geti(res, i, 3);
			x->eff_change = geti(res, i, 4);
			x->max_seq = geti(res, i, 5);
			x->job_exists = PQgetvalue(res, i, 6)[0] == 't';
			x->opponent = PQgetisnull(res, i, 7) ? -1 : geti(res, i, 7);
			x->match_elo_before = PQgetisnull(res, i, 8) ? x->elo_before : geti(res, i, 8);
			/* As stored, for elo_stored_check (an elo=adjust builds on them). */
			x->match.has_before = !PQgetisnull(res, i, 8);
			x->match.before = pgc_get_i64(res, i, 8);
			x->match.has_after = !PQgetisnull(res, i, 9);
			x->match.after = pgc_get_i64(res, i, 9);
			x->match.has_change = !PQgetisnull(res, i, 10);
			x->match.change = pgc_get_i64(res, i, 10);
		}
	}
}

/* The jsonb_to_recordset rows of phase 2, one array per statement. */
struct rows {
	struct strbuf complete, complete_ids, reeval, reject, reject_ids, fail, fail_ids, restore_ids;
	struct strbuf agents, matches;
	struct strbuf verdicts;
};

static void rows_free(struct rows *x)
{
	struct strbuf *all[] = { &x->complete, &x->complete_ids, &x->reeval, &x->reject,
	                         &x->reject_ids, &x->fail, &x->fail_ids, &x->agents, &x->matches,
	                         &x->restore_ids, &x->verdicts };
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		strbuf_free(all[i]);
}

/* Appends one element to a JSON array or a PostgreSQL array literal being built. */
static void open_elem(struct strbuf *sb, const char *first, const char *next)
{
	strbuf_add(sb, sb->len ? next : first, strlen(sb->len ? next : first));
}

static void close_list(struct strbuf *sb, const char *end)
{
	if (sb->len)
		strbuf_add(sb, end, strlen(end));
}

static void add_step_row(struct rows *x, struct worker *w, const struct cplan_step *st,
                         const struct job *j)
{
	if (j->judge_row && (st->op == OP_COMPLETE || st->op == OP_REEVAL)) {
		open_elem(&x->verdicts, "[", ",");
		strbuf_add(&x->verdicts, j->judge_row, strlen(j->judge_row));
	}
	switch (st->op) {
	case OP_COMPLETE:
		open_elem(&x->complete_ids, "{", ",");
		strbuf_add(&x->complete_ids, j->sub, strlen(j->sub));
		open_elem(&x->complete, "[{", ",{");
		add_eval_fields(&x->complete, w, j, st->pos);
		strbuf_addlit(&x->complete, ",\"mat\":");
		job_json_str(&x->complete, j->row.match_id);
		strbuf_addlit(&x->complete, ",\"agent\":");
		job_json_str(&x->complete, j->row.agent_id);
		strbuf_addf(&x->complete, ",\"att\":%d,\"eb\":%d,\"ea\":%d,\"ec\":%d,\"k\":%d,"
		            "\"opp\":%d,\"bonus\":%s}", j->attempts, j->eu.before, j->eu.after,
		            j->eu.change, j->eu.k, j->eu.opponent, bonus_text(j->eu.bonus_tenths));
		break;
	case OP_REEVAL:
		open_elem(&x->reeval, "[{", ",{");
		add_eval_fields(&x->reeval, w, j, st->pos);
		strbuf_addf(&x->reeval, ",\"seq\":%d", j->eval_seq);
		if (st->has_before)
			strbuf_addf(&x->reeval, ",\"eb\":%d,\"ec\":%d,\"k\":%d", j->eu.before,
			            j->eu.change, j->eu.k);
		strbuf_addf(&x->reeval, ",\"adj\":%s,\"agent\":", st->adjust ? "true" : "false");
		job_json_str(&x->reeval, j->row.agent_id);
		strbuf_addlit(&x->reeval, ",\"mat\":");
		job_json_str(&x->reeval, j->row.match_id);
		strbuf_addf(&x->reeval, ",\"hb\":%d,\"ha\":%d,\"hc\":%d,\"opp\":%d,\"bonus\":%s}",
		            j->hist_before, j->hist_after, j->hist_change, st->opp,
		            bonus_text(j->eu.bonus_tenths ? j->eu.bonus_tenths : 10));
		break;
	case OP_REJECT:
		open_elem(&x->reject_ids, "{", ",");
		strbuf_add(&x->reject_ids, j->sub, strlen(j->sub));
		open_elem(&x->reject, "[{", ",{");
		strbuf_addlit(&x->reject, "\"sub\":");
		job_json_str(&x->reject, j->sub);
		strbuf_addlit(&x->reject, ",\"reason\":");
		job_json_str(&x->reject, job_reason_name(j->reason));
		strbuf_addlit(&x->reject, ",\"err\":");
		if (j->last_error && j->reason == REASON_INVALID_SPEC)
			job_json_str(&x->reject, j->last_error);
		else
			strbuf_addlit(&x->reject, "null");
		strbuf_addlit(&x->reject, "}");
		break;
	case OP_RESTORE:
		open_elem(&x->restore_ids, "{", ",");
		strbuf_add(&x->restore_ids, j->sub, strlen(j->sub));
		break;
	case OP_FAIL:
		open_elem(&x->fail_ids, "{", ",");
		strbuf_add(&x->fail_ids, j->sub, strlen(j->sub));
		open_elem(&x->fail, "[{", ",{");
		strbuf_addlit(&x->fail, "\"sub\":");
		job_json_str(&x->fail, j->sub);
		strbuf_addlit(&x->fail, ",\"err\":");
		job_json_str(&x->fail, j->last_error ? j->last_error : "unknown error");
		/* submissions.attempts counts evaluate jobs only (GREATEST keeps it for 0). */
		strbuf_addf(&x->fail, ",\"att\":%d}", j->kind == JOB_EVALUATE ? j->attempts : 0);
		break;
	default:
		break;
	}
}

/* Serialises the plan: every step's row, then the agents' final rows and the
 * adjusted matches; each list closed. */
static void plan_rows(struct rows *x, struct worker *w, struct cbatch *b,
                      const struct cplan *plan, const struct cplan_agent *ag, int na)
{
	for (int i = 0; i < plan->nsteps; i++) {
		struct job *j = b->jobs[plan->steps[i].pos];
		if (j->op == OP_COMPLETE && j->op_eff == OP_REJECT)
			LOGI(j->sub, j->id, "rejected: match_not_active (another submission of the "
			     "match completed first)");
		add_step_row(x, w, &plan->steps[i], j);
	}
	for (int i = 0; i < na; i++) {
		if (!ag[i].touched)
			continue;
		open_elem(&x->agents, "[{", ",{");
		strbuf_addf(&x->agents, "\"id\":\"%s\",\"elo\":%d,\"mc\":%d,\"w\":%d,\"d\":%d,\"l\":%d,"
		            "\"cs\":%d,\"bs\":%d}", ag[i].id, ag[i].elo, ag[i].mc, ag[i].win,
		            ag[i].draw, ag[i].loss, ag[i].cs, ag[i].bs);
	}
	for (int i = 0; i < plan->nmatches; i++) {
		const struct cplan_match *m = &plan->matches[i];
		const struct job *j = m->last;
		if (!j)
			continue;
		open_elem(&x->matches, "[{", ",{");
		strbuf_addf(&x->matches, "\"id\":\"%s\",\"rs\":\"%s\",\"sc\":%d,\"vf\":%s,\"ec\":%d,"
		            "\"ea\":%d}", m->id, score_outcome_name(j->res.result), j->res.score,
		            j->res.verified ? "true" : "false", (int)m->eff,
		            elo_clamp_rating(m->elo_before + m->eff, NULL));
	}
	close_list(&x->complete, "]");
	close_list(&x->complete_ids, "}");
	close_list(&x->reeval, "]");
	close_list(&x->reject, "]");
	close_list(&x->reject_ids, "}");
	close_list(&x->fail, "]");
	close_list(&x->fail_ids, "}");
	close_list(&x->restore_ids, "}");
	close_list(&x->agents, "]");
	close_list(&x->matches, "]");
	close_list(&x->verdicts, "]");
}

/* Jobs whose agent row another transaction holds (SKIP LOCKED left it out of
 * the locked rows) leave the batch and back off alone, not counted as
 * attempts; the rest commit now. ri (by batch position) is compacted along. */
static void drop_locked_agents(struct cbatch *b, const struct cplan_agent *ag, int na,
                               struct cplan_orig *ri)
{
	int k = 0;
	for (int i = 0; i < b->n; i++) {
		struct job *j = b->jobs[i];
		bool locked = false;
		if (cplan_touches_agent(j) && j->row.agent_id[0]) {
			locked = true;
			for (int a = 0; a < na && locked; a++)
				if (!strcmp(ag[a].id, j->row.agent_id))
					locked = false;
		}
		if (locked) {
			reset_job(j);
			pipeline_contended(b->w, j, "the agent's row is locked by another transaction");
			continue;
		}
		b->jobs[k] = j;
		ri[k] = ri[i];
		k++;
	}
	b->n = k;
}

/* The $1 of NOTIFY_SQL for the plan's outcomes (README "Reading results"; PostgreSQL
 * delivers them at COMMIT), or NULL: none to send, or ARBITER_NOTIFY=off (a notifying
 * COMMIT waits for every other one). Caller frees. */
static char *notify_events(const struct cbatch *b, const struct cplan *plan)
{
	if (b->w->cfg->notify && !strcmp(b->w->cfg->notify, "off"))
		return NULL;
	json_t *events = json_array();
	for (int i = 0; i < plan->nsteps; i++) {
		const struct job *j = b->jobs[plan->steps[i].pos];
		if (j->op_eff == OP_COMPLETE || j->op_eff == OP_REEVAL)
			notify_add(events, j->sub, "completed", j->op_eff == OP_REEVAL ? j->eval_seq : 1,
			           j->res.score, score_outcome_name(j->res.result), NULL);
		else if (j->op_eff == OP_REJECT)
			notify_add(events, j->sub, "rejected", 0, 0, NULL, job_reason_name(j->reason));
		else if (j->op_eff == OP_FAIL)
			notify_add(events, j->sub, "failed", 0, 0, NULL, NULL);
	}
	char *notify = notify_param(events);
	json_decref(events);
	return notify;
}

/* Phase 1 is back: decide (cplan), then send the writes and COMMIT. */
static void on_phase1(const struct pgc_result *r, void *data)
{
	struct cbatch *b = data;
	struct worker *w = b->w;

	if (r->err) {
		commit_failed(b, r);
		return;
	}

	int na, ns;
	struct cplan_agent *ag;
	struct cplan_sub *ss;
	struct cplan_orig *ri = xcalloc((size_t)b->n, sizeof *ri);
	struct cplan plan;
	read_locked(b, r, &ag, &na, &ss, &ns, ri);
	drop_locked_agents(b, ag, na, ri);
	cplan_make(b->jobs, b->n, ag, na, ss, ns, ri, &plan);

	struct rows x = { 0 };
	plan_rows(&x, w, b, &plan, ag, na);

	char *notify = notify_events(b, &plan);
	const char *p_notify[] = { notify };

	struct pgc_stmt st[12];
	const char *p_complete[] = { x.complete.buf, w->cfg->worker_id, x.complete_ids.buf };
	const char *p_reeval[] = { x.reeval.buf, w->cfg->worker_id };
	const char *p_matches[] = { x.matches.buf };
	const char *p_agents[] = { x.agents.buf };
	const char *p_reject[] = { x.reject.buf, x.reject_ids.buf };
	const char *p_fail[] = { x.fail.buf, x.fail_ids.buf };
	const char *p_restore[] = { x.restore_ids.buf };
	const char *p_verdicts[] = { x.verdicts.buf };
	int k = 0;
	/* The session's statement_timeout (pgc: 9/10 of the query timeout) bounds the
	 * loads and locks; the writes and the COMMIT are left to the query timeout, as
	 * before: a COMMIT the server finishes after we gave up is a known case (a lost
	 * COMMIT, retried by entry id), one the server cancels would be retried forever
	 * by a slow deferred trigger. */
	st[k++] = (struct pgc_stmt){ SQL_NO_STATEMENT_TIMEOUT, 0, NULL };
	if (x.verdicts.len)
		st[k++] = (struct pgc_stmt){ SQL_VERDICTS, 1, p_verdicts };
	if (x.complete.len)
		st[k++] = (struct pgc_stmt){ SQL_COMPLETE, 3, p_complete };
	if (x.reeval.len)
		st[k++] = (struct pgc_stmt){ SQL_REEVAL, 2, p_reeval };
	if (x.matches.len)
		st[k++] = (struct pgc_stmt){ SQL_REEVAL_MATCHES, 1, p_matches };
	if (x.agents.len)
		st[k++] = (struct pgc_stmt){ SQL_AGENTS, 1, p_agents };
	if (x.reject.len)
		st[k++] = (struct pgc_stmt){ SQL_REJECT, 2, p_reject };
	if (x.fail.len)
		st[k++] = (struct pgc_stmt){ SQL_FAIL, 2, p_fail };
	if (x.restore_ids.len)
		st[k++] = (struct pgc_stmt){ SQL_RESTORE, 1, p_restore };
	if (notify)
		st[k++] = (struct pgc_stmt){ NOTIFY_SQL, 1, p_notify };
	st[k++] = (struct pgc_stmt){ SQL_COMMIT, 0, NULL };

	int rc = pgc_send(b->conn, st, k, on_phase2, b);
	free(notify);

	rows_free(&x);
	cplan_free(&plan);
	free(ri);
	free(ag);
	free(ss);
	if (rc < 0) {
		struct pgc_result fake = { 0 };
		fake.err = "database pool closed";
		fake.transient = true;
		commit_failed(b, &fake);
	}
}

static void phase1(struct cbatch *b)
{
	struct worker *w = b->w;
	const char **aids = xcalloc((size_t)b->n + 1, sizeof *aids);
	const char **sids = xcalloc((size_t)b->n + 1, sizeof *sids);
	int na = 0, ns = 0, nre = 0;
	struct strbuf a = { 0 }, s = { 0 }, re = { 0 };

	for (int i = 0; i < b->n; i++) {
		struct job *j = b->jobs[i];
		if (cplan_touches_agent(j) && j->row.agent_id[0])
			aids[na++] = j->row.agent_id;
		if (cplan_touches_sub(j))
			sids[ns++] = j->sub;
		if (j->op == OP_REEVAL) {
			open_elem(&re, "[{", ",{");
			nre++;
			strbuf_addf(&re, "\"ord\":%d,\"sub\":\"%s\",\"job\":", i, j->sub);
			job_json_str(&re, j->id);
			strbuf_addlit(&re, "}");
		}
	}
	if (nre)
		strbuf_addlit(&re, "]");
	id_array(aids, na, &a);
	id_array(sids, ns, &s);

	struct pgc_stmt st[5];
	const char *pa[] = { a.buf }, *ps[] = { s.buf }, *pr[] = { re.buf };
	int k = 0;
	st[k++] = (struct pgc_stmt){ SQL_BEGIN, 0, NULL };
	st[k++] = (struct pgc_stmt){ SQL_KEYED_PLANS, 0, NULL };
	b->idx_agents = b->idx_subs = b->idx_reeval = -1;
	if (na) {
		b->idx_agents = k;
		st[k++] = (struct pgc_stmt){ SQL_LOCK_AGENTS, 1, pa };
	}
	if (ns) {
		b->idx_subs = k;
		st[k++] = (struct pgc_stmt){ SQL_LOCK_SUBS, 1, ps };
	}
	if (nre) {
		b->idx_reeval = k;
		st[k++] = (struct pgc_stmt){ SQL_REEVAL_INFO, 1, pr };
	}
	int rc = pgc_send(b->conn, st, k, on_phase1, b);
	strbuf_free(&a);
	strbuf_free(&s);
	strbuf_free(&re);
	free(aids);
	free(sids);
	if (rc < 0) {
		struct pgc_result fake = { 0 };
		fake.err = "database pool closed";
		fake.transient = true;
		commit_failed(b, &fake);
	}
	(void)w;
}

static void on_conn(struct pgc_conn *c, void *data)
{
	struct cbatch *b = data;
	struct worker *w = b->w;
	if (b->jobs[0]->state == JOB_ABANDONED) {
		/* Released at the drain deadline while it waited (every job of the
		 * batch was): nothing was sent, nothing is. */
		if (c)
			pgc_release(c);
		w->commits_inflight--;
		for (int i = 0; i < b->n; i++)
			pipeline_drop(w, b->jobs[i]);
		batch_free(b);
		pipeline_kick(w);
		return;
	}
	if (!c) {
		struct pgc_result fake = { 0 };
		fake.err = "database pool closing";
		fake.transient = true;
		commit_failed(b, &fake);
		return;
	}
	for (int i = 0; i < b->n; i++)
		job_set_state(b->jobs[i], JOB_COMMITTING);
	b->conn = c;
	phase1(b);
}

static void commit_timer_cb(uv_timer_t *t)
{
	commit_flush(t->data);
}

void commit_prepare(struct pgc_pool *p)
{
	/* Also the small fixed statements every commit sends (the settings, the notification):
	 * sent unprepared, each was parsed and planned on every commit. */
	const char *all[] = { SQL_LOCK_AGENTS, SQL_LOCK_SUBS, SQL_REEVAL_INFO, SQL_COMPLETE,
	                      SQL_REEVAL, SQL_REEVAL_MATCHES, SQL_AGENTS, SQL_REJECT, SQL_FAIL,
	                      SQL_VERDICTS, SQL_RESTORE, SQL_KEYED_PLANS, SQL_NO_STATEMENT_TIMEOUT,
	                      NOTIFY_SQL };
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		pgc_pool_prepare(p, all[i]);
}

void commit_flush(struct worker *w)
{
	while (w->commits_inflight < w->max_commits && w->commit_q.n > 0 &&
	       w->state != W_STOPPING) {
		/* Batch size and whether to wait: cplan_batch_size, cplan_batch_wait (the rules of
		 * ARBITER_COMMIT_OVERLAP_MIN and ARBITER_COMMIT_DELAY_MS are there). */
		int n = cplan_batch_size(w->commit_q.head, w->cfg->batch_max);
		uint64_t age = uv_now(w->loop) - w->commit_q.head->commit_queued_at;
		uint64_t wait = cplan_batch_wait(n, w->cfg->batch_max, w->cfg->commit_overlap_min,
		                                 w->cfg->commit_delay_ms, w->commits_inflight, age,
		                                 w->state == W_RUNNING);
		if (wait > 0) {
			if (!uv_is_active((uv_handle_t *)&w->t_commit))
				uv_timer_start(&w->t_commit, commit_timer_cb, wait, 0);
			return;
		}
		struct cbatch *b = xcalloc(1, sizeof *b + (size_t)n * sizeof b->jobs[0]);
		b->w = w;
		b->n = n;
		for (int i = 0; i < n; i++) {
			struct job *j = jobq_pop(&w->commit_q);
			job_set_state(j, JOB_COMMIT_CONN);
			b->jobs[i] = j;
		}
		w->commits_inflight++;
		if (pgc_acquire(w->pg, on_conn, b) < 0) {
			struct pgc_result fake = { 0 };
			fake.err = "database pool closed";
			fake.transient = true;
			commit_failed(b, &fake);
			return;
		}
	}
}
