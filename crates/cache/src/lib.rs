//! HTTP caching (RFC 9111) for linerate, sans I/O: what a shared cache decides, and a bounded
//! memory store. Request and response heads come in as plain data (method, scheme, authority,
//! target, `(name, value)` fields, status) with "now" passed in; decisions come out. No
//! sockets, clocks, threads or async here, and no dependency on the server.
#![forbid(unsafe_code)]

pub mod cache_control;
pub mod fields;

/// An instant, in whole seconds since the Unix epoch: HTTP dates and ages have one-second
/// resolution (RFC 9110 §5.6.7, RFC 9111 §1.2.2). The caller reads the clock and passes it in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub u64);

impl Time {
    /// `self - earlier` in seconds, 0 when `earlier` is later.
    pub fn since(self, earlier: Time) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}
