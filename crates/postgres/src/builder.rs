//! [`Builder`]: what a pool is made of (the URL, the driver, how many connections, the
//! application's statements) and the start: connections opened and statements prepared on a
//! tokio runtime, so that a database that is down, a URL that is wrong or a statement that
//! does not prepare is an error at start ([`ConnectError`]), never a surprise per request.
#![forbid(unsafe_code)]

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use crate::error::{ConnectError, PgOpenError};
use crate::pool::{Driver, Pool, RuntimeSet, Target};
use crate::statements::{Specs, StatementId};

/// Connections opened by [`Driver::Runtime`] when [`Builder::connections`] is not called.
pub const DEFAULT_RUNTIME_CONNECTIONS: usize = 4;

/// Connections [`Driver::Worker`] opens on the runtime at start, to check the database and the
/// statements (and to serve start-up work until the workers open theirs).
pub const WORKER_START_CONNECTIONS: usize = 1;

/// Sessions ([`Pool::session`]) open at once in each set (the pool's with [`Driver::Runtime`],
/// each worker's with [`Driver::Worker`]) when [`Builder::sessions`] is not called.
pub const DEFAULT_SESSIONS: usize = 4;

/// How long a request waits for a session while all are in use, when
/// [`Builder::session_wait`] is not called.
pub const DEFAULT_SESSION_WAIT: Duration = Duration::from_secs(5);

/// PostgreSQL's port when the URL names none.
const DEFAULT_PORT: u16 = 5432;

/// Makes a [`Pool`]: from [`Pool::builder`] or [`Builder::new`].
#[derive(Debug, Clone)]
pub struct Builder {
    url: String,
    driver: Driver,
    connections: Option<usize>,
    sessions: usize,
    session_wait: Duration,
    specs: Specs,
}

impl Builder {
    /// A pool of connections to `url` (a `postgres://` URL or a key=value string, as
    /// tokio-postgres reads them), with the runtime driver and
    /// [`DEFAULT_RUNTIME_CONNECTIONS`] until told otherwise.
    pub fn new(url: &str) -> Builder {
        Builder {
            url: url.to_string(),
            driver: Driver::Runtime,
            connections: None,
            sessions: DEFAULT_SESSIONS,
            session_wait: DEFAULT_SESSION_WAIT,
            specs: Specs::default(),
        }
    }

    /// Where the connections live ([`Driver`]).
    pub fn driver(&mut self, driver: Driver) -> &mut Builder {
        self.driver = driver;
        self
    }

    /// How many connections: with [`Driver::Runtime`] the pool's (at least one); with
    /// [`Driver::Worker`] all the workers' together, shared out equally, at least one each (0,
    /// the default there: one per worker).
    pub fn connections(&mut self, connections: usize) -> &mut Builder {
        self.connections = Some(connections);
        self
    }

    /// How many sessions ([`Pool::session`]: connections one request holds alone) may be open
    /// at once in each set: the pool's with [`Driver::Runtime`], each worker's with
    /// [`Driver::Worker`] (at least one; default [`DEFAULT_SESSIONS`]). They are opened when
    /// first needed, beside the shared connections, and kept.
    pub fn sessions(&mut self, sessions: usize) -> &mut Builder {
        self.sessions = sessions.max(1);
        self
    }

    /// How long a request waits for a session while all are in use, before
    /// [`Error::Busy`](crate::Error::Busy) (default [`DEFAULT_SESSION_WAIT`]).
    pub fn session_wait(&mut self, wait: Duration) -> &mut Builder {
        self.session_wait = wait;
        self
    }

    /// Registers `sql` as statement `name`, to be prepared on every connection when it opens
    /// (and again when it re-opens). The shared connections carry several requests'
    /// statements at once, so a statement that would open or end a transaction or leave state
    /// on the session (`BEGIN`, `SET`, `LISTEN`, cursors, temporary tables, session advisory
    /// locks, `set_config`) is refused at [`Builder::connect`]: run those on a
    /// [`Session`](crate::Session). The [`StatementId`] returned finds it on any connection of
    /// the pool ([`Conn::statement`](crate::Conn::statement)) with one index. Parameters are
    /// `$1`, `$2`…, their types inferred by the server. A name registered twice is refused at
    /// [`Builder::connect`].
    pub fn prepare(&mut self, name: &str, sql: &str) -> StatementId {
        self.specs.add(name, sql)
    }

    /// Registers each `(name, sql)` of `statements` as [`Builder::prepare`] does; their ids,
    /// in the same order.
    pub fn prepare_all<'a>(
        &mut self,
        statements: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Vec<StatementId> {
        statements
            .into_iter()
            .map(|(name, sql)| self.prepare(name, sql))
            .collect()
    }

    /// The id of the statement registered as `name`.
    pub fn statement_id(&self, name: &str) -> Option<StatementId> {
        self.specs.id(name)
    }

