/*
 * ISO 8601 / RFC 3339 timestamps → Unix time in milliseconds. Pure: no clock,
 * no time zone database (offsets only). Accepted: YYYY-MM-DD, optionally
 * followed by 'T', 't' or ' ' and hh:mm[:ss[.fraction]], optionally followed by
 * 'Z', 'z', ±hh:mm, ±hhmm or ±hh. Without an offset the time is taken as UTC.
 * Fractions beyond milliseconds are truncated (floor). Second 60 (leap) is
 * accepted and counts as the next second.
 */
#ifndef ARBITER_ISOTIME_H
#define ARBITER_ISOTIME_H

#include <stddef.h>
#include <stdint.h>

/* Parses s[0..len). Returns 0 and *ms, or -1 when s is not such a timestamp. */
int isotime_parse(const char *s, size_t len, int64_t *ms);
/* Formats ms as "YYYY-MM-DDThh:mm:ss.sssZ" (UTC). Returns length; buf ≥ 32. */
int isotime_format(int64_t ms, char *buf, size_t n);

#endif
