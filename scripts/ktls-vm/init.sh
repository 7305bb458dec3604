#!/bin/sh
# PID 1 of the kTLS test guest (scripts/ktls-vm.sh). Prints `KTLS <check> PASS|FAIL <detail>`
# lines on the serial console, then `KTLS-DONE`, then powers off. Every wait is bounded.
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /tmp
ip link set lo up

verdict() { echo "KTLS $1 $2 $3"; }
esc=$(printf '\033')
plain() { sed "s/$esc\[[0-9;]*m//g" "$1"; }   # a log without its colour codes (busybox sed has no \x1b)
done_() { echo "KTLS-DONE"; poweroff -f; sleep 5; }

echo "KTLS-KERNEL $(cat /proc/version)"
if modprobe tls && grep -qw tls /proc/sys/net/ipv4/tcp_available_ulp; then
    verdict ulp PASS "tcp_available_ulp: $(cat /proc/sys/net/ipv4/tcp_available_ulp)"
else
    verdict ulp FAIL "the tls module did not load"
    done_
fi

dd if=/dev/urandom of=/srv/f1m.bin bs=1024 count=1024 2>/dev/null

# wait_up PORT: the server answers over TLS (bounded).
wait_up() {
    for i in $(seq 1 100); do
        linerate load -k -t 1 -c 1 -n 1 "https://127.0.0.1:$1/json" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    return 1
}

# load NAME EXPECTED_RESPONSES FLAGS... URL: a bounded run whose every request must be answered.
load() {
    name=$1; want=$2; shift 2
    out=$(linerate load -k -t 1 --timeout 20s --json "$@" 2>&1)
    got=$(echo "$out" | grep -m1 '"responses"' | grep -o '[0-9]*')
    failed=$(echo "$out" | grep -m1 '"failed"' | grep -o '[0-9]*')
    if [ "$got" = "$want" ] && [ "$failed" = 0 ]; then
        verdict "$name" PASS "$got responses"
    else
        verdict "$name" FAIL "responses=$got failed=$failed"
        echo "$out" | grep -A14 '"errors"' | head -16
    fi
}
stat() { grep "^$1[[:space:]]" /proc/net/tls_stat | grep -o '[0-9]*$'; }

# Fallback first, while no crypto module is loaded: with module autoloading off, the kernel
# attaches the tls ULP but refuses every key (ENOENT). The server must see that at start and
# keep its sessions in user space; none may be lost.
echo /bin/false >/proc/sys/kernel/modprobe
linerate serve --addr 127.0.0.1:8081 --workers 1 --tls-port 8444 \
    --tls-cert /etc/cert.pem --tls-key /etc/key.pem --log-level info >/tmp/fallback.log 2>&1 &
fallback=$!
if wait_up 8444; then
    load fallback_user_space 200 -c 2 -n 200 https://127.0.0.1:8444/json
    tx=$(stat TlsTxSw)
    if plain /tmp/fallback.log | grep -m1 "HTTPS:" | grep -q "user-space TLS (rustls)"; then
        [ "${tx:-0}" = 0 ] && verdict fallback_no_ktls PASS "TlsTxSw=${tx:-0}" \
            || verdict fallback_no_ktls FAIL "TlsTxSw=$tx with the crypto modules unloadable"
    else
        # Ciphers built into this kernel need no module: sessions with them may go to the kernel.
        echo "KTLS-INFO fallback: some ciphers are built in here; $(plain /tmp/fallback.log | grep -m1 -o 'ciphers=.*')"
    fi
else
    verdict fallback_user_space FAIL "the server did not answer over TLS"
fi
kill "$fallback" 2>/dev/null; wait "$fallback" 2>/dev/null
echo /sbin/modprobe >/proc/sys/kernel/modprobe
# What udev does at boot on a real install for a CPU with AES-NI and PCLMULQDQ: load the x86
# implementations (on-demand loading for gcm(aes) would pick the generic C AES instead).
modprobe aesni_intel 2>/dev/null; modprobe ghash_clmulni_intel 2>/dev/null
RUST_LOG=info,linerate_server::driver=debug linerate serve --addr 0.0.0.0:8080 --workers 1 --app demo --root /srv --tls-port 8443 \
    --tls-cert /etc/cert.pem --tls-key /etc/key.pem --log-level info --access-log /tmp/access.log \
    >/tmp/serve.log 2>&1 &
