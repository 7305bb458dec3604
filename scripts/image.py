#!/usr/bin/env python3
"""linerate's container image, written without a container engine or a base image.

    image.py build --bin BIN --out DIR [--epoch N] [--dist dist/container]
    image.py verify --out DIR [--dist dist/container]
    image.py manifests --out DIR [--dist dist/container]

`build` writes one OCI image into DIR: an image layout (DIR/oci: oci-layout, index.json,
blobs/sha256/…) and the same layout as one tar, DIR/linerate-VERSION-ARCH.tar, which also
holds docker-archive's manifest.json (as `docker save` has written since Docker 25), so that
`docker load`, `podman load` and `skopeo copy oci-archive:…`/`docker-archive:…` all take it.
One gzip layer holds: /usr/bin/linerate (a stripped copy of BIN), the shared libraries `ldd`
lists for it and the dynamic loader (from this host, at their merged-/usr paths, with their
Debian copyright files), /etc/passwd and /etc/group naming the user `linerate` (65532), a
small nsswitch.conf, the host's CA bundle (for ACME and https upstreams), the image's
configuration /etc/linerate/linerate.toml and page /usr/share/linerate/www/index.html (from
dist/container/), and empty /tmp (1777), /proc, /sys, /dev. Every entry is owned by 0:0 with
the mtime SOURCE_DATE_EPOCH (--epoch), in sorted order, and the gzip stream has no name or
time, so the same inputs give the same digests. DIR/image.json records the digests and sizes.

`verify` reads what `build` wrote back and checks it: digests and sizes of every blob, the
layer's diff_id, the config (non-root user, entrypoint, command, exposed ports matching the
configuration file's listeners, the health check, labels), and the layer's entries (owners,
times, order, modes: nothing writable by the user but /tmp, no set-id bits). One line per
failed check; exit 1 when any failed.

`manifests` checks dist/container/compose.yaml and kubernetes.yaml against the image (PyYAML;
exit 2 where it is missing): the image name, ports, probes on the admin port, the preStop
sleep against shutdown_delay, the grace period.
"""

import argparse
import datetime
import gzip
import hashlib
import io
import json
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import tomllib

UID = 65532
USER = "linerate"
CONF = "/etc/linerate/linerate.toml"
WWW = "/usr/share/linerate/www"
BIN = "/usr/bin/linerate"
# The health check: one request to the admin listener's /healthz with the binary's own load
# generator (the image has no shell and no curl); it exits 1 on a non-2xx answer or none.
HEALTH_URL = "http://127.0.0.1:9090/healthz"
HEALTHCHECK = {
    "Test": ["CMD", BIN, "load", "-n", "1", "-c", "1", "-t", "1", "--timeout", "2s", HEALTH_URL],
    "Interval": 10_000_000_000,
    "Timeout": 5_000_000_000,
    "StartPeriod": 5_000_000_000,
    "Retries": 3,
}
MT_INDEX = "application/vnd.oci.image.index.v1+json"
MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
ARCHES = {"x86_64": "amd64", "aarch64": "arm64", "riscv64": "riscv64", "ppc64le": "ppc64le",
          "s390x": "s390x"}


def die(msg):
    print(f"image: {msg}", file=sys.stderr)
    sys.exit(1)


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def canonical(obj):
    """JSON as the blobs hold it: sorted keys, no spaces (stable, so digests are)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def usr_merged(path):
    """Debian's merged /usr: /lib/x → /usr/lib/x, /lib64/x → /usr/lib64/x."""
    for top in ("/lib64/", "/lib/", "/bin/", "/sbin/"):
        if path.startswith(top):
            return "/usr" + path
    return path


def ldd(binary):
    """The paths the loader resolves for BINARY: its libraries and the loader itself."""
    out = subprocess.run(["ldd", binary], check=True, capture_output=True, text=True).stdout
    paths = []
    for line in out.splitlines():
        line = line.strip()
        m = re.match(r"^\S+ => (/\S+) \(0x[0-9a-f]+\)$", line) or \
            re.match(r"^(/\S+) \(0x[0-9a-f]+\)$", line)
        if m:
            paths.append(m.group(1))
        elif "not found" in line:
            die(f"ldd: {line}")
        elif not line.startswith("linux-vdso") and not line.startswith("statically linked") \
                and "not a dynamic executable" not in line:
            die(f"ldd: a line this script does not understand: {line}")
    return paths


