/*
 * libFuzzer harness for common/weights (the cap comes from the command line,
 * scores from a file or the database). Input: any bytes. The first line is a
 * cap for weights_parse_cap; the rest is read as 4-byte little-endian scores
 * (up to 256, so their sum stays far below 2^63). Checks,
 * besides memory safety: units sum to exactly the scale, numerators to the
 * denominator, every weight is within one unit of its exact value and, when
 * some score is positive, none is above the effective cap.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "weights.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size);
	size_t clen = nl ? (size_t)(nl - data) : size;
	char cap[64];
	uint64_t cn = 15, cd = 100;
	if (clen < sizeof cap) {
		memcpy(cap, data, clen);
		cap[clen] = '\0';
		if (weights_parse_cap(cap, &cn, &cd) == 0 && (cn == 0 || cn > cd || cd > 1000000000ULL))
			abort();
		if (weights_parse_cap(cap, &cn, &cd) != 0) {
			cn = 15;
			cd = 100;
		}
	}
	const uint8_t *p = nl ? nl + 1 : data + size;
	size_t rest = (size_t)(data + size - p);
	size_t n = rest / 4 > 256 ? 256 : rest / 4;
	int64_t scores[256];
	uint64_t units[256];
	weights_u128 num[256];
	for (size_t i = 0; i < n; i++)
		scores[i] = (int64_t)((uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
		                      (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24);
	struct weights_out o = { .units = units, .num = num };
	if (weights_capped(scores, n, cn, cd, 1000000000ULL, &o) != 0)
		abort();
	if (n == 0)
		return 0;
	weights_u128 sum = 0;
	uint64_t usum = 0;
	for (size_t i = 0; i < n; i++) {
		sum += num[i];
		usum += units[i];
		weights_u128 v = num[i] * 1000000000ULL;
		weights_u128 lo = v / o.den;
		if (units[i] < lo || units[i] > lo + 1)
			abort();
		if (o.positive && num[i] * o.cap_den > (weights_u128)o.cap_num * o.den)
			abort();
	}
	if (sum != o.den || usum != 1000000000ULL)
		abort();
	return 0;
}
