//! One client call from head to status: [`Grpc`] (what generated clients call: the four
//! shapes), the call's head (`content-type`, `te`, `grpc-timeout` from the deadline,
//! `grpc-encoding`, metadata with `-bin` values base64), its messages framed (gzip when asked,
//! refused over the send limit), and the answer read back (`Answer`): the head's metadata,
//! messages decoded (gzip accepted, refused over the receive limit), the trailers made a
//! [`Status`] (`grpc-message` percent-decoded, `grpc-status-details-bin`), an HTTP status
//! without `grpc-status` mapped as gRPC's http-grpc-status-mapping.md says.
//!
//! Owns the call's end: the deadline (past it the call ends DEADLINE_EXCEEDED here, whatever
//! the server does, a reset CANCEL that beats this side's timer included), and cancellation
//! (a dropped call or [`Streaming`] drops its `CallIo`'s life, which the transport turns into
//! RST_STREAM CANCEL). Nothing here touches a socket.
#![forbid(unsafe_code)]

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use linerate_grpc::compress::{self, Encoding};
use linerate_grpc::frame::{self, Decoder};
use tokio::sync::{mpsc, oneshot};

use super::{CallIo, CallWork, Channel, Credit, Down, SEND_QUEUE, Up};
use crate::grpc::{Code, MAX_MESSAGE, Metadata, Request, Response, Status};

/// The `user-agent` a call sends (gRPC's PROTOCOL-HTTP2.md asks for one naming the library).
const USER_AGENT: &str = concat!("grpc-rust-linerate/", env!("CARGO_PKG_VERSION"));

/// A call's request, as a generated client's unary and server-streaming methods take it: the
/// message alone, or a [`Request`] with metadata and a timeout.
pub trait IntoRequest<T> {
    /// The request.
    fn into_request(self) -> Request<T>;
}

impl<T> IntoRequest<T> for T {
    fn into_request(self) -> Request<T> {
        Request::new(self)
    }
}

impl<T> IntoRequest<T> for Request<T> {
    fn into_request(self) -> Request<T> {
        self
    }
}

/// A client-streaming or bidirectional call's request: a stream of messages (any
/// `futures_core::Stream`, e.g. `tokio_stream::iter(vec)`), alone or in a [`Request`].
pub trait IntoStreamingRequest {
    /// The stream.
    type Stream: futures_core::Stream<Item = Self::Message> + Send + 'static;
    /// Its messages.
    type Message;
    /// The request.
    fn into_streaming_request(self) -> Request<Self::Stream>;
}

impl<S> IntoStreamingRequest for S
where
    S: futures_core::Stream + Send + 'static,
{
    type Stream = S;
    type Message = S::Item;
    fn into_streaming_request(self) -> Request<S> {
        Request::new(self)
    }
}

impl<S> IntoStreamingRequest for Request<S>
where
    S: futures_core::Stream + Send + 'static,
{
    type Stream = S;
    type Message = S::Item;
    fn into_streaming_request(self) -> Request<S> {
        self
    }
}

/// The calls of a generated client, over a [`Channel`]: compression and message limits are
/// its settings, as tonic's `Grpc<T>`.
#[derive(Clone)]
pub struct Grpc {
    channel: Channel,
    send: Encoding,
    max_decoding: usize,
    max_encoding: usize,
    interceptor: Option<Arc<Interceptor>>,
}

/// What runs before each call with the call's metadata (an auth header, a trace id); an
/// `Err` ends the call with that status before anything is sent.
pub type Interceptor = dyn Fn(&mut Metadata) -> Result<(), Status> + Send + Sync;

impl std::fmt::Debug for Grpc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grpc")
            .field("send", &self.send)
            .field("max_decoding", &self.max_decoding)
            .field("max_encoding", &self.max_encoding)
            .field("interceptor", &self.interceptor.is_some())
            .finish_non_exhaustive()
    }
}

