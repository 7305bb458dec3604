//! A request's life as named phases, in the order `Service::request` (`app/dispatch.rs`)
//! calls them; each file owns one decision, and any phase may answer (skipping to headers):
//!
//! ```text
//! accept → site → access → layers → rewrite → content → headers → log
//!                    └─ below a proxy mount ──→ content/proxy.rs
//! content: route (defer, websocket) | files | methods | proxy;  body: a body still to come
//! ```
//!
//! Must not grow a hub again: a new content handler (gRPC) is a file in `content/` and an arm
//! of `ConnApp::content`; a new phase (a cache lookup before content, its store after
//! compression in `headers.rs`) is a file here and one call in the sequence.
#![forbid(unsafe_code)]

pub(crate) mod accept;
pub(crate) mod access;
pub(crate) mod content;
pub(crate) mod headers;
pub(crate) mod layers;
pub(crate) mod log;
pub(crate) mod log_sent;
pub(crate) mod rewrite;
pub(crate) mod site;
