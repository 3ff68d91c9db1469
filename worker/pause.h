/*
 * pause: the operator's pause switches, kept in Redis so every replica sees
 * them (`arbiter pause` / `arbiter resume`, README "Pause and resume").
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

#endif
