/*
 * Unit tests for common/gcra: the rate-string parser (accepted forms and the
 * error text), the GCRA constants, and the decision arithmetic that the Lua
 * script in worker/ratelimit.c mirrors (burst, steady rate, window bound,
 * defer queue spacing, reject, key expiry).
 */
#include <string.h>

#include "gcra.h"
#include "tap.h"

#define S 1000000LL

static void test_parse(void)
{
	static const struct { const char *in; int64_t count, period_us; } good[] = {
		{ "10/60s", 10, 60 * S }, { "100/1m", 100, 60 * S }, { "5/2s", 5, 2 * S },
		{ "10/1h", 10, 3600 * S }, { "0", 0, 0 }, { " 0 ", 0, 0 }, { "10/m", 10, 60 * S },
		{ "3/500ms", 3, 500000 }, { "1/1d", 1, 86400 * S }, { " 7 / 3 s ", 7, 3 * S },
		{ "1000000000/366d", 1000000000, 366 * 86400 * S },
	};
	static const char *const bad[] = {
		"", "  ", "ten/60s", "10", "10/", "10/60", "10/60x", "10/0s", "0/60s", "-1/60s",
		"10/60s extra", "1.5/60s", "10/60S", "10000000000/1s", "1/367d", "10 60s", "10//60s",
		"10/-1s",
	};
	struct gcra_rate r;
	char err[300];

	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		int rc = gcra_rate_parse(good[i].in, &r, err, sizeof err);
		ok(rc == 0 && r.count == good[i].count && r.period_us == good[i].period_us,
		   "parses \"%s\"", good[i].in);
	}
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = '\0';
		is_int(gcra_rate_parse(bad[i], &r, err, sizeof err), -1, "rejects \"%s\"", bad[i]);
		ok(strstr(err, "10/60s") && strstr(err, "\"0\""), "says what is accepted: %s", err);
	}
	is_int(gcra_rate_parse(NULL, &r, err, sizeof err), -1, "rejects NULL");
}

static void test_params(void)
{
	struct gcra_rate r;
	struct gcra_params p;
	char err[200];

	gcra_rate_parse("10/60s", &r, err, sizeof err);
	ok(gcra_params_make(&r, 10, &p, err, sizeof err) == 0, "10/60s burst 10");
	is_int(p.emission_us, 6 * S, "T = 6 s");
	is_int(p.tolerance_us, 54 * S, "tau = 54 s");
	gcra_rate_parse("3/1s", &r, err, sizeof err);
	ok(gcra_params_make(&r, 1, &p, err, sizeof err) == 0, "3/1s burst 1");
	is_int(p.emission_us, 333334, "T rounds up (never faster than asked)");
	is_int(p.tolerance_us, 0, "burst 1: tau = 0");
	is_int(gcra_params_make(&r, 0, &p, err, sizeof err), -1, "burst 0 refused");
	ok(strstr(err, "1 to 1000000") != NULL, "burst message: %s", err);
	is_int(gcra_params_make(&r, 1000001, &p, err, sizeof err), -1, "burst too large");
	gcra_rate_parse("2000000/1s", &r, err, sizeof err);
	is_int(gcra_params_make(&r, 1, &p, err, sizeof err), -1, "faster than 1/µs refused");
	gcra_rate_parse("1/366d", &r, err, sizeof err);
	is_int(gcra_params_make(&r, 1000, &p, err, sizeof err), -1, "huge tolerance refused");
	gcra_rate_parse("0", &r, err, sizeof err);
	is_int(gcra_params_make(&r, 10, &p, err, sizeof err), -1, "disabled rate has no params");
}

static struct gcra_params mk(const char *rate, long burst)
{
	struct gcra_rate r;
	struct gcra_params p = { 0, 0 };
	char err[200];
	if (gcra_rate_parse(rate, &r, err, sizeof err) || gcra_params_make(&r, burst, &p, err, sizeof err))
		diag("mk(%s, %ld): %s", rate, burst, err);
	return p;
}

