#!/usr/bin/env bash
# linerate's container image: an OCI image written without a container engine or a base image
# (scripts/image.py), and checked by unpacking its root filesystem and serving from it.
#
#   scripts/image.sh build [BIN]   writes target/image/oci (an OCI image layout) and
#                                  target/image/linerate-VERSION-ARCH.tar (that layout as one
#                                  tar, with docker-archive's manifest.json too: `docker load`,
#                                  `podman load`, `skopeo copy oci-archive:…` take it)
#   scripts/image.sh check [BIN]   builds it, then checks it (scripts/test-all.sh's stage)
#
# BIN: the linerate binary to put in the image (default $LINERATE_BIN, else
# target/release/linerate; `cargo build --release -p linerate`). SOURCE_DATE_EPOCH (default:
# the last commit's time) is every file's mtime and the image's `created`: the same binary on
# the same Debian host gives the same digests. The libraries come from this host (ldd), so
# the image is as current as the host's libc6 and libgcc-s1.
#
# `check`, each part one or more checks, every failure printed:
#   - reproducible: a second build of the same inputs has the same manifest digest;
#   - scripts/image.py verify: every blob's digest and size, the diff_id, the config (user
#     65532:65532, entrypoint, command, exposed ports = the file's listeners, the health check,
#     labels), the layer's entries (0:0, SOURCE_DATE_EPOCH, sorted, nothing writable but /tmp);
#   - independent readers, Debian's skopeo and umoci (apt-get installs them where missing, as
#     root): skopeo reads the config through the layout, the oci-archive and the docker-archive
#     (its digest must be the manifest's), and copies the docker-archive out (the layer must
#     decompress to its diff_id); umoci unpacks the layout into a runtime bundle (digests
#     checked) whose config.json must run the entrypoint as 65532. Where one cannot be had,
#     its checks say NOT RUN and the others still count;
#   - the root filesystem (umoci's, or the layer unpacked by Python without umoci) serves: in
#     new network, mount and PID namespaces (unshare; loopback only, so the image's own
#     0.0.0.0:8080 and 0.0.0.0:9090 are used as they are), the root bound read-only (as
#     Kubernetes's readOnlyRootFilesystem) with /proc and the usual /dev nodes, the image's
#     Entrypoint + Cmd runs under chroot as the image's User with its Env. curl (the host's,
#     inside the namespace) fetches /json (also over h2c) and /index.html (the static file) and
#     /healthz and /readyz; the server's uid is 65532; the image's HEALTHCHECK command, run in the chroot,
#     passes; the access log is on stdout; SIGTERM turns /healthz to 503 (the health check
#     fails) while /json is still served for shutdown_delay, then the process exits 0;
#   - dist/container/compose.yaml and kubernetes.yaml against the image (scripts/image.py
#     manifests; NOT RUN without PyYAML).
# Containers themselves cannot be started here (no engine; crun's setrlimit is refused), so no
# `docker run` is part of it. Exit 2 with `image: NOT RUN: …` where the stage cannot run at all
# (no python3 ≥ 3.11, strip, ldd, curl; not root or no unshare for the root filesystem run);
# 1 when a check fails; 0 with a summary (digest, sizes, checks, sub-checks NOT RUN).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "image: $*" >&2; }
not_run() { say "NOT RUN: $*"; exit 2; }
have() { command -v "$1" >/dev/null 2>&1; }

out=target/image
dist=dist/container

