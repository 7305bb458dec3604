//! Kernel features linerate can use, beyond the nine steps: kernel TLS (the `tls` ULP: loaded,
//! built in, or loadable from `/lib/modules/<release>`) and io_uring
//! (`kernel.io_uring_disabled`, else the kernel version).

use super::host::Host;
use super::parse;
use super::sources;
use super::{Finding, Meta, Severity, Status, Step};

const KTLS: Meta = Meta {
    id: "ktls",
    step: Step::Beyond,
    title: "kernel TLS (tls ULP)",
    severity: Severity::Info,
    why: "kTLS lets sendfile encrypt in the kernel; without it HTTPS copies through user space and halves single-stream throughput",
    fix: "modprobe tls (or a kernel built with CONFIG_TLS)",
};

const IO_URING: Meta = Meta {
    id: "io-uring",
    step: Step::Beyond,
    title: "io_uring availability",
    severity: Severity::Info,
    why: "io_uring batches submissions and completions into shared rings, saving syscalls; when it is disabled only the epoll backend is left",
    fix: "sysctl -w kernel.io_uring_disabled=0",
};

/// The first kernel with io_uring (5.1).
const IO_URING_SINCE: (u32, u32) = (5, 1);

/// Beyond the steps: can a socket use the `tls` ULP?
pub fn check_ktls(h: &dyn Host) -> Vec<Finding> {
    let modules = h.read("/proc/modules");
    let ulps = sources::sysctl(h, "net.ipv4.tcp_available_ulp");
    let tls_stat = h.read("/proc/net/tls_stat").is_some();
    let loaded = modules.as_deref().is_some_and(|m| {
        m.lines()
            .any(|l| l.split_whitespace().next() == Some("tls"))
    });
    let registered = ulps
        .as_deref()
        .is_some_and(|u| u.split_whitespace().any(|name| name == "tls"));
    if loaded || registered || tls_stat {
        let mut seen = Vec::new();
        if loaded {
            seen.push("tls module loaded".to_owned());
        }
        if let Some(u) = &ulps {
            seen.push(format!("tcp_available_ulp: {u}"));
        }
        if tls_stat {
            seen.push("/proc/net/tls_stat present".to_owned());
        }
        return vec![KTLS.finding(Status::Ok, seen.join("; "))];
    }
    let release = sources::kernel_release(h);
    let module_file = release.as_deref().and_then(|r| {
        let dir = format!("/lib/modules/{r}/kernel/net/tls");
        let name = h
            .list(&dir)?
            .into_iter()
            .find(|n| n.starts_with("tls.ko"))?;
        Some(format!("{dir}/{name}"))
    });
    let ulp_seen = ulps.as_deref().map_or_else(
        || "tcp_available_ulp unreadable".to_owned(),
        |u| {
            format!(
                "tcp_available_ulp: {}",
                if u.is_empty() { "(none)" } else { u }
            )
        },
    );
    let finding = match (module_file, &ulps) {
        (Some(file), _) => KTLS.finding(
            Status::Warn,
            format!("not loaded; loadable: modprobe tls ({file}); {ulp_seen}"),
        ),
        (None, Some(_)) => KTLS.finding_fix(
            Status::Bad,
            format!(
                "not loaded and no tls module for kernel {}; {ulp_seen}",
                release.as_deref().unwrap_or("?")
            ),
            "use a kernel built with CONFIG_TLS=y or =m, then modprobe tls".to_owned(),
        ),
        (None, None) => KTLS.finding(Status::Unknown, ulp_seen),
    };
    vec![finding]
}

/// Beyond the steps: is io_uring enabled for this process?
pub fn check_io_uring(h: &dyn Host) -> Vec<Finding> {
    let release = sources::kernel_release(h);
    let version = release.as_deref().and_then(parse::kernel_version);
    let kernel = release.as_deref().unwrap_or("?");
    let finding = match sources::sysctl_number(h, "kernel.io_uring_disabled") {
        Some(0) => IO_URING.finding(Status::Ok, format!("io_uring_disabled = 0 (enabled); kernel {kernel}")),
        Some(1) => IO_URING.finding(
            Status::Warn,
            format!("io_uring_disabled = 1 (only root and kernel.io_uring_group members); kernel {kernel}"),
        ),
        Some(n) => IO_URING.finding(Status::Bad, format!("io_uring_disabled = {n} (disabled); kernel {kernel}")),
        None => match version {
            Some(v) if v >= IO_URING_SINCE => IO_URING.finding(
                Status::Ok,
                format!("kernel {kernel}: io_uring since 5.1, no io_uring_disabled sysctl (before 6.6)"),
            ),
            Some(_) => IO_URING.finding_fix(
                Status::Bad,
                format!("kernel {kernel} is older than 5.1"),
                "upgrade to a kernel ≥ 5.1 (≥ 6.0 for the features linerate uses)".to_owned(),
            ),
            None => IO_URING.finding(Status::Unknown, "kernel release and io_uring_disabled unreadable"),
        },
    };
    vec![finding]
}