impl Grpc {
    /// Calls over `channel`: messages uncompressed, [`MAX_MESSAGE`] both ways.
    pub fn new(channel: Channel) -> Grpc {
        Grpc {
            channel,
            send: Encoding::Identity,
            max_decoding: MAX_MESSAGE,
            max_encoding: usize::MAX,
            interceptor: None,
        }
    }

    /// Runs `interceptor` before each call with the call's metadata (tonic's interceptor,
    /// on the metadata only): it may add fields (`authorization`), or refuse the call with a
    /// status, which the call then ends with, nothing sent.
    pub fn with_interceptor(
        mut self,
        interceptor: impl Fn(&mut Metadata) -> Result<(), Status> + Send + Sync + 'static,
    ) -> Grpc {
        self.interceptor = Some(Arc::new(interceptor));
        self
    }

    /// Compresses request messages with `encoding` (`grpc-encoding: gzip`).
    pub fn send_compressed(mut self, encoding: super::CompressionEncoding) -> Grpc {
        self.send = encoding;
        self
    }

    /// Accepts answers compressed with `encoding`: gzip always is (`grpc-accept-encoding`
    /// names it on every call), so this changes nothing; it is here for tonic's shape.
    pub fn accept_compressed(self, encoding: super::CompressionEncoding) -> Grpc {
        let _ = encoding;
        self
    }

    /// The largest answer message taken (decompressed); a larger one ends the call
    /// RESOURCE_EXHAUSTED. [`MAX_MESSAGE`] unless set.
    pub fn max_decoding_message_size(mut self, limit: usize) -> Grpc {
        self.max_decoding = limit;
        self
    }

    /// The largest request message sent (before compression); a larger one ends the call
    /// RESOURCE_EXHAUSTED without sending it. No limit unless set.
    pub fn max_encoding_message_size(mut self, limit: usize) -> Grpc {
        self.max_encoding = limit;
        self
    }

    /// A unary call of `path` (`/package.Service/Method`).
    pub async fn unary<Req, Resp>(
        &self,
        path: &str,
        request: Request<Req>,
    ) -> Result<Response<Resp>, Status>
    where
        Req: prost::Message,
        Resp: prost::Message + Default,
    {
        let (up, mut answer) = self.start(path, &request.metadata, request.deadline)?;
        let frame = encode(self.send, self.max_encoding, &request.message)?;
        // The queue has room for both: nothing else was queued on it.
        let _ = up.try_send(Up::Data(frame));
        let _ = up.try_send(Up::End);
        let metadata = answer.head().await?;
        let Some(message) = answer.message::<Resp>().await? else {
            return Err(Status::new(
                Code::Internal,
                "a unary answer without a message",
            ));
        };
        if answer.message::<Resp>().await?.is_some() {
            return Err(Status::new(
                Code::Internal,
                "a unary answer with more than one message",
            ));
        }
        Ok(Response {
            message,
            metadata,
            trailers: answer.trailers.take().unwrap_or_default(),
        })
    }

    /// A server-streaming call: answered once the server's head came (or the call failed
    /// first); the messages follow through the [`Streaming`].
    pub async fn server_streaming<Req, Resp>(
        &self,
        path: &str,
        request: Request<Req>,
    ) -> Result<Response<Streaming<Resp>>, Status>
    where
        Req: prost::Message,
        Resp: prost::Message + Default,
    {
        let (up, mut answer) = self.start(path, &request.metadata, request.deadline)?;
        let frame = encode(self.send, self.max_encoding, &request.message)?;
        let _ = up.try_send(Up::Data(frame));
        let _ = up.try_send(Up::End);
        let metadata = answer.head().await?;
        Ok(Response {
            message: Streaming::new(answer),
            metadata,
            trailers: Metadata::new(),
        })
    }

