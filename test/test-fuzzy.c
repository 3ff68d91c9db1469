/*
 * Unit tests for common/fuzzy: normalisation (NFKC, case folding, whitespace),
 * score rounding, invalid UTF-8, and the bit-parallel Levenshtein distance
 * cross-checked against a plain O(nm) dynamic programme on random strings.
 */
#include "fuzzy.h"
#include "lev_dp.h"
#include "tap.h"

#include <stdint.h>
#include <stdlib.h>

/* Normalises s and compares the result with the UTF-8 text want. */
static int norm_is(const char *s, const char *want)
{
	int32_t *a, *b;
	size_t na, nb;
	int same;
	if (fuzzy_normalize(s, strlen(s), &a, &na) < 0)
		return 0;
	/* want is already normal: decode it by normalising too, then compare literally. */
	if (fuzzy_normalize(want, strlen(want), &b, &nb) < 0) {
		free(a);
		return 0;
	}
	same = na == nb && !memcmp(a, b, na * sizeof *a);
	free(a);
	free(b);
	return same;
}

/* Normalises s and compares with the code points want[0..n). */
static int norm_cps(const char *s, size_t len, const int32_t *want, size_t n)
{
	int32_t *a;
	size_t na;
	int same;
	if (fuzzy_normalize(s, len, &a, &na) < 0)
		return 0;
	same = na == n && (n == 0 || !memcmp(a, want, n * sizeof *a));
	if (!same) {
		printf("# got %zu code points:", na);
		for (size_t i = 0; i < na; i++)
			printf(" U+%04X", (unsigned)a[i]);
		printf("\n");
	}
	free(a);
	return same;
}

