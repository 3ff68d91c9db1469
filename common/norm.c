/*
 * The `normalize` option of scoring specs (see norm.h): Unicode steps through
 * utf8proc (NFKC, full case folding), then one pass over the code points for
 * separators, punctuation, whitespace and trimming; ASCII text skips utf8proc.
 */
#include "norm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "dec.h"
#include "jcanon.h"
#include "util.h"

static const char *const step_names[] = {
	"nfkc", "casefold", "separators", "punctuation", "whitespace", "trim", "numeric",
};
#define NSTEPS (sizeof step_names / sizeof step_names[0])

int norm_parse(const json_t *v, unsigned *steps, char *err, size_t errlen)
{
	*steps = 0;
	if (!json_is_array(v)) {
		snprintf(err, errlen, "normalize must be an array of steps (nfkc, casefold, separators, "
		         "punctuation, whitespace, trim, numeric), not %s", jcanon_type_name(v));
		return -1;
	}
	for (size_t i = 0; i < json_array_size(v); i++) {
		const json_t *s = json_array_get(v, i);
		size_t k = 0;
		if (json_is_string(s))
			while (k < NSTEPS && strcmp(step_names[k], json_string_value(s)))
				k++;
		if (!json_is_string(s) || k == NSTEPS) {
			snprintf(err, errlen, "normalize[%zu]: unknown step '%.40s' (known: nfkc, casefold, "
			         "separators, punctuation, whitespace, trim, numeric)", i,
			         json_is_string(s) ? json_string_value(s) : jcanon_type_name(s));
			return -1;
		}
		*steps |= 1u << k;
	}
	return 0;
}

void norm_describe(unsigned steps, char *buf, size_t n)
{
	size_t off = 0;
	if (n)
		buf[0] = 0;
	for (size_t k = 0; k < NSTEPS; k++)
		if (steps & (1u << k) && off < n)
			off += (size_t)snprintf(buf + off, n - off, "%s%s", off ? "," : "", step_names[k]);
}

bool norm_is_ascii(const char *s, size_t len)
{
	uint64_t any = 0;   /* high bits of 8 bytes at a time */
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t w;
		memcpy(&w, s + i, 8);
		any |= w;
	}
	for (; i < len; i++)
		any |= (unsigned char)s[i];
	return !(any & 0x8080808080808080ull);
}

bool norm_is_space(int32_t c)
{
	if (c == ' ' || (c >= 9 && c <= 13))
		return true;
	if (c < 128)
		return false;
	utf8proc_category_t k = utf8proc_category(c);
	return k == UTF8PROC_CATEGORY_ZS || k == UTF8PROC_CATEGORY_ZL || k == UTF8PROC_CATEGORY_ZP ||
	       c == 0x85;
}

static bool is_punct(int32_t c)
{
	if (c < 128)
		return (c >= 33 && c <= 47 && c != '$' && c != '+') || (c >= 58 && c <= 64 && c != '<' &&
		        c != '=' && c != '>') || (c >= 91 && c <= 96 && c != '^' && c != '`') ||
		       c == '{' || c == '}';
	utf8proc_category_t k = utf8proc_category(c);
	return k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
}

/* Classes of the ASCII characters for the one-pass fast path: white space (the rule of
 * norm_is_space), punctuation (is_punct) and the two separator characters besides space. */
enum { A_SPACE = 1, A_PUNCT = 2, A_SEP = 4 };
static const unsigned char ascii_class[128] = {   /* checked against both rules by test-norm */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	1, 2, 2, 2, 0, 2, 2, 2, 2, 2, 2, 0, 2, 6, 2, 2,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 0, 0, 0, 2,
	2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 0, 6,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 2, 0, 0,
};

/* norm_text_buf on pure-ASCII text: NFKC changes nothing there and case folding maps A-Z, so
 * the steps are one table-driven pass and a trim of both ends (same result as the general
 * path, which the unit tests compare on every ASCII character). */
