"""The image store: `arbiter image import/list/rm` on OCI archives built here, and
every hostile-layer rule of issue #27 (refused, or neutralised, at import; nothing
outside the store is ever touched)."""
import gzip
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import ociimage  # noqa: E402
from tap import ok, diag, done  # noqa: E402

BIN = os.environ.get("ARBITER_BIN", "build/worker/arbiter")
top = tempfile.mkdtemp(prefix="arbiter-image-test-")
store = os.path.join(top, "store")
canary = os.path.join(top, "canary")      # a host directory layers must never reach
os.makedirs(canary)
with open(os.path.join(canary, "victim"), "w") as f:
    f.write("host file\n")


def run(*args, env=None):
    e = dict(os.environ, ARBITER_IMAGE_DIR=store)
    e.update(env or {})
    return subprocess.run([BIN, "image"] + list(args), capture_output=True, text=True, env=e,
                          timeout=120)


def imp(data, env=None, name="img.tar"):
    return ociimage.import_archive(BIN, store, data, os.path.join(top, name), env)


def store_clean():
    """No image and no leftover temporary directory in the store."""
    return [n for n in os.listdir(store)] if os.path.isdir(store) else []


def refused(label, data, want, env=None):
    before = set(store_clean())
    p = imp(data, env)
    after = set(store_clean())
    ok(p.returncode == 1 and want in p.stderr and after == before,
       "refused: %s (%s)" % (label, want), p.stdout + p.stderr + " store: %s" % sorted(after - before))


def canary_intact():
    return sorted(os.listdir(canary)) == ["victim"] and \
        open(os.path.join(canary, "victim")).read() == "host file\n"


# ---- a good image ------------------------------------------------------------------
base = ociimage.busybox_layer('echo hi\n')
data, digest = ociimage.archive([base, [{"name": "app/extra", "data": b"x"},
                                         {"name": "app/hl", "type": "hardlink", "target": "app/extra"}]],
                                compress=True)
p = imp(data)
last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
ok(p.returncode == 0 and last == digest, "import prints the manifest digest as the last line",
   p.stdout + p.stderr)
root = os.path.join(store, "sha256-" + digest[7:], "rootfs")
ok(os.path.isfile(os.path.join(root, "bin/busybox")) and
   os.readlink(os.path.join(root, "bin/sh")) == "busybox" and
   open(os.path.join(root, "app/extra")).read() == "x" and
   os.stat(os.path.join(root, "app/hl")).st_ino == os.stat(os.path.join(root, "app/extra")).st_ino,
   "the layers are unpacked into rootfs/ (a hard link inside the image works)")
ok(all(os.path.isdir(os.path.join(root, d)) for d in ("dev", "proc", "tmp", "submission", "output")),
   "the run's mount points exist in the image")
meta = json.load(open(os.path.join(store, "sha256-" + digest[7:], "image.json")))
ok(meta["cmd"] == ["/bin/sh", "-c", "true"] and meta["env"] == ["PATH=/bin"] and
   meta["workdir"] == "/app" and meta["digest"] == digest, "image.json keeps cmd, env, workdir", meta)
ok(not [n for n in os.listdir(store) if n.startswith(".")], "no temporary directory is left")
p = run("list")
ok(p.returncode == 0 and p.stdout.split() == [digest], "image list shows it", p.stdout + p.stderr)
p = imp(data)
ok(p.returncode == 0 and p.stdout.strip().splitlines()[-1] == digest and "already" in p.stderr,
   "a second import of the same archive changes nothing", p.stdout + p.stderr)

# Concurrent imports of one image while the store is listed: one directory, same digest.
data2, digest2 = ociimage.archive([base, [{"name": "app/two", "data": b"2"}]])
paths = []
for i in range(4):
    pth = os.path.join(top, "c%d.tar" % i)
    with open(pth, "wb") as f:
        f.write(data2)
    paths.append(pth)
res = [None] * 4
stop = [False]
listings = []


def lister():
    while not stop[0]:
        q = run("list")
        listings.append(q.returncode)


