#!/usr/bin/env bash
# Builds linerate's Debian package with cargo-deb ([package.metadata.deb] in
# crates/linerate/Cargo.toml) and checks it: its control fields and conffiles, then an
# installation into an empty temporary root with the real dpkg — maintainer scripts included —
# and the files, modes, user and directories it left there, the installed binary serving the
# placeholder page through the shipped configuration, `systemd-analyze verify` of the installed
# units, an edited conffile kept across a reinstallation, and a purge that removes it all.
#
#   scripts/deb.sh [--no-build]   --no-build: package target/release/linerate (or $LINERATE_BIN) as it is
#                                 (scripts/test-all.sh builds it just before); otherwise
#                                 cargo-deb runs `cargo build --release --locked` itself
#
# The clean root: `dpkg --root=DIR --force-script-chrootless` installs into DIR with a dpkg
# database of its own (DIR/var/lib/dpkg) and runs the maintainer scripts without chroot(2),
# with DPKG_ROOT=DIR, which they honour (systemd-sysusers --root, deb-systemd-helper's state, the
# directories; a chroot would need a shell and libc in DIR, i.e. a Debian base). DIR starts with
# what base-passwd gives every Debian system (/etc/passwd, /etc/group with root), and a
# policy-rc.d that refuses every start and stop, so no unit of the host is touched (where the
# host runs systemd, the scripts' `systemctl daemon-reload` still reaches it, as any package
# installation does). --force-depends: DIR's database knows no libc6 or systemd; the
# dependencies themselves are checked in the control fields.
#
# cargo-deb is installed into target/tools/cargo-deb with `cargo install --locked`, pinned to
# CARGO_DEB_VERSION below (the newest on crates.io), and reinstalled only when missing or
# another version. dpkg-dev (dpkg-shlibdeps, for the $auto dependencies) and a
# systemd-sysusers (the postinst's) are installed with apt-get when missing (root on
# Debian). Exit 2, with a line `deb: NOT RUN: …` saying why, where the tools cannot be had;
# 1 when a check fails (each printed); 0 with a one-line summary when all hold. Without
# systemd-analyze that one check says NOT RUN and the others still count.
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO_DEB_VERSION=3.8.0
tools=$PWD/target/tools/cargo-deb
cargo_deb=$tools/bin/cargo-deb

say() { echo "deb: $*" >&2; }
not_run() { say "NOT RUN: $*"; exit 2; }

build=1
case "${1:-}" in
    "") ;;
    --no-build) build="" ;;
    *) say "usage: scripts/deb.sh [--no-build]"; exit 1 ;;
esac

pids=()
root=""
work=""
bin_target=""
cleanup() {
    local p
    for p in ${pids[@]+"${pids[@]}"}; do kill "$p" 2>/dev/null || true; done
    for p in ${pids[@]+"${pids[@]}"}; do wait "$p" 2>/dev/null || true; done
    if [ -n "$root" ]; then rm -rf "$root"; fi
    if [ -n "$work" ]; then rm -rf "$work"; fi
    if [ -n "$bin_target" ]; then rm -rf "$bin_target"; fi
}
trap cleanup EXIT

command -v cargo >/dev/null || not_run "no cargo"
for tool in dpkg dpkg-deb; do
    command -v "$tool" >/dev/null || not_run "no $tool: not a Debian system"
done
for tool in curl python3; do
    command -v "$tool" >/dev/null || not_run "no $tool on this machine"
done

# apt_install PACKAGE…: as root on Debian, with the log shown when it fails.
apt_updated=""
apt_install() {
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then return 1; fi
    local log
    log=$(mktemp "${TMPDIR:-/tmp}/linerate-deb-apt.XXXXXX")
    if [ -z "$apt_updated" ]; then
        apt-get update -q >"$log" 2>&1 || true
        apt_updated=1
    fi
    say "installing $* (apt-get, --no-install-recommends)"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" \
        >>"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        return 1
    fi
    rm -f "$log"
}
if ! command -v dpkg-shlibdeps >/dev/null; then
    apt_install dpkg-dev || not_run "no dpkg-shlibdeps (dpkg-dev), and apt-get could not install it"
fi
if ! command -v systemd-sysusers >/dev/null; then
    # The standalone one where systemd itself is not installed (it conflicts with systemd).
    apt_install systemd-standalone-sysusers \
        || not_run "no systemd-sysusers, and apt-get could not install systemd-standalone-sysusers"
