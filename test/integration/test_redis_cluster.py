#!/usr/bin/python3
"""`arbiter worker` on a Redis Cluster, across a migration of its slot (TAP).

Real servers on loopback: three masters (`redis-server --cluster-enabled
yes`, joined with `redis-cli --cluster create`). Every key arbiter uses has
the hash tag {arbiter}, so they all live in one slot. Two workers get
redis+cluster://n1,n2,n3 and evaluate a backlog; in the middle the test
migrates that slot to another master the way redis-cli --cluster reshard
does (SETSLOT IMPORTING/MIGRATING, MIGRATE the keys, SETSLOT NODE), slowly:
the jobs stream alone first, then the other keys, then a window of two
seconds in which every key is on the new node but the slot still belongs to
the old one. There the workers only get ASK redirects: they must resend
each command to the importing node with ASKING, and keep evaluating (the
test counts the submissions finished in the window and the commands each
worker logs as answered through ASKING). After SETSLOT NODE they follow
MOVED. At the end every submission is final with exactly one result and one
Elo move, ratings replay from elo_history, and the stream on the new owner
is empty with nothing pending.
"""
import os
import re
import socket
import subprocess
import time

import redis
from redis.cluster import ClusterNode, RedisCluster

from services import Services, free_port
from workerkit import operator_cli_checks, script_checks, SPEC_X, Arena, Worker, bulk, diag, done, eq, exactly_once, migrate, ok, wait_for


def node(d, port):
    log = open(os.path.join(d, "node-%d.log" % port), "ab")
    return subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", d, "--protected-mode", "no", "--cluster-enabled", "yes",
         "--cluster-config-file", "nodes-%d.conf" % port, "--cluster-node-timeout", "5000",
         "--dbfilename", "dump-%d.rdb" % port],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def cluster_port():
    """A free port whose cluster-bus port (+10000) is valid and free too."""
    for _ in range(200):
        p = free_port()
        if p + 10000 > 65535:
            continue
        with socket.socket() as t:
            try:
                t.bind(("127.0.0.1", p + 10000))
            except OSError:
                continue
        return p
    raise RuntimeError("no free port pair for a cluster node")


def up(port):
    try:
        return redis.Redis(port=port, socket_timeout=1).ping()
    except redis.RedisError:
        return False


def migrate_slot(slot, src, dst, dst_port, first, window):
    """Moves slot from src to dst (redis.Redis clients of the two masters):
    the key first alone, a second later the others, then window() runs while
    every key is on dst and the slot still src's (only ASK redirects), then
    SETSLOT NODE. Returns the number of keys moved."""
    sid, did = src.execute_command("CLUSTER", "MYID"), dst.execute_command("CLUSTER", "MYID")
    dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", sid)
    src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", did)
    src.execute_command("MIGRATE", "127.0.0.1", dst_port, "", 0, 5000, "KEYS", first)
    moved = 1
    time.sleep(1.0)           # keys on both nodes: ASK for some commands, TRYAGAIN for others
    while True:
        keys = src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 10)
        if not keys:
            break
        src.execute_command("MIGRATE", "127.0.0.1", dst_port, "", 0, 5000, "KEYS", *keys)
        moved += len(keys)
    window()
    for c in (dst, src):
        c.execute_command("CLUSTER", "SETSLOT", slot, "NODE", did)
    return moved


def slot_owner(c, slot):
    for lo, hi, master, *_ in c.execute_command("CLUSTER", "SLOTS"):
        if lo <= slot <= hi:
            return master[1]
    return None