lt = threading.Thread(target=lister)
lt.start()
ths = [threading.Thread(target=lambda i=i: res.__setitem__(i, run("import", paths[i])))
       for i in range(4)]
for t in ths:
    t.start()
for t in ths:
    t.join()
stop[0] = True
lt.join()
ok(all(r.returncode == 0 and r.stdout.split()[-1] == digest2 for r in res) and
   sorted(run("list").stdout.split()) == sorted([digest, digest2]) and
   not [n for n in os.listdir(store) if n.startswith(".")] and all(c == 0 for c in listings),
   "4 concurrent imports of one image: all print its digest, one copy, listings never fail",
   [(r.returncode, r.stderr) for r in res])

p = run("rm", digest2)
ok(p.returncode == 0 and run("list").stdout.split() == [digest], "image rm removes it", p.stderr)
p = run("rm", digest2)
ok(p.returncode == 3 and "not in the image store" in p.stderr, "image rm of an absent image: exit 3",
   p.stderr)
p = run("rm", "sha256:xyz")
ok(p.returncode == 1 and "not an image digest" in p.stderr, "image rm checks the digest", p.stderr)

# ---- hostile layers ------------------------------------------------------------------
B = ociimage.busybox_layer()


def one(entries, **kw):
    return ociimage.archive([B, entries], **kw)[0]


refused("absolute path", one([{"name": "/etc/evil", "data": b"x"}]), "an absolute path")
refused("'..' component", one([{"name": "app/../../evil", "data": b"x"}]), "a '..' component")
refused("relative symlink escaping the root",
        one([{"name": "app/up", "type": "symlink", "target": "../../../etc"}]), "leaves the root")
refused("hard link with '..'",
        one([{"name": "app/hl", "type": "hardlink", "target": "../../etc/passwd"}]),
        "a '..' component")
refused("hard link through an absolute symlink to the host",
        one([{"name": "hostetc", "type": "symlink", "target": "/etc"},
             {"name": "app/hl", "type": "hardlink", "target": "hostetc/passwd"}]),
        "not a file of the image")
refused("character device", one([{"name": "app/null", "type": "chr"}]), "is a device node")
refused("FIFO", one([{"name": "app/fifo", "type": "fifo"}]), "is a FIFO")
refused("duplicate entry", one([{"name": "app/a", "data": b"1"}, {"name": "./app//a", "data": b"2"}]),
        "duplicate entry 'app/a'")
refused("whiteout of '..'", one([{"name": "app/.wh...", "data": b""}]), "names nothing removable")

# An absolute symlink into the host followed by files and whiteouts through it: resolved
# inside the image root, never on the host.
host_rel = canary.lstrip("/")
data, dg = ociimage.archive([B,
                             [{"name": host_rel, "type": "dir"},
                              {"name": host_rel + "/victim", "data": b"image file\n"},
                              {"name": "esc", "type": "symlink", "target": canary}],
                             [{"name": "esc/pwned", "data": b"x"},
                              {"name": "esc/.wh.victim", "data": b""}],
                             [{"name": "esc/.wh..wh..opq", "data": b""}]])
p = imp(data)
r = os.path.join(store, "sha256-" + dg[7:], "rootfs")
ok(p.returncode == 0 and canary_intact() and os.path.isdir(os.path.join(r, host_rel)) and
   os.listdir(os.path.join(r, host_rel)) == [],
   "files and (opaque) whiteouts through an absolute symlink stay in the image root",
   p.stderr + str(os.listdir(canary)))
run("rm", dg)

data, dg = ociimage.archive([B, [{"name": "app/suid", "data": b"#!/bin/sh\n", "mode": 0o6755},
                                 {"name": "app/sticky", "type": "dir", "mode": 0o1777}]])
