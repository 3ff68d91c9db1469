/*
 * The scoring primitives of common/README.md "Scoring spec" (see prim.h). Fractions that are
 * ratios of integers or of exact decimals are rounded half up with integer
 * arithmetic (unsigned __int128, or wide integers for numeric_tolerance when
 * exponents are far apart); only irreducibly floating cases (time_decay with a
 * curve other than 1) use long double.
 */
#include "prim.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "fuzzy.h"
#include "jcanon.h"
#include "norm.h"
#include "util.h"

typedef unsigned __int128 u128;
typedef __int128 i128;

#define U128_LIMIT ((u128)1 << 120)     /* operands of exact ratios stay below this */

/* ---- rounding ---------------------------------------------------------- */

int prim_permille_ratio(u128 num, u128 den)
{
	if (den == 0)
		return 0;
	if (num >= den)
		return 1000;
	/* Keep 10·den representable: scale both down (only for absurd operands). */
	while (den >= ((u128)1 << 124)) {
		num >>= 1;
		den >>= 1;
	}
	int q = 0;
	if (den < ((u128)1 << 60)) {   /* the same steps in 64-bit arithmetic (r·10 < 2^64) */
		uint64_t r = (uint64_t)num, d = (uint64_t)den;
		for (int k = 0; k < 3; k++) {
			r *= 10;
			q = q * 10 + (int)(r / d);
			r %= d;
		}
		if (r * 2 >= d)   /* half up */
			q++;
		return q > 1000 ? 1000 : q;
	}
	u128 r = num;
	for (int k = 0; k < 3; k++) {
		r *= 10;
		q = q * 10 + (int)(r / den);
		r %= den;
	}
	if (r * 2 >= den)   /* half up */
		q++;
	return q > 1000 ? 1000 : q;
}

int prim_permille_frac(u128 num, u128 den, struct prim_frac *f)
{
	if (f) {
		f->kind = PRIM_FR_EXACT;
		f->num = den == 0 ? 0 : num < den ? num : 1;
		f->den = den == 0 || num >= den ? 1 : den;
	}
	return prim_permille_ratio(num, den);
}

/* Records a fraction known only as a binary value (an exact one too wide for 128 bits). */
static void frac_binary(struct prim_frac *f, long double x)
{
	if (f) {
		f->kind = PRIM_FR_BINARY;
		f->ld = !(x > 0) ? 0 : x > 1 ? 1 : x;
	}
}

int prim_permille_double(long double x)
{
	if (!(x > 0))   /* also NaN */
		return 0;
	if (x >= 1)
		return 1000;
	long double v = floorl(x * 1000.0L + 0.5L + 1e-9L);
	if (v < 0)
		return 0;
	if (v > 1000)
		return 1000;
	return (int)v;
}

static void set_err(struct prim_err *e, int side, const char *fmt, const char *arg)
{
	if (!e)
		return;
	e->side = side;
	snprintf(e->why, sizeof e->why, fmt, arg);
}

/* Both values must be of JSON type t ("what" names it in the message: "an array"). */
static bool need_both(const json_t *got, const json_t *want, json_type t, const char *what,
                      struct prim_err *err)
{
	char msg[64];
	if (!got || json_typeof(got) != t) {
		snprintf(msg, sizeof msg, "submitted value is %%s, not %s", what);
		set_err(err, 0, msg, jcanon_type_name(got));
		return false;
	}
	if (!want || json_typeof(want) != t) {
		snprintf(msg, sizeof msg, "ground-truth value is %%s, not %s", what);
		set_err(err, 1, msg, jcanon_type_name(want));
		return false;
	}
	return true;
}

static bool need_array(const json_t *got, const json_t *want, struct prim_err *err)
{
	return need_both(got, want, JSON_ARRAY, "an array", err);
}

/* ---- exact_match, exact_match_ratio -------------------------------------- */

int prim_exact_match(const json_t *got, const json_t *want, bool fold_case)
{
	return jcanon_equal(got, want, fold_case) ? 1000 : 0;
}

int prim_exact_match_ratio(const json_t *got, const json_t *want, struct prim_err *err,
                           struct prim_frac *f)
{
	if (!need_array(got, want, err))
		return PRIM_BAD;
	size_t ng = json_array_size(got), nw = json_array_size(want);
	if (nw == 0)
		return ng == 0 ? 1000 : 0;
	size_t n = ng < nw ? ng : nw, hits = 0;
	for (size_t i = 0; i < n; i++)
		hits += jcanon_equal(json_array_get(got, i), json_array_get(want, i), false);
	return prim_permille_frac(hits, nw, f);
}

/* ---- numeric_tolerance --------------------------------------------------- */

