/*
 * The textbook O(n·m) Levenshtein distance over code points, one row of
 * memory: the reference that the bit-parallel common/fuzzy is checked
 * against by test-fuzzy and the fuzz_fuzzy harness.
 */
#ifndef ARBITER_TEST_LEV_DP_H
#define ARBITER_TEST_LEV_DP_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

__attribute__((unused))
static size_t lev_dp(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
	size_t *row = malloc((nb + 1) * sizeof *row), d;
	if (!row)
		abort();
	for (size_t j = 0; j <= nb; j++)
		row[j] = j;
	for (size_t i = 1; i <= na; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= nb; j++) {
			size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			diag = up;
			row[j] = best;
		}
	}
	d = row[nb];
	free(row);
	return d;
}

#endif
