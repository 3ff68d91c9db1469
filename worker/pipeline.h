/*
 * pipeline: the worker's shared state (struct worker) and the plumbing of the
 * job pipeline, below the stages that use it:
 *
 *   worker.c   event loop, reading (XREADGROUP), drain and shutdown
 *   load.c     loading a batch and the checks before the evaluation
 *   eval.c     pause holds, the judge lane's hand-off, rate limit, evaluators
 *   judging.c  the LLM judge's call and its budget (for eval.c)
 *   scoring.c  scoring with the spec, inline or on the thread pool
 *   gauges.c   the gauges timer and the schema check
 *   commit.c   the commit transaction (cplan.c decides, commit.c executes)
 *   ack.c      XACK + XDEL (and dead-letter / release copies) in batches
 *   claim.c    keeping our entries claimed, taking over dead consumers'
 *   reconcile.c  re-enqueueing what Redis lost
 *
 * pipeline.c holds the live jobs, the queues between the stages, retries with
 * backoff and the kick. It calls back up only through w->hooks, which
 * worker.c sets at start, so the stages depend on the plumbing and never the
 * other way round. A job moves through the states of job.h; producers put
 * jobs in queues and call pipeline_kick, which flushes every stage on the
 * next loop iteration (everything produced in one iteration is batched).
 * Event-loop thread only.
 */
#ifndef ARBITER_PIPELINE_H
#define ARBITER_PIPELINE_H

#include <stdbool.h>
#include <stdint.h>

#include <hiredis/hiredis.h>
#include <uv.h>

#include "config.h"
#include "job.h"
#include "speccache.h"

struct rq;
struct pgc_pool;
struct rl;
struct sandbox_pool;
struct http_server;
struct judgelane;

struct jobq { struct job *head, *tail; int n; };

enum worker_state {
	W_RUNNING,     /* reading and working */
	W_DRAINING,    /* SIGTERM: no new reads; finishing or releasing in-flight jobs */
	W_STOPPING,    /* closing handles; the loop ends when the last one is closed */
};

/* Where the plumbing hands back to the stages (set by worker.c at start). */
struct pipeline_hooks {
	void (*flush)(struct worker *w);                   /* the kick: flush every stage, read */
	void (*restart)(struct worker *w, struct job *j);  /* a backoff is over: run its stage */
	void (*job_gone)(struct worker *w);                /* a job was freed while draining */
	/* A counted retry due in delay_ms: true when the job was handed over to wait outside
	 * the process (its entry goes to the delayed set; if that fails, the hook calls
	 * pipeline_wait itself); false: it cannot, wait here (pipeline_wait). */
	bool (*park)(struct worker *w, struct job *j, enum job_stage stage, uint32_t delay_ms);
};

struct worker {
	uv_loop_t *loop;
	struct pipeline_hooks hooks;
	const struct config *cfg;
	enum worker_state state;

	struct rq *rq_read, *rq_cmd;
	struct pgc_pool *pg;
	struct rl *rl;
	struct sandbox_pool *sp;     /* NULL when the sandbox cannot be used here */
	struct judge *judge;         /* LLM judge client (worker/judge.h), NULL if it cannot start */
	struct jprovs *judge_providers; /* ARBITER_JUDGE_PROVIDERS (common/jprov.h), owned */
	double judge_budget_usd;     /* ARBITER_JUDGE_BUDGET per period, 0 = none */
	int judge_budget_period_s;   /* 3600 or 86400 */
	char *k_judge;               /* "<base>:judge", the judge's Redis keys (rkeys_judge) */
	int judge_waiting;           /* jobs waiting for the judge's verdict (judge_run .. cb) */
	int judge_headed;            /* jobs admitted to the judge, not asking it yet (job.judge_headed) */
	int lane_unadmitted;         /* jobs read from the lane not admitted yet (job.lane_unadmitted) */
	bool lane_reclaim_busy;      /* an XAUTOCLAIM on the judge lane is outstanding */
	struct judgelane *jlane;     /* the judge lane's reader (judgelane.h), NULL without a judge */
	char *k_judge_lane;          /* "<jobs>:judge" (rkeys_judge_lane) */
	char sp_err[256];
	uint64_t sp_retry_at;        /* loop time before which a failed sandbox is not tried again */
	struct http_server *http;

