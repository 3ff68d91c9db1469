/*
 * Unit tests for jload (common/jload.h): every text it reads must give exactly what
 * json_loadb(JSON_DECODE_ANY) gives (same types, member order, string bytes, reals bit for
 * bit); every text jansson refuses must be left to jansson (NULL). A table of edge cases,
 * then random documents (escapes, surrogates, UTF-8, numbers of every shape, nesting) and
 * mutations of them (flipped, dropped and inserted bytes, truncation).
 */
#include "jload.h"

#include <locale.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tap.h"
#include "util.h"

/* Identical values: types, integers, reals' bits, string bytes, array items and object
 * members in order. */
static bool same(const json_t *a, const json_t *b)
{
	if (json_typeof(a) != json_typeof(b))
		return false;
	switch (json_typeof(a)) {
	case JSON_OBJECT: {
		if (json_object_size(a) != json_object_size(b))
			return false;
		void *ia = json_object_iter((json_t *)a), *ib = json_object_iter((json_t *)b);
		for (; ia && ib; ia = json_object_iter_next((json_t *)a, ia),
		                 ib = json_object_iter_next((json_t *)b, ib)) {
			size_t la = json_object_iter_key_len(ia), lb = json_object_iter_key_len(ib);
			if (la != lb || memcmp(json_object_iter_key(ia), json_object_iter_key(ib), la) ||
			    !same(json_object_iter_value(ia), json_object_iter_value(ib)))
				return false;
		}
		return !ia && !ib;
	}
	case JSON_ARRAY:
		if (json_array_size(a) != json_array_size(b))
			return false;
		for (size_t i = 0; i < json_array_size(a); i++)
			if (!same(json_array_get(a, i), json_array_get(b, i)))
				return false;
		return true;
	case JSON_STRING:
		return json_string_length(a) == json_string_length(b) &&
		       !memcmp(json_string_value(a), json_string_value(b), json_string_length(a));
	case JSON_INTEGER:
		return json_integer_value(a) == json_integer_value(b);
	case JSON_REAL: {
		double x = json_real_value(a), y = json_real_value(b);
		return !memcmp(&x, &y, sizeof x);
	}
	default:
		return true;
	}
}

/* 1: jload read it as jansson does; 0: jload left it and jansson refuses it too (or reads
 * it: then *left is set); -1: a difference. */
static int check(const char *t, size_t n, bool *left)
{
	json_error_t je;
	json_t *a = jload(t, n), *b = json_loadb(t, n, JSON_DECODE_ANY, &je);
	int r;
	*left = false;
	if (a)
		r = b && same(a, b) ? 1 : -1;
	else {
		r = 0;
		*left = b != NULL;
	}
	json_decref(a);
	json_decref(b);
	return r;
}

/* check() on a copy of t[0..n) in a heap block of exactly n bytes, so that the ASan build
 * catches a read past the end (a literal's NUL, or a buffer's spare room, would hide it). */
static int check_exact(const char *t, size_t n, bool *left)
{
	char *b = xmalloc(n ? n : 1);
	memcpy(b, t, n);
	int r = check(b, n, left);
	free(b);
	return r;
}

/* Every prefix of each text (a string, escape, UTF-8 sequence, literal or number cut at each
 * byte), each in an exact-length buffer: no difference from jansson. */
static void check_prefixes(const char *const *texts, size_t n, const char *what)
{
	int diff = 0, runs = 0;
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(texts[i]);
		for (size_t k = 0; k <= len; k++, runs++) {
			bool left;
			if (check_exact(texts[i], k, &left) < 0 && diff++ < 5)
				diag("differs from jansson: %.*s", (int)k, texts[i]);
		}
	}
	is_int(diff, 0, "every prefix of the %s texts (%d), each in an exact-length buffer", what, runs);
}

