/*
 * job: one stream entry of {prefix}:jobs on its way through the worker, and
 * the pure helpers around it: parsing and checking an entry's fields
 * (worker/README.md "Jobs"), UUID checks, the dead-letter / release argument vectors,
 * JSON string escaping for the SQL batches, and retry backoff.
 *
 * Ownership: a job belongs to the worker's list of live jobs from the moment
 * it is read until job_free. At any time it is in exactly one state (below);
 * the state names who holds it. States change only through job_set_state,
 * whose table lists the allowed transitions; this module has no I/O.
 */
#ifndef ARBITER_JOB_H
#define ARBITER_JOB_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "elo.h"
#include "score.h"
#include "util.h"

/* Most fields (name/value pairs) a job entry may have: an entry with more is
 * poison ("too_many_fields"), and its dead-letter copy keeps only the first
 * JOB_MAX_FIELDS. A plain number: the rate limiter's scripts embed it. */
#define JOB_MAX_FIELDS 64

enum job_kind { JOB_EVALUATE, JOB_REEVALUATE };

/* Why an entry is invalid (0: it is not). The names, job_poison_name(), are the
 * dead-letter reasons (worker/README.md "Jobs"). */
enum job_poison {
	POISON_NONE = 0,
	POISON_TOO_MANY_FIELDS,
	POISON_MISSING_SUBMISSION_ID,
	POISON_INVALID_SUBMISSION_ID,
	POISON_INVALID_KIND,
	POISON_INVALID_ELO,
	POISON_INVALID_ATTEMPT,
	POISON_DELETED_ENTRY,   /* XREADGROUP/XAUTOCLAIM returned a deleted entry (nil fields) */
};
enum job_elo { JOB_ELO_KEEP, JOB_ELO_ADJUST };

enum job_state {
	JOB_NEW,          /* just parsed; held by the code that read it */
	JOB_LOAD_WAIT,    /* queued in w->load_q for the next load query */
	JOB_LOADING,      /* part of a load batch in flight (held by the batch) */
	JOB_MARKING,      /* sandbox job: status=evaluating/attempts write in flight */
	JOB_RATELIMIT,    /* rl_check in flight (held by its callback) */
	JOB_EVALUATING,   /* evaluator running: sandbox or thread pool (held by its callback) */
	JOB_COMMIT_WAIT,  /* queued in w->commit_q */
	JOB_COMMIT_CONN,  /* part of a commit batch waiting for a database connection: nothing
	                   * sent yet (held by the batch) */
	JOB_COMMITTING,   /* part of a commit batch whose statements are in flight */
	JOB_BACKOFF,      /* waiting in w->retry_q until retry_at */
	JOB_ACK_WAIT,     /* queued in w->ack_q (XACK+XDEL, maybe dead-letter/release) */
	JOB_ACKING,       /* part of an ack MULTI in flight (held by its callback) */
	JOB_ABANDONED,    /* released at the drain deadline while an async step ran: freed
	                   * when that step's callback comes back, nothing else done */
};
#define JOB_NSTATES (JOB_ABANDONED + 1)

/*
 * Which fields are valid when (the rest of struct job is valid in every state):
 *  - row, spec, source_ip of row: from the end of JOB_LOADING (the load's
 *    callback) on; cleared when a retry restarts at STAGE_LOAD. row.answer
 *    and row.metadata only until the evaluation is done (then NULL).
 *  - res, res_json, extra, eval_*: while has_res (set at the end of
 *    JOB_EVALUATING, or inline for deterministic scoring) until the result is
 *    dropped (a retry at STAGE_EVAL re-evaluates).
 *  - op, reason, last_error: from JOB_COMMIT_WAIT on (op is set by whoever
 *    queues the commit: evaluation done, rejection, failure).
 *  - op_eff, duplicate, eu, eval_seq, hist_*: decided under the locks during
 *    JOB_COMMITTING (cplan), valid from then on; reset when a commit fails.
 *  - ack, ack_reason, outcome: from JOB_ACK_WAIT on.
 *  - retry_at, retry_stage: in JOB_BACKOFF.
 *  - commit_queued_at: in JOB_COMMIT_WAIT.
 *  Progress flags that survive retries (not states): rl_done (the rate limit
 *  passed once), marked (sandbox attempt recorded), solo / load_solo (the job's
 *  batch failed: go alone), commit_unknown (a COMMIT was lost in flight).
 */

