/*
 * ack: acknowledging finished entries in batches (MULTI [XADD dead/release]
 * XACK XDEL EXEC). See ack.c for the batching rules.
 */
#ifndef ARBITER_ACK_H
#define ARBITER_ACK_H

#include "pipeline.h"

/* Sends batches for the jobs waiting in w->ack_q (state JOB_ACK_WAIT) while
 * fewer than the maximum are in flight. Each job ends freed (acknowledged, or
 * given up and left pending) or back in the retry queue. Never calls back
 * synchronously except when the Redis connection object is closing. */
void ack_flush(struct worker *w);

#endif
