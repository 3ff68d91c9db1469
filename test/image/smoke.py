#!/usr/bin/python3
"""Builds the container image (deploy/build-image) and runs it as the
Kubernetes manifest would (TAP on stdout). Run once by scripts/test.

  test/image/smoke.py BUILD_DIR      BUILD_DIR: a built tree (for test-sandbox)

The manifest's way (deploy/k8s/deployment.yaml): read-only root, /tmp a
writable tmpfs (the emptyDir), every capability dropped but SYS_ADMIN,
SETUID, SETGID, CHOWN, DAC_OVERRIDE and MKNOD, seccomp the runtime default,
AppArmor unconfined, the memory limit of the manifest (4 GiB). Only the
network differs: the container shares the host's, to reach the test's
redis-server and postgres on 127.0.0.1.

Inside the image: `arbiter migrate`, a worker evaluating deterministic and
sandboxed (python3 test-suite) jobs through the test Redis and PostgreSQL,
and the sandbox's hostile-program tests (test-sandbox, built on the host,
mounted read-only). Reports what the sandbox found for cgroups, the image's
size and what each language costs. Exit 77 (skip) when podman cannot run.
"""
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# The host-side `arbiter migrate` uses the same build tree as test-sandbox
# (workerkit reads ARBITER_BIN when it is imported).
if len(sys.argv) > 1 and "ARBITER_BIN" not in os.environ:
    os.environ["ARBITER_BIN"] = os.path.join(os.path.abspath(sys.argv[1]), "worker", "arbiter")

from services import Services  # noqa: E402
from tap import diag, done, ok  # noqa: E402
from workerkit import SPEC_X, Arena, bulk, exactly_once, migrate, wait_for  # noqa: E402

TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
WORK = os.environ.get("ARBITER_IMAGE_WORK", "/var/tmp/arbiter-image")
K8S = ["--read-only", "--tmpfs", "/tmp:rw,size=1g,mode=1777", "--cap-drop=ALL",
       "--cap-add=SYS_ADMIN,SETUID,SETGID,CHOWN,DAC_OVERRIDE,MKNOD",
       "--security-opt", "apparmor=unconfined", "--memory=4g", "--network=host"]
TS_SPEC = {"evaluator": "test-suite", "dimensions": [{"key": "correctness", "weight": 1}],
           "thresholds": {"win": 700, "draw": 400},
           "test_suite": {"language": "python3", "dimension": "correctness",
                          "cases": [{"name": "add", "stdin": "1 2\n", "expected_stdout": "3\n", "weight": 1}],
                          "limits": {"cpu_ms": 2000, "wall_ms": 5000, "memory_mb": 128,
                                     "processes": 16, "output_kb": 64}}}


# test-sandbox checks that fail inside the container with the manifest's
# capability set and no writable cgroup (reported to the sandbox issue; any
# other failure fails this smoke run):
#  - no CAP_SETPCAP, so the sandbox cannot empty the capability bounding set
#    (the run still has no effective capability: unprivileged uid, no_new_privs);
#  - without cgroups, CPU and memory figures come from rusage/rlimits only, and
#    RLIMIT_NPROC counts per uid, so two runs sharing a uid can starve each other.
KNOWN_IN_CONTAINER = ("empty capability bounding set", "cpu loop: cpu_ms", "memory_kb 0 kB",
                      "shared uids:")


def unified_memory_cgroup():
    """True when the host is cgroup v2 only with the memory controller: then a
    container with its own cgroup namespace can get per-run memory limits. On a
    host whose memory controller is bound to cgroup v1 (hybrid layout) it
    cannot, and the sandbox refuses to run untrusted code unless the operator
    opts in with ARBITER_SANDBOX_ALLOW_UNSAFE_MEMORY=1 (worker/README.md "Sandbox", Delegation)."""
    try:
        with open("/sys/fs/cgroup/cgroup.controllers") as f:
            return "memory" in f.read().split()
    except OSError:
        return False


