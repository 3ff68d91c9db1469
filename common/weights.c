/*
 * weights: capped proportional weights in exact integer arithmetic (see
 * weights.h for the rule, the special cases and the rounding).
 *
 * Sizes: scores sum to at most 2^63; cap_den and scale are at most 10^9. A
 * numerator x_i is at most cap_den * R <= 10^9 * 2^63 < 2^93, and x_i * scale
 * < 2^123, so every product fits in unsigned 128 bits.
 */
#include "weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

typedef weights_u128 u128;

struct item {
	int64_t score;
	size_t idx;
};

/* Descending score, then ascending index: a total order, so qsort is deterministic. */
static int by_score_desc(const void *pa, const void *pb)
{
	const struct item *a = pa, *b = pb;
	if (a->score != b->score)
		return a->score > b->score ? -1 : 1;
	return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* Descending remainder, then ascending index. */
struct rem {
	u128 rem;
	size_t idx;
};

static int by_rem_desc(const void *pa, const void *pb)
{
	const struct rem *a = pa, *b = pb;
	if (a->rem != b->rem)
		return a->rem > b->rem ? -1 : 1;
	return a->idx < b->idx ? -1 : a->idx > b->idx;
}

u128 weights_gcd(u128 a, u128 b)
{
	while (a) {
		u128 t = b % a;
		b = a;
		a = t;
	}
	return b;
}

char *weights_units_str(uint64_t units, char *buf)
{
	snprintf(buf, 32, "%llu.%09llu", (unsigned long long)(units / WEIGHTS_SCALE),
	         (unsigned long long)(units % WEIGHTS_SCALE));
	return buf;
}

char *weights_u128_str(u128 v, char *buf)
{
	char tmp[48];
	int n = 0;
	do {
		tmp[n++] = (char)('0' + (int)(v % 10));
		v /= 10;
	} while (v);
	for (int i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	buf[n] = '\0';
	return buf;
}

int weights_parse_cap(const char *text, uint64_t *num, uint64_t *den)
{
	uint64_t n = 0, d = 1;
	int digits = 0, places = 0;
	const char *p = text;
	if (!p || !*p)
		return -1;
	while (*p >= '0' && *p <= '9') {
		if (++digits > 2)
			return -1;
		n = n * 10 + (uint64_t)(*p++ - '0');
	}
	if (*p == '.') {
		p++;
		while (*p >= '0' && *p <= '9') {
			if (++places > 9)
				return -1;
			n = n * 10 + (uint64_t)(*p++ - '0');
			d *= 10;
			digits++;
		}
	}
	if (*p || digits == 0 || n == 0 || n > d)
		return -1;
	*num = n;
	*den = d;
	return 0;
}

int weights_capped(const int64_t *scores, size_t n, uint64_t cap_num, uint64_t cap_den,
                   uint64_t scale, struct weights_out *out)
{
	if (!out || !out->units || (n && !scores) || cap_num == 0 || cap_den == 0 ||
	    cap_num > cap_den || cap_den > WEIGHTS_MAX_DEN || scale == 0 || scale > WEIGHTS_MAX_DEN)
		return -1;
	uint64_t total = 0;
	size_t positive = 0;
	for (size_t i = 0; i < n; i++) {
		if (scores[i] < 0 || (uint64_t)scores[i] > (uint64_t)INT64_MAX - total)
			return -1;
		total += (uint64_t)scores[i];
		positive += scores[i] > 0;
	}
	out->positive = positive;
	out->capped = 0;
	if (n == 0) {
		out->den = 0;
		out->cap_num = cap_num;
		out->cap_den = cap_den;
		return 0;
	}

	struct item *it = xcalloc(n, sizeof *it);
	u128 *x = xcalloc(n, sizeof *x);
	struct rem *rm = xcalloc(n, sizeof *rm);
	u128 den;

	if (positive == 0) {
		/* Nobody scored: an equal split. */
		for (size_t i = 0; i < n; i++)
			x[i] = 1;
		den = n;
		out->cap_num = cap_num;
		out->cap_den = cap_den;
	} else {
		/* A cap below 1/m cannot be met: raise it to 1/m. */
		if ((u128)positive * cap_num < cap_den) {
			cap_num = 1;
			cap_den = positive;
		}
		uint64_t g = (uint64_t)weights_gcd(cap_num, cap_den);
		cap_num /= g;
		cap_den /= g;
		for (size_t i = 0; i < n; i++)
			it[i] = (struct item){ scores[i], i };
		qsort(it, n, sizeof *it, by_score_desc);
		/* The smallest k whose largest uncapped weight is within the cap. */
		size_t k = 0;
		u128 rest = total;                  /* R_k: the scores from position k on */
		for (; k < positive; k++) {
			u128 left = (u128)k * cap_num;   /* k * cap, in units of 1/cap_den */
			if (left >= cap_den)
				break;                   /* cannot happen (see weights.h); be safe */
			if ((cap_den - left) * (u128)it[k].score <= (u128)cap_num * rest)
				break;
			rest -= (u128)it[k].score;
		}
		den = (u128)cap_den * rest;
		for (size_t j = 0; j < n; j++) {
			size_t i = it[j].idx;
			if (j < k)
				x[i] = (u128)cap_num * rest;
			else
				x[i] = ((u128)cap_den - (u128)k * cap_num) * (u128)it[j].score;
		}
		out->capped = k;
		out->cap_num = cap_num;
		out->cap_den = cap_den;
	}

	/* Largest remainder rounding to units of 1/scale. */
	uint64_t given = 0;
	for (size_t i = 0; i < n; i++) {
		u128 v = x[i] * scale;
		out->units[i] = (uint64_t)(v / den);
		given += out->units[i];
		rm[i] = (struct rem){ v % den, i };
		if (out->num)
			out->num[i] = x[i];
	}
	qsort(rm, n, sizeof *rm, by_rem_desc);
	for (size_t j = 0; given < scale && j < n; j++, given++)
		out->units[rm[j].idx]++;
	out->den = den;
	free(it);
	free(x);
	free(rm);
	return 0;
}