# --- inside the namespaces (`check` runs this part through unshare) ---------------------------
# __inner ROOTFS WORK: serves from ROOTFS and checks it; results in WORK/inner.results, one line
# each: `ok WHAT` or `MISMATCH WHAT`, details in WORK/inner.log.
if [ "${1:-}" = __inner ]; then
    rootfs=$2
    work=$3
    results=$work/inner.results
    : >"$results"
    ok() { echo "ok $1" >>"$results"; }
    bad() {
        echo "MISMATCH $1" >>"$results"
        echo "$1:" >>"$work/inner.log"
        shift
        [ $# = 0 ] || printf '  %s\n' "$@" >>"$work/inner.log"
    }
    # inner_check WHAT COMMAND…
    inner_check() {
        local what=$1
        shift
        if "$@" >"$work/c.out" 2>&1; then ok "$what"; else
            bad "$what"
            sed 's/^/  /' "$work/c.out" >>"$work/inner.log"
        fi
    }
    ip link set lo up
    # The root read-only, then what an engine mounts: /proc, and /dev's usual nodes on a tmpfs.
    mount --bind "$rootfs" "$rootfs"
    mount -o remount,bind,ro "$rootfs"
    mount -t proc proc "$rootfs/proc"   # this PID namespace's: $pid below is read there
    mount -t tmpfs -o mode=0755,nosuid tmpfs "$rootfs/dev"
    for n in null zero full random urandom; do
        touch "$rootfs/dev/$n"
        mount --bind "/dev/$n" "$rootfs/dev/$n"
    done
    mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$rootfs/tmp"
    mapfile -t argv <"$work/argv"
    mapfile -t envv <"$work/env"
    mapfile -t health <"$work/health"
    user=$(cat "$work/user")
    # in_image COMMAND…: COMMAND in the root as the image's user, with only the image's Env.
    chroot=$(command -v chroot)
    in_image() {
        env -i "${envv[@]}" "$chroot" --userspec="$user" --groups="${user#*:}" "$rootfs" "$@"
    }
    # exec: $! is the server itself (env and chroot exec it), not a subshell.
    (exec env -i "${envv[@]}" "$chroot" --userspec="$user" --groups="${user#*:}" "$rootfs" \
        "${argv[@]}") >"$work/server.out" 2>"$work/server.err" &
    pid=$!
    up=""
    for _ in $(seq 100); do
        if curl -s -o /dev/null --max-time 1 http://127.0.0.1:8080/json &&
            curl -s -o /dev/null --max-time 1 http://127.0.0.1:9090/healthz; then
            up=1
            break
        fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if [ -z "$up" ]; then
        bad "the image's command serves 0.0.0.0:8080 and the admin 0.0.0.0:9090 within 10 s" \
            "$(cat "$work/server.out" "$work/server.err")"
        kill -9 "$pid" 2>/dev/null || true
        exit 0
    fi
    ok "the image's command serves 0.0.0.0:8080 and the admin 0.0.0.0:9090"
    # get URL WANT_STATUS [BODY_FILE]: status (and body) of a GET.
    get() {
        local code
        code=$(curl -sS --max-time 5 -o "$work/body" -D "$work/head" -w '%{http_code}' "$1")
        [ "$code" = "$2" ] || { echo "$1: status $code, wanted $2"; cat "$work/head"; return 1; }
        [ -z "${3:-}" ] || cmp "$work/body" "$3"
    }
    printf '{"message":"Hello, World!"}' >"$work/json.want"
    inner_check "GET /json: 200, {\"message\":\"Hello, World!\"}" \
        get http://127.0.0.1:8080/json 200 "$work/json.want"
    inner_check "GET /json: Content-Type application/json" \
        grep -qi '^content-type: application/json' "$work/head"
    inner_check "GET /index.html: 200, the static file (dist/container/www/index.html)" \
        get http://127.0.0.1:8080/index.html 200 "$dist/www/index.html"
    inner_check "GET /: 200 (the demo's page)" get http://127.0.0.1:8080/ 200
    inner_check "GET /json over h2c (HTTP/2 with prior knowledge): 200" bash -c '
        got=$(curl -sS --max-time 5 --http2-prior-knowledge -o /dev/null \
            -w "%{http_version} %{http_code}" http://127.0.0.1:8080/json)
        [ "$got" = "2 200" ] || { echo "HTTP version and status: $got"; exit 1; }'
    inner_check "GET /missing.css: 404" get http://127.0.0.1:8080/missing.css 404
    inner_check "admin GET /healthz: 200" get http://127.0.0.1:9090/healthz 200
    inner_check "admin GET /readyz: 200" get http://127.0.0.1:9090/readyz 200
    inner_check "the server (/usr/bin/linerate) runs as 65532:65532 (real, effective, saved, fs)" \
        bash -c 'grep -qP "^Uid:\t65532\t65532\t65532\t65532$" "$1/status" &&
                 grep -qP "^Gid:\t65532\t65532\t65532\t65532$" "$1/status" &&
                 [[ "$(readlink "$1/exe")" = */usr/bin/linerate ]] ||
                 { readlink "$1/exe"; grep -E "^(Uid|Gid|Groups):" "$1/status"; exit 1; }' \
        _ "$rootfs/proc/$pid"
    inner_check "the image's HEALTHCHECK command passes (in the root, as 65532)" \
        in_image "${health[@]}"
    inner_check "the access log is on stdout" grep -q '"GET /json HTTP/1.1" 200 ' "$work/server.out"
    # SIGTERM: /healthz is 503 at once (the health check fails), /json is still served for
    # shutdown_delay, then the drain and exit 0.
    kill -TERM "$pid"
    sleep 0.5
    if in_image "${health[@]}" >"$work/c.out" 2>&1; then
        bad "after SIGTERM the HEALTHCHECK fails (/healthz 503)" "$(cat "$work/c.out")"
    else
        ok "after SIGTERM the HEALTHCHECK fails (/healthz 503)"
    fi
    inner_check "after SIGTERM /readyz is 503" get http://127.0.0.1:9090/readyz 503
    inner_check "after SIGTERM /json is still served (shutdown_delay)" \
        get http://127.0.0.1:8080/json 200 "$work/json.want"
    rc=""
    for _ in $(seq 300); do
        if ! kill -0 "$pid" 2>/dev/null; then
            wait "$pid" && rc=0 || rc=$?
            break
        fi
        sleep 0.1
    done
    if [ "$rc" = 0 ]; then
        ok "after shutdown_delay and the drain the server exits 0 (within 30 s)"
    else
        bad "after shutdown_delay and the drain the server exits 0 (within 30 s)" \
            "exit: ${rc:-still running}" "$(tail -5 "$work/server.err")"
        kill -9 "$pid" 2>/dev/null || true
    fi
    inner_check "stderr: no ERROR or WARN line" \
        bash -c '! grep -E "(ERROR|WARN) " "$1"' _ "$work/server.err"
    exit 0
fi

# --- build -------------------------------------------------------------------------------------
cmd=${1:-}
case "$cmd" in
    build | check) ;;
    *) say "usage: scripts/image.sh build|check [path/to/linerate]"; exit 1 ;;
