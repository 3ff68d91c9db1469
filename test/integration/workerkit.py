"""Helpers for the `arbiter worker` integration tests (test_worker_*.py).

They drive the worker from outside exactly as an API server would: rows are
inserted into agents / challenges / matches / submissions with psycopg2
(naming only the sql/README.md columns), jobs are XADDed with redis-py, and the
outcome is read back from PostgreSQL and Redis. Worker processes are started
from $ARBITER_BIN with their stderr captured in a file (shown on failure).

TAP: ok(), eq(), diag(), done().
"""
import json
import os
import re
import signal
import subprocess
import tempfile
import time
import uuid

import psycopg2
import psycopg2.extras
import redis

BIN = os.environ.get("ARBITER_BIN", "build/worker/arbiter")

from tap import diag, done, ok, slow  # noqa: F401  (re-exported for the worker tests)


def eq(got, want, name, info=None):
    good = got == want
    extra = "got:  %r\nwant: %r" % (got, want)
    if info is not None:
        extra += "\n" + str(info)
    return ok(good, name, None if good else extra)


def migrate(s):
    env = dict(os.environ, ARBITER_DATABASE_URL=s.database_url)
    r = subprocess.run([BIN, "migrate"], env=env, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError("arbiter migrate failed: %s %s" % (r.stdout, r.stderr))


def wait_for(pred, timeout=30.0, every=0.05):
    """Polls pred() until it returns a truthy value; returns it (or the last falsy one).
    timeout is widened by ARBITER_TEST_SLOW (tap.slow)."""
    deadline = time.time() + slow(timeout)
    v = pred()
    while not v and time.time() < deadline:
        time.sleep(every)
        v = pred()
    return v


class Worker:
    """One `arbiter worker` process."""

    def __init__(self, s, name="w1", env=None, binary=None):
        self.s = s
        self.name = name
        self.log_path = os.path.join(s.tmp, "worker-%s-%d.log" % (name, int(time.time() * 1000)))
        e = dict(os.environ)
        for k in list(e):
            if k.startswith("ARBITER_") and k != "ARBITER_BIN":
                del e[k]
        e.update({
            "ARBITER_REDIS_URL": s.redis_url,
            "ARBITER_DATABASE_URL": s.database_url,
            "ARBITER_WORKER_ID": name,
            "ARBITER_METRICS_ADDR": "",
            "ARBITER_RATE_LIMIT": "0",
            "ARBITER_LOG_LEVEL": "info",
            # The tests were written for quick retries; the defaults wait minutes.
            "ARBITER_RETRY_BASE_MS": "100ms",
            "ARBITER_RETRY_MAX_MS": "10s",
        })
        # Under -Db_sanitize=undefined a finding must fail the test, not just print.
        e.setdefault("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1")
        e.update(env or {})
        self.env = e
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([binary or BIN, "worker"], env=e, stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT)

    def alive(self):
        return self.proc.poll() is None

    def term(self, timeout=60):
        """SIGTERM and wait; returns the exit code."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return "timeout"

    def kill(self):
        if self.alive():
            self.proc.kill()
        self.proc.wait()

    def output(self):
        self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def tail(self, n=40):
        return "\n".join(self.output().splitlines()[-n:])


def key_base(prefix="arbiter", style="auto"):
    """The base of arbiter's Redis keys (worker/README.md "Redis keys"): the prefix
    itself (arbiter:jobs, ...) for the default style ("auto" without a
    Cluster URL), "plain" and "legacy"; with "tagged", the prefix in one hash
    tag ("{arbiter}") so every key lives in one Cluster slot, unless the
    prefix already holds a tag."""
    if style != "tagged" or re.search(r"\{[^}]+\}", prefix):
        return prefix
    return "{%s}" % prefix


class Arena:
    """An API server's view: rows in PostgreSQL and jobs in Redis."""

    def __init__(self, s, prefix="arbiter", style="auto"):
        self.s = s
        self.prefix = prefix
        self.db = psycopg2.connect(s.database_url)
        self.db.autocommit = True
        self.r = redis.Redis.from_url(s.redis_url, decode_responses=True)
        self.base = key_base(prefix, style)
        self.stream = self.base + ":jobs"
        self.dead = self.base + ":dead"
        self.delayed = self.base + ":delayed"
        self.group = prefix + "-workers"

    def close(self):
        self.db.close()

    def q(self, sql, *args):
        with self.db.cursor() as cur:
            cur.execute(sql, args if args else None)
            return cur.fetchall() if cur.description else None

    def q1(self, sql, *args):
        rows = self.q(sql, *args)
        return rows[0] if rows else None

    def val(self, sql, *args):
        row = self.q1(sql, *args)
        return row[0] if row else None

    # -- rows ---------------------------------------------------------------
    def agent(self, name=None, elo=None, match_count=None):
        name = name or "agent-" + uuid.uuid4().hex[:8]
        aid = self.val("INSERT INTO agents (name) VALUES (%s) RETURNING id", name)
        if elo is not None or match_count is not None:
            self.q("UPDATE agents SET elo = coalesce(%s, elo), match_count = coalesce(%s, match_count) "
                   "WHERE id = %s", elo, match_count, aid)
        return str(aid)

    def challenge(self, spec, ground_truth=None, difficulty="veteran", rating=None,
                  time_limit_secs=600, slug=None):
        slug = slug or "ch-" + uuid.uuid4().hex[:10]
        spec_text = spec if isinstance(spec, str) else json.dumps(spec)
        return str(self.val(
            "INSERT INTO challenges (slug, difficulty, rating, scoring_spec, ground_truth, time_limit_secs) "
            "VALUES (%s, %s, %s, %s::jsonb, %s::jsonb, %s) RETURNING id",
            slug, difficulty, rating, spec_text, json.dumps(ground_truth or {}), time_limit_secs))

    def match(self, agent, challenge, status="active", started_ago=60.0, expires_in=3600.0,
              attempt_number=1, memoryless=False):
        return str(self.val(
            "INSERT INTO matches (agent_id, challenge_id, status, started_at, expires_at, attempt_number, "
            "memoryless) VALUES (%s, %s, %s, now() - make_interval(secs => %s), "
            "now() + make_interval(secs => %s), %s, %s) RETURNING id",
            agent, challenge, status, started_ago, expires_in, attempt_number, memoryless))

    def submission(self, match, agent, answer, metadata=None, source_ip="192.0.2.10",
                   submitted_ago=None):
        if submitted_ago is None:
            return str(self.val(
                "INSERT INTO submissions (match_id, agent_id, source_ip, answer, metadata, status) "
                "VALUES (%s, %s, %s, %s::jsonb, %s::jsonb, 'queued') RETURNING id",
                match, agent, source_ip, json.dumps(answer), json.dumps(metadata or {})))
        return str(self.val(
            "INSERT INTO submissions (match_id, agent_id, source_ip, answer, metadata, submitted_at, status) "
            "VALUES (%s, %s, %s, %s::jsonb, %s::jsonb, now() - make_interval(secs => %s), 'queued') "
            "RETURNING id", match, agent, source_ip, json.dumps(answer), json.dumps(metadata or {}),
            submitted_ago))

    def enqueue(self, sub, **fields):
        f = {"submission_id": sub, "enqueued_at": str(int(time.time() * 1000))}
        f.update({k: str(v) for k, v in fields.items()})
        return self.r.xadd(self.stream, f)

    def submit(self, agent, challenge, answer, metadata=None, enqueue=True, match_kw=None, **sub_kw):
        """A new match and its submission (and the job). Returns (match, submission)."""
        m = self.match(agent, challenge, **(match_kw or {}))
        sid = self.submission(m, agent, answer, metadata, **sub_kw)
        if enqueue:
            self.enqueue(sid)
        return m, sid

    # -- outcome ------------------------------------------------------------
    def status(self, sub):
        return self.val("SELECT status FROM submissions WHERE id = %s", sub)

    def count_status(self, subs, statuses=("completed", "rejected", "failed")):
        return self.val("SELECT count(*) FROM submissions WHERE id = ANY(%s::uuid[]) AND status = ANY(%s)",
                        list(subs), list(statuses))

    def wait_final(self, subs, timeout=30.0):
        subs = list(subs)
        return wait_for(lambda: self.count_status(subs) == len(subs), timeout) and True

    def dead_entries(self):
        return [(i, f) for i, f in self.r.xrange(self.dead)]

    def pending(self):
        try:
            return self.r.xpending(self.stream, self.group)["pending"]
        except redis.ResponseError:
            return 0


# -- Elo (common/README.md "Elo"), for replays ---------------------------------------------------

def round_half_away(x):
    import math
    return int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)