static char *ascii_pass(unsigned steps, const char *s, size_t len, char *buf, size_t cap,
                        size_t *outlen)
{
	char *out = buf && len + 2 <= cap ? buf : xmalloc(len + 2);
	bool fold = steps & NORM_CASEFOLD, sep = steps & NORM_SEPARATORS;
	bool punct = steps & NORM_PUNCTUATION, ws = steps & NORM_WHITESPACE;
	size_t w = 0;
	if (!sep && !punct && !ws) {
		size_t i = 0;
		if (fold) {   /* 8 bytes at a time: A-Z found with carry-free byte arithmetic */
			const uint64_t ones = 0x0101010101010101ull, hi = 0x8080808080808080ull;
			for (; i + 8 <= len; i += 8) {
				uint64_t x;
				memcpy(&x, s + i, 8);
				uint64_t ge_a = (x + (0x80 - 'A') * ones) & hi;       /* byte >= 'A' */
				uint64_t gt_z = (x + (0x80 - 'Z' - 1) * ones) & hi;   /* byte > 'Z' */
				x |= (ge_a & ~gt_z) >> 2;                              /* +0x20 */
				memcpy(out + i, &x, 8);
			}
		}
		for (; i < len; i++) {
			unsigned char c = (unsigned char)s[i];
			out[i] = (char)(c + (fold && (unsigned char)(c - 'A') < 26) * ('a' - 'A'));
		}
		w = len;
	} else {
		bool pending = false;
		for (size_t i = 0; i < len; i++) {
			unsigned char c = (unsigned char)s[i];
			if (fold && (unsigned char)(c - 'A') < 26)
				c = (unsigned char)(c + ('a' - 'A'));
			unsigned k = ascii_class[c];
			if (sep && (k & (A_SPACE | A_SEP))) {
				c = ' ';
				k = A_SPACE;
			}
			if (punct && (k & A_PUNCT))
				continue;
			if (ws && (k & A_SPACE)) {
				pending = true;
				continue;
			}
			if (pending)
				out[w++] = ' ';
			pending = false;
			out[w++] = (char)c;
		}
		if (pending)
			out[w++] = ' ';
	}
	size_t start = 0, end = w;
	if (steps & NORM_TRIM) {
		while (start < end && (ascii_class[(unsigned char)out[start]] & A_SPACE))
			start++;
		while (end > start && (ascii_class[(unsigned char)out[end - 1]] & A_SPACE))
			end--;
	}
	if (start)
		memmove(out, out + start, end - start);
	w = end - start;
	out[w] = 0;
	*outlen = w;
	return out;
}

char *norm_text(unsigned steps, const char *s, size_t len, size_t *outlen)
{
	return norm_text_buf(steps, s, len, NULL, 0, outlen);
}

