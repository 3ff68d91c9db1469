#!/usr/bin/python3
"""The container evaluator through the worker, as an API server drives it (worker/README.md
"Container evaluator"): an image built here from busybox-static is imported with `arbiter
image import`, a challenge's spec names it, submissions are written to PostgreSQL and their
jobs XADDed to Redis, and a real `arbiter worker` evaluates them in its sandbox.
- the image's score.json decides the container's dimension, beside a deterministic one;
  the result, its breakdown and the Elo update are committed as for any evaluator;
- what the run saw of the submission is the submission's own answer (/submission);
- a job whose image the store lacks waits for it: it stays `queued`, its entry waits in
  the delayed set as cause "image" (`arbiter status --json`: delayed_by_cause.image) and
  spends no attempt; imported meanwhile, the image is found and the job completes;
- never imported, the job ends `failed` with image_not_found in last_error and a
  dead-letter copy once ARBITER_IMAGE_WAIT_MS has passed (not after ARBITER_MAX_DELIVERIES
  attempts, which would be much sooner here): never lost.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ociimage  # noqa: E402
from services import Services  # noqa: E402
from workerkit import BIN, Arena, Worker, done, eq, migrate, ok, wait_for  # noqa: E402

WAIT_S = 12     # ARBITER_IMAGE_WAIT_MS of the worker below


def waiting_for_image(a, sid):
    """The member of sid in the delayed set when it waits there for its image, else None."""
    for m in a.r.zrange(a.delayed, 0, -1):
        try:
            d = json.loads(m)
        except ValueError:
            continue
        if d.get("submission_id") == sid and d.get("_cause") == "image":
            return d
    return None


def delayed_by_cause(s):
    p = subprocess.run([BIN, "status", "--json", "--redis-url", s.redis_url, "--database-url",
                        s.database_url], capture_output=True, text=True, timeout=60)
    try:
        return json.loads(p.stdout)["redis"]["delayed_by_cause"]
    except (ValueError, KeyError):
        return None

# The run reads the answer and scores 900 when it says "good", else 100.
SCRIPT = """#!/bin/sh
if grep -q '"verdict": *"good"' /submission/answer.json; then v=900; else v=100; fi
printf '{"scores": {"tests": %s}}' "$v" > /output/score.json
"""


def main():
    top = tempfile.mkdtemp(prefix="arbiter-worker-container-")
    store = os.path.join(top, "store")
    data, digest = ociimage.script_image(SCRIPT)
    p = ociimage.import_archive(BIN, store, data, os.path.join(top, "img.tar"))
    ok(ociimage.imported(p) == digest, "the image imports", p.stderr)

    with Services() as s:
        migrate(s)
        a = Arena(s)
        w = Worker(s, "ctr-1", env={"ARBITER_IMAGE_DIR": store, "ARBITER_SANDBOX_SLOTS": "2",
                                    "ARBITER_MAX_DELIVERIES": "2", "ARBITER_RETRY_BASE_MS": "100ms",
                                    "ARBITER_IMAGE_WAIT_MS": "%ds" % WAIT_S})
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

            # Two jobs whose images the store lacks: one imported while it waits, one never.
            late_data, late_digest = ociimage.script_image(SCRIPT.replace("v=100", "v=500"))
            late_ch = a.challenge(dict(spec, image=late_digest), {"verdict": "good"})
            lost = a.challenge(dict(spec, image="sha256:" + "0" * 64), {"verdict": "good"})
            t0 = time.monotonic()
            _, late = a.submit(a.agent(), late_ch, {"verdict": "poor"})
            _, gone = a.submit(a.agent(), lost, {"verdict": "good"})
            member = wait_for(lambda: waiting_for_image(a, late), 20, 0.05)
            ok(member and member.get("image_wait_since", "").isdigit(),
               "a job whose image is missing waits in the delayed set as cause image, with the "
               "time it began waiting", (member, w.tail()))
            eq(a.status(late), "queued", "while it waits the submission stays queued")
            by = wait_for(lambda: (lambda b: b if b and b.get("image", 0) >= 1 else None)(
                delayed_by_cause(s)), 10)
            ok(by and by.get("retry") == 0, "status --json counts it under image, not retry", by)
            p = ociimage.import_archive(BIN, store, late_data, os.path.join(top, "late.tar"))
            ok(ociimage.imported(p) == late_digest,
               "the missing image is imported while the job waits", p.stderr)
            ok(a.wait_final([late], WAIT_S + 20), "the waiting job ends", w.tail())
            row = a.q1("SELECT s.status, s.attempts, r.score_breakdown->'tests'->>'score' "
                       "FROM submissions s LEFT JOIN evaluation_results r ON r.submission_id = s.id "
                       "WHERE s.id = %s", late)
            eq(row, ("completed", 1, "500"), "imported meanwhile, its image is found: completed "
               "with the image's score, on its first attempt", w.tail())
            ok(time.monotonic() - t0 < WAIT_S, "and before ARBITER_IMAGE_WAIT_MS had passed")

            ok(a.wait_final([gone], WAIT_S + 30), "the job whose image never comes ends", w.tail())
            waited = time.monotonic() - t0
            row = a.q1("SELECT status, last_error FROM submissions WHERE id = %s", gone)
            ok(row[0] == "failed" and "image_not_found" in (row[1] or "") and
               "ARBITER_IMAGE_WAIT_MS" in (row[1] or ""),
               "missing image: failed with image_not_found in last_error, naming the wait", row)
            ok(waited >= WAIT_S - 1, "only once ARBITER_IMAGE_WAIT_MS (%d s) had passed "
               "(%.1f s; its 2 attempts with a 100 ms retry base would have taken well under "
               "a second)" % (WAIT_S, waited))
            dead = wait_for(lambda: [f for _, f in a.dead_entries()
                                     if f.get("submission_id") == gone], 20)
            ok(dead and "image_not_found" in dead[0].get("reason", "") and
               "image_wait_since" not in dead[0],
               "missing image: a dead-letter copy (a replay waits afresh)", a.dead_entries())
            eq(a.val("SELECT count(*) FROM evaluation_results WHERE submission_id = %s", gone), 0,
               "missing image: no result")
        finally:
            rc = w.term()
        eq(rc, 0, "the worker exits 0", w.tail())
    return done()


if __name__ == "__main__":
    sys.exit(main())
