/*
 * opsctl: the worker's operator controls, kept out of the job pipeline
 * (worker.c calls these at a few points):
 *
 * - whether the worker may take jobs now (read or claim): not while the
 *   database schema is older than this binary, not while paused
 *   (`arbiter pause`); the cause is logged when it starts and every 30 s;
 * - challenge pauses (`arbiter pause --challenge SLUG`): the slugs are
 *   resolved to challenge ids, and a job of such a challenge is held: moved
 *   atomically (Lua: XACK + XDEL + ZADD) to the delayed set for
 *   PAUSE_HOLD_MS, from which the usual promotion brings it back; the same script
 *   parks a failed job until its next attempt (opsctl_park) and a container job
 *   whose image the store lacks until it looks again (opsctl_image_wait);
 * - the cap of the dead-letter stream: XTRIM {prefix}:dead MAXLEN
 *   ARBITER_DEAD_LETTER_MAX every minute;
 * - leaving the consumer group on a clean exit: our consumer is deleted
 *   (XGROUP DELCONSUMER) only if it holds no pending entry, checked in the
 *   same Lua script, so nothing pending is ever dropped.
 */
#ifndef ARBITER_OPSCTL_H
#define ARBITER_OPSCTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct worker;
struct job;
struct opsctl;

/* Starts polling the pause switches on w->rq_cmd. Call once the clients exist. */
struct opsctl *opsctl_new(struct worker *w);

/* Stops everything; the memory goes once the poller's last callback ran (the loop must
 * run). Call before closing w->rq_cmd. NULL ok. */
void opsctl_free(struct opsctl *o);

/* True when the worker may take new jobs; otherwise false and why (for the log and
 * /readyz). Logs the cause when it appears and every 30 s while it lasts. */
bool opsctl_may_take(struct opsctl *o, char *why, size_t n);

/* True when Redis is not usable for a reason worth reporting, with the reason in why
 * (n 0: none wanted): one of the worker's clients is not connected (with why its last
 * attempt failed: refused, WRONGPASS, NOAUTH, a bad DB index, TLS, ...) or the ACL refused
 * one of its commands (NOPERM) recently and that command has not succeeded since. A cause
 * with a reason is logged when it appears and every 30 s while it lasts; its end is
 * logged too. Call it at least every few seconds for the log (the gauges timer does). */
bool opsctl_redis_cause(struct opsctl *o, char *why, size_t n);

/* True when j's challenge is paused (j must be loaded). */
bool opsctl_holds(const struct opsctl *o, const struct job *j);

/* Moves j's entry to the delayed set for PAUSE_HOLD_MS, then done(w, j, ok): ok true when
 * the entry left the stream or was no longer ours (drop the job), false when it could not
 * be held (retry it later: safe). done runs exactly once; synchronously only when the
 * command cannot be queued (the Redis client is closing). */
void opsctl_hold(struct opsctl *o, struct job *j,
                 void (*done)(struct worker *w, struct job *j, bool ok));

/* A counted retry through the delayed set: moves j's entry there (same script as a hold)
 * due in delay_ms by Redis's clock, with the field attempt = j->attempts, so the count goes
 * on when the promotion brings it back as a new entry, and neither a restart nor a crash
 * loses it. done as for opsctl_hold. */
void opsctl_park(struct opsctl *o, struct job *j, uint32_t delay_ms,
                 void (*done)(struct worker *w, struct job *j, bool ok));

/* A container job whose image the store lacks, through the delayed set: moves j's entry
 * there (same script as a hold) due in delay_ms, counted as cause "image", with the fields
 * attempt = j->attempts (no attempt is spent) and image_wait_since = j->image_since_ms (> 0),
 * so the wait's deadline holds across promotions, replicas and restarts. done as for
 * opsctl_hold. */
void opsctl_image_wait(struct opsctl *o, struct job *j, uint32_t delay_ms,
                       void (*done)(struct worker *w, struct job *j, bool ok));

/* How often a worker writes its heartbeat (opsctl_heartbeat from the gauges timer), and
 * how old a heartbeat must be before `arbiter status --prune` believes its worker dead
 * (whatever --prune-idle says: a live worker is never removed for a short threshold). */
#define OPSCTL_HEARTBEAT_MS 2000
#define OPSCTL_HEARTBEAT_STALE_MS 10000

/* Writes this worker's heartbeat (rkeys_heartbeats: HSET <consumer> "<Redis time in ms>
 * <version>", and
 * the ":since" key if it is missing), fire and forget; a failure is left to the next call.
 * Call every OPSCTL_HEARTBEAT_MS or so. */
void opsctl_heartbeat(struct opsctl *o);

/* How often a worker appends to the stats stream (opsctl_stats), and how much history the
 * stream keeps (by Redis's clock; XADD MINID trims older entries). */
#define OPSCTL_STATS_MS 10000
#define OPSCTL_STATS_KEEP_MS 3660000

/* Appends what this worker did since its last call to the stats stream (rkeys_stats):
 * fields w (consumer), c, f, r (jobs completed, failed, rejected) and h (the end-to-end
 * latency histogram's bucket counts, comma-separated, metrics_e2e_bounds), trimming
 * entries older than OPSCTL_STATS_KEEP_MS in the same call. Nothing is written when
 * nothing happened. Fire and forget: a failed write is lost (those counts only). Call
 * every OPSCTL_STATS_MS or so. */
void opsctl_stats(struct opsctl *o);

/* Deletes our consumer from the group if it holds no pending entry, then done(w) (also
 * when Redis is unreachable: the consumer then stays, for `arbiter status --prune`).
 * done runs exactly once; synchronously when Redis is not connected. */
void opsctl_leave_group(struct opsctl *o, void (*done)(struct worker *w));

#endif
