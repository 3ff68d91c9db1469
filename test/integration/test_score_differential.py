#!/usr/bin/python3
"""Differential test of `arbiter score` (common/README.md "Scoring spec"; worker/README.md "Command line") against an independent
Python reference of the scoring contract, written from the contract text and the
README's "Choices where the contract is silent" (not from the C sources).

1. A seeded random generator builds specs, submissions, ground truths and match
   files (empty arrays, type mismatches, missing paths, out-of-range indexes,
   half-up ties, decimal edges, Unicode normalisation, gates, thresholds,
   constraints, replay logs; and spec language v2: normalisation steps, set methods,
   text_length, count, regex_match, term_coverage, token_overlap, match_objects with
   nested field primitives, keyed_map, path roots and the round_each total, about
   SCORE_DIFF_V2_SHARE of the dimensions; expressions in exact rational arithmetic, with
   probes such as `(0.1 + 0.2 == 0.3)`), runs `$ARBITER_BIN score` on each and compares the
   whole result JSON: key order, scores, exact decimal weights and weighted
   values, result, verified, constraint violations, and warnings by
   (severity, field) (their wording is left open by the contract).
2. Spec validation: every invalid-spec rule of common/README.md "Scoring spec" exits 2 naming the dimension
   and the rule; valid specs (weights summing to exactly 1 in decimal) pass.

Environment: ARBITER_BIN (the built binary), SCORE_DIFF_SEED (default 20240501),
SCORE_DIFF_CASES (default 3000), SCORE_DIFF_KEEP=dir keeps failing cases there.
TAP on stdout."""
import copy
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from fractions import Fraction

BIN = os.environ.get("ARBITER_BIN", "build/worker/arbiter")
SEED = int(os.environ.get("SCORE_DIFF_SEED", "20240501"))
NCASES = int(os.environ.get("SCORE_DIFF_CASES", "3000"))
KEEP = os.environ.get("SCORE_DIFF_KEEP")
V2_SHARE = float(os.environ.get("SCORE_DIFF_V2_SHARE", "0.35"))  # dimensions using v2 primitives

import tap  # noqa: E402
from tap import ok  # noqa: E402


# ---------------------------------------------------------------------------
# Reference: values
# ---------------------------------------------------------------------------

MISSING = object()


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def exact(v):
    """A JSON number as an exact rational: integers exactly, reals as the
    shortest decimal text that round-trips the double (repr)."""
    if isinstance(v, int):
        return Fraction(v)
    return Fraction(Decimal(repr(v)))


class Score(int):
    """A permille score that remembers the exact fraction it rounds (`frac`): a composite's
    part reads that fraction, so the composite is rounded once (common/README.md "Composite
    dimensions"). Arithmetic on it gives a plain int, which a part reads as score / 1000."""


def half_up(fr):
    """fraction in [0, 1] -> integer 0..1000 rounded half up, exactly (a Score carrying the
    clamped fraction)."""
    if fr < 0:
        fr = Fraction(0)
    if fr > 1:
        fr = Fraction(1)
    r = Score(math.floor(fr * 1000 + Fraction(1, 2)))
    r.frac = Fraction(fr)
    return r


def part_q(score):
    """What a composite's part hands the expression: its exact fraction when it has one (as an
    inexact double when it needs more than 127 bits), else score / 1000 (fuzzy_string,
    time_decay with a curve other than 1: irreducibly binary in arbiter)."""
    fr = getattr(score, 'frac', None)
    if fr is None:
        return q_make(int(score), 1000)
    if not fits(fr.numerator, fr.denominator):
        return q_inexact(float(fr))
    return q_make(fr.numerator, fr.denominator)


def bin_round(x):
    """Binary results (expression, time_decay with a non-1 curve): clamp, NaN -> 0,
    floor(x*1000 + 0.5 + 1e-9) as the README documents."""
    if x != x:
        x = 0.0
    x = min(1.0, max(0.0, x))
    return math.floor(x * 1000 + 0.5 + 1e-9)


# ---------------------------------------------------------------------------
# Reference: paths
# ---------------------------------------------------------------------------

def parse_path(p):
    segs = []
    i = 0
    n = len(p)
    while i < n:
        c = p[i]
        if c == '[':
            j = i + 1
            if j < n and p[j] == '"':
                # quoted key: JSON string up to the closing quote
                k = j + 1
                while p[k] != '"':
                    k += 2 if p[k] == '\\' else 1
                segs.append(('key', json.loads(p[j:k + 1])))
                i = k + 2  # past '"]'
            else:
                k = p.index(']', j)
                segs.append(('idx', int(p[j:k])))
                i = k + 1
        elif c == '.':
            i += 1
        else:
            k = i
            while k < n and p[k] not in '.[':
                k += 1
            seg = p[i:k]
            # a canonical index (no leading zero, at most 9 digits) may index an array;
            # any other text is only an object key (common/README.md "Rules", Paths)
            canonical = seg.isdigit() and len(seg) <= 9 and (seg == '0' or seg[0] != '0')
            segs.append(('num', seg) if canonical else ('key', seg))
            i = k
    return segs


def resolve(root, path):
    v = root
    for kind, s in parse_path(path):
        if kind == 'key':
            if not isinstance(v, dict) or s not in v:
                return MISSING
            v = v[s]
        elif kind == 'idx':
            if not isinstance(v, list) or not (0 <= s < len(v)):
                return MISSING
            v = v[s]
        else:  # numeric dot segment: array index or object key
            if isinstance(v, list):
                i = int(s)
                if i >= len(v):
                    return MISSING
                v = v[i]
            elif isinstance(v, dict) and s in v:
                v = v[s]
            else:
                return MISSING
    return v


# ---------------------------------------------------------------------------
# Reference: equality, canonical items, text
# ---------------------------------------------------------------------------

def deep_eq(a, b, ci=False):
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if is_num(a) or is_num(b):
        return is_num(a) and is_num(b) and exact(a) == exact(b)
    if isinstance(a, str) or isinstance(b, str):
        if not (isinstance(a, str) and isinstance(b, str)):
            return False
        return a.casefold() == b.casefold() if ci else a == b
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, list) or isinstance(b, list):
        return (isinstance(a, list) and isinstance(b, list) and len(a) == len(b)
                and all(deep_eq(x, y, ci) for x, y in zip(a, b)))
    # objects
    return (set(a) == set(b)) and all(deep_eq(a[k], b[k], ci) for k in a)


def canon(v):
    if isinstance(v, bool):
        return ('b', v)
    if is_num(v):
        return ('n', exact(v))
    if isinstance(v, str):
        return ('s', v)
    if v is None:
        return ('z',)
    if isinstance(v, list):
        return ('a', tuple(canon(x) for x in v))
    return ('o', tuple(sorted((k, canon(x)) for k, x in v.items())))


def fuzzy_norm(s):
    s = unicodedata.normalize('NFKC', s).casefold()
    return ' '.join(s.split())


# ---------------------------------------------------------------------------
# Reference: spec language v2 (common/README.md "Spec language v2"), written from the README
# ---------------------------------------------------------------------------

def is_ws(c):
    return c in ' \t\n\v\f\r\x85' or unicodedata.category(c) in ('Zs', 'Zl', 'Zp')


STEP_ORDER = ['nfkc', 'casefold', 'separators', 'punctuation', 'whitespace', 'trim', 'numeric']


def norm_str(steps, s):
    """The text steps, in their fixed order (numeric is applied by norm_val)."""
    if 'nfkc' in steps:
        s = unicodedata.normalize('NFKC', s)
    if 'casefold' in steps:
        s = s.casefold()
    if 'separators' in steps:
        s = ''.join(' ' if (c in '-_' or is_ws(c)) else c for c in s)
    if 'punctuation' in steps:
        s = ''.join(c for c in s if not unicodedata.category(c).startswith('P'))
    if 'whitespace' in steps:  # runs of whitespace become one ' '
        res, prev_ws = [], False
        for c in s:
            if is_ws(c):
                if not prev_ws:
                    res.append(' ')
                prev_ws = True
            else:
                res.append(c)
                prev_ws = False
        s = ''.join(res)
    if 'trim' in steps:
        a, b = 0, len(s)
        while a < b and is_ws(s[a]):
            a += 1
        while b > a and is_ws(s[b - 1]):
            b -= 1
        s = s[a:b]
    return s


NUM_RE = None


def norm_val(steps, v):
    global NUM_RE
    import re
    if NUM_RE is None:
        NUM_RE = re.compile(r'-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?\Z')
    if not steps:
        return v
    if isinstance(v, str):
        t = norm_str(steps, v)
        if 'numeric' in steps:
            u = t.strip(' \t\n\v\f\r')
            if NUM_RE.match(u) and len(u) <= 64:
                if '.' not in u and 'e' not in u and 'E' not in u and len(u) <= 18:
                    return int(u)
                f = float(u)
                if f == f and f not in (float('inf'), float('-inf')):
                    return f
        return t
    if isinstance(v, list):
        return [norm_val(steps, x) for x in v]
    if isinstance(v, dict):
        return {k: norm_val(steps, x) for k, x in v.items()}
    return v


def is_word_char(c):
    return c == '_' or unicodedata.category(c)[0] in 'LMN'


def tokens(s):
    out, cur = set(), []
    for c in s + ' ':
        if is_word_char(c):
            cur.append(c)
        elif cur:
            out.add(''.join(cur))
            cur = []
    return out


def set_ratio(c, na, nb, method):
    if na == 0 and nb == 0:
        return 1000
    if method == 'jaccard':
        return half_up(Fraction(c, na + nb - c))
    if method in ('recall', 'intersection'):
        return 1000 if nb == 0 else half_up(Fraction(c, nb))
    if method == 'precision':
        return 0 if na == 0 else half_up(Fraction(c, na))
    return half_up(Fraction(2 * c, na + nb))  # f1


def ramp_value(d, v):
    if 'target' in d:
        pts = [(0, Fraction(0)), (d['target'], Fraction(1))]
        steps = False
    else:
        steps = 'steps' in d
        pts = [(x, exact(f)) for x, f in (d['steps'] if steps else d['ramp'])]
    if steps:
        f = Fraction(0)
        for x, fx in pts:
            if x <= v:
                f = fx
        return half_up(f)
    if v <= pts[0][0]:
        return half_up(pts[0][1])
    if v >= pts[-1][0]:
        return half_up(pts[-1][1])
    i = 0
    while pts[i + 1][0] < v:
        i += 1
    (x0, f0), (x1, f1) = pts[i], pts[i + 1]
    return half_up(f0 + (f1 - f0) * Fraction(v - x0, x1 - x0))


def words(s):
    n, inw = 0, False
    for c in s:
        w = is_ws(c)
        if not w and not inw:
            n += 1
        inw = not w
    return n


def lines(s):
    """text_length unit "lines" (v3): pieces between newlines holding a non-whitespace
    character."""
    return sum(1 for piece in s.split('\n') if any(not is_ws(c) for c in piece))


def levenshtein(a, b):
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
        prev = cur
    return prev[len(b)]


# ---------------------------------------------------------------------------
# Reference: timestamps (common/README.md "Timestamps")
# ---------------------------------------------------------------------------

