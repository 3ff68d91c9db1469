/*
 * worker: the daemon's event loop: start-up, the reading stage (XREADGROUP on
 * the reader connection, the consumer group, our own pending entries, the
 * judge lane's intake), the kick that flushes every stage, parking counted
 * retries, the timers that are not a module's (claims, reconciler,
 * promotion), readiness, drain and shutdown (see worker.h; the plumbing is
 * pipeline.c).
 *
 * Flow of one entry:
 *   XREADGROUP (own connection, BLOCK 1000, COUNT = free slots)
 *   → job_new: fields checked (poison → {prefix}:dead + XACK)
 *   → load_q → load.c: one query for many jobs (submission + match + challenge)
 *   → duplicate / validation checks (load.c; rejections go to the commit as OP_REJECT)
 *   → eval.c: rl_check (rate limit; deferred jobs leave the stream inside the script)
 *   → evaluate (scoring.c: deterministic, inline or off the loop; judging.c: the LLM
 *     judge; sandbox evaluators asynchronously)
 *   → commit_q → commit.c: one transaction for many jobs
 *   → ack_q → ack.c: MULTI [XADD dead/release] XACK XDEL EXEC for many jobs.
 * Everything produced during one loop iteration is batched: producers put
 * jobs in queues and call pipeline_kick, which flushes on the next iteration.
 *
 * Failures: pipeline_retry puts a job in retry_q (sorted by due time) with
 * exponential backoff and jitter; counted failures use up attempts, wait in
 * the delayed set (park, opsctl_park) when Redis takes them, and end in
 * pipeline_fail (status failed + dead letter). Entries of dead consumers are
 * taken over with XAUTOCLAIM; our own in-flight entries are re-claimed
 * (XCLAIM JUSTID) before they look idle (claim.c). SIGTERM drains (see
 * start_drain).
 */
#include "worker.h"
#include "pipeline.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ack.h"
#include "claim.h"
#include "commit.h"
#include "eval.h"
#include "evaluator.h"
#include "gauges.h"
#include "judge.h"
#include "judgelane.h"
#include "http.h"
#include "jprov.h"
#include "load.h"
#include "log.h"
#include "opsctl.h"
#include "pgc.h"
#include "ratelimit.h"
#include "reconcile.h"
#include "standings_apply.h"
#include "rq.h"
#include "rkeys.h"
#include "util.h"

#define READ_BLOCK_MS 1000
#define PROMOTE_MS 250
#define HARD_STOP_MS 10000
#define ABANDON_GRACE_MS 1000        /* after the drain: wait this long for abandoned jobs */
#define DB_WAIT_POLL_MS 50           /* no database connection: check again this often */

static void maybe_finish_drain(struct worker *w);
static void shutdown_all(struct worker *w);

/* A job's backoff is over (pipeline.c): it starts again at its retry stage. */
static void restart(struct worker *w, struct job *j)
{
	switch (j->retry_stage) {
	case STAGE_LOAD:
		if (w->state != W_RUNNING) {
			pipeline_release(w, j);
			return;
		}
		job_clear_result(j);
		job_clear_row(j);
		speccache_unref(j->spec);
		j->spec = NULL;
		job_set_state(j, JOB_LOAD_WAIT);
		jobq_push(&w->load_q, j);
		pipeline_kick(w);
		return;
	case STAGE_EVAL:
		eval_start(w, j);
		return;
	case STAGE_COMMIT:
		pipeline_to_commit(w, j);
		return;
	case STAGE_ACK:
		job_set_state(j, JOB_ACK_WAIT);
		jobq_push(&w->ack_q, j);
		pipeline_kick(w);
		return;
	}
}

/* ---- parking counted retries (hooks.park), fresh entries ------------------------------ */

/* hooks.park: a counted retry's entry goes to the delayed set with its attempt number
 * (worker/README.md "Failures, retries, dead letters"). Not when its commit may have happened (a
 * re-evaluation is known by its entry id), nor without Redis. */
static bool park(struct worker *w, struct job *j, enum job_stage stage, uint32_t delay_ms)
{
	if (!pipeline_park_begin(w, j, stage, delay_ms))
		return false;
	opsctl_park(w->ops, j, delay_ms, pipeline_parked);
	return true;
}

/* Entries of stream s delivered for the first time (XREADGROUP >): new jobs, dispatched. */
static void adopt_fresh(struct worker *w, redisReply *entries, enum job_stream s)
{
	for (size_t i = 0; i < entries->elements; i++) {
		struct job *j = pipeline_entry_job(entries->element[i], 1);
		if (!j)
			continue;
		pipeline_adopt(w, j, s);
		pipeline_dispatch(w, j);
	}
}

/* ---- the judge lane (judgelane.h) ---- */

/* How many entries the lane's reader may take now: the free judge slots, while the worker
 * takes jobs at all (the gates of maybe_read: ready, not paused, a database that takes
 * writes); 0 while draining: the lane's jobs are for the others. */
