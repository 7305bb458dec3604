//! WebSocket connections on the worker in a build without the `websocket` feature: no route
//! can accept a handshake (`Router::ws` is not there), so no upgrade is handed over and no
//! connection or HTTP/2 stream becomes a WebSocket one. `WsLive` cannot be made, so the
//! driver's WebSocket arms (`Boxed::Ws`, a stream's tunnel) are dead code the compiler drops.
//!
//! Each item has its counterpart's signature in ws.rs.
#![forbid(unsafe_code)]

use std::convert::Infallible;

use super::proto::Drive;
use super::{Live, Parts};
use crate::app::Pending;
use crate::h1::{Cx, Service, Transmit};
use crate::websocket::Upgrade;
use linerate_http1::RequestHead;

/// Cannot be made (see the module doc).
pub(crate) struct WsLive {
    never: Infallible,
}

/// Nothing to hand over: an upgrade cannot be made.
#[cold]
#[inline(never)]
pub(super) fn hand_over<B: super::Backend>(_live: &mut Live, p: &mut Parts<'_, B>) -> bool {
    if let Some(up) = p.svc.io.upgrades.pop() {
        up.never()
    }
    true
}

/// Cannot be called: an upgrade cannot be made.
#[cold]
#[inline(never)]
pub(super) fn accepted_late<B: super::Backend>(
    _live: &mut Live,
    up: Upgrade,
    _id: u64,
    _resp: crate::Response,
    _p: &mut Parts<'_, B>,
) {
    up.never()
}

impl WsLive {
    #[allow(dead_code)] // as `H2Live::open_tunnel`, its caller
    pub(super) fn opened(
        up: Upgrade,
        _to: (u64, u64),
        _inbox: &std::sync::Arc<crate::app::deferred::Inbox>,
        _out: Vec<u8>,
        _cx: &Cx,
    ) -> WsLive {
        up.never()
    }

    pub(crate) fn recv(&mut self, _input: &[u8], _cx: &mut Cx) {
        match self.never {}
    }

    pub(crate) fn eof(&mut self) {
        match self.never {}
    }

    pub(crate) fn on_timer(&mut self, _cx: &mut Cx) {
        match self.never {}
    }

    pub(crate) fn drain(&mut self, _cx: &mut Cx) {
        match self.never {}
    }

    pub(crate) fn deadline(&self) -> u64 {
        match self.never {}
    }

    pub(crate) fn sendable(&self) -> bool {
        match self.never {}
    }

    pub(crate) fn push_frames(&mut self, _frames: &[u8], _cx: &mut Cx) -> bool {
        match self.never {}
    }

    pub(crate) fn sender_closed(&mut self, _cx: &mut Cx) -> bool {
        match self.never {}
    }

    #[cfg_attr(not(feature = "http2"), allow(dead_code))]
    pub(super) fn requeue(&self) {
        match self.never {}
    }

    pub(crate) fn release(&mut self, _pool: &mut crate::pool::Pool) {
        match self.never {}
    }

    #[cfg_attr(not(feature = "http2"), allow(dead_code))]
    pub(super) fn tunnel_transmit(&mut self) -> Transmit<'_> {
        match self.never {}
    }

    #[cfg_attr(not(feature = "http2"), allow(dead_code))]
    pub(super) fn tunnel_output(&mut self, _cx: &mut Cx) -> Vec<u8> {
        match self.never {}
    }

    #[cfg_attr(not(feature = "http2"), allow(dead_code))]
    pub(super) fn tunnel_sent(&mut self, _cx: &mut Cx) {
        match self.never {}
    }

    #[cfg_attr(not(feature = "http2"), allow(dead_code))]
    pub(super) fn tunnel_shut(&mut self, _cx: &mut Cx) {
        match self.never {}
    }
}

impl Drive for WsLive {
    fn poll_transmit(&mut self, _: &mut Cx) -> Transmit<'_> {
        match self.never {}
    }
    fn take_output(&mut self, _: &mut Cx) -> Vec<u8> {
        match self.never {}
    }
    fn sent(&mut self, _: u64, _: &mut Cx) {
        match self.never {}
    }
    fn stalled(&mut self, _: &Cx) {
        match self.never {}
    }
    fn file_sent(&mut self, _: u64, _: &mut Cx) {
        match self.never {}
    }
    fn file_taken(&mut self) {
        match self.never {}
    }
    fn shutdown_taken(&mut self) {
        match self.never {}
    }
    fn shut(&mut self, _: &mut Cx) {
        match self.never {}
    }
    fn can_resume(&self, _: &Cx) -> bool {
        match self.never {}
    }
    fn resume<S: Service<Pending = Pending>>(
        &mut self,
        _: &mut RequestHead,
        _: &mut Cx,
        _: &mut S,
    ) {
        match self.never {}
    }
    fn wants_input(&self, _: &Cx) -> bool {
        match self.never {}
    }
}
