/*
 * eval: the evaluate stage, from a loaded and checked job to its scoring:
 * `arbiter pause --challenge` holds, the judge lane's hand-off (a judged job
 * with no free judge slot waits in the lane), the rate limit, then the
 * evaluator: deterministic (scoring.h), the LLM judge (judging.h), or a
 * sandbox evaluator (test suite, custom script; marked `evaluating` in the
 * database first). Event-loop thread only.
 */
#ifndef ARBITER_EVAL_H
#define ARBITER_EVAL_H

#include "pipeline.h"

/* Starts (or restarts, after a backoff) the evaluate stage of a loaded job
 * whose checks passed: a paused challenge holds it (opsctl_hold), a judged job
 * with no free judge slot goes to the judge lane, a first evaluation is rate
 * limited (rl_check_stream), then it is evaluated. Each path ends in the
 * commit queue (scoring_finish, pipeline_reject), a retry, or the job leaving
 * this worker (deferred, held, diverted); callbacks come later, but a retry
 * or a deterministic scoring may happen synchronously. */
void eval_start(struct worker *w, struct job *j);

#endif
