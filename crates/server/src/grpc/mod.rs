//! gRPC services on the engine (cargo feature `grpc`): [`Router::grpc`](crate::Router::grpc)
//! serves a [`Service`]'s methods over HTTP/2 (h2c and TLS) and HTTP/3, on the same worker,
//! routes and layers as every other request.
//!
//! A service is a set of [`Method`]s, one per RPC, each made from a typed function:
//! [`Method::unary`], [`Method::server_streaming`], [`Method::client_streaming`] and
//! [`Method::bidi_streaming`]. Messages are prost types; [`Request`] and [`Response`] carry
//! them with their [`Metadata`]; a client's stream of messages is a [`Streaming`], a stream
//! of answers a [`Sink`] (backpressure: [`Sink::send`] waits while the client reads slowly,
//! so the server never buffers without bound).
//!
//! **From a `.proto` file**, as with tonic: linerate-grpc's `build` feature generates, per
//! service, a trait with one method per RPC and a server that implements [`Service`] for it
//! (the messages are prost's). In `build.rs`, with `linerate-grpc = { features = ["build"] }`
//! under `[build-dependencies]` (no `protoc` needed: protox compiles the files):
//!
//! ```ignore
//! linerate_grpc::build::configure()
//!     .file_descriptor_set("hello.bin") // for Reflection::register
//!     .compile(&["proto/hello.proto"], &["proto"])?;
//! ```
//!
//! then, for `service Greeter { rpc SayHello(HelloRequest) returns (HelloReply); }`:
//!
//! ```ignore
//! mod hello { include!(concat!(env!("OUT_DIR"), "/hello.rs")); }
//! use hello::greeter_server::{Greeter, GreeterServer};
//!
//! struct MyGreeter;
//! impl Greeter for MyGreeter {
//!     async fn say_hello(&self, req: Request<HelloRequest>) -> Result<Response<HelloReply>, Status> {
//!         Ok(Response::new(HelloReply { message: format!("hello {}", req.get_ref().name) }))
//!     }
//! }
//! let router = Router::new()
//!     .grpc(GreeterServer::new(MyGreeter))
//!     .grpc(Health::new())
//!     .grpc(Reflection::new().register(include_bytes!(concat!(env!("OUT_DIR"), "/hello.bin")))?);
//! ```
//!
//! The four shapes of a trait method: unary `(Request<Req>) -> Result<Response<Resp>,
//! Status>`; server streaming `(Request<Req>, &mut Sink<Resp>) -> Result<(), Status>`; client
//! streaming `(Request<Streaming<Req>>) -> Result<Response<Resp>, Status>`; bidirectional
//! `(Request<Streaming<Req>>, &mut Sink<Resp>) -> Result<(), Status>`. Each returns a `Send`
//! future (write it `async fn`, or return `std::future::ready(…)` for an answer that waits
//! on nothing: then the call is answered on the worker at once); a method left out answers
//! UNIMPLEMENTED. The generated code names `::linerate_server::grpc` (`server_path` changes it).
//!
//! **A client** (feature `grpc-client`, in `default`): the same generator writes
//! `greeter_client::GreeterClient` beside the server, in tonic's shapes, over a
//! [`client::Channel`] — linerate's own HTTP/2 client connection (the proxy's), driven by a
//! tokio task, on any tokio runtime (a worker's inside an [`OnWorker`](crate::OnWorker)
//! handler too), or `TestClient::grpc_channel` (in process, through the router):
//!
//! ```ignore
//! let mut client = GreeterClient::connect("http://127.0.0.1:50051").await?;
//! let mut req = Request::new(HelloRequest { name: "ann".into() });
//! req.set_timeout(Duration::from_secs(1)); // grpc-timeout; DEADLINE_EXCEEDED here past it
//! req.metadata_mut().insert("x-trace", "1")?;
//! let reply = client.say_hello(req).await?; // Result<Response<HelloReply>, Status>
//! let mut s = client.say_hellos(HelloRequest::default()).await?.into_inner();
//! while let Some(m) = s.message().await? { /* … */ }
//! ```
//!
//! A server-streaming or bidirectional call answers a [`client::Streaming`]; a
//! client-streaming or bidirectional call takes a `Stream` of requests, sent while the answer
//! is read. Calls share the channel's one connection (streams as the server allows); a lost
//! connection fails its calls UNAVAILABLE and the next call connects again; dropping a call
//! or its `Streaming` cancels it (RST_STREAM CANCEL). Answers: `grpc-status` and a
//! percent-decoded `grpc-message` (and `grpc-status-details-bin`) become the [`Status`], an
//! HTTP status without them is mapped as http-grpc-status-mapping.md says, gzip answers are
//! taken (`send_compressed` sends gzip), and messages are limited both ways
//! (`max_decoding_message_size`, [`MAX_MESSAGE`] by default). `https://` is HTTP/2 over TLS
//! (feature `grpc-client-tls`: the system's roots, or `client::Channel::connect_tls` with a CA
//! and a name).
//!
//! **The standard services**: [`Health`] (`grpc.health.v1.Health`: Check and Watch, its
//! handle sets each service's status at run time, `""` the server's) and [`Reflection`]
//! (`grpc.reflection.v1` and `v1alpha`: the router's services, and the files of the
//! descriptor sets it is given), so grpcurl-style tools list, describe and call a server.
//!
//! What the engine does for every call (gRPC's PROTOCOL-HTTP2.md):
//! - **The request**: `content-type: application/grpc[+proto]` (anything else: HTTP 415),
//!   `grpc-timeout` (a deadline: past it the handler's future is dropped and the call ends
//!   DEADLINE_EXCEEDED; a deadline of 0 is answered at once), `grpc-encoding: gzip`
//!   (decompressed up to the message limit; another coding: UNIMPLEMENTED), custom metadata
//!   (`-bin` values base64-decoded). Messages are read from length-prefixed frames, with the
//!   limit [`MAX_MESSAGE`] judged on the prefix (RESOURCE_EXHAUSTED); a malformed frame, a
//!   compressed flag without an encoding or a body cut inside a message is INTERNAL; a unary
//!   call with no message or two is INTERNAL.
//! - **The answer**: HTTP 200 with `content-type: application/grpc`, the initial metadata,
//!   the messages, then trailers with `grpc-status`, `grpc-message` (percent-encoded) and the
//!   trailing metadata; a call that fails before any message is a trailers-only answer (one
//!   HEADERS frame). A handler that panics ends its call INTERNAL (or the code
//!   [`Router::grpc_panic_status`](crate::Router::grpc_panic_status) sets); a method the
//!   service does not have, or a service the router does not have, is UNIMPLEMENTED.
//! - **A unary call** whose future is ready when first polled (no await that waits) is
//!   answered on the worker at once, like a synchronous route; one that waits runs on the
//!   worker's tokio runtime ([`OnWorker`](crate::OnWorker)). Streaming calls always run
//!   there, their body fed as it arrives; a client that resets its stream cuts the call's
//!   [`Streaming`] off and makes [`Sink::send`] fail CANCELLED.
//! - **gRPC-Web** (PROTOCOL-WEB.md, what browsers send): `application/grpc-web[+proto]` and
//!   `application/grpc-web-text[+proto]`, over HTTP/1.1, HTTP/2 or HTTP/3, reach the same
//!   methods. The answer has the request's protocol as its content type (`+proto`), its
//!   messages, then a trailer frame (flag 0x80: `grpc-status`, `grpc-message`, the trailing
//!   metadata) in the body, never HTTP trailers; a call that fails before any message is
//!   that frame alone. `-text` bodies are base64 both ways (a request's decoded as it
//!   arrives, padded segments allowed). CORS is the application's: a
//!   [`Cors`](crate::layers::Cors) layer answers a browser's preflight; allow the request
//!   fields `content-type`, `x-grpc-web`, `x-user-agent`, `grpc-timeout` (and the
//!   metadata the page sends) and expose `grpc-status`, `grpc-message`.
#![forbid(unsafe_code)]

