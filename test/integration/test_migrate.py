#!/usr/bin/python3
"""Integration test of `arbiter migrate` and the schema of sql/ (TAP on stdout).

Against a private PostgreSQL (test/services.py): applies on an empty database,
is idempotent, three concurrent runs all succeed and apply once, the columns
are exactly those of sql/README.md, an API server's minimal
INSERTs work, the append-only tables refuse UPDATE/DELETE/TRUNCATE, the
checks hold, an edited migration is detected, and no password is printed.
"""
import glob
import hashlib
import os
import subprocess
import sys

import psycopg2

from services import Services

BIN = os.environ.get("ARBITER_BIN", "build/worker/arbiter")
ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import tap
from tap import ok


def migrate(url=None, env_url=None, extra=()):
    env = dict(os.environ)
    env.pop("ARBITER_DATABASE_URL", None)
    if env_url:
        env["ARBITER_DATABASE_URL"] = env_url
    args = [BIN, "migrate"] + (["--database-url", url] if url else []) + list(extra)
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)


def db_url(s, name):
    return "postgresql://postgres@127.0.0.1:%d/%s" % (s.pg_port, name)


def query(url, sql, params=None):
    with psycopg2.connect(url) as c, c.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall() if cur.description else None


def expect_error(url, sql, params=None):
    """Runs sql; returns the error text (or None if it succeeded)."""
    c = psycopg2.connect(url)
    try:
        with c.cursor() as cur:
            cur.execute(sql, params)
        c.commit()
        return None
    except psycopg2.Error as e:
        c.rollback()
        return "%s %s" % (e.pgcode, str(e).strip())
    finally:
        c.close()


# (column, data_type, nullable, default contains) -- sql/README.md: the API columns plus the documented additions.
EXPECTED = {
    "agents": [
        ("id", "uuid", False, "gen_random_uuid()"), ("name", "text", False, None),
        ("elo", "integer", False, "1000"), ("match_count", "integer", False, "0"),
        ("win_count", "integer", False, "0"), ("draw_count", "integer", False, "0"),
        ("loss_count", "integer", False, "0"), ("current_streak", "integer", False, "0"),
        ("best_streak", "integer", False, "0"),
        ("created_at", "timestamp with time zone", False, "now()")],
    "challenges": [
        ("id", "uuid", False, "gen_random_uuid()"), ("slug", "text", False, None),
        ("difficulty", "text", False, None), ("rating", "integer", True, None),
        ("scoring_spec", "jsonb", False, None), ("ground_truth", "jsonb", False, "'{}'"),
        ("time_limit_secs", "integer", False, None)],
    "matches": [
        ("id", "uuid", False, "gen_random_uuid()"), ("agent_id", "uuid", False, None),
        ("challenge_id", "uuid", False, None), ("status", "text", False, None),
        ("started_at", "timestamp with time zone", False, None),
        ("expires_at", "timestamp with time zone", False, None),
        ("attempt_number", "integer", False, "1"), ("memoryless", "boolean", False, "false"),
        ("verified", "boolean", True, None), ("result", "text", True, None),
        ("score", "integer", True, None), ("elo_before", "integer", True, None),
        ("elo_after", "integer", True, None), ("elo_change", "integer", True, None),
        ("completed_at", "timestamp with time zone", True, None)],
    "submissions": [
        ("id", "uuid", False, "gen_random_uuid()"), ("match_id", "uuid", False, None),
        ("agent_id", "uuid", False, None), ("source_ip", "inet", False, None),
        ("answer", "jsonb", False, None), ("metadata", "jsonb", False, "'{}'"),
        ("submitted_at", "timestamp with time zone", False, "now()"),
        ("status", "text", False, None), ("reject_reason", "text", True, None),
        ("last_error", "text", True, None), ("attempts", "integer", False, "0")],
    "evaluation_results": [
        ("id", "bigint", False, None), ("submission_id", "uuid", False, None),
        ("eval_seq", "integer", False, None), ("evaluator", "text", False, None),
        ("score", "integer", False, None), ("result", "text", False, None),
        ("score_breakdown", "jsonb", False, None), ("submission_warnings", "jsonb", False, None),
        ("constraint_violations", "jsonb", False, None), ("verified", "boolean", False, None),
        ("evaluation_log", "jsonb", False, None), ("worker_id", "text", False, None),
        ("started_at", "timestamp with time zone", False, None),
        ("completed_at", "timestamp with time zone", False, None),
        ("job_id", "text", True, None), ("elo_change", "integer", True, None),
        ("k_factor", "integer", True, None), ("elo_before", "integer", True, None),
        # sql/006: hints for the standings trigger, filled by the worker's commit
        ("standings_agent_id", "uuid", True, None), ("standings_challenge_id", "uuid", True, None),
        ("standings_submitted_at", "timestamp with time zone", True, None),
        # sql/008: the inserting transaction's id, for the standings projection
        ("standings_xid", "bigint", True, "pg_current_xact_id()")],
    "evaluation_dimensions": [
        ("result_id", "bigint", False, None), ("key", "text", False, None),
        ("score", "integer", False, None), ("weight", "numeric", False, None),
        ("weighted", "numeric", False, None), ("detail", "jsonb", True, None),
        ("reasoning", "text", True, None)],   # 003_judge: the LLM judge's reasoning
    "elo_history": [
        ("id", "bigint", False, None), ("agent_id", "uuid", True, None),
        ("match_id", "uuid", True, None), ("result_id", "bigint", True, None),
        ("elo_before", "integer", True, None), ("elo_after", "integer", True, None),
        ("elo_change", "integer", True, None), ("opponent_elo", "integer", True, None),
        ("k_factor", "integer", True, None), ("bonus", "numeric", True, None),
        ("reason", "text", True, None), ("created_at", "timestamp with time zone", False, "now()")],
    "arbiter_migrations": [
        ("version", "integer", False, None), ("name", "text", False, None),
        ("checksum", "text", False, None), ("applied_at", "timestamp with time zone", False, "now()")],
}


