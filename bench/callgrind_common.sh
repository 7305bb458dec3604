# Sourced by the bench/*_instructions.sh scripts that count a server's instructions per
# request under callgrind: a temporary directory ($tmp) and the PIDs started ($pids), both
# cleaned up at exit, and the helpers every such script needs.
#   free_port                 a free TCP port on 127.0.0.1
#   wait_port PORT            waits until 127.0.0.1:PORT accepts (30 s at most)
#   per_request OUT N         the instructions of every callgrind file OUT* (every thread),
#                             summed and divided by N
command -v valgrind >/dev/null || { echo "NOT RUN: valgrind is not installed"; exit 2; }
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 1 300); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }
per_request() {
    local total=0 f t
    for f in "$1"*; do
        t=$(grep -m1 '^summary:' "$f" | awk '{print $2}')
        total=$((total + ${t:-0}))
    done
    echo $((total / $2))
}
