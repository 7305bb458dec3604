//! A streaming call's two directions: [`Streaming`], the client's messages read from the
//! request body as it arrives (the connection reads only as fast as the handler takes), and
//! [`Sink`], the answer's messages written as the handler makes them (waiting while the
//! client reads slowly), its head sent with the first message and its trailers at the end.
//!
//! Owns the framing of both directions over the engine's `IncomingBody` and `BodyWriter`; the
//! call's end (which status, when) is `method.rs`'s.
#![forbid(unsafe_code)]

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use linerate_grpc::call::CallHead;
use linerate_grpc::compress::{self, Encoding};
use linerate_grpc::frame::{self, Decoder};
use linerate_grpc::web::{Protocol, TextDecoder};

use super::{Code, MAX_MESSAGE, Metadata, MethodStats, Status};
use super::{answer, web};
use crate::app::deferred::Responder;
use crate::app::incoming::IncomingBody;
use crate::streaming::BodyWriter;

/// The status of a call whose client went away (reset its stream, closed its connection).
pub(crate) fn cancelled() -> Status {
    Status::new(Code::Cancelled, "the client cancelled the call")
}

/// The client's messages, untyped: the body's pieces through a [`Decoder`].
pub(crate) struct RawStream {
    body: IncomingBody,
    decoder: Decoder,
    encoding: Encoding,
    /// The piece being read, and how far.
    piece: Bytes,
    at: usize,
    /// Decompressed messages land here.
    plain: Vec<u8>,
    /// A gRPC-Web text body's base64, decoded piece by piece (`None` once it ended).
    text: Option<TextDecoder>,
    done: bool,
}

impl RawStream {
    pub(crate) fn new(body: IncomingBody, call: &CallHead) -> RawStream {
        let encoding = call.encoding;
        RawStream {
            body,
            decoder: Decoder::new(MAX_MESSAGE, encoding.compresses()),
            encoding,
            piece: Bytes::new(),
            at: 0,
            plain: Vec::new(),
            text: (call.protocol == Protocol::WebText).then(TextDecoder::new),
            done: false,
        }
    }

    /// A piece of the body as frames: as it came, or decoded from `-text` base64.
    fn frames(&mut self, piece: Bytes) -> Result<Bytes, Status> {
        let Some(text) = &mut self.text else {
            return Ok(piece);
        };
        let mut out = Vec::with_capacity(piece.len() / 4 * 3 + 3);
        text.feed(&piece, &mut out).map_err(web_status)?;
        Ok(out.into())
    }

    /// The next message given to `f`; `None` at the end of the client's stream. A body cut
    /// off (the client reset the stream) is CANCELLED; a broken frame INTERNAL; a message
    /// over the limit RESOURCE_EXHAUSTED.
    pub(crate) async fn next<R>(
        &mut self,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>, Status> {
        let frame_status = |e: frame::FrameError| Status::new(e.code(), e.to_string());
        loop {
            if self.done {
                return Ok(None);
            }
            let mut input = &self.piece[self.at..];
            let before = input.len();
            let got = self.decoder.next(&mut input).map_err(frame_status)?;
            let used = before - input.len();
            if let Some(m) = got {
                self.at += used;
                if !m.compressed {
                    return Ok(Some(f(m.data)));
                }
                self.plain.clear();
                compress::decompress(self.encoding, m.data, MAX_MESSAGE, &mut self.plain)
                    .map_err(|e| Status::new(e.code(), e.to_string()))?;
                return Ok(Some(f(&self.plain)));
            }
            self.at += used;
            match self.body.chunk().await {
                Some(Ok(piece)) => {
                    self.piece = self.frames(piece)?;
                    self.at = 0;
                }
                Some(Err(_)) => return Err(cancelled()),
                None if self.text.is_some() => {
                    // The text's last, unpadded quantum, then the end as for any body.
                    let mut rest = Vec::new();
                    if let Some(mut text) = self.text.take() {
                        text.finish(&mut rest).map_err(web_status)?;
                    }
                    self.piece = rest.into();
                    self.at = 0;
                }
                None => {
                    self.done = true;
                    self.decoder.finish().map_err(frame_status)?;
                }
            }
        }
    }

    /// The one message of a server-streaming call: none or two is INTERNAL.
    pub(crate) async fn one<T: prost::Message + Default>(&mut self) -> Result<T, Status> {
        let first = self.next(decode::<T>).await?;
        let Some(message) = first else {
            return Err(Status::new(Code::Internal, "a call without its message"));
        };
        if self.next(|_| ()).await?.is_some() {
            return Err(Status::new(
                Code::Internal,
                "a call with more than one message",
            ));
        }
        message
    }
}

/// A `-text` body that is not base64: INTERNAL.
fn web_status(e: linerate_grpc::web::WebError) -> Status {
    Status::new(e.code(), e.to_string())
}

/// A message decoded; a malformed one is INTERNAL.
pub(crate) fn decode<T: prost::Message + Default>(bytes: &[u8]) -> Result<T, Status> {
    T::decode(bytes).map_err(|e| Status::new(Code::Internal, format!("decoding the message: {e}")))
}

/// The client's messages of a client-streaming or bidirectional call.
pub struct Streaming<T> {
    raw: RawStream,
    _message: PhantomData<fn() -> T>,
}

impl<T: prost::Message + Default> Streaming<T> {
    pub(crate) fn new(raw: RawStream) -> Streaming<T> {
        Streaming {
            raw,
            _message: PhantomData,
        }
    }