def check_columns(url):
    for table, cols in EXPECTED.items():
        rows = query(url, "SELECT column_name, data_type, is_nullable, column_default "
                          "FROM information_schema.columns WHERE table_schema = 'public' "
                          "AND table_name = %s ORDER BY ordinal_position", (table,))
        got = [(r[0], r[1], r[2] == "YES", r[3]) for r in rows]
        names_ok = [g[0] for g in got] == [c[0] for c in cols]
        ok(names_ok, "%s: columns %s" % (table, ", ".join(c[0] for c in cols)),
           "got %s" % [g[0] for g in got])
        if not names_ok:
            continue
        bad = []
        for (name, typ, nullable, default), (_, gtyp, gnull, gdef) in zip(cols, got):
            if typ != gtyp or nullable != gnull:
                bad.append("%s: %s null=%s, want %s null=%s" % (name, gtyp, gnull, typ, nullable))
            if default is not None and (gdef is None or default not in gdef):
                bad.append("%s: default %r, want %r" % (name, gdef, default))
        ok(not bad, "%s: types, nullability and defaults" % table, "\n".join(bad))


def seed_api_rows(url):
    """What an API server inserts: only the API columns of sql/README.md, defaults for the rest."""
    with psycopg2.connect(url) as c, c.cursor() as cur:
        cur.execute("INSERT INTO agents (id, name) VALUES (gen_random_uuid(), 'alpha') RETURNING id")
        agent = cur.fetchone()[0]
        cur.execute("INSERT INTO agents (name) VALUES ('beta')")
        cur.execute("""INSERT INTO challenges (id, slug, difficulty, rating, scoring_spec, ground_truth,
                       time_limit_secs) VALUES (gen_random_uuid(), 'two-sum', 'veteran', NULL,
                       '{"evaluator":"deterministic"}', '{"a":1}', 600) RETURNING id""")
        chal = cur.fetchone()[0]
        cur.execute("""INSERT INTO challenges (slug, difficulty, scoring_spec, time_limit_secs)
                       VALUES ('minimal', 'newcomer', '{}', 60)""")
        cur.execute("""INSERT INTO matches (id, agent_id, challenge_id, status, started_at, expires_at)
                       VALUES (gen_random_uuid(), %s, %s, 'active', now(), now() + interval '1 hour')
                       RETURNING id""", (agent, chal))
        match = cur.fetchone()[0]
        cur.execute("""INSERT INTO submissions (id, match_id, agent_id, source_ip, answer, status)
                       VALUES (gen_random_uuid(), %s, %s, '203.0.113.7', '{"x":1}', 'queued')
                       RETURNING id""", (match, agent))
        sub = cur.fetchone()[0]
        cur.execute("""INSERT INTO submissions (match_id, agent_id, source_ip, answer, metadata,
                       submitted_at, status) VALUES (%s, %s, '2001:db8::1', '[]', '{}', now(), 'queued')""",
                    (match, agent))
    return agent, chal, match, sub


