//! `linerate lab` through the real binary: compare produces its report, JSON and charts from two
//! tiny servers; servers that fail to start or die mid-run are reported, not hung on; doctor
//! and firstflight run and fail cleanly. Servers bind 127.0.0.1 on OS-chosen ports; every load
//! run is bounded in time.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

fn lab(args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("lab")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// `lab compare --suite SUITE --out OUT` plus `extra`.
fn compare(suite: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "compare",
        "--suite",
        suite.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    lab(&args)
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("linerate-lab-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// (server CPU, load CPU): different CPUs when this process may use two.
fn cpus() -> (usize, usize) {
    let set = rustix::thread::sched_getaffinity(None).unwrap();
    let allowed: Vec<usize> = (0..rustix::thread::CpuSet::MAX_CPU)
        .filter(|&c| set.is_set(c))
        .collect();
    (allowed[0], *allowed.last().unwrap())
}

fn suite(dir: &Path, servers: &str) -> PathBuf {
    let (s, l) = cpus();
    let text = format!(
        r#"
[settings]
rounds = 2
duration = "400ms"
warmup = "0s"
connections = 4
server_cpus = "{s}"
load_cpus = "{l}"
load = "linerate"
baseline = "floor"
latency_duration = "300ms"
start_timeout = "5s"

[[server]]
name = "floor"
command = ["{{linerate}}", "lab", "floor", "--addr", "127.0.0.1:{{port}}", "--response", "json"]
{servers}

[[workload]]
name = "json"
title = "JSON"
path = "/json"
latency_rate = 500
"#
    );
    let p = dir.join("suite.toml");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn compare_writes_report_json_and_charts() {
    let dir = tmpdir("compare");
    let suite = suite(
        &dir,
        r#"
[[server]]
name = "linerate"
command = ["{linerate}", "serve", "--addr", "127.0.0.1:{port}", "--workers", "1", "--cpus", "{cpus}", "--log-level", "warn"]
"#,
    );
    let out_dir = dir.join("out");
    let doc = dir.join("bench.md");
    std::fs::write(&doc, "# Benchmarks\n\nhand-written text stays\n").unwrap();
    let out = compare(&suite, &out_dir, &["--update-docs", doc.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(
        report.contains("| floor |") && report.contains("| linerate |"),
        "{report}"
    );
    assert!(report.contains("Machine: ") && report.contains("Latency at a fixed 500 req/s"));
    let runs: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("runs.json")).unwrap()).unwrap();
    assert_eq!(
        runs["samples"].as_array().unwrap().len(),
        4,
        "2 rounds × 2 servers"
    );
    let rows = runs["workloads"][0]["rows"].as_array().unwrap();
    assert_eq!(rows[0]["server"], "floor");
    assert_eq!(rows[0]["req_ratio"], 1.0, "the baseline's own ratio");
    for row in rows {
        assert!(row["req_per_s"]["median"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["cost_us"]["median"].as_f64().unwrap() > 0.0, "{row}");
        assert_eq!(row["errors"], 0, "{row}");
        assert!(row["failures"].as_array().unwrap().is_empty(), "{row}");
    }
    for chart in [
        "json-rps.png",
        "json-cost.png",
        "json-latency.png",
        "json-rps.svg",
    ] {
        let bytes = std::fs::read(out_dir.join(chart)).unwrap();
        assert!(bytes.len() > 1000, "{chart}");
    }
    let doc = std::fs::read_to_string(&doc).unwrap();
    assert!(
        doc.starts_with("# Benchmarks\n\nhand-written text stays\n"),
        "{doc}"
    );
    assert!(
        doc.contains("## linerate lab compare") && doc.contains("](out/json-rps.png)"),
        "{doc}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The `{fixtures}` the lab writes (files, a certificate) are served by linerate for a file and
/// an HTTPS workload, which the floor does not run and whose ratios are to their own baseline.
#[test]
fn compare_serves_its_fixtures_over_http_and_https_with_a_workload_baseline() {
    let dir = tmpdir("fixtures");
    let (s, l) = cpus();
    let text = format!(
        r#"
[settings]
rounds = 1
duration = "300ms"
warmup = "0s"
connections = 2
server_cpus = "{s}"
load_cpus = "{l}"
load = "linerate"
latency_duration = "0s"
vars = {{ root = "{{fixtures}}/static" }}

[[server]]
name = "floor"
command = ["{{linerate}}", "lab", "floor", "--addr", "127.0.0.1:{{port}}", "--response", "json"]
workloads = ["json"]

[[server]]
name = "linerate"
command = ["{{linerate}}", "serve", "--addr", "127.0.0.1:{{port}}", "--workers", "1", "--log-level", "warn", "--app", "demo", "--root", "{{root}}", "--tls-port", "{{tls_port}}", "--tls-cert", "{{fixtures}}/tls/cert.pem", "--tls-key", "{{fixtures}}/tls/key.pem"]

[[workload]]
name = "json"
path = "/json"

[[workload]]
name = "file64k"
path = "/f64k.bin"
baseline = "linerate"

[[workload]]
name = "https_json"
path = "/json"
tls = true
baseline = "linerate"
"#
    );
    let suite = dir.join("suite.toml");
    std::fs::write(&suite, text).unwrap();
    let out_dir = dir.join("out");
    let out = compare(&suite, &out_dir, &["--no-latency"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let runs: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("runs.json")).unwrap()).unwrap();
    assert_eq!(
        runs["samples"].as_array().unwrap().len(),
        4,
        "floor runs json only"
    );
    let workloads = runs["workloads"].as_array().unwrap();
    assert_eq!(workloads[0]["baseline"], "floor");
    for w in &workloads[1..] {
        assert_eq!(w["baseline"], "linerate", "{w}");
        let rows = w["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 1, "{w}");
        assert_eq!(rows[0]["errors"], 0, "{w}");
        assert!(
            rows[0]["req_per_s"]["median"].as_f64().unwrap() > 0.0,
            "{w}"
        );
        assert_eq!(rows[0]["cost_ratio"], 1.0, "{w}");
    }
    let report = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(
        report.contains("| server | req/s | × linerate |"),
        "{report}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn failing_and_crashing_servers_are_reported_not_hung_on() {
    let dir = tmpdir("crash");
    let suite = suite(
        &dir,
        r#"
# Accepts the readiness probe, then dies on the load's first connection: mid-run, every time.
[[server]]
name = "crasher"
command = ["python3", "-c", 'import socket,sys; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", {port})); s.listen(); s.accept()[0].close(); s.accept(); sys.exit(3)']
"#,
    );
    let out_dir = dir.join("out");
    let out = compare(&suite, &out_dir, &["--no-latency"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "some samples failed: {stderr}");
    let report = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(report.contains("## Failed samples"), "{report}");
    assert!(
        report.contains("crasher / json, round 0: the server exited (exit status: 3)"),
        "{report}"
    );
    assert!(
        report.contains("| floor |"),
        "the healthy server still measured: {report}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `lab compare` with `suite` from `cwd`, no latency runs.
fn compare_in(cwd: &Path, suite: &Path, out: &Path) -> Output {
    Command::new(BIN)
        .current_dir(cwd)
        .args(["lab", "compare", "--no-latency", "--suite"])
        .arg(suite)
        .arg("--out")
        .arg(out)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn a_server_that_cannot_start_fails_the_comparison_naming_it() {
    let dir = tmpdir("nostart");
    for (servers, needle) in [
        (
            "[[server]]\nname = \"nostart\"\ncommand = [\"false\"]\n",
            "server nostart cannot start: server nostart exited",
        ),
        (
            "[[server]]\nname = \"ghost\"\ncommand = [\"/nonexistent/ghostd\"]\n",
            "server ghost cannot start: ",
        ),
        (
            "[[server]]\nname = \"peer\"\nrequires = \"no-such-peer-xyz\"\ncommand = [\"no-such-peer-xyz\"]\n",
            "server peer cannot start: `no-such-peer-xyz` is not installed (to compare without it: --servers floor)",
        ),
        (
            "[[server]]\nname = \"conf\"\nconfig_template = \"/nonexistent/peer.conf.in\"\ncommand = [\"true\"]\n",
            "server conf cannot start: its config_template /nonexistent/peer.conf.in is not built in and not a file",
        ),
    ] {
        let suite = suite(&dir, servers);
        let out_dir = dir.join("out");
        let out = compare(&suite, &out_dir, &["--no-latency"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{servers}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
        assert!(
            stderr.starts_with("linerate: ") && stderr.contains(needle),
            "{needle}: {stderr}"
        );
        assert!(
            !out_dir.join("report.md").exists(),
            "nothing was measured without it"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn peer_config_templates_are_built_in_and_work_from_any_directory() {
    // Run from a directory with no bench/ in it: the template comes from the binary. The server
    // checks that its rendered config is nginx's, with its port, then serves as the floor.
    let dir = tmpdir("templates");
    let suite = suite(
        &dir,
        r#"
[[server]]
name = "templated"
config_template = "bench/nginx.conf.in"
command = ["sh", "-c", "grep -q 'listen 127.0.0.1:{port} reuseport' {config} && exec {linerate} lab floor --addr 127.0.0.1:{port} --response json"]
"#,
    );
    assert!(!dir.join("bench").exists());
    let out_dir = dir.join("out");
    let out = compare_in(&dir, &suite, &out_dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(report.contains("| templated |"), "{report}");
    assert!(!report.contains("Failed samples"), "{report}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn compare_mistakes_are_one_line() {
    for (args, needle) in [
        (&["compare", "--servers", "apache"][..], "unknown server"),
        (
            &["compare", "--suite", "/nonexistent.toml"][..],
            "cannot read",
        ),
        (
            &["compare", "--server-cpus", "4000"][..],
            "invalid CPU list",
        ),
    ] {
        let out = lab(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

/// `lab cache` refuses what it cannot run before starting anything, in one line.
#[test]
fn cache_mistakes_are_one_line() {
    let out_dir = tmpdir("cache-mistakes");
    let out = out_dir.to_str().unwrap();
    for (args, needle) in [
        (
            &["cache", "--servers", "valkey", "--out", out][..],
            "unknown server \"valkey\"",
        ),
        (
            &[
                "cache",
                "--redis-server",
                "/nonexistent/redis-server",
                "--servers",
                "redis",
                "--out",
                out,
            ][..],
            "`/nonexistent/redis-server` is not installed",
        ),
        (
            &[
                "cache",
                "--keys",
                "100000",
                "--memory-mb",
                "64",
                "--out",
                out,
            ][..],
            "--memory-mb 64 is too small",
        ),
        (
            &["cache", "--sizes", "0", "--out", out][..],
            "none of them 0",
        ),
        (&["cache", "--objects", "0"][..], "--objects"),
    ] {
        // CPUs this process may use, so that no refusal is about them.
        let (s, l) = cpus();
        let (s, l) = (s.to_string(), l.to_string());
        let mut args = args.to_vec();
        args.extend(["--server-cpus", &s, "--load-cpus", &l]);
        let out = lab(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn doctor_runs_on_this_host() {
    let out = lab(&["doctor", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!v["findings"].as_array().unwrap().is_empty());
}

#[test]
fn firstflight_refused_is_one_line() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = lab(&["firstflight", &format!("http://127.0.0.1:{port}/")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("connection refused"), "{stderr}");
}

#[test]
fn firstflight_http3_mistakes_are_one_line() {
    let out = lab(&["firstflight", "--http3", "http://127.0.0.1:9/"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("use an https:// URL"), "{stderr}");
    // The TCP arithmetic's knobs and the QUIC window go with one mode each.
    for args in [
        &[
            "firstflight",
            "--initial-window",
            "20000",
            "https://127.0.0.1:9/",
        ][..],
        &[
            "firstflight",
            "--http3",
            "--mss",
            "1200",
            "https://127.0.0.1:9/",
        ][..],
    ] {
        let out = lab(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn c2c_writes_matrix_files() {
    let dir = tmpdir("c2c");
    let out = lab(&[
        "c2c",
        "--round-trips",
        "200",
        "--samples",
        "3",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = std::fs::read_to_string(dir.join("c2c.csv")).unwrap();
    assert!(csv.starts_with("cpu,"), "{csv}");
    assert!(dir.join("c2c.png").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}
