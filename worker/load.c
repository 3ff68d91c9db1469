/*
 * load: the load and check stages. Jobs queued in w->load_q are loaded in
 * batches (one pipelined transaction: the submissions with their match and
 * challenge, then each distinct challenge's spec and ground truth, parsed once
 * in w->specs), then checked in the order of worker/README.md "Validation before
 * scoring" (duplicates, attempts used up, match owner, expiry, status, spec);
 * a job that passes goes on to the evaluate stage (eval.h). Event-loop thread
 * only.
 */
#include "load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commit.h"
#include "eval.h"
#include "jarena.h"
#include "log.h"
#include "metrics.h"
#include "pgc.h"
#include "util.h"

#define LOAD_BATCH_MAX 256

/* Unix ms of a timestamptz column, clamped to ±9e15 (about year 287,000):
 * 'infinity' and '-infinity' are valid timestamps (an API server may write
 * expires_at = 'infinity' for "never") and must not make the query fail. */
#define SQL_MS(col) "floor(LEAST(GREATEST(extract(epoch FROM " col "), -9e12), 9e12) * 1000)::int8"

/* One row per submission, times as Unix ms; the challenge texts come from the
 * second statement, once per distinct challenge of the batch.
 *
 * Both are prepared once per connection and run their generic plan (SQL_KEYED_PLANS), made
 * with the statistics of that moment. Written as joins on `s.id = ANY($1)`, a plan made
 * while the tables were small read every match (a sequential scan under a hash join) or
 * every submission (a whole index, filtered) on each batch, so loading grew with the
 * history (test_commit_plans). So each id is looked up on its own, by its primary key: a
 * LATERAL subquery with OFFSET 0 is not flattened into the join, so it runs once per id
 * with the id as its key; and both statements run in one pipelined transaction after
 * SQL_KEYED_PLANS (commit.h), so that no plan of theirs scans a table whole. */
#define SQL_LOAD_ROWS(cols_s, cols_m) \
	"FROM (SELECT DISTINCT u.id FROM unnest($1::uuid[]) AS u(id)) u " \
	"CROSS JOIN LATERAL (SELECT " cols_s " FROM submissions x WHERE x.id = u.id OFFSET 0) s " \
	"CROSS JOIN LATERAL (SELECT " cols_m " FROM matches x WHERE x.id = s.match_id OFFSET 0) m "
static const char SQL_LOAD[] =
	"SELECT s.id, s.status, s.agent_id, s.match_id, host(s.source_ip), s.answer::text, "
	"s.metadata::text, " SQL_MS("s.submitted_at") ", s.attempts, "
	"m.agent_id, m.status, " SQL_MS("m.started_at") ", "
	SQL_MS("m.expires_at") ", s.submitted_at > m.expires_at, "
	"m.attempt_number, m.memoryless, m.challenge_id, c.difficulty, c.rating, c.time_limit_secs "
	SQL_LOAD_ROWS("x.id, x.status, x.agent_id, x.match_id, x.source_ip, x.answer, x.metadata, "
	              "x.submitted_at, x.attempts",
	              "x.agent_id, x.status, x.started_at, x.expires_at, x.attempt_number, "
	              "x.memoryless, x.challenge_id")
	"CROSS JOIN LATERAL (SELECT x.difficulty, x.rating, x.time_limit_secs FROM challenges x "
	"WHERE x.id = m.challenge_id OFFSET 0) c";
static const char SQL_LOAD_CHALLENGES[] =
	"SELECT c.id, c.scoring_spec::text, c.ground_truth::text FROM challenges c "
	"WHERE c.id IN (SELECT m.challenge_id "
	SQL_LOAD_ROWS("x.match_id", "x.challenge_id") ")";

struct lbatch {
	struct worker *w;
	int n;
	struct job *jobs[];
};

static void copy_text(char *dst, size_t n, PGresult *res, int row, int col)
{
	snprintf(dst, n, "%s", PQgetisnull(res, row, col) ? "" : PQgetvalue(res, row, col));
}

static bool get_bool(PGresult *res, int row, int col)
{
	return !PQgetisnull(res, row, col) && PQgetvalue(res, row, col)[0] == 't';
}

