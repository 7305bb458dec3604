//! The arena's tables, its Markdown report and charts: per profile, the checks passed and
//! failed (and those that could not run) with the first failure's reason; the load's figures
//! in HttpArena's shape. Text for the terminal and docs, serde for the JSON beside it; the
//! charts are the only files written here.

use serde::Serialize;

use std::path::{Path, PathBuf};

use super::checks::{Check, Outcome};
use super::{Run, Scored};
use crate::compare::machine::Machine;

/// A profile's validation.
#[derive(Clone, Debug, Serialize)]
pub struct Validation {
    pub profile: &'static str,
    pub server: String,
    /// "passed", "FAILED", "not entered", "NOT RUN".
    pub result: &'static str,
    pub passed: usize,
    pub failed: usize,
    pub not_run: usize,
    /// The first failure (or, for a profile not entered or not run, why).
    pub reason: Option<String>,
    pub checks: Vec<CheckRow>,
}

/// One check, as reported.
#[derive(Clone, Debug, Serialize)]
pub struct CheckRow {
    pub name: String,
    pub outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl Validation {
    /// A profile whose checks ran.
    pub fn checked(profile: &'static str, server: &str, checks: Vec<Check>) -> Validation {
        let count = |f: fn(&Outcome) -> bool| checks.iter().filter(|(_, o)| f(o)).count();
        let passed = count(|o| *o == Outcome::Pass);
        let failed = count(|o| matches!(o, Outcome::Fail(_)));
        let not_run = count(|o| matches!(o, Outcome::NotRun(_)));
        let reason = checks.iter().find_map(|(n, o)| match o {
            Outcome::Fail(why) => Some(format!("{n}: {why}")),
            _ => None,
        });
        let reason = reason.or_else(|| {
            checks.iter().find_map(|(n, o)| match o {
                Outcome::NotRun(why) => Some(format!("{n}: {why}")),
                _ => None,
            })
        });
        let result = if failed > 0 {
            "FAILED"
        } else if passed == 0 {
            "NOT RUN"
        } else {
            "passed"
        };
        let checks = checks
            .into_iter()
            .map(|(name, o)| {
                let (outcome, why) = match o {
                    Outcome::Pass => ("pass", None),
                    Outcome::Fail(w) => ("FAIL", Some(w)),
                    Outcome::NotRun(w) => ("not run", Some(w)),
                };
                CheckRow { name, outcome, why }
            })
            .collect();
        Validation {
            profile,
            server: server.to_string(),
            result,
            passed,
            failed,
            not_run,
            reason,
            checks,
        }
    }

    /// A profile not validated, and why: `result` is "not entered" or "NOT RUN".
    pub fn skipped(
        profile: &'static str,
        server: &str,
        result: &'static str,
        why: &str,
    ) -> Validation {
        Validation {
            profile,
            server: server.to_string(),
            result,
            passed: 0,
            failed: 0,
            not_run: 0,
            reason: Some(why.to_string()),
            checks: Vec::new(),
        }
    }
}

/// The table: one line per profile.
pub fn table(rows: &[Validation]) -> String {
    let mut out = format!(
        "{:<18} {:<10} {:<12} {:>6} {:>6} {:>7}  {}\n",
        "profile", "server", "result", "passed", "failed", "not run", "first failure / reason"
    );
    for r in rows {
        out.push_str(&format!(
            "{:<18} {:<10} {:<12} {:>6} {:>6} {:>7}  {}\n",
            r.profile,
            r.server,
            r.result,
            r.passed,
            r.failed,
            r.not_run,
            r.reason.as_deref().unwrap_or("")
        ));
    }
    out
}

/// Every failing check of every profile, one per line (printed under the table), with the
/// server it failed on (a Rust peer's failures under a "not entered" row too).
pub fn failures(rows: &[Validation]) -> String {
    let mut out = String::new();
    for r in rows {
        for c in r.checks.iter().filter(|c| c.outcome == "FAIL") {
            out.push_str(&format!(
                "FAIL {} on {} [{}]: {}\n",
                r.profile,
                r.server,
                c.name,
                c.why.as_deref().unwrap_or("")
            ));
        }
    }
    out
}

/// The load tables, in HttpArena's shape: one per profile, each server's req/s and CPU µs per
/// request (medians of the rounds, with min–max) with their ratios to the best server, p50,
/// mean and p99 latency, the paced profiles' score; under each, linerate's CPU against the
/// best peer's.
pub fn load_table(rows: &[Scored]) -> String {
    let mut out = String::new();
    for group in by_profile(rows) {
        let profile = group[0].measured.profile;
        let shape = group
            .iter()
            .find(|r| r.error.is_none())
            .map(|r| &r.measured);
        out += &format!("\n### {profile}");
        if let Some(m) = shape {
            out += &format!(" ({} connections, depth {}", m.connections, m.depth);
            if let Some(rate) = m.offered_rps {
                out += &format!(", paced at {rate:.0} req/s");
            }
            out += ")";
        }
        out += "\n\n| server | req/s | × best | req/s min–max | CPU µs/req | × best | CPU min–max | p50 µs | mean µs | p99 µs | score | rounds |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        for r in group {
            let m = &r.measured;
            if let Some(why) = &r.error {
                out += &format!("| {} | | | | | | | | | | | {} |\n", m.server, md_cell(why));
                continue;
            }
            let cpu = m
                .cpu_us_per_request
                .map_or("-".into(), |c| format!("{c:.2}"));
            let cpu_ratio = r.cpu_ratio.map_or("-".into(), |c| format!("{c:.2}"));
            let score = r
                .composite
                .map_or("-".into(), |c| format!("{:.1}", c.score));
            let rounds = match &m.round_errors {
                None => m.rounds.to_string(),
                Some((n, why)) => format!("{} ({n} failed: {})", m.rounds, md_cell(why)),
            };
            let [lo, hi] = m.rps_min_max;
            let cpu_spread = m
                .cpu_us_min_max
                .map_or("-".into(), |[a, b]| format!("{a:.2}–{b:.2}"));
            out += &format!(
                "| {} | {:.0} | {:.2} | {lo:.0}–{hi:.0} | {cpu} | {cpu_ratio} | {cpu_spread} | {:.0} | {:.0} | {:.0} | {score} | {rounds} |\n",
                m.server, m.rps, r.rps_ratio, m.p50_us, m.mean_us, m.p99_us
            );
        }
        if let Some(v) = versus(group) {
            out += &format!("\n{}\n", v.sentence());
        }
    }
    out
}

