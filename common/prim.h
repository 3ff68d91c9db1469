/*
 * The scoring primitives of common/README.md "Scoring spec", on values already resolved from the
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
#include "util.h"

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
	PRIM_TEXT_LENGTH,        /* v2: length of a text against a ramp or steps */
	PRIM_TERM_COVERAGE,      /* v2: fraction of listed terms / patterns present */
	PRIM_REGEX_MATCH,        /* v2: a linear-time regular expression matches */
	PRIM_TOKEN_OVERLAP,      /* v2: word overlap (recall, precision, F1, Jaccard) */
	PRIM_COUNT,              /* v2: length, distinct items, present keys against a ramp */
	PRIM_MATCH_OBJECTS,      /* v2: pair objects on keys, score fields, aggregate */
	PRIM_KEYED_MAP,          /* v2: a nested primitive per key of an object, mean */
	PRIM_TEXT_CONTAINS,      /* v3: one text inside the other (either direction), credits */
};
/* Kinds are 0 .. PRIM_KIND_COUNT - 1: a new kind goes last in the enum and moves this. */
#define PRIM_KIND_COUNT (PRIM_TEXT_CONTAINS + 1)

/* set_overlap / token_overlap / match_objects aggregate over A = submitted, B = expected:
 * jaccard |A∩B|/|A∪B|, recall |A∩B|/|B| (set_overlap's "intersection"), precision |A∩B|/|A|,
 * f1 2|A∩B|/(|A|+|B|), mean (match_objects: mean pair score over matched pairs), points
 * (match_objects: Σ points × pair score, capped at max_points, over max_points). */
enum prim_method { PRIM_M_JACCARD, PRIM_M_RECALL, PRIM_M_PRECISION, PRIM_M_F1, PRIM_M_MEAN,
                   PRIM_M_POINTS /* match_objects (v3): pair points summed, capped */,
                   PRIM_M_DISTINCT /* match_objects (v3): distinct expected values of pairs */ };
/* A ramp or steps point: at x, fraction f (dec6, 0..1). */
struct prim_point { int64_t x; dec6 f; };

/* Each primitive has one descriptor, in one table beside the code that applies it
 * (common/score.c, prim_table): its name, the parameters it reads, these flags, the JSON types
 * it needs on each side, its work units, how it is applied and how its expected side is
 * prepared. The functions below read that table. What a new primitive needs besides its row:
 * its parameters' parsing (spec.c parse_params, a switch without default: a forgotten kind
 * fails the build, -Werror=switch), a row in common/README.md, cases in test/data/, the
 * differential reference (test/integration/test_score_differential.py) and a fuzz seed;
 * test/test-prim.c's descriptor test checks the last four. */
enum {
	PRIM_F_FIELD = 1u << 0,      /* reads `field` (else it reads the match or metadata) */
	PRIM_F_GT = 1u << 1,         /* needs `ground_truth_field` (a dimension must give it) */
	PRIM_F_GT_OPT = 1u << 2,     /* may read `ground_truth_field` (term_coverage) */
	PRIM_F_NESTABLE = 1u << 3,   /* may be a nested primitive (fields[i], item) */
	PRIM_F_NORM_OWN = 1u << 4,   /* `normalize` is applied by the primitive itself (keys) */
};
/* Name ↔ kind ("exact_match", ...). from_name returns 0, or -1 for an unknown name (and for
 * ""). kind_name gives "" for PRIM_NONE or a kind out of range. */
int prim_kind_from_name(const char *name, enum prim_kind *out);
const char *prim_kind_name(enum prim_kind k);
/* The parameter keys kind k reads besides a dimension's own (NULL-terminated, static). */
const char *const *prim_params(enum prim_kind k);
/* PRIM_F_* of kind k (0 for PRIM_NONE). */
unsigned prim_flags(enum prim_kind k);

/* round_half_up(1000 × num / den), exactly; den > 0, num ≤ den is not required (the result
 * is clamped to 0..1000). */
