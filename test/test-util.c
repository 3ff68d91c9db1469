/* Unit tests for common/util.c: allocation helpers, strbuf, UTF-8 validation and cutting. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "util.h"

int main(void)
{
	struct strbuf sb = { 0 };

	strbuf_free(&sb);
	ok(sb.buf == NULL && sb.len == 0, "strbuf_free on a zeroed strbuf is harmless");

	strbuf_add(&sb, "abc", 3);
	is_str(sb.buf, "abc", "strbuf_add appends");
	is_int(sb.len, 3, "length tracks appended bytes");

	strbuf_add(&sb, "x\0y", 3);
	is_int(sb.len, 6, "embedded NUL bytes are kept");
	ok(sb.buf[6] == '\0' && memcmp(sb.buf, "abcx\0y", 6) == 0, "buffer stays NUL-terminated");

	for (int i = 0; i < 1000; i++)
		strbuf_addf(&sb, "%d,", i);
	ok(sb.len > 3000 && sb.buf[sb.len] == '\0', "grows across many appends (%zu bytes)", sb.len);
	ok(strstr(sb.buf + 6, "998,999,") != NULL, "formatted text in order");
	strbuf_free(&sb);

	char big[5000];
	memset(big, 'q', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	strbuf_addf(&sb, "[%s]", big);
	is_int(sb.len, sizeof big + 1, "strbuf_addf with output longer than any initial capacity");
	strbuf_free(&sb);

	strbuf_addlit(&sb, "a\"b\0c");
	ok(sb.len == 5 && !memcmp(sb.buf, "a\"b\0c", 5), "strbuf_addlit counts the literal's bytes");
	strbuf_addlit(&sb, "");
	is_int(sb.len, 5, "strbuf_addlit of an empty literal adds nothing");
	strbuf_free(&sb);

	/* UTF-8 of each length, at the boundaries. */
	static const struct { uint32_t cp; const char *utf8; } u8[] = {
		{ 0x41, "A" }, { 0x7F, "\x7f" }, { 0x80, "\xc2\x80" }, { 0x7FF, "\xdf\xbf" },
		{ 0x800, "\xe0\xa0\x80" }, { 0xFFFF, "\xef\xbf\xbf" },
		{ 0x10000, "\xf0\x90\x80\x80" }, { 0x10FFFF, "\xf4\x8f\xbf\xbf" },
	};
	for (size_t i = 0; i < sizeof u8 / sizeof u8[0]; i++) {
		strbuf_add_utf8(&sb, u8[i].cp);
		is_str(sb.buf, u8[i].utf8, "strbuf_add_utf8 U+%04X", (unsigned)u8[i].cp);
		sb.len = 0;
	}
	strbuf_free(&sb);
	ok(hex_digit('0') == 0 && hex_digit('9') == 9 && hex_digit('a') == 10 &&
	   hex_digit('F') == 15, "hex_digit: digits and both cases");
	ok(hex_digit('g') < 0 && hex_digit('/') < 0 && hex_digit(':') < 0 && hex_digit(0xC3) < 0,
	   "hex_digit: anything else is -1");

	/* utf8_seq_len: a table of valid and invalid sequences. */
	static const struct { const char *s; size_t n, want; } seq[] = {
		{ "A", 1, 1 }, { "\xc3\xa9", 2, 2 }, { "\xe2\x82\xac", 3, 3 },
		{ "\xf0\x9f\x98\x80", 4, 4 }, { "\xf4\x8f\xbf\xbf", 4, 4 },
		{ "\xc3\xa9", 1, 0 },              /* cut short by n */
		{ "\xe2\x82", 2, 0 }, { "\x80", 1, 0 }, { "\xbf", 1, 0 },   /* stray continuation */
		{ "\xc0\xaf", 2, 0 }, { "\xc1\xbf", 2, 0 },                 /* overlong 2-byte */
		{ "\xe0\x80\xaf", 3, 0 }, { "\xf0\x80\x80\xaf", 4, 0 }, /* overlong 3, 4 */
		{ "\xed\xa0\x80", 3, 0 }, { "\xed\xbf\xbf", 3, 0 },       /* surrogates */
		{ "\xf4\x90\x80\x80", 4, 0 }, { "\xf5\x80\x80\x80", 4, 0 }, /* > U+10FFFF */
		{ "\xff", 1, 0 }, { "\xfe", 1, 0 }, { "\xc3" "A", 2, 0 },
	};
	for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++)
		ok(utf8_seq_len(seq[i].s, seq[i].n) == seq[i].want, "utf8_seq_len table row %zu is %zu",
		   i, seq[i].want);

	/* utf8_cut: never in the middle of a character. "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80" is
	 * a (1 byte), e-acute (2), euro (3), emoji (4): boundaries at 0, 1, 3, 6, 10. */
	const char *mix = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
	static const size_t cut_want[] = { 0, 1, 1, 3, 3, 3, 6, 6, 6, 6, 10, 10, 10 };
	for (size_t max = 0; max < sizeof cut_want / sizeof cut_want[0]; max++)
		ok(utf8_cut(mix, max) == cut_want[max], "utf8_cut(mix, %zu) = %zu", max, cut_want[max]);
	is_int(utf8_cut(mix, SIZE_MAX), 10, "utf8_cut with no limit: the whole string");
	is_int(utf8_cut("ab\xe2\x82", 100), 2, "a character the string ends inside is dropped");
	is_int(utf8_cut("ab\xe2\x82", 3), 2, "... also when max falls inside it");
	is_int(utf8_cut("a\xff" "b\x80" "c", 100), 5, "invalid bytes before the end are kept (not cut)");
	is_int(utf8_cut("a\xff" "b\x80" "c", 3), 3, "invalid bytes are one byte each for the limit");
	is_int(utf8_cut("a\xe2\x82xyz", 100), 6, "a cut-short sequence followed by ASCII is kept as bytes");
	is_int(utf8_cut("", 10), 0, "empty string");
	{
		/* The worker's case: 300 bytes of 2-byte characters after one ASCII byte. */
		char big[1 + 2 * 300 + 1];
		big[0] = 'x';
		for (int i = 0; i < 300; i++)
			memcpy(big + 1 + 2 * i, "\xc3\xa9", 2);
		big[sizeof big - 1] = '\0';
		size_t k = utf8_cut(big, 300);
		is_int(k, 299, "odd limit inside a 2-byte character: cut before it");
		char out[400];
		snprintf(out, sizeof out, "%.*s", (int)k, big);
		ok(utf8_seq_len(out + k - 2, 2) == 2, "the %%.*s output ends on a whole character");
	}

	/* strbuf_add_valid_utf8 / utf8_valid_dup: anything in, valid UTF-8 out. */
	static const struct { const char *in; size_t n; const char *out; } fix[] = {
		{ "plain", 5, "plain" },
		{ "caf\xc3\xa9", 5, "caf\xc3\xa9" },
		{ "a\xff" "b", 3, "a\xef\xbf\xbd" "b" },
		{ "\xc3", 1, "\xef\xbf\xbd" },
		{ "\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
		{ "x\0y", 3, "x\xef\xbf\xbdy" },
		{ "\xc0\xaf!", 3, "\xef\xbf\xbd\xef\xbf\xbd!" },
		{ "", 0, "" },
	};
	for (size_t i = 0; i < sizeof fix / sizeof fix[0]; i++) {
		strbuf_add_valid_utf8(&sb, fix[i].in, fix[i].n);
		is_str(sb.buf ? sb.buf : "", fix[i].out, "strbuf_add_valid_utf8 row %zu", i);
		sb.len = 0;
		if (sb.buf)
			sb.buf[0] = '\0';
	}
	strbuf_free(&sb);
	/* Every byte value in every position: the output always validates. */
	{
		int all_valid = 1;
		for (int b = 0; b < 256; b++) {
			char in[6] = { 'a', (char)b, (char)0x80, (char)b, (char)0xbf, 'z' };
			strbuf_add_valid_utf8(&sb, in, sizeof in);
			for (size_t i = 0; i < sb.len;) {
				size_t l = sb.buf[i] ? utf8_seq_len(sb.buf + i, sb.len - i) : 0;
				if (!l) {
					all_valid = 0;
					break;
				}
				i += l;
			}
			sb.len = 0;
		}
		ok(all_valid, "strbuf_add_valid_utf8 output is valid UTF-8 for every byte value");
		strbuf_free(&sb);
	}
	char *v = utf8_valid_dup("ab\xff" "cd\xc3", SIZE_MAX);
	is_str(v, "ab\xef\xbf\xbd" "cd", "utf8_valid_dup: bad byte replaced, trailing half character dropped");
	free(v);
	v = utf8_valid_dup("\xc3\xa9\xc3\xa9\xc3\xa9", 5);
	is_str(v, "\xc3\xa9\xc3\xa9", "utf8_valid_dup: cut at a character boundary");
	free(v);
	v = utf8_valid_dup("\xff", 2);
	is_str(v, "", "utf8_valid_dup: a replacement that does not fit is left out");
	free(v);
	ok(utf8_valid_dup(NULL, 10) == NULL, "utf8_valid_dup(NULL) is NULL");

	char *d = xstrdup("hello");
	is_str(d, "hello", "xstrdup copies");
	free(d);
	d = xstrndup("hello", 3);
	is_str(d, "hel", "xstrndup truncates");
	free(d);
	d = xstrndup("hi", 10);
	is_str(d, "hi", "xstrndup stops at the NUL");
	free(d);

	int *z = xcalloc(16, sizeof *z);
	int all_zero = 1;
	for (int i = 0; i < 16; i++)
		all_zero &= z[i] == 0;
	ok(all_zero, "xcalloc zeroes");
	z = xrealloc(z, 64 * sizeof *z);
	ok(z != NULL && z[15] == 0, "xrealloc keeps contents");
	free(z);
	void *p = xmalloc(0);
	ok(p != NULL, "xmalloc(0) returns a unique pointer");
	free(p);
	return tap_done();
}
