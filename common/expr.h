/*
 * Expression language of the `expression` primitive (common/README.md "Scoring spec"): decimal
 * numbers, declared variables, + - * / (also × ÷), unary minus, parentheses,
 * min(a, ...), max(a, ...), clamp(x, lo, hi) and comparisons (< <= > >= == !=,
 * yielding 1 or 0; a comparison's operands may not themselves be bare comparisons,
 * so `a < b < c` is rejected), boolean ! && || (1 or 0), if(c, a, b), abs,
 * round (half up), floor, ceil, len(var), coalesce(a, ...). A recursive-descent parser builds an immutable
 * tree; there is no eval of source text. Evaluation is exact on fractions (expr_eval_q;
 * common/README.md "Exact expressions"), or in double (expr_eval, expr_eval_ex). Pure: no I/O.
 */
#ifndef ARBITER_EXPR_H
#define ARBITER_EXPR_H

#include <stdbool.h>
#include <stddef.h>

#define EXPR_MAX_DEPTH 64      /* nesting limit (parentheses, calls, unary minus, !) */
#define EXPR_MAX_LEN   65536   /* source length limit in bytes */
#define EXPR_MAX_NUMBER 400    /* longest number literal */

struct expr;
/* Parses `src` using only the names in vars[0..nvars). Depth limit 64, length limit 4096.
 * -1 with a message naming the position on error.
 * src is NUL-terminated. On success returns 0 and *out owns a tree (free with expr_free);
 * it does not reference src or vars. On error returns -1, *out = NULL, and err (if errlen > 0)
 * gets "position P: <what>", P being the 1-based byte offset of the offending token (the
 * source length + 1 when the text ended too early). */
int expr_parse(const char *src, const char *const *vars, size_t nvars, struct expr **out,
               char *err, size_t errlen);
/* Evaluates with values[i] bound to vars[i]. *div_zero set to 1 if a division by zero
 * happened (that division yields 0). Result is NOT clamped (the primitive clamps).
 * div_zero may be NULL; it is only ever set to 1, never cleared. */
double expr_eval(const struct expr *e, const double *values, int *div_zero);
/* Same with lens[i] the length of variable i's value for len(); a NaN value means "missing":
 * it propagates through every operator except coalesce (first non-missing argument) and the
 * branch of if that is not taken; the caller reports a NaN result. */
double expr_eval_ex(const struct expr *e, const double *values, const double *lens, int *div_zero);
/* A value of the exact evaluation: the fraction num/den (den > 0, reduced) when exact;
 * otherwise (a step whose result does not fit 127-bit integers, or a literal that does not)
 * the binary double d, and every step using it is in double too. missing: no value. */
struct expr_q {
	__int128 num, den;
	double d;        /* the value as a double (always set) */
	bool exact, missing;
};
/* Exact values for variables: an integer; m × 10^e (a JSON number's shortest decimal, see
 * dec.h), approx its double (used when it does not fit); no value. */
struct expr_q expr_q_int(long long v);
struct expr_q expr_q_from_dec(long long m, int e, double approx);
struct expr_q expr_q_missing(void);
/* num/den exactly (den > 0; reduced here), or its double when either needs more than 127 bits;
 * and a value known only as a double (never exact). */
struct expr_q expr_q_ratio(unsigned __int128 num, unsigned __int128 den);
struct expr_q expr_q_double(double d);
/* expr_eval_ex in exact rational arithmetic (common/README.md "Expressions"): + - * /, min, max,
 * clamp, comparisons, abs, floor, ceil, round and the logic operators are exact on
 * fractions; x / 0 is 0 and sets *div_zero. lens may be NULL. */
struct expr_q expr_eval_q(const struct expr *e, const struct expr_q *values,
                          const struct expr_q *lens, int *div_zero);
/* a / b (b not zero), a + b, and the sign of a - b, exact as in the evaluation. */
struct expr_q expr_q_div(struct expr_q a, struct expr_q b);
struct expr_q expr_q_add(struct expr_q a, struct expr_q b);
int expr_q_cmp(struct expr_q a, struct expr_q b);
/* How variable i is used: bit 1 as a number, bit 2 inside len(); 0 if unused. */
unsigned expr_var_use(const struct expr *e, size_t i);
/* True when the expression calls coalesce (missing variables are then allowed). */
bool expr_has_coalesce(const struct expr *e);
/* Frees the tree; NULL is ok. */
void expr_free(struct expr *e);

#endif
