//! linerate-server: a thread-per-core HTTP/1.1 server and the handler API.
//!
//! One pinned worker per CPU, each with its own SO_REUSEPORT listener, epoll loop, buffers
//! and Date cache; requests are parsed by the strict sans-I/O `linerate-http1` crate. Build a
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
//! Unknown paths get 404, known paths with another method 405 with `Allow`, HEAD is served
//! by GET routes without the body. Streaming request bodies use [`Router::streaming`] with a
//! [`BodySink`]. Limits and timeouts are in [`Config`] (see [`config`] for the defaults).

pub mod access_log;
pub mod compress;
pub mod config;
mod conn;
pub mod demo;
pub mod files;
mod poller;
mod pool;
mod request;
mod response;
mod router;
mod server;
mod sys;
pub mod tls;
mod worker;

pub use access_log::LogTarget;
pub use config::{Config, TlsConfig};
pub use linerate_http1::{Method, Version};
pub use request::{MAX_PARAMS, Request};
pub use response::{Body, InvalidHeader, Response};
pub use router::{BodySink, Router};
pub use server::{Server, ShutdownHandle, allowed_cpus};