    /// A client-streaming call: the request's stream is sent as it yields (while the answer
    /// is awaited), and its end ends the request.
    pub async fn client_streaming<S, Req, Resp>(
        &self,
        path: &str,
        request: Request<S>,
    ) -> Result<Response<Resp>, Status>
    where
        S: futures_core::Stream<Item = Req> + Send + 'static,
        Req: prost::Message + 'static,
        Resp: prost::Message + Default,
    {
        let Response {
            message: mut stream,
            metadata,
            ..
        } = self.streaming::<S, Req, Resp>(path, request).await?;
        let Some(message) = stream.message().await? else {
            return Err(Status::new(
                Code::Internal,
                "a unary answer without a message",
            ));
        };
        if stream.message().await?.is_some() {
            return Err(Status::new(
                Code::Internal,
                "a unary answer with more than one message",
            ));
        }
        Ok(Response {
            message,
            metadata,
            trailers: stream.trailers.take().unwrap_or_default(),
        })
    }

    /// A bidirectional call: the request's stream is sent as it yields, for as long as the
    /// [`Streaming`] answer is read (the two sides go on together).
    pub async fn streaming<S, Req, Resp>(
        &self,
        path: &str,
        request: Request<S>,
    ) -> Result<Response<Streaming<Resp>>, Status>
    where
        S: futures_core::Stream<Item = Req> + Send + 'static,
        Req: prost::Message + 'static,
        Resp: prost::Message + Default,
    {
        let (up, mut answer) = self.start(path, &request.metadata, request.deadline)?;
        answer.pump = Some(Box::pin(pump(
            request.message,
            up,
            self.send,
            self.max_encoding,
        )));
        let metadata = answer.head().await?;
        Ok(Response {
            message: Streaming::new(answer),
            metadata,
            trailers: Metadata::new(),
        })
    }

    /// Starts a call: its head to the transport, its body's queue and its answer back.
    fn start(
        &self,
        path: &str,
        metadata: &Metadata,
        deadline: Option<Instant>,
    ) -> Result<(mpsc::Sender<Up>, Answer), Status> {
        let intercepted;
        let metadata = match &self.interceptor {
            Some(intercept) => {
                let mut m = metadata.clone();
                intercept(&mut m)?;
                intercepted = m;
                &intercepted
            }
            None => metadata,
        };
        let mut fields: Vec<(String, String)> = vec![
            ("content-type".into(), "application/grpc".into()),
            ("te".into(), "trailers".into()),
            ("user-agent".into(), USER_AGENT.into()),
        ];
        if let Some(deadline) = deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(crate::grpc::deadline_exceeded());
            }
            fields.push((
                "grpc-timeout".into(),
                linerate_grpc::timeout::format(left).as_str().into(),
            ));
        }
        if self.send != Encoding::Identity {
            fields.push(("grpc-encoding".into(), self.send.as_str().into()));
        }
        fields.push((
            "grpc-accept-encoding".into(),
            compress::ACCEPT_ENCODING.into(),
        ));
        for (name, value) in metadata.fields() {
            fields.push((name.into_owned(), value.into_owned()));
        }
        let (up, up_rx) = mpsc::channel(SEND_QUEUE);
        let (down_tx, down) = mpsc::unbounded_channel();
        let (alive_tx, alive) = oneshot::channel();
        let credit = Arc::new(Credit::default());
        let work = self.channel.transport.start(CallIo {
            path: path.to_string(),
            fields,
            up: up_rx,
            down: down_tx,
            alive: alive_tx,
            credit: credit.clone(),
        });
        Ok((
            up,
            Answer {
                down,
                alive: Some(alive),
                credit,
                work,
                pump: None,
                // The local timer needs tokio's clock; with no runtime (an in-process call
                // driven by `TestClient::block_on`) the server's grpc-timeout alone ends it.
                sleep: deadline
                    .filter(|_| tokio::runtime::Handle::try_current().is_ok())
                    .map(|d| Box::pin(tokio::time::sleep_until(tokio::time::Instant::from_std(d)))),
                deadline,
                decoder: Decoder::new(self.max_decoding, false),
                encoding: Encoding::Identity,
                max: self.max_decoding,
                piece: Bytes::new(),
                at: 0,
                plain: Vec::new(),
                head_status: None,
                trailers: None,
                end: None,
            },
        ))
    }
}

