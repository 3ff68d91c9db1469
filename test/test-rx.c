/*
 * Unit tests for common/rx: a table of (pattern, text, expected) covering the
 * documented subset, Unicode, anchors, word boundaries, counted repeats and
 * case-insensitivity; compile errors with their positions; the size limits;
 * and the work budget on hostile patterns (bounded, never exponential: a
 * pattern that backtracking engines take exponential time on finishes within
 * a work count linear in the text).
 */
#include "rx.h"
#include "tap.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

struct mcase { const char *pat; bool icase; const char *text; int want; };

static const struct mcase mcases[] = {
	{ "abc", false, "xxabcxx", 1 },
	{ "abc", false, "xxabxcx", 0 },
	{ "", false, "", 1 },
	{ "", false, "abc", 1 },
	{ "a|b", false, "ccb", 1 },
	{ "a|b", false, "ccc", 0 },
	{ "^ab", false, "ab", 1 },
	{ "^ab", false, "cab", 0 },
	{ "ab$", false, "cab", 1 },
	{ "ab$", false, "abc", 0 },
	{ "^$", false, "", 1 },
	{ "^$", false, "x", 0 },
	{ "^a*$", false, "aaaa", 1 },
	{ "^a+$", false, "", 0 },
	{ "^a?b$", false, "b", 1 },
	{ "^a{2}$", false, "aa", 1 },
	{ "^a{2}$", false, "aaa", 0 },
	{ "^a{2,}$", false, "aaaaa", 1 },
	{ "^a{2,3}$", false, "aaaa", 0 },
	{ "^a{0,1}b", false, "ab", 1 },
	{ "^(ab)+$", false, "ababab", 1 },
	{ "^(ab)+$", false, "ababa", 0 },
	{ "^(?:a|bc)*d$", false, "abcabcd", 1 },
	{ "a.c", false, "a\xC3\xA9" "c", 1 },           /* . is one code point */
	{ "a.c", false, "a\nc", 0 },
	{ "^[a-c]+$", false, "abcab", 1 },
	{ "^[a-c]+$", false, "abcd", 0 },
	{ "^[^0-9]+$", false, "abc", 1 },
	{ "^[^0-9]+$", false, "ab1", 0 },
	{ "[\\d]", false, "x7", 1 },
	{ "^\\d+$", false, "\xD9\xA3\xD9\xA4", 1 },     /* Arabic-Indic digits are Nd */
	{ "^\\w+$", false, "na\xC3\xAFve_1", 1 },
	{ "\\W", false, "abc", 0 },
	{ "\\s", false, "a\tb", 1 },
	{ "\\S", false, "  ", 0 },
	{ "\\bcat\\b", false, "a cat!", 1 },
	{ "\\bcat\\b", false, "concat", 0 },
	{ "\\Bcat", false, "concat", 1 },
	{ "\\bcat", false, "cat", 1 },
	{ "cat\\b", false, "cat", 1 },
	{ "\\b\xC3\xA9t\xC3\xA9\\b", false, "un \xC3\xA9t\xC3\xA9 chaud", 1 },
	{ "a\\.b", false, "a.b", 1 },
	{ "a\\.b", false, "axb", 0 },
	{ "\\(x\\)", false, "f(x)", 1 },
	{ "[]a]", false, "]", 1 },
	{ "[a-]", false, "-", 1 },
	{ "x*?y", false, "xxy", 1 },                  /* lazy accepted */
	{ "HELLO", true, "say hello", 1 },
	{ "[A-Z]+", true, "abc", 1 },
	{ "\xC3\x89" "COLE", true, "\xC3\xA9" "cole", 1 },
	{ "hello", false, "HELLO", 0 },
	{ "^(a|aa)+$", false, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 1 },
	{ "^(a+)+$", false, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab", 0 },
	{ "(x+x+)+y", false, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 0 },
	{ "\\d{3}-\\d{4}", false, "call 555-1234 now", 1 },
	{ "q", false, "\xFF\xFEq", 1 },                /* invalid UTF-8 bytes are skipped over */
	/* \b next to a non-ASCII letter within 4 bytes of the start (the skip to the literal must
	 * look back at the whole code point before it). */
	{ "\\ba", false, "\xC3\xA9" "a", 0 },
	{ "\\ba", false, "x\xC3\xA9" "a", 0 },
	{ "\\Ba", false, "\xC3\xA9" "a", 1 },
	{ "\\ba", false, "\xE4\xB8\x80" "a", 0 },         /* U+4E00 is a letter */
	{ "\\ba", false, "\xF0\x9D\x90\x80" "a", 0 },     /* U+1D400 is a letter */
	{ "\\ba", false, "\xC2\xA0" "a", 1 },             /* U+00A0 is not */
	{ "\\ba", false, "\xC3\xA9\xA9" "a", 1 },         /* a stray continuation byte: U+FFFD */
	{ "\\bab", false, "\xC3\xA9" "ab \xC3\xA9" "ab", 0 },
	/* Case-insensitive classes fold like literals: Kelvin, Ohm and Angstrom signs, long s. */
	{ "K", true, "\xE2\x84\xAA", 1 },
	{ "[K]", true, "\xE2\x84\xAA", 1 },
	{ "[A-Z]", true, "\xE2\x84\xAA", 1 },
	{ "[a-z]", true, "\xE2\x84\xAA", 1 },
	{ "[^K]", true, "\xE2\x84\xAA", 0 },
	{ "[^A-Z]", true, "\xE2\x84\xAA", 0 },
	{ "[\xE2\x84\xAA]", true, "k", 1 },
	{ "[\xE2\x84\xAA]", true, "K", 1 },
	{ "[\xE2\x84\xAA]", false, "K", 0 },
	{ "[K]", false, "\xE2\x84\xAA", 0 },
	{ "\xCE\xA9", true, "\xE2\x84\xA6", 1 },          /* Greek capital omega, Ohm sign */
	{ "[\xCE\xA9]", true, "\xE2\x84\xA6", 1 },
	{ "[\xCF\x89]", true, "\xE2\x84\xA6", 1 },
	{ "[\xCE\x91-\xCE\xA9]", true, "\xE2\x84\xA6", 1 },
	{ "[\xE2\x84\xA6]", true, "\xCF\x89", 1 },
	{ "[\xC3\x85]", true, "\xE2\x84\xAB", 1 },        /* A with ring, Angstrom sign */
	{ "[\xC3\xA5]", true, "\xE2\x84\xAB", 1 },
	{ "[\xC3\x80-\xC3\x96]", true, "\xE2\x84\xAB", 1 },
	{ "[^\xC3\xA5]", true, "\xE2\x84\xAB", 0 },
	{ "[S]", true, "\xC5\xBF", 1 },                     /* long s folds to s */
	{ "S", true, "\xC5\xBF", 1 },
	{ "[a-z]+", true, "\xC3\x89", 0 },
	{ "^[\xC3\xA0-\xC3\xBE]+$", true, "\xC3\x89" "COLE", 0 },
	{ "^[\xC3\xA0-\xC3\xBE]$", true, "\xC3\x89", 1 },
};

struct ecase { const char *pat; const char *err; };

static const struct ecase ecases[] = {
	{ "(", "position 1: unclosed '('" },
	{ "a)", "position 2: unmatched ')'" },
	{ "*a", "position 1: '*' has nothing to repeat" },
	{ "a**", "position 3: multiple repeat" },
	{ "a{2,1}", "position 2: repeat {2,1} has max below min" },
	{ "a{1001}", "position 2: repeat count above 1000" },
	{ "a{x}", "position 2: '{' must start a repeat" },
	{ "[abc", "position 1: unterminated character class" },
	{ "[z-a]", "position 3: range out of order" },
	{ "\\1", "position 1: unsupported escape '\\1'" },
	{ "\\p{L}", "position 1: unsupported escape '\\p'" },
	{ "(?=a)", "position 1: unsupported group '(?='" },
	{ "(?<n>a)", "position 1: unsupported group '(?<'" },
	{ "a++", "position 3: possessive quantifiers are not supported" },
	{ "a\\", "position 2: pattern ends after '\\'" },
	{ "[\\b]", "position 2: unsupported escape '\\b'" },
	{ "(a{1000}){3}", "pattern too large" },
};

static double cpu_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* CPU ms of the best of three searches of pat over text with budget 6 million (an
 * evaluation's regex budget, SCORE_RX_BUDGET); the steps taken go to *steps. */
static double time_search(const char *pat, bool icase, const char *text, size_t n, uint64_t *steps)
{
	char err[200];
	struct rx *r;
	double best = 1e300;
	if (rx_compile(pat, strlen(pat), icase, &r, err, sizeof err) < 0) {
		ok(0, "timed pattern compiles (%s)", err);
		return 0;
	}
	for (int k = 0; k < 3; k++) {
		uint64_t b = 6000000;
		double t0 = cpu_ms();
		rx_search(r, text, n, &b);
		double t = cpu_ms() - t0;
		best = t < best ? t : best;
		*steps = 6000000 - b;
	}
	rx_free(r);
	return best;
}

/* The costliest pattern the limits allow: a negated class of as many distinct ranges as fit
 * in RX_MAX_PATTERN (63 ASCII letters and digits, then every other 2-byte code point from
 * U+0100), repeated 999 times and followed by a letter the text lacks, case-insensitive, over
 * 100,000 CJK characters (all match, so 999 threads test the class at every character). A class test must cost about what a
 * one-range class costs (it was a walk over every range, charged as one step: ≈ 3.5 s for
 * the budget's 6 million steps). Compared as a ratio of CPU times, so a loaded machine does
 * not fail it; the figure is printed for common/README.md "Regular expressions". */
static void worst_class(void)
{
	char *pat = xmalloc(RX_MAX_PATTERN + 1);
	size_t n = 0;
	memcpy(pat, "[^", 2);
	n = 2;
	static const char ascii[] = "!#%')+-/13579;=?ACEGIKMOQSUWY[]_acegikmoqsuwy{}~";
	for (const char *a = ascii; *a; a++) {
		if (*a == ']' || *a == '[' || *a == '-' || *a == '^')
			pat[n++] = '\\';
		pat[n++] = *a;
	}
	for (int32_t c = 0x100; n + 2 + 7 <= RX_MAX_PATTERN; c += 2) {
		pat[n++] = (char)(0xC0 | (c >> 6));
		pat[n++] = (char)(0x80 | (c & 0x3F));
	}
	memcpy(pat + n, "]{999}b", 8);
	n += 7;
	ok(n <= RX_MAX_PATTERN, "worst pattern within the byte limit (%zu bytes)", n);
	/* The charge: a test of a class of 256 ranges or more past the ASCII bitmap is 3 steps. */
	struct rx *r1, *r2;
	char err[200];
	if (rx_compile(pat, n - 6, false, &r1, err, sizeof err) == 0 &&
	    rx_compile("[^a]", 4, false, &r2, err, sizeof err) == 0) {
		uint64_t b1 = 1000, b2 = 1000;
		is_int(rx_search(r1, "\xE4\xB8\x80", 3, &b1), 1, "the worst class matches U+4E00");
		is_int(rx_search(r2, "\xE4\xB8\x80", 3, &b2), 1, "[^a] matches U+4E00");
		is_int((long long)(b2 - b1), 2, "a class test over many ranges costs 2 more steps");
		b1 = b2 = 1000;
		is_int(rx_search(r1, "z", 1, &b1), 1, "the worst class matches z");
		is_int(rx_search(r2, "z", 1, &b2), 1, "[^a] matches z");
		is_int((long long)(b2 - b1), 0, "nothing more for an ASCII character (the bitmap)");
		rx_free(r1);
		rx_free(r2);
	} else {
		ok(0, "worst class compiles: %s", err);
	}
	size_t tn = 100000 * 3;
	char *text = xmalloc(tn);
	for (size_t i = 0; i < tn; i += 3)
		memcpy(text + i, "\xE4\xB8\x80", 3);   /* U+4E00 */
	/* The same length of one repeated letter: 1,016 ranges before merging. */
	char *dup = xmalloc(RX_MAX_PATTERN + 1);
	memcpy(dup, "[^", 2);
	memset(dup + 2, 'a', RX_MAX_PATTERN - 9);
	memcpy(dup + RX_MAX_PATTERN - 7, "]{999}b", 8);
	uint64_t s1 = 0, s2 = 0, s3 = 0, s4 = 0;
	double one = time_search("[^a]{999}b", true, text, tn, &s1);
	double worst = time_search(pat, true, text, tn, &s2);
	double worst_cs = time_search(pat, false, text, tn, &s3);
	double same = time_search(dup, true, text, tn, &s4);
	ok(s1 >= 5999000 && s2 >= 5999000 && s3 >= 5999000 && s4 >= 5999000,
	   "all spend the whole budget (%llu %llu %llu %llu steps)", (unsigned long long)s1,
	   (unsigned long long)s2, (unsigned long long)s3, (unsigned long long)s4);
	diag("6M steps: one-range class %.1f ms CPU; distinct ranges %.1f ms (icase), %.1f ms; "
	     "one letter repeated %.1f ms (icase)", one, worst, worst_cs, same);
	ok(worst <= 4 * one + 5, "distinct ranges cost about a one-range class (%.1f vs %.1f ms)",
	   worst, one);
	ok(worst_cs <= 4 * one + 5, "distinct ranges, case-sensitive (%.1f vs %.1f ms)", worst_cs, one);
	ok(same <= 4 * one + 5, "one letter repeated (%.1f vs %.1f ms)", same, one);
	free(dup);
	free(text);
	free(pat);
}

/* Patterns that take few steps per text position (an assertion failing at the start, a
 * literal that never matches) over 1 MiB: a position costs decoding, folding and word tests
 * whatever runs there, so it must be charged (RX_POS_STEPS) or such a pattern spends far more
 * CPU per step than the dense ones (it was 13-17 ns per step against 2.5: 6 million steps of
 * `\bq` over CJK text took about 100 ms). Each must cost at most 3 times the CPU per step of
 * a dense one-range class; the costliest 6 million steps seen is printed for the README. */
static void sparse_steps(void)
{
	size_t n = (size_t)1 << 20, cn = n - n % 3;
	char *cjk = xmalloc(n), *asc = xmalloc(n), *lat = xmalloc(n);
	for (size_t i = 0; i < cn; i += 3)
		memcpy(cjk + i, "\xE4\xB8\x80", 3);
	memset(asc, 'a', n);
	for (size_t i = 0; i < n; i += 2)
		memcpy(lat + i, "\xC3\xA9", 2);
	uint64_t s0;
	double ref = time_search("[^a]{999}b", true, cjk, 300000, &s0) / (double)s0;
	static const struct { const char *pat; bool icase; int text; } cases[] = {
		{ "\\bq", true, 0 }, { "\\b.q", false, 0 }, { "\\Bq", true, 0 }, { "q", true, 0 },
		{ "[^x]q", true, 0 }, { "$q", true, 0 }, { "ab", true, 1 }, { "a\\b", false, 1 },
		{ "[\xC3\xA9]k", true, 2 }, { "\\b.k", false, 2 },
	};
	double worst = ref;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const char *t = cases[i].text == 0 ? cjk : cases[i].text == 1 ? asc : lat;
		uint64_t st;
		double per = time_search(cases[i].pat, cases[i].icase, t, cases[i].text ? n : cn, &st) /
		             (double)(st ? st : 1);
		ok(per <= 3 * ref, "/%s/%s: %.2f ns per step (%llu steps), dense class %.2f",
		   cases[i].pat, cases[i].icase ? "i" : "", per * 1e6, (unsigned long long)st,
		   ref * 1e6);
		worst = per > worst ? per : worst;
	}
	diag("costliest 6 million steps seen: %.1f ms CPU", worst * 6e6);
	free(cjk);
	free(asc);
	free(lat);
}

int main(void)
{
	char err[200];
	struct rx *r;
	for (size_t i = 0; i < sizeof mcases / sizeof mcases[0]; i++) {
		const struct mcase *c = &mcases[i];
		if (rx_compile(c->pat, strlen(c->pat), c->icase, &r, err, sizeof err) < 0) {
			ok(0, "/%s/ compiles (%s)", c->pat, err);
			continue;
		}
		uint64_t budget = 1000000;
		is_int(rx_search(r, c->text, strlen(c->text), &budget), c->want, "/%s/%s on \"%s\"",
		       c->pat, c->icase ? "i" : "", c->text);
		rx_free(r);
	}
	for (size_t i = 0; i < sizeof ecases / sizeof ecases[0]; i++) {
		const struct ecase *c = &ecases[i];
		r = (struct rx *)1;
		is_int(rx_compile(c->pat, strlen(c->pat), false, &r, err, sizeof err), -1,
		       "/%s/ rejected", c->pat);
		ok(r == NULL, "/%s/: *out NULL", c->pat);
		ok(strstr(err, c->err) != NULL, "/%s/: message '%s' contains '%s'", c->pat, err, c->err);
	}
	/* Limits: pattern length, NUL byte, program size. */
	char *big = xmalloc(RX_MAX_PATTERN + 2);
	memset(big, 'a', RX_MAX_PATTERN + 1);
	is_int(rx_compile(big, RX_MAX_PATTERN + 1, false, &r, err, sizeof err), -1, "pattern over the byte limit");
	ok(strstr(err, "longer than 1024 bytes") != NULL, "length message: %s", err);
	is_int(rx_compile(big, RX_MAX_PATTERN, false, &r, err, sizeof err), 0, "1024-byte pattern compiles");
	rx_free(r);
	free(big);
	is_int(rx_compile("a\0b", 3, false, &r, err, sizeof err), -1, "NUL in pattern rejected");
	is_int(rx_compile("[a-z]{1000}x", 12, false, &r, err, sizeof err), 0, "{1000} of a class compiles");
	ok(rx_prog_size(r) <= RX_MAX_PROG, "program within the limit (%zu)", rx_prog_size(r));

	/* Budget: 1 MiB of 'a' against [a-z]{1000}x runs out of budget (every state is live), and
	 * reports -1 rather than running long; the budget left is 0. */
	size_t n = (size_t)1 << 20;
	char *text = xmalloc(n);
	memset(text, 'a', n);
	uint64_t budget = 5000000;
	is_int(rx_search(r, text, n, &budget), -1, "hostile pattern on 1 MiB: budget exhausted");
	is_int((long long)budget, 0, "budget reported spent");
	rx_free(r);
	/* Classic catastrophic patterns stay linear: work ≤ c × text × program. */
	static const char *const evil[] = { "^(a+)+$", "^(a|a)*$", "^(a|aa)+b$", "(.*a){12}x" };
	for (size_t i = 0; i < sizeof evil / sizeof evil[0]; i++) {
		ok(rx_compile(evil[i], strlen(evil[i]), false, &r, err, sizeof err) == 0, "/%s/ compiles", evil[i]);
		size_t tn = 100000;
		text[tn - 1] = '!';
		uint64_t b0 = (uint64_t)1 << 40, b = b0;
		int m = rx_search(r, text, tn, &b);
		ok(m == 0, "/%s/ on 100k a's + '!': no match", evil[i]);
		uint64_t work = b0 - b;
		ok(work <= (uint64_t)4 * tn * (rx_prog_size(r) + 1), "/%s/: work %llu is linear", evil[i],
		   (unsigned long long)work);
		text[tn - 1] = 'a';
		rx_free(r);
	}
	/* A literal-led pattern skips ahead with memchr: tiny work on a long text. */
	ok(rx_compile("needle", 6, false, &r, err, sizeof err) == 0, "literal compiles");
	memcpy(text + n - 6, "needle", 6);
	budget = 1000000;
	is_int(rx_search(r, text, n, &budget), 1, "needle at the end of 1 MiB found");
	ok(1000000 - budget < 100, "found with little work (%llu)",
	   (unsigned long long)(1000000 - budget));
	rx_free(r);
	free(text);
	worst_class();
	sparse_steps();
	return tap_done();
}
