#!/usr/bin/python3
"""The commit path against the database's own ceiling, in one run.

Starts a private redis-server and postgres (fsync on, synchronous_commit on),
migrates, and measures on the same database:

1. strict ceiling (issue #23): pgbench runs test/bench/bench_commit_ceiling.sql, the
   writes the exactly-once contract requires for BATCH evaluations as set-based
   statements and nothing else (lock the agents, submissions and matches in id
   order; insert the results, their dimensions and elo_history rows; update
   the matches, agents and submissions; no standings: the standings trigger is
   disabled while it runs, if the schema has one), CLIENTS clients. The ratio
   pipeline / strict ceiling is the figure the issue's target (>= 0.5) is on.
   And the statements ceiling: pgbench runs the worker's own commit statements (read from
   worker/commit.c: lock the agents, lock the submissions, the set-based
   insert/update of results, dimensions, matches, elo_history and
   submissions, the agents' rows), BATCH evaluations per transaction,
   CLIENTS clients, with prepared statements. The rows it writes are copies
   of rows the worker wrote during a short warm-up run, so they have the
   worker's sizes. Batches take consecutive submissions, as the workers do.
   A warm-up pgbench run, then VACUUM ANALYZE + CHECKPOINT, then the
   measured run: evaluations/s = transactions/s x BATCH.
2. pipeline: a backlog of JOBS submissions (same shapes as the ceiling's)
   worked off by WORKERS `arbiter worker` processes; VACUUM ANALYZE +
   CHECKPOINT before the workers start; evaluations/s from the first
   evaluation's start to the last commit.
3. latency at half the pipeline's rate: jobs offered at that rate for SECS
   seconds (after WARM_SECS of unmeasured jobs at the same rate, so that
   fresh workers are measured in their steady state), p50/p99 of enqueue to
   the commit's write (the result's completed_at, clock_timestamp() of the
   write statement), and of enqueue to the commit becoming visible (its
   completion notification, heard by a LISTEN process of the bench).
4. memory: peak RSS (VmHWM) of each worker.

The latency phase also prints how busy the whole machine was while it ran
(all cores, from /proc/stat) and which processes used that time (postgres,
the workers, redis-server, this bench and its listener): whether the latency
at that rate is queueing for a CPU.

It prints each figure and the ratios pipeline / ceiling (both ceilings). All figures come
from the same machine in the same minute, so their ratio is meaningful even
on a noisy shared machine; the absolute figures are not.

Phases 1 and 2 alternate for ROUNDS rounds (default 3), each on data of its
own; the ratio is taken round by round and its median printed, so that a
burst of load from elsewhere moves one round, not the result.

Usage: bench_commit.py --bin build/worker/arbiter [--bin OTHER ...] [--jobs N]
       [--batch B] [--clients C] [--workers W] [--secs S] [--slices K]
       [--concurrency N] [--rounds R] [--rate R] [--env NAME=V1,V2] [--profile]
Several --bin: each round measures the ceiling once and then every binary's
pipeline (the order rotates); the latency phase runs each binary's fresh
workers in K slices interleaved A B B A ..., at the same offered rate, and
splits the latency into enqueue -> evaluation start (read + load) and
evaluation start -> the commit's write. --env NAME=V1,V2 with the same binary
twice compares two settings the same way.
The latency phase also prints the CPU time per evaluation of the workers and
of their database sessions (read from /proc before the workers stop): on a
shared machine, where wall times move with everyone else's load, CPU per
evaluation is what a change in the commit path moves.
--setup-sql Q runs Q once after the migrations (repeatable).
--profile adds pg_stat_statements and prints the top statements of the last
pipeline round and of the latency phase (calls, mean and total time, rows),
and, for the latency phase, what the workers' database sessions were doing
(idle, running which statement, waiting for which lock or I/O), sampled from
pg_stat_activity every few milliseconds.
"""
import argparse
import glob
import json
import multiprocessing
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from services import Services  # noqa: E402
from bench_worker import Listener, add_agents, add_challenge, count_done, cpu_secs, enqueue, hwm_kb, machine_secs, seed  # noqa: E402  (one copy of these helpers)

