//! linerate-server: a thread-per-core HTTP/1.1 and HTTP/2 server (TLS with kernel TLS where
//! the kernel has it, static files, sites) and the handler API.
//!
//! One pinned worker per CPU, each with its own SO_REUSEPORT listener, event loop, buffers
//! and Date cache; requests are parsed by the strict sans-I/O `linerate-http1` crate. Three
//! layers, one directory each: `h1` and `h2` (the connection state machines: bytes and time
//! in, what to transmit out, no sockets), `app` (routing, handlers, files, compression, logs: no
//! socket syscalls) and `driver` (the event loop, its I/O backend, timers, TLS). Build a
//! [`Router`], bind a [`Server`] with a [`Config`], run it:
//!
//! ```no_run
//! use linerate_server::{Config, Response, Router, Server};
//! use serde::Serialize;
//!
//! #[derive(Serialize)]
//! struct Hello<'a> { message: &'a str }
//!
//! let router = Router::new()
//!     .get("/hello/{name}", |req| {
//!         let name = req.param("name").unwrap_or("world");
//!         Response::text_owned(format!("Hello, {name}!"))
//!     })
//!     .get("/json", |_| Response::json(&Hello { message: "Hello, World!" }))
//!     .post("/echo", |req| Response::text_owned(String::from_utf8_lossy(req.body()).into_owned()));
//! let server = Server::bind(Config { addr: "127.0.0.1:0".parse().unwrap(), ..Config::default() }, router)?;
//! println!("listening on http://{}", server.local_addr());
//! server.run_until_signal()?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Every protocol serves the same routes: HTTP/1.1; HTTP/2 over TLS (ALPN `h2`) and in
//! cleartext by prior knowledge on an h2c listener ([`Config::h2c`], [`Listen::h2c`]; the
//! `Upgrade: h2c` path from HTTP/1.1 is not offered, as RFC 9113 deprecates it); and HTTP/3
//! over QUIC beside a TLS listener ([`Config::quic`], [`Listen::quic`]). Each method has a shortcut ([`Router::get`], `post`, `put`,
//! `delete`, `patch`, `head`, `options`, and `…_async` for each); [`Router::route`] takes any.
//! The most specific pattern matching a path answers whatever the registration order: a
//! literal segment beats a parameter (`/todos/events` before `/todos/{id}`). A method and
//! pattern registered twice (a merged group's included) make [`Server::bind`] fail with
//! [`Part::Routes`] ([`DuplicateRoute`]): registering stays a chain of infallible calls.
//! Unknown paths get 404, known paths with another method 405 with `Allow`, HEAD is served
//! by GET routes without the body (a HEAD route takes over). OPTIONS is answered by an
//! OPTIONS route at that path when there is one, else by the server: `204` with `Allow`
//! listing the methods routed there (all of them for `OPTIONS *`), and no CORS fields, so a
//! CORS preflight needs its own OPTIONS route. Streaming request bodies use
//! [`Router::streaming`] with a [`BodySink`]. A handler that must wait (a database, another
//! service, a slow disk) is registered with [`Router::deferred`] (it gets an
//! [`OwnedRequest`] and a [`Responder`] that answers from any thread) or
//! [`Router::get_async`] (an `async` handler on your runtime): the worker serves other
//! connections meanwhile. Limits and timeouts are in [`Config`] (see [`config`] for the
//! defaults).
//!
//! Rails: a handler that panics, sync, deferred or `async`, is answered 500 and its
//! connection closed, with one log line, and the worker goes on. So is an answer that would
//! switch protocols without the connection being handed over: a 1xx status (101 included) or
//! an `Upgrade` field on anything but a 426. Answers held in memory are compressed when the
//! client asks and they are from [`config::COMPRESS_MIN_BYTES`] to
//! [`config::COMPRESS_MAX_BYTES`]; a larger one goes out as it is, so one answer never holds
//! the worker for more than about a millisecond. [`Response`]'s status, fields and body can be
//! read back ([`Response::field`], [`Response::fields`], [`Response::body_ref`]).
//!
//! Tests call a [`Router`] without a socket through [`testing::TestClient`]:
//! `TestClient::new(router).get("/users/1").send()` serves the request through the same
//! HTTP/1.1 (or, with `.http2()`, HTTP/2) connection state machine and dispatch a worker
//! runs, deferred and `async` handlers included, and reads the [`testing::TestResponse`] back
//! from the bytes the connection sends, so the server's own 404, 405 and 413 are there too.
//! A generated gRPC client calls the router's services the same way over
//! `TestClient::grpc_channel()` (feature `grpc-client`; see the `grpc` module's "A client").
//! [`testing::TestServer`] runs the real server on 127.0.0.1 with an OS-chosen port for
//! end-to-end tests and shuts it down gracefully when dropped.
//!
//! Middleware is a [`Layer`]: its `before` sees each request's head before the handler (it
//! may attach typed values, [`Extensions`], that handlers read with
//! [`Request::extension`], or answer at once, e.g. 401), its `after` every answer, the
//! server's own 404, 405, OPTIONS, 501 and 413 included (declared, or a body that outgrew
//! the limit while it was read, and a malformed body's 400), and the 503 of a deferred
//! answer that did not come within `deferred_timeout` (whose `async` handler's future is
//! dropped then; a thread can ask [`Responder::is_cancelled`]).
//! [`Router::layer`] wraps a router, each call around what is there so far, so **the last
//! layer added is the outermost** (as in tower and axum): write
//! `.layer(ErrorRenderer(…)).layer(Cors…).layer(RequestId).layer(Trace)` so that `Trace` sees
//! every request, preflights included, and the bytes as sent. [`Router::merge`] adds a group
//! of routes with its own layers inside ([`Router::group`] makes one in place, [`Router::nest`] puts one below a prefix). Built in:
//! [`layers::Cors`], [`layers::RequestId`], [`layers::Trace`].
//!
//! Middleware that must wait is an [`Around`] layer ([`Router::around`]): an
//! `async fn(OwnedRequest, Next) -> impl IntoResponse` that runs code before and after
//! [`Next::run`], may answer without calling it, and may await anything on the worker's
//! tokio runtime. Every kind of route can be under one: sync and `async` handlers and
//! [`Router::deferred`] routes are served the deferred way (body read whole, then the
//! chain); streamed-body routes (`deferred_incoming`, `streaming`) and gRPC methods run the
//! chain on the request's head, the body held back (bounded) until the handler takes it,
//! and on a gRPC route a layer's HTTP answer becomes the gRPC status it means (401 →
//! UNAUTHENTICATED, trailers-only); a WebSocket route's chain runs on the handshake and ends
//! in its accept function, the layers seeing the 101 (over HTTP/2 the 200), and a layer's
//! 401 refuses the upgrade. Routes under none keep the sync path.
//! [`Router::route_layer`] puts a sync layer on the routes registered so far only (axum's
//! `route_layer`: never on the server's 404 or 405). A router's sync layers are outside all
//! async ones. A group (or a group of one route) has its own [`Router::timeout`] (the future
//! inside dropped, a 503 that the layers outside see, DEADLINE_EXCEEDED on a gRPC call; a
//! sync handler is not interrupted)
//! and [`Router::body_limit`] (instead of the site's `max_body_bytes`, larger or smaller).
//! A
//! router without layers runs none of their code. Answers the connection makes before a
//! request reaches the router (a malformed head's 400, 408, 414, 431) do not pass through
//! layers: no layer has seen that request.
//!
//! Handlers return anything [`IntoResponse`]: a [`Response`], text, [`Json`], `(status,
//! body)`, or a `Result` of two of them, so extraction composes with `?`. Extraction is
//! opt-in and typed, in either of two ways that answer alike. As a handler's arguments, as
//! in axum: [`handler`] makes a sync handler of a function such as `fn get_user(Path(id):
//! Path<u32>, State(db): State<Db>, Json(user): Json<NewUser>) -> impl IntoResponse`, and
//! [`handler_async`] an `async` one, each registered with the usual methods
//! (`.get("/users/{id}", handler(get_user))`), so every `|req| …` closure keeps its
//! inferred type; the extractors are [`Path`], [`Query`], [`Json`], [`Form`], [`State`],
//! [`Extension`], [`Worker`], [`HeaderMap`], [`Uri`], [`Method`], [`Version`], [`Bytes`],
//! `String` and your own ([`FromRequestParts`]; the last argument, which may read the body,
//! a [`FromRequest`]), and a wrong argument is a compile error saying what an argument may
//! be. Or with the accessors: [`Request::json`] (415, 400, 422), [`Request::form`],
//! [`Request::query_as`], [`Request::param_as`], [`Request::required_header`] (400), each
//! failing with a [`Rejection`] (the extractors fail with the same); [`ErrorRenderer`]
//! renders a router's rejections and the server's own error answers its way (JSON, say).
//! Shared state is what the handler closure captures, or the application's state
//! ([`Router::with_state`], read with [`Request::state`] in handlers and layers, or
//! [`State`]); per-request values are [`Extensions`] ([`Extension`]); a value made once per
//! worker runtime (a pooled client), and per [`testing::TestClient`], is
//! [`Router::with_worker_value`] ([`Worker`], [`Request::worker_value`]).
//!
//! A body produced over time is [`Response::stream`] (written from any thread through a
//! [`streaming::BodyWriter`]; [`sse`] makes an event stream of it). Trailer fields (gRPC's
//! `grpc-status`) follow the body with [`Response::trailer`] / [`Response::try_trailer`],
//! or [`streaming::BodyWriter::end_with_trailers`] for a streamed one: a HEADERS frame after
//! the last DATA over HTTP/2 and HTTP/3, a chunked body's trailer section over HTTP/1.1
//! (none to an HTTP/1.0 client); layers read them with [`Response::trailers`], and a name
//! that may not be a trailer (RFC 9110 §6.5.1) makes the answer a 500. A request body taken as
//! it arrives by a handler on another thread is [`Router::deferred_incoming`] (an
//! [`IncomingBody`], with backpressure). WebSocket routes are [`Router::ws`] (see
//! [`websocket`]), over HTTP/1.1 and HTTP/2 (RFC 8441).
//!
//! With the `tower` cargo feature, `tower` serves any tower `Service<http::Request<_>>` (an
//! axum `Router`) on the engine: `Router::service(prefix, svc, spawn)` mounts one,
//! `tower::router(svc, spawn)` serves one alone (see the module's docs). And
//! `Router::tower_layer(layer)` wraps native routes in a `tower::Layer` (tower-http's
//! compression, timeout, body limit, set-header, trace, auth): an async layer in all but its
//! trait, in the same order (the last added outermost, inside the router's sync layers),
//! around a `tower::NativeRoute` service made of the rest of the route's chain. Routes under
//! no tower layer pay nothing.
//!
//! With the `kv` cargo feature, `kv` is the cache-aside for handlers: a memory tier and an
//! optional shared Redis/Valkey or memcached tier, and `X-Cache` on the answer (`kv::aside`).
//!
//! TLS, HTTP/2, HTTP/3, ACME, brotli, gzip, basic auth, the reverse proxy and WebSocket are
//! cargo features, all on by default; a service that needs none of them takes the crate with
//! `default-features = false` and links none of their code. A [`Config`] that asks for a
//! feature the build lacks is refused by [`Server::bind`] with one line naming it ("built
//! without feature `tls`"); see [`features`].

