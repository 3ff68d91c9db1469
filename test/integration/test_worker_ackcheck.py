#!/usr/bin/python3
"""A dead-letter copy that Redis refuses never loses the entry (TAP on stdout).

The dead-letter stream's key holds a string, so every XADD to it fails
(WRONGTYPE). A poison entry and a submission that fails for good must then
stay pending in the jobs stream (not acknowledged, not deleted), the worker
must not log them as dead-lettered, and once the key is usable again they
are dead-lettered exactly once. Ordinary jobs acknowledged in the same
batches are unaffected. (Before #16, MULTI/EXEC ran the XACK and XDEL after
the failed XADD: the entries vanished and the log said "dead-lettered".)
"""
import sys
import time

from services import Services
from workerkit import SPEC_X, Arena, Worker, bulk, done, eq, migrate, ok, wait_for


def main():
    with Services() as s:
        migrate(s)
        a = Arena(s)
        ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
        ags = [a.agent() for _ in range(4)]
        a.r.set(a.dead, "not a stream")
        w = Worker(s, "ack-1", env={"ARBITER_RECONCILE_MS": "600000"})
        good = bulk(a, ags, ch, 20)
        poison = a.r.xadd(a.stream, {"submission_id": "not-a-uuid"})
        ok(a.wait_final(good, 30), "ordinary jobs complete", w.tail())
        time.sleep(2)
        ids = [i for i, _ in a.r.xrange(a.stream)]
        ok(poison in ids, "the poison entry is still in the stream (its copy failed)", ids)
        pend = [p["message_id"] for p in a.r.xpending_range(a.stream, a.group, "-", "+", 100)]
        ok(poison in pend, "and still pending", pend)
        out = w.output()
        ok("WRONGTYPE" in out, "the failure is logged", w.tail())
        ok("dead-lettered to" not in out, "nothing is logged as dead-lettered")
        a.r.delete(a.dead)
        ok(wait_for(lambda: len(a.dead_entries()) == 1, 30), "once the key is usable: dead-lettered",
           w.tail())
        ok(wait_for(lambda: a.pending() == 0 and poison not in [i for i, _ in a.r.xrange(a.stream)],
                    10), "acknowledged and deleted")
        time.sleep(1)
        eq(len(a.dead_entries()), 1, "exactly one copy")
        eq(w.term(30), 0, "worker exits 0", w.tail())
        a.close()
    return done()


if __name__ == "__main__":
    sys.exit(main())
