/*
 * Elo rating maths (common/README.md "Elo"). The expected score uses pow() in double;
 * the verified bonus is applied in integer tenths so 23 × 1.1 is exactly 25.3
 * and rounds the same on every machine. Inputs are clamped to the ranges of
 * elo.h and the arithmetic is 64-bit, so no stored value can overflow it.
 */
#include "elo.h"

#include <math.h>
#include <string.h>

int elo_opponent(const char *difficulty, bool has_rating, int rating)
{
	static const struct { const char *name; int rating; } table[] = {
		{ "newcomer", 800 }, { "contender", 1000 }, { "veteran", 1200 }, { "legendary", 1400 },
	};
	if (has_rating)
		return rating;
	if (!difficulty)
		return -1;
	for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
		if (!strcmp(difficulty, table[i].name))
			return table[i].rating;
	return -1;
}

int elo_opponent_or_default(const char *difficulty, bool has_rating, int rating)
{
	int o = elo_opponent(difficulty, has_rating, rating);
	return o < 0 ? ELO_DEFAULT_OPPONENT : o;
}

int elo_k(int match_count)
{
	return match_count < ELO_K_MATCHES ? ELO_K_NEW : ELO_K_ESTABLISHED;
}

int elo_floor(long long rating)
{
	return rating < ELO_FLOOR ? ELO_FLOOR : rating > ELO_RATING_MAX ? ELO_RATING_MAX : (int)rating;
}

int elo_clamp_rating(long long v, bool *clamped)
{
	long long c = v < ELO_RATING_MIN ? ELO_RATING_MIN : v > ELO_RATING_MAX ? ELO_RATING_MAX : v;
	if (clamped && c != v)
		*clamped = true;
	return (int)c;
}

int elo_clamp_count(long long v, bool *clamped)
{
	long long c = v < 0 ? 0 : v > ELO_COUNT_MAX ? ELO_COUNT_MAX : v;
	if (clamped && c != v)
		*clamped = true;
	return (int)c;
}

int elo_count_inc(int v)
{
	if (v < 0)
		return 1;
	return v < ELO_COUNT_MAX ? v + 1 : ELO_COUNT_MAX;
}

int elo_add(int rating, long long delta)
{
	if (delta > 4LL * ELO_RATING_MAX)
		delta = 4LL * ELO_RATING_MAX;
	if (delta < -4LL * ELO_RATING_MAX)
		delta = -4LL * ELO_RATING_MAX;
	return elo_floor((long long)rating + delta);
}

_Static_assert(ELO_RATING_MIN == 0 && ELO_RATING_MAX == 1000000 && ELO_CHANGE_PLAUSIBLE == 1000,
               "elo_stored_check's sentences name these bounds");

const char *elo_stored_check(const struct elo_stored *s)
{
	if (!s->has_before)
		return "the match's elo_before is NULL";
	if (s->before < ELO_RATING_MIN || s->before > ELO_RATING_MAX)
		return "the match's elo_before is outside the rating range 0..1000000";
	if (!s->has_change)
		return "the match's elo_change is NULL";
	if (s->change < -ELO_CHANGE_PLAUSIBLE || s->change > ELO_CHANGE_PLAUSIBLE)
		return "the match's elo_change is implausible (beyond +-1000)";
	if (!s->has_after)
		return "the match's elo_after is NULL";
	if (s->after < ELO_RATING_MIN || s->after > ELO_RATING_MAX)
		return "the match's elo_after is outside the rating range 0..1000000";
	if (s->after != s->before + s->change)
		return "the match's elo_after is not elo_before + elo_change";
	return NULL;
}

long elo_round(double x)
{
	return (long)round(x);    /* C's round() is half away from zero, and exact */
}

/* round(v / 10) half away from zero, for integer v. */
static long long div10_round(long long v)
{
	return v >= 0 ? (v + 5) / 10 : -((-v + 5) / 10);
}

void elo_compute(int rating, int match_count, int opponent, enum elo_outcome o,
                 bool verified, bool memoryless, int attempt_number, struct elo_update *out)
{
	elo_compute_k(rating, elo_k(match_count), opponent, o, verified, memoryless, attempt_number,
	              out);
}

void elo_compute_k(int rating_in, int k, int opponent_in, enum elo_outcome o, bool verified,
                   bool memoryless, int attempt_number, struct elo_update *out)
{
	bool clamped = false;
	long long rating = elo_clamp_rating(rating_in, &clamped);
	long long opponent = elo_clamp_rating(opponent_in, &clamped);
	double s = o == ELO_WIN ? 1.0 : o == ELO_DRAW ? 0.5 : 0.0;
	double e = 1.0 / (1.0 + pow(10.0, (double)(opponent - rating) / 400.0));
	long long after, change;

	if (k != ELO_K_NEW && k != ELO_K_ESTABLISHED)
		k = ELO_K_NEW;
	after = elo_floor(elo_round((double)rating + k * (s - e)));
	change = after - rating;
	out->bonus_tenths = 10;
	if (verified && change > 0) {
		out->bonus_tenths = (memoryless && attempt_number == 1) ? 12 : 11;
		change = div10_round(change * out->bonus_tenths);
		after = elo_floor(rating + change);
	}
	out->before = (int)rating;
	out->after = (int)after;
	out->change = (int)(after - rating);
	out->k = k;
	out->opponent = (int)opponent;
	out->clamped = clamped;
}
