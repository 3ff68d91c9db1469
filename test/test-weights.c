/* Unit tests for common/weights: the capped redistribution on hand-checked cases (all below
 * the cap, one dominant, many at the cap, ties, one agent, zero scores, an unreachable cap),
 * the largest-remainder rounding, the cap parser, and the defining properties on 2,000 random
 * inputs. test/integration/test_weights_differential.py compares the same code, through
 * `arbiter weights --scores`, with an independent Python implementation. */
#include <stdbool.h>
#include <stdlib.h>

#include "tap.h"
#include "weights.h"

typedef weights_u128 u128;

#define MAXN 64

struct run {
	uint64_t units[MAXN];
	u128 num[MAXN];
	struct weights_out o;
	int rc;
};

static void run(struct run *r, const int64_t *s, size_t n, uint64_t cn, uint64_t cd, uint64_t scale)
{
	memset(r, 0, sizeof *r);
	r->o.units = r->units;
	r->o.num = r->num;
	r->rc = weights_capped(s, n, cn, cd, scale, &r->o);
}

/* Is weight i exactly a / b? */
static int frac_is(const struct run *r, size_t i, u128 a, u128 b)
{
	return r->num[i] * b == a * r->o.den;
}

static void test_cases(void)
{
	struct run r;

	/* All below the cap: plain proportional weights. */
	int64_t below[] = { 140, 130, 120, 110, 100, 90, 80, 70, 60, 50 };   /* total 950 */
	run(&r, below, 10, 15, 100, 1000000000);
	ok(r.rc == 0 && r.o.capped == 0, "all below 15%%: nobody capped");
	ok(frac_is(&r, 0, 14, 95) && frac_is(&r, 9, 1, 19), "all below: weights are score / total");
	/* 10^9 x 14/95 = 147368421.05 (down), 10^9 / 19 = 52631578.95 (up) */
	is_int(r.units[0], 147368421, "small remainder rounds down");
	is_int(r.units[9], 52631579, "large remainder rounds up");

	/* One dominant agent among 10. */
	int64_t dom[] = { 9000, 100, 100, 100, 100, 100, 100, 100, 100, 100 };
	run(&r, dom, 10, 15, 100, 1000000000);
	ok(r.rc == 0 && r.o.capped == 1, "one dominant: one capped");
	ok(frac_is(&r, 0, 15, 100), "dominant gets exactly 15%%");
	ok(frac_is(&r, 1, 85, 900), "the other nine share 85%% equally");
	is_int(r.units[0], 150000000, "dominant: 150,000,000 units");

	/* Many at the cap: 5 big, 5 small; capping the big raises nobody else above. */
	int64_t many[] = { 1000, 1000, 900, 800, 700, 10, 10, 10, 10, 10 };
	run(&r, many, 10, 15, 100, 1000000000);
	ok(r.rc == 0 && r.o.capped == 5, "five capped");
	for (int i = 0; i < 5; i++)
		ok(frac_is(&r, (size_t)i, 15, 100), "big %d at the cap", i);
	ok(frac_is(&r, 5, 25, 500), "small ones share the remaining 25%% equally");

	/* Redistribution that pushes a second agent over the cap (needs a second round). */
	int64_t cascade[] = { 500, 140, 100, 100, 100, 60 };   /* total 1000 */
	run(&r, cascade, 6, 20, 100, 1000000000);
	/* Round 1: 0.5 -> 0.2, excess 0.3 over 500 of score: 140 -> 0.14 + 0.3*140/500 = 0.224 > 0.2.
	 * Final: two capped at 0.2, the rest share 0.6 over 360 of score. */
	ok(r.rc == 0 && r.o.capped == 2, "cascade: the second agent is capped in a later round");
	ok(frac_is(&r, 1, 1, 5) && frac_is(&r, 2, 60, 360) && frac_is(&r, 5, 36, 360),
	   "cascade: the rest share 60%% proportionally");

	/* Ties at the cap boundary: equal scores get equal weights. */
	int64_t ties[] = { 300, 300, 300, 100, 100, 100, 100, 100, 100, 100 };
	run(&r, ties, 10, 15, 100, 1000000000);
	ok(r.rc == 0 && r.o.capped == 3, "three tied leaders are all capped");
	ok(r.units[0] == r.units[1] && r.units[1] == r.units[2], "tied leaders: equal units");
	ok(frac_is(&r, 3, 55, 700), "the seven others share 55%%");
	is_int(r.units[3] + r.units[4] + r.units[5] + r.units[6] + r.units[7] + r.units[8] + r.units[9],
	       550000000, "their units sum to 55%%");
	/* 55/700 = 0.0785714285...: 78571428 each, 4 units left, to the earliest four. */
	is_int(r.units[3], 78571429, "remainder tie: earlier index gets the unit");
	is_int(r.units[9], 78571428, "remainder tie: later index does not");

	/* One agent: the cap is unreachable, it gets everything. */
	int64_t one[] = { 42 };
	run(&r, one, 1, 15, 100, 1000000000);
	ok(r.rc == 0 && frac_is(&r, 0, 1, 1) && r.units[0] == 1000000000, "one agent: weight 1");
	ok(r.o.cap_num == 1 && r.o.cap_den == 1, "one agent: effective cap 1");

	/* Fewer than 1/cap positive scores: each of them gets 1/m. */
	int64_t few[] = { 900, 10, 1, 0, 0 };
	run(&r, few, 5, 15, 100, 1000000000);
	ok(r.rc == 0 && frac_is(&r, 0, 1, 3) && frac_is(&r, 1, 1, 3) && frac_is(&r, 2, 1, 3),
	   "3 positive scores, cap 15%%: 1/3 each");
	ok(frac_is(&r, 3, 0, 1) && r.units[3] == 0, "zero score: zero weight");
	is_int(r.units[0] + r.units[1] + r.units[2], 1000000000, "1/3 units sum to the scale");
	is_int(r.units[0], 333333334, "first third gets the leftover unit");

	/* Zero scores. */
	int64_t zeros[] = { 0, 0, 0, 0 };
	run(&r, zeros, 4, 15, 100, 1000000000);
	ok(r.rc == 0 && frac_is(&r, 0, 1, 4) && r.units[3] == 250000000, "all zero: equal split");
	int64_t somezero[] = { 0, 500, 0, 500, 500, 500, 500, 500, 500, 500 };
	run(&r, somezero, 10, 15, 100, 1000000000);
	ok(r.rc == 0 && r.num[0] == 0 && r.num[2] == 0 && frac_is(&r, 1, 1, 8),
	   "zeros among positives: zero weight, the 8 others 1/8 (under 15%%)");

	/* No agents. */
	run(&r, NULL, 0, 15, 100, 1000000000);
	ok(r.rc == 0 && r.o.den == 0, "no agents: nothing");

	/* Cap 1: plain normalisation. */
	int64_t plain[] = { 3, 1 };
	run(&r, plain, 2, 1, 1, 4);
	ok(r.rc == 0 && r.units[0] == 3 && r.units[1] == 1, "cap 1, scale 4: 3 and 1");

	/* Bad arguments. */
	run(&r, plain, 2, 0, 100, 1000);
	ok(r.rc < 0, "cap 0 refused");
	run(&r, plain, 2, 101, 100, 1000);
	ok(r.rc < 0, "cap above 1 refused");
	run(&r, plain, 2, 1, 10000000000ULL, 1000);
	ok(r.rc < 0, "cap denominator above 10^9 refused");
	int64_t neg[] = { 5, -1 };
	run(&r, neg, 2, 15, 100, 1000);
	ok(r.rc < 0, "negative score refused");
	int64_t huge[] = { INT64_MAX, 1 };
	run(&r, huge, 2, 15, 100, 1000);
	ok(r.rc < 0, "total above INT64_MAX refused");
}

