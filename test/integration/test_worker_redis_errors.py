#!/usr/bin/python3
"""Permanent Redis errors in the worker's /readyz, its log and `arbiter status` (TAP).

Against a private redis-server with ACL users and a migrated PostgreSQL (so
that Redis is the only thing wrong), real `arbiter worker` processes:
1. a read-only ACL user: the worker connects, but the ACL refuses XGROUP
   (NOPERM): /readyz 503 names NOPERM and the command, the log repeats it at a
   bounded rate (not once a second); once the ACL allows everything, /readyz
   turns 200 by itself and a job is evaluated;
2. a wrong password: /readyz names WRONGPASS and the user; fixed on the
   server, the worker becomes ready by itself; `arbiter status` names it too;
3. a password given while the server has none configured for the user
   (`AUTH ... called without any password configured`);
4. a database index the server does not have: "DB index is out of range";
5. a server that wants a password and a URL without one: NOAUTH;
6. a user without ZRANGEBYSCORE: refused inside the promotion script (Redis
   7.0's "can't run this command" error, not NOPERM): /readyz names it, the
   log does not repeat it every tick.
"""
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import redis

from services import Services, free_port
from workerkit import BIN, Arena, Worker, migrate, wait_for

import tap
from tap import ok

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


def readyz_with(port, *words):
    """Waits for a 503 /readyz containing every word; returns (status, body) or the last."""
    last = [None]

    def check():
        last[0] = http(port, "/readyz")
        return last[0][0] == 503 and all(x in last[0][1] for x in words)
    return wait_for(check, 20, 0.2), last[0]


def status(s, url):
    e = {k: v for k, v in os.environ.items() if not k.startswith("ARBITER_") or k == "ARBITER_BIN"}
    e.update(ARBITER_REDIS_URL=url, ARBITER_DATABASE_URL=s.database_url)
    return subprocess.run([BIN, "status"], env=e, capture_output=True, text=True, timeout=60)


def nlines(w, word):
    return sum(1 for x in w.output().splitlines() if word in x)


def worker(s, name, url):
    port = free_port()
    w = Worker(s, name, env={"ARBITER_REDIS_URL": url,
                             "ARBITER_METRICS_ADDR": "127.0.0.1:%d" % port})
    return w, port


