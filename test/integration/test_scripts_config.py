#!/usr/bin/python3
"""The operator scripts read their settings by the worker's rules (deploy/README.md "Configuration").

scripts/requeue and scripts/dlq take the worker's configuration file (--config F or
ARBITER_CONFIG) and resolve it with the worker's own code (`arbiter config-dump`):
- a file setting ARBITER_REDIS_KEYS=tagged sends requeue's jobs to `{arbiter}:jobs`,
  which a worker started with the same file reads: the re-evaluation is done (requeue
  used to read ARBITER_REDIS_KEYS from the environment only, and wrote `arbiter:jobs`);
- dlq reads the tagged dead-letter stream from the same file;
- a file with an unknown ARBITER_ key (ARBITER_CONCURENCY=8) is refused by both with
  exit 2 naming it, as `arbiter worker` refuses it (they used to go on);
- quoting and comments mean what they mean to the worker.
"""
import os
import subprocess
import sys

from services import Services
from workerkit import BIN, Arena, Worker, eq, migrate, ok, wait_for, done

TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SPEC = {
    "evaluator": "deterministic",
    "dimensions": [{"key": "correctness", "weight": 1, "primitive": "exact_match", "field": "a",
                    "ground_truth_field": "a"}],
    "thresholds": {"win": 700, "draw": 400},
}


def env_without_settings():
    """The caller's environment without any ARBITER_ setting (ARBITER_BIN kept)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("ARBITER_") or k == "ARBITER_BIN"}


def script(name, *args, env=None):
    return subprocess.run(["/usr/bin/python3", os.path.join(TOP, "scripts", name)] + list(args),
                          env=env or env_without_settings(), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)


def main():
    with Services() as s:
        migrate(s)
        a = Arena(s, style="tagged")
        cfg = os.path.join(s.tmp, "worker.conf")
        with open(cfg, "w") as f:
            f.write("# the worker's file, also the scripts'\n"
                    "export ARBITER_DATABASE_URL='%s'\n"
                    "ARBITER_REDIS_URL=%s   # local\n"
                    "ARBITER_REDIS_KEYS=tagged # one Cluster slot\n"
                    "ARBITER_METRICS_ADDR=\n" % (s.database_url, s.redis_url))
        w = Worker(s, "cfg-1", env={"ARBITER_CONFIG": cfg, "ARBITER_REDIS_URL": s.redis_url})
        ch = a.challenge(SPEC, {"a": 1})
        _, sub = a.submit(a.agent(), ch, {"a": 1})
        ok(a.wait_final([sub], 30), "the worker reads {arbiter}:jobs (tagged, from the file)",
           w.tail())

        p = script("requeue", "--config", cfg, "--ids", sub, "--lane", "live", "--yes")
        ok(p.returncode == 0, "requeue --config F exits 0", p.stdout + p.stderr)
        evaluated = wait_for(lambda: a.val("SELECT count(*) FROM evaluation_results "
                                           "WHERE submission_id = %s", sub) == 2, 30)
        ok(evaluated, "requeue's job went to the tagged stream and was evaluated (eval_seq 2)",
           "arbiter:jobs holds %d; worker:\n%s" % (a.r.xlen("arbiter:jobs"), w.tail()))
        eq(a.r.exists("arbiter:jobs"), 0, "nothing was written to the plain stream")

        # ARBITER_CONFIG instead of --config, and dlq on the tagged dead-letter stream.
        a.r.xadd(a.dead, {"submission_id": sub, "kind": "evaluate", "reason": "cfg test",
                          "failed_at": "1"})
        p = script("dlq", "count", env=dict(env_without_settings(), ARBITER_CONFIG=cfg))
        ok(p.returncode == 0 and p.stdout.strip().endswith("1"),
           "dlq with ARBITER_CONFIG counts the tagged dead letters", p.stdout + p.stderr)

        # An unknown ARBITER_ key: refused by all three, naming it.
        bad = os.path.join(s.tmp, "typo.conf")
        with open(bad, "w") as f:
            f.write(open(cfg).read() + "ARBITER_CONCURENCY=8\n")
        wr = subprocess.run([BIN, "worker", "--config", bad], env=env_without_settings(),
                            capture_output=True, text=True, timeout=30)
        ok(wr.returncode == 2 and "ARBITER_CONCURENCY" in wr.stderr,
           "arbiter worker refuses the typo (the reference)", wr.stderr)
        for name, args in (("requeue", ["--ids", sub, "--dry-run"]), ("dlq", ["count"])):
            p = script(name, "--config", bad, *args)
            ok(p.returncode == 2 and "ARBITER_CONCURENCY" in p.stderr
               and "configuration:" in p.stderr and "Traceback" not in p.stderr,
               "%s refuses a file with ARBITER_CONCURENCY=8: exit 2 naming it" % name,
               "exit %d\n%s%s" % (p.returncode, p.stdout, p.stderr))

        # A value the worker refuses is refused the same way (the worker's message).
        with open(bad, "w") as f:
            f.write(open(cfg).read() + "ARBITER_REDIS_KEYS=tagd\n")
        p = script("requeue", "--config", bad, "--ids", sub, "--dry-run")
        ok(p.returncode == 2 and "'tagd' is not one of auto|plain|tagged" in p.stderr,
           "a bad ARBITER_REDIS_KEYS in the file: exit 2 with the worker's message", p.stderr)

        # Quoting: a quoted '#' is data, an unquoted one after a space a comment.
        q = os.path.join(s.tmp, "quote.conf")
        with open(q, "w") as f:
            f.write(open(cfg).read() + "ARBITER_PREFIX='p #1' # the prefix\n")
        p = script("requeue", "--config", q, "--ids", sub, "--lane", "live", "--yes")
        ok(p.returncode == 0 and a.r.xlen("{p #1}:jobs") == 1,
           "a quoted value keeps its '#', the trailing comment is dropped",
           p.stdout + p.stderr + repr(a.r.keys("*")))
        ok(w.term() == 0, "the worker stops cleanly", w.tail())
    return done()


if __name__ == "__main__":
    sys.exit(main())