/// The README's Rust examples, compiled and run with the other doctests (`cargo test
/// --doc`), so that they cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// docs/library.md's Rust examples (the library's guide, moved there from the README), compiled
/// and run with the other doctests (`cargo test --doc`), so that they cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/library.md")]
pub struct LibraryGuideDoctests;

/// The crate's own README (crates/server/README.md, what crates.io shows), compiled and run
/// with the other doctests. The two above read files outside the crate, which a packaged
/// crate lacks: they exist only under `cfg(doctest)`, which no build of the package sets.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct CrateReadmeDoctests;

pub mod access;
pub mod acme;
mod activation;
pub mod admin;
mod app;
#[cfg(feature = "basic-auth")]
pub mod basic_auth;
#[cfg(not(feature = "basic-auth"))]
#[path = "basic_auth_off.rs"]
mod basic_auth;
mod client_conns;
pub mod config;
pub mod config_view;
mod driver;
pub mod features;
#[cfg(feature = "grpc")]
pub mod grpc;
#[cfg(not(feature = "grpc"))]
#[path = "grpc/off.rs"]
mod grpc;
mod h1;
#[cfg(feature = "proxy")]
mod h1c;
#[cfg(feature = "http2")]
mod h2;
#[cfg(all(feature = "proxy", feature = "http2"))]
mod h2u;
#[cfg(feature = "http3")]
mod h3;
pub mod handoff;
#[cfg(feature = "jwt")]
pub mod jwt;
#[cfg(not(feature = "jwt"))]
#[path = "jwt_off.rs"]
pub mod jwt;
#[cfg(feature = "kv")]
pub mod kv;
mod log_limit;
pub mod node_info;
pub mod notify;
mod pool;
pub mod privsep;
mod process_metrics;
#[cfg(feature = "proxy")]
mod proxy;
#[cfg(not(feature = "proxy"))]
#[path = "proxy/off.rs"]
mod proxy;
pub mod ratelimit;
// fleet-wide rate limits
pub(crate) mod ratelimit_fleet;
pub(crate) mod ratelimit_lease;
pub(crate) mod ratelimit_metrics;
#[cfg(feature = "kv")]
pub(crate) mod ratelimit_redis;
pub mod realip;
pub mod runtime;
mod server;
mod start_error;
mod stats;
#[cfg(feature = "storage")]
pub mod storage;
mod sys;
pub mod testing;
#[cfg(all(feature = "tls", feature = "storage"))]
mod ticket_rotation;
#[cfg(feature = "tower")]
pub mod tower;
pub mod trace;
// tower layers on native routes (`Router::tower_layer`, `tower::NativeRoute`).
#[cfg(feature = "tower")]
mod tower_native;
#[cfg(feature = "websocket")]
mod ws;