static int lane_room(void *data)
{
	struct worker *w = data;
	if (w->state != W_RUNNING || !w->group_ready || !w->own_pending_done ||
	    !opsctl_may_take(w->ops, NULL, 0) || !pgc_pool_ready(w->pg) ||
	    pipeline_intake_paused_ms(w))
		return 0;
	return pipeline_judge_room(w);
}

/* Entries read from the judge lane: jobs of the lane stream, each holding a judge slot
 * (lane_unadmitted) until it reaches the judge or ends. */
static void lane_entries(void *data, redisReply *entries, bool own)
{
	struct worker *w = data;
	if (own) {
		claim_adopt(w, entries, JOB_STREAM_LANE);   /* (marks them lane_unadmitted) */
		pipeline_kick(w);
		return;
	}
	adopt_fresh(w, entries, JOB_STREAM_LANE);
	pipeline_kick(w);
}


/* ---- reading ------------------------------------------------------------------------- */

static void create_group(struct worker *w);
static void maybe_read(struct worker *w);
static void read_own_pending(struct worker *w);
static void read_timer_cb(uv_timer_t *t);

/* Adopts the entries of an XREADGROUP reply; returns how many the reply held. */
static size_t adopt_entries(struct worker *w, redisReply *reply, bool claimed)
{
	size_t n = 0;
	if (!reply || reply->type != REDIS_REPLY_ARRAY)
		return 0;
	for (size_t s = 0; s < reply->elements; s++) {
		redisReply *st = reply->element[s];
		if (st->type != REDIS_REPLY_ARRAY || st->elements < 2)
			continue;
		redisReply *entries = st->element[1];
		if (entries->type == REDIS_REPLY_ARRAY)
			n += entries->elements;
		if (claimed) {
			claim_adopt(w, entries, JOB_STREAM_LIVE);
			continue;
		}
		if (entries->type == REDIS_REPLY_ARRAY)
			adopt_fresh(w, entries, JOB_STREAM_LIVE);
	}
	return n;
}

static void on_read(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct worker *w = data;
	(void)r;
	w->reading = false;
	if (w->state == W_STOPPING)
		return;
	if (err) {
		if (strcmp(err, "closed"))
			LOGW(NULL, NULL, "XREADGROUP: %s", err);
		/* on_connect starts reading again after a reconnect; if the
		 * connection survived (a late reply), the kick reads again. */
		if (w->state == W_DRAINING)
			maybe_finish_drain(w);
		pipeline_kick(w);
		return;
	}
	if (reply->type == REDIS_REPLY_ERROR) {
		if (strstr(reply->str, "NOGROUP")) {
			LOGW(NULL, NULL, "consumer group missing (Redis lost its data?): creating it again");
			w->group_ready = false;
			if (w->state == W_DRAINING)
				maybe_finish_drain(w);
			else
				create_group(w);
			return;
		}
		if (strstr(reply->str, "UNBLOCKED"))
			/* The stream left this node while we were blocked (a Cluster slot
			 * migration, or the key deleted): the next read follows it. */
			LOGW(NULL, NULL, "XREADGROUP: %s (the stream moved or was deleted: reading "
			     "again)", reply->str);
		else if (!rq_is_acl_refusal(reply->str))   /* (NOPERM: see on_group) */
			LOGE(NULL, NULL, "XREADGROUP: %s", reply->str);
		if (w->state == W_DRAINING)
			maybe_finish_drain(w);
		else if (!uv_is_active((uv_handle_t *)&w->t_read))
			uv_timer_start(&w->t_read, read_timer_cb, 1000, 0);
		return;
	}
	w->consumer_made = true;
	w->read_backlog = adopt_entries(w, reply, false) >= (size_t)w->read_asked;
	if (w->state == W_DRAINING)
		maybe_finish_drain(w);
	pipeline_kick(w);
}

static void do_read(struct worker *w, int free_slots)
{
	char count[16];
	snprintf(count, sizeof count, "%d", free_slots);
	const char *argv[] = { "XREADGROUP", "GROUP", w->k_group, w->cfg->worker_id, "COUNT", count,
	                       "BLOCK", "1000", "STREAMS", w->k_jobs, ">" };
	w->reading = true;
	w->read_asked = free_slots;
	if (rq_cmdv(w->rq_read, READ_BLOCK_MS + 5000, on_read, w, 11, argv, NULL) < 0)
		w->reading = false;
}

static void read_timer_cb(uv_timer_t *t)
{
	struct worker *w = t->data;
	if (w->state != W_RUNNING)
		return;
	if (!w->group_ready) {
		create_group(w);
		return;
	}
	if (!w->own_pending_done || !opsctl_may_take(w->ops, NULL, 0)) {
		maybe_read(w);      /* re-arms the timer until the worker may take jobs */
		return;
	}
	if (!pgc_pool_ready(w->pg) || pipeline_intake_paused_ms(w)) {
		maybe_read(w);      /* re-arms the timer until the database is back */
		return;
	}
	int free_slots = w->cfg->concurrency - pipeline_slots_used(w);
	if (free_slots > 0 && !w->reading && rq_connected(w->rq_read))
		do_read(w, free_slots);
}