def main():
    with Services(redis=False) as s:
        url = s.database_url

        r = migrate(extra=["--help"])
        ok(r.returncode == 0 and "migrate" in r.stdout, "migrate --help exits 0")

        r = migrate(url)
        ok(r.returncode == 0, "migrate on an empty database exits 0", r.stderr)
        ok("applied 001_initial" in r.stdout, "prints what it applied", r.stdout)
        check_columns(url)

        r = migrate(url)
        ok(r.returncode == 0, "second run exits 0", r.stderr)
        ok("applied 0" not in r.stdout and "up to date" in r.stdout,
           "second run applies nothing", r.stdout)
        rows = query(url, "SELECT version, name, length(checksum), applied_at IS NOT NULL "
                          "FROM arbiter_migrations ORDER BY version")
        ok(rows and rows[0] == (1, "initial", 64, True), "arbiter_migrations records 001", rows)

        # Environment variable instead of the flag.
        r = migrate(env_url=url)
        ok(r.returncode == 0, "ARBITER_DATABASE_URL is used", r.stderr)

        # The worker's configuration file (--config or ARBITER_CONFIG), lowest precedence.
        cfg = os.path.join(s.tmp, "arbiter.conf")
        with open(cfg, "w") as f:
            f.write("# test\nARBITER_REDIS_URL=redis://127.0.0.1:1/0\nARBITER_DATABASE_URL='%s'\n" % url)
        r = migrate(extra=["--config", cfg])
        ok(r.returncode == 0 and "up to date" in r.stdout, "--config FILE supplies the URL", r.stderr)
        env = dict(os.environ, ARBITER_CONFIG=cfg)
        env.pop("ARBITER_DATABASE_URL", None)
        r = subprocess.run([BIN, "migrate"], capture_output=True, text=True, env=env, timeout=60)
        ok(r.returncode == 0, "ARBITER_CONFIG supplies the URL", r.stderr)
        r = migrate("postgresql://postgres@127.0.0.1:1/arbiter", extra=["--config", cfg])
        ok(r.returncode == 1, "--database-url wins over the file")
        # The file is read as the worker reads it: a misspelt setting is an error.
        bad = os.path.join(s.tmp, "typo.conf")
        with open(bad, "w") as f:
            f.write("ARBITER_DATABASE_URLL='%s'\n" % url)
        r = migrate(extra=["--config", bad])
        ok(r.returncode == 2 and "unknown setting 'ARBITER_DATABASE_URLL'" in r.stderr,
           "a misspelt setting in the file is named (exit 2)", r.stderr)

        # Three replicas migrating a fresh database at once.
        s.psql("postgres", "CREATE DATABASE arbiter_conc")
        curl = db_url(s, "arbiter_conc")
        env = dict(os.environ, ARBITER_DATABASE_URL=curl)
        procs = [subprocess.Popen([BIN, "migrate"], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(3)]
        outs = [p.communicate(timeout=120) + (p.returncode,) for p in procs]
        ok(all(o[2] == 0 for o in outs), "3 concurrent migrate processes all exit 0",
           "\n".join(o[1] for o in outs))
        applied = sum(o[0].count("applied 001_initial") for o in outs)
        ok(applied == 1, "exactly one of them applied 001 (%d)" % applied)
        nsql = len([f for f in os.listdir(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                       "..", "..", "sql")) if f.endswith(".sql")])
        ok(query(curl, "SELECT count(*) FROM arbiter_migrations")[0][0] == nsql,
           "one row per migration in arbiter_migrations (%d)" % nsql)

        # Errors: non-zero, the reason, never the password.
        r = migrate("postgresql://bob:s3cr3tpw@127.0.0.1:1/arbiter")
        ok(r.returncode != 0, "unreachable database: non-zero exit")
        ok("s3cr3tpw" not in r.stdout + r.stderr, "password not printed", r.stderr)
        ok("host=127.0.0.1" in r.stderr and "user=bob password=***" in r.stderr, "error names the (redacted) target",
           r.stderr)
        r = migrate("host=127.0.0.1 port=1 password=s3cr3tpw bogus_option=1")
        ok(r.returncode != 0 and "s3cr3tpw" not in r.stdout + r.stderr,
           "invalid conninfo: non-zero exit, password not printed", r.stderr)
        r = migrate("postgresql://bob:s3cr3tpw@127.0.0.1:1/x?sslmode=%zz")
        ok(r.returncode != 0 and "s3cr3tpw" not in r.stdout + r.stderr,
           "invalid URI: non-zero exit, password not printed", r.stderr)

        # An edited migration is detected.
        s.psql("postgres", "CREATE DATABASE arbiter_edit")
        eurl = db_url(s, "arbiter_edit")
        migrate(eurl)
        # The recorded checksum covers the statements (comments excluded), as
        # scripts/embed-sql computes it; rows written by older binaries (SHA-256 of the
        # whole file; for 001 of its first wording) are still accepted.
        from importlib.machinery import SourceFileLoader
        embed = SourceFileLoader("embed_sql", os.path.join(ROOT, "scripts", "embed-sql")).load_module()
        files = sorted(f for f in os.listdir(os.path.join(ROOT, "sql")) if f.endswith(".sql"))
        want = {int(f[:3]): hashlib.sha256(embed.statements(
            open(os.path.join(ROOT, "sql", f), encoding="utf-8").read())).hexdigest() for f in files}
        got = dict(query(eurl, "SELECT version, checksum FROM arbiter_migrations"))
        ok(got == want, "arbiter_migrations records each migration's statements checksum", got)
        ok(embed.statements("SELECT '--not a comment' -- a comment\n/* block */ ;\n\n")
           == b"SELECT '--not a comment'\n ;", "statements(): comments outside literals dropped")
        for f in files:
            raw = hashlib.sha256(open(os.path.join(ROOT, "sql", f), "rb").read()).hexdigest()
            query(eurl, "UPDATE arbiter_migrations SET checksum = %s WHERE version = %s", (raw, int(f[:3])))
        query(eurl, "UPDATE arbiter_migrations SET checksum = %s WHERE version = 1",
              ("8193415dbc724e780da61819aeec66b89d826fdb6f2d32d13ed6093a1f066f3e",))
        r = migrate(eurl)
        ok(r.returncode == 0, "rows an older binary wrote (whole-file checksums) are accepted", r.stderr)
        query(eurl, "UPDATE arbiter_migrations SET checksum = repeat('0', 64)")
        r = migrate(eurl)
        ok(r.returncode != 0 and "edited" in r.stderr, "checksum mismatch refused", r.stderr)

        # The API server's inserts, defaults.
        agent, chal, match, sub = seed_api_rows(url)
        ok(True, "API server's minimal INSERTs into agents, challenges, matches, submissions")
        row = query(url, "SELECT elo, match_count, win_count, current_streak, best_streak "
                         "FROM agents WHERE id = %s", (agent,))[0]
        ok(row == (1000, 0, 0, 0, 0), "agent defaults", row)
        row = query(url, "SELECT attempt_number, memoryless, verified FROM matches WHERE id = %s",
                    (match,))[0]
        ok(row == (1, False, None), "match defaults", row)
        row = query(url, "SELECT metadata::text, attempts, submitted_at IS NOT NULL FROM submissions "
                         "WHERE id = %s", (sub,))[0]
        ok(row == ("{}", 0, True), "submission defaults", row)

        # Checks.
        e = expect_error(url, "INSERT INTO challenges (slug, difficulty, scoring_spec, time_limit_secs) "
                              "VALUES ('bad', 'impossible', '{}', 60)")
        ok(e and e.startswith("23514"), "difficulty check", e)
        e = expect_error(url, "INSERT INTO challenges (slug, difficulty, scoring_spec, time_limit_secs) "
                              "VALUES ('bad2', 'newcomer', '{}', 0)")
        ok(e and e.startswith("23514"), "time_limit_secs > 0", e)
        e = expect_error(url, "INSERT INTO challenges (slug, difficulty, scoring_spec, time_limit_secs) "
                              "VALUES ('minimal', 'newcomer', '{}', 10)")
        ok(e and e.startswith("23505"), "slug unique", e)
        e = expect_error(url, "UPDATE submissions SET status = 'done' WHERE id = %s", (sub,))
        ok(e and e.startswith("23514"), "submission status check", e)
        e = expect_error(url, "UPDATE matches SET status = 'weird' WHERE id = %s", (match,))
        ok(e and e.startswith("23514"), "match status check", e)

        # What the worker writes.
        with psycopg2.connect(url) as c, c.cursor() as cur:
            cur.execute("""INSERT INTO evaluation_results (submission_id, eval_seq, evaluator, score, result,
                           score_breakdown, submission_warnings, constraint_violations, verified,
                           evaluation_log, worker_id, started_at, completed_at, job_id, elo_change,
                           k_factor, elo_before)
                           VALUES (%s, 1, 'deterministic', 823, 'win', '{}', '[]', '[]', false, '{}',
                           'w1', now(), now(), '1-0', 23, 32, 1050) RETURNING id""", (sub,))
            rid = cur.fetchone()[0]
            cur.execute("INSERT INTO evaluation_dimensions VALUES (%s, 'correctness', 900, 0.5, 450, NULL)",
                        (rid,))
            cur.execute("""INSERT INTO elo_history (agent_id, match_id, result_id, elo_before, elo_after,
                           elo_change, opponent_elo, k_factor, bonus, reason)
                           VALUES (%s, %s, %s, 1050, 1073, 23, 1200, 32, 1.0, 'evaluation')""",
                        (agent, match, rid))
        ok(True, "worker-style inserts into the append-only tables")
        e = expect_error(url, "INSERT INTO evaluation_results (submission_id, eval_seq, evaluator, score, result, "
                              "score_breakdown, submission_warnings, constraint_violations, verified, "
                              "evaluation_log, worker_id, started_at, completed_at) VALUES (%s, 1, 'x', 1, "
                              "'win', '{}', '[]', '[]', false, '{}', 'w', now(), now())", (sub,))
        ok(e and e.startswith("23505"), "unique (submission_id, eval_seq)", e)
        e = expect_error(url, "INSERT INTO evaluation_results (submission_id, eval_seq, evaluator, score, result, "
                              "score_breakdown, submission_warnings, constraint_violations, verified, "
                              "evaluation_log, worker_id, started_at, completed_at, job_id) VALUES (%s, 2, "
                              "'x', 1, 'win', '{}', '[]', '[]', false, '{}', 'w', now(), now(), '1-0')", (sub,))
        ok(e and e.startswith("23505"), "unique (submission_id, job_id)", e)
        e = expect_error(url, "INSERT INTO evaluation_results (submission_id, eval_seq, evaluator, score, result, "
                              "score_breakdown, submission_warnings, constraint_violations, verified, "
                              "evaluation_log, worker_id, started_at, completed_at) VALUES (%s, 3, 'x', 1001, "
                              "'win', '{}', '[]', '[]', false, '{}', 'w', now(), now())", (sub,))
        ok(e and e.startswith("23514"), "score between 0 and 1000", e)
        e = expect_error(url, "INSERT INTO evaluation_results (submission_id, eval_seq, evaluator, score, result, "
                              "score_breakdown, submission_warnings, constraint_violations, verified, "
                              "evaluation_log, worker_id, started_at, completed_at) VALUES (%s, 1, 'x', 1, "
                              "'win', '{}', '[]', '[]', false, '{}', 'w', now(), now()) "
                              "ON CONFLICT DO NOTHING", (sub,))
        ok(e is None, "INSERT ... ON CONFLICT DO NOTHING is allowed", e)
        e = expect_error(url, "INSERT INTO elo_history (agent_id, reason) VALUES (%s, 'bonus')", (agent,))
        ok(e and e.startswith("23514"), "elo_history reason check", e)

        # Append-only.
        for table, where in (("evaluation_results", "id = %d" % rid),
                             ("evaluation_dimensions", "result_id = %d" % rid),
                             ("elo_history", "true")):
            col = {"evaluation_results": "score", "evaluation_dimensions": "score",
                   "elo_history": "elo_after"}[table]
            e = expect_error(url, "UPDATE %s SET %s = 0 WHERE %s" % (table, col, where))
            ok(e and "append-only" in e, "UPDATE on %s refused" % table, e)
            e = expect_error(url, "DELETE FROM %s WHERE %s" % (table, where))
            ok(e and "append-only" in e, "DELETE on %s refused" % table, e)
            e = expect_error(url, "DELETE FROM %s WHERE false" % table)
            ok(e and "append-only" in e, "DELETE touching no row on %s refused too" % table, e)
            e = expect_error(url, "TRUNCATE %s CASCADE" % table)
            ok(e and "append-only" in e, "TRUNCATE on %s refused" % table, e)
        e = expect_error(url, "TRUNCATE agents CASCADE")
        ok(e and "append-only" in e, "TRUNCATE cascading into them refused", e)
        n = query(url, "SELECT (SELECT count(*) FROM evaluation_results) + "
                       "(SELECT count(*) FROM evaluation_dimensions) + (SELECT count(*) FROM elo_history)")
        ok(n[0][0] == 3, "rows intact", n)

        # Indexes the worker relies on.
        idx = {r[0]: r[1] for r in query(url, "SELECT indexname, indexdef FROM pg_indexes "
                                              "WHERE schemaname = 'public'")}
        d = idx.get("submissions_unfinished_idx", "")
        ok("(submitted_at)" in d and "queued" in d and "evaluating" in d,
           "partial index on submissions(submitted_at) for unfinished ones", d)
        ok("(agent_id)" in idx.get("matches_agent_id_idx", ""), "index on matches(agent_id)")
        ok("(agent_id, id)" in idx.get("elo_history_agent_id_idx", ""), "index on elo_history(agent_id, id)")
        ok(any("(submission_id, eval_seq)" in v for v in idx.values()),
           "evaluation_results indexed by submission_id (unique with eval_seq)")
        ok(any("evaluation_dimensions" in v and "(result_id, key)" in v for v in idx.values()),
           "evaluation_dimensions primary key (result_id, key)")
        plan = query(url, "EXPLAIN SELECT id FROM submissions WHERE status IN ('queued', 'evaluating') "
                          "ORDER BY submitted_at LIMIT 100")
        ok(any("submissions_unfinished_idx" in p[0] for p in plan),
           "the reconciler's query can use the partial index", plan)

    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
