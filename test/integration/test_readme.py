#!/usr/bin/python3
"""The README's examples, run as written (TAP on stdout).

Fenced code blocks whose first line is `# example: NAME` (or `// example: NAME`) are
extracted from README.md and run against a private Redis and PostgreSQL
(test/services.py) with a real `arbiter worker`:
- worker.conf + quickstart: the operator quick start, in sh, with `arbiter` on PATH;
- producer.py: the Python producer; its submission must end `completed`;
- producer.js: the Node producer (needs the `pg` and `redis` modules: Debian's
  node-pg/node-redis, installed here as root when missing; skipped with the
  reason when they cannot be had);
- listen.py: LISTEN on the documented channel, then poll once: it reports a submission that
  completed before it started and one that completes while it listens.
Also: every setting the README's settings table lists is a row of `arbiter worker
--help` and the other way round (same defaults), every ARBITER_* name the README
mentions is a setting or a documented exception, and no C file outside
worker/config.c reads an ARBITER_* setting with getenv except the documented ones.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import time

from services import Services, free_port
from workerkit import Arena, BIN, Worker, migrate, wait_for, diag

import docs
import tap
from tap import ok, skip

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
README = docs.text()     # README.md and the reference pages beside the code


def examples():
    out = {}
    for m in re.finditer(r"```[a-z]*\n((?:#|//) example: ([\w.]+)[^\n]*\n.*?)```", README, re.S):
        out[m.group(2)] = m.group(1)
    return out


def clean_env(s, extra=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("ARBITER_") or k == "ARBITER_BIN"}
    e.update(ARBITER_DATABASE_URL=s.database_url, ARBITER_REDIS_URL=s.redis_url)
    e.update(extra or {})
    return e


def node_modules():
    """A NODE_PATH under which require('pg') and require('redis') work, or None (+ why)."""
    cands = [os.environ.get("NODE_PATH"), "/usr/share/nodejs", "/usr/lib/nodejs"]
    node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        return None, "node is not installed"

    def works(path):
        env = dict(os.environ, NODE_PATH=path or "")
        return subprocess.run([node, "-e", "require('pg'); require('redis')"], env=env,
                              capture_output=True, timeout=60).returncode == 0
    for c in cands:
        if c is not None and works(c):
            return c, None
    pkg = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "nodejs"], capture_output=True,
                         text=True).stdout
    if "nodesource" in pkg:
        return None, "nodejs %s is not Debian's: Debian's node-pg/node-redis cannot be installed" % pkg
    if os.geteuid() == 0 and shutil.which("apt-get"):
        r = subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends",
                            "node-pg", "node-redis"], capture_output=True, text=True, timeout=600,
                           env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        for c in cands:
            if c is not None and works(c):
                return c, None
        return None, "node-pg/node-redis not installable here: " + (r.stderr.strip().splitlines() or ["?"])[-1]
    return None, "node modules pg and redis not found (Debian: node-pg node-redis)"


def settings_table():
    """{ENV: default} from the README's settings table."""
    out = {}
    for m in re.finditer(r"^\| `(ARBITER_[A-Z_]+)` \| `--[a-z-]+` \| ([^|]+) \|", README, re.M):
        out[m.group(1)] = m.group(2).strip().strip("`")
    return out


def help_table():
    r = subprocess.run([BIN, "worker", "--help"], capture_output=True, text=True)
    return {m.group(1): m.group(2) for m in
            re.finditer(r"^  --[a-z-]+ +(ARBITER_[A-Z_]+) +default (.*)$", r.stdout, re.M)}


