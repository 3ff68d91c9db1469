#!/usr/bin/python3
"""The standings projection catching up, in isolation: backend CPU per result applied.

Starts postgres (fsync on) and redis, migrates, and lets two `arbiter worker`
processes with the projection held off (ARBITER_STANDINGS_APPLY_MS=0) work off two
backlogs of --jobs submissions (the 4-dimension spec of bench_worker.py, 200 agents):
the first is applied at once (history the projection must not read again), the
second is left behind. That database is the template of one copy per experiment;
each experiment calls standings_apply(BATCH) in autocommit until it reports caught
up and prints the wall time and the backend's CPU time (from /proc) per result, then
runs `arbiter standings --check`.

Experiments are BATCH or BATCH:old. With :old, the copy first gets sql/008's
standings_unapplied() and standings_apply() back (taken from that file, so the
comparison is with what 008 shipped), i.e. the selection before
sql/010_standings_select.sql. With --profile, the first experiment's second batch is
logged by auto_explain (every nested statement, with its time) into
--profile-file.

Usage: bench_standings_catchup.py --bin build/worker/arbiter [--jobs 20000] 2000 100 2000:old
"""
import argparse
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from services import Services  # noqa: E402
from bench_worker import add_agents, add_challenge, cpu_secs, enqueue, seed, wait_done  # noqa: E402

import psycopg2  # noqa: E402
import redis  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sql_008():
    """sql/008's standings_unapplied() and standings_apply(), as CREATE OR REPLACE."""
    text = open(os.path.join(ROOT, "sql", "008_standings_projection.sql")).read()
    out = []
    for name in ("standings_unapplied", "standings_apply"):
        m = re.search(r"^CREATE FUNCTION %s\(.*?^\$\$;" % name, text, re.S | re.M)
        out.append(m.group(0).replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1))
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--profile-file", default="standings_catchup_profile.txt")
    ap.add_argument("experiments", nargs="+", help="BATCH or BATCH:old")
    args = ap.parse_args()
    with Services(pg_settings={"fsync": "on", "synchronous_commit": "on"}) as svc:
        r = redis.Redis.from_url(svc.redis_url)
        svc.psql("postgres", "CREATE DATABASE base")
        url = "postgresql://postgres@127.0.0.1:%d/%%s" % svc.pg_port
        env = dict(os.environ, ARBITER_DATABASE_URL=url % "base", ARBITER_REDIS_URL=svc.redis_url,
                   ARBITER_METRICS_ADDR="", ARBITER_RATE_LIMIT="0", ARBITER_CONCURRENCY="64",
                   ARBITER_LOG_LEVEL="warn", ARBITER_STANDINGS_APPLY_MS="0")
        subprocess.run([args.bin, "migrate"], env=env, check=True, capture_output=True)
        db = psycopg2.connect(url % "base")
        cur = db.cursor()
        agents = add_agents(cur, 200)
        ch = add_challenge(cur)
        db.commit()
        nxt = 0
        for rnd in range(2):
            ids = seed(db, args.jobs, agents, ch, first=nxt)
            nxt += len(ids)
            r.flushall()
            enqueue(r, ids)
            ws = [subprocess.Popen([args.bin, "worker"], env=dict(env, ARBITER_WORKER_ID="w%d" % i),
                                   stdout=subprocess.DEVNULL) for i in range(2)]
            try:
                if not wait_done(r, db, ids, 600):
                    sys.exit("the backlog was not worked off within 600 s")
            finally:
                for w in ws:
                    w.terminate()
                for w in ws:
                    w.wait(60)
            if rnd == 0:
                db.autocommit = True
                while True:
                    cur.execute("SELECT caught_up FROM standings_apply(5000)")
                    if cur.fetchone()[0]:
                        break
                db.autocommit = False
        cur.execute("SELECT pending FROM standings_status()")
        print("template: %d results applied, %d behind" % (args.jobs, cur.fetchone()[0]), flush=True)
        db.close()
        db = psycopg2.connect(url % "base")
        db.autocommit = True
        db.cursor().execute("VACUUM ANALYZE")
        db.cursor().execute("CHECKPOINT")
        db.close()
        for k, ex in enumerate(args.experiments):
            batch, _, variant = ex.partition(":")
            name = "e%d" % k
            svc.psql("postgres", "CREATE DATABASE %s TEMPLATE base" % name)
            c = psycopg2.connect(url % name)
            c.autocommit = True
            q = c.cursor()
            if variant == "old":
                q.execute(sql_008())
            q.execute("SELECT pg_backend_pid()")
            pid = q.fetchone()[0]
            q.execute("SELECT 1 FROM standings_progress")
            if args.profile and k == 0:
                q.execute("SELECT applied FROM standings_apply(%s)", (int(batch),))
                for s in ("LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0",
                          "SET auto_explain.log_analyze = on",
                          "SET auto_explain.log_nested_statements = on",
                          "SET auto_explain.log_level = notice", "SET client_min_messages = notice"):
                    q.execute(s)
                del c.notices[:]
                q.execute("SELECT applied FROM standings_apply(%s)", (int(batch),))
                q.execute("SET auto_explain.log_min_duration = -1")
                with open(args.profile_file, "w") as f:
                    f.write("".join(c.notices))
            c0, t0 = cpu_secs(pid, children=False), time.time()
            m = nb = 0    # the timed batches (the profile's two are not counted)
            while True:
                q.execute("SELECT applied, caught_up FROM standings_apply(%s)", (int(batch),))
                a, caught = q.fetchone()
                m += a
                nb += 1
                if caught:
                    break
            dt, dc = time.time() - t0, cpu_secs(pid, children=False) - c0
            ck = subprocess.run([args.bin, "standings", "--check"], env=dict(env, ARBITER_DATABASE_URL=url % name),
                                capture_output=True, text=True)
            print("batch %6s%s: %d results in %d batches: wall %.3f s (%.1f µs per result), backend "
                  "CPU %.2f s (%.1f µs per result); %s" % (
                      batch, " (sql/008's selection)" if variant == "old" else "", m, nb, dt,
                      1e6 * dt / max(m, 1), dc, 1e6 * dc / max(m, 1),
                      (ck.stdout.strip().splitlines() or ["check: no output"])[-1]), flush=True)
            c.close()


if __name__ == "__main__":
    main()
