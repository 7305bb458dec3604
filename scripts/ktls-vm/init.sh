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
stat() { grep "^$1" /proc/net/tls_stat | grep -o '[0-9]*$'; }

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
    [ "${tx:-0}" = 0 ] && verdict fallback_no_ktls PASS "TlsTxSw=${tx:-0}" \
        || verdict fallback_no_ktls FAIL "TlsTxSw=$tx with the crypto modules unloadable"
else
    verdict fallback_user_space FAIL "the server did not answer over TLS"
fi
kill "$fallback" 2>/dev/null; wait "$fallback" 2>/dev/null
grep -m1 "HTTPS:" /tmp/fallback.log | sed 's/\x1b\[[0-9;]*m//g'
echo /sbin/modprobe >/proc/sys/kernel/modprobe
RUST_LOG=info,linerate_server::driver::tls=debug linerate serve --addr 127.0.0.1:8080 --workers 1 --root /srv --tls-port 8443 \
    --tls-cert /etc/cert.pem --tls-key /etc/key.pem --log-level info >/tmp/serve.log 2>&1 &
server=$!
wait_up 8443 || { verdict serve FAIL "the server did not answer over TLS"; cat /tmp/serve.log; done_; }
load json_keepalive 200 -c 2 -n 200 https://127.0.0.1:8443/json
load json_pipelined 320 -c 2 -p 16 -n 320 https://127.0.0.1:8443/plaintext
load file_1m 20 -c 1 -n 20 https://127.0.0.1:8443/f1m.bin
load json_reconnect 20 -c 1 -n 20 --reconnect 1 https://127.0.0.1:8443/json

echo "KTLS-STAT-BEGIN"; cat /proc/net/tls_stat; echo "KTLS-STAT-END"
tx=$(stat TlsTxSw); rx=$(stat TlsRxSw)
if [ "${tx:-0}" -gt 0 ]; then verdict ktls_tx PASS "TlsTxSw=$tx"; else verdict ktls_tx FAIL "TlsTxSw=${tx:-none}"; fi
if [ "${rx:-0}" -gt 0 ]; then verdict ktls_rx PASS "TlsRxSw=$rx"; else verdict ktls_rx FAIL "TlsRxSw=${rx:-none}"; fi

kill "$server" 2>/dev/null; wait "$server" 2>/dev/null
grep -m1 "HTTPS:" /tmp/serve.log

# With `ktls.bench` on the kernel command line (scripts/ktls-vm.sh --bench): the server's CPU
# time per MiB of a large HTTPS file, kernel TLS against user-space TLS, in this same guest.
# Emulated CPU (TCG): only the ratio means anything.
if grep -qw ktls.bench /proc/cmdline; then
    dd if=/dev/urandom of=/srv/f32m.bin bs=1M count=32 2>/dev/null
    cpu_ms() { awk '{print ($14 + $15) * 10}' "/proc/$1/stat"; }   # utime+stime, 100 Hz ticks
    for mode in kernel user; do
        flag=""; [ "$mode" = user ] && flag="--no-ktls"
        linerate serve --addr 127.0.0.1:8082 --workers 1 --root /srv --tls-port 8445 $flag \
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
