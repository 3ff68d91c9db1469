/* Unit tests for common/util.c: allocation helpers and strbuf. */
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
