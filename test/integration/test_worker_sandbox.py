#!/usr/bin/python3
"""`arbiter worker` with the sandboxed evaluators (TAP on stdout).

test-suite and custom-script jobs flow through the same pipeline: result,
breakdown, Elo; the evaluation_log carries the per-case `tests` verdicts; a
long-running script shows the submission as `evaluating` and does not hold
up deterministic jobs meanwhile. Skipped when the sandbox cannot run here.
"""
import sys
import time

import sandboxhost
from services import Services
from test_worker_failures import sandbox_usable
from workerkit import SPEC_X, Arena, Worker, bulk, diag, done, eq, migrate, ok, wait_for

SUITE = {
    "evaluator": "test-suite",
    "dimensions": [{"key": "correctness", "weight": 0.8}, {"key": "speed", "weight": 0.2,
                                                          "primitive": "time_decay"}],
    "test_suite": {"language": "python3", "dimension": "correctness", "cases": [
        {"name": "small", "stdin": "2 3\n", "expected_stdout": "5\n", "weight": 1},
        {"name": "big", "stdin": "100 250\n", "expected_stdout": "350\n", "weight": 1}]},
}
GOOD = {"files": {"main.py": "a, b = map(int, input().split())\nprint(a + b)\n"}}
WRONG = {"files": {"main.py": "a, b = map(int, input().split())\nprint(a * b)\n"}}
SCRIPT = {
    "evaluator": "custom-script",
    "dimensions": [{"key": "correctness", "weight": 1}],
    "script": {"language": "python3", "timeout_ms": 10000, "source":
               "import json, sys, time\n"
               "d = json.load(sys.stdin)\n"
               "time.sleep(d['submission']['answer'].get('sleep', 0))\n"
               "print(json.dumps({'scores': {'correctness': d['submission']['answer']['points']}}))\n"},
}


def main():
    usable, why = sandbox_usable()
    stop = sandboxhost.skip_all_or_fail(usable, why.strip().replace("\n", " "))
    if stop is not None:
        return stop
    with Services() as s:
        migrate(s)
        a = Arena(s)
        w = Worker(s, "sbx-1", env={"ARBITER_SANDBOX_SLOTS": "2"})
        suite = a.challenge(SUITE, {}, difficulty="contender")
        script = a.challenge(SCRIPT, {}, difficulty="contender")
        ag = a.agent()
        m1, good = a.submit(ag, suite, GOOD)
        m2, wrong = a.submit(ag, suite, WRONG)
        m3, scored = a.submit(ag, script, {"points": 640})
        ok(a.wait_final([good, wrong, scored], 60), "sandbox jobs finished", w.tail())
        r = a.q1("SELECT evaluator, result, score_breakdown->'correctness'->>'score', evaluation_log "
                 "FROM evaluation_results WHERE submission_id = %s", good)
        eq(r[:3], ("test-suite", "win", "1000"), "test-suite: accepted program wins, correctness 1000")
        tests = r[3].get("tests") if isinstance(r[3], dict) else None
        ok(tests and [t["verdict"] for t in tests] == ["accepted", "accepted"] and
           all("cpu_ms" in t and "exit_code" in t for t in tests),
           "test-suite: evaluation_log has the per-case tests", r[3])
        r = a.q1("SELECT result, score_breakdown->'correctness'->>'score', evaluation_log "
                 "FROM evaluation_results WHERE submission_id = %s", wrong)
        eq(r[:2], ("loss", "0"), "test-suite: wrong program loses")
        ok([t["verdict"] for t in r[2].get("tests", [])] == ["wrong_answer", "wrong_answer"],
           "test-suite: wrong_answer verdicts logged", r[2])
        r = a.q1("SELECT evaluator, score, result FROM evaluation_results WHERE submission_id = %s", scored)
        eq(r, ("custom-script", 640, "draw"), "custom-script: its score, draw")
        eq(a.val("SELECT attempts FROM submissions WHERE id = %s", scored), 1, "one attempt recorded")
        eq(a.val("SELECT count(*) FROM elo_history WHERE agent_id = %s", ag), 3, "Elo moved for each")

        # An answer nested deeper than 64 levels is scored, not handed to the script (a
        # parser's recursion limit would make its crash an internal error the submission
        # forced, and a failure or a rejection moves no Elo): the script's dimensions score 0,
        # with a warning naming the limit, and the match is a loss.
        deep = 900
        for _ in range(100):
            deep = [deep]
        m4, nested = a.submit(ag, script, {"points": 900, "deep": deep})
        ok(a.wait_final([nested], 60), "deep answer: finished", w.tail())
        r = a.q1("SELECT s.status, r.score, r.result, r.submission_warnings::text "
                 "FROM submissions s JOIN evaluation_results r ON r.submission_id = s.id "
                 "WHERE s.id = %s", nested)
        eq(r[:3], ("completed", 0, "loss"), "deep answer: completed, scored 0, a loss")
        ok("64 levels" in (r[3] or ""), "deep answer: a warning names the limit", r[3])
        eq(a.val("SELECT count(*) FROM elo_history WHERE agent_id = %s", ag), 4,
           "deep answer: Elo moved")

        # A slow script does not hold up deterministic jobs.
        _, slow = a.submit(ag, script, {"points": 900, "sleep": 3})
        ok(wait_for(lambda: a.status(slow) == "evaluating", 10), "slow script: status evaluating",
           a.status(slow))
        ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
        others = [a.agent() for _ in range(5)]
        t0 = time.time()
        subs = bulk(a, others, ch, 300)
        ok(a.wait_final(subs, 30), "deterministic jobs finished meanwhile", w.tail())
        dt = time.time() - t0
        eq(a.status(slow), "evaluating", "before the slow script (%.2fs)" % dt)
        ok(a.wait_final([slow], 30), "slow script finished", w.tail())
        eq(a.val("SELECT score FROM evaluation_results WHERE submission_id = %s", slow), 900, "its score")
        eq(w.term(30), 0, "worker exits 0", w.tail())
        a.close()
    return done()


if __name__ == "__main__":
    sys.exit(main())
