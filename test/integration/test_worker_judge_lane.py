#!/usr/bin/python3
"""The judge lane (worker/README.md "LLM judge"), TAP on stdout: `arbiter worker` against real Redis
and PostgreSQL and the test provider (test/judge_provider.py) answering slowly.

Covers: a burst of judged jobs well beyond ARBITER_JUDGE_INFLIGHT, then deterministic jobs:
the judged jobs the judge has no slot for wait in the judge lane ({prefix}:jobs:judge), the
deterministic ones commit while judged ones still wait (without the lane they wait behind
them), every judged job ends committed exactly once with one provider call, the lane ends
empty and the metrics count the moves; under a deterministic overload (a backlog of 3,000
deterministic jobs queued behind the judged ones) the workers read the lane themselves as
judge slots free, so judged jobs commit while the backlog is still being worked off; SIGKILL of
the worker while jobs it read from the lane are at the provider, then a second worker
reclaims its lane entries: nothing lost, nothing committed twice.
"""
import re
import sys
import urllib.request

from judge_provider import Provider
from services import Services, free_port
from workerkit import Arena, Worker, bulk, done, enqueue_all, eq, exactly_once, migrate, ok, wait_for

KEY = "sk-test-lane-1717"

DET_SPEC = {"evaluator": "deterministic", "dimensions": [
    {"key": "correctness", "weight": 1, "primitive": "exact_match", "field": "a",
     "ground_truth_field": "a"}]}

DET_X = {"evaluator": "deterministic", "dimensions": [
    {"key": "correctness", "weight": 1, "primitive": "exact_match", "field": "x",
     "ground_truth_field": "x"}]}


def spec(p):
    return {"mode": "llm", "judge": {
        "provider": "openai", "model": "test-model", "max_retries": 2, "timeout_ms": 60000,
        "reads": {"fields": ["work"]}}, "thresholds": {"win": 700, "draw": 400}, "rubric": [
        {"key": "quality", "name": "Quality", "description": "How good the work is", "weight": 60},
        {"key": "docs", "name": "Docs", "description": "How well it is explained", "weight": 40}]}


def submit_judged(a, ch, n, base):
    agents, subs = [], []
    for i in range(n):
        ag = a.agent()
        _, sid = a.submit(ag, ch, {"work": {"quality": (base + i) % 100, "docs": (3 * i) % 100}},
                          source_ip="192.0.2.%d" % (1 + i % 200))
        agents.append(ag)
        subs.append(sid)
    return agents, subs


def final(a, subs):
    return a.count_status(subs)


def lane_pending(a, lane, consumer):
    try:
        return len(a.r.xpending_range(lane, a.group, "-", "+", 1000, consumername=consumer))
    except Exception:   # no group yet (or a main build without one)
        return 0


def metric(url, name):
    try:
        body = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    except OSError:
        return None
    return {m.group(1): float(m.group(2)) for m in re.finditer(
        r'^%s\{to="(\w+)"\} (\S+)$' % name, body, re.M)}


