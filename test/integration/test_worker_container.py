#!/usr/bin/python3
"""The container evaluator through the worker, as an API server drives it (worker/README.md
"Container evaluator"): an image built here from busybox-static is imported with `arbiter
image import`, a challenge's spec names it, submissions are written to PostgreSQL and their
jobs XADDed to Redis, and a real `arbiter worker` evaluates them in its sandbox.
- the image's score.json decides the container's dimension, beside a deterministic one;
  the result, its breakdown and the Elo update are committed as for any evaluator;
- what the run saw of the submission is the submission's own answer (/submission);
- a spec naming an image the store lacks ends `failed` with image_not_found in last_error
  and a dead-letter copy, after ARBITER_MAX_DELIVERIES attempts: never lost.
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ociimage  # noqa: E402
from services import Services  # noqa: E402
from workerkit import BIN, Arena, Worker, done, eq, migrate, ok, wait_for  # noqa: E402

# The run reads the answer and scores 900 when it says "good", else 100.
SCRIPT = """#!/bin/sh
if grep -q '"verdict": *"good"' /submission/answer.json; then v=900; else v=100; fi
printf '{"scores": {"tests": %s}}' "$v" > /output/score.json
"""


def main():
    top = tempfile.mkdtemp(prefix="arbiter-worker-container-")
    store = os.path.join(top, "store")
    data, digest = ociimage.archive([ociimage.busybox_layer(SCRIPT)],
                                    config={"Cmd": ["/app/score.sh"], "Env": ["PATH=/bin"]})
    path = os.path.join(top, "img.tar")
    with open(path, "wb") as f:
        f.write(data)
    p = subprocess.run([BIN, "image", "import", path], capture_output=True, text=True,
                       env=dict(os.environ, ARBITER_IMAGE_DIR=store), timeout=120)
    ok(p.returncode == 0 and p.stdout.split()[-1] == digest, "the image imports", p.stderr)

    with Services() as s:
        migrate(s)
        a = Arena(s)
        w = Worker(s, "ctr-1", env={"ARBITER_IMAGE_DIR": store, "ARBITER_SANDBOX_SLOTS": "2",
                                    "ARBITER_MAX_DELIVERIES": "2", "ARBITER_RETRY_BASE_MS": "100ms"})
        try:
            spec = {"evaluator": "container", "image": digest,
                    "dimensions": [{"key": "tests", "weight": 0.8},
                                   {"key": "correctness", "weight": 0.2,
                                    "primitive": "exact_match", "field": "verdict",
                                    "ground_truth_field": "verdict"}],
                    "container": {"timeout_ms": 20000}}
            ch = a.challenge(spec, {"verdict": "good"})
            ag = a.agent()
            _, good = a.submit(ag, ch, {"verdict": "good"})
            _, poor = a.submit(a.agent(), ch, {"verdict": "poor"})
            ok(a.wait_final([good, poor], 90), "both container jobs finish", w.tail())
            rows = {sid: a.q1("SELECT score, evaluator, score_breakdown->'tests'->>'score' "
                              "FROM evaluation_results WHERE submission_id = %s", sid)
                    for sid in (good, poor)}
            eq(rows[good], (920, "container", "900"),
               "the image's score.json and the exact match: 0.8 x 900 + 0.2 x 1000 = 920")
            eq(rows[poor], (80, "container", "100"), "the poor answer: 0.8 x 100 + 0.2 x 0 = 80")
            eq(a.status(good), "completed", "the good submission is completed")
            hist = a.val("SELECT count(*) FROM elo_history WHERE agent_id = %s", ag)
            eq(hist, 1, "its agent's Elo moved once (elo_history)")

            lost = a.challenge(dict(spec, image="sha256:" + "0" * 64), {"verdict": "good"})
            _, gone = a.submit(a.agent(), lost, {"verdict": "good"})
            ok(a.wait_final([gone], 90), "the job whose image is missing ends", w.tail())
            row = a.q1("SELECT status, last_error FROM submissions WHERE id = %s", gone)
            ok(row[0] == "failed" and "image_not_found" in (row[1] or ""),
               "missing image: failed with image_not_found in last_error", row)
            dead = wait_for(lambda: [f for _, f in a.dead_entries()
                                     if f.get("submission_id") == gone], 20)
            ok(dead, "missing image: a dead-letter copy", a.dead_entries())
            eq(a.val("SELECT count(*) FROM evaluation_results WHERE submission_id = %s", gone), 0,
               "missing image: no result")
        finally:
            rc = w.term()
        eq(rc, 0, "the worker exits 0", w.tail())
    return done()


if __name__ == "__main__":
    sys.exit(main())