fi

# `cargo-deb --version` says "cargo-deb 3.8.0".
if [ "$("$cargo_deb" --version 2>/dev/null)" != "cargo-deb $CARGO_DEB_VERSION" ]; then
    mkdir -p "$tools"
    say "installing cargo-deb $CARGO_DEB_VERSION into $tools"
    cargo install cargo-deb --version "$CARGO_DEB_VERSION" --locked --root "$tools" \
        >"$tools/install.log" 2>&1 || {
        cat "$tools/install.log" >&2
        not_run "cargo install cargo-deb $CARGO_DEB_VERSION failed"
    }
    [ "$("$cargo_deb" --version 2>/dev/null)" = "cargo-deb $CARGO_DEB_VERSION" ] \
        || not_run "cargo install succeeded but $cargo_deb is not cargo-deb $CARGO_DEB_VERSION"
fi

target=${CARGO_TARGET_DIR:-target}
# --no-build with LINERATE_BIN (scripts/test-all.sh: the `ci` profile's binary): that binary is
# packaged, laid where cargo-deb looks for it in a target directory of its own.
if [ -z "$build" ] && [ -n "${LINERATE_BIN:-}" ]; then
    [ -x "$LINERATE_BIN" ] || { say "no binary at LINERATE_BIN=$LINERATE_BIN"; exit 1; }
    target=$(mktemp -d "${TMPDIR:-/tmp}/linerate-deb-target.XXXXXX")
    bin_target=$target
    mkdir -p "$target/release"
    cp "$LINERATE_BIN" "$target/release/linerate"
    export CARGO_TARGET_DIR=$target
fi
if [ -z "$build" ] && [ ! -x "$target/release/linerate" ]; then
    say "no binary at $target/release/linerate (cargo build --release --locked -p linerate)"
    exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/linerate-deb.XXXXXX")
deb_args=(-p linerate --locked)
if [ -z "$build" ]; then deb_args+=(--no-build); fi
# cargo-deb prints the package's path as its last line on stdout.
PATH=$tools/bin:$PATH cargo deb "${deb_args[@]}" >"$work/cargo-deb.out" \
    || { say "FAILED: cargo deb exited $?"; exit 1; }
deb=$(tail -n 1 "$work/cargo-deb.out")
[ -f "$deb" ] || { cat "$work/cargo-deb.out" >&2; say "FAILED: cargo deb made no package"; exit 1; }
version=$(dpkg-deb --field "$deb" Version)
say "built $deb ($(($(stat -c %s "$deb") / 1024)) KiB)"

failures=0
checks=0
# check WHAT COMMAND…: counts it; prints WHAT when COMMAND fails.
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
# has FILE REGEX: FILE has a line matching the extended REGEX (FILE shown when not);
# not_has FILE REGEX: it has none.
has() {
    grep -Eq -- "$2" "$1" || { echo "no line /$2/ in:"; cat "$1"; return 1; }
}
not_has() {
    if grep -Eq -- "$2" "$1"; then echo "a line /$2/ in $1:"; grep -E -- "$2" "$1"; return 1; fi
}
# not_exists PATH…: none of them exists (not even as a dangling symlink).
not_exists() {
    local p bad=0
    for p in "$@"; do
        if [ -e "$p" ] || [ -L "$p" ]; then echo "$p exists"; bad=1; fi
    done
    return "$bad"
}
# mode PATH MODE OWNER: stat's octal mode and user:group.
mode() {
    local got
    got=$(stat -c '%a %U:%G' "$1") || return 1
    [ "$got" = "$2 $3" ] || { echo "$1: $got, wanted $2 $3"; return 1; }
}

# The control fields and the control archive.
dpkg-deb --info "$deb" >"$work/info"
dpkg-deb --ctrl-tarfile "$deb" | tar -x -C "$work" ./conffiles ./postinst ./postrm ./prerm
check "Package: linerate" has "$work/info" '^ Package: linerate$'
# The workspace's version ([workspace.package], the first `version =` of ./Cargo.toml), -1.
crate_version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
check "Version: $crate_version-1, the workspace's" \
    has "$work/info" "^ Version: ${crate_version//./\\.}-1\$"
