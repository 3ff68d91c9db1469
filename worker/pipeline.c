/*
 * pipeline: the plumbing of the job pipeline (see pipeline.h): the live jobs,
 * the queues between the stages, retries with backoff, and the kick that
 * flushes the stages once per loop iteration.
 */
#include "pipeline.h"

#include "pgc.h"
#include "rq.h"
#include "sqlstate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "metrics.h"
#include "util.h"

#define BACKOFF_BASE_MS 100
#define BACKOFF_CAP_MS 5000          /* Redis / PostgreSQL unreachable */
#define LOCK_SKIP_BASE_MS 4          /* a row held by another commit: it ends within ms */
#define LOCK_SKIP_CAP_MS 256         /* ... or by an API server's longer transaction */

/* ---- small helpers ------------------------------------------------------------------- */

uint32_t pipeline_rand(struct worker *w)
{
	uint32_t x = w->rnd;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	w->rnd = x ? x : 0x9e3779b9u;
	return w->rnd;
}

void jobq_push(struct jobq *q, struct job *j)
{
	j->qnext = NULL;
	if (q->tail)
		q->tail->qnext = j;
	else
		q->head = j;
	q->tail = j;
	q->n++;
}

void jobq_push_front(struct jobq *q, struct job *j)
{
	j->qnext = q->head;
	q->head = j;
	if (!q->tail)
		q->tail = j;
	q->n++;
}

struct job *jobq_pop(struct jobq *q)
{
	struct job *j = q->head;
	if (!j)
		return NULL;
	q->head = j->qnext;
	if (!q->head)
		q->tail = NULL;
	j->qnext = NULL;
	q->n--;
	return j;
}

bool jobq_remove(struct jobq *q, struct job *j)
{
	struct job *prev = NULL;
	for (struct job *x = q->head; x; prev = x, x = x->qnext) {
		if (x != j)
			continue;
		if (prev)
			prev->qnext = x->qnext;
		else
			q->head = x->qnext;
		if (q->tail == x)
			q->tail = prev;
		x->qnext = NULL;
		q->n--;
		return true;
	}
	return false;
}

const char *pipeline_evaluator(const struct job *j)
{
	return j->spec ? spec_evaluator_name(j->spec->ev) : NULL;
}

/* ---- job list ------------------------------------------------------------------------ */

void pipeline_adopt(struct worker *w, struct job *j, enum job_stream s)
{
	j->w = w;
	j->stream = s;
	if (s == JOB_STREAM_LANE)
		pipeline_lane_hold(w, j);
	j->read_at = j->claimed_at = uv_now(w->loop);
	j->lprev = NULL;
	j->lnext = w->jobs;
	if (w->jobs)
		w->jobs->lprev = j;
	w->jobs = j;
	w->njobs++;
	metrics_inflight(w->njobs);
}

void pipeline_drop(struct worker *w, struct job *j)
{
	if (j->lprev)
		j->lprev->lnext = j->lnext;
	else
		w->jobs = j->lnext;
	if (j->lnext)
		j->lnext->lprev = j->lprev;
	w->njobs--;
	if (j->state == JOB_ABANDONED)
		w->nabandoned--;
	if (j->judge_headed) {
		j->judge_headed = false;
		w->judge_headed--;
	}
	pipeline_lane_release(w, j);
	metrics_inflight(w->njobs);
	speccache_unref(j->spec);
	j->spec = NULL;
	job_free(j);
	if (w->state == W_DRAINING)
		w->hooks.job_gone(w);
	else
		pipeline_kick(w);
}

struct job *pipeline_find(struct worker *w, enum job_stream s, const char *id)
{
	for (struct job *j = w->jobs; j; j = j->lnext)
		if (j->state != JOB_ABANDONED && j->stream == s && !strcmp(j->id, id))
			return j;
	return NULL;
}

/* ---- outcomes ------------------------------------------------------------------------ */

void pipeline_to_commit(struct worker *w, struct job *j)
{
	job_set_state(j, JOB_COMMIT_WAIT);
	j->commit_queued_at = uv_now(w->loop);
	jobq_push(&w->commit_q, j);
	pipeline_kick(w);
}

void pipeline_reject(struct worker *w, struct job *j, enum job_reason reason, const char *msg)
{
	j->op = OP_REJECT;
	j->reason = reason;
	job_set_error(j, msg);
	LOGI(j->sub, j->id, "rejected: %s%s%s", job_reason_name(reason), msg ? ": " : "",
	     msg ? msg : "");
	pipeline_to_commit(w, j);
}

