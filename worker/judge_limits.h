/*
 * judge_limits: the LLM judge's limits and circuit breakers shared by every
 * replica through Redis (worker/README.md "LLM judge", "Shared limits"). Two Lua scripts
 * run atomically on Redis's own clock (TIME):
 *  - admit, before each provider request: refuses while the provider's circuit
 *    is open (one replica at a time gets the probe once the cool-down is
 *    over), while this minute's tokens reached ARBITER_JUDGE_TPM, or while
 *    ARBITER_JUDGE_SHARED_INFLIGHT requests are in flight; otherwise it takes
 *    an in-flight slot, a sorted-set member that expires after its lease (a
 *    replica that dies frees its slots when the leases run out);
 *  - done, after it: frees the slot, adds the tokens used to this minute's
 *    count, and keeps the circuit's state: an answer closes it, a verdict that
 *    failed on provider trouble counts towards opening it (a failed probe
 *    re-opens it at once).
 * Keys (all under rkeys_judge, so one hash slot in Cluster):
 *   <base>:judge:inflight        sorted set, member = run id, score = lease end (ms)
 *   <base>:judge:tpm:<minute>    string, tokens used in that minute (expires)
 *   <base>:judge:breaker:<hash>  hash {fails, until, probe, probe_until} per base URL
 * The scripts are sent by EVALSHA (SHA-1 computed here) and by EVAL on NOSCRIPT.
 */
#ifndef ARBITER_JUDGE_LIMITS_H
#define ARBITER_JUDGE_LIMITS_H

#include <stdbool.h>
#include <stdint.h>

struct rq;
struct jlim;

struct jlim_opts {
	struct rq *rq;               /* borrowed; must outlive jlim_free's pending replies */
	const char *kbase;           /* "<base>:judge" (copied) */
	int max_inflight;            /* requests in flight across replicas, 0 = no limit */
	int64_t tpm;                 /* tokens per minute across replicas, 0 = no limit */
	int breaker_failures;        /* consecutive failed verdicts that open a circuit */
	int breaker_cooldown_ms;     /* open this long before a probe */
};

enum jlim_admit {
	JLIM_GO = 0,                 /* send the request */
	JLIM_PROBE = 1,              /* send it: it is the circuit's probe */
	JLIM_OPEN = 2,               /* circuit open: wait_ms until a probe may go */
	JLIM_TPM = 3,                /* tokens-per-minute limit reached: wait_ms to the next minute */
	JLIM_FULL = 4,               /* shared in-flight limit reached: try again soon */
	JLIM_ERROR = -1,             /* Redis did not answer: err says why */
};

enum jlim_outcome {
	JLIM_RELEASE = 0,            /* the request ended without a verdict on the provider (a retry) */
	JLIM_ANSWERED = 1,           /* the provider answered (any status but 408/429/5xx) */
	JLIM_FAILED = 2,             /* the verdict failed on provider trouble */
};

/* An admit decision: fails is the circuit's failure count (JLIM_OPEN). */
typedef void jlim_admit_cb(int decision, int64_t wait_ms, int fails, const char *err, void *data);

/* Creates the limiter. Returns 0, or -1 (no rq or kbase). */
int jlim_new(const struct jlim_opts *o, struct jlim **out);

/* Asks to send one request of run_id (unique per verdict in progress; at most one request of
 * a run in flight) to the provider at url, holding a slot for lease_ms at most. cb runs
 * exactly once, never inside this call. Returns 0, or -1 (cb will not run). */
int jlim_admit(struct jlim *l, const char *url, const char *run_id, int lease_ms,
               jlim_admit_cb *cb, void *data);

/* The request of run_id admitted before is over: frees its slot, adds tokens (>= 0) to this
 * minute, records outcome for url's circuit (probe: the request was the probe). Logs when
 * the circuit opens or closes. Fire and forget. */
void jlim_done(struct jlim *l, const char *url, const char *run_id, int64_t tokens,
               enum jlim_outcome outcome, bool probe);

/* Circuits this process saw open and not closed since (for the metrics). */
int jlim_open_circuits(const struct jlim *l);

/* Frees l once its pending Redis replies arrived (or at once). NULL ok. */
void jlim_free(struct jlim *l);

#endif
