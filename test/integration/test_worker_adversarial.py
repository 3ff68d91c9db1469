#!/usr/bin/python3
"""`arbiter worker` against an adversary (TAP on stdout).

Scenarios an API server and an unlucky operator can produce, each with real
`arbiter worker` processes, redis-server and postgres (one Services instance,
one fresh database and an empty Redis per scenario). Random choices use a fixed
seed, so a run is reproducible.

 1. hostile stream entries: extra, empty, 1 MB, binary and duplicated fields,
    names with a NUL byte, odd spellings of ids, kinds and elo values, junk
    enqueued_at / source_ip, some deferred by the rate limiter on the way.
    Poison is dead-lettered with its reason, the rest is evaluated once, and
    the submissions behind poison entries are still evaluated (reconciler).
 2. hostile rows: answers nested to PostgreSQL's maximum depth, integers
    beyond 64 bits, numbers beyond a double, metadata / answer / ground truth
    that are not objects, specs that are not objects or hold a broken
    expression, matches with expires_at 'infinity' / started_at '-infinity',
    a huge time limit, an 8 MB answer: every submission ends in a defined
    state, a normal submission loaded with them is not held up.
 3. elo=adjust re-evaluations and evaluations of the same agents in ONE
    commit batch: elo_history replays to the ratings.
 4. re-evaluation of a submission whose evaluation used every attempt.
 5. SIGKILL of one of two replicas at 10 random moments during a 2,000-job
    run with re-evaluations mixed in.
 6. Redis killed -9 and restarted empty mid-run; Redis paused (CLIENT PAUSE
    ALL) longer than the command timeouts; PostgreSQL restarted "immediate".
 7. PostgreSQL's connection limit hit: a replica that gets no connection must
    not take jobs; a replica cut off from PostgreSQL while holding jobs must
    let the others take them over.
 8. a long sandbox run while a second replica with ARBITER_CLAIM_IDLE_MS=100
    watches its claim (skipped when the sandbox cannot run here).
 9. three replicas, 50 agents, 3,000 submissions with duplicate deliveries
    and 800 re-evaluations (keep and adjust) mixed in.
10. SIGTERM during a heavy backlog (with sandbox runs longer than the drain
    deadline when the sandbox works): exit 0 in time, a second worker does
    the rest exactly once.
11. SIGTERM while the COMMIT of a re-evaluation is lost in flight: the entry
    stays pending (same id) instead of being released as a new job, so it
    appends exactly one result.
After each: every submission final with exactly one eval_seq 1 result (when
it was evaluated), every re-evaluation job exactly one result, ratings equal
a sequential replay of elo_history, no duplicate elo_history row per match,
nothing pending, every worker exits 0.
"""
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid

import psycopg2
import redis

import sandboxhost
from services import Services
from workerkit import (BIN, SPEC_X, Arena, Worker, bulk, diag, done, elo_expected, enqueue_all,
                       eq, migrate, ok, wait_for)

SEED = 20240611
rnd = random.Random(SEED)


# -- helpers ----------------------------------------------------------------------------

def fresh(s, name):
    """A new database for the scenario (s.database_url points at it) and an empty Redis."""
    s.dbname = name
    s.psql("postgres", "CREATE DATABASE %s" % name)
    migrate(s)
    redis.Redis.from_url(s.redis_url).flushall()
    return Arena(s)


def finals(a, subs):
    return a.count_status(subs)


def replay(a, agents, initial=1000):
    """Replays every agent's elo_history (evaluations and elo=adjust rows) in id order, checking
    each row against common/README.md "Elo", and compares with the agents rows. Returns problems."""
    problems = []
    for ag in agents:
        row = a.q1("SELECT elo, match_count FROM agents WHERE id = %s", ag)
        hist = a.q("SELECT h.reason, h.match_id, h.elo_before, h.elo_after, h.opponent_elo, h.k_factor, "
                   "r.result, r.verified, m.memoryless, m.attempt_number FROM elo_history h "
                   "JOIN evaluation_results r ON r.id = h.result_id JOIN matches m ON m.id = h.match_id "
                   "WHERE h.agent_id = %s ORDER BY h.id", ag)
        elo, nev, orig, eff = initial, 0, {}, {}
        for i, (reason, mid, before, after, opp, k, res, vf, ml, att) in enumerate(hist):
            if before != elo:
                problems.append("agent %s row %d (%s): elo_before %d, replay %d" % (ag, i, reason, before, elo))
                break
            if reason == "evaluation":
                want_k = 32 if nev < 30 else 16
                want = elo_expected(elo, opp, want_k, res, vf, ml, att)
                if after != want or k != want_k or mid in orig:
                    problems.append("agent %s row %d: %r, want after %d K %d%s" % (
                        ag, i, (before, after, k), want, want_k, ", match twice" if mid in orig else ""))
                    break
                orig[mid] = (before, k, opp)
                eff[mid] = after - before
                nev += 1
            else:
                if mid not in orig:
                    problems.append("agent %s row %d: adjustment before the evaluation" % (ag, i))
                    break
                ob, ok_, oopp = orig[mid]
                want = max(100, before + (elo_expected(ob, oopp, ok_, res, vf, ml, att) - ob) - eff[mid])
                if after != want:
                    problems.append("agent %s row %d adjust: %r, want after %d" % (ag, i, (before, after), want))
                    break
                eff[mid] += after - before
            elo = after
        if (row[0], row[1]) != (elo, nev):
            problems.append("agent %s: row (elo %d, matches %d), replay (%d, %d)" % (ag, row[0], row[1], elo, nev))
    return problems