def days_from_civil(y, m, d):
    y -= m <= 2
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def parse_ts(s):
    """-> Unix ms or None."""
    if not isinstance(s, str):
        return None
    import re
    m = re.fullmatch(r'(\d{4})-(\d{2})-(\d{2})'
                     r'(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?'
                     r'([Zz]|[+-]\d{2}(?::?\d{2})?)?)?', s)
    if not m:
        return None
    y, mo, d = int(m.group(1)), int(m.group(2)), int(m.group(3))
    mdays = [31, 29 if (y % 4 == 0 and y % 100 != 0) or y % 400 == 0 else 28,
             31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    if not (1 <= mo <= 12 and 1 <= d <= mdays[mo - 1]):
        return None
    hh = int(m.group(4) or 0)
    mi = int(m.group(5) or 0)
    ss = int(m.group(6) or 0)
    frac = m.group(7) or ''
    if hh > 23 or mi > 59 or ss > 60:
        return None
    ms = int((frac + '000')[:3])
    off = 0
    z = m.group(8)
    if z and z not in 'Zz':
        sign = -1 if z[0] == '-' else 1
        digits = z[1:].replace(':', '')
        oh = int(digits[:2])
        om = int(digits[2:4]) if len(digits) > 2 else 0
        if oh > 23 or om > 59:
            return None
        off = sign * (oh * 60 + om)
    secs = days_from_civil(y, mo, d) * 86400 + hh * 3600 + mi * 60 + ss - off * 60
    return secs * 1000 + ms


# ---------------------------------------------------------------------------
# Reference: expression language (contract: + - * /, parentheses, min, max,
# clamp, comparisons)
# ---------------------------------------------------------------------------

class ExprError(Exception):
    pass


def expr_tokens(src):
    toks = []
    i = 0
    while i < len(src):
        c = src[i]
        if c.isspace():
            i += 1
        elif c.isdigit() or (c == '.' and i + 1 < len(src) and src[i + 1].isdigit()):
            j = i
            while j < len(src) and (src[j].isdigit() or src[j] == '.'):
                j += 1
            if j < len(src) and src[j] in 'eE':
                k = j + 1
                if k < len(src) and src[k] in '+-':
                    k += 1
                if k < len(src) and src[k].isdigit():
                    j = k
                    while j < len(src) and src[j].isdigit():
                        j += 1
            v = float(src[i:j])
            if math.isinf(v):
                raise ExprError('number out of range')
            toks.append(('num', src[i:j]))   # the text: its exact value is read from it
            i = j
        elif c.isalpha() or c == '_':
            j = i
            while j < len(src) and (src[j].isalnum() or src[j] == '_'):
                j += 1
            toks.append(('id', src[i:j]))
            i = j
        elif src[i:i + 2] in ('<=', '>=', '==', '!='):
            toks.append(('op', src[i:i + 2]))
            i += 2
        elif c in '+-*/(),<>':
            toks.append(('op', c))
            i += 1
        elif c in '\u00d7\u00f7\u2212':  # × ÷ − (accepted as * / -)
            toks.append(('op', {'\u00d7': '*', '\u00f7': '/', '\u2212': '-'}[c]))
            i += 1
        else:
            raise ExprError('bad character %r' % c)
    toks.append(('end', None))
    return toks


def expr_parse(src, names):
    """-> AST (nested tuples). Raises ExprError."""
    toks = expr_tokens(src)
    pos = [0]

    def peek():
        return toks[pos[0]]

    def take(kind=None, val=None):
        t = toks[pos[0]]
        if (kind and t[0] != kind) or (val is not None and t[1] != val):
            raise ExprError('expected %s' % (val or kind))
        pos[0] += 1
        return t

    def comparison():
        # One comparison at most: `a < b < c` is ambiguous (chained in Python, nested in C)
        # and is rejected (README).
        left = additive()
        if peek()[0] == 'op' and peek()[1] in ('<', '<=', '>', '>=', '==', '!='):
            op = take()[1]
            left = ('cmp', op, left, additive())
            if peek()[0] == 'op' and peek()[1] in ('<', '<=', '>', '>=', '==', '!='):
                raise ExprError('comparisons cannot be chained')
        return left

    def additive():
        left = term()
        while peek() in (('op', '+'), ('op', '-')):
            op = take()[1]
            left = ('bin', op, left, term())
        return left

    def term():
        left = unary()
        while peek() in (('op', '*'), ('op', '/')):
            op = take()[1]
            left = ('bin', op, left, unary())
        return left

    def unary():
        if peek() == ('op', '-'):
            take()
            return ('neg', unary())
        if peek() == ('op', '+'):
            take()
            return unary()
        return primary()

    def primary():
        t = peek()
        if t[0] == 'num':
            take()
            return ('num', t[1])
        if t[0] == 'id':
            take()
            if peek() == ('op', '('):
                take()
                args = [comparison()]
                while peek() == ('op', ','):
                    take()
                    args.append(comparison())
                take('op', ')')
                if t[1] in ('min', 'max') and len(args) >= 1:
                    return (t[1], args)
                if t[1] == 'clamp' and len(args) == 3:
                    return ('clamp', args)
                raise ExprError('bad function %s' % t[1])
            if t[1] not in names:
                raise ExprError('unknown name %s' % t[1])
            return ('var', t[1])
        if t == ('op', '('):
            take()
            e = comparison()
            take('op', ')')
            return e
        raise ExprError('unexpected token')

    e = comparison()
    take('end')
    return e


# Exact evaluation (common/README.md "Exact expressions"): fractions whose numerator and denominator
# stay within 127-bit signed integers, the steps computed as arbiter computes them (cross
# products checked for overflow); a step that overflows continues as an IEEE double.
I128_MIN, I128_MAX = -(1 << 127), (1 << 127) - 1


def fits(*xs):
    return all(I128_MIN <= x <= I128_MAX for x in xs)


class Q:
    __slots__ = ('n', 'd', 'f', 'exact')

    def __init__(self, n=0, d=1, f=0.0, exact=True):
        self.n, self.d, self.f, self.exact = n, d, f, exact


def q_make(n, d):
    if n == I128_MIN or d == I128_MIN:   # -2^127 has no negation: not kept exact
        return Q(0, 1, float(n) / float(d), False)
    if d < 0:
        n, d = -n, -d
    g = math.gcd(n, d)
    if g > 1:
        n, d = n // g, d // g
    if n == 0:
        d = 1
    return Q(n, d, float(n) / float(d), True)


def q_inexact(f):
    return Q(0, 1, f, False)


def q_pow10(m, e, approx):
    p = 10 ** abs(e)
    if not fits(p):
        return q_inexact(approx)
    if e >= 0:
        return q_make(m * p, 1) if fits(m * p) else q_inexact(approx)
    return q_make(m, p)


def q_literal(text):
    approx = float(text)
    mant, _, ex = text.lower().partition('e')
    m, e, frac = 0, 0, False
    for ch in mant:
        if ch == '.':
            frac = True
            continue
        m = m * 10 + int(ch)
        if not fits(m):
            return q_inexact(approx)
        e -= frac
    if ex:
        x = int(ex)
        if x > 80 or x < -80:
            return q_inexact(approx)
        e += x
    if e > 80 or e < -80:
        return q_inexact(approx)
    return q_pow10(m, e, approx)


def q_var(v):
    if isinstance(v, bool):
        return q_make(int(v), 1)
    if isinstance(v, int):
        return q_make(v, 1)
    t = Decimal(repr(v)).as_tuple()
    m = int(''.join(map(str, t.digits))) * (-1 if t.sign else 1)
    if t.exponent > 80 or t.exponent < -80:
        return q_inexact(v)
    return q_pow10(m, t.exponent, v)


def q_add(x, y, sign):
    if x.exact and y.exact:
        a, b, dd = x.n * y.d, y.n * x.d, x.d * y.d
        n = a + b if sign > 0 else a - b
        if fits(a, b, n, dd):
            return q_make(n, dd)
    return q_inexact(x.f + y.f if sign > 0 else x.f - y.f)


def q_mul(x, y):
    if x.exact and y.exact:
        g1 = math.gcd(x.n, y.d) or 1
        g2 = math.gcd(y.n, x.d) or 1
        n, dd = (x.n // g1) * (y.n // g2), (x.d // g2) * (y.d // g1)
        if fits(n, dd):
            return q_make(n, dd)
    return q_inexact(x.f * y.f)


def q_div(x, y):
    if x.exact and y.exact:
        g1 = math.gcd(x.n, y.n) or 1
        g2 = math.gcd(x.d, y.d)
        n, dd = (x.n // g1) * (y.d // g2), (x.d // g2) * (y.n // g1)
        if fits(n, dd):
            return q_make(n, dd)
    return q_inexact(x.f / y.f)


def q_cmp(x, y):
    if x.exact and y.exact:
        a, b = x.n * y.d, y.n * x.d
        if fits(a, b):
            return (a > b) - (a < b)
    return (x.f > y.f) - (x.f < y.f)


def q_zero(x):
    return x.n == 0 if x.exact else x.f == 0.0


def expr_eval(e, env, dz):
    k = e[0]
    if k == 'num':
        return q_literal(e[1])
    if k == 'var':
        return env[e[1]]
    if k == 'neg':
        x = expr_eval(e[1], env, dz)
        return q_make(-x.n, x.d) if x.exact else q_inexact(-x.f)
    if k == 'bin':
        a = expr_eval(e[2], env, dz)
        b = expr_eval(e[3], env, dz)
        if e[1] == '+':
            return q_add(a, b, 1)
        if e[1] == '-':
            return q_add(a, b, -1)
        if e[1] == '*':
            return q_mul(a, b)
        if q_zero(b):
            dz[0] = True
            return q_make(0, 1)
        return q_div(a, b)
    if k == 'cmp':
        c = q_cmp(expr_eval(e[2], env, dz), expr_eval(e[3], env, dz))
        return q_make(1 if {'<': c < 0, '<=': c <= 0, '>': c > 0, '>=': c >= 0,
                            '==': c == 0, '!=': c != 0}[e[1]] else 0, 1)
    args = [expr_eval(x, env, dz) for x in e[1]]
    if k in ('min', 'max'):
        r = args[0]
        for x in args[1:]:
            if (q_cmp(x, r) < 0) if k == 'min' else (q_cmp(x, r) > 0):
                r = x
        return r
    x, lo, hi = args
    if q_cmp(x, lo) < 0:
        x = lo
    if q_cmp(x, hi) > 0:
        x = hi
    return x


def q_permille(q):
    """An expression's result in permille: exact fractions half up in integer arithmetic,
    inexact ones rounded as binary results."""
    if not q.exact:
        return bin_round(q.f)
    return half_up(Fraction(q.n, q.d))


# ---------------------------------------------------------------------------
# Reference: scoring
# ---------------------------------------------------------------------------

FIELD_PRIMS = ('exact_match', 'exact_match_ratio', 'numeric_tolerance', 'fuzzy_string',
               'coverage_ratio', 'set_overlap')


V2_PRIMS = ('text_contains', 'text_length', 'term_coverage', 'regex_match', 'token_overlap',
            'count', 'match_objects', 'keyed_map')
# Every primitive this reference implements (test-prim checks that each of arbiter's primitive
# descriptors is named here).
REFERENCE_PRIMITIVES = ('exact_match', 'exact_match_ratio', 'numeric_tolerance', 'fuzzy_string',
                        'coverage_ratio', 'set_overlap', 'time_decay', 'token_efficiency',
                        'call_efficiency', 'expression', 'text_contains', 'text_length',
                        'term_coverage', 'regex_match', 'token_overlap', 'count',
                        'match_objects', 'keyed_map')
assert set(REFERENCE_PRIMITIVES) == set(FIELD_PRIMS + V2_PRIMS) | {
    'time_decay', 'token_efficiency', 'call_efficiency', 'expression'}


def q_scaled(q, full):
    """common/README.md "Points above 1000": the value clamped to [0, 1] times full, rounded half up once
    (exactly for exact values; binary values as floor(x * full + 0.5 + 1e-9))."""
    if full == 1000:
        return q_permille(q)
    if not q.exact:
        x = q.f
        if x != x or x <= 0:
            return 0
        if x >= 1:
            return full
        return math.floor(x * full + 0.5 + 1e-9)
    fr = min(max(Fraction(q.n, q.d), Fraction(0)), Fraction(1))
    return math.floor(fr * full + Fraction(1, 2))


def type_name(v):
    """A JSON value's type as a type test names it."""
    if isinstance(v, bool):
        return 'boolean'
    if is_num(v):
        return 'number'
    return {str: 'string', type(None): 'null', list: 'array', dict: 'object'}[type(v)]


def scan_ref(v, docs, err):
    """common/README.md "Filter and scan": the var's exact value (a Q), or None after err()."""
    text = v['path']
    doc, p = root_path(text, 'answer', docs)
    arr = get(doc, p)
    if arr is MISSING:
        if 'default' in v:
            return q_var(v['default'])
        err(text)
        return None
    if not isinstance(arr, list):
        err(text)
        return None
    tests = v.get('where', [])
    tests = tests if isinstance(tests, list) else [tests]
    targets = []
    for t in tests:
        if 'equals_path' in t:
            tdoc, tp = root_path(t['equals_path'], 'answer', docs)
            x = get(tdoc, tp)
            if x is MISSING:
                err(t['equals_path'])
                return None
            targets.append(x)
        else:
            targets.append(t.get('equals'))
    types = {'string': lambda x: isinstance(x, str), 'number': is_num,
             'boolean': lambda x: isinstance(x, bool), 'null': lambda x: x is None,
             'array': lambda x: isinstance(x, list), 'object': lambda x: isinstance(x, dict)}

    def passes(e):
        for t, tg in zip(tests, targets):
            f = get(e, t.get('field'))
            if f is MISSING:
                hit = False
            elif 'type' in t:
                hit = types[t['type']](f)
            elif 'in' in t:
                hit = any(deep_eq(f, x) for x in t['in'])
            else:
                hit = deep_eq(f, tg)
            if hit == bool(t.get('not', False)):
                return False
        return True
    kept = [e for e in arr if passes(e)]
    red = v['reduce']
    if red == 'count':
        return q_make(len(kept), 1)
    vals = []
    for e in kept:
        x = get(e, v.get('of'))
        if not is_num(x):
            err(text)
            return None
        vals.append(x)
    desc = v.get('order') == 'descending'
    if red == 'sum':
        tot = q_make(0, 1)
        for x in vals:
            tot = q_add(tot, q_var(x), 1)
        return tot
    if red in ('min', 'max'):
        if not vals:
            if 'default' in v:
                return q_var(v['default'])
            err(text)
            return None
        fr = [exact(x) for x in vals]
        best = min(fr) if red == 'min' else max(fr)
        return q_var(vals[fr.index(best)])
    fr = [exact(x) for x in vals]
    if red == 'new_best':
        n, best = 0, None
        for x in fr:
            if best is None or (x < best if desc else x > best):
                best = x
                n += 1
        return q_make(n, 1)
    pairs = [(a >= b if desc else a <= b) for a, b in zip(fr, fr[1:])]
    if red == 'sorted':
        return q_make(1 if all(pairs) else 0, 1)
    return q_make(sum(pairs), 1)


def composite_reads(d):
    """The dimension keys a composite expression's vars read."""
    if d.get('primitive') != 'expression':
        return []
    return [v['dimension'] for v in (d.get('vars') or {}).values()
            if isinstance(v, dict) and 'dimension' in v]


def root_path(text, default, docs):
    """(document, path or None) for a field that may start with a root."""
    for r in ('@answer', '@metadata', '@match', '@ground_truth'):
        if text == r or text.startswith(r + '.') or text.startswith(r + '['):
            rest = text[len(r):]
            if rest.startswith('.'):
                rest = rest[1:]
            return docs[r[1:]], rest or None
    return docs[default], text


def get(doc, path):
    if path is None:
        return doc
    return resolve(doc, path)


BAD = object()   # a side that cannot be read (a projection over a non-array, a joined non-string)


def fetch(d, side, docs):
    v = fetch0(d, side, docs)
    if side == 0 and 'unwrap' in d and isinstance(v, dict):   # a polymorphic answer value
        v = resolve(v, d['unwrap'])
    return v


def fetch0(d, side, docs):
    """The value a dimension's (or part's) side reads, with the v3 projection (`[*]`) and joined
    fields (a list of paths): MISSING, BAD, or the value (common/README.md "Projection and joined
    fields")."""
    text = d.get('field' if side == 0 else 'ground_truth_field')
    default = 'answer' if side == 0 else 'ground_truth'
    if isinstance(text, list):
        parts = []
        for t in text:
            doc, p = root_path(t, 'answer', docs)
            v = get(doc, p)
            if v is MISSING:
                continue
            if not isinstance(v, str):
                return BAD
            parts.append(v)
        return d.get('separator', ' ').join(parts) if parts else MISSING
    if '[*]' in text:
        pre, rest = text.split('[*]', 1)
        rest = rest[1:] if rest.startswith('.') else rest
        if pre:
            doc, p = root_path(pre, default, docs)
            arr = get(doc, p)
        else:
            arr = docs[default]
        if arr is MISSING:
            return MISSING
        if not isinstance(arr, list):
            return BAD
        out = [e if not rest else resolve(e, rest) for e in arr]
        return [v for v in out if v is not MISSING]
    doc, p = root_path(text, default, docs)
    return get(doc, p)


def label(text):
    """A joined field's warnings name its first path."""
    return text[0] if isinstance(text, list) else text


def nested_score(n, g, w, st):
    """A nested primitive on one element pair; st['bad'] counts missing / ill-typed."""
    f = n.get('field')
    gf = n.get('ground_truth_field', f)
    f = None if f == '@element' else f      # v3: the element itself
    gf = None if gf == '@element' else gf
    sg = MISSING if g is MISSING else get(g, f)
    sw = MISSING if w is MISSING else get(w, gf)
    if sg is MISSING or sw is MISSING:
        st['bad'] += 1
        return 0
    r = v2_apply(n, sg, sw, st)
    if r is None:
        st['bad'] += 1
        return 0
    return r


def key_text(v):
    """common/README.md "Keyed answers against records": a key value's text (a string as
    it is, an integer in digits, a real as its shortest decimal), or None."""
    if isinstance(v, bool) or v is None or isinstance(v, (list, dict)) or v is MISSING:
        return None
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        r = repr(v)
        return r[:-2] if r.endswith('.0') else r
    return v


def record_key(spec, rec, steps=()):
    """prefix + the key text at the path + suffix, or None; spec a path or {path, prefix,
    suffix}."""
    path, pre, suf = (spec, '', '') if isinstance(spec, str) else \
        (spec['path'], spec.get('prefix', ''), spec.get('suffix', ''))
    if rec is MISSING:
        return None
    v = resolve(rec, path)
    if v is MISSING:
        return None
    t = key_text(norm_val(steps, v))
    return None if t is None else pre + t + suf


def credit(d, name):
    return exact(d.get(name, 1))


def pair_objects(d, subs, exps, st):
    """match_objects' score once each side is a list of (key, element), key None for an
    element that cannot pair: each expected element, in order, pairs with the first unused
    submitted one of the same key, and the pairs' scores are aggregated by d's method."""
    used = set()
    dvals = set()
    fields = d.get('fields', [])
    W = sum(exact(f.get('weight', 1)) for f in fields)
    P = Fraction(0)
    pairs = 0
    for k, w in exps:
        if k is None:
            continue
        hit = next((i for i, (kk, _) in enumerate(subs) if kk == k and i not in used), None)
        if hit is None:
            continue
        used.add(hit)
        pairs += 1
        ps = Fraction(1) if not fields else \
            sum(exact(f.get('weight', 1)) * nested_score(f, subs[hit][1], w, st)
                for f in fields) / (1000 * W)
        P += ps
        if 'distinct_of' in d and ps > 0:   # v3: distinct expected values of the pairs
            dv = resolve(w, d['distinct_of'])
            if dv is not MISSING:
                dvals.add(canon(dv))
    ns, ne = len(subs), len(exps)
    m = d.get('method', 'recall')
    if m == 'distinct':
        return ramp_value(d, len(dvals))
    if ns == 0 and ne == 0:
        return 1000
    if m == 'points':   # v3: points per pair, summed, capped at max_points
        return half_up(min(Fraction(1), P * exact(d['points']) / exact(d['max_points'])))
    den = {'recall': ne, 'precision': ns, 'f1': ns + ne, 'mean': pairs}[m]
    if m == 'f1':
        P *= 2
    if den == 0:
        return 1000 if m == 'recall' else 0
    return half_up(P / den)


def v2_apply(d, a, b, st):
    """Score of a field-reading primitive on resolved values, or None when ill-typed
    (st['side'] says which side)."""
    prim = d['primitive']
    steps = set(d.get('normalize', ['nfkc', 'casefold'] if prim == 'token_overlap' else []))
    if prim not in ('match_objects', 'keyed_map'):
        a = norm_val(steps, a)
        b = norm_val(steps, b) if b is not MISSING else b

    def bad(side):
        st['side'] = side
        return None
    if prim == 'exact_match':
        return 1000 if deep_eq(a, b, d.get('case_insensitive', False)) else 0
    if prim == 'numeric_tolerance':
        rel = d.get('relative')
        tol = exact(d.get('tolerance', 0.01 if rel is None else 0))
        if not is_num(a):
            return bad(0)
        if not is_num(b):
            return bad(1)
        if rel is not None:
            tol = max(tol, exact(rel) * abs(exact(b)))
        dd = abs(exact(a) - exact(b))
        return 1000 if dd <= tol else 0
    if prim == 'set_overlap':
        if not isinstance(a, list):
            return bad(0)
        if not isinstance(b, list):
            return bad(1)
        A = set(canon(x) for x in a)
        B = set(canon(x) for x in b)
        return set_ratio(len(A & B), len(A), len(B), d.get('method', 'jaccard'))
    if prim == 'text_contains':
        if not isinstance(a, str):
            return bad(0)
        if not isinstance(b, str):
            return bad(1)
        dr = d.get('direction', 'either')
        if a == b:
            return half_up(credit(d, 'equal_credit'))
        if a and b and dr != 'truth_in_answer' and len(a) < len(b) and a in b:
            return half_up(credit(d, 'contains_credit'))
        if a and b and dr != 'answer_in_truth' and len(b) < len(a) and b in a:
            return half_up(credit(d, 'contains_credit'))
        return 0
    if prim == 'text_length':
        if not isinstance(a, str):
            return bad(0)
        unit = d.get('unit')
        n = words(a) if unit == 'words' else lines(a) if unit == 'lines' else len(a)
        return ramp_value(d, n)
    if prim == 'count':
        of = d.get('of', 'length')
        if of == 'length':
            if not isinstance(a, (list, dict, str)):
                return bad(0)
            return ramp_value(d, len(a))
        if of == 'present':
            if not isinstance(a, dict):
                return bad(0)
            return ramp_value(d, sum(1 for k in d['keys'] if a.get(k) is not None))
        if not isinstance(a, list):
            return bad(0)
        distinct = len(set(canon(x) for x in a))
        if of == 'unique_ratio':
            return 0 if not a else half_up(Fraction(distinct, len(a)))
        return ramp_value(d, distinct)
    if prim == 'regex_match':
        import re
        if not isinstance(a, str):
            return bad(0)
        fl = re.I if (d.get('case_insensitive') or 'casefold' in steps) else 0
        return 1000 if re.search(d['pattern'], a, fl) else 0
    if prim == 'term_coverage':
        import re
        if isinstance(a, list) and all(isinstance(x, str) for x in a):
            text = '\n'.join(a)
        elif isinstance(a, str):
            text = a
        else:
            return bad(0)
        fl = re.I if (d.get('case_insensitive') or 'casefold' in steps) else 0
        if 'terms' in d:
            terms = d['terms']
            found = 0
            for t in terms:
                neg = isinstance(t, dict) and 'not' in t   # v3: a term that must be absent
                if neg:
                    t = t['not']
                alts = t if isinstance(t, list) else [t]
                hit = False
                for x in alts:
                    if hit:
                        break   # alternatives after a hit are not looked at
                    if isinstance(x, str):
                        hit = norm_str(steps, x) in text
                    elif 'regex' in x:
                        hit = re.search(x['regex'], text, fl) is not None
                    else:   # v3: prefix + a value's text + suffix
                        doc, path = root_path(x['ground_truth'], 'ground_truth', st['docs'])
                        v = get(doc, path)
                        if isinstance(v, bool) or not (isinstance(v, str) or is_num(v)):
                            return bad(1)
                        tt = norm_str(steps, x.get('prefix', '') + key_text(v) +
                                      x.get('suffix', ''))
                        hit = bool(tt) and tt in text
                found += (not hit) if neg else hit
            total = len(terms)
        elif d.get('terms_from') == 'words':
            if not isinstance(b, str):
                return bad(1)
            ws = tokens(b)
            total = len(ws)
            found = sum(1 for w in ws if w in text)
        else:
            if not isinstance(b, list):
                return bad(1)
            for x in b:
                if not isinstance(x, str):
                    return bad(1)
            total = len(b)
            found = sum(1 for x in b if x and x in text)
        if total == 0:
            return 1000
        need = d.get('need', total)
        return half_up(Fraction(min(found, need), need))
    if prim == 'token_overlap':
        if not isinstance(a, str):
            return bad(0)
        if not isinstance(b, str):
            return bad(1)
        A, B = tokens(a), tokens(b)
        return set_ratio(len(A & B), len(A), len(B), d.get('method', 'recall'))
    if prim == 'match_objects' and (d.get('field_keyed') or d.get('ground_truth_keyed')):
        # v3: an object side {key: element}; records keyed by match_on (with its affixes)
        sides = []
        for side, (v, keyed) in enumerate(((a, d.get('field_keyed')),
                                           (b, d.get('ground_truth_keyed')))):
            if not isinstance(v, dict if keyed else list):
                return bad(side)
            if keyed:
                sides.append([(key_text(norm_val(steps, k)), x) for k, x in v.items()])
            else:
                sides.append([(record_key(d['match_on'], o, steps) if isinstance(o, dict)
                               else None, o) for o in v])
        subs, exps = sides
        return pair_objects(d, subs, exps, st)
    if prim == 'match_objects':
        if not isinstance(a, list):
            return bad(0)
        if not isinstance(b, list):
            return bad(1)
        on = d['match_on'] if isinstance(d['match_on'], list) else [d['match_on']]
        # v3: {"path", "prefix", "suffix"}; fixed text on both sides changes no pairing
        on = [x['path'] if isinstance(x, dict) else x for x in on]

        def key(o):
            if not isinstance(o, dict):
                return None
            ks = []
            for pth in on:
                v = resolve(o, pth)
                if v is MISSING:
                    return None
                ks.append(canon(norm_val(steps, v)))
            return tuple(ks)
        return pair_objects(d, [(key(o), o) for o in a], [(key(w), w) for w in b], st)
    if prim == 'keyed_map' and (d.get('field_key') or d.get('ground_truth_key')):
        # v3: a records side keyed by field_key / ground_truth_key (first record per key)
        fk, gk = d.get('field_key'), d.get('ground_truth_key')
        if not isinstance(a, list if fk else dict):
            return bad(0)
        if not isinstance(b, list if gk else dict):
            return bad(1)

        def first_by_key(recs, spec):
            m = {}
            for r in recs:
                k = record_key(spec, r)
                if k is not None and k not in m:
                    m[k] = r
            return m
        amap = first_by_key(a, fk) if fk else a
        bmap = first_by_key(b, gk) if gk else b
        if 'keys' in d:
            items = [(k, bmap.get(k, MISSING)) for k in d['keys']]
        elif gk:
            items = [(record_key(gk, r), r) for r in b]
        else:
            items = list(b.items())
        if not items:
            return 1000
        tot = 0
        for k, w in items:
            if k is None:
                st['bad'] += 1
                continue
            tot += nested_score(d['item'], amap.get(k, MISSING), w, st)
        return half_up(Fraction(tot, 1000 * len(items)))
    if prim == 'keyed_map':
        if not isinstance(a, dict):
            return bad(0)
        if not isinstance(b, dict):
            return bad(1)
        keys = d.get('keys', list(b))
        if not keys:
            return 1000
        tot = sum(nested_score(d['item'], a.get(k, MISSING), b.get(k, MISSING), st) for k in keys)
        return half_up(Fraction(tot, 1000 * len(keys)))
    raise ValueError(prim)


V2_TYPES = {'text_length': (str,), 'regex_match': (str,), 'token_overlap': (str,),
            'term_coverage': (str, list), 'match_objects': (list,), 'keyed_map': (dict,),
            'text_contains': (str,)}


def v2_types(d, side):
    """The JSON types a side must have (v3: records and keyed sides, terms from words)."""
    prim = d['primitive']
    if prim == 'keyed_map' and d.get(('field_key', 'ground_truth_key')[side]):
        return (list,)
    if prim == 'match_objects' and d.get(('field_keyed', 'ground_truth_keyed')[side]):
        return (dict,)
    if prim == 'term_coverage' and side == 1 and d.get('terms_from') == 'words':
        return (str,)
    return V2_TYPES.get(prim)


def v2_dim(d, docs, err, adv):
    prim = d['primitive']
    f = label(d['field'])
    a = fetch(d, 0, docs)
    good = True
    ta = v2_types(d, 0)
    if a is MISSING or a is BAD or (ta and not isinstance(a, ta)) or (ta and isinstance(a, bool)):
        err(f)
        good = False
    b = MISSING
    g = d.get('ground_truth_field')
    if g is not None:
        glabel = 'ground_truth.' + g if not g.startswith('@') else g
        b = fetch(d, 1, docs)
        tb = v2_types(d, 1)
        if b is MISSING or b is BAD or (tb and not isinstance(b, tb)):
            err(glabel)
            good = False
    if not good:
        return 0
    st = {'bad': 0, 'side': 0, 'docs': docs}
    r = v2_apply(d, a, b, st)
    if r is not None and st['bad']:
        adv(f)
    if r is None:
        err(f if st['side'] == 0 else 'ground_truth' if g is None else
            ('ground_truth.' + g if not g.startswith('@') else g))
        return 0
    return r


def seed_canon(spec):
    """common/README.md "The seed's spec form": `type` names the evaluator, and a dimension's `name`
    is its key when it has no `key`."""
    spec = dict(spec)
    if 'type' in spec and 'evaluator' not in spec:
        spec['evaluator'] = spec['type']
    spec['dimensions'] = [dict(d, key=d['name']) if 'key' not in d and 'name' in d else d
                          for d in spec['dimensions']]
    return spec


def reference_score(spec, sub, gt, match):
    spec = seed_canon(spec)
    answer = sub.get('answer', {})
    metadata = sub.get('metadata', {})
    match = match or {}
    started = parse_ts(match['started_at']) if 'started_at' in match else None
    submitted = parse_ts(match['submitted_at']) if 'submitted_at' in match else None
    has_times = started is not None and submitted is not None
    constraints = spec.get('constraints') or {}

    # verified
    verified = False
    log = metadata.get('replay_log', MISSING)
    if has_times and isinstance(log, list) and log:
        verified = True
        for ent in log:
            ts = parse_ts(ent.get('ts')) if isinstance(ent, dict) else None
            if ts is None or not (started - 5000 <= ts <= submitted + 5000):
                verified = False
                break

    warnings = []
    match_doc = {}
    if has_times:
        ms = submitted - started
        match_doc['elapsed_ms'] = ms
        match_doc['elapsed_secs'] = ms / 1000
    if match.get('time_limit_secs'):
        match_doc['time_limit_secs'] = match['time_limit_secs']

    def err(field):
        warnings.append(('error', field))

    def adv(field):
        warnings.append(('warning', field))

    raw = {}
    final = {}
    dims = {d['key']: d for d in spec['dimensions']}

    def prim_score(d, key):
        """A dimension's primitive (or a composite's part, key its composite's)."""
        prim = d['primitive']
        score = 0
        if prim in V2_PRIMS:
            score = v2_dim(d, {'answer': answer, 'metadata': metadata, 'ground_truth': gt,
                               'match': match_doc}, err, adv)
        elif prim in FIELD_PRIMS:
            f, g = label(d['field']), d['ground_truth_field']
            docs = {'answer': answer, 'metadata': metadata, 'ground_truth': gt, 'match': match_doc}
            a = fetch(d, 0, docs)
            b = fetch(d, 1, docs)
            if d.get('normalize'):
                a = norm_val(set(d['normalize']), a) if a is not MISSING and a is not BAD else a
                b = norm_val(set(d['normalize']), b) if b is not MISSING and b is not BAD else b
            gf = 'ground_truth.' + g
            if prim == 'exact_match':
                if a is MISSING or a is BAD:
                    err(f)
                if b is MISSING or b is BAD:
                    err(gf)
                if a is not MISSING and b is not MISSING and a is not BAD and b is not BAD:
                    score = 1000 if deep_eq(a, b, d.get('case_insensitive', False)) else 0
            elif prim in ('exact_match_ratio', 'coverage_ratio', 'set_overlap'):
                good = True
                if not isinstance(a, list):
                    err(f)
                    good = False
                if not isinstance(b, list):
                    err(gf)
                    good = False
                if good:
                    if prim == 'exact_match_ratio':
                        if not b:
                            score = 1000 if not a else 0
                        else:
                            m = sum(1 for x, y in zip(a, b) if deep_eq(x, y))
                            score = half_up(Fraction(m, len(b)))
                    else:
                        A = set(canon(x) for x in a)
                        B = set(canon(x) for x in b)
                        if prim == 'coverage_ratio':
                            score = 1000 if not B else half_up(Fraction(len(A & B), len(B)))
                        else:
                            score = set_ratio(len(A & B), len(A), len(B),
                                              d.get('method', 'jaccard'))
            elif prim == 'numeric_tolerance':
                rel = d.get('relative')   # v3: max(tolerance, relative x |expected|)
                tol0 = exact(d.get('tolerance', 0.01 if rel is None else 0))
                linear = d.get('decay', 'none') == 'linear'

                def within(x, y):
                    tol = tol0 if rel is None else max(tol0, exact(rel) * abs(exact(y)))
                    dd = abs(exact(x) - exact(y))
                    if dd <= tol:
                        return Fraction(1)
                    if linear and tol > 0:
                        return max(Fraction(0), 1 - (dd - tol) / (4 * tol))
                    return Fraction(0)
                a_ok = is_num(a) or isinstance(a, list)
                b_ok = is_num(b) or isinstance(b, list)
                if not a_ok:
                    err(f)
                if not b_ok:
                    err(gf)
                if a_ok and b_ok:
                    if isinstance(a, list) != isinstance(b, list):
                        err(f)
                    elif is_num(b):
                        score = half_up(within(a, b))
                    elif not b:
                        score = 1000 if not a else 0
                    else:
                        tot = Fraction(0)
                        bad = False
                        for i, y in enumerate(b):
                            x = a[i] if i < len(a) else MISSING
                            if is_num(x) and is_num(y):
                                tot += within(x, y)
                            else:
                                bad = True
                        if bad:
                            adv(f)
                        score = half_up(tot / len(b))
            elif prim == 'fuzzy_string':
                if not isinstance(a, str):
                    err(f)
                if not isinstance(b, str):
                    err(gf)
                if isinstance(a, str) and isinstance(b, str):
                    x, y = fuzzy_norm(a), fuzzy_norm(b)
                    mx = max(len(x), len(y))
                    # binary in arbiter (its distance ratio in double): read as score / 1000
                    score = 1000 if mx == 0 else int(half_up(Fraction(mx - levenshtein(x, y),
                                                                      mx)))
        elif prim == 'time_decay':
            L = d.get('time_limit_secs', match.get('time_limit_secs'))
            if not has_times:
                err('started_at')
            elif L is None:
                err('time_limit_secs')
            else:
                t = submitted - started
                curve = d.get('curve', 1)
                if t < 0:
                    score = 1000
                else:
                    x = 1 - Fraction(t, 1000) / exact(L)
                    if x <= 0:
                        score = 0
                    elif exact(curve) == 1:
                        score = half_up(x)
                    elif exact(curve).denominator == 1:   # powl in arbiter: binary
                        score = int(half_up(x ** int(exact(curve))))
                    else:
                        score = bin_round(float(x) ** float(curve))
        elif prim in ('token_efficiency', 'call_efficiency'):
            ck, mk = (('token_budget', 'token_count') if prim == 'token_efficiency'
                      else ('max_llm_calls', 'llm_call_count'))
            lim = constraints.get(ck)
            if verified and lim is not None:
                c = metadata.get(mk, MISSING)
                if not is_num(c) or exact(c) < 0 or exact(c).denominator != 1:
                    err('metadata.' + mk)
                elif exact(lim) == 0:
                    score = 1000 if exact(c) == 0 else 0
                else:
                    score = half_up(max(Fraction(0), 1 - exact(c) / exact(lim)))
        elif prim == 'expression':
            env = {}
            bad = False
            for name, path in (d.get('vars') or {}).items():
                if isinstance(path, dict) and 'primitive' in path:
                    # a composite's part: scored as a dimension, read as its exact fraction
                    env[name] = part_q(prim_score(path, key))
                    continue
                if isinstance(path, dict) and 'dimension' in path:
                    # another dimension's final score / its full score
                    t = dims[path['dimension']]
                    env[name] = q_make(final[t['key']], t.get('full_score', 1000))
                    continue
                if isinstance(path, dict) and 'reduce' in path:
                    docs = {'answer': answer, 'metadata': metadata, 'ground_truth': gt,
                            'match': match_doc}
                    q = scan_ref(path, docs, err)
                    if q is None:
                        bad = True
                    else:
                        env[name] = q
                    continue
                form = path if isinstance(path, dict) else {}
                if form:   # {"path", "default", "unwrap", "type"} (v3 polymorphic / type vars)
                    path = form['path']
                if path.startswith('metadata.'):
                    v = resolve(metadata, path[len('metadata.'):])
                elif path.startswith('ground_truth.'):
                    v = resolve(gt, path[len('ground_truth.'):])
                else:
                    v = resolve(answer, path)
                if 'unwrap' in form and isinstance(v, dict):
                    v = resolve(v, form['unwrap'])
                if 'type' in form:
                    ts = form['type'] if isinstance(form['type'], list) else [form['type']]
                    env[name] = q_make(int(v is not MISSING and type_name(v) in ts), 1)
                    continue
                if v is MISSING and 'default' in form:
                    env[name] = q_var(form['default'])
                    continue
                if isinstance(v, bool) or is_num(v):
                    env[name] = q_var(v)
                else:
                    err(path)
                    bad = True
            if not bad:
                dz = [False]
                x = expr_eval(expr_parse(d['expr'], list(env)), env, dz)
                if dz[0]:
                    adv(key)
                if 'scale' in d:
                    x = q_div(x, q_var(d['scale']))
                score = q_scaled(x, d.get('full_score', 1000))
        return score

    # spec order, except composites reading other dimensions (scored when reached below)
    for d in spec['dimensions']:
        if not composite_reads(d):
            raw[d['key']] = prim_score(d, d['key'])

    # gates (and deferred composites), in topological order: depth-first over the
    # dimensions each depends on, in spec order, as common/README.md "Composite dimensions" says
    keys = [d['key'] for d in spec['dimensions']]

    def deps(k):
        d = dims[k]
        ds = set(composite_reads(d))
        if d.get('gate') is not None:
            ds.add(d['gate']['dimension'])
        return [x for x in keys if x in ds]
    order = []
    state = {}

    def visit(k):
        if state.get(k):
            return
        state[k] = 1
        for t in deps(k):
            visit(t)
        order.append(k)
    for k in keys:
        visit(k)
    for k in order:
        if k not in raw:
            raw[k] = prim_score(dims[k], k)
        g = dims[k].get('gate')
        s = raw[k]
        if g is not None and not Fraction(final[g['dimension']]) > exact(g['above']):
            s = 0
        final[k] = s

    total = Fraction(0)
    breakdown = []
    for d in spec['dimensions']:
        w = exact(d.get('weight', 0))   # a helper dimension: 0
        wd = final[d['key']] * w
        # "round_each": each weighted value rounded half up, then summed
        total += math.floor(wd + Fraction(1, 2)) if spec.get('total') == 'round_each' else wd
        breakdown.append((d['key'], final[d['key']], w, wd))
    total = math.floor(min(Fraction(1000), total))
    th = spec.get('thresholds') or {}
    win = exact(th.get('win', 700))
    draw = exact(th.get('draw', 400))
    result = 'win' if total >= win else 'draw' if total >= draw else 'loss'

    viol = []
    for ck, mk in (('token_budget', 'token_count'), ('max_llm_calls', 'llm_call_count'),
                   ('max_tool_calls', 'tool_call_count')):
        lim = constraints.get(ck)
        c = metadata.get(mk, MISSING)
        if lim is not None and is_num(c) and exact(c) > exact(lim):
            viol.append((ck, exact(lim), exact(c)))
    return {'score': total, 'result': result, 'breakdown': breakdown,
            'warnings': warnings, 'violations': viol, 'verified': verified}


# ---------------------------------------------------------------------------
# Comparing with the binary's output
# ---------------------------------------------------------------------------

TOP_KEYS = ['score', 'result', 'score_breakdown', 'submission_warnings',
            'constraint_violations', 'verified']


def num_of(tok):
    """Decimal or int (as parsed) -> Fraction; raise if not a number."""
    if isinstance(tok, bool) or not isinstance(tok, (int, Decimal)):
        raise ValueError('not a number: %r' % (tok,))
    return Fraction(tok)


def compare(exp, text):
    """-> list of differences (empty when equal)."""
    diffs = []
    try:
        pairs = json.loads(text, object_pairs_hook=lambda p: p, parse_float=Decimal)
    except ValueError as e:
        return ['stdout is not JSON: %s: %r' % (e, text[:300])]
    if [k for k, _ in pairs] != TOP_KEYS:
        diffs.append('top-level keys %r' % [k for k, _ in pairs])
    got = dict(pairs)
    if got.get('score') != exp['score'] or isinstance(got.get('score'), bool):
        diffs.append('score %r, expected %r' % (got.get('score'), exp['score']))
    if got.get('result') != exp['result']:
        diffs.append('result %r, expected %r' % (got.get('result'), exp['result']))
    if got.get('verified') is not exp['verified']:
        diffs.append('verified %r, expected %r' % (got.get('verified'), exp['verified']))
    bd = got.get('score_breakdown') or []
    if [k for k, _ in bd] != [b[0] for b in exp['breakdown']]:
        diffs.append('breakdown keys %r' % [k for k, _ in bd])
    else:
        for (key, dv), (_, s, w, wd) in zip(bd, exp['breakdown']):
            if [k for k, _ in dv] != ['score', 'weight', 'weighted']:
                diffs.append('%s: keys %r' % (key, [k for k, _ in dv]))
                continue
            dv = dict(dv)
            if dv['score'] != s:
                diffs.append('%s: score %r, expected %r' % (key, dv['score'], s))
            for name, want in (('weight', w), ('weighted', wd)):
                v = dv[name]
                try:
                    if num_of(v) != want:
                        diffs.append('%s: %s %s, expected %s' % (key, name, v, float(want)))
                    elif want.denominator == 1 and not isinstance(v, int):
                        diffs.append('%s: %s %s should print as an integer' % (key, name, v))
                except ValueError as e:
                    diffs.append('%s: %s' % (key, e))
    gw = []
    for w in got.get('submission_warnings') or []:
        w = dict(w)
        gw.append((w.get('severity'), w.get('field')))
        if not isinstance(w.get('message'), str) or not w.get('message'):
            diffs.append('warning without a message: %r' % (w,))
    if gw != exp['warnings']:
        diffs.append('warnings %r, expected %r' % (gw, exp['warnings']))
    gv = []
    for v in got.get('constraint_violations') or []:
        v = dict(v)
        try:
            gv.append((v.get('constraint'), num_of(v.get('limit')), num_of(v.get('actual'))))
        except ValueError as e:
            diffs.append('violation %r: %s' % (v, e))
    if gv != exp['violations']:
        diffs.append('violations %r, expected %r' % (gv, exp['violations']))
    return diffs


# ---------------------------------------------------------------------------
# Random generator
# ---------------------------------------------------------------------------

KEYS = ['correctness', 'completeness', 'precision', 'methodology', 'speed', 'code_quality',
        'analysis', 'success', 'cost', 'latency', 'reliability', 'd1', 'x_2', 'recall',
        'a' * 32, 'z9']

WEIGHT_SETS = [
    ['0.333333', '0.333334', '0.333333'],
    ['0.1', '0.2', '0.7'],
    ['0.5', '0.2', '0.15', '0.15'],
    ['1'],
    ['0.25', '0.25', '0.25', '0.25'],
    ['0.000001', '0.999999'],
    ['0.1'] * 10,
    ['0.0625'] * 16,
    ['0.123457', '0.876543'],
    ['0.3', '0.3', '0.4'],
]


def rand_weights(rng, n):
    for ws in WEIGHT_SETS:
        if len(ws) == n and rng.random() < 0.4:
            return [float(x) for x in ws]
    # random micro-unit partition of 1,000,000
    cuts = sorted(rng.sample(range(1, 1000000), n - 1)) if n > 1 else []
    parts = [b - a for a, b in zip([0] + cuts, cuts + [1000000])]
    if rng.random() < 0.5:  # coarser decimals
        parts = None
        for _ in range(20):
            c = sorted(rng.sample(range(1, 100), n - 1)) if n > 1 else []
            if len(set(c)) == len(c):
                parts = [(b - a) * 10000 for a, b in zip([0] + c, c + [100])]
                break
        if parts is None:
            return rand_weights(rng, n)
    return [float(Decimal(p) / 1000000) for p in parts]


def rand_scalar(rng):
    return rng.choice([0, 1, 1.0, -0.0, 2, 2.5, 100, 1e2, 0.1, 0.3, 0.30000000000000004,
                       True, False, None, "1", "a", "A", "Straße", "STRASSE", "", "x y",
                       "é", "e\u0301", [], {}, 12345678901234, -7, 1.5e-7, "a\u0000b", "a\u0000B"])


def rand_json(rng, depth=0):
    r = rng.random()
    if depth > 2 or r < 0.55:
        return rand_scalar(rng)
    if r < 0.8:
        return [rand_json(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(['a', 'b', 'C', 'k', '0']): rand_json(rng, depth + 1)
            for _ in range(rng.randint(0, 3))}


def perturb(rng, v):
    """Something deep-equal to v or slightly different."""
    if isinstance(v, bool):
        return rng.choice([v, not v, 1 if v else 0])
    if isinstance(v, int):
        return rng.choice([v, float(v), v + 1, str(v)])
    if isinstance(v, float):
        return rng.choice([v, v, v + 1, str(v)])
    if isinstance(v, str):
        return rng.choice([v, v, v.upper(), v.lower(), v.casefold(), v + ' '])
    if isinstance(v, list):
        r = rng.random()
        if r < 0.6:
            return [perturb(rng, x) for x in v]
        if r < 0.8:
            return list(reversed(v))
        return v + [1]
    if isinstance(v, dict):
        items = list(v.items())
        rng.shuffle(items)
        out = {k: perturb(rng, x) for k, x in items}
        if rng.random() < 0.15:
            out['extra'] = 1
        return out
    return v


class Case:
    def __init__(self, rng, idx):
        self.rng = rng
        self.idx = idx
        self.answer = {}
        self.gt = {}
        self.metadata = {}
        self.match = {}
        self.nf = 0

    def place(self, val_a, val_g):
        """Puts values into answer/ground truth under fresh paths; sometimes nested,
        sometimes missing or behind an out-of-range index. Returns (field, gtfield)."""
        rng = self.rng
        self.nf += 1
        n = self.nf
        fa, fg = self._place(self.answer, 'f%d' % n, val_a), self._place(self.gt, 'g%d' % n, val_g)
        return fa, fg

    def _place(self, root, name, val):
        rng = self.rng
        r = rng.random()
        if val is MISSING:
            r2 = rng.random()
            if r2 < 0.4:
                return name  # simply absent
            if r2 < 0.7:
                root[name] = [1, 2]
                return name + '[5]'  # index out of range
            root[name] = {'x': 1}
            return name + '.y'
        if r < 0.6:
            root[name] = val
            return name
        if r < 0.75:
            root[name] = {'inner': [0, val]}
            return name + '.inner[1]'
        if r < 0.85:
            root[name] = [{'v': val}]
            return name + '.0.v'  # numeric dot segment indexes the array
        if r < 0.93:
            root[name] = {'0': val}
            return name + '.0'  # numeric dot segment as an object key
        root['k.' + name] = val
        return '["k.%s"]' % name


def gen_time(rng, base_ms, delta_ms):
    """An ISO 8601 text for base+delta in one of the accepted forms."""
    ms = base_ms + delta_ms
    secs, milli = divmod(ms, 1000)
    tm = time.gmtime(secs)
    r = rng.random()
    if r < 0.5:
        s = time.strftime('%Y-%m-%dT%H:%M:%S', tm)
        return s + ('.%03dZ' % milli if milli else 'Z')
    if r < 0.7:  # with an offset
        off = rng.choice([60, -90, 330, -480, 0])
        tm2 = time.gmtime(secs + off * 60)
        sign = '+' if off >= 0 else '-'
        oh, om = divmod(abs(off), 60)
        form = rng.choice(['%s%02d:%02d', '%s%02d%02d'])
        frac = '.%03d' % milli if milli else ''
        if milli and rng.random() < 0.3:
            frac = ',%03d%d' % (milli, rng.randint(0, 9))  # truncated beyond ms
        return time.strftime('%Y-%m-%dT%H:%M:%S', tm2) + frac + form % (sign, oh, om)
    if r < 0.8:
        s = time.strftime('%Y-%m-%d %H:%M:%S', tm)
        return s + ('.%03d' % milli if milli else '')  # no offset: UTC
    if r < 0.85:
        if milli == 0 and tm.tm_sec == 0:
            if tm.tm_hour == 0 and tm.tm_min == 0 and rng.random() < 0.5:
                return time.strftime('%Y-%m-%d', tm)  # date only: midnight UTC
            return time.strftime('%Y-%m-%dT%H:%M', tm) + rng.choice(['Z', '', '+00'])
        off = rng.choice([1, -2, 5])
        tm2 = time.gmtime(secs + off * 3600)
        return (time.strftime('%Y-%m-%dT%H:%M:%S', tm2) + ('.%03d' % milli if milli else '')
                + '%+03d' % off)
    s = time.strftime('%Y-%m-%dt%H:%M:%S', tm)
    return s + ('.%03d' % milli if milli else '') + 'z'


FUZZ_PIECES = ['kitten', 'sitting', 'Ａｂｃ', 'abc', 'ABC', 'ﬁle', 'file', 'Straße', 'strasse',
               'STRASSE', 'café', 'cafe\u0301', 'CAFÉ', '😀', '👍🏽', '👍', 'naïve', 'nai\u0308ve',
               ' ', '  ', '\t', '\n', '\u3000', '\u00a0', 'x', 'Ω', 'ω', 'Σίσυφος', 'ΣΊΣΥΦΟΣ',
               '①', '1', 'ｶ', 'カ', '', 'the quick', 'The  Quick', 'Ǆ', 'ǆ', 'Ⅻ', 'xii',
               'ǰ', 'J\u030c', 'İ', 'i\u0307', 'ẞ', 'ς', 'σ', 'ᾼ', 'αι', 'ﬃ', '㎏', 'kg', 'ｶﾞ', 'ガ',
               '\u1100\u1161', '가', '👨\u200d👩\u200d👧', '🇫🇷', '\x1f', '\x85', '\u2028',
               '\u200b', '\ufeff', 'ŉ', 'Ⓐ', '…', '½', 'K', 'µ', 'ſ', '\u0000']


def gen_string(rng):
    return ''.join(rng.choice(FUZZ_PIECES) for _ in range(rng.randint(0, 4)))


def rand_decimal(rng, places=None):
    places = rng.choice([0, 1, 2, 3]) if places is None else places
    return float(Decimal(rng.randint(-5000, 5000)) / (10 ** places))


WORDS = ['root', 'cause', 'Root-Cause', 'outage', 'DOWNTIME', 'roll_back', 'the', 'The', 'fox',
         'cat', 'concat', 'colour', 'color', '42', ' 42 ', '42.0', '-1.50', '01', 'e1001', 'E1001',
         'U.S.A.', 'usa', 'naïve', 'Straße', 'STRASSE', 'ﬁle', 'café', 'cafe\u0301', 'x', 'y',
         'well-known', 'well known', '“quoted”', 'a,b', 'Ω', '12', '345', 'ab', 'abbc', 'yz']
ASCII_WORDS = [w for w in WORDS if all(ord(c) < 128 for c in w)]
NORM_STEPS = ['nfkc', 'casefold', 'separators', 'punctuation', 'whitespace', 'trim', 'numeric']
REGEXES = ['ab+c', '^the', 'fox$', '[0-9]{2,3}', 'x|yz', 'colou?r', '(ab)+c', r'\bcat\b',
           r'^\d+$', 'e100[0-9]', '[a-c]{2}', 'o.t', r'\s\S', 'zzz']


def rand_text(rng, ascii_only=False):
    pool = ASCII_WORDS if ascii_only else WORDS
    seps = [' ', ' ', '  ', ', ', '-', '\t'] if ascii_only else [' ', ' ', '  ', ', ', '-', '\t', '\u3000']
    n = rng.choice([0, 1, 2, 3, 5, 8])
    out = ''
    for i in range(n):
        out += (rng.choice(seps) if i else '') + rng.choice(pool)
    return out


def rand_steps(rng, allow_numeric=True):
    st = [x for x in NORM_STEPS if rng.random() < 0.35 and (allow_numeric or x != 'numeric')]
    rng.shuffle(st)  # the order written does not matter
    return st


def rand_ramp(rng, d):
    r = rng.random()
    if r < 0.3:
        d['target'] = rng.choice([1, 2, 3, 5, 8, 20])
        return
    n = rng.randint(1, 4)
    xs = sorted(rng.sample(range(0, 30), n))
    pts = [[x, rng.choice([0, 0.25, 0.5, 1, 0.333333, 0.75, 1])] for x in xs]
    d['steps' if r < 0.55 else 'ramp'] = pts


def gen_v2(case, d):
    rng = case.rng
    prim = rng.choice(['text_length', 'term_coverage', 'regex_match', 'token_overlap', 'count',
                       'match_objects', 'match_objects', 'keyed_map', 'keyed_map'])
    d['primitive'] = prim
    broken = rng.random() < 0.1
    if prim == 'text_length':
        a = rand_text(rng)
        if rng.random() < 0.5:
            d['unit'] = rng.choice(['words', 'chars', 'lines'])
            if d['unit'] == 'lines':   # blank lines, \r\n and a final newline count nothing
                a = rng.choice(['\n', '\r\n', '\n \n']).join(
                    rand_text(rng) for _ in range(rng.randint(0, 5))) + rng.choice(['', '\n'])
        rand_ramp(rng, d)
        g = MISSING
    elif prim == 'count':
        d['of'] = rng.choice(['length', 'distinct', 'unique_ratio', 'present'])
        pool = [1, 1.0, '1', 'a', 'A', ' a', None, True, {'k': 1}, [1]]
        if d['of'] == 'present':
            d['keys'] = rng.sample(['p', 'q', 'r', 's'], rng.randint(1, 4))
            a = {k: rng.choice([1, None, '', 0]) for k in rng.sample(['p', 'q', 'r', 't'], rng.randint(0, 4))}
        elif d['of'] == 'length' and rng.random() < 0.4:
            a = rng.choice([rand_text(rng), {'x': 1, 'y': 2}])
        else:
            a = [rng.choice(pool) for _ in range(rng.choice([0, 1, 3, 5, 9]))]
        if d['of'] != 'unique_ratio':
            rand_ramp(rng, d)
        if rng.random() < 0.3:
            d['normalize'] = rand_steps(rng)
        g = MISSING
    elif prim == 'regex_match':
        d['pattern'] = rng.choice(REGEXES)
        if rng.random() < 0.3:
            d['case_insensitive'] = True
        if rng.random() < 0.2:
            d['normalize'] = rand_steps(rng, False)
        a = rand_text(rng, ascii_only=True).replace('\t', ' ')
        g = MISSING
    elif prim == 'term_coverage':
        ascii_only = rng.random() < 0.5
        a = rand_text(rng, ascii_only)
        if rng.random() < 0.2:
            a = [rand_text(rng, ascii_only) for _ in range(rng.randint(0, 3))]
        if rng.random() < 0.4:
            d['normalize'] = rand_steps(rng, False)
        if rng.random() < 0.7:
            terms = []
            for _ in range(rng.randint(1, 5)):
                pool = ASCII_WORDS if ascii_only else WORDS
                t = rng.choice([w for w in pool if w.strip()])
                if ascii_only and rng.random() < 0.3:
                    t = {'regex': rng.choice(REGEXES)}
                if rng.random() < 0.25:
                    t = [t, rng.choice([w for w in pool if w.strip()])]
                terms.append(t)
            d['terms'] = terms
            g = MISSING
        else:
            g = [rng.choice(WORDS) for _ in range(rng.randint(0, 4))]
        if rng.random() < 0.2:
            d['need'] = rng.randint(1, 3)
    elif prim == 'token_overlap':
        a, g = rand_text(rng), rand_text(rng)
        if rng.random() < 0.3:
            g = gen_string(rng)
        if rng.random() < 0.6:
            d['method'] = rng.choice(['recall', 'precision', 'f1', 'jaccard'])
        if rng.random() < 0.3:
            d['normalize'] = rand_steps(rng, False)
    elif prim == 'match_objects':
        ids = [1, 2, 3, '1', 'A', 'a', 'b ', 2.0]
        def obj():
            o = {}
            if rng.random() < 0.93:
                o['id'] = rng.choice(ids)
            if rng.random() < 0.9:
                o['v'] = rng.choice(['x', 'X', ' x', 'y', 1, 'Straße', 'strasse'])
            if rng.random() < 0.9:
                o['n'] = rng.choice([1, 1.4, 2, 0.5, 'n'])
            return o
        g = [obj() for _ in range(rng.choice([0, 1, 2, 3, 5]))]
        a = [obj() for _ in range(rng.choice([0, 1, 2, 3, 6]))]
        if rng.random() < 0.4:
            a = [dict(x) for x in g] + a[:1]
        if rng.random() < 0.1:
            a.append('not an object')
        d['match_on'] = 'id' if rng.random() < 0.7 else ['id']
        if rng.random() < 0.4:
            d['normalize'] = rand_steps(rng)
        if rng.random() < 0.7:
            d['method'] = rng.choice(['recall', 'precision', 'f1', 'mean'])
        if rng.random() < 0.7:
            fields = []
            if rng.random() < 0.8:
                f = {'primitive': 'exact_match', 'field': 'v'}
                if rng.random() < 0.5:
                    f['normalize'] = rand_steps(rng)
                if rng.random() < 0.5:
                    f['weight'] = rng.choice([0.5, 0.25, 1, 0.333333])
                fields.append(f)
            if rng.random() < 0.6:
                f = {'primitive': 'numeric_tolerance', 'field': 'n', 'tolerance': 0.5}
                if rng.random() < 0.5:
                    f['weight'] = rng.choice([0.5, 0.75, 1])
                fields.append(f)
            d['fields'] = fields
    else:  # keyed_map
        keys = ['q1', 'q2', 'q3', 'q4', 'q5']
        g = {k: rng.choice(['4', 4, 'yes', 'Yes', 2.5, 'x']) for k in rng.sample(keys, rng.randint(0, 5))}
        a = {k: rng.choice(['4', 4, ' yes', 'YES', 2.6, 'y', 4.0]) for k in rng.sample(keys, rng.randint(0, 5))}
        for k in g:
            if rng.random() < 0.5:
                a[k] = g[k]
        if rng.random() < 0.3:
            d['keys'] = rng.sample(keys, rng.randint(1, 3))
        if rng.random() < 0.6:
            it = {'primitive': 'exact_match'}
            if rng.random() < 0.7:
                it['normalize'] = rand_steps(rng)
        else:
            it = {'primitive': 'numeric_tolerance', 'tolerance': rng.choice([0.5, 0.01])}
        d['item'] = it
    if broken:
        r = rng.random()
        if r < 0.4:
            a = MISSING
        elif r < 0.7:
            a = rng.choice([5, None, True, {'z': 1}, 'str'])
        elif g is not MISSING:
            g = rng.choice([MISSING, 5, 'str', None])
    if g is MISSING and prim in ('text_length', 'regex_match', 'count') or \
            (prim == 'term_coverage' and 'terms' in d):
        case.nf += 1
        if rng.random() < 0.2 and a is not MISSING:
            case.metadata['m%d' % case.nf] = a
            d['field'] = '@metadata.m%d' % case.nf
        else:
            d['field'] = case._place(case.answer, 'f%d' % case.nf, a)
    else:
        d['field'], d['ground_truth_field'] = case.place(a, g)
        if rng.random() < 0.15 and not d['ground_truth_field'].startswith('['):
            d['ground_truth_field'] = '@ground_truth.' + d['ground_truth_field']
    return d


def gen_dim(case, key, weight):
    d = gen_dim0(case, key, weight)
    if case.rng.random() < 0.15:
        v3_fields(case, d)
    return d


def v3_fields(case, d):
    """Rewrites a dimension's plain fields into v3 projections and joined fields holding the
    same values (so the score is unchanged), or sometimes unreadable ones (common/README.md
    "Projection and joined fields")."""
    rng = case.rng
    f, g = d.get('field'), d.get('ground_truth_field')
    if isinstance(f, str) and f in case.answer and rng.random() < 0.6:
        v = case.answer[f]
        if isinstance(v, str):   # two halves joined with no separator: the same text
            k = rng.randint(0, len(v))
            case.answer[f + '_a'], case.answer[f + '_b'] = v[:k], v[k:]
            if rng.random() < 0.1:
                case.answer[f + '_b'] = rng.choice([1, None, ['x']])
            d['field'] = [f + '_a', f + '_zz', f + '_b']
            d['separator'] = ''
            if rng.random() < 0.3:   # a real separator: a different text
                d['separator'] = rng.choice([' ', '\n', ' / '])
        elif isinstance(v, list) or rng.random() < 0.1:
            items = [{'v': x} for x in v] if isinstance(v, list) else v
            if isinstance(items, list) and rng.random() < 0.5:
                items.insert(rng.randint(0, len(items)), {'w': 1})
            case.answer[f] = items
            d['field'] = f + '[*].v'
    f = d.get('field')
    if isinstance(f, str) and f in case.answer and rng.random() < 0.2:   # n or {count: n}
        d['unwrap'] = 'count'
        if rng.random() < 0.7:
            case.answer[f] = rng.choice([{'count': case.answer[f], 'items': []}, {'n': 1}])
    if isinstance(g, str) and g in case.gt and isinstance(case.gt[g], list) and \
            rng.random() < 0.6:
        case.gt[g] = [{'v': {'x': x}} for x in case.gt[g]] + [{'u': 0}]
        d['ground_truth_field'] = g + '[*].v.x'


def gen_dim0(case, key, weight):
    rng = case.rng
    if rng.random() < V2_SHARE:
        return gen_v2(case, {'key': key, 'weight': weight})
    prim = rng.choice(['exact_match', 'exact_match', 'exact_match_ratio', 'exact_match_ratio',
                       'numeric_tolerance', 'numeric_tolerance', 'numeric_tolerance',
                       'fuzzy_string', 'fuzzy_string', 'time_decay', 'time_decay',
                       'coverage_ratio', 'set_overlap', 'set_overlap', 'token_efficiency',
                       'call_efficiency', 'expression', 'expression'])
    d = {'key': key, 'weight': weight, 'primitive': prim}
    broken = rng.random() < 0.12  # a missing or ill-typed value

    def vals(a, g):
        if broken:
            r = rng.random()
            if r < 0.3:
                a = MISSING
            elif r < 0.5:
                g = MISSING
            elif r < 0.75:
                a = rand_scalar(rng) if isinstance(a, (list, str, int, float)) else 'oops'
            else:
                g = rng.choice(['oops', None, True, {}, 3])
        return a, g

    if prim == 'exact_match':
        g = rand_json(rng)
        a = perturb(rng, g) if rng.random() < 0.7 else rand_json(rng)
        if rng.random() < 0.2:
            g, a = rng.choice(WORDS), rng.choice(WORDS)
            d['normalize'] = rand_steps(rng)
        if rng.random() < 0.3:
            d['case_insensitive'] = rng.random() < 0.7
        a, g = vals(a, g)
        d['field'], d['ground_truth_field'] = case.place(a, g)
    elif prim == 'exact_match_ratio':
        n = rng.choice([0, 0, 1, 2, 3, 4, 5, 8, 16, 7])
        if rng.random() < 0.03:
            n = 2000
        g = [rng.choice([1, 2, 'a', 'A', True, None, 1.5, [1], {'a': 1}]) for _ in range(n)]
        a = [perturb(rng, x) if rng.random() < 0.3 else x for x in g]
        if n == 2000:
            a[rng.randrange(n)] = 'miss'
        r = rng.random()
        if r < 0.2:
            a = a[:rng.randint(0, len(a))]
        elif r < 0.35:
            a = a + [1, 2]
        elif r < 0.4:
            a = []
        a, g = vals(a, g)
        d['field'], d['ground_truth_field'] = case.place(a, g)
    elif prim == 'numeric_tolerance':
        tol = rng.choice([None, 0.01, 0, 0.5, 1, 0.001, 0.1, 2.5, 0.000001, 3, 0.05])
        if tol is not None:
            d['tolerance'] = tol
        t = exact(tol if tol is not None else 0.01)
        if rng.random() < 0.4:
            d['decay'] = rng.choice(['none', 'linear', 'linear'])

        def pair():
            b = rand_decimal(rng)
            k = rng.choice([0, 1, 1, -1, 2, 3, 5, Fraction(1, 2), Fraction(3, 2), Fraction(7, 4)])
            off = t * k if t else Fraction(rng.choice([0, 0, 1, -1]), 1000)
            if rng.random() < 0.2:
                off += Fraction(rng.choice([1, -1]), 10 ** rng.choice([3, 4, 6, 7]))
            if rng.random() < 0.06:  # exponents far apart: exact arithmetic beyond 128 bits
                b = rng.choice([0.01, 0.03, 1e300, 1e-300, 5e-324, 1.7976931348623157e308,
                                9007199254740993, 0])
                off = rng.choice([Fraction(0), t, -t, Fraction(1, 10 ** 40), -Fraction(1, 10 ** 40),
                                  t + Fraction(1, 10 ** 40), t - Fraction(1, 10 ** 40)])
                if rng.random() < 0.5:
                    d['tolerance'] = rng.choice([0.01, 1e300, 1e-300, 5e-324])
                    return rng.choice([-1e-40, 1e-40, 0.02, -0.01, 3e300, 1e-300, 0]), b
            a = exact(b) + off
            av = float(Decimal(a.numerator) / Decimal(a.denominator)) if rng.random() < 0.9 \
                else float(a)
            if rng.random() < 0.1:
                b, av = 1.0, 1.01
                d['tolerance'] = 0.01
            if av == int(av) and abs(av) < 1e15 and rng.random() < 0.5:
                av = int(av)
            return av, b
        if rng.random() < 0.35:
            n = rng.choice([0, 1, 2, 3, 4, 6])
            ps = [pair() for _ in range(n)]
            a = [p[0] for p in ps]
            g = [p[1] for p in ps]
            r = rng.random()
            if r < 0.1:
                a = a[:-1]
            elif r < 0.2:
                a = a + [9]
            elif r < 0.3 and a:
                a[rng.randrange(len(a))] = rng.choice(['1', None, True, [1]])
            elif r < 0.35 and g:
                g[rng.randrange(len(g))] = 'x'
            elif r < 0.4:
                a = a[0] if a else 1  # scalar for an array
        else:
            a, g = pair()
            if rng.random() < 0.05:
                a = [a]
        a, g = vals(a, g)
        d['field'], d['ground_truth_field'] = case.place(a, g)
    elif prim == 'fuzzy_string':
        g = gen_string(rng)
        r = rng.random()
        if r < 0.3:
            a = g
        elif r < 0.5:
            a = g.upper()
        else:
            a = gen_string(rng)
        a, g = vals(a, g)
        if rng.random() < 0.05:
            a = 5
        d['field'], d['ground_truth_field'] = case.place(a, g)
    elif prim == 'time_decay':
        if rng.random() < 0.5:
            d['time_limit_secs'] = rng.choice([300, 60, 1, 7200, 0.5, 90.5, 3600])
        if rng.random() < 0.4:
            d['curve'] = rng.choice([1, 2, 0.5, 3, 1.5, 1.0, 2.0])
    elif prim in ('coverage_ratio', 'set_overlap'):
        pool = [1, 1.0, 2, '1', 'a', 'A', True, None, {'a': 1, 'b': 2}, {'b': 2.0, 'a': 1},
                [1, 2], [2, 1], 'x', 'y', 'z', 3, -0.0, 0]
        g = [rng.choice(pool) for _ in range(rng.choice([0, 0, 1, 2, 3, 4, 6, 16]))]
        a = [rng.choice(pool) for _ in range(rng.choice([0, 0, 1, 2, 3, 5]))]
        if rng.random() < 0.3:
            a = list(g) + a[:1]
        if prim == 'set_overlap' and rng.random() < 0.7:
            d['method'] = rng.choice(['jaccard', 'intersection', 'recall', 'precision', 'f1'])
        if rng.random() < 0.2:
            a = [rng.choice(WORDS) for _ in range(rng.randint(0, 4))]
            g = [rng.choice(WORDS) for _ in range(rng.randint(0, 4))]
            d['normalize'] = rand_steps(rng)
        a, g = vals(a, g)
        d['field'], d['ground_truth_field'] = case.place(a, g)
    elif prim in ('token_efficiency', 'call_efficiency'):
        mk = 'token_count' if prim == 'token_efficiency' else 'llm_call_count'
        case.eff_keys.add(mk)
    elif prim == 'expression':
        gen_expression(case, d)
    return d


def gen_expression(case, d):
    rng = case.rng
    names = rng.sample(['q', 'steps', 'total', 'retries', 'declared', 'timeouts', 'hard', 'x1'],
                       rng.randint(0, 4))
    vars_ = {}
    for nm in names:
        where = rng.random()
        val = rng.choice([0, 1, 2, 3, 4, 0.9, 0.5, 0.25, 0.1, 10, -1, True, False, 1.5])
        if rng.random() < 0.06:
            val = rng.choice([MISSING, 'str', None, [1]])
        case.nf += 1
        if where < 0.5:
            path = 'e%d' % case.nf
            if val is not MISSING:
                case.answer[path] = val
        elif where < 0.75:
            path = 'metadata.e%d' % case.nf
            if val is not MISSING:
                case.metadata['e%d' % case.nf] = val
        else:
            path = 'ground_truth.e%d' % case.nf
            if val is not MISSING:
                case.gt['e%d' % case.nf] = val
        form = rng.random()
        if where < 0.5 and form < 0.1:   # v3: a type test
            if rng.random() < 0.5:
                case.answer[path] = rng.choice(['s', {'k': 1}, [1], None, 2, True])
            path = {'path': path, 'type': rng.choice(['string', 'number', 'boolean', 'null',
                                                      'array', 'object', ['object', 'array'],
                                                      ['string', 'null']])}
        elif where < 0.5 and form < 0.2:   # v3: a polymorphic value, n or {count: n}
            if val is not MISSING and rng.random() < 0.6:
                case.answer[path] = rng.choice([{'count': val}, {'n': val}, {'count': {'x': 1}}])
            path = {'path': path, 'unwrap': 'count'}
            if rng.random() < 0.5:
                path['default'] = rng.choice([0, 1, 2.5])
        vars_[nm] = path

    def leaf():
        if names and rng.random() < 0.6:
            return rng.choice(names)
        return rng.choice(['0', '1', '2', '0.1', '0.5', '0.2', '3', '10', '0.75', '1.5', '.5', '2.',
                           '1e-1', '2.5E+2', '5e-4', '007', '0.0005', '0.9995', '0.3', '0.7',
                           '3.3', '1e-3', '0.6745', '1e30'])

    def gen(depth):
        if depth > 4 or rng.random() < 0.3:
            return leaf()
        r = rng.random()
        if r < 0.55:
            op = rng.choice(['+', '-', '*', '/', '/', '*', '\u00d7', '\u00f7', '\u2212'])
            a, b = gen(depth + 1), gen(depth + 1)
            return ('(%s %s %s)' if rng.random() < 0.6 else '%s %s %s') % (a, op, b)
        if r < 0.7:
            args = [gen(depth + 1) for _ in range(rng.choice([1, 2, 2, 3, 4]))]
            return '%s(%s)' % (rng.choice(['min', 'max']), ', '.join(args))
        if r < 0.78:
            return 'clamp(%s, %s, %s)' % (gen(depth + 1), leaf(), leaf())
        if r < 0.9:
            return '(%s %s %s)' % (gen(depth + 1), rng.choice(['<', '<=', '>', '>=', '==', '!=']),
                                   gen(depth + 1))
        return '-%s' % gen(depth + 1) if rng.random() < 0.5 else '(-%s)' % gen(depth + 1)

    r = rng.random()
    if r < 0.12:
        # exactness probes: a sum or product of decimals compared with its exact value (binary
        # floating point gets most of them wrong), scaled so the comparison decides the score
        x = Fraction(rng.randint(1, 999), rng.choice([10, 100, 1000]))
        y = Fraction(rng.randint(1, 999), rng.choice([10, 100, 1000]))
        op = rng.choice(['+', '-', '*'])
        z = x + y if op == '+' else x - y if op == '-' else x * y
        txt = lambda q: str(Decimal(q.numerator) / Decimal(q.denominator))
        e = '(%s %s %s == %s) * %s' % (txt(x), op, txt(y), txt(z), rng.choice(['1', '0.5', '0.25']))
    elif r < 0.15 and len(names) >= 3:
        a, b, c = names[:3]
        e = '%s * %s / %s' % (a, b, c)
    elif r < 0.25 and len(names) >= 4:
        a, b, c, e4 = names[:4]
        e = '1 - 0.1*max(0, %s - %s) - 0.2*%s - 0.5*%s' % (a, b, c, e4)
    else:
        e = gen(0)
    d['expr'] = e
    if vars_ or rng.random() < 0.5:
        d['vars'] = vars_


def gen_case(rng, idx):
    case = Case(rng, idx)
    case.eff_keys = set()
    n = rng.choice([1, 1, 2, 3, 3, 4, 4, 5, 6, 10, 16])
    keys = rng.sample(KEYS, n)
    weights = rand_weights(rng, n)
    dims = [gen_dim(case, k, w) for k, w in zip(keys, weights)]
    # gates: only towards dimensions earlier in a random order (no cycles)
    order = list(range(n))
    rng.shuffle(order)
    for pos, i in enumerate(order):
        if pos > 0 and rng.random() < 0.2:
            tgt = dims[rng.choice(order[:pos])]['key']
            dims[i]['gate'] = {'dimension': tgt,
                               'above': rng.choice([700, 0, 500, 999, -1, 499.5, 1000, 333])}
    spec = {'evaluator': 'deterministic', 'dimensions': dims}
    if rng.random() < 0.25:
        spec['total'] = rng.choice(['round_each', 'round_each', 'floor'])
    r = rng.random()
    if r < 0.5:
        win = rng.choice([700, 500, 1000, 0, 650.5, 823])
        draw = rng.choice([400, 0, 100, 399.5, 650.5])
        draw = min(draw, win)
        th = {'win': win, 'draw': draw}
        if draw <= 400 <= win and rng.random() < 0.3:
            del th['draw']
        spec['thresholds'] = th
    cons = {}
    for ck in ('token_budget', 'max_llm_calls', 'max_tool_calls'):
        if rng.random() < 0.5:
            cons[ck] = rng.choice([0, 10, 40, 1000, 200000, 5.0])
    if cons or rng.random() < 0.2:
        spec['constraints'] = cons

    # match
    base = 1714557600000 + rng.randint(0, 86400000 * 400)
    if rng.random() < 0.1:
        base -= base % 86400000  # midnight: date-only and hh:mm forms
    delta = rng.choice([0, 66000, 150000, 299999, 300000, 300001, -5000, 1234, 45500, 60000,
                        rng.randint(0, 8000000)])
    m = {}
    r = rng.random()
    if r < 0.9:
        m['started_at'] = gen_time(rng, base, 0)
        m['submitted_at'] = gen_time(rng, base, delta)
    elif r < 0.95:
        m['started_at'] = gen_time(rng, base, 0)
    if rng.random() < 0.8:
        m['time_limit_secs'] = rng.choice([300, 60, 3600, 1, 86400])
    if rng.random() < 0.5:
        m['memoryless'] = rng.random() < 0.5
        m['attempt_number'] = rng.randint(1, 3)
    case.match = m if m or rng.random() < 0.5 else None

    # metadata: counts and the replay log
    md = case.metadata
    for mk in ('token_count', 'llm_call_count', 'tool_call_count'):
        r = rng.random()
        if r < 0.6 or mk in case.eff_keys and r < 0.85:
            md[mk] = rng.choice([0, 5, 10, 10.0, 40, 41, 250, 1000, 1001, 200000, 250000,
                                 2.5, -1, 7, 333])
        elif r < 0.7:
            md[mk] = rng.choice(['5', None, True, [1]])
    if rng.random() < 0.7:
        log = []
        for _ in range(rng.randint(0, 4)):
            rr = rng.random()
            if rr < 0.75:
                dt = rng.choice([-5000, -5001, 0, 1000, delta, delta + 5000, delta + 5001,
                                 rng.randint(-4000, max(0, delta) + 4000)])
                log.append({'ts': gen_time(rng, base, dt), 'tool': 'x'})
            elif rr < 0.85:
                log.append({'tool': 'no ts'})
            elif rr < 0.92:
                log.append({'ts': 'yesterday'})
            else:
                log.append('not an object')
        md['replay_log'] = log if rng.random() < 0.95 else {'ts': 'x'}
    sub = {'answer': case.answer}
    if md or rng.random() < 0.5:
        sub['metadata'] = md
    return spec, sub, case.gt, case.match


V3S_SHARE = float(os.environ.get("SCORE_DIFF_V3S_SHARE", "0.2"))  # specs given a scan dimension
SCAN_EXPRS = ['min(1, A / 10)', 'A / max(1, B)', 'clamp(A * 0.1 + B * 0.2, 0, 1)',
              '(A >= 2) * 0.5 + 0.5 * (B == 0)', 'max(A, B) / 7', '1 - 0.1 * A', 'A * B / 20']


def v3_scans(rng, spec, sub, gt):
    """common/README.md "Filter and scan": some specs get one dimension replaced by an
    expression over filter-and-scan vars on a random array of records in the answer (statuses,
    numbers, missing and ill-typed fields), tests against literals, lists, types and
    ground-truth values. Its own generator, so the cases generated before stay the same."""
    if rng.random() >= V3S_SHARE:
        return spec, sub, gt
    spec, sub, gt = copy.deepcopy(spec), copy.deepcopy(sub), copy.deepcopy(gt)
    recs = []
    for _ in range(rng.choice([0, 1, 3, 5, 8, 12])):
        r = {}
        if rng.random() < 0.9:
            r['status'] = rng.choice(['pass', 'fail', 'skip', 'pass', None, 1, 'PASS'])
        if rng.random() < 0.93:
            r['score'] = rng.choice([1, 2, 2.5, 0.1, 0.2, 3, -3, 10, 7, 'x', True, 2.0])
        if rng.random() < 0.5:
            r['kind'] = rng.choice(['a', 'b', ['a'], {'k': 1}])
        recs.append(r if rng.random() < 0.95 else rng.choice([5, 'str', None]))
    arrname = 'sc_runs'
    if rng.random() < 0.9:
        sub['answer'][arrname] = recs
    elif rng.random() < 0.5:
        sub['answer'][arrname] = {'not': 'an array'}
    gt['sc_status'] = rng.choice(['pass', 'fail', 1, None])
    vars_ = {}
    names = []
    for k in range(rng.choice([1, 2, 2, 3])):
        red = rng.choice(['count', 'count', 'sum', 'min', 'max', 'new_best', 'sorted',
                          'in_order'])
        v = {'path': arrname, 'reduce': red}
        tests = []
        for _ in range(rng.choice([0, 1, 1, 2])):
            r = rng.random()
            t = {'field': rng.choice(['status', 'status', 'kind', 'score'])}
            if r < 0.35:
                t['equals'] = rng.choice(['pass', 'fail', 1, None, ['a'], {'k': 1}])
            elif r < 0.55:
                t['equals_path'] = rng.choice(['@ground_truth.sc_status', '@ground_truth.nope'])
            elif r < 0.75:
                t['in'] = rng.sample(['pass', 'fail', 'skip', 1, None], rng.randint(0, 3))
            else:
                t['type'] = rng.choice(['string', 'number', 'boolean', 'null', 'array',
                                        'object'])
            if rng.random() < 0.2:
                t['not'] = True
            if rng.random() < 0.1:
                del t['field']
            tests.append(t)
        if red != 'count':
            v['of'] = 'score'
            if rng.random() < 0.7:   # mostly numbers only, so most scans have a value
                tests.append({'field': 'score', 'type': 'number'})
        if tests:
            v['where'] = tests[0] if len(tests) == 1 and rng.random() < 0.5 else tests
        if red in ('new_best', 'sorted', 'in_order') and rng.random() < 0.4:
            v['order'] = rng.choice(['ascending', 'descending'])
        if rng.random() < 0.2:
            v['default'] = rng.choice([0, 1, 2.5])
        vars_['s%d' % k] = v
        names.append('s%d' % k)
    e = rng.choice(SCAN_EXPRS)
    for x in 'AB':
        e = e.replace(x, rng.choice(names))
    dims = spec['dimensions']
    j = rng.randrange(len(dims))
    nd = {k: v for k, v in dims[j].items() if k in ('key', 'weight', 'gate')}
    nd.update(primitive='expression', expr=e, vars=vars_)
    dims[j] = nd
    return spec, sub, gt


V3D_SHARE = float(os.environ.get("SCORE_DIFF_V3D_SHARE", "0.3"))  # specs given v3 dimensions

COMPOSITE_EXPRS = ['max(A, B)', 'min(1, A + B)', 'A * (1 - 0.25 * (1 - B))', '(A + B) / 2 - 0.1',
                   'clamp(A - 0.3 * (B < 0.5), 0, 1)', 'A * 0.7 + 0.3 * B',
                   'max(A, 0.7 * B) - 0.1 * (1 - C)', 'min(A, B, C) * 1.5', 'A / 3 + B / 7',
                   'A * B * C', '(A >= 0.5) * 0.6 + 0.4 * C', '1 - A']
PART_DROP = ('key', 'name', 'weight', 'gate', 'helper', 'full_score')


def v3_dims(rng, spec):
    """common/README.md "Composite dimensions", "Helper dimensions" and "Points": some specs get
    helper copies of their dimensions (now and then gated on), one or two dimensions become
    composites (the other dimensions' primitives as parts, other dimensions' scores as reads,
    so more than 16 dimensions and gates through composites occur) and expressions get points.
    Its own generator, so the cases generated before stay the same."""
    if rng.random() >= V3D_SHARE:
        return spec
    spec = copy.deepcopy(spec)
    dims = spec['dimensions']
    for h in range(rng.choice([0, 1, 1, 2])):
        src = rng.choice(dims)
        hd = {k: v for k, v in src.items() if k not in PART_DROP}
        hd['key'] = 'helper%d' % h
        hd['helper'] = True
        if rng.random() < 0.3:
            hd['weight'] = 0
        dims.insert(rng.randint(0, len(dims)), hd)
        for d in dims:
            if d is not hd and 'gate' not in d and rng.random() < 0.15:
                d['gate'] = {'dimension': hd['key'], 'above': rng.choice([0, 499.5, 700])}
    byk = {d['key']: d for d in dims}

    def reaches(a, b, seen=None):   # does a depend on b (gates, reads)?
        seen = seen or set()
        if a == b:
            return True
        if a in seen:
            return False
        seen.add(a)
        d = byk[a]
        nxt = composite_reads(d) + ([d['gate']['dimension']] if d.get('gate') else [])
        return any(reaches(x, b, seen) for x in nxt)
    for _ in range(rng.choice([1, 1, 2])):
        j = rng.randrange(len(dims))
        d = dims[j]
        names = []
        vars_ = {}
        sources = [x for x in dims if x is not d and x.get('primitive') != 'expression']
        for p in range(rng.choice([0, 1, 1, 2, 3]) if sources else 0):
            part = {k: v for k, v in rng.choice(sources).items() if k not in PART_DROP}
            vars_['p%d' % p] = part
            names.append('p%d' % p)
        refs = [x['key'] for x in dims if x is not d and not reaches(x['key'], d['key'])]
        for r in range(min(len(refs), rng.choice([0, 1, 1, 2]))):
            vars_['r%d' % r] = {'dimension': rng.choice(refs)}
            names.append('r%d' % r)
        if not names:
            part = {'primitive': 'time_decay'}
            vars_['p0'] = part
            names.append('p0')
        e = rng.choice(COMPOSITE_EXPRS)
        for x in 'ABC':
            e = e.replace(x, rng.choice(names))
        nd = {k: v for k, v in d.items() if k in ('key', 'weight', 'gate', 'helper')}
        nd.update(primitive='expression', expr=e, vars=vars_)
        dims[j] = byk[d['key']] = nd
    for d in dims:
        if d.get('primitive') == 'expression' and rng.random() < 0.4:
            d['full_score'] = rng.choice([1002, 1, 7, 999, 1001, 123456, 500])
            if rng.random() < 0.5:
                d['scale'] = rng.choice([d['full_score'], 1000, 0.5, 3])
    return spec


def seed_form(rng, spec):
    """Some specs in the seed's published form (common/README.md "The seed's spec form"): `type` for
    `evaluator`, `name` for a dimension's `key`, or `name` as a label beside `key`. Its own
    generator, so the cases generated before v3 stay the same."""
    if rng.random() >= 0.15:
        return spec
    spec = dict(spec)
    if rng.random() < 0.7:
        ev = spec.pop('evaluator')
        spec = dict([('type', ev)] + list(spec.items()))
    elif rng.random() < 0.5:
        spec['type'] = spec['evaluator']
    dims = []
    for d in spec['dimensions']:
        r = rng.random()
        if r < 0.5:
            d = {('name' if k == 'key' else k): v for k, v in d.items()}
        elif r < 0.6:
            d = dict(d, name='Label: ' + d['key'].upper())
        dims.append(d)
    spec['dimensions'] = dims
    return spec


def strip_missing(v):
    return v


# ---------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------

tmp = tempfile.mkdtemp(prefix="arbiter-diff-")


def write(path, obj):
    with open(path, 'w', encoding='utf-8') as f:
        f.write(json.dumps(obj, ensure_ascii=(len(path) % 2 == 0)))


def run_case(args):
    idx, spec, sub, gt, match = args
    d = os.path.join(tmp, 'c%s' % idx)
    os.mkdir(d)
    cmd = [BIN, 'score', '--spec', os.path.join(d, 'spec.json'),
           '--submission', os.path.join(d, 'submission.json')]
    write(os.path.join(d, 'spec.json'), spec)
    write(os.path.join(d, 'submission.json'), sub)
    if gt is not None:
        write(os.path.join(d, 'ground_truth.json'), gt)
        cmd += ['--ground-truth', os.path.join(d, 'ground_truth.json')]
    if match is not None:
        write(os.path.join(d, 'match.json'), match)
        cmd += ['--match', os.path.join(d, 'match.json')]
    p = subprocess.run(cmd, capture_output=True, timeout=60)
    return d, p.returncode, p.stdout.decode('utf-8', 'replace'), p.stderr.decode('utf-8', 'replace')


def differential():
    rng = random.Random(SEED)
    cases = []
    for i in range(NCASES):
        spec, sub, gt, match = gen_case(rng, i)
        spec, sub, gt = v3_scans(random.Random(SEED * 7717 + i), spec, sub, gt)
        spec = v3_dims(random.Random(SEED * 7919 + i), spec)
        spec = seed_form(random.Random(SEED * 1000003 + i), spec)
        cases.append((i, spec, sub, gt, match))
    t0 = time.time()
    with ThreadPoolExecutor(max_workers=max(2, (os.cpu_count() or 2) * 2)) as ex:
        results = list(ex.map(run_case, cases))
    elapsed = time.time() - t0
    nbad = 0
    for (i, spec, sub, gt, match), (d, rc, out, errtext) in zip(cases, results):
        prims = ','.join(sorted(set(x['primitive'] for x in spec['dimensions'])))
        if 'type' in spec or any('name' in x for x in spec['dimensions']):
            prims += ' seed form'
        for flag in ('helper', 'full_score'):
            if any(flag in x for x in spec['dimensions']):
                prims += ' ' + flag
        if any(isinstance(v, dict) and ('primitive' in v or 'dimension' in v)
               for x in spec['dimensions'] for v in (x.get('vars') or {}).values()):
            prims += ' composite'
        if any(isinstance(v, dict) and 'reduce' in v
               for x in spec['dimensions'] for v in (x.get('vars') or {}).values()):
            prims += ' scan'
        try:
            exp = reference_score(spec, sub, gt or {}, match)
        except Exception as e:  # a bug in the generator/reference
            ok(False, 'case %d (%s): reference raised %r' % (i, prims, e))
            continue
        if rc != 0:
            diffs = ['exit %d: %s' % (rc, errtext.strip())]
        else:
            diffs = compare(exp, out)
        good = ok(not diffs, 'case %d (%s)' % (i, prims),
                  '\n'.join(diffs) + '\ncase files: %s' % (KEEP or d))
        if not good:
            nbad += 1
            if KEEP:
                os.makedirs(KEEP, exist_ok=True)
                dst = os.path.join(KEEP, os.path.basename(d))
                shutil.rmtree(dst, ignore_errors=True)
                shutil.copytree(d, dst)
    print('# %d cases, %d differ, %.1f s running the binary' % (len(cases), nbad, elapsed))


# ---------------------------------------------------------------------------
# Spec language v3 (common/README.md "Spec language v3"): its own generator and seed, so the
# cases generated above stay what they were
# ---------------------------------------------------------------------------

V3_CASES = int(os.environ.get("SCORE_DIFF_V3_CASES", "800"))
V3_IDS = ['q1', 'q2', 'q3', 'Q1', ' q2', 7, 7.0, 1.5, 'x_e', True, None]


def gen_v3_dim(case, key, weight):
    rng = case.rng
    d = {'key': key, 'weight': weight}
    kind = rng.choice(['km_records', 'km_records', 'mo_keyed', 'mo_keyed', 'contains',
                       'contains', 'words', 'refs', 'relative'])
    if kind == 'km_records':
        d['primitive'] = 'keyed_map'
        side = rng.choice(['g', 'g', 'f', 'both'])
        spec = rng.choice(['id', {'path': 'id', 'suffix': '_e'}, {'path': 'id', 'prefix': 'p'},
                           {'path': 'id', 'prefix': 'q', 'suffix': 'x'}])
        ids = [rng.choice(V3_IDS) for _ in range(rng.randint(0, 5))]

        def rec(i):
            r = {'v': rng.choice(['a', 'A', 1, 1.2, 'b'])}
            if rng.random() < 0.9:
                r['id'] = i
            return r
        def built(i):
            t = key_text(i)
            if t is None:
                return 'none'
            if isinstance(spec, str):
                return t
            return spec.get('prefix', '') + t + spec.get('suffix', '')
        g_recs = [rec(i) for i in ids]
        a_recs = [rec(rng.choice(ids + ['zz'])) for _ in range(rng.randint(0, 5))]
        if side in ('g', 'both'):
            d['ground_truth_key'] = spec
            g = g_recs
        else:
            g = {built(i): rng.choice(['a', 1, 1.2]) for i in ids}
        if side in ('f', 'both'):
            d['field_key'] = spec
            a = a_recs
        else:
            a = {built(i): rng.choice(['a', 'A', 1, 1.25, 'b']) for i in ids + ['zz']
                 if rng.random() < 0.8}
        item = {'primitive': rng.choice(['exact_match', 'numeric_tolerance', 'text_contains'])}
        if item['primitive'] == 'numeric_tolerance':
            item['tolerance'] = 0.5
        if item['primitive'] == 'text_contains':
            item['contains_credit'] = rng.choice([0.7, 0.25])
        if 'field_key' in d:
            item['field'] = 'v'
        if 'ground_truth_key' in d:
            item['ground_truth_field'] = 'v'
        elif 'field_key' in d:
            item['ground_truth_field'] = '@element'
        if rng.random() < 0.3 and isinstance(g, dict) and g:
            d['keys'] = rng.sample(sorted(g), min(len(g), 2)) + ['nope']
        elif rng.random() < 0.2 and 'ground_truth_key' in d:
            d['keys'] = [built(rng.choice(V3_IDS))]
        d['item'] = item
    elif kind == 'mo_keyed':
        d['primitive'] = 'match_objects'
        on = rng.choice(['id', {'path': 'id', 'suffix': '_e'}, {'path': 'id', 'prefix': 'k'}])
        d['match_on'] = on
        fk, gk = rng.choice([(True, False), (False, True), (True, True), (False, False)])
        if fk:
            d['field_keyed'] = True
        if gk:
            d['ground_truth_keyed'] = True
        if rng.random() < 0.4:
            d['normalize'] = rng.choice([['casefold'], ['trim'], ['casefold', 'trim', 'numeric']])
        ids = [rng.choice(V3_IDS) for _ in range(rng.randint(0, 5))]

        def keyname(i):
            t = key_text(i)
            if t is None:
                return 'none'
            if isinstance(on, str):
                return t
            return on.get('prefix', '') + t + on.get('suffix', '')

        def side(keyed, n):
            pick = [rng.choice(ids + ['zz']) for _ in range(n)]
            if keyed:
                return {keyname(i): {'sev': rng.choice(['hi', 'HI', 'lo'])} for i in pick}
            out = []
            for i in pick:
                o = {'sev': rng.choice(['hi', 'HI', 'lo'])}
                if rng.random() < 0.9:
                    o['id'] = i
                out.append(o if rng.random() < 0.95 else 'not an object')
            return out
        a, g = side(fk, rng.randint(0, 5)), side(gk, rng.randint(0, 5))
        if rng.random() < 0.6:
            d['fields'] = [{'primitive': 'exact_match', 'field': 'sev',
                            'normalize': rng.choice([[], ['casefold']])}]
        if rng.random() < 0.6:
            d['method'] = rng.choice(['recall', 'precision', 'f1', 'mean', 'points', 'points',
                                      'distinct', 'distinct'])
            if d['method'] == 'points':
                d['points'] = rng.choice([250, 100, 33.333333, 0.5, 1000])
                d['max_points'] = rng.choice([1000, 150, 100, 1, 0.000001])
            if d['method'] == 'distinct':
                d['distinct_of'] = 'sev'
                rand_ramp(rng, d)
    elif kind == 'contains':
        d['primitive'] = 'text_contains'
        base = rng.choice(['Paris', 'paris, France', 'the root cause', 'root', 'Straße', ''])
        a = rng.choice([base, base.upper(), ' ' + base + ' ', base[:3], base + ' x', 'other'])
        g = rng.choice([base, 'paris', 'The root cause: cache', 'strasse', ''])
        if rng.random() < 0.5:
            d['normalize'] = rng.choice([['casefold'], ['casefold', 'trim'], ['nfkc', 'casefold',
                                                                              'punctuation']])
        if rng.random() < 0.5:
            d['direction'] = rng.choice(['either', 'answer_in_truth', 'truth_in_answer'])
        if rng.random() < 0.6:
            d['contains_credit'] = rng.choice([0.7, 0.5, 0, 0.333333])
        if rng.random() < 0.3:
            d['equal_credit'] = rng.choice([0.9, 1])
        if rng.random() < 0.05:
            a = 5
    elif kind == 'words':
        d['primitive'] = 'term_coverage'
        d['terms_from'] = 'words'
        a = rand_text(rng)
        g = rand_text(rng)
        if rng.random() < 0.4:
            d['normalize'] = rand_steps(rng, False)
        if rng.random() < 0.2:
            d['need'] = rng.randint(1, 3)
        if rng.random() < 0.05:
            g = ['not', 'a string']
    elif kind == 'relative':
        d['primitive'] = 'numeric_tolerance'
        d['relative'] = rng.choice([0.05, 0.1, 0, 0.5, 0.001, 1e-9, 2])
        if rng.random() < 0.3:
            d['tolerance'] = rng.choice([0, 0.01, 1, 0.5])
        if rng.random() < 0.4:
            d['decay'] = 'linear'

        def num():
            return rng.choice([100, 0, -100, 0.1, 1.5, 1e300, 1e-300, 95, 105, 104.99, 105.01,
                               -95, 110, 1e-7, 2, 7.5, 1.04e300, 0.3, 0.30000000000000004])
        if rng.random() < 0.5:
            a, g = num(), num()
        else:
            g = [num() for _ in range(rng.randint(0, 4))]
            a = [num() if rng.random() < 0.9 else 'x' for _ in range(rng.randint(0, 5))]
        if rng.random() < 0.05:
            a = 'x'
    else:   # refs
        d['primitive'] = 'term_coverage'
        a = rng.choice(['fixed CVE-2024-1 by patch', 'ticket #42 closed', 'db1.internal down',
                        'DB1.INTERNAL', 'nothing here'])
        case.nf += 1
        vals = {'cve': rng.choice(['2024-1', '2024-2', 7, 1.5, True, None]),
                'n': rng.choice([42, 42.0, '42', 4]), 'host': rng.choice(['db1', 'DB1'])}
        name = 'r%d' % case.nf
        if rng.random() < 0.9:
            case.gt[name] = vals
        terms = []
        for _ in range(rng.randint(1, 3)):
            r = rng.random()
            if r < 0.3:
                t = {'ground_truth': name + '.cve', 'prefix': 'CVE-'}
            elif r < 0.5:
                t = {'ground_truth': name + '.n', 'prefix': '#'}
            elif r < 0.7:
                t = {'ground_truth': '@ground_truth.' + name + '.host', 'suffix': '.internal'}
            elif r < 0.85:
                t = ['patch', {'ground_truth': name + '.host'}]
            else:
                t = rng.choice(['fixed', 'closed', 'down'])
            if rng.random() < 0.25:
                t = {'not': t}
            terms.append(t)
        d['terms'] = terms
        if rng.random() < 0.4:
            d['normalize'] = ['casefold']
        d['field'] = case._place(case.answer, 'f%d' % case.nf, a)
        return d
    d['field'], d['ground_truth_field'] = case.place(a, g)
    return d


def gen_v3_case(rng, idx):
    case = Case(rng, idx)
    n = rng.choice([1, 1, 2, 3])
    keys = rng.sample(KEYS, n)
    dims = [gen_v3_dim(case, k, w) for k, w in zip(keys, rand_weights(rng, n))]
    return {'evaluator': 'deterministic', 'dimensions': dims}, {'answer': case.answer}, case.gt


def differential_v3():
    rng = random.Random(SEED + 3)
    cases = [(('v3_%d' % i),) + gen_v3_case(rng, i) + (None,) for i in range(V3_CASES)]
    with ThreadPoolExecutor(max_workers=max(2, (os.cpu_count() or 2) * 2)) as ex:
        results = list(ex.map(run_case, cases))
    nbad = 0
    for (i, spec, sub, gt, match), (d, rc, out, errtext) in zip(cases, results):
        prims = ','.join(sorted(set(x['primitive'] for x in spec['dimensions'])))
        try:
            exp = reference_score(spec, sub, gt or {}, match)
        except Exception as e:  # a bug in the generator/reference
            ok(False, 'v3 case %s (%s): reference raised %r' % (i, prims, e))
            continue
        diffs = ['exit %d: %s' % (rc, errtext.strip())] if rc != 0 else compare(exp, out)
        if not ok(not diffs, 'v3 case %s (%s)' % (i, prims),
                  '\n'.join(diffs) + '\ncase files: %s' % (KEEP or d)):
            nbad += 1
            if KEEP:
                os.makedirs(KEEP, exist_ok=True)
                dst = os.path.join(KEEP, os.path.basename(d))
                shutil.rmtree(dst, ignore_errors=True)
                shutil.copytree(d, dst)
    print('# %d v3 cases, %d differ' % (len(cases), nbad))


# ---------------------------------------------------------------------------
# Fixed cases: specific edges of the contract, checked against the reference
# and against literal expected scores
# ---------------------------------------------------------------------------

def fixed_cases():
    M = {'started_at': '2024-05-01T10:00:00Z', 'submitted_at': '2024-05-01T10:01:06Z',
         'time_limit_secs': 300}

    def one(name, dim, answer, gt, want, match=M, metadata=None, spec_extra=None,
            want_warn=None):
        spec = {'evaluator': 'deterministic', 'dimensions': [dict(key='k', weight=1, **dim)]}
        spec.update(spec_extra or {})
        sub = {'answer': answer}
        if metadata is not None:
            sub['metadata'] = metadata
        d, rc, out, errtext = run_case(('fixed%d' % tap.count(), spec, sub, gt, match))
        exp = reference_score(spec, sub, gt, match)
        got = None
        try:
            got = json.loads(out)['score_breakdown']['k']['score']
        except (ValueError, KeyError, TypeError):
            pass
        diffs = compare(exp, out) if rc == 0 else ['exit %d: %s' % (rc, errtext)]
        if exp['breakdown'][0][1] != want:
            diffs.append('reference says %d, the contract %d' % (exp['breakdown'][0][1], want))
        if got != want:
            diffs.append('arbiter says %r, the contract %d' % (got, want))
        if want_warn is not None:
            ws = [(w['severity'], w['field']) for w in json.loads(out)['submission_warnings']] \
                if rc == 0 else None
            if ws != want_warn:
                diffs.append('warnings %r, expected %r' % (ws, want_warn))
        ok(not diffs, 'fixed: %s -> %d' % (name, want), '\n'.join(diffs))

    F = dict(field='a', ground_truth_field='b')
    one('numeric 1.01 vs 1.00 tol 0.01', dict(primitive='numeric_tolerance', tolerance=0.01, **F),
        {'a': 1.01}, {'b': 1.00}, 1000)
    one('numeric 1.02 vs 1.00 tol 0.01', dict(primitive='numeric_tolerance', tolerance=0.01, **F),
        {'a': 1.02}, {'b': 1.00}, 0)
    one('numeric 0.3 vs 0.1+0.2 tol 0', dict(primitive='numeric_tolerance', tolerance=0, **F),
        {'a': 0.3}, {'b': 0.30000000000000004}, 0)
    one('numeric default tol 0.01 (100.01 vs 100)', dict(primitive='numeric_tolerance', **F),
        {'a': 100.01}, {'b': 100}, 1000)
    one('numeric tol 1e-9', dict(primitive='numeric_tolerance', tolerance=1e-9, **F),
        {'a': 1.000000001}, {'b': 1}, 1000)
    one('numeric tol 1e-9 beyond', dict(primitive='numeric_tolerance', tolerance=1e-9, **F),
        {'a': 1.000000002}, {'b': 1}, 0)
    one('numeric -1e-40 vs 0.01 tol 0.01 (just outside, exponents 38 digits apart)',
        dict(primitive='numeric_tolerance', tolerance=0.01, **F), {'a': -1e-40}, {'b': 0.01}, 0)
    one('numeric 1e-40 vs 0.01 tol 0.01 (just inside)',
        dict(primitive='numeric_tolerance', tolerance=0.01, **F), {'a': 1e-40}, {'b': 0.01}, 1000)
    one('numeric 1e300 vs -1e-300 tol 1e300 (just outside)',
        dict(primitive='numeric_tolerance', tolerance=1e300, **F), {'a': 1e300}, {'b': -1e-300}, 0)
    one('numeric linear arrays with subnormals and 1e308',
        dict(primitive='numeric_tolerance', tolerance=0.01, decay='linear', **F),
        {'a': [-1e-40, 5e-324, 1e308]}, {'b': [0.03, 0.02, 1e308]}, 750)
    one('numeric tol 5e-324', dict(primitive='numeric_tolerance', tolerance=5e-324, **F),
        {'a': [1e-323, 1e308, -1.7976931348623157e308]},
        {'b': [5e-324, 1e308, 1.7976931348623157e308]}, 667)
    one('numeric linear 1.015 vs 1', dict(primitive='numeric_tolerance', tolerance=0.01,
                                          decay='linear', **F), {'a': 1.015}, {'b': 1}, 875)
    one('numeric linear 1.05 vs 1 floor 0', dict(primitive='numeric_tolerance', tolerance=0.01,
                                                 decay='linear', **F), {'a': 1.06}, {'b': 1}, 0)
    one('numeric arrays 2 of 3', dict(primitive='numeric_tolerance', tolerance=0.01, **F),
        {'a': [1, 2.005, 3.5]}, {'b': [1, 2, 3]}, 667)
    one('numeric empty arrays', dict(primitive='numeric_tolerance', **F), {'a': []}, {'b': []}, 1000)
    one('numeric big integers', dict(primitive='numeric_tolerance', tolerance=0, **F),
        {'a': 9007199254740993}, {'b': 9007199254740992}, 0)
    one('numeric string is ill-typed', dict(primitive='numeric_tolerance', **F),
        {'a': '1'}, {'b': 1}, 0, want_warn=[('error', 'a')])
    one('exact_match 1 vs 1.0', dict(primitive='exact_match', **F), {'a': [1, {'x': 2}]},
        {'b': [1.0, {'x': 2.0}]}, 1000)
    one('exact_match true vs 1', dict(primitive='exact_match', **F), {'a': True}, {'b': 1}, 0)
    one('exact_match case sensitive', dict(primitive='exact_match', **F), {'a': 'Paris'},
        {'b': 'paris'}, 0)
    one('exact_match ci Straße', dict(primitive='exact_match', case_insensitive=True, **F),
        {'a': 'Straße'}, {'b': 'STRASSE'}, 1000)
    one('exact_match null is a value', dict(primitive='exact_match', **F), {'a': None},
        {'b': None}, 1000, want_warn=[])
    one('exact_match missing path', dict(primitive='exact_match', **F), {'z': 1}, {'b': 1}, 0,
        want_warn=[('error', 'a')])
    one('exact_match missing ground truth', dict(primitive='exact_match', **F), {'a': 1}, {}, 0,
        want_warn=[('error', 'ground_truth.b')])
    one('exact_match_ratio 1999/2000 half-up', dict(primitive='exact_match_ratio', **F),
        {'a': [1] * 1999 + [0]}, {'b': [1] * 2000}, 1000)
    one('exact_match_ratio 3/16 = 187.5', dict(primitive='exact_match_ratio', **F),
        {'a': [1] * 3}, {'b': [1] * 16}, 188)
    one('exact_match_ratio 1/2000 = 0.5', dict(primitive='exact_match_ratio', **F),
        {'a': [1]}, {'b': [1] * 2000}, 1)
    one('exact_match_ratio both empty', dict(primitive='exact_match_ratio', **F),
        {'a': []}, {'b': []}, 1000)
    one('exact_match_ratio expected empty', dict(primitive='exact_match_ratio', **F),
        {'a': [1]}, {'b': []}, 0)
    one('exact_match_ratio out of range index', dict(primitive='exact_match_ratio',
                                                     field='a[3]', ground_truth_field='b'),
        {'a': [[1]]}, {'b': [1]}, 0, want_warn=[('error', 'a[3]')])
    one('fuzzy kitten/sitting', dict(primitive='fuzzy_string', **F), {'a': 'kitten'},
        {'b': 'sitting'}, 571)
    one('fuzzy full-width', dict(primitive='fuzzy_string', **F), {'a': 'ＡＢＣ'}, {'b': 'abc'}, 1000)
    one('fuzzy ligature', dict(primitive='fuzzy_string', **F), {'a': 'ﬁle'}, {'b': 'FILE'}, 1000)
    one('fuzzy ß', dict(primitive='fuzzy_string', **F), {'a': 'Straße'}, {'b': 'STRASSE'}, 1000)
    one('fuzzy combining accent', dict(primitive='fuzzy_string', **F), {'a': 'cafe\u0301'},
        {'b': 'CAFÉ'}, 1000)
    one('fuzzy emoji', dict(primitive='fuzzy_string', **F), {'a': '👍🏽 ok'}, {'b': '👍 ok'}, 800)
    one('fuzzy whitespace', dict(primitive='fuzzy_string', **F), {'a': '  a \t\n b\u3000'},
        {'b': 'a b'}, 1000)
    one('fuzzy both empty', dict(primitive='fuzzy_string', **F), {'a': ' '}, {'b': ''}, 1000)
    one('time_decay 66 of 300', dict(primitive='time_decay'), {}, {}, 780)
    one('time_decay curve 2, 150 of 300', dict(primitive='time_decay', curve=2),
        {}, {}, 250, match=dict(M, submitted_at='2024-05-01T10:02:30Z'))
    one('time_decay own limit 132 s', dict(primitive='time_decay', time_limit_secs=132),
        {}, {}, 500)
    one('time_decay over the limit', dict(primitive='time_decay'), {}, {}, 0,
        match=dict(M, submitted_at='2024-05-01T10:06:00Z'))
    one('time_decay no times', dict(primitive='time_decay'), {}, {}, 0, match=None,
        want_warn=[('error', 'started_at')])
    one('coverage x,x,q vs x,y,z', dict(primitive='coverage_ratio', **F),
        {'a': ['x', 'x', 'q']}, {'b': ['x', 'y', 'z']}, 333)
    one('coverage expected empty', dict(primitive='coverage_ratio', **F), {'a': [1]}, {'b': []},
        1000)
    one('jaccard', dict(primitive='set_overlap', **F), {'a': ['a', 'b', 'c']},
        {'b': ['b', 'c', 'd']}, 500)
    one('intersection', dict(primitive='set_overlap', method='intersection', **F),
        {'a': ['a', 'b', 'c']}, {'b': ['b', 'c', 'd']}, 667)
    one('set items 1 == 1.0, objects by key', dict(primitive='set_overlap', **F),
        {'a': [1.0, {'y': 2, 'x': 1}]}, {'b': [1, {'x': 1, 'y': 2.0}]}, 1000)
    one('set both empty', dict(primitive='set_overlap', **F), {'a': []}, {'b': []}, 1000)
    V = {'replay_log': [{'ts': '2024-05-01T09:59:55Z'}, {'ts': '2024-05-01T10:01:11Z'}]}
    one('token_efficiency verified', dict(primitive='token_efficiency'), {}, {}, 750,
        metadata=dict(V, token_count=250), spec_extra={'constraints': {'token_budget': 1000}})
    one('token_efficiency unverified', dict(primitive='token_efficiency'), {}, {}, 0,
        metadata={'token_count': 250}, spec_extra={'constraints': {'token_budget': 1000}},
        want_warn=[])
    one('call_efficiency verified', dict(primitive='call_efficiency'), {}, {}, 750,
        metadata=dict(V, llm_call_count=10), spec_extra={'constraints': {'max_llm_calls': 40}})
    one('verified edge -5001 ms fails', dict(primitive='call_efficiency'), {}, {}, 0,
        metadata={'replay_log': [{'ts': '2024-05-01T09:59:54.999Z'}], 'llm_call_count': 10},
        spec_extra={'constraints': {'max_llm_calls': 40}})
    one('expression workflow success', dict(
        primitive='expression', expr='quality * steps_completed / total_steps',
        vars={'quality': 'quality', 'steps_completed': 'steps_completed',
              'total_steps': 'ground_truth.total_steps'}),
        {'quality': 0.9, 'steps_completed': 3}, {'total_steps': 4}, 675)
    one('expression reliability', dict(
        primitive='expression',
        expr='1 - 0.1*max(0, retries - declared_retries) - 0.2*timeouts - 0.5*hard_failures',
        vars={'retries': 'metadata.retries', 'declared_retries': 'metadata.declared',
              'timeouts': 'metadata.timeouts', 'hard_failures': 'metadata.hard'}),
        {}, {}, 600, metadata={'retries': 3, 'declared': 1, 'timeouts': 1, 'hard': 0})
    one('expression division by zero', dict(primitive='expression', expr='1 + a / b',
                                            vars={'a': 'a', 'b': 'b'}),
        {'a': 1, 'b': 0}, {}, 1000, want_warn=[('warning', 'k')])
    one('expression exponent literals', dict(primitive='expression', expr='2.5E+2 * 1e-3'),
        {}, {}, 250)
    one('expression variables warn in declared order', dict(
        primitive='expression', expr='z + a', vars={'z': 'metadata.z', 'a': 'a'}),
        {}, {}, 0, metadata={}, want_warn=[('error', 'metadata.z'), ('error', 'a')])
    one('every bad side warns: ill-typed answer, missing ground truth',
        dict(primitive='fuzzy_string', **F), {'a': 5}, {}, 0,
        want_warn=[('error', 'a'), ('error', 'ground_truth.b')])
    one('every bad side warns: both ill-typed', dict(primitive='set_overlap', **F),
        {'a': 'x'}, {'b': {'x': 1}}, 0, want_warn=[('error', 'a'), ('error', 'ground_truth.b')])
    one('expression comparison', dict(primitive='expression', expr='(a >= 2) * 0.5',
                                      vars={'a': 'a'}), {'a': 2}, {}, 500)
    one('expression clamp', dict(primitive='expression', expr='clamp(a, 0.25, 0.5)',
                                 vars={'a': 'a'}), {'a': 0.9}, {}, 500)

    # gates and totals
    spec = {'evaluator': 'deterministic', 'dimensions': [
        {'key': 'correctness', 'weight': 0.5, 'primitive': 'expression', 'expr': '0.9'},
        {'key': 'speed', 'weight': 0.2, 'primitive': 'expression', 'expr': '0.78'},
        {'key': 'methodology', 'weight': 0.15, 'primitive': 'expression', 'expr': '0.69'},
        {'key': 'completeness', 'weight': 0.15, 'primitive': 'expression', 'expr': '0.76'}]}
    d, rc, out, errtext = run_case(('seed823', spec, {'answer': {}}, {}, None))
    ok(rc == 0 and out.strip() == '{"score":823,"result":"win","score_breakdown":{"correctness":'
       '{"score":900,"weight":0.5,"weighted":450},"speed":{"score":780,"weight":0.2,"weighted":156},'
       '"methodology":{"score":690,"weight":0.15,"weighted":103.5},"completeness":{"score":760,'
       '"weight":0.15,"weighted":114}},"submission_warnings":[],"constraint_violations":[],'
       '"verified":false}', 'fixed: the seed example prints 823 win byte for byte', out + errtext)

    # composite, helper and points dimensions: the unit tests' table (test-score), each case
    # scored by the binary and by the reference, both against the table's totals
    with open(os.path.join('test', 'data', 'score_v3_dims_cases.json'), encoding='utf-8') as f:
        table = json.load(f)
    for c in table:
        sub = {'answer': c['answer']}
        if 'metadata' in c:
            sub['metadata'] = c['metadata']
        d, rc, out, errtext = run_case(('v3d%d' % tap.count(), c['spec'], sub, c['ground_truth'],
                                        c.get('match')))
        exp = reference_score(c['spec'], sub, c['ground_truth'], c.get('match'))
        diffs = compare(exp, out) if rc == 0 else ['exit %d: %s' % (rc, errtext)]
        if exp['score'] != c['score']:
            diffs.append('reference total %d, the table %d' % (exp['score'], c['score']))
        if {k: v for k, v, _, _ in exp['breakdown']} != c['dimensions']:
            diffs.append('reference dimensions %r, the table %r' % (exp['breakdown'], c['dimensions']))
        if ['%s:%s' % w for w in exp['warnings']] != c['warnings']:
            diffs.append('reference warnings %r, the table %r' % (exp['warnings'], c['warnings']))
        ok(not diffs, 'fixed v3 dimensions: %s' % c['name'], '\n'.join(diffs))


# ---------------------------------------------------------------------------
# Spec validation (common/README.md "Scoring spec"): every invalid-spec rule exits 2 naming the dimension
# and the rule; valid specs are accepted.
# ---------------------------------------------------------------------------

def validation_cases():
    def dim(key='correctness', weight=1, **kw):
        d = {'key': key, 'weight': weight, 'primitive': 'exact_match', 'field': 'a',
             'ground_truth_field': 'b'}
        d.update(kw)
        return {k: v for k, v in d.items() if v is not DROP}

    def spec(*dims, **kw):
        s = {'evaluator': 'deterministic', 'dimensions': list(dims)}
        s.update(kw)
        return {k: v for k, v in s.items() if v is not DROP}

    # (name, spec, None for valid | (dimension or None, [rule words, any of]))
    TD = dict(primitive='time_decay', field=DROP, ground_truth_field=DROP)
    NT = dict(primitive='numeric_tolerance')
    cases = [
        ('weights 0.1+0.2+0.7', spec(dim('a1', 0.1), dim('a2', 0.2), dim('a3', 0.7)), None),
        ('weights 0.333333+0.333334+0.333333',
         spec(dim('a1', 0.333333), dim('a2', 0.333334), dim('a3', 0.333333)), None),
        ('weights 10 x 0.1', spec(*[dim('w%d' % i, 0.1) for i in range(10)]), None),
        ('weights 16 x 0.0625', spec(*[dim('w%d' % i, 0.0625) for i in range(16)]), None),
        ('weights 32 x 0.03125', spec(*[dim('w%d' % i, 0.03125) for i in range(32)]), None),
        ('a helper without weight', spec(dim('a1', 1), dim('h1', DROP, helper=True)), None),
        ('a helper with a weight', spec(dim('a1', 0.5), dim('h1', 0.5, helper=True)),
         ('h1', ['helper', 'weight'])),
        ('full_score on exact_match', spec(dim('a1', 1, full_score=1002)), ('a1', ['full_score'])),
        ('full_score 0', spec(dim('a1', 1, primitive='expression', expr='1', full_score=0,
                              field=DROP, ground_truth_field=DROP)), ('a1', ['full_score'])),
        ('a composite reading a missing dimension',
         spec(dim('a1', 1, primitive='expression', expr='z', vars={'z': {'dimension': 'zz'}},
                  field=DROP, ground_truth_field=DROP)), ('a1', ['zz', 'exist'])),
        ('composites reading each other',
         spec(dim('a1', 0.5, primitive='expression', expr='z', vars={'z': {'dimension': 'a2'}},
                  field=DROP, ground_truth_field=DROP),
              dim('a2', 0.5, primitive='expression', expr='z', vars={'z': {'dimension': 'a1'}},
                  field=DROP, ground_truth_field=DROP)), ('a1', ['cycle'])),
        ('weights 0.000001 + 0.999999', spec(dim('a1', 0.000001), dim('a2', 0.999999)), None),
        ('weight 1.0', spec(dim('a1', 1.0)), None),
        ('key of 32 characters', spec(dim('a' + 'b' * 31)), None),
        ('a core key and other keys', spec(dim('success', 0.5), dim('x_1', 0.5)), None),
        ('every primitive', spec(
            dim('p1', 0.1), dim('p2', 0.1, primitive='exact_match_ratio'),
            dim('p3', 0.1, primitive='numeric_tolerance', tolerance=0, decay='linear'),
            dim('p4', 0.1, primitive='fuzzy_string'),
            dim('p5', 0.1, **dict(TD, time_limit_secs=0.5, curve=0.25)),
            dim('p6', 0.1, primitive='coverage_ratio'),
            dim('p7', 0.1, primitive='set_overlap', method='intersection'),
            dim('p8', 0.1, primitive='token_efficiency', field=DROP, ground_truth_field=DROP),
            dim('p9', 0.1, primitive='call_efficiency', field=DROP, ground_truth_field=DROP),
            dim('p10', 0.1, primitive='expression', field=DROP, ground_truth_field=DROP,
                expr='clamp(min(a, 1) * max(b, 0) / 2 - (a >= b), 0, 1)',
                vars={'a': 'x', 'b': 'metadata.y'})), None),
        ('gate chain', spec(dim('a1', 0.5), dim('a2', 0.25, gate={'dimension': 'a1', 'above': 700}),
                            dim('a3', 0.25, gate={'dimension': 'a2', 'above': 0})), None),
        ('thresholds draw = win', spec(dim(), thresholds={'win': 500, 'draw': 500}), None),
        ('thresholds 0 and 1000', spec(dim(), thresholds={'win': 1000, 'draw': 0}), None),
        ('tolerance 1e-9', spec(dim(**NT, tolerance=1e-9)), None),
        ('expression with exponents, × ÷ − and variadic min/max', spec(dim(
            primitive='expression', expr='max(1e-3, 2.5E+2 × a ÷ 1000 − 0.5, min(a))',
            vars={'a': 'x'}, field=DROP, ground_truth_field=DROP)), None),
        ('tolerance 0', spec(dim(**NT, tolerance=0)), None),
        ('test-suite spec', {'evaluator': 'test-suite', 'dimensions': [
            {'key': 'correctness', 'weight': 1}], 'test_suite': {
            'language': 'python3', 'cases': [{'name': 'a', 'stdin': '', 'expected_stdout': 'x'}]}},
         None),

        ('no evaluator', spec(dim(), evaluator=DROP), (None, ['evaluator'])),
        ('unknown evaluator', spec(dim(), evaluator='llm-judge'), (None, ['evaluator'])),
        ('no dimensions', spec(), (None, ['dimension'])),
        ('dimensions not an array', dict(spec(dim()), dimensions={}), (None, ['dimension'])),
        ('33 dimensions', spec(*[dim('w%d' % i, 0.03125 if i < 32 else 0.000001)
                                 for i in range(33)]), (None, ['32', 'dimensions'])),
        ('key with upper case', spec(dim('Speed')), ('Speed', ['key'])),
        ('key starting with a digit', spec(dim('1a')), ('1a', ['key'])),
        ('key of 33 characters', spec(dim('a' * 33)), ('a' * 33, ['key'])),
        ('key missing', spec(dim(DROP)), (None, ['key'])),
        ('duplicate key', spec(dim('a1', 0.5), dim('a1', 0.5)), ('a1', ['duplicate', 'unique'])),
        ('weight 0', spec(dim('a1', 1), dim('a2', 0)), ('a2', ['weight'])),
        ('weight negative', spec(dim('a1', 1), dim('a2', -0.5)), ('a2', ['weight'])),
        ('weight above 1', spec(dim('a1', 1.5)), ('a1', ['weight'])),
        ('weight 0.1234567', spec(dim('speed', 0.1234567), dim('a2', 0.8765433)),
         ('speed', ['decimal places', 'places'])),
        ('weight a string', spec(dim('a1', '1')), ('a1', ['weight'])),
        ('weight missing', spec(dim('a1', DROP)), ('a1', ['weight'])),
        ('weights sum 0.999999', spec(dim('a1', 0.5), dim('a2', 0.499999)), (None, ['sum'])),
        ('weights sum 1.000001', spec(dim('a1', 0.5), dim('a2', 0.500001)), (None, ['sum'])),
        ('weights 0.1 + 0.2 + 0.699999', spec(dim('a1', 0.1), dim('a2', 0.2), dim('a3', 0.699999)),
         (None, ['sum'])),
        ('primitive missing', spec(dim(primitive=DROP)), ('correctness', ['primitive'])),
        ('primitive unknown', spec(dim(primitive='regex')), ('correctness', ['primitive'])),
        ('field missing', spec(dim(field=DROP)), ('correctness', ['field'])),
        ('ground_truth_field missing', spec(dim(primitive='set_overlap', ground_truth_field=DROP)),
         ('correctness', ['ground_truth_field'])),
        ('field not a path', spec(dim(field='a..b')), ('correctness', ['field', 'path'])),
        ('field negative index', spec(dim(field='a[-1]')), ('correctness', ['field', 'path',
                                                                           'index'])),
        ('field empty', spec(dim(field='')), ('correctness', ['field', 'path'])),
        ('field ends with a dot', spec(dim(field='a.')), ('correctness', ['field', 'path'])),
        ('ground_truth_field index with a leading zero', spec(dim(ground_truth_field='b[01]')),
         ('correctness', ['ground_truth_field', 'path'])),
        ('tolerance negative', spec(dim(**NT, tolerance=-0.01)), ('correctness', ['tolerance'])),
        ('tolerance a string', spec(dim(**NT, tolerance='0.1')), ('correctness', ['tolerance'])),
        ('decay unknown', spec(dim(**NT, decay='exponential')), ('correctness', ['decay'])),
        ('method unknown', spec(dim(primitive='set_overlap', method='dice')),
         ('correctness', ['method'])),
        ('curve 0', spec(dim(**dict(TD, curve=0))), ('correctness', ['curve'])),
        ('curve negative', spec(dim(**dict(TD, curve=-1))), ('correctness', ['curve'])),
        ('time_limit_secs 0', spec(dim(**dict(TD, time_limit_secs=0))),
         ('correctness', ['time_limit_secs'])),
        ('time_limit_secs negative', spec(dim(**dict(TD, time_limit_secs=-5))),
         ('correctness', ['time_limit_secs'])),
        ('expression does not parse', spec(dim(primitive='expression', expr='a +', vars={'a': 'x'},
                                               field=DROP, ground_truth_field=DROP)),
         ('correctness', ['expr'])),
        ('expression undeclared variable', spec(dim(primitive='expression', expr='a + b',
                                                    vars={'a': 'x'}, field=DROP,
                                                    ground_truth_field=DROP)),
         ('correctness', ['expr', "'b'", 'b'])),
        ('expression with a chained comparison', spec(dim(
            primitive='expression', expr='0 < a < 1', vars={'a': 'x'}, field=DROP,
            ground_truth_field=DROP)), ('correctness', ['expr', 'chain'])),
        ('expression with a literal beyond a double', spec(dim(
            primitive='expression', expr='1e400', field=DROP, ground_truth_field=DROP)),
         ('correctness', ['expr', 'range'])),
        ('expression with an unknown function', spec(dim(
            primitive='expression', expr='pow(2, 1)', field=DROP, ground_truth_field=DROP)),
         ('correctness', ['expr', 'pow'])),
        ('weight 1e-7', spec(dim('a1', 1e-7), dim('a2', 0.9999999)), ('a1', ['places'])),
        ('case_insensitive not a boolean', spec(dim(case_insensitive='yes')),
         ('correctness', ['case_insensitive'])),
        ('expression missing', spec(dim(primitive='expression', field=DROP,
                                        ground_truth_field=DROP)), ('correctness', ['expr'])),
        ('expression var path invalid', spec(dim(primitive='expression', expr='a',
                                                 vars={'a': 'x[-1]'}, field=DROP,
                                                 ground_truth_field=DROP)),
         ('correctness', ['var', 'path'])),
        ('gate unknown dimension', spec(dim(gate={'dimension': 'ghost', 'above': 1})),
         ('correctness', ['gate'])),
        ('gate on itself', spec(dim(gate={'dimension': 'correctness', 'above': 1})),
         ('correctness', ['gate'])),
        ('gate cycle', spec(dim('a1', 0.5, gate={'dimension': 'a2', 'above': 1}),
                            dim('a2', 0.5, gate={'dimension': 'a1', 'above': 1})),
         ('a1', ['cycle'])),
        ('gate cycle of three', spec(dim('a1', 0.4, gate={'dimension': 'a3', 'above': 1}),
                                     dim('a2', 0.3, gate={'dimension': 'a1', 'above': 1}),
                                     dim('a3', 0.3, gate={'dimension': 'a2', 'above': 1})),
         (None, ['cycle'])),
        ('gate without above', spec(dim('a1', 0.5), dim('a2', 0.5, gate={'dimension': 'a1'})),
         ('a2', ['gate', 'above'])),
        ('thresholds draw > win', spec(dim(), thresholds={'win': 500, 'draw': 600}),
         (None, ['threshold', 'draw', 'win'])),
        ('thresholds win > 1000', spec(dim(), thresholds={'win': 1001, 'draw': 400}),
         (None, ['threshold', 'win'])),
        ('thresholds draw < 0', spec(dim(), thresholds={'win': 700, 'draw': -1}),
         (None, ['threshold', 'draw'])),
        ('thresholds win 300 alone (draw default 400)', spec(dim(), thresholds={'win': 300}),
         (None, ['threshold', 'draw', 'win'])),
        # common/README.md "Unknown keys": refused with the nearest known key; x- keys are notes
        ('unknown key normalise', spec(dim(normalise=['trim'])),
         ('correctness', ["'normalise'", "did you mean 'normalize'"])),
        ('a parameter of another primitive', spec(dim(tolerance=0.5)),
         ('correctness', ['tolerance does not apply'])),
        ('unknown key in a nested primitive',
         spec(dim(primitive='keyed_map', item={'primitive': 'numeric_tolerance', 'tolerence': 1}))
         , ('correctness', ["'tolerence'", "did you mean 'tolerance'"])),
        ('unknown key at the top level', spec(dim(), treshold={'win': 700}),
         (None, ["unknown key 'treshold'"])),
        ('unknown key in a gate', spec(dim('a1', 0.5), dim('a2', 0.5, gate={'dimension': 'a1',
                                                                          'abve': 1})),
         ('a2', ["unknown key 'abve'"])),
        ('x- keys are notes', spec(dim(**{'x-why': 'because'}), **{'x-author': 'me'}), None),
        ('the seed form with an x- note', {'type': 'deterministic', 'x-source': 'seed 001',
                                           'dimensions': [{'name': 'speed', 'weight': 1,
                                                           'primitive': 'time_decay',
                                                           'time_limit_secs': 300}]}, None),
    ]
    for name, s, want in cases:
        d = os.path.join(tmp, 'v%d' % tap.count())
        os.makedirs(d, exist_ok=True)
        f = os.path.join(d, 'spec.json')
        write(f, s)
        p = subprocess.run([BIN, 'validate-spec', f], capture_output=True, text=True)
        if want is None:
            ok(p.returncode == 0, 'valid spec accepted: %s' % name,
               'exit %d: %s' % (p.returncode, p.stderr))
            continue
        key, words = want
        msg = p.stderr
        problems = []
        if p.returncode != 2:
            problems.append('exit %d, expected 2' % p.returncode)
        if key is not None and key not in msg:
            problems.append('message does not name dimension %r' % key)
        if not any(w.lower() in msg.lower() for w in words):
            problems.append('message names none of %r' % (words,))
        ok(not problems, 'invalid spec rejected: %s' % name, '\n'.join(problems) + '\n' + msg)
        # `arbiter score` refuses it the same way
        if name in ('weight 0.1234567', 'gate cycle', 'weights sum 0.999999'):
            sf = os.path.join(d, 'sub.json')
            write(sf, {'answer': {}})
            p2 = subprocess.run([BIN, 'score', '--spec', f, '--submission', sf],
                                capture_output=True, text=True)
            ok(p2.returncode == 2 and p2.stdout == '' and 'invalid spec' in p2.stderr,
               'score refuses the invalid spec: %s' % name, p2.stderr)


DROP = object()


# ---------------------------------------------------------------------------
# Elo (common/README.md "Elo") reference: `test_score_differential.py --elo-table` prints the case
# table of test/test-elo.c (the C module is checked there, against these values).
# ---------------------------------------------------------------------------

def half_away(x):
    """round half away from zero of a float or Fraction, exactly."""
    x = Fraction(x)
    f = math.floor(abs(x) + Fraction(1, 2))
    return f if x >= 0 else -f


def elo_reference(R, match_count, opp, outcome, verified, memoryless, attempt):
    S = {'win': 1.0, 'draw': 0.5, 'loss': 0.0}[outcome]
    E = 1.0 / (1.0 + 10.0 ** ((opp - R) / 400.0))
    K = 32 if match_count < 30 else 16
    x = R + K * (S - E)
    new = max(100, half_away(x))
    change = new - R
    bonus = 10
    if verified and change > 0:
        bonus = 12 if memoryless and attempt == 1 else 11
        change = half_away(Fraction(change * bonus, 10))
        new = max(100, R + change)
    # the tie margin: how close R + K(S-E) came to a .5 (binary noise could flip it)
    margin = abs(abs(x - math.floor(x)) - 0.5)
    return new, new - R, K, bonus, margin


def elo_table(n=240, seed=5):
    rng = random.Random(seed)
    rows = []
    while len(rows) < n:
        R = rng.choice([100, 101, 105, 110, 1000, 1050, 1200, 1400, rng.randint(100, 2600),
                        rng.randint(100, 2600), rng.randint(900, 1500)])
        mc = rng.choice([0, 1, 29, 30, 31, 100, rng.randint(0, 60)])
        opp = rng.choice([800, 1000, 1200, 1400, rng.randint(100, 2800), R, R + 1, R - 1])
        outcome = rng.choice(['win', 'draw', 'loss'])
        verified = rng.random() < 0.6
        memoryless = rng.random() < 0.5
        attempt = rng.choice([1, 1, 2, 3])
        new, change, K, bonus, margin = elo_reference(R, mc, opp, outcome, verified, memoryless,
                                                      attempt)
        if margin < 1e-9:
            continue  # a tie decided by binary noise: no implementation can be held to it
        rows.append('\t{ "ref", %d, %d, %d, ELO_%s, %s, %s, %d, %d, %d, %d, %d },' % (
            R, mc, opp, outcome.upper(), str(verified).lower(), str(memoryless).lower(),
            attempt, new, change, K, bonus))
    return '\n'.join(rows)


def main():
    t0 = time.time()
    try:
        fixed_cases()
        validation_cases()
        differential()
        differential_v3()
    finally:
        if not KEEP:
            shutil.rmtree(tmp, ignore_errors=True)
    tap.diag('%d failed, %.1f s' % (tap.failed(), time.time() - t0))
    return tap.done()


if __name__ == '__main__':
    if sys.argv[1:] == ['--elo-table']:
        print(elo_table())
        sys.exit(0)
    sys.exit(main())
