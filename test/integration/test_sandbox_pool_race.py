#!/usr/bin/python3
"""Sandbox pools created at the same moment by several processes (TAP on stdout).

Every sandbox pool makes its own cgroup directory (arbiter-sandbox-<pid>-<n>)
and first removes the leftovers of dead processes: any such directory whose
lock nobody holds. A pool created by one process used to be removable by
another's clean-up in the moment between its mkdir and its lock; it then
failed ("the sandbox is not available: ... No such file or directory"), and
a worker starting in that moment evaluated no sandboxed job at all: each one
spent its attempts and ended `failed` (worker_adversarial's 'sigterm
backlog' check on a machine running other sandbox tests).

PARALLEL processes run `arbiter score` with a custom script ROUNDS times
each, all at once, while as many plain clean-up passes of the same kind run
(`arbiter score` of a deterministic spec creates no pool, so the clean-ups
come from the custom-script runs themselves). Every run must succeed.
"""
import json
import os
import subprocess
import sys
import tempfile
import threading

import sandboxhost
from tap import diag, done, ok

BIN = os.environ.get("ARBITER_BIN", "build/worker/arbiter")
PARALLEL = int(os.environ.get("ARBITER_POOL_RACE_PARALLEL", "6"))
ROUNDS = int(os.environ.get("ARBITER_POOL_RACE_ROUNDS", "40"))


def main():
    d = tempfile.mkdtemp(prefix="arbiter-poolrace-")
    spec = os.path.join(d, "spec.json")
    sub = os.path.join(d, "sub.json")
    with open(spec, "w") as f:
        json.dump({"evaluator": "custom-script", "dimensions": [{"key": "correctness", "weight": 1}],
                   "script": {"language": "sh", "timeout_ms": 20000,
                              "source": "echo '{\"scores\":{\"correctness\":5}}'"}}, f)
    with open(sub, "w") as f:
        json.dump({"answer": {}}, f)
    probe = subprocess.run([BIN, "score", "--spec", spec, "--submission", sub],
                           capture_output=True, text=True, timeout=120)
    stop = sandboxhost.skip_all_or_fail(probe.returncode == 0, probe.stderr.strip()[:300])
    if stop is not None:
        return stop

    failures = []
    lock = threading.Lock()

    def loop(tag):
        for i in range(ROUNDS):
            r = subprocess.run([BIN, "score", "--spec", spec, "--submission", sub],
                               capture_output=True, text=True, timeout=120)
            if r.returncode != 0:
                with lock:
                    failures.append("%s/%d: exit %d: %s" % (tag, i, r.returncode, r.stderr.strip()[-400:]))

    threads = [threading.Thread(target=loop, args=("p%d" % k,)) for k in range(PARALLEL)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    diag("%d runs in %d parallel processes, %d failed" % (PARALLEL * ROUNDS, PARALLEL, len(failures)))
    ok(not failures, "every run got its sandbox (%d of %d failed)" % (len(failures), PARALLEL * ROUNDS),
       "\n".join(failures[:5]))
    subprocess.run(["rm", "-rf", d])
    return done()


if __name__ == "__main__":
    sys.exit(main())
