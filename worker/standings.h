/*
 * standings: the operator side of the rolling-window standings of
 * sql/002_standings.sql (see sql/README.md): connecting, the batched and
 * resumable backfill, the count of agents still waiting for it.
 * Blocking libpq: for commands, never the event loop.
 */
#ifndef ARBITER_STANDINGS_H
#define ARBITER_STANDINGS_H

#include <stddef.h>
#include <stdio.h>

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

/* Where the standings projection stands (sql/008_standings_projection.sql). */
struct standings_asof {
	char as_of[64];            /* every result committed before it is applied (server time text) */
	double lag_secs;           /* now - as_of */
	long long pending;         /* committed results not applied yet */
	long long applied;         /* results applied since the projection began */
	long long last_result_id;  /* highest result id applied, -1 none */
};

/* Reads the projection's progress (standings_status()) into *out. Returns 0, or -1
 * with a message in err (e.g. migration 008 has not been applied). */
int standings_as_of(PGconn *pg, struct standings_asof *out, char *err, size_t errlen);

/* Prints "standings as of <as_of> (lag N.N s; M results not applied yet)" to f, one
 * line, for the commands that show standings. */
void standings_print_as_of(FILE *f, const struct standings_asof *a);

/* Catch-up of the projection: applies committed results, `batch` per transaction
 * (standings_apply()), until none is left, waiting while a worker holds the lease
 * (at most a minute without progress). progress (may be NULL) gets the results
 * applied so far after each batch. Returns the results applied (>= 0), or -1 with
 * a message in err. */
long long standings_catch_up(PGconn *pg, int batch, void (*progress)(long long applied, void *data),
                             void *data, char *err, size_t errlen);

/* The leaderboard queries `arbiter leaderboard` and the console share. by is "window"
 * (window score), "elo" or "best" (best score on a challenge; needs challenge_id);
 * challenge_id (a UUID's text, or NULL for every challenge) restricts to one challenge;
 * limit rows (1..1000000) of the top, ranked (equal values share a rank). The top rows
 * are picked through standings_agents_window_idx / agents' Elo order / the
 * leaderboard_challenge view before any join (sql/README.md). Returns the result (the
 * caller PQclear()s it; check PQresultStatus for PGRES_TUPLES_OK, NULL only when out of
 * memory). */
PGresult *standings_leaderboard(PGconn *pg, const char *by, const char *challenge_id,
                                long long limit);

/* The id of the challenge with this slug into id[0..n). Returns 1 found, 0 no such
 * challenge, -1 with a message in err. */
int standings_challenge_id(PGconn *pg, const char *slug, char *id, size_t n, char *err,
                           size_t errlen);

/* Every agent's window sum, best first (agent_id, name, w_sum), the input of the capped
 * weights (common/weights.h) for `arbiter weights` and the console. Returns the result
 * as standings_leaderboard does. */
PGresult *standings_window_scores(PGconn *pg);

#endif
