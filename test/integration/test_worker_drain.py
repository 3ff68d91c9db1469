#!/usr/bin/python3
"""`arbiter worker` SIGTERM / SIGINT drain (TAP on stdout).

1. SIGTERM in the middle of a backlog: the worker stops reading, finishes or
   releases what it holds, exits 0 quickly and leaves nothing pending under
   its name; a second worker finishes the rest exactly once.
2. SIGTERM while PostgreSQL is down (nothing can finish; the worker took its
   jobs while their commits waited on locked agents): the drain deadline
   (ARBITER_DRAIN_MS) releases every job back to the stream and the worker
   exits 0; once PostgreSQL is back another worker finishes everything.
3. SIGINT on an idle worker: exit 0 at once.
"""
import sys
import time

from services import Services
from tap import slow
from workerkit import (SPEC_X, Arena, Worker, bulk, diag, done, eq, exactly_once, migrate, ok,
                       wait_for)


def consumer_pending(a, name):
    try:
        for c in a.r.xinfo_consumers(a.stream, a.group):
            if c["name"] == name:
                return c["pending"]
    except Exception:
        pass
    return 0


def main():
    with Services() as s:
        migrate(s)
        a = Arena(s)
        ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
        ags = [a.agent() for _ in range(10)]
        subs = bulk(a, ags, ch, 4000)

        # 1. SIGTERM mid-backlog.
        w1 = Worker(s, "d1", env={"ARBITER_CONCURRENCY": "256"})
        wait_for(lambda: a.count_status(subs) >= 800, 30, 0.01)
        t0 = time.time()
        rc = w1.term(30)
        dt = time.time() - t0
        n = a.count_status(subs)
        eq(rc, 0, "SIGTERM: exit 0", w1.tail())
        ok(dt < slow(5), "SIGTERM: drained in %.2fs" % dt)
        ok(n < len(subs), "stopped in the middle (%d of %d final)" % (n, len(subs)))
        eq(consumer_pending(a, "d1"), 0, "nothing left pending under the stopped worker")
        ok("draining" in w1.output(), "drain logged", w1.tail())
        w2 = Worker(s, "d2")
        ok(a.wait_final(subs, 60), "second worker finished the backlog", w2.tail())
        problems = exactly_once(a, subs, ags)
        ok(not problems, "exactly once across the drain", "\n".join(problems))
        eq(w2.term(30), 0, "second worker exits 0", w2.tail())

        # 2. Drain deadline with PostgreSQL down.
        subs2 = bulk(a, ags, ch, 500, enqueue=False)
        # The agents are locked, so the worker's commits wait: it holds jobs when
        # PostgreSQL goes away (a worker with no database connection takes no new jobs).
        import psycopg2 as _pg
        lock = _pg.connect(s.database_url)
        lock.cursor().execute("SELECT 1 FROM agents WHERE id = ANY(%s::uuid[]) FOR UPDATE", (ags,))
        w3 = Worker(s, "d3", env={"ARBITER_DRAIN_MS": "1500"})
        pipe = a.r.pipeline(transaction=False)
        for sid in subs2:
            pipe.xadd(a.stream, {"submission_id": sid})
        pipe.execute()
        wait_for(lambda: consumer_pending(a, "d3") > 0, 10)
        a.close()
        s.stop_postgres()
        lock.close()
        a = Arena.__new__(Arena)
        import redis as _redis
        a.r = _redis.Redis.from_url(s.redis_url, decode_responses=True)
        a.stream, a.group, a.dead = "arbiter:jobs", "arbiter-workers", "arbiter:dead"
        held = consumer_pending(a, "d3")
        ok(held > 0, "the worker holds %d jobs it cannot finish" % held)
        t0 = time.time()
        rc = w3.term(30)
        dt = time.time() - t0
        eq(rc, 0, "deadline drain: exit 0", w3.tail())
        ok(dt < 1.5 + slow(5), "deadline drain took %.2fs (deadline 1.5 s)" % dt)
        eq(consumer_pending(a, "d3"), 0, "every held job released")
        eq(a.r.xlen(a.stream), 500, "all 500 entries are back in the stream")
        s.start_postgres()
        a = Arena(s)
        w4 = Worker(s, "d4")
        ok(a.wait_final(subs2, 60), "released jobs finished by another worker", w4.tail())
        problems = exactly_once(a, subs + subs2, ags)
        ok(not problems, "exactly once across both drains", "\n".join(problems))

        # 3. SIGINT on an idle worker.
        ok(wait_for(lambda: a.r.xlen(a.stream) == 0, 10), "idle")
        t0 = time.time()
        w4.proc.send_signal(2)
        rc = w4.proc.wait(30)
        eq(rc, 0, "SIGINT: exit 0 (%.2fs)" % (time.time() - t0), w4.tail())
        ok(time.time() - t0 < slow(3), "idle worker stops at once")
        a.close()
    return done()


if __name__ == "__main__":
    sys.exit(main())
