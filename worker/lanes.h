/*
 * lanes: the low-priority lane for bulk re-evaluation (deploy/README.md "Priority lanes").
 *
 * `scripts/requeue` adds its jobs to the stream `{prefix}:jobs:bulk` instead
 * of `{prefix}:jobs`. No worker reads the bulk stream directly: every
 * LANES_FEED_MS each worker runs one Lua script that moves bulk entries to the
 * live stream, atomically (XADD to jobs with the same fields, XDEL from bulk):
 *
 *   - live first: while the live backlog (entries not yet delivered: XLEN minus
 *     pending) is below ARBITER_CONCURRENCY, up to ARBITER_CONCURRENCY entries
 *     are moved per run, so an idle fleet works through the bulk lane at full
 *     speed;
 *   - weighted, never starving either side: while live jobs are waiting, only
 *     ARBITER_BULK_SHARE percent of ARBITER_CONCURRENCY (rounded up; 0 = none)
 *     is moved per run, so live submissions keep most of the capacity and the
 *     bulk lane still moves.
 *
 * From the live stream on, a bulk job is an ordinary job (claims, retries,
 * exactly-once commit). Metrics: arbiter_bulk_lane_length (gauge) and
 * arbiter_bulk_moved_total (counter).
 */
#ifndef ARBITER_LANES_H
#define ARBITER_LANES_H

#include <stdint.h>

#include <uv.h>

#define LANES_BULK_SUFFIX ":jobs:bulk"
/* The bulk lane's name from the jobs stream's ("arbiter:jobs" → "arbiter:jobs:bulk"): the
 * same hash tag, so the feeder's two keys share a Cluster slot. */
#define LANES_BULK_FROM_JOBS ":bulk"
#define LANES_FEED_MS 500

struct rq;
struct lanes;

/* Starts the feeder on loop, using rq for its script. stream, bulk and group are copied;
 * rq is borrowed and must outlive the feeder (free it first). concurrency > 0, share in
 * 0..100. */
struct lanes *lanes_new(uv_loop_t *loop, struct rq *rq, const char *stream, const char *bulk,
                        const char *group, int concurrency, int share);

/* How many entries to move in one run, given the live backlog (pure; for the tests). */
int lanes_batch(long long live_backlog, int concurrency, int share);

/* Stops; freed after its timer closed and its last command answered (the loop must run).
 * NULL ok. */
void lanes_free(struct lanes *l);

#endif
