#!/usr/bin/python3
"""Equal scores do not make the standings trigger re-read windows (TAP).

A window's best is re-read from its entries when the position marking it
leaves the window. Up to sql/006 that position was the earliest of the best
scores, so with equal scores (every perfect answer scores 1000) it left on
nearly every commit once the window was full. sql/007 marks the latest
position instead: with equal scores the best never leaves.

1. A database at sql/006 (the migration files applied as `arbiter migrate`
   would, recorded in arbiter_migrations): one agent, two challenges, window
   10, 120 tasks in batches of 4, all scoring 1000 but every fifth (700).
   With auto_explain logging nested statements, the trigger re-reads windows
   on those commits: this is what 007 removes (and the test's evidence that
   it watches the right statements).
2. `arbiter migrate` applies 007: the stored windows equal the model
   (sql/README.md "Standings", latest position of the best) and
   `standings --check` finds no difference.
3. 120 more such tasks, applied by batches of the standings projection
   (sql/008, which applies 007's rule the same way): no batch re-reads a
   window, the windows still equal the model and the check still finds
   nothing. A re-evaluation lowering the best's task and one raising an older
   task keep them equal too (their batches do re-read their windows, which
   shows the count watches the right statements).
"""
import hashlib
import os
import subprocess

import psycopg2

from services import Services, auto_explain_plans
from standings_model import standings, tasks_from_results
from tap import done, ok


def eq(got, want, name):
    ok(got == want, name, "got %r\nwant %r" % (got, want))


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("ARBITER_BIN", "build/worker/arbiter")
BEFORE = ["001_initial", "002_standings", "003_judge", "004_standings_plans",
          "005_standings_fast_path", "006_standings_commit_ids"]
REREAD = "SET (w_best, w_best_seq)"               # the trigger's re-read (006, 007)
REREAD_008 = "w_losses, w_best, w_best_seq) = ("   # the projection's (sql/008)