def owning_package(path):
    """The Debian package that owns PATH (dpkg -S), or None off Debian."""
    try:
        out = subprocess.run(["dpkg-query", "-S", path], capture_output=True, text=True)
    except FileNotFoundError:
        return None
    if out.returncode != 0:
        return None
    return out.stdout.split(":", 1)[0].strip()


class Layer:
    """A layer's entries, keyed by path without the leading /."""

    def __init__(self, epoch):
        self.epoch = epoch
        self.entries = {}

    def _dirs(self, path):
        parts = path.strip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            if d not in self.entries:
                self.entries[d] = ("dir", 0o755, None)

    def dir(self, path, mode=0o755):
        self._dirs(path)
        self.entries[path.strip("/")] = ("dir", mode, None)

    def file(self, path, data, mode=0o644):
        self._dirs(path)
        self.entries[path.strip("/")] = ("file", mode, data)

    def symlink(self, path, target):
        self._dirs(path)
        self.entries[path.strip("/")] = ("symlink", 0o777, target)

    def tar(self):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for name in sorted(self.entries):
                kind, mode, data = self.entries[name]
                info = tarfile.TarInfo(name)
                info.mtime = self.epoch
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mode = mode
                if kind == "dir":
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)
                elif kind == "symlink":
                    info.type = tarfile.SYMTYPE
                    info.linkname = data
                    tar.addfile(info)
                else:
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        return buf.getvalue()


def read(path):
    with open(path, "rb") as f:
        return f.read()


def binary_version(binary):
    """`linerate --version`: `linerate 0.1.0 (COMMIT)`: the version and the commit or None."""
    out = subprocess.run([binary, "--version"], check=True, capture_output=True, text=True)
    m = re.match(r"^linerate (\S+) \(([0-9a-f]{12}|unknown)\)$", out.stdout.strip())
    if not m:
        die(f"{binary} --version said {out.stdout.strip()!r}")
    return m.group(1), (None if m.group(2) == "unknown" else m.group(2))


def workspace_field(key):
    with open("Cargo.toml", "rb") as f:
        return tomllib.load(f)["workspace"]["package"].get(key)