/* The example of the contract: 10 at once, then one every 6 s. */
static void test_default(void)
{
	struct gcra_params p = mk("10/60s", 10);
	struct gcra_state st = { 0, 0 };
	int64_t now = 1700000000LL * S, retry = -1;
	int allowed = 0;

	for (int i = 0; i < 10; i++)
		allowed += gcra_decide(&p, &st, now, GCRA_POLICY_REJECT, false, NULL) == GCRA_ALLOW;
	is_int(allowed, 10, "10 immediate");
	is_int(gcra_decide(&p, &st, now, GCRA_POLICY_REJECT, false, &retry), GCRA_REJECT, "11th rejected");
	is_int(retry - now, 6 * S, "retry in 6 s");
	is_int(gcra_decide(&p, &st, now + 6 * S - 1, GCRA_POLICY_REJECT, false, NULL), GCRA_REJECT,
	       "1 µs early: rejected");
	is_int(gcra_decide(&p, &st, now + 6 * S, GCRA_POLICY_REJECT, false, NULL), GCRA_ALLOW,
	       "at 6 s: allowed");
	is_int(gcra_decide(&p, &st, now + 6 * S, GCRA_POLICY_REJECT, false, NULL), GCRA_REJECT,
	       "only one at 6 s");
	is_int(gcra_decide(&p, &st, now + 12 * S, GCRA_POLICY_REJECT, false, NULL), GCRA_ALLOW,
	       "one more at 12 s");
	/* Idle for a long time: the full burst is back. */
	allowed = 0;
	for (int i = 0; i < 12; i++)
		allowed += gcra_decide(&p, &st, now + 600 * S, GCRA_POLICY_REJECT, false, NULL) == GCRA_ALLOW;
	is_int(allowed, 10, "burst refills after idling");
	ok(gcra_ttl_ms(&st, now + 600 * S) == 60000, "key expires when TAT is reached (%lld ms)",
	   (long long)gcra_ttl_ms(&st, now + 600 * S));
}

/* Deterministic pseudo-random arrivals: in every window the allowed count
 * stays within burst + floor(W / T). */
static void test_window_bound(void)
{
	struct gcra_params p = mk("5/2s", 5);
	struct gcra_state st = { 0, 0 };
	int64_t t0 = 1700000000LL * S, now = t0;
	enum { N = 4000 };
	static int64_t allowed_at[N];
	int na = 0;
	uint32_t x = 12345;
	int violations = 0;

	for (int i = 0; i < N; i++) {
		x = x * 1103515245u + 12345u;
		now += (x >> 16) % 150000;       /* ~13 arrivals per second on average */
		if (gcra_decide(&p, &st, now, GCRA_POLICY_REJECT, false, NULL) == GCRA_ALLOW)
			allowed_at[na++] = now;
	}
	for (int i = 0; i < na; i++)
		for (int64_t w = 0; w <= 10 * S; w += S / 4) {
			int c = 0;
			for (int j = i; j < na && allowed_at[j] <= allowed_at[i] + w; j++)
				c++;
			if (c > 5 + w / p.emission_us)
				violations++;
		}
	is_int(violations, 0, "no window holds more than burst + W/T (%d allowed of %d)", na, N);
	ok(na > (now - t0) / p.emission_us, "the steady rate is reached (%d allowed)", na);
}

/* Under defer the waiting jobs are spaced one T apart, newcomers queue behind
 * them, and each promoted job conforms when it comes back. */