	uv_signal_t sig_term, sig_int, sig_hup;
	struct opsctl *ops;          /* pause, readiness gate, lanes, leaving the group (opsctl.h) */
	uv_timer_t t_kick, t_read, t_retry, t_reclaim, t_reconcile, t_promote, t_gauges,
	           t_drain, t_commit, t_standings;
	int open_handles;            /* our own uv handles still open */
	int closing_parts;           /* rq/pg/http/rl closes still pending */

	char *k_jobs, *k_group, *k_dead, *k_delayed, *k_lock;
	char *k_heartbeats;          /* "<base>:workers" (rkeys_heartbeats); + ":since" */
	char *k_stats;               /* "<base>:stats" (rkeys_stats) */
	char *k_other_jobs;          /* the other key style's stream (rkeys_other_jobs), NULL in
	                              * Cluster mode or when both styles are one name */
	const char *key_style;       /* "plain" or "tagged": the style of the names above */
	long other_jobs_len;         /* its last XLEN, -1 unknown */
	uint64_t other_jobs_logged;  /* uv_now of the last warning about it, 0 never */

	struct job *jobs;            /* every live job (doubly linked) */
	int njobs;
	int nabandoned;              /* of which released at the drain deadline, awaiting a callback */
	long long read_client_id;    /* CLIENT ID of the reader connection (to unblock it), 0 = unknown */
	struct jobq load_q, commit_q, ack_q, retry_q;
	int loads_inflight, commits_inflight, acks_inflight;
	int max_loads, max_commits;

	bool reading;                /* an XREADGROUP is outstanding */
	int read_asked;              /* COUNT of the last XREADGROUP */
	bool read_backlog;           /* it returned COUNT entries: more may be waiting */
	bool group_ready;            /* XGROUP CREATE done on the current read connection */
	bool consumer_made;          /* an XREADGROUP was answered: Redis has our consumer */
	bool group_creating;
	bool own_pending_done;       /* our own pending entries were picked up at start */
	bool reclaim_busy, reconcile_busy, gauges_busy, migcheck_busy;
	bool standings_busy;         /* a standings_apply() call is outstanding (standings_apply.h) */
	bool standings_failing;      /* the last one failed (logged once per streak) */
	bool standings_kicked;       /* the first call was made (sapply_kick) */
	double standings_lag_ms;     /* the lag the last answer reported, NAN unknown */
	uint64_t standings_seen;     /* uv_now of that answer */
	bool migrations_ok;
	bool leaving;                /* clean exit: removing our consumer from the group */
	int db_version;              /* arbiter_migrations version; -1 not readable, -2 not checked yet */
	uint64_t migcheck_at;
	uint64_t autoclaim_at;       /* loop time of the last XAUTOCLAIM (0 = never) */
	uint64_t db_down_since;      /* loop time since when no database connection is up (0 = up) */
	uint64_t db_refusing_until;  /* intake paused until then: the database refuses writes */
	char db_refused[6];          /* SQLSTATE of the refusal no write has cleared yet ("" = none) */
	bool db_refused_logged;      /* the refusal was logged: say when it ends */
	bool db_probe_busy;          /* a writability probe is outstanding */

	struct speccache specs;      /* parsed specs by challenge id */

	uint64_t drain_deadline;
	bool drain_expired;
	uint32_t rnd;
};

/* Queue helpers (a job is in at most one queue, through qnext). */
void jobq_push(struct jobq *q, struct job *j);
void jobq_push_front(struct jobq *q, struct job *j);
struct job *jobq_pop(struct jobq *q);
bool jobq_remove(struct jobq *q, struct job *j);

/* Schedules a flush of the queues (load, commit, ack) and a read on the next
 * loop iteration, so that everything produced in one iteration is batched. */
void pipeline_kick(struct worker *w);

/* The job's evaluator name for metrics ("deterministic", ...) or NULL. */
const char *pipeline_evaluator(const struct job *j);

