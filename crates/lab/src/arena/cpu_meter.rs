//! A server's CPU time, read where it is exact: a cgroup of the server's own (cgroup v1's
//! `cpuacct.usage`, nanoseconds, or v2's `cpu.stat` `usage_usec`), which is what HttpArena
//! reads of its containers; else /proc's utime + stime of its processes, in clock ticks
//! (10 ms each at USER_HZ 100).
//!
//! Ticks are fine for a loaded server (5 s at 30 % of a CPU is 150 of them) and useless for a
//! paced one: latency-10k scaled to 2 CPUs is 313 req/s, about 15 ms of CPU a second, so a
//! 5 s run is 7 ticks, and every server read 44.79 µs a request. Making a cgroup needs a
//! writable cgroup file system (root, or a delegated subtree); without one the arena says that
//! its CPU figures are ticks.
//!
//! The cgroup is made under the arena's own cgroup, the server's processes are moved into it
//! once started (what they fork later is born there), and it is removed when the meter is
//! dropped, once they have exited.
//!
//! A server may still be forking when it is moved: nginx's master accepts connections (the
//! arena's sign that it is up) before its workers exist. A worker forked after the list of
//! the group's processes was read, but before its master was moved, stays outside, and its
//! CPU would be missed (nginx read 0.0 µs a request in one `.ci/run` here). So the list is read
//! again after each move, until one reading finds nothing new: by then every process the
//! group has is inside, and what they fork is born there.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// How often, and how long apart, removing the cgroup is tried while its processes exit.
const REMOVE_TRIES: u32 = 50;
const REMOVE_PAUSE: Duration = Duration::from_millis(20);
/// Most readings of a server's processes while moving them (each after the last one's moves).
const MOVE_PASSES: u32 = 20;

/// Numbers the meters this process makes, so that two at once (tests run side by side) never
/// share a cgroup's name.
static SERIAL: AtomicU32 = AtomicU32::new(0);

/// Where a server's CPU time is read.
#[derive(Debug)]
pub struct Meter {
    dir: PathBuf,
    v2: bool,
}

impl Meter {
    /// A cgroup of its own, named after `tag`, holding the processes `pids` lists (each with
    /// its threads), read again after each move until nothing new comes; None where none can
    /// be made (no writable cgroup file system), a process cannot be moved, or the server
    /// never stops forking new processes within `MOVE_PASSES` readings.
    pub fn attach(tag: &str, pids: impl Fn() -> Vec<u32>) -> Option<Meter> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let (root, v2) = pick(&mountinfo, &own)?;
        let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
        let dir = root.join(format!(
            "linerate-arena-{}-{serial}-{tag}",
            std::process::id()
        ));
        std::fs::create_dir(&dir).ok()?;
        let meter = Meter { dir, v2 };
        let mut moved = BTreeSet::new();
        for _ in 0..MOVE_PASSES {
            let new: Vec<u32> = pids().into_iter().filter(|p| !moved.contains(p)).collect();
            if new.is_empty() {
                return meter.usage_ns().map(|_| meter);
            }
            for pid in new {
                match std::fs::write(meter.dir.join("cgroup.procs"), pid.to_string()) {
                    Ok(()) => {}
                    // Gone since it was listed (a process that exits on its own at start).
                    Err(e) if e.raw_os_error() == Some(rustix::io::Errno::SRCH.raw_os_error()) => {}
                    Err(_) => return None,
                }
                moved.insert(pid);
            }
        }
        None
    }

    /// The CPU time of everything in the cgroup so far, nanoseconds.
    pub fn usage_ns(&self) -> Option<u64> {
        if self.v2 {
            let text = std::fs::read_to_string(self.dir.join("cpu.stat")).ok()?;
            usage_usec(&text).map(|us| us * 1000)
        } else {
            std::fs::read_to_string(self.dir.join("cpuacct.usage"))
                .ok()?
                .trim()
                .parse()
                .ok()
        }
    }
}

impl Drop for Meter {
    /// Removes the cgroup once its processes are gone (the caller stops them first); one left
    /// behind, if they outlive the tries, is empty and harmless.
    fn drop(&mut self) {
        for _ in 0..REMOVE_TRIES {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(REMOVE_PAUSE);
        }
    }
}

/// The directory of this process's cgroup in the hierarchy that accounts CPU time: v1's
/// `cpuacct` when mounted, else the v2 (unified) one; and whether it is v2.
fn pick(mountinfo: &str, own: &str) -> Option<(PathBuf, bool)> {
    let mut v2 = None;
    for line in mountinfo.lines() {
        // "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER"
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let fields: Vec<&str> = left.split(' ').collect();
        let mut after = right.split(' ');
        let fstype = after.next().unwrap_or("");
        let supers = after.nth(1).unwrap_or("");
        let (Some(root), Some(point)) = (fields.get(3), fields.get(4)) else {
            continue;
        };
        if fstype == "cgroup" && supers.split(',').any(|o| o == "cpuacct") {
            let own = own_path(own, |c| c.split(',').any(|c| c == "cpuacct"))?;
            return Some((under(point, root, &own), false));
        }
        if fstype == "cgroup2" && v2.is_none() {
            let own = own_path(own, str::is_empty)?;
            v2 = Some((under(point, root, &own), true));
        }
    }
    v2
}

