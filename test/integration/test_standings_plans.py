#!/usr/bin/python3
"""The standings projection's batches stay O(batch) whatever their session
planned first (TAP).

The standings are applied by standings_apply() (sql/008_standings_projection.sql)
after the commit. A session that plans while the standings tables are tiny (a
new database, a rebuild, statistics from a small table) could keep plans that
read an agent's whole history. This test does exactly that: one session commits
and applies a first evaluation, the tables are analyzed with that one row, then
it commits and applies 300 more for one agent on one challenge (window 10, four
per batch, like a worker's commit; beside 30,000 older results the projection
must not read), then four more with auto_explain logging
every nested statement's plan with its row counts. Every scan of a standings
table and of evaluation_results, submissions and matches in those plans must
read O(batch) rows: the batch's results (found through the projection's
horizon, never the whole history), the positions leaving the windows, never the
agent's whole history (sql/004_standings_plans.sql), and the four rows must be
applied by one statement that inserts the tasks and updates both aggregates (as
sql/005's trigger did). The per-challenge leaderboard still reads the (now
partial) best-score index. Last, a projection far behind (3,000 results above
its horizon, with statistics that say so) takes a batch of 100 by probing about
100 of them, not all (sql/010_standings_select.sql), and catches up in 30.
"""
import os
import subprocess

import psycopg2

from services import Services, auto_explain_plans
from tap import diag, done, ok

BIN = os.environ.get("ARBITER_BIN", "build/worker/arbiter")
TABLES = {"standings_entries", "standings_agents", "standings_agent_challenges",
          "evaluation_results", "submissions", "matches"}


def scans(node, acc):
    """(relation, index, rows read per loop incl. filtered, loops) of every scan node."""
    if node.get("Relation Name") in TABLES:
        read = node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)
        acc.append((node["Relation Name"], node.get("Index Name", node["Node Type"]), read,
                    node.get("Actual Loops", 0)))
    for c in node.get("Plans", []):
        scans(c, acc)
    return acc


def relations(node, names):
    """The scans of the named relations in a plan."""
    out = [node["Relation Name"]] if node.get("Relation Name") in names else []
    for c in node.get("Plans", []):
        out += relations(c, names)
    return out


def writes(node, acc):
    """(operation, relation) of every ModifyTable node of a plan."""
    if node.get("Node Type") == "ModifyTable":
        acc.add((node.get("Operation"), node.get("Relation Name")))
    for c in node.get("Plans", []):
        writes(c, acc)
    return acc


