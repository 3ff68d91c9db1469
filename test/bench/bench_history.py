#!/usr/bin/python3
"""Does a commit get dearer as the history grows? (one worker pair, long-lived sessions)

Starts a private redis-server and postgres (fsync on) with pg_stat_statements,
migrates, starts two `arbiter worker` processes once, then runs ROUNDS rounds of
JOBS submissions (the bench_worker shapes, 200 agents) through the same workers:
their prepared statements keep the plans they made in the first round. After each
round it prints the round's evaluations/s and the top statements with their time
per evaluation; a statement whose time grows round after round reads the history.

Usage: bench_history.py --bin build/worker/arbiter [--rounds 5] [--jobs 8000] [--top 4]
"""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
from services import Services  # noqa: E402
from bench_worker import add_agents, add_challenge, enqueue, seed, wait_done  # noqa: E402

import psycopg2  # noqa: E402
import redis  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=8000)
    ap.add_argument("--top", type=int, default=4)
    ap.add_argument("--no-standings", action="store_true",
                    help="no standings for the whole run (the workers' projection off, sql/008)")
    args = ap.parse_args()
    pg = {"fsync": "on", "synchronous_commit": "on",
          "shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "all"}
    with Services(pg_settings=pg) as svc:
        env = dict(os.environ, ARBITER_DATABASE_URL=svc.database_url,
                   ARBITER_REDIS_URL=svc.redis_url, ARBITER_METRICS_ADDR="",
                   ARBITER_RATE_LIMIT="0", ARBITER_LOG_LEVEL="warn")
        subprocess.run([args.bin, "migrate"], env=env, check=True, capture_output=True)
        db = psycopg2.connect(svc.database_url)
        r = redis.Redis.from_url(svc.redis_url)
        cur = db.cursor()
        agents = add_agents(cur, 200)
        challenge = add_challenge(cur)
        cur.execute("CREATE EXTENSION pg_stat_statements")
        db.commit()
        off = {"ARBITER_STANDINGS_APPLY_MS": "0"} if args.no_standings else {}
        workers = [subprocess.Popen([args.bin, "worker"],
                                    env=dict(env, ARBITER_WORKER_ID="history-%d" % i, **off))
                   for i in range(2)]
        try:
            for rnd in range(args.rounds):
                ids = seed(db, args.jobs, agents, challenge)
                cur.execute("SELECT pg_stat_statements_reset()")
                db.commit()
                t = time.time()
                enqueue(r, ids)
                wait_done(r, db, ids)
                print("round %d: %d evaluations, %.0f evaluations/s (history %d)" %
                      (rnd + 1, len(ids), len(ids) / (time.time() - t), (rnd + 1) * len(ids)))
                # The workers' statements (not this script's polling or seeding).
                cur.execute("SELECT total_exec_time, calls, left(regexp_replace(query, '\\s+', ' ', "
                            "'g'), 80) FROM pg_stat_statements WHERE toplevel AND query NOT LIKE "
                            "'/* bench poll */%%' AND query NOT LIKE 'SET LOCAL %%' AND query NOT LIKE 'INSERT INTO "
                            "matches%%' AND query NOT LIKE 'INSERT INTO submissions%%' AND query NOT "
                            "LIKE '%%pg_stat_statements%%' ORDER BY total_exec_time DESC LIMIT %s",
                            (args.top,))
                for total, calls, q in cur.fetchall():
                    print("  %7.1f us per evaluation, %5d calls: %s" %
                          (total * 1000 / len(ids), calls, q))
                db.commit()
        finally:
            for w in workers:
                w.terminate()
            for w in workers:
                w.wait()


if __name__ == "__main__":
    main()
