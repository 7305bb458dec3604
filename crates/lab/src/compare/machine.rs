//! The machine description every report carries: CPU model, CPUs, kernel, date and the versions
//! of the programs compared. Anything unreadable is "unknown", never an error, and asking a
//! program for its version never waits longer than `VERSION_TIMEOUT`: a server that reads `-v`
//! as something else and starts serving is killed, its version "version unknown".

use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Machine {
    pub cpu_model: String,
    pub cpus_online: usize,
    pub cpus_allowed: Vec<usize>,
    pub kernel: String,
    pub date_utc: String,
    pub linerate: String,
    /// (program, first line of its version output) for each program the suite runs.
    pub tools: Vec<(String, String)>,
}

/// Reads this machine; `programs` are asked for their versions (`-v`, `--version`, `version`).
pub fn describe(programs: &[String]) -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown".into(), |(_, v)| v.trim().to_string());
    let uname = rustix::system::uname();
    let allowed = rustix::thread::sched_getaffinity(None)
        .map(|set| {
            (0..rustix::thread::CpuSet::MAX_CPU)
                .filter(|&c| set.is_set(c))
                .collect()
        })
        .unwrap_or_default();
    Machine {
        cpu_model,
        cpus_online: std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpus_allowed: allowed,
        kernel: format!(
            "{} {}",
            uname.sysname().to_string_lossy(),
            uname.release().to_string_lossy()
        ),
        date_utc: utc_now(),
        linerate: env!("CARGO_PKG_VERSION").to_string(),
        tools: programs.iter().map(|p| (p.clone(), version(p))).collect(),
    }
}

/// How long a program gets to print its version.
pub const VERSION_TIMEOUT: Duration = Duration::from_secs(2);
/// How often a version probe looks whether the program has exited.
const VERSION_POLL: Duration = Duration::from_millis(10);
/// How often a spawn that meets ETXTBSY is tried again, `VERSION_POLL` apart.
const SPAWN_BUSY_RETRIES: u32 = 50;

/// What a version probe got.
enum Probe {
    /// Its output, stdout then stderr.
    Output(String),
    NotFound,
    /// Still running at the deadline: killed, with its whole process group.
    TimedOut,
}

/// Runs `program flag` for at most `limit`. Output goes to a file, not a pipe: a grandchild
/// that keeps a pipe open would make reading it wait as long as the grandchild lives.
fn probe(program: &str, flag: &str, limit: Duration) -> Probe {
    let path = std::env::temp_dir().join(format!(
        "linerate-lab-version-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let Ok(file) = std::fs::File::create(&path) else {
        return Probe::Output(String::new());
    };
    let Ok(err) = file.try_clone() else {
        return Probe::Output(String::new());
    };
    let mut cmd = Command::new(program);
    cmd.arg(flag)
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .process_group(0);
    // ETXTBSY: a program just written is still open for writing in a child that another
    // thread forked and has not yet exec'd. That lasts microseconds; a few retries outlast it.
    let mut child = cmd.spawn();
    for _ in 0..SPAWN_BUSY_RETRIES {
        match &child {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(VERSION_POLL);
                child = cmd.spawn();
            }
            _ => break,
        }
    }
    let Ok(mut child) = child else {
        let _ = std::fs::remove_file(&path);
        return Probe::NotFound;
    };
    let deadline = Instant::now() + limit;
    let done = loop {
        match child.try_wait() {
            Ok(Some(_)) => break true,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(VERSION_POLL),
            _ => break false,
        }
    };
    // The group too: whatever it started must not outlive the probe.
    let _ = rustix::process::kill_process_group(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::KILL,
    );
    let _ = child.wait();
    let text = std::fs::read(&path).unwrap_or_default();
    let _ = std::fs::remove_file(&path);
    if done {
        Probe::Output(String::from_utf8_lossy(&text).into_owned())
    } else {
        Probe::TimedOut
    }
}

fn version(program: &str) -> String {
    version_within(program, VERSION_TIMEOUT)
}