server=$!
wait_up 8443 || { verdict serve FAIL "the server did not answer over TLS"; cat /tmp/serve.log; done_; }
# The start-up line names what the kernel takes in words (`ciphers=AES-128-GCM, AES-256-GCM,
# ChaCha20-Poly1305, key updates`, or `none`): the last field of the line.
takes() {
    local word
    case $1 in
        aes_128_gcm) word=AES-128-GCM ;;
        aes_256_gcm) word=AES-256-GCM ;;
        chacha20_poly1305) word=ChaCha20-Poly1305 ;;
        rekey) word="key updates" ;;
        *) return 1 ;;
    esac
    plain /tmp/serve.log | grep -m1 "HTTPS:" | grep -q "ciphers=.*$word"
}
rekey=no; takes rekey && rekey=yes
echo "KTLS-INFO rekey=$rekey $(plain /tmp/serve.log | grep -m1 -o 'ciphers=.*')"
load json_keepalive 200 -c 2 -n 200 https://127.0.0.1:8443/json
load json_reconnect 20 -c 1 -n 20 --reconnect 1 https://127.0.0.1:8443/json

# Every version and cipher: GET keep-alive, pipelined, HEAD, a file; the kernel's counters
# must move for each cipher it takes (TlsTxSw/TlsRxSw count sessions keyed in software kTLS)
# and stay put for one it does not (that session stayed in user space and still answered).
for row in 1.3:TLS13_AES_128_GCM_SHA256:aes_128_gcm 1.3:TLS13_AES_256_GCM_SHA384:aes_256_gcm \
    1.3:TLS13_CHACHA20_POLY1305_SHA256:chacha20_poly1305 \
    1.2:TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256:aes_128_gcm \
    1.2:TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384:aes_256_gcm \
    1.2:TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256:chacha20_poly1305; do
    ver=${row%%:*}; rest=${row#*:}; suite=${rest%%:*}; field=${rest#*:}
    tag="tls${ver}_$field"
    tx0=$(stat TlsTxSw); rx0=$(stat TlsRxSw)
    tls="--tls-version $ver --tls-cipher $suite"
    load "${tag}_get" 40 $tls -c 1 -n 40 https://127.0.0.1:8443/json
    load "${tag}_pipelined" 64 $tls -c 1 -p 16 -n 64 https://127.0.0.1:8443/plaintext
    load "${tag}_head" 8 $tls -c 1 -m HEAD -n 8 https://127.0.0.1:8443/f1m.bin
    load "${tag}_file" 4 $tls -c 1 -n 4 https://127.0.0.1:8443/f1m.bin
    tx1=$(stat TlsTxSw); rx1=$(stat TlsRxSw)
    if takes "$field"; then
        [ "$tx1" -gt "$tx0" ] && [ "$rx1" -gt "$rx0" ] \
            && verdict "${tag}_in_kernel" PASS "TlsTxSw +$((tx1 - tx0)) TlsRxSw +$((rx1 - rx0))" \
            || verdict "${tag}_in_kernel" FAIL "TlsTxSw $tx0->$tx1 TlsRxSw $rx0->$rx1"
    else
        [ "$tx1" = "$tx0" ] && verdict "${tag}_user_space" PASS "kernel lacks $field; counters unchanged" \
            || verdict "${tag}_user_space" FAIL "TlsTxSw $tx0->$tx1 for a cipher the kernel lacks"
    fi
done

# Client key updates (TLS 1.3, update requested, every 4th send). A kernel that takes new
# keys follows them in both directions and the connection lives on; one that cannot (6.1)
# ends the connection after answering what came before the update: the client reconnects,
# and no request may be lost either way.
rk0=$(stat TlsRxRekeyOk)
if [ "$rekey" = yes ]; then
    load client_key_update 40 --tls-version 1.3 --tls-key-update 4 -c 1 -n 40 https://127.0.0.1:8443/json
    rk1=$(stat TlsRxRekeyOk)
    [ "${rk1:-0}" -gt "${rk0:-0}" ] && verdict client_key_update_in_kernel PASS "TlsRxRekeyOk +$((rk1 - rk0))" \
        || verdict client_key_update_in_kernel FAIL "TlsRxRekeyOk ${rk0:-none}->${rk1:-none}"
else
    # Each connection: 3 requests answered, the 4th (sent under the client's new key) is
    # never read; the server closes after the 3 answers and the client counts one read error.
    out=$(linerate load -k -t 1 --timeout 20s --json --tls-version 1.3 --tls-key-update 4 -c 1 -n 40 \
        https://127.0.0.1:8443/json 2>&1)
    got=$(echo "$out" | grep -m1 '"responses"' | grep -o '[0-9]*')
    failed=$(echo "$out" | grep -m1 '"failed"' | grep -o '[0-9]*')
    read_err=$(echo "$out" | grep -m1 '"read"' | grep -o '[0-9]*')
    [ "$got" = 30 ] && [ "$failed" = 10 ] && [ "$read_err" = 10 ] \
        && verdict client_key_update_no_rekey PASS "30 answered, 10 closed at the key update" \
        || verdict client_key_update_no_rekey FAIL "responses=$got failed=$failed read=$read_err"
fi

# Byte-exact files with curl on the host (OpenSSL; QEMU forwards a host port to 8443): 100 MB
# whole over TLS 1.2 and 1.3, a range, and a client that goes away mid-file. The guest prints
# the digests to expect, then waits (bounded) for the host's closing request.
dd if=/dev/urandom of=/srv/f100m.bin bs=1M count=100 2>/dev/null
full=$(sha256sum /srv/f100m.bin | cut -c1-64)
part=$(tail -c +1000001 /srv/f100m.bin | head -c 2000000 | sha256sum | cut -c1-64)
# virtio-pci and virtio-net are modules in some kernels, built in in others.
modprobe virtio_pci 2>/dev/null; modprobe virtio_net 2>/dev/null
for i in $(seq 1 50); do [ -e /sys/class/net/eth0 ] && break; sleep 0.1; done
if ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0; then
    echo "KTLS-HOST-READY $full $part"
    for i in $(seq 1 300); do
        grep -q "/host-done" /tmp/access.log && break
        sleep 1
    done
    grep -q "/host-done" /tmp/access.log || verdict host_checks FAIL "the host never finished"
else
    verdict guest_network FAIL "virtio-net did not come up"
fi
load after_host_checks 10 -c 1 -n 10 https://127.0.0.1:8443/f1m.bin
kill -0 "$server" && verdict server_alive PASS "pid $server" || verdict server_alive FAIL "the server exited"

# Server key updates every 1 MiB on a 100 MB file over TLS 1.3 (kernels that take new keys;
# elsewhere the server ends a connection whose key is used up instead).
if [ "$rekey" = yes ]; then
    linerate serve --addr 127.0.0.1:8083 --workers 1 --app demo --root /srv --tls-port 8446 --tls-key-update 1MiB \
        --tls-cert /etc/cert.pem --tls-key /etc/key.pem --log-level warn >/tmp/rekey.log 2>&1 &
    rk=$!
    wait_up 8446
    tk0=$(stat TlsTxRekeyOk)
    load server_key_update_100m 1 --tls-version 1.3 -c 1 -n 1 https://127.0.0.1:8446/f100m.bin
    tk1=$(stat TlsTxRekeyOk)
    [ "${tk1:-0}" -gt "${tk0:-0}" ] && verdict server_key_update_in_kernel PASS "TlsTxRekeyOk +$((tk1 - tk0))" \
        || verdict server_key_update_in_kernel FAIL "TlsTxRekeyOk ${tk0:-none}->${tk1:-none}"
    kill "$rk" 2>/dev/null; wait "$rk" 2>/dev/null
fi

echo "KTLS-STAT-BEGIN"; cat /proc/net/tls_stat; echo "KTLS-STAT-END"
# Which implementations the kernel's kTLS used (aesni or generic C code, under emulation).
echo "KTLS-CRYPTO $(grep -c -w aes /proc/cpuinfo) cpus with aes; $(grep -A2 -E '^name +: (gcm\(aes\)|rfc4106\(gcm\(aes\)\)|rfc7539\(chacha20,poly1305\))' /proc/crypto | grep driver | tr -s ' ' | tr '\n' ' ')"
tx=$(stat TlsTxSw); rx=$(stat TlsRxSw)
if [ "${tx:-0}" -gt 0 ]; then verdict ktls_tx PASS "TlsTxSw=$tx"; else verdict ktls_tx FAIL "TlsTxSw=${tx:-none}"; fi
if [ "${rx:-0}" -gt 0 ]; then verdict ktls_rx PASS "TlsRxSw=$rx"; else verdict ktls_rx FAIL "TlsRxSw=${rx:-none}"; fi

kill "$server" 2>/dev/null; wait "$server" 2>/dev/null

# With `ktls.bench` on the kernel command line (scripts/ktls-vm.sh --bench): the server's CPU
# time per MiB of a large HTTPS file, kernel TLS against user-space TLS, in this same guest.
# Emulated CPU (TCG): only the ratio means anything.
if grep -qw ktls.bench /proc/cmdline; then
    dd if=/dev/urandom of=/srv/f32m.bin bs=1M count=32 2>/dev/null
    cpu_ms() { awk '{print ($14 + $15) * 10}' "/proc/$1/stat"; }   # utime+stime, 100 Hz ticks
    for mode in kernel user; do
        flag=""; [ "$mode" = user ] && flag="--no-ktls"
        linerate serve --addr 127.0.0.1:8082 --workers 1 --app demo --root /srv --tls-port 8445 $flag \
            --tls-cert /etc/cert.pem --tls-key /etc/key.pem --log-level warn >/dev/null 2>&1 &
        pid=$!
        wait_up 8445
        before=$(cpu_ms $pid)
        load "bench_$mode" 8 -c 1 -n 8 https://127.0.0.1:8445/f32m.bin
        after=$(cpu_ms $pid)
        echo "KTLS-BENCH $mode server_cpu_ms=$((after - before)) mib=256"
        kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    done
fi
echo "KTLS-SERVER-LOG-BEGIN"; grep -v "^GET\|^POST" /tmp/serve.log | sort | uniq -c | sort -rn | head -20; echo "KTLS-SERVER-LOG-END"
done_
