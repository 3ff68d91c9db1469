#!/usr/bin/python3
"""A commit's cost does not grow with the history, whatever its session planned
first (TAP).

The worker prepares its commit statements once per connection; PostgreSQL then
keeps a generic plan made with the statistics of that moment. Here the worker's
sessions plan while evaluation_results holds a handful of rows (analyzed so;
autovacuum is off on the table so the statistics stay small), then the history
grows by 3,000 first results written as an API server's backfill would, and the
same worker commits a second batch with auto_explain logging every top-level
plan with its row counts. The submissions' lock statement must probe
evaluation_results per submission (a few rows per loop), never read the
history: with EXISTS the planner could keep its hashed form, which reads every
first result on each commit (worker/commit.c, SQL_LOCK_SUBS). The same holds
for the statements that load a batch's submissions and their challenges
(worker/worker.c, SQL_LOAD and SQL_LOAD_CHALLENGES): planned on small tables
they hash-joined a sequential scan of all matches, on every batch.

And the statements run their generic plan, made once per connection, not a
plan per call: pg_stat_statements counts at most one plan per worker
connection for each of them (worker/commit.c, SQL_KEYED_PLANS). Left to
PostgreSQL's choice, the statements taking the batch's ids as an array were
planned on every call (a custom plan knows the array's length, so it always
looked cheaper), ~0.5 ms of planning per evaluation in small batches.
"""
import os

from services import Services, auto_explain_plans
from workerkit import SPEC_X, Arena, Worker, bulk, done, migrate, ok, wait_for

HISTORY = 3000


def reads(node, rel, acc):
    """Rows read per loop (kept + filtered) by every scan of rel under node."""
    if node.get("Relation Name") == rel:
        acc.append(node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0) +
                   node.get("Rows Removed by Index Recheck", 0))
    for c in node.get("Plans", []):
        reads(c, rel, acc)
    return acc


