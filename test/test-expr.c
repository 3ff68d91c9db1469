/*
 * Unit tests for common/expr: precedence, associativity, functions, comparisons,
 * division by zero, every parse error (with its position), limits, and the seed-002
 * workflow formulas.
 */
#include "expr.h"
#include "tap.h"

#include <math.h>
#include <stdlib.h>

static const char *const vars[] = { "x", "y", "zero", "min_score" };
static const double values[] = { 3, 0.5, 0, 7 };
#define NVARS (sizeof vars / sizeof vars[0])

struct val_case { const char *src; double want; int div_zero; };

static const struct val_case val_cases[] = {
	{ "1 + 2 * 3", 7, 0 },
	{ "(1 + 2) * 3", 9, 0 },
	{ "2 * 3 + 4", 10, 0 },
	{ "10 - 4 - 3", 3, 0 },                 /* left-associative */
	{ "64 / 4 / 2", 8, 0 },
	{ "2 * 3 / 4", 1.5, 0 },
	{ "1 - 2 + 3", 2, 0 },
	{ "2 - -3", 5, 0 },
	{ "-2 * 3", -6, 0 },
	{ "-(2 + 3)", -5, 0 },
	{ "--2", 2, 0 },
	{ "+2", 2, 0 },
	{ "- x * y", -1.5, 0 },
	{ "6 \xC3\x97 7", 42, 0 },              /* × */
	{ "7 \xC3\xB7 2", 3.5, 0 },             /* ÷ */
	{ "3 \xE2\x88\x92 1", 2, 0 },           /* − U+2212 */
	{ "1 + 6 \xC3\xB7 3 \xC3\x97 2", 5, 0 },
	{ "0.25", 0.25, 0 },
	{ ".5 + 1.", 1.5, 0 },
	{ "007", 7, 0 },
	{ "1e-1 * 5", 0.5, 0 },               /* exponents, as in JSON numbers */
	{ "2.5E+2 / 1e3", 0.25, 0 },
	{ "  x\t*\n2 ", 6, 0 },
	{ "x", 3, 0 },
	{ "min_score - x", 4, 0 },
	{ "min(3, 1, 2)", 1, 0 },
	{ "max(3, 1, 2)", 3, 0 },
	{ "min(5)", 5, 0 },
	{ "max(-1, -2)", -1, 0 },
	{ "min ( x , y )", 0.5, 0 },
	{ "clamp(1.5, 0, 1)", 1, 0 },
	{ "clamp(-1, 0, 1)", 0, 0 },
	{ "clamp(y, 0, 1)", 0.5, 0 },
	{ "max(0, min(1, x - 2.5))", 0.5, 0 },
	{ "1 < 2", 1, 0 },
	{ "2 < 1", 0, 0 },
	{ "2 <= 2", 1, 0 },
	{ "3 <= 2", 0, 0 },
	{ "3 > 2", 1, 0 },
	{ "2 > 2", 0, 0 },
	{ "2 >= 2", 1, 0 },
	{ "1 >= 2", 0, 0 },
	{ "2 == 2", 1, 0 },
	{ "2 == 3", 0, 0 },
	{ "2 != 3", 1, 0 },
	{ "2 != 2", 0, 0 },
	{ "1 + 2 < 4", 1, 0 },                  /* arithmetic binds tighter */
	{ "2 * 3 == 6", 1, 0 },
	{ "(1 < 2) + (3 < 4)", 2, 0 },
	{ "(1 < 2) < 3", 1, 0 },
	{ "0.5 * (x > 2)", 0.5, 0 },
	{ "1 / 0", 0, 1 },
	{ "0 / 0", 0, 1 },
	{ "x / zero", 0, 1 },
	{ "1 / (x - 3)", 0, 1 },
	{ "5 + 1 / zero", 5, 1 },
	{ "min(1 / 0, 5)", 0, 1 },
	{ "x \xC3\xB7 0", 0, 1 },
	{ "1 / -0", 0, 1 },
	{ "1 / 2", 0.5, 0 },
};

