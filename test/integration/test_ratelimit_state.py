#!/usr/bin/python3
"""Hand-written limiter state never holds an IP's jobs back (TAP on stdout).

Before the worker starts, the limiter key `{prefix}:rl:<ip>` of each of eight
IPs is planted with state no limiter wrote: a TAT (field t) of 1e308, inf,
nan, junk text or two hours ahead (more than burst x T); a last due time (field d) of 1e308; a
string key instead of a hash; a list. One job from each IP is enqueued.
- Every one of them is evaluated (at 10/1h, burst 10, each IP's
  first job conforms once its state is reset).
- Each key then holds a plausible TAT again: a finite time at most burst x T
  after now.
- The resets are logged and counted in arbiter_ratelimit_state_resets_total.
Before the fix a TAT of 1e308 or two hours ahead, and a d of 1e308, deferred
the job by a day at a time, forever; a key of another type made every check
fail (WRONGTYPE) and the job was retried, uncounted, forever.
"""
import re
import socket
import sys
import time
import urllib.request

from services import Services
from workerkit import SPEC_X, Arena, Worker, diag, done, eq, migrate, ok

T_US = 360 * 1000000        # 10/1h: the keys outlive the test
BURST = 10


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def resets(port):
    try:
        body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=2).read().decode()
    except OSError:
        return None
    m = re.search(r"^arbiter_ratelimit_state_resets_total (\S+)", body, re.M)
    return float(m.group(1)) if m else None


def main():
    with Services() as s:
        migrate(s)
        a = Arena(s)
        ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
        now_us = int(time.time() * 1e6)
        plants = [
            ("198.51.100.1", "hash", {"t": "1e308"}),
            ("198.51.100.2", "hash", {"t": "inf"}),
            ("198.51.100.3", "hash", {"t": "nan"}),
            ("198.51.100.4", "hash", {"t": "not a number"}),
            ("198.51.100.5", "hash", {"t": str(now_us + 7200 * 1000000)}),
            ("198.51.100.6", "hash", {"d": "1e308"}),
            ("198.51.100.7", "string", "1e308"),
            ("198.51.100.8", "list", ["1e308"]),
        ]
        subs = {}
        for ip, kind, val in plants:
            key = "%s:rl:%s" % (a.base, ip)
            if kind == "hash":
                a.r.hset(key, mapping=val)
            elif kind == "string":
                a.r.set(key, val)
            else:
                a.r.rpush(key, *val)
            ag = a.agent()
            m = a.match(ag, ch)
            sid = a.submission(m, ag, {"x": 1}, source_ip=ip)
            a.enqueue(sid)
            subs[sid] = (ip, kind, val)
        port = free_port()
        w = Worker(s, "rlstate-1", env={"ARBITER_RATE_LIMIT": "10/1h", "ARBITER_RATE_BURST": str(BURST),
                                        "ARBITER_RECONCILE_MS": "600000",
                                        "ARBITER_METRICS_ADDR": "127.0.0.1:%d" % port})
        a.wait_final(list(subs), 30)
        for sid, (ip, kind, val) in subs.items():
            eq(a.status(sid), "completed", "%s %s %r: the job is evaluated" % (ip, kind, val), w.tail())
        for ip, kind, val in plants:
            key = "%s:rl:%s" % (a.base, ip)
            now = int(time.time() * 1e6)
            typ = a.r.type(key)
            t = a.r.hget(key, "t") if typ == "hash" else None
            d = a.r.hget(key, "d") if typ == "hash" else None
            diag("%s after: type %s, t %s, d %s" % (key, typ, t, d))
            good = typ == "hash" and t is not None and re.fullmatch(r"\d+", t) is not None \
                and int(t) <= now + BURST * T_US and (d is None or re.fullmatch(r"\d+", d) is not None)
            ok(good, "%s %s %r: the key holds plausible state again" % (ip, kind, val))
        out = w.output()
        eq(len(re.findall(r"implausible limiter state", out)), len(plants), "each reset is logged once",
           w.tail())
        eq(resets(port), float(len(plants)), "arbiter_ratelimit_state_resets_total counts them")
        eq(w.term(30), 0, "worker exits 0", w.tail())
        a.close()
    return done()


if __name__ == "__main__":
    sys.exit(main())
