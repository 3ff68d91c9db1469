"""arbiter_ops: what the operator scripts (scripts/requeue, scripts/dlq) share.

- Settings like `arbiter`: flags > ARBITER_* environment > the configuration
  file (--config F or ARBITER_CONFIG) > defaults. The file format is the
  worker's (README "Configuration"): `ARBITER_KEY=value` lines, optionally
  after `export `, `#` comment lines, a `#` after whitespace starts a
  trailing comment unless the value is quoted, matching quotes are removed.
- Durations with units (500ms, 30s, 5m, 2h, 1d).
- Connection strings without passwords for messages.
- `run(main)`: bad usage and bad configuration exit 2 with a message (never a
  traceback); a closed stdout (`| head`) ends quietly; Ctrl-C exits 130.
"""
import argparse
import os
import re
import sys


class UsageError(Exception):
    """Bad arguments or configuration: message on stderr, exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse, but errors raise UsageError (exit 2 with the usage line, no traceback)."""

    def error(self, message):
        raise UsageError("%s\n%s" % (message, self.format_usage().rstrip()))


def parse_config_file(path):
    """The KEY=value pairs of a configuration file (see the module comment)."""
    out = {}
    try:
        f = open(path, encoding="utf-8")
    except OSError as e:
        raise UsageError("config file %s: %s" % (path, e.strerror or e))
    with f:
        for n, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if re.match(r"export[ \t]", line):
                line = line[7:].strip()
            if "=" not in line:
                raise UsageError("%s:%d: expected KEY=value" % (path, n))
            k, v = (x.strip() for x in line.split("=", 1))
            if v[:1] in ("'", '"'):
                end = v.find(v[0], 1)
                rest = v[end + 1:].strip() if end > 0 else None
                if end < 0 or (rest and not rest.startswith("#")):
                    raise UsageError("%s:%d: unterminated quote in the value of %s" % (path, n, k))
                v = v[1:end]
            else:
                m = re.search(r"[ \t]#", v)
                if m:
                    v = v[:m.start()].strip()
            out[k] = v
    return out


def settings(args, defaults, flags):
    """defaults: {ENV: default}; flags: {ENV: attribute of args or None}. Returns {ENV: value}."""
    s = dict(defaults)
    path = getattr(args, "config", None) or os.environ.get("ARBITER_CONFIG")
    if path:
        for k, v in parse_config_file(path).items():
            if k in s:
                s[k] = v
    for k in s:
        if os.environ.get(k):
            s[k] = os.environ[k]
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
