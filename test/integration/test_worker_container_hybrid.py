#!/usr/bin/python3
"""The seed's hybrid mode with the poster's own image, end to end (worker/README.md
"Container evaluator", common/README.md "The seed's rubric form"): a challenge written in
the seed's rubric form, {"mode": "hybrid", "test_weight": 40, "llm_weight": 60, "image":
..., "rubric": [...], "judge": {...}}, is scored by a real `arbiter worker` through Redis
and PostgreSQL: the image (built here from busybox-static) runs in the sandbox and writes
the seed's {"test_score": 0..100}; the LLM judge (test/judge_provider.py, a real HTTP
server on a loopback port) scores the rubric's criteria; the blend, the breakdown, the
judge's reasoning and the Elo update are committed once.
- good answer: tests 73 -> 730, quality 80 -> 800, docs 60 -> 600:
  0.4 x 730 + 0.3 x 800 + 0.3 x 600 = 292 + 240 + 180 = 712 (the seed: 0.4 x 73 + 0.6 x
  (0.5 x 80 + 0.5 x 60) = 71.2 -> 712);
- poor answer: tests 20 -> 200: 0.4 x 200 + 0.3 x 300 + 0.3 x 100 = 200;
- the judge was asked once per submission, and the container's own output never reached it;
- a container that writes the judge's keys too ({"scores": {"tests": 500, "quality": 1000,
  ...}}) scores only tests: the criteria stay the judge's (320, not 800).
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ociimage  # noqa: E402
from judge_provider import Provider  # noqa: E402
from services import Services  # noqa: E402
from workerkit import BIN, Arena, Worker, done, eq, migrate, ok  # noqa: E402

KEY = "sk-test-SECRET-4242"
# The seed's form of a container's result: {"test_score": 0..100}; 73 for a "good" verdict.
SCRIPT = """#!/bin/sh
if grep -q '"verdict": *"good"' /submission/answer.json; then t=73; else t=20; fi
printf '{"test_score": %s, "note": "CONTAINER-ONLY-MARKER"}' "$t" > /output/score.json
"""

# A container that tries to score the judge's criteria as well.
GRAB = """#!/bin/sh
printf '{"scores": {"tests": 500, "quality": 1000, "docs": 1000}}' > /output/score.json
"""


def main():
    top = tempfile.mkdtemp(prefix="arbiter-worker-hybrid-")
    store = os.path.join(top, "store")
    path = os.path.join(top, "img.tar")
    data, digest = ociimage.script_image(SCRIPT)
    p = ociimage.import_archive(BIN, store, data, path)
    ok(ociimage.imported(p) == digest, "the image imports", p.stderr)
    gdata, grab_digest = ociimage.script_image(GRAB)
    p = ociimage.import_archive(BIN, store, gdata, path)
    ok(ociimage.imported(p) == grab_digest, "an image that writes the judge's keys imports",
       p.stderr)

    prov = Provider().start()
    try:
        with Services() as s:
            migrate(s)
            a = Arena(s)
            w = Worker(s, "hybrid-1", env={"ARBITER_IMAGE_DIR": store, "ARBITER_SANDBOX_SLOTS": "2",
                                           "ARBJ_TEST_API_KEY": KEY,
                                           "ARBITER_JUDGE_PROVIDERS": prov.providers(),
                                           "ARBITER_MAX_DELIVERIES": "2",
                                           "ARBITER_RETRY_BASE_MS": "200ms"})
            try:
                spec = {"mode": "hybrid", "test_weight": 40, "llm_weight": 60, "image": digest,
                        "container": {"timeout_ms": 20000},
                        "judge": {"provider": "openai", "model": "test-model", "max_retries": 2,
                                  "timeout_ms": 5000, "reads": {"fields": ["work"]}},
                        "rubric": [{"key": "quality", "name": "Quality", "weight": 50},
                                   {"key": "docs", "name": "Docs", "weight": 50}]}
                p = subprocess.run([BIN, "validate-spec", "-"], input=json.dumps(spec),
                                   capture_output=True, text=True,
                                   env=dict(os.environ, ARBITER_IMAGE_DIR=store,
                                            ARBITER_JUDGE_PROVIDERS=prov.providers()))
                ok(p.returncode == 0, "validate-spec accepts the seed's hybrid form with an image",
                   p.stdout + p.stderr)
                ch = a.challenge(spec)
                n0 = prov.count()
                ag = a.agent()
                _, good = a.submit(ag, ch, {"verdict": "good", "work": {"quality": 80, "docs": 60}})
                _, poor = a.submit(a.agent(), ch, {"verdict": "poor",
                                                   "work": {"quality": 30, "docs": 10}})
                ok(a.wait_final([good, poor], 90), "both hybrid jobs finish", w.tail())
                res = {sid: a.q1("SELECT id, score, evaluator FROM evaluation_results "
                                 "WHERE submission_id = %s", sid) for sid in (good, poor)}
                eq(res[good] and res[good][1:], (712, "container"),
                   "good: 0.4 x 730 + 0.3 x 800 + 0.3 x 600 = 712 (the seed's 71.2)",
                   a.q1("SELECT status, last_error FROM submissions WHERE id = %s", good))
                eq(res[poor] and res[poor][1:], (200, "container"),
                   "poor: 0.4 x 200 + 0.3 x 300 + 0.3 x 100 = 200")
                dims = {k: (sc, rs) for k, sc, rs in a.q(
                    "SELECT key, score, reasoning FROM evaluation_dimensions WHERE result_id = %s",
                    res[good][0])} if res[good] else {}
                ok(dims.get("tests", (None,))[0] == 730 and dims.get("quality", (None,))[0] == 800
                   and dims.get("docs", (None,))[0] == 600 and dims["quality"][1],
                   "one row per dimension: tests from the container, the criteria from the judge "
                   "(with its reasoning)", dims)
                eq(prov.count() - n0, 2, "the judge was asked once per submission")
                bodies = " ".join(r["body"].decode() if isinstance(r["body"], bytes) else r["body"]
                                  for r in prov.requests[n0:])
                ok("CONTAINER-ONLY-MARKER" not in bodies,
                   "nothing of the container's output reached the judge")
                eq(a.val("SELECT count(*) FROM elo_history WHERE agent_id = %s", ag), 1,
                   "the good submission's agent moved once (elo_history)")
                eq(a.status(good), "completed", "completed")

                # A container that writes the judge's keys too does not score them.
                grab = a.challenge(dict(spec, image=grab_digest))
                _, sid = a.submit(a.agent(), grab, {"verdict": "poor",
                                                    "work": {"quality": 30, "docs": 10}})
                ok(a.wait_final([sid], 90), "the grabbing container's job finishes", w.tail())
                eq(a.val("SELECT score FROM evaluation_results WHERE submission_id = %s", sid), 320,
                   "its quality/docs 1000 are ignored: 0.4 x 500 + 0.3 x 300 + 0.3 x 100 = 320",
                   a.q1("SELECT status, last_error FROM submissions WHERE id = %s", sid))
            finally:
                rc = w.term()
            eq(rc, 0, "the worker exits 0", w.tail())
    finally:
        prov.stop()
    return done()


if __name__ == "__main__":
    sys.exit(main())