/* What the commit transaction does for the job. */
enum job_op {
	OP_NONE,          /* not decided yet */
	OP_COMPLETE,      /* first evaluation: result, dimensions, match, agent, elo_history */
	OP_REEVAL,        /* appended result (eval_seq max+1), Elo keep/adjust */
	OP_REJECT,        /* submission rejected with reason */
	OP_FAIL,          /* submission failed with last_error, copy dead-lettered */
	OP_NO_RESULT,     /* op_eff only: a reevaluation of a submission without a first
	                   * result, found under the lock; nothing written, dead-lettered */
	OP_REFUSED,       /* op_eff only: a reevaluation refused under the lock for a stored
	                   * value it cannot build on (last_error names it); nothing written,
	                   * the submission keeps its status, dead-lettered with that reason */
	OP_RESTORE,       /* op_eff only: an evaluate job for a submission that already has its
	                   * first result (an API server set it back to queued): the status goes
	                   * back to completed, nothing else is written */
};

/* How a job ended: the outcome label of arbiter_jobs_total. */
enum job_outcome {
	OUTCOME_NONE,             /* not counted (released, deleted entry) */
	OUTCOME_COMPLETED, OUTCOME_REJECTED, OUTCOME_FAILED, OUTCOME_DEAD_LETTERED,
	OUTCOME_DEFERRED, OUTCOME_DUPLICATE,
};

/* Why a submission is rejected or an entry dead-lettered (the reject_reason
 * column, the dead letter's reason field, the metrics label). */
enum job_reason {
	REASON_NONE,
	REASON_SUBMISSION_NOT_FOUND, REASON_NOT_MATCH_OWNER, REASON_MATCH_EXPIRED,
	REASON_MATCH_NOT_ACTIVE, REASON_INVALID_SPEC, REASON_RATE_LIMITED,
	REASON_REEVALUATE_WITHOUT_RESULT,
};

/* A submission's or a match's status column, parsed once where it is read. */
enum row_status {
	ST_UNKNOWN,                       /* anything else (never written by this project) */
	ST_QUEUED, ST_EVALUATING, ST_ACTIVE, ST_COMPLETED, ST_REJECTED, ST_FAILED, ST_EXPIRED,
};

/* The stream a job's entry is in: the live stream {prefix}:jobs, or the judge lane
 * {prefix}:jobs:judge it was read from (worker/judgelane.h). Its acknowledgement, claims,
 * release, hold and delivery count are on that stream, in the group of the same name. */
enum job_stream { JOB_STREAM_LIVE, JOB_STREAM_LANE };

/* How the entry leaves the stream once the job is done. */
enum job_ack { ACK_PLAIN, ACK_DEAD, ACK_RELEASE };

/* Where a retry restarts. */
enum job_stage { STAGE_LOAD, STAGE_EVAL, STAGE_COMMIT, STAGE_ACK };

/* The submission row with its match and challenge (from the load query). */
struct job_row {
	enum row_status status;            /* submissions.status */
	char agent_id[37], match_id[37], challenge_id[37], match_agent_id[37];
	char *source_ip;                   /* host(submissions.source_ip); owned */
	json_t *answer, *metadata;         /* owned; dropped once evaluated */
	int64_t submitted_ms, started_ms, expires_ms;
	bool expired;                      /* submitted_at > expires_at (exact, from SQL) */
	int attempts;
	enum row_status match_status;      /* matches.status */
	int attempt_number;
	bool memoryless;
	char difficulty[16];
	bool has_rating;
	int rating;
	int time_limit_secs;
	size_t input_bytes;                /* answer + metadata text length */
	/* Why the answer or metadata could not be read (jsonb that jansson refuses: nested deeper
	 * than 2,048 levels, a number beyond a double), "" when both were read. Such a value is
	 * scored as null (metadata as {}) and this becomes an error warning of the result: the
	 * submission's own doing ends as its score, never as `failed`. */
	char unreadable[200];
};

struct spec_entry;     /* worker.c's spec cache entry (refcounted) */
struct worker;

struct job {
	struct job *lnext, *lprev;         /* w->jobs: every live job */
	struct job *qnext;                 /* the one queue the job is in, if any */
	struct worker *w;
	enum job_state state;