char *norm_text_buf(unsigned steps, const char *s, size_t len, char *buf, size_t cap,
                    size_t *outlen)
{
	char *work = NULL;   /* owned result of the Unicode passes, if any */
	size_t wlen = len;
	bool ascii = norm_is_ascii(s, len);
	/* NFKC, then case folding, as two passes: the order the README gives (folding after
	 * composing can leave a decomposed sequence, e.g. U+01F0 folds to j + U+030C). ASCII
	 * text is NFKC already and folds by mapping A-Z, done below while copying. */
	for (int pass = 0; pass < 2 && !ascii; pass++) {
		utf8proc_option_t o = pass == 0 ? UTF8PROC_COMPAT | UTF8PROC_COMPOSE | UTF8PROC_STABLE
		                                : UTF8PROC_CASEFOLD;
		if (!(steps & (pass == 0 ? NORM_NFKC : NORM_CASEFOLD)))
			continue;
		utf8proc_uint8_t *dst = NULL;
		utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)(work ? work : s),
		                                  (utf8proc_ssize_t)(work ? wlen : len), &dst, o);
		if (n == UTF8PROC_ERROR_NOMEM)
			abort();
		if (n >= 0) {
			free(work);
			work = (char *)dst;
			wlen = (size_t)n;
		}
	}
	if (ascii)
		return ascii_pass(steps, s, len, buf, cap, outlen);
	/* Folding A-Z while copying: text utf8proc rejected (invalid UTF-8). */
	bool fold_ascii = (steps & NORM_CASEFOLD) && !work;
	const char *src = work ? work : s;
	/* One pass: fold, separators → space, drop punctuation, collapse whitespace; then trim. */
	char *out = buf && wlen + 2 <= cap ? buf : xmalloc(wlen + 2);
	size_t w = 0, i = 0;
	bool pending = false;
	bool pass2 = steps & (NORM_SEPARATORS | NORM_PUNCTUATION | NORM_WHITESPACE | NORM_TRIM);
	if (!pass2) {   /* a copy, folding A-Z if asked: a tight loop */
		memcpy(out, src, wlen);
		if (fold_ascii)
			for (size_t k = 0; k < wlen; k++)
				out[k] = (char)(out[k] + ((unsigned char)(out[k] - 'A') < 26) * ('a' - 'A'));
		out[wlen] = 0;
		free(work);
		*outlen = wlen;
		return out;
	}
	while (i < wlen) {
		utf8proc_int32_t c;
		utf8proc_ssize_t n;
		if ((unsigned char)src[i] < 0x80) {   /* ASCII: no decoding */
			c = (unsigned char)src[i];
			if (fold_ascii && c >= 'A' && c <= 'Z')
				c += 'a' - 'A';
			if (!pass2) {
				out[w++] = (char)c;
				i++;
				continue;
			}
			n = 1;
		} else {
			n = utf8proc_iterate((const utf8proc_uint8_t *)src + i, (utf8proc_ssize_t)(wlen - i), &c);
		}
		size_t cl = n > 0 ? (size_t)n : 1;
		const char *from = src + i;
		char one;
		i += cl;
		if (n <= 0)
			c = -1;
		if (c >= 0 && c < 0x80) {
			one = (char)c;   /* possibly folded */
			from = &one;
		}
		if (!pass2) {
			memcpy(out + w, from, cl);
			w += cl;
			continue;
		}
		if ((steps & NORM_SEPARATORS) && (c == '-' || c == '_' || (c >= 0 && norm_is_space(c)))) {
			c = ' ';
			one = ' ';
			from = &one;
			cl = 1;
		}
		if ((steps & NORM_PUNCTUATION) && c >= 0 && is_punct(c))
			continue;
		bool ws = c >= 0 && norm_is_space(c);
		if (ws && (steps & NORM_WHITESPACE)) {
			pending = true;
			continue;
		}
		if (pending)
			out[w++] = ' ';
		pending = false;
		memcpy(out + w, from, cl);
		w += cl;
	}
	if (pending)
		out[w++] = ' ';
	size_t start = 0, end = w;
	if (steps & NORM_TRIM) {
		size_t k = 0;
		bool seen = false;
		while (k < w) {
			utf8proc_int32_t c;
			utf8proc_ssize_t n = (unsigned char)out[k] < 0x80 ? (c = (unsigned char)out[k], 1)
			                   : utf8proc_iterate((const utf8proc_uint8_t *)out + k,
			                                      (utf8proc_ssize_t)(w - k), &c);
			size_t cl = n > 0 ? (size_t)n : 1;
			if (n <= 0 || !norm_is_space(c)) {
				if (!seen)
					start = k;
				seen = true;
				end = k + cl;
			}
			k += cl;
		}
		if (!seen)
			start = end = 0;
	}
	if (start)
		memmove(out, out + start, end - start);
	w = end - start;
	out[w] = 0;
	free(work);
	*outlen = w;
	return out;
}

/* A JSON number text (RFC 8259 grammar, at most 64 bytes): 1 with an integer in *iv (integral
 * and at most 18 characters), 2 with a finite double in *dv, 0 when not such a number. */
