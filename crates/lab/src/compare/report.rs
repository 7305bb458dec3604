//! The comparison's outputs: the raw record (JSON, every sample) and the Markdown report (tables,
//! machine description, chart links), plus splicing that report into a docs file between markers.

use std::fmt::Write as _;

use linerate_load::units::format_cpu_list;
use serde::{Deserialize, Serialize};

use super::charts::human;
use super::machine::Machine;
use super::stats::{Row, Sample, latency_labels};

/// Everything one `lab compare` run measured: written as `runs.json`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Record {
    pub machine: Machine,
    pub command: String,
    pub generator: String,
    pub setup: Setup,
    /// The servers compared, in the suite's order: each keeps its place (and its colour in
    /// every chart) whichever workloads it ran.
    #[serde(default)]
    pub servers: Vec<String>,
    pub workloads: Vec<WorkloadResult>,
    pub instructions: Vec<Instructions>,
    pub samples: Vec<Sample>,
}

/// The measuring setup, as resolved.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Setup {
    pub rounds: usize,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub latency_duration_s: f64,
    pub connections: usize,
    pub server_cpus: Vec<usize>,
    pub load_cpus: Vec<usize>,
    pub baseline: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkloadResult {
    pub name: String,
    pub title: String,
    pub pipeline: usize,
    pub rows: Vec<Row>,
    /// The server this workload's ratios are to.
    #[serde(default)]
    pub baseline: Option<String>,
    /// Chart file names (relative to the report).
    pub charts: Vec<String>,
}

/// User-space instructions per request for one server and workload (callgrind).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Instructions {
    pub server: String,
    pub workload: String,
    pub requests: u64,
    pub per_request: Option<f64>,
    pub error: Option<String>,
}

/// The markers between which `--update-docs` replaces a docs file's text; one pair per suite
/// (`key`: the suite file's stem, `default` for the built-in one), so several suites' reports
/// live in one file.
pub fn docs_markers(key: &str) -> (String, String) {
    (
        format!("<!-- linerate lab compare {key}: begin (generated; edit the suite, not this) -->"),
        format!("<!-- linerate lab compare {key}: end -->"),
    )
}

fn spread(s: Option<super::stats::Spread>) -> String {
    s.map_or("–".into(), |s| {
        format!("{} ({}–{})", human(s.median), human(s.min), human(s.max))
    })
}

/// The mark of a share over 100%, explained under its table by [`SHARE_OVER_NOTE`].
pub const SHARE_OVER: &str = "†";

/// Why a share can pass 100%, printed under a table that has one.
pub const SHARE_OVER_NOTE: &str = "† share over 100%: the server's processes were charged more \
     CPU time than their CPUs were seen busy. The two figures come from different kernel clocks: \
     a process's utime+stime is the scheduler's own run time, which on a VM can include time the \
     hypervisor stole from the vCPU (busy time leaves steal out: see the steal column), while a \
     CPU's busy time in /proc/stat is sampled once per tick, so a run of a few seconds can miss \
     a few ticks. Read it as: all of those CPUs' busy time was the server's. Cost per request \
     uses busy time only.";

/// The share column: the median percentage, marked when over 100% (after rounding).
pub fn share_cell(share: Option<super::stats::Spread>) -> (String, bool) {
    match share {
        None => ("–".into(), false),
        Some(s) => {
            let pct = (s.median * 100.0).round();
            if pct > 100.0 {
                (format!("{pct:.0}% {SHARE_OVER}"), true)
            } else {
                (format!("{pct:.0}%"), false)
            }
        }
    }
}

fn ratio(r: Option<f64>) -> String {
    r.map_or("–".into(), |r| format!("{r:.2}×"))
}

/// The report; chart links are prefixed with `image_prefix` (e.g. a path from a docs file to the
/// output directory).
pub fn markdown(r: &Record, image_prefix: &str) -> String {
    markdown_titled(r, image_prefix, "linerate lab compare", "linerate load")
}

