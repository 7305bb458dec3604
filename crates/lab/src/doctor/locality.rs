//! Step 5, perfect locality: irqbalance off, each NIC queue's IRQ pinned to its own server CPU
//! (`/proc/interrupts`, `/proc/irq/N/smp_affinity_list`), at least one RX queue per CPU (RSS),
//! and each TX queue mapped to one CPU (XPS, `queues/tx-N/xps_cpus`).

use super::host::Host;
use super::parse;
use super::sources;
use super::{Finding, Meta, Severity, Status, Step};

/// The story's gain for the whole locality step, quoted by each of its checks.
const LOCALITY_WHY: &str = "a packet handled on one CPU from IRQ to send never crosses caches; the story measured about +38% for perfect locality (queue IRQ affinity, RSS, XPS, one pinned worker per CPU)";

const IRQBALANCE: Meta = Meta {
    id: "irqbalance",
    step: Step::Locality,
    title: "irqbalance",
    severity: Severity::High,
    why: "irqbalance moves queue IRQs away from the CPUs they were pinned to; perfect locality (about +38% in the story) needs it stopped",
    fix: "systemctl disable --now irqbalance",
};

const IRQ_AFFINITY: Meta = Meta {
    id: "irq-affinity",
    step: Step::Locality,
    title: "NIC queue IRQ affinity",
    severity: Severity::High,
    why: LOCALITY_WHY,
    fix: "echo CPU > /proc/irq/N/smp_affinity_list for each queue IRQ N, one queue per CPU",
};

const RSS: Meta = Meta {
    id: "rss",
    step: Step::Locality,
    title: "RX queues per server CPU (RSS)",
    severity: Severity::High,
    why: LOCALITY_WHY,
    fix: "ethtool -L IF combined N (N = server CPUs, up to the NIC's maximum from ethtool -l IF)",
};

const XPS: Meta = Meta {
    id: "xps",
    step: Step::Locality,
    title: "TX queue per CPU (XPS)",
    severity: Severity::High,
    why: LOCALITY_WHY,
    fix: "echo MASK > /sys/class/net/IF/queues/tx-N/xps_cpus, one CPU per queue",
};

/// IRQ names with these words belong to the device, not to a queue.
const NON_QUEUE_IRQ_WORDS: &[&str] = &[
    "config", "mgmnt", "async", "misc", "ctrl", "control", "event",
];

/// One queue interrupt of a NIC.
struct QueueIrq {
    irq: u32,
    name: String,
    queue: usize,
    affinity: Option<Vec<usize>>,
}

/// Step 5: is irqbalance running?
pub fn check_irqbalance(h: &dyn Host) -> Vec<Finding> {
    let finding = match sources::find_processes(h, "irqbalance") {
        None => IRQBALANCE.finding(Status::Unknown, "/proc cannot be listed"),
        Some(found) if found.is_empty() => IRQBALANCE.finding(Status::Ok, "not running"),
        Some(found) => IRQBALANCE.finding(Status::Bad, format!("running (pid {})", found[0].pid)),
    };
    vec![finding]
}

/// The finding to give when there is no physical NIC to judge.
fn no_nic(meta: &Meta, nics: &Option<Vec<String>>) -> Vec<Finding> {
    let observed = match nics {
        None => "no /sys/class/net",
        Some(_) => "no physical NIC (none under /sys/class/net has a device)",
    };
    vec![meta.finding(Status::Unknown, observed)]
}

/// True when `token` occurs in `name` with no letter or digit right before or after it.
fn contains_token(name: &str, token: &str) -> bool {
    name.match_indices(token).any(|(at, _)| {
        let before = name[..at].chars().next_back();
        let after = name[at + token.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_alphanumeric())
            && !after.is_some_and(|c| c.is_ascii_alphanumeric())
    })
}

