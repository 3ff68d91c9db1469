#!/usr/bin/python3
"""Standings under the real worker: load, SIGKILLs and re-evaluations (TAP).

Two `arbiter worker` processes evaluate 2,400 submissions of 10 agents on 3
challenges (window 10, so tasks keep falling out). One worker is SIGKILLed
twice mid-run and restarted; meanwhile ground truths change and 240
reevaluate jobs (elo keep and adjust, some submissions several times) are
enqueued. When every job is done, `arbiter standings --check` must find no
difference, the aggregates must equal the independent Python model computed
from evaluation_results, and every submission was counted exactly once. The
first results carry the exact agent, challenge and submission time the commit
fills in (sql/006_standings_commit_ids.sql). The workers apply the standings
projection themselves (sql/008).
"""
import json
import os
import random
import subprocess
import time

from services import Services
from standings_model import standings, tasks_from_results
from workerkit import Arena, Worker, done, enqueue_all, migrate, ok, wait_for

NSUB = 2400
BIN = os.environ.get("ARBITER_BIN", "build/worker/arbiter")

SPEC = {
    "evaluator": "deterministic",
    "dimensions": [
        {"key": "correctness", "weight": 0.5, "primitive": "exact_match", "field": "a",
         "ground_truth_field": "a"},
        {"key": "completeness", "weight": 0.3, "primitive": "exact_match", "field": "b",
         "ground_truth_field": "b"},
        {"key": "precision", "weight": 0.2, "primitive": "numeric_tolerance", "field": "c",
         "ground_truth_field": "c", "tolerance": 1, "decay": "linear"},
    ],
    "thresholds": {"win": 700, "draw": 400},
}


def cli(url, *args):
    env = dict(os.environ, ARBITER_DATABASE_URL=url)
    return subprocess.run([BIN] + list(args), env=env, capture_output=True, text=True, timeout=300)


