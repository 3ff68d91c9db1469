#!/usr/bin/python3
"""The standings projection (sql/008_standings_projection.sql) under SIGKILLed appliers (TAP).

Three `arbiter worker` replicas evaluate a backlog of submissions of 20 agents on 3
challenges (window 10), each replica applying the projection in small batches
(ARBITER_STANDINGS_BATCH=100). Three times, the replica whose connection is running
standings_apply() at that moment is found (pg_stat_activity's client port, mapped to
the process through /proc) and SIGKILLed mid-batch, then restarted; another replica
must take the lease and apply the next batch within 3 s. Re-evaluations (elo keep
and adjust) are enqueued meanwhile. Then:
- `arbiter standings --check` is clean within 2 s of the last commit;
- every result was applied exactly once: the progress row's applied_results equals
  the number of results (a result applied twice would count twice), and the
  aggregates equal the independent model computed from evaluation_results.
Then 1,800 more with two replicas, and `arbiter standings --rebuild --window 7`
while they commit and apply: the windows of 7 equal the model.
First, overlapping commits by hand: a result with a lower id whose transaction is
still open when a batch runs is applied by a later batch (the horizon waits for
it), nothing is applied twice, and a batch limit leaves the rest for the next; a
batch waits for an open backfill batch and then applies what its snapshot missed.
"""
import os
import random
import subprocess
import time

import psycopg2

from services import Services
from standings_model import standings, tasks_from_results
from workerkit import SPEC_X, Arena, Worker, bulk, check_clean_after, done, migrate, ok, wait_for

BIN = os.environ.get("ARBITER_BIN", "build/worker/arbiter")
NSUB = 6000
ENV = {"ARBITER_CONCURRENCY": "32", "ARBITER_CLAIM_IDLE_MS": "1500",
       "ARBITER_STANDINGS_BATCH": "100", "ARBITER_STANDINGS_APPLY_MS": "100"}


def cli(url, *args):
    env = dict(os.environ, ARBITER_DATABASE_URL=url)
    return subprocess.run([BIN] + list(args), env=env, capture_output=True, text=True, timeout=300)


def pid_of_client_port(port, pids):
    """The process among pids that owns the TCP socket whose local port is port."""
    inodes = set()
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(path).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if int(f[1].rsplit(":", 1)[1], 16) == port:
                inodes.add("socket:[%s]" % f[9])
    for pid in pids:
        try:
            for fd in os.listdir("/proc/%d/fd" % pid):
                try:
                    if os.readlink("/proc/%d/fd/%s" % (pid, fd)) in inodes:
                        return pid
                except OSError:
                    pass
        except OSError:
            pass
    return None


