/*
 * The scoring primitives of README "Scoring spec", on values already resolved from the
 * submission and the ground truth. Each returns a dimension score 0..1000 (the
 * primitive's fraction × 1000, rounded half up: exactly, with integer
 * arithmetic, wherever the fraction is a ratio of integers or decimals), or
 * PRIM_BAD when a value is ill-typed (the caller then scores the dimension 0
 * and emits an error warning with `why`). fuzzy_string and expression maths
 * live in fuzzy.c / expr.c. Pure: no I/O, no clock.
 */
#ifndef ARBITER_PRIM_H
#define ARBITER_PRIM_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dec.h"

#define PRIM_BAD (-1)

/* Why a primitive returned PRIM_BAD: which input was ill-typed and a short reason. */
struct prim_err {
	int side;            /* 0: the submitted value, 1: the ground-truth value */
	char why[200];
};

enum prim_kind {
	PRIM_NONE = 0,           /* no primitive: scored by the test-suite / script */
	PRIM_EXACT_MATCH,
	PRIM_EXACT_MATCH_RATIO,
	PRIM_NUMERIC_TOLERANCE,
	PRIM_FUZZY_STRING,
	PRIM_TIME_DECAY,
	PRIM_COVERAGE_RATIO,
	PRIM_SET_OVERLAP,
	PRIM_TOKEN_EFFICIENCY,
	PRIM_CALL_EFFICIENCY,
	PRIM_EXPRESSION,
};

/* Name ↔ kind ("exact_match", ...). from_name returns 0, or -1 for an unknown name. */
int prim_kind_from_name(const char *name, enum prim_kind *out);
const char *prim_kind_name(enum prim_kind k);
/* True for the primitives that need `field` and `ground_truth_field`. */
bool prim_reads_fields(enum prim_kind k);

/* round_half_up(1000 × num / den), exactly; den > 0, num ≤ den is not required (the result
 * is clamped to 0..1000). */
int prim_permille_ratio(unsigned __int128 num, unsigned __int128 den);
/* For irreducibly floating fractions: x clamped to [0, 1] (NaN → 0), then
 * floor(x × 1000 + 0.5 + 1e-9) — half up with a tiny epsilon against binary error. */
int prim_permille_double(long double x);

/* 1 if deep-equal (jcanon_equal), else 0 → 1000 or 0. Never PRIM_BAD. */
int prim_exact_match(const json_t *got, const json_t *want, bool fold_case);
/* Both arrays: matches at equal index over the first min(len) ÷ len(want); both empty → 1000;
 * want empty, got not → 0. PRIM_BAD (err filled) if either is not an array. */
int prim_exact_match_ratio(const json_t *got, const json_t *want, struct prim_err *err);
/* Scalar: both numbers. Arrays: want an array (of numbers), got an array; element-wise over
 * len(want), a missing or non-numeric element of got (or non-numeric element of want) counts 0
 * and is counted in *nbad (may be NULL). Empty want: 1000 if got is empty too, else 0.
 * linear: an element's fraction is 1 − (d − tol)/(4·tol) floored at 0 (tol 0: 0).
 * Differences are exact decimals (dec_num) at any magnitude: 128-bit integers, wide integers
 * when the exponents are too far apart. PRIM_BAD on type mismatch (err filled). */
int prim_numeric_tolerance(const json_t *got, const json_t *want, const struct dec_num *tol,
                           bool linear, int *nbad, struct prim_err *err);
/* Both strings: fuzzy_score(). PRIM_BAD if not strings or invalid UTF-8. */
int prim_fuzzy_string(const json_t *got, const json_t *want, struct prim_err *err);
/* Both arrays, items as canonical JSON, sets (duplicates count once):
 * |got ∩ want| ÷ |want|; want empty → 1000. */
int prim_coverage_ratio(const json_t *got, const json_t *want, struct prim_err *err);
/* Both arrays as sets A = got, B = want. Both empty → 1000. intersection: |A∩B| ÷ |B|, and
 * 0 when B is empty but A is not. jaccard: |A∩B| ÷ |A∪B|. */
int prim_set_overlap(const json_t *got, const json_t *want, bool jaccard, struct prim_err *err);
/* t = elapsed_ms (submitted − started), L = limit_secs: max(0, 1 − t/L)^curve; t < 0 → 1000.
 * curve 1 is exact integer arithmetic; other curves use powl then prim_permille_double. */
int prim_time_decay(int64_t elapsed_ms, const struct dec_num *limit_secs, double curve);
/* max(0, 1 − count/budget) exactly; count must be a non-negative integral number (PRIM_BAD
 * otherwise). budget 0: count 0 → 1000, else 0. */
int prim_efficiency(const json_t *count, int64_t budget, struct prim_err *err);
/* True if v (deeply: strings inside arrays/objects too, and object keys) holds a string longer
 * than max_bytes. */
bool prim_has_long_string(const json_t *v, size_t max_bytes);

#endif