int prim_permille_ratio(unsigned __int128 num, unsigned __int128 den);
/* The fraction a score rounds, for a composite's part (common/README.md "Composite
 * dimensions"), which reads it instead of score ÷ 1000 so the composite is rounded once:
 * PRIM_FR_EXACT num/den (den > 0, 0 ≤ num ≤ den, below 2^124), PRIM_FR_BINARY the value ld in
 * [0, 1] (an exact fraction too wide for 128-bit integers), PRIM_FR_NONE not known (the
 * primitive's fraction is irreducibly binary: fuzzy_string, time_decay with a curve other
 * than 1; or the score is 0 or 1000 exactly). Every function below that takes a
 * `struct prim_frac *f` fills it when f is not NULL and it computed a fraction, and leaves it
 * alone otherwise: the caller sets kind PRIM_FR_NONE first. */
enum prim_fr_kind { PRIM_FR_NONE, PRIM_FR_EXACT, PRIM_FR_BINARY };
struct prim_frac { unsigned __int128 num, den; long double ld; enum prim_fr_kind kind; };
/* prim_permille_ratio(num, den), recording num/den (clamped to [0, 1]; den 0 as 0) in *f when
 * f is not NULL. */
int prim_permille_frac(unsigned __int128 num, unsigned __int128 den, struct prim_frac *f);
/* For irreducibly floating fractions: x clamped to [0, 1] (NaN → 0), then
 * floor(x × 1000 + 0.5 + 1e-9) — half up with a tiny epsilon against binary error. */
int prim_permille_double(long double x);

/* 1 if deep-equal (jcanon_equal), else 0 → 1000 or 0. Never PRIM_BAD. */
int prim_exact_match(const json_t *got, const json_t *want, bool fold_case);
/* Both arrays: matches at equal index over the first min(len) ÷ len(want); both empty → 1000;
 * want empty, got not → 0. PRIM_BAD (err filled) if either is not an array. */
int prim_exact_match_ratio(const json_t *got, const json_t *want, struct prim_err *err,
                           struct prim_frac *f);
/* Scalar: both numbers. Arrays: want an array (of numbers), got an array; element-wise over
 * len(want), a missing or non-numeric element of got (or non-numeric element of want) counts 0
 * and is counted in *nbad (may be NULL). Empty want: 1000 if got is empty too, else 0.
 * linear: an element's fraction is 1 − (d − tol)/(4·tol) floored at 0 (tol 0: 0).
 * Differences are exact decimals (dec_num) at any magnitude: 128-bit integers, wide integers
 * when the exponents are too far apart. PRIM_BAD on type mismatch (err filled). */
int prim_numeric_tolerance(const json_t *got, const json_t *want, const struct dec_num *tol,
                           bool linear, int *nbad, struct prim_err *err, struct prim_frac *f);
/* The scalar case of prim_numeric_tolerance (both numbers) with want's exact decimal wd
 * (dec_num_from_json of want) already at hand. */
int prim_numeric_tolerance_num(const json_t *got, const json_t *want, const struct dec_num *wd,
                               const struct dec_num *tol, bool linear, struct prim_frac *f);
/* prim_numeric_tolerance with a tolerance relative to the truth (v3): element i is within when
 * |a − e| ≤ max(tol, rel × |e|), the product exact up to 18 significant digits (cut to 18
 * beyond); linear decay uses that allowance. Exact fractions, or long double when the
 * exponents are too far apart for 128-bit integers. */
int prim_numeric_relative(const json_t *got, const json_t *want, const struct dec_num *tol,
                          const struct dec_num *rel, bool linear, int *nbad,
                          struct prim_err *err, struct prim_frac *f);
/* Both strings: fuzzy_score(). PRIM_BAD if not strings or invalid UTF-8. */
int prim_fuzzy_string(const json_t *got, const json_t *want, struct prim_err *err);
/* prim_fuzzy_string with the distance paid for before it runs: after normalising both texts
 * and stripping their common prefix and suffix, pay(arg, m, n) gets the differing middles'
 * lengths in code points (m ≤ n); when it returns false the distance is not computed and the
 * result is 0 (the caller knows why). pay may be NULL (always computed). Called at most once,
 * synchronously. */
int prim_fuzzy_string_paid(const json_t *got, const json_t *want,
                           bool (*pay)(void *arg, size_t m, size_t n), void *arg,
                           struct prim_err *err);
