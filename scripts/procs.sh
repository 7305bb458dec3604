# Sourced by the stages that start servers of their own (otel, promtool, h2-attacks): stopping
# one by its PID, never by name (SO_REUSEPORT lets a stale server share a port silently).
#
#   stop_pid VAR [SECONDS]   stops the process whose PID is in the variable VAR (TERM, then
#                            KILL after SECONDS, 10 by default), reaps it, and empties VAR

stop_pid() {
    local p=${!1} tenths=$((${2:-10} * 10))
    if [ -n "$p" ]; then
        kill "$p" 2>/dev/null || true
        for _ in $(seq 1 "$tenths"); do
            kill -0 "$p" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    fi
    printf -v "$1" ''
}
