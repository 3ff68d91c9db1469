#!/usr/bin/python3
"""Checks of deploy/ against each other and against the binary (TAP on stdout).

- Every Kubernetes manifest parses as YAML and has apiVersion/kind/name; the
  kustomization lists files that exist.
- The Deployment: probes on /healthz and /readyz at the metrics port that
  ARBITER_METRICS_ADDR really binds, terminationGracePeriodSeconds covering the
  drain deadline plus a margin, the sandbox's security context and nothing
  more (root, no privileged, no host namespaces or hostPath, capabilities drop
  ALL + an allow-listed set including SYS_ADMIN, read-only root).
- The PDB and the ScaledObject select/target that Deployment; the KEDA
  triggers are redis-streams on {prefix}:jobs / {prefix}-workers, one on lag.
- The language ConfigMap holds exactly deploy/languages.json.
- The Grafana dashboard parses as JSON and every metric it (or the KEDA file,
  or deploy/README.md) names is one the binary exports (`arbiter metrics-names`,
  cross-checked against a real /metrics rendering in test_ops.py).
- The systemd unit passes `systemd-analyze verify` (skipped when absent), its
  stop timeout covers the drain deadline, and its capability bounding set is
  the Deployment's.
- deploy/redis/redis.conf starts a real redis-server with AOF everysec.
- The Dockerfile is multi-stage on Debian 12 and its runtime stage has no
  build-only packages.
"""
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import yaml

BIN = os.environ.get("ARBITER_BIN", "build/worker/arbiter")
TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEPLOY = os.path.join(TOP, "deploy")

import docs
import tap
from tap import ok, skip


def load_manifests():
    docs = []
    for path in sorted(glob.glob(os.path.join(DEPLOY, "k8s", "*.yaml"))):
        try:
            with open(path) as f:
                for d in yaml.safe_load_all(f):
                    if d is not None:
                        docs.append((os.path.basename(path), d))
            ok(True, "%s parses as YAML" % os.path.basename(path))
        except yaml.YAMLError as e:
            ok(False, "%s parses as YAML" % os.path.basename(path), e)
    return docs


def find(docs, kind, name=None):
    for fname, d in docs:
        if d.get("kind") == kind and (name is None or d["metadata"]["name"] == name):
            return d
    return None


def env_of(container):
    return {e["name"]: e.get("value") for e in container.get("env", [])}


# What the sandbox needs (worker/sandbox.c), established by running it under
# setpriv with smaller sets; check_sandbox_caps re-checks it when it can.
ALLOWED_CAPS = {"SYS_ADMIN", "SETUID", "SETGID", "CHOWN", "DAC_OVERRIDE", "MKNOD"}


