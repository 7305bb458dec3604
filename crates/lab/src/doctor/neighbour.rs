//! Step 7, the nosy neighbour: AF_PACKET sockets (`/proc/net/packet`) make the kernel hand
//! every packet to a tap as well. Owners are found by matching socket inodes against
//! `/proc/<pid>/fd/*` links where those are readable; otherwise only the count is reported.

use super::host::Host;
use super::sources;
use super::{Finding, Meta, Severity, Status, Step};

const AF_PACKET: Meta = Meta {
    id: "af-packet",
    step: Step::NosyNeighbour,
    title: "AF_PACKET sockets of other processes",
    severity: Severity::Low,
    why: "each packet is also delivered to every packet socket (a DHCP client's raw socket, tcpdump); the story measured about +5% once it was gone",
    fix: "stop the owner (ss -0 -p lists them), e.g. replace dhclient with a static address or systemd-networkd",
};

/// Step 7: how many packet sockets exist, and whose they are.
pub fn check_af_packet(h: &dyn Host) -> Vec<Finding> {
    let Some(table) = h.read("/proc/net/packet") else {
        return vec![AF_PACKET.finding(Status::Unknown, "/proc/net/packet unreadable")];
    };
    // Header: sk RefCnt Type Proto Iface R Rmem User Inode
    let inodes: Vec<String> = table
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(8).map(str::to_owned))
        .collect();
    if inodes.is_empty() {
        return vec![AF_PACKET.finding(Status::Ok, "no AF_PACKET sockets")];
    }
    let owners = owners_of(h, &inodes);
    let described: Vec<String> = inodes
        .iter()
        .map(|inode| match owners.iter().find(|(i, _)| i == inode) {
            Some((_, owner)) => format!("inode {inode} ({owner})"),
            None => format!("inode {inode} (owner unreadable)"),
        })
        .collect();
    vec![AF_PACKET.finding(
        Status::Bad,
        format!(
            "{} AF_PACKET sockets: {}",
            inodes.len(),
            described.join(", ")
        ),
    )]
}

/// `(inode, "comm pid N")` for every socket inode found behind a readable `/proc/<pid>/fd` link.
fn owners_of(h: &dyn Host, inodes: &[String]) -> Vec<(String, String)> {
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    let mut found = Vec::new();
    for p in sources::processes(h).unwrap_or_default() {
        let dir = format!("/proc/{}/fd", p.pid);
        for fd in h.list(&dir).unwrap_or_default() {
            let Some(target) = h.readlink(&format!("{dir}/{fd}")) else {
                continue;
            };
            if let Some(at) = wanted.iter().position(|w| *w == target) {
                found.push((inodes[at].clone(), format!("{} pid {}", p.comm, p.pid)));
            }
        }
    }
    found
}
