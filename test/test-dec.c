/*
 * Unit tests for common/dec: exact decimals from JSON numbers (shortest
 * round-trip text), the 6-place limit, formatting without binary noise,
 * canonical dec_num text and exact comparison. Table-driven.
 */
#include "dec.h"
#include "tap.h"

#include <math.h>

struct from_case {
	const char *json;   /* a JSON number */
	int rc;
	long long micro;
	int places;
};

static const struct from_case from_cases[] = {
	{ "0.15", 0, 150000, 2 },
	{ "0.5", 0, 500000, 1 },
	{ "1", 0, 1000000, 0 },
	{ "1.0", 0, 1000000, 0 },
	{ "0.1", 0, 100000, 1 },
	{ "0.000001", 0, 1, 6 },
	{ "0.123456", 0, 123456, 6 },
	{ "0.1234567", -1, 0, 7 },
	{ "1e-7", -1, 0, 7 },
	{ "1e-6", 0, 1, 6 },
	{ "2.5e-1", 0, 250000, 2 },
	{ "-0.25", 0, -250000, 2 },
	{ "0.333333", 0, 333333, 6 },
	{ "0.30000000000000004", -1, 0, 17 },
	{ "9223372036854", 0, 9223372036854000000LL, 0 },
	{ "9223372036855", -1, 0, 0 },
	{ "1e300", -1, 0, 0 },
	{ "0", 0, 0, 0 },
	{ "-0.0", 0, 0, 0 },
	{ "1e-300", -1, 0, 300 },
};

struct fmt_case {
	long long micro;
	const char *text;
};

static const struct fmt_case fmt_cases[] = {
	{ 450000000, "450" }, { 103500000, "103.5" }, { 150000, "0.15" }, { -2000000, "-2" },
	{ 0, "0" }, { 1, "0.000001" }, { -1, "-0.000001" }, { 114000000, "114" },
	{ 156000000, "156" }, { 1000000000, "1000" }, { 84450000, "84.45" }, { 999999, "0.999999" },
	{ 123456789, "123.456789" },
};

struct short_case {
	double d;
	const char *text;
};

static const struct short_case short_cases[] = {
	{ 0.15, "0.15" }, { 700, "700" }, { 1e-7, "1e-07" }, { 0.1234567, "0.1234567" },
	{ 1.5e300, "1.5e+300" }, { -0.001, "-0.001" }, { 0.0001, "0.0001" }, { 0.00001, "1e-05" },
	{ 1e15, "1000000000000000" }, { 1e16, "1e+16" }, { 123.456, "123.456" }, { 0, "0" },
	{ 0.30000000000000004, "0.30000000000000004" }, { 100.5, "100.5" }, { -7, "-7" },
	{ 5e-324, "5e-324" },
};

struct num_case {
	const char *json;
	const char *canon;
};

static const struct num_case num_cases[] = {
	{ "1", "1" }, { "1.0", "1" }, { "100", "1e2" }, { "1e2", "1e2" }, { "0.10", "1e-1" },
	{ "-0.0", "0" }, { "0", "0" }, { "123.45", "12345e-2" }, { "-5", "-5" },
	{ "9007199254740993", "9007199254740993" }, { "1e-300", "1e-300" },
	{ "0.30000000000000004", "30000000000000004e-17" },
};

static json_t *num(const char *text)
{
	json_error_t je;
	return json_loads(text, JSON_DECODE_ANY, &je);
}

