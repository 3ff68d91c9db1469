#!/usr/bin/python3
"""Operations surface during a real worker run (TAP on stdout).

Against a private Redis and PostgreSQL (test/services.py) and a real
`arbiter worker` with ARBITER_METRICS_ADDR=127.0.0.1:0:
- the listener's port is logged; /healthz, /readyz and /metrics answer, and
  the exposition is well-formed and carries every family `arbiter
  metrics-names` lists;
- metrics move as jobs flow: completed jobs, evaluation and end-to-end
  histograms, commit batches, a rejection by reason, a dead-lettered poison
  job, the queue gauges;
- /readyz is 503 with the reason while PostgreSQL is down (and /healthz stays
  200), 200 again after it returns, and the reconnect is counted; the same
  for Redis;
- `arbiter status` (table and --json) reports the stream, group, consumers,
  dead letters and last-hour results, exits 1 while PostgreSQL is down, and
  never prints the database password;
- scripts/dlq list/show/count, replay (confirmation declined, then accepted:
  fields stripped, submission set back to queued, then evaluated) and drop;
- SIGTERM ends the worker with exit 0.
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid

import psycopg2
import redis

from services import Services

BIN = os.environ.get("ARBITER_BIN", "build/worker/arbiter")
TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DLQ = os.path.join(TOP, "scripts", "dlq")
PASSWORD = "s3cr3t-pw-never-logged"

import tap
from tap import ok


def wait_for(cond, timeout=20.0, step=0.1):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(step)
    return cond()


SPEC = {"evaluator": "deterministic",
        "dimensions": [{"key": "correctness", "weight": 1, "primitive": "exact_match",
                        "field": "a", "ground_truth_field": "a"}],
        "thresholds": {"win": 700, "draw": 400}}


class World:
    def __init__(self, s):
        self.s = s
        self.db = "postgresql://postgres:%s@127.0.0.1:%d/%s" % (PASSWORD, s.pg_port, s.dbname)
        self.r = redis.Redis.from_url(s.redis_url, decode_responses=True)
        self.conn = psycopg2.connect(s.database_url)
        self.conn.autocommit = True
        with self.conn.cursor() as c:
            c.execute("INSERT INTO agents (name) VALUES ('ops-agent') RETURNING id")
            self.agent = c.fetchone()[0]
            c.execute("INSERT INTO agents (name) VALUES ('other-agent') RETURNING id")
            self.other = c.fetchone()[0]
            c.execute("INSERT INTO challenges (slug, difficulty, scoring_spec, ground_truth, "
                      "time_limit_secs) VALUES ('ops', 'contender', %s, %s, 600) RETURNING id",
                      (json.dumps(SPEC), json.dumps({"a": 1})))
            self.challenge = c.fetchone()[0]

    def submission(self, owner=None, status="queued"):
        with self.conn.cursor() as c:
            c.execute("INSERT INTO matches (agent_id, challenge_id, status, started_at, expires_at)"
                      " VALUES (%s, %s, 'active', now() - interval '1 minute',"
                      " now() + interval '1 hour') RETURNING id", (self.agent, self.challenge))
            match = c.fetchone()[0]
            c.execute("INSERT INTO submissions (match_id, agent_id, source_ip, answer, status)"
                      " VALUES (%s, %s, '127.0.0.1', %s, %s) RETURNING id",
                      (match, owner or self.agent, json.dumps({"a": 1}), status))
            return str(c.fetchone()[0])

    def enqueue(self, sub):
        return self.r.xadd("arbiter:jobs", {"submission_id": sub,
                                            "enqueued_at": str(int(time.time() * 1000))})

    def statuses(self, subs):
        with self.conn.cursor() as c:
            c.execute("SELECT status, count(*) FROM submissions WHERE id = ANY(%s::uuid[])"
                      " GROUP BY status", (list(subs),))
            return dict(c.fetchall())


class Worker:
    def __init__(self, world):
        env = dict(os.environ)
        env.update({"ARBITER_REDIS_URL": world.s.redis_url, "ARBITER_DATABASE_URL": world.db,
                    "ARBITER_METRICS_ADDR": "127.0.0.1:0", "ARBITER_WORKER_ID": "ops-worker",
                    "ARBITER_RATE_LIMIT": "0", "ARBITER_LOG_LEVEL": "info",
                    "ARBITER_LANGUAGES_FILE": os.path.join(TOP, "deploy", "languages.json"),
                    "ARBITER_RECONCILE_MS": "600000", "ARBITER_DRAIN_MS": "5000"})
        env.pop("ARBITER_CONFIG", None)
        self.p = subprocess.Popen([BIN, "worker"], env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.port = None
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.p.stderr:
            self.lines.append(line)
            m = re.search(r"metrics listener on 127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))

    def log(self):
        return "".join(self.lines)

    def get(self, path, method="GET"):
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path), method=method)
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return resp.status, resp.read().decode(), dict(resp.headers)
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(), dict(e.headers)
        except OSError as e:
            return None, str(e), {}

    def scrape(self):
        code, body, _ = self.get("/metrics")
        return parse_metrics(body) if code == 200 else {}

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.t.join(5)
        return self.p.returncode


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$')


def parse_metrics(text):
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if m:
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def families(text):
    return set(re.findall(r"^# TYPE (\S+) ", text, re.M))


def status(world, *args, db=None):
    env = dict(os.environ)
    env.update({"ARBITER_REDIS_URL": world.s.redis_url, "ARBITER_DATABASE_URL": db or world.db})
    env.pop("ARBITER_CONFIG", None)
    return subprocess.run([BIN, "status"] + list(args), env=env, capture_output=True, text=True,
                          timeout=60)


def dlq(world, *args, stdin=""):
    env = dict(os.environ)
    env.update({"ARBITER_REDIS_URL": world.s.redis_url, "ARBITER_DATABASE_URL": world.s.database_url})
    env.pop("ARBITER_CONFIG", None)
    return subprocess.run(["/usr/bin/python3", DLQ] + list(args), env=env, input=stdin,
                          capture_output=True, text=True, timeout=60)


def has_command(name):
    r = subprocess.run([BIN, "--help"], capture_output=True, text=True)
    return re.search(r"^\s+%s\s" % re.escape(name), r.stdout, re.M) is not None


JOBS_OK = 'arbiter_jobs_total{evaluator="deterministic",outcome="completed"}'


def flow(world, w):
    ok(wait_for(lambda: w.port, 20), "the listener's port (port 0) is logged", w.log())
    if not w.port:
        return
    code, body, _ = w.get("/healthz")
    ok(code == 200 and body == "ok\n", "/healthz 200 ok", body)
    ok(wait_for(lambda: w.get("/readyz")[0] == 200, 30), "/readyz 200 once connected and migrated",
       w.get("/readyz")[1])
    code, body, hdr = w.get("/metrics")
    ok(code == 200 and hdr.get("Content-Type", "").startswith("text/plain; version=0.0.4"),
       "/metrics 200 with the exposition content type", hdr)
    names = set(subprocess.run([BIN, "metrics-names"], capture_output=True, text=True).stdout.split())
    ok(names and names <= families(body), "every family of `arbiter metrics-names` is served",
       sorted(names - families(body)))
    ok(all(("# HELP %s " % f) in body for f in families(body)), "every family has # HELP")
    code, _, hdr = w.get("/metrics", method="POST")
    ok(code == 405 and hdr.get("Allow") == "GET, HEAD", "POST /metrics 405 with Allow")
    ok(w.get("/nope")[0] == 404, "unknown path 404")

    before = w.scrape()
    n = 20
    subs = [world.submission() for _ in range(n)]
    for sub in subs:
        world.enqueue(sub)
    bad = world.submission(owner=world.other)
    world.enqueue(bad)
    world.r.xadd("arbiter:jobs", {"submission_id": "not-a-uuid"})
    done = wait_for(lambda: world.statuses(subs).get("completed") == n, 60)
    ok(done, "%d jobs completed" % n, world.statuses(subs))
    wait_for(lambda: world.statuses([bad]).get("rejected") == 1, 30)

    def moved():
        m = w.scrape()
        return m if (m.get(JOBS_OK, 0) - before.get(JOBS_OK, 0) >= n and
                     m.get('arbiter_dead_letter_length', 0) >= 1 and
                     m.get('arbiter_stream_length', 1) == 0) else None
    after = wait_for(moved, 20) or w.scrape()
    d = lambda k: after.get(k, 0) - before.get(k, 0)  # noqa: E731
    ok(d(JOBS_OK) == n, "arbiter_jobs_total{deterministic,completed} moved by %d" % n, d(JOBS_OK))
    ok(d('arbiter_evaluation_duration_seconds_count{evaluator="deterministic"}') >= n,
       "evaluation-duration histogram counted the evaluations")
    ok(d('arbiter_end_to_end_latency_seconds_count') >= n, "end-to-end histogram counted them")
    ok(d('arbiter_end_to_end_latency_seconds_sum') > 0, "end-to-end latency sum grew")
    ok(d('arbiter_commit_batch_size_count') >= 1 and d('arbiter_commit_batch_size_sum') >= n,
       "commit batches observed (%d transactions for %d evaluations)"
       % (d('arbiter_commit_batch_size_count'), d('arbiter_commit_batch_size_sum')))
    ok(d('arbiter_rejections_total{reason="not_match_owner"}') == 1, "rejection counted by reason")
    ok(d('arbiter_ratelimit_decisions_total{decision="allowed"}') >= n,
       "rate-limit decisions counted (limit disabled: allowed)")
    dead_keys = [k for k in after if k.startswith("arbiter_jobs_total{") and 'outcome="dead_lettered"' in k]
    ok(sum(d(k) for k in dead_keys) == 1, "poison job counted as dead_lettered", dead_keys)
    ok(after.get("arbiter_dead_letter_length") == 1, "dead-letter gauge is 1")
    ok(after.get("arbiter_stream_length") == 0 and after.get("arbiter_consumer_group_lag") == 0,
       "stream drained: length and lag 0")
    ok(after.get("arbiter_jobs_in_flight") == 0, "nothing in flight")
    ok(after.get("process_resident_memory_bytes", 0) > 1e6, "process_resident_memory_bytes reported")


def status_checks(world):
    r = status(world)
    ok(r.returncode == 0, "arbiter status exits 0", r.stdout + r.stderr)
    ok("dead letters" in r.stdout and "deterministic" in r.stdout and "ops-worker" in r.stdout,
       "status table shows dead letters, consumers, last-hour results", r.stdout)
    ok(PASSWORD not in r.stdout + r.stderr and "***" in r.stdout, "status redacts the password")
    r = status(world, "--json")
    try:
        j = json.loads(r.stdout)
    except ValueError:
        j = None
    if ok(r.returncode == 0 and j is not None, "arbiter status --json is JSON", r.stdout + r.stderr):
        red, pg = j["redis"], j["postgres"]
        ok(red["ok"] and red["stream_length"] == 0 and red["lag"] == 0 and red["dead"] == 1,
           "--json: stream 0, lag 0, 1 dead letter", red)
        cons = {c["name"]: c for c in red["consumers"]}
        ok("ops-worker" in cons and cons["ops-worker"]["idle_ms"] is not None,
           "--json: the worker's consumer with its idle time", red["consumers"])
        ok(pg["ok"] and pg["last_hour"].get("deterministic", {}).get("results", 0) >= 20,
           "--json: last-hour results per evaluator", pg)
        ok(pg["oldest_queued"] is None and pg["queued"] == 0, "--json: nothing queued", pg)
    r = status(world, "--bogus")
    ok(r.returncode == 2, "status with a bad option exits 2")


def dlq_checks(world, w):
    r = dlq(world, "list")
    ok(r.returncode == 0 and "not-a-uuid" in r.stdout, "dlq list shows the poison job", r.stdout + r.stderr)
    r = dlq(world, "list", "--json")
    rows = json.loads(r.stdout) if r.returncode == 0 else []
    ok(len(rows) == 1 and rows[0]["reason"] and rows[0]["failed_at"].endswith("Z"),
       "dlq list --json: id, submission_id, reason, failed_at", rows)
    poison = rows[0]["id"] if rows else "0-0"
    r = dlq(world, "show", poison)
    ok(r.returncode == 0 and "original_id:" in r.stdout and "worker_id: ops-worker" in r.stdout,
       "dlq show prints every field", r.stdout + r.stderr)
    ok(dlq(world, "show", "1-1").returncode == 1, "dlq show of an unknown id exits 1")

    # A failed submission's dead letter, as the worker writes it.
    sub = world.submission(status="failed")
    with world.conn.cursor() as c:
        c.execute("UPDATE submissions SET attempts = 5, last_error = 'boom' WHERE id = %s", (sub,))
    dead_id = world.r.xadd("arbiter:dead", {"submission_id": sub, "enqueued_at": "1",
                                            "reason": "boom", "original_id": "1-1",
                                            "worker_id": "ops-worker",
                                            "failed_at": str(int(time.time() * 1000))})
    r = dlq(world, "count")
    ok(r.stdout.strip() == "2", "dlq count", r.stdout)
    r = dlq(world, "replay", dead_id, stdin="n\n")
    ok(r.returncode == 1 and "aborted" in r.stdout and world.r.xlen("arbiter:dead") == 2,
       "replay declined at the prompt: nothing moved", r.stdout + r.stderr)
    ok(dlq(world, "replay", dead_id, stdin="").returncode == 1, "replay with no answer (EOF) aborts")

    os.kill(w.p.pid, signal.SIGSTOP)     # freeze the worker to look at the replayed entry
    try:
        r = dlq(world, "replay", dead_id, stdin="y\n")
        ok(r.returncode == 0 and "replayed" in r.stdout, "replay confirmed", r.stdout + r.stderr)
        entries = world.r.xrange("arbiter:jobs")
        ok(len(entries) == 1 and entries[0][1] == {"submission_id": sub, "enqueued_at": "1"},
           "replayed entry carries the original fields only", entries)
        ok(not world.r.xrange("arbiter:dead", dead_id, dead_id), "replayed entry left the dead stream")
        ok(world.statuses([sub]) == {"queued": 1}, "submission set back to queued")
    finally:
        os.kill(w.p.pid, signal.SIGCONT)
    ok(wait_for(lambda: world.statuses([sub]).get("completed") == 1, 30),
       "the replayed job is evaluated", world.statuses([sub]))

    r = dlq(world, "drop", "--all", stdin="no\n")
    ok(r.returncode == 1 and world.r.xlen("arbiter:dead") == 1, "drop declined: kept")
    r = dlq(world, "drop", poison, "--yes")
    ok(r.returncode == 0 and world.r.xlen("arbiter:dead") == 0, "drop --yes removes it", r.stdout + r.stderr)
    r = dlq(world, "drop", "--all", "--yes")
    ok(r.returncode == 1 and "nothing" in r.stdout, "drop on an empty dead stream: nothing to do")


def postgres_down(world, w):
    before = w.scrape()
    world.s.stop_postgres()
    try:
        res = wait_for(lambda: (lambda c: c if c[0] == 503 else None)(w.get("/readyz")), 30)
        ok(res is not None and "postgres" in res[1].lower(),
           "/readyz 503 with the reason while PostgreSQL is down", res)
        ok(w.get("/healthz")[0] == 200, "/healthz stays 200 (the loop is alive)")
        r = status(world, "--json")
        j = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
        ok(r.returncode == 1 and j.get("redis", {}).get("ok") and not j.get("postgres", {}).get("ok")
           and j["postgres"].get("error"), "status exits 1 and says why PostgreSQL is unavailable",
           r.stdout + r.stderr)
        ok(PASSWORD not in r.stdout + r.stderr, "no password in status errors")
    finally:
        world.s.start_postgres()
    ok(wait_for(lambda: w.get("/readyz")[0] == 200, 60), "/readyz 200 after PostgreSQL returns",
       w.get("/readyz"))
    after = w.scrape()
    key = 'arbiter_reconnects_total{target="postgres"}'
    ok(after.get(key, 0) > before.get(key, 0), "postgres reconnect counted",
       (before.get(key), after.get(key)))


def both_down(world, w):
    """Redis and PostgreSQL down at once: /readyz names both problems, not the first only."""
    world.s.stop_redis()
    world.s.stop_postgres()
    try:
        res = wait_for(lambda: (lambda c: c if c[0] == 503 and "redis" in c[1].lower()
                                and "postgresql" in c[1].lower() else None)(w.get("/readyz")), 30)
        ok(res is not None, "/readyz 503 names both problems (Redis and PostgreSQL down)",
           w.get("/readyz"))
    finally:
        world.s.start_postgres()
        world.s.start_redis()
    ok(wait_for(lambda: w.get("/readyz")[0] == 200, 60), "/readyz 200 after both return",
       w.get("/readyz"))


def redis_down(world, w):
    before = w.scrape()
    world.s.stop_redis()
    try:
        res = wait_for(lambda: (lambda c: c if c[0] == 503 else None)(w.get("/readyz")), 30)
        ok(res is not None and "redis" in res[1].lower(), "/readyz 503 while Redis is down", res)
    finally:
        world.s.start_redis()
    ok(wait_for(lambda: w.get("/readyz")[0] == 200, 60), "/readyz 200 after Redis returns")
    key = 'arbiter_reconnects_total{target="redis"}'
    ok(wait_for(lambda: w.scrape().get(key, 0) > before.get(key, 0), 10), "redis reconnect counted")


def migrated_world(s):
    """The schema migrated into s's database and a World on it, or None (the failure
    reported) when `arbiter migrate` failed."""
    r = subprocess.run([BIN, "migrate", "--database-url", s.database_url],
                       capture_output=True, text=True, timeout=120)
    if not ok(r.returncode == 0, "migrate", r.stderr):
        return None
    return World(s)


def main():
    if not has_command("worker"):
        print("1..0 # SKIP `arbiter worker` is not built yet")
        return 0
    with Services() as s:
        world = migrated_world(s)
        if world is None:
            print("1..%d" % tap.count())
            return 1
        w = Worker(world)
        try:
            flow(world, w)
            if w.port:
                status_checks(world)
                dlq_checks(world, w)
                postgres_down(world, w)
                redis_down(world, w)
                both_down(world, w)
        finally:
            rc = w.stop()
        ok(rc == 0, "SIGTERM: worker exits 0", w.log()[-3000:])
        ok(PASSWORD not in w.log(), "the database password never appears in the worker's logs")
        bad = [l for l in w.log().splitlines() if l.strip() and not l.startswith("{")]
        ok(not bad, "every log line is a JSON object", bad[:5])
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
