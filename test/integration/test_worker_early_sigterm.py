#!/usr/bin/python3
"""SIGTERM during start-up drains like any other (TAP on stdout).

The worker is sent SIGTERM the moment it logs "starting" (while it opens its
connections and the sandbox pool, before the event loop's handlers exist).
It must exit 0, every time. Before #16 the default action killed it (exit
-15), which under the slower ASan build made replicas die mid-test.
"""
import os
import signal
import subprocess
import sys

from services import Services
from workerkit import BIN, done, eq, migrate


def main():
    with Services() as s:
        migrate(s)
        env = {k: v for k, v in os.environ.items() if not k.startswith("ARBITER_") or k == "ARBITER_BIN"}
        env.update({"ARBITER_REDIS_URL": s.redis_url, "ARBITER_DATABASE_URL": s.database_url,
                    "ARBITER_METRICS_ADDR": "", "ARBITER_LOG_LEVEL": "info"})
        codes = []
        for _ in range(8):
            p = subprocess.Popen([BIN, "worker"], env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE)
            p.stderr.readline()          # the "starting: ..." line
            p.send_signal(signal.SIGTERM)
            try:
                codes.append(p.wait(60))
            except subprocess.TimeoutExpired:
                p.kill()
                codes.append("timeout")
            p.stderr.close()
        eq(codes, [0] * 8, "SIGTERM right at start-up: exit 0 every time")
    return done()


if __name__ == "__main__":
    sys.exit(main())