import psycopg2  # noqa: E402
import psycopg2.extras  # noqa: E402
import redis  # noqa: E402

SPEC = {
    "evaluator": "deterministic",
    "dimensions": [
        {"key": "correctness", "weight": 0.5, "primitive": "exact_match_ratio",
         "field": "answers", "ground_truth_field": "expected"},
        {"key": "speed", "weight": 0.2, "primitive": "time_decay"},
        {"key": "precision", "weight": 0.15, "primitive": "numeric_tolerance",
         "field": "value", "ground_truth_field": "value", "tolerance": 0.5},
        {"key": "completeness", "weight": 0.15, "primitive": "set_overlap",
         "field": "found", "ground_truth_field": "items", "method": "jaccard"},
    ],
}
GT = {"expected": ["a", "b", "c", "d"], "value": 42, "items": [1, 2, 3, 4, 5]}
AGENTS = 200
STARTED = []     # every worker process started, stopped at exit whatever happens


def commit_sql():
    """The commit's statements, as worker/commit.c spells them."""
    src = open(os.path.join(HERE, "..", "..", "worker", "commit.c")).read()
    out = {}
    for name in ("SQL_LOCK_AGENTS", "SQL_LOCK_SUBS", "SQL_COMPLETE", "SQL_AGENTS"):
        m = re.search(r"static const char %s\[\] =\s*((?:\"(?:[^\"\\]|\\.)*\"\s*)+);" % name, src)
        if not m:
            raise SystemExit("bench_commit: %s not found in worker/commit.c" % name)
        parts = re.findall(r"\"((?:[^\"\\]|\\.)*)\"", m.group(1))
        out[name] = "".join(p.encode().decode("unicode_escape") for p in parts)
    return out



def settle(svc):
    # The standings projection (sql/008) applies what earlier phases committed (the
    # ceilings' pgbench results included) now, unmeasured: otherwise the next measured
    # workers' appliers would, and their catch-up would count as the measured jobs' cost.
    svc.psql(svc.dbname, "DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_proc WHERE proname = "
             "'standings_apply') THEN LOOP EXIT WHEN (SELECT caught_up FROM "
             "standings_apply(100000)); END LOOP; END IF; END $$")
    svc.psql(svc.dbname, "VACUUM ANALYZE")
    svc.psql(svc.dbname, "CHECKPOINT")


def drained(r):
    """Every entry acknowledged (the worker deletes entries once done): a cheap
    check that does not load PostgreSQL while it is being measured."""
    return r.xlen("arbiter:jobs") == 0


def run_workers(args, env, binary, n, ids, db, r, timeout=600):
    """Starts n workers on an enqueued backlog; returns (workers, seconds, evaluations)."""
    ws = [subprocess.Popen([binary, "worker"],
                           env=dict(env, ARBITER_WORKER_ID="bench-%d" % i))
          for i in range(n)]
    STARTED.extend(ws)
    t0 = time.time()
    while not drained(r) or count_done(db, ids) < len(ids):
        if time.time() - t0 > timeout:
            print("pipeline phase timed out")
            break
        time.sleep(0.05)
    cur = db.cursor()
    cur.execute("SELECT extract(epoch from max(r.completed_at) - min(r.started_at)), count(*) "
                "FROM evaluation_results r WHERE r.submission_id = ANY(%s::uuid[])", (ids,))
    span, cnt = cur.fetchone()
    db.commit()
    return ws, float(span or 0), cnt


def stop_workers(ws):
    for w in ws:
        if w.poll() is None:
            w.send_signal(signal.SIGTERM)
    for w in ws:
        try:
            w.wait(40)
        except subprocess.TimeoutExpired:
            w.kill()
            w.wait()