static void maybe_read(struct worker *w)
{
	if (w->state != W_RUNNING || w->reading || !w->group_ready || !rq_connected(w->rq_read))
		return;
	/* Not ready (schema older than this binary, paused): take no job at all, not even our
	 * own pending ones; check again shortly (the cause is logged by opsctl). At start-up
	 * (schema not checked yet) the check starts now, not at the first gauges tick, and its
	 * answer starts the reading (on_migcheck), not the next poll. */
	if (!opsctl_may_take(w->ops, NULL, 0)) {
		if (w->db_version == -2 && !w->migcheck_busy)
			gauges_check_schema(w);
		if (!uv_is_active((uv_handle_t *)&w->t_read))
			uv_timer_start(&w->t_read, read_timer_cb, 200, 0);
		return;
	}
	if (!w->own_pending_done) {
		read_own_pending(w);
		return;
	}
	if (!pgc_pool_ready(w->pg)) {
		/* No database connection (PostgreSQL down, or its connection limit
		 * reached by other clients): taking jobs now would only hold them
		 * hostage while replicas that have a connection could do them. */
		if (!uv_is_active((uv_handle_t *)&w->t_read))
			uv_timer_start(&w->t_read, read_timer_cb, DB_WAIT_POLL_MS, 0);
		return;
	}
	uint64_t paused = pipeline_intake_paused_ms(w);
	if (paused) {
		/* The database refuses writes (read-only, disk full, shutting down):
		 * new jobs could only wait; the jobs in hand keep retrying, and the
		 * first write that commits resumes intake. */
		if (!uv_is_active((uv_handle_t *)&w->t_read))
			uv_timer_start(&w->t_read, read_timer_cb, paused, 0);
		return;
	}
	int free_slots = w->cfg->concurrency - pipeline_slots_used(w);
	if (free_slots <= 0)
		return;
	int threshold = w->cfg->concurrency / 4;
	if (threshold < 1)
		threshold = 1;
	if (free_slots < threshold && pipeline_slots_used(w) > 0 && w->read_backlog) {
		/* A backlog (the last read was full): wait a moment for more slots so reads
		 * stay large. Without one, read now: waiting would only add latency. */
		if (!uv_is_active((uv_handle_t *)&w->t_read))
			uv_timer_start(&w->t_read, read_timer_cb, 5, 0);
		return;
	}
	uv_timer_stop(&w->t_read);
	do_read(w, free_slots);
}

static void on_own_pending(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct worker *w = data;
	(void)r;
	w->reading = false;
	if (w->state == W_STOPPING)
		return;
	if (err || !reply || reply->type == REDIS_REPLY_ERROR) {
		/* Not fatal: XAUTOCLAIM takes them over once idle. */
		LOGW(NULL, NULL, "reading our own pending entries failed: %s",
		     err ? err : reply ? reply->str : "?");
	} else {
		adopt_entries(w, reply, true);
	}
	w->own_pending_done = true;
	pipeline_kick(w);
}

static void on_group(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct worker *w = data;
	(void)r;
	w->group_creating = false;
	if (w->state == W_STOPPING)
		return;
	if (err || (reply->type == REDIS_REPLY_ERROR && !strstr(reply->str, "BUSYGROUP"))) {
		/* NOPERM: rq logs it once, /readyz and opsctl's 30 s log repeat it. */
		if (err || !rq_is_acl_refusal(reply->str))
			LOGW(NULL, NULL, "XGROUP CREATE: %s", err ? err : reply->str);
		if (!uv_is_active((uv_handle_t *)&w->t_read))
			uv_timer_start(&w->t_read, read_timer_cb, 1000, 0);
		return;
	}
	w->group_ready = true;
	pipeline_kick(w);   /* maybe_read takes back our own pending entries first */
}

/* At start (once the worker may take jobs): the entries still pending under our own name
 * (a restart with a fixed worker id resumes at once). */
static void read_own_pending(struct worker *w)
{
	char count[16];
	snprintf(count, sizeof count, "%d", w->cfg->concurrency);
	const char *argv[] = { "XREADGROUP", "GROUP", w->k_group, w->cfg->worker_id, "COUNT",
	                       count, "STREAMS", w->k_jobs, "0" };
	w->reading = true;
	if (rq_cmdv(w->rq_read, 0, on_own_pending, w, 9, argv, NULL) == 0)
		return;
	w->reading = false;
	w->own_pending_done = true;
}

static void create_group(struct worker *w)
{
	if (w->group_creating || w->state == W_STOPPING)
		return;
	const char *argv[] = { "XGROUP", "CREATE", w->k_jobs, w->k_group, "0", "MKSTREAM" };
	w->group_creating = true;
	if (rq_cmdv(w->rq_read, 0, on_group, w, 6, argv, NULL) < 0)
		w->group_creating = false;
}

static void on_client_id(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct worker *w = data;
	(void)r;
	if (!err && reply && reply->type == REDIS_REPLY_INTEGER)
		w->read_client_id = reply->integer;
}