	/* The entry. */
	char id[48];                       /* stream entry id */
	enum job_stream stream;            /* the stream it is in (live unless read from the lane) */
	char **fields;                     /* 2*nf strings, owned (NUL-terminated copies) */
	size_t *flens;                     /* their lengths (values may hold NUL bytes) */
	int nf;                            /* field/value pairs */
	char sub[37];                      /* submission id, lower case ("" if invalid) */
	enum job_kind kind;
	enum job_elo elo;
	const char *source_ip;             /* points into fields, NULL if absent */
	int64_t enqueued_at_ms;            /* the entry's enqueued_at (valid when has_enqueued_at) */
	bool has_enqueued_at;              /* the entry carries a readable enqueued_at */
	enum job_poison poison;            /* why the entry is invalid, POISON_NONE if valid */

	/* Delivery bookkeeping. */
	int attempts;                      /* number of the current attempt (1-based) */
	int retries;                       /* in-process retries so far (backoff exponent) */
	int lock_skips;                    /* times its agent's row was held at commit (backoff) */
	uint64_t read_at;                  /* loop time (ms) when read */
	uint64_t claimed_at;               /* loop time of the last claim (read/XCLAIM) */
	uint64_t retry_at;                 /* loop time of the next retry (JOB_BACKOFF) */
	uint64_t commit_queued_at;         /* loop time it entered w->commit_q */
	enum job_stage retry_stage;
	bool solo;                         /* commit alone (its batch failed) */
	bool load_solo;                    /* load alone (its load batch failed) */
	bool rl_done;                      /* rate limit already passed */
	bool lane_unadmitted;              /* read from the lane, not admitted to the judge yet
	                                    * (counted in w->lane_unadmitted) */
	bool judge_headed;                 /* admitted to the judge (counted in w->judge_headed)
	                                    * until it asks the judge or is freed */
	bool marked;                       /* sandbox: evaluating/attempts written */
	int64_t image_since_ms;            /* container: wall-clock ms when it began waiting for its
	                                    * image (the entry's image_wait_since), 0 = not waiting */

	/* Loaded data. */
	struct job_row row;
	struct spec_entry *spec;           /* cache reference, or NULL */

	/* Evaluation. */
	bool has_res;
	struct score_result res;
	char *res_json;                    /* score_result_dumps text */
	json_t *extra;                     /* tests/compile for the evaluation log (owned) */
	char *judge_row;                   /* judge_verdicts row the commit writes (judge.h), owned */
	char judge_key[65];                /* its verdict key ("" = none) */
	int64_t eval_started_ms, eval_done_ms;   /* wall clock */
	uint64_t eval_t0;                  /* uv_hrtime() at the start, for the histogram */

	/* Outcome. */
	enum job_op op;
	enum job_reason reason;            /* OP_REJECT reason */
	char *last_error;                  /* owned; last failure or invalid_spec message */
	enum job_op op_eff;                /* op as decided under the locks (commit.c) */
	enum job_ack ack;
	const char *ack_reason;            /* dead-letter reason text (static), NULL = from op */
	int ack_tries;
	enum job_outcome outcome;          /* counted in the metrics once acked */
	bool duplicate;                    /* commit found the submission final already */
	bool commit_unknown;               /* a COMMIT of it was lost in flight: it may have happened */

	/* Filled by commit.c under the locks (per attempt). */
	struct elo_update eu;
	int eval_seq;
	int hist_before, hist_after, hist_change;   /* reevaluate adjust: agent rating move */
};

/* Parses one entry. fields: 2*nf strings (copied). Fills the entry part of a
 * new job (state JOB_NEW, attempts = deliveries). A job whose entry is
 * invalid has poison set to the reason (POISON_MISSING_SUBMISSION_ID, ..._INVALID_SUBMISSION_ID,
 * ..._INVALID_KIND, ..._INVALID_ELO, ..._INVALID_ATTEMPT, ..._TOO_MANY_FIELDS).
 * A valid `attempt` field (1..JOB_MAX_ATTEMPT, set when a retry waits in the delayed set)
 * raises attempts to it, and above 1 sets rl_done. An `image_wait_since` field that is a
 * plain positive integer (set when a container job waits for its image) sets image_since_ms
 * and rl_done; any other value is ignored. Never fails (OOM aborts). Free with
 * job_free. */