static void test_parse(void)
{
	uint64_t n, d;
	ok(weights_parse_cap("0.15", &n, &d) == 0 && n == 15 && d == 100, "parse 0.15");
	ok(weights_parse_cap("1", &n, &d) == 0 && n == 1 && d == 1, "parse 1");
	ok(weights_parse_cap(".5", &n, &d) == 0 && n == 5 && d == 10, "parse .5");
	ok(weights_parse_cap("0.000000001", &n, &d) == 0 && n == 1 && d == 1000000000, "parse 9 places");
	ok(weights_parse_cap("1.000", &n, &d) == 0, "parse 1.000");
	const char *bad[] = { "", "0", "0.0", "1.5", "2", "-0.1", "0.1x", "0.0000000001", "abc", ".",
	                      "1e-1", " 0.1", NULL };
	for (int i = 0; bad[i]; i++)
		ok(weights_parse_cap(bad[i], &n, &d) < 0, "refuse \"%s\"", bad[i]);
	char buf[48];
	is_str(weights_u128_str((u128)1 << 100, buf), "1267650600228229401496703205376", "u128 to text");
	is_str(weights_u128_str(0, buf), "0", "zero to text");
}

/* The defining properties of the result, checked exactly. */
static int properties(const int64_t *s, size_t n, uint64_t cn, uint64_t cd, const struct run *r,
                      char *why, size_t whylen)
{
	u128 sum = 0;
	uint64_t usum = 0;
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		sum += r->num[i];
		usum += r->units[i];
		m += s[i] > 0;
	}
	if (sum != r->o.den)
		return snprintf(why, whylen, "numerators do not sum to the denominator"), 0;
	if (usum != 1000000000)
		return snprintf(why, whylen, "units sum to %llu", (unsigned long long)usum), 0;
	uint64_t ecn = cn, ecd = cd;
	if ((u128)m * cn < cd) {
		ecn = 1;
		ecd = m;
	}
	for (size_t i = 0; i < n; i++) {
		/* exact value * scale, floor and ceil */
		u128 v = r->num[i] * 1000000000;
		u128 lo = v / r->o.den, hi = lo + (v % r->o.den != 0);
		if (r->units[i] < lo || r->units[i] > hi)
			return snprintf(why, whylen, "units of %zu not a rounding of the exact weight", i), 0;
		if (m && r->num[i] * ecd > (u128)ecn * r->o.den)
			return snprintf(why, whylen, "weight %zu above the cap", i), 0;
		if (m && s[i] == 0 && r->num[i])
			return snprintf(why, whylen, "zero score %zu has weight", i), 0;
	}
	/* Uncapped weights are proportional to their scores; a capped agent scores at least as
	 * much as any uncapped one. */
	for (size_t i = 0; i < n && m; i++)
		for (size_t j = 0; j < n; j++) {
			bool ci = r->num[i] * ecd == (u128)ecn * r->o.den;
			bool cj = r->num[j] * ecd == (u128)ecn * r->o.den;
			if (!ci && !cj && r->num[i] * (u128)s[j] != r->num[j] * (u128)s[i])
				return snprintf(why, whylen, "uncapped %zu and %zu not proportional", i, j), 0;
			if (ci && !cj && s[i] < s[j])
				return snprintf(why, whylen, "capped %zu scores below uncapped %zu", i, j), 0;
		}
	return 1;
}