static void on_read_connect(struct rq *r, void *data)
{
	struct worker *w = data;
	static const char *argv[] = { "CLIENT", "ID" };
	/* (rq logs connections and losses itself.) */
	w->read_client_id = 0;
	rq_cmdv(r, 0, on_client_id, w, 2, argv, NULL);
	w->group_ready = false;
	create_group(w);
}

static void on_read_disconnect(struct rq *r, const char *why, void *data)
{
	struct worker *w = data;
	(void)r;
	(void)why;
	w->group_ready = false;
}

static void on_cmd_connect(struct rq *r, void *data)
{
	struct worker *w = data;
	(void)r;
	pipeline_kick(w);
}

static void on_cmd_disconnect(struct rq *r, const char *why, void *data)
{
	(void)r;
	(void)why;
	(void)data;
}

/* The kick (pipeline.c): everything queued during one loop iteration goes out
 * in batches. */
static void flush_stages(struct worker *w)
{
	load_flush(w);
	commit_flush(w);
	ack_flush(w);
	maybe_read(w);
}

static void reclaim_cb(uv_timer_t *t)
{
	claim_tick(t->data);
}

/* ---- readiness, promotion, reconciler timers ----------------------------------------- */

/* Adds one problem to the "; "-separated list in why (n bytes), unless it is there already. */
static void add_problem(char *why, size_t n, const char *p)
{
	size_t len = strlen(why);
	if (!*p || strstr(why, p) || len + 3 >= n)
		return;
	snprintf(why + len, n - len, "%s%s", len ? "; " : "", p);
}

/* Every reason the worker is not ready, not only the first: Redis down can hide a wrong
 * database password, and an operator fixes them one deploy at a time otherwise. */
static bool readiness(void *data, char *why, size_t n)
{
	struct worker *w = data;
	char part[512];
	why[0] = '\0';
	if (w->state != W_RUNNING)
		add_problem(why, n, "draining");
	part[0] = '\0';
	if (opsctl_redis_cause(w->ops, part, sizeof part))      /* not connected and why; NOPERM */
		add_problem(why, n, part[0] ? part : "redis unavailable");
	if (!pgc_pool_ready(w->pg)) {
		const char *e = pgc_pool_last_error(w->pg);
		snprintf(part, sizeof part, "postgresql not connected%s%s", *e ? ": " : "", e);
		add_problem(why, n, part);
	}
	part[0] = '\0';
	if (!opsctl_may_take(w->ops, part, sizeof part))      /* schema, pause */
		add_problem(why, n, part[0] ? part : "not taking jobs");
	return why[0] == '\0';
}

static void promote_cb(uv_timer_t *t)
{
	struct worker *w = t->data;
	if (w->state == W_RUNNING && rq_connected(w->rq_cmd))
		rl_promote_due(w->rl, w->rq_cmd);
}

static void reconcile_cb(uv_timer_t *t)
{
	struct worker *w = t->data;
	if (w->state != W_RUNNING || w->reconcile_busy || !rq_connected(w->rq_cmd) ||
	    !pgc_pool_ready(w->pg))
		return;
	w->reconcile_busy = true;
	reconcile_run(w);
}

/* ---- drain and shutdown -------------------------------------------------------------- */

/* The coverage build (-Db_coverage=true defines ARBITER_COVERAGE; scripts/coverage): an
 * _exit skips the exit handler that writes this process's counts, so they are written first
 * (libgcov's __gcov_dump); otherwise every line a worker ran before a hard stop would read as
 * never run. Nothing in other builds. */
#ifdef ARBITER_COVERAGE
extern void __gcov_dump(void);
#define coverage_flush() __gcov_dump()
#else
#define coverage_flush() ((void)0)
#endif

static void hard_stop_cb(uv_timer_t *t)
{
	struct worker *w = t->data;
	LOGE(NULL, NULL, "drain: %d job(s) still busy %d ms after the deadline; exiting (their "
	     "entries stay pending and are reclaimed by other workers)", w->njobs, HARD_STOP_MS);
	fflush(stderr);
	coverage_flush();
	_exit(0);
}

static void abandon_stop_cb(uv_timer_t *t)
{
	struct worker *w = t->data;
	LOGW(NULL, NULL, "stopped with %d released job(s) still evaluating (abandoned)",
	     w->nabandoned);
	fflush(stderr);
	coverage_flush();
	_exit(0);
}

