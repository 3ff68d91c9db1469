#!/usr/bin/python3
"""A failing job's retries wait in the delayed set, not in the worker (TAP).

A test-only trigger makes one submission's commit fail (SQLSTATE P0001: the
job's own failure, counted). With ARBITER_RETRY_BASE_MS = ARBITER_RETRY_MAX_MS
= 4s and ARBITER_MAX_DELIVERIES 3:
- after the first attempt the entry leaves the stream (nothing pending, no
  slot held) and sits in {prefix}:delayed with attempt "2", due 2-4 s later by
  Redis's clock;
- SIGKILL of the worker while it waits loses nothing: a new worker takes it
  when due, counts attempt 2 and then 3 (each parked in turn);
- the submission ends `failed` with attempts exactly 3, one dead-letter copy
  (without the attempt field), no result; meanwhile another submission of the
  same worker completes (the waiting job holds no slot: concurrency 1).
"""
import json
import subprocess
import sys
import time

from services import Services
from workerkit import BIN, SPEC_X, Arena, Worker, eq, migrate, ok, wait_for

import tap

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

ENV = {"ARBITER_RETRY_BASE_MS": "4s", "ARBITER_RETRY_MAX_MS": "4s", "ARBITER_MAX_DELIVERIES": "3",
       "ARBITER_CONCURRENCY": "1"}


def redis_ms(a):
    sec, usec = a.r.time()
    return sec * 1000 + usec // 1000


def parked(a, sid):
    """[(member dict, score)] of sid in the delayed set."""
    out = []
    for m, score in a.r.zrange(a.delayed, 0, -1, withscores=True):
        try:
            d = json.loads(m)
        except ValueError:
            continue
        if d.get("submission_id") == sid:
            out.append((d, score))
    return out


def main():
    with Services() as s:
        migrate(s)
        a = Arena(s)
        a.q(TRIGGER)
        ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
        _, bad = a.submit(a.agent(), ch, {"x": 1}, enqueue=False)
        a.q("INSERT INTO test_refuse VALUES (%s)", bad)
        a.enqueue(bad)

        w = Worker(s, "retry-1", env=ENV)
        seen = []
        got = wait_for(lambda: parked(a, bad), 30, 0.02)
        now = redis_ms(a)
        ok(got, "after a counted failure the job waits in the delayed set", w.tail())
        if got:
            member, due = got[0]
            seen.append(member.get("attempt"))
            eq(member.get("attempt"), "2", "its member carries attempt 2", member)
            ok(1500 <= due - now <= 4000, "due 2-4 s later by Redis's clock (in %d ms)" % (due - now))
            eq(member.get("submission_id"), bad, "the entry's fields travel with it")
            eq(member.get("_cause"), "retry", "the member is marked as a retry (not a rate-limit "
               "deferral)", member)
            st = subprocess.run([BIN, "status", "--json", "--redis-url", s.redis_url,
                                 "--database-url", s.database_url],
                                capture_output=True, text=True, timeout=60)
            try:
                by = json.loads(st.stdout)["redis"]["delayed_by_cause"]
            except (ValueError, KeyError):
                by = None
            eq(by, {"rate_limit": 0, "pause": 0, "retry": 1, "image": 0},
               "status --json counts it under retry", st.stdout[-1500:] + st.stderr)
        eq(a.pending(), 0, "nothing pending in the stream while it waits (no claim, no slot)")

        # The waiting job holds no slot: with concurrency 1, another job completes meanwhile.
        _, good = a.submit(a.agent(), ch, {"x": 1})
        ok(a.wait_final([good], 2.5) and a.status(good) == "completed",
           "another job completes while the first waits (concurrency 1)", w.tail())

        w.kill()
        ok(parked(a, bad) or a.r.xlen(a.stream) > 0, "SIGKILL while it waits: the job is still there")
        time.sleep(0.5)
        w2 = Worker(s, "retry-2", env=ENV)

        def watch():
            for m, _ in parked(a, bad):
                if not seen or seen[-1] != m.get("attempt"):
                    seen.append(m.get("attempt"))
            return a.status(bad) == "failed"
        ok(wait_for(watch, 40, 0.02), "the new worker takes it when due and it ends failed", w2.tail())
        eq(seen, ["2", "3"], "attempts 2 and 3 each waited in the delayed set")
        row = a.q1("SELECT status, attempts, last_error FROM submissions WHERE id = %s", bad)
        eq(row[:2], ("failed", 3), "failed after exactly 3 attempts (ARBITER_MAX_DELIVERIES)")
        ok(row[2] and "injected failure" in row[2], "last_error says why", row[2])
        eq(a.val("SELECT count(*) FROM evaluation_results WHERE submission_id = %s", bad), 0,
           "no result")
        dead = [f for _, f in a.dead_entries() if f.get("submission_id") == bad]
        ok(len(dead) == 1 and dead[0].get("reason", "").startswith("failed"),
           "one dead-letter copy with the reason", dead)
        ok(dead and "attempt" not in dead[0], "the dead-letter copy has no attempt field "
           "(a replay counts afresh)", dead)
        ok(wait_for(lambda: a.pending() == 0 and a.r.xlen(a.stream) == 0 and not parked(a, bad), 10),
           "nothing left in the stream or the delayed set")
        eq(w2.term(30), 0, "the worker exits 0", w2.tail())
        a.close()
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