struct err_case { const char *src; const char *err; };

static const struct err_case err_cases[] = {
	{ "", "position 1: expected a number, a variable, '(' or '-', found end of expression" },
	{ "   ", "position 4: expected a number, a variable, '(' or '-', found end of expression" },
	{ "1 +", "position 4: expected a number, a variable, '(' or '-', found end of expression" },
	{ "(1 + 2", "position 7: expected ')', found end of expression" },
	{ "(1 + 2]", "position 7: expected ')', found ']'" },
	{ "foo + 1", "position 1: unknown variable 'foo'" },
	{ "x + Y", "position 5: unknown variable 'Y'" },
	{ "pow(x, 2)", "position 1: unknown function 'pow' (known: min, max, clamp, if, abs, round, floor, ceil, len, coalesce)" },
	{ "clamp(1, 2)", "position 1: clamp takes 3 arguments (x, lo, hi), got 2" },
	{ "clamp(1, 2, 3, 4)", "position 1: clamp takes 3 arguments (x, lo, hi), got 4" },
	{ "min()", "position 5: expected a number, a variable, '(' or '-', found ')'" },
	{ "min(1,)", "position 7: expected a number, a variable, '(' or '-', found ')'" },
	{ "min(1 2)", "position 7: expected ',' or ')', found '2'" },
	{ "max(1, 2", "position 9: expected ',' or ')', found end of expression" },
	{ "1 2", "position 3: expected an operator or the end, found '2'" },
	{ "x y", "position 3: expected an operator or the end, found 'y'" },
	{ "1 = 2", "position 3: expected an operator ('=' is not one; use '=='), found '='" },
	{ "1 < 2 < 3", "position 7: comparisons cannot be chained; use parentheses" },
	{ "1 == 1 != 0", "position 8: comparisons cannot be chained; use parentheses" },
	{ "1 $ 2", "position 3: expected an operator or the end, found '$'" },
	{ "$", "position 1: expected a number, a variable, '(' or '-', found '$'" },
	{ "1 + \xC3\xA9", "position 5: expected a number, a variable, '(' or '-', found byte 0xC3" },
	{ "1e", "position 2: malformed number" },
	{ "1e+", "position 2: malformed number" },
	{ "1e5x", "position 4: malformed number" },
	{ "1e400", "position 1: number out of range" },
	{ "1.5.2", "position 4: malformed number" },
	{ "2x", "position 2: malformed number" },
	{ ".", "position 1: expected digits in number" },
	{ "1 ! 2", "position 3: expected an operator or the end, found '!'" },
	{ "1 ** 2", "position 4: expected a number, a variable, '(' or '-', found '*'" },
	{ "()", "position 2: expected a number, a variable, '(' or '-', found ')'" },
	{ "x)", "position 2: expected an operator or the end, found ')'" },
};

/* The source as a one-line test name (control characters shown as '?'). */
static const char *name_of(const char *src)
{
	static char buf[128];
	size_t i;
	for (i = 0; src[i] && i + 1 < sizeof buf; i++)
		buf[i] = (unsigned char)src[i] < 0x20 ? '?' : src[i];
	buf[i] = '\0';
	return buf;
}

static double eval_src(const char *src, int *dz, char *err, size_t errlen)
{
	struct expr *e;
	double v;
	if (expr_parse(src, vars, NVARS, &e, err, errlen) < 0)
		return NAN;
	*dz = 0;
	v = expr_eval(e, values, dz);
	expr_free(e);
	return v;
}

static char *repeat(const char *a, int n, const char *mid, const char *b, int m)
{
	size_t la = strlen(a), lb = strlen(b), lm = strlen(mid);
	char *s = malloc(la * (size_t)n + lm + lb * (size_t)m + 1), *w = s;
	for (int i = 0; i < n; i++, w += la)
		memcpy(w, a, la);
	memcpy(w, mid, lm);
	w += lm;
	for (int i = 0; i < m; i++, w += lb)
		memcpy(w, b, lb);
	*w = '\0';
	return s;
}

