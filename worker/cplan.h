/*
 * cplan: the decisions of one commit transaction, as a pure function (no I/O,
 * no clock, no logging). commit.c reads rows under the transaction's locks,
 * asks cplan_make what to do with them, and turns the plan into statements.
 * Before that, which jobs of the commit queue the next transaction takes and
 * whether it starts now: cplan_batch_size and cplan_batch_wait (the end of this file).
 *
 * Inputs: the batch's jobs with their outcomes (job->op: complete, reevaluate,
 * reject, fail), and what the locks returned: the agents' rows, the
 * submissions' status and match status, and for each re-evaluation the
 * original result and the match's current (effective) Elo change.
 * Output, per job (in the job's decision fields, see job.h): op_eff, duplicate,
 * eu, eval_seq, hist_*; and for the batch: the writes in order, the agents'
 * final rows (the touched entries of the agents array) and the matches that
 * elo=adjust re-evaluations change.
 *
 * Ordering rules (each has a case in test/test-cplan.c):
 *  - Two passes: first evaluations, rejections and failures in batch order,
 *    then re-evaluations in batch order, whatever their order in the batch.
 *    The statements write in that order too, so an agent's elo_history in id
 *    order is the order its ratings were computed in (a sequential replay
 *    gives the agent's rating even when a batch holds an evaluation and an
 *    elo=adjust re-evaluation of the same agent).
 *  - An agent seen twice is updated twice, in order (the second sees the
 *    first's rating and match count).
 *  - A submission found final under the lock, missing, or decided earlier in
 *    the batch is a duplicate: nothing is written for it.
 *  - Two submissions of one match: the first completes it; the second is
 *    rejected with match_not_active (as is one whose match is not active).
 *  - Re-evaluations of one submission get eval_seq max+1, max+2, ... in order;
 *    elo=adjust ones of one match move the agent by the difference between
 *    the new change and the match's effective change so far, and the match
 *    shows the last of them.
 *  - A re-evaluation whose job id already has a result is a duplicate; one of
 *    a submission without a first result is OP_NO_RESULT (dead-lettered).
 *  - Stored values the worker did not write are refused, never wrapped: an
 *    elo=adjust re-evaluation of a match whose Elo columns break
 *    elo_stored_check (common/elo.h), or a re-evaluation of a submission whose
 *    eval_seq is at INT_MAX, becomes OP_FAIL with last_error "elo_inconsistent:
 *    ..." or "eval_seq_exhausted: ..." (the submission ends failed).
 */
#ifndef ARBITER_CPLAN_H
#define ARBITER_CPLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "elo.h"
#include "job.h"

/* An agent's row as locked; cplan_make updates it to the final row. */
struct cplan_agent {
	char id[37];
	int elo, mc, win, draw, loss, cs, bs;   /* rating, matches, wins, draws, losses, streaks */
	bool touched;                           /* set by cplan_make: the row is written */
};

/* A submission's row as locked. */
struct cplan_sub {
	char id[37];
	enum row_status status, match_status;
	bool has_result;                        /* it has its first result (eval_seq 1) */
};

/* A re-evaluation's original result, by batch position (found = false: no row). */
struct cplan_orig {
	bool found;            /* the submission exists */
	bool has_result;       /* it has a first result (eval_seq 1) */
	bool job_exists;       /* this job id already has a result (a redelivery) */
	bool has_before;       /* the rating before the first evaluation is known */
	int elo_before, k;     /* of the first evaluation */
	int eff_change;        /* the match's current Elo change */
	int max_seq;           /* highest eval_seq of the submission */
	int opponent;          /* opponent rating of the first evaluation, -1 = unknown */
	int match_elo_before;  /* matches.elo_before */
	struct elo_stored match;   /* the match's Elo columns as stored (checked for elo=adjust) */
};

/* A match changed by elo=adjust re-evaluations. */
struct cplan_match {
	char id[37];
	long long eff, elo_before;    /* effective change after the batch; rating before the match */
	const struct job *last;       /* the re-evaluation the match shows; NULL = none applied */
};

/* One write, in statement order. */
struct cplan_step {
	int pos;                      /* batch position of the job (the rows' "ord") */
	enum job_op op;               /* OP_COMPLETE, OP_REEVAL, OP_REJECT or OP_FAIL */
	bool has_before;              /* OP_REEVAL: the original rating is known (eu is valid) */
	bool adjust;                  /* OP_REEVAL: moves the agent's rating (elo_history row) */
	int opp;                      /* OP_REEVAL: opponent rating of the recomputation */
};

struct cplan {
	struct cplan_step *steps;     /* owned */
	int nsteps;
	struct cplan_match *matches;  /* owned */
	int nmatches;
	int ncomplete, nreeval, nreject, nfail;   /* steps of each kind */
};

/* True when the job's commit locks and checks its agent's row. */
bool cplan_touches_agent(const struct job *j);

/* True when the job's commit locks and checks its submission's row. */
bool cplan_touches_sub(const struct job *j);

/* Decides the batch jobs[0..n). agents (nagents) and subs (nsubs) are the
 * locked rows in any order (both arrays are sorted by id here; agents are
 * updated to their final rows and marked touched). orig has n entries by batch
 * position (only re-evaluations' are read; may be NULL when there are none).
 * Fills *out (free with cplan_free). Returns 0 (out of memory aborts). */
int cplan_make(struct job **jobs, int n, struct cplan_agent *agents, int nagents,
               struct cplan_sub *subs, int nsubs, const struct cplan_orig *orig,
               struct cplan *out);

/* Frees what cplan_make allocated. NULL ok. */
void cplan_free(struct cplan *p);

/* The longest a batch below ARBITER_COMMIT_OVERLAP_MIN waits for the running commit (ms): a
 * commit stuck on a lock must not hold the next one back for its whole timeout. */
#define CPLAN_OVERLAP_WAIT_MS 50

/* How many jobs of the commit queue starting at head (linked by qnext) the next
 * transaction takes: a solo job (its batch failed) alone; otherwise the jobs up to the
 * next solo one, at most max. 0 for an empty queue. */
int cplan_batch_size(const struct job *head, int max);

/* Whether the next transaction, of n jobs (cplan_batch_size) whose queue head has waited
 * age_ms, starts now (returns 0) or waits (returns the ms until it is asked again), with
 * `inflight` commits of this process running. A full batch (n == max), no running commit,
 * or a worker that is not running (draining) never waits. Otherwise a batch smaller than
 * overlap_min (ARBITER_COMMIT_OVERLAP_MIN) waits for the running commit's end, at most
 * CPLAN_OVERLAP_WAIT_MS after its head was queued; then one younger than delay_ms
 * (ARBITER_COMMIT_DELAY_MS; 0 = off) waits to fill up until that age. */
uint64_t cplan_batch_wait(int n, int max, int overlap_min, int delay_ms, int inflight,
                          uint64_t age_ms, bool running);

#endif