/* Queues the job for the commit transaction (state JOB_COMMIT_WAIT). */
void pipeline_to_commit(struct worker *w, struct job *j);

/* Rejects the job (reason, msg: copied into last_error, may be NULL): logged, then
 * queued for the commit as OP_REJECT (pipeline_to_commit). */
void pipeline_reject(struct worker *w, struct job *j, enum job_reason reason, const char *msg);

/* Queues the entry's XACK+XDEL (ack kind, dead-letter reason) and the metrics
 * outcome counted once it is done (NULL = none). */
void pipeline_to_ack(struct worker *w, struct job *j, enum job_ack ack, const char *reason,
                   enum job_outcome outcome);

/* Waits delay_ms in this process (retry_q; the claim is kept fresh), then runs stage again
 * (hooks.restart). */
void pipeline_wait(struct worker *w, struct job *j, enum job_stage stage, uint32_t delay_ms);

/* A step failed. counted: the failure is the job's (evaluation error, deadlock,
 * a bad statement), it uses up one of ARBITER_MAX_DELIVERIES attempts and the
 * job fails once they are used; otherwise (Redis or PostgreSQL unreachable)
 * it retries with backoff as long as it takes. why is copied (last_error). */
void pipeline_retry(struct worker *w, struct job *j, enum job_stage stage, bool counted,
                  const char *why);

/* The start of parking j in the delayed set for delay_ms, to run `stage` again: false when
 * it cannot be parked (no Redis or opsctl, a stopping worker, its commit unknown, a poison
 * or field-less entry); else its retry_stage / retry_at are set and it is held as a rate
 * limit check is (JOB_RATELIMIT) until pipeline_parked, the callback of the opsctl call
 * (opsctl_park, opsctl_image_wait) the caller then makes. */
bool pipeline_park_begin(struct worker *w, struct job *j, enum job_stage stage, uint32_t delay_ms);

/* The end of parking j in the delayed set (opsctl_park, opsctl_image_wait; j->retry_stage
 * and j->retry_at set before): ok, its entry waits there and this process lets go of it;
 * not ok (Redis refused or is gone), it waits here until retry_at and runs retry_stage
 * again. An abandoned job, or any job of a stopping worker, is let go. */
void pipeline_parked(struct worker *w, struct job *j, bool ok);

/* A row the job's commit needs is held by another transaction, usually another replica's
 * commit that ends within milliseconds: the job waits LOCK_SKIP_BASE_MS doubling per
 * consecutive skip up to LOCK_SKIP_CAP_MS (with jitter) and commits again. Not a failure:
 * no attempt is spent, it is logged at debug level and counted in
 * arbiter_commit_agent_lock_skips_total. why is copied (last_error). */
void pipeline_contended(struct worker *w, struct job *j, const char *why);

/* Ends the job as failed: submissions.status = failed with why as last_error
 * (evaluate jobs), a copy in {prefix}:dead, then XACK. */
void pipeline_fail(struct worker *w, struct job *j, const char *why);

/* Frees a job without acknowledging its entry (an abandoned job whose
 * callback came back, an acknowledgement given up; the entry, if any, stays
 * pending). */
void pipeline_drop(struct worker *w, struct job *j);

/* Puts the entry back on the stream for another worker (drain): queued for
 * acknowledgement as ACK_RELEASE; a reevaluation whose commit outcome is
 * unknown is dropped instead (left pending, see pipeline.c). May free j
 * (callers iterating w->jobs must have saved j->lnext). */
void pipeline_release(struct worker *w, struct job *j);

/* (Re)arms the retry timer for the earliest job in w->retry_q (after jobs
 * were removed from it). */
void pipeline_arm_retry(struct worker *w);

/* A job from one stream entry reply ([id, [f, v, ...]] or [id, nil]: a
 * deleted entry, poisoned "deleted_entry"), or NULL when the reply is not an
 * entry. deliveries: the delivery count known so far. */
struct job *pipeline_entry_job(redisReply *e, int deliveries);