/// Where the CPU figures were read: each server's own cgroup (exact), or, for the servers
/// named, /proc's clock ticks (10 ms each: coarse on the paced profiles).
pub fn cpu_sources(rows: &[Scored]) -> String {
    let ok: Vec<&Scored> = rows.iter().filter(|r| r.error.is_none()).collect();
    let ticks: Vec<String> = ok
        .iter()
        .filter(|r| r.measured.cpu_source == super::target::CPU_TICKS)
        .map(|r| format!("{} on {}", r.measured.server, r.measured.profile))
        .collect();
    if ticks.is_empty() {
        "CPU read from each server's own cgroup (exact, as HttpArena reads its containers').\n"
            .into()
    } else if ticks.len() == ok.len() {
        "CPU read from /proc's clock ticks (10 ms each, coarse on the paced profiles): no \
         cgroup could be made here (root, or a delegated cgroup subtree, makes one).\n"
            .into()
    } else {
        format!(
            "CPU read from each server's own cgroup (exact), but from /proc's clock ticks \
             (10 ms each) for {}.\n",
            ticks.join(", ")
        )
    }
}

/// The server under test against the best peer on one profile, by CPU per request.
#[derive(Clone, Debug, PartialEq)]
pub struct Versus {
    pub profile: &'static str,
    pub ours: String,
    pub ours_cpu: f64,
    pub peer: String,
    pub peer_cpu: f64,
}

impl Versus {
    /// Ours over the best peer's: below 1, ours is cheaper.
    pub fn ratio(&self) -> f64 {
        self.ours_cpu / self.peer_cpu
    }

    fn sentence(&self) -> String {
        format!(
            "{}: {:.2} CPU µs a request against {}'s {:.2}, the cheapest peer: **{:.2}×**.",
            self.ours,
            self.ours_cpu,
            self.peer,
            self.peer_cpu,
            self.ratio()
        )
    }
}

/// On one profile's rows: the server under test (the one that is not a peer) against the
/// peer with the lowest CPU per request; None where either has no CPU figure.
pub fn versus(group: &[Scored]) -> Option<Versus> {
    let is_peer = |r: &&Scored| super::peers::Peer::parse(&r.measured.server).is_some();
    let cpu = |r: &&Scored| r.error.is_none().then_some(r.measured.cpu_us_per_request?);
    let ours = group.iter().find(|r| !is_peer(r))?;
    let best = group
        .iter()
        .filter(is_peer)
        .filter_map(|r| Some((r, cpu(&r)?)))
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    Some(Versus {
        profile: ours.measured.profile,
        ours: ours.measured.server.clone(),
        ours_cpu: cpu(&ours)?,
        peer: best.0.measured.server.clone(),
        peer_cpu: best.1,
    })
}

