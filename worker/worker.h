/*
 * worker: the `arbiter worker` daemon (CONTRACT §1, §2, §4, §5, §8).
 *
 * One libuv loop per process. Two Redis connections (one only for the
 * blocking XREADGROUP, one for everything else), a small PostgreSQL pool, the
 * rate limiter, the sandbox pool and the HTTP listener. A job moves through
 * the states of job.h: read → load (batched query) → §4 checks → rate limit
 * → evaluate → commit (batched transaction, commit.c) → XACK+XDEL (one MULTI
 * per batch). Transient failures retry in process with backoff; a job that
 * keeps failing ends `failed` and dead-lettered. The reconciler (reconcile.c)
 * re-enqueues submissions that Redis lost.
 *
 * This header is shared by worker.c, commit.c and reconcile.c only; the
 * public entry point is worker_run.
 */
#ifndef ARBITER_WORKER_H
#define ARBITER_WORKER_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "config.h"
#include "job.h"
#include "spec.h"

struct rq;
struct pgc_pool;
struct rl;
struct sandbox_pool;
struct http_server;

/* Runs the daemon with cfg until SIGTERM/SIGINT, then drains and returns the
 * process exit code (0 after a clean drain, 1 if it could not start). */
int worker_run(const struct config *cfg);

/* ---- internals shared by worker.c, commit.c, reconcile.c ---------------------------- */

struct jobq { struct job *head, *tail; int n; };

/* A parsed challenge spec + ground truth, cached by challenge id. Refcounted:
 * the cache table holds one reference, every job using it one more. */
struct spec_entry {
	struct spec_entry *next;     /* hash chain */
	char challenge_id[37];
	uint64_t hash;               /* of the spec text and the ground-truth text */
	int refs;
	bool in_table;
	struct spec *spec;           /* NULL when the spec is invalid */
	json_t *gt;                  /* parsed ground truth (never NULL once valid) */
	char *err;                   /* invalid_spec message when spec is NULL */
	size_t gt_bytes;             /* ground-truth text length */
	enum spec_evaluator ev;
};

#define SPEC_BUCKETS 256

enum worker_state {
	W_RUNNING,     /* reading and working */
	W_DRAINING,    /* SIGTERM: no new reads; finishing or releasing in-flight jobs */
	W_STOPPING,    /* closing handles; the loop ends when the last one is closed */
};

struct worker {
	uv_loop_t *loop;
	const struct config *cfg;
	enum worker_state state;

	struct rq *rq_read, *rq_cmd;
	struct pgc_pool *pg;
	struct rl *rl;
	struct sandbox_pool *sp;     /* NULL when the sandbox cannot be used here */
	struct judge *judge;         /* LLM judge client (worker/judge.h), NULL if it cannot start */
	char sp_err[256];
	struct http_server *http;

	uv_signal_t sig_term, sig_int;
	uv_timer_t t_kick, t_read, t_retry, t_reclaim, t_reconcile, t_promote, t_gauges,
	           t_drain, t_commit;
	int open_handles;            /* our own uv handles still open */
	int closing_parts;           /* rq/pg/http/rl closes still pending */

	char *k_jobs, *k_group, *k_dead, *k_delayed, *k_lock;

	struct job *jobs;            /* every live job (doubly linked) */
	int njobs;
	int nabandoned;              /* of which released at the drain deadline, awaiting a callback */
	long long read_client_id;    /* CLIENT ID of the reader connection (to unblock it), 0 = unknown */
	struct jobq load_q, commit_q, ack_q, retry_q;
	int loads_inflight, commits_inflight, acks_inflight;
	int max_loads, max_commits;

	bool reading;                /* an XREADGROUP is outstanding */
	bool group_ready;            /* XGROUP CREATE done on the current read connection */
	bool group_creating;
	bool own_pending_done;       /* our own pending entries were picked up at start */
	bool reclaim_busy, reconcile_busy, gauges_busy, migcheck_busy;
	bool migrations_ok;
	int db_version;
	uint64_t migcheck_at;
	uint64_t autoclaim_at;       /* loop time of the last XAUTOCLAIM (0 = never) */
	uint64_t db_down_since;      /* loop time since when no database connection is up (0 = up) */

	struct spec_entry *specs[SPEC_BUCKETS];
	int nspecs;

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
void worker_kick(struct worker *w);

/* The job's evaluator name for metrics ("deterministic", ...) or NULL. */
const char *worker_evaluator(const struct job *j);

/* Queues the job for the commit transaction (state JOB_COMMIT_WAIT). */
void worker_to_commit(struct worker *w, struct job *j);

/* Queues the entry's XACK+XDEL (ack kind, dead-letter reason) and the metrics
 * outcome counted once it is done (NULL = none). */
void worker_to_ack(struct worker *w, struct job *j, enum job_ack ack, const char *reason,
                   const char *outcome);

/* A step failed. counted: the failure is the job's (evaluation error, deadlock,
 * a bad statement), it uses up one of ARBITER_MAX_DELIVERIES attempts and the
 * job fails once they are used; otherwise (Redis or PostgreSQL unreachable)
 * it retries with backoff as long as it takes. why is copied (last_error). */
void worker_retry(struct worker *w, struct job *j, enum job_stage stage, bool counted,
                  const char *why);

/* Ends the job as failed: submissions.status = failed with why as last_error
 * (evaluate jobs), a copy in {prefix}:dead, then XACK. */
void worker_fail(struct worker *w, struct job *j, const char *why);

/* Frees a job without acknowledging its entry (an abandoned job whose
 * callback came back; the entry, if any, stays pending). */
void worker_drop(struct worker *w, struct job *j);

/* Random 32-bit value (xorshift, seeded at start). */
uint32_t worker_rand(struct worker *w);

/* commit.c: starts commit transactions for w->commit_q while fewer than
 * w->max_commits are in flight. */
void commit_flush(struct worker *w);

/* reconcile.c: one reconciler run (takes the lock, re-enqueues what Redis
 * lost). Clears w->reconcile_busy when done. */
void reconcile_run(struct worker *w);

#endif