/* Adds a new job of stream s (job.stream) to the live list (w->jobs) and stamps its
 * read/claim time; a job of the judge lane holds a judge slot from now on
 * (pipeline_lane_hold). */
void pipeline_adopt(struct worker *w, struct job *j, enum job_stream s);

/* The live (not abandoned) job of entry id of stream s, or NULL. */
struct job *pipeline_find(struct worker *w, enum job_stream s, const char *id);

/* The key of stream s: {prefix}:jobs or the judge lane. */
static inline const char *pipeline_stream_key(const struct worker *w, enum job_stream s)
{
	return s == JOB_STREAM_LANE ? w->k_judge_lane : w->k_jobs;
}

/* Starts an adopted job: poison entries are dead-lettered, over-delivered
 * ones failed, the rest queued for loading; while draining it is released. */
void pipeline_dispatch(struct worker *w, struct job *j);

/* How long intake pauses after the database refused a write for its own
 * condition (read-only, disk full, shutting down: SQLSTATE_DB_DOWN with a
 * server answer); each further refusal extends it, a committed write ends it.
 * When the pause lapses before any write committed, intake stays closed
 * until a probe says the database takes writes. The probe is a write that
 * matches no row: for a read-only refusal (25006) it fails the same way, so
 * its success ends the pause; other refusals (disk full...) no cheap
 * statement reproduces, so there the jobs in hand are the probe: intake
 * reopens when one commits, or when the worker holds none. A worker starts
 * as after a read-only refusal: it probes before its first read. */
#define PIPELINE_DB_REFUSING_PAUSE_MS 2000

struct pgc_result;

/* Notes a database error: one the database answered with a db_down SQLSTATE
 * (sqlstate.h) pauses intake for PIPELINE_DB_REFUSING_PAUSE_MS. */
void pipeline_note_db_error(struct worker *w, const struct pgc_result *r);

/* A write committed: the database takes writes again, intake resumes. */
void pipeline_note_db_ok(struct worker *w);

/* Before the first read: intake waits for a writability probe. */
void pipeline_db_probe_first(struct worker *w);

/* Milliseconds intake stays paused because the database refuses writes (0 =
 * not); while the database has not shown it takes writes again, starts the
 * probe described above (asynchronously; it kicks the pipeline when intake
 * may resume) and returns a short recheck delay. */
uint64_t pipeline_intake_paused_ms(struct worker *w);

/* Random 32-bit value (xorshift, seeded at start). */
uint32_t pipeline_rand(struct worker *w);

/* Free judge slots: ARBITER_JUDGE_INFLIGHT minus the jobs waiting for a verdict, those
 * admitted on their way to the judge (rate limit, budget check, a hybrid's test suite) and
 * those read from the judge lane not admitted yet (loading). */
static inline int pipeline_judge_room(const struct worker *w)
{
	return w->cfg->judge_inflight - w->judge_waiting - w->judge_headed - w->lane_unadmitted;
}

/* A job read from the judge lane holds a judge slot (job.lane_unadmitted, counted in
 * w->lane_unadmitted) from its read until it is admitted to the judge or ends. */
static inline void pipeline_lane_hold(struct worker *w, struct job *j)
{
	if (!j->lane_unadmitted) {
		j->lane_unadmitted = true;
		w->lane_unadmitted++;
	}
}

/* Ends pipeline_lane_hold's hold, if any. */
static inline void pipeline_lane_release(struct worker *w, struct job *j)
{
	if (j->lane_unadmitted) {
		j->lane_unadmitted = false;
		w->lane_unadmitted--;
	}
}

/* Jobs that take ARBITER_CONCURRENCY slots: every live job but those waiting for the LLM
 * judge's verdict, up to ARBITER_JUDGE_INFLIGHT of them; those have their own slots, so judge
 * jobs waiting on a slow provider do not hold the slots other jobs need. */
static inline int pipeline_slots_used(const struct worker *w)
{
	int parked = w->judge_waiting < w->cfg->judge_inflight ? w->judge_waiting
	                                                        : w->cfg->judge_inflight;
	return w->njobs - parked;
}

#endif
