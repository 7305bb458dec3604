//! Steps 1 and 2: how many CPUs the server may use, and which speculative-execution
//! mitigations the kernel runs (`/sys/devices/system/cpu/vulnerabilities`, `mitigations=` on the
//! kernel command line).

use super::host::Host;
use super::parse;
use super::{Finding, Meta, Severity, Status, Step};

const CPUS: Meta = Meta {
    id: "cpus",
    step: Step::Application,
    title: "CPUs the server may use",
    severity: Severity::High,
    why: "the story's 1.2M req/s ran one pinned worker on every CPU; a CPU the server may not use is capacity left idle",
    fix: "run the server on all online CPUs (taskset -c <online> …, or check cgroup cpuset / --cpus)",
};

const MITIGATIONS: Meta = Meta {
    id: "mitigations",
    step: Step::Mitigations,
    title: "speculative-execution mitigations",
    severity: Severity::High,
    why: "every syscall and interrupt pays for the mitigations; the story measured about +28% with mitigations=off",
    fix: "add mitigations=off to the kernel command line (e.g. GRUB_CMDLINE_LINUX in /etc/default/grub, update-grub) and reboot; only on a dedicated benchmark host, it removes Spectre/Meltdown protection",
};

/// Where the kernel reports each CPU vulnerability and its mitigation.
const VULNERABILITIES_DIR: &str = "/sys/devices/system/cpu/vulnerabilities";

/// Step 1: the CPUs the server may use against the CPUs online.
pub fn check_cpus(h: &dyn Host) -> Vec<Finding> {
    let online = h
        .read("/sys/devices/system/cpu/online")
        .and_then(|t| parse::cpu_list(&t));
    let server = h.server_cpus();
    let finding = match (server, online) {
        (Some(server), Some(online)) => {
            let outside: Vec<usize> = server
                .iter()
                .copied()
                .filter(|c| !online.contains(c))
                .collect();
            let usable = server.len() - outside.len();
            let mut observed = format!(
                "server may use {usable} of {} online CPUs (allowed {}, online {})",
                online.len(),
                parse::format_cpu_list(&server),
                parse::format_cpu_list(&online)
            );
            let status = if !outside.is_empty() {
                observed += &format!("; CPUs {} are not online", parse::format_cpu_list(&outside));
                Status::Bad
            } else if usable < online.len() {
                Status::Warn
            } else {
                Status::Ok
            };
            CPUS.finding_fix(
                status,
                observed,
                format!(
                    "run the server on all online CPUs: taskset -c {} … (or widen the cgroup cpuset)",
                    parse::format_cpu_list(&online)
                ),
            )
        }
        (server, online) => CPUS.finding(
            Status::Unknown,
            format!(
                "allowed CPUs {}, online CPUs {}",
                known(server.as_deref()),
                known(online.as_deref())
            ),
        ),
    };
    vec![finding]
}

fn known(cpus: Option<&[usize]>) -> String {
    cpus.map_or_else(|| "unreadable".to_owned(), parse::format_cpu_list)
}

/// Step 2: which vulnerabilities are mitigated, and whether `mitigations=off` is set.
pub fn check_mitigations(h: &dyn Host) -> Vec<Finding> {
    let cmdline = h.read("/proc/cmdline").unwrap_or_default();
    let off = cmdline
        .split_whitespace()
        .any(|arg| arg == "mitigations=off");
    let Some(names) = h.list(VULNERABILITIES_DIR) else {
        let status = if off { Status::Ok } else { Status::Unknown };
        let observed = if off {
            "mitigations=off on the kernel command line (no vulnerabilities directory)"
        } else {
            "no /sys/devices/system/cpu/vulnerabilities (old kernel or not mounted)"
        };
        return vec![MITIGATIONS.finding(status, observed)];
    };
    let mitigated: Vec<&str> = names
        .iter()
        .filter(|name| {
            h.read(&format!("{VULNERABILITIES_DIR}/{name}"))
                .is_some_and(|state| state.trim_start().starts_with("Mitigation"))
        })
        .map(String::as_str)
        .collect();
    let cmdline_note = cmdline
        .split_whitespace()
        .find(|arg| arg.starts_with("mitigations="))
        .map_or_else(
            || "no mitigations= on the kernel command line".to_owned(),
            |a| a.to_owned(),
        );
    let (status, observed) = if off || mitigated.is_empty() {
        (
            Status::Ok,
            format!(
                "{cmdline_note}; none of {} vulnerabilities mitigated",
                names.len()
            ),
        )
    } else {
        (
            Status::Bad,
            format!(
                "{cmdline_note}; {} of {} mitigated: {}",
                mitigated.len(),
                names.len(),
                mitigated.join(", ")
            ),
        )
    };
    vec![MITIGATIONS.finding(status, observed)]
}
