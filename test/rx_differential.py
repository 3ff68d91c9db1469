#!/usr/bin/python3
"""common/rx against Python's re on random patterns of the documented subset
(common/README.md "Regular expressions") and random subjects: ASCII, Latin-1, Greek,
CJK, the Kelvin, Ohm and Angstrom signs, long s, and letters next to word
boundaries. Usage: rx_differential.py RX_DRIVER [CASES]; TAP on stdout.

The engine only answers "is there a match", so match / no match is compared.
Python runs the same pattern with these deliberate translations and choices:
- `$` is written `\\Z` for Python (arbiter's `$` is the end of the whole text;
  Python's also matches before a final newline);
- str patterns (Unicode \\w \\d \\s \\b), re.IGNORECASE for case_insensitive;
- no empty subject for a pattern with \\B (Python's \\B never matches the empty
  text; arbiter's, like Perl's, does: no word character on either side);
- characters on which the two differ by design are kept out of patterns and
  subjects: combining marks (arbiter's \\w counts Mn, Python's does not),
  U+001C-U+001F and U+0085 (whitespace to Python, not to arbiter), dotless
  i U+0131 (Python's IGNORECASE pairs it with i; its case folding does not),
  and U+0390/U+1FD3, U+03B0/U+1FE3, U+FB05/U+FB06 (paired by simple case
  folding only; utf8proc gives arbiter full folding, three code points).
"""
import random
import re
import subprocess
import sys

from tap import diag, done, ok

# Characters used for literals, class members and subjects (subjects hold nothing else:
# a class range is sampled by its members here, so no character outside this list, perhaps
# assigned in one Unicode version and not the other, comes up).
ALPHA = (
    "abcksxyzABCKSXYZ019_ -.!\n\t"
    "\u00e9\u00c9\u00e5\u00c5\u00df\u1e9e\u00b5\u03bc\u039c\u00a0\u00ff\u0178\u00d7"
    "\u03a9\u03c9\u03c3\u03c2\u03a3\u03b2\u03d0"
    "\u212a\u2126\u212b\u017f\u0130"
    "\u4e00\u4e2d\u3002\u3007\uff10\uff21\uff41\u0663"
)
# Subjects draw more from these, so that boundaries next to non-ASCII letters come up.
WORDY = "a\u00e9\u4e00K\u212a\u2126\u00c5\u212bk\u017fs "
SPECIAL = set("\\^$.|?*+()[]{}-/!#&~\"'%,:;<=>@`")


def lit(ch):
    """One character as a pattern literal (both engines)."""
    if ch == "\n":
        return "\\n"
    if ch == "\t":
        return "\\t"
    if ch in SPECIAL or (ch.isascii() and not ch.isalnum() and ch not in " _"):
        return "\\" + ch
    return ch


class Gen:
    def __init__(self, rng):
        self.r = rng

    def ch(self):
        return self.r.choice(ALPHA)

    def cls(self):
        items = []
        for _ in range(self.r.randint(1, 4)):
            k = self.r.random()
            if k < 0.15:
                items.append(("named", self.r.choice("dDwWsS")))
            elif k < 0.55:
                a, b = sorted((self.ch(), self.ch()))
                items.append(("range", a, b))
            else:
                items.append(("char", self.ch()))
        return ("class", self.r.random() < 0.3, items)

    def atom(self, depth):
        k = self.r.random()
        if k < 0.40:
            return ("char", self.ch())
        if k < 0.50:
            return ("any",)
        if k < 0.65:
            return self.cls()
        if k < 0.72:
            return ("named", self.r.choice("dDwWsS"))
        if k < 0.82 and depth < 3:
            return ("group", self.r.random() < 0.5, self.alt(depth + 1))
        return ("assert", self.r.choice(["b", "b", "B", "^", "$"]))

    def piece(self, depth):
        a = self.atom(depth)
        if a[0] == "assert" or self.r.random() < 0.6:
            return a
        q = self.r.choice(["*", "+", "?", "{n}", "{n,}", "{n,m}"])
        n = self.r.randint(0, 3)
        if q == "{n}":
            q = "{%d}" % n
        elif q == "{n,}":
            q = "{%d,}" % n
        elif q == "{n,m}":
            q = "{%d,%d}" % (n, n + self.r.randint(0, 2))
        if self.r.random() < 0.2:
            q += "?"
        return ("rep", a, q)

    def cat(self, depth):
        return ("cat", [self.piece(depth) for _ in range(self.r.randint(0 if depth else 1, 4))])

    def alt(self, depth):
        return ("alt", [self.cat(depth) for _ in range(1 if self.r.random() < 0.7 else self.r.randint(2, 3))])


def render(n, py):
    """The pattern text of node n, for arbiter (py False) or Python (py True)."""
    t = n[0]
    if t == "char":
        return lit(n[1])
    if t == "any":
        return "."
    if t == "named":
        return "\\" + n[1]
    if t == "class":
        s = "[^" if n[1] else "["
        for it in n[2]:
            if it[0] == "named":
                s += "\\" + it[1]
            elif it[0] == "range":
                s += lit(it[1]) + "-" + lit(it[2])
            else:
                s += lit(it[1])
        return s + "]"
    if t == "group":
        return ("(?:" if n[1] else "(") + render(n[2], py) + ")"
    if t == "assert":
        if n[1] == "$":
            return "\\Z" if py else "$"
        return "^" if n[1] == "^" else "\\" + n[1]
    if t == "rep":
        return render(n[1], py) + n[2]
    if t == "cat":
        return "".join(render(x, py) for x in n[1])
    return "|".join(render(x, py) for x in n[1])


