#!/usr/bin/python3
"""`arbiter worker`: kind=reevaluate with elo=keep and elo=adjust (TAP on stdout).

A completed submission is re-scored after its challenge's ground truth
changed. keep: a new eval_seq, rating and match untouched, no elo_history.
adjust: a new eval_seq; the change is recomputed from the ORIGINAL elo_before
and K, and the difference to the match's current effective change is added
to the agent's current rating and logged (reason reevaluation_adjust); the
match shows the adjusted evaluation. A redelivered reevaluate entry (same
entry id, after Redis lost the stream) appends nothing; a reevaluation of a
submission without a result is dead-lettered.
"""
import json
import sys

from services import Services
from workerkit import Arena, Worker, done, elo_expected, eq, migrate, ok, wait_for

SPEC = {
    "evaluator": "deterministic",
    "dimensions": [
        {"key": "correctness", "weight": 0.5, "primitive": "exact_match", "field": "a",
         "ground_truth_field": "a"},
        {"key": "completeness", "weight": 0.5, "primitive": "exact_match", "field": "b",
         "ground_truth_field": "b"},
    ],
    "thresholds": {"win": 700, "draw": 400},
}


def results(a, sid):
    return a.q("SELECT eval_seq, score, result, elo_before, elo_change, k_factor, job_id "
               "FROM evaluation_results WHERE submission_id = %s ORDER BY eval_seq", sid)


def reevaluate(a, sid, elo, n_before):
    entry = a.enqueue(sid, kind="reevaluate", elo=elo)
    got = wait_for(lambda: len(results(a, sid)) > n_before and a.pending() == 0, 20)
    return entry, got


