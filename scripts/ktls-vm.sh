#!/usr/bin/env bash
# Boots a stock Debian 6.1 kernel (CONFIG_TLS=m) under QEMU (TCG, software emulation) and runs
# linerate's kTLS checks inside it (issue F). This machine's own kernel has no `tls` ULP, so
# the kernel-TLS path can only run here.
#
#   scripts/ktls-vm.sh [--keep] [--bench]   # uses target/release/linerate (built if missing)
#   --keep: leave the initramfs tree in target/ktls-vm; --bench: also measure the server's CPU
#   time per MiB of a 32 MiB HTTPS file, kernel TLS vs user-space TLS (`KTLS-BENCH` lines)
#
# What it does, every step bounded in time:
#   1. tools: qemu-system-x86_64, busybox (static), cpio, python3, openssl; installed with apt
#      (--no-install-recommends) when missing and this is root on Debian, else it says which
#      one is missing and exits 2 (never a silent pass);
#   2. the kernel: `apt-get download linux-image-6.1.0-*-amd64`, unpacked with `dpkg-deb -x`
#      (not installed), the uncompressed vmlinux cut out of vmlinuz (QEMU boots it through its
#      PVH note, seconds instead of a minute of decompression under TCG), cached in
#      target/ktls-vm/;
#   3. the initramfs: busybox, the kernel's tls module, linerate and the shared libraries it
#      links, a throwaway certificate, and guest/init.sh (the checks);
#   4. boots with the serial console on stdout, reads `KTLS <name> PASS|FAIL <detail>` lines
#      until `KTLS-DONE`, kills QEMU by its PID at the deadline.
# Exit 0 only when every check passed; 1 when one failed or the guest never finished; 2 when
# it cannot run here.
set -euo pipefail
cd "$(dirname "$0")/.."

DEADLINE_S=${KTLS_VM_DEADLINE_S:-240}
WORK=target/ktls-vm
KERNEL_PKG_GLOB='linux-image-6.1.0-*-amd64'
BIN=target/release/linerate
keep=0
bench=""
for arg in "$@"; do
    case $arg in
        --keep) keep=1 ;;
        --bench) bench=" ktls.bench" ;;
        *) echo "ktls-vm: unknown option $arg (expected --keep, --bench)" >&2; exit 2 ;;
    esac
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

fetch_kernel() {
    [ -f "$WORK/vmlinux" ] && [ -d "$WORK/kernel/lib/modules" ] && return
    local pkg
    find_pkg() {
        apt-cache search --names-only "^${KERNEL_PKG_GLOB//\*/.*}\$" 2>/dev/null \
            | awk '{print $1}' | grep -v -e cloud -e rt- | sort -V | tail -1
    }
    pkg=$(find_pkg) || true
    if [ -z "$pkg" ] && apt_update; then pkg=$(find_pkg) || true; fi
    [ -n "$pkg" ] || cannot "no $KERNEL_PKG_GLOB package in the apt sources"
    rm -rf "$WORK/kernel" "$WORK"/*.deb
    (cd "$WORK" && timeout 300 apt-get download "$pkg" >download.log 2>&1) \
        || cannot "apt-get download $pkg failed (see $WORK/download.log)"
    dpkg-deb -x "$WORK"/"$pkg"_*.deb "$WORK/kernel"
    python3 - "$WORK" <<'EOF'
import glob, lzma, sys, zlib
work = sys.argv[1]
data = open(glob.glob(f"{work}/kernel/boot/vmlinuz-*")[0], "rb").read()
# The compressed kernel sits inside the bzImage; find its stream and decompress it.
for magic, make in ((b"\xfd7zXZ\x00", lambda: lzma.LZMADecompressor()),
                    (b"\x1f\x8b\x08", lambda: zlib.decompressobj(16 + zlib.MAX_WBITS))):
    at = data.find(magic)
    while at >= 0:
        try:
            out = make().decompress(data[at:])
        except Exception:
            out = b""
        if out[:4] == b"\x7fELF":
            open(f"{work}/vmlinux", "wb").write(out)
            sys.exit(0)
        at = data.find(magic, at + 1)
sys.exit("no ELF kernel found inside vmlinuz")
EOF
}

build_initramfs() {
    local root="$WORK/initramfs" kver
    rm -rf "$root"
    mkdir -p "$root"/{bin,sbin,proc,sys,dev,tmp,etc,srv,lib/modules,lib64,lib/x86_64-linux-gnu}
    cp /bin/busybox "$root/bin/busybox"
    for a in sh mount mkdir cat grep sleep poweroff insmod modprobe head wc kill seq dd md5sum echo ls ip sort uniq; do
        ln -sf busybox "$root/bin/$a"
    done
    # The tls module and every crypto module the kernel may ask for (gcm(aes), ghash,
    # chacha20poly1305 and their x86 versions): the kernel loads them through /sbin/modprobe
    # (busybox) when a socket takes keys, as on a normal install.
    kver=$(ls "$WORK/kernel/lib/modules")
    local kmods="$WORK/kernel/lib/modules/$kver" gmods="$root/lib/modules/$kver"
    for d in kernel/net/tls kernel/crypto kernel/arch/x86/crypto kernel/lib/crypto; do
        mkdir -p "$gmods/$d"
        cp -r "$kmods/$d/." "$gmods/$d/"
    done
    cp "$kmods"/modules.builtin* "$kmods/modules.order" "$gmods/" 2>/dev/null || true
    depmod -b "$root" "$kver"
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
    (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$WORK/initramfs.gz"
}

boot() {
    local log="$WORK/console.log" qpid verdicts
    : >"$log"
    qemu-system-x86_64 -machine q35 -accel tcg -cpu max -smp 2 -m 1024 \
        -kernel "$WORK/vmlinux" -initrd "$WORK/initramfs.gz" \
        -append "console=ttyS0 quiet panic=-1 tsc=reliable$bench" \
        -nographic -no-reboot -nic none >"$log" 2>&1 </dev/null &
    qpid=$!
    local start=$SECONDS
    while kill -0 "$qpid" 2>/dev/null; do
        if grep -q "^KTLS-DONE" "$log"; then break; fi
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
    echo "ktls-vm: guest ran $((SECONDS - start))s; console in $log"
    verdicts=$(grep -a "^KTLS " "$log" || true)
    echo "$verdicts"
    grep -a "^KTLS-BENCH" "$log" || true
    grep -aq "^KTLS-DONE" "$log" || { echo "ktls-vm: FAIL (no KTLS-DONE)"; return 1; }
    [ -n "$verdicts" ] || { echo "ktls-vm: FAIL (no verdicts)"; return 1; }
    if grep -aq "^KTLS .* FAIL" "$log"; then echo "ktls-vm: FAIL"; return 1; fi
    echo "ktls-vm: all $(echo "$verdicts" | grep -c PASS) checks passed"
}

mkdir -p "$WORK"
need_tools
[ -x "$BIN" ] || cargo build --release -p linerate
fetch_kernel
build_initramfs
boot
status=$?
[ "$keep" = 1 ] || rm -rf "$WORK/initramfs"
exit $status
