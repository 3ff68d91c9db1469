/*
 * load: the load and check stages. Jobs queued in w->load_q are loaded in
 * batches (one pipelined transaction: the submissions with their match and
 * challenge, then each distinct challenge's spec and ground truth, parsed once
 * in w->specs), then checked in the order of worker/README.md "Validation before
 * scoring" (duplicates, attempts used up, match owner, expiry, status, spec);
 * a job that passes goes on to the evaluate stage (eval.h). Event-loop thread
 * only.
 */
#ifndef ARBITER_LOAD_H
#define ARBITER_LOAD_H

#include "pipeline.h"

/* Starts loads for the jobs in w->load_q (state JOB_LOAD_WAIT) while fewer
 * than w->max_loads are in flight, up to LOAD_BATCH_MAX jobs per batch (a job
 * marked load_solo alone). Each job ends checked and on its way (rejected,
 * acknowledged, failed, or to eval_start), back in the load queue alone (its
 * batch failed in a way one row may cause), or in the retry queue. Callbacks
 * run later; if the pool is closed the batch is retried synchronously. */
void load_flush(struct worker *w);

/* Registers the load's statements with the pool, to be prepared once per
 * connection (pgc_pool_prepare). */
void load_prepare(struct pgc_pool *p);

#endif
