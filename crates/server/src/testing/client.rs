//! The test client's public face: [`TestClient`] (one in-process server, its protocol and time
//! limit) and [`TestRequest`] (method, target, fields, body), sent through the engine.
//!
//! Owns building requests and refusing the ones that would not frame (a field with CR or LF,
//! a method without a token) before any byte is sent; what the server makes of a request that
//! frames — a bad target, a missing route, a body over the limit — is the server's answer.
#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use linerate_http1::{Method, is_valid_field_name, is_valid_field_value};
use serde::Serialize;

use super::engine::Engine;
use super::error::TestError;
use super::response::TestResponse;
use super::wire::{H1Wire, Outgoing, Wire};
use crate::config::Config;
use crate::router::Router;
use crate::start_error::StartError;

/// Longest one exchange may take by default before [`TestError::Timeout`]: above the default
/// `Config::deferred_timeout` (30 s), whose 503 comes first.
pub const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(60);

/// Which protocol a test request speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// HTTP/1.1, one request per connection.
    #[default]
    Http1,
    /// HTTP/2 with prior knowledge (as on an h2c listener), one stream per connection. With
    /// the `http2` cargo feature.
    #[cfg(feature = "http2")]
    Http2,
}

/// Calls a [`Router`] in process, through the server's connection state machines and
/// application dispatch, with no socket.
///
/// Each request is served on a new connection: its bytes go in, the response is read back from
/// the bytes the connection sends. Deferred and `async` handlers are waited for (at most the
/// configured deferred timeout, then the server's 503). The client has a worker's own tokio
/// runtime, which runs [`OnWorker`](crate::OnWorker)'s futures on the test's thread while it
/// waits, as a worker does; another runtime a handler spawns on must run meanwhile (a
/// multi-threaded one, not the test's own current-thread runtime). The client holds what a worker holds on its own thread, so it is neither `Send`
/// nor `Sync`: make one per test thread (it costs what the routes and sites cost to build).
pub struct TestClient {
    engine: Rc<RefCell<Engine>>,
    protocol: Protocol,
    timeout: Duration,
}

impl std::fmt::Debug for TestClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestClient")
            .field("protocol", &self.protocol)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl TestClient {
    /// A client of `router` served with the default [`Config`], over HTTP/1.1.
    ///
    /// # Panics
    /// If `router` has a method and pattern registered twice (the error
    /// [`TestClient::with_config`] returns).
    pub fn new(router: Router) -> TestClient {
        TestClient::with_config(Config::default(), router)
            .unwrap_or_else(|e| panic!("TestClient::new: {e}"))
    }

    /// A client of `router` served with `config`: its limits, timeouts, sites (chosen by the
    /// request's `Host`), static mounts, redirects and compression. What needs a listener or
    /// another thread is not there: TLS, listener redirects to HTTPS, PROXY headers, access
    /// logs, metrics counters and proxy mounts (a request for one is
    /// [`TestError::Proxied`]). Errors are the server's start errors (a missing root, a bad
    /// site, a route registered twice).
    pub fn with_config(config: Config, router: Router) -> Result<TestClient, StartError> {
        Ok(TestClient {
            engine: Rc::new(RefCell::new(Engine::new(&config, router)?)),
            protocol: Protocol::Http1,
            timeout: EXCHANGE_TIMEOUT,
        })
    }

    /// Runs `start` as each worker runs it before it serves
    /// ([`Server::with_worker_start`](crate::Server::with_worker_start)): on this thread, in
    /// the client's runtime, as worker 0 — so a library's worker-side set-up (linerate-postgres's
    /// worker driver: `Pool::worker_start`) serves the client's handlers as it serves a worker's.
    pub fn with_worker_start(self, start: crate::WorkerStart) -> std::io::Result<TestClient> {
        let rt = self.engine.borrow().runtime();
        rt.serving(|| start(0))?;
        Ok(self)
    }

    /// Sends requests over HTTP/2 framing (`protocol(Protocol::Http2)`).
    #[cfg(feature = "http2")]
    pub fn http2(self) -> TestClient {
        self.protocol(Protocol::Http2)
    }

    /// Sets the protocol requests use unless they choose their own.
    pub fn protocol(mut self, protocol: Protocol) -> TestClient {
        self.protocol = protocol;
        self
    }

    /// Sets how long one exchange may take ([`EXCHANGE_TIMEOUT`] by default). The server's
    /// own timeouts (a deferred answer's among them) still apply within it.
    pub fn timeout(mut self, limit: Duration) -> TestClient {
        self.timeout = limit;
        self
    }

    /// A request with `method` for `target` (a path with its query, `*`, or an absolute URI).
    pub fn request(&self, method: Method, target: &str) -> TestRequest<'_> {
        TestRequest {
            client: self,
            method,
            target: target.to_string(),
            headers: Vec::new(),
            body: Vec::new(),
            protocol: self.protocol,
            error: None,
        }
    }

    /// A GET request.
    pub fn get(&self, target: &str) -> TestRequest<'_> {
        self.request(Method::Get, target)
    }

    /// A POST request.
    pub fn post(&self, target: &str) -> TestRequest<'_> {
        self.request(Method::Post, target)
    }

    /// A PUT request.
    pub fn put(&self, target: &str) -> TestRequest<'_> {
        self.request(Method::Put, target)
    }

    /// A DELETE request.
    pub fn delete(&self, target: &str) -> TestRequest<'_> {
        self.request(Method::Delete, target)
    }

    /// A PATCH request.
    pub fn patch(&self, target: &str) -> TestRequest<'_> {
        self.request(Method::Patch, target)
    }

    /// A HEAD request.
    pub fn head(&self, target: &str) -> TestRequest<'_> {
        self.request(Method::Head, target)
    }

    /// An OPTIONS request.
    pub fn options(&self, target: &str) -> TestRequest<'_> {
        self.request(Method::Options, target)
    }
}

