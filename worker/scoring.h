/*
 * scoring: the end of the evaluate stage: scoring a loaded job with its spec
 * (deterministic inline, or on libuv's thread pool when the inputs are large),
 * with the external scores of a sandbox evaluator or the judge's verdict, and
 * handing the result to the commit. Event-loop thread only (the thread-pool
 * part touches only the job, see scoring.c).
 */
#ifndef ARBITER_SCORING_H
#define ARBITER_SCORING_H

#include "pipeline.h"
#include "score.h"

/* Fills m with the match times and flags of j's loaded row (for the scorer). */
void scoring_fill_match(const struct job *j, struct score_match *m);

/* The job's result (j->res) is final: stamps it, adds an unreadable-input
 * warning, counts the evaluation time, serialises the result, frees the
 * inputs and queues the job for the commit (pipeline_to_commit). */
void scoring_finish(struct worker *w, struct job *j);

/* Scores j with its spec and ext (the external scores of a sandbox evaluator
 * or the judge; NULL: none). Deterministic inputs larger than
 * OFFLOAD_INPUT_BYTES are scored on libuv's thread pool (state
 * JOB_EVALUATING; the job is not touched by the loop meanwhile). Ends with
 * scoring_finish, or pipeline_retry (counted) when the scorer fails, or
 * pipeline_drop when the job was abandoned meanwhile; may do so
 * synchronously. */
void scoring_run(struct worker *w, struct job *j, const struct score_ext *ext);

#endif
