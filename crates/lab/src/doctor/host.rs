//! What the audit may look at: a [`Host`] reads files, lists directories, reads links and runs
//! a few read-only commands. [`SystemHost`] is this machine; [`FixtureHost`] is a directory tree
//! standing in for `/proc`, `/sys` and `/lib/modules`, with canned command outputs, so every
//! check can be tested without the host. Invariant: nothing here writes anything anywhere; a
//! missing file, directory or command is `None`, never an error.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::parse;

/// How long a command may run before it is killed and counted as unavailable.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a running command is polled for exit.
const COMMAND_POLL: Duration = Duration::from_millis(10);
/// Where a command is looked for when `PATH` does not find it (sbin is often not on a user's PATH).
const SBIN_DIRS: &[&str] = &["/usr/sbin", "/sbin", "/usr/bin", "/bin"];

/// The soft and hard `RLIMIT_NOFILE`; `None` in either place means unlimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NofileLimit {
    pub soft: Option<u64>,
    pub hard: Option<u64>,
}

/// A read-only view of a host. Paths are absolute (`/proc/...`).
pub trait Host {
    /// The whole file as text, or `None` when it is missing or unreadable.
    fn read(&self, path: &str) -> Option<String>;
    /// The names in a directory, sorted, or `None` when it is missing or unreadable.
    fn list(&self, dir: &str) -> Option<Vec<String>>;
    /// The target of a symbolic link, or `None`.
    fn readlink(&self, path: &str) -> Option<String>;
    /// The standard output of a command that exited with status 0, or `None` when the command is
    /// missing, failed or timed out.
    fn command(&self, argv: &[&str]) -> Option<String>;
    /// The CPUs the server would run on: the `--cpus` override, else this process's allowed CPUs.
    fn server_cpus(&self) -> Option<Vec<usize>>;
    /// This process's open-file limit.
    fn nofile_limit(&self) -> Option<NofileLimit>;
}

/// This machine, through `/proc`, `/sys`, real commands and real syscalls.
#[derive(Clone, Debug, Default)]
pub struct SystemHost {
    cpus: Option<Vec<usize>>,
}

impl SystemHost {
    /// The host as it is; the server CPUs are this process's allowed CPUs.
    pub fn new() -> SystemHost {
        SystemHost::default()
    }

    /// The host, auditing for a server that will run on `cpus`.
    pub fn with_cpus(cpus: Vec<usize>) -> SystemHost {
        SystemHost { cpus: Some(cpus) }
    }
}

impl Host for SystemHost {
    fn read(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(path).ok()
    }

    fn list(&self, dir: &str) -> Option<Vec<String>> {
        list_dir(Path::new(dir))
    }

    fn readlink(&self, path: &str) -> Option<String> {
        let target = std::fs::read_link(path).ok()?;
        Some(target.to_string_lossy().into_owned())
    }

    fn command(&self, argv: &[&str]) -> Option<String> {
        let (program, args) = argv.split_first()?;
        let candidates = std::iter::once(PathBuf::from(program))
            .chain(SBIN_DIRS.iter().map(|dir| Path::new(dir).join(program)));
        for candidate in candidates {
            match run_with_timeout(&candidate, args) {
                Ok(output) => return output,
                // Not found under this name: try the next directory.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(_) => return None,
            }
        }
        None
    }

    fn server_cpus(&self) -> Option<Vec<usize>> {
        if let Some(cpus) = &self.cpus {
            return Some(cpus.clone());
        }
        let set = rustix::thread::sched_getaffinity(None).ok()?;
        Some(
            (0..rustix::thread::CpuSet::MAX_CPU)
                .filter(|&cpu| set.is_set(cpu))
                .collect(),
        )
    }

    fn nofile_limit(&self) -> Option<NofileLimit> {
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        Some(NofileLimit {
            soft: limit.current,
            hard: limit.maximum,
        })
    }
}

/// Runs `program args…` with stdin closed and stderr discarded. `Err` only when it could not be
/// started; `Ok(None)` when it failed or ran past [`COMMAND_TIMEOUT`] (then it is killed).
fn run_with_timeout(program: &Path, args: &[&str]) -> std::io::Result<Option<String>> {
    let mut child = Command::new(program)
        .args(args)
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    // Read on a thread so a chatty command cannot block on a full pipe while we poll.
    let mut stdout = child.stdout.take();
    let reader = thread::spawn(move || {
        let mut text = String::new();
        if let Some(out) = stdout.as_mut() {
            let _ = out.read_to_string(&mut text);
        }
        text
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() < COMMAND_TIMEOUT => thread::sleep(COMMAND_POLL),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let text = reader.join().unwrap_or_default();
    Ok(status.filter(|s| s.success()).map(|_| text))
}

/// A directory tree standing in for a host: `ROOT/proc`, `ROOT/sys`, `ROOT/lib/modules`, and
/// `ROOT/commands/<argv joined by '_'>` holding each command's output (no file: the command is
/// missing). The server CPUs come from `Cpus_allowed_list` in `ROOT/proc/self/status` and the
/// open-file limit from `ROOT/proc/self/limits`, unless overridden.
#[derive(Clone, Debug)]
pub struct FixtureHost {
    root: PathBuf,
    cpus: Option<Vec<usize>>,
}

impl FixtureHost {
    /// A host whose files and command outputs live under `root`.
    pub fn new(root: impl Into<PathBuf>) -> FixtureHost {
        FixtureHost {
            root: root.into(),
            cpus: None,
        }
    }

    /// The same tree, auditing for a server that will run on `cpus`.
    pub fn with_cpus(self, cpus: Vec<usize>) -> FixtureHost {
        FixtureHost {
            cpus: Some(cpus),
            ..self
        }
    }

    /// The fixture file name for a command line: `ip route show` → `ip_route_show`.
    pub fn command_file(argv: &[&str]) -> String {
        argv.join("_").replace('/', "_")
    }

    fn path(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }
}

impl Host for FixtureHost {
    fn read(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(self.path(path)).ok()
    }

    fn list(&self, dir: &str) -> Option<Vec<String>> {
        list_dir(&self.path(dir))
    }

    fn readlink(&self, path: &str) -> Option<String> {
        let target = std::fs::read_link(self.path(path)).ok()?;
        Some(target.to_string_lossy().into_owned())
    }

    fn command(&self, argv: &[&str]) -> Option<String> {
        let file = self.root.join("commands").join(Self::command_file(argv));
        std::fs::read_to_string(file).ok()
    }

    fn server_cpus(&self) -> Option<Vec<usize>> {
        if let Some(cpus) = &self.cpus {
            return Some(cpus.clone());
        }
        let status = self.read("/proc/self/status")?;
        parse::cpu_list(parse::status_field(&status, "Cpus_allowed_list")?)
    }

    fn nofile_limit(&self) -> Option<NofileLimit> {
        parse::nofile_from_limits(&self.read("/proc/self/limits")?)
    }
}

fn list_dir(dir: &Path) -> Option<Vec<String>> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|entry| Some(entry.ok()?.file_name().to_string_lossy().into_owned()))
        .collect();
    names.sort();
    Some(names)
}
