#!/usr/bin/python3
"""The challenge corpus (test/challenges/*.json) and the README's scoring
examples, scored by the built `arbiter` (ARBITER_BIN) as an author would:

1. Every challenge spec passes `arbiter validate-spec`; every case (a
   submission, optionally a match) is scored with `arbiter score` and must
   give the recorded total `score` and per-dimension `dimensions`, and
   `arbiter score --explain` must give the same result plus an explanation
   for every dimension.
2. Every ```json block of the README's "Scoring spec" section that is a spec
   (has "evaluator") passes validate-spec; every block that is a worked
   example ({"spec", "submission", "ground_truth", "match", "expect"}) is
   scored and must give `expect` (score and dimensions), so the
   documentation cannot drift from the code.

CHALLENGES_RECORD=1 prints the scores instead of checking them (to write a
new case's expectations after checking them by hand). TAP on stdout."""
import json
import os
import re
import subprocess
import sys
import tempfile

BIN = os.environ.get("ARBITER_BIN", "build/worker/arbiter")
RECORD = os.environ.get("CHALLENGES_RECORD")
import docs  # noqa: E402
import tap  # noqa: E402
from tap import ok  # noqa: E402

tmp = tempfile.mkdtemp(prefix="arbiter-challenges-")


def write(name, obj):
    path = os.path.join(tmp, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False)
    return path


def score(spec, submission, gt, match, explain=False):
    args = [BIN, "score", "--spec", write("spec.json", spec), "--submission",
            write("sub.json", submission), "--ground-truth", write("gt.json", gt or {})]
    if match:
        args += ["--match", write("match.json", match)]
    if explain:
        args.append("--explain")
    p = subprocess.run(args, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def validate(spec):
    p = subprocess.run([BIN, "validate-spec", write("v.json", spec)], capture_output=True,
                       text=True, timeout=60)
    return p.returncode, p.stdout.strip(), p.stderr.strip()


def check_case(label, spec, gt, case):
    rc, out, err = score(spec, case["submission"], gt, case.get("match"))
    if not ok(rc == 0, "%s: scores (exit 0)" % label, err):
        return
    res = json.loads(out)
    dims = {k: v["score"] for k, v in res["score_breakdown"].items()}
    if RECORD:
        print("# %s: score %d dimensions %s warnings %s" % (label, res["score"], json.dumps(dims),
              json.dumps(res["submission_warnings"])))
        return
    ok(res["score"] == case["score"], "%s: score %s" % (label, case.get("score")),
       "got %d" % res["score"])
    if "dimensions" in case:
        ok(dims == case["dimensions"], "%s: dimension scores" % label,
           "got %s\nwant %s" % (json.dumps(dims), json.dumps(case["dimensions"])))
    if "result" in case:
        ok(res["result"] == case["result"], "%s: result %s" % (label, case["result"]))
    rc, out2, err = score(spec, case["submission"], gt, case.get("match"), explain=True)
    ex = json.loads(out2) if rc == 0 else {}
    explain = ex.pop("explain", None)
    ok(rc == 0 and ex == res and isinstance(explain, dict) and set(explain) == set(dims),
       "%s: --explain gives the same result and explains every dimension" % label, err)


def challenges():
    d = os.path.join("test", "challenges")
    names = sorted(n for n in os.listdir(d) if n.endswith(".json"))
    ok(len(names) >= 20, "at least 20 challenges (%d)" % len(names))
    for n in names:
        with open(os.path.join(d, n), encoding="utf-8") as f:
            ch = json.load(f)
        rc, out, err = validate(ch["spec"])
        ok(rc == 0 and out == "ok", "%s: spec validates" % n, err)
        ok(len(ch["cases"]) >= 2, "%s: has good and poor cases" % n)
        for case in ch["cases"]:
            check_case("%s / %s" % (n, case["name"]), ch["spec"], ch.get("ground_truth"), case)


def readme():
    section = docs.section("Scoring spec")      # README.md or common/README.md
    ok(section is not None, "the documentation has a section \"Scoring spec\"")
    section = section or ""
    blocks = re.findall(r"```json\n(.*?)```", section, re.S)
    nspec = nexample = 0
    for i, b in enumerate(blocks):
        try:
            obj = json.loads(b)
        except ValueError as e:
            ok(False, "README scoring block %d is JSON" % i, str(e))
            continue
        if isinstance(obj, dict) and "evaluator" in obj:
            nspec += 1
            rc, out, err = validate(obj)
            ok(rc == 0, "README spec block %d validates" % i, err)
        elif isinstance(obj, dict) and "expect" in obj:
            nexample += 1
            case = dict(obj["expect"])
            case["submission"] = obj["submission"]
            case["match"] = obj.get("match")
            rc, out, err = validate(obj["spec"])
            ok(rc == 0, "README example %d (%s): spec validates" % (i, obj.get("example")), err)
            check_case("README example %d (%s)" % (i, obj.get("example")), obj["spec"],
                       obj.get("ground_truth"), case)
    ok(nspec >= 1 and nexample >= 8, "README: %d specs and %d worked examples executed" %
       (nspec, nexample))


challenges()
readme()
tap.done()
