#!/usr/bin/env bash
# Boots stock Debian kernels under QEMU (TCG, software emulation) and runs linerate's kTLS
# checks inside them. This machine's own kernel has no `tls` ULP, so the kernel-TLS
# path can only run here. Two kernels, because they differ where it matters:
#   bookworm          Debian 12's 6.1 (CONFIG_TLS=m): kTLS, but no new keys on a keyed socket,
#                     so TLS 1.3 key updates cannot be followed in the kernel;
#   trixie-backports  the newest Debian 13 backports kernel (7.x): kTLS with key updates
#                     (TLS_TX/TLS_RX set again; not in 6.12, in 7.3).
#
#   scripts/ktls-vm.sh [--keep] [--bench] [--kernel NAME]   # target/release/linerate
#   --keep: leave the initramfs trees in target/ktls-vm; --bench: also measure the server's CPU
#   time per MiB of a 32 MiB HTTPS file, kernel TLS vs user-space TLS (`KTLS-BENCH` lines);
#   --kernel: boot only that one (bookworm or trixie-backports)
#
# What it does, every step bounded in time:
#   1. tools: qemu-system-x86_64, busybox (static), cpio, kmod, zstd, python3, openssl, curl
#      (the host's checks); installed with apt
#      (--no-install-recommends) when missing and this is root on Debian, else it says which
#      one is missing and exits 2 (never a silent pass);
#   2. the kernels: bookworm's with `apt-get download linux-image-6.1.0-*-amd64`; the
#      backports one from deb.debian.org's trixie-backports index (checked against the index's
#      SHA256); each unpacked with `dpkg-deb -x` (not installed), the uncompressed vmlinux cut
#      out of vmlinuz (QEMU boots it through its PVH note, seconds instead of a minute of
#      decompression under TCG), cached in target/ktls-vm/<kernel>/;
#   3. the initramfs: busybox, the kernel's tls module, linerate and the shared libraries it
#      links, a throwaway certificate, and guest/init.sh (the checks);
#   4. boots with the serial console in target/ktls-vm/<kernel>/console.log and QEMU's user
#      network (restrict=on: the guest reaches nothing) forwarding a free 127.0.0.1 port to the
#      guest's HTTPS port; reads `KTLS <name> PASS|FAIL <detail>` lines until `KTLS-DONE`;
#      when the guest prints `KTLS-HOST-READY`, runs curl from the host against the forward
#      (host.log); kills QEMU by its PID at the deadline.
# Exit 0 only when every check passed; 1 when one failed or the guest never finished; 2 when
# it cannot run here.
set -euo pipefail
cd "$(dirname "$0")/.."

DEADLINE_S=${KTLS_VM_DEADLINE_S:-240}
WORK=target/ktls-vm
BOOKWORM_GLOB='linux-image-6.1.0-*-amd64'
BACKPORTS_INDEX=${KTLS_VM_MIRROR:-http://deb.debian.org/debian}/dists/trixie-backports/main/binary-amd64/Packages.xz
# LINERATE_BIN: the binary to boot with (scripts/test-all.sh names the `ci` profile's).
BIN=${LINERATE_BIN:-target/release/linerate}
keep=0
bench=""
kernels="bookworm trixie-backports"
while [ $# -gt 0 ]; do
    case $1 in
        --keep) keep=1 ;;
        --bench) bench=" ktls.bench" ;;
        --kernel)
            shift
            case ${1:-} in
                bookworm | trixie-backports) kernels=$1 ;;
                *) echo "ktls-vm: --kernel takes bookworm or trixie-backports" >&2; exit 2 ;;
            esac ;;
        *) echo "ktls-vm: unknown option $1 (expected --keep, --bench, --kernel NAME)" >&2; exit 2 ;;
    esac
    shift
done

cannot() { echo "ktls-vm: cannot run: $*" >&2; exit 2; }

apt_install() {
    DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -q \
        --no-install-recommends "$@" >"$WORK/apt.log" 2>&1
}

# A fresh machine may have no package lists yet: fetched once, only when something is missing.
apt_update() {
    [ "$(id -u)" = 0 ] || return 1
    echo "ktls-vm: apt-get update"
    timeout 300 apt-get update -q >"$WORK/apt-update.log" 2>&1
}