#[cfg(feature = "websocket")]
pub use app::websocket;
#[cfg(not(feature = "websocket"))]
use app::websocket;
pub use app::{
    access_log, around, compress, deferred, extract, files, incoming, layer, layers, sse, streaming,
};
use app::{request, response, router};
pub use around::{Around, Next};
pub use driver::tls;
pub use extract::{ErrorRenderer, IntoResponse, Json, Rejection};
pub use incoming::IncomingBody;
pub use layer::{Extensions, Layer};

pub use access_log::LogTarget;
pub use app::deferred::{
    BoxFuture, OwnedRequest, Responder, Spawn, WorkerLocal, WorkerLocalFactory,
};
pub use app::redirect::RedirectError;
pub use config::{
    Config, FixedAnswer, HeaderRule, Io, Listen, ListenAddr, Redirect, Site, TlsConfig, UnixPerms,
};
pub use linerate_http1::{Method, Version};
pub use request::{MAX_PARAMS, Request};
pub use response::{Body, FileBody, InvalidHeader, Response, Trailers};
pub use router::{BodySink, DuplicateRoute, Router};
pub use runtime::{OnWorker, PerWorker, WorkerStart};
pub use server::{
    ControlHandle, Reloaded, Server, ShutdownHandle, allowed_cpus, reload_certificates,
    reload_ticket_keys,
};
pub use start_error::{Part, StartError};
pub use stats::{
    CLASSES, CONN_REFUSALS, DURATION_BUCKETS_US, KINDS, Metrics, PARSE_ERRORS, REFUSALS,
    SiteMetrics, Stats, StatsHandle, UPSTREAM_ERRORS, UpstreamMetrics,
};
// typed extractors, per-worker values
pub use app::extractors::{Extension, Form, FromRequest, FromRequestParts, Path, Query, State};
pub use app::handler::{Answer, AsyncHandler, Handler, handler, handler_async};
pub use app::worker_value::Worker;
pub use bytes::Bytes;
pub use http::{HeaderMap, Uri};

