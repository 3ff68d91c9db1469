#!/usr/bin/python3
"""Operator conventions of the `arbiter` binary (TAP on stdout).

Against a private Redis and PostgreSQL (test/services.py):
- `arbiter --version` / `arbiter version`, and arbiter_build_info in /metrics;
- every bad setting is refused before any connection, with one message
  format and exit 2 (a rate without a unit, a bad metrics address, a bad
  duration, a bad Redis URL, a '@' after the host of a database URI, a bad judge budget,
  allow list or key prefix/style), for `worker` and `status` alike, and `migrate`'s URL;
- a worker that never reached Redis does not claim at exit that its consumer stays;
- durations with units and `export KEY=` lines in the configuration file;
- `arbiter pause` / `resume` (global and per challenge) shown by `status`;
- `arbiter status --prune` removes idle consumers that hold nothing and
  keeps those with pending entries.
"""
import json
import os
import subprocess
import sys
import time
import urllib.request

import redis

from services import Services, free_port
from workerkit import BIN, Worker, migrate, wait_for

import tap
from tap import ok


def run(args, env=None, timeout=60, **kw):
    e = {k: v for k, v in os.environ.items() if not k.startswith("ARBITER_") or k == "ARBITER_BIN"}
    e.update(env or {})
    return subprocess.run([BIN] + args, env=e, capture_output=True, text=True, timeout=timeout, **kw)