/* A non-negative decimal m × 10^e with a wide mantissa (at most 38 digits). */
struct wd {
	u128 m;
	int e;
};

static int ndig(u128 v)
{
	int n = 1;
	if (v <= UINT64_MAX) {   /* the same count, with 64-bit divisions (no library call) */
		for (uint64_t x = (uint64_t)v; x >= 10; x /= 10)
			n++;
		return n;
	}
	while (v >= 10) {
		v /= 10;
		n++;
	}
	return n;
}

static u128 p10(int k)
{
	u128 r = 1;
	while (k-- > 0)
		r *= 10;
	return r;
}

static u128 uabs64(int64_t m)
{
	return m < 0 ? (u128)(-(i128)m) : (u128)m;
}

static int wd_cmp(struct wd a, struct wd b)
{
	if (a.m == 0 || b.m == 0)
		return (a.m != 0) - (b.m != 0);
	int da = ndig(a.m), db = ndig(b.m);
	long aa = (long)a.e + da, ab = (long)b.e + db;
	if (aa != ab)
		return aa < ab ? -1 : 1;
	while (da < db) {
		a.m *= 10;
		da++;
	}
	while (db < da) {
		b.m *= 10;
		db++;
	}
	return (a.m > b.m) - (a.m < b.m);
}

/* Aligns a and b to the smaller exponent; false if a mantissa would reach 2^120. */
static bool wd_align(struct wd a, struct wd b, u128 *ma, u128 *mb)
{
	if (a.m == 0)
		a.e = b.e;
	if (b.m == 0)
		b.e = a.e;
	int e = a.e < b.e ? a.e : b.e;
	int sa = a.e - e, sb = b.e - e;
	if ((a.m && ndig(a.m) + sa > 36) || (b.m && ndig(b.m) + sb > 36))
		return false;
	*ma = a.m * p10(sa);
	*mb = b.m * p10(sb);
	return true;
}

/* |a − b| exactly, or false when the exponent spread is too wide. */
static bool diff_exact(const struct dec_num *a, const struct dec_num *b, struct wd *d)
{
	struct dec_num x = *a, y = *b;
	if (x.m == 0)
		x.e = y.e;
	if (y.m == 0)
		y.e = x.e;
	int e = x.e < y.e ? x.e : y.e;
	int sx = x.e - e, sy = y.e - e;
	if ((x.m && ndig(uabs64(x.m)) + sx > 37) || (y.m && ndig(uabs64(y.m)) + sy > 37))
		return false;
	i128 X = (i128)x.m * (i128)p10(sx), Y = (i128)y.m * (i128)p10(sy);
	i128 D = X - Y;
	d->m = D < 0 ? (u128)(-D) : (u128)D;
	d->e = e;
	return true;
}

static u128 gcd128(u128 a, u128 b)
{
	while (b) {
		u128 t = a % b;
		a = b;
		b = t;
	}
	return a;
}

/* One element's fraction: exact as p/q when possible (*exact), and as long double. */
struct frac {
	bool exact;
	u128 p, q;
	long double ld;
};

static void element_fraction(const struct dec_num *a, const struct dec_num *b,
                             const struct dec_num *tol, bool linear, struct frac *f)
{
	struct wd T = { uabs64(tol->m), tol->e }, D = { 0, 0 };
	bool have_d = diff_exact(a, b, &D);
	long double ld_d = 0, ld_t = 0;   /* only needed when the exact difference overflows */
	if (!have_d) {
		ld_d = fabsl(dec_num_ld(a) - dec_num_ld(b));
		ld_t = dec_num_ld(tol);
	}
	bool within = have_d ? wd_cmp(D, T) <= 0 : ld_d <= ld_t;
	f->exact = have_d;
	if (within) {
		f->p = f->q = 1;
		f->ld = 1;
		return;
	}
	f->p = 0;
	f->q = 1;
	f->ld = 0;
	if (!linear || T.m == 0)
		return;
	/* 1 − (d − t)/(4t) = (5t − d)/(4t), floored at 0. */
	struct wd T5 = { T.m * 5, T.e };
	if (have_d) {
		if (wd_cmp(D, T5) >= 0)
			return;
		u128 md, mt;
		if (wd_align(D, T, &md, &mt)) {
			u128 p = mt * 5 - md, q = mt * 4, g = gcd128(p, q);
			f->p = p / g;
			f->q = q / g;
			f->ld = (long double)f->p / (long double)f->q;
			return;
		}
	}
	f->exact = false;
	if (have_d) {   /* exact difference but unaligned scales: the binary fallback */
		ld_d = fabsl(dec_num_ld(a) - dec_num_ld(b));
		ld_t = dec_num_ld(tol);
	}
	long double x = (5 * ld_t - ld_d) / (4 * ld_t);
	f->ld = x > 0 ? x : 0;
}