def templates(db):
    """A row the worker wrote: result, evaluation log, dimensions (for the ceiling's rows)."""
    cur = db.cursor()
    cur.execute("SELECT r.result, r.score, r.verified, r.evaluator, r.evaluation_log::text, "
                "jsonb_build_object('score_breakdown', r.score_breakdown, 'submission_warnings', "
                "r.submission_warnings, 'constraint_violations', r.constraint_violations)::text, "
                "(SELECT json_agg(json_build_object('key', d.key, 'score', d.score, 'weight', "
                "d.weight, 'weighted', d.weighted, 'detail', d.detail)) FROM "
                "evaluation_dimensions d WHERE d.result_id = r.id)::text "
                "FROM evaluation_results r ORDER BY r.id DESC LIMIT 1")
    row = cur.fetchone()
    db.commit()
    return {"rs": row[0], "sc": row[1], "vf": row[2], "ev": row[3],
            "log": json.loads(row[4]), "res": json.loads(row[5]), "dims": json.loads(row[6])}


def prepare_batches(db, ids, agents_of, matches_of, batch, tpl, first_batch):
    """One bench_batches row per BATCH consecutive submissions: the parameters the
    worker would send for them."""
    cur = db.cursor()
    rows = []
    for b in range(len(ids) // batch):
        chunk = ids[b * batch:(b + 1) * batch]
        complete, agents = [], {}
        for k, sid in enumerate(chunk):
            ag = agents_of[sid]
            st = int(time.time() * 1000)
            complete.append({"sub": sid, "mat": matches_of[sid], "agent": ag, "job": "%d-0" % k,
                             "ev": tpl["ev"], "sc": tpl["sc"], "rs": tpl["rs"], "vf": tpl["vf"],
                             "res": tpl["res"], "log": tpl["log"], "dims": tpl["dims"],
                             "st": st, "ct": st, "att": 1, "eb": 1000, "ea": 1016, "ec": 16,
                             "k": 32, "opp": 1000, "bonus": 1.0, "ord": k})
            agents[ag] = {"id": ag, "elo": 1016, "mc": 1, "w": 1, "d": 0, "l": 0, "cs": 1,
                          "bs": 1}
        rows.append((first_batch + b, json.dumps(complete),
                     "{" + ",".join(sorted(chunk)) + "}",
                     "{" + ",".join(sorted(set(matches_of[x] for x in chunk))) + "}",
                     "{" + ",".join(sorted(agents)) + "}", json.dumps(list(agents.values()))))
    psycopg2.extras.execute_values(
        cur, "INSERT INTO bench_batches (b, rows, sub_ids, mat_ids, agent_ids, agents) VALUES %s", rows,
        page_size=50)
    db.commit()
    return len(rows)


def pgbench_script(sql):
    """The commit as the worker sends it: two pipelined round trips, the rows as
    parameters (fetched into variables first, outside the transaction)."""
    lock_agents = sql["SQL_LOCK_AGENTS"].replace("$1", ":agent_ids")
    lock_subs = sql["SQL_LOCK_SUBS"].replace("$1", ":sub_ids")
    complete = (sql["SQL_COMPLETE"].replace("$1", ":rows").replace("$2", "'bench'")
                .replace("$3", ":sub_ids"))
    agents = sql["SQL_AGENTS"].replace("$1", ":agents")
    return "\n".join([
        "SELECT rows, sub_ids, agent_ids, agents FROM bench_batches "
        "WHERE b = (SELECT nextval('bench_batch_seq')) \\gset",
        "\\startpipeline", "BEGIN;", lock_agents + ";", lock_subs + ";", "\\endpipeline",
        "\\startpipeline", complete + ";", agents + ";", "COMMIT;", "\\endpipeline", ""])


STRICT_SCRIPT = os.path.join(HERE, "bench_commit_ceiling.sql")


def standings_trigger(svc, on):
    """Enables or disables the standings trigger on evaluation_results, if it exists."""
    svc.psql(svc.dbname, "DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = "
             "'evaluation_results_standings') THEN EXECUTE 'ALTER TABLE evaluation_results %s "
             "TRIGGER evaluation_results_standings'; END IF; END $$" % ("ENABLE" if on else "DISABLE"))


def pgbench(svc, script, clients, txs, mode):
    exe = sorted(glob.glob("/usr/lib/postgresql/*/bin/pgbench"),
                 key=lambda p: int(p.split("/")[4]))[-1]
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(script)
    try:
        p = subprocess.run([exe, "-n", "-M", mode, "-c", str(clients), "-j", str(clients),
                            "-t", str(txs), "-f", f.name, svc.database_url],
                           capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    if p.returncode != 0:
        raise SystemExit("pgbench failed:\n" + p.stdout + p.stderr)
    m = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", p.stdout)
    return float(m.group(1))


# Latency phase: fresh workers get this many seconds of jobs at the same rate before the
# measured ones. Their first commits prepare statements and plan the standings trigger's
# statements on every new session: measured from their first job, a slice's first
# quarter-second had its worst latencies and weighed on its p99.
WARM_SECS = 1.0


def latency_slice(args, svc, env, binary, db, r, agents, challenge, first, rate):
    """One binary's workers, fresh, offered `rate` jobs/s for WARM_SECS (not measured), then,
    without a break, for SECS/SLICES seconds (measured).
    Returns (n submissions seeded, offered rate, [(total, queue+load, evaluation+commit) ms],
    CPU seconds of the workers and of their database sessions from the first measured job
    on)."""
    total = max(1, int(rate * args.secs / args.slices))
    warm = int(rate * WARM_SECS)
    ids = seed(db, warm + total, agents, challenge, first=first)
    settle(svc)
    ws = [subprocess.Popen([binary, "worker"], env=dict(env, ARBITER_WORKER_ID="lat-%d" % i))
          for i in range(args.workers)]
    STARTED.extend(ws)
    lis = Listener(svc.database_url)
    time.sleep(1.0)       # connected, group read, statements prepared
    sent = {}
    start = time.time()
    for k, sid in enumerate(ids):
        delay = start + k / rate - time.time()
        if delay > 0:
            time.sleep(delay)
        now = time.time()
        r.xadd("arbiter:jobs", {"submission_id": sid, "enqueued_at": str(int(now * 1000))})
        if k == warm:
            measured_from = now
            wcpu0 = sum(cpu_secs(w.pid, children=False) for w in ws)
            bcpu0 = sessions_cpu(db)
            mach0 = machine_cpu()
        if k >= warm:
            sent[sid] = now
    offered = total / (time.time() - measured_from)
    t1 = time.time()
    while (not drained(r) or count_done(db, ids) < len(ids)) and time.time() - t1 < 120:
        time.sleep(0.05)
    # From the first measured job to the last commit: the measured jobs' work, and the
    # warm-up's tail (about as much as the measured jobs' own tail is left out).
    wcpu = sum(cpu_secs(w.pid, children=False) for w in ws) - wcpu0
    bcpu = sessions_cpu(db) - bcpu0
    mach = {k: v - mach0.get(k, 0.0) for k, v in machine_cpu().items()}
    stop_workers(ws)
    heard = lis.heard()
    cur = db.cursor()
    cur.execute("SELECT submission_id::text, extract(epoch from started_at), "
                "extract(epoch from completed_at) FROM evaluation_results "
                "WHERE submission_id = ANY(%s::uuid[])", (ids[warm:],))
    out = [((float(c) - sent[s]) * 1000, (float(st) - sent[s]) * 1000,
            (float(c) - float(st)) * 1000,
            (heard[s] - sent[s]) * 1000 if s in heard else float("nan"))
           for s, st, c in cur.fetchall()]
    db.commit()
    return len(ids), offered, out, wcpu, bcpu, total, mach


def machine_cpu():
    """CPU seconds used so far on the whole machine, by kind of process: the keys are
    'busy' and 'all' (all cores' busy and total time, from /proc/stat) and one per process
    name (postgres, redis-server, arbiter, python3 (this bench and its listener), other),
    summed over the processes alive now. The difference of two calls is what each used in
    between, as long as no process of a kind ended in between (the latency phase's
    workers, servers and listener all outlive its measured window)."""
    tick = float(os.sysconf("SC_CLK_TCK"))
    total, idle = machine_secs()
    out = {"all": total, "busy": total - idle}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                head, rest = f.read().rsplit(")", 1)
        except OSError:
            continue
        name = head.split("(", 1)[1]
        name = name if name in ("postgres", "redis-server", "arbiter", "python3") else "other"
        st = rest.split()
        out[name] = out.get(name, 0.0) + (int(st[11]) + int(st[12])) / tick
    return out


def sessions_cpu(db):
    """CPU seconds the workers' live database sessions (application_name arbiter) used so far:
    the database's work for them, without the bench's own queries, autovacuum or the WAL
    writer."""
    cur = db.cursor()
    cur.execute("SELECT pid FROM pg_stat_activity WHERE application_name = 'arbiter'")
    pids = [p for (p,) in cur.fetchall()]
    db.commit()
    tick, t = os.sysconf("SC_CLK_TCK"), 0
    for p in pids:
        try:
            with open("/proc/%d/stat" % p) as f:
                st = f.read().rsplit(")", 1)[1].split()
            t += int(st[11]) + int(st[12])
        except OSError:
            pass
    return t / float(tick)


def top_statements(cur, when):
    """Prints pg_stat_statements' top statements (--profile)."""
    cur.execute("SELECT calls, round(mean_exec_time::numeric, 3), "
                "round(total_exec_time::numeric, 1), plans, round(mean_plan_time::numeric, 3), "
                "rows, left(regexp_replace(query, "
                "'\\s+', ' ', 'g'), 90) FROM pg_stat_statements WHERE dbid = "
                "(SELECT oid FROM pg_database WHERE datname = current_database()) "
                "ORDER BY total_exec_time + total_plan_time DESC LIMIT 12")
    print("top statements of %s (calls, mean ms, total ms, plans made, mean planning ms, "
          "rows, query):" % when)
    for row in cur.fetchall():
        print("  %8d %8s %9s %8d %7s %8d  %s" % row)
    cur.connection.commit()


class WaitSampler:
    """--profile, latency phase: samples what the workers' database sessions are doing
    (pg_stat_activity: idle, running, or waiting for what) from a thread of its own."""
    EVERY_MS = 5

    def __init__(self, url):
        self.db = psycopg2.connect(url)
        self.db.autocommit = True
        self.seen = {}
        self.samples = 0
        self.done = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        cur = self.db.cursor()
        while not self.done.wait(self.EVERY_MS / 1000.0):
            cur.execute("SELECT state, wait_event_type, wait_event, "
                        "CASE WHEN state = 'active' THEN left(regexp_replace(query, '\\s+', ' ', "
                        "'g'), 40) END FROM pg_stat_activity WHERE application_name = 'arbiter'")
            self.samples += 1
            for st, wt, we, q in cur.fetchall():
                key = "%s %s%s" % (st, "%s:%s" % (wt, we) if wt else "running",
                                   " [%s]" % q if q else "")
                self.seen[key] = self.seen.get(key, 0) + 1

    def stop(self):
        self.done.set()
        self.t.join()
        self.db.close()


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, action="append",
                    help="arbiter binary; repeat to compare binaries in one run (interleaved)")
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--secs", type=int, default=10)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--env", action="append", default=[],
                    help="NAME=VALUE for the workers; NAME=V1,V2 with one --bin per value "
                         "compares settings (the n-th --bin gets the n-th value; an empty "
                         "value leaves NAME unset)")
    ap.add_argument("--slices", type=int, default=2,
                    help="latency phase: slices per binary, SECS/SLICES seconds each, in the "
                         "order A B .. B A A B ..")
    ap.add_argument("--rate", type=float, default=0,
                    help="latency phase: jobs/s offered (default: half the first binary's rate)")
    ap.add_argument("--mode", default="prepared", help="pgbench query mode")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--setup-sql", action="append", default=[],
                    help="SQL run once after the migrations (e.g. \"ALTER TABLE submissions "
                         "DISABLE TRIGGER USER\" to measure without sql/009's counting trigger)")
    args = ap.parse_args()
    bins = args.bin
    pg = {"fsync": "on", "synchronous_commit": "on"}
    if args.profile:
        pg.update({"shared_preload_libraries": "pg_stat_statements",
                   "pg_stat_statements.track": "all",
                   "pg_stat_statements.track_planning": "on"})
    with Services(pg_settings=pg) as svc:
        try:
            base_env = dict(os.environ, ARBITER_DATABASE_URL=svc.database_url,
                            ARBITER_REDIS_URL=svc.redis_url, ARBITER_METRICS_ADDR="",
                            ARBITER_RATE_LIMIT="0", ARBITER_CONCURRENCY=str(args.concurrency),
                            ARBITER_BATCH_MAX=str(args.batch), ARBITER_LOG_LEVEL="warn",
                            # The ceiling's submissions are queued in PostgreSQL and never in
                            # Redis: the reconciler must not hand them to the workers.
                            ARBITER_RECONCILE_MS="86400000")
            envs = []
            for i in range(len(bins)):
                e = dict(base_env)
                for kv in args.env:
                    name, _, vals = kv.partition("=")
                    vals = vals.split(",")
                    e[name] = vals[min(i, len(vals) - 1)]
                    if not e[name]:
                        del e[name]         # an empty value: not set at all
                envs.append(e)
            label = ["%s %s%s" % ("ABCDEFGH"[i % 8], b, "".join(" %s=%s" % (kv.partition("=")[0],
                                                      envs[i].get(kv.partition("=")[0], ""))
                                          for kv in args.env if "," in kv))
                     for i, b in enumerate(bins)]
            subprocess.run([bins[0], "migrate"], env=envs[0], check=True, capture_output=True)
            for q in args.setup_sql:
                svc.psql(svc.dbname, q)
            db = psycopg2.connect(svc.database_url)
            r = redis.Redis.from_url(svc.redis_url)
            cur = db.cursor()
            agents = add_agents(cur, AGENTS)
            challenge = add_challenge(cur, SPEC, GT)
            cur.execute("CREATE TABLE bench_batches (b int PRIMARY KEY, rows text, sub_ids text, "
                        "mat_ids text, agent_ids text, agents text)")
            cur.execute("CREATE SEQUENCE bench_batch_seq")
            db.commit()

            # Warm-up of the worker (and the rows the ceiling copies).
            warm = seed(db, 2 * args.batch * args.workers, agents, challenge)
            enqueue(r, warm)
            ws, _, _ = run_workers(args, envs[0], bins[0], args.workers, warm, db, r)
            stop_workers(ws)
            tpl = templates(db)

            script = pgbench_script(commit_sql())
            strict_script = open(STRICT_SCRIPT).read()
            next_sub = len(warm)
            nbatch = 1
            ratios = [[] for _ in bins]
            strict_ratios = [[] for _ in bins]
            rates = [[] for _ in bins]
            rss = [0 for _ in bins]
            for rnd in range(args.rounds):
                # 1. Ceilings, each on its own submissions: the strict one (the contract's
                # writes only), then the worker's own statements.
                per_client_warm = 10 if rnd else 20
                per_client = args.jobs // (args.batch * args.clients)
                n_warm = per_client_warm * args.clients * args.batch
                n_meas = per_client * args.clients * args.batch
                found = {}
                for kind, scr in (("strict", strict_script), ("statements", script)):
                    ids = seed(db, n_warm + n_meas, agents, challenge, first=next_sub)
                    next_sub += len(ids)
                    cur.execute("SELECT id::text, agent_id::text, match_id::text FROM submissions "
                                "WHERE id = ANY(%s::uuid[])", (ids,))
                    info = {x: (a_, m_) for x, a_, m_ in cur.fetchall()}
                    db.commit()
                    nbatch += prepare_batches(db, ids, {x: info[x][0] for x in ids},
                                              {x: info[x][1] for x in ids}, args.batch, tpl, nbatch)
                    if kind == "strict":
                        standings_trigger(svc, False)
                    try:
                        pgbench(svc, scr, args.clients, per_client_warm, args.mode)
                        settle(svc)
                        tps = pgbench(svc, scr, args.clients, per_client, args.mode)
                    finally:
                        if kind == "strict":
                            standings_trigger(svc, True)
                    found[kind] = tps * args.batch
                    print("round %d %s ceiling: pgbench, %s, %d evaluations/transaction, "
                          "%d clients: %.0f transactions/s = %.0f evaluations/s"
                          % (rnd + 1, kind, "the contract's writes set-based "
                             "(test/bench/bench_commit_ceiling.sql)" if kind == "strict"
                             else "the commit's statements", args.batch, args.clients, tps,
                             found[kind]))
                ceiling, strict = found["statements"], found["strict"]

                # 2. Pipeline, on a backlog of its own, each binary in turn (the order
                # rotates from round to round).
                order = list(range(len(bins)))
                order = order[rnd % len(bins):] + order[:rnd % len(bins)]
                for bi in order:
                    ids = seed(db, args.jobs, agents, challenge, first=next_sub)
                    next_sub += len(ids)
                    enqueue(r, ids)
                    settle(svc)
                    if args.profile and rnd == args.rounds - 1:
                        svc.psql(svc.dbname, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                        svc.psql(svc.dbname, "SELECT pg_stat_statements_reset()")
                    ws, span, n = run_workers(args, envs[bi], bins[bi], args.workers, ids, db, r)
                    rss[bi] = max([rss[bi]] + [hwm_kb(w.pid) for w in ws])
                    stop_workers(ws)
                    rate = n / span if span > 0 else 0
                    print("round %d pipeline: %s: %d evaluations by %d workers (concurrency %d, "
                          "batch %d) in %.2f s = %.0f evaluations/s; ratio %.2f of the statements "
                          "ceiling, %.2f of the strict ceiling"
                          % (rnd + 1, label[bi], n, args.workers,
                             int(envs[bi]["ARBITER_CONCURRENCY"]),
                             int(envs[bi]["ARBITER_BATCH_MAX"]),
                             span, rate, rate / ceiling if ceiling else 0,
                             rate / strict if strict else 0))
                    strict_ratios[bi].append(rate / strict if strict else 0)
                    ratios[bi].append(rate / ceiling if ceiling else 0)
                    rates[bi].append(rate)
            med = lambda v: sorted(v)[len(v) // 2]  # noqa: E731
            for bi in range(len(bins)):
                print("ratio pipeline / ceiling: %s: median %.2f (rounds: %s)"
                      % (label[bi], med(ratios[bi]), " ".join("%.2f" % x for x in ratios[bi])))
                print("ratio pipeline / strict ceiling: %s: median %.2f (rounds: %s)"
                      % (label[bi], med(strict_ratios[bi]),
                         " ".join("%.2f" % x for x in strict_ratios[bi])))
            if args.profile:
                top_statements(cur, "the last pipeline round")

            # 3. Latency at half the (first binary's) pipeline rate: each binary's fresh
            # workers for SECS/SLICES seconds, SLICES times, in the order A B .. B A A B ..
            rate = args.rate or max(1.0, med(rates[0]) / 2)
            sampler = None
            if args.profile:
                svc.psql(svc.dbname, "SELECT pg_stat_statements_reset()")
                sampler = WaitSampler(svc.database_url)
            lat = [[] for _ in bins]
            offered = [[] for _ in bins]
            cpu = [[0.0, 0.0, 0] for _ in bins]
            mcpu = [{} for _ in bins]
            seq = []
            for k in range(args.slices):
                seq += list(range(len(bins)))[::(-1 if k % 2 else 1)]
            for bi in seq:
                n, off, out, wcpu, bcpu, nmeas, mach = latency_slice(
                    args, svc, envs[bi], bins[bi], db, r, agents, challenge, next_sub, rate)
                for k, v in mach.items():
                    mcpu[bi][k] = mcpu[bi].get(k, 0.0) + v
                cpu[bi][0] += wcpu
                cpu[bi][1] += bcpu
                cpu[bi][2] += nmeas
                next_sub += n
                lat[bi].extend(out)
                offered[bi].append(off)
            if sampler:
                sampler.stop()
                print("latency phase, the workers' database sessions sampled every %d ms "
                      "(%d samples): share of sessions by state / wait event:"
                      % (WaitSampler.EVERY_MS, sampler.samples))
                total = sum(sampler.seen.values()) or 1
                for (what, n) in sorted(sampler.seen.items(), key=lambda x: -x[1])[:12]:
                    print("  %5.1f%%  %s" % (100.0 * n / total, what))
                top_statements(cur, "latency phase")
            for bi in range(len(bins)):
                tot = [x[0] for x in lat[bi]]
                ql = [x[1] for x in lat[bi]]
                ec = [x[2] for x in lat[bi]]
                print("latency at %.0f jobs/s offered (%s): %s: n=%d p50=%.1f ms p99=%.1f ms "
                      "max=%.1f ms; enqueue->evaluation start p50=%.1f p99=%.1f; "
                      "evaluation start->commit's write p50=%.1f p99=%.1f"
                      % (sum(offered[bi]) / len(offered[bi]),
                         "--rate" if args.rate else "half the pipeline's rate", label[bi],
                         len(tot), pct(tot, 0.5), pct(tot, 0.99), max(tot) if tot else 0,
                         pct(ql, 0.5), pct(ql, 0.99), pct(ec, 0.5), pct(ec, 0.99)))
                nt = [x[3] for x in lat[bi] if x[3] == x[3]]
                if nt:
                    print("  enqueue->commit heard (its notification, as an API server hears "
                          "it): %s: n=%d p50=%.1f ms p90=%.1f ms p99=%.1f ms max=%.1f ms"
                          % (label[bi], len(nt), pct(nt, 0.5), pct(nt, 0.9), pct(nt, 0.99),
                             max(nt)))
                if tot:
                    print("  CPU per evaluation at that rate: %s: workers %.0f us, their database "
                          "sessions %.0f us" % (label[bi], 1e6 * cpu[bi][0] / cpu[bi][2],
                                                1e6 * cpu[bi][1] / cpu[bi][2]))
                m = mcpu[bi]
                if m.get("all"):
                    print("  the machine meanwhile: %s: %.0f%% of its %d cores busy; of that, "
                          "%s" % (label[bi], 100.0 * m["busy"] / m["all"], os.cpu_count(),
                                  ", ".join("%s %.0f%%" % (k, 100.0 * m[k] / m["busy"])
                                            for k in ("postgres", "arbiter", "redis-server",
                                                      "python3", "other") if k in m)))

            # 4. Memory.
            for bi in range(len(bins)):
                print("peak RSS (VmHWM) of a worker on the backlog: %s: %.1f MB"
                      % (label[bi], rss[bi] / 1024))
        finally:
            stop_workers(STARTED)   # before the servers go
    return 0


if __name__ == "__main__":
    sys.exit(main())
