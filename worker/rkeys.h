/*
 * rkeys: every Redis key name arbiter uses, made in this one place.
 *
 * With ARBITER_PREFIX=arbiter (the default) and the default key style
 * ("auto"), the keys on a single Redis or behind Sentinel are the plain names
 * API servers XADD to (worker/README.md "Jobs"):
 *
 *   arbiter:jobs              the job stream (API servers XADD here)
 *   arbiter:dead              the dead-letter stream
 *   arbiter:delayed           jobs deferred by the rate limit (sorted set)
 *   arbiter:reconcile:lock    the reconciler's lock
 *   arbiter:rl:<ipkey>        one rate-limit state hash per IP key
 *   arbiter:jobs:judge        the judge lane: judged jobs waiting for a judge
 *                             slot (worker/judgelane.h)
 *   arbiter:judge:...         the LLM judge's shared state (worker/judge.h:
 *                             verdicts paid for, spend, limits, breakers)
 *
 * and the consumer group (a name inside the stream, not a key) is
 * `arbiter-workers`. In Redis Cluster the multi-key Lua scripts (rate limit,
 * delayed-set promotion) and MULTI/EXEC blocks need every key in one slot, so
 * there "auto" means "tagged": every name carries one hash tag,
 * {arbiter}:jobs, {arbiter}:dead, ... (API servers of a Cluster deployment
 * XADD to {arbiter}:jobs). ARBITER_REDIS_KEYS=tagged asks for the tagged
 * names everywhere, =plain (or its older spelling =legacy) for the plain ones.
 * A prefix that already holds a hash tag ("team1{q}") is used as it is in
 * every style. README.md ("Redis keys") says how to move a deployment from
 * one style to the other.
 */
#ifndef ARBITER_RKEYS_H
#define ARBITER_RKEYS_H

#include <stdbool.h>
#include <stddef.h>

struct rkeys {
	char *base;                 /* "{arbiter}" (tagged) or "arbiter" (plain) */
	char *jobs, *dead, *delayed, *reconcile_lock;
	char *group;                /* consumer group name: "<prefix>-workers" */
	bool legacy;                /* plain names (no hash tag added) */
};

/* The key style a setting value means: "plain" or "tagged" for the known
 * values (NULL, "" and "auto" give "tagged" when cluster is true, "plain"
 * otherwise; "legacy" is "plain"); any other value is returned unchanged
 * (rkeys_init refuses it). */
const char *rkeys_style(const char *style, bool cluster);

/* rkeys_style with cluster true when redis_url parses as a Cluster URL
 * (rq_url_parse). */
const char *rkeys_style_for_url(const char *style, const char *redis_url);

/* Fills k from prefix (non-empty; NULL = "arbiter") and style (see
 * rkeys_style; resolve "auto" with the Redis URL first, since rkeys_init
 * cannot know whether the server is a Cluster, and treats it as "plain"). Returns 0, or -1 with a reason in err
 * (unknown style, empty prefix, a prefix with an unbalanced '{'). Free with
 * rkeys_free. */
int rkeys_init(struct rkeys *k, const char *prefix, const char *style, char *err, size_t errlen);

/* Frees k's strings; safe on a zeroed struct and twice. */
void rkeys_free(struct rkeys *k);

/* The job stream of the other key style ("{arbiter}:jobs" when k is plain,
 * "arbiter:jobs" when tagged), malloc'd: where a producer configured for the other
 * style would XADD, so that entries there can be reported (no worker reads them).
 * NULL when both styles name the same stream (a prefix with its own hash tag). */
char *rkeys_other_jobs(const struct rkeys *k, const char *prefix);

/* The replicas' heartbeats, "<base>:workers": a hash, consumer name -> the Redis clock (ms)
 * when that worker last said it was alive (every few seconds), then a space and its
 * version (ARBITER_VERSION; absent in heartbeats of releases before it); "<base>:workers:since" holds
 * when the first heartbeat was written. `arbiter status --prune` removes a consumer only on
 * this evidence (README "arbiter status"). malloc'd. */
char *rkeys_heartbeats(const struct rkeys *k);

/* The replicas' throughput history, "<base>:stats": a stream each worker appends its
 * completed, failed and rejected jobs and end-to-end latency histogram to every
 * OPSCTL_STATS_MS (opsctl_stats), trimmed to the last OPSCTL_STATS_KEEP_MS by Redis's
 * clock; the console draws its charts from it. malloc'd. */
char *rkeys_stats(const struct rkeys *k);

/* The rate-limit hash of one IP key, "<base>:rl:<ipkey>", malloc'd. */
char *rkeys_rl(const struct rkeys *k, const char *ipkey);

/* The LLM judge's key prefix, "<base>:judge" (worker/judge.h adds ":paid:<key>",
 * ":spend:<period>", ...), malloc'd. */
char *rkeys_judge(const struct rkeys *k);

/* The judge lane, "<jobs>:judge" ("{arbiter}:jobs:judge" tagged: the slot of the jobs
 * stream, so the lane scripts' two keys share it), malloc'd. */
char *rkeys_judge_lane(const struct rkeys *k);

#endif
