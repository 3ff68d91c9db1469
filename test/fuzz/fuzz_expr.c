/*
 * libFuzzer harness for common/expr: any byte string is parsed with a fixed set of
 * declared variables; a successful parse is evaluated (twice, with values that include
 * zero so divisions by zero happen) and must be deterministic; a failed parse must leave
 * *out NULL and a "position N: ..." message.
 */
#include "expr.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const vars[] = { "a", "b", "x_1", "min", "zero" };
	static const double v1[] = { 1.5, -2, 1e308, 3, 0 };
	static const double v2[] = { 0, 0, -0.0, 0, 0 };
	char *src, err[128];
	struct expr *e = NULL;

	if (size > EXPR_MAX_LEN + 16)
		return 0;
	src = malloc(size + 1);
	memcpy(src, data, size);
	src[size] = '\0';
	if (expr_parse(src, vars, 5, &e, err, sizeof err) == 0) {
		int dz1 = 0, dz2 = 0;
		double r1 = expr_eval(e, v1, &dz1), r2 = expr_eval(e, v1, &dz2);
		if (!(r1 == r2 || (isnan(r1) && isnan(r2))) || dz1 != dz2)
			abort();                     /* evaluation must be deterministic */
		(void)expr_eval(e, v2, NULL);
		/* the exact evaluation: deterministic too (and free of undefined behaviour under
		 * UBSan whatever the literals: overflows turn into doubles) */
		struct expr_q q1[5], q2[5];
		for (size_t i = 0; i < 5; i++) {
			q1[i] = i == 0 ? expr_q_from_dec(15, -1, 1.5) : i == 2 ? expr_q_from_dec(1, 308, 1e308)
			                                                  : expr_q_int((long long)v1[i]);
			q2[i] = expr_q_int(0);
		}
		dz1 = dz2 = 0;
		struct expr_q a = expr_eval_q(e, q1, NULL, &dz1), b = expr_eval_q(e, q1, NULL, &dz2);
		if (a.exact != b.exact || a.missing != b.missing || dz1 != dz2 ||
		    (a.exact && (a.num != b.num || a.den != b.den || a.den <= 0)) ||
		    (!a.exact && !(a.d == b.d || (isnan(a.d) && isnan(b.d)))))
			abort();
		(void)expr_eval_q(e, q2, q2, NULL);
		expr_free(e);
	} else {
		if (e != NULL || strncmp(err, "position ", 9) != 0)
			abort();
	}
	free(src);
	return 0;
}