/* acc += f, exactly; false on overflow. */
static bool frac_add(u128 *ap, u128 *aq, u128 p, u128 q)
{
	if (p == 0)
		return true;
	u128 g = gcd128(*aq, q);
	u128 qa = *aq / g, qb = q / g;   /* lcm = aq * qb */
	u128 np, t1, t2, nq;
	if (__builtin_mul_overflow(*ap, qb, &t1) || __builtin_mul_overflow(p, qa, &t2) ||
	    __builtin_add_overflow(t1, t2, &np) || __builtin_mul_overflow(*aq, qb, &nq))
		return false;
	if (np >= U128_LIMIT || nq >= U128_LIMIT)
		return false;
	g = gcd128(np, nq);
	*ap = np / g;
	*aq = nq / g;
	return true;
}

/* ---- exact slow path: wide integers ------------------------------------------
 * Taken when the exponents of the values and the tolerance are too far apart for 128 bits
 * (e.g. -1e-40 vs 0.01 at tolerance 0.01, which is just outside). Every value is scaled to
 * the smallest exponent involved: a double's shortest decimal spans 10^-340 .. 10^310, so a
 * scaled value has at most ~2110 bits; sums over n elements and the rounding factors add
 * fewer than 100, well inside BIG_LIMBS × 64 bits. Any carry out is reported (never
 * silently wrong). */
#define BIG_LIMBS 40

struct big {
	uint64_t l[BIG_LIMBS];   /* little-endian */
};

static bool big_mul_u64(struct big *r, uint64_t k)
{
	unsigned __int128 carry = 0;
	for (int i = 0; i < BIG_LIMBS; i++) {
		carry += (unsigned __int128)r->l[i] * k;
		r->l[i] = (uint64_t)carry;
		carry >>= 64;
	}
	return carry == 0;
}

static bool big_add(struct big *r, const struct big *a)
{
	unsigned __int128 carry = 0;
	for (int i = 0; i < BIG_LIMBS; i++) {
		carry += (unsigned __int128)r->l[i] + a->l[i];
		r->l[i] = (uint64_t)carry;
		carry >>= 64;
	}
	return carry == 0;
}

/* r −= a; requires r ≥ a. */
static void big_sub(struct big *r, const struct big *a)
{
	uint64_t borrow = 0;
	for (int i = 0; i < BIG_LIMBS; i++) {
		uint64_t x = r->l[i], y = a->l[i];
		uint64_t d = x - y - borrow;
		borrow = (x < y) || (x - y < borrow);
		r->l[i] = d;
	}
}

static int big_cmp(const struct big *a, const struct big *b)
{
	for (int i = BIG_LIMBS - 1; i >= 0; i--)
		if (a->l[i] != b->l[i])
			return a->l[i] < b->l[i] ? -1 : 1;
	return 0;
}

/* r = |m| × 10^k (k ≥ 0). */
static bool big_from_dec(struct big *r, int64_t m, long k)
{
	memset(r, 0, sizeof *r);
	r->l[0] = m < 0 ? 0ULL - (uint64_t)m : (uint64_t)m;
	for (; k >= 19; k -= 19)
		if (!big_mul_u64(r, 10000000000000000000ULL))
			return false;
	return big_mul_u64(r, (uint64_t)p10((int)k));
}

/* |a − b| at scale 10^e0 into *d. */
static bool big_absdiff(const struct dec_num *a, const struct dec_num *b, long e0, struct big *d)
{
	struct big y;
	if (!big_from_dec(d, a->m, a->m ? a->e - e0 : 0) || !big_from_dec(&y, b->m, b->m ? b->e - e0 : 0))
		return false;
	if ((a->m < 0) != (b->m < 0) && a->m && b->m)
		return big_add(d, &y);
	if (big_cmp(d, &y) < 0) {
		struct big t = *d;
		*d = y;
		y = t;
	}
	big_sub(d, &y);
	return true;
}

/* The score of numeric_tolerance over n = len(want) pairs (a scalar is one pair), exactly.
 * Returns 0..1000, or -1 if an intermediate would not fit (impossible for JSON doubles and
 * 64-bit integers; the caller then keeps its long double result). */
