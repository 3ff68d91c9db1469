#!/usr/bin/python3
"""`arbiter worker` on a Redis Sentinel deployment, across a failover (TAP).

Real servers on loopback: a master, a replica and three sentinels (quorum 2,
down-after 1 s). Two workers get redis+sentinel://s1,s2,s3/arbiter-mm and
evaluate a backlog the API side (redis-py's Sentinel client) enqueued; in the
middle the master is SIGKILLed. The sentinels promote the replica and
publish +switch-master; the workers follow it and go on. At the end every
submission is final with exactly one result and one Elo move, ratings replay
from elo_history (nothing lost, nothing doubled), and the stream on the new
master is empty with nothing pending. Jobs the old master had not yet
replicated are re-enqueued by the reconciler from PostgreSQL.
"""
import os
import signal
import subprocess
import time

import redis
import redis.sentinel

from services import Services, free_port
from workerkit import operator_cli_checks, script_checks, SPEC_X, Arena, Worker, bulk, diag, done, eq, exactly_once, migrate, ok, wait_for

MASTER = "arbiter-mm"


def start(args, d, name):
    log = open(os.path.join(d, name + ".log"), "ab")
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def node(d, port, extra=()):
    return start(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                  "--appendonly", "no", "--dir", d, "--protected-mode", "no",
                  "--dbfilename", "dump-%d.rdb" % port] + list(extra), d, "redis-%d" % port)


def sentinel(d, port, master_port):
    conf = os.path.join(d, "sentinel-%d.conf" % port)
    with open(conf, "w") as f:
        f.write("port %d\nbind 127.0.0.1\ndir %s\nprotected-mode no\n"
                "sentinel monitor %s 127.0.0.1 %d 2\n"
                "sentinel down-after-milliseconds %s 1000\n"
                "sentinel failover-timeout %s 10000\n" % (port, d, MASTER, master_port, MASTER, MASTER))
    return start(["redis-server", conf, "--sentinel"], d, "sentinel-%d" % port)


def main():
    with Services() as s:
        migrate(s)
        d = os.path.join(s.tmp, "sentinel")
        os.makedirs(d)
        mport, rport = free_port(), free_port()
        sports = [free_port() for _ in range(3)]
        procs = {}
        try:
            procs["master"] = node(d, mport)
            procs["replica"] = node(d, rport, ["--replicaof", "127.0.0.1", str(mport)])
            t0 = time.monotonic()
            for i, p in enumerate(sports):
                procs["s%d" % i] = sentinel(d, p, mport)
            scs = [redis.Redis(port=p, decode_responses=True) for p in sports]

            def ready():
                try:
                    return all(len(c.sentinel_slaves(MASTER)) == 1 and len(c.sentinel_sentinels(MASTER)) == 2
                               for c in scs)
                except redis.RedisError:
                    return False
            ok(wait_for(ready, 40, 0.2), "3 sentinels see the master, the replica and each other")
            diag("sentinel setup %.1f s" % (time.monotonic() - t0))

            sent = redis.sentinel.Sentinel([("127.0.0.1", p) for p in sports], socket_timeout=2)
            a = Arena(s)
            a.r = sent.master_for(MASTER, decode_responses=True, socket_timeout=2)
            ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
            ags = [a.agent() for _ in range(20)]
            n = 3000
            subs = bulk(a, ags, ch, n)
            url = "redis+sentinel://%s/%s/0" % (",".join("127.0.0.1:%d" % p for p in sports), MASTER)
            env = {"ARBITER_REDIS_URL": url, "ARBITER_RECONCILE_MS": "1000",
                   "ARBITER_CLAIM_IDLE_MS": "3000", "ARBITER_CONCURRENCY": "32"}
            ws = [Worker(s, "sn%d" % i, env=env) for i in range(2)]
            ok(wait_for(lambda: a.count_status(subs) >= n // 5, 60, 0.02),
               "workers found the master through the sentinels and evaluate",
               "\n".join(w.tail(10) for w in ws))
            procs["master"].send_signal(signal.SIGKILL)
            procs["master"].wait()
            killed_at = a.count_status(subs)
            t_kill = time.monotonic()
            diag("master killed after %d of %d" % (killed_at, n))
            ok(killed_at < n, "the master died in the middle (%d of %d final)" % (killed_at, n))

            fin = a.wait_final(subs, 120)
            ok(fin, "all %d submissions final after the failover" % n,
               "\n".join(w.tail(12) for w in ws) + "\nfinal %d" % a.count_status(subs))
            diag("failover to all final: %.1f s" % (time.monotonic() - t_kill))
            problems = exactly_once(a, subs, ags)
            ok(not problems, "nothing lost, nothing doubled: exactly once, Elo replays", "\n".join(problems[:5]))
            eq(a.q1("SELECT count(*) FROM evaluation_results")[0], n, "exactly one result per submission")
            new = sent.discover_master(MASTER)
            ok(new == ("127.0.0.1", rport), "the replica was promoted", new)
            ok(wait_for(lambda: a.r.xlen(a.stream) == 0 and a.pending() == 0, 30),
               "new master: stream empty, nothing pending", (a.r.xlen(a.stream), a.pending()))
            for w in ws:
                out = w.output()
                ok("+switch-master" in out and "127.0.0.1:%d" % rport in out,
                   "%s followed +switch-master to the replica" % w.name,
                   "\n".join(l for l in out.splitlines() if '"msg":"redis' in l)[-3000:])
                eq(w.term(30), 0, "%s exits 0" % w.name, w.tail())
            # The operator commands take the same URL (through the new master).
            operator_cli_checks(s, url, redis.Redis(port=rport, decode_responses=True), "sentinel")
            a.r = redis.Redis(port=rport, decode_responses=True)
            script_checks(s, a, url, "sentinel")
            diag("sentinel suite %.1f s" % (time.monotonic() - t0))
        finally:
            for p in procs.values():
                if p.poll() is None:
                    p.kill()
                p.wait()
    return done()


if __name__ == "__main__":
    raise SystemExit(main())
