#!/usr/bin/python3
"""`arbiter status --prune` removes only consumers that are provably gone (README
"arbiter status"), on every supported Redis: below 7.2 (Debian 12 ships 7.0) a live worker
that finds no job has a growing IDLE and there is no INACTIVE, so idleness proves nothing.
The workers' own heartbeats (`<prefix>:workers`, written every 2 s by Redis's clock) do.

Through a real redis-server and PostgreSQL, with two running `arbiter worker` replicas:
- after they have idled longer than --prune-idle, `--prune --prune-idle 1s` keeps both
  (before heartbeats it removed both), and shows their LAST SEEN;
- a consumer whose heartbeat is older than the bound, and one that never wrote one while
  heartbeats have been written for longer than the bound, are removed;
- a clean exit removes the worker's consumer and its heartbeat.
"""
import json
import subprocess
import sys
import time

from services import Services
from workerkit import BIN, Worker, cli, migrate, ok, wait_for, done

STALE_S = 10   # OPSCTL_HEARTBEAT_STALE_MS


def consumers(r):
    try:
        return sorted(c["name"] for c in r.xinfo_consumers("arbiter:jobs", "arbiter-workers"))
    except Exception:  # noqa: BLE001 (no stream or group yet)
        return []


def main():
    import redis
    with Services() as s:
        migrate(s)
        r = redis.Redis.from_url(s.redis_url, decode_responses=True)
        ver = r.info("server")["redis_version"]
        w1, w2 = Worker(s, "live-1"), Worker(s, "live-2")
        try:
            ok(wait_for(lambda: {"live-1", "live-2"} <= set(consumers(r)), 30),
               "both replicas joined the group (Redis %s)" % ver, consumers(r))
            ok(wait_for(lambda: r.hexists("arbiter:workers", "live-1")
                        and r.hexists("arbiter:workers", "live-2"), 20),
               "both write a heartbeat", r.hgetall("arbiter:workers"))
            # Dead consumers of three kinds, made as a crashed replica leaves them.
            r.xgroup_createconsumer("arbiter:jobs", "arbiter-workers", "never-beat")
            r.xgroup_createconsumer("arbiter:jobs", "arbiter-workers", "stale-beat")
            r.hset("arbiter:workers", "stale-beat", int(time.time() * 1000) - 60000)
            time.sleep(STALE_S + 1.5)   # every idle clock, and the heartbeats' age, past the bound
            idle = {c["name"]: c["idle"] for c in r.xinfo_consumers("arbiter:jobs", "arbiter-workers")}
            ok(idle.get("live-1", 0) >= 1000 and idle.get("live-2", 0) >= 1000,
               "live replicas look idle to Redis %s (IDLE %s ms): idleness alone would prune them"
               % (ver, idle))
            p = cli(s, s.redis_url, "status", "--prune", "--prune-idle", "1s", "--json")
            try:
                j = json.loads(p.stdout)["redis"]
            except (ValueError, KeyError):
                j = {}
            left = consumers(r)
            ok("live-1" in left and "live-2" in left,
               "--prune --prune-idle 1s keeps both running replicas", (left, p.stdout, p.stderr))
            ok("never-beat" not in left and "stale-beat" not in left,
               "it removes the consumer with a stale heartbeat and the one that never wrote one",
               left)
            seen = {c["name"]: c.get("last_seen_ms") for c in j.get("consumers", [])}
            ok(all(isinstance(seen.get(n), int) and 0 <= seen[n] < STALE_S * 1000
                   for n in ("live-1", "live-2")), "--json: the replicas' last_seen_ms", seen)
            ok(not r.hexists("arbiter:workers", "stale-beat"), "the pruned heartbeat is deleted")
            p = cli(s, s.redis_url, "status")
            ok("LAST SEEN" in p.stdout, "the table shows LAST SEEN", p.stdout)
        finally:
            rc1, rc2 = w1.term(), w2.term()
        ok(rc1 == 0 and rc2 == 0, "both replicas exit 0", w1.tail() + w2.tail())
        ok(wait_for(lambda: not r.hexists("arbiter:workers", "live-1"), 10),
           "a clean exit deletes the worker's heartbeat", r.hgetall("arbiter:workers"))
    return done()


if __name__ == "__main__":
    sys.exit(main())
