//! HTTP/1.1 as a client: one connection to an upstream server, the proxy's outbound side, as
//! a sans-I/O state machine beside `h1` (the server's side) and `h2`.
//!
//! A request goes out as the head the caller framed (`crate::proxy` decides its fields) and a
//! body this connection frames (`Content-Length` or chunked) as it is given, piece by piece;
//! the response comes back read as strictly as requests are (`parse_response_strict`: no bare
//! LF, no obs-fold, no coding but chunked, no length with chunked, no two lengths) and is
//! handed to the [`Exchange`] that owns the request, head then body pieces then the end, with
//! backpressure: an exchange that cannot take more stops the reading until
//! [`Conn::resume`]. A malformed response is an error and is never forwarded, a response cut
//! short is an error (never a truncated body passed off as whole), and a connection is
//! reusable only after a complete exchange. One request at a time: no pipelining upstream.
//!
//! The driver's upstream side (`driver/upstream.rs`) owns these connections: their sockets,
//! timers and keep-alive pools.

mod conn;
#[cfg(test)]
mod tests;

pub(crate) use conn::{Conn, Exchange, Phase, ReqBody, Timeouts, Transmit, UpError};
