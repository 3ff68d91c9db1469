/*
 * Exact decimals: dec6 fixed point (weights, weighted scores, totals) and
 * dec_num (any JSON number as mantissa × 10^exp from its shortest round-trip
 * decimal text). See dec.h.
 */
#include "dec.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int64_t pow10_i64[19] = {
	1LL, 10LL, 100LL, 1000LL, 10000LL, 100000LL, 1000000LL, 10000000LL, 100000000LL,
	1000000000LL, 10000000000LL, 100000000000LL, 1000000000000LL, 10000000000000LL,
	100000000000000LL, 1000000000000000LL, 10000000000000000LL, 100000000000000000LL,
	1000000000000000000LL,
};

static void strip(struct dec_num *x)
{
	if (x->m == 0) {
		x->e = 0;
		return;
	}
	while (x->m % 10 == 0) {
		x->m /= 10;
		x->e++;
	}
}

/* Integers that a double holds exactly need no printf. */
static bool small_integer(double d, struct dec_num *out)
{
	if (d != d || d < -9007199254740992.0 || d > 9007199254740992.0 || d != (double)(int64_t)d)
		return false;
	out->m = (int64_t)d;
	out->e = 0;
	return true;
}

int dec_num_from_double(double d, struct dec_num *out)
{
	char buf[40];
	if (!isfinite(d))
		return -1;
	if (small_integer(d, out)) {
		strip(out);
		return 0;
	}
	/* Fast path: the first k with M = round(d·10^k) < 2^53 and M / 10^k == d (IEEE division
	 * of two exact doubles is correctly rounded, so this is exactly "M·10^-k round-trips").
	 * Fewer fractional digits means fewer significant digits, so the first k is shortest. */
	double p10 = 1.0, ad = fabs(d);
	for (int k = 1; k <= 22; k++) {
		p10 *= 10.0;
		double scaled = ad * p10;
		if (scaled >= 9007199254740992.0)
			break;
		double mr = nearbyint(scaled);
		if (mr / p10 == ad) {
			out->m = d < 0 ? -(int64_t)mr : (int64_t)mr;
			out->e = -k;
			strip(out);
			return 0;
		}
	}
	/* %.*e gives "d.ddde±XX": digits and exponent without ambiguity. A decimal of at most
	 * 15 significant digits (DBL_DIG) survives the trip through a double, so if 15 digits
	 * round-trip, their zero-stripped form is the shortest; otherwise try 16, then 17. */
	int first = fabs(d) < DBL_MIN ? 0 : 14;   /* subnormals have fewer digits */
	for (int prec = first; prec <= 16; prec++) {
		snprintf(buf, sizeof buf, "%.*e", prec, d);
		if (strtod(buf, NULL) == d)
			break;
	}
	const char *p = buf;
	bool neg = false;
	if (*p == '-') {
		neg = true;
		p++;
	}
	int64_t m = 0;
	int nfrac = 0;
	bool frac = false;
	for (; *p && *p != 'e'; p++) {
		if (*p == '.') {
			frac = true;
			continue;
		}
		m = m * 10 + (*p - '0');
		if (frac)
			nfrac++;
	}
	int ex = 0;
	if (*p == 'e')
		ex = atoi(p + 1);
	out->m = neg ? -m : m;
	out->e = ex - nfrac;
	strip(out);
	return 0;
}

int dec_num_from_json(const json_t *num, struct dec_num *out)
{
	if (json_is_integer(num)) {
		out->m = (int64_t)json_integer_value(num);
		out->e = 0;
		strip(out);
		return 0;
	}
	if (json_is_real(num))
		return dec_num_from_double(json_real_value(num), out);
	return -1;
}

bool dec_num_is_zero(const struct dec_num *a)
{
	return a->m == 0;
}

static int ndigits_u(unsigned __int128 v)
{
	int n = 1;
	while (v >= 10) {
		v /= 10;
		n++;
	}
	return n;
}

