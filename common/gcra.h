/*
 * gcra: the rate-limit arithmetic of worker/README.md "Rate limiting", pure (no clock, no I/O).
 *
 * Rate strings (ARBITER_RATE_LIMIT): "N/P<unit>" = N evaluations per P units,
 * unit ms, s, m, h or d (P may be omitted: "10/m" = "10/1m"), or "0" to
 * disable the limiter. Examples: 10/60s, 100/1m, 5/2s, 10/1h.
 *
 * GCRA (generic cell rate algorithm, "virtual scheduling" form), all times in
 * integer microseconds:
 *   T   = emission interval = ceil(period / N)
 *   tau = burst tolerance   = (burst - 1) * T
 *   state per key: TAT (theoretical arrival time; absent = now) and D, the due
 *   time of the last job deferred for the key (absent = 0).
 *   At time now, with tat = max(TAT, now):
 *     conforming  <=>  tat - now <= tau
 *     allowed     <=>  conforming and (the job is coming back from the delayed
 *                      set, or D <= now: nobody is waiting in line for the key)
 *     allowed  -> TAT = tat + T
 *     otherwise the job is due again at retry = max(tat - tau, D + T) under
 *     `defer` (and D = retry), or rejected under `reject` (retry = tat - tau),
 *     retry at most now + GCRA_MAX_DEFER_US in both.
 * So 10/60s with burst 10: T = 6 s, tau = 54 s: 10 jobs pass at once, then
 * one every 6 s. In any window of length W at most burst + floor(W / T) jobs
 * are allowed.
 *
 * worker/ratelimit.c runs the same steps in Lua (rl_lua_check); this file is
 * the reference the unit tests check, and gcra_decide mirrors the script line
 * for line.
 */
#ifndef ARBITER_GCRA_H
#define ARBITER_GCRA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A parsed ARBITER_RATE_LIMIT: count evaluations per period_us. count 0 means
 * the limiter is disabled (period_us is 0 then). */
struct gcra_rate {
	int64_t count;
	int64_t period_us;
};

#define GCRA_MAX_COUNT     1000000000LL           /* N ≤ 10^9 */
#define GCRA_MAX_PERIOD_US (366LL * 86400 * 1000000)   /* P ≤ 366 days */
#define GCRA_MAX_BURST     1000000
#define GCRA_MAX_TOLERANCE_US (400LL * 86400 * 1000000) /* (burst-1)*T ≤ 400 days */
/* A due time is at most this far after now (the script's RL_MAX_DEFER_MS): a job that
 * conforms later comes back after a day and is decided again. */
#define GCRA_MAX_DEFER_US  (86400LL * 1000000)

/* Parses s (surrounding blanks allowed). Returns 0 and *out, or -1 with a
 * message in err saying what is accepted and what was given. */
int gcra_rate_parse(const char *s, struct gcra_rate *out, char *err, size_t errlen);

/* The two GCRA constants. */
struct gcra_params {
	int64_t emission_us;    /* T */
	int64_t tolerance_us;   /* tau = (burst - 1) * T */
};

/* Computes T and tau from an enabled rate and a burst (1..GCRA_MAX_BURST).
 * Returns 0, or -1 with a message in err (burst out of range, T < 1 µs,
 * tau too large). */
int gcra_params_make(const struct gcra_rate *r, long burst, struct gcra_params *out,
                     char *err, size_t errlen);

/* Per-key state. A missing Redis key is {0, 0}. */
struct gcra_state {
	int64_t tat_us;           /* theoretical arrival time; 0 = none */
	int64_t last_deferred_us; /* due time of the last job deferred for the key; 0 = none */
};

enum gcra_policy { GCRA_POLICY_DEFER, GCRA_POLICY_REJECT };
enum gcra_verdict { GCRA_ALLOW, GCRA_DEFER, GCRA_REJECT };

/* Resets implausible state before a decision at now_us, as the script does: a
 * TAT later than now_us + tau + T (no decision writes one: burst x T) and a last
 * due time later than now_us + max_defer_us become 0 (absent). Returns a bit set
 * of what was reset: 1 the TAT, 2 the last due time (0 when nothing was). */
int gcra_state_sanitize(const struct gcra_params *p, struct gcra_state *st, int64_t now_us,
                        int64_t max_defer_us);

/* One decision at now_us (the Redis clock in the script). promoted: the job
 * comes back from the delayed set (it may take a slot although others are
 * waiting). Updates *st as the script updates the key. *retry_at_us (may be
 * NULL) gets the time the job is due again for DEFER / REJECT, 0 for ALLOW. */
enum gcra_verdict gcra_decide(const struct gcra_params *p, struct gcra_state *st,
                              int64_t now_us, enum gcra_policy pol, bool promoted,
                              int64_t *retry_at_us);

/* The PX (ms, ≥ 1) to set on the key after a decision at now_us that changed
 * st: the time after which the state carries no information. */
int64_t gcra_ttl_ms(const struct gcra_state *st, int64_t now_us);

/* Microseconds → the whole milliseconds at or after it (scores in the delayed
 * set are due times in ms: a member is promoted when score ≤ now_ms, so the
 * job never comes back before it conforms). */
int64_t gcra_us_to_ms_ceil(int64_t us);

#endif