static void test_table(void)
{
	/* read by jload */
	static const char *const fast[] = {
		"0", "-0", "1", "-1", "9223372036854775807", "-9223372036854775808", "0.1", "-0.0",
		"1e22", "1E-22", "123456789012345678", "1.7976931348623157e308", "4.9e-324", "2.2250738585072014e-308",
		"1e-400", "0.30000000000000004", "9007199254740993.0", "12345678901234567890.5",
		"3.14159265358979323846264338327950288", "1e+5", "1.5e-07",
		"\"\"", "\"plain\"", "\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"", "\"\\u00e9\\u00C9\"",
		"\"\\ud83d\\ude00 x\"", "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"", "\"\\u0001\"",
		"true", "false", "null", " \t\r\n[ 1 , 2.5 , \"x\" , [ ] , { } ] \n",
		"{\"a\":1,\"b\":{\"c\":[true,false,null]},\"a\":2}", "{\"\\u00e9\":{\"k\\n\":\"v\"},\"z\":[]}",
		"[[[[[[[[[[[]]]]]]]]]]]", "{\"findings\":[{\"id\":\"F-001\",\"severity\":\"High\",\"cvss\":7.5}]}",
	};
	for (size_t i = 0; i < sizeof fast / sizeof fast[0]; i++) {
		json_t *a = jload(fast[i], strlen(fast[i]));
		json_error_t je;
		json_t *b = json_loadb(fast[i], strlen(fast[i]), JSON_DECODE_ANY, &je);
		ok(a && b && same(a, b), "read as jansson reads it: %s", tap_flat(fast[i]));
		json_decref(a);
		json_decref(b);
	}
	/* left to jansson, which refuses them too */
	static const char *const left[] = {
		"", " ", "[", "]", "{", "[1,]", "[,1]", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{a:1}", "01",
		"-", "-a", "1.", ".5", "+1", "1e", "1e+", "0x10", "NaN", "Infinity", "tru", "truex",
		"nul", "[1 2]", "1 2", "\"abc", "\"a\\x\"", "\"a\\u12\"", "\"a\\u12g4\"", "\"\\ud800\"",
		"\"\\udc00\"", "\"\\ud800\\u0041\"", "\"\\ud800x\"", "\"\\u0000\"", "\"a\tb\"",
		"\"\x80\"", "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "\"\xe2\x82\"",
		"\"\xff\"", "1e400", "-1e400", "[1]x", "\xef\xbb\xbf[1]",
		"9223372036854775808", "-9223372036854775809", "123456789012345678901",
	};
	for (size_t i = 0; i < sizeof left / sizeof left[0]; i++) {
		json_error_t je;
		json_t *a = jload(left[i], strlen(left[i]));
		json_t *b = json_loadb(left[i], strlen(left[i]), JSON_DECODE_ANY, &je);
		ok(!a && !b, "left to jansson, which refuses it: %s", tap_flat(left[i]));
		json_decref(a);
		json_decref(b);
	}
	check_prefixes(fast, sizeof fast / sizeof fast[0], "read");
	check_prefixes(left, sizeof left / sizeof left[0], "refused");
	/* a NUL byte inside the length, and the text stopping at the length */
	json_t *a = jload("[1,\0 2]", 7);
	ok(!a, "a NUL byte is left to jansson");
	json_decref(a);
	a = jload("[1,2]xyz", 5);
	ok(a && json_array_size(a) == 2, "reads only len bytes");
	json_decref(a);
	/* nesting: JLOAD_MAX_DEPTH levels are read, one more is left (jansson allows 2048) */
	struct strbuf sb = { 0 };
	for (int i = 0; i < JLOAD_MAX_DEPTH; i++)
		strbuf_addlit(&sb, "[");
	for (int i = 0; i < JLOAD_MAX_DEPTH; i++)
		strbuf_addlit(&sb, "]");
	a = jload(sb.buf, sb.len);
	ok(a != NULL, "%d nested arrays are read", JLOAD_MAX_DEPTH);
	json_decref(a);
	sb.len = 0;
	for (int i = 0; i <= JLOAD_MAX_DEPTH; i++)
		strbuf_addlit(&sb, "{\"k\":[");
	for (int i = 0; i <= JLOAD_MAX_DEPTH; i++)
		strbuf_addlit(&sb, "]}");
	a = jload(sb.buf, sb.len);
	ok(!a, "deeper nesting is left to jansson");
	json_decref(a);
	strbuf_free(&sb);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rnd(uint32_t n)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state % n);
}

static void gen_ws(struct strbuf *sb)
{
	static const char *const w[] = { "", "", "", " ", "\n", "\t", "\r\n  " };
	const char *s = w[rnd(7)];
	strbuf_add(sb, s, strlen(s));
}

static void gen_string(struct strbuf *sb)
{
	strbuf_addlit(sb, "\"");
	int n = (int)rnd(12);
	for (int i = 0; i < n; i++) {
		switch (rnd(14)) {
		case 0: strbuf_addf(sb, "\\u%04x", rnd(0x10000)); break;   /* surrogates and \u0000 too */
		case 1: strbuf_addf(sb, "\\u%04X\\u%04x", 0xD800 + rnd(0x400), 0xDC00 + rnd(0x400)); break;
		case 2: { static const char *const e[] = { "\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t" };
			const char *x = e[rnd(8)];
			strbuf_add(sb, x, strlen(x));
			break; }
		case 3: strbuf_addlit(sb, "\xc3\xa9"); break;
		case 4: strbuf_addlit(sb, "\xe2\x82\xac"); break;
		case 5: strbuf_addlit(sb, "\xf0\x9f\x98\x80"); break;
		case 6: { char c = (char)(0x80 + rnd(0x80)); strbuf_add(sb, &c, 1); break; }   /* mostly invalid */
		default: { char c = (char)(' ' + rnd(95)); if (c == '"' || c == '\\') c = 'q'; strbuf_add(sb, &c, 1); }
		}
	}
	strbuf_addlit(sb, "\"");
}