static int numtol_big(const json_t *got, const json_t *want, const struct dec_num *tol,
                      bool linear, struct prim_frac *fr)
{
	bool scalar = !json_is_array(want);
	size_t n = scalar ? 1 : json_array_size(want), ng = scalar ? 1 : json_array_size(got);
	/* The smallest exponent of every non-zero value involved. */
	long e0 = tol->m ? tol->e : LONG_MAX;
	for (size_t i = 0; i < n; i++) {
		const json_t *w = scalar ? want : json_array_get(want, i);
		const json_t *g = scalar ? got : i < ng ? json_array_get(got, i) : NULL;
		struct dec_num a, b;
		if (!json_is_number(w) || !json_is_number(g))
			continue;
		dec_num_from_json(g, &a);
		dec_num_from_json(w, &b);
		if (a.m && a.e < e0)
			e0 = a.e;
		if (b.m && b.e < e0)
			e0 = b.e;
	}
	if (e0 == LONG_MAX)
		e0 = 0;
	struct big T, T4, T5, S, D;
	if (!big_from_dec(&T, tol->m, tol->m ? tol->e - e0 : 0))
		return -1;
	T4 = T;
	T5 = T;
	if (!big_mul_u64(&T4, 4) || !big_mul_u64(&T5, 5))
		return -1;
	bool tzero = tol->m == 0;
	memset(&S, 0, sizeof S);
	size_t hits = 0, partial = 0;   /* pairs within; pairs in the linear decay */
	/* S = Σ 4T·fraction_i (or, at tolerance 0, the number of equal pairs). */
	for (size_t i = 0; i < n; i++) {
		const json_t *w = scalar ? want : json_array_get(want, i);
		const json_t *g = scalar ? got : i < ng ? json_array_get(got, i) : NULL;
		struct dec_num a, b;
		if (!json_is_number(w) || !json_is_number(g))
			continue;
		dec_num_from_json(g, &a);
		dec_num_from_json(w, &b);
		if (!big_absdiff(&a, &b, e0, &D))
			return -1;
		if (tzero) {
			struct big one = { { 1 } }, zero = { { 0 } };
			if (big_cmp(&D, &zero) == 0 && (hits++, !big_add(&S, &one)))
				return -1;
			continue;
		}
		if (big_cmp(&D, &T) <= 0) {
			hits++;
			if (!big_add(&S, &T4))
				return -1;
		} else if (linear && big_cmp(&D, &T5) < 0) {
			partial++;
			struct big x = T5;
			big_sub(&x, &D);
			if (!big_add(&S, &x))
				return -1;
		}
	}
	/* round half up of 1000·S/Y, Y = n (tolerance 0) or 4T·n: floor((2000·S + Y) / 2Y). */
	struct big Y, X, Y2, q_y;
	if (tzero) {
		memset(&Y, 0, sizeof Y);
		Y.l[0] = 1;
	} else {
		Y = T4;
	}
	if (!big_mul_u64(&Y, (uint64_t)n))
		return -1;
	X = S;
	Y2 = Y;
	if (!big_mul_u64(&X, 2000) || !big_add(&X, &Y) || !big_mul_u64(&Y2, 2))
		return -1;
	if (!partial)   /* every pair 0 or 1: the fraction hits ÷ n is exact */
		prim_permille_frac(hits, n, fr);
	int lo = 0, hi = 1000;   /* largest q with q·Y2 ≤ X */
	while (lo < hi) {
		int mid = (lo + hi + 1) / 2;
		q_y = Y2;
		if (!big_mul_u64(&q_y, (uint64_t)mid))
			return -1;
		if (big_cmp(&q_y, &X) <= 0)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

int prim_numeric_tolerance_num(const json_t *got, const json_t *want, const struct dec_num *wd,
                               const struct dec_num *tol, bool linear, struct prim_frac *fr)
{
	struct dec_num a;
	struct frac f;
	dec_num_from_json(got, &a);
	element_fraction(&a, wd, tol, linear, &f);
	if (f.exact)
		return prim_permille_frac(f.p, f.q, fr);
	frac_binary(fr, f.ld);
	int r = numtol_big(got, want, tol, linear, fr);
	return r >= 0 ? r : prim_permille_double(f.ld);
}

/* The allowance of one expected value e under a relative tolerance: max(tol, rel × |e|), the
 * product exact when it has at most 18 significant digits, else cut (rounded down) to 18. */
static struct dec_num rel_allow(const struct dec_num *tol, const struct dec_num *rel,
                                const struct dec_num *e)
{
	u128 m = uabs64(rel->m) * uabs64(e->m);   /* both below 2^63: no overflow */
	long ex = (long)rel->e + e->e;
	while (m >= (u128)1000000000000000000ULL) {
		m /= 10;
		ex++;
	}
	struct dec_num p = { (int64_t)m, (int32_t)(m ? ex : 0) };
	return dec_num_cmp(&p, tol) >= 0 ? p : *tol;
}

/* The body of prim_numeric_tolerance (rel NULL) and prim_numeric_relative: each expected
 * value e allows tol, or rel_allow(tol, rel, e). Only the absolute form falls back to wide
 * integers (numtol_big) when a difference leaves 128 bits. */
static int numtol(const json_t *got, const json_t *want, const struct dec_num *tol,
                  const struct dec_num *rel, bool linear, int *nbad, struct prim_err *err,
                  struct prim_frac *fr)
{
	struct dec_num a, b, t;
	struct frac f;
	if (nbad)
		*nbad = 0;
	if (json_is_number(want)) {
		if (!json_is_number(got)) {
			set_err(err, 0, "submitted value is %s, not a number", jcanon_type_name(got));
			return PRIM_BAD;
		}
		dec_num_from_json(want, &b);
		if (!rel)
			return prim_numeric_tolerance_num(got, want, &b, tol, linear, fr);
		dec_num_from_json(got, &a);
		t = rel_allow(tol, rel, &b);
		element_fraction(&a, &b, &t, linear, &f);
		if (f.exact)
			return prim_permille_frac(f.p, f.q, fr);
		frac_binary(fr, f.ld);
		return prim_permille_double(f.ld);
	}
	if (!json_is_array(want)) {
		set_err(err, 1, "ground-truth value is %s, not a number or an array", jcanon_type_name(want));
		return PRIM_BAD;
	}
	if (!json_is_array(got)) {
		set_err(err, 0, "submitted value is %s, not an array", jcanon_type_name(got));
		return PRIM_BAD;
	}
	size_t n = json_array_size(want), ng = json_array_size(got);
	if (n == 0)
		return ng == 0 ? 1000 : 0;
	u128 sp = 0, sq = 1;
	bool exact = true;
	long double sld = 0;
	int bad = 0;
	for (size_t i = 0; i < n; i++) {
		const json_t *w = json_array_get(want, i), *g = i < ng ? json_array_get(got, i) : NULL;
		if (!json_is_number(w) || !json_is_number(g)) {
			bad++;
			continue;
		}
		dec_num_from_json(g, &a);
		dec_num_from_json(w, &b);
		t = rel ? rel_allow(tol, rel, &b) : *tol;
		element_fraction(&a, &b, &t, linear, &f);
		sld += f.ld;
		if (exact && (!f.exact || !frac_add(&sp, &sq, f.p, f.q)))
			exact = false;
	}
	if (nbad)
		*nbad = bad;
	u128 den;
	if (exact && !__builtin_mul_overflow(sq, (u128)n, &den) && den < U128_LIMIT)
		return prim_permille_frac(sp, den, fr);
	frac_binary(fr, sld / (long double)n);
	int r = rel ? -1 : numtol_big(got, want, tol, linear, fr);
	return r >= 0 ? r : prim_permille_double(sld / (long double)n);
}

int prim_numeric_tolerance(const json_t *got, const json_t *want, const struct dec_num *tol,
                           bool linear, int *nbad, struct prim_err *err, struct prim_frac *fr)
{
	return numtol(got, want, tol, NULL, linear, nbad, err, fr);
}

int prim_numeric_relative(const json_t *got, const json_t *want, const struct dec_num *tol,
                          const struct dec_num *rel, bool linear, int *nbad,
                          struct prim_err *err, struct prim_frac *fr)
{
	return numtol(got, want, tol, rel, linear, nbad, err, fr);
}

/* ---- fuzzy_string ------------------------------------------------------ */

int prim_fuzzy_string_paid(const json_t *got, const json_t *want,
                           bool (*pay)(void *arg, size_t m, size_t n), void *arg,
                           struct prim_err *err)
{
	if (!need_both(got, want, JSON_STRING, "a string", err))
		return PRIM_BAD;
	struct fuzzy_pair p;
	size_t m, n;
	int score = 0, rc = fuzzy_pair_init(&p, json_string_value(got), json_string_length(got),
	                                    json_string_value(want), json_string_length(want));
	if (rc == 0) {
		fuzzy_pair_middle(&p, &m, &n);
		if (!pay || pay(arg, m, n))
			rc = fuzzy_pair_score(&p, &score);
	}
	fuzzy_pair_free(&p);
	if (rc == -2) {
		set_err(err, 0, "%s", "texts too long to compare: their differing parts exceed "
		        "10^10 code-point pairs (FUZZY_MAX_CELLS)");
		return PRIM_BAD;
	}
	if (rc < 0) {
		set_err(err, 0, "%s", "text is not valid UTF-8");
		return PRIM_BAD;
	}
	return score;
}

int prim_fuzzy_string(const json_t *got, const json_t *want, struct prim_err *err)
{
	return prim_fuzzy_string_paid(got, want, NULL, NULL, err);
}

/* ---- sets: coverage_ratio, set_overlap ----------------------------------- */


static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Canonical texts of arr's items, sorted and deduplicated. Canonical texts hold no NUL
 * (strings escape it as \u0000), so strcmp is exact. */
static void set_build(const json_t *arr, struct prim_set *s)
{
	size_t n = json_array_size(arr);
	size_t *off = xcalloc(n ? n : 1, sizeof *off);
	memset(&s->buf, 0, sizeof s->buf);
	for (size_t i = 0; i < n; i++) {
		off[i] = s->buf.len;
		jcanon_dump(json_array_get(arr, i), &s->buf);
		strbuf_add(&s->buf, "", 1);   /* NUL separator */
	}
	s->items = xcalloc(n ? n : 1, sizeof *s->items);
	for (size_t i = 0; i < n; i++)
		s->items[i] = s->buf.buf + off[i];
	free(off);
	qsort(s->items, n, sizeof *s->items, str_cmp);
	size_t u = 0;
	for (size_t i = 0; i < n; i++)
		if (u == 0 || strcmp(s->items[u - 1], s->items[i]))
			s->items[u++] = s->items[i];
	s->n = u;
}

static void set_free(struct prim_set *s)
{
	free(s->items);
	strbuf_free(&s->buf);
}

void prim_set_build(const json_t *arr, struct prim_set *s)
{
	set_build(arr, s);
}

void prim_set_free(struct prim_set *s)
{
	set_free(s);
}

static size_t set_common(const struct prim_set *a, const struct prim_set *b)
{
	size_t i = 0, j = 0, c = 0;
	while (i < a->n && j < b->n) {
		int r = strcmp(a->items[i], b->items[j]);
		if (r == 0) {
			c++;
			i++;
			j++;
		} else if (r < 0) {
			i++;
		} else {
			j++;
		}
	}
	return c;
}

int prim_coverage_ratio(const json_t *got, const json_t *want, struct prim_err *err,
                        struct prim_frac *f)
{
	if (!need_array(got, want, err))
		return PRIM_BAD;
	if (json_array_size(want) == 0)
		return 1000;
	struct prim_set b;
	set_build(want, &b);
	int score = prim_coverage_ratio_set(got, want, &b, err, f);
	set_free(&b);
	return score;
}

int prim_coverage_ratio_set(const json_t *got, const json_t *want, const struct prim_set *ws,
                            struct prim_err *err, struct prim_frac *f)
{
	if (!need_array(got, want, err))
		return PRIM_BAD;
	if (json_array_size(want) == 0)
		return 1000;
	struct prim_set a;
	set_build(got, &a);
	int score = prim_permille_frac(set_common(&a, ws), ws->n, f);
	set_free(&a);
	return score;
}

int prim_set_ratio(size_t c, size_t na, size_t nb, enum prim_method m, struct prim_frac *f)
{
	if (na == 0 && nb == 0)
		return 1000;
	switch (m) {
	case PRIM_M_JACCARD: return prim_permille_frac(c, na + nb - c, f);
	case PRIM_M_RECALL: return nb == 0 ? 1000 : prim_permille_frac(c, nb, f);
	case PRIM_M_PRECISION: return na == 0 ? 0 : prim_permille_frac(c, na, f);
	case PRIM_M_F1: return prim_permille_frac(2 * (u128)c, (u128)na + nb, f);
	default: return 0;
	}
}

int prim_set_method(const json_t *got, const json_t *want, enum prim_method m,
                    struct prim_err *err, struct prim_frac *f)
{
	if (!need_array(got, want, err))
		return PRIM_BAD;
	struct prim_set b;
	set_build(want, &b);
	int score = prim_set_method_set(got, want, &b, m, err, f);
	set_free(&b);
	return score;
}

int prim_set_method_set(const json_t *got, const json_t *want, const struct prim_set *ws,
                        enum prim_method m, struct prim_err *err, struct prim_frac *f)
{
	if (!need_array(got, want, err))
		return PRIM_BAD;
	struct prim_set a;
	set_build(got, &a);
	int score = prim_set_ratio(set_common(&a, ws), a.n, ws->n, m, f);
	set_free(&a);
	return score;
}

int prim_set_overlap(const json_t *got, const json_t *want, bool jaccard, struct prim_err *err,
                     struct prim_frac *f)
{
	return prim_set_method(got, want, jaccard ? PRIM_M_JACCARD : PRIM_M_RECALL, err, f);
}

size_t prim_sorted_common(char *const *a, size_t na, char *const *b, size_t nb)
{
	struct prim_set x = { .items = (char **)a, .n = na }, y = { .items = (char **)b, .n = nb };
	return set_common(&x, &y);
}

/* ---- ramps, lengths, tokens ------------------------------------------------ */

int prim_ramp(int64_t v, const struct prim_point *pts, size_t n, bool steps,
              struct prim_frac *fr)
{
	if (n == 0)
		return 0;
	if (steps) {
		dec6 f = 0;
		for (size_t i = 0; i < n && pts[i].x <= v; i++)
			f = pts[i].f;
		return prim_permille_frac((u128)f, DEC6_ONE, fr);
	}
	if (v <= pts[0].x)
		return prim_permille_frac((u128)pts[0].f, DEC6_ONE, fr);
	if (v >= pts[n - 1].x)
		return prim_permille_frac((u128)pts[n - 1].f, DEC6_ONE, fr);
	size_t i = 0;
	while (pts[i + 1].x < v)
		i++;
	/* f_i + (f_{i+1} − f_i)(v − x_i)/(x_{i+1} − x_i), as one exact ratio. */
	i128 dx = (i128)pts[i + 1].x - pts[i].x;
	i128 num = (i128)pts[i].f * dx + ((i128)pts[i + 1].f - pts[i].f) * ((i128)v - pts[i].x);
	if (num <= 0)
		return prim_permille_frac(0, 1, fr);
	return prim_permille_frac((u128)num, (u128)dx * DEC6_ONE, fr);
}

size_t prim_count_chars(const char *s, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		n += ((unsigned char)s[i] & 0xC0) != 0x80;
	return n;
}

static bool word_cp(int32_t c)
{
	if (c < 128)
		return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
	utf8proc_category_t k = utf8proc_category(c);
	return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) ||
	       (k >= UTF8PROC_CATEGORY_MN && k <= UTF8PROC_CATEGORY_ME) ||
	       (k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO);
}

static int32_t next_cp(const char *s, size_t len, size_t *i)
{
	if ((unsigned char)s[*i] < 0x80)
		return (unsigned char)s[(*i)++];
	utf8proc_int32_t c;
	utf8proc_ssize_t n = utf8proc_iterate((const utf8proc_uint8_t *)s + *i,
	                                      (utf8proc_ssize_t)(len - *i), &c);
	if (n <= 0) {
		*i += 1;
		return 0xFFFD;
	}
	*i += (size_t)n;
	return c;
}

/* High bit of each byte of w (all bytes ASCII) that is white space: ' ' or 9..13. */
static uint64_t ascii_space_bits(uint64_t w)
{
	const uint64_t hi = 0x8080808080808080ull;
	uint64_t x = w ^ 0x2020202020202020ull;              /* 0 where the byte is ' ' */
	uint64_t sp = ~(x + 0x7f7f7f7f7f7f7f7full) & hi;     /* no carries: bytes < 0x80 */
	uint64_t ge9 = (w + 0x7777777777777777ull) & hi;     /* byte >= 9 */
	uint64_t ge14 = (w + 0x7272727272727272ull) & hi;    /* byte >= 14 */
	return sp | (ge9 & ~ge14);
}

size_t prim_count_words(const char *s, size_t len)
{
	size_t n = 0, i = 0;
	bool in = false;
	/* 8 ASCII bytes at a time: a word starts at each non-space byte after a space (or after
	 * the start); any byte >= 0x80 sends the rest through the code-point loop below. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	for (; i + 8 <= len; i += 8) {
		uint64_t w;
		memcpy(&w, s + i, 8);
		if (w & 0x8080808080808080ull)
			break;
		uint64_t ws = ascii_space_bits(w);
		uint64_t prev_ws = (ws << 8) | (in ? 0 : 0x80);   /* little-endian: byte k-1 below k */
		uint64_t starts = ~ws & prev_ws & 0x8080808080808080ull;
		n += (size_t)(((starts >> 7) * 0x0101010101010101ull) >> 56);   /* one bit per byte */
		in = !(ws >> 63);
	}
#endif
	while (i < len) {
		unsigned char b = (unsigned char)s[i];
		if (b < 0x80) {   /* ASCII fast path */
			bool ws = b == ' ' || (b >= 9 && b <= 13);
			n += !ws && !in;
			in = !ws;
			i++;
			continue;
		}
		bool ws = norm_is_space(next_cp(s, len, &i));
		if (!ws && !in)
			n++;
		in = !ws;
	}
	return n;
}