static void limits(void)
{
	char err[256];
	struct expr *e;
	int dz;
	char *s;

	s = repeat("(", 64, "1", ")", 64);
	is_int(expr_parse(s, NULL, 0, &e, err, sizeof err), 0, "64 nested parentheses parse");
	expr_free(e);
	free(s);
	s = repeat("(", 65, "1", ")", 65);
	is_int(expr_parse(s, NULL, 0, &e, err, sizeof err), -1, "65 nested parentheses rejected");
	is_str(err, "position 65: nesting deeper than 64 levels", "depth error names the position");
	ok(e == NULL, "no tree on error");
	free(s);
	s = repeat("-", 64, "1", "", 0);
	is_int(expr_parse(s, NULL, 0, &e, err, sizeof err), 0, "64 unary minus parse");
	dz = 0;
	ok(expr_eval(e, NULL, &dz) == 1.0, "64 unary minus evaluate to 1");
	expr_free(e);
	free(s);
	s = repeat("-", 65, "1", "", 0);
	is_int(expr_parse(s, NULL, 0, &e, err, sizeof err), -1, "65 unary minus rejected");
	free(s);
	s = repeat("min(", 64, "2", ")", 64);
	is_int(expr_parse(s, NULL, 0, &e, err, sizeof err), 0, "64 nested calls parse");
	expr_free(e);
	free(s);
	s = repeat("max(1, ", 65, "2", ")", 65);
	is_int(expr_parse(s, NULL, 0, &e, err, sizeof err), -1, "65 nested calls rejected");
	is_str(err, "position 449: nesting deeper than 64 levels", "call depth error position");
	free(s);

	/* Length: 65536 bytes parse, 65537 do not. A long flat sum is not "deep". */
	s = repeat("1+", 32767, "1 ", "", 0);
	is_int((int)strlen(s), 65536, "65536-byte source built");
	is_int(expr_parse(s, NULL, 0, &e, err, sizeof err), 0, "65536-byte flat sum parses");
	dz = 0;
	ok(expr_eval(e, NULL, &dz) == 32768.0, "65536-byte flat sum = 32768");
	expr_free(e);
	free(s);
	s = repeat("1+", 32768, "1", "", 0);
	is_int(expr_parse(s, NULL, 0, &e, err, sizeof err), -1, "65537-byte source rejected");
	is_str(err, "position 65537: expression longer than 65536 bytes", "length error");
	free(s);

	/* Error buffer edge cases. */
	is_int(expr_parse("1 +", NULL, 0, &e, NULL, 0), -1, "error with no buffer");
	is_int(expr_parse("1 +", NULL, 0, &e, err, 5), -1, "error with a tiny buffer");
	is_int((int)strlen(err), 4, "tiny buffer truncated and terminated");
	is_int(expr_parse(NULL, NULL, 0, &e, err, sizeof err), -1, "NULL source rejected");
	s = repeat("a", 200, "", "", 0);
	is_int(expr_parse(s, NULL, 0, &e, err, sizeof err), -1, "long unknown name rejected");
	ok(strlen(err) < 120, "long unknown name is shortened in the message");
	free(s);
}

static void big_numbers(void)
{
	char err[256];
	struct expr *e;
	char *s = repeat("9", 400, "", "", 0);
	is_int(expr_parse(s, NULL, 0, &e, err, sizeof err), -1, "400-digit literal rejected");
	is_str(err, "position 1: number out of range", "out-of-range literal message");
	free(s);
	s = repeat("9", 300, " * ", "9", 300);
	is_int(expr_parse(s, NULL, 0, &e, err, sizeof err), 0, "300-digit literals parse");
	ok(isinf(expr_eval(e, NULL, NULL)), "their product overflows to inf (the primitive clamps)");
	expr_free(e);
	free(s);
}

