//! ACME orders counted by outcome for `/metrics` (`linerate_acme_orders_total{outcome}`):
//! `issued` (a certificate obtained and stored) and `failed` (the CA, the
//! account, the fleet's lock or the store refused; the manager tries again after its
//! backoff). A certificate another node of the fleet ordered is no order of this one's.
//!
//! Kept per process, as the rate limits' counters are; shown once a manager with an ACME
//! site runs (the local CA's certificates are not ACME orders).
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// The outcomes counted, as the `outcome` label names them.
pub const OUTCOMES: [&str; 2] = ["issued", "failed"];

static COUNTS: [AtomicU64; OUTCOMES.len()] = [const { AtomicU64::new(0) }; OUTCOMES.len()];
static RUNNING: AtomicBool = AtomicBool::new(false);

/// A manager with at least one ACME site runs: the counts are shown from now on.
pub(crate) fn running() {
    RUNNING.store(true, Relaxed);
}

/// An order ended: a certificate `issued`, or failed.
pub(crate) fn ended(issued: bool) {
    COUNTS[usize::from(!issued)].fetch_add(1, Relaxed);
}

/// Each outcome and its count, in [`OUTCOMES`]' order; `None` while no manager with an ACME
/// site runs in this process.
pub fn counts() -> Option<[(&'static str, u64); OUTCOMES.len()]> {
    RUNNING
        .load(Relaxed)
        .then(|| std::array::from_fn(|i| (OUTCOMES[i], COUNTS[i].load(Relaxed))))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The only test touching this process's counts: shown once running, each outcome
    /// counted under its own label.
    #[test]
    fn orders_count_by_outcome_once_a_manager_runs() {
        let before = COUNTS.each_ref().map(|c| c.load(Relaxed));
        running();
        ended(true);
        ended(false);
        ended(false);
        let got = counts().expect("shown while running");
        assert_eq!(got[0], ("issued", before[0] + 1));
        assert_eq!(got[1], ("failed", before[1] + 2));
    }
}
