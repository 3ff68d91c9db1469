/*
 * claim: keeping our own entries claimed, taking over dead consumers'
 * entries (XAUTOCLAIM), and adopting claimed entries. The timing rules (all
 * derived from ARBITER_CLAIM_IDLE_MS) are explained in claim.c.
 */
#ifndef ARBITER_CLAIM_H
#define ARBITER_CLAIM_H

#include <stdint.h>

#include "pipeline.h"

/* The period of the claim timer for this configuration (ms). */
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
