//! Per-NIC settings read through listing commands: interrupt moderation (`ethtool -c`, step 6),
//! the root queueing discipline (`tc qdisc show`, step 8) and GRO/GSO (`ethtool -k`, step 9).
//! A missing tool or a driver that does not answer makes the finding unknown.

use super::host::Host;
use super::sources;
use super::{Finding, Meta, Severity, Status, Step};

const COALESCING: Meta = Meta {
    id: "coalescing",
    step: Step::Interrupts,
    title: "interrupt moderation",
    severity: Severity::High,
    why: "adaptive moderation keeps changing the interrupt rate; a fixed rx-usecs plus busy polling measured about +28% in the story",
    fix: "ethtool -C IF adaptive-rx off rx-usecs N (choose N by measuring)",
};

const QDISC: Meta = Meta {
    id: "qdisc",
    step: Step::Qdisc,
    title: "root queueing discipline",
    severity: Severity::Low,
    why: "a server answering requests gains nothing from queueing in the kernel; the story measured about +2% with noqueue instead of mq/fq_codel",
    fix: "tc qdisc replace dev IF root noqueue",
};

const GRO_GSO: Meta = Meta {
    id: "gro-gso",
    step: Step::DiminishingReturns,
    title: "GRO / GSO",
    severity: Severity::Low,
    why: "small requests gain nothing from GRO's batching but pay for it; the story measured about +2-4% for GRO off together with reno",
    fix: "ethtool -K IF gro off",
};

/// The feature names `ethtool -k` prints for GRO and GSO.
const GRO: &str = "generic-receive-offload";
const GSO: &str = "generic-segmentation-offload";

/// Runs `per_nic` for every physical NIC, or gives one unknown finding when there is none.
fn each_nic(h: &dyn Host, meta: &Meta, per_nic: impl Fn(&str) -> Finding) -> Vec<Finding> {
    match sources::physical_nics(h) {
        Some(nics) if !nics.is_empty() => nics.iter().map(|n| per_nic(n)).collect(),
        Some(_) => vec![meta.finding(Status::Unknown, "no physical NIC under /sys/class/net")],
        None => vec![meta.finding(Status::Unknown, "no /sys/class/net")],
    }
}

/// The value after `key:` on some line of `text`, trimmed.
fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then_some(v.trim())
    })
}

/// Step 6: is adaptive RX moderation off (a fixed `rx-usecs`)?
pub fn check_coalescing(h: &dyn Host) -> Vec<Finding> {
    each_nic(h, &COALESCING, |nic| {
        let fix = format!("ethtool -C {nic} adaptive-rx off rx-usecs N (choose N by measuring)");
        let Some(out) = h.command(&["ethtool", "-c", nic]) else {
            return COALESCING.finding_on(
                Some(nic),
                Status::Unknown,
                format!(
                    "`ethtool -c {nic}` unavailable (ethtool missing or driver does not report)"
                ),
                fix,
            );
        };
        // "Adaptive RX: on  TX: off"
        let adaptive_rx = field(&out, "Adaptive RX")
            .and_then(|v| v.split_whitespace().next())
            .map(|v| v == "on");
        let rx_usecs = field(&out, "rx-usecs").unwrap_or("?");
        let (status, observed) = match adaptive_rx {
            Some(true) => (Status::Warn, format!("adaptive-rx on, rx-usecs {rx_usecs}")),
            Some(false) => (Status::Ok, format!("adaptive-rx off, rx-usecs {rx_usecs}")),
            None => (
                Status::Unknown,
                format!("no Adaptive RX line; rx-usecs {rx_usecs}"),
            ),
        };
        COALESCING.finding_on(Some(nic), status, observed, fix)
    })
}

/// Step 8: is the root qdisc of each NIC `noqueue`?
pub fn check_qdisc(h: &dyn Host) -> Vec<Finding> {
    let shown = h.command(&["tc", "qdisc", "show"]);
    each_nic(h, &QDISC, |nic| {
        let fix = format!("tc qdisc replace dev {nic} root noqueue");
        let Some(shown) = &shown else {
            return QDISC.finding_on(
                Some(nic),
                Status::Unknown,
                "`tc qdisc show` unavailable (tc missing)",
                fix,
            );
        };
        let on_nic: Vec<Vec<&str>> = shown
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .filter(|t| t.windows(2).any(|w| w == ["dev", nic]))
            .collect();
        let root = on_nic.iter().find(|t| t.contains(&"root"));
        let children: Vec<&str> = on_nic
            .iter()
            .filter(|t| t.contains(&"parent"))
            .filter_map(|t| t.get(1).copied())
            .collect();
        match root.and_then(|t| t.get(1)) {
            None => QDISC.finding_on(
                Some(nic),
                Status::Unknown,
                format!("no root qdisc listed for {nic}"),
                fix,
            ),
            Some(&"noqueue") => QDISC.finding_on(Some(nic), Status::Ok, "root noqueue", fix),
            Some(kind) => {
                let mut observed = format!("root {kind}");
                if !children.is_empty() {
                    let mut kinds = children.clone();
                    kinds.sort_unstable();
                    kinds.dedup();
                    observed +=
                        &format!(" with {} children ({})", children.len(), kinds.join(", "));
                }
                QDISC.finding_on(Some(nic), Status::Warn, observed, fix)
            }
        }
    })
}

/// Step 9: is GRO off? (GSO is reported alongside; the story turned off GRO only.)
pub fn check_gro_gso(h: &dyn Host) -> Vec<Finding> {
    each_nic(h, &GRO_GSO, |nic| {
        let fix = format!("ethtool -K {nic} gro off");
        let Some(out) = h.command(&["ethtool", "-k", nic]) else {
            return GRO_GSO.finding_on(
                Some(nic),
                Status::Unknown,
                format!("`ethtool -k {nic}` unavailable (ethtool missing)"),
                fix,
            );
        };
        let gro = field(&out, GRO);
        let gso = field(&out, GSO);
        let observed = format!("GRO {}, GSO {}", gro.unwrap_or("?"), gso.unwrap_or("?"));
        let status = match gro.and_then(|v| v.split_whitespace().next()) {
            Some("off") => Status::Ok,
            Some("on") => Status::Warn,
            _ => Status::Unknown,
        };
        GRO_GSO.finding_on(Some(nic), status, observed, fix)
    })
}