def main():
    p = Provider().start()
    try:
        with Services() as s:
            migrate(s)
            a = Arena(s)
            lane = a.stream + ":judge"
            env = {"ARBJ_TEST_API_KEY": KEY, "ARBITER_JUDGE_INFLIGHT": "4",
                   "ARBITER_JUDGE_PROVIDERS": p.providers(),
                   "ARBITER_CONCURRENCY": "8", "ARBITER_CLAIM_IDLE_MS": "2000"}
            ch = a.challenge(spec(p))
            det = a.challenge(DET_SPEC, {"a": 1})

            # -- head of line: deterministic jobs do not wait behind the judged burst ------
            port = free_port()
            wenv = dict(env, ARBITER_METRICS_ADDR="127.0.0.1:%d" % port)
            w = Worker(s, "lane-1", env=wenv)
            p.mode = "slow:2"
            n0 = p.count()
            nj = 60
            agents, subs = submit_judged(a, ch, nj, 10)
            ok(wait_for(lambda: p.count() - n0 >= 4, 60), "the judge's 4 slots are busy", w.tail())
            ok(wait_for(lambda: a.r.xlen(lane) > 0, 10), "judged jobs beyond them wait in the "
               "judge lane (%d there)" % a.r.xlen(lane), w.tail())
            dsubs = [a.submit(a.agent(), det, {"a": 1}, source_ip="198.51.100.%d" % (i + 1))[1]
                     for i in range(5)]
            ok(wait_for(lambda: final(a, dsubs) == 5, 120), "the deterministic jobs commit",
               w.tail())
            waiting = nj - final(a, subs)
            # Without the lane a deterministic job commits only once every judged job ahead
            # of it in the stream was read, and those read wait in at most ARBITER_CONCURRENCY
            # + ARBITER_JUDGE_INFLIGHT = 12 places: at most 12 could still be waiting.
            ok(waiting >= 24, "while judged jobs still wait (%d of %d not final yet, "
               "more than the 12 a worker without the lane could hold)" % (waiting, nj), w.tail())
            eq([a.status(x) for x in dsubs], ["completed"] * 5, "deterministic jobs completed")
            ok(wait_for(lambda: final(a, subs) == nj, 240), "then every judged job is final",
               w.tail())
            eq(exactly_once(a, subs, agents), [], "each judged job committed exactly once")
            eq(p.count() - n0, nj, "one provider call per judged job")
            eq(a.r.xlen(lane), 0, "the judge lane ends empty")
            eq(a.pending(), 0, "nothing left pending")
            m = metric("http://127.0.0.1:%d" % port, "arbiter_judge_lane_moves_total") or {}
            ok(m.get("lane", 0) > 0 and m.get("worker") == m.get("lane"),
               "arbiter_judge_lane_moves_total counts the moves, as many read as in", m)
            eq(w.term(), 0, "worker exits 0")

            # -- a deterministic backlog behind: lane jobs are still read as slots free ----
            # 24 judged jobs, then 10,000 deterministic ones are queued before the worker
            # starts (ARBITER_CONCURRENCY=2): it reads the judged ones first, 4 go to the
            # judge, 20 to the lane. A worker that brings lane jobs back through the live
            # stream reads each of them after every deterministic job, when at most
            # ARBITER_CONCURRENCY = 2 of those are not final: no judged job but the first 4
            # can end before the (10000 - 2)th deterministic one (a structural bound). Read
            # from the lane, they are taken as judge slots free (one provider round: 1 s).
            ndet = 10000
            dagents = [a.agent() for _ in range(20)]
            detx = a.challenge(DET_X, {"x": 1})
            dids = bulk(a, dagents, detx, ndet, enqueue=False)
            p.mode = "slow:1"
            n0 = p.count()
            agents3, subs3 = submit_judged(a, ch, 24, 30)
            enqueue_all(a, dids)
            w = Worker(s, "lane-o", env=dict(env, ARBITER_CONCURRENCY="2"))
            ok(wait_for(lambda: a.r.xlen(lane) >= 16, 60), "20 judged jobs in the lane (%d)"
               % a.r.xlen(lane), w.tail())
            ok(wait_for(lambda: final(a, subs3) == 24, 240), "every judged job is final",
               w.tail())
            ok(wait_for(lambda: final(a, dids) == ndet, 300), "every deterministic job is final",
               w.tail())
            early = a.val(
                "WITH d AS (SELECT completed_at FROM evaluation_results WHERE submission_id = "
                "ANY(%s::uuid[]) ORDER BY completed_at OFFSET %s LIMIT 1) "
                "SELECT count(*) FROM evaluation_results r, d WHERE r.submission_id = "
                "ANY(%s::uuid[]) AND r.completed_at < d.completed_at",
                dids, ndet - 3, subs3)
            ok(early >= 8, "judged jobs read from the lane end while the deterministic backlog "
               "is worked off (%d of 24 before the last 2 of 10,000 deterministic jobs; at most 4 when "
               "lane jobs come back through the live stream)" % early, w.tail())
            eq(exactly_once(a, subs3, agents3), [], "each judged job committed exactly once")
            eq(p.count() - n0, 24, "one provider call per judged job")
            eq(a.r.xlen(lane), 0, "the judge lane ends empty")
            eq(w.term(), 0, "worker exits 0")

            # -- SIGKILL with lane entries pending for it, at the provider; another worker
            # reclaims them from the lane's group ------------------------------------------
            p.mode = "slow:2"
            w = Worker(s, "lane-2", env=env)
            n1 = p.count()
            agents2, subs2 = submit_judged(a, ch, 30, 50)
            ok(wait_for(lambda: lane_pending(a, lane, "lane-2") > 0 and final(a, subs2) >= 4,
                        120), "some judged jobs committed, others read from the lane", w.tail())
            w.kill()
            mine = lane_pending(a, lane, "lane-2")
            ok(mine > 0, "killed with %d lane entries pending for it" % mine)
            w = Worker(s, "lane-3", env=env)
            ok(wait_for(lambda: final(a, subs2) == 30, 240), "another worker makes every judged "
               "job final", w.tail())
            eq(lane_pending(a, lane, "lane-2"), 0, "the dead worker's lane entries were reclaimed")
            ok("judge lane entries" in w.output(), "the second worker says it reclaimed lane "
               "entries", w.tail())
            eq(exactly_once(a, subs2, agents2), [], "nothing lost, nothing committed twice")
            eq(a.val("SELECT count(*) - count(DISTINCT submission_id) FROM evaluation_results"),
               0, "no submission has two results")
            ok(p.count() - n1 >= 30, "every judged job was asked (%d calls; a request in flight "
               "at the kill is sent again)" % (p.count() - n1))
            eq(a.r.xlen(lane), 0, "the judge lane ends empty")
            eq(w.term(), 0, "restarted worker exits 0")
    finally:
        p.stop()
    return done()


if __name__ == "__main__":
    sys.exit(main())