int main(void)
{
	char buf[64];
	for (size_t i = 0; i < sizeof from_cases / sizeof from_cases[0]; i++) {
		const struct from_case *c = &from_cases[i];
		json_t *j = num(c->json);
		dec6 v = -42;
		int places = -1;
		int rc = dec_from_json(j, &v, &places);
		is_int(rc, c->rc, "dec_from_json(%s) rc", c->json);
		if (c->rc == 0)
			is_int(v, c->micro, "dec_from_json(%s) value", c->json);
		is_int(places, c->places, "dec_from_json(%s) places", c->json);
		json_decref(j);
	}
	json_t *s = json_string("0.5"), *t = json_true();
	ok(dec_from_json(s, &(dec6){ 0 }, NULL) < 0, "a string is not a number");
	ok(dec_from_json(t, &(dec6){ 0 }, NULL) < 0, "true is not a number");
	ok(dec_from_json(NULL, &(dec6){ 0 }, NULL) < 0, "NULL is not a number");
	json_decref(s);
	json_decref(t);

	for (size_t i = 0; i < sizeof fmt_cases / sizeof fmt_cases[0]; i++) {
		int n = dec_format(fmt_cases[i].micro, buf, sizeof buf);
		is_str(buf, fmt_cases[i].text, "dec_format(%lld)", fmt_cases[i].micro);
		is_int(n, strlen(fmt_cases[i].text), "dec_format(%lld) length", fmt_cases[i].micro);
	}
	dec_format(INT64_MIN, buf, sizeof buf);
	is_str(buf, "-9223372036854.775808", "dec_format(INT64_MIN)");
	dec_format(150000, buf, 3);
	is_str(buf, "0.", "dec_format truncates to the buffer");

	for (size_t i = 0; i < sizeof short_cases / sizeof short_cases[0]; i++) {
		dec_shortest(short_cases[i].d, buf, sizeof buf);
		is_str(buf, short_cases[i].text, "dec_shortest(%.17g)", short_cases[i].d);
	}
	ok(dec_shortest(NAN, buf, sizeof buf) < 0, "dec_shortest(NaN) fails");

	for (size_t i = 0; i < sizeof num_cases / sizeof num_cases[0]; i++) {
		json_t *j = num(num_cases[i].json);
		struct dec_num d;
		ok(dec_num_from_json(j, &d) == 0, "dec_num_from_json(%s)", num_cases[i].json);
		dec_num_format(&d, buf, sizeof buf);
		is_str(buf, num_cases[i].canon, "canonical %s", num_cases[i].json);
		json_decref(j);
	}

	/* Exact comparison. */
	static const struct { struct dec_num a, b; int cmp; } cmps[] = {
		{ { 1, 0 }, { 1, 0 }, 0 }, { { 1, 0 }, { 2, 0 }, -1 }, { { -1, 0 }, { 1, -300 }, -1 },
		{ { 1, 2 }, { 99, 0 }, 1 }, { { 101, -2 }, { 1, 0 }, 1 }, { { 1, -2 }, { 1, -3 }, 1 },
		{ { -5, -1 }, { -4, -1 }, -1 }, { { 0, 0 }, { -1, -20 }, 1 }, { { 0, 0 }, { 0, 0 }, 0 },
		{ { 123456789012345678LL, -17 }, { 123456789012345679LL, -17 }, -1 },
		{ { 12, 0 }, { 1200, -2 }, 0 }, { { 9223372036854775807LL, 0 }, { 9223372036854775807LL, 0 }, 0 },
	};
	for (size_t i = 0; i < sizeof cmps / sizeof cmps[0]; i++) {
		is_int(dec_num_cmp(&cmps[i].a, &cmps[i].b), cmps[i].cmp, "dec_num_cmp #%zu", i);
		is_int(dec_num_cmp(&cmps[i].b, &cmps[i].a), -cmps[i].cmp, "dec_num_cmp #%zu reversed", i);
	}
	struct dec_num h = { 15, -2 };
	ok(fabsl(dec_num_ld(&h) - 0.15L) < 1e-18L, "dec_num_ld");
	ok(dec_num_is_zero(&(struct dec_num){ 0, 0 }) && !dec_num_is_zero(&h), "dec_num_is_zero");
	struct dec_num dd;
	ok(dec_num_from_double(INFINITY, &dd) < 0, "infinity is rejected");
	return tap_done();
}