def main():
    with Services() as s:
        migrate(s)
        rd = redis.Redis.from_url(s.redis_url, decode_responses=True)
        hostport = s.redis_url.split("//", 1)[1].rstrip("/").split("/")[0]
        a = Arena(s)

        # 1. A read-only ACL user: connected, but every write is refused.
        rd.execute_command("ACL", "SETUSER", "ro", "on", ">ro-pw", "~*", "&*", "-@all",
                           "+@read", "+@connection", "+select")
        w, port = worker(s, "w-ro", "redis://ro:ro-pw@" + hostport)
        try:
            good, st = readyz_with(port, "NOPERM", "XGROUP", '"ro"')
            ok(good, "read-only user: /readyz 503 names NOPERM, the command and the user", (st, w.tail()))
            time.sleep(6)   # every command's first refusal is logged once (XTRIM runs at 5 s)
            n0 = nlines(w, "NOPERM")
            time.sleep(6)
            out = w.output()
            n1 = nlines(w, "NOPERM")
            ok(n0 >= 1 and n1 - n0 <= 1, "read-only user: the refusal is logged at a bounded rate (%d lines "
               "mention NOPERM, %d more after 6 s of retries)" % (n0, n1 - n0),
               "\n".join(x for x in out.splitlines() if "NOPERM" in x))
            ok("not ready: redis ACL" in out, "read-only user: the log says the worker is not ready and why",
               w.tail())
            # The operator fixes the ACL: ready by itself, jobs flow.
            rd.execute_command("ACL", "SETUSER", "ro", "+@all")
            ok(wait_for(lambda: http(port, "/readyz")[0] == 200, 20, 0.2),
               "read-only user: once the ACL allows it, /readyz is 200 without a restart",
               (http(port, "/readyz"), w.tail()))
            ok("redis is usable again" in w.output(), "read-only user: the recovery is logged", w.tail())
            ch = a.challenge(SPEC, {"a": 1})
            _, sub = a.submit(a.agent(), ch, {"a": 1})
            ok(a.wait_final([sub], 30) and a.status(sub) == "completed",
               "read-only user fixed: a job is evaluated", (a.status(sub), w.tail()))
        finally:
            ok(w.term() == 0, "read-only user: the worker exits 0")

        # 2. A wrong password.
        rd.execute_command("ACL", "SETUSER", "arb", "on", ">right-pw", "~*", "&*", "+@all")
        url = "redis://arb:wrong-pw@" + hostport
        w, port = worker(s, "w-wrongpass", url)
        try:
            good, st = readyz_with(port, "WRONGPASS", '"arb"')
            ok(good, "wrong password: /readyz 503 names WRONGPASS and the user", (st, w.tail()))
            ok("wrong-pw" not in st[1] and "wrong-pw" not in w.output(),
               "wrong password: the password is neither in /readyz nor in the log")
            r = status(s, url)
            ok(r.returncode != 0 and "WRONGPASS" in r.stdout + r.stderr,
               "wrong password: arbiter status names WRONGPASS", (r.returncode, r.stdout, r.stderr))
            n0 = nlines(w, "WRONGPASS")
            time.sleep(6)
            n1 = nlines(w, "WRONGPASS")
            ok(n0 >= 1 and n1 - n0 <= 1, "wrong password: logged at a bounded rate (%d lines, %d more "
               "after 6 s of retries)" % (n0, n1 - n0), w.tail())
            rd.execute_command("ACL", "SETUSER", "arb", ">wrong-pw")
            ok(wait_for(lambda: http(port, "/readyz")[0] == 200, 20, 0.2),
               "wrong password: accepted on the server, /readyz is 200 without a restart",
               (http(port, "/readyz"), w.tail()))
        finally:
            w.term()

        # 3. A password while the default user has none.
        w, port = worker(s, "w-nopass", "redis://:some-pw@" + hostport)
        try:
            good, st = readyz_with(port, "without any password configured")
            ok(good, "a password the server does not expect: /readyz names it", (st, w.tail()))
        finally:
            w.term()

        # 4. A database index the server does not have.
        url = "redis://%s/99" % hostport
        w, port = worker(s, "w-baddb", url)
        try:
            good, st = readyz_with(port, "DB index")
            ok(good, "database 99 of a 16-database server: /readyz names the bad DB index", (st, w.tail()))
            r = status(s, url)
            ok(r.returncode != 0 and "DB index" in r.stdout + r.stderr,
               "bad DB index: arbiter status names it", (r.returncode, r.stdout, r.stderr))
        finally:
            w.term()

        # 6. A user without ZRANGEBYSCORE: refused inside the promotion script (Redis 7.0 says
        #    "ERR The user executing the script can't run this command ...", not NOPERM).
        rd.execute_command("ACL", "SETUSER", "noz", "on", ">nz-pw", "~*", "&*", "+@all",
                           "-zrangebyscore")
        w, port = worker(s, "w-noz", "redis://noz:nz-pw@" + hostport)
        try:
            good, st = readyz_with(port, "redis ACL", '"noz"', "can't run this command")
            ok(good, "a command refused inside a script: /readyz names it", (st, w.tail()))
            time.sleep(3)
            n0 = nlines(w, "can't run this command")
            time.sleep(5)
            n1 = nlines(w, "can't run this command")
            ok(n0 >= 1 and n1 - n0 <= 1, "a command refused inside a script: not logged every 250 ms "
               "(%d lines, %d more in 5 s)" % (n0, n1 - n0), w.tail())
        finally:
            w.term()

        # 5. The server wants a password, the URL has none (last: it changes the server).
        w, port = worker(s, "w-noauth", "redis://" + hostport)
        try:
            ok(wait_for(lambda: http(port, "/readyz")[0] == 200, 20, 0.2), "no password needed yet: ready")
            ok("database schema" not in w.output(), "no false schema cause at start (it is migrated)",
               w.tail())
            rd.execute_command("CONFIG", "SET", "requirepass", "now-needed")
            rd = redis.Redis.from_url("redis://:now-needed@" + hostport, decode_responses=True)
            rd.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
            good, st = readyz_with(port, "NOAUTH")
            ok(good, "the server now wants a password: /readyz names NOAUTH", (st, w.tail()))
            rd.execute_command("CONFIG", "SET", "requirepass", "")
        finally:
            w.term()
        a.close()
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