def invariants(a, name, subs, agents, reevals=(), evaluated=True):
    """The whole-run checks of the module comment."""
    if evaluated:
        bad = a.q("SELECT s.id, s.status, count(r.id) FROM submissions s LEFT JOIN evaluation_results r "
                  "ON r.submission_id = s.id AND r.eval_seq = 1 WHERE s.id = ANY(%s::uuid[]) "
                  "GROUP BY s.id, s.status HAVING s.status <> 'completed' OR count(r.id) <> 1", list(subs))
        ok(not bad, "%s: every submission completed with one eval_seq 1 result" % name,
           "%d bad, e.g. %r" % (len(bad), bad[:5]))
    got = sorted((str(x), y) for x, y in a.q(
        "SELECT submission_id, job_id FROM evaluation_results WHERE eval_seq > 1"))
    eq(got, sorted(reevals), "%s: every re-evaluation job appended exactly one result (%d)"
       % (name, len(reevals)))
    gaps = a.q("SELECT submission_id FROM evaluation_results GROUP BY submission_id "
               "HAVING max(eval_seq) <> count(*)")
    ok(not gaps, "%s: eval_seq has no gaps" % name, gaps[:5])
    dup = a.q("SELECT match_id, count(*) FROM elo_history WHERE reason = 'evaluation' "
              "GROUP BY match_id HAVING count(*) > 1")
    ok(not dup, "%s: at most one evaluation row per match in elo_history" % name, dup[:5])
    problems = replay(a, agents)
    ok(not problems, "%s: ratings equal a sequential replay of elo_history" % name, "\n".join(problems[:10]))
    ok(wait_for(lambda: a.r.xlen(a.stream) == 0 and a.pending() == 0, 20),
       "%s: stream empty, nothing pending" % name, (a.r.xlen(a.stream), a.pending()))


def stop_all(name, workers):
    for w in workers:
        if w.alive():
            eq(w.term(40), 0, "%s: %s exits 0" % (name, w.name), w.tail())


def dead_by_entry(s):
    """Dead letters by original entry id (read as bytes: they may hold binary fields)."""
    out = {}
    for _, f in redis.Redis.from_url(s.redis_url).xrange("arbiter:dead"):
        f = {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in f.items()}
        out[f.get("original_id")] = f
    return out


SLOW_TRIGGER = """
CREATE TABLE test_slow (id uuid, eval_seq int, secs float8, PRIMARY KEY (id, eval_seq));
CREATE FUNCTION test_slow_fn() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE d float8;
BEGIN
  SELECT secs INTO d FROM test_slow WHERE id = NEW.submission_id AND eval_seq = NEW.eval_seq;
  IF d IS NOT NULL THEN
    PERFORM pg_sleep(d);
  END IF;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER test_slow AFTER INSERT ON evaluation_results
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_slow_fn();
"""


def sandbox_usable():
    d = tempfile.mkdtemp(prefix="arbiter-adv-")
    spec = {"evaluator": "custom-script", "dimensions": [{"key": "correctness", "weight": 1}],
            "script": {"language": "sh", "source": "echo '{\"scores\":{\"correctness\":5}}'",
                       "timeout_ms": 5000}}
    with open(os.path.join(d, "spec.json"), "w") as f:
        json.dump(spec, f)
    with open(os.path.join(d, "sub.json"), "w") as f:
        json.dump({"answer": {}}, f)
    r = subprocess.run([BIN, "score", "--spec", os.path.join(d, "spec.json"), "--submission",
                        os.path.join(d, "sub.json")], capture_output=True, text=True, timeout=60)
    return r.returncode == 0, r.stderr.strip()


def slow_spec(secs):
    return {"evaluator": "custom-script", "dimensions": [{"key": "correctness", "weight": 1}],
            "script": {"language": "sh", "timeout_ms": 60000,
                       "source": "sleep %s; echo '{\"scores\":{\"correctness\":700}}'" % secs}}


def max_jsonb_depth(a):
    """The deepest [[[...]]] PostgreSQL accepts as jsonb here (its stack depth limit)."""
    lo, hi = 1000, 200000
    while lo < hi:
        mid = (lo + hi + 1) // 2
        try:
            a.val("SELECT jsonb_typeof(%s::jsonb)", "[" * mid + "]" * mid)
            lo = mid
        except psycopg2.Error:
            hi = mid - 1
    return lo


# -- 1. hostile stream entries ------------------------------------------------------------

