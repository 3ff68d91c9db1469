#!/usr/bin/python3
"""`arbiter worker` reconciler (TAP on stdout).

1. A normal backlog older than the grace period, worked slowly by a worker
   with a tiny ARBITER_RECONCILE_MS: nothing is re-enqueued (no duplicates
   while the backlog sits in the stream).
2. An API server that died between INSERT and XADD: 6,000 queued
   submissions that never reached Redis (more than one reconciler page) are
   re-enqueued once each and evaluated; the reconciler counter says 6,000.
3. A backlog stranded by `XGROUP SETID ... $`: still in the stream but
   never to be delivered. The reconciler counts only entries pending for the
   group or after its last-delivered id, so all 20 are re-enqueued and
   evaluated (before #16 they stayed queued for good); a pending entry is
   left alone.
"""
import re
import sys
import time
import urllib.request

from services import Services, free_port
from workerkit import SPEC_X, Arena, Worker, bulk, diag, done, eq, exactly_once, migrate, ok, wait_for


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
        ags = [a.agent() for _ in range(10)]

        # 1. A slow normal backlog.
        subs = bulk(a, ags, ch, 1500, enqueue=False)
        a.q("UPDATE submissions SET submitted_at = now() - interval '1 minute' WHERE id = ANY(%s::uuid[])",
            subs)
        from workerkit import enqueue_all
        enqueue_all(a, subs)
        port = free_port()
        w = Worker(s, "rc-1", env={"ARBITER_RECONCILE_MS": "200", "ARBITER_CONCURRENCY": "4",
                                   "ARBITER_BATCH_MAX": "2", "ARBITER_METRICS_ADDR": "127.0.0.1:%d" % port})
        t0 = time.time()
        ok(a.wait_final(subs, 60), "slow backlog finished", w.tail())
        diag("%.1fs, reconciler ran every 200 ms meanwhile" % (time.time() - t0))
        eq(requeued(port), 0, "nothing re-enqueued while the backlog was in the stream")
        problems = exactly_once(a, subs, ags)
        ok(not problems, "exactly once", "\n".join(problems))
        eq(w.term(30), 0, "worker exits 0", w.tail())

        # 2. Never enqueued.
        lost = bulk(a, ags, ch, 6000, enqueue=False)
        a.q("UPDATE submissions SET submitted_at = now() - interval '1 minute' WHERE id = ANY(%s::uuid[])",
            lost)
        port = free_port()
        w = Worker(s, "rc-2", env={"ARBITER_RECONCILE_MS": "1000",
                                   "ARBITER_METRICS_ADDR": "127.0.0.1:%d" % port})
        ok(a.wait_final(lost, 60), "submissions that never reached Redis were evaluated", w.tail())
        eq(requeued(port), 6000, "each re-enqueued exactly once (two reconciler pages)")
        problems = exactly_once(a, subs + lost, ags)
        ok(not problems, "exactly once", "\n".join(problems))
        eq(a.r.xlen(a.stream), 0, "stream empty")
        eq(w.term(30), 0, "worker exits 0", w.tail())

        # 3. Stranded by XGROUP SETID $ (and one entry pending for a dead consumer).
        stranded = bulk(a, ags, ch, 21, enqueue=False)
        a.q("UPDATE submissions SET submitted_at = now() - interval '1 minute' WHERE id = ANY(%s::uuid[])",
            stranded)
        enqueue_all(a, stranded)
        group = "arbiter-workers"
        a.r.xreadgroup(group, "dead-consumer", {a.stream: ">"}, count=1)
        a.r.xgroup_setid(a.stream, group, "$")
        pend = a.r.xpending(a.stream, group)["pending"]
        eq(pend, 1, "one entry pending for a dead consumer, 20 stranded before the group's id")
        port = free_port()
        w = Worker(s, "rc-3", env={"ARBITER_RECONCILE_MS": "1000", "ARBITER_CLAIM_IDLE_MS": "600000",
                                   "ARBITER_METRICS_ADDR": "127.0.0.1:%d" % port})
        ok(a.wait_final(stranded[1:], 60), "the 20 stranded submissions were re-enqueued and evaluated",
           w.tail())
        time.sleep(2.5)   # two more reconciler periods
        eq(requeued(port), 20, "exactly the 20 stranded ones re-enqueued (not the pending one)")
        eq(a.status(stranded[0]), "queued", "the pending one waits for its claim, untouched")
        eq(w.term(30), 0, "worker exits 0", w.tail())
        a.close()
    return done()


if __name__ == "__main__":
    sys.exit(main())
