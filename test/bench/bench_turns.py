#!/usr/bin/python3
"""Throughput of two arbiter builds on the same backlog, alternating, in one run.

Issue 23's comparison: this build (standings projection on, the default) against an
older build (e.g. commit 234eb0b, before standings existed). An older build has an
older schema, so each build gets a database of its own, migrated by its own
`arbiter migrate`, on the same postgres server (fsync on, synchronous_commit on) and
the same redis-server. Each round seeds a fresh backlog of JOBS submissions (the
4-dimension spec of bench_worker.py, 200 agents) into each build's database in turn,
VACUUM ANALYZE + CHECKPOINT, enqueues it and starts WORKERS `arbiter worker`
processes; evaluations/s is the round's count over the span from its first
evaluation's start to its last commit (evaluation_results.started_at/completed_at).
Redis is flushed between runs. Each build works off one backlog unmeasured first. The order alternates (A B, B A, A B, ...), so drift
over the run (history growing, other load) falls on both builds alike.

Printed: each run's rate and CPU time per evaluation (the workers', postgres'); per build the median; the ratio of medians and the median
of the per-round ratios (A / B). For a build that has the standings projection, its
workers keep running after the backlog until standings_status() reports nothing
pending (their CPU, the projection's included, is in the figures); printed are the
results it had applied when the backlog was seen done, the time from the round's last
commit until nothing was pending, and `arbiter standings --check` run once then.

Usage: bench_turns.py --bin A=build/worker/arbiter --bin B=/path/old/build/worker/arbiter
                      [--jobs 20000] [--workers 2] [--rounds 3] [--env NAME:VAR=VALUE ...]
--env gives build NAME's workers a setting (e.g. --env A:ARBITER_STANDINGS_APPLY_MS=0
holds its projection off); the same path twice under two names with different settings
compares the settings.
"""
import argparse
import resource
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from services import Services  # noqa: E402
from bench_worker import add_agents, add_challenge, cpu_secs, enqueue, seed, wait_done  # noqa: E402

import psycopg2  # noqa: E402
import redis  # noqa: E402


def has_standings(bin_path, env):
    """True if this build knows `arbiter standings` (the projection of issue 23)."""
    out = subprocess.run([bin_path, "--help"], env=env, capture_output=True, text=True)
    return "standings" in out.stdout + out.stderr


def applied_so_far(db):
    """(results, batches) the standings projection has applied so far."""
    cur = db.cursor()
    cur.execute("SELECT applied_results, applied_batches FROM standings_progress")
    got = cur.fetchone()
    db.commit()
    return got