p = imp(data)
r = os.path.join(store, "sha256-" + dg[7:], "rootfs")
m1 = os.stat(os.path.join(r, "app/suid")).st_mode if p.returncode == 0 else 0
m2 = os.stat(os.path.join(r, "app/sticky")).st_mode if p.returncode == 0 else 0
ok(p.returncode == 0 and stat.S_IMODE(m1) == 0o755 and stat.S_IMODE(m2) == 0o777 and
   "bits dropped" in p.stderr, "setuid/setgid/sticky bits are dropped", "%o %o %s" % (m1, m2, p.stderr))
run("rm", dg)

# A symlink at a mount point is replaced by an empty directory.
data, dg = ociimage.archive([B, [{"name": "tmp", "type": "symlink", "target": canary},
                                 {"name": "output", "data": b"file"}]])
p = imp(data)
r = os.path.join(store, "sha256-" + dg[7:], "rootfs")
ok(p.returncode == 0 and os.path.isdir(r + "/tmp") and not os.path.islink(r + "/tmp") and
   os.path.isdir(r + "/output"), "mount points the image made links or files become directories",
   p.stderr)
run("rm", dg)

# Size bounds: a compression bomb (64 MiB of zeros, ~64 KiB gzipped) and the archive bound.
bomb = [{"name": "app/zeros", "data": bytes(64 << 20)}]
refused("compression bomb over ARBITER_IMAGE_MAX_UNPACKED_MB",
        one(bomb, compress=True), "decompress to more than the bound",
        env={"ARBITER_IMAGE_MAX_UNPACKED_MB": "16"})
refused("archive over ARBITER_IMAGE_MAX_MB", one([{"name": "app/big", "data": os.urandom(3 << 20)}]),
        "larger than the bound", env={"ARBITER_IMAGE_MAX_MB": "2"})


# Digests and descriptors.
def corrupt_layer(stage, parts):
    if stage == "blobs":
        d = parts["manifest"]["layers"][1]["digest"]
        b = bytearray(parts["blobs"][d])
        b[-1] ^= 1
        parts["blobs"][d] = bytes(b)


refused("a blob whose content does not match its digest", one([], hook=corrupt_layer),
        "has the digest")


def bad_diff_id(stage, parts):
    if stage == "config":
        parts["config"]["rootfs"]["diff_ids"][1] = "sha256:" + "0" * 64


refused("a layer whose content does not match its diff_id", one([], hook=bad_diff_id),
        "the config's diff_id")


def bad_size(stage, parts):
    if stage == "manifest":
        parts["manifest"]["layers"][0]["size"] += 1


refused("a descriptor with the wrong size", one([], hook=bad_size), "its descriptor says")


def missing_blob(stage, parts):
    if stage == "blobs":
        del parts["blobs"][parts["manifest"]["layers"][1]["digest"]]


refused("a layer missing from the archive", one([], hook=missing_blob), "is not in the archive")


def dup_blob(stage, parts):
    if stage == "blobs":
        d = parts["manifest"]["config"]["digest"]
        parts["extra"] = [("blobs/sha256/" + d[7:], parts["blobs"][d])]


refused("a blob twice in the archive", one([], hook=dup_blob), "duplicate entry blobs/sha256/")

# Absurd configs.
refused("100,000 environment entries", one([], config={"Env": ["A=1"] * 100000}), "config Env")
refused("an environment entry without '='", one([], config={"Env": ["NOEQUALS"]}), "config Env[0]")
refused("a relative WorkingDir", one([], config={"WorkingDir": "app"}), "not an absolute path")
refused("a WorkingDir with '..'", one([], config={"WorkingDir": "/app/../.."}), "a '..' component")
refused("a Cmd that is not strings", one([], config={"Cmd": [1, 2]}), "config Cmd[0]")
refused("a 5 KiB argument", one([], config={"Entrypoint": ["x" * 5000]}), "config Entrypoint[0]")


def arm(stage, parts):
    if stage == "config":
        parts["config"]["architecture"] = "s390x"


refused("another architecture", one([], hook=arm), "architecture 's390x'")
refused("not an OCI archive", b"\0" * 1024, "not an OCI image archive")

