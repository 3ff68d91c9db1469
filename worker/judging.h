/*
 * judging: the evaluate stage's hand-off to the LLM judge (judge.h): the
 * evaluator judge, or the judge after the test suite of a hybrid spec. It
 * checks the shared spend budget ({base}:judge:spend:<period>) when
 * ARBITER_JUDGE_BUDGET is set, asks the judge, counts the job in
 * w->judge_waiting meanwhile, and scores the verdict (scoring.h). Event-loop
 * thread only.
 */
#ifndef ARBITER_JUDGING_H
#define ARBITER_JUDGING_H

#include "pipeline.h"
#include "score.h"

/* Asks the judge about j (state JOB_EVALUATING); ext (may be NULL) holds the
 * test suite's scores of a hybrid spec (copied). With a budget, the period's
 * spend is read first; an exhausted budget or Redis trouble retries the job
 * (not counted). The verdict is scored with the spec (then
 * scoring_finish); provider trouble retries uncounted, an invalid verdict
 * counts. The callbacks come later (never synchronously), except a retry when
 * Redis or the judge client is unavailable. */
void judging_run(struct worker *w, struct job *j, const struct score_ext *ext);

#endif
