//! The crate's errors: [`Unavailable`] (no open connection: answer at once, never wait),
//! [`Error`] (a request's: unavailable, or what the database said), [`ConnectError`] (why a
//! pool could not start), and [`describe`], which puts the server's own message into a
//! tokio-postgres error's text. Each says what the caller does: a request answers "unavailable"
//! (a 503, say); a start-up error stops the start.
#![forbid(unsafe_code)]

use std::fmt;

/// No open connection: the database is down or unreachable, and a try to reconnect is under
/// way in the background. Returned at once by [`Pool::get`](crate::Pool::get): a request
/// never waits on a database that is down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unavailable;

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no database connection is open")
    }
}

impl std::error::Error for Unavailable {}

/// Why a request's database work failed; both `?` from [`Pool::get`](crate::Pool::get) and
/// from a query land here.
#[derive(Debug)]
pub enum Error {
    /// No connection is open ([`Unavailable`]).
    Unavailable,
    /// Every session ([`Pool::session`](crate::Pool::session)) stayed in use for as long as
    /// [`Builder::session_wait`](crate::Builder::session_wait): answer "busy" (a 503).
    Busy,
    /// The database answered with an error, or the connection broke mid-query.
    Query(tokio_postgres::Error),
    /// A channel ([`Pool::listen`](crate::Pool::listen)) or savepoint
    /// ([`Transaction::savepoint`](crate::Transaction::savepoint)) name PostgreSQL would not
    /// keep as given: nothing was sent. A mistake in the caller (a 500), never the database's.
    BadName {
        /// The name as given.
        name: String,
        /// Why it is refused: empty, longer than
        /// [`MAX_NAME_BYTES`](crate::MAX_NAME_BYTES), or holding a NUL.
        why: &'static str,
    },
}

impl Error {
    /// True for [`Error::Unavailable`].
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Error::Unavailable)
    }
}

impl From<Unavailable> for Error {
    fn from(_: Unavailable) -> Error {
        Error::Unavailable
    }
}

impl From<tokio_postgres::Error> for Error {
    fn from(e: tokio_postgres::Error) -> Error {
        Error::Query(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Unavailable => Unavailable.fmt(f),
            Error::Busy => f.write_str("every database session is in use"),
            Error::Query(e) => f.write_str(&describe(e)),
            Error::BadName { name, why } => write!(f, "name {name:?} refused: {why}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Unavailable | Error::Busy | Error::BadName { .. } => None,
            Error::Query(e) => Some(e),
        }
    }
}

/// Why [`Builder::connect`](crate::Builder::connect) could not start the pool. The URL's
/// password is in none of these messages.
#[derive(Debug)]
pub enum ConnectError {
    /// The URL is not a PostgreSQL connection string tokio-postgres accepts.
    Url(tokio_postgres::Error),
    /// The worker driver resolves the URL's hosts at start; this one did not resolve.
    Resolve {
        /// The host as the URL names it.
        host: String,
        /// What the resolver said.
        error: std::io::Error,
    },
    /// The worker driver speaks TCP only, and the URL names a Unix socket (use
    /// [`Driver::Runtime`](crate::Driver::Runtime) for one).
    UnixSocket,
    /// The URL names no host.
    NoHost,
    /// Two statements were registered under this name.
    DuplicateStatement(String),
    /// A statement registered for the shared connections would open or end a transaction,
    /// or leave state on the session: it belongs on a [`Session`](crate::Session).
    SessionStatement {
        /// The statement's name.
        name: String,
        /// What it uses (`BEGIN`, `SET`, `pg_advisory_lock`…).
        what: &'static str,
    },
    /// The runtime given is a current-thread one, whose handle cannot drive connections (they
    /// would never open): give a multi-thread runtime.
    CurrentThreadRuntime,
    /// Connecting (or logging in) failed: the database is down, unreachable or refuses.
    Connect(tokio_postgres::Error),
    /// The database refused to prepare the statement registered under `name`.
    Prepare {
        /// The statement's name.
        name: String,
        /// What the database said.
        error: tokio_postgres::Error,
    },
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::Url(e) => write!(f, "invalid URL: {e}"),
            ConnectError::Resolve { host, error } => write!(f, "cannot resolve {host}: {error}"),
            ConnectError::UnixSocket => f.write_str("the worker driver needs a TCP host"),
            ConnectError::NoHost => f.write_str("no host to connect to"),
            ConnectError::DuplicateStatement(name) => {
                write!(f, "two statements are named {name:?}")
            }
            ConnectError::SessionStatement { name, what } => write!(
                f,
                "statement {name:?} uses {what}, which would reach other requests' statements \
                 on a shared connection: run it on a session (Pool::session)"
            ),
            ConnectError::CurrentThreadRuntime => {
                f.write_str("the connections need a multi-thread tokio runtime")
            }
            ConnectError::Connect(e) => f.write_str(&describe(e)),
            ConnectError::Prepare { name, error } => {
                write!(f, "statement {name:?}: {}", describe(error))
            }
        }
    }
}

impl std::error::Error for ConnectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConnectError::Url(e) | ConnectError::Connect(e) => Some(e),
            ConnectError::Prepare { error, .. } => Some(error),
            ConnectError::Resolve { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// Why a connection over tokio-postgres's own socket (the runtime driver's) could not be
/// opened: on the start-up path it becomes a [`ConnectError`]; on the reconnect path it is
/// logged once per outage.
#[derive(Debug)]
pub(crate) enum PgOpenError {
    /// Connecting or logging in failed.
    Connect(tokio_postgres::Error),
    /// A statement did not prepare (its index among the registered ones).
    Prepare(usize, tokio_postgres::Error),
}

impl fmt::Display for PgOpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PgOpenError::Connect(e) | PgOpenError::Prepare(_, e) => f.write_str(&describe(e)),
        }
    }
}

impl From<tokio_postgres::Error> for PgOpenError {
    fn from(e: tokio_postgres::Error) -> PgOpenError {
        PgOpenError::Connect(e)
    }
}

/// Why a worker's connection (over its own non-blocking socket) could not be opened; logged
/// once per outage.
#[derive(Debug)]
pub(crate) enum OpenError {
    /// The TCP connect on the worker's runtime failed.
    Io(std::io::Error),
    /// Logging in or preparing failed.
    Pg(PgOpenError),
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Io(e) => write!(f, "{e}"),
            OpenError::Pg(e) => e.fmt(f),
        }
    }
}

impl From<std::io::Error> for OpenError {
    fn from(e: std::io::Error) -> OpenError {
        OpenError::Io(e)
    }
}

impl From<PgOpenError> for OpenError {
    fn from(e: PgOpenError) -> OpenError {
        OpenError::Pg(e)
    }
}

impl From<tokio_postgres::Error> for OpenError {
    fn from(e: tokio_postgres::Error) -> OpenError {
        OpenError::Pg(PgOpenError::Connect(e))
    }
}

/// What went wrong, with the database's own message where it sent one (tokio-postgres's
/// `Display` alone says only "db error").
pub fn describe(e: &tokio_postgres::Error) -> String {
    match (e.as_db_error(), std::error::Error::source(e)) {
        (Some(db), _) => format!("{}: {}", db.severity(), db.message()),
        (None, Some(cause)) => format!("{e}: {cause}"),
        (None, None) => e.to_string(),
    }
}
