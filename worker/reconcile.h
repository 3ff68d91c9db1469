/*
 * reconcile: re-enqueues submissions that PostgreSQL holds unfinished and
 * Redis lost (see reconcile.c for the steps and why a backlog is never
 * duplicated).
 */
#ifndef ARBITER_RECONCILE_H
#define ARBITER_RECONCILE_H

#include "pipeline.h"

/* One reconciler run: takes the lock, re-enqueues what Redis lost. Clears
 * w->reconcile_busy when done (asynchronously). */
void reconcile_run(struct worker *w);

#endif