static void gen_number(struct strbuf *sb)
{
	switch (rnd(6)) {
	case 0: strbuf_addf(sb, "%d", (int)rnd(2000) - 1000); break;
	case 1: strbuf_addf(sb, "%s%llu", rnd(2) ? "-" : "", (unsigned long long)rng_state >> rnd(64)); break;
	case 2: strbuf_addf(sb, "%s%u.%0*u", rnd(2) ? "-" : "", rnd(1000), (int)rnd(8) + 1, rnd(100000000)); break;
	case 3: strbuf_addf(sb, "%u.%ue%s%u", rnd(100), rnd(100000), rnd(2) ? "-" : "+", rnd(40)); break;
	case 4: strbuf_addf(sb, "%uE%d", rnd(10000000) + 1, (int)rnd(700) - 350); break;
	default: strbuf_addf(sb, "%.17g", ((double)rng_state / 1e10) * (rnd(2) ? 1 : -1)); break;
	}
}

static void gen_value(struct strbuf *sb, int depth)
{
	uint32_t k = depth > 4 ? rnd(5) : rnd(8);
	gen_ws(sb);
	switch (k) {
	case 0: gen_string(sb); break;
	case 1: case 2: gen_number(sb); break;
	case 3: strbuf_addlit(sb, "true"); break;
	case 4:
		if (rnd(2))
			strbuf_addlit(sb, "null");
		else
			strbuf_addlit(sb, "false");
		break;
	case 5: {
		strbuf_addlit(sb, "[");
		int n = (int)rnd(5);
		for (int i = 0; i < n; i++) {
			if (i)
				strbuf_addlit(sb, ",");
			gen_value(sb, depth + 1);
		}
		gen_ws(sb);
		strbuf_addlit(sb, "]");
		break;
	}
	default: {
		strbuf_addlit(sb, "{");
		int n = (int)rnd(5);
		for (int i = 0; i < n; i++) {
			if (i)
				strbuf_addlit(sb, ",");
			gen_ws(sb);
			if (rnd(3))
				strbuf_addf(sb, "\"k%u\"", rnd(4));   /* duplicates too */
			else
				gen_string(sb);
			gen_ws(sb);
			strbuf_addlit(sb, ":");
			gen_value(sb, depth + 1);
		}
		gen_ws(sb);
		strbuf_addlit(sb, "}");
	}
	}
	gen_ws(sb);
}

static void test_random(void)
{
	int read = 0, left_ok = 0, left_read = 0, diff = 0;
	struct strbuf sb = { 0 };
	for (int i = 0; i < 40000; i++) {
		sb.len = 0;
		strbuf_addlit(&sb, "");
		gen_value(&sb, 0);
		if (i % 2) {   /* a mutation */
			size_t at = rnd((uint32_t)sb.len + 1);
			switch (rnd(4)) {
			case 0: if (at < sb.len) sb.buf[at] = (char)rnd(256); break;
			case 1: if (at < sb.len) memmove(sb.buf + at, sb.buf + at + 1, sb.len - at), sb.len--; break;
			case 2: sb.len = at; break;
			default: {
				static const char ins[] = "\"\\,:[]{}0-.eE \x80";
				char c = ins[rnd(sizeof ins - 1)];
				strbuf_add(&sb, " ", 1);
				memmove(sb.buf + at + 1, sb.buf + at, sb.len - at - 1);
				sb.buf[at] = c;
			}
			}
		}
		bool left;
		int r = check_exact(sb.buf, sb.len, &left);
		if (r < 0 && diff++ < 5)
			diag("differs from jansson: %s", tap_flat(sb.buf));
		read += r == 1;
		left_ok += r == 0 && !left;
		left_read += r == 0 && left;
	}
	strbuf_free(&sb);
	is_int(diff, 0, "40000 random texts: jload never differs from jansson");
	ok(read > 15000, "jload read most valid ones (%d)", read);
	ok(left_ok > 5000, "and left the invalid ones (%d)", left_ok);
	/* below JLOAD_MAX_DEPTH, in the C locale, jload leaves only what jansson refuses */
	is_int(left_read, 0, "no text jansson reads is left by jload");
}

/* In a locale whose decimal point is ',' (when one is installed: LOCPATH is honoured) jload
 * still reads what jansson reads: exact reals need no strtod, and those that do are left to
 * jansson, which puts the locale's point in place of '.' before its strtod. */
