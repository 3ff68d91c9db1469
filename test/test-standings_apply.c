/*
 * Tests for worker/standings_apply: when the worker calls the standings
 * projection's next batch (sapply_next_delay). A batch that left results behind
 * is followed at once; a caught-up, empty or busy call waits the interval; a
 * failure backs off (5 intervals, at most 5 s, never less than the interval).
 * And when a due call waits (sapply_defer): only while the replica is busy (its
 * last read came back full, or at least half of its slots hold jobs) and the lag, as last reported plus the time since,
 * is below ARBITER_STANDINGS_BUSY_LAG_MS; an unknown lag or 0 never waits.
 */
#undef NDEBUG
#include <math.h>
#include <stdbool.h>

#include "standings_apply.h"
#include "tap.h"

struct row {
	bool failed, busy, caught_up;
	int applied, interval;
	int want;
	const char *what;
};

static const struct row rows[] = {
	{ false, false, false, 2000, 200, 0, "a full batch left results behind: next at once" },
	{ false, false, true, 2000, 200, 200, "a batch that caught up: the interval" },
	{ false, false, true, 0, 200, 200, "nothing to apply: the interval" },
	{ false, true, false, 0, 200, 200, "another replica holds the lease: the interval" },
	{ false, false, false, 0, 200, 200, "left behind but applied nothing: the interval, not a spin" },
	{ true, false, false, 0, 200, 1000, "a failure: 5 intervals" },
	{ true, false, false, 0, 3000, 5000, "a failure: at most 5 s" },
	{ true, false, false, 0, 60000, 60000, "a failure: never less than the interval" },
	{ false, false, true, 5, 0, 1, "an interval below 1 ms counts as 1" },
};

struct drow {
	int used, concurrency;
	bool backlog;
	double lag_ms;
	int since_ms, busy_lag_ms;
	bool want;
	const char *what;
};

static const struct drow drows[] = {
	{ 64, 64, false, 100, 0, 1000, true, "all slots busy, lag 0.1 s of 1 s: wait" },
	{ 32, 64, false, 100, 0, 1000, true, "half the slots busy: wait" },
	{ 31, 64, false, 100, 0, 1000, false, "under half busy: call" },
	{ 0, 64, false, 100, 0, 1000, false, "idle: call" },
	{ 64, 64, false, 100, 899, 1000, true, "reported 0.1 s, 0.899 s since: 0.999 s, wait" },
	{ 64, 64, false, 100, 900, 1000, false, "reported 0.1 s, 0.9 s since: at the bound, call" },
	{ 64, 64, false, 1500, 0, 1000, false, "already behind the bound (a catch-up): call" },
	{ 64, 64, false, NAN, 0, 1000, false, "lag unknown (no answer yet, a failure): call" },
	{ 64, 64, false, 100, 0, 0, false, "ARBITER_STANDINGS_BUSY_LAG_MS=0: never wait" },
	{ 1, 1, false, 0, 0, 1000, true, "one slot, busy: wait" },
	{ 0, 1, false, 0, 0, 1000, false, "one slot, idle: call" },
	{ 5, 0, false, 0, 0, 1000, false, "no slots configured: call" },
	{ 1, 64, true, 100, 0, 1000, true, "the last read came back full (a backlog), one job in hand: wait" },
	{ 0, 64, true, 100, 0, 1000, false, "the last read came back full but no job is in hand (the stream ran dry): call" },
	{ 1, 64, true, 1000, 0, 1000, false, "a backlog, lag at the bound: call" },
	{ 1, 64, true, NAN, 0, 1000, false, "a backlog, lag unknown: call" },
};

int main(void)
{
	for (size_t i = 0; i < sizeof drows / sizeof drows[0]; i++) {
		const struct drow *d = &drows[i];
		ok(sapply_defer(d->used, d->concurrency, d->backlog, d->lag_ms, (uint64_t)d->since_ms,
		                d->busy_lag_ms) == d->want, "%s", d->what);
	}
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		const struct row *r = &rows[i];
		struct sapply_outcome o = { r->failed, r->busy, r->caught_up, r->applied };
		is_int((int)sapply_next_delay(&o, r->interval), r->want, "%s", r->what);
	}
	return tap_done();
}
