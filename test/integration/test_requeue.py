#!/usr/bin/python3
"""Integration test of scripts/requeue (TAP on stdout).

Against a private PostgreSQL and Redis: a dry run enqueues nothing; selection
by ids, by challenge (slug or id) and by submitted_at range XADDs the right
jobs with the fields of worker/README.md "Jobs"; submissions without a result are enqueued as
`evaluate` when still queued and skipped otherwise; SQL-injection-looking
input is only ever data; errors exit non-zero without printing passwords.
"""
import os
import subprocess
import sys
import time

import psycopg2
import redis

from services import Services

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("ARBITER_BIN", os.path.join(ROOT, "build/worker/arbiter"))
REQUEUE = os.path.join(ROOT, "scripts", "requeue")

import tap
from tap import ok


EVIL = "x'); DROP TABLE submissions; --"


def seed(url):
    """Two challenges, one agent, five submissions (three with a result)."""
    ids = {}
    with psycopg2.connect(url) as c, c.cursor() as cur:
        cur.execute("INSERT INTO agents (name) VALUES ('alpha') RETURNING id")
        agent = cur.fetchone()[0]
        for slug in ("two-sum", EVIL):
            cur.execute("INSERT INTO challenges (slug, difficulty, scoring_spec, time_limit_secs) "
                        "VALUES (%s, 'veteran', '{}', 600) RETURNING id", (slug,))
            ids[slug] = cur.fetchone()[0]
        rows = [("s1", "two-sum", "completed", "2025-01-01T10:00:00Z", True),
                ("s2", "two-sum", "completed", "2025-01-02T10:00:00Z", True),
                ("s3", "two-sum", "queued", "2025-01-03T10:00:00Z", False),
                ("s4", EVIL, "rejected", "2025-01-01T12:00:00Z", False),
                ("s5", EVIL, "completed", "2025-01-05T10:00:00Z", True)]
        for name, slug, status, ts, has_result in rows:
            cur.execute("INSERT INTO matches (agent_id, challenge_id, status, started_at, expires_at) "
                        "VALUES (%s, %s, 'active', %s, %s::timestamptz + interval '1 hour') RETURNING id",
                        (agent, ids[slug], ts, ts))
            match = cur.fetchone()[0]
            cur.execute("INSERT INTO submissions (match_id, agent_id, source_ip, answer, submitted_at, status) "
                        "VALUES (%s, %s, '198.51.100.1', '{}', %s, %s) RETURNING id",
                        (match, agent, ts, status))
            ids[name] = cur.fetchone()[0]
            if has_result:
                cur.execute("""INSERT INTO evaluation_results (submission_id, eval_seq, evaluator, score,
                               result, score_breakdown, submission_warnings, constraint_violations, verified,
                               evaluation_log, worker_id, started_at, completed_at)
                               VALUES (%s, 1, 'deterministic', 700, 'win', '{}', '[]', '[]', false, '{}',
                               'w', now(), now())""", (ids[name],))
    return ids


def requeue(s, *args, prefix=None, redis_url=None, db=None):
    cmd = [REQUEUE, "--database-url", db or s.database_url,
           "--redis-url", redis_url or s.redis_url] + (["--prefix", prefix] if prefix else []) + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def entries(r, stream="arbiter:jobs:bulk"):
    out = []
    for _id, fields in r.xrange(stream):
        out.append({k.decode(): v.decode() for k, v in fields.items()})
    return out


