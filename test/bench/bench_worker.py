#!/usr/bin/python3
"""Worker throughput, latency and memory benchmark (issue 3's targets).

Starts a private redis-server and postgres (durable settings: fsync on,
synchronous_commit on), migrates, and runs three phases with two
`arbiter worker` processes on this machine:

1. throughput: a preloaded backlog of N deterministic submissions (default
   20,000, a 4-dimension spec, 200 agents); evaluations/s committed from
   worker start to the last commit.
2. latency: jobs offered at a fixed rate (default 500/s for 20 s); p50/p99
   of enqueue to the commit's write (evaluation_results.completed_at) and of enqueue
   to the commit becoming visible (its completion notification heard by a LISTEN
   session of the bench, as an API server would hear it).
3. memory: peak resident set (VmHWM) of each worker process, which ran with
   ARBITER_CONCURRENCY=64 throughout.
4. standings overhead (issues 12, 23): the throughput phase again, alternating
   rounds with the standings projection (sql/008) held off and applying, same
   workers, same machine, off/on/off/.../on/off. "off": this script holds the
   projection's lease (the progress row, FOR UPDATE) for the round, so every
   worker's batch finds it busy; after the round it lets go and waits, unmeasured,
   until the workers have applied that round's results, so the next round starts
   caught up. "on": the workers apply as they commit; the round ends when the
   last job is committed, and the time until the projection has caught up after
   that last commit is printed too. Prints both figures and the ratio, each
   "on" round against the mean of the "off" rounds around it (the cost per
   evaluation grows with the history during a run, so "on" rounds that
   simply followed "off" ones looked dearer), and the CPU time postgres
   (all its backends but this script's, which polls for completion) and the
   workers spent per evaluation in each round (and how much of postgres'
   was the workers' own connections, i.e. not autovacuum, WAL or checkpoints):
   on a shared machine the CPU cost is steadier than the throughput; and
   the mean number of evaluations per commit transaction (the trigger's cost
   per evaluation falls with it) and the WAL written per evaluation. The standings
   are rebuilt afterwards (`arbiter standings --rebuild`) and checked.

After phase 1 (standings on, the default), the time from the last commit of the
backlog until `arbiter standings --check` first reports no difference is printed
(issue 23's target: 2 s).

Usage: bench_worker.py --bin build/worker/arbiter [--jobs N] [--rate R] [--secs S]
                       [--standings-rounds R] [--standings-jobs N]
"""
import argparse
import json
import multiprocessing
import os
import select
import signal
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from services import Services  # noqa: E402

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