def hostile_entries(s):
    a = fresh(s, "adv_entries")
    rb = redis.Redis.from_url(s.redis_url)      # bytes in, bytes out
    ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
    ag = a.agent()

    def sub():
        return a.submit(ag, ch, {"x": 1}, enqueue=False)[1]

    hot = "203.0.113.77"        # limited at 10/s, burst 1: the entries behind the first are deferred
    good, poison, evaluated_later = {}, {}, []

    def add_good(name, fields, sid):
        good[name] = (rb.xadd(a.stream, fields).decode(), sid)

    def add_poison(name, fields, reason, sid=None):
        poison[name] = (rb.xadd(a.stream, fields).decode(), reason)
        if sid:
            evaluated_later.append(sid)

    x = sub()
    add_good("extra fields", {"submission_id": x, "foo": "bar", "reason": "spoofed", "original_id": "1-1",
                              "worker_id": "spoofed", "failed_at": "0", "": "empty name"}, x)
    x = sub()
    add_good("upper-case id", {"submission_id": x.upper()}, x)
    x = sub()
    add_good("junk enqueued_at", {"submission_id": x, "enqueued_at": "yesterday"}, x)
    x = sub()
    add_good("far-future enqueued_at", {"submission_id": x, "enqueued_at": "99999999999999999999"}, x)
    x = sub()
    add_good("negative enqueued_at", {"submission_id": x, "enqueued_at": "-5"}, x)
    x = sub()
    add_good("garbage source_ip", {"submission_id": x, "source_ip": "not an ip ::: 999.1.1.1/77%zz"}, x)
    x = sub()
    add_good("100 kB source_ip", {"submission_id": x, "source_ip": "1" * 100000}, x)
    x = sub()
    add_good("binary source_ip", {"submission_id": x, "source_ip": b"\xff\xfe\x00\x01"}, x)
    x = sub()
    add_good("empty source_ip", {"submission_id": x, "source_ip": ""}, x)
    x = sub()
    add_good("kind and elo spelled right", {"submission_id": x, "kind": "evaluate", "elo": "keep"}, x)
    # Through the rate limiter's delayed set and back (binary, 1 MB, duplicated fields).
    x = sub()
    add_good("first of the hot IP", {"submission_id": x, "source_ip": hot}, x)
    x = sub()
    add_good("1 MB field, deferred", {"submission_id": x, "source_ip": hot, "blob": b"z" * (1 << 20)}, x)
    x = sub()
    add_good("binary field, deferred", {"submission_id": x, "source_ip": hot,
                                        b"\xff\x00name": b"\x00\xc3\x28\xff"}, x)
    x = sub()
    good["duplicated submission_id, deferred"] = (rb.execute_command(
        "XADD", a.stream, "*", "source_ip", hot, "submission_id", x, "submission_id",
        str(uuid.uuid4())).decode(), x)
    x = sub()
    good["duplicated kind"] = (rb.execute_command(
        "XADD", a.stream, "*", "submission_id", x, "kind", "evaluate", "kind", "bogus").decode(), x)

    add_poison("no fields but junk", {"foo": "bar"}, "missing_submission_id")
    x = sub()
    add_poison("submission_id with a NUL in its name", {b"submission_id\x00junk": x},
               "missing_submission_id", x)
    add_poison("empty submission_id", {"submission_id": ""}, "invalid_submission_id")
    add_poison("spoofed dead-letter fields", {"submission_id": "nope", "reason": "spoofed",
                                              "original_id": "1-1", "worker_id": "x", "failed_at": "0"},
               "invalid_submission_id")
    x = sub()
    add_poison("braces", {"submission_id": "{%s}" % x}, "invalid_submission_id", x)
    x = sub()
    add_poison("whitespace", {"submission_id": " %s\n" % x}, "invalid_submission_id", x)
    x = sub()
    add_poison("NUL after the id", {"submission_id": x.encode() + b"\x00"}, "invalid_submission_id", x)
    add_poison("1 MB submission_id", {"submission_id": "a" * (1 << 20)}, "invalid_submission_id")
    x = sub()
    add_poison("kind=REEVALUATE", {"submission_id": x, "kind": "REEVALUATE"}, "invalid_kind", x)
    x = sub()
    add_poison("empty kind", {"submission_id": x, "kind": ""}, "invalid_kind", x)
    x = sub()
    add_poison("kind with a NUL tail", {"submission_id": x, "kind": b"evaluate\x00x"}, "invalid_kind", x)
    x = sub()
    add_poison("elo=bogus", {"submission_id": x, "elo": "bogus"}, "invalid_elo", x)
    add_poison("unknown submission", {"submission_id": str(uuid.uuid4())}, "submission_not_found")
    add_poison("nil uuid", {"submission_id": "00000000-0000-0000-0000-000000000000"}, "submission_not_found")
    x = sub()
    add_poison("reevaluate before any result", {"submission_id": x, "kind": "reevaluate"},
               "reevaluate_without_result", x)

    w = Worker(s, "hostile", env={"ARBITER_RATE_LIMIT": "10/1s", "ARBITER_RATE_BURST": "1",
                                  "ARBITER_RATE_ALLOW": "192.0.2.0/24", "ARBITER_RECONCILE_MS": "500"})
    subs = [sid for _, sid in good.values()]
    ok(a.wait_final(subs, 30), "entries: the well-formed entries are evaluated", w.tail())
    ok(wait_for(lambda: a.r.xlen(a.dead) >= len(poison), 15), "entries: poison dead-lettered", w.tail())
    dead = dead_by_entry(s)
    for name, (eid, reason) in sorted(poison.items()):
        got = dead.get(eid, {}).get("reason")
        eq(got, reason, "entries: %s -> dead letter %s" % (name, reason))
    for name, (eid, sid) in sorted(good.items()):
        ok(eid not in dead and a.status(sid) == "completed", "entries: %s -> completed" % name,
           (dead.get(eid), a.status(sid)))
    d = dead.get(poison["braces"][0], {})
    ok(d.get("worker_id") == "hostile" and d.get("failed_at", "").isdigit() and
       d.get("submission_id") == "{%s}" % evaluated_later[1], "entries: the dead letter keeps the fields, "
       "names the worker and the time", d)
    ok(wait_for(lambda: a.count_status(evaluated_later, ("completed",)) == len(evaluated_later), 20),
       "entries: the submissions behind poison entries are still evaluated (reconciler)", w.tail())
    ok(w.alive(), "entries: the worker is alive")
    invariants(a, "entries", subs + evaluated_later, [ag])
    stop_all("entries", [w])
    a.close()


