#!/usr/bin/python3
"""Standings read benchmark at scale (issue 12; not part of CI: it takes a while).

Starts a private postgres (bulk-load settings, listed below), migrates, and
builds --agents agents (default 100,000) on --challenges challenges with
--results first evaluations (default 10,000,000; test/bench/benchdb.py) plus --reevals
re-evaluations, all with set-based generate_series inserts, left out of the
standings projection (standings_xid NULL, sql/008). Then the standings are built from that history
in one set-based pass of the migration's own functions (standings_recompute,
standings_aggregate); with --online-backfill, by `arbiter standings --rebuild`
instead (the batched online backfill: at this size it is bound by random reads,
about 1,850 tasks/s on this machine, so well over an hour for 10M), and
the reads are timed:

- top-100 leaderboard by window score: the SQL of `arbiter leaderboard`
  timed in the server (EXPLAIN ANALYZE execution time, median of 15) and the
  whole `arbiter leaderboard --limit 100` command (process start, connect,
  query, print; median of 5);
- top-100 by Elo and the per-challenge best-score leaderboard, the same way;
- `arbiter weights` for every agent, and `arbiter weights --json`
  (wall clock of the whole command, median of 3).

With --check, `arbiter standings --check` (a full recomputation from
evaluation_results) runs at the end and must find no difference.

Usage: bench_standings.py --bin build/worker/arbiter [--agents N] [--results N]
       [--challenges N] [--reevals N] [--check] [--dir DIR]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchdb  # noqa: E402
from benchdb import step  # noqa: E402
from services import Services  # noqa: E402

import psycopg2  # noqa: E402

PG = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off",
      "shared_buffers": "2GB", "work_mem": "256MB", "maintenance_work_mem": "1GB",
      "max_wal_size": "20GB", "checkpoint_timeout": "30min", "autovacuum": "on",
      "jit": "off"}


def run_cmd(args, env):
    t = time.time()
    r = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    el = time.time() - t
    if r.returncode != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(args), r.stderr))
    return el, r.stdout


def server_ms(cur, sql, params, n=15):
    times = []
    for _ in range(n):
        cur.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
        times.append(cur.fetchone()[0][0]["Execution Time"])
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--agents", type=int, default=100000)
    ap.add_argument("--results", type=int, default=10000000)
    ap.add_argument("--challenges", type=int, default=50)
    ap.add_argument("--reevals", type=int, default=100000)
    ap.add_argument("--chunk", type=int, default=1000000)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--online-backfill", action="store_true",
                    help="build the standings with `arbiter standings --rebuild` (batched, online) "
                         "instead of one set-based pass")
    ap.add_argument("--dir", default=None, help="where the database lives (default: a temp dir)")
    args = ap.parse_args()
    print("postgres settings: %s" % " ".join("%s=%s" % kv for kv in sorted(PG.items())))
    with Services(redis=False, pg_settings=PG, base_dir=args.dir) as svc:
        env = dict(os.environ, ARBITER_DATABASE_URL=svc.database_url)
        t0 = time.time()
        run_cmd([args.bin, "migrate"], env)
        db = psycopg2.connect(svc.database_url)
        db.autocommit = True
        cur = db.cursor()
        # The results are loaded with standings_xid NULL (counted by the pass below, not by
        # the projection) and the foreign-key triggers skipped; normal mode again before the
        # standings are built. One match, one submission and one first result per row;
        # agents round-robin, challenges and scores pseudo-random; ids in order of g
        # (commit order).
        benchdb.fill(cur, args.agents, args.challenges, args.results, args.chunk, t0)
        if args.reevals:
            cur.execute(
                "INSERT INTO evaluation_results (submission_id, eval_seq, evaluator, score, result, "
                "  score_breakdown, submission_warnings, constraint_violations, verified, evaluation_log, "
                "  worker_id, started_at, completed_at, standings_xid) "
                "SELECT submission_id, 2, 'deterministic', (score * 7 + 13) %% 1001, "
                "  CASE WHEN (score * 7 + 13) %% 1001 >= 700 THEN 'win' "
                "       WHEN (score * 7 + 13) %% 1001 >= 400 THEN 'draw' ELSE 'loss' END, "
                "  '{}', '[]', '[]', false, '{}', 'bench', now(), now(), NULL "
                "FROM evaluation_results WHERE eval_seq = 1 AND id %% %s = 0 ORDER BY id",
                (max(1, args.results // args.reevals),))
            step("re-evaluations: %d" % cur.rowcount, t0)
        cur.execute("SET session_replication_role = origin")
        cur.execute("VACUUM ANALYZE")
        step("vacuum analyze", t0)

        t1 = time.time()
        if args.online_backfill:
            # The online path: batches of agents through the indexes (random I/O at this size).
            p = subprocess.Popen([args.bin, "standings", "--rebuild", "--batch", "1000"], env=env,
                                 stdout=subprocess.PIPE, text=True)
            last = ""
            for line in p.stdout:
                last = line.strip()
                if "backfill:" in line and ("0%" in line or "done" in line):
                    print("  " + last)
            if p.wait() != 0:
                raise RuntimeError("rebuild failed")
            print("  " + last)
            step("backfill of the standings (standings --rebuild)", t0)
        else:
            # One set-based pass with the same SQL functions (hash joins, sequential reads).
            benchdb.build_standings(cur)
            step("standings built set-based from history", t0)
        backfill_secs = time.time() - t1
        cur.execute("VACUUM ANALYZE standings_entries, standings_agents, standings_agent_challenges")
        cur.execute("SELECT count(*), sum(tasks) FROM standings_agents")
        print("standings: %d agents, %d tasks; backfill %.1f s" % (cur.fetchone() + (backfill_secs,)))

        sql_window = "SELECT * FROM leaderboard_window LIMIT 100"
        sql_elo = "SELECT * FROM leaderboard_elo LIMIT 100"
        cur.execute("SELECT id FROM challenges ORDER BY slug LIMIT 1")
        chid = cur.fetchone()[0]
        sql_best = "SELECT * FROM leaderboard_challenge WHERE challenge_id = %s LIMIT 100"
        ms_w = server_ms(cur, sql_window, None)
        ms_e = server_ms(cur, sql_elo, None)
        ms_b = server_ms(cur, sql_best, (chid,))
        cli_w = statistics.median(run_cmd([args.bin, "leaderboard", "--limit", "100"], env)[0]
                                  for _ in range(5))
        cli_e = statistics.median(run_cmd([args.bin, "leaderboard", "--by", "elo", "--limit", "100"], env)[0]
                                  for _ in range(5))
        cli_b = statistics.median(run_cmd([args.bin, "leaderboard", "--challenge", "bench-1", "--limit",
                                           "100"], env)[0] for _ in range(5))
        wts = [run_cmd([args.bin, "weights"], env) for _ in range(3)]
        wj = statistics.median(run_cmd([args.bin, "weights", "--json"], env)[0] for _ in range(3))
        nweights = sum(1 for line in wts[0][1].splitlines() if not line.startswith("#"))
        print("top-100 by window score: %.2f ms in the server (median of 15), "
              "`arbiter leaderboard --limit 100` %.1f ms wall (median of 5)" % (ms_w, cli_w * 1000))
        print("top-100 by Elo:          %.2f ms in the server, %.1f ms wall" % (ms_e, cli_e * 1000))
        print("top-100 on one challenge (best): %.2f ms in the server, %.1f ms wall" % (ms_b, cli_b * 1000))
        print("`arbiter weights` for %d agents: %.2f s wall (median of 3); --json %.2f s" %
              (nweights, statistics.median(w[0] for w in wts), wj))
        if args.check:
            el, out = run_cmd([args.bin, "standings", "--check"], env)
            print("standings --check: %s (%.1f s)" % (out.strip().splitlines()[-1], el))
        db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
