#!/usr/bin/python3
"""The worker's operator-facing behaviour (TAP on stdout).

Against a private Redis and PostgreSQL (test/services.py) and real `arbiter
worker` processes:
- an unmigrated database: /readyz says why, the worker reads NO job (the entry
  stays unread in the stream, nothing is dead-lettered) and logs the cause;
  after `arbiter migrate` it starts by itself and evaluates it;
- a wrong PostgreSQL password: /readyz names the cause;
- `arbiter pause`: honoured within a second (a job added afterwards stays
  unread), visible in /metrics (arbiter_paused 1); `arbiter resume`: evaluated;
- `arbiter pause --challenge SLUG` refuses a slug no challenge has (--force takes it);
  status and arbiter_delayed_jobs{cause="pause"} count a held job as held, not as a
  rate-limit deferral;
- `arbiter pause --challenge SLUG`: that challenge's jobs are held in the
  delayed set, another challenge's are evaluated; after resume, evaluated;
- completion notifications on the documented channel (LISTEN arbiter_results),
  including the README's listen.py example; none with ARBITER_NOTIFY=off;
- a clean exit removes the worker's consumer from the group; SIGHUP drains
  like SIGTERM (exit 0);
- a failing job waits ARBITER_RETRY_BASE_MS between attempts (not milliseconds);
- the dead-letter stream is capped at ARBITER_DEAD_LETTER_MAX.
"""
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import psycopg2
import redis

from services import Services, free_port
from workerkit import Arena, BIN, Worker, migrate, wait_for, eq

import docs
import tap
from tap import ok, slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
README = docs.text()     # README.md and the reference pages beside the code

SPEC = {"evaluator": "deterministic",
        "dimensions": [{"key": "correctness", "weight": 1, "primitive": "exact_match",
                        "field": "a", "ground_truth_field": "a"}],
        "thresholds": {"win": 700, "draw": 400}}


def http(port, path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=3) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return None, str(e)


def arbiter(s, *args):
    e = {k: v for k, v in os.environ.items() if not k.startswith("ARBITER_") or k == "ARBITER_BIN"}
    e.update(ARBITER_REDIS_URL=s.redis_url, ARBITER_DATABASE_URL=s.database_url)
    return subprocess.run([BIN] + list(args), env=e, capture_output=True, text=True, timeout=60)


