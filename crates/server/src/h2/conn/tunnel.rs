//! Extended CONNECT streams (RFC 8441): a stream whose DATA carry another protocol's bytes
//! both ways (WebSocket). The answer's head and the server's bytes take the streamed answer's
//! path (`start_stream`, `stream_data`, `stream_end`); this file owns the client's side: its
//! bytes held for the protocol's reader, the window given back as the reader takes them, the
//! client's END_STREAM seen once they are all taken, and the reset that cuts a tunnel short.
//!
//! The protocol's own state machine lives with its driver (`driver::tunnels`); nothing here
//! reads the bytes.
#![forbid(unsafe_code)]

use super::Conn;
use crate::h1::Cx;
use crate::h2::frame::Code;

impl<P> Conn<P> {
    /// The open tunnel stream `id`'s index.
    fn tunnel(&self, id: u64) -> Option<usize> {
        let id = u32::try_from(id).ok()?;
        self.streams.iter().position(|s| s.id == id && s.tunnel)
    }

    /// The bytes held for stream `id`.
    fn held(&self, id: u32) -> Option<&Vec<u8>> {
        self.held.iter().find(|(i, _)| *i == id).map(|(_, b)| b)
    }

    /// Tunnel `id`'s DATA payload, held for its reader. Before a stream's first bytes are
    /// held, the bytes of streams that are gone (reset, refused, or closed before their reader
    /// took them) are let go.
    pub(super) fn hold(&mut self, id: u32, data: &[u8], cx: &mut Cx) {
        if let Some((_, held)) = self.held.iter_mut().find(|(i, _)| *i == id) {
            held.extend_from_slice(data);
            return;
        }
        self.let_go(cx);
        let mut held = cx.pool.get();
        held.extend_from_slice(data);
        self.held.push((id, held));
    }

    /// The bytes held for streams that are gone go back to the pool.
    fn let_go(&mut self, cx: &mut Cx) {
        let streams = &self.streams;
        self.held.retain_mut(|(i, b)| {
            let open = streams.iter().any(|s| s.id == *i);
            if !open {
                cx.pool.put(b);
            }
            open
        });
    }

    /// What the client sent on tunnel `id` that its reader has not taken, and whether the
    /// client ended its side after it (END_STREAM); `None` once the stream is gone (reset by
    /// either side, closed, or the connection ended).
    pub(crate) fn tunnel_input(&self, id: u64) -> Option<(&[u8], bool)> {
        let idx = self.tunnel(id)?;
        let s = &self.streams[idx];
        let held = self.held(s.id).map_or(&[][..], Vec::as_slice);
        Some((held, s.remote_closed))
    }

    /// The reader took the first `n` bytes of [`Conn::tunnel_input`]: they leave the stream's
    /// buffer, and its window is given back as it is owed (the timer is settled by
    /// [`Conn::tunnels_moved`]).
    pub(crate) fn tunnel_used(&mut self, id: u64, n: usize, cx: &mut Cx) {
        let Some(idx) = self.tunnel(id) else {
            return;
        };
        let sid = self.streams[idx].id;
        let Some(at) = self.held.iter().position(|(i, _)| *i == sid) else {
            return;
        };
        let held = &mut self.held[at].1;
        let n = n.min(held.len());
        held.drain(..n);
        if held.is_empty() {
            let (_, mut held) = self.held.swap_remove(at);
            cx.pool.put(&mut held);
        }
        self.streams[idx].recv_owed += n as i64;
        self.window_updates(cx);
    }

    /// A piece of tunnel `id`'s output, as [`Conn::stream_data`] but leaving the timer to
    /// [`Conn::tunnels_moved`]. `false`: the stream is gone.
    pub(crate) fn tunnel_send(&mut self, id: u64, data: &[u8], cx: &mut Cx) -> bool {
        self.stream_piece(id, data, cx)
    }

    /// The tunnels' bytes moved (`tunnel_used`, `tunnel_send`): the connection's timer is
    /// settled once for all of them.
    pub(crate) fn tunnels_moved(&mut self, cx: &mut Cx) {
        self.set_timer(cx);
    }

    /// The client ended its side of tunnel `id` (END_STREAM) and every byte before it was
    /// taken. A stream that is gone has ended too.
    pub(crate) fn tunnel_ended(&self, id: u64) -> bool {
        self.tunnel(id).is_none_or(|idx| {
            let s = &self.streams[idx];
            s.remote_closed && self.held(s.id).is_none_or(Vec::is_empty)
        })
    }

    /// Tunnel `id` ends without a clean close (its protocol gave up on the client):
    /// RST_STREAM(CANCEL), whatever its answer's state.
    pub(crate) fn tunnel_reset(&mut self, id: u64, cx: &mut Cx) {
        let Some(idx) = self.tunnel(id) else {
            return;
        };
        if !matches!(self.writing, super::Writing::Open | super::Writing::Last) || self.errored() {
            return;
        }
        let sid = self.streams[idx].id;
        self.stream_error(sid, Code::Cancel, cx);
        self.let_go(cx);
        self.end_if_done();
        self.set_timer(cx);
    }
}