static int parse_number(const char *s, size_t n, long long *iv, double *dv)
{
	size_t i = 0;
	if (i < n && s[i] == '-')
		i++;
	if (i >= n)
		return 0;
	if (s[i] == '0') {
		i++;
	} else if (s[i] >= '1' && s[i] <= '9') {
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++;
	} else {
		return 0;
	}
	bool integral = true;
	if (i < n && s[i] == '.') {
		integral = false;
		i++;
		size_t d = i;
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++;
		if (i == d)
			return 0;
	}
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		integral = false;
		i++;
		if (i < n && (s[i] == '+' || s[i] == '-'))
			i++;
		size_t d = i;
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++;
		if (i == d)
			return 0;
	}
	if (i != n || n > 64)
		return 0;
	if (integral && n <= 18) {   /* at most 18 digits: fits, no overflow */
		long long x = 0;
		for (size_t k = s[0] == '-'; k < n; k++)
			x = x * 10 + (s[k] - '0');
		*iv = s[0] == '-' ? -x : x;
		return 1;
	}
	char buf[72];
	memcpy(buf, s, n);
	buf[n] = 0;
	*dv = strtod(buf, NULL);
	return isfinite(*dv) ? 2 : 0;
}

/* Numbers are read after trimming ASCII blanks, whatever the steps say. */
static int numeric_of(const char *t, size_t n, long long *iv, double *dv)
{
	size_t a = 0, b = n;
	while (a < b && (t[a] == ' ' || (t[a] >= 9 && t[a] <= 13)))
		a++;
	while (b > a && (t[b - 1] == ' ' || (t[b - 1] >= 9 && t[b - 1] <= 13)))
		b--;
	return parse_number(t + a, b - a, iv, dv);
}

int norm_numeric(const char *t, size_t n, struct dec_num *out)
{
	long long iv = 0;
	double dv = 0;
	switch (numeric_of(t, n, &iv, &dv)) {
	case 1:
		out->m = iv;
		out->e = 0;
		while (out->m != 0 && out->m % 10 == 0) {   /* the canonical form dec.h describes */
			out->m /= 10;
			out->e++;
		}
		return 1;
	case 2:
		return dec_num_from_double(dv, out) == 0;
	default:
		return 0;
	}
}

/* norm_value of a string. The normalised text goes to a stack buffer when it fits (jansson
 * copies it anyway); not inlined, so the recursion over arrays and objects in norm_value does
 * not carry the buffer in every frame. */
__attribute__((noinline)) static json_t *norm_string(unsigned steps, const json_t *v)
{
	char buf[4096];
	size_t n;
	char *t = norm_text_buf(steps, json_string_value(v), json_string_length(v), buf, sizeof buf, &n);
	json_t *r = NULL;
	long long iv;
	double dv;
	int k = steps & NORM_NUMERIC ? numeric_of(t, n, &iv, &dv) : 0;
	if (k)
		r = k == 1 ? json_integer(iv) : json_real(dv);
	if (!r)
		r = json_stringn_nocheck(t, n);
	if (t != buf)
		free(t);
	return r;
}

json_t *norm_value(unsigned steps, const json_t *v)
{
	if (!steps || !v)
		return json_incref((json_t *)v);
	switch (json_typeof(v)) {
	case JSON_STRING:
		return norm_string(steps, v);
	case JSON_ARRAY: {
		json_t *a = json_array();
		for (size_t i = 0; i < json_array_size(v); i++)
			json_array_append_new(a, norm_value(steps, json_array_get(v, i)));
		return a;
	}
	case JSON_OBJECT: {
		json_t *o = json_object();
		const char *k;
		json_t *x;
		json_object_foreach((json_t *)v, k, x)
			json_object_set_new_nocheck(o, k, norm_value(steps, x));
		return o;
	}
	default:
		return json_incref((json_t *)v);
	}
}
