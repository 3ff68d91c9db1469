/*
 * standings: the operator side of the rolling-window standings of
 * sql/002_standings.sql (see sql/README.md): connecting, the batched and
 * resumable backfill, the count of agents still waiting for it.
 * Blocking libpq: for commands, never the event loop.
 */
#ifndef ARBITER_STANDINGS_H
#define ARBITER_STANDINGS_H

#include <stddef.h>

#include <libpq-fe.h>

/* Connects to conninfo (10 s timeout) under the given application name. Returns the
 * connection, or NULL with a message in err. The caller PQfinish()es it. */
PGconn *standings_connect(const char *conninfo, const char *app, char *err, size_t errlen);

/* Progress of a backfill, after each batch. */
struct standings_progress {
	long long agents_done, agents_left, tasks_done;
	double secs;
};

/* Backfills the standings of every agent that is not ready, `batch` agents per
 * transaction (>= 1), calling progress (may be NULL) after each batch. Resumable:
 * each batch commits on its own, and a rerun continues with what is left; several
 * processes may run it at once (they skip each other's agents). Returns the number
 * of agents done (>= 0), or -1 with a message in err. */
long long standings_backfill(PGconn *pg, int batch,
                             void (*progress)(const struct standings_progress *p, void *data),
                             void *data, char *err, size_t errlen);

/* Agents waiting for the backfill (*n), or -1 with a message in err (e.g. the
 * standings migration has not been applied). */
int standings_pending(PGconn *pg, long long *n, char *err, size_t errlen);

#endif
