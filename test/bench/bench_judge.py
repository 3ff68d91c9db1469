#!/usr/bin/python3
"""LLM-judge throughput benchmark (issue 11's targets), one `arbiter worker`.

Starts a private redis-server and postgres, migrates, and a test provider on a
loopback port (asyncio, OpenAI-compatible, every answer after --delay s,
default 0.2, HTTP/1.1 keep-alive) that records how many requests it holds at
once. Phases, each from a preloaded backlog with one fresh worker
(ARBITER_CONCURRENCY and ARBITER_JUDGE_INFLIGHT = --concurrency):

1. deterministic alone: --det submissions; evaluations/s (first start to last
   commit).
2. judge alone: --judged submissions, each with distinct content (no verdict
   cache hits); judged evaluations/s, peak requests in flight at the provider,
   the worker's peak RSS (VmHWM).
3. interleaved (--rounds R): one worker; R rounds, each measuring deterministic
   evaluations/s twice, alone and with the judge load, in alternating order
   (alone first in odd rounds, loaded first in even ones). The bench feeds the
   stream as API servers would, never with a backlog of one kind in front of
   the other: the --det-batch deterministic jobs are added as the worker takes
   them (at most C outstanding) and, under load, judged jobs too, keeping
   --judge-target of them outstanding (enqueued, not yet answered by the
   provider); the first deterministic job goes in once 500 requests are at the
   provider. How many stay there is measured, not assumed: at a steady state
   it is judged evaluations/s x --delay. Per round: the ratio loaded / alone,
   the provider's requests in flight sampled while the deterministic jobs ran
   (median, 10th percentile), the judged evaluations/s meanwhile, the CPU
   share of the worker, of PostgreSQL, of Redis, of this process (test provider
   and feeder) and the machine's idle time (all in % of one core, from /proc; the
   rest is other processes), and PostgreSQL's CPU per evaluation of each kind. Reported: the
   median ratio, and the worker's RSS (peak VmHWM, and VmRSS at the end).
   (The old "mixed" phase enqueued the judged backlog in front of the
   deterministic one: it measured their wait in the stream, not interference.)
   With --det-rate R the deterministic jobs are offered at R per second instead
   (as API servers would send them), and each round also reports their latency
   (enqueue to commit, p50 and p99) alone and under the judge load: whether
   deterministic jobs keep the rate they are offered while the judge runs.

Usage: bench_judge.py --bin build/worker/arbiter [--judged N] [--det N]
       [--delay S] [--concurrency C] [--rounds R] [--det-batch N] [--judge-target N]
       [--judged-pool N (phase 3's judged submissions, default 20000 per round)]
       [--skip-alone (phase 3 only)] [--rounds 0 (phases 1 and 2 only)] [--det-rate R]
       (C default 512: the issue's >= 500 in flight; judge jobs waiting for a verdict
       have their own C slots, so up to 2 C jobs are resident)
"""
import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from services import Services  # noqa: E402
from bench_worker import GT, SPEC as DET_SPEC, add_agents, cpu_secs, enqueue, hwm_kb, machine_secs, pending_ids, status_kb, wait_done  # noqa: E402

import psycopg2  # noqa: E402
import psycopg2.extras  # noqa: E402
import redis  # noqa: E402

VERDICT = json.dumps({"scores": {"quality": {"score": 70, "reasoning": "fine"},
                                 "docs": {"score": 50, "reasoning": "thin"}},
                      "summary": "ok"})
