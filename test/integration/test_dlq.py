#!/usr/bin/python3
"""scripts/dlq and the operator scripts' conventions (TAP on stdout).

Against a private Redis and PostgreSQL (test/services.py), with dead-letter
entries written as the worker writes them: filters by reason and age for
list, count, replay and drop; replay of a failed submission sets it back to
queued; bad arguments exit 2 with the usage line and never a traceback (an
unknown entry id, a bad duration, a bad config file); a reader that closes
the pipe early (`dlq list --json | head -1`) ends the script quietly.
Entries with any bytes in any field (invalid UTF-8, half characters, NUL,
control characters, in names and values) are listed, shown, counted, replayed
(their original bytes copied) and dropped without a traceback.
"""
import json
import os
import subprocess
import sys
import time

import psycopg2
import redis

from services import Services
from workerkit import migrate

import tap
from tap import ok

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DLQ = os.path.join(ROOT, "scripts", "dlq")
REQUEUE = os.path.join(ROOT, "scripts", "requeue")


def env_for(s):
    e = {k: v for k, v in os.environ.items() if not k.startswith("ARBITER_") or k == "ARBITER_BIN"}
    e.update(ARBITER_REDIS_URL=s.redis_url, ARBITER_DATABASE_URL=s.database_url)
    return e


def dlq(s, *args, stdin=""):
    return subprocess.run([DLQ] + list(args), env=env_for(s), input=stdin, capture_output=True,
                          text=True, timeout=60)


def clean_usage(r, name, want=2):
    ok(r.returncode == want and "Traceback" not in r.stderr and "usage:" in r.stderr,
       name, "rc %s\n%s" % (r.returncode, r.stderr))


# Dead-letter entries as no worker writes them but anything can: every field, name and
# value, with bytes that are not UTF-8.
HALF = "\u00e9".encode() * 3 + b"\xc3"                  # cut inside a character
WEIRD = [
    {b"submission_id": b"\xff\xfe" + HALF, b"kind": b"evaluate\xc3", b"reason": b"failed: " + HALF,
     b"failed_at": b"17\x00\xff", b"original_id": b"\x80", b"worker_id": b"w\xed\xa0\x80"},
    {b"sub\xffmission": b"x", b"reason": b"\x1b[31mred\x1b[0m\r\n\x00\xc0\xaf",
     b"\x00": b"\x00", b"failed_at": HALF, b"enqueued_at": b"\xf4\x90\x80\x80"},
    {b"submission_id": "ok \u00e9\u20ac\U0001f600".encode(), b"reason": HALF + HALF,
     b"elo": b"\xe2\x82"},
]


def any_bytes(s, now):
    raw = redis.Redis.from_url(s.redis_url)   # bytes in, bytes out
    dead, jobs = "u8:dead", "u8:jobs"
    ids = [raw.xadd(dead, f).decode() for f in WEIRD]

    def run(*args):
        return dlq(s, "--prefix", "u8", *args)

    def clean(res, name):
        ok(res.returncode == 0 and "Traceback" not in res.stderr, name,
           "rc %s\n%s%s" % (res.returncode, res.stdout, res.stderr))
        return res

    res = clean(run("list"), "any bytes: list")
    ok(all(i in res.stdout for i in ids) and "\x1b" not in res.stdout,
       "any bytes: list shows every entry, control characters escaped", res.stdout)
    res = clean(run("list", "--json"), "any bytes: list --json")
    rows = json.loads(res.stdout or "[]")
    ok([r["id"] for r in rows] == ids and rows[0]["reason"].startswith("failed: "),
       "any bytes: list --json parses, every entry", res.stdout)
    clean(run("list", "--reason", "failed"), "any bytes: list --reason")
    res = clean(run("count"), "any bytes: count")
    ok(res.stdout.strip() == "3", "any bytes: count is 3", res.stdout)
    clean(run("count", "--older-than", "1s"), "any bytes: count with a filter (bad failed_at)")
    for i in ids:
        res = clean(run("show", i), "any bytes: show %s" % i)
        ok("\x1b" not in res.stdout and "\x00" not in res.stdout, "any bytes: show %s escapes "
           "control characters" % i, repr(res.stdout))
        res = clean(run("show", i, "--json"), "any bytes: show %s --json" % i)
        json.loads(res.stdout or "null")
    res = clean(run("replay", "--all", "--yes"), "any bytes: replay --all")
    ok(res.stdout.count("replayed ") == 3 and raw.xlen(dead) == 0, "any bytes: all 3 replayed",
       res.stdout + res.stderr)
    got = [f for _, f in raw.xrange(jobs)]
    want = [{k: v for k, v in f.items() if k not in (b"reason", b"failed_at", b"original_id",
                                                     b"worker_id")} for f in WEIRD]
    ok(got == want, "any bytes: replay copied the original bytes", (got, want))
    ids = [raw.xadd(dead, f).decode() for f in WEIRD]
    res = clean(run("drop", "--all", "--yes"), "any bytes: drop --all")
    ok("dropped 3" in res.stdout and raw.xlen(dead) == 0, "any bytes: all 3 dropped", res.stdout)
    ids = [raw.xadd(dead, f).decode() for f in WEIRD]
    res = clean(run("replay", ids[1], "--yes", "--no-db"), "any bytes: replay one by id")
    res = clean(run("drop", ids[0], ids[2], "--yes"), "any bytes: drop by id")
    ok(raw.xlen(dead) == 0, "any bytes: nothing left", raw.xlen(dead))
    raw.close()


