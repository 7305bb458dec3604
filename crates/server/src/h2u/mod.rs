//! HTTP/2 as a client ("HTTP/2 upstream"): one connection to an upstream server, h2c or over
//! TLS, many requests multiplexed on it, as a sans-I/O state machine beside `h1c` (HTTP/1.1
//! upstreams) and `h2` (the server's side). The proxy's gRPC and HTTP/2 upstreams need it.
//!
//! A request opens a stream with a head the caller gives (pseudo-headers and fields, HPACK-
//! encoded here) and a body sent within both send windows, with backpressure (`send` takes what
//! fits, `Events::writable` says when more will); the response comes back as events per stream
//! id — heads (1xx included), DATA pieces, trailers, end, or a failure that says whether the
//! request may go elsewhere (`StreamError::retryable`). Receive windows reopen only as the
//! caller reports bytes consumed, so a slow client downstream holds its upstream stream to one
//! window, never this connection's memory. Responses are read as strictly as the server reads
//! requests (`fields`), and the server's defences apply to the upstream (`h2::stream`'s limits).
//!
//! The driver owns these connections in `driver/upstream_h2.rs` (an upstream with
//! `protocol = "h2c"`); the gRPC client drives one per channel on a tokio task
//! (`grpc/client/h2.rs`, feature `grpc-client`).
#![allow(dead_code)] // parts of the API only the tests and the fuzz target use (PING, trailers up)

mod cancel;
mod conn;
mod fields;
/// The fuzz target's checks (`fuzz/fuzz_targets/h2u_frames.rs`), run on the seeds by tests.
pub(crate) mod fuzz;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod wire_tests;

#[allow(unused_imports)] // named limits, for the docs and the tests
pub(crate) use cancel::{MAX_ABANDONED, RESET_BUDGET};
#[allow(unused_imports)] // the driver's API, until it drives it
pub(crate) use conn::{
    ASSUMED_MAX_STREAMS, CONN_WINDOW, Conn, ConnError, Events, MAX_HEADER_LIST, OpenError,
    STREAM_WINDOW, Settings, StreamError,
};
#[cfg(test)]
pub(crate) use fields::encode_request;
#[allow(unused_imports)]
pub(crate) use fields::{Fields, Malformed, Request};
