#!/usr/bin/python3
"""The reader's XREADGROUP unblocked because its stream went away (TAP).

When the jobs stream leaves the node a worker is blocked on (a Cluster slot migration
moves it; here: the key is deleted, which Redis answers the same way), the blocked
XREADGROUP returns `UNBLOCKED the stream key no longer exists`. The worker recovers (the
next read re-creates the group and goes on), so the line is a warning, not an error;
a job added afterwards is evaluated.
"""
import json
import sys

from services import Services
from workerkit import SPEC_X, Arena, Worker, migrate, ok, wait_for, done


def main():
    with Services() as s:
        migrate(s)
        a = Arena(s)
        w = Worker(s, "unb", env={"ARBITER_LOG_FORMAT": "json"})
        ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
        ag = a.agent()
        _, first = a.submit(ag, ch, {"x": 1})
        ok(a.wait_final([first], 30), "a first job is evaluated (the reader now blocks)", w.tail())
        a.r.delete(a.stream)
        line = wait_for(lambda: next((l for l in w.output().splitlines() if "UNBLOCKED" in l), None), 15)
        try:
            rec = json.loads(line) if line else {}
        except ValueError:
            rec = {}
        ok(rec.get("level") == "warn", "UNBLOCKED is logged as a warning, not an error", line)
        _, second = a.submit(ag, ch, {"x": 1})
        ok(a.wait_final([second], 30), "a job added afterwards is evaluated", w.tail())
        ok(w.term() == 0, "the worker exits 0", w.tail())
    return done()


if __name__ == "__main__":
    sys.exit(main())
