"""Whether this host can run arbiter's sandbox, decided by the platform alone.

The sandbox suites used to probe with a trivial custom script and skip when it
failed; but a failing trivial script is exactly what a bug in the sandbox looks
like. So availability is decided here without running arbiter: root, the
namespaces the sandbox clones (mount, PID, IPC, UTS, network) and a cgroup file
system. Where all of these are present, a sandbox suite that cannot run its
trivial script must fail, not skip; elsewhere it skips with the reason.

    platform()            (True, "") or (False, why)
    gate(usable, why)     after a probe: True to go on, False to stop; records
                          a failure when the platform has the sandbox, or
                          explains the skip (diag) when it does not
"""
import os
import subprocess

from tap import diag, ok

_cached = None


def platform():
    global _cached
    if _cached is not None:
        return _cached
    why = ""
    if os.geteuid() != 0:
        why = "not root (the sandbox needs CAP_SYS_ADMIN)"
    elif not all(os.path.exists("/proc/self/ns/" + n) for n in ("mnt", "pid", "ipc", "uts", "net")):
        why = "the kernel lacks mount/PID/IPC/UTS/network namespaces"
    elif not (os.path.exists("/sys/fs/cgroup/cgroup.controllers") or
              os.path.isdir("/sys/fs/cgroup/memory") or os.path.isdir("/sys/fs/cgroup/pids")):
        why = "no cgroup file system at /sys/fs/cgroup"
    else:
        try:
            r = subprocess.run(["unshare", "--mount", "--pid", "--ipc", "--uts", "--net", "--fork",
                                "true"], capture_output=True, text=True, timeout=30)
            if r.returncode != 0:
                why = "namespaces refused here (a container?): unshare: %s" % r.stderr.strip()[:200]
        except (OSError, subprocess.SubprocessError) as e:
            why = "cannot try unshare(1): %s" % e
    _cached = (why == "", why)
    return _cached


def gate(usable, why, what="the sandbox runs a trivial custom script"):
    """usable/why: the outcome of a trivial sandbox run. Returns True when the sandbox
    parts should run. When the run failed on a host that has the sandbox, that is a
    failure (recorded here); on a host without it, a diag line gives the reason."""
    if usable:
        return True
    have, pwhy = platform()
    if have:
        ok(False, what + " (root, namespaces and cgroups are here: a skip would hide a bug)",
           why)
    else:
        diag("sandbox parts skipped: %s (probe: %s)" % (pwhy, (why or "").strip()[:200]))
    return False


def skip_all_or_fail(usable, why):
    """For a suite that is only about the sandbox: returns None to go on, else the
    exit status after printing either a failure (host has the sandbox) or a TAP
    skip plan (it does not)."""
    if usable:
        return None
    have, pwhy = platform()
    if have:
        from tap import done
        gate(usable, why)
        return done()
    print("1..0 # SKIP sandbox not available on this host: %s" % pwhy)
    return 0
