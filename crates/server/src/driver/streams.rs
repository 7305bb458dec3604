//! The library's streamed answers on the worker: a response whose body is a
//! [`Body::Stream`] has its head placed with the connection's `start_stream` (the call a
//! proxied answer's head takes), its channel linked to this worker's inbox, and its pieces
//! moved into the connection while the connection has room.
//!
//! Owns when a channel is read, not the framing (the connections') nor the channel's rules
//! (`app::streaming`). A channel is read when its writer queued it (through the inbox), and
//! when its connection's output moved (every event on a connection with streamed answers
//! re-queues those that hold something); it is never read while the connection has no room,
//! so a slow client holds the writer back. A connection that closes tells each of its
//! channels the answer is gone, and so does an event after which its HTTP/2 client has reset
//! the channel's stream (`Proto::awaits`).
#![forbid(unsafe_code)]

use std::sync::Arc;

use linerate_http1::status_has_no_body;

use super::proto::Proto;
use super::{Backend, Shared, Worker};
use crate::app::deferred::Inbox;
use crate::h1::{Cx, StreamHead};
use crate::response::{Body, Response};
use crate::streaming::{Chan, Finish};

/// Places the head of `resp` (its body a stream) as the answer to request `id`, and links the
/// channel to `inbox`. The channel comes back while a body follows; `None` when the answer is
/// over already (the request is gone, or a HEAD request or a bodiless status wants no body:
/// the writer then learns it is gone).
pub(crate) fn start(
    conn: &mut Proto,
    (token, id): (u64, u64),
    mut resp: Response,
    head_request: bool,
    inbox: &Arc<Inbox>,
    cx: &mut Cx,
) -> Option<Arc<Chan>> {
    let Body::Stream(body) = &mut resp.body else {
        conn.complete(id, resp, cx);
        return None;
    };
    let length = body.length();
    let chan = body.adopt()?;
    let mut fields: Vec<(&[u8], &[u8])> = Vec::with_capacity(resp.headers.len() + 1);
    if let Some(ct) = &resp.content_type {
        fields.push((b"Content-Type", ct.as_bytes()));
    }
    for (n, v) in &resp.headers {
        fields.push((n.as_bytes(), v.as_bytes()));
    }
    let head = StreamHead {
        status: resp.status,
        fields: &fields,
        length,
        date: None,
    };
    if !conn.start_stream(id, &head, cx) {
        chan.gone();
        return None;
    }
    if head_request || status_has_no_body(resp.status) {
        conn.stream_end(id, cx);
        chan.gone();
        return None;
    }
    chan.link(inbox.clone(), token, id);
    Some(chan)
}

/// Moves what `chan` holds into the connection, if it has room. `false` once the answer is
/// over (ended, cut off, or gone).
pub(crate) fn pump(conn: &mut Proto, chan: &Chan, id: u64, cx: &mut Cx) -> bool {
    pump_ending(conn, chan, id, cx, &mut None)
}

/// [`pump`], and the `grpc-status` of trailers it ended the answer with into `grpc_status`
/// (for the access log).
fn pump_ending(
    conn: &mut Proto,
    chan: &Chan,
    id: u64,
    cx: &mut Cx,
    grpc_status: &mut Option<&'static str>,
) -> bool {
    if !conn.stream_room(id) {
        return true;
    }
    let (taken, finish) = chan.drain(|data| data.is_empty() || conn.stream_data(id, data, cx));
    if !taken {
        chan.gone();
        return false;
    }
    match finish {
        Finish::Open => true,
        Finish::Ended => {
            let trailers = chan.take_trailers();
            let trailers = trailers.as_deref().map_or(&[][..], Vec::as_slice);
            if !trailers.is_empty() {
                *grpc_status = crate::grpc::trailer_fields_status(trailers);
            }
            if !conn.stream_end_with(id, trailers, cx) {
                chan.gone();
            }
            false
        }
        Finish::Aborted => {
            conn.stream_abort(id, cx);
            chan.gone();
            false
        }
    }
}

/// Streamed answers read per turn of the worker's loop; the rest wait for the next turn, so a
/// fan-out to thousands of subscribers does not hold up the requests arriving meanwhile, and
/// what is written to the channels read later goes out together (fewer, larger sends).
const STREAMS_PER_TURN: usize = 64;

impl<B: Backend> Worker<B> {
    /// A deferred answer with a streamed body came back for request `id` of `token`.
    pub(super) fn start_stream(
        &mut self,
        token: u64,
        id: u64,
        resp: Response,
        head_request: bool,
        sh: &Shared,
    ) {
        self.io.app.extras = true;
        let inbox = self.io.app.inbox.clone();
        let mut placed = false;
        let (mut over, mut grpc_status) = (true, None);
        self.with(token, sh, |live, p| {
            placed = true;
            let key = (token, id);
            if let Some(chan) = start(&mut live.conn, key, resp, head_request, &inbox, p.cx)
                && pump_ending(&mut live.conn, &chan, id, p.cx, &mut grpc_status)
            {
                live.streams.push(chan);
                over = false;
            }
        });
        if !placed {
            self.io.app.counters.late();
        }
        if over {
            self.stream_over((token, id), grpc_status);
        }
    }

    /// The streamed answer to request `at` is over (ended with `grpc_status` in its trailers,
    /// cut off, or gone): a gRPC answer's access-log line is written.
    fn stream_over(&mut self, at: (u64, u64), grpc_status: Option<&'static str>) {
        if !self.io.app.grpc_lines.is_empty() {
            (self.io.app).grpc_line_end(&self.io.sites.sites, at, grpc_status);
        }
    }

    /// Channels that have something for their connections (queued by their writers, or by
    /// an event on their connection): each is read once its connection has room, at most
    /// [`STREAMS_PER_TURN`] in a turn.
    pub(super) fn pump_streams(&mut self, sh: &Shared) {
        let mut ready = std::mem::take(&mut self.stream_ready);
        self.io.app.inbox.take_streams(&mut ready);
        let mut later = if ready.len() > STREAMS_PER_TURN {
            ready.split_off(STREAMS_PER_TURN)
        } else {
            Vec::new()
        };
        for chan in ready.drain(..) {
            let Some((token, id)) = chan.at() else {
                continue;
            };
            let idx = (token & 0xffff_ffff) as usize;
            let Some(live) = self
                .slots
                .get(idx)
                .filter(|s| s.generation == (token >> 32) as u32)
                .and_then(|s| s.live.as_ref())
            else {
                chan.gone();
                self.stream_over((token, id), None);
                continue;
            };
            if !live.conn.stream_room(id) {
                continue; // the connection's next event re-queues it
            }
            let (mut over, mut grpc_status) = (false, None);
            self.with(token, sh, |live, p| {
                if !pump_ending(&mut live.conn, &chan, id, p.cx, &mut grpc_status) {
                    live.streams.retain(|c| !Arc::ptr_eq(c, &chan));
                    over = true;
                }
            });
            if over {
                self.stream_over((token, id), grpc_status);
            }
        }
        if !later.is_empty() {
            later.append(&mut self.stream_ready);
            self.stream_ready = later;
        } else if self.stream_ready.is_empty() {
            self.stream_ready = ready;
        }
    }
}
