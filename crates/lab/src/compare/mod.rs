//! `linerate lab compare`: servers side by side, measured the same way in one interleaved run.
//!
//! For every round, workload and server (A B C, B C A, C A B …: each round starts one server
//! later, so no server is always measured first or last): start the server fresh and pinned, warm
//! it up, then bracket one load run with /proc samples (CPU busy time of the server's CPUs and
//! the server processes' own CPU time), add a fixed-rate latency run, and stop it. Nothing here
//! waits without a deadline: a server that fails to start or dies mid-run becomes a failed
//! sample in the report. Files: `suite` (what to run), `server` (processes), `driver` (load),
//! `procfs` (counters), `stats` (medians and ratios), `report`/`charts` (outputs), `callgrind`
//! (`--instructions`), `machine` (the host description), `templates` (peer configs, built in).
//! Every server asked for must be able to start: one that cannot (not installed, no template,
//! exits or never listens) fails the whole comparison up front, with one line naming it.

pub mod callgrind;
pub mod charts;
pub mod driver;
pub mod fixtures;
pub mod machine;
pub mod procfs;
pub mod report;
pub mod server;
pub mod stats;
pub mod suite;
pub mod templates;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use linerate_load::units::format_cpu_list;

use driver::{Generator, LoadResult, Run};
use report::{Record, Setup, WorkloadResult};
use stats::{Measured, Outcome, Sample};
use suite::{LoadTool, Resolved, ServerSpec, Suite, Workload};

/// Options of `linerate lab compare`; every suite setting can be overridden here.
#[derive(Debug, Clone, Default)]
pub struct CompareArgs {
    /// Suite file (TOML) [default: the built-in suite: floor, linerate, nginx on JSON and
    /// pipelined plaintext].
    pub suite: Option<PathBuf>,
    /// Print the built-in suite (to copy and edit) and exit.
    pub print_suite: bool,
    /// Only these servers (comma-separated names from the suite).
    pub servers: Vec<String>,
    /// Only these workloads (comma-separated names from the suite).
    pub workloads: Vec<String>,
    /// Interleaved rounds.
    pub rounds: Option<usize>,
    /// Measured load per sample, e.g. 5s.
    pub duration: Option<String>,
    /// Load before each sample, not counted.
    pub warmup: Option<String>,
    /// CPUs the servers are pinned to, e.g. 0 or 0-3.
    pub server_cpus: Option<String>,
    /// CPUs the load generator is pinned to (one thread each).
    pub load_cpus: Option<String>,
    /// Connections.
    pub connections: Option<usize>,
    /// Load generator.
    pub load: Option<LoadTool>,
    /// Server the ratios are taken against.
    pub baseline: Option<String>,
    /// Skip the fixed-rate latency runs.
    pub no_latency: bool,
    /// Also count user-space instructions per request under valgrind callgrind.
    pub instructions: bool,
    /// Output directory (default: `lab-out/compare-<UTC date-time>`).
    pub out: Option<PathBuf>,
    /// Splice the report into this Markdown file between the lab's markers (appended if absent).
    pub update_docs: Option<PathBuf>,
}

