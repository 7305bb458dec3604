//! What the comparison reads from /proc: per-CPU busy time, and a process group's CPU time and
//! resident memory.
//!
//! Busy time counts user+nice+system+irq+softirq: on loopback much of a request's cost is
//! softirq work that no process is charged for, so a server's cost per request is its CPUs' busy
//! time, with the process's own utime+stime kept beside it to show how much of that was the
//! server. Steal (time the hypervisor gave the vCPU to someone else) is not the server's cost;
//! it is kept apart as a measure of how noisy the host was. Parsing is split from reading so it is tested on fixed text.

use std::path::Path;

/// Jiffies of a set of CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub busy: u64,
    pub steal: u64,
    pub total: u64,
}

/// `TlsTxSw` and `TlsRxSw` of `/proc/net/tls_stat` text: sessions the kernel has keyed in
/// software since boot, per direction.
pub fn parse_tls_sessions(text: &str) -> Option<(u64, u64)> {
    let get = |name| crate::doctor::parse::tls_stat_counter(text, name);
    Some((get("TlsTxSw")?, get("TlsRxSw")?))
}

/// [`parse_tls_sessions`] of this host; `None` where the kernel has no kTLS loaded.
pub fn tls_sessions() -> Option<(u64, u64)> {
    parse_tls_sessions(&std::fs::read_to_string("/proc/net/tls_stat").ok()?)
}

/// Sums the `cpuN` lines of /proc/stat text for the CPUs listed.
pub fn parse_cpu_times(stat: &str, cpus: &[usize]) -> Option<CpuTimes> {
    let mut sum = CpuTimes::default();
    let mut found = 0;
    for line in stat.lines() {
        let Some(rest) = line.strip_prefix("cpu") else {
            continue;
        };
        let Some((id, fields)) = rest.split_once(' ') else {
            continue;
        };
        let Ok(id) = id.parse::<usize>() else {
            continue;
        };
        if !cpus.contains(&id) {
            continue;
        }
        let v: Vec<u64> = fields
            .split_whitespace()
            .map(|f| f.parse().unwrap_or(0))
            .collect();
        if v.len() < 8 {
            return None;
        }
        let (user, nice, system, idle, iowait, irq, softirq, steal) =
            (v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
        let busy = user + nice + system + irq + softirq;
        sum.busy += busy;
        sum.steal += steal;
        sum.total += busy + steal + idle + iowait;
        found += 1;
    }
    (found == cpus.len()).then_some(sum)
}

/// Reads /proc/stat for the CPUs listed.
pub fn cpu_times(cpus: &[usize]) -> anyhow::Result<CpuTimes> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    parse_cpu_times(&stat, cpus)
        .ok_or_else(|| anyhow::anyhow!("CPUs {cpus:?} are not all in /proc/stat"))
}

/// One process's line of /proc/PID/stat, the fields we use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcStat {
    pub pgrp: i32,
    /// utime + stime, in jiffies.
    pub cpu: u64,
}

/// Parses /proc/PID/stat (the command name may contain spaces and parentheses).
pub fn parse_proc_stat(text: &str) -> Option<ProcStat> {
    let after = &text[text.rfind(')')? + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    // After the name: state(3) ppid(4) pgrp(5) ... utime(14) stime(15); index = field - 3.
    Some(ProcStat {
        pgrp: f.get(2)?.parse().ok()?,
        cpu: f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?,
    })
}

/// `VmRSS:` of /proc/PID/status, in bytes.
pub fn parse_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// CPU jiffies and resident bytes summed over every live process of group `pgrp`.
#[derive(Clone, Copy, Debug, Default)]
pub struct GroupUsage {
    pub processes: usize,
    pub cpu: u64,
    pub rss: u64,
}

pub fn group_usage(pgrp: i32) -> GroupUsage {
    let mut u = GroupUsage::default();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return u;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let base = Path::new("/proc").join(pid);
        let Some(st) = std::fs::read_to_string(base.join("stat"))
            .ok()
            .and_then(|t| parse_proc_stat(&t))
        else {
            continue;
        };
        if st.pgrp != pgrp {
            continue;
        }
        u.processes += 1;
        u.cpu += st.cpu;
        u.rss += std::fs::read_to_string(base.join("status"))
            .ok()
            .and_then(|t| parse_rss(&t))
            .unwrap_or(0);
    }
    u
}

/// The PIDs of every process in process group `pgrp`.
pub fn group_pids(pgrp: i32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|t| parse_proc_stat(&t))
                .is_some_and(|st| st.pgrp == pgrp)
        })
        .collect()
}

/// Kernel clock ticks per second (USER_HZ): the unit of /proc/stat and /proc/PID/stat.
pub fn clock_ticks() -> f64 {
    rustix::param::clock_ticks_per_second() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  10 0 10 100 0 0 0 0 0 0\n\
cpu0 100 1 20 500 5 2 30 4 0 0\n\
cpu1 7 0 3 900 0 0 0 0 0 0\n\
intr 1 2 3\n";

    #[test]
    fn cpu_times_count_softirq_as_busy_and_steal_apart() {
        assert_eq!(
            parse_cpu_times(STAT, &[0]),
            Some(CpuTimes {
                busy: 100 + 1 + 20 + 2 + 30,
                steal: 4,
                total: 153 + 4 + 500 + 5
            })
        );
        assert_eq!(
            parse_cpu_times(STAT, &[0, 1]).unwrap().busy,
            153 + 10,
            "sums the CPUs listed"
        );
        assert_eq!(
            parse_cpu_times(STAT, &[2]),
            None,
            "a missing CPU is an error"
        );
    }

    #[test]
    fn proc_stat_survives_odd_names() {
        let t = "42 (my (odd) srv) S 1 42 42 0 -1 4194560 100 0 0 0 250 31 0 0 20 0 3 0 1 2 3";
        assert_eq!(parse_proc_stat(t), Some(ProcStat { pgrp: 42, cpu: 281 }));
        assert_eq!(parse_proc_stat("garbage"), None);
    }

    #[test]
    fn tls_sessions_come_from_the_software_counters() {
        let text =
            "TlsCurrTxSw \t1\nTlsTxSw                         \t80\nTlsRxSw\t79\nTlsTxDevice\t3\n";
        assert_eq!(parse_tls_sessions(text), Some((80, 79)));
        assert_eq!(parse_tls_sessions("TlsTxSw 1\n"), None);
        assert_eq!(parse_tls_sessions(""), None);
    }

    #[test]
    fn rss_in_bytes() {
        assert_eq!(
            parse_rss("Name:\tx\nVmRSS:\t    1234 kB\n"),
            Some(1234 * 1024)
        );
        assert_eq!(parse_rss("Name:\tx\n"), None);
    }
}
