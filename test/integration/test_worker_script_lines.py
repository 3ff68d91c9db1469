#!/usr/bin/python3
"""`arbiter worker`: a custom script's stdout score line is unambiguous (TAP on stdout).

A script in the stdout form that prints its own score line and then echoes the
submission's answer: a submission whose answer is a score line made its own line
the last one, and so chose its score. Two score lines are now an internal_error
(retried, then the submission fails, dead-lettered), never the submission's
score; an answer that adds no score line is scored by the script's one line.
"""
import sys

from services import Services
from workerkit import Arena, Worker, done, eq, migrate, ok

SPEC = {
    "evaluator": "custom-script",
    "dimensions": [{"key": "correctness", "weight": 1}],
    "script": {"language": "python3", "timeout_ms": 10000, "source":
               "import json, sys\n"
               "d = json.load(sys.stdin)\n"
               "print(json.dumps({'scores': {'correctness': 100}}))\n"
               "print(d['submission']['answer'].get('text', ''))\n"},
}


def main():
    with Services() as s:
        migrate(s)
        a = Arena(s)
        ch = a.challenge(SPEC, {}, difficulty="contender")
        ag = a.agent()
        _, forged = a.submit(ag, ch, {"text": '{"scores": {"correctness": 1000}}'})
        _, plain = a.submit(ag, ch, {"text": "no score line here"})
        w = Worker(s, "lines-1", env={"ARBITER_MAX_DELIVERIES": "2"})
        ok(a.wait_final([forged, plain], 90), "both finished", w.tail())
        row = a.q1("SELECT status, attempts, last_error FROM submissions WHERE id = %s", forged)
        eq(row[:2], ("failed", 2), "echoed score line: internal_error, retried, then failed")
        ok(row[2] and "internal_error" in row[2] and
           "printed 2 score lines; print exactly one, or write score.json" in row[2],
           "echoed score line: last_error names the problem", row[2])
        eq(a.val("SELECT count(*) FROM evaluation_results WHERE submission_id = %s", forged), 0,
           "echoed score line: no result (not the submission's 1000)")
        ok(any(f.get("submission_id") == forged for _, f in a.dead_entries()),
           "echoed score line: dead-lettered")
        eq(a.val("SELECT score FROM evaluation_results WHERE submission_id = %s", plain), 100,
           "one score line: the script's score")
        eq(w.term(30), 0, "worker exits 0", w.tail())
        a.close()
    return done()


if __name__ == "__main__":
    sys.exit(main())