def elo_expected(before, opponent, k, result, verified=False, memoryless=False, attempt=1):
    s = {"win": 1.0, "draw": 0.5, "loss": 0.0}[result]
    e = 1.0 / (1.0 + 10 ** ((opponent - before) / 400.0))
    new = max(100, round_half_away(before + k * (s - e)))
    change = new - before
    if verified and change > 0:
        from fractions import Fraction
        bonus = Fraction(12, 10) if (memoryless and attempt == 1) else Fraction(11, 10)
        x = change * bonus
        change = int(x) + (1 if x - int(x) >= Fraction(1, 2) else 0)
        new = max(100, before + change)
    return new


def tmpdir():
    return tempfile.mkdtemp(prefix="arbiter-worker-test-")


# -- bulk load and whole-run checks -----------------------------------------------------

SPEC_X = {
    "evaluator": "deterministic",
    "dimensions": [{"key": "correctness", "weight": 1, "primitive": "exact_match",
                    "field": "x", "ground_truth_field": "x"}],
}


def bulk(a, agents, challenge, n, win_ratio=0.6, source_ip="192.0.2.1", enqueue=True):
    """n submissions (one match each) spread over agents, answers random (x = 1 wins
    with SPEC_X and ground truth {"x": 1}); XADDed in a pipeline. Returns the ids."""
    rows = a.q(
        "WITH ag AS (SELECT id, (row_number() OVER (ORDER BY id)) - 1 AS i FROM agents "
        "WHERE id = ANY(%s::uuid[])), "
        "m AS (INSERT INTO matches (agent_id, challenge_id, status, started_at, expires_at) "
        "SELECT ag.id, %s, 'active', now() - interval '60 seconds', now() + interval '1 hour' "
        "FROM generate_series(0, %s - 1) g JOIN ag ON ag.i = g %% %s RETURNING id, agent_id) "
        "INSERT INTO submissions (match_id, agent_id, source_ip, answer, status) "
        "SELECT m.id, m.agent_id, %s, jsonb_build_object('x', (random() < %s)::int), 'queued' "
        "FROM m RETURNING id",
        list(agents), challenge, n, len(agents), source_ip, win_ratio)
    ids = [str(r[0]) for r in rows]
    if enqueue:
        enqueue_all(a, ids)
    return ids


