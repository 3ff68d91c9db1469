#!/usr/bin/python3
"""The database's condition is never the submission's failure (TAP on stdout).

1. Disk full: every INSERT into evaluation_results fails with SQLSTATE 53100
   (a trigger raises it, as a full disk would) for a while, then the disk
   "frees up". No submission ends `failed`, nothing is dead-lettered,
   `attempts` stay at their first delivery, and all complete exactly once.
2. Read-only database (SQLSTATE 25006: default_transaction_read_only = on
   for the whole server, as during a failover): the same.
3. While the database refuses writes the worker pauses intake: entries
   enqueued meanwhile stay unread in the stream instead of piling up in its
   hands, and reading resumes with the first write that commits.
Before #16 both conditions were classified as the job's own failure: in the
disk-full period submissions used up their attempts and ended `failed`, and
the read-only period dead-lettered submissions that later completed.
"""
import sys
import time

from services import Services
from workerkit import SPEC_X, Arena, Worker, bulk, enqueue_all, diag, done, eq, exactly_once, migrate, ok, wait_for

DISK_FULL = """
CREATE OR REPLACE FUNCTION test_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'could not extend file "base/1/2": No space left on device'
  USING ERRCODE = '53100'; END $$;
CREATE TRIGGER test_disk_full BEFORE INSERT ON evaluation_results
  FOR EACH ROW EXECUTE FUNCTION test_disk_full();
"""


def settle(a, subs, w, what, secs):
    """Lets the condition last secs; checks nothing was spent meanwhile."""
    time.sleep(secs)
    failed = a.val("SELECT count(*) FROM submissions WHERE id = ANY(%s::uuid[]) AND status = 'failed'",
                   subs)
    eq(failed, 0, "%s: no submission failed while it lasted" % what, w.tail())
    eq(len(a.dead_entries()), 0, "%s: nothing dead-lettered" % what, a.dead_entries()[:3])
    top = a.val("SELECT max(attempts) FROM submissions WHERE id = ANY(%s::uuid[])", subs)
    ok((top or 0) <= 1, "%s: no attempts spent (max attempts %s)" % (what, top))


def main():
    with Services() as s:
        migrate(s)
        a = Arena(s)
        ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
        ags = [a.agent() for _ in range(6)]
        w = Worker(s, "dbc-1", env={"ARBITER_MAX_DELIVERIES": "3", "ARBITER_RECONCILE_MS": "600000"})

        # 1. Disk full.
        a.q(DISK_FULL)
        subs1 = bulk(a, ags, ch, 60)
        settle(a, subs1, w, "disk full (53100)", 8)
        queued_in_stream = a.r.xlen(a.stream)
        a.q("DROP TRIGGER test_disk_full ON evaluation_results")
        ok(a.wait_final(subs1, 60), "disk freed: all 60 reach a final state", w.tail())
        eq(a.val("SELECT count(*) FROM submissions WHERE id = ANY(%s::uuid[]) AND status = 'completed'",
                 subs1), 60, "all 60 completed")
        diag("stream length during the disk-full period: %d" % queued_in_stream)

        # 2. Read-only database.
        subs2 = bulk(a, ags, ch, 60, enqueue=False)
        s.psql(s.dbname, "ALTER SYSTEM SET default_transaction_read_only = on")
        s.psql(s.dbname, "SELECT pg_reload_conf()")
        time.sleep(0.5)
        enqueue_all(a, subs2[:10])
        time.sleep(3)
        enqueue_all(a, subs2[10:])
        settle(a, subs2, w, "read-only (25006)", 6)
        # 3. Intake paused: the later 50 stay unread in the stream.
        lag = a.r.xinfo_groups(a.stream)[0].get("lag")
        pending = a.pending()
        diag("while read-only: %s unread, %d pending" % (lag, pending))
        ok(pending <= 16 and (lag or 0) >= 40,
           "intake paused while the database refuses writes (%d pending, %s unread)" % (pending, lag))
        s.psql(s.dbname, "ALTER SYSTEM RESET default_transaction_read_only")
        s.psql(s.dbname, "SELECT pg_reload_conf()")
        ok(a.wait_final(subs2, 60), "writable again: all 60 reach a final state", w.tail())

        problems = exactly_once(a, subs1 + subs2, ags)
        ok(not problems, "exactly once, Elo equals the sequential replay", "\n".join(problems))
        eq(len(a.dead_entries()), 0, "dead-letter stream empty")
        eq(a.val("SELECT max(attempts) FROM submissions WHERE id = ANY(%s::uuid[])", subs1 + subs2) or 0
           <= 1, True, "no attempts spent on the database's condition")
        eq(w.term(30), 0, "worker exits 0", w.tail())
        a.close()
    return done()


if __name__ == "__main__":
    sys.exit(main())
