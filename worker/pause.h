/*
 * pause: the operator's pause switches, kept in Redis so every replica sees
 * them (`arbiter pause` / `arbiter resume`, deploy/README.md "Pause and resume").
 *
 *   {prefix}:paused              string, the Unix ms when paused: no replica
 *                                reads new jobs (in-flight work finishes)
 *   {prefix}:paused:challenges   set of challenge slugs whose jobs are held
 *                                back (re-scheduled through the delayed set)
 *
 * Workers poll both keys every PAUSE_POLL_MS, so a change is honoured within
 * a second. struct pause_state is the worker's copy.
 */
#ifndef ARBITER_PAUSE_H
#define ARBITER_PAUSE_H

#include <stdbool.h>
#include <stddef.h>

#include <uv.h>

#define PAUSE_KEY_SUFFIX ":paused"
#define PAUSE_CHALLENGES_KEY_SUFFIX ":paused:challenges"
#define PAUSE_POLL_MS 500
/* A job of a paused challenge goes back to the delayed set for this long. */
#define PAUSE_HOLD_MS 5000

struct pause_state {
	bool all;            /* {prefix}:paused exists */
	char **slugs;        /* paused challenges, owned */
	size_t nslugs;
};

/* Replaces the slugs of st with a copy of the n strings in slugs. */
void pause_state_set_slugs(struct pause_state *st, const char *const *slugs, size_t n);

/* Whether a job of challenge slug is held back (slug may be NULL: not known yet). */
bool pause_state_holds(const struct pause_state *st, const char *slug);

/* Frees the slugs (not st). */
void pause_state_clear(struct pause_state *st);

struct rq;
struct pause_poller;

/* Polls the two keys on rq every PAUSE_POLL_MS (GET and SMEMBERS, pipelined) and keeps
 * a pause_state. changed(data) runs (on the loop, never synchronously here) after a poll
 * that changed the state. A failed poll keeps the last known state. prefix is copied;
 * rq is borrowed and must outlive the poller (stop it first). Returns the poller. */
struct pause_poller *pause_poller_new(uv_loop_t *loop, struct rq *rq, const char *prefix,
                                      void (*changed)(void *data), void *data);

/* The current state (valid until the next poll). */
const struct pause_state *pause_poller_state(const struct pause_poller *p);

/* Stops polling; p is freed once its timer closed and its last command answered (the loop
 * must run). NULL ok. */
void pause_poller_free(struct pause_poller *p);

#endif