def enqueue_all(a, ids, **fields):
    pipe = a.r.pipeline(transaction=False)
    now = str(int(time.time() * 1000))
    for i, sid in enumerate(ids):
        f = {"submission_id": sid, "enqueued_at": now}
        f.update(fields)
        pipe.xadd(a.stream, f)
        if i % 1000 == 999:
            pipe.execute()
    pipe.execute()


def exactly_once(a, subs, agents, initial=1000):
    """Checks every submission has one eval_seq-1 result and one elo_history row, and
    that every agent's rating, counts and streak replay from elo_history in id order.
    Returns a list of problems (empty when everything holds)."""
    problems = []
    bad = a.q("SELECT s.id, s.status, count(r.id) FROM submissions s "
              "LEFT JOIN evaluation_results r ON r.submission_id = s.id "
              "WHERE s.id = ANY(%s::uuid[]) GROUP BY s.id, s.status "
              "HAVING s.status <> 'completed' OR count(r.id) <> 1", list(subs))
    if bad:
        problems.append("submissions not completed exactly once: %d, e.g. %r" % (len(bad), bad[:5]))
    nh = a.val("SELECT count(*) FROM elo_history h JOIN evaluation_results r ON r.id = h.result_id "
               "WHERE r.submission_id = ANY(%s::uuid[])", list(subs))
    if nh != len(subs):
        problems.append("elo_history rows %d for %d submissions" % (nh, len(subs)))
    for ag in agents:
        row = a.q1("SELECT elo, match_count, win_count, draw_count, loss_count, current_streak, "
                   "best_streak FROM agents WHERE id = %s", ag)
        hist = a.q("SELECT h.elo_before, h.elo_after, h.opponent_elo, h.k_factor, r.result, r.verified, "
                   "m.memoryless, m.attempt_number FROM elo_history h "
                   "JOIN evaluation_results r ON r.id = h.result_id JOIN matches m ON m.id = h.match_id "
                   "WHERE h.agent_id = %s AND h.reason = 'evaluation' ORDER BY h.id", ag)
        elo, count = initial, {"win": 0, "draw": 0, "loss": 0}
        cs = bs = 0
        for i, (before, after, opp, k, res, vf, ml, att) in enumerate(hist):
            want_k = 32 if i < 30 else 16
            want = elo_expected(elo, opp, want_k, res, vf, ml, att)
            if before != elo or after != want or k != want_k:
                problems.append("agent %s step %d: %r, expected before %d after %d K %d"
                                % (ag, i, (before, after, k), elo, want, want_k))
                break
            elo = after
            count[res] += 1
            cs = cs + 1 if res == "win" else 0
            bs = max(bs, cs)
        want_row = (elo, len(hist), count["win"], count["draw"], count["loss"], cs, bs)
        if tuple(row) != want_row:
            problems.append("agent %s: row %r, replay %r" % (ag, tuple(row), want_row))
    return problems