REPLY = json.dumps({"choices": [{"message": {"role": "assistant", "content": VERDICT},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 900, "completion_tokens": 60}}).encode()


class Provider:
    """Answers every POST after `delay` seconds; counts requests in flight."""

    def __init__(self, delay):
        self.delay = delay
        self.inflight = self.peak = self.total = self.answered = 0
        self.port = None
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        threading.Thread(target=self._run, args=(ready,), daemon=True).start()
        ready.wait()

    def _run(self, ready):
        asyncio.set_event_loop(self.loop)
        srv = self.loop.run_until_complete(
            asyncio.start_server(self._conn, "127.0.0.1", 0, backlog=4096))
        self.port = srv.sockets[0].getsockname()[1]
        ready.set()
        self.loop.run_forever()

    async def _conn(self, reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                n = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        n = int(line.split(b":")[1])
                await reader.readexactly(n)
                self.inflight += 1
                self.total += 1
                self.peak = max(self.peak, self.inflight)
                await asyncio.sleep(self.delay)
                self.inflight -= 1
                self.answered += 1
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n" % len(REPLY) + REPLY)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def judge_spec():
    return {"mode": "llm", "rubric": [
        {"key": "quality", "name": "Quality", "description": "q", "weight": 60},
        {"key": "docs", "name": "Docs", "description": "d", "weight": 40}],
        "judge": {"provider": "bench", "model": "bench", "timeout_ms": 30000,
                  "reads": {"fields": ["work"]}}}


def judge_providers(port):
    """The worker's ARBITER_JUDGE_PROVIDERS: the bench's provider on a loopback port."""
    return json.dumps({"bench": {"api": "openai", "base_url": "http://127.0.0.1:%d/v1" % port,
                                 "models": ["bench"]}})


def seed(db, n, agents, challenge, judged):
    cur = db.cursor()
    rows_m, rows_s, ids = [], [], []
    now = time.time()
    for i in range(n):
        mid, sid = str(uuid.uuid4()), str(uuid.uuid4())
        agent = agents[i % len(agents)]
        rows_m.append((mid, agent, challenge, now - 30, now + 3600))
        ans = ({"work": "submission %s" % sid} if judged else
               {"answers": ["a", "b", "c", "d"], "value": 42, "found": [1, 2, 3]})
        rows_s.append((sid, mid, agent, "10.0.0.1", json.dumps(ans), now - 10))
        ids.append(sid)
    psycopg2.extras.execute_values(
        cur, "INSERT INTO matches (id, agent_id, challenge_id, status, started_at, expires_at) "
        "VALUES %s", rows_m, template="(%s,%s,%s,'active',to_timestamp(%s),to_timestamp(%s))",
        page_size=2000)
    psycopg2.extras.execute_values(
        cur, "INSERT INTO submissions (id, match_id, agent_id, source_ip, answer, submitted_at, "
        "status) VALUES %s", rows_s,
        template="(%s,%s,%s,%s,%s,to_timestamp(%s),'queued')", page_size=2000)
    db.commit()
    return ids


def latencies(db, sent):
    """Enqueue -> commit (completed_at) in ms of the ids in sent (id -> enqueue time)."""
    cur = db.cursor()
    cur.execute("SELECT submission_id::text, extract(epoch from completed_at) FROM "
                "evaluation_results WHERE submission_id = ANY(%s::uuid[])", (list(sent),))
    out = [(float(c) - sent[s]) * 1000 for s, c in cur.fetchall()]
    db.commit()
    return out


def span_rate(db, ids):
    cur = db.cursor()
    cur.execute("SELECT extract(epoch from max(completed_at) - min(started_at)), count(*) "
                "FROM evaluation_results WHERE submission_id = ANY(%s::uuid[])", (ids,))
    span, n = cur.fetchone()
    db.commit()
    return n, float(span or 0), (n / float(span) if span else 0.0)


def cpu_s(pid):
    """CPU seconds (user + system) the process used so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_phase(args, env, db, r, groups, name):
    """Enqueues every group's ids, runs one worker until all are final; returns its peak RSS
    (MB) and the CPU seconds it used (a figure the other processes' load hardly changes)."""
    for ids in groups:
        enqueue(r, ids)
    w = subprocess.Popen([args.bin, "worker"], env=dict(env, ARBITER_WORKER_ID=name))
    t0 = time.time()
    every = [x for g in groups for x in g]
    wait_done(r, db, every, 600)
    rss = hwm_kb(w.pid) / 1024
    cpu = cpu_s(w.pid)
    w.send_signal(signal.SIGTERM)
    try:
        w.wait(40)
    except subprocess.TimeoutExpired:
        w.kill()
    return rss, cpu


def count_challenge(db, challenge):
    cur = db.cursor()
    cur.execute("SELECT count(*) FROM evaluation_results r JOIN submissions s "
                "ON s.id = r.submission_id JOIN matches m ON m.id = s.match_id "
                "WHERE m.challenge_id = %s", (challenge,))
    n = cur.fetchone()[0]
    db.commit()
    return n


def alone_phases(args, env, db, r, prov, agents, det, jud):
    """Phases 1 and 2: one backlog each, one fresh worker each."""
    d1 = seed(db, args.det, agents, det, False)
    _, cpu = run_phase(args, env, db, r, [d1], "bench-det")
    n, span, det_alone = span_rate(db, d1)
    print("deterministic alone: %d in %.2f s = %.0f evaluations/s; worker CPU %.3f ms each" %
          (n, span, det_alone, 1000 * cpu / max(n, 1)))

    j1 = seed(db, args.judged, agents, jud, True)
    prov.peak = 0
    rss, cpu = run_phase(args, env, db, r, [j1], "bench-judge")
    n, span, jr = span_rate(db, j1)
    print("judge alone (provider %.0f ms): %d in %.2f s = %.0f judged evaluations/s; "
          "peak provider requests in flight %d; worker peak RSS %.1f MB; worker CPU %.3f ms "
          "each" % (args.delay * 1000, n, span, jr, prov.peak, rss, 1000 * cpu / max(n, 1)))


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else 0


def feed_round(args, db, r, prov, dets, judged, w, pg_pid, redis_pid):
    """One measurement: feeds the deterministic ids in dets (and, when judged is a list,
    judged ids, keeping --judge-target outstanding) until every det id is final. Returns
    (det evaluations/s, provider in-flight samples taken while det jobs ran, worker CPU s,
    det evaluations, their span s, judged ids used, wall s, PostgreSQL CPU s, judged
    verdicts answered in the window, CPU s of this process: provider and feeder, latencies,
    Redis CPU s, machine idle core-s)."""
    used = []
    jpos = dpos = 0
    ans0 = prov.answered
    det_done = False
    det_left = list(dets)

    def judge_out():
        return len(used) - (prov.answered - ans0)

    def add_judged(k):
        nonlocal jpos
        if jpos + k > len(judged):
            raise SystemExit("bench: the judged pool ran out; raise --judged-pool")
        enqueue(r, judged[jpos:jpos + k])
        used.extend(judged[jpos:jpos + k])
        jpos += k

    # under load: bring the provider up to 500 requests in flight before the first det job
    if judged is not None:
        t0 = time.time()
        while prov.inflight < 500 and time.time() - t0 < 10:
            k = args.judge_target - judge_out()
            if k > 0:
                add_judged(k)
            time.sleep(0.005)
    samples = []
    sent = {}
    cpu0, pg0, ans_w, me0 = cpu_s(w.pid), cpu_secs(pg_pid), prov.answered, time.process_time()
    rd0, idle0 = cpu_s(redis_pid), machine_secs()[1]
    t0 = last_check = time.time()
    while not det_done and time.time() - t0 < 300:
        backlog = r.xlen("arbiter:jobs")
        jo = judge_out() if judged is not None else 0
        if judged is not None:
            k = min(args.judge_target - jo, 256)
            if k > 0:
                add_judged(k)
        det_out = backlog - max(jo, 0)
        if args.det_rate:
            k = min(int((time.time() - t0) * args.det_rate) + 1 - dpos, 256, len(dets) - dpos)
        else:
            k = min(args.concurrency - det_out, 256, len(dets) - dpos)
        if k > 0:
            now = time.time()
            enqueue(r, dets[dpos:dpos + k])
            sent.update((x, now) for x in dets[dpos:dpos + k])
            dpos += k
        if dpos:
            samples.append(prov.inflight)
        if dpos == len(dets) and time.time() - last_check >= 0.05:
            last_check = time.time()
            det_left = pending_ids(db, det_left)
            det_done = not det_left
        time.sleep(0.002)
    cpu, pg, me = cpu_s(w.pid) - cpu0, cpu_secs(pg_pid) - pg0, time.process_time() - me0
    rd, idle = cpu_s(redis_pid) - rd0, machine_secs()[1] - idle0
    wall, judged_n = time.time() - t0, prov.answered - ans_w
    n, span, rate = span_rate(db, dets)
    lat = latencies(db, sent)
    # let the judged jobs in the worker finish before the next measurement
    if used:
        wait_done(None, db, used, 120)
    return rate, samples, cpu, n, span, used, wall, pg, judged_n, me, lat, rd, idle


def interleaved(args, env, db, r, prov, agents, det, jud, pg_pid, redis_pid):
    """Phase 3 (see the top of the file)."""
    dets = [seed(db, args.det_batch, agents, det, False) for _ in range(2 * args.rounds)]
    judged = seed(db, args.judged_pool or 20000 * args.rounds, agents, jud, True)
    w = subprocess.Popen([args.bin, "worker"], env=dict(env, ARBITER_WORKER_ID="bench-inter"))
    ratios, flights, pg_j = [], [], []
    jpos = 0
    try:
        time.sleep(0.5)
        for i in range(args.rounds):
            res = {}
            for cond in (("alone", "loaded") if i % 2 == 0 else ("loaded", "alone")):  # i from 0
                ids = dets.pop()
                pool = judged[jpos:] if cond == "loaded" else None
                rate, samples, cpu, n, span, used, wall, pg, jn, me, lat, rd, idle = feed_round(
                    args, db, r, prov, ids, pool, w, pg_pid, redis_pid)
                jpos += len(used)
                res[cond] = (rate, samples, cpu, n, span, len(used), wall, pg, jn, me, lat, rd,
                             idle)
            ra, rl = res["alone"][0], res["loaded"][0]
            fl = res["loaded"][1]
            ratios.append(rl / ra if ra else 0)
            flights.append(statistics.median(fl) if fl else 0)
            al, lo = res["alone"], res["loaded"]
            pg_det = al[7] / max(al[3], 1)
            pg_jud = (lo[7] - pg_det * lo[3]) / max(lo[8], 1)
            pg_j.append(pg_jud / pg_det if pg_det else 0)
            print("round %d: deterministic alone %.0f/s (worker %.0f %% of a core, PostgreSQL CPU "
                  "%.3f ms each); with judge load %.0f/s = %.2f x (worker %.0f %% of a core; "
                  "%d verdicts meanwhile = %.0f judged/s, PostgreSQL CPU %.3f ms each = %.1f x a "
                  "deterministic one; test provider and feeder %.0f %% of a core, PostgreSQL "
                  "%.0f %%); provider in flight meanwhile median %d, p10 %d" %
                  (i + 1, ra, 100 * al[2] / al[6], 1000 * pg_det, rl, ratios[-1],
                   100 * lo[2] / lo[6], lo[8], lo[8] / lo[6], 1000 * pg_jud, pg_j[-1],
                   100 * lo[9] / lo[6], 100 * lo[7] / lo[6], flights[-1], pct(fl, 0.1)),
                  flush=True)
            print("round %d: CPU split with the judge load (%% of one core over %.1f s): worker "
                  "%.0f, PostgreSQL %.0f, Redis %.0f, test provider and feeder %.0f, idle %.0f, "
                  "other processes %.0f (of %d cores)" %
                  (i + 1, lo[6], 100 * lo[2] / lo[6], 100 * lo[7] / lo[6], 100 * lo[11] / lo[6],
                   100 * lo[9] / lo[6], 100 * lo[12] / lo[6],
                   100 * (os.cpu_count() - (lo[2] + lo[7] + lo[11] + lo[9] + lo[12]) / lo[6]),
                   os.cpu_count()), flush=True)
            if args.det_rate:
                print("round %d: deterministic jobs offered at %.0f/s: latency (enqueue to commit) "
                      "alone p50 %.1f ms p99 %.1f ms; with the judge load p50 %.1f ms p99 %.1f ms"
                      % (i + 1, args.det_rate, pct(al[10], 0.5), pct(al[10], 0.99),
                         pct(lo[10], 0.5), pct(lo[10], 0.99)), flush=True)
        print("interleaved: median ratio deterministic with the judge load / alone "
              "= %.2f over %d rounds (min %.2f, max %.2f); worker peak RSS %.1f MB, RSS at the end "
              "%.1f MB; median provider requests in flight while deterministic jobs ran %d; "
              "PostgreSQL CPU of a judged evaluation = %.1f x a deterministic one (median)" %
              (statistics.median(ratios), len(ratios), min(ratios), max(ratios),
               hwm_kb(w.pid) / 1024, status_kb(w.pid, "VmRSS") / 1024, statistics.median(flights),
               statistics.median(pg_j)))
    finally:
        w.send_signal(signal.SIGTERM)
        try:
            w.wait(40)
        except subprocess.TimeoutExpired:
            w.kill()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--judged", type=int, default=5000)
    ap.add_argument("--det", type=int, default=5000)
    ap.add_argument("--delay", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--det-batch", type=int, default=3000)
    ap.add_argument("--det-rate", type=float, default=0,
                    help="phase 3: offer the deterministic jobs at this rate (jobs/s) instead of "
                         "as fast as the worker takes them")
    ap.add_argument("--judge-target", type=int, default=1000)
    ap.add_argument("--judged-pool", type=int, default=0)
    ap.add_argument("--skip-alone", action="store_true")
    args = ap.parse_args()
    prov = Provider(args.delay)
    with Services() as svc:
        env = dict(os.environ, ARBITER_DATABASE_URL=svc.database_url,
                   ARBITER_REDIS_URL=svc.redis_url, ARBITER_METRICS_ADDR="",
                   ARBITER_RATE_LIMIT="0", ARBITER_CONCURRENCY=str(args.concurrency),
                   ARBITER_JUDGE_INFLIGHT=str(args.concurrency), ARBITER_LOG_LEVEL="warn",
                   ARBITER_JUDGE_PROVIDERS=judge_providers(prov.port),
                   # phase 3 keeps a pool of queued submissions the feeder has not enqueued
                   # yet: the reconciler must not take them for jobs Redis lost
                   ARBITER_RECONCILE_MS="24h")
        subprocess.run([args.bin, "migrate"], env=env, check=True, capture_output=True)
        db = psycopg2.connect(svc.database_url)
        r = redis.Redis.from_url(svc.redis_url)
        cur = db.cursor()
        agents = add_agents(cur, 200)
        det, jud = str(uuid.uuid4()), str(uuid.uuid4())
        for cid, slug, spec in ((det, "det", DET_SPEC), (jud, "judged", judge_spec())):
            cur.execute("INSERT INTO challenges (id, slug, difficulty, scoring_spec, ground_truth, "
                        "time_limit_secs) VALUES (%s,%s,'contender',%s,%s,300)",
                        (cid, slug, json.dumps(spec), json.dumps(GT)))
        db.commit()

        if not args.skip_alone:
            alone_phases(args, env, db, r, prov, agents, det, jud)
        if args.rounds > 0:
            interleaved(args, env, db, r, prov, agents, det, jud, svc.pg_proc.pid,
                        svc.redis_proc.pid)
        print("provider calls in total: %d (judged submissions: %d; each judged once)" %
              (prov.total, count_challenge(db, jud)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