def build(args):
    epoch = args.epoch
    created = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")
    arch = ARCHES.get(platform.machine())
    if arch is None:
        die(f"no OCI name for the architecture {platform.machine()}")
    version, commit = binary_version(args.bin)
    layer = Layer(epoch)

    # The binary, stripped of its symbol table (a panic's message still names its source
    # location; a backtrace loses the function names).
    stripped = os.path.join(args.out, "linerate.stripped")
    subprocess.run(["strip", "--strip-all", "-o", stripped, args.bin], check=True)
    layer.file(BIN, read(stripped), 0o755)
    os.unlink(stripped)

    # Its libraries and the loader, each at the real file's merged-/usr path, with a link at
    # the path the loader asks for where that differs (/lib64/ld-linux-x86-64.so.2).
    packages = set()
    links = set()
    for path in ldd(args.bin):
        real = os.path.realpath(path)
        st = os.stat(real)
        layer.file(usr_merged(real), read(real), stat.S_IMODE(st.st_mode) & 0o755)
        want = usr_merged(path)
        if want != usr_merged(real):
            layer.symlink(want, os.path.relpath(usr_merged(real), os.path.dirname(want)))
        for top in ("lib", "lib64"):
            if path.startswith(f"/{top}/"):
                links.add(top)
        pkg = owning_package(path) or owning_package(real)
        if pkg:
            packages.add(pkg)
    for top in sorted(links):
        layer.symlink(top, f"usr/{top}")

    # The CA bundle rustls-native-certs reads (ACME, https upstreams), where the host has one.
    ca = "/etc/ssl/certs/ca-certificates.crt"
    if os.path.isfile(ca):
        layer.file(ca, read(ca))
        packages.add("ca-certificates")
    for pkg in sorted(packages):
        doc = f"/usr/share/doc/{pkg}/copyright"
        if os.path.isfile(doc):
            layer.file(doc, read(doc))

    layer.file("/etc/passwd", (
        "root:x:0:0:root:/root:/usr/sbin/nologin\n"
        f"{USER}:x:{UID}:{UID}:linerate:/nonexistent:/usr/sbin/nologin\n").encode())
    layer.file("/etc/group", f"root:x:0:\n{USER}:x:{UID}:\n".encode())
    layer.file("/etc/nsswitch.conf",
               b"passwd: files\ngroup: files\nhosts: files dns\nservices: files\n")
    layer.file(CONF, read(os.path.join(args.dist, "linerate.toml")))
    layer.file(f"{WWW}/index.html", read(os.path.join(args.dist, "www", "index.html")))
    layer.dir("/tmp", 0o1777)
    for d in ("/proc", "/sys", "/dev"):
        layer.dir(d)

    tar = layer.tar()
    gz_buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=gz_buf, mtime=0, compresslevel=9) as gz:
        gz.write(tar)
    layer_gz = gz_buf.getvalue()

    labels = {
        "org.opencontainers.image.title": "linerate",
        "org.opencontainers.image.description":
            "A fast, strict HTTP/1.1, HTTP/2 and HTTP/3 server (the demo on :8080, "
            "admin on :9090)",
        "org.opencontainers.image.version": version,
        "org.opencontainers.image.created": created,
        "org.opencontainers.image.licenses": workspace_field("license") or "",
        "org.opencontainers.image.source": workspace_field("repository") or "",
        "org.opencontainers.image.documentation":
            f"{workspace_field('repository')}/blob/HEAD/docs/serve.md#container-image",
    }
    if commit:
        labels["org.opencontainers.image.revision"] = commit
    config = {
        "created": created,
        "architecture": arch,
        "os": "linux",
        "config": {
            "User": f"{UID}:{UID}",
            "ExposedPorts": {"8080/tcp": {}, "9090/tcp": {}},
            "Env": ["PATH=/usr/bin"],
            "Entrypoint": [BIN],
            "Cmd": ["serve", "--config", CONF],
            "WorkingDir": "/",
            "StopSignal": "SIGTERM",
            "Labels": labels,
            "Healthcheck": HEALTHCHECK,
        },
        "rootfs": {"type": "layers", "diff_ids": [sha256(tar)]},
        "history": [{
            "created": created,
            "created_by": "scripts/image.sh build (no base image: one layer written by "
                          "scripts/image.py)",
        }],
    }
    config_blob = canonical(config)
    manifest = {
        "schemaVersion": 2,
        "mediaType": MT_MANIFEST,
        "config": {"mediaType": MT_CONFIG, "digest": sha256(config_blob),
                   "size": len(config_blob)},
        "layers": [{"mediaType": MT_LAYER, "digest": sha256(layer_gz), "size": len(layer_gz)}],
        "annotations": {k: v for k, v in labels.items()
                        if k in ("org.opencontainers.image.created",
                                 "org.opencontainers.image.version",
                                 "org.opencontainers.image.revision",
                                 "org.opencontainers.image.source")},
    }
    manifest_blob = canonical(manifest)
    ref = f"linerate:{version}"
    index = {
        "schemaVersion": 2,
        "mediaType": MT_INDEX,
        "manifests": [{
            "mediaType": MT_MANIFEST,
            "digest": sha256(manifest_blob),
            "size": len(manifest_blob),
            "platform": {"architecture": arch, "os": "linux"},
            "annotations": {
                "org.opencontainers.image.ref.name": version,
                "io.containerd.image.name": f"docker.io/library/{ref}",
            },
        }],
    }
    index_blob = canonical(index)
    blobs = {sha256(b): b for b in (layer_gz, config_blob, manifest_blob)}
    # docker-archive's manifest.json beside the layout (Docker 25+ `docker save` does the same).
    docker_manifest = canonical([{
        "Config": "blobs/sha256/" + sha256(config_blob)[7:],
        "RepoTags": [ref],
        "Layers": ["blobs/sha256/" + sha256(layer_gz)[7:]],
    }])
    layout_files = {
        "oci-layout": canonical({"imageLayoutVersion": "1.0.0"}),
        "index.json": index_blob,
        "manifest.json": docker_manifest,
    }
    for digest, blob in blobs.items():
        layout_files["blobs/sha256/" + digest[7:]] = blob

    oci = os.path.join(args.out, "oci")
    if os.path.exists(oci):
        shutil.rmtree(oci)
    for name, data in layout_files.items():
        if name == "manifest.json":
            continue  # the directory layout is plain OCI
        path = os.path.join(oci, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)

    archive = os.path.join(args.out, f"linerate-{version}-{arch}.tar")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for d in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(d)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, epoch
            t.addfile(info)
        for name in sorted(layout_files):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(layout_files[name]), 0o644, epoch
            t.addfile(info, io.BytesIO(layout_files[name]))
    with open(archive, "wb") as f:
        f.write(buf.getvalue())

    summary = {
        "ref": ref,
        "version": version,
        "revision": commit,
        "architecture": arch,
        "created": created,
        "source_date_epoch": epoch,
        "manifest": sha256(manifest_blob),
        "config": sha256(config_blob),
        "layer": sha256(layer_gz),
        "diff_id": sha256(tar),
        "layer_bytes_compressed": len(layer_gz),
        "layer_bytes_uncompressed": len(tar),
        "compressed_total": len(layer_gz) + len(config_blob) + len(manifest_blob),
        "archive": archive,
        "archive_bytes": len(buf.getvalue()),
        "binary_bytes": len(layer.entries[BIN.strip("/")][2]),
        "files": sorted("/" + n for n, e in layer.entries.items() if e[0] != "dir"),
    }
    with open(os.path.join(args.out, "image.json"), "w") as f:
        json.dump(summary, f, indent=2, sort_keys=True)
        f.write("\n")
    print(f"image: {ref} {summary['manifest']}: {len(layer_gz)} bytes compressed, "
          f"{len(tar)} uncompressed; {oci} and {archive}")


