//! WebSocket routes in a build without the `websocket` feature: `Router::ws` is not there, so
//! no route is a WebSocket one and no handshake is accepted. A `WsRoute` and an `Upgrade`
//! cannot be made, so the content phase's and the driver's WebSocket paths are dead code the
//! compiler drops; an HTTP/2 connection never announces extended CONNECT (no route takes it).
//!
//! Each item has its counterpart's name in `websocket/mod.rs`.
#![forbid(unsafe_code)]

use std::convert::Infallible;

/// Cannot be made: no route speaks WebSocket.
pub(crate) enum WsRoute {}

/// Cannot be made: no handshake is accepted. Its fields are the ones the driver reads
/// before it hands a stream over (`driver::tunnels`).
pub(crate) struct Upgrade {
    pub id: u64,
    #[allow(dead_code)] // read by `H2Live::open_tunnel` only
    pub fields: Vec<(String, String)>,
    never: Infallible,
}

impl Upgrade {
    pub(crate) fn never(&self) -> ! {
        match self.never {}
    }
}
