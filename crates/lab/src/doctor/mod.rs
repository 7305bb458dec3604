//! `linerate lab doctor`: audits this host against the nine steps of the tuning story (libreactor
//! on a 4 vCPU EC2 instance, 224k → 1.2M req/s) plus the kernel features linerate can use.
//! Read-only: it reads `/proc`, `/sys` and the output of a few listing commands, and changes
//! nothing. A missing file or tool is a finding with status `unknown`, never an error; the only
//! errors are failures to write the report. Each check is one function in [`CHECKS`].

mod cpu;
mod features;
mod host;
mod limits;
mod locality;
mod neighbour;
mod netfilter;
mod nic;
pub(crate) mod parse;
mod report;
mod sources;
mod syscalls;
mod tcp;

use std::path::PathBuf;

use anyhow::Context as _;
use serde::Serialize;

pub use host::{FixtureHost, Host, NofileLimit, SystemHost};
pub use parse::{cpu_list, format_cpu_list};
pub use report::{Summary, json as render_json, text as render_text};

/// Where a finding belongs in the tuning story: its nine steps, then what lies beyond them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// 1. Application: one worker per core, on every core.
    Application,
    /// 2. Speculative-execution mitigations.
    Mitigations,
    /// 3. Syscall auditing (and seccomp).
    SyscallAuditing,
    /// 4. iptables/netfilter.
    Netfilter,
    /// 5. Perfect locality: IRQ affinity, RSS, XPS.
    Locality,
    /// 6. Interrupt moderation and busy polling.
    Interrupts,
    /// 7. The nosy neighbour: other processes' AF_PACKET sockets.
    NosyNeighbour,
    /// 8. The queueing discipline.
    Qdisc,
    /// 9. Diminishing returns: GRO and congestion control.
    DiminishingReturns,
    /// Not one of the nine steps: kernel features and limits linerate relies on.
    Beyond,
}

impl Step {
    /// Every step, in the order the report prints them.
    pub const ALL: [Step; 10] = [
        Step::Application,
        Step::Mitigations,
        Step::SyscallAuditing,
        Step::Netfilter,
        Step::Locality,
        Step::Interrupts,
        Step::NosyNeighbour,
        Step::Qdisc,
        Step::DiminishingReturns,
        Step::Beyond,
    ];

    /// The heading of this step in the text report.
    pub fn heading(self) -> &'static str {
        match self {
            Step::Application => "Step 1 · application: one worker per CPU, all CPUs",
            Step::Mitigations => "Step 2 · speculative-execution mitigations",
            Step::SyscallAuditing => "Step 3 · syscall auditing and seccomp",
            Step::Netfilter => "Step 4 · iptables / netfilter",
            Step::Locality => "Step 5 · perfect locality (IRQ affinity, RSS, XPS)",
            Step::Interrupts => "Step 6 · interrupt moderation and busy polling",
            Step::NosyNeighbour => "Step 7 · the nosy neighbour (AF_PACKET sockets)",
            Step::Qdisc => "Step 8 · queueing discipline",
            Step::DiminishingReturns => "Step 9 · diminishing returns (GRO, congestion control)",
            Step::Beyond => "Beyond the nine steps · kernel features and limits",
        }
    }
}

/// How the host compares with the tuned host of the story.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Tuned as in the story (or nothing to tune).
    Ok,
    /// Partly tuned, or a choice worth a look.
    Warn,
    /// Untuned: the cost the story measured is being paid.
    Bad,
    /// Could not be determined (file or tool missing, no permission).
    Unknown,
}

impl Status {
    /// A fixed-width label for the text report.
    pub fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Bad => "bad",
            Status::Unknown => "unknown",
        }
    }
}

/// How much the tuning is worth: high ≥ 20% in the story, medium ≥ 10%, low below, info when the
/// story did not measure it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Info,
    Low,
    Medium,
    High,
}

impl Severity {
    /// The lowercase name, as in the JSON.
    pub fn label(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
        }
    }
}