def main():
    with Services() as s:
        m = subprocess.run([BIN, "migrate", "--database-url", s.database_url],
                           capture_output=True, text=True, timeout=120)
        ok(m.returncode == 0, "schema migrated", m.stderr)
        ids = seed(s.database_url)
        r = redis.Redis.from_url(s.redis_url)

        # Dry run by ids: reports everything, enqueues nothing.
        res = requeue(s, "--dry-run", "--ids", ids["s1"], ids["s3"], ids["s4"], "not-a-uuid",
                      "' OR 1=1 --", "00000000-0000-4000-8000-000000000000")
        ok(res.returncode == 0, "dry run exits 0", res.stderr)
        out = res.stdout
        ok("would enqueue reevaluate %s" % ids["s1"] in out, "dry run: s1 would be re-evaluated", out)
        ok("would enqueue evaluate %s" % ids["s3"] in out, "dry run: queued s3 would be evaluated", out)
        ok("skip %s: status rejected" % ids["s4"] in out, "dry run: rejected s4 without result skipped", out)
        ok("skip not-a-uuid: not a UUID" in out and "skip ' OR 1=1 --: not a UUID" in out,
           "non-UUID ids (injection-looking too) reported and skipped", out)
        ok("skip 00000000-0000-4000-8000-000000000000: no such submission" in out,
           "unknown id reported", out)
        ok("dry run: would enqueue 2 jobs" in out, "dry-run summary", out)
        ok(r.xlen("arbiter:jobs:bulk") == 0, "dry run enqueued nothing")

        # By ids, elo=adjust.
        t0 = int(time.time() * 1000)
        res = requeue(s, "--ids", ids["s1"], ids["s2"], "--elo", "adjust")
        ok(res.returncode == 0, "requeue by ids exits 0", res.stderr)
        ok("progress 2/2" in res.stderr, "progress line", res.stderr)
        e = entries(r)
        ok(len(e) == 2, "two jobs enqueued", e)
        ok(sorted(x["submission_id"] for x in e) == sorted([ids["s1"], ids["s2"]]), "the right submissions", e)
        ok(all(x["kind"] == "reevaluate" and x["elo"] == "adjust" for x in e), "kind=reevaluate elo=adjust", e)
        ok(all(t0 - 1000 <= int(x["enqueued_at"]) <= int(time.time() * 1000) for x in e),
           "enqueued_at is Unix ms", e)
        ok(all(set(x) == {"submission_id", "kind", "elo", "enqueued_at"} for x in e), "only the documented job fields", e)
        r.delete("arbiter:jobs:bulk")

        # By challenge slug: two re-evaluations + one evaluate (still queued).
        res = requeue(s, "--challenge", "two-sum")
        ok(res.returncode == 0, "requeue by challenge slug exits 0", res.stderr)
        e = entries(r)
        kinds = {x["submission_id"]: x["kind"] for x in e}
        ok(kinds == {ids["s1"]: "reevaluate", ids["s2"]: "reevaluate", ids["s3"]: "evaluate"},
           "two-sum: s1, s2 reevaluate, s3 evaluate", e)
        ok(all(x.get("elo") == "keep" for x in e if x["kind"] == "reevaluate"), "elo=keep by default", e)
        ok(all("elo" not in x for x in e if x["kind"] == "evaluate"), "evaluate jobs carry no elo", e)
        ok("enqueued 3 jobs" in res.stdout, "summary", res.stdout)
        r.delete("arbiter:jobs:bulk")

        # --rejudge: the LLM judge is asked again (field rejudge=1 on every job).
        res = requeue(s, "--ids", ids["s1"], "--rejudge")
        e = entries(r)
        ok(res.returncode == 0 and len(e) == 1 and e[0].get("rejudge") == "1" and
           e[0]["kind"] == "reevaluate", "--rejudge adds rejudge=1", (res.stderr, e))
        r.delete("arbiter:jobs:bulk")

        # By challenge id, and a slug that looks like SQL injection is just a slug.
        res = requeue(s, "--challenge", str(ids[EVIL]))
        e = entries(r)
        ok(res.returncode == 0 and [x["submission_id"] for x in e] == [ids["s5"]],
           "by challenge id: only s5 (s4 rejected without result is skipped)", res.stdout + res.stderr)
        r.delete("arbiter:jobs:bulk")
        res = requeue(s, "--challenge", EVIL)
        e = entries(r)
        ok(res.returncode == 0 and [x["submission_id"] for x in e] == [ids["s5"]],
           "an injection-looking slug matches only as data", res.stdout + res.stderr)
        r.delete("arbiter:jobs:bulk")
        res = requeue(s, "--challenge", "nope' OR '1'='1")
        ok(res.returncode == 2 and "no challenge" in res.stderr, "unknown challenge: exit 2", res.stderr)
        ok(r.xlen("arbiter:jobs:bulk") == 0, "nothing enqueued")

        # By time range [from, to).
        res = requeue(s, "--from", "2025-01-01T00:00:00Z", "--to", "2025-01-02T10:00:00Z")
        e = entries(r)
        ok(res.returncode == 0 and [x["submission_id"] for x in e] == [ids["s1"]],
           "time range: s1 only (s4 skipped, s2 at the exclusive bound)", res.stdout + res.stderr)
        r.delete("arbiter:jobs:bulk")
        res = requeue(s, "--from", "2025-01-01T00:00:00Z", "--to", "2025-01-10T00:00:00Z", "--prefix", "other")
        e = entries(r, "other:jobs:bulk")
        ok(res.returncode == 0 and len(e) == 4, "wider range with --prefix other: 4 jobs in other:jobs:bulk",
           res.stdout + res.stderr)
        ok(r.xlen("arbiter:jobs:bulk") == 0, "nothing in the default stream")
        res = requeue(s, "--from", "2025-01-01'; DROP TABLE submissions; --", "--to", "2025-02-01")
        ok(res.returncode == 2 and "not an ISO 8601 timestamp" in res.stderr
           and "Traceback" not in res.stderr, "injection-looking timestamp: usage error before any SQL",
           res.stderr)
        res = requeue(s, "--from", "garbage", "--to", "2025-02-01T00:00:00Z")
        ok(res.returncode == 2 and "SELECT" not in res.stdout + res.stderr
           and "Traceback" not in res.stderr, "--from garbage: exit 2, no SQL, no traceback", res.stderr)
        n = s.psql("arbiter", "SELECT count(*) FROM submissions").stdout.strip()
        ok(n == "5", "submissions table intact (%s rows)" % n)

        # Usage and connection errors.
        res = requeue(s, "--from", "2025-01-01")
        ok(res.returncode == 2, "--from without --to: usage error")
        res = requeue(s, "--ids", ids["s1"], redis_url="redis://:hunter2pw@127.0.0.1:1/0")
        ok(res.returncode == 1 and "hunter2pw" not in res.stdout + res.stderr,
           "Redis unreachable: exit 1 without the password", res.stderr)
        res = requeue(s, "--ids", ids["s1"], db="postgresql://bob:hunter2pw@127.0.0.1:1/arbiter")
        ok(res.returncode == 1 and "hunter2pw" not in res.stdout + res.stderr,
           "PostgreSQL unreachable: exit 1 without the password", res.stderr)

        # --lane live: straight into the live stream.
        r.delete("arbiter:jobs")
        res = requeue(s, "--ids", ids["s1"], "--lane", "live")
        ok(res.returncode == 0 and len(entries(r, "arbiter:jobs")) == 1, "--lane live: {prefix}:jobs",
           res.stdout + res.stderr)

        # A failed submission: skipped unless --include-failed.
        with psycopg2.connect(s.database_url) as c, c.cursor() as cur:
            cur.execute("SELECT agent_id, match_id FROM submissions WHERE id = %s", (ids["s3"],))
            agent, match = cur.fetchone()
            cur.execute("INSERT INTO submissions (match_id, agent_id, source_ip, answer, status, "
                        "last_error, attempts) VALUES (%s, %s, '198.51.100.1', '{}', 'failed', "
                        "'sandbox could not start', 5) RETURNING id", (match, agent))
            failed = cur.fetchone()[0]
        c.close()
        before = r.xlen("arbiter:jobs:bulk")
        res = requeue(s, "--ids", failed)
        ok(res.returncode == 0 and "pass --include-failed" in res.stdout
           and r.xlen("arbiter:jobs:bulk") == before, "a failed submission is skipped, with a hint",
           res.stdout + res.stderr)
        res = requeue(s, "--ids", failed, "--include-failed")
        e = entries(r)[before:]
        ok(res.returncode == 0 and len(e) == 1 and e[0]["kind"] == "evaluate"
           and e[0]["submission_id"] == failed, "--include-failed enqueues kind=evaluate",
           (res.stdout + res.stderr, e))
        row = s.psql("arbiter", "SELECT status, attempts, coalesce(last_error, '-') FROM submissions "
                     "WHERE id = '%s'" % failed).stdout.strip()
        ok(row == "queued|0|-", "--include-failed set it back to queued (attempts 0, error cleared)", row)

        # Bulk confirmation: --elo adjust over a challenge, or more than --confirm-over jobs.
        before = r.xlen("arbiter:jobs:bulk")
        res = subprocess.run([REQUEUE, "--database-url", s.database_url, "--redis-url", s.redis_url,
                              "--challenge", "two-sum", "--elo", "adjust"],
                             input="", capture_output=True, text=True, timeout=60)
        ok(res.returncode == 1 and "aborted" in res.stdout and "--yes" in res.stdout
           and r.xlen("arbiter:jobs:bulk") == before,
           "--elo adjust over a challenge without an answer: aborted, nothing enqueued", res.stdout)
        res = subprocess.run([REQUEUE, "--database-url", s.database_url, "--redis-url", s.redis_url,
                              "--challenge", "two-sum", "--elo", "adjust"],
                             input="y\n", capture_output=True, text=True, timeout=60)
        ok(res.returncode == 0 and r.xlen("arbiter:jobs:bulk") > before, "answered y: enqueued", res.stdout)
        before = r.xlen("arbiter:jobs:bulk")
        res = subprocess.run([REQUEUE, "--database-url", s.database_url, "--redis-url", s.redis_url,
                              "--challenge", "two-sum", "--confirm-over", "1"],
                             input="n\n", capture_output=True, text=True, timeout=60)
        ok(res.returncode == 1 and "more than --confirm-over 1" in res.stdout
           and r.xlen("arbiter:jobs:bulk") == before, "more jobs than --confirm-over, answered n: aborted",
           res.stdout)
        res = requeue(s, "--challenge", "two-sum", "--confirm-over", "1", "--yes")
        ok(res.returncode == 0 and r.xlen("arbiter:jobs:bulk") > before, "--yes enqueues without asking",
           res.stdout + res.stderr)

        # --config: the worker's file (export, trailing comments), below the environment.
        cfg = os.path.join(s.tmp, "worker.conf")
        with open(cfg, "w") as f:
            f.write("# arbiter\nexport ARBITER_DATABASE_URL=%s\n"
                    "ARBITER_REDIS_URL=%s   # local\nARBITER_PREFIX='cfgp'\n"
                    % (s.database_url, s.redis_url))
        env = {k: v for k, v in os.environ.items() if not k.startswith("ARBITER_") or k == "ARBITER_BIN"}
        res = subprocess.run([REQUEUE, "--config", cfg, "--ids", ids["s1"]], env=env,
                             capture_output=True, text=True, timeout=60)
        ok(res.returncode == 0 and len(entries(r, "cfgp:jobs:bulk")) == 1,
           "--config FILE supplies the URLs and the prefix", res.stdout + res.stderr)
        env["ARBITER_PREFIX"] = "envp"
        res = subprocess.run([REQUEUE, "--config", cfg, "--ids", ids["s1"]], env=env,
                             capture_output=True, text=True, timeout=60)
        ok(res.returncode == 0 and len(entries(r, "envp:jobs:bulk")) == 1,
           "the environment overrides the file", res.stdout + res.stderr)
        with open(cfg, "a") as f:
            f.write("ARBITER_PREFIX=\"open\n")
        res = subprocess.run([REQUEUE, "--config", cfg, "--ids", ids["s1"]], env=env,
                             capture_output=True, text=True, timeout=60)
        ok(res.returncode == 2 and "unterminated quote" in res.stderr and "Traceback" not in res.stderr,
           "a bad config file: exit 2 with file:line", res.stderr)

    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