void pipeline_to_ack(struct worker *w, struct job *j, enum job_ack ack, const char *reason,
                   enum job_outcome outcome)
{
	j->ack = ack;
	if (reason)
		j->ack_reason = reason;
	j->outcome = outcome;
	job_set_state(j, JOB_ACK_WAIT);
	jobq_push(&w->ack_q, j);
	pipeline_kick(w);
}

void pipeline_release(struct worker *w, struct job *j)
{
	if (j->kind == JOB_REEVALUATE && j->commit_unknown) {
		/* Its COMMIT may have gone through (the connection was lost while
		 * it ran). A re-evaluation is recognised by its entry id, and a
		 * released copy gets a new one: it would append a second result.
		 * Leave the entry pending instead; another worker reclaims it with
		 * the same id after ARBITER_CLAIM_IDLE_MS and finds it done. */
		LOGW(j->sub, j->id, "reevaluation with an unknown commit outcome: left pending for "
		     "another worker to reclaim, not released");
		pipeline_drop(w, j);
		return;
	}
	LOGD(j->sub[0] ? j->sub : NULL, j->id, "released back to the stream");
	pipeline_to_ack(w, j, ACK_RELEASE, NULL, OUTCOME_NONE);
}

void pipeline_fail(struct worker *w, struct job *j, const char *why)
{
	job_set_error(j, why ? why : "unknown error");
	LOGE(j->sub, j->id, "failed after %d attempt(s): %s", j->attempts, j->last_error);
	j->op = OP_FAIL;
	pipeline_to_commit(w, j);
}

/* ---- retries ------------------------------------------------------------------------- */

static void retry_cb(uv_timer_t *t);

void pipeline_arm_retry(struct worker *w)
{
	if (w->state == W_STOPPING)
		return;
	if (!w->retry_q.head) {
		uv_timer_stop(&w->t_retry);
		return;
	}
	uint64_t now = uv_now(w->loop), due = w->retry_q.head->retry_at;
	uv_timer_start(&w->t_retry, retry_cb, due > now ? due - now : 0, 0);
}

static void retry_insert(struct worker *w, struct job *j)
{
	struct jobq *q = &w->retry_q;
	struct job *prev = NULL, *x = q->head;
	while (x && x->retry_at <= j->retry_at) {
		prev = x;
		x = x->qnext;
	}
	j->qnext = x;
	if (prev)
		prev->qnext = j;
	else
		q->head = j;
	if (!x)
		q->tail = j;
	q->n++;
}

void pipeline_retry(struct worker *w, struct job *j, enum job_stage stage, bool counted,
                  const char *why)
{
	job_set_error(j, why ? why : "unknown error");
	if (counted) {
		if (j->attempts >= w->cfg->max_deliveries) {
			pipeline_fail(w, j, j->last_error);
			return;
		}
		j->attempts++;
		j->marked = false;   /* a sandbox job records the new attempt again */
	}
	/* Draining: work not started yet goes back to the stream; after the
	 * deadline everything not committed does. */
	if ((w->state != W_RUNNING && stage == STAGE_LOAD) ||
	    (w->drain_expired && stage != STAGE_ACK)) {
		pipeline_release(w, j);
		return;
	}
	j->retries++;
	/* A failure of the job itself waits ARBITER_RETRY_BASE_MS doubling per attempt up to
	 * ARBITER_RETRY_MAX_MS; an unreachable server is retried soon and for as long as it takes. */
	uint32_t d = counted ? job_backoff_ms(j->attempts - 1, (uint32_t)w->cfg->retry_base_ms,
	                                      (uint32_t)w->cfg->retry_max_ms, pipeline_rand(w))
	                     : job_backoff_ms(j->retries, BACKOFF_BASE_MS, BACKOFF_CAP_MS,
	                                      pipeline_rand(w));
	if (counted)
		LOGW(j->sub[0] ? j->sub : NULL, j->id, "%s; attempt %d of %d in %u ms", j->last_error,
		     j->attempts, w->cfg->max_deliveries, d);
	else
		LOGW(j->sub[0] ? j->sub : NULL, j->id, "%s; retrying in %u ms", j->last_error, d);
	/* A counted failure waits in the delayed set when it can: no slot held meanwhile, and
	 * a restart loses nothing. */
	if (counted && w->hooks.park && w->hooks.park(w, j, stage, d))
		return;
	pipeline_wait(w, j, stage, d);
}

bool pipeline_park_begin(struct worker *w, struct job *j, enum job_stage stage, uint32_t delay_ms)
{
	if (w->state == W_STOPPING || !w->ops || j->commit_unknown || j->poison || j->nf == 0 ||
	    !rq_connected(w->rq_cmd))
		return false;
	j->retry_stage = stage;
	j->retry_at = uv_now(w->loop) + delay_ms;    /* (for pipeline_parked's fallback) */
	job_set_state(j, JOB_BACKOFF);
	job_set_state(j, JOB_RATELIMIT);
	return true;
}