need_tools() {
    local missing=()
    command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
    [ -x /bin/busybox ] && file -L /bin/busybox 2>/dev/null | grep -q "statically linked" \
        || missing+=(busybox-static)
    command -v cpio >/dev/null || missing+=(cpio)
    command -v depmod >/dev/null || missing+=(kmod)
    command -v python3 >/dev/null || missing+=(python3)
    command -v openssl >/dev/null || missing+=(openssl)
    command -v file >/dev/null || missing+=(file)
    command -v zstd >/dev/null || missing+=(zstd)
    command -v curl >/dev/null || missing+=(curl)
    if [ ${#missing[@]} -gt 0 ]; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
            echo "ktls-vm: installing ${missing[*]}"
            apt_install "${missing[@]}" || { apt_update && apt_install "${missing[@]}"; } \
                || cannot "apt-get install ${missing[*]} failed (see $WORK/apt.log)"
        else
            cannot "missing ${missing[*]} (apt-get install --no-install-recommends ${missing[*]})"
        fi
    fi
}

# download_backports DIR: the newest trixie-backports kernel image package into DIR, checked
# against the SHA256 its (HTTP-fetched) index gives. The index itself is not signature-checked
# here: this is a throwaway test VM, and the same bytes come from Debian's own mirror.
download_backports() {
    timeout 300 python3 - "$1" "$BACKPORTS_INDEX" <<'EOF'
import hashlib, lzma, os, re, sys, urllib.request
out, index = sys.argv[1], sys.argv[2]
base = index.split("/dists/")[0]
text = lzma.decompress(urllib.request.urlopen(index, timeout=60).read()).decode()
pkgs, best = {}, None
for stanza in text.split("\n\n"):
    f = dict(re.findall(r"^([A-Za-z0-9-]+): (.*)$", stanza, re.M))
    if "Package" in f and "Filename" in f:
        pkgs[f["Package"]] = f
    m = re.fullmatch(r"linux-image-((\d+)\.(\d+)\.(\d+)\+deb13-amd64)", f.get("Package", ""))
    if m and "Filename" in f:
        key = tuple(int(x) for x in m.groups()[1:])
        if best is None or key > best[0]:
            best = (key, m.group(1))
if best is None:
    sys.exit("no linux-image-*+deb13-amd64 in " + index)
# Newer kernels split the image: the kernel in linux-binary-*, the modules in linux-modules-*.
for name in (f"linux-image-{best[1]}", f"linux-binary-{best[1]}", f"linux-modules-{best[1]}"):
    f = pkgs.get(name)
    if f is None:
        continue
    data = urllib.request.urlopen(f"{base}/{f['Filename']}", timeout=240).read()
    if hashlib.sha256(data).hexdigest() != f["SHA256"]:
        sys.exit("SHA256 mismatch for " + f["Filename"])
    open(os.path.join(out, os.path.basename(f["Filename"])), "wb").write(data)
    print(f["Package"], f["Version"])
EOF
}

# fetch_kernel NAME: target/ktls-vm/NAME/{vmlinux,kernel/} (cached).
fetch_kernel() {
    local dir="$WORK/$1" pkg
    [ -f "$dir/vmlinux" ] && [ -d "$dir/kernel/lib/modules" ] && return
    rm -rf "$dir"
    mkdir -p "$dir"
    if [ "$1" = bookworm ]; then
        find_pkg() {
            apt-cache search --names-only "^${BOOKWORM_GLOB//\*/.*}\$" 2>/dev/null \
                | awk '{print $1}' | grep -v -e cloud -e rt- | sort -V | tail -1
        }
        pkg=$(find_pkg) || true
        if [ -z "$pkg" ] && apt_update; then pkg=$(find_pkg) || true; fi
        [ -n "$pkg" ] || cannot "no $BOOKWORM_GLOB package in the apt sources"
        (cd "$dir" && timeout 300 apt-get download "$pkg" >download.log 2>&1) \
            || cannot "apt-get download $pkg failed (see $dir/download.log)"
    else
        download_backports "$dir" >"$dir/download.log" 2>&1 \
            || cannot "the trixie-backports kernel could not be downloaded (see $dir/download.log)"
    fi
    for deb in "$dir"/linux-*.deb; do dpkg-deb -x "$deb" "$dir/kernel"; done
    rm -f "$dir"/linux-*.deb
    # Newer packages ship /usr/lib/modules (merged /usr); the guest wants /lib/modules.
    if [ ! -d "$dir/kernel/lib/modules" ] && [ -d "$dir/kernel/usr/lib/modules" ]; then
        mkdir -p "$dir/kernel/lib" && mv "$dir/kernel/usr/lib/modules" "$dir/kernel/lib/modules"
    fi
    python3 - "$dir" <<'EOF'
import glob, lzma, subprocess, sys, zlib
work = sys.argv[1]
found = (glob.glob(f"{work}/kernel/boot/vmlinuz-*")
         + glob.glob(f"{work}/kernel/lib/modules/*/vmlinuz"))
if not found:
    sys.exit("no vmlinuz in the kernel package")
data = open(found[0], "rb").read()

def unzstd(blob):
    # Debian's newer kernels are zstd-compressed (the zstd tool; trailing bytes are ignored).
    r = subprocess.run(["zstd", "-dcq"], input=blob, capture_output=True)
    return r.stdout

# The compressed kernel sits inside the bzImage; find its stream and decompress it.
for magic, unpack in ((b"\xfd7zXZ\x00", lambda b: lzma.LZMADecompressor().decompress(b)),
                      (b"\x1f\x8b\x08",
                       lambda b: zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(b)),
                      (b"\x28\xb5\x2f\xfd", unzstd)):
    at = data.find(magic)
    while at >= 0:
        try:
            out = unpack(data[at:])
        except Exception:
            out = b""
        if out[:4] == b"\x7fELF":
            open(f"{work}/vmlinux", "wb").write(out)
            sys.exit(0)
        at = data.find(magic, at + 1)
sys.exit("no ELF kernel found inside vmlinuz")
EOF
    # Only the modules and the kernel are kept.
    find "$dir/kernel" -mindepth 1 -maxdepth 1 ! -name lib ! -name boot -exec rm -rf {} +
}

# build_initramfs NAME
build_initramfs() {
    local dir="$WORK/$1" root="$WORK/$1/initramfs" kver
    rm -rf "$root"
    mkdir -p "$root"/{bin,sbin,proc,sys,dev,tmp,etc,srv,lib/modules,lib64,lib/x86_64-linux-gnu}
    cp /bin/busybox "$root/bin/busybox"
    for a in sh mount mkdir cat grep sleep poweroff insmod modprobe head tail wc kill seq dd md5sum sha256sum cut sed echo ls ip sort uniq wget; do
        ln -sf busybox "$root/bin/$a"
    done
    # The tls module and every crypto module the kernel may ask for (gcm(aes), ghash,
    # chacha20poly1305 and their x86 versions): the kernel loads them through /sbin/modprobe
    # (busybox) when a socket takes keys, as on a normal install.
    kver=$(ls "$dir/kernel/lib/modules")
    local kmods="$dir/kernel/lib/modules/$kver" gmods="$root/lib/modules/$kver"
    for d in kernel/net/tls kernel/crypto kernel/arch/x86/crypto kernel/lib/crypto \
        kernel/drivers/virtio; do
        mkdir -p "$gmods/$d"
        cp -r "$kmods/$d/." "$gmods/$d/"
    done
    # virtio-net, for the host's checks through QEMU's port forward.
    for m in drivers/net/virtio_net drivers/net/net_failover net/core/failover; do
        mkdir -p "$gmods/kernel/$(dirname $m)"
        cp "$kmods/kernel/$m".ko* "$gmods/kernel/$(dirname $m)/"
    done
    cp "$kmods"/modules.builtin* "$kmods/modules.order" "$gmods/" 2>/dev/null || true
    depmod -b "$root" "$kver" 2>/dev/null   # (newer packages lack modules.order: harmless)
    ln -sf ../bin/busybox "$root/sbin/modprobe"
    cp "$BIN" "$root/bin/linerate"
    for lib in $(ldd "$BIN" | awk '/=>/ {print $3} /ld-linux/ {print $1}'); do
        cp -L "$lib" "$root$lib"
    done
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
        -keyout "$root/etc/key.pem" -out "$root/etc/cert.pem" -subj /CN=localhost \
        -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1
    cp scripts/ktls-vm/init.sh "$root/init"
    chmod +x "$root/init"
    (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$dir/initramfs.gz"
}

# host_checks PORT FULL PART: curl (OpenSSL) against the guest's HTTPS port through QEMU's
# forward; prints `KTLS host_<check> PASS|FAIL` lines like the guest's.
host_checks() {
    local url="https://127.0.0.1:$1" full=$2 part=$3 got v
    for v in 1.2 1.3; do
        got=$(curl -sk --tlsv$v --tls-max $v --max-time 120 "$url/f100m.bin" | sha256sum | cut -c1-64)
        [ "$got" = "$full" ] && echo "KTLS host_file_100m_tls$v PASS sha256 $got" \
            || echo "KTLS host_file_100m_tls$v FAIL sha256 $got, want $full"
    done
    got=$(curl -sk --max-time 60 -r 1000000-2999999 "$url/f100m.bin" | sha256sum | cut -c1-64)
    [ "$got" = "$part" ] && echo "KTLS host_range PASS bytes=1000000-2999999" \
        || echo "KTLS host_range FAIL sha256 $got, want $part"
    # A client that reads 3 MB of the file and hangs up.
    curl -sk --max-time 60 "$url/f100m.bin" 2>/dev/null | head -c 3000000 >/dev/null
    got=$(curl -sk --max-time 30 -o /dev/null -w '%{http_code}' "$url/json")
    [ "$got" = 200 ] && echo "KTLS host_after_hangup PASS 200" \
        || echo "KTLS host_after_hangup FAIL status $got"
    curl -sk --max-time 30 -o /dev/null "$url/host-done" || true
}

# boot_checked NAME: boot NAME; when QEMU ended before the guest's init ran (no KTLS-KERNEL
# line: QEMU could not start, or the kernel stopped while booting), say so, show why, and boot
# it once more. A guest that reached its init is never booted again: a kTLS check that fails
# there fails the run.
boot_checked() {
    boot "$1" && return 0
    grep -aq "^KTLS-KERNEL" "$WORK/$1/console.log" && return 1
    echo "ktls-vm: $1: the guest never reached its init; booting it once more"
    boot "$1"
}

# boot NAME
boot() {
    local dir="$WORK/$1" log="$WORK/$1/console.log" hostlog="$WORK/$1/host.log" qpid verdicts
    local port hosted=0
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    : >"$log"
    : >"$hostlog"
    qemu-system-x86_64 -machine q35 -accel tcg -cpu max -smp 2 -m 1024 \
        -kernel "$dir/vmlinux" -initrd "$dir/initramfs.gz" \
        -append "console=ttyS0 quiet panic=-1 tsc=reliable$bench" \
        -nographic -no-reboot \
        -nic "user,model=virtio-net-pci,restrict=on,hostfwd=tcp:127.0.0.1:$port-:8443" \
        >"$log" 2>&1 </dev/null &
    qpid=$!
    local start=$SECONDS
    while kill -0 "$qpid" 2>/dev/null; do
        if grep -q "^KTLS-DONE" "$log"; then break; fi
        if [ $hosted = 0 ] && grep -aq "^KTLS-HOST-READY" "$log"; then
            hosted=1
            # shellcheck disable=SC2046
            host_checks "$port" $(grep -a -m1 "^KTLS-HOST-READY" "$log" | tr -d '\r' | cut -d' ' -f2,3) >"$hostlog" 2>&1
        fi
        if [ $((SECONDS - start)) -ge "$DEADLINE_S" ]; then
            echo "ktls-vm: the guest did not finish within ${DEADLINE_S}s" >&2
            break
        fi
        sleep 1
    done
    # The guest powers off after KTLS-DONE; give it a moment, then stop QEMU by its PID.
    for _ in 1 2 3 4 5; do kill -0 "$qpid" 2>/dev/null || break; sleep 1; done
    kill "$qpid" 2>/dev/null || true
    wait "$qpid" 2>/dev/null || true
    echo "ktls-vm: $1 guest ran $((SECONDS - start))s; console in $log"
    grep -ao "KTLS-KERNEL Linux version [^ ]*" "$log" || true
    verdicts=$(cat "$log" "$hostlog" | grep -a "^KTLS " || true)
    echo "$verdicts"
    grep -a "^KTLS-BENCH\|^KTLS-CRYPTO\|^KTLS-INFO" "$log" | tr -d "\r" || true
    if ! grep -aq "^KTLS-DONE" "$log"; then
        echo "ktls-vm: $1 FAIL (no KTLS-DONE); the console's last lines (QEMU's own errors too):"
        tail -n 25 "$log" | tr -d '\r' | sed 's/\x1b\[[0-9;?]*[A-Za-z]//g; s/^/    /'
        return 1
    fi
    [ -n "$verdicts" ] || { echo "ktls-vm: $1 FAIL (no verdicts)"; return 1; }
    if echo "$verdicts" | grep -q "^KTLS [^ ]* FAIL"; then echo "ktls-vm: $1 FAIL"; return 1; fi
    echo "ktls-vm: $1: all $(echo "$verdicts" | grep -c PASS) checks passed"
}

mkdir -p "$WORK"
need_tools
[ -x "$BIN" ] || cargo build --release -p linerate
status=0
for k in $kernels; do
    fetch_kernel "$k"
    build_initramfs "$k"
    [ "$keep" = 1 ] || rm -rf "$WORK/$k/initramfs"
done
if [ -n "$bench" ]; then
    # Measuring: one guest at a time, nothing beside it.
    for k in $kernels; do boot_checked "$k" || status=1; done
else
    # The guests run side by side: one after the other they kept only ~1.1 of this host's 2
    # cores busy (each waits on its own emulated network and timers much of the time).
    # Each boot stops its QEMU by PID at its deadline; this shell waits for both.
    pids=()
    for k in $kernels; do
        # `||`: boot runs without errexit here as in the sequential branch (its hang-up check
        # ends curl with a write error on purpose).
        { boot_checked "$k" || exit 1; } >"$WORK/$k/verdicts.log" 2>&1 &
        pids+=($!)
    done
    i=0
    for k in $kernels; do
        wait "${pids[$i]}" || status=1
        cat "$WORK/$k/verdicts.log"
        i=$((i + 1))
    done
fi
exit $status
