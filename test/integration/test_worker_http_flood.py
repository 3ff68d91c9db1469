#!/usr/bin/python3
"""The metrics/health listener of a real `arbiter worker` under a connection flood (TAP).

Security issue #22, finding 2: one client holding the connection cap with idle
connections (each sent one byte, reopened every 5 s) made every other connection close at
once, so /healthz (the Kubernetes liveness probe) failed and the fleet could be restarted
by anyone reaching the port. Loopback addresses stand for separate peers (Linux routes
all of 127.0.0.0/8 to lo):

1. One hostile peer (127.0.0.1) keeps 70 connections open, each after one byte, reopens
   every connection the worker closes and all of them every 5 s; a second peer
   (127.0.0.3) drips request heads one byte every 250 ms. A prober (127.0.0.2) asks
   /healthz 40 times: all 40 must be answered 200 (the per-peer cap keeps the flood from
   the prober's slots). The drippers get 408 at the 5 s head deadline although they kept
   sending (the deadline runs from the accept, bytes do not extend it).
2. Sixteen hostile peers (127.0.0.10-25) keep 140 connections, more than the whole cap
   (64) and at most a few more than the per-peer cap each; the prober's 40 /healthz and
   10 /readyz must all be answered (the oldest open connection is closed to make room).
The worker is alive afterwards and exits 0 on SIGTERM.
"""
import socket
import threading
import time

from services import Services, free_port
from workerkit import Worker, migrate, wait_for, eq

import tap
from tap import diag, ok

PROBES = 40


def dial(src, port, timeout=10.0):
    c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    c.settimeout(timeout)
    c.bind((src, 0))
    c.connect(("127.0.0.1", port))
    return c


def read_all(c):
    out = b""
    while True:
        try:
            d = c.recv(4096)
        except OSError:
            return out
        if not d:
            return out
        out += d


def probe(port, path, src="127.0.0.2"):
    """One request from src; the response, or b"" when refused, reset or silent for 10 s."""
    try:
        c = dial(src, port)
    except OSError:
        return b""
    try:
        c.sendall(b"GET %s HTTP/1.1\r\nHost: arbiter\r\n\r\n" % path.encode())
        return read_all(c)
    except OSError:
        return b""
    finally:
        c.close()


class Flood(threading.Thread):
    """Holds n connections to port, spread over the source addresses, each after sending
    one byte. A connection the worker closes (or answers) is reopened at once (at most 10
    every 50 ms, so the flood does not eat the shared machine), and every connection is
    reopened every 5 s."""

    def __init__(self, port, sources, n):
        super().__init__(daemon=True)
        self.port, self.sources, self.n = port, sources, n
        self.halt = threading.Event()
        self.opened = 0
        self.held_max = 0

    def run(self):
        conns, cycle, k = [], time.monotonic(), 0
        while not self.halt.is_set():
            if time.monotonic() - cycle >= 5.0:
                for c in conns:
                    c.close()
                conns, cycle = [], time.monotonic()
            alive = []
            for c in conns:
                try:
                    c.recv(64, socket.MSG_DONTWAIT)
                    c.close()          # closed by the worker, or answered: it is gone
                except BlockingIOError:
                    alive.append(c)
                except OSError:
                    c.close()
            conns = alive
            self.held_max = max(self.held_max, len(conns))
            for _ in range(min(10, self.n - len(conns))):
                src = self.sources[k % len(self.sources)]
                k += 1
                try:
                    c = dial(src, self.port, timeout=2.0)
                    c.sendall(b"G")
                    c.setblocking(False)
                    conns.append(c)
                    self.opened += 1
                except OSError:
                    pass
            self.halt.wait(0.05)
        for c in conns:
            c.close()


class Drip(threading.Thread):
    """A request head sent one byte every 250 ms from src: records the first response
    line and the seconds from connect to the worker's answer or close."""
    HEAD = b"GET /healthz HTTP/1.1\r\nHost: arbiter\r\nUser-Agent: drip\r\n\r\n"

    def __init__(self, port, src):
        super().__init__(daemon=True)
        self.port, self.src = port, src
        self.status, self.secs, self.sent = None, None, 0

    def run(self):
        try:
            c = dial(self.src, self.port, timeout=0.25)
        except OSError:
            self.status = "connect failed"
            return
        t0 = time.monotonic()
        resp = b""
        for i in range(len(self.HEAD)):
            try:
                c.send(self.HEAD[i:i + 1])
                self.sent += 1
            except OSError:
                break
            try:
                d = c.recv(4096)
                resp = d
                break                  # answered (or closed: d == b"")
            except socket.timeout:
                continue
            except OSError:
                break
        c.settimeout(10.0)
        if resp:
            resp += read_all(c)
        self.secs = time.monotonic() - t0
        self.status = resp.split(b"\r\n", 1)[0].decode(errors="replace") if resp else "closed"
        c.close()


def probes(port, path, n):
    good = 0
    for _ in range(n):
        r = probe(port, path)
        if r.startswith(b"HTTP/1.1 200 "):
            good += 1
        time.sleep(0.15)
    return good


def main():
    with Services() as s:
        migrate(s)
        port = free_port()
        w = Worker(s, "w-flood", env={"ARBITER_METRICS_ADDR": "127.0.0.1:%d" % port})
        try:
            up = wait_for(lambda: probe(port, "/readyz").startswith(b"HTTP/1.1 200 "), 30)
            ok(up, "worker ready before the flood", None if up else w.tail())

            # 1. One hostile peer over the whole cap, plus slow drippers.
            flood = Flood(port, ["127.0.0.1"], 70)
            flood.start()
            wait_for(lambda: flood.opened >= 70, 20)
            drips = [Drip(port, "127.0.0.3") for _ in range(4)]
            for d in drips:
                d.start()
            good = probes(port, "/healthz", PROBES)
            for d in drips:
                d.join(30)
            flood.halt.set()
            flood.join(30)
            diag("one peer: %d connections opened, at most %d held open at once"
                 % (flood.opened, flood.held_max))
            eq(good, PROBES, "one peer flooding: every /healthz from another peer answered 200 "
               "(%d of %d)" % (good, PROBES))
            ok(flood.held_max <= 16, "the flooding peer never holds more than a few "
               "connections (at most %d at once)" % flood.held_max)
            res = [(d.status, d.sent, round(d.secs or 0, 1)) for d in drips]
            ok(all(d.status and d.status.startswith("HTTP/1.1 408 ") for d in drips),
               "drippers get 408 at the head deadline", res)
            ok(all(d.sent >= 10 and 4.0 <= d.secs < 20.0 for d in drips),
               "the deadline counts from the accept, dripped bytes do not extend it", res)

            # 2. Many hostile peers, together over the cap.
            flood = Flood(port, ["127.0.0.%d" % i for i in range(10, 26)], 140)
            flood.start()
            wait_for(lambda: flood.opened >= 140, 20)
            good = probes(port, "/healthz", PROBES)
            ready = probes(port, "/readyz", 10)
            flood.halt.set()
            flood.join(30)
            diag("sixteen peers: %d connections opened" % flood.opened)
            eq(good, PROBES, "sixteen peers over the cap: every /healthz answered 200 "
               "(%d of %d)" % (good, PROBES))
            eq(ready, 10, "sixteen peers over the cap: every /readyz answered 200")

            ok(w.alive() and probe(port, "/healthz").startswith(b"HTTP/1.1 200 "),
               "worker alive and serving after the floods", w.tail())
        finally:
            rc = w.term()
        eq(rc, 0, "worker exits 0 on SIGTERM", w.tail())
    tap.done()


if __name__ == "__main__":
    main()
