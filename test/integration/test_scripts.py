#!/usr/bin/python3
"""The developer scripts' own promises (no servers needed):

- scripts/test counts a skipped test separately: it prints
  `N passed, N failed, N skipped`, then closes with `N passed, N failed`; a skip is
  neither passed nor failed, and the exit status says whether anything failed.
  Each skip is listed with its reason, "# SKIP" subtests of passing tests too
  (counted in the line as "(and N skipped subtests in passed tests)").
- scripts/demo shows the compiler's messages when the build fails (it used
  to discard the build's output) and stops.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tap import done, ok  # noqa: E402

TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def eq(got, want, name):
    return ok(got == want, name, "got %r, want %r" % (got, want))


def count(results, full=False):
    """results: meson results, or (result, stdout) pairs."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        for i, r in enumerate(results):
            r, out = r if isinstance(r, tuple) else (r, "")
            f.write(json.dumps({"name": "t%d" % i, "result": r, "stdout": out}) + "\n")
    try:
        p = subprocess.run([os.path.join(TOP, "scripts", "test"), "--count-log", f.name],
                           capture_output=True, text=True, timeout=60)
    finally:
        os.unlink(f.name)
    lines = p.stdout.strip().splitlines()
    if full:
        return p.returncode, p.stdout
    return p.returncode, lines[-2] if len(lines) >= 2 else "", lines[-1] if lines else ""


def main():
    rc, line, last = count(["OK", "SKIP", "OK", "EXPECTEDFAIL", "SKIP"])
    eq(line, "3 passed, 0 failed, 2 skipped", "skips are counted apart from passes")
    eq(last, "3 passed, 0 failed", "the closing line is `N passed, N failed`")
    eq(rc, 0, "nothing failed: exit 0")
    rc, line, last = count(["OK", "FAIL", "TIMEOUT", "SKIP", "ERROR"])
    eq(line, "1 passed, 3 failed, 1 skipped", "failures, timeouts and errors count as failed")
    ok(rc != 0, "something failed: non-zero exit")
    eq(last, "1 passed, 3 failed", "the closing line is `N passed, N failed`")

    # Skips are visible: a whole skipped test with its reason, and "# SKIP" subtests of
    # a test meson calls OK (its result alone does not show them).
    rc, out = count([("OK", "ok 1 - a\nok 2 - hybrid # SKIP no sandbox here\nok 3 # skip no h2\n1..3\n"),
                     ("SKIP", "1..0 # SKIP sandbox not available on this host: not root\n"),
                     ("OK", "ok 1 - fine\n1..1\n")], full=True)
    lines = out.strip().splitlines()
    eq(lines[-2:], ["2 passed, 0 failed, 1 skipped (and 2 skipped subtests in passed tests)",
                    "2 passed, 0 failed"], "skipped subtests are counted and shown")
    ok("-- t0: subtest skipped: hybrid: no sandbox here" in out and
       "-- t0: subtest skipped: no h2" in out and
       "-- t1: skipped: sandbox not available on this host: not root" in out,
       "each skip is listed with its reason", out)
    eq(rc, 0, "skips alone: exit 0")

    # scripts/demo with a build that fails: a stand-in meson prints a compiler error.
    with tempfile.TemporaryDirectory() as d:
        fake = os.path.join(d, "meson")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\n[ \"$1\" = compile ] || exit 0\n"
                    "echo '../worker/x.c:1:1: error: expected something'\nexit 1\n")
        os.chmod(fake, 0o755)
        env = dict(os.environ, PATH=d + ":" + os.environ.get("PATH", ""))
        p = subprocess.run([os.path.join(TOP, "scripts", "demo")], env=env, cwd=TOP,
                           capture_output=True, text=True, timeout=120)
        ok(p.returncode != 0, "demo: a failed build stops it", p.returncode)
        ok("error: expected something" in p.stdout + p.stderr,
           "demo: the compiler's message is shown", (p.stdout + p.stderr)[-400:])
    return done()


if __name__ == "__main__":
    sys.exit(main())
