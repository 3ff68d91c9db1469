#!/usr/bin/python3
"""No password in any output, for every spelling of a connection string (TAP).

1. The table test/data/redact_cases.json through the scripts' shared helper
   (scripts/arbiter_conn.py): exactly the text the C side (test-redact) shows.
2. Live strings pointed at a private Redis (with requirepass) and PostgreSQL,
   including the spellings that leaked before: a Redis password holding '/',
   conninfo "password = x" and "password\\t=x", a URI whose password holds '/'
   (encoded: works; raw: refused, since libpq would read it as host/port),
   each through every output: the worker's log, /metrics and /readyz,
   `arbiter status` (table and --json), `arbiter migrate`, `scripts/dlq`,
   `scripts/requeue` (dry run and real), reachable and with the server down.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid

from services import Services
import tap
from tap import ok

BIN = os.environ.get("ARBITER_BIN", "build/worker/arbiter")
TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "scripts"))
import arbiter_conn  # noqa: E402

DLQ = os.path.join(TOP, "scripts", "dlq")
REQUEUE = os.path.join(TOP, "scripts", "requeue")


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd, env):
    e = {k: v for k, v in os.environ.items() if not k.startswith("ARBITER_") or k == "ARBITER_BIN"}
    e.update(env)
    try:
        r = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=90)
        return r.returncode, r.stdout + r.stderr
    except subprocess.TimeoutExpired as x:
        return None, "timeout: %s %s" % (x.stdout, x.stderr)


def worker_outputs(env):
    """Runs a worker a few seconds; returns its log and the metrics/readyz bodies."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("ARBITER_") or k == "ARBITER_BIN"}
    e.update({"ARBITER_METRICS_ADDR": "127.0.0.1:0", "ARBITER_RATE_LIMIT": "0",
              "ARBITER_LOG_LEVEL": "debug", "ARBITER_WORKER_ID": "redact-w",
              "ARBITER_RECONCILE_MS": "600000", "ARBITER_DRAIN_MS": "2000"})
    e.update(env)
    p = subprocess.Popen([BIN, "worker"], env=e, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    lines, port = [], []

    def read():
        for line in p.stdout:
            lines.append(line)
            m = re.search(r"metrics listener on 127\.0\.0\.1:(\d+)", line)
            if m:
                port.append(int(m.group(1)))
    t = threading.Thread(target=read, daemon=True)
    t.start()
    deadline = time.time() + 15
    while time.time() < deadline and not port and p.poll() is None:
        time.sleep(0.05)
    bodies = []
    if port:
        time.sleep(1.0)   # let it connect (or fail to) and log about it
        for path in ("/metrics", "/readyz", "/healthz"):
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port[0], path),
                                            timeout=5) as r:
                    bodies.append(r.read().decode())
            except urllib.error.HTTPError as x:
                bodies.append(x.read().decode())
            except OSError as x:
                bodies.append(str(x))
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    t.join(5)
    return "".join(lines), "\n".join(bodies)


def table_checks():
    cases = json.load(open(os.path.join(TOP, "test", "data", "redact_cases.json")))["cases"]
    for c in cases:
        got = arbiter_conn.redact(c["in"])
        ok(got == c["want"], "scripts helper shows %r as the C side does" % c["in"],
           "got %r want %r" % (got, c["want"]))
        if c.get("secret"):
            ok(c["secret"] not in got, "scripts helper hides the secret of %r" % c["in"])


