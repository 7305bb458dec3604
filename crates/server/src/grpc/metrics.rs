//! Per-method call counts and latency histograms by `grpc-status`, for `/metrics`: one
//! [`MethodStats`] per method the router registers, and one for every call to a path it
//! does not have (bounded: a client cannot make new series).
//!
//! Owns the counters and their text; not when a call ends (`run.rs`, `stream.rs`,
//! `content/grpc.rs` record it). A count is two relaxed `fetch_add`s on the calling thread's
//! shard (threads spread over [`SHARDS`] cache-line-aligned blocks, so workers rarely share
//! a line); nothing is allocated per call.
#![forbid(unsafe_code)]

use std::cell::Cell;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering::Relaxed};

use crate::stats::DURATION_BUCKETS_US;

use super::{Code, Status};

/// The message of a call whose handler panicked.
pub(crate) const PANICKED: &str = "the handler panicked";

/// Blocks of counters per method; a thread writes the one its index picks.
pub(crate) const SHARDS: usize = 8;
/// The method label of calls to a path the router does not serve.
pub(crate) const UNKNOWN: &str = "unknown";
/// Status codes counted (0..=16).
const CODES: usize = 17;
/// Histogram buckets per code: [`DURATION_BUCKETS_US`] and `+Inf`.
const BUCKETS: usize = DURATION_BUCKETS_US.len() + 1;

/// One shard: per code, its buckets (not cumulative) and the sum of its durations in µs.
#[repr(align(64))]
struct Shard {
    buckets: [[AtomicU64; BUCKETS]; CODES],
    sum_us: [AtomicU64; CODES],
}

/// One method's counters, and the status its calls end with when its handler panics (set
/// by [`Router::grpc_panic_status`](crate::Router::grpc_panic_status); kept here because
/// every place that ends a call holds this).
pub(crate) struct MethodStats {
    path: &'static str,
    /// Metrics are on (an admin listener): calls off the worker's content phase ask this.
    on: AtomicBool,
    /// The code of a call whose handler panicked (INTERNAL unless set).
    panic_code: AtomicU8,
    shards: Box<[Shard]>,
}

impl std::fmt::Debug for MethodStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MethodStats")
            .field("path", &self.path)
            .finish()
    }
}

