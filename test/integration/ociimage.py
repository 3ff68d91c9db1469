"""Builds OCI image archives offline for the image-store and container tests, and imports
them into a test's image store with `arbiter image import`.

An archive is a tar of an OCI image layout (oci-layout, index.json, blobs/sha256/*),
as `skopeo copy ... oci-archive:F` writes it. Layers are lists of entries, each a
dict for tarfile: {"name", "type": file|dir|symlink|hardlink|chr|fifo, "data",
"mode", "target"}; hooks let a test break any part (digests, sizes, config)."""
import gzip
import hashlib
import io
import json
import os
import subprocess
import tarfile

BUSYBOX = "/bin/busybox"


def layer_tar(entries, compress=False):
    """The bytes of one layer tar (gzipped when compress)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for e in entries:
            ti = tarfile.TarInfo(e["name"])
            ti.mode = e.get("mode", 0o755 if e.get("type") == "dir" else 0o644)
            ti.mtime = 1700000000
            kind = e.get("type", "file")
            data = None
            if kind == "file":
                data = e.get("data", b"")
                ti.size = len(data)
            elif kind == "dir":
                ti.type = tarfile.DIRTYPE
            elif kind == "symlink":
                ti.type = tarfile.SYMTYPE
                ti.linkname = e["target"]
            elif kind == "hardlink":
                ti.type = tarfile.LNKTYPE
                ti.linkname = e["target"]
            elif kind == "chr":
                ti.type = tarfile.CHRTYPE
                ti.devmajor, ti.devminor = 1, 3
            elif kind == "fifo":
                ti.type = tarfile.FIFOTYPE
            t.addfile(ti, io.BytesIO(data) if data is not None else None)
    raw = buf.getvalue()
    return (gzip.compress(raw, mtime=0) if compress else raw), raw


def sha(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


def busybox_layer(script=None, script_path="score.sh"):
    """The base layer: busybox-static as /bin/busybox with sh, a scoring script."""
    with open(BUSYBOX, "rb") as f:
        bb = f.read()
    e = [{"name": "bin", "type": "dir"},
         {"name": "bin/busybox", "data": bb, "mode": 0o755},
         {"name": "bin/sh", "type": "symlink", "target": "busybox"},
         {"name": "app", "type": "dir"}]
    for tool in ("cat", "echo", "ls", "id", "sleep", "mkdir", "touch", "env", "pwd", "dd",
                 "wc", "true", "head", "grep", "sed", "rm", "ln", "stat", "mount"):
        e.append({"name": "bin/" + tool, "type": "symlink", "target": "busybox"})
    if script is not None:
        e.append({"name": "app/" + script_path, "data": script.encode(), "mode": 0o755})
    return e


def docker_archive(layers, config=None, hook=None, link_repeated=True):
    """The bytes of a docker-archive (`docker save`'s classic format): <id>/layer.tar per
    layer (a layer repeated is a symlink to the first copy, as docker writes it),
    <config sha>.json, manifest.json, repositories. hook(parts) may change "manifest" (the
    list), "config" (dict) or "members" [(name, bytes or ("symlink", target))] before the
    tar is written."""
    raws = [layer_tar(l)[1] for l in layers]
    cfg = {"architecture": "amd64", "os": "linux",
           "config": {"Env": ["PATH=/bin"], "Cmd": ["/bin/sh", "-c", "true"],
                      "WorkingDir": "/app"},
           "rootfs": {"type": "layers", "diff_ids": [sha(r) for r in raws]}}
    if config:
        cfg["config"].update(config)
    parts = {"config": cfg}
    if hook:
        hook("config", parts)
    cfgb = json.dumps(parts["config"]).encode()
    members, names, first = [], [], {}
    for i, r in enumerate(raws):
        lid = hashlib.sha256(b"layer %d " % i + r).hexdigest()
        name = lid + "/layer.tar"
        if link_repeated and sha(r) in first:
            members.append((name, ("symlink", "../" + first[sha(r)])))
        else:
            first.setdefault(sha(r), name)
            members.append((name, r))
        members.append((lid + "/VERSION", b"1.0"))
        names.append(name)
    members.append((sha(cfgb)[7:] + ".json", cfgb))
    parts["manifest"] = [{"Config": sha(cfgb)[7:] + ".json", "RepoTags": ["test:latest"],
                          "Layers": names}]
    parts["members"] = members
    if hook:
        hook("manifest", parts)
    parts["members"].append(("manifest.json", json.dumps(parts["manifest"]).encode()))
    parts["members"].append(("repositories", b'{"test": {"latest": "x"}}'))
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as t:
        for name, data in parts["members"]:
            ti = tarfile.TarInfo(name)
            if isinstance(data, tuple):
                ti.type = tarfile.SYMTYPE
                ti.linkname = data[1]
                t.addfile(ti)
            else:
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
    return out.getvalue()


def archive(layers, config=None, compress=False, hook=None):
    """The bytes of an OCI archive with these layers (lists of entries). config updates
    the image config's "config" object; hook(parts) may change anything before the
    blobs are written: parts has "layers" [(blob, raw)], "config" (dict), "manifest"
    (dict, built after the config), "index" (dict), "blobs" {digest: bytes}."""
    parts = {"layers": [layer_tar(l, compress) for l in layers]}
    cfg = {"architecture": "amd64", "os": "linux",
           "config": {"Env": ["PATH=/bin"], "Cmd": ["/bin/sh", "-c", "true"],
                      "WorkingDir": "/app"},
           "rootfs": {"type": "layers", "diff_ids": [sha(raw) for _, raw in parts["layers"]]}}
    if config:
        cfg["config"].update(config)
    parts["config"] = cfg
    if hook:
        hook("config", parts)
    cfgb = json.dumps(parts["config"]).encode()
    lt = "application/vnd.oci.image.layer.v1.tar" + ("+gzip" if compress else "")
    parts["manifest"] = {
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": sha(cfgb), "size": len(cfgb)},
        "layers": [{"mediaType": lt, "digest": sha(b), "size": len(b)}
                   for b, _ in parts["layers"]]}
    parts["blobs"] = {sha(cfgb): cfgb}
    for b, _ in parts["layers"]:
        parts["blobs"][sha(b)] = b
    if hook:
        hook("manifest", parts)
    mb = json.dumps(parts["manifest"]).encode()
    parts["blobs"][sha(mb)] = mb
    parts["index"] = {"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": sha(mb),
         "size": len(mb), "platform": {"architecture": "amd64", "os": "linux"}}]}
    if hook:
        hook("blobs", parts)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as t:
        def add(name, data):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
        add("oci-layout", b'{"imageLayoutVersion": "1.0.0"}')
        add("index.json", json.dumps(parts["index"]).encode())
        for d, b in parts["blobs"].items():
            add("blobs/sha256/" + d[7:], b)
        for extra in parts.get("extra", []):
            add(*extra)
    return out.getvalue(), sha(mb)


def script_image(script):
    """An OCI archive of busybox_layer(script) whose command is the script (/app/score.sh,
    PATH=/bin): (bytes, manifest digest), as archive() returns them."""
    return archive([busybox_layer(script)],
                   config={"Cmd": ["/app/score.sh"], "Env": ["PATH=/bin"]})


def import_archive(binary, store, data, path, env=None):
    """Writes the archive bytes data to path and runs `binary image import path` with
    ARBITER_IMAGE_DIR=store (env: more variables); returns the finished process (text)."""
    with open(path, "wb") as f:
        f.write(data)
    e = dict(os.environ, ARBITER_IMAGE_DIR=store)
    e.update(env or {})
    return subprocess.run([binary, "image", "import", path], capture_output=True, text=True,
                          env=e, timeout=120)


def imported(p):
    """The digest an `arbiter image import` process p printed as its last word, or "" when
    it failed or printed nothing."""
    words = p.stdout.split() if p.returncode == 0 else []
    return words[-1] if words else ""