check "Architecture" has "$work/info" "^ Architecture: $(dpkg --print-architecture)\$"
check "Maintainer" has "$work/info" '^ Maintainer: .+ <.+@.+>$'
check "Section: httpd" has "$work/info" '^ Section: httpd$'
check "Priority: optional" has "$work/info" '^ Priority: optional$'
check "Depends: libc6 (from \$auto)" has "$work/info" '^ Depends: .*libc6 \(>= [0-9.]+\)'
check "Depends: a systemd-sysusers" has "$work/info" \
    '^ Depends: .*systemd \| systemd-standalone-sysusers \| systemd-sysusers'
check "Description and an extended description" \
    has "$work/info" '^  This package installs /usr/bin/linerate'
check "conffile /etc/linerate/linerate.toml" has "$work/conffiles" '^/etc/linerate/linerate\.toml$'
check "conffile /etc/logrotate.d/linerate" has "$work/conffiles" '^/etc/logrotate\.d/linerate$'
check "postinst creates the user (systemd-sysusers)" has "$work/postinst" \
    '^ *systemd-sysusers \$\{DPKG_ROOT:\+--root="\$DPKG_ROOT"\} linerate\.conf$'
# debhelper's "dont-enable" shape: enable only what an earlier installation had enabled.
check "postinst enables a unit only where it was enabled before" \
    has "$work/postinst" '^\s*if deb-systemd-helper debian-installed linerate\.service; then$'
check "postinst starts no unit" not_has "$work/postinst" 'deb-systemd-invoke (start|\$_dh_action)'
check "prerm stops the units on removal" \
    has "$work/prerm" 'deb-systemd-invoke stop .*linerate\.service'

# host_state: what an installation leaking out of the root would change on this host.
host_state() {
    sha256sum /etc/passwd /etc/group
    local p
    for p in /usr/bin/linerate /etc/linerate /var/lib/linerate /var/log/linerate \
        /usr/lib/systemd/system/linerate.service /usr/lib/sysusers.d/linerate.conf \
        /var/lib/systemd/deb-systemd-helper-enabled/linerate.service.dsh-also; do
        if [ -e "$p" ]; then echo "$p present"; fi
    done
    dpkg-query --show --showformat '${Status}\n' linerate 2>&1 || true
}
host_state >"$work/host.before"

# The clean root.
root=$(mktemp -d "${TMPDIR:-/tmp}/linerate-deb-root.XXXXXX")
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/var/log" "$root/etc" \
    "$root/usr/sbin"
touch "$root/var/lib/dpkg/status" "$root/var/lib/dpkg/available"
printf 'root:x:0:0:root:/root:/bin/bash\n' >"$root/etc/passwd"
printf 'root:x:0:\n' >"$root/etc/group"
printf 'root:*::0:99999:7:::\n' >"$root/etc/shadow"
printf 'root:*::\n' >"$root/etc/gshadow"
chmod 0640 "$root/etc/shadow" "$root/etc/gshadow"
printf '#!/bin/sh\n# scripts/deb.sh: no service of a temporary root is ever started\nexit 101\n' \
    >"$root/usr/sbin/policy-rc.d"
chmod 0755 "$root/usr/sbin/policy-rc.d"
# dpkg_root ARGS…: dpkg acting on the clean root only (its database, its log).
dpkg_root() {
    dpkg --root="$root" --log="$root/var/log/dpkg.log" --force-script-chrootless \
        --force-depends --force-unsafe-io "$@"
}
if ! dpkg_root --install "$deb" >"$work/install.log" 2>&1; then
    cat "$work/install.log" >&2
    say "FAILED: dpkg --install into a clean root (output above)"
    exit 1
fi
check "dpkg: install ok installed (the postinst ran)" \
    bash -c 'dpkg --root="$1" --status linerate | grep -qx "Status: install ok installed"' _ "$root"

check "/usr/bin/linerate 0755 root" mode "$root/usr/bin/linerate" 755 root:root
check "/etc/linerate/linerate.toml 0644 root" mode "$root/etc/linerate/linerate.toml" 644 root:root
check "/etc/logrotate.d/linerate 0644" mode "$root/etc/logrotate.d/linerate" 644 root:root
check "linerate.service 0644" mode "$root/usr/lib/systemd/system/linerate.service" 644 root:root
check "linerate.socket 0644" mode "$root/usr/lib/systemd/system/linerate.socket" 644 root:root
check "/usr/lib/sysusers.d/linerate.conf 0644" \
    mode "$root/usr/lib/sysusers.d/linerate.conf" 644 root:root
