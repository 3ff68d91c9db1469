/*
 * commit: the exactly-once commit of sql/README.md, for many jobs per
 * transaction.
 *
 * A batch is one reserved connection and two pipelined round trips:
 *   1. BEGIN; lock the batch's agents (FOR NO KEY UPDATE, ascending id), then
 *      its submissions (same, ascending id) and read, under those locks, each
 *      submission's status and match status and, for reevaluations, the
 *      original result and what the match's Elo change is now.
 *   2. Elo is computed here, sequentially in batch order (an agent seen twice
 *      is updated twice, in order), then one statement per kind of write
 *      (data-modifying CTEs over jsonb_to_recordset: results, dimensions,
 *      matches, elo_history, submissions), the agents' final rows, COMMIT.
 * Every writer locks agents before submissions, and always in ascending id
 * order, so batches from any number of replicas never deadlock; if
 * PostgreSQL reports one anyway the batch is retried. A submission found
 * final under the lock is a duplicate: nothing is written for it.
 * Only after COMMIT are the entries acknowledged (worker.c, one MULTI).
 * A batch that fails with a non-transient error is retried one job per
 * transaction, so one bad evaluation cannot sink the others.
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
#include "pgc.h"
#include "worker.h"

struct agent_state {
	char id[37];
	int elo, mc, win, draw, loss, cs, bs;
	bool touched;
};

struct sub_state {
	char id[37];
	char status[16], match_status[16];
};

struct reeval_info {
	bool found, has_result, job_exists, has_before;
	int elo_before, k, eff_change, max_seq, opponent, match_elo_before;
};

struct match_adj {
	char id[37];
	int eff, elo_before;
	struct job *last;          /* the reevaluation whose outcome the match shows */
};

struct cbatch {
	struct worker *w;
	struct pgc_conn *conn;
	int n;
	int idx_agents, idx_subs, idx_reeval;
	struct job *jobs[];
};

static const char SQL_LOCK_AGENTS[] =
	"SELECT id, elo, match_count, win_count, draw_count, loss_count, current_streak, "
	"best_streak FROM agents WHERE id = ANY($1::uuid[]) ORDER BY id FOR NO KEY UPDATE";

static const char SQL_LOCK_SUBS[] =
	"SELECT s.id, s.status, m.status FROM submissions s JOIN matches m ON m.id = s.match_id "
	"WHERE s.id = ANY($1::uuid[]) ORDER BY s.id FOR NO KEY UPDATE OF s";

/* Under the submission locks: the first result and the match's current
 * (effective) Elo change, for reevaluations. */
static const char SQL_REEVAL_INFO[] =
	"SELECT q.ord, r.id IS NOT NULL, COALESCE(r.elo_before, m.elo_before), "
	"COALESCE(r.k_factor, h.k_factor), COALESCE(m.elo_change, r.elo_change, 0), "
	"(SELECT max(x.eval_seq) FROM evaluation_results x WHERE x.submission_id = q.sub), "
	"EXISTS (SELECT 1 FROM evaluation_results y WHERE y.submission_id = q.sub "
	"AND y.job_id = q.job), h.opponent_elo, m.elo_before "
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
 * behind a fresh backlog and would make the planner scan all of it). */