static void drain_deadline_cb(uv_timer_t *t)
{
	struct worker *w = t->data;
	int released = 0;

	w->drain_expired = true;
	for (struct job *j = w->jobs, *next; j; j = next) {
		next = j->lnext;     /* pipeline_release may free j (copies are added at the head) */
		switch (j->state) {
		case JOB_LOAD_WAIT:
			jobq_remove(&w->load_q, j);
			pipeline_release(w, j);
			released++;
			break;
		case JOB_COMMIT_WAIT:
			jobq_remove(&w->commit_q, j);
			pipeline_release(w, j);
			released++;
			break;
		case JOB_BACKOFF:
			if (j->retry_stage == STAGE_ACK)
				break;
			jobq_remove(&w->retry_q, j);
			pipeline_release(w, j);
			released++;
			break;
		case JOB_COMMIT_CONN:
			/* A commit batch still waiting for a database connection (none
			 * may come while PostgreSQL is down) has sent nothing: release
			 * it like the steps below. One whose statements are in flight
			 * (JOB_COMMITTING) is waited for (its outcome decides). */
		case JOB_LOADING:
		case JOB_MARKING:
		case JOB_RATELIMIT:
		case JOB_EVALUATING: {
			/* Its callback is still to come: release a copy now and free the
			 * original when the callback arrives. */
			job_set_state(j, JOB_ABANDONED);
			w->nabandoned++;
			if (j->kind == JOB_REEVALUATE && j->commit_unknown) {
				/* See pipeline_release: a copy would get a new entry id. */
				LOGW(j->sub, j->id, "reevaluation with an unknown commit outcome: left "
				     "pending for another worker to reclaim, not released");
				break;
			}
			struct job *c = job_new(j->id, (const char *const *)j->fields, j->flens, j->nf,
			                        j->attempts);
			pipeline_adopt(w, c, j->stream);   /* the copy is of the same entry */
			pipeline_release(w, c);
			released++;
			break;
		}
		default:
			break;
		}
	}
	pipeline_arm_retry(w);
	LOGW(NULL, NULL, "drain deadline (%d ms) reached: released %d job(s)", w->cfg->drain_ms,
	     released);
	if (w->state == W_DRAINING)      /* (freeing the last job may have stopped us already) */
		uv_timer_start(&w->t_drain, hard_stop_cb, HARD_STOP_MS, 0);
	maybe_finish_drain(w);
}


static void start_drain(struct worker *w)
{
	int released = 0;
	if (w->state == W_STOPPING)
		return;
	if (w->state == W_DRAINING) {
		if (!w->drain_expired) {
			LOGW(NULL, NULL, "second signal: releasing everything now");
			uv_timer_stop(&w->t_drain);
			drain_deadline_cb(&w->t_drain);
		}
		return;
	}
	w->state = W_DRAINING;
	if (w->reading && w->read_client_id > 0) {
		/* End the blocked XREADGROUP now instead of waiting up to 1 s. */
		char id[24];
		snprintf(id, sizeof id, "%lld", w->read_client_id);
		const char *argv[] = { "CLIENT", "UNBLOCK", id };
		rq_cmdv(w->rq_cmd, 0, rq_reply_logged, (void *)"CLIENT UNBLOCK", 3, argv, NULL);
	}
	uv_timer_stop(&w->t_read);
	uv_timer_stop(&w->t_reconcile);
	uv_timer_stop(&w->t_promote);
	uv_timer_stop(&w->t_standings);
	for (struct job *j = w->jobs, *next; j; j = next) {
		next = j->lnext;     /* pipeline_release may free j */
		if (j->state == JOB_LOAD_WAIT) {
			jobq_remove(&w->load_q, j);
			pipeline_release(w, j);
			released++;
		} else if (j->state == JOB_BACKOFF && j->retry_stage == STAGE_LOAD) {
			jobq_remove(&w->retry_q, j);
			pipeline_release(w, j);
			released++;
		}
	}
	pipeline_arm_retry(w);
	LOGI(NULL, NULL, "draining: %d job(s) in flight, %d released, deadline %d ms", w->njobs,
	     released, w->cfg->drain_ms);
	if (w->state == W_DRAINING)
		uv_timer_start(&w->t_drain, drain_deadline_cb, (uint64_t)w->cfg->drain_ms, 0);
	maybe_finish_drain(w);
}

static void on_signal(uv_signal_t *s, int signum)
{
	struct worker *w = s->data;
	LOGI(NULL, NULL, "signal %d received", signum);
	start_drain(w);
}

/* Stops once every job is done. Jobs abandoned at the deadline are not
 * waited for: closing the clients fails their pending callbacks, which free
 * them. The blocked XREADGROUP is unblocked at the start of the drain and
 * waited for (its entries are released), unless the deadline passed. */
static void left_group(struct worker *w)
{
	shutdown_all(w);
}

static void maybe_finish_drain(struct worker *w)
{
	if (w->state != W_DRAINING || w->njobs - w->nabandoned > 0 ||
	    (w->reading && !w->drain_expired) || w->leaving)
		return;
	if (w->nabandoned == 0 && w->ops) {
		/* A clean exit: remove our consumer from the group if it holds nothing. */
		w->leaving = true;
		opsctl_leave_group(w->ops, left_group);
		return;
	}
	shutdown_all(w);
}

static void handle_closed(uv_handle_t *h)
{
	struct worker *w = h->data;
	w->open_handles--;
}

static void part_closed(void *data)
{
	struct worker *w = data;
	w->closing_parts--;
}

