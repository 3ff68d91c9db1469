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
		expr_free(e);
	} else {
		if (e != NULL || strncmp(err, "position ", 9) != 0)
			abort();
	}
	free(src);
	return 0;
}