/// HTTP/2's named limits (each answered as RFC 9113 says: REFUSED_STREAM, or a GOAWAY with
/// ENHANCE_YOUR_CALM; see `h2/stream.rs`).
#[cfg(feature = "http2")]
pub mod http2 {
    pub use crate::h2::{
        MAX_BODY_STREAMS, MAX_CONCURRENT_STREAMS, MAX_CONTINUATIONS, MAX_CONTROL_PER_SEC,
        MAX_HEADER_BLOCK, MAX_RESETS_PER_SEC, MAX_TUNNEL_STREAMS, SMALL_BODY,
    };
}

/// The checks the fuzz targets in `fuzz/` run on this crate's state machines (not an API).
#[cfg(all(feature = "proxy", feature = "http2"))]
#[doc(hidden)]
pub mod fuzzing {
    /// A DNS server's answer to DNS-01's updates and queries (`acme/dns/fuzz.rs`).
    pub use crate::acme::dns::fuzz::check as dns_answer;
    /// The upstream HTTP/2 connection reading arbitrary server bytes (`h2u/fuzz.rs`).
    pub use crate::h2u::fuzz::check as h2u_frames;
    /// W3C Trace Context's readers and a request's ids (`trace/context.rs`).
    pub use crate::trace::context::fuzz_check as trace_context;
}

/// HTTP/3's named limits (RFC 9114, over QUIC).
#[cfg(feature = "http3")]
pub mod http3 {
    pub use crate::driver::quic::RETRY_ABOVE;
    pub use crate::h3::{
        MAX_BODY_STREAMS, MAX_CONCURRENT_STREAMS, MAX_FIELD_SECTION, MAX_UNI_STREAMS,
        QPACK_CAPACITY,
    };
}
