/*
 * The test-suite and custom-script evaluators (worker/README.md "Sandbox"), built on the
 * sandbox (worker/sandbox.h). A sandbox_pool owns the language table and
 * bounds how many sandboxes run at once (ARBITER_SANDBOX_SLOTS, default the
 * number of cores); further runs wait in a FIFO queue. Everything runs on one
 * uv loop and never blocks it.
 */
#ifndef ARBITER_EVALUATOR_H
#define ARBITER_EVALUATOR_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "config.h"

struct spec;        /* common/spec.h */
struct score_ext;   /* common/score.h */

struct sandbox_pool;  /* bounds concurrent sandboxes (ARBITER_SANDBOX_SLOTS) */

/* Runs the test-suite or custom-script evaluator for spec on the loop, without blocking it.
 * On success cb gets rc 0 and ext (valid during cb). rc -1 = internal_error (err says why):
 * the worker retries then fails; `arbiter score` exits 3.
 * answer, metadata, ground_truth and match (the "match" object of worker/README.md "Sandbox": started_at, submitted_at,
 * ...) are borrowed for the duration of this call only (copied as needed); any may be NULL
 * ({}). A custom script's "submission" is {"answer": answer, "metadata": metadata}, the same
 * shape as `arbiter score --submission`.
 * spec must stay alive until cb ran. cb runs exactly once and never synchronously inside
 * evaluator_run. Returns 0, or -1 without calling cb if the spec is not a test-suite,
 * custom-script or container spec (or its test_suite / script object is unusable).
 * A container spec's image is opened on the loop's thread pool (worker/image.h), never on
 * the loop; when the store lacks it, rc is EVALUATOR_IMAGE_MISSING (err begins with
 * "image_not_found: "), which the worker waits out (ARBITER_IMAGE_WAIT_MS) instead of
 * counting an attempt. */
#define EVALUATOR_IMAGE_MISSING (-2)
typedef void eval_cb(int rc, const struct score_ext *ext, const char *err, void *data);
int evaluator_run(struct sandbox_pool *sp, const struct spec *s, const json_t *answer,
                  const json_t *metadata, const json_t *ground_truth, const json_t *match,
                  eval_cb *cb, void *data);

/* A container run's limits (worker/README.md "Container evaluator"), or the maxima a spec
 * may ask for. */
struct container_limits {
	uint64_t wall_ms, cpu_ms, memory_mb, pids, output_mb;
};
/* The maxima of cfg (ARBITER_CONTAINER_MAX_WALL_MS, _CPU_MS, _MEMORY_MB, _PIDS, _OUTPUT_MB). */
void evaluator_container_maxima(const struct config *cfg, struct container_limits *max);
/* The limits of a run of a container spec whose "container" object is c (borrowed, NULL
 * ok): each the spec's value or the default, at most its maximum in max; the CPU time is the
 * wall time, at most max->cpu_ms. Each value the spec asks above its maximum appends a
 * warning object {severity, field, message naming the setting} to warnings (an array;
 * NULL: none). The run and `arbiter validate-spec` both use it. */
void evaluator_container_limits(const struct container_limits *max, const json_t *c,
                                struct container_limits *out, json_t *warnings);

/* The deepest nesting of an answer (or its metadata) a scoring script is given: an array or
 * object is one level, each level inside it one more. A deeper one is the submission's
 * doing: the script does not run and its dimensions score 0, with a warning. */
#define EVALUATOR_MAX_DEPTH 64
/* True when v (NULL ok) nests at most max levels (a scalar or [] is 1, [[1]] is 2).
 * Recursion is bounded by max. For the worker's intake as well as the evaluator. */
bool evaluator_depth_ok(const json_t *v, int max);

/* compare "numeric:TOL": whitespace-separated tokens, the same number on both sides; two
 * decimal tokens ([+-] digits [. digits] [e[+-]digits]; no hex, inf or nan) match when
 * their exact decimal difference is at most TOL (tol: its decimal text; NULL, negative or
 * not a number: 0), any other tokens byte for byte. */
bool evaluator_numeric_match(const char *got, size_t ng, const char *want, size_t nw,
                             const char *tol);

/* Creates a pool on loop: slots from cfg->sandbox_slots (0 = number of cores), the language
 * table from cfg->languages_file (NULL/"" or unreadable default path = the built-in copy of
 * deploy/languages.json). cfg may be NULL (all defaults; ARBITER_SANDBOX_SLOTS and
 * ARBITER_LANGUAGES_FILE are then read from the environment). Also prepares the shared
 * sandbox state (empty network namespace, cgroup parent) once per process.
 * Returns 0, or -1 with a message in err (bad language file, sandbox unusable). */
int sandbox_pool_new(uv_loop_t *loop, const struct config *cfg, struct sandbox_pool **out,
                     char *err, size_t errlen);   /* loads the language table */
/* Frees the pool after the loop stopped using it (no evaluation in flight). NULL ok. */
void sandbox_pool_free(struct sandbox_pool *sp);
/* Number of sandboxes running now (for the metrics gauge). */
int sandbox_pool_busy(const struct sandbox_pool *sp);

#endif
