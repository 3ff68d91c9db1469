#!/usr/bin/python3
"""A lock on one agent's row delays only that agent's jobs (TAP on stdout).

An API transaction holds one agent's row (SELECT ... FOR NO KEY UPDATE) for 20 s.
Meanwhile 200 other agents' submissions arrive, plus 5 of the locked agent.
- Every other agent's job finishes with its normal latency: all 200 within a
  few seconds, their p95 latency close to a baseline run without the lock
  (before #16 the commit waited on the row with no lock timeout and the whole
  batch, up to 64 jobs, waited and retried together: only a handful finished).
- The locked agent's jobs wait, are not failed, spend no attempts, and finish
  once the lock is released; Elo equals the sequential replay.
- A held submission row (an API transaction updating it): the commit's
  lock_timeout fires, the batch is committed one job per transaction, and only
  that submission waits.
"""
import sys
import threading
import time

import psycopg2

from services import Services
from workerkit import (SPEC_X, Arena, Worker, bulk, enqueue_all, diag, done, eq, exactly_once, migrate, ok,
                       wait_for)

HOLD = 20.0


def latencies(a, subs):
    rows = a.q("SELECT extract(epoch FROM r.completed_at - s.submitted_at) FROM submissions s "
               "JOIN evaluation_results r ON r.submission_id = s.id AND r.eval_seq = 1 "
               "WHERE s.id = ANY(%s::uuid[]) ORDER BY 1", subs)
    return [float(r[0]) for r in rows]


def p95(xs):
    return xs[int(0.95 * (len(xs) - 1))] if xs else float("inf")


def main():
    with Services() as s:
        migrate(s)
        a = Arena(s)
        ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
        others = [a.agent() for _ in range(200)]
        hot = a.agent()
        w = Worker(s, "locks-1", env={"ARBITER_RECONCILE_MS": "600000"})

        # Baseline: the same load without a lock.
        base = bulk(a, others, ch, 200)
        ok(a.wait_final(base, 60), "baseline: 200 jobs done", w.tail())
        base_p95 = p95(latencies(a, base))
        diag("baseline p95 latency %.3f s" % base_p95)

        # An API transaction holds the hot agent's row.
        held = threading.Event()
        release = threading.Event()

        def holder():
            c = psycopg2.connect(s.database_url)
            with c.cursor() as cur:
                cur.execute("SELECT 1 FROM agents WHERE id = %s FOR NO KEY UPDATE", (hot,))
                held.set()
                release.wait(HOLD)
            c.rollback()
            c.close()
        hot_subs = bulk(a, [hot], ch, 5, enqueue=False)
        subs = bulk(a, others, ch, 200, enqueue=False)
        a.q("UPDATE submissions SET submitted_at = now() WHERE id = ANY(%s::uuid[])", subs)
        t = threading.Thread(target=holder, daemon=True)
        t.start()
        held.wait(10)
        t0 = time.time()
        enqueue_all(a, hot_subs)
        a.q("UPDATE submissions SET submitted_at = now() WHERE id = ANY(%s::uuid[])", subs)
        enqueue_all(a, subs)
        finished = wait_for(lambda: a.count_status(subs) == len(subs), HOLD - 4, 0.1)
        dt = time.time() - t0
        ok(finished, "all 200 other agents' jobs finished while the lock is held (%.1f s)" % dt,
           "%d of 200 finished; %s" % (a.count_status(subs), w.tail()))
        lock_p95 = p95(latencies(a, subs))
        diag("p95 latency of the others during the lock: %.3f s (baseline %.3f s)"
             % (lock_p95, base_p95))
        ok(lock_p95 < max(3 * base_p95, base_p95 + 2.0),
           "their p95 latency stays normal: %.3f s vs %.3f s without the lock" % (lock_p95, base_p95))
        eq(a.count_status(hot_subs), 0, "the locked agent's 5 jobs wait (not failed, not done)")
        release.set()
        t.join(10)
        ok(a.wait_final(hot_subs, 30), "the locked agent's jobs finish once the lock is gone",
           w.tail())
        eq(a.val("SELECT count(*) FROM submissions WHERE id = ANY(%s::uuid[]) AND status = 'completed'",
                 hot_subs), 5, "all 5 completed")
        eq(a.val("SELECT max(attempts) FROM submissions WHERE id = ANY(%s::uuid[])", hot_subs) <= 1,
           True, "no attempts spent on the lock")
        a.wait_final(subs, 60)
        problems = exactly_once(a, base + subs + hot_subs, others + [hot])
        ok(not problems, "exactly once; Elo equals the sequential replay", "\n".join(problems[:5]))
        eq(len(a.dead_entries()), 0, "nothing dead-lettered")

        # A held submission row (not the agent's): lock_timeout, then one by one.
        subs2 = bulk(a, others, ch, 100, enqueue=False)
        victim = subs2[50]
        release2 = threading.Event()
        held2 = threading.Event()

        def holder2():
            c = psycopg2.connect(s.database_url)
            with c.cursor() as cur:
                cur.execute("SELECT 1 FROM submissions WHERE id = %s FOR UPDATE", (victim,))
                held2.set()
                release2.wait(12)
            c.rollback()
            c.close()
        t2 = threading.Thread(target=holder2, daemon=True)
        t2.start()
        held2.wait(10)
        t0 = time.time()
        enqueue_all(a, subs2)
        rest = [x for x in subs2 if x != victim]
        ok(wait_for(lambda: a.count_status(rest) == len(rest), 10, 0.1),
           "submission row held: the other 99 finish meanwhile (%.1f s)" % (time.time() - t0),
           "%d of 99; %s" % (a.count_status(rest), w.tail()))
        eq(a.status(victim), "queued", "the held one waits")
        release2.set()
        t2.join(10)
        ok(a.wait_final([victim], 30), "and finishes once released", w.tail())
        eq(a.status(victim), "completed", "completed")
        eq(w.term(30), 0, "worker exits 0", w.tail())
        a.close()
    return done()


if __name__ == "__main__":
    sys.exit(main())