def overlapping_commits(a, url):
    """Ids are not commit order: a result inserted by a transaction still open when a
    batch runs (lower id, older transaction) is applied by a later batch, once."""
    ag = [a.agent("ov-%d" % i) for i in range(2)]
    ch = a.challenge(SPEC_X, {"x": 1}, slug="ov-ch")
    subs = [a.submit(x, ch, {"x": 1}, enqueue=False)[1] for x in ag]
    ins = ("INSERT INTO evaluation_results (submission_id, eval_seq, evaluator, score, result, "
           "score_breakdown, submission_warnings, constraint_violations, verified, evaluation_log, "
           "worker_id, started_at, completed_at) VALUES (%s, 1, 'deterministic', %s, 'win', '{}', '[]', "
           "'[]', false, '{}', 'test', now(), now()) RETURNING id, standings_xid")
    c1, c2, ap = (psycopg2.connect(url) for _ in range(3))
    k1, k2 = c1.cursor(), c2.cursor()
    k1.execute(ins, (subs[0], 900))
    id1, xid1 = k1.fetchone()          # open: not committed yet
    k2.execute(ins, (subs[1], 800))
    id2, _ = k2.fetchone()
    c2.commit()

    def apply(limit=1000):
        cur = ap.cursor()
        cur.execute("SELECT applied, busy, caught_up FROM standings_apply(%s)", (limit,))
        r = cur.fetchone()
        cur.execute("SELECT horizon, applied_results FROM standings_progress")
        h = cur.fetchone()
        ap.commit()
        return r + h

    def tasks(agent):
        return a.val("SELECT coalesce((SELECT tasks FROM standings_agents WHERE agent_id = %s), 0)", agent)

    applied, busy, caught, horizon, total0 = apply()
    ok(id1 < id2 and applied == 1 and tasks(ag[1]) == 1 and tasks(ag[0]) == 0 and horizon <= xid1,
       "a batch applies the committed result (id %d) and keeps its horizon (%d) at or below the "
       "open transaction (%d) that holds the lower id %d" % (id2, horizon, xid1, id1))
    c1.commit()
    applied, busy, caught, horizon, total = apply()
    ok(applied == 1 and tasks(ag[0]) == 1 and horizon > xid1,
       "after it commits, the next batch applies the lower id and moves the horizon past it")
    applied, _, _, _, total2 = apply()
    ok(applied == 0 and total2 == total, "a batch with nothing new applies nothing (exactly once)")
    # A limit leaves results behind: the horizon stays at the oldest left.
    more = [a.submit(ag[i % 2], ch, {"x": 1}, enqueue=False)[1] for i in range(5)]
    for i, sid in enumerate(more):
        k1.execute(ins, (sid, 100 * i))
        c1.commit()
    steps = []
    while True:
        applied, busy, caught, horizon, total3 = apply(2)
        steps.append(applied)
        if caught:
            break
    ok(steps == [2, 2, 1] and total3 == total2 + 5 and tasks(ag[0]) == 4 and tasks(ag[1]) == 3,
       "batches of 2 apply 5 results as 2, 2, 1 (%r)" % steps)
    for c in (c1, c2, ap):
        c.close()


def backfill_beside_batch(a, url):
    """A batch never runs beside a backfill: a result committed while a backfill batch is
    open (its snapshot misses it) is applied afterwards, not skipped as belonging to an
    agent still waiting for the backfill."""
    ag = a.agent("bf-0")
    ch = a.challenge(SPEC_X, {"x": 1}, slug="bf-ch")
    ins = ("INSERT INTO evaluation_results (submission_id, eval_seq, evaluator, score, result, "
           "score_breakdown, submission_warnings, constraint_violations, verified, evaluation_log, "
           "worker_id, started_at, completed_at) VALUES (%s, 1, 'deterministic', 500, 'draw', '{}', "
           "'[]', '[]', false, '{}', 'test', now(), now())")
    c1, c2, c3 = (psycopg2.connect(url) for _ in range(3))
    k1, k2, k3 = c1.cursor(), c2.cursor(), c3.cursor()
    k2.execute(ins, (a.submit(ag, ch, {"x": 1}, enqueue=False)[1],))
    c2.commit()
    k3.execute("SELECT standings_reset(NULL)")
    c3.commit()
    k1.execute("SELECT agents_done FROM standings_backfill_batch(100000)")   # left open
    k2.execute(ins, (a.submit(ag, ch, {"x": 1}, enqueue=False)[1],))
    c2.commit()
    k3.execute("SELECT applied, busy FROM standings_apply(1000)")
    during = k3.fetchone()
    c3.commit()
    c1.commit()
    while True:
        k3.execute("SELECT applied, busy, caught_up FROM standings_apply(1000)")
        applied, busy, caught = k3.fetchone()
        c3.commit()
        if caught and not busy:
            break
    r = cli(url, "standings", "--check")
    tasks = a.val("SELECT tasks FROM standings_agents WHERE agent_id = %s", ag)
    ok(during == (0, True) and tasks == 2 and r.returncode == 0 and "0 differences" in r.stdout,
       "a batch waits for an open backfill batch (it answered %r), then applies the result the "
       "backfill's snapshot missed (%d tasks)" % (during, tasks), r.stdout[-1500:] + r.stderr)
    for c in (c1, c2, c3):
        c.close()


