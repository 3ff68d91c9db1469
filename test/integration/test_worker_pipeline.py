#!/usr/bin/python3
"""`arbiter worker` happy path, end to end (TAP on stdout).

Against a private redis-server and postgres: an API server inserts agents,
challenges, matches and submissions and XADDs the jobs; the worker scores
them and commits everything of sql/README.md. Checks: the seed's worked example
(823, weighted 103.5 stored exactly), every deterministic primitive family
(compared with `arbiter score` on the same inputs), the result row, its
dimension rows, the match, the agent (Elo, counts, streaks), elo_history
(opponent, K, verified / benchmark-grade bonus), acknowledgement (stream empty,
nothing pending) and the readiness endpoint.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from decimal import Decimal

from services import Services, free_port
from workerkit import Arena, Worker, BIN, diag, done, eq, migrate, ok, wait_for

SPEC_823 = {
    "evaluator": "deterministic",
    "dimensions": [
        {"key": "correctness", "weight": 0.5, "primitive": "exact_match_ratio",
         "field": "answers", "ground_truth_field": "expected_answers"},
        {"key": "speed", "weight": 0.2, "primitive": "time_decay"},
        {"key": "methodology", "weight": 0.15, "primitive": "expression", "expr": "q",
         "vars": {"q": "quality"}},
        {"key": "completeness", "weight": 0.15, "primitive": "set_overlap", "field": "found",
         "ground_truth_field": "expected", "method": "intersection"},
    ],
    "thresholds": {"win": 700, "draw": 400},
}
LETTERS = [chr(ord("a") + i) for i in range(25)]
GT_823 = {"expected_answers": list(range(1, 11)), "expected": LETTERS}
ANSWER_823 = {"answers": list(range(1, 10)) + [99], "quality": 0.69,
              "found": LETTERS[:19] + ["x1", "x2", "x3"]}

SPEC_ALL = {
    "evaluator": "deterministic",
    "dimensions": [
        {"key": "precision", "weight": 0.1, "primitive": "exact_match", "field": "label",
         "ground_truth_field": "label", "case_insensitive": True},
        {"key": "correctness", "weight": 0.2, "primitive": "numeric_tolerance", "field": "value",
         "ground_truth_field": "value", "tolerance": 0.5, "decay": "linear"},
        {"key": "analysis", "weight": 0.15, "primitive": "fuzzy_string", "field": "summary",
         "ground_truth_field": "summary"},
        {"key": "completeness", "weight": 0.15, "primitive": "coverage_ratio", "field": "items",
         "ground_truth_field": "items"},
        {"key": "cost", "weight": 0.1, "primitive": "token_efficiency"},
        {"key": "calls", "weight": 0.1, "primitive": "call_efficiency"},
        {"key": "success", "weight": 0.1, "primitive": "expression", "expr": "min(1, a / b)",
         "vars": {"a": "steps", "b": "ground_truth.total"}},
        {"key": "latency", "weight": 0.1, "primitive": "expression", "expr": "1 - t / 100",
         "vars": {"t": "metadata.latency"}, "gate": {"dimension": "success", "above": 700}},
    ],
    "thresholds": {"win": 700, "draw": 400},
    "constraints": {"token_budget": 1000, "max_llm_calls": 10},
}
GT_ALL = {"label": "Paris", "value": 10.0, "summary": "The quick brown fox jumps over the lazy dog",
          "items": ["a", "b", "c", "d"], "total": 10}

# Two dimensions of weight 0.5: both right = win (1000), one = draw (500), none = loss (0).
SPEC_WDL = {
    "evaluator": "deterministic",
    "dimensions": [
        {"key": "correctness", "weight": 0.5, "primitive": "exact_match", "field": "a",
         "ground_truth_field": "a"},
        {"key": "completeness", "weight": 0.5, "primitive": "exact_match", "field": "b",
         "ground_truth_field": "b"},
    ],
    "thresholds": {"win": 700, "draw": 400},
}
GT_WDL = {"a": 1, "b": 2}
WDL = {"win": {"a": 1, "b": 2}, "draw": {"a": 1, "b": 0}, "loss": {"a": 0, "b": 0}}


def replay_log(arena, match):
    """metadata.replay_log whose timestamps lie inside the match window."""
    t = arena.val("SELECT to_char(started_at AT TIME ZONE 'UTC' + interval '1 second', "
                  "'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') FROM matches WHERE id = %s", match)
    return [{"ts": t, "action": "think"}]


def iso_ms(arena, table, col, rid):
    return arena.val("SELECT to_char(date_trunc('milliseconds', %s) AT TIME ZONE 'UTC', "
                     "'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') FROM %s WHERE id = %%s" % (col, table), rid)


def score_cli(spec, answer, metadata, gt, match):
    d = tempfile.mkdtemp(prefix="arbiter-score-")
    paths = {}
    for name, obj in (("spec", spec), ("sub", {"answer": answer, "metadata": metadata}),
                      ("gt", gt), ("match", match)):
        paths[name] = os.path.join(d, name + ".json")
        with open(paths[name], "w") as f:
            json.dump(obj, f)
    r = subprocess.run([BIN, "score", "--spec", paths["spec"], "--submission", paths["sub"],
                        "--ground-truth", paths["gt"], "--match", paths["match"]],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return None, r.stderr
    return json.loads(r.stdout), None


def http_get(port, path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=2) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return None, str(e)


def check_823(a, w):
    ch = a.challenge(SPEC_823, GT_823, difficulty="veteran", time_limit_secs=600)
    cases = [  # (name, verified, memoryless, expected elo after from 1050)
        ("plain", False, False, 1073),
        ("verified", True, False, 1075),
        ("benchmark-grade", True, True, 1078),
    ]
    subs = []
    for name, verified, memoryless, want in cases:
        ag = a.agent(elo=1050)
        m = a.match(ag, ch, started_ago=132.0, memoryless=memoryless)
        meta = {"replay_log": replay_log(a, m)} if verified else {}
        sid = a.submission(m, ag, ANSWER_823, meta)
        entry = a.enqueue(sid)
        subs.append((name, verified, memoryless, want, ag, m, sid, entry))
    ok(a.wait_final([x[6] for x in subs], 30), "823 submissions finished", w.tail())

    for name, verified, memoryless, want, ag, m, sid, entry in subs:
        eq(a.status(sid), "completed", "%s: submission completed" % name)
        res = a.q1("SELECT id, eval_seq, job_id, evaluator, score, result, verified, worker_id, "
                   "score_breakdown, submission_warnings, constraint_violations, evaluation_log, "
                   "started_at <= completed_at, elo_before, elo_change, k_factor "
                   "FROM evaluation_results WHERE submission_id = %s", sid)
        if not ok(res is not None, "%s: result row" % name):
            continue
        rid = res[0]
        eq(res[1:8], (1, entry, "deterministic", 823, "win", verified, "w1"),
           "%s: eval_seq, job_id, evaluator, score, result, verified, worker_id" % name)
        bd = res[8]
        eq(sorted(bd), ["completeness", "correctness", "methodology", "speed"],
           "%s: breakdown keys" % name)
        eq((bd["correctness"]["score"], bd["speed"]["score"], bd["methodology"]["score"],
            bd["completeness"]["score"]), (900, 780, 690, 760), "%s: breakdown scores" % name)
        eq(Decimal(str(bd["methodology"]["weighted"])), Decimal("103.5"),
           "%s: breakdown weighted exact" % name)
        eq((res[9], res[10]), ([], []), "%s: no warnings, no violations" % name)
        ok(isinstance(res[11], dict) and res[11].get("evaluator") == "deterministic",
           "%s: evaluation_log names the evaluator" % name, res[11])
        ok(res[12], "%s: started_at <= completed_at" % name)
        eq((res[13], res[14], res[15]), (1050, want - 1050, 32), "%s: result elo facts" % name)
        dims = a.q("SELECT key, score, weight::text, weighted::text FROM evaluation_dimensions "
                   "WHERE result_id = %s ORDER BY key", rid)
        eq(dims, [("completeness", 760, "0.15", "114"), ("correctness", 900, "0.5", "450"),
                  ("methodology", 690, "0.15", "103.5"), ("speed", 780, "0.2", "156")],
           "%s: dimension rows with exact decimals" % name)
        mrow = a.q1("SELECT status, result, score, verified, elo_before, elo_after, elo_change, "
                    "completed_at IS NOT NULL FROM matches WHERE id = %s", m)
        eq(mrow, ("completed", "win", 823, verified, 1050, want, want - 1050, True),
           "%s: match completed with result and Elo" % name)
        arow = a.q1("SELECT elo, match_count, win_count, draw_count, loss_count, current_streak, "
                    "best_streak FROM agents WHERE id = %s", ag)
        eq(arow, (want, 1, 1, 0, 0, 1, 1), "%s: agent Elo %d, counts, streaks" % (name, want))
        hist = a.q("SELECT match_id::text, result_id, elo_before, elo_after, elo_change, opponent_elo, "
                   "k_factor, bonus::text, reason FROM elo_history WHERE agent_id = %s", ag)
        bonus = "1.2" if (verified and memoryless) else "1.1" if verified else "1.0"
        eq(hist, [(m, rid, 1050, want, want - 1050, 1200, 32, bonus, "evaluation")],
           "%s: elo_history row (opponent 1200, K 32, bonus %s)" % (name, bonus))


def check_all_primitives(a, w):
    ch = a.challenge(SPEC_ALL, GT_ALL, difficulty="contender", rating=1111, time_limit_secs=300)
    ag = a.agent()
    a.q("UPDATE agents SET match_count = 30 WHERE id = %s", ag)
    answers = [
        ({"label": "PARIS", "value": 10.3, "summary": "The quick brown fox jumped over the lazy dog",
          "items": ["a", "b", "c", "zz"], "steps": 8}, {"token_count": 250, "llm_call_count": 4,
                                                        "latency": 20}),
        ({"label": "Lyon", "value": 11.0, "summary": "something else entirely",
          "items": [], "steps": 3}, {"token_count": 5000, "llm_call_count": 40, "latency": 90}),
        ({"label": "paris", "value": "ten", "items": ["d", "c", "b", "a", "a"], "steps": 10},
         {"token_count": 0, "latency": 0}),
    ]
    subs = []
    for ans, meta in answers:
        m = a.match(ag, ch, started_ago=30.0)
        meta = dict(meta, replay_log=replay_log(a, m))
        sid = a.submission(m, ag, ans, meta)
        subs.append((m, sid, ans, meta))
    for m, sid, ans, meta in subs:
        a.enqueue(sid)
    ok(a.wait_final([x[1] for x in subs], 30), "all-primitives submissions finished", w.tail())
    for i, (m, sid, ans, meta) in enumerate(subs):
        match = {"started_at": iso_ms(a, "matches", "started_at", m),
                 "submitted_at": iso_ms(a, "submissions", "submitted_at", sid),
                 "time_limit_secs": 300, "memoryless": False, "attempt_number": 1}
        want, err = score_cli(SPEC_ALL, ans, meta, GT_ALL, match)
        if not ok(want is not None, "case %d: arbiter score ran" % i, err):
            continue
        got = a.q1("SELECT score, result, verified, score_breakdown, submission_warnings, "
                   "constraint_violations, id FROM evaluation_results WHERE submission_id = %s", sid)
        if not ok(got is not None, "case %d: result row" % i, w.tail()):
            continue
        eq((got[0], got[1], got[2]), (want["score"], want["result"], want["verified"]),
           "case %d: score/result/verified equal `arbiter score` (%s %s)" % (i, want["score"],
                                                                            want["result"]))
        norm = lambda bd: {k: (v["score"], Decimal(str(v["weight"])), Decimal(str(v["weighted"])))
                           for k, v in bd.items()}
        eq(norm(got[3]), norm(want["score_breakdown"]), "case %d: breakdown equals" % i)
        eq(got[4], want["submission_warnings"], "case %d: warnings equal" % i)
        eq(got[5], want["constraint_violations"], "case %d: violations equal" % i)
        dims = {k: (s, Decimal(wt), Decimal(wd)) for k, s, wt, wd in a.q(
            "SELECT key, score, weight::text, weighted::text FROM evaluation_dimensions "
            "WHERE result_id = %s", got[6])}
        eq(dims, norm(want["score_breakdown"]), "case %d: dimension rows equal the breakdown" % i)
    hist = a.q("SELECT opponent_elo, k_factor FROM elo_history WHERE agent_id = %s", ag)
    eq(sorted(set(hist)), [(1111, 16)], "explicit challenge rating as opponent, K 16 after 30 matches")
    eq(a.val("SELECT match_count FROM agents WHERE id = %s", ag), 33, "match_count counted")


def check_streaks(a, w):
    ch = a.challenge(SPEC_WDL, GT_WDL, difficulty="newcomer")
    ag = a.agent()
    seq = ["win", "win", "draw", "win", "loss", "win"]
    for want in seq:
        m, sid = a.submit(ag, ch, WDL[want])
        if not a.wait_final([sid], 20):
            ok(False, "streak submission finished", w.tail())
            return
    rows = a.q("SELECT r.result FROM elo_history h JOIN evaluation_results r ON r.id = h.result_id "
               "WHERE h.agent_id = %s ORDER BY h.id", ag)
    eq([x[0] for x in rows], seq, "results in order")
    arow = a.q1("SELECT match_count, win_count, draw_count, loss_count, current_streak, best_streak, elo "
                "FROM agents WHERE id = %s", ag)
    eq(arow[:6], (6, 4, 1, 1, 1, 2), "counts and streaks (current 1, best 2)")
    hist = a.q("SELECT elo_before, elo_after, opponent_elo, k_factor FROM elo_history "
               "WHERE agent_id = %s ORDER BY id", ag)
    elo = 1000
    chain = True
    for (before, after, opp, k), res in zip(hist, seq):
        from workerkit import elo_expected
        chain = chain and before == elo and after == elo_expected(elo, opp, k, res)
        elo = after
    ok(chain and elo == arow[6], "elo_history replays to the agent's rating %d" % arow[6], hist)


def check_large_off_loop(a, w):
    """A submission of 800 KB (four 100,000-character texts against four others) is parsed and
    scored off the event loop, and its fuzzy_string dimensions are bounded by the work budget
    (common/README.md "Work budget": such a comparison is refused before it runs, not paid):
    20 small jobs enqueued behind it all finish, and it ends scored 0 with the budget's
    warning on each dimension, well within the test's time."""
    import random
    rnd = random.Random(7)
    dims = [{"key": "d%d" % i, "weight": 0.25, "primitive": "fuzzy_string", "field": "t%d" % i,
             "ground_truth_field": "t%d" % i} for i in range(4)]
    big = a.challenge({"evaluator": "deterministic", "dimensions": dims},
                      {"t%d" % i: "".join(rnd.choice("abcdefghij") for _ in range(100000)) for i in range(4)})
    ag = a.agent()
    answer = {"t%d" % i: "".join(rnd.choice("klmnopqrst") for _ in range(100000)) for i in range(4)}
    _, slow = a.submit(ag, big, answer)
    time.sleep(0.05)
    ch = a.challenge(SPEC_WDL, GT_WDL, difficulty="newcomer")
    small = [a.submit(a.agent(), ch, WDL["win"])[1] for _ in range(20)]
    ok(a.wait_final(small, 30), "small jobs finished", w.tail())
    ok(a.wait_final([slow], 60), "large submission finished", w.tail())
    row = a.q1("SELECT score, submission_warnings FROM evaluation_results WHERE submission_id = %s",
               slow)
    eq(row and row[0], 0, "large submission scored (completely different texts: 0)")
    warns = [x for x in (row[1] if row else []) if "budget" in json.dumps(x)]
    eq(len(warns), 4, "each of its four comparisons refused by the work budget, with a warning",
       row and row[1])


def main():
    with Services() as s:
        migrate(s)
        a = Arena(s)
        port = free_port()
        w = Worker(s, "w1", env={"ARBITER_METRICS_ADDR": "127.0.0.1:%d" % port})
        st = wait_for(lambda: http_get(port, "/readyz")[0] == 200, 20)
        ok(st, "/readyz becomes 200 once Redis, PostgreSQL and migrations are ready",
           "%s\n%s" % (http_get(port, "/readyz"), w.tail()))
        check_823(a, w)
        check_all_primitives(a, w)
        check_streaks(a, w)
        check_large_off_loop(a, w)
        eq(a.r.xlen(a.stream), 0, "every entry deleted after acknowledgement")
        eq(a.pending(), 0, "nothing pending")
        eq(a.r.xlen(a.dead), 0, "nothing dead-lettered")
        code, body = http_get(port, "/metrics")
        ok(code == 200 and 'outcome="completed"' in body, "metrics count completed jobs",
           body[:2000] if body else None)
        rc = w.term(30)
        eq(rc, 0, "SIGTERM: exit 0", w.tail())
        ok('"level":"error"' not in w.output(), "no error logged", w.tail())
        a.close()
    return done()


if __name__ == "__main__":
    sys.exit(main())