#define JOB_MAX_ATTEMPT 1000000

/* The dead-letter reason of p ("too_many_fields", "missing_submission_id", ...,
 * "deleted_entry"); NULL for POISON_NONE. */
const char *job_poison_name(enum job_poison p);
struct job *job_new(const char *id, const char *const *fields, const size_t *lens, int nf,
                    int deliveries);

/* Moves j to state `to`. The allowed transitions are one table in job.c; a
 * transition not in it is a bug: it asserts in builds without NDEBUG, and in
 * release builds it is counted (job_bad_transitions) and done anyway. */
void job_set_state(struct job *j, enum job_state to);

/* Transitions not in the table so far (release builds), for the metrics. */
unsigned long job_bad_transitions(void);

/* Name of a state ("load_wait", ...), for logs. */
const char *job_state_name(enum job_state s);

/* Names at the edges (SQL, metrics, dead letters, logs): "completed", ...;
 * NULL for OUTCOME_NONE / REASON_NONE. */
const char *job_outcome_name(enum job_outcome o);
const char *job_reason_name(enum job_reason r);

/* The status column's text ("queued", ...) as an enum, and back. */
enum row_status job_status_parse(const char *s);
const char *job_status_name(enum row_status s);

/* True for a submission status that no job changes any more. */
bool job_status_final(enum row_status s);

/* Frees everything the job owns (not the spec reference: the caller drops it
 * first). NULL ok. */
void job_free(struct job *j);

/* Every last_error (submissions.last_error, and the dead-letter reason `failed: ...`)
 * is at most this many bytes of valid UTF-8. */
#define JOB_ERROR_MAX 2000
/* Sets j->last_error to a copy of msg made valid UTF-8 (invalid bytes become U+FFFD) and
 * cut at a character boundary to JOB_ERROR_MAX bytes; NULL clears it. msg may be
 * j->last_error itself. The one way last_error is set: whatever produced the text (a
 * script, a provider, a name from a spec), what is stored is valid UTF-8. */
void job_set_error(struct job *j, const char *msg);

/* Drops the evaluation result (after a failure, before re-evaluating). */
void job_clear_result(struct job *j);

/* Drops the loaded row (before loading it again). */
void job_clear_row(struct job *j);

/* Value of field `name` of the entry, or NULL. */
const char *job_field(const struct job *j, const char *name);

/* True when s is a UUID in canonical 8-4-4-4-12 hex form (any case). If out
 * is not NULL it receives the lower-case form (37 bytes). */
bool job_uuid_ok(const char *s, char out[37]);

/* Argument vector for `XADD <stream> * <fields...> [reason R original_id ID
 * worker_id W failed_at MS]`: with dead = true the four dead-letter fields
 * are appended (and same-named original fields left out); with dead = false
 * the original fields are copied verbatim (release back to the jobs stream).
 * Returns argc; *argv and *lens are malloc'd arrays (the strings are borrowed
 * from j, the arguments and the static buffer in bufs, which must outlive the
 * vector). */
struct job_argv_bufs { char failed_at[24]; };
int job_xadd_argv(const struct job *j, const char *stream, bool dead, const char *reason,
                  const char *worker_id, int64_t now_ms, struct job_argv_bufs *bufs,
                  const char ***argv, size_t **lens);

/* Appends s as a JSON string literal ("..." with escapes) to sb. Invalid
 * UTF-8 bytes are replaced by U+FFFD and NUL by a space (PostgreSQL's jsonb
 * accepts neither). */
void job_json_str(struct strbuf *sb, const char *s);

/* Backoff for retry number n (1-based): exponential from base_ms doubling up
 * to cap_ms, with jitter in [d/2, d]. rnd is a uniform random 32-bit value. */
uint32_t job_backoff_ms(int n, uint32_t base_ms, uint32_t cap_ms, uint32_t rnd);

/* Parses JSON text from PostgreSQL (jsonb as text: answer, metadata, ground
 * truth). A document whose integers do not fit 64 bits is read again with
 * every integer as a double. Returns a new reference, or NULL with *jerr set. */
json_t *job_json_load(const char *text, size_t len, json_error_t *jerr);

/* Unix time in ms (wall clock). */
int64_t job_now_ms(void);


#endif