/* Parses the answer or metadata text of a row. jsonb is valid JSON, so a value jansson
 * refuses (too deep, a number beyond a double) is the submission's doing: it reads as
 * `fallback` and the reason goes to r->unreadable (README, Worker, step 3). */
static json_t *load_input(struct job_row *r, const char *what, const char *text, size_t len,
                          json_t *fallback)
{
	json_error_t jerr;
	/* A large document's values in one arena (common/jarena.h): freed together, not one by
	 * one; it lives until the last of them is freed, wherever that happens. */
	struct jarena *a = jarena_begin_for(len);
	json_t *v = job_json_load(text, len, &jerr);
	jarena_end(a);
	if (v) {
		json_decref(fallback);
		return v;
	}
	size_t n = strlen(r->unreadable);
	snprintf(r->unreadable + n, sizeof r->unreadable - n, "%sthe %s cannot be read (%s): scored as %s",
	         n ? "; " : "", what, jerr.text, json_is_null(fallback) ? "null" : "{}");
	return fallback;
}

/* Fills j->row from row i (an unreadable answer or metadata is not an error: see
 * load_input). */
static void fill_row(struct job *j, PGresult *res, int i)
{
	struct job_row *r = &j->row;

	r->status = job_status_parse(PQgetisnull(res, i, 1) ? "" : PQgetvalue(res, i, 1));
	copy_text(r->agent_id, sizeof r->agent_id, res, i, 2);
	copy_text(r->match_id, sizeof r->match_id, res, i, 3);
	r->source_ip = PQgetisnull(res, i, 4) ? NULL : xstrdup(PQgetvalue(res, i, 4));
	r->submitted_ms = pgc_get_i64(res, i, 7);
	r->attempts = (int)pgc_get_i64(res, i, 8);
	copy_text(r->match_agent_id, sizeof r->match_agent_id, res, i, 9);
	r->match_status = job_status_parse(PQgetisnull(res, i, 10) ? "" : PQgetvalue(res, i, 10));
	r->started_ms = pgc_get_i64(res, i, 11);
	r->expires_ms = pgc_get_i64(res, i, 12);
	r->expired = get_bool(res, i, 13);
	r->attempt_number = (int)pgc_get_i64(res, i, 14);
	r->memoryless = get_bool(res, i, 15);
	copy_text(r->challenge_id, sizeof r->challenge_id, res, i, 16);
	copy_text(r->difficulty, sizeof r->difficulty, res, i, 17);
	r->has_rating = !PQgetisnull(res, i, 18);
	r->rating = (int)pgc_get_i64(res, i, 18);
	r->time_limit_secs = (int)pgc_get_i64(res, i, 19);
	/* The answer and metadata are only needed to evaluate: final submissions
	 * (duplicates) skip the parse. */
	if (j->kind == JOB_EVALUATE && job_status_final(r->status))
		return;
	r->input_bytes = (size_t)PQgetlength(res, i, 5) + (size_t)PQgetlength(res, i, 6);
	r->unreadable[0] = '\0';
	r->answer = load_input(r, "answer", PQgetvalue(res, i, 5), (size_t)PQgetlength(res, i, 5),
	                       json_null());
	r->metadata = load_input(r, "metadata", PQgetvalue(res, i, 6),
	                         (size_t)PQgetlength(res, i, 6), json_object());
	if (r->unreadable[0])
		LOGW(j->sub, j->id, "%s", r->unreadable);
}

static void after_load(struct worker *w, struct job *j);

/* A load batch failed: each job again (alone if one row may be the cause), or its own
 * failure. Frees b. */