check "the placeholder page" mode "$root/usr/share/linerate/www/index.html" 644 root:root
for doc in copyright README.md config.md serve.md; do
    check "/usr/share/doc/linerate/$doc" test -s "$root/usr/share/doc/linerate/$doc"
done
check "the shipped config is dist/linerate.toml" \
    cmp dist/linerate.toml "$root/etc/linerate/linerate.toml"
check "the installed unit is dist/linerate.service" \
    cmp dist/linerate.service "$root/usr/lib/systemd/system/linerate.service"
check "the unit runs /usr/bin/linerate on /etc/linerate/linerate.toml" has \
    "$root/usr/lib/systemd/system/linerate.service" \
    '^ExecStart=/usr/bin/linerate serve --config /etc/linerate/linerate\.toml$'
check "no unit enabled" not_exists \
    "$root/etc/systemd/system/multi-user.target.wants/linerate.service" \
    "$root/etc/systemd/system/sockets.target.wants/linerate.socket"

# The user (by systemd-sysusers, in the root's files) and the directories the postinst made.
check "user linerate, no login shell, home /var/lib/linerate" has "$root/etc/passwd" \
    '^linerate:x:[0-9]+:[0-9]+:[^:]*:/var/lib/linerate:/usr/sbin/nologin$'
check "group linerate" has "$root/etc/group" '^linerate:x:[0-9]+:'
uid=$(awk -F: '$1 == "linerate" { print $3 }' "$root/etc/passwd")
gid=$(awk -F: '$1 == "linerate" { print $3 }' "$root/etc/group")
for dir in var/lib/linerate var/log/linerate; do
    check "/$dir 0750 linerate" bash -c '[ "$(stat -c "%a %u:%g" "$1")" = "750 $2" ] ||
        { stat -c "%n: %a %u:%g" "$1"; echo "wanted 750 $2"; exit 1; }' _ "$root/$dir" "$uid:$gid"
done

# The installed binary, and the shipped config with its absolute paths taken into the root.
bin=$root/usr/bin/linerate
"$bin" --version >"$work/version" 2>&1 || true
# `linerate 0.1.0 (COMMIT)`: the commit it was built from (12 hex digits), or `unknown` for a
# build outside a git checkout (the build information `/metrics` and `--version` show).
check "linerate --version is the package's" has "$work/version" \
    "^linerate ${version%-*} \\(([0-9a-f]{12}|unknown)\\)\$"
sed -e "s#\"/usr/share/linerate/#\"$root/usr/share/linerate/#" \
    -e "s#\"/var/log/linerate/#\"$root/var/log/linerate/#" \
    "$root/etc/linerate/linerate.toml" >"$work/linerate.toml"
check "the shipped config passes --check-config" "$bin" serve --check-config "$work/linerate.toml"

# It serves the placeholder page (the file's listener replaced by a free loopback port).
port=$(python3 -c '
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
')
"$bin" serve --config "$work/linerate.toml" --addr "127.0.0.1:$port" --workers 1 --no-pin \
    >"$work/banner" 2>"$work/linerate.err" &
pids+=("$!")
started=""
for _ in $(seq 100); do
    if grep -q "^linerate serving on http://127\.0\.0\.1:$port" "$work/banner"; then
        started=1
        break
    fi
    kill -0 "${pids[0]}" 2>/dev/null || break
    sleep 0.1
done
checks=$((checks + 1))
if [ -z "$started" ]; then
    say "MISMATCH: the installed linerate did not start on the shipped config within 10 s"
    sed 's/^/  /' "$work/banner" "$work/linerate.err" >&2
    failures=$((failures + 1))
else
    check "GET / answers the placeholder page" bash -c 'curl -sS --max-time 10 "$1" | cmp - "$2"' \
        _ "http://127.0.0.1:$port/" "$root/usr/share/linerate/www/index.html"
    kill "${pids[0]}"
    wait "${pids[0]}" 2>/dev/null || true
    pids=()
    check "the access log in /var/log/linerate has the request" \
        has "$root/var/log/linerate/access.log" '"GET / HTTP/1\.1" 200 '
fi

# systemd-analyze verify on the installed units, ExecStart's binary taken in the root.
if command -v systemd-analyze >/dev/null; then
    mkdir "$work/units"
    sed "s#/usr/bin/linerate#$bin#g" "$root/usr/lib/systemd/system/linerate.service" \
        >"$work/units/linerate.service"
    cp "$root/usr/lib/systemd/system/linerate.socket" "$work/units/"
    check "systemd-analyze verify linerate.service linerate.socket: no output" bash -c \
        'out=$(systemd-analyze verify "$1/linerate.service" "$1/linerate.socket" 2>&1) &&
         [ -z "$out" ] || { echo "$out"; exit 1; }' _ "$work/units"
    verified="systemd-analyze verify clean"
else
    say "systemd-analyze verify NOT RUN: no systemd-analyze here (the other checks count)"
    verified="systemd-analyze NOT RUN"
fi

# logrotate reads /etc/logrotate.d/linerate without an error and finds the access log (--debug:
# rotates nothing; it exits 0 even past a line it ignores, so its output is read).
# Where logrotate is missing, Debian's and its libpopt0 are unpacked (not installed) into $work.
logrotate=$(command -v logrotate || true)
lr_libs=""
if [ -z "$logrotate" ] && [ -x /usr/sbin/logrotate ]; then logrotate=/usr/sbin/logrotate; fi
if [ -z "$logrotate" ] && command -v apt-get >/dev/null &&
    (cd "$work" && apt-get download logrotate libpopt0) >"$work/apt-download.log" 2>&1; then
    for pkg in "$work"/logrotate_*.deb "$work"/libpopt0_*.deb; do
        dpkg-deb -x "$pkg" "$work/lr"
    done
    logrotate=$work/lr/usr/sbin/logrotate
    lr_libs=$work/lr/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)