def main():
    ex = examples()
    for name in ("worker.conf", "quickstart", "producer.py", "producer.js", "listen.py"):
        ok(name in ex, "README has the example %s" % name)

    # Settings: one table.
    readme, binary = settings_table(), help_table()
    ok(readme and set(readme) == set(binary), "the README's settings table has exactly the "
       "binary's settings", "only README: %s\nonly binary: %s" % (sorted(set(readme) - set(binary)),
                                                                 sorted(set(binary) - set(readme))))
    differ = {k: (readme[k], binary[k]) for k in readme if k in binary and
              readme[k].replace("(empty)", "") != binary[k].replace("(empty)", "")}
    ok(not differ, "same defaults in the README and the binary", differ)
    mentioned = set(re.findall(r"ARBITER_[A-Z][A-Z_]*[A-Z]", README))
    exceptions = {"ARBITER_CONFIG", "ARBITER_KEY", "ARBITER_X", "ARBITER_REDIS_KEYS",
                  # the guest-VM test's switch, not a worker setting
                  "ARBITER_GUEST",
                  # a name prefix (judge API-key variables), not a setting
                  "ARBITER_JUDGE",
                  # deploy/README.md: the manifests' own variables (KEDA's Redis address and
                  # credentials, the image's install switch), not worker settings
                  "ARBITER_REDIS_ADDRESS", "ARBITER_REDIS_USERNAME", "ARBITER_REDIS_PASSWORD",
                  "ARBITER_IMAGE_INSTALL",
                  # the scripts' path to the binary (Configuration), and a typo shown as one
                  "ARBITER_BIN", "ARBITER_CONCURENCY",
                  # arbiter console's operator token: the console's secret, not a worker setting
                  "ARBITER_CONSOLE_TOKEN"}
    stray = sorted(n for n in mentioned - set(binary) - exceptions if not n.startswith("ARBITER_TEST_"))
    ok(not stray, "every ARBITER_* name the README mentions is a setting", stray)
    allowed = {
        # `arbiter score` runs without a configuration file: these two table settings are read
        # from the environment directly (its sandbox settings come from the table itself:
        # sandbox_pool_new loads it from the environment when it has no configuration).
        ("worker/cmd_score.c", "ARBITER_LOG_LEVEL"), ("worker/cmd_score.c", "ARBITER_MAX_STRING_BYTES"),
        # the judge's providers, for `arbiter score` and `arbiter validate-spec` (free text: the
        # table checks nothing; judge_providers_load parses it)
        ("worker/cmd_score.c", "ARBITER_JUDGE_PROVIDERS"),
        # migrate takes only the database URL and the file.
        ("worker/cmd_migrate.c", "ARBITER_CONFIG"), ("worker/cmd_migrate.c", "ARBITER_DATABASE_URL"),
        # the console's operator token is no worker setting (deploy/README.md "Operator console")
        ("worker/cmd_console.c", "ARBITER_CONSOLE_TOKEN"),
    }
    found = set()
    for f in glob.glob(os.path.join(ROOT, "worker", "*.c")) + glob.glob(os.path.join(ROOT, "common", "*.c")):
        rel = os.path.relpath(f, ROOT)
        if rel == "worker/config.c":
            continue
        for m in re.finditer(r'getenv\("(ARBITER_[A-Z_]+)"\)', open(f, encoding="utf-8").read()):
            found.add((rel, m.group(1)))
    ok(not (found - allowed), "no stray getenv of a setting outside worker/config.c",
       sorted(found - allowed))

    with Services() as s:
        # PATH with `arbiter` = the binary under test.
        pathdir = os.path.join(s.tmp, "bin")
        os.makedirs(pathdir)
        os.symlink(os.path.abspath(BIN), os.path.join(pathdir, "arbiter"))
        port, port2 = free_port(), free_port()
        work = os.path.join(s.tmp, "qs")
        os.makedirs(work)
        with open(os.path.join(work, "worker.conf"), "w") as f:
            f.write(ex["worker.conf"].replace("9464", str(port))
                    + "ARBITER_RATE_LIMIT=0\nARBITER_SANDBOX_CGROUP=none\n")
        env = clean_env(s, {"PATH": pathdir + ":" + os.environ.get("PATH", "")})
        keys = set(re.findall(r"^(ARBITER_\w+)=", ex["worker.conf"], re.M))
        r = subprocess.run(["bash", "-c", "set -a; . ./worker.conf; set +a; env"], cwd=work,
                           env=clean_env(s), capture_output=True, text=True, timeout=30)
        got = set(re.findall(r"^(ARBITER_\w+)=", r.stdout, re.M))
        ok(len(keys) >= 4 and keys <= got, "worker.conf read by a shell as the README says "
           "exports every setting of the file", (sorted(keys), sorted(got), r.stderr))
        script = "set -e\n" + ex["quickstart"].replace("9464", str(port)).replace("9465", str(port2))
        r = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True,
                           text=True, timeout=180)
        ok(r.returncode == 0, "the quick start runs as written (migrate, worker, readyz, status, "
           "pause/resume, SIGTERM)", r.stdout[-3000:] + r.stderr[-3000:])
        ok("ready" in r.stdout and "arbiter status" in r.stdout, "it printed readiness and the status",
           r.stdout[-2000:])

        w = Worker(s, "wreadme")
        a = Arena(s)
        try:
            r = subprocess.run([sys.executable, "-c", ex["producer.py"]], env=clean_env(s),
                               capture_output=True, text=True, timeout=60)
            sub = r.stdout.strip()
            ok(r.returncode == 0 and re.fullmatch(r"[0-9a-f-]{36}", sub), "producer.py runs",
               r.stdout + r.stderr)
            if r.returncode == 0:
                ok(wait_for(lambda: a.status(sub) == "completed", 60), "its submission is completed",
                   w.tail())
                row = a.q1("SELECT score, result FROM evaluation_results WHERE submission_id = %s", sub)
                ok(row == (1000, "win"), "score 1000, win", row)

            # listen.py: a submission that completed before the listener started (only the
            # poll after LISTEN can see it) and one enqueued once it listens (a notification).
            ch = a.challenge({"evaluator": "deterministic", "dimensions": [
                {"key": "c", "weight": 1, "primitive": "exact_match", "field": "a",
                 "ground_truth_field": "a"}], "thresholds": {"win": 700, "draw": 400}}, {"a": 1})
            ag = a.agent()
            _, early = a.submit(ag, ch, {"a": 1})
            ok(a.wait_final([early], 60), "a submission completes before the listener starts",
               w.tail())
            _, late = a.submit(ag, ch, {"a": 1}, enqueue=False)
            lp = subprocess.Popen([sys.executable, "-c", ex["listen.py"]],
                                  env=clean_env(s, {"WAIT_FOR": "%s,%s" % (early, late)}),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(1.0)   # either way round is fine: that is what the example promises
            a.enqueue(late)
            try:
                out, err = lp.communicate(timeout=90)
            except subprocess.TimeoutExpired:
                lp.kill()
                out, err = lp.communicate()
            printed = {l.split()[0] for l in out.splitlines() if l.strip()}
            ok(lp.returncode == 0 and printed == {early, late},
               "listen.py reports the result finished before its LISTEN and the one after",
               "rc %s\n%s%s" % (lp.returncode, out, err))

            path, why = node_modules()
            if path is None:
                skip("producer.js runs", why)
                skip("its submission is completed", why)
            else:
                r = subprocess.run(["node", "-e", ex["producer.js"]],
                                   env=clean_env(s, {"NODE_PATH": path}),
                                   capture_output=True, text=True, timeout=60)
                sub = r.stdout.strip()
                ok(r.returncode == 0 and re.fullmatch(r"[0-9a-f-]{36}", sub), "producer.js runs",
                   r.stdout + r.stderr)
                ok(r.returncode == 0 and wait_for(lambda: a.status(sub) == "completed", 60),
                   "its submission is completed (a loss: wrong answer)", w.tail())
        finally:
            ok(w.term() == 0, "worker exits 0", w.tail())
            a.close()
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
