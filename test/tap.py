"""TAP output for arbiter's Python tests: ok(), skip(), diag(), then done()."""
import os
import sys

# ARBITER_TEST_SLOW (default 1): wall-clock bounds and waits are this many times wider,
# for a slow or loaded machine (scripts/test sets 3 for the sanitizer build, the cgroup
# guest 10). Never a weaker check of what happened: only of how soon.
SLOW = max(1, int(os.environ.get("ARBITER_TEST_SLOW", "1") or "1"))


def slow(seconds):
    """A wall-clock bound (seconds, or ms) widened by ARBITER_TEST_SLOW."""
    return seconds * SLOW


_count = 0
_failed = 0


def ok(cond, name, info=None):
    """Prints one TAP line; info (any text) is shown under a failure. Returns cond."""
    global _count, _failed
    _count += 1
    print("%sok %d - %s" % ("" if cond else "not ", _count, name))
    if not cond:
        _failed += 1
        if info is not None and info != "":
            for line in str(info).splitlines()[-60:]:
                print("#   " + line)
    sys.stdout.flush()
    return cond


def skip(name, why):
    """Records a skipped test."""
    global _count
    _count += 1
    print("ok %d - %s # SKIP %s" % (_count, name, why))
    sys.stdout.flush()


def diag(msg):
    """Prints a diagnostic line."""
    for line in str(msg).splitlines():
        print("# " + line)
    sys.stdout.flush()


def count():
    return _count


def failed():
    return _failed


def done():
    """Prints the plan; returns the process exit status (1 if anything failed)."""
    print("1..%d" % _count)
    sys.stdout.flush()
    return 1 if _failed else 0