/// [`markdown`] under another top heading, naming the tool that measured the latencies
/// (`lab cache` reuses these tables for its own servers and client).
pub fn markdown_titled(r: &Record, image_prefix: &str, heading: &str, latency_by: &str) -> String {
    let m = &r.machine;
    let s = &r.setup;
    let base = s.baseline.as_deref().unwrap_or("baseline");
    let mut o = String::new();
    let _ = writeln!(o, "# {heading}\n");
    let _ = writeln!(
        o,
        "- Machine: {}, {} CPUs online (this run may use {}), {}",
        m.cpu_model,
        m.cpus_online,
        format_cpu_list(&m.cpus_allowed),
        m.kernel
    );
    let _ = writeln!(o, "- Date: {}", m.date_utc);
    let tools: Vec<String> = std::iter::once(format!("linerate {}", m.linerate))
        .chain(m.tools.iter().map(|(p, v)| format!("{p}: {v}")))
        .collect();
    let _ = writeln!(o, "- Programs: {}", tools.join("; "));
    let _ = writeln!(o, "- Command: `{}`", r.command);
    let _ = writeln!(
        o,
        "- Setup: each server pinned to CPU {} and started fresh for every sample; load from {} \
         ({} thread{}, pinned to CPU {}), {} connections; {} interleaved round{} of {} s after a \
         {} s warm-up. Figures are medians (min–max over rounds).",
        format_cpu_list(&s.server_cpus),
        r.generator,
        s.load_cpus.len(),
        if s.load_cpus.len() == 1 { "" } else { "s" },
        format_cpu_list(&s.load_cpus),
        s.connections,
        s.rounds,
        if s.rounds == 1 { "" } else { "s" },
        s.duration_s,
        s.warmup_s
    );
    let _ = writeln!(
        o,
        "- Cost: busy time of the server's CPUs (user+nice+system+irq+softirq, /proc/stat; steal, \
         time the hypervisor ran something else, is left out and recorded in runs.json) \
         per answered request. Proc: the server processes' own utime+stime per request; share = \
         proc ÷ busy, how much of its CPUs' busy time the server's own processes account for \
         (well under 100% means something else ran on the server's CPUs; the two are different \
         kernel clocks, so it can read a little over 100%, marked {SHARE_OVER} and explained under \
         the table); steal: the most the hypervisor took from the server's CPUs in any round. Ratios are \
         to the baseline's medians in the same run ({base}, unless a table names another); \"per round\" is the median (min–max) of each \
         round's cost ÷ the baseline's cost in that round, the pair having run back to back.\n"
    );
    for w in &r.workloads {
        let base = w.baseline.as_deref().unwrap_or(base);
        let _ = writeln!(o, "## {}\n", w.title);
        let _ = writeln!(
            o,
            "| server | req/s | × {base} | cost µs/req | × {base} | × {base}, per round | proc µs/req | share | steal | RSS MiB | errors |"
        );
        let _ = writeln!(o, "|---|---|---|---|---|---|---|---|---|---|---|");
        let mut share_over = false;
        for row in &w.rows {
            let (share, over) = share_cell(row.share);
            share_over |= over;
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                row.server,
                spread(row.req_per_s),
                ratio(row.req_ratio),
                spread(row.cost_us),
                ratio(row.cost_ratio),
                row.cost_ratio_paired.map_or("–".into(), |s| format!(
                    "{:.2}× ({:.2}–{:.2})",
                    s.median, s.min, s.max
                )),
                spread(row.proc_cost_us),
                share,
                row.steal
                    .map_or("–".into(), |s| format!("{:.1}%", s.max * 100.0)),
                row.rss_bytes
                    .map_or("–".into(), |s| format!("{:.1}", s.median / 1048576.0)),
                if row.failures.is_empty() {
                    row.errors.to_string()
                } else {
                    format!("{} ({} failed samples)", row.errors, row.failures.len())
                }
            );
        }
        if share_over {
            let _ = writeln!(o, "\n{SHARE_OVER_NOTE}");
        }
        let ktls: Vec<String> = w
            .rows
            .iter()
            .filter_map(|r| {
                r.ktls_sessions
                    .map(|(tx, rx)| format!("{} {tx} TX / {rx} RX", r.server))
            })
            .collect();
        if !ktls.is_empty() {
            let _ = writeln!(
                o,
                "\nkTLS (/proc/net/tls_stat: sessions the kernel keyed during the measured runs; \
                 0 means that server encrypted in user space): {}.",
                ktls.join("; ")
            );
        }
        let lat: Vec<&Row> = w.rows.iter().filter(|r| r.latency_us.is_some()).collect();
        if let Some(rate) = lat.first().and_then(|r| r.latency_rate) {
            let labels = latency_labels();
            let _ = writeln!(
                o,
                "\nLatency at a fixed {} req/s ({latency_by}, timed from each request's intended \
                 send time, so no coordinated omission), µs, median over rounds:\n",
                human(rate)
            );
            let _ = writeln!(o, "| server | {} |", labels.join(" | "));
            let _ = writeln!(o, "|---|{}", "---|".repeat(labels.len()));
            for row in lat {
                let cells: Vec<String> = row
                    .latency_us
                    .iter()
                    .flatten()
                    .map(|v| format!("{v:.0}"))
                    .collect();
                let _ = writeln!(o, "| {} | {} |", row.server, cells.join(" | "));
            }
        }
        if !w.charts.is_empty() {
            let _ = writeln!(o);
            for c in &w.charts {
                let _ = writeln!(o, "![{c}]({image_prefix}{c})");
            }
        }
        let _ = writeln!(o);
    }
    if !r.instructions.is_empty() {
        let _ = writeln!(
            o,
            "## User-space instructions per request (valgrind callgrind)\n\n\
             Each server once under callgrind: (instructions with N requests − instructions of \
             an idle start and stop) ÷ N. Kernel work is not counted.\n"
        );
        let _ = writeln!(o, "| server | workload | requests | instructions/request |");
        let _ = writeln!(o, "|---|---|---|---|");
        for i in &r.instructions {
            let v = match (&i.per_request, &i.error) {
                (Some(v), _) => format!("{v:.0}"),
                (None, Some(e)) => format!("failed: {e}"),
                (None, None) => "–".into(),
            };
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} |",
                i.server, i.workload, i.requests, v
            );
        }
        let _ = writeln!(o);
    }
    let failures: Vec<String> = r
        .workloads
        .iter()
        .flat_map(|w| {
            w.rows.iter().flat_map(move |row| {
                row.failures
                    .iter()
                    .map(move |f| format!("- {} / {}, {f}", row.server, w.name))
            })
        })
        .collect();
    if !failures.is_empty() {
        let _ = writeln!(o, "## Failed samples\n\n{}\n", failures.join("\n"));
    }
    o
}