static void load_failed(struct worker *w, struct lbatch *b, const struct pgc_result *r)
{
	char err[512];
	/* A load that timed out (the server's statement_timeout, 57014, or our
	 * own query timeout): one row may be too large or too slow to read. In
	 * a batch, load each job alone (not counted); alone, the timeout is
	 * the job's: counted, and after ARBITER_MAX_DELIVERIES it fails with
	 * the reason, instead of looping forever. */
	bool timed_out = !strcmp(r->sqlstate, "57014") || strstr(r->err, "query timeout");
	snprintf(err, sizeof err, "loading submissions failed: %s", r->err);
	if (timed_out && b->n == 1)
		snprintf(err, sizeof err, "loading the submission timed out on attempt %d of %d "
		         "(ARBITER_PG_QUERY_TIMEOUT_MS=%d; the server's statement_timeout is 9/10 of "
		         "it): its row is too large or too slow to read (%s)",
		         b->jobs[0]->attempts, w->cfg->max_deliveries, w->cfg->pg_query_timeout_ms,
		         r->err);
	if ((!r->transient || timed_out) && b->n > 1)
		LOGW(NULL, NULL, "%s: loading the %d jobs of the batch one by one", err, b->n);
	for (int i = 0; i < b->n; i++) {
		struct job *j = b->jobs[i];
		if (j->state == JOB_ABANDONED || w->state == W_STOPPING) {
			pipeline_drop(w, j);
		} else if (timed_out && b->n == 1) {
			pipeline_retry(w, j, STAGE_LOAD, true, err);
		} else if ((!r->transient || timed_out) && b->n > 1) {
			/* Something in one row breaks the query: find which, without
			 * holding up the others (nor using up their attempts). */
			j->load_solo = true;
			job_set_state(j, JOB_LOAD_WAIT);
			jobq_push(&w->load_q, j);
		} else {
			/* Alone, a non-transient error is this job's: it uses up
			 * attempts and ends failed instead of looping forever. */
			pipeline_retry(w, j, STAGE_LOAD, !r->transient, err);
		}
	}
	free(b);
	pipeline_kick(w);
}

static void on_load(const struct pgc_result *r, void *data)
{
	struct lbatch *b = data;
	struct worker *w = b->w;

	w->loads_inflight--;
	if (r->err) {
		load_failed(w, b, r);
		return;
	}

	PGresult *rows = r->res[2], *chs = r->res[3];   /* BEGIN, plans, rows, challenges, COMMIT */
	int nrows = PQntuples(rows), nch = PQntuples(chs);
	struct spec_entry **ents = xcalloc((size_t)nch + 1, sizeof *ents);
	for (int c = 0; c < nch; c++)
		ents[c] = speccache_get(&w->specs, PQgetvalue(chs, c, 0), PQgetvalue(chs, c, 1),
		                   (size_t)PQgetlength(chs, c, 1), PQgetvalue(chs, c, 2),
		                   (size_t)PQgetlength(chs, c, 2));

	for (int i = 0; i < b->n; i++) {
		struct job *j = b->jobs[i];
		int row = -1;
		if (j->state == JOB_ABANDONED) {
			pipeline_drop(w, j);
			continue;
		}
		j->load_solo = false;
		for (int k = 0; k < nrows; k++)
			if (!strcmp(PQgetvalue(rows, k, 0), j->sub)) {
				row = k;
				break;
			}
		if (row < 0) {
			LOGW(j->sub, j->id, "submission not found: dead-lettering");
			metrics_rejected("submission_not_found");
			pipeline_to_ack(w, j, ACK_DEAD, "submission_not_found", OUTCOME_DEAD_LETTERED);
			continue;
		}
		fill_row(j, rows, row);
		for (int c = 0; c < nch; c++)
			if (!strcmp(ents[c]->challenge_id, j->row.challenge_id)) {
				j->spec = ents[c];
				j->spec->refs++;
				break;
			}
		after_load(w, j);
	}
	for (int c = 0; c < nch; c++)
		speccache_unref(ents[c]);
	free(ents);
	free(b);
	pipeline_kick(w);
}