def main():
    with Services() as s:
        migrate(s)
        a = Arena(s)
        w = Worker(s, "re-1")
        ch = a.challenge(SPEC, {"a": 1, "b": 2}, difficulty="veteran")
        other = a.challenge(SPEC, {"a": 1, "b": 2}, difficulty="veteran")
        ag = a.agent()
        m1, s1 = a.submit(ag, ch, {"a": 1, "b": 2})            # win: 1000 -> 1024
        ok(a.wait_final([s1], 20), "first evaluation done", w.tail())
        m2, s2 = a.submit(ag, other, {"a": 0, "b": 0})         # loss: 1024 -> 1015
        ok(a.wait_final([s2], 20), "second evaluation done", w.tail())
        eq(a.val("SELECT elo FROM agents WHERE id = %s", ag), 1015, "rating after win and loss")
        orig = results(a, s1)[0]
        eq(orig[:6], (1, 1000, "win", 1000, 24, 32), "original result: +24 from 1000, K 32")

        # The ground truth changes: the same answer now draws.
        a.q("UPDATE challenges SET ground_truth = %s::jsonb WHERE id = %s", json.dumps({"a": 1, "b": 0}), ch)
        match_before = a.q1("SELECT status, result, score, elo_before, elo_after, elo_change "
                            "FROM matches WHERE id = %s", m1)

        e_keep, got = reevaluate(a, s1, "keep", 1)
        ok(got, "keep: result appended", w.tail())
        r = results(a, s1)
        eq(r[-1], (2, 500, "draw", 1000, 8, 32, e_keep),
           "keep: eval_seq 2, draw, implied change +8 from the original 1000 / K 32, job_id")
        eq(a.val("SELECT elo FROM agents WHERE id = %s", ag), 1015, "keep: rating unchanged")
        eq(a.val("SELECT count(*) FROM elo_history WHERE agent_id = %s", ag), 2, "keep: no elo_history row")
        eq(a.q1("SELECT status, result, score, elo_before, elo_after, elo_change FROM matches "
                "WHERE id = %s", m1), match_before, "keep: match untouched")
        eq(a.status(s1), "completed", "keep: submission stays completed")

        e_adj, got = reevaluate(a, s1, "adjust", 2)
        ok(got, "adjust: result appended", w.tail())
        eq(results(a, s1)[-1][:6], (3, 500, "draw", 1000, 8, 32), "adjust: eval_seq 3, +8 implied")
        eq(a.val("SELECT elo FROM agents WHERE id = %s", ag), 999,
           "adjust: rating 1015 + (8 - 24) = 999")
        h = a.q1("SELECT match_id::text, elo_before, elo_after, elo_change, k_factor, reason, "
                 "result_id = (SELECT id FROM evaluation_results WHERE submission_id = %s AND eval_seq = 3) "
                 "FROM elo_history WHERE agent_id = %s ORDER BY id DESC LIMIT 1", s1, ag)
        eq(h, (m1, 1015, 999, -16, 32, "reevaluation_adjust", True), "adjust: logged in elo_history")
        eq(a.q1("SELECT status, result, score, elo_before, elo_after, elo_change FROM matches "
                "WHERE id = %s", m1), ("completed", "draw", 500, 1000, 1008, 8),
           "adjust: match shows the adjusted evaluation and its effective change")

        e_adj2, got = reevaluate(a, s1, "adjust", 3)
        ok(got, "adjust again, same outcome: appended", w.tail())
        eq(a.val("SELECT elo FROM agents WHERE id = %s", ag), 999,
           "adjust again: nothing more to move (effective change already +8)")
        eq(a.val("SELECT elo_change FROM elo_history WHERE agent_id = %s ORDER BY id DESC LIMIT 1", ag), 0,
           "adjust again: a zero adjustment is logged")

        a.q("UPDATE challenges SET ground_truth = %s::jsonb WHERE id = %s", json.dumps({"a": 5, "b": 5}), ch)
        e_adj3, got = reevaluate(a, s1, "adjust", 4)
        ok(got, "adjust to a loss: appended", w.tail())
        eq(results(a, s1)[-1][:5], (5, 0, "loss", 1000, -8), "loss implies -8 from the original 1000")
        eq(a.val("SELECT elo FROM agents WHERE id = %s", ag), 983, "rating 999 + (-8 - 8) = 983")

        hist = a.q("SELECT elo_before, elo_after, elo_change FROM elo_history WHERE agent_id = %s ORDER BY id", ag)
        chain = all(hist[i][0] == hist[i - 1][1] for i in range(1, len(hist))) and hist[0][0] == 1000
        ok(chain and hist[-1][1] == 983 and all(b + c == af for b, af, c in hist),
           "elo_history replays to the agent's rating", hist)

        # Redelivery of the same reevaluate entry id (Redis lost the stream and it came back).
        n = len(results(a, s1))
        a.r.delete(a.stream)
        a.r.xadd(a.stream, {"submission_id": s1, "kind": "reevaluate", "elo": "adjust"}, id=e_adj3)
        ok(wait_for(lambda: a.r.xlen(a.stream) == 0 and a.pending() == 0, 20),
           "redelivered entry acknowledged", w.tail())
        eq(len(results(a, s1)), n, "redelivered reevaluate entry appends nothing")
        eq(a.val("SELECT elo FROM agents WHERE id = %s", ag), 983, "and moves nothing")

        # Reevaluating a submission that has no result.
        own, stranger = a.agent(), a.agent()
        m = a.match(own, ch)
        rej = a.submission(m, stranger, {"a": 1, "b": 2})
        a.enqueue(rej)
        ok(a.wait_final([rej], 20), "a rejected submission", w.tail())
        a.enqueue(rej, kind="reevaluate", elo="adjust")
        ok(wait_for(lambda: any(f.get("submission_id") == rej for _, f in a.dead_entries()), 20),
           "reevaluate without a result: dead-lettered", a.dead_entries())
        eq(a.status(rej), "rejected", "its status is unchanged")
        eq(a.val("SELECT count(*) FROM evaluation_results WHERE submission_id = %s", rej), 0,
           "no result appended")
        eq(w.term(30), 0, "worker exits 0", w.tail())
        a.close()
    return done()


if __name__ == "__main__":
    sys.exit(main())