# -- 2. hostile rows ----------------------------------------------------------------------

def hostile_rows(s):
    a = fresh(s, "adv_rows")
    ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
    ag = a.agent()
    depth = max_jsonb_depth(a)
    diag("PostgreSQL accepts jsonb nested %d deep here" % depth)
    cases = {}

    def case(name, answer=None, metadata=None, challenge=ch, match_sql=None):
        m, sid = a.submit(ag, challenge, {"x": 1}, enqueue=False)
        if answer is not None:
            a.q("UPDATE submissions SET answer = %s::jsonb WHERE id = %s", answer, sid)
        if metadata is not None:
            a.q("UPDATE submissions SET metadata = %s::jsonb WHERE id = %s", metadata, sid)
        if match_sql:
            a.q("UPDATE matches SET " + match_sql + " WHERE id = %s", m)
        cases[name] = sid
        return sid

    case("answer nested to the maximum depth", "[" * depth + "]" * depth)
    case("answer nested 3000 deep", '{"x": ' + "[" * 3000 + "]" * 3000 + "}")
    case("answer nested 2000 deep (scored)", '{"x": ' + "[" * 2000 + "1" + "]" * 2000 + "}")
    case("integer beyond 64 bits", '{"x": 18446744073709551616, "y": -99999999999999999999999}')
    case("1e30 (printed with all its digits)", '{"x": 1, "big": 1e30}')
    case("number beyond a double", '{"x": 1e400}')
    case("metadata an array", None, "[1, 2, 3]")
    case("metadata a string", None, '"hello"')
    case("metadata a number", None, "42")
    case("answer null", "null")
    case("answer a string", '"x"')
    case("8 MB answer", json.dumps({"x": 1, "pad": "y" * (8 << 20)}))
    case("expires_at infinity", match_sql="expires_at = 'infinity'")
    case("started_at -infinity", match_sql="started_at = '-infinity'")
    case("started_at in the future", match_sql="started_at = now() + interval '1 day'")
    gt_null = a.challenge(SPEC_X, None, difficulty="contender")
    a.q("UPDATE challenges SET ground_truth = 'null'::jsonb WHERE id = %s", gt_null)
    case("ground truth null", challenge=gt_null)
    gt_big = a.challenge(SPEC_X, {"x": 1})
    a.q("UPDATE challenges SET ground_truth = '{\"x\": 1e30}'::jsonb WHERE id = %s", gt_big)
    case("ground truth with 1e30", challenge=gt_big)
    gt_huge = a.challenge(SPEC_X, {"x": 1})
    a.q("UPDATE challenges SET ground_truth = '{\"x\": 1e400}'::jsonb WHERE id = %s", gt_huge)
    case("ground truth beyond a double", challenge=gt_huge)
    case("spec an array", challenge=a.challenge("[1, 2]", {"x": 1}))
    case("spec a string", challenge=a.challenge('"spec"', {"x": 1}))
    case("spec null", challenge=a.challenge("null", {"x": 1}))
    case("spec with a broken expression", challenge=a.challenge(
        {"evaluator": "deterministic", "dimensions": [{"key": "correctness", "weight": 1,
         "primitive": "expression", "expr": "a +* b", "vars": {"a": "x"}}]}, {"x": 1}))
    case("spec with an expression of unknown vars", challenge=a.challenge(
        {"evaluator": "deterministic", "dimensions": [{"key": "correctness", "weight": 1,
         "primitive": "expression", "expr": "zz * 2", "vars": {"a": "x"}}]}, {"x": 1}))
    tl = a.challenge({"evaluator": "deterministic", "dimensions": [
        {"key": "speed", "weight": 1, "primitive": "time_decay"}]}, {}, time_limit_secs=2147483647)
    case("time limit 2^31-1", challenge=tl)
    case("time limit 2^31-1, started in the future", challenge=tl,
         match_sql="started_at = now() + interval '1 day'")
    normal = [a.submit(ag, ch, {"x": 1}, enqueue=False)[1] for _ in range(5)]
    ids = list(cases.values()) + normal
    rnd.shuffle(ids)
    enqueue_all(a, ids)
    t0 = time.time()
    w = Worker(s, "rows")
    ok(a.wait_final(ids, 40), "rows: every submission final", w.tail())
    diag("rows: %.1fs" % (time.time() - t0))

    want = {
        "ground truth beyond a double": ("rejected", "invalid_spec", "ground_truth"),
        "spec an array": ("rejected", "invalid_spec", "object"),
        "spec a string": ("rejected", "invalid_spec", ""),
        "spec null": ("rejected", "invalid_spec", ""),
        "spec with a broken expression": ("rejected", "invalid_spec", "correctness"),
        "spec with an expression of unknown vars": ("rejected", "invalid_spec", "correctness"),
    }
    for name, sid in sorted(cases.items()):
        st, reason, err = a.q1("SELECT status, reject_reason, last_error FROM submissions WHERE id = %s", sid)
        nres = a.val("SELECT count(*) FROM evaluation_results WHERE submission_id = %s", sid)
        wst, wreason, werr = want.get(name, ("completed", None, None))
        ok(st == wst and reason == wreason and (werr is None or werr in (err or "")) and
           nres == (1 if wst == "completed" else 0),
           "rows: %s -> %s%s" % (name, wst, " " + wreason if wreason else ""), (st, reason, err, nres))
    # jsonb that jansson refuses is the submission's doing: scored (as null), a loss like
    # any wrong answer, with the reason as an error warning; never `failed` (no dodge).
    for name, why in (("answer nested to the maximum depth", "depth"),
                      ("answer nested 3000 deep", "depth"), ("number beyond a double", "overflow")):
        row = a.q1("SELECT r.score, r.result, r.submission_warnings::text FROM evaluation_results r "
                   "WHERE r.submission_id = %s", cases[name])
        ok(row is not None and row[0] == 0 and row[1] == "loss" and "cannot be read" in row[2]
           and why in row[2], "rows: %s -> scored 0, a loss, with the reason as a warning" % name, row)
    dead = [f for _, f in a.dead_entries()]
    failed = [sid for name, sid in cases.items() if want.get(name, ("completed",))[0] == "failed"]
    ok(all(any(f.get("submission_id") == sid and f.get("reason", "").startswith("failed:") for f in dead)
           for sid in failed), "rows: failed ones are dead-lettered with the reason", dead)
    eq(a.count_status(normal, ("completed",)), 5, "rows: the normal submissions completed")
    ok(w.alive(), "rows: the worker is alive")
    ok("loading submissions failed" not in w.output(), "rows: no load query failed", w.tail())
    completed = [sid for name, sid in cases.items() if want.get(name, ("completed",))[0] == "completed"]
    invariants(a, "rows", completed + normal, [ag])
    stop_all("rows", [w])
    a.close()


