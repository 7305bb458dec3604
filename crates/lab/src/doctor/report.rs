//! Renders findings: a text report grouped by the nine steps, or JSON (`{"summary", "findings"}`).
//! Rendering only; what to check and how to judge it lives in the check modules.

use std::fmt::Write as _;

use serde::Serialize;

use super::{Finding, Status, Step};

/// Indent of the `seen/why/fix` lines under a finding's title.
const DETAIL_INDENT: &str = "           ";

/// Counts of findings by status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub ok: usize,
    pub warn: usize,
    pub bad: usize,
    pub unknown: usize,
}

impl Summary {
    fn of(findings: &[Finding]) -> Summary {
        let mut s = Summary::default();
        for f in findings {
            *match f.status {
                Status::Ok => &mut s.ok,
                Status::Warn => &mut s.warn,
                Status::Bad => &mut s.bad,
                Status::Unknown => &mut s.unknown,
            } += 1;
        }
        s
    }
}

#[derive(Serialize)]
struct JsonReport<'a> {
    summary: Summary,
    findings: &'a [Finding],
}

/// The findings as pretty JSON, newline-terminated.
pub fn json(findings: &[Finding]) -> serde_json::Result<String> {
    let report = JsonReport {
        summary: Summary::of(findings),
        findings,
    };
    Ok(serde_json::to_string_pretty(&report)? + "\n")
}

/// The text report: a heading per step, then per finding its status, title and severity, what was
/// seen, and (unless it is ok) why it matters and how to change it.
pub fn text(findings: &[Finding]) -> String {
    let mut out =
        String::from("linerate lab doctor: host audit (read-only; nothing was changed)\n");
    for step in Step::ALL {
        let in_step: Vec<&Finding> = findings.iter().filter(|f| f.step == step).collect();
        if in_step.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\n{}", step.heading());
        for f in in_step {
            let _ = writeln!(
                out,
                "  [{:<7}] {} ({}, {})",
                f.status.label(),
                f.title,
                f.id,
                f.severity.label()
            );
            let _ = writeln!(out, "{DETAIL_INDENT}seen: {}", f.observed);
            if f.status != Status::Ok {
                let _ = writeln!(out, "{DETAIL_INDENT}why:  {}", f.why);
                let _ = writeln!(out, "{DETAIL_INDENT}fix:  {}", f.fix);
            }
        }
    }
    let s = Summary::of(findings);
    let _ = writeln!(
        out,
        "\n{} ok, {} warn, {} bad, {} unknown",
        s.ok, s.warn, s.bad, s.unknown
    );
    out
}
