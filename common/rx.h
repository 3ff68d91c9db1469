/*
 * Regular expressions for scoring specs (common/README.md "Regular expressions"): a
 * documented subset compiled to a Thompson NFA and run by a breadth-first
 * simulation, so matching time is linear in the text (times the program
 * size) and never backtracks. Patterns are bounded (RX_MAX_PATTERN bytes,
 * RX_MAX_PROG instructions after expanding counted repeats, RX_MAX_DEPTH
 * nesting) and every search takes a work budget: a search that would exceed
 * it stops and reports so, instead of stalling the evaluation. Text and
 * patterns are UTF-8 and match by code point. Pure: no I/O.
 *
 * Subset: literals; `.` (any code point but \n); classes `[a-z_]`, `[^...]`;
 * escapes \d \D \w \W \s \S (Unicode letters/digits/underscore for \w),
 * \b \B (word boundary), \n \r \t and any escaped punctuation; anchors ^ $
 * (start / end of the whole text); groups `(...)`, `(?:...)`, alternation `|`;
 * quantifiers * + ? {n} {n,} {n,m} (m ≤ 1000), a trailing `?` (lazy) is
 * accepted and changes nothing (only "is there a match" is asked). Anything
 * else (backreferences, lookaround, \p{..}, possessive quantifiers) is a
 * compile error naming the position.
 */
#ifndef ARBITER_RX_H
#define ARBITER_RX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RX_MAX_PATTERN 1024      /* pattern bytes */
#define RX_MAX_PROG    2000      /* NFA instructions after expansion */
#define RX_MAX_DEPTH   64        /* group nesting */
#define RX_MAX_REPEAT  1000      /* largest n, m in {n,m} */
#define RX_POS_STEPS   2         /* work charged for each text position a search examines */

struct rx;
/* Compiles pattern[0..len). icase: case-insensitive matching by simple Unicode case folding
 * (a code point's folding when it is one code point, else its lowercase), the same for
 * literals and classes: a text character matches a literal or class member that folds as it
 * does, so K (U+212A, Kelvin sign) matches `k`, `K`, `[K]` and `[A-Z]`. Thread-safe (the
 * first case-insensitive compile builds a shared fold table once, a few ms). Returns 0 and
 * *out (free with rx_free), or -1 with *out NULL and "position P: <what>" in err. */
int rx_compile(const char *pattern, size_t len, bool icase, struct rx **out, char *err,
               size_t errlen);
void rx_free(struct rx *r);   /* NULL ok */
/* Searches text[0..len) (UTF-8; invalid bytes count as U+FFFD) for a match anywhere (or the
 * whole text when the pattern says ^...$). *budget is the remaining work in steps: one per
 * NFA state visited or tested, RX_POS_STEPS more per text position examined, and 1 or 2 more
 * per test of a class of 16 or 256 ranges or more past ASCII, so that a step costs about the
 * same CPU for any pattern; it is decreased by the work done. Returns 1 match, 0 no match,
 * -1 budget exhausted. */
int rx_search(const struct rx *r, const char *text, size_t len, uint64_t *budget);
/* Number of instructions (for tests and the explain output). */
size_t rx_prog_size(const struct rx *r);

#endif
