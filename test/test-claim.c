/* Unit tests for worker/claim's decisions without Redis: the timing rules derived from
 * ARBITER_CLAIM_IDLE_MS (claim_timing), checked as the properties claim.c states, over the
 * setting's whole range (100 ms .. 24 h), and the XAUTOCLAIM count. The claims themselves
 * (XCLAIM, XAUTOCLAIM, adoption after a SIGKILL) are exercised against a real Redis by the
 * integration tests (test_worker_faults.py, test_worker_judge_lane.py, test_soak.py). */
#include <stdint.h>
#include <string.h>

#include "claim.h"
#include "tap.h"

#define IDLE_MIN 100        /* ARBITER_CLAIM_IDLE_MS bounds (worker/config.c) */
#define IDLE_MAX 86400000

/* The properties of claim.c's header comment, for one idle time; returns how many failed
 * (each failure is its own TAP line, the passes are counted by the caller). */
static int check(int idle)
{
	struct claim_timing t = claim_timing(idle);
	int bad = 0;
	uint64_t latest = t.refresh_age + t.tick;   /* worst case: refreshed this long after a claim */
	if (!(t.tick >= 20 && t.autoclaim >= 200))
		bad += !ok(0, "idle %d: tick %llu >= 20, autoclaim %llu >= 200", idle,
		           (unsigned long long)t.tick, (unsigned long long)t.autoclaim);
	if (!(latest < (uint64_t)idle && (uint64_t)idle - latest >= (uint64_t)idle / 3))
		bad += !ok(0, "idle %d: refreshed at the latest %llu ms after a claim, a third of idle "
		           "before another consumer may take it", idle, (unsigned long long)latest);
	if (!(t.min_idle <= t.refresh_age))
		bad += !ok(0, "idle %d: min-idle %llu <= refresh age %llu (our own refresh is never "
		           "refused)", idle, (unsigned long long)t.min_idle,
		           (unsigned long long)t.refresh_age);
	if (!(t.min_idle > 0))
		bad += !ok(0, "idle %d: min-idle > 0 (an entry another consumer just claimed stays "
		           "theirs)", idle);
	if (!(t.db_down > 0 && t.db_down < (uint64_t)idle))
		bad += !ok(0, "idle %d: refreshing stops %llu ms into a database outage, before idle "
		           "(a replica with a database then takes the entries over)", idle,
		           (unsigned long long)t.db_down);
	return bad;
}

static void timing_properties(void)
{
	int n = 0, bad = 0;
	/* The bounds, the default, small values where the minimums apply, and a spread. */
	int fixed[] = { IDLE_MIN, 101, 119, 120, 150, 799, 800, 801, 1000, 2000, 60000, IDLE_MAX };
	for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++, n++)
		bad += check(fixed[i]);
	uint32_t x = 12345;
	for (int i = 0; i < 20000; i++, n++) {
		x = x * 1103515245u + 12345u;
		bad += check(IDLE_MIN + (int)(x % (IDLE_MAX - IDLE_MIN + 1u)));
	}
	for (int idle = IDLE_MIN; idle < 5000; idle++, n++)
		bad += check(idle);
	ok(bad == 0, "claim timing: the rules of claim.c hold for %d idle times in [%d, %d]", n,
	   IDLE_MIN, IDLE_MAX);
}

static void timing_values(void)
{
	struct claim_timing d = claim_timing(60000);
	is_int(d.tick, 15000, "default 60 s: the timer ticks every 15 s");
	is_int(d.refresh_age, 20000, "default: entries claimed 20 s ago are refreshed");
	is_int(d.min_idle, 15000, "default: XCLAIM min-idle 15 s");
	is_int(d.db_down, 30000, "default: no database for 30 s stops the refresh");
	is_int(d.autoclaim, 15000, "default: XAUTOCLAIM at most every 15 s");
	struct claim_timing m = claim_timing(IDLE_MIN);
	is_int(m.tick, 25, "100 ms: tick 25 ms");
	is_int(m.autoclaim, 200, "100 ms: XAUTOCLAIM still at most every 200 ms (a scan is not free)");
	is_int(claim_timing(40).tick, 20, "below the setting's range the tick keeps its 20 ms minimum");
	struct config cfg;
	memset(&cfg, 0, sizeof cfg);
	cfg.claim_idle_ms = 2000;
	is_int(claim_tick_ms(&cfg), claim_timing(2000).tick, "claim_tick_ms is the timing's tick");
}

static void autoclaim_count(void)
{
	is_int(claim_autoclaim_count(-3), 0, "autoclaim: no free slot (over-full), no XAUTOCLAIM");
	is_int(claim_autoclaim_count(0), 0, "autoclaim: no free slot, no XAUTOCLAIM");
	is_int(claim_autoclaim_count(1), 1, "autoclaim: one free slot, one entry");
	is_int(claim_autoclaim_count(100), 100, "autoclaim: 100 free slots, 100 entries");
	is_int(claim_autoclaim_count(5000), 100, "autoclaim: at most 100 entries per scan");
}

int main(void)
{
	timing_properties();
	timing_values();
	autoclaim_count();
	return tap_done();
}
