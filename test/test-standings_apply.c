/*
 * Tests for worker/standings_apply: when the worker calls the standings
 * projection's next batch (sapply_next_delay). A batch that left results behind
 * is followed at once; a caught-up, empty or busy call waits the interval; a
 * failure backs off (5 intervals, at most 5 s, never less than the interval).
 */
#undef NDEBUG
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

int main(void)
{
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		const struct row *r = &rows[i];
		struct sapply_outcome o = { r->failed, r->busy, r->caught_up, r->applied };
		is_int((int)sapply_next_delay(&o, r->interval), r->want, "%s", r->what);
	}
	return tap_done();
}