/// The arena's goal for a profile, as the most the server under test's CPU per request may be
/// over the best peer's: 0.8 on baseline, pipelined, json, h2c, unary-grpc and the paced
/// profiles, 1 elsewhere.
pub fn goal(profile: &str) -> f64 {
    const TIGHT: [&str; 6] = [
        "baseline",
        "pipelined",
        "json",
        "baseline-h2c",
        "json-h2c",
        "unary-grpc",
    ];
    if TIGHT.contains(&profile) || profile.starts_with("latency-") {
        0.8
    } else {
        1.0
    }
}

/// The summary over the profiles a peer was loaded on: ours, the best peer, the ratio, the
/// goal and whether it is met.
pub fn versus_table(rows: &[Scored]) -> String {
    let mut out = "| profile | linerate CPU µs/req | best peer | its CPU µs/req | ratio | goal | met |\n|---|---:|---|---:|---:|---:|---|\n".to_string();
    for group in by_profile(rows) {
        if let Some(v) = versus(group) {
            let g = goal(v.profile);
            out += &format!(
                "| {} | {:.2} | {} | {:.2} | {:.2} | ≤ {g:.1} | {} |\n",
                v.profile,
                v.ours_cpu,
                v.peer,
                v.peer_cpu,
                v.ratio(),
                if v.ratio() <= g { "yes" } else { "**no**" }
            );
        }
    }
    out
}

/// The rows of each profile together (the run keeps them in order).
fn by_profile(rows: &[Scored]) -> impl Iterator<Item = &[Scored]> {
    rows.chunk_by(|a, b| a.measured.profile == b.measured.profile)
}

/// The markers between which `--update-docs` replaces a docs file's text.
pub fn docs_markers() -> (&'static str, &'static str) {
    (
        "<!-- linerate lab arena: begin (generated by `linerate lab arena --update-docs`) -->",
        "<!-- linerate lab arena: end -->",
    )
}

/// The Markdown report: the machine, the validation of every profile on every server of the
/// run (with what each does not enter and why), and the load table when there was a load.
pub fn markdown(run: &Run, machine: &Machine) -> String {
    let mut o = String::from("# HttpArena's profiles on this machine (`linerate lab arena`)\n\n");
    o += &format!(
        "{} ({} CPUs online), {}, linerate {}{}, {}; random inputs from seed {}.\n\n",
        machine.cpu_model,
        machine.cpus_online,
        machine.kernel,
        machine.linerate,
        match run.io.as_deref() {
            Some("uring") => " on io_uring (`serve --io uring`)",
            Some("epoll") => " on epoll (`serve --io epoll`)",
            _ => "",
        },
        machine.date_utc,
        run.seed
    );
    o += "## Validation\n\nHttpArena's checks, written from its public contract, with fresh random inputs.\n\n";
    o += "An engine's rows for the profiles its HttpArena entry does not enter are left out \
          (bench/arena-peers/README.md lists what each enters); one that fails a profile it \
          enters is listed as not entered, with the failure.\n\n";
    o += "| profile | server | result | passed | failed | not run | first failure / why not |\n|---|---|---|---:|---:|---:|---|\n";
    for r in run
        .validation
        .iter()
        .filter(|r| r.reason.as_deref() != Some(super::peers::NOT_ITS_ENTRYS))
    {
        o += &format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            r.profile,
            r.server,
            r.result,
            r.passed,
            r.failed,
            r.not_run,
            md_cell(r.reason.as_deref().unwrap_or(""))
        );
    }
    if !run.load.is_empty() {
        o += "\n## Load\n\nHttpArena's shapes with its connection counts and paced rates scaled by this machine's CPUs / 64; \
              each figure the median of the rounds (each profile's servers in turn, round by round), with req/s and CPU min–max over them; \
              server CPU (every process of the server; production-stack: its edge, with the app in it, and the Redis behind it, as HttpArena sums its stack's containers) over the measured run; ratios to the best server of the run on that profile; \
              score: HttpArena's composite for the paced profiles.\n\n";
        o += &cpu_sources(&run.load);
        o += "\n### linerate against the best peer\n\nCPU per request, medians of the rounds; the goal is ≤ 0.8× on baseline, pipelined, json, h2c, unary-grpc and the paced profiles, ≤ 1× elsewhere.\n\n";
        o += &versus_table(&run.load);
        o += &load_table(&run.load);
    }
    o
}

/// Text for a Markdown table cell, shown as written: `&`, `<` and `>` as entities (a check's
/// reason may quote HTML, e.g. fortunes' `<script>`), `|` escaped.
fn md_cell(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('|', "\\|")
}

