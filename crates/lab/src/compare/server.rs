//! One server under test: started pinned, in its own process group, on a fresh port; watched;
//! stopped with its whole tree.
//!
//! Pinning needs no `taskset` and no unsafe `pre_exec`: the child is spawned from a short-lived
//! thread whose own CPU affinity is set first, and a forked child inherits its parent thread's
//! mask. Everything that can wait has a deadline, so a server that never listens or dies
//! mid-run is reported instead of hung on.

use std::collections::BTreeMap;
use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use rustix::process::{Pid, Signal, kill_process_group};

use super::suite::{ServerSpec, expand, render_template};

/// How long a stopping server gets after SIGTERM before SIGKILL (a draining linerate waits for
/// in-flight requests; nothing is in flight when the lab stops it).
pub const STOP_GRACE: Duration = Duration::from_secs(3);
/// Interval between readiness probes.
const READY_POLL: Duration = Duration::from_millis(25);
/// Bytes of the server's output kept for error messages.
const OUTPUT_TAIL: usize = 1500;

/// A running server.
pub struct Running {
    pub name: String,
    pub port: u16,
    /// A second free port offered to the command as `{tls_port}` (HTTPS workloads use it).
    pub tls_port: u16,
    child: Child,
    rundir: PathBuf,
    output: PathBuf,
}

/// Asks the kernel for a free loopback port (closed again; the server binds it right after).
pub fn free_port() -> anyhow::Result<u16> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(l.local_addr()?.port())
}

/// Runs `f` on a thread pinned to `cpus`; what it spawns inherits that affinity.
pub fn on_cpus<T: Send>(
    cpus: &[usize],
    f: impl FnOnce() -> anyhow::Result<T> + Send,
) -> anyhow::Result<T> {
    let mut set = rustix::thread::CpuSet::new();
    for &c in cpus {
        set.set(c);
    }
    std::thread::scope(|s| {
        s.spawn(move || {
            rustix::thread::sched_setaffinity(None, &set)
                .with_context(|| format!("cannot pin to CPUs {cpus:?}"))?;
            f()
        })
        .join()
        .unwrap_or_else(|_| bail!("pinned spawner thread panicked"))
    })
}

/// A program name is on PATH (or is a path that exists).
pub fn on_path(program: &str) -> bool {
    if program.contains('/') {
        return std::path::Path::new(program).exists();
    }
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

/// Starts `spec` pinned to `cpus`, with `vars` (plus port, rundir, config) for its placeholders,
/// and waits until it accepts connections.
pub fn start(
    spec: &ServerSpec,
    vars: &BTreeMap<String, String>,
    cpus: &[usize],
    start_timeout: Duration,
) -> anyhow::Result<Running> {
    let port = free_port()?;
    let tls_port = free_port()?;
    let rundir = std::env::temp_dir().join(format!(
        "linerate-lab-{}-{}-{port}",
        std::process::id(),
        spec.name
    ));
    std::fs::create_dir_all(&rundir)
        .with_context(|| format!("cannot create {}", rundir.display()))?;
    let mut vars = vars.clone();
    vars.insert("port".into(), port.to_string());
    vars.insert("tls_port".into(), tls_port.to_string());
    vars.insert("rundir".into(), rundir.display().to_string());
    if let Some(t) = &spec.config_template {
        let text = super::templates::text(t).with_context(|| format!("server {}", spec.name))?;
        let conf = rundir.join("server.conf");
        std::fs::write(&conf, render_template(&text, &vars))?;
        vars.insert("config".into(), conf.display().to_string());
    }
    let argv: Vec<String> = spec
        .command
        .iter()
        .map(|a| expand(a, &vars))
        .collect::<anyhow::Result<_>>()
        .with_context(|| format!("server {}", spec.name))?;
    let output = rundir.join("output.log");
    let log = File::create(&output)?;
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0);
    for (k, v) in &spec.env {
        cmd.env(k, expand(v, &vars)?);
    }
    let child = on_cpus(cpus, || {
        cmd.spawn()
            .with_context(|| format!("server {}: cannot run {:?}", spec.name, argv[0]))
    });
    let child = match child {
        Ok(c) => c,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&rundir);
            return Err(e);
        }
    };
    let mut running = Running {
        name: spec.name.clone(),
        port,
        tls_port,
        child,
        rundir,
        output,
    };
    if let Err(e) = running.wait_ready(start_timeout) {
        running.stop();
        return Err(e);
    }
    Ok(running)
}

impl Running {
    pub fn pgrp(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// Where a workload connects: the `{tls_port}` for HTTPS ones.
    pub fn addr_for(&self, tls: bool) -> SocketAddr {
        SocketAddr::from((
            Ipv4Addr::LOCALHOST,
            if tls { self.tls_port } else { self.port },
        ))
    }

    fn wait_ready(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(why) = self.exited() {
                bail!("server {} {why} before accepting connections", self.name);
            }
            if TcpStream::connect_timeout(&self.addr(), READY_POLL * 4).is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "server {} did not accept on port {} within {:?}; output: {}",
                    self.name,
                    self.port,
                    timeout,
                    self.output_tail()
                );
            }
            std::thread::sleep(READY_POLL);
        }
    }

    /// `Some("exited with …; output: …")` once the server's main process has ended.
    pub fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(format!("exited ({status}); output: {}", self.output_tail())),
            Ok(None) => None,
            Err(e) => Some(format!("cannot be waited for: {e}")),
        }
    }

    /// The last bytes the server printed, on one line.
    pub fn output_tail(&self) -> String {
        let text = std::fs::read(&self.output).unwrap_or_default();
        let text = String::from_utf8_lossy(&text[text.len().saturating_sub(OUTPUT_TAIL)..]);
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if text.is_empty() {
            "(none)".into()
        } else {
            text
        }
    }

    /// SIGTERM to the group, SIGKILL after [`STOP_GRACE`], then SIGKILL to any straggler.
    /// Returns whether the main process exited on SIGTERM.
    pub fn stop(self) -> bool {
        self.stop_within(STOP_GRACE)
    }

    /// Stops like [`Running::stop`], allowing `grace` after SIGTERM (callgrind writes its
    /// profile then).
    pub fn stop_within(mut self, grace: Duration) -> bool {
        let graceful = self.terminate(grace);
        let _ = std::fs::remove_dir_all(&self.rundir);
        graceful
    }

    fn terminate(&mut self, grace: Duration) -> bool {
        let pgrp = Pid::from_child(&self.child);
        let mut graceful = false;
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = kill_process_group(pgrp, Signal::TERM);
            let deadline = Instant::now() + grace;
            while Instant::now() < deadline {
                if matches!(self.child.try_wait(), Ok(Some(_))) {
                    graceful = true;
                    break;
                }
                std::thread::sleep(READY_POLL);
            }
        }
        let _ = kill_process_group(pgrp, Signal::KILL);
        let _ = self.child.wait();
        graceful
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // Only reached on error paths that did not call stop: never leave a server behind.
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = kill_process_group(Pid::from_child(&self.child), Signal::KILL);
            let _ = self.child.wait();
        }
    }
}
