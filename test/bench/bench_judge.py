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
3. mixed: both backlogs at once; the deterministic jobs' evaluations/s while
   the judge load runs, as a ratio to phase 1.

Usage: bench_judge.py --bin build/worker/arbiter [--judged N] [--det N]
       [--delay S] [--concurrency C]   (C default 512: the issue's >= 500 in flight; judge
       jobs waiting for a verdict have their own C slots, so up to 2 C jobs are resident)
"""
import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from services import Services  # noqa: E402
from bench_worker import GT, SPEC as DET_SPEC, count_done, enqueue, hwm_kb  # noqa: E402

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
        self.inflight = self.peak = self.total = 0
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
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n" % len(REPLY) + REPLY)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def judge_spec(port):
    return {"mode": "llm", "rubric": [
        {"key": "quality", "name": "Quality", "description": "q", "weight": 60},
        {"key": "docs", "name": "Docs", "description": "d", "weight": 40}],
        "judge": {"provider": "openai", "model": "bench", "base_url":
                  "http://127.0.0.1:%d/v1" % port, "timeout_ms": 30000,
                  "reads": {"fields": ["work"]}}}


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
    while count_done(db, every) < len(every) and time.time() - t0 < 600:
        time.sleep(0.05)
    rss = hwm_kb(w.pid) / 1024
    cpu = cpu_s(w.pid)
    w.send_signal(signal.SIGTERM)
    try:
        w.wait(40)
    except subprocess.TimeoutExpired:
        w.kill()
    return rss, cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--judged", type=int, default=5000)
    ap.add_argument("--det", type=int, default=5000)
    ap.add_argument("--delay", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=512)
    args = ap.parse_args()
    prov = Provider(args.delay)
    with Services() as svc:
        env = dict(os.environ, ARBITER_DATABASE_URL=svc.database_url,
                   ARBITER_REDIS_URL=svc.redis_url, ARBITER_METRICS_ADDR="",
                   ARBITER_RATE_LIMIT="0", ARBITER_CONCURRENCY=str(args.concurrency),
                   ARBITER_JUDGE_INFLIGHT=str(args.concurrency), ARBITER_LOG_LEVEL="warn")
        subprocess.run([args.bin, "migrate"], env=env, check=True, capture_output=True)
        db = psycopg2.connect(svc.database_url)
        r = redis.Redis.from_url(svc.redis_url)
        cur = db.cursor()
        agents = [str(uuid.uuid4()) for _ in range(200)]
        psycopg2.extras.execute_values(cur, "INSERT INTO agents (id, name) VALUES %s",
                                       [(a, "agent-%d" % i) for i, a in enumerate(agents)])
        det, jud = str(uuid.uuid4()), str(uuid.uuid4())
        for cid, slug, spec in ((det, "det", DET_SPEC), (jud, "judged", judge_spec(prov.port))):
            cur.execute("INSERT INTO challenges (id, slug, difficulty, scoring_spec, ground_truth, "
                        "time_limit_secs) VALUES (%s,%s,'contender',%s,%s,300)",
                        (cid, slug, json.dumps(spec), json.dumps(GT)))
        db.commit()

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

        j2 = seed(db, args.judged, agents, jud, True)
        d2 = seed(db, args.det, agents, det, False)
        rss, cpu = run_phase(args, env, db, r, [j2, d2], "bench-mixed")
        n, span, det_mixed = span_rate(db, d2)
        nj, spanj, jm = span_rate(db, j2)
        print("mixed: deterministic %d in %.2f s = %.0f evaluations/s (%.2f x alone); judged "
              "%d in %.2f s = %.0f/s; worker peak RSS %.1f MB; worker CPU %.1f s" %
              (n, span, det_mixed, det_mixed / det_alone if det_alone else 0, nj, spanj, jm, rss,
               cpu))
        print("provider calls in total: %d (each judged submission once)" % prov.total)
    return 0


if __name__ == "__main__":
    sys.exit(main())