void load_flush(struct worker *w)
{
	while (w->loads_inflight < w->max_loads && w->load_q.n > 0 && w->state != W_STOPPING) {
		int n = 0;
		struct job *x = w->load_q.head;
		if (x->load_solo)
			n = 1;
		else
			for (; x && !x->load_solo && n < LOAD_BATCH_MAX; x = x->qnext)
				n++;
		struct lbatch *b = xmalloc(sizeof *b + (size_t)n * sizeof b->jobs[0]);
		struct strbuf arr = { 0 };

		b->w = w;
		b->n = n;
		strbuf_addlit(&arr, "{");
		for (int i = 0; i < n; i++) {
			struct job *j = jobq_pop(&w->load_q);
			job_set_state(j, JOB_LOADING);
			b->jobs[i] = j;
			if (i)
				strbuf_addlit(&arr, ",");
			strbuf_add(&arr, j->sub, strlen(j->sub));
		}
		strbuf_addlit(&arr, "}");
		const char *params[] = { arr.buf };
		struct pgc_stmt st[] = {
			{ "BEGIN", 0, NULL },
			{ SQL_KEYED_PLANS, 0, NULL },
			{ SQL_LOAD, 1, params },
			{ SQL_LOAD_CHALLENGES, 1, params },
			{ "COMMIT", 0, NULL },
		};
		w->loads_inflight++;
		int rc = pgc_run(w->pg, st, (int)(sizeof st / sizeof st[0]), on_load, b);
		strbuf_free(&arr);
		if (rc < 0) {
			w->loads_inflight--;
			for (int i = 0; i < n; i++)
				pipeline_retry(w, b->jobs[i], STAGE_LOAD, false, "database pool closed");
			free(b);
			return;
		}
	}
}
/* worker/README.md "Validation before scoring" in order, then the rate limit and the evaluation. */
static void after_load(struct worker *w, struct job *j)
{
	struct job_row *r = &j->row;

	if (j->kind == JOB_EVALUATE && job_status_final(r->status)) {
		LOGD(j->sub, j->id, "duplicate delivery: submission already %s",
		     job_status_name(r->status));
		pipeline_to_ack(w, j, ACK_PLAIN, NULL, OUTCOME_DUPLICATE);
		return;
	}
	if (j->kind == JOB_REEVALUATE && r->status != ST_COMPLETED) {
		LOGW(j->sub, j->id, "reevaluate: submission is %s, not completed: dead-lettering",
		     job_status_name(r->status));
		pipeline_to_ack(w, j, ACK_DEAD, "reevaluate_without_result", OUTCOME_DEAD_LETTERED);
		return;
	}
	/* submissions.attempts counts the attempts at evaluating the submission
	 * (across deliveries and processes). A re-evaluation is a new job: its
	 * attempts are its own deliveries, whatever the first evaluation took.
	 * The stored count is the API server's row: one at or beyond ARBITER_MAX_DELIVERIES
	 * (up to INT_MAX) has used its attempts up, and is compared, never incremented. */
	if (j->kind == JOB_EVALUATE && r->attempts >= w->cfg->max_deliveries) {
		char why[128];
		snprintf(why, sizeof why, "attempted %d times (ARBITER_MAX_DELIVERIES %d)",
		         r->attempts, w->cfg->max_deliveries);
		j->attempts = r->attempts;
		pipeline_fail(w, j, j->last_error ? j->last_error : why);
		return;
	}
	if (j->kind == JOB_EVALUATE && r->attempts >= j->attempts)
		j->attempts = r->attempts + 1;   /* r->attempts < max_deliveries <= 1000 here */
	if (j->attempts > w->cfg->max_deliveries) {
		char why[128];
		snprintf(why, sizeof why, "attempted %d times (ARBITER_MAX_DELIVERIES %d)",
		         j->attempts - 1, w->cfg->max_deliveries);
		j->attempts--;
		pipeline_fail(w, j, j->last_error ? j->last_error : why);
		return;
	}
	if (j->kind == JOB_EVALUATE) {
		if (strcmp(r->agent_id, r->match_agent_id)) {
			pipeline_reject(w, j, REASON_NOT_MATCH_OWNER, NULL);
			return;
		}
		if (r->expired) {
			pipeline_reject(w, j, REASON_MATCH_EXPIRED, NULL);
			return;
		}
		if (r->match_status != ST_ACTIVE) {
			pipeline_reject(w, j, REASON_MATCH_NOT_ACTIVE, NULL);
			return;
		}
	}
	if (!j->spec || !j->spec->spec) {
		const char *msg = j->spec ? j->spec->err : "challenge not found";
		if (j->kind == JOB_EVALUATE) {
			pipeline_reject(w, j, REASON_INVALID_SPEC, msg);
		} else {
			job_set_error(j, msg);
			LOGW(j->sub, j->id, "reevaluate: invalid spec: %s", msg);
			pipeline_to_ack(w, j, ACK_DEAD, "invalid_spec", OUTCOME_DEAD_LETTERED);
		}
		return;
	}
	eval_start(w, j);
}

void load_prepare(struct pgc_pool *p)
{
	pgc_pool_prepare(p, SQL_LOAD);
	pgc_pool_prepare(p, SQL_LOAD_CHALLENGES);
}
