"""arbiter_ops: what the operator scripts (scripts/requeue, scripts/dlq) share.

- Settings like `arbiter`: flags > ARBITER_* environment > the configuration
  file (--config F or ARBITER_CONFIG) > defaults, the file and the environment
  read by the worker's own code (`arbiter config-dump`): one set of rules.
- Durations with units (500ms, 30s, 5m, 2h, 1d).
- Connection strings without passwords for messages.
- `run(main)`: bad usage and bad configuration exit 2 with a message (never a
  traceback); a closed stdout (`| head`) ends quietly; Ctrl-C exits 130.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys


class UsageError(Exception):
    """Bad arguments or configuration: message on stderr, exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse, but errors raise UsageError (exit 2 with the usage line, no traceback)."""

    def error(self, message):
        raise UsageError("%s\n%s" % (message, self.format_usage().rstrip()))


def arbiter_bin():
    """The `arbiter` binary the settings are read through: $ARBITER_BIN, else the build
    tree beside this script (build/worker/arbiter), else `arbiter` on PATH."""
    b = os.environ.get("ARBITER_BIN")
    if b:
        return b
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))),
                        "build", "worker", "arbiter")
    if os.access(here, os.X_OK):
        return here
    b = shutil.which("arbiter")
    if not b:
        raise UsageError("cannot find the arbiter binary, which the scripts read their settings "
                         "through (set ARBITER_BIN, or put arbiter on PATH)")
    return b


def settings(args, defaults, flags):
    """defaults: {ENV: default}; flags: {ENV: attribute of args or None}. Returns {ENV: value}.

    The configuration file (--config F or ARBITER_CONFIG) and the environment are
    resolved by the worker's own code (`arbiter config-dump`, worker/cmd_config.c), so
    the file's syntax, quoting and comments mean what they mean to the worker, and a
    file the worker refuses (an unknown ARBITER_ key, a bad value) is refused here with
    the same message (exit 2). A setting neither file nor environment sets takes the
    script's default; flags override everything."""
    cmd = [arbiter_bin(), "config-dump"]
    path = getattr(args, "config", None)
    if path:
        cmd += ["--config", path]
    try:
        p = subprocess.run(cmd + sorted(defaults), capture_output=True, timeout=30)
    except OSError as e:
        raise UsageError("cannot run %s: %s" % (cmd[0], e.strerror or e))
    if p.returncode != 0:
        msg = p.stderr.decode("utf-8", "backslashreplace").strip()
        msg = msg[len("arbiter config-dump: "):] if msg.startswith("arbiter config-dump: ") else msg
        raise UsageError(msg or "%s config-dump exited %d" % (cmd[0], p.returncode))
    got = json.loads(p.stdout)
    s = dict(defaults)
    for k in got["given"]:
        s[k] = got["values"][k]
    for k, attr in flags.items():
        v = getattr(args, attr, None) if attr else None
        if v is not None:
            s[k] = v
    return s


_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text):
    """'30s' -> 30.0 seconds; units ms, s, m, h, d. Raises UsageError."""
    m = re.fullmatch(r"(\d+)(ms|s|m|h|d)", text or "")
    if not m:
        raise UsageError("%r is not a duration (N with a unit ms, s, m, h or d: 30s, 5m, 2h, 1d)"
                         % text)
    return int(m.group(1)) * _UNITS[m.group(2)]


def redact(url):
    """A connection string without its password: the one redaction rule of the
    scripts, arbiter_conn.redact (the same as the C side's)."""
    from arbiter_conn import redact as conn_redact
    return conn_redact(url)


def confirm(question, assume_yes):
    """True if assume_yes, else asks on stdout and reads one answer from stdin: y or yes
    confirms; anything else, or end of input (no terminal, nothing piped), declines."""
    if assume_yes:
        return True
    sys.stdout.write(question + " [y/N] ")
    sys.stdout.flush()
    answer = sys.stdin.readline() if sys.stdin else ""
    if not answer:
        sys.stdout.write("\n(no answer on stdin; pass --yes to confirm without asking)\n")
    return answer.strip().lower() in ("y", "yes")


def run(prog, main, argv):
    """Runs main(argv) and exits with its status; see the module comment."""
    try:
        rc = main(argv)
        sys.stdout.flush()
    except UsageError as e:
        sys.stderr.write("%s: %s\n" % (prog, e))
        rc = 2
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, like a tool killed by SIGPIPE.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        rc = 141
    except KeyboardInterrupt:
        sys.stderr.write("%s: interrupted\n" % prog)
        rc = 130
    sys.exit(rc)