static int score_of(const char *a, const char *b)
{
	int s = -2;
	if (fuzzy_score(a, strlen(a), b, strlen(b), &s) < 0)
		return -1;
	return s;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void)
{
	uint64_t x = rng_state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

/* Random code point from an alphabet of the given size, spread over the code space. */
static int32_t rand_cp(uint32_t sigma)
{
	uint32_t k = (uint32_t)(rng() % sigma);
	return sigma <= 26 ? (int32_t)('a' + k) : (int32_t)(0x4E00 + (k * 7919u) % 0xC0000u);
}

/* One random pair of lengths from lens[], over an alphabet of size sigma; half the time b is
 * a mutation of a (small distances, long common stretches). Returns 1 if both
 * implementations agree with the DP. */
static int check_pair(const size_t *lens, size_t nlens, uint32_t sigma, int mutate,
                      int32_t *a, int32_t *b, size_t cap)
{
	size_t na = lens[rng() % nlens], nb;
	size_t want, got, rev, port;
	if (rng() % 3) {
		nb = lens[rng() % nlens];
	} else {
		nb = na + rng() % 9;
		nb = nb > 4 ? nb - 4 : 0;
	}
	for (size_t i = 0; i < na; i++)
		a[i] = rand_cp(sigma);
	if (mutate) {
		size_t n = 0;
		for (size_t i = 0; i < na && n + 2 < cap; i++) {
			uint64_t r = rng() % 20;
			if (r == 0)
				continue;                    /* delete */
			if (r == 1)
				b[n++] = rand_cp(sigma);     /* insert */
			b[n++] = r == 2 ? rand_cp(sigma) : a[i];
		}
		nb = n;
	} else {
		for (size_t j = 0; j < nb; j++)
			b[j] = rand_cp(sigma);
	}
	want = lev_dp(a, na, b, nb);
	got = fuzzy_levenshtein(na ? a : NULL, na, nb ? b : NULL, nb);
	rev = fuzzy_levenshtein(b, nb, a, na);
	port = fuzzy_levenshtein_portable(a, na, b, nb);
	if (got != want || rev != want || port != want) {
		diag("mismatch: sigma %u, lengths %zu/%zu: dp %zu, fast %zu/%zu, portable %zu",
		     sigma, na, nb, want, got, rev, port);
		return 0;
	}
	return 1;
}

static void cross_check(void)
{
	static const uint32_t sigmas[] = { 1, 2, 4, 26, 1000, 200000 };
	static const size_t small[] = { 0, 1, 2, 5, 31, 63, 64, 65, 100, 127, 128, 129, 191, 192,
	                                193, 255, 256, 257, 300 };
	/* Around the 8-block (512-row) AVX2 stripe and 4-block portable stripe edges. */
	static const size_t large[] = { 447, 448, 449, 511, 512, 513, 575, 576, 577, 700, 1023,
	                                1024, 1025, 1088, 1300 };
	static int32_t a[1400], b[2800];
	int bad = 0, runs = 0;

	for (int iter = 0; iter < 5000; iter++, runs++)
		bad += !check_pair(small, sizeof small / sizeof small[0],
		                   sigmas[rng() % (sizeof sigmas / sizeof sigmas[0])], iter % 2, a, b, 2800);
	ok(bad == 0, "bit-parallel distance equals the O(nm) DP on %d random pairs up to 300", runs);
	bad = runs = 0;
	for (int iter = 0; iter < 300; iter++, runs++)
		bad += !check_pair(large, sizeof large / sizeof large[0],
		                   sigmas[rng() % (sizeof sigmas / sizeof sigmas[0])], iter % 2, a, b, 2800);
	ok(bad == 0, "bit-parallel distance equals the O(nm) DP on %d random pairs of 447..1300", runs);
}

static void long_check(void)
{
	size_t n = 3000, m = 2500;
	int32_t *a = malloc(n * sizeof *a), *b = malloc(m * sizeof *b);
	for (size_t i = 0; i < n; i++)
		a[i] = rand_cp(4);
	for (size_t j = 0; j < m; j++)
		b[j] = rand_cp(4);
	is_int(fuzzy_levenshtein(a, n, b, m), lev_dp(a, n, b, m),
	       "3000 x 2500 code points over 4 letters (40 blocks)");
	for (size_t j = 0; j < m; j++)
		b[j] = a[j + 250];
	b[1000] = 'z';
	is_int(fuzzy_levenshtein(a, n, b, m), lev_dp(a, n, b, m),
	       "long text vs an edited slice of it");
	is_int(fuzzy_levenshtein_portable(a, n, b, m), lev_dp(a, n, b, m),
	       "long text vs an edited slice of it (portable)");
	free(a);
	free(b);
}

int main(void)
{
	/* Normalisation. */
	ok(norm_is("\xEF\xBC\xA1\xEF\xBC\xA2\xEF\xBC\xA3", "abc"), "full-width ABC = abc");
	ok(norm_is("\xEF\xAC\x81", "fi"), "ligature fi = fi");
	ok(norm_is("Stra\xC3\x9F" "e", "strasse"), "sharp s folds to ss");
	ok(norm_is("\xE1\xBA\x9E", "ss"), "capital sharp s folds to ss");
	ok(norm_is("STRASSE", "stra\xC3\x9F" "e"), "STRASSE = straße after folding");
	{
		static const int32_t e_acute[] = { 0xE9 };
		ok(norm_cps("e\xCC\x81", 3, e_acute, 1), "e + U+0301 composes to U+00E9");
		ok(norm_cps("\xC3\xA9", 2, e_acute, 1), "precomposed e-acute stays U+00E9");
		ok(norm_cps("E\xCC\x81", 3, e_acute, 1), "E + U+0301 composes and folds to U+00E9");
	}
	{
		static const int32_t emoji[] = { 0x1F44D, 0x1F3FD };
		ok(norm_cps("\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", 8, emoji, 2), "emoji + skin tone: 2 code points");
	}
	{
		static const int32_t abc[] = { 'a', ' ', 'b', ' ', 'c' };
		const char *s = "  \tA \t\n\r b\xC2\xA0\xE3\x80\x80" "c\xE2\x80\xA8\xC2\x85 ";
		ok(norm_cps(s, strlen(s), abc, 5), "whitespace runs (tab, newline, NBSP, ideographic space, LS, NEL) collapse, ends trimmed");
	}
	{
		static const int32_t ab[] = { 'a', ' ', 'b' };
		ok(norm_cps("a\xE2\x80\x83\xE2\x80\x83" "b", 8, ab, 3), "em spaces collapse");
		ok(norm_cps("a\x1F" "b", 3, ab, 3), "U+001F unit separator is whitespace");
		static const int32_t zwsp[] = { 'a', 0x200B, 'b' };
		ok(norm_cps("a\xE2\x80\x8B" "b", 5, zwsp, 3), "zero-width space is not whitespace");
	}
	{
		static const int32_t anb[] = { 'a', 0, 'b' };
		ok(norm_cps("a\0b", 3, anb, 3), "embedded NUL is a code point");
	}
	ok(norm_cps("", 0, NULL, 0), "empty string normalises to nothing");
	ok(norm_cps(" \t\n\xE3\x80\x80 ", 7, NULL, 0), "whitespace-only string normalises to nothing");
	ok(norm_is("\xE2\x91\xA0", "1"), "circled digit one = 1 (NFKC)");
	ok(norm_is("\xE2\x84\xAB", "\xC3\xA5"), "Angstrom sign = a-ring");

	/* Invalid UTF-8. */
	{
		static const char *bad[] = {
			"\xFF", "abc\xC3", "\xC0\xAF", "\xE0\x80\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80",
			"\x80", "\xE2\x82", "\xF8\x88\x80\x80\x80",
		};
		static const char *names[] = {
			"0xFF", "truncated 2-byte", "overlong 2-byte", "overlong 3-byte", "surrogate",
			"above U+10FFFF", "lone continuation", "truncated 3-byte", "5-byte form",
		};
		for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
			int32_t *cps = (int32_t *)1;
			size_t n = 99;
			int s = 7;
			is_int(fuzzy_normalize(bad[i], strlen(bad[i]), &cps, &n), -1, "invalid UTF-8 (%s) rejected", names[i]);
			ok(cps == NULL && n == 0, "invalid UTF-8 (%s): outputs cleared", names[i]);
			is_int(fuzzy_score(bad[i], strlen(bad[i]), "x", 1, &s), -1, "score: invalid first (%s)", names[i]);
			is_int(fuzzy_score("x", 1, bad[i], strlen(bad[i]), &s), -1, "score: invalid second (%s)", names[i]);
			is_int(s, 7, "score untouched on error (%s)", names[i]);
		}
	}

	/* Distances. */
	{
		const int32_t k[] = { 'k', 'i', 't', 't', 'e', 'n' }, s[] = { 's', 'i', 't', 't', 'i', 'n', 'g' };
		const int32_t f[] = { 'f', 'l', 'a', 'w' }, l[] = { 'l', 'a', 'w', 'n' };
		is_int(fuzzy_levenshtein(k, 6, s, 7), 3, "kitten/sitting = 3");
		is_int(fuzzy_levenshtein(s, 7, k, 6), 3, "sitting/kitten = 3");
		is_int(fuzzy_levenshtein(f, 4, l, 4), 2, "flaw/lawn = 2");
		is_int(fuzzy_levenshtein(NULL, 0, k, 6), 6, "empty/kitten = 6");
		is_int(fuzzy_levenshtein(k, 6, NULL, 0), 6, "kitten/empty = 6");
		is_int(fuzzy_levenshtein(NULL, 0, NULL, 0), 0, "empty/empty = 0");
		is_int(fuzzy_levenshtein(k, 6, k, 6), 0, "identical = 0");
	}

	/* Scores. */
	is_int(score_of("", ""), 1000, "both empty: 1000");
	is_int(score_of("  ", "\t"), 1000, "both whitespace-only: 1000");
	is_int(score_of("", "abc"), 0, "empty vs abc: 0");
	is_int(score_of("Hello World", "hello   world"), 1000, "case and spacing ignored");
	is_int(score_of("\xEF\xBC\xA8\xEF\xBD\x85\xEF\xBD\x8C\xEF\xBD\x8C\xEF\xBD\x8F", "hello"), 1000, "full-width Hello = hello");
	is_int(score_of("\xEF\xAC\x81nance", "finance"), 1000, "ligature in a word");
	is_int(score_of("Stra\xC3\x9F" "e", "STRASSE"), 1000, "Straße = STRASSE");
	is_int(score_of("cafe\xCC\x81", "caf\xC3\xA9"), 1000, "decomposed vs precomposed accent");
	is_int(score_of("cafe", "caf\xC3\xA9"), 750, "accent is one substitution in 4 code points");
	is_int(score_of("\xF0\x9F\x98\x80", "\xF0\x9F\x98\x83"), 0, "different emoji: 0");
	is_int(score_of("a\xF0\x9F\x98\x80", "a\xF0\x9F\x98\x83"), 500, "emoji counts as one code point");
	is_int(score_of("kitten", "sitting"), 571, "kitten/sitting: 1000 x 4/7 = 571.43 -> 571");
	is_int(score_of("aaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaab"), 938, "937.5 rounds half up to 938");
	is_int(score_of("abcdefgh", "abcdefgX"), 875, "875 exact");
	is_int(score_of("ab", "ba"), 0, "transposition is 2 edits of 2");
	is_int(score_of("abc", "abd"), 667, "666.67 -> 667");
	is_int(score_of("line one\nline two", "line one line two"), 1000, "newline = space");

	cross_check();
	long_check();
	/* Long texts: a shared prefix/suffix is free; a huge differing core is refused (-2)
	 * instead of stalling the caller. */
	{
		size_t n = 1 << 20;
		char *a = malloc(n + 1), *b = malloc(n + 1);
		for (size_t i = 0; i < n; i++)
			a[i] = b[i] = (char)('a' + (rng() % 26));
		a[n] = b[n] = '\0';
		b[n / 2] = b[n / 2] == 'z' ? 'y' : 'z';
		int sc = -1;
		is_int(fuzzy_score(a, n, b, n, &sc), 0, "1 MiB texts differing in one letter compare");
		is_int(sc, 1000, "one substitution in 2^20 code points rounds to 1000");
		for (size_t i = 0; i < n; i++)
			b[i] = (char)('a' + (rng() % 26));
		sc = -1;
		is_int(fuzzy_score(a, n, b, n, &sc), -2, "two unrelated 1 MiB texts exceed the budget");
		is_int(sc, -1, "score untouched when over budget");
		free(a);
		free(b);
	}
	return tap_done();
}