def main():
    rng = random.Random(4242)
    with Services() as s:
        migrate(s)
        url = s.database_url
        r = cli(url, "standings", "--rebuild", "--window", "10")
        ok(r.returncode == 0, "window 10", r.stderr)
        a = Arena(s)
        agents = [a.agent("sw-%d" % i) for i in range(10)]
        chs = [a.challenge(SPEC, {"a": 1, "b": 1, "c": 5}, slug="sw-ch-%d" % i) for i in range(3)]

        def submissions(n):
            rows = a.q(
                "WITH p AS (SELECT (%s::uuid[])[1 + (random() * 9)::int] AS agent, "
                "(%s::uuid[])[1 + (random() * 2)::int] AS ch, g FROM generate_series(1, %s) g), "
                "m AS (INSERT INTO matches (agent_id, challenge_id, status, started_at, expires_at) "
                "SELECT agent, ch, 'active', now() - interval '60 seconds', now() + interval '1 hour' "
                "FROM p ORDER BY g RETURNING id, agent_id) "
                "INSERT INTO submissions (match_id, agent_id, source_ip, answer, status) "
                "SELECT m.id, m.agent_id, '192.0.2.7', jsonb_build_object('a', (random() < 0.6)::int, "
                "'b', (random() < 0.5)::int, 'c', 5 + round((random() * 8)::numeric, 1)), 'queued' "
                "FROM m RETURNING id", agents, chs, n)
            return [str(x[0]) for x in rows]

        subs = submissions(NSUB)
        enqueue_all(a, subs)
        w1 = Worker(s, "sw-1", env={"ARBITER_CONCURRENCY": "16"})
        w2 = Worker(s, "sw-2", env={"ARBITER_CONCURRENCY": "16", "ARBITER_CLAIM_IDLE_MS": "1500"})
        reevals = 0
        killed_at = []
        all_workers = [w1, w2]
        for kill in range(2):
            wait_for(lambda: a.count_status(subs) >= NSUB * (kill + 1) // 4, 120, 0.02)
            killed_at.append(a.count_status(subs))
            # Re-score some completed submissions under a changed ground truth.
            a.q("UPDATE challenges SET ground_truth = %s::jsonb WHERE id = %s",
                json.dumps({"a": rng.choice([0, 1]), "b": rng.choice([0, 1]), "c": rng.choice([5, 9])}),
                rng.choice(chs))
            done_subs = [str(x[0]) for x in a.q("SELECT id FROM submissions WHERE id = ANY(%s::uuid[]) "
                                                "AND status = 'completed'", subs)]
            pick = [rng.choice(done_subs) for _ in range(120)]
            for sid in pick:
                a.enqueue(sid, kind="reevaluate", elo=rng.choice(["keep", "adjust"]))
            reevals += len(pick)
            w1.kill()
            time.sleep(0.3)
            w1 = Worker(s, "sw-1", env={"ARBITER_CONCURRENCY": "16", "ARBITER_CLAIM_IDLE_MS": "1500"})
            all_workers.append(w1)

        ok(all(k < NSUB for k in killed_at), "both SIGKILLs hit mid-run (%r of %d done)" % (killed_at, NSUB))
        finished = a.wait_final(subs, 240)
        ok(finished, "every submission reached a final state", w1.tail() + w2.tail())
        nre = wait_for(lambda: a.val("SELECT count(*) FROM evaluation_results WHERE eval_seq > 1 "
                                     "AND submission_id = ANY(%s::uuid[])", subs) >= reevals, 240, 0.1)
        ok(nre, "every reevaluate job appended its result (%d)" % reevals, w1.tail() + w2.tail())
        wait_for(lambda: a.pending() == 0, 60)
        # The standings are a projection the workers apply after the commit (sql/008).
        caught = wait_for(lambda: a.val("SELECT pending FROM standings_status()") == 0, 30)
        ok(caught, "the workers' projection applied every result")
        w1.term()
        w2.term()
        logs = "".join(w.output() for w in all_workers)
        ok("40P01" not in logs and "deadlock" not in logs, "no deadlock in the commit path",
           [x for x in logs.splitlines() if "deadlock" in x or "40P01" in x][:3])

        bad = a.q("SELECT s.id FROM submissions s WHERE s.id = ANY(%s::uuid[]) AND (s.status <> "
                  "'completed' OR (SELECT count(*) FROM evaluation_results r WHERE r.submission_id = s.id "
                  "AND r.eval_seq = 1) <> 1)", subs)
        ok(not bad, "every submission completed with exactly one first result", bad[:3])
        rows = a.q("SELECT r.id, r.submission_id::text, r.eval_seq, r.score, r.result, s.agent_id::text, "
                   "m.challenge_id::text, s.submitted_at FROM evaluation_results r "
                   "JOIN submissions s ON s.id = r.submission_id JOIN matches m ON m.id = s.match_id")
        want_a, want_p = standings(tasks_from_results(rows), 10)
        got_a = {x[0]: tuple(x[1:]) for x in a.q(
            "SELECT agent_id::text, tasks, w_count, w_sum, w_wins, w_draws, w_losses, w_best, w_best_seq "
            "FROM standings_agents")}
        got_p = {(x[0], x[1]): tuple(x[2:]) for x in a.q(
            "SELECT agent_id::text, challenge_id::text, tasks, w_count, w_sum, w_wins, w_draws, w_losses, "
            "w_best, w_best_seq, best_score, best_submission::text FROM standings_agent_challenges")}
        ok(got_a == want_a, "agent windows equal the model from history (%d agents, %d tasks)"
           % (len(want_a), sum(v[0] for v in want_a.values())),
           [(k, got_a.get(k), want_a.get(k)) for k in want_a if got_a.get(k) != want_a.get(k)][:3])
        ok(got_p == want_p, "agent x challenge windows and bests equal the model (%d pairs)" % len(want_p),
           [(k, got_p.get(k), want_p.get(k)) for k in want_p if got_p.get(k) != want_p.get(k)][:3])
        nseq = a.val("SELECT count(*) FROM evaluation_results WHERE eval_seq > 1")
        ok(nseq >= 200, "re-evaluations really happened (%d)" % nseq)
        # The commit hands the trigger each first evaluation's agent, challenge and
        # submission time (sql/006): exact copies; re-evaluations leave them NULL.
        hints = a.q("SELECT r.eval_seq = 1, count(*), count(*) FILTER (WHERE "
                    "r.standings_agent_id IS NOT DISTINCT FROM CASE WHEN r.eval_seq = 1 THEN s.agent_id END "
                    "AND r.standings_challenge_id IS NOT DISTINCT FROM "
                    "CASE WHEN r.eval_seq = 1 THEN m.challenge_id END "
                    "AND r.standings_submitted_at IS NOT DISTINCT FROM "
                    "CASE WHEN r.eval_seq = 1 THEN s.submitted_at END) "
                    "FROM evaluation_results r JOIN submissions s ON s.id = r.submission_id "
                    "JOIN matches m ON m.id = s.match_id GROUP BY 1 ORDER BY 1")
        ok(len(hints) == 2 and all(n == good for _, n, good in hints),
           "first results carry their submission's agent, challenge and submitted_at; "
           "re-evaluations none (%r)" % hints)
        r = cli(url, "standings", "--check")
        ok(r.returncode == 0 and "0 differences" in r.stdout, "standings --check finds no difference",
           r.stdout[-3000:] + r.stderr)
        a.close()
    return done()


if __name__ == "__main__":
    raise SystemExit(main())
