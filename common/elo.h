/*
 * Elo rating maths of common/README.md "Elo": opponent rating from the challenge
 * difficulty, expected score, K by match count, the rating floor, and the verified /
 * benchmark-grade bonus (rounded in integer arithmetic). Pure: no I/O.
 */
#ifndef ARBITER_ELO_H
#define ARBITER_ELO_H

#include <limits.h>
#include <stdbool.h>

enum elo_outcome { ELO_WIN, ELO_DRAW, ELO_LOSS };

/* No rating goes below this, whatever the losses or adjustments. */
#define ELO_FLOOR 100

/* Documented ranges. A stored rating (an agent's elo, a challenge's rating)
 * outside [ELO_RATING_MIN, ELO_RATING_MAX] is clamped into it before any
 * arithmetic, and the update says so (clamped) so the caller can warn; all
 * arithmetic is done in 64-bit integers or doubles, so no input overflows.
 * No result goes above ELO_RATING_MAX. Counts (match, win, draw, loss counts,
 * streaks) live in [0, ELO_COUNT_MAX] and saturate there. */
#define ELO_RATING_MIN 0
#define ELO_RATING_MAX 1000000
#define ELO_COUNT_MAX INT_MAX
/* Opponent rating used when the challenge has neither a rating nor a known difficulty. */
#define ELO_DEFAULT_OPPONENT 1000
/* K factors: a newcomer's (fewer than ELO_K_MATCHES matches played) and an established agent's. */
#define ELO_K_NEW 32
#define ELO_K_ESTABLISHED 16
#define ELO_K_MATCHES 30

/* K for an agent that has played match_count matches before this one. */
int elo_k(int match_count);

/* rating clamped into [ELO_FLOOR, ELO_RATING_MAX]. */
int elo_floor(long long rating);

/* v clamped into [ELO_RATING_MIN, ELO_RATING_MAX]; *clamped set when it moved
 * (clamped may be NULL). */
int elo_clamp_rating(long long v, bool *clamped);

/* v clamped into [0, ELO_COUNT_MAX] (*clamped set when it moved; may be NULL). */
int elo_clamp_count(long long v, bool *clamped);

/* v + 1 for a count, saturating at ELO_COUNT_MAX (and a negative v counts as 0). */
int elo_count_inc(int v);

/* rating + delta as a rating: computed in 64 bits, within [ELO_FLOOR,
 * ELO_RATING_MAX] (for elo=adjust re-evaluations). */
int elo_add(int rating, long long delta);

/* The most an elo=adjust re-evaluation accepts as a match's stored effective change
 * (matches.elo_change). One match moves a rating by at most 39 (K 32, bonus 1.2), and
 * adjustments keep it within that, plus at most the floor's lift of a rating stored
 * below ELO_FLOOR; anything beyond this bound was not written by the worker. */
#define ELO_CHANGE_PLAUSIBLE 1000

/* A match's stored Elo columns (matches.elo_before, elo_after, elo_change) as read:
 * has_* false for NULL. The values are 64-bit so any stored int4 fits. */
struct elo_stored {
	bool has_before, has_after, has_change;
	long long before, after, change;
};

/* Checks the columns an elo=adjust re-evaluation builds on: elo_before and elo_after
 * present and within [ELO_RATING_MIN, ELO_RATING_MAX], elo_change present with
 * |elo_change| <= ELO_CHANGE_PLAUSIBLE, and elo_after = elo_before + elo_change (in 64
 * bits). Returns NULL when they are consistent, else a static sentence saying which
 * rule the row breaks (never freed). */
const char *elo_stored_check(const struct elo_stored *s);

/* Opponent rating: `rating` when has_rating, else newcomer 800, contender 1000, veteran 1200,
 * legendary 1400. Returns -1 for an unknown (or NULL) difficulty without a rating. */
int elo_opponent(const char *difficulty, bool has_rating, int rating);

/* elo_opponent, with ELO_DEFAULT_OPPONENT instead of -1. */
int elo_opponent_or_default(const char *difficulty, bool has_rating, int rating);

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

/* elo_compute with the K factor given instead of derived from a match count (a
 * re-evaluation recomputes a match with the K recorded when it was first played). k must
 * be ELO_K_NEW or ELO_K_ESTABLISHED; any other value is taken as ELO_K_NEW. */
void elo_compute_k(int rating, int k, int opponent, enum elo_outcome o, bool verified,
                   bool memoryless, int attempt_number, struct elo_update *out);

/* Rounds half away from zero. */
long elo_round(double x);

#endif