/// Bar charts of the load (req/s and server CPU µs per request, one bar per profile and server) into
/// `dir`; the PNGs written.
pub fn charts(dir: &Path, rows: &[Scored]) -> anyhow::Result<Vec<PathBuf>> {
    use crate::compare::charts::bars;
    use crate::compare::stats::Spread;
    let ok: Vec<&Scored> = rows.iter().filter(|r| r.error.is_none()).collect();
    if ok.is_empty() {
        return Ok(Vec::new());
    }
    let spread = |v: f64, [min, max]: [f64; 2]| Spread {
        median: v,
        min,
        max,
    };
    // One bar per profile, or per profile and server when the run has peers.
    let several = ok
        .iter()
        .any(|r| r.measured.server != ok[0].measured.server);
    let order: Vec<String> = ok
        .iter()
        .map(|r| {
            if several {
                format!("{} {}", r.measured.profile, r.measured.server)
            } else {
                r.measured.profile.to_string()
            }
        })
        .collect();
    let rps = ok
        .iter()
        .zip(&order)
        .map(|(r, label)| {
            (
                label.as_str(),
                spread(r.measured.rps, r.measured.rps_min_max),
            )
        })
        .collect();
    let cpu = ok
        .iter()
        .zip(&order)
        .filter_map(|(r, label)| {
            let m = &r.measured;
            let c = m.cpu_us_per_request?;
            Some((
                label.as_str(),
                spread(c, m.cpu_us_min_max.unwrap_or([c; 2])),
            ))
        })
        .collect();
    Ok(vec![
        bars(
            dir,
            "arena-rps",
            "req/s by profile".into(),
            "req/s",
            rps,
            &order,
        )?,
        bars(
            dir,
            "arena-cpu",
            "server CPU µs per request by profile".into(),
            "µs",
            cpu,
            &order,
        )?,
    ])
}

#[cfg(test)]
mod tests {
    use super::super::Scored;
    use super::super::load::Measured;

    fn row(profile: &'static str, server: &str, cpu: Option<f64>) -> Scored {
        Scored {
            measured: Measured {
                profile,
                server: server.into(),
                connections: 8,
                depth: 1,
                offered_rps: None,
                rps: 1000.0,
                responses: 5000,
                failed: 0,
                cpu_us_per_request: cpu,
                mean_us: 100.0,
                p50_us: 80.0,
                p99_us: 300.0,
                cpu_source: "cgroup",
                cpu_of: None,
                rounds: 3,
                rps_min_max: [900.0, 1100.0],
                cpu_us_min_max: cpu.map(|c| [c, c]),
                round_errors: None,
            },
            rps_ratio: 1.0,
            cpu_ratio: cpu.map(|_| 1.0),
            composite: None,
            error: None,
        }
    }

    /// The server under test is set against the cheapest peer of each profile that has a
    /// CPU figure (a peer with none, or an error, takes no part), and the goal is the arena's:
    /// 0.8 on the tight profiles, 1 elsewhere; a profile without a peer has no line.
    #[test]
    fn linerate_is_set_against_the_cheapest_peer_with_the_issues_goal() {
        let mut failed = row("baseline", "actix", Some(1.0));
        failed.error = Some("refused".into());
        let rows = vec![
            row("baseline", "linerate", Some(4.0)),
            row("baseline", "hyper", Some(6.0)),
            row("baseline", "may-minihttp", Some(4.5)),
            row("baseline", "fasthttp", None),
            failed,
            row("static", "linerate", Some(10.0)),
            row("static", "nginx", Some(9.0)),
            row("async", "linerate", Some(7.0)),
        ];
        let v = super::versus(&rows[..5]).unwrap();
        assert_eq!((v.peer.as_str(), v.peer_cpu), ("may-minihttp", 4.5));
        assert!((v.ratio() - 4.0 / 4.5).abs() < 1e-9);
        assert_eq!(super::versus(&rows[7..]), None);
        let table = super::versus_table(&rows);
        assert!(
            table.contains("| baseline | 4.00 | may-minihttp | 4.50 | 0.89 | ≤ 0.8 | **no** |"),
            "{table}"
        );
        assert!(
            table.contains("| static | 10.00 | nginx | 9.00 | 1.11 | ≤ 1.0 | **no** |"),
            "{table}"
        );
        assert!(!table.contains("| async |"), "{table}");
        assert_eq!(super::goal("latency-10k"), 0.8);
        assert_eq!(super::goal("static-h2"), 1.0);
        let text = super::load_table(&rows);
        assert!(
            text.contains("### baseline (8 connections, depth 1)"),
            "{text}"
        );
        assert!(
            text.contains("| actix | | | | | | | | | | | refused |"),
            "{text}"
        );
        assert!(text.contains("the cheapest peer: **0.89×**"), "{text}");
    }

    /// A reason quoting HTML reads as written in the docs, never as markup.
    #[test]
    fn markdown_cells_show_html_as_text() {
        assert_eq!(
            super::md_cell("no &lt;script&gt;, or a raw <script>alert | x"),
            "no &amp;lt;script&amp;gt;, or a raw &lt;script&gt;alert \\| x"
        );
    }
}
