/*
 * Minimal TAP producer for arbiter's C tests. Header-only; assertions never
 * vanish in release builds. Usage: ok(cond, "name"), is_int(a, b, "name"),
 * is_str(a, b, "name"), then `return tap_done();` from main.
 */
#ifndef ARBITER_TAP_H
#define ARBITER_TAP_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_count;
static int tap_failed;

__attribute__((format(printf, 2, 3), unused))
static int tap_ok(int cond, const char *fmt, ...)
{
	va_list ap;
	char msg[2048];
	tap_count++;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	/* One line whatever the name holds (a test named after its input may
	 * carry a newline or a carriage return): shown as \n, \r. */
	printf("%sok %d - ", cond ? "" : "not ", tap_count);
	for (const char *c = msg; *c; c++) {
		if (*c == '\n')
			fputs("\\n", stdout);
		else if (*c == '\r')
			fputs("\\r", stdout);
		else
			putchar(*c);
	}
	printf("\n");
	if (!cond)
		tap_failed++;
	fflush(stdout);
	return cond;
}

#define ok(cond, ...) tap_ok(!!(cond), __VA_ARGS__)

#define is_int(got, want, ...) do { \
	long long tap_g_ = (long long)(got), tap_w_ = (long long)(want); \
	if (!tap_ok(tap_g_ == tap_w_, __VA_ARGS__)) \
		printf("#   got %lld, want %lld (%s:%d)\n", tap_g_, tap_w_, __FILE__, __LINE__); \
} while (0)

#define is_str(got, want, ...) do { \
	const char *tap_g_ = (got), *tap_w_ = (want); \
	int tap_c_ = (tap_g_ && tap_w_) ? !strcmp(tap_g_, tap_w_) : tap_g_ == tap_w_; \
	if (!tap_ok(tap_c_, __VA_ARGS__)) \
		printf("#   got \"%s\", want \"%s\" (%s:%d)\n", tap_g_ ? tap_g_ : "(null)", \
		       tap_w_ ? tap_w_ : "(null)", __FILE__, __LINE__); \
} while (0)

#define diag(...) do { printf("# "); printf(__VA_ARGS__); printf("\n"); } while (0)

/* ARBITER_TEST_SLOW (default 1): how many times wider a wall-clock bound is, for a slow
 * or loaded machine (scripts/test sets 3 for the sanitizer build; the cgroup guest 10).
 * Only for how soon something happens, never for what happens. */
__attribute__((unused)) static unsigned test_slow(void)
{
	const char *s = getenv("ARBITER_TEST_SLOW");
	int v = s ? atoi(s) : 1;
	return v > 1 ? (unsigned)v : 1;
}

__attribute__((unused))
static int tap_done(void)
{
	printf("1..%d\n", tap_count);
	return tap_failed ? 1 : 0;
}

/* s on one line (a TAP message must not span lines): a static copy (four
 * rotate, so one message may use several), newlines shown as " | ". */
__attribute__((unused)) static const char *tap_flat(const char *s)
{
	static char buf[4][1024];
	static int k;
	char *b = buf[k++ % 4];
	size_t n = 0;
	for (; s && *s && n + 4 < sizeof buf[0]; s++) {
		if (*s == '\n') {
			memcpy(b + n, " | ", 3);
			n += 3;
		} else {
			b[n++] = *s;
		}
	}
	b[n] = 0;
	return b;
}

#endif