esac
bin=${2:-${LINERATE_BIN:-target/release/linerate}}
[ -x "$bin" ] || { say "no binary at $bin (cargo build --release -p linerate)"; exit 1; }
have python3 && python3 -c 'import tomllib' 2>/dev/null || not_run "no python3 3.11 or later"
for tool in strip ldd; do
    have "$tool" || not_run "no $tool on this machine"
done
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
    SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || echo 0)
fi
export SOURCE_DATE_EPOCH
mkdir -p "$out"
python3 scripts/image.py build --bin "$bin" --out "$out" --dist "$dist"
[ "$cmd" = check ] || exit 0

# --- check -------------------------------------------------------------------------------------
have curl || not_run "no curl on this machine"
[ "$(id -u)" = 0 ] || not_run "not root: serving from the root filesystem needs chroot and namespaces"
have unshare && have chroot && have ip || not_run "no unshare, chroot or ip (util-linux, coreutils, iproute2)"
unshare --net --mount --pid --fork true 2>/dev/null ||
    not_run "unshare --net --mount --pid is refused here (no CAP_SYS_ADMIN)"

work=$(mktemp -d "${TMPDIR:-/tmp}/linerate-image.XXXXXX")
inner_pid=""
cleanup() {
    if [ -n "$inner_pid" ]; then kill "$inner_pid" 2>/dev/null || true; wait "$inner_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

failures=0
checks=0
not_run_parts=()
# check WHAT COMMAND…: counts it; prints WHAT (and the command's output) when it fails.
check() {
    local what=$1
    shift
    checks=$((checks + 1))
    if ! "$@" >"$work/check.out" 2>&1; then
        say "MISMATCH: $what"
        sed 's/^/  /' "$work/check.out" >&2
        failures=$((failures + 1))
    fi
}
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$out/image.json" "$1"; }
version=$(field version)
archive=$(field archive)
digest=$(field manifest)
config_digest=$(field config)
diff_id=$(field diff_id)

# Reproducible: the same inputs again, the same manifest digest.
python3 scripts/image.py build --bin "$bin" --out "$work/again" --dist "$dist" >/dev/null
check "reproducible: a second build has the manifest digest $digest" \
    bash -c '[ "$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[\"manifest\"])" "$1")" = "$2" ]' \
    _ "$work/again/image.json" "$digest"
rm -rf "$work/again"

# The layout, config and layer, read back (counts its own checks; one here).
check "scripts/image.py verify" python3 scripts/image.py verify --out "$out" --dist "$dist"
sed 's/^/  /' "$work/check.out"

# apt_install PACKAGE…: as root on Debian.
apt_updated=""
apt_install() {
    have apt-get || return 1
    if [ -z "$apt_updated" ]; then
        apt-get update -q >"$work/apt.log" 2>&1 || true
        apt_updated=1
    fi
    say "installing $* (apt-get, --no-install-recommends)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" \
        >>"$work/apt.log" 2>&1 || { tail -5 "$work/apt.log" >&2; return 1; }
}
for tool in skopeo umoci; do
    have "$tool" || apt_install "$tool" || true
done

# skopeo: the config through the three ways in, and the docker-archive's layer decompressed.
if have skopeo; then
    # config_via TRANSPORT:REF: skopeo's raw config blob has the manifest's config digest.
    config_via() {
        local got
        got=$(skopeo inspect --raw --config "$1" | sha256sum | cut -d' ' -f1)
        [ "sha256:$got" = "$config_digest" ] || { echo "$1: config sha256:$got, wanted $config_digest"; return 1; }
    }
    check "skopeo reads the config from oci:$out/oci:$version" config_via "oci:$out/oci:$version"
    check "skopeo reads the config from oci-archive:$archive" config_via "oci-archive:$archive"
    check "skopeo reads the config from docker-archive:$archive" config_via "docker-archive:$archive"
    check "skopeo copies docker-archive: to dir: (the layer decompresses to its diff_id)" \
        bash -c 'skopeo copy -q "docker-archive:$1" "dir:$2/copy" && [ -f "$2/copy/${3#sha256:}" ] ||
                 { ls "$2/copy"; exit 1; }' _ "$archive" "$work" "$diff_id"
    rm -rf "$work/copy"
else
    not_run_parts+=("skopeo (not installed, apt-get could not install it)")
    say "skopeo checks NOT RUN: no skopeo, and apt-get could not install it (the others count)"
fi

# The root filesystem: umoci's unpacking (a runtime bundle), or the layer unpacked here.
rootfs=$work/bundle/rootfs
if have umoci; then
    check "umoci unpacks oci:$out/oci:$version (digests checked)" \
        umoci unpack --image "$out/oci:$version" "$work/bundle"
    check "umoci's runtime config runs /usr/bin/linerate serve --config … as 65532:65532 in /" \
        python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))["process"]
