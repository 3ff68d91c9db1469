#!/usr/bin/python3
"""The judge lane (README "LLM judge"), TAP on stdout: `arbiter worker` against real Redis
and PostgreSQL and the test provider (test/judge_provider.py) answering slowly.

Covers: a burst of judged jobs well beyond ARBITER_JUDGE_INFLIGHT, then deterministic jobs:
the judged jobs the judge has no slot for wait in the judge lane ({prefix}:jobs:judge), the
deterministic ones commit while judged ones still wait (without the lane they wait behind
them), every judged job ends committed exactly once with one provider call, the lane ends
empty and the metrics count the moves; SIGKILL of the worker while jobs wait in the lane and
at the provider, then a restart: nothing lost, nothing committed twice.
"""
import re
import sys
import urllib.request

from judge_provider import Provider
from services import Services, free_port
from workerkit import Arena, Worker, done, eq, exactly_once, migrate, ok, wait_for

KEY = "sk-test-lane-1717"

DET_SPEC = {"evaluator": "deterministic", "dimensions": [
    {"key": "correctness", "weight": 1, "primitive": "exact_match", "field": "a",
     "ground_truth_field": "a"}]}


def spec(p):
    return {"mode": "llm", "judge": {
        "provider": "openai", "model": "test-model", "base_url": p.url("openai"),
        "api_key_env": "ARBJ_TEST_API_KEY", "max_retries": 2, "timeout_ms": 60000,
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
            ok(m.get("lane", 0) > 0 and m.get("stream") == m.get("lane"),
               "arbiter_judge_lane_moves_total counts the moves, as many back as in", m)
            eq(w.term(), 0, "worker exits 0")

            # -- SIGKILL while jobs wait in the lane and at the provider, then a restart ----
            w = Worker(s, "lane-2", env=env)
            n1 = p.count()
            agents2, subs2 = submit_judged(a, ch, 30, 50)
            ok(wait_for(lambda: a.r.xlen(lane) > 0 and final(a, subs2) >= 4, 120),
               "some judged jobs committed, others in the lane", w.tail())
            w.kill()
            in_lane = a.r.xlen(lane)
            ok(in_lane > 0, "killed with %d job(s) in the judge lane" % in_lane)
            w = Worker(s, "lane-2", env=env)
            ok(wait_for(lambda: final(a, subs2) == 30, 240), "after the restart every judged job "
               "is final", w.tail())
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
