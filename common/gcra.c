/*
 * gcra: rate-string parser and the GCRA arithmetic (see gcra.h for the exact
 * definition). Integer microseconds throughout; mirrored by the Lua script in
 * worker/ratelimit.c.
 */
#include "gcra.h"

#include <stdio.h>

#define RATE_ACCEPTED \
	"expected \"0\" (disabled) or N/P<unit>: N evaluations (1 to 1000000000) per P " \
	"(a positive integer, may be omitted for 1) of unit ms, s, m, h or d, e.g. " \
	"10/60s, 100/1m, 5/2s, 10/1h"

static int rate_error(char *err, size_t errlen, const char *s, const char *why)
{
	if (err && errlen)
		snprintf(err, errlen, "invalid rate \"%s\"%s%s: %s", s, why ? ": " : "", why ? why : "",
		         RATE_ACCEPTED);
	return -1;
}

/* Reads a run of decimal digits into *v (≤ limit). Returns the number of
 * digits read, or -1 when the value exceeds limit. */
static int read_uint(const char **pp, int64_t limit, int64_t *v)
{
	const char *p = *pp;
	int64_t x = 0;
	int n = 0;
	while (*p >= '0' && *p <= '9') {
		x = x * 10 + (*p - '0');
		if (x > limit)
			return -1;
		p++;
		n++;
	}
	*pp = p;
	*v = x;
	return n;
}

static void skip_blanks(const char **pp)
{
	while (**pp == ' ' || **pp == '\t')
		(*pp)++;
}

int gcra_rate_parse(const char *s, struct gcra_rate *out, char *err, size_t errlen)
{
	const char *p = s;
	int64_t count, per = 1, unit_us;
	int n;

	if (!s)
		return rate_error(err, errlen, "", "empty");
	skip_blanks(&p);
	n = read_uint(&p, GCRA_MAX_COUNT, &count);
	if (n < 0)
		return rate_error(err, errlen, s, "N is too large");
	if (n == 0)
		return rate_error(err, errlen, s, *p ? "N must be a whole number" : "empty");
	skip_blanks(&p);
	if (*p == '\0') {
		if (count == 0) {
			out->count = 0;
			out->period_us = 0;
			return 0;
		}
		return rate_error(err, errlen, s, "missing /period");
	}
	if (*p != '/')
		return rate_error(err, errlen, s, "N must be a whole number followed by /");
	if (count == 0)
		return rate_error(err, errlen, s, "use \"0\" alone to disable the limiter");
	p++;
	skip_blanks(&p);
	n = read_uint(&p, GCRA_MAX_PERIOD_US, &per);
	if (n < 0)
		return rate_error(err, errlen, s, "period is too long");
	if (n == 0)
		per = 1;
	else if (per == 0)
		return rate_error(err, errlen, s, "the period must be positive");
	skip_blanks(&p);
	if (p[0] == 'm' && p[1] == 's') {
		unit_us = 1000;
		p += 2;
	} else if (*p == 's') {
		unit_us = 1000000;
		p++;
	} else if (*p == 'm') {
		unit_us = 60LL * 1000000;
		p++;
	} else if (*p == 'h') {
		unit_us = 3600LL * 1000000;
		p++;
	} else if (*p == 'd') {
		unit_us = 86400LL * 1000000;
		p++;
	} else {
		return rate_error(err, errlen, s, *p ? "unknown unit" : "missing unit");
	}
	skip_blanks(&p);
	if (*p)
		return rate_error(err, errlen, s, "unexpected text after the unit");
	if (per > GCRA_MAX_PERIOD_US / unit_us)
		return rate_error(err, errlen, s, "period longer than 366 days");
	out->count = count;
	out->period_us = per * unit_us;
	return 0;
}

int gcra_params_make(const struct gcra_rate *r, long burst, struct gcra_params *out,
                     char *err, size_t errlen)
{
	int64_t t;

	if (burst < 1 || burst > GCRA_MAX_BURST) {
		if (err && errlen)
			snprintf(err, errlen, "invalid burst %ld: expected an integer from 1 to %d",
			         burst, GCRA_MAX_BURST);
		return -1;
	}
	if (r->count < 1 || r->period_us < 1) {
		if (err && errlen)
			snprintf(err, errlen, "the rate limiter is disabled (rate 0): no GCRA parameters");
		return -1;
	}
	t = (r->period_us + r->count - 1) / r->count;   /* ceil: never faster than asked */
	if (t < 1 || r->count > r->period_us) {
		if (err && errlen)
			snprintf(err, errlen, "rate too high: at most one evaluation per microsecond");
		return -1;
	}
	if ((int64_t)(burst - 1) > GCRA_MAX_TOLERANCE_US / t) {
		if (err && errlen)
			snprintf(err, errlen, "burst %ld too large for this rate: (burst - 1) × period/N "
			         "must be at most 400 days", burst);
		return -1;
	}
	out->emission_us = t;
	out->tolerance_us = (int64_t)(burst - 1) * t;
	return 0;
}

int gcra_state_sanitize(const struct gcra_params *p, struct gcra_state *st, int64_t now_us,
                        int64_t max_defer_us)
{
	int reset = 0;
	if (st->tat_us > now_us + p->tolerance_us + p->emission_us) {
		st->tat_us = 0;
		reset |= 1;
	}
	if (st->last_deferred_us > now_us + max_defer_us) {
		st->last_deferred_us = 0;
		reset |= 2;
	}
	return reset;
}

enum gcra_verdict gcra_decide(const struct gcra_params *p, struct gcra_state *st,
                              int64_t now_us, enum gcra_policy pol, bool promoted,
                              int64_t *retry_at_us)
{
	int64_t tat = st->tat_us ? st->tat_us : now_us;
	int64_t dl = st->last_deferred_us;
	int64_t retry;

	if (tat < now_us)
		tat = now_us;
	if (tat - now_us <= p->tolerance_us && (promoted || dl <= now_us)) {
		st->tat_us = tat + p->emission_us;
		if (retry_at_us)
			*retry_at_us = 0;
		return GCRA_ALLOW;
	}
	retry = tat - p->tolerance_us;
	if (retry > now_us + GCRA_MAX_DEFER_US)
		retry = now_us + GCRA_MAX_DEFER_US;
	if (pol == GCRA_POLICY_REJECT) {
		if (retry_at_us)
			*retry_at_us = retry;
		return GCRA_REJECT;
	}
	if (retry < dl + p->emission_us)
		retry = dl + p->emission_us;
	if (retry > now_us + GCRA_MAX_DEFER_US)
		retry = now_us + GCRA_MAX_DEFER_US;
	st->last_deferred_us = retry;
	if (retry_at_us)
		*retry_at_us = retry;
	return GCRA_DEFER;
}

int64_t gcra_ttl_ms(const struct gcra_state *st, int64_t now_us)
{
	int64_t until = st->tat_us > st->last_deferred_us ? st->tat_us : st->last_deferred_us;
	int64_t ms = gcra_us_to_ms_ceil(until - now_us);
	return ms < 1 ? 1 : ms;
}

int64_t gcra_us_to_ms_ceil(int64_t us)
{
	if (us >= 0)
		return (us + 999) / 1000;
	return -((-us) / 1000);
}