def main():
    with Services(pg_settings={"shared_preload_libraries": "pg_stat_statements",
                               "pg_stat_statements.track_planning": "on"}) as s:
        migrate(s)
        a = Arena(s)
        a.q("CREATE EXTENSION pg_stat_statements")
        # Every new session of the workers logs its plans (top-level statements only).
        a.q("ALTER DATABASE arbiter SET session_preload_libraries = 'auto_explain'")
        for k, v in (("log_min_duration", "0"), ("log_analyze", "on"), ("log_format", "json")):
            a.q("ALTER DATABASE arbiter SET auto_explain.%s = '%s'" % (k, v))
        a.q("ALTER TABLE evaluation_results SET (autovacuum_enabled = false)")
        a.q("ALTER TABLE submissions SET (autovacuum_enabled = false)")
        a.q("ALTER TABLE matches SET (autovacuum_enabled = false)")
        agents = [a.agent() for _ in range(4)]
        ch = a.challenge(SPEC_X, {"x": 1})
        first = bulk(a, agents, ch, 4, enqueue=False)
        a.q("INSERT INTO evaluation_results (submission_id, eval_seq, evaluator, score, result, "
            "score_breakdown, submission_warnings, constraint_violations, verified, "
            "evaluation_log, worker_id, started_at, completed_at) "
            "SELECT x, 1, 'deterministic', 500, 'draw', '{}', '[]', '[]', false, '{}', 'api', "
            "now(), now() FROM unnest(%s::uuid[]) x", first)
        a.q("UPDATE submissions SET status = 'completed' WHERE id = ANY(%s::uuid[])", first)
        a.q("ANALYZE evaluation_results")
        a.q("ANALYZE submissions")
        a.q("ANALYZE matches")

        w = Worker(s, env={"ARBITER_BATCH_MAX": "8"})
        # Small batches, one at a time: more than five executions of each statement, so
        # PostgreSQL settles on the generic plan while the history is tiny.
        warm = []
        for _ in range(8):
            ids = bulk(a, agents, ch, 4)
            warm += ids
            wait_for(lambda: a.count_status(ids) == len(ids), 30)
        ok(a.count_status(warm) == len(warm), "warm-up: %d jobs committed on tiny tables" % len(warm))

        # The history grows behind the worker's back (no new statistics).
        old = bulk(a, agents, ch, HISTORY, enqueue=False)
        a.q("INSERT INTO evaluation_results (submission_id, eval_seq, evaluator, score, result, "
            "score_breakdown, submission_warnings, constraint_violations, verified, "
            "evaluation_log, worker_id, started_at, completed_at) "
            "SELECT x, 1, 'deterministic', 500, 'draw', '{}', '[]', '[]', false, '{}', 'api', "
            "now(), now() FROM unnest(%s::uuid[]) x", old)
        a.q("UPDATE submissions SET status = 'completed' WHERE id = ANY(%s::uuid[])", old)

        log = os.path.join(s.tmp, "postgres.log")
        start = os.path.getsize(log)
        late = bulk(a, agents, ch, 8)
        ok(wait_for(lambda: a.count_status(late) == len(late), 60),
           "8 more jobs committed after the history grew to %d results" % HISTORY)
        w.term()
        with open(log) as f:
            f.seek(start)
            text = f.read()
        lock = [p.get("Plan", {}) for p in auto_explain_plans(text)
                if "FOR NO KEY UPDATE OF s" in p.get("Query Text", "")]
        ok(lock, "auto_explain logged the submissions' lock statement (%d plans)" % len(lock))
        for rel in ("evaluation_results", "matches"):
            seen = [n for p in lock for n in reads(p, rel, [])]
            worst = max(seen, default=0)
            ok(seen and worst <= 8,
               "its scans of %s read at most a few rows per loop, not the history of %d "
               "(%d scans, worst %d)" % (rel, HISTORY, len(seen), worst))
        plans = auto_explain_plans(text)
        for name, marker in (("load", "s.answer::text"), ("challenges' load", "c.scoring_spec::text")):
            load = [p.get("Plan", {}) for p in plans if marker in p.get("Query Text", "")]
            ok(load, "auto_explain logged the %s statement (%d plans)" % (name, len(load)))
            for rel in ("matches", "submissions"):
                seen = [n for p in load for n in reads(p, rel, [])]
                worst = max(seen, default=0)
                ok(seen and worst <= 8,
                   "the %s statement's scans of %s read at most a few rows per loop, not the "
                   "%d of the history (%d scans, worst %d)" % (name, rel, HISTORY, len(seen), worst))
        # One plan per connection (4 in the pool, 1 for reads), whatever the calls.
        for name, marker in (("load", "s.answer::text"), ("challenges' load", "c.scoring_spec::text"),
                             ("submissions' lock", "FOR NO KEY UPDATE OF s"),
                             ("agents' lock", "best_streak FROM agents"),
                             ("first evaluations' write", "INSERT INTO evaluation_results"),
                             # the small fixed statements of every commit (pg_stat_statements
                             # shows their constants as parameters)
                             ("transaction's settings", "set_config($10, $11, $12)"),
                             ("writes' settings", "SELECT set_config($1, $2, $3), set_config($4, "
                                                  "$5, $6), set_config($7, $8, $9)"),
                             ("completion notification", "pg_notify(")):
            # a whole statement (it starts with SELECT) or a part of one
            whole = marker.startswith("SELECT ")
            calls, nplans = a.q1("SELECT coalesce(sum(calls), 0)::int, coalesce(sum(plans), 0)::int "
                                 "FROM pg_stat_statements WHERE (query LIKE %s OR query = %s) "
                                 "AND query NOT LIKE %s",
                                 None if whole else "%" + marker + "%", marker if whole else None,
                                 "%pg_stat_statements%")
            ok(calls >= 9 and nplans <= 5,
               "the %s statement runs a generic plan made once per connection: %d calls, "
               "%d plans" % (name, calls, nplans))
        a.close()
    return done()


if __name__ == "__main__":
    raise SystemExit(main())
