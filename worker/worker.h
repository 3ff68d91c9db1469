/*
 * worker: the `arbiter worker` daemon (README: "Jobs", "Validation before scoring",
 * "Elo", "Command line"; the tables: sql/README.md).
 *
 * One libuv loop per process. Two Redis connections (one only for the
 * blocking XREADGROUP, one for everything else), a small PostgreSQL pool, the
 * rate limiter, the sandbox pool and the HTTP listener. A job moves through
 * the states of job.h: read → load (batched query, load.c) → validation checks → rate
 * limit → evaluate (eval.c) → commit (batched transaction, commit.c) → XACK+XDEL (one MULTI
 * per batch). Transient failures retry in process with backoff; a job that
 * keeps failing ends `failed` and dead-lettered. The reconciler (reconcile.c)
 * re-enqueues submissions that Redis lost.
 *
 * This header is the public API (cmd_worker.c); the modules of the pipeline
 * share pipeline.h.
 */
#ifndef ARBITER_WORKER_H
#define ARBITER_WORKER_H

#include "config.h"

/* Runs the daemon with cfg until SIGTERM/SIGINT, then drains and returns the
 * process exit code (0 after a clean drain, 1 if it could not start). */
int worker_run(const struct config *cfg);

#endif
