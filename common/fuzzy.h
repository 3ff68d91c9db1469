/*
 * Fuzzy string comparison for the `fuzzy_string` primitive (common/README.md "Scoring spec").
 * Text is normalised (UTF-8 → NFKC → case folding → Unicode whitespace runs
 * collapsed to one space, trimmed) and compared in code points with a
 * bit-parallel Levenshtein distance (Myers 1999, Hyyrö's blocked variant for
 * patterns longer than 64; an AVX2 wavefront over 8 blocks when the CPU has it).
 * Memory is O(n + m + alphabet size). Pure: no I/O.
 */
#ifndef ARBITER_FUZZY_H
#define ARBITER_FUZZY_H

#include <stddef.h>
#include <stdint.h>

/* NFKC + case fold + whitespace runs → one space, trimmed. *cps is malloc'd (caller frees).
 * Returns 0, or -1 on invalid UTF-8 (then *cps is NULL and *n is 0). */
int fuzzy_normalize(const char *s, size_t len, int32_t **cps, size_t *n);
/* Levenshtein distance (insert, delete, substitute; each costs 1) between two code-point
 * sequences. Either may be NULL when its length is 0. Time O(⌈min/64⌉·max), memory O(n+m+σ). */
size_t fuzzy_levenshtein(const int32_t *a, size_t na, const int32_t *b, size_t nb);
/* The same distance computed without SIMD (fuzzy_levenshtein uses AVX2 when the CPU has it);
 * for tests and benchmarks. */
size_t fuzzy_levenshtein_portable(const int32_t *a, size_t na, const int32_t *b, size_t nb);
/* Upper bound on the distance matrix (code points of one text × the other, after stripping
 * the common prefix and suffix) that fuzzy_score will compute: 10^10 cells, the issue's
 * 100,000 × 100,000 case (≈0.25 s here). Beyond it the comparison would stall a worker. */
#define FUZZY_MAX_CELLS 10000000000ULL

/* The two texts of one comparison, normalised (fuzzy_normalize), with the lengths of their
 * common prefix and suffix: what the distance will cost is known before it is computed. */
struct fuzzy_pair {
	int32_t *a, *b;        /* owned code points */
	size_t na, nb;
	size_t pre, suf;       /* common prefix and suffix (not overlapping) */
};
/* Normalises both texts into *p (free with fuzzy_pair_free, also after a failure). Time and
 * memory linear in alen + blen. Returns 0, or -1 on invalid UTF-8. */
int fuzzy_pair_init(struct fuzzy_pair *p, const char *a, size_t alen, const char *b,
                    size_t blen);
/* The lengths in code points of the two differing middles, the shorter one in *m: the
 * distance costs ⌈m/64⌉·n bit-parallel steps, plus sorting the m pattern code points. */
void fuzzy_pair_middle(const struct fuzzy_pair *p, size_t *m, size_t *n);
/* fuzzy_score of the pair: 0 with *score in 0..1000, or -2 when the middles exceed
 * FUZZY_MAX_CELLS (*score untouched). */
int fuzzy_pair_score(const struct fuzzy_pair *p, int *score);
void fuzzy_pair_free(struct fuzzy_pair *p);

/* 1000 × (1 − lev/max(len)), rounded half up exactly; both empty → 1000.
 * Returns 0 with *score in 0..1000; -1 on invalid UTF-8; -2 when the texts differ over more
 * than FUZZY_MAX_CELLS (then *score is untouched). */
int fuzzy_score(const char *a, size_t alen, const char *b, size_t blen, int *score);

#endif