def cli(s, url, *args, timeout=60):
    """`arbiter ARGS...` with ARBITER_REDIS_URL=url and the test's database;
    the CompletedProcess (text)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARBITER_") or k == "ARBITER_BIN"}
    env.update({"ARBITER_REDIS_URL": url, "ARBITER_DATABASE_URL": s.database_url})
    return subprocess.run([BIN] + list(args), env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)


def check_clean_after(s, last, limit=30):
    """Polls `arbiter standings --check` until it reports 0 differences: (seconds from
    `last` (epoch) until then, or None when `limit` s after `last` passed first; the last
    run, a CompletedProcess)."""
    r = None
    while time.time() < float(last) + limit:
        r = cli(s, s.redis_url, "standings", "--check")
        if r.returncode == 0 and "0 differences" in r.stdout:
            return time.time() - float(last), r
        time.sleep(0.05)
    return None, r


def operator_cli_checks(s, url, r, name, secret=None, prefix="arbiter", style="auto"):
    """`arbiter status --json`, `pause`, `resume` (global and --challenge) and
    `status --prune` over url (any URL the worker takes), checked against r,
    a redis-py client of the same data. The backlog must be settled (no
    worker running). secret: a password that must not be printed."""
    base = key_base(prefix, style)
    stream, dead, group = base + ":jobs", base + ":dead", prefix + "-workers"

    def status(*args):
        p = cli(s, url, "status", "--json", *args)
        try:
            return p, json.loads(p.stdout).get("redis", {})
        except ValueError:
            return p, {}

    p, j = status()
    ok(p.returncode == 0 and j.get("ok"), "%s: arbiter status exits 0, Redis read" % name,
       p.stdout + p.stderr)
    ok(j.get("stream_length") == r.xlen(stream) and j.get("dead") == r.xlen(dead)
       and j.get("group_exists") is True and j.get("paused") is False,
       "%s: status agrees with the server (stream %s, dead %s)" % (name, j.get("stream_length"),
                                                                   j.get("dead")), j)
    p = cli(s, url, "pause")
    ok(p.returncode == 0 and r.exists(base + ":paused"), "%s: arbiter pause sets the switch" % name,
       p.stdout + p.stderr)
    p = cli(s, url, "pause", "--challenge", "cli-check", "--force")   # no such challenge here
    ok(p.returncode == 0 and r.sismember(base + ":paused:challenges", "cli-check"),
       "%s: arbiter pause --challenge" % name, p.stdout + p.stderr)
    _, j = status()
    ok(j.get("paused") is True and j.get("paused_challenges") == ["cli-check"],
       "%s: status shows both pauses" % name, j)
    p = cli(s, url, "resume", "--all")
    ok(p.returncode == 0 and not r.exists(base + ":paused")
       and not r.exists(base + ":paused:challenges"), "%s: arbiter resume --all clears both" % name,
       p.stdout + p.stderr)
    r.xgroup_createconsumer(stream, group, "cli-gone")
    # Heartbeats have been written for an hour (README "arbiter status"): a consumer with
    # none is gone, not a worker that has yet to write its first.
    r.set(base + ":workers:since", int(time.time() * 1000) - 3600 * 1000)
    time.sleep(0.05)
    p, j = status("--prune-idle", "1ms")
    gone = [c for c in j.get("consumers", []) if c.get("name") == "cli-gone"]
    ok(p.returncode == 0 and gone and gone[0].get("pruned")
       and "cli-gone" not in [c["name"] for c in r.xinfo_consumers(stream, group)],
       "%s: status --prune removes an idle consumer" % name, p.stdout + p.stderr)
    if secret:
        ok(all(secret not in x for x in (p.stdout, p.stderr)), "%s: no password printed" % name)


def script(s, name, url, *args, timeout=60):
    """scripts/NAME ARGS... with ARBITER_REDIS_URL=url and the test's database;
    the CompletedProcess (text)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARBITER_") or k == "ARBITER_BIN"}
    env.update({"ARBITER_REDIS_URL": url, "ARBITER_DATABASE_URL": s.database_url})
    top = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    return subprocess.run(["/usr/bin/python3", os.path.join(top, "scripts", name)] + list(args),
                          env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout)