static void rq_cmd_closed(void *data)
{
	struct worker *w = data;
	rl_free(w->rl);
	w->rl = NULL;
	w->closing_parts--;
}

static void close_handle(struct worker *w, uv_handle_t *h)
{
	if (!uv_is_closing(h)) {
		w->open_handles++;
		uv_close(h, handle_closed);
	}
}

static void shutdown_all(struct worker *w)
{
	if (w->state == W_STOPPING)
		return;
	w->state = W_STOPPING;
	LOGI(NULL, NULL, "stopping");
	uv_timer_t *timers[] = { &w->t_kick, &w->t_read, &w->t_retry, &w->t_reclaim,
	                         &w->t_reconcile, &w->t_promote, &w->t_gauges, &w->t_commit,
	                         &w->t_standings };
	for (size_t i = 0; i < sizeof timers / sizeof timers[0]; i++) {
		uv_timer_stop(timers[i]);
		close_handle(w, (uv_handle_t *)timers[i]);
	}
	uv_timer_stop(&w->t_drain);
	if (w->nabandoned > 0) {
		/* Jobs released at the deadline whose step is still running (a
		 * sandbox run can take its whole wall-time limit): their entries are
		 * back on the stream already, so they are not waited for. The timer
		 * does not keep the loop alive; if they are still running after a
		 * short grace (for the connections to close), exit anyway (the
		 * sandboxes die with us). */
		uv_timer_start(&w->t_drain, abandon_stop_cb, ABANDON_GRACE_MS, 0);
		uv_unref((uv_handle_t *)&w->t_drain);
	} else {
		close_handle(w, (uv_handle_t *)&w->t_drain);
	}
	uv_signal_stop(&w->sig_term);
	uv_signal_stop(&w->sig_int);
	uv_signal_stop(&w->sig_hup);
	close_handle(w, (uv_handle_t *)&w->sig_term);
	close_handle(w, (uv_handle_t *)&w->sig_int);
	close_handle(w, (uv_handle_t *)&w->sig_hup);
	opsctl_free(w->ops);
	w->ops = NULL;
	judgelane_free(w->jlane);
	w->jlane = NULL;
	w->closing_parts = 4;
	http_close(w->http, part_closed, w);
	w->http = NULL;
	rq_close(w->rq_read, part_closed, w);
	rq_close(w->rq_cmd, rq_cmd_closed, w);
	pgc_pool_close(w->pg, part_closed, w);
	judge_close(w->judge);
	w->judge = NULL;
}

/* ---- start --------------------------------------------------------------------------- */

static char *key(const char *prefix, const char *suffix)
{
	struct strbuf sb = { 0 };
	strbuf_addf(&sb, "%s%s", prefix, suffix);
	return sb.buf;
}

static void init_timer(struct worker *w, uv_timer_t *t)
{
	uv_timer_init(w->loop, t);
	t->data = w;
}

/* Creates the rate limiter, the sandbox pool (optional), the two Redis
 * clients, the PostgreSQL pool and the HTTP listener. Returns 0, or -1 after
 * saying why (the caller closes what was opened). */
