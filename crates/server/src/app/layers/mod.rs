//! The built-in [`Layer`](crate::Layer)s: [`Cors`] (the CORS protocol of the Fetch Standard:
//! preflights answered with the layer's policy, allowed origins echoed), [`RequestId`] (an
//! `X-Request-Id` per request, the client's kept when it is sane) and [`Trace`] (a `tracing`
//! span per request, with the access log's fields).
//!
//! Owns nothing shared: each is a policy read by every worker, with its per-request state in
//! the request's extensions.

mod cors;
mod request_id;
mod trace;

pub use cors::Cors;
pub use request_id::{REQUEST_ID_MAX_BYTES, RequestId, RequestIdValue};
pub use trace::{Trace, TraceSpan};
