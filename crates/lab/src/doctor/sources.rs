//! Readers shared by several checks, built on [`Host`]: sysctl values, the process table
//! (`/proc/<pid>/comm`) and the physical NICs (`/sys/class/net/*` with a `device` link). They
//! only read; anything unreadable is `None` so the caller can say "unknown".

use super::host::Host;
use super::parse;

/// One process: its pid and `comm` (the kernel's 15-byte name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Process {
    pub pid: u32,
    pub comm: String,
}

/// A sysctl as text, read from `/proc/sys` (`net.core.somaxconn` → `/proc/sys/net/core/somaxconn`).
pub fn sysctl(h: &dyn Host, name: &str) -> Option<String> {
    let path = format!("/proc/sys/{}", name.replace('.', "/"));
    Some(h.read(&path)?.trim().to_owned())
}

/// A numeric sysctl.
pub fn sysctl_number(h: &dyn Host, name: &str) -> Option<u64> {
    parse::number(&sysctl(h, name)?)
}

/// Every process whose `comm` can be read, in pid order; `None` when `/proc` cannot be listed.
pub fn processes(h: &dyn Host) -> Option<Vec<Process>> {
    let mut pids: Vec<u32> = h
        .list("/proc")?
        .iter()
        .filter_map(|name| name.parse().ok())
        .collect();
    pids.sort_unstable();
    Some(
        pids.into_iter()
            .filter_map(|pid| {
                let comm = h.read(&format!("/proc/{pid}/comm"))?;
                Some(Process {
                    pid,
                    comm: comm.trim().to_owned(),
                })
            })
            .collect(),
    )
}

/// The processes named `comm`, or `None` when `/proc` cannot be listed.
pub fn find_processes(h: &dyn Host, comm: &str) -> Option<Vec<Process>> {
    Some(
        processes(h)?
            .into_iter()
            .filter(|p| p.comm == comm)
            .collect(),
    )
}

/// Network interfaces backed by a device (`/sys/class/net/IF/device` exists): real or
/// para-virtual NICs, not `lo`, bridges, veths or ifbs. `None` when `/sys/class/net` is missing.
pub fn physical_nics(h: &dyn Host) -> Option<Vec<String>> {
    Some(
        h.list("/sys/class/net")?
            .into_iter()
            .filter(|nic| nic != "lo")
            .filter(|nic| {
                h.readlink(&format!("/sys/class/net/{nic}/device"))
                    .is_some()
            })
            .collect(),
    )
}

/// The queue directories of a NIC with a prefix (`rx-` or `tx-`), ordered by queue number.
pub fn nic_queues(h: &dyn Host, nic: &str, prefix: &str) -> Vec<String> {
    let mut queues: Vec<String> = h
        .list(&format!("/sys/class/net/{nic}/queues"))
        .unwrap_or_default()
        .into_iter()
        .filter(|q| q.starts_with(prefix))
        .collect();
    queues.sort_by_key(|q| parse::trailing_number(q));
    queues
}

/// The kernel release (`uname -r`), from `/proc/sys/kernel/osrelease`.
pub fn kernel_release(h: &dyn Host) -> Option<String> {
    sysctl(h, "kernel.osrelease")
}