static void seed_formulas(void)
{
	static const char *const rv[] = { "retries", "declared_retries", "timeouts", "hard_failures" };
	static const char *const sv[] = { "quality", "steps_completed", "total_steps" };
	const char *rel = "1 - 0.1*max(0, retries - declared_retries) - 0.2*timeouts - 0.5*hard_failures";
	const char *suc = "quality * steps_completed / total_steps";
	struct expr *r, *s;
	char err[256];
	int dz = 0;

	is_int(expr_parse(rel, rv, 4, &r, err, sizeof err), 0, "seed reliability formula parses");
	is_int(expr_parse(suc, sv, 3, &s, err, sizeof err), 0, "seed success formula parses");
	{
		const double v[] = { 3, 1, 1, 0 };
		ok(fabs(expr_eval(r, v, &dz) - 0.6) < 1e-12, "reliability: 2 extra retries, 1 timeout = 0.6");
	}
	{
		const double v[] = { 0, 2, 0, 0 };
		ok(expr_eval(r, v, &dz) == 1.0, "reliability: fewer retries than declared = 1");
	}
	{
		const double v[] = { 5, 0, 2, 1 };
		ok(fabs(expr_eval(r, v, &dz) - (-0.4)) < 1e-12, "reliability below 0 is not clamped here (-0.4)");
	}
	ok(dz == 0, "no division by zero in reliability");
	{
		const double v[] = { 0.9, 8, 10 };
		ok(fabs(expr_eval(s, v, &dz) - 0.72) < 1e-12, "success: 0.9 x 8/10 = 0.72");
		ok(dz == 0, "no division by zero");
	}
	{
		const double v[] = { 0.9, 0, 0 };
		ok(expr_eval(s, v, &dz) == 0.0, "success with total_steps 0 = 0");
		ok(dz == 1, "and reports the division by zero");
	}
	expr_free(r);
	expr_free(s);
	is_int(expr_parse(rel, rv, 3, &r, err, sizeof err), -1, "reliability without hard_failures declared");
	is_str(err, "position 65: unknown variable 'hard_failures'", "names the undeclared variable");
}