/// The queue IRQs of `nic`: `/proc/interrupts` lines naming the interface or its device
/// (`virtio2`, a PCI address), minus the device's own config/management IRQs.
fn queue_irqs(h: &dyn Host, nic: &str, interrupts: &str) -> Vec<QueueIrq> {
    let mut tokens = vec![nic.to_owned()];
    if let Some(device) = h.readlink(&format!("/sys/class/net/{nic}/device")) {
        tokens.extend(device.rsplit('/').next().map(str::to_owned));
    }
    let mut irqs = Vec::new();
    for line in interrupts.lines() {
        let Some((number, _)) = line.trim_start().split_once(':') else {
            continue;
        };
        let Ok(irq) = number.parse::<u32>() else {
            continue;
        };
        let Some(name) = line.split_whitespace().last() else {
            continue;
        };
        if !tokens.iter().any(|t| contains_token(name, t))
            || NON_QUEUE_IRQ_WORDS.iter().any(|w| name.contains(w))
        {
            continue;
        }
        // `mlx5_comp3@pci:0000:00:05.0`: the queue number is before the `@`.
        let Some(queue) = parse::trailing_number(name.split('@').next().unwrap_or(name)) else {
            continue;
        };
        let affinity = h
            .read(&format!("/proc/irq/{irq}/smp_affinity_list"))
            .and_then(|t| parse::cpu_list(&t));
        irqs.push(QueueIrq {
            irq,
            name: name.to_owned(),
            queue,
            affinity,
        });
    }
    irqs
}

/// Step 5: is each queue IRQ of each NIC pinned to its own server CPU?
pub fn check_irq_affinity(h: &dyn Host) -> Vec<Finding> {
    let nics = sources::physical_nics(h);
    let Some(list) = nics.as_ref().filter(|n| !n.is_empty()) else {
        return no_nic(&IRQ_AFFINITY, &nics);
    };
    let Some(interrupts) = h.read("/proc/interrupts") else {
        return vec![IRQ_AFFINITY.finding(Status::Unknown, "/proc/interrupts unreadable")];
    };
    let server = h.server_cpus().unwrap_or_default();
    list.iter()
        .map(|nic| affinity_finding(h, nic, &interrupts, &server))
        .collect()
}

fn affinity_finding(h: &dyn Host, nic: &str, interrupts: &str, server: &[usize]) -> Finding {
    let irqs = queue_irqs(h, nic, interrupts);
    let fix_for = |irqs: &[QueueIrq]| -> String {
        if server.is_empty() {
            return IRQ_AFFINITY.fix.to_owned();
        }
        let mut cmds = vec!["systemctl stop irqbalance".to_owned()];
        cmds.extend(irqs.iter().map(|q| {
            let cpu = server[q.queue % server.len()];
            format!("echo {cpu} > /proc/irq/{}/smp_affinity_list", q.irq)
        }));
        cmds.join("; ")
    };
    if irqs.is_empty() {
        return IRQ_AFFINITY.finding_on(
            Some(nic),
            Status::Unknown,
            format!("no queue IRQs of {nic} found in /proc/interrupts"),
            IRQ_AFFINITY.fix.to_owned(),
        );
    }
    let seen: Vec<String> = irqs
        .iter()
        .map(|q| {
            let cpus = q
                .affinity
                .as_deref()
                .map_or_else(|| "?".to_owned(), parse::format_cpu_list);
            format!("IRQ {} {} → CPU {cpus}", q.irq, q.name)
        })
        .collect();
    let queues = {
        let mut qs: Vec<usize> = irqs.iter().map(|q| q.queue).collect();
        qs.sort_unstable();
        qs.dedup();
        qs.len()
    };
    let status = if irqs.iter().any(|q| q.affinity.is_none()) {
        Status::Unknown
    } else {
        let mut cpu_of_queue: Vec<(usize, usize)> = Vec::new();
        let mut tuned = true;
        for q in &irqs {
            match q.affinity.as_deref() {
                Some(&[cpu]) if server.is_empty() || server.contains(&cpu) => {
                    // Two different queues on one CPU lose locality only if CPUs are left over.
                    if cpu_of_queue
                        .iter()
                        .any(|&(qu, c)| c == cpu && qu != q.queue)
                        && queues <= server.len()
                    {
                        tuned = false;
                    }
                    cpu_of_queue.push((q.queue, cpu));
                }
                _ => tuned = false,
            }
        }
        if tuned { Status::Ok } else { Status::Warn }
    };
    IRQ_AFFINITY.finding_on(Some(nic), status, seen.join("; "), fix_for(&irqs))
}

