//! HTTP/2 connections on the worker in a build without the `http2` feature: there are none.
//! `H2Live` cannot be made (its `conn` is an empty enum standing in for `h2::Conn`), so the
//! driver's `Boxed::H2` arms are dead code the compiler drops. An h2c listener is refused at
//! start (`crate::features`), and without `tls` (which brings `http2`) no ALPN offers `h2`, so
//! `Proto::h2` is never called; were it, the connection would speak HTTP/1.1 and refuse the
//! client's preface as a malformed request.
//!
//! Each item has its counterpart's signature in tunnels.rs (or, for `NoH2`, `h2::Conn`).
#![forbid(unsafe_code)]

use std::sync::Arc;

use linerate_http1::RequestHead;

use super::proto::{Drive, Proto};
use crate::app::Pending;
use crate::app::deferred::Inbox;
use crate::h1::{Cx, Service, StreamHead, Timer, Transmit};
use crate::pool::Pool;
use crate::response::Response;
use crate::websocket::Upgrade;

impl Proto {
    /// HTTP/1.1: this build has no HTTP/2 (see the module doc).
    pub(crate) fn h2(now: u64, cx: &Cx) -> Proto {
        Proto::h1(now, cx)
    }
}

/// Cannot be made (see the module doc).
pub(crate) struct H2Live {
    pub(crate) conn: NoH2,
}

/// Stands in for `h2::Conn`: cannot be made.
pub(crate) enum NoH2 {}

impl NoH2 {
    pub(crate) fn outstanding(&self) -> usize {
        match *self {}
    }

    pub(crate) fn complete(&mut self, _id: u64, _resp: Response, _cx: &mut Cx) -> bool {
        match *self {}
    }

    pub(crate) fn start_stream(&mut self, _id: u64, _head: &StreamHead<'_>, _cx: &mut Cx) -> bool {
        match *self {}
    }

    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub(crate) fn interim(
        &mut self,
        _id: u64,
        _status: u16,
        _fields: &[(&[u8], &[u8])],
        _cx: &mut Cx,
    ) -> bool {
        match *self {}
    }

    pub(crate) fn body_room(&mut self, _id: u64, _cx: &mut Cx) {
        match *self {}
    }

    pub(crate) fn shut(&mut self, _cx: &mut Cx) {
        match *self {}
    }
}

impl H2Live {
    #[cfg_attr(not(feature = "websocket"), allow(dead_code))]
    pub(crate) fn open_tunnel(
        &mut self,
        _up: Upgrade,
        _token: u64,
        _inbox: &Arc<Inbox>,
        _cx: &mut Cx,
    ) {
        match self.conn {}
    }

    pub(crate) fn deadline(&self) -> u64 {
        match self.conn {}
    }

    pub(crate) fn timer(&self) -> Timer {
        match self.conn {}
    }

    pub(crate) fn is_idle(&self) -> bool {
        match self.conn {}
    }

    pub(crate) fn release(&mut self, _pool: &mut Pool) {
        match self.conn {}
    }

    pub(crate) fn recv<S: Service<Pending = Pending>>(
        &mut self,
        _input: &[u8],
        _head: &mut RequestHead,
        _cx: &mut Cx,
        _svc: &mut S,
    ) {
        match self.conn {}
    }

    pub(crate) fn eof<S: Service<Pending = Pending>>(&mut self, _cx: &mut Cx, _svc: &mut S) {
        match self.conn {}
    }

    pub(crate) fn on_timer<S: Service<Pending = Pending>>(&mut self, _cx: &mut Cx, _svc: &mut S) {
        match self.conn {}
    }

    pub(crate) fn drain(&mut self, _cx: &mut Cx) {
        match self.conn {}
    }

    pub(crate) fn stream_data(&mut self, _id: u64, _data: &[u8], _cx: &mut Cx) -> bool {
        match self.conn {}
    }

    pub(crate) fn awaits(&self, _id: u64) -> bool {
        match self.conn {}
    }

    #[allow(dead_code)] // asked by the proxy's HTTP/2 upstreams, which need `http2`
    pub(crate) fn keep_output(&mut self, _cx: &mut Cx) {
        match self.conn {}
    }

    pub(crate) fn stream_room(&self, _id: u64) -> bool {
        match self.conn {}
    }

    pub(crate) fn stream_end_with(
        &mut self,
        _id: u64,
        _trailers: &[crate::response::Field],
        _cx: &mut Cx,
    ) -> bool {
        match self.conn {}
    }

    pub(crate) fn stream_abort(&mut self, _id: u64, _cx: &mut Cx) -> bool {
        match self.conn {}
    }
}

impl Drive for H2Live {
    fn poll_transmit(&mut self, _: &mut Cx) -> Transmit<'_> {
        match self.conn {}
    }
    fn take_output(&mut self, _: &mut Cx) -> Vec<u8> {
        match self.conn {}
    }
    fn sent(&mut self, _: u64, _: &mut Cx) {
        match self.conn {}
    }
    fn stalled(&mut self, _: &Cx) {
        match self.conn {}
    }
    fn file_sent(&mut self, _: u64, _: &mut Cx) {
        match self.conn {}
    }
    fn file_taken(&mut self) {
        match self.conn {}
    }
    fn shutdown_taken(&mut self) {
        match self.conn {}
    }
    fn shut(&mut self, _: &mut Cx) {
        match self.conn {}
    }
    fn can_resume(&self, _: &Cx) -> bool {
        match self.conn {}
    }
    fn resume<S: Service<Pending = Pending>>(
        &mut self,
        _: &mut RequestHead,
        _: &mut Cx,
        _: &mut S,
    ) {
        match self.conn {}
    }
    fn wants_input(&self, _: &Cx) -> bool {
        match self.conn {}
    }
}