    /// The next message; `Ok(None)` once the client ended its stream. `Err`: the client
    /// cancelled (CANCELLED), or sent a broken frame or message (INTERNAL) or one over the
    /// limit (RESOURCE_EXHAUSTED); the call should end with it.
    pub async fn message(&mut self) -> Result<Option<T>, Status> {
        match self.raw.next(decode::<T>).await? {
            Some(m) => m.map(Some),
            None => Ok(None),
        }
    }
}

impl<T> std::fmt::Debug for Streaming<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streaming")
            .field("done", &self.raw.done)
            .finish()
    }
}

/// The answer's side of a streaming call, untyped: the head held until the first message (so
/// a call that fails first is trailers-only), then frames through a `BodyWriter`.
pub(crate) struct RawSink {
    responder: Option<Responder>,
    writer: Option<BodyWriter>,
    pub(crate) metadata: Metadata,
    pub(crate) trailers: Metadata,
    deadline: Option<Instant>,
    /// gRPC, or gRPC-Web: the status in a trailer frame, the body base64 for `-text`.
    protocol: Protocol,
    /// The method's counters (and its panic status).
    stats: Arc<MethodStats>,
    /// The call's start, when calls are counted.
    started: Option<u64>,
    frame: Vec<u8>,
    done: bool,
}

impl RawSink {
    pub(crate) fn new(
        responder: Responder,
        deadline: Option<Instant>,
        protocol: Protocol,
        stats: Arc<MethodStats>,
        started: Option<u64>,
    ) -> RawSink {
        RawSink {
            responder: Some(responder),
            writer: None,
            metadata: Metadata::new(),
            trailers: Metadata::new(),
            deadline,
            protocol,
            stats,
            started,
            frame: Vec::new(),
            done: false,
        }
    }

    /// Sends one message (the head first, once); CANCELLED when the client is gone.
    pub(crate) async fn send<T: prost::Message>(&mut self, message: &T) -> Result<(), Status> {
        if let Some(responder) = self.responder.take() {
            let head = answer::head_typed(self.protocol.content_type(), &self.metadata);
            let (resp, writer) = head.stream();
            responder.send(resp);
            self.writer = Some(writer);
        }
        self.frame.clear();
        frame::encode(message, &mut self.frame);
        if self.protocol == Protocol::WebText {
            self.frame = web::encoded(self.protocol, std::mem::take(&mut self.frame));
        }
        let Some(writer) = &self.writer else {
            return Err(cancelled());
        };
        writer.send(&self.frame).await.map_err(|_| cancelled())
    }

    /// Ends the call with `result`'s status: trailers after the messages, or, with none
    /// sent, a trailers-only answer.
    pub(crate) fn finish(mut self, result: Result<(), Status>) {
        let status = result.err().unwrap_or_else(Status::ok);
        self.end(&status);
    }