mod answer;
mod call;
#[cfg(feature = "grpc-client")]
pub mod client;
pub mod health;
mod layered;
mod message;
mod metadata;
mod method;
mod metrics;
pub mod reflection;
mod run;
mod stream;
mod web;

use std::sync::{Arc, Mutex, PoisonError};

pub use linerate_grpc::{Code, Status};

pub use health::Health;
pub use message::{Request, Response};
pub use metadata::{InvalidMetadata, Metadata};
pub use method::Method;
pub(crate) use method::{Kind, Unary};
pub use reflection::Reflection;
pub use stream::{Sink, Streaming};

pub(crate) use call::{Call, deadline_exceeded, read_unary};
pub use layered::MAX_LAYER_MESSAGE;
pub(crate) use layered::{busy, call_protocol, layer_answer, timed_out, unary as unary_in_chain};
pub(crate) use linerate_grpc::web::Protocol;
pub(crate) use metrics::{CallStats, MethodStats};
pub(crate) use run::{streaming, unary_later};
#[cfg(all(feature = "proxy", feature = "http2"))]
pub(crate) use web::status_value;
pub(crate) use web::{
    decode_text, failed, logged_status, protocol_of, streamed, trailer_fields_status, unary_answer,
};

/// The largest message a call receives (the prefix announcing more is RESOURCE_EXHAUSTED),
/// as grpc-go's and grpc-core's default `MaxRecvMsgSize`.
pub const MAX_MESSAGE: usize = linerate_grpc::frame::DEFAULT_MAX_MESSAGE;

