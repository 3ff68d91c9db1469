#!/usr/bin/python3
"""A sandbox that could not be set up at start is tried again (TAP on stdout).

The worker starts while its language table (ARBITER_LANGUAGES_FILE) is not
there yet, so its sandbox cannot be set up ("sandbox unavailable"). The file
then appears (a deployment finishing) and custom-script submissions arrive:
the worker sets the sandbox up again at the first sandboxed job and evaluates
them, one attempt each. Before #16 round 2 a sandbox that failed at start was
never tried again: every sandboxed job spent its attempts and ended `failed`
(how worker_adversarial's 'sigterm backlog' submissions ended when another
process's cgroup clean-up made the second worker's sandbox fail at start).
A language table that stays missing still fails the job, with the reason.
"""
import json
import os
import shutil
import subprocess
import sys

import sandboxhost
from services import Services
from workerkit import BIN, Arena, Worker, diag, done, eq, migrate, ok, tmpdir, wait_for

SPEC = {"evaluator": "custom-script", "dimensions": [{"key": "correctness", "weight": 1}],
        "script": {"language": "sh", "timeout_ms": 20000,
                   "source": "echo '{\"scores\":{\"correctness\":700}}'"}}


def sandbox_usable(d):
    spec, sub = os.path.join(d, "spec.json"), os.path.join(d, "sub.json")
    with open(spec, "w") as f:
        json.dump(SPEC, f)
    with open(sub, "w") as f:
        json.dump({"answer": {}}, f)
    r = subprocess.run([BIN, "score", "--spec", spec, "--submission", sub], capture_output=True,
                       text=True, timeout=60)
    return r.returncode == 0, r.stderr.strip()


def main():
    d = tmpdir()
    usable, why = sandbox_usable(d)
    stop = sandboxhost.skip_all_or_fail(usable, why[:300])
    if stop is not None:
        shutil.rmtree(d, ignore_errors=True)
        return stop
    with Services() as s:
        migrate(s)
        a = Arena(s)
        langs = os.path.join(d, "languages.json")
        w = Worker(s, "reopen-1", env={"ARBITER_LANGUAGES_FILE": langs, "ARBITER_MAX_DELIVERIES": "3"})
        ok(wait_for(lambda: "sandbox unavailable" in w.output(), 20), "the sandbox is unavailable at start",
           w.tail())

        # Still missing: the job fails with the reason (after its attempts).
        ch = a.challenge(SPEC, {}, difficulty="contender")
        ag = a.agent()
        _, lost = a.submit(ag, ch, {"x": 1})
        ok(a.wait_final([lost], 30), "with the table still missing the job ends", w.tail())
        row = a.q1("SELECT status, last_error FROM submissions WHERE id = %s", lost)
        ok(row[0] == "failed" and "language table" in (row[1] or ""),
           "failed, saying why (%s: %s)" % tuple(row))
        ok("sandbox still unavailable" in w.output(), "each retry tried the sandbox again", w.tail())

        # The table appears: the next sandboxed job sets the sandbox up.
        shutil.copy("deploy/languages.json", langs)
        subs = [a.submit(ag, ch, {"x": 1})[1] for _ in range(3)]
        ok(a.wait_final(subs, 60), "the next submissions reach a final state", w.tail())
        rows = a.q("SELECT status, attempts FROM submissions WHERE id = ANY(%s::uuid[])", subs)
        eq(sorted(rows), [("completed", 1)] * 3, "all completed, one attempt each", w.tail())
        ok("sandbox available again" in w.output(), "the worker says the sandbox is back", w.tail())
        eq(w.term(30), 0, "worker exits 0", w.tail())
        diag("%d further tries while the table was missing" % w.output().count("sandbox still unavailable"))
        a.close()
    shutil.rmtree(d, ignore_errors=True)
    return done()


if __name__ == "__main__":
    sys.exit(main())