/// A failed call's status read against its deadline: a CANCELLED that comes once the
/// deadline has passed is the server giving up on that deadline (grpc-go's server resets
/// the stream CANCEL when its grpc-timeout ends), so the call ends DEADLINE_EXCEEDED, as
/// it would have had this side's timer fired first (grpc-go's client reads it the same way).
fn past_deadline(status: Status, deadline: Option<Instant>, now: Instant) -> Status {
    match deadline {
        Some(d) if status.code == Code::Cancelled && now >= d => crate::grpc::deadline_exceeded(),
        _ => status,
    }
}

/// `message` framed for the wire: compressed with `encoding`, refused over `max`.
fn encode<M: prost::Message>(encoding: Encoding, max: usize, message: &M) -> Result<Bytes, Status> {
    let len = message.encoded_len();
    if len > max {
        return Err(Status::new(
            Code::ResourceExhausted,
            format!("trying to send message larger than max ({len} vs. {max})"),
        ));
    }
    let mut out = Vec::with_capacity(frame::PREFIX_LEN + len);
    if encoding == Encoding::Identity {
        frame::encode(message, &mut out);
    } else {
        compress::encode_message(encoding, &message.encode_to_vec(), &mut out);
    }
    Ok(out.into())
}

/// Sends a request stream's messages as they come, then its end; stops when the call is
/// gone (the queue's reader dropped).
async fn pump<S, M>(
    stream: S,
    up: mpsc::Sender<Up>,
    encoding: Encoding,
    max: usize,
) -> Result<(), Status>
where
    S: futures_core::Stream<Item = M> + Send + 'static,
    M: prost::Message,
{
    let mut stream = Box::pin(stream);
    while let Some(m) = std::future::poll_fn(|cx| stream.as_mut().poll_next(cx)).await {
        let frame = encode(encoding, max, &m)?;
        if up.send(Up::Data(frame)).await.is_err() {
            return Ok(());
        }
    }
    let _ = up.send(Up::End).await;
    Ok(())
}

type Pump = Pin<Box<dyn Future<Output = Result<(), Status>> + Send>>;

/// A call's answer, read back from its transport.
pub(crate) struct Answer {
    down: mpsc::UnboundedReceiver<Down>,
    /// Dropped: the caller gave up (the transport cancels the call).
    alive: Option<oneshot::Receiver<()>>,
    credit: Arc<Credit>,
    /// The transport's work, driven here (the in-process transport's).
    work: CallWork,
    /// The request stream's sender, driven here while the answer is read.
    pump: Option<Pump>,
    /// The deadline's timer.
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The deadline itself (a reset that races the timer is read against it).
    deadline: Option<Instant>,
    decoder: Decoder,
    encoding: Encoding,
    max: usize,
    piece: Bytes,
    at: usize,
    plain: Vec<u8>,
    /// A trailers-only answer's status (its head carried `grpc-status`).
    head_status: Option<Status>,
    pub(crate) trailers: Option<Metadata>,
    /// How the call ended, once it did.
    end: Option<Status>,
}