def children_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def one_run(b, args, r, pg_pid):
    """Seeds, enqueues and works off one backlog with build b; returns (evaluations/s,
    CPU µs per evaluation of the workers, of postgres)."""
    db = b["db"]
    ids = seed(db, args.jobs, b["agents"], b["challenge"], first=b["next"])
    b["next"] += len(ids)
    db.autocommit = True
    db.cursor().execute("VACUUM ANALYZE")
    db.cursor().execute("CHECKPOINT")
    db.autocommit = False
    r.flushall()
    enqueue(r, ids)
    applied0 = applied_so_far(db) if b["standings"] else None
    c_pg, c_w = cpu_secs(pg_pid), children_cpu()
    t_start = time.time()
    ws = [subprocess.Popen([b["bin"], "worker"],
                           env=dict(b["env"], ARBITER_WORKER_ID="bench-%s-%d" % (b["name"], i)),
                           stdout=subprocess.DEVNULL)
          for i in range(args.workers)]
    try:
        if not wait_done(r, db, ids, 600):
            sys.exit("%s: the backlog was not worked off within 600 s" % b["name"])
        if applied0 is not None:
            applied1 = applied_so_far(db)
            # The same workers finish the projection, as a live fleet does: until nothing
            # is pending (standings_status(), cheap; --check recomputes everything, so its
            # own time grows with the history and is not the lag).
            caught_at = None
            while time.time() < t_start + 600:
                cur = db.cursor()
                cur.execute("SELECT pending FROM standings_status()")
                pending = cur.fetchone()[0]
                db.commit()
                if pending == 0:
                    caught_at = time.time()
                    break
                time.sleep(0.01)
    finally:
        for w in ws:
            w.terminate()
        for w in ws:
            w.wait(60)
    # Reaped workers' CPU is in RUSAGE_CHILDREN; postgres' (all backends, autovacuum, WAL,
    # checkpoints, this script's polling) from /proc.
    c_pg, c_w = cpu_secs(pg_pid) - c_pg, children_cpu() - c_w
    cur = db.cursor()
    cur.execute("SELECT extract(epoch from max(completed_at) - min(started_at)), count(*), "
                "extract(epoch from max(completed_at)) FROM evaluation_results "
                "WHERE submission_id = ANY(%s::uuid[])", (ids,))
    span, n, last = cur.fetchone()
    db.commit()
    rate = n / float(span)
    extra = ""
    if b["standings"]:
        ck = subprocess.run([b["bin"], "standings", "--check"], env=b["env"], capture_output=True,
                            text=True)
        extra = ("; projection by the time the backlog was seen done: %d results in %d batches; "
                 "caught up %s after the last commit; standings --check: %s" % (
                     applied1[0] - applied0[0], applied1[1] - applied0[1],
                     "%.2f s" % (caught_at - float(last)) if caught_at else "NOT within 600 s",
                     (ck.stdout.strip().splitlines() or ["no output"])[-1]))
    print("  %s: %d evaluations in %.2f s = %.0f evaluations/s; CPU per evaluation: workers "
          "%.0f µs, postgres %.0f µs%s" % (b["name"], n, float(span), rate, 1e6 * c_w / n,
                                           1e6 * c_pg / n, extra), flush=True)
    return rate, 1e6 * c_w / n, 1e6 * c_pg / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", action="append", required=True,
                    help="NAME=PATH of an arbiter binary; exactly two")
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--env", action="append", default=[], help="NAME:VAR=VALUE for build NAME")
    args = ap.parse_args()
    if len(args.bin) != 2 or any("=" not in x for x in args.bin):
        sys.exit("give exactly two --bin NAME=PATH")
    with Services(pg_settings={"fsync": "on", "synchronous_commit": "on"}) as svc:
        r = redis.Redis.from_url(svc.redis_url)
        builds = []
        for k, spec in enumerate(args.bin):
            name, _, path = spec.partition("=")
            dbname = "bench_%d" % k
            svc.psql("postgres", "CREATE DATABASE %s" % dbname)
            url = "postgresql://postgres@127.0.0.1:%d/%s" % (svc.pg_port, dbname)
            env = dict(os.environ, ARBITER_DATABASE_URL=url, ARBITER_REDIS_URL=svc.redis_url,
                       ARBITER_METRICS_ADDR="", ARBITER_RATE_LIMIT="0",
                       ARBITER_CONCURRENCY="64", ARBITER_LOG_LEVEL="warn")
            for kv in args.env:
                who, _, setting = kv.partition(":")
                if who == name:
                    var, _, val = setting.partition("=")
                    env[var] = val
            subprocess.run([path, "migrate"], env=env, check=True, capture_output=True)
            db = psycopg2.connect(url)
            cur = db.cursor()
            agents = add_agents(cur, 200)
            challenge = add_challenge(cur)
            db.commit()
            builds.append({"name": name, "bin": path, "env": env, "db": db, "agents": agents,
                           "challenge": challenge, "next": 0,
                           "standings": has_standings(path, env) and
                           env.get("ARBITER_STANDINGS_APPLY_MS") != "0"})
        rates = {b["name"]: [] for b in builds}
        cpu = {b["name"]: [] for b in builds}
        # One unmeasured run per build first: a fresh database's first backlog ran at up to
        # twice the CPU per evaluation of the later ones (cold caches, first autovacuum).
        print("warm-up (not counted)", flush=True)
        for b in builds:
            one_run(b, args, r, svc.pg_proc.pid)
        ratios = []
        for rnd in range(args.rounds):
            print("round %d" % (rnd + 1), flush=True)
            order = builds if rnd % 2 == 0 else builds[::-1]
            got = {}
            for b in order:
                got[b["name"]], cw, cp = one_run(b, args, r, svc.pg_proc.pid)
                rates[b["name"]].append(got[b["name"]])
                cpu[b["name"]].append(cw + cp)
            ratios.append(got[builds[0]["name"]] / got[builds[1]["name"]])
        a, b = builds[0]["name"], builds[1]["name"]
        ma, mb = statistics.median(rates[a]), statistics.median(rates[b])
        print("median %s: %.0f evaluations/s; median %s: %.0f evaluations/s" % (a, ma, b, mb))
        print("%s / %s: ratio of medians %.3f; median of per-round ratios %.3f (rounds: %s)" %
              (a, b, ma / mb, statistics.median(ratios),
               " ".join("%.3f" % x for x in ratios)))
        ca, cb = statistics.median(cpu[a]), statistics.median(cpu[b])
        print("CPU per evaluation (workers + postgres), medians: %s %.0f µs, %s %.0f µs: "
              "%s / %s %.3f (steadier than the rates on a busy machine)" % (a, ca, b, cb, b, a,
                                                                           cb / ca))


if __name__ == "__main__":
    main()
