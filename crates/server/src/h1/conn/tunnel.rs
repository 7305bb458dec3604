//! The connection after a 101 (an upgrade relayed to an upstream that accepted it): a byte
//! tunnel. The upstream's bytes come in as the pieces of a streamed answer framed as
//! [`Frame::Tunnel`](super::stream) (raw); the client's bytes are held in the input buffer,
//! up to [`STREAM_ROOM`], for the driver to move upstream as the upstream takes them
//! ([`Conn::tunnel_input`], [`Conn::tunnel_used`]). Reading stops while the buffer is full,
//! so a client faster than its upstream is slowed, not buffered without bound.
//!
//! A tunnel this server ends itself (a WebSocket route's 101) leaves the connection instead:
//! [`Conn::take_upgraded`] hands over what it staged and what it holds.
//!
//! The ends: the upstream's end ([`Conn::stream_end_with`]) shuts the connection down once its
//! bytes are out; the client's EOF is reported by [`Conn::tunnel_ended`] once its last bytes
//! were taken, and the connection closes when the upstream's side ends too.
#![forbid(unsafe_code)]

use super::{Conn, InFlight, Reading, STREAM_ROOM, Tail};
use crate::h1::service::Cx;
use crate::pool::Pool;

impl<P> Conn<P> {
    /// The client's bytes waiting to go upstream, when the connection is a tunnel.
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub(crate) fn tunnel_input(&self) -> Option<&[u8]> {
        match self.reading {
            Reading::Tunnel { .. } => Some(self.spill.as_ref().map_or(&[], |s| &s.inbuf[..])),
            _ => None,
        }
    }

    /// The first `n` bytes of [`Conn::tunnel_input`] went upstream.
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
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
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub(crate) fn tunnel_ended(&self) -> bool {
        matches!(self.reading, Reading::Tunnel { eof: true }) && self.inbuf_empty()
    }

    /// Whether the client's input can take more (the bound on what a tunnel holds).
    pub(super) fn tunnel_has_room(&self) -> bool {
        self.spill
            .as_ref()
            .is_none_or(|s| s.inbuf.len() < STREAM_ROOM)
    }

    /// The connection's 101 was just placed for the protocol the server speaks itself (a
    /// WebSocket route): the staged output (answers before it, then the 101) and the
    /// client's bytes after the handshake, for the new protocol's state machine; the HTTP/1.1
    /// connection is done with. `None` when the 101 could not go out at once (answers before
    /// it still pending, or output in flight): the caller closes the connection.
    #[cfg_attr(not(feature = "websocket"), allow(dead_code))]
    pub(crate) fn take_upgraded(&mut self, cx: &mut Cx) -> Option<(Vec<u8>, Vec<u8>)> {
        let placed = matches!(self.reading, Reading::Tunnel { eof: false })
            && matches!(self.tail.as_deref(), Some(Tail::Stream(_)))
            && self.queue.as_ref().is_none_or(|q| q.len() == 0)
            && self.in_flight == InFlight::None;
        if !placed {
            return None;
        }
        let out = if self.out_empty() {
            std::mem::replace(&mut cx.out, cx.pool.get())
        } else {
            std::mem::take(&mut self.spill().out)
        };
        let input = self
            .spill
            .as_mut()
            .map(|s| std::mem::take(&mut s.inbuf))
            .unwrap_or_default();
        self.tail = None;
        self.tidy();
        Some((out, input))
    }
}
