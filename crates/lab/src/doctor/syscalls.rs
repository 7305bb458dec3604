//! Step 3: syscall auditing (the `kauditd` thread, `auditd`, `auditctl -l`/`-s`, `audit=0`) and
//! whether this process runs under a seccomp filter. Both put work on every syscall's path.

use super::host::Host;
use super::parse;
use super::sources;
use super::{Finding, Meta, Severity, Status, Step};

const AUDIT: Meta = Meta {
    id: "syscall-audit",
    step: Step::SyscallAuditing,
    title: "syscall auditing",
    severity: Severity::Medium,
    why: "once audit has been enabled, every new task takes the slow audited syscall path unless a `-a never,task` rule exempts it; the story measured about +11% without it",
    fix: "auditctl -a never,task (and put `-a never,task` first in /etc/audit/rules.d/*.rules), or boot with audit=0, or systemctl disable --now auditd",
};

const SECCOMP: Meta = Meta {
    id: "seccomp",
    step: Step::SyscallAuditing,
    title: "seccomp filter on this process",
    severity: Severity::Low,
    why: "a seccomp filter (a container runtime's default profile) runs BPF on every syscall the server makes",
    fix: "run the server outside the sandbox or without the filter (e.g. docker run --security-opt seccomp=unconfined)",
};

/// The rule that exempts all tasks from syscall auditing.
const NEVER_TASK: &str = "-a never,task";

/// Step 3: is syscall auditing active?
pub fn check_audit(h: &dyn Host) -> Vec<Finding> {
    let cmdline = h.read("/proc/cmdline").unwrap_or_default();
    if cmdline.split_whitespace().any(|arg| arg == "audit=0") {
        return vec![AUDIT.finding(Status::Ok, "audit=0 on the kernel command line")];
    }
    let boot_on = cmdline.split_whitespace().any(|arg| arg == "audit=1");
    let Some(procs) = sources::processes(h) else {
        return vec![AUDIT.finding(Status::Unknown, "/proc cannot be listed")];
    };
    let kauditd = procs.iter().any(|p| p.comm == "kauditd");
    let auditd: Vec<u32> = procs
        .iter()
        .filter(|p| p.comm == "auditd")
        .map(|p| p.pid)
        .collect();
    let rules = h.command(&["auditctl", "-l"]);
    let enabled = h.command(&["auditctl", "-s"]).and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("enabled ").map(|v| v.trim() != "0"))
    });
    let mut seen = Vec::new();
    if boot_on {
        seen.push("audit=1 on the kernel command line".to_owned());
    }
    seen.push(if kauditd {
        "kauditd thread present".to_owned()
    } else {
        "no kauditd thread".to_owned()
    });
    seen.push(if auditd.is_empty() {
        "no auditd".to_owned()
    } else {
        format!("auditd running (pid {})", join_pids(&auditd))
    });
    if let Some(enabled) = enabled {
        seen.push(format!("audit enabled={}", u8::from(enabled)));
    }
    let never_task = rules
        .as_deref()
        .map(|r| r.lines().any(|l| l.trim() == NEVER_TASK));
    seen.push(match (&rules, never_task) {
        (None, _) => "auditctl unavailable".to_owned(),
        (Some(_), Some(true)) => format!("rules include {NEVER_TASK}"),
        (Some(r), _) => {
            let n = r
                .lines()
                .filter(|l| l.trim_start().starts_with('-'))
                .count();
            format!("{n} audit rules, no {NEVER_TASK}")
        }
    });
    let status = if !kauditd {
        // No kauditd: audit is off at boot or not built in.
        Status::Ok
    } else if never_task == Some(true) {
        Status::Ok
    } else if enabled == Some(true) || boot_on || !auditd.is_empty() {
        Status::Bad
    } else if enabled == Some(false) && auditd.is_empty() {
        // Off now, but tasks started while it was on keep the audited path.
        Status::Warn
    } else if rules.is_none() {
        Status::Unknown
    } else {
        Status::Warn
    };
    vec![AUDIT.finding(status, seen.join("; "))]
}

fn join_pids(pids: &[u32]) -> String {
    pids.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Step 3: the `Seccomp` mode of this process (0 none, 1 strict, 2 filter).
pub fn check_seccomp(h: &dyn Host) -> Vec<Finding> {
    let Some(status) = h.read("/proc/self/status") else {
        return vec![SECCOMP.finding(Status::Unknown, "/proc/self/status unreadable")];
    };
    let filters = parse::status_field(&status, "Seccomp_filters").unwrap_or("?");
    let finding = match parse::status_field(&status, "Seccomp") {
        Some("0") => SECCOMP.finding(Status::Ok, "Seccomp: 0 (no filter)"),
        Some("2") => SECCOMP.finding(
            Status::Warn,
            format!("Seccomp: 2 (filter mode, {filters} filters)"),
        ),
        Some("1") => SECCOMP.finding(Status::Warn, "Seccomp: 1 (strict mode)"),
        Some(other) => SECCOMP.finding(Status::Unknown, format!("Seccomp: {other}")),
        None => SECCOMP.finding(Status::Unknown, "no Seccomp field (kernel without seccomp)"),
    };
    vec![finding]
}