    /// Starts the pool, blocking on `runtime` (call it outside any async context). `runtime`
    /// must be a multi-thread runtime, which drives its I/O on threads of its own (a
    /// current-thread runtime's handle cannot: refused). With
    /// [`Driver::Runtime`] it opens every connection there, and the runtime goes on driving
    /// them: keep it running as long as the pool is used. With [`Driver::Worker`] it resolves
    /// the URL's hosts (TCP only) and opens [`WORKER_START_CONNECTIONS`] on the runtime, for
    /// start-up work and as a check; each worker opens its own when it starts
    /// ([`Pool::worker_start`]). Every connection prepares every registered statement.
    pub fn connect(&self, runtime: &tokio::runtime::Handle) -> Result<Pool, ConnectError> {
        if let Some(name) = self.specs.duplicate() {
            return Err(ConnectError::DuplicateStatement(name.to_string()));
        }
        if let Some((name, what)) = self.specs.session_effect() {
            return Err(ConnectError::SessionStatement {
                name: name.to_string(),
                what,
            });
        }
        let config: tokio_postgres::Config = self.url.parse().map_err(ConnectError::Url)?;
        let addrs = match self.driver {
            Driver::Runtime => None,
            Driver::Worker => Some(tcp_addrs(&config)?),
        };
        if runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread {
            return Err(ConnectError::CurrentThreadRuntime);
        }
        let target = Arc::new(Target {
            config,
            specs: self.specs.clone(),
            sessions: self.sessions,
            session_wait: self.session_wait,
            counters: Default::default(),
            session_outage: Default::default(),
        });
        let start_error = |e: PgOpenError| match e {
            PgOpenError::Connect(e) => ConnectError::Connect(e),
            PgOpenError::Prepare(i, error) => ConnectError::Prepare {
                name: target.specs.name(i).to_string(),
                error,
            },
        };
        match addrs {
            None => {
                let count = self
                    .connections
                    .unwrap_or(DEFAULT_RUNTIME_CONNECTIONS)
                    .max(1);
                let set = RuntimeSet::open(&target, count, runtime).map_err(start_error)?;
                Ok(Pool::runtime(count, target, set))
            }
            Some(addrs) => {
                let start = RuntimeSet::open(&target, WORKER_START_CONNECTIONS, runtime)
                    .map_err(start_error)?;
                let total = self.connections.unwrap_or(0);
                Ok(Pool::worker(total, target, start, addrs))
            }
        }
    }
}

/// The socket addresses of `config`'s hosts, resolved once (the worker driver connects with
/// its own sockets).
fn tcp_addrs(config: &tokio_postgres::Config) -> Result<Arc<[SocketAddr]>, ConnectError> {
    let ports = config.get_ports();
    let mut addrs = Vec::new();
    for (i, host) in config.get_hosts().iter().enumerate() {
        let port = ports
            .get(i)
            .or(ports.first())
            .copied()
            .unwrap_or(DEFAULT_PORT);
        match host {
            tokio_postgres::config::Host::Tcp(name) => {
                let found = (name.as_str(), port).to_socket_addrs().map_err(|error| {
                    ConnectError::Resolve {
                        host: name.clone(),
                        error,
                    }
                })?;
                addrs.extend(found);
            }
            _ => return Err(ConnectError::UnixSocket),
        }
    }
    if addrs.is_empty() {
        return Err(ConnectError::NoHost);
    }
    Ok(addrs.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_resolve_or_say_why_not() {
        for (url, want) in [
            ("postgres://u@127.0.0.1:6000/d", Ok(vec!["127.0.0.1:6000"])),
            ("postgres://u@127.0.0.1/d", Ok(vec!["127.0.0.1:5432"])),
            (
                "host=127.0.0.1,127.0.0.2 port=7000,7001 user=u",
                Ok(vec!["127.0.0.1:7000", "127.0.0.2:7001"]),
            ),
            (
                "host=127.0.0.1,127.0.0.2 port=7000 user=u",
                Ok(vec!["127.0.0.1:7000", "127.0.0.2:7000"]),
            ),
            (
                "host=/run/postgresql user=u",
                Err("the worker driver needs a TCP host"),
            ),
            ("user=u", Err("no host to connect to")),
        ] {
            let config: tokio_postgres::Config = url.parse().unwrap();
            let got = tcp_addrs(&config)
                .map(|a| a.iter().map(ToString::to_string).collect::<Vec<_>>())
                .map_err(|e| e.to_string());
            let want = want
                .map(|v| v.into_iter().map(String::from).collect::<Vec<_>>())
                .map_err(String::from);
            assert_eq!(got, want, "{url}");
        }
    }

    /// A start-error row: URL, driver, statements, how the error begins.
    type StartCase = (
        &'static str,
        Driver,
        &'static [(&'static str, &'static str)],
        &'static str,
    );

    #[test]
    fn start_errors_come_before_any_connection() {
        // Refused before anything is opened: the handle is a current-thread runtime's, which
        // could not drive a connection (and is refused itself, last).
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let cases: [StartCase; 6] = [
            (
                "postgres://u@127.0.0.1:1/d",
                Driver::Runtime,
                &[("a", "SELECT 1"), ("a", "SELECT 2")],
                "two statements are named \"a\"",
            ),
            // A lost write once: a BEGIN on a shared connection took in the
            // statements other requests pipelined behind it.
            (
                "postgres://u@127.0.0.1:1/d",
                Driver::Worker,
                &[("open", "BEGIN"), ("add", "INSERT INTO t VALUES ($1)")],
                "statement \"open\" uses BEGIN",
            ),
            (
                "postgres://u@127.0.0.1:1/d",
                Driver::Runtime,
                &[("lock", "SELECT pg_advisory_lock($1)")],
                "statement \"lock\" uses pg_advisory_lock",
            ),
            (
                "postgres://u@127.0.0.1:1/d?bogus=1",
                Driver::Runtime,
                &[],
                "invalid URL",
            ),
            (
                "host=/run/postgresql user=u",
                Driver::Worker,
                &[],
                "the worker driver needs a TCP host",
            ),
            (
                "postgres://u@127.0.0.1:1/d",
                Driver::Runtime,
                &[],
                "the connections need a multi-thread tokio runtime",
            ),
        ];
        for (url, driver, statements, want) in cases {
            let mut b = Builder::new(url);
            b.driver(driver);
            b.prepare_all(statements.iter().copied());
            let err = b.connect(runtime.handle()).err().expect(url).to_string();
            assert!(err.starts_with(want), "{url}: {err}");
        }
    }
}