want = ["/usr/bin/linerate", "serve", "--config", "/etc/linerate/linerate.toml"]
ok = p["user"]["uid"] == 65532 and p["user"]["gid"] == 65532 and p["args"] == want and p["cwd"] == "/"
sys.exit(0 if ok else " ".join(str(p[k]) for k in ("user", "args", "cwd")))' "$work/bundle/config.json"
    unpacked_by=umoci
else
    not_run_parts+=("umoci (not installed, apt-get could not install it)")
    say "umoci checks NOT RUN: no umoci, and apt-get could not install it; the layer is unpacked by Python"
    mkdir -p "$rootfs"
    python3 -c '
import gzip, json, sys, tarfile
out, rootfs = sys.argv[1], sys.argv[2]
s = json.load(open(out + "/image.json"))
with tarfile.open(out + "/oci/blobs/sha256/" + s["layer"][7:], "r:gz") as t:
    t.extractall(rootfs, numeric_owner=True, filter="fully_trusted")' "$out" "$rootfs"
    unpacked_by="Python's tarfile"
fi

if [ -x "$rootfs/usr/bin/linerate" ]; then
    # What the engine would run: Entrypoint + Cmd, User, Env; and the HEALTHCHECK's command.
    python3 -c '
import json, sys
out, work = sys.argv[1], sys.argv[2]
s = json.load(open(out + "/image.json"))
c = json.load(open(out + "/oci/blobs/sha256/" + s["config"][7:]))["config"]
open(work + "/argv", "w").write("\n".join(c["Entrypoint"] + c["Cmd"]) + "\n")
open(work + "/env", "w").write("\n".join(c["Env"]) + "\n")
open(work + "/user", "w").write(c["User"])
assert c["Healthcheck"]["Test"][0] == "CMD"
open(work + "/health", "w").write("\n".join(c["Healthcheck"]["Test"][1:]) + "\n")' "$out" "$work"
    # Killed with its namespaces (--kill-child) should this script end first.
    timeout 120 unshare --net --mount --pid --fork --kill-child \
        bash scripts/image.sh __inner "$rootfs" "$work" >"$work/inner.stdout" 2>&1 &
    inner_pid=$!
    inner_rc=0
    wait "$inner_pid" || inner_rc=$?
    inner_pid=""
    checks=$((checks + 1))
    if [ "$inner_rc" != 0 ]; then
        say "MISMATCH: the run in namespaces ended with exit $inner_rc"
        sed 's/^/  /' "$work/inner.stdout" >&2
        failures=$((failures + 1))
    fi
    while read -r status what; do
        checks=$((checks + 1))
        if [ "$status" != ok ]; then
            say "MISMATCH: rootfs: $what"
            failures=$((failures + 1))
        fi
    done <"$work/inner.results"
    if [ -s "$work/inner.log" ]; then sed 's/^/  /' "$work/inner.log" >&2; fi
    echo "image: rootfs ($unpacked_by) served under chroot as 65532 in namespaces:" \
        "$(grep -c '^ok ' "$work/inner.results") of $(wc -l <"$work/inner.results") checks passed"
    if [ "$failures" != 0 ]; then
        say "the server's stderr:"
        sed 's/^/  /' "$work/server.err" >&2
    fi
