//! What a connection's transport (plain TCP, or TLS in `tls.rs`) reports of the operations
//! the connection hands it, shared by `tls.rs` and, in a build without the `tls` feature,
//! `tls_off.rs`. Owns only these shapes; the transports own the bytes.
#![forbid(unsafe_code)]

use super::backend::Submitted;

/// How an operation the connection asked for went.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Outcome<T> {
    /// Finished at once.
    Done(T),
    /// Finishes later: a backend completion for the connection brings it (`Transport::completed`).
    InFlight,
    /// The connection is broken.
    Failed,
}

/// What a backend completion finished, at the connection's level.
#[cfg_attr(not(feature = "tls"), allow(dead_code))] // Only TLS makes these.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Finished {
    /// Nothing the connection asked for (TLS's own records went out).
    Nothing,
    /// The bytes of `Transport::send` are out; the buffer comes back.
    Bytes(Vec<u8>),
    /// `n` bytes of the file range of `Transport::sendfile` are out.
    File(u64),
    /// `Transport::shutdown` is done.
    Shut,
    Failed,
}

/// What `Transport::receive` or `Transport::record` found besides plaintext.
#[cfg_attr(not(feature = "tls"), allow(dead_code))] // Only TLS makes these.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Input {
    More,
    /// No more input: the peer's close_notify, or (kernel TLS without rekeying) a key update
    /// the kernel cannot follow.
    End,
}

/// A backend's answer to a submitted operation, as the connection's outcome.
pub(crate) fn submitted<T>(s: Submitted<T>) -> Outcome<T> {
    match s {
        Submitted::Done(t) => Outcome::Done(t),
        Submitted::Pending => Outcome::InFlight,
        Submitted::Failed => Outcome::Failed,
    }
}
