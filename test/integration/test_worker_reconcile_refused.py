#!/usr/bin/python3
"""`arbiter worker` reconciler while Redis refuses its writes (TAP on stdout).

30 queued submissions never reached Redis (an API server died between INSERT
and XADD). The worker connects as a Redis ACL user; Redis then refuses the
reconciler's writes in two ways, each for several reconciler periods:

1. The user may not XADD (`ACL SETUSER ... -xadd`): each re-enqueue fails
   with NOPERM. The failures are logged as failures, the reconciler counter
   stays 0, nothing says "re-enqueued", the stream stays empty and the
   submissions stay queued.
2. Redis is out of memory (`maxmemory` 1 byte, `noeviction`): the run lock
   (SET NX) is refused with OOM. The refusal is logged (before #16 round 2
   it was taken silently for "another replica holds the lock"), nothing is
   counted, nothing is enqueued.
3. Redis accepts writes again: the next run re-enqueues each of the 30
   exactly once (counter 30, one "re-enqueued as" line each) and all are
   evaluated exactly once.
"""
import re
import sys
import time
import urllib.request

import redis

from services import Services, free_port
from workerkit import SPEC_X, Arena, Worker, bulk, diag, done, eq, exactly_once, migrate, ok, wait_for

USER, PASSWORD = "recon", "recon-pass"


def requeued(port):
    try:
        body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=2).read().decode()
    except OSError:
        return None
    m = re.search(r"^arbiter_reconciler_requeued_total (\d+)", body, re.M)
    return int(m.group(1)) if m else 0


def main():
    with Services() as s:
        migrate(s)
        a = Arena(s)
        ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
        ags = [a.agent() for _ in range(5)]
        lost = bulk(a, ags, ch, 30, enqueue=False)
        a.q("UPDATE submissions SET submitted_at = now() - interval '1 minute' WHERE id = ANY(%s::uuid[])",
            lost)

        # The worker's user: everything but XADD for now.
        a.r.execute_command("ACL", "SETUSER", USER, "on", ">" + PASSWORD, "~*", "&*", "+@all", "-xadd")
        url = "redis://%s:%s@127.0.0.1:%d/0" % (USER, PASSWORD, s.redis_port)
        as_user = redis.Redis.from_url(url)
        try:
            as_user.xadd("probe", {"a": "1"})
            ok(False, "the ACL user cannot XADD")
        except redis.exceptions.NoPermissionError:
            ok(True, "the ACL user cannot XADD")
        as_user.close()

        port = free_port()
        w = Worker(s, "rr-1", env={"ARBITER_REDIS_URL": url, "ARBITER_RECONCILE_MS": "1000",
                                   "ARBITER_METRICS_ADDR": "127.0.0.1:%d" % port})

        # 1. XADD refused.
        ok(wait_for(lambda: w.output().count("re-enqueue(s) failed") >= 3, 30),
           "three reconciler runs reported their re-enqueues as failed", w.tail())
        out = w.output()
        fails = len(re.findall(r"reconciler: re-enqueue failed \(NOPERM", out))
        ok(fails >= 90, "each of the 30 re-enqueues logged as failed with Redis's reason, in each run "
           "(%d lines)" % fails, w.tail())
        eq(requeued(port), 0, "nothing counted as re-enqueued")
        ok("re-enqueued as" not in out and "submission(s) that Redis had lost" not in out,
           "nothing logged as re-enqueued", w.tail())
        eq(a.r.xlen(a.stream), 0, "the stream holds nothing")
        eq(a.count_status(lost, ("queued",)), 30, "all 30 still queued")

        # 2. Out of memory: the run lock is refused.
        a.r.execute_command("ACL", "SETUSER", USER, "+xadd")
        a.r.config_set("maxmemory-policy", "noeviction")
        a.r.config_set("maxmemory", "1")
        mark = len(w.output())
        ok(wait_for(lambda: w.output()[mark:].count("reconciler: cannot take the run lock") >= 2, 30),
           "two reconciler runs reported the refused lock", w.tail())
        seg = w.output()[mark:]
        ok("OOM" in seg, "with Redis's reason (OOM)", w.tail())
        eq(requeued(port), 0, "still nothing counted")
        ok("re-enqueued as" not in seg, "nothing logged as re-enqueued", w.tail())
        eq(a.r.xlen(a.stream), 0, "the stream still holds nothing")
        eq(a.count_status(lost, ("queued",)), 30, "all 30 still queued")

        # 3. Writes accepted again.
        a.r.config_set("maxmemory", "0")
        t0 = time.time()
        ok(a.wait_final(lost, 60), "all 30 evaluated once Redis accepts writes", w.tail())
        diag("%.1fs after Redis accepted writes again" % (time.time() - t0))
        time.sleep(2.5)   # two more reconciler periods: nothing more to re-enqueue
        eq(requeued(port), 30, "each re-enqueued exactly once (counter)")
        eq(w.output().count("re-enqueued as"), 30, "one 're-enqueued as' line each")
        problems = exactly_once(a, lost, ags)
        ok(not problems, "exactly once", "\n".join(problems))
        eq(a.dead_entries(), [], "nothing dead-lettered")
        eq(w.term(30), 0, "worker exits 0", w.tail())
        a.close()
    return done()


if __name__ == "__main__":
    sys.exit(main())