size_t prim_count_lines(const char *s, size_t len)
{
	size_t n = 0, i = 0;
	bool ink = false;   /* the current line holds a non-whitespace code point */
	while (i < len) {
		unsigned char b = (unsigned char)s[i];
		if (b == '\n') {
			n += ink;
			ink = false;
			i++;
		} else if (b < 0x80) {
			ink |= !(b == ' ' || (b >= 9 && b <= 13));
			i++;
		} else {
			ink |= !norm_is_space(next_cp(s, len, &i));
		}
	}
	return n + ink;
}

void prim_tokens(const char *s, size_t len, struct strbuf *sb, char ***items, size_t *n)
{
	size_t *off = NULL, cnt = 0, cap = 0, i = 0;
	memset(sb, 0, sizeof *sb);
	strbuf_addlit(sb, "");
	while (i < len) {
		size_t st = i;
		if (!word_cp(next_cp(s, len, &i)))
			continue;
		size_t en = i;
		while (en < len) {
			size_t k = en;
			if (!word_cp(next_cp(s, len, &k)))
				break;
			en = k;
		}
		if (cnt == cap) {
			cap = cap ? cap * 2 : 16;
			off = xrealloc(off, cap * sizeof *off);
		}
		off[cnt++] = sb->len;
		strbuf_add(sb, s + st, en - st);
		strbuf_add(sb, "", 1);
		i = en;
	}
	char **it = xcalloc(cnt ? cnt : 1, sizeof *it);
	for (size_t k = 0; k < cnt; k++)
		it[k] = sb->buf + off[k];
	free(off);
	qsort(it, cnt, sizeof *it, str_cmp);
	size_t u = 0;
	for (size_t k = 0; k < cnt; k++)
		if (u == 0 || strcmp(it[u - 1], it[k]))
			it[u++] = it[k];
	*items = it;
	*n = u;
}