static void test_random(void)
{
	unsigned seed = 12345;
	int bad = 0;
	char why[200] = "";
	for (int t = 0; t < 2000; t++) {
		srand(seed + (unsigned)t);
		size_t n = 1 + (size_t)(rand() % MAXN);
		int64_t s[MAXN];
		int mode = rand() % 4;
		for (size_t i = 0; i < n; i++) {
			switch (mode) {
			case 0: s[i] = rand() % 100001; break;                    /* window sums, N = 100 */
			case 1: s[i] = rand() % 3 == 0 ? 0 : rand() % 10; break; /* many ties and zeros */
			case 2: s[i] = i == 0 ? 100000 : rand() % 1000; break;   /* one dominant */
			default: s[i] = (int64_t)(rand() % 5) * 25000; break;    /* ties at few levels */
			}
		}
		uint64_t caps[][2] = { { 15, 100 }, { 1, 3 }, { 5, 100 }, { 1, 1 }, { 333333333, 1000000000 } };
		int c = rand() % 5;
		struct run r;
		run(&r, s, n, caps[c][0], caps[c][1], 1000000000);
		if (r.rc != 0 || !properties(s, n, caps[c][0], caps[c][1], &r, why, sizeof why)) {
			if (!bad++)
				diag("case %d (n %zu, cap %llu/%llu): %s", t, n, (unsigned long long)caps[c][0],
				     (unsigned long long)caps[c][1], r.rc ? "error" : why);
		}
	}
	is_int(bad, 0, "2,000 random inputs: sums exact, within the cap, proportional, rounded");
}

static void test_units_str(void)
{
	char b[32];
	is_str(weights_units_str(150000000, b), "0.150000000", "units as 9 decimals");
	is_str(weights_units_str(WEIGHTS_SCALE, b), "1.000000000", "a whole weight");
	is_str(weights_units_str(7, b), "0.000000007", "the smallest unit");
}

int main(void)
{
	test_units_str();
	test_cases();
	test_parse();
	test_random();
	return tap_done();
}