def main():
    with Services() as s:
        migrate(s)
        d = os.path.join(s.tmp, "cluster")
        os.makedirs(d)
        ports = [cluster_port() for _ in range(3)]
        procs = []
        try:
            t0 = time.monotonic()
            procs = [node(d, p) for p in ports]
            ok(wait_for(lambda: all(up(p) for p in ports), 20, 0.1),
               "three cluster-enabled redis-servers are up")
            r = subprocess.run(["redis-cli", "--cluster", "create"] +
                               ["127.0.0.1:%d" % p for p in ports] +
                               ["--cluster-replicas", "0", "--cluster-yes"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
            ok(r.returncode == 0, "redis-cli --cluster create", r.stdout[-2000:])
            cs = [redis.Redis(port=p, decode_responses=True) for p in ports]
            ok(wait_for(lambda: all(c.cluster("INFO")["cluster_state"] == "ok" for c in cs), 30, 0.2),
               "cluster_state ok on every node")
            diag("cluster setup %.1f s" % (time.monotonic() - t0))

            a = Arena(s, style="tagged")  # "auto" is tagged with a Cluster URL
            a.r = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in ports],
                               decode_responses=True)
            slot = a.r.keyslot(a.stream)
            eq(len({a.r.keyslot(k) for k in (a.stream, a.dead, a.delayed, a.base + ":rl:x",
                                              a.base + ":reconcile:lock")}), 1,
               "every arbiter key is in one slot (%d)" % slot)
            owner = ports.index(slot_owner(cs[0], slot))
            target = (owner + 1) % 3
            ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
            ags = [a.agent() for _ in range(20)]
            n = 3000
            subs = bulk(a, ags, ch, n)
            url = "redis+cluster://%s" % ",".join("127.0.0.1:%d" % p for p in ports)
            env = {"ARBITER_REDIS_URL": url, "ARBITER_RECONCILE_MS": "1000",
                   "ARBITER_CLAIM_IDLE_MS": "3000", "ARBITER_CONCURRENCY": "32",
                   # The limit is on (every job runs the rate-limit script) but high
                   # enough that nothing is deferred: the normal state, in which the
                   # delayed set and the dead-letter stream do not exist. (Multi-key
                   # scripts that name a missing key get TRYAGAIN from the importing
                   # node; the worker must keep evaluating anyway.)
                   "ARBITER_RATE_LIMIT": "100000/60s", "ARBITER_RATE_BURST": "100000"}
            eq((a.r.exists(a.delayed), a.r.exists(a.dead)), (0, 0),
               "no delayed set, no dead-letter stream (nothing planted)")
            ws = [Worker(s, "cl%d" % i, env=env) for i in range(2)]
            ok(wait_for(lambda: a.count_status(subs) >= n // 5, 60, 0.02),
               "workers found the slot's owner and evaluate", "\n".join(w.tail(10) for w in ws))
            before = a.count_status(subs)
            win = {}
            # Jobs added inside the window (every key on the importing node, the slot still
            # the old owner's: the producer's XADD goes there through ASK as well). Without
            # them the workers may have finished the backlog before the window opens.
            fresh = bulk(a, ags, ch, 300, enqueue=False)

            def window():
                win["start"] = a.count_status(subs)
                t = time.monotonic()
                for sid in fresh:
                    a.r.xadd(a.stream, {"submission_id": sid,
                                        "enqueued_at": str(int(time.time() * 1000))})
                time.sleep(max(0.0, 2.0 - (time.monotonic() - t)))
                win["end"] = a.count_status(subs)
                win["fresh"] = a.count_status(fresh)

            t_mig = time.monotonic()
            moved = migrate_slot(slot, cs[owner], cs[target], ports[target], a.stream, window)
            during = a.count_status(subs)
            diag("slot %d moved from :%d to :%d (%d keys, %.1f s) after %d of %d; %d final after"
                 % (slot, ports[owner], ports[target], moved, time.monotonic() - t_mig, before, n, during))
            # The workers may finish the backlog during the migration (they keep going through
            # ASK redirects): what matters is that it began with work left.
            ok(before < n, "the migration happened in the middle (%d of %d final at its start)"
               % (before, n))
            # A second backlog after the migration: every worker then talks to the new owner,
            # which it finds through MOVED.
            more = bulk(a, ags, ch, 300)
            subs = subs + more
            n += len(more)
            ok(moved >= 3, "the stream and the other keys were migrated (%d keys)" % moved)
            ok(win["fresh"] >= 100,
               "workers kept evaluating through ASK redirects while every key sat on the "
               "importing node (%d of the 300 jobs added in the 2 s window finished in it; "
               "%d of the backlog final at its start)" % (win["fresh"], win["start"]),
               "\n".join(w.tail(12) for w in ws))
            ok(win["start"] - before >= 100 or win["start"] == n,
               "and while the keys moved (%d finished between the migration's start and the "
               "window)" % (win["start"] - before))
            subs = subs + fresh
            n += len(fresh)

            fin = a.wait_final(subs, 120)
            ok(fin, "all %d submissions final after the migration" % n,
               "\n".join(w.tail(12) for w in ws) + "\nfinal %d" % a.count_status(subs))
            diag("migration to all final: %.1f s" % (time.monotonic() - t_mig))
            problems = exactly_once(a, subs, ags)
            ok(not problems, "nothing lost, nothing doubled: exactly once, Elo replays", "\n".join(problems[:5]))
            eq(a.q1("SELECT count(*) FROM evaluation_results")[0], n, "exactly one result per submission")
            newr = cs[target]
            ok(wait_for(lambda: newr.xlen(a.stream) == 0 and
                        newr.xpending(a.stream, a.group)["pending"] == 0, 30),
               "new owner: stream empty, nothing pending")
            for w in ws:
                out = w.output()
                ok("MOVED %d 127.0.0.1:%d" % (slot, ports[target]) in out,
                   "%s followed MOVED to the new owner" % w.name,
                   "\n".join(l for l in out.splitlines() if '"msg":"redis' in l)[-3000:])
                asked = sum(int(m) for m in re.findall(
                    r"(\d+) command\(s\) answered by the importing node 127\.0\.0\.1:%d through ASKING"
                    % ports[target], out))
                ok(asked >= 1, "%s sent %d command(s) to the importing node with ASKING" % (w.name, asked),
                   "\n".join(l for l in out.splitlines() if "cluster" in l)[-3000:])
                # No reconnect storm: TRYAGAIN (a multi-key script while the slot migrates)
                # is retried on the same connection, quietly.
                noisy = [l for l in out.splitlines()
                         if re.search(r'"level":"(warn|error)"', l) and
                         re.search(r"cluster|TRYAGAIN|migrat|cannot reach|connection lost|UNBLOCKED", l)]
                ok(len(noisy) <= 3, "%s: at most 3 warnings about the migration (%d)" % (w.name, len(noisy)),
                   "\n".join(noisy[:20]))
                errs = [l for l in out.splitlines() if '"level":"error"' in l]
                ok(not errs, "%s: no error-level line (XREADGROUP UNBLOCKED is a warning)" % w.name,
                   "\n".join(errs[:10]))
                eq(w.term(30), 0, "%s exits 0" % w.name, w.tail())
            # The operator commands take the same URL (seed list; the slot's new owner).
            operator_cli_checks(s, url, cs[target], "cluster", style="tagged")
            script_checks(s, a, url, "cluster")
            diag("cluster suite %.1f s" % (time.monotonic() - t0))
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                p.wait()
    return done()


if __name__ == "__main__":
    raise SystemExit(main())
