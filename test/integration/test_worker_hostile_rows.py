#!/usr/bin/python3
"""Rows a (trusted but buggy) API server wrote with garbage in them (TAP on stdout).

Issue #22, finding 9. Run under the ASan/UBSan build, a finding stops the worker
(halt_on_error) and the test fails.

1. submissions.attempts = INT_MAX: the submission has used up its attempts. It
   ends failed (attempts kept at INT_MAX, a dead-letter copy) instead of the
   worker computing INT_MAX + 1 (before: UBSan "2147483647 + 1 cannot be
   represented in type 'int'" in worker.c, the worker stopped).
2. An elo=adjust re-evaluation of a match whose Elo columns the API server
   overwrote (elo_change INT_MAX or INT_MIN, elo_before NULL or out of range,
   elo_after != elo_before + elo_change) is refused: the submission ends failed
   with last_error "elo_inconsistent: ...", a copy goes to the dead-letter
   stream, and no rating, history, result or match column moves (before: UBSan
   "1000 + 2147482731 cannot be represented in type 'int'" in commit.c). An
   elo=keep re-evaluation of such a match reads none of those columns and
   completes. A re-evaluation of a submission whose highest eval_seq is INT_MAX
   (a row the API server appended) is refused the same way (eval_seq_exhausted).
3. enqueued_at values that cannot be the job's enqueue time (1970, before the
   submission's submitted_at, a day ahead of now) are not observed
   in arbiter_end_to_end_latency_seconds but counted in
   arbiter_enqueued_at_implausible_total (before: enqueued_at = 1 added a day,
   the clamp, to the histogram's sum).
"""
import re
import sys
import time
import urllib.error
import urllib.request

from services import Services, free_port
from workerkit import SPEC_X, Arena, Worker, done, eq, migrate, ok, wait_for

INT_MAX = 2147483647
INT_MIN = -2147483648


def metrics(port):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=2) as r:
            body = r.read().decode()
    except (OSError, urllib.error.HTTPError):
        return {}
    out = {}
    for line in body.splitlines():
        m = re.match(r"^([a-z_]+)(\{[^}]*\})? (\S+)$", line)
        if m and not m.group(2):
            out[m.group(1)] = float(m.group(3))
    return out


def dead_for(a, sid):
    return [f for _, f in a.dead_entries() if f.get("submission_id") == sid]


def check_attempts(a, w):
    ag = a.agent()
    ch = a.challenge(SPEC_X, {"x": 1})
    _, sid = a.submit(ag, ch, {"x": 1}, enqueue=False)
    a.q("UPDATE submissions SET attempts = %s WHERE id = %s", INT_MAX, sid)
    a.enqueue(sid)
    ok(a.wait_final([sid], 30), "attempts INT_MAX: the job ends", w.tail())
    row = a.q1("SELECT status, attempts, last_error FROM submissions WHERE id = %s", sid)
    eq(row[:2], ("failed", INT_MAX), "attempts INT_MAX: failed, attempts kept", row)
    ok(row[2] and "ARBITER_MAX_DELIVERIES" in row[2], "attempts INT_MAX: last_error says why", row)
    ok(wait_for(lambda: dead_for(a, sid), 10), "attempts INT_MAX: a dead-letter copy")
    eq(a.q1("SELECT elo, match_count FROM agents WHERE id = %s", ag), (1000, 0),
       "attempts INT_MAX: no Elo move")


def completed_once(a, w):
    """A fresh agent with one completed (won) match; returns (agent, match, submission)."""
    ag = a.agent()
    ch = a.challenge(SPEC_X, {"x": 1}, difficulty="veteran")
    m, sid = a.submit(ag, ch, {"x": 1})
    ok(a.wait_final([sid], 30), "first evaluation done", w.tail())
    return ag, m, sid


def snapshot(a, ag, m, sid):
    return (a.q1("SELECT elo, match_count FROM agents WHERE id = %s", ag),
            a.val("SELECT count(*) FROM elo_history WHERE agent_id = %s", ag),
            a.val("SELECT count(*) FROM evaluation_results WHERE submission_id = %s", sid),
            a.q1("SELECT result, score, elo_before, elo_after, elo_change FROM matches "
                 "WHERE id = %s", m))