void pipeline_parked(struct worker *w, struct job *j, bool ok)
{
	if (j->state == JOB_ABANDONED || w->state == W_STOPPING) {
		pipeline_drop(w, j);
		return;
	}
	if (ok) {
		pipeline_drop(w, j);    /* its entry waits in the delayed set (or someone has it) */
		return;
	}
	/* Redis refused or is gone: wait here instead, until the planned time. */
	uint64_t now = uv_now(w->loop);
	pipeline_wait(w, j, j->retry_stage, j->retry_at > now ? (uint32_t)(j->retry_at - now) : 0);
}

void pipeline_contended(struct worker *w, struct job *j, const char *why)
{
	job_set_error(j, why);
	metrics_agent_lock_skip();
	if (w->drain_expired) {
		pipeline_release(w, j);
		return;
	}
	j->lock_skips++;
	uint32_t d = job_backoff_ms(j->lock_skips, LOCK_SKIP_BASE_MS, LOCK_SKIP_CAP_MS,
	                            pipeline_rand(w));
	LOGD(j->sub[0] ? j->sub : NULL, j->id, "%s; committing again in %u ms", why, d);
	pipeline_wait(w, j, STAGE_COMMIT, d);
}

void pipeline_wait(struct worker *w, struct job *j, enum job_stage stage, uint32_t d)
{
	j->retry_stage = stage;
	j->retry_at = uv_now(w->loop) + d;
	job_set_state(j, JOB_BACKOFF);
	retry_insert(w, j);
	pipeline_arm_retry(w);
}

static void retry_cb(uv_timer_t *t)
{
	struct worker *w = t->data;
	uint64_t now = uv_now(w->loop);
	while (w->retry_q.head && w->retry_q.head->retry_at <= now) {
		struct job *j = jobq_pop(&w->retry_q);
		w->hooks.restart(w, j);
	}
	pipeline_arm_retry(w);
}

/* ---- dispatch of new entries --------------------------------------------------------- */

void pipeline_dispatch(struct worker *w, struct job *j)
{
	if (w->state != W_RUNNING) {
		pipeline_release(w, j);
		return;
	}
	if (j->poison) {
		if (j->poison == POISON_DELETED_ENTRY) {
			pipeline_to_ack(w, j, ACK_PLAIN, NULL, OUTCOME_NONE);
			return;
		}
		const char *why = job_poison_name(j->poison);
		LOGW(j->sub[0] ? j->sub : NULL, j->id, "poison entry: %s: dead-lettering", why);
		pipeline_to_ack(w, j, ACK_DEAD, why, OUTCOME_DEAD_LETTERED);
		return;
	}
	if (j->attempts > w->cfg->max_deliveries) {
		char why[128];
		snprintf(why, sizeof why, "delivered %d times (ARBITER_MAX_DELIVERIES %d)",
		         j->attempts, w->cfg->max_deliveries);
		j->attempts = w->cfg->max_deliveries;
		pipeline_fail(w, j, why);
		return;
	}
	job_set_state(j, JOB_LOAD_WAIT);
	jobq_push(&w->load_q, j);
	pipeline_kick(w);
}

struct job *pipeline_entry_job(redisReply *e, int deliveries)
{
	if (!e || e->type != REDIS_REPLY_ARRAY || e->elements < 2 ||
	    e->element[0]->type != REDIS_REPLY_STRING)
		return NULL;
	redisReply *f = e->element[1];
	if (f->type != REDIS_REPLY_ARRAY) {
		struct job *j = job_new(e->element[0]->str, NULL, NULL, 0, deliveries);
		j->poison = POISON_DELETED_ENTRY;
		return j;
	}
	int nf = (int)(f->elements / 2);
	const char **fs = xcalloc((size_t)(2 * nf + 1), sizeof *fs);
	size_t *ls = xcalloc((size_t)(2 * nf + 1), sizeof *ls);
	for (int i = 0; i < 2 * nf; i++) {
		redisReply *x = f->element[i];
		if (x->type == REDIS_REPLY_STRING || x->type == REDIS_REPLY_STATUS) {
			fs[i] = x->str;
			ls[i] = x->len;
		} else {
			fs[i] = "";
			ls[i] = 0;
		}
	}
	struct job *j = job_new(e->element[0]->str, fs, ls, nf, deliveries);
	free(fs);
	free(ls);
	return j;
}

/* ---- kick ---------------------------------------------------------------------------- */

static void kick_cb(uv_timer_t *t)
{
	struct worker *w = t->data;
	if (w->state == W_STOPPING)
		return;
	w->hooks.flush(w);
}