/// The first line of `program -v` (or `--version`, or caddy's `version`), each given `limit`;
/// an answer that is an error or a usage line means the next flag is tried.
fn version_within(program: &str, limit: Duration) -> String {
    // memcached's -v is "verbose": it would start serving (on its default port) and, as root,
    // refuse to with a line that is no version.
    let flags: &[&str] = if program.ends_with("memcached") {
        &["--version"]
    } else if program.ends_with("varnishd") {
        // varnishd's version flag is -V; -v is refused with an error line.
        &["-V"]
    } else {
        &["-v", "--version", "version"]
    };
    for &flag in flags {
        let text = match probe(program, flag, limit) {
            Probe::Output(t) => t,
            Probe::NotFound => return "not found".into(),
            Probe::TimedOut => {
                return format!("version unknown (`{program} {flag}` still ran after {limit:?})");
            }
        };
        // wrk -v exits 1 after printing its version; take the first line either way.
        if let Some(line) = text.lines().map(str::trim).find(|l| !l.is_empty())
            && !line.starts_with("Usage")
            && !line.starts_with("Error")
        {
            // wrk prints "wrk 4.1.0 [epoll] Copyright (C) 2012 Will Glozer".
            return line.split(" Copyright").next().unwrap_or(line).to_string();
        }
    }
    "unknown".into()
}

/// `YYYY-MM-DD HH:MM:SS UTC` (through http1's calendar conversion, so no date crate is needed).
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format_utc(secs)
}

pub fn format_utc(secs: u64) -> String {
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = linerate_http1::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;
    use std::time::Duration;

    /// An executable script in a private directory.
    fn script(name: &str, body: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "linerate-lab-machine-{}-{name}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    #[test]
    fn a_peer_that_serves_on_dash_v_is_killed_and_its_version_unknown() {
        // Treats its argument as a port and serves forever (here: sleeps, in a child too).
        let p = script("serves", "sleep 30 & sleep 30");
        let v = super::version_within(p.to_str().unwrap(), Duration::from_millis(200));
        assert!(v.starts_with("version unknown"), "{v}");
        let _ = std::fs::remove_dir_all(p.parent().unwrap());
    }

    #[test]
    fn versions_are_first_lines() {
        let p = script(
            "wrkish",
            "echo 'wrk 4.2.0 [epoll] Copyright (C) 2012 Will Glozer'; exit 1",
        );
        assert_eq!(super::version(p.to_str().unwrap()), "wrk 4.2.0 [epoll]");
        assert_eq!(super::version("/nonexistent/peer"), "not found");
        let _ = std::fs::remove_dir_all(p.parent().unwrap());
    }

    #[test]
    fn a_flag_answered_with_an_error_tries_the_next() {
        // caddy refuses -v and --version and answers `caddy version`.
        let p = script(
            "caddyish",
            "[ \"$1\" = version ] && { echo 'v2.6.2 h1:abc='; exit 0; }; echo \"Error: unknown flag: $1\"; exit 1",
        );
        assert_eq!(super::version(p.to_str().unwrap()), "v2.6.2 h1:abc=");
        let _ = std::fs::remove_dir_all(p.parent().unwrap());
    }

    #[test]
    fn memcached_is_asked_with_dash_dash_version() {
        // memcached's -v is "verbose": as root it refuses to start with a line that is no
        // version, as anyone else it starts serving on its default port.
        let p = script(
            "memcached",
            "[ \"$1\" = --version ] && { echo 'memcached 1.6.18'; exit 0; }; \
             echo \"can't run as root without the -u switch\"; exit 64",
        );
        assert_eq!(super::version(p.to_str().unwrap()), "memcached 1.6.18");
        let _ = std::fs::remove_dir_all(p.parent().unwrap());
    }

    #[test]
    fn utc_formatting() {
        assert_eq!(super::format_utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(super::format_utc(1_795_305_600), "2026-11-22 00:00:00 UTC");
        assert_eq!(
            super::format_utc(951_782_400 + 3661),
            "2000-02-29 01:01:01 UTC"
        );
    }
}
