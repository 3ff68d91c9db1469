/* Unit tests for common/elo: CONTRACT §5 worked example, bonus rounding, K switch, floor. */
#include "elo.h"
#include "tap.h"

struct elo_case {
	const char *name;
	int rating, matches, opponent;
	enum elo_outcome o;
	bool verified, memoryless;
	int attempt;
	int after, change, k, bonus;
};

static const struct elo_case cases[] = {
	{ "worked example: 1050 beats veteran", 1050, 0, 1200, ELO_WIN, false, false, 1, 1073, 23, 32, 10 },
	{ "worked example verified (bonus 1.1)", 1050, 0, 1200, ELO_WIN, true, false, 1, 1075, 25, 32, 11 },
	{ "verified, memoryless, attempt 2: 1.1", 1050, 0, 1200, ELO_WIN, true, true, 2, 1075, 25, 32, 11 },
	{ "benchmark-grade: 23 x 1.2 = 27.6 -> 28", 1050, 0, 1200, ELO_WIN, true, true, 1, 1078, 28, 32, 12 },
	{ "memoryless without verification: no bonus", 1050, 0, 1200, ELO_WIN, false, true, 1, 1073, 23, 32, 10 },
	{ "29 matches played: K 32", 1050, 29, 1200, ELO_WIN, false, false, 1, 1073, 23, 32, 10 },
	{ "30 matches played: K 16", 1050, 30, 1200, ELO_WIN, false, false, 1, 1061, 11, 16, 10 },
	{ "draw against stronger", 1050, 0, 1200, ELO_DRAW, false, false, 1, 1057, 7, 32, 10 },
	{ "loss against stronger", 1050, 0, 1200, ELO_LOSS, false, false, 1, 1041, -9, 32, 10 },
	{ "verified loss: no bonus on a negative change", 1050, 0, 1200, ELO_LOSS, true, true, 1, 1041, -9, 32, 10 },
	{ "equal draw: no change", 1000, 0, 1000, ELO_DRAW, true, true, 1, 1000, 0, 32, 10 },
	{ "draw against weaker, K 16", 1200, 40, 800, ELO_DRAW, false, false, 1, 1193, -7, 16, 10 },
	{ "floor 100 holds", 100, 0, 1400, ELO_LOSS, false, false, 1, 100, 0, 32, 10 },
	{ "floor 100 cuts a loss", 105, 0, 105, ELO_LOSS, false, false, 1, 100, -5, 32, 10 },
	{ "tiny win against much weaker", 1500, 5, 800, ELO_WIN, false, false, 1, 1501, 1, 32, 10 },
	{ "1 x 1.1 = 1.1 -> 1", 1500, 5, 800, ELO_WIN, true, false, 1, 1501, 1, 32, 11 },
	{ "15 x 1.1 = 16.5 -> 17 (half away from zero, exact)", 1000, 0, 980, ELO_WIN, true, false, 1, 1017, 17, 32, 11 },
	{ "25 x 1.1 = 27.5 -> 28", 1000, 0, 1220, ELO_WIN, true, false, 1, 1028, 28, 32, 11 },
	{ "equal win verified 16 x 1.1 = 17.6 -> 18", 1000, 0, 1000, ELO_WIN, true, false, 1, 1018, 18, 32, 11 },
	{ "equal win benchmark 16 x 1.2 = 19.2 -> 19", 1000, 0, 1000, ELO_WIN, true, true, 1, 1019, 19, 32, 12 },
};

int main(void)
{
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct elo_case *c = &cases[i];
		struct elo_update u;
		elo_compute(c->rating, c->matches, c->opponent, c->o, c->verified, c->memoryless,
		            c->attempt, &u);
		is_int(u.after, c->after, "%s: after", c->name);
		is_int(u.change, c->change, "%s: change", c->name);
		is_int(u.k, c->k, "%s: K", c->name);
		is_int(u.bonus_tenths, c->bonus, "%s: bonus", c->name);
		is_int(u.before, c->rating, "%s: before", c->name);
		is_int(u.opponent, c->opponent, "%s: opponent", c->name);
	}

	is_int(elo_opponent("newcomer", false, 0), 800, "newcomer 800");
	is_int(elo_opponent("contender", false, 0), 1000, "contender 1000");
	is_int(elo_opponent("veteran", false, 0), 1200, "veteran 1200");
	is_int(elo_opponent("legendary", false, 0), 1400, "legendary 1400");
	is_int(elo_opponent("veteran", true, 1337), 1337, "challenge rating wins over difficulty");
	is_int(elo_opponent(NULL, true, 900), 900, "rating without difficulty");
	is_int(elo_opponent("Veteran", false, 0), -1, "difficulty is case-sensitive");
	is_int(elo_opponent("expert", false, 0), -1, "unknown difficulty");
	is_int(elo_opponent(NULL, false, 0), -1, "no difficulty, no rating");

	is_int(elo_round(2.5), 3, "round 2.5 -> 3");
	is_int(elo_round(-2.5), -3, "round -2.5 -> -3");
	is_int(elo_round(2.4999), 2, "round 2.4999 -> 2");
	is_int(elo_round(0.49999999999999994), 0, "round just below 0.5 -> 0");
	is_int(elo_round(-0.5), -1, "round -0.5 -> -1");
	is_int(elo_round(1072.508), 1073, "round 1072.508");
	return tap_done();
}
