/*
 * claim: keeping our own entries claimed, taking over dead consumers'
 * entries (XAUTOCLAIM), and adopting claimed entries. The timing rules (all
 * derived from ARBITER_CLAIM_IDLE_MS) are explained in claim.c.
 */
#ifndef ARBITER_CLAIM_H
#define ARBITER_CLAIM_H

#include <stdint.h>

#include "pipeline.h"

/* The claim's timing for ARBITER_CLAIM_IDLE_MS = idle_ms, in ms (the rules are explained
 * in claim.c). Pure. */
struct claim_timing {
	uint64_t tick;          /* the claim timer's period: idle/4, at least 20 */
	uint64_t refresh_age;   /* our entries claimed this long ago or more are refreshed: idle/3 */
	uint64_t min_idle;      /* the refresh's XCLAIM min-idle-time: idle/4 */
	uint64_t db_down;       /* without a database this long, refreshing stops: idle/2 */
	uint64_t autoclaim;     /* XAUTOCLAIM at most this often: idle/4, at least 200 */
};
struct claim_timing claim_timing(int idle_ms);

/* How many entries one XAUTOCLAIM asks for with `room` free slots: room, at most 100;
 * 0 (no XAUTOCLAIM) when room <= 0. */
int claim_autoclaim_count(int room);

/* The period of the claim timer for this configuration (ms): claim_timing's tick. */
uint64_t claim_tick_ms(const struct config *cfg);

/* One tick of the claim timer: tracks whether the database is reachable,
 * refreshes our in-flight entries, and starts an XAUTOCLAIM when due (on the live stream,
 * and on the judge lane while judge slots are free). */
void claim_tick(struct worker *w);

/* Adopts the entries of a stream reply array that came from a claim
 * (XAUTOCLAIM, or our own pending entries at start) on stream s: entries already in
 * flight here only get their claim time refreshed; the others become jobs,
 * whose delivery counts are read with XPENDING before they are dispatched. */
void claim_adopt(struct worker *w, redisReply *entries, enum job_stream s);

#endif
