#!/usr/bin/python3
"""The standings projection waits while its replica is busy, within a bound (TAP).

A replica whose stream reads come back full (a backlog) or whose slots are at
least half full lets the standings lag grow up to ARBITER_STANDINGS_BUSY_LAG_MS
before it applies (worker/standings_apply.h, sapply_defer): the projection's
work falls after the burst, or under sustained load into fewer, larger batches.

One `arbiter worker` (ARBITER_STANDINGS_APPLY_MS=100) works off a backlog of
submissions twice: with ARBITER_STANDINGS_BUSY_LAG_MS=1500ms, then with 0 (never
wait) as the control. standings_status() is sampled every 20 ms while the
backlog lasts, from the worker's first batch on. With the wait, the lag grows past 1 s and at least twice the
control's largest, and never past the bound plus 1.5 s (the batches' own time,
generous for sanitizer builds); the control applies every interval. Both times,
`arbiter standings --check` is clean within 2 s of the last commit, and every
result is applied once.
"""
import time

from services import Services
from workerkit import SPEC_X, Arena, Worker, bulk, check_clean_after, done, migrate, ok

NSUB = 24000
BOUND = 1.5


def backlog(s, a, agents, ch, busy_lag):
    """Works off NSUB submissions with one worker; returns (largest lag seen while the
    backlog lasted, seconds the backlog took, seconds from the last commit until
    --check was clean or None)."""
    subs = bulk(a, agents, ch, NSUB)
    w = Worker(s, "sb-%s" % busy_lag, env={"ARBITER_CONCURRENCY": "64",
                                           "ARBITER_STANDINGS_APPLY_MS": "100",
                                           "ARBITER_STANDINGS_BUSY_LAG_MS": busy_lag})
    t0 = time.time()
    worst = 0.0
    batches = a.val("SELECT applied_batches FROM standings_progress")
    try:
        while a.count_status(subs) < NSUB and time.time() < t0 + 300:
            lag, pending, n = a.q1("SELECT s.lag_seconds, s.pending, p.applied_batches "
                                   "FROM standings_status() s, standings_progress p")
            # from this worker's first batch on (before it, as_of is the previous run's)
            if pending and n > batches:
                worst = max(worst, lag)
            time.sleep(0.02)
        took = time.time() - t0
        last = a.val("SELECT extract(epoch FROM max(completed_at)) FROM evaluation_results")
        clean, _ = check_clean_after(s, last)
    finally:
        w.term()
    ok(a.count_status(subs) == NSUB, "busy lag %s: the backlog of %d was worked off in %.1f s"
       % (busy_lag, NSUB, took), w.tail())
    return worst, took, clean


def main():
    with Services() as s:
        migrate(s)
        a = Arena(s)
        agents = [a.agent("sb-%d" % i) for i in range(50)]
        ch = a.challenge(SPEC_X, {"x": 1}, slug="sb-ch")
        waited, took, clean_w = backlog(s, a, agents, ch, "1500ms")
        control, _, clean_c = backlog(s, a, agents, ch, "0")
        ok(waited >= 1.0 and waited >= 2 * control,
           "while busy the projection waited: largest lag %.2f s with the bound of %.1f s, "
           "%.2f s with 0 (a backlog of %.1f s)" % (waited, BOUND, control, took))
        ok(waited <= BOUND + 1.5, "and never past the bound plus the batches' time: %.2f s"
           % waited)
        ok(clean_w is not None and clean_w <= 2.0 and clean_c is not None and clean_c <= 2.0,
           "standings --check clean %s s / %s s after the last commit (target 2 s)"
           % (clean_w, clean_c))
        n = a.val("SELECT count(*) FROM evaluation_results")
        applied = a.val("SELECT applied_results FROM standings_progress")
        ok(applied == n, "every result applied once: %d of %d" % (applied, n))
    return done()


if __name__ == "__main__":
    raise SystemExit(main())
