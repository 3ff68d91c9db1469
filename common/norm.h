/*
 * Text normalisation for scoring specs (common/README.md "Normalisation"): the
 * `normalize` option shared by every primitive that compares strings or
 * items. A spec lists steps; they always run in this fixed order, whatever
 * the order written: nfkc, casefold, separators (`-`, `_` and whitespace
 * become one space), punctuation (Unicode P* code points removed),
 * whitespace (runs of Unicode whitespace become one space), trim, then
 * numeric (a string that is then a JSON number, such as "42" or "-1.50",
 * becomes that number, compared exactly as numbers are). Pure: no I/O.
 */
#ifndef ARBITER_NORM_H
#define ARBITER_NORM_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
	NORM_NFKC = 1u << 0,
	NORM_CASEFOLD = 1u << 1,
	NORM_SEPARATORS = 1u << 2,
	NORM_PUNCTUATION = 1u << 3,
	NORM_WHITESPACE = 1u << 4,
	NORM_TRIM = 1u << 5,
	NORM_NUMERIC = 1u << 6,
};

/* Same, writing into buf when the result fits cap bytes (with its NUL); otherwise, or with buf
 * NULL, into a malloc'd string. The caller frees the result unless it is buf. */
char *norm_text_buf(unsigned steps, const char *s, size_t len, char *buf, size_t cap,
                    size_t *outlen);
/* Reads a `normalize` value: an array of step names ("trim", "casefold", "nfkc", "whitespace",
 * "punctuation", "separators", "numeric"). Returns 0 and the step bits, or -1 with a message
 * naming the offending element ("normalize[2]: unknown step 'lower' (known: ...)"). */
int norm_parse(const json_t *v, unsigned *steps, char *err, size_t errlen);
/* The text steps applied to UTF-8 s[0..len): a malloc'd NUL-terminated result (caller frees)
 * and its length in *outlen; invalid UTF-8 is copied through unchanged by the Unicode steps. */
/* True when s[0..len) has no byte >= 0x80 (pure ASCII). */
bool norm_is_ascii(const char *s, size_t len);
/* True for a Unicode white-space code point (ASCII blanks and controls 9-13,
 * categories Zs/Zl/Zp, U+0085): the rule every text comparison shares. */
bool norm_is_space(int32_t c);

char *norm_text(unsigned steps, const char *s, size_t len, size_t *outlen);
/* A new reference: v with every string value inside (not object keys) normalised, and with
 * NORM_NUMERIC numeric strings turned into numbers. steps 0 returns v itself (incref'd). */
json_t *norm_value(unsigned steps, const json_t *v);
/* What NORM_NUMERIC makes of the normalised text t[0..n) (ASCII blanks around it ignored): 1
 * and its exact value in *out when norm_value would turn it into a number (so two such texts
 * are equal as values exactly when dec_num_cmp says so), 0 when it stays a string. */
struct dec_num;
int norm_numeric(const char *t, size_t n, struct dec_num *out);
/* Writes the step names in their fixed order, comma-separated ("casefold,trim"). */
void norm_describe(unsigned steps, char *buf, size_t n);

#endif
