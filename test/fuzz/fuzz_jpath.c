/*
 * libFuzzer harness for JSON paths (common/jpath): the first line of the
 * input is a path, the rest a JSON document to resolve it in (a fixed
 * document is used too). Must never crash or trip the sanitizers.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jpath.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static json_t *fixed;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!fixed)
		fixed = json_loads("{\"a\":{\"b\":[1,{\"c\":[true,null,\"x\"]}],\"0\":2},\"a.b\":[[[3]]],"
		                   "\"\":{\"\":4}}", 0, NULL);
	const char *s = (const char *)data;
	const char *nl = memchr(s, '\n', size);
	size_t plen = nl ? (size_t)(nl - s) : size;
	struct jpath *p;
	char err[200], why[200];
	if (jpath_parse(s, plen, &p, err, sizeof err) < 0) {
		if (!strstr(err, "position "))
			abort();
		return 0;
	}
	if (strlen(jpath_text(p)) > plen)
		abort();
	jpath_get(p, fixed, why, sizeof why);
	if (nl) {
		json_t *doc = json_loadb(nl + 1, size - plen - 1, JSON_DECODE_ANY, NULL);
		if (doc) {
			const json_t *v = jpath_get(p, doc, why, sizeof why);
			(void)v;
			jpath_get(p, doc, NULL, 0);
			json_decref(doc);
		}
	}
	jpath_free(p);
	return 0;
}
