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

/// The load table, in HttpArena's shape: per profile and server, req/s and CPU µs per request
/// with their ratios to the best server, mean and p99 latency, and the paced profiles' score.
pub fn load_table(rows: &[Scored]) -> String {
    let mut out = "| profile | server | conns | depth | req/s | × best | CPU µs/req | × best | mean µs | p99 µs | score | rounds | req/s min–max | CPU min–max |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n".to_string();
    for r in rows {
        let m = &r.measured;
        if let Some(why) = &r.error {
            out.push_str(&format!(
                "| {} | {} | | | | | | | | | {why} | | | |\n",
                m.profile, m.server
            ));
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
            Some((n, why)) => format!("{} ({n} failed: {})", m.rounds, why.replace('|', "\\|")),
        };
        let [lo, hi] = m.rps_min_max;
        let cpu_spread = m
            .cpu_us_min_max
            .map_or("-".into(), |[a, b]| format!("{a:.2}–{b:.2}"));
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:.0} | {:.2} | {cpu} | {cpu_ratio} | {:.0} | {:.0} | {score} | {rounds} | {lo:.0}–{hi:.0} | {cpu_spread} |\n",
            m.profile, m.server, m.connections, m.depth, m.rps, r.rps_ratio, m.mean_us, m.p99_us
        ));
    }
    out
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
        "{} ({} CPUs online), {}, linerate {}, {}; random inputs from seed {}.\n\n",
        machine.cpu_model,
        machine.cpus_online,
        machine.kernel,
        machine.linerate,
        machine.date_utc,
        run.seed
    );
    o += "## Validation\n\nHttpArena's checks, written from its public contract, with fresh random inputs.\n\n";
    o += "| profile | server | result | passed | failed | not run | first failure / why not |\n|---|---|---|---:|---:|---:|---|\n";
    for r in &run.validation {
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
              server CPU from /proc (every process of the server; production-stack: its edge, with the app in it, and the Redis behind it, as HttpArena sums its stack's containers) over the measured run; ratios to the best server of the run on that profile; \
              score: HttpArena's composite for the paced profiles.\n\n";
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
    /// A reason quoting HTML reads as written in the docs, never as markup.
    #[test]
    fn markdown_cells_show_html_as_text() {
        assert_eq!(
            super::md_cell("no &lt;script&gt;, or a raw <script>alert | x"),
            "no &amp;lt;script&amp;gt;, or a raw &lt;script&gt;alert \\| x"
        );
    }
}
