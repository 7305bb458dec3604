//! Tests of `linerate lab doctor`: every check against fixture trees standing in for /proc, /sys
//! and command outputs (tests/fixtures/doctor, see its README), so they do not depend on this
//! host; plus one audit of the real host, which must not fail whatever the host looks like.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use linerate_lab::doctor::{
    CHECKS, DoctorArgs, Finding, FixtureHost, Status, Step, SystemHost, audit, render_json,
    render_text, report,
};

use Status::{Bad, Ok, Unknown, Warn};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/doctor")
        .join(name)
}

fn audit_fixture(name: &str) -> Vec<Finding> {
    audit(&FixtureHost::new(fixture(name)))
}

fn find<'a>(findings: &'a [Finding], id: &str) -> &'a Finding {
    findings
        .iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("no finding {id} in {:#?}", ids(findings)))
}

fn ids(findings: &[Finding]) -> Vec<&str> {
    findings.iter().map(|f| f.id.as_str()).collect()
}

/// One row per (fixture, check): the status it must get and a piece of what it must report.
const ROWS: &[(&str, &str, Status, &str)] = &[
    // Step 1: CPUs the server may use.
    ("tuned", "cpus", Ok, "server may use 4 of 4 online CPUs"),
    (
        "stock",
        "cpus",
        Warn,
        "server may use 4 of 8 online CPUs (allowed 0-3, online 0-7)",
    ),
    (
        "empty",
        "cpus",
        Unknown,
        "allowed CPUs unreadable, online CPUs unreadable",
    ),
    // Step 2: mitigations.
    ("tuned", "mitigations", Ok, "mitigations=off; none of 3"),
    (
        "stock",
        "mitigations",
        Bad,
        "2 of 3 mitigated: meltdown, spectre_v2",
    ),
    (
        "partial",
        "mitigations",
        Unknown,
        "no /sys/devices/system/cpu/vulnerabilities",
    ),
    // Step 3: syscall auditing and seccomp.
    ("tuned", "syscall-audit", Ok, "rules include -a never,task"),
    (
        "stock",
        "syscall-audit",
        Bad,
        "auditd running (pid 650); audit enabled=1; 1 audit rules",
    ),
    ("partial", "syscall-audit", Warn, "audit enabled=0"),
    (
        "old-kernel",
        "syscall-audit",
        Ok,
        "audit=0 on the kernel command line",
    ),
    ("empty", "syscall-audit", Unknown, "/proc cannot be listed"),
    ("tuned", "seccomp", Ok, "Seccomp: 0"),
    (
        "stock",
        "seccomp",
        Warn,
        "Seccomp: 2 (filter mode, 1 filters)",
    ),
    ("partial", "seccomp", Warn, "Seccomp: 1 (strict mode)"),
    ("empty", "seccomp", Unknown, "/proc/self/status unreadable"),
    // Step 4: netfilter.
    (
        "tuned",
        "netfilter",
        Ok,
        "no netfilter modules loaded; no iptables tables; conntrack not loaded",
    ),
    (
        "stock",
        "netfilter",
        Bad,
        "iptables tables: ip:filter; nft: 1 tables; 12 tracked connections",
    ),
    ("partial", "netfilter", Warn, "modules loaded: nf_conntrack"),
    ("empty", "netfilter", Unknown, "no /proc/modules"),
    // Step 5: locality.
    ("tuned", "irqbalance", Ok, "not running"),
    ("stock", "irqbalance", Bad, "running (pid 700)"),
    ("empty", "irqbalance", Unknown, "/proc cannot be listed"),
    (
        "tuned",
        "irq-affinity:eth0",
        Ok,
        "IRQ 28 eth0-Tx-Rx-0 → CPU 0; IRQ 29 eth0-Tx-Rx-1 → CPU 1",
    ),
    (
        "stock",
        "irq-affinity:eth0",
        Warn,
        "IRQ 25 virtio1-input.0 → CPU 0-3; IRQ 26 virtio1-output.0",
    ),
    ("partial", "irq-affinity", Unknown, "no physical NIC"),
    ("empty", "irq-affinity", Unknown, "no /sys/class/net"),
    (
        "tuned",
        "rss:eth0",
        Ok,
        "4 RX / 4 TX queues for 4 server CPUs",
    ),
    (
        "stock",
        "rss:eth0",
        Warn,
        "2 RX / 2 TX queues for 4 server CPUs",
    ),
    ("partial", "rss", Unknown, "no physical NIC"),
    (
        "tuned",
        "xps:eth0",
        Ok,
        "tx-0: CPU 0; tx-1: CPU 1; tx-2: CPU 2; tx-3: CPU 3",
    ),
    ("stock", "xps:eth0", Warn, "tx-0: unset; tx-1: CPU 0-1"),
    ("empty", "xps", Unknown, "no /sys/class/net"),
    (
        "old-kernel",
        "xps:ens5",
        Ok,
        "tx-0: unreadable; one TX queue, nothing for XPS to choose",
    ),
    // Step 6: interrupt moderation and busy polling.
    ("tuned", "busy-poll", Ok, "busy_poll 50 µs, busy_read 50 µs"),
    ("stock", "busy-poll", Bad, "busy_poll 0 µs, busy_read 0 µs"),
    (
        "partial",
        "busy-poll",
        Warn,
        "busy_poll 0 µs, busy_read 50 µs",
    ),
    ("empty", "busy-poll", Unknown, "busy_poll ?, busy_read ?"),
    (
        "tuned",
        "coalescing:eth0",
        Ok,
        "adaptive-rx off, rx-usecs 256",
    ),
    (
        "stock",
        "coalescing:eth0",
        Warn,
        "adaptive-rx on, rx-usecs 20",
    ),
    ("partial", "coalescing", Unknown, "no physical NIC"),
    // Step 7: the nosy neighbour.
    ("tuned", "af-packet", Ok, "no AF_PACKET sockets"),
    (
        "stock",
        "af-packet",
        Bad,
        "2 AF_PACKET sockets: inode 4242 (dhclient pid 612), inode 5151 (owner unreadable)",
    ),
    ("empty", "af-packet", Unknown, "/proc/net/packet unreadable"),
    // Step 8: qdisc.
    ("tuned", "qdisc:eth0", Ok, "root noqueue"),
    (
        "stock",
        "qdisc:eth0",
        Warn,
        "root mq with 2 children (fq_codel)",
    ),
    ("empty", "qdisc", Unknown, "no /sys/class/net"),
    // Step 9: GRO/GSO and congestion control.
    ("tuned", "gro-gso:eth0", Ok, "GRO off, GSO on"),
    ("stock", "gro-gso:eth0", Warn, "GRO on, GSO on"),
    ("partial", "gro-gso", Unknown, "no physical NIC"),
    (
        "tuned",
        "congestion-control",
        Ok,
        "reno (available: reno cubic)",
    ),
    ("stock", "congestion-control", Warn, "cubic"),
    ("partial", "congestion-control", Warn, "bbr"),
    ("empty", "congestion-control", Unknown, "unreadable"),
    // Beyond the nine steps.
    (
        "tuned",
        "initcwnd",
        Ok,
        "default via 10.0.0.1 dev eth0: initcwnd 32, initrwnd 32",
    ),
    (
        "stock",
        "initcwnd",
        Warn,
        "initcwnd 4, initrwnd 10 (default)",
    ),
    (
        "partial",
        "initcwnd",
        Ok,
        "initcwnd 10 (default), initrwnd 10 (default)",
    ),
    ("empty", "initcwnd", Unknown, "`ip route show` unavailable"),
    (
        "tuned",
        "ktls",
        Ok,
        "tls module loaded; tcp_available_ulp: tls",
    ),
    (
        "tuned",
        "ktls",
        Ok,
        "kTLS sessions since boot: 80 TX, 80 RX in software",
    ),
    ("tuned", "ktls", Ok, "key updates 117 TX, 10 RX"),
    (
        "stock",
        "ktls",
        Bad,
        "not loaded and no tls module for kernel 5.10.0-28-cloud-amd64",
    ),
    (
        "partial",
        "ktls",
        Warn,
        "loadable: modprobe tls (/lib/modules/6.1.0-18-amd64/kernel/net/tls/tls.ko.xz)",
    ),
    ("empty", "ktls", Unknown, "tcp_available_ulp unreadable"),
    ("tuned", "io-uring", Ok, "io_uring_disabled = 0 (enabled)"),
    ("stock", "io-uring", Bad, "io_uring_disabled = 2 (disabled)"),
    ("partial", "io-uring", Warn, "io_uring_disabled = 1"),
    (
        "old-kernel",
        "io-uring",
        Ok,
        "kernel 5.15.0-105-generic: io_uring since 5.1",
    ),
    ("empty", "io-uring", Unknown, "unreadable"),
    (
        "tuned",
        "listen-backlog",
        Ok,
        "somaxconn 4096, tcp_max_syn_backlog 4096",
    ),
    (
        "stock",
        "listen-backlog",
        Warn,
        "somaxconn 128, tcp_max_syn_backlog 512",
    ),
    (
        "partial",
        "listen-backlog",
        Warn,
        "tcp_max_syn_backlog 1024",
    ),
    ("empty", "listen-backlog", Unknown, "somaxconn ?"),
    (
        "tuned",
        "fd-limit",
        Ok,
        "RLIMIT_NOFILE soft 1048576 hard 1048576",
    ),
    (
        "stock",
        "fd-limit",
        Warn,
        "RLIMIT_NOFILE soft 1024 hard 524288; nr_open 1048576",
    ),
    ("empty", "fd-limit", Unknown, "RLIMIT_NOFILE unreadable"),
];