/* ---- time_decay, efficiency ------------------------------------------------ */

int prim_time_decay(int64_t elapsed_ms, const struct dec_num *limit_secs, double curve,
                    struct prim_frac *f)
{
	if (elapsed_ms < 0)
		return 1000;
	if (limit_secs->m <= 0)
		return 0;
	/* L in ms = m × 10^(e+3). Fraction = (Lms − t)/Lms. */
	u128 p = 0, q = 0;
	bool exact = false;
	int k = limit_secs->e + 3;
	u128 m = (u128)limit_secs->m;
	if (k >= 0) {
		if (ndig(m) + k <= 36) {
			q = m * p10(k);
			p = (u128)elapsed_ms >= q ? 0 : q - (u128)elapsed_ms;
			exact = true;
		}
	} else if (-k <= 18) {
		u128 t = (u128)elapsed_ms * p10(-k);   /* t in units of 10^k ms */
		q = m;
		p = t >= q ? 0 : q - t;
		exact = true;
	}
	if (curve == 1.0) {
		if (exact)
			return prim_permille_frac(p, q, f);
		long double x = 1.0L - (long double)elapsed_ms / (dec_num_ld(limit_secs) * 1000.0L);
		return prim_permille_double(x);
	}
	long double base = exact ? (long double)p / (long double)q
	                         : 1.0L - (long double)elapsed_ms / (dec_num_ld(limit_secs) * 1000.0L);
	if (base <= 0)
		return 0;
	return prim_permille_double(powl(base, (long double)curve));
}