def main():
    with Services(redis=False) as s:
        env = dict(os.environ, ARBITER_DATABASE_URL=s.database_url)
        r = subprocess.run([BIN, "migrate"], env=env, capture_output=True, text=True)
        ok(r.returncode == 0, "migrated", r.stderr)
        db = psycopg2.connect(s.database_url)
        cur = db.cursor()
        cur.execute("UPDATE standings_settings SET window_size = 10")
        cur.execute("INSERT INTO agents (name) VALUES ('a') RETURNING id")
        agent = cur.fetchone()[0]
        cur.execute("INSERT INTO challenges (slug, difficulty, scoring_spec, time_limit_secs) "
                    "VALUES ('c', 'contender', '{}', 60) RETURNING id")
        ch = cur.fetchone()[0]
        cur.execute("INSERT INTO matches (agent_id, challenge_id, status, started_at, expires_at) "
                    "SELECT %s, %s, 'completed', now(), now() FROM generate_series(1, 309)",
                    (agent, ch))
        cur.execute("INSERT INTO submissions (match_id, agent_id, source_ip, answer, status) "
                    "SELECT id, agent_id, '10.0.0.1', '{}', 'completed' FROM matches")
        cur.execute("SELECT id, submitted_at FROM submissions ORDER BY id")
        rows = cur.fetchall()
        subs = [x[0] for x in rows]
        submitted = dict(rows)
        db.commit()

        def commit(ids, hints=False):
            """hints: with the agent, challenge and submission time, as the worker's commit
            passes them (sql/006), here from values read before (no join in the INSERT)."""
            if not hints:
                cur.execute("INSERT INTO evaluation_results (submission_id, eval_seq, evaluator, "
                            "score, result, score_breakdown, submission_warnings, "
                            "constraint_violations, verified, evaluation_log, worker_id, started_at, "
                            "completed_at) "
                            "SELECT x, 1, 'deterministic', 100 + (row_number() OVER () * 37) %% 900, "
                            "'win', '{}', '[]', '[]', true, '{}', 'w', now(), now() "
                            "FROM unnest(%s::uuid[]) x", (ids,))
            else:
                cur.execute("INSERT INTO evaluation_results (submission_id, eval_seq, evaluator, "
                            "score, result, score_breakdown, submission_warnings, "
                            "constraint_violations, verified, evaluation_log, worker_id, started_at, "
                            "completed_at, standings_agent_id, standings_challenge_id, "
                            "standings_submitted_at) "
                            "SELECT x, 1, 'deterministic', 100 + (row_number() OVER () * 37) %% 900, "
                            "'win', '{}', '[]', '[]', true, '{}', 'w', now(), now(), %s, %s, t "
                            "FROM unnest(%s::uuid[], %s::timestamptz[]) AS u(x, t)",
                            (agent, ch, ids, [submitted[i] for i in ids]))
            db.commit()
            # The projection's batch, as a worker's applier runs it (autocommit).
            cur.execute("SELECT applied, caught_up FROM standings_apply(1000)")
            applied, caught = cur.fetchone()
            db.commit()
            assert applied == len(ids) and caught, (applied, caught)

        # A history the projection has no business reading: 30,000 results of another
        # agent, written before (standings_xid NULL, as rows from before sql/008).
        cur.execute("INSERT INTO agents (name) VALUES ('old') RETURNING id")
        old = cur.fetchone()[0]
        cur.execute("WITH m AS (INSERT INTO matches (agent_id, challenge_id, status, started_at, "
                    "expires_at) SELECT %s, %s, 'completed', now(), now() "
                    "FROM generate_series(1, 30000) RETURNING id), "
                    "s AS (INSERT INTO submissions (match_id, agent_id, source_ip, answer, status) "
                    "SELECT id, %s, '10.0.0.1', '{}', 'completed' FROM m RETURNING id) "
                    "INSERT INTO evaluation_results (submission_id, eval_seq, evaluator, score, "
                    "result, score_breakdown, submission_warnings, constraint_violations, verified, "
                    "evaluation_log, worker_id, started_at, completed_at, standings_xid) "
                    "SELECT id, 1, 'deterministic', 500, 'draw', '{}', '[]', '[]', true, '{}', 'w', "
                    "now(), now(), NULL FROM s", (old, ch, old))
        db.commit()
        db.autocommit = True
        cur.execute("ANALYZE evaluation_results")
        db.autocommit = False
        commit(subs[:1])
        # Statistics of tiny tables (autovacuum analyzes a table after its first 50
        # changes; an operator may run VACUUM ANALYZE): the next commit plans with them.
        db.autocommit = True
        cur.execute("VACUUM ANALYZE standings_entries, standings_agents, standings_agent_challenges")
        db.autocommit = False
        for i in range(1, 301, 4):
            commit(subs[i:i + 4])
        log = os.path.join(s.tmp, "postgres.log")
        start = os.path.getsize(log)
        for q in ("LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0",
                  "SET auto_explain.log_analyze = on", "SET auto_explain.log_nested_statements = on",
                  "SET auto_explain.log_format = json"):
            cur.execute(q)
        db.commit()
        commit(subs[301:305], hints=True)
        with open(log) as f:
            f.seek(start)
            text = f.read()
        start += len(text.encode())
        found, statements, looked_up = [], [], []
        for p in auto_explain_plans(text):
            scans(p.get("Plan", {}), found)
            statements.append(writes(p.get("Plan", {}), set()))
            looked_up += relations(p.get("Plan", {}), {"matches"})
        ok(looked_up, "the batch finds its results' agent and challenge (%d scans of matches)"
           % len(looked_up))
        commit(subs[305:309])
        ok(any(t == "standings_entries" for t, _, _, _ in found),
           "auto_explain logged the projection's scans of standings_entries (%d scans)" % len(found))
        ok(any(t == "evaluation_results" for t, _, _, _ in found),
           "and its scans of evaluation_results (%d scans)" % len(found))
        worst = max((read for _, _, read, _ in found), default=0)
        ok(worst <= 20, "every scan of a standings table, of the results, submissions and matches "
           "reads at most 20 rows per loop "
           "(window 10, 4 per batch; the agent has 301 tasks): worst %d" % worst,
           "\n".join("%s via %s: %d rows x %d loops" % x for x in found))
        # The usual batch (first evaluations) is applied by one statement that inserts the
        # tasks and updates both aggregates (as sql/005's trigger did), not row by row nor by
        # separate statements.
        one = [w for w in statements if ("Insert", "standings_entries") in w]
        ok(len(one) == 1 and {("Update", "standings_agents"),
                              ("Update", "standings_agent_challenges")} <= one[0],
           "the 4 first evaluations are applied by one statement writing the tasks and both "
           "aggregates", "\n".join(str(sorted(w)) for w in statements if w))
        cur.execute("SELECT tasks, w_count FROM standings_agents WHERE agent_id = %s", (agent,))
        got = cur.fetchone()
        ok(got == (309, 10), "309 tasks counted, 10 in the window", repr(got))
        db.commit()
        # The older history was written without standings (as if the trigger had been
        # disabled): a rebuild counts it, then the check covers everything.
        r = subprocess.run([BIN, "standings", "--rebuild"], env=env, capture_output=True, text=True)
        ok(r.returncode == 0, "standings --rebuild", r.stdout + r.stderr)
        r = subprocess.run([BIN, "standings", "--check"], env=env, capture_output=True, text=True)
        ok(r.returncode == 0, "standings --check finds no difference", r.stdout + r.stderr)
        # The partial best-score index still serves the per-challenge leaderboard (the
        # view states best_score IS NOT NULL), as `arbiter leaderboard --challenge` reads it.
        cur.execute("SET enable_seqscan = off")
        cur.execute("EXPLAIN SELECT * FROM leaderboard_challenge WHERE challenge_id = %s LIMIT 100",
                    (ch,))
        plan = "\n".join(x[0] for x in cur.fetchall())
        db.rollback()
        ok("standings_agent_challenges_best_idx" in plan,
           "the per-challenge leaderboard reads the partial best-score index", plan)
        if found:
            diag("scans: " + ", ".join("%s/%s %d" % (t, i, n) for t, i, n, _ in found))

        # A projection far behind (its appliers were held off while results kept coming):
        # 3,000 results above the horizon, in 30 transactions, with statistics that know
        # it. A batch of 100 probes about 100 of them (their submissions, matches and
        # tasks), not all 3,000 nor the whole history: sql/008's query joined every
        # submission here, and probed every result above the horizon on each batch.
        cur.execute("INSERT INTO matches (agent_id, challenge_id, status, started_at, expires_at) "
                    "SELECT %s, %s, 'completed', now(), now() FROM generate_series(1, 3000) "
                    "RETURNING id", (agent, ch))
        mids = [x[0] for x in cur.fetchall()]
        cur.execute("INSERT INTO submissions (match_id, agent_id, source_ip, answer, status) "
                    "SELECT id, %s, '10.0.0.1', '{}', 'completed' FROM unnest(%s::uuid[]) id "
                    "RETURNING id", (agent, mids))
        far = [x[0] for x in cur.fetchall()]
        db.commit()
        for i in range(0, 3000, 100):
            cur.execute("INSERT INTO evaluation_results (submission_id, eval_seq, evaluator, "
                        "score, result, score_breakdown, submission_warnings, "
                        "constraint_violations, verified, evaluation_log, worker_id, started_at, "
                        "completed_at) SELECT x, 1, 'deterministic', 500, 'loss', '{}', '[]', "
                        "'[]', true, '{}', 'w', now(), now() FROM unnest(%s::uuid[]) x",
                        (far[i:i + 100],))
            db.commit()
        db.autocommit = True
        cur.execute("ANALYZE evaluation_results, submissions, matches")
        cur.execute("SET auto_explain.log_min_duration = 0")
        start = os.path.getsize(log)
        cur.execute("SELECT applied, caught_up FROM standings_apply(100)")
        applied, caught = cur.fetchone()
        cur.execute("SET auto_explain.log_min_duration = -1")
        ok(applied == 100 and not caught, "a batch of 100 with 3,000 behind: applied %d, caught "
           "up %s" % (applied, caught))
        with open(log) as f:
            f.seek(start)
            text = f.read()
        found = []
        for p in auto_explain_plans(text):
            if "standings_apply(100)" not in p.get("Query Text", ""):
                scans(p.get("Plan", {}), found)
        # (the tasks' probes are those of the primary key; the windows' range reads are
        # the positions leaving them, bounded above)
        probes = {t: sum(max(n, 1) * loops for t2, i, n, loops in found if t2 == t and
                         (t != "standings_entries" or i == "standings_entries_pkey"))
                  for t in ("submissions", "matches", "standings_entries")}
        ok(all(0 < n <= 202 for n in probes.values()),
           "it probes about the batch's 100 results: %s rows read (or probed)" % probes,
           "\n".join("%s via %s: %d rows x %d loops" % x for x in found))
        batches = 1
        while not caught:
            cur.execute("SELECT applied, caught_up FROM standings_apply(100)")
            n, caught = cur.fetchone()
            applied += n
            batches += 1
        ok(applied == 3000 and batches == 30,
           "caught up: %d results in %d batches" % (applied, batches))
        r = subprocess.run([BIN, "standings", "--check"], env=env, capture_output=True, text=True)
        ok(r.returncode == 0, "standings --check after the catch-up", r.stdout + r.stderr)
    return done()


if __name__ == "__main__":
    raise SystemExit(main())