/// One audited fact about the host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Stable identifier, with `:IF` for per-interface findings (`qdisc:eth0`).
    pub id: String,
    pub step: Step,
    pub title: &'static str,
    pub status: Status,
    pub severity: Severity,
    /// What was seen on the host.
    pub observed: String,
    /// Why it matters, in one line, with the gain the story measured where known.
    pub why: &'static str,
    /// The command that changes it.
    pub fix: String,
}

/// The fixed part of a check: everything but what was observed.
pub(crate) struct Meta {
    pub id: &'static str,
    pub step: Step,
    pub title: &'static str,
    pub severity: Severity,
    pub why: &'static str,
    pub fix: &'static str,
}

impl Meta {
    /// A finding with the check's own id and fix.
    pub fn finding(&self, status: Status, observed: impl Into<String>) -> Finding {
        self.finding_on(None, status, observed, self.fix.to_owned())
    }

    /// A finding with a fix written for what was seen.
    pub fn finding_fix(&self, status: Status, observed: impl Into<String>, fix: String) -> Finding {
        self.finding_on(None, status, observed, fix)
    }

    /// A finding about one device: the id becomes `id:dev`.
    pub fn finding_on(
        &self,
        dev: Option<&str>,
        status: Status,
        observed: impl Into<String>,
        fix: String,
    ) -> Finding {
        Finding {
            id: match dev {
                Some(dev) => format!("{}:{dev}", self.id),
                None => self.id.to_owned(),
            },
            step: self.step,
            title: self.title,
            status,
            severity: self.severity,
            observed: observed.into(),
            why: self.why,
            fix,
        }
    }
}

/// A check: reads the host, returns its findings (one, or one per NIC).
pub type Check = fn(&dyn Host) -> Vec<Finding>;

/// Every check, in report order.
pub const CHECKS: &[Check] = &[
    cpu::check_cpus,
    cpu::check_mitigations,
    syscalls::check_audit,
    syscalls::check_seccomp,
    netfilter::check_netfilter,
    locality::check_irqbalance,
    locality::check_irq_affinity,
    locality::check_rss,
    locality::check_xps,
    tcp::check_busy_poll,
    nic::check_coalescing,
    neighbour::check_af_packet,
    nic::check_qdisc,
    nic::check_gro_gso,
    tcp::check_congestion_control,
    tcp::check_initcwnd,
    features::check_ktls,
    features::check_io_uring,
    limits::check_listen_backlog,
    limits::check_fd_limit,
];

/// Runs every check against `host`, ordered by step (checks keep their order within a step).
pub fn audit(host: &dyn Host) -> Vec<Finding> {
    let mut findings: Vec<Finding> = CHECKS.iter().flat_map(|check| check(host)).collect();
    findings.sort_by_key(|f| f.step);
    findings
}

/// `linerate lab doctor`: audit this host (read-only) against the nine tuning steps.
#[derive(Debug, Clone)]
pub struct DoctorArgs {
    /// Print the findings as JSON instead of a text report.
    pub json: bool,
    /// Audit a captured tree instead of this host: DIR/proc, DIR/sys, DIR/lib/modules stand in for
    /// the real ones and DIR/commands/<argv joined by '_'> for command outputs (tests, fixtures).
    pub root: PathBuf,
    /// The CPUs the server would use, e.g. 0-3,8 (default: this process's allowed CPUs).
    pub cpus: Option<Vec<usize>>,
}

/// Audits the host (or `--root` tree) and returns the report, text or JSON as `args.json` asks;
/// the caller prints it. Whatever the findings, this is an audit, not a gate.
pub fn report(args: &DoctorArgs) -> anyhow::Result<String> {
    let cpus = args.cpus.clone();
    let findings = if args.root == std::path::Path::new("/") {
        let host = cpus.map_or_else(SystemHost::new, SystemHost::with_cpus);
        audit(&host)
    } else {
        let host = FixtureHost::new(&args.root);
        audit(&match cpus {
            Some(cpus) => host.with_cpus(cpus),
            None => host,
        })
    };
    if args.json {
        report::json(&findings).context("encoding the findings as JSON")
    } else {
        Ok(report::text(&findings))
    }
}
