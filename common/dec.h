/*
 * Exact decimals for scoring (common/README.md "Scoring spec"). Two representations:
 *  - dec6: fixed point with 6 places (int64 micro-units), used for weights,
 *    weighted scores and totals, so sums and floors are exact;
 *  - struct dec_num: an arbitrary JSON number as integer mantissa × 10^exp,
 *    taken from the shortest decimal text that round-trips the double (so the
 *    JSON number 0.15 is exactly 15 × 10^-2), used by numeric comparisons.
 * Pure: no I/O.
 */
#ifndef ARBITER_DEC_H
#define ARBITER_DEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef int64_t dec6;                      /* value × 1,000,000 */
#define DEC6_ONE 1000000

/* Exact decimal from a JSON number: the shortest decimal text that round-trips the double
 * (so 0.15 is 0.15). Returns 0, or -1 if not finite / more than 6 places / out of range;
 * *places (may be NULL) gets the number of decimal places of that text (also on failure when
 * num is a number, so callers can report "more than 6 decimal places"). */
int dec_from_json(const json_t *num, dec6 *out, int *places);
/* Shortest plain decimal text: 450, 103.5, 0.15, -2. Returns length written (buf ≥ 32). */
int dec_format(dec6 v, char *buf, size_t n);

/* A decimal number m × 10^e with m's trailing zeros stripped (0 is {0, 0}), so two
 * equal values always have equal (m, e). |m| < 10^18. */
struct dec_num {
	int64_t m;
	int32_t e;
};
/* From a JSON integer or real (shortest round-trip text of the double). Returns 0, or -1
 * if num is not a number (booleans are not numbers). */
int dec_num_from_json(const json_t *num, struct dec_num *out);
/* From a double (shortest round-trip text). -1 if not finite. */
int dec_num_from_double(double d, struct dec_num *out);
/* Writes the shortest round-trip decimal text of a finite double, formatted like Python's repr:
 * plain for 1e-4 <= |d| < 1e16 ("0.15", "700", "-0.001"), else "1e-07", "1.5e+300".
 * Returns its length (-1 if not finite); buf >= 32. */
int dec_shortest(double d, char *buf, size_t n);
/* Exact comparison: <0, 0, >0. */
int dec_num_cmp(const struct dec_num *a, const struct dec_num *b);
bool dec_num_is_zero(const struct dec_num *a);
/* Canonical text of the value, identical for equal values: "12", "-3", "15e-2", "1e300". */
int dec_num_format(const struct dec_num *a, char *buf, size_t n);
/* The value as long double (for the inexact fallbacks). */
long double dec_num_ld(const struct dec_num *a);

#endif
