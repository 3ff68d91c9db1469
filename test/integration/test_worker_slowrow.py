#!/usr/bin/python3
"""A submission whose load always times out (TAP on stdout).

The worker connects as an ordinary role; a row-level security policy makes
loading one submission row take 10 s (as a 60 MB answer over a slow link
would) while every other row loads at once. ARBITER_PG_QUERY_TIMEOUT_MS is
1500, so the server cancels the load (statement_timeout, set by the worker at
connection set-up) after 1.35 s.
- The 30 other submissions loaded in the same batches complete promptly.
- The slow row is loaded alone, its timeouts are counted, and after
  ARBITER_MAX_DELIVERIES of them it ends `failed` with a clear reason; a copy
  goes to the dead-letter stream.
- Timeouts do not drop connections (at most a reconnect or two, not one per
  timeout), and an operator's role-level `statement_timeout = 0` changes
  nothing.
Before #16 the row's batch was retried whole, forever and uncounted, each
client-side timeout dropping a connection.
"""
import re
import socket
import sys
import time
import urllib.request

from services import Services
from workerkit import SPEC_X, Arena, Worker, bulk, diag, done, eq, migrate, ok, wait_for

SETUP = """
CREATE ROLE arbiter_w LOGIN;
ALTER ROLE arbiter_w SET statement_timeout = 0;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO arbiter_w;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO arbiter_w;
CREATE TABLE test_slow_rows (id uuid PRIMARY KEY);
GRANT SELECT ON test_slow_rows TO arbiter_w;
CREATE FUNCTION test_row_visible(sid uuid) RETURNS bool LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  -- Only the worker's load statement is slowed down, and only for the listed rows.
  IF current_query() LIKE 'SELECT s.id, s.status, s.agent_id,%'
     AND EXISTS (SELECT 1 FROM test_slow_rows WHERE id = sid) THEN
    PERFORM pg_sleep(10);
  END IF;
  RETURN true;
END $$;
ALTER TABLE submissions ENABLE ROW LEVEL SECURITY;
CREATE POLICY test_slow ON submissions TO arbiter_w USING (test_row_visible(id)) WITH CHECK (true);
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def reconnects(port):
    try:
        body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=2).read().decode()
    except OSError:
        return None
    m = re.search(r'^arbiter_reconnects_total\{target="postgres"\} (\d+)', body, re.M)
    return int(m.group(1)) if m else 0


def main():
    with Services() as s:
        migrate(s)
        a = Arena(s)
        s.psql(s.dbname, SETUP)
        ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
        ags = [a.agent() for _ in range(6)]
        slow = bulk(a, ags, ch, 1, enqueue=False)
        a.q("INSERT INTO test_slow_rows VALUES (%s)", slow[0])
        subs = bulk(a, ags, ch, 30, enqueue=False)
        from workerkit import enqueue_all
        enqueue_all(a, subs[:15] + slow + subs[15:])
        port = free_port()
        url = "postgresql://arbiter_w@127.0.0.1:%d/%s" % (s.pg_port, s.dbname)
        w = Worker(s, "slow-1", env={"ARBITER_DATABASE_URL": url, "ARBITER_PG_QUERY_TIMEOUT_MS": "1500",
                                     "ARBITER_MAX_DELIVERIES": "3", "ARBITER_RECONCILE_MS": "600000",
                                     "ARBITER_METRICS_ADDR": "127.0.0.1:%d" % port})
        t0 = time.time()
        ok(wait_for(lambda: a.count_status(subs) == len(subs), 20, 0.1),
           "the 30 other submissions complete (%.1f s)" % (time.time() - t0),
           "%d of 30; %s" % (a.count_status(subs), w.tail()))
        ok(a.wait_final(slow, 60), "the slow row reaches a final state", w.tail())
        row = a.q1("SELECT status, last_error, attempts FROM submissions WHERE id = %s", slow[0])
        diag("slow row: %r after %.1f s" % (row, time.time() - t0))
        eq(row[0], "failed", "it ends failed")
        ok(row[1] and "timed out" in row[1] and "loading" in row[1],
           "with a clear reason (%s)" % row[1])
        dead = [f for _, f in a.dead_entries() if f.get("submission_id") == slow[0]]
        eq(len(dead), 1, "one dead-letter copy")
        rc = reconnects(port)
        ok(rc is not None and rc <= 2, "timeouts do not drop connections (%s reconnects)" % rc)
        eq(w.term(30), 0, "worker exits 0", w.tail())
        a.close()
    return done()


if __name__ == "__main__":
    sys.exit(main())