/// Replaces the text between `key`'s [`docs_markers`] in `doc` with `report` (its top heading
/// demoted one level), or appends the block when the markers are absent.
pub fn splice(doc: &str, key: &str, report: &str) -> String {
    let (begin, end) = docs_markers(key);
    splice_between(doc, &begin, &end, report)
}

/// Replaces the text between `begin` and `end` in `doc` with `report` (its top heading demoted
/// one level), or appends the block when the markers are absent.
pub fn splice_between(doc: &str, begin: &str, end: &str, report: &str) -> String {
    let body: String = report
        .lines()
        .map(|l| {
            if l.starts_with('#') {
                format!("#{l}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let block = format!("{begin}\n{body}{end}");
    match (doc.find(begin), doc.find(end)) {
        (Some(a), Some(b)) if a < b => format!("{}{block}{}", &doc[..a], &doc[b + end.len()..]),
        _ => format!("{}\n\n{block}\n", doc.trim_end()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::stats::{Row, Spread};
    use super::*;

    #[test]
    fn a_share_over_100_percent_is_marked_and_explained() {
        let spread = |m: f64| {
            Some(Spread {
                median: m,
                min: m,
                max: m,
            })
        };
        for (share, cell, over) in [
            (None, "–", false),
            (spread(0.98), "98%", false),
            (spread(1.004), "100%", false),
            (spread(1.05), "105% †", true),
        ] {
            assert_eq!(share_cell(share), (cell.to_string(), over), "{share:?}");
        }
        let row = |server: &str, share: f64| Row {
            server: server.into(),
            samples: 1,
            share: spread(share),
            ..Row::default()
        };
        let mut record = Record {
            workloads: vec![WorkloadResult {
                name: "w".into(),
                title: "W".into(),
                pipeline: 1,
                rows: vec![row("floor", 1.05), row("linerate", 0.99)],
                baseline: None,
                charts: Vec::new(),
            }],
            ..Record::default()
        };
        let md = markdown(&record, "");
        assert!(md.contains("| 105% † |") && md.contains("| 99% |"), "{md}");
        assert!(
            md.contains(SHARE_OVER_NOTE),
            "the mark is explained under the table"
        );
        assert!(md.contains("share = proc ÷ busy"), "the legend defines it");
        record.workloads[0].rows[0].share = spread(0.97);
        assert!(
            !markdown(&record, "").contains(SHARE_OVER_NOTE),
            "no mark, no note"
        );
    }

    #[test]
    fn splice_replaces_between_markers_and_keeps_the_rest() {
        let (b, e) = docs_markers("default");
        let doc = format!("intro\n{b}\nold\n{e}\noutro\n");
        let out = splice(&doc, "default", "# T\nnew\n");
        assert_eq!(out, format!("intro\n{b}\n## T\nnew\n{e}\noutro\n"));
        assert_eq!(splice(&out, "default", "# T\nnew\n"), out, "idempotent");
        let two = splice(&out, "static", "# S\n");
        assert!(
            two.contains("## T\nnew") && two.contains("## S\n"),
            "suites keep their own blocks"
        );
        let appended = splice("intro\n", "default", "x\n");
        assert!(appended.starts_with("intro\n\n"));
        assert!(appended.ends_with(&format!("x\n{e}\n")));
    }
}
