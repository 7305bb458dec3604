//! Capacity limits, beyond the nine steps: the listen backlog (`net.core.somaxconn`,
//! `net.ipv4.tcp_max_syn_backlog`) and open files (this process's `RLIMIT_NOFILE`,
//! `fs.nr_open`, `fs.file-max`). Each connection is one file descriptor.

use super::host::Host;
use super::sources;
use super::{Finding, Meta, Severity, Status, Step};

const BACKLOG: Meta = Meta {
    id: "listen-backlog",
    step: Step::Beyond,
    title: "listen backlog (somaxconn, SYN backlog)",
    severity: Severity::Info,
    why: "listen() silently caps the backlog at somaxconn; a connection burst beyond it is dropped or delayed by SYN retries",
    fix: "sysctl -w net.core.somaxconn=4096 net.ipv4.tcp_max_syn_backlog=4096",
};

const FD_LIMIT: Meta = Meta {
    id: "fd-limit",
    step: Step::Beyond,
    title: "open-file limits",
    severity: Severity::Info,
    why: "every connection is a file descriptor; below the limit accept() fails with EMFILE under load",
    fix: "ulimit -n 1048576 (≤ fs.nr_open), or LimitNOFILE= in the systemd unit, or nofile in /etc/security/limits.conf",
};

/// The backlog linerate asks for in `listen()` (the floor's `LISTEN_BACKLOG`).
const WANT_BACKLOG: u64 = 4096;
/// Open files wanted: room for tens of thousands of connections plus files served.
const WANT_NOFILE: u64 = 65_536;

/// Beyond the steps: can `listen(fd, 4096)` get its 4096?
pub fn check_listen_backlog(h: &dyn Host) -> Vec<Finding> {
    let somaxconn = sources::sysctl_number(h, "net.core.somaxconn");
    let syn = sources::sysctl_number(h, "net.ipv4.tcp_max_syn_backlog");
    let show = |v: Option<u64>| v.map_or_else(|| "?".to_owned(), |v| v.to_string());
    let observed = format!(
        "somaxconn {}, tcp_max_syn_backlog {}",
        show(somaxconn),
        show(syn)
    );
    let status = match (somaxconn, syn) {
        (None, None) => Status::Unknown,
        (Some(s), _) if s < WANT_BACKLOG => Status::Warn,
        (_, Some(s)) if s < WANT_BACKLOG => Status::Warn,
        (Some(_), _) => Status::Ok,
        (None, Some(_)) => Status::Unknown,
    };
    // The fix names only the settings that fall short: advising "somaxconn=4096" where it
    // already is 4096 reads as if the audit did not look.
    let short: Vec<String> = [
        ("net.core.somaxconn", somaxconn),
        ("net.ipv4.tcp_max_syn_backlog", syn),
    ]
    .iter()
    .filter(|(_, v)| v.is_some_and(|v| v < WANT_BACKLOG))
    .map(|(k, _)| format!("{k}={WANT_BACKLOG}"))
    .collect();
    let fix = if short.is_empty() {
        BACKLOG.fix.to_owned()
    } else {
        format!("sysctl -w {}", short.join(" "))
    };
    vec![BACKLOG.finding_fix(status, observed, fix)]
}

/// Beyond the steps: this process's open-file limit and the system-wide ceilings.
pub fn check_fd_limit(h: &dyn Host) -> Vec<Finding> {
    let limit = h.nofile_limit();
    let nr_open = sources::sysctl_number(h, "fs.nr_open");
    let file_max = sources::sysctl_number(h, "fs.file-max");
    let show = |v: Option<u64>| v.map_or_else(|| "unlimited".to_owned(), |v| v.to_string());
    let show_sys = |v: Option<u64>| v.map_or_else(|| "?".to_owned(), |v| v.to_string());
    let Some(limit) = limit else {
        return vec![FD_LIMIT.finding(
            Status::Unknown,
            format!(
                "RLIMIT_NOFILE unreadable; nr_open {}, file-max {}",
                show_sys(nr_open),
                show_sys(file_max)
            ),
        )];
    };
    let observed = format!(
        "RLIMIT_NOFILE soft {} hard {}; nr_open {}, file-max {}",
        show(limit.soft),
        show(limit.hard),
        show_sys(nr_open),
        show_sys(file_max)
    );
    let enough = |v: Option<u64>| v.is_none_or(|v| v >= WANT_NOFILE);
    let status = if enough(limit.soft) && file_max.is_none_or(|m| m >= WANT_NOFILE) {
        Status::Ok
    } else {
        Status::Warn
    };
    let raise_to = nr_open.unwrap_or(WANT_NOFILE).max(WANT_NOFILE);
    let fix = match limit.hard {
        Some(hard) if hard >= WANT_NOFILE => {
            format!("ulimit -n {hard} (the hard limit), or LimitNOFILE= in the systemd unit")
        }
        _ => format!(
            "ulimit -Hn {raise_to}; ulimit -n {raise_to} as root, or LimitNOFILE={raise_to} in the systemd unit, or nofile in /etc/security/limits.conf"
        ),
    };
    vec![FD_LIMIT.finding_fix(status, observed, fix)]
}