# -- 3. adjustments and evaluations of one agent in one batch ----------------------------

def adjust_in_batch(s):
    a = fresh(s, "adv_batch")
    a.q(SLOW_TRIGGER)
    ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
    ags = [a.agent() for _ in range(12)]
    first = [a.submit(ag, ch, {"x": 1}, enqueue=False)[1] for ag in ags]
    enqueue_all(a, first)
    # One connection for commits: while the blocker's commit sleeps, the re-evaluations
    # and the evaluations below queue up and then go into ONE commit batch.
    w = Worker(s, "batch", env={"ARBITER_BATCH_MAX": "64", "ARBITER_PG_POOL_SIZE": "2"})
    ok(a.wait_final(first, 20), "batch: first evaluations", w.tail())
    # The answers change, so the re-evaluations turn wins into losses and move Elo.
    a.q("UPDATE submissions SET answer = '{\"x\": 0}' WHERE id = ANY(%s::uuid[])", first)
    blocker = a.submit(a.agent(), ch, {"x": 1}, enqueue=False)[1]
    a.q("INSERT INTO test_slow VALUES (%s, 1, 1.0)", blocker)
    a.enqueue(blocker)
    ok(wait_for(lambda: a.val("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'") > 0, 10),
       "batch: a slow commit is in flight")
    pipe = a.r.pipeline(transaction=False)
    second = []
    for ag, sid in zip(ags, first):
        pipe.xadd(a.stream, {"submission_id": sid, "kind": "reevaluate", "elo": "adjust"})
        second.append(a.submit(ag, ch, {"x": 1}, enqueue=False)[1])
        pipe.xadd(a.stream, {"submission_id": second[-1]})
    eids = pipe.execute()
    reevals = list(zip(first, eids[0::2]))
    ok(a.wait_final(second, 20) and wait_for(lambda: a.val(
        "SELECT count(*) FROM evaluation_results WHERE eval_seq = 2") == 12, 20), "batch: all done", w.tail())
    eq(a.val("SELECT count(*) FROM elo_history WHERE reason = 'reevaluation_adjust' AND elo_change <> 0"), 12,
       "batch: 12 adjustments moved ratings")
    invariants(a, "batch", first + second, ags, reevals)
    stop_all("batch", [w])
    a.close()


# -- 4. re-evaluation after an evaluation that used every attempt -------------------------

def reeval_after_max_attempts(s):
    a = fresh(s, "adv_attempts")
    ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
    ag = a.agent()
    _, sid = a.submit(ag, ch, {"x": 1})
    w = Worker(s, "att", env={"ARBITER_MAX_DELIVERIES": "3"})
    ok(a.wait_final([sid], 20), "attempts: evaluated", w.tail())
    a.q("UPDATE submissions SET attempts = 3 WHERE id = %s", sid)   # as if it took all 3 attempts
    eid = a.enqueue(sid, kind="reevaluate", elo="keep")
    ok(wait_for(lambda: a.val("SELECT count(*) FROM evaluation_results WHERE submission_id = %s", sid) == 2
                or a.r.xlen(a.dead) > 0, 15), "attempts: re-evaluation handled", w.tail())
    eq(a.r.xlen(a.dead), 0, "attempts: not dead-lettered", a.dead_entries())
    invariants(a, "attempts", [sid], [ag], [(sid, eid)])
    stop_all("attempts", [w])
    a.close()


