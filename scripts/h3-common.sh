# Sourced by the HTTP/3 stages (h3-interop, h3-attacks, h3-migrate, h3-netem), and for its
# helpers by h2-attacks: what each needs before it starts a server. Set `stage` (the name
# lines start with) before sourcing.
#
#   say MSG...            a line on stderr, "STAGE: MSG"
#   not_run WHY           the NOT RUN line, exit 2
#   h3_need_aioquic       openssl and aioquic (pip --user installs it where missing), or NOT RUN
#   h3_cert DIR SAN       a throwaway EC certificate for SAN (openssl's subjectAltName form)
#                         as DIR/cert.pem and DIR/key.pem
#   free_port             a free port on 127.0.0.1 (TCP; the same number is free for UDP
#                         on this loopback in practice, and the server's bind says if not)
#   h3_workdir TAG        $out, a temporary directory removed at exit, and $pid, the server
#                         the stage starts: `stop` ends it by its PID, and so does the exit

say() { echo "$stage: $*" >&2; }
not_run() { say "NOT RUN: $*"; exit 2; }

h3_need_aioquic() {
    command -v openssl >/dev/null || not_run "no openssl to make a throwaway certificate"
    python3 -c 'import aioquic' 2>/dev/null && return 0
    say "installing aioquic from PyPI (pip --user)"
    python3 -m pip install --user --quiet 'aioquic>=1.2' >/dev/null 2>&1 \
        || python3 -m pip install --user --quiet --break-system-packages 'aioquic>=1.2' >/dev/null 2>&1 \
        || not_run "aioquic is not installed and pip could not install it"
    python3 -c 'import aioquic' 2>/dev/null || not_run "aioquic does not import after pip"
}

h3_cert() {
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout "$1/key.pem" -out "$1/cert.pem" -days 1 -subj /CN=localhost \
        -addext "subjectAltName=$2" >/dev/null 2>&1
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

h3_workdir() {
    out=$(mktemp -d "${TMPDIR:-/tmp}/linerate-$1.XXXXXX")
    pid=""
    trap 'stop; rm -rf "$out"' EXIT
}

stop() {
    if [ -n "$pid" ]; then
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        pid=""
    fi
}