def seed(db, n, agents, challenge, first=0):
    """Inserts n matches + queued submissions; submission k plays agent (first + k) % len(agents).
    Returns the submission ids in order."""
    cur = db.cursor()
    rows_m, rows_s, ids = [], [], []
    now = time.time()
    for k in range(n):
        i = first + k
        mid, sid = str(uuid.uuid4()), str(uuid.uuid4())
        agent = agents[i % len(agents)]
        rows_m.append((mid, agent, challenge, now - 30, now + 3600))
        ans = {"answers": ["a", "b", "x" if i % 3 else "c", "d"], "value": 42 + (i % 5) * 0.2,
               "found": [1, 2, 3 + i % 4]}
        rows_s.append((sid, mid, agent, "10.%d.%d.%d" % (i % 250, (i // 250) % 250, i % 7 + 1),
                       json.dumps(ans), now - 10))
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


def enqueue(r, ids):
    pipe = r.pipeline(transaction=False)
    for k, sid in enumerate(ids):
        pipe.xadd("arbiter:jobs", {"submission_id": sid,
                                   "enqueued_at": str(int(time.time() * 1000))})
        if k % 1000 == 999:
            pipe.execute()
    pipe.execute()


POLL_SQL = ("/* bench poll */ SELECT u.id::text FROM unnest(%s::uuid[]) AS u(id) WHERE NOT EXISTS "
            "(SELECT 1 FROM submissions s WHERE s.id = u.id "
            "AND s.status IN ('completed','rejected','failed'))")


def pending_ids(db, ids):
    """The ids of `ids` whose submission is not final yet, by one index probe each: a
    count over `id = ANY(...)` is planned as a scan of the whole submissions table, which
    took 15-35 ms per poll of 8,000 ids here, growing with the history, on the CPU the
    benchmarks measure."""
    if not ids:
        return []
    cur = db.cursor()
    cur.execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; "
                "SET LOCAL enable_hashjoin = off; SET LOCAL max_parallel_workers_per_gather = 0")
    cur.execute(POLL_SQL, (list(ids),))
    left = [row[0] for row in cur.fetchall()]
    db.commit()
    return left


def add_agents(cur, n):
    """Inserts n agents (agent-0 ...); returns their ids."""
    agents = [str(uuid.uuid4()) for _ in range(n)]
    psycopg2.extras.execute_values(cur, "INSERT INTO agents (id, name) VALUES %s",
                                   [(a, "agent-%d" % i) for i, a in enumerate(agents)])
    return agents


def add_challenge(cur, spec=None, gt=None, slug="bench"):
    """Inserts a challenge (default: the 4-dimension SPEC and its GT); returns its id."""
    challenge = str(uuid.uuid4())
    cur.execute("INSERT INTO challenges (id, slug, difficulty, scoring_spec, ground_truth, "
                "time_limit_secs) VALUES (%s,%s,'contender',%s,%s,300)",
                (challenge, slug, json.dumps(spec or SPEC), json.dumps(gt or GT)))
    return challenge


def count_done(db, ids):
    """How many of `ids` are final (completed, rejected or failed)."""
    return len(ids) - len(pending_ids(db, ids))


def wait_done(r, db, ids, timeout=600, stream="arbiter:jobs"):
    """Waits until every id is final; True if they all are within `timeout` seconds. Polls
    Redis until the stream is empty (the worker deletes an entry once it is done; `r` None
    skips this), then PostgreSQL for the ids not yet seen final only, so the polling
    hardly loads the database being measured."""
    t0 = time.time()
    while r is not None and r.xlen(stream) > 0:
        if time.time() - t0 > timeout:
            return False
        time.sleep(0.02)
    left = list(ids)
    while True:
        left = pending_ids(db, left)
        if not left:
            return True
        if time.time() - t0 > timeout:
            return False
        time.sleep(0.05)


def status_kb(pid, field):
    """A kB field of /proc/PID/status ("VmHWM", "VmRSS"); 0 once the process is gone."""
    try:
        for line in open("/proc/%d/status" % pid):
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def hwm_kb(pid):
    return status_kb(pid, "VmHWM")


def pg_backends_cpu(pid, exclude=()):
    """CPU time (s) of the postmaster pid's live client backends (not those in exclude):
    the connections' own work, without autovacuum, the WAL writer, the checkpointer and
    the reaped processes that cpu_secs() adds."""
    tick, t = os.sysconf("SC_CLK_TCK"), 0
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) in exclude:
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read().rsplit(")", 1)[1].split()
            with open("/proc/%s/cmdline" % d, "rb") as f:
                title = f.read()
        except OSError:
            continue
        if int(st[1]) == pid and b"(" in title:   # "postgres: user db 127.0.0.1(port) ..."
            t += int(st[11]) + int(st[12])
    return t / float(tick)