def script_checks(s, a, url, name, secret=None):
    """scripts/dlq (list, replay under WATCH/MULTI, drop) and scripts/requeue over url (any
    URL the worker takes), checked through a.r (a redis-py client of the same data; no
    worker running). secret: a password that must not be printed."""
    fields = {"submission_id": "00000000-0000-4000-8000-00000000dead", "kind": "evaluate",
              "enqueued_at": "1", "reason": "script check", "original_id": "1-1",
              "worker_id": "t", "failed_at": str(int(time.time() * 1000))}
    d1, d2 = a.r.xadd(a.dead, fields), a.r.xadd(a.dead, fields)
    outs = []

    def run(*args):
        p = script(s, *args)
        outs.append(p.stdout + p.stderr)
        return p
    p = run("dlq", url, "list")
    ok(p.returncode == 0 and d1 in p.stdout and d2 in p.stdout,
       "%s: dlq list" % name, p.stdout + p.stderr)
    before = a.r.xlen(a.stream)
    p = run("dlq", url, "replay", d1, "--yes", "--no-db")
    ok(p.returncode == 0 and a.r.xlen(a.stream) == before + 1 and a.r.xlen(a.dead) == 1,
       "%s: dlq replay (WATCH/MULTI) moves the entry back" % name, p.stdout + p.stderr)
    p = run("dlq", url, "drop", d2, "--yes")
    ok(p.returncode == 0 and a.r.xlen(a.dead) == 0, "%s: dlq drop" % name, p.stdout + p.stderr)
    for i, f in a.r.xrange(a.stream):
        if f.get("submission_id") == fields["submission_id"]:
            a.r.xdel(a.stream, i)
    sub = a.q1("SELECT id FROM submissions WHERE status = 'completed' LIMIT 1")[0]
    before = a.r.xlen(a.stream)
    p = run("requeue", url, "--ids", str(sub), "--lane", "live", "--yes")
    got = [(i, f) for i, f in a.r.xrange(a.stream) if f.get("submission_id") == str(sub)]
    ok(p.returncode == 0 and a.r.xlen(a.stream) == before + 1 and got
       and got[0][1].get("kind") == "reevaluate", "%s: requeue enqueues the submission" % name,
       p.stdout + p.stderr + repr(got))
    for i, _ in got:
        a.r.xdel(a.stream, i)
    if secret:
        ok(not any(secret in o for o in outs), "%s: the scripts print no password" % name)
