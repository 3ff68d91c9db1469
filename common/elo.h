/*
 * Elo rating maths of README "Elo": opponent rating from the challenge
 * difficulty, expected score, K by match count, floor 100, and the verified /
 * benchmark-grade bonus (rounded in integer arithmetic). Pure: no I/O.
 */
#ifndef ARBITER_ELO_H
#define ARBITER_ELO_H

#include <stdbool.h>

enum elo_outcome { ELO_WIN, ELO_DRAW, ELO_LOSS };

/* Opponent rating: `rating` when has_rating, else newcomer 800, contender 1000, veteran 1200,
 * legendary 1400. Returns -1 for an unknown (or NULL) difficulty without a rating. */
int elo_opponent(const char *difficulty, bool has_rating, int rating);

struct elo_update { int before, after, change, k, opponent; int bonus_tenths; /* 10, 11 or 12 */ };

/* Computes one match's update for an agent rated `rating` who has played match_count matches
 * before this one. bonus_tenths is 10 when no bonus applies (not verified, or change ≤ 0),
 * 12 for benchmark-grade (verified, memoryless, attempt_number == 1), else 11. */
void elo_compute(int rating, int match_count, int opponent, enum elo_outcome o,
                 bool verified, bool memoryless, int attempt_number, struct elo_update *out);

/* Rounds half away from zero. */
long elo_round(double x);

#endif
