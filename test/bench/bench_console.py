#!/usr/bin/python3
"""The operator console's views against a large database (issue 26; not part of CI).

Starts a private redis-server and postgres (bulk-load settings, below), migrates, and fills
PostgreSQL with --results evaluation_results rows (default 10,000,000: one match, one
submission and one first result each, --agents agents on --challenges challenges), all with
set-based generate_series inserts in chunks of --chunk rows; the results' completed_at are
spread over --days days up to now, so the last hour holds its share. Submissions are
'completed', but one in --odd-every is 'failed' and one 'rejected' (both with their result),
and the newest --backlog (default 10,000) are 'queued' (a backlog). The foreign keys' and
009's counting triggers are skipped during the load (session_replication_role = replica), so
the counters are taken once afterwards (submission_counts_recount()). The standings are built in one set-based pass
of the migrations' own functions (test/bench/benchdb.py, as test/bench/bench_standings.py does).

Redis gets --dead dead letters (half of them for the first challenge's submissions) and a
full hour of the workers' stats stream from --replicas replicas (one entry per replica
every 10 s: 360 x replicas entries).

Then `arbiter console` is started and each view is requested --repeat times over HTTP
(wall clock on this side: connect, every query, the JSON): median and max per view, and
the view's own took_ms. The target is 200 ms per view. Last, what migration 009's counting
trigger adds to a commit like the worker's (trigger_cost).

Usage: bench_console.py --bin build/worker/arbiter [--results N] [--agents N]
       [--challenges N] [--dead N] [--replicas N] [--repeat N] [--dir DIR]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchdb  # noqa: E402
from benchdb import step  # noqa: E402
from services import Services  # noqa: E402

import psycopg2  # noqa: E402
import redis  # noqa: E402

PG = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off",
      "shared_buffers": "1GB", "work_mem": "256MB", "maintenance_work_mem": "1GB",
      "max_wal_size": "20GB", "checkpoint_timeout": "30min", "autovacuum": "on",
      "jit": "off"}


def fill_pg(cur, args, t0):
    """The database: benchdb.fill's rows, completed over the last --days days up to now (the
    newest ones the last hour's), with their odd statuses and the backlog; the counters
    (submission_counts_recount) and the standings built once afterwards."""
    # row g completes at now - (N - g) * span / N: the newest rows are the last hour's
    benchdb.fill(cur, args.agents, args.challenges, args.results, args.chunk, t0, rows={
        "at": "now() - ((%(n)s - g) * %(step)s) * interval '1 ms'",
        "started": "at - interval '1 minute'",
        "submitted": "at - interval '1 second'",
        "completed": "at",
        "status": "CASE WHEN g > %(n)s - %(backlog)s THEN 'queued' WHEN g %% %(odd)s = 1 "
                  "THEN 'failed' WHEN g %% %(odd)s = 2 THEN 'rejected' ELSE 'completed' END",
        "answer": "'{\"x\": 1}'",
    }, params={"n": args.results, "step": args.days * 86400000.0 / args.results,
               "odd": args.odd_every, "backlog": args.backlog})
    cur.execute("SET session_replication_role = origin")
    # what migration 009 does once: the counters from the rows (its triggers were skipped)
    cur.execute("SELECT submission_counts_recount()")
    cur.execute("VACUUM ANALYZE")
    step("counters, vacuum analyze", t0)
    benchdb.build_standings(cur)
    cur.execute("VACUUM ANALYZE standings_entries, standings_agents, standings_agent_challenges")
    step("standings built set-based", t0)


def fill_redis(r, cur, args, t0):
    cur.execute("SELECT s.id::text FROM submissions s JOIN matches m ON m.id = s.match_id "
                "JOIN challenges c ON c.id = m.challenge_id WHERE c.slug = 'bench-1' LIMIT %s",
                (args.dead // 2,))
    mine = [row[0] for row in cur.fetchall()]
    cur.execute("SELECT id::text FROM submissions LIMIT %s", (args.dead - len(mine),))
    other = [row[0] for row in cur.fetchall()]
    now = int(time.time() * 1000)
    p = r.pipeline(transaction=False)
    for i, sid in enumerate(other + mine):
        p.xadd("arbiter:dead", {"submission_id": sid, "kind": "evaluate", "enqueued_at": now,
                                "reason": "bench failure %d" % (i % 7), "failed_at": now,
                                "original_id": "1-0", "worker_id": "bench"},
               id="%d-%d" % (now - (args.dead - i) * 1000, 0))
    p.execute()
    hist = ",".join(["3", "9", "20", "30", "20", "10", "5", "2", "1"] + ["0"] * 8)
    p = r.pipeline(transaction=False)
    for k in range(360):
        for rep in range(args.replicas):
            p.xadd("arbiter:stats", {"w": "bench-%d" % rep, "c": 100, "f": 1, "r": 2, "h": hist},
                   id="%d-%d" % (now - 3600000 + k * 10000, rep))
    p.execute()
    step("Redis: %d dead letters, %d stats entries" % (args.dead, 360 * args.replicas), t0)


def trigger_cost(cur, rounds=300, batch=64):
    """What 009's counting trigger adds to a commit like the worker's (one UPDATE of a batch
    of submissions from queued to completed per transaction): the same commits with the
    update trigger disabled and enabled, twice, interleaved; the medians. The rows are new
    ones, deleted afterwards and the counters recounted."""
    cur.execute("SELECT agent_id, match_id FROM submissions LIMIT 1")
    agent, match = cur.fetchone()
    out = {False: [], True: []}
    for enabled in (False, True, False, True):
        cur.execute("ALTER TABLE submissions %s TRIGGER submissions_count_update" %
                    ("ENABLE" if enabled else "DISABLE"))
        cur.execute("INSERT INTO submissions (match_id, agent_id, source_ip, answer, status) "
                    "SELECT %s, %s, '192.0.2.1', '{}', 'queued' FROM generate_series(1, %s) "
                    "RETURNING id", (match, agent, rounds * batch))
        ids = [r[0] for r in cur.fetchall()]
        for i in range(rounds):
            t = time.perf_counter()
            cur.execute("BEGIN")
            cur.execute("UPDATE submissions SET status = 'completed' WHERE id = ANY(%s::uuid[])",
                        (ids[i * batch:(i + 1) * batch],))
            cur.execute("COMMIT")
            out[enabled].append((time.perf_counter() - t) * 1000)
        cur.execute("DELETE FROM submissions WHERE id = ANY(%s::uuid[])", (ids,))
    cur.execute("ALTER TABLE submissions ENABLE TRIGGER submissions_count_update")
    cur.execute("SELECT submission_counts_recount()")
    print("a commit of %d submissions queued -> completed: %.3f ms without 009's trigger, "
          "%.3f ms with it (medians of %d)" % (batch, statistics.median(out[False]),
                                               statistics.median(out[True]), 2 * rounds))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--results", type=int, default=10000000)
    ap.add_argument("--agents", type=int, default=10000)
    ap.add_argument("--challenges", type=int, default=50)
    ap.add_argument("--days", type=float, default=30)
    ap.add_argument("--odd-every", type=int, default=100)
    ap.add_argument("--backlog", type=int, default=10000)
    ap.add_argument("--chunk", type=int, default=500000)
    ap.add_argument("--dead", type=int, default=10000)
    ap.add_argument("--replicas", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--dir", default=None, help="where the database lives (default: a temp dir)")
    args = ap.parse_args()
    print("postgres settings: %s" % " ".join("%s=%s" % kv for kv in sorted(PG.items())))
    with Services(pg_settings=PG, base_dir=args.dir) as svc:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ARBITER_")}
        env.update(ARBITER_DATABASE_URL=svc.database_url, ARBITER_REDIS_URL=svc.redis_url)
        t0 = time.time()
        subprocess.run([args.bin, "migrate"], env=env, check=True, capture_output=True)
        db = psycopg2.connect(svc.database_url)
        db.autocommit = True
        cur = db.cursor()
        fill_pg(cur, args, t0)
        fill_redis(redis.Redis.from_url(svc.redis_url), cur, args, t0)
        cur.execute("SELECT count(*) FROM evaluation_results")
        nres = cur.fetchone()[0]
        cur.execute("SELECT count(*) FROM evaluation_results WHERE completed_at > now() - interval '1 hour'")
        nhour = cur.fetchone()[0]
        cur.execute("SELECT submission_id::text FROM evaluation_results ORDER BY id DESC LIMIT 1")
        sub = cur.fetchone()[0]
        cur.execute("SELECT pg_size_pretty(pg_database_size(current_database()))")
        size = cur.fetchone()[0]
        print("database: %d results (%d in the last hour), %s" % (nres, nhour, size))

        log = open(os.path.join(svc.tmp, "console.log"), "w+")
        con = subprocess.Popen([args.bin, "console", "--listen", "127.0.0.1:0"], env=env,
                               stdout=log, stderr=log)
        try:
            url = None
            for _ in range(100):
                log.seek(0)
                m = re.search(r"listening on (http://\S+/)", log.read())
                if m:
                    url = m.group(1)
                    break
                time.sleep(0.1)
            if not url:
                raise RuntimeError("the console did not start")
            views = ["api/overview", "api/charts", "api/submission?id=" + sub, "api/dead?limit=50",
                     "api/dead?limit=50&challenge=bench-1", "api/dead?limit=50&reason=failure+3",
                     "api/standings", "api/standings?by=elo", "api/standings?challenge=bench-1",
                     "api/standings?challenge=bench-1&by=window", "/"]
            print("%-44s %9s %9s %9s" % ("view", "median ms", "max ms", "took_ms"))
            worst = 0
            for v in views:
                ts, took = [], []
                for _ in range(args.repeat):
                    t = time.time()
                    with urllib.request.urlopen(url + v.lstrip("/"), timeout=30) as resp:
                        body = resp.read()
                    ts.append((time.time() - t) * 1000)
                    if v.startswith("api/"):
                        doc = json.loads(body)
                        if doc.get("db_error") or doc.get("error"):
                            raise RuntimeError("%s: %s" % (v, doc.get("db_error") or doc.get("error")))
                        took.append(doc.get("took_ms", -1))
                med = statistics.median(ts)
                worst = max(worst, med)
                print("%-44s %9.1f %9.1f %9s" % (v[:44], med, max(ts),
                                                 "%d" % statistics.median(took) if took else "-"))
            print("slowest view: %.1f ms median (target 200 ms)" % worst)
            trigger_cost(cur)
        finally:
            con.terminate()
            con.wait(10)
        db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
