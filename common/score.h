/*
 * Evaluation of a scoring spec against one submission (common/README.md "Scoring spec"): the
 * primitives per dimension, gates in topological order, exact weighted total,
 * result, verified-trajectory check, constraint violations, and the result
 * JSON. Deterministic: never reads the clock. Pure: no I/O.
 */
#ifndef ARBITER_SCORE_H
#define ARBITER_SCORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dec.h"
#include "spec.h"

#define SCORE_DEFAULT_MAX_STRING_BYTES ((size_t)1 << 20)

struct score_match {            /* arbiter score --match; all optional */
	bool has_times; int64_t started_at_ms, submitted_at_ms;
	int time_limit_secs;        /* the challenge's; 0 = unknown */
	bool memoryless; int attempt_number;
};
/* From the test-suite / custom-script evaluator. A dimension scored externally whose key is
 * not in keys scores 0 and score_eval adds the warning itself. */
struct score_ext {
	size_t n; const char **keys; const int *scores;  /* per-dimension 0..1000 */
	json_t *extra;              /* borrowed object merged into the result ("tests", "compile") */
	json_t *warnings;           /* borrowed array appended to submission_warnings, may be NULL */
};
/* Regex work (NFA state visits) one evaluation may spend in all; beyond it a regex counts as
 * not matching and the dimension gets an error warning. About 20 ms here. */
#define SCORE_RX_BUDGET ((uint64_t)6 * 1000 * 1000)
/* Work units one evaluation may spend in all dimensions together (common/README.md "Work budget"): each
 * costly step is charged, from its input size, before it runs (a unit is about a nanosecond
 * here); a step that does not fit is not run, its dimension scores 0 with an error warning,
 * and so does every later dimension that needs work. Deterministic: units depend on the
 * inputs and the spec only, never on the clock. */
#define SCORE_WORK_BUDGET ((uint64_t)40 * 1000 * 1000)
struct score_limits {
	size_t max_string_bytes;   /* default 1 MiB */
	bool explain;              /* fill every dimension's detail with how it was scored */
	/* Total JSON text length of answer + metadata + ground truth when the caller knows it, else
	 * 0. A decoded string is never longer than its JSON text, so when this is at most
	 * max_string_bytes the long-string scan is skipped. */
	size_t text_bytes;
};
struct score_dim { char key[33]; int score; dec6 weight; dec6 weighted; json_t *detail; /* owned, may be NULL */ };
enum score_outcome { SCORE_WIN, SCORE_DRAW, SCORE_LOSS };
struct score_result {
	int score; enum score_outcome result; bool verified;
	size_t ndims; struct score_dim dims[SPEC_MAX_DIMS];
	json_t *warnings;   /* owned array */   json_t *violations; /* owned array */
	json_t *extra;      /* owned object or NULL (tests, compile) */
	uint64_t work;      /* work units charged (at most the budget) */
};
/* Evaluates deterministically (never reads the clock). answer/metadata/ground_truth may be NULL
 * (treated as {}). ext may be NULL for the deterministic evaluator. lim may be NULL (defaults).
 * m may be NULL (no times, no limit). Returns 0 (out filled; free with score_result_clear) or
 * -1 only on an internal error (err filled). */
int score_eval(const struct spec *s, const json_t *answer, const json_t *metadata,
               const json_t *ground_truth, const struct score_match *m,
               const struct score_ext *ext, const struct score_limits *lim,
               struct score_result *out, char *err, size_t errlen);
void score_result_clear(struct score_result *r);
/* What every evaluation of one spec against one ground truth would recompute on the expected
 * side, computed once (common/README.md "Prepared ground truth"): for match_objects and keyed_map
 * dimensions reading the ground truth, the expected elements' keys (hashed and sorted) and
 * their nested fields' resolved values, normalised texts and exact decimals. Immutable once
 * built, so any number of threads may evaluate with it at once. It borrows s and
 * ground_truth: both must outlive it (the spec cache's entry owns all three and frees the
 * preparation first). ground_truth may be NULL (treated as {}). Never NULL (out of memory
 * aborts). Its costly steps (normalising, tokenising, sorting) are charged work units like an
 * evaluation's, from one bound of SCORE_WORK_BUDGET: what does not fit is not prepared and
 * the evaluations do it (and charge it) as usual. */
/* The hash match_objects and keyed_map index their keys by (bytes s[0..n)); exposed so a test
 * can build colliding keys. */
uint64_t score_key_hash(const char *s, size_t n);
struct score_prep;
struct score_prep *score_prepare(const struct spec *s, const json_t *ground_truth);
void score_prep_free(struct score_prep *p);   /* NULL ok */
/* Work units p's preparation spent (at most SCORE_WORK_BUDGET); 0 for NULL. */
uint64_t score_prep_work(const struct score_prep *p);
/* Estimated heap bytes of p (for cache bounds); 0 for NULL. */
size_t score_prep_bytes(const struct score_prep *p);
/* score_eval with the spec and ground truth of p: the same result, warnings and work units as
 * score_eval(s, answer, metadata, ground_truth, ...), which is this function on a fresh
 * preparation. */
int score_eval_prepared(const struct score_prep *p, const json_t *answer, const json_t *metadata,
                        const struct score_match *m, const struct score_ext *ext,
                        const struct score_limits *lim, struct score_result *out, char *err,
                        size_t errlen);
/* The result JSON of common/README.md "Scoring spec" (new reference): score, result, score_breakdown (dimensions
 * in spec order, each {"score","weight","weighted"}), submission_warnings,
 * constraint_violations, verified, then the ext extra keys. Fractional weights are JSON
 * reals: dump them with JSON_REAL_PRECISION(15) (or use score_result_dumps), never the default
 * 17 digits (0.15 would print as 0.14999999999999999). For exact text of one value use
 * dec_format(dims[i].weight / .weighted). */
json_t *score_result_json(const struct score_result *r);
/* The same as compact text with exact decimals (weights never print binary noise); caller
 * frees. Use it whenever result JSON is printed or stored. */
char *score_result_dumps(const struct score_result *r);
/* The rule for a custom script's score of one dimension (common/README.md "Custom-script values"): a
 * JSON number is rounded half up to an integer and clamped to 0..1000. Returns 0 (*out set), 1
 * when it was clamped (*out set; msg says so, quoting the number as its shortest decimal text,
 * e.g. "-0.4", never "-0.40000000000000002"), or -1 when v is not a finite number (msg says
 * what it is). */
int score_script_value(const json_t *v, int *out, char *msg, size_t msglen);
/* {key: detail} for every dimension that has one (score_eval with lim->explain); a new
 * reference. */
json_t *score_result_explain(const struct score_result *r);
const char *score_outcome_name(enum score_outcome o);   /* "win" "draw" "loss" */
/* The verified rule of common/README.md "Scoring spec" alone: metadata.replay_log is a non-empty array of objects whose
 * every `ts` is ISO 8601 within [started − 5 s, submitted + 5 s]; false without match times. */
bool score_verified(const json_t *metadata, const struct score_match *m);

#endif