/* Exact rational evaluation (common/README.md "Expressions"): results as reduced fractions. */
static void exact(void)
{
	static const struct { const char *src; long long num, den; } cases[] = {
		{ "0.1 + 0.2 == 0.3", 1, 1 },            /* 0 in binary double */
		{ "(1 / 3) * 3 == 1", 1, 1 },
		{ "1/3 + 1/3 + 1/3 - 1", 0, 1 },
		{ "round(2.675 * 100)", 268, 1 },         /* 267 in binary double */
		{ "floor(-7 / 2)", -4, 1 }, { "ceil(-7 / 2)", -3, 1 }, { "round(-2.5)", -2, 1 },
		{ "min(1/3, 0.333, 1)", 333, 1000 }, { "max(1/3, 0.333)", 1, 3 },
		{ "clamp(y * 3, 0, 1)", 1, 1 }, { "x / 7", 3, 7 }, { "1.5e2 - 1e-2", 14999, 100 },
		{ "x / zero + 1", 1, 1 }, { "abs(-0.125)", 1, 8 }, { "if(0.1 * 3 == 0.3, 2, 5)", 2, 1 },
		{ "(x > y) && !(zero)", 1, 1 }, { "1 - 0.1 * min_score", 3, 10 },
	};
	struct expr_q qv[NVARS];
	for (size_t i = 0; i < NVARS; i++)   /* 3, 0.5, 0, 7 */
		qv[i] = i == 1 ? expr_q_from_dec(5, -1, 0.5) : expr_q_int((long long)values[i]);
	char err[256];
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct expr *e;
		if (expr_parse(cases[i].src, vars, NVARS, &e, err, sizeof err) < 0) {
			ok(0, "%s parses (%s)", cases[i].src, err);
			continue;
		}
		int dz = 0;
		struct expr_q q = expr_eval_q(e, qv, NULL, &dz);
		ok(q.exact && !q.missing && q.num == cases[i].num && q.den == cases[i].den,
		   "exact: %s = %lld/%lld", cases[i].src, cases[i].num, cases[i].den);
		if (!q.exact || q.num != cases[i].num || q.den != cases[i].den)
			diag("got exact %d %lld/%lld (%g)", q.exact, (long long)q.num, (long long)q.den, q.d);
		expr_free(e);
	}
	/* Beyond 127 bits the value continues as a binary double, said by exact = false. */
	struct expr *e;
	if (expr_parse("1e30 * 1e30 * 1e30 * 1e30 * 1e30 * 1e30", vars, NVARS, &e, err, sizeof err) == 0) {
		struct expr_q q = expr_eval_q(e, qv, NULL, NULL);
		ok(!q.exact && q.d > 0.99e180 && q.d < 1.01e180, "1e180 is not exact, its double is %g", q.d);
		expr_free(e);
	}
	if (expr_parse("1e30 * 1e30 * 1e30 * 1e30 / 1e30 / 1e30 / 1e30 / 1e30 > 0.5", vars, NVARS, &e,
	               err, sizeof err) == 0) {
		struct expr_q q = expr_eval_q(e, qv, NULL, NULL);
		ok(q.exact && q.num == 1, "a comparison of inexact values still yields 1 or 0");
		expr_free(e);
	}
	/* The exact and the double evaluation agree on every value case (to double precision). */
	int differ = 0;
	for (size_t i = 0; i < sizeof val_cases / sizeof val_cases[0]; i++) {
		if (expr_parse(val_cases[i].src, vars, NVARS, &e, err, sizeof err) < 0)
			continue;
		struct expr_q q = expr_eval_q(e, qv, NULL, NULL);
		double d = expr_eval(e, values, NULL);
		if (!(q.d == d || fabs(q.d - d) <= 1e-12 * fabs(d)) && differ++ < 5)
			diag("%s: exact %.17g, double %.17g", val_cases[i].src, q.d, d);
		expr_free(e);
	}
	is_int(differ, 0, "exact and double evaluation agree on the %zu value cases",
	       sizeof val_cases / sizeof val_cases[0]);
}

int main(void)
{
	char err[256];

	exact();

	for (size_t i = 0; i < sizeof val_cases / sizeof val_cases[0]; i++) {
		const struct val_case *c = &val_cases[i];
		int dz = -1;
		double v;
		err[0] = '\0';
		v = eval_src(c->src, &dz, err, sizeof err);
		if (!ok(v == c->want, "%s = %g", name_of(c->src), c->want))
			diag("got %.17g (%s)", v, err);
		is_int(dz, c->div_zero, "%s: div_zero %d", name_of(c->src), c->div_zero);
	}
	for (size_t i = 0; i < sizeof err_cases / sizeof err_cases[0]; i++) {
		const struct err_case *c = &err_cases[i];
		struct expr *e = (struct expr *)&err;
		err[0] = '\0';
		is_int(expr_parse(c->src, vars, NVARS, &e, err, sizeof err), -1, "'%s' is rejected",
		       name_of(c->src));
		is_str(err, c->err, "'%s': message", name_of(c->src));
		ok(e == NULL, "'%s': *out is NULL", name_of(c->src));
	}
	{
		struct expr *e;
		int dz = 0;
		is_int(expr_parse("1 / 0", NULL, 0, &e, err, sizeof err), 0, "div_zero may be NULL: parse");
		ok(expr_eval(e, NULL, NULL) == 0.0, "div_zero may be NULL: eval");
		dz = 1;
		expr_free(e);
		is_int(expr_parse("1 / 2", NULL, 0, &e, err, sizeof err), 0, "div_zero is never cleared: parse");
		expr_eval(e, NULL, &dz);
		is_int(dz, 1, "div_zero is never cleared");
		expr_free(e);
		expr_free(NULL);
		ok(1, "expr_free(NULL) returns (only a crash or an ASan report can fail this)");
	}
	limits();
	big_numbers();
	seed_formulas();
	return tap_done();
}