def main():
    rng = random.Random(2323)
    with Services() as s:
        migrate(s)
        url = s.database_url
        r = cli(url, "standings", "--rebuild", "--window", "10")
        ok(r.returncode == 0, "window 10", r.stderr)
        a = Arena(s)
        overlapping_commits(a, url)
        backfill_beside_batch(a, url)
        base_applied = a.val("SELECT applied_results FROM standings_progress")
        base_results = a.val("SELECT count(*) FROM evaluation_results")
        agents = [a.agent("sp-%d" % i) for i in range(20)]
        chs = [a.challenge(SPEC_X, {"x": 1}, slug="sp-ch-%d" % i) for i in range(3)]
        subs = []
        for ch in chs:
            subs += bulk(a, agents, ch, NSUB // 3)
        workers = {}
        for i in range(3):
            w = Worker(s, "sp-%d" % i, env=ENV)
            workers[w.proc.pid] = w
        everyone = list(workers.values())

        kills, replaced = [], []
        reevals = 0
        for k in range(3):
            wait_for(lambda: a.count_status(subs) >= NSUB * (k + 1) // 5, 120, 0.02)
            done_subs = [str(x[0]) for x in a.q("SELECT id FROM submissions WHERE id = ANY(%s::uuid[]) "
                                                "AND status = 'completed' LIMIT 400", subs)]
            for sid in rng.sample(done_subs, 60):
                a.enqueue(sid, kind="reevaluate", elo=rng.choice(["keep", "adjust"]))
            reevals += 60
            victim = None
            deadline = time.time() + 20
            while victim is None and time.time() < deadline:
                rows = a.q("SELECT client_port FROM pg_stat_activity WHERE state = 'active' "
                           "AND query LIKE 'SELECT applied, busy, caught_up, lag_seconds FROM standings_apply%%' "
                           "AND pid <> pg_backend_pid()")
                for (port,) in rows:
                    victim = pid_of_client_port(port, list(workers))
                if victim is None:
                    time.sleep(0.003)
            if victim is None:
                kills.append(None)
                continue
            before = a.val("SELECT applied_batches FROM standings_progress")
            w = workers.pop(victim)
            w.kill()
            t_kill = time.time()
            kills.append(w.name)
            took = wait_for(lambda: a.val("SELECT applied_batches FROM standings_progress") > before + 1,
                            10, 0.02)
            replaced.append(time.time() - t_kill if took else None)
            nw = Worker(s, w.name, env=ENV)
            workers[nw.proc.pid] = nw
            everyone.append(nw)

        ok(all(kills), "three SIGKILLs hit the replica running standings_apply (%r)" % kills)
        ok(len(replaced) == 3 and all(x is not None and x < 3 for x in replaced),
           "another replica applied the next batches within 3 s (%r s)" % replaced)
        finished = a.wait_final(subs, 300)
        ok(finished, "every submission reached a final state", "".join(w.tail() for w in everyone))
        nre = wait_for(lambda: a.val("SELECT count(*) FROM evaluation_results WHERE eval_seq > 1") >= reevals,
                       240, 0.05)
        ok(nre, "every reevaluate job appended its result (%d)" % reevals)
        wait_for(lambda: a.pending() == 0, 60)
        last_commit = a.val("SELECT extract(epoch FROM max(completed_at)) FROM evaluation_results")
        clean, r = check_clean_after(s, last_commit)
        ok(clean is not None and clean <= 2.0,
           "standings --check clean %.2f s after the last commit (target 2 s)" % (clean or -1),
           r.stdout[-1500:] + r.stderr)
        for w in everyone:
            w.term()

        rows = a.q("SELECT r.id, r.submission_id::text, r.eval_seq, r.score, r.result, s.agent_id::text, "
                   "m.challenge_id::text, s.submitted_at FROM evaluation_results r "
                   "JOIN submissions s ON s.id = r.submission_id JOIN matches m ON m.id = s.match_id")
        nres = len(rows) - base_results   # the phases by hand above are not counted
        applied = a.val("SELECT applied_results FROM standings_progress") - base_applied
        ok(applied == nres, "every result applied exactly once: %d applied, %d results" % (applied, nres))
        want_a, want_p = standings(tasks_from_results(rows), 10)
        got_a = {x[0]: tuple(x[1:]) for x in a.q(
            "SELECT agent_id::text, tasks, w_count, w_sum, w_wins, w_draws, w_losses, w_best, w_best_seq "
            "FROM standings_agents")}
        got_p = {(x[0], x[1]): tuple(x[2:]) for x in a.q(
            "SELECT agent_id::text, challenge_id::text, tasks, w_count, w_sum, w_wins, w_draws, w_losses, "
            "w_best, w_best_seq, best_score, best_submission::text FROM standings_agent_challenges")}
        ok(got_a == want_a, "agent windows equal the model (%d agents, %d tasks)"
           % (len(want_a), sum(v[0] for v in want_a.values())),
           [(k, got_a.get(k), want_a.get(k)) for k in want_a if got_a.get(k) != want_a.get(k)][:3])
        ok(got_p == want_p, "agent x challenge windows and bests equal the model (%d pairs)" % len(want_p),
           [(k, got_p.get(k), want_p.get(k)) for k in want_p if got_p.get(k) != want_p.get(k)][:3])

        # A window change while two replicas commit and apply more: the reset and the
        # backfill take the projection's lease in turn with the batches.
        more = []
        for ch in chs:
            more += bulk(a, agents, ch, 600)
        ws = [Worker(s, "sp-r%d" % i, env=ENV) for i in range(2)]
        wait_for(lambda: a.count_status(more) >= 300, 120, 0.02)
        r = cli(url, "standings", "--rebuild", "--window", "7", "--batch", "3")
        mid = a.count_status(more)
        ok(r.returncode == 0 and mid < len(more), "rebuild --window 7 while the replicas commit "
           "(%d of %d done when it ended)" % (mid, len(more)), r.stdout[-1000:] + r.stderr)
        ok(a.wait_final(more, 300), "the second batch of submissions finished")
        clean = wait_for(lambda: cli(url, "standings", "--check").returncode == 0, 30, 0.1)
        for w in ws:
            w.term()
        rows = a.q("SELECT r.id, r.submission_id::text, r.eval_seq, r.score, r.result, s.agent_id::text, "
                   "m.challenge_id::text, s.submitted_at FROM evaluation_results r "
                   "JOIN submissions s ON s.id = r.submission_id JOIN matches m ON m.id = s.match_id")
        want_a, want_p = standings(tasks_from_results(rows), 7)
        got_a = {x[0]: tuple(x[1:]) for x in a.q(
            "SELECT agent_id::text, tasks, w_count, w_sum, w_wins, w_draws, w_losses, w_best, w_best_seq "
            "FROM standings_agents")}
        got_p = {(x[0], x[1]): tuple(x[2:]) for x in a.q(
            "SELECT agent_id::text, challenge_id::text, tasks, w_count, w_sum, w_wins, w_draws, w_losses, "
            "w_best, w_best_seq, best_score, best_submission::text FROM standings_agent_challenges")}
        ok(clean and got_a == want_a and got_p == want_p,
           "after the rebuild: --check clean, windows of 7 and bests equal the model (%d tasks)"
           % sum(v[0] for v in want_a.values()),
           [(k, got_a.get(k), want_a.get(k)) for k in want_a if got_a.get(k) != want_a.get(k)][:3])
        a.close()
    return done()


if __name__ == "__main__":
    raise SystemExit(main())
