/*
 * notify: the completion notifications an API server can LISTEN to instead of
 * polling (README "Reading results"). The commit transaction that finishes a
 * submission (completed, rejected or failed) or appends a re-evaluation runs
 * NOTIFY_SQL with the batch's events, so PostgreSQL delivers them when, and
 * only if, the transaction commits.
 *
 * Each event is a JSON object: {"submission_id", "status", and for completed
 * "eval_seq", "score", "result"; for rejected "reject_reason"}.
 */
#ifndef ARBITER_NOTIFY_H
#define ARBITER_NOTIFY_H

#include <jansson.h>

#define NOTIFY_CHANNEL "arbiter_results"

/* One statement, one parameter ($1: a JSON array of events): one notification per event. */
#define NOTIFY_SQL "SELECT pg_notify('" NOTIFY_CHANNEL "', e::text) FROM jsonb_array_elements($1::jsonb) AS e"

/* Appends one event to the array events. status is "completed", "rejected" or "failed";
 * eval_seq/score/result are used for completed only, reject_reason for rejected only
 * (NULL ok). */
void notify_add(json_t *events, const char *submission_id, const char *status, int eval_seq,
                int score, const char *result, const char *reject_reason);

/* The $1 text for NOTIFY_SQL (caller frees), or NULL when events is empty. */
char *notify_param(const json_t *events);

#endif
