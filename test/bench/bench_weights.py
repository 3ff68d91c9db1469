#!/usr/bin/python3
"""`arbiter weights` on many agents, two binaries in one run (issue 12; not in CI).

Starts a private postgres, migrates, and writes --agents agents (default
100,000) with random window scores straight into standings_agents (the
weights read nothing else, so no history is needed). Then it runs
`arbiter weights` and `arbiter weights --json` of each binary, alternating,
--rounds times (stdout to /dev/null), and prints per binary and format the
median wall clock of the whole command (process start, connect, query, print)
and the median CPU time of the arbiter process itself (user + system, less
noisy on a shared machine than the wall clock).

Usage: bench_weights.py --bin build/worker/arbiter [--base OTHER_BINARY]
       [--agents N] [--rounds N]
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")]
from services import Services  # noqa: E402

import psycopg2  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--base", help="a second binary to compare with (e.g. a build of main)")
    ap.add_argument("--agents", type=int, default=100000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    bins = [("bin", args.bin)] + ([("base", args.base)] if args.base else [])
    with Services(redis=False) as svc:
        env = dict(os.environ, ARBITER_DATABASE_URL=svc.database_url)
        subprocess.run([args.bin, "migrate"], env=env, check=True, capture_output=True)
        db = psycopg2.connect(svc.database_url)
        cur = db.cursor()
        cur.execute("INSERT INTO agents (id, name) SELECT gen_random_uuid(), 'agent-' || g "
                    "FROM generate_series(1, %s) g", (args.agents,))
        cur.execute("INSERT INTO standings_agents (agent_id, tasks, w_count, w_sum) "
                    "SELECT id, 100, 100, (random() * 100000)::int FROM agents")
        db.commit()
        db.autocommit = True
        cur.execute("VACUUM ANALYZE standings_agents")
        res = {}
        for _ in range(args.rounds):
            for name, path in bins:
                for extra in ([], ["--json"]):
                    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                    t = time.time()
                    r = subprocess.run([path, "weights"] + extra, env=env,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                    el = time.time() - t
                    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                    if r.returncode != 0:
                        raise RuntimeError("%s weights failed: %s" % (path, r.stderr))
                    cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
                    res.setdefault((name, " ".join(extra) or "text"), []).append((el, cpu))
        for (name, fmt), v in sorted(res.items()):
            print("%-4s %-6s %d agents: wall median %.2f s, arbiter CPU median %.2f s (%d rounds)"
                  % (name, fmt, args.agents, statistics.median(x[0] for x in v),
                     statistics.median(x[1] for x in v), len(v)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
