//! A service's methods, typed for the application and erased for the router: [`Method`]
//! made from a handler of one of gRPC's four kinds, decoding the request's messages and
//! encoding the answer's with prost.
//!
//! Owns the adapters between typed handlers and the untyped call (`Unary`, `StreamFn`); not
//! how a call is read (`call.rs`), run (`run.rs`) or answered (`answer.rs`).
#![forbid(unsafe_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::call::Call;
use super::stream::{RawSink, RawStream, decode};
use super::{Metadata, MethodStats, Request, Response, Sink, Status, Streaming};

/// One RPC of a service: its path (`/package.Service/Method`) and handler.
pub struct Method {
    pub(crate) path: &'static str,
    pub(crate) kind: Kind,
    /// Its calls' counters (`/metrics`).
    pub(crate) stats: Arc<MethodStats>,
}

impl std::fmt::Debug for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            Kind::Unary(_) => "unary",
            Kind::Streaming(_) => "streaming",
        };
        f.debug_struct("Method")
            .field("path", &self.path)
            .field("kind", &kind)
            .finish()
    }
}

pub(crate) enum Kind {
    /// One message each way: called on the worker when the body is in, answered at once
    /// when its future is ready at the first poll.
    Unary(Arc<Unary>),
    /// Server-, client- or bidirectional streaming: called at the head, run on the worker's
    /// runtime.
    Streaming(Arc<StreamFn>),
}

/// A unary handler, untyped: the call and its message's bytes in, the encoded answer's
/// future out (`Err`: the message did not decode); and the method's call counters.
pub(crate) struct Unary(pub(crate) Box<UnaryFn>, pub(crate) Arc<MethodStats>);

pub(crate) type UnaryFn = dyn Fn(Call, &[u8]) -> Result<UnaryFuture, Status> + Send + Sync;

pub(crate) type UnaryFuture = Pin<Box<dyn Future<Output = Result<Reply, Status>> + Send>>;

/// A streaming handler, untyped: the call, the client's messages and the answer's sink in; the
/// call's outcome and the sink back, for its end.
pub(crate) type StreamFn = dyn Fn(Call, RawStream, RawSink) -> StreamFuture + Send + Sync;

pub(crate) type StreamFuture = Pin<Box<dyn Future<Output = (Result<(), Status>, RawSink)> + Send>>;

/// A unary answer, encoded: the message's frame and the metadata around it.
pub(crate) struct Reply {
    pub(crate) frame: Vec<u8>,
    pub(crate) metadata: Metadata,
    pub(crate) trailers: Metadata,
}

impl Reply {
    fn of<T: prost::Message>(resp: Response<T>) -> Reply {
        let mut frame =
            Vec::with_capacity(linerate_grpc::frame::PREFIX_LEN + resp.message.encoded_len());
        linerate_grpc::frame::encode(&resp.message, &mut frame);
        Reply {
            frame,
            metadata: resp.metadata,
            trailers: resp.trailers,
        }
    }
}

impl Method {
    /// A unary method: one request message, one answer.
    pub fn unary<Req, Resp, F, Fut>(path: &'static str, handler: F) -> Method
    where
        Req: prost::Message + Default + 'static,
        Resp: prost::Message + 'static,
        F: Fn(Request<Req>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Response<Resp>, Status>> + Send + 'static,
    {
        let f = move |call: Call, bytes: &[u8]| -> Result<UnaryFuture, Status> {
            let message = decode::<Req>(bytes)?;
            let fut = handler(call.request(message));
            Ok(Box::pin(async move { fut.await.map(Reply::of) }))
        };
        let stats = MethodStats::new(path);
        Method {
            path,
            kind: Kind::Unary(Arc::new(Unary(Box::new(f), stats.clone()))),
            stats,
        }
    }

    /// A server-streaming method: one request message, a stream of answers written to the
    /// [`Sink`]. The handler gives the sink back with its outcome (code generated from a
    /// `.proto` file does this around a trait method taking `&mut Sink`).
    pub fn server_streaming<Req, Resp, F, Fut>(path: &'static str, handler: F) -> Method
    where
        Req: prost::Message + Default + Send + 'static,
        Resp: prost::Message + 'static,
        F: Fn(Request<Req>, Sink<Resp>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = (Result<(), Status>, Sink<Resp>)> + Send + 'static,
    {
        let handler = Arc::new(handler);
        let f = move |call: Call, mut input: RawStream, sink: RawSink| -> StreamFuture {
            let handler = handler.clone();
            Box::pin(async move {
                let message = match input.one::<Req>().await {
                    Ok(m) => m,
                    Err(status) => return (Err(status), sink),
                };
                let (outcome, sink) = handler(call.request(message), Sink::new(sink)).await;
                (outcome, sink.into_raw())
            })
        };
        Method {
            path,
            kind: Kind::Streaming(Arc::new(f)),
            stats: MethodStats::new(path),
        }
    }

    /// A client-streaming method: a stream of request messages, one answer.
    pub fn client_streaming<Req, Resp, F, Fut>(path: &'static str, handler: F) -> Method
    where
        Req: prost::Message + Default + Send + 'static,
        Resp: prost::Message + Send + 'static,
        F: Fn(Request<Streaming<Req>>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Response<Resp>, Status>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        let f = move |call: Call, input: RawStream, mut sink: RawSink| -> StreamFuture {
            let fut = handler(call.request(Streaming::new(input)));
            Box::pin(async move {
                let resp = match fut.await {
                    Ok(r) => r,
                    Err(status) => return (Err(status), sink),
                };
                sink.metadata = resp.metadata;
                sink.trailers = resp.trailers;
                let sent = sink.send(&resp.message).await;
                (sent, sink)
            })
        };
        Method {
            path,
            kind: Kind::Streaming(Arc::new(f)),
            stats: MethodStats::new(path),
        }
    }

    /// A bidirectional-streaming method: streams both ways, at the handler's pace.
    pub fn bidi_streaming<Req, Resp, F, Fut>(path: &'static str, handler: F) -> Method
    where
        Req: prost::Message + Default + Send + 'static,
        Resp: prost::Message + 'static,
        F: Fn(Request<Streaming<Req>>, Sink<Resp>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = (Result<(), Status>, Sink<Resp>)> + Send + 'static,
    {
        let handler = Arc::new(handler);
        let f = move |call: Call, input: RawStream, sink: RawSink| -> StreamFuture {
            let fut = handler(call.request(Streaming::new(input)), Sink::new(sink));
            Box::pin(async move {
                let (outcome, sink) = fut.await;
                (outcome, sink.into_raw())
            })
        };
        Method {
            path,
            kind: Kind::Streaming(Arc::new(f)),
            stats: MethodStats::new(path),
        }
    }

    /// The method's path.
    pub fn path(&self) -> &'static str {
        self.path
    }
}