def main():
    with Services() as s:
        migrate(s)
        r = redis.Redis.from_url(s.redis_url, decode_responses=True)
        now = int(time.time() * 1000)
        # A failed submission for the replay.
        with psycopg2.connect(s.database_url) as c, c.cursor() as cur:
            cur.execute("INSERT INTO agents (name) VALUES ('a') RETURNING id")
            agent = cur.fetchone()[0]
            cur.execute("INSERT INTO challenges (slug, difficulty, scoring_spec, time_limit_secs) "
                        "VALUES ('c', 'veteran', '{}', 60) RETURNING id")
            ch = cur.fetchone()[0]
            cur.execute("INSERT INTO matches (agent_id, challenge_id, status, started_at, expires_at) "
                        "VALUES (%s, %s, 'active', now(), now() + interval '1 hour') RETURNING id",
                        (agent, ch))
            match = cur.fetchone()[0]
            cur.execute("INSERT INTO submissions (match_id, agent_id, source_ip, answer, status, "
                        "last_error, attempts) VALUES (%s, %s, '192.0.2.1', '{}', 'failed', 'x', 5) "
                        "RETURNING id", (match, agent))
            failed = cur.fetchone()[0]
        c.close()
        old = r.xadd("arbiter:dead", {"submission_id": failed, "kind": "evaluate",
                                      "reason": "sandbox: could not start", "failed_at": str(now - 3 * 3600 * 1000),
                                      "original_id": "1-0", "worker_id": "w"})
        new = r.xadd("arbiter:dead", {"submission_id": "not-a-uuid", "reason": "poison: no submission_id",
                                      "failed_at": str(now - 60 * 1000), "original_id": "2-0",
                                      "worker_id": "w"})
        for i in range(1000):
            r.xadd("arbiter:dead", {"submission_id": "bulk-%d" % i, "reason": "bulk filler",
                                    "failed_at": str(now), "original_id": "3-%d" % i, "worker_id": "w"})

        res = dlq(s, "list", "--reason", "sandbox", "--json")
        rows = json.loads(res.stdout or "[]")
        ok(res.returncode == 0 and [x["id"] for x in rows] == [old], "list --reason sandbox", res.stdout)
        res = dlq(s, "list", "--older-than", "1h", "--json")
        ok([x["id"] for x in json.loads(res.stdout or "[]")] == [old], "list --older-than 1h", res.stdout)
        res = dlq(s, "count", "--newer-than", "5m", "--reason", "poison")
        ok(res.stdout.strip() == "1", "count --newer-than 5m --reason poison", res.stdout + res.stderr)
        res = dlq(s, "count")
        ok(res.stdout.strip() == "1002", "count without filters", res.stdout)

        # Replay by reason: the failed submission goes back to queued, the job to the stream.
        res = dlq(s, "replay", "--reason", "sandbox", "--yes")
        ok(res.returncode == 0 and "replayed %s" % old in res.stdout, "replay --reason sandbox --yes",
           res.stdout + res.stderr)
        st = s.psql("arbiter", "SELECT status FROM submissions WHERE id = '%s'" % failed).stdout.strip()
        ok(st == "queued", "the failed submission is queued again", st)
        jobs = r.xrange("arbiter:jobs")
        ok(len(jobs) == 1 and jobs[0][1].get("submission_id") == failed
           and "reason" not in jobs[0][1], "its job is back in arbiter:jobs without the dead-letter "
           "fields", jobs)
        res = dlq(s, "drop", "--reason", "bulk", "--older-than", "1h", "--yes")
        ok(res.returncode == 1 and "nothing to drop" in res.stdout, "filters that match nothing: "
           "nothing dropped", res.stdout)
        res = dlq(s, "drop", "--reason", "poison", stdin="")
        ok(res.returncode == 1 and "aborted" in res.stdout and r.xlen("arbiter:dead") == 1001,
           "drop without an answer: aborted", res.stdout)

        # Bad arguments: exit 2, usage, no traceback.
        clean_usage(dlq(s, "show", "nosuch"), "show nosuch: exit 2 (not a raw Redis error)")
        clean_usage(dlq(s, "replay"), "replay without ids, --all or filters: exit 2")
        clean_usage(dlq(s, "replay", new, "--all"), "replay ids and --all: exit 2")
        clean_usage(dlq(s, "list", "--older-than", "5x"), "bad duration: exit 2")
        clean_usage(dlq(s, "nonsense"), "unknown subcommand: exit 2")
        clean_usage(subprocess.run([REQUEUE, "--bogus"], capture_output=True, text=True),
                    "requeue --bogus: exit 2")
        cfg = os.path.join(s.tmp, "bad.conf")
        with open(cfg, "w") as f:
            f.write("ARBITER_REDIS_URL\n")
        res = dlq(s, "--config", cfg, "count")
        ok(res.returncode == 2 and "bad.conf:1" in res.stderr and "Traceback" not in res.stderr,
           "bad config file: exit 2 naming file:line", res.stderr)
        res = dlq(s, "--redis-url", "http://x", "count")
        ok(res.returncode == 2 and "Traceback" not in res.stderr, "bad Redis URL: exit 2", res.stderr)

        # A reader that stops early.
        p = subprocess.Popen([DLQ, "list", "--json"], env=env_for(s), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        p.stdout.readline()
        p.stdout.close()
        err = p.stderr.read().decode()
        p.wait(60)
        ok("Traceback" not in err and "BrokenPipe" not in err, "list --json | head -1: no traceback",
           err)

        any_bytes(s, now)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