class Checks:
    def __init__(self):
        self.failed = 0
        self.count = 0

    def check(self, what, ok, detail=""):
        self.count += 1
        if not ok:
            self.failed += 1
            print(f"image: MISMATCH: {what}" + (f": {detail}" if detail else ""),
                  file=sys.stderr)


def verify(args):
    c = Checks()
    oci = os.path.join(args.out, "oci")
    with open(os.path.join(args.out, "image.json")) as f:
        summary = json.load(f)

    def blob(digest, size=None):
        data = read(os.path.join(oci, "blobs", "sha256", digest.split(":", 1)[1]))
        c.check(f"blob {digest[:19]}… has its digest", sha256(data) == digest)
        if size is not None:
            c.check(f"blob {digest[:19]}… has its size", len(data) == size,
                    f"{len(data)} != {size}")
        return data

    layout = json.loads(read(os.path.join(oci, "oci-layout")))
    c.check("oci-layout 1.0.0", layout == {"imageLayoutVersion": "1.0.0"}, str(layout))
    index = json.loads(read(os.path.join(oci, "index.json")))
    c.check("index.json: one manifest", len(index.get("manifests", [])) == 1)
    m = index["manifests"][0]
    c.check("index.json: the manifest's ref.name is the version",
            m.get("annotations", {}).get("org.opencontainers.image.ref.name")
            == summary["version"])
    manifest = json.loads(blob(m["digest"], m["size"]))
    c.check("manifest: schemaVersion 2, OCI media type",
            manifest.get("schemaVersion") == 2 and manifest.get("mediaType") == MT_MANIFEST)
    config = json.loads(blob(manifest["config"]["digest"], manifest["config"]["size"]))
    layers = manifest["layers"]
    c.check("manifest: one gzip layer", len(layers) == 1 and layers[0]["mediaType"] == MT_LAYER)
    layer_gz = blob(layers[0]["digest"], layers[0]["size"])
    tar = gzip.decompress(layer_gz)
    c.check("config: the layer's diff_id", config["rootfs"] == {
        "type": "layers", "diff_ids": [sha256(tar)]}, str(config["rootfs"]))
    c.check("config: os linux, the machine's architecture",
            config.get("os") == "linux" and config.get("architecture")
            == ARCHES.get(platform.machine()))
    cc = config.get("config", {})
    user = cc.get("User", "")
    c.check("config: User 65532:65532, not root", user == f"{UID}:{UID}", user)
    c.check("config: Entrypoint /usr/bin/linerate", cc.get("Entrypoint") == [BIN],
            str(cc.get("Entrypoint")))
    c.check("config: Cmd serve --config /etc/linerate/linerate.toml",
            cc.get("Cmd") == ["serve", "--config", CONF], str(cc.get("Cmd")))
    c.check("config: Healthcheck (linerate load on /healthz)",
            cc.get("Healthcheck") == HEALTHCHECK, str(cc.get("Healthcheck")))
    c.check("config: StopSignal SIGTERM (the graceful drain)", cc.get("StopSignal") == "SIGTERM")
    labels = cc.get("Labels", {})
    for k in ("title", "version", "created", "licenses", "source"):
        c.check(f"config: label org.opencontainers.image.{k}",
                bool(labels.get(f"org.opencontainers.image.{k}")))
    c.check("config: label version is the binary's",
            labels.get("org.opencontainers.image.version") == summary["version"])

    # Ports: what the configuration file listens on, and nothing else.
    conf = tomllib.loads(read(os.path.join(args.dist, "linerate.toml")).decode())
    ports = {a["addr"].rsplit(":", 1)[1] + "/tcp" for a in conf.get("listen", []) if "addr" in a}
    if "admin" in conf:
        ports.add(conf["admin"]["addr"].rsplit(":", 1)[1] + "/tcp")
    c.check("config: ExposedPorts are the file's listeners and admin",
            set(cc.get("ExposedPorts", {})) == ports,
            f"{sorted(cc.get('ExposedPorts', {}))} != {sorted(ports)}")
    c.check("config: the health check asks the file's admin port",
            "admin" in conf and HEALTH_URL.split("/")[2].split(":")[1]
            == conf["admin"]["addr"].rsplit(":", 1)[1])
    c.check("config file: no access log file (stdout) in an unwritable root",
            conf.get("access_log") in (None, "-"), str(conf.get("access_log")))

    # The layer's entries.
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        members = t.getmembers()
    names = [mb.name for mb in members]
    c.check("layer: entries in sorted order", names == sorted(names))
    c.check("layer: every entry 0:0", all(mb.uid == 0 and mb.gid == 0 for mb in members),
            ", ".join(mb.name for mb in members if mb.uid or mb.gid))
    c.check("layer: every mtime SOURCE_DATE_EPOCH",
            all(mb.mtime == summary["source_date_epoch"] for mb in members))
    c.check("layer: no set-id bits", all(not (mb.mode & 0o6000) for mb in members))
    writable = [mb.name for mb in members
                if not mb.issym() and mb.mode & 0o002 and mb.name != "tmp"]
    c.check("layer: nothing writable by the user but /tmp", not writable, ", ".join(writable))
    by = {mb.name: mb for mb in members}
    c.check("layer: /tmp 1777", "tmp" in by and by["tmp"].isdir() and by["tmp"].mode == 0o1777)
    for need in ("usr/bin/linerate", "etc/passwd", "etc/group", CONF[1:], f"{WWW[1:]}/index.html"):
        c.check(f"layer: /{need}", need in by)
    c.check("layer: /usr/bin/linerate 0755", by.get("usr/bin/linerate") is not None
            and by["usr/bin/linerate"].mode == 0o755)
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        passwd = t.extractfile("etc/passwd").read().decode()
        conf_in = t.extractfile(CONF[1:]).read()
    c.check("layer: /etc/passwd names 65532 linerate, no login shell",
            f"{USER}:x:{UID}:{UID}:" in passwd and passwd.rstrip().endswith("/usr/sbin/nologin"))
    c.check("layer: the configuration is dist/container/linerate.toml",
            conf_in == read(os.path.join(args.dist, "linerate.toml")))
    for f in summary["files"]:
        c.check(f"layer: {f} (image.json)", f[1:] in by)

    # The archive: the same blobs, index, and a docker-archive manifest.json.
    with tarfile.open(summary["archive"]) as t:
        anames = set(t.getnames())
        dm = json.loads(t.extractfile("manifest.json").read())
        same_index = t.extractfile("index.json").read() == read(os.path.join(oci, "index.json"))
    c.check("archive: index.json is the layout's", same_index)
    for d in (m["digest"], manifest["config"]["digest"], layers[0]["digest"]):
        c.check(f"archive: blob {d[:19]}…", "blobs/sha256/" + d[7:] in anames)
    c.check("archive: docker manifest.json (Config, RepoTags, Layers)",
            dm == [{"Config": "blobs/sha256/" + manifest["config"]["digest"][7:],
                    "RepoTags": [summary["ref"]],
                    "Layers": ["blobs/sha256/" + layers[0]["digest"][7:]]}], str(dm))

    if c.failed:
        print(f"image: FAILED: {c.failed} of {c.count} checks of the layout and config",
              file=sys.stderr)
        sys.exit(1)
    print(f"image: layout, config and layer: {c.count} checks passed")