def main():
    with Services() as s:
        rd = redis.Redis.from_url(s.redis_url, decode_responses=True)

        # 1. Unmigrated database: not ready, reads nothing, starts after migrate.
        port = free_port()
        w = Worker(s, "w-unmigrated", env={"ARBITER_METRICS_ADDR": "127.0.0.1:%d" % port})
        try:
            rd.xadd("arbiter:jobs", {"submission_id": "6b0c0000-0000-4000-8000-0000000000e1"})
            st = wait_for(lambda: (lambda r: r if r[0] == 503 and "arbiter migrate" in r[1] else None)(
                http(port, "/readyz")), 20)
            ok(st and "schema" in st[1], "unmigrated: /readyz 503 names the cause and the fix",
               (st, w.tail()))
            time.sleep(2.5)
            groups = rd.xinfo_groups("arbiter:jobs")
            ok(groups and groups[0]["pending"] == 0 and groups[0]["last-delivered-id"] == "0-0",
               "unmigrated: the worker read no job", groups)
            eq(rd.xlen("arbiter:dead"), 0, "unmigrated: nothing dead-lettered")
            ok("taking no jobs: database schema" in w.output(), "unmigrated: the cause is logged",
               w.tail())
            migrate(s)
            a = Arena(s)
            agent = a.agent()
            ch = a.challenge(SPEC, {"a": 1}, slug="one")
            _, sub = a.submit(agent, ch, {"a": 1})
            ok(a.wait_final([sub], 30), "after arbiter migrate the worker starts by itself", w.tail())
            eq(rd.xlen("arbiter:dead"), 1, "the early poison entry is handled once ready")
        finally:
            ok(w.term() == 0, "worker exits 0", w.tail())
        names = [c["name"] for c in rd.xinfo_consumers("arbiter:jobs", "arbiter-workers")]
        ok("w-unmigrated" not in names, "a clean exit removed the worker's consumer", names)

        # 2. Wrong PostgreSQL password (trust auth here, so: a database that does not exist).
        port = free_port()
        bad = s.database_url.rsplit("/", 1)[0] + "/nosuchdb"
        w = Worker(s, "w-baddb", env={"ARBITER_METRICS_ADDR": "127.0.0.1:%d" % port,
                                      "ARBITER_DATABASE_URL": bad})
        try:
            st = wait_for(lambda: (lambda r: r if r[0] == 503 and "nosuchdb" in r[1] else None)(
                http(port, "/readyz")), 20)
            ok(st is not None, "a refused database connection: /readyz names the cause", (st, w.tail()))
        finally:
            w.term()

        # 3. Pause and resume, honoured within a second; a paused challenge is held.
        port = free_port()
        w = Worker(s, "w-pause", env={"ARBITER_METRICS_ADDR": "127.0.0.1:%d" % port})
        try:
            wait_for(lambda: http(port, "/readyz")[0] == 200, 20)
            r = arbiter(s, "pause")
            ok(r.returncode == 0, "arbiter pause", r.stderr)
            time.sleep(1.0)
            _, sub = a.submit(agent, ch, {"a": 1})
            time.sleep(2.0)
            eq(a.status(sub), "queued", "paused: a job added 1 s after `arbiter pause` is not taken")
            m = http(port, "/metrics")[1]
            ok("\narbiter_paused 1\n" in m, "arbiter_paused 1 in /metrics")
            st = http(port, "/readyz")
            ok(st[0] == 503 and "paused" in st[1], "/readyz says paused", st)
            t0 = time.time()
            arbiter(s, "resume")
            ok(a.wait_final([sub], 10), "resumed: the job is evaluated", w.tail())
            ok(time.time() - t0 < slow(3), "within a second or two of `arbiter resume` (%.1f s)" % (time.time() - t0))

            # A slug no challenge has is refused (it would pause nothing); --force takes it.
            r = arbiter(s, "pause", "--challenge", "no-such-slug")
            ok(r.returncode == 2 and "no challenge has the slug 'no-such-slug'" in r.stderr
               and not rd.sismember("arbiter:paused:challenges", "no-such-slug"),
               "pause --challenge no-such-slug: exit 2, nothing paused", r.stdout + r.stderr)
            r = arbiter(s, "pause", "--challenge", "later-slug", "--force")
            ok(r.returncode == 0 and rd.sismember("arbiter:paused:challenges", "later-slug"),
               "--force pauses a slug no challenge has yet", r.stdout + r.stderr)
            arbiter(s, "resume", "--challenge", "later-slug")
            ch2 = a.challenge(SPEC, {"a": 1}, slug="two")
            r = arbiter(s, "pause", "--challenge", "two")
            ok(r.returncode == 0, "pause --challenge two (an existing challenge)", r.stdout + r.stderr)
            time.sleep(1.5)
            _, held = a.submit(agent, ch2, {"a": 1})
            _, free = a.submit(agent, ch, {"a": 1})
            ok(a.wait_final([free], 10), "another challenge's job is evaluated", w.tail())
            time.sleep(1.0)
            eq(a.status(held), "queued", "the paused challenge's job is held")
            ok(rd.zcard("arbiter:delayed") >= 1 or rd.xlen("arbiter:jobs") >= 1,
               "it waits in the delayed set (or back in the stream)")
            # Shown as held by the pause, not as a rate-limit deferral.
            def by_cause():
                try:
                    return json.loads(arbiter(s, "status", "--json").stdout)["redis"].get(
                        "delayed_by_cause")
                except (ValueError, KeyError):
                    return None
            by = wait_for(lambda: (lambda b: b if b and b.get("pause") == 1 else None)(by_cause()), 10)
            eq(by, {"rate_limit": 0, "pause": 1, "retry": 0, "image": 0},
               "status --json: the held job counts under pause, not rate_limit")
            def split_table():
                t = arbiter(s, "status").stdout
                return t if (re.search(r"^ +paused challenge +1$", t, re.M)
                             and re.search(r"^ +rate limit +0$", t, re.M)
                             and "delayed (rate limit)" not in t) else None
            table = wait_for(split_table, 10)
            ok(table, "status: the delayed line split by cause", arbiter(s, "status").stdout)
            gauge = wait_for(lambda: re.search(r'^arbiter_delayed_jobs\{cause="pause"\} 1$',
                                               http(port, "/metrics")[1], re.M), 10)
            m = http(port, "/metrics")[1]
            ok(gauge and re.search(r'^arbiter_delayed_jobs\{cause="rate_limit"\} 0$', m, re.M),
               "arbiter_delayed_jobs{cause=pause} 1, rate_limit 0",
               "\n".join(l for l in m.splitlines() if "delayed" in l))
            arbiter(s, "resume", "--challenge", "two")
            ok(a.wait_final([held], 20), "after resume --challenge it is evaluated", w.tail())
            n = a.val("SELECT count(*) FROM evaluation_results WHERE submission_id = %s", held)
            eq(n, 1, "exactly one result")
        finally:
            ok(w.term() == 0, "worker exits 0", w.tail())

        # 4. NOTIFY on completion; the README's listen.py; SIGHUP drains.
        m = re.search(r"```python\n(# example: listen.py.*?)```", README, re.S)
        ok(m is not None, "README has listen.py")
        conn = psycopg2.connect(s.database_url)
        conn.autocommit = True
        conn.cursor().execute("LISTEN arbiter_results")
        w = Worker(s, "w-notify")
        try:
            _, sub = a.submit(agent, ch, {"a": 1})
            wrong_m = a.match(agent, ch)
            other = a.agent()
            rejected = a.submission(wrong_m, other, {"a": 1})
            a.enqueue(rejected)
            env = {k: v for k, v in os.environ.items() if not k.startswith("ARBITER_") or k == "ARBITER_BIN"}
            env.update(ARBITER_DATABASE_URL=s.database_url, WAIT_FOR=sub)
            got = {}
            deadline = time.time() + 30
            while len(got) < 2 and time.time() < deadline:
                if select.select([conn], [], [], 1) != ([], [], []):
                    conn.poll()
                    for n in conn.notifies:
                        e = json.loads(n.payload)
                        got[e["submission_id"]] = e
                    conn.notifies.clear()
            e = got.get(sub, {})
            ok(e.get("status") == "completed" and e.get("score") == 1000 and e.get("result") == "win"
               and e.get("eval_seq") == 1, "NOTIFY arbiter_results: completed with score", got)
            e = got.get(rejected, {})
            ok(e.get("status") == "rejected" and e.get("reject_reason") == "not_match_owner",
               "NOTIFY arbiter_results: rejected with the reason", got)
            # listen.py, started before the job.
            _, sub2 = a.submit(agent, ch, {"a": 2}, enqueue=False)
            env["WAIT_FOR"] = sub2
            lp = subprocess.Popen([sys.executable, "-c", m.group(1)], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
            time.sleep(1.0)
            a.enqueue(sub2)
            out, err = lp.communicate(timeout=60)
            ok(lp.returncode == 0 and out.startswith(sub2 + " completed 0"),
               "the README's listen.py prints the completion", out + err)
            w.proc.send_signal(signal.SIGHUP)
            rc = w.proc.wait(60)
            eq(rc, 0, "SIGHUP drains and exits 0 (like SIGTERM)", w.tail())
            ok("signal 1 received" in w.output(), "the SIGHUP is logged", w.tail())
        finally:
            w.kill()
            conn.close()

        # 4b. ARBITER_NOTIFY=off: the job completes, no notification is sent.
        conn = psycopg2.connect(s.database_url)
        conn.autocommit = True
        conn.cursor().execute("LISTEN arbiter_results")
        w = Worker(s, "w-nonotify", env={"ARBITER_NOTIFY": "off"})
        try:
            _, sub = a.submit(agent, ch, {"a": 1})
            ok(a.wait_final([sub], 20), "ARBITER_NOTIFY=off: the job is evaluated", w.tail())
            time.sleep(0.5)
            select.select([conn], [], [], 0.5)
            conn.poll()
            ok(not conn.notifies, "ARBITER_NOTIFY=off: no notification",
               [n.payload for n in conn.notifies])
        finally:
            w.term()
            conn.close()

        # 5. Retry backoff: a failing job waits ARBITER_RETRY_BASE_MS between attempts.
        bad_ch = a.challenge({"evaluator": "custom-script",
                              "script": {"language": "nosuchlang", "source": "x", "timeout_ms": 1000},
                              "dimensions": [{"key": "correctness", "weight": 1}],
                              "thresholds": {"win": 700, "draw": 400}}, {}, slug="failing")
        w = Worker(s, "w-retry", env={"ARBITER_RETRY_BASE_MS": "2s", "ARBITER_RETRY_MAX_MS": "2s",
                                      "ARBITER_MAX_DELIVERIES": "2", "ARBITER_SANDBOX_CGROUP": "none"})
        try:
            t0 = time.time()
            _, fsub = a.submit(agent, bad_ch, {"files": {"main.x": "1"}})
            # An unconfigured script language is an internal error: retried, then failed
            # (a rejection would end it at once and leave the spacing untested).
            ok(wait_for(lambda: a.status(fsub) in ("failed", "rejected"), 60), "the failing job ends",
               w.tail())
            el = time.time() - t0
            row = a.q1("SELECT status, attempts FROM submissions WHERE id = %s", fsub)
            eq(row, ("failed", 2), "the failing job was retried once, then failed", w.tail())
            ok(el >= 1.0, "its attempts were at least ARBITER_RETRY_BASE_MS/2 apart (%.1f s)" % el,
               w.tail())
        finally:
            w.term()

        # 6. The bulk lane: live first, bulk still advances, metrics.
        port = free_port()
        bulk = [a.submit(agent, ch, {"a": 1}, enqueue=False)[1] for _ in range(40)]
        live = [a.submit(agent, ch, {"a": 1}, enqueue=False)[1] for _ in range(40)]
        for sid in bulk:
            rd.xadd("arbiter:jobs:bulk", {"submission_id": sid, "kind": "evaluate"})
        for sid in live:
            a.enqueue(sid)
        w = Worker(s, "w-lanes", env={"ARBITER_CONCURRENCY": "4", "ARBITER_BULK_SHARE": "25",
                                      "ARBITER_METRICS_ADDR": "127.0.0.1:%d" % port})
        try:
            ok(a.wait_final(live, 60), "the live jobs complete", w.tail())
            done_bulk = a.count_status(bulk)
            ok(done_bulk <= 10, "while live jobs waited, the bulk lane fed only its share (%d of 40 "
               "bulk done when the 40 live ones were)" % done_bulk)
            ok(a.wait_final(bulk, 60), "then the bulk lane is worked through", w.tail())
            eq(rd.xlen("arbiter:jobs:bulk"), 0, "the bulk lane is empty")
            m = http(port, "/metrics")[1]
            mv = re.search(r"^arbiter_bulk_moved_total (\d+)", m, re.M)
            ok(mv and int(mv.group(1)) == 40, "arbiter_bulk_moved_total counts the 40 moved jobs",
               mv.group(0) if mv else m[-500:])
            st = json.loads(arbiter(s, "status", "--json").stdout)["redis"]
            eq(st.get("bulk_lane"), 0, "status --json shows the bulk lane")
        finally:
            w.term()

        # 7. Dead-letter cap.
        for i in range(50):
            rd.xadd("arbiter:dead", {"reason": "filler", "n": str(i)})
        w = Worker(s, "w-cap", env={"ARBITER_DEAD_LETTER_MAX": "10"})
        try:
            ok(wait_for(lambda: rd.xlen("arbiter:dead") <= 110 and rd.xlen("arbiter:dead") < 51, 20),
               "the dead-letter stream is trimmed towards ARBITER_DEAD_LETTER_MAX", rd.xlen("arbiter:dead"))
        finally:
            w.term()
        a.close()
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
