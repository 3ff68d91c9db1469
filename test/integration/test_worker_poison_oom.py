#!/usr/bin/python3
"""A poison entry while Redis is out of memory (TAP on stdout).

redis-server runs with `maxmemory-policy noeviction`. Once the worker is up,
a poison entry (no submission_id) is XADDed in one MULTI with
`CONFIG SET maxmemory 1`: the entry lands (as an API server's XADD does when
Redis has a little headroom left) and Redis is then over its limit, so the
dead-letter copy of the entry cannot be written (OOM).
- The entry is never lost: while the copy is refused it stays pending in the
  consumer group and in the stream, and nothing is in the dead letters.
- After `CONFIG SET maxmemory 0` it ends in the dead-letter stream (once,
  reason missing_submission_id) and is acknowledged: nothing left pending.
- A good job enqueued afterwards is evaluated.
"""
import sys
import time

from services import Services
from workerkit import SPEC_X, Arena, Worker, diag, done, eq, migrate, ok, wait_for

PAD = 4096


def main():
    with Services() as s:
        migrate(s)
        a = Arena(s)
        ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
        ag = a.agent()
        a.r.config_set("maxmemory-policy", "noeviction")
        w = Worker(s, "poom-1", env={"ARBITER_RECONCILE_MS": "600000", "ARBITER_RETRY_BASE_MS": "200"})
        _, first = a.submit(ag, ch, {"x": 1})
        ok(a.wait_final([first], 30), "the worker is up (a first job completes)", w.tail())

        # The entry lands, and in the same atomic step Redis is left over its limit.
        tx = a.r.pipeline(transaction=True)
        tx.xadd(a.stream, {"kind": "evaluate", "pad": "p" * PAD})
        tx.config_set("maxmemory", "1")
        pid = tx.execute()[0]
        diag("poison entry %s; used_memory %s, maxmemory %s" % (
            pid, a.r.info("memory")["used_memory"], a.r.config_get("maxmemory")["maxmemory"]))

        def refused():
            return w.output().count("redis acknowledgement failed") >= 2
        ok(wait_for(refused, 30, 0.2), "the dead-letter copy is refused (OOM) and retried", w.tail())
        pend = a.r.xpending_range(a.stream, a.group, "-", "+", 10)
        eq([p["message_id"] for p in pend], [pid], "the poison entry stays pending")
        eq(len(a.r.xrange(a.stream, pid, pid)), 1, "and in the stream")
        eq(a.dead_entries(), [], "nothing in the dead letters yet")

        a.r.config_set("maxmemory", "0")
        ok(wait_for(lambda: len(a.dead_entries()) == 1 and a.pending() == 0, 60, 0.2),
           "memory freed: the entry is dead-lettered and acknowledged", w.tail())
        dead = a.dead_entries()
        eq([(f.get("original_id"), f.get("reason"), len(f.get("pad", ""))) for _, f in dead],
           [(pid, "missing_submission_id", PAD)], "one dead-letter copy, with its fields and reason")
        eq(a.r.xrange(a.stream, pid, pid), [], "the entry left the stream")
        _, second = a.submit(ag, ch, {"x": 1})
        ok(a.wait_final([second], 30), "a good job afterwards is evaluated", w.tail())
        eq(w.term(30), 0, "worker exits 0", w.tail())
        a.close()
    return done()


if __name__ == "__main__":
    sys.exit(main())