def check_manifests(docs):
    for fname, d in docs:
        if d.get("kind") == "Kustomization":
            continue
        ok(all(k in d for k in ("apiVersion", "kind", "metadata")) and d["metadata"].get("name"),
           "%s: %s has apiVersion, kind, metadata.name" % (fname, d.get("kind")))

    kust_path = os.path.join(DEPLOY, "k8s", "kustomization.yaml")
    with open(kust_path) as f:
        kust = yaml.safe_load(f)
    missing = [r for r in kust.get("resources", [])
               if not os.path.exists(os.path.join(DEPLOY, "k8s", r))]
    ok(not missing, "kustomization resources exist", missing)
    if shutil.which("kubectl"):
        r = subprocess.run(["kubectl", "kustomize", os.path.join(DEPLOY, "k8s")],
                           capture_output=True, text=True, timeout=60)
        ok(r.returncode == 0 and "kind: Deployment" in r.stdout, "kubectl kustomize renders",
           r.stderr[-2000:])
    else:
        skip("kubectl kustomize renders", "kubectl not installed")

    dep = find(docs, "Deployment")
    if not ok(dep is not None, "a Deployment exists"):
        return None
    spec = dep["spec"]["template"]["spec"]
    labels = dep["spec"]["template"]["metadata"]["labels"]
    ok(all(labels.get(k) == v for k, v in dep["spec"]["selector"]["matchLabels"].items()),
       "Deployment selector matches its pod labels")
    worker = next((c for c in spec["containers"] if c["name"] == "worker"), None)
    if not ok(worker is not None, "worker container exists"):
        return None
    env = env_of(worker)

    # Metrics port: ARBITER_METRICS_ADDR, containerPort and both probes agree.
    addr = env.get("ARBITER_METRICS_ADDR", "")
    m = re.fullmatch(r"(?:\[[0-9a-fA-F:]+\]|[0-9.]+):(\d+)", addr)
    ok(m is not None and not addr.startswith("127.") and not addr.startswith("[::1]"),
       "ARBITER_METRICS_ADDR listens beyond loopback (probes come from the kubelet)", addr)
    port = int(m.group(1)) if m else None
    ports = {p["name"]: p["containerPort"] for p in worker.get("ports", [])}
    ok(ports.get("metrics") == port, "containerPort 'metrics' is the listener's port", ports)
    live = worker.get("livenessProbe", {}).get("httpGet", {})
    ready = worker.get("readinessProbe", {}).get("httpGet", {})
    ok(live.get("path") == "/healthz" and live.get("port") in ("metrics", port),
       "liveness probe on /healthz", live)
    ok(ready.get("path") == "/readyz" and ready.get("port") in ("metrics", port),
       "readiness probe on /readyz", ready)

    # Drain deadline vs grace period.
    drain_s = int(env.get("ARBITER_DRAIN_MS") or 30000) / 1000.0
    grace = spec.get("terminationGracePeriodSeconds", 30)
    ok(drain_s + 5 <= grace <= drain_s + 60,
       "terminationGracePeriodSeconds (%s) = drain (%gs) + margin" % (grace, drain_s))

    # Security context: what the sandbox needs and nothing more.
    sc = worker.get("securityContext", {})
    caps = sc.get("capabilities", {})
    ok(sc.get("privileged") in (None, False), "not privileged")
    ok(caps.get("drop") == ["ALL"], "capabilities: drop ALL")
    add = set(caps.get("add", []))
    ok(add == ALLOWED_CAPS, "capabilities added are exactly the sandbox's", sorted(add))
    ok(sc.get("runAsUser") == 0, "runs as root (namespaces, mounts, setuid to the run's uid)")
    ok(sc.get("readOnlyRootFilesystem") is True, "read-only root filesystem")
    ok(sc.get("seccompProfile", {}).get("type") == "RuntimeDefault", "seccomp RuntimeDefault")
    ok(not any(spec.get(k) for k in ("hostPID", "hostIPC", "hostNetwork")),
       "no host namespaces")
    ok(not any("hostPath" in v for v in spec.get("volumes", [])), "no hostPath volume")
    ok(spec.get("automountServiceAccountToken") is False, "no service-account token")
    for c in spec.get("initContainers", []):
        isc = c.get("securityContext", {})
        ok(isc.get("runAsNonRoot") is True and isc.get("capabilities", {}).get("drop") == ["ALL"]
           and not isc.get("capabilities", {}).get("add"),
           "init container %s is unprivileged" % c["name"])

    # Secrets come from a Secret, never inline; the Redis URL is made of variables
    # (the password one from the Secret) around the address written once.
    envs = {e["name"]: e for e in worker.get("env", [])}
    for e in worker.get("env", []):
        if e["name"] in ("ARBITER_DATABASE_URL", "ARBITER_REDIS_PASSWORD", "ARBITER_REDIS_USERNAME"):
            ok("valueFrom" in e and "value" not in e, "%s comes from a Secret" % e["name"])
    rurl = envs.get("ARBITER_REDIS_URL", {})
    if "value" in rurl:
        refs = re.findall(r"\$\(([A-Z_]+)\)", rurl["value"])
        ok("ARBITER_REDIS_PASSWORD" in refs and "ARBITER_REDIS_ADDRESS" in refs and
           all(r in envs for r in refs), "ARBITER_REDIS_URL is built from the address and the "
           "Secret's password (no password inline)", rurl["value"])
        ok(rurl["value"].startswith("rediss://") and "ssl_ca_certs=" in rurl["value"],
           "the worker talks TLS to Redis and verifies it against a CA", rurl["value"])
        ok(all(list(envs).index(r) < list(envs).index("ARBITER_REDIS_URL") for r in refs),
           "the variables ARBITER_REDIS_URL uses are defined before it (Kubernetes expands only those)")
    else:
        ok("valueFrom" in rurl, "ARBITER_REDIS_URL comes from a Secret")

    # The language table ConfigMap is mounted and matches deploy/languages.json.
    cm_names = [v["configMap"]["name"] for v in spec.get("volumes", []) if "configMap" in v]
    cm = find(docs, "ConfigMap", cm_names[0]) if cm_names else None
    ok(cm is not None, "the mounted ConfigMap is in the manifests", cm_names)
    lang_path = os.path.join(DEPLOY, "languages.json")
    if cm is not None and os.path.exists(lang_path):
        with open(lang_path) as f:
            want = json.load(f)
        got = json.loads(cm["data"]["languages.json"])
        ok(got == want, "ConfigMap languages.json equals deploy/languages.json "
           "(regenerate: see deploy/README.md)")
        mount = next((vm for vm in worker.get("volumeMounts", [])
                      if vm["name"] in [v["name"] for v in spec["volumes"]
                                        if v.get("configMap", {}).get("name") == cm["metadata"]["name"]]),
                     None)
        ok(mount is not None and os.path.join(mount["mountPath"], "languages.json")
           == env.get("ARBITER_LANGUAGES_FILE"), "ARBITER_LANGUAGES_FILE points into the mount")
    elif cm is not None:
        skip("ConfigMap languages.json equals deploy/languages.json", "deploy/languages.json missing")

    pdb = find(docs, "PodDisruptionBudget")
    ok(pdb is not None and all(labels.get(k) == v for k, v in
                               pdb["spec"]["selector"]["matchLabels"].items()),
       "PodDisruptionBudget selects the worker pods")

    so = find(docs, "ScaledObject")
    if ok(so is not None, "a KEDA ScaledObject exists"):
        ok(so["spec"]["scaleTargetRef"]["name"] == dep["metadata"]["name"],
           "ScaledObject targets the Deployment")
        prefix = env.get("ARBITER_PREFIX") or "arbiter"
        trig = so["spec"]["triggers"]
        ok(all(t["type"] == "redis-streams" for t in trig), "triggers are redis-streams")
        # The manifest's Redis is a single server (or Sentinel): plain key names,
        # unless it asks for tagged ones (worker/README.md "Redis keys").
        tagged = env.get("ARBITER_REDIS_KEYS") == "tagged" or "+cluster" in env.get("ARBITER_REDIS_URL", "")
        base = prefix if not tagged or re.search(r"\{[^}]+\}", prefix) else "{%s}" % prefix
        ok(all(t["metadata"]["stream"] == base + ":jobs" and
               t["metadata"].get("consumerGroup") == prefix + "-workers" for t in trig),
           "triggers watch {prefix}:jobs and group {prefix}-workers")
        ok(any("lagCount" in t["metadata"] for t in trig), "one trigger scales on consumer-group lag")
        ok(so["spec"].get("minReplicaCount", 0) >= 1,
           "minReplicaCount >= 1 (the reconciler and delayed jobs need a worker)")
        auth = find(docs, "TriggerAuthentication")
        ok(auth is not None and all(t.get("authenticationRef", {}).get("name") ==
                                    auth["metadata"]["name"] for t in trig),
           "triggers authenticate through the TriggerAuthentication")
        params = {p["parameter"] for p in (auth or {}).get("spec", {}).get("secretTargetRef", [])}
        ok({"username", "password", "ca"} <= params,
           "the TriggerAuthentication carries username, password and the TLS CA", params)
        envs = {e["name"]: e for e in worker.get("env", [])}
        ok(all("address" not in t["metadata"] and "host" not in t["metadata"] and
               t["metadata"].get("addressFromEnv") in envs and
               t["metadata"].get("enableTLS") == "true" for t in trig),
           "every trigger reads the Redis address from the worker's environment "
           "(written once) and uses TLS")
    return dep


