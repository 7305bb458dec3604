//! The `process_*` series every Prometheus client library exports (its process collector's
//! names and units), read from `/proc/self` when `/metrics` is scraped: CPU seconds, resident
//! and virtual memory, open and most descriptors, the start time. Only the admin thread calls
//! it, never a worker; where `/proc` cannot be read (not Linux, a sandbox) the series it
//! cannot fill are left out rather than written as zeros.
#![forbid(unsafe_code)]

use std::fmt::Write as _;

/// What `/proc/self` says of the process, each `None` where it could not be read.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Process {
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<u64>,
    pub virtual_bytes: Option<u64>,
    pub open_fds: Option<u64>,
    pub max_fds: Option<u64>,
    pub start_time_seconds: Option<f64>,
}

impl Process {
    /// The process as `/proc/self` shows it now.
    pub(crate) fn read() -> Process {
        let ticks = rustix::param::clock_ticks_per_second() as f64;
        let page = rustix::param::page_size() as u64;
        let stat = std::fs::read_to_string("/proc/self/stat").ok();
        let btime = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|s| boot_time(&s));
        let fields = stat.as_deref().and_then(stat_fields);
        let max_fds = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
        Process {
            cpu_seconds: fields.map(|f| (f.utime + f.stime) as f64 / ticks),
            resident_bytes: fields.map(|f| f.rss_pages * page),
            virtual_bytes: fields.map(|f| f.vsize),
            open_fds: std::fs::read_dir("/proc/self/fd")
                .ok()
                .map(|d| d.count() as u64),
            max_fds,
            start_time_seconds: fields
                .zip(btime)
                .map(|(f, b)| b as f64 + f.starttime as f64 / ticks),
        }
    }

    /// The series, in the text exposition format.
    pub(crate) fn render(&self) -> String {
        let mut o = String::new();
        let mut series = |name: &str, kind: &str, help: &str, value: Option<String>| {
            if let Some(v) = value {
                let _ = write!(
                    o,
                    "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}\n"
                );
            }
        };
        let f = |v: Option<f64>| v.map(|v| format!("{v}"));
        let u = |v: Option<u64>| v.map(|v| v.to_string());
        series(
            "process_cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
            f(self.cpu_seconds),
        );
        series(
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            u(self.resident_bytes),
        );
        series(
            "process_virtual_memory_bytes",
            "gauge",
            "Virtual memory size in bytes.",
            u(self.virtual_bytes),
        );
        series(
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
            u(self.open_fds),
        );
        series(
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            u(self.max_fds),
        );
        series(
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            f(self.start_time_seconds),
        );
        o
    }
}

/// The fields of `/proc/self/stat` read here (proc(5): utime 14, stime 15, starttime 22,
/// vsize 23, rss 24, counted from 1).
#[derive(Clone, Copy, Debug, PartialEq)]
struct StatFields {
    utime: u64,
    stime: u64,
    starttime: u64,
    vsize: u64,
    rss_pages: u64,
}

/// `/proc/self/stat`'s fields; the command name (field 2) may hold spaces and parentheses,
/// so the rest is read after its last `)`.
fn stat_fields(stat: &str) -> Option<StatFields> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // Field 3 (the state) is the first after the name.
    let f: Vec<&str> = rest.split_ascii_whitespace().collect();
    let at = |n: usize| f.get(n - 3)?.parse::<u64>().ok();
    Some(StatFields {
        utime: at(14)?,
        stime: at(15)?,
        starttime: at(22)?,
        vsize: at(23)?,
        rss_pages: at(24)?,
    })
}

/// `btime` of `/proc/stat`: the boot time, seconds since the epoch.
fn boot_time(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_read_after_a_name_with_spaces_and_parentheses() {
        let stat = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 \
                    3 0 123456 987654321 2048 18446744073709551615";
        assert_eq!(
            stat_fields(stat),
            Some(StatFields {
                utime: 250,
                stime: 75,
                starttime: 123456,
                vsize: 987654321,
                rss_pages: 2048,
            })
        );
        assert_eq!(stat_fields("4242 (cut"), None);
        assert_eq!(
            boot_time("cpu 1 2 3\nbtime 1764400000\nprocesses 9\n"),
            Some(1764400000)
        );
    }

    /// This process, read for real: every series is there, in the exposition's shape, and
    /// the figures are what the process is (descriptors open, memory resident, started
    /// before now).
    #[test]
    fn this_process_is_exposed() {
        let p = Process::read();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(p.open_fds.is_some_and(|n| n >= 3), "{p:?}");
        assert!(p.resident_bytes.is_some_and(|b| b > 1 << 20), "{p:?}");
        assert!(p.max_fds.is_some_and(|m| m >= p.open_fds.unwrap()), "{p:?}");
        assert!(
            p.start_time_seconds
                .is_some_and(|s| s <= now + 1.0 && s > now - 86_400.0 * 30.0),
            "{p:?}"
        );
        let text = p.render();
        for name in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_virtual_memory_bytes",
            "process_open_fds",
            "process_max_fds",
            "process_start_time_seconds",
        ] {
            assert!(text.contains(&format!("# TYPE {name} ")), "{name}: {text}");
            assert!(
                text.lines().any(|l| l.starts_with(&format!("{name} "))),
                "{name}: {text}"
            );
        }
    }
}