fi
if [ -n "$logrotate" ] && [ -x "$logrotate" ]; then
    sed "s#/var/log/linerate/#$root/var/log/linerate/#" "$root/etc/logrotate.d/linerate" \
        >"$work/logrotate.conf"
    check "logrotate reads /etc/logrotate.d/linerate and finds the access log" \
        env ${lr_libs:+LD_LIBRARY_PATH="$lr_libs"} bash -c \
        '"$1" --debug --state "$2/logrotate.state" "$2/logrotate.conf" >"$2/logrotate.out" 2>&1 &&
         grep -q "considering log $3/var/log/linerate/access.log" "$2/logrotate.out" &&
         ! grep -q "^error:" "$2/logrotate.out" ||
         { cat "$2/logrotate.out"; exit 1; }' _ "$logrotate" "$work" "$root"
else
    say "logrotate check NOT RUN: no logrotate, and apt-get download could not fetch it" \
        "(the other checks count)"
fi

# A conffile the admin edited survives a reinstallation (the upgrade path of the scripts).
echo '# edited by scripts/deb.sh' >>"$root/etc/linerate/linerate.toml"
checks=$((checks + 1))
if ! dpkg_root --install "$deb" >"$work/reinstall.log" 2>&1; then
    say "MISMATCH: dpkg --install over the installed package failed"
    sed 's/^/  /' "$work/reinstall.log" >&2
    failures=$((failures + 1))
fi
check "the edited conffile kept across a reinstallation" \
    has "$root/etc/linerate/linerate.toml" '^# edited by scripts/deb\.sh$'

# A purge removes the files, the conffiles and what the server wrote; the user stays.
checks=$((checks + 1))
if ! dpkg_root --purge linerate >"$work/purge.log" 2>&1; then
    say "MISMATCH: dpkg --purge failed"
    sed 's/^/  /' "$work/purge.log" >&2
    failures=$((failures + 1))
fi
check "purge removed the binary, the config, the unit, the state and the logs" not_exists \
    "$root/usr/bin/linerate" "$root/etc/linerate/linerate.toml" \
    "$root/usr/lib/systemd/system/linerate.service" "$root/var/lib/linerate" \
    "$root/var/log/linerate"

host_state >"$work/host.after"
check "the host untouched (its users, groups, dpkg database, linerate's paths)" \
    diff "$work/host.before" "$work/host.after"

if [ "$failures" != 0 ]; then
    say "FAILED: $failures of $checks checks ($(basename "$deb"), cargo-deb $CARGO_DEB_VERSION)"
    exit 1
fi
echo "deb: $(basename "$deb") ($(($(stat -c %s "$deb") / 1024)) KiB," \
    "cargo-deb $CARGO_DEB_VERSION):" \
    "installed into a clean root, reinstalled with an edited conffile kept, purged;" \
    "$checks checks passed; $verified"
