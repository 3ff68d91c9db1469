#!/usr/bin/python3
"""`arbiter worker`: jobs that keep failing end `failed` and dead-lettered
(TAP on stdout).

1. One evaluation whose commit always fails (a test-only trigger refuses its
   result row) in a batch of others: the others commit, the bad one is retried
   alone with backoff and after ARBITER_MAX_DELIVERIES attempts ends `failed`
   with last_error and attempts, a copy in {prefix}:dead, no result, no Elo.
2. An entry a dead consumer already received more than ARBITER_MAX_DELIVERIES
   times: reclaimed with XAUTOCLAIM, failed at once.
3. A custom-script evaluator that crashes (internal_error): retried, then
   failed (skipped when the sandbox cannot run here).
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import sandboxhost
from services import Services
from workerkit import BIN, SPEC_X, Arena, Worker, diag, done, eq, migrate, ok, wait_for

TRIGGER = """
CREATE TABLE test_refuse (id uuid PRIMARY KEY);
CREATE FUNCTION test_refuse_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM test_refuse WHERE id = NEW.submission_id) THEN
    RAISE EXCEPTION 'injected failure for %', NEW.submission_id;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER test_refuse BEFORE INSERT ON evaluation_results
  FOR EACH ROW EXECUTE FUNCTION test_refuse_fn();
"""

CRASH_SPEC = {
    "evaluator": "custom-script",
    "dimensions": [{"key": "correctness", "weight": 1}],
    "script": {"language": "sh", "source": "echo no json here; exit 3", "timeout_ms": 5000},
}


def sandbox_usable():
    d = tempfile.mkdtemp(prefix="arbiter-sbx-")
    spec = dict(CRASH_SPEC, script={"language": "sh", "source": "echo '{\"scores\":{\"correctness\":5}}'",
                                    "timeout_ms": 5000})
    with open(os.path.join(d, "spec.json"), "w") as f:
        json.dump(spec, f)
    with open(os.path.join(d, "sub.json"), "w") as f:
        json.dump({"answer": {}}, f)
    r = subprocess.run([BIN, "score", "--spec", os.path.join(d, "spec.json"), "--submission",
                        os.path.join(d, "sub.json")], capture_output=True, text=True, timeout=60)
    return r.returncode == 0, r.stderr


def dead_for(a, sid):
    return [f for _, f in a.dead_entries() if f.get("submission_id") == sid]


def main():
    with Services() as s:
        migrate(s)
        a = Arena(s)
        a.q(TRIGGER)
        ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")

        # 1. A bad evaluation inside a batch.
        agents = [a.agent() for _ in range(10)]
        subs = []
        for i in range(20):
            _, sid = a.submit(agents[i % 10], ch, {"x": 1}, enqueue=False)
            subs.append(sid)
        bad = subs[7]
        a.q("INSERT INTO test_refuse VALUES (%s)", bad)
        for sid in subs:
            a.enqueue(sid)
        t0 = time.time()
        w = Worker(s, "fail-1", env={"ARBITER_MAX_DELIVERIES": "3"})
        ok(a.wait_final(subs, 40), "batch finished", w.tail())
        diag("%.1fs" % (time.time() - t0))
        good = [x for x in subs if x != bad]
        eq(a.count_status(good, ("completed",)), 19, "the 19 good evaluations committed")
        row = a.q1("SELECT status, attempts, last_error FROM submissions WHERE id = %s", bad)
        eq(row[:2], ("failed", 3), "the bad one failed after 3 attempts")
        ok(row[2] and "injected failure" in row[2], "last_error says why", row[2])
        eq(a.val("SELECT count(*) FROM evaluation_results WHERE submission_id = %s", bad), 0, "no result")
        bad_agent = agents[7 % 10]
        eq(a.val("SELECT count(*) FROM elo_history h JOIN matches m ON m.id = h.match_id "
                 "JOIN submissions s ON s.match_id = m.id WHERE s.id = %s", bad), 0, "no Elo change")
        d = dead_for(a, bad)
        ok(len(d) == 1 and d[0].get("reason", "").startswith("failed") and
           "injected failure" in d[0].get("reason", "") and d[0].get("worker_id") == "fail-1",
           "a copy in the dead-letter stream with the reason", d)
        ok(wait_for(lambda: a.pending() == 0 and a.r.xlen(a.stream) == 0, 10), "acknowledged")
        ok("one by one" in w.output(), "the batch was retried one by one", w.tail())

        # 2. Delivered too often to a dead consumer.
        _, sid = a.submit(agents[0], ch, {"x": 1}, enqueue=False)
        eq(w.term(30), 0, "worker stopped", w.tail())
        entry = a.enqueue(sid)
        a.r.xreadgroup(a.group, "ghost", {a.stream: ">"}, count=10)
        for _ in range(5):
            a.r.xclaim(a.stream, a.group, "ghost", 0, [entry])
        deliveries = a.r.xpending_range(a.stream, a.group, entry, entry, 1)[0]["times_delivered"]
        diag("delivered %d times to the ghost" % deliveries)
        w = Worker(s, "fail-2", env={"ARBITER_CLAIM_IDLE_MS": "300", "ARBITER_MAX_DELIVERIES": "5"})
        ok(a.wait_final([sid], 20), "over-delivered entry handled", w.tail())
        row = a.q1("SELECT status, attempts, last_error FROM submissions WHERE id = %s", sid)
        eq(row[:2], ("failed", 5), "failed without evaluating (attempts = max)")
        ok(row[2] and "delivered" in row[2], "last_error: delivered too often", row[2])
        ok(len(dead_for(a, sid)) == 1, "dead-lettered", a.dead_entries())
        eq(a.val("SELECT count(*) FROM evaluation_results WHERE submission_id = %s", sid), 0, "no result")
        ok(wait_for(lambda: a.pending() == 0, 10), "acknowledged", a.pending())
        eq(w.term(30), 0, "worker exits 0", w.tail())

        # 3. A crashing custom script.
        usable, why = sandbox_usable()
        if sandboxhost.gate(usable, why.strip()):
            crash = a.challenge(CRASH_SPEC, {}, difficulty="contender")
            w = Worker(s, "fail-3", env={"ARBITER_MAX_DELIVERIES": "2"})
            _, sid = a.submit(agents[1], crash, {"x": 1})
            ok(a.wait_final([sid], 40), "crashing script handled", w.tail())
            row = a.q1("SELECT status, attempts, last_error FROM submissions WHERE id = %s", sid)
            eq(row[:2], ("failed", 2), "internal_error retried, then failed")
            ok(row[2] and "internal_error" in row[2], "last_error names internal_error", row[2])
            ok(len(dead_for(a, sid)) == 1, "dead-lettered")
            eq(w.term(30), 0, "worker exits 0", w.tail())
        a.close()
    return done()


if __name__ == "__main__":
    sys.exit(main())