/// Step 5: does each NIC have at least one RX queue per server CPU?
pub fn check_rss(h: &dyn Host) -> Vec<Finding> {
    let nics = sources::physical_nics(h);
    let Some(list) = nics.as_ref().filter(|n| !n.is_empty()) else {
        return no_nic(&RSS, &nics);
    };
    let server = h.server_cpus();
    list.iter()
        .map(|nic| {
            let rx = sources::nic_queues(h, nic, "rx-").len();
            let tx = sources::nic_queues(h, nic, "tx-").len();
            let fix = format!(
                "ethtool -L {nic} combined {} (up to the maximum shown by ethtool -l {nic})",
                server.as_ref().map_or(0, Vec::len)
            );
            let (status, observed) = match &server {
                _ if rx == 0 => (
                    Status::Unknown,
                    format!("no queues under /sys/class/net/{nic}/queues"),
                ),
                None => (
                    Status::Unknown,
                    format!("{rx} RX / {tx} TX queues; server CPUs unknown"),
                ),
                Some(cpus) => (
                    if rx >= cpus.len() {
                        Status::Ok
                    } else {
                        Status::Warn
                    },
                    format!("{rx} RX / {tx} TX queues for {} server CPUs", cpus.len()),
                ),
            };
            RSS.finding_on(Some(nic), status, observed, fix)
        })
        .collect()
}

/// Step 5: is each TX queue of each NIC mapped to exactly one CPU, a different one per queue?
pub fn check_xps(h: &dyn Host) -> Vec<Finding> {
    let nics = sources::physical_nics(h);
    let Some(list) = nics.as_ref().filter(|n| !n.is_empty()) else {
        return no_nic(&XPS, &nics);
    };
    let server = h.server_cpus().unwrap_or_default();
    list.iter()
        .map(|nic| xps_finding(h, nic, &server))
        .collect()
}

fn xps_finding(h: &dyn Host, nic: &str, server: &[usize]) -> Finding {
    let queues = sources::nic_queues(h, nic, "tx-");
    let masks: Vec<(String, Option<Vec<usize>>)> = queues
        .iter()
        .map(|q| {
            let mask = h
                .read(&format!("/sys/class/net/{nic}/queues/{q}/xps_cpus"))
                .and_then(|t| parse::cpu_mask(&t));
            (q.clone(), mask)
        })
        .collect();
    let fix = if server.is_empty() {
        XPS.fix.to_owned()
    } else {
        queues
            .iter()
            .enumerate()
            .map(|(i, q)| {
                let mask = parse::single_cpu_mask(server[i % server.len()]);
                format!("echo {mask} > /sys/class/net/{nic}/queues/{q}/xps_cpus")
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    let seen: Vec<String> = masks
        .iter()
        .map(|(q, m)| match m {
            None => format!("{q}: unreadable"),
            Some(cpus) if cpus.is_empty() => format!("{q}: unset"),
            Some(cpus) => format!("{q}: CPU {}", parse::format_cpu_list(cpus)),
        })
        .collect();
    let status = if masks.len() == 1 {
        // One TX queue: XPS has nothing to choose between (RSS reports the missing queues).
        Status::Ok
    } else if masks.iter().all(|(_, m)| m.is_none()) {
        Status::Unknown
    } else {
        let mut used = Vec::new();
        let tuned = masks.iter().all(|(_, m)| match m.as_deref() {
            Some(&[cpu]) if !used.contains(&cpu) => {
                used.push(cpu);
                true
            }
            _ => false,
        });
        if tuned { Status::Ok } else { Status::Warn }
    };
    let observed = match seen.len() {
        0 => format!("no TX queues under /sys/class/net/{nic}/queues"),
        1 => format!("{}; one TX queue, nothing for XPS to choose", seen[0]),
        _ => seen.join("; "),
    };
    XPS.finding_on(Some(nic), status, observed, fix)
}
