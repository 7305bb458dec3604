//! linerate-postgres: PostgreSQL for linerate handlers. A pool of tokio-postgres connections
//! with the application's own prepared statements, driven either on a tokio runtime beside the
//! HTTP workers or by each worker's own event loop, brought back with backoff when the
//! database goes away, and never waited on while it is gone.
//!
//! - **Statements**: register each with [`Builder::prepare`] (a name and its SQL); the
//!   [`StatementId`] it returns finds the statement on any connection with one index, so the
//!   request path neither hashes nor locks. Every connection prepares them all when it opens,
//!   and again when it re-opens.
//! - **Drivers** ([`Driver`]): `Runtime`, one set of connections on a tokio runtime shared by
//!   the workers; `Worker`, a set per HTTP worker whose sockets the worker's own loop watches
//!   (opened by [`Pool::worker_start`]), so a query never leaves the worker's thread.
//! - **Pipelining**: [`Pool::get`] hands out the connections round-robin; several requests
//!   hold one at once and their queries are in flight together on it.
//! - **Sessions**: [`Pool::session`] hands out a connection one request holds alone, for a
//!   transaction ([`Session::transaction`]), session state or a one-off statement. The shared
//!   connections never carry those: they give out no client, and a registered statement that
//!   would open a transaction or set session state is refused at start. Each set (the pool's
//!   with `Runtime`, each worker's with `Worker`) keeps at most [`Builder::sessions`] of them
//!   (default [`DEFAULT_SESSIONS`]), opened when first needed and kept open, idle, for the next
//!   request; so a worker holds its share of the shared connections plus up to that many.
//!   When all are in use a request waits its turn (first come, first served) at most
//!   [`Builder::session_wait`] (default [`DEFAULT_SESSION_WAIT`]), then gets [`Error::Busy`]
//!   (answer 503); a returned session runs [`RESET`] before the next request gets it.
//! - **Transactions**: [`Pool::transaction`] runs an async closure on a session of its own:
//!   `COMMIT` when it returns `Ok` (the value comes back once the commit is acknowledged),
//!   `ROLLBACK` when it returns `Err` or panics (the panic then goes on), and a rollback by the
//!   session's reset when the request's future is dropped (the client gone). Isolation level,
//!   read-only, deferrable: [`Session::build_transaction`] then [`TransactionBuilder::run`].
//!   Savepoints: [`Transaction::savepoint`], rolled back to when dropped, released on commit.
//! - **Notifications**: [`Pool::listen`] gives a [`Listener`], a stream of [`Notice`]s on a
//!   connection of its own (neither a session nor a shared one), re-listening after a loss
//!   and marking where some may have been missed.
//! - **Metrics**: [`Pool::metrics`]: sessions in use and waited for, connections open,
//!   reconnects, busy refusals; atomics, nothing counted on the request path.
//! - **Outages**: a lost connection is re-opened in the background (waits from
//!   [`FIRST_RETRY`] doubling to [`MAX_RETRY`]); meanwhile [`Pool::get`] answers
//!   [`Unavailable`] at once when no connection is open.
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use linerate_postgres::{Driver, Error, Pool};
//! use linerate_server::{Config, OwnedRequest, Response, Router, Server};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // The runtime opens the connections; with the runtime driver it also runs the queries.
//! let runtime = tokio::runtime::Builder::new_multi_thread()
//!     .worker_threads(1)
//!     .enable_all()
//!     .build()?;
//! let mut builder = Pool::builder("postgres://app:secret@127.0.0.1:5432/app");
//! builder.driver(Driver::Worker);
//! let user_name = builder.prepare("user_name", "SELECT name FROM users WHERE id = $1");
//! let pool = Arc::new(builder.connect(runtime.handle())?);
//!
//! let db = pool.clone();
//! let router = Router::new().get_async("/users/{id}", pool.spawner(), move |req: OwnedRequest| {
//!     let db = db.clone();
//!     let id: Option<i32> = req.param("id").and_then(|v| v.parse().ok());
//!     async move {
//!         let Some(id) = id else { return Response::text("no such user\n").status(404) };
//!         let found = async {
//!             let conn = db.get()?; // Unavailable at once while the database is down
//!             Ok::<_, Error>(conn.query_opt(user_name, &[&id]).await?)
//!         };
//!         match found.await {
//!             Ok(Some(row)) => Response::text_owned(row.get::<_, String>(0)),
//!             Ok(None) => Response::text("no such user\n").status(404),
//!             Err(_) => Response::text("database unavailable\n").status(503),
//!         }
//!     }
//! });
//! let config = Config { addr: "127.0.0.1:0".parse()?, ..Config::default() };
//! let mut server = Server::bind(config, router)?;
//! if let Some(start) = pool.worker_start(server.workers(), Duration::from_secs(5)) {
//!     server = server.with_worker_start(start);
//! }
//! server.run_until_signal()?;
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

/// The README's examples, compiled and run with the other doctests (`cargo test --doc`), so
/// that they cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

mod builder;
mod conn;
mod error;
mod listen;
mod metrics;
mod names;
mod notices;
mod pool;
mod reconnect;
mod session;
mod shared_sql;
mod statements;

pub use builder::{
    Builder, DEFAULT_RUNTIME_CONNECTIONS, DEFAULT_SESSION_WAIT, DEFAULT_SESSIONS,
    WORKER_START_CONNECTIONS,
};
pub use conn::Conn;
pub use error::{ConnectError, Error, Unavailable, describe};
pub use listen::{Listener, Notice};
pub use metrics::Metrics;
pub use names::MAX_NAME_BYTES;
pub use notices::LISTEN_BUFFER;
pub use pool::{Driver, Pool, Spawner};
pub use reconnect::{FIRST_RETRY, MAX_RETRY};
pub use session::{RESET, Session, Transaction, TransactionBuilder};
pub use statements::StatementId;
/// The tokio-postgres types a user of [`Conn`] meets: rows, parameters, the client.
pub use tokio_postgres;
