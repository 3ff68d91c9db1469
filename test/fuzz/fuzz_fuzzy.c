/*
 * libFuzzer harness for common/fuzzy: the input is split at its first 0xFF byte (or in
 * the middle) into two strings. Checks: invalid UTF-8 is reported, never crashes;
 * scores are in 0..1000 and symmetric; the fast and portable distances agree with a
 * plain dynamic programme for short inputs.
 */
#include "fuzzy.h"
#include "../lev_dp.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *cut = memchr(data, 0xFF, size);
	size_t la = cut ? (size_t)(cut - data) : size / 2;
	const char *a = (const char *)data, *b = (const char *)data + la + (cut ? 1 : 0);
	size_t lb = size - la - (cut ? 1 : 0);
	int32_t *ca, *cb;
	size_t na, nb;
	int s1 = -5, s2 = -5, ra, rb;

	ra = fuzzy_normalize(a, la, &ca, &na);
	rb = fuzzy_normalize(b, lb, &cb, &nb);
	if ((fuzzy_score(a, la, b, lb, &s1) < 0) != (ra < 0 || rb < 0))
		abort();
	if (ra == 0 && rb == 0) {
		size_t d = fuzzy_levenshtein(ca, na, cb, nb);
		if (fuzzy_score(b, lb, a, la, &s2) < 0 || s1 != s2 || s1 < 0 || s1 > 1000)
			abort();
		if (d != fuzzy_levenshtein_portable(cb, nb, ca, na))
			abort();
		if (na * nb <= 1u << 22 && d != lev_dp(ca, na, cb, nb))
			abort();
		/* Normalisation is idempotent on its own output's shape: no leading/trailing or
		 * doubled spaces. */
		for (size_t i = 0; i < na; i++)
			if (ca[i] == ' ' && (i == 0 || i + 1 == na || ca[i + 1] == ' '))
				abort();
	}
	free(ca);
	free(cb);
	return 0;
}