static void test_decimal_comma_locale(void)
{
	static const char *const names[] = { "de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8",
	                                      "nl_NL.UTF-8", "ru_RU.UTF-8", "de_DE", "fr_FR" };
	const char *got = NULL;
	for (size_t i = 0; !got && i < sizeof names / sizeof names[0]; i++)
		if (setlocale(LC_NUMERIC, names[i]) && !strcmp(localeconv()->decimal_point, ","))
			got = names[i];
	if (!got) {
		setlocale(LC_NUMERIC, "C");
		ok(1, "# SKIP no locale with a decimal comma is installed");
		return;
	}
	static const char *const texts[] = {
		"1.5", "-0.25e-3", "0.30000000000000004", "1e-400", "1.7976931348623157e308", "4.9e-324",
		"9007199254740993.0", "123456789012345678901.5", "[1.5,{\"a\":2.5e300,\"b\":-0.0}]",
		"1e400", "1.", "1,5",
	};
	int diff = 0;
	for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
		bool left;
		if (check_exact(texts[i], strlen(texts[i]), &left) < 0 && diff++ < 5)
			diag("differs from jansson in %s: %s", got, texts[i]);
	}
	is_int(diff, 0, "in %s jload reads reals as jansson does", got);
	json_t *a = jload("1e-400", 6), *b = jload("[0.5]", 5);
	ok(!a && b && json_real_value(json_array_get(b, 0)) == 0.5,
	   "in %s a real needing strtod is left to jansson, an exact one is read", got);
	json_decref(a);
	json_decref(b);
	setlocale(LC_NUMERIC, "C");
}

/* A number of more than INT_MAX digits: "1" then zeros, 2^31 + 1 MiB bytes, made of one 1 MiB
 * block of memory mapped again and again (a few MiB of memory for a text of 2 GiB). jansson
 * refuses it ("too big integer"); a digit count kept in an int wraps and reads it as 0. */
static void test_digits_beyond_int(void)
{
	const size_t blk = (size_t)1 << 20, len = ((size_t)1 << 31) + blk;
	if (SIZE_MAX <= UINT32_MAX) {
		ok(1, "# SKIP a text of 2 GiB needs 64-bit addresses");
		return;
	}
	int fd = memfd_create("test-jload", 0);
	char *base = MAP_FAILED;
	bool built = fd >= 0 && ftruncate(fd, (off_t)blk) == 0;
	if (built)
		base = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	built = built && base != MAP_FAILED;
	/* block 0 private (its first byte becomes '1'), every other block the shared zeros */
	for (size_t off = 0; built && off < len; off += blk)
		built = mmap(base + off, blk, PROT_READ | PROT_WRITE,
		             (off ? MAP_SHARED : MAP_PRIVATE) | MAP_FIXED, fd, 0) != MAP_FAILED;
	if (built) {
		memset(base + blk, '0', blk);
		base[0] = '1';
	}
	ok(built, "a text of 2^31 + 1 MiB digits mapped");
	json_t *a = built ? jload(base, len) : NULL;
	ok(built && !a, "an integer of more than INT_MAX digits is left to jansson (read as %lld)",
	   a ? (long long)json_integer_value(a) : 0LL);
	json_decref(a);
	if (base != MAP_FAILED)
		munmap(base, len);
	if (fd >= 0)
		close(fd);
}

/* Strings are scanned 8 bytes at a time: each byte that ends the fast scan (control
 * characters, '"', '\\', non-ASCII, valid or not), and a harmless one (DEL), at every position
 * of a 40-byte string, with the string at every offset of its buffer, in exact-length buffers. */
static void test_string_bytes_everywhere(void)
{
	static const char *const special[] = { "\x01", "\x1f", "\t", "\x7f", "\"", "\\n", "\\u00e9",
	                                        "\\\"", "\xc3\xa9", "\xe2\x82\xac", "\x80", "\xff",
	                                        "\xf0\x9f\x98\x80", "\xc3" };
	static const char base[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmn";
	int diff = 0, runs = 0, read = 0;
	for (size_t sp = 0; sp < sizeof special / sizeof special[0]; sp++) {
		for (size_t pos = 0; pos <= 40; pos++) {
			for (size_t lead = 0; lead < 8; lead++, runs++) {
				struct strbuf sb = { 0 };
				strbuf_addf(&sb, "[%.*s\"%.*s%s%s\"]", (int)lead, "        ", (int)pos, base,
				            special[sp], base + pos);
				bool left;
				int r = check_exact(sb.buf, sb.len, &left);
				read += r > 0;
				if (r < 0 && diff++ < 5)
					diag("differs from jansson: %s", tap_flat(sb.buf));
				strbuf_free(&sb);
			}
		}
	}
	is_int(diff, 0, "a special byte at every position of a string (%d texts, %d read)", runs, read);
}

int main(void)
{
	test_table();
	test_random();
	test_string_bytes_everywhere();
	test_decimal_comma_locale();
	test_digits_beyond_int();
	return tap_done();
}