def seconds(text):
    m = re.fullmatch(r"(\d+)(ms|s|m)?", str(text).strip())
    if not m:
        raise ValueError(f"duration {text!r}")
    n = int(m.group(1))
    return {"ms": n / 1000, "s": n, None: n, "m": n * 60}[m.group(2)]


def manifests(args):
    try:
        import yaml
    except ImportError:
        print("image: NOT RUN: compose.yaml and kubernetes.yaml: no PyYAML (pip install pyyaml)",
              file=sys.stderr)
        sys.exit(2)
    c = Checks()
    with open(os.path.join(args.out, "image.json")) as f:
        summary = json.load(f)
    conf = tomllib.loads(read(os.path.join(args.dist, "linerate.toml")).decode())
    delay = seconds(conf.get("shutdown_delay", "0s"))
    drain = seconds(conf.get("limits", {}).get("drain_timeout", "10s"))
    ref = summary["ref"]

    with open(os.path.join(args.dist, "compose.yaml")) as f:
        compose = yaml.safe_load(f)
    svc = compose["services"]["linerate"]
    c.check("compose: image is the image's ref", svc.get("image") == ref, svc.get("image"))
    c.check("compose: publishes 8080", any(str(p).endswith(":8080") for p in svc.get("ports", [])))
    c.check("compose: read_only root", svc.get("read_only") is True)
    grace = seconds(svc.get("stop_grace_period", "10s"))
    c.check("compose: stop_grace_period above shutdown_delay + drain_timeout",
            grace > delay + drain, f"{grace} <= {delay} + {drain}")

    with open(os.path.join(args.dist, "kubernetes.yaml")) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    kinds = {d["kind"]: d for d in docs}
    c.check("kubernetes: a Deployment and a Service", {"Deployment", "Service"} <= set(kinds))
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    ctr = pod["containers"][0]
    c.check("kubernetes: image is the image's ref", ctr.get("image") == ref, ctr.get("image"))
    sc = {**pod.get("securityContext", {}), **ctr.get("securityContext", {})}
    c.check("kubernetes: runAsNonRoot, readOnlyRootFilesystem, no privilege escalation",
            sc.get("runAsNonRoot") is True and sc.get("readOnlyRootFilesystem") is True
            and sc.get("allowPrivilegeEscalation") is False)
    ports = {p["name"]: p["containerPort"] for p in ctr.get("ports", [])}
    c.check("kubernetes: container ports http 8080, admin 9090",
            ports == {"http": 8080, "admin": 9090}, str(ports))
    live, ready = ctr.get("livenessProbe", {}), ctr.get("readinessProbe", {})
    c.check("kubernetes: livenessProbe GET /healthz on admin",
            live.get("httpGet", {}).get("path") == "/healthz"
            and live["httpGet"].get("port") in ("admin", 9090))
    c.check("kubernetes: readinessProbe GET /readyz on admin",
            ready.get("httpGet", {}).get("path") == "/readyz"
            and ready["httpGet"].get("port") in ("admin", 9090))
    pre = ctr.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds")
    c.check("kubernetes: preStop sleep is the image's shutdown_delay", pre == delay,
            f"{pre} != {delay}")
    argv = ctr.get("args", [])
    c.check("kubernetes: args keep the image's file and set --shutdown-delay 0s (the preStop "
            "waits instead)", argv == ["serve", "--config", CONF, "--shutdown-delay", "0s"],
            str(argv))
    tgp = pod.get("terminationGracePeriodSeconds", 30)
    c.check("kubernetes: terminationGracePeriodSeconds above preStop + drain_timeout",
            tgp > (pre or 0) + drain, f"{tgp} <= {pre} + {drain}")
    svc = kinds["Service"]["spec"]
    c.check("kubernetes: Service selects the Deployment's pods",
            svc.get("selector") == kinds["Deployment"]["spec"]["selector"]["matchLabels"])
    c.check("kubernetes: Service port 80 → http",
            any(p.get("port") == 80 and p.get("targetPort") == "http"
                for p in svc.get("ports", [])))
    if c.failed:
        print(f"image: FAILED: {c.failed} of {c.count} checks of dist/container's manifests",
              file=sys.stderr)
        sys.exit(1)
    print(f"image: compose.yaml and kubernetes.yaml: {c.count} checks passed")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--bin", required=True)
    b.add_argument("--out", required=True)
    b.add_argument("--epoch", type=int, default=int(os.environ.get("SOURCE_DATE_EPOCH", "0")))
    b.add_argument("--dist", default="dist/container")
    v = sub.add_parser("verify")
    v.add_argument("--out", required=True)
    v.add_argument("--dist", default="dist/container")
    y = sub.add_parser("manifests")
    y.add_argument("--out", required=True)
    y.add_argument("--dist", default="dist/container")
    args = p.parse_args()
    if args.cmd == "build":
        os.makedirs(args.out, exist_ok=True)
        build(args)
    elif args.cmd == "verify":
        verify(args)
    else:
        manifests(args)


if __name__ == "__main__":
    main()