/// A request being built; [`TestRequest::send`] serves it.
#[must_use = "a request does nothing until it is sent"]
pub struct TestRequest<'c> {
    client: &'c TestClient,
    method: Method,
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    protocol: Protocol,
    /// A builder step that failed ([`TestRequest::json`]), reported by `send`.
    error: Option<TestError>,
}

impl std::fmt::Debug for TestRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestRequest")
            .field("method", &self.method)
            .field("target", &self.target)
            .field("headers", &self.headers)
            .field("body_len", &self.body.len())
            .field("protocol", &self.protocol)
            .finish()
    }
}

impl TestRequest<'_> {
    /// Adds a field. `Host` sets the authority (`localhost` without one); `Content-Length`
    /// is added for a body unless given.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// Sets the body to `value` as JSON and `Content-Type` to `application/json` (replacing
    /// one given before).
    pub fn json<T: Serialize + ?Sized>(mut self, value: &T) -> Self {
        match serde_json::to_vec(value) {
            Ok(body) => {
                self.headers
                    .retain(|(n, _)| !n.eq_ignore_ascii_case("content-type"));
                self.headers
                    .push(("content-type".into(), "application/json".into()));
                self.body = body;
            }
            Err(e) => self.error = Some(TestError::Json(e)),
        }
        self
    }

    /// Sends this request over `protocol` whatever the client's is.
    pub fn protocol(mut self, protocol: Protocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// Sends this request over HTTP/2 framing.
    #[cfg(feature = "http2")]
    pub fn http2(self) -> Self {
        self.protocol(Protocol::Http2)
    }

    /// Serves the request and returns the response.
    ///
    /// # Panics
    /// Where [`TestRequest::try_send`] returns an error, with its message: a test fails there.
    pub fn send(self) -> TestResponse {
        let what = format!("{} {}", self.method.as_str(), self.target);
        self.try_send()
            .unwrap_or_else(|e| panic!("test request {what}: {e}"))
    }

    /// Serves the request; an error says why no response came (the server's own error
    /// statuses are responses, not errors).
    pub fn try_send(self) -> Result<TestResponse, TestError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let method = self.method.as_str();
        if method.is_empty() {
            return Err(TestError::NoMethodToken);
        }
        if let Some((name, _)) = self.headers.iter().find(|(n, v)| {
            !is_valid_field_name(n.as_bytes()) || !is_valid_field_value(v.as_bytes())
        }) {
            return Err(TestError::InvalidHeader(name.clone()));
        }
        let req = Outgoing {
            method,
            target: &self.target,
            headers: &self.headers,
            body: &self.body,
        };
        let mut wire: Box<dyn Wire> = match self.protocol {
            Protocol::Http1 => Box::new(H1Wire::new(&req)),
            #[cfg(feature = "http2")]
            Protocol::Http2 => Box::new(super::wire::H2Wire::new(&req)),
        };
        let client = self.client;
        client
            .engine
            .borrow_mut()
            .exchange(self.protocol, &mut *wire, client.timeout)
    }
}

// TestClient calls gRPC methods in process
#[cfg(feature = "grpc-client")]
impl TestClient {
    /// A gRPC channel to this client's router: a generated client over it
    /// (`GreeterClient::new(test_client.grpc_channel())`) has each call served in process
    /// over HTTP/2 framing, through the same connection state machine, routes and layers as
    /// [`TestClient::http2`]'s requests. A call's request stream is read to its end before
    /// the call is served (a bidirectional call whose requests wait on its answers needs a
    /// real server: [`TestServer`](super::TestServer)). Calls are served on this thread, while
    /// their future is polled: drive them with [`TestClient::block_on`] (or another executor
    /// on this thread; not inside a tokio runtime, whose `block_on` the client's own
    /// runtime cannot nest in).
    pub fn grpc_channel(&self) -> crate::grpc::client::Channel {
        super::grpc_channel::channel(&self.engine, self.timeout)
    }

    /// Runs `future` (a call over [`TestClient::grpc_channel`]) to its end on this thread.
    pub fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        super::grpc_channel::block_on(future)
    }
}