def live(s, db_plain):
    rp, pp, db = s.redis_port, s.pg_port, s.dbname
    redis_plain = s.redis_url
    # (what, url, requirepass, secrets, expected display, works)
    cases = [
        ("redis", "redis://:ab/cd+ef==@127.0.0.1:%d/0" % rp, "ab/cd+ef==", ["ab/cd", "cd+ef=="],
         "redis://:***@127.0.0.1:%d/0" % rp, True),
        ("redis", "redis://:plain-s3cret@127.0.0.1:%d/0" % rp, "plain-s3cret", ["plain-s3cret"],
         "redis://:***@127.0.0.1:%d/0" % rp, True),
        ("redis", "redis://:p%%40ss%%2Fw9@127.0.0.1:%d/0" % rp, "p@ss/w9", ["p%40ss", "p@ss/w9"],
         "redis://:***@127.0.0.1:%d/0" % rp, True),
        ("pg", "host=127.0.0.1 port=%d user=postgres dbname=%s password = s3cr/et1" % (pp, db),
         None, ["s3cr/et1"], "user=postgres password=*** dbname=%s host=127.0.0.1 port=%d" % (db, pp),
         True),
        ("pg", "host=127.0.0.1 port=%d user=postgres dbname=%s password\t=s3cr/et2" % (pp, db),
         None, ["s3cr/et2"], "user=postgres password=*** dbname=%s host=127.0.0.1 port=%d" % (db, pp),
         True),
        ("pg", "postgresql://postgres:s3cr%%2Fet3@127.0.0.1:%d/%s" % (pp, db), None,
         ["s3cr%2Fet3", "s3cr/et3"],
         "user=postgres password=*** dbname=%s host=127.0.0.1 port=%d" % (db, pp), True),
        ("pg", "postgresql://postgres:s3cr/et4@127.0.0.1:%d/%s" % (pp, db), None,
         ["s3cr", "et4@"], arbiter_conn.INVALID_PG, False),
        ("pg", "postgresql://postgres@127.0.0.1:%d/%s?password=s3cr/et5" % (pp, db), None,
         ["s3cr/et5"], "user=postgres password=*** dbname=%s host=127.0.0.1 port=%d" % (db, pp),
         True),
    ]
    r_cli = ["redis-cli", "-p", str(rp)]
    sub = str(uuid.uuid4())
    for what, url, requirepass, secrets, shown, works in cases:
        down = re.sub(r":%d" % (rp if what == "redis" else pp), ":%d" % closed_port(), url)
        if requirepass:
            subprocess.run(r_cli + ["CONFIG", "SET", "requirepass", requirepass],
                           check=True, capture_output=True)
        redis_url = url if what == "redis" else redis_plain
        db_url = url if what == "pg" else db_plain
        outs = {}
        log, bodies = worker_outputs({"ARBITER_REDIS_URL": redis_url, "ARBITER_DATABASE_URL": db_url})
        outs["worker log"], outs["metrics/readyz"] = log, bodies
        env = {"ARBITER_REDIS_URL": redis_url, "ARBITER_DATABASE_URL": db_url}
        rc, outs["status"] = run([BIN, "status"], env)
        rc_json, outs["status --json"] = run([BIN, "status", "--json"], env)
        outs["dlq count"] = run(["/usr/bin/python3", DLQ, "count"], env)[1]
        outs["requeue --dry-run"] = run(["/usr/bin/python3", REQUEUE, "--ids", sub, "--dry-run"], env)[1]
        outs["requeue"] = run(["/usr/bin/python3", REQUEUE, "--ids", sub], env)[1]
        if what == "pg":
            outs["migrate"] = run([BIN, "migrate"], env)[1]
            outs["migrate --database-url"] = run([BIN, "migrate", "--database-url", url], {})[1]
        # The same with the server unreachable: the error paths name the target.
        denv = dict(env, **({"ARBITER_REDIS_URL": down} if what == "redis"
                            else {"ARBITER_DATABASE_URL": down}))
        outs["status (down)"] = run([BIN, "status"], denv)[1]
        outs["dlq count (down)"] = run(["/usr/bin/python3", DLQ, "count"], denv)[1] \
            if what == "redis" else ""
        outs["requeue (down)"] = run(["/usr/bin/python3", REQUEUE, "--ids", sub], denv)[1]
        if what == "pg":
            outs["migrate (down)"] = run([BIN, "migrate"], denv)[1]
        if requirepass:
            subprocess.run(r_cli + ["-a", requirepass, "--no-auth-warning",
                                    "CONFIG", "SET", "requirepass", ""], check=True,
                           capture_output=True)
        tag = url.replace(str(rp), "RPORT").replace(str(pp), "PGPORT")
        for name, text in outs.items():
            leaked = [x for x in secrets if x in text]
            ok(not leaked, "%s: %s shows no secret" % (tag, name),
               "leaked %r in:\n%s" % (leaked, text))
        if works:
            ok(shown in outs["status"], "%s: status shows it as %r" % (tag, shown), outs["status"])
        else:
            # A URL libpq would misread is a setting error: exit 2, the setting named, the
            # fix said, nothing of the URL shown.
            ok(rc == 2 and "configuration: ARBITER_DATABASE_URL" in outs["status"]
               and "%2F" in outs["status"],
               "%s: status refuses it as a setting error (exit 2)" % tag, (rc, outs["status"]))
        if works:
            ok(rc == 0 and rc_json == 0, "%s: status connects (exit 0)" % tag, outs["status"])
            ok("starting: " in outs["worker log"] and shown in outs["worker log"],
               "%s: worker log names it as %r" % (tag, shown), outs["worker log"][-3000:])
            ok(re.search(r"^arbiter_", outs["metrics/readyz"], re.M) is not None,
               "%s: /metrics answered" % tag, outs["metrics/readyz"][:500])
        else:
            ok("percent-encode" in outs["worker log"] and "percent-encode" in outs["migrate"],
               "%s: refused with the reason (percent-encode '/')" % tag,
               outs["worker log"][-2000:] + outs["migrate"])


def main():
    with Services() as s:
        r = subprocess.run([BIN, "migrate", "--database-url", s.database_url],
                           capture_output=True, text=True, timeout=120)
        if not ok(r.returncode == 0, "migrate", r.stdout + r.stderr):
            return tap.done()
        table_checks()
        live(s, s.database_url)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