impl Answer {
    /// The next event, driving the pump and the transport's work, within the deadline.
    async fn recv(&mut self) -> Result<Down, Status> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Result<Down, Status>> {
        if let Some(work) = &mut self.work
            && work.as_mut().poll(cx).is_ready()
        {
            self.work = None;
        }
        if let Some(pump) = &mut self.pump
            && let Poll::Ready(result) = pump.as_mut().poll(cx)
        {
            self.pump = None;
            if let Err(status) = result {
                return Poll::Ready(Err(status));
            }
        }
        if let Poll::Ready(event) = self.down.poll_recv(cx) {
            return Poll::Ready(match event {
                Some(Down::Failed(s)) => Ok(Down::Failed(past_deadline(
                    s,
                    self.deadline,
                    Instant::now(),
                ))),
                Some(event) => Ok(event),
                None => Err(Status::new(
                    Code::Unavailable,
                    "the connection closed during the call",
                )),
            });
        }
        if let Some(sleep) = &mut self.sleep
            && sleep.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(Err(crate::grpc::deadline_exceeded()));
        }
        Poll::Pending
    }

    /// Ends the call here with `status`: the transport hears the call is gone.
    fn ended(&mut self, status: Status) -> Status {
        self.alive = None;
        self.pump = None;
        self.end = Some(status.clone());
        status
    }

    /// The answer's head: its metadata, or the call's status when it failed first.
    async fn head(&mut self) -> Result<Metadata, Status> {
        let event = match self.recv().await {
            Ok(e) => e,
            Err(s) => return Err(self.ended(s)),
        };
        match event {
            Down::Head(status, fields) => self.read_head(status, &fields),
            Down::Failed(s) => Err(self.ended(s)),
            _ => Err(self.ended(Status::new(Code::Internal, "an answer without a head"))),
        }
    }

    fn read_head(
        &mut self,
        status: u16,
        fields: &[(Vec<u8>, Vec<u8>)],
    ) -> Result<Metadata, Status> {
        let get = |name: &[u8]| fields.iter().find(|(n, _)| n == name).map(|(_, v)| &v[..]);
        let grpc_status = get(b"grpc-status");
        if status != 200 {
            return Err(self.ended(http_status(status)));
        }
        let content_type = get(b"content-type");
        if !super::super::is_grpc(content_type) {
            let shown = String::from_utf8_lossy(content_type.unwrap_or(b""));
            return Err(self.ended(Status::new(
                Code::Unknown,
                format!("the answer's content-type is {shown:?}, not application/grpc"),
            )));
        }
        if let Some(e) = get(b"grpc-encoding") {
            match Encoding::parse(e) {
                Ok(enc) => self.encoding = enc,
                Err(e) => {
                    return Err(self.ended(Status::new(Code::Internal, e.to_string())));
                }
            }
        }
        self.decoder = Decoder::new(self.max, self.encoding.compresses());
        let metadata = read_metadata(fields);
        if grpc_status.is_some() {
            // Trailers-Only: the head is the trailers too.
            let s = status_of(fields);
            self.trailers = Some(metadata.clone());
            if s.code != Code::Ok {
                return Err(self.ended(s));
            }
            self.head_status = Some(s);
        }
        Ok(metadata)
    }

    /// The next message; `Ok(None)` once the answer ended OK.
    async fn message<T: prost::Message + Default>(&mut self) -> Result<Option<T>, Status> {
        if let Some(end) = &self.end {
            return if end.code == Code::Ok {
                Ok(None)
            } else {
                Err(end.clone())
            };
        }
        loop {
            let mut input = &self.piece[self.at..];
            let before = input.len();
            let got = match self.decoder.next(&mut input) {
                Ok(got) => got,
                Err(e) => return Err(self.ended(Status::new(e.code(), e.to_string()))),
            };
            let used = before - input.len();
            if let Some(m) = got {
                self.at += used;
                let decoded = if m.compressed {
                    self.plain.clear();
                    if let Err(e) =
                        compress::decompress(self.encoding, m.data, self.max, &mut self.plain)
                    {
                        return Err(self.ended(Status::new(e.code(), e.to_string())));
                    }
                    T::decode(&self.plain[..])
                } else {
                    T::decode(m.data)
                };
                return match decoded {
                    Ok(m) => Ok(Some(m)),
                    Err(e) => Err(self.ended(Status::new(
                        Code::Internal,
                        format!("decoding the message: {e}"),
                    ))),
                };
            }
            self.at += used;
            let event = match self.recv().await {
                Ok(e) => e,
                Err(s) => return Err(self.ended(s)),
            };
            match event {
                Down::Data(piece) => {
                    self.credit.took(piece.len());
                    self.piece = piece;
                    self.at = 0;
                }
                Down::Trailers(fields) => {
                    self.trailers = Some(read_metadata(&fields));
                    let status = status_of(&fields);
                    return self.finish(status);
                }
                Down::End => {
                    let status = match self.head_status.take() {
                        Some(s) => s,
                        None => Status::new(Code::Internal, "the answer ended without grpc-status"),
                    };
                    return self.finish(status);
                }
                Down::Failed(s) => return Err(self.ended(s)),
                Down::Head(..) => {
                    return Err(self.ended(Status::new(Code::Internal, "a second head")));
                }
            }
        }
    }

    /// The answer's end with `status`: OK needs every message whole.
    fn finish<T>(&mut self, status: Status) -> Result<Option<T>, Status> {
        if status.code == Code::Ok
            && let Err(e) = self.decoder.finish()
        {
            return Err(self.ended(Status::new(e.code(), e.to_string())));
        }
        let ok = status.code == Code::Ok;
        let status = self.ended(status);
        if ok { Ok(None) } else { Err(status) }
    }
}