static int open_parts(struct worker *w)
{
	char err[512];

	if (rl_new(w->cfg, &w->rl, err, sizeof err) < 0) {
		LOGE(NULL, NULL, "%s", err);
		fprintf(stderr, "arbiter worker: %s\n", err);
		return -1;
	}
	rl_set_loop(w->rl, w->loop);
	if (sandbox_pool_new(w->loop, w->cfg, &w->sp, w->sp_err, sizeof w->sp_err) < 0) {
		w->sp = NULL;
		LOGW(NULL, NULL, "sandbox unavailable (test-suite and custom-script jobs will fail): %s",
		     w->sp_err);
	}

	struct rq_opts ro = { 0 };
	ro.url = w->cfg->redis_url;
	ro.on_connect = on_read_connect;
	ro.on_disconnect = on_read_disconnect;
	ro.data = w;
	ro.name = "reader";
	ro.cluster_key = w->k_jobs;          /* Cluster: the slot of every key (rkeys.h) */
	if (rq_new(w->loop, &ro, &w->rq_read) < 0) {
		fprintf(stderr, "arbiter worker: invalid ARBITER_REDIS_URL\n");
		return -1;
	}
	ro.on_connect = on_cmd_connect;
	ro.on_disconnect = on_cmd_disconnect;
	ro.name = "commands";
	if (rq_new(w->loop, &ro, &w->rq_cmd) < 0) {
		fprintf(stderr, "arbiter worker: invalid ARBITER_REDIS_URL\n");
		return -1;
	}
	struct pgc_opts po = { 0 };
	po.conninfo = w->cfg->database_url;
	po.size = w->cfg->pg_pool_size;
	po.query_timeout_ms = (uint32_t)w->cfg->pg_query_timeout_ms;
	po.lock_timeout_ms = (uint32_t)w->cfg->pg_lock_timeout_ms;
	w->specs.max_bytes = w->cfg->spec_cache_bytes;
	if (pgc_pool_new(w->loop, &po, &w->pg) < 0) {
		fprintf(stderr, "arbiter worker: invalid ARBITER_DATABASE_URL\n");
		return -1;
	}
	w->ops = opsctl_new(w);
	if (judge_budget_parse(w->cfg->judge_budget, &w->judge_budget_usd,
	                       &w->judge_budget_period_s) < 0) {
		fprintf(stderr, "arbiter worker: ARBITER_JUDGE_BUDGET '%s' is not USD/hour or USD/day "
		        "(e.g. 20/day)\n", w->cfg->judge_budget);
		return -1;
	}
	char perr[512];
	if (judge_providers_load(w->cfg->judge_providers, &w->judge_providers, perr,
	                         sizeof perr) < 0) {
		fprintf(stderr, "arbiter worker: ARBITER_JUDGE_PROVIDERS: %s\n", perr);
		return -1;
	}
	w->specs.providers = w->judge_providers;
	struct judge_opts jo = { .pg = w->pg, .rq = w->rq_cmd, .kbase = w->k_judge,
	                         .providers = w->judge_providers,
	                         .max_inflight = w->cfg->judge_inflight,
	                         .shared_inflight = w->cfg->judge_shared_inflight,
	                         .tpm = w->cfg->judge_tpm,
	                         .ca_file = w->cfg->judge_ca_file,
	                         .breaker_failures = w->cfg->judge_breaker_failures,
	                         .breaker_cooldown_ms = w->cfg->judge_breaker_cooldown_ms };
	if (judge_new(w->loop, &jo, &w->judge) < 0)
		LOGW(NULL, NULL, "LLM judge unavailable (libcurl could not start): judge jobs wait");
	else
		w->jlane = judgelane_new(w->loop, w->rq_cmd, w->k_jobs, w->k_judge_lane, w->k_group,
		                         w->cfg->worker_id, lane_room, lane_entries, w);
	/* The batches' statements: parsed once per connection. */
	if (!w->cfg->pg_prepare || strcmp(w->cfg->pg_prepare, "off")) {
		load_prepare(w->pg);
		commit_prepare(w->pg);
	}
	if (http_start(w->loop, w->cfg->metrics_addr, readiness, w, &w->http, err, sizeof err) < 0) {
		LOGE(NULL, NULL, "%s", err);   /* err names the listener already */
		fprintf(stderr, "arbiter worker: %s\n", err);
		return -1;
	}
	return 0;
}

/* The loop's timers and signal handlers. */
static void start_timers(struct worker *w)
{
	uv_timer_t *timers[] = { &w->t_kick, &w->t_read, &w->t_retry, &w->t_reclaim,
	                         &w->t_reconcile, &w->t_promote, &w->t_gauges, &w->t_drain, &w->t_commit,
	                         &w->t_standings };
	for (size_t i = 0; i < sizeof timers / sizeof timers[0]; i++)
		init_timer(w, timers[i]);
	/* Claims: see claim.c for the timing. */
	uv_timer_start(&w->t_reclaim, reclaim_cb, claim_tick_ms(w->cfg), claim_tick_ms(w->cfg));
	uv_timer_start(&w->t_reconcile, reconcile_cb, (uint64_t)w->cfg->reconcile_ms,
	               (uint64_t)w->cfg->reconcile_ms);
	uv_timer_start(&w->t_promote, promote_cb, PROMOTE_MS, PROMOTE_MS);
	sapply_start(w);   /* the standings projection (standings_apply.h) */
	gauges_start(w);   /* queue gauges, heartbeat, schema check */
	uv_signal_init(w->loop, &w->sig_term);
	uv_signal_init(w->loop, &w->sig_int);
	uv_signal_init(w->loop, &w->sig_hup);
	w->sig_term.data = w->sig_int.data = w->sig_hup.data = w;
	uv_signal_start(&w->sig_term, on_signal, SIGTERM);
	uv_signal_start(&w->sig_int, on_signal, SIGINT);
	uv_signal_start(&w->sig_hup, on_signal, SIGHUP);   /* drains like SIGTERM (README) */
	signal(SIGPIPE, SIG_IGN);
	/* Handlers in place: a SIGTERM that came during start-up (held back by
	 * worker_run) is delivered now and drains like any other. */
	sigset_t term;
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	sigaddset(&term, SIGINT);
	pthread_sigmask(SIG_UNBLOCK, &term, NULL);
}

/* The Redis key names into w->k_* (one place, rkeys.h; "auto" is tagged only in Cluster
 * mode). Returns 0, or -1 with the reason logged and on stderr. */