/// This process's path in the hierarchy whose controllers `is` matches (/proc/self/cgroup:
/// "ID:CONTROLLERS:PATH", v2's with no controllers).
fn own_path(text: &str, is: impl Fn(&str) -> bool) -> Option<String> {
    text.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
        is(controllers).then(|| path.to_string())
    })
}

/// The directory of cgroup `path` in a mount of the hierarchy's `root` at `point`.
fn under(point: &str, root: &str, path: &str) -> PathBuf {
    let rel = path.strip_prefix(root).unwrap_or(path);
    Path::new(point).join(rel.trim_start_matches('/'))
}

/// `usage_usec` of a v2 `cpu.stat`.
fn usage_usec(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
30 25 0:26 / /sys/fs/cgroup/unified rw,relatime shared:10 - cgroup2 cgroup2 rw
33 25 0:29 / /sys/fs/cgroup/cpu rw,relatime shared:13 - cgroup cgroup rw,cpu
34 25 0:30 / /sys/fs/cgroup/cpuacct rw,relatime shared:14 - cgroup cgroup rw,cpuacct
";

    /// v1's cpuacct hierarchy is preferred where mounted (its usage is in nanoseconds), at
    /// this process's own path in it; v2 otherwise, at the path of its `0::` line.
    #[test]
    fn the_accounting_hierarchy_and_this_process_path_in_it() {
        let own = "4:memory:/a/b\n2:cpuacct:/lab\n0::/user.slice/x\n";
        assert_eq!(
            pick(HYBRID, own),
            Some((PathBuf::from("/sys/fs/cgroup/cpuacct/lab"), false))
        );
        let only_v2 = "30 25 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n";
        assert_eq!(
            pick(only_v2, "0::/user.slice/x\n"),
            Some((PathBuf::from("/sys/fs/cgroup/user.slice/x"), true))
        );
        // A combined cpu,cpuacct mount, seen from a container whose root is its own cgroup.
        let combined =
            "40 25 0:31 /docker/abc /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n";
        assert_eq!(
            pick(combined, "3:cpu,cpuacct:/docker/abc\n"),
            Some((PathBuf::from("/sys/fs/cgroup/cpu,cpuacct"), false))
        );
        assert_eq!(pick("", own), None);
    }

    #[test]
    fn v2_usage_is_read_in_microseconds() {
        let stat = "usage_usec 12345\nuser_usec 10000\nsystem_usec 2345\n";
        assert_eq!(usage_usec(stat), Some(12345));
        assert_eq!(usage_usec("user_usec 1\n"), None);
    }

    /// Whether a cgroup can be made here (where the meters make theirs).
    fn writable() -> bool {
        let read = |p| std::fs::read_to_string(p).unwrap_or_default();
        let Some((root, _)) = pick(&read("/proc/self/mountinfo"), &read("/proc/self/cgroup"))
        else {
            return false;
        };
        let probe = root.join(format!("linerate-arena-probe-{}", std::process::id()));
        std::fs::create_dir(&probe).is_ok() && std::fs::remove_dir(&probe).is_ok()
    }

    /// A process that appears between one reading of the list and the move (as a worker
    /// forked while its master is moved) is moved by the next reading; two meters at once
    /// get cgroups of their own.
    #[test]
    fn a_process_listed_late_is_moved_too() {
        let spawn = || {
            std::process::Command::new("sleep")
                .arg("30")
                .spawn()
                .expect("sleep")
        };
        let mut first = spawn();
        let late = std::cell::RefCell::new(None::<std::process::Child>);
        let first_pid = first.id();
        let list = || {
            let mut late = late.borrow_mut();
            let mut pids = vec![first_pid];
            match late.as_ref() {
                // The first reading: the second process starts just after it.
                None => *late = Some(spawn()),
                Some(c) => pids.push(c.id()),
            }
            pids
        };
        let meter = Meter::attach("late-test", list);
        let other = Meter::attach("late-test", || vec![first_pid]);
        let mut late = late.into_inner().expect("started on the first reading");
        let in_meter = |m: &Meter, pid: u32| {
            std::fs::read_to_string(m.dir.join("cgroup.procs"))
                .unwrap_or_default()
                .lines()
                .any(|l| l == pid.to_string())
        };
        let (moved_late, distinct) = match (&meter, &other) {
            (Some(m), Some(o)) => (in_meter(m, late.id()), m.dir != o.dir),
            _ if !writable() => {
                println!("NOT RUN: no writable cgroup file system here");
                (true, true)
            }
            (m, _) => (m.as_ref().is_some_and(|m| in_meter(m, late.id())), true),
        };
        for c in [&mut first, &mut late] {
            let _ = c.kill();
            let _ = c.wait();
        }
        drop((meter, other));
        assert!(moved_late, "the process listed late was left outside");
        assert!(distinct, "two meters shared a cgroup");
    }
}