thread_local! {
    /// This thread's shard, picked on its first count.
    static SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// Threads that have counted, for handing out shards in turn.
static THREADS: AtomicUsize = AtomicUsize::new(0);

fn shard() -> usize {
    SHARD.with(|s| {
        let mut i = s.get();
        if i == usize::MAX {
            i = THREADS.fetch_add(1, Relaxed) % SHARDS;
            s.set(i);
        }
        i
    })
}

impl MethodStats {
    pub(crate) fn new(path: &'static str) -> Arc<MethodStats> {
        let shards = (0..SHARDS)
            .map(|_| Shard {
                buckets: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
                sum_us: std::array::from_fn(|_| AtomicU64::new(0)),
            })
            .collect();
        Arc::new(MethodStats {
            path,
            on: AtomicBool::new(false),
            panic_code: AtomicU8::new(Code::Internal as u8),
            shards,
        })
    }

    /// Sets the code a call whose handler panicked ends with.
    pub(crate) fn set_panic_code(&self, code: Code) {
        self.panic_code.store(code as u8, Relaxed);
    }

    /// The code a call whose handler panicked ends with.
    pub(crate) fn panic_code(&self) -> Code {
        Code::from_i32(i32::from(self.panic_code.load(Relaxed)))
    }

    /// A panic of this method's handler, logged and counted
    /// (`linerate_handler_panics_total{kind="grpc"}`): the code its call ends with.
    #[cold]
    pub(crate) fn count_panic(&self) -> Code {
        let code = self.panic_code();
        tracing::error!(
            method = self.path,
            "gRPC handler panicked; the call ends {code}"
        );
        crate::app::panics::count(crate::app::panics::Panic::Grpc);
        code
    }

    /// The status of a call whose handler panicked, logged and counted.
    #[cold]
    pub(crate) fn panicked(&self) -> Status {
        Status::new(self.count_panic(), PANICKED)
    }

    /// Whether calls are counted (the server has metrics on).
    #[inline(always)]
    pub(crate) fn on(&self) -> bool {
        self.on.load(Relaxed)
    }

    /// The time a call starts, when calls are counted.
    pub(crate) fn start(&self) -> Option<u64> {
        self.on().then(crate::sys::monotonic_us)
    }

    /// A call ended with `code`, `us` after its head was in.
    pub(crate) fn record(&self, code: Code, us: u64) {
        let s = &self.shards[shard()];
        let c = code as usize;
        let b = DURATION_BUCKETS_US
            .iter()
            .position(|&le| us <= le)
            .unwrap_or(BUCKETS - 1);
        s.buckets[c][b].fetch_add(1, Relaxed);
        s.sum_us[c].fetch_add(us, Relaxed);
    }

    /// A call that started at `started` (from [`MethodStats::start`]) ended with `code`.
    pub(crate) fn ended(&self, started: Option<u64>, code: Code) {
        if let Some(t) = started {
            self.record(code, crate::sys::monotonic_us().saturating_sub(t));
        }
    }
}

/// A router's methods' counters, in registration order, and the unknown paths'.
#[derive(Clone, Debug)]
pub(crate) struct CallStats {
    pub(crate) methods: Vec<Arc<MethodStats>>,
    pub(crate) unknown: Arc<MethodStats>,
}

impl Default for CallStats {
    fn default() -> CallStats {
        CallStats {
            methods: Vec::new(),
            unknown: MethodStats::new(UNKNOWN),
        }
    }
}

impl CallStats {
    /// Counts calls from now on (the server has an admin listener).
    pub(crate) fn turn_on(&self) {
        for m in self.methods.iter().chain([&self.unknown]) {
            m.on.store(true, Relaxed);
        }
    }

    /// The counters as Prometheus text: `linerate_grpc_calls_total{method,code}` and the
    /// `linerate_grpc_call_duration_seconds` histogram by method and code; only the series a
    /// call has reached, plus OK's for every method (so each method is listed from the
    /// start).
    pub(crate) fn render(&self, o: &mut String) {
        let rows: Vec<(&str, usize, [u64; BUCKETS], u64)> = self
            .methods
            .iter()
            .chain([&self.unknown])
            .flat_map(|m| {
                (0..CODES).filter_map(move |c| {
                    let mut buckets = [0; BUCKETS];
                    let mut sum = 0;
                    for s in m.shards.iter() {
                        for (v, a) in buckets.iter_mut().zip(&s.buckets[c]) {
                            *v += a.load(Relaxed);
                        }
                        sum += s.sum_us[c].load(Relaxed);
                    }
                    let n: u64 = buckets.iter().sum();
                    let listed = n > 0 || (c == 0 && m.path != UNKNOWN);
                    listed.then_some((m.path, c, buckets, sum))
                })
            })
            .collect();
        let name = |c: usize| Code::from_i32(c as i32).name();
        let _ = writeln!(
            o,
            "# HELP linerate_grpc_calls_total gRPC calls by method and grpc-status.\n# TYPE linerate_grpc_calls_total counter"
        );
        for (path, c, buckets, _) in &rows {
            let n: u64 = buckets.iter().sum();
            let _ = writeln!(
                o,
                "linerate_grpc_calls_total{{method=\"{path}\",code=\"{}\"}} {n}",
                name(*c)
            );
        }
        let _ = writeln!(
            o,
            "# HELP linerate_grpc_call_duration_seconds gRPC call time, head in to status out, by method and grpc-status.\n# TYPE linerate_grpc_call_duration_seconds histogram"
        );
        for (path, c, buckets, sum) in &rows {
            let labels = format!("method=\"{path}\",code=\"{}\"", name(*c));
            let mut cumulative = 0;
            for (le, n) in DURATION_BUCKETS_US.iter().zip(buckets) {
                cumulative += n;
                let _ = writeln!(
                    o,
                    "linerate_grpc_call_duration_seconds_bucket{{{labels},le=\"{}\"}} {cumulative}",
                    *le as f64 / 1e6
                );
            }
            cumulative += buckets[BUCKETS - 1];
            let _ = writeln!(
                o,
                "linerate_grpc_call_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {cumulative}"
            );
            let _ = writeln!(
                o,
                "linerate_grpc_call_duration_seconds_sum{{{labels}}} {}",
                *sum as f64 / 1e6
            );
            let _ = writeln!(
                o,
                "linerate_grpc_call_duration_seconds_count{{{labels}}} {cumulative}"
            );
        }
    }
}

#[cfg(test)]
mod tests;
