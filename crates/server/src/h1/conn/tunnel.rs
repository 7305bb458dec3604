//! The connection after a 101 (an upgrade relayed to an upstream that accepted it): a byte
//! tunnel. The upstream's bytes come in as the pieces of a streamed answer framed as
//! [`Frame::Tunnel`](super::stream) (raw); the client's bytes are held in the input buffer,
//! up to [`STREAM_ROOM`], for the driver to move upstream as the upstream takes them
//! ([`Conn::tunnel_input`], [`Conn::tunnel_used`]). Reading stops while the buffer is full,
//! so a client faster than its upstream is slowed, not buffered without bound.
//!
//! The ends: the upstream's end ([`Conn::stream_end`]) shuts the connection down once its
//! bytes are out; the client's EOF is reported by [`Conn::tunnel_ended`] once its last bytes
//! were taken, and the connection closes when the upstream's side ends too.
#![forbid(unsafe_code)]

use super::{Conn, Reading, STREAM_ROOM};
use crate::pool::Pool;

impl<P> Conn<P> {
    /// The client's bytes waiting to go upstream, when the connection is a tunnel.
    pub(crate) fn tunnel_input(&self) -> Option<&[u8]> {
        match self.reading {
            Reading::Tunnel { .. } => Some(self.spill.as_ref().map_or(&[], |s| &s.inbuf[..])),
            _ => None,
        }
    }

    /// The first `n` bytes of [`Conn::tunnel_input`] went upstream.
    pub(crate) fn tunnel_used(&mut self, n: usize, pool: &mut Pool) {
        let Some(s) = self.spill.as_mut() else {
            return;
        };
        let n = n.min(s.inbuf.len());
        s.inbuf.drain(..n);
        if s.inbuf.is_empty() {
            pool.put(&mut s.inbuf);
            self.tidy();
        }
    }

    /// The client finished sending and every byte it sent was taken.
    pub(crate) fn tunnel_ended(&self) -> bool {
        matches!(self.reading, Reading::Tunnel { eof: true }) && self.inbuf_empty()
    }

    /// Whether the client's input can take more (the bound on what a tunnel holds).
    pub(super) fn tunnel_has_room(&self) -> bool {
        self.spill
            .as_ref()
            .is_none_or(|s| s.inbuf.len() < STREAM_ROOM)
    }
}
