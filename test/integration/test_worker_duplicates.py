#!/usr/bin/python3
"""`arbiter worker`: duplicate deliveries change nothing (TAP on stdout).

The same submission XADDed three times (all in the backlog, so they can meet in
one batch), again after it completed, and ten times while two workers run:
every submission gets exactly one eval_seq 1 result, one elo_history row, one
match counted, and every entry is acknowledged.
"""
import sys

from services import Services
from workerkit import Arena, Worker, done, eq, migrate, ok, wait_for

SPEC = {
    "evaluator": "deterministic",
    "dimensions": [{"key": "correctness", "weight": 1, "primitive": "exact_match",
                    "field": "x", "ground_truth_field": "x"}],
}


def one_effect(a, sid, agent, name):
    eq(a.val("SELECT count(*) FROM evaluation_results WHERE submission_id = %s", sid), 1,
       "%s: exactly one result" % name)
    eq(a.val("SELECT count(*) FROM elo_history h JOIN evaluation_results r ON r.id = h.result_id "
             "WHERE r.submission_id = %s", sid), 1, "%s: Elo moved once" % name)


def main():
    with Services() as s:
        migrate(s)
        a = Arena(s)
        ch = a.challenge(SPEC, {"x": 1}, difficulty="contender")
        ag1, ag2 = a.agent(), a.agent()
        _, s1 = a.submit(ag1, ch, {"x": 1}, enqueue=False)
        _, s2 = a.submit(ag2, ch, {"x": 0}, enqueue=False)
        for _ in range(3):
            a.enqueue(s1)
        a.enqueue(s2)
        a.enqueue(s2)
        w = Worker(s, "dup-1")
        ok(a.wait_final([s1, s2], 30), "backlog with duplicates finished", w.tail())
        ok(wait_for(lambda: a.r.xlen(a.stream) == 0 and a.pending() == 0, 10),
           "all five entries acknowledged", (a.r.xlen(a.stream), a.pending()))
        one_effect(a, s1, ag1, "3x")
        one_effect(a, s2, ag2, "2x")
        eq(a.q1("SELECT elo, match_count, win_count FROM agents WHERE id = %s", ag1), (1016, 1, 1),
           "agent counted once (1000 vs 1000, win: 1016)")
        eq(a.q1("SELECT elo, match_count, loss_count FROM agents WHERE id = %s", ag2), (984, 1, 1),
           "agent counted once (loss: 984)")

        # A late duplicate after completion.
        before = a.q1("SELECT elo, match_count, current_streak FROM agents WHERE id = %s", ag1)
        a.enqueue(s1)
        ok(wait_for(lambda: a.r.xlen(a.stream) == 0 and a.pending() == 0, 10),
           "late duplicate acknowledged")
        one_effect(a, s1, ag1, "late duplicate")
        eq(a.q1("SELECT elo, match_count, current_streak FROM agents WHERE id = %s", ag1), before,
           "late duplicate changes nothing")

        # Ten copies while two workers run.
        w2 = Worker(s, "dup-2")
        _, s3 = a.submit(ag1, ch, {"x": 1}, enqueue=False)
        pipe = a.r.pipeline()
        for _ in range(10):
            pipe.xadd(a.stream, {"submission_id": s3})
        pipe.execute()
        ok(a.wait_final([s3], 30), "ten copies, two workers: finished", w.tail() + w2.tail())
        ok(wait_for(lambda: a.r.xlen(a.stream) == 0 and a.pending() == 0, 10),
           "ten copies acknowledged")
        one_effect(a, s3, ag1, "10x across two workers")
        eq(a.val("SELECT match_count FROM agents WHERE id = %s", ag1), 2, "match_count 2")
        eq(a.r.xlen(a.dead), 0, "nothing dead-lettered")
        eq(w.term(30), 0, "worker 1 exits 0", w.tail())
        eq(w2.term(30), 0, "worker 2 exits 0", w2.tail())
        a.close()
    return done()


if __name__ == "__main__":
    sys.exit(main())
