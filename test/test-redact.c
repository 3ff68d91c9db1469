/*
 * Unit tests for worker/redact.c: every connection string of
 * test/data/redact_cases.json is shown exactly as the table says, and its
 * secret never appears. The same table drives the scripts' helper and the
 * outputs of the worker and the scripts (test/integration/test_redaction.py).
 */
#undef NDEBUG
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "redact.h"
#include "tap.h"

int main(void)
{
	json_error_t jerr;
	json_t *root = json_load_file("test/data/redact_cases.json", 0, &jerr);
	ok(root != NULL, "load test/data/redact_cases.json (%s)", root ? "ok" : jerr.text);
	if (!root)
		return tap_done();
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(root, "cases"), i, c) {
		const char *in = json_string_value(json_object_get(c, "in"));
		const char *want = json_string_value(json_object_get(c, "want"));
		const char *secret = json_string_value(json_object_get(c, "secret"));
		char *got = redact_conn(in);
		is_str(got, want, "case %zu shown as the table says", i);
		if (secret)
			ok(!strstr(got, secret), "case %zu: secret not shown", i);
		free(got);
		got = log_redact_url(in);
		is_str(got, want, "case %zu: log_redact_url is the same", i);
		free(got);
	}
	json_decref(root);
	char *got = redact_conn(NULL);
	is_str(got, "", "NULL shows as empty");
	free(got);
	return tap_done();
}
