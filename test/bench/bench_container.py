#!/usr/bin/python3
"""Start-up cost of evaluator container against a plain sandboxed run (issue #27:
at most 10 ms more). Each round runs `arbiter score` once with a custom-script spec
(sh, writes score.json) and once with a container spec (busybox sh from an imported
image, writes /output/score.json), interleaved; prints the medians and their
difference. Both include the same process start and sandbox set-up, so the
difference is the run's own. Needs root, like the sandbox.

    test/bench/bench_container.py [--bin build/worker/arbiter] [--rounds 21]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import ociimage  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--bin", default="build/worker/arbiter")
ap.add_argument("--rounds", type=int, default=21)
a = ap.parse_args()
top = tempfile.mkdtemp(prefix="arbiter-bench-container-")
env = dict(os.environ, ARBITER_IMAGE_DIR=os.path.join(top, "store"), ARBITER_SANDBOX_SLOTS="1")
data, digest = ociimage.archive([ociimage.busybox_layer(
    '#!/bin/sh\necho \'{"scores": {"tests": 500}}\' > /output/score.json\n')],
    config={"Cmd": ["/app/score.sh"]})
with open(os.path.join(top, "img.tar"), "wb") as f:
    f.write(data)
subprocess.run([a.bin, "image", "import", os.path.join(top, "img.tar")], check=True, env=env,
               capture_output=True)
dims = [{"key": "tests", "weight": 1}]
specs = {
    "plain": {"evaluator": "custom-script", "dimensions": dims,
              "script": {"language": "sh",
                         "source": "echo '{\"scores\": {\"tests\": 500}}' > score.json\n"}},
    "container": {"evaluator": "container", "image": digest, "dimensions": dims},
}
sub = os.path.join(top, "sub.json")
with open(sub, "w") as f:
    json.dump({"answer": {"text": "x"}, "metadata": {}}, f)
paths = {}
for k, s in specs.items():
    paths[k] = os.path.join(top, k + ".json")
    with open(paths[k], "w") as f:
        json.dump(s, f)
times = {k: [] for k in specs}
for r in range(a.rounds + 1):
    for k in specs:
        t0 = time.monotonic()
        p = subprocess.run([a.bin, "score", "--spec", paths[k], "--submission", sub], env=env,
                           capture_output=True, text=True)
        dt = (time.monotonic() - t0) * 1000
        if p.returncode != 0 or json.loads(p.stdout)["score"] != 500:
            sys.exit("%s failed: %s" % (k, p.stderr))
        if r:   # the first round warms the caches
            times[k].append(dt)
m = {k: statistics.median(v) for k, v in times.items()}
print("rounds %d: plain sandboxed run median %.1f ms, container %.1f ms, difference %+.1f ms "
      "(target <= +10 ms)" % (a.rounds, m["plain"], m["container"], m["container"] - m["plain"]))
shutil.rmtree(top)
sys.exit(0 if m["container"] - m["plain"] <= 10 else 1)