int prim_efficiency(const json_t *count, int64_t budget, struct prim_err *err,
                    struct prim_frac *f)
{
	int64_t c;
	if (json_is_integer(count)) {
		c = (int64_t)json_integer_value(count);
	} else if (json_is_real(count)) {
		double d = json_real_value(count);
		if (d != floor(d) || d < 0 || d >= 9.2e18) {
			set_err(err, 0, "%s", "count is not a non-negative integer");
			return PRIM_BAD;
		}
		c = (int64_t)d;
	} else {
		set_err(err, 0, "count is %s, not a number", jcanon_type_name(count));
		return PRIM_BAD;
	}
	if (c < 0) {
		set_err(err, 0, "%s", "count is negative");
		return PRIM_BAD;
	}
	if (budget <= 0)
		return c == 0 ? 1000 : 0;
	if (c >= budget)
		return 0;
	return prim_permille_frac((u128)(budget - c), (u128)budget, f);
}

bool prim_has_long_string(const json_t *v, size_t max_bytes)
{
	if (!v)
		return false;
	switch (json_typeof(v)) {
	case JSON_STRING:
		return json_string_length(v) > max_bytes;
	case JSON_ARRAY:
		for (size_t i = 0; i < json_array_size(v); i++)
			if (prim_has_long_string(json_array_get(v, i), max_bytes))
				return true;
		return false;
	case JSON_OBJECT:
		for (void *it = json_object_iter((json_t *)v); it;
		     it = json_object_iter_next((json_t *)v, it)) {
			if (json_object_iter_key_len(it) > max_bytes ||
			    prim_has_long_string(json_object_iter_value(it), max_bytes))
				return true;
		}
		return false;
	default:
		return false;
	}
}
