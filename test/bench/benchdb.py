"""Set-based bulk fill of a migrated PostgreSQL database for the large-database benchmarks
(bench_console.py, bench_standings.py): agents, challenges, then one match, one submission
and one first evaluation result per row with generate_series inserts in chunks, and the
standings built from that history in one set-based pass of the migrations' own functions.

The rows are written with session_replication_role = replica (the foreign keys' and the
counting triggers skipped: the generated rows reference each other correctly by
construction) and with standings_xid NULL, so the projection (sql/008) leaves them to the
set-based pass, like rows written before it."""
import sys
import time

# How the rows are timed and what they hold, as SQL over the row's number g (and `at`, the
# row's own expression, below): the default is bench_standings.py's, submitted in the order
# of g one per millisecond from 2026-01-01, matched at that time, evaluated at load time.
ROWS = {
    "at": "timestamptz '2026-01-01' + g * interval '1 ms'",
    "started": "at",                        # matches.started_at
    "expires": "at + interval '1 day'",     # matches.expires_at
    "submitted": "at",                      # submissions.submitted_at
    "completed": "now()",                   # the match's and the result's completion
    "status": "'completed'",                # submissions.status
    "answer": "'{}'",                       # submissions.answer
}


def step(msg, t0):
    """Prints a step's name and the seconds since t0, at once."""
    print("%-60s %8.1f s" % (msg, time.time() - t0))
    sys.stdout.flush()


def fill(cur, agents, challenges, results, chunk, t0, rows=None, params=None):
    """Inserts agents (agent-1 ...) and challenges (bench-1 ..., deterministic), then
    results rows in chunks of chunk: row g is agent g mod agents' match on a pseudo-random
    challenge, its submission and its first result (score pseudo-random, result win / draw
    / loss from it). rows overrides entries of ROWS; params are more query parameters
    their SQL uses (%(name)s; %% for a literal %). Prints a step per chunk. cur must be in
    autocommit; it is left with session_replication_role = replica, for the caller's own
    bulk rows: the caller sets it back to origin."""
    r = dict(ROWS, **(rows or {}))
    cur.execute("SET session_replication_role = replica")
    cur.execute("INSERT INTO agents (name, elo) SELECT 'agent-' || g, 600 + (random() * 1200)::int "
                "FROM generate_series(1, %s) g", (agents,))
    cur.execute("INSERT INTO challenges (slug, difficulty, scoring_spec, time_limit_secs) "
                "SELECT 'bench-' || g, 'veteran', '{\"evaluator\":\"deterministic\"}', 600 "
                "FROM generate_series(1, %s) g", (challenges,))
    cur.execute("CREATE TEMP TABLE ag AS SELECT row_number() OVER () AS i, id FROM agents")
    cur.execute("CREATE TEMP TABLE ch AS SELECT row_number() OVER () AS i, id FROM challenges")
    cur.execute("ANALYZE ag; ANALYZE ch")
    step("agents and challenges", t0)
    sql = (
        "WITH g AS (SELECT g, gen_random_uuid() AS mid, gen_random_uuid() AS sid, "
        "  (g %% %(na)s) + 1 AS ai, ((g * 7919 + g / %(na)s) %% %(nc)s) + 1 AS ci, "
        "  ((g * 2654435761) %% 1001)::int AS sc, "
        "  " + r["started"] + " AS started, " + r["expires"] + " AS expires, "
        "  " + r["submitted"] + " AS submitted, " + r["completed"] + " AS completed, "
        "  " + r["status"] + " AS status, " + r["answer"] + " AS answer "
        "  FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) g "
        "  CROSS JOIN LATERAL (SELECT " + r["at"] + " AS at) t), "
        "m AS (INSERT INTO matches (id, agent_id, challenge_id, status, started_at, expires_at, "
        "  result, score, completed_at) "
        "  SELECT g.mid, ag.id, ch.id, 'completed', g.started, g.expires, "
        "  CASE WHEN sc >= 700 THEN 'win' WHEN sc >= 400 THEN 'draw' ELSE 'loss' END, sc, g.completed "
        "  FROM g JOIN ag ON ag.i = g.ai JOIN ch ON ch.i = g.ci), "
        "s AS (INSERT INTO submissions (id, match_id, agent_id, source_ip, answer, status, "
        "  submitted_at) SELECT g.sid, g.mid, ag.id, '192.0.2.1', g.answer::jsonb, g.status, "
        "  g.submitted FROM g JOIN ag ON ag.i = g.ai) "
        "INSERT INTO evaluation_results (submission_id, eval_seq, evaluator, score, result, "
        "  score_breakdown, submission_warnings, constraint_violations, verified, evaluation_log, "
        "  worker_id, started_at, completed_at, standings_xid) "
        "SELECT g.sid, 1, 'deterministic', sc, "
        "  CASE WHEN sc >= 700 THEN 'win' WHEN sc >= 400 THEN 'draw' ELSE 'loss' END, "
        "  '{}', '[]', '[]', false, '{}', 'bench', g.completed, g.completed, NULL "
        "FROM g ORDER BY g.g")
    done = 0
    while done < results:
        n = min(chunk, results - done)
        cur.execute(sql, dict(params or {}, na=agents, nc=challenges, lo=done + 1, hi=done + n))
        done += n
        step("results: %d" % done, t0)


def build_standings(cur):
    """Builds the standings from evaluation_results in one set-based pass of the
    migrations' own functions (standings_recompute, standings_aggregate: hash joins and
    sequential reads), with work_mem 1GB for the session."""
    cur.execute("SET work_mem = '1GB'")
    cur.execute("SELECT standings_reset(NULL)")
    cur.execute("INSERT INTO standings_entries SELECT * FROM standings_recompute(NULL)")
    cur.execute("UPDATE standings_agents sa SET ready = true, tasks = g.tasks, w_count = g.w_count, "
                "w_sum = g.w_sum, w_wins = g.w_wins, w_draws = g.w_draws, w_losses = g.w_losses, "
                "w_best = g.w_best, w_best_seq = g.w_best_seq "
                "FROM standings_aggregate('standings_entries', NULL, false) g "
                "WHERE g.agent_id = sa.agent_id")
    cur.execute("INSERT INTO standings_agent_challenges SELECT g.agent_id, g.challenge_id, g.tasks, "
                "g.w_count, g.w_sum, g.w_wins, g.w_draws, g.w_losses, g.w_best, g.w_best_seq, "
                "g.best_score, g.best_submission, g.best_submitted_at, g.best_first_id "
                "FROM standings_aggregate('standings_entries', NULL, true) g")
