#!/usr/bin/python3
"""Spec language v2 through the worker, end to end (TAP on stdout).

Against a private redis-server and postgres, an API server inserts a challenge
whose spec uses the v2 constructs that depend on what the worker passes to the
scorer: `@metadata` counters, `@match.elapsed_secs`, plus match_objects,
keyed_map, term_coverage with a regex, a gate expression and the round_each
total. Each submission's stored result must equal `arbiter score` on the same
inputs and the hand-computed score; a 1 MiB answer against hostile regexes
completes (bounded, with a warning) and the worker stays healthy; a spec with
an invalid v2 construct, and a spec with an unknown (misspelt) key, are rejected as
invalid_spec.
"""
import sys

from services import Services
from workerkit import Arena, Worker, done, eq, migrate, ok

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from test_worker_pipeline import iso_ms, score_cli  # noqa: E402

SPEC = {
    "evaluator": "deterministic",
    "total": "round_each",
    "dimensions": [
        {"key": "correctness", "weight": 0.35, "primitive": "match_objects", "field": "hosts",
         "ground_truth_field": "hosts", "match_on": "id", "method": "f1",
         "fields": [{"primitive": "exact_match", "field": "os", "normalize": ["casefold"]}]},
        {"key": "completeness", "weight": 0.25, "primitive": "keyed_map", "field": "answers",
         "ground_truth_field": "answers",
         "item": {"primitive": "exact_match", "normalize": ["trim", "numeric"]}},
        {"key": "methodology", "weight": 0.15, "primitive": "term_coverage", "field": "report",
         "normalize": ["casefold"], "terms": ["root cause", {"regex": "\\b\\d+ ?min"}]},
        {"key": "analysis", "weight": 0.1, "primitive": "expression",
         "expr": "if(coalesce(calls, legacy) <= 10, 1, 0.5)",
         "vars": {"calls": "@metadata.api_calls", "legacy": "@metadata.stats.calls"}},
        {"key": "speed", "weight": 0.15, "primitive": "expression", "expr": "1 - t / 600",
         "vars": {"t": "@match.elapsed_secs"},
         "gate": {"expr": "correctness > 600 || completeness >= 1000"}},
    ],
}
GT = {"hosts": [{"id": "a", "os": "debian"}, {"id": "b", "os": "alpine"}],
      "answers": {"q1": 4, "q2": "yes"}}


