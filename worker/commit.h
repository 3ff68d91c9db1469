/*
 * commit: the commit transaction for many jobs (the executor of cplan's
 * decisions). See commit.c for the protocol (two pipelined round trips per
 * batch, lock order, retries).
 */
#ifndef ARBITER_COMMIT_H
#define ARBITER_COMMIT_H

#include "pipeline.h"

/* Starts commit transactions for the jobs in w->commit_q (state
 * JOB_COMMIT_WAIT) while fewer than w->max_commits are in flight. Each job
 * ends queued for acknowledgement, back in the commit queue alone (its batch
 * failed), or in the retry queue. */
void commit_flush(struct worker *w);

/* Registers the commit's statements with the pool, to be prepared once per
 * connection (pgc_pool_prepare). */
void commit_prepare(struct pgc_pool *p);

/* Run right after BEGIN by a transaction whose prepared statements reach their rows by key
 * (the ids of a batch): makes every plan of theirs keyed nested loops, whatever the
 * statistics said when it was made (no sequential scans, hash or merge joins), and runs
 * their generic plans (made once per connection) instead of planning each call, for this
 * transaction only. Used by the commit and by the worker's load of a batch. */
extern const char SQL_KEYED_PLANS[];

#endif
