#!/usr/bin/python3
"""A submission too large to load within the client-side query timeout (TAP on stdout).

The worker reaches PostgreSQL through a proxy here that passes the server's
bytes to the worker at 1 MB/s, as a slow link would. One submission has an
8 MB answer: loading it takes about 8 s while ARBITER_PG_QUERY_TIMEOUT_MS is
1500. The server is busy writing the row to the socket and does not act on
its statement_timeout meanwhile, so it is the worker's own query timeout that
ends each try (the connection is dropped).
- The other submissions loaded with it complete promptly.
- The big row's timeouts are counted: after ARBITER_MAX_DELIVERIES (3) it
  ends `failed` with a reason that names the attempt and the setting, and one
  copy goes to the dead-letter stream; nothing is left pending.
Before this test the count and the dead letter already worked; the reason
named "more than 1350 ms", the server's statement_timeout, although the
worker's own 1500 ms timeout was the one that fired.
"""
import os
import socket
import sys
import threading
import time

from services import Services
from workerkit import SPEC_X, Arena, Worker, bulk, diag, done, enqueue_all, eq, migrate, ok

RATE = 1 << 20      # bytes per second from the server to the worker
BIG = 8 << 20       # the big answer's size


class SlowProxy:
    """A TCP proxy to 127.0.0.1:port that paces server -> client bytes at RATE."""

    def __init__(self, port):
        self.target = port
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(64)
        self.port = self.ls.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            try:
                s = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                c.close()
                continue
            threading.Thread(target=self.pump, args=(c, s, False), daemon=True).start()
            threading.Thread(target=self.pump, args=(s, c, True), daemon=True).start()

    @staticmethod
    def pump(src, dst, paced):
        try:
            while True:
                data = src.recv(16384)
                if not data:
                    break
                dst.sendall(data)
                if paced:
                    time.sleep(len(data) / RATE)
        except OSError:
            pass
        for sk in (src, dst):
            try:
                sk.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sk.close()


def main():
    with Services() as s:
        migrate(s)
        a = Arena(s)
        proxy = SlowProxy(s.pg_port)
        ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
        ags = [a.agent() for _ in range(4)]
        m = a.match(ags[0], ch)
        big = a.submission(m, ags[0], {"x": 1, "pad": os.urandom(BIG // 2).hex()})
        subs = bulk(a, ags[1:], ch, 6, enqueue=False)
        enqueue_all(a, subs[:3] + [big] + subs[3:])
        url = "postgresql://postgres@127.0.0.1:%d/%s" % (proxy.port, s.dbname)
        w = Worker(s, "bigrow-1", env={"ARBITER_DATABASE_URL": url, "ARBITER_PG_QUERY_TIMEOUT_MS": "1500",
                                       "ARBITER_MAX_DELIVERIES": "3", "ARBITER_RETRY_BASE_MS": "200",
                                       "ARBITER_RECONCILE_MS": "600000"})
        t0 = time.time()
        ok(a.wait_final(subs, 60), "the 6 other submissions complete (%.1f s)" % (time.time() - t0),
           w.tail())
        ok(a.wait_final([big], 120), "the big row reaches a final state", w.tail())
        row = a.q1("SELECT status, last_error, attempts FROM submissions WHERE id = %s", big)
        diag("big row: %r after %.1f s" % ((row[0], row[1], row[2]), time.time() - t0))
        eq(row[0], "failed", "it ends failed", w.tail())
        ok(row[1] and "loading the submission timed out on attempt 3 of 3" in row[1]
           and "ARBITER_PG_QUERY_TIMEOUT_MS=1500" in row[1],
           "with a clear reason (%s)" % row[1])
        dead = [f for _, f in a.dead_entries() if f.get("submission_id") == big]
        eq(len(dead), 1, "one dead-letter copy")
        eq(a.pending(), 0, "nothing left pending")
        eq(w.term(30), 0, "worker exits 0", w.tail())
        a.close()
    return done()


if __name__ == "__main__":
    sys.exit(main())
