/*
 * JSON comparison for the scoring primitives (common/README.md "Scoring spec"): deep equality
 * where 1 equals 1.0 (numbers compared as exact decimals), arrays in order,
 * objects by key set; optional Unicode case folding of every string value;
 * and a canonical text (sorted keys, canonical numbers) that identifies an
 * item in a set. Pure: no I/O.
 */
#ifndef ARBITER_JCANON_H
#define ARBITER_JCANON_H

#include <jansson.h>
#include <stdbool.h>

#include "util.h"

/* True when a and b are deep-equal JSON. With fold_case, string values (not object keys) are
 * compared after full Unicode case folding (utf8proc; "Straße" equals "STRASSE"). NULL equals
 * only NULL. Recursion depth is bounded by jansson's parser depth. */
bool jcanon_equal(const json_t *a, const json_t *b, bool fold_case);
/* Appends the canonical text of v to out: objects with keys sorted bytewise, no spaces, numbers
 * as dec_num_format (so 1 and 1.0 give the same text), strings JSON-escaped (UTF-8 kept). */
void jcanon_dump(const json_t *v, struct strbuf *out);
/* Case-folds UTF-8 text (full folding). Returns a malloc'd NUL-terminated string (caller
 * frees) and its length in *outlen, or NULL if s is not valid UTF-8. */
char *jcanon_casefold(const char *s, size_t len, size_t *outlen);

/* The JSON type of v for messages: "an object", "an array", "a string", "a number",
 * "a boolean", "null"; "missing" when v is NULL. Static storage. */
const char *jcanon_type_name(const json_t *v);

#endif
