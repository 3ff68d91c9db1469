#!/usr/bin/python3
"""A producer that XADDs to the other key style's stream is seen (worker/README.md "Redis keys").

A worker on a plain redis:// URL reads `arbiter:jobs`; a producer configured for the tagged
names XADDs to `{arbiter}:jobs`, where no worker reads. Its jobs would wait for the
reconciler (ARBITER_RECONCILE_MS), re-evaluations forever. Checked here, through a real
Redis and PostgreSQL:
- the worker's start line names the stream it reads and the key style;
- entries in the other style's stream are reported: a warning naming both streams and the
  fix, the gauge arbiter_other_style_stream_length, and a line in `arbiter status` (and the
  `--json` fields);
- with the other stream empty, there is no warning and the gauge is 0.
"""
import json
import sys
import time

from services import Services
from test_ops import Worker, has_command, migrated_world, status, wait_for

import tap
from tap import ok

GAUGE = "arbiter_other_style_stream_length"


def main():
    if not has_command("worker"):
        print("1..0 # SKIP `arbiter worker` is not built yet")
        return 0
    with Services() as s:
        world = migrated_world(s)
        if world is None:
            print("1..%d" % tap.count())
            return 1
        w = Worker(world)
        try:
            ok(wait_for(lambda: w.port, 30), "the listener's port is logged", w.log())
            start = [l for l in w.log().splitlines() if '"starting:' in l or "starting:" in l]
            ok(start and "stream arbiter:jobs (key style plain)" in start[0],
               "the start line names the stream read and the key style", start)
            sub = world.submission()
            world.enqueue(sub)
            ok(wait_for(lambda: world.statuses([sub]).get("completed") == 1, 30),
               "a job on the worker's own stream completes")
            ok(wait_for(lambda: w.scrape().get(GAUGE) == 0.0, 20),
               "the other style's stream empty: the gauge is 0", w.scrape().get(GAUGE))
            ok("no worker reads" not in w.log(), "no warning while the other stream is empty")

            # A producer with the tagged names: its entries land where nobody reads.
            lost = world.submission()
            world.r.xadd("{arbiter}:jobs", {"submission_id": lost,
                                            "enqueued_at": str(int(time.time() * 1000))})
            world.r.xadd("{arbiter}:jobs", {"submission_id": lost})
            ok(wait_for(lambda: w.scrape().get(GAUGE) == 2.0, 20),
               "the gauge counts the other style's entries", w.scrape().get(GAUGE))
            ok(wait_for(lambda: "{arbiter}:jobs holds 2 entries that no worker reads" in w.log(), 20),
               "a warning names the other stream", w.log()[-2000:])
            warn = [l for l in w.log().splitlines() if "no worker reads" in l]
            ok(warn and "ARBITER_REDIS_KEYS=tagged" in warn[0] and "arbiter:jobs" in warn[0],
               "the warning says how to fix it", warn)
            ok(len(warn) == 1, "the warning is not repeated on every gauge tick", warn)

            st = status(world)
            ok(st.returncode in (0, 1) and "arbiter:jobs (key style plain)" in st.stdout,
               "status names the stream and the key style", st.stdout + st.stderr)
            ok("{arbiter}:jobs holds 2 entries that no worker reads" in st.stdout,
               "status reports the other style's stream", st.stdout)
            sj = status(world, "--json")
            try:
                red = json.loads(sj.stdout)["redis"]
            except (ValueError, KeyError) as e:
                red = {}
                ok(False, "status --json parses", "%s: %s" % (e, sj.stdout[:500]))
            ok(red.get("stream") == "arbiter:jobs" and red.get("key_style") == "plain"
               and red.get("other_style_stream") == "{arbiter}:jobs"
               and red.get("other_style_stream_length") == 2,
               "status --json: stream, key_style, other_style_stream(_length)", red)
        finally:
            rc = w.stop()
        ok(rc == 0, "SIGTERM: worker exits 0", w.log()[-2000:])
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