static const char SQL_COMPLETE[] =
	"WITH j AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(sub uuid, mat uuid, "
	"agent uuid, job text, ev text, sc int, rs text, vf bool, res jsonb, log jsonb, "
	"dims jsonb, st bigint, ct bigint, att int, eb int, ea int, ec int, k int, opp int, "
	"bonus numeric, ord int)), "
	"s AS (UPDATE submissions t SET status = 'completed', "
	"attempts = GREATEST(t.attempts, j.att) FROM j "
	"WHERE t.id = ANY($3::uuid[]) AND t.id = j.sub RETURNING t.id), "
	"r AS (INSERT INTO evaluation_results (submission_id, eval_seq, job_id, evaluator, score, "
	"result, score_breakdown, submission_warnings, constraint_violations, verified, "
	"evaluation_log, worker_id, started_at, completed_at, elo_before, elo_change, k_factor) "
	"SELECT j.sub, 1, j.job, j.ev, j.sc, j.rs, COALESCE(j.res->'score_breakdown', '{}'), "
	"COALESCE(j.res->'submission_warnings', '[]'), "
	"COALESCE(j.res->'constraint_violations', '[]'), j.vf, j.log, $2, "
	"to_timestamp(j.st / 1000.0), clock_timestamp(), j.eb, j.ec, j.k "
	"FROM j JOIN s ON s.id = j.sub ORDER BY j.ord RETURNING id, submission_id), "
	"d AS (INSERT INTO evaluation_dimensions (result_id, key, score, weight, weighted, detail) "
	"SELECT r.id, x.key, x.score, x.weight, x.weighted, x.detail FROM r "
	"JOIN j ON j.sub = r.submission_id, jsonb_to_recordset(j.dims) AS x(key text, score int, "
	"weight numeric, weighted numeric, detail jsonb)), "
	"m AS (UPDATE matches t SET status = 'completed', result = j.rs, score = j.sc, "
	"verified = j.vf, elo_before = j.eb, elo_after = j.ea, elo_change = j.ec, "
	"completed_at = clock_timestamp() FROM j JOIN s ON s.id = j.sub "
	"WHERE t.id = j.mat), "
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
	"UPDATE submissions t SET status = 'failed', last_error = x.err, "
	"attempts = GREATEST(t.attempts, x.att) "
	"FROM jsonb_to_recordset($1::jsonb) AS x(sub uuid, err text, att int) "
	"WHERE t.id = ANY($2::uuid[]) AND t.id = x.sub";

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
	strbuf_add(out, "{", 1);
	for (int i = 0, k = 0; i < n; i++) {
		if (i && !strcmp(ids[i], ids[i - 1]))
			continue;
		if (k++)
			strbuf_add(out, ",", 1);
		strbuf_add(out, ids[i], strlen(ids[i]));
	}
	strbuf_add(out, "}", 1);
}

static bool touches_agent(const struct job *j)
{
	return j->op == OP_COMPLETE || (j->op == OP_REEVAL && j->elo == JOB_ELO_ADJUST);
}

/* Does the submission row need a lock / a status check? */
static bool touches_sub(const struct job *j)
{
	return j->op == OP_COMPLETE || j->op == OP_REEVAL || j->op == OP_REJECT ||
	       (j->op == OP_FAIL && j->kind == JOB_EVALUATE);
}

static bool final_status(const char *s)
{
	return !strcmp(s, "completed") || !strcmp(s, "rejected") || !strcmp(s, "failed");
}

static enum elo_outcome elo_of(enum score_outcome o)
{
	return o == SCORE_WIN ? ELO_WIN : o == SCORE_DRAW ? ELO_DRAW : ELO_LOSS;
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
		strbuf_add(sb, "null", 4);
	}
}

/* The evaluation_log object: who evaluated, when, how long, and the
 * sandbox's tests / compile outcome. */
static void add_log(struct strbuf *sb, struct worker *w, const struct job *j)
{
	strbuf_add(sb, "{\"evaluator\":", 13);
	job_json_str(sb, worker_evaluator(j) ? worker_evaluator(j) : "unknown");
	strbuf_add(sb, ",\"kind\":", 8);
	job_json_str(sb, j->kind == JOB_EVALUATE ? "evaluate" : "reevaluate");
	if (j->kind == JOB_REEVALUATE) {
		strbuf_add(sb, ",\"elo\":", 7);
		job_json_str(sb, j->elo == JOB_ELO_ADJUST ? "adjust" : "keep");
	}
	strbuf_add(sb, ",\"job_id\":", 10);
	job_json_str(sb, j->id);
	strbuf_add(sb, ",\"worker_id\":", 13);
	job_json_str(sb, w->cfg->worker_id);
	strbuf_addf(sb, ",\"attempt\":%d,\"duration_ms\":%lld,\"challenge_id\":", j->attempts,
	            (long long)(j->eval_done_ms - j->eval_started_ms));
	job_json_str(sb, j->row.challenge_id);
	const json_t *extra = j->res.extra ? j->res.extra : j->extra;
	if (extra && json_is_object(extra)) {
		const char *k;
		json_t *v;
		json_object_foreach((json_t *)extra, k, v) {
			strbuf_add(sb, ",", 1);
			job_json_str(sb, k);
			strbuf_add(sb, ":", 1);
			add_json(sb, v);
		}
	}
	strbuf_add(sb, "}", 1);
}

