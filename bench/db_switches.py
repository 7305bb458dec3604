#!/usr/bin/env python3
"""Context switches and server CPU per request on /db and /fortunes.

actix (bench/actix-db), linerate's runtime driver (also with its "linerate-db" thread set to
SCHED_BATCH with chrt, so that it does not preempt the worker when woken) and its worker
driver, each with one database connection and pinned to CPU 0; the load (linerate load, 64
connections, pinned to CPU 1) sends N requests after 3,000 of warm-up. Switches: voluntary +
involuntary of every thread of the server (/proc/PID/task/*/status); CPU: busy jiffies of CPU 0
(/proc/stat) per request. Three interleaved rounds, medians. Needs DATABASE_URL (bench/db.sh
sets it and pins PostgreSQL to CPU 1); servers bind 127.0.0.1 on free ports, stopped by PID.
"""
import glob, os, socket, statistics, subprocess, sys, time

LOAD = "target/release/linerate"


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def switches(pid):
    n = 0
    for f in glob.glob(f"/proc/{pid}/task/*/status"):
        for line in open(f):
            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                n += int(line.split()[1])
    return n


def cpu0_busy():
    for line in open("/proc/stat"):
        if line.startswith("cpu0 "):
            f = [int(x) for x in line.split()[1:]]
            return sum(f[:8]) - f[3] - f[4]


def variants():
    serve = [LOAD, "serve", "--workers", "1", "--cpus", "0", "--log-level", "warn",
             "--database-connections", "1"]
    return [
        ("actix", ["bench/actix-db/target/release/actix-db"], False),
        ("runtime", serve + ["--database-driver", "runtime"], False),
        ("runtime, SCHED_BATCH", serve + ["--database-driver", "runtime"], True),
        ("worker", serve + ["--database-driver", "worker"], False),
    ]


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 30000
    if "DATABASE_URL" not in os.environ:
        sys.exit("db_switches: DATABASE_URL is not set")
    tick_us = 1e6 / os.sysconf("SC_CLK_TCK")
    res = {}
    for _ in range(3):
        for name, cmd, batch in variants():
            port = free_port()
            p = subprocess.Popen(["taskset", "-c", "0"] + cmd + ["--addr", f"127.0.0.1:{port}"],
                                 stdout=subprocess.DEVNULL)
            try:
                time.sleep(1.0)
                if batch:
                    for t in glob.glob(f"/proc/{p.pid}/task/*"):
                        if open(t + "/comm").read().startswith("linerate-db"):
                            subprocess.run(["chrt", "-b", "-p", "0", os.path.basename(t)], check=True)
                for path in ["/db", "/fortunes"]:
                    url = f"http://127.0.0.1:{port}{path}"
                    load = [LOAD, "load", "-c", "64", "-t", "1", "--cpus", "1"]
                    subprocess.run(load + ["-n", "3000", url], capture_output=True, check=True)
                    s0, c0 = switches(p.pid), cpu0_busy()
                    subprocess.run(load + ["-n", str(n), url], capture_output=True, check=True)
                    s1, c1 = switches(p.pid), cpu0_busy()
                    res.setdefault((name, path), []).append(((c1 - c0) * tick_us / n, (s1 - s0) / n))
            finally:
                p.terminate(); p.wait()
    print("| server | endpoint | switches/req | CPU 0 µs/req |\n|---|---|---:|---:|")
    for (name, path), v in res.items():
        print(f"| {name} | `{path}` | {statistics.median(x[1] for x in v):.2f} | "
              f"{statistics.median(x[0] for x in v):.1f} |")


if __name__ == "__main__":
    main()
