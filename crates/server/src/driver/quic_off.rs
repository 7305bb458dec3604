//! HTTP/3 in a build without the `http3` feature: the types the worker names, none of which
//! can be made. `Quic::new` is never reached (a worker has QUIC only with QUIC listeners, and
//! a configuration asking for one is refused at start: `crate::features`), so every QUIC
//! path of the driver is dead code the compiler drops, and the driver keeps one shape.
//!
//! Each method has its real counterpart's signature (driver/quic.rs, h3/conn.rs) and
//! nothing else.
#![forbid(unsafe_code)]

use std::convert::Infallible;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Instant;

use linerate_http1::RequestHead;

use crate::app::Pending;
use crate::h1::{Cx, Service, StreamHead, Timer};
use crate::pool::Pool;
use crate::response::Response;

/// Datagrams one wake-up reads (unused: nothing is read).
pub(crate) const RECV_BUDGET: usize = 0;

/// A QUIC listener's socket on one worker (made only with a configuration, which cannot be).
#[allow(dead_code)] // `socket`: the real one's field, read only by the real `Quic::new`.
pub(crate) struct QuicSetup {
    pub socket: UdpSocket,
    pub config: QuicConfig,
}

/// Cannot be made (see the module doc).
pub(crate) struct QuicConfig {
    never: Infallible,
}

impl Clone for QuicConfig {
    fn clone(&self) -> QuicConfig {
        match self.never {}
    }
}

impl QuicConfig {
    pub(crate) fn new(
        _tls: &Arc<crate::tls::ServerConfig>,
        _idle_ms: u64,
    ) -> Result<QuicConfig, String> {
        Err("linerate-server was built without feature `http3`".into())
    }
}

/// Cannot be made: no worker routes datagrams to another.
pub(crate) enum Relay {}

impl Relay {
    /// None: there are no QUIC listeners.
    pub(crate) fn for_workers(
        _workers: usize,
        _from_old: Option<Arc<[Option<u8>]>>,
    ) -> io::Result<Vec<Relay>> {
        Ok(Vec::new())
    }

    pub(crate) fn senders(&self) -> io::Result<Vec<OwnedFd>> {
        match *self {}
    }
}

/// Cannot be made (see the module doc).
pub(crate) struct Quic {
    pub(crate) retries: u64,
    pub(crate) routed: u64,
    pub(crate) touched: Vec<u32>,
    never: Infallible,
}

/// What a datagram was for: nothing can be received.
#[allow(dead_code)] // Matched by the worker, made only by the real `Quic::receive`.
pub(crate) enum Received {
    Nothing,
    Event(u32, Infallible),
    New(Box<Infallible>, Instant),
}

impl Quic {
    pub(crate) fn new(
        setups: Vec<QuicSetup>,
        _relay: Option<Relay>,
        _worker: usize,
        _workers: usize,
    ) -> io::Result<Quic> {
        match setups.into_iter().next() {
            Some(s) => match s.config.never {},
            None => Err(io::Error::other("no QUIC listener")),
        }
    }

    pub(crate) fn next_timer(&self) -> Option<Instant> {
        match self.never {}
    }

    pub(crate) fn timer_due(&self, _now: Instant) -> bool {
        match self.never {}
    }

    pub(crate) fn expire(&mut self, _now: Instant, _due: &mut Vec<u32>) {
        match self.never {}
    }

    pub(crate) fn fired(&mut self, _live: &mut H3Live, _now: Instant) {
        match self.never {}
    }

    pub(crate) fn relay_fd(&self) -> io::Result<Option<OwnedFd>> {
        match self.never {}
    }

    pub(crate) fn sockets(&self) -> io::Result<Vec<OwnedFd>> {
        match self.never {}
    }

    pub(crate) fn drain(
        &mut self,
        _handed_over: bool,
        _forward: Vec<std::os::unix::net::UnixDatagram>,
    ) {
        match self.never {}
    }

    pub(crate) fn receive(&mut self, _ep: usize, _budget: &mut usize) -> Option<(usize, Received)> {
        match self.never {}
    }

    pub(crate) fn receive_relayed(&mut self, _budget: &mut usize) -> Option<(usize, Received)> {
        match self.never {}
    }

    pub(crate) fn accept(
        &mut self,
        _ep: usize,
        incoming: Infallible,
        _now: Instant,
    ) -> Option<(H3Live, SocketAddr)> {
        match incoming {}
    }

    pub(crate) fn bind(&mut self, _live: &mut H3Live, _slot: u32) {
        match self.never {}
    }

    pub(crate) fn touch(&mut self, _live: &mut H3Live, _slot: u32) {
        match self.never {}
    }

    pub(crate) fn drive<S: Service<Pending = Pending>>(
        &mut self,
        _live: &mut H3Live,
        _head: &mut RequestHead,
        _cx: &mut Cx,
        _svc: &mut S,
    ) -> bool {
        match self.never {}
    }

    pub(crate) fn forget(&mut self, _live: &mut H3Live) {
        match self.never {}
    }
}

/// Cannot be made (see the module doc).
pub(crate) struct H3Live {
    pub(crate) quic: QuicConn,
    pub(crate) conn: H3Conn,
}

/// A QUIC connection's state: cannot be made.
pub(crate) enum QuicConn {}

impl QuicConn {
    pub(crate) fn handle_event(&mut self, event: Infallible) {
        match event {}
    }
}

impl H3Live {
    pub(crate) fn count_close(&self, _c: &crate::stats::Counters) {
        match self.quic {}
    }

    pub(crate) fn deadline(&self) -> u64 {
        match self.quic {}
    }

    pub(crate) fn quic_due(&self, _now: Instant) -> bool {
        match self.quic {}
    }

    pub(crate) fn client_cert(&mut self) -> Option<Arc<crate::tls::ClientCert>> {
        match self.quic {}
    }

    pub(crate) fn timer(&self) -> Timer {
        match self.quic {}
    }

    pub(crate) fn release(&mut self, _pool: &mut Pool) {
        match self.quic {}
    }

    pub(crate) fn on_timer<S: Service<Pending = Pending>>(&mut self, _cx: &mut Cx, _svc: &mut S) {
        match self.quic {}
    }
}

/// HTTP/3's connection state: cannot be made.
pub(crate) enum H3Conn {}

impl H3Conn {
    pub(crate) fn is_idle(&self) -> bool {
        match *self {}
    }

    pub(crate) fn outstanding(&self) -> usize {
        match *self {}
    }

    pub(crate) fn complete(&mut self, _id: u64, _resp: Response, _cx: &mut Cx) -> bool {
        match *self {}
    }

    pub(crate) fn body_room(&mut self, _id: u64) {
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

    pub(crate) fn stream_data(&mut self, _id: u64, _data: &[u8], _cx: &mut Cx) -> bool {
        match *self {}
    }

    pub(crate) fn stream_room(&self, _id: u64) -> bool {
        match *self {}
    }

    pub(crate) fn stream_end_with(
        &mut self,
        _id: u64,
        _trailers: &[crate::response::Field],
        _cx: &mut Cx,
    ) -> bool {
        match *self {}
    }

    pub(crate) fn stream_abort(&mut self, _id: u64, _cx: &mut Cx) -> bool {
        match *self {}
    }

    pub(crate) fn drain(&mut self, _cx: &mut Cx) {
        match *self {}
    }
}
