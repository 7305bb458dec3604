//! `linerate lab cache`: Redis against memcached, measured the same way with the same client
//! and objects, to choose the proxy cache's second tier.
//!
//! For each round, in an order that rotates by round: every GET and SET workload (one per value
//! size) on every server, each sample on a freshly started server pinned to the server CPUs (a
//! GET workload first stores its keys); then memory per stored object (one fill of `objects`
//! objects of the smallest size) and behaviour at a small memory limit (cache-aside GETs under
//! Zipf). Files: `codec`, `resp`, `meta` (the protocols, sans I/O), `keys` (key choice),
//! `client` (the load loop), `admin` (the servers' counters), `servers` (what is started),
//! `report` (the phases' records and the Markdown and charts beyond `compare`'s).

pub mod admin;
pub mod client;
pub mod codec;
pub mod keys;
pub mod meta;
pub mod report;
pub mod resp;
pub mod servers;

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};

use crate::compare::report::{Record, Setup, WorkloadResult};
use crate::compare::stats::{Measured, Outcome, Sample};
use crate::compare::{machine, procfs, server, stats};
use client::{Job, Mix, Until};
use codec::Op;
use keys::Keys;
use report::{CacheRecord, EvictionSample, MemorySample};
use servers::{CacheServer, Programs};

/// Value sizes measured by default: a small object, a page, a large fragment.
pub const DEFAULT_SIZES: [usize; 3] = [100, 4096, 65536];
/// How long filling the memory run's objects may take before the sample fails.
pub const FILL_LIMIT: Duration = Duration::from_secs(600);
/// Connections and pipeline depth of the fills (not measured: only fast).
const FILL_CONNECTIONS: usize = 8;
const FILL_PIPELINE: usize = 32;
/// Values up to this size are offered `--latency-rate` requests per second in the latency
/// runs; larger ones the same bytes per second (a 64 KiB GET at 20k/s is 1.3 GB/s, past what
/// one core serves, and latency past saturation measures only the queue's growth).
pub const FULL_RATE_MAX_VALUE: usize = 4096;
/// The run at the limit first stores this percentage of its limit in objects, so that the
/// server is full (and evicting) when the measured run starts.
pub const FILL_PAST_LIMIT_PERCENT: u64 = 150;
/// How long a server gets to accept connections after it is started.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Options of `linerate lab cache` (the binary fills them from its flags).
#[derive(Clone, Debug)]
pub struct CacheArgs {
    /// Only these servers (from `memcached-tN`, `redis`, `redis-ioN`).
    pub servers: Vec<String>,
    /// Value sizes of the GET/SET workloads, bytes.
    pub sizes: Vec<usize>,
    /// Objects stored for the memory-per-object figure.
    pub objects: u64,
    /// Keys the GET/SET workloads use (all stored before a GET run).
    pub keys: u64,
    pub rounds: usize,
    pub duration: Duration,
    pub warmup: Duration,
    /// Offered rate of the latency runs (none: no latency runs).
    pub latency_rate: Option<f64>,
    pub connections: usize,
    /// Requests in flight per connection.
    pub pipeline: usize,
    /// memcached's threads and Redis's I/O threads [default: the server CPUs]; never more
    /// than the server CPUs (see [`CacheArgs::threads`]).
    pub threads: Option<usize>,
    pub server_cpus: Vec<usize>,
    pub load_cpus: Vec<usize>,
    /// The memory limit of the GET/SET and memory runs, MB.
    pub memory_mb: u64,
    /// The memory limit of the eviction run, MB.
    pub limit_mb: u64,
    /// The eviction run's Zipf exponent, over `objects` keys.
    pub zipf: f64,
    /// The eviction run's value size, bytes.
    pub evict_value_bytes: usize,
    pub programs: Programs,
    /// Output directory (default: `lab-out/cache-<UTC date-time>`).
    pub out: Option<PathBuf>,
}

impl Default for CacheArgs {
    fn default() -> CacheArgs {
        CacheArgs {
            servers: Vec::new(),
            sizes: DEFAULT_SIZES.to_vec(),
            objects: 1_000_000,
            keys: 1000,
            rounds: 3,
            duration: Duration::from_secs(5),
            warmup: Duration::from_secs(1),
            latency_rate: Some(20_000.0),
            connections: 32,
            pipeline: 1,
            threads: None,
            server_cpus: vec![0],
            load_cpus: vec![1],
            memory_mb: 1024,
            limit_mb: 64,
            zipf: 0.99,
            evict_value_bytes: 4096,
            programs: Programs::default(),
            out: None,
        }
    }
}