static int init_keys(struct worker *w, const struct config *cfg)
{
	char err[512];
	struct rkeys rk;
	struct rq_url ru;
	bool cluster = rq_url_parse(cfg->redis_url, &ru, err, sizeof err) == 0 && ru.cluster;
	if (rkeys_init(&rk, cfg->prefix, rkeys_style(cfg->redis_keys, cluster), err, sizeof err) < 0) {
		LOGE(NULL, NULL, "%s", err);
		fprintf(stderr, "arbiter worker: %s\n", err);
		return -1;
	}
	if (rk.legacy && cluster && !strchr(rk.base, '{')) {
		snprintf(err, sizeof err, "ARBITER_REDIS_KEYS=plain cannot work with Redis "
		         "Cluster (the keys would not share a slot): use tagged or auto");
		LOGE(NULL, NULL, "%s", err);
		fprintf(stderr, "arbiter worker: %s\n", err);
		rkeys_free(&rk);
		return -1;
	}
	w->k_jobs = key(rk.jobs, "");
	w->k_group = key(rk.group, "");
	w->k_dead = key(rk.dead, "");
	w->k_delayed = key(rk.delayed, "");
	w->k_lock = key(rk.reconcile_lock, "");
	w->k_judge = rkeys_judge(&rk);
	w->k_judge_lane = rkeys_judge_lane(&rk);
	w->k_heartbeats = rkeys_heartbeats(&rk);
	w->k_stats = rkeys_stats(&rk);
	/* Cluster: the other style's name lives in another slot, out of this connection's reach. */
	w->k_other_jobs = cluster ? NULL : rkeys_other_jobs(&rk, cfg->prefix);
	w->key_style = rk.legacy ? "plain" : "tagged";
	w->other_jobs_len = -1;
	rkeys_free(&rk);
	return 0;
}

/* Start-up failure: close what open_parts opened, then let the loop finish. */
static void close_parts(struct worker *w)
{
	w->state = W_STOPPING;
	if (w->http)
		http_close(w->http, NULL, NULL);
	if (w->rq_read)
		rq_close(w->rq_read, NULL, NULL);
	if (w->rq_cmd)
		rq_close(w->rq_cmd, NULL, NULL);
	opsctl_free(w->ops);
	w->ops = NULL;
	judgelane_free(w->jlane);
	w->jlane = NULL;
	if (w->pg)
		pgc_pool_close(w->pg, NULL, NULL);
	judge_close(w->judge);
	rl_free(w->rl);
	uv_run(w->loop, UV_RUN_DEFAULT);
}

int worker_run(const struct config *cfg)
{
	struct worker *w = xcalloc(1, sizeof *w);
	int rc = 1;

	w->loop = uv_default_loop();
	w->cfg = cfg;
	w->state = W_RUNNING;
	w->db_version = -2;         /* not checked yet (opsctl: not logged as a cause) */
	pipeline_db_probe_first(w);   /* no job read before the database is known to take writes */
	w->rnd = (uint32_t)(uv_hrtime() ^ ((uint64_t)getpid() << 16)) | 1u;
	if (init_keys(w, cfg) < 0) {
		free(w);
		return 1;
	}
	w->max_loads = cfg->pg_pool_size / 4 > 0 ? cfg->pg_pool_size / 4 : 1;
	w->max_commits = cfg->pg_pool_size / 2 > 0 ? cfg->pg_pool_size / 2 : 1;
	w->hooks.flush = flush_stages;
	w->hooks.restart = restart;
	w->hooks.job_gone = maybe_finish_drain;
	w->hooks.park = park;

	/* SIGTERM / SIGINT during start-up (connecting, the sandbox pool) would
	 * kill the process with the default action: hold them back until the
	 * loop's handlers are installed (start_timers). Children reset their mask. */
	sigset_t term;
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	sigaddset(&term, SIGINT);
	pthread_sigmask(SIG_BLOCK, &term, NULL);

	char *rurl = log_redact_url(cfg->redis_url), *durl = log_redact_url(cfg->database_url);
	LOGI(NULL, NULL, "starting: redis %s, database %s, prefix %s, stream %s (key style %s), "
	     "concurrency %d, batch %d", rurl, durl, cfg->prefix, w->k_jobs, w->key_style,
	     cfg->concurrency, cfg->batch_max);
	free(rurl);
	free(durl);

	if (open_parts(w) < 0)
		goto out;
	start_timers(w);

	uv_run(w->loop, UV_RUN_DEFAULT);
	if (!uv_is_closing((uv_handle_t *)&w->t_drain)) {
		/* The grace timer of abandoned jobs (shutdown_all). */
		uv_close((uv_handle_t *)&w->t_drain, NULL);
		uv_run(w->loop, UV_RUN_DEFAULT);
	}
	LOGI(NULL, NULL, "stopped");
	rc = 0;
	goto cleanup;

out:
	close_parts(w);
	rc = 1;
cleanup:
	sandbox_pool_free(w->sp);
	speccache_clear(&w->specs);
	while (w->jobs)
		pipeline_drop(w, w->jobs);
	free(w->k_jobs);
	free(w->k_group);
	free(w->k_dead);
	free(w->k_delayed);
	free(w->k_lock);
	free(w->k_judge);
	free(w->k_judge_lane);
	free(w->k_other_jobs);
	free(w->k_heartbeats);
	free(w->k_stats);
	jprov_free(w->judge_providers);   /* the judge that borrowed them is closed */
	uv_loop_close(w->loop);
	free(w);
	return rc;
}