def main():
    r = run(["--version"])
    ok(r.returncode == 0 and r.stdout.startswith("arbiter 0."), "arbiter --version", r.stdout + r.stderr)
    r2 = run(["version"])
    ok(r2.returncode == 0 and r2.stdout == r.stdout, "arbiter version prints the same", r2.stdout)

    # Bad settings: refused before any connection (the servers below do not exist), exit 2,
    # "arbiter <cmd>: configuration: <SETTING> ...".
    nowhere = {"ARBITER_REDIS_URL": "redis://127.0.0.1:1/0",
               "ARBITER_DATABASE_URL": "postgresql://u@127.0.0.1:1/x"}
    cases = [
        (["--rate-limit", "10/60"], "ARBITER_RATE_LIMIT"),
        (["--metrics-addr", "foo"], "ARBITER_METRICS_ADDR"),
        (["--drain-ms", "5 minutes"], "ARBITER_DRAIN_MS"),
        (["--redis-url", "http://h/"], "ARBITER_REDIS_URL"),
        (["--sandbox-cgroup", "maybe"], "ARBITER_SANDBOX_CGROUP"),
        # These were found only once the worker opened its parts: exit 1, another format.
        (["--database-url", "postgresql://u:p@h/db@x"], "ARBITER_DATABASE_URL"),
        (["--judge-budget", "5/week"], "ARBITER_JUDGE_BUDGET"),
        (["--rate-allow", "10.0.0.0/99"], "ARBITER_RATE_ALLOW"),
        (["--redis-keys", "plain", "--redis-url", "redis+cluster://127.0.0.1:1"],
         "ARBITER_REDIS_KEYS"),
        (["--redis-keys", "tagged", "--prefix", "{arb"], "ARBITER_PREFIX"),
    ]
    for cmd in ("worker", "status"):
        for args, setting in cases:
            t0 = time.time()
            r = run([cmd] + args, env=nowhere, timeout=30)
            ok(r.returncode == 2 and r.stderr.startswith("arbiter %s: configuration: %s" % (cmd, setting))
               and "starting" not in r.stderr and time.time() - t0 < 10,
               "%s %s: exit 2 before connecting, one message format" % (cmd, " ".join(args)),
               "rc %s: %s" % (r.returncode, r.stderr))
    r = run(["migrate", "--database-url", "postgresql://u:p@h/db@x"], env=nowhere, timeout=30)
    ok(r.returncode == 2 and r.stderr.startswith("arbiter migrate: configuration: ARBITER_DATABASE_URL"),
       "migrate: a '@' after the host is a settings error too (exit 2)",
       "rc %s: %s" % (r.returncode, r.stderr))
    r = run(["worker", "--metrics-addr", "127.0.0.1:99999"], env=nowhere)
    ok(r.returncode == 2 and r.stderr.count("ARBITER_METRICS_ADDR") == 1, "no doubled prefix", r.stderr)

    # A worker that never reached Redis has no consumer in the group: its exit line must
    # not send the operator to prune one.
    e = {k: v for k, v in os.environ.items() if not k.startswith("ARBITER_") or k == "ARBITER_BIN"}
    e.update(nowhere, ARBITER_METRICS_ADDR="", ARBITER_LOG_FORMAT="text", ARBITER_WORKER_ID="w-none")
    p = subprocess.Popen([BIN, "worker"], env=e, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    time.sleep(1.0)
    p.terminate()
    out = p.communicate(timeout=60)[0]
    ok(p.returncode == 0 and "stays in the group" not in out
       and "consumer w-none was never created" in out,
       "a worker that never reached Redis says it left no consumer (not 'stays in the group')",
       "rc %s: %s" % (p.returncode, out[-1500:]))

    with Services() as s:
        migrate(s)
        rd = redis.Redis.from_url(s.redis_url, decode_responses=True)
        base = {"ARBITER_REDIS_URL": s.redis_url, "ARBITER_DATABASE_URL": s.database_url}

        # The configuration file: export lines, comments, durations with units.
        cfg = os.path.join(s.tmp, "worker.conf")
        port = free_port()
        with open(cfg, "w") as f:
            f.write("# arbiter worker\nexport ARBITER_REDIS_URL=%s\n"
                    "export ARBITER_DATABASE_URL='%s'  # quoted\n"
                    "ARBITER_METRICS_ADDR=127.0.0.1:%d\nARBITER_DRAIN_MS=5s\n"
                    "ARBITER_CLAIM_IDLE_MS=1m   # reclaim after a minute\n"
                    "ARBITER_SANDBOX_CGROUP=none\nARBITER_RATE_LIMIT=0\nARBITER_WORKER_ID=wcfg\n"
                    % (s.redis_url, s.database_url, port))
        w = Worker(s, "wcfg", env={"ARBITER_CONFIG": cfg, "ARBITER_METRICS_ADDR": "127.0.0.1:%d" % port})
        try:
            def metrics():
                try:
                    return urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=2).read().decode()
                except OSError:
                    return None
            text = wait_for(metrics, 30)
            ok(text and 'arbiter_build_info{version="' in text, "arbiter_build_info in /metrics",
               w.tail())
            version = run(["version"]).stdout.split()[1]
            ok(text and ('arbiter_build_info{version="%s"} 1' % version) in text,
               "its version label is arbiter version's")
        finally:
            ok(w.term() == 0, "the worker configured by the file exits 0 on SIGTERM", w.tail())

        # Pause and resume, shown by status.
        r = run(["pause"], env=base)
        ok(r.returncode == 0 and rd.exists("arbiter:paused"), "arbiter pause sets the switch", r.stderr)
        r = run(["pause", "--challenge", "two-sum", "--force"], env=base)   # created later
        ok(r.returncode == 0 and rd.sismember("arbiter:paused:challenges", "two-sum"),
           "arbiter pause --challenge two-sum", r.stderr)
        st = json.loads(run(["status", "--json"], env=base).stdout)["redis"]
        ok(st["paused"] and st["paused_challenges"] == ["two-sum"], "status --json shows both", st)
        r = run(["status"], env=base)
        ok("PAUSED" in r.stdout and "two-sum" in r.stdout, "status shows the pause", r.stdout)
        r = run(["resume"], env=base)
        ok(r.returncode == 0 and not rd.exists("arbiter:paused")
           and rd.sismember("arbiter:paused:challenges", "two-sum"),
           "arbiter resume lifts the global pause only", r.stdout + r.stderr)
        r = run(["resume", "--challenge", "two-sum"], env=base)
        ok(r.returncode == 0 and not rd.exists("arbiter:paused:challenges"), "resume --challenge",
           r.stdout + r.stderr)
        r = run(["resume", "--challenge", "x", "--all"], env=base)
        ok(r.returncode == 2, "resume --challenge with --all: exit 2", r.stderr)

        # status --prune: idle consumers without pending entries go, the others stay.
        pr = dict(base, ARBITER_PREFIX="pr")
        rd.xgroup_create("pr:jobs", "pr-workers", id="0", mkstream=True)
        rd.xadd("pr:jobs", {"submission_id": "x"})
        rd.xreadgroup("pr-workers", "holder", {"pr:jobs": ">"}, count=1)
        rd.xgroup_createconsumer("pr:jobs", "pr-workers", "gone-pod")
        time.sleep(1.2)
        r = run(["status", "--prune", "--prune-idle", "1s", "--json"], env=pr)
        names = [c["name"] for c in rd.xinfo_consumers("pr:jobs", "pr-workers")]
        ok(r.returncode == 0 and names == ["holder"], "--prune removed the idle consumer without "
           "pending entries and kept the one holding an entry", (names, r.stdout, r.stderr))
        ok(json.loads(r.stdout)["redis"]["pruned"] == 1, "status --json counts it", r.stdout)
        r = run(["status", "--prune", "--prune-idle", "1h"], env=pr)
        names = [c["name"] for c in rd.xinfo_consumers("pr:jobs", "pr-workers")]
        ok(names == ["holder"], "nothing younger than --prune-idle is pruned", r.stdout)
        r = run(["status", "--prune-idle", "soon"], env=base)
        ok(r.returncode == 2 and "configuration" in r.stderr, "bad --prune-idle: exit 2", r.stderr)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
