/*
 * Benchmark for fuzzy_score (normalisation + bit-parallel Levenshtein) on two
 * long random texts: small alphabet (DNA), ASCII letters and spaces, CJK, and a
 * near-copy (1% edits). Prints each case's fuzzy_score time (normalisation + distance,
 * AVX2 when available), the portable distance's time, and the process's max RSS.
 * Usage: bench-fuzzy [code points per text, default 100000]
 */
#include "fuzzy.h"
#include "util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint64_t rng(void)
{
	uint64_t x = rng_state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

static size_t put_utf8(char *o, uint32_t c)
{
	if (c < 0x80) { o[0] = (char)c; return 1; }
	if (c < 0x800) { o[0] = (char)(0xC0 | c >> 6); o[1] = (char)(0x80 | (c & 0x3F)); return 2; }
	if (c < 0x10000) {
		o[0] = (char)(0xE0 | c >> 12); o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
		o[2] = (char)(0x80 | (c & 0x3F)); return 3;
	}
	o[0] = (char)(0xF0 | c >> 18); o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
	o[2] = (char)(0x80 | ((c >> 6) & 0x3F)); o[3] = (char)(0x80 | (c & 0x3F)); return 4;
}

enum kind { DNA, ASCII, CJK };

static uint32_t pick(enum kind k)
{
	static const char dna[] = "acgt";
	switch (k) {
	case DNA: return (uint32_t)dna[rng() % 4];
	case ASCII: { uint64_t r = rng() % 27; return r == 26 ? ' ' : (uint32_t)('a' + r); }
	default: return 0x4E00 + (uint32_t)(rng() % 20000);
	}
}

/* n code points of kind k; if base is given, a copy of it with ~1% random edits. */
static char *make_text(enum kind k, size_t n, const char *base, size_t *len)
{
	char *o = xmalloc(n * 4 + 1);
	size_t w = 0;
	if (!base) {
		uint32_t prev = 0;
		for (size_t i = 0; i < n; i++) {
			uint32_t c = pick(k);
			if (c == ' ' && (prev == ' ' || i == 0 || i + 1 == n))
				c = 'e';          /* keep the normalised length at n */
			w += put_utf8(o + w, c);
			prev = c;
		}
	} else {
		size_t blen = strlen(base), i = 0;
		while (i < blen && w < n * 4 - 8) {
			size_t cl = ((unsigned char)base[i] < 0x80) ? 1 : ((unsigned char)base[i] < 0xE0) ? 2
			          : ((unsigned char)base[i] < 0xF0) ? 3 : 4;
			uint64_t r = rng() % 300;
			if (r == 0) {                       /* substitute */
				w += put_utf8(o + w, k == ASCII ? 'q' : pick(k));
			} else if (r == 1) {                /* delete */
			} else {
				memcpy(o + w, base + i, cl);
				w += cl;
				if (r == 2)                 /* insert */
					w += put_utf8(o + w, k == ASCII ? 'x' : pick(k));
			}
			i += cl;
		}
	}
	o[w] = '\0';
	*len = w;
	return o;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static long max_rss_kb(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

static int run(const char *name, enum kind k, size_t n, int near_copy)
{
	size_t la, lb, na, nb, d;
	char *a = make_text(k, n, NULL, &la);
	char *b = near_copy ? make_text(k, n, a, &lb) : make_text(k, n, NULL, &lb);
	int32_t *ca, *cb;
	int score = -1;
	double t0 = now(), t, tp;
	if (fuzzy_score(a, la, b, lb, &score) < 0) {
		fprintf(stderr, "%s: fuzzy_score failed\n", name);
		return 1;
	}
	t = now() - t0;
	/* The portable (non-SIMD) distance alone, on the normalised texts. */
	if (fuzzy_normalize(a, la, &ca, &na) < 0 || fuzzy_normalize(b, lb, &cb, &nb) < 0)
		return 1;
	t0 = now();
	d = fuzzy_levenshtein_portable(ca, na, cb, nb);
	tp = now() - t0;
	printf("%-28s %6zu+%6zu bytes  score %4d  fuzzy_score %.3f s  (portable distance %zu: %.3f s)"
	       "  max RSS %ld KiB\n", name, la, lb, score, t, d, tp, max_rss_kb());
	free(ca);
	free(cb);
	free(a);
	free(b);
	return 0;
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
	int rc = 0;
	printf("fuzzy_score on two texts of %zu code points each (before normalisation)\n", n);
	printf("max RSS at start: %ld KiB\n", max_rss_kb());
	rc |= run("DNA (4 letters)", DNA, n, 0);
	rc |= run("ASCII letters + spaces", ASCII, n, 0);
	rc |= run("CJK (20000 ideographs)", CJK, n, 0);
	rc |= run("ASCII near-copy (1% edits)", ASCII, n, 1);
	rc |= run("CJK near-copy (1% edits)", CJK, n, 1);
	return rc;
}
