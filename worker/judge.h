/*
 * judge: gets the LLM judge's verdict for one submission (worker/README.md "LLM
 * judge"). It assembles what the judge reads (common/rubric.h), keys the
 * verdict by the SHA-256 of everything that determines it, and
 *  - reuses the verdict stored in judge_verdicts (sql/003_judge.sql) unless
 *    asked to re-judge: a stored submission always gets the same verdict and
 *    a re-evaluation costs nothing;
 *  - otherwise asks the provider (judge_http.h, on the loop): timeouts,
 *    bounded retries with jittered backoff (429 honours Retry-After), one
 *    repair attempt when the answer is not a valid verdict, a per-verdict
 *    cost bound, and a circuit breaker per provider URL that fails fast
 *    (JUDGE_UNAVAILABLE) after repeated provider failures, letting one probe
 *    through every cool-down until the provider answers again; with Redis
 *    (judge_opts.rq) the circuits, an in-flight limit and a tokens-per-minute
 *    limit are shared by every replica (judge_limits.h);
 *  - keeps a verdict it paid for in Redis ("<prefix>:judge:paid:<key>", one
 *    hour) until the job's commit writes it to judge_verdicts in the same
 *    transaction as the result (judge_row): a job that loses its lease or
 *    crashes after paying finds it there and reuses it, and two workers that
 *    paid for the same key at once both use the one kept first (SET NX).
 *    After the commit (judge_committed) the entry lives JUDGE_GRACE_MS more.
 * Providers are operator configuration (jprov.h, ARBITER_JUDGE_PROVIDERS): a
 * spec names one and a model from its list. The API key is read from the
 * environment variable the operator named for that provider, sent only in
 * the provider's key header, never logged or stored.
 */
#ifndef ARBITER_JUDGE_H
#define ARBITER_JUDGE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "rubric.h"

struct jprovs;
struct pgc_pool;
struct rq;
struct judge;

/* How long a verdict paid for stays in Redis: before its commit, and after. */
#define JUDGE_PENDING_MS 3600000
#define JUDGE_GRACE_MS 30000

enum judge_rc {
	JUDGE_OK = 0,
	JUDGE_INVALID = -1,      /* the provider's answers were no valid verdict (after the repair) */
	JUDGE_UNAVAILABLE = -2,  /* provider trouble (5xx, 429, timeouts, breaker open), or the
	                          * cache is unreachable: not the submission's fault, retry later */
	JUDGE_CONFIG = -3,       /* the spec cannot be judged here: its provider or model is not
	                          * configured, API key variable unset, the cost bound, a 4xx other
	                          * than 408/429 (bad model, bad key) */
};

struct judge_result {
	struct rubric_verdict v;      /* JUDGE_OK: per criterion (rubric order) */
	char key[65];                 /* verdict key (hex SHA-256) */
	bool cached;                  /* reused from judge_verdicts: no provider call */
	bool pending;                 /* not in judge_verdicts yet: the commit writes judge_row */
	bool replace;                 /* a re-judged verdict: the commit replaces the stored one */
	const char *verdict_text;     /* pending: the verdict as stored (rubric_verdict_dumps) */
	int paid_calls;               /* pending: provider requests the verdict cost when paid */
	int calls;                    /* provider requests made for this verdict */
	int64_t tokens_in, tokens_out; /* what the verdict cost when it was paid for */
	double cost_usd;
	const char *raw;              /* JUDGE_INVALID: the provider's last answer text, else NULL */
};
/* Runs exactly once per judge_run that returned 0, never synchronously inside it; res and err
 * are valid during the call only. */
typedef void judge_cb(int rc, const struct judge_result *res, const char *err, void *data);

struct judge_opts {
	struct pgc_pool *pg;          /* verdict cache; NULL = none (offline `arbiter score`) */
	struct rq *rq;                /* verdicts paid for and not committed yet; NULL = none */
	const char *kbase;            /* with rq: "<base>:judge" (rkeys_judge), copied */
	int max_inflight;             /* provider requests at once (default 512) */
	int breaker_failures;         /* consecutive failed verdicts that open it (default 5) */
	int breaker_cooldown_ms;      /* before a probe (default 30000) */
	int backoff_base_ms;          /* first retry delay (default 500, doubling, jittered) */
	const char *ca_file;          /* PEM CA bundle for providers' TLS; NULL/"" = the system's */
	int shared_inflight;          /* with rq: requests in flight across replicas, 0 = no limit */
	int64_t tpm;                  /* with rq: tokens per minute across replicas, 0 = no limit */
	const struct jprovs *providers; /* the operator's providers (borrowed for the judge's
	                                 * lifetime); NULL = none: every fresh verdict fails */
};

/* Creates a client on loop. o may be NULL (defaults). Returns 0 or -1. */
int judge_new(uv_loop_t *loop, const struct judge_opts *o, struct judge **out);
/* Asks for the verdict of r (borrowed until cb) on answer and tests (the test-suite "tests"
 * array or NULL; both borrowed for this call only). job_id (may be NULL) names the job asking:
 * a re-judging job reuses only a verdict in Redis that it paid for itself. rejudge: skip the
 * cache lookup and replace the stored verdict. Returns 0 (cb will run) or -1 (closing). */
int judge_run(struct judge *jg, const struct rubric *r, const json_t *answer,
              const json_t *tests, const char *job_id, bool rejudge, judge_cb *cb, void *data);

/* The judge_verdicts row of a pending result, as one JSON object for the commit's
 * jsonb_to_recordset (key, provider, model, pv, verdict, ti, tout, cost, calls, replace);
 * malloc'd, NULL when res is not pending. */
char *judge_row(const struct rubric *r, const struct judge_result *res);

/* The verdict key was committed to judge_verdicts: its Redis entry expires in JUDGE_GRACE_MS
 * (fire and forget). NULL jg ok. */
void judge_committed(struct judge *jg, const char *key);
/* Verdicts in progress. */
int judge_inflight(const struct judge *jg);
/* Aborts what is in flight (callbacks run with JUDGE_UNAVAILABLE "shutting down", possibly
 * within this call) and frees the client once its handles closed. NULL ok. */
void judge_close(struct judge *jg);

/* The verdict key of r on answer and tests (hex SHA-256 of rubric_cache_material). */
void judge_key(const struct rubric *r, const json_t *answer, const json_t *tests, char out[65]);

/* The providers of setting (ARBITER_JUDGE_PROVIDERS): "" = none, text starting with '{' =
 * the JSON itself, anything else = the path of a file holding it (at most 1 MiB; read with
 * blocking I/O: call at start-up, not on the loop). Returns 0 (*out new, jprov_free) or -1
 * with the reason in err. */
int judge_providers_load(const char *setting, struct jprovs **out, char *err, size_t errlen);

/* Parses a spend budget "USD/hour" or "USD/day" (USD a decimal > 0). "" = none: *usd 0.
 * Returns 0, or -1 for anything else. */
int judge_budget_parse(const char *s, double *usd, int *period_s);

/* Counters since start (for /metrics): verdicts by source, tokens, cost, breaker. */
struct judge_stats {
	uint64_t cached, fresh, invalid, unavailable, config, requests, retries, repairs;
	uint64_t tokens_in, tokens_out;
	double cost_usd;
	int breakers_open;
};
void judge_stats(const struct judge *jg, struct judge_stats *out);

#endif