def apply_until_006(url):
    db = psycopg2.connect(url)
    cur = db.cursor()
    cur.execute("CREATE TABLE arbiter_migrations (version int PRIMARY KEY, name text NOT NULL, "
                "checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
    for name in BEFORE:
        text = open(os.path.join(ROOT, "sql", name + ".sql"), "rb").read()
        cur.execute(text.decode())
        cur.execute("INSERT INTO arbiter_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                    (int(name[:3]), name[4:], hashlib.sha256(text).hexdigest()))
    db.commit()
    return db


def model(cur, n):
    cur.execute("SELECT r.id, r.submission_id::text, r.eval_seq, r.score, r.result, "
                "s.agent_id::text, m.challenge_id::text, s.submitted_at FROM evaluation_results r "
                "JOIN submissions s ON s.id = r.submission_id JOIN matches m ON m.id = s.match_id")
    return standings(tasks_from_results(cur.fetchall()), n)


def stored(cur):
    cur.execute("SELECT agent_id::text, tasks, w_count, w_sum, w_wins, w_draws, w_losses, w_best, "
                "w_best_seq FROM standings_agents")
    agents = {r[0]: tuple(r[1:]) for r in cur.fetchall()}
    cur.execute("SELECT agent_id::text, challenge_id::text, tasks, w_count, w_sum, w_wins, "
                "w_draws, w_losses, w_best, w_best_seq, best_score, best_submission::text "
                "FROM standings_agent_challenges")
    return agents, {(r[0], r[1]): tuple(r[2:]) for r in cur.fetchall()}


def main():
    with Services(redis=False) as s:
        url = s.database_url
        env = dict(os.environ, ARBITER_DATABASE_URL=url)
        db = apply_until_006(url)
        cur = db.cursor()
        cur.execute("UPDATE standings_settings SET window_size = 10")
        cur.execute("INSERT INTO agents (name) VALUES ('tie') RETURNING id")
        agent = cur.fetchone()[0]
        chs = []
        for slug in ("c1", "c2"):
            cur.execute("INSERT INTO challenges (slug, difficulty, scoring_spec, time_limit_secs) "
                        "VALUES (%s, 'contender', '{}', 60) RETURNING id", (slug,))
            chs.append(cur.fetchone()[0])
        cur.execute("INSERT INTO matches (agent_id, challenge_id, status, started_at, expires_at) "
                    "SELECT %s, CASE WHEN g %% 3 = 0 THEN %s::uuid ELSE %s::uuid END, 'completed', "
                    "now(), now() FROM generate_series(1, 240) g", (agent, chs[0], chs[1]))
        cur.execute("INSERT INTO submissions (match_id, agent_id, source_ip, answer, status) "
                    "SELECT id, agent_id, '10.0.0.1', '{}', 'completed' FROM matches")
        cur.execute("SELECT s.id, s.submitted_at, m.challenge_id FROM submissions s "
                    "JOIN matches m ON m.id = s.match_id ORDER BY s.id")
        subs = cur.fetchall()
        db.commit()
        log = os.path.join(s.tmp, "postgres.log")
        for q in ("LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0",
                  "SET auto_explain.log_nested_statements = on",
                  "SET auto_explain.log_format = json"):
            cur.execute(q)
        db.commit()
        counter = [0]

        def commit(rows, project=False):
            """First evaluations with the ids the worker's commit passes; every fifth
            task of the run scores 700, the others 1000. project: then applied by a
            batch of the standings projection (sql/008), as a worker's applier runs it.
            Returns the window re-reads the trigger or the batch ran (auto_explain's
            nested statements)."""
            start = os.path.getsize(log)
            scores = []
            for _ in rows:
                counter[0] += 1
                scores.append(700 if counter[0] % 5 == 0 else 1000)
            cur.execute("INSERT INTO evaluation_results (submission_id, eval_seq, evaluator, "
                        "score, result, score_breakdown, submission_warnings, "
                        "constraint_violations, verified, evaluation_log, worker_id, started_at, "
                        "completed_at, standings_agent_id, standings_challenge_id, "
                        "standings_submitted_at) "
                        "SELECT x, 1, 'deterministic', sc, 'win', '{}', '[]', '[]', true, '{}', "
                        "'w', now(), now(), %s, c, t "
                        "FROM unnest(%s::uuid[], %s::timestamptz[], %s::uuid[], %s::int[]) "
                        "AS u(x, t, c, sc)",
                        (agent, [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                         scores))
            db.commit()
            if project:
                cur.execute("SELECT applied FROM standings_apply(1000)")
                assert cur.fetchone()[0] == len(rows)
                db.commit()
            with open(log) as f:
                f.seek(start)
                text = f.read()
            return sum(REREAD in p.get("Query Text", "") or REREAD_008 in p.get("Query Text", "")
                       for p in auto_explain_plans(text))

        def same(what):
            want_a, want_p = model(cur, 10)
            got_a, got_p = stored(cur)
            db.commit()
            eq(got_a, want_a, "%s: the agent's window equals the model" % what)
            eq(got_p, want_p, "%s: the agent x challenge windows and bests equal the model" % what)
            r = subprocess.run([BIN, "standings", "--check"], env=env, capture_output=True,
                               text=True)
            ok(r.returncode == 0 and "0 differences" in r.stdout,
               "%s: standings --check finds nothing" % what, r.stdout + r.stderr)

        before = sum(commit(subs[i:i + 4]) for i in range(0, 120, 4))
        ok(before >= 20, "at sql/006, equal scores made the trigger re-read windows on 30 "
           "commits: %d re-reads" % before)

        r = subprocess.run([BIN, "migrate"], env=env, capture_output=True, text=True)
        ok(r.returncode == 0 and "007_standings_best_latest" in r.stdout
           and "008_standings_projection" in r.stdout, "migrate applies 007 and 008",
           r.stdout + r.stderr)
        same("after 007 on the windows 006 kept")

        after = sum(commit(subs[i:i + 4], project=True) for i in range(120, 240, 4))
        eq(after, 0, "after 007, no batch of equal scores re-reads a window (30 batches of the "
           "projection, sql/008)")
        same("120 more tasks after 007")

        # Re-evaluations: lower the latest 1000 of the window, then raise the oldest
        # 700 still in it (each applied by its own batch).
        cur.execute("SELECT submission_id, score FROM standings_entries WHERE agent_id = %s "
                    "ORDER BY seq DESC LIMIT 10", (agent,))
        win = cur.fetchall()
        top = next(x for x, sc in win if sc == 1000)
        low = next(x for x, sc in reversed(win) if sc == 700)
        rereads = []
        for sub, sc in ((top, 10), (low, 1000)):
            start = os.path.getsize(log)
            cur.execute("INSERT INTO evaluation_results (submission_id, eval_seq, evaluator, "
                        "score, result, score_breakdown, submission_warnings, "
                        "constraint_violations, verified, evaluation_log, worker_id, started_at, "
                        "completed_at) SELECT %s, 2, 'deterministic', %s, 'win', '{}', '[]', '[]', "
                        "true, '{}', 'w', now(), now()", (sub, sc))
            db.commit()
            cur.execute("SELECT applied FROM standings_apply(1000)")
            db.commit()
            with open(log) as f:
                f.seek(start)
                rereads.append(sum(REREAD_008 in p.get("Query Text", "")
                                   for p in auto_explain_plans(f.read())))
        ok(all(n >= 1 for n in rereads), "a re-evaluation's batch re-reads its windows (%r): the "
           "count above watches the right statements" % rereads)
        same("two re-evaluations after 007")
    return done()


if __name__ == "__main__":
    raise SystemExit(main())