def podman(*args, **kw):
    env = dict(os.environ, CONTAINERS_CONF=os.path.join(WORK, "containers.conf"),
               CONTAINERS_STORAGE_CONF=os.path.join(WORK, "storage.conf"))
    return subprocess.run(["podman"] + list(args), env=env, capture_output=True, text=True, **kw)


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(TOP, "build"))
    t0 = time.monotonic()
    rev = subprocess.run(["git", "-C", TOP, "rev-parse", "HEAD"], capture_output=True,
                         text=True).stdout.strip() or "unknown"
    env = dict(os.environ)
    if os.geteuid() == 0:
        env.setdefault("ARBITER_IMAGE_INSTALL", "1")
    b = subprocess.run([os.path.join(TOP, "deploy", "build-image")], env=env,
                       capture_output=True, text=True, timeout=1800)
    sys.stderr.write(b.stdout[-3000:] + b.stderr[-3000:])
    if b.returncode == 77:
        print("1..0 # SKIP %s" % (b.stdout.strip().splitlines() or ["podman cannot run"])[-1])
        return 77
    m = re.search(r"^image: (\S+):(\S+) (\d+)$", b.stdout, re.M)
    if not ok(b.returncode == 0 and m, "deploy/build-image builds the image",
              (b.stdout + b.stderr)[-2000:]):
        return done()
    repo, version, size = m.group(1), m.group(2), int(m.group(3))
    image = "%s:%s" % (repo, version)
    bt = re.search(r"^build: (\d+) s", b.stdout, re.M)
    diag("build-image %.0f s (podman build %s s); image %s: %.0f MB" %
         (time.monotonic() - t0, bt.group(1) if bt else "?", image, size / 1e6))

    insp = json.loads(podman("image", "inspect", image).stdout or "[{}]")[0]
    labels = (insp.get("Config") or {}).get("Labels") or insp.get("Labels") or {}
    ok(labels.get("org.opencontainers.image.version") == version and
       labels.get("org.opencontainers.image.revision") == rev and
       "org.opencontainers.image.source" in labels,
       "OCI labels: version %s, revision, source" % version, labels)
    ok(any(t.endswith(":" + version) for t in insp.get("RepoTags", [])),
       "tagged with the version, not only latest", insp.get("RepoTags"))

    r = podman("run", "--rm", *K8S, image, "--help")
    ok(r.returncode == 0 and "worker" in r.stdout + r.stderr, "arbiter --help runs in the image")

    with Services() as s:
        r = podman("run", "--rm", *K8S, "-e", "ARBITER_DATABASE_URL=" + s.database_url, image, "migrate")
        ok(r.returncode == 0, "arbiter migrate in the container", r.stdout + r.stderr)
        migrate(s)          # a no-op now: proves the container applied everything
        a = Arena(s)
        ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
        ts = a.challenge(TS_SPEC, {}, difficulty="contender")
        ags = [a.agent() for _ in range(5)]
        subs = bulk(a, ags, ch, 200)
        m1 = a.match(ags[0], ts)
        ts_sub = a.submission(m1, ags[0], {"files": {"main.py": "a,b=map(int,input().split());print(a+b)"}})
        a.enqueue(ts_sub)
        name = "arbiter-smoke-%d" % os.getpid()
        unsafe = []
        if not unified_memory_cgroup():
            # This host's memory controller is cgroup v1: no container here can have a
            # memory cgroup, and the sandbox rightly refuses. The smoke run checks the
            # image end to end with the documented opt-in; real per-run limits inside a
            # container are checked by the cgroup-v2 guest's container mode (test/guest).
            diag("host memory controller is cgroup v1 (hybrid layout): the worker container runs "
                 "with ARBITER_SANDBOX_ALLOW_UNSAFE_MEMORY=1")
            unsafe = ["-e", "ARBITER_SANDBOX_ALLOW_UNSAFE_MEMORY=1"]
        r = podman("run", "-d", "--name", name, *K8S, *unsafe,
                   "-e", "ARBITER_REDIS_URL=" + s.redis_url, "-e", "ARBITER_DATABASE_URL=" + s.database_url,
                   "-e", "ARBITER_METRICS_ADDR=127.0.0.1:0", "-e", "ARBITER_WORKER_ID=image",
                   "-e", "ARBITER_RATE_LIMIT=0", "-e", "ARBITER_SANDBOX_SLOTS=2", image, "worker")
        try:
            ok(r.returncode == 0, "worker container started", r.stderr)
            fin = a.wait_final(subs + [ts_sub], 120)
            logs = podman("logs", name)
            out = logs.stdout + logs.stderr
            ok(fin, "the worker in the container evaluated 201 jobs", out[-2000:])
            problems = exactly_once(a, subs + [ts_sub], ags)
            ok(not problems, "exactly once", "\n".join(problems[:5]))
            row = a.q1("SELECT r.score, r.evaluation_log::text FROM evaluation_results r "
                       "WHERE r.submission_id = %s", ts_sub)
            ok(row and row[0] == 1000, "the sandboxed python3 test-suite job is accepted in the container",
               row)
            sb = [l for l in out.splitlines() if "sandbox" in l and ("ready" in l or "unavailable" in l)]
            diag("sandbox inside the container: %s" % (json.loads(sb[0])["msg"] if sb else "no line"))
            ok(sb and "ready" in sb[0], "the sandbox works in the container", sb)
            st = podman("stop", "-t", "40", name)
            ex = podman("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip()
            ok(st.returncode == 0 and ex == "0", "SIGTERM: the worker drains and exits 0 (%s)" % ex)
        finally:
            podman("rm", "-f", name)

    exe = os.path.join(build, "test", "test-sandbox")
    if not os.path.exists(exe):
        ok(False, "test-sandbox built in %s" % build)
    elif not unified_memory_cgroup():
        # No memory cgroup the container can use: the sandbox must refuse to run untrusted
        # code (an unenforceable memory limit) and say how to fix it; its hostile-program
        # suite then runs in the cgroup-v2 guest's container mode.
        r = podman("run", "--rm", *K8S, "-v", "%s:%s:ro" % (TOP, TOP), "-w", TOP,
                   "--entrypoint", exe, image, timeout=300)
        out = r.stdout + r.stderr
        ok("no usable memory cgroup" in out and "ARBITER_SANDBOX_ALLOW_UNSAFE_MEMORY" in out
           and not re.search(r"^ok ", r.stdout, re.M),
           "host memory controller is cgroup v1: inside the container the sandbox refuses to run "
           "untrusted code and names the fix (its hostile-program suite runs in the cgroup-v2 "
           "guest's container mode)", out[-1500:])
    else:
        t1 = time.monotonic()
        r = podman("run", "--rm", *K8S, "-v", "%s:%s:ro" % (TOP, TOP), "-w", TOP,
                   "--entrypoint", exe, image, timeout=900)
        nok = len(re.findall(r"^ok ", r.stdout, re.M))
        bad = [re.sub(r"^not ok \d+ - ", "", x) for x in re.findall(r"^not ok .*", r.stdout, re.M)]
        known = [x for x in bad if x.startswith(KNOWN_IN_CONTAINER)]
        new = [x for x in bad if not x.startswith(KNOWN_IN_CONTAINER)]
        for x in known:
            diag("test-sandbox in the container, known (the sandbox issue): not ok - %s" % x[:160])
        ok(nok > 100 and not new,
           "the sandbox's hostile-program tests pass inside the container (%d ok, %d known "
           "differences without cgroups/SETPCAP)" % (nok, len(known)),
           "\n".join(new[:10]) + r.stderr[-1500:])
        for line in r.stdout.splitlines():
            if line.startswith("# ") and ("cgroup" in line or "rlimit" in line):
                diag("test-sandbox: " + line[2:])
                break
        diag("test-sandbox in the container: %.0f s" % (time.monotonic() - t1))

    # What each language costs: installed size of its packages in the image.
    r = podman("run", "--rm", "--entrypoint", "dpkg-query", image, "-Wf", "${Installed-Size}\t${Package}\n")
    sizes = {p: int(k) for k, p in (l.split("\t") for l in r.stdout.splitlines() if "\t" in l)}
    groups = {"python3": r"^(python3|libpython3|python3\.11)",
              "c (gcc, libc6-dev, binutils)": r"^(gcc|cpp|libgcc-12-dev|libc6-dev|libc-dev-bin|binutils|"
                                              r"libbinutils|libctf|libgprofng|libasan|liblsan|libtsan|libubsan|"
                                              r"libitm|libquadmath|libcc1|libisl|libmpc|libmpfr|libgomp|"
                                              r"libatomic|linux-libc-dev|libcrypt-dev|libnsl-dev|libtirpc-dev|rpcsvc)",
              "node": r"^(nodejs|libnode|libuv1$|libc-ares|libbrotli|libicu|node-)"}
    for g, rx in groups.items():
        kb = sum(v for p, v in sizes.items() if re.match(rx, p))
        diag("language %s: %.0f MB installed" % (g, kb / 1024))
    diag("image %s: %.0f MB (podman image inspect .Size); all dpkg packages %.0f MB" %
         (image, size / 1e6, sum(sizes.values()) / 1024))
    diag("image smoke total %.0f s" % (time.monotonic() - t0))
    return done()


if __name__ == "__main__":
    raise SystemExit(main())
