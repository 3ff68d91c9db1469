/*
 * ratelimit: the per-source-IP rate limit of worker/README.md "Rate limiting", shared by every
 * replica through Redis.
 *
 * One Lua script (GCRA, see common/gcra.h for the exact arithmetic) runs
 * atomically in Redis with EVALSHA and reads Redis's own clock (TIME), so the
 * replicas' clocks never matter. State lives in the hash `{prefix}:rl:<ipkey>`
 * (common/ipkey.h: the IPv4 address, the IPv6 /64, or `invalid`), which expires
 * by itself once it carries no information.
 *
 * Policy `defer`: the same script that finds a job over the limit XACKs and
 * XDELs its stream entry and adds it to the sorted set `{prefix}:delayed`
 * (score = due time in Unix ms from Redis TIME, member = a JSON object of the
 * entry's fields plus a unique "_token"), so a crash can neither lose nor
 * duplicate it. rl_promote_due moves due members back to `{prefix}:jobs` with
 * XADD (adding or incrementing `deferred_count`) in a second atomic script.
 * Policy `reject`: the caller rejects the submission with `rate_limited`.
 *
 * Everything runs on the loop thread. No callback ever runs synchronously
 * inside rl_check.
 */
#ifndef ARBITER_RATELIMIT_H
#define ARBITER_RATELIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "config.h"

struct rq;
struct rl;

/* Parses ARBITER_RATE_* from cfg; -1 with a message saying what is accepted. */
/* Reads cfg->prefix, rate_limit, rate_burst, rate_policy and rate_allow (the
 * strings are copied; cfg may be freed afterwards). On success returns 0 and
 * *out (free with rl_free). On a bad value returns -1 and writes into err a
 * message naming the setting, what is accepted and what was given. */
int rl_new(const struct config *cfg, struct rl **out, char *err, size_t errlen);

/* Frees l. Call it only once every rl_check / rl_promote_due callback has run
 * (close the rq first: its pending commands then fail with "closed"). If l
 * owns a uv handle it is closed and l is freed in the close callback, i.e.
 * the loop must run once more (as for every libuv handle). NULL is ok. */
void rl_free(struct rl *l);

enum rl_decision { RL_ALLOW, RL_DEFERRED, RL_REJECT, RL_ERROR };

/* retry_at_ms: for RL_DEFERRED / RL_REJECT the Unix ms (Redis clock) at which
 * the key conforms again (0 when unknown); 0 for RL_ALLOW. err: NULL, or for
 * RL_ERROR why ("timeout", "disconnected", a Redis error text ...). After
 * RL_ERROR the script may or may not have run (a timeout); the caller should
 * leave the entry pending (it is redelivered) or evaluate it: both are safe. */
typedef void rl_cb(enum rl_decision d, int64_t retry_at_ms, const char *err, void *data);

/* Decides for one job. Under `defer`, an over-limit job is atomically moved (same Lua script) to
 * the delayed set `{prefix}:delayed` with its fields and XACK+XDEL'd from the stream: the caller
 * must then drop the job (RL_DEFERRED). RL_REJECT: caller rejects with rate_limited and ACKs.
 * reevaluate jobs and allow-listed IPs are RL_ALLOW without a Redis call (cb still async).
 * fields: the stream entry's field/value pairs (2*nf strings), re-added verbatim later. */
/* ip: the job's source_ip (or the submission row's), may be NULL or garbage
 * (keyed `invalid`). entry_id: the stream entry id, required under `defer`
 * (the entry must be pending for group `{prefix}-workers`; if it is no longer
 * pending, someone else already handled it and the decision is RL_DEFERRED,
 * i.e. drop it). fields/nf: nf field/value PAIRS (fields[2i], fields[2i+1]);
 * a `deferred_count` field > 0 marks a job coming back from the delayed set.
 * All strings are copied before rl_check returns. The loop used for the
 * no-Redis path is the one given to rl_set_loop (default: uv_default_loop()).
 * Returns 0 (cb will run exactly once, never synchronously) or -1 (bad
 * arguments or the command could not be queued; cb will not run). */
int rl_check(struct rl *l, struct rq *r, const char *ip, bool reevaluate, const char *entry_id,
             const char *const *fields, int nf, rl_cb *cb, void *data);

/* rl_check for an entry of another stream of the same group (the judge lane): a deferred
 * job is acknowledged and deleted there. stream NULL = the jobs stream. The delayed set
 * gives it back to the jobs stream, as any deferred job. */
int rl_check_stream(struct rl *l, struct rq *r, const char *stream, const char *ip,
                    bool reevaluate, const char *entry_id, const char *const *fields, int nf,
                    rl_cb *cb, void *data);

/* Moves due delayed jobs back to the stream (atomic, safe with many replicas); call on a timer. */
/* Moves at most RL_PROMOTE_BATCH members per script run and runs again at once
 * while full batches come back. At most one promotion is in flight per rl: a
 * call while one runs does nothing. Returns 0, or -1 if the command could not
 * be queued (e.g. rq closed). Errors are logged; retry on the next tick. */
int rl_promote_due(struct rl *l, struct rq *r);

/* Tuning and set-up for tests and tools. */

#define RL_PROMOTE_BATCH 100

/* Longest a job is deferred, in ms from the time it is deferred (one day). A
 * member of the delayed set due later than this from now is taken as due now
 * (a due time of +inf, a hand edit). A plain number: the scripts embed it. */
#define RL_MAX_DEFER_MS 86400000

/* The loop on which no-Redis decisions (disabled limiter, reevaluate,
 * allow-listed IPs) are delivered. Call before the first rl_check if the
 * worker does not run on uv_default_loop(). */
void rl_set_loop(struct rl *l, uv_loop_t *loop);

/* Everything rl_new reads, for tests and tools that have no struct config.
 * Strings may be NULL (defaults: prefix "arbiter", limit "10/60s", policy
 * "defer", allow none); burst 0 means the default 10. */
struct rl_opts {
	const char *prefix, *rate_limit, *rate_policy, *rate_allow;
	int rate_burst;
	const char *redis_keys;             /* "plain" (NULL) or "tagged": see rkeys.h */
};
int rl_new_opts(const struct rl_opts *o, struct rl **out, char *err, size_t errlen);

/* True when the limiter is disabled (ARBITER_RATE_LIMIT=0). */
bool rl_disabled(const struct rl *l);

/* The Redis key holding the limiter state for ip, `{prefix}:rl:<ipkey>`
 * (tests, `arbiter status`). Caller frees. */
char *rl_key_for(const struct rl *l, const char *ip);

/* Name of a decision: "allowed", "deferred", "rejected", "error". */
const char *rl_decision_name(enum rl_decision d);

/* The two Lua scripts (for tests and operators). */
extern const char rl_lua_check[];
extern const char rl_lua_promote[];
/* Counts the delayed set's members by cause: {rate_limit, pause, retry, image} (ratelimit.c). */
extern const char rl_lua_delayed_causes[];

#endif