# ---- docker-archive (`docker save`), written here as docker writes it -----------------
dlayers = [base, [{"name": "app/extra", "data": b"docker"}], base]   # the base twice: a symlink
dk = ociimage.docker_archive(dlayers, config={"Cmd": ["/app/score.sh"]})
p = imp(dk, name="docker.tar")
dlast = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
droot = os.path.join(store, "sha256-" + dlast[7:], "rootfs")
ok(p.returncode == 0 and dlast.startswith("sha256:") and len(dlast) == 71 and
   "docker-archive" in p.stderr and
   open(os.path.join(droot, "app/extra")).read() == "docker" and
   os.path.isfile(os.path.join(droot, "bin/busybox")) and
   json.load(open(os.path.join(store, "sha256-" + dlast[7:], "image.json")))["cmd"] == ["/app/score.sh"],
   "a docker-archive imports (a repeated layer as docker's symlink): its layers and config",
   p.stdout + p.stderr)
p = imp(gzip.compress(dk, mtime=0), name="docker.tar.gz")
ok(p.returncode == 0 and p.stdout.split()[-1] == dlast and "already" in p.stderr,
   "the same docker-archive gzipped (docker save | gzip) is the same image: same digest",
   p.stdout + p.stderr)
ok(run("rm", dlast).returncode == 0, "the docker-archive's image is removed like any other")


def drefused(label, want, layers=None, hook=None, **kw):
    refused("docker-archive: " + label, ociimage.docker_archive(layers or [base], hook=hook, **kw),
            want)


# The same hostile-layer rules (one layer of each kind), and the archive's own.
drefused("absolute path in a layer", "an absolute path",
         [base, [{"name": "/etc/evil", "data": b"x"}]])
drefused("'..' in a layer", "a '..' component", [base, [{"name": "app/../../evil", "data": b"x"}]])
drefused("device node in a layer", "is a device node", [base, [{"name": "app/null", "type": "chr"}]])
drefused("symlink leaving the root", "leaves the root",
         [base, [{"name": "app/out", "type": "symlink", "target": "../../.."}]])
drefused("duplicate entry in a layer", "duplicate entry 'app/a'",
         [base, [{"name": "app/a", "data": b"1"}, {"name": "app/a", "data": b"2"}]])


def wrong_diff_id(stage, parts):
    if stage == "config":
        parts["config"]["rootfs"]["diff_ids"][0] = "sha256:" + "1" * 64


def two_images(stage, parts):
    if stage == "manifest":
        parts["manifest"] = parts["manifest"] * 2


def missing_layer(stage, parts):
    if stage == "manifest":
        parts["manifest"][0]["Layers"].append("nowhere/layer.tar")


def escaping_member(stage, parts):
    if stage == "manifest":
        name = parts["manifest"][0]["Layers"][0]
        parts["members"] = [(n, ("symlink", "../../" + canary + "/victim") if n == name else d)
                            for n, d in parts["members"]]


def absolute_member(stage, parts):
    if stage == "manifest":
        name = parts["manifest"][0]["Layers"][0]
        parts["members"] = [(n, ("symlink", canary + "/victim") if n == name else d)
                            for n, d in parts["members"]]


def dup_member(stage, parts):
    if stage == "manifest":
        parts["members"].append(parts["members"][0])


drefused("a layer that does not match its diff_id", "the config's diff_id", hook=wrong_diff_id)
drefused("manifest.json with two images", "exactly one image", hook=two_images)
drefused("a layer missing from the archive", "is not a file of the archive", hook=missing_layer)
drefused("a member linking out of the archive ('..')", "leaves the archive", hook=escaping_member)
drefused("a member linking to an absolute path", "an absolute or empty target",
         hook=absolute_member)
drefused("a member twice", "duplicate entry", hook=dup_member)

ok(canary_intact(), "the host canary directory is untouched after every import")
ok(run("list").stdout.split() == [digest] and
   not [n for n in os.listdir(store) if n.startswith(".")], "only the good image is left in the store")
shutil.rmtree(top)
sys.exit(done())
