#!/usr/bin/python3
"""What the standings cost PostgreSQL per committed evaluation (issues 12, 23;
not in CI): the trigger inside the commit (the binary's migrations up to 007),
or the projection applied after it (008).

Starts a private postgres (synchronous_commit off: the commit's flush is not
what is measured), migrates with --bin (so the binary's own migrations define
the trigger), creates 200 agents on one challenge and queued submissions, and
commits first evaluations from one session the way the worker does:
BEGIN; standings_lock_agents(the batch's agents); one INSERT of --batch
results; COMMIT. After a warm-up (--warmup batches, trigger on), it alternates
rounds with the trigger disabled and enabled (--rounds of each, --batches per
round) and prints the CPU time of that session's backend per evaluation
(/proc/PID/stat, user + system), whose difference is the trigger's cost.
With sql/008 (the projection) there is no trigger and no standings_lock_agents:
"on" rounds have a second session call standings_apply() after every
--apply-every evaluations committed (default 512, about what a worker's
200 ms batch holds at 2,500 evaluations/s), and the cost is that session's
backend CPU per evaluation plus any difference in the committing session's. With
--batches 1500 or more the agents' windows (100) are full, so tasks leave
them on every commit. Where the binary's migrations include sql/006, the
results carry their agent, challenge and submission time as the worker's
commit writes them.

With --profile it also loads pg_stat_statements (track = all, so the
trigger's own statements are counted) and, after the rounds, commits
--batches more with the trigger on and prints each statement's execution
time per evaluation, the trigger's statements indented under the INSERT
(their sum against the INSERT's extra time is the plpgsql overhead). The
extension slows every statement a little: compare the CPU figures of runs
without it.

Usage: bench_standings_commit.py --bin build/worker/arbiter [--batch 16]
       [--batches 300] [--rounds 3] [--warmup 200] [--apply-every 512] [--profile]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid

sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")]
from services import Services  # noqa: E402

import psycopg2  # noqa: E402
import psycopg2.extras  # noqa: E402

INSERT = ("INSERT INTO evaluation_results (submission_id, eval_seq, evaluator, score, result, "
          "score_breakdown, submission_warnings, constraint_violations, verified, evaluation_log, "
          "worker_id, started_at, completed_at) "
          "SELECT x, 1, 'deterministic', (random() * 1000)::int, "
          "(ARRAY['win', 'draw', 'loss'])[1 + (random() * 2)::int], '{}', '[]', '[]', true, '{}', "
          "'bench', now(), now() FROM unnest(%s::uuid[]) x")
# With sql/006 the worker's commit also writes each result's agent, challenge and
# submission time (the standings trigger then skips its lookup); the same here.
INSERT_IDS = ("INSERT INTO evaluation_results (submission_id, eval_seq, evaluator, score, result, "
              "score_breakdown, submission_warnings, constraint_violations, verified, "
              "evaluation_log, worker_id, started_at, completed_at, standings_agent_id, "
              "standings_challenge_id, standings_submitted_at) "
              "SELECT x, 1, 'deterministic', (random() * 1000)::int, "
              "(ARRAY['win', 'draw', 'loss'])[1 + (random() * 2)::int], '{}', '[]', '[]', true, "
              "'{}', 'bench', now(), now(), a, %s, t "
              "FROM unnest(%s::uuid[], %s::uuid[], %s::timestamptz[]) AS u(x, a, t)")


def backend_cpu(pid):
    with open("/proc/%d/stat" % pid) as f:
        st = f.read().rsplit(")", 1)[1].split()
    return (int(st[11]) + int(st[12])) / float(os.sysconf("SC_CLK_TCK"))


def profile(cur, db, commit_batches, evaluations):
    """Prints the statements' execution times per evaluation while commit_batches() runs."""
    cur.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    db.commit()
    cur.execute("SELECT pg_stat_statements_reset()")
    db.commit()
    commit_batches()
    cur.execute("SELECT toplevel, calls, rows, total_exec_time, total_plan_time, "
                "regexp_replace(query, '\\s+', ' ', 'g') FROM pg_stat_statements "
                "WHERE query !~* 'pg_stat_statements|^(BEGIN|COMMIT|ALTER)' "
                "ORDER BY toplevel DESC, total_exec_time DESC")
    rows = cur.fetchall()
    db.commit()
    print("per-statement execution time per evaluation (%d evaluations, trigger on; "
          "us, calls per INSERT):" % evaluations)
    ins = [r for r in rows if r[0] and "INSERT INTO evaluation_results" in r[5]]
    per = float(evaluations)
    nested = 0.0
    for top, calls, _, exe, plan, q in rows:
        us = (exe + plan) * 1000.0 / per
        if not top:
            nested += us
        print("%s%7.1f  %5.2f  %s%s" % ("" if top else "    ", us,
                                        calls / float(ins[0][1]) if ins else 0,
                                        "(plan %.1f) " % (plan * 1000.0 / per) if plan else "", q[:150]))
    print("nested statements: %.1f us per evaluation" % nested)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--batch", type=int, default=16, help="evaluations per INSERT")
    ap.add_argument("--batches", type=int, default=300, help="INSERTs per round")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of each kind")
    ap.add_argument("--warmup", type=int, default=200, help="INSERTs before the first round")
    ap.add_argument("--apply-every", type=int, default=512,
                    help="with the projection (sql/008): evaluations per standings_apply() call")
    ap.add_argument("--profile", action="store_true",
                    help="per-statement times of the trigger (pg_stat_statements)")
    args = ap.parse_args()
    settings = {"synchronous_commit": "off"}
    if args.profile:
        settings.update({"shared_preload_libraries": "pg_stat_statements",
                         "pg_stat_statements.track": "all",
                         "pg_stat_statements.max": "1000",
                         "pg_stat_statements.track_planning": "on"})
    with Services(redis=False, pg_settings=settings) as svc:
        env = dict(os.environ, ARBITER_DATABASE_URL=svc.database_url)
        subprocess.run([args.bin, "migrate"], env=env, check=True, capture_output=True)
        db = psycopg2.connect(svc.database_url)
        cur = db.cursor()
        agents = [str(uuid.uuid4()) for _ in range(200)]
        psycopg2.extras.execute_values(cur, "INSERT INTO agents (id, name) VALUES %s",
                                       [(a, "agent-%d" % i) for i, a in enumerate(agents)])
        cur.execute("INSERT INTO challenges (slug, difficulty, scoring_spec, time_limit_secs) "
                    "VALUES ('bench', 'contender', '{}', 60) RETURNING id")
        ch = cur.fetchone()[0]
        total = args.batch * (args.warmup + (2 * args.rounds + args.profile) * args.batches)
        cur.execute("INSERT INTO matches (agent_id, challenge_id, status, started_at, expires_at) "
                    "SELECT (%s::uuid[])[1 + g %% 200], %s, 'active', now(), now() + interval '1 hour' "
                    "FROM generate_series(0, %s - 1) g", (agents, ch, total))
        cur.execute("INSERT INTO submissions (match_id, agent_id, source_ip, answer, status) "
                    "SELECT id, agent_id, '10.0.0.1', '{}', 'evaluating' FROM matches")
        cur.execute("SELECT id::text, agent_id::text, submitted_at FROM submissions "
                    "ORDER BY submitted_at, id")
        subs = cur.fetchall()
        cur.execute("SELECT count(*) FROM pg_attribute WHERE attrelid = 'evaluation_results'::regclass "
                    "AND attname = 'standings_agent_id'")
        with_ids = cur.fetchone()[0] == 1
        cur.execute("SELECT pg_backend_pid()")
        pid = cur.fetchone()[0]
        cur.execute("SELECT count(*) FROM pg_proc WHERE proname = 'standings_apply'")
        projection = cur.fetchone()[0] == 1
        db.commit()
        ap_db = psycopg2.connect(svc.database_url)   # the projection's applier (sql/008)
        ap_cur = ap_db.cursor()
        ap_cur.execute("SELECT pg_backend_pid()")
        ap_pid = ap_cur.fetchone()[0]
        ap_db.commit()
        pos = [0]
        applier = []   # per "on" round: the applier's backend CPU per evaluation

        def apply_all():
            while True:
                ap_cur.execute("SELECT caught_up FROM standings_apply(100000)")
                done_ = ap_cur.fetchone()[0]
                ap_db.commit()
                if done_:
                    return

        def run(mode, n):
            if projection:
                apply_all()   # an "off" round's results are applied before the next round
            else:
                cur.execute("ALTER TABLE evaluation_results %s TRIGGER evaluation_results_standings"
                            % ("DISABLE" if mode == "off" else "ENABLE"))
                db.commit()
            c0, t0, a0 = backend_cpu(pid), time.time(), backend_cpu(ap_pid)
            since = 0
            for _ in range(n):
                batch = subs[pos[0]:pos[0] + args.batch]
                pos[0] += args.batch
                if not projection:
                    cur.execute("SELECT standings_lock_agents(%s::uuid[])",
                                (sorted(set(a for _, a, _ in batch)),))
                if with_ids:
                    cur.execute(INSERT_IDS, (ch, [s for s, _, _ in batch], [a for _, a, _ in batch],
                                             [t for _, _, t in batch]))
                else:
                    cur.execute(INSERT, ([s for s, _, _ in batch],))
                db.commit()
                since += len(batch)
                if projection and mode == "on" and since >= args.apply_every:
                    apply_all()
                    since = 0
            ev = float(n * args.batch)
            if projection and mode == "on":
                apply_all()
                applier.append((backend_cpu(ap_pid) - a0) * 1e6 / ev)
            return (backend_cpu(pid) - c0) * 1e6 / ev, (time.time() - t0) * 1e6 / ev

        run("on", args.warmup)
        res = {"off": [], "on": []}
        for _ in range(args.rounds):
            for mode in ("off", "on"):
                res[mode].append(run(mode, args.batches))
        what = "projection" if projection else "trigger"
        for mode in ("off", "on"):
            print("%s %-3s: committing backend's CPU per evaluation %s us (wall %s us)" % (
                what, mode, " ".join("%.0f" % c for c, _ in res[mode]),
                " ".join("%.0f" % w for _, w in res[mode])))
        off = statistics.median(c for c, _ in res["off"])
        on = statistics.median(c for c, _ in res["on"])
        if projection:
            print("projection: the applier's backend CPU per evaluation %s us (standings_apply "
                  "every %d evaluations)" % (" ".join("%.0f" % c for c in applier), args.apply_every))
            on += statistics.median(applier)
        if args.profile:
            profile(cur, db, lambda: run("on", args.batches), args.batches * args.batch)
        cur.execute("SELECT round(avg(tasks)) FROM standings_agents")
        tasks = cur.fetchone()[0]
        db.commit()
        print("results %s their agent, challenge and submission time (sql/006)"
              % ("carry" if with_ids else "do not carry"))
        print("batch %d: the %s costs %+.0f us of backend CPU per evaluation (median %.0f "
              "without, %.0f with%s; %s tasks per agent at the end)" % (
                  args.batch, what, on - off, off, on,
                  ", the applier's included" if projection else "", tasks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
