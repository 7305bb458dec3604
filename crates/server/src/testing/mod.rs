//! Testing a [`Router`](crate::Router) without a socket, and with one.
//!
//! [`TestClient`] serves each request in process, through the server's own machinery: the
//! request goes out as real bytes (an HTTP/1.1 request, or the HTTP/2 preface, SETTINGS and
//! HEADERS/DATA frames), the same connection state machines the workers run (`h1`, `h2`)
//! read them and call the same application dispatch (`app::ConnApp`), and the response is
//! read back from the bytes the connection transmits — so a test sees exactly what a client
//! would, the server's own 404, 405, 413 and 503 included. Deferred and `async` handlers
//! answer through a worker inbox as on a worker, within the configured deferred timeout.
//! [`TestServer`] runs the real server on 127.0.0.1 with an OS-chosen port for end-to-end
//! tests, and stops it gracefully when dropped.
//!
//! Files: `client` (the request builder), `engine` (the in-process worker: the driver's role
//! without sockets), `wire/` (the client's side of each protocol: request bytes out, response
//! read back), `response`, `error`, `server` (the real server on a loopback port).
//!
//! ```
//! use linerate_server::{Response, Router};
//! use linerate_server::testing::TestClient;
//!
//! let router = Router::new().get("/users/{id}", |req| {
//!     let id = req.param("id").unwrap_or("?");
//!     Response::text_owned(format!("user {id}"))
//! });
//! let client = TestClient::new(router);
//! let res = client.get("/users/1").header("authorization", "Bearer x").send();
//! assert_eq!((res.status(), res.text().as_str()), (200, "user 1"));
//! // The same request over HTTP/2 framing; the server's own 404.
//! assert_eq!(client.get("/users/1").http2().send().text(), "user 1");
//! assert_eq!(client.get("/nope").send().status(), 404);
//! ```
#![forbid(unsafe_code)]

mod client;
mod engine;
mod error;
#[cfg(feature = "grpc-client")]
pub(crate) mod grpc_channel;
mod response;
mod server;
mod wire;

#[cfg(test)]
mod tests;

pub use client::{EXCHANGE_TIMEOUT, Protocol, TestClient, TestRequest};
pub use error::TestError;
pub use response::TestResponse;
pub use server::{TEST_DRAIN_TIMEOUT, TEST_LINGER_TIMEOUT, TestServer};
