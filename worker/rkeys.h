/*
 * rkeys: every Redis key name arbiter uses, made in this one place.
 *
 * All keys share one hash tag, so that in Redis Cluster they live in one
 * slot and the multi-key Lua scripts (rate limit, delayed-set promotion) and
 * MULTI/EXEC blocks are allowed. With ARBITER_PREFIX=arbiter (the default)
 * the keys are:
 *
 *   {arbiter}:jobs              the job stream (API servers XADD here)
 *   {arbiter}:dead              the dead-letter stream
 *   {arbiter}:delayed           jobs deferred by the rate limit (sorted set)
 *   {arbiter}:reconcile:lock    the reconciler's lock
 *   {arbiter}:rl:<ipkey>        one rate-limit state hash per IP key
 *
 * and the consumer group (a name inside the stream, not a key) is
 * `arbiter-workers`. A prefix that already holds a hash tag ("team1{q}") is
 * used as it is. ARBITER_REDIS_KEYS=legacy gives the names of releases
 * before the hash tag (arbiter:jobs, ...), which work on a single Redis or
 * Sentinel but not in Cluster mode; README.md ("Redis keys") says how to
 * move a deployment from the old names to the new ones.
 */
#ifndef ARBITER_RKEYS_H
#define ARBITER_RKEYS_H

#include <stdbool.h>
#include <stddef.h>

struct rkeys {
	char *base;                 /* "{arbiter}" (tagged) or "arbiter" (legacy) */
	char *jobs, *dead, *delayed, *reconcile_lock;
	char *group;                /* consumer group name: "<prefix>-workers" */
	bool legacy;
};

/* Fills k from prefix (non-empty; NULL = "arbiter") and style ("tagged",
 * "legacy"; NULL or "" = "tagged"). Returns 0, or -1 with a reason in err
 * (unknown style, empty prefix, a prefix with an unbalanced '{'). Free with
 * rkeys_free. */
int rkeys_init(struct rkeys *k, const char *prefix, const char *style, char *err, size_t errlen);

/* Frees k's strings; safe on a zeroed struct and twice. */
void rkeys_free(struct rkeys *k);

/* The rate-limit hash of one IP key, "<base>:rl:<ipkey>", malloc'd. */
char *rkeys_rl(const struct rkeys *k, const char *ipkey);

#endif
