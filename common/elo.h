/*
 * Elo rating maths of CONTRACT §5: opponent rating from the challenge
 * difficulty, expected score, K by match count, floor 100, and the verified /
 * benchmark-grade bonus (rounded in integer arithmetic). Pure: no I/O.
 */
#ifndef ARBITER_ELO_H
#define ARBITER_ELO_H

#include <limits.h>
#include <stdbool.h>

/* Documented ranges. A stored rating (an agent's elo, a challenge's rating)
 * outside [ELO_RATING_MIN, ELO_RATING_MAX] is clamped into it before any
 * arithmetic, and the update says so (clamped) so the caller can warn; all
 * arithmetic is done in 64-bit integers or doubles, so no input overflows.
 * Counts (match, win, draw, loss counts, streaks) live in [0, ELO_COUNT_MAX]
 * and saturate there. */
#define ELO_RATING_MIN 0
#define ELO_RATING_MAX 1000000
#define ELO_FLOOR 100
#define ELO_COUNT_MAX INT_MAX

enum elo_outcome { ELO_WIN, ELO_DRAW, ELO_LOSS };

/* Opponent rating: `rating` when has_rating, else newcomer 800, contender 1000, veteran 1200,
 * legendary 1400. Returns -1 for an unknown (or NULL) difficulty without a rating. */
int elo_opponent(const char *difficulty, bool has_rating, int rating);

struct elo_update {
	int before, after, change, k, opponent;   /* before/opponent after clamping */
	int bonus_tenths;                         /* 10, 11 or 12 */
	bool clamped;                             /* rating or opponent was out of range */
};

/* Computes one match's update for an agent rated `rating` who has played match_count matches
 * before this one. bonus_tenths is 10 when no bonus applies (not verified, or change ≤ 0),
 * 12 for benchmark-grade (verified, memoryless, attempt_number == 1), else 11. */
void elo_compute(int rating, int match_count, int opponent, enum elo_outcome o,
                 bool verified, bool memoryless, int attempt_number, struct elo_update *out);

/* v clamped into [ELO_RATING_MIN, ELO_RATING_MAX]; *clamped set when it moved
 * (clamped may be NULL). */
int elo_clamp_rating(long long v, bool *clamped);

/* v clamped into [0, ELO_COUNT_MAX] (*clamped set when it moved; may be NULL). */
int elo_clamp_count(long long v, bool *clamped);

/* v + 1 for a count, saturating at ELO_COUNT_MAX (and a negative v counts as 0). */
int elo_count_inc(int v);

/* rating + delta as a rating: computed in 64 bits, never below ELO_FLOOR,
 * clamped to ELO_RATING_MAX (for elo=adjust re-evaluations). */
int elo_add(int rating, long long delta);

/* Rounds half away from zero. */
long elo_round(double x);

#endif