# -- 5. SIGKILL at random moments ---------------------------------------------------------

def kill_loop(s):
    a = fresh(s, "adv_kill")
    ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
    ags = [a.agent() for _ in range(20)]
    subs = bulk(a, ags, ch, 2000, enqueue=False)
    env = {"ARBITER_CLAIM_IDLE_MS": "1000", "ARBITER_CONCURRENCY": "32", "ARBITER_BATCH_MAX": "4",
           "ARBITER_MAX_DELIVERIES": "20"}
    ws = {"ka": Worker(s, "ka", env=env), "kb": Worker(s, "kb", env=env)}
    enqueue_all(a, subs[:1000])
    reevals, kills, second, t0 = [], 0, False, time.time()
    marks = sorted(rnd.sample(range(100, 1900), 10))
    for mark in marks:
        if mark >= 900 and not second:
            # The second half, and re-evaluations of finished ones, arrive mid-run.
            wait_for(lambda: finals(a, subs) >= 900, 60, 0.005)
            done_ids = [str(r[0]) for r in a.q(
                "SELECT id FROM submissions WHERE id = ANY(%s::uuid[]) AND status = 'completed' "
                "ORDER BY id LIMIT 200", subs[:1000])]
            pipe = a.r.pipeline(transaction=False)
            for sid in done_ids:
                pipe.xadd(a.stream, {"submission_id": sid, "kind": "reevaluate",
                                     "elo": rnd.choice(["keep", "adjust"])})
            reevals = list(zip(done_ids, pipe.execute()))
            enqueue_all(a, subs[1000:])
            second = True
        if not wait_for(lambda: finals(a, subs) >= mark, 60, 0.005):
            break
        name = rnd.choice(sorted(ws))
        ws[name].kill()
        kills += 1
        diag("kill %d: %s at %d final" % (kills, name, finals(a, subs)))
        time.sleep(rnd.uniform(0, 0.2))
        # Restart under the same id (takes its own pending entries back) or a new one
        # (the dead consumer's entries are reclaimed with XAUTOCLAIM).
        ws[name] = Worker(s, name if rnd.random() < 0.5 else name + "-%d" % kills, env=env)
        ws = {w.name: w for w in ws.values()}
    eq(kills, 10, "kill: 10 workers killed mid-run")
    ok(a.wait_final(subs, 60), "kill: every submission final", "\n".join(w.tail(8) for w in ws.values()))
    ok(wait_for(lambda: len(a.q("SELECT 1 FROM evaluation_results WHERE eval_seq > 1")) >= len(reevals), 30),
       "kill: re-evaluations done")
    diag("kill: %.1fs, %d re-evaluations" % (time.time() - t0, len(reevals)))
    invariants(a, "kill", subs, ags, reevals)
    eq(a.r.xlen(a.dead), 0, "kill: nothing dead-lettered", a.dead_entries()[:3])
    stop_all("kill", list(ws.values()))
    a.close()


# -- 6. Redis and PostgreSQL faults -------------------------------------------------------

def infra_faults(s):
    for fault in ("redis-kill", "redis-pause", "pg-immediate"):
        a = fresh(s, "adv_" + fault.replace("-", "_"))
        ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
        ags = [a.agent() for _ in range(20)]
        subs = bulk(a, ags, ch, 3000)
        env = {"ARBITER_RECONCILE_MS": "500", "ARBITER_CONCURRENCY": "32", "ARBITER_BATCH_MAX": "4",
               "ARBITER_CLAIM_IDLE_MS": "1500"}
        ws = [Worker(s, "%s-%d" % (fault, i), env=env) for i in range(2)]
        wait_for(lambda: finals(a, subs) >= 600, 30, 0.005)
        n = finals(a, subs)
        t0 = time.time()
        if fault == "redis-kill":
            os.kill(s.redis_proc.pid, signal.SIGKILL)
            s.redis_proc.wait()
            s.redis_proc = None
            time.sleep(0.5)
            s.start_redis()                   # empty: no persistence
            a.r = redis.Redis.from_url(s.redis_url, decode_responses=True)
        elif fault == "redis-pause":
            a.r.execute_command("CLIENT", "PAUSE", "6500", "ALL")   # longer than the 5 s timeouts
            time.sleep(6.6)
        else:
            a.close()
            s.restart_postgres(down_secs=1.0, mode="immediate")
            a = Arena(s)
        ok(n < len(subs), "%s: in the middle of the run (%d of %d final)" % (fault, n, len(subs)))
        ok(a.wait_final(subs, 60), "%s: every submission final" % fault, "\n".join(w.tail(8) for w in ws))
        diag("%s: recovered in %.1fs" % (fault, time.time() - t0))
        invariants(a, fault, subs, ags)
        eq(a.r.xlen(a.dead), 0, "%s: nothing dead-lettered" % fault)
        stop_all(fault, ws)
        a.close()


# -- 7. PostgreSQL's connection limit, and a replica cut off from PostgreSQL -------------

