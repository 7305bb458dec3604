//! The rate limits' counters as `/metrics` shows them: one
//! `linerate_rate_limited_total{rule="…"}` per rule, node-local and fleet alike, and each
//! fleet rule's mode (`linerate_rate_limit_fleet_mode`: 1 while its counts are kept in Redis,
//! 0 while the node applies its local share).
//!
//! Kept per process, by label: a reload that keeps a rule's label keeps its count (a counter
//! must not go back); a rule no configuration has any more is no longer shown. Must not be
//! touched by a request no rule refuses.
#![forbid(unsafe_code)]

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// A rule's mode: counted on this node only.
pub(crate) const NODE: u8 = 0;
/// A fleet rule counted in Redis.
pub(crate) const FLEET: u8 = 1;
/// A fleet rule falling back to the node's local share (Redis down or slow).
pub(crate) const LOCAL_SHARE: u8 = 2;

/// One rule's counters.
#[derive(Debug)]
pub(crate) struct RuleStats {
    /// The `rule` label: the rule's `name`, else `SITE PREFIX` (the site's first name, `_`
    /// for a site without names, as the cache metrics' labels).
    pub label: Box<str>,
    /// Requests it refused with 429.
    pub refused: AtomicU64,
    /// [`NODE`], [`FLEET`] or [`LOCAL_SHARE`].
    pub mode: AtomicU8,
}

static RULES: Mutex<Vec<Arc<RuleStats>>> = Mutex::new(Vec::new());

/// The counters of the rule labelled `label` (those it had before a reload, when it had
/// some), in `mode`.
pub(crate) fn register(label: &str, mode: u8) -> Arc<RuleStats> {
    let mut rules = RULES.lock().unwrap_or_else(|e| e.into_inner());
    // Rules no configuration holds any more.
    rules.retain(|r| Arc::strong_count(r) > 1);
    if let Some(r) = rules.iter().find(|r| &*r.label == label) {
        r.mode.store(mode, Relaxed);
        return Arc::clone(r);
    }
    let r = Arc::new(RuleStats {
        label: label.into(),
        refused: AtomicU64::new(0),
        mode: AtomicU8::new(mode),
    });
    rules.push(Arc::clone(&r));
    r
}

/// The rules' samples, in Prometheus's text format.
pub(crate) fn render(o: &mut String) {
    let rules: Vec<Arc<RuleStats>> = RULES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|r| Arc::strong_count(r) > 1)
        .cloned()
        .collect();
    let _ = writeln!(
        o,
        "# HELP linerate_rate_limited_total Requests refused with 429 by a site's rate limit, by rule (its name, else its site and prefix).\n\
         # TYPE linerate_rate_limited_total counter"
    );
    for r in &rules {
        let _ = writeln!(
            o,
            "linerate_rate_limited_total{{rule=\"{}\"}} {}",
            escape(&r.label),
            r.refused.load(Relaxed)
        );
    }
    let _ = writeln!(
        o,
        "# HELP linerate_rate_limit_fleet_mode A fleet-wide rate limit's mode: 1 counted in Redis, 0 the node's local share (Redis down or slow).\n\
         # TYPE linerate_rate_limit_fleet_mode gauge"
    );
    for r in rules.iter().filter(|r| r.mode.load(Relaxed) != NODE) {
        let _ = writeln!(
            o,
            "linerate_rate_limit_fleet_mode{{rule=\"{}\"}} {}",
            escape(&r.label),
            u8::from(r.mode.load(Relaxed) == FLEET)
        );
    }
}

/// A label value as Prometheus's text format writes it.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reload_that_keeps_a_rules_label_keeps_its_count_and_a_dropped_rule_goes() {
        let label = "ratelimit_metrics test /reload";
        let before = register(label, NODE);
        before.refused.fetch_add(3, Relaxed);
        // The new configuration's rule, built while the old one still serves.
        let after = register(label, FLEET);
        assert!(Arc::ptr_eq(&before, &after));
        assert_eq!(after.mode.load(Relaxed), FLEET);
        drop(before);
        let mut o = String::new();
        render(&mut o);
        let sample = format!("linerate_rate_limited_total{{rule=\"{label}\"}} 3");
        assert!(o.lines().any(|l| l == sample), "{o}");
        assert!(o.contains(&format!(
            "linerate_rate_limit_fleet_mode{{rule=\"{label}\"}} 1"
        )));
        // No configuration holds it any more: not shown.
        drop(after);
        let mut o = String::new();
        render(&mut o);
        assert!(!o.contains(label), "{o}");
    }

    #[test]
    fn labels_are_escaped() {
        assert_eq!(escape("a \"b\" \\ c"), "a \\\"b\\\" \\\\ c");
    }
}
