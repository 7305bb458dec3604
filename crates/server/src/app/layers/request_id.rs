//! [`RequestId`]: a request id per request, attached for handlers as [`RequestIdValue`] and
//! sent back in `X-Request-Id`. A client's (or a balancer's) own id is kept when it is 1 to
//! [`REQUEST_ID_MAX_BYTES`] visible ASCII bytes; otherwise one is made: this thread's random
//! 64-bit prefix and a counter, so ids are unique without a shared counter between workers.
//!
//! Invariant: one id per request, whichever layer asks first ([`request_id`]: this layer, or
//! [`Trace`](super::Trace) for its span), so the span and `X-Request-Id` always agree.
#![forbid(unsafe_code)]

use std::cell::Cell;
use std::hash::{BuildHasher, RandomState};

use crate::layer::{Extensions, Layer};
use crate::request::Request;
use crate::response::Response;

/// Longest request id kept from the request (longer ones are replaced, as are ids with
/// spaces or controls, so a log line never carries a client's payload).
pub const REQUEST_ID_MAX_BYTES: usize = 64;

/// The request-id layer (`X-Request-Id` in and out).
#[derive(Clone, Copy, Debug, Default)]
pub struct RequestId;

/// The request's id, for handlers: `req.extension::<RequestIdValue>()`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestIdValue(pub String);

thread_local! {
    /// This thread's id prefix (random) and next counter value.
    static NEXT: Cell<(u64, u64)> = Cell::new((RandomState::new().hash_one(std::thread::current().id()), 0));
}

/// A new id: 16 hex digits of this thread's prefix, `-`, the counter in hex.
fn make_id() -> String {
    let (prefix, n) = NEXT.get();
    NEXT.set((prefix, n.wrapping_add(1)));
    format!("{prefix:016x}-{n:x}")
}

/// Whether a client's id is kept as it is.
fn sane(id: &[u8]) -> bool {
    !id.is_empty()
        && id.len() <= REQUEST_ID_MAX_BYTES
        && id.iter().all(|b| (0x21..0x7f).contains(b))
}

/// The request's id: the one a layer already attached to `ext`, else the client's (when
/// sane) or a new one, attached now. Whichever of [`RequestId`] and [`Trace`](super::Trace)
/// runs first decides it, in either order of the two.
pub(crate) fn request_id<'e>(req: &Request<'_>, ext: &'e mut Extensions) -> &'e str {
    if ext.get::<RequestIdValue>().is_none() {
        let id = match req.header("x-request-id") {
            Some(id) if sane(id) => String::from_utf8_lossy(id).into_owned(),
            _ => make_id(),
        };
        ext.insert(RequestIdValue(id));
    }
    match ext.get::<RequestIdValue>() {
        Some(RequestIdValue(id)) => id,
        None => unreachable!("attached above"),
    }
}

impl Layer for RequestId {
    fn before(&self, req: &Request<'_>, ext: &mut Extensions) -> Option<Response> {
        request_id(req, ext);
        None
    }

    fn after(&self, ext: &Extensions, resp: &mut Response) {
        if let Some(RequestIdValue(id)) = ext.get::<RequestIdValue>() {
            let _ = resp.set_header("X-Request-Id", id.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_kept_when_sane_and_made_unique_otherwise() {
        assert!(sane(b"abc-123"));
        assert!(sane(&[b'a'; REQUEST_ID_MAX_BYTES]));
        assert!(!sane(&[b'a'; REQUEST_ID_MAX_BYTES + 1]));
        assert!(!sane(b""));
        assert!(!sane(b"a b"));
        assert!(!sane(b"a\x01"));
        let (a, b) = (make_id(), make_id());
        assert_ne!(a, b);
        assert_eq!(a.len(), 18);
    }
}