def check_elo_adjust(a, w):
    cases = [
        ("elo_change INT_MAX", "elo_change = %d" % INT_MAX),
        ("elo_change INT_MIN", "elo_change = %d" % INT_MIN),
        ("elo_before NULL", "elo_before = NULL"),
        ("elo_after != elo_before + elo_change", "elo_after = elo_after + 500"),
        ("elo_before out of range", "elo_before = %d, elo_after = %d" % (INT_MAX - 100, INT_MAX)),
        ("elo_before INT_MIN, elo_after INT_MAX", "elo_before = %d, elo_after = %d, elo_change = 0"
         % (INT_MIN, INT_MAX)),
    ]
    for name, assignment in cases:
        ag, m, sid = completed_once(a, w)
        a.q("UPDATE matches SET " + assignment + " WHERE id = %s", m)
        before = snapshot(a, ag, m, sid)
        a.enqueue(sid, kind="reevaluate", elo="adjust")
        dead = wait_for(lambda: dead_for(a, sid) and a.pending() == 0, 20)
        ok(dead, "%s: the re-evaluation ends (dead-lettered, nothing pending)" % name, w.tail())
        row = a.q1("SELECT status FROM submissions WHERE id = %s", sid)
        ok(row[0] == "completed", "%s: refused, the submission keeps its status and result" % name,
           row)
        dead = dead_for(a, sid)
        ok(dead and "elo_inconsistent" in dead[0].get("reason", ""),
           "%s: dead-letter copy with the reason" % name, dead)
        eq(snapshot(a, ag, m, sid), before, "%s: nothing moved (rating, history, results, match)" % name)
        ok(w.alive(), "%s: the worker is alive" % name, w.tail())

    # elo=keep reads none of the match's Elo columns: it completes.
    ag, m, sid = completed_once(a, w)
    a.q("UPDATE matches SET elo_change = %s, elo_before = NULL WHERE id = %s", INT_MAX, m)
    before = snapshot(a, ag, m, sid)
    a.enqueue(sid, kind="reevaluate", elo="keep")
    ok(wait_for(lambda: a.val("SELECT count(*) FROM evaluation_results WHERE submission_id = %s",
                              sid) == 2 and a.pending() == 0, 20),
       "elo=keep on a garbage match: a second result", w.tail())
    eq(a.status(sid), "completed", "elo=keep on a garbage match: still completed")
    eq(snapshot(a, ag, m, sid)[0], before[0], "elo=keep on a garbage match: rating unchanged")


def check_eval_seq(a, w):
    # A result row an API server appended with eval_seq INT_MAX: the next would be INT_MAX + 1.
    ag, m, sid = completed_once(a, w)
    a.q("INSERT INTO evaluation_results (submission_id, eval_seq, evaluator, score, result, "
        "score_breakdown, submission_warnings, constraint_violations, verified, evaluation_log, "
        "worker_id, started_at, completed_at) VALUES (%s, %s, 'deterministic', 1000, 'win', '{}', "
        "'[]', '[]', false, '{}', 'api', now(), now())", sid, INT_MAX)
    before = snapshot(a, ag, m, sid)
    a.enqueue(sid, kind="reevaluate", elo="keep")
    ok(wait_for(lambda: dead_for(a, sid) and a.pending() == 0, 20),
       "eval_seq INT_MAX: the re-evaluation ends (dead-lettered, nothing pending)", w.tail())
    row = a.q1("SELECT status FROM submissions WHERE id = %s", sid)
    ok(row[0] == "completed", "eval_seq INT_MAX: refused, the submission keeps its status", row)
    dead = dead_for(a, sid)
    ok(dead and "eval_seq_exhausted" in dead[0].get("reason", ""),
       "eval_seq INT_MAX: dead-letter copy with the reason", dead)
    eq(snapshot(a, ag, m, sid), before, "eval_seq INT_MAX: nothing appended")


def e2e(port):
    m = metrics(port)
    return (m.get("arbiter_end_to_end_latency_seconds_count"),
            m.get("arbiter_end_to_end_latency_seconds_sum"),
            m.get("arbiter_enqueued_at_implausible_total"))


def check_enqueued_at(a, w, port):
    ag = a.agent()
    ch = a.challenge(SPEC_X, {"x": 1})
    n0, s0, i0 = e2e(port)
    ok(n0 is not None and s0 is not None, "the latency histogram is exported")
    ok(i0 == 0, "arbiter_enqueued_at_implausible_total is exported (0)", i0)
    now = int(time.time() * 1000)
    # "-5" is no Unix ms at all (digits only): unreadable, neither observed nor counted.
    stamps = ["1", "0", "-5", str(now - 3600 * 1000), str(now + 86400 * 1000)]
    subs = []
    for st in stamps:
        _, sid = a.submit(ag, ch, {"x": 1}, enqueue=False)
        a.enqueue(sid, enqueued_at=st)
        subs.append(sid)
    _, good = a.submit(ag, ch, {"x": 1})
    subs.append(good)
    ok(a.wait_final(subs, 30), "enqueued_at: every job ends", w.tail())
    ok(wait_for(lambda: e2e(port)[0] == (n0 or 0) + 1, 10), "enqueued_at: one latency observed",
       e2e(port))
    ok(wait_for(lambda: e2e(port)[2] == 4.0, 10),
       "enqueued_at: 1, 0, an hour before submitted_at, a day ahead: 4 implausible", e2e(port))
    n1, s1, i1 = e2e(port)
    eq(n1, (n0 or 0) + 1, "enqueued_at: still one latency observed")
    ok(s1 is not None and s1 - (s0 or 0) < 60, "enqueued_at: the sum grew by under a minute",
       (s0, s1))
    eq(a.count_status(subs, ("completed",)), len(subs), "enqueued_at: all completed anyway")


def main():
    with Services() as s:
        migrate(s)
        a = Arena(s)
        port = free_port()
        w = Worker(s, "hostile-1", env={"ARBITER_METRICS_ADDR": "127.0.0.1:%d" % port})
        ok(wait_for(lambda: metrics(port), 20), "metrics served", w.tail())
        check_enqueued_at(a, w, port)
        check_attempts(a, w)
        check_elo_adjust(a, w)
        check_eval_seq(a, w)
        out = w.output()
        ok("runtime error" not in out and "Sanitizer" not in out, "no sanitizer report",
           "\n".join(l for l in out.splitlines() if "runtime error" in l or "Sanitizer" in l)[:2000])
        eq(w.term(30), 0, "the worker exits cleanly")
        a.close()
    return done()


if __name__ == "__main__":
    sys.exit(main())
