/*
 * libFuzzer harness for common/rx: the input's first line is a pattern (its
 * first byte's low bit selects case-insensitive matching), the rest is the
 * text. A pattern that compiles is searched with a fixed work budget, twice,
 * and must give the same answer both times; a pattern that fails must leave
 * *out NULL and a "position N: ..." message. Never crashes, leaks, trips UBSan
 * or runs long (the budget bounds the work).
 */
#include "rx.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	bool icase = data[0] & 1;
	data++;
	size--;
	const uint8_t *nl = memchr(data, '\n', size);
	size_t plen = nl ? (size_t)(nl - data) : size;
	const char *text = nl ? (const char *)nl + 1 : "";
	size_t tlen = nl ? size - plen - 1 : 0;
	struct rx *r = (struct rx *)1;
	char err[200];
	if (rx_compile((const char *)data, plen, icase, &r, err, sizeof err) < 0) {
		if (r != NULL || strncmp(err, "position ", 9))
			abort();
		return 0;
	}
	if (rx_prog_size(r) > RX_MAX_PROG)
		abort();
	uint64_t b1 = 2000000, b2 = 2000000;
	int m1 = rx_search(r, text, tlen, &b1);
	int m2 = rx_search(r, text, tlen, &b2);
	if (m1 != m2 || b1 != b2 || m1 < -1 || m1 > 1)
		abort();
	rx_free(r);
	return 0;
}