/// A gRPC service: its name and methods. Code generated from a `.proto` file implements it
/// for a server type wrapping the service's trait; a hand-written service lists its
/// [`Method`]s itself.
pub trait Service {
    /// The service's full name, `package.Service`.
    fn name(&self) -> &'static str;
    /// Its methods, each with its path (`/package.Service/Method`).
    fn methods(self) -> Vec<Method>;
    /// Told, before [`methods`](Service::methods), the list of services the router serves
    /// (it grows as more are added): what [`Reflection`] lists. Others ignore it.
    fn served_by(&mut self, services: &ServiceList) {
        let _ = services;
    }
}

/// The services a router serves, by full name, in the order added; shared with the services
/// that asked ([`Service::served_by`]), so one added later is listed too.
#[derive(Clone, Debug, Default)]
pub struct ServiceList(Arc<Mutex<Vec<&'static str>>>);

impl ServiceList {
    /// The names, now.
    pub fn names(&self) -> Vec<&'static str> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn add(&self, name: &'static str) {
        let mut names = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if !names.contains(&name) {
            names.push(name);
        }
    }
}

/// What a router serves of gRPC: the services' names, for reflection and the UNIMPLEMENTED
/// answer to an unknown one.
#[derive(Clone, Debug, Default)]
pub(crate) struct Services {
    pub(crate) names: Arc<Vec<&'static str>>,
    /// The same names, for the services that list them (apart from `names`: the request
    /// path reads that one without a lock).
    pub(crate) list: ServiceList,
    /// Each method's call counters, and the unknown paths' (`/metrics`).
    pub(crate) calls: CallStats,
    /// The code set by [`Router::grpc_panic_status`](crate::Router::grpc_panic_status), for
    /// the methods added after it.
    pub(crate) panic_code: Option<Code>,
}

impl Services {
    pub(crate) fn add(&mut self, name: &'static str) {
        if !self.names.contains(&name) {
            Arc::make_mut(&mut self.names).push(name);
            self.list.add(name);
        }
    }

    /// A merged group's services.
    pub(crate) fn merge(&mut self, other: &Services) {
        for name in other.names.iter() {
            self.add(name);
        }
        self.calls
            .methods
            .extend(other.calls.methods.iter().cloned());
    }

    /// Whether the router serves any: then a gRPC call to an unknown path is UNIMPLEMENTED.
    #[inline(always)]
    pub(crate) fn any(&self) -> bool {
        !self.names.is_empty()
    }
}

/// A unary call's body so far, refused as soon as its first prefix announces a message over
/// [`MAX_MESSAGE`] (RESOURCE_EXHAUSTED, before the message is held). `content_type` is looked
/// up only past the binary check: a `-text` body's prefix is base64 (its characters read as
/// a binary length are always over the limit), judged once its first 8 characters are in.
#[inline(always)]
pub(crate) fn over_limit<'h>(
    body: &[u8],
    content_type: impl FnOnce() -> Option<&'h [u8]>,
) -> Option<crate::response::Response> {
    let prefix = body.get(..linerate_grpc::frame::PREFIX_LEN)?;
    let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
    if len <= MAX_MESSAGE {
        return None;
    }
    over_limit_as(
        body,
        len,
        protocol_of(content_type()).unwrap_or(Protocol::Grpc),
    )
}

#[cold]
#[inline(never)]
fn over_limit_as(body: &[u8], len: usize, protocol: Protocol) -> Option<crate::response::Response> {
    let len = match protocol {
        Protocol::WebText => {
            let p = web::text_prefix(body)?;
            u32::from_be_bytes([p[1], p[2], p[3], p[4]]) as usize
        }
        _ => len,
    };
    (len > MAX_MESSAGE).then(|| {
        let status = Status::new(
            Code::ResourceExhausted,
            format!("received message larger than max ({len} vs. {MAX_MESSAGE})"),
        );
        web::failed(protocol, &status)
    })
}

/// The service a method's path names: `/package.Service/Method` → `package.Service`.
pub(crate) fn service_of(path: &'static str) -> Option<&'static str> {
    let rest = path.strip_prefix('/')?;
    Some(&rest[..rest.find('/')?])
}
/// The raw body limit of a unary route: one message and its prefix, base64 for `-text`
/// (4 characters per 3 bytes); a binary body's own limit is judged on its prefix and
/// declared length.
pub(crate) const UNARY_BODY_LIMIT: u64 =
    ((MAX_MESSAGE + linerate_grpc::frame::PREFIX_LEN).div_ceil(3) * 4) as u64;

/// Whether a request is a gRPC call by its content type (PROTOCOL-HTTP2.md:
/// `application/grpc` and its `+format` forms).
pub(crate) fn is_grpc(content_type: Option<&[u8]>) -> bool {
    content_type.is_some_and(|ct| {
        ct.len() >= 16
            && ct[..16].eq_ignore_ascii_case(b"application/grpc")
            && matches!(ct.get(16), None | Some(b'+' | b';'))
    })
}

#[cfg(test)]
mod tests;
