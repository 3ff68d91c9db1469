#!/usr/bin/python3
"""Integration test of `arbiter score` and `arbiter validate-spec` (worker/README.md "Command line"):
drives the built binary (ARBITER_BIN) with files in a temporary directory and
checks exit codes (0 / 2 / 3), the result JSON on stdout and reasons on stderr.
No servers needed. TAP on stdout."""
import json
import os
import subprocess
import sys
import tempfile
import time

BIN = os.environ.get("ARBITER_BIN", "build/worker/arbiter")
import tap  # noqa: E402
from tap import ok  # noqa: E402


tmp = tempfile.mkdtemp(prefix="arbiter-cli-")


def write(name, content):
    path = os.path.join(tmp, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(content if isinstance(content, str) else json.dumps(content))
    return path


def run(*args, env=None, stdin=None):
    e = dict(os.environ)
    e.pop("ARBITER_MAX_STRING_BYTES", None)
    if env:
        e.update(env)
    p = subprocess.run([BIN] + list(args), capture_output=True, text=True, env=e,
                       input=stdin, timeout=60)
    return p.returncode, p.stdout, p.stderr


def const_dim(key, weight, score):
    return {"key": key, "weight": weight, "primitive": "expression", "expr": "%d / 1000" % score}


SEED = {"evaluator": "deterministic", "dimensions": [
    const_dim("correctness", 0.5, 900), const_dim("speed", 0.2, 780),
    const_dim("methodology", 0.15, 690), const_dim("completeness", 0.15, 760)]}
SEED_OUT = ('{"score":823,"result":"win","score_breakdown":{'
            '"correctness":{"score":900,"weight":0.5,"weighted":450},'
            '"speed":{"score":780,"weight":0.2,"weighted":156},'
            '"methodology":{"score":690,"weight":0.15,"weighted":103.5},'
            '"completeness":{"score":760,"weight":0.15,"weighted":114}},'
            '"submission_warnings":[],"constraint_violations":[],"verified":false}\n')

seed = write("seed.json", SEED)
empty_sub = write("empty-sub.json", {"answer": {}, "metadata": {}})

# 1. The seed's worked example, byte for byte.
rc, out, err = run("score", "--spec", seed, "--submission", empty_sub)
ok(rc == 0, "seed example exits 0", err)
ok(out == SEED_OUT, "seed example prints the exact result JSON", out)
ok(err == "", "nothing on stderr", err)
rc, out2, _ = run("score", "--spec=" + seed, "--submission=" + empty_sub)
ok(rc == 0 and out2 == SEED_OUT, "--opt=value form")

# 2. A realistic deterministic spec with ground truth and match times.
spec = write("spec.json", {
    "evaluator": "deterministic",
    "dimensions": [
        {"key": "correctness", "weight": 0.5, "primitive": "exact_match_ratio",
         "field": "answers", "ground_truth_field": "expected_answers"},
        {"key": "speed", "weight": 0.2, "primitive": "time_decay"},
        {"key": "completeness", "weight": 0.3, "primitive": "set_overlap",
         "field": "found", "ground_truth_field": "expected", "method": "intersection"}],
    "thresholds": {"win": 700, "draw": 400},
    "constraints": {"token_budget": 1000, "max_llm_calls": 40, "max_tool_calls": 300}})
sub = write("sub.json", {"answer": {"answers": [1, 2, 3, 4], "found": ["a", "b", "c"]},
                         "metadata": {"token_count": 1500, "llm_call_count": 3,
                                      "replay_log": [{"ts": "2024-05-01T10:00:30Z"}]}})
gt = write("gt.json", {"expected_answers": [1, 2, 3, 5], "expected": ["a", "b", "c", "d"]})
match = write("match.json", {"started_at": "2024-05-01T10:00:00Z",
                             "submitted_at": "2024-05-01T10:01:06Z", "time_limit_secs": 300,
                             "memoryless": True, "attempt_number": 1})
rc, out, err = run("score", "--spec", spec, "--submission", sub, "--ground-truth", gt,
                   "--match", match)
ok(rc == 0, "full example exits 0", err)
try:
    res = json.loads(out)
except ValueError:
    res = {}
ok(list(res.keys()) == ["score", "result", "score_breakdown", "submission_warnings",
                        "constraint_violations", "verified"], "result keys in order", out)
bd = res.get("score_breakdown", {})
ok(list(bd.keys()) == ["correctness", "speed", "completeness"], "breakdown in spec order")
ok(bd.get("correctness") == {"score": 750, "weight": 0.5, "weighted": 375}, "correctness 3/4", bd)
ok(bd.get("speed") == {"score": 780, "weight": 0.2, "weighted": 156}, "speed 66 s of 300", bd)
ok(bd.get("completeness") == {"score": 750, "weight": 0.3, "weighted": 225}, "completeness 3/4", bd)
ok(res.get("score") == 756 and res.get("result") == "win", "total 756 win", out)
ok(res.get("verified") is True, "verified (replay_log within the window)", out)
ok(res.get("constraint_violations") == [{"constraint": "token_budget", "limit": 1000,
                                         "actual": 1500}], "token violation listed", out)

# 3. Without --match: time_decay 0 with an error warning; not verified.
rc, out, err = run("score", "--spec", spec, "--submission", sub, "--ground-truth", gt)
res = json.loads(out) if rc == 0 else {}
ok(rc == 0 and res["score_breakdown"]["speed"]["score"] == 0, "no match: speed 0", out + err)
ok(any(w["severity"] == "error" for w in res.get("submission_warnings", [])), "no match: warning")
ok(res.get("verified") is False, "no match: not verified")

# 4. Missing field: dimension 0, warning naming the field, scoring continues.
sub2 = write("sub2.json", {"answer": {"found": ["a"]}})
rc, out, err = run("score", "--spec", spec, "--submission", sub2, "--ground-truth", gt,
                   "--match", match)
res = json.loads(out) if rc == 0 else {}
ws = res.get("submission_warnings", [])
ok(rc == 0 and res["score_breakdown"]["correctness"]["score"] == 0, "missing field scores 0")
ok(any(w.get("severity") == "error" and w.get("field") == "answers" for w in ws),
   "warning {severity: error, field: answers}", ws)
ok(res["score_breakdown"]["completeness"]["score"] == 250, "other dimensions still scored")

# 5. Bad specs and inputs: exit 2 with the reason on stderr.
bad_weight = write("bad-weight.json", {"evaluator": "deterministic", "dimensions": [
    {"key": "speed", "weight": 0.1234567, "primitive": "time_decay"},
    {"key": "correctness", "weight": 0.8765433, "primitive": "time_decay"}]})
rc, out, err = run("score", "--spec", bad_weight, "--submission", empty_sub)
ok(rc == 2 and out == "", "invalid spec exits 2 with nothing on stdout", (rc, out))
ok("dimension 'speed': weight 0.1234567 has more than 6 decimal places" in err,
   "reason names the dimension and the rule", err)
bad_json = write("bad-json.json", '{"evaluator": "deterministic",\n  "dimensions": [}\n')
rc, out, err = run("score", "--spec", bad_json, "--submission", empty_sub)
ok(rc == 2 and "line 2, column" in err, "malformed spec JSON: line and column", err)
rc, out, err = run("validate-spec", bad_json)
ok(rc == 2 and "line 2, column" in err, "validate-spec: malformed JSON", err)
rc, out, err = run("validate-spec", bad_weight)
ok(rc == 2 and out == "" and "more than 6 decimal places" in err, "validate-spec: invalid", err)
rc, out, err = run("validate-spec", spec)
ok(rc == 0 and out == "ok\n", "validate-spec: ok", (rc, out, err))
rc, out, err = run("validate-spec", "--spec", spec)
ok(rc == 0 and out == "ok\n", "validate-spec --spec F: ok, like arbiter score", (rc, out, err))
rc, out, err = run("validate-spec", "--spec", bad_weight)
ok(rc == 2 and "more than 6 decimal places" in err, "validate-spec --spec F: invalid", err)
rc, out, err = run("validate-spec")
ok(rc == 2 and "usage" in err, "validate-spec without a file: usage, exit 2", err)
# A custom script that reports on stdout: ok, with a warning that points to score.json.
stdout_form = write("stdout-form.json", {"evaluator": "custom-script", "dimensions": [
    {"key": "correctness", "weight": 1}], "script": {"language": "sh",
    "source": "echo '{\"scores\":{\"correctness\":5}}'"}})
rc, out, err = run("validate-spec", stdout_form)
ok(rc == 0 and out == "ok\n" and "warning" in err and "score.json" in err,
   "validate-spec: a script without score.json: ok with a warning", (rc, out, err))
file_form = write("file-form.json", {"evaluator": "custom-script", "dimensions": [
    {"key": "correctness", "weight": 1}], "script": {"language": "sh",
    "source": "echo '{\"scores\":{\"correctness\":5}}' > score.json"}})
rc, out, err = run("validate-spec", file_form)
ok(rc == 0 and out == "ok\n" and err == "", "validate-spec: a script writing score.json: no "
   "warning", (rc, out, err))
cycle = write("cycle.json", {"evaluator": "deterministic", "dimensions": [
    {"key": "a", "weight": 0.5, "primitive": "time_decay", "gate": {"dimension": "b", "above": 1}},
    {"key": "b", "weight": 0.5, "primitive": "time_decay", "gate": {"dimension": "a", "above": 1}}]})
rc, out, err = run("validate-spec", cycle)
ok(rc == 2 and "cycle: a -> b -> a" in err, "validate-spec: gate cycle reported", err)
rc, out, err = run("validate-spec", "-", stdin=json.dumps(SEED))
ok(rc == 0 and out == "ok\n", "validate-spec reads stdin with -", err)
rc, out, err = run("validate-spec")
ok(rc == 2 and "usage" in err, "validate-spec without a file: usage, exit 2")
rc, out, err = run("validate-spec", os.path.join(tmp, "nope.json"))
ok(rc == 2 and "nope.json" in err, "validate-spec: missing file", err)

bad_sub = write("bad-sub.json", '{"answer": ')
rc, out, err = run("score", "--spec", spec, "--submission", bad_sub)
ok(rc == 2 and "submission" in err and "line 1" in err, "malformed submission exits 2", err)
rc, out, err = run("score", "--spec", spec, "--submission", write("arr.json", [1]))
ok(rc == 2 and "must be a JSON object" in err, "submission not an object exits 2", err)
rc, out, err = run("score", "--spec", spec, "--submission",
                   write("md.json", {"answer": {}, "metadata": [1]}))
ok(rc == 2 and "metadata" in err, "metadata not an object exits 2", err)
rc, out, err = run("score", "--spec", spec, "--submission", sub, "--ground-truth", bad_sub)
ok(rc == 2 and "ground truth" in err, "malformed ground truth exits 2", err)
rc, out, err = run("score", "--spec", spec, "--submission", sub,
                   "--match", write("bad-match.json", {"started_at": "yesterday",
                                                       "submitted_at": "2024-05-01T10:00:00Z"}))
ok(rc == 2 and "started_at" in err, "bad match time exits 2", err)
rc, out, err = run("score", "--spec", spec, "--submission", sub,
                   "--match", write("bad-limit.json", {"time_limit_secs": -3}))
ok(rc == 2 and "time_limit_secs" in err, "bad match time_limit_secs exits 2", err)
rc, out, err = run("score", "--submission", sub)
ok(rc == 2 and "--spec" in err, "missing --spec exits 2", err)
rc, out, err = run("score", "--spec", spec, "--submission", sub, "--bogus")
ok(rc == 2 and "--bogus" in err, "unknown argument exits 2", err)
rc, out, err = run("score", "--spec", os.path.join(tmp, "missing.json"), "--submission", sub)
ok(rc == 2 and "missing.json" in err, "missing spec file exits 2", err)
rc, out, err = run("score", "--spec", spec, "--submission", sub, "--max-string-bytes", "abc")
ok(rc == 2 and "abc" in err, "bad --max-string-bytes exits 2", err)
rc, out, err = run("score", "--help")
ok(rc == 0 and "--spec" in out, "score --help")

# 6. Strings over the limit: that dimension 0 + warning, quickly, no crash.
fz = write("fuzzy.json", {"evaluator": "deterministic", "dimensions": [
    {"key": "analysis", "weight": 0.5, "primitive": "fuzzy_string", "field": "t",
     "ground_truth_field": "t"},
    {"key": "correctness", "weight": 0.5, "primitive": "exact_match", "field": "n",
     "ground_truth_field": "n"}]})
fgt = write("fgt.json", {"t": "hello", "n": 1})
small = write("small.json", {"answer": {"t": "hello world", "n": 1}})
rc, out, err = run("score", "--spec", fz, "--submission", small, "--ground-truth", fgt,
                   "--max-string-bytes", "8")
res = json.loads(out) if rc == 0 else {}
ok(rc == 0 and res["score_breakdown"]["analysis"]["score"] == 0 and res["score"] == 500,
   "--max-string-bytes 8: over-long string scores 0", out + err)
ok(any(w["field"] == "t" for w in res.get("submission_warnings", [])), "and warns")
rc, out, err = run("score", "--spec", fz, "--submission", small, "--ground-truth", fgt,
                   env={"ARBITER_MAX_STRING_BYTES": "8"})
ok(rc == 0 and json.loads(out)["score"] == 500, "ARBITER_MAX_STRING_BYTES applies", out + err)
rc, out, err = run("score", "--spec", fz, "--submission", small, "--ground-truth", fgt,
                   "--max-string-bytes", "100", env={"ARBITER_MAX_STRING_BYTES": "8"})
ok(rc == 0 and json.loads(out)["score_breakdown"]["analysis"]["score"] == 455,
   "the flag wins over the environment", out + err)
rc, out, err = run("score", "--spec", fz, "--submission", small, "--ground-truth", fgt,
                   env={"ARBITER_MAX_STRING_BYTES": "lots"})
ok(rc == 2 and "ARBITER_MAX_STRING_BYTES" in err, "a bad ARBITER_MAX_STRING_BYTES is named", err)
rc, out, err = run("score", "--spec", fz, "--submission", small, "--ground-truth", fgt,
                   env={"ARBITER_LOG_LEVEL": "loud"})
ok(rc == 2 and "ARBITER_LOG_LEVEL" in err and "debug|info|warn|error" in err,
   "a bad ARBITER_LOG_LEVEL is refused as the worker refuses it", err)
huge = write("huge.json", {"answer": {"t": "x" * (3 << 20), "n": 1}})
t0 = time.time()
rc, out, err = run("score", "--spec", fz, "--submission", huge, "--ground-truth", fgt)
dt = time.time() - t0
res = json.loads(out) if rc == 0 else {}
ok(rc == 0 and res["score_breakdown"]["analysis"]["score"] == 0 and dt < 5,
   "3 MiB string over the default limit: 0 + warning in %.2f s" % dt, err)

# 7. Submission on stdin; a submission without metadata.
rc, out, err = run("score", "--spec", seed, "--submission", "-", stdin='{"answer": 5}')
ok(rc == 0 and out == SEED_OUT, "submission from stdin", out + err)

# 8. Test-suite / custom-script specs go to the sandboxed evaluator: exit 3 when it cannot run.
ts = write("ts.json", {"evaluator": "test-suite", "dimensions": [{"key": "correctness", "weight": 1}],
                       "test_suite": {"language": "no-such-language", "cases": [
                           {"name": "t", "stdin": "", "expected_stdout": "x"}]}})
rc, out, err = run("score", "--spec", ts, "--submission",
                   write("ts-sub.json", {"answer": {"files": {"main.sh": "echo x"}}}))
# A language no worker has: never a score (exit 0 would be a result for a program
# that cannot have run), but exit 3 naming the language, sandbox or not.
ok(rc == 3 and "no-such-language" in err and "not configured" in err and out.strip() == "",
   "test-suite spec in an unknown language: internal error (3) naming it", (rc, out, err))

sys.exit(tap.done())
