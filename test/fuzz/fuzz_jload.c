/*
 * libFuzzer harness for common/jload: whatever jload reads must be exactly what
 * json_loadb(JSON_DECODE_ANY) reads (types, member order, string bytes, reals bit for bit:
 * compared through json_dumps with every real's 17 digits and the member order kept), and
 * what jansson refuses jload must leave (NULL). Aborts on a difference; never crashes, leaks
 * or trips UBSan.
 */
#include "jload.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_error_t je;
	json_t *a = jload((const char *)data, size);
	json_t *b = json_loadb((const char *)data, size, JSON_DECODE_ANY, &je);
	if (a) {
		if (!b)
			abort();   /* jload read what jansson refuses */
		size_t f = JSON_ENCODE_ANY | JSON_REAL_PRECISION(17) | JSON_COMPACT;
		char *ta = json_dumps(a, f), *tb = json_dumps(b, f);
		if (!ta || !tb || strcmp(ta, tb) || !json_equal(a, b))
			abort();   /* read differently */
		free(ta);
		free(tb);
	}
	json_decref(a);
	json_decref(b);
	return 0;
}