def exported_names():
    r = subprocess.run([BIN, "metrics-names"], capture_output=True, text=True, timeout=30)
    ok(r.returncode == 0 and r.stdout.strip(), "arbiter metrics-names runs", r.stderr)
    return set(r.stdout.split())


METRIC_RE = re.compile(r"\b((?:arbiter|process)_[a-z0-9_]+)\b")


def base_name(name, names):
    if name in names:
        return name
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and name[:-len(suffix)] in names:
            return name[:-len(suffix)]
    return None


def check_dashboard(names):
    path = os.path.join(DEPLOY, "grafana", "arbiter-dashboard.json")
    try:
        with open(path) as f:
            dash = json.load(f)
        ok(True, "Grafana dashboard parses as JSON")
    except (OSError, ValueError) as e:
        ok(False, "Grafana dashboard parses as JSON", e)
        return
    ok(dash.get("uid") and dash.get("title") and dash.get("panels"), "dashboard has uid, title, panels")
    exprs = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                if t.get("expr"):
                    exprs.append((p.get("title"), t["expr"]))
            walk(p.get("panels", []))
    walk(dash["panels"])
    ok(len(exprs) >= 15, "dashboard has queries (%d)" % len(exprs))
    used = set()
    bad = []
    for title, e in exprs:
        for name in METRIC_RE.findall(e):
            b = base_name(name, names)
            if b is None:
                bad.append("%s: %s" % (title, name))
            else:
                used.add(b)
        for labels in re.findall(r"by \(([^)]*)\)", e):
            for lab in (x.strip() for x in labels.split(",")):
                if lab not in ("le", "evaluator", "outcome", "reason", "decision", "target",
                               "direction", "instance", "job", "version", "cause"):
                    bad.append("%s: unknown label %s" % (title, lab))
    ok(not bad, "every metric and label the dashboard queries is exported", "\n".join(bad))
    family = {n for n in names if n.startswith("arbiter_")}
    ok(family <= used, "every arbiter_* family is on the dashboard", sorted(family - used))
    ids = [p["id"] for p in dash["panels"]]
    ok(len(ids) == len(set(ids)), "panel ids are unique")


