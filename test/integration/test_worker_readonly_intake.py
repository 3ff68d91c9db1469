#!/usr/bin/python3
"""No job is read while the database refuses writes (TAP on stdout).

1. A running worker; the server turns read-only (ALTER SYSTEM SET
   default_transaction_read_only = on, reload) while jobs arrive. The first
   job is read before anything could tell (its writes are refused, it stays
   in hand and retries with a growing backoff). After that first refusal the
   worker reads NO entry for 12 s (six pause periods; the group's
   entries-read does not move), the 59 later entries stay unread, no attempt
   is spent, nothing is dead-lettered; once writable again all 60 complete
   exactly once.
2. A worker started while the database is read-only for new sessions
   (ALTER DATABASE ... SET default_transaction_read_only = on): it reads no
   entry at all (it probes before its first read), then evaluates all 20
   once the setting is reset.
Before #16 round 2 a blocked read outstanding at the first refusal still
delivered, the 2 s pause lapsed once the job in hand backed off longer and
each lapse read new jobs (up to the free slots) that were refused in turn; a
starting worker read at once, and its sessions, opened while ALTER DATABASE
made new sessions read-only, stayed read-only after the RESET: nothing
completed, ever.
"""
import sys
import time

from services import Services
from workerkit import SPEC_X, Arena, Worker, bulk, diag, done, enqueue_all, eq, exactly_once, migrate, ok, wait_for


def group_read(a):
    """(entries-read, lag, pending) of the worker group."""
    g = [x for x in a.r.xinfo_groups(a.stream) if x["name"] == a.group][0]
    return g.get("entries-read"), g.get("lag"), g.get("pending")


def watch(a, secs):
    """Samples the group for secs; returns the distinct (entries-read, lag, pending) seen."""
    seen = set()
    t_end = time.time() + secs
    while time.time() < t_end:
        seen.add(group_read(a))
        time.sleep(0.25)
    return seen


def spent(a, subs):
    return (a.val("SELECT count(*) FROM submissions WHERE id = ANY(%s::uuid[]) AND status = 'failed'", subs),
            a.val("SELECT max(attempts) FROM submissions WHERE id = ANY(%s::uuid[])", subs) or 0,
            len(a.dead_entries()))


def main():
    with Services() as s:
        migrate(s)
        a = Arena(s)
        ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
        ags = [a.agent() for _ in range(6)]
        w = Worker(s, "ro-1", env={"ARBITER_MAX_DELIVERIES": "3", "ARBITER_RECONCILE_MS": "600000",
                                   "ARBITER_CONCURRENCY": "32"})
        warm = bulk(a, ags, ch, 5)
        ok(a.wait_final(warm, 30), "warm-up: 5 evaluated", w.tail())

        # 1. The server turns read-only while jobs arrive.
        subs = bulk(a, ags, ch, 60, enqueue=False)
        s.psql(s.dbname, "ALTER SYSTEM SET default_transaction_read_only = on")
        s.psql(s.dbname, "SELECT pg_reload_conf()")
        time.sleep(0.5)
        enqueue_all(a, subs[:1])
        ok(wait_for(lambda: "the database refuses writes" in w.output(), 20),
           "the first refused write is logged", w.tail())
        enqueue_all(a, subs[1:])
        first = group_read(a)
        seen = watch(a, 12)
        diag("after the first refusal, (entries-read, lag, pending) seen: %s" % sorted(seen, key=str))
        eq(seen, {first}, "no entry read for 12 s while the database refused writes")
        eq(first[1], 59, "the 59 later entries unread")
        eq(first[2], 1, "only the first one in hand")
        f, top, dead = spent(a, subs)
        ok(f == 0 and top <= 1 and dead == 0, "nothing failed (%d), no attempt spent beyond the first "
           "delivery (max %d), nothing dead-lettered (%d)" % (f, top, dead))
        s.psql(s.dbname, "ALTER SYSTEM RESET default_transaction_read_only")
        s.psql(s.dbname, "SELECT pg_reload_conf()")
        t0 = time.time()
        ok(a.wait_final(subs, 60), "writable again: all 60 reach a final state", w.tail())
        diag("all 60 final %.1fs after the reset" % (time.time() - t0))
        problems = exactly_once(a, warm + subs, ags)
        ok(not problems, "exactly once, Elo equals the sequential replay", "\n".join(problems))
        eq(spent(a, subs)[0::2], (0, 0), "nothing failed or dead-lettered")
        ok(spent(a, subs)[1] <= 1, "no attempts spent on the database's condition")
        eq(w.term(30), 0, "worker exits 0", w.tail())

        # 2. A worker starting while new sessions are read-only.
        s.psql(s.dbname, "ALTER DATABASE %s SET default_transaction_read_only = on" % s.dbname)
        late = bulk(a, ags, ch, 20)
        before = group_read(a)
        w2 = Worker(s, "ro-2", env={"ARBITER_RECONCILE_MS": "600000"})
        ok(wait_for(lambda: "the database is read-only" in w2.output(), 20),
           "the starting worker finds the database read-only", w2.tail())
        seen = watch(a, 6)
        eq(seen, {before}, "it reads no entry while the database is read-only")
        eq(before[1], 20, "all 20 unread")
        s.psql("postgres", "ALTER DATABASE %s RESET default_transaction_read_only" % s.dbname)
        ok(a.wait_final(late, 60), "reset: all 20 reach a final state", w2.tail())
        problems = exactly_once(a, warm + subs + late, ags)
        ok(not problems, "exactly once, Elo equals the sequential replay", "\n".join(problems))
        eq(spent(a, late), (0, 1, 0), "nothing failed, one attempt each, nothing dead-lettered")
        eq(w2.term(30), 0, "worker exits 0", w2.tail())
        a.close()
    return done()


if __name__ == "__main__":
    sys.exit(main())