int dec_num_cmp(const struct dec_num *a, const struct dec_num *b)
{
	int sa = (a->m > 0) - (a->m < 0), sb = (b->m > 0) - (b->m < 0);
	if (sa != sb)
		return sa < sb ? -1 : 1;
	if (sa == 0)
		return 0;
	unsigned __int128 ma = a->m < 0 ? (unsigned __int128)(-(__int128)a->m) : (unsigned __int128)a->m;
	unsigned __int128 mb = b->m < 0 ? (unsigned __int128)(-(__int128)b->m) : (unsigned __int128)b->m;
	int da = ndigits_u(ma), db = ndigits_u(mb);
	long adja = (long)a->e + da, adjb = (long)b->e + db;
	int mag;
	if (adja != adjb) {
		mag = adja < adjb ? -1 : 1;
	} else {
		/* Same magnitude: scale the shorter mantissa to the longer one's digit count. */
		while (da < db) {
			ma *= 10;
			da++;
		}
		while (db < da) {
			mb *= 10;
			db++;
		}
		mag = ma < mb ? -1 : ma > mb ? 1 : 0;
	}
	return sa > 0 ? mag : -mag;
}

int dec_num_format(const struct dec_num *a, char *buf, size_t n)
{
	if (a->e == 0)
		return snprintf(buf, n, "%lld", (long long)a->m);
	return snprintf(buf, n, "%llde%d", (long long)a->m, (int)a->e);
}

int dec_shortest(double d, char *buf, size_t n)
{
	struct dec_num x;
	char digits[24], tmp[64];
	if (dec_num_from_double(d, &x) < 0) {
		if (n)
			buf[0] = 0;
		return -1;
	}
	/* Python repr style: plain for 1e-4 <= |d| < 1e16, else d.ddde±XX. */
	unsigned long long am = x.m < 0 ? 0ULL - (unsigned long long)x.m : (unsigned long long)x.m;
	int nd = snprintf(digits, sizeof digits, "%llu", am);
	int lead = x.e + nd - 1;            /* exponent of the leading digit */
	const char *sign = (x.m < 0 || (x.m == 0 && signbit(d))) ? "-" : "";
	int len;
	if (x.m == 0) {
		len = snprintf(tmp, sizeof tmp, "%s0", sign);
	} else if (lead >= -4 && lead < 16) {
		static const char zeros[] = "0000000000000000";
		if (x.e >= 0)
			len = snprintf(tmp, sizeof tmp, "%s%s%.*s", sign, digits, x.e, zeros);
		else if (lead >= 0)
			len = snprintf(tmp, sizeof tmp, "%s%.*s.%s", sign, lead + 1, digits, digits + lead + 1);
		else
			len = snprintf(tmp, sizeof tmp, "%s0.%.*s%s", sign, -lead - 1, zeros, digits);
	} else {
		len = snprintf(tmp, sizeof tmp, "%s%c%s%s%se%c%02d", sign, digits[0], nd > 1 ? "." : "",
		               digits + 1, "", lead < 0 ? '-' : '+', lead < 0 ? -lead : lead);
	}
	if (n) {
		size_t c = (size_t)len < n ? (size_t)len : n - 1;
		memcpy(buf, tmp, c);
		buf[c] = 0;
	}
	return len;
}

long double dec_num_ld(const struct dec_num *a)
{
	long double m = (long double)a->m;
	if (a->e >= 0)
		return m * powl(10.0L, (long double)a->e);
	return m / powl(10.0L, (long double)-a->e);
}

int dec_from_json(const json_t *num, dec6 *out, int *places)
{
	struct dec_num d;
	if (places)
		*places = 0;
	if (dec_num_from_json(num, &d) < 0)
		return -1;
	int pl = d.e < 0 ? -d.e : 0;
	if (places)
		*places = pl;
	if (pl > 6)
		return -1;
	int shift = d.e + 6;          /* value × 10^6 = m × 10^(e+6), shift ≥ 0 here */
	if (shift > 18)
		return d.m == 0 ? (*out = 0, 0) : -1;
	int64_t r;
	if (__builtin_mul_overflow(d.m, pow10_i64[shift], &r))
		return -1;
	*out = r;
	return 0;
}

int dec_format(dec6 v, char *buf, size_t n)
{
	char tmp[48], *e = tmp + sizeof tmp, *p = e;
	unsigned long long a = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
	unsigned long long ip = a / DEC6_ONE, fp = a % DEC6_ONE;
	if (fp) {
		int digits = 6;
		while (fp % 10 == 0) {
			fp /= 10;
			digits--;
		}
		while (digits-- > 0) {
			*--p = (char)('0' + fp % 10);
			fp /= 10;
		}
		*--p = '.';
	}
	do {
		*--p = (char)('0' + ip % 10);
		ip /= 10;
	} while (ip);
	if (v < 0)
		*--p = '-';
	int len = (int)(e - p);
	if (n) {
		size_t c = (size_t)len < n ? (size_t)len : n - 1;
		memcpy(buf, p, c);
		buf[c] = 0;
	}
	return len;
}
