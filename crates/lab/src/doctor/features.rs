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
    let tls_stat_text = h.read("/proc/net/tls_stat");
    let tls_stat = tls_stat_text.is_some();
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
        if let Some(text) = &tls_stat_text {
            seen.push(tls_stat_summary(text));
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

/// What `/proc/net/tls_stat` says kTLS has carried since boot (a server that hands sessions
/// to the kernel moves `TlsTxSw`/`TlsRxSw` once per connection), and whether this kernel
/// takes new keys (the rekey counters arrived with that support, after 6.12).
fn tls_stat_summary(text: &str) -> String {
    let get = |name: &str| super::parse::tls_stat_counter(text, name);
    let n = |name: &str| get(name).map_or_else(|| "?".to_owned(), |v| v.to_string());
    let mut s = format!(
        "kTLS sessions since boot: {} TX, {} RX in software, {} TX, {} RX offloaded to a NIC \
         ({} TX, {} RX open now); decrypt errors {}",
        n("TlsTxSw"),
        n("TlsRxSw"),
        n("TlsTxDevice"),
        n("TlsRxDevice"),
        n("TlsCurrTxSw"),
        n("TlsCurrRxSw"),
        n("TlsDecryptError"),
    );
    if get("TlsTxRekeyOk").is_some() {
        s.push_str(&format!(
            "; key updates {} TX, {} RX",
            n("TlsTxRekeyOk"),
            n("TlsRxRekeyOk")
        ));
    } else {
        s.push_str(
            "; no key updates in this kernel (they came after 6.12): a TLS 1.3 KeyUpdate ends a kTLS connection",
        );
    }
    s
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

#[cfg(test)]
mod tests {
    use super::tls_stat_summary;

    #[test]
    fn tls_stat_reads_sessions_and_rekey_support() {
        let old = "TlsCurrTxSw                     \t1\nTlsCurrRxSw                     \t1\n\
                   TlsCurrTxDevice                 \t0\nTlsCurrRxDevice                 \t0\n\
                   TlsTxSw                         \t80\nTlsRxSw                         \t79\n\
                   TlsTxDevice                     \t0\nTlsRxDevice                     \t0\n\
                   TlsDecryptError                 \t2\n";
        assert_eq!(
            tls_stat_summary(old),
            "kTLS sessions since boot: 80 TX, 79 RX in software, 0 TX, 0 RX offloaded to a NIC \
             (1 TX, 1 RX open now); decrypt errors 2; no key updates in this kernel (they came after 6.12): \
             a TLS 1.3 KeyUpdate ends a kTLS connection"
        );
        let new = format!("{old}TlsRxRekeyOk\t10\nTlsRxRekeyError\t0\nTlsTxRekeyOk\t117\n");
        assert!(tls_stat_summary(&new).ends_with("; key updates 117 TX, 10 RX"));
        assert!(tls_stat_summary("").starts_with("kTLS sessions since boot: ? TX, ? RX"));
    }
}
