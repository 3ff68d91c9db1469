/*
 * standings_apply: the worker's side of the standings projection
 * (sql/008_standings_projection.sql, sql/README.md "The projection"). Every
 * replica calls standings_apply() every ARBITER_STANDINGS_APPLY_MS on its
 * pool; whichever holds the lease (the progress row's lock) applies the next
 * batch of up to ARBITER_STANDINGS_BATCH results, the others learn the lag.
 * A batch that leaves results behind is followed at once by the next. While
 * the replica is busy the calls wait, up to ARBITER_STANDINGS_BUSY_LAG_MS of
 * lag (sapply_defer).
 */
#ifndef ARBITER_STANDINGS_APPLY_H
#define ARBITER_STANDINGS_APPLY_H

#include <stdbool.h>
#include <stdint.h>

struct worker;

/* What one call of standings_apply() reported. */
struct sapply_outcome {
	bool failed;        /* the statement failed (the schema is behind, the database is down) */
	bool busy;          /* another session held the lease: nothing applied here */
	bool caught_up;     /* no unapplied result was left behind */
	int applied;        /* results this call applied */
};

/* The delay in ms before the next call: 0 right after a batch that left results
 * behind, the interval otherwise, 5 intervals (at most 5 s, at least the
 * interval) after a failure. Pure; interval_ms >= 1. */
uint64_t sapply_next_delay(const struct sapply_outcome *o, int interval_ms);

/* True when a due call should wait another interval instead: the replica is
 * busy (it holds jobs and its last read from the stream came back full,
 * `backlog`: more wait; or at least half of its `concurrency` slots hold jobs) and
 * the standings lag, as last reported (lag_ms, NAN unknown) plus the time since
 * (since_ms), is below busy_lag_ms. The projection's work then falls on a
 * quieter moment or, under sustained load, into fewer larger batches, while
 * the lag stays within busy_lag_ms plus the batches' own time. An unknown lag
 * and busy_lag_ms 0 never wait. Pure. */
bool sapply_defer(int slots_used, int concurrency, bool backlog, double lag_ms,
                  uint64_t since_ms, int busy_lag_ms);

/* The first call, now, if none was made yet (called when the schema check
 * passes): its answer, normally nothing pending, gives the replica the lag at
 * once, so a replica started on a backlog waits from its first tick instead of
 * chasing a watermark that went stale while no replica ran. */
void sapply_kick(struct worker *w);

/* Prepares the applier (w->t_standings is initialised by the caller): its first
 * call is sapply_kick's, the later ones its timer's, none when
 * ARBITER_STANDINGS_APPLY_MS is 0. Calls run only while the worker runs and its
 * schema check passed; one call at a time. */
void sapply_start(struct worker *w);

#endif