def machine_secs():
    """The whole machine's CPU time so far, all cores (/proc/stat), in core-seconds:
    (total, idle + iowait)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    tick = float(os.sysconf("SC_CLK_TCK"))
    return sum(v[:8]) / tick, (v[3] + v[4]) / tick


def cpu_secs(pid, children=True, exclude=()):
    """CPU time (user + system, s) of process pid; with children, also of its live
    children (but those in exclude) and of those it has reaped (for the postmaster:
    every backend)."""
    tick = os.sysconf("SC_CLK_TCK")

    def stat(p):
        try:
            with open("/proc/%d/stat" % p) as f:
                return f.read().rsplit(")", 1)[1].split()
        except OSError:
            return None
    st = stat(pid)
    if st is None:
        return 0.0
    t = int(st[11]) + int(st[12]) + (int(st[13]) + int(st[14]) if children else 0)
    if children:
        for d in os.listdir("/proc"):
            if d.isdigit():
                c = stat(int(d))
                if c is not None and int(c[1]) == pid and int(d) not in exclude:
                    t += int(c[11]) + int(c[12])
    return t / float(tick)


def listen_main(url, ready, stop, out):
    """Child process of Listener: LISTENs on the workers' completion channel and sends back
    {submission id: time the notification arrived}."""
    db = psycopg2.connect(url)
    db.autocommit = True
    db.cursor().execute("LISTEN arbiter_results")
    ready.set()
    heard = {}
    while not stop.is_set():
        if select.select([db], [], [], 0.05)[0]:
            db.poll()
            now = time.time()
            for n in db.notifies:
                try:
                    heard.setdefault(json.loads(n.payload)["submission_id"], now)
                except (ValueError, KeyError):
                    pass
            del db.notifies[:]
    out.send(heard)
    db.close()


class Listener:
    """When each submission's commit became visible: the notification the commit sends
    (README "Reading results"), heard as an API server would hear it. A process of its own,
    so that the generator's thread and Python's GIL do not delay what it notes."""

    def __init__(self, url):
        ctx = multiprocessing.get_context("spawn")
        self.ready, self.stop = ctx.Event(), ctx.Event()
        self.rx, tx = ctx.Pipe(duplex=False)
        self.p = ctx.Process(target=listen_main, args=(url, self.ready, self.stop, tx),
                             daemon=True)
        self.p.start()
        if not self.ready.wait(30):
            raise SystemExit("bench: the LISTEN process did not start")

    def heard(self):
        """Stops listening; returns {submission id: seconds since the epoch}."""
        self.stop.set()
        got = self.rx.recv() if self.rx.poll(60) else {}
        self.p.join(10)
        return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--rate", type=int, default=500)
    ap.add_argument("--secs", type=int, default=20)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--standings-rounds", type=int, default=3,
                    help="rounds of each kind in phase 4 (0 skips it)")
    ap.add_argument("--standings-jobs", type=int, default=10000, help="jobs per round in phase 4")
    ap.add_argument("--skip-latency", action="store_true", help="skip phase 2")
    args = ap.parse_args()
    with Services(pg_settings={"fsync": "on", "synchronous_commit": "on"}) as svc:
        env = dict(os.environ, ARBITER_DATABASE_URL=svc.database_url,
                   ARBITER_REDIS_URL=svc.redis_url, ARBITER_METRICS_ADDR="",
                   ARBITER_RATE_LIMIT="0", ARBITER_CONCURRENCY="64", ARBITER_LOG_LEVEL="warn")
        subprocess.run([args.bin, "migrate"], env=env, check=True, capture_output=True)
        db = psycopg2.connect(svc.database_url)
        r = redis.Redis.from_url(svc.redis_url)
        cur = db.cursor()
        agents = add_agents(cur, 200)
        challenge = add_challenge(cur)
        db.commit()

        # Phase 1: preloaded backlog.
        ids = seed(db, args.jobs, agents, challenge)
        enqueue(r, ids)
        workers = [subprocess.Popen([args.bin, "worker"],
                                    env=dict(env, ARBITER_WORKER_ID="bench-%d" % i))
                   for i in range(args.workers)]
        t0 = time.time()
        if not wait_done(r, db, ids, 600):
            print("throughput phase timed out")
        cur.execute("SELECT extract(epoch from max(completed_at) - min(started_at)), count(*) "
                    "FROM evaluation_results")
        span, n = cur.fetchone()
        db.commit()
        wall = time.time() - t0
        print("throughput: %d evaluations committed in %.2f s (first start to last commit "
              "%.2f s) = %.0f evaluations/s" % (n, wall, float(span), n / float(span)))
        cur.execute("SELECT extract(epoch from max(completed_at)) FROM evaluation_results")
        last = float(cur.fetchone()[0])
        db.commit()
        clean = None
        while time.time() < last + 120:
            ck = subprocess.run([args.bin, "standings", "--check"], env=env, capture_output=True,
                                text=True)
            if ck.returncode == 0 and "0 differences" in ck.stdout:
                clean = time.time() - last
                break
            time.sleep(0.02)
        print("standings --check clean %s after the last commit of the backlog" %
              ("%.2f s" % clean if clean is not None else "not within 120 s"))

        # Phase 2: fixed offered rate.
        total = 0 if args.skip_latency else args.rate * args.secs
        ids2 = seed(db, total, agents, challenge)
        lis = Listener(svc.database_url) if total else None
        sent = {}
        start = time.time()
        for k, sid in enumerate(ids2):
            due = start + k / args.rate
            delay = due - time.time()
            if delay > 0:
                time.sleep(delay)
            now = time.time()
            r.xadd("arbiter:jobs", {"submission_id": sid, "enqueued_at": str(int(now * 1000))})
            sent[sid] = now
        offered = total / (time.time() - start)
        wait_done(r, db, ids2, 120)
        heard = lis.heard() if lis else {}
        cur.execute("SELECT submission_id::text, extract(epoch from completed_at) FROM "
                    "evaluation_results WHERE submission_id = ANY(%s::uuid[])", (ids2,))
        lat = sorted((float(c) - sent[s]) * 1000 for s, c in cur.fetchall())
        db.commit()
        if lat and not args.skip_latency:
            p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]  # noqa: E731
            print("latency at %.0f jobs/s offered, enqueue -> the commit's write (completed_at): "
                  "n=%d p50=%.1f ms p99=%.1f ms max=%.1f ms" %
                  (offered, len(lat), p(0.5), p(0.99), lat[-1]))
            vis = sorted((heard[s] - sent[s]) * 1000 for s in sent if s in heard)
            q = lambda v, x: v[min(len(v) - 1, int(x * len(v)))] if v else float("nan")  # noqa: E731
            print("latency at %.0f jobs/s offered, enqueue -> commit visible (its notification "
                  "heard by a LISTEN session, as an API server would): n=%d p50=%.1f ms "
                  "p99=%.1f ms max=%.1f ms" % (offered, len(vis), q(vis, 0.5), q(vis, 0.99),
                                               vis[-1] if vis else float("nan")))

        # Phase 4: standings overhead, alternating rounds (off, on, off, on, ...).
        cur.execute("SELECT pg_backend_pid()")   # this script's backend: polls, not counted
        poller = cur.fetchone()[0]
        db.commit()
        rates = {"off": [], "on": []}
        cpu = {"off": [], "on": []}
        cpu_be = {"off": [], "on": []}
        # off, on, off, on, ..., off: each "on" round is compared with the "off" rounds on
        # either side (the cost per evaluation grows with the history during the run).
        order = [(rnd, mode) for rnd in range(args.standings_rounds) for mode in ("off", "on")]
        lease = psycopg2.connect(svc.database_url)   # holds the projection's lease in "off" rounds
        lc = lease.cursor()
        catchup = []

        def caught_up(timeout=120):
            """Waits until the projection has applied every committed result; returns when."""
            end = time.time() + timeout
            while time.time() < end:
                cur.execute("SELECT pending FROM standings_status()")
                left = cur.fetchone()[0]
                db.commit()
                if left == 0:
                    return time.time()
                time.sleep(0.01)
            return None
        for rnd, mode in order + ([(args.standings_rounds, "off")] if args.standings_rounds else []):
            ids4 = seed(db, args.standings_jobs, agents, challenge)
            if mode == "off":
                lc.execute("SELECT 1 FROM standings_progress FOR UPDATE")
            c_pg = cpu_secs(svc.pg_proc.pid, exclude=(poller,))
            c_be = pg_backends_cpu(svc.pg_proc.pid, exclude=(poller,))
            c_w = sum(cpu_secs(w.pid, False) for w in workers)
            cur.execute("SELECT pg_current_wal_lsn()")
            wal0 = cur.fetchone()[0]
            db.commit()
            t4 = time.time()
            enqueue(r, ids4)
            wait_done(r, db, ids4, 600)
            # (one commit transaction per xmin: the mean number of results it inserted)
            cur.execute("SELECT extract(epoch from max(completed_at) - min(started_at)), count(*), "
                        "count(*)::float / count(DISTINCT xmin::text) "
                        "FROM evaluation_results WHERE submission_id = ANY(%s::uuid[])", (ids4,))
            span4, n4, per_commit = cur.fetchone()
            cur.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", (wal0,))
            wal = float(cur.fetchone()[0])
            cur.execute("SELECT extract(epoch from max(completed_at)) FROM evaluation_results "
                        "WHERE submission_id = ANY(%s::uuid[])", (ids4,))
            last4 = float(cur.fetchone()[0])
            db.commit()
            if mode == "on":
                t_caught = caught_up()
                catchup.append(t_caught - last4 if t_caught else float("inf"))
            c_pg = cpu_secs(svc.pg_proc.pid, exclude=(poller,)) - c_pg
            c_be = pg_backends_cpu(svc.pg_proc.pid, exclude=(poller,)) - c_be
            c_w = sum(cpu_secs(w.pid, False) for w in workers) - c_w
            rates[mode].append(n4 / float(span4))
            cpu[mode].append(c_pg * 1e6 / n4)
            cpu_be[mode].append(c_be * 1e6 / n4)
            print("standings %-3s round %d: %d evaluations, %.0f evaluations/s; CPU per "
                  "evaluation: postgres %.0f us (the workers' connections %.0f), workers %.0f us; "
                  "%.1f evaluations per commit, %.0f bytes of WAL per evaluation" %
                  (mode, rnd + 1, n4, n4 / float(span4), c_pg * 1e6 / n4, c_be * 1e6 / n4,
                   c_w * 1e6 / n4, per_commit, wal / n4))
            if mode == "on":
                print("standings on  round %d: the projection caught up %.2f s after the last "
                      "commit" % (rnd + 1, catchup[-1]))
            else:
                lease.rollback()   # lets go of the lease; the workers apply the round's results
                caught_up()
        if args.standings_rounds:
            def bracketed(v):
                """Each "on" round against the mean of the "off" rounds before and after it."""
                return [(v["on"][k], (v["off"][k] + v["off"][k + 1]) / 2.0) for k in range(len(v["on"]))]

            def median(xs):
                return sorted(xs)[len(xs) // 2]
            ratio = median([on / off for on, off in bracketed(rates)])
            print("standings overhead: evaluations/s with / without standings (each \"on\" round "
                  "against the mean of the \"off\" rounds around it), median: %.3f, i.e. %.1f%% %s"
                  % (ratio, abs(100.0 * (1 - ratio)), "slower" if ratio < 1 else "faster"))
            for name, v in (("postgres CPU", cpu), ("the workers' connections' CPU", cpu_be)):
                d = median([on - off for on, off in bracketed(v)])
                base = median([off for _, off in bracketed(v)])
                print("standings cost, %s per evaluation (the same way), median: %+.0f us "
                      "(%+.1f%% of %.0f us)" % (name, d, 100.0 * d / base, base))
            lease.close()
            rb = subprocess.run([args.bin, "standings", "--rebuild", "--batch", "50"], env=env,
                                capture_output=True, text=True)
            ck = subprocess.run([args.bin, "standings", "--check"], env=env, capture_output=True, text=True)
            print("standings rebuilt (%s), check: %s" % ("ok" if rb.returncode == 0 else rb.stderr.strip(),
                                                        ck.stdout.strip().splitlines()[-1] if ck.stdout else ck.stderr))

        # Phase 3: memory.
        for i, w in enumerate(workers):
            print("worker %d peak RSS (VmHWM): %.1f MB" % (i, hwm_kb(w.pid) / 1024))
        for w in workers:
            w.send_signal(signal.SIGTERM)
        for w in workers:
            try:
                w.wait(40)
            except subprocess.TimeoutExpired:
                w.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