/// Runs the comparison; exit 0 when every sample measured, 1 when some failed (the report says
/// which), an error when nothing could be measured at all.
pub fn run(args: &CompareArgs) -> anyhow::Result<ExitCode> {
    if args.print_suite {
        print!("{}", suite::DEFAULT_SUITE);
        return Ok(ExitCode::SUCCESS);
    }
    let (suite, cfg) = load_suite(args)?;
    let out_dir = args.out.clone().unwrap_or_else(|| {
        let stamp = machine::utc_now()
            .replace([' ', ':'], "")
            .replace("UTC", "");
        PathBuf::from(format!("lab-out/compare-{stamp}"))
    });
    std::fs::create_dir_all(&out_dir)
        .with_context(|| format!("cannot create {}", out_dir.display()))?;
    let record = execute(&suite, &cfg, args)?;
    let failed = record
        .samples
        .iter()
        .filter(|s| matches!(s.outcome, Outcome::Failed { .. }))
        .count();
    let record = write_outputs(record, &out_dir)?;
    let report = report::markdown(&record, "");
    std::fs::write(out_dir.join("report.md"), &report)?;
    if let Some(doc) = &args.update_docs {
        let prefix = relative_prefix(doc, &out_dir);
        let text = std::fs::read_to_string(doc).unwrap_or_default();
        let key = args
            .suite
            .as_ref()
            .and_then(|p| p.file_stem())
            .map_or("default".to_string(), |s| s.to_string_lossy().into_owned());
        let block = report::markdown(&record, &prefix);
        std::fs::write(doc, report::splice(&text, &key, &block))
            .with_context(|| format!("cannot write {}", doc.display()))?;
    }
    let mut stdout = std::io::stdout().lock();
    let _ = write!(stdout, "{report}");
    let _ = writeln!(stdout, "Report, raw JSON and charts: {}", out_dir.display());
    let measured = record.samples.len() - failed;
    if measured == 0 {
        bail!(
            "no sample could be measured (see {})",
            out_dir.join("report.md").display()
        );
    }
    if failed > 0 {
        eprintln!(
            "linerate lab compare: {failed} sample(s) failed; see the report's \"Failed samples\""
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// The suite with the command line's overrides and filters applied, and its resolved values.
pub fn load_suite(args: &CompareArgs) -> anyhow::Result<(Suite, Resolved)> {
    let text = match &args.suite {
        Some(p) => {
            std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?
        }
        None => suite::DEFAULT_SUITE.to_string(),
    };
    let mut suite = Suite::parse(&text)?;
    let s = &mut suite.settings;
    macro_rules! set {
        ($field:ident) => {
            if let Some(v) = &args.$field {
                s.$field = v.clone();
            }
        };
    }
    set!(rounds);
    set!(duration);
    set!(warmup);
    set!(server_cpus);
    set!(load_cpus);
    set!(connections);
    set!(load);
    if args.baseline.is_some() {
        s.baseline = args.baseline.clone();
    }
    for (names, kind) in [(&args.servers, "server"), (&args.workloads, "workload")] {
        let known: Vec<&str> = match kind {
            "server" => suite.servers.iter().map(|s| s.name.as_str()).collect(),
            _ => suite.workloads.iter().map(|w| w.name.as_str()).collect(),
        };
        if let Some(bad) = names.iter().find(|n| !known.contains(&n.as_str())) {
            bail!(
                "unknown {kind} {bad:?} (the suite has: {})",
                known.join(", ")
            );
        }
    }
    if !args.servers.is_empty() {
        suite.servers.retain(|s| args.servers.contains(&s.name));
    }
    if !args.workloads.is_empty() {
        suite.workloads.retain(|w| args.workloads.contains(&w.name));
    }
    if let Some(b) = &suite.settings.baseline
        && !suite.servers.iter().any(|s| &s.name == b)
    {
        // Filtering the baseline out means no ratios, not an error.
        if args.baseline.is_some() {
            bail!("baseline {b:?} is not among the servers compared");
        }
        suite.settings.baseline = None;
    }
    let cfg = suite.resolve()?;
    let allowed = machine::describe(&[]).cpus_allowed;
    for c in cfg.server_cpus.iter().chain(&cfg.load_cpus) {
        if !allowed.contains(c) {
            bail!("CPU {c} is not available to this process (allowed: {allowed:?})");
        }
    }
    Ok((suite, cfg))
}

fn execute(suite: &Suite, cfg: &Resolved, args: &CompareArgs) -> anyhow::Result<Record> {
    if cfg.server_cpus.iter().any(|c| cfg.load_cpus.contains(c)) {
        eprintln!("warning: server and load share CPUs; costs per request will include the load's");
    }
    let generator = match suite.settings.load {
        LoadTool::Linerate => Generator::Linerate,
        LoadTool::Wrk if !server::on_path("wrk") => {
            bail!("wrk is not installed (use --load linerate)")
        }
        LoadTool::Wrk => Generator::Wrk,
        LoadTool::Auto if server::on_path("wrk") => Generator::Wrk,
        LoadTool::Auto => Generator::Linerate,
    };
    let exe = std::env::current_exe().context("cannot find this program's path")?;
    let mut base_vars = BTreeMap::new();
    base_vars.insert("linerate".to_string(), exe.display().to_string());
    base_vars.insert("cpus".to_string(), format_cpu_list(&cfg.server_cpus));
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    base_vars.insert("cwd".to_string(), cwd.display().to_string());
    let fixtures = fixtures::Fixtures::create()?;
    base_vars.insert("fixtures".to_string(), fixtures.dir().display().to_string());
    for (k, v) in &suite.settings.vars {
        let v = suite::expand(v, &base_vars).with_context(|| format!("settings.vars.{k}"))?;
        base_vars.insert(k.clone(), v);
    }
    // The backends first: the servers' commands name their addresses.
    let mut backends = Vec::new();
    for b in &suite.backends {
        if let Some(p) = b.requires.as_deref().filter(|p| !server::on_path(p)) {
            bail!("backend {} cannot start: `{p}` is not installed", b.name);
        }
        let running = server::start(b, &base_vars, &cfg.load_cpus, cfg.start_timeout)
            .with_context(|| format!("backend {} cannot start", b.name))?;
        base_vars.insert(b.name.clone(), running.addr().to_string());
        backends.push(running);
    }
    let servers = startable(suite, cfg, &base_vars)?;
    let mut programs: Vec<String> = Vec::new();
    if generator == Generator::Wrk {
        programs.push("wrk".into());
    }
    for s in &servers {
        // The program a server needs names it better than its command (`sh -c …`).
        let p = s.requires.as_ref().unwrap_or(&s.command[0]);
        if !p.starts_with('{') && !programs.contains(p) {
            programs.push(p.clone());
        }
    }
    let mut samples = Vec::new();
    let total = cfg.rounds * suite.workloads.len() * servers.len();
    for round in 0..cfg.rounds {
        for w in &suite.workloads {
            let runs: Vec<&ServerSpec> = servers
                .iter()
                .copied()
                .filter(|s| s.runs(&w.name))
                .collect();
            for s in in_round_order(&runs, round) {
                let vars = workload_vars(&base_vars, w)?;
                let sample = Sample {
                    server: s.name.clone(),
                    workload: w.name.clone(),
                    round,
                    outcome: match measure(s, w, &vars, cfg, generator, !args.no_latency) {
                        Ok(m) => Outcome::Ok(Box::new(m)),
                        Err(e) => Outcome::Failed {
                            error: format!("{e:#}"),
                        },
                    },
                };
                eprintln!("[{}/{total}] {}", samples.len() + 1, progress(&sample));
                samples.push(sample);
            }
        }
    }
    let mut instructions = Vec::new();
    if args.instructions {
        for w in &suite.workloads {
            for s in servers.iter().filter(|s| s.runs(&w.name)) {
                let vars = workload_vars(&base_vars, w)?;
                eprintln!("callgrind: {} / {} ...", s.name, w.name);
                instructions.push(callgrind::measure(
                    &callgrind::Target {
                        spec: s,
                        workload: w,
                        vars: &vars,
                        server_cpus: &cfg.server_cpus,
                        load_cpus: &cfg.load_cpus,
                    },
                    w.instruction_requests
                        .unwrap_or(suite.settings.instruction_requests),
                ));
            }
        }
    }
    for mut b in backends {
        // A backend that died mid-run made every later sample fail or lie: say so.
        if let Some(why) = b.exited() {
            eprintln!("warning: backend {} {why}", b.name);
        }
        b.stop();
    }
    let names: Vec<String> = servers.iter().map(|s| s.name.clone()).collect();
    let workloads = suite
        .workloads
        .iter()
        .map(|w| WorkloadResult {
            name: w.name.clone(),
            title: w.title().to_string(),
            pipeline: w.pipeline,
            rows: stats::summarize(&samples, &w.name, &names, suite.baseline_for(w)),
            baseline: suite.baseline_for(w).map(str::to_string),
            charts: Vec::new(),
        })
        .collect();
    Ok(Record {
        machine: machine::describe(&programs),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        generator: match generator {
            Generator::Wrk => "wrk".into(),
            Generator::Linerate => "linerate load".into(),
        },
        setup: Setup {
            rounds: cfg.rounds,
            duration_s: cfg.duration.as_secs_f64(),
            warmup_s: cfg.warmup.as_secs_f64(),
            latency_duration_s: cfg.latency_duration.as_secs_f64(),
            connections: cfg.connections,
            server_cpus: cfg.server_cpus.clone(),
            load_cpus: cfg.load_cpus.clone(),
            baseline: suite.baseline().map(str::to_string),
        },
        servers: names.clone(),
        workloads,
        instructions,
        samples,
    })
}

/// The suite's servers, each checked to start: its program installed, its config template at
/// hand (built in, or a file), and one start with the first workload it runs, stopped again at
/// once. The first that cannot start ends the comparison, named, before anything is measured:
/// a comparison that quietly left a server out would read as if it had been compared.
fn startable<'a>(
    suite: &'a Suite,
    cfg: &Resolved,
    base_vars: &BTreeMap<String, String>,
) -> anyhow::Result<Vec<&'a ServerSpec>> {
    let others = |s: &ServerSpec| {
        let rest: Vec<&str> = suite
            .servers
            .iter()
            .filter(|o| o.name != s.name)
            .map(|o| o.name.as_str())
            .collect();
        if rest.is_empty() {
            String::new()
        } else {
            format!(" (to compare without it: --servers {})", rest.join(","))
        }
    };
    for s in &suite.servers {
        if let Some(p) = s.requires.as_deref().filter(|p| !server::on_path(p)) {
            bail!(
                "server {} cannot start: `{p}` is not installed{}",
                s.name,
                others(s)
            );
        }
        if let Some(t) = s
            .config_template
            .as_deref()
            .filter(|t| !templates::available(t))
        {
            bail!(
                "server {} cannot start: its config_template {t} is not built in and not a file{}",
                s.name,
                others(s)
            );
        }
    }
    for s in &suite.servers {
        let Some(w) = suite.workloads.iter().find(|w| s.runs(&w.name)) else {
            continue;
        };
        let vars = workload_vars(base_vars, w)?;
        match server::start(s, &vars, &cfg.server_cpus, cfg.start_timeout) {
            Ok(running) => {
                running.stop();
            }
            Err(e) => bail!("server {} cannot start: {e:#}{}", s.name, others(s)),
        }
    }
    Ok(suite.servers.iter().collect())
}

/// The base placeholders plus the workload's `vars`, whose values may use the base ones
/// (`root = "{cwd}/bench/out/static"`).
/// `servers` in round `round`'s order: rotated by the round, so each takes every place in
/// turn (a fixed order measured the first server up to ~5 % cheaper than an identical
/// binary after it, on /baseline2 over h2).
fn in_round_order<T>(servers: &[T], round: usize) -> impl Iterator<Item = &T> {
    let n = servers.len();
    (0..n).map(move |k| &servers[(k + round) % n])
}

fn workload_vars(
    base: &BTreeMap<String, String>,
    w: &Workload,
) -> anyhow::Result<BTreeMap<String, String>> {
    let mut vars = base.clone();
    for (k, v) in &w.vars {
        let v = suite::expand(v, base).with_context(|| format!("workload {}", w.name))?;
        vars.insert(k.clone(), v);
    }
    Ok(vars)
}

/// One sample's progress line (`lab compare`'s and `lab cache`'s).
pub(crate) fn progress(s: &Sample) -> String {
    match &s.outcome {
        Outcome::Ok(m) => format!(
            "round {} {} {}: {} req/s, {:.2} µs/req{}",
            s.round + 1,
            s.workload,
            s.server,
            charts::human(m.req_per_s),
            m.cost_us,
            m.latency.as_ref().map_or(String::new(), |l| format!(
                ", p99 {} µs at the fixed rate",
                l.p99_us
            ))
        ),
        Outcome::Failed { error } => {
            format!(
                "round {} {} {}: FAILED: {error}",
                s.round + 1,
                s.workload,
                s.server
            )
        }
    }
}

/// One sample: fresh server, warm-up, bracketed run, latency run, stop.
fn measure(
    spec: &ServerSpec,
    w: &Workload,
    vars: &BTreeMap<String, String>,
    cfg: &Resolved,
    generator: Generator,
    latency: bool,
) -> anyhow::Result<Measured> {
    let mut srv = server::start(spec, vars, &cfg.server_cpus, cfg.start_timeout)?;
    type Bracketed = (
        LoadResult,
        procfs::CpuTimes,
        procfs::CpuTimes,
        procfs::GroupUsage,
        procfs::GroupUsage,
        Option<linerate_load::stats::LatencySummary>,
        Option<(u64, u64)>,
    );
    let result = (|| -> anyhow::Result<Bracketed> {
        let run = |duration, rate, generator| -> anyhow::Result<LoadResult> {
            Run {
                generator,
                addr: srv.addr_for(w.tls),
                workload: w,
                connections: w.connections.unwrap_or(cfg.connections),
                cpus: &cfg.load_cpus,
                duration,
                rate,
                requests: None,
                timeout: None,
            }
            .execute()
        };
        if !cfg.warmup.is_zero() {
            run(cfg.warmup, None, generator).context("warm-up")?;
        }
        let k0 = w.tls.then(procfs::tls_sessions).flatten();
        let (t0, u0) = (
            procfs::cpu_times(&cfg.server_cpus)?,
            procfs::group_usage(srv.pgrp()),
        );
        let load = run(cfg.duration, None, generator)?;
        let ktls = k0
            .zip(procfs::tls_sessions())
            .map(|((tx0, rx0), (tx1, rx1))| (tx1.saturating_sub(tx0), rx1.saturating_sub(rx0)));
        let (t1, u1) = (
            procfs::cpu_times(&cfg.server_cpus)?,
            procfs::group_usage(srv.pgrp()),
        );
        let mut lat = None;
        if latency
            && let Some(rate) = w.latency_rate
            && !cfg.latency_duration.is_zero()
        {
            lat = run(cfg.latency_duration, Some(rate), Generator::Linerate)
                .context("latency run")?
                .latency;
        }
        Ok((load, t0, t1, u0, u1, lat, ktls))
    })();
    if let Some(why) = srv.exited() {
        srv.stop();
        bail!("the server {why}");
    }
    srv.stop();
    let (load, t0, t1, u0, u1, lat, ktls_sessions) = result?;
    if load.requests == 0 {
        bail!("no request was answered ({} errors)", load.errors);
    }
    let hz = procfs::clock_ticks();
    let busy = t1.busy.saturating_sub(t0.busy);
    Ok(Measured {
        generator: match generator {
            Generator::Wrk => "wrk".into(),
            Generator::Linerate => "linerate".into(),
        },
        requests: load.requests,
        req_per_s: load.req_per_s,
        errors: load.errors,
        elapsed_s: load.elapsed_s,
        cpu_busy_s: busy as f64 / hz,
        cpu_busy_frac: busy as f64 / t1.total.saturating_sub(t0.total).max(1) as f64,
        steal_frac: t1.steal.saturating_sub(t0.steal) as f64
            / t1.total.saturating_sub(t0.total).max(1) as f64,
        proc_cpu_s: u1.cpu.saturating_sub(u0.cpu) as f64 / hz,
        rss_bytes: u1.rss,
        latency_rate: lat.as_ref().and(w.latency_rate),
        latency: lat,
        ktls_sessions,
        ..Default::default()
    }
    .derive())
}

/// Writes runs.json and the charts; returns the record with its chart names filled in.
fn write_outputs(mut record: Record, dir: &Path) -> anyhow::Result<Record> {
    for w in &mut record.workloads {
        let pngs = charts::workload_charts(dir, &w.name, &w.title, &w.rows, &record.servers)?;
        w.charts = pngs
            .iter()
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
    }
    let json = serde_json::to_string_pretty(&record)?;
    std::fs::write(dir.join("runs.json"), json + "\n")?;
    Ok(record)
}

/// The path prefix from `doc`'s directory to `out` (both relative to the working directory, or
/// both absolute), for image links.
fn relative_prefix(doc: &Path, out: &Path) -> String {
    let doc_dir = doc.parent().unwrap_or(Path::new(""));
    let (a, b): (Vec<_>, Vec<_>) = (doc_dir.components().collect(), out.components().collect());
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut p = PathBuf::new();
    for _ in common..a.len() {
        p.push("..");
    }
    for c in &b[common..] {
        p.push(c);
    }
    let s = p.display().to_string();
    if s.is_empty() { s } else { format!("{s}/") }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rounds of three servers: A B C, B C A, C A B, then A B C again; one server and none
    /// are left as they are.
    #[test]
    fn each_round_starts_one_server_later() {
        let abc = ['A', 'B', 'C'];
        let order = |r| in_round_order(&abc, r).collect::<String>();
        assert_eq!(
            (0..4).map(order).collect::<Vec<_>>(),
            ["ABC", "BCA", "CAB", "ABC"]
        );
        assert_eq!(in_round_order(&['A'], 5).collect::<String>(), "A");
        assert_eq!(in_round_order::<char>(&[], 2).count(), 0);
    }

    #[test]
    fn docs_image_prefix() {
        assert_eq!(
            relative_prefix(
                Path::new("docs/benchmarks.md"),
                Path::new("docs/lab/compare")
            ),
            "lab/compare/"
        );
        assert_eq!(
            relative_prefix(Path::new("docs/benchmarks.md"), Path::new("lab-out/x")),
            "../lab-out/x/"
        );
        assert_eq!(
            relative_prefix(Path::new("report.md"), Path::new("out")),
            "out/"
        );
    }

    #[test]
    fn unknown_filters_are_errors() {
        let args = CompareArgs {
            servers: vec!["apache".into()],
            ..Default::default()
        };
        let e = load_suite(&args).unwrap_err().to_string();
        assert!(e.contains("unknown server \"apache\""), "{e}");
    }
}