#[test]
fn each_check_against_fixtures() {
    let mut failures = Vec::new();
    for &(name, id, status, observed) in ROWS {
        let findings = audit_fixture(name);
        let f = find(&findings, id);
        if f.status != status || !f.observed.contains(observed) {
            failures.push(format!(
                "{name}/{id}: got {:?} {:?}, want {status:?} containing {observed:?}",
                f.status, f.observed
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_check_has_good_bad_and_unknown_rows() {
    for id in ids(&audit_fixture("tuned")) {
        let base = id.split(':').next().unwrap();
        let rows: Vec<Status> = ROWS
            .iter()
            .filter(|r| r.1.split(':').next() == Some(base))
            .map(|r| r.2)
            .collect();
        assert!(rows.contains(&Ok), "{base}: no ok row");
        assert!(
            rows.iter().any(|s| matches!(s, Warn | Bad)),
            "{base}: no warn/bad row"
        );
        assert!(rows.contains(&Unknown), "{base}: no unknown row");
    }
}

#[test]
fn tuned_host_is_all_ok_and_empty_root_is_all_unknown() {
    for (name, want) in [("tuned", Ok), ("empty", Unknown)] {
        let findings = audit_fixture(name);
        assert!(
            findings.len() >= CHECKS.len(),
            "{name}: a check gave nothing"
        );
        for f in &findings {
            assert_eq!(f.status, want, "{name}: {f:#?}");
        }
    }
}

#[test]
fn stock_host_is_never_ok() {
    for f in audit_fixture("stock") {
        assert!(matches!(f.status, Warn | Bad), "{f:#?}");
    }
}

#[test]
fn findings_are_complete_unique_and_ordered_by_step() {
    for name in ["tuned", "stock", "partial", "old-kernel", "empty"] {
        let findings = audit_fixture(name);
        let mut seen = HashSet::new();
        for f in &findings {
            assert!(seen.insert(f.id.clone()), "{name}: duplicate {}", f.id);
            assert!(
                !f.observed.is_empty() && !f.why.is_empty() && !f.fix.is_empty(),
                "{f:#?}"
            );
        }
        let steps: Vec<Step> = findings.iter().map(|f| f.step).collect();
        assert!(steps.is_sorted(), "{name}: {steps:?}");
    }
}

#[test]
fn irqs_of_a_longer_device_name_are_not_the_nics() {
    // virtio10-input.0 shares a prefix with eth0's device virtio1; virtio1-config is no queue.
    let findings = audit_fixture("stock");
    let seen = &find(&findings, "irq-affinity:eth0").observed;
    assert!(
        !seen.contains("virtio10") && !seen.contains("config"),
        "{seen}"
    );
    let seen = &find(&audit_fixture("tuned"), "irq-affinity:eth0")
        .observed
        .clone();
    assert!(!seen.contains("mgmnt"), "{seen}");
}

#[test]
fn fixes_name_the_host_s_own_irqs_queues_and_routes() {
    let findings = audit_fixture("stock");
    let rows = [
        (
            "irq-affinity:eth0",
            "echo 0 > /proc/irq/25/smp_affinity_list",
        ),
        (
            "irq-affinity:eth0",
            "echo 1 > /proc/irq/28/smp_affinity_list",
        ),
        (
            "xps:eth0",
            "echo 1 > /sys/class/net/eth0/queues/tx-0/xps_cpus; echo 2 > /sys/class/net/eth0/queues/tx-1/xps_cpus",
        ),
        ("rss:eth0", "ethtool -L eth0 combined 4"),
        ("qdisc:eth0", "tc qdisc replace dev eth0 root noqueue"),
        ("gro-gso:eth0", "ethtool -K eth0 gro off"),
        ("coalescing:eth0", "ethtool -C eth0 adaptive-rx off"),
        (
            "initcwnd",
            "ip route change default via 172.31.0.1 dev eth0 proto dhcp src 172.31.5.5 metric 100 initcwnd 32 initrwnd 32",
        ),
        ("cpus", "taskset -c 0-7"),
        ("fd-limit", "ulimit -n 524288"),
        ("irqbalance", "systemctl disable --now irqbalance"),
    ];
    for (id, fix) in rows {
        let f = find(&findings, id);
        assert!(f.fix.contains(fix), "{id}: {:?} lacks {fix:?}", f.fix);
    }
}

#[test]
fn cpus_override_naming_offline_cpus_is_bad() {
    let host = FixtureHost::new(fixture("tuned")).with_cpus(vec![0, 1, 2, 3, 4, 5]);
    let findings = audit(&host);
    let f = find(&findings, "cpus");
    assert_eq!(f.status, Bad);
    assert!(
        f.observed.contains("CPUs 4-5 are not online"),
        "{}",
        f.observed
    );
}

#[test]
fn command_fixture_names() {
    let rows: &[(&[&str], &str)] = &[
        (&["ip", "route", "show"], "ip_route_show"),
        (&["ethtool", "-k", "eth0"], "ethtool_-k_eth0"),
        (&["nft", "list", "ruleset"], "nft_list_ruleset"),
    ];
    for &(argv, file) in rows {
        assert_eq!(FixtureHost::command_file(argv), file);
    }
}

#[test]
fn json_report_counts_and_names_statuses() {
    let findings = audit_fixture("stock");
    let json: serde_json::Value = serde_json::from_str(&render_json(&findings).unwrap()).unwrap();
    let summary = &json["summary"];
    let total: u64 = ["ok", "warn", "bad", "unknown"]
        .iter()
        .map(|k| summary[k].as_u64().unwrap())
        .sum();
    assert_eq!(total as usize, findings.len());
    let first = &json["findings"][0];
    assert_eq!(first["id"], "cpus");
    assert_eq!(first["step"], "application");
    assert_eq!(first["status"], "warn");
    assert_eq!(first["severity"], "high");
    for key in ["title", "observed", "why", "fix"] {
        assert!(first[key].as_str().is_some_and(|s| !s.is_empty()), "{key}");
    }
}

#[test]
fn text_report_groups_by_step_in_order() {
    let text = render_text(&audit_fixture("stock"));
    let mut at = 0;
    for step in Step::ALL {
        let found = text[at..]
            .find(step.heading())
            .unwrap_or_else(|| panic!("{step:?} missing or out of order"));
        at += found;
    }
    assert!(
        text.contains("[bad    ] speculative-execution mitigations (mitigations, high)"),
        "{text}"
    );
    assert!(
        text.contains("fix:  sysctl -w net.core.busy_poll=50"),
        "{text}"
    );
}

#[test]
fn run_on_a_fixture_root_succeeds() {
    for json in [false, true] {
        let args = DoctorArgs {
            json,
            root: fixture("partial"),
            cpus: None,
        };
        let text = report(&args).unwrap();
        assert!(!text.is_empty());
        if json {
            assert!(
                serde_json::from_str::<serde_json::Value>(&text).is_ok(),
                "{text}"
            );
        }
    }
}

#[test]
fn real_host_audit_does_not_fail() {
    let findings = audit(&SystemHost::new());
    assert!(findings.len() >= CHECKS.len());
    for f in &findings {
        assert!(
            !f.observed.is_empty() && !f.why.is_empty() && !f.fix.is_empty(),
            "{f:#?}"
        );
    }
    println!("{}", render_text(&findings));
}

/// Regression: doctor advised "set somaxconn=4096" where it already was 4096. The fix
/// names only the settings that fall short.
#[test]
fn the_backlog_fix_names_only_what_falls_short() {
    let fix = |name: &str| find(&audit_fixture(name), "listen-backlog").fix.clone();
    assert_eq!(
        fix("partial"),
        "sysctl -w net.ipv4.tcp_max_syn_backlog=4096",
        "somaxconn is 4096 there"
    );
    assert_eq!(
        fix("stock"),
        "sysctl -w net.core.somaxconn=4096 net.ipv4.tcp_max_syn_backlog=4096"
    );
}
