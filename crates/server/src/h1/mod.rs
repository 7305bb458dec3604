//! The HTTP/1.1 server connection, sans I/O: one state machine per connection that takes
//! bytes and the time and gives back what to transmit and when to be woken.
//!
//! It owns every protocol rule of a server connection — keep-alive, pipelining answered strictly
//! in request order, HEAD, 100-continue, body framing and limits, the header/body/idle/send/
//! linger/deferred timeouts, max requests per connection, graceful drain and the lingering
//! close — and nothing else: no sockets, no clocks, no routing. Requests go out to a
//! [`Service`] (the application, `crate::app`), whose answers come back at once or later,
//! tagged by request id; the driver (`crate::driver`) moves the bytes.
//!
//! Files: `service` (the connection's interface to the driver and the application), `conn`
//! (the state machine: `conn/read` reads requests, `conn/write` places answers), `pace`
//! (the send timer's gap and minimum rate, shared with HTTP/2), `queue`
//! (answers held behind an unanswered deferred request), `encode` (response heads), `tests`
//! (byte tables).

mod conn;
mod encode;
mod pace;
pub(crate) mod queue;
mod service;
#[cfg(test)]
mod tests;

#[cfg_attr(not(feature = "http2"), allow(unused_imports))]
pub(crate) use conn::{Conn, STREAM_ROOM, TOO_LARGE, Timer, Transmit, status_response};
#[cfg_attr(not(feature = "http2"), allow(unused_imports))]
pub(crate) use encode::{AltSvc, Stamp, names_field, names_server};
#[cfg_attr(not(feature = "http2"), allow(unused_imports))]
pub(crate) use pace::SendPace;
pub(crate) use service::{ConnConfig, Cx, Decision, Exchange, Service, StreamHead, request_line};
