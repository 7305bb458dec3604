//! Handlers that panicked, counted for `/metrics`: `linerate_handler_panics_total`, by
//! `kind` (`http`: a route's handler, layer or body sink, answered 500; `grpc`: a gRPC
//! method's handler, its call ended with the router's panic status, INTERNAL by default).
//!
//! Kept per process, as the rate limits' counters: a panic is rare, and counting it must
//! cost nothing on any other path (one relaxed add, on the panic's path only).
#![forbid(unsafe_code)]

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// What panicked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Panic {
    /// A route's handler (sync, async, deferred or streaming), a layer, or a body sink.
    Http = 0,
    /// A gRPC method's handler.
    #[cfg_attr(not(feature = "grpc"), allow(dead_code))]
    Grpc = 1,
}

static PANICS: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

/// Counts one panic of `kind`.
#[cold]
pub(crate) fn count(kind: Panic) {
    PANICS[kind as usize].fetch_add(1, Relaxed);
}

/// The family, in Prometheus's text format.
pub(crate) fn render(o: &mut String) {
    let _ = writeln!(
        o,
        "# HELP linerate_handler_panics_total Handlers that panicked: http (answered 500), grpc (the call ended with the panic status, INTERNAL by default)."
    );
    let _ = writeln!(o, "# TYPE linerate_handler_panics_total counter");
    for (kind, n) in ["http", "grpc"].iter().zip(&PANICS) {
        let _ = writeln!(
            o,
            "linerate_handler_panics_total{{kind=\"{kind}\"}} {}",
            n.load(Relaxed)
        );
    }
}
