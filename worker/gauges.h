/*
 * gauges: the worker's periodic look at itself and at Redis (w->t_gauges,
 * every GAUGES_MS): jobs in flight, sandbox and judge figures, the stream's
 * length, lag and pending entries, the delayed set by cause and the dead
 * letters for /metrics; the heartbeat and the lasting Redis cause (opsctl);
 * a warning when the other key style's stream holds entries no worker reads;
 * and the schema check (arbiter_migrations' version against this binary's).
 * Event-loop thread only.
 */
#ifndef ARBITER_GAUGES_H
#define ARBITER_GAUGES_H

#include "pipeline.h"

/* Starts the gauges timer (w->t_gauges, initialised by the caller): first
 * after 200 ms, then every GAUGES_MS. Each tick does nothing once the worker
 * stops, and sends the Redis commands only while the previous tick's are
 * answered and the command connection is up. */
void gauges_start(struct worker *w);

/* Reads the schema version into w->db_version and w->migrations_ok
 * (asynchronously; w->migcheck_busy meanwhile); when it is recent enough the
 * pipeline is kicked, so reading starts at once. The first check (the schema
 * not checked yet, db_version -2) is sent even before a connection is up
 * (pgc_run waits for one); later ones are skipped while none is up. */
void gauges_check_schema(struct worker *w);

#endif
