/*
 * Small allocation and string-building helpers shared by every module.
 * arbiter's out-of-memory policy: allocation failure aborts the process
 * (like Redis); callers never handle NULL from these functions.
 */
#ifndef ARBITER_UTIL_H
#define ARBITER_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* malloc/calloc/realloc/strdup that abort with a message on failure. */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t m);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);

/* A growable NUL-terminated byte string. Zero-initialise; strbuf_free releases. */
struct strbuf {
	char *buf;
	size_t len, cap;
};

/* Appends n bytes of s (may contain NULs; buf stays NUL-terminated). */
void strbuf_add(struct strbuf *sb, const char *s, size_t n);
/* Appends a string literal (its length counted by the compiler; `"" lit` refuses
 * anything but a literal). */
#define strbuf_addlit(sb, lit) strbuf_add((sb), "" lit, sizeof(lit) - 1)
/* Appends code point cp (at most U+10FFFF; the caller checks surrogates) as UTF-8. */
void strbuf_add_utf8(struct strbuf *sb, uint32_t cp);
/* The value of hexadecimal digit c (0-9, a-f, A-F), or -1. */
int hex_digit(unsigned char c);
/* Appends printf-formatted text. */
void strbuf_addf(struct strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Writes the formatted message into err (n bytes, nothing when n is 0) and
 * returns -1: the one-line failure of the parsers and validators. */
int errfail(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Frees the buffer and zeroes sb; safe on a zeroed strbuf. */
void strbuf_free(struct strbuf *sb);

#endif