def sample(n, r, out):
    """Appends to out a string that n would often match (assertions ignored)."""
    t = n[0]
    if t == "char":
        v = r.choice([n[1].upper(), n[1].lower(), n[1].swapcase()])
        out.append(v if r.random() < 0.3 and all(c in ALPHA for c in v) else n[1])
    elif t in ("any", "named"):
        out.append(r.choice(ALPHA))
    elif t == "class":
        it = r.choice(n[2])
        if it[0] == "char":
            out.append(it[1])
        elif it[0] == "range":
            out.append(r.choice([c for c in ALPHA if it[1] <= c <= it[2]]))
        else:
            out.append(r.choice(ALPHA))
    elif t == "group":
        sample(n[2], r, out)
    elif t == "rep":
        for _ in range(r.choice([0, 1, 1, 2, 3])):
            sample(n[1], r, out)
    elif t == "cat":
        for x in n[1]:
            sample(x, r, out)
    elif t == "alt":
        sample(r.choice(n[1]), r, out)


def subject(node, r):
    k = r.random()
    if k < 0.3:
        return "".join(r.choice(ALPHA) for _ in range(r.randint(0, 8)))
    if k < 0.45:
        return "".join(r.choice(WORDY) for _ in range(r.randint(0, 6)))
    out = []
    if r.random() < 0.5:
        out.append("".join(r.choice(WORDY) for _ in range(r.randint(0, 3))))
    sample(node, r, out)
    if r.random() < 0.5:
        out.append("".join(r.choice(WORDY) for _ in range(r.randint(0, 3))))
    return "".join(out)


# Fixed cases that the random ones may miss: the Kelvin/Ohm/Angstrom signs in classes, and
# boundaries within 4 bytes of the start after a non-ASCII letter.
FIXED = [
    ("[K]", True, "\u212a"), ("[A-Z]", True, "\u212a"), ("[^a-z]", True, "\u212a"),
    ("[\u03a9]", True, "\u2126"), ("[\u00c5]", True, "\u212b"), ("[\u00c0-\u00d6]", True, "\u212b"),
    ("[\u212a]", True, "k"), ("S", True, "\u017f"), ("[s]", True, "\u017f"),
    ("\\ba", False, "\u00e9a"), ("\\ba", False, "x\u00e9a"), ("\\Ba", False, "\u00e9a"),
    ("\\ba", False, "\u4e00a"), ("a\\b", False, "a\u00e9"), ("\\b\u00e9", False, "a\u00e9"),
]


def main():
    if len(sys.argv) < 2:
        print("usage: rx_differential.py RX_DRIVER [CASES]", file=sys.stderr)
        return 2
    driver = sys.argv[1]
    npat = int(sys.argv[2]) if len(sys.argv) > 2 else 4000
    seed = 20261128
    r = random.Random(seed)
    g = Gen(r)
    cases = [(p, p, ic, s) for p, ic, s in FIXED]   # no $ in FIXED
    for _ in range(npat):
        node = g.alt(0)
        ic = r.random() < 0.4
        p = render(node, False)
        for _ in range(4):
            s = subject(node, r)
            if s or "\\B" not in p:
                cases.append((p, render(node, True), ic, s))
    lines = "".join("%d %s %s\n" % (ic, p.encode().hex() or "-", s.encode().hex() or "-")
                    for p, _, ic, s in cases)
    res = subprocess.run([driver], input=lines, capture_output=True, text=True, timeout=600)
    ok(res.returncode == 0, "driver ran", res.stderr)
    got = res.stdout.splitlines()
    ok(len(got) == len(cases), "driver answered every case (%d of %d)" % (len(got), len(cases)))
    errors, diffs, spent, pmatch = [], [], 0, 0
    for (p, pp, ic, s), g_ in zip(cases, got):
        try:
            want = re.search(pp, s, re.IGNORECASE if ic else 0) is not None
        except re.error as e:
            errors.append("python rejects /%s/: %s" % (pp, e))
            continue
        if g_.startswith("E "):
            errors.append("arbiter rejects /%s/: %s" % (p, g_[2:]))
            continue
        if g_ == "-1":
            spent += 1
            continue
        pmatch += want
        if (g_ == "1") != want:
            diffs.append("/%s/%s on %r: arbiter %s, python %s" % (p, "i" if ic else "", s, g_, int(want)))
    n = len(cases)
    diag("%d cases (seed %d): %d match in Python, %d budget spent" % (n, seed, pmatch, spent))
    ok(not errors, "every pattern compiles in both (%d errors)" % len(errors), "\n".join(errors[:30]))
    ok(not diffs, "arbiter and Python agree on match / no match (%d differ)" % len(diffs),
       "\n".join(diffs[:40]))
    ok(n * 0.2 < pmatch < n * 0.8, "both outcomes well represented (%d of %d match)" % (pmatch, n))
    ok(spent == 0, "no search ran out of budget (%d)" % spent)
    return done()


if __name__ == "__main__":
    sys.exit(main())