impl CacheArgs {
    /// memcached's threads and Redis's I/O threads: `threads`, or as many as the server CPUs.
    /// A threaded server gets a CPU for each of its threads: Redis's I/O threads busy-wait
    /// for its main thread, so two of them on one CPU measure the spinning (1,988 req/s
    /// against 147k in docs/lab/q-cache of 2026-11-26), not Redis.
    pub fn threads(&self) -> usize {
        self.threads.unwrap_or(self.server_cpus.len()).max(1)
    }
}

/// `100B`, `4KiB`, `64KiB`, `1MiB`.
pub fn size_label(n: usize) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{}MiB", n >> 20),
        n if n >= 1024 && n % 1024 == 0 => format!("{}KiB", n >> 10),
        n => format!("{n}B"),
    }
}

/// One GET or SET workload.
#[derive(Clone, Debug)]
struct Workload {
    name: String,
    title: String,
    op: Op,
    size: usize,
}

fn workloads(sizes: &[usize], pipeline: usize) -> Vec<Workload> {
    let mut w = Vec::new();
    for &size in sizes {
        for (op, verb) in [(Op::Get, "GET"), (Op::Set, "SET")] {
            w.push(Workload {
                name: format!("{}-{}", verb.to_lowercase(), size_label(size)),
                title: format!("{verb}, {} values, pipeline {pipeline}", size_label(size)),
                op,
                size,
            });
        }
    }
    w
}

/// The servers asked for, each checked installed.
fn chosen(args: &CacheArgs) -> anyhow::Result<Vec<CacheServer>> {
    let all = servers::lineup(args.threads());
    if let Some(bad) = args
        .servers
        .iter()
        .find(|n| !all.iter().any(|s| &s.name == *n))
    {
        let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
        bail!(
            "unknown server {bad:?} (this run has: {})",
            names.join(", ")
        );
    }
    let picked: Vec<CacheServer> = all
        .into_iter()
        .filter(|s| args.servers.is_empty() || args.servers.contains(&s.name))
        .collect();
    for s in &picked {
        let p = s.program(&args.programs);
        if !server::on_path(p) {
            bail!(
                "server {} cannot start: `{p}` is not installed (scripts/cache-servers.sh install \
                 installs Debian's redis-server and memcached)",
                s.name
            );
        }
    }
    Ok(picked)
}

fn check(args: &CacheArgs) -> anyhow::Result<()> {
    if args.sizes.is_empty() || args.sizes.contains(&0) {
        bail!("--sizes needs at least one size, none of them 0");
    }
    if args.rounds == 0 || args.connections == 0 || args.pipeline == 0 || args.keys == 0 {
        bail!("--rounds, --connections, --pipeline and --keys must be at least 1");
    }
    if args.objects == 0 {
        bail!("--objects must be at least 1");
    }
    // 0 would mean no limit to Redis (maxmemory 0) and the default 64 MB to memcached.
    if args.memory_mb == 0 || args.limit_mb == 0 || args.evict_value_bytes == 0 {
        bail!("--memory-mb, --limit-mb and --evict-value-bytes must be at least 1");
    }
    if !(args.zipf.is_finite() && args.zipf >= 0.0) {
        bail!("--zipf must be a number of at least 0 (0: uniform)");
    }
    if args.connections < args.load_cpus.len() {
        bail!("fewer connections than load CPUs");
    }
    if args.threads() > args.server_cpus.len() {
        bail!(
            "--threads {} is more than the {} server CPU{}: each server thread needs a CPU of its \
             own (Redis's I/O threads busy-wait); give --server-cpus {} CPUs",
            args.threads(),
            args.server_cpus.len(),
            if args.server_cpus.len() == 1 { "" } else { "s" },
            args.threads()
        );
    }
    let biggest = args.sizes.iter().max().copied().unwrap_or(0) as u64;
    if args.keys * biggest * 2 > args.memory_mb << 20 {
        bail!(
            "--keys {} of {} values need about {} MB; --memory-mb {} is too small (GETs would miss)",
            args.keys,
            size_label(biggest as usize),
            (args.keys * biggest * 2) >> 20,
            args.memory_mb
        );
    }
    let allowed = machine::describe(&[]).cpus_allowed;
    for c in args.server_cpus.iter().chain(&args.load_cpus) {
        if !allowed.contains(c) {
            bail!("CPU {c} is not available to this process (allowed: {allowed:?})");
        }
    }
    Ok(())
}