static void add_dims(struct strbuf *sb, const struct job *j)
{
	strbuf_add(sb, "[", 1);
	for (size_t i = 0; i < j->res.ndims; i++) {
		const struct score_dim *d = &j->res.dims[i];
		if (i)
			strbuf_add(sb, ",", 1);
		strbuf_add(sb, "{\"key\":", 7);
		job_json_str(sb, d->key);
		strbuf_addf(sb, ",\"score\":%d,\"weight\":", d->score);
		add_dec(sb, d->weight);
		strbuf_add(sb, ",\"weighted\":", 12);
		add_dec(sb, d->weighted);
		strbuf_add(sb, ",\"detail\":", 10);
		add_json(sb, d->detail);
		strbuf_add(sb, "}", 1);
	}
	strbuf_add(sb, "]", 1);
}

/* Fields common to COMPLETE and REEVAL rows. */
static void add_eval_fields(struct strbuf *sb, struct worker *w, const struct job *j, int ord)
{
	strbuf_add(sb, "\"sub\":", 6);
	job_json_str(sb, j->sub);
	strbuf_add(sb, ",\"job\":", 7);
	job_json_str(sb, j->id);
	strbuf_add(sb, ",\"ev\":", 6);
	job_json_str(sb, worker_evaluator(j) ? worker_evaluator(j) : "unknown");
	strbuf_addf(sb, ",\"sc\":%d,\"rs\":\"%s\",\"vf\":%s,\"res\":", j->res.score,
	            score_outcome_name(j->res.result), j->res.verified ? "true" : "false");
	if (j->res_json)
		strbuf_add(sb, j->res_json, strlen(j->res_json));
	else
		strbuf_add(sb, "{}", 2);
	strbuf_add(sb, ",\"log\":", 7);
	add_log(sb, w, j);
	strbuf_add(sb, ",\"dims\":", 8);
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
	snprintf(why, sizeof why, "commit failed: %s%s%s", r->err ? r->err : "unknown error",
	         r->sqlstate[0] ? " SQLSTATE " : "", r->sqlstate);
	if (w->state == W_STOPPING) {
		for (int i = 0; i < b->n; i++)
			worker_retry(w, b->jobs[i], STAGE_COMMIT, false, why);
	} else if (r->transient) {
		/* Connection loss, timeout, deadlock: the whole batch again. A deadlock
		 * counts against a job only when it was alone in its transaction. */
		for (int i = 0; i < b->n; i++) {
			reset_job(b->jobs[i]);
			worker_retry(w, b->jobs[i], STAGE_COMMIT, deadlock && b->n == 1, why);
		}
	} else if (b->n > 1) {
		LOGW(NULL, NULL, "%s: retrying the %d jobs of the batch one by one", why, b->n);
		for (int i = b->n - 1; i >= 0; i--) {
			struct job *j = b->jobs[i];
			reset_job(j);
			j->solo = true;
			j->state = JOB_COMMIT_WAIT;
			jobq_push_front(&w->commit_q, j);
		}
	} else {
		struct job *j = b->jobs[0];
		reset_job(j);
		if (j->op == OP_FAIL) {
			LOGE(j->sub, j->id, "%s: cannot record the failure; dead-lettering it anyway", why);
			j->op_eff = OP_FAIL;
			worker_to_ack(w, j, ACK_DEAD, NULL, "failed");
		} else {
			worker_retry(w, j, STAGE_COMMIT, true, why);
		}
	}
	batch_free(b);
	worker_kick(w);
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
	for (int i = 0; i < b->n; i++) {
		struct job *j = b->jobs[i];
		j->committed = true;
		j->solo = false;
		if (j->duplicate) {
			LOGD(j->sub, j->id, "duplicate: the submission was already final");
			worker_to_ack(w, j, ACK_PLAIN, NULL, "duplicate");
			continue;
		}
		switch (j->op_eff) {
		case OP_COMPLETE:
		case OP_REEVAL:
			nev++;
			if (j->enqueued_at_ms > 0 && now >= j->enqueued_at_ms)
				metrics_e2e_seconds((double)(now - j->enqueued_at_ms) / 1000.0);
			if (j->op_eff == OP_COMPLETE)
				LOGI(j->sub, j->id, "completed: score %d %s, elo %d -> %d (%+d)", j->res.score,
				     score_outcome_name(j->res.result), j->eu.before, j->eu.after,
				     j->eu.change);
			else
				LOGI(j->sub, j->id, "reevaluated (eval_seq %d, elo %s): score %d %s%s",
				     j->eval_seq, j->elo == JOB_ELO_ADJUST ? "adjust" : "keep", j->res.score,
				     score_outcome_name(j->res.result),
				     j->elo == JOB_ELO_ADJUST ? "" : ", rating unchanged");
			worker_to_ack(w, j, ACK_PLAIN, NULL, "completed");
			break;
		case OP_REJECT:
			worker_to_ack(w, j, ACK_PLAIN, NULL, "rejected");
			break;
		case OP_FAIL:
			worker_to_ack(w, j, ACK_DEAD, NULL, "failed");
			break;
		default:
			/* Decided under the lock: a reevaluation with nothing to reevaluate. */
			worker_to_ack(w, j, ACK_DEAD, "reevaluate_without_result", "dead_lettered");
			break;
		}
	}
	if (nev)
		metrics_commit_batch(nev);
	batch_free(b);
	worker_kick(w);
}