    fn end(&mut self, status: &Status) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        self.stats.ended(self.started, status.code);
        if let Some(responder) = self.responder.take() {
            responder.send(web::trailers_only(
                self.protocol,
                status,
                &self.metadata,
                &self.trailers,
            ));
        } else if self.protocol.is_web()
            && let Some(writer) = self.writer.take()
        {
            let mut trailer = Vec::new();
            web::trailer_frame(status, &self.trailers, &mut trailer);
            end_web(writer, web::encoded(self.protocol, trailer));
        } else if let Some(writer) = self.writer.take() {
            // The fields were checked when set; a refusal cuts the answer off, which the
            // client reads as a failed call.
            let _ = writer.end_with_trailers(answer::trailer_fields(status, &self.trailers));
        }
    }
}

/// Ends a gRPC-Web answer with its trailer frame: written now when the channel has room, else
/// once it has (on the worker's runtime; the call's end may come from a drop, which cannot
/// wait).
fn end_web(writer: BodyWriter, trailer: Vec<u8>) {
    match writer.write(&trailer) {
        Ok(()) => writer.end(),
        Err(crate::streaming::WriteError::Gone) => {}
        Err(crate::streaming::WriteError::Full) => {
            use crate::app::deferred::Spawn as _;
            crate::OnWorker.spawn(Box::pin(async move {
                if writer.send(&trailer).await.is_ok() {
                    writer.end();
                }
            }));
        }
    }
}

impl Drop for RawSink {
    /// A call dropped before its end (its deadline passed, its handler panicked or dropped
    /// the sink): DEADLINE_EXCEEDED past the deadline, the method's panic status (INTERNAL
    /// by default) while its handler's panic unwinds, else UNKNOWN. The panic is logged and
    /// counted where it is caught (`run.rs`).
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let status = if self.deadline.is_some_and(|d| d <= Instant::now()) {
            super::call::deadline_exceeded()
        } else if std::thread::panicking() {
            Status::new(self.stats.panic_code(), super::metrics::PANICKED)
        } else {
            Status::new(Code::Unknown, "the handler ended without an answer")
        };
        self.end(&status);
    }
}

/// The answer's messages of a server-streaming or bidirectional call.
pub struct Sink<T> {
    raw: RawSink,
    _message: PhantomData<fn(T)>,
}

impl<T: prost::Message> Sink<T> {
    pub(crate) fn new(raw: RawSink) -> Sink<T> {
        Sink {
            raw,
            _message: PhantomData,
        }
    }

    pub(crate) fn into_raw(self) -> RawSink {
        self.raw
    }

    /// Sends a message, waiting while the client reads slowly (the server never holds more
    /// than a window's worth). `Err(CANCELLED)` once the client is gone: end the call.
    pub async fn send(&mut self, message: &T) -> Result<(), Status> {
        self.raw.send(message).await
    }

    /// Whether the client is gone (reset its stream or closed its connection): nothing sent
    /// from now on arrives. Known only once a message was sent; before, `false`.
    pub fn is_cancelled(&self) -> bool {
        self.raw.writer.as_ref().is_some_and(BodyWriter::is_gone)
    }

    /// Waits until the client is gone; once a message was sent (before, the answer's head is
    /// not out and this never resolves). For a call that waits on something else between
    /// messages (health's Watch) and must end when its client leaves.
    pub(crate) async fn cancelled(&self) {
        match &self.raw.writer {
            Some(writer) => writer.gone().await,
            None => std::future::pending().await,
        }
    }

    /// The initial metadata, sent with the first message (or in a trailers-only answer's
    /// head when none is sent); what is set after the first message is not sent.
    pub fn metadata_mut(&mut self) -> &mut Metadata {
        &mut self.raw.metadata
    }

    /// The trailing metadata, sent with the status at the call's end.
    pub fn trailers_mut(&mut self) -> &mut Metadata {
        &mut self.raw.trailers
    }
}

impl<T> std::fmt::Debug for Sink<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sink")
            .field("started", &self.raw.responder.is_none())
            .finish()
    }
}