def pg_connections(s):
    a = fresh(s, "adv_conns")
    ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
    ags = [a.agent() for _ in range(20)]
    a.close()
    s.pg_settings.update(max_connections="7", superuser_reserved_connections="0")
    s.restart_postgres()
    a = Arena(s)
    subs = bulk(a, ags, ch, 2000, enqueue=False)
    # Started one after the other: 4 + 2 connections, the third replica gets none.
    ws = []
    for i in range(3):
        ws.append(Worker(s, "conn-%d" % i, env={"ARBITER_RECONCILE_MS": "1000"}))
        time.sleep(0.7)
    n = a.val("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'")
    diag("client connections: %d" % n)
    t0 = time.time()
    enqueue_all(a, subs)
    ok(a.wait_final(subs, 20), "connection limit: every submission final in time (%.1fs)" % (time.time() - t0),
       "\n".join(w.tail(5) for w in ws))
    ok("too many" in ws[2].output() or "too many" in ws[1].output(),
       "connection limit: a replica was refused connections", ws[2].tail())
    invariants(a, "connection limit", subs, ags)
    stop_all("connection limit", ws)
    a.close()
    s.pg_settings.update(max_connections="300", superuser_reserved_connections="3")
    s.restart_postgres()

    # A replica loses PostgreSQL (its role may no longer log in) while it holds jobs.
    a = Arena(s)
    a.q("CREATE ROLE cutoff LOGIN SUPERUSER")
    url = s.database_url.replace("postgres@", "cutoff@")
    subs = bulk(a, ags, ch, 1500)
    env = {"ARBITER_CLAIM_IDLE_MS": "1000", "ARBITER_CONCURRENCY": "64", "ARBITER_BATCH_MAX": "4",
           "ARBITER_DRAIN_MS": "1000"}
    cut = Worker(s, "cut", env=dict(env, ARBITER_DATABASE_URL=url))
    wait_for(lambda: finals(a, subs) >= 200, 30, 0.005)
    a.q("ALTER ROLE cutoff NOLOGIN")
    a.q("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'cutoff'")
    held = a.pending()
    diag("cut off at %d final, %d entries pending" % (finals(a, subs), held))
    t0 = time.time()
    other = Worker(s, "uncut", env=env)
    ok(a.wait_final(subs, 20), "cut off: the other replica finished everything (%.1fs)" % (time.time() - t0),
       cut.tail(5) + "\n" + other.tail(5))
    ok(cut.alive(), "cut off: the cut-off replica is still running")
    # Its drain releases what it still holds; the other replica finds those done.
    eq(cut.term(30), 0, "cut off: the cut-off replica exits 0", cut.tail())
    invariants(a, "cut off", subs, ags)
    stop_all("cut off", [other])
    a.close()


# -- 8. a long sandbox run and a replica with a tiny claim idle time -----------------------

def sandbox_claim(s, usable):
    if not usable:
        diag("sandbox not usable here: skipping the claim scenario")
        return
    a = fresh(s, "adv_claim")
    ch = a.challenge(slow_spec(4), {}, difficulty="contender")
    ag = a.agent()
    env = {"ARBITER_CLAIM_IDLE_MS": "100"}
    w1 = Worker(s, "claim-1", env=env)
    time.sleep(0.3)
    _, sid = a.submit(ag, ch, {"x": 1})
    ok(wait_for(lambda: a.status(sid) == "evaluating", 10), "claim: the sandbox run started", w1.tail())
    w2 = Worker(s, "claim-2", env=env)
    owners, idle = set(), 0
    t0 = time.time()
    while a.status(sid) != "completed" and time.time() - t0 < 30:
        for e in a.r.xpending_range(a.stream, a.group, "-", "+", 10):
            owners.add(e["consumer"])
            idle = max(idle, e["time_since_delivered"])
        time.sleep(0.005)
    diag("claim: longest idle time seen %d ms" % idle)
    eq(a.status(sid), "completed", "claim: completed")
    eq(sorted(owners), ["claim-1"], "claim: nobody took the entry from the replica running it")
    eq(a.q("SELECT worker_id, (evaluation_log->>'attempt')::int FROM evaluation_results "
           "WHERE submission_id = %s", sid), [("claim-1", 1)], "claim: one evaluation, attempt 1")
    eq(a.val("SELECT attempts FROM submissions WHERE id = %s", sid), 1, "claim: one attempt recorded")
    invariants(a, "claim", [sid], [ag])
    stop_all("claim", [w1, w2])
    a.close()


# -- 9. three replicas, duplicates and re-evaluations -------------------------------------

def replicas(s):
    a = fresh(s, "adv_replicas")
    ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
    ags = [a.agent() for _ in range(50)]
    subs = bulk(a, ags, ch, 3000, enqueue=False)
    first, rest = subs[:1000], subs[1000:]
    ws = [Worker(s, "rep-%d" % i, env={"ARBITER_CLAIM_IDLE_MS": "2000"}) for i in range(3)]
    enqueue_all(a, first)
    ok(a.wait_final(first, 30), "replicas: first 1000 final")
    # Half of the finished answers change, so re-evaluations move ratings (adjust).
    flip = [x for x in first if rnd.random() < 0.5]
    a.q("UPDATE submissions SET answer = jsonb_build_object('x', 1 - (answer->>'x')::int) "
        "WHERE id = ANY(%s::uuid[])", flip)
    items = [("evaluate", x) for x in rest] + [("evaluate", rnd.choice(subs)) for _ in range(600)]
    items += [("reevaluate", rnd.choice(first)) for _ in range(800)]
    rnd.shuffle(items)
    pipe = a.r.pipeline(transaction=False)
    for kind, sid in items:
        if kind == "evaluate":
            pipe.xadd(a.stream, {"submission_id": sid})
        else:
            pipe.xadd(a.stream, {"submission_id": sid, "kind": kind, "elo": rnd.choice(["keep", "adjust"])})
    eids = pipe.execute()
    reevals = [(sid, eid) for (kind, sid), eid in zip(items, eids) if kind == "reevaluate"]
    t0 = time.time()
    ok(a.wait_final(subs, 60), "replicas: every submission final", "\n".join(w.tail(5) for w in ws))
    ok(wait_for(lambda: a.val("SELECT count(*) FROM evaluation_results WHERE eval_seq > 1") >= len(reevals), 30),
       "replicas: re-evaluations done")
    diag("replicas: %.1fs" % (time.time() - t0))
    invariants(a, "replicas", subs, ags, reevals)
    by = dict(a.q("SELECT worker_id, count(*) FROM evaluation_results GROUP BY worker_id"))
    ok(len(by) == 3, "replicas: the three replicas shared the work", by)
    for w in ws:
        ok("deadlock" not in w.output(), "replicas: %s reported no deadlock" % w.name)
    stop_all("replicas", ws)
    a.close()