def main():
    with Services() as s:
        migrate(s)
        a = Arena(s)
        w = Worker(s, "w1")
        ch = a.challenge(SPEC, GT, difficulty="contender", time_limit_secs=600)
        ag = a.agent()
        cases = [
            # (answer, metadata)
            ({"hosts": [{"id": "a", "os": "Debian"}, {"id": "b", "os": "alpine"}],
              "answers": {"q1": " 4", "q2": "yes"},
              "report": "Root cause: disk full; 12 min outage."}, {"api_calls": 7}),
            ({"hosts": [{"id": "a", "os": "ubuntu"}], "answers": {"q1": "5"},
              "report": "no idea"}, {"stats": {"calls": 30}}),
        ]
        subs = []
        for ans, meta in cases:
            m = a.match(ag, ch, started_ago=60.0)
            sid = a.submission(m, ag, ans, meta)
            subs.append((m, sid, ans, meta))
        # A 1 MiB answer against the same spec plus hostile patterns.
        hostile = dict(SPEC)
        hostile["dimensions"] = [dict(d) for d in SPEC["dimensions"]]
        hostile["dimensions"][2] = {
            "key": "methodology", "weight": 0.15, "primitive": "term_coverage", "field": "report",
            "terms": [{"regex": "(a|aa)*c"}, {"regex": "[a-b ]{900}x"}, {"regex": "(.*a){15}x"}]}
        ch2 = a.challenge(hostile, GT, difficulty="contender", time_limit_secs=600)
        m2 = a.match(ag, ch2, started_ago=60.0)
        big = {"report": ("aaaaaaab " * 120000)[:1048000], "hosts": [], "answers": {}}
        sid2 = a.submission(m2, ag, big, {})
        # An invalid v2 construct: rejected before scoring.
        bad = {"evaluator": "deterministic", "dimensions": [
            {"key": "correctness", "weight": 1, "primitive": "regex_match", "field": "t",
             "pattern": "(a)\\1"}]}
        ch3 = a.challenge(bad, {}, difficulty="contender")
        m3 = a.match(ag, ch3)
        sid3 = a.submission(m3, ag, {"t": "aa"}, {})
        # A misspelt parameter (common/README.md "Unknown keys"): rejected, not silently ignored.
        typo = {"evaluator": "deterministic", "dimensions": [
            {"key": "correctness", "weight": 1, "primitive": "exact_match", "field": "t",
             "ground_truth_field": "t", "normalise": ["casefold"]}]}
        ch4 = a.challenge(typo, {"t": "AA"}, difficulty="contender")
        m4 = a.match(ag, ch4)
        sid4 = a.submission(m4, ag, {"t": "aa"}, {})
        for x in [t[1] for t in subs] + [sid2, sid3, sid4]:
            a.enqueue(x)
        ok(a.wait_final([t[1] for t in subs] + [sid2, sid3, sid4], 60), "all submissions finished",
           w.tail())
        for i, (m, sid, ans, meta) in enumerate(subs):
            match = {"started_at": iso_ms(a, "matches", "started_at", m),
                     "submitted_at": iso_ms(a, "submissions", "submitted_at", sid),
                     "time_limit_secs": 600, "memoryless": False, "attempt_number": 1}
            want, err = score_cli(SPEC, ans, meta, GT, match)
            if not ok(want is not None, "case %d: arbiter score ran" % i, err):
                continue
            got = a.q1("SELECT score, score_breakdown, submission_warnings FROM "
                       "evaluation_results WHERE submission_id = %s", sid)
            if not ok(got is not None, "case %d: result row" % i, w.tail()):
                continue
            eq(got[0], want["score"], "case %d: stored score equals arbiter score" % i)
            eq({k: v["score"] for k, v in got[1].items()},
               {k: v["score"] for k, v in want["score_breakdown"].items()},
               "case %d: dimension scores equal" % i)
            eq(got[2], want["submission_warnings"], "case %d: warnings equal" % i)
            dims = {k: v["score"] for k, v in got[1].items()}
            if i == 0:
                # every dimension full but speed: the metadata counter and the match time
                # reached the scorer
                eq(dims["correctness"], 1000, "case 0: objects matched (normalised)")
                eq(dims["completeness"], 1000, "case 0: keyed answers (numeric strings)")
                eq(dims["methodology"], 1000, "case 0: term and regex found")
                eq(dims["analysis"], 1000, "case 0: @metadata.api_calls read")
                ok(800 <= dims["speed"] < 1000, "case 0: @match.elapsed_secs read (%d)" %
                   dims["speed"])
            else:
                eq(dims["analysis"], 500, "case 1: the legacy counter via coalesce")
                eq(dims["speed"], 0, "case 1: gate expression closed (correctness and "
                   "completeness low)")
        row = a.q1("SELECT score, submission_warnings FROM evaluation_results WHERE "
                   "submission_id = %s", sid2)
        ok(row is not None, "1 MiB answer with hostile regexes: scored", w.tail())
        if row:
            ok(any("work budget" in x["message"] for x in row[1]),
               "hostile regexes: bounded, with a warning", row[1])
        eq(a.q1("SELECT status, reject_reason FROM submissions WHERE id = %s", sid3),
           ("rejected", "invalid_spec"), "invalid regex in a spec: rejected invalid_spec")
        eq(a.q1("SELECT status, reject_reason FROM submissions WHERE id = %s", sid4),
           ("rejected", "invalid_spec"), "unknown key 'normalise' in a spec: rejected invalid_spec")
        ok(w.alive(), "worker still running")
        eq(w.term(30), 0, "SIGTERM: exit 0", w.tail())
        a.close()
    return done()


if __name__ == "__main__":
    sys.exit(main())
