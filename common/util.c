/* Allocation helpers (abort on out-of-memory), the growable strbuf, and UTF-8
 * validation and cutting for text that came from outside (error messages, reasons). */
#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void oom(size_t n)
{
	fprintf(stderr, "arbiter: out of memory allocating %zu bytes\n", n);
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom(n);
	return p;
}

void *xcalloc(size_t n, size_t m)
{
	void *p = calloc(n ? n : 1, m ? m : 1);
	if (!p)
		oom(n * m);
	return p;
}

void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		oom(n);
	return q;
}

char *xstrdup(const char *s)
{
	return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	char *p = xmalloc(len + 1);
	memcpy(p, s, len);
	p[len] = '\0';
	return p;
}

static void strbuf_grow(struct strbuf *sb, size_t extra)
{
	size_t need = sb->len + extra + 1;
	if (need <= sb->cap)
		return;
	size_t cap = sb->cap ? sb->cap : 64;
	while (cap < need)
		cap *= 2;
	sb->buf = xrealloc(sb->buf, cap);
	sb->cap = cap;
}

void strbuf_add(struct strbuf *sb, const char *s, size_t n)
{
	strbuf_grow(sb, n);
	memcpy(sb->buf + sb->len, s, n);
	sb->len += n;
	sb->buf[sb->len] = '\0';
}

void strbuf_add_utf8(struct strbuf *sb, uint32_t cp)
{
	char u[4];
	size_t k;
	if (cp < 0x80) {
		u[0] = (char)cp;
		k = 1;
	} else if (cp < 0x800) {
		u[0] = (char)(0xC0 | (cp >> 6));
		u[1] = (char)(0x80 | (cp & 0x3F));
		k = 2;
	} else if (cp < 0x10000) {
		u[0] = (char)(0xE0 | (cp >> 12));
		u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		u[2] = (char)(0x80 | (cp & 0x3F));
		k = 3;
	} else {
		u[0] = (char)(0xF0 | (cp >> 18));
		u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
		u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
		u[3] = (char)(0x80 | (cp & 0x3F));
		k = 4;
	}
	strbuf_add(sb, u, k);
}

int hex_digit(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

void strbuf_addf(struct strbuf *sb, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	strbuf_grow(sb, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	sb->len += (size_t)n;
}

void strbuf_free(struct strbuf *sb)
{
	free(sb->buf);
	sb->buf = NULL;
	sb->len = sb->cap = 0;
}

int errfail(char *err, size_t n, const char *fmt, ...)
{
	if (n) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, n, fmt, ap);
		va_end(ap);
	}
	return -1;
}

size_t utf8_seq_len(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	unsigned c = p[0];
	size_t len;
	uint32_t min;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		min = 0x10000;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	uint32_t cp = c & (0xffu >> (len + 1));
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* Whether the n bytes at s are the start of a multi-byte sequence cut short: a lead
 * byte followed only by continuation bytes, fewer than the lead byte announces. */
static int utf8_cut_short(const unsigned char *s, size_t n)
{
	size_t want = s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3
	            : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
	if (want == 0 || n >= want)
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return 1;
}

size_t utf8_cut(const char *s, size_t max)
{
	/* Up to max + 3 bytes are looked at: a sequence that starts before max and ends
	 * after it is seen whole, so it is told from one the string ends inside. */
	size_t avail = strnlen(s, max > SIZE_MAX - 3 ? SIZE_MAX : max + 3), i = 0;
	while (i < avail && i < max) {
		size_t l = utf8_seq_len(s + i, avail - i);
		if (l == 0) {
			if (utf8_cut_short((const unsigned char *)s + i, avail - i))
				return i;
			l = 1;
		}
		if (i + l > max)
			return i;
		i += l;
	}
	return i;
}

void strbuf_add_valid_utf8(struct strbuf *sb, const char *s, size_t n)
{
	size_t i = 0, run = 0;   /* s[run..i) is valid and not yet appended */
	while (i < n) {
		size_t l = s[i] ? utf8_seq_len(s + i, n - i) : 0;
		if (l) {
			i += l;
			continue;
		}
		strbuf_add(sb, s + run, i - run);
		strbuf_addlit(sb, "\xef\xbf\xbd");
		run = ++i;
	}
	strbuf_add(sb, s + run, i - run);
}

char *utf8_valid_dup(const char *s, size_t max)
{
	if (!s)
		return NULL;
	struct strbuf sb = { 0 };
	/* A character the string ends inside (text an snprintf cut short) is dropped,
	 * not replaced. */
	strbuf_add_valid_utf8(&sb, s, utf8_cut(s, SIZE_MAX));
	if (!sb.buf)
		return xstrdup("");
	sb.buf[utf8_cut(sb.buf, max)] = '\0';
	return sb.buf;
}
