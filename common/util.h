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
/* UTF-8 (RFC 3629). A valid sequence is the shortest form of one code point in
 * U+0000..U+10FFFF other than a surrogate (U+D800..U+DFFF). */

/* The length (1 to 4) of the valid UTF-8 sequence that starts at s, of which n > 0
 * bytes are readable; 0 when the bytes there are not one (a stray continuation byte,
 * an overlong form, a surrogate, beyond U+10FFFF, or a sequence n cuts short). */
size_t utf8_seq_len(const char *s, size_t n);
/* How many bytes of the NUL-terminated s to keep so that at most max bytes are kept and
 * no character is cut in two: the largest k <= max, k <= strlen(s), such that s[0..k)
 * does not end with the first bytes of a multi-byte sequence whose other bytes are past
 * k (or missing: a sequence the string itself ends inside is dropped too). Bytes that
 * are not UTF-8 before that are kept as they are (utf8_valid_dup replaces them). Use
 * with `%.*s`, never `%.Ns`, to cut untrusted text: printf("%.*s", (int)utf8_cut(s, 300), s). */
size_t utf8_cut(const char *s, size_t max);
/* Appends the n bytes of s with every byte that does not belong to a valid UTF-8
 * sequence replaced by U+FFFD (EF BF BD), and every NUL byte by U+FFFD too (the text is
 * stored where NUL cannot go: PostgreSQL text, C strings). The appended text is valid
 * UTF-8 whatever s holds. */
void strbuf_add_valid_utf8(struct strbuf *sb, const char *s, size_t n);
/* A valid UTF-8 copy (strbuf_add_valid_utf8) of the NUL-terminated s, cut by utf8_cut
 * to at most max bytes (SIZE_MAX: no cut). A character s ends inside (text that an
 * snprintf or a `%.Ns` cut short) is dropped rather than replaced. NULL gives NULL.
 * The caller frees the copy. */
char *utf8_valid_dup(const char *s, size_t max);
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