/* Both arrays, items as canonical JSON, sets (duplicates count once):
 * |got ∩ want| ÷ |want|; want empty → 1000. */
int prim_coverage_ratio(const json_t *got, const json_t *want, struct prim_err *err,
                        struct prim_frac *f);
/* A set of canonical JSON texts (an array's items, sorted, duplicates once), built once from an
 * expected array and used by any number of evaluations (read only). */
struct prim_set { char **items; size_t n; struct strbuf buf; };
void prim_set_build(const json_t *arr, struct prim_set *s);
void prim_set_free(struct prim_set *s);
/* prim_coverage_ratio / prim_set_method with ws = prim_set_build(want) already at hand (want is
 * still given, for its type and size). */
int prim_coverage_ratio_set(const json_t *got, const json_t *want, const struct prim_set *ws,
                            struct prim_err *err, struct prim_frac *f);
int prim_set_method_set(const json_t *got, const json_t *want, const struct prim_set *ws,
                        enum prim_method m, struct prim_err *err, struct prim_frac *f);
/* Both arrays as sets A = got, B = want. Both empty → 1000. intersection: |A∩B| ÷ |B|, and
 * 0 when B is empty but A is not. jaccard: |A∩B| ÷ |A∪B|. */
int prim_set_overlap(const json_t *got, const json_t *want, bool jaccard, struct prim_err *err,
                     struct prim_frac *f);
/* t = elapsed_ms (submitted − started), L = limit_secs: max(0, 1 − t/L)^curve; t < 0 → 1000.
 * curve 1 is exact integer arithmetic; other curves use powl then prim_permille_double. */
int prim_time_decay(int64_t elapsed_ms, const struct dec_num *limit_secs, double curve,
                    struct prim_frac *f);
/* max(0, 1 − count/budget) exactly; count must be a non-negative integral number (PRIM_BAD
 * otherwise). budget 0: count 0 → 1000, else 0. */
int prim_efficiency(const json_t *count, int64_t budget, struct prim_err *err,
                    struct prim_frac *f);
/* An exact fraction c ÷ of set sizes per method (see enum prim_method); both sets empty → 1000,
 * a zero denominator otherwise → 0. */
int prim_set_ratio(size_t common, size_t na, size_t nb, enum prim_method m,
                   struct prim_frac *f);
/* Both arrays as sets (canonical JSON items, duplicates once), scored with method m.
 * PRIM_BAD (err filled) if either is not an array. */
int prim_set_method(const json_t *got, const json_t *want, enum prim_method m,
                    struct prim_err *err, struct prim_frac *f);
/* Piecewise function of v over points sorted by strictly increasing x: linear interpolation
 * between points and constant outside (steps false), or the f of the last point with x ≤ v and
 * 0 below the first (steps true). Exact, rounded half up. */
int prim_ramp(int64_t v, const struct prim_point *pts, size_t n, bool steps,
              struct prim_frac *f);
/* Code points of UTF-8 text (invalid bytes count one each). */
size_t prim_count_chars(const char *s, size_t len);
/* Words: maximal runs of non-whitespace code points. */
size_t prim_count_words(const char *s, size_t len);
/* Lines (text_length unit "lines", v3): the pieces between '\n' characters that hold a
 * non-whitespace code point, so blank lines and a final newline count nothing ("a\n\nb\n" has
 * 2; "" and "  \n" have 0). */
size_t prim_count_lines(const char *s, size_t len);
/* Tokens for token_overlap: maximal runs of Unicode letters, digits, marks and '_'. Appends
 * each token (NUL-terminated, pointing into a copy held by sb) to the set built like
 * coverage sets: returns the sorted distinct tokens in *items / *n (free with free(*items) and
 * strbuf_free(sb)). */
void prim_tokens(const char *s, size_t len, struct strbuf *sb, char ***items, size_t *n);
/* Size of the intersection of two sorted distinct string arrays. */
size_t prim_sorted_common(char *const *a, size_t na, char *const *b, size_t nb);

/* True if v (deeply: strings inside arrays/objects too, and object keys) holds a string longer
 * than max_bytes. */
bool prim_has_long_string(const json_t *v, size_t max_bytes);

#endif
