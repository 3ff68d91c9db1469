/*
 * weights: capped proportional weights from non-negative integer scores,
 * exact and deterministic (integer arithmetic only, no floating point).
 *
 * The rule (sql/README.md "Standings"): weight_i = score_i / sum of scores; any
 * weight above the cap is set to the cap and the excess is redistributed
 * proportionally among the uncapped weights, repeated until no weight is
 * above the cap. The result of that iteration is computed directly: with the
 * scores sorted in descending order, the k largest are capped where k is the
 * smallest count for which the largest uncapped weight,
 * (1 - k*cap) * s_(k+1) / (s_(k+1) + ... + s_m), is at most the cap; every
 * capped weight is the cap and the others are proportional to their scores.
 *
 * Special cases: when fewer than 1/cap agents have a positive score the cap
 * cannot be met with weights summing to 1; the cap is raised to 1/m (m = the
 * agents with a positive score), which gives each of them exactly 1/m. When
 * every score is 0 (and n > 0) each agent gets 1/n. Agents scoring 0 get 0
 * otherwise.
 *
 * Each exact weight is the fraction num_i / den (den common to all agents,
 * and the nums sum exactly to den). It is also given in integer units of
 * 1/scale, rounded by the largest-remainder method: every weight is first
 * rounded down, then the units still missing to reach scale are given one
 * each to the weights with the largest remainders, ties to the earlier index.
 * So the units sum to exactly scale and each differs from its exact value by
 * less than one unit.
 */
#ifndef ARBITER_WEIGHTS_H
#define ARBITER_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

/* Bounds that keep every intermediate product within 128 bits. */
#define WEIGHTS_MAX_DEN   1000000000ULL   /* cap denominator and scale: at most 10^9 */

__extension__ typedef unsigned __int128 weights_u128;

struct weights_out {
	weights_u128 *num;        /* n exact numerators (caller-allocated, may be NULL) */
	uint64_t *units;          /* n weights in units of 1/scale (caller-allocated) */
	weights_u128 den;         /* the common denominator (> 0 when n > 0) */
	size_t capped;            /* how many weights are at the (effective) cap */
	uint64_t cap_num, cap_den;/* the effective cap (raised to 1/m, see above), reduced */
	size_t positive;          /* agents with a positive score */
};

/* Computes the capped weights of scores[0..n-1] (each >= 0, their sum at most
 * INT64_MAX) with cap = cap_num / cap_den (0 < cap <= 1, cap_den <= 10^9) and
 * units of 1/scale (1 <= scale <= 10^9). out->units (and out->num when not
 * NULL) must hold n elements; the other fields of out are filled in. Index order
 * breaks ties (pass the agents in their ranking order). Returns 0, or -1 when an
 * argument is out of range (out untouched). n == 0 is valid and gives den = 0. */
int weights_capped(const int64_t *scores, size_t n, uint64_t cap_num, uint64_t cap_den,
                   uint64_t scale, struct weights_out *out)
	__attribute__((warn_unused_result));

/* Parses a cap written as a decimal in (0, 1] with at most 9 decimal places
 * ("0.15", "1", ".5") into num / den (den a power of ten). Returns 0, or -1
 * when text is not such a number. */
int weights_parse_cap(const char *text, uint64_t *num, uint64_t *den)
	__attribute__((warn_unused_result));

/* The scale `arbiter weights` and the console use: units of 1e-9, printed with 9
 * decimals (weights_units_str). */
#define WEIGHTS_SCALE 1000000000ULL

/* Writes units of 1/WEIGHTS_SCALE as a decimal with 9 places ("0.150000000") into buf
 * (at least 32 bytes). Returns buf. */
char *weights_units_str(uint64_t units, char *buf);

/* Writes v in decimal into buf (at least 40 bytes). Returns buf. */
char *weights_u128_str(weights_u128 v, char *buf);

/* The greatest common divisor of a and b (gcd(0, b) = b). */
weights_u128 weights_gcd(weights_u128 a, weights_u128 b);

#endif