# -- 10. SIGTERM during a heavy backlog -----------------------------------------------------

def sigterm_backlog(s, usable):
    a = fresh(s, "adv_sigterm")
    ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
    ags = [a.agent() for _ in range(20)]
    slow = []
    if usable:
        sc = a.challenge(slow_spec(6), {}, difficulty="contender")
        slow = [a.submit(ags[i], sc, {"x": 1})[1] for i in range(2)]
    subs = bulk(a, ags, ch, 6000)
    w1 = Worker(s, "term-1", env={"ARBITER_CONCURRENCY": "256", "ARBITER_DRAIN_MS": "1500"})
    wait_for(lambda: finals(a, subs) >= 1000, 30, 0.005)
    t0 = time.time()
    rc = w1.term(60)
    dt = time.time() - t0
    eq(rc, 0, "sigterm: exit 0", w1.tail())
    ok(dt < 1.5 + 3.0, "sigterm: stopped %.2fs after SIGTERM (deadline 1.5 s)" % dt, w1.tail())
    n = finals(a, subs)
    ok(n < len(subs), "sigterm: stopped in the middle (%d of %d)" % (n, len(subs)))
    w2 = Worker(s, "term-2")
    ok(a.wait_final(subs + slow, 60), "sigterm: a second worker did the rest", w2.tail())
    invariants(a, "sigterm", subs + slow, ags)
    stop_all("sigterm", [w2])
    a.close()


# -- 11. a re-evaluation's COMMIT lost in flight during the drain ---------------------------

def lost_commit_drain(s):
    a = fresh(s, "adv_lost_commit")
    a.q(SLOW_TRIGGER)
    ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
    ag = a.agent()
    _, sid = a.submit(ag, ch, {"x": 1})
    # The COMMIT runs 1.5 s (a deferred trigger), the client gives up after 1 s: the
    # transaction commits, the worker cannot know it.
    env = {"ARBITER_CLAIM_IDLE_MS": "500", "ARBITER_PG_QUERY_TIMEOUT_MS": "1000", "ARBITER_DRAIN_MS": "200"}
    w1 = Worker(s, "lost-1", env=env)
    ok(a.wait_final([sid], 20), "lost commit: evaluated", w1.tail())
    a.q("INSERT INTO test_slow VALUES (%s, 2, 1.5)", sid)
    eid = a.enqueue(sid, kind="reevaluate", elo="adjust")
    ok(wait_for(lambda: a.val("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'") > 0, 10),
       "lost commit: the COMMIT is running", w1.tail())
    eq(w1.term(30), 0, "lost commit: SIGTERM, exit 0", w1.tail())
    w2 = Worker(s, "lost-2", env=env)
    ok(wait_for(lambda: a.r.xlen(a.stream) == 0 and a.pending() == 0, 15), "lost commit: entry handled",
       w2.tail())
    time.sleep(0.5)
    invariants(a, "lost commit", [sid], [ag], [(sid, eid)])
    stop_all("lost commit", [w2])
    a.close()


def main():
    usable, why = sandbox_usable()
    # On a host with the sandbox a failed probe is a failure; without it the
    # sandbox scenarios are skipped (diag says why).
    usable = sandboxhost.gate(usable, why)
    timings = []
    with Services() as s:
        for name, fn in [("hostile entries", lambda: hostile_entries(s)),
                         ("hostile rows", lambda: hostile_rows(s)),
                         ("adjust in batch", lambda: adjust_in_batch(s)),
                         ("reeval after max attempts", lambda: reeval_after_max_attempts(s)),
                         ("kill loop", lambda: kill_loop(s)),
                         ("infra faults", lambda: infra_faults(s)),
                         ("pg connections", lambda: pg_connections(s)),
                         ("sandbox claim", lambda: sandbox_claim(s, usable)),
                         ("replicas", lambda: replicas(s)),
                         ("sigterm backlog", lambda: sigterm_backlog(s, usable)),
                         ("lost commit drain", lambda: lost_commit_drain(s))]:
            t0 = time.time()
            fn()
            timings.append("%s %.1fs" % (name, time.time() - t0))
            diag(timings[-1])
    diag("; ".join(timings))
    return done()


if __name__ == "__main__":
    sys.exit(main())