/// Runs the comparison and writes the report; exit 0 when every sample measured, 1 when some
/// failed (the report says which), an error when nothing could be measured.
pub fn run(args: &CacheArgs) -> anyhow::Result<ExitCode> {
    check(args)?;
    let servers = chosen(args)?;
    if args.server_cpus.iter().any(|c| args.load_cpus.contains(c)) {
        eprintln!("warning: server and load share CPUs; costs per request will include the load's");
    }
    let out_dir = args.out.clone().unwrap_or_else(|| {
        let stamp = machine::utc_now()
            .replace([' ', ':'], "")
            .replace("UTC", "");
        PathBuf::from(format!("lab-out/cache-{stamp}"))
    });
    std::fs::create_dir_all(&out_dir)
        .with_context(|| format!("cannot create {}", out_dir.display()))?;
    // Each server must start before anything is measured: a comparison that quietly left one
    // out would read as if it had been compared.
    for s in &servers {
        let running = server::start(
            &s.spec(&args.programs, args.memory_mb),
            &Default::default(),
            &args.server_cpus,
            START_TIMEOUT,
        )
        .with_context(|| format!("server {} cannot start", s.name))?;
        running.stop();
    }
    let ws = workloads(&args.sizes, args.pipeline);
    let zipf = keys::zipf_cdf(args.objects, args.zipf);
    let mut samples = Vec::new();
    let mut memory = Vec::new();
    let mut eviction = Vec::new();
    let per_round = ws.len() * servers.len() + 2 * servers.len();
    let total = per_round * args.rounds;
    let mut done = 0;
    let mut tick = |what: String| {
        done += 1;
        eprintln!("[{done}/{total}] {what}");
    };
    for round in 0..args.rounds {
        for w in &ws {
            for s in in_round_order(&servers, round) {
                let outcome = match measure(args, s, w) {
                    Ok(m) => Outcome::Ok(Box::new(m)),
                    Err(e) => Outcome::Failed {
                        error: format!("{e:#}"),
                    },
                };
                let sample = Sample {
                    server: s.name.clone(),
                    workload: w.name.clone(),
                    round,
                    outcome,
                };
                tick(crate::compare::progress(&sample));
                samples.push(sample);
            }
        }
        for s in in_round_order(&servers, round) {
            let m = measure_memory(args, s, round);
            tick(report::memory_progress(&m));
            memory.push(m);
        }
        for s in in_round_order(&servers, round) {
            let e = measure_eviction(args, s, round, &zipf);
            tick(report::eviction_progress(&e));
            eviction.push(e);
        }
    }
    let names: Vec<String> = servers.iter().map(|s| s.name.clone()).collect();
    let mut programs = Vec::new();
    for s in &servers {
        let p = s.program(&args.programs).to_string();
        if !programs.contains(&p) {
            programs.push(p);
        }
    }
    let compare = Record {
        machine: machine::describe(&programs),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        generator: "lab cache's own client: RESP2 to Redis, meta protocol to memcached".into(),
        setup: Setup {
            rounds: args.rounds,
            duration_s: args.duration.as_secs_f64(),
            warmup_s: args.warmup.as_secs_f64(),
            latency_duration_s: if args.latency_rate.is_some() {
                args.duration.as_secs_f64()
            } else {
                0.0
            },
            connections: args.connections,
            server_cpus: args.server_cpus.clone(),
            load_cpus: args.load_cpus.clone(),
            baseline: names.first().cloned(),
        },
        servers: names.clone(),
        workloads: ws
            .iter()
            .map(|w| WorkloadResult {
                name: w.name.clone(),
                title: w.title.clone(),
                pipeline: args.pipeline,
                rows: stats::summarize(
                    &samples,
                    &w.name,
                    &names,
                    names.first().map(|s| s.as_str()),
                ),
                baseline: names.first().cloned(),
                charts: Vec::new(),
            })
            .collect(),
        instructions: Vec::new(),
        samples,
    };
    let record = CacheRecord {
        compare,
        settings: report::Settings::of(args),
        memory,
        eviction,
    };
    let record = report::write(record, &out_dir)?;
    let text = report::markdown(&record, "");
    std::fs::write(out_dir.join("report.md"), &text)?;
    let mut stdout = std::io::stdout().lock();
    let _ = write!(stdout, "{text}");
    let _ = writeln!(stdout, "Report, raw JSON and charts: {}", out_dir.display());
    let failed = record.failed();
    let all = record.compare.samples.len() + record.memory.len() + record.eviction.len();
    if failed == all {
        bail!(
            "no sample could be measured (see {})",
            out_dir.join("report.md").display()
        );
    }
    if failed > 0 {
        eprintln!("linerate lab cache: {failed} sample(s) failed; see the report's failures");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// `servers` rotated by the round, so each is measured first in turn.
fn in_round_order<T>(servers: &[T], round: usize) -> impl Iterator<Item = &T> {
    let n = servers.len();
    (0..n).map(move |k| &servers[(k + round) % n])
}

/// The latency run's offered rate for `size`-byte values: `rate`, scaled down past
/// [`FULL_RATE_MAX_VALUE`] to the same bytes per second.
pub fn latency_rate(rate: Option<f64>, size: usize) -> Option<f64> {
    rate.map(|r| r * (FULL_RATE_MAX_VALUE as f64 / size.max(1) as f64).min(1.0))
}

/// A job against `addr` with the run's connections, pipeline and load CPUs.
fn job(
    args: &CacheArgs,
    s: &CacheServer,
    addr: SocketAddr,
    mix: Mix,
    keys: Keys,
    size: usize,
) -> Job {
    Job {
        addr,
        protocol: s.protocol(),
        connections: args.connections,
        pipeline: args.pipeline,
        mix,
        keys,
        value: value_bytes(size),
        until: Until::Elapsed(args.duration),
        rate: None,
        cpus: args.load_cpus.clone(),
        seed: 1,
    }
}

/// Stores keys `0..n` with `size`-byte values (closed loop, deep pipelines: not measured).
fn fill(
    args: &CacheArgs,
    s: &CacheServer,
    addr: SocketAddr,
    n: u64,
    size: usize,
) -> anyhow::Result<client::Outcome> {
    let j = Job {
        connections: FILL_CONNECTIONS.max(args.load_cpus.len()),
        pipeline: FILL_PIPELINE,
        until: Until::Count {
            requests: n,
            limit: FILL_LIMIT,
        },
        ..job(
            args,
            s,
            addr,
            Mix::Set,
            Keys::Sequential { next: 0, stride: 1 },
            size,
        )
    };
    let o = client::run(&j)?;
    if o.stored != n {
        bail!(
            "storing {n} objects: {} stored, {} errors{}",
            o.stored,
            o.errors(),
            o.first_error
                .as_deref()
                .map_or(String::new(), |e| format!(" ({e})"))
        );
    }
    Ok(o)
}

/// The value every SET stores: `size` bytes of a fixed pattern (not all one byte, so that no
/// server could store it compressed).
fn value_bytes(size: usize) -> Arc<[u8]> {
    (0..size).map(|i| b'a' + (i % 23) as u8).collect()
}

/// Server CPU time and process usage around one run.
struct Bracket {
    t0: procfs::CpuTimes,
    u0: procfs::GroupUsage,
}

impl Bracket {
    fn open(cpus: &[usize], pgrp: i32) -> anyhow::Result<Bracket> {
        Ok(Bracket {
            t0: procfs::cpu_times(cpus)?,
            u0: procfs::group_usage(pgrp),
        })
    }

    /// The run's figures, for `requests` answered in `elapsed`.
    fn close(self, cpus: &[usize], pgrp: i32, o: &client::Outcome) -> anyhow::Result<Measured> {
        let (t1, u1) = (procfs::cpu_times(cpus)?, procfs::group_usage(pgrp));
        let hz = procfs::clock_ticks();
        let busy = t1.busy.saturating_sub(self.t0.busy);
        let total = t1.total.saturating_sub(self.t0.total).max(1) as f64;
        Ok(Measured {
            generator: "lab cache client".into(),
            requests: o.replies,
            req_per_s: o.per_second(),
            errors: o.errors(),
            elapsed_s: o.elapsed.as_secs_f64(),
            cpu_busy_s: busy as f64 / hz,
            cpu_busy_frac: busy as f64 / total,
            steal_frac: t1.steal.saturating_sub(self.t0.steal) as f64 / total,
            proc_cpu_s: u1.cpu.saturating_sub(self.u0.cpu) as f64 / hz,
            rss_bytes: u1.rss,
            ..Default::default()
        }
        .derive())
    }
}

/// Starts `s` with a `memory_mb` limit, runs `f` against it, stops it; a server that died on
/// the way fails the sample.
fn with_server<T>(
    args: &CacheArgs,
    s: &CacheServer,
    memory_mb: u64,
    f: impl FnOnce(SocketAddr, i32) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let mut srv = server::start(
        &s.spec(&args.programs, memory_mb),
        &Default::default(),
        &args.server_cpus,
        START_TIMEOUT,
    )?;
    let result = f(srv.addr(), srv.pgrp());
    if let Some(why) = srv.exited() {
        srv.stop();
        bail!("the server {why}");
    }
    srv.stop();
    result
}

/// One GET or SET sample: stored keys (for GETs), warm-up, the bracketed closed-loop run, the
/// fixed-rate latency run.
fn measure(args: &CacheArgs, s: &CacheServer, w: &Workload) -> anyhow::Result<Measured> {
    with_server(args, s, args.memory_mb, |addr, pgrp| {
        let (mix, op_keys) = match w.op {
            Op::Get => {
                fill(args, s, addr, args.keys, w.size)?;
                (Mix::Get, Keys::Uniform { n: args.keys })
            }
            Op::Set => (Mix::Set, Keys::Uniform { n: args.keys }),
        };
        let base = job(args, s, addr, mix, op_keys, w.size);
        if !args.warmup.is_zero() {
            client::run(&Job {
                until: Until::Elapsed(args.warmup),
                ..base.clone()
            })
            .context("warm-up")?;
        }
        let b = Bracket::open(&args.server_cpus, pgrp)?;
        let o = client::run(&base)?;
        let mut m = b.close(&args.server_cpus, pgrp, &o)?;
        // A GET of a stored key that misses is a failure here: the limit evicted it.
        m.errors += if w.op == Op::Get { o.misses } else { 0 };
        if o.replies == 0 {
            bail!(
                "no request was answered{}",
                o.first_error
                    .as_deref()
                    .map_or(String::new(), |e| format!(" ({e})"))
            );
        }
        if let Some(rate) = latency_rate(args.latency_rate, w.size) {
            let l = client::run(&Job {
                rate: Some(rate),
                seed: 2,
                ..base
            })
            .context("latency run")?;
            m.latency = Some(linerate_load::stats::summarize(&l.latency));
            m.latency_rate = Some(rate);
            m.errors += l.errors();
        }
        Ok(m)
    })
}

/// Memory per object: RSS of the empty server, then after storing `objects` objects of the
/// smallest size.
fn measure_memory(args: &CacheArgs, s: &CacheServer, round: usize) -> MemorySample {
    let size = args.sizes.iter().copied().min().unwrap_or(100);
    let mut m = MemorySample {
        server: s.name.clone(),
        round,
        objects: args.objects,
        value_bytes: size,
        ..Default::default()
    };
    let r = with_server(args, s, args.memory_mb, |addr, pgrp| {
        m.rss_empty = procfs::group_usage(pgrp).rss;
        fill(args, s, addr, args.objects, size)?;
        m.rss_full = procfs::group_usage(pgrp).rss;
        m.counters = admin::counters(addr, s.protocol())?;
        Ok(())
    });
    if let Err(e) = r {
        m.error = Some(format!("{e:#}"));
    }
    m
}

/// At the limit: cache-aside GETs (a miss is followed by a SET) over `objects` keys drawn from
/// Zipf, with `limit_mb` of memory; evictions counted by the server.
fn measure_eviction(
    args: &CacheArgs,
    s: &CacheServer,
    round: usize,
    zipf: &Arc<[f64]>,
) -> EvictionSample {
    let mut e = EvictionSample {
        server: s.name.clone(),
        round,
        limit_mb: args.limit_mb,
        keys: args.objects,
        zipf: args.zipf,
        value_bytes: args.evict_value_bytes,
        ..Default::default()
    };
    let r = with_server(args, s, args.limit_mb, |addr, pgrp| {
        let base = job(
            args,
            s,
            addr,
            Mix::GetOrSet,
            Keys::Zipf { cdf: zipf.clone() },
            args.evict_value_bytes,
        );
        // Filled past its limit first (the hottest keys, 0 up: Zipf's rank r is key r), so
        // that the run starts from a full cache whatever the server's speed; then warmed up.
        let past_limit = (args.limit_mb << 20) * FILL_PAST_LIMIT_PERCENT
            / 100
            / args.evict_value_bytes.max(1) as u64
            + 1;
        fill(
            args,
            s,
            addr,
            past_limit.min(args.objects),
            args.evict_value_bytes,
        )
        .context("filling to the limit")?;
        if !args.warmup.is_zero() {
            client::run(&Job {
                until: Until::Elapsed(args.warmup),
                ..base.clone()
            })
            .context("warm-up")?;
        }
        let c0 = admin::counters(addr, s.protocol())?;
        let b = Bracket::open(&args.server_cpus, pgrp)?;
        let o = client::run(&base)?;
        let m = b.close(&args.server_cpus, pgrp, &o)?;
        let c1 = admin::counters(addr, s.protocol())?;
        e.requests = o.replies;
        e.req_per_s = o.per_second();
        e.hit_ratio = o.hit_ratio();
        e.evictions = c1.evictions.saturating_sub(c0.evictions);
        e.evictions_per_s = e.evictions as f64 / o.elapsed.as_secs_f64().max(1e-9);
        e.items = c1.items;
        e.rss_bytes = m.rss_bytes;
        e.cost_us = m.cost_us;
        e.errors = o.errors();
        if o.replies == 0 {
            bail!(
                "no request was answered{}",
                o.first_error
                    .as_deref()
                    .map_or(String::new(), |e| format!(" ({e})"))
            );
        }
        Ok(())
    });
    if let Err(err) = r {
        e.error = Some(format!("{err:#}"));
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_labels() {
        assert_eq!(size_label(100), "100B");
        assert_eq!(size_label(4096), "4KiB");
        assert_eq!(size_label(65536), "64KiB");
        assert_eq!(size_label(1000), "1000B");
        assert_eq!(size_label(1 << 20), "1MiB");
    }

    #[test]
    fn a_get_and_a_set_workload_per_size() {
        let names: Vec<String> = workloads(&[100, 4096], 1)
            .into_iter()
            .map(|w| w.name)
            .collect();
        assert_eq!(names, ["get-100B", "set-100B", "get-4KiB", "set-4KiB"]);
    }

    #[test]
    fn large_values_are_offered_the_same_bytes_per_second() {
        assert_eq!(latency_rate(Some(20_000.0), 100), Some(20_000.0));
        assert_eq!(latency_rate(Some(20_000.0), 4096), Some(20_000.0));
        assert_eq!(latency_rate(Some(20_000.0), 65536), Some(1250.0));
        assert_eq!(latency_rate(None, 100), None);
    }

    /// A threaded server gets a CPU for each thread. On one server CPU the
    /// threads default to one and Redis with I/O threads is not in the run (its threads spun
    /// on the one CPU: 1,988 req/s); more threads than server CPUs is refused.
    #[test]
    fn a_threaded_server_gets_a_cpu_for_each_thread() {
        let one = CacheArgs::default();
        assert_eq!(one.threads(), 1);
        let names: Vec<String> = servers::lineup(one.threads())
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(names, ["memcached-t1", "redis"]);
        let args = CacheArgs {
            servers: vec!["redis-io2".into()],
            ..Default::default()
        };
        assert!(chosen(&args).is_err(), "no redis-io2 on one server CPU");
        let args = CacheArgs {
            threads: Some(2),
            ..Default::default()
        };
        let e = check(&args).unwrap_err().to_string();
        assert!(
            e.contains("--threads 2 is more than the 1 server CPU"),
            "{e}"
        );
        let two = CacheArgs {
            server_cpus: vec![0, 1],
            ..Default::default()
        };
        assert_eq!(two.threads(), 2);
    }

    #[test]
    fn refusals() {
        let args = CacheArgs {
            servers: vec!["valkey".into()],
            ..Default::default()
        };
        let e = chosen(&args).unwrap_err().to_string();
        assert!(e.contains("unknown server \"valkey\""), "{e}");
        let args = CacheArgs {
            keys: 100_000,
            memory_mb: 64,
            ..Default::default()
        };
        let e = check(&args).unwrap_err().to_string();
        assert!(e.contains("--memory-mb 64 is too small"), "{e}");
        for bad in [
            CacheArgs {
                limit_mb: 0,
                ..Default::default()
            },
            CacheArgs {
                zipf: f64::NAN,
                ..Default::default()
            },
            CacheArgs {
                zipf: -1.0,
                ..Default::default()
            },
        ] {
            assert!(check(&bad).is_err(), "{bad:?}");
        }
    }
}