/// The status of an answer whose HTTP status is not 200 (gRPC's http-grpc-status-mapping.md).
fn http_status(status: u16) -> Status {
    Status::new(
        Code::from_http_status(status),
        format!("the server answered HTTP {status}"),
    )
}

/// The status in trailer fields; a failed call's carries their custom metadata too, as
/// tonic's does.
fn status_of(fields: &[(Vec<u8>, Vec<u8>)]) -> Status {
    let get = |name: &[u8]| fields.iter().find(|(n, _)| n == name).map(|(_, v)| &v[..]);
    let mut status = Status::from_fields(
        get(b"grpc-status"),
        get(b"grpc-message"),
        get(b"grpc-status-details-bin"),
    );
    if status.code != Code::Ok {
        status.metadata = read_metadata(fields);
    }
    status
}

/// The custom metadata among fields (reserved ones left out, `-bin` values decoded; a
/// value that is not base64 is left out too: the answer is read all the same).
fn read_metadata(fields: &[(Vec<u8>, Vec<u8>)]) -> Metadata {
    let mut metadata = Metadata::new();
    for (n, v) in fields {
        let _ = metadata.take_field(n, v);
    }
    metadata
}

/// An answer's messages, read as they arrive ([`Streaming::message`]); dropping it before the
/// end cancels the call.
pub struct Streaming<T> {
    answer: Answer,
    trailers: Option<Metadata>,
    _message: PhantomData<fn() -> T>,
}

impl<T: prost::Message + Default> Streaming<T> {
    fn new(answer: Answer) -> Streaming<T> {
        Streaming {
            answer,
            trailers: None,
            _message: PhantomData,
        }
    }

    /// The next message; `Ok(None)` once the server ended the call OK. `Err`: the call's
    /// status (the server's, or DEADLINE_EXCEEDED, UNAVAILABLE, CANCELLED… from this side).
    pub async fn message(&mut self) -> Result<Option<T>, Status> {
        let got = self.answer.message::<T>().await;
        if self.trailers.is_none() && self.answer.end.is_some() {
            self.trailers = self.answer.trailers.take();
        }
        got
    }

    /// The trailing metadata, once [`Streaming::message`] has returned the end.
    pub fn trailers(&self) -> Option<&Metadata> {
        self.trailers.as_ref()
    }
}

impl<T> std::fmt::Debug for Streaming<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streaming")
            .field("ended", &self.answer.end)
            .finish_non_exhaustive()
    }
}