void pipeline_kick(struct worker *w)
{
	if (w->state == W_STOPPING)
		return;
	if (!uv_is_active((uv_handle_t *)&w->t_kick))
		uv_timer_start(&w->t_kick, kick_cb, 0, 0);
}

/* Ends a blocked XREADGROUP now, so it delivers nothing once intake pauses. */
static void unblock_read(struct worker *w)
{
	if (!w->reading || w->read_client_id <= 0)
		return;
	char id[24];
	snprintf(id, sizeof id, "%lld", w->read_client_id);
	const char *argv[] = { "CLIENT", "UNBLOCK", id };
	rq_cmdv(w->rq_cmd, 0, rq_reply_logged, (void *)"CLIENT UNBLOCK", 3, argv, NULL);
}

void pipeline_note_db_error(struct worker *w, const struct pgc_result *r)
{
	if (!r || !r->sqlstate[0] || sqlstate_kind(r->sqlstate) != SQLSTATE_DB_DOWN)
		return;
	if (!w->db_refused_logged) {
		LOGW(NULL, NULL, "the database refuses writes (SQLSTATE %s: %s): pausing intake, "
		     "no attempts spent", r->sqlstate, r->err ? r->err : "");
		unblock_read(w);
	}
	w->db_refused_logged = true;
	snprintf(w->db_refused, sizeof w->db_refused, "%s", r->sqlstate);
	w->db_refusing_until = uv_now(w->loop) + PIPELINE_DB_REFUSING_PAUSE_MS;
}

void pipeline_note_db_ok(struct worker *w)
{
	if (w->db_refused_logged)
		LOGI(NULL, NULL, "the database takes writes again: intake resumes");
	w->db_refused_logged = false;
	w->db_refused[0] = '\0';
	w->db_refusing_until = 0;
}

void pipeline_db_probe_first(struct worker *w)
{
	snprintf(w->db_refused, sizeof w->db_refused, "25006");
	w->db_refusing_until = 0;
}

/* A write that fails as a real one would while the database is read-only
 * (default_transaction_read_only, a standby in recovery: 25006 before any row
 * is touched), and otherwise writes nothing: no row matches. A session that
 * refuses it is replaced (pgc), so the next probe sees the current default. */
static const char SQL_WRITE_PROBE[] = "UPDATE submissions SET status = status WHERE false";

static void on_probe(const struct pgc_result *r, void *data)
{
	struct worker *w = data;
	w->db_probe_busy = false;
	if (w->state != W_RUNNING || !w->db_refused[0])
		return;       /* stopping, or a write committed meanwhile */
	uint64_t again = uv_now(w->loop) + PIPELINE_DB_REFUSING_PAUSE_MS;
	if (r->err && strcmp(r->sqlstate, "25006") != 0) {
		if (r->transient)
			LOGD(NULL, NULL, "writability probe failed: %s", r->err);
		else
			LOGW(NULL, NULL, "writability probe failed (intake stays paused): %s", r->err);
		w->db_refusing_until = again;
		return;
	}
	if (r->err) {
		if (!w->db_refused_logged)
			LOGW(NULL, NULL, "the database is read-only (default_transaction_read_only, or a "
			     "standby): intake waits until it takes writes");
		w->db_refused_logged = true;
		snprintf(w->db_refused, sizeof w->db_refused, "25006");
		w->db_refusing_until = again;
		return;
	}
	/* Writable as far as a probe can tell. A read-only refusal is over; any
	 * other (disk full...) is over only once a job in hand commits, or when
	 * there is none to try. */
	if (strcmp(w->db_refused, "25006") != 0 && w->njobs > 0) {
		w->db_refusing_until = again;
		return;
	}
	if (w->db_refused_logged)
		LOGI(NULL, NULL, "the database takes writes again (probe): intake resumes");
	w->db_refused_logged = false;
	w->db_refused[0] = '\0';
	w->db_refusing_until = 0;
	pipeline_kick(w);
}

#define DB_PROBE_RECHECK_MS 50

uint64_t pipeline_intake_paused_ms(struct worker *w)
{
	uint64_t now = uv_now(w->loop);
	if (w->db_refusing_until > now)
		return w->db_refusing_until - now;
	if (!w->db_refused[0])
		return 0;
	if (!w->db_probe_busy) {
		struct pgc_stmt st = { SQL_WRITE_PROBE, 0, NULL };
		if (pgc_run(w->pg, &st, 1, on_probe, w) < 0) {
			w->db_refusing_until = now + PIPELINE_DB_REFUSING_PAUSE_MS;
			return PIPELINE_DB_REFUSING_PAUSE_MS;
		}
		w->db_probe_busy = true;
	}
	return DB_PROBE_RECHECK_MS;
}