static void test_defer(void)
{
	struct gcra_params p = mk("5/2s", 5);        /* T = 0.4 s, tau = 1.6 s */
	struct gcra_state st = { 0, 0 };
	int64_t now = 1700000000LL * S, retry[20];
	int allowed = 0;

	for (int i = 0; i < 20; i++) {
		enum gcra_verdict v = gcra_decide(&p, &st, now, GCRA_POLICY_DEFER, false, &retry[i]);
		allowed += v == GCRA_ALLOW;
		if (i >= 5)
			ok(v == GCRA_DEFER && retry[i] == now + (i - 4) * 400000,
			   "job %d deferred to +%lld ms", i, (long long)(retry[i] - now) / 1000);
	}
	is_int(allowed, 5, "burst passes");
	is_int(st.last_deferred_us, now + 15 * 400000, "last deferred slot");
	is_int(gcra_ttl_ms(&st, now), 6000, "key lives until the last deferred slot");
	/* A newcomer that would conform is still put behind the waiting ones. */
	is_int(gcra_decide(&p, &st, now + 400000, GCRA_POLICY_DEFER, false, &retry[0]), GCRA_DEFER,
	       "newcomer queues behind deferred jobs");
	is_int(retry[0] - now, 16 * 400000, "at the end of the line");
	/* Promoted jobs come back at their due times and pass. */
	int ok_all = 1;
	for (int i = 5; i < 20; i++)
		ok_all &= gcra_decide(&p, &st, retry[i], GCRA_POLICY_DEFER, true, NULL) == GCRA_ALLOW;
	ok(ok_all, "every promoted job conforms at its due time");
	is_int(gcra_decide(&p, &st, now + 16 * 400000, GCRA_POLICY_DEFER, true, NULL), GCRA_ALLOW,
	       "the queued newcomer passes at its slot");
	/* A promoted job that finds its slot taken goes to the end of the line. */
	struct gcra_state s2 = { now + 2000000, now + 800000 };
	is_int(gcra_decide(&p, &s2, now, GCRA_POLICY_DEFER, true, &retry[0]), GCRA_DEFER,
	       "promoted job over the limit is deferred again");
	is_int(retry[0] - now, 1200000, "behind the last deferred one");
	/* Once the line is empty (D in the past), newcomers pass again. */
	struct gcra_state s3 = { 0, now - 1 };
	is_int(gcra_decide(&p, &s3, now, GCRA_POLICY_DEFER, false, NULL), GCRA_ALLOW,
	       "stale D does not block");
}

/* Implausible state (a hand edit) is reset: the TAT beyond burst x T, D beyond
 * the longest deferral; the largest values a decision can write are kept. */
static void test_sanitize(void)
{
	struct gcra_params p = mk("10/60s", 10);
	int64_t now = 1700000000LL * S, day = 86400 * S;
	struct gcra_state st = { now + 60 * S, now + day };
	is_int(gcra_state_sanitize(&p, &st, now, day), 0, "TAT at now + burst x T, D at now + 1 day: kept");
	is_int(st.tat_us, now + 60 * S, "TAT unchanged");
	st.tat_us = now + 60 * S + 1;
	is_int(gcra_state_sanitize(&p, &st, now, day), 1, "TAT 1 µs further: reset");
	is_int(st.tat_us, 0, "TAT absent");
	is_int(gcra_decide(&p, &st, now, GCRA_POLICY_REJECT, false, NULL), GCRA_REJECT,
	       "D still ahead: the job waits in line");
	st = (struct gcra_state){ INT64_MAX, INT64_MAX };
	is_int(gcra_state_sanitize(&p, &st, now, day), 3, "both at INT64_MAX: reset");
	is_int(gcra_decide(&p, &st, now, GCRA_POLICY_REJECT, false, NULL), GCRA_ALLOW,
	       "then the job is allowed");
}

static void test_misc(void)
{
	is_int(gcra_us_to_ms_ceil(0), 0, "0 µs");
	is_int(gcra_us_to_ms_ceil(1), 1, "1 µs → 1 ms");
	is_int(gcra_us_to_ms_ceil(1000), 1, "1000 µs → 1 ms");
	is_int(gcra_us_to_ms_ceil(1001), 2, "1001 µs → 2 ms");
	is_int(gcra_us_to_ms_ceil(-1500), -1, "negative rounds toward +inf");
	struct gcra_state st = { 5, 0 };
	is_int(gcra_ttl_ms(&st, 1000), 1, "ttl at least 1 ms");
}

int main(void)
{
	test_parse();
	test_params();
	test_default();
	test_window_bound();
	test_defer();
	test_sanitize();
	test_misc();
	return tap_done();
}
