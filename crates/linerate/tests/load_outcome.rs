//! How a `linerate load` run ends, through the real binary and the library: a target that dies
//! mid-run and a Ctrl-C still print the report, marked interrupted, with the socket errors;
//! responses are counted per status code; anything but 2xx/3xx fails the exit status unless
//! `--allow-status-errors`. Runs are bounded by `--requests`/`--duration`, servers by
//! `SERVER_LIFETIME`, and every wait here by a deadline.
#![forbid(unsafe_code)]

mod load_common;
use load_common as common;

use std::io::Read as _;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{Behavior, Server, args};
use linerate_load::stats::Interruption;

const BIN: &str = env!("CARGO_BIN_EXE_linerate");
/// The longest any wait in these tests may take.
const DEADLINE: Duration = Duration::from_secs(30);

fn load(flags: &[&str]) -> Output {
    Command::new(BIN)
        .arg("load")
        .args(flags)
        .stdin(Stdio::null())
        .output()
        .expect("run linerate load")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn target_dying_mid_run_still_prints_the_report_marked_interrupted() {
    let s = Server::start(Behavior::DieAfter(300));
    let url = s.url();
    let o = load(&["-t", "1", "-c", "16", "-d", "20s", &url]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    for needle in [
        "Interrupted after",
        "the target went away: cannot connect to",
        "Errors: connect ",
        "Status codes: 200: 300",
        "Result: FAILED: interrupted, the target went away",
    ] {
        assert!(text.contains(needle), "lacks {needle:?}:\n{text}");
    }
    assert_eq!(
        text.lines().last().map(|l| l.starts_with("Result: ")),
        Some(true)
    );
}

#[test]
fn target_dying_mid_run_is_a_field_of_the_json() {
    let s = Server::start(Behavior::DieAfter(300));
    let url = s.url();
    let o = load(&["-t", "1", "-c", "16", "-d", "20s", "--json", &url]);
    assert_eq!(o.status.code(), Some(1));
    let r: linerate_load::Report = serde_json::from_slice(&o.stdout).expect("stdout is JSON");
    let run = &r.runs[0];
    assert!(r.interrupted && run.interrupted);
    assert!(
        matches!(&run.interrupted_by, Some(Interruption::TargetLost(why)) if why.contains("cannot connect")),
        "{:?}",
        run.interrupted_by
    );
    assert_eq!(run.responses, 300);
    assert_eq!(run.status_codes.get(&200), Some(&300));
    assert!(run.errors.connect > 0, "{:?}", run.errors);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["interrupted"], true);
    assert_eq!(v["runs"][0]["interrupted"], true);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("Result: FAILED"), "{stderr}");
}

#[test]
fn ctrl_c_prints_the_report_marked_interrupted() {
    let s = Server::start(Behavior::Ok);
    let mut child = Command::new(BIN)
        .args(["load", "-t", "1", "-c", "2", "-d", "25s", &s.url()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The handler is in place before the first request is sent.
    let start = Instant::now();
    while s.requests() < 100 {
        assert!(start.elapsed() < DEADLINE, "no load reached the server");
        std::thread::sleep(Duration::from_millis(10));
    }
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let mut text = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{text}");
    for needle in [
        "Interrupted after",
        "stopped by Ctrl-C (SIGINT)",
        "Status codes: 200: ",
        "Result: INTERRUPTED: stopped by Ctrl-C (SIGINT)",
    ] {
        assert!(text.contains(needle), "lacks {needle:?}:\n{text}");
    }
}

#[test]
fn stop_flag_ends_the_run_and_marks_it_interrupted() {
    let s = Server::start(Behavior::Ok);
    let cfg = linerate_load::Config::from_options(&args(&[
        "-t",
        "1",
        "-c",
        "2",
        "-d",
        "25s",
        "--runs",
        "3",
        &s.url(),
    ]))
    .unwrap();
    let stop = AtomicBool::new(false);
    let r = std::thread::scope(|scope| {
        scope.spawn(|| {
            let start = Instant::now();
            while s.requests() < 100 && start.elapsed() < DEADLINE {
                std::thread::sleep(Duration::from_millis(10));
            }
            stop.store(true, Ordering::SeqCst);
        });
        linerate_load::measure_each(&cfg, &stop, |_, _| {}).unwrap()
    });
    assert_eq!(r.runs.len(), 1, "no run starts after a stop");
    assert!(r.interrupted);
    assert_eq!(r.runs[0].interrupted_by, Some(Interruption::Stopped));
    assert!(r.runs[0].responses >= 100);
}

#[test]
fn all_404_fails_the_exit_status_with_status_counts() {
    let s = Server::start(Behavior::NotFound);
    let url = s.url();
    let o = load(&["-t", "1", "-c", "2", "-n", "100", &url]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("Status codes: 404: 100"), "{text}");
    assert!(text.contains("100 responses in "), "{text}");
    let last = text.lines().last().unwrap();
    assert!(
        last.starts_with("Result: FAILED: 100 of 100 responses were not 2xx/3xx (404: 100)"),
        "{last}"
    );
}

#[test]
fn allow_status_errors_restores_exit_zero() {
    let s = Server::start(Behavior::NotFound);
    let url = s.url();
    let o = load(&[
        "-t",
        "1",
        "-c",
        "2",
        "-n",
        "100",
        "--allow-status-errors",
        &url,
    ]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(
        text.contains("Result: ok: 100 of 100 responses not 2xx/3xx (404: 100), accepted by --allow-status-errors"),
        "{text}"
    );
}

#[test]
fn status_codes_are_counted_per_code_in_text_and_json() {
    let s = Server::start(Behavior::NotFoundEvery(10));
    let url = s.url();
    let o = load(&["-t", "2", "-c", "4", "-n", "1000", "--json", &url]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["runs"][0]["status_codes"]["200"], 900);
    assert_eq!(v["runs"][0]["status_codes"]["404"], 100);
    assert_eq!(v["runs"][0]["errors"]["status"], 100);
    let s = Server::start(Behavior::NotFoundEvery(10));
    let url = s.url();
    let text = stdout(&load(&["-t", "1", "-c", "1", "-n", "100", &url]));
    assert!(text.contains("Status codes: 200: 90, 404: 10"), "{text}");
}

#[test]
fn all_2xx_exits_zero_with_the_verdict_last() {
    let s = Server::start(Behavior::Ok);
    let url = s.url();
    let o = load(&["-t", "1", "-c", "2", "-n", "50", &url]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert_eq!(
        text.lines().last(),
        Some("Result: ok: all 50 responses 2xx/3xx")
    );
}
