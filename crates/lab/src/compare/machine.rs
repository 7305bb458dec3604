//! The machine description every report carries: CPU model, CPUs, kernel, date and the versions
//! of the programs compared. Anything unreadable is "unknown", never an error.

use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
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

/// Reads this machine; `programs` are asked for their versions (`-v`, then `--version`).
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

fn version(program: &str) -> String {
    for flag in ["-v", "--version"] {
        let Ok(out) = Command::new(program)
            .arg(flag)
            .stdin(Stdio::null())
            .output()
        else {
            return "not found".into();
        };
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        // wrk -v exits 1 after printing its version; take the first line either way.
        if let Some(line) = text.lines().map(str::trim).find(|l| !l.is_empty())
            && !line.starts_with("Usage")
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
