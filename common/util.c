/* Allocation helpers (abort on out-of-memory) and the growable strbuf. */
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
