"""evaluator container: `arbiter validate-spec` and `arbiter score` (offline) with an
image built here from busybox-static; one run checks the run contract from inside
(each dimension is one property, 1000 when it holds)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import ociimage  # noqa: E402
from tap import ok, done  # noqa: E402

BIN = os.environ.get("ARBITER_BIN", "build/worker/arbiter")
top = tempfile.mkdtemp(prefix="arbiter-container-test-")
STORE = os.path.join(top, "store")
ENV = dict(os.environ, ARBITER_IMAGE_DIR=STORE)

CHECKS = {
    "unprivileged": '[ "$(id -u)" -ge 1000 ] && grep -q "^CapEff:.0000000000000000" /proc/self/status',
    "root_readonly": '[ -w /app/open ] || true; ! touch /app/open/x 2>/dev/null',
    "submission_readonly": '! touch /submission/x 2>/dev/null',
    "answer": 'grep -q hello /submission/answer.json && grep -q agent-7 /submission/metadata.json',
    "files": '[ "$(cat /submission/files/src/main.txt)" = hello ]',
    "tmp_writable": 'echo x > /tmp/y && [ "$(cat /tmp/y)" = x ]',
    "env": '[ "$GREETING" = hi ] && [ "$EXTRA" = from-spec ] && [ "$HOME" = /tmp ]',
    "workdir": '[ "$(pwd)" = /app ]',
    "no_network": '! echo x | nc -w 1 127.0.0.1 22 2>/dev/null',
    "host_hidden": '! [ -e /etc/shadow ] && ! [ -e /usr/bin ] && ! [ -e /proc/1 ] && ! [ -e /proc/cmdline ]',
    "output_bounded": '! dd if=/dev/zero of=/output/big bs=1M count=80 2>/dev/null; rm -f /output/big; true',
}
keys = sorted(CHECKS)
script = "#!/bin/sh\nout=\n"
for k in keys:
    script += 'if ( %s ); then v=1000; else v=0; fi\nout="$out\\"%s\\": $v, "\n' % (CHECKS[k], k)
script += 'printf \'{"scores": {%s"end": 0}}\' "$out" > /output/score.json\n'
# app/open is mode 0777 in the image: only the read-only mount keeps the run from writing there.
layers = [ociimage.busybox_layer(script), [{"name": "bin/nc", "type": "symlink", "target": "busybox"},
                                          {"name": "app/open", "type": "dir", "mode": 0o777},
                                          {"name": "app/seed.sh", "mode": 0o755,
                                           "data": b'#!/bin/sh\necho \'{"test_score": 73}\' > /output/score.json\n'},
                                          {"name": "app/clamp.sh", "mode": 0o755,
                                           "data": b'#!/bin/sh\necho \'{"scores": {"tests": 1500}}\' > /output/score.json\n'}]]
data, digest = ociimage.archive(layers, config={"Cmd": ["/app/score.sh"],
                                                "Env": ["PATH=/bin", "GREETING=hi"]})
p = ociimage.import_archive(BIN, STORE, data, os.path.join(top, "img.tar"))
ok(ociimage.imported(p) == digest, "the test image imports", p.stderr)


def write(name, obj):
    path = os.path.join(top, name)
    with open(path, "w") as f:
        json.dump(obj, f)
    return path


def score(spec, answer=None, env=None):
    sp = write("spec.json", spec)
    sub = write("sub.json", {"answer": answer or {"text": "hello", "files": {"src/main.txt": "hello"}},
                             "metadata": {"agent": "agent-7"}})
    return subprocess.run([BIN, "score", "--spec", sp, "--submission", sub], capture_output=True,
                          text=True, env=dict(ENV, **(env or {})), timeout=120)


def validate(spec):
    return subprocess.run([BIN, "validate-spec", write("v.json", spec)], capture_output=True,
                          text=True, env=ENV)


w = 1.0 / len(keys)
dims = [{"key": k, "weight": round(w, 6)} for k in keys]
dims[-1]["weight"] = round(1 - sum(d["weight"] for d in dims[:-1]), 6)
spec = {"evaluator": "container", "image": digest, "dimensions": dims,
        "container": {"env": {"EXTRA": "from-spec"}, "timeout_ms": 20000}}
p = validate(spec)
ok(p.returncode == 0 and p.stdout.strip() == "ok", "validate-spec accepts a container spec", p.stderr)
p = score(spec)
res = json.loads(p.stdout) if p.returncode == 0 else {}
bd = res.get("score_breakdown", {})
for k in keys:
    ok(bd.get(k, {}).get("score") == 1000, "inside the container: %s" % k,
       p.stderr + json.dumps(bd.get(k)))

one = {"evaluator": "container", "image": digest, "dimensions": [{"key": "tests", "weight": 1}]}
p = score(dict(one, container={"cmd": ["/app/seed.sh"]}))
ok(p.returncode == 0 and json.loads(p.stdout)["score"] == 730,
   "the seed's {\"test_score\": 73} scores 730 (container.cmd replaces the image's)", p.stdout + p.stderr)
p = score(dict(one, container={"cmd": ["clamp.sh"], "env": {"PATH": "/app:/bin"}}))
r = json.loads(p.stdout) if p.returncode == 0 else {}
ok(p.returncode == 0 and r.get("score") == 1000 and
   any(x.get("field") == "tests" for x in r.get("submission_warnings", [])),
   "1500 is clamped to 1000 with a warning (argv[0] found on the spec's PATH)", p.stdout + p.stderr)
p = score(dict(one, container={"cmd": ["/bin/true"]}))
ok(p.returncode == 3 and "wrote no /output/score.json" in p.stderr, "no score.json: exit 3, named",
   p.stdout + p.stderr)
p = score(dict(one, container={"cmd": ["/bin/sleep", "10"], "timeout_ms": 500}))
ok(p.returncode == 3 and "timed out" in p.stderr, "container.timeout_ms is enforced", p.stderr)

# A docker-archive (`docker save`) of the same layers imports and runs like the OCI archive.
ddata = ociimage.docker_archive(layers, config={"Cmd": ["/app/seed.sh"], "Env": ["PATH=/bin"]})
ddigest = ociimage.imported(ociimage.import_archive(BIN, STORE, ddata,
                                                    os.path.join(top, "docker.tar")))
p = score(dict(one, image=ddigest))
ok(ddigest and p.returncode == 0 and json.loads(p.stdout)["score"] == 730,
   "a docker-archive's image runs: its config's Cmd scores 730", p.stdout + p.stderr)

# The operator's maxima (ARBITER_CONTAINER_MAX_*): a spec asking for more gets the maximum,
# with a warning naming the setting, and the maximum holds. Each limit is shown to be the
# setting's doing: the same run with the default maxima passes.
def sh(cmd, **limits):
    return dict(one, container=dict({"cmd": ["/bin/sh", "-c", cmd + ' && v=1000 || v=0; '
                                                "printf '{\"scores\": {\"tests\": %s}}' $v "
                                                "> /output/score.json"], "timeout_ms": 20000},
                                     **limits))


def tests_score(p):
    try:
        return json.loads(p.stdout)["score"] if p.returncode == 0 else None
    except ValueError:
        return None


big_alloc = sh("dd if=/dev/zero of=/dev/null bs=96M count=1 2>/dev/null", memory_mb=4096)
p = score(big_alloc)
ok(tests_score(p) == 1000, "control: a 96 MiB allocation runs under the default maximum",
   p.stdout + p.stderr)
p = score(big_alloc, env={"ARBITER_CONTAINER_MAX_MEMORY_MB": "48"})
ok(tests_score(p) == 0 or (p.returncode == 3 and "memory" in p.stderr),
   "ARBITER_CONTAINER_MAX_MEMORY_MB=48 holds although the spec asks 4096", p.stdout + p.stderr)
p = score(sh("true", memory_mb=4096, pids=500, timeout_ms=30000, output_mb=100),
          env={"ARBITER_CONTAINER_MAX_MEMORY_MB": "48", "ARBITER_CONTAINER_MAX_PIDS": "16",
               "ARBITER_CONTAINER_MAX_WALL_MS": "25s", "ARBITER_CONTAINER_MAX_OUTPUT_MB": "8"})
warned = " ".join(x.get("message", "") for x in
                  (json.loads(p.stdout).get("submission_warnings", []) if p.returncode == 0 else []))
ok(tests_score(p) == 1000 and all(n in warned for n in (
    "ARBITER_CONTAINER_MAX_MEMORY_MB=48", "ARBITER_CONTAINER_MAX_PIDS=16",
    "ARBITER_CONTAINER_MAX_WALL_MS=25000", "ARBITER_CONTAINER_MAX_OUTPUT_MB=8")),
   "each limit asked above its maximum is a warning naming the setting", p.stdout + p.stderr)
p = subprocess.run([BIN, "validate-spec", write("v.json", sh("true", memory_mb=4096))],
                   capture_output=True, text=True, env=dict(ENV, ARBITER_CONTAINER_MAX_MEMORY_MB="48"))
ok(p.returncode == 0 and p.stdout.strip() == "ok" and
   "ARBITER_CONTAINER_MAX_MEMORY_MB=48" in p.stderr and "warning" in p.stderr,
   "validate-spec: ok, with the same warning on stderr", p.stdout + p.stderr)
p = subprocess.run([BIN, "validate-spec", write("v.json", sh("true", memory_mb=32))],
                   capture_output=True, text=True, env=dict(ENV, ARBITER_CONTAINER_MAX_MEMORY_MB="48"))
ok(p.returncode == 0 and p.stderr == "", "validate-spec: no warning within the maxima", p.stderr)
p = score(sh("sleep 3"), env={"ARBITER_CONTAINER_MAX_WALL_MS": "1s"})
ok(p.returncode == 3 and "timed out" in p.stderr,
   "ARBITER_CONTAINER_MAX_WALL_MS=1s ends a run whose spec allows 20 s", p.stdout + p.stderr)
t0 = time.monotonic()
p = score(sh("i=0; while [ $i -lt 100000000 ]; do i=$((i+1)); done"),
          env={"ARBITER_CONTAINER_MAX_CPU_MS": "300ms"})
took = time.monotonic() - t0
ok(p.returncode == 3 and "timed out" in p.stderr and took < 10,
   "ARBITER_CONTAINER_MAX_CPU_MS=300ms ends a busy run whose spec allows 20 s (%.1f s)" % took,
   p.stdout + p.stderr)
forks = sh("(sleep 1 & sleep 1 & sleep 1 & sleep 1 & sleep 1 & sleep 1 & wait) 2>/dev/null", pids=64)
p = score(forks)
ok(tests_score(p) == 1000, "control: 6 background processes under the default maximum",
   p.stdout + p.stderr)
p = score(forks, env={"ARBITER_CONTAINER_MAX_PIDS": "4"})
ok(tests_score(p) == 0 or p.returncode == 3, "ARBITER_CONTAINER_MAX_PIDS=4 holds although the "
   "spec asks 64", p.stdout + p.stderr)
fill = sh("dd if=/dev/zero of=/output/big bs=1M count=3 2>/dev/null; r=$?; rm -f /output/big; "
          "[ $r = 0 ]", output_mb=16)
p = score(fill)
ok(tests_score(p) == 1000, "control: 3 MiB in /output with container.output_mb 16",
   p.stdout + p.stderr)
p = score(fill, env={"ARBITER_CONTAINER_MAX_OUTPUT_MB": "2"})
ok(tests_score(p) == 0, "ARBITER_CONTAINER_MAX_OUTPUT_MB=2 bounds /output although the spec "
   "asks 16", p.stdout + p.stderr)

absent = "sha256:" + "0" * 64
p = validate(dict(one, image=absent))
ok(p.returncode == 2 and "is not in the image store" in p.stderr, "validate-spec: unknown image",
   p.stderr)
p = score(dict(one, image=absent))
ok(p.returncode == 3 and "image_not_found" in p.stderr, "score: unknown image is an internal error,"
   " named image_not_found", p.stderr)
for label, bad, want in [
        ("no image", {"evaluator": "container", "dimensions": one["dimensions"]}, "needs image"),
        ("short digest", dict(one, image="sha256:abc"), "needs image"),
        ("cmd not strings", dict(one, container={"cmd": [1]}), "container.cmd[0]"),
        ("bad env name", dict(one, container={"env": {"A-B": "x"}}), "not a variable name"),
        ("unknown container key", dict(one, container={"privileged": True}), "unknown key"),
        ("image on custom-script", {"evaluator": "custom-script", "image": digest,
                                    "script": {"language": "python", "source": ""},
                                    "dimensions": one["dimensions"]}, "evaluator container only")]:
    p = validate(bad)
    ok(p.returncode == 2 and want in p.stderr, "validate-spec refuses: %s" % label, p.stderr)
shutil.rmtree(top)
sys.exit(done())
