#!/usr/bin/python3
"""`arbiter weights --scores`: the C implementation (common/weights) against an
independent Python one (standings_model.capped_weights: the literal
"cap, redistribute, repeat" iteration over Fractions) on 400 random inputs,
exact fractions and rounded units both; plus bad input (TAP on stdout).
"""
import json
import os
import random
import subprocess
from fractions import Fraction

from standings_model import capped_weights, largest_remainder
from tap import diag, done, ok

BIN = os.environ.get("ARBITER_BIN", "build/worker/arbiter")
SCALE = 10 ** 9


def run(lines, cap=None, extra=()):
    args = [BIN, "weights", "--scores", "-", "--json"] + (["--cap", cap] if cap else []) + list(extra)
    return subprocess.run(args, input="".join(lines), capture_output=True, text=True, timeout=60)


def main():
    rng = random.Random(20261126)
    caps = ["0.15", "0.1", "0.25", "0.5", "1", "0.333333333", "0.05", "0.000000001"]
    bad = 0
    for case in range(400):
        n = rng.choice([1, 2, 3, 5, 7, 10, 20, 50, 200])
        mode = rng.randrange(5)
        if mode == 0:
            scores = [rng.randrange(0, 100001) for _ in range(n)]
        elif mode == 1:
            scores = [rng.choice([0, 0, 1, 2, 3]) for _ in range(n)]
        elif mode == 2:
            scores = [100000] + [rng.randrange(0, 2000) for _ in range(n - 1)]
        elif mode == 3:
            scores = [rng.choice([0, 25000, 50000, 100000]) for _ in range(n)]
        else:
            scores = [rng.randrange(0, 10 ** 12) for _ in range(n)]
        cap = rng.choice(caps)
        ids = ["a%03d" % i for i in range(n)]
        r = run(["# case %d\n" % case] + ["%s %d\n" % (i, s) for i, s in zip(ids, scores)], cap)
        if r.returncode != 0:
            bad += 1
            diag("case %d: exit %d %s" % (case, r.returncode, r.stderr))
            continue
        got = json.loads(r.stdout)
        want, eff = capped_weights(scores, Fraction(cap))
        want_units = largest_remainder(want, SCALE)
        exact = [Fraction(w["exact"]) for w in got["weights"]]
        units = [w["units"] for w in got["weights"]]
        if (exact != want or units != want_units or Fraction(got["effective_cap"]) != eff
                or [w["agent_id"] for w in got["weights"]] != ids
                or sum(exact) != 1 or sum(units) != SCALE
                or any(w["weight"] != "%d.%09d" % divmod(u, SCALE) for w, u in zip(got["weights"], units))):
            bad += 1
            if bad <= 3:
                diag("case %d cap %s scores %r\n got   %r %r\n want  %r %r" %
                     (case, cap, scores[:10], exact[:10], units[:10], want[:10], want_units[:10]))
    ok(bad == 0, "400 random inputs: exact weights, units and effective cap equal the Python "
       "implementation (%d differ)" % bad)

    # The text output sums to exactly 1 as printed.
    r = subprocess.run([BIN, "weights", "--scores", "-"], input="x 1\ny 1\nz 1\n",
                       capture_output=True, text=True, timeout=30)
    vals = [line.split()[1] for line in r.stdout.splitlines() if not line.startswith("#")]
    ok(r.returncode == 0 and vals == ["0.333333334", "0.333333333", "0.333333333"],
       "three equal scores: 1/3 each, the leftover unit to the first line", r.stdout + r.stderr)

    for text, why in [("a 1\nb -2\n", "negative score"), ("a 1 2\n", "three fields"),
                      ("a x\n", "not a number"), ("a\n", "no score"),
                      ("a 99999999999999999999\n", "above 2^63")]:
        r = run([text])
        ok(r.returncode == 2 and "line" in r.stderr, "refused: %s" % why, r.stderr)
    r = run(["a %d\nb %d\n" % (2 ** 62, 2 ** 62)])
    ok(r.returncode == 2, "refused: scores summing above 2^63", r.stderr)
    for cap in ["0", "1.5", "0.1234567891", "x", "-0.1"]:
        r = run(["a 1\n"], cap)
        ok(r.returncode == 2 and "--cap" in r.stderr, "refused: --cap %s" % cap, r.stderr)
    r = subprocess.run([BIN, "weights", "--scores", "/nonexistent/x"], capture_output=True, text=True)
    ok(r.returncode == 2 and "/nonexistent/x" in r.stderr, "missing file named", r.stderr)
    r = run([""])
    ok(r.returncode == 0 and json.loads(r.stdout)["weights"] == [], "no agents: no weights")

    # Ids that need escaping, or are not UTF-8 (a file of scores is any bytes): every
    # agent keeps its agent_id in the JSON (invalid bytes become U+FFFD).
    r = subprocess.run([BIN, "weights", "--scores", "-", "--json"],
                       input=b'"q\\ 3\nab\xffc 5\ntab\\t\x01 1\n', capture_output=True, timeout=30)
    got = json.loads(r.stdout.decode()) if r.returncode == 0 else {"weights": []}
    ok([w.get("agent_id") for w in got["weights"]] == ["\"q\\", "ab\ufffdc", "tab\\t\x01"],
       "agent ids escaped, invalid UTF-8 replaced, none dropped", r.stdout.decode(errors="replace"))
    return done()


if __name__ == "__main__":
    raise SystemExit(main())