else
    checks=$((checks + 1))
    failures=$((failures + 1))
    say "MISMATCH: no /usr/bin/linerate in the unpacked root filesystem"
fi

# dist/container's Compose and Kubernetes files.
manifests_rc=0
python3 scripts/image.py manifests --out "$out" --dist "$dist" >"$work/manifests.out" 2>&1 ||
    manifests_rc=$?
cat "$work/manifests.out"
case $manifests_rc in
    0) checks=$((checks + 1)) ;;
    2) not_run_parts+=("compose.yaml/kubernetes.yaml (no PyYAML)") ;;
    *) checks=$((checks + 1)); failures=$((failures + 1)) ;;
esac

if [ "$failures" != 0 ]; then
    say "FAILED: $failures of $checks checks (linerate:$version $digest)"
    exit 1
fi
compressed=$(field compressed_total)
uncompressed=$(field layer_bytes_uncompressed)
summary="image: linerate:$version $digest: $compressed bytes compressed"
summary+=" ($((compressed / 1000)) kB), $uncompressed uncompressed ($((uncompressed / 1000)) kB),"
summary+=" one layer, no base image; $checks checks passed"
for part in ${not_run_parts[@]+"${not_run_parts[@]}"}; do summary+="; NOT RUN: $part"; done
echo "$summary"
