//! Runs a configuration: a pre-flight connection, the warm-up phase, then each measured run with
//! one pinned thread per share of the connections. Owns threads, pinning and the progress line;
//! it does no socket work itself (that is `worker`) and formats nothing but the progress line.
//! A run that ends early (Ctrl-C, the target gone) is kept and returned like any other, marked
//! interrupted, and no further run starts: what was measured is never thrown away.
#![forbid(unsafe_code)]

use std::fmt;
use std::io::{IsTerminal, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::stats::{Interruption, Merged, ThreadStats, merge};
use crate::tls::{self, SetupFailure};
use crate::worker::{self, Plan, Progress, Stops, WorkerError};

/// How often the progress line is redrawn.
pub const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);
/// How often the main thread checks whether the workers are done.
const JOIN_POLL: Duration = Duration::from_millis(20);

/// Why a run could not be made.
#[derive(Debug)]
pub enum EngineError {
    Connect(std::net::SocketAddr, std::io::Error),
    /// The pre-flight TLS handshake failed.
    Handshake(std::net::SocketAddr, SetupFailure),
    Pin(usize, rustix::io::Errno),
    Spawn(std::io::Error),
    Worker(WorkerError),
    /// Stopped (Ctrl-C) before the first measured run began: nothing was measured.
    Interrupted,
    /// The target went away during the warm-up, before anything was measured.
    LostInWarmup(String),
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineError::Connect(a, e) => write!(f, "cannot connect to {a}: {e}"),
            EngineError::Handshake(a, e) => write!(f, "cannot connect to {a}: {e}"),
            EngineError::Pin(cpu, e) => write!(f, "cannot pin a thread to CPU {cpu}: {e}"),
            EngineError::Spawn(e) => write!(f, "cannot start a thread: {e}"),
            EngineError::Worker(e) => e.fmt(f),
            EngineError::Interrupted => {
                f.write_str("interrupted during the warm-up: nothing was measured")
            }
            EngineError::LostInWarmup(why) => {
                write!(f, "the target went away during the warm-up: {why}")
            }
        }
    }
}

impl std::error::Error for EngineError {}

/// The result of one measured run.
#[derive(Debug)]
pub struct RunResult {
    pub merged: Merged,
}

/// Checks that the target accepts a TCP connection (and, for https, a TLS handshake; with
/// `--http3`, a QUIC handshake instead), so that an unreachable host or a refused certificate
/// is one clear error before anything is printed.
pub fn preflight(cfg: &Config) -> Result<(), EngineError> {
    let addr = cfg.target.addr;
    if let Some(h) = &cfg.http3 {
        // QUIC: a UDP exchange; the server may not listen on TCP at all.
        return worker::quic_preflight(h, addr, cfg.timeout)
            .map_err(|e| EngineError::Handshake(addr, e));
    }
    let sock = TcpStream::connect_timeout(&addr, cfg.timeout)
        .map_err(|e| EngineError::Connect(addr, e))?;
    if let Some(t) = &cfg.tls {
        tls::preflight(t, sock, cfg.timeout).map_err(|e| EngineError::Handshake(addr, e))?;
    }
    Ok(())
}

/// Warms up, then makes `cfg.runs` measured runs. `on_run` sees each run as it finishes.
/// Once `stop` is set (Ctrl-C), the phase in progress ends at the next tick and is reported;
/// no further run starts.
pub fn execute(
    cfg: &Config,
    stop: &AtomicBool,
    mut on_run: impl FnMut(usize, &RunResult),
) -> Result<Vec<RunResult>, EngineError> {
    let show_progress = !cfg.json && std::io::stderr().is_terminal();
    if !cfg.warmup.is_zero() {
        let warm = run_phase(
            cfg,
            stop,
            Some(cfg.warmup),
            None,
            show_progress.then_some("warm-up"),
        )?;
        if let Some(Interruption::TargetLost(why)) = merge(warm).interrupted {
            return Err(EngineError::LostInWarmup(why));
        }
    }
    let mut out = Vec::with_capacity(cfg.runs);
    for r in 0..cfg.runs {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let stats = run_phase(
            cfg,
            stop,
            cfg.duration,
            cfg.requests,
            show_progress.then_some("run"),
        )?;
        let result = RunResult {
            merged: merge(stats),
        };
        on_run(r, &result);
        let early = result.merged.interrupted.is_some();
        out.push(result);
        if early {
            break;
        }
    }
    if out.is_empty() {
        return Err(EngineError::Interrupted);
    }
    Ok(out)
}

/// One phase: every thread runs until `duration` passes or its share of `requests` resolves.
fn run_phase(
    cfg: &Config,
    stop: &AtomicBool,
    duration: Option<Duration>,
    requests: Option<u64>,
    progress_label: Option<&str>,
) -> Result<Vec<ThreadStats>, EngineError> {
    let plans: Vec<Plan> = (0..cfg.threads)
        .map(|t| Plan {
            thread: t,
            connections: cfg.connections_of(t),
            first_connection: cfg.first_connection_of(t),
            // Exact total: the first threads take the remainder.
            budget: requests
                .map(|n| n / cfg.threads as u64 + u64::from((t as u64) < n % cfg.threads as u64)),
            rate: cfg.rate.map(|r| r / cfg.threads as f64),
            duration,
        })
        .collect();
    let progress: Vec<Progress> = (0..cfg.threads).map(|_| Progress::default()).collect();
    let phase_stop = AtomicBool::new(false);
    let stops = Stops {
        user: stop,
        phase: &phase_stop,
    };
    let base = Instant::now();
    std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(plans.len());
        for plan in &plans {
            let cpu = (!cfg.cpus.is_empty()).then(|| cfg.cpus[plan.thread % cfg.cpus.len()]);
            let cell = &progress[plan.thread];
            let h = std::thread::Builder::new()
                .name(format!("load-{}", plan.thread))
                .spawn_scoped(s, move || {
                    if let Some(cpu) = cpu {
                        pin(cpu)?;
                    }
                    worker::run(cfg, plan, base, cell, stops).map_err(EngineError::Worker)
                })
                .map_err(EngineError::Spawn)?;
            handles.push(h);
        }
        if let Some(label) = progress_label {
            let mut next = base + PROGRESS_INTERVAL;
            while !handles.iter().all(|h| h.is_finished()) {
                std::thread::sleep(JOIN_POLL);
                if Instant::now() >= next {
                    draw_progress(label, base, &progress);
                    next += PROGRESS_INTERVAL;
                }
            }
            eprint!("\r\x1b[2K");
        }
        handles
            .into_iter()
            .map(|h| h.join().expect("worker thread panicked"))
            .collect()
    })
}

fn pin(cpu: usize) -> Result<(), EngineError> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set).map_err(|e| EngineError::Pin(cpu, e))
}

fn draw_progress(label: &str, base: Instant, cells: &[Progress]) {
    let secs = base.elapsed().as_secs_f64();
    let done: u64 = cells
        .iter()
        .map(|c| c.responses.load(std::sync::atomic::Ordering::Relaxed))
        .sum();
    let errors: u64 = cells
        .iter()
        .map(|c| c.errors.load(std::sync::atomic::Ordering::Relaxed))
        .sum();
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "\r\x1b[2K{label} {secs:.1}s  {:.0} req/s  {errors} errors",
        done as f64 / secs.max(1e-9)
    );
    let _ = err.flush();
}