static struct agent_state *find_agent(struct agent_state *a, int n, const char *id)
{
	int lo = 0, hi = n - 1;
	while (lo <= hi) {
		int mid = (lo + hi) / 2, c = strcmp(a[mid].id, id);
		if (!c)
			return &a[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return NULL;
}

static struct sub_state *find_sub(struct sub_state *s, int n, const char *id)
{
	int lo = 0, hi = n - 1;
	while (lo <= hi) {
		int mid = (lo + hi) / 2, c = strcmp(s[mid].id, id);
		if (!c)
			return &s[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return NULL;
}

static int geti(PGresult *res, int row, int col)
{
	return PQgetisnull(res, row, col) ? 0 : atoi(PQgetvalue(res, row, col));
}

static void on_phase1(const struct pgc_result *r, void *data)
{
	struct cbatch *b = data;
	struct worker *w = b->w;

	if (r->err) {
		commit_failed(b, r);
		return;
	}

	/* What the locks returned. */
	int na = 0, ns = 0;
	struct agent_state *ag = NULL;
	struct sub_state *ss = NULL;
	struct reeval_info *ri = xcalloc((size_t)b->n, sizeof *ri);
	if (b->idx_agents >= 0) {
		PGresult *res = r->res[b->idx_agents];
		na = PQntuples(res);
		ag = xcalloc((size_t)na + 1, sizeof *ag);
		for (int i = 0; i < na; i++) {
			snprintf(ag[i].id, sizeof ag[i].id, "%s", PQgetvalue(res, i, 0));
			ag[i].elo = geti(res, i, 1);
			ag[i].mc = geti(res, i, 2);
			ag[i].win = geti(res, i, 3);
			ag[i].draw = geti(res, i, 4);
			ag[i].loss = geti(res, i, 5);
			ag[i].cs = geti(res, i, 6);
			ag[i].bs = geti(res, i, 7);
		}
	}
	if (b->idx_subs >= 0) {
		PGresult *res = r->res[b->idx_subs];
		ns = PQntuples(res);
		ss = xcalloc((size_t)ns + 1, sizeof *ss);
		for (int i = 0; i < ns; i++) {
			snprintf(ss[i].id, sizeof ss[i].id, "%s", PQgetvalue(res, i, 0));
			snprintf(ss[i].status, sizeof ss[i].status, "%s", PQgetvalue(res, i, 1));
			snprintf(ss[i].match_status, sizeof ss[i].match_status, "%s",
			         PQgetvalue(res, i, 2));
		}
	}
	if (b->idx_reeval >= 0) {
		PGresult *res = r->res[b->idx_reeval];
		for (int i = 0; i < PQntuples(res); i++) {
			int ord = geti(res, i, 0);
			if (ord < 0 || ord >= b->n)
				continue;
			struct reeval_info *x = &ri[ord];
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
		}
	}

	/* Decide each job, in batch order within each pass (below). */
	const char **done_matches = xcalloc((size_t)b->n + 1, sizeof *done_matches);
	int ndone = 0;
	const char **decided = xcalloc((size_t)b->n + 1, sizeof *decided);
	int ndecided = 0;
	struct match_adj *madj = xcalloc((size_t)b->n + 1, sizeof *madj);
	int nmadj = 0;
	struct { const char *sub; int seq; } *seqs = xcalloc((size_t)b->n + 1, sizeof *seqs);
	int nseqs = 0;
	struct strbuf complete = { 0 }, reeval = { 0 }, reject = { 0 }, fail = { 0 };
	struct strbuf complete_ids = { 0 }, reject_ids = { 0 }, fail_ids = { 0 };
	int ncomplete = 0, nreeval = 0, nreject = 0, nfail = 0;

	/* Two passes: first evaluations (and rejections, failures), then
	 * re-evaluations. The rows are written in that order too (SQL_COMPLETE's
	 * elo_history rows before SQL_REEVAL's), so an agent's elo_history in id
	 * order is exactly the order its ratings were computed in: a sequential
	 * replay of it gives the agent's rating even when one batch holds both an
	 * evaluation and an elo=adjust re-evaluation of the same agent. */
	for (int pass = 0; pass < 2; pass++)
	for (int i = 0; i < b->n; i++) {
		struct job *j = b->jobs[i];
		if ((j->op == OP_REEVAL) != (pass == 1))
			continue;
		struct sub_state *st = touches_sub(j) ? find_sub(ss, ns, j->sub) : NULL;
		reset_job(j);
		j->op_eff = j->op;

		if (touches_sub(j) && !st) {
			/* The row vanished (deleted by hand): nothing to write. */
			j->duplicate = true;
			continue;
		}
		if ((j->op == OP_COMPLETE || j->op == OP_REJECT ||
		     (j->op == OP_FAIL && j->kind == JOB_EVALUATE)) && st && final_status(st->status)) {
			j->duplicate = true;
			continue;
		}
		if (j->op != OP_REEVAL && touches_sub(j)) {
			/* The same submission twice in one batch: the first decides. */
			bool seen = false;
			for (int k = 0; k < ndecided && !seen; k++)
				seen = !strcmp(decided[k], j->sub);
			if (seen) {
				j->duplicate = true;
				continue;
			}
			decided[ndecided++] = j->sub;
		}
		if (j->op == OP_COMPLETE) {
			bool taken = strcmp(st->match_status, "active") != 0;
			for (int k = 0; k < ndone && !taken; k++)
				taken = !strcmp(done_matches[k], j->row.match_id);
			if (taken) {
				j->op_eff = OP_REJECT;
				j->reason = "match_not_active";
				LOGI(j->sub, j->id, "rejected: match_not_active (another submission of the "
				     "match completed first)");
			}
		}
		switch (j->op_eff) {
		case OP_COMPLETE: {
			struct agent_state *a = find_agent(ag, na, j->row.agent_id);
			if (!a) {
				j->duplicate = true;   /* agent row gone: cannot happen with the FKs */
				continue;
			}
			int opp = elo_opponent(j->row.difficulty, j->row.has_rating, j->row.rating);
			if (opp < 0)
				opp = 1000;
			elo_compute(a->elo, a->mc, opp, elo_of(j->res.result), j->res.verified,
			            j->row.memoryless, j->row.attempt_number, &j->eu);
			a->elo = j->eu.after;
			a->mc++;
			if (j->res.result == SCORE_WIN) {
				a->win++;
				a->cs++;
			} else {
				if (j->res.result == SCORE_DRAW)
					a->draw++;
				else
					a->loss++;
				a->cs = 0;
			}
			if (a->cs > a->bs)
				a->bs = a->cs;
			a->touched = true;
			done_matches[ndone++] = j->row.match_id;

			strbuf_add(&complete_ids, ncomplete ? "," : "{", 1);
			strbuf_add(&complete_ids, j->sub, strlen(j->sub));
			strbuf_add(&complete, ncomplete++ ? ",{" : "[{", 2);
			add_eval_fields(&complete, w, j, i);
			strbuf_add(&complete, ",\"mat\":", 7);
			job_json_str(&complete, j->row.match_id);
			strbuf_add(&complete, ",\"agent\":", 9);
			job_json_str(&complete, j->row.agent_id);
			strbuf_addf(&complete, ",\"att\":%d,\"eb\":%d,\"ea\":%d,\"ec\":%d,\"k\":%d,"
			            "\"opp\":%d,\"bonus\":%s}", j->attempts, j->eu.before, j->eu.after,
			            j->eu.change, j->eu.k, j->eu.opponent, bonus_text(j->eu.bonus_tenths));
			break;
		}
		case OP_REEVAL: {
			struct reeval_info *x = &ri[i];
			if (!x->found || !x->has_result) {
				j->op_eff = OP_NONE;    /* dead-lettered: nothing to reevaluate */
				continue;
			}
			if (x->job_exists) {
				j->duplicate = true;
				continue;
			}
			int seq = x->max_seq;
			for (int k = 0; k < nseqs; k++)
				if (!strcmp(seqs[k].sub, j->sub) && seqs[k].seq > seq)
					seq = seqs[k].seq;
			j->eval_seq = seq + 1;
			seqs[nseqs].sub = j->sub;
			seqs[nseqs++].seq = j->eval_seq;

			/* The change this evaluation implies, from the original rating and K. */
			int opp = x->opponent >= 0 ? x->opponent
			          : elo_opponent(j->row.difficulty, j->row.has_rating, j->row.rating);
			if (opp < 0)
				opp = 1000;
			int k = x->k == 32 || x->k == 16 ? x->k : 32;
			bool adjust = j->elo == JOB_ELO_ADJUST && x->has_before;
			if (x->has_before)
				elo_compute(x->elo_before, k == 32 ? 0 : 30, opp, elo_of(j->res.result),
				            j->res.verified, j->row.memoryless, j->row.attempt_number, &j->eu);
			else
				memset(&j->eu, 0, sizeof j->eu);
			j->hist_before = j->hist_after = j->hist_change = 0;
			if (adjust) {
				struct agent_state *a = find_agent(ag, na, j->row.agent_id);
				struct match_adj *m = NULL;
				for (int q = 0; q < nmadj; q++)
					if (!strcmp(madj[q].id, j->row.match_id))
						m = &madj[q];
				if (!m) {
					m = &madj[nmadj++];
					snprintf(m->id, sizeof m->id, "%s", j->row.match_id);
					m->eff = x->eff_change;
					m->elo_before = x->match_elo_before;
				}
				if (!a) {
					adjust = false;
				} else {
					int delta = j->eu.change - m->eff;
					int nr = a->elo + delta;
					if (nr < 100)
						nr = 100;
					j->hist_before = a->elo;
					j->hist_after = nr;
					j->hist_change = nr - a->elo;
					a->elo = nr;
					a->touched = true;
					m->eff += j->hist_change;
					m->last = j;
				}
			}
			strbuf_add(&reeval, nreeval++ ? ",{" : "[{", 2);
			add_eval_fields(&reeval, w, j, i);
			strbuf_addf(&reeval, ",\"seq\":%d", j->eval_seq);
			if (x->has_before)
				strbuf_addf(&reeval, ",\"eb\":%d,\"ec\":%d,\"k\":%d", j->eu.before,
				            j->eu.change, j->eu.k);
			strbuf_addf(&reeval, ",\"adj\":%s,\"agent\":", adjust ? "true" : "false");
			job_json_str(&reeval, j->row.agent_id);
			strbuf_add(&reeval, ",\"mat\":", 7);
			job_json_str(&reeval, j->row.match_id);
			strbuf_addf(&reeval, ",\"hb\":%d,\"ha\":%d,\"hc\":%d,\"opp\":%d,\"bonus\":%s}",
			            j->hist_before, j->hist_after, j->hist_change, opp,
			            bonus_text(j->eu.bonus_tenths ? j->eu.bonus_tenths : 10));
			break;
		}
		case OP_REJECT:
			strbuf_add(&reject_ids, nreject ? "," : "{", 1);
			strbuf_add(&reject_ids, j->sub, strlen(j->sub));
			strbuf_add(&reject, nreject++ ? ",{" : "[{", 2);
			strbuf_add(&reject, "\"sub\":", 6);
			job_json_str(&reject, j->sub);
			strbuf_add(&reject, ",\"reason\":", 10);
			job_json_str(&reject, j->reason);
			strbuf_add(&reject, ",\"err\":", 7);
			if (j->last_error && !strcmp(j->reason, "invalid_spec"))
				job_json_str(&reject, j->last_error);
			else
				strbuf_add(&reject, "null", 4);
			strbuf_add(&reject, "}", 1);
			break;
		case OP_FAIL:
			if (j->kind != JOB_EVALUATE)
				break;      /* a reevaluation leaves the submission as it is */
			strbuf_add(&fail_ids, nfail ? "," : "{", 1);
			strbuf_add(&fail_ids, j->sub, strlen(j->sub));
			strbuf_add(&fail, nfail++ ? ",{" : "[{", 2);
			strbuf_add(&fail, "\"sub\":", 6);
			job_json_str(&fail, j->sub);
			strbuf_add(&fail, ",\"err\":", 7);
			job_json_str(&fail, j->last_error ? j->last_error : "unknown error");
			strbuf_addf(&fail, ",\"att\":%d}", j->attempts);
			break;
		default:
			break;
		}
	}

	struct strbuf agents = { 0 }, matches = { 0 };
	int nagents = 0, nmatches = 0;
	for (int i = 0; i < na; i++) {
		if (!ag[i].touched)
			continue;
		strbuf_add(&agents, nagents++ ? ",{" : "[{", 2);
		strbuf_addf(&agents, "\"id\":\"%s\",\"elo\":%d,\"mc\":%d,\"w\":%d,\"d\":%d,\"l\":%d,"
		            "\"cs\":%d,\"bs\":%d}", ag[i].id, ag[i].elo, ag[i].mc, ag[i].win,
		            ag[i].draw, ag[i].loss, ag[i].cs, ag[i].bs);
	}
	for (int i = 0; i < nmadj; i++) {
		struct job *j = madj[i].last;
		if (!j)
			continue;
		strbuf_add(&matches, nmatches++ ? ",{" : "[{", 2);
		strbuf_addf(&matches, "\"id\":\"%s\",\"rs\":\"%s\",\"sc\":%d,\"vf\":%s,\"ec\":%d,"
		            "\"ea\":%d}", madj[i].id, score_outcome_name(j->res.result), j->res.score,
		            j->res.verified ? "true" : "false", madj[i].eff,
		            madj[i].elo_before + madj[i].eff);
	}
	if (ncomplete) {
		strbuf_add(&complete, "]", 1);
		strbuf_add(&complete_ids, "}", 1);
	}
	if (nreeval)
		strbuf_add(&reeval, "]", 1);
	if (nreject) {
		strbuf_add(&reject, "]", 1);
		strbuf_add(&reject_ids, "}", 1);
	}
	if (nfail) {
		strbuf_add(&fail, "]", 1);
		strbuf_add(&fail_ids, "}", 1);
	}
	if (nagents)
		strbuf_add(&agents, "]", 1);
	if (nmatches)
		strbuf_add(&matches, "]", 1);

	struct pgc_stmt st[8];
	const char *p_complete[] = { complete.buf, w->cfg->worker_id, complete_ids.buf };
	const char *p_reeval[] = { reeval.buf, w->cfg->worker_id };
	const char *p_matches[] = { matches.buf };
	const char *p_agents[] = { agents.buf };
	const char *p_reject[] = { reject.buf, reject_ids.buf };
	const char *p_fail[] = { fail.buf, fail_ids.buf };
	int k = 0;
	if (ncomplete)
		st[k++] = (struct pgc_stmt){ SQL_COMPLETE, 3, p_complete };
	if (nreeval)
		st[k++] = (struct pgc_stmt){ SQL_REEVAL, 2, p_reeval };
	if (nmatches)
		st[k++] = (struct pgc_stmt){ SQL_REEVAL_MATCHES, 1, p_matches };
	if (nagents)
		st[k++] = (struct pgc_stmt){ SQL_AGENTS, 1, p_agents };
	if (nreject)
		st[k++] = (struct pgc_stmt){ SQL_REJECT, 2, p_reject };
	if (nfail)
		st[k++] = (struct pgc_stmt){ SQL_FAIL, 2, p_fail };
	st[k++] = (struct pgc_stmt){ SQL_COMMIT, 0, NULL };

	int rc = pgc_send(b->conn, st, k, on_phase2, b);

	strbuf_free(&complete);
	strbuf_free(&complete_ids);
	strbuf_free(&reject_ids);
	strbuf_free(&fail_ids);
	strbuf_free(&reeval);
	strbuf_free(&reject);
	strbuf_free(&fail);
	strbuf_free(&agents);
	strbuf_free(&matches);
	free(done_matches);
	free(decided);
	free(madj);
	free(seqs);
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
		if (touches_agent(j) && j->row.agent_id[0])
			aids[na++] = j->row.agent_id;
		if (touches_sub(j))
			sids[ns++] = j->sub;
		if (j->op == OP_REEVAL) {
			strbuf_add(&re, nre++ ? ",{" : "[{", 2);
			strbuf_addf(&re, "\"ord\":%d,\"sub\":\"%s\",\"job\":", i, j->sub);
			job_json_str(&re, j->id);
			strbuf_add(&re, "}", 1);
		}
	}
	if (nre)
		strbuf_add(&re, "]", 1);
	id_array(aids, na, &a);
	id_array(sids, ns, &s);

	struct pgc_stmt st[4];
	const char *pa[] = { a.buf }, *ps[] = { s.buf }, *pr[] = { re.buf };
	int k = 0;
	st[k++] = (struct pgc_stmt){ SQL_BEGIN, 0, NULL };
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
	for (int i = 0; i < b->n; i++)
		b->jobs[i]->commit_waiting_conn = false;
	if (b->jobs[0]->state == JOB_ABANDONED) {
		/* Released at the drain deadline while it waited (every job of the
		 * batch was): nothing was sent, nothing is. */
		if (c)
			pgc_release(c);
		w->commits_inflight--;
		for (int i = 0; i < b->n; i++)
			worker_drop(w, b->jobs[i]);
		batch_free(b);
		worker_kick(w);
		return;
	}
	if (!c) {
		struct pgc_result fake = { 0 };
		fake.err = "database pool closing";
		fake.transient = true;
		commit_failed(b, &fake);
		return;
	}
	b->conn = c;
	phase1(b);
}

static void commit_timer_cb(uv_timer_t *t)
{
	commit_flush(t->data);
}

void commit_flush(struct worker *w)
{
	while (w->commits_inflight < w->max_commits && w->commit_q.n > 0 &&
	       w->state != W_STOPPING) {
		int n = 0, max = w->cfg->batch_max;
		struct job *x = w->commit_q.head;
		if (x->solo) {
			n = 1;
		} else {
			for (; x && !x->solo && n < max; x = x->qnext)
				n++;
		}
		/* ARBITER_COMMIT_DELAY_MS: while another commit runs, let a small batch
		 * fill up a little (fewer, larger transactions). */
		uint64_t age = uv_now(w->loop) - w->commit_q.head->commit_queued_at;
		if (n < max && w->commits_inflight > 0 && w->cfg->commit_delay_ms > 0 &&
		    age < (uint64_t)w->cfg->commit_delay_ms && w->state == W_RUNNING) {
			if (!uv_is_active((uv_handle_t *)&w->t_commit))
				uv_timer_start(&w->t_commit, commit_timer_cb,
				               (uint64_t)w->cfg->commit_delay_ms - age, 0);
			return;
		}
		struct cbatch *b = xcalloc(1, sizeof *b + (size_t)n * sizeof b->jobs[0]);
		b->w = w;
		b->n = n;
		for (int i = 0; i < n; i++) {
			struct job *j = jobq_pop(&w->commit_q);
			j->state = JOB_COMMITTING;
			b->jobs[i] = j;
		}
		w->commits_inflight++;
		for (int i = 0; i < n; i++)
			b->jobs[i]->commit_waiting_conn = true;
		if (pgc_acquire(w->pg, on_conn, b) < 0) {
			for (int i = 0; i < n; i++)
				b->jobs[i]->commit_waiting_conn = false;
			struct pgc_result fake = { 0 };
			fake.err = "database pool closed";
			fake.transient = true;
			commit_failed(b, &fake);
			return;
		}
	}
}
