#!/usr/bin/python3
"""Three `arbiter worker` replicas on many submissions of the same few agents
(TAP on stdout).

Concurrent evaluations of one agent from several replicas serialize on the
agent row: no deadlock, no lost update. Every agent's final rating equals a
sequential replay of its elo_history (ordered by id), K switches from 32 to 16
after 30 matches, counts and streaks match, every submission is evaluated
once, and the work was really shared by the three replicas.
"""
import sys
import time

from services import Services
from workerkit import (SPEC_X, Arena, Worker, bulk, diag, done, eq, exactly_once, migrate, ok,
                       wait_for)


def main():
    with Services() as s:
        migrate(s)
        a = Arena(s)
        ch = a.challenge(SPEC_X, {"x": 1}, difficulty="veteran")
        ags = [a.agent() for _ in range(3)]
        subs = bulk(a, ags, ch, 3000, enqueue=False)
        env = {"ARBITER_CONCURRENCY": "64", "ARBITER_BATCH_MAX": "16"}
        ws = [Worker(s, "rep-%d" % i, env=env) for i in range(3)]
        time.sleep(0.5)
        from workerkit import enqueue_all
        t0 = time.time()
        enqueue_all(a, subs)
        ok(a.wait_final(subs, 90), "3000 submissions final", "\n".join(w.tail(10) for w in ws))
        diag("%.1fs" % (time.time() - t0))
        problems = exactly_once(a, subs, ags)
        ok(not problems, "ratings equal a sequential replay of elo_history; counts match",
           "\n".join(problems))
        by = dict(a.q("SELECT worker_id, count(*) FROM evaluation_results GROUP BY worker_id"))
        diag("per replica: %r" % by)
        ok(len(by) == 3 and all(v > 0 for v in by.values()), "all three replicas evaluated", by)
        eq(a.q("SELECT DISTINCT k_factor FROM elo_history ORDER BY 1"), [(16,), (32,)],
           "K 32 for the first 30 matches, 16 after")
        eq(a.val("SELECT sum(match_count) FROM agents WHERE id = ANY(%s::uuid[])", ags), 3000,
           "3000 matches counted")
        ok(wait_for(lambda: a.r.xlen(a.stream) == 0 and a.pending() == 0, 15), "nothing pending")
        for w in ws:
            out = w.output()
            ok("deadlock" not in out, "%s: no deadlock reported" % w.name, w.tail())
            eq(w.term(30), 0, "%s exits 0" % w.name, w.tail())
        a.close()
    return done()


if __name__ == "__main__":
    sys.exit(main())