def check_text_mentions(names):
    for rel in ("k8s/keda-scaledobject.yaml", "README.md", "k8s/deployment.yaml"):
        path = os.path.join(DEPLOY, rel)
        if not os.path.exists(path):
            skip("metric names in deploy/%s exist" % rel, "file missing")
            continue
        with open(path) as f:
            text = f.read()
        # Not metric names: link targets (anchors such as #...-arbiter_metrics_addr), file
        # names (scripts/arbiter_conn.py), and the schema's table and channel names.
        text = re.sub(r"\]\([^)]*\)|[\w/.-]+\.py\b", "", text)
        bad = sorted({n for n in METRIC_RE.findall(text) if base_name(n, names) is None
                      and n not in ("arbiter_migrations", "arbiter_results")})
        ok(not bad, "metric names mentioned in deploy/%s exist" % rel, bad)


def unit_value(text, key):
    vals = re.findall(r"^%s=(.*)$" % re.escape(key), text, re.M)
    return vals[-1].strip() if vals else None


def check_systemd(dep):
    path = os.path.join(DEPLOY, "systemd", "arbiter-worker.service")
    with open(path) as f:
        text = f.read()
    stop = unit_value(text, "TimeoutStopSec")
    ok(stop is not None and int(stop.rstrip("s")) >= 30 + 5, "TimeoutStopSec covers the drain deadline")
    ok(unit_value(text, "KillMode") == "mixed", "KillMode=mixed (SIGTERM to the worker first)")
    bset = set((unit_value(text, "CapabilityBoundingSet") or "").split())
    ok("CAP_SYS_ADMIN" in bset and {c[4:] for c in bset} <= ALLOWED_CAPS,
       "capability bounding set is the sandbox's", sorted(bset))
    if dep is not None:
        worker = next(c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == "worker")
        kcaps = set(worker["securityContext"]["capabilities"]["add"])
        ok({c[4:] for c in bset} == kcaps, "systemd and Kubernetes grant the same capabilities",
           "%s vs %s" % (sorted(bset), sorted(kcaps)))
    ok(unit_value(text, "MemoryDenyWriteExecute") in (None, "no"),
       "no MemoryDenyWriteExecute (inherited by node's JIT in the sandbox)")
    ok(unit_value(text, "PrivateDevices") in (None, "no"),
       "no PrivateDevices (it drops CAP_MKNOD, which the sandbox's /dev needs)")
    ok(unit_value(text, "Delegate") == "yes", "cgroup subtree delegated for per-run limits")
    rn = (unit_value(text, "RestrictNamespaces") or "").split()
    ok(set(rn) >= {"mnt", "pid", "ipc", "uts", "net"} and "user" not in rn,
       "RestrictNamespaces allows the sandbox's namespaces only")

    tool = shutil.which("systemd-analyze")
    if not tool:
        skip("systemd-analyze verify", "systemd-analyze not installed")
        return
    tmp = tempfile.mkdtemp(prefix="arbiter-unit-")
    try:
        unit = os.path.join(tmp, "arbiter-worker.service")
        with open(unit, "w") as f:
            f.write(text.replace("/usr/local/bin/arbiter", os.path.abspath(BIN)))
        r = subprocess.run([tool, "verify", unit], capture_output=True, text=True, timeout=60)
        complaints = [l for l in (r.stdout + r.stderr).splitlines() if "arbiter-worker" in l]
        ok(r.returncode == 0 and not complaints, "systemd-analyze verify", r.stdout + r.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_redis_conf():
    path = os.path.join(DEPLOY, "redis", "redis.conf")
    with open(path) as f:
        text = f.read()
    ok(re.search(r"^appendonly yes$", text, re.M) and re.search(r"^appendfsync everysec$", text, re.M),
       "redis.conf: appendonly yes, appendfsync everysec")
    ok(re.search(r"^maxmemory-policy noeviction$", text, re.M), "redis.conf: noeviction")
    if not shutil.which("redis-server"):
        skip("redis-server accepts redis.conf", "redis-server not installed")
        return
    tmp = tempfile.mkdtemp(prefix="arbiter-redisconf-")
    sock = os.path.join(tmp, "redis.sock")
    p = subprocess.Popen(["redis-server", path, "--port", "0", "--bind", "127.0.0.1",
                          "--unixsocket", sock, "--dir", tmp, "--daemonize", "no"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        deadline = time.time() + 15
        while time.time() < deadline and not os.path.exists(sock) and p.poll() is None:
            time.sleep(0.05)

        def get(key):
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(5)
            for _ in range(100):   # the socket file appears a moment before it accepts
                try:
                    s.connect(sock)
                    break
                except ConnectionRefusedError:
                    time.sleep(0.05)
            s.sendall(("CONFIG GET %s\r\n" % key).encode())
            data = b""
            while data.count(b"\r\n") < 5:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
            s.close()
            return data.decode().split("\r\n")[4]
        if ok(os.path.exists(sock), "redis-server starts with deploy/redis/redis.conf",
              p.stdout.read() if p.poll() is not None else None):
            ok(get("appendonly") == "yes" and get("appendfsync") == "everysec",
               "running redis: AOF on, fsync everysec")
            ok(get("maxmemory-policy") == "noeviction", "running redis: noeviction")
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def check_dockerfile():
    with open(os.path.join(DEPLOY, "Dockerfile")) as f:
        text = f.read()
    froms = re.findall(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?", text, re.M | re.I)
    ok(len(froms) >= 2, "Dockerfile is multi-stage (%d stages)" % len(froms))
    base = re.search(r"^ARG DEBIAN=(\S+)", text, re.M)
    images = [base.group(1) if base and f[0] == "${DEBIAN}" else f[0] for f in froms]
    ok(all(re.match(r"debian:(12|bookworm)", i) for i in images), "every stage is Debian 12", images)
    runtime = text[text.rfind("\nFROM"):]
    pkgs = re.findall(r"\b([a-z0-9.+-]+-dev)\b", runtime)
    ok(set(pkgs) <= {"libc6-dev"}, "runtime stage has no -dev package but libc6-dev (the C language)",
       pkgs)
    ok("meson" not in runtime and "ninja" not in runtime, "runtime stage has no build tools")
    ok("COPY --from=build" in runtime, "runtime copies the binary from the build stage")
    ok(re.search(r'^ENTRYPOINT \["/usr/local/bin/arbiter"\]', runtime, re.M), "ENTRYPOINT is arbiter")


def check_sandbox_caps(dep):
    """A real test-suite evaluation (sandbox) with exactly the Deployment's capabilities."""
    name = "sandbox runs with exactly the manifest's capabilities"
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        skip(name, "needs root and setpriv")
        return
    if dep is None:
        skip(name, "no Deployment")
        return
    worker = next(c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == "worker")
    caps = worker["securityContext"]["capabilities"]["add"]
    tmp = tempfile.mkdtemp(prefix="arbiter-caps-")
    try:
        spec = {"evaluator": "test-suite",
                "dimensions": [{"key": "correctness", "weight": 1}],
                "test_suite": {"language": "sh", "dimension": "correctness",
                               "cases": [{"name": "hi", "stdin": "", "expected_stdout": "hi\n",
                                          "weight": 1}]}}
        sub = {"answer": {"files": {"main.sh": "read x || true; echo hi\n"}}}
        for fname, obj in (("spec.json", spec), ("sub.json", sub)):
            with open(os.path.join(tmp, fname), "w") as f:
                json.dump(obj, f)
        cmd = [os.path.abspath(BIN), "score", "--spec", os.path.join(tmp, "spec.json"),
               "--submission", os.path.join(tmp, "sub.json")]
        env = dict(os.environ)
        lang = os.path.join(DEPLOY, "languages.json")
        if os.path.exists(lang):
            env["ARBITER_LANGUAGES_FILE"] = lang
        full = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
        if full.returncode != 0 or '"score": 1000' not in full.stdout.replace('"score":1000', '"score": 1000'):
            skip(name, "`arbiter score` cannot run a test-suite here (exit %d): %s" %
                 (full.returncode, (full.stderr.strip().splitlines() or [""])[-1][:200]))
            return
        bset = "-all," + ",".join("+" + c.lower() for c in caps)
        r = subprocess.run(["setpriv", "--bounding-set", bset, "--inh-caps=-all"] + cmd,
                           capture_output=True, text=True, timeout=120, env=env)
        ok(r.returncode == 0 and r.stdout.replace('"score":1000', '"score": 1000').count('"score": 1000'),
           name + " (%s)" % ",".join(caps), r.stdout[-1000:] + r.stderr[-2000:])
        fewer = [c for c in caps if c != "SYS_ADMIN"][:1]
        if fewer:
            bset = "-all," + ",".join("+" + c.lower() for c in caps if c not in fewer)
            r = subprocess.run(["setpriv", "--bounding-set", bset, "--inh-caps=-all"] + cmd,
                               capture_output=True, text=True, timeout=120, env=env)
            ok(r.returncode != 0, "and fails without %s (the set is not larger than needed)" % fewer[0],
               r.stdout[-500:])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_config_doc():
    """`## Operations` (README.md or deploy/README.md) documents every key of worker/config.c with its default."""
    cfg = os.path.join(TOP, "worker", "config.c")
    if not os.path.exists(cfg):
        skip("configuration reference matches worker/config.c", "config.c missing")
        return
    src = open(cfg).read()
    start = src.find("static const struct cfg_key keys[]")
    tbl = src[start:src.find("\n};", start)]
    keys = re.findall(r'\{\s*"(ARBITER_[A-Z_]+)",\s*\w+,\s*OFF\(\w+\),\s*(NULL|"[^"]*")', tbl)
    ops = docs.section("Operations") or ""     # README.md or deploy/README.md
    rows = {m.group(1): m.group(2).strip() for m in
            re.finditer(r"^\| `(ARBITER_[A-Z_]+)` \| `--[a-z-]+` \| ([^|]*) \|", ops, re.M)}
    bad = []
    for env, default in keys:
        want = "hostname-pid" if default == "NULL" else (
            "`%s`" % default.strip('"') if default.strip('"') else "(empty)")
        if env not in rows:
            bad.append("%s missing" % env)
        elif rows[env] != want:
            bad.append("%s: README says %s, config.c %s" % (env, rows[env], want))
    ok(keys and not bad, "README configuration reference matches worker/config.c (%d keys)" % len(keys),
       "\n".join(bad))
    extra = sorted(set(rows) - {k for k, _ in keys})
    ok(not extra, "README documents no setting config.c lacks", extra)


def main():
    docs = load_manifests()
    dep = check_manifests(docs)
    names = exported_names()
    check_dashboard(names)
    check_text_mentions(names)
    check_systemd(dep)
    check_sandbox_caps(dep)
    check_redis_conf()
    check_dockerfile()
    check_config_doc()
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
